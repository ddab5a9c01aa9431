//! APLS's assigning module (Xie et al., §III-B1): a table of the requests each node was sent
//! within a recent window (how many, how many bytes), and from it the set of light-loaded nodes a
//! starter is drawn from. The paper tracks request history rather than instantaneous load
//! because the manager cannot see every node's queue in real time; so does this table, which the
//! gateway feeds with every unit read and write it sends.
//!
//! The window is a ring of `buckets` time buckets per node: a request lands in the bucket of its
//! time, and a bucket older than the window is forgotten, so a sum over the live buckets is the
//! window's (to within one bucket's width). Light-loaded (the paper: "few requests or small size
//! of all requests"): at or below the lower quartile of the candidates' request counts, or of
//! their bytes; never empty when there are candidates.
//!
//! Must not: read a clock (times are arguments), do I/O, or draw unseeded randomness.

use std::collections::HashMap;

use model::NodeId;
use rand::RngCore;

/// What one node was sent within the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowLoad {
    /// Requests.
    pub requests: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// One bucket: which period it counts, and what it counted.
#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    period: u64,
    load: WindowLoad,
}

/// The windowed request table.
#[derive(Clone, Debug)]
pub struct LoadWindow {
    bucket_ns: u64,
    buckets: usize,
    nodes: HashMap<NodeId, Vec<Bucket>>,
}

/// Most buckets a window is cut into (bounds each node's ring).
pub const MAX_BUCKETS: usize = 64;

impl LoadWindow {
    /// A table over `window_ns` cut into `buckets` buckets (1 ≤ buckets ≤ [`MAX_BUCKETS`],
    /// window ≥ buckets ns).
    pub fn new(window_ns: u64, buckets: usize) -> Result<LoadWindow, String> {
        if !(1..=MAX_BUCKETS).contains(&buckets) {
            return Err(format!("buckets must be in 1..={MAX_BUCKETS}, got {buckets}"));
        }
        if window_ns < buckets as u64 {
            return Err(format!("window_ns {window_ns} must be at least the bucket count {buckets}"));
        }
        Ok(LoadWindow { bucket_ns: window_ns / buckets as u64, buckets, nodes: HashMap::new() })
    }

    /// Counts one request of `bytes` sent to `node` at `now_ns`.
    pub fn record(&mut self, node: NodeId, now_ns: u64, bytes: u64) {
        let period = now_ns / self.bucket_ns;
        let ring = self.nodes.entry(node).or_insert_with(|| vec![Bucket::default(); self.buckets]);
        let slot = &mut ring[(period % self.buckets as u64) as usize];
        if slot.period != period {
            *slot = Bucket { period, load: WindowLoad::default() };
        }
        slot.load.requests += 1;
        slot.load.bytes = slot.load.bytes.saturating_add(bytes);
    }

    /// What `node` was sent within the window ending at `now_ns`.
    pub fn load(&self, node: NodeId, now_ns: u64) -> WindowLoad {
        let period = now_ns / self.bucket_ns;
        let oldest = period.saturating_sub(self.buckets as u64 - 1);
        let Some(ring) = self.nodes.get(&node) else { return WindowLoad::default() };
        ring.iter().filter(|b| (oldest..=period).contains(&b.period)).fold(WindowLoad::default(), |sum, b| WindowLoad {
            requests: sum.requests + b.load.requests,
            bytes: sum.bytes.saturating_add(b.load.bytes),
        })
    }

    /// Forgets nodes that were sent nothing within the window (a node that left the cluster).
    pub fn prune(&mut self, now_ns: u64) {
        let period = now_ns / self.bucket_ns;
        let oldest = period.saturating_sub(self.buckets as u64 - 1);
        self.nodes.retain(|_, ring| ring.iter().any(|b| b.period >= oldest && b.load.requests > 0));
    }

    /// The light-loaded among `candidates` at `now_ns`: those at or below the lower quartile of
    /// the candidates' request counts or of their bytes (so never empty when `candidates` is not).
    pub fn light_loaded(&self, candidates: &[NodeId], now_ns: u64) -> Vec<NodeId> {
        let loads: Vec<WindowLoad> = candidates.iter().map(|&node| self.load(node, now_ns)).collect();
        let quartile = |mut values: Vec<u64>| -> u64 {
            values.sort_unstable();
            values.get(values.len().saturating_sub(1) / 4).copied().unwrap_or(0)
        };
        let requests_cut = quartile(loads.iter().map(|l| l.requests).collect());
        let bytes_cut = quartile(loads.iter().map(|l| l.bytes).collect());
        candidates
            .iter()
            .zip(&loads)
            .filter(|(_, load)| load.requests <= requests_cut || load.bytes <= bytes_cut)
            .map(|(&node, _)| node)
            .collect()
    }

    /// A starter drawn uniformly from the light-loaded among `candidates` (the paper's random
    /// choice from the set); `None` when there are no candidates.
    pub fn choose_starter(&self, candidates: &[NodeId], now_ns: u64, rng: &mut dyn RngCore) -> Option<NodeId> {
        let light = self.light_loaded(candidates, now_ns);
        if light.is_empty() {
            return None;
        }
        Some(light[(rng.next_u64() % light.len() as u64) as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn requests_leave_the_window_once_it_has_passed_them() {
        let mut table = LoadWindow::new(10 * SECOND, 10).unwrap();
        table.record(NodeId(1), 0, 100);
        table.record(NodeId(1), 5 * SECOND, 50);
        assert_eq!(table.load(NodeId(1), 9 * SECOND), WindowLoad { requests: 2, bytes: 150 });
        // The first request's bucket (period 0) has left the window ending in period 10.
        assert_eq!(table.load(NodeId(1), 10 * SECOND), WindowLoad { requests: 1, bytes: 50 });
        assert_eq!(table.load(NodeId(1), 15 * SECOND), WindowLoad::default());
        // A bucket reused by a later period starts from zero.
        table.record(NodeId(1), 20 * SECOND, 7);
        assert_eq!(table.load(NodeId(1), 20 * SECOND), WindowLoad { requests: 1, bytes: 7 });
        assert_eq!(table.load(NodeId(2), 20 * SECOND), WindowLoad::default());
    }

    #[test]
    fn the_light_set_is_the_lower_quartile_by_count_or_by_bytes() {
        let mut table = LoadWindow::new(10 * SECOND, 5).unwrap();
        let nodes: Vec<NodeId> = (0..8).map(NodeId).collect();
        // Node i gets i requests of 1 MB, except node 7: one request of 100 MB.
        for i in 0..7u32 {
            for _ in 0..i {
                table.record(NodeId(i), SECOND, 1 << 20);
            }
        }
        table.record(NodeId(7), SECOND, 100 << 20);
        let light = table.light_loaded(&nodes, 2 * SECOND);
        // Counts 0,1,2,3,4,5,6,1 → lower quartile (index 1 of 8 sorted) is 1; bytes' is 1 MiB.
        assert_eq!(light, vec![NodeId(0), NodeId(1), NodeId(7)]);
        assert!(table.light_loaded(&[], 0).is_empty());
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut drawn = std::collections::BTreeSet::new();
        for _ in 0..200 {
            drawn.insert(table.choose_starter(&nodes, 2 * SECOND, &mut rng).unwrap());
        }
        assert_eq!(drawn.into_iter().collect::<Vec<_>>(), light, "every light node drawn, nothing else");
    }

    #[test]
    fn pruning_forgets_idle_nodes_only() {
        let mut table = LoadWindow::new(4 * SECOND, 4).unwrap();
        table.record(NodeId(1), 0, 1);
        table.record(NodeId(2), 6 * SECOND, 1);
        table.prune(6 * SECOND);
        assert_eq!(table.nodes.len(), 1);
        assert!(table.nodes.contains_key(&NodeId(2)));
        assert!(LoadWindow::new(10, 0).is_err());
        assert!(LoadWindow::new(3, 4).is_err());
        assert!(LoadWindow::new(10, MAX_BUCKETS + 1).is_err());
    }
}
