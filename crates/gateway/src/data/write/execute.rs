//! The gateway's shell for the execution core's [`WriteExecution`] (the simulator's is
//! `sim::write`): it starts each copy's write as a task of its own, asks the caller's
//! [`CopyWriter`] for a node when the core places a failed copy elsewhere, sleeps until the core's
//! timer, and returns once the core has acknowledged (handing back the writes still landing),
//! completed or failed. The agreement test drives it with sleeps for I/O, beside the simulator.
//!
//! Must not: decide what the core decides (when a copy is retried, when the write is acknowledged,
//! whether what landed is enough), or know stripes, objects or the placer.

use execution::{Durability, WriteAction, WriteEvent, WriteExecution, WriteSettings};
use futures_util::future::select_all;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// One copy's write, running as a task of its own.
pub type CopyTask = JoinHandle<Result<(), String>>;

/// Where copies are written: the caller's I/O and placer.
pub trait CopyWriter {
    /// Starts writing copy `copy` to node `node` (`retry`: it failed elsewhere before).
    fn start(&mut self, copy: usize, node: u32, retry: bool) -> CopyTask;
    /// Another node for copy `copy`: none of `avoid` and none of `placement` (the copies' nodes);
    /// `None` when no node can take it.
    fn place(&mut self, copy: usize, avoid: &[u32], placement: &[u32]) -> Option<u32>;
}

/// How a write ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteEnd {
    /// Acknowledged with copies still landing.
    Acknowledged {
        /// By the straggler rule, not an early one.
        straggler: bool,
    },
    /// Every write ended; the durable copies meet the durability rule.
    Complete {
        /// Further failures they survive.
        failures_tolerated: usize,
    },
    /// Every write ended; the durable copies do not meet the durability rule.
    Failed {
        /// Further failures they survive (`None`: the bytes cannot be given back).
        failures_tolerated: Option<usize>,
    },
}

/// What a write came to.
#[derive(Debug)]
pub struct WriteRun {
    /// How it ended.
    pub end: WriteEnd,
    /// Each copy's node (a copy that failed for good stays on the node it failed on).
    pub placement: Vec<u32>,
    /// Which copies are durable.
    pub durable: Vec<bool>,
    /// After an acknowledgement, the writes still running: copy, node, task.
    pub landing: Vec<(usize, u32, CopyTask)>,
    /// Every failed write: copy, error.
    pub errors: Vec<(usize, String)>,
}

/// Writes the copies flagged in `to_write` to their nodes in `placement` under `settings`, as the
/// execution core decides; see the module documentation. `trace`, when given, receives every
/// action with its time (ns since the start).
pub async fn drive_write(
    (placement, to_write): (Vec<u32>, &[bool]),
    settings: WriteSettings,
    durability: Durability<'_>,
    writer: &mut impl CopyWriter,
    mut trace: Option<&mut Vec<(u64, WriteAction)>>,
) -> WriteRun {
    let started = Instant::now();
    let now_ns = || u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let copies = to_write.len();
    let mut execution = WriteExecution::start(placement, to_write, settings, durability, 0);
    let mut tasks: Vec<Option<CopyTask>> = (0..copies).map(|_| None).collect();
    let mut timer: Option<Instant> = None;
    let mut errors = Vec::new();
    // Every start ends once and the core arms one deadline: the loop is bounded by the starts.
    let steps = 2 * copies * (settings.retries as usize + 1) + 4;
    for _step in 0..steps {
        while let Some(action) = execution.poll_action() {
            if let Some(trace) = trace.as_deref_mut() {
                trace.push((now_ns(), action.clone()));
            }
            let end = match action {
                WriteAction::Start { copy, node, retry } => {
                    tasks[copy] = Some(writer.start(copy, node, retry));
                    continue;
                }
                WriteAction::Place { copy, avoid } => {
                    let node = writer.place(copy, &avoid, execution.placement());
                    execution.handle(WriteEvent::Placed { copy, node }, durability, now_ns());
                    continue;
                }
                WriteAction::ArmTimer { at_ns } => {
                    timer = Some(started + std::time::Duration::from_nanos(at_ns));
                    continue;
                }
                WriteAction::Acknowledge { straggler } => WriteEnd::Acknowledged { straggler },
                WriteAction::Complete { failures_tolerated } => WriteEnd::Complete { failures_tolerated },
                WriteAction::Fail { failures_tolerated } => WriteEnd::Failed { failures_tolerated },
            };
            let landing = execution
                .landing()
                .into_iter()
                .map(|copy| (copy, execution.placement()[copy], tasks[copy].take().expect("a landing copy runs")))
                .collect();
            let (placement, durable) = (execution.placement().to_vec(), execution.durable());
            return WriteRun { end, placement, durable, landing, errors };
        }
        let (event, error) = next_event(&mut tasks, &mut timer).await;
        if let (WriteEvent::Ended { copy, .. }, Some(error)) = (event, error) {
            errors.push((copy, error));
        }
        execution.handle(event, durability, now_ns());
    }
    panic!("a write of {copies} copies and {} retries each took more than {steps} steps", settings.retries);
}

/// The next end of a running copy's write (its task taken out of `tasks`; a failure with its
/// error), or the timer's expiry (disarming it).
async fn next_event(tasks: &mut [Option<CopyTask>], timer: &mut Option<Instant>) -> (WriteEvent, Option<String>) {
    let copies: Vec<usize> = (0..tasks.len()).filter(|&copy| tasks[copy].is_some()).collect();
    assert!(!copies.is_empty() || timer.is_some(), "the core waits for a write or its timer");
    let running = tasks.iter_mut().filter_map(Option::as_mut);
    let ended = async {
        if copies.is_empty() {
            std::future::pending().await
        } else {
            let (result, index, _) = select_all(running).await;
            (copies[index], result)
        }
    };
    let deadline = *timer;
    let expired = async move {
        match deadline {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    // A write's end before the timer when both are due, as the simulator orders them.
    let ended = tokio::select! {
        biased;
        ended = ended => Some(ended),
        () = expired => None,
    };
    let Some((copy, result)) = ended else {
        *timer = None;
        return (WriteEvent::TimerFired, None);
    };
    tasks[copy] = None;
    match result.unwrap_or_else(|error| Err(format!("write task ended abnormally: {error}"))) {
        Ok(()) => (WriteEvent::Ended { copy, durable: true }, None),
        Err(error) => (WriteEvent::Ended { copy, durable: false }, Some(error)),
    }
}
