//! Which units a degraded read or a repair reads: small pure functions over the stripe's placement,
//! the node states and the units known to have failed, so the policy crate can later replace them.
//! Must not do I/O, read clocks or hold state.

use std::collections::{BTreeSet, HashMap};

use codec::ErasureCode;
use meta::{NodeId, NodeInfo, NodeState};

/// How many recovery sets of the codec are considered before falling back to every readable unit.
pub const RECOVERY_SETS_CONSIDERED: usize = 64;

/// Which units of a stripe may be read: its node is registered and Up, and the unit is not in
/// `failed` (units that already failed a read, timed out or are being rebuilt).
pub fn readable_units(placement: &[NodeId], nodes: &HashMap<NodeId, NodeInfo>, failed: &BTreeSet<usize>) -> Vec<bool> {
    placement
        .iter()
        .enumerate()
        .map(|(unit, node)| !failed.contains(&unit) && nodes.get(node).is_some_and(|info| info.state == NodeState::Up))
        .collect()
}

/// The units to read to rebuild unit `target` ("Normal" policy of Hu et al.): the cheapest of the
/// codec's minimal recovery sets (an LRC's local group first) whose units are all readable; when
/// none is, every readable unit if together they determine the target; `None` when the target
/// cannot be rebuilt from what is readable.
pub fn recovery_units(code: &dyn ErasureCode, readable: &[bool], target: usize) -> Option<Vec<usize>> {
    assert_eq!(readable.len(), code.total_units(), "one readable flag per unit");
    let usable = |unit: &usize| *unit != target && readable[*unit];
    if let Ok(sets) = code.recovery_sets(target, RECOVERY_SETS_CONSIDERED)
        && let Some(set) = sets.into_iter().find(|set| set.iter().all(usable))
    {
        return Some(set);
    }
    let all: Vec<usize> = (0..readable.len()).filter(usable).collect();
    if !all.is_empty() && code.repair_coefficients(target, &all).is_ok() { Some(all) } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(name: &str) -> Box<dyn ErasureCode> {
        name.parse::<codec::CodeSpec>().unwrap().build().unwrap()
    }

    #[test]
    fn rs_reads_any_k_readable_units() {
        let rs = code("rs-6-3");
        let mut readable = vec![true; 9];
        readable[2] = false;
        readable[7] = false;
        let set = recovery_units(rs.as_ref(), &readable, 2).unwrap();
        assert_eq!(set.len(), 6);
        assert!(set.iter().all(|&u| u != 2 && u != 7));
        readable[0] = false;
        readable[1] = false;
        assert_eq!(recovery_units(rs.as_ref(), &readable, 2), None, "only 5 units left");
    }

    #[test]
    fn lrc_prefers_the_local_group_and_falls_back_to_globals() {
        let lrc = code("lrc-6-2-2");
        let readable = vec![true; 10];
        let local = recovery_units(lrc.as_ref(), &readable, 0).unwrap();
        assert_eq!(local.len(), 3, "local group of unit 0: {local:?}");
        let mut readable_without_peer = readable.clone();
        readable_without_peer[local[0]] = false;
        let global = recovery_units(lrc.as_ref(), &readable_without_peer, 0).unwrap();
        assert!(global.len() >= 6 && !global.contains(&local[0]), "{global:?}");
    }

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
            };
            nodes.insert(id, info);
        }
        assert_eq!(readable_units(&placement, &nodes, &BTreeSet::from([2])), vec![true, false, false]);
    }
}
