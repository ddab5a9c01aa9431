//! The live shell of the execution core: runs one read plan by feeding `execution::ReadExecution`
//! the task completions of node RPCs and the expiries of a tokio timer, and carrying out its
//! actions (start a task, cancel one by dropping its RPC, arm the timer). The simulator's engine is
//! the other shell of the same core, so the two execute a plan alike by construction. A plan
//! admitted by the gateway's task pool (`admission`) sends each started task once it has a slot.
//!
//! Owns the in-flight task futures of one read and nothing else. Must not decide anything a plan's
//! execution decides (which tasks start, when the fallback launches, when the quorum is met, what
//! is cancelled): that is the core's. It does not know what a task reads either (the caller's
//! `run_task` does the I/O).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use codec::ErasureCode;
use execution::{Action, Event, FailReason, ReadExecution};
use futures_util::StreamExt;
use futures_util::future::{AbortHandle, Abortable};
use futures_util::stream::FuturesUnordered;
use model::ReadPlan;
use tokio::time::Instant;

use crate::data::read::admission::AdmittedPlan;

/// How one task ended (times on the shell's clock, in ns since its epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskEnd {
    /// Its bytes arrived.
    Done {
        /// The node's timing of the task.
        timing: node::TaskTiming,
        /// When the RPC was sent.
        sent_ns: u64,
        /// When its answer arrived.
        received_ns: u64,
    },
    /// The node answered with an error, or not at all.
    Failed {
        /// When the RPC was sent.
        sent_ns: u64,
    },
    /// Dropped at `cancel_ns` (which closes the request on the node) before it answered.
    Cancelled {
        /// When the RPC was sent.
        sent_ns: u64,
        /// When it was dropped.
        cancel_ns: u64,
    },
    /// Not launched (a fallback the normal read made unnecessary), or cancelled while it waited for
    /// an admission slot: it never reached a node.
    NotLaunched,
}

/// What a task's I/O gives back: how it ended (never [`TaskEnd::Cancelled`] or
/// [`TaskEnd::NotLaunched`]: the shell decides those) and its bytes when it delivered.
pub type TaskResult = (TaskEnd, Option<Bytes>);

/// What running a plan came to.
#[derive(Debug)]
pub struct Driven {
    /// The tasks whose bytes serve the read, and whether the target is decoded from them; `None`
    /// when the plan failed.
    pub completed: Option<(Vec<usize>, bool)>,
    /// Why the plan failed, if it did.
    pub failure: Option<FailReason>,
    /// Whether the fallback launched because the timer fired.
    pub timed_out: bool,
    /// How each task ended.
    pub ends: Vec<TaskEnd>,
    /// The bytes of each task that delivered.
    pub bytes: Vec<Option<Bytes>>,
}

/// The shell's clock: nanoseconds since `epoch` (the caller's record clock), on tokio's time so
/// that a paused runtime drives it in tests.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// Time zero.
    pub epoch: Instant,
}

impl Clock {
    /// Nanoseconds since the epoch.
    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn instant_at(&self, at_ns: u64) -> Instant {
        self.epoch + std::time::Duration::from_nanos(at_ns)
    }
}

type TaskFuture<'a> = Pin<Box<dyn Future<Output = (usize, Option<TaskResult>)> + Send + 'a>>;

/// Runs `plan` to read unit `target` of a stripe of `code`: `run_task(i)` is task i's I/O, run
/// once the task has a slot of `admitted`'s pool (at once without a pool). Returns once the plan is
/// over and every task it launched is resolved (cancelled tasks are dropped, which resolves them
/// and gives their slots back at once). `trace`, when given, receives every action with its time.
pub async fn drive<'a, F, Fut>(
    plan: &ReadPlan,
    target: u8,
    code: &dyn ErasureCode,
    clock: Clock,
    admitted: Option<&'a AdmittedPlan<'a>>,
    mut run_task: F,
    mut trace: Option<&mut Vec<(u64, Action)>>,
) -> Driven
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = TaskResult> + Send + 'a,
{
    let tasks = plan.tasks.len();
    let mut execution = ReadExecution::start(plan, target, clock.now_ns());
    let mut running: FuturesUnordered<TaskFuture<'a>> = FuturesUnordered::new();
    let mut aborts: Vec<Option<(AbortHandle, u64)>> = vec![None; tasks];
    // Whether each started task got its slot (a task cancelled before then never left).
    let slotted: Arc<[AtomicBool]> = (0..tasks).map(|_| AtomicBool::new(false)).collect();
    let mut driven = Driven {
        completed: None,
        failure: None,
        timed_out: false,
        ends: vec![TaskEnd::NotLaunched; tasks],
        bytes: vec![None; tasks],
    };
    let mut timer: Option<Instant> = None;
    // Every launched task resolves once and the timer fires at most once per arming, so the loop
    // runs at most twice per task plus once per timer.
    for _step in 0..(3 * tasks + 4) {
        while let Some(action) = execution.poll_action() {
            let now_ns = clock.now_ns();
            if let Some(trace) = trace.as_deref_mut() {
                trace.push((now_ns, action.clone()));
            }
            match action {
                Action::Start { task } => {
                    let (handle, registration) = AbortHandle::new_pair();
                    aborts[task] = Some((handle, now_ns));
                    let slotted = Arc::clone(&slotted);
                    let io = Abortable::new(with_slot(admitted, task, slotted, clock, run_task(task)), registration);
                    running.push(Box::pin(async move { (task, io.await.ok()) }));
                }
                Action::Cancel { task } => {
                    if let Some((handle, _)) = &aborts[task] {
                        handle.abort();
                    }
                }
                Action::ArmTimer { at_ns } => timer = Some(clock.instant_at(at_ns)),
                Action::Complete { decoded } => driven.completed = Some((execution.served_by().to_vec(), decoded)),
                Action::Fail { reason } => driven.failure = Some(reason),
            }
        }
        if execution.is_settled() {
            break;
        }
        let event = tokio::select! {
            Some((task, result)) = running.next() => match result {
                Some((end, Some(bytes))) => {
                    driven.ends[task] = end;
                    driven.bytes[task] = Some(bytes);
                    Event::Finished { task }
                }
                Some((end, None)) => {
                    driven.ends[task] = end;
                    Event::Failed { task }
                }
                None => {
                    let sent_ns = aborts[task].as_ref().map_or(0, |(_, sent_ns)| *sent_ns);
                    driven.ends[task] = if slotted[task].load(Ordering::Relaxed) {
                        TaskEnd::Cancelled { sent_ns, cancel_ns: clock.now_ns() }
                    } else {
                        TaskEnd::NotLaunched
                    };
                    Event::Cancelled { task }
                }
            },
            () = sleep_until(timer) => {
                timer = None;
                Event::TimerFired
            }
        };
        execution.handle(event, code);
    }
    debug_assert!(execution.is_settled(), "the loop bound covers every event of a plan");
    driven.timed_out = execution.timed_out();
    driven
}

/// Task `task`'s I/O once it holds a slot of `admitted`'s pool (noted in `slotted`), which it gives
/// back when it ends or is dropped.
async fn with_slot<'a>(
    admitted: Option<&'a AdmittedPlan<'a>>,
    task: usize,
    slotted: Arc<[AtomicBool]>,
    clock: Clock,
    io: impl Future<Output = TaskResult> + Send + 'a,
) -> TaskResult {
    let _slot = match admitted {
        Some(plan) => match plan.slot(task).await {
            Ok(slot) => Some(slot),
            Err(_) => return (TaskEnd::Failed { sent_ns: clock.now_ns() }, None),
        },
        None => None,
    };
    slotted[task].store(true, Ordering::Relaxed);
    io.await
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
