//! The selection layer over a code-length policy: FAST CLOUD's n (Fixed, Greedy, BAFEC) with the
//! n units chosen by Hu et al.'s per-request cost instead of data units first. Each probed unit's
//! node is charged what one more task of the read's bytes costs there (LLF: its latency
//! (Q + D) / S; LMLF: its marginal load); the read asks for the n cheapest, ties to data units and
//! then to the lower index, and is done at the first k. Full probing probes every unit's node;
//! power-of-two probes the row's data units and one sampled recovery set of its first unit (the
//! paper's "original and one sampled set", for a row). Units not probed rank after every probed
//! one, in index order.
//!
//! Must not: choose n (the code-length policy does) or keep state between requests beyond the
//! wrapped policy's and scratch buffers.

use crate::fec::FecRead;
use crate::read::cost::{queued_load, sampled_set, task_overhead_bytes};
use crate::read::{Criterion, Probing};
use crate::{ClusterView, ReadPolicy, RefreshResult, RefreshWork};
use model::{NodeId, ReadPlan, ReadRequest, RequestRecord, TaskRecord, TaskRole};
use rand::RngCore;

/// A code-length policy whose n units are ranked by a per-request cost.
#[derive(Clone, Debug)]
pub struct RankedRow {
    code_length: FecRead,
    criterion: Criterion,
    probing: Probing,
    count_task_overhead: bool,
    /// Scratch: the units probed, in probe order.
    probed_units: Vec<u8>,
    /// Scratch: each unit's cost for this read (infinite when not probed).
    cost_by_unit: Vec<f64>,
}

impl RankedRow {
    /// `code_length`'s reads, their units ranked by `criterion` over `probing`'s probes.
    pub fn new(code_length: FecRead, criterion: Criterion, probing: Probing, count_task_overhead: bool) -> RankedRow {
        RankedRow {
            code_length,
            criterion,
            probing,
            count_task_overhead,
            probed_units: Vec::new(),
            cost_by_unit: Vec::new(),
        }
    }

    /// The units this read probes (the only random draw: PW2's sampled set), into `units`.
    fn probed(&self, view: &dyn ClusterView, request: &ReadRequest, rng: &mut dyn RngCore, units: &mut Vec<u8>) {
        let layout = view.layout();
        units.clear();
        match self.probing {
            Probing::Full => units.extend(0..layout.total_units() as u8),
            Probing::PowerOfTwo => {
                let first = view.placement().locate(request.partition).unit;
                units.extend(0..layout.data_units() as u8);
                let sets = layout.recovery_sets(first);
                for &unit in &sets[sampled_set(sets, rng)].units {
                    if !units.contains(&unit) {
                        units.push(unit);
                    }
                }
            }
        }
    }
}

impl ReadPolicy for RankedRow {
    fn name(&self) -> &'static str {
        match (self.criterion, self.probing) {
            (Criterion::Latency, Probing::Full) => "llf+n",
            (Criterion::MarginalLoad(_), Probing::Full) => "lmlf+n",
            (Criterion::Latency, Probing::PowerOfTwo) => "llf-pw2+n",
            (Criterion::MarginalLoad(_), Probing::PowerOfTwo) => "lmlf-pw2+n",
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
        let stripe = view.placement().locate(request.partition).stripe;
        let mut units = std::mem::take(&mut self.probed_units);
        self.probed(view, request, rng, &mut units);
        targets.extend(units.iter().map(|&unit| view.placement().node_of(stripe, unit)));
        self.probed_units = units;
    }

    fn plan(
        &mut self,
        view: &mut dyn ClusterView,
        now_ns: u64,
        request: &ReadRequest,
        rng: &mut dyn RngCore,
    ) -> ReadPlan {
        let mut units = std::mem::take(&mut self.probed_units);
        self.probed(view, request, rng, &mut units);
        // n and the quorum are the code length's; which units is this layer's.
        let mut plan = self.code_length.plan(view, now_ns, request, rng);
        let stripe = view.placement().locate(request.partition).stripe;
        let k = view.layout().data_units();
        self.cost_by_unit.clear();
        self.cost_by_unit.resize(view.layout().total_units(), f64::INFINITY);
        for &unit in &units {
            let node = view.placement().node_of(stripe, unit);
            let overhead = task_overhead_bytes(view, node, self.count_task_overhead);
            let queue = queued_load(view.probe(node), overhead);
            let rate = view.node_rate_bytes_per_s(node);
            self.cost_by_unit[usize::from(unit)] =
                self.criterion.task_cost(request.length as f64 + overhead, queue, rate);
        }
        self.probed_units = units;
        let mut ranked: Vec<u8> = (0..view.layout().total_units() as u8).collect();
        // Stable: equal costs keep index order, data units (the lower indices) first.
        ranked.sort_by(|&a, &b| self.cost_by_unit[usize::from(a)].total_cmp(&self.cost_by_unit[usize::from(b)]));
        let n = plan.tasks.len();
        for (task, &unit) in plan.tasks.iter_mut().zip(&ranked[..n]) {
            task.unit = unit;
            task.node = view.placement().node_of(stripe, unit);
            task.role = if usize::from(unit) < k { TaskRole::Normal } else { TaskRole::Degraded };
        }
        plan.tasks.sort_by_key(|task| task.unit);
        debug_assert!(plan.tasks.windows(2).all(|pair| pair[0].unit < pair[1].unit), "n distinct units");
        plan
    }

    fn refresh_period_ns(&self) -> Option<u64> {
        self.code_length.refresh_period_ns()
    }

    fn refresh_probes_nodes(&self) -> bool {
        self.code_length.refresh_probes_nodes()
    }

    fn begin_refresh(&mut self, view: &mut dyn ClusterView, now_ns: u64, rng: &mut dyn RngCore) -> Option<RefreshWork> {
        self.code_length.begin_refresh(view, now_ns, rng)
    }

    fn finish_refresh(&mut self, result: RefreshResult) {
        self.code_length.finish_refresh(result);
    }

    fn observe(&mut self, request: &RequestRecord, tasks: &[TaskRecord]) {
        self.code_length.observe(request, tasks);
    }

    fn gauges(&self) -> Vec<(&'static str, f64)> {
        self.code_length.gauges()
    }
}
