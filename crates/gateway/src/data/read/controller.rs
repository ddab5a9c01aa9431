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

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use execution::{AdmissionMode, AdmissionSettings};
use meta::{NodeId as StoreNodeId, StripeMeta};
use model::{
    BatchRecord, CodeLayout, MoveRecord, PartitionId, ReadPlan, ReadRequest, Record, RequestId,
    StripeId as PolicyStripeId,
};
use policy::ecstore::access::{AccessPolicy, AccessSettings};
use policy::ecstore::mover::{Mover, MoverSettings};
use policy::{FrontendSetup, PolicyKind, PolicySettings, Profile, ReadPolicy, build_read_policy};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::data::DataError;
use crate::data::cluster::class_shares::RackShares;
use crate::data::io::stripe_io::{StripeIo, is_up};
use crate::data::read::admission::TaskPool;
use crate::data::read::range::RangeRead;
use crate::data::read::robust::{self, Rebuilt};
use crate::profiles::ActiveProfile;
use policy::fec::FrontendState;

mod batch;
mod catalog;
mod config;
mod counters;
mod deciding;
mod movement;
mod records;
mod refresh;
pub use crate::data::config::MoverConfig;
pub use batch::{BatchBlock, BlockResult, MAX_BATCH_BLOCKS};
use catalog::{Catalog, LiveView, record_rates};
pub use config::{ControllerConfig, MAX_CATALOG_STRIPES, PolicyState, validate_settings};
pub use counters::ControllerCounters;
use counters::count;
use deciding::Executed;
pub use movement::StoreMove;
pub use records::DEFAULT_PROFILE;
pub use records::Unplanned;
pub use records::layer_decisions;
use records::{Served, ThreadCpu, task_record};
pub use refresh::SHARES_VALID_MIN;

/// Plans retried when the policy is switched between announcing probes and planning.
const PLAN_ATTEMPTS: usize = 3;
/// Everything behind the controller's one lock (held for microseconds, never across an await).
struct State {
    kind: PolicyKind,
    settings: PolicySettings,
    /// The cluster's default profile's planner.
    policy: Box<dyn ReadPolicy + Send>,
    /// The planners of the buckets' profiles in use, by profile name, each built on its first read
    /// and again when its profile changed.
    profiles: HashMap<String, ProfilePlanner>,
    /// When the default planner's next periodic refresh is due (controller clock).
    default_next_refresh_ns: u64,
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

/// A bucket profile's planner.
struct ProfilePlanner {
    /// The profile it was built for.
    profile: Profile,
    policy: Box<dyn ReadPolicy + Send>,
    /// When its next periodic refresh is due (controller clock).
    next_refresh_ns: u64,
}

impl State {
    /// The planner of `active` (the default's for `None`); [`State::ensure_planner`] built it.
    fn planner(&mut self, active: Option<&ActiveProfile>) -> &mut (dyn ReadPolicy + Send) {
        self.planner_named(active.map(|active| active.name.as_str())).expect("ensure_planner built it")
    }

    /// The planner of the profile named `name` (the default's for `None`), if it has one now.
    fn planner_named(&mut self, name: Option<&str>) -> Option<&mut (dyn ReadPolicy + Send)> {
        match name {
            None => Some(&mut *self.policy),
            Some(name) => self.profiles.get_mut(name).map(|planner| &mut *planner.policy as _),
        }
    }

    /// The planners whose periodic refresh is due at `now_ns` (`None`: the default's), their next
    /// refresh set a period on. A refresh woken by another planner's may come up to a quarter of
    /// the period early, never late.
    fn due_for_refresh(&mut self, now_ns: u64) -> Vec<Option<String>> {
        let mut due = Vec::new();
        let mut take = |name: Option<&String>, period: Option<u64>, next_ns: &mut u64| {
            if let Some(period_ns) = period
                && now_ns.saturating_add(period_ns / 4) >= *next_ns
            {
                *next_ns = now_ns.saturating_add(period_ns);
                due.push(name.cloned());
            }
        };
        take(None, self.policy.refresh_period_ns(), &mut self.default_next_refresh_ns);
        for (name, planner) in &mut self.profiles {
            take(Some(name), planner.policy.refresh_period_ns(), &mut planner.next_refresh_ns);
        }
        due
    }

    /// The shortest refresh period of any planner: how often the refresh loop wakes.
    fn refresh_period_ns(&self) -> Option<u64> {
        let profiles = self.profiles.values().filter_map(|planner| planner.policy.refresh_period_ns());
        self.policy.refresh_period_ns().into_iter().chain(profiles).min()
    }

    /// Builds `active`'s planner if it has none or its profile changed (a change bumps the
    /// generation, so a decision begun under the old planner plans again); says whether it built
    /// one. A profile this gateway cannot run fails the read with the reason.
    fn ensure_planner(
        &mut self,
        active: Option<&ActiveProfile>,
        admission: AdmissionSettings,
    ) -> Result<bool, DataError> {
        let Some(active) = active else { return Ok(false) };
        if let Some(why) = &active.refusal {
            return Err(DataError::Internal(format!("bucket profile {:?} cannot run here: {why}", active.name)));
        }
        if self.profiles.get(&active.name).is_some_and(|planner| planner.profile == active.profile) {
            return Ok(false);
        }
        let policy = build_planner(&active.profile, &self.settings, &self.catalog.layout, admission)?;
        let planner = ProfilePlanner { profile: active.profile.clone(), policy, next_refresh_ns: 0 };
        self.profiles.insert(active.name.clone(), planner);
        self.generation += 1;
        Ok(true)
    }

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
    /// The bucket profile whose planner planned it (`None`: the cluster's default).
    profile: Option<Arc<ActiveProfile>>,
    /// The planner's name, for the record: the profile's read layers'.
    planner: String,
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
                profiles: HashMap::new(),
                default_next_refresh_ns: 0,
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

    /// Whether the current request's profile reads stripe rows (FAST CLOUD's: n units, first k),
    /// so that one plan serves every data unit of a row ([`Controller::read_units`]).
    pub fn reads_rows(&self) -> bool {
        match crate::profiles::active() {
            Some(active) => active.profile.reads_rows(),
            None => self.lock().kind.reads_rows(),
        }
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
            // Its tables start empty: its first refresh is due at once.
            state.default_next_refresh_ns = 0;
            // The buckets' planners are rebuilt with the new settings at their next read.
            state.profiles.clear();
            state.generation += 1;
        }
        tracing::info!(policy = %kind, "read policy switched");
        self.switched.notify_one();
        Ok(self.policy())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        crate::data::lock(&self.state)
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
        if units.len() > 1 && (self.reads_rows() || self.wants_row(&range, &units)) {
            // The reconstruction layer rebuilds a lost unit of the row its way (segmented, or by the
            // nodes); the row's other units are read as planned, in runs around it.
            let lost: Vec<usize> = units.clone().filter(|&unit| rebuilt_apart(RangeRead { unit, ..range })).collect();
            if lost.is_empty() {
                return self.read_row(range, units).await;
            }
            return self.read_around(range, units, &lost).await;
        }
        if units.len() == 1 {
            return self.read_row(range, units).await;
        }
        let each = units.map(|unit| async move {
            let mut bytes = self.read_row(RangeRead { unit, ..range }, unit..unit + 1).await?;
            Ok::<_, DataError>(bytes.pop().expect("one unit asked for"))
        });
        futures_util::future::try_join_all(each).await
    }

    /// `units` of the range's row with the `lost` ones rebuilt apart (each its own read, which the
    /// reconstruction layer serves) and every run of the others read as one row plan.
    async fn read_around(
        &self,
        range: RangeRead<'_>,
        units: Range<usize>,
        lost: &[usize],
    ) -> Result<Vec<Bytes>, DataError> {
        let mut pieces: Vec<Range<usize>> = Vec::new();
        for unit in units {
            match pieces.last_mut() {
                Some(run) if run.end == unit && !lost.contains(&unit) && !lost.contains(&run.start) => run.end += 1,
                _ => pieces.push(unit..unit + 1),
            }
        }
        let reads = pieces.into_iter().map(|piece| self.read_row(RangeRead { unit: piece.start, ..range }, piece));
        let read = futures_util::future::try_join_all(reads).await?;
        Ok(read.into_iter().flatten().collect())
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
        let active = crate::profiles::active();
        if state.ensure_planner(active.as_deref(), self.admission).is_err() {
            return false;
        }
        let view =
            LiveView::of_read(&state.catalog, &[], self.frontend_count, frontend, range.nodes).reading(range.stripe);
        let planner = match active.as_deref() {
            None => &*state.policy,
            Some(active) => &*state.profiles[&active.name].policy,
        };
        planner.wants_row(&view, now_ns, dense, units.start as u8..units.end as u8)
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
            && !(units.len() == 1 && rebuilt_apart(range));
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
        let active = crate::profiles::active();
        let slots = range.admission.map_or(0, TaskPool::slot_count);
        let Some(decision) = decision else {
            count(&self.counters.bypassed, "lowtail_controller_reads_bypassed_total", 1);
            let result = self.read_robust(range, units).await;
            let rebuilt = result.as_ref().map_or(Rebuilt::No, |(_, rebuilt)| *rebuilt);
            let read = Unplanned {
                stripe,
                unit,
                length: bytes_asked,
                arrival_ns,
                rebuilt,
                served: result.is_ok(),
                latency_class: range.io.cluster().call_class().0,
                layers: layer_decisions(active.as_deref(), "", None, rebuilt, slots),
            };
            self.record_unplanned(&read);
            return result.map(|(bytes, _)| bytes);
        };
        count(&self.counters.planned_reads, "lowtail_controller_reads_planned_total", 1);
        metrics::histogram!("lowtail_controller_decision_seconds")
            .record((decision.decision_end_ns - decision.decision_start_ns) as f64 / 1e9);
        let (executed, ends) = self.execute(&range, units.clone(), &decision).await;
        // A planned read that failed and fell back to the robust read is marked degraded (the
        // record says the plan did not serve it), whatever the fallback found.
        let (result, rebuilt, degraded, timed_out) = match executed {
            Executed::Done { bytes, degraded, timed_out } => {
                if degraded {
                    io.count_degraded();
                }
                (Ok(bytes), if degraded { Rebuilt::Gateway } else { Rebuilt::No }, degraded, timed_out)
            }
            Executed::Failed { timed_out } => {
                // Availability first: the robust read tries every decodable set and Down nodes.
                count(&self.counters.fallbacks, "lowtail_controller_fallbacks_total", 1);
                let read = self.read_robust(range, units).await;
                let rebuilt = read.as_ref().map_or(Rebuilt::Gateway, |(_, rebuilt)| *rebuilt);
                (read.map(|(bytes, _)| bytes), rebuilt, true, timed_out)
            }
        };
        let layers = layer_decisions(active.as_deref(), &decision.planner, Some(&decision.plan), rebuilt, slots);
        let served = Served { bytes: bytes_asked, degraded, timed_out, ok: result.is_ok(), layers };
        self.record_planned(&decision, &ends, arrival_ns, served);
        result
    }

    /// Each unit of `units` by the robust read, in parallel, and how the row came (a unit rebuilt
    /// makes the row rebuilt, the first such unit's way).
    async fn read_robust(&self, range: RangeRead<'_>, units: Range<usize>) -> Result<(Vec<Bytes>, Rebuilt), DataError> {
        let timeout_ns = self.read_timeout().as_nanos() as u64;
        let each = units.map(|unit| robust::read(RangeRead { unit, ..range }, timeout_ns));
        let read = futures_util::future::try_join_all(each).await?;
        let rebuilt = read.iter().map(|(_, rebuilt)| *rebuilt).find(|rebuilt| rebuilt.is_degraded());
        Ok((read.into_iter().map(|(bytes, _)| bytes).collect(), rebuilt.unwrap_or(Rebuilt::No)))
    }

    /// Whether `stripe` is of the code this controller plans. A stripe of another code (written
    /// before the cluster's code changed) has other recovery sets, so a plan for it would be wrong
    /// even when its unit count matches.
    fn is_own_code(&self, stripe: &StripeMeta) -> bool {
        stripe.code_spec().is_ok_and(|spec| spec == self.code)
    }

    fn reset_catalog(&self, state: &mut State) -> Result<(), DataError> {
        tracing::info!(stripes = state.catalog.max_stripes, "controller placement full; starting afresh");
        state.catalog.forget_stripes()?;
        state.policy = build_policy(state.kind, &state.settings, &state.catalog.layout, self.admission)?;
        state.default_next_refresh_ns = 0;
        // The profiles' planners' tables name forgotten dense ids too: rebuilt on their next read.
        state.profiles.clear();
        // The access policy's cache and solves, and the mover's statistics, name the forgotten
        // dense ids.
        state.access = build_access(state.access.settings(), &state.catalog.layout)?;
        state.mover = build_mover(state.mover.settings())?;
        state.access_generation += 1;
        state.generation += 1;
        Ok(())
    }
}

/// Whether `range`'s unit must be rebuilt and the reconstruction layer rebuilds it apart from a
/// plan (segmented, or by the nodes).
fn rebuilt_apart(range: RangeRead<'_>) -> bool {
    crate::data::read::segmented::applies(range) || crate::data::read::node_dataflow::applies(range)
}

/// The planner of `profile` for stripes of `layout` read through a pool of `admission`.
fn build_planner(
    profile: &Profile,
    settings: &PolicySettings,
    layout: &CodeLayout,
    admission: AdmissionSettings,
) -> Result<Box<dyn ReadPolicy + Send>, DataError> {
    let blocking = admission.mode == AdmissionMode::Blocking;
    policy::build_planner(profile, settings, &FrontendSetup::new(layout, admission.slots, blocking))
        .map_err(|error| DataError::Internal(format!("profile {}: {error}", profile.read_name())))
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

/// Refuses a policy that probes nodes where probing is not allowed.
fn check_probing(kind: PolicyKind, allowed: bool) -> Result<(), DataError> {
    if kind.probes_nodes() && !allowed {
        return Err(DataError::Internal(format!(
            "policy {kind} probes storage nodes, and an S3 backend has none: use normal, fec-fixed, fec-greedy or fec-bafec"
        )));
    }
    Ok(())
}
#[cfg(test)]
mod tests;
