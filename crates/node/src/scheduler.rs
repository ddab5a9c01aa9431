//! Executes the node's tasks: admits reads (single or merged) and writes of a latency class into
//! the [`TaskQueue`], runs them on a bounded pool of workers in the order the class discipline
//! gives (arrival order by default), applies the service model (a reserved class's at its share
//! of the rate, or paced to it when the I/O is real), generates background load, cancels tasks
//! whose requester went away, and keeps the counters and timings the RPCs report, whole and per
//! class.
//!
//! Owns task execution and its bookkeeping. Must not decide policy (which node, which unit, which
//! class, when to give up are the gateway's), must not touch the file format (the store does) and
//! never reorders tasks itself: the queue's discipline does.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::classes::{ClassId, ClassQueueState, ClassScheduling, MAX_CLASSES};
use crate::error::{NodeError, UnitId};
use crate::link::{Direction, Link};
use crate::lock;
use crate::pacer::Pacer;
use crate::queue::{LANES, Lane, QueueLimits, QueueSnapshot, QueuedTask, TaskId, TaskQueue};
use crate::service_model::{ModelState, ServiceModel};
use crate::store::{UnitStore, UnitWrite};

/// How a task ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskOutcome {
    /// Done.
    Ok,
    /// Its requester went away before it finished.
    Cancelled,
    /// It failed (I/O error, unknown unit).
    Failed,
    /// The bytes it read failed their checksum.
    Corrupt,
}

/// Timestamps of one task on the node's monotonic clock (ns since node start), for the gateway's
/// records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskTiming {
    /// Node that served the task.
    pub node_id: u32,
    /// Task id on that node.
    pub task_id: TaskId,
    /// Entered the queue.
    pub enqueue_ns: u64,
    /// A worker took it.
    pub start_ns: u64,
    /// The worker finished it.
    pub finish_ns: u64,
    /// Bytes read or written.
    pub bytes: u64,
    /// How it ended.
    pub outcome: TaskOutcome,
    /// Bytes waiting or in service ahead of it when it entered.
    pub bytes_ahead: u64,
    /// Emulated service time the worker applied (zero with the model off).
    pub emulated_service_ns: u64,
    /// The latency class it ran in.
    pub class: ClassId,
}

/// Monotonic node counters, reported by `Stats`.
#[derive(Debug, Default)]
pub struct Counters {
    /// Bytes served by successful reads (of a merged read, those of the ranges that succeeded).
    pub bytes_read: AtomicU64,
    /// Bytes of committed writes.
    pub bytes_written: AtomicU64,
    /// Reads and writes that finished successfully (a merged read counts once, when every range
    /// succeeded).
    pub tasks_completed: AtomicU64,
    /// Reads and writes cancelled (waiting or in service).
    pub tasks_cancelled: AtomicU64,
    /// Reads and writes refused by a full queue.
    pub tasks_rejected: AtomicU64,
    /// Reads and writes that failed (including checksum failures; a merged read counts once when
    /// any of its ranges failed).
    pub tasks_failed: AtomicU64,
    /// Background tasks served.
    pub background_tasks: AtomicU64,
    /// Bytes of background tasks served.
    pub background_bytes: AtomicU64,
    /// Background arrivals dropped because the queue was full.
    pub background_dropped: AtomicU64,
    /// Per latency class, by class number.
    pub classes: [ClassCounters; MAX_CLASSES],
}

/// Monotonic counters of one latency class, reported by `Stats`.
#[derive(Debug, Default)]
pub struct ClassCounters {
    /// Its reads and writes that finished successfully.
    pub tasks_completed: AtomicU64,
    /// Their bytes.
    pub bytes_completed: AtomicU64,
    /// Their service times (start to finish) added up, ns: with `tasks_completed`, the class's
    /// mean service time.
    pub service_total_ns: AtomicU64,
}

type Reply<T> = oneshot::Sender<(Result<T, NodeError>, TaskTiming)>;

/// Most ranges one merged read ([`Scheduler::read_many`]) may ask for: EC-Store's batches read a
/// few units per node; the bound keeps a request's bookkeeping (and its answer's heads) small.
pub const MAX_RANGES_PER_READ: usize = 1024;
/// Most bytes one merged read may ask for in all. Its bytes are all in memory at once, as a single
/// read's are; this is the largest unit (so the largest single read) a node accepts by default.
pub const MAX_MERGED_READ_BYTES: u64 = 256 << 20;

/// One range of a merged read: the unit, the first byte, the number of bytes.
pub type RangeRead = (UnitId, u64, u64);
/// What each range of a merged read gave, in request order.
pub type RangeResults = Vec<Result<Bytes, NodeError>>;

/// What a queued task does.
#[derive(Debug)]
enum Work {
    Read {
        unit: UnitId,
        offset: u64,
        length: u64,
        reply: Reply<Bytes>,
    },
    /// Several ranges (of one or several units) read as one task: one overhead, the sum of the
    /// bytes. Each range's result is its own.
    ReadMany {
        ranges: Vec<RangeRead>,
        reply: Reply<RangeResults>,
    },
    Write {
        write: UnitWrite,
        reply: Reply<()>,
    },
    Background,
}

/// The emulated service time drawn for a task, how it combines with the real I/O, and the pacing
/// of a reserved class's real I/O.
#[derive(Clone, Copy, Debug)]
struct Emulation {
    service_time: Option<Duration>,
    replace_real_io: bool,
    /// The task does not finish before this (its class's token bucket is in debt until then).
    paced_until: Option<tokio::time::Instant>,
}

/// Successful tasks remembered for the measured service rate.
const RECENT_TASKS: usize = 64;

/// The task executor of one node.
#[derive(Debug)]
pub struct Scheduler {
    node_id: u32,
    node_label: String,
    started: Instant,
    queue: TaskQueue<Work>,
    store: Arc<UnitStore>,
    model: Mutex<ModelState>,
    model_version: watch::Sender<u64>,
    counters: Counters,
    /// (bytes, service ns) of the last [`RECENT_TASKS`] successful client tasks.
    recent: Mutex<VecDeque<(u64, u64)>>,
    /// Token buckets of the reserved classes whose I/O is real, by class.
    pacers: Mutex<[Pacer; MAX_CLASSES]>,
    /// The emulated uplink and downlink (unshaped unless the model sets their rates).
    egress: Link,
    ingress: Link,
}

/// Runs blocking store work off the async workers; a panic there becomes an error, not a dead worker.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, NodeError> + Send + 'static,
) -> Result<T, NodeError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|join_error| {
        Err(NodeError::io("<blocking task>", std::io::Error::other(join_error.to_string())))
    })
}

impl Scheduler {
    /// A scheduler for `store` with an empty queue. `model` must be valid.
    pub fn new(
        node_id: u32,
        store: Arc<UnitStore>,
        limits: QueueLimits,
        model: ServiceModel,
    ) -> Result<Arc<Self>, NodeError> {
        model.validate()?;
        let (model_version, _) = watch::channel(0);
        Ok(Arc::new(Self {
            node_id,
            node_label: node_id.to_string(),
            started: Instant::now(),
            queue: TaskQueue::new(limits),
            store,
            model_version,
            counters: Counters::default(),
            recent: Mutex::new(VecDeque::with_capacity(RECENT_TASKS)),
            pacers: Mutex::new([Pacer::default(); MAX_CLASSES]),
            egress: Link::new(&model, Direction::Egress),
            ingress: Link::new(&model, Direction::Ingress),
            model: Mutex::new(ModelState::new(model)),
        }))
    }

    /// Nanoseconds since this node started (the clock of every [`TaskTiming`]).
    pub fn now_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// The node's id.
    pub fn node_id(&self) -> u32 {
        self.node_id
    }

    /// The unit store.
    pub fn store(&self) -> &Arc<UnitStore> {
        &self.store
    }

    /// Counters since start.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Queue accounting now.
    pub fn queue_snapshot(&self) -> QueueSnapshot {
        self.queue.snapshot()
    }

    /// The emulated uplink: read answers and session packets wait for it.
    pub fn egress(&self) -> &Link {
        &self.egress
    }

    /// The emulated downlink: pushed packets wait for it.
    pub fn ingress(&self) -> &Link {
        &self.ingress
    }

    /// The service model in force.
    pub fn service_model(&self) -> ServiceModel {
        lock(&self.model).model().clone()
    }

    /// Replaces the service model (validated first; a bad one changes nothing). Tasks that start
    /// from now on use it; the background generator picks it up at once.
    pub fn set_service_model(&self, model: ServiceModel) -> Result<ServiceModel, NodeError> {
        model.validate()?;
        self.egress.set(&model, Direction::Egress);
        self.ingress.set(&model, Direction::Ingress);
        *lock(&self.model) = ModelState::new(model.clone());
        self.model_version.send_modify(|version| *version += 1);
        tracing::info!(node = self.node_id, ?model, "service model set");
        Ok(model)
    }

    /// The class discipline in force.
    pub fn class_scheduling(&self) -> ClassScheduling {
        self.queue.discipline()
    }

    /// Replaces the class discipline (validated first; a bad one changes nothing). Waiting tasks
    /// keep their place; tasks that start from now on are picked and served by the new one.
    pub fn set_class_scheduling(&self, scheduling: ClassScheduling) -> Result<ClassScheduling, NodeError> {
        scheduling.validate()?;
        self.queue.set_discipline(scheduling.clone());
        tracing::info!(node = self.node_id, ?scheduling, "class scheduling set");
        Ok(scheduling)
    }

    /// Whether a task of `class` would be admitted now (the queue's limits aside): the class is
    /// known and has a weight under the discipline in force.
    pub fn admits(&self, class: ClassId) -> Result<(), NodeError> {
        self.queue.admits(class)
    }

    /// Queue accounting of every class that has had a task, by class.
    pub fn class_queues(&self) -> Vec<ClassQueueState> {
        self.queue.class_states()
    }

    /// The classes that have had a task, by class.
    pub fn seen_classes(&self) -> Vec<ClassId> {
        self.queue.seen_classes()
    }

    /// Estimated service rate (bytes/s) and per-task overhead (µs): the model's when it is on with
    /// a rate, else measured over the last successful tasks (0 when none were measured).
    pub fn estimated_rate(&self) -> (f64, u64) {
        let model = self.service_model();
        if model.enabled && model.rate_bytes_per_s > 0.0 {
            let tail_mean_us = if model.tail_scale_us > 0 {
                (model.tail_scale_us as f64 / (model.tail_shape - 1.0)) as u64
            } else {
                0
            };
            let overhead_us = model.overhead_us + model.delay_shift_us + model.delay_exp_mean_us + tail_mean_us;
            return (model.rate_bytes_per_s, overhead_us);
        }
        (self.measured_rate_bytes_per_s(), 0)
    }

    /// Bytes / service time over the last successful client tasks, leaving out the time a
    /// reserved class's pacing held them (else pacing would lower the rate it paces at); 0 when
    /// nothing was measured.
    fn measured_rate_bytes_per_s(&self) -> f64 {
        let recent = lock(&self.recent);
        let (bytes, ns) = recent.iter().fold((0u64, 0u64), |(b, t), (bytes, ns)| (b + bytes, t + ns));
        if ns == 0 { 0.0 } else { bytes as f64 * 1e9 / ns as f64 }
    }

    fn publish_queue_gauges(&self, lane: Lane) {
        if let Lane::Class(class) = lane {
            let state = self.queue.class_state(class);
            let (node, class) = (self.node_label.clone(), class.to_string());
            metrics::gauge!("lowtail_node_class_queued_bytes", "node" => node.clone(), "class" => class.clone())
                .set(state.queued_bytes as f64);
            metrics::gauge!("lowtail_node_class_queued_tasks", "node" => node, "class" => class)
                .set(state.queued_tasks as f64);
        }
        let snapshot = self.queue.snapshot();
        let node = self.node_label.clone();
        metrics::gauge!("lowtail_node_queued_bytes", "node" => node.clone()).set(snapshot.queued_bytes as f64);
        metrics::gauge!("lowtail_node_queued_tasks", "node" => node.clone()).set(snapshot.queued_tasks as f64);
        metrics::gauge!("lowtail_node_in_service_bytes", "node" => node.clone()).set(snapshot.in_service_bytes as f64);
        metrics::gauge!("lowtail_node_in_service_tasks", "node" => node).set(snapshot.in_service_tasks as f64);
    }

    fn admit(&self, class: ClassId, bytes: u64, work: Work) -> Result<TaskId, NodeError> {
        let result = self.queue.push(Lane::Class(class), bytes, self.now_ns(), work);
        if matches!(result, Err(NodeError::QueueFull { .. })) {
            self.counters.tasks_rejected.fetch_add(1, Ordering::Relaxed);
        }
        if result.is_ok() {
            self.publish_queue_gauges(Lane::Class(class));
        }
        result
    }

    /// Reads `length` bytes at `offset` of `unit` through the queue, as a task of `class`. A class
    /// the discipline does not admit, unknown units and bad ranges are refused before queueing.
    /// Dropping the returned future cancels the task: removed from the queue if it still waits,
    /// abandoned (its emulated time cut short) if it is being served.
    pub async fn read(
        &self,
        class: ClassId,
        unit: UnitId,
        offset: u64,
        length: u64,
    ) -> Result<(Bytes, TaskTiming), NodeError> {
        self.admits(class)?;
        let unit_len = self.store.unit_len(unit).ok_or(NodeError::NotFound(unit))?;
        if offset.checked_add(length).is_none_or(|end| end > unit_len) {
            return Err(NodeError::OutOfRange { unit, offset, length, unit_len });
        }
        let (reply, done) = oneshot::channel();
        let id = self.admit(class, length, Work::Read { unit, offset, length, reply })?;
        let (result, timing) = self.await_task(id, done).await?;
        result.map(|bytes| (bytes, timing))
    }

    /// Reads every range of `ranges` as ONE task, as EC-Store plans a batch's reads on one node:
    /// it enters the queue once, weighted by the sum of the lengths, and the service model is
    /// applied once for that sum (one per-task overhead). Each range's result is its own, in
    /// order: a missing unit, a range past its unit's end or a checksum failure (the unit then
    /// joins the corrupt list) fails that range only. Unlike [`Scheduler::read`], missing units
    /// are not refused up front (one missing range must not refuse the others) and their lengths
    /// still weigh in the task.
    ///
    /// A class the discipline does not admit, an empty request, more than [`MAX_RANGES_PER_READ`]
    /// ranges or more than [`MAX_MERGED_READ_BYTES`] in all is refused before queueing. Dropping
    /// the returned future cancels the task as it does [`Scheduler::read`]'s.
    pub async fn read_many(
        &self,
        class: ClassId,
        ranges: Vec<RangeRead>,
    ) -> Result<(RangeResults, TaskTiming), NodeError> {
        self.admits(class)?;
        let bytes = merged_read_bytes(&ranges)?;
        let (reply, done) = oneshot::channel();
        let id = self.admit(class, bytes, Work::ReadMany { ranges, reply })?;
        let (result, timing) = self.await_task(id, done).await?;
        result.map(|results| (results, timing))
    }

    /// Commits a fully received unit through the queue as a task of `class`; returns once it is
    /// durable. Dropping the future while the task waits cancels it (a staged file is removed, an
    /// image never reaches the disk); once a worker has begun the commit it completes.
    pub async fn write(&self, class: ClassId, write: UnitWrite) -> Result<TaskTiming, NodeError> {
        let bytes = write.data_len();
        let (reply, done) = oneshot::channel();
        let id = self.admit(class, bytes, Work::Write { write, reply })?;
        let (result, timing) = self.await_task(id, done).await?;
        result.map(|()| timing)
    }

    async fn await_task<T>(
        &self,
        id: TaskId,
        done: oneshot::Receiver<(Result<T, NodeError>, TaskTiming)>,
    ) -> Result<(Result<T, NodeError>, TaskTiming), NodeError> {
        let mut guard = CancelOnDrop { scheduler: self, id, armed: true };
        let result = done.await;
        guard.armed = false;
        // The worker always replies unless the node shut down with the task unserved.
        result.map_err(|_| NodeError::ShuttingDown)
    }

    /// Starts the workers; they run until [`Scheduler::close`] and the queue drains. At most
    /// `workers` tasks are served at once under the shared disciplines (FCFS, weighted sharing);
    /// under `Reserved` every class is a server of its own, so there are enough workers for one
    /// task per lane too (the queue keeps the others waiting).
    pub fn spawn_workers(self: &Arc<Self>, workers: usize) -> Vec<JoinHandle<()>> {
        assert!(workers > 0, "a node needs at least one worker");
        self.queue.set_servers(workers);
        (0..workers.max(LANES))
            .map(|_| {
                let scheduler = Arc::clone(self);
                tokio::spawn(async move { while scheduler.serve_one().await {} })
            })
            .collect()
    }

    /// Stops admitting tasks; workers finish what waits and stop.
    pub fn close(&self) {
        self.queue.close();
    }

    /// Serves the next task; false once the queue is closed and empty.
    async fn serve_one(&self) -> bool {
        let Some(task) = self.queue.pop().await else { return false };
        self.publish_queue_gauges(task.lane);
        let QueuedTask { id, lane, bytes, enqueue_ns, bytes_ahead, share, work } = task;
        let start_ns = self.now_ns();
        let (mut emulation, paced_share) = {
            let mut model = lock(&self.model);
            let replace_real_io = model.model().replace_real_io;
            // A reserved class's server runs at its share of the emulated rate; without one, its
            // real I/O is paced to its share of the measured rate instead.
            let paced_share = share.filter(|_| !model.model().has_rate());
            let service_time = model.sample_service_time_at_share(bytes, share.unwrap_or(1.0));
            (Emulation { service_time, replace_real_io, paced_until: None }, paced_share)
        };
        let class = match lane {
            Lane::Class(class) => class,
            Lane::Background => ClassId::DEFAULT,
        };
        if let Some(share) = paced_share {
            let rate_bytes_per_s = share * self.measured_rate_bytes_per_s();
            let now = Instant::now();
            let until = lock(&self.pacers)[class.index()].reserve(now, bytes, rate_bytes_per_s);
            emulation.paced_until = until.map(tokio::time::Instant::from_std);
        }
        let mut timing = TaskTiming {
            node_id: self.node_id,
            task_id: id,
            enqueue_ns,
            start_ns,
            finish_ns: 0,
            bytes,
            outcome: TaskOutcome::Ok,
            bytes_ahead,
            emulated_service_ns: emulation.service_time.map_or(0, |t| t.as_nanos() as u64),
            class,
        };
        let kind = match work {
            Work::Background => {
                tokio::time::sleep(emulation.service_time.unwrap_or_default()).await;
                self.counters.background_tasks.fetch_add(1, Ordering::Relaxed);
                self.counters.background_bytes.fetch_add(bytes, Ordering::Relaxed);
                "background"
            }
            Work::Read { unit, offset, length, reply } => {
                let io = read_one(Arc::clone(&self.store), unit, offset, length);
                self.serve_read(reply, &mut timing, emulation, io, tally_read).await;
                "read"
            }
            Work::ReadMany { ranges, reply } => {
                let io = read_ranges(Arc::clone(&self.store), ranges);
                self.serve_read(reply, &mut timing, emulation, io, tally_read_many).await;
                "read_many"
            }
            Work::Write { write, reply } => {
                self.serve_write(write, reply, &mut timing, emulation).await;
                "write"
            }
        };
        if timing.finish_ns == 0 {
            timing.finish_ns = self.now_ns();
        }
        self.queue.finished(lane, bytes);
        self.publish_queue_gauges(lane);
        let outcome = format!("{:?}", timing.outcome).to_lowercase();
        metrics::counter!("lowtail_node_tasks_total", "node" => self.node_label.clone(), "kind" => kind, "outcome" => outcome)
            .increment(1);
        true
    }

    /// Serves a read task (single or merged) unless its requester leaves first; `tally` gives the
    /// outcome of what `io` read and the bytes it served.
    async fn serve_read<T>(
        &self,
        mut reply: Reply<T>,
        timing: &mut TaskTiming,
        emulation: Emulation,
        io: impl Future<Output = Result<T, NodeError>>,
        tally: fn(&Result<T, NodeError>) -> (TaskOutcome, u64),
    ) {
        let served = tokio::select! {
            served = emulate(emulation, io) => Some(served),
            // The requester went away: stop spending (emulated) disk time on it.
            () = reply.closed() => None,
        };
        timing.finish_ns = self.now_ns();
        let Some((result, unpaced)) = served else {
            timing.outcome = TaskOutcome::Cancelled;
            self.counters.tasks_cancelled.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let (outcome, served_bytes) = tally(&result);
        timing.outcome = self.account(outcome, timing, unpaced);
        if served_bytes > 0 {
            self.counters.bytes_read.fetch_add(served_bytes, Ordering::Relaxed);
            metrics::counter!("lowtail_node_read_bytes_total", "node" => self.node_label.clone())
                .increment(served_bytes);
        }
        // The requester may have gone in the meantime; nothing to do then.
        let _ = reply.send((result, *timing));
    }

    /// Serves a write commit. One that began completes even if the requester left: half a rename
    /// is worse.
    async fn serve_write(&self, write: UnitWrite, reply: Reply<()>, timing: &mut TaskTiming, emulation: Emulation) {
        let store = Arc::clone(&self.store);
        let (result, unpaced) = emulate(emulation, blocking(move || store.commit_write(write))).await;
        timing.finish_ns = self.now_ns();
        timing.outcome = self.account(outcome_of(&result), timing, unpaced);
        if result.is_ok() {
            self.counters.bytes_written.fetch_add(timing.bytes, Ordering::Relaxed);
            metrics::counter!("lowtail_node_written_bytes_total", "node" => self.node_label.clone())
                .increment(timing.bytes);
        }
        let _ = reply.send((result, *timing));
    }

    /// Counts a finished client task of outcome `outcome` and returns it. `unpaced` is its service
    /// time without its class's pacing (what the measured rate uses).
    fn account(&self, outcome: TaskOutcome, timing: &TaskTiming, unpaced: Duration) -> TaskOutcome {
        if outcome == TaskOutcome::Ok {
            self.counters.tasks_completed.fetch_add(1, Ordering::Relaxed);
            let service_ns = timing.finish_ns.saturating_sub(timing.start_ns);
            let class = &self.counters.classes[timing.class.index()];
            class.tasks_completed.fetch_add(1, Ordering::Relaxed);
            class.bytes_completed.fetch_add(timing.bytes, Ordering::Relaxed);
            class.service_total_ns.fetch_add(service_ns, Ordering::Relaxed);
            let (node, class_label) = (self.node_label.clone(), timing.class.to_string());
            metrics::histogram!("lowtail_node_class_service_seconds", "node" => node, "class" => class_label)
                .record(service_ns as f64 / 1e9);
            let mut recent = lock(&self.recent);
            if recent.len() == RECENT_TASKS {
                recent.pop_front();
            }
            recent.push_back((timing.bytes, (unpaced.as_nanos() as u64).min(service_ns)));
        } else {
            self.counters.tasks_failed.fetch_add(1, Ordering::Relaxed);
        }
        outcome
    }

    /// Generates the model's background load until the queue closes: background tasks occupy the
    /// queue and a worker for their emulated time, like other tenants' I/O on a shared disk.
    /// Arrivals that find the queue full are dropped and counted.
    pub fn spawn_background_load(self: &Arc<Self>) -> JoinHandle<()> {
        let scheduler = Arc::clone(self);
        let mut version = self.model_version.subscribe();
        tokio::spawn(async move {
            loop {
                let (gap, bytes) = {
                    let mut model = lock(&scheduler.model);
                    (model.next_background_gap(), model.model().background_task_bytes)
                };
                let Some(gap) = gap else {
                    // Nothing to generate until the model changes.
                    if version.changed().await.is_err() {
                        return;
                    }
                    continue;
                };
                tokio::select! {
                    () = tokio::time::sleep(gap) => {}
                    changed = version.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        continue;
                    }
                }
                match scheduler.queue.push(Lane::Background, bytes, scheduler.now_ns(), Work::Background) {
                    Ok(_) => scheduler.publish_queue_gauges(Lane::Background),
                    Err(NodeError::QueueFull { .. }) => {
                        scheduler.counters.background_dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => return,
                }
            }
        })
    }
}

/// Applies an emulated service time around real I/O: with `replace_real_io` the task takes
/// max(real, emulated); otherwise emulated + real. Then holds it until its pacing allows, so it
/// takes max(that, paced). Returns the output and the time it took before the pacing.
async fn emulate<T>(emulation: Emulation, io: impl Future<Output = T>) -> (T, Duration) {
    let began = tokio::time::Instant::now();
    let output = match emulation.service_time {
        None => io.await,
        Some(service_time) if emulation.replace_real_io => {
            let deadline = tokio::time::Instant::now() + service_time;
            let output = io.await;
            tokio::time::sleep_until(deadline).await;
            output
        }
        Some(service_time) => {
            tokio::time::sleep(service_time).await;
            io.await
        }
    };
    let unpaced = began.elapsed();
    if let Some(until) = emulation.paced_until {
        tokio::time::sleep_until(until).await;
    }
    (output, unpaced)
}

/// The queue weight of a merged read (the sum of its lengths), or why it is refused.
fn merged_read_bytes(ranges: &[RangeRead]) -> Result<u64, NodeError> {
    let refuse = |what: String| Err(NodeError::InvalidArgument(what));
    if ranges.is_empty() {
        return refuse("a merged read needs at least one range".into());
    }
    if ranges.len() > MAX_RANGES_PER_READ {
        return refuse(format!("a merged read of {} ranges; at most {MAX_RANGES_PER_READ}", ranges.len()));
    }
    // Checked: lengths near u64::MAX must not wrap around under the cap.
    let total = ranges.iter().try_fold(0u64, |sum, &(_, _, length)| sum.checked_add(length));
    match total {
        Some(total) if total <= MAX_MERGED_READ_BYTES => Ok(total),
        _ => refuse(format!("a merged read of more than {MAX_MERGED_READ_BYTES} bytes in all")),
    }
}

/// One range: from the page cache here, on the runtime thread, when it holds the bytes; only a read
/// that would wait for the device goes to the blocking pool (two thread hand-offs).
async fn read_one(store: Arc<UnitStore>, unit: UnitId, offset: u64, length: u64) -> Result<Bytes, NodeError> {
    match store.read_range_cached(unit, offset, length) {
        Some(result) => result,
        None => blocking(move || store.read_range(unit, offset, length)).await,
    }
}

/// Every range of a merged read, in order: those the page cache holds here, the rest in ONE
/// hand-off to the blocking pool (not one per range). Only a failed hand-off (a panic) fails the
/// whole task; every store error is its range's.
async fn read_ranges(store: Arc<UnitStore>, ranges: Vec<RangeRead>) -> Result<RangeResults, NodeError> {
    let cached: Vec<_> =
        ranges.iter().map(|&(unit, offset, length)| store.read_range_cached(unit, offset, length)).collect();
    if cached.iter().all(Option::is_some) {
        return Ok(cached.into_iter().flatten().collect());
    }
    blocking(move || {
        let read = cached.into_iter().zip(ranges);
        Ok(read
            .map(|(cached, (unit, offset, length))| cached.unwrap_or_else(|| store.read_range(unit, offset, length)))
            .collect())
    })
    .await
}

/// The outcome a task with this result has.
fn outcome_of<T>(result: &Result<T, NodeError>) -> TaskOutcome {
    match result {
        Ok(_) => TaskOutcome::Ok,
        Err(NodeError::Corrupt { .. }) => TaskOutcome::Corrupt,
        Err(_) => TaskOutcome::Failed,
    }
}

/// A single read's outcome and the bytes it served.
fn tally_read(result: &Result<Bytes, NodeError>) -> (TaskOutcome, u64) {
    (outcome_of(result), result.as_ref().map_or(0, |data| data.len() as u64))
}

/// A merged read's outcome and the bytes it served (those of the ranges that succeeded). The
/// outcome is its most severe range's, as a single read of that range would have ended: `Corrupt`
/// above `Failed` above `Ok`. A checksum failure ranks first because it is data loss the gateway
/// must repair, and `Corrupt` is the one outcome that says so; the per-range statuses keep every
/// other failure visible.
fn tally_read_many(result: &Result<RangeResults, NodeError>) -> (TaskOutcome, u64) {
    let Ok(results) = result else { return (outcome_of(result), 0) };
    let severity = |outcome: &TaskOutcome| match outcome {
        TaskOutcome::Ok => 0,
        TaskOutcome::Failed => 1,
        TaskOutcome::Corrupt => 2,
        TaskOutcome::Cancelled => 3,
    };
    let outcome = results.iter().map(outcome_of).max_by_key(severity).unwrap_or(TaskOutcome::Ok);
    (outcome, results.iter().flatten().map(|data| data.len() as u64).sum())
}

/// Cancels a task whose requester stopped waiting while it was still queued.
struct CancelOnDrop<'a> {
    scheduler: &'a Scheduler,
    id: TaskId,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(task) = self.scheduler.queue.cancel(self.id) {
            self.scheduler.counters.tasks_cancelled.fetch_add(1, Ordering::Relaxed);
            self.scheduler.publish_queue_gauges(task.lane);
            tracing::debug!(node = self.scheduler.node_id, task = task.id, bytes = task.bytes, "queued task cancelled");
            // Dropping the work of a cancelled write removes its staged file.
            drop(task);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::UnitImage;

    fn scheduler(dir: &std::path::Path, model: ServiceModel) -> Arc<Scheduler> {
        let store = Arc::new(UnitStore::open(dir, 1 << 30).unwrap());
        let limits = QueueLimits { max_queued_bytes: 1 << 30, max_queued_tasks: 1000 };
        Scheduler::new(1, store, limits, model).unwrap()
    }

    async fn put(scheduler: &Scheduler, unit: UnitId, data: &[u8]) -> TaskTiming {
        scheduler.write(ClassId::DEFAULT, UnitWrite::Image(UnitImage::with_data(unit, data))).await.unwrap()
    }

    fn model(overhead_ms: u64, rate_bytes_per_s: f64) -> ServiceModel {
        ServiceModel { enabled: true, overhead_us: overhead_ms * 1000, rate_bytes_per_s, ..Default::default() }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn service_time_is_overhead_plus_bytes_over_rate() {
        let dir = tempfile::tempdir().unwrap();
        let scheduler = scheduler(dir.path(), ServiceModel::default());
        let _workers = scheduler.spawn_workers(1);
        let unit = UnitId::new(1, 0);
        put(&scheduler, unit, &vec![7u8; 200_000]).await;
        // 20 ms + 200 000 B / 10 MB/s = 40 ms.
        scheduler.set_service_model(model(20, 10_000_000.0)).unwrap();
        let began = Instant::now();
        let (bytes, timing) = scheduler.read(ClassId::DEFAULT, unit, 0, 200_000).await.unwrap();
        let elapsed = began.elapsed();
        assert_eq!(bytes.len(), 200_000);
        assert_eq!(timing.emulated_service_ns, 40_000_000);
        let service = Duration::from_nanos(timing.finish_ns - timing.start_ns);
        assert!(service >= Duration::from_millis(40) && service < Duration::from_millis(60), "{service:?}");
        assert!(elapsed >= Duration::from_millis(40) && elapsed < Duration::from_millis(100), "{elapsed:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queued_tasks_finish_in_arrival_order_after_the_sum() {
        let dir = tempfile::tempdir().unwrap();
        let scheduler = scheduler(dir.path(), ServiceModel::default());
        let _workers = scheduler.spawn_workers(1);
        let unit = UnitId::new(2, 0);
        put(&scheduler, unit, &vec![1u8; 100_000]).await;
        scheduler.set_service_model(model(30, 0.0)).unwrap();
        let began = Instant::now();
        let reads: Vec<_> = (0..4u64)
            .map(|i| {
                let scheduler = Arc::clone(&scheduler);
                tokio::spawn(async move {
                    // Stagger arrivals so the arrival order is known.
                    tokio::time::sleep(Duration::from_millis(2 * i)).await;
                    let (_, timing) = scheduler.read(ClassId::DEFAULT, unit, 0, 1000 * (i + 1)).await.unwrap();
                    (timing, began.elapsed())
                })
            })
            .collect();
        let mut timings = Vec::new();
        for read in reads {
            timings.push(read.await.unwrap());
        }
        // The staggered sleeps make arrivals in spawn order likely, not certain: a busy host can
        // poll a spawned read late. Task ids are given on arrival, so rank the reads by them.
        timings.sort_by_key(|(timing, _)| timing.task_id);
        let total_bytes: u64 = timings.iter().map(|(timing, _)| timing.bytes).sum();
        assert_eq!(total_bytes, 1000 + 2000 + 3000 + 4000);
        for (k, (timing, elapsed)) in timings.iter().enumerate() {
            let expected = Duration::from_millis(30 * (k as u64 + 1));
            assert!(
                *elapsed >= expected && *elapsed < expected + Duration::from_millis(40),
                "arrival {k}: {elapsed:?}"
            );
            if k > 0 {
                assert!(timing.start_ns >= timings[k - 1].0.finish_ns, "FCFS: {k} starts after {} ends", k - 1);
            }
        }
        // The last arrival waited behind every other read (the first one in service).
        assert_eq!(timings[3].0.bytes_ahead, total_bytes - timings[3].0.bytes);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_a_queued_read_removes_it_from_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let scheduler = scheduler(dir.path(), ServiceModel::default());
        let _workers = scheduler.spawn_workers(1);
        let unit = UnitId::new(3, 0);
        put(&scheduler, unit, &[5u8; 5000]).await;
        scheduler.set_service_model(model(200, 0.0)).unwrap();
        let first = {
            let scheduler = Arc::clone(&scheduler);
            tokio::spawn(async move { scheduler.read(ClassId::DEFAULT, unit, 0, 1000).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let second =
            tokio::time::timeout(Duration::from_millis(30), scheduler.read(ClassId::DEFAULT, unit, 0, 4000)).await;
        assert!(second.is_err(), "second read is still waiting when dropped");
        assert_eq!(scheduler.queue_snapshot().queued_bytes, 0);
        assert_eq!(scheduler.queue_snapshot().in_service_bytes, 1000);
        assert_eq!(scheduler.counters().tasks_cancelled.load(Ordering::Relaxed), 1);
        first.await.unwrap().unwrap();
        assert_eq!(scheduler.counters().tasks_completed.load(Ordering::Relaxed), 2, "the write and the first read");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_a_queued_write_removes_it_and_its_staged_file() {
        let dir = tempfile::tempdir().unwrap();
        let scheduler = scheduler(dir.path(), ServiceModel::default());
        let _workers = scheduler.spawn_workers(1);
        let unit = UnitId::new(5, 0);
        put(&scheduler, unit, b"first").await;
        scheduler.set_service_model(model(150, 0.0)).unwrap();
        let busy = {
            let scheduler = Arc::clone(&scheduler);
            tokio::spawn(async move { scheduler.read(ClassId::DEFAULT, unit, 0, 5).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let store = Arc::clone(scheduler.store());
        let mut staged = store.begin_write(UnitId::new(5, 1), 3).unwrap();
        staged.append(b"abc").unwrap();
        let writes = [UnitWrite::Staged(staged), UnitWrite::Image(UnitImage::with_data(UnitId::new(5, 2), b"xyz"))];
        for write in writes {
            assert!(
                tokio::time::timeout(Duration::from_millis(30), scheduler.write(ClassId::DEFAULT, write))
                    .await
                    .is_err()
            );
        }
        assert_eq!(scheduler.queue_snapshot().queued_tasks, 0);
        busy.await.unwrap().unwrap();
        for cancelled in [UnitId::new(5, 1), UnitId::new(5, 2)] {
            assert_eq!(store.unit_len(cancelled), None, "the cancelled write never became visible");
        }
        let files = std::fs::read_dir(dir.path().join("units")).unwrap().count();
        assert_eq!(files, 1, "only the first unit; the staged file is gone, the image never written");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn background_load_occupies_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let scheduler = scheduler(dir.path(), ServiceModel::default());
        let _workers = scheduler.spawn_workers(1);
        let _background = scheduler.spawn_background_load();
        scheduler
            .set_service_model(ServiceModel {
                background_tasks_per_s: 200.0,
                background_task_bytes: 4096,
                background_poisson: false,
                ..model(1, 0.0)
            })
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let served = scheduler.counters().background_tasks.load(Ordering::Relaxed);
        assert!((20..=45).contains(&served), "about 40 background tasks in 200 ms, got {served}");
        scheduler.set_service_model(ServiceModel::default()).unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let after = scheduler.counters().background_tasks.load(Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(scheduler.counters().background_tasks.load(Ordering::Relaxed), after, "switched off");
        assert_eq!(scheduler.counters().background_bytes.load(Ordering::Relaxed), after * 4096);
    }

    fn flip_byte(scheduler: &Scheduler, unit: UnitId, at: u64) {
        let path = scheduler.store().path_of(unit);
        let mut raw = std::fs::read(&path).unwrap();
        raw[(crate::store::HEADER_BYTES + at) as usize] ^= 0xff;
        std::fs::write(&path, raw).unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_merged_read_is_one_task_with_one_overhead() {
        let dir = tempfile::tempdir().unwrap();
        let scheduler = scheduler(dir.path(), ServiceModel::default());
        let _workers = scheduler.spawn_workers(1);
        let (a, b) = (UnitId::new(6, 0), UnitId::new(6, 1));
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        put(&scheduler, a, &data).await;
        put(&scheduler, b, &data[..60_000]).await;
        // 20 ms + 150 000 B / 10 MB/s = 35 ms, once; three single reads would pay 3 × 20 ms
        // of overhead.
        scheduler.set_service_model(model(20, 10_000_000.0)).unwrap();
        let ranges = vec![(a, 0, 50_000), (b, 10_000, 50_000), (a, 50_000, 50_000), (b, 0, 0)];
        let (results, timing) = scheduler.read_many(ClassId::DEFAULT, ranges.clone()).await.unwrap();
        assert_eq!(results.len(), ranges.len());
        for (result, &(_, offset, length)) in results.iter().zip(&ranges) {
            let expected = &data[offset as usize..(offset + length) as usize];
            assert_eq!(result.as_ref().unwrap().as_ref(), expected, "range at {offset} of {length}");
        }
        assert_eq!((timing.bytes, timing.outcome), (150_000, TaskOutcome::Ok));
        assert_eq!(timing.emulated_service_ns, 35_000_000, "one overhead for the sum of the bytes");
        assert!(timing.finish_ns - timing.start_ns >= 35_000_000);
        let counters = scheduler.counters();
        assert_eq!(counters.tasks_completed.load(Ordering::Relaxed), 3, "two writes and ONE read");
        assert_eq!(counters.bytes_read.load(Ordering::Relaxed), 150_000);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_merged_read_fails_only_its_bad_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let scheduler = scheduler(dir.path(), ServiceModel::default());
        let _workers = scheduler.spawn_workers(1);
        let (good, bad, missing) = (UnitId::new(7, 0), UnitId::new(7, 1), UnitId::new(7, 2));
        put(&scheduler, good, &[3u8; 1000]).await;
        put(&scheduler, bad, &[4u8; 200_000]).await;
        flip_byte(&scheduler, bad, 70_000); // block 1
        let ranges = vec![(good, 0, 1000), (missing, 0, 10), (bad, 0, 1000), (bad, 65_536, 1000), (good, 900, 200)];
        let (results, timing) = scheduler.read_many(ClassId::DEFAULT, ranges).await.unwrap();
        assert_eq!(results[0].as_ref().unwrap().as_ref(), &[3u8; 1000]);
        assert!(matches!(results[1], Err(NodeError::NotFound(unit)) if unit == missing), "{:?}", results[1]);
        assert_eq!(results[2].as_ref().unwrap().as_ref(), &[4u8; 1000], "block 0 verifies on its own");
        assert!(matches!(results[3], Err(NodeError::Corrupt { unit, .. }) if unit == bad), "{:?}", results[3]);
        assert!(matches!(results[4], Err(NodeError::OutOfRange { .. })), "{:?}", results[4]);
        assert_eq!((timing.bytes, timing.outcome), (1000 + 10 + 1000 + 1000 + 200, TaskOutcome::Corrupt));
        assert_eq!(scheduler.store().corrupt_units(), vec![bad]);
        let counters = scheduler.counters();
        assert_eq!(counters.tasks_failed.load(Ordering::Relaxed), 1, "one task, failed");
        assert_eq!(counters.tasks_completed.load(Ordering::Relaxed), 2, "the two writes");
        assert_eq!(counters.bytes_read.load(Ordering::Relaxed), 2000, "the bytes served");
    }

    #[tokio::test]
    async fn bad_merged_reads_are_refused_before_queueing() {
        let dir = tempfile::tempdir().unwrap();
        let scheduler = scheduler(dir.path(), ServiceModel::default());
        let _workers = scheduler.spawn_workers(1);
        let unit = UnitId::new(8, 0);
        for ranges in [
            vec![],
            vec![(unit, 0, 1); MAX_RANGES_PER_READ + 1],
            vec![(unit, 0, MAX_MERGED_READ_BYTES), (unit, 0, 1)],
            vec![(unit, 0, u64::MAX), (unit, 0, 2)],
        ] {
            let count = ranges.len();
            let refused = scheduler.read_many(ClassId::DEFAULT, ranges).await;
            assert!(matches!(refused, Err(NodeError::InvalidArgument(_))), "{count} ranges: {refused:?}");
        }
        // At the bounds it is a task (its ranges fail on their own: the unit is missing).
        let (results, timing) =
            scheduler.read_many(ClassId::DEFAULT, vec![(unit, 0, 1); MAX_RANGES_PER_READ]).await.unwrap();
        assert!(results.iter().all(|result| matches!(result, Err(NodeError::NotFound(_)))));
        assert_eq!((timing.bytes, timing.outcome), (MAX_RANGES_PER_READ as u64, TaskOutcome::Failed));
        assert_eq!(timing.task_id, 1, "no refused request took a task id");
        assert_eq!(scheduler.counters().tasks_rejected.load(Ordering::Relaxed), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_a_merged_read_cancels_it_waiting_or_in_service() {
        let dir = tempfile::tempdir().unwrap();
        let scheduler = scheduler(dir.path(), ServiceModel::default());
        let _workers = scheduler.spawn_workers(1);
        let unit = UnitId::new(9, 0);
        put(&scheduler, unit, &[5u8; 5000]).await;
        scheduler.set_service_model(model(1000, 0.0)).unwrap();
        let in_service = {
            let scheduler = Arc::clone(&scheduler);
            tokio::spawn(async move {
                scheduler.read_many(ClassId::DEFAULT, vec![(unit, 0, 1000), (unit, 1000, 1000)]).await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let waiting = tokio::time::timeout(
            Duration::from_millis(30),
            scheduler.read_many(ClassId::DEFAULT, vec![(unit, 0, 4000)]),
        )
        .await;
        assert!(waiting.is_err(), "the second merged read still waits when dropped");
        assert_eq!(scheduler.queue_snapshot().queued_bytes, 0);
        assert_eq!(scheduler.queue_snapshot().in_service_bytes, 2000, "one task of both ranges' bytes");
        in_service.abort();
        let _ = in_service.await;
        let dropped_at = Instant::now();
        // Bounded by the deadline: the worker abandons the task once it sees the reply closed.
        while scheduler.queue_snapshot().in_service_tasks > 0 {
            assert!(dropped_at.elapsed() < Duration::from_millis(500), "the 1 s service was not cut short");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(scheduler.counters().tasks_cancelled.load(Ordering::Relaxed), 2);
        assert_eq!(scheduler.counters().bytes_read.load(Ordering::Relaxed), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reserved_class_doing_real_io_is_paced_to_its_share() {
        let dir = tempfile::tempdir().unwrap();
        let scheduler = scheduler(dir.path(), ServiceModel::default());
        let _workers = scheduler.spawn_workers(1);
        let unit = UnitId::new(10, 0);
        put(&scheduler, unit, &vec![3u8; 100_000]).await;
        // No emulated rate: a task takes 1 ms plus its real I/O, and the node measures its rate.
        scheduler.set_service_model(model(1, 0.0)).unwrap();
        let unpaced_began = Instant::now();
        for _ in 0..6 {
            scheduler.read(ClassId::DEFAULT, unit, 0, 100_000).await.unwrap();
        }
        let unpaced = unpaced_began.elapsed();
        let (measured_bytes_per_s, _) = scheduler.estimated_rate();
        assert!(measured_bytes_per_s > 0.0);
        scheduler.set_class_scheduling(ClassScheduling::Reserved { shares: vec![0.1] }).unwrap();
        let began = Instant::now();
        for _ in 0..6 {
            let (_, timing) = scheduler.read(ClassId::DEFAULT, unit, 0, 100_000).await.unwrap();
            assert_eq!(timing.emulated_service_ns, 1_000_000, "no rate to scale: the overhead only");
        }
        let paced = began.elapsed();
        // At a tenth of the measured rate, less the one burst a full bucket allows.
        let expected_s =
            (600_000.0 - 0.1 * measured_bytes_per_s * crate::pacer::BURST.as_secs_f64()) / (0.1 * measured_bytes_per_s);
        assert!(paced.as_secs_f64() > 0.8 * expected_s, "{paced:?} for {expected_s} s (unpaced {unpaced:?})");
        assert!(paced > 3 * unpaced, "{paced:?} against {unpaced:?} unpaced");
        // The pacing is not measured as service: the rate it paces at does not sink with it.
        let (after_bytes_per_s, _) = scheduler.estimated_rate();
        assert!(after_bytes_per_s > 0.5 * measured_bytes_per_s, "{after_bytes_per_s} after {measured_bytes_per_s}");
        let class = &scheduler.counters().classes[0];
        assert_eq!(class.tasks_completed.load(Ordering::Relaxed), 13, "the write and twelve reads");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reserved_classes_are_served_concurrently_at_their_shares() {
        let dir = tempfile::tempdir().unwrap();
        let scheduler = scheduler(dir.path(), ServiceModel::default());
        // One worker: FCFS would serve the two reads one after the other.
        let _workers = scheduler.spawn_workers(1);
        let unit = UnitId::new(11, 0);
        put(&scheduler, unit, &vec![4u8; 100_000]).await;
        scheduler.set_service_model(model(0, 2_000_000.0)).unwrap();
        scheduler.set_class_scheduling(ClassScheduling::Reserved { shares: vec![0.5, 0.25] }).unwrap();
        let began = Instant::now();
        let reads: Vec<_> = (0..2u8)
            .map(|class| {
                let scheduler = Arc::clone(&scheduler);
                tokio::spawn(async move { scheduler.read(ClassId(class), unit, 0, 100_000).await.unwrap().1 })
            })
            .collect();
        let mut timings = Vec::new();
        for read in reads {
            timings.push(read.await.unwrap());
        }
        // 100 kB at 1 MB/s and at 0.5 MB/s, side by side: 100 ms and 200 ms, 200 ms in all.
        assert_eq!((timings[0].class, timings[0].emulated_service_ns), (ClassId(0), 100_000_000));
        assert_eq!((timings[1].class, timings[1].emulated_service_ns), (ClassId(1), 200_000_000));
        assert!(timings[1].start_ns < timings[0].finish_ns, "the classes overlap");
        let elapsed = began.elapsed();
        assert!(elapsed >= Duration::from_millis(200) && elapsed < Duration::from_millis(280), "{elapsed:?}");
        assert!(matches!(scheduler.read(ClassId(2), unit, 0, 1).await, Err(NodeError::InvalidArgument(_))));
    }

    #[tokio::test]
    async fn bad_reads_are_refused_before_queueing() {
        let dir = tempfile::tempdir().unwrap();
        let scheduler = scheduler(dir.path(), ServiceModel::default());
        let _workers = scheduler.spawn_workers(1);
        put(&scheduler, UnitId::new(4, 0), b"abc").await;
        assert!(matches!(scheduler.read(ClassId::DEFAULT, UnitId::new(4, 1), 0, 1).await, Err(NodeError::NotFound(_))));
        assert!(matches!(
            scheduler.read(ClassId::DEFAULT, UnitId::new(4, 0), 2, 2).await,
            Err(NodeError::OutOfRange { .. })
        ));
        assert_eq!(scheduler.counters().tasks_failed.load(Ordering::Relaxed), 0);
    }
}
