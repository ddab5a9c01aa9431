//! FAST CLOUD's online delay fit: the policy keeps the delays of its own recent tasks per class
//! (from the records its executor hands back) and, every period, refits the Δ+Exp model and
//! recomputes BAFEC's thresholds from it, off the request path (the refresh work pattern).
//!
//! A task's delay is what the frontend saw of it: from entering the node until it finished. A
//! task cancelled at a request's k-th finish is a censored delay (it had run that long and would
//! have run longer); the fit uses both ([`DelayModel::fit_censored`]), because the paper's fit
//! over the finished alone takes a race's winners for the distribution. Failed tasks and tasks
//! that never reached a node say nothing and are left out.
//!
//! Owns the bounded windows of samples and the last fits. Must not read a clock: times come
//! from the records.

use std::collections::VecDeque;

use model::{NEVER, RequestRecord, TaskRecord};
use optimize::fec_model::{DelayFit, DelayModel};

/// One task's delay in seconds, and whether it was cut short (censored).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    delay_s: f64,
    censored: bool,
}

/// The online fit's state: per class, the most recent task delays (at most `window`).
#[derive(Clone, Debug)]
pub struct OnlineFit {
    period_ns: u64,
    window: usize,
    min_finished: usize,
    samples: Vec<VecDeque<Sample>>,
    last_fits: Vec<Option<DelayFit>>,
}

impl OnlineFit {
    /// A fit every `period_ns` over the last `window` delays of each of `classes` classes, once
    /// `min_finished` of them finished.
    pub fn new(period_ns: u64, window: usize, min_finished: usize, classes: usize) -> OnlineFit {
        assert!(period_ns > 0 && window >= min_finished && min_finished >= 2, "validated by the settings");
        OnlineFit {
            period_ns,
            window,
            min_finished,
            samples: vec![VecDeque::with_capacity(window.min(1 << 14)); classes],
            last_fits: vec![None; classes],
        }
    }

    /// The refit period.
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// The fits installed by the last refresh, per class (`None` before enough tasks).
    pub fn last_fits(&self) -> &[Option<DelayFit>] {
        &self.last_fits
    }

    /// Keeps the delays of `tasks`, of a request of `request.class`.
    pub fn observe(&mut self, request: &RequestRecord, tasks: &[TaskRecord]) {
        let Some(window) = self.samples.get_mut(usize::from(request.class)) else { return };
        for task in tasks {
            let Some(sample) = sample_of(task) else { continue };
            if window.len() == self.window {
                window.pop_front();
            }
            window.push_back(sample);
        }
    }

    /// What a refit needs, detached from the policy: the samples of each class as (finished,
    /// censored) delays.
    pub fn snapshot(&self) -> FitInput {
        let classes = self
            .samples
            .iter()
            .map(|window| {
                let (mut finished, mut censored) = (Vec::new(), Vec::new());
                for sample in window {
                    if sample.censored { &mut censored } else { &mut finished }.push(sample.delay_s);
                }
                (finished, censored)
            })
            .collect();
        FitInput { classes, min_finished: self.min_finished }
    }

    /// The fit of class 0 over every task of `records` at once (a report's view of what the
    /// online fit makes of a run), `None` with fewer than two finished.
    pub fn fit_records<'a>(
        records: impl IntoIterator<Item = (&'a RequestRecord, &'a [TaskRecord])>,
    ) -> Option<DelayFit> {
        let records: Vec<_> = records.into_iter().collect();
        let tasks = records.iter().map(|(_, tasks)| tasks.len()).sum::<usize>().max(2);
        let mut fit = OnlineFit::new(1, tasks, 2, 1);
        for (request, tasks) in records {
            fit.observe(request, tasks);
        }
        fit.snapshot().fit().pop().flatten()
    }

    /// Installs the fits a [`FitInput::fit`] computed.
    pub fn install(&mut self, fits: Vec<Option<DelayFit>>) {
        assert_eq!(fits.len(), self.last_fits.len(), "one fit per class");
        self.last_fits = fits;
    }
}

/// A task's delay as the frontend saw it, `None` when it says nothing of the distribution.
fn sample_of(task: &TaskRecord) -> Option<Sample> {
    if task.failed || task.enqueue_ns == NEVER {
        return None;
    }
    if task.cancelled {
        // Cancelled while it waited or ran: it would have taken longer than it had.
        let run_ns = task.cancel_ns.checked_sub(task.enqueue_ns)?;
        return Some(Sample { delay_s: run_ns as f64 / 1e9, censored: true });
    }
    if task.finish_ns == NEVER {
        // Never left the frontend (a fallback not launched).
        return None;
    }
    let delay_ns = task.finish_ns.checked_sub(task.enqueue_ns)?;
    Some(Sample { delay_s: delay_ns as f64 / 1e9, censored: false })
}

/// The samples of one refit, per class.
#[derive(Clone, Debug)]
pub struct FitInput {
    classes: Vec<(Vec<f64>, Vec<f64>)>,
    min_finished: usize,
}

impl FitInput {
    /// The fit of each class, `None` for a class with fewer than the minimum finished (or whose
    /// samples do not fit).
    pub fn fit(&self) -> Vec<Option<DelayFit>> {
        self.classes
            .iter()
            .map(|(finished, censored)| {
                if finished.len() < self.min_finished {
                    return None;
                }
                if censored.is_empty() {
                    // Nothing raced: the paper's fit, as published.
                    DelayModel::fit(finished)
                } else {
                    DelayModel::fit_censored(finished, censored)
                }
            })
            .collect()
    }
}
