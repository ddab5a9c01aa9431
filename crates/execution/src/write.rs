//! One write's execution as a state machine, run by both executors (the simulator's
//! `sim::write` and the gateway's striped and packed writes): which
//! copies are written where, when a failed copy is placed elsewhere and written again, when the
//! write may be acknowledged with copies still landing (what is left pending), and whether what
//! ended durable meets the durability rule. The shell starts it, feeds in what happened
//! ([`WriteEvent`]: a copy's write ended, the node it placed a copy on, the timer) and carries out
//! the [`WriteAction`]s it returns. A copy is a stripe's unit (n of them) or an object's replica.
//!
//! A copy whose write fails is placed on another node (the shell's placer chooses it, away from
//! every node a copy of this write failed on) and written again at once, at most
//! [`WriteSettings::retries`] times; one no node can take, or out of retries, stays missing.
//!
//! Two rules acknowledge with copies still landing, and both are reported to the client as
//! pending (the durability contract's weaker guarantee, the copies brought back in the background
//! or by repair):
//! - **early** (a bucket's `k+1` / `k`, FAST CLOUD's speculative write): as soon as the durable
//!   copies survive the rule's further failures;
//! - **straggler**: the durable copies survive all but one of what the full set survives (all but
//!   one copy landed, for RS and replicas) and the rest are late by more than a share of the time
//!   those took (`StragglerWait`): one slow node does not hold the write, however late it answers.
//!   Never once a write failed: a failure is retried elsewhere and awaited.
//!
//! Once every write has ended the write completes if the durable copies survive
//! [`WriteSettings::min_failures_tolerated`] further failures, and fails otherwise (the shell
//! deletes what landed).
//!
//! Must not: read a clock, do I/O, or know which executor drives it; time is an argument.

use std::collections::VecDeque;

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

/// How one write runs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WriteSettings {
    /// When it may be acknowledged with copies still landing.
    pub rule: WriteRule,
    /// How many times one copy whose write failed is placed elsewhere and written again.
    pub retries: u32,
    /// What the durable copies must survive, once every write has ended, for the write to succeed.
    pub min_failures_tolerated: usize,
}

/// What became of one copy's write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyState {
    /// Not written (its node is down).
    Skipped,
    /// Being written.
    Running,
    /// Its write failed; the shell is placing it elsewhere.
    Placing,
    /// Durable on its node.
    Durable,
    /// Its write failed for good (no node could take it, or out of retries).
    Failed,
}

/// Something that happened to the write, fed in by the shell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteEvent {
    /// Copy `copy`'s write (the last one started) ended, durable or failed.
    Ended {
        /// The copy.
        copy: usize,
        /// Whether it is durable on its node.
        durable: bool,
    },
    /// The shell's answer to [`WriteAction::Place`]: the node the copy goes to, or none.
    Placed {
        /// The copy.
        copy: usize,
        /// Its new node; `None` when no node can take it.
        node: Option<u32>,
    },
    /// The timer armed by [`WriteAction::ArmTimer`] expired (a stale one does nothing).
    TimerFired,
}

/// Something the shell must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteAction {
    /// Write copy `copy` to node `node`.
    Start {
        /// The copy.
        copy: usize,
        /// Its node.
        node: u32,
        /// Whether this is a retry on another node.
        retry: bool,
    },
    /// Choose another node for copy `copy`: none of `avoid` (the nodes a write of this write
    /// failed on) and none holding another copy; answer [`WriteEvent::Placed`] before any other
    /// event.
    Place {
        /// The copy.
        copy: usize,
        /// Nodes not to choose.
        avoid: Vec<u32>,
    },
    /// Feed [`WriteEvent::TimerFired`] at `at_ns` (the shell's clock).
    ArmTimer {
        /// When.
        at_ns: u64,
    },
    /// Acknowledge now: the copies still running ([`WriteExecution::landing`]) are pending, to
    /// land in the background (their failures are repair's, not retried here).
    Acknowledge {
        /// Whether the straggler rule (not the early one) allowed it.
        straggler: bool,
    },
    /// Every write ended and the durable copies meet the durability rule.
    Complete {
        /// Further failures they survive.
        failures_tolerated: usize,
    },
    /// Every write ended and the durable copies do not meet the durability rule.
    Fail {
        /// Further failures they survive (`None`: the bytes cannot be given back).
        failures_tolerated: Option<usize>,
    },
}

/// One write's copies, where they go, and the rule they are acknowledged by; see the module
/// documentation.
#[derive(Clone, Debug)]
pub struct WriteExecution {
    settings: WriteSettings,
    copies: Vec<CopyState>,
    placement: Vec<u32>,
    retries_used: Vec<u32>,
    /// Every node a copy's write failed on, in order.
    failed_nodes: Vec<u32>,
    started_ns: u64,
    /// When the durable copies first survived all but one of the full set's failures.
    straggler_quorum_ns: Option<u64>,
    /// What the straggler rule needs of the durable copies (all but one copy's worth).
    straggler_needs: Option<usize>,
    armed_ns: Option<u64>,
    actions: VecDeque<WriteAction>,
    finished: bool,
}

impl WriteExecution {
    /// Starts a write of the copies flagged in `to_write` to their nodes in `placement` (the
    /// others are skipped, left missing) at `now_ns`.
    pub fn start(
        placement: Vec<u32>,
        to_write: &[bool],
        settings: WriteSettings,
        durability: Durability<'_>,
        now_ns: u64,
    ) -> WriteExecution {
        assert_eq!(placement.len(), to_write.len(), "one node per copy");
        assert!(to_write.contains(&true), "a write writes at least one copy");
        let full = durability.failures_tolerated(&vec![true; to_write.len()]);
        // A set that survives nothing has no straggler to spare.
        let straggler_needs = settings.rule.straggler.and(full).and_then(|full| full.checked_sub(1));
        let copies: Vec<CopyState> =
            to_write.iter().map(|&w| if w { CopyState::Running } else { CopyState::Skipped }).collect();
        let actions = (0..copies.len())
            .filter(|&copy| to_write[copy])
            .map(|copy| WriteAction::Start { copy, node: placement[copy], retry: false })
            .collect();
        let mut execution = WriteExecution {
            settings,
            retries_used: vec![0; copies.len()],
            copies,
            placement,
            failed_nodes: Vec::new(),
            started_ns: now_ns,
            straggler_quorum_ns: None,
            straggler_needs,
            armed_ns: None,
            actions,
            finished: false,
        };
        execution.decide(durability, now_ns);
        execution
    }

    /// Feeds `event` in at `now_ns`.
    pub fn handle(&mut self, event: WriteEvent, durability: Durability<'_>, now_ns: u64) {
        if self.finished {
            return;
        }
        match event {
            WriteEvent::Ended { copy, durable } => self.ended(copy, durable, durability, now_ns),
            WriteEvent::Placed { copy, node } => self.placed(copy, node),
            WriteEvent::TimerFired => {}
        }
        self.decide(durability, now_ns);
    }

    /// The next action for the shell, if any.
    pub fn poll_action(&mut self) -> Option<WriteAction> {
        self.actions.pop_front()
    }

    /// Whether it acknowledged, completed or failed (nothing more will be decided).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Which copies are durable.
    pub fn durable(&self) -> Vec<bool> {
        self.copies.iter().map(|state| *state == CopyState::Durable).collect()
    }

    /// Where each copy is (a copy that failed for good stays on the node it failed on).
    pub fn placement(&self) -> &[u32] {
        &self.placement
    }

    /// The copies still being written (after an acknowledgement: the pending ones).
    pub fn landing(&self) -> Vec<usize> {
        (0..self.copies.len()).filter(|&copy| self.copies[copy] == CopyState::Running).collect()
    }

    /// What became of copy `copy`.
    pub fn copy_state(&self, copy: usize) -> CopyState {
        self.copies[copy]
    }

    fn ended(&mut self, copy: usize, durable: bool, durability: Durability<'_>, now_ns: u64) {
        assert_eq!(self.copies[copy], CopyState::Running, "a copy's write ends once, after it started");
        if durable {
            self.copies[copy] = CopyState::Durable;
            if self.straggler_quorum_ns.is_none()
                && let Some(needs) = self.straggler_needs
                && durability.failures_tolerated(&self.durable()).is_some_and(|t| t >= needs)
            {
                self.straggler_quorum_ns = Some(now_ns.max(self.started_ns));
            }
            return;
        }
        self.failed_nodes.push(self.placement[copy]);
        if self.retries_used[copy] < self.settings.retries {
            self.copies[copy] = CopyState::Placing;
            self.actions.push_back(WriteAction::Place { copy, avoid: self.failed_nodes.clone() });
        } else {
            self.copies[copy] = CopyState::Failed;
        }
    }

    fn placed(&mut self, copy: usize, node: Option<u32>) {
        assert_eq!(self.copies[copy], CopyState::Placing, "a copy is placed once it was asked for");
        let Some(node) = node else {
            self.copies[copy] = CopyState::Failed;
            return;
        };
        assert!(!self.placement.contains(&node), "a copy goes to a node holding no other copy");
        self.placement[copy] = node;
        self.retries_used[copy] += 1;
        self.copies[copy] = CopyState::Running;
        self.actions.push_back(WriteAction::Start { copy, node, retry: true });
    }

    fn had_failure(&self) -> bool {
        !self.failed_nodes.is_empty()
    }

    /// What follows from the copies' states at `now_ns`.
    fn decide(&mut self, durability: Durability<'_>, now_ns: u64) {
        if self.copies.contains(&CopyState::Placing) {
            return;
        }
        let tolerated = durability.failures_tolerated(&self.durable());
        if !self.copies.contains(&CopyState::Running) {
            let met = tolerated.filter(|&t| t >= self.settings.min_failures_tolerated);
            self.finish(match met {
                Some(failures_tolerated) => WriteAction::Complete { failures_tolerated },
                None => WriteAction::Fail { failures_tolerated: tolerated },
            });
            return;
        }
        if self.settings.rule.early_failures_tolerated.is_some_and(|early| tolerated.is_some_and(|t| t >= early)) {
            self.finish(WriteAction::Acknowledge { straggler: false });
            return;
        }
        let (Some(wait), Some(quorum_ns)) = (self.settings.rule.straggler, self.straggler_quorum_ns) else { return };
        if self.had_failure() {
            return;
        }
        let deadline_ns = quorum_ns.saturating_add(wait.wait_ns(quorum_ns - self.started_ns));
        if now_ns >= deadline_ns {
            self.finish(WriteAction::Acknowledge { straggler: true });
        } else if self.armed_ns != Some(deadline_ns) {
            self.armed_ns = Some(deadline_ns);
            self.actions.push_back(WriteAction::ArmTimer { at_ns: deadline_ns });
        }
    }

    fn finish(&mut self, action: WriteAction) {
        self.finished = true;
        self.actions.push_back(action);
    }
}

#[cfg(test)]
mod tests;
