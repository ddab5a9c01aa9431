//! Batch reads (EC-Store, Abebe et al.): several whole blocks (sealed stripes) read as one
//! request. The access policy ([`AccessPolicy`]) chooses which units of each block to read; every
//! unit the plan reads on one node goes into **one** merged node task
//! ([`node::NodeClient::read_units`]: one per-task overhead, the sum of the bytes — the cost
//! model's "o_j once per site"); each block's plan runs through the execution core
//! ([`execution::ReadExecution`] with the whole-stripe target), as the simulator's batch engine
//! runs it; a block whose plan fails is read by the robust read. A block's data units reach the
//! caller as soon as it completes; the records (one per block, with its tasks, and a
//! [`BatchRecord`]) are kept once the batch is settled. The background loop
//! ([`Controller::run_access`]) keeps the policy's cost table (load probes of every node, only
//! while batches are being read) and runs its exact solves off the read path.
//!
//! Must not: decide which units a block reads (the policy's), decide when a block is complete (the
//! execution core's), or hold the controller's lock across an await.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use codec::ErasureCode;
use execution::{Action, Event, ReadExecution, WHOLE_STRIPE};
use futures_util::StreamExt;
use futures_util::future::{AbortHandle, Abortable, BoxFuture};
use futures_util::stream::FuturesUnordered;
use meta::{NodeId as StoreNodeId, StripeMeta};
use model::{
    BatchPlan, BatchRecord, BlockRead, FrontendId, NodeId as PolicyNodeId, ObjectId, Outcome, PartitionId, ReadPlan,
    Record, RequestId, RequestRecord, StripeId as PolicyStripeId,
};
use policy::ecstore::access::AccessSettings;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Controller, LiveView, ThreadCpu, count, is_up, layer_decisions, record_rates, task_record};
use crate::data::DataError;
use crate::data::io::stripe_io::{NodeMap, StripeIo};
use crate::data::read::admission::{AdmittedPlan, TaskPool};
use crate::data::read::executor::TaskEnd;
use crate::data::read::range::RangeRead;
use crate::data::read::robust;
use crate::data::read::robust::Rebuilt;

/// The planner batch records name: EC-Store's access plans.
const ACCESS_PLANNER: &str = "ecstore-access";

/// Most blocks one batch reads (the S3 batch read's limit is lower).
pub const MAX_BATCH_BLOCKS: usize = 4_096;
/// How long after the last batch the access policy keeps probing the nodes' load.
const ACCESS_IDLE: Duration = Duration::from_secs(30);
/// Solves run per wake of the background loop before it looks at its timers again.
const SOLVES_PER_WAKE: usize = 64;

/// One block of a batch: a sealed stripe, read whole (its k data units).
#[derive(Clone)]
pub struct BatchBlock {
    /// The stripe.
    pub stripe: Arc<StripeMeta>,
    /// Its code.
    pub code: Arc<dyn ErasureCode>,
}

/// A block's data units, whole, in unit order; or why it could not be read.
pub type BlockResult = Result<Vec<Bytes>, DataError>;

/// A decided batch: the plan of its blocks of the controller's code, and what the records need.
/// A batch's probe round: the replies, the catalog generation they were sent under (`None`: no
/// round), the probes sent and the time the round took.
#[derive(Default)]
struct BatchProbes {
    replies: Vec<(PolicyNodeId, Option<node::ProbeReply>)>,
    generation: Option<u64>,
    sent: usize,
    wait_ns: u64,
}

struct BatchDecision {
    plan: BatchPlan,
    /// Probes its probe round sent and the time it took (recorded on the first block's record).
    probes: u32,
    probe_wait_ns: u64,
    /// Per block of the batch: its position in `plan.blocks`, when planned.
    planned: Vec<Option<usize>>,
    /// Per planned block: the store node of each task, and the block's partition.
    store_nodes: Vec<Vec<StoreNodeId>>,
    partitions: Vec<PartitionId>,
    batch: u64,
    first_request: RequestId,
    decision_start_ns: u64,
    decision_end_ns: u64,
    decision_cpu_ns: u64,
}

/// One merged node task: the (planned block, task) reads it carries.
struct NodeTask {
    reads: Vec<(usize, usize)>,
    sent_ns: u64,
    abort: AbortHandle,
    /// Reads of it the execution still wants (a cancel of every one aborts the task).
    wanted: usize,
}

/// A planned block being executed.
struct BlockRun {
    /// Its index in the batch.
    index: usize,
    plan: ReadPlan,
    execution: ReadExecution,
    ends: Vec<TaskEnd>,
    bytes: Vec<Option<Bytes>>,
    /// The merged node task each started task went in.
    node_task: Vec<Option<usize>>,
    timer_ns: Option<u64>,
    /// Whether its plan served it (decoded: `degraded`); otherwise the robust read did, or failed.
    degraded: bool,
    ok: bool,
}

/// What a merged node task came to: per read, its bytes or its failure, and the node's timing.
type NodeAnswer = Result<(Vec<Option<Bytes>>, node::TaskTiming), ()>;

impl Controller {
    /// Reads every block of `blocks` whole, planned together by the access policy; `deliver(i, r)`
    /// gets block i's data units (or its error) as soon as it is read, once per block. Blocks of
    /// another code than the controller's, or a batch the catalog cannot hold, are read by the
    /// robust read. Returns when every task it launched is resolved (late binding's extra reads
    /// run to their end unless the policy cancels them).
    pub async fn read_batch(
        &self,
        io: &StripeIo,
        blocks: &[BatchBlock],
        admission: Option<&TaskPool>,
        deliver: &mut (dyn FnMut(usize, BlockResult) + Send),
    ) {
        assert!(blocks.len() <= MAX_BATCH_BLOCKS, "a batch of {} blocks is over the limit", blocks.len());
        let arrival_ns = self.now_ns();
        let nodes = match io.cluster().node_map().await {
            Ok(nodes) => nodes,
            Err(error) => {
                for index in 0..blocks.len() {
                    deliver(index, Err(error.clone()));
                }
                return;
            }
        };
        let probed = self.probe_batch(io, &nodes, blocks).await;
        let decision = match self.decide_batch(&nodes, blocks, &probed) {
            Ok(decision) => decision,
            Err(error) => {
                tracing::warn!(%error, "batch not planned");
                None
            }
        };
        let delivered = vec![None; blocks.len()];
        let mut run = BatchRun { controller: self, io, nodes: &nodes, blocks, admission, deliver, delivered };
        match decision {
            None => run.all_robust().await,
            Some(decision) => {
                metrics::histogram!("lowtail_controller_batch_decision_seconds")
                    .record((decision.decision_end_ns - decision.decision_start_ns) as f64 / 1e9);
                let runs = run.execute(&decision).await;
                let delivered = std::mem::take(&mut run.delivered);
                self.record_batch(&decision, blocks, &runs, &delivered, arrival_ns);
            }
        }
    }

    /// The probe round of an access policy that probes per batch (Hu et al.'s rules): the nodes
    /// its plan will read from, probed in parallel outside the lock. Empty for the other kinds.
    async fn probe_batch(&self, io: &StripeIo, nodes: &NodeMap, blocks: &[BatchBlock]) -> BatchProbes {
        let start_ns = self.now_ns();
        let (targets, generation) = {
            let mut state = self.lock();
            let state = &mut *state;
            if !state.access.probes_per_batch() {
                return BatchProbes::default();
            }
            let Ok(Some(dense)) = self.register_batch(state, blocks) else { return BatchProbes::default() };
            let reads: Vec<BlockRead> = blocks
                .iter()
                .zip(&dense)
                .filter_map(|(block, id)| Some(BlockRead { stripe: (*id)?, unit_bytes: block.stripe.unit_bytes }))
                .collect();
            let view = LiveView::of_batches(&state.catalog, &[], self.frontend_count, nodes);
            let targets: Vec<(PolicyNodeId, StoreNodeId)> = state
                .access
                .probe_targets(&view, &reads)
                .into_iter()
                .map(|node| (node, state.catalog.nodes[node.index()]))
                .collect();
            (targets, state.generation)
        };
        let (replies, sent) = self.probe_nodes(io, nodes, &targets).await;
        BatchProbes { replies, generation: Some(generation), sent, wait_ns: self.now_ns() - start_ns }
    }

    /// Registers the batch's stripes and plans them (synchronous: under the lock, no await), over
    /// the answers of its probe round if it had one.
    fn decide_batch(
        &self,
        nodes: &NodeMap,
        blocks: &[BatchBlock],
        probed: &BatchProbes,
    ) -> Result<Option<BatchDecision>, DataError> {
        let decision_start_ns = self.now_ns().saturating_sub(probed.wait_ns);
        let measure_cpu = self.decisions_begun.fetch_add(1, Ordering::Relaxed).is_multiple_of(self.cpu_sample_every);
        let cpu = ThreadCpu::start(measure_cpu);
        let mut state = self.lock();
        let state = &mut *state;
        let Some(dense) = self.register_batch(state, blocks)? else { return Ok(None) };
        let planned_positions: Vec<usize> = (0..blocks.len()).filter(|&i| dense[i].is_some()).collect();
        if planned_positions.is_empty() {
            return Ok(None);
        }
        let reads: Vec<BlockRead> = planned_positions
            .iter()
            .map(|&i| BlockRead { stripe: dense[i].expect("planned"), unit_bytes: blocks[i].stripe.unit_bytes })
            .collect();
        // Probe answers name dense nodes: they hold only while the catalog that numbered them does.
        let answers = if probed.generation == Some(state.generation) {
            record_rates(&mut state.catalog, &probed.replies)
        } else {
            Vec::new()
        };
        let mut view = LiveView::of_batches(&state.catalog, &answers, self.frontend_count, nodes);
        let mut rng = ChaCha8Rng::seed_from_u64(rand::RngCore::next_u64(&mut state.rng));
        let plan = state.access.plan_batch(&mut view, &reads, &mut rng);
        let stripes: Vec<PolicyStripeId> = reads.iter().map(|read| read.stripe).collect();
        state.mover.observe_batch(decision_start_ns, &stripes);
        assert_eq!(plan.blocks.len(), reads.len(), "one plan per block");
        let k = state.catalog.layout.data_units() as u32;
        let store_nodes: Vec<Vec<StoreNodeId>> = plan
            .blocks
            .iter()
            .map(|block| block.tasks.iter().map(|task| state.catalog.nodes[task.node.index()]).collect())
            .collect();
        let partitions = reads.iter().map(|read| PartitionId(read.stripe.0 * k)).collect();
        let mut planned = vec![None; blocks.len()];
        for (position, &index) in planned_positions.iter().enumerate() {
            planned[index] = Some(position);
        }
        let first_request = RequestId(state.next_request);
        state.next_request += blocks.len() as u64;
        let batch = state.next_batch;
        state.next_batch += 1;
        if state.access.pending_solves() > 0 {
            self.access_wake.notify_one();
        }
        let decision_cpu_ns = cpu.elapsed_ns();
        drop(view);
        if self.last_batch_ns.swap(decision_start_ns.max(1), Ordering::Relaxed) == 0 {
            self.access_wake.notify_one();
        }
        Ok(Some(BatchDecision {
            plan,
            probes: u32::try_from(probed.sent).unwrap_or(u32::MAX),
            probe_wait_ns: probed.wait_ns,
            planned,
            store_nodes,
            partitions,
            batch,
            first_request,
            decision_start_ns,
            decision_end_ns: self.now_ns(),
            decision_cpu_ns,
        }))
    }

    /// The dense id of each block's stripe (`None` for another code's); `None` when the catalog
    /// cannot hold the batch even after starting afresh.
    fn register_batch(
        &self,
        state: &mut super::State,
        blocks: &[BatchBlock],
    ) -> Result<Option<Vec<Option<PolicyStripeId>>>, DataError> {
        for attempt in 0..2 {
            let mut dense = Vec::with_capacity(blocks.len());
            let mut full = false;
            for block in blocks {
                if !self.is_own_code(&block.stripe) {
                    dense.push(None);
                    continue;
                }
                match state.catalog.stripe(&block.stripe)? {
                    Some(id) => dense.push(Some(id)),
                    None => {
                        full = true;
                        break;
                    }
                }
            }
            if !full {
                return Ok(Some(dense));
            }
            if attempt == 0 {
                self.reset_catalog(state)?;
            }
        }
        Ok(None)
    }

    /// Keeps one record per planned block, with its tasks, and the batch's record (completed when
    /// its last block was delivered, failed when any block was not read).
    fn record_batch(
        &self,
        decision: &BatchDecision,
        blocks: &[BatchBlock],
        runs: &[BlockRun],
        delivered: &[Option<(u64, bool)>],
        arrival_ns: u64,
    ) {
        if self.max_records == 0 {
            return;
        }
        let active = crate::profiles::active();
        for run in runs {
            let position = decision.planned[run.index].expect("a run is of a planned block");
            let (completion_ns, ok) = delivered[run.index].unwrap_or((self.now_ns(), false));
            let tasks = run
                .plan
                .tasks
                .iter()
                .zip(&run.ends)
                .map(|(task, end)| task_record(task, *end, decision.decision_end_ns))
                .collect();
            let block = &blocks[run.index];
            let request = RequestRecord {
                request: RequestId(decision.first_request.0 + run.index as u64),
                frontend: FrontendId(self.frontend_id),
                object: ObjectId(block.stripe.id.0),
                partition: decision.partitions[position],
                bytes: block_bytes(block),
                arrival_ns,
                decision_start_ns: decision.decision_start_ns,
                decision_end_ns: decision.decision_end_ns,
                completion_ns,
                probes: if run.index == 0 { decision.probes } else { 0 },
                probe_wait_ns: decision.probe_wait_ns,
                decision_cpu_ns: 0,
                degraded: run.degraded || !run.ok,
                timed_out: run.execution.timed_out(),
                outcome: if ok { Outcome::Ok } else { Outcome::Failed },
                class: 0,
                latency_class: 0,
            };
            // EC-Store's access plans choose the batch's units (selection), as many as each block
            // needs (redundancy k); a block read degraded is decoded here.
            let rebuilt = if run.degraded { Rebuilt::Gateway } else { Rebuilt::No };
            let layers = layer_decisions(active.as_deref(), ACCESS_PLANNER, Some(&run.plan), rebuilt, 0);
            self.keep(Record { request, tasks, layers: Some(layers) });
        }
        let all_ok = delivered.iter().all(|d| d.is_some_and(|(_, ok)| ok));
        let last_ns = delivered.iter().flatten().map(|(at, _)| *at).max().unwrap_or(arrival_ns);
        let record = BatchRecord {
            batch: decision.batch,
            client: 0,
            first_request: decision.first_request,
            blocks: blocks.len() as u32,
            bytes: blocks.iter().map(block_bytes).sum(),
            arrival_ns,
            decision_start_ns: decision.decision_start_ns,
            decision_end_ns: decision.decision_end_ns,
            completion_ns: last_ns.max(arrival_ns),
            decision_cpu_ns: decision.decision_cpu_ns,
            source: decision.plan.source,
            inline_solver_nodes: decision.plan.inline_solver_nodes,
            outcome: if all_ok { Outcome::Ok } else { Outcome::Failed },
        };
        let mut batches = crate::data::lock(&self.batch_records);
        if batches.len() >= self.max_records {
            count(&self.counters.dropped_records, "lowtail_controller_records_dropped_total", 1);
            return;
        }
        batches.push_back(record);
    }

    /// Takes every batch record kept so far (completion order).
    pub fn take_batch_records(&self) -> Vec<BatchRecord> {
        std::mem::take(&mut *crate::data::lock(&self.batch_records)).into()
    }

    /// The batch reads' access settings.
    pub fn access_settings(&self) -> AccessSettings {
        self.lock().access.settings().clone()
    }

    /// Named numbers of the access policy (plan-cache hits, solves), for `GET /admin/access`.
    pub fn access_gauges(&self) -> BTreeMap<String, f64> {
        self.lock().access.gauges().into_iter().map(|(name, value)| (name.to_string(), value)).collect()
    }

    /// Switches the batch reads' access policy (its cache and cost table start empty).
    pub fn set_access(&self, settings: AccessSettings) -> Result<AccessSettings, DataError> {
        settings.validate().map_err(|why| DataError::Internal(format!("access settings: {why}")))?;
        let mut state = self.lock();
        state.access = super::build_access(&settings, &state.catalog.layout)?;
        state.access_generation += 1;
        tracing::info!(access = %settings.name(), "batch access policy switched");
        Ok(settings)
    }

    /// The access policy's background work until `stop` changes: while batches are being read,
    /// every refresh period, probe every node and rebuild the cost table; and run the exact solves
    /// the policy queues, one at a time on a blocking thread, installing each unless the policy was
    /// switched meanwhile.
    pub async fn run_access(self: Arc<Self>, io: Arc<StripeIo>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut next_refresh = tokio::time::Instant::now();
        loop {
            let period = self.lock().access.refresh_period_ns().map(Duration::from_nanos);
            let active = self.batches_recent();
            if let Some(period) = period
                && active
                && tokio::time::Instant::now() >= next_refresh
            {
                next_refresh = tokio::time::Instant::now() + period;
                if let Err(error) = self.refresh_access(&io).await {
                    tracing::warn!(%error, "access policy refresh failed; keeping the old cost table");
                }
            }
            self.run_solves().await;
            let wait = match (period, active) {
                (Some(_), true) => next_refresh.saturating_duration_since(tokio::time::Instant::now()),
                _ => super::refresh::IDLE_REFRESH_CHECK,
            };
            tokio::select! {
                _ = stop.changed() => return,
                () = self.access_wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Whether a batch was planned within [`ACCESS_IDLE`].
    fn batches_recent(&self) -> bool {
        let last = self.last_batch_ns.load(Ordering::Relaxed);
        last != 0 && self.now_ns().saturating_sub(last) < ACCESS_IDLE.as_nanos() as u64
    }

    /// Probes every node once and folds the answers into the access policy's cost table.
    async fn refresh_access(&self, io: &StripeIo) -> Result<(), DataError> {
        let (nodes, replies, sent) = self.probe_every_node(io).await?;
        count(&self.counters.access_probes, "lowtail_controller_access_probes_total", sent as u64);
        let now_ns = self.now_ns();
        let mut state = self.lock();
        let state = &mut *state;
        let answers = record_rates(&mut state.catalog, &replies);
        let mut view = LiveView::of_batches(&state.catalog, &answers, self.frontend_count, &nodes);
        state.access.refresh(&mut view, now_ns);
        Ok(())
    }

    /// Runs the access policy's queued exact solves (at most [`SOLVES_PER_WAKE`]).
    async fn run_solves(&self) {
        for _ in 0..SOLVES_PER_WAKE {
            let (work, generation) = {
                let mut state = self.lock();
                match state.access.next_solve() {
                    Some(work) => (work, state.access_generation),
                    None => break,
                }
            };
            let result = match tokio::task::spawn_blocking(move || work.run()).await {
                Ok(result) => result,
                Err(error) => {
                    tracing::warn!(%error, "an access plan solve failed");
                    continue;
                }
            };
            let mut state = self.lock();
            if state.access_generation == generation {
                state.access.finish_solve(result);
            }
        }
        for (name, value) in self.lock().access.gauges() {
            metrics::gauge!("lowtail_controller_access_state", "name" => name).set(value);
        }
    }
}

/// Bytes of a block's data units (what the caller gets back).
fn block_bytes(block: &BatchBlock) -> u64 {
    block.stripe.unit_bytes * block.code.data_units() as u64
}

/// One batch's execution: the shell around each planned block's [`ReadExecution`].
struct BatchRun<'a, 'd> {
    controller: &'a Controller,
    io: &'a StripeIo,
    nodes: &'a NodeMap,
    blocks: &'a [BatchBlock],
    admission: Option<&'a TaskPool>,
    deliver: &'d mut (dyn FnMut(usize, BlockResult) + Send),
    /// Per block: when it was delivered (controller clock) and whether it was read.
    delivered: Vec<Option<(u64, bool)>>,
}

type NodeFuture<'a> = BoxFuture<'a, (usize, Option<NodeAnswer>)>;
type RobustFuture<'a> = BoxFuture<'a, (usize, BlockResult)>;

impl<'a> BatchRun<'a, '_> {
    /// Every block by the robust read (a batch that could not be planned).
    async fn all_robust(&mut self) {
        let mut reads: FuturesUnordered<RobustFuture<'a>> = (0..self.blocks.len()).map(|i| self.robust(i)).collect();
        while let Some((index, result)) = reads.next().await {
            self.hand_over(index, result);
        }
    }

    /// Gives block `index`'s result to the caller, noting when.
    fn hand_over(&mut self, index: usize, result: BlockResult) {
        debug_assert!(self.delivered[index].is_none(), "block {index} delivered once");
        self.delivered[index] = Some((self.controller.now_ns(), result.is_ok()));
        (self.deliver)(index, result);
    }

    /// Block `index` read whole by the robust read: each data unit in parallel.
    fn robust(&self, index: usize) -> RobustFuture<'a> {
        let (controller, block) = (self.controller, &self.blocks[index]);
        let range = whole_unit(self.io, self.nodes, block, self.admission);
        let units = 0..block.code.data_units();
        Box::pin(async move { (index, controller.read_robust(range, units).await.map(|(bytes, _)| bytes)) })
    }

    /// Runs the decided plan; returns the planned blocks' runs.
    async fn execute(&mut self, decision: &BatchDecision) -> Vec<BlockRun> {
        let start_ns = self.controller.now_ns();
        let mut runs: Vec<BlockRun> = Vec::with_capacity(decision.plan.blocks.len());
        let mut fallbacks: FuturesUnordered<RobustFuture<'a>> = FuturesUnordered::new();
        for (index, position) in decision.planned.iter().enumerate() {
            match position {
                Some(position) => {
                    let plan = decision.plan.blocks[*position].clone();
                    debug_assert!(plan.validate().is_ok(), "{:?}", plan.validate());
                    let tasks = plan.tasks.len();
                    runs.push(BlockRun {
                        index,
                        execution: ReadExecution::start(&plan, WHOLE_STRIPE, start_ns),
                        plan,
                        ends: vec![TaskEnd::NotLaunched; tasks],
                        bytes: vec![None; tasks],
                        node_task: vec![None; tasks],
                        timer_ns: None,
                        degraded: false,
                        ok: false,
                    });
                }
                None => fallbacks.push(self.robust(index)),
            }
        }
        let starts = self.poll_all(&mut runs, &mut fallbacks);
        let groups = self.group(starts, decision, &runs);
        // The batch's merged tasks take slots of the gateway's pool like one plan's tasks.
        let admitted = match self.admission {
            Some(pool) => pool.admit(groups.len()).await.ok(),
            None => None,
        };
        let mut node_tasks: Vec<NodeTask> = Vec::new();
        let mut running: FuturesUnordered<NodeFuture<'_>> = FuturesUnordered::new();
        self.launch(groups, &mut runs, &mut node_tasks, &mut running, admitted.as_ref());
        let total_tasks: usize = runs.iter().map(|r| r.plan.tasks.len()).sum();
        // Every task resolves once, every block's fallback ends once, and each timer fires once
        // per arming (at most once per task): the loop is bounded by their sum.
        for _step in 0..(3 * total_tasks + 2 * self.blocks.len() + 4) {
            if running.is_empty() && fallbacks.is_empty() && runs.iter().all(|r| r.execution.is_settled()) {
                break;
            }
            let timer = runs.iter().filter_map(|r| r.timer_ns).min();
            tokio::select! {
                Some((task, answer)) = running.next(), if !running.is_empty() => {
                    self.answered(task, answer, &mut node_tasks, &mut runs);
                }
                Some((index, result)) = fallbacks.next(), if !fallbacks.is_empty() => {
                    self.hand_over(index, result);
                }
                () = sleep_until_ns(self.controller, timer) => {
                    let now_ns = self.controller.now_ns();
                    for run in runs.iter_mut().filter(|r| r.timer_ns.is_some_and(|at| at <= now_ns)) {
                        run.timer_ns = None;
                        run.execution.handle(Event::TimerFired, self.blocks[run.index].code.as_ref());
                    }
                }
            }
            let starts = self.poll_all(&mut runs, &mut fallbacks);
            self.cancel_unwanted(&runs, &mut node_tasks);
            let groups = self.group(starts, decision, &runs);
            self.launch(groups, &mut runs, &mut node_tasks, &mut running, admitted.as_ref());
        }
        debug_assert!(running.is_empty() && fallbacks.is_empty(), "the loop bound covers every event of a batch");
        runs
    }

    /// Carries out every block's pending actions but starts: delivers completed blocks, sends
    /// failed ones to the robust read, notes timers. Returns the (block run, task) starts.
    fn poll_all(
        &mut self,
        runs: &mut [BlockRun],
        fallbacks: &mut FuturesUnordered<RobustFuture<'a>>,
    ) -> Vec<(usize, usize)> {
        let (blocks, io, nodes, admission) = (self.blocks, self.io, self.nodes, self.admission);
        let mut starts = Vec::new();
        for (position, run) in runs.iter_mut().enumerate() {
            while let Some(action) = run.execution.poll_action() {
                match action {
                    Action::Start { task } => starts.push((position, task)),
                    // Cancels are carried out per node task by `cancel_unwanted`.
                    Action::Cancel { .. } => {}
                    Action::ArmTimer { at_ns } => run.timer_ns = Some(at_ns),
                    Action::Complete { decoded } => {
                        let block = &blocks[run.index];
                        let range = whole_unit(io, nodes, block, admission);
                        let k = block.code.data_units();
                        let served = robust::served_units(range, &run.plan, 0..k, &run.bytes).map(|(units, _)| units);
                        if decoded {
                            io.count_degraded();
                        }
                        run.degraded = decoded;
                        match served {
                            Ok(units) => {
                                run.ok = true;
                                self.hand_over(run.index, Ok(units));
                            }
                            Err(error) => {
                                tracing::warn!(%error, "a completed block did not decode; reading it robustly");
                                fallbacks.push(self.robust(run.index));
                            }
                        }
                    }
                    Action::Fail { .. } => {
                        count(&self.controller.counters.fallbacks, "lowtail_controller_fallbacks_total", 1);
                        fallbacks.push(self.robust(run.index));
                    }
                }
            }
        }
        starts
    }

    /// `starts` grouped into merged node tasks: one per node, split where a task would pass the
    /// node's limits on ranges or bytes.
    fn group(
        &self,
        starts: Vec<(usize, usize)>,
        decision: &BatchDecision,
        runs: &[BlockRun],
    ) -> Vec<(StoreNodeId, Vec<(usize, usize)>)> {
        let mut by_node: BTreeMap<StoreNodeId, Vec<(usize, usize)>> = BTreeMap::new();
        for (position, task) in starts {
            let planned = decision.planned[runs[position].index].expect("a run is planned");
            by_node.entry(decision.store_nodes[planned][task]).or_default().push((position, task));
        }
        let mut groups = Vec::with_capacity(by_node.len());
        for (node, reads) in by_node {
            let mut current: Vec<(usize, usize)> = Vec::new();
            let mut bytes = 0u64;
            for (position, task) in reads {
                let length = runs[position].plan.tasks[task].length;
                let full = current.len() >= node::MAX_RANGES_PER_READ || bytes + length > node::MAX_MERGED_READ_BYTES;
                if full && !current.is_empty() {
                    groups.push((node, std::mem::take(&mut current)));
                    bytes = 0;
                }
                current.push((position, task));
                bytes += length;
            }
            groups.push((node, current));
        }
        groups
    }

    /// Sends each group as one merged node task.
    fn launch<'r>(
        &self,
        groups: Vec<(StoreNodeId, Vec<(usize, usize)>)>,
        runs: &mut [BlockRun],
        node_tasks: &mut Vec<NodeTask>,
        running: &mut FuturesUnordered<NodeFuture<'r>>,
        admitted: Option<&'r AdmittedPlan<'r>>,
    ) where
        'a: 'r,
    {
        for (node, reads) in groups {
            let id = node_tasks.len();
            let sent_ns = self.controller.now_ns();
            for &(position, task) in &reads {
                runs[position].node_task[task] = Some(id);
            }
            let ranges: Vec<(Arc<StripeMeta>, u16, u64)> = reads
                .iter()
                .map(|&(position, task)| {
                    let planned = &runs[position].plan.tasks[task];
                    (Arc::clone(&self.blocks[runs[position].index].stripe), u16::from(planned.unit), planned.length)
                })
                .collect();
            let (abort, registration) = AbortHandle::new_pair();
            let wanted = reads.len();
            node_tasks.push(NodeTask { reads, sent_ns, abort, wanted });
            let read = read_merged(self.io, self.nodes, node, ranges, admitted, id);
            running.push(Box::pin(async move { (id, Abortable::new(read, registration).await.ok()) }));
        }
    }

    /// Feeds a node task's answer (or its cancellation: `None`) to the blocks it served.
    fn answered(&mut self, id: usize, answer: Option<NodeAnswer>, node_tasks: &mut [NodeTask], runs: &mut [BlockRun]) {
        let now_ns = self.controller.now_ns();
        let task = &node_tasks[id];
        for (slot, &(position, planned)) in task.reads.iter().enumerate() {
            let run = &mut runs[position];
            let (end, event) = match &answer {
                None => (
                    TaskEnd::Cancelled { sent_ns: task.sent_ns, cancel_ns: now_ns },
                    Event::Cancelled { task: planned },
                ),
                Some(Err(())) => (TaskEnd::Failed { sent_ns: task.sent_ns }, Event::Failed { task: planned }),
                Some(Ok((bytes, timing))) => match &bytes[slot] {
                    Some(bytes) => {
                        run.bytes[planned] = Some(bytes.clone());
                        let end = TaskEnd::Done { timing: *timing, sent_ns: task.sent_ns, received_ns: now_ns };
                        (end, Event::Finished { task: planned })
                    }
                    None => (TaskEnd::Failed { sent_ns: task.sent_ns }, Event::Failed { task: planned }),
                },
            };
            run.ends[planned] = end;
            run.execution.handle(event, self.blocks[run.index].code.as_ref());
        }
    }

    /// Aborts every running node task none of whose reads the executions still want (a
    /// first-k-of-n block that completed cancels its extra reads; a node task serving other
    /// blocks too runs on).
    fn cancel_unwanted(&self, runs: &[BlockRun], node_tasks: &mut [NodeTask]) {
        for task in node_tasks.iter_mut().filter(|t| t.wanted > 0) {
            let wanted = task
                .reads
                .iter()
                .filter(|&&(position, planned)| {
                    let state = runs[position].execution.task_state(planned);
                    !matches!(state, execution::TaskState::CancelSent | execution::TaskState::Cancelled)
                })
                .count();
            task.wanted = wanted;
            if wanted == 0 {
                task.abort.abort();
            }
        }
    }
}

/// The range of a whole unit of `block` (unit 0: the target is the caller's to choose).
fn whole_unit<'b>(
    io: &'b StripeIo,
    nodes: &'b NodeMap,
    block: &'b BatchBlock,
    admission: Option<&'b TaskPool>,
) -> RangeRead<'b> {
    RangeRead {
        io,
        nodes,
        stripe: &block.stripe,
        code: block.code.as_ref(),
        unit: 0,
        offset: 0,
        length: block.stripe.unit_bytes,
        admission,
    }
}

/// One merged read on `node`: each (stripe, unit, length) whole, as one task of the node's queue.
/// A node that is not Up, or a unit recorded missing, fails that read at once; a corrupt or lost
/// unit is reported for repair. How long a block waits for it is its plan's deadline (the execution
/// core's timer; past it the block's reads are cancelled and the robust read takes over).
async fn read_merged(
    io: &StripeIo,
    nodes: &NodeMap,
    node: StoreNodeId,
    ranges: Vec<(Arc<StripeMeta>, u16, u64)>,
    admitted: Option<&AdmittedPlan<'_>>,
    slot: usize,
) -> NodeAnswer {
    let _slot = match admitted {
        Some(plan) => Some(plan.slot(slot).await.map_err(|_| ())?),
        None => None,
    };
    if !is_up(nodes, node) {
        return Err(());
    }
    let wholes: Vec<(&StripeMeta, u16, u64)> =
        ranges.iter().map(|(stripe, unit, length)| (&**stripe, *unit, *length)).collect();
    io.read_whole_units_timed(nodes, node, &wholes).await.map_err(|error| {
        tracing::debug!(%error, node = %node, "merged read failed");
    })
}

/// Sleeps until `at_ns` on the controller's clock, or forever without one.
async fn sleep_until_ns(controller: &Controller, at_ns: Option<u64>) {
    match at_ns {
        Some(at_ns) => tokio::time::sleep_until(controller.epoch + Duration::from_nanos(at_ns)).await,
        None => std::future::pending().await,
    }
}
