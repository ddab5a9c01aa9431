//! The read controller: the live executor of the policy layer. Every data-unit read of a sealed
//! stripe goes through it: it asks the configured [`policy::ReadPolicy`] for a plan (sending the
//! probes the policy announces in one parallel round trip, counted), carries the plan out over the
//! storage nodes (a normal read, a proactive degraded read decoded here, or a normal read with a
//! degraded read after a timeout), cancels the tasks that are no longer needed, and keeps one
//! [`model::Record`] per read in the shared schema: gateway-side timestamps, per-task timings from
//! the nodes mapped onto the gateway's clock. A background task refreshes the lazy policies' tables
//! (probing every node, then the policy's own refresh, which for Opt-Lazy solves problem (1)).
//!
//! The policy values are the simulator's: this module only translates the store's stripes and nodes
//! into the policy's dense ids (a placement that grows as stripes are read) and answers its view.
//! The two id families are named apart: `StoreNodeId` (the metadata store's) and `PolicyNodeId` /
//! `PolicyStripeId` (the dense ids of the policy's placement).
//!
//! Must not: decide anything a policy decides, hold a lock across an await, or lose availability:
//! when a planned read cannot be completed (a node is Down, a unit is corrupt or missing) the read
//! falls back to the robust read (`robust`), which the record marks as degraded.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use execution::{AdmissionMode, AdmissionSettings};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use meta::{NodeId as StoreNodeId, StripeMeta};
use model::{
    BatchRecord, CodeLayout, FrontendId, MoveRecord, NEVER, NodeId as PolicyNodeId, ObjectId, Outcome, PartitionId,
    Placement, PlannedTask, QueueState, ReadPlan, ReadRequest, Record, RequestId, RequestRecord,
    StripeId as PolicyStripeId, TaskRecord,
};
use policy::ecstore::access::{AccessPolicy, AccessSettings};
use policy::ecstore::mover::{Mover, MoverSettings};
use policy::{FrontendSetup, PolicyKind, PolicySettings, ReadPolicy, build_read_policy};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::DataError;
use super::admission::{TaskPool, admit_plan};
use super::class_shares::{RackShares, SharesPublisher};
use super::executor::{self, Clock, TaskEnd, TaskResult};
use super::range::RangeRead;
use super::robust;
use super::stripe_io::{NodeMap, StripeIo, is_up};
use policy::fec::FrontendState;

mod batch;
mod movement;
pub use super::config::MoverConfig;
pub use batch::{BatchBlock, BlockResult};
pub use movement::StoreMove;

/// Largest `max_catalog_stripes` accepted (about 180 MB of placement and policy tables).
pub const MAX_CATALOG_STRIPES: usize = 1 << 20;
/// How often the refresh task wakes when the policy is not lazy (to notice a switch to one).
const IDLE_REFRESH_CHECK: Duration = Duration::from_millis(500);
/// The least time published class shares hold (a longer refresh period holds them longer).
pub const SHARES_VALID_MIN: Duration = Duration::from_secs(30);
/// Plans retried when the policy is switched between announcing probes and planning.
const PLAN_ATTEMPTS: usize = 3;
/// Longest `probe_timeout_ms` accepted: a decision waits for its probes at most this long.
const MAX_PROBE_TIMEOUT_MS: u64 = 60_000;

/// The `[controller]` section of a gateway's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControllerConfig {
    /// The read policy at start. Default `hedged`: a normal read hedged after about the healthy
    /// tail, around nodes whose reads keep overrunning (docs/controller.md, "The hedged policy",
    /// and docs/benchmarks.md for the measurement that made it the default).
    pub policy: PolicyKind,
    /// The policies' parameters (timeouts, lazy periods, Opt-Lazy objective).
    pub settings: PolicySettings,
    /// This gateway's frontend number in records. Default 0.
    pub frontend_id: u16,
    /// Gateways sharing the cluster: Opt-Lazy scales its own demand by it. Default 1.
    pub frontend_count: u32,
    /// Records kept until taken (`POST /admin/records/take`); later ones are counted and dropped.
    /// Records are an experiment's instrument, not a log: default 0 keeps none, so a production
    /// gateway's memory stays flat however long it serves. The live experiment's gateways keep
    /// 1,000,000 (about 200 MB at the worst) and take them after every run.
    pub max_records: usize,
    /// Seed of the policy's random draws. Default 0 (with `frontend_id` mixed in).
    pub seed: u64,
    /// How long a probe may take before its node counts as unreachable (an enormous queue, which
    /// no policy picks). Default 500 ms: far above a loaded loopback round trip (3 to 15 ms
    /// measured), far below the node RPC timeout that would otherwise stall a decision on a hung
    /// node.
    pub probe_timeout_ms: u64,
    /// Measure the deciding thread's CPU time (`decision_cpu_ns` in records) on one decision in
    /// this many; the others record 0. Default 8; 1 measures every decision. Reading a thread's
    /// CPU clock is a system call that makes the kernel charge the thread's time slice, so a
    /// preemption that is due lands right there, inside the decision it measures: measured on
    /// this project's 2-core host, reading it on every decision put 2.3 % of the PW2 decisions
    /// over 200 µs, against 0.8 % with one in 8 (docs/controller.md).
    pub cpu_sample_every: u32,
    /// Stripes the controller's placement holds (about 170 bytes each); the first read of one
    /// more makes the placement and the policy's tables start afresh, keeping the nodes and their
    /// measured rates. Every stripe ever read would otherwise stay: a gateway's memory would
    /// follow the store's size. Default 16,384 (about 3 MB: full within minutes, then flat); the live
    /// experiment's gateways keep
    /// [`MAX_CATALOG_STRIPES`], so a run never starts afresh in the middle.
    pub max_catalog_stripes: usize,
    /// How batch reads (EC-Store, `POST /{bucket}?lowtail-batch-get`) choose the units of their
    /// blocks. Default: the least-cost plan (`cost`), no late binding.
    pub access: AccessSettings,
    /// EC-Store's mover (`[controller.mover]`): off by default.
    pub mover: MoverConfig,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            policy: PolicyKind::Hedged,
            settings: PolicySettings::default(),
            frontend_id: 0,
            frontend_count: 1,
            max_records: 0,
            seed: 0,
            probe_timeout_ms: 500,
            cpu_sample_every: 8,
            max_catalog_stripes: 1 << 14,
            access: AccessSettings::default(),
            mover: MoverConfig::default(),
        }
    }
}

impl ControllerConfig {
    /// Checks what can be checked before start.
    pub fn validate(&self) -> Result<(), DataError> {
        let bad = |why: &str| Err(DataError::Internal(format!("controller config: {why}")));
        if self.frontend_count == 0 {
            return bad("frontend_count must be at least 1");
        }
        if u32::from(self.frontend_id) >= self.frontend_count {
            return bad("frontend_id must be below frontend_count");
        }
        if !(1..=MAX_PROBE_TIMEOUT_MS).contains(&self.probe_timeout_ms) {
            return bad(&format!("probe_timeout_ms must be 1 to {MAX_PROBE_TIMEOUT_MS}"));
        }
        if self.cpu_sample_every == 0 {
            return bad("cpu_sample_every must be at least 1 (1 measures every decision)");
        }
        if !(1..=MAX_CATALOG_STRIPES).contains(&self.max_catalog_stripes) {
            return bad(&format!("max_catalog_stripes must be 1 to {MAX_CATALOG_STRIPES}"));
        }
        self.access.validate().map_err(|why| DataError::Internal(format!("controller config: access: {why}")))?;
        self.mover.validate()?;
        validate_settings(&self.settings)
    }
}

/// Checks policy parameters (zero periods or timeouts would make a policy spin or degrade always).
pub fn validate_settings(settings: &PolicySettings) -> Result<(), DataError> {
    if settings.normal_timeout_ms == 0 || settings.lmlf_lazy_period_ms == 0 || settings.opt_lazy_period_ms == 0 {
        return Err(DataError::Internal(
            "policy settings: normal_timeout_ms, lmlf_lazy_period_ms and opt_lazy_period_ms must be positive".into(),
        ));
    }
    Ok(())
}

/// The policy a controller runs, as `GET /admin/policy` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyState {
    /// The policy.
    pub policy: PolicyKind,
    /// Its parameters.
    pub settings: PolicySettings,
    /// What the policy shows of its state (FAST CLOUD: the delay model in use and the last
    /// fit), by name; empty for the others.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gauges: BTreeMap<String, f64>,
}

/// Counters of the controller.
#[derive(Debug, Default)]
pub struct ControllerCounters {
    /// Reads planned by the policy.
    pub planned_reads: AtomicU64,
    /// Probes sent for single requests.
    pub request_probes: AtomicU64,
    /// Probes sent by lazy refreshes.
    pub refresh_probes: AtomicU64,
    /// Refresh probes since the last [`Controller::take_records`] (they belong to no record).
    pub refresh_probes_untaken: AtomicU64,
    /// Planned reads that had to fall back to the robust degraded read.
    pub fallbacks: AtomicU64,
    /// Reads not planned (a stripe of another code, the catalog starting afresh): the robust path
    /// served them. Recorded without tasks when the stripe is of the controller's code.
    pub bypassed: AtomicU64,
    /// Records dropped because nobody took them.
    pub dropped_records: AtomicU64,
    /// Probes (of requests or refreshes) not answered within `probe_timeout_ms`.
    pub probe_timeouts: AtomicU64,
    /// Load probes the batch reads' access policy sent (its cost table's refreshes).
    pub access_probes: AtomicU64,
}

/// The store's stripes and nodes in the policy's dense ids.
struct Catalog {
    /// Stripes held before [`Catalog::stripe`] asks for a fresh start.
    max_stripes: usize,
    layout: CodeLayout,
    placement: Placement,
    /// Store stripe → (dense stripe, the store nodes it was registered with).
    stripes: HashMap<u64, (PolicyStripeId, Vec<StoreNodeId>)>,
    /// Dense stripe → (store stripe, unit bytes): what a proposed move names.
    by_dense: Vec<(u64, u64)>,
    node_index: HashMap<StoreNodeId, PolicyNodeId>,
    nodes: Vec<StoreNodeId>,
    /// Service rate per dense node from the last probe (0 = not known yet).
    rates: Vec<f64>,
    /// Per-task overhead per dense node that goes with its rate, from the same probe.
    overheads_ns: Vec<u64>,
    /// Rack per dense node: racks numbered in the order of their names (`NodeInfo::rack`); noted
    /// at each refresh of the policies that read racks (`jlwo`), else empty (every node in rack 0).
    racks: Vec<u16>,
    /// The rack names those numbers stand for, in order.
    rack_names: Vec<String>,
}

impl Catalog {
    fn new(code_name: &str, max_stripes: usize) -> Result<Catalog, DataError> {
        let spec: codec::CodeSpec =
            code_name.parse().map_err(|e| DataError::Internal(format!("code {code_name:?}: {e}")))?;
        let layout = CodeLayout::new(spec).map_err(|e| DataError::Internal(e.to_string()))?;
        let placement =
            Placement::empty(spec, spec.total_units() as u32).map_err(|e| DataError::Internal(e.to_string()))?;
        Ok(Catalog {
            max_stripes,
            layout,
            placement,
            stripes: HashMap::new(),
            by_dense: Vec::new(),
            node_index: HashMap::new(),
            nodes: Vec::new(),
            rates: Vec::new(),
            overheads_ns: Vec::new(),
            racks: Vec::new(),
            rack_names: Vec::new(),
        })
    }

    fn node(&mut self, id: StoreNodeId) -> PolicyNodeId {
        if let Some(&dense) = self.node_index.get(&id) {
            return dense;
        }
        let dense = PolicyNodeId(self.nodes.len() as u32);
        self.nodes.push(id);
        self.rates.push(0.0);
        self.overheads_ns.push(0);
        self.node_index.insert(id, dense);
        self.placement.grow_node_count(self.nodes.len() as u32);
        dense
    }

    /// The dense id of `stripe`, registering it (again, when repair moved a unit) as needed.
    /// `None` when the catalog is full and must start afresh.
    fn stripe(&mut self, stripe: &StripeMeta) -> Result<Option<PolicyStripeId>, DataError> {
        if let Some((dense, nodes)) = self.stripes.get(&stripe.id.0)
            && *nodes == stripe.placement
        {
            return Ok(Some(*dense));
        }
        if self.placement.stripe_count() as usize >= self.max_stripes {
            return Ok(None);
        }
        let dense_nodes: Vec<PolicyNodeId> = stripe.placement.iter().map(|&n| self.node(n)).collect();
        let dense = self.placement.push_stripe(&dense_nodes).map_err(|e| DataError::Internal(e.to_string()))?;
        self.stripes.insert(stripe.id.0, (dense, stripe.placement.clone()));
        debug_assert_eq!(dense.index(), self.by_dense.len(), "dense ids are handed out in order");
        self.by_dense.push((stripe.id.0, stripe.unit_bytes));
        Ok(Some(dense))
    }

    /// Forgets every stripe; the nodes keep their dense ids and measured rates.
    fn forget_stripes(&mut self) -> Result<(), DataError> {
        let spec = self.layout.spec();
        let node_count = (self.nodes.len() as u32).max(spec.total_units() as u32);
        self.placement = Placement::empty(spec, node_count).map_err(|e| DataError::Internal(e.to_string()))?;
        self.stripes = HashMap::new();
        self.by_dense = Vec::new();
        Ok(())
    }

    #[cfg(test)]
    fn stripe_count(&self) -> usize {
        self.stripes.len()
    }

    fn measured(&self, node: PolicyNodeId) -> bool {
        self.rates.get(node.index()).is_some_and(|r| *r > 0.0)
    }

    /// The mean of `value` over the nodes a probe has measured; `None` before any was. An
    /// unmeasured node takes it, so it neither attracts nor repels load.
    fn mean_of_measured(&self, value: impl Fn(usize) -> f64) -> Option<f64> {
        let measured = (0..self.rates.len()).filter(|&i| self.rates[i] > 0.0);
        let (sum, count) = measured.fold((0.0, 0u32), |(s, c), i| (s + value(i), c + 1));
        (count > 0).then(|| sum / f64::from(count))
    }

    /// Numbers each dense node's rack from `nodes` (racks in the order of their names).
    fn note_racks(&mut self, nodes: &NodeMap) {
        let names: std::collections::BTreeSet<&str> = nodes.values().map(|n| n.rack.as_str()).collect();
        let index = |name: &str| names.iter().position(|r| *r == name).unwrap_or(0) as u16;
        self.racks = self.nodes.iter().map(|id| nodes.get(id).map_or(0, |n| index(&n.rack))).collect();
        self.rack_names = names.into_iter().map(str::to_string).collect();
    }

    fn rate(&self, node: PolicyNodeId) -> f64 {
        if self.measured(node) {
            return self.rates[node.index()];
        }
        self.mean_of_measured(|i| self.rates[i]).unwrap_or(1.0)
    }

    fn task_overhead_ns(&self, node: PolicyNodeId) -> u64 {
        if self.measured(node) {
            return self.overheads_ns[node.index()];
        }
        self.mean_of_measured(|i| self.overheads_ns[i] as f64).map_or(0, |mean| mean as u64)
    }
}

/// The policy's view of the cluster during one decision: the catalog plus the probe replies.
struct LiveView<'a> {
    catalog: &'a Catalog,
    answers: &'a [(PolicyNodeId, QueueState)],
    frontend_count: u32,
    unanswered: u32,
    /// The gateway's read task pool as it stood when the decision began.
    frontend: FrontendState,
    /// Per dense node, whether it is known not to be Up (batch plans and `hedged` route around
    /// it; the probing policies learn of a Down node through its probe).
    down: Vec<bool>,
}

impl<'a> LiveView<'a> {
    /// The view of the EC-Store planners (batch plans, the mover): no request's pool, and the
    /// nodes not Up in `nodes` known to be down.
    fn of_batches(
        catalog: &'a Catalog,
        answers: &'a [(PolicyNodeId, QueueState)],
        frontend_count: u32,
        nodes: &NodeMap,
    ) -> LiveView<'a> {
        LiveView::of_read(catalog, answers, frontend_count, FrontendState::unbounded(), nodes)
    }

    /// The view of one read's decision: `frontend`, the read's pool as it stood, and the nodes
    /// not Up in `nodes` known to be down (`hedged` goes around them).
    fn of_read(
        catalog: &'a Catalog,
        answers: &'a [(PolicyNodeId, QueueState)],
        frontend_count: u32,
        frontend: FrontendState,
        nodes: &NodeMap,
    ) -> LiveView<'a> {
        let down = down_nodes(catalog, nodes);
        LiveView { catalog, answers, frontend_count, unanswered: 0, frontend, down }
    }

    /// This view for a read of `stripe`: the nodes of the units it records missing are known not
    /// to serve it (their tasks would fail at once), so `hedged` reads around them as around a
    /// Down node (a node back with an empty disk, until repair rebuilds its units).
    fn reading(mut self, stripe: &StripeMeta) -> LiveView<'a> {
        let missing_on = stripe.missing_units.iter().filter_map(|&unit| stripe.placement.get(usize::from(unit)));
        for dense in missing_on.filter_map(|node| self.catalog.node_index.get(node)) {
            self.down[dense.index()] = true;
        }
        self
    }
}

/// Per dense node, whether `nodes` has it not Up.
fn down_nodes(catalog: &Catalog, nodes: &NodeMap) -> Vec<bool> {
    catalog.nodes.iter().map(|&id| !is_up(nodes, id)).collect()
}

impl policy::ClusterView for LiveView<'_> {
    fn placement(&self) -> &Placement {
        &self.catalog.placement
    }
    fn node_rack(&self, node: PolicyNodeId) -> u16 {
        self.catalog.racks.get(node.index()).copied().unwrap_or(0)
    }
    fn layout(&self) -> &CodeLayout {
        &self.catalog.layout
    }
    fn node_rate_bytes_per_s(&self, node: PolicyNodeId) -> f64 {
        self.catalog.rate(node)
    }
    fn node_task_overhead_ns(&self, node: PolicyNodeId) -> u64 {
        self.catalog.task_overhead_ns(node)
    }
    fn frontend_count(&self) -> u32 {
        self.frontend_count
    }
    fn frontend_state(&self) -> FrontendState {
        self.frontend
    }
    fn probe(&mut self, node: PolicyNodeId) -> QueueState {
        match self.answers.iter().find(|(n, _)| *n == node) {
            Some((_, state)) => *state,
            None => {
                // A policy that probes what it did not announce breaks the contract of
                // `ReadPolicy::probe_targets`; its test keeps this from happening.
                self.unanswered += 1;
                QueueState::default()
            }
        }
    }
    fn node_unavailable(&self, node: PolicyNodeId) -> bool {
        self.down.get(node.index()).copied().unwrap_or(false)
    }
}

/// Everything behind the controller's one lock (held for microseconds, never across an await).
struct State {
    kind: PolicyKind,
    settings: PolicySettings,
    policy: Box<dyn ReadPolicy + Send>,
    /// Bumped by every switch of policy and every catalog reset.
    generation: u64,
    catalog: Catalog,
    rng: ChaCha8Rng,
    next_request: u64,
    /// The batch reads' access policy (EC-Store); its plans use the catalog's dense ids.
    access: AccessPolicy,
    /// Bumped with `generation` and by every switch of the access policy: a solve handed out under
    /// another is dropped.
    access_generation: u64,
    next_batch: u64,
    /// EC-Store's mover statistics (co-access of planned batches, node loads) and its proposals.
    mover: Mover,
}

impl State {
    /// A fresh request id and the partition of data unit `unit` of catalog stripe `dense`.
    fn name_request(&mut self, dense: PolicyStripeId, unit: usize) -> (RequestId, PartitionId) {
        let id = RequestId(self.next_request);
        self.next_request += 1;
        let k = self.catalog.layout.data_units() as u32;
        (id, PartitionId(dense.0 * k + unit as u32))
    }
}

/// One decided read: the plan and what the record needs.
struct Decision {
    plan: ReadPlan,
    request: ReadRequest,
    decision_start_ns: u64,
    decision_end_ns: u64,
    probes: u32,
    probe_wait_ns: u64,
    /// CPU time of the deciding thread(s) over both phases.
    decision_cpu_ns: u64,
    /// Dense node → store node, for the plan's tasks.
    store_nodes: Vec<StoreNodeId>,
    /// The policy generation that planned it (it observes the outcome unless switched since).
    generation: u64,
}

/// The live read controller; see the module documentation.
pub struct Controller {
    epoch: Instant,
    frontend_id: u16,
    frontend_count: u32,
    max_records: usize,
    probe_timeout: Duration,
    cpu_sample_every: u64,
    /// Decisions begun, to pick the ones whose CPU time is measured.
    decisions_begun: AtomicU64,
    /// The code of the stripes it plans; reads of other codes' stripes are served unplanned.
    code: codec::CodeSpec,
    /// The read task pool's settings (FAST CLOUD's policies choose n from its slots).
    admission: AdmissionSettings,
    state: Mutex<State>,
    records: Mutex<VecDeque<Record>>,
    /// Batch records kept until taken (`POST /admin/batches/take`), bounded by `max_records`.
    batch_records: Mutex<VecDeque<BatchRecord>>,
    /// Move records kept until taken, bounded by `max_records`.
    move_records: Mutex<VecDeque<MoveRecord>>,
    /// Wakes the access policy's background work (a solve queued, the first batch after a lull).
    access_wake: tokio::sync::Notify,
    /// When the last batch was planned (controller clock; 0: never): the access policy's load
    /// probes run only while batches are being read.
    last_batch_ns: AtomicU64,
    counters: ControllerCounters,
    switched: tokio::sync::Notify,
    /// Whether policies that probe nodes may run (not over an S3 backend, which has none).
    probing_allowed: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller").field("policy", &self.policy()).field("counters", &self.counters).finish()
    }
}

impl Controller {
    /// A controller for stripes of code `code_name`, its reads admitted without a bound.
    pub fn new(config: &ControllerConfig, code_name: &str) -> Result<Controller, DataError> {
        Controller::with_admission(config, code_name, AdmissionSettings::default())
    }

    /// A controller for stripes of code `code_name` whose reads are admitted by a pool of
    /// `admission` (the `[data.admission]` of the data path it is attached to).
    pub fn with_admission(
        config: &ControllerConfig,
        code_name: &str,
        admission: AdmissionSettings,
    ) -> Result<Controller, DataError> {
        config.validate()?;
        let catalog = Catalog::new(code_name, config.max_catalog_stripes)?;
        let code = catalog.layout.spec();
        let policy = build_policy(config.policy, &config.settings, &catalog.layout, admission)?;
        let access = build_access(&config.access, &catalog.layout)?;
        let seed = config.seed ^ (u64::from(config.frontend_id) << 48);
        Ok(Controller {
            epoch: Instant::now(),
            frontend_id: config.frontend_id,
            frontend_count: config.frontend_count,
            max_records: config.max_records,
            probe_timeout: Duration::from_millis(config.probe_timeout_ms),
            cpu_sample_every: u64::from(config.cpu_sample_every),
            decisions_begun: AtomicU64::new(0),
            code,
            admission,
            state: Mutex::new(State {
                kind: config.policy,
                settings: config.settings.clone(),
                policy,
                generation: 0,
                catalog,
                rng: ChaCha8Rng::seed_from_u64(seed),
                next_request: 0,
                access,
                access_generation: 0,
                next_batch: 0,
                mover: build_mover(&config.mover.settings)?,
            }),
            move_records: Mutex::new(VecDeque::new()),
            records: Mutex::new(VecDeque::new()),
            batch_records: Mutex::new(VecDeque::new()),
            access_wake: tokio::sync::Notify::new(),
            last_batch_ns: AtomicU64::new(0),
            counters: ControllerCounters::default(),
            switched: tokio::sync::Notify::new(),
            probing_allowed: std::sync::atomic::AtomicBool::new(true),
        })
    }

    /// From now on refuses policies that probe nodes (a gateway over an S3 backend: its "nodes" are
    /// slots of one service, with no queue to ask about); fails if the running one does.
    pub fn forbid_probing(&self) -> Result<(), DataError> {
        let kind = self.lock().kind;
        check_probing(kind, false)?;
        self.probing_allowed.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Nanoseconds on the controller's clock (records use it).
    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The gateway's read timeout: the running policy's `normal_timeout_ms` (Normal's fallback, and
    /// the robust read's).
    pub fn read_timeout(&self) -> Duration {
        Duration::from_millis(self.lock().settings.normal_timeout_ms)
    }

    /// For a read any copy of which serves (an open packed stripe's replicas): `copies` in the
    /// order to try them, the ones the policy found slow last, and how long to wait for each before
    /// the next (the policy's wait for `length` bytes, within the read timeout).
    pub fn copy_read_order(&self, copies: &mut [StoreNodeId], length: u64) -> Duration {
        let state = self.lock();
        let tries_last = |node: &StoreNodeId| {
            state.catalog.node_index.get(node).is_some_and(|&dense| state.policy.tries_last(dense))
        };
        // A stable sort: the others keep the caller's order (the data unit's node first).
        copies.sort_by_key(tries_last);
        let timeout = Duration::from_millis(state.settings.normal_timeout_ms);
        state.policy.copy_wait_ns(length).map_or(timeout, |wait_ns| Duration::from_nanos(wait_ns).min(timeout))
    }

    /// The counters.
    pub fn counters(&self) -> &ControllerCounters {
        &self.counters
    }

    /// The policy running now.
    pub fn policy(&self) -> PolicyState {
        let state = self.lock();
        let gauges = state.policy.gauges().into_iter().map(|(name, value)| (name.to_string(), value)).collect();
        PolicyState { policy: state.kind, settings: state.settings.clone(), gauges }
    }

    /// The class shares the running policy solved for each rack's nodes, by rack name (empty when
    /// it solves none: the configured shares apply).
    pub fn node_class_shares(&self) -> RackShares {
        let state = self.lock();
        let Some(shares) = state.policy.node_class_shares() else { return RackShares::new() };
        let names = &state.catalog.rack_names;
        names
            .iter()
            .enumerate()
            .filter_map(|(index, name)| Some((name.clone(), shares.rack(u16::try_from(index).ok()?)?.to_vec())))
            .collect()
    }

    /// The racks the running policy places a new stripe of each latency class on, by rack name,
    /// best first (empty when it places none: the placer balances as always).
    pub fn new_stripe_racks(&self) -> HashMap<u8, Vec<String>> {
        let state = self.lock();
        let names = &state.catalog.rack_names;
        (0..=u8::try_from(node::MAX_CLASSES - 1).unwrap_or(u8::MAX))
            .filter_map(|class| {
                let racks = state.policy.new_stripe_racks(class)?;
                let named: Option<Vec<String>> =
                    racks.iter().map(|&rack| names.get(usize::from(rack)).cloned()).collect();
                Some((class, named?))
            })
            .collect()
    }

    /// Hands the running policy's new-stripe racks to the placer.
    fn install_placement(&self, io: &StripeIo) {
        let racks = self.new_stripe_racks();
        io.placer().set_class_racks(racks);
    }

    /// Whether the running policy reads stripe rows (FAST CLOUD's: n units, first k), so that
    /// one plan serves every data unit of a row ([`Controller::read_units`]).
    pub fn reads_rows(&self) -> bool {
        self.lock().kind.reads_rows()
    }

    /// Switches the policy (its tables start empty; lazy ones are refreshed at once). A policy
    /// that cannot run here (FAST CLOUD on a non-MDS code, BAFEC without slots) is refused and
    /// the running one stays.
    pub fn set_policy(&self, kind: PolicyKind, settings: PolicySettings) -> Result<PolicyState, DataError> {
        validate_settings(&settings)?;
        check_probing(kind, self.probing_allowed.load(Ordering::Relaxed))?;
        {
            let mut state = self.lock();
            let policy = build_policy(kind, &settings, &state.catalog.layout, self.admission)?;
            state.kind = kind;
            state.settings = settings;
            state.policy = policy;
            state.generation += 1;
        }
        tracing::info!(policy = %kind, "read policy switched");
        self.switched.notify_one();
        Ok(self.policy())
    }

    /// Takes every record kept so far (completion order) and the count dropped since the last take.
    pub fn take_records(&self) -> (Vec<Record>, u64) {
        let records: Vec<Record> = std::mem::take(&mut *self.lock_records()).into();
        (records, self.counters.dropped_records.swap(0, Ordering::Relaxed))
    }

    /// Probes the lazy refreshes sent since the last call: they load the nodes like per-request
    /// probes but belong to no record, so reports add them to a run's probes per second.
    pub fn take_refresh_probes(&self) -> u64 {
        self.counters.refresh_probes_untaken.swap(0, Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        super::lock(&self.state)
    }

    fn lock_records(&self) -> MutexGuard<'_, VecDeque<Record>> {
        super::lock(&self.records)
    }

    fn keep(&self, record: Record) {
        if self.max_records == 0 {
            return;
        }
        let mut records = self.lock_records();
        if records.len() >= self.max_records {
            count(&self.counters.dropped_records, "lowtail_controller_records_dropped_total", 1);
            return;
        }
        records.push_back(record);
    }

    /// Bytes `offset .. offset + length` of data unit `unit` of sealed `stripe`, as the policy
    /// plans, with nodes that are not Up looking full to it. Reads the controller cannot plan (a
    /// stripe of another code, the catalog starting afresh) take the robust read (`robust`). Every read is
    /// recorded; one served without a plan has no tasks. Every plan run, planned or robust, is
    /// admitted by `range.admission`'s pool first.
    pub async fn read(&self, range: RangeRead<'_>) -> Result<Bytes, DataError> {
        let unit = range.unit;
        let mut bytes = self.read_row(range, unit..unit + 1).await?;
        Ok(bytes.pop().expect("one unit asked for"))
    }

    /// The same range of every data unit in `units` (which starts at `range.unit`): one plan for
    /// the whole row when the running policy reads rows (FAST CLOUD: n units, done at the first
    /// k, the missing data units decoded from them), else each unit read on its own.
    pub async fn read_units(&self, range: RangeRead<'_>, units: Range<usize>) -> Result<Vec<Bytes>, DataError> {
        assert!(range.unit == units.start && !units.is_empty(), "units {units:?} start at the range's unit");
        if units.len() == 1 || self.reads_rows() || self.wants_row(&range, &units) {
            return self.read_row(range, units).await;
        }
        let each = units.map(|unit| async move {
            let mut bytes = self.read_row(RangeRead { unit, ..range }, unit..unit + 1).await?;
            Ok::<_, DataError>(bytes.pop().expect("one unit asked for"))
        });
        futures_util::future::try_join_all(each).await
    }

    /// Whether the running policy reads `units` of the range's stripe better by one plan than by a
    /// plan per unit (`hedged`, around a node it avoids). Reads the controller cannot plan, no.
    pub fn wants_row(&self, range: &RangeRead<'_>, units: &Range<usize>) -> bool {
        if !self.is_own_code(range.stripe) || units.end > range.code.data_units() || units.end > usize::from(u8::MAX) {
            return false;
        }
        let now_ns = self.now_ns();
        let frontend = range.admission.map_or_else(FrontendState::unbounded, TaskPool::frontend_state);
        let mut state = self.lock();
        let state = &mut *state;
        let Ok(Some(dense)) = state.catalog.stripe(range.stripe) else { return false };
        let view =
            LiveView::of_read(&state.catalog, &[], self.frontend_count, frontend, range.nodes).reading(range.stripe);
        state.policy.wants_row(&view, now_ns, dense, units.start as u8..units.end as u8)
    }

    /// One plan for `units` (one unit, or a row under a row-reading policy or one the policy
    /// wants read as a row), recorded.
    async fn read_row(&self, range: RangeRead<'_>, units: Range<usize>) -> Result<Vec<Bytes>, DataError> {
        let RangeRead { io, stripe, code, unit, length, .. } = range;
        let arrival_ns = self.now_ns();
        // A unit that must be rebuilt segmented or by the nodes is not planned (no probes spent):
        // the robust read tries that first, and the read is recorded as served without a plan.
        let plannable = self.is_own_code(stripe)
            && units.end <= code.data_units()
            && unit <= usize::from(u8::MAX)
            && !(units.len() == 1 && (super::segmented::applies(range) || super::node_dataflow::applies(range)));
        let mut probes_sent = 0u32;
        let decision = if plannable {
            let decided = self.decide(&range, units.clone(), arrival_ns, &mut probes_sent).await;
            // Counted after the decision's clock stopped: the metric's look-up hashes its name under a lock.
            count(&self.counters.request_probes, "lowtail_controller_request_probes_total", u64::from(probes_sent));
            decided.unwrap_or_else(|error| {
                tracing::warn!(%error, "read not planned");
                None
            })
        } else {
            None
        };
        let bytes_asked = length * units.len() as u64;
        let Some(decision) = decision else {
            count(&self.counters.bypassed, "lowtail_controller_reads_bypassed_total", 1);
            let result = self.read_robust(range, units).await;
            let read = Unplanned {
                stripe,
                unit,
                length: bytes_asked,
                arrival_ns,
                degraded: result.as_ref().is_ok_and(|(_, degraded)| *degraded),
                served: result.is_ok(),
                latency_class: range.io.cluster().call_class().0,
            };
            self.record_unplanned(&read);
            return result.map(|(bytes, _)| bytes);
        };
        count(&self.counters.planned_reads, "lowtail_controller_reads_planned_total", 1);
        metrics::histogram!("lowtail_controller_decision_seconds")
            .record((decision.decision_end_ns - decision.decision_start_ns) as f64 / 1e9);
        let (executed, ends) = self.execute(&range, units.clone(), &decision).await;
        let (result, degraded, timed_out) = match executed {
            Executed::Done { bytes, degraded, timed_out } => {
                if degraded {
                    io.count_degraded();
                }
                (Ok(bytes), degraded, timed_out)
            }
            Executed::Failed { timed_out } => {
                // Availability first: the robust read tries every decodable set and Down nodes.
                count(&self.counters.fallbacks, "lowtail_controller_fallbacks_total", 1);
                (self.read_robust(range, units).await.map(|(bytes, _)| bytes), true, timed_out)
            }
        };
        let served = Served { bytes: bytes_asked, degraded, timed_out, ok: result.is_ok() };
        self.record_planned(&decision, &ends, arrival_ns, served);
        result
    }

    /// Each unit of `units` by the robust read, in parallel; whether any was decoded.
    async fn read_robust(&self, range: RangeRead<'_>, units: Range<usize>) -> Result<(Vec<Bytes>, bool), DataError> {
        let timeout_ns = self.read_timeout().as_nanos() as u64;
        let each = units.map(|unit| robust::read(RangeRead { unit, ..range }, timeout_ns));
        let read = futures_util::future::try_join_all(each).await?;
        let degraded = read.iter().any(|(_, degraded)| *degraded);
        Ok((read.into_iter().map(|(bytes, _)| bytes).collect(), degraded))
    }

    /// Keeps the record of a planned read and lets the policy that planned it observe it.
    fn record_planned(&self, decision: &Decision, ends: &[TaskEnd], arrival_ns: u64, served: Served) {
        let completion_ns = self.now_ns();
        let tasks: Vec<TaskRecord> = decision
            .plan
            .tasks
            .iter()
            .zip(ends)
            .map(|(task, end)| task_record(task, *end, decision.decision_end_ns))
            .collect();
        let request = RequestRecord {
            request: decision.request.id,
            frontend: FrontendId(self.frontend_id),
            object: decision.request.object,
            partition: decision.request.partition,
            bytes: served.bytes,
            arrival_ns,
            decision_start_ns: decision.decision_start_ns,
            decision_end_ns: decision.decision_end_ns,
            completion_ns,
            probes: decision.probes,
            probe_wait_ns: decision.probe_wait_ns,
            decision_cpu_ns: decision.decision_cpu_ns,
            degraded: served.degraded,
            timed_out: served.timed_out,
            outcome: if served.ok { Outcome::Ok } else { Outcome::Failed },
            class: decision.request.class,
            latency_class: decision.request.latency_class,
        };
        {
            let mut state = self.lock();
            if state.generation == decision.generation {
                state.policy.observe(&request, &tasks);
            }
        }
        self.keep(Record { request, tasks });
    }

    /// Records a read served without a plan (no tasks, no decision time), completed now. A stripe
    /// the catalog cannot hold (another code than the controller's) has no partition to name, so
    /// its read goes unrecorded; `reads_bypassed` counts it with the rest.
    pub fn record_unplanned(&self, read: &Unplanned<'_>) {
        let completion_ns = self.now_ns();
        let located = if !self.is_own_code(read.stripe) {
            None
        } else {
            let mut state = self.lock();
            let state = &mut *state;
            let dense = match state.catalog.stripe(read.stripe) {
                Ok(None) => {
                    // Full: the planned path would start afresh too.
                    self.reset_catalog(state).ok().and_then(|()| state.catalog.stripe(read.stripe).ok().flatten())
                }
                Ok(found) => found,
                Err(_) => None,
            };
            dense.map(|dense| state.name_request(dense, read.unit))
        };
        let Some((id, partition)) = located else {
            tracing::debug!(stripe = %read.stripe.id, "a read of a stripe outside the controller's code is not recorded");
            return;
        };
        self.keep(Record {
            request: RequestRecord {
                request: id,
                frontend: FrontendId(self.frontend_id),
                object: ObjectId(read.stripe.id.0),
                partition,
                bytes: read.length,
                arrival_ns: read.arrival_ns,
                decision_start_ns: read.arrival_ns,
                decision_end_ns: read.arrival_ns,
                completion_ns,
                probes: 0,
                probe_wait_ns: 0,
                decision_cpu_ns: 0,
                degraded: read.degraded,
                timed_out: false,
                outcome: if read.served { Outcome::Ok } else { Outcome::Failed },
                class: 0,
                latency_class: read.latency_class,
            },
            tasks: Vec::new(),
        });
    }

    /// Whether `stripe` is of the code this controller plans. A stripe of another code (written
    /// before the cluster's code changed) has other recovery sets, so a plan for it would be wrong
    /// even when its unit count matches.
    fn is_own_code(&self, stripe: &StripeMeta) -> bool {
        stripe.code_spec().is_ok_and(|spec| spec == self.code)
    }

    /// Plans a read: announced probes in one parallel round trip, then the policy's plan (its row
    /// plan for several `units`). `None` when the catalog had to start afresh (the read is served
    /// unplanned). Adds the probes it sent to `probes_sent`, whatever it returns.
    #[allow(clippy::too_many_arguments)]
    async fn decide(
        &self,
        range: &RangeRead<'_>,
        units: Range<usize>,
        arrival_ns: u64,
        probes_sent: &mut u32,
    ) -> Result<Option<Decision>, DataError> {
        let RangeRead { io, nodes, stripe, unit, offset, length, admission, .. } = *range;
        let frontend = admission.map_or_else(FrontendState::unbounded, TaskPool::frontend_state);
        // A retried plan's decision spans every attempt, and its record counts every probe sent.
        let decision_start_ns = self.now_ns();
        let measure_cpu = self.decisions_begun.fetch_add(1, Ordering::Relaxed).is_multiple_of(self.cpu_sample_every);
        let (mut probe_wait_ns, mut decision_cpu_ns) = (0u64, 0u64);
        for _attempt in 0..PLAN_ATTEMPTS {
            let attempt_start_ns = self.now_ns();
            // Each phase runs without an await, so one thread's CPU clock covers it whole.
            let phase_one_cpu = ThreadCpu::start(measure_cpu);
            // Phase 1: the request in dense ids and the probes the policy will make.
            let (request, mut request_rng, targets, generation) = {
                let mut state = self.lock();
                let state = &mut *state;
                let Some(dense) = state.catalog.stripe(stripe)? else {
                    self.reset_catalog(state)?;
                    return Ok(None);
                };
                let (id, partition) = state.name_request(dense, unit);
                let request = ReadRequest {
                    id,
                    // The controller reads unit ranges; the S3 key is the layer above's. The store's
                    // stripe id names what was read.
                    object: ObjectId(stripe.id.0),
                    partition,
                    offset,
                    length,
                    arrival_ns,
                    class: 0,
                    // The class the S3 layer resolved (carried in the task), else the background one.
                    latency_class: io.cluster().call_class().0,
                };
                // One generator per request: concurrent decisions cannot shift each other's draws
                // between announcing probes and planning.
                let request_rng = ChaCha8Rng::seed_from_u64(state.rng.next_u64());
                let mut targets = Vec::new();
                let view = LiveView::of_read(&state.catalog, &[], self.frontend_count, frontend, nodes).reading(stripe);
                state.policy.probe_targets(&view, attempt_start_ns, &request, &mut request_rng.clone(), &mut targets);
                targets.dedup();
                let store_targets: Vec<(PolicyNodeId, StoreNodeId)> =
                    targets.iter().map(|&t| (t, state.catalog.nodes[t.index()])).collect();
                (request, request_rng, store_targets, state.generation)
            };
            decision_cpu_ns += phase_one_cpu.elapsed_ns();
            // Phase 2: the probes, in parallel, outside the lock.
            let probe_sent_ns = self.now_ns();
            let (replies, sent) = self.probe_nodes(io, nodes, &targets).await;
            if !targets.is_empty() {
                probe_wait_ns += self.now_ns() - probe_sent_ns;
            }
            *probes_sent = probes_sent.saturating_add(sent as u32);
            // Phase 3: the plan.
            let phase_three_cpu = ThreadCpu::start(measure_cpu);
            let mut state = self.lock();
            if state.generation != generation {
                decision_cpu_ns += phase_three_cpu.elapsed_ns();
                continue;
            }
            let state = &mut *state;
            let answers = record_rates(&mut state.catalog, &replies);
            let mut view =
                LiveView::of_read(&state.catalog, &answers, self.frontend_count, frontend, nodes).reading(stripe);
            let plan = if units.len() > 1 {
                let row = units.start as u8..units.end as u8;
                state.policy.plan_row(&mut view, self.now_ns(), &request, row, &mut request_rng)
            } else {
                state.policy.plan(&mut view, self.now_ns(), &request, &mut request_rng)
            };
            debug_assert_eq!(view.unanswered, 0, "{} probed a node it did not announce", state.policy.name());
            debug_assert!(plan.validate().is_ok(), "{:?}", plan.validate());
            let store_nodes = plan.tasks.iter().map(|t| state.catalog.nodes[t.node.index()]).collect();
            decision_cpu_ns += phase_three_cpu.elapsed_ns();
            return Ok(Some(Decision {
                plan,
                request,
                decision_start_ns,
                decision_end_ns: self.now_ns(),
                probes: *probes_sent,
                probe_wait_ns,
                decision_cpu_ns,
                store_nodes,
                generation,
            }));
        }
        Ok(None)
    }

    fn reset_catalog(&self, state: &mut State) -> Result<(), DataError> {
        tracing::info!(stripes = state.catalog.max_stripes, "controller placement full; starting afresh");
        state.catalog.forget_stripes()?;
        state.policy = build_policy(state.kind, &state.settings, &state.catalog.layout, self.admission)?;
        // The access policy's cache and solves, and the mover's statistics, name the forgotten
        // dense ids.
        state.access = build_access(state.access.settings(), &state.catalog.layout)?;
        state.mover = build_mover(state.mover.settings())?;
        state.access_generation += 1;
        state.generation += 1;
        Ok(())
    }

    /// Probes `targets` in parallel; a node that fails to answer reports [`QueueState::UNREACHABLE`].
    /// A node that is not Up is answered for at once, unprobed (it looks full too). Returns the
    /// replies and how many probes were sent.
    async fn probe_nodes(
        &self,
        io: &StripeIo,
        nodes: &NodeMap,
        targets: &[(PolicyNodeId, StoreNodeId)],
    ) -> (Vec<(PolicyNodeId, Option<node::ProbeReply>)>, usize) {
        let (up, down): (Vec<_>, Vec<_>) = targets.iter().partition(|(_, id)| is_up(nodes, *id));
        let mut replies: Vec<(PolicyNodeId, Option<node::ProbeReply>)> = Vec::with_capacity(targets.len());
        replies.extend(down.iter().map(|&&(dense, _)| (dense, None)));
        let sent = up.len();
        let mut probes: FuturesUnordered<_> = up
            .into_iter()
            .map(|&(dense, id)| async move {
                let probe = async {
                    let info = nodes.get(&id)?;
                    let client = io.cluster().client(info).await.ok()?;
                    client.probe().await.ok()
                };
                // A hung node that is still marked Up must not hold the decision for the whole
                // RPC timeout.
                let reply = match tokio::time::timeout(self.probe_timeout, probe).await {
                    Ok(reply) => reply,
                    Err(_) => {
                        count(&self.counters.probe_timeouts, "lowtail_controller_probe_timeouts_total", 1);
                        None
                    }
                };
                (dense, reply)
            })
            .collect();
        while let Some(reply) = probes.next().await {
            replies.push(reply);
        }
        (replies, sent)
    }

    /// Carries out `decision`'s plan for `units` through the execution core; says how each task
    /// ended.
    async fn execute(
        &self,
        target: &RangeRead<'_>,
        units: Range<usize>,
        decision: &Decision,
    ) -> (Executed, Vec<TaskEnd>) {
        let plan = &decision.plan;
        let clock = Clock { epoch: self.epoch };
        let run_task = |i: usize| self.run_task(target, &plan.tasks[i], decision.store_nodes[i]);
        let admitted = match admit_plan(target.admission, plan).await {
            Ok(admitted) => admitted,
            Err(error) => {
                tracing::warn!(%error, "planned read not admitted");
                return (Executed::Failed { timed_out: false }, vec![TaskEnd::NotLaunched; plan.tasks.len()]);
            }
        };
        let driven =
            executor::drive(plan, target.unit as u8, target.code, clock, admitted.as_ref(), run_task, None).await;
        let timed_out = driven.timed_out;
        let served = match &driven.completed {
            Some((_, decoded)) if units.len() > 1 => robust::served_units(*target, plan, units, &driven.bytes)
                .map(|(bytes, row_decoded)| (bytes, *decoded || row_decoded)),
            Some((tasks, decoded)) => {
                robust::served_bytes(*target, plan, tasks, *decoded, &driven.bytes).map(|bytes| (vec![bytes], *decoded))
            }
            None => return (Executed::Failed { timed_out }, driven.ends),
        };
        let executed = match served {
            Ok((bytes, degraded)) => Executed::Done { bytes, degraded, timed_out },
            Err(error) => {
                tracing::warn!(%error, "a completed degraded read did not decode");
                Executed::Failed { timed_out }
            }
        };
        (executed, driven.ends)
    }

    /// One task: its bytes (None when it failed) and how it ended.
    async fn run_task(&self, target: &RangeRead<'_>, task: &PlannedTask, node: StoreNodeId) -> TaskResult {
        let RangeRead { io, nodes, stripe, .. } = *target;
        debug_assert_eq!(stripe.placement[usize::from(task.unit)], node, "plan and stripe agree on the node");
        let sent_ns = self.now_ns();
        if !is_up(nodes, node) || stripe.is_missing(usize::from(task.unit)) {
            // A node that is not Up, or a unit recorded missing, fails its task at once (no RPC
            // that could only time out or fail), so the plan's fallback or the robust read starts
            // without waiting.
            return (TaskEnd::Failed { sent_ns }, None);
        }
        match io.read_unit_timed(nodes, stripe, usize::from(task.unit), task.offset, task.length).await {
            Ok((bytes, timing)) => (TaskEnd::Done { timing, sent_ns, received_ns: self.now_ns() }, Some(bytes)),
            Err(_) => (TaskEnd::Failed { sent_ns }, None),
        }
    }

    /// The lazy policies' refresh loop: every period of the running policy, probe every node and
    /// refresh (Opt-Lazy solves here, never on a request, and without holding the controller). Ends when `stop` changes.
    /// After each refresh (and each wake of a policy without one) the policy's class shares are
    /// published through `shares` (membership tells the nodes the published ones).
    pub async fn run_refresh(
        self: Arc<Self>,
        io: Arc<StripeIo>,
        shares: Option<Arc<SharesPublisher>>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        // Whether what a lazy policy solved (shares, new-stripe racks) is withdrawn since it ran.
        let mut withdrawn = true;
        loop {
            let period = self.lock().policy.refresh_period_ns();
            if let Some(period_ns) = period {
                // Refreshes start every T, however long the probes and the solve take (one that
                // takes longer than T is followed by the next at once, never by a backlog).
                let next = tokio::time::Instant::now() + Duration::from_nanos(period_ns);
                if let Err(error) = self.refresh_once(&io).await {
                    tracing::warn!(%error, "lazy policy refresh failed; keeping the old tables");
                }
                self.publish_class_shares(&io, shares.as_deref()).await;
                withdrawn = false;
                tokio::select! {
                    _ = stop.changed() => return,
                    () = self.switched.notified() => {}
                    () = tokio::time::sleep_until(next) => {}
                }
            } else {
                if !withdrawn {
                    // Switched away from a policy that solved shares or placed: the configured
                    // shares and the balancing placer again (retried until the withdrawal lands).
                    self.install_placement(&io);
                    withdrawn = self.publish_class_shares(&io, shares.as_deref()).await;
                }
                tokio::select! {
                    _ = stop.changed() => return,
                    () = self.switched.notified() => {}
                    () = tokio::time::sleep(IDLE_REFRESH_CHECK) => {}
                }
            }
        }
    }

    /// Publishes the policy's class shares, to hold for three refresh periods (at least
    /// [`SHARES_VALID_MIN`]): a gateway that stops refreshing stops holding the nodes to them.
    /// Whether the metadata store took what there was to publish (or there was no publisher).
    async fn publish_class_shares(&self, io: &StripeIo, publisher: Option<&SharesPublisher>) -> bool {
        let Some(publisher) = publisher else { return true };
        let period_ns = self.lock().policy.refresh_period_ns().unwrap_or(0);
        let valid = (Duration::from_nanos(period_ns) * 3).max(SHARES_VALID_MIN);
        let valid_ms = u64::try_from(valid.as_millis()).unwrap_or(u64::MAX);
        let shares = self.node_class_shares();
        let meta = io.cluster().meta().as_ref();
        match publisher.publish(meta, shares, super::membership::unix_now_ms(), valid_ms).await {
            Ok(_) => true,
            Err(error) => {
                tracing::warn!(%error, "could not publish the solved class shares; the nodes keep what they run");
                false
            }
        }
    }

    /// One refresh: probes every registered node in parallel, then the policy's refresh: its
    /// first half under the controller's lock, its work (Opt-Lazy's solve) on a blocking thread
    /// without it, and the result installed under the lock again, unless the policy was
    /// switched meanwhile.
    /// The placer then takes the policy's new-stripe racks.
    pub async fn refresh_once(&self, io: &StripeIo) -> Result<(), DataError> {
        let refreshed = self.refresh_policy(io).await;
        self.install_placement(io);
        refreshed
    }

    async fn refresh_policy(&self, io: &StripeIo) -> Result<(), DataError> {
        let (probes, generation, kind) = {
            let state = self.lock();
            (state.policy.refresh_probes_nodes(), state.generation, state.kind)
        };
        if kind == PolicyKind::Jlwo {
            // JLWO's solve needs each node's rack (reads do not): the node records once a refresh.
            let nodes = io.cluster().node_map().await?;
            self.lock().catalog.note_racks(&nodes);
        }
        if !probes {
            // FAST CLOUD's refit and JLWO's solve: nothing to ask the nodes.
            return self.refresh_with(generation, &[]).await;
        }
        let (_, replies, sent) = self.probe_every_node(io).await?;
        count(&self.counters.refresh_probes, "lowtail_controller_refresh_probes_total", sent as u64);
        self.counters.refresh_probes_untaken.fetch_add(sent as u64, Ordering::Relaxed);
        self.refresh_with(generation, &replies).await
    }

    /// Probes every node of the cluster in parallel (registering new ones in the catalog): the
    /// node map read, the replies and how many probes were sent.
    async fn probe_every_node(
        &self,
        io: &StripeIo,
    ) -> Result<(NodeMap, Vec<(PolicyNodeId, Option<node::ProbeReply>)>, usize), DataError> {
        let nodes = io.cluster().node_map().await?;
        let mut ids: Vec<StoreNodeId> = nodes.keys().copied().collect();
        ids.sort();
        let targets: Vec<(PolicyNodeId, StoreNodeId)> = {
            let mut state = self.lock();
            ids.iter().map(|&id| (state.catalog.node(id), id)).collect()
        };
        let (replies, sent) = self.probe_nodes(io, &nodes, &targets).await;
        Ok((nodes, replies, sent))
    }

    /// The policy's refresh over probe `replies` taken while `generation` was running.
    async fn refresh_with(
        &self,
        generation: u64,
        replies: &[(PolicyNodeId, Option<node::ProbeReply>)],
    ) -> Result<(), DataError> {
        let started = Instant::now();
        let work = {
            let mut state = self.lock();
            if state.generation != generation {
                return Ok(());
            }
            let state = &mut *state;
            let answers = record_rates(&mut state.catalog, replies);
            // A refresh plans no request, so the pool's state is not asked for.
            let frontend = FrontendState::unbounded();
            let mut view = LiveView {
                catalog: &state.catalog,
                answers: &answers,
                frontend_count: self.frontend_count,
                unanswered: 0,
                frontend,
                down: Vec::new(),
            };
            let mut rng = ChaCha8Rng::seed_from_u64(state.rng.next_u64());
            state.policy.begin_refresh(&mut view, self.now_ns(), &mut rng)
        };
        let mut locked = started.elapsed();
        if let Some(work) = work {
            // Opt-Lazy's solve: on a blocking thread and outside the lock, so reads go on being
            // planned (with the previous table) while it runs.
            let result = tokio::task::spawn_blocking(move || work.run())
                .await
                .map_err(|error| DataError::Internal(format!("the lazy policy's refresh work failed: {error}")))?;
            let installing = Instant::now();
            let mut state = self.lock();
            // A policy switched meanwhile did not hand out this work.
            if state.generation == generation {
                state.policy.finish_refresh(result);
                if let Some(why) = state.policy.refresh_failure() {
                    tracing::warn!(%why, "the policy's refresh installed nothing; keeping the old tables");
                }
            }
            locked += installing.elapsed();
        }
        for (name, value) in self.lock().policy.gauges() {
            metrics::gauge!("lowtail_controller_policy_state", "name" => name).set(value);
        }
        metrics::histogram!("lowtail_controller_refresh_seconds").record(started.elapsed().as_secs_f64());
        metrics::histogram!("lowtail_controller_refresh_locked_seconds").record(locked.as_secs_f64());
        Ok(())
    }
}

/// A read served without a plan, as [`Controller::record_unplanned`] records it.
pub struct Unplanned<'a> {
    /// The stripe read.
    pub stripe: &'a StripeMeta,
    /// The data unit read.
    pub unit: usize,
    /// Bytes asked for.
    pub length: u64,
    /// When the read arrived, on the controller's clock ([`Controller::now_ns`]).
    pub arrival_ns: u64,
    /// Whether the bytes were decoded from other units.
    pub degraded: bool,
    /// Whether the bytes were returned.
    pub served: bool,
    /// The latency class it was read in ([`super::cluster::NodeConnections::call_class`]).
    pub latency_class: u8,
}

/// What executing a plan came to: the bytes of each unit asked for.
enum Executed {
    Done { bytes: Vec<Bytes>, degraded: bool, timed_out: bool },
    Failed { timed_out: bool },
}

/// How a planned read was served, for its record.
#[derive(Clone, Copy)]
struct Served {
    bytes: u64,
    degraded: bool,
    timed_out: bool,
    ok: bool,
}

/// The calling thread's CPU clock at a start: what a stretch of synchronous code cost in CPU,
/// without the time the thread waited for a lock or for a core.
struct ThreadCpu {
    /// `None` when this decision's CPU time is not measured.
    start_ns: Option<u64>,
}

impl ThreadCpu {
    /// Reads the thread's CPU clock if `measure`; otherwise measures nothing and costs nothing.
    fn start(measure: bool) -> Self {
        Self { start_ns: measure.then(thread_cpu_ns) }
    }

    /// CPU time since [`Self::start`] (0 when not measured); call it on the same thread (no await
    /// in between).
    fn elapsed_ns(&self) -> u64 {
        self.start_ns.map_or(0, |start_ns| thread_cpu_ns().saturating_sub(start_ns))
    }
}

fn thread_cpu_ns() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    // A thread's CPU clock starts at zero and never goes negative.
    debug_assert!(now.tv_sec >= 0 && now.tv_nsec >= 0);
    (now.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(now.tv_nsec as u64)
}

/// The policy `kind` for stripes of `layout` read through a pool of `admission`.
fn build_policy(
    kind: PolicyKind,
    settings: &PolicySettings,
    layout: &CodeLayout,
    admission: AdmissionSettings,
) -> Result<Box<dyn ReadPolicy + Send>, DataError> {
    let blocking = admission.mode == AdmissionMode::Blocking;
    build_read_policy(kind, settings, &FrontendSetup::new(layout, admission.slots, blocking))
        .map_err(|error| DataError::Internal(format!("policy {kind}: {error}")))
}

/// The batch reads' access policy for stripes of `layout`.
fn build_access(settings: &AccessSettings, layout: &CodeLayout) -> Result<AccessPolicy, DataError> {
    AccessPolicy::new(settings.clone(), layout.data_units())
        .map_err(|error| DataError::Internal(format!("access policy: {error}")))
}

/// The mover's statistics and proposals, empty.
fn build_mover(settings: &MoverSettings) -> Result<Mover, DataError> {
    Mover::new(settings.clone()).map_err(|error| DataError::Internal(format!("mover: {error}")))
}

/// Queue states from probe replies (unreachable nodes look full), recording measured rates.
fn record_rates(
    catalog: &mut Catalog,
    replies: &[(PolicyNodeId, Option<node::ProbeReply>)],
) -> Vec<(PolicyNodeId, QueueState)> {
    replies
        .iter()
        .map(|&(node, ref reply)| match reply {
            Some(reply) => {
                if reply.service_rate_bytes_per_s > 0.0
                    && let Some(rate) = catalog.rates.get_mut(node.index())
                {
                    *rate = reply.service_rate_bytes_per_s;
                    catalog.overheads_ns[node.index()] = reply.overhead_us.saturating_mul(1000);
                }
                let tasks = reply.queued_tasks.saturating_add(reply.in_service_tasks);
                let state = QueueState {
                    bytes: reply.queued_bytes.saturating_add(reply.in_service_bytes),
                    tasks: u32::try_from(tasks).unwrap_or(u32::MAX),
                };
                (node, state)
            }
            None => (node, QueueState::UNREACHABLE),
        })
        .collect()
}

/// Adds `n` to a controller counter and to its Prometheus counter `metric`.
fn count(counter: &AtomicU64, metric: &'static str, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
    metrics::counter!(metric).increment(n);
}

/// A task's record. Node timestamps are on the node's clock; they are placed on the gateway's by
/// splitting the time outside the node evenly between the way there and back (no clock sync needed;
/// waiting and service durations are the node's own).
/// Refuses a policy that probes nodes where probing is not allowed.
fn check_probing(kind: PolicyKind, allowed: bool) -> Result<(), DataError> {
    if kind.probes_nodes() && !allowed {
        return Err(DataError::Internal(format!(
            "policy {kind} probes storage nodes, and an S3 backend has none: use normal, fec-fixed, fec-greedy or fec-bafec"
        )));
    }
    Ok(())
}

fn task_record(task: &PlannedTask, end: TaskEnd, dispatched_ns: u64) -> TaskRecord {
    let base = TaskRecord {
        node: task.node,
        unit: task.unit,
        role: task.role,
        cancelled: false,
        cancel_ns: NEVER,
        failed: false,
        bytes: task.length,
        enqueue_ns: dispatched_ns,
        start_ns: NEVER,
        finish_ns: NEVER,
    };
    match end {
        TaskEnd::Done { timing, sent_ns, received_ns } => {
            let on_node_ns = timing.finish_ns.saturating_sub(timing.enqueue_ns);
            let outside_ns = received_ns.saturating_sub(sent_ns).saturating_sub(on_node_ns);
            let enqueue_ns = sent_ns + outside_ns / 2;
            TaskRecord {
                enqueue_ns,
                start_ns: enqueue_ns + timing.start_ns.saturating_sub(timing.enqueue_ns),
                finish_ns: enqueue_ns + on_node_ns,
                ..base
            }
        }
        TaskEnd::Cancelled { sent_ns, cancel_ns } => {
            TaskRecord { enqueue_ns: sent_ns, cancelled: true, cancel_ns, ..base }
        }
        TaskEnd::Failed { sent_ns } => TaskRecord { enqueue_ns: sent_ns, failed: true, ..base },
        // A fallback task the normal read made unnecessary.
        TaskEnd::NotLaunched => TaskRecord { enqueue_ns: dispatched_ns, ..base },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::TaskRole;

    fn timing(enqueue_ns: u64, start_ns: u64, finish_ns: u64) -> node::TaskTiming {
        node::TaskTiming {
            node_id: 3,
            task_id: 1,
            enqueue_ns,
            start_ns,
            finish_ns,
            bytes: 100,
            outcome: node::TaskOutcome::Ok,
            bytes_ahead: 0,
            emulated_service_ns: 0,
            class: node::ClassId::DEFAULT,
        }
    }

    fn task() -> PlannedTask {
        PlannedTask { node: PolicyNodeId(2), unit: 1, offset: 0, length: 100, role: TaskRole::Normal }
    }

    #[test]
    fn node_timestamps_land_inside_the_round_trip_with_their_durations() {
        // Sent at 1000, answered at 2000; on the node: 100 ns waiting, 500 ns service.
        let end = TaskEnd::Done { timing: timing(5_000_000, 5_000_100, 5_000_600), sent_ns: 1000, received_ns: 2000 };
        let record = task_record(&task(), end, 900);
        assert!(!record.cancelled && !record.failed);
        assert_eq!(record.enqueue_ns, 1200, "400 ns outside the node, half of it before");
        assert_eq!(record.waiting_ns(), Some(100));
        assert_eq!(record.service_ns(), Some(500));
        assert_eq!(record.finish_ns, 1800);
    }

    #[test]
    fn cancelled_and_failed_tasks_never_started() {
        let record = task_record(&task(), TaskEnd::Cancelled { sent_ns: 50, cancel_ns: 70 }, 10);
        assert!(record.cancelled && record.cancel_ns == 70 && record.start_ns == NEVER && record.enqueue_ns == 50);
        assert!(!record.failed);
        let record = task_record(&task(), TaskEnd::Failed { sent_ns: 60 }, 10);
        assert!(record.failed && !record.cancelled && record.enqueue_ns == 60);
        assert!(record.latency_ns().is_none());
        let fallback = PlannedTask { role: TaskRole::Fallback, ..task() };
        let record = task_record(&fallback, TaskEnd::NotLaunched, 10);
        assert!(!record.cancelled && record.start_ns == NEVER, "a fallback never launched was not cancelled");
    }

    #[test]
    fn unreachable_nodes_look_full_and_measured_rates_and_overheads_are_kept() {
        let mut catalog = Catalog::new("rs-2-1", MAX_CATALOG_STRIPES).unwrap();
        let a = catalog.node(StoreNodeId(7));
        let b = catalog.node(StoreNodeId(9));
        assert_eq!(catalog.node(StoreNodeId(7)), a, "a node keeps its dense id");
        let reply = node::ProbeReply {
            node_id: 7,
            queued_bytes: 10,
            queued_tasks: 1,
            in_service_bytes: 5,
            in_service_tasks: 1,
            service_rate_bytes_per_s: 2e6,
            overhead_us: 4000,
            egress_bytes_per_s: 0.0,
            now_ns: 0,
            classes: Vec::new(),
        };
        let answers = record_rates(&mut catalog, &[(a, Some(reply)), (b, None)]);
        assert_eq!(answers[0].1, QueueState { bytes: 15, tasks: 2 });
        assert_eq!(answers[1].1, QueueState::UNREACHABLE);
        assert_eq!(catalog.rate(a), 2e6);
        assert_eq!(catalog.rate(b), 2e6, "an unmeasured node takes the mean of the measured ones");
        assert_eq!(catalog.task_overhead_ns(a), 4_000_000, "the overhead that goes with the rate");
        assert_eq!(catalog.task_overhead_ns(b), 4_000_000, "and the mean of the measured ones");
    }

    /// A lazy policy whose refresh work waits until the test lets it finish.
    struct GatedRefresh {
        started: std::sync::mpsc::Sender<()>,
        release: Option<std::sync::mpsc::Receiver<u32>>,
        installed: Arc<AtomicU64>,
    }

    impl ReadPolicy for GatedRefresh {
        fn name(&self) -> &'static str {
            "gated-refresh"
        }

        fn plan(
            &mut self,
            _view: &mut dyn policy::ClusterView,
            _now_ns: u64,
            _request: &model::ReadRequest,
            _rng: &mut dyn RngCore,
        ) -> model::ReadPlan {
            unreachable!("these tests only refresh")
        }

        fn refresh_period_ns(&self) -> Option<u64> {
            Some(1_000_000)
        }

        fn begin_refresh(
            &mut self,
            _view: &mut dyn policy::ClusterView,
            _now_ns: u64,
            _rng: &mut dyn RngCore,
        ) -> Option<policy::RefreshWork> {
            let started = self.started.clone();
            let release = self.release.take().expect("one refresh per test");
            Some(policy::RefreshWork::new(move || {
                started.send(()).unwrap();
                release.recv_timeout(Duration::from_secs(30)).expect("the test releases the work")
            }))
        }

        fn finish_refresh(&mut self, result: policy::RefreshResult) {
            let value: u32 = result.downcast().expect("a u32 from this policy's work");
            self.installed.store(u64::from(value), Ordering::SeqCst);
        }
    }

    /// A controller whose policy is a [`GatedRefresh`], with a refresh of it under way:
    /// (controller, the refresh, its release, the value it installed).
    async fn gated_refresh_under_way()
    -> (Arc<Controller>, tokio::task::JoinHandle<Result<(), DataError>>, std::sync::mpsc::Sender<u32>, Arc<AtomicU64>)
    {
        let controller = Arc::new(Controller::new(&ControllerConfig::default(), "rs-6-3").unwrap());
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel();
        let installed = Arc::new(AtomicU64::new(0));
        let generation = {
            let mut state = controller.lock();
            state.policy =
                Box::new(GatedRefresh { started: started_tx, release: Some(release_rx), installed: installed.clone() });
            state.generation
        };
        let refreshing = tokio::spawn({
            let controller = controller.clone();
            async move { controller.refresh_with(generation, &[]).await }
        });
        tokio::task::spawn_blocking(move || started_rx.recv_timeout(Duration::from_secs(30)))
            .await
            .unwrap()
            .expect("the refresh work starts");
        (controller, refreshing, release_tx, installed)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refresh_work_runs_without_the_controller_lock_and_is_installed_after() {
        let (controller, refreshing, release, installed) = gated_refresh_under_way().await;
        // The work is running, and requests could take the lock and plan meanwhile.
        assert!(controller.state.try_lock().is_ok(), "the refresh work holds the controller lock");
        assert_eq!(installed.load(Ordering::SeqCst), 0, "nothing installed before the work ends");
        release.send(42).unwrap();
        refreshing.await.unwrap().unwrap();
        assert_eq!(installed.load(Ordering::SeqCst), 42, "the work's result is installed");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refresh_work_of_a_switched_policy_is_dropped() {
        let (controller, refreshing, release, installed) = gated_refresh_under_way().await;
        controller.set_policy(PolicyKind::LmlfLazy, PolicySettings::default()).unwrap();
        release.send(42).unwrap();
        refreshing.await.unwrap().unwrap();
        assert_eq!(installed.load(Ordering::SeqCst), 0, "a result for the old policy is not installed");
        assert_eq!(controller.policy().policy, PolicyKind::LmlfLazy);
    }

    /// A sealed stripe of `code` on nodes 0 to 8.
    fn stripe(id: u64, code: &str) -> meta::StripeMeta {
        meta::StripeMeta {
            id: meta::StripeId(id),
            code: code.to_string(),
            unit_bytes: 4096,
            placement: (0..9).map(StoreNodeId).collect(),
            state: meta::StripeState::Sealed,
            unit_checksums: None,
            packed_bytes: None,
            missing_units: Vec::new(),
            degraded_since_ms: None,
            pending_until_ms: None,
            pending_writer: None,
            version: 1,
        }
    }

    #[test]
    fn the_catalog_holds_at_most_its_bound_and_a_fresh_start_keeps_the_nodes_rates() {
        let mut catalog = Catalog::new("rs-6-3", 2).unwrap();
        assert_eq!(catalog.stripe(&stripe(10, "rs-6-3")).unwrap(), Some(PolicyStripeId(0)));
        assert_eq!(catalog.stripe(&stripe(11, "rs-6-3")).unwrap(), Some(PolicyStripeId(1)));
        assert_eq!(catalog.stripe(&stripe(10, "rs-6-3")).unwrap(), Some(PolicyStripeId(0)), "known: no growth");
        assert_eq!(catalog.stripe(&stripe(12, "rs-6-3")).unwrap(), None, "full: the caller starts afresh");
        let node = catalog.node(StoreNodeId(4));
        catalog.rates[node.index()] = 3e6;
        catalog.forget_stripes().unwrap();
        assert_eq!(catalog.stripe_count(), 0);
        assert_eq!(catalog.node(StoreNodeId(4)), node, "nodes keep their dense ids");
        assert_eq!(catalog.rate(node), 3e6, "and their measured rates");
        assert_eq!(catalog.stripe(&stripe(12, "rs-6-3")).unwrap(), Some(PolicyStripeId(0)));
    }

    #[test]
    fn a_controller_reading_more_stripes_than_its_bound_starts_afresh_and_stays_bounded() {
        let config = ControllerConfig { max_records: 100, max_catalog_stripes: 3, ..Default::default() };
        let controller = Controller::new(&config, "rs-6-3").unwrap();
        let generation = controller.lock().generation;
        for id in 0..10 {
            let read_stripe = stripe(id, "rs-6-3");
            let read = Unplanned {
                stripe: &read_stripe,
                unit: 0,
                length: 100,
                arrival_ns: 5,
                degraded: false,
                served: true,
                latency_class: 0,
            };
            controller.record_unplanned(&read);
            assert!(controller.lock().catalog.stripe_count() <= 3, "stripe {id}: the catalog passed its bound");
        }
        assert_eq!(controller.lock().generation, generation + 3, "fresh starts at the 4th, 7th and 10th stripe");
        assert_eq!(controller.take_records().0.len(), 10, "every read recorded across the fresh starts");
        assert!(ControllerConfig { max_catalog_stripes: 0, ..Default::default() }.validate().is_err());
        assert!(
            ControllerConfig { max_catalog_stripes: MAX_CATALOG_STRIPES + 1, ..Default::default() }.validate().is_err()
        );
    }

    #[test]
    fn an_unplanned_read_is_recorded_only_for_a_stripe_of_the_controllers_code() {
        let config = ControllerConfig { max_records: 100, ..Default::default() };
        let controller = Controller::new(&config, "rs-6-3").unwrap();
        // RS(7,2) has as many units as RS(6,3) but other recovery sets: not the controller's.
        let (own, other) = (stripe(1, "rs-6-3"), stripe(2, "rs-7-2"));
        assert!(controller.is_own_code(&own) && !controller.is_own_code(&other));
        for read_stripe in [&own, &other] {
            let read = Unplanned {
                stripe: read_stripe,
                unit: 2,
                length: 100,
                arrival_ns: 5,
                degraded: true,
                served: true,
                latency_class: 1,
            };
            controller.record_unplanned(&read);
        }
        let (records, dropped) = controller.take_records();
        assert_eq!((records.len(), dropped), (1, 0), "only the read of the own code's stripe is recorded");
        let record = &records[0];
        assert_eq!(record.request.object, ObjectId(1));
        assert_eq!(record.request.partition, PartitionId(2), "stripe 0 of the catalog, unit 2");
        assert!(record.tasks.is_empty() && record.request.degraded && record.request.probes == 0);
        assert_eq!(record.request.outcome, Outcome::Ok);
        assert_eq!(record.request.latency_class, 1, "the record keeps the read's latency class");
    }

    #[test]
    fn config_refuses_inconsistent_frontends_and_zero_periods() {
        assert!(ControllerConfig::default().validate().is_ok());
        assert!(ControllerConfig { frontend_id: 1, ..Default::default() }.validate().is_err());
        assert!(ControllerConfig { frontend_count: 0, ..Default::default() }.validate().is_err());
        assert!(ControllerConfig { cpu_sample_every: 0, ..Default::default() }.validate().is_err());
        assert!(ControllerConfig { cpu_sample_every: 1, ..Default::default() }.validate().is_ok());
        let settings = PolicySettings { opt_lazy_period_ms: 0, ..Default::default() };
        assert!(ControllerConfig { settings, ..Default::default() }.validate().is_err());
    }
}
