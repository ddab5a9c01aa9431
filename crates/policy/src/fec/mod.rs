//! FAST CLOUD (Liang & Kozat): how many chunks of a request to ask for, and the read that asks
//! them ([`FecRead`]).
//!
//! Owns: the code-length policies — Fixed, Greedy, BAFEC (MBAFEC with several classes) — over
//! the frontend's own state ([`FrontendState`], which an executor reads off its
//! `execution::Admission` pool of L slots), and their backlog measure. Must not: do I/O, read a
//! clock, or look at nodes: FAST CLOUD treats the store as a black box, and n is chosen from the
//! frontend's local bookkeeping alone.

mod fit;
mod read;

pub use fit::{FitInput, OnlineFit};
pub use read::{AckAt, AfterAck, ClassOp, FecRead};

use optimize::fec_model::{Admission, BacklogThresholds, DelayModel, FecClass};
use serde::{Deserialize, Serialize};

/// What the frontend knows of itself when a request arrives (before the request is queued).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontendState {
    /// L: tasks in flight at most ([`FrontendState::UNBOUNDED`] slots when the pool has no bound).
    pub slots: u32,
    /// Slots with no task.
    pub idle_slots: u32,
    /// Requests not yet admitted, every class.
    pub waiting_requests: u32,
    /// Tasks of admitted requests waiting for a slot.
    pub waiting_tasks: u32,
}

impl FrontendState {
    /// The slot count of a pool without a bound (every slot idle).
    pub const UNBOUNDED: u32 = u32::MAX;

    /// A pool without a bound, idle and empty (what a view without a pool answers).
    pub fn unbounded() -> Self {
        FrontendState::from_counts(None, 0, 0, 0)
    }

    /// A pool's state from its counts (`slots` `None`: unbounded, every slot idle).
    pub fn from_counts(slots: Option<usize>, busy: usize, waiting_requests: usize, waiting_tasks: usize) -> Self {
        let clamp = |count: usize| u32::try_from(count).unwrap_or(u32::MAX);
        let (slots, idle_slots) = match slots {
            Some(slots) => (clamp(slots), clamp(slots.saturating_sub(busy))),
            None => (FrontendState::UNBOUNDED, FrontendState::UNBOUNDED),
        };
        FrontendState {
            slots,
            idle_slots,
            waiting_requests: clamp(waiting_requests),
            waiting_tasks: clamp(waiting_tasks),
        }
    }
}

/// One class of requests (an operation on one chunk size): its k and the longest code allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassCode {
    /// Chunks a request needs.
    pub k: u16,
    /// Chunks a request may ask for at most (n_max ≥ k).
    pub n_max: u16,
}

/// What BAFEC counts as "backlog size", which the paper leaves undefined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BacklogMeasure {
    /// Requests waiting for admission, every class, the arriving one not counted (the model's
    /// Q is the request queue's length, so this is the literal reading).
    #[default]
    WaitingRequests,
    /// Waiting requests plus the admitted requests' waiting tasks counted in requests (÷ the
    /// arriving request's k): under non-blocking admission the request queue stays empty until
    /// the task queue backs up, so this sees load building one step earlier.
    WaitingWork,
}

impl BacklogMeasure {
    /// Every measure, for sweeps.
    pub const ALL: [BacklogMeasure; 2] = [BacklogMeasure::WaitingRequests, BacklogMeasure::WaitingWork];

    /// The backlog a request of `k` chunks finds in `state`.
    pub fn of(self, state: &FrontendState, k: u16) -> f64 {
        let requests = f64::from(state.waiting_requests);
        match self {
            BacklogMeasure::WaitingRequests => requests,
            BacklogMeasure::WaitingWork => requests + f64::from(state.waiting_tasks) / f64::from(k.max(1)),
        }
    }

    /// Stable name, as in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            BacklogMeasure::WaitingRequests => "waiting-requests",
            BacklogMeasure::WaitingWork => "waiting-work",
        }
    }
}

/// Which code-length policy, as configured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CodeLengthKind {
    /// The same n for every request of a class (one per class).
    Fixed {
        /// n per class, each within k ..= n_max.
        n: Vec<u16>,
    },
    /// min(idle slots, n_max) when at least k slots are idle, else k (section V-F).
    Greedy,
    /// Backlog thresholds from the delay model (section V-E); with several classes, each class
    /// has its own thresholds over the backlog of every class (MBAFEC, section VI-D).
    Bafec {
        /// What counts as backlog.
        backlog: BacklogMeasure,
    },
}

/// Why a code-length policy cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodeLengthError {
    /// No classes, or a class with k = 0 or n_max < k.
    #[error("class {class}: a code needs 1 ≤ k ≤ n_max (k {k}, n_max {n_max})")]
    BadClass {
        /// The class's index.
        class: usize,
        /// Its k.
        k: u16,
        /// Its n_max.
        n_max: u16,
    },
    /// No classes at all.
    #[error("at least one request class is needed")]
    NoClasses,
    /// Fixed codes given for a different number of classes, or outside k ..= n_max.
    #[error("fixed code lengths {n:?} do not fit the classes (one n per class, k ≤ n ≤ n_max)")]
    BadFixed {
        /// The lengths given.
        n: Vec<u16>,
    },
    /// BAFEC needs a delay model per class.
    #[error("bafec needs one delay model per class ({classes} classes, {models} models)")]
    MissingModels {
        /// Classes configured.
        classes: usize,
        /// Models given.
        models: usize,
    },
    /// Not one operation per class.
    #[error("one operation per class is needed ({classes} classes, {ops} operations)")]
    OpsPerClass {
        /// Classes configured.
        classes: usize,
        /// Operations given.
        ops: usize,
    },
    /// More chunks than slots under blocking admission (such a request could never start).
    #[error("class {class}: n_max {n_max} exceeds the {slots} slots under blocking admission")]
    TooLongForSlots {
        /// The class's index.
        class: usize,
        /// Its n_max.
        n_max: u16,
        /// L.
        slots: u32,
    },
}

/// A code-length policy for one frontend: a pure function of the frontend's state and the
/// request's class (plus, for BAFEC, thresholds computed from the delay models).
#[derive(Clone, Debug, PartialEq)]
pub struct CodeLengthPolicy {
    kind: CodeLengthKind,
    classes: Vec<ClassCode>,
    slots: u32,
    admission: Admission,
    /// BAFEC's table per class (empty for the other kinds).
    thresholds: Vec<BacklogThresholds>,
    /// The delay models the thresholds were computed from (empty for the other kinds).
    models: Vec<DelayModel>,
}

impl CodeLengthPolicy {
    /// The policy `kind` for `classes` on a frontend of `slots` slots admitting by `admission`;
    /// BAFEC computes its thresholds from `models` (one per class, ignored by the other kinds).
    pub fn new(
        kind: CodeLengthKind,
        classes: Vec<ClassCode>,
        slots: u32,
        admission: Admission,
        models: &[DelayModel],
    ) -> Result<CodeLengthPolicy, CodeLengthError> {
        if classes.is_empty() {
            return Err(CodeLengthError::NoClasses);
        }
        for (class, code) in classes.iter().enumerate() {
            if code.k == 0 || code.n_max < code.k {
                return Err(CodeLengthError::BadClass { class, k: code.k, n_max: code.n_max });
            }
            if admission == Admission::Blocking && u32::from(code.n_max) > slots {
                return Err(CodeLengthError::TooLongForSlots { class, n_max: code.n_max, slots });
            }
        }
        if let CodeLengthKind::Fixed { n } = &kind {
            let fits = n.len() == classes.len() && n.iter().zip(&classes).all(|(&n, c)| (c.k..=c.n_max).contains(&n));
            if !fits {
                return Err(CodeLengthError::BadFixed { n: n.clone() });
            }
        }
        let mut policy =
            CodeLengthPolicy { kind, classes, slots, admission, thresholds: Vec::new(), models: Vec::new() };
        if matches!(policy.kind, CodeLengthKind::Bafec { .. }) {
            policy.set_delay_models(models)?;
        }
        Ok(policy)
    }

    /// Recomputes BAFEC's thresholds from freshly fitted `models` (one per class); the other
    /// kinds ignore them. A wrong count changes nothing.
    pub fn set_delay_models(&mut self, models: &[DelayModel]) -> Result<(), CodeLengthError> {
        if !matches!(self.kind, CodeLengthKind::Bafec { .. }) {
            return Ok(());
        }
        if models.len() != self.classes.len() {
            return Err(CodeLengthError::MissingModels { classes: self.classes.len(), models: models.len() });
        }
        self.models = models.to_vec();
        self.thresholds = self
            .classes
            .iter()
            .zip(models)
            .map(|(code, &delay)| {
                let class =
                    FecClass { delay, k: usize::from(code.k), slots: self.slots as usize, admission: self.admission };
                class.thresholds(usize::from(code.n_max))
            })
            .collect();
        Ok(())
    }

    /// Stable name: `fixed`, `greedy`, `bafec`, or `mbafec` (BAFEC over several classes).
    pub fn name(&self) -> &'static str {
        match self.kind {
            CodeLengthKind::Fixed { .. } => "fixed",
            CodeLengthKind::Greedy => "greedy",
            CodeLengthKind::Bafec { .. } if self.classes.len() > 1 => "mbafec",
            CodeLengthKind::Bafec { .. } => "bafec",
        }
    }

    /// The configured kind.
    pub fn kind(&self) -> &CodeLengthKind {
        &self.kind
    }

    /// The classes, in index order.
    pub fn classes(&self) -> &[ClassCode] {
        &self.classes
    }

    /// BAFEC's thresholds per class (empty for the other kinds).
    pub fn thresholds(&self) -> &[BacklogThresholds] {
        &self.thresholds
    }

    /// The delay models BAFEC's thresholds come from, per class (empty for the other kinds).
    pub fn models(&self) -> &[DelayModel] {
        &self.models
    }

    /// n for a request of `class` arriving to find the frontend in `state`.
    pub fn code_length(&self, state: &FrontendState, class: usize) -> u16 {
        let code = self.classes[class];
        let n = match &self.kind {
            CodeLengthKind::Fixed { n } => n[class],
            CodeLengthKind::Greedy => {
                let idle = u16::try_from(state.idle_slots).unwrap_or(u16::MAX);
                if idle >= code.k { idle.min(code.n_max) } else { code.k }
            }
            CodeLengthKind::Bafec { backlog } => {
                let found = backlog.of(state, code.k);
                u16::try_from(self.thresholds[class].code_length(found)).expect("n_max is a u16")
            }
        };
        debug_assert!((code.k..=code.n_max).contains(&n), "{n} outside {code:?}");
        n
    }
}

#[cfg(test)]
mod tests;
