//! Executes the node's tasks: admits reads and writes into the FCFS [`TaskQueue`], runs them on a
//! bounded pool of workers in arrival order, applies the service model, generates background load,
//! cancels tasks whose requester went away, and keeps the counters and timings the RPCs report.
//!
//! Owns task execution and its bookkeeping. Must not decide policy (which node, which unit,
//! when to give up are the gateway's), must not touch the file format (the store does) and never
//! reorders tasks: the queue is first come, first served.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::error::{NodeError, UnitId};
use crate::queue::{QueueLimits, QueueSnapshot, QueuedTask, TaskId, TaskQueue};
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
}

/// Monotonic node counters, reported by `Stats`.
#[derive(Debug, Default)]
pub struct Counters {
    /// Bytes served by successful reads.
    pub bytes_read: AtomicU64,
    /// Bytes of committed writes.
    pub bytes_written: AtomicU64,
    /// Reads and writes that finished successfully.
    pub tasks_completed: AtomicU64,
    /// Reads and writes cancelled (waiting or in service).
    pub tasks_cancelled: AtomicU64,
    /// Reads and writes refused by a full queue.
    pub tasks_rejected: AtomicU64,
    /// Reads and writes that failed (including checksum failures).
    pub tasks_failed: AtomicU64,
    /// Background tasks served.
    pub background_tasks: AtomicU64,
    /// Bytes of background tasks served.
    pub background_bytes: AtomicU64,
    /// Background arrivals dropped because the queue was full.
    pub background_dropped: AtomicU64,
}

type Reply<T> = oneshot::Sender<(Result<T, NodeError>, TaskTiming)>;

/// What a queued task does.
#[derive(Debug)]
enum Work {
    Read { unit: UnitId, offset: u64, length: u64, reply: Reply<Bytes> },
    Write { write: UnitWrite, reply: Reply<()> },
    Background,
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
}

/// Locks `mutex`, recovering it from a thread that panicked while holding it: every structure the
/// node guards stays consistent between statements, so its last state is usable.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
            model: Mutex::new(ModelState::new(model)),
            model_version,
            counters: Counters::default(),
            recent: Mutex::new(VecDeque::with_capacity(RECENT_TASKS)),
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

    /// The service model in force.
    pub fn service_model(&self) -> ServiceModel {
        lock(&self.model).model().clone()
    }

    /// Replaces the service model (validated first; a bad one changes nothing). Tasks that start
    /// from now on use it; the background generator picks it up at once.
    pub fn set_service_model(&self, model: ServiceModel) -> Result<ServiceModel, NodeError> {
        model.validate()?;
        *lock(&self.model) = ModelState::new(model.clone());
        self.model_version.send_modify(|version| *version += 1);
        tracing::info!(node = self.node_id, ?model, "service model set");
        Ok(model)
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
        let recent = lock(&self.recent);
        let (bytes, ns) = recent.iter().fold((0u64, 0u64), |(b, t), (bytes, ns)| (b + bytes, t + ns));
        if ns == 0 { (0.0, 0) } else { (bytes as f64 * 1e9 / ns as f64, 0) }
    }

    fn publish_queue_gauges(&self) {
        let snapshot = self.queue.snapshot();
        let node = self.node_label.clone();
        metrics::gauge!("lowtail_node_queued_bytes", "node" => node.clone()).set(snapshot.queued_bytes as f64);
        metrics::gauge!("lowtail_node_queued_tasks", "node" => node.clone()).set(snapshot.queued_tasks as f64);
        metrics::gauge!("lowtail_node_in_service_bytes", "node" => node.clone()).set(snapshot.in_service_bytes as f64);
        metrics::gauge!("lowtail_node_in_service_tasks", "node" => node).set(snapshot.in_service_tasks as f64);
    }

    fn admit(&self, bytes: u64, work: Work) -> Result<TaskId, NodeError> {
        let result = self.queue.push(bytes, self.now_ns(), work);
        if matches!(result, Err(NodeError::QueueFull { .. })) {
            self.counters.tasks_rejected.fetch_add(1, Ordering::Relaxed);
        }
        self.publish_queue_gauges();
        result
    }

    /// Reads `length` bytes at `offset` of `unit` through the queue. Unknown units and bad ranges
    /// are refused before queueing. Dropping the returned future cancels the task: removed from the
    /// queue if it still waits, abandoned (its emulated time cut short) if it is being served.
    pub async fn read(&self, unit: UnitId, offset: u64, length: u64) -> Result<(Bytes, TaskTiming), NodeError> {
        let unit_len = self.store.unit_len(unit).ok_or(NodeError::NotFound(unit))?;
        if offset.checked_add(length).is_none_or(|end| end > unit_len) {
            return Err(NodeError::OutOfRange { unit, offset, length, unit_len });
        }
        let (reply, done) = oneshot::channel();
        let id = self.admit(length, Work::Read { unit, offset, length, reply })?;
        let (result, timing) = self.await_task(id, done).await?;
        result.map(|bytes| (bytes, timing))
    }

    /// Commits a fully received unit through the queue; returns once it is durable. Dropping the
    /// future while the task waits cancels it (a staged file is removed, an image never reaches the
    /// disk); once a worker has begun the commit it completes.
    pub async fn write(&self, write: UnitWrite) -> Result<TaskTiming, NodeError> {
        let bytes = write.data_len();
        let (reply, done) = oneshot::channel();
        let id = self.admit(bytes, Work::Write { write, reply })?;
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

    /// Starts `workers` FCFS workers; they run until [`Scheduler::close`] and the queue drains.
    pub fn spawn_workers(self: &Arc<Self>, workers: usize) -> Vec<JoinHandle<()>> {
        assert!(workers > 0, "a node needs at least one worker");
        (0..workers)
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
        self.publish_queue_gauges();
        let QueuedTask { id, bytes, enqueue_ns, bytes_ahead, work } = task;
        let start_ns = self.now_ns();
        let (service_time, replace_real_io) = {
            let mut model = lock(&self.model);
            let replace = model.model().replace_real_io;
            (model.sample_service_time(bytes), replace)
        };
        let mut timing = TaskTiming {
            node_id: self.node_id,
            task_id: id,
            enqueue_ns,
            start_ns,
            finish_ns: 0,
            bytes,
            outcome: TaskOutcome::Ok,
            bytes_ahead,
            emulated_service_ns: service_time.map_or(0, |t| t.as_nanos() as u64),
        };
        let kind = match work {
            Work::Background => {
                tokio::time::sleep(service_time.unwrap_or_default()).await;
                self.counters.background_tasks.fetch_add(1, Ordering::Relaxed);
                self.counters.background_bytes.fetch_add(bytes, Ordering::Relaxed);
                "background"
            }
            Work::Read { unit, offset, length, mut reply } => {
                let store = Arc::clone(&self.store);
                // A read the page cache holds is served here, on the runtime thread; only one that
                // would wait for the device goes to the blocking pool (two thread hand-offs).
                let io = async move {
                    match store.read_range_cached(unit, offset, length) {
                        Some(result) => result,
                        None => blocking(move || store.read_range(unit, offset, length)).await,
                    }
                };
                let served = tokio::select! {
                    result = emulate(service_time, replace_real_io, io) => Some(result),
                    // The requester went away: stop spending (emulated) disk time on it.
                    () = reply.closed() => None,
                };
                timing.finish_ns = self.now_ns();
                match served {
                    Some(result) => {
                        timing.outcome = self.account(&result, bytes, &timing);
                        if result.is_ok() {
                            self.counters.bytes_read.fetch_add(bytes, Ordering::Relaxed);
                            metrics::counter!("lowtail_node_read_bytes_total", "node" => self.node_label.clone())
                                .increment(bytes);
                        }
                        // The requester may have gone in the meantime; nothing to do then.
                        let _ = reply.send((result, timing));
                    }
                    None => {
                        timing.outcome = TaskOutcome::Cancelled;
                        self.counters.tasks_cancelled.fetch_add(1, Ordering::Relaxed);
                    }
                }
                "read"
            }
            Work::Write { write, reply } => {
                let store = Arc::clone(&self.store);
                let io = blocking(move || store.commit_write(write));
                // A commit that began completes even if the requester left: half a rename is worse.
                let result = emulate(service_time, replace_real_io, io).await;
                timing.finish_ns = self.now_ns();
                timing.outcome = self.account(&result, bytes, &timing);
                if result.is_ok() {
                    self.counters.bytes_written.fetch_add(bytes, Ordering::Relaxed);
                    metrics::counter!("lowtail_node_written_bytes_total", "node" => self.node_label.clone())
                        .increment(bytes);
                }
                let _ = reply.send((result, timing));
                "write"
            }
        };
        if timing.finish_ns == 0 {
            timing.finish_ns = self.now_ns();
        }
        self.queue.finished(bytes);
        self.publish_queue_gauges();
        let outcome = format!("{:?}", timing.outcome).to_lowercase();
        metrics::counter!("lowtail_node_tasks_total", "node" => self.node_label.clone(), "kind" => kind, "outcome" => outcome)
            .increment(1);
        true
    }

    /// Counts a finished client task and returns its outcome.
    fn account<T>(&self, result: &Result<T, NodeError>, bytes: u64, timing: &TaskTiming) -> TaskOutcome {
        match result {
            Ok(_) => {
                self.counters.tasks_completed.fetch_add(1, Ordering::Relaxed);
                let mut recent = lock(&self.recent);
                if recent.len() == RECENT_TASKS {
                    recent.pop_front();
                }
                recent.push_back((bytes, timing.finish_ns.saturating_sub(timing.start_ns)));
                TaskOutcome::Ok
            }
            Err(error) => {
                self.counters.tasks_failed.fetch_add(1, Ordering::Relaxed);
                if let NodeError::Corrupt { .. } = error { TaskOutcome::Corrupt } else { TaskOutcome::Failed }
            }
        }
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
                match scheduler.queue.push(bytes, scheduler.now_ns(), Work::Background) {
                    Ok(_) => scheduler.publish_queue_gauges(),
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
/// max(real, emulated); otherwise emulated + real.
async fn emulate<T>(service_time: Option<Duration>, replace_real_io: bool, io: impl Future<Output = T>) -> T {
    match service_time {
        None => io.await,
        Some(service_time) if replace_real_io => {
            let deadline = tokio::time::Instant::now() + service_time;
            let output = io.await;
            tokio::time::sleep_until(deadline).await;
            output
        }
        Some(service_time) => {
            tokio::time::sleep(service_time).await;
            io.await
        }
    }
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
            self.scheduler.publish_queue_gauges();
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
        scheduler.write(UnitWrite::Image(UnitImage::with_data(unit, data))).await.unwrap()
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
        let (bytes, timing) = scheduler.read(unit, 0, 200_000).await.unwrap();
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
                    let (_, timing) = scheduler.read(unit, 0, 1000 * (i + 1)).await.unwrap();
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
            tokio::spawn(async move { scheduler.read(unit, 0, 1000).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let second = tokio::time::timeout(Duration::from_millis(30), scheduler.read(unit, 0, 4000)).await;
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
            tokio::spawn(async move { scheduler.read(unit, 0, 5).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let store = Arc::clone(scheduler.store());
        let mut staged = store.begin_write(UnitId::new(5, 1), 3).unwrap();
        staged.append(b"abc").unwrap();
        let writes = [UnitWrite::Staged(staged), UnitWrite::Image(UnitImage::with_data(UnitId::new(5, 2), b"xyz"))];
        for write in writes {
            assert!(tokio::time::timeout(Duration::from_millis(30), scheduler.write(write)).await.is_err());
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

    #[tokio::test]
    async fn bad_reads_are_refused_before_queueing() {
        let dir = tempfile::tempdir().unwrap();
        let scheduler = scheduler(dir.path(), ServiceModel::default());
        let _workers = scheduler.spawn_workers(1);
        put(&scheduler, UnitId::new(4, 0), b"abc").await;
        assert!(matches!(scheduler.read(UnitId::new(4, 1), 0, 1).await, Err(NodeError::NotFound(_))));
        assert!(matches!(scheduler.read(UnitId::new(4, 0), 2, 2).await, Err(NodeError::OutOfRange { .. })));
        assert_eq!(scheduler.counters().tasks_failed.load(Ordering::Relaxed), 0);
    }
}
