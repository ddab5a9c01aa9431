//! Placement of a new stripe's units on nodes: random balanced (the n least-loaded Up nodes, random
//! tie-break) or rack-aware (one unit per rack). Owns the per-node unit counts that balance uses and
//! the seeded tie-break RNG; must not do I/O or read clocks (the caller passes the node records).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use meta::{NodeId, NodeInfo, NodeState};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

/// Why no placement was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// Fewer eligible nodes (or racks) than units to place.
    #[error("need {needed} {what} for the stripe, only {available} eligible")]
    NotEnough {
        /// Nodes or racks needed.
        needed: usize,
        /// Eligible ones found.
        available: usize,
        /// "nodes" or "racks".
        what: &'static str,
    },
}

/// Chooses nodes for units and remembers how many units each node holds.
#[derive(Debug)]
pub struct Placer {
    rack_aware: bool,
    rng: ChaCha8Rng,
    unit_counts: HashMap<NodeId, u64>,
}

impl Placer {
    /// A placer; `seed` fixes the tie-break (tests), `None` seeds from the OS.
    pub fn new(rack_aware: bool, seed: Option<u64>) -> Self {
        let rng = match seed {
            Some(seed) => ChaCha8Rng::seed_from_u64(seed),
            None => ChaCha8Rng::from_os_rng(),
        };
        Self { rack_aware, rng, unit_counts: HashMap::new() }
    }

    /// Units currently counted on `node`.
    pub fn unit_count(&self, node: NodeId) -> u64 {
        self.unit_counts.get(&node).copied().unwrap_or(0)
    }

    /// Counts `units` more units on `node` (negative: fewer), e.g. when loading existing stripes
    /// or after a stripe was deleted or moved.
    pub fn adjust(&mut self, node: NodeId, units: i64) {
        let count = self.unit_counts.entry(node).or_insert(0);
        *count = count.saturating_add_signed(units);
    }

    /// Picks `units` distinct Up nodes from `nodes`, none of them in `exclude` or `peers`, and
    /// counts one unit on each. `peers` are the nodes keeping the stripe's other units (empty for a
    /// new stripe). Balanced: fewest units first, random among equals. Rack-aware: additionally at
    /// most one chosen node per rack and none in a peer's rack, so a replacement keeps the stripe
    /// one-per-rack.
    pub fn place(
        &mut self,
        nodes: &[NodeInfo],
        units: usize,
        exclude: &[NodeId],
        peers: &[NodeId],
    ) -> Result<Vec<NodeId>, PlacementError> {
        let excluded_racks: BTreeSet<&str> = if self.rack_aware {
            nodes.iter().filter(|n| peers.contains(&n.id)).map(|n| n.rack.as_str()).collect()
        } else {
            BTreeSet::new()
        };
        let mut eligible: Vec<&NodeInfo> = nodes
            .iter()
            .filter(|n| {
                n.state == NodeState::Up
                    && !exclude.contains(&n.id)
                    && !peers.contains(&n.id)
                    && !excluded_racks.contains(n.rack.as_str())
            })
            .collect();
        // Shuffle, then a stable sort by count: equal counts stay in random order.
        eligible.shuffle(&mut self.rng);
        eligible.sort_by_key(|n| self.unit_count(n.id));
        let chosen: Vec<NodeId> = if self.rack_aware {
            // The least-loaded node of every rack, then the racks whose best node is least loaded.
            let mut best_per_rack: BTreeMap<&str, &NodeInfo> = BTreeMap::new();
            let mut rack_order = Vec::new();
            for node in &eligible {
                if !best_per_rack.contains_key(node.rack.as_str()) {
                    best_per_rack.insert(node.rack.as_str(), node);
                    rack_order.push(node.id);
                }
            }
            if rack_order.len() < units {
                return Err(PlacementError::NotEnough { needed: units, available: rack_order.len(), what: "racks" });
            }
            rack_order.truncate(units);
            rack_order
        } else {
            if eligible.len() < units {
                return Err(PlacementError::NotEnough { needed: units, available: eligible.len(), what: "nodes" });
            }
            eligible.iter().take(units).map(|n| n.id).collect()
        };
        let distinct: BTreeSet<NodeId> = chosen.iter().copied().collect();
        assert_eq!(distinct.len(), chosen.len(), "placement chose one node twice");
        for &node in &chosen {
            self.adjust(node, 1);
        }
        Ok(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u32, rack: &str) -> NodeInfo {
        NodeInfo {
            id: NodeId(id),
            address: format!("127.0.0.1:{id}"),
            rack: rack.into(),
            capacity_bytes: 1 << 40,
            state: NodeState::Up,
            last_heartbeat_ms: 0,
            down_since_ms: None,
        }
    }

    #[test]
    fn balanced_placement_is_distinct_and_even_over_many_stripes() {
        for seed in 0..20 {
            let nodes: Vec<NodeInfo> = (0..12).map(|i| node(i, "r")).collect();
            let mut placer = Placer::new(false, Some(seed));
            for _ in 0..97 {
                let chosen = placer.place(&nodes, 9, &[], &[]).unwrap();
                let distinct: BTreeSet<_> = chosen.iter().collect();
                assert_eq!(distinct.len(), 9);
                let counts: Vec<u64> = nodes.iter().map(|n| placer.unit_count(n.id)).collect();
                let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
                assert!(max - min <= 1, "seed {seed}: counts {counts:?}");
            }
        }
    }

    #[test]
    fn down_and_excluded_nodes_are_skipped_and_shortage_is_an_error() {
        let mut nodes: Vec<NodeInfo> = (0..10).map(|i| node(i, "r")).collect();
        nodes[3].state = NodeState::Down;
        let mut placer = Placer::new(false, Some(1));
        let chosen = placer.place(&nodes, 8, &[NodeId(5)], &[]).unwrap();
        assert!(!chosen.contains(&NodeId(3)) && !chosen.contains(&NodeId(5)));
        let err = placer.place(&nodes, 9, &[NodeId(5)], &[]).unwrap_err();
        assert_eq!(err, PlacementError::NotEnough { needed: 9, available: 8, what: "nodes" });
    }

    #[test]
    fn rack_aware_puts_one_unit_per_rack() {
        let nodes: Vec<NodeInfo> = (0..20).map(|i| node(i, &format!("rack{}", i % 10))).collect();
        let mut placer = Placer::new(true, Some(7));
        for _ in 0..50 {
            let chosen = placer.place(&nodes, 9, &[], &[]).unwrap();
            let racks: BTreeSet<&str> =
                chosen.iter().map(|id| nodes.iter().find(|n| n.id == *id).unwrap().rack.as_str()).collect();
            assert_eq!(racks.len(), 9);
        }
        let counts: Vec<u64> = nodes.iter().map(|n| placer.unit_count(n.id)).collect();
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(max - min <= 1, "{counts:?}");
        // A replacement avoids the racks of the stripe's other units.
        let replacement = placer.place(&nodes, 1, &[], &[NodeId(0), NodeId(1)]).unwrap();
        let rack = &nodes[replacement[0].0 as usize].rack;
        assert!(rack != "rack0" && rack != "rack1");
        let few_racks: Vec<NodeInfo> = (0..12).map(|i| node(i, &format!("rack{}", i % 4))).collect();
        assert!(matches!(placer.place(&few_racks, 9, &[], &[]), Err(PlacementError::NotEnough { what: "racks", .. })));
    }
}
