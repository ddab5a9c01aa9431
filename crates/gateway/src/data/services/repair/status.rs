//! What repair says of itself, for `lowtail admin status`: its status, the census each scan ends
//! with (the stripes still short of n, by how many units, since when), the stripes it cannot
//! repair now grouped by cause and logged once per cause, the nodes in their grace period and the
//! nodes' scrub reports. Must not repair anything.

use super::{LOG_AGAIN_AFTER, MAX_UNREADABLE, Outcome, Pending, RepairService};
use crate::data::cluster::membership::unix_now_ms;
use crate::data::lock;
use meta::{NodeId, StripeId};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Why a stripe's repair could not progress; the unit of grouping in logs and status.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Blocker {
    /// Units must move off nodes that are not Up, and no Up node outside the stripe takes them.
    NoSpareNode,
    /// Fewer units readable than decoding needs (until nodes return, the data is unreadable).
    TooFewReadable,
    /// Reading the sources failed (nodes that did not answer in time).
    SourcesUnavailable,
    /// Writing a rebuilt unit to this node failed.
    WriteFailed(NodeId),
    /// Another writer kept changing the stripe.
    KeptChanging,
    /// The metadata store failed.
    Metadata,
}

impl std::fmt::Display for Blocker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blocker::NoSpareNode => {
                f.write_str("no Up node outside the stripe's placement can take the units of nodes that are not Up")
            }
            Blocker::TooFewReadable => {
                f.write_str("too few units readable to rebuild from (unreadable until nodes return)")
            }
            Blocker::SourcesUnavailable => f.write_str("nodes holding the sources did not answer"),
            Blocker::WriteFailed(node) => write!(f, "writing rebuilt units to node {node} failed"),
            Blocker::KeptChanging => f.write_str("the stripe kept changing under repair"),
            Blocker::Metadata => f.write_str("the metadata store failed"),
        }
    }
}

/// Stripes held up by one cause in the last scan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockedStripes {
    /// The cause.
    pub cause: Blocker,
    /// In words.
    pub why: String,
    /// Stripes it held up.
    pub stripes: u64,
}

/// The stripes short of n durable units, as the last scan counted them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Census {
    /// Stripes with a unit missing, or on a node that is not Up or whose units are being checked.
    pub stripes_under_redundant: u64,
    /// Of those, how many are short of how many units (`units short → stripes`).
    pub by_units_short: BTreeMap<usize, u64>,
    /// Stripes recorded under-redundant (missing units) in the metadata store, pending ones aside.
    pub stripes_missing_units: u64,
    /// Stripes with a unit on a node that is not Up or whose units are being checked.
    pub stripes_on_unavailable_nodes: u64,
    /// The earliest `degraded_since_ms` among the recorded ones (unix ms), pending ones aside.
    pub oldest_degraded_since_ms: Option<u64>,
    /// Of the under-redundant, stripes acknowledged early whose missing units their writer is
    /// still landing (within `pending_until_ms`; repair takes over after it).
    pub stripes_pending: u64,
    /// Bytes of those missing units.
    pub bytes_pending: u64,
    /// When the oldest of those was acknowledged (unix ms).
    pub oldest_pending_since_ms: Option<u64>,
    /// When the census was taken (unix ms; 0 before the first scan).
    pub counted_at_ms: u64,
    /// Whether every such stripe was counted (false when a scan hit its limit or an error).
    pub complete: bool,
    /// Stripes too few of whose units are readable that no object, upload part or metadata
    /// snapshot referenced at the last check (`unreferenced_checked_at_ms`): garbage the
    /// unreferenced-stripe collector deletes, not counted under-redundant (they hold nothing
    /// acknowledged). Left by a write whose gateway died before its commit, or a release whose
    /// gateway died during its delay, once more units were lost.
    pub stripes_unreadable_unreferenced: u64,
    /// When the references of the unreadable stripes were last checked (unix ms).
    pub unreferenced_checked_at_ms: Option<u64>,
}

/// A Down node within the grace period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeInGrace {
    /// The node.
    pub node: NodeId,
    /// How long until its units are rebuilt elsewhere.
    pub repair_in_ms: u64,
}

/// Repair progress, for `lowtail admin status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RepairStatus {
    /// Stripes whose units were rebuilt (all or some), since start.
    pub stripes_repaired: u64,
    /// Units rebuilt, since start.
    pub units_repaired: u64,
    /// Bytes of units rebuilt, since start.
    pub bytes_repaired: u64,
    /// Stripe repairs that did not progress (retried later), since start.
    pub stripe_failures: u64,
    /// Units this gateway recorded missing after hearing they were corrupt or gone, since start.
    pub units_marked_missing: u64,
    /// Corrupt replicas of open packed stripes copied back from another replica, since start.
    pub replicas_repaired: u64,
    /// Stripes the current scan still has to repair.
    pub stripes_remaining: u64,
    /// The read budget now (`min_read_bytes_per_s` to `max_read_bytes_per_s` by how busy clients
    /// keep the gateway; a stripe one failure from loss gets the maximum).
    pub read_bytes_per_s: u64,
    /// The share of the last window with a client request in flight, in percent.
    pub client_busy_pct: u32,
    /// Down nodes still within the grace period.
    pub nodes_in_grace: Vec<NodeInGrace>,
    /// Down nodes past the grace period whose units are being rebuilt (by this gateway: empty
    /// when another holds the repair lease).
    pub nodes_repairing: Vec<NodeId>,
    /// The gateway that held the repair lease at this gateway's last claim (`None` before the first).
    pub lease_holder: Option<String>,
    /// Why stripes could not be repaired in the last scan, by cause.
    pub blocked: Vec<BlockedStripes>,
    /// The stripes still short of n units after the last scan; taken by the lease holder only
    /// (`None` on the other gateways: ask the holder).
    pub census: Option<Census>,
    /// The nodes' scrubbing, as the lease holder last polled it (empty on the other gateways).
    pub scrub: Vec<NodeScrub>,
}

/// One node's scrubbing, from its stats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeScrub {
    /// The node.
    pub node: NodeId,
    /// Whether it scrubs at all.
    pub enabled: bool,
    /// Full passes over its units so far.
    pub passes_completed: u64,
    /// When its last full pass ended (unix ms; 0 = never).
    pub last_pass_completed_ms: u64,
    /// How far the current pass is, in bytes, of about how many.
    pub pass_bytes_verified: u64,
    /// Bytes stored when the current pass began.
    pub pass_bytes_total: u64,
    /// Units its scrub found corrupt, in all.
    pub corrupt_found: u64,
    /// Units it lists as corrupt now (found by scrub or reads, not yet rewritten).
    pub corrupt_now: u64,
    /// Why an Up node gave no stats at the last poll (its corrupt units are unknown meanwhile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unanswered: Option<String>,
}

impl NodeScrub {
    /// An Up node that gave no stats, and why.
    pub(super) fn unanswered(node: NodeId, error: String) -> Self {
        Self {
            node,
            enabled: false,
            passes_completed: 0,
            last_pass_completed_ms: 0,
            pass_bytes_verified: 0,
            pass_bytes_total: 0,
            corrupt_found: 0,
            corrupt_now: 0,
            unanswered: Some(error),
        }
    }
}

impl RepairService {
    /// Counts one stripe's outcome (progress, metrics, the blocked memory).
    pub(super) fn count(&self, id: StripeId, outcome: &Outcome) {
        match outcome {
            Outcome::Repaired { units, bytes, .. } => {
                self.progress.stripes.fetch_add(1, Ordering::Relaxed);
                self.progress.units.fetch_add(*units as u64, Ordering::Relaxed);
                self.progress.bytes.fetch_add(*bytes, Ordering::Relaxed);
                metrics::counter!("lowtail_gateway_repair_stripes_total").increment(1);
                metrics::counter!("lowtail_gateway_repair_units_total").increment(*units as u64);
                metrics::counter!("lowtail_gateway_repair_bytes_total").increment(*bytes);
            }
            Outcome::Blocked { .. } => {
                self.progress.failures.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("lowtail_gateway_repair_failures_total").increment(1);
                lock(&self.blocked).stripes.insert(id, (Instant::now(), outcome.clone()));
            }
            Outcome::Whole | Outcome::Waiting { .. } | Outcome::Pending { .. } | Outcome::Skipped => {}
        }
    }

    /// Logs each cause that held stripes up: when it first appears, then at most once a minute
    /// while it lasts, with the count; and once when it is gone.
    pub(super) fn log_blocked(&self, outcomes: &BTreeMap<StripeId, Outcome>) {
        let mut by_cause: BTreeMap<Blocker, u64> = BTreeMap::new();
        {
            // Locked in the census's order. Unreadable garbage holds nothing up.
            let (blocked, unreadable) = (lock(&self.blocked), lock(&self.unreadable));
            for (id, outcome) in outcomes {
                if let (false, Outcome::Blocked { cause, .. }) = (unreadable.garbage(id, outcome), outcome) {
                    *by_cause.entry(cause.clone()).or_default() += 1;
                }
            }
            for (id, (_, outcome)) in &blocked.stripes {
                let counted = outcomes.contains_key(id) || unreadable.garbage(id, outcome);
                if let (false, Outcome::Blocked { cause, .. }) = (counted, outcome) {
                    *by_cause.entry(cause.clone()).or_default() += 1;
                }
            }
        }
        let mut logged = lock(&self.logged);
        for (cause, &stripes) in &by_cause {
            let due = logged.get(cause).is_none_or(|at| at.elapsed() >= LOG_AGAIN_AFTER);
            if due {
                tracing::warn!(stripes, why = %cause, "stripes not repaired; retried later");
                logged.insert(cause.clone(), Instant::now());
            }
        }
        logged.retain(|cause, _| {
            let present = by_cause.contains_key(cause);
            if !present {
                tracing::info!(why = %cause, "repair no longer held up by this");
            }
            present
        });
        *lock(&self.last_blocked) = by_cause
            .into_iter()
            .map(|(cause, stripes)| BlockedStripes { why: cause.to_string(), cause, stripes })
            .collect();
    }

    /// Counts the stripes still short after the repairs.
    pub(super) fn take_census(
        &self,
        pending: &BTreeMap<StripeId, Pending>,
        outcomes: &BTreeMap<StripeId, Outcome>,
        complete: bool,
    ) {
        let blocked = lock(&self.blocked);
        let mut unreadable = lock(&self.unreadable);
        let mut census = Census {
            counted_at_ms: unix_now_ms(),
            complete,
            unreferenced_checked_at_ms: unreadable.checked_at_ms,
            ..Census::default()
        };
        let mut found = BTreeSet::new();
        for (id, entry) in pending {
            let examined = match outcomes.get(id) {
                Some(Outcome::Skipped) | None => blocked.stripes.get(id).map(|(_, outcome)| outcome),
                known => known,
            };
            if let Some(outcome @ Outcome::Blocked { cause: Blocker::TooFewReadable, .. }) = examined {
                if found.len() < MAX_UNREADABLE {
                    found.insert(*id);
                }
                if unreadable.garbage(id, outcome) {
                    census.stripes_unreadable_unreferenced += 1;
                    continue;
                }
            }
            let (short, since_ms) = match examined {
                Some(Outcome::Whole) => (0, None),
                Some(Outcome::Repaired { short, since_ms, .. } | Outcome::Blocked { short, since_ms, .. }) => {
                    (*short, *since_ms)
                }
                Some(Outcome::Waiting { short }) => (*short, None),
                Some(Outcome::Pending { short, bytes, since_ms }) => {
                    census.stripes_pending += 1;
                    census.bytes_pending += bytes;
                    if let Some(since_ms) = since_ms {
                        let oldest = census.oldest_pending_since_ms.get_or_insert(*since_ms);
                        *oldest = (*oldest).min(*since_ms);
                    }
                    (*short, None)
                }
                Some(Outcome::Skipped) | None => (entry.unavailable_units.max(usize::from(entry.recorded)), None),
            };
            if short == 0 {
                continue;
            }
            census.stripes_under_redundant += 1;
            *census.by_units_short.entry(short).or_default() += 1;
            census.stripes_missing_units += u64::from(since_ms.is_some() || (examined.is_none() && entry.recorded));
            census.stripes_on_unavailable_nodes += u64::from(entry.unavailable_units > 0);
            if let Some(since_ms) = since_ms {
                census.oldest_degraded_since_ms =
                    Some(census.oldest_degraded_since_ms.map_or(since_ms, |oldest| oldest.min(since_ms)));
            }
        }
        unreadable.found = found;
        drop((blocked, unreadable));
        *lock(&self.census) = Some(census);
    }
}
