//! Placement of a new stripe's units on nodes: random balanced (the n least-loaded Up nodes, random
//! tie-break) or rack-aware (one unit per rack), a new stripe of a latency class first on the
//! racks the read policy chose for its class (`jlwo`: JLWO's matching for a file not placed yet),
//! as long as their nodes are not much fuller than the emptiest ([`PREFERENCE_SLACK_UNITS`]).
//! Owns the per-node unit counts that balance uses, the racks preferred per class and the seeded
//! tie-break RNG; must not do I/O or read clocks (the caller passes the node records).

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

/// How many more units than the emptiest eligible node a preferred rack's node may hold and still
/// be preferred (plus a tenth of that emptiest count): a class's racks do not fill while the
/// others stay empty.
pub const PREFERENCE_SLACK_UNITS: u64 = 8;

/// Chooses nodes for units and remembers how many units each node holds.
#[derive(Debug)]
pub struct Placer {
    rack_aware: bool,
    rng: ChaCha8Rng,
    unit_counts: HashMap<NodeId, u64>,
    /// Racks preferred for a new stripe, best first, by latency class.
    class_racks: HashMap<u8, Vec<String>>,
}

impl Placer {
    /// A placer; `seed` fixes the tie-break (tests), `None` seeds from the OS.
    pub fn new(rack_aware: bool, seed: Option<u64>) -> Self {
        let rng = match seed {
            Some(seed) => ChaCha8Rng::seed_from_u64(seed),
            None => ChaCha8Rng::from_os_rng(),
        };
        Self { rack_aware, rng, unit_counts: HashMap::new(), class_racks: HashMap::new() }
    }

    /// The racks a new stripe of each latency class goes to first (empty: none preferred).
    pub fn set_class_racks(&mut self, racks: HashMap<u8, Vec<String>>) {
        self.class_racks = racks;
    }

    /// The racks preferred for a new stripe of `class`.
    pub fn class_racks(&self, class: u8) -> &[String] {
        self.class_racks.get(&class).map_or(&[], Vec::as_slice)
    }

    /// [`Placer::place`] for a new stripe of latency class `class`: its class's preferred racks
    /// first (the least-loaded eligible node of each, unless fuller than the slack allows), then
    /// as `place` chooses.
    pub fn place_new(&mut self, nodes: &[NodeInfo], units: usize, class: u8) -> Result<Vec<NodeId>, PlacementError> {
        let prefer = self.class_racks.get(&class).cloned().unwrap_or_default();
        self.place_preferring(nodes, units, &[], &[], &prefer)
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
        self.place_preferring(nodes, units, exclude, peers, &[])
    }

    fn place_preferring(
        &mut self,
        nodes: &[NodeInfo],
        units: usize,
        exclude: &[NodeId],
        peers: &[NodeId],
        prefer: &[String],
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
        let preferred = self.preferred(&eligible, prefer);
        let chosen: Vec<NodeId> = if self.rack_aware {
            // The preferred racks' nodes, then the least-loaded node of every other rack, the
            // racks whose best node is least loaded first.
            let mut best_per_rack: BTreeMap<&str, &NodeInfo> = BTreeMap::new();
            let mut rack_order = Vec::new();
            for &node in &preferred {
                best_per_rack.insert(node.rack.as_str(), node);
                rack_order.push(node.id);
            }
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
            let first = preferred.iter().map(|n| n.id);
            let rest = eligible.iter().map(|n| n.id).filter(|id| !preferred.iter().any(|p| p.id == *id));
            first.chain(rest).take(units).collect()
        };
        let distinct: BTreeSet<NodeId> = chosen.iter().copied().collect();
        assert_eq!(distinct.len(), chosen.len(), "placement chose one node twice");
        for &node in &chosen {
            self.adjust(node, 1);
        }
        Ok(chosen)
    }
}

impl Placer {
    /// The least-loaded node of each rack in `prefer` (in its order) among `eligible` (sorted by
    /// unit count), skipping a node fuller than the emptiest eligible one by more than the slack.
    fn preferred<'a>(&self, eligible: &[&'a NodeInfo], prefer: &[String]) -> Vec<&'a NodeInfo> {
        let Some(emptiest) = eligible.first().map(|n| self.unit_count(n.id)) else { return Vec::new() };
        let most = emptiest + PREFERENCE_SLACK_UNITS + emptiest / 10;
        let mut chosen: Vec<&NodeInfo> = Vec::with_capacity(prefer.len());
        for rack in prefer {
            if chosen.iter().any(|n| n.rack == *rack) {
                continue;
            }
            if let Some(&node) = eligible.iter().find(|n| n.rack == *rack && self.unit_count(n.id) <= most) {
                chosen.push(node);
            }
        }
        chosen
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
            directory: None,
            checking_since_ms: None,
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
    fn a_new_stripe_of_a_class_goes_to_its_racks_first_unless_they_are_full() {
        let nodes: Vec<NodeInfo> = (0..20).map(|i| node(i, &format!("rack{}", i % 10))).collect();
        let rack_of = |id: NodeId| nodes[id.0 as usize].rack.clone();
        for rack_aware in [true, false] {
            let mut placer = Placer::new(rack_aware, Some(3));
            let racks = vec!["rack3".to_string(), "rack7".into(), "rack1".into()];
            placer.set_class_racks(HashMap::from([(1, racks.clone())]));
            assert_eq!(placer.class_racks(1), racks.as_slice());
            assert!(placer.class_racks(0).is_empty());
            let chosen = placer.place_new(&nodes, 5, 1).unwrap();
            let chosen_racks: Vec<String> = chosen.iter().map(|&id| rack_of(id)).collect();
            assert_eq!(chosen_racks[..3], racks[..], "rack-aware {rack_aware}: {chosen_racks:?}");
            if rack_aware {
                let distinct: BTreeSet<&String> = chosen_racks.iter().collect();
                assert_eq!(distinct.len(), 5, "one unit per rack still: {chosen_racks:?}");
            }
            // Class 0 has no racks: balanced as always (nodes with no unit yet).
            let other = placer.place_new(&nodes, 5, 0).unwrap();
            assert!(other.iter().all(|&id| !chosen.contains(&id)), "balanced: {other:?} after {chosen:?}");
            // rack3's nodes far fuller than the emptiest: its place goes to others.
            for id in [3, 13] {
                placer.adjust(NodeId(id), 100);
            }
            let chosen = placer.place_new(&nodes, 5, 1).unwrap();
            let chosen_racks: Vec<String> = chosen.iter().map(|&id| rack_of(id)).collect();
            assert_eq!(chosen_racks[..2], racks[1..], "rack-aware {rack_aware}: {chosen_racks:?}");
            assert!(!chosen_racks.contains(&"rack3".to_string()), "{chosen_racks:?}");
        }
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
