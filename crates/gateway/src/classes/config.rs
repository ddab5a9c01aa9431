//! The `[classes]` section of the gateway config: the classes (best first) with their weights and
//! shares, the class of a key with no entitlement, and how the nodes serve the classes. Owns the
//! section's defaults and validation; must not know the per-request rules (`resolve`).

use serde::{Deserialize, Serialize};

use super::{ClassScheduling, MAX_CLASSES};

/// How far the shares' sum may exceed 1 before it is refused (decimal fractions in TOML, such as
/// 0.7 + 0.2 + 0.1, do not add up to 1 exactly in binary).
const SHARE_SUM_SLACK: f64 = 1e-9;

/// The latency classes a gateway runs. The default, one class served first come first served, is
/// the behaviour of a gateway without classes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassesConfig {
    /// The classes, best first: the first is class 1. One to eight, with unique names.
    pub classes: Vec<ClassSpec>,
    /// The class (1-based) of an access key with no entitlement in the metadata store's table or in
    /// its credential entry. Default 1.
    pub default_class: u8,
    /// What the storage nodes do with the classes. Default `fcfs`: one queue, arrival order, as
    /// without classes. Every gateway of a cluster pushes its own to the nodes: keep them equal.
    pub scheduling: Scheduling,
}

impl Default for ClassesConfig {
    fn default() -> Self {
        ClassesConfig {
            classes: vec![ClassSpec { name: "standard".into(), weight: 1.0, share: None }],
            default_class: 1,
            scheduling: Scheduling::Fcfs,
        }
    }
}

/// One class.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    /// Its name, shown beside its number (`gold`).
    pub name: String,
    /// Its weight under `scheduling = "weighted"` (the paper's C_d): a node shares its service
    /// among waiting classes in proportion to their weights. Positive; default 1.
    #[serde(default = "default_weight")]
    pub weight: f64,
    /// Its share of each node's service rate under `scheduling = "reserved"` (the paper's static
    /// reservation), in (0, 1]; the shares of all classes sum to at most 1. Required by `reserved`,
    /// optional otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
}

fn default_weight() -> f64 {
    1.0
}

/// What the storage nodes do with the classes of their tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheduling {
    /// One queue in arrival order whatever the class (the nodes' behaviour without classes).
    #[default]
    Fcfs,
    /// Each class served at its reserved share of the node's rate, whether or not the others wait.
    Reserved,
    /// The node's service shared among the classes that wait, in proportion to their weights.
    Weighted,
}

impl Scheduling {
    /// The mode's name, as in the config file.
    pub fn name(self) -> &'static str {
        match self {
            Scheduling::Fcfs => "fcfs",
            Scheduling::Reserved => "reserved",
            Scheduling::Weighted => "weighted",
        }
    }
}

impl ClassesConfig {
    /// How many classes run (1 to 8 once validated).
    pub fn count(&self) -> u8 {
        u8::try_from(self.classes.len()).unwrap_or(u8::MAX)
    }

    /// Checks the section; the error names the field and the rule it breaks.
    pub fn validate(&self) -> Result<(), String> {
        let count = self.classes.len();
        if !(1..=MAX_CLASSES).contains(&count) {
            return Err(format!("classes: {count} classes configured; a gateway runs 1 to {MAX_CLASSES}"));
        }
        for (index, class) in self.classes.iter().enumerate() {
            check_class(index + 1, class)?;
            if self.classes[..index].iter().any(|earlier| earlier.name == class.name) {
                return Err(format!("classes: the name {:?} is used twice; names must be unique", class.name));
            }
        }
        check_shares(&self.classes, self.scheduling)?;
        if !(1..=self.count()).contains(&self.default_class) {
            return Err(format!("classes: default_class is {}; it must be 1 to {count}", self.default_class));
        }
        Ok(())
    }

    /// Whether `class` (1-based) is one this gateway runs.
    pub fn runs(&self, class: u8) -> bool {
        (1..=self.count()).contains(&class)
    }

    /// What the storage nodes are told to do with the classes.
    pub fn node_scheduling(&self) -> ClassScheduling {
        match self.scheduling {
            Scheduling::Fcfs => ClassScheduling::Fcfs,
            Scheduling::Weighted => ClassScheduling::WeightedSharing { weights: self.weights() },
            Scheduling::Reserved => ClassScheduling::Reserved { shares: self.shares() },
        }
    }

    /// Every class's weight, best first.
    pub fn weights(&self) -> Vec<f64> {
        self.classes.iter().map(|class| class.weight).collect()
    }

    /// Every class's share, best first (0 for a class without one, which only `reserved` refuses).
    pub fn shares(&self) -> Vec<f64> {
        self.classes.iter().map(|class| class.share.unwrap_or(0.0)).collect()
    }
}

/// Class `number`'s own fields: a name, a positive finite weight, a share in (0, 1].
fn check_class(number: usize, class: &ClassSpec) -> Result<(), String> {
    if class.name.trim().is_empty() {
        return Err(format!("classes: class {number} needs a name"));
    }
    if !(class.weight.is_finite() && class.weight > 0.0) {
        return Err(format!(
            "classes: class {number} ({}) has weight {}; it must be above 0",
            class.name, class.weight
        ));
    }
    if let Some(share) = class.share
        && !(share > 0.0 && share <= 1.0)
    {
        return Err(format!("classes: class {number} ({}) has share {share}; it must be in (0, 1]", class.name));
    }
    Ok(())
}

/// The shares together: at most 1 in all, and one per class under `reserved`.
fn check_shares(classes: &[ClassSpec], scheduling: Scheduling) -> Result<(), String> {
    let sum: f64 = classes.iter().filter_map(|class| class.share).sum();
    if sum > 1.0 + SHARE_SUM_SLACK {
        return Err(format!("classes: the shares sum to {sum}; they must sum to at most 1"));
    }
    if scheduling == Scheduling::Reserved
        && let Some(class) = classes.iter().find(|class| class.share.is_none())
    {
        return Err(format!(
            "classes: scheduling = \"reserved\" needs a share for every class; {} has none",
            class.name
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, weight: f64, share: Option<f64>) -> ClassSpec {
        ClassSpec { name: name.into(), weight, share }
    }

    fn two(scheduling: Scheduling) -> ClassesConfig {
        ClassesConfig {
            classes: vec![class("gold", 1.0, Some(0.7)), class("silver", 0.4, Some(0.3))],
            default_class: 1,
            scheduling,
        }
    }

    fn refusal(config: ClassesConfig) -> String {
        config.validate().expect_err("refused")
    }

    #[test]
    fn the_default_is_one_fcfs_class() {
        let config = ClassesConfig::default();
        assert_eq!(config.validate(), Ok(()));
        assert_eq!((config.count(), config.default_class, config.scheduling), (1, 1, Scheduling::Fcfs));
    }

    #[test]
    fn the_section_parses_from_toml() {
        let text = r#"
            classes = [{ name = "gold", weight = 1.0, share = 0.7 }, { name = "silver", weight = 0.4, share = 0.3 }]
            default_class = 2
            scheduling = "reserved"
        "#;
        let config: ClassesConfig = toml::from_str(text).unwrap();
        assert_eq!(config, ClassesConfig { default_class: 2, ..two(Scheduling::Reserved) });
        assert_eq!(config.validate(), Ok(()));
        assert_eq!((config.weights(), config.shares()), (vec![1.0, 0.4], vec![0.7, 0.3]));
        assert_eq!(config.node_scheduling(), ClassScheduling::Reserved { shares: vec![0.7, 0.3] });
        let weighted = ClassesConfig { scheduling: Scheduling::Weighted, ..config.clone() };
        assert_eq!(weighted.node_scheduling(), ClassScheduling::WeightedSharing { weights: vec![1.0, 0.4] });
        assert_eq!(ClassesConfig::default().node_scheduling(), ClassScheduling::Fcfs);
        for mode in [Scheduling::Fcfs, Scheduling::Reserved, Scheduling::Weighted] {
            let text = toml::to_string(&ClassesConfig { scheduling: mode, ..config.clone() }).unwrap();
            assert!(text.contains(&format!("scheduling = \"{}\"", mode.name())), "{text}");
        }
        let weighted: ClassesConfig =
            toml::from_str("scheduling = \"weighted\"\nclasses = [{ name = \"a\" }]").unwrap();
        assert_eq!(weighted.classes, vec![class("a", 1.0, None)], "weight defaults to 1, share to none");
        assert!(toml::from_str::<ClassesConfig>("scheduling = \"wfq\"").is_err(), "unknown modes are refused");
        assert!(toml::from_str::<ClassesConfig>("classes = [{ name = \"a\", color = 1 }]").is_err());
    }

    #[test]
    fn class_counts_and_names_are_checked() {
        assert!(refusal(ClassesConfig { classes: Vec::new(), ..two(Scheduling::Fcfs) }).contains("0 classes"));
        let nine = (0..9).map(|i| class(&format!("c{i}"), 1.0, None)).collect();
        assert!(refusal(ClassesConfig { classes: nine, ..two(Scheduling::Fcfs) }).contains("1 to 8"));
        let eight = (0..8).map(|i| class(&format!("c{i}"), 1.0, None)).collect();
        assert_eq!(ClassesConfig { classes: eight, ..two(Scheduling::Fcfs) }.validate(), Ok(()));
        let twins = vec![class("gold", 1.0, None), class("gold", 0.5, None)];
        assert!(refusal(ClassesConfig { classes: twins, ..two(Scheduling::Fcfs) }).contains("used twice"));
        let nameless = vec![class(" ", 1.0, None)];
        assert!(refusal(ClassesConfig { classes: nameless, ..two(Scheduling::Fcfs) }).contains("needs a name"));
    }

    #[test]
    fn weights_must_be_positive_and_finite() {
        for weight in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let classes = vec![class("gold", 1.0, None), class("silver", weight, None)];
            let why = refusal(ClassesConfig { classes, ..two(Scheduling::Weighted) });
            assert!(why.contains("class 2 (silver) has weight"), "{weight}: {why}");
        }
    }

    #[test]
    fn shares_are_in_zero_one_and_sum_to_at_most_one() {
        for share in [0.0, -0.1, 1.5, f64::NAN] {
            let classes = vec![class("gold", 1.0, Some(share))];
            assert!(refusal(ClassesConfig { classes, ..two(Scheduling::Fcfs) }).contains("share"), "{share}");
        }
        let over = vec![class("gold", 1.0, Some(0.7)), class("silver", 1.0, Some(0.4))];
        assert!(refusal(ClassesConfig { classes: over, ..two(Scheduling::Fcfs) }).contains("sum to"));
        let tenths = vec![class("a", 1.0, Some(0.7)), class("b", 1.0, Some(0.2)), class("c", 1.0, Some(0.1))];
        assert_eq!(ClassesConfig { classes: tenths, ..two(Scheduling::Reserved) }.validate(), Ok(()));
        let missing = vec![class("gold", 1.0, Some(0.7)), class("silver", 1.0, None)];
        let config = ClassesConfig { classes: missing, ..two(Scheduling::Reserved) };
        assert!(refusal(config.clone()).contains("silver has none"));
        assert_eq!(ClassesConfig { scheduling: Scheduling::Weighted, ..config }.validate(), Ok(()));
    }

    #[test]
    fn the_default_class_must_be_run() {
        assert!(refusal(ClassesConfig { default_class: 0, ..two(Scheduling::Fcfs) }).contains("default_class is 0"));
        assert!(refusal(ClassesConfig { default_class: 3, ..two(Scheduling::Fcfs) }).contains("1 to 2"));
        assert_eq!(ClassesConfig { default_class: 2, ..two(Scheduling::Fcfs) }.validate(), Ok(()));
        assert!(two(Scheduling::Fcfs).runs(2) && !two(Scheduling::Fcfs).runs(3) && !two(Scheduling::Fcfs).runs(0));
    }
}
