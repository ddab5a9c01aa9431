//! Writes acknowledged early (a bucket's write ack rule `k+1` or `k`, FAST CLOUD's speculative
//! write): the unit writes still running when a stripe was acknowledged are awaited here, in the
//! background, and the units that land are taken out of the stripe's missing units by a
//! compare-and-swap. What does not land (a failed write, a unit dropped because its node had its
//! bound of late copies in flight, a gateway that stopped) stays recorded
//! missing and, once the stripe's `pending_until_ms` has passed, repair rebuilds it: the
//! acknowledgement never rests on this gateway's memory.
//!
//! Owns: the bound on stripes finished at once (`pending.max_stripes`), the admission of each late
//! unit to its node's bound (`late_copies`), the record of each stripe in
//! flight (for status and metrics) and the compare-and-swap that ends it. Must not: acknowledge
//! anything, retry a unit write (repair does, after the deadline), or touch object metadata.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use meta::{MetaError, NodeId, StripeId, StripeMeta};
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::data::cluster::membership::unix_now_ms;
use crate::data::config::PendingConfig;
use crate::data::io::stripe_io::{NodeMap, StripeIo};
use crate::data::lock;
use crate::data::write::late_copies::{LateCopies, LateCopy};
use crate::data::write::stripe_write::Landing;

/// Compare-and-swap attempts to record the landed units before they are left to repair.
const CAS_ATTEMPTS: usize = 5;

/// This gateway's early-acknowledged stripes, for `lowtail admin status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PendingStatus {
    /// Stripes whose remaining units this gateway is writing now.
    pub stripes_in_flight: u64,
    /// Bytes of those units.
    pub bytes_in_flight: u64,
    /// When the oldest of them was acknowledged (unix ms).
    pub oldest_acked_ms: Option<u64>,
    /// Stripes acknowledged with units still landing (a bucket's early rule or the straggler
    /// rule), since start.
    pub stripes_acked_early: u64,
    /// Writes acknowledged by the straggler rule (all copies but one late one durable): stripes
    /// and packed objects, since start.
    pub acked_past_straggler: u64,
    /// Units that landed after their acknowledgement, since start.
    pub units_landed: u64,
    /// Units whose background write failed (left to repair), since start.
    pub units_failed: u64,
    /// Writes that would have been acknowledged early but waited for every unit, because
    /// `pending.max_stripes` were in flight, since start.
    pub refused_full: u64,
    /// Late copies (striped units and packed replicas) being written now, all nodes together.
    pub late_copies_in_flight: u64,
    /// Late copies dropped since start because their node had `pending.max_late_copies_per_node`
    /// in flight: left missing for repair or the seal.
    pub late_copies_dropped: u64,
}

/// One stripe in flight: acknowledged when, and how many bytes still landing.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    acked_ms: u64,
    bytes: u64,
}

/// The background half of early-acknowledged writes; see the module documentation.
#[derive(Debug)]
pub struct PendingWrites {
    io: Arc<StripeIo>,
    permits: Arc<Semaphore>,
    deadline_ms: u64,
    straggler: Option<execution::StragglerWait>,
    late_copies: Arc<LateCopies>,
    in_flight: std::sync::Mutex<BTreeMap<StripeId, InFlight>>,
    acked_early: AtomicU64,
    acked_past_straggler: AtomicU64,
    landed: AtomicU64,
    failed: AtomicU64,
    refused_full: AtomicU64,
}

impl PendingWrites {
    /// Early acknowledgements over `io`, bounded by `config` and `late_copies` (shared with the
    /// packer's late replicas), with the straggler rule's wait when it is on
    /// (`DataConfig::straggler_wait`).
    pub fn new(
        io: Arc<StripeIo>,
        config: &PendingConfig,
        straggler: Option<execution::StragglerWait>,
        late_copies: Arc<LateCopies>,
    ) -> Self {
        Self {
            io,
            permits: Arc::new(Semaphore::new(config.max_stripes)),
            deadline_ms: config.deadline_ms,
            straggler,
            late_copies,
            in_flight: std::sync::Mutex::new(BTreeMap::new()),
            acked_early: AtomicU64::new(0),
            acked_past_straggler: AtomicU64::new(0),
            landed: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            refused_full: AtomicU64::new(0),
        }
    }

    /// A place for one more stripe in the background, or `None` (counted) when all are taken: the
    /// write then waits for every unit.
    pub fn try_reserve(&self) -> Option<OwnedSemaphorePermit> {
        let permit = Arc::clone(&self.permits).try_acquire_owned().ok();
        if permit.is_none() {
            self.refused_full.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("lowtail_gateway_pending_refused_total").increment(1);
        }
        permit
    }

    /// The straggler rule's wait, when it is on.
    pub fn straggler(&self) -> Option<execution::StragglerWait> {
        self.straggler
    }

    /// Counts a write acknowledged with copies landing, by the straggler rule or not.
    pub fn count_acked(&self, straggler: bool) {
        if straggler {
            self.acked_past_straggler.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("lowtail_gateway_acked_past_straggler_total").increment(1);
        }
    }

    /// The unit writes of `landing` their nodes have room for, each with its place; the others are
    /// aborted (a dropped copy, left missing: see `late_copies`).
    pub fn admit(&self, landing: Vec<Landing>) -> Vec<(Landing, LateCopy)> {
        landing
            .into_iter()
            .filter_map(|(unit, node, handle)| {
                let (handle, place) = self.late_copies.admit_or_abort(node, handle)?;
                Some(((unit, node, handle), place))
            })
            .collect()
    }

    /// Until when a stripe acknowledged at `now_ms` is left to its writer.
    pub fn pending_until_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_add(self.deadline_ms)
    }

    /// Hands over `stripe` (recorded with the `landing` units missing and pending) to finish in the
    /// background, holding `permit` until it is done.
    pub fn finish(
        self: &Arc<Self>,
        nodes: NodeMap,
        stripe: StripeMeta,
        landing: Vec<(Landing, LateCopy)>,
        permit: OwnedSemaphorePermit,
    ) {
        assert!(!landing.is_empty(), "an early acknowledgement leaves units landing");
        assert!(landing.iter().all(|((unit, _, _), _)| stripe.is_missing(*unit)), "landing units are recorded missing");
        let bytes = stripe.unit_bytes * landing.len() as u64;
        lock(&self.in_flight).insert(stripe.id, InFlight { acked_ms: unix_now_ms(), bytes });
        self.acked_early.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("lowtail_gateway_pending_acked_total").increment(1);
        self.publish();
        let pending = Arc::clone(self);
        // The rest of the write keeps its request's latency class.
        tokio::spawn(crate::classes::carried(async move {
            let id = stripe.id;
            pending.land(&nodes, stripe, landing).await;
            lock(&pending.in_flight).remove(&id);
            pending.publish();
            drop(permit);
        }));
    }

    /// Awaits the unit writes and records the ones that landed.
    async fn land(&self, nodes: &NodeMap, stripe: StripeMeta, landing: Vec<(Landing, LateCopy)>) {
        let mut landed: Vec<(usize, NodeId)> = Vec::new();
        for ((unit, node, handle), place) in landing {
            let outcome = handle.await;
            drop(place);
            match outcome {
                Ok(Ok(())) => landed.push((unit, node)),
                Ok(Err(error)) => {
                    tracing::info!(stripe = %stripe.id, unit, %error, "pending unit write failed; repair rebuilds it");
                    self.count_failed(1);
                }
                Err(error) => {
                    tracing::warn!(stripe = %stripe.id, unit, %error, "pending unit write task ended abnormally");
                    self.count_failed(1);
                }
            }
        }
        match self.record_landed(stripe.id, &landed).await {
            Ok(Recorded { cleared, unreferenced }) => {
                self.landed.fetch_add(cleared as u64, Ordering::Relaxed);
                metrics::counter!("lowtail_gateway_pending_units_landed_total").increment(cleared as u64);
                self.io.delete_units_best_effort(nodes, stripe.id, &unreferenced).await;
            }
            Err(error) => {
                tracing::warn!(stripe = %stripe.id, %error, "landed units not recorded; repair rewrites them after the deadline");
            }
        }
    }

    fn count_failed(&self, units: u64) {
        self.failed.fetch_add(units, Ordering::Relaxed);
        metrics::counter!("lowtail_gateway_pending_units_failed_total").increment(units);
    }

    /// Clears `landed` (unit, node) from the stripe's missing units where the record still places
    /// the unit there, and ends its pending state (what is still missing is repair's now). Returns
    /// how many were cleared and the copies nothing references (the stripe released, or the unit
    /// moved by repair meanwhile), for deletion.
    async fn record_landed(&self, id: StripeId, landed: &[(usize, NodeId)]) -> Result<Recorded, MetaError> {
        let meta = self.io.cluster().meta();
        for _attempt in 0..CAS_ATTEMPTS {
            let current = match meta.get_stripe(id).await {
                Ok(current) => current,
                Err(MetaError::NoSuchStripe(_)) => return Ok(Recorded { cleared: 0, unreferenced: landed.to_vec() }),
                Err(error) => return Err(error),
            };
            let (placed, unreferenced): (Vec<UnitOn>, Vec<UnitOn>) =
                landed.iter().copied().partition(|&(unit, node)| current.placement.get(unit) == Some(&node));
            let clear: Vec<u16> =
                placed.iter().filter(|(unit, _)| current.is_missing(*unit)).map(|&(unit, _)| unit as u16).collect();
            let mut updated = current.clone();
            updated.clear_missing(clear.iter().copied());
            updated.pending_until_ms = None;
            updated.pending_writer = None;
            if updated == current {
                return Ok(Recorded { cleared: 0, unreferenced });
            }
            match meta.update_stripe(id, current.version, updated).await {
                Ok(_) => return Ok(Recorded { cleared: clear.len(), unreferenced }),
                Err(MetaError::Conflict(_)) => continue,
                Err(error) => return Err(error),
            }
        }
        Err(MetaError::Conflict(format!("stripe {id} kept changing")))
    }

    /// Sets the gauges from the stripes in flight.
    fn publish(&self) {
        let status = self.status();
        metrics::gauge!("lowtail_gateway_pending_stripes").set(status.stripes_in_flight as f64);
        metrics::gauge!("lowtail_gateway_pending_bytes").set(status.bytes_in_flight as f64);
    }

    /// What this gateway is finishing now and has finished.
    pub fn status(&self) -> PendingStatus {
        let in_flight = lock(&self.in_flight);
        PendingStatus {
            stripes_in_flight: in_flight.len() as u64,
            bytes_in_flight: in_flight.values().map(|f| f.bytes).sum(),
            oldest_acked_ms: in_flight.values().map(|f| f.acked_ms).min(),
            stripes_acked_early: self.acked_early.load(Ordering::Relaxed),
            acked_past_straggler: self.acked_past_straggler.load(Ordering::Relaxed),
            units_landed: self.landed.load(Ordering::Relaxed),
            units_failed: self.failed.load(Ordering::Relaxed),
            refused_full: self.refused_full.load(Ordering::Relaxed),
            late_copies_in_flight: self.late_copies.in_flight(),
            late_copies_dropped: self.late_copies.dropped(),
        }
    }

    /// Waits until no stripe is in flight, or `timeout` passes; whether none is (for a graceful
    /// shutdown, and tests).
    pub async fn drain(&self, timeout: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while !lock(&self.in_flight).is_empty() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        true
    }
}

/// A unit of a stripe and the node a copy of it is on.
type UnitOn = (usize, NodeId);

/// What recording landed units did.
struct Recorded {
    cleared: usize,
    unreferenced: Vec<(usize, NodeId)>,
}
