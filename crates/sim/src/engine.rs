//! The discrete-event engine: frontends that ask a policy for plans, storage
//! nodes with FCFS queues measured in bytes, a network with a fixed one-way
//! latency, quorums, timeouts and cancellation. It emits `model` records.
//!
//! Event flow of one request: arrival → (queue at its frontend) → decision
//! (the policy runs at its start; probes see the queues of that instant) →
//! tasks reach their nodes one network latency after the decision ends →
//! FCFS service → results reach the frontend one latency after service ends →
//! the quorum completes the request and unneeded tasks are cancelled (the
//! cancel reaches the node one latency later). A record is emitted once every
//! task of the request is resolved (finished or cancelled).
//!
//! How a plan runs (which tasks start, the timeout and its fallback, when the
//! quorum is met, what is cancelled) is decided by `execution`'s
//! `ReadExecution`, the core the gateway drives too: this engine feeds it the
//! results, cancels and timers of its virtual time and carries out its actions.
//! Between the decision and the execution sits each frontend's admission pool
//! (`execution::Admission`, L task slots, unbounded by default): a decided plan
//! runs when its request is admitted, and a started task leaves for its node
//! when it has a slot; the slot is free once its result is back or the task is
//! cancelled.
//!
//! Must not: contain policy logic (plans come from `policy`) or quorum logic
//! (it is the execution core's), read a clock, or draw from anything but the
//! seeded streams it owns.

use codec::ErasureCode;
use execution::{Action, Admission, AdmissionSettings, Admitted, ReadExecution};
use model::{
    CodeLayout, FrontendId, NEVER, NodeId, Outcome, Placement, QueueState, ReadPlan, ReadRequest, RecordLog,
    RequestRecord, TaskRecord, TaskRole,
};
use policy::fec::FrontendState;
use policy::{ClusterView, ReadPolicy};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// Most requests waiting at one frontend; beyond it the run is refused as
/// overloaded rather than letting memory grow without bound.
pub const FRONTEND_QUEUE_MAX: usize = 4_000_000;
/// Most events one run may process (a guard against a livelock bug).
pub const EVENTS_MAX: u64 = 2_000_000_000;

/// Node service model.
#[derive(Clone, Debug)]
pub struct NodeModel {
    /// Fixed cost per task.
    pub overhead_ns: u64,
    /// Rate per node, bytes per second.
    pub rates_bytes_per_s: Vec<f64>,
    /// Mean of the extra exponential delay (0: none).
    pub exp_mean_ns: u64,
    /// Whether cancelling an in-service task aborts it.
    pub cancel_in_service: bool,
    /// Tasks a node serves at once (1: the FCFS node of Hu et al.; more: a key-value server whose
    /// tasks do not wait for each other, FAST CLOUD's backend).
    pub servers: usize,
    /// Per request class, the fixed cost and exponential mean its tasks take instead of
    /// `overhead_ns` and `exp_mean_ns` (FAST CLOUD's reads and writes); empty: every class alike.
    /// A class past the end takes the node's own.
    pub class_delays: Vec<ClassDelay>,
    /// A node made slower from a point in the run, if any.
    pub slowdown: Option<Slowdown>,
    /// Nodes down for a while: they fail the tasks they hold and every task that reaches them.
    pub outages: Vec<Outage>,
}

/// A request class's task delay: a fixed cost plus an exponential (see [`NodeModel::class_delays`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassDelay {
    /// Fixed cost per task (Δ).
    pub overhead_ns: u64,
    /// Mean of the exponential part (1/μ; 0: none).
    pub exp_mean_ns: u64,
}

/// Node `node` is down from `from_ns` until `until_ns` ([`NEVER`]: for good). Going down fails
/// every task it holds (waiting or in service); a task that reaches it while down fails at once;
/// a probe finds it unreachable. Its failures reach the frontend one network latency later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outage {
    /// The node.
    pub node: u32,
    /// When it goes down.
    pub from_ns: u64,
    /// When it is back.
    pub until_ns: u64,
}

impl Outage {
    /// Whether it has `node` down at `at_ns`.
    pub fn takes_down(&self, node: u32, at_ns: u64) -> bool {
        self.node == node && (self.from_ns..self.until_ns).contains(&at_ns)
    }
}

/// One node made `factor` times slower (overhead × factor, rate ÷ factor) for every task that
/// starts at or after `from_ns`: the live experiment's slow-node knob. The view reports the slowed
/// rate and overhead from `from_ns` on, as a live node's probe does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slowdown {
    /// The node slowed.
    pub node: u32,
    /// When it slows.
    pub from_ns: u64,
    /// How many times slower (≥ 1).
    pub factor: f64,
}

impl NodeModel {
    /// Whether `node` is down at `now_ns`.
    pub fn is_down(&self, node: u32, now_ns: u64) -> bool {
        self.outages.iter().any(|o| o.takes_down(node, now_ns))
    }

    /// Per-task overhead (ns) and rate (bytes/s) of `node` for a task starting at `now_ns`.
    pub fn service_of(&self, node: u32, now_ns: u64) -> (u64, f64) {
        let rate = self.rates_bytes_per_s[node as usize];
        match self.slowdown {
            Some(slow) if slow.node == node && now_ns >= slow.from_ns => {
                ((self.overhead_ns as f64 * slow.factor).round() as u64, rate / slow.factor)
            }
            _ => (self.overhead_ns, rate),
        }
    }
}

/// Frontend model.
#[derive(Clone, Debug)]
pub struct FrontendModel {
    /// Frontends.
    pub count: u16,
    /// Controller time per decision.
    pub decision_ns: u64,
    /// Round trip of a probe batch (charged once if the decision probes).
    pub probe_rtt_ns: u64,
    /// Controller time per probe.
    pub per_probe_ns: u64,
    /// Whether a frontend waits for a decision's probe replies before it starts the next decision
    /// (one decision at a time, the paper's controller) or decides the next request meanwhile and
    /// dispatches the plan when the replies are in (lowtail's gateway: probes are asynchronous).
    pub probes_block_frontend: bool,
    /// Each frontend's pool of in-flight task slots and its admission rule.
    pub admission: AdmissionSettings,
}

impl FrontendModel {
    /// One frontend that decides at once and probes for free: the engine without a controller's
    /// costs (queueing checks, scripted timelines).
    pub fn instant() -> FrontendModel {
        FrontendModel {
            count: 1,
            decision_ns: 0,
            probe_rtt_ns: 0,
            per_probe_ns: 0,
            probes_block_frontend: true,
            admission: AdmissionSettings::default(),
        }
    }
}

/// Everything the engine needs besides the requests and the policies.
pub struct EngineSetup<'a> {
    /// Where units live.
    pub placement: &'a Placement,
    /// The code's recovery sets.
    pub layout: &'a CodeLayout,
    /// Nodes.
    pub nodes: NodeModel,
    /// Frontends.
    pub frontends: FrontendModel,
    /// One-way network latency.
    pub network_latency_ns: u64,
    /// Seed of the engine's own streams.
    pub seed: u64,
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct EngineOutput {
    /// One record per request, ordered by request id.
    pub records: RecordLog,
    /// Service time spent per node.
    pub node_busy_ns: Vec<u64>,
    /// Probes sent by the lazy policies' periodic refreshes (per-request
    /// probes are in the records).
    pub refresh_probes: u64,
    /// Events processed.
    pub events: u64,
    /// Time of the last event.
    pub end_ns: u64,
    /// Every action of the execution core with its time and request, when asked for with
    /// [`Engine::trace_actions`] (to compare executors; empty otherwise).
    pub actions: Vec<(u64, model::RequestId, Action)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    DecisionDone {
        frontend: u16,
    },
    /// A decision whose probes did not hold its frontend: its plan is dispatched now.
    Dispatch {
        request: u32,
    },
    TaskArrive {
        task: u32,
    },
    TaskFinish {
        node: u32,
        task: u32,
        generation: u32,
    },
    ResultArrive {
        task: u32,
    },
    Timeout {
        request: u32,
        generation: u32,
    },
    CancelArrive {
        task: u32,
    },
    /// A task cancelled while it waited for an admission slot: its frontend tells the execution.
    Withdrawn {
        task: u32,
    },
    /// A node goes down (an [`Outage`] begins).
    NodeDown {
        node: u32,
    },
    Refresh {
        frontend: u16,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Scheduled {
    time_ns: u64,
    sequence: u64,
    event: Event,
}

impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse to pop the earliest, then the
        // first scheduled (sequence numbers are unique, so this is total).
        (other.time_ns, other.sequence).cmp(&(self.time_ns, self.sequence))
    }
}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TaskState {
    /// Planned as a fallback, not launched.
    Dormant,
    /// Started by the execution, waiting at its frontend for an admission slot.
    AwaitingSlot,
    /// Cancelled while it waited for a slot: it never left its frontend (not recorded).
    Withdrawn,
    /// On its way to the node.
    InFlight,
    Waiting,
    InService,
    /// Service ended; result on its way or delivered.
    Finished,
    Cancelled,
    /// Its node failed it (down when it arrived, or went down while holding it); the failure is
    /// on its way to the frontend or delivered.
    Failed,
}

#[derive(Clone, Copy, Debug)]
struct Task {
    request: u32,
    /// The task's index in its request's plan (the execution core's name for it).
    position: u16,
    node: u32,
    unit: u8,
    role: TaskRole,
    state: TaskState,
    /// When the frontend sent the cancel ([`NEVER`]: not sent). Sent while
    /// the task was in flight, it makes the node drop the task on arrival.
    cancel_sent_ns: u64,
    /// Whether the task sits in its node's queue deque (cancelled waiting
    /// tasks stay there until the node skips them).
    queued: bool,
    /// Bumped when the slot is reused, so stale events are recognised.
    generation: u32,
    /// Whether the task is submitted to its frontend's admission pool and has not ended there.
    submitted: bool,
    bytes: u64,
    /// Its request's class (which of the node model's class delays it takes).
    class: u8,
    enqueue_ns: u64,
    start_ns: u64,
    finish_ns: u64,
}

#[derive(Clone, Debug)]
struct Active {
    request: ReadRequest,
    frontend: u16,
    decision_start_ns: u64,
    decision_end_ns: u64,
    completion_ns: u64,
    probes: u32,
    /// The plan's tasks, by position, as indices into the engine's tasks.
    tasks: Vec<u32>,
    /// How the plan runs (`None` until the slot's first dispatch; reused by the slot's later
    /// requests, so a run allocates no execution per request).
    execution: Option<ReadExecution>,
    /// Whether the slot's request is dispatched and not yet written out.
    executing: bool,
    /// Whether the read was served by decoding (set when it completes).
    degraded: bool,
    /// Bumped when the slot is reused, so stale timeouts are recognised.
    generation: u32,
    /// A plan decided but waiting for its probe replies (frontends that do not block on probes),
    /// then for its admission.
    pending_plan: Option<ReadPlan>,
}

struct Frontend {
    queue: VecDeque<(ReadRequest, u64)>,
    /// The request being decided: (slot, plan) until the decision ends.
    /// The request being decided, with its plan unless the plan waits for probe replies.
    deciding: Option<(u32, Option<ReadPlan>)>,
    rng: ChaCha8Rng,
    /// Admission to the frontend's task slots (the request numbers are request slots); `None` when
    /// unbounded: such a pool admits every request and task the moment it asks (`Admission`'s
    /// tests show it), so the engine does not consult it, which saves a fifth of a run's time.
    pool: Option<Admission>,
}

struct Node {
    queue: VecDeque<u32>,
    /// Tasks in service, at most the model's `servers` (usually one: an FCFS node).
    in_service: Vec<u32>,
    queued_bytes: u64,
    queued_tasks: u32,
    busy_ns: u64,
    rng: ChaCha8Rng,
}

/// The view policies get: placement, code and the nodes' queues, counting
/// probes.
struct View<'a> {
    placement: &'a Placement,
    layout: &'a CodeLayout,
    nodes: &'a [Node],
    model: &'a NodeModel,
    now_ns: u64,
    frontends: u32,
    probes: u32,
    /// The deciding frontend's admission pool.
    frontend: FrontendState,
}

impl ClusterView for View<'_> {
    fn placement(&self) -> &Placement {
        self.placement
    }
    fn layout(&self) -> &CodeLayout {
        self.layout
    }
    fn node_rate_bytes_per_s(&self, node: NodeId) -> f64 {
        self.model.service_of(node.0, self.now_ns).1
    }
    fn node_task_overhead_ns(&self, node: NodeId) -> u64 {
        self.model.service_of(node.0, self.now_ns).0
    }
    fn frontend_count(&self) -> u32 {
        self.frontends
    }
    fn frontend_state(&self) -> FrontendState {
        self.frontend
    }
    fn probe(&mut self, node: NodeId) -> QueueState {
        self.probes += 1;
        if self.model.is_down(node.0, self.now_ns) {
            return QueueState::UNREACHABLE;
        }
        let node = &self.nodes[node.index()];
        QueueState { bytes: node.queued_bytes, tasks: node.queued_tasks }
    }
}

/// The random stream `index` of the engine's stream family `tag` for `seed` (the batch engine draws
/// from the same family).
pub(crate) fn stream(seed: u64, tag: u64, index: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ tag.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    rng.set_stream(index);
    rng
}

/// The engine's state.
pub struct Engine<'a> {
    setup: EngineSetup<'a>,
    policies: Vec<Box<dyn ReadPolicy>>,
    /// The stripes' code: the execution core asks it whether answered units give the target.
    code: Box<dyn ErasureCode>,
    events: BinaryHeap<Scheduled>,
    /// Events due one network latency after they were scheduled (task and
    /// cancel arrivals, results): with a constant latency they are due in
    /// the order they are scheduled, so a FIFO holds them instead of the
    /// heap. The next event is the earlier of the two heads by (time,
    /// sequence): the same total order as one heap.
    in_flight: VecDeque<Scheduled>,
    sequence: u64,
    now_ns: u64,
    frontends: Vec<Frontend>,
    nodes: Vec<Node>,
    tasks: Vec<Task>,
    free_tasks: Vec<u32>,
    active: Vec<Active>,
    free_active: Vec<u32>,
    records: RecordLog,
    refresh_probes: u64,
    events_done: u64,
    assign_rng: ChaCha8Rng,
    task_scratch: Vec<TaskRecord>,
    /// Whether request ids are `0..len` in arrival order, so records can be
    /// written in id order as they complete (else: sorted at the end).
    dense_ids: bool,
    /// The id of the next record to append to the log.
    next_record: u64,
    /// Records completed ahead of `next_record`, at `id - next_record`.
    /// Requests complete in nearly arrival order, so this stays short (about
    /// the rate times the latency spread).
    pending: VecDeque<Option<(RequestRecord, Vec<TaskRecord>)>>,
    /// Task vectors of emitted pending records, for reuse.
    task_vec_pool: Vec<Vec<TaskRecord>>,
    /// The execution core's actions, when traced.
    actions: Option<Vec<(u64, model::RequestId, Action)>>,
    /// Requests (slots) admitted by their frontend's pool and not yet started.
    admitted: VecDeque<u32>,
}

impl<'a> Engine<'a> {
    /// An engine with one policy instance per frontend.
    pub fn new(setup: EngineSetup<'a>, policies: Vec<Box<dyn ReadPolicy>>) -> Engine<'a> {
        let frontend_count = setup.frontends.count as usize;
        assert!(frontend_count > 0, "at least one frontend");
        assert_eq!(policies.len(), frontend_count, "one policy instance per frontend");
        let node_count = setup.placement.node_count() as usize;
        assert_eq!(setup.nodes.rates_bytes_per_s.len(), node_count, "one rate per node");
        assert!(setup.nodes.rates_bytes_per_s.iter().all(|&r| r > 0.0 && r.is_finite()));
        assert!(
            setup.nodes.outages.iter().all(|o| (o.node as usize) < node_count && o.from_ns < o.until_ns),
            "outages of existing nodes, each ending after it begins"
        );
        if let Some(slow) = setup.nodes.slowdown {
            assert!((slow.node as usize) < node_count && slow.factor >= 1.0 && slow.factor.is_finite(), "{slow:?}");
        }
        let seed = setup.seed;
        let frontends = (0..frontend_count)
            .map(|f| Frontend {
                queue: VecDeque::new(),
                deciding: None,
                rng: stream(seed, 1, f as u64),
                pool: setup.frontends.admission.slots.map(|_| setup.frontends.admission.pool()),
            })
            .collect();
        let nodes = (0..node_count)
            .map(|n| Node {
                queue: VecDeque::new(),
                in_service: Vec::new(),
                queued_bytes: 0,
                queued_tasks: 0,
                busy_ns: 0,
                rng: stream(seed, 2, n as u64),
            })
            .collect();
        let code = setup.layout.spec().build().expect("a code layout's spec builds");
        Engine {
            setup,
            policies,
            code,
            events: BinaryHeap::new(),
            in_flight: VecDeque::new(),
            sequence: 0,
            now_ns: 0,
            frontends,
            nodes,
            tasks: Vec::new(),
            free_tasks: Vec::new(),
            active: Vec::new(),
            free_active: Vec::new(),
            records: RecordLog::new(),
            refresh_probes: 0,
            events_done: 0,
            assign_rng: stream(seed, 3, 0),
            task_scratch: Vec::new(),
            dense_ids: true,
            next_record: 0,
            pending: VecDeque::new(),
            task_vec_pool: Vec::new(),
            actions: None,
            admitted: VecDeque::new(),
        }
    }

    /// Keeps every action of the execution core (time, request, action) for
    /// [`EngineOutput::actions`].
    pub fn trace_actions(mut self) -> Engine<'a> {
        self.actions = Some(Vec::new());
        self
    }

    fn schedule(&mut self, time_ns: u64, event: Event) {
        debug_assert!(time_ns >= self.now_ns, "no event in the past");
        self.sequence += 1;
        self.events.push(Scheduled { time_ns, sequence: self.sequence, event });
    }

    /// Schedules `event` one network latency from now (see `in_flight`).
    fn schedule_after_latency(&mut self, event: Event) {
        self.sequence += 1;
        let time_ns = self.now_ns + self.setup.network_latency_ns;
        debug_assert!(self.in_flight.back().is_none_or(|last| last.time_ns <= time_ns), "FIFO order");
        self.in_flight.push_back(Scheduled { time_ns, sequence: self.sequence, event });
    }

    /// Takes the next scheduled event: the earlier head of the heap and the
    /// in-flight FIFO.
    fn pop_event(&mut self) -> Option<Scheduled> {
        match (self.events.peek(), self.in_flight.front()) {
            (None, None) => None,
            (Some(_), None) => self.events.pop(),
            (None, Some(_)) => self.in_flight.pop_front(),
            (Some(heap), Some(fifo)) => {
                if (fifo.time_ns, fifo.sequence) < (heap.time_ns, heap.sequence) {
                    self.in_flight.pop_front()
                } else {
                    self.events.pop()
                }
            }
        }
    }

    fn next_event_time(&self) -> Option<u64> {
        match (self.events.peek(), self.in_flight.front()) {
            (None, None) => None,
            (Some(h), None) => Some(h.time_ns),
            (None, Some(f)) => Some(f.time_ns),
            (Some(h), Some(f)) => Some(h.time_ns.min(f.time_ns)),
        }
    }

    /// Runs every request (sorted by arrival) to its record.
    pub fn run(mut self, requests: &[ReadRequest]) -> EngineOutput {
        self.records = RecordLog::with_capacity(requests.len(), requests.len() * 2);
        self.dense_ids = requests.iter().enumerate().all(|(index, r)| r.id.0 == index as u64);
        for outage in self.setup.nodes.outages.clone() {
            self.schedule(outage.from_ns, Event::NodeDown { node: outage.node });
        }
        // Lazy policies: the first refresh at time 0, then every period.
        for frontend in 0..self.frontends.len() {
            if self.policies[frontend].refresh_period_ns().is_some() {
                self.schedule(0, Event::Refresh { frontend: frontend as u16 });
            }
        }
        let last_arrival = requests.last().map_or(0, |r| r.arrival_ns);
        let mut next_arrival = 0usize;
        loop {
            let arrival_due = requests.get(next_arrival).map(|r| r.arrival_ns);
            let event_due = self.next_event_time();
            // Arrivals go first at equal times (they were "scheduled" first).
            match (arrival_due, event_due) {
                (None, None) => break,
                (Some(a), e) if e.is_none_or(|e| a <= e) => {
                    let request = requests[next_arrival];
                    assert!(request.arrival_ns >= self.now_ns, "requests must be sorted by arrival");
                    self.now_ns = request.arrival_ns;
                    next_arrival += 1;
                    self.arrive(request);
                }
                _ => {
                    let scheduled = self.pop_event().expect("peeked");
                    self.now_ns = scheduled.time_ns;
                    // Refreshes stop once every request has arrived and
                    // nothing else is pending, so the run ends.
                    if let Event::Refresh { .. } = scheduled.event
                        && next_arrival == requests.len()
                        && self.now_ns > last_arrival
                        && self.active.len() == self.free_active.len()
                    {
                        continue;
                    }
                    self.handle(scheduled.event);
                }
            }
            self.events_done += 1;
            assert!(self.events_done < EVENTS_MAX, "event bound reached: livelock?");
        }
        assert_eq!(self.records.len(), requests.len(), "every request has a record");
        assert!(self.pending.is_empty(), "every pending record was written");
        let records = if self.dense_ids { self.records } else { self.records.sorted_by_request() };
        EngineOutput {
            records,
            node_busy_ns: self.nodes.iter().map(|n| n.busy_ns).collect(),
            refresh_probes: self.refresh_probes,
            events: self.events_done,
            end_ns: self.now_ns,
            actions: self.actions.unwrap_or_default(),
        }
    }

    fn arrive(&mut self, request: ReadRequest) {
        let frontend = self.assign_rng.random_range(0..self.frontends.len());
        let queue = &mut self.frontends[frontend].queue;
        assert!(
            queue.len() < FRONTEND_QUEUE_MAX,
            "frontend {frontend} has {FRONTEND_QUEUE_MAX} requests waiting: overloaded"
        );
        queue.push_back((request, self.now_ns));
        if self.frontends[frontend].deciding.is_none() {
            self.start_decision(frontend);
        }
    }

    fn start_decision(&mut self, frontend: usize) {
        let Some((request, _queued_at)) = self.frontends[frontend].queue.pop_front() else { return };
        let mut view = View {
            placement: self.setup.placement,
            layout: self.setup.layout,
            nodes: &self.nodes,
            model: &self.setup.nodes,
            now_ns: self.now_ns,
            frontends: self.frontends.len() as u32,
            probes: 0,
            frontend: self.frontend_state(frontend),
        };
        let plan = self.policies[frontend].plan(&mut view, self.now_ns, &request, &mut self.frontends[frontend].rng);
        let probes = view.probes;
        debug_assert!(plan.validate().is_ok(), "{:?}", plan.validate());
        let model = &self.setup.frontends;
        let compute_ns = model.decision_ns + u64::from(probes) * model.per_probe_ns;
        let probe_wait_ns = if probes > 0 { model.probe_rtt_ns } else { 0 };
        let overlapped = probe_wait_ns > 0 && !model.probes_block_frontend;
        let decision_ns = compute_ns + probe_wait_ns;
        let slot = self.free_active.pop().unwrap_or_else(|| {
            self.active.push(Active {
                request,
                frontend: 0,
                decision_start_ns: 0,
                decision_end_ns: 0,
                completion_ns: 0,
                probes: 0,
                tasks: Vec::new(),
                execution: None,
                executing: false,
                degraded: false,
                generation: 0,
                pending_plan: None,
            });
            (self.active.len() - 1) as u32
        });
        let active = &mut self.active[slot as usize];
        active.request = request;
        active.frontend = frontend as u16;
        active.decision_start_ns = self.now_ns;
        active.decision_end_ns = self.now_ns + decision_ns;
        active.completion_ns = NEVER;
        active.probes = probes;
        active.tasks.clear();
        active.executing = false;
        active.degraded = false;
        active.generation = active.generation.wrapping_add(1);
        if overlapped {
            // The frontend is free once it has computed; the plan waits for the probe replies.
            active.pending_plan = Some(plan);
            self.frontends[frontend].deciding = Some((slot, None));
            self.schedule(self.now_ns + decision_ns, Event::Dispatch { request: slot });
            self.schedule(self.now_ns + compute_ns, Event::DecisionDone { frontend: frontend as u16 });
        } else {
            self.frontends[frontend].deciding = Some((slot, Some(plan)));
            self.schedule(self.now_ns + decision_ns, Event::DecisionDone { frontend: frontend as u16 });
        }
    }

    /// Frontend `frontend`'s admission pool as its policy sees it.
    fn frontend_state(&self, frontend: usize) -> FrontendState {
        match &self.frontends[frontend].pool {
            Some(pool) => FrontendState::from_counts(
                pool.slots(),
                pool.busy_slots(),
                pool.waiting_requests(),
                pool.waiting_tasks(),
            ),
            None => FrontendState::unbounded(),
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::DecisionDone { frontend } => self.decision_done(frontend as usize),
            Event::Dispatch { request } => self.dispatch_pending(request),
            Event::TaskArrive { task } => self.task_arrive(task),
            Event::TaskFinish { node, task, generation } => self.task_finish(node, task, generation),
            Event::ResultArrive { task } => self.result_arrive(task),
            Event::Timeout { request, generation } => self.timeout(request, generation),
            Event::CancelArrive { task } => self.cancel_arrive(task),
            Event::Withdrawn { task } => {
                let task = self.tasks[task as usize];
                self.feed(task.request, execution::Event::Cancelled { task: usize::from(task.position) });
            }
            Event::NodeDown { node } => self.node_down(node),
            Event::Refresh { frontend } => self.refresh(frontend as usize),
        }
        if !self.admitted.is_empty() {
            self.start_admitted();
        }
    }

    fn refresh(&mut self, frontend: usize) {
        let mut view = View {
            placement: self.setup.placement,
            layout: self.setup.layout,
            nodes: &self.nodes,
            model: &self.setup.nodes,
            now_ns: self.now_ns,
            frontends: self.frontends.len() as u32,
            probes: 0,
            frontend: self.frontend_state(frontend),
        };
        self.policies[frontend].refresh(&mut view, self.now_ns, &mut self.frontends[frontend].rng);
        self.refresh_probes += u64::from(view.probes);
        let period = self.policies[frontend].refresh_period_ns().expect("only lazy policies are refreshed");
        assert!(period > 0);
        self.schedule(self.now_ns + period, Event::Refresh { frontend: frontend as u16 });
    }

    fn decision_done(&mut self, frontend: usize) {
        let (slot, plan) = self.frontends[frontend].deciding.take().expect("a decision was running");
        if let Some(plan) = plan {
            self.dispatch(slot, plan);
        }
        self.start_decision(frontend);
    }

    fn dispatch_pending(&mut self, slot: u32) {
        let plan = self.active[slot as usize].pending_plan.take().expect("a plan waits for its probes");
        self.dispatch(slot, plan);
    }

    /// A decided plan asks its frontend's pool for admission; it runs once admitted.
    fn dispatch(&mut self, slot: u32, plan: ReadPlan) {
        let frontend = usize::from(self.active[slot as usize].frontend);
        let Some(pool) = &mut self.frontends[frontend].pool else {
            self.start_execution(slot, plan);
            return;
        };
        let accepted = pool.arrive(u64::from(slot), plan.upfront_tasks());
        assert!(accepted, "frontend {frontend}'s admission queue is full: overloaded");
        self.active[slot as usize].pending_plan = Some(plan);
        self.pump(frontend);
        // Dispatch never runs inside a request's actions, so an admitted plan may start here.
        self.start_admitted();
    }

    /// Carries out what frontend `frontend`'s pool admitted: tasks leave for their nodes now,
    /// requests start from [`Engine::start_admitted`] (never from inside another request's
    /// actions).
    fn pump(&mut self, frontend: usize) {
        while let Some(admitted) = self.frontends[frontend].pool.as_mut().and_then(Admission::poll_admitted) {
            match admitted {
                Admitted::Request { request } => self.admitted.push_back(request as u32),
                Admitted::Task { request, task } => {
                    let index = self.active[request as usize].tasks[task];
                    let task = &mut self.tasks[index as usize];
                    debug_assert_eq!(task.state, TaskState::AwaitingSlot);
                    task.state = TaskState::InFlight;
                    self.schedule_after_latency(Event::TaskArrive { task: index });
                }
            }
        }
    }

    /// Starts the executions of the admitted requests (bounded: each is admitted once).
    fn start_admitted(&mut self) {
        while let Some(slot) = self.admitted.pop_front() {
            let plan = self.active[slot as usize].pending_plan.take().expect("an admitted request has its plan");
            self.start_execution(slot, plan);
        }
    }

    /// Task `index` gives up its admission slot (or its place in the task queue), once.
    #[inline]
    fn end_slot(&mut self, index: u32) {
        if self.tasks[index as usize].submitted {
            self.give_back_slot(index);
        }
    }

    fn give_back_slot(&mut self, index: u32) {
        let task = &mut self.tasks[index as usize];
        task.submitted = false;
        let (slot, position) = (task.request, task.position);
        let frontend = usize::from(self.active[slot as usize].frontend);
        let pool = self.frontends[frontend].pool.as_mut().expect("only a bounded pool takes tasks");
        pool.task_ended(u64::from(slot), usize::from(position));
        self.pump(frontend);
    }

    /// Creates an admitted plan's tasks and starts its execution.
    fn start_execution(&mut self, slot: u32, plan: ReadPlan) {
        for (position, planned) in plan.tasks.iter().enumerate() {
            let task = Task {
                request: slot,
                position: position as u16,
                node: planned.node.0,
                unit: planned.unit,
                role: planned.role,
                state: TaskState::Dormant,
                cancel_sent_ns: NEVER,
                queued: false,
                generation: 0,
                submitted: false,
                bytes: planned.length,
                class: self.active[slot as usize].request.class,
                enqueue_ns: NEVER,
                start_ns: NEVER,
                finish_ns: NEVER,
            };
            let index = match self.free_tasks.pop() {
                Some(index) => {
                    let generation = self.tasks[index as usize].generation.wrapping_add(1);
                    self.tasks[index as usize] = Task { generation, ..task };
                    index
                }
                None => {
                    self.tasks.push(task);
                    (self.tasks.len() - 1) as u32
                }
            };
            self.active[slot as usize].tasks.push(index);
        }
        let target = self.setup.placement.locate(self.active[slot as usize].request.partition).unit;
        let active = &mut self.active[slot as usize];
        match &mut active.execution {
            Some(execution) => execution.restart(&plan, target, self.now_ns),
            None => active.execution = Some(ReadExecution::start(&plan, target, self.now_ns)),
        }
        active.executing = true;
        self.carry_out(slot);
    }

    /// Feeds `event` to request `slot`'s execution, carries out what it decides, and writes the
    /// record once the request is settled.
    fn feed(&mut self, slot: u32, event: execution::Event) {
        let active = &mut self.active[slot as usize];
        assert!(active.executing, "an event for a request already written out");
        active.execution.as_mut().expect("a dispatched request").handle(event, self.code.as_ref());
        self.carry_out(slot);
        if self.active[slot as usize].execution.as_ref().is_some_and(ReadExecution::is_settled) {
            self.resolve(slot);
        }
    }

    /// Carries out the actions request `slot`'s execution decided.
    fn carry_out(&mut self, slot: u32) {
        while let Some(action) = self.active[slot as usize].execution.as_mut().and_then(ReadExecution::poll_action) {
            if let Some(trace) = &mut self.actions {
                trace.push((self.now_ns, self.active[slot as usize].request.id, action.clone()));
            }
            match action {
                Action::Start { task: position } => {
                    let index = self.active[slot as usize].tasks[position];
                    let task = &mut self.tasks[index as usize];
                    debug_assert_eq!(task.state, TaskState::Dormant);
                    let frontend = usize::from(self.active[slot as usize].frontend);
                    match &mut self.frontends[frontend].pool {
                        Some(pool) => {
                            task.state = TaskState::AwaitingSlot;
                            task.submitted = true;
                            pool.submit(u64::from(slot), position);
                            self.pump(frontend);
                        }
                        None => {
                            task.state = TaskState::InFlight;
                            self.schedule_after_latency(Event::TaskArrive { task: index });
                        }
                    }
                }
                Action::Cancel { task } => {
                    // The frontend stops waiting for the task: its slot is free at once.
                    let index = self.active[slot as usize].tasks[task];
                    self.end_slot(index);
                    self.cancel(index);
                }
                Action::ArmTimer { at_ns } => {
                    let generation = self.active[slot as usize].generation;
                    self.schedule(at_ns, Event::Timeout { request: slot, generation });
                }
                Action::Complete { decoded } => {
                    let active = &mut self.active[slot as usize];
                    active.completion_ns = self.now_ns;
                    active.degraded = decoded;
                }
                // No task fails in the simulator yet; a failed read is recorded as such.
                Action::Fail { .. } => self.active[slot as usize].completion_ns = self.now_ns,
            }
        }
    }

    fn task_arrive(&mut self, index: u32) {
        let now = self.now_ns;
        let task = &mut self.tasks[index as usize];
        debug_assert_eq!(task.state, TaskState::InFlight);
        task.enqueue_ns = now;
        if task.cancel_sent_ns != NEVER {
            // Cancelled on the way: the node drops it on arrival.
            task.state = TaskState::Cancelled;
            let (request, position) = (task.request, task.position);
            self.feed(request, execution::Event::Cancelled { task: usize::from(position) });
            return;
        }
        if self.setup.nodes.is_down(task.node, now) {
            task.state = TaskState::Failed;
            self.schedule_after_latency(Event::ResultArrive { task: index });
            return;
        }
        task.state = TaskState::Waiting;
        task.queued = true;
        let node = &mut self.nodes[task.node as usize];
        node.queued_bytes += task.bytes;
        node.queued_tasks += 1;
        node.queue.push_back(index);
        let node_index = task.node;
        if self.nodes[node_index as usize].in_service.len() < self.setup.nodes.servers {
            self.start_next(node_index);
        }
    }

    fn service_ns(&mut self, node: u32, bytes: u64, class: u8) -> u64 {
        let model = &self.setup.nodes;
        let (mut overhead_ns, rate) = model.service_of(node, self.now_ns);
        let mut exp_mean_ns = model.exp_mean_ns;
        if let Some(delay) = model.class_delays.get(usize::from(class)) {
            (overhead_ns, exp_mean_ns) = (delay.overhead_ns, delay.exp_mean_ns);
        }
        let mut ns = overhead_ns + (bytes as f64 * 1e9 / rate).round() as u64;
        if exp_mean_ns > 0 {
            let u: f64 = self.nodes[node as usize].rng.random();
            ns += (-(1.0 - u).ln() * exp_mean_ns as f64).round() as u64;
        }
        ns
    }

    fn start_next(&mut self, node_index: u32) {
        debug_assert!(self.nodes[node_index as usize].in_service.len() < self.setup.nodes.servers);
        while let Some(index) = self.nodes[node_index as usize].queue.pop_front() {
            self.tasks[index as usize].queued = false;
            if self.tasks[index as usize].state != TaskState::Waiting {
                // Cancelled while waiting (lazily removed); free the slot if
                // its request's record is already out.
                debug_assert!(matches!(self.tasks[index as usize].state, TaskState::Cancelled | TaskState::Failed));
                if self.tasks[index as usize].request == u32::MAX {
                    self.free_tasks.push(index);
                }
                continue;
            }
            let (bytes, class) = (self.tasks[index as usize].bytes, self.tasks[index as usize].class);
            let service = self.service_ns(node_index, bytes, class);
            let task = &mut self.tasks[index as usize];
            task.state = TaskState::InService;
            task.start_ns = self.now_ns;
            self.nodes[node_index as usize].in_service.push(index);
            let generation = task.generation;
            self.schedule(self.now_ns + service, Event::TaskFinish { node: node_index, task: index, generation });
            return;
        }
    }

    fn task_finish(&mut self, node_index: u32, index: u32, generation: u32) {
        let node = &mut self.nodes[node_index as usize];
        let Some(position) = node.in_service.iter().position(|&t| t == index) else { return };
        if self.tasks[index as usize].generation != generation {
            // The task was aborted by a cancel; its finish event is stale.
            return;
        }
        let task = &mut self.tasks[index as usize];
        debug_assert_eq!(task.state, TaskState::InService);
        task.state = TaskState::Finished;
        task.finish_ns = self.now_ns;
        node.in_service.swap_remove(position);
        node.busy_ns += self.now_ns - task.start_ns;
        node.queued_bytes -= task.bytes;
        node.queued_tasks -= 1;
        self.schedule_after_latency(Event::ResultArrive { task: index });
        self.start_next(node_index);
    }

    fn result_arrive(&mut self, index: u32) {
        let task = self.tasks[index as usize];
        let position = usize::from(task.position);
        let event = if task.state == TaskState::Failed {
            execution::Event::Failed { task: position }
        } else {
            execution::Event::Finished { task: position }
        };
        // The execution hears first, so the tasks it cancels on this result leave the task queue
        // before the slot the result frees could send one of them (a request it settles gives its
        // slots back in `resolve`).
        self.feed(task.request, event);
        self.end_slot(index);
    }

    /// Node `node` goes down: the tasks it holds fail (their failures travel to their frontends)
    /// and its queue empties.
    fn node_down(&mut self, node_index: u32) {
        let now = self.now_ns;
        let node = &mut self.nodes[node_index as usize];
        let held: Vec<u32> = node.queue.drain(..).chain(node.in_service.drain(..)).collect();
        for index in held {
            let task = &mut self.tasks[index as usize];
            task.queued = false;
            match task.state {
                TaskState::Waiting | TaskState::InService => {
                    if task.state == TaskState::InService {
                        // A failed task has no latency (finish stays NEVER); the node was busy.
                        self.nodes[node_index as usize].busy_ns += now - task.start_ns;
                    }
                    task.state = TaskState::Failed;
                    let node = &mut self.nodes[node_index as usize];
                    node.queued_bytes -= task.bytes;
                    node.queued_tasks -= 1;
                    self.schedule_after_latency(Event::ResultArrive { task: index });
                }
                // A cancelled task left in the queue (lazy removal) whose record is out.
                _ if task.request == u32::MAX => self.free_tasks.push(index),
                _ => {}
            }
        }
    }

    /// Sends a cancel for a task that may still be pending.
    fn cancel(&mut self, index: u32) {
        let now = self.now_ns;
        let task = &mut self.tasks[index as usize];
        match task.state {
            TaskState::Dormant
            | TaskState::Finished
            | TaskState::Cancelled
            | TaskState::Failed
            | TaskState::Withdrawn => {}
            // It never left its frontend: the execution learns at once.
            TaskState::AwaitingSlot => {
                task.state = TaskState::Withdrawn;
                task.cancel_sent_ns = now;
                self.schedule(now, Event::Withdrawn { task: index });
            }
            // Dropped when it arrives (`task_arrive` sees the cancel).
            TaskState::InFlight => task.cancel_sent_ns = now,
            TaskState::Waiting | TaskState::InService => {
                task.cancel_sent_ns = now;
                self.schedule_after_latency(Event::CancelArrive { task: index });
            }
        }
    }

    fn cancel_arrive(&mut self, index: u32) {
        let now = self.now_ns;
        let task = &mut self.tasks[index as usize];
        let node_index = task.node;
        match task.state {
            TaskState::Waiting => {
                task.state = TaskState::Cancelled;
                let node = &mut self.nodes[node_index as usize];
                node.queued_bytes -= task.bytes;
                node.queued_tasks -= 1;
                let (request, position) = (task.request, task.position);
                self.feed(request, execution::Event::Cancelled { task: usize::from(position) });
            }
            TaskState::InService if self.setup.nodes.cancel_in_service => {
                task.state = TaskState::Cancelled;
                task.finish_ns = now;
                let node = &mut self.nodes[node_index as usize];
                node.busy_ns += now - task.start_ns;
                node.queued_bytes -= task.bytes;
                node.queued_tasks -= 1;
                node.in_service.retain(|&t| t != index);
                let (request, position) = (task.request, task.position);
                self.feed(request, execution::Event::Cancelled { task: usize::from(position) });
                self.start_next(node_index);
            }
            // Finished meanwhile, or runs to its end: resolved by its result.
            _ => {}
        }
    }

    fn timeout(&mut self, slot: u32, generation: u32) {
        // A timeout of a request already written out, or of an earlier request in a reused slot,
        // does nothing (the execution ignores its own stale timers).
        let active = &self.active[slot as usize];
        if active.generation == generation && active.executing {
            self.feed(slot, execution::Event::TimerFired);
        }
    }

    /// Emits the record of request `slot`, settled (over, every task resolved), and frees it.
    fn resolve(&mut self, slot: u32) {
        let frontend = usize::from(self.active[slot as usize].frontend);
        if self.frontends[frontend].pool.is_some() {
            for position in 0..self.active[slot as usize].tasks.len() {
                self.end_slot(self.active[slot as usize].tasks[position]);
            }
            self.frontends[frontend].pool.as_mut().expect("checked").request_ended(u64::from(slot));
            self.pump(frontend);
        }
        let active = &mut self.active[slot as usize];
        active.executing = false;
        let execution = active.execution.as_ref().expect("a settled execution");
        self.task_scratch.clear();
        for &t in &active.tasks {
            let task = self.tasks[t as usize];
            debug_assert!(!task.submitted, "a settled request's tasks have ended at the admission pool");
            if !matches!(task.state, TaskState::Dormant | TaskState::Withdrawn) {
                debug_assert!(task.state != TaskState::Cancelled || task.cancel_sent_ns != NEVER, "a cancel was sent");
                self.task_scratch.push(TaskRecord {
                    node: NodeId(task.node),
                    unit: task.unit,
                    role: task.role,
                    cancelled: task.state == TaskState::Cancelled,
                    // A cancel that arrived after the task finished cancelled nothing.
                    cancel_ns: if task.state == TaskState::Cancelled { task.cancel_sent_ns } else { NEVER },
                    failed: task.state == TaskState::Failed,
                    bytes: task.bytes,
                    enqueue_ns: task.enqueue_ns,
                    start_ns: task.start_ns,
                    finish_ns: task.finish_ns,
                });
            }
            // A cancelled waiting task may still sit in a node's queue (lazy
            // removal): its slot is reused only after the node skips it.
            if !task.queued {
                self.free_tasks.push(t);
            } else {
                self.tasks[t as usize].request = u32::MAX;
            }
        }
        let record = RequestRecord {
            request: active.request.id,
            frontend: FrontendId(active.frontend),
            object: active.request.object,
            partition: active.request.partition,
            bytes: active.request.length,
            arrival_ns: active.request.arrival_ns,
            decision_start_ns: active.decision_start_ns,
            decision_end_ns: active.decision_end_ns,
            completion_ns: active.completion_ns,
            probes: active.probes,
            probe_wait_ns: if active.probes > 0 { self.setup.frontends.probe_rtt_ns } else { 0 },
            // The modelled decision runs on no shared CPU: its time is all compute.
            decision_cpu_ns: self.setup.frontends.decision_ns
                + u64::from(active.probes) * self.setup.frontends.per_probe_ns,
            degraded: active.degraded,
            timed_out: execution.timed_out(),
            outcome: if execution.is_complete() { Outcome::Ok } else { Outcome::Failed },
            class: active.request.class,
            latency_class: active.request.latency_class,
        };
        self.free_active.push(slot);
        // The policy that planned it learns what happened, as the gateway's does.
        self.policies[frontend].observe(&record, &self.task_scratch);
        self.write_record(record);
    }

    /// Appends `record` (tasks in `task_scratch`) to the log in request-id
    /// order: at once if it is the next one, else parked in `pending`.
    fn write_record(&mut self, record: RequestRecord) {
        if !self.dense_ids {
            self.records.push(record, &self.task_scratch);
            return;
        }
        let id = record.request.0;
        debug_assert!(id >= self.next_record, "one record per request");
        if id > self.next_record {
            let offset = (id - self.next_record) as usize;
            if self.pending.len() <= offset {
                self.pending.resize(offset + 1, None);
            }
            let mut tasks = self.task_vec_pool.pop().unwrap_or_default();
            tasks.clear();
            tasks.extend_from_slice(&self.task_scratch);
            debug_assert!(self.pending[offset].is_none());
            self.pending[offset] = Some((record, tasks));
            return;
        }
        self.records.push(record, &self.task_scratch);
        self.next_record += 1;
        self.pending.pop_front();
        // Bounded by the pending records: each pass writes one.
        while let Some(Some(_)) = self.pending.front() {
            let (record, tasks) = self.pending.pop_front().flatten().expect("checked");
            self.records.push(record, &tasks);
            self.next_record += 1;
            self.task_vec_pool.push(tasks);
        }
    }
}
