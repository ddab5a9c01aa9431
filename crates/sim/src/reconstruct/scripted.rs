//! One dataflow's messages at its requestor on a scripted timeline, fed to the execution core's
//! [`DataflowWatch`] in virtual time with its timer: what the watch decides and when. The gateway's
//! agreement test plays the same script through its dataflow shell (`node_dataflow::watch_streams`).
//!
//! Must not: be used for measurements (no network or disk model: the script says when each message
//! arrives).

use execution::reconstruct::Dataflow;
use execution::reconstruct::watch::{DataflowLimits, DataflowWatch, WatchEvent, WatchOutcome};

/// A message a session sends the requestor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// A packet of the range (session i is source i).
    Packet(u32),
    /// The session's last message.
    Done,
    /// The session fails.
    Error,
}

/// `messages` (arrival time, session, message), in the order they arrive (equal times in this
/// order); after the last, every stream ends at `streams_end_ns` unless that is `None` (a silent
/// node: the streams stay open).
#[derive(Clone, Debug)]
pub struct DataflowScript {
    /// The dataflow run.
    pub flow: Dataflow,
    /// The sessions awaited.
    pub sessions: Vec<usize>,
    /// What arrives, when.
    pub messages: Vec<(u64, usize, Message)>,
    /// When every stream has ended, if they do.
    pub streams_end_ns: Option<u64>,
    /// The requestor's limits.
    pub limits: DataflowLimits,
}

/// What the watch decides on `script`, and when.
pub fn run(script: &DataflowScript) -> (u64, WatchOutcome) {
    assert!(script.messages.windows(2).all(|w| w[0].0 <= w[1].0), "messages in arrival order");
    let mut watch = DataflowWatch::start(&script.flow, true, &script.sessions, script.limits, 0);
    let mut now_ns = 0;
    let ends = script.streams_end_ns.map(|at| (at, usize::MAX, Message::Done));
    for (at_ns, session, message) in script.messages.iter().copied().chain(ends) {
        if let Some(outcome) = watch.outcome() {
            return (now_ns, outcome);
        }
        // The timer before an arrival past it (an arrival at the deadline comes first).
        if at_ns > watch.deadline_ns() {
            now_ns = watch.deadline_ns();
            watch.handle(WatchEvent::TimerFired, now_ns);
            return (now_ns, watch.outcome().expect("an expired timer decides"));
        }
        now_ns = at_ns;
        let event = match (session, message) {
            (usize::MAX, _) => WatchEvent::StreamsEnded,
            (session, Message::Packet(packet)) => WatchEvent::Packet { source: session as u16, packet },
            (session, Message::Done) => WatchEvent::SessionDone { session },
            (session, Message::Error) => WatchEvent::SessionFailed { session },
        };
        watch.handle(event, now_ns);
    }
    if let Some(outcome) = watch.outcome() {
        return (now_ns, outcome);
    }
    // Silence: the timer decides.
    now_ns = watch.deadline_ns();
    watch.handle(WatchEvent::TimerFired, now_ns);
    (now_ns, watch.outcome().expect("an expired timer decides"))
}
