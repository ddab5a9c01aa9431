//! Per-request optimal decisions (Hu et al. sections 2.4 and 2.5): probe the
//! nodes concerned, then pick the normal read or the recovery set of least
//! cost. LLF minimises the estimated request latency (the ℓ∞ objective of
//! problem (1) for one request); LMLF minimises the marginal load (its ℓ2
//! objective). Full probing asks every node of the stripe; power-of-two
//! sampling asks the original node and one sampled recovery set.
//!
//! Must not: keep state between requests beyond scratch buffers.

use super::cost::{
    MarginalLoad, degraded_plan, normal_task, queued_load, sampled_set, task_latency, task_overhead_bytes,
};
use crate::{ClusterView, ReadPolicy};
use model::{CodeLayout, NodeId, ReadPlan, ReadRequest, RecoverySet};
use rand::RngCore;

/// What a per-request decision minimises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Criterion {
    /// Estimated request latency: the normal task's (Q + D) / S, or the
    /// slowest task of a recovery set.
    Latency,
    /// Marginal load: Σ over the plan's tasks of D·(Q + D/2) / S (or / S², see
    /// [`MarginalLoad`]).
    MarginalLoad(MarginalLoad),
}

impl Criterion {
    /// What one more task of `bytes` (its per-task overhead included) costs on a node with
    /// `queue_bytes` queued and `rate`: its latency, or its marginal load.
    pub fn task_cost(self, bytes: f64, queue_bytes: f64, rate: f64) -> f64 {
        match self {
            Criterion::Latency => task_latency(bytes, queue_bytes, rate),
            Criterion::MarginalLoad(metric) => metric.of(bytes, queue_bytes, rate),
        }
    }
}

/// Which options a per-request decision probes and compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probing {
    /// Every node of the stripe; every recovery set.
    Full,
    /// The original node and one sampled recovery set.
    PowerOfTwo,
}

/// LLF, LMLF, LLF-PW2 and LMLF-PW2.
#[derive(Clone, Debug)]
pub struct PerRequest {
    criterion: Criterion,
    probing: Probing,
    /// Whether a task weighs its node's per-task overhead besides its bytes.
    count_task_overhead: bool,
    /// Scratch: probed queue (bytes, with the queued tasks' overhead when counted), rate and
    /// one task's overhead in bytes, per unit of the stripe.
    queue_by_unit: Vec<f64>,
    rate_by_unit: Vec<f64>,
    overhead_by_unit: Vec<f64>,
    probed_units: Vec<u8>,
}

impl PerRequest {
    /// A per-request policy; `count_task_overhead` weighs each task's per-task overhead besides
    /// its bytes (the paper counts bytes only).
    pub fn new(criterion: Criterion, probing: Probing, count_task_overhead: bool) -> PerRequest {
        PerRequest {
            criterion,
            probing,
            count_task_overhead,
            queue_by_unit: Vec::new(),
            rate_by_unit: Vec::new(),
            overhead_by_unit: Vec::new(),
            probed_units: Vec::new(),
        }
    }

    /// The cost of one task of `bytes` on the node of `unit` (its latency or marginal load).
    fn task_cost(&self, unit: u8, bytes: f64) -> f64 {
        let unit = unit as usize;
        let (q, s, o) = (self.queue_by_unit[unit], self.rate_by_unit[unit], self.overhead_by_unit[unit]);
        self.criterion.task_cost(bytes + o, q, s)
    }

    /// The recovery sets this request compares (all, or one sampled: the only random draw) and
    /// the units it probes, in probe order, into `units`.
    fn candidates(
        &self,
        layout: &CodeLayout,
        unit: u8,
        rng: &mut dyn RngCore,
        units: &mut Vec<u8>,
    ) -> std::ops::Range<usize> {
        let sets = layout.recovery_sets(unit);
        units.clear();
        match self.probing {
            Probing::Full => {
                units.extend(0..layout.total_units() as u8);
                0..sets.len()
            }
            Probing::PowerOfTwo => {
                let chosen = sampled_set(sets, rng);
                units.push(unit);
                units.extend_from_slice(&sets[chosen].units);
                chosen..chosen + 1
            }
        }
    }

    fn set_cost(&self, set: &RecoverySet, bytes: f64) -> f64 {
        let terms = set.units.iter().map(|&u| self.task_cost(u, bytes));
        match self.criterion {
            Criterion::Latency => terms.fold(0.0, f64::max),
            Criterion::MarginalLoad(_) => terms.sum(),
        }
    }
}

impl ReadPolicy for PerRequest {
    fn name(&self) -> &'static str {
        match (self.criterion, self.probing) {
            (Criterion::Latency, Probing::Full) => "llf",
            (Criterion::MarginalLoad(_), Probing::Full) => "lmlf",
            (Criterion::Latency, Probing::PowerOfTwo) => "llf-pw2",
            (Criterion::MarginalLoad(_), Probing::PowerOfTwo) => "lmlf-pw2",
        }
    }

    fn probe_targets(
        &mut self,
        view: &dyn ClusterView,
        _now_ns: u64,
        request: &ReadRequest,
        rng: &mut dyn RngCore,
        targets: &mut Vec<NodeId>,
    ) {
        let location = view.placement().locate(request.partition);
        let mut units = std::mem::take(&mut self.probed_units);
        self.candidates(view.layout(), location.unit, rng, &mut units);
        targets.extend(units.iter().map(|&unit| view.placement().node_of(location.stripe, unit)));
        self.probed_units = units;
    }

    fn plan(
        &mut self,
        view: &mut dyn ClusterView,
        _now_ns: u64,
        request: &ReadRequest,
        rng: &mut dyn RngCore,
    ) -> ReadPlan {
        let location = view.placement().locate(request.partition);
        let n = view.layout().total_units();
        self.queue_by_unit.clear();
        self.queue_by_unit.resize(n, f64::NAN);
        self.rate_by_unit.clear();
        self.rate_by_unit.resize(n, f64::NAN);
        self.overhead_by_unit.clear();
        self.overhead_by_unit.resize(n, f64::NAN);
        let mut units = std::mem::take(&mut self.probed_units);
        let candidates = self.candidates(view.layout(), location.unit, rng, &mut units);
        for &unit in &units {
            let node = view.placement().node_of(location.stripe, unit);
            let state = view.probe(node);
            let overhead = task_overhead_bytes(view, node, self.count_task_overhead);
            self.queue_by_unit[unit as usize] = queued_load(state, overhead);
            self.rate_by_unit[unit as usize] = view.node_rate_bytes_per_s(node);
            self.overhead_by_unit[unit as usize] = overhead;
        }
        self.probed_units = units;
        let bytes = request.length as f64;
        let normal_cost = self.task_cost(location.unit, bytes);
        let sets = view.layout().recovery_sets(location.unit);
        let mut best: Option<(usize, f64)> = None;
        for index in candidates {
            let cost = self.set_cost(&sets[index], bytes);
            debug_assert!(!cost.is_nan(), "every unit of a candidate set was probed");
            if cost < normal_cost && best.is_none_or(|(_, b)| cost < b) {
                best = Some((index, cost));
            }
        }
        let placement = view.placement();
        match best {
            None => ReadPlan::normal(normal_task(placement, location, request)),
            Some((index, _)) => {
                degraded_plan(placement, location, request, &view.layout().recovery_sets(location.unit)[index])
            }
        }
    }
}
