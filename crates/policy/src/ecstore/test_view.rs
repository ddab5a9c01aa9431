//! A fake cluster view for EC-Store's policy tests: RS(2,2) stripes on given nodes, one rate and one
//! per-task overhead for every node, queues the test sets, nodes the test marks down.
//!
//! Must not: be compiled outside tests.

use crate::ClusterView;
use codec::CodeSpec;
use model::{CodeLayout, NodeId, Placement, QueueState};

pub(super) const RS22: CodeSpec = CodeSpec::Rs { k: 2, m: 2 };

pub(super) struct TestView {
    pub placement: Placement,
    pub layout: CodeLayout,
    pub queues: Vec<u64>,
    pub down: Vec<bool>,
    /// Each node's rack (all 0 unless a test says otherwise).
    pub racks: Vec<u16>,
    pub probes: u32,
    rate_bytes_per_s: f64,
    overhead_ns: u64,
}

impl TestView {
    /// `stripes` (units on the nodes given) on `node_count` nodes of `rate_bytes_per_s` and
    /// `overhead_ns` per task, queues empty, every node up.
    pub fn new(node_count: u32, stripes: &[[u32; 4]], rate_bytes_per_s: f64, overhead_ns: u64) -> TestView {
        let nodes = stripes.iter().flatten().map(|&n| NodeId(n)).collect();
        TestView {
            placement: Placement::new(RS22, node_count, nodes).unwrap(),
            layout: CodeLayout::new(RS22).unwrap(),
            queues: vec![0; node_count as usize],
            down: vec![false; node_count as usize],
            racks: vec![0; node_count as usize],
            probes: 0,
            rate_bytes_per_s,
            overhead_ns,
        }
    }
}

impl ClusterView for TestView {
    fn placement(&self) -> &Placement {
        &self.placement
    }
    fn node_rack(&self, node: NodeId) -> u16 {
        self.racks[node.index()]
    }
    fn layout(&self) -> &CodeLayout {
        &self.layout
    }
    fn node_rate_bytes_per_s(&self, _node: NodeId) -> f64 {
        self.rate_bytes_per_s
    }
    fn node_task_overhead_ns(&self, _node: NodeId) -> u64 {
        self.overhead_ns
    }
    fn frontend_count(&self) -> u32 {
        1
    }
    fn frontend_state(&self) -> crate::fec::FrontendState {
        crate::fec::FrontendState::unbounded()
    }
    fn probe(&mut self, node: NodeId) -> QueueState {
        self.probes += 1;
        QueueState { bytes: self.queues[node.index()], tasks: 1 }
    }
    fn node_unavailable(&self, node: NodeId) -> bool {
        self.down[node.index()]
    }
}
