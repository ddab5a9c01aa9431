//! The nodes' scrub reports as repair hears them: each Up node polled for the units its scrub or
//! its reads found corrupt, each recorded missing on its stripe (a compare-and-swap, so a restart
//! forgets nothing), a corrupt copy no stripe references any more deleted, changes of a node's
//! scrub counters logged. Must not rebuild anything.

use super::{NodeScrub, RepairService};
use crate::data::cluster::membership::unix_now_ms;
use crate::data::io::missing::UnitOn;
use crate::data::io::replica::REPLICA_UNIT_BASE;
use crate::data::io::stripe_io::NodeMap;
use crate::data::{DataError, lock};
use meta::{NodeId, NodeState, StripeId};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

/// Logs each node whose stats stopped (warn) or started again (info) between two polls: once per
/// change, not once per poll.
pub(super) fn log_stats_changes(before: &[NodeScrub], now: &[NodeScrub]) {
    let was_unanswered = |node: NodeId| before.iter().any(|s| s.node == node && s.unanswered.is_some());
    for entry in now {
        match (&entry.unanswered, was_unanswered(entry.node)) {
            (Some(error), false) => {
                tracing::warn!(node = %entry.node, %error, "an Up node gives no stats: its corrupt units and scrub are unknown")
            }
            (None, true) => tracing::info!(node = %entry.node, "the node gives its stats again"),
            _ => {}
        }
    }
}

impl RepairService {
    /// Records `units` (stripe, unit, node that held the bad copy) as missing in their stripes,
    /// when the stripe still places the unit on that node; a replica of an open packed stripe is
    /// copied back from another instead.
    pub(super) async fn record_corrupt(&self, nodes: &NodeMap, units: Vec<(StripeId, u16, NodeId)>) {
        let mut by_stripe: BTreeMap<StripeId, Vec<(u16, NodeId)>> = BTreeMap::new();
        for (stripe, unit, node) in units {
            if unit >= REPLICA_UNIT_BASE {
                if let Err(error) = self.repair_replica(nodes, stripe, unit, node).await {
                    tracing::warn!(%stripe, replica = unit, %node, %error, "corrupt replica not repaired yet");
                }
                continue;
            }
            by_stripe.entry(stripe).or_default().push((unit, node));
        }
        for (stripe, units) in by_stripe {
            match self.mark_missing(stripe, &units).await {
                Ok((marked, unreferenced)) => {
                    self.progress.marked.fetch_add(marked as u64, Ordering::Relaxed);
                    if marked > 0 {
                        tracing::info!(%stripe, units = ?units, "corrupt or lost units recorded missing, for repair");
                    }
                    self.delete_corrupt_garbage(nodes, stripe, &unreferenced).await;
                }
                Err(error) => tracing::warn!(%stripe, %error, "could not record corrupt units; asked again later"),
            }
        }
    }

    /// Deletes corrupt copies no stripe references (a unit moved off a node that was Down, a
    /// stripe released): only while the node still lists them corrupt, so a copy rewritten since
    /// (by repair choosing the node again) is kept.
    pub(super) async fn delete_corrupt_garbage(&self, nodes: &NodeMap, stripe: StripeId, units: &[(u16, NodeId)]) {
        if self.io.backend().is_some() {
            return;
        }
        for &(unit, node) in units {
            let Some(info) = nodes.get(&node).filter(|n| n.state == NodeState::Up) else { continue };
            let deleted = match self.io.cluster().client(info).await {
                Ok(client) => client.delete_unit_if_corrupt(stripe.0, unit).await.map_err(|e| e.to_string()),
                Err(error) => Err(error.to_string()),
            };
            match deleted {
                Ok(node::ConditionalDelete::Deleted) => {
                    tracing::info!(%stripe, unit, %node, "corrupt copy no stripe references deleted");
                }
                Ok(_) => {}
                Err(error) => tracing::debug!(%stripe, unit, %node, %error, "corrupt garbage not deleted yet"),
            }
        }
    }

    /// Marks `units` (unit, node) of `id` missing where the stripe still places them on that
    /// node: how many were newly marked, and the ones no stripe references there (garbage).
    pub(super) async fn mark_missing(&self, id: StripeId, units: &[UnitOn]) -> Result<(usize, Vec<UnitOn>), DataError> {
        crate::data::io::missing::mark_missing(self.io.cluster().meta().as_ref(), id, units, unix_now_ms()).await
    }

    /// Polls the Up nodes' stats: the corrupt units they list (found by reads or by their scrub),
    /// returned, and their scrub progress, kept for status.
    pub(super) async fn poll_nodes(&self, nodes: &NodeMap) -> Vec<(StripeId, u16, NodeId)> {
        let mut found = Vec::new();
        let mut scrub = Vec::new();
        for node in nodes.values().filter(|n| n.state == NodeState::Up) {
            let stats = match self.io.cluster().client(node).await {
                Ok(client) => client.stats().await.map_err(|error| error.to_string()),
                Err(error) => Err(error.to_string()),
            };
            let stats = match stats {
                Ok(stats) => stats,
                Err(error) => {
                    scrub.push(NodeScrub::unanswered(node.id, error));
                    continue;
                }
            };
            found.extend(
                stats
                    .corrupt_units
                    .iter()
                    .filter_map(|u| u16::try_from(u.unit).ok().map(|unit| (StripeId(u.stripe), unit, node.id))),
            );
            let progress = stats.scrub.unwrap_or_default();
            scrub.push(NodeScrub {
                node: node.id,
                enabled: progress.enabled,
                passes_completed: progress.passes_completed,
                last_pass_completed_ms: progress.last_pass_completed_ms,
                pass_bytes_verified: progress.pass_bytes_verified,
                pass_bytes_total: progress.pass_bytes_total,
                corrupt_found: progress.corrupt_found,
                corrupt_now: stats.corrupt_units.len() as u64,
                unanswered: None,
            });
        }
        scrub.sort_by_key(|s| s.node);
        let mut last = lock(&self.scrub);
        log_stats_changes(&last, &scrub);
        *last = scrub;
        found
    }
}
