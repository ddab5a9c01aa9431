//! lowtail's scheduling policies: given a view of the cluster, the current
//! time and a seeded random source, return a plan. This crate is the
//! sans-I/O core of the system (like quinn-proto): the simulator and the
//! live gateway are two shells around the same policy values.
//!
//! Owns: the [`ClusterView`] and [`ReadPolicy`] interfaces, the seven read
//! policies of Hu et al. (SoCC '17) for RS and LRC codes ([`read`]), their
//! configuration ([`PolicyKind`], [`PolicySettings`]), and placement
//! ([`placement`]).
//! Must not: do I/O, read a clock, spawn threads, or draw from an unseeded
//! random source. Time and randomness come in as arguments, so a policy
//! given the same view, time and seed makes the same decision. A tidy test
//! (`tests/tidy.rs`) enforces this for every crate of the spine.

pub mod classes;
pub mod ecstore;
pub mod fec;
pub mod load_window;
pub mod placement;
pub mod profile;
pub mod read;
pub mod reconstruct;

pub use profile::{Profile, build_planner};
pub use read::{BuildError, FecSettings, FrontendSetup, MarginalLoad, PolicyKind, PolicySettings, build_read_policy};

use model::{CodeLayout, NodeId, Placement, QueueState, ReadPlan, ReadRequest, RequestRecord, StripeId, TaskRecord};
use rand::RngCore;
use std::ops::Range;

/// What a policy may know about the cluster. Executors implement it: the
/// simulator over its modelled nodes, the gateway over RPCs. Every
/// [`ClusterView::probe`] is a queue probe that the executor counts (and, in
/// the simulator, charges a round trip for).
pub trait ClusterView {
    /// Which node holds each unit of each stripe.
    fn placement(&self) -> &Placement;
    /// The code with its recovery sets.
    fn layout(&self) -> &CodeLayout;
    /// Processing rate S_j of a node in bytes per second (heterogeneous
    /// clusters differ per node).
    fn node_rate_bytes_per_s(&self, node: NodeId) -> f64;
    /// Fixed service cost of every task on a node (seek, request handling), in nanoseconds,
    /// as the executor knows it: configured in the simulator, reported by the node's probe
    /// live. Only policies told to count it (`PolicySettings::count_task_overhead`) use it.
    fn node_task_overhead_ns(&self, node: NodeId) -> u64;
    /// Frontends sharing the cluster (a lazy policy that sees only its own
    /// frontend's requests scales its demand estimate by this).
    fn frontend_count(&self) -> u32;
    /// Probes a node's queue now. Counted by the executor.
    fn probe(&mut self, node: NodeId) -> QueueState;
    /// The deciding frontend's own pool of task slots as it stands now: local bookkeeping, not a
    /// probe, and not counted. FAST CLOUD's code-length policies choose n from it.
    fn frontend_state(&self) -> fec::FrontendState;
    /// The rack `node` sits in (racks numbered from 0; the latency-classes paper's topology).
    /// Executors that model no racks answer 0 for every node.
    fn node_rack(&self, node: NodeId) -> u16 {
        let _ = node;
        0
    }
    /// Whether the executor already knows `node` cannot serve (its failure was detected): not a
    /// probe, and not counted. EC-Store routes around such nodes without probing; executors that
    /// learn of failures only through probes answer false.
    fn node_unavailable(&self, node: NodeId) -> bool {
        let _ = node;
        false
    }
}

/// A read policy: one instance per frontend controller.
pub trait ReadPolicy {
    /// Canonical name (`lmlf-pw2`), as in configs and reports.
    fn name(&self) -> &'static str;

    /// Decides how to serve `request` at time `now_ns`. Probes go through
    /// `view`; randomness comes only from `rng`.
    fn plan(
        &mut self,
        view: &mut dyn ClusterView,
        now_ns: u64,
        request: &ReadRequest,
        rng: &mut dyn RngCore,
    ) -> ReadPlan;

    /// Whether the data units `units` of `stripe` (one read's row) are better read by one plan
    /// ([`ReadPolicy::plan_row`]) than by a plan per unit. Policies that read whole rows anyway
    /// (FAST CLOUD's, `jlwo`) are asked nothing: their executors plan rows by [`PolicyKind`].
    /// Default: never.
    fn wants_row(&self, view: &dyn ClusterView, now_ns: u64, stripe: StripeId, units: Range<u8>) -> bool {
        let _ = (view, now_ns, stripe, units);
        false
    }

    /// One plan serving every data unit of `units` (`request` names the first of them); the
    /// executor decodes those the plan does not read. It probes what
    /// [`ReadPolicy::probe_targets`] announced for `request`. Default: [`ReadPolicy::plan`],
    /// which is a row plan for the policies that read rows.
    fn plan_row(
        &mut self,
        view: &mut dyn ClusterView,
        now_ns: u64,
        request: &ReadRequest,
        units: Range<u8>,
        rng: &mut dyn RngCore,
    ) -> ReadPlan {
        let _ = units;
        self.plan(view, now_ns, request, rng)
    }

    /// The nodes [`ReadPolicy::plan`] will probe for `request`, in probe order, appended to
    /// `targets`. Executors that cannot answer a probe synchronously (the live gateway) call this
    /// with a copy of the random source they then pass to `plan`, send these probes in one parallel
    /// round trip, and answer `plan`'s probes from the replies. The contract that makes this sound:
    /// which nodes a policy probes depends only on the view's static facts, the request and the
    /// random draws, never on probe answers, and `plan` given the same random state probes exactly
    /// these nodes (a test checks it for every policy). Policies that do not probe per request add
    /// nothing.
    fn probe_targets(
        &mut self,
        view: &dyn ClusterView,
        now_ns: u64,
        request: &ReadRequest,
        rng: &mut dyn RngCore,
        targets: &mut Vec<NodeId>,
    ) {
        let _ = (view, now_ns, request, rng, targets);
    }

    /// How often the executor must refresh the policy (lazy policies), or `None`.
    fn refresh_period_ns(&self) -> Option<u64> {
        None
    }

    /// Whether the refresh reads node queues: an executor that probes ahead of the refresh (the
    /// gateway probes every node in one round) skips that round when this is false. FAST CLOUD's
    /// refresh refits its delay model from what it observed and probes nothing.
    fn refresh_probes_nodes(&self) -> bool {
        true
    }

    /// Whether the refresh needs each node's rack in the view ([`ClusterView::node_rack`]): an
    /// executor that learns racks from its node records reads them before such a refresh (JLWO's
    /// solve is per rack). Default: no.
    fn refresh_reads_racks(&self) -> bool {
        false
    }

    /// What the executor recorded of a request this policy planned, once every task of it is
    /// resolved (the same record both executors write). Policies that learn from outcomes (FAST
    /// CLOUD's online delay fit) keep what they need, bounded; the rest ignore it.
    fn observe(&mut self, request: &RequestRecord, tasks: &[TaskRecord]) {
        let _ = (request, tasks);
    }

    /// Named numbers of the policy's state for an executor's metrics and status (FAST CLOUD's
    /// delay model in use); empty for policies with nothing to show.
    fn gauges(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// How the nodes of each rack should divide their service between the latency classes, as
    /// the policy last solved it (Xiang et al.'s JLWO: the bandwidth it reserves per class
    /// towards each storage rack); `None` for policies that do not decide it, whose executors
    /// keep the configured shares.
    fn node_class_shares(&self) -> Option<classes::RackClassShares> {
        None
    }

    /// Why the last refresh installed nothing, if it failed (JLWO's solve: the queue that would
    /// saturate); `None` after a refresh that installed its result. Executors log it.
    fn refresh_failure(&self) -> Option<String> {
        None
    }

    /// For a read the policy does not plan, any one of whose copies serves (a small object's
    /// replicas while its stripe is open): how long the executor waits for the copy it tried
    /// before trying the next, for `length` bytes. `None`: the executor's own read timeout.
    fn copy_wait_ns(&self, length: u64) -> Option<u64> {
        let _ = length;
        None
    }

    /// Whether such a read should try `node`'s copy only after the others' (the policy found the
    /// node slow). Default: no node is.
    fn tries_last(&self, node: NodeId) -> bool {
        let _ = node;
        false
    }

    /// The racks (the view's rack numbers, best first) a new stripe of `latency_class` should be
    /// placed on, as the policy last solved it (JLWO's placement step for a file not placed yet);
    /// `None` for policies that do not place, whose executors place as they always do.
    fn new_stripe_racks(&self, latency_class: u8) -> Option<Vec<u16>> {
        let _ = latency_class;
        None
    }

    /// The first half of a lazy policy's periodic refresh: probe every node (counted) into the
    /// queue table and take what the policy gathered since the last refresh. What is left to
    /// compute from that (Opt-Lazy's solve of problem (1)) comes back as a [`RefreshWork`],
    /// which needs neither the view nor the policy. The policy keeps planning with its previous
    /// tables until [`ReadPolicy::finish_refresh`] installs the work's result.
    fn begin_refresh(&mut self, view: &mut dyn ClusterView, now_ns: u64, rng: &mut dyn RngCore) -> Option<RefreshWork> {
        let _ = (view, now_ns, rng);
        None
    }

    /// Installs the result of the [`RefreshWork`] this policy's last
    /// [`ReadPolicy::begin_refresh`] returned. A result of any other work is a bug of the
    /// executor, and panics.
    fn finish_refresh(&mut self, result: RefreshResult) {
        let _ = result;
        panic!("{} never hands out refresh work, so it has no result to install", self.name());
    }

    /// A whole refresh at once: [`ReadPolicy::begin_refresh`], its work, and
    /// [`ReadPolicy::finish_refresh`]. For executors that own their policy outright (the
    /// simulator); one that shares it between requests (the gateway) runs the work without
    /// holding the policy, so no request waits behind a solve.
    fn refresh(&mut self, view: &mut dyn ClusterView, now_ns: u64, rng: &mut dyn RngCore) {
        if let Some(work) = self.begin_refresh(view, now_ns, rng) {
            self.finish_refresh(work.run());
        }
    }
}

/// The part of a refresh that needs neither the view nor the policy (Opt-Lazy's solve): owned
/// and `Send`, so an executor can run it on another thread while requests go on being planned.
pub struct RefreshWork(Box<dyn FnOnce() -> RefreshResult + Send>);

impl RefreshWork {
    /// Work that computes `run` and hands its value to the policy's `finish_refresh`.
    pub fn new<T: Send + 'static>(run: impl FnOnce() -> T + Send + 'static) -> RefreshWork {
        RefreshWork(Box::new(move || RefreshResult(Box::new(run()))))
    }

    /// Does the work (pure computation: no I/O, no clock).
    pub fn run(self) -> RefreshResult {
        (self.0)()
    }
}

impl std::fmt::Debug for RefreshWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RefreshWork")
    }
}

/// What a [`RefreshWork`] computed, for the policy that handed it out.
pub struct RefreshResult(Box<dyn std::any::Any + Send>);

impl RefreshResult {
    /// The value, if the work computed a `T`.
    pub fn downcast<T: 'static>(self) -> Result<T, RefreshResult> {
        self.0.downcast::<T>().map(|value| *value).map_err(RefreshResult)
    }

    /// The value, borrowed, if the work computed a `T`.
    pub fn peek<T: 'static>(&self) -> Option<&T> {
        self.0.downcast_ref::<T>()
    }
}

impl std::fmt::Debug for RefreshResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RefreshResult")
    }
}
