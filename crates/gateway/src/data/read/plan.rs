//! Which units a degraded read or a repair reads: small pure functions over the stripe's placement,
//! the node states and the units known to have failed, so the policy crate can later replace them.
//! Must not do I/O, read clocks or hold state.

use std::collections::{BTreeSet, HashMap};

use meta::{NodeId, NodeInfo, NodeState};

/// The units to read to rebuild a unit: the code's answer, shared with the execution core.
pub use execution::recovery::recovery_units;

/// Which units of a stripe may be read: its node is registered and Up, and the unit is not in
/// `failed` (units that already failed a read, timed out or are being rebuilt).
pub fn readable_units(placement: &[NodeId], nodes: &HashMap<NodeId, NodeInfo>, failed: &BTreeSet<usize>) -> Vec<bool> {
    placement
        .iter()
        .enumerate()
        .map(|(unit, node)| !failed.contains(&unit) && nodes.get(node).is_some_and(|info| info.state == NodeState::Up))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_units_follow_node_states_and_failures() {
        let placement: Vec<NodeId> = (0..3).map(NodeId).collect();
        let mut nodes = HashMap::new();
        for (i, state) in [NodeState::Up, NodeState::Down, NodeState::Up].into_iter().enumerate() {
            let id = NodeId(i as u32);
            let info = NodeInfo {
                id,
                address: String::new(),
                rack: String::new(),
                capacity_bytes: 0,
                state,
                last_heartbeat_ms: 0,
                down_since_ms: None,
                directory: None,
                checking_since_ms: None,
            };
            nodes.insert(id, info);
        }
        assert_eq!(readable_units(&placement, &nodes, &BTreeSet::from([2])), vec![true, false, false]);
    }
}
