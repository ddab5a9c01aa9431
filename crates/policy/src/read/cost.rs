//! The per-option costs of Hu et al. section 2.4, and the plan builders all
//! read policies share.
//!
//! Must not: probe (callers pass queue states in; reading a node's rate and overhead is not a
//! probe).

use crate::ClusterView;
use model::{NodeId, Placement, PlannedTask, QueueState, ReadPlan, ReadRequest, RecoverySet, TaskRole, UnitLocation};
use rand::{Rng, RngCore};

/// Marginal load of one task of `bytes` on a node with queue `queue_bytes`
/// and rate `rate`: D·(Q + D/2) / S, equation (6) (and each term of (7)).
#[inline]
pub fn marginal_load(bytes: f64, queue_bytes: f64, rate: f64) -> f64 {
    bytes * (queue_bytes + 0.5 * bytes) / rate
}

/// What a marginal-load decision (LMLF and its variants) charges a task for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MarginalLoad {
    /// The paper's D·(Q + D/2) / S: the growth of ½·L²/S, bytes weighted by 1/S. A node k times
    /// slower is charged k times as much per byte², so against a degraded read of several tasks
    /// on loaded helpers it can still look cheapest while its latency is k times longer.
    #[default]
    Bytes,
    /// D·(Q + D/2) / S²: the growth of ½·(L/S)², the squared time the node needs to drain its
    /// queue. A node k times slower is charged k² times as much, in the units of latency.
    DrainTime,
}

impl MarginalLoad {
    /// The marginal load of one task of `bytes` on a node with queue `queue_bytes` and `rate`.
    #[inline]
    pub fn of(self, bytes: f64, queue_bytes: f64, rate: f64) -> f64 {
        match self {
            MarginalLoad::Bytes => marginal_load(bytes, queue_bytes, rate),
            MarginalLoad::DrainTime => marginal_load(bytes, queue_bytes, rate) / rate,
        }
    }
}

impl std::str::FromStr for MarginalLoad {
    type Err = String;

    fn from_str(name: &str) -> Result<MarginalLoad, String> {
        match name.trim() {
            "bytes" => Ok(MarginalLoad::Bytes),
            "drain-time" => Ok(MarginalLoad::DrainTime),
            other => Err(format!("unknown marginal load {other:?}: use bytes or drain-time")),
        }
    }
}

/// The bytes a node of `rate` could serve in its per-task overhead: what one
/// task weighs beyond its own bytes when the load counts the overhead. A
/// task of D bytes then weighs D + this, and a queue of Q bytes in T tasks
/// weighs Q + T·this, so (Q + D) / S is again the task's latency and the
/// marginal load is in the same units as the paper's.
#[inline]
pub fn overhead_bytes(overhead_ns: u64, rate: f64) -> f64 {
    overhead_ns as f64 * 1e-9 * rate
}

/// One task's overhead on `node` in bytes at its rate, or 0 when the overhead is not counted.
#[inline]
pub fn task_overhead_bytes(view: &dyn ClusterView, node: NodeId, count_task_overhead: bool) -> f64 {
    if count_task_overhead {
        overhead_bytes(view.node_task_overhead_ns(node), view.node_rate_bytes_per_s(node))
    } else {
        0.0
    }
}

/// What a probed queue weighs: its bytes plus each queued task's overhead in bytes (0 when the
/// overhead is not counted).
#[inline]
pub fn queued_load(state: QueueState, task_overhead_bytes: f64) -> f64 {
    state.bytes as f64 + f64::from(state.tasks) * task_overhead_bytes
}

/// Estimated latency of one task: (Q + D) / S (LLF).
#[inline]
pub fn task_latency(bytes: f64, queue_bytes: f64, rate: f64) -> f64 {
    (queue_bytes + bytes) / rate
}

/// The recovery set a sampled policy uses: the local group when the code has
/// one, else a uniformly random set (RS). Returns its index.
pub fn sampled_set(sets: &[RecoverySet], rng: &mut dyn RngCore) -> usize {
    assert!(!sets.is_empty());
    if sets[0].local { 0 } else { rng.random_range(0..sets.len()) }
}

/// The normal task of a request.
pub fn normal_task(placement: &Placement, location: UnitLocation, request: &ReadRequest) -> PlannedTask {
    PlannedTask {
        node: placement.node_of(location.stripe, location.unit),
        unit: location.unit,
        offset: request.offset,
        length: request.length,
        role: TaskRole::Normal,
    }
}

/// The tasks reading `set` for a request, with `role`.
pub fn set_tasks<'a>(
    placement: &'a Placement,
    location: UnitLocation,
    request: &'a ReadRequest,
    set: &'a RecoverySet,
    role: TaskRole,
) -> impl Iterator<Item = PlannedTask> + 'a {
    set.units.iter().map(move |&unit| PlannedTask {
        node: placement.node_of(location.stripe, unit),
        unit,
        offset: request.offset,
        length: request.length,
        role,
    })
}

/// A proactive degraded read of `set`.
pub fn degraded_plan(
    placement: &Placement,
    location: UnitLocation,
    request: &ReadRequest,
    set: &RecoverySet,
) -> ReadPlan {
    ReadPlan::degraded(set_tasks(placement, location, request, set, TaskRole::Degraded).collect())
}
