//! Rebuilding one stripe: which units move where (in place onto their Up node, else onto a spare
//! outside the stripe's racks), reading a recovery set at repair's pace and decoding at the gateway
//! or on the nodes (APLS), writing the rebuilt units, then compare-and-swapping the placement and
//! the missing units (undoing the new copies on conflict); a corrupt replica of an open packed
//! stripe copied back from another. Must not decide which stripes need repair.

use super::{Blocker, CAS_ATTEMPTS, Outcome, RepairService};
use crate::data::cluster::membership::unix_now_ms;
use crate::data::io::stripe_io::NodeMap;
use crate::data::read::range::RangeRead;
use crate::data::read::robust;
use crate::data::{DataError, meta_error};
use bytes::Bytes;
use meta::{MetaError, NodeId, NodeInfo, NodeState, StripeId, StripeMeta, StripeState};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

/// Units of a stripe to rebuild and where.
#[derive(Debug)]
pub(super) struct StripePlan {
    /// Every unit missing or on a node that is not Up.
    pub(super) lost: Vec<usize>,
    /// The ones rebuildable now: (unit, target node), counted by the placer when the target is new.
    pub(super) targets: Vec<(usize, NodeId)>,
    /// Units that must move but no node could take.
    pub(super) unplaced: usize,
}

/// One attempt's end.
pub(super) enum Attempt {
    Done(Outcome),
    Conflict,
}

impl RepairService {
    /// Copies replica `seq` of open packed stripe `id` back onto `node` (where it is corrupt) from
    /// another node that holds it whole; a replica of a stripe that is sealed or gone is garbage
    /// and deleted instead.
    pub(super) async fn repair_replica(
        &self,
        nodes: &NodeMap,
        id: StripeId,
        seq: u16,
        node: NodeId,
    ) -> Result<(), DataError> {
        let Some(target) = nodes.get(&node) else { return Ok(()) };
        let stripe = match self.io.cluster().meta().get_stripe(id).await {
            Ok(stripe) if stripe.state == StripeState::Open => stripe,
            Ok(_) | Err(MetaError::NoSuchStripe(_)) => {
                self.io.delete_unit_best_effort(target, id, usize::from(seq)).await;
                return Ok(());
            }
            Err(error) => return Err(meta_error(error)),
        };
        let holders = stripe.placement.iter().filter(|&&other| other != node).filter_map(|other| nodes.get(other));
        for holder in holders.filter(|h| h.state == NodeState::Up) {
            let Ok(replica) = self.read_replica(holder, id, seq).await else { continue };
            self.io.write_unit(target, id, usize::from(seq), replica).await.map_err(DataError::Unavailable)?;
            self.progress.replicas.fetch_add(1, Ordering::Relaxed);
            tracing::info!(stripe = %id, replica = seq, %node, from = %holder.id, "corrupt replica copied back");
            return Ok(());
        }
        Err(DataError::Unavailable(format!("no other node of open stripe {id} holds replica {seq} whole")))
    }

    /// The whole replica unit `seq` of stripe `id` on `holder` (verified by the node's checksums).
    /// Replica `seq` of open stripe `id` on `holder`: its bytes and its descriptor.
    pub(super) async fn read_replica(
        &self,
        holder: &NodeInfo,
        id: StripeId,
        seq: u16,
    ) -> Result<(Bytes, Bytes), DataError> {
        let client = self.io.cluster().client(holder).await.map_err(|e| DataError::Unavailable(e.to_string()))?;
        let listed = client
            .list_units_with_descriptors(Some((id.0, seq.saturating_sub(1))), 1)
            .await
            .map_err(|e| DataError::Unavailable(e.to_string()))?;
        let Some(unit) = listed.units.into_iter().next().filter(|u| u.stripe == id.0 && u.unit == u32::from(seq))
        else {
            return Err(DataError::Unavailable(format!("node {} has no replica {seq}", holder.id)));
        };
        let (bytes, _) =
            client.read_range(id.0, seq, 0, unit.len).await.map_err(|e| DataError::Unavailable(e.to_string()))?;
        Ok((bytes, unit.descriptor))
    }

    /// Rebuilds what stripe `id` lacks: its missing units (in place when their node is Up, else on
    /// a spare) and the units of nodes Down past the grace (on spares). Units that cannot be
    /// placed now stay as they are; the outcome says how many are still short.
    pub(super) async fn repair_stripe(&self, nodes: &NodeMap, id: StripeId) -> Outcome {
        let meta = self.io.cluster().meta();
        for _attempt in 0..CAS_ATTEMPTS {
            let stripe = match meta.get_stripe(id).await {
                Ok(stripe) => stripe,
                // Released meanwhile: nothing left to protect.
                Err(MetaError::NoSuchStripe(_)) => return Outcome::Whole,
                Err(_) => return Outcome::Blocked { cause: Blocker::Metadata, short: 1, since_ms: None },
            };
            // An open (packing) stripe has no units yet, only replicas of its objects on m + 1
            // nodes; its packer seals it within `packed.seal_after_ms`.
            if stripe.state == StripeState::Open {
                return Outcome::Whole;
            }
            match self.rebuild_once(nodes, &stripe).await {
                Attempt::Done(outcome) => return outcome,
                Attempt::Conflict => continue,
            }
        }
        Outcome::Blocked { cause: Blocker::KeptChanging, short: 1, since_ms: None }
    }

    /// One attempt at rebuilding `stripe` as read; `Conflict` when its record changed meanwhile.
    /// A stripe acknowledged early is left to its writer until its deadline, unless the writer was
    /// an earlier incarnation of this gateway (its landing ended with it).
    pub(super) async fn rebuild_once(&self, nodes: &NodeMap, stripe: &StripeMeta) -> Attempt {
        let since_ms = stripe.degraded_since_ms;
        if stripe.is_pending_for(unix_now_ms(), self.io.incarnation()) {
            let node_up = |node: &NodeId| nodes.get(node).is_some_and(|n| n.state == NodeState::Up);
            let short = (0..stripe.placement.len())
                .filter(|&unit| stripe.is_missing(unit) || !node_up(&stripe.placement[unit]))
                .count();
            let bytes = stripe.unit_bytes * stripe.missing_units.len() as u64;
            return Attempt::Done(Outcome::Pending { short, bytes, since_ms });
        }
        let plan = self.plan_stripe(nodes, stripe);
        let short = plan.lost.len();
        if short == 0 {
            return Attempt::Done(Outcome::Whole);
        }
        if plan.targets.is_empty() {
            let outcome = if plan.unplaced > 0 {
                Outcome::Blocked { cause: Blocker::NoSpareNode, short, since_ms }
            } else {
                Outcome::Waiting { short }
            };
            return Attempt::Done(outcome);
        }
        let written = match self.rebuild_units(nodes, stripe, &plan).await {
            Ok(written) => written,
            Err(cause) => {
                self.undo(nodes, stripe, &plan, &[]).await;
                return Attempt::Done(Outcome::Blocked { cause, short, since_ms });
            }
        };
        let mut updated = stripe.clone();
        for &(unit, target) in &written {
            updated.placement[unit] = target;
        }
        updated.clear_missing(written.iter().map(|&(unit, _)| unit as u16));
        match self.io.cluster().meta().update_stripe(stripe.id, stripe.version, updated).await {
            Ok(stored) => {
                assert_eq!(stored.placement.iter().collect::<BTreeSet<_>>().len(), stored.placement.len());
                self.finish(nodes, stripe, &plan, &written).await;
                let bytes = stripe.unit_bytes * written.len() as u64;
                tracing::info!(stripe = %stripe.id, units = ?written, "units rebuilt");
                let (units, short) = (written.len(), short - written.len());
                Attempt::Done(Outcome::Repaired { units, bytes, short, since_ms: stored.degraded_since_ms })
            }
            Err(error) => {
                self.undo(nodes, stripe, &plan, &written).await;
                if matches!(error, MetaError::Conflict(_)) {
                    Attempt::Conflict
                } else {
                    Attempt::Done(Outcome::Blocked { cause: Blocker::Metadata, short, since_ms })
                }
            }
        }
    }

    /// Which units of `stripe` are lost and where each that can be rebuilt now goes.
    pub(super) fn plan_stripe(&self, nodes: &NodeMap, stripe: &StripeMeta) -> StripePlan {
        let grace_ms = self.config.grace_ms;
        let now_ms = unix_now_ms();
        let node_up = |node: &NodeId| nodes.get(node).is_some_and(|n| n.state == NodeState::Up);
        let past_grace = |node: &NodeId| {
            nodes.get(node).is_some_and(|n| {
                n.state == NodeState::Down
                    && now_ms.saturating_sub(n.down_since_ms.unwrap_or(n.last_heartbeat_ms)) >= grace_ms
            })
        };
        let mut lost = Vec::new();
        let mut to_move = Vec::new();
        let mut targets = Vec::new();
        let mut unplaced = 0;
        for (unit, node) in stripe.placement.iter().enumerate() {
            let missing = stripe.is_missing(unit);
            if missing && node_up(node) {
                // In place: the node's store replaces whatever it holds under this name.
                lost.push(unit);
                targets.push((unit, *node));
            } else if missing || !node_up(node) {
                lost.push(unit);
                if missing || past_grace(node) {
                    to_move.push(unit);
                }
            }
        }
        let node_list: Vec<NodeInfo> = nodes.values().cloned().collect();
        let mut placement = stripe.placement.clone();
        for unit in to_move {
            let peers: Vec<NodeId> = (0..placement.len()).filter(|&u| u != unit).map(|u| placement[u]).collect();
            let starters = self.light_loaded_starters(&node_list, placement[unit], &peers);
            let mut placer = self.io.placer();
            let placed = placer
                .place(&starters, 1, &[placement[unit]], &peers)
                .or_else(|_| placer.place(&node_list, 1, &[placement[unit]], &peers));
            match placed {
                Ok(found) => {
                    placement[unit] = found[0];
                    targets.push((unit, found[0]));
                }
                Err(_) => unplaced += 1,
            }
        }
        targets.sort_unstable();
        StripePlan { lost, targets, unplaced }
    }

    /// Where a unit rebuilt on the nodes may go first (APLS's light-loaded starter: the new node
    /// receives the whole unit): the light-loaded, by this gateway's windowed request table, of the
    /// Up nodes that hold none of the stripe's units. Empty unless the nodes rebuild (`apls`,
    /// `auto`); the placer then takes the least-filled of these, or of all nodes when none fits.
    pub(super) fn light_loaded_starters(&self, node_list: &[NodeInfo], old: NodeId, peers: &[NodeId]) -> Vec<NodeInfo> {
        if !self.io.reconstruct().kind.rebuilds_on_nodes() {
            return Vec::new();
        }
        let candidates: Vec<NodeId> = node_list
            .iter()
            .filter(|n| n.state == NodeState::Up && n.id != old && !peers.contains(&n.id))
            .map(|n| n.id)
            .collect();
        let light = self.io.cluster().loads().light_loaded(&candidates);
        node_list.iter().filter(|n| light.contains(&n.id)).cloned().collect()
    }

    /// Rebuilds and writes every planned unit; the ones written (unit, node), or why it stopped.
    pub(super) async fn rebuild_units(
        &self,
        nodes: &NodeMap,
        stripe: &StripeMeta,
        plan: &StripePlan,
    ) -> Result<Vec<(usize, NodeId)>, Blocker> {
        let code = self.io.code(&stripe.code).map_err(|_| Blocker::Metadata)?;
        let failed: BTreeSet<usize> = plan.lost.iter().copied().collect();
        // One more failure from loss: rebuilt at the full budget, however busy clients are.
        let present: Vec<bool> = (0..stripe.placement.len()).map(|unit| !failed.contains(&unit)).collect();
        let urgent = code.failures_tolerated(&present).is_none_or(|tolerated| tolerated == 0);
        let mut written = Vec::new();
        for &(unit, target) in &plan.targets {
            self.pace.wait_for(stripe.unit_bytes * code.data_units() as u64, urgent).await;
            let range = RangeRead {
                io: &self.io,
                nodes,
                stripe,
                code: code.as_ref(),
                unit,
                offset: 0,
                length: stripe.unit_bytes,
                // Repair is background work: its reads are paced by `RepairPace`, not
                // queued behind client reads for their slots.
                admission: None,
            };
            // With kind = "apls" or "auto" the survivors rebuild the unit into its new node themselves.
            if self.io.reconstruct().kind.rebuilds_on_nodes() {
                match crate::data::read::node_dataflow::repair_into(range, &nodes[&target]).await {
                    Ok(()) => {
                        written.push((unit, target));
                        continue;
                    }
                    Err(error) => tracing::info!(%error, "rebuilding on the nodes gave up; rebuilding at the gateway"),
                }
            }
            let rebuilt = robust::rebuild(range, failed.clone()).await.map_err(|error| match error {
                DataError::Lost(_) => Blocker::TooFewReadable,
                DataError::Meta(_) | DataError::Internal(_) => Blocker::Metadata,
                _ => Blocker::SourcesUnavailable,
            });
            let rebuilt = match rebuilt {
                Ok(rebuilt) => rebuilt,
                Err(cause) if written.is_empty() => return Err(cause),
                // Keep what was rebuilt: the record takes it, the rest waits.
                Err(_) => break,
            };
            let descriptor = self.io.descriptor_for(nodes, stripe, unit, None).await;
            match self.io.write_unit(&nodes[&target], stripe.id, unit, (rebuilt, descriptor)).await {
                Ok(()) => written.push((unit, target)),
                Err(_) if written.is_empty() => return Err(Blocker::WriteFailed(target)),
                Err(_) => break,
            }
        }
        Ok(written)
    }

    /// After the record took `written` of `plan`: the placer's counts follow the moves (and forget
    /// the targets not written), and old copies of moved units on live nodes are deleted (copies on
    /// dead nodes are orphans for the collector).
    pub(super) async fn finish(
        &self,
        nodes: &NodeMap,
        stripe: &StripeMeta,
        plan: &StripePlan,
        written: &[(usize, NodeId)],
    ) {
        let moved: Vec<(usize, NodeId)> =
            written.iter().copied().filter(|&(unit, target)| stripe.placement[unit] != target).collect();
        {
            let mut placer = self.io.placer();
            moved.iter().for_each(|&(unit, _)| placer.adjust(stripe.placement[unit], -1));
            plan.targets
                .iter()
                .filter(|&&(unit, target)| stripe.placement[unit] != target && !written.contains(&(unit, target)))
                .for_each(|&(_, target)| placer.adjust(target, -1));
        }
        let stale: Vec<(usize, NodeId)> = moved
            .iter()
            .map(|&(unit, _)| (unit, stripe.placement[unit]))
            .filter(|(_, node)| nodes.get(node).is_some_and(|n| n.state == NodeState::Up))
            .collect();
        self.io.delete_units_best_effort(nodes, stripe.id, &stale).await;
    }

    /// After the record refused `plan`: the placer forgets the new homes, and units written on new
    /// nodes that the stored record does not name are deleted. Another gateway repairing the same
    /// stripe may have won with a copy on the same node (unit files are named by stripe and unit
    /// only), so what the stored placement names is kept; in-place rewrites are the right bytes.
    pub(super) async fn undo(
        &self,
        nodes: &NodeMap,
        stripe: &StripeMeta,
        plan: &StripePlan,
        written: &[(usize, NodeId)],
    ) {
        let moved = |&(unit, target): &(usize, NodeId)| stripe.placement[unit] != target;
        {
            let mut placer = self.io.placer();
            plan.targets.iter().filter(|t| moved(t)).for_each(|&(_, target)| placer.adjust(target, -1));
        }
        if written.is_empty() {
            return;
        }
        let current = self.io.cluster().meta().get_stripe(stripe.id).await.map(|s| s.placement).unwrap_or_default();
        let unreferenced: Vec<(usize, NodeId)> =
            written.iter().copied().filter(|w| moved(w) && current.get(w.0) != Some(&w.1)).collect();
        self.io.delete_units_best_effort(nodes, stripe.id, &unreferenced).await;
    }
}
