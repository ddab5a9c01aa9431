//! The class scheduling each node is told: the discipline `[classes]` configures, with its numbers
//! (reserved shares or sharing weights) replaced, rack by rack, by the shares a read policy solved
//! for the nodes of that rack (the `jlwo` policy: the bandwidth JLWO reserves per class towards
//! each storage rack, `policy::ReadPolicy::node_class_shares`). Owns that combination; must not do
//! I/O or decide shares (membership tells the nodes; the policy solves).
//!
//! FCFS stays FCFS: an operator who configured no class separation gets none from a policy. Shares
//! for another number of classes than `[classes]` has are not installed (a node refuses a class
//! past its list), and the configured numbers stay.

use std::collections::HashMap;

use crate::classes::ClassScheduling;

/// A rack's shares by class, each positive, summing to 1.
pub type RackShares = HashMap<String, Vec<f64>>;

/// How far a rack's shares may sum away from 1.
const SUM_TOLERANCE: f64 = 1e-6;

/// The configured scheduling and the solved shares by rack name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeSchedulings {
    /// What `[classes]` says; `None`: nothing to tell the nodes.
    configured: Option<ClassScheduling>,
    /// Solved shares by rack name (empty: none solved, or the policy solves none).
    by_rack: RackShares,
}

impl NodeSchedulings {
    /// What every node is told before (and without) solved shares.
    pub fn set_configured(&mut self, scheduling: ClassScheduling) {
        self.configured = Some(scheduling);
    }

    /// Installs solved shares by rack, keeping only racks whose shares fit the configured
    /// discipline (one per class, each positive, summing to 1); says whether anything changed
    /// and which racks were left out and why.
    pub fn set_rack_shares(&mut self, shares: RackShares) -> (bool, Vec<String>) {
        let classes = match &self.configured {
            Some(ClassScheduling::Reserved { shares }) => shares.len(),
            Some(ClassScheduling::WeightedSharing { weights }) => weights.len(),
            Some(ClassScheduling::Fcfs) | None => 0,
        };
        let mut refused = Vec::new();
        let kept: RackShares = shares
            .into_iter()
            .filter(|(rack, row)| match fits(row, classes) {
                Ok(()) => true,
                Err(why) => {
                    refused.push(format!("rack {rack:?}: {why}"));
                    false
                }
            })
            .collect();
        refused.sort();
        let changed = kept != self.by_rack;
        self.by_rack = kept;
        (changed, refused)
    }

    /// The solved shares installed, by rack name.
    pub fn rack_shares(&self) -> &RackShares {
        &self.by_rack
    }

    /// What a node in `rack` is to run; `None`: nothing to tell.
    pub fn for_rack(&self, rack: &str) -> Option<ClassScheduling> {
        let configured = self.configured.clone()?;
        let Some(solved) = self.by_rack.get(rack) else { return Some(configured) };
        Some(match configured {
            ClassScheduling::Fcfs => ClassScheduling::Fcfs,
            ClassScheduling::Reserved { .. } => ClassScheduling::Reserved { shares: solved.clone() },
            ClassScheduling::WeightedSharing { .. } => ClassScheduling::WeightedSharing { weights: solved.clone() },
        })
    }
}

/// Whether `row` can replace the numbers of a discipline over `classes` classes.
fn fits(row: &[f64], classes: usize) -> Result<(), String> {
    if classes == 0 {
        return Err("the configured scheduling has no shares to replace (fcfs)".into());
    }
    if row.len() != classes {
        return Err(format!("{} shares for {classes} configured classes", row.len()));
    }
    if row.iter().any(|share| !(share.is_finite() && *share > 0.0)) {
        return Err(format!("shares {row:?}: each must be positive"));
    }
    let sum: f64 = row.iter().sum();
    if (sum - 1.0).abs() > SUM_TOLERANCE {
        return Err(format!("shares {row:?} sum to {sum}, not 1"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(racks: &[(&str, Vec<f64>)]) -> RackShares {
        racks.iter().map(|(rack, row)| (rack.to_string(), row.clone())).collect()
    }

    #[test]
    fn solved_shares_replace_the_configured_numbers_of_their_rack_only() {
        let mut schedulings = NodeSchedulings::default();
        assert_eq!(schedulings.for_rack("r1"), None, "nothing configured: nothing to tell");
        schedulings.set_configured(ClassScheduling::Reserved { shares: vec![0.7, 0.3] });
        let (changed, refused) = schedulings.set_rack_shares(shares(&[("r1", vec![0.6, 0.4])]));
        assert!(changed && refused.is_empty());
        assert_eq!(schedulings.for_rack("r1"), Some(ClassScheduling::Reserved { shares: vec![0.6, 0.4] }));
        assert_eq!(schedulings.for_rack("r2"), Some(ClassScheduling::Reserved { shares: vec![0.7, 0.3] }));
        assert!(!schedulings.set_rack_shares(shares(&[("r1", vec![0.6, 0.4])])).0, "the same shares change nothing");
        schedulings.set_configured(ClassScheduling::WeightedSharing { weights: vec![1.0, 0.4] });
        assert_eq!(schedulings.for_rack("r1"), Some(ClassScheduling::WeightedSharing { weights: vec![0.6, 0.4] }));
        assert!(schedulings.set_rack_shares(RackShares::new()).0, "the policy switched away: back to the config");
        assert_eq!(schedulings.for_rack("r1"), Some(ClassScheduling::WeightedSharing { weights: vec![1.0, 0.4] }));
    }

    #[test]
    fn shares_that_do_not_fit_are_refused_with_the_reason_and_fcfs_stays() {
        let mut schedulings = NodeSchedulings::default();
        schedulings.set_configured(ClassScheduling::Reserved { shares: vec![0.5, 0.3, 0.2] });
        let (changed, refused) = schedulings.set_rack_shares(shares(&[
            ("two", vec![0.6, 0.4]),
            ("zero", vec![1.0, 0.0, 0.0]),
            ("over", vec![0.6, 0.4, 0.2]),
            ("fine", vec![0.5, 0.25, 0.25]),
        ]));
        assert!(changed);
        assert_eq!(refused.len(), 3, "{refused:?}");
        assert!(refused[1].contains("rack \"two\": 2 shares for 3 configured classes"), "{refused:?}");
        assert!(refused[0].contains("sum to") && refused[2].contains("positive"), "{refused:?}");
        assert_eq!(schedulings.rack_shares().keys().collect::<Vec<_>>(), vec!["fine"]);
        schedulings.set_configured(ClassScheduling::Fcfs);
        let (_, refused) = schedulings.set_rack_shares(shares(&[("fine", vec![0.5, 0.5])]));
        assert!(refused[0].contains("fcfs"), "{refused:?}");
        assert_eq!(schedulings.for_rack("fine"), Some(ClassScheduling::Fcfs));
    }
}
