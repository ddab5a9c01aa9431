//! Orphan collection: deletes the units that storage nodes hold but no stripe references. They
//! appear when a node comes back after repair rebuilt its units elsewhere, when an object is
//! deleted while a node holding one of its units is down, when a write fails after some units
//! landed (or its acknowledgement was lost and the unit went to another node), and when a packed
//! stripe is sealed but its replicas could not all be dropped. Left alone they only cost space, so
//! the collector is slow and careful: a unit is deleted only after it was judged an orphan in two
//! scans at least `grace_ms` apart with the same generation, and the delete itself is conditional
//! on that generation, so a unit written again meanwhile (repair choosing this node, a retried
//! write) is never deleted.
//!
//! In backend mode the "units" are the keys of the backend bucket ([`crate::data::io::backend`]): a key whose
//! stripe has no record is judged in two scans a grace apart with the same ETag, then deleted (a
//! write cut short before its stripe was recorded, a release whose deletes failed).
//!
//! Owns: the per-gateway list of candidate orphans and the decision rule ([`orphan_reason`]).
//! Must not: delete a unit the metadata references, treat a metadata error as "no such stripe",
//! change any metadata, or read units (it lists and deletes only).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use meta::{MetaError, NodeId, NodeInfo, NodeState, StripeId, StripeMeta, StripeState};
use node::{ConditionalDelete, NodeClient};
use serde::Serialize;

use crate::data::cluster::membership::BackgroundTask;
use crate::data::config::OrphanConfig;
use crate::data::io::backend::S3Backend;
use crate::data::io::replica::REPLICA_UNIT_BASE;
use crate::data::io::stripe_io::StripeIo;
use crate::data::{DataError, lock};

/// Units listed per page of a node's store.
const UNIT_PAGE: u32 = 1000;
/// Stripe ids read per page of a node's metadata index.
const STRIPE_PAGE: usize = 1000;
/// Most pages of one node's units a scan reads (100 M units); the rest wait for the next scan.
const MAX_UNIT_PAGES_PER_NODE: usize = 100_000;
/// Most candidates remembered between scans; beyond it new orphans wait for a later scan.
const MAX_CANDIDATES: usize = 1_000_000;

/// Why a stored unit is an orphan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrphanReason {
    /// No stripe with this id exists (deleted, or never created because its write failed).
    NoStripe,
    /// The stripe places this unit on another node (repair moved it, or a write retried it
    /// elsewhere), or the stripe has no unit with this index.
    PlacedElsewhere,
    /// A replica of a packed stripe that is already sealed (its data is in the stripe's units).
    SealedReplica,
}

/// Whether unit `unit` of a stripe, stored on `node`, is referenced by the stripe's metadata
/// (`stripe`, `None` when no such stripe exists): `None` when it is, else why not.
pub fn orphan_reason(stripe: Option<&StripeMeta>, unit: u16, node: NodeId) -> Option<OrphanReason> {
    let Some(stripe) = stripe else { return Some(OrphanReason::NoStripe) };
    if unit >= REPLICA_UNIT_BASE {
        // Replicas are the data of an open packed stripe until it is sealed.
        return match stripe.state {
            StripeState::Open => None,
            StripeState::Sealed => Some(OrphanReason::SealedReplica),
        };
    }
    match stripe.placement.get(usize::from(unit)) {
        Some(&placed) if placed == node => None,
        _ => Some(OrphanReason::PlacedElsewhere),
    }
}

/// Orphan collection so far, for `lowtail admin status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OrphanStatus {
    /// Scans finished since start.
    pub scans: u64,
    /// Orphan units deleted since start.
    pub units_deleted: u64,
    /// Data bytes of the orphan units deleted since start.
    pub bytes_deleted: u64,
    /// Units judged orphans, waiting out the grace period.
    pub candidates: u64,
    /// Nodes the last scan could not finish (unreachable, or the metadata store failed); their
    /// candidates are kept for the next scan.
    pub nodes_skipped: u64,
}

/// What one scan did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanReport {
    /// Units judged orphans in this scan (deleted or not).
    pub orphans: u64,
    /// Of those, deleted now.
    pub deleted: u64,
    /// Data bytes deleted now.
    pub bytes_deleted: u64,
    /// Candidates kept because the unit was written again since it was judged (their grace starts over).
    pub rewritten: u64,
    /// Nodes skipped (see [`OrphanStatus::nodes_skipped`]).
    pub nodes_skipped: u64,
}

#[derive(Clone, Copy, Debug)]
struct Candidate {
    generation: u64,
    first_seen: Instant,
}

type CandidateKey = (NodeId, StripeId, u16);

/// The orphan collector; see the module documentation.
#[derive(Debug)]
pub struct OrphanCollector {
    io: Arc<StripeIo>,
    config: OrphanConfig,
    candidates: Mutex<HashMap<CandidateKey, Candidate>>,
    scans: AtomicU64,
    units_deleted: AtomicU64,
    bytes_deleted: AtomicU64,
    nodes_skipped: AtomicU64,
}

impl OrphanCollector {
    /// A collector over the data path's unit I/O.
    pub fn new(io: Arc<StripeIo>, config: OrphanConfig) -> Self {
        Self {
            io,
            config,
            candidates: Mutex::new(HashMap::new()),
            scans: AtomicU64::new(0),
            units_deleted: AtomicU64::new(0),
            bytes_deleted: AtomicU64::new(0),
            nodes_skipped: AtomicU64::new(0),
        }
    }

    /// Progress so far.
    pub fn status(&self) -> OrphanStatus {
        OrphanStatus {
            scans: self.scans.load(Ordering::Relaxed),
            units_deleted: self.units_deleted.load(Ordering::Relaxed),
            bytes_deleted: self.bytes_deleted.load(Ordering::Relaxed),
            candidates: lock(&self.candidates).len() as u64,
            nodes_skipped: self.nodes_skipped.load(Ordering::Relaxed),
        }
    }

    /// Runs a scan every `scan_interval_ms` until the returned task is stopped; `None` when
    /// collection is off (`scan_interval_ms` = 0).
    pub fn spawn(self: Arc<Self>) -> Option<BackgroundTask> {
        if self.config.scan_interval_ms == 0 {
            return None;
        }
        let interval = Duration::from_millis(self.config.scan_interval_ms);
        Some(BackgroundTask::periodic("orphans", interval, move || {
            let collector = Arc::clone(&self);
            async move {
                match collector.scan_at(Instant::now()).await {
                    Ok(report) if report.deleted > 0 || report.nodes_skipped > 0 => {
                        tracing::info!(?report, "orphan scan");
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "orphan scan failed"),
                }
            }
        }))
    }

    /// One pass over every Up node at time `now` (tests pass a later `now` to skip the grace):
    /// judges each stored unit against the metadata, remembers new orphans, and deletes those
    /// judged orphans with the same generation at least `grace_ms` before.
    pub async fn scan_at(&self, now: Instant) -> Result<ScanReport, DataError> {
        if let Some(backend) = self.io.backend() {
            return self.scan_backend(backend, now).await;
        }
        let mut nodes: Vec<NodeInfo> =
            self.io.cluster().node_map().await?.into_values().filter(|n| n.state == NodeState::Up).collect();
        nodes.sort_by_key(|n| n.id);
        let previous = std::mem::take(&mut *lock(&self.candidates));
        let mut next: HashMap<CandidateKey, Candidate> = HashMap::new();
        let mut report = ScanReport::default();
        let mut deletes_left = self.config.max_deletes_per_scan;
        for node in &nodes {
            let scanned = self.scan_node(node, now, &previous, &mut next, &mut deletes_left, &mut report).await;
            if let Err(error) = scanned {
                // Keep what was known of this node: an unreachable node must not restart its grace.
                tracing::warn!(node = %node.id, %error, "orphan scan of a node not finished");
                report.nodes_skipped += 1;
                next.extend(previous.iter().filter(|((n, _, _), _)| *n == node.id).map(|(k, c)| (*k, *c)));
            }
        }
        metrics::gauge!("lowtail_gateway_orphan_candidates").set(next.len() as f64);
        *lock(&self.candidates) = next;
        self.scans.fetch_add(1, Ordering::Relaxed);
        self.nodes_skipped.store(report.nodes_skipped, Ordering::Relaxed);
        Ok(report)
    }

    async fn scan_node(
        &self,
        node: &NodeInfo,
        now: Instant,
        previous: &HashMap<CandidateKey, Candidate>,
        next: &mut HashMap<CandidateKey, Candidate>,
        deletes_left: &mut usize,
        report: &mut ScanReport,
    ) -> Result<(), DataError> {
        let client = self.io.cluster().client(node).await.map_err(|e| DataError::Unavailable(e.to_string()))?;
        let grace = Duration::from_millis(self.config.grace_ms);
        let mut on_node = StripesOnNode::new(node.id);
        let mut after = None;
        for _page in 0..MAX_UNIT_PAGES_PER_NODE {
            let listing =
                client.list_units(after, UNIT_PAGE).await.map_err(|e| DataError::Unavailable(e.to_string()))?;
            let units = &listing.units;
            let Some(last) = units.last() else { break };
            // The metadata of the stripes this page needs, fetched once each.
            let mut stripes: HashMap<StripeId, Option<StripeMeta>> = HashMap::new();
            for (i, unit) in units.iter().enumerate() {
                let id = StripeId(unit.stripe);
                let index =
                    u16::try_from(unit.unit).map_err(|_| DataError::Internal("unit index over 16 bits".into()))?;
                // The node's listing and the metadata's index of this node are both in stripe order;
                // a stripe the index lists here with one unit on the node is referenced, unless the
                // unit's index is not the placed one, which only a node holding two units of the
                // stripe (or one at a page boundary) can show. Every other unit is checked against
                // the stripe's record, and only that record decides an orphan.
                let same_stripe =
                    |j: Option<usize>| j.and_then(|j| units.get(j)).is_some_and(|u| u.stripe == unit.stripe);
                let shares_stripe = same_stripe(i.checked_sub(1)) || same_stripe(Some(i + 1));
                let at_boundary = i == 0 || i + 1 == units.len();
                let listed = on_node.contains(self.io.cluster().meta().as_ref(), id).await?;
                if listed && index < REPLICA_UNIT_BASE && !shares_stripe && !at_boundary {
                    continue;
                }
                if let Entry::Vacant(slot) = stripes.entry(id) {
                    slot.insert(match self.io.cluster().meta().get_stripe(id).await {
                        Ok(stripe) => Some(stripe),
                        Err(MetaError::NoSuchStripe(_)) => None,
                        Err(error) => return Err(DataError::Meta(error.to_string())),
                    });
                }
                let Some(reason) = orphan_reason(stripes[&id].as_ref(), index, node.id) else { continue };
                report.orphans += 1;
                let key = (node.id, id, index);
                let first_seen = match previous.get(&key) {
                    Some(seen) if seen.generation == unit.generation => seen.first_seen,
                    Some(_) => {
                        report.rewritten += 1;
                        now
                    }
                    None => now,
                };
                if now.saturating_duration_since(first_seen) >= grace && *deletes_left > 0 {
                    *deletes_left -= 1;
                    match self.delete(&client, key, unit.generation).await {
                        Ok(true) => {
                            tracing::info!(node = %node.id, stripe = %id, unit = index, ?reason, bytes = unit.len, "orphan unit deleted");
                            self.count_deleted(report, unit.len);
                        }
                        // Written again (or gone) since the listing: judged afresh next scan.
                        Ok(false) => report.rewritten += 1,
                        Err(error) => {
                            tracing::debug!(node = %node.id, stripe = %id, unit = index, %error, "orphan delete failed");
                            next.insert(key, Candidate { generation: unit.generation, first_seen });
                        }
                    }
                } else if next.len() < MAX_CANDIDATES {
                    next.insert(key, Candidate { generation: unit.generation, first_seen });
                }
            }
            if !listing.truncated {
                break;
            }
            after = Some((last.stripe, u16::try_from(last.unit).unwrap_or(u16::MAX)));
        }
        Ok(())
    }

    /// One pass over the backend bucket's unit keys (see the module documentation); a listing or
    /// metadata error ends the pass, keeping what was known.
    async fn scan_backend(&self, backend: &S3Backend, now: Instant) -> Result<ScanReport, DataError> {
        let previous = std::mem::take(&mut *lock(&self.candidates));
        let mut next: HashMap<CandidateKey, Candidate> = HashMap::new();
        let mut report = ScanReport::default();
        let scanned = self.scan_backend_keys(backend, now, &previous, &mut next, &mut report).await;
        if let Err(error) = &scanned {
            tracing::warn!(%error, "orphan scan of the backend not finished");
            report.nodes_skipped = 1;
            for (key, candidate) in previous {
                next.entry(key).or_insert(candidate);
            }
        }
        metrics::gauge!("lowtail_gateway_orphan_candidates").set(next.len() as f64);
        *lock(&self.candidates) = next;
        self.scans.fetch_add(1, Ordering::Relaxed);
        self.nodes_skipped.store(report.nodes_skipped, Ordering::Relaxed);
        scanned.map(|()| report)
    }

    async fn scan_backend_keys(
        &self,
        backend: &S3Backend,
        now: Instant,
        previous: &HashMap<CandidateKey, Candidate>,
        next: &mut HashMap<CandidateKey, Candidate>,
        report: &mut ScanReport,
    ) -> Result<(), DataError> {
        let grace = Duration::from_millis(self.config.grace_ms);
        let mut deletes_left = self.config.max_deletes_per_scan;
        let mut token = None;
        for _page in 0..MAX_UNIT_PAGES_PER_NODE {
            let (units, following) = backend.list_units(token).await.map_err(DataError::Unavailable)?;
            let mut stripes: HashMap<StripeId, Option<StripeMeta>> = HashMap::new();
            for unit in units {
                if let Entry::Vacant(slot) = stripes.entry(unit.stripe) {
                    slot.insert(match self.io.cluster().meta().get_stripe(unit.stripe).await {
                        Ok(stripe) => Some(stripe),
                        Err(MetaError::NoSuchStripe(_)) => None,
                        Err(error) => return Err(DataError::Meta(error.to_string())),
                    });
                }
                // A unit's key names no slot: it is referenced when its stripe records a unit of
                // that index, wherever the stripe placed it.
                let stripe = stripes[&unit.stripe].as_ref();
                let slot =
                    stripe.and_then(|s| s.placement.get(usize::from(unit.unit)).copied()).unwrap_or(NodeId(u32::MAX));
                let Some(reason) = orphan_reason(stripe, unit.unit, slot) else { continue };
                report.orphans += 1;
                let key = (slot, unit.stripe, unit.unit);
                let generation = etag_generation(&unit.etag);
                let first_seen = match previous.get(&key) {
                    Some(seen) if seen.generation == generation => seen.first_seen,
                    Some(_) => {
                        report.rewritten += 1;
                        now
                    }
                    None => now,
                };
                if now.saturating_duration_since(first_seen) >= grace && deletes_left > 0 {
                    deletes_left -= 1;
                    match backend.delete_unit(unit.stripe, usize::from(unit.unit)).await {
                        Ok(()) => {
                            tracing::info!(stripe = %unit.stripe, unit = unit.unit, ?reason, "orphan backend key deleted");
                            self.count_deleted(report, unit.bytes);
                        }
                        Err(error) => {
                            tracing::debug!(stripe = %unit.stripe, unit = unit.unit, %error, "orphan key delete failed");
                            next.insert(key, Candidate { generation, first_seen });
                        }
                    }
                } else if next.len() < MAX_CANDIDATES {
                    next.insert(key, Candidate { generation, first_seen });
                }
            }
            match following {
                Some(following) => token = Some(following),
                None => break,
            }
        }
        Ok(())
    }

    /// Counts one orphan deleted, of `bytes`, in the scan's report, the totals and the metrics.
    fn count_deleted(&self, report: &mut ScanReport, bytes: u64) {
        report.deleted += 1;
        report.bytes_deleted += bytes;
        self.units_deleted.fetch_add(1, Ordering::Relaxed);
        self.bytes_deleted.fetch_add(bytes, Ordering::Relaxed);
        metrics::counter!("lowtail_gateway_orphan_units_deleted_total").increment(1);
        metrics::counter!("lowtail_gateway_orphan_bytes_deleted_total").increment(bytes);
    }

    /// Deletes one unit if it still has `generation`: `Ok(true)` when it is gone now.
    async fn delete(&self, client: &NodeClient, key: CandidateKey, generation: u64) -> Result<bool, DataError> {
        let (_, stripe, unit) = key;
        match client.delete_unit_if_generation(stripe.0, unit, generation).await {
            Ok(ConditionalDelete::Deleted) => Ok(true),
            Ok(ConditionalDelete::Changed | ConditionalDelete::Absent) => Ok(false),
            Err(error) => Err(DataError::Unavailable(error.to_string())),
        }
    }
}

/// A backend key's "generation": its ETag, hashed (a key written again has another).
fn etag_generation(etag: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    etag.hash(&mut hasher);
    hasher.finish()
}

/// A forward-only cursor over the metadata's index of the stripes with a unit on one node (in
/// stripe order), for a merge with the node's own listing: memory stays one page whatever the
/// node holds.
struct StripesOnNode {
    node: NodeId,
    page: VecDeque<StripeId>,
    after: Option<StripeId>,
    exhausted: bool,
}

impl StripesOnNode {
    fn new(node: NodeId) -> Self {
        Self { node, page: VecDeque::new(), after: None, exhausted: false }
    }

    /// Whether the index lists `stripe` on the node. Calls must come in non-decreasing order.
    async fn contains(&mut self, meta: &dyn meta::MetaStore, stripe: StripeId) -> Result<bool, DataError> {
        // Bounded: each round consumes a page, and the index is finite.
        loop {
            while self.page.front().is_some_and(|&front| front < stripe) {
                self.page.pop_front();
            }
            if let Some(&front) = self.page.front() {
                return Ok(front == stripe);
            }
            if self.exhausted {
                return Ok(false);
            }
            let page = meta
                .stripes_on_node(self.node, self.after, STRIPE_PAGE)
                .await
                .map_err(|e| DataError::Meta(e.to_string()))?;
            self.exhausted = page.len() < STRIPE_PAGE;
            if let Some(&last) = page.last() {
                assert!(self.after.is_none_or(|after| last > after), "stripes_on_node pages move forward");
                self.after = Some(last);
            }
            self.page.extend(page);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stripe(state: StripeState, placement: &[u32]) -> StripeMeta {
        let placement = placement.iter().map(|&n| NodeId(n)).collect();
        StripeMeta { state, version: 1, ..StripeMeta::sealed(StripeId(9), "rs-2-1", 64, placement) }
    }

    #[test]
    fn a_unit_is_an_orphan_only_when_its_stripe_does_not_place_it_on_its_node() {
        let sealed = stripe(StripeState::Sealed, &[4, 5, 6]);
        assert_eq!(orphan_reason(Some(&sealed), 1, NodeId(5)), None);
        assert_eq!(orphan_reason(Some(&sealed), 1, NodeId(4)), Some(OrphanReason::PlacedElsewhere));
        assert_eq!(orphan_reason(Some(&sealed), 3, NodeId(4)), Some(OrphanReason::PlacedElsewhere), "no unit 3");
        assert_eq!(orphan_reason(None, 0, NodeId(4)), Some(OrphanReason::NoStripe));
        // Replicas live while their packed stripe is open, whichever node holds them.
        let open = stripe(StripeState::Open, &[4, 5, 6]);
        assert_eq!(orphan_reason(Some(&open), REPLICA_UNIT_BASE, NodeId(6)), None);
        assert_eq!(orphan_reason(Some(&open), REPLICA_UNIT_BASE + 3, NodeId(9)), None);
        assert_eq!(orphan_reason(Some(&sealed), REPLICA_UNIT_BASE, NodeId(6)), Some(OrphanReason::SealedReplica));
        assert_eq!(orphan_reason(None, REPLICA_UNIT_BASE, NodeId(6)), Some(OrphanReason::NoStripe));
        // A data unit of an open stripe on its placed node (written by a seal in progress) is kept.
        assert_eq!(orphan_reason(Some(&open), 0, NodeId(4)), None);
    }
}
