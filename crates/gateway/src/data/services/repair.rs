//! The repair service: brings every stripe back to n durable units, whatever order failures,
//! restarts and returns come in, and says how far it is from there.
//!
//! What needs repair is known durably, in the metadata store, never only in one gateway's memory:
//! - **missing units**: units a stripe records as not durable (`StripeMeta::missing_units`, found
//!   through the under-redundant index): never written by a degraded write or seal, or found
//!   corrupt or gone by a read or by a node's scrub. Every gateway turns the corrupt units it hears
//!   of into such records first (a compare-and-swap on the stripe), so a restart forgets nothing;
//! - **Down nodes** past the grace period, counted from `NodeInfo::down_since_ms`: their units (the
//!   node → stripe index) are rebuilt elsewhere; within the grace they are left alone, since a
//!   node that returns keeps its intact units.
//!
//! A missing unit is rebuilt onto the node its stripe names when that node is Up (in place: the
//! node's store replaces whatever file it had, stale or corrupt, and forgets it was corrupt), else
//! onto a spare Up node holding no unit of the stripe; a Down node's unit onto a spare. Rebuilding
//! reads a recovery set and decodes at the gateway, paced by how busy clients keep the gateway
//! (`min_read_bytes_per_s` to `max_read_bytes_per_s`, [`crate::data::services::repair_pace`]), then
//! compare-and-swaps the stripe's placement and missing units. Corrupt replicas of open packed
//! stripes are copied back from another replica. What cannot progress is grouped by cause and
//! logged once per cause (then at most once a minute while it lasts), and every scan ends with a
//! census of the stripes still short of n, for `lowtail admin status`.
//!
//! **One repairer per cluster.** Only the holder of the `repair` lease
//! ([`meta::MetaStore::claim_lease`], claimed at each scan and renewed during a long one) rebuilds;
//! the others record the corrupt units they hear of and count. Safety does not depend on the lease:
//! two repairers at once lose a compare-and-swap and undo.
//!
//! Must not: serve client reads, change object metadata, or trust a missing unit's file.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{StreamExt, stream};
use meta::{NodeId, NodeState, StripeId};

use crate::data::cluster::lease::LeaseClaims;
use crate::data::cluster::membership::{BackgroundTask, unix_now_ms};
use crate::data::config::RepairConfig;
use crate::data::io::stripe_io::{NodeMap, StripeIo};
use crate::data::services::repair_pace::RepairPace;
use crate::data::{DataError, lock, meta_error};

mod rebuild;
mod scrub;
mod status;
pub use status::{BlockedStripes, Blocker, Census, NodeInGrace, NodeScrub, RepairStatus};

/// Stripe ids read per page of an index.
const STRIPE_PAGE: usize = 256;
/// Compare-and-swap attempts per stripe before it is left for the next scan.
const CAS_ATTEMPTS: usize = 3;
/// Most stripes one scan takes on; the rest wait for the next scan (the census says so).
const MAX_STRIPES_PER_SCAN: usize = 100_000;
/// The lease the gateways elect one repairer by.
pub const REPAIR_LEASE: &str = "repair";
/// The repair lease's term: this many scan intervals, and at least [`MIN_LEASE_TERM`]; a scan
/// renews it every third of the term, so a stopped holder is replaced within one term.
const LEASE_TERM_SCANS: u64 = 10;
const MIN_LEASE_TERM: Duration = Duration::from_secs(30);
/// A stripe that could not progress is tried again after this long, or at once when a node
/// changes state (what usually unblocks it).
const BLOCKED_RETRY: Duration = Duration::from_secs(30);
/// How often a scan checks whether a node changed state since it was planned.
const NODE_RECHECK: Duration = Duration::from_secs(1);
/// A cause of failure still present is logged again after this long.
const LOG_AGAIN_AFTER: Duration = Duration::from_secs(60);
/// Most unreadable stripes a census hands to the reference check (8 bytes each); the rest count
/// under-redundant until a later census.
pub const MAX_UNREADABLE: usize = 100_000;

#[derive(Debug, Default)]
struct Progress {
    stripes: AtomicU64,
    units: AtomicU64,
    bytes: AtomicU64,
    failures: AtomicU64,
    marked: AtomicU64,
    replicas: AtomicU64,
    remaining: AtomicU64,
}

/// What became of one stripe in a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// Nothing to do (or nothing left: the stripe is gone).
    Whole,
    /// Some units rebuilt; `short` still missing or unavailable, missing since `since_ms`.
    Repaired { units: usize, bytes: u64, short: usize, since_ms: Option<u64> },
    /// Nothing could be done now.
    Blocked { cause: Blocker, short: usize, since_ms: Option<u64> },
    /// Short only of units on Down nodes within the grace: nothing to do yet.
    Waiting { short: usize },
    /// Acknowledged early and still within its writer's deadline (`pending_until_ms`): its
    /// missing units are the writer's to land, `bytes` of them, missing since `since_ms`.
    Pending { short: usize, bytes: u64, since_ms: Option<u64> },
    /// Left to a later scan (not examined: the lease was lost, or the stripe is waiting out a retry).
    Skipped,
}

/// What a scan knows of one stripe before repairing it.
#[derive(Debug, Clone, Default)]
struct Pending {
    /// Units of nodes Down past the grace (to move).
    due_nodes: bool,
    /// Nodes not Up it has a unit on (from the node index).
    unavailable_units: usize,
    /// Recorded under-redundant.
    recorded: bool,
}

/// The stripes repair found too few units readable of, and which of them nothing references.
#[derive(Debug, Default)]
struct Unreadable {
    /// Blocked by [`Blocker::TooFewReadable`] at the last census (at most [`MAX_UNREADABLE`]).
    found: BTreeSet<StripeId>,
    /// Of the stripes last checked, those nothing referenced ([`RepairService::note_unreferenced`]).
    unreferenced: BTreeSet<StripeId>,
    checked_at_ms: Option<u64>,
}

impl Unreadable {
    /// Whether a stripe examined as `outcome` is unreadable garbage.
    fn garbage(&self, id: &StripeId, outcome: &Outcome) -> bool {
        matches!(outcome, Outcome::Blocked { cause: Blocker::TooFewReadable, .. }) && self.unreferenced.contains(id)
    }
}

/// The scan's memory of blocked stripes: what the nodes looked like and when each was tried.
#[derive(Debug, Default)]
struct BlockedMemory {
    node_states: Vec<(NodeId, NodeState)>,
    stripes: HashMap<StripeId, (Instant, Outcome)>,
}

/// A lease renewal under way beside a scan's repairs.
type Renewal<'a> = std::pin::Pin<Box<dyn Future<Output = Result<bool, DataError>> + Send + 'a>>;

/// The repair service; see the module documentation.
#[derive(Debug)]
pub struct RepairService {
    io: Arc<StripeIo>,
    config: RepairConfig,
    /// The read budget, by how busy clients keep the gateway.
    pace: RepairPace,
    progress: Progress,
    nodes_repairing: Mutex<Vec<NodeId>>,
    nodes_in_grace: Mutex<Vec<NodeInGrace>>,
    blocked: Mutex<BlockedMemory>,
    last_blocked: Mutex<Vec<BlockedStripes>>,
    census: Mutex<Option<Census>>,
    unreadable: Mutex<Unreadable>,
    scrub: Mutex<Vec<NodeScrub>>,
    logged: Mutex<HashMap<Blocker, Instant>>,
    lease: LeaseClaims,
}

impl RepairService {
    /// A repair service over the data path's unit I/O.
    pub fn new(io: Arc<StripeIo>, config: RepairConfig) -> Self {
        let lease = LeaseClaims::new(REPAIR_LEASE, io.config().gateway_id());
        Self {
            io,
            pace: RepairPace::new(&config),
            config,
            progress: Progress::default(),
            nodes_repairing: Mutex::new(Vec::new()),
            nodes_in_grace: Mutex::new(Vec::new()),
            blocked: Mutex::new(BlockedMemory::default()),
            last_blocked: Mutex::new(Vec::new()),
            census: Mutex::new(None),
            unreadable: Mutex::new(Unreadable::default()),
            scrub: Mutex::new(Vec::new()),
            logged: Mutex::new(HashMap::new()),
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
        RepairStatus {
            stripes_repaired: self.progress.stripes.load(Ordering::Relaxed),
            units_repaired: self.progress.units.load(Ordering::Relaxed),
            bytes_repaired: self.progress.bytes.load(Ordering::Relaxed),
            stripe_failures: self.progress.failures.load(Ordering::Relaxed),
            units_marked_missing: self.progress.marked.load(Ordering::Relaxed),
            replicas_repaired: self.progress.replicas.load(Ordering::Relaxed),
            stripes_remaining: self.progress.remaining.load(Ordering::Relaxed),
            read_bytes_per_s: self.pace.bytes_per_s(false) as u64,
            client_busy_pct: (self.pace.busy_share() * 100.0).round() as u32,
            nodes_in_grace: lock(&self.nodes_in_grace).clone(),
            nodes_repairing: lock(&self.nodes_repairing).clone(),
            lease_holder: self.lease.last_holder(),
            blocked: lock(&self.last_blocked).clone(),
            census: lock(&self.census).clone(),
            scrub: lock(&self.scrub).clone(),
        }
    }

    /// The stripes the last census found too few units readable of, for a check of what
    /// references them (the layer above owns the references: objects, parts, snapshots).
    pub fn unreadable_stripes(&self) -> Vec<StripeId> {
        lock(&self.unreadable).found.iter().copied().collect()
    }

    /// Notes which of the unreadable stripes nothing referenced at `checked_at_ms`: the censuses
    /// count them apart, as garbage, until the next check says otherwise.
    pub fn note_unreferenced(&self, unreferenced: BTreeSet<StripeId>, checked_at_ms: u64) {
        let mut unreadable = lock(&self.unreadable);
        unreadable.unreferenced = unreferenced;
        unreadable.checked_at_ms = Some(checked_at_ms);
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

    /// One pass: records the corrupt units this gateway heard of as missing; claims the repair
    /// lease; holding it, also records those the nodes list, copies corrupt open-stripe replicas
    /// back, and rebuilds every under-redundant stripe and every stripe of a node Down past the
    /// grace (renewing the lease as it goes, starting no more stripes if it is lost). Every gateway
    /// ends with a census of what is still short.
    pub async fn scan(&self) -> Result<(), DataError> {
        let nodes = self.io.cluster().node_map().await?;
        let reported = self.io.take_corrupt_reports();
        self.record_corrupt(&nodes, reported).await;
        let held = self.claim().await?;
        let due = self.note_grace(&nodes);
        *lock(&self.nodes_repairing) = if held { due.clone() } else { Vec::new() };
        // Backend slots have no stats, scrub or corrupt-file lists: the backend's reads report.
        if held && self.io.backend().is_none() {
            let listed = self.poll_nodes(&nodes).await;
            self.record_corrupt(&nodes, listed).await;
        }
        if !held {
            *lock(&self.census) = None;
            lock(&self.unreadable).found.clear();
            lock(&self.scrub).clear();
            return Ok(());
        }
        let (pending, complete) = self.collect(&nodes, &due).await;
        // Counted before the repairs too: a long scan (much to rebuild, paced) must not leave
        // status without a census, or with the last scan's, until it ends.
        self.take_census(&pending, &BTreeMap::new(), complete);
        let outcomes = self.repair_all(&nodes, &pending).await;
        self.take_census(&pending, &outcomes, complete);
        Ok(())
    }

    /// Down nodes past the grace (sorted), noting the ones still within it for status.
    fn note_grace(&self, nodes: &NodeMap) -> Vec<NodeId> {
        let grace_ms = self.config.grace_ms;
        let now_ms = unix_now_ms();
        let mut due = Vec::new();
        let mut waiting = Vec::new();
        for node in nodes.values().filter(|n| n.state == NodeState::Down) {
            // Records written before `down_since_ms` existed date it from the last heartbeat.
            let since_ms = node.down_since_ms.unwrap_or(node.last_heartbeat_ms);
            let down_ms = now_ms.saturating_sub(since_ms);
            if down_ms >= grace_ms {
                due.push(node.id);
            } else {
                waiting.push(NodeInGrace { node: node.id, repair_in_ms: grace_ms - down_ms });
            }
        }
        due.sort();
        waiting.sort_by_key(|w| w.node);
        *lock(&self.nodes_in_grace) = waiting;
        due
    }

    /// Every stripe that may need repair: the under-redundant index, and the stripes of every node
    /// that is not Up (those past the grace to be moved, the rest only counted). Whether the lists
    /// were read whole.
    async fn collect(&self, nodes: &NodeMap, due: &[NodeId]) -> (BTreeMap<StripeId, Pending>, bool) {
        let meta = self.io.cluster().meta();
        let mut pending: BTreeMap<StripeId, Pending> = BTreeMap::new();
        let mut complete = true;
        let mut after = None;
        loop {
            if pending.len() >= MAX_STRIPES_PER_SCAN {
                complete = false;
                break;
            }
            match meta.under_redundant_stripes(after, STRIPE_PAGE).await {
                Ok(page) => {
                    let Some(&last) = page.last() else { break };
                    after = Some(last);
                    page.into_iter().for_each(|id| pending.entry(id).or_default().recorded = true);
                }
                Err(error) => {
                    tracing::warn!(%error, "could not list under-redundant stripes");
                    complete = false;
                    break;
                }
            }
        }
        // A node whose units are being checked (it returned with another directory) counts like one
        // that is not Up: what it lacks is not recorded yet.
        let mut unavailable: Vec<NodeId> = nodes
            .values()
            .filter(|n| (n.state != NodeState::Up || n.checking_since_ms.is_some()) && n.state != NodeState::Removed)
            .map(|n| n.id)
            .collect();
        unavailable.sort();
        for node in unavailable {
            let is_due = due.contains(&node);
            let mut after = None;
            loop {
                if pending.len() >= MAX_STRIPES_PER_SCAN {
                    complete = false;
                    break;
                }
                match meta.stripes_on_node(node, after, STRIPE_PAGE).await {
                    Ok(page) => {
                        let Some(&last) = page.last() else { break };
                        after = Some(last);
                        for id in page {
                            let entry = pending.entry(id).or_default();
                            entry.unavailable_units += 1;
                            entry.due_nodes |= is_due;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%node, %error, "could not list a node's stripes");
                        complete = false;
                        break;
                    }
                }
            }
        }
        (pending, complete)
    }

    /// Repairs every stripe that needs it and is not waiting out a retry; what became of each.
    async fn repair_all(&self, nodes: &NodeMap, pending: &BTreeMap<StripeId, Pending>) -> BTreeMap<StripeId, Outcome> {
        let work: Vec<StripeId> = {
            let mut memory = lock(&self.blocked);
            let states: Vec<(NodeId, NodeState)> = {
                let mut states: Vec<_> = nodes.values().map(|n| (n.id, n.state)).collect();
                states.sort_by_key(|(id, _)| *id);
                states
            };
            if states != memory.node_states {
                // A node changed state: whatever was blocked may move now.
                memory.stripes.clear();
                memory.node_states = states;
            }
            memory.stripes.retain(|id, (tried, _)| pending.contains_key(id) && tried.elapsed() < BLOCKED_RETRY);
            pending
                .iter()
                .filter(|(id, p)| (p.recorded || p.due_nodes) && !memory.stripes.contains_key(id))
                .map(|(id, _)| *id)
                .collect()
        };
        let mut outcomes: BTreeMap<StripeId, Outcome> = BTreeMap::new();
        self.progress.remaining.store(work.len() as u64, Ordering::Relaxed);
        metrics::gauge!("lowtail_gateway_repair_stripes_remaining").set(work.len() as f64);
        // False once the lease is lost or a node changed state: no more stripes start.
        let go_on = AtomicBool::new(true);
        let go_on = &go_on;
        let mut repairs = stream::iter(work.into_iter().map(|id| async move {
            // A holder that lost the lease mid-scan starts no more stripes: the new one takes them.
            // Nor does a scan planned on node states that changed: a node back Up keeps its units,
            // so the next scan plans again instead of rebuilding them elsewhere.
            if !go_on.load(Ordering::Relaxed) {
                return (id, Outcome::Skipped);
            }
            (id, self.repair_stripe(nodes, id).await)
        }))
        .buffer_unordered(self.config.max_concurrent_stripes);
        let (mut claimed, mut checked) = (Instant::now(), Instant::now());
        // The lease renewal is a metadata write, polled *beside* the repairs, never instead of them:
        // a repair parked mid-write holds the store's writer lock until it is polled again, so a
        // renewal awaited alone waited for it forever, and with it every metadata write.
        let mut renewal: Option<Renewal<'_>> = None;
        loop {
            tokio::select! {
                next = repairs.next() => {
                    let Some((id, outcome)) = next else { break };
                    self.progress.remaining.fetch_sub(1, Ordering::Relaxed);
                    metrics::gauge!("lowtail_gateway_repair_stripes_remaining").decrement(1.0);
                    self.count(id, &outcome);
                    outcomes.insert(id, outcome);
                    // A read: it takes no writer lock.
                    if go_on.load(Ordering::Relaxed) && checked.elapsed() >= NODE_RECHECK {
                        checked = Instant::now();
                        if self.node_states_changed(nodes).await {
                            tracing::info!("a node changed state mid-scan; the next scan plans again");
                            go_on.store(false, Ordering::Relaxed);
                        }
                    }
                    if go_on.load(Ordering::Relaxed) && renewal.is_none() && claimed.elapsed() >= self.lease_term() / 3 {
                        claimed = Instant::now();
                        renewal = Some(Box::pin(self.claim()));
                    }
                }
                renewed = async { renewal.as_mut().expect("polled only when set").await }, if renewal.is_some() => {
                    renewal = None;
                    match renewed {
                        Ok(true) => {}
                        Ok(false) => {
                            tracing::warn!("repair lease lost mid-scan; the rest is left to its new holder");
                            go_on.store(false, Ordering::Relaxed);
                        }
                        Err(error) => {
                            tracing::warn!(%error, "repair lease not renewed; tried again a third of a term later")
                        }
                    }
                }
            }
        }
        drop(repairs);
        self.log_blocked(&outcomes);
        outcomes
    }

    /// Whether any node's state differs from `planned` now (a metadata error counts as no change).
    async fn node_states_changed(&self, planned: &NodeMap) -> bool {
        let Ok(now) = self.io.cluster().node_map().await else { return false };
        now.len() != planned.len()
            || now.values().any(|node| planned.get(&node.id).is_none_or(|before| before.state != node.state))
    }
}
