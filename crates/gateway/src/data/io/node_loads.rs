//! What this gateway knows of each node's speed and recent load, for the reconstruction policy:
//! the rates the membership probes report (the node's service rate and its emulated egress link)
//! and APLS's windowed request table ([`policy::load_window::LoadWindow`]), fed with every unit
//! read, write and reconstruction session this gateway sends. `kind = "auto"` estimates a
//! rebuild from the rates; the survivors are ranked and repair's new node (APLS's starter) is
//! drawn from the light-loaded by the table.
//!
//! Owns: the table and its clock (monotonic, from the gateway's start). Must not: probe or send
//! anything (membership and the data path feed it), or decide (the policy's).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use meta::NodeId;
use policy::load_window::{LoadWindow, WindowLoad};

/// The request table's window (the paper's "certain window" is not published; a few probe
/// intervals, long enough to see a hot node, short enough to follow a shift).
pub const WINDOW: Duration = Duration::from_secs(10);
/// Buckets the window is cut into (its resolution).
pub const WINDOW_BUCKETS: usize = 10;

/// A node's rates as its last answered probe reported them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProbedRates {
    /// Its service (disk) rate, bytes/s: the model's when emulating, else measured; 0 = unknown.
    pub service_bytes_per_s: f64,
    /// Its emulated egress link, bytes/s; 0 = not shaped.
    pub egress_bytes_per_s: f64,
    /// Bytes queued or in service when probed.
    pub queued_bytes: u64,
}

impl ProbedRates {
    /// The rate the node can send a unit's bytes at: the slower of its disk and its link, each
    /// where known; `None` when neither is.
    pub fn sending_bytes_per_s(&self) -> Option<f64> {
        [self.service_bytes_per_s, self.egress_bytes_per_s].into_iter().filter(|r| *r > 0.0).reduce(f64::min)
    }
}

/// The table; cheap to share (one lock, held for a few lookups).
#[derive(Debug)]
pub struct NodeLoads {
    started: Instant,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    window: LoadWindow,
    probed: HashMap<NodeId, ProbedRates>,
}

impl Default for NodeLoads {
    fn default() -> Self {
        NodeLoads::new()
    }
}

impl NodeLoads {
    /// An empty table.
    pub fn new() -> NodeLoads {
        let window = LoadWindow::new(WINDOW.as_nanos() as u64, WINDOW_BUCKETS).expect("a valid window");
        NodeLoads { started: Instant::now(), inner: Mutex::new(Inner { window, probed: HashMap::new() }) }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Counts one request of `bytes` sent to `node` now.
    pub fn record_request(&self, node: NodeId, bytes: u64) {
        let now_ns = self.now_ns();
        crate::data::lock(&self.inner).window.record(model::NodeId(node.0), now_ns, bytes);
    }

    /// Keeps what `node`'s probe answered.
    pub fn record_probe(&self, node: NodeId, reply: &node::ProbeReply) {
        let rates = ProbedRates {
            service_bytes_per_s: reply.service_rate_bytes_per_s,
            egress_bytes_per_s: reply.egress_bytes_per_s,
            queued_bytes: reply.queued_bytes.saturating_add(reply.in_service_bytes),
        };
        let now_ns = self.now_ns();
        let mut inner = crate::data::lock(&self.inner);
        inner.probed.insert(node, rates);
        // Probes come every interval: a good time to drop nodes no longer sent anything.
        inner.window.prune(now_ns);
    }

    /// What `node`'s last answered probe said (default: nothing known).
    pub fn probed(&self, node: NodeId) -> ProbedRates {
        crate::data::lock(&self.inner).probed.get(&node).copied().unwrap_or_default()
    }

    /// What `node` was sent within the window.
    pub fn window_load(&self, node: NodeId) -> WindowLoad {
        let now_ns = self.now_ns();
        crate::data::lock(&self.inner).window.load(model::NodeId(node.0), now_ns)
    }

    /// `node`'s load as the reconstruction policy ranks it — bytes sent it within the window plus
    /// what its last probe found queued — and its sending rate where known; under one lock.
    pub fn load_and_rate(&self, node: NodeId) -> (u64, Option<f64>) {
        let now_ns = self.now_ns();
        let inner = crate::data::lock(&self.inner);
        let probed = inner.probed.get(&node).copied().unwrap_or_default();
        let sent = inner.window.load(model::NodeId(node.0), now_ns).bytes;
        (sent.saturating_add(probed.queued_bytes), probed.sending_bytes_per_s())
    }

    /// The light-loaded among `candidates` (see [`LoadWindow::light_loaded`]).
    pub fn light_loaded(&self, candidates: &[NodeId]) -> Vec<NodeId> {
        let now_ns = self.now_ns();
        let ids: Vec<model::NodeId> = candidates.iter().map(|n| model::NodeId(n.0)).collect();
        let light = crate::data::lock(&self.inner).window.light_loaded(&ids, now_ns);
        light.into_iter().map(|n| NodeId(n.0)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(service: f64, egress: f64, queued: u64) -> node::ProbeReply {
        node::ProbeReply {
            node_id: 1,
            queued_bytes: queued,
            queued_tasks: 1,
            in_service_bytes: 0,
            in_service_tasks: 0,
            service_rate_bytes_per_s: service,
            overhead_us: 0,
            egress_bytes_per_s: egress,
            now_ns: 0,
            classes: Vec::new(),
        }
    }

    #[test]
    fn a_node_sends_at_the_slower_of_its_known_rates() {
        let loads = NodeLoads::new();
        assert_eq!(loads.probed(NodeId(1)).sending_bytes_per_s(), None);
        loads.record_probe(NodeId(1), &reply(200e6, 25e6, 7));
        assert_eq!(loads.probed(NodeId(1)).sending_bytes_per_s(), Some(25e6));
        assert_eq!(loads.probed(NodeId(1)).queued_bytes, 7);
        loads.record_probe(NodeId(1), &reply(20e6, 0.0, 0));
        assert_eq!(loads.probed(NodeId(1)).sending_bytes_per_s(), Some(20e6));
    }

    #[test]
    fn the_light_loaded_are_those_sent_least() {
        let loads = NodeLoads::new();
        for node in 1..=4u32 {
            for _ in 0..node {
                loads.record_request(NodeId(node), 1000);
            }
        }
        assert_eq!(loads.window_load(NodeId(3)), WindowLoad { requests: 3, bytes: 3000 });
        // Counts 1, 2, 3, 4, 0: the lower quartile is 1.
        assert_eq!(
            loads.light_loaded(&[NodeId(1), NodeId(2), NodeId(3), NodeId(4), NodeId(5)]),
            vec![NodeId(1), NodeId(5)]
        );
        assert_eq!(loads.light_loaded(&[NodeId(4), NodeId(3)]), vec![NodeId(3)]);
    }
}
