//! The batch engine's event loop: clients, the frontend's plan and decode, node queues with
//! per-site task merging, cancels and failures, the background solver, the cost table's refresh.
//!
//! Must not: decide which units to read (the policy) or when a block is complete (the execution
//! core); it carries out their actions and times them.

use super::{BatchOutput, BatchSetup};
use crate::engine::stream;
use codec::ErasureCode;
use execution::{Action, Event as ExecEvent, ReadExecution, WHOLE_STRIPE};
use model::{
    BatchPlan, BatchRecord, BlockRead, CodeLayout, FrontendId, NEVER, NodeId, ObjectId, Outcome, PartitionId,
    Placement, QueueState, ReadPlan, RecordLog, RequestId, RequestRecord, StripeId, TaskRecord,
};
use policy::ClusterView;
use policy::ecstore::access::AccessPolicy;
use policy::ecstore::mover::{Mover, ProposedMove};
use policy::fec::FrontendState;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use workload::batch::BatchGenerator;

/// Most events one run may process (a guard against a livelock bug).
const EVENTS_MAX: u64 = 4_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A client issues its next batch.
    Issue { client: u32 },
    /// A batch's plan is decided: its tasks leave the frontend.
    Dispatch { batch: u64 },
    /// A node task reaches its node.
    TaskArrive { task: u32 },
    /// A node finishes serving a task.
    TaskFinish { node: u32, task: u32 },
    /// A node task's answer (bytes, or failure) reaches the frontend.
    Answer { task: u32 },
    /// A cancel reaches a node task's node.
    CancelArrive { task: u32 },
    /// A block finished decoding (or needed none).
    BlockDone { batch: u64, block: u32 },
    /// A block's plan reached its deadline (stale when the block is done or its batch closed).
    BlockDeadline { batch: u64, block: u32 },
    /// The background solver finished its solve.
    SolveDone,
    /// The cost table's periodic refresh.
    Refresh,
    /// The mover may start a move.
    MoverTick,
    /// The statistics service takes each node's load over the last period.
    LoadTick,
    /// A node goes down.
    NodeDown { node: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TaskState {
    InFlight,
    Waiting,
    InService,
    /// Served; its answer is on its way or delivered.
    Done,
    /// Dropped by a cancel before it started.
    Dropped,
    /// Its node was down.
    Failed,
}

/// What a node task does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TaskKind {
    /// Unit reads of a batch.
    Read,
    /// The mover's read of the unit it moves.
    MoveRead,
    /// The mover's write of it at its destination.
    MoveWrite,
}

/// One queued task of a node: one unit read, or every unit one batch reads there, or one half of
/// a move.
#[derive(Clone, Debug)]
struct NodeTask {
    kind: TaskKind,
    node: u32,
    batch: u64,
    /// (block, position in its plan).
    reads: Vec<(u32, u16)>,
    bytes: u64,
    state: TaskState,
    /// Reads of it whose cancel was sent.
    cancelled_reads: usize,
    enqueue_ns: u64,
    start_ns: u64,
    finish_ns: u64,
}

struct Block {
    read: BlockRead,
    plan: ReadPlan,
    execution: ReadExecution,
    /// Per plan position: the node task carrying it, and when its cancel was sent.
    tasks: Vec<(u32, u64)>,
    /// Per plan position: whether the cancel took effect (the node dropped it).
    dropped: Vec<bool>,
    completion_ns: u64,
    decoded: bool,
    failed: bool,
    done: bool,
}

struct Batch {
    record: BatchRecord,
    blocks: Vec<Block>,
    blocks_done: u32,
    /// Node tasks not yet answered or dropped.
    tasks_open: u32,
    completed: bool,
    /// Probes its plan sent (Hu et al.'s rules) and the round trip waited for them; recorded on
    /// its first block's record so that sums over records count each once.
    probes: u32,
    probe_wait_ns: u64,
}

struct Node {
    queue: VecDeque<u32>,
    in_service: Option<u32>,
    queued_bytes: u64,
    queued_tasks: u32,
    busy_ns: u64,
    rng: ChaCha8Rng,
}

struct View<'a> {
    placement: &'a Placement,
    layout: &'a CodeLayout,
    setup: &'a BatchSetup,
    nodes: &'a [Node],
    now_ns: u64,
    probes: u64,
}

impl<'a> View<'a> {
    fn new(
        placement: &'a Placement,
        layout: &'a CodeLayout,
        setup: &'a BatchSetup,
        nodes: &'a [Node],
        now_ns: u64,
    ) -> Self {
        View { placement, layout, setup, nodes, now_ns, probes: 0 }
    }
}

impl ClusterView for View<'_> {
    fn placement(&self) -> &Placement {
        self.placement
    }
    fn layout(&self) -> &CodeLayout {
        self.layout
    }
    fn node_rate_bytes_per_s(&self, node: NodeId) -> f64 {
        self.setup.nodes.service_of(node.0, self.now_ns).1
    }
    fn node_task_overhead_ns(&self, node: NodeId) -> u64 {
        self.setup.nodes.service_of(node.0, self.now_ns).0
    }
    fn frontend_count(&self) -> u32 {
        1
    }
    fn frontend_state(&self) -> FrontendState {
        FrontendState::unbounded()
    }
    fn probe(&mut self, node: NodeId) -> QueueState {
        self.probes += 1;
        if self.setup.nodes.is_down(node.0, self.now_ns) {
            return QueueState::UNREACHABLE;
        }
        let node = &self.nodes[node.index()];
        QueueState { bytes: node.queued_bytes, tasks: node.queued_tasks }
    }
    fn node_unavailable(&self, node: NodeId) -> bool {
        let known_at = self.now_ns.saturating_sub(self.setup.failure_detect_ns);
        self.setup.nodes.outages.iter().any(|o| o.node == node.0 && o.from_ns <= known_at && self.now_ns < o.until_ns)
    }
}

pub(super) struct BatchEngine<'a> {
    setup: &'a BatchSetup,
    generator: BatchGenerator,
    policy: AccessPolicy,
    code: Box<dyn ErasureCode>,
    layout: CodeLayout,
    placement: Placement,
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    sequence: u64,
    now_ns: u64,
    nodes: Vec<Node>,
    tasks: Vec<NodeTask>,
    free_tasks: Vec<u32>,
    batches: BTreeMap<u64, Batch>,
    next_batch: u64,
    next_request: u64,
    client_rngs: Vec<ChaCha8Rng>,
    policy_rng: ChaCha8Rng,
    scratch: Vec<u32>,
    records: RecordLog,
    batch_records: Vec<BatchRecord>,
    /// The solve in progress: its result and when it started.
    solving: Option<policy::RefreshResult>,
    solves: u64,
    solver_busy_ns: u64,
    refresh_probes: u64,
    events_done: u64,
    mover: Option<Mover>,
    mover_rng: ChaCha8Rng,
    /// The move in progress: what it moves, when it started, and its tasks so far.
    active_move: Option<(ProposedMove, u64)>,
    moves: Vec<model::MoveRecord>,
    /// Bytes each node served (reads and moves), and at the last load tick.
    node_bytes_served: Vec<u64>,
    node_bytes_at_tick: Vec<u64>,
}

mod moves;

/// The distinct node tasks of a batch's blocks.
fn node_tasks(batch: &Batch) -> Vec<u32> {
    let mut tasks: Vec<u32> = batch.blocks.iter().flat_map(|b| b.tasks.iter().map(|&(task, _)| task)).collect();
    tasks.sort_unstable();
    tasks.dedup();
    tasks
}

impl<'a> BatchEngine<'a> {
    pub(super) fn new(
        setup: &'a BatchSetup,
        policy: AccessPolicy,
        mover: Option<Mover>,
        generator: &BatchGenerator,
    ) -> BatchEngine<'a> {
        let node_count = setup.placement.node_count() as usize;
        let nodes = (0..setup.placement.node_count())
            .map(|node| Node {
                queue: VecDeque::new(),
                in_service: None,
                queued_bytes: 0,
                queued_tasks: 0,
                busy_ns: 0,
                rng: stream(setup.seed, 0x4e4f_4445, u64::from(node)),
            })
            .collect();
        BatchEngine {
            setup,
            // A run draws from its own copy: a trace replays from its start in every run.
            generator: generator.clone(),
            policy,
            code: setup.spec.build().expect("a valid code"),
            layout: CodeLayout::new(setup.spec).expect("a valid code"),
            placement: setup.placement.clone(),
            events: BinaryHeap::new(),
            sequence: 0,
            now_ns: 0,
            nodes,
            tasks: Vec::new(),
            free_tasks: Vec::new(),
            batches: BTreeMap::new(),
            next_batch: 0,
            next_request: 0,
            client_rngs: (0..setup.clients).map(|c| stream(setup.seed, 0x434c_4945, u64::from(c))).collect(),
            policy_rng: stream(setup.seed, 0x504f_4c49, 0),
            scratch: Vec::new(),
            records: RecordLog::new(),
            batch_records: Vec::new(),
            solving: None,
            solves: 0,
            solver_busy_ns: 0,
            refresh_probes: 0,
            events_done: 0,
            mover,
            mover_rng: stream(setup.seed, 0x4d4f_5645, 0),
            active_move: None,
            moves: Vec::new(),
            node_bytes_served: vec![0; node_count],
            node_bytes_at_tick: vec![0; node_count],
        }
    }

    fn schedule(&mut self, at_ns: u64, event: Event) {
        debug_assert!(at_ns >= self.now_ns);
        self.sequence += 1;
        self.events.push(Reverse((at_ns, self.sequence, event)));
    }

    pub(super) fn run(mut self) -> BatchOutput {
        for outage in self.setup.nodes.outages.clone() {
            self.schedule(outage.from_ns, Event::NodeDown { node: outage.node });
        }
        if self.policy.refresh_period_ns().is_some() {
            self.schedule(0, Event::Refresh);
        }
        if let Some(mover) = &self.mover {
            let period = mover.settings().period_ns();
            self.schedule(period, Event::MoverTick);
            self.schedule(self.setup.load_period_ns, Event::LoadTick);
        }
        // Clients start spread over the first millisecond, so they do not arrive in lockstep.
        for client in 0..self.setup.clients {
            let offset = self.client_rngs[client as usize].random_range(0..1_000_000);
            self.schedule(offset, Event::Issue { client });
        }
        while let Some(Reverse((time_ns, _, event))) = self.events.pop() {
            self.now_ns = time_ns;
            let periodic = matches!(event, Event::Refresh | Event::MoverTick | Event::LoadTick);
            if periodic && self.batches.is_empty() && self.active_move.is_none() && self.now_ns >= self.setup.end_ns {
                continue;
            }
            self.handle(event);
            self.events_done += 1;
            assert!(self.events_done < EVENTS_MAX, "event bound reached: livelock?");
        }
        assert!(self.batches.is_empty(), "every batch was written");
        self.batch_records.sort_by_key(|b| b.batch);
        BatchOutput {
            records: self.records.sorted_by_request(),
            batches: self.batch_records,
            node_busy_ns: self.nodes.iter().map(|n| n.busy_ns).collect(),
            counters: self.policy.counters(),
            solves: self.solves,
            solver_busy_ns: self.solver_busy_ns,
            refresh_probes: self.refresh_probes,
            moves: self.moves,
            events: self.events_done,
            end_ns: self.now_ns,
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Issue { client } => self.issue(client),
            Event::Dispatch { batch } => self.dispatch(batch),
            Event::TaskArrive { task } => self.task_arrive(task),
            Event::TaskFinish { node, task } => self.task_finish(node, task),
            Event::Answer { task } => self.answer(task),
            Event::CancelArrive { task } => self.cancel_arrive(task),
            Event::BlockDone { batch, block } => self.block_done(batch, block),
            Event::BlockDeadline { batch, block } => self.block_deadline(batch, block),
            Event::SolveDone => self.solve_done(),
            Event::Refresh => self.refresh(),
            Event::MoverTick => self.mover_tick(),
            Event::LoadTick => self.load_tick(),
            Event::NodeDown { node } => self.node_down(node),
        }
    }

    fn refresh(&mut self) {
        let mut view = View::new(&self.placement, &self.layout, self.setup, &self.nodes, self.now_ns);
        self.policy.refresh(&mut view, self.now_ns);
        self.refresh_probes += view.probes;
        let period = self.policy.refresh_period_ns().expect("only a policy with a table is refreshed");
        self.schedule(self.now_ns + period, Event::Refresh);
    }

    /// A client's next batch: metadata, then the plan (decided now, its time charged before the
    /// tasks leave).
    fn issue(&mut self, client: u32) {
        if self.now_ns >= self.setup.end_ns {
            return;
        }
        let mut blocks = std::mem::take(&mut self.scratch);
        self.generator.next_batch(self.now_ns, &mut self.client_rngs[client as usize], &mut blocks);
        let reads: Vec<BlockRead> = blocks
            .iter()
            .map(|&b| BlockRead { stripe: StripeId(b), unit_bytes: self.setup.unit_bytes[b as usize] })
            .collect();
        self.scratch = blocks;
        if let Some(mover) = &mut self.mover {
            let stripes: Vec<StripeId> = reads.iter().map(|r| r.stripe).collect();
            mover.observe_batch(self.now_ns, &stripes);
        }
        let decision_start_ns = self.now_ns + self.setup.frontend.metadata_ns;
        let mut view = View::new(&self.placement, &self.layout, self.setup, &self.nodes, self.now_ns);
        let plan = self.policy.plan_batch(&mut view, &reads, &mut self.policy_rng);
        // Probes leave together at the decision's start and see the queues of that instant (the
        // simulator's probes, as in Hu et al.'s engine); the plan waits one round trip for them.
        let probes = u32::try_from(view.probes).expect("a batch probes fewer than 2^32 nodes");
        debug_assert!(probes == 0 || self.policy.probes_per_batch(), "only the probing kinds probe");
        let probe_wait_ns = if probes > 0 { 2 * self.setup.network_latency_ns } else { 0 };
        let frontend = self.setup.frontend;
        let decision_cpu_ns = frontend.decision_ns
            + frontend.decision_per_block_ns * reads.len() as u64
            + plan.inline_solver_nodes * self.setup.solver.ns_per_node;
        let decision_end_ns = decision_start_ns + probe_wait_ns + decision_cpu_ns;
        let batch = self.open_batch(client, reads, plan, decision_start_ns, decision_end_ns, decision_cpu_ns);
        let open = self.batches.get_mut(&batch).expect("just opened");
        (open.probes, open.probe_wait_ns) = (probes, probe_wait_ns);
        self.schedule(decision_end_ns, Event::Dispatch { batch });
        self.start_solve_if_idle();
    }

    fn open_batch(
        &mut self,
        client: u32,
        reads: Vec<BlockRead>,
        plan: BatchPlan,
        decision_start_ns: u64,
        decision_end_ns: u64,
        decision_cpu_ns: u64,
    ) -> u64 {
        let id = self.next_batch;
        self.next_batch += 1;
        let first_request = RequestId(self.next_request);
        self.next_request += reads.len() as u64;
        let k = self.code.data_units() as u64;
        let record = BatchRecord {
            batch: id,
            client,
            first_request,
            blocks: reads.len() as u32,
            bytes: reads.iter().map(|r| r.unit_bytes * k).sum(),
            arrival_ns: self.now_ns,
            decision_start_ns,
            decision_end_ns,
            completion_ns: NEVER,
            decision_cpu_ns,
            source: plan.source,
            inline_solver_nodes: plan.inline_solver_nodes,
            outcome: Outcome::Ok,
        };
        let blocks = reads
            .into_iter()
            .zip(plan.blocks)
            .map(|(read, plan)| {
                assert!(plan.validate().is_ok(), "policy returned an invalid plan: {:?}", plan.validate());
                let positions = plan.tasks.len();
                Block {
                    read,
                    execution: ReadExecution::start(&plan, WHOLE_STRIPE, decision_end_ns),
                    plan,
                    tasks: vec![(u32::MAX, NEVER); positions],
                    dropped: vec![false; positions],
                    completion_ns: NEVER,
                    decoded: false,
                    failed: false,
                    done: false,
                }
            })
            .collect();
        self.batches.insert(
            id,
            Batch { record, blocks, blocks_done: 0, tasks_open: 0, completed: false, probes: 0, probe_wait_ns: 0 },
        );
        id
    }

    /// The plan's tasks leave the frontend: the execution core's starts, merged per node when the
    /// setup batches sites.
    fn dispatch(&mut self, id: u64) {
        let mut starts: Vec<(u32, u32, u16)> = Vec::new();
        let mut deadlines: Vec<(u64, u32)> = Vec::new();
        let batch = self.batches.get_mut(&id).expect("a dispatched batch is open");
        for (index, block) in batch.blocks.iter_mut().enumerate() {
            while let Some(action) = block.execution.poll_action() {
                match action {
                    Action::Start { task } => {
                        starts.push((block.plan.tasks[task].node.0, index as u32, task as u16));
                    }
                    Action::ArmTimer { at_ns } => deadlines.push((at_ns, index as u32)),
                    other => panic!("a fresh whole-stripe read only starts tasks and its deadline, not {other:?}"),
                }
            }
        }
        for (at_ns, block) in deadlines {
            self.schedule(at_ns, Event::BlockDeadline { batch: id, block });
        }
        if self.setup.site_batching {
            starts.sort_by_key(|&(node, block, task)| (node, block, task));
        }
        let mut current: Option<u32> = None;
        for (node, block, position) in starts {
            let task = match current {
                Some(task) if self.setup.site_batching && self.tasks[task as usize].node == node => task,
                _ => {
                    let task = self.new_task(node, id);
                    current = Some(task);
                    task
                }
            };
            let bytes = self.batches[&id].blocks[block as usize].plan.tasks[usize::from(position)].length;
            let node_task = &mut self.tasks[task as usize];
            node_task.reads.push((block, position));
            node_task.bytes += bytes;
            self.batches.get_mut(&id).expect("open").blocks[block as usize].tasks[usize::from(position)].0 = task;
        }
        let opened: Vec<u32> = node_tasks(&self.batches[&id]);
        self.batches.get_mut(&id).expect("open").tasks_open = opened.len() as u32;
        for task in opened {
            self.schedule(self.now_ns + self.setup.network_latency_ns, Event::TaskArrive { task });
        }
    }

    fn new_task(&mut self, node: u32, batch: u64) -> u32 {
        let task = NodeTask {
            kind: TaskKind::Read,
            node,
            batch,
            reads: Vec::new(),
            bytes: 0,
            state: TaskState::InFlight,
            cancelled_reads: 0,
            enqueue_ns: NEVER,
            start_ns: NEVER,
            finish_ns: NEVER,
        };
        if let Some(slot) = self.free_tasks.pop() {
            self.tasks[slot as usize] = task;
            slot
        } else {
            self.tasks.push(task);
            (self.tasks.len() - 1) as u32
        }
    }

    fn task_arrive(&mut self, task: u32) {
        let node = self.tasks[task as usize].node;
        if self.setup.nodes.is_down(node, self.now_ns) {
            self.fail_task(task);
            return;
        }
        let t = &mut self.tasks[task as usize];
        if t.kind == TaskKind::Read && t.cancelled_reads == t.reads.len() {
            // Every read of it was cancelled while it travelled: the node drops it on arrival.
            t.state = TaskState::Dropped;
            self.schedule(self.now_ns + self.setup.network_latency_ns, Event::Answer { task });
            return;
        }
        t.state = TaskState::Waiting;
        t.enqueue_ns = self.now_ns;
        let bytes = t.bytes;
        let n = &mut self.nodes[node as usize];
        n.queue.push_back(task);
        n.queued_bytes += bytes;
        n.queued_tasks += 1;
        if n.in_service.is_none() {
            self.start_next(node);
        }
    }

    fn start_next(&mut self, node: u32) {
        while let Some(task) = self.nodes[node as usize].queue.pop_front() {
            if self.tasks[task as usize].state != TaskState::Waiting {
                continue;
            }
            let (overhead_ns, rate) = self.setup.nodes.service_of(node, self.now_ns);
            let bytes = self.tasks[task as usize].bytes;
            let mut service_ns = overhead_ns + (bytes as f64 * 1e9 / rate).round() as u64;
            if self.setup.nodes.exp_mean_ns > 0 {
                let u: f64 = self.nodes[node as usize].rng.random();
                service_ns += (-(1.0 - u).ln() * self.setup.nodes.exp_mean_ns as f64).round() as u64;
            }
            let t = &mut self.tasks[task as usize];
            t.state = TaskState::InService;
            t.start_ns = self.now_ns;
            self.nodes[node as usize].in_service = Some(task);
            self.nodes[node as usize].busy_ns += service_ns;
            self.schedule(self.now_ns + service_ns, Event::TaskFinish { node, task });
            return;
        }
    }

    fn task_finish(&mut self, node: u32, task: u32) {
        // A finish of a task the node lost when it went down is stale.
        if self.nodes[node as usize].in_service != Some(task) {
            return;
        }
        self.nodes[node as usize].in_service = None;
        let bytes = self.tasks[task as usize].bytes;
        let n = &mut self.nodes[node as usize];
        n.queued_bytes -= bytes;
        n.queued_tasks -= 1;
        self.node_bytes_served[node as usize] += bytes;
        let t = &mut self.tasks[task as usize];
        t.finish_ns = self.now_ns;
        t.state = TaskState::Done;
        self.schedule(self.now_ns + self.setup.network_latency_ns, Event::Answer { task });
        self.start_next(node);
    }

    fn fail_task(&mut self, task: u32) {
        self.tasks[task as usize].state = TaskState::Failed;
        self.schedule(self.now_ns + self.setup.network_latency_ns, Event::Answer { task });
    }

    /// A node goes down: the tasks it holds fail.
    fn node_down(&mut self, node: u32) {
        let n = &mut self.nodes[node as usize];
        let held: Vec<u32> = n.in_service.take().into_iter().chain(n.queue.drain(..)).collect();
        n.queued_bytes = 0;
        n.queued_tasks = 0;
        for task in held {
            if matches!(self.tasks[task as usize].state, TaskState::Waiting | TaskState::InService) {
                self.fail_task(task);
            }
        }
    }

    fn cancel_arrive(&mut self, task: u32) {
        let t = &self.tasks[task as usize];
        if t.state != TaskState::Waiting || t.cancelled_reads < t.reads.len() {
            return;
        }
        // Every read of it is cancelled and it has not started: the node drops it.
        let (node, bytes) = (t.node, t.bytes);
        self.tasks[task as usize].state = TaskState::Dropped;
        let n = &mut self.nodes[node as usize];
        n.queue.retain(|&queued| queued != task);
        n.queued_bytes -= bytes;
        n.queued_tasks -= 1;
        self.schedule(self.now_ns + self.setup.network_latency_ns, Event::Answer { task });
    }

    /// A node task's answer reaches the frontend: each read it carried is finished, failed or
    /// dropped for its block's execution.
    fn answer(&mut self, task: u32) {
        if self.tasks[task as usize].kind != TaskKind::Read {
            self.move_step(task);
            return;
        }
        let (id, state) = (self.tasks[task as usize].batch, self.tasks[task as usize].state);
        let reads = std::mem::take(&mut self.tasks[task as usize].reads);
        for &(block, position) in &reads {
            let event = match state {
                TaskState::Done => ExecEvent::Finished { task: usize::from(position) },
                TaskState::Failed => ExecEvent::Failed { task: usize::from(position) },
                TaskState::Dropped => {
                    let batch = self.batches.get_mut(&id).expect("open");
                    batch.blocks[block as usize].dropped[usize::from(position)] = true;
                    ExecEvent::Cancelled { task: usize::from(position) }
                }
                other => panic!("an answer from a task {other:?}"),
            };
            let batch = self.batches.get_mut(&id).expect("an answered batch is open");
            batch.blocks[block as usize].execution.handle(event, self.code.as_ref());
            self.drain_block(id, block);
        }
        self.tasks[task as usize].reads = reads;
        let batch = self.batches.get_mut(&id).expect("open");
        batch.tasks_open -= 1;
        self.maybe_close(id);
    }

    /// Carries out a block's actions after an event.
    fn drain_block(&mut self, id: u64, block: u32) {
        loop {
            let batch = self.batches.get_mut(&id).expect("open");
            let b = &mut batch.blocks[block as usize];
            let Some(action) = b.execution.poll_action() else { break };
            match action {
                Action::Complete { decoded } => {
                    b.decoded = decoded;
                    let decode_ns = if decoded {
                        let block_bytes = b.read.unit_bytes * self.code.data_units() as u64;
                        (block_bytes as f64 * 1e9 / self.setup.frontend.decode_bytes_per_s).round() as u64
                    } else {
                        0
                    };
                    self.schedule(self.now_ns + decode_ns, Event::BlockDone { batch: id, block });
                }
                Action::Fail { .. } => {
                    b.failed = true;
                    self.schedule(self.now_ns, Event::BlockDone { batch: id, block });
                }
                Action::Cancel { task } => {
                    b.tasks[task].1 = self.now_ns;
                    let node_task = b.tasks[task].0;
                    self.tasks[node_task as usize].cancelled_reads += 1;
                    self.schedule(self.now_ns + self.setup.network_latency_ns, Event::CancelArrive { task: node_task });
                }
                other => panic!("a whole-stripe read does not {other:?} once started"),
            }
        }
    }

    /// A block's deadline: its execution fails it unless it completed (the batch engine does not
    /// model the gateway's robust read of such a block: it is recorded failed).
    fn block_deadline(&mut self, id: u64, block: u32) {
        let Some(batch) = self.batches.get_mut(&id) else { return };
        let b = &mut batch.blocks[block as usize];
        if b.done {
            return;
        }
        b.execution.handle(ExecEvent::TimerFired, self.code.as_ref());
        self.drain_block(id, block);
    }

    fn block_done(&mut self, id: u64, block: u32) {
        let now = self.now_ns;
        let batch = self.batches.get_mut(&id).expect("open");
        let b = &mut batch.blocks[block as usize];
        b.done = true;
        b.completion_ns = now;
        if b.failed {
            batch.record.outcome = Outcome::Failed;
        }
        batch.blocks_done += 1;
        if batch.blocks_done == batch.record.blocks {
            batch.completed = true;
            batch.record.completion_ns = now;
            let client = batch.record.client;
            self.schedule(now + self.setup.think_ns, Event::Issue { client });
        }
        self.maybe_close(id);
    }

    /// Writes a batch's records once it completed and every task it launched answered.
    fn maybe_close(&mut self, id: u64) {
        let batch = &self.batches[&id];
        if !batch.completed || batch.tasks_open > 0 {
            return;
        }
        let batch = self.batches.remove(&id).expect("open");
        let mut task_records = Vec::new();
        for (index, block) in batch.blocks.iter().enumerate() {
            debug_assert!(block.execution.is_settled());
            task_records.clear();
            for (position, planned) in block.plan.tasks.iter().enumerate() {
                let (node_task, cancel_ns) = block.tasks[position];
                let t = &self.tasks[node_task as usize];
                let cancelled = block.dropped[position];
                task_records.push(TaskRecord {
                    node: planned.node,
                    unit: planned.unit,
                    role: planned.role,
                    cancelled,
                    bytes: planned.length,
                    enqueue_ns: t.enqueue_ns,
                    start_ns: t.start_ns,
                    finish_ns: t.finish_ns,
                    cancel_ns: if cancelled { cancel_ns } else { NEVER },
                    failed: t.state == TaskState::Failed,
                });
            }
            let record = &batch.record;
            let request = RequestRecord {
                request: RequestId(record.first_request.0 + index as u64),
                frontend: FrontendId(0),
                object: ObjectId(u64::from(block.read.stripe.0)),
                partition: PartitionId(block.read.stripe.0),
                bytes: block.read.unit_bytes * self.code.data_units() as u64,
                arrival_ns: record.arrival_ns,
                decision_start_ns: record.decision_start_ns,
                decision_end_ns: record.decision_end_ns,
                completion_ns: block.completion_ns,
                probes: if index == 0 { batch.probes } else { 0 },
                probe_wait_ns: batch.probe_wait_ns,
                decision_cpu_ns: record.decision_cpu_ns,
                degraded: block.decoded,
                timed_out: block.execution.timed_out(),
                outcome: if block.failed { Outcome::Failed } else { Outcome::Ok },
                class: 0,
                latency_class: 0,
            };
            self.records.push(request, &task_records);
        }
        for task in node_tasks(&batch) {
            self.free_tasks.push(task);
        }
        self.batch_records.push(batch.record);
    }

    /// Hands the next exact solve to the solver if it is idle; the work runs now (it is pure),
    /// its result is installed when the modelled solve time has passed.
    fn start_solve_if_idle(&mut self) {
        if self.solving.is_some() {
            return;
        }
        let Some(work) = self.policy.next_solve() else { return };
        let result = work.run();
        let nodes = AccessPolicy::solve_nodes(&result).expect("the policy's own solve") as u64;
        let solve_ns = self.setup.solver.base_ns + nodes * self.setup.solver.ns_per_node;
        self.solves += 1;
        self.solver_busy_ns += solve_ns;
        self.solving = Some(result);
        self.schedule(self.now_ns + solve_ns, Event::SolveDone);
    }

    fn solve_done(&mut self) {
        let result = self.solving.take().expect("a solve was running");
        self.policy.finish_solve(result);
        self.start_solve_if_idle();
    }
}
