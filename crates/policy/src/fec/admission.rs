//! The frontend's pool of L task slots (FAST CLOUD section III-C), as a state machine that both
//! executors drive with the same events, so the simulator and the gateway admit, start and cancel
//! exactly alike: a FIFO request queue, a FIFO task queue, blocking or non-blocking admission,
//! and a request done at its quorum (the first k of n reads; a write's ack) with the rest
//! cancelled at that instant or left to finish.
//!
//! Must not: read a clock, do I/O or decide code lengths. Events come in ([`SlotPool::arrive`],
//! [`SlotPool::task_done`], [`SlotPool::task_failed`]); what the executor must do comes out as
//! [`PoolAction`]s, in order.

use super::FrontendState;
use optimize::fec_model::Admission;
use std::collections::{HashMap, VecDeque};

/// The executor's name for a request; unique among the requests in the pool.
pub type RequestKey = u64;

/// What happens to a request's other tasks once its quorum is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AfterQuorum {
    /// Waiting tasks are removed and running ones cancelled, their slots free at once (reads;
    /// the paper's writes).
    Cancel,
    /// They go on holding their slots until they finish (writes completed in the background).
    Continue,
}

/// A request entering the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PooledRequest {
    /// The executor's name for it.
    pub key: RequestKey,
    /// n: tasks it runs.
    pub tasks: u16,
    /// Finished tasks that complete it (k for a read, the ack rule's count for a write).
    pub quorum: u16,
    /// What its other tasks do after the quorum.
    pub after_quorum: AfterQuorum,
}

/// What the executor must do, in the order given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolAction {
    /// Start task `task` (0-based, < n) of `request` on a slot now.
    Start {
        /// The request.
        request: RequestKey,
        /// Its task.
        task: u16,
    },
    /// Abandon running task `task` of `request`; its slot is already free.
    Cancel {
        /// The request.
        request: RequestKey,
        /// Its task.
        task: u16,
    },
    /// `request` has its quorum: a read is served, a write acknowledged.
    Quorum {
        /// The request.
        request: RequestKey,
    },
    /// `request` can no longer reach its quorum (too many tasks failed); its other tasks were
    /// removed or cancelled.
    Failed {
        /// The request.
        request: RequestKey,
    },
    /// Every task of `request` has ended (finished, failed or cancelled): the pool forgot it.
    Retired {
        /// The request.
        request: RequestKey,
    },
}

/// Why the pool refused an event; a refused event changes nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The request queue is at its bound.
    #[error("the frontend's request queue is full ({waiting} waiting)")]
    Full {
        /// Requests waiting.
        waiting: usize,
    },
    /// n = 0, quorum = 0 or quorum > n, or n > L under blocking admission.
    #[error("request {key}: {tasks} tasks with quorum {quorum} cannot run in {slots} slots ({admission:?})")]
    BadRequest {
        /// The request.
        key: RequestKey,
        /// Its n.
        tasks: u16,
        /// Its quorum.
        quorum: u16,
        /// L.
        slots: u32,
        /// The pool's admission rule.
        admission: Admission,
    },
    /// A key already in the pool.
    #[error("request {key} is already in the pool")]
    DuplicateKey {
        /// The request.
        key: RequestKey,
    },
    /// A task event for a task that is not running.
    #[error("task {task} of request {key} is not running")]
    NotRunning {
        /// The request.
        key: RequestKey,
        /// Its task.
        task: u16,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TaskState {
    Unadmitted,
    Queued,
    Running,
    Finished,
    Failed,
    Cancelled,
}

impl TaskState {
    fn ended(self) -> bool {
        matches!(self, TaskState::Finished | TaskState::Failed | TaskState::Cancelled)
    }
}

#[derive(Debug)]
struct RequestState {
    request: PooledRequest,
    tasks: Vec<TaskState>,
    finished: u16,
    /// Quorum reached, or failed: either way the request's outcome is decided.
    decided: bool,
}

/// The pool (see the module documentation).
#[derive(Debug)]
pub struct SlotPool {
    slots: u32,
    busy: u32,
    admission: Admission,
    max_waiting_requests: usize,
    waiting_requests: VecDeque<RequestKey>,
    waiting_tasks: VecDeque<(RequestKey, u16)>,
    requests: HashMap<RequestKey, RequestState>,
}

impl SlotPool {
    /// A pool of `slots` slots admitting by `admission`, refusing arrivals while
    /// `max_waiting_requests` wait.
    pub fn new(slots: u32, admission: Admission, max_waiting_requests: usize) -> SlotPool {
        assert!(slots > 0, "a pool needs at least one slot");
        SlotPool {
            slots,
            busy: 0,
            admission,
            max_waiting_requests,
            waiting_requests: VecDeque::new(),
            waiting_tasks: VecDeque::new(),
            requests: HashMap::new(),
        }
    }

    /// The frontend's state, as a code-length policy sees it.
    pub fn state(&self) -> FrontendState {
        FrontendState {
            slots: self.slots,
            idle_slots: self.slots - self.busy,
            waiting_requests: self.waiting_requests.len() as u32,
            waiting_tasks: self.waiting_tasks.len() as u32,
        }
    }

    /// Tasks running now (never more than L).
    pub fn busy_slots(&self) -> u32 {
        self.busy
    }

    /// Requests in the pool: waiting, running, or finishing their background tasks.
    pub fn requests_in_pool(&self) -> usize {
        self.requests.len()
    }

    /// Queues `request` and admits what can be admitted, appending the actions to `actions`.
    pub fn arrive(&mut self, request: PooledRequest, actions: &mut Vec<PoolAction>) -> Result<(), PoolError> {
        let fits_slots = self.admission == Admission::NonBlocking || u32::from(request.tasks) <= self.slots;
        if request.tasks == 0 || request.quorum == 0 || request.quorum > request.tasks || !fits_slots {
            return Err(PoolError::BadRequest {
                key: request.key,
                tasks: request.tasks,
                quorum: request.quorum,
                slots: self.slots,
                admission: self.admission,
            });
        }
        if self.requests.contains_key(&request.key) {
            return Err(PoolError::DuplicateKey { key: request.key });
        }
        if self.waiting_requests.len() >= self.max_waiting_requests {
            return Err(PoolError::Full { waiting: self.waiting_requests.len() });
        }
        let state = RequestState {
            request,
            tasks: vec![TaskState::Unadmitted; usize::from(request.tasks)],
            finished: 0,
            decided: false,
        };
        self.requests.insert(request.key, state);
        self.waiting_requests.push_back(request.key);
        self.dispatch(actions);
        Ok(())
    }

    /// Running task `task` of `request` finished.
    pub fn task_done(
        &mut self,
        request: RequestKey,
        task: u16,
        actions: &mut Vec<PoolAction>,
    ) -> Result<(), PoolError> {
        self.end_running(request, task, TaskState::Finished)?;
        let state = self.requests.get_mut(&request).expect("checked by end_running");
        state.finished += 1;
        if !state.decided && state.finished == state.request.quorum {
            state.decided = true;
            actions.push(PoolAction::Quorum { request });
            if state.request.after_quorum == AfterQuorum::Cancel {
                self.cancel_rest(request, actions);
            }
        }
        self.retire_if_ended(request, actions);
        self.dispatch(actions);
        Ok(())
    }

    /// Running task `task` of `request` failed. The request fails once it can no longer reach its
    /// quorum, and its other tasks are then removed or cancelled.
    pub fn task_failed(
        &mut self,
        request: RequestKey,
        task: u16,
        actions: &mut Vec<PoolAction>,
    ) -> Result<(), PoolError> {
        self.end_running(request, task, TaskState::Failed)?;
        let state = self.requests.get_mut(&request).expect("checked by end_running");
        let still_possible = state.tasks.iter().filter(|t| !t.ended()).count() as u16;
        if !state.decided && state.finished + still_possible < state.request.quorum {
            state.decided = true;
            actions.push(PoolAction::Failed { request });
            self.cancel_rest(request, actions);
        }
        self.retire_if_ended(request, actions);
        self.dispatch(actions);
        Ok(())
    }

    fn end_running(&mut self, request: RequestKey, task: u16, to: TaskState) -> Result<(), PoolError> {
        let slot = self.requests.get_mut(&request).and_then(|r| r.tasks.get_mut(usize::from(task)));
        match slot {
            Some(state) if *state == TaskState::Running => {
                *state = to;
                self.busy -= 1;
                Ok(())
            }
            _ => Err(PoolError::NotRunning { key: request, task }),
        }
    }

    /// Removes `request`'s queued tasks and cancels its running ones, freeing their slots now.
    fn cancel_rest(&mut self, request: RequestKey, actions: &mut Vec<PoolAction>) {
        let state = self.requests.get_mut(&request).expect("request in the pool");
        let mut had_queued = false;
        for (task, task_state) in state.tasks.iter_mut().enumerate() {
            match *task_state {
                TaskState::Running => {
                    *task_state = TaskState::Cancelled;
                    self.busy -= 1;
                    actions.push(PoolAction::Cancel { request, task: task as u16 });
                }
                TaskState::Queued => {
                    *task_state = TaskState::Cancelled;
                    had_queued = true;
                }
                _ => {}
            }
        }
        if had_queued {
            self.waiting_tasks.retain(|&(key, _)| key != request);
        }
    }

    fn retire_if_ended(&mut self, request: RequestKey, actions: &mut Vec<PoolAction>) {
        let ended = self.requests.get(&request).is_some_and(|state| state.tasks.iter().all(|t| t.ended()));
        if ended {
            self.requests.remove(&request);
            actions.push(PoolAction::Retired { request });
        }
    }

    /// Idle slots take waiting tasks in order; then the head request is admitted if the rule
    /// allows (one idle slot non-blocking, n idle slots blocking), and so on until nothing moves.
    fn dispatch(&mut self, actions: &mut Vec<PoolAction>) {
        // Each pass starts a task or admits a request, so the loop ends; the bound says so.
        let bound = self.waiting_tasks.len() + self.waiting_requests.len() * (usize::from(u16::MAX) + 1) + 1;
        for _ in 0..bound {
            if self.busy < self.slots
                && let Some((request, task)) = self.waiting_tasks.pop_front()
            {
                self.start(request, task, actions);
                continue;
            }
            let Some(&head) = self.waiting_requests.front() else { break };
            let tasks = self.requests[&head].request.tasks;
            let idle = self.slots - self.busy;
            let admit = match self.admission {
                Admission::NonBlocking => idle >= 1,
                Admission::Blocking => idle >= u32::from(tasks),
            };
            if !admit {
                break;
            }
            self.waiting_requests.pop_front();
            let state = self.requests.get_mut(&head).expect("waiting requests are in the pool");
            for (task, task_state) in state.tasks.iter_mut().enumerate() {
                *task_state = TaskState::Queued;
                self.waiting_tasks.push_back((head, task as u16));
            }
        }
        assert!(self.busy <= self.slots, "{} tasks running in {} slots", self.busy, self.slots);
        debug_assert!(self.busy == self.slots || self.waiting_tasks.is_empty(), "an idle slot beside a waiting task");
    }

    fn start(&mut self, request: RequestKey, task: u16, actions: &mut Vec<PoolAction>) {
        let state = self.requests.get_mut(&request).expect("queued tasks belong to requests in the pool");
        let task_state = &mut state.tasks[usize::from(task)];
        assert_eq!(*task_state, TaskState::Queued, "task {task} of {request} started twice");
        *task_state = TaskState::Running;
        self.busy += 1;
        actions.push(PoolAction::Start { request, task });
    }
}
