//! LMLF-Lazy (Hu et al. section 3.1): least marginal load first over a queue
//! table that the executor refreshes every T by probing every node.
//!
//! Must not: probe per request, or update the table with its own decisions
//! between refreshes (staleness is the behaviour the paper measures).

use super::cost::{MarginalLoad, degraded_plan, normal_task, queued_load, task_overhead_bytes};
use crate::{ClusterView, ReadPolicy, RefreshWork};
use model::{NodeId, ReadPlan, ReadRequest};
use rand::RngCore;

/// The LMLF-Lazy policy.
#[derive(Clone, Debug)]
pub struct LmlfLazy {
    period_ns: u64,
    /// Whether a task weighs its node's per-task overhead besides its bytes.
    count_task_overhead: bool,
    /// What a task is charged for.
    metric: MarginalLoad,
    /// Queue bytes per node at the last refresh (all zero before the first), with the queued
    /// tasks' overhead when it is counted.
    queue_table: Vec<f64>,
    /// Scratch: marginal load of the request on each unit's node.
    cost_by_unit: Vec<f64>,
}

impl LmlfLazy {
    /// LMLF over a table refreshed every `period_ns`, charging tasks by `metric`;
    /// `count_task_overhead` as in [`super::PerRequest::new`].
    pub fn new(period_ns: u64, count_task_overhead: bool, metric: MarginalLoad) -> LmlfLazy {
        assert!(period_ns > 0);
        LmlfLazy { period_ns, count_task_overhead, metric, queue_table: Vec::new(), cost_by_unit: Vec::new() }
    }
}

/// Probes every node into `table` (the lazy policies' refresh): its queued bytes, plus its queued
/// tasks' overhead when counted.
pub(super) fn refresh_queue_table(view: &mut dyn ClusterView, table: &mut Vec<f64>, count_task_overhead: bool) {
    let nodes = view.placement().node_count();
    table.clear();
    for node in 0..nodes {
        let state = view.probe(NodeId(node));
        table.push(queued_load(state, task_overhead_bytes(view, NodeId(node), count_task_overhead)));
    }
}

impl ReadPolicy for LmlfLazy {
    fn name(&self) -> &'static str {
        "lmlf-lazy"
    }

    fn plan(
        &mut self,
        view: &mut dyn ClusterView,
        _now_ns: u64,
        request: &ReadRequest,
        _rng: &mut dyn RngCore,
    ) -> ReadPlan {
        let placement = view.placement();
        if self.queue_table.len() != placement.node_count() as usize {
            self.queue_table = vec![0.0; placement.node_count() as usize];
        }
        let location = placement.locate(request.partition);
        let bytes = request.length as f64;
        // The marginal load of each unit's node once, then sums per set (the
        // same terms in the same order as summing per set directly).
        let units = view.layout().total_units();
        self.cost_by_unit.clear();
        for unit in 0..units as u8 {
            let node = placement.node_of(location.stripe, unit);
            self.cost_by_unit.push(self.metric.of(
                bytes + task_overhead_bytes(view, node, self.count_task_overhead),
                self.queue_table[node.index()],
                view.node_rate_bytes_per_s(node),
            ));
        }
        let normal_cost = self.cost_by_unit[location.unit as usize];
        let sets = view.layout().recovery_sets(location.unit);
        let mut best: Option<(usize, f64)> = None;
        for (index, set) in sets.iter().enumerate() {
            let cost: f64 = set.units.iter().map(|&u| self.cost_by_unit[u as usize]).sum();
            if cost < normal_cost && best.is_none_or(|(_, b)| cost < b) {
                best = Some((index, cost));
            }
        }
        match best {
            None => ReadPlan::normal(normal_task(placement, location, request)),
            Some((index, _)) => degraded_plan(placement, location, request, &sets[index]),
        }
    }

    fn refresh_period_ns(&self) -> Option<u64> {
        Some(self.period_ns)
    }

    fn begin_refresh(
        &mut self,
        view: &mut dyn ClusterView,
        _now_ns: u64,
        _rng: &mut dyn RngCore,
    ) -> Option<RefreshWork> {
        refresh_queue_table(view, &mut self.queue_table, self.count_task_overhead);
        None
    }
}
