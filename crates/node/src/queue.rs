//! The node's task queue, measured in bytes as the papers measure load: one lane per latency
//! class and one for background load, and the discipline that picks the lane a free server takes
//! from next.
//!
//! Owns arrival order within each lane, the choice among lanes ([`ClassScheduling`]: one arrival
//! order across all, deficit round robin in bytes, or one FCFS server per class), how many tasks
//! may be in service at once, the byte and task accounting (whole and per class), admission
//! limits and removal of cancelled waiting tasks. Must not execute tasks, sleep or know what a
//! task does (the scheduler does, and applies a reserved class's share); it is generic over the
//! task payload so its accounting and disciplines can be tested alone.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::classes::{ClassId, ClassQueueState, ClassScheduling, MAX_CLASSES};
use crate::error::NodeError;

/// Identifies one task for the lifetime of the node (never reused). Ids grow with arrival, so
/// comparing two lanes' heads by id compares their arrival.
pub type TaskId = u64;

/// Where a task waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// A client task of this class.
    Class(ClassId),
    /// Emulated background load (other tenants of the disk): outside the classes, served in
    /// arrival order against the oldest waiting task whatever the discipline, and under
    /// [`ClassScheduling::Reserved`] by a server of its own at the node's full rate.
    Background,
}

/// Index of the background lane, after the classes'.
const BACKGROUND: usize = MAX_CLASSES;
/// Number of lanes: one per class, then the background lane. Also the most tasks
/// [`ClassScheduling::Reserved`] serves at once (one per lane).
pub const LANES: usize = MAX_CLASSES + 1;

impl Lane {
    fn index(self) -> usize {
        match self {
            Self::Class(class) => {
                assert!(class.index() < MAX_CLASSES, "a lane's class is checked on entry");
                class.index()
            }
            Self::Background => BACKGROUND,
        }
    }
}

/// Admission limits of the queue: a task that would push the waiting tasks past either is
/// refused with [`NodeError::QueueFull`]. They are global: classes share them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueLimits {
    /// Maximum bytes waiting (tasks in service do not count).
    pub max_queued_bytes: u64,
    /// Maximum tasks waiting.
    pub max_queued_tasks: u64,
}

/// A task waiting in (or just taken from) the queue.
#[derive(Debug)]
pub struct QueuedTask<W> {
    /// The task's id.
    pub id: TaskId,
    /// Its class's lane, or the background lane.
    pub lane: Lane,
    /// Bytes the task reads or writes; its weight in the queue.
    pub bytes: u64,
    /// When it entered the queue (node clock, ns).
    pub enqueue_ns: u64,
    /// Bytes waiting or in service ahead of it when it entered (in every lane).
    pub bytes_ahead: u64,
    /// Set when taken under [`ClassScheduling::Reserved`]: the fraction of the node's rate its
    /// class's server runs at. `None` otherwise (the node's full rate).
    pub share: Option<f64>,
    /// What to do.
    pub work: W,
}

/// Queue state at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueSnapshot {
    /// Bytes of waiting tasks.
    pub queued_bytes: u64,
    /// Waiting tasks.
    pub queued_tasks: u64,
    /// Bytes of tasks being served.
    pub in_service_bytes: u64,
    /// Tasks being served.
    pub in_service_tasks: u64,
}

impl QueueSnapshot {
    fn enter(&mut self, bytes: u64) {
        self.queued_bytes += bytes;
        self.queued_tasks += 1;
    }

    fn leave(&mut self, bytes: u64) {
        assert!(self.queued_tasks > 0 && self.queued_bytes >= bytes, "a task leaves a queue it is in");
        self.queued_bytes -= bytes;
        self.queued_tasks -= 1;
    }

    fn start(&mut self, bytes: u64) {
        self.leave(bytes);
        self.in_service_bytes += bytes;
        self.in_service_tasks += 1;
    }

    fn finish(&mut self, bytes: u64) {
        assert!(self.in_service_tasks > 0, "finished() without a task in service");
        assert!(self.in_service_bytes >= bytes, "finished() with more bytes than in service");
        self.in_service_tasks -= 1;
        self.in_service_bytes -= bytes;
    }
}

#[derive(Debug)]
struct LaneState<W> {
    waiting: VecDeque<QueuedTask<W>>,
    counts: QueueSnapshot,
    /// Whether a task ever entered: probes and stats list such classes.
    seen: bool,
}

/// Deficit round robin state of [`ClassScheduling::WeightedSharing`] (Shreedhar & Varghese).
#[derive(Debug, Default)]
struct RoundRobin {
    /// Backlogged classes of positive weight, the one being visited first.
    ring: VecDeque<usize>,
    /// Bytes each class may still be served in its current visit.
    deficit_bytes: [f64; MAX_CLASSES],
    /// Whether the front class has had its quantum for this visit.
    front_credited: bool,
}

#[derive(Debug)]
struct State<W> {
    lanes: [LaneState<W>; LANES],
    counts: QueueSnapshot,
    next_id: TaskId,
    closed: bool,
    discipline: ClassScheduling,
    /// Most tasks in service at once under the shared disciplines (the node's `workers`).
    servers: usize,
    round_robin: RoundRobin,
}

impl<W> State<W> {
    fn head_id(&self, lane: usize) -> Option<TaskId> {
        self.lanes[lane].waiting.front().map(|task| task.id)
    }

    /// The lane, among those `eligible` accepts, whose head arrived first.
    fn oldest(&self, eligible: impl Fn(usize) -> bool) -> Option<usize> {
        (0..LANES)
            .filter(|&lane| eligible(lane))
            .filter_map(|lane| self.head_id(lane).map(|id| (id, lane)))
            .min()
            .map(|(_, lane)| lane)
    }

    /// The lane a free server takes from now, if any may start.
    fn select(&mut self) -> Option<usize> {
        let shared_servers_busy = self.counts.in_service_tasks >= self.servers as u64;
        match self.discipline {
            ClassScheduling::Fcfs => {
                if shared_servers_busy {
                    return None;
                }
                self.oldest(|_| true)
            }
            ClassScheduling::WeightedSharing { .. } => {
                if shared_servers_busy {
                    return None;
                }
                let oldest = self.oldest(|_| true)?;
                if oldest == BACKGROUND {
                    return Some(BACKGROUND);
                }
                // With no weighted class waiting, what is left (background, or tasks of a class
                // that lost its weight in a switch after they were queued) goes in arrival order.
                self.round_robin_pick().or(Some(oldest))
            }
            ClassScheduling::Reserved { .. } => {
                let reserved = |lane: usize| lane < MAX_CLASSES && self.discipline.weight(ClassId(lane as u8)) > 0.0;
                let active = |lane: usize| {
                    let counts = &self.lanes[lane].counts;
                    counts.queued_tasks + counts.in_service_tasks > 0
                };
                // Tasks of a class that lost its share in a switch after they were queued run only
                // while every reserved class is idle, so no reservation is touched.
                let reservations_idle = !(0..MAX_CLASSES).any(|lane| reserved(lane) && active(lane));
                // Each class is its own server: one task at a time per lane, lanes concurrently.
                self.oldest(|lane| {
                    self.lanes[lane].counts.in_service_tasks == 0
                        && (lane == BACKGROUND || reserved(lane) || reservations_idle)
                })
            }
        }
    }

    /// Deficit round robin among the backlogged classes of positive weight: the front class is
    /// credited its quantum once per visit and serves heads while its deficit covers them, then
    /// the next class's turn comes. Quanta are in proportion to the weights, scaled so the
    /// heaviest class's covers the largest head waiting: some class serves within one turn of
    /// the ring.
    fn round_robin_pick(&mut self) -> Option<usize> {
        let State { lanes, discipline, round_robin, .. } = self;
        let weight = |lane: usize| discipline.weight(ClassId(lane as u8));
        // Bounded by the number of classes.
        for (lane, state) in lanes.iter().enumerate().take(MAX_CLASSES) {
            if weight(lane) > 0.0 && !state.waiting.is_empty() && !round_robin.ring.contains(&lane) {
                round_robin.ring.push_back(lane);
            }
        }
        let head_bytes = |lane: usize| lanes[lane].waiting.front().expect("the ring holds backlogged classes").bytes;
        let weight_max = round_robin.ring.iter().map(|&lane| weight(lane)).fold(0.0, f64::max);
        let quantum_max_bytes = round_robin.ring.iter().map(|&lane| head_bytes(lane)).max()?.max(1) as f64;
        assert!(weight_max > 0.0, "only classes of positive weight join the ring");
        // Bounded: the heaviest class is credited quantum_max_bytes, enough for its head, within
        // one turn of the ring (the front may have spent its credit already: one more visit).
        for _ in 0..=round_robin.ring.len() {
            let lane = round_robin.ring[0];
            if !round_robin.front_credited {
                round_robin.deficit_bytes[lane] += weight(lane) / weight_max * quantum_max_bytes;
                round_robin.front_credited = true;
            }
            let head = head_bytes(lane) as f64;
            if head <= round_robin.deficit_bytes[lane] {
                round_robin.deficit_bytes[lane] -= head;
                return Some(lane);
            }
            round_robin.ring.rotate_left(1);
            round_robin.front_credited = false;
        }
        panic!("deficit round robin served nobody in a whole turn: the heaviest class's quantum covers every head");
    }

    /// A lane ran out of waiting tasks: as in DRR, it leaves the ring and loses its deficit (an
    /// idle class saves no credit for later).
    fn lane_emptied(&mut self, lane: usize) {
        assert!(self.lanes[lane].waiting.is_empty(), "only an empty lane leaves the ring");
        if lane == BACKGROUND {
            return;
        }
        let round_robin = &mut self.round_robin;
        if round_robin.ring.front() == Some(&lane) {
            round_robin.front_credited = false;
        }
        round_robin.ring.retain(|&other| other != lane);
        round_robin.deficit_bytes[lane] = 0.0;
    }

    fn class_state(&self, lane: usize) -> ClassQueueState {
        let counts = self.lanes[lane].counts;
        ClassQueueState {
            class: ClassId(lane as u8),
            queued_bytes: counts.queued_bytes,
            queued_tasks: counts.queued_tasks,
            in_service_bytes: counts.in_service_bytes,
            in_service_tasks: counts.in_service_tasks,
        }
    }
}

/// Lanes of tasks with byte accounting and a class discipline. Workers take tasks with
/// [`TaskQueue::pop`] and report completion with [`TaskQueue::finished`].
#[derive(Debug)]
pub struct TaskQueue<W> {
    state: Mutex<State<W>>,
    /// Woken when a task may start: one arrived, a server freed, the discipline changed.
    available: Notify,
    limits: QueueLimits,
}

impl<W> TaskQueue<W> {
    /// An empty FCFS queue with the given limits and one server.
    pub fn new(limits: QueueLimits) -> Self {
        Self {
            state: Mutex::new(State {
                lanes: std::array::from_fn(|_| LaneState {
                    waiting: VecDeque::new(),
                    counts: QueueSnapshot::default(),
                    seen: false,
                }),
                counts: QueueSnapshot::default(),
                next_id: 1,
                closed: false,
                discipline: ClassScheduling::Fcfs,
                servers: 1,
                round_robin: RoundRobin::default(),
            }),
            available: Notify::new(),
            limits,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<W>> {
        crate::lock(&self.state)
    }

    /// The admission limits.
    pub fn limits(&self) -> QueueLimits {
        self.limits
    }

    /// Sets how many tasks may be in service at once under the shared disciplines (FCFS and
    /// weighted sharing); [`ClassScheduling::Reserved`] serves one per lane instead.
    pub fn set_servers(&self, servers: usize) {
        assert!(servers > 0, "a queue needs at least one server");
        self.lock().servers = servers;
        self.available.notify_waiters();
    }

    /// The discipline in force.
    pub fn discipline(&self) -> ClassScheduling {
        self.lock().discipline.clone()
    }

    /// Replaces the discipline (which must be valid). Waiting tasks keep their place in their
    /// lanes; the round robin starts afresh.
    pub fn set_discipline(&self, discipline: ClassScheduling) {
        assert!(discipline.validate().is_ok(), "a discipline is validated before it is installed");
        let mut state = self.lock();
        state.discipline = discipline;
        state.round_robin = RoundRobin::default();
        drop(state);
        // More tasks than one may start at once now (Reserved runs a task per class).
        self.available.notify_waiters();
    }

    /// Whether a task of `class` would be admitted by the discipline in force (the limits aside).
    pub fn admits(&self, class: ClassId) -> Result<(), NodeError> {
        self.lock().discipline.admits(class)
    }

    /// Appends a task at the tail of its lane. Refused when the queue is closed, the discipline
    /// gives its class no weight, or a limit would be exceeded; a refused task changes nothing.
    pub fn push(&self, lane: Lane, bytes: u64, enqueue_ns: u64, work: W) -> Result<TaskId, NodeError> {
        let mut state = self.lock();
        if state.closed {
            return Err(NodeError::ShuttingDown);
        }
        if let Lane::Class(class) = lane {
            state.discipline.admits(class)?;
        }
        let counts = state.counts;
        if counts.queued_tasks + 1 > self.limits.max_queued_tasks
            || counts.queued_bytes.saturating_add(bytes) > self.limits.max_queued_bytes
        {
            return Err(NodeError::QueueFull {
                queued_tasks: counts.queued_tasks,
                queued_bytes: counts.queued_bytes,
                max_queued_tasks: self.limits.max_queued_tasks,
                max_queued_bytes: self.limits.max_queued_bytes,
                task_bytes: bytes,
            });
        }
        let id = state.next_id;
        state.next_id += 1;
        let bytes_ahead = counts.queued_bytes + counts.in_service_bytes;
        let index = lane.index();
        let lane_state = &mut state.lanes[index];
        lane_state.waiting.push_back(QueuedTask { id, lane, bytes, enqueue_ns, bytes_ahead, share: None, work });
        lane_state.counts.enter(bytes);
        lane_state.seen = true;
        state.counts.enter(bytes);
        drop(state);
        self.available.notify_one();
        Ok(id)
    }

    /// Removes a task that is still waiting; `None` when it already started (or never existed).
    pub fn cancel(&self, id: TaskId) -> Option<QueuedTask<W>> {
        let mut state = self.lock();
        // Bounded by the lanes and the tasks waiting (at most max_queued_tasks).
        let (index, position) = (0..LANES).find_map(|index| {
            state.lanes[index].waiting.iter().position(|task| task.id == id).map(|position| (index, position))
        })?;
        let task = state.lanes[index].waiting.remove(position).expect("position is in range");
        state.lanes[index].counts.leave(task.bytes);
        state.counts.leave(task.bytes);
        if state.lanes[index].waiting.is_empty() {
            state.lane_emptied(index);
        }
        drop(state);
        // Under Reserved, tasks of a class that lost its share wait for the reserved classes to
        // be idle, which this may have made them.
        self.available.notify_one();
        Some(task)
    }

    /// Takes the task the discipline picks, moving its bytes from waiting to in service; waits
    /// while none may start. `None` once the queue is closed and empty.
    pub async fn pop(&self) -> Option<QueuedTask<W>> {
        // Bounded by the queue's life: each pass ends with a task, with the end, or in a wait
        // for a push, a finished task or a new discipline.
        loop {
            let notified = self.available.notified();
            tokio::pin!(notified);
            // Register before checking, so a push between the check and the await is not missed.
            notified.as_mut().enable();
            if let Some(task) = self.try_pop() {
                return Some(task);
            }
            let drained = {
                let state = self.lock();
                state.closed && state.counts.queued_tasks == 0
            };
            if drained {
                // Idle workers wait on a busy server while a closed queue drains; whoever sees it
                // empty wakes them all, or they would wait forever.
                self.available.notify_waiters();
                return None;
            }
            notified.await;
        }
    }

    /// Takes the task the discipline picks without waiting; `None` when nothing waits or no
    /// server is free for what waits.
    pub fn try_pop(&self) -> Option<QueuedTask<W>> {
        let mut state = self.lock();
        let index = state.select()?;
        let mut task = state.lanes[index].waiting.pop_front().expect("the discipline picks a lane with a task");
        state.lanes[index].counts.start(task.bytes);
        state.counts.start(task.bytes);
        if state.lanes[index].waiting.is_empty() {
            state.lane_emptied(index);
        }
        task.share = match task.lane {
            Lane::Class(class) => state.discipline.reserved_share(class),
            Lane::Background => None,
        };
        Some(task)
    }

    /// Reports that a task of `lane` taken by [`TaskQueue::pop`] is done (whatever its outcome).
    pub fn finished(&self, lane: Lane, bytes: u64) {
        let mut state = self.lock();
        state.lanes[lane.index()].counts.finish(bytes);
        state.counts.finish(bytes);
        drop(state);
        // A server (or the lane's own, under Reserved) is free: a waiting task may start.
        self.available.notify_one();
    }

    /// Refuses new tasks from now on; workers drain what is waiting, then `pop` returns `None`.
    pub fn close(&self) {
        self.lock().closed = true;
        self.available.notify_waiters();
    }

    /// Current accounting, every lane together.
    pub fn snapshot(&self) -> QueueSnapshot {
        self.lock().counts
    }

    /// Current accounting of `class`.
    pub fn class_state(&self, class: ClassId) -> ClassQueueState {
        self.lock().class_state(Lane::Class(class).index())
    }

    /// Current accounting of every class that has had a task, by class.
    pub fn class_states(&self) -> Vec<ClassQueueState> {
        let state = self.lock();
        (0..MAX_CLASSES).filter(|&lane| state.lanes[lane].seen).map(|lane| state.class_state(lane)).collect()
    }

    /// The classes that have had a task, by class.
    pub fn seen_classes(&self) -> Vec<ClassId> {
        let state = self.lock();
        (0..MAX_CLASSES).filter(|&lane| state.lanes[lane].seen).map(|lane| ClassId(lane as u8)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service_model::ServiceModel;

    const CLASS_0: Lane = Lane::Class(ClassId(0));
    const CLASS_1: Lane = Lane::Class(ClassId(1));

    fn queue(max_bytes: u64, max_tasks: u64) -> TaskQueue<&'static str> {
        TaskQueue::new(QueueLimits { max_queued_bytes: max_bytes, max_queued_tasks: max_tasks })
    }

    fn roomy<W>() -> TaskQueue<W> {
        TaskQueue::new(QueueLimits { max_queued_bytes: u64::MAX, max_queued_tasks: 1 << 20 })
    }

    #[test]
    fn fcfs_order_and_exact_accounting() {
        let q = queue(1 << 20, 100);
        let a = q.push(CLASS_0, 100, 1, "a").unwrap();
        let b = q.push(CLASS_0, 200, 2, "b").unwrap();
        let c = q.push(CLASS_0, 300, 3, "c").unwrap();
        assert!(a < b && b < c);
        assert_eq!(q.snapshot(), QueueSnapshot { queued_bytes: 600, queued_tasks: 3, ..Default::default() });
        let first = q.try_pop().unwrap();
        assert_eq!((first.work, first.bytes_ahead, first.share), ("a", 0, None));
        assert_eq!(
            q.snapshot(),
            QueueSnapshot { queued_bytes: 500, queued_tasks: 2, in_service_bytes: 100, in_service_tasks: 1 }
        );
        assert!(q.try_pop().is_none(), "one server, busy");
        let d = q.push(CLASS_0, 50, 4, "d").unwrap();
        assert_eq!(q.cancel(d).unwrap().bytes_ahead, 600, "500 waiting + 100 in service ahead of d");
        q.finished(CLASS_0, 100);
        assert_eq!(q.try_pop().unwrap().work, "b");
        q.set_servers(2);
        assert_eq!(q.try_pop().unwrap().work, "c");
        assert!(q.try_pop().is_none());
        q.finished(CLASS_0, 200);
        q.finished(CLASS_0, 300);
        assert_eq!(q.snapshot(), QueueSnapshot::default());
    }

    #[test]
    fn fcfs_serves_every_class_and_background_in_one_arrival_order() {
        let q = queue(1 << 20, 100);
        q.set_servers(100);
        let lanes = [CLASS_1, CLASS_0, Lane::Background, Lane::Class(ClassId(7)), CLASS_0, CLASS_1];
        let ids: Vec<_> =
            lanes.iter().enumerate().map(|(i, &lane)| q.push(lane, 1000 - i as u64, 0, "t").unwrap()).collect();
        let order: Vec<_> = std::iter::from_fn(|| q.try_pop().map(|task| task.id)).collect();
        assert_eq!(order, ids, "the classes change nothing under FCFS");
        let classes: Vec<_> = q.class_states().iter().map(|state| (state.class.0, state.in_service_tasks)).collect();
        assert_eq!(classes, vec![(0, 2), (1, 2), (7, 1)], "classes seen, background not among them");
    }

    #[test]
    fn cancelling_a_waiting_task_removes_its_bytes() {
        let q = queue(1 << 20, 100);
        let ids: Vec<_> = (0..5).map(|i| q.push(CLASS_0, 10 * (i + 1), i, "t").unwrap()).collect();
        assert_eq!(q.cancel(ids[2]).unwrap().bytes, 30);
        assert!(q.cancel(ids[2]).is_none(), "second cancel finds nothing");
        assert_eq!(q.snapshot().queued_bytes, 150 - 30);
        assert_eq!(q.snapshot().queued_tasks, 4);
        assert_eq!(q.class_state(ClassId(0)).queued_bytes, 120);
        q.set_servers(10);
        let started = q.try_pop().unwrap();
        assert!(q.cancel(started.id).is_none(), "a started task is not in the queue");
        let order: Vec<u64> = std::iter::from_fn(|| q.try_pop().map(|t| t.bytes)).collect();
        assert_eq!(order, vec![20, 40, 50]);
    }

    #[test]
    fn limits_refuse_and_change_nothing() {
        let q = queue(100, 2);
        q.push(CLASS_0, 60, 0, "a").unwrap();
        let err = q.push(CLASS_1, 41, 0, "b").unwrap_err();
        assert!(matches!(err, NodeError::QueueFull { queued_bytes: 60, task_bytes: 41, .. }), "{err}");
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
        q.push(CLASS_1, 40, 0, "b").unwrap();
        assert!(matches!(q.push(CLASS_0, 0, 0, "c"), Err(NodeError::QueueFull { queued_tasks: 2, .. })));
        assert_eq!(q.snapshot().queued_bytes, 100);
        // Tasks in service do not count against the limits, which every class shares.
        q.try_pop().unwrap();
        q.push(CLASS_1, 60, 0, "c").unwrap();
    }

    #[test]
    fn a_class_without_weight_is_refused_and_changes_nothing() {
        let q = queue(1 << 20, 100);
        q.set_discipline(ClassScheduling::Reserved { shares: vec![0.7, 0.3] });
        for class in [2, 7, 8, 200] {
            let refused = q.push(Lane::Class(ClassId(class)), 10, 0, "x").unwrap_err();
            assert_eq!(refused.code(), tonic::Code::InvalidArgument, "class {class}: {refused}");
        }
        assert_eq!(q.snapshot(), QueueSnapshot::default());
        assert!(q.class_states().is_empty(), "no class had a task");
        assert_eq!(q.push(CLASS_1, 10, 0, "y").unwrap(), 1, "refusals took no task id");
    }

    #[tokio::test]
    async fn pop_waits_for_push_and_ends_after_close() {
        let q = std::sync::Arc::new(queue(100, 10));
        let waiter = {
            let q = q.clone();
            tokio::spawn(async move { q.pop().await.map(|t| t.work) })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        q.push(CLASS_0, 1, 0, "x").unwrap();
        assert_eq!(waiter.await.unwrap(), Some("x"));
        q.finished(CLASS_0, 1);
        q.push(CLASS_0, 1, 0, "y").unwrap();
        q.close();
        assert!(matches!(q.push(CLASS_0, 1, 0, "z"), Err(NodeError::ShuttingDown)));
        assert_eq!(q.pop().await.map(|t| t.work), Some("y"), "closing drains what waits");
        q.finished(CLASS_0, 1);
        assert!(q.pop().await.is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_idle_worker_ends_once_a_closed_queue_drains() {
        let q = std::sync::Arc::new(queue(100, 10));
        // More workers than servers, as the scheduler runs them (Reserved needs one per lane).
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move {
                    let mut served = 0;
                    // Bounded by the tasks pushed below.
                    while let Some(task) = q.pop().await {
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                        q.finished(task.lane, task.bytes);
                        served += 1;
                    }
                    served
                })
            })
            .collect();
        for _ in 0..5 {
            q.push(CLASS_0, 1, 0, "t").unwrap();
        }
        q.close();
        let mut served = 0;
        for worker in workers {
            let ended = tokio::time::timeout(std::time::Duration::from_secs(5), worker).await;
            served += ended.expect("a worker hung").unwrap();
        }
        assert_eq!(served, 5);
    }

    #[tokio::test]
    async fn a_pop_blocked_by_a_busy_server_wakes_when_it_is_free() {
        let q = std::sync::Arc::new(queue(100, 10));
        q.push(CLASS_0, 1, 0, "first").unwrap();
        q.push(CLASS_0, 1, 0, "second").unwrap();
        assert_eq!(q.pop().await.unwrap().work, "first");
        let waiter = {
            let q = q.clone();
            tokio::spawn(async move { q.pop().await.map(|t| t.work) })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "the one server is busy");
        q.finished(CLASS_0, 1);
        assert_eq!(waiter.await.unwrap(), Some("second"));
    }

    /// Serves `pops` tasks one at a time from two always-backlogged classes of `sizes` bytes each
    /// (after each pop, the class popped gets a new task); the bytes each class was served.
    fn serve_backlogged(q: &TaskQueue<()>, sizes: [u64; 2], pops: usize) -> [u64; 2] {
        let lanes = [CLASS_0, CLASS_1];
        for (lane, bytes) in lanes.iter().zip(sizes) {
            for _ in 0..4 {
                q.push(*lane, bytes, 0, ()).unwrap();
            }
        }
        let mut served = [0u64; 2];
        for _ in 0..pops {
            let task = q.try_pop().expect("work-conserving: a backlogged queue always gives a task");
            let class = match task.lane {
                Lane::Class(class) => class.index(),
                Lane::Background => unreachable!(),
            };
            served[class] += task.bytes;
            q.finished(task.lane, task.bytes);
            q.push(task.lane, task.bytes, 0, ()).unwrap();
        }
        served
    }

    #[test]
    fn weighted_sharing_divides_the_bytes_by_weight() {
        // Task sizes unlike each other and not multiples: DRR must count bytes, not tasks.
        for (weights, sizes) in
            [([2.0, 1.0], [65_536, 200_000]), ([1.0, 3.0], [300_000, 40_000]), ([1.0, 0.4], [1 << 20, 1 << 20])]
        {
            let q = roomy();
            q.set_discipline(ClassScheduling::WeightedSharing { weights: weights.to_vec() });
            let served = serve_backlogged(&q, sizes, 4000);
            let ratio = served[0] as f64 / served[1] as f64;
            let expected = weights[0] / weights[1];
            assert!((ratio / expected - 1.0).abs() < 0.03, "weights {weights:?}, sizes {sizes:?}: ratio {ratio}");
        }
    }

    #[test]
    fn fcfs_does_not_divide_by_weight() {
        // The control of the test above: the same load under FCFS gives each class its arrivals.
        let q = roomy();
        let served = serve_backlogged(&q, [65_536, 200_000], 4000);
        let ratio = served[0] as f64 / served[1] as f64;
        assert!((ratio - 65_536.0 / 200_000.0).abs() < 0.01, "one task each in turn: {ratio}");
    }

    #[test]
    fn an_idle_class_share_is_lent_to_the_others() {
        let q: TaskQueue<()> = roomy();
        q.set_discipline(ClassScheduling::WeightedSharing { weights: vec![3.0, 1.0] });
        // Only class 1 (weight 1 of 4) has work: it gets every turn, nothing idles.
        for _ in 0..10 {
            q.push(CLASS_1, 1000, 0, ()).unwrap();
        }
        for _ in 0..10 {
            let task = q.try_pop().expect("class 1 is served while class 0 is idle");
            assert_eq!(task.lane, CLASS_1);
            q.finished(task.lane, task.bytes);
        }
        assert!(q.try_pop().is_none());
        // Class 0 arrives: from then on the two share 3 : 1.
        let served = serve_backlogged(&q, [1000, 1000], 4000);
        let ratio = served[0] as f64 / served[1] as f64;
        assert!((ratio - 3.0).abs() < 0.05, "{ratio}");
    }

    #[test]
    fn weighted_sharing_respects_the_servers_and_background_goes_by_arrival() {
        let q = queue(1 << 20, 100);
        q.set_discipline(ClassScheduling::WeightedSharing { weights: vec![1.0, 1.0] });
        q.push(Lane::Background, 10, 0, "background").unwrap();
        q.push(CLASS_1, 10, 0, "one").unwrap();
        q.push(CLASS_0, 10, 0, "zero").unwrap();
        assert_eq!(q.try_pop().unwrap().work, "background", "the oldest task");
        assert!(q.try_pop().is_none(), "one server");
        q.finished(Lane::Background, 10);
        let next = q.try_pop().unwrap();
        assert!(matches!(next.work, "zero" | "one"));
    }

    /// A discrete-event run of a queue whose every class in `lanes` always has work: each task
    /// takes the emulated service time of `model` at its share (`started` → `finished` after it),
    /// servers taking whatever the queue gives. Per class: (tasks, total service s, bytes) after
    /// `duration_s` of simulated time, and the most tasks of one class in service at once.
    fn simulate(
        q: &TaskQueue<()>,
        model: &ServiceModel,
        lanes: &[(Lane, u64)],
        duration_s: f64,
    ) -> (Vec<(u64, f64, u64)>, u64) {
        let mut state = crate::service_model::ModelState::new(model.clone());
        for &(lane, bytes) in lanes {
            for _ in 0..3 {
                q.push(lane, bytes, 0, ()).unwrap();
            }
        }
        let mut served = vec![(0u64, 0.0f64, 0u64); lanes.len()];
        // (finish, start, class index, lane, bytes) of each task in service.
        let mut in_service: Vec<(f64, f64, usize, Lane, u64)> = Vec::new();
        let mut most_of_one_class = 0;
        let mut now_s = 0.0;
        // Bounded: every pass finishes a task, and each takes a positive time.
        while now_s < duration_s {
            while let Some(task) = q.try_pop() {
                let index = lanes.iter().position(|&(lane, _)| lane == task.lane).expect("a simulated lane");
                let service_s =
                    state.sample_service_time_at_share(task.bytes, task.share.unwrap_or(1.0)).unwrap().as_secs_f64();
                assert!(service_s > 0.0);
                in_service.push((now_s + service_s, now_s, index, task.lane, task.bytes));
                let same = in_service.iter().filter(|(_, _, other, _, _)| *other == index).count();
                most_of_one_class = most_of_one_class.max(same as u64);
                // Saturated: the class's backlog never runs dry.
                q.push(task.lane, task.bytes, 0, ()).unwrap();
            }
            in_service.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (finish_s, start_s, index, lane, bytes) = in_service.remove(0);
            now_s = finish_s;
            q.finished(lane, bytes);
            served[index].0 += 1;
            served[index].1 += finish_s - start_s;
            served[index].2 += bytes;
        }
        (served, most_of_one_class)
    }

    fn reserved_model() -> ServiceModel {
        ServiceModel { enabled: true, overhead_us: 200, rate_bytes_per_s: 10e6, ..Default::default() }
    }

    #[test]
    fn reserved_classes_are_servers_at_their_share() {
        let q: TaskQueue<()> = roomy();
        q.set_discipline(ClassScheduling::Reserved { shares: vec![0.6, 0.3] });
        let model = reserved_model();
        let duration_s = 60.0;
        let (served, most_of_one_class) = simulate(&q, &model, &[(CLASS_0, 100_000), (CLASS_1, 100_000)], duration_s);
        assert_eq!(most_of_one_class, 1, "each class is ONE server: its tasks run one at a time");
        // 0.2 ms + 100 kB / (share × 10 MB/s): 16.9 ms and 33.5 ms.
        let mean_service_s: Vec<f64> = served.iter().map(|&(tasks, total_s, _)| total_s / tasks as f64).collect();
        let ratio = mean_service_s[1] / mean_service_s[0];
        assert!((ratio / 2.0 - 1.0).abs() < 0.1, "service times in ratio 2 (shares 0.6 / 0.3): {ratio}");
        for (class, (share, &(_, _, bytes))) in [0.6, 0.3].iter().zip(&served).enumerate() {
            let rate = bytes as f64 / duration_s;
            let reserved = share * model.rate_bytes_per_s;
            assert!(rate <= reserved && rate > 0.95 * reserved, "class {class}: {rate} B/s for {reserved} reserved");
        }
    }

    #[test]
    fn a_lone_reserved_class_gets_no_more_than_its_share() {
        let q: TaskQueue<()> = roomy();
        q.set_discipline(ClassScheduling::Reserved { shares: vec![0.6, 0.3] });
        let model = reserved_model();
        let duration_s = 30.0;
        // Class 0 idle: unused share is not lent.
        let (served, most_of_one_class) = simulate(&q, &model, &[(CLASS_1, 250_000)], duration_s);
        assert_eq!(most_of_one_class, 1);
        let rate = served[0].2 as f64 / duration_s;
        assert!(rate <= 0.3 * model.rate_bytes_per_s, "{rate} B/s is more than its 3 MB/s share");
        assert!(rate > 0.95 * 0.3 * model.rate_bytes_per_s, "{rate} B/s");
        // The control: under weighted sharing the lone class takes the whole node.
        let shared: TaskQueue<()> = roomy();
        shared.set_discipline(ClassScheduling::WeightedSharing { weights: vec![0.6, 0.3] });
        let (served, _) = simulate(&shared, &model, &[(CLASS_1, 250_000)], duration_s);
        let rate = served[0].2 as f64 / duration_s;
        assert!(rate > 0.95 * model.rate_bytes_per_s, "work-conserving: {rate} B/s");
    }

    #[test]
    fn a_switch_keeps_queued_tasks_and_strands_none() {
        let q = queue(1 << 20, 100);
        q.set_servers(1);
        let zero = q.push(CLASS_0, 10, 0, "zero").unwrap();
        let one = q.push(CLASS_1, 10, 0, "one").unwrap();
        let zero_again = q.push(CLASS_0, 10, 0, "zero again").unwrap();
        // Class 1 loses its share after its task was queued: it keeps its place and runs once
        // the reserved class is idle, rather than waiting forever.
        q.set_discipline(ClassScheduling::Reserved { shares: vec![1.0] });
        assert!(q.push(CLASS_1, 10, 0, "refused").is_err());
        let first = q.try_pop().unwrap();
        assert_eq!((first.id, first.share), (zero, Some(1.0)));
        assert!(q.try_pop().is_none(), "class 0's server is busy; class 1 waits for it to be idle");
        q.finished(CLASS_0, 10);
        assert_eq!(q.try_pop().unwrap().id, zero_again);
        q.finished(CLASS_0, 10);
        let stranded = q.try_pop().unwrap();
        assert_eq!((stranded.id, stranded.share), (one, None));
        // Back to FCFS: the one server is taken.
        q.set_discipline(ClassScheduling::Fcfs);
        q.push(CLASS_0, 10, 0, "later").unwrap();
        assert!(q.try_pop().is_none());
    }

    #[test]
    fn reserved_runs_background_beside_the_classes() {
        let q = queue(1 << 20, 100);
        q.set_discipline(ClassScheduling::Reserved { shares: vec![0.5, 0.5] });
        for lane in [Lane::Background, Lane::Background, CLASS_0, CLASS_1, CLASS_0] {
            q.push(lane, 10, 0, "t").unwrap();
        }
        let started: Vec<_> = std::iter::from_fn(|| q.try_pop().map(|task| (task.lane, task.share))).collect();
        assert_eq!(started, vec![(Lane::Background, None), (CLASS_0, Some(0.5)), (CLASS_1, Some(0.5))]);
        assert_eq!(q.snapshot().queued_tasks, 2);
    }
}
