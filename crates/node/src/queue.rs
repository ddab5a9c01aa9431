//! The node's FCFS task queue, measured in bytes as the papers measure load.
//!
//! Owns arrival order, the byte and task accounting of waiting and in-service tasks, admission
//! limits and removal of cancelled waiting tasks. Must not execute tasks, sleep or know what a
//! task does (the scheduler does); it is generic over the task payload so its accounting can be
//! tested alone.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::error::NodeError;

/// Identifies one task for the lifetime of the node (never reused).
pub type TaskId = u64;

/// Admission limits of the queue: a task that would push the waiting tasks past either is
/// refused with [`NodeError::QueueFull`].
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
    /// Bytes the task reads or writes; its weight in the queue.
    pub bytes: u64,
    /// When it entered the queue (node clock, ns).
    pub enqueue_ns: u64,
    /// Bytes waiting or in service ahead of it when it entered.
    pub bytes_ahead: u64,
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

#[derive(Debug)]
struct State<W> {
    waiting: VecDeque<QueuedTask<W>>,
    counts: QueueSnapshot,
    next_id: TaskId,
    closed: bool,
}

/// FIFO of tasks with byte accounting. Workers take tasks with [`TaskQueue::pop`] and report
/// completion with [`TaskQueue::finished`].
#[derive(Debug)]
pub struct TaskQueue<W> {
    state: Mutex<State<W>>,
    available: Notify,
    limits: QueueLimits,
}

impl<W> TaskQueue<W> {
    /// An empty queue with the given limits.
    pub fn new(limits: QueueLimits) -> Self {
        Self {
            state: Mutex::new(State {
                waiting: VecDeque::new(),
                counts: QueueSnapshot::default(),
                next_id: 1,
                closed: false,
            }),
            available: Notify::new(),
            limits,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<W>> {
        crate::scheduler::lock(&self.state)
    }

    /// The admission limits.
    pub fn limits(&self) -> QueueLimits {
        self.limits
    }

    /// Appends a task at the tail. Refused when the queue is closed or a limit would be exceeded;
    /// a refused task changes nothing.
    pub fn push(&self, bytes: u64, enqueue_ns: u64, work: W) -> Result<TaskId, NodeError> {
        let mut state = self.lock();
        if state.closed {
            return Err(NodeError::ShuttingDown);
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
        state.waiting.push_back(QueuedTask { id, bytes, enqueue_ns, bytes_ahead, work });
        state.counts.queued_bytes += bytes;
        state.counts.queued_tasks += 1;
        drop(state);
        self.available.notify_one();
        Ok(id)
    }

    /// Removes a task that is still waiting; `None` when it already started (or never existed).
    pub fn cancel(&self, id: TaskId) -> Option<QueuedTask<W>> {
        let mut state = self.lock();
        let position = state.waiting.iter().position(|task| task.id == id)?;
        let task = state.waiting.remove(position).expect("position is in range");
        state.counts.queued_bytes -= task.bytes;
        state.counts.queued_tasks -= 1;
        Some(task)
    }

    /// Takes the oldest waiting task, moving its bytes from waiting to in service; waits while
    /// the queue is empty. `None` once the queue is closed and empty.
    pub async fn pop(&self) -> Option<QueuedTask<W>> {
        loop {
            let notified = self.available.notified();
            tokio::pin!(notified);
            // Register before checking, so a push between the check and the await is not missed.
            notified.as_mut().enable();
            if let Some(task) = self.try_pop() {
                return Some(task);
            }
            if self.lock().closed {
                return None;
            }
            notified.await;
        }
    }

    /// Takes the oldest waiting task without waiting.
    pub fn try_pop(&self) -> Option<QueuedTask<W>> {
        let mut state = self.lock();
        let task = state.waiting.pop_front()?;
        state.counts.queued_bytes -= task.bytes;
        state.counts.queued_tasks -= 1;
        state.counts.in_service_bytes += task.bytes;
        state.counts.in_service_tasks += 1;
        Some(task)
    }

    /// Reports that a task taken by [`TaskQueue::pop`] is done (whatever its outcome).
    pub fn finished(&self, bytes: u64) {
        let mut state = self.lock();
        assert!(state.counts.in_service_tasks > 0, "finished() without a task in service");
        assert!(state.counts.in_service_bytes >= bytes, "finished() with more bytes than in service");
        state.counts.in_service_tasks -= 1;
        state.counts.in_service_bytes -= bytes;
    }

    /// Refuses new tasks from now on; workers drain what is waiting, then `pop` returns `None`.
    pub fn close(&self) {
        self.lock().closed = true;
        self.available.notify_waiters();
    }

    /// Current accounting.
    pub fn snapshot(&self) -> QueueSnapshot {
        self.lock().counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(max_bytes: u64, max_tasks: u64) -> TaskQueue<&'static str> {
        TaskQueue::new(QueueLimits { max_queued_bytes: max_bytes, max_queued_tasks: max_tasks })
    }

    #[test]
    fn fcfs_order_and_exact_accounting() {
        let q = queue(1 << 20, 100);
        let a = q.push(100, 1, "a").unwrap();
        let b = q.push(200, 2, "b").unwrap();
        let c = q.push(300, 3, "c").unwrap();
        assert!(a < b && b < c);
        assert_eq!(q.snapshot(), QueueSnapshot { queued_bytes: 600, queued_tasks: 3, ..Default::default() });
        let first = q.try_pop().unwrap();
        assert_eq!((first.work, first.bytes_ahead), ("a", 0));
        assert_eq!(
            q.snapshot(),
            QueueSnapshot { queued_bytes: 500, queued_tasks: 2, in_service_bytes: 100, in_service_tasks: 1 }
        );
        let d = q.push(50, 4, "d").unwrap();
        assert_eq!(q.cancel(d).unwrap().bytes_ahead, 600, "500 waiting + 100 in service ahead of d");
        q.finished(100);
        assert_eq!(q.try_pop().unwrap().work, "b");
        assert_eq!(q.try_pop().unwrap().work, "c");
        assert!(q.try_pop().is_none());
        q.finished(200);
        q.finished(300);
        assert_eq!(q.snapshot(), QueueSnapshot::default());
    }

    #[test]
    fn cancelling_a_waiting_task_removes_its_bytes() {
        let q = queue(1 << 20, 100);
        let ids: Vec<_> = (0..5).map(|i| q.push(10 * (i + 1), i, "t").unwrap()).collect();
        assert_eq!(q.cancel(ids[2]).unwrap().bytes, 30);
        assert!(q.cancel(ids[2]).is_none(), "second cancel finds nothing");
        assert_eq!(q.snapshot().queued_bytes, 150 - 30);
        assert_eq!(q.snapshot().queued_tasks, 4);
        let started = q.try_pop().unwrap();
        assert!(q.cancel(started.id).is_none(), "a started task is not in the queue");
        let order: Vec<u64> = std::iter::from_fn(|| q.try_pop().map(|t| t.bytes)).collect();
        assert_eq!(order, vec![20, 40, 50]);
    }

    #[test]
    fn limits_refuse_and_change_nothing() {
        let q = queue(100, 2);
        q.push(60, 0, "a").unwrap();
        let err = q.push(41, 0, "b").unwrap_err();
        assert!(matches!(err, NodeError::QueueFull { queued_bytes: 60, task_bytes: 41, .. }), "{err}");
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
        q.push(40, 0, "b").unwrap();
        assert!(matches!(q.push(0, 0, "c"), Err(NodeError::QueueFull { queued_tasks: 2, .. })));
        assert_eq!(q.snapshot().queued_bytes, 100);
        // Tasks in service do not count against the limits.
        q.try_pop().unwrap();
        q.push(60, 0, "c").unwrap();
    }

    #[tokio::test]
    async fn pop_waits_for_push_and_ends_after_close() {
        let q = std::sync::Arc::new(queue(100, 10));
        let waiter = {
            let q = q.clone();
            tokio::spawn(async move { q.pop().await.map(|t| t.work) })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        q.push(1, 0, "x").unwrap();
        assert_eq!(waiter.await.unwrap(), Some("x"));
        q.push(1, 0, "y").unwrap();
        q.close();
        assert!(matches!(q.push(1, 0, "z"), Err(NodeError::ShuttingDown)));
        assert_eq!(q.pop().await.map(|t| t.work), Some("y"), "closing drains what waits");
        assert!(q.pop().await.is_none());
    }
}
