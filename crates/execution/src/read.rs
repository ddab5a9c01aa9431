//! One read plan's execution as a state machine: the shell starts it, feeds it what happened to
//! the tasks (finished, failed, cancelled) and the timer, and carries out the actions it returns
//! (start a task, cancel a task, arm the timer, complete from these tasks, fail). Every quorum of
//! [`model::Quorum`] runs here and nowhere else.
//!
//! A task is resolved once its result or its failure reached the shell, or its cancel took effect
//! (the node dropped it); the execution is settled when it has completed or failed and every task
//! it launched is resolved, which is when a record can be written.
//!
//! Must not: read a clock, do I/O, or know which executor drives it.

use std::collections::VecDeque;

use codec::ErasureCode;
use model::{Quorum, ReadPlan, TaskRole};

use crate::recovery::determines;

/// The target of a read of a whole stripe (an EC-Store block): every data unit. Such a read
/// completes from the units that determine all of them and says it decoded unless those are the
/// data units themselves.
pub const WHOLE_STRIPE: u8 = u8::MAX;

/// What became of one planned task, as far as the execution knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    /// Not launched (a fallback task before its timeout, or never).
    Dormant,
    /// Launched; no answer yet.
    Running,
    /// A cancel was sent; the task may still finish.
    CancelSent,
    /// Its bytes arrived.
    Finished,
    /// It failed (error, node refused or unreachable).
    Failed,
    /// Its cancel took effect: it never delivered.
    Cancelled,
}

impl TaskState {
    fn is_unresolved(self) -> bool {
        matches!(self, TaskState::Running | TaskState::CancelSent)
    }
}

/// Something that happened to the execution, fed in by the shell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Task `task` (index into the plan's tasks) delivered its bytes.
    Finished {
        /// The task.
        task: usize,
    },
    /// Task `task` failed.
    Failed {
        /// The task.
        task: usize,
    },
    /// The cancel of task `task` took effect: the node dropped it before it delivered.
    Cancelled {
        /// The task.
        task: usize,
    },
    /// The timer armed by [`Action::ArmTimer`] expired (a stale one does nothing).
    TimerFired,
    /// The requester went away: cancel everything, complete nothing.
    Abort,
}

/// Why an execution failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailReason {
    /// Too many tasks failed for the quorum to be met.
    TooManyFailed,
    /// Every task answered but their units do not give the target.
    NotDecodable,
    /// The shell aborted it.
    Aborted,
    /// The plan's deadline passed before it completed.
    DeadlinePassed,
}

/// Something the shell must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send task `task` to its node.
    Start {
        /// The task.
        task: usize,
    },
    /// Cancel task `task` on its node (it may finish anyway).
    Cancel {
        /// The task.
        task: usize,
    },
    /// Feed [`Event::TimerFired`] at `at_ns` (the shell's clock).
    ArmTimer {
        /// When.
        at_ns: u64,
    },
    /// The read is served from the bytes of the tasks [`ReadExecution::served_by`] lists (in the
    /// order they finished): the target's own when `decoded` is false, else the units to decode it
    /// from.
    Complete {
        /// Whether the target is rebuilt from other units (a degraded read).
        decoded: bool,
    },
    /// The plan cannot serve the read.
    Fail {
        /// Why.
        reason: FailReason,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Running,
    Completed,
    Failed(FailReason),
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    unit: u8,
    role: TaskRole,
    state: TaskState,
}

/// The execution of one read plan for one target unit.
#[derive(Clone, Debug)]
pub struct ReadExecution {
    quorum: Quorum,
    target: u8,
    tasks: Vec<Slot>,
    /// Finished tasks in the order they finished.
    finished: Vec<usize>,
    /// The tasks whose bytes serve the read, once it completed.
    served_by: Vec<usize>,
    phase: Phase,
    fallback_launched: bool,
    timed_out: bool,
    /// Under [`Quorum::FirstCopy`]: when the armed timer fires (the next copy's launch is a wait
    /// after it).
    timer_at_ns: u64,
    /// Whether the armed timer is the plan's deadline (a plan with one arms no other timer).
    deadline_armed: bool,
    actions: VecDeque<Action>,
}

impl ReadExecution {
    /// Starts executing `plan` (already validated) to read unit `target` at `now_ns`: the tasks to
    /// start and the timer come out of [`ReadExecution::poll_action`].
    pub fn start(plan: &ReadPlan, target: u8, now_ns: u64) -> ReadExecution {
        let mut execution = ReadExecution {
            quorum: plan.quorum,
            target,
            tasks: Vec::with_capacity(plan.tasks.len()),
            finished: Vec::with_capacity(plan.tasks.len()),
            served_by: Vec::with_capacity(plan.tasks.len()),
            phase: Phase::Running,
            fallback_launched: false,
            timed_out: false,
            timer_at_ns: 0,
            deadline_armed: false,
            actions: VecDeque::with_capacity(plan.tasks.len() + 2),
        };
        execution.restart(plan, target, now_ns);
        execution
    }

    /// Starts executing another plan in this execution's place, reusing its buffers (an executor
    /// that runs millions of reads allocates nothing per read this way). Whatever the previous
    /// execution had not settled is forgotten.
    pub fn restart(&mut self, plan: &ReadPlan, target: u8, now_ns: u64) {
        debug_assert!(plan.validate().is_ok(), "{:?}", plan.validate());
        self.quorum = plan.quorum;
        self.target = target;
        self.tasks.clear();
        self.tasks.extend(plan.tasks.iter().map(|t| Slot { unit: t.unit, role: t.role, state: TaskState::Dormant }));
        self.finished.clear();
        self.served_by.clear();
        self.phase = Phase::Running;
        self.fallback_launched = false;
        self.timed_out = false;
        self.deadline_armed = false;
        self.actions.clear();
        for task in 0..self.tasks.len() {
            if self.tasks[task].role != TaskRole::Fallback {
                self.launch(task);
            }
        }
        match plan.quorum {
            Quorum::NormalThenFallback { timeout_ns } => {
                self.actions.push_back(Action::ArmTimer { at_ns: now_ns.saturating_add(timeout_ns) });
            }
            Quorum::FirstCopy { wait_ns } if self.tasks.len() > 1 => self.arm_timer(now_ns.saturating_add(wait_ns)),
            _ => {}
        }
        if let Some(deadline_ns) = plan.deadline_ns {
            self.deadline_armed = true;
            self.arm_timer(now_ns.saturating_add(deadline_ns));
        }
    }

    fn arm_timer(&mut self, at_ns: u64) {
        self.timer_at_ns = at_ns;
        self.actions.push_back(Action::ArmTimer { at_ns });
    }

    /// The tasks whose bytes serve the completed read, in the order they finished (empty before
    /// [`Action::Complete`]).
    #[inline]
    pub fn served_by(&self) -> &[usize] {
        &self.served_by
    }

    /// Feeds one event; `code` is the stripe's code (a quorum of units may need to rebuild the
    /// target). Events for a task that is already resolved are refused as the shell's bug.
    #[inline]
    pub fn handle(&mut self, event: Event, code: &dyn ErasureCode) {
        match event {
            Event::Finished { task } => self.finished(task, code),
            Event::Failed { task } => self.failed(task, code),
            Event::Cancelled { task } => {
                assert!(self.tasks[task].state.is_unresolved(), "task {task} cancelled while {:?}", self.tasks[task]);
                self.tasks[task].state = TaskState::Cancelled;
                self.after_a_task_left(code);
            }
            Event::TimerFired => self.timer_fired(),
            Event::Abort => {
                if self.phase == Phase::Running {
                    self.fail(FailReason::Aborted);
                }
            }
        }
    }

    /// The next action for the shell, in the order the execution decided them.
    #[inline]
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Whether the read completed (its bytes are available).
    #[inline]
    pub fn is_complete(&self) -> bool {
        self.phase == Phase::Completed
    }

    /// Why the read failed, if it did.
    #[inline]
    pub fn failure(&self) -> Option<FailReason> {
        match self.phase {
            Phase::Failed(reason) => Some(reason),
            _ => None,
        }
    }

    /// Whether the read is over (completed or failed) and every launched task resolved.
    #[inline]
    pub fn is_settled(&self) -> bool {
        self.phase != Phase::Running && !self.tasks.iter().any(|t| t.state.is_unresolved())
    }

    /// Whether the fallback launched because the timer fired while the normal task was out, or
    /// the plan's deadline passed.
    #[inline]
    pub fn timed_out(&self) -> bool {
        self.timed_out
    }

    /// The state of task `task`.
    #[inline]
    pub fn task_state(&self, task: usize) -> TaskState {
        self.tasks[task].state
    }

    fn launch(&mut self, task: usize) {
        debug_assert_eq!(self.tasks[task].state, TaskState::Dormant);
        self.tasks[task].state = TaskState::Running;
        self.actions.push_back(Action::Start { task });
    }

    fn finished(&mut self, task: usize, code: &dyn ErasureCode) {
        assert!(self.tasks[task].state.is_unresolved(), "task {task} finished while {:?}", self.tasks[task]);
        self.tasks[task].state = TaskState::Finished;
        self.finished.push(task);
        if self.phase != Phase::Running {
            return;
        }
        match self.quorum {
            Quorum::All => {
                if self.tasks.iter().all(|t| t.state == TaskState::Finished) {
                    self.complete_from_finished(code, |_| true);
                }
            }
            Quorum::AnyK { k } | Quorum::FirstKOfN { k } => {
                if self.finished.len() >= usize::from(k) && self.finished_determine_target(code, |_| true) {
                    self.complete_from_finished(code, |_| true);
                } else {
                    self.after_a_task_left(code);
                }
            }
            Quorum::FirstCopy { .. } => {
                self.served_by.push(task);
                self.complete(false);
            }
            Quorum::NormalThenFallback { .. } => {
                if self.tasks[task].role == TaskRole::Normal {
                    self.served_by.push(task);
                    self.complete(false);
                } else if self.fallback_side_finished() {
                    if self.finished_determine_target(code, is_fallback) {
                        self.complete_from_finished(code, is_fallback);
                    } else {
                        self.fallback_side_failed();
                    }
                }
            }
        }
    }

    fn failed(&mut self, task: usize, code: &dyn ErasureCode) {
        assert!(self.tasks[task].state.is_unresolved(), "task {task} failed while {:?}", self.tasks[task]);
        self.tasks[task].state = TaskState::Failed;
        if self.phase != Phase::Running {
            return;
        }
        match self.quorum {
            Quorum::All => self.fail(FailReason::TooManyFailed),
            Quorum::AnyK { .. } | Quorum::FirstKOfN { .. } | Quorum::FirstCopy { .. } => self.after_a_task_left(code),
            Quorum::NormalThenFallback { .. } => {
                if self.tasks[task].role == TaskRole::Normal {
                    if self.fallback_launched {
                        self.after_a_task_left(code);
                    } else {
                        self.launch_fallback();
                    }
                } else {
                    self.fallback_side_failed();
                }
            }
        }
    }

    /// A task left without delivering, or a side gave up: fails the read if what is still out
    /// cannot meet the quorum any more.
    fn after_a_task_left(&mut self, code: &dyn ErasureCode) {
        if self.phase != Phase::Running {
            return;
        }
        let hopeful = |state: TaskState| matches!(state, TaskState::Running | TaskState::Dormant);
        match self.quorum {
            Quorum::All => {}
            Quorum::AnyK { k } | Quorum::FirstKOfN { k } => {
                let possible = self.finished.len() + self.tasks.iter().filter(|t| hopeful(t.state)).count();
                let out = self.tasks.iter().any(|t| t.state == TaskState::Running);
                if possible < usize::from(k) || (!out && !self.finished_determine_target(code, |_| true)) {
                    self.fail(if possible < usize::from(k) {
                        FailReason::TooManyFailed
                    } else {
                        FailReason::NotDecodable
                    });
                }
            }
            Quorum::FirstCopy { .. } => {
                // Nothing out: the next copy now rather than at its timer; none left fails.
                if !self.tasks.iter().any(|t| t.state == TaskState::Running) && !self.launch_next_copy() {
                    self.fail(FailReason::TooManyFailed);
                }
            }
            Quorum::NormalThenFallback { .. } => {
                let normal_out = self.tasks[0].state == TaskState::Running;
                let fallback_out = self.tasks[1..].iter().any(|t| t.state == TaskState::Running);
                if !normal_out && !fallback_out {
                    self.fail(FailReason::TooManyFailed);
                }
            }
        }
    }

    /// The fallback set cannot give the target: its tasks still out are cancelled; the normal task
    /// may still win.
    fn fallback_side_failed(&mut self) {
        for task in 1..self.tasks.len() {
            self.cancel(task);
        }
        if self.tasks[0].state == TaskState::Running {
            return;
        }
        let reason = if self.fallback_side_finished() { FailReason::NotDecodable } else { FailReason::TooManyFailed };
        self.fail(reason);
    }

    /// Launches the first copy not launched yet; false when none is left.
    fn launch_next_copy(&mut self) -> bool {
        let Some(next) = self.tasks.iter().position(|t| t.state == TaskState::Dormant) else { return false };
        self.launch(next);
        true
    }

    fn timer_fired(&mut self) {
        if self.deadline_armed {
            if self.phase == Phase::Running {
                self.timed_out = true;
                self.fail(FailReason::DeadlinePassed);
            }
            return;
        }
        if let Quorum::FirstCopy { wait_ns } = self.quorum {
            if self.phase == Phase::Running && self.launch_next_copy() {
                self.timed_out = true;
                if self.tasks.iter().any(|t| t.state == TaskState::Dormant) {
                    self.arm_timer(self.timer_at_ns.saturating_add(wait_ns));
                }
            }
            return;
        }
        let Quorum::NormalThenFallback { .. } = self.quorum else { return };
        if self.phase != Phase::Running || self.fallback_launched || self.tasks[0].state != TaskState::Running {
            return;
        }
        self.timed_out = true;
        self.launch_fallback();
    }

    fn launch_fallback(&mut self) {
        self.fallback_launched = true;
        for task in 1..self.tasks.len() {
            self.launch(task);
        }
    }

    fn fallback_side_finished(&self) -> bool {
        self.tasks[1..].iter().all(|t| t.state == TaskState::Finished)
    }

    /// Whether the finished tasks that `counts` admits give the target.
    fn finished_determine_target(&self, code: &dyn ErasureCode, counts: impl Fn(TaskRole) -> bool) -> bool {
        // A code has at most 255 units: a flag per unit fits on the stack.
        let mut present = [false; 256];
        let present = &mut present[..code.total_units()];
        for &task in &self.finished {
            let slot = self.tasks[task];
            if counts(slot.role) {
                present[usize::from(slot.unit)] = true;
            }
        }
        if self.target == WHOLE_STRIPE {
            return (0..code.data_units()).all(|unit| determines(code, present, unit));
        }
        determines(code, present, usize::from(self.target))
    }

    /// Completes from the finished tasks that `counts` admits: the target's own task if it is
    /// among them, else all of them (the shell decodes from them).
    fn complete_from_finished(&mut self, code: &dyn ErasureCode, counts: impl Fn(TaskRole) -> bool) {
        let own =
            self.finished.iter().copied().find(|&t| counts(self.tasks[t].role) && self.tasks[t].unit == self.target);
        if let Some(own) = own {
            self.served_by.push(own);
            self.complete(false);
        } else if self.finished_determine_target(code, &counts) {
            let ReadExecution { finished, served_by, tasks, .. } = self;
            served_by.extend(finished.iter().copied().filter(|&t| counts(tasks[t].role)));
            let decoded = self.target != WHOLE_STRIPE || !self.served_by_every_data_unit(code.data_units());
            self.complete(decoded);
        } else {
            self.fail(FailReason::NotDecodable);
        }
    }

    /// Whether the units serving the read include every data unit (a whole-stripe read that
    /// needs no decoding).
    fn served_by_every_data_unit(&self, data_units: usize) -> bool {
        (0..data_units).all(|unit| self.served_by.iter().any(|&t| usize::from(self.tasks[t].unit) == unit))
    }

    fn complete(&mut self, decoded: bool) {
        self.phase = Phase::Completed;
        self.actions.push_back(Action::Complete { decoded });
        // Late binding (any k) lets the others run to their end; every other rule cancels them.
        if !matches!(self.quorum, Quorum::AnyK { .. }) {
            for task in 0..self.tasks.len() {
                self.cancel(task);
            }
        }
    }

    fn fail(&mut self, reason: FailReason) {
        self.phase = Phase::Failed(reason);
        self.actions.push_back(Action::Fail { reason });
        for task in 0..self.tasks.len() {
            self.cancel(task);
        }
    }

    fn cancel(&mut self, task: usize) {
        if self.tasks[task].state == TaskState::Running {
            self.tasks[task].state = TaskState::CancelSent;
            self.actions.push_back(Action::Cancel { task });
        }
    }
}

fn is_fallback(role: TaskRole) -> bool {
    role == TaskRole::Fallback
}

#[cfg(test)]
mod tests;
