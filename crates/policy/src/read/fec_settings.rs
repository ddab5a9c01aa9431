//! The `fec` table of [`super::PolicySettings`]: FAST CLOUD's parameters as a gateway or a
//! simulation configures them, and the one-class [`FecRead`] they build (reads of the frontend's
//! code: k its data units, n up to its every unit).
//!
//! Owns the parameters' defaults and validation. Must not plan anything (that is [`FecRead`]'s).

use super::{BuildError, FrontendSetup, PolicyKind};
use crate::fec::{BacklogMeasure, ClassCode, CodeLengthKind, CodeLengthPolicy, FecRead, FrontendState, OnlineFit};
use codec::CodeSpec;
use model::NANOS_PER_SECOND;
use optimize::fec_model::DelayModel;
use serde::{Deserialize, Serialize};

/// Most task delays the online fit keeps.
pub const MAX_FIT_WINDOW_TASKS: u32 = 1 << 20;

/// FAST CLOUD's parameters. The delay model is the one BAFEC's thresholds start from; with
/// `fit_period_ms` > 0 the policy refits it from its own tasks' delays every period, once
/// `fit_min_finished` have finished.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FecSettings {
    /// `fec-fixed`'s n; 0 (the default) asks for `n_max`.
    pub fixed_n: u16,
    /// The most units a read asks for; 0 (the default) is every unit of the code.
    pub n_max: u16,
    /// What `fec-bafec` counts as backlog (the paper leaves it undefined; docs/lab/fastcloud.md).
    pub backlog: BacklogMeasure,
    /// Δ of the starting delay model, ms. Default 61, the paper's 1 MB S3 read fit.
    pub delay_shift_ms: f64,
    /// 1/μ of the starting delay model, ms. Default 79, the same fit (mean 140 ms).
    pub delay_exp_mean_ms: f64,
    /// How often the delay model is refitted from the policy's own tasks, ms; 0 keeps the
    /// starting model. Default 4000 (Opt-Lazy's period).
    pub fit_period_ms: u64,
    /// The most recent task delays a fit uses. Default 8192.
    pub fit_window_tasks: u32,
    /// Finished tasks in the window before a fit replaces the model. Default 256.
    pub fit_min_finished: u32,
}

impl Default for FecSettings {
    fn default() -> FecSettings {
        FecSettings {
            fixed_n: 0,
            n_max: 0,
            backlog: BacklogMeasure::WaitingRequests,
            delay_shift_ms: 61.0,
            delay_exp_mean_ms: 79.0,
            fit_period_ms: 4000,
            fit_window_tasks: 8192,
            fit_min_finished: 256,
        }
    }
}

impl FecSettings {
    /// The starting delay model, or why it is not one.
    pub fn delay_model(&self) -> Result<DelayModel, BuildError> {
        DelayModel::new(self.delay_shift_ms / 1e3, self.delay_exp_mean_ms / 1e3).ok_or_else(|| {
            BuildError::BadFecSettings(format!(
                "delay_shift_ms must be ≥ 0 and delay_exp_mean_ms > 0 (got {} and {})",
                self.delay_shift_ms, self.delay_exp_mean_ms
            ))
        })
    }

    /// Checks what does not depend on the code.
    pub fn validate(&self) -> Result<(), BuildError> {
        self.delay_model()?;
        let window = self.fit_window_tasks;
        if self.fit_period_ms > 0 && !(2..=MAX_FIT_WINDOW_TASKS).contains(&window) {
            return Err(BuildError::BadFecSettings(format!(
                "fit_window_tasks must be 2 to {MAX_FIT_WINDOW_TASKS} (got {window})"
            )));
        }
        if self.fit_period_ms > 0 && !(2..=window).contains(&self.fit_min_finished) {
            return Err(BuildError::BadFecSettings(format!(
                "fit_min_finished must be 2 to fit_window_tasks ({window}) (got {})",
                self.fit_min_finished
            )));
        }
        Ok(())
    }

    /// The one-class read policy `kind` for `frontend`.
    pub(crate) fn build(&self, kind: PolicyKind, frontend: &FrontendSetup<'_>) -> Result<FecRead, BuildError> {
        self.validate()?;
        let spec = frontend.layout.spec();
        if !matches!(spec, CodeSpec::Rs { .. }) {
            return Err(BuildError::NotMds { policy: kind, code: spec.to_string() });
        }
        let total = u16::try_from(spec.total_units()).expect("a code has at most 255 units");
        let k = u16::try_from(spec.data_units()).expect("a code has at most 255 units");
        let n_max = if self.n_max == 0 { total } else { self.n_max };
        if !(k..=total).contains(&n_max) {
            return Err(BuildError::BadFecSettings(format!("n_max must be {k} to {total} for {spec} (got {n_max})")));
        }
        let code_length = match kind {
            PolicyKind::FecFixed => {
                CodeLengthKind::Fixed { n: vec![if self.fixed_n == 0 { n_max } else { self.fixed_n }] }
            }
            PolicyKind::FecGreedy => CodeLengthKind::Greedy,
            PolicyKind::FecBafec if frontend.slots.is_none() => return Err(BuildError::BafecNeedsSlots),
            PolicyKind::FecBafec => CodeLengthKind::Bafec { backlog: self.backlog },
            other => unreachable!("{other} is not a FAST CLOUD policy"),
        };
        let slots = frontend.slots.unwrap_or(FrontendState::UNBOUNDED);
        let classes = vec![ClassCode { k, n_max }];
        let policy = CodeLengthPolicy::new(code_length, classes, slots, frontend.admission, &[self.delay_model()?])?;
        let read = FecRead::new(policy, frontend.layout)?;
        Ok(match self.fit_period_ms {
            0 => read,
            period_ms => read.with_online_fit(OnlineFit::new(
                period_ms.saturating_mul(NANOS_PER_SECOND / 1000),
                self.fit_window_tasks as usize,
                self.fit_min_finished as usize,
                1,
            )),
        })
    }
}
