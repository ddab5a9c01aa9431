//! One dataflow's run as its requestor sees it: which packets must reach it (from which source),
//! which sessions must end well, and how long it waits — a stall (no progress for
//! [`DataflowLimits::stall_ns`]) and the whole run ([`DataflowLimits::total_ns`]) are this
//! core's timer, not the shell's. The gateway drives it with the node sessions' messages
//! (`gateway::data::read::node_dataflow`), the simulator with its modelled packet arrivals
//! (`sim::reconstruct`); the agreement test runs one scripted dataflow in both.
//!
//! Must not: read a clock, do I/O, or check a packet's bytes (the shell's; a bad packet is a
//! failed session).

use super::{Dataflow, Site};

/// How long a requestor waits on a dataflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataflowLimits {
    /// Longest time without a packet or a session's end before it gives up (a node that stopped
    /// answering without closing its connection).
    pub stall_ns: u64,
    /// Longest the whole run may take.
    pub total_ns: u64,
}

impl DataflowLimits {
    /// No limit (a model without faults).
    pub const NONE: DataflowLimits = DataflowLimits { stall_ns: u64::MAX, total_ns: u64::MAX };
}

/// Something that happened, fed in by the shell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchEvent {
    /// Packet `packet` from source `source` reached the requestor.
    Packet {
        /// The source.
        source: u16,
        /// The packet.
        packet: u32,
    },
    /// Session `session` sent its last message.
    SessionDone {
        /// The session.
        session: usize,
    },
    /// Session `session` failed (refused, broke, or sent a bad packet).
    SessionFailed {
        /// The session.
        session: usize,
    },
    /// Every session's stream has ended.
    StreamsEnded,
    /// The shell's timer, set to [`DataflowWatch::deadline_ns`], expired.
    TimerFired,
}

/// Why a dataflow was given up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFailure {
    /// Nothing came for the stall limit.
    Stalled,
    /// The whole run passed its limit.
    TooLong,
    /// A session failed.
    SessionFailed {
        /// The session.
        session: usize,
    },
    /// A packet came that was not to come here, or came twice.
    Unexpected {
        /// Its source.
        source: u16,
        /// The packet.
        packet: u32,
    },
    /// The streams ended with a packet or a session's last message missing.
    Incomplete,
}

/// How the run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchOutcome {
    /// Every packet arrived and every session ended well.
    Complete,
    /// Given up.
    Fail(WatchFailure),
}

/// One dataflow run's progress at its requestor; see the module documentation.
#[derive(Clone, Debug)]
pub struct DataflowWatch {
    /// Per packet: the sources that send it here, and whether each has.
    expected: Vec<Vec<(u16, bool)>>,
    packets_left: usize,
    /// The sessions awaited, and whether each sent its last message.
    sessions: Vec<(usize, bool)>,
    limits: DataflowLimits,
    started_ns: u64,
    last_progress_ns: u64,
    outcome: Option<WatchOutcome>,
}

impl DataflowWatch {
    /// Starts watching at `now_ns`: the packets `flow` delivers to the requestor if `packets_here`
    /// (a rebuild stored on another node sends none here), and the sessions `sessions`.
    pub fn start(
        flow: &Dataflow,
        packets_here: bool,
        sessions: &[usize],
        limits: DataflowLimits,
        now_ns: u64,
    ) -> DataflowWatch {
        let mut expected = vec![Vec::new(); flow.packets() as usize];
        let to_here = flow.transfers.iter().filter(|t| packets_here && t.to == Site::Requestor);
        for transfer in to_here {
            let Site::Source(from) = transfer.from else { unreachable!("a transfer leaves a source") };
            expected[transfer.packet as usize].push((from, false));
        }
        let packets_left = expected.iter().map(Vec::len).sum();
        let mut watch = DataflowWatch {
            expected,
            packets_left,
            sessions: sessions.iter().map(|&session| (session, false)).collect(),
            limits,
            started_ns: now_ns,
            last_progress_ns: now_ns,
            outcome: None,
        };
        watch.settle();
        watch
    }

    /// Feeds `event` in at `now_ns`.
    pub fn handle(&mut self, event: WatchEvent, now_ns: u64) {
        if self.outcome.is_some() {
            return;
        }
        // Progress up to the deadline counts (a shell orders an arrival before its timer).
        if now_ns > self.deadline_ns() {
            return self.expire(now_ns);
        }
        match event {
            WatchEvent::Packet { source, packet } => self.packet(source, packet, now_ns),
            WatchEvent::SessionDone { session } => {
                match self.sessions.iter_mut().find(|(s, done)| *s == session && !*done) {
                    Some(slot) => slot.1 = true,
                    None => return self.fail(WatchFailure::SessionFailed { session }),
                }
                self.last_progress_ns = now_ns;
            }
            WatchEvent::SessionFailed { session } => return self.fail(WatchFailure::SessionFailed { session }),
            WatchEvent::StreamsEnded => {
                self.settle();
                if self.outcome.is_none() {
                    self.fail(WatchFailure::Incomplete);
                }
                return;
            }
            WatchEvent::TimerFired => {
                if now_ns >= self.deadline_ns() {
                    self.expire(now_ns);
                }
                return;
            }
        }
        self.settle();
    }

    /// When the shell's timer is due: the stall limit after the last progress, or the whole run's.
    pub fn deadline_ns(&self) -> u64 {
        let stall = self.last_progress_ns.saturating_add(self.limits.stall_ns);
        stall.min(self.started_ns.saturating_add(self.limits.total_ns))
    }

    /// How it ended, once it has.
    pub fn outcome(&self) -> Option<WatchOutcome> {
        self.outcome
    }

    fn packet(&mut self, source: u16, packet: u32, now_ns: u64) {
        let slot = self
            .expected
            .get_mut(packet as usize)
            .and_then(|senders| senders.iter_mut().find(|(from, got)| *from == source && !*got));
        match slot {
            Some(slot) => {
                slot.1 = true;
                self.packets_left -= 1;
                self.last_progress_ns = now_ns;
            }
            None => self.fail(WatchFailure::Unexpected { source, packet }),
        }
    }

    fn expire(&mut self, now_ns: u64) {
        let too_long = now_ns >= self.started_ns.saturating_add(self.limits.total_ns);
        self.fail(if too_long { WatchFailure::TooLong } else { WatchFailure::Stalled });
    }

    fn fail(&mut self, failure: WatchFailure) {
        self.outcome = Some(WatchOutcome::Fail(failure));
    }

    fn settle(&mut self) {
        if self.outcome.is_none() && self.packets_left == 0 && self.sessions.iter().all(|(_, done)| *done) {
            self.outcome = Some(WatchOutcome::Complete);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconstruct::Method;

    const MS: u64 = 1_000_000;
    const LIMITS: DataflowLimits = DataflowLimits { stall_ns: 5 * MS, total_ns: 30 * MS };

    /// The gateway decode of k = 2 over 2 packets: each source sends both packets here.
    fn flow() -> Dataflow {
        Dataflow::build(Method::GatewayDecode, 2, 2 * 4096, 4096).expect("a dataflow")
    }

    fn packets(watch: &mut DataflowWatch, at_ns: u64) {
        for (source, packet) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            watch.handle(WatchEvent::Packet { source, packet }, at_ns);
        }
    }

    #[test]
    fn every_packet_and_session_end_completes_it() {
        let mut watch = DataflowWatch::start(&flow(), true, &[0, 1], LIMITS, 0);
        packets(&mut watch, MS);
        watch.handle(WatchEvent::SessionDone { session: 0 }, 2 * MS);
        assert_eq!(watch.outcome(), None, "session 1 has not ended");
        watch.handle(WatchEvent::SessionDone { session: 1 }, 3 * MS);
        assert_eq!(watch.outcome(), Some(WatchOutcome::Complete));
        // Without sessions (a simulator's model), the last packet completes it.
        let mut watch = DataflowWatch::start(&flow(), true, &[], DataflowLimits::NONE, 0);
        packets(&mut watch, 1_000_000 * MS);
        assert_eq!(watch.outcome(), Some(WatchOutcome::Complete));
    }

    #[test]
    fn a_silence_past_the_stall_limit_and_a_run_past_the_total_give_it_up() {
        let mut watch = DataflowWatch::start(&flow(), true, &[0, 1], LIMITS, 0);
        assert_eq!(watch.deadline_ns(), 5 * MS);
        watch.handle(WatchEvent::Packet { source: 0, packet: 0 }, 4 * MS);
        assert_eq!(watch.deadline_ns(), 9 * MS, "progress moves the stall deadline");
        watch.handle(WatchEvent::TimerFired, 5 * MS);
        assert_eq!(watch.outcome(), None, "a stale timer does nothing");
        watch.handle(WatchEvent::TimerFired, 9 * MS);
        assert_eq!(watch.outcome(), Some(WatchOutcome::Fail(WatchFailure::Stalled)));
        // Steady progress, but the whole run is limited.
        let mut watch = DataflowWatch::start(&flow(), true, &[0, 1], LIMITS, 0);
        for (i, (source, packet)) in [(0, 0), (0, 1), (1, 0), (1, 1)].into_iter().enumerate() {
            watch.handle(WatchEvent::Packet { source, packet }, (i as u64 + 1) * 4 * MS);
        }
        watch.handle(WatchEvent::SessionDone { session: 0 }, 20 * MS);
        watch.handle(WatchEvent::SessionDone { session: 1 }, 31 * MS);
        assert_eq!(watch.outcome(), Some(WatchOutcome::Fail(WatchFailure::TooLong)));
    }

    #[test]
    fn an_unexpected_or_repeated_packet_and_a_short_run_fail_it() {
        let mut watch = DataflowWatch::start(&flow(), true, &[0, 1], LIMITS, 0);
        watch.handle(WatchEvent::Packet { source: 0, packet: 0 }, MS);
        watch.handle(WatchEvent::Packet { source: 0, packet: 0 }, MS);
        assert_eq!(watch.outcome(), Some(WatchOutcome::Fail(WatchFailure::Unexpected { source: 0, packet: 0 })));
        let mut watch = DataflowWatch::start(&flow(), false, &[0, 1, 2], LIMITS, 0);
        watch.handle(WatchEvent::Packet { source: 1, packet: 0 }, MS);
        assert!(matches!(watch.outcome(), Some(WatchOutcome::Fail(WatchFailure::Unexpected { .. }))));
        let mut watch = DataflowWatch::start(&flow(), true, &[0, 1], LIMITS, 0);
        watch.handle(WatchEvent::SessionDone { session: 9 }, MS);
        assert_eq!(watch.outcome(), Some(WatchOutcome::Fail(WatchFailure::SessionFailed { session: 9 })));
        let mut watch = DataflowWatch::start(&flow(), true, &[0, 1], LIMITS, 0);
        packets(&mut watch, MS);
        watch.handle(WatchEvent::SessionDone { session: 0 }, MS);
        watch.handle(WatchEvent::StreamsEnded, 2 * MS);
        assert_eq!(watch.outcome(), Some(WatchOutcome::Fail(WatchFailure::Incomplete)));
    }
}
