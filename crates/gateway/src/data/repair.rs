//! The repair service: rebuilds the units of nodes that stayed Down longer than the grace period,
//! and units reported corrupt, onto other Up nodes that hold no unit of the stripe (read a recovery
//! set, decode at the gateway, write, then compare-and-swap the stripe's placement). Paced (stripes
//! at once, source bytes per second) so client reads keep the disks. Progress is exported as
//! metrics and through [`RepairService::status`]. Must not serve client reads or change object
//! metadata; it only moves units and updates stripe placements.
//!
//! **One repairer per cluster.** Every gateway watches membership, but only the holder of the
//! `repair` lease ([`meta::MetaStore::claim_lease`], claimed at each scan and renewed during a long
//! one) rebuilds the units of Down nodes and the corrupt units the nodes list, so several gateways
//! do not all read the same recovery sets (only one compare-and-swap would win) and the read budget
//! holds for the cluster, not per gateway. The others rebuild only the corrupt units their own reads
//! reported. Safety does not depend on the lease: two repairers at once lose a compare-and-swap and
//! undo, as before.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{StreamExt, stream};
use meta::{MetaError, NodeId, NodeInfo, NodeState, StripeId, StripeState};
use serde::Serialize;

use super::config::RepairConfig;
use super::lease::LeaseClaims;
use super::membership::{BackgroundTask, unix_now_ms};
use super::stripe_io::{NodeMap, StripeIo};
use super::{DataError, lock, meta_error};

/// Stripe ids read per page of a node's index.
const STRIPE_PAGE: usize = 256;
/// Compare-and-swap attempts per stripe before it is left for the next scan.
const CAS_ATTEMPTS: usize = 3;
/// Most stripes one scan takes on; the rest wait for the next scan.
const MAX_STRIPES_PER_SCAN: usize = 100_000;
/// The lease the gateways elect one repairer by.
pub const REPAIR_LEASE: &str = "repair";
/// The repair lease's term: this many scan intervals, and at least [`MIN_LEASE_TERM`]; a scan
/// renews it every third of the term, so a stopped holder is replaced within one term.
const LEASE_TERM_SCANS: u64 = 10;
const MIN_LEASE_TERM: Duration = Duration::from_secs(30);

/// Repair progress, for `lowtail admin status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RepairStatus {
    /// Stripes whose lost units were all rebuilt, since start.
    pub stripes_repaired: u64,
    /// Units rebuilt, since start.
    pub units_repaired: u64,
    /// Bytes of units rebuilt, since start.
    pub bytes_repaired: u64,
    /// Stripe repairs that failed (retried at the next scan), since start.
    pub stripe_failures: u64,
    /// Stripes the current scan still has to repair.
    pub stripes_remaining: u64,
    /// Down nodes still within the grace period.
    pub nodes_in_grace: Vec<NodeId>,
    /// Down nodes past the grace period whose units are being rebuilt (by this gateway: empty
    /// when another holds the repair lease).
    pub nodes_repairing: Vec<NodeId>,
    /// The gateway that held the repair lease at this gateway's last claim (`None` before the first).
    pub lease_holder: Option<String>,
}

#[derive(Debug, Default)]
struct Progress {
    stripes: AtomicU64,
    units: AtomicU64,
    bytes: AtomicU64,
    failures: AtomicU64,
    remaining: AtomicU64,
}

/// The repair service; see the module documentation.
#[derive(Debug)]
pub struct RepairService {
    io: Arc<StripeIo>,
    config: RepairConfig,
    /// When this gateway first saw each node Down.
    down_since: Mutex<HashMap<NodeId, Instant>>,
    /// Earliest time the next paced read may start.
    next_read_at: tokio::sync::Mutex<Instant>,
    progress: Progress,
    nodes_repairing: Mutex<Vec<NodeId>>,
    lease: LeaseClaims,
}

impl RepairService {
    /// A repair service over the data path's unit I/O.
    pub fn new(io: Arc<StripeIo>, config: RepairConfig) -> Self {
        let lease = LeaseClaims::new(REPAIR_LEASE, io.config().gateway_id());
        Self {
            io,
            config,
            down_since: Mutex::new(HashMap::new()),
            next_read_at: tokio::sync::Mutex::new(Instant::now()),
            progress: Progress::default(),
            nodes_repairing: Mutex::new(Vec::new()),
            lease,
        }
    }

    fn lease_term(&self) -> Duration {
        MIN_LEASE_TERM.max(Duration::from_millis(self.config.scan_interval_ms.saturating_mul(LEASE_TERM_SCANS)))
    }

    /// Claims (or renews) the repair lease; whether this gateway holds it.
    async fn claim(&self) -> Result<bool, DataError> {
        let term_ms = self.lease_term().as_millis() as u64;
        self.lease.claim(self.io.cluster().meta().as_ref(), unix_now_ms(), term_ms).await.map_err(meta_error)
    }

    /// Progress so far.
    pub fn status(&self) -> RepairStatus {
        let grace = Duration::from_millis(self.config.grace_ms);
        let mut nodes_in_grace: Vec<NodeId> =
            lock(&self.down_since).iter().filter(|(_, since)| since.elapsed() < grace).map(|(node, _)| *node).collect();
        nodes_in_grace.sort();
        RepairStatus {
            stripes_repaired: self.progress.stripes.load(Ordering::Relaxed),
            units_repaired: self.progress.units.load(Ordering::Relaxed),
            bytes_repaired: self.progress.bytes.load(Ordering::Relaxed),
            stripe_failures: self.progress.failures.load(Ordering::Relaxed),
            stripes_remaining: self.progress.remaining.load(Ordering::Relaxed),
            nodes_in_grace,
            nodes_repairing: lock(&self.nodes_repairing).clone(),
            lease_holder: self.lease.last_holder(),
        }
    }

    /// Runs scans every `scan_interval_ms` until the returned task is stopped.
    pub fn spawn(self: Arc<Self>) -> BackgroundTask {
        let interval = Duration::from_millis(self.config.scan_interval_ms);
        BackgroundTask::periodic("repair", interval, move || {
            let repair = Arc::clone(&self);
            async move {
                if let Err(error) = repair.scan().await {
                    tracing::warn!(%error, "repair scan failed");
                }
            }
        })
    }

    /// One pass: notes newly Down nodes and claims the repair lease; holding it, rebuilds every
    /// stripe with a unit on a node Down for longer than the grace period and every unit reported
    /// corrupt (by this gateway's reads or by the nodes' stats), renewing the lease as it goes and
    /// starting no more stripes if it is lost; not holding it, only the units its own reads
    /// reported corrupt.
    pub async fn scan(&self) -> Result<(), DataError> {
        let nodes = self.io.cluster().node_map().await?;
        let past_grace = self.nodes_past_grace(&nodes);
        let mut claimed = Instant::now();
        let held = self.claim().await?;
        let due = if held { past_grace } else { Vec::new() };
        *lock(&self.nodes_repairing) = due.clone();
        // stripe → units known corrupt on the node that holds them.
        let mut work: BTreeMap<StripeId, Vec<(u16, NodeId)>> = BTreeMap::new();
        for node in &due {
            let mut after = None;
            while work.len() < MAX_STRIPES_PER_SCAN {
                let page = self
                    .io
                    .cluster()
                    .meta()
                    .stripes_on_node(*node, after, STRIPE_PAGE)
                    .await
                    .map_err(|e| DataError::Meta(e.to_string()))?;
                let Some(last) = page.last() else { break };
                after = Some(*last);
                page.into_iter().for_each(|id| {
                    work.entry(id).or_default();
                });
            }
        }
        let corrupt = if held { self.corrupt_units(&nodes).await } else { self.reported_corrupt_units() };
        for (stripe, unit, node) in corrupt {
            work.entry(stripe).or_default().push((unit, node));
        }
        self.progress.remaining.store(work.len() as u64, Ordering::Relaxed);
        metrics::gauge!("lowtail_gateway_repair_stripes_remaining").set(work.len() as f64);
        let nodes = &nodes;
        let still_held = std::sync::atomic::AtomicBool::new(true);
        let still_held = &still_held;
        let mut repairs = stream::iter(work.into_iter().map(|(stripe, corrupt)| async move {
            // A holder that lost the lease mid-scan starts no more stripes: the new one takes them.
            if held && !still_held.load(Ordering::Relaxed) {
                return (stripe, Ok(0));
            }
            (stripe, self.repair_stripe(nodes, stripe, &corrupt).await)
        }))
        .buffer_unordered(self.config.max_concurrent_stripes);
        while let Some((stripe, result)) = repairs.next().await {
            self.progress.remaining.fetch_sub(1, Ordering::Relaxed);
            metrics::gauge!("lowtail_gateway_repair_stripes_remaining").decrement(1.0);
            if let Err(error) = result {
                self.progress.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%stripe, %error, "stripe repair failed; retried at the next scan");
            }
            if held && still_held.load(Ordering::Relaxed) && claimed.elapsed() >= self.lease_term() / 3 {
                claimed = Instant::now();
                match self.claim().await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!("repair lease lost mid-scan; the rest is left to its new holder");
                        still_held.store(false, Ordering::Relaxed);
                    }
                    Err(error) => {
                        tracing::warn!(%error, "repair lease not renewed; tried again a third of a term later")
                    }
                }
            }
        }
        Ok(())
    }

    fn nodes_past_grace(&self, nodes: &NodeMap) -> Vec<NodeId> {
        let grace = Duration::from_millis(self.config.grace_ms);
        let mut down_since = lock(&self.down_since);
        down_since.retain(|node, _| nodes.get(node).is_some_and(|n| n.state == NodeState::Down));
        let now = Instant::now();
        for node in nodes.values().filter(|n| n.state == NodeState::Down) {
            down_since.entry(node.id).or_insert(now);
        }
        let mut due: Vec<NodeId> =
            down_since.iter().filter(|(_, since)| now.duration_since(**since) >= grace).map(|(n, _)| *n).collect();
        due.sort();
        due
    }

    /// Corrupt units this gateway's reads reported.
    fn reported_corrupt_units(&self) -> BTreeSet<(StripeId, u16, NodeId)> {
        self.io.take_corrupt_reports().into_iter().collect()
    }

    /// Corrupt units reported by reads, plus those the Up nodes list in their stats.
    async fn corrupt_units(&self, nodes: &NodeMap) -> BTreeSet<(StripeId, u16, NodeId)> {
        let mut found = self.reported_corrupt_units();
        for node in nodes.values().filter(|n| n.state == NodeState::Up) {
            let Ok(client) = self.io.cluster().client(node).await else { continue };
            match client.stats().await {
                Ok(stats) => found.extend(
                    stats
                        .corrupt_units
                        .iter()
                        .filter_map(|u| u16::try_from(u.unit).ok().map(|unit| (StripeId(u.stripe), unit, node.id))),
                ),
                Err(error) => tracing::debug!(node = %node.id, %error, "no stats for corrupt units"),
            }
        }
        found
    }

    /// Waits until `bytes` more source bytes fit the read budget.
    async fn pace(&self, bytes: u64) {
        let cost = Duration::from_secs_f64(bytes as f64 / self.config.max_read_bytes_per_s as f64);
        let start = {
            let mut next = self.next_read_at.lock().await;
            let start = (*next).max(Instant::now());
            *next = start + cost;
            start
        };
        tokio::time::sleep_until(start.into()).await;
    }

    /// Rebuilds every unit of `id` whose node is not Up, or which is listed in `corrupt` as corrupt
    /// on the node that still holds it, onto new nodes; returns how many units were rebuilt.
    pub async fn repair_stripe(
        &self,
        nodes: &NodeMap,
        id: StripeId,
        corrupt: &[(u16, NodeId)],
    ) -> Result<usize, DataError> {
        let meta = self.io.cluster().meta();
        let node_list: Vec<NodeInfo> = nodes.values().cloned().collect();
        for _attempt in 0..CAS_ATTEMPTS {
            let stripe = match meta.get_stripe(id).await {
                Ok(stripe) => stripe,
                // Released meanwhile: nothing left to protect.
                Err(MetaError::NoSuchStripe(_)) => return Ok(0),
                Err(error) => return Err(DataError::Meta(error.to_string())),
            };
            if stripe.state == StripeState::Open {
                // An open (packing) stripe has no units yet, only replicas of its objects on m + 1
                // nodes; its packer seals it within `packed.seal_after_ms`, replacing Down nodes,
                // and a later scan repairs the sealed stripe if it still needs it.
                return Ok(0);
            }
            let lost: Vec<usize> = (0..stripe.placement.len())
                .filter(|&unit| {
                    let node = stripe.placement[unit];
                    !nodes.get(&node).is_some_and(|n| n.state == NodeState::Up)
                        || corrupt.iter().any(|&(u, on)| usize::from(u) == unit && on == node)
                })
                .collect();
            if lost.is_empty() {
                return Ok(0);
            }
            let code = self.io.code(&stripe.code)?;
            let lost_nodes: Vec<NodeId> = lost.iter().map(|&u| stripe.placement[u]).collect();
            let peers: Vec<NodeId> =
                (0..stripe.placement.len()).filter(|u| !lost.contains(u)).map(|u| stripe.placement[u]).collect();
            let targets = self.choose_targets(nodes, &node_list, &stripe, &lost, &lost_nodes, &peers)?;
            // Units rebuilt on a new node (the others are corrupt copies rewritten where they are).
            let moved = |unit: usize, target: NodeId| stripe.placement[unit] != target;
            let failed: BTreeSet<usize> = lost.iter().copied().collect();
            let mut written: Vec<(usize, NodeId)> = Vec::new();
            let mut outcome = Ok(());
            for (&unit, &target) in lost.iter().zip(&targets) {
                self.pace(stripe.unit_bytes * code.data_units() as u64).await;
                let rebuilt = match self
                    .io
                    .rebuild_range(nodes, &stripe, code.as_ref(), unit, 0, stripe.unit_bytes, failed.clone())
                    .await
                {
                    Ok(rebuilt) => rebuilt,
                    Err(error) => {
                        outcome = Err(error);
                        break;
                    }
                };
                if let Err(error) = self.io.write_unit(&nodes[&target], id, unit, rebuilt).await {
                    outcome = Err(DataError::Unavailable(error));
                    break;
                }
                written.push((unit, target));
            }
            let mut updated = stripe.clone();
            for &(unit, target) in &written {
                updated.placement[unit] = target;
            }
            let result = match outcome {
                Ok(()) => meta.update_stripe(id, stripe.version, updated).await.map_err(|e| match e {
                    MetaError::Conflict(why) => DataError::Meta(format!("conflict: {why}")),
                    other => DataError::Meta(other.to_string()),
                }),
                Err(error) => Err(error),
            };
            match result {
                Ok(stored) => {
                    assert_eq!(stored.placement.iter().collect::<BTreeSet<_>>().len(), stored.placement.len());
                    {
                        let mut placer = self.io.placer();
                        lost.iter()
                            .zip(&targets)
                            .filter(|&(&unit, &target)| moved(unit, target))
                            .for_each(|(&unit, _)| placer.adjust(stripe.placement[unit], -1));
                    }
                    // Old copies of moved units on live nodes (corrupt ones) are dropped; dead
                    // nodes' are orphans. A copy rewritten in place is the new copy: it stays.
                    let stale: Vec<(usize, NodeId)> = lost
                        .iter()
                        .zip(&targets)
                        .filter(|&(&unit, &target)| moved(unit, target))
                        .map(|(&u, _)| (u, stripe.placement[u]))
                        .filter(|(_, node)| nodes.get(node).is_some_and(|n| n.state == NodeState::Up))
                        .collect();
                    self.io.delete_units_best_effort(nodes, id, &stale).await;
                    let bytes = stripe.unit_bytes * lost.len() as u64;
                    self.progress.stripes.fetch_add(1, Ordering::Relaxed);
                    self.progress.units.fetch_add(lost.len() as u64, Ordering::Relaxed);
                    self.progress.bytes.fetch_add(bytes, Ordering::Relaxed);
                    metrics::counter!("lowtail_gateway_repair_stripes_total").increment(1);
                    metrics::counter!("lowtail_gateway_repair_units_total").increment(lost.len() as u64);
                    metrics::counter!("lowtail_gateway_repair_bytes_total").increment(bytes);
                    tracing::info!(stripe = %id, units = ?lost, to = ?targets, "stripe repaired");
                    return Ok(lost.len());
                }
                Err(error) => {
                    // Undo: the new copies on new nodes are unreferenced. A copy rewritten in
                    // place is kept: it replaced the corrupt one, and the placement still names it.
                    // Another gateway repairing the same stripe may have won the compare-and-swap
                    // with a copy on the same node: unit files are named by (stripe, unit) only, so
                    // deleting "ours" would delete its referenced copy. Keep what the stored
                    // placement names.
                    let current = meta.get_stripe(id).await.map(|s| s.placement).unwrap_or_default();
                    let unreferenced: Vec<(usize, NodeId)> = written
                        .iter()
                        .copied()
                        .filter(|&(unit, target)| moved(unit, target) && current.get(unit) != Some(&target))
                        .collect();
                    self.io.delete_units_best_effort(nodes, id, &unreferenced).await;
                    {
                        let mut placer = self.io.placer();
                        lost.iter()
                            .zip(&targets)
                            .filter(|&(&unit, &target)| moved(unit, target))
                            .for_each(|(_, &target)| placer.adjust(target, -1));
                    }
                    if !matches!(&error, DataError::Meta(why) if why.starts_with("conflict")) {
                        return Err(error);
                    }
                }
            }
        }
        Err(DataError::Meta(format!("stripe {id}: placement kept changing during repair")))
    }

    /// A target node per lost unit: new Up nodes holding no unit of the stripe. When there are not
    /// enough of those (a cluster of exactly n nodes has none), a corrupt unit on an Up node is
    /// rewritten on its own node instead (the node's store replaces the bad file and forgets it was
    /// corrupt), so only units of nodes that are not Up need new homes.
    fn choose_targets(
        &self,
        nodes: &NodeMap,
        node_list: &[NodeInfo],
        stripe: &meta::StripeMeta,
        lost: &[usize],
        lost_nodes: &[NodeId],
        peers: &[NodeId],
    ) -> Result<Vec<NodeId>, DataError> {
        let is_up = |unit: usize| nodes.get(&stripe.placement[unit]).is_some_and(|n| n.state == NodeState::Up);
        let mut placer = self.io.placer();
        let everywhere = match placer.place(node_list, lost.len(), lost_nodes, peers) {
            Ok(targets) => return Ok(targets),
            Err(error) => error,
        };
        let must_move: Vec<usize> = lost.iter().copied().filter(|&unit| !is_up(unit)).collect();
        if must_move.len() == lost.len() {
            return Err(DataError::Unavailable(everywhere.to_string()));
        }
        let mut moved = placer
            .place(node_list, must_move.len(), lost_nodes, peers)
            .map_err(|e| DataError::Unavailable(e.to_string()))?
            .into_iter();
        Ok(lost
            .iter()
            .map(|&unit| if is_up(unit) { stripe.placement[unit] } else { moved.next().expect("one per unit to move") })
            .collect())
    }
}
