//! Latency classes (Xiang et al., "differentiated latency classes"): the class every client task
//! carries, the discipline that shares the node among classes, and their checks and wire forms.
//!
//! Owns [`ClassId`], [`ClassScheduling`] (what each discipline means, its knobs and their
//! validation), the `x-lowtail-class` metadata's parsing, the per-class queue state a probe
//! reports, and their conversions to and from the proto messages. Must not queue, time or pace
//! anything: the queue applies the discipline, the scheduler applies the shares. Must not decide
//! which class a request belongs to (the gateway does; a node serves whatever class it is told).

use serde::{Deserialize, Serialize};

use crate::error::NodeError;
use crate::proto;

/// Most classes a node serves; classes are `0..MAX_CLASSES`. Small on purpose: the paper uses 2,
/// every class costs a lane in the queue and a label in the metrics, and the unit stream carries
/// a class in four bits.
pub const MAX_CLASSES: usize = 8;

/// Metadata entry that carries a request's class (decimal); absent = class 0.
pub const CLASS_METADATA_KEY: &str = "x-lowtail-class";

/// A latency class. Class 0 is the default and the paper's "class 1", the one a gateway gives its
/// most latency-sensitive requests; what the others get depends on the [`ClassScheduling`] in
/// force.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ClassId(pub u8);

impl ClassId {
    /// The class of a request that names none.
    pub const DEFAULT: ClassId = ClassId(0);

    /// The class's position in per-class tables (`0..MAX_CLASSES` once checked).
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// The class itself when it is below [`MAX_CLASSES`], else why it is refused.
    pub fn checked(self) -> Result<ClassId, NodeError> {
        if self.index() < MAX_CLASSES { Ok(self) } else { Err(unknown_class(u64::from(self.0))) }
    }

    /// The class a `x-lowtail-class` value names: a decimal number below [`MAX_CLASSES`].
    pub fn parse(text: &str) -> Result<ClassId, NodeError> {
        // Parsed wide so that "300" is reported as an unknown class, not as unparsable.
        match text.trim().parse::<u64>() {
            Ok(class) if class < MAX_CLASSES as u64 => Ok(ClassId(class as u8)),
            Ok(class) => Err(unknown_class(class)),
            Err(_) => Err(NodeError::InvalidArgument(format!(
                "{CLASS_METADATA_KEY} must be a decimal class number in 0..={}, got {text:?}",
                MAX_CLASSES - 1
            ))),
        }
    }
}

fn unknown_class(class: u64) -> NodeError {
    NodeError::InvalidArgument(format!(
        "class {class} is unknown: classes are 0..={} ({CLASS_METADATA_KEY})",
        MAX_CLASSES - 1
    ))
}

impl std::fmt::Display for ClassId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Tolerance on the sum of reserved shares (they are often computed, e.g. 0.7 + 0.3).
pub const SHARES_SUM_TOLERANCE: f64 = 1e-9;

/// How a node shares its service among classes. See `crates/node/README.md`, "Latency classes".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "discipline", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClassScheduling {
    /// One arrival order across every class: classes change nothing (the default, and the node's
    /// behaviour before classes existed).
    #[default]
    Fcfs,
    /// Work-conserving weighted sharing: deficit round robin in bytes among the classes with
    /// tasks waiting. When every class is backlogged, class `d` gets `weights[d] / Σ weights` of
    /// the bytes served; an idle class's part goes to the others. Classes past the list (or of
    /// weight 0) are refused.
    WeightedSharing {
        /// Weight of each class, by class number.
        weights: Vec<f64>,
    },
    /// The paper's model: each class is its own FCFS server at `shares[d]` × the node's rate. Its
    /// tasks run one at a time, concurrently with other classes', and a class never gets more
    /// than its share even when the others are idle (static reservations). Classes past the list
    /// (or of share 0) are refused.
    Reserved {
        /// Fraction of the node's rate reserved for each class, by class number; they sum to at
        /// most 1.
        shares: Vec<f64>,
    },
}

impl ClassScheduling {
    /// The discipline's name, as in the config file and the logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Fcfs => "fcfs",
            Self::WeightedSharing { .. } => "weighted_sharing",
            Self::Reserved { .. } => "reserved",
        }
    }

    /// Checks the knobs; a discipline that fails is never installed.
    pub fn validate(&self) -> Result<(), NodeError> {
        let (what, values) = match self {
            Self::Fcfs => return Ok(()),
            Self::WeightedSharing { weights } => ("weights", weights),
            Self::Reserved { shares } => ("shares", shares),
        };
        let bad = |why: String| Err(NodeError::InvalidArgument(format!("class scheduling {}: {why}", self.name())));
        if values.len() > MAX_CLASSES {
            return bad(format!("{} {what}, at most {MAX_CLASSES} (one per class)", values.len()));
        }
        if let Some((class, value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite() || **v < 0.0) {
            return bad(format!("{what}[{class}] = {value}; each must be finite and >= 0"));
        }
        if !values.iter().any(|value| *value > 0.0) {
            return bad(format!("{what} {values:?}: at least one must be positive"));
        }
        let sum: f64 = values.iter().sum();
        if matches!(self, Self::Reserved { .. }) && sum > 1.0 + SHARES_SUM_TOLERANCE {
            return bad(format!("shares {values:?} sum to {sum}; they must sum to at most 1"));
        }
        Ok(())
    }

    /// Weight (or share) of `class`: 1 for every class under FCFS, 0 for a class past the list.
    pub fn weight(&self, class: ClassId) -> f64 {
        match self {
            Self::Fcfs => 1.0,
            Self::WeightedSharing { weights: values } | Self::Reserved { shares: values } => {
                values.get(class.index()).copied().unwrap_or(0.0)
            }
        }
    }

    /// The share of the node's rate reserved for `class` under [`ClassScheduling::Reserved`]
    /// (`None` under the shared disciplines, or for a class without a share).
    pub fn reserved_share(&self, class: ClassId) -> Option<f64> {
        match self {
            Self::Reserved { shares } => shares.get(class.index()).copied().filter(|share| *share > 0.0),
            _ => None,
        }
    }

    /// Whether a task of `class` may enter the queue: the class is known and has a positive
    /// weight (a class of weight 0 would wait forever, so it is refused rather than starved).
    pub fn admits(&self, class: ClassId) -> Result<(), NodeError> {
        class.checked()?;
        if self.weight(class) > 0.0 {
            return Ok(());
        }
        let (what, values) = match self {
            Self::Fcfs => unreachable!("FCFS weighs every class 1"),
            Self::WeightedSharing { weights } => ("weight", weights),
            Self::Reserved { shares } => ("share", shares),
        };
        Err(NodeError::InvalidArgument(format!(
            "class {class} has no {what} under class scheduling {} {values:?}; it would never be served",
            self.name()
        )))
    }
}

impl From<&ClassScheduling> for proto::ClassScheduling {
    fn from(scheduling: &ClassScheduling) -> Self {
        use proto::class_scheduling::Discipline;
        let discipline = match scheduling {
            ClassScheduling::Fcfs => Discipline::Fcfs(proto::ClassFcfs {}),
            ClassScheduling::WeightedSharing { weights } => {
                Discipline::WeightedSharing(proto::ClassWeightedSharing { weights: weights.clone() })
            }
            ClassScheduling::Reserved { shares } => {
                Discipline::Reserved(proto::ClassReserved { shares: shares.clone() })
            }
        };
        Self { discipline: Some(discipline) }
    }
}

impl TryFrom<proto::ClassScheduling> for ClassScheduling {
    type Error = NodeError;

    /// The discipline a message names (not validated: see [`ClassScheduling::validate`]).
    fn try_from(message: proto::ClassScheduling) -> Result<Self, NodeError> {
        use proto::class_scheduling::Discipline;
        match message.discipline {
            None => Err(NodeError::InvalidArgument("class scheduling: a discipline is required".into())),
            Some(Discipline::Fcfs(_)) => Ok(Self::Fcfs),
            Some(Discipline::WeightedSharing(sharing)) => Ok(Self::WeightedSharing { weights: sharing.weights }),
            Some(Discipline::Reserved(reserved)) => Ok(Self::Reserved { shares: reserved.shares }),
        }
    }
}

/// One class's part of a node's queue at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassQueueState {
    /// The class.
    pub class: ClassId,
    /// Bytes of its waiting tasks.
    pub queued_bytes: u64,
    /// Its waiting tasks.
    pub queued_tasks: u64,
    /// Bytes of its tasks being served.
    pub in_service_bytes: u64,
    /// Its tasks being served.
    pub in_service_tasks: u64,
}

impl From<ClassQueueState> for proto::ClassQueue {
    fn from(state: ClassQueueState) -> Self {
        Self {
            class: u32::from(state.class.0),
            queued_bytes: state.queued_bytes,
            queued_tasks: state.queued_tasks,
            in_service_bytes: state.in_service_bytes,
            in_service_tasks: state.in_service_tasks,
        }
    }
}

impl From<proto::ClassQueue> for ClassQueueState {
    fn from(queue: proto::ClassQueue) -> Self {
        Self {
            // A class past 8 bits cannot come from a node; saturate rather than wrap onto class 0.
            class: ClassId(u8::try_from(queue.class).unwrap_or(u8::MAX)),
            queued_bytes: queue.queued_bytes,
            queued_tasks: queue.queued_tasks,
            in_service_bytes: queue.in_service_bytes,
            in_service_tasks: queue.in_service_tasks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_metadata_parses_or_says_why_not() {
        assert_eq!(ClassId::parse("0").unwrap(), ClassId(0));
        assert_eq!(ClassId::parse(" 7 ").unwrap(), ClassId(7));
        for (text, why) in [
            ("8", "class 8 is unknown"),
            ("300", "class 300 is unknown"),
            ("abc", "decimal"),
            ("-1", "decimal"),
            ("", "decimal"),
        ] {
            let error = ClassId::parse(text).unwrap_err();
            assert_eq!(error.code(), tonic::Code::InvalidArgument);
            assert!(error.to_string().contains(why), "{text:?}: {error}");
        }
    }

    #[test]
    fn validation_refuses_nonsense_with_the_reason() {
        let weighted = |weights: Vec<f64>| ClassScheduling::WeightedSharing { weights };
        let reserved = |shares: Vec<f64>| ClassScheduling::Reserved { shares };
        for good in [
            ClassScheduling::Fcfs,
            weighted(vec![1.0, 0.4]),
            weighted(vec![0.0, 3.0]),
            reserved(vec![0.7, 0.3]),
            reserved(vec![0.6, 0.3]),
            reserved(vec![0.1; 8]),
        ] {
            good.validate().unwrap();
        }
        // 0.7 + 0.2 + 0.1 is 1.0000000000000002 in binary: within the tolerance.
        reserved(vec![0.7, 0.2, 0.1]).validate().unwrap();
        for (bad, why) in [
            (weighted(vec![]), "at least one must be positive"),
            (weighted(vec![0.0, 0.0]), "at least one must be positive"),
            (weighted(vec![1.0, -0.5]), "weights[1] = -0.5"),
            (weighted(vec![f64::NAN]), "weights[0] = NaN"),
            (weighted(vec![f64::INFINITY]), "finite"),
            (weighted(vec![1.0; 9]), "at most 8"),
            (reserved(vec![0.7, 0.4]), "sum to"),
            (reserved(vec![]), "at least one must be positive"),
        ] {
            let error = bad.validate().unwrap_err();
            assert_eq!(error.code(), tonic::Code::InvalidArgument);
            assert!(error.to_string().contains(why), "{bad:?}: {error}");
        }
    }

    #[test]
    fn a_class_without_weight_is_refused_rather_than_starved() {
        let reserved = ClassScheduling::Reserved { shares: vec![0.7, 0.0, 0.3] };
        reserved.admits(ClassId(0)).unwrap();
        reserved.admits(ClassId(2)).unwrap();
        for class in [1, 3, 7] {
            let error = reserved.admits(ClassId(class)).unwrap_err().to_string();
            assert!(error.contains(&format!("class {class} has no share")), "{error}");
        }
        assert!(reserved.admits(ClassId(8)).unwrap_err().to_string().contains("unknown"));
        assert_eq!(reserved.reserved_share(ClassId(2)), Some(0.3));
        assert_eq!(reserved.reserved_share(ClassId(1)), None);
        for class in 0..MAX_CLASSES as u8 {
            ClassScheduling::Fcfs.admits(ClassId(class)).unwrap();
        }
        assert!(ClassScheduling::Fcfs.admits(ClassId(8)).is_err());
    }

    #[test]
    fn proto_and_toml_round_trip() {
        for scheduling in [
            ClassScheduling::Fcfs,
            ClassScheduling::WeightedSharing { weights: vec![1.0, 0.4] },
            ClassScheduling::Reserved { shares: vec![0.7, 0.3] },
        ] {
            let message = proto::ClassScheduling::from(&scheduling);
            assert_eq!(ClassScheduling::try_from(message).unwrap(), scheduling);
            #[derive(Serialize, Deserialize)]
            struct Holder {
                class_scheduling: ClassScheduling,
            }
            let text = toml::to_string(&Holder { class_scheduling: scheduling.clone() }).unwrap();
            assert_eq!(toml::from_str::<Holder>(&text).unwrap().class_scheduling, scheduling, "{text}");
        }
        assert!(ClassScheduling::try_from(proto::ClassScheduling { discipline: None }).is_err());
        let parsed: ClassScheduling = toml::from_str("discipline = \"reserved\"\nshares = [0.7, 0.3]").unwrap();
        assert_eq!(parsed, ClassScheduling::Reserved { shares: vec![0.7, 0.3] });
        assert!(toml::from_str::<ClassScheduling>("discipline = \"reserved\"\nweights = [1.0]").is_err());
        assert!(toml::from_str::<ClassScheduling>("discipline = \"priority\"").is_err());
    }
}
