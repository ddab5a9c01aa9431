//! When a write's unit copies may be acknowledged: the write quorum both the striped path (the n
//! units of a stripe) and the packed path (an object's m + 1 replicas) run. The shell starts the
//! copies it writes now, feeds in each one's end ([`WriteQuorum::unit_ended`]) and asks for the
//! verdict ([`WriteQuorum::verdict`]): wait (until a time, or for the next end), acknowledge with
//! copies still landing, or every write has ended (the shell judges and retries what failed).
//!
//! Two rules acknowledge with copies still landing, and both are reported to the client as
//! pending (the durability contract's weaker guarantee, the copies brought back in the background
//! or by repair):
//! - **early** (a bucket's `k+1` / `k`, FAST CLOUD's speculative write): as soon as the durable
//!   copies survive the rule's further failures;
//! - **straggler**: the durable copies survive all but one of what the full set survives (all but
//!   one copy landed, for RS and replicas) and the rest are late by more than a share of the time
//!   those took (`StragglerWait`): one slow node does not hold the write, however late it answers.
//!   Never when a write failed: a failure is retried elsewhere, as before.
//!
//! Must not: read a clock, do I/O, or know which executor drives it; time is an argument.

use codec::ErasureCode;

/// How durable a set of copies is.
#[derive(Clone, Copy)]
pub enum Durability<'a> {
    /// The units of a stripe of this code.
    Code(&'a dyn ErasureCode),
    /// Whole copies of the same bytes: any one is enough.
    Copies,
}

impl Durability<'_> {
    /// Further failures, whichever copies they hit, that the `durable` copies survive; `None`
    /// when they cannot give the bytes back.
    pub fn failures_tolerated(&self, durable: &[bool]) -> Option<usize> {
        match self {
            Durability::Code(code) => code.failures_tolerated(durable),
            Durability::Copies => durable.iter().filter(|d| **d).count().checked_sub(1),
        }
    }
}

/// How long the straggler rule lets the last copy run late.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StragglerWait {
    /// The wait, as a share of the time the other copies took (from the start to the quorum).
    pub share_of_quorum_time: f64,
    /// The wait is at least this long.
    pub min_ns: u64,
}

impl StragglerWait {
    /// The wait past a quorum reached `quorum_ns` after the start.
    pub fn wait_ns(&self, quorum_ns: u64) -> u64 {
        assert!(self.share_of_quorum_time >= 0.0, "a wait share is not negative");
        ((quorum_ns as f64 * self.share_of_quorum_time) as u64).max(self.min_ns)
    }
}

/// The rule a write is acknowledged by, besides every copy landing.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WriteRule {
    /// Early acknowledgement once the durable copies survive this many further failures.
    pub early_failures_tolerated: Option<usize>,
    /// Acknowledgement without one late copy.
    pub straggler: Option<StragglerWait>,
}

/// What became of one copy's write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyState {
    /// Not written now (its node is down).
    Skipped,
    /// Being written.
    Running,
    /// Durable on its node.
    Durable,
    /// Its write failed.
    Failed,
}

/// What the shell does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteVerdict {
    /// Wait for the next end of a copy's write, or until `until_ns`, whichever comes first.
    Wait {
        /// When to ask again if nothing ends before.
        until_ns: Option<u64>,
    },
    /// Acknowledge now; the copies still running land in the background.
    Acknowledge {
        /// Whether the straggler rule (not the early one) allowed it.
        straggler: bool,
    },
    /// Every write has ended: judge what is durable (and retry what failed).
    Ended,
}

/// One write's copies and the rule they are acknowledged by; see the module documentation.
#[derive(Clone, Debug)]
pub struct WriteQuorum {
    rule: WriteRule,
    copies: Vec<CopyState>,
    started_ns: u64,
    /// When the durable copies first survived all but one of the full set's failures.
    straggler_quorum_ns: Option<u64>,
    /// What the full set survives, and what the straggler rule needs of the durable copies.
    straggler_needs: Option<usize>,
}

impl WriteQuorum {
    /// Starts a write of the copies flagged in `to_write` (the others are skipped) at `now_ns`.
    pub fn start(to_write: &[bool], rule: WriteRule, durability: Durability<'_>, now_ns: u64) -> WriteQuorum {
        assert!(to_write.contains(&true), "a write writes at least one copy");
        let full = durability.failures_tolerated(&vec![true; to_write.len()]);
        let copies = to_write.iter().map(|&w| if w { CopyState::Running } else { CopyState::Skipped }).collect();
        // All but one copy's worth of tolerance; a set that survives nothing has no straggler to spare.
        let straggler_needs = rule.straggler.and(full).and_then(|full| full.checked_sub(1));
        WriteQuorum { rule, copies, started_ns: now_ns, straggler_quorum_ns: None, straggler_needs }
    }

    /// Copy `copy`'s write ended at `now_ns`, durable or failed.
    pub fn unit_ended(&mut self, copy: usize, durable: bool, durability: Durability<'_>, now_ns: u64) {
        assert_eq!(self.copies[copy], CopyState::Running, "a copy's write ends once, after it started");
        self.copies[copy] = if durable { CopyState::Durable } else { CopyState::Failed };
        if self.straggler_quorum_ns.is_none() {
            let tolerated = durability.failures_tolerated(&self.durable());
            if self.straggler_needs.is_some_and(|needs| tolerated.is_some_and(|t| t >= needs)) {
                self.straggler_quorum_ns = Some(now_ns.max(self.started_ns));
            }
        }
    }

    /// What to do at `now_ns`.
    pub fn verdict(&self, durability: Durability<'_>, now_ns: u64) -> WriteVerdict {
        if !self.copies.contains(&CopyState::Running) {
            return WriteVerdict::Ended;
        }
        let tolerated = durability.failures_tolerated(&self.durable());
        if let Some(early) = self.rule.early_failures_tolerated
            && tolerated.is_some_and(|t| t >= early)
        {
            return WriteVerdict::Acknowledge { straggler: false };
        }
        match (self.rule.straggler, self.straggler_quorum_ns) {
            (Some(wait), Some(quorum_ns)) if !self.copies.contains(&CopyState::Failed) => {
                let deadline_ns = quorum_ns.saturating_add(wait.wait_ns(quorum_ns - self.started_ns));
                if now_ns >= deadline_ns {
                    WriteVerdict::Acknowledge { straggler: true }
                } else {
                    WriteVerdict::Wait { until_ns: Some(deadline_ns) }
                }
            }
            _ => WriteVerdict::Wait { until_ns: None },
        }
    }

    /// Which copies are durable.
    pub fn durable(&self) -> Vec<bool> {
        self.copies.iter().map(|state| *state == CopyState::Durable).collect()
    }

    /// What became of copy `copy`.
    pub fn copy_state(&self, copy: usize) -> CopyState {
        self.copies[copy]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codec::CodeSpec;

    const MS: u64 = 1_000_000;

    fn straggler() -> WriteRule {
        WriteRule {
            early_failures_tolerated: None,
            straggler: Some(StragglerWait { share_of_quorum_time: 0.5, min_ns: 2 * MS }),
        }
    }

    /// RS(6,3): all nine copies written, the first `landed` of them land at `at_ns`.
    fn rs63_with(rule: WriteRule, landed: usize, at_ns: u64) -> (Box<dyn ErasureCode>, WriteQuorum) {
        let code = CodeSpec::Rs { k: 6, m: 3 }.build().expect("a code");
        let mut quorum = WriteQuorum::start(&[true; 9], rule, Durability::Code(code.as_ref()), 0);
        (0..landed).for_each(|unit| quorum.unit_ended(unit, true, Durability::Code(code.as_ref()), at_ns));
        (code, quorum)
    }

    #[test]
    fn without_a_rule_the_write_waits_for_every_copy() {
        let (code, mut quorum) = rs63_with(WriteRule::default(), 8, 10 * MS);
        let durability = Durability::Code(code.as_ref());
        assert_eq!(quorum.verdict(durability, 10_000 * MS), WriteVerdict::Wait { until_ns: None });
        quorum.unit_ended(8, true, durability, 10_001 * MS);
        assert_eq!(quorum.verdict(durability, 10_001 * MS), WriteVerdict::Ended);
    }

    #[test]
    fn the_straggler_rule_acknowledges_without_the_last_copy_past_its_share_of_the_quorum_time() {
        let (code, quorum) = rs63_with(straggler(), 8, 40 * MS);
        let durability = Durability::Code(code.as_ref());
        // Eight of nine landed at 40 ms: the ninth may run 20 ms later.
        assert_eq!(quorum.verdict(durability, 40 * MS), WriteVerdict::Wait { until_ns: Some(60 * MS) });
        assert_eq!(quorum.verdict(durability, 59 * MS), WriteVerdict::Wait { until_ns: Some(60 * MS) });
        assert_eq!(quorum.verdict(durability, 60 * MS), WriteVerdict::Acknowledge { straggler: true });
        assert_eq!(quorum.durable().iter().filter(|d| **d).count(), 8);
    }

    #[test]
    fn the_straggler_wait_has_a_floor_and_needs_all_but_one_copy() {
        let (code, quorum) = rs63_with(straggler(), 8, MS);
        let durability = Durability::Code(code.as_ref());
        assert_eq!(quorum.verdict(durability, MS), WriteVerdict::Wait { until_ns: Some(3 * MS) });
        let (code, quorum) = rs63_with(straggler(), 7, MS);
        assert_eq!(quorum.verdict(Durability::Code(code.as_ref()), 1_000 * MS), WriteVerdict::Wait { until_ns: None });
    }

    #[test]
    fn a_failed_copy_is_retried_not_left_to_the_straggler_rule() {
        let (code, mut quorum) = rs63_with(straggler(), 7, 10 * MS);
        let durability = Durability::Code(code.as_ref());
        quorum.unit_ended(7, false, durability, 10 * MS);
        assert_eq!(quorum.verdict(durability, 1_000 * MS), WriteVerdict::Wait { until_ns: None });
        quorum.unit_ended(8, true, durability, 1_000 * MS);
        assert_eq!(quorum.verdict(durability, 1_000 * MS), WriteVerdict::Ended);
    }

    #[test]
    fn the_early_rule_acknowledges_as_soon_as_its_failures_are_survived() {
        let rule = WriteRule { early_failures_tolerated: Some(1), straggler: None };
        let (code, quorum) = rs63_with(rule, 6, MS);
        assert_eq!(quorum.verdict(Durability::Code(code.as_ref()), MS), WriteVerdict::Wait { until_ns: None });
        let (code, quorum) = rs63_with(rule, 7, MS);
        assert_eq!(quorum.verdict(Durability::Code(code.as_ref()), MS), WriteVerdict::Acknowledge { straggler: false });
    }

    #[test]
    fn replicas_leave_one_late_copy_behind_but_never_the_only_one() {
        let mut quorum = WriteQuorum::start(&[true; 4], straggler(), Durability::Copies, 0);
        (0..3).for_each(|copy| quorum.unit_ended(copy, true, Durability::Copies, 4 * MS));
        assert_eq!(quorum.verdict(Durability::Copies, 6 * MS), WriteVerdict::Acknowledge { straggler: true });
        assert_eq!(quorum.copy_state(3), CopyState::Running);
        let mut single = WriteQuorum::start(&[true], straggler(), Durability::Copies, 0);
        assert_eq!(single.verdict(Durability::Copies, 100 * MS), WriteVerdict::Wait { until_ns: None });
        single.unit_ended(0, true, Durability::Copies, 100 * MS);
        assert_eq!(single.verdict(Durability::Copies, 100 * MS), WriteVerdict::Ended);
    }

    #[test]
    fn skipped_copies_count_as_not_durable() {
        let code = CodeSpec::Rs { k: 6, m: 3 }.build().expect("a code");
        let durability = Durability::Code(code.as_ref());
        let mut to_write = [true; 9];
        to_write[8] = false;
        let mut quorum = WriteQuorum::start(&to_write, straggler(), durability, 0);
        (0..7).for_each(|unit| quorum.unit_ended(unit, true, durability, 10 * MS));
        // Seven durable and one down: not all but one; the eighth is awaited.
        assert_eq!(quorum.verdict(durability, 1_000 * MS), WriteVerdict::Wait { until_ns: None });
    }
}
