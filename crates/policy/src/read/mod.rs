//! The seven read policies of Hu et al., "Latency Reduction and Load
//! Balancing in Coded Storage Systems" (SoCC '17), for RS and LRC codes.
//!
//! | policy | decision | probes per request |
//! |---|---|---|
//! | `normal` | the original unit; the fallback recovery set after a timeout | 0 |
//! | `llf` | least estimated latency over normal and every recovery set | n |
//! | `lmlf` | least marginal load Σ D·(Q + D/2) / S over the same | n |
//! | `llf-pw2` | LLF between normal and one sampled recovery set | 1 + \|set\| |
//! | `lmlf-pw2` | LMLF between normal and one sampled recovery set | 1 + \|set\| |
//! | `lmlf-lazy` | LMLF over a queue table probed every T (1 s) | node_count per T |
//! | `opt-lazy` | random by a load-direction table: problem (1), ℓ2, every T (4 s) | node_count per T |
//!
//! Beside them, FAST CLOUD's code-length policies (`fec-fixed`, `fec-greedy`, `fec-bafec`; the
//! [`crate::fec`] module) are read policies too, built here from [`FecSettings`]: n units of the
//! row, done at the first k, n from the frontend's own slots, no probes.
//!
//! Decisions where the paper leaves room, and why:
//! - *Queue size Q* is what a probe returns: the bytes of every unfinished
//!   task on the node (waiting and in service), as the paper's nodes "keep
//!   track of the aggregated size of read tasks".
//! - *Heterogeneity*: costs divide by the node rate S_j (the paper's
//!   generalisation of the ℓ2 metric), latency estimates are (Q + D) / S_j.
//!   As an option (`marginal_load = "drain-time"`) the LMLF policies divide
//!   by S_j² instead, the growth of ½·Σ((L + Q)/S)², so that a node k times
//!   slower costs k² times as much, not k: the paper's form lets small reads
//!   pick a straggler over a degraded read on loaded helpers.
//! - *Ties* go to the normal read, then to the earlier recovery set, so a
//!   decision never depends on float noise between equal options.
//! - *The sampled degraded read* of PW2 (and the fallback of Normal, and the
//!   single combination of Opt-Lazy) is a uniformly random recovery set for
//!   RS and the local group for LRC, as in the paper's section 3.1. For codes
//!   in general: the local set when the code has one, else uniform.
//! - *Full probing on LRC* (`llf`, `lmlf`) considers every recovery set the
//!   codec lists (local and global); the paper does not run it on LRC because
//!   of its probing cost, but nothing forbids it.
//! - *Lazy tables* are per frontend (per policy instance), refreshed by the
//!   executor's periodic hook and not adjusted by the frontend's own
//!   decisions in between: the paper's LMLF-Lazy "suffers from race
//!   conditions since queue status is not up-to-date", which is the point.
//! - *Opt-Lazy demand* D_i is a rate, as in the paper's section 2.3 ("the
//!   instantaneous total request size per second for objects in partition
//!   i"): the bytes requested from partition i during the last period T,
//!   divided by T, counted by each frontend over its own requests and
//!   multiplied by the number of frontends (requests reach frontends
//!   uniformly at random, so this is an unbiased estimate of the total and
//!   every frontend computes a "separate yet nearly identical" table, as in
//!   the paper). The queue table Q is in bytes, so F(L + Q) weighs one second
//!   of directed demand against the standing queue, whatever T is. (Counting
//!   the bytes of the whole period instead weighed Q T times less: the
//!   optimum then tolerated a standing backlog on a hot node of about the
//!   summed demand of T seconds on its recovery set, which grew with load.)
//!   The sampled combination of a partition is drawn afresh at each
//!   refresh. Before the
//!   first refresh every request is a normal read.

pub(crate) mod cost;
mod fec_settings;
mod hedged;
mod lazy;
mod normal;
mod opt_lazy;
mod per_request;

pub use cost::MarginalLoad;
pub use fec_settings::FecSettings;
pub use hedged::{Hedged, HedgedSettings};
pub use lazy::LmlfLazy;
pub use normal::Normal;
pub use opt_lazy::OptLazy;
pub use per_request::{Criterion, PerRequest, Probing};

use crate::ReadPolicy;
use crate::fec::CodeLengthError;
use model::{CodeLayout, NANOS_PER_SECOND};
use optimize::Objective;
use optimize::fec_model::Admission;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The read policies, by their names in configs and reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// Normal read, degraded read on timeout.
    Normal,
    /// Least latency first, full probing.
    Llf,
    /// Least marginal load first, full probing.
    Lmlf,
    /// Least latency first, power-of-two sampling.
    #[serde(rename = "llf-pw2")]
    LlfPw2,
    /// Least marginal load first, power-of-two sampling.
    #[serde(rename = "lmlf-pw2")]
    LmlfPw2,
    /// Least marginal load first over a lazily refreshed queue table.
    LmlfLazy,
    /// Statistical optimisation (problem (1)) over lazily refreshed tables.
    OptLazy,
    /// FAST CLOUD: every read asks for the same n units, done at the first k.
    FecFixed,
    /// FAST CLOUD: n from the idle task slots (Greedy, section V-F).
    FecGreedy,
    /// FAST CLOUD: n from the backlog by the delay model's thresholds (BAFEC, section V-E).
    FecBafec,
    /// Xiang et al.: k of n units drawn with JLWO's marginals π for the frontend's rack.
    Jlwo,
    /// Normal reads around the nodes the frontend saw slow, hedged after an adaptive delay.
    Hedged,
}

impl PolicyKind {
    /// Every policy, in the order of the paper's Table 2.
    pub const ALL: [PolicyKind; 7] = [
        PolicyKind::Normal,
        PolicyKind::LmlfLazy,
        PolicyKind::OptLazy,
        PolicyKind::LmlfPw2,
        PolicyKind::LlfPw2,
        PolicyKind::Lmlf,
        PolicyKind::Llf,
    ];

    /// The five the paper runs on LRC (full probing is too costly there).
    pub const PAPER_LRC: [PolicyKind; 5] =
        [PolicyKind::Normal, PolicyKind::LmlfLazy, PolicyKind::OptLazy, PolicyKind::LmlfPw2, PolicyKind::LlfPw2];

    /// FAST CLOUD's code-length policies (Liang & Kozat), over any MDS code.
    pub const FEC: [PolicyKind; 3] = [PolicyKind::FecFixed, PolicyKind::FecGreedy, PolicyKind::FecBafec];

    /// Whether this policy's reads ask for units of a whole stripe row and are done at the first k
    /// (FAST CLOUD's n of them, `jlwo`'s k drawn with π), so one plan can serve every data unit of
    /// the row.
    pub fn reads_rows(self) -> bool {
        PolicyKind::FEC.contains(&self) || self == PolicyKind::Jlwo
    }

    /// Whether the policy asks nodes for their queues (per request or in its refreshes): it cannot
    /// run where there are no nodes to ask (a gateway over an S3 backend).
    pub fn probes_nodes(self) -> bool {
        !matches!(self, PolicyKind::Normal | PolicyKind::Hedged) && !self.reads_rows()
    }

    /// Canonical name.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Normal => "normal",
            PolicyKind::Llf => "llf",
            PolicyKind::Lmlf => "lmlf",
            PolicyKind::LlfPw2 => "llf-pw2",
            PolicyKind::LmlfPw2 => "lmlf-pw2",
            PolicyKind::LmlfLazy => "lmlf-lazy",
            PolicyKind::OptLazy => "opt-lazy",
            PolicyKind::FecFixed => "fec-fixed",
            PolicyKind::FecGreedy => "fec-greedy",
            PolicyKind::FecBafec => "fec-bafec",
            PolicyKind::Jlwo => "jlwo",
            PolicyKind::Hedged => "hedged",
        }
    }

    /// Frontends the paper used with this policy: 8 for per-request probing,
    /// 3 for the policies with little or no probing.
    pub fn paper_frontends(self) -> u16 {
        match self {
            PolicyKind::Normal | PolicyKind::LmlfLazy | PolicyKind::OptLazy => 3,
            // FAST CLOUD's proxy is one frontend.
            PolicyKind::FecFixed
            | PolicyKind::FecGreedy
            | PolicyKind::FecBafec
            | PolicyKind::Jlwo
            | PolicyKind::Hedged => 1,
            PolicyKind::Llf | PolicyKind::Lmlf | PolicyKind::LlfPw2 | PolicyKind::LmlfPw2 => 8,
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown policy name.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown policy {0:?}: use one of normal, hedged, llf, lmlf, llf-pw2, lmlf-pw2, lmlf-lazy, opt-lazy, fec-fixed, fec-greedy, fec-bafec, jlwo"
)]
pub struct UnknownPolicy(pub String);

impl FromStr for PolicyKind {
    type Err = UnknownPolicy;

    fn from_str(name: &str) -> Result<PolicyKind, UnknownPolicy> {
        PolicyKind::ALL
            .into_iter()
            .chain(PolicyKind::FEC)
            .chain([PolicyKind::Jlwo, PolicyKind::Hedged])
            .find(|k| k.name() == name.trim())
            .ok_or_else(|| UnknownPolicy(name.to_string()))
    }
}

/// Parameters of the read policies. Defaults are the paper's where it gives
/// them (T = 1 s for LMLF-Lazy, 4 s for Opt-Lazy, the ℓ2 objective).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicySettings {
    /// Normal: time from dispatch until the degraded read is launched. The
    /// paper does not give it; its Normal max latency (1.24 s on LRC, which
    /// includes a timeout plus a degraded read) bounds it, so 1 s. LMLF-PW2's cut of Normal's
    /// median depends on it more than on anything else (`scripts/normal-timeout-sensitivity`).
    pub normal_timeout_ms: u64,
    /// LMLF-Lazy: queue table refresh period T (paper: 1 s).
    pub lmlf_lazy_period_ms: u64,
    /// Opt-Lazy: refresh period T of queue table, demand and solve (paper: 4 s).
    pub opt_lazy_period_ms: u64,
    /// Opt-Lazy: the load-balancing metric (paper: ℓ2).
    pub opt_lazy_objective: Objective,
    /// Opt-Lazy: optimise over every recovery set instead of the paper's
    /// simplification (normal + one sampled combination).
    pub opt_lazy_all_combinations: bool,
    /// Count each node's per-task overhead in its load, not only bytes (every policy that reads
    /// queues). The paper measures load in bytes, which is right when service time is
    /// proportional to bytes; with a fixed cost per task (a seek, request handling) a queue of
    /// many small tasks is longer in time than its bytes say, and a node whose overhead grew
    /// (a slowed disk) keeps looking cheap to small reads. Then a task of D bytes weighs
    /// D + o·S and a queue of Q bytes in T tasks weighs Q + T·o·S, where o is the node's
    /// per-task overhead and S its rate. Off by default: the paper's bytes.
    pub count_task_overhead: bool,
    /// What LMLF, LMLF-PW2 and LMLF-Lazy charge a task for: the paper's `bytes`,
    /// D·(Q + D/2) / S, or `drain-time`, D·(Q + D/2) / S², which charges a slower node by the
    /// time it needs rather than by its bytes (see [`MarginalLoad`]). Matters only when node
    /// rates differ.
    pub marginal_load: MarginalLoad,
    /// The FAST CLOUD policies' parameters (`fec-fixed`, `fec-greedy`, `fec-bafec`).
    pub fec: FecSettings,
    /// Xiang et al.'s `jlwo` policy's parameters (docs/lab/xiang.md).
    pub jlwo: crate::classes::scheduling::JlwoReadSettings,
    /// The `hedged` policy's parameters; its longest hedge delay is `normal_timeout_ms`.
    pub hedged: HedgedSettings,
}

impl Default for PolicySettings {
    fn default() -> PolicySettings {
        PolicySettings {
            normal_timeout_ms: 1000,
            lmlf_lazy_period_ms: 1000,
            opt_lazy_period_ms: 4000,
            opt_lazy_objective: Objective::L2,
            opt_lazy_all_combinations: false,
            count_task_overhead: false,
            marginal_load: MarginalLoad::Bytes,
            fec: FecSettings::default(),
            jlwo: crate::classes::scheduling::JlwoReadSettings::default(),
            hedged: HedgedSettings::default(),
        }
    }
}

fn ms_to_ns(ms: u64) -> u64 {
    ms.saturating_mul(NANOS_PER_SECOND / 1000)
}

/// What a policy is built for beyond its settings: the code of the stripes it plans and the
/// frontend's pool of task slots (FAST CLOUD chooses n from it; Hu's policies ignore it).
#[derive(Clone, Copy, Debug)]
pub struct FrontendSetup<'a> {
    /// The code of the stripes the policy plans.
    pub layout: &'a CodeLayout,
    /// L, the frontend's task slots (`None`: unbounded).
    pub slots: Option<u32>,
    /// How the pool admits a request.
    pub admission: Admission,
}

impl<'a> FrontendSetup<'a> {
    /// The setup of a frontend whose pool has `slots` (`None`: unbounded) and admits a request
    /// only with all its tasks' slots idle when `blocking`, else on one idle slot.
    pub fn new(layout: &'a CodeLayout, slots: Option<usize>, blocking: bool) -> FrontendSetup<'a> {
        FrontendSetup {
            layout,
            slots: slots.map(|s| u32::try_from(s).unwrap_or(u32::MAX)),
            admission: if blocking { Admission::Blocking } else { Admission::NonBlocking },
        }
    }
}

/// Why a policy cannot be built for a frontend.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// FAST CLOUD needs any k of a stripe's units to give every unit.
    #[error("{policy} needs an MDS code (Reed-Solomon), any k of whose units give every unit; {code} is not one")]
    NotMds {
        /// The policy asked for.
        policy: PolicyKind,
        /// The code.
        code: String,
    },
    /// BAFEC's thresholds depend on L.
    #[error("fec-bafec needs a bounded task pool: set [data.admission] slots (L)")]
    BafecNeedsSlots,
    /// A FAST CLOUD parameter out of range.
    #[error("fec settings: {0}")]
    BadFecSettings(String),
    /// The `jlwo` policy's settings are out of range.
    #[error("jlwo settings: {0}")]
    Jlwo(String),
    /// The `hedged` policy's settings are out of range.
    #[error("hedged settings: {0}")]
    Hedged(String),
    /// Layers of a profile that do not compose (the profile's check says why, before building).
    #[error("profile: {0}")]
    Composition(String),
    /// The code-length policy refused its classes.
    #[error(transparent)]
    CodeLength(#[from] CodeLengthError),
}

/// Builds one controller's instance of a policy for `frontend`.
pub fn build_read_policy(
    kind: PolicyKind,
    settings: &PolicySettings,
    frontend: &FrontendSetup<'_>,
) -> Result<Box<dyn ReadPolicy + Send>, BuildError> {
    let overhead = settings.count_task_overhead;
    let marginal = Criterion::MarginalLoad(settings.marginal_load);
    Ok(match kind {
        PolicyKind::Normal => Box::new(Normal::new(ms_to_ns(settings.normal_timeout_ms))),
        PolicyKind::Llf => Box::new(PerRequest::new(Criterion::Latency, Probing::Full, overhead)),
        PolicyKind::Lmlf => Box::new(PerRequest::new(marginal, Probing::Full, overhead)),
        PolicyKind::LlfPw2 => Box::new(PerRequest::new(Criterion::Latency, Probing::PowerOfTwo, overhead)),
        PolicyKind::LmlfPw2 => Box::new(PerRequest::new(marginal, Probing::PowerOfTwo, overhead)),
        PolicyKind::LmlfLazy => {
            Box::new(LmlfLazy::new(ms_to_ns(settings.lmlf_lazy_period_ms.max(1)), overhead, settings.marginal_load))
        }
        PolicyKind::OptLazy => Box::new(OptLazy::new(
            ms_to_ns(settings.opt_lazy_period_ms.max(1)),
            settings.opt_lazy_objective,
            settings.opt_lazy_all_combinations,
            overhead,
        )),
        PolicyKind::FecFixed | PolicyKind::FecGreedy | PolicyKind::FecBafec => {
            Box::new(settings.fec.build(kind, frontend)?)
        }
        PolicyKind::Jlwo => {
            Box::new(crate::classes::scheduling::JlwoRead::new(settings.jlwo.clone()).map_err(BuildError::Jlwo)?)
        }
        PolicyKind::Hedged => {
            settings.hedged.validate().map_err(BuildError::Hedged)?;
            Box::new(Hedged::new(settings.hedged.clone(), ms_to_ns(settings.normal_timeout_ms.max(1))))
        }
    })
}

#[cfg(test)]
pub(crate) mod tests;
