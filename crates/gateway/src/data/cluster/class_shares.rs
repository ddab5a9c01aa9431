//! The class scheduling each node is told: the discipline `[classes]` configures, with its numbers
//! (reserved shares or sharing weights) replaced, rack by rack, by the shares a read policy solved
//! for the nodes of that rack (the `jlwo` policy: the bandwidth JLWO reserves per class towards
//! each storage rack, `policy::ReadPolicy::node_class_shares`). Owns that combination and the
//! record the shares are published under in the metadata store; must not talk to nodes
//! (membership does) or decide shares (the policy does).
//!
//! One source of truth for a cluster: the gateway holding the `class-shares` lease publishes its
//! solved shares ([`SharesPublisher`]) with a validity, and every gateway's membership tells the
//! nodes the published ones ([`read_published`]), so gateways never tell a node different shares.
//! Shares past their validity (a holder that stopped solving, or died) are dropped: the
//! configured numbers again.
//!
//! FCFS stays FCFS: an operator who configured no class separation gets none from a policy. Shares
//! for another number of classes than `[classes]` has are not installed (a node refuses a class
//! past its list), and the configured numbers stay.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};

use meta::MetaStore;
use serde::{Deserialize, Serialize};

use crate::classes::ClassScheduling;
use crate::data::cluster::lease::LeaseClaims;
use crate::data::{DataError, meta_error};

/// A rack's shares by class, each positive, summing to 1.
pub type RackShares = HashMap<String, Vec<f64>>;

/// How far a rack's shares may sum away from 1.
const SUM_TOLERANCE: f64 = 1e-6;

/// The metadata store's config entry holding the published shares.
pub const PUBLISHED_KEY: &str = "class_shares";

/// The lease of the gateway whose solved shares the cluster's nodes run.
pub const LEASE_NAME: &str = "class-shares";

/// Solved shares as published: by whom, until when they hold, and the shares by rack name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PublishedShares {
    /// The gateway that solved them.
    pub holder: String,
    /// Unix milliseconds after which they no longer hold.
    pub valid_until_ms: u64,
    /// Shares by rack name (empty: the publisher solves none now).
    pub by_rack: BTreeMap<String, Vec<f64>>,
}

/// The shares published in `meta` that still hold at `now_ms` (empty when none do).
pub async fn read_published(meta: &dyn MetaStore, now_ms: u64) -> Result<RackShares, DataError> {
    let stored = meta.get_config(PUBLISHED_KEY).await.map_err(meta_error)?;
    let Some(text) = stored else { return Ok(RackShares::new()) };
    let published: PublishedShares = serde_json::from_str(&text)
        .map_err(|error| DataError::Internal(format!("the published class shares do not parse: {error}")))?;
    if now_ms > published.valid_until_ms {
        return Ok(RackShares::new());
    }
    Ok(published.by_rack.into_iter().collect())
}

/// One gateway's publishing of the shares its policy solves.
#[derive(Debug)]
pub struct SharesPublisher {
    lease: LeaseClaims,
    /// Whether this gateway's last publication had shares (to clear them when it stops solving).
    published: AtomicBool,
}

impl SharesPublisher {
    /// Publishing as gateway `holder`.
    pub fn new(holder: &str) -> SharesPublisher {
        SharesPublisher { lease: LeaseClaims::new(LEASE_NAME, holder), published: AtomicBool::new(false) }
    }

    /// Publishes `shares` into `meta`, solved at `now_ms`, to hold for `valid_ms`, if this gateway
    /// holds (or wins) the lease for that long; with no shares, clears what this gateway published
    /// before. Whether it published.
    pub async fn publish(
        &self,
        meta: &dyn MetaStore,
        shares: RackShares,
        now_ms: u64,
        valid_ms: u64,
    ) -> Result<bool, DataError> {
        if shares.is_empty() && !self.published.load(Ordering::Relaxed) {
            return Ok(false);
        }
        if !self.lease.claim(meta, now_ms, valid_ms).await.map_err(meta_error)? {
            // Another gateway's shares are the cluster's; ours were replaced when it took over.
            self.published.store(false, Ordering::Relaxed);
            return Ok(false);
        }
        let has_shares = !shares.is_empty();
        let record = PublishedShares {
            holder: self.lease.holder().to_string(),
            valid_until_ms: now_ms.saturating_add(valid_ms),
            by_rack: shares.into_iter().collect(),
        };
        let text = serde_json::to_string(&record).map_err(|error| DataError::Internal(error.to_string()))?;
        meta.put_config(PUBLISHED_KEY, &text).await.map_err(meta_error)?;
        self.published.store(has_shares, Ordering::Relaxed);
        Ok(true)
    }
}

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

    /// Whether the configured discipline has numbers solved shares could replace (`reserved`,
    /// `weighted`): otherwise there is nothing to read from the metadata store.
    pub fn takes_shares(&self) -> bool {
        matches!(self.configured, Some(ClassScheduling::Reserved { .. } | ClassScheduling::WeightedSharing { .. }))
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
        assert!(!schedulings.takes_shares());
        schedulings.set_configured(ClassScheduling::Reserved { shares: vec![0.7, 0.3] });
        assert!(schedulings.takes_shares());
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

    #[tokio::test]
    async fn one_gateway_publishes_the_clusters_shares_until_they_lapse_or_it_clears_them() {
        let dir = tempfile::tempdir().unwrap();
        let meta: std::sync::Arc<dyn MetaStore> = std::sync::Arc::new(meta::RedbStore::open(dir.path()).unwrap());
        let (first, second) = (SharesPublisher::new("gw-a"), SharesPublisher::new("gw-b"));
        assert!(read_published(meta.as_ref(), 0).await.unwrap().is_empty(), "nothing published");
        assert!(
            !first.publish(meta.as_ref(), RackShares::new(), 1_000, 30_000).await.unwrap(),
            "nothing to publish or clear"
        );
        let solved = shares(&[("r1", vec![0.6, 0.4])]);
        assert!(first.publish(meta.as_ref(), solved.clone(), 1_000, 30_000).await.unwrap());
        assert_eq!(read_published(meta.as_ref(), 2_000).await.unwrap(), solved);
        let other = shares(&[("r1", vec![0.9, 0.1])]);
        assert!(
            !second.publish(meta.as_ref(), other.clone(), 2_000, 30_000).await.unwrap(),
            "the lease holder's shares stand"
        );
        assert_eq!(read_published(meta.as_ref(), 2_000).await.unwrap(), solved);
        assert!(read_published(meta.as_ref(), 31_001).await.unwrap().is_empty(), "past their validity: dropped");
        // The holder stopped solving: the other gateway takes over once the lease lapses.
        assert!(second.publish(meta.as_ref(), other.clone(), 32_000, 30_000).await.unwrap());
        assert_eq!(read_published(meta.as_ref(), 33_000).await.unwrap(), other);
        assert!(second.publish(meta.as_ref(), RackShares::new(), 34_000, 30_000).await.unwrap(), "it clears its own");
        assert!(read_published(meta.as_ref(), 35_000).await.unwrap().is_empty());
        meta.put_config(PUBLISHED_KEY, "{not json").await.unwrap();
        assert!(read_published(meta.as_ref(), 35_000).await.is_err(), "a damaged record is an error, not shares");
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
        assert!(!schedulings.takes_shares(), "fcfs has nothing to replace");
        let (_, refused) = schedulings.set_rack_shares(shares(&[("fine", vec![0.5, 0.5])]));
        assert!(refused[0].contains("fcfs"), "{refused:?}");
        assert_eq!(schedulings.for_rack("fine"), Some(ClassScheduling::Fcfs));
    }
}
