//! Sealing an open packed stripe: its data units encoded, the parity written, the stripe recorded
//! Sealed (with the units that did not land missing), then its replica units deleted with one
//! request per node; on the packer's timer (`tick`), when full, or all at once at shutdown
//! (`flush`). Must not accept writes into the stripe it seals.

use super::{OpenStripe, Packer, PackerState, UNRECOVERED_RETRY, replica_nodes};
use crate::data::cluster::membership::unix_now_ms;
use crate::data::io::descriptor::{Holds, UnitDescriptor};
use crate::data::io::stripe_io::NodeMap;
use crate::data::write::stripe_write::{
    UNIT_ALIGN_BYTES, encode_units, forget_placement, judge, move_off_unavailable, unit_checksums, write_units,
};
use crate::data::{DataError, meta_error};
use bytes::Bytes;
use execution::WriteRule;
use meta::{MetaError, NodeId, NodeInfo, StripeMeta, StripeState};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

impl Packer {
    /// Starts sealing `stripe` in the background.
    pub(super) fn send_to_seal(&self, state: &mut PackerState, stripe: OpenStripe) {
        let Some(me) = self.me.upgrade() else { return };
        state.sealing += 1;
        // In the class of the write that filled the stripe (the background's when the timer seals).
        tokio::spawn(crate::classes::carried(async move {
            let id = stripe.stripe.id;
            let result = me.seal(&stripe).await;
            let mut state = me.state.lock().await;
            state.sealing -= 1;
            match result {
                Ok(()) => {
                    state.registered.retain(|registered| *registered != id);
                    let registered = state.registered.clone();
                    if let Err(error) = me.save_registry(&registered).await {
                        // Harmless: recovery finds the stripe sealed and only cleans up.
                        tracing::warn!(stripe = %id, %error, "could not update the open-stripe registry");
                    }
                }
                Err(error) => {
                    tracing::warn!(stripe = %id, %error, "sealing failed; replicas keep the objects safe, retrying");
                    state.unsealed.push(stripe);
                }
            }
        }));
    }

    /// Encodes and writes the stripe's units, flips its record to Sealed and deletes the replicas.
    pub(super) async fn seal(&self, open: &OpenStripe) -> Result<(), DataError> {
        // Appends still writing replicas finish first: their bytes are already in `units`.
        let _no_appends = Arc::clone(&open.in_flight).write_owned().await;
        let meta = self.io.cluster().meta();
        let nodes = self.io.cluster().node_map().await?;
        let id = open.stripe.id;
        let current = match meta.get_stripe(id).await {
            Ok(current) => current,
            Err(MetaError::NoSuchStripe(_)) => return Ok(()),
            Err(error) => return Err(meta_error(error)),
        };
        // Sealed already (a run killed after sealing, before its registry was saved): objects
        // reference it, whatever replicas are left. Only leftovers go.
        if current.state == StripeState::Sealed {
            self.delete_replicas(&nodes, &current, open.replicas.iter().map(|(&seq, &unit)| (seq, unit))).await;
            return Ok(());
        }
        // Open with no acknowledged replica on any parity node: no object references it.
        if open.replicas.is_empty() {
            match meta.delete_stripe(id).await {
                Ok(_) | Err(MetaError::NoSuchStripe(_)) => {}
                Err(error) => return Err(meta_error(error)),
            }
            forget_placement(&self.io, &open.stripe.placement);
            return Ok(());
        }
        let fill = open.units.iter().map(|u| u.len() as u64).max().unwrap_or(0);
        let unit_bytes = fill.div_ceil(UNIT_ALIGN_BYTES).max(1) * UNIT_ALIGN_BYTES;
        let data: Vec<Bytes> = open.units.iter().map(|u| Bytes::copy_from_slice(u)).collect();
        let units = encode_units(self.code.as_ref(), data, unit_bytes)?;
        let objects = open.objects.values().cloned().collect();
        let stripe_descriptor = self.describe(&StripeMeta { unit_bytes, ..current.clone() }, Holds::Packed { objects });
        let k = self.code.data_units();
        let descriptors: Vec<Bytes> = (0..units.len())
            .map(|unit| {
                UnitDescriptor::decode(&stripe_descriptor).expect("just encoded").of_packed_unit(unit, k).encode()
            })
            .collect();
        let node_list: Vec<NodeInfo> = nodes.values().cloned().collect();
        // Nodes that went down since opening are replaced before writing where another node can
        // take their unit (counted by the placer); the others' units are left missing.
        let mut placement = current.placement.clone();
        let to_write = move_off_unavailable(&self.io, &nodes, &node_list, &mut placement);
        let described = (units.as_slice(), descriptors.as_slice());
        let code = self.code.as_ref();
        let run = write_units(
            &self.io,
            (&nodes, &node_list),
            code,
            id,
            described,
            (placement, &to_write),
            WriteRule::default(),
        )
        .await;
        let writes = &run.writes;
        // The open record still holds its nodes: on failure the placer counts those again.
        let undo_placement = || {
            forget_placement(&self.io, &writes.placement);
            let mut placer = self.io.placer();
            current.placement.iter().for_each(|node| placer.adjust(*node, 1));
        };
        // The replicas keep the objects safe until a seal meets the durability rule.
        if let Err(error) = judge(&self.io, &nodes, id, &run).await {
            undo_placement();
            return Err(error);
        }
        let packed_bytes = open.units.iter().map(|u| u.len() as u64).sum();
        let mut sealed = StripeMeta {
            unit_bytes,
            placement: writes.placement.clone(),
            state: StripeState::Sealed,
            unit_checksums: Some(unit_checksums(&units)),
            packed_bytes: Some(packed_bytes),
            ..current.clone()
        };
        if sealed.mark_missing(writes.missing(), unix_now_ms()) {
            self.io.counters().degraded_writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            metrics::counter!("lowtail_gateway_degraded_writes_total").increment(1);
        }
        if let Err(error) = meta.update_stripe(id, current.version, sealed).await {
            // The units are not referenced by a sealed record; the replicas still are.
            self.io.delete_units_best_effort(&nodes, id, &writes.durable_units()).await;
            undo_placement();
            return Err(meta_error(error));
        }
        metrics::counter!("lowtail_gateway_packed_stripes_sealed_total").increment(1);
        tracing::debug!(stripe = %id, objects = open.replicas.len(), unit_bytes, "packed stripe sealed");
        self.delete_replicas(&nodes, &current, open.replicas.iter().map(|(&seq, &unit)| (seq, unit))).await;
        Ok(())
    }

    pub(super) async fn delete_replicas(
        &self,
        nodes: &NodeMap,
        open: &StripeMeta,
        replicas: impl Iterator<Item = (u16, u16)>,
    ) {
        let k = self.code.data_units();
        let mut deletes: Vec<(usize, NodeId)> = Vec::new();
        for (seq, unit) in replicas {
            for node in replica_nodes(open, k, usize::from(unit)) {
                deletes.push((usize::from(seq), node));
            }
        }
        self.io.delete_units_best_effort(nodes, open.id, &deletes).await;
    }

    /// Seals the open stripe if it is older than `seal_after_ms`, and retries failed seals.
    pub async fn tick(&self) {
        let seal_after = Duration::from_millis(self.io.config().packed.seal_after_ms);
        let mut state = self.state.lock().await;
        if state.open.as_ref().is_some_and(|open| open.opened_at.elapsed() >= seal_after) {
            let due = state.open.take().expect("checked");
            self.send_to_seal(&mut state, due);
        }
        for stripe in std::mem::take(&mut state.unsealed) {
            self.send_to_seal(&mut state, stripe);
        }
        let now = Instant::now();
        if state.unrecovered.is_empty() || state.retry_unrecovered_at.is_some_and(|at| now < at) {
            return;
        }
        state.retry_unrecovered_at = Some(now + UNRECOVERED_RETRY);
        let ids = std::mem::take(&mut state.unrecovered);
        // Rebuilding reads the nodes: appends must not wait on it.
        drop(state);
        let rebuilt = self.rebuild_registered(ids).await;
        self.apply_rebuilt(&mut *self.state.lock().await, rebuilt);
    }

    /// Closes the open stripe for appends, seals it and every stripe whose seal failed before, and
    /// waits (bounded) for the outcome: an error when a seal failed (the stripe stays open and
    /// registered, safe in its replicas, for the next tick or start).
    pub async fn flush(&self, timeout: Duration) -> Result<(), DataError> {
        let deadline = Instant::now() + timeout;
        {
            let mut state = self.state.lock().await;
            if let Some(open) = state.open.take() {
                self.send_to_seal(&mut state, open);
            }
            for stripe in std::mem::take(&mut state.unsealed) {
                self.send_to_seal(&mut state, stripe);
            }
        }
        loop {
            {
                let state = self.state.lock().await;
                if state.sealing == 0 {
                    return match state.unsealed.len() {
                        0 => Ok(()),
                        left => Err(DataError::Unavailable(format!("{left} open stripes could not be sealed"))),
                    };
                }
            }
            if Instant::now() >= deadline {
                return Err(DataError::Unavailable("open stripes could not be sealed in time".into()));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
