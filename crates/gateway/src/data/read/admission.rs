//! The live shell of the execution core's admission pool: one `execution::Admission` per gateway
//! behind a mutex, and the waits of the reads it has not admitted yet. Every read plan the gateway
//! runs (planned or robust) is a request of the pool, admitted before its execution starts; each
//! task it starts waits for a slot before its RPC is sent, and gives the slot back when it ends or
//! is dropped (a cancel). The simulator's frontends drive the same state machine, so the two admit
//! alike. Unbounded (the default) admits everything at once.
//!
//! Owns the waiting reads' wake-ups. Must not decide admission (the core's `Admission` does) or
//! know what a task reads.

use std::collections::HashMap;
use std::sync::Mutex;

use execution::{Admission, AdmissionSettings, Admitted};
use model::ReadPlan;
use tokio::sync::oneshot;

use crate::data::DataError;

/// What a wake-up is for.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Grant {
    Request(u64),
    Task(u64, usize),
}

#[derive(Debug)]
struct PoolState {
    pool: Admission,
    next_request: u64,
    /// Who waits for which grant; a grant whose waiter left is not sent (its guard already told
    /// the pool).
    waiters: HashMap<Grant, oneshot::Sender<()>>,
}

impl PoolState {
    /// Wakes whoever the pool admitted.
    fn wake(&mut self) {
        while let Some(admitted) = self.pool.poll_admitted() {
            let grant = match admitted {
                Admitted::Request { request } => Grant::Request(request),
                Admitted::Task { request, task } => Grant::Task(request, task),
            };
            let waiter = self.waiters.remove(&grant);
            debug_assert!(waiter.is_some(), "{grant:?} was admitted but nobody waits for it");
            if let Some(waiter) = waiter {
                // A receiver gone is a future being dropped: its guard gives the grant back.
                let _ = waiter.send(());
            }
        }
    }
}

/// The gateway's pool of read task slots.
#[derive(Debug)]
pub struct TaskPool {
    state: Mutex<PoolState>,
}

impl TaskPool {
    /// A pool as `settings` say.
    pub fn new(settings: AdmissionSettings) -> TaskPool {
        let state = PoolState { pool: settings.pool(), next_request: 0, waiters: HashMap::new() };
        TaskPool { state: Mutex::new(state) }
    }

    /// Waits until a plan that starts `tasks` tasks at once is admitted. Dropping the future before
    /// then takes the request out of the queue.
    pub async fn admit(&self, tasks: usize) -> Result<AdmittedPlan<'_>, DataError> {
        let (sender, receiver) = oneshot::channel();
        let request = {
            let mut state = crate::data::lock(&self.state);
            let request = state.next_request;
            state.next_request += 1;
            state.waiters.insert(Grant::Request(request), sender);
            if !state.pool.arrive(request, tasks) {
                state.waiters.remove(&Grant::Request(request));
                return Err(DataError::Unavailable("too many reads wait for admission; retry later".into()));
            }
            state.wake();
            request
        };
        let mut waiting = Waiting { pool: self, request: Some(request) };
        receiver.await.map_err(|_| DataError::Internal("the admission pool dropped a waiting read".into()))?;
        waiting.request = None;
        Ok(AdmittedPlan { pool: self, request })
    }

    /// The pool's slots (L), 0 when unbounded.
    pub fn slot_count(&self) -> u32 {
        let state = crate::data::lock(&self.state);
        state.pool.slots().map_or(0, |slots| u32::try_from(slots).unwrap_or(u32::MAX))
    }

    /// Slots busy, requests waiting and tasks waiting, for status and tests.
    pub fn occupancy(&self) -> (usize, usize, usize) {
        let state = crate::data::lock(&self.state);
        (state.pool.busy_slots(), state.pool.waiting_requests(), state.pool.waiting_tasks())
    }

    /// The pool as a policy sees it (FAST CLOUD's code lengths are chosen from it).
    pub fn frontend_state(&self) -> policy::fec::FrontendState {
        let state = crate::data::lock(&self.state);
        let pool = &state.pool;
        policy::fec::FrontendState::from_counts(
            pool.slots(),
            pool.busy_slots(),
            pool.waiting_requests(),
            pool.waiting_tasks(),
        )
    }

    fn with_state<T>(&self, change: impl FnOnce(&mut PoolState) -> T) -> T {
        let mut state = crate::data::lock(&self.state);
        let result = change(&mut state);
        state.wake();
        result
    }
}

/// `plan` admitted by `pool` (at once without one): what [`crate::data::read::executor::drive`] takes.
pub async fn admit_plan<'p>(
    pool: Option<&'p TaskPool>,
    plan: &ReadPlan,
) -> Result<Option<AdmittedPlan<'p>>, DataError> {
    match pool {
        Some(pool) => pool.admit(plan.upfront_tasks()).await.map(Some),
        None => Ok(None),
    }
}

/// A read waiting for admission; dropped before its grant, it leaves the queue.
struct Waiting<'a> {
    pool: &'a TaskPool,
    request: Option<u64>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(request) = self.request {
            self.pool.with_state(|state| {
                if state.waiters.remove(&Grant::Request(request)).is_some() {
                    state.pool.withdraw(request);
                } else {
                    // Admitted while it was being dropped: it is over at once.
                    state.pool.request_ended(request);
                }
            });
        }
    }
}

/// An admitted plan: its tasks take slots through [`AdmittedPlan::slot`]; dropped, the plan is
/// over and its tasks still waiting for a slot leave the queue.
#[derive(Debug)]
pub struct AdmittedPlan<'a> {
    pool: &'a TaskPool,
    request: u64,
}

impl AdmittedPlan<'_> {
    /// Waits for a slot for task `task`. The slot is held until the returned guard drops; dropping
    /// the future before then gives up the task's place in the queue.
    pub async fn slot(&self, task: usize) -> Result<TaskSlot<'_>, DataError> {
        let (sender, receiver) = oneshot::channel();
        let grant = Grant::Task(self.request, task);
        self.pool.with_state(|state| {
            state.waiters.insert(grant, sender);
            state.pool.submit(self.request, task);
        });
        // From here the task is the pool's: whatever happens, its guard ends it once.
        let slot = TaskSlot { plan: self, task };
        receiver.await.map_err(|_| DataError::Internal("the admission pool dropped a waiting task".into()))?;
        Ok(slot)
    }
}

impl Drop for AdmittedPlan<'_> {
    fn drop(&mut self) {
        let request = self.request;
        self.pool.with_state(|state| state.pool.request_ended(request));
    }
}

/// A task's slot (or its place in the task queue while it waits): given back when dropped.
#[derive(Debug)]
pub struct TaskSlot<'a> {
    plan: &'a AdmittedPlan<'a>,
    task: usize,
}

impl Drop for TaskSlot<'_> {
    fn drop(&mut self) {
        let (request, task) = (self.plan.request, self.task);
        self.plan.pool.with_state(|state| {
            state.waiters.remove(&Grant::Task(request, task));
            state.pool.task_ended(request, task);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use execution::AdmissionMode;
    use std::time::Duration;

    fn pool(slots: usize, mode: AdmissionMode) -> TaskPool {
        TaskPool::new(AdmissionSettings { slots: Some(slots), mode })
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_waits_for_a_slot_and_takes_the_one_given_back() {
        let pool = pool(1, AdmissionMode::NonBlocking);
        let plan = pool.admit(2).await.unwrap();
        let first = plan.slot(0).await.unwrap();
        let second = plan.slot(1);
        tokio::pin!(second);
        assert!(tokio::time::timeout(Duration::from_millis(10), &mut second).await.is_err(), "no slot idle");
        assert_eq!(pool.occupancy(), (1, 0, 1));
        drop(first);
        let second = second.await.unwrap();
        assert_eq!(pool.occupancy(), (1, 0, 0));
        drop(second);
        assert_eq!(pool.occupancy(), (0, 0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_dropped_while_it_waits_leaves_the_queue_and_holds_nothing() {
        let pool = pool(1, AdmissionMode::NonBlocking);
        let plan = pool.admit(2).await.unwrap();
        let first = plan.slot(0).await.unwrap();
        assert!(tokio::time::timeout(Duration::from_millis(10), plan.slot(1)).await.is_err());
        assert_eq!(pool.occupancy(), (1, 0, 0), "the cancelled task left the queue");
        drop(first);
        assert_eq!(pool.occupancy(), (0, 0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn blocking_admission_waits_for_as_many_idle_slots_as_tasks() {
        let pool = pool(2, AdmissionMode::Blocking);
        let plan = pool.admit(2).await.unwrap();
        let held = plan.slot(0).await.unwrap();
        let blocked = pool.admit(2);
        tokio::pin!(blocked);
        assert!(tokio::time::timeout(Duration::from_millis(10), &mut blocked).await.is_err(), "1 of 2 idle");
        // The first plan's second task, announced and not asked for yet, counts as waiting.
        assert_eq!(pool.occupancy(), (1, 1, 1));
        drop(held);
        drop(plan);
        let second = blocked.await.unwrap();
        assert!(second.slot(0).await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_that_gives_up_before_admission_leaves_the_request_queue() {
        let pool = pool(1, AdmissionMode::NonBlocking);
        let plan = pool.admit(1).await.unwrap();
        let slot = plan.slot(0).await.unwrap();
        assert!(tokio::time::timeout(Duration::from_millis(10), pool.admit(1)).await.is_err());
        assert_eq!(pool.occupancy(), (1, 0, 0));
        drop(slot);
        drop(plan);
        let next = pool.admit(1).await.unwrap();
        assert!(next.slot(0).await.is_ok());
    }

    #[tokio::test]
    async fn an_unbounded_pool_never_waits() {
        let pool = TaskPool::new(AdmissionSettings::default());
        let plan = pool.admit(64).await.unwrap();
        let mut slots = Vec::new();
        for task in 0..64 {
            slots.push(plan.slot(task).await.unwrap());
        }
        assert_eq!(pool.occupancy(), (64, 0, 0));
    }
}
