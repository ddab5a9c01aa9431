//! The store's stripes and nodes in the policy's dense ids (`Catalog`, bounded, starting afresh past
//! its bound while keeping the nodes' measured rates) and the view a policy plans against
//! (`LiveView`: placement, racks, rates, probes, nodes not Up looking full). Must not plan or do
//! I/O: probes are answered from replies the controller gathered.

use std::collections::HashMap;

use meta::{NodeId as StoreNodeId, StripeMeta};
use model::{CodeLayout, NodeId as PolicyNodeId, Placement, QueueState, StripeId as PolicyStripeId};

use crate::data::DataError;
use crate::data::io::stripe_io::{NodeMap, is_up};
use policy::fec::FrontendState;

/// The store's stripes and nodes in the policy's dense ids.
pub(super) struct Catalog {
    /// Stripes held before [`Catalog::stripe`] asks for a fresh start.
    pub(super) max_stripes: usize,
    pub(super) layout: CodeLayout,
    pub(super) placement: Placement,
    /// Store stripe → (dense stripe, the store nodes it was registered with).
    pub(super) stripes: HashMap<u64, (PolicyStripeId, Vec<StoreNodeId>)>,
    /// Dense stripe → (store stripe, unit bytes): what a proposed move names.
    pub(super) by_dense: Vec<(u64, u64)>,
    pub(super) node_index: HashMap<StoreNodeId, PolicyNodeId>,
    pub(super) nodes: Vec<StoreNodeId>,
    /// Service rate per dense node from the last probe (0 = not known yet).
    pub(super) rates: Vec<f64>,
    /// Per-task overhead per dense node that goes with its rate, from the same probe.
    pub(super) overheads_ns: Vec<u64>,
    /// Rack per dense node: racks numbered in the order of their names (`NodeInfo::rack`); noted
    /// at each refresh of the policies that read racks (`jlwo`), else empty (every node in rack 0).
    pub(super) racks: Vec<u16>,
    /// The rack names those numbers stand for, in order.
    pub(super) rack_names: Vec<String>,
}

impl Catalog {
    pub(super) fn new(code_name: &str, max_stripes: usize) -> Result<Catalog, DataError> {
        let spec: codec::CodeSpec =
            code_name.parse().map_err(|e| DataError::Internal(format!("code {code_name:?}: {e}")))?;
        let layout = CodeLayout::new(spec).map_err(|e| DataError::Internal(e.to_string()))?;
        let placement =
            Placement::empty(spec, spec.total_units() as u32).map_err(|e| DataError::Internal(e.to_string()))?;
        Ok(Catalog {
            max_stripes,
            layout,
            placement,
            stripes: HashMap::new(),
            by_dense: Vec::new(),
            node_index: HashMap::new(),
            nodes: Vec::new(),
            rates: Vec::new(),
            overheads_ns: Vec::new(),
            racks: Vec::new(),
            rack_names: Vec::new(),
        })
    }

    pub(super) fn node(&mut self, id: StoreNodeId) -> PolicyNodeId {
        if let Some(&dense) = self.node_index.get(&id) {
            return dense;
        }
        let dense = PolicyNodeId(self.nodes.len() as u32);
        self.nodes.push(id);
        self.rates.push(0.0);
        self.overheads_ns.push(0);
        self.node_index.insert(id, dense);
        self.placement.grow_node_count(self.nodes.len() as u32);
        dense
    }

    /// The dense id of `stripe`, registering it (again, when repair moved a unit) as needed.
    /// `None` when the catalog is full and must start afresh.
    pub(super) fn stripe(&mut self, stripe: &StripeMeta) -> Result<Option<PolicyStripeId>, DataError> {
        if let Some((dense, nodes)) = self.stripes.get(&stripe.id.0)
            && *nodes == stripe.placement
        {
            return Ok(Some(*dense));
        }
        if self.placement.stripe_count() as usize >= self.max_stripes {
            return Ok(None);
        }
        let dense_nodes: Vec<PolicyNodeId> = stripe.placement.iter().map(|&n| self.node(n)).collect();
        let dense = self.placement.push_stripe(&dense_nodes).map_err(|e| DataError::Internal(e.to_string()))?;
        self.stripes.insert(stripe.id.0, (dense, stripe.placement.clone()));
        debug_assert_eq!(dense.index(), self.by_dense.len(), "dense ids are handed out in order");
        self.by_dense.push((stripe.id.0, stripe.unit_bytes));
        Ok(Some(dense))
    }

    /// Forgets every stripe; the nodes keep their dense ids and measured rates.
    pub(super) fn forget_stripes(&mut self) -> Result<(), DataError> {
        let spec = self.layout.spec();
        let node_count = (self.nodes.len() as u32).max(spec.total_units() as u32);
        self.placement = Placement::empty(spec, node_count).map_err(|e| DataError::Internal(e.to_string()))?;
        self.stripes = HashMap::new();
        self.by_dense = Vec::new();
        Ok(())
    }

    #[cfg(test)]
    pub(super) fn stripe_count(&self) -> usize {
        self.stripes.len()
    }

    pub(super) fn measured(&self, node: PolicyNodeId) -> bool {
        self.rates.get(node.index()).is_some_and(|r| *r > 0.0)
    }

    /// The mean of `value` over the nodes a probe has measured; `None` before any was. An
    /// unmeasured node takes it, so it neither attracts nor repels load.
    pub(super) fn mean_of_measured(&self, value: impl Fn(usize) -> f64) -> Option<f64> {
        let measured = (0..self.rates.len()).filter(|&i| self.rates[i] > 0.0);
        let (sum, count) = measured.fold((0.0, 0u32), |(s, c), i| (s + value(i), c + 1));
        (count > 0).then(|| sum / f64::from(count))
    }

    /// Numbers each dense node's rack from `nodes` (racks in the order of their names).
    pub(super) fn note_racks(&mut self, nodes: &NodeMap) {
        let names: std::collections::BTreeSet<&str> = nodes.values().map(|n| n.rack.as_str()).collect();
        let index = |name: &str| names.iter().position(|r| *r == name).unwrap_or(0) as u16;
        self.racks = self.nodes.iter().map(|id| nodes.get(id).map_or(0, |n| index(&n.rack))).collect();
        self.rack_names = names.into_iter().map(str::to_string).collect();
    }

    pub(super) fn rate(&self, node: PolicyNodeId) -> f64 {
        if self.measured(node) {
            return self.rates[node.index()];
        }
        self.mean_of_measured(|i| self.rates[i]).unwrap_or(1.0)
    }

    pub(super) fn task_overhead_ns(&self, node: PolicyNodeId) -> u64 {
        if self.measured(node) {
            return self.overheads_ns[node.index()];
        }
        self.mean_of_measured(|i| self.overheads_ns[i] as f64).map_or(0, |mean| mean as u64)
    }
}

/// The policy's view of the cluster during one decision: the catalog plus the probe replies.
pub(super) struct LiveView<'a> {
    pub(super) catalog: &'a Catalog,
    pub(super) answers: &'a [(PolicyNodeId, QueueState)],
    pub(super) frontend_count: u32,
    pub(super) unanswered: u32,
    /// The gateway's read task pool as it stood when the decision began.
    pub(super) frontend: FrontendState,
    /// Per dense node, whether it is known not to be Up (batch plans and `hedged` route around
    /// it; the probing policies learn of a Down node through its probe).
    pub(super) down: Vec<bool>,
}

impl<'a> LiveView<'a> {
    /// The view of the EC-Store planners (batch plans, the mover): no request's pool, and the
    /// nodes not Up in `nodes` known to be down.
    pub(super) fn of_batches(
        catalog: &'a Catalog,
        answers: &'a [(PolicyNodeId, QueueState)],
        frontend_count: u32,
        nodes: &NodeMap,
    ) -> LiveView<'a> {
        LiveView::of_read(catalog, answers, frontend_count, FrontendState::unbounded(), nodes)
    }

    /// The view of one read's decision: `frontend`, the read's pool as it stood, and the nodes
    /// not Up in `nodes` known to be down (`hedged` goes around them).
    pub(super) fn of_read(
        catalog: &'a Catalog,
        answers: &'a [(PolicyNodeId, QueueState)],
        frontend_count: u32,
        frontend: FrontendState,
        nodes: &NodeMap,
    ) -> LiveView<'a> {
        let down = down_nodes(catalog, nodes);
        LiveView { catalog, answers, frontend_count, unanswered: 0, frontend, down }
    }

    /// This view for a read of `stripe`: the nodes of the units it records missing are known not
    /// to serve it (their tasks would fail at once), so `hedged` reads around them as around a
    /// Down node (a node back with an empty disk, until repair rebuilds its units).
    pub(super) fn reading(mut self, stripe: &StripeMeta) -> LiveView<'a> {
        let missing_on = stripe.missing_units.iter().filter_map(|&unit| stripe.placement.get(usize::from(unit)));
        for dense in missing_on.filter_map(|node| self.catalog.node_index.get(node)) {
            self.down[dense.index()] = true;
        }
        self
    }
}

/// Per dense node, whether `nodes` has it not Up.
pub(super) fn down_nodes(catalog: &Catalog, nodes: &NodeMap) -> Vec<bool> {
    catalog.nodes.iter().map(|&id| !is_up(nodes, id)).collect()
}

impl policy::ClusterView for LiveView<'_> {
    fn placement(&self) -> &Placement {
        &self.catalog.placement
    }
    fn node_rack(&self, node: PolicyNodeId) -> u16 {
        self.catalog.racks.get(node.index()).copied().unwrap_or(0)
    }
    fn layout(&self) -> &CodeLayout {
        &self.catalog.layout
    }
    fn node_rate_bytes_per_s(&self, node: PolicyNodeId) -> f64 {
        self.catalog.rate(node)
    }
    fn node_task_overhead_ns(&self, node: PolicyNodeId) -> u64 {
        self.catalog.task_overhead_ns(node)
    }
    fn frontend_count(&self) -> u32 {
        self.frontend_count
    }
    fn frontend_state(&self) -> FrontendState {
        self.frontend
    }
    fn probe(&mut self, node: PolicyNodeId) -> QueueState {
        match self.answers.iter().find(|(n, _)| *n == node) {
            Some((_, state)) => *state,
            None => {
                // A policy that probes what it did not announce breaks the contract of
                // `ReadPolicy::probe_targets`; its test keeps this from happening.
                self.unanswered += 1;
                QueueState::default()
            }
        }
    }
    fn node_unavailable(&self, node: PolicyNodeId) -> bool {
        self.down.get(node.index()).copied().unwrap_or(false)
    }
}

/// Queue states from probe replies (unreachable nodes look full), recording measured rates.
pub(super) fn record_rates(
    catalog: &mut Catalog,
    replies: &[(PolicyNodeId, Option<node::ProbeReply>)],
) -> Vec<(PolicyNodeId, QueueState)> {
    replies
        .iter()
        .map(|&(node, ref reply)| match reply {
            Some(reply) => {
                if reply.service_rate_bytes_per_s > 0.0
                    && let Some(rate) = catalog.rates.get_mut(node.index())
                {
                    *rate = reply.service_rate_bytes_per_s;
                    catalog.overheads_ns[node.index()] = reply.overhead_us.saturating_mul(1000);
                }
                let tasks = reply.queued_tasks.saturating_add(reply.in_service_tasks);
                let state = QueueState {
                    bytes: reply.queued_bytes.saturating_add(reply.in_service_bytes),
                    tasks: u32::try_from(tasks).unwrap_or(u32::MAX),
                };
                (node, state)
            }
            None => (node, QueueState::UNREACHABLE),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::read::controller::MAX_CATALOG_STRIPES;

    #[test]
    fn unreachable_nodes_look_full_and_measured_rates_and_overheads_are_kept() {
        let mut catalog = Catalog::new("rs-2-1", MAX_CATALOG_STRIPES).unwrap();
        let a = catalog.node(StoreNodeId(7));
        let b = catalog.node(StoreNodeId(9));
        assert_eq!(catalog.node(StoreNodeId(7)), a, "a node keeps its dense id");
        let reply = node::ProbeReply {
            node_id: 7,
            queued_bytes: 10,
            queued_tasks: 1,
            in_service_bytes: 5,
            in_service_tasks: 1,
            service_rate_bytes_per_s: 2e6,
            overhead_us: 4000,
            egress_bytes_per_s: 0.0,
            now_ns: 0,
            classes: Vec::new(),
        };
        let answers = record_rates(&mut catalog, &[(a, Some(reply)), (b, None)]);
        assert_eq!(answers[0].1, QueueState { bytes: 15, tasks: 2 });
        assert_eq!(answers[1].1, QueueState::UNREACHABLE);
        assert_eq!(catalog.rate(a), 2e6);
        assert_eq!(catalog.rate(b), 2e6, "an unmeasured node takes the mean of the measured ones");
        assert_eq!(catalog.task_overhead_ns(a), 4_000_000, "the overhead that goes with the rate");
        assert_eq!(catalog.task_overhead_ns(b), 4_000_000, "and the mean of the measured ones");
    }
}
