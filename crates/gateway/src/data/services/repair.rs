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

use bytes::Bytes;
use futures_util::{StreamExt, stream};
use meta::{MetaError, NodeId, NodeInfo, NodeState, StripeId, StripeMeta, StripeState};
use serde::Serialize;

use crate::data::cluster::lease::LeaseClaims;
use crate::data::cluster::membership::{BackgroundTask, unix_now_ms};
use crate::data::config::RepairConfig;
use crate::data::io::missing::UnitOn;
use crate::data::io::replica::REPLICA_UNIT_BASE;
use crate::data::io::stripe_io::{NodeMap, StripeIo};
use crate::data::read::range::RangeRead;
use crate::data::read::robust;
use crate::data::services::repair_pace::RepairPace;
use crate::data::{DataError, lock, meta_error};

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
    fn unanswered(node: NodeId, error: String) -> Self {
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

    /// Counts one stripe's outcome (progress, metrics, the blocked memory).
    fn count(&self, id: StripeId, outcome: &Outcome) {
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
    fn log_blocked(&self, outcomes: &BTreeMap<StripeId, Outcome>) {
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
    fn take_census(
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

    /// Records `units` (stripe, unit, node that held the bad copy) as missing in their stripes,
    /// when the stripe still places the unit on that node; a replica of an open packed stripe is
    /// copied back from another instead.
    async fn record_corrupt(&self, nodes: &NodeMap, units: Vec<(StripeId, u16, NodeId)>) {
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
    async fn delete_corrupt_garbage(&self, nodes: &NodeMap, stripe: StripeId, units: &[(u16, NodeId)]) {
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
    async fn mark_missing(&self, id: StripeId, units: &[UnitOn]) -> Result<(usize, Vec<UnitOn>), DataError> {
        crate::data::io::missing::mark_missing(self.io.cluster().meta().as_ref(), id, units, unix_now_ms()).await
    }

    /// Polls the Up nodes' stats: the corrupt units they list (found by reads or by their scrub),
    /// returned, and their scrub progress, kept for status.
    async fn poll_nodes(&self, nodes: &NodeMap) -> Vec<(StripeId, u16, NodeId)> {
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

    /// Copies replica `seq` of open packed stripe `id` back onto `node` (where it is corrupt) from
    /// another node that holds it whole; a replica of a stripe that is sealed or gone is garbage
    /// and deleted instead.
    async fn repair_replica(&self, nodes: &NodeMap, id: StripeId, seq: u16, node: NodeId) -> Result<(), DataError> {
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
    async fn read_replica(&self, holder: &NodeInfo, id: StripeId, seq: u16) -> Result<(Bytes, Bytes), DataError> {
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
    async fn repair_stripe(&self, nodes: &NodeMap, id: StripeId) -> Outcome {
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
    async fn rebuild_once(&self, nodes: &NodeMap, stripe: &StripeMeta) -> Attempt {
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
    fn plan_stripe(&self, nodes: &NodeMap, stripe: &StripeMeta) -> StripePlan {
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
    fn light_loaded_starters(&self, node_list: &[NodeInfo], old: NodeId, peers: &[NodeId]) -> Vec<NodeInfo> {
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
    async fn rebuild_units(
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
    async fn finish(&self, nodes: &NodeMap, stripe: &StripeMeta, plan: &StripePlan, written: &[(usize, NodeId)]) {
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
    async fn undo(&self, nodes: &NodeMap, stripe: &StripeMeta, plan: &StripePlan, written: &[(usize, NodeId)]) {
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

/// Units of a stripe to rebuild and where.
#[derive(Debug)]
struct StripePlan {
    /// Every unit missing or on a node that is not Up.
    lost: Vec<usize>,
    /// The ones rebuildable now: (unit, target node), counted by the placer when the target is new.
    targets: Vec<(usize, NodeId)>,
    /// Units that must move but no node could take.
    unplaced: usize,
}

/// One attempt's end.
enum Attempt {
    Done(Outcome),
    Conflict,
}

/// Logs each node whose stats stopped (warn) or started again (info) between two polls: once per
/// change, not once per poll.
fn log_stats_changes(before: &[NodeScrub], now: &[NodeScrub]) {
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
