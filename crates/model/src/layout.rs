//! Code layouts and placement: which units rebuild a unit (from the codec's
//! recovery sets) and which node holds each unit of each stripe.
//!
//! Owns: the static facts a policy consults. Must not: choose a placement
//! (placement policies live in `policy`) or pick a recovery set.

use crate::ids::{NodeId, PartitionId, StripeId};
use codec::CodeSpec;
use serde::{Deserialize, Serialize};

/// Most recovery sets kept per data unit. RS(6,3) has C(8,6) = 28 and
/// LRC(6,2,2) has its local set plus a few dozen global ones; wider codes
/// are capped because no policy evaluates more than this per request.
pub const MAX_RECOVERY_SETS_PER_UNIT: usize = 128;

/// A bad layout or placement.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LayoutError {
    /// The code could not be built or asked.
    #[error("code {spec}: {reason}")]
    Code {
        /// The code.
        spec: String,
        /// What the codec said.
        reason: String,
    },
    /// A code too wide for unit indices of one byte.
    #[error("code {spec} has {units} units per stripe; at most 255 are supported")]
    TooWide {
        /// The code.
        spec: String,
        /// Units per stripe.
        units: usize,
    },
    /// A placement table of the wrong length.
    #[error("placement has {got} entries; {stripes} stripes of {units} units need {want}")]
    WrongLength {
        /// Entries given.
        got: usize,
        /// Stripes.
        stripes: usize,
        /// Units per stripe.
        units: usize,
        /// Entries needed.
        want: usize,
    },
    /// A node id outside the cluster.
    #[error("stripe {stripe} unit {unit} is on node {node}, but the cluster has {node_count} nodes")]
    NodeOutOfRange {
        /// Stripe.
        stripe: u32,
        /// Unit.
        unit: usize,
        /// Node given.
        node: u32,
        /// Nodes in the cluster.
        node_count: u32,
    },
    /// Two units of one stripe on one node (a single failure would lose both).
    #[error("stripe {stripe} has two units on node {node}")]
    SharedNode {
        /// Stripe.
        stripe: u32,
        /// Node holding two units.
        node: u32,
    },
    /// Fewer nodes than units per stripe.
    #[error("{node_count} nodes cannot hold {units} distinct units per stripe")]
    TooFewNodes {
        /// Nodes in the cluster.
        node_count: u32,
        /// Units per stripe.
        units: usize,
    },
}

/// One minimal set of other units of the stripe that rebuilds a data unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoverySet {
    /// Unit indices within the stripe, ascending, never the lost unit.
    pub units: Vec<u8>,
    /// Whether this is a local-group repair (fewer than k units, LRC).
    pub local: bool,
}

/// A code with the recovery sets of each of its data units, computed once.
#[derive(Clone, Debug)]
pub struct CodeLayout {
    spec: CodeSpec,
    data_units: usize,
    total_units: usize,
    /// `recovery[u]`: sets for data unit `u`, cheapest first (local first).
    recovery: Vec<Vec<RecoverySet>>,
}

impl CodeLayout {
    /// Builds the code and asks it for the recovery sets of every data unit.
    pub fn new(spec: CodeSpec) -> Result<CodeLayout, LayoutError> {
        let code_error = |e: codec::CodecError| LayoutError::Code { spec: spec.to_string(), reason: e.to_string() };
        let code = spec.build().map_err(code_error)?;
        let total_units = spec.total_units();
        if total_units > 255 {
            return Err(LayoutError::TooWide { spec: spec.to_string(), units: total_units });
        }
        let data_units = spec.data_units();
        let mut recovery = Vec::with_capacity(data_units);
        for unit in 0..data_units {
            let sets = code.recovery_sets(unit, MAX_RECOVERY_SETS_PER_UNIT).map_err(code_error)?;
            let sets: Vec<RecoverySet> = sets
                .into_iter()
                .map(|set| {
                    debug_assert!(!set.contains(&unit));
                    let local = set.len() < data_units;
                    RecoverySet { units: set.into_iter().map(|u| u as u8).collect(), local }
                })
                .collect();
            assert!(!sets.is_empty(), "{spec}: data unit {unit} has no recovery set");
            recovery.push(sets);
        }
        Ok(CodeLayout { spec, data_units, total_units, recovery })
    }

    /// The code.
    pub fn spec(&self) -> CodeSpec {
        self.spec
    }

    /// Data units per stripe (k).
    pub fn data_units(&self) -> usize {
        self.data_units
    }

    /// All units per stripe (n).
    pub fn total_units(&self) -> usize {
        self.total_units
    }

    /// Recovery sets of data unit `unit`, cheapest first: for an LRC the
    /// local group comes first.
    pub fn recovery_sets(&self, unit: u8) -> &[RecoverySet] {
        &self.recovery[unit as usize]
    }
}

/// Where a data partition lives: its stripe and its unit index there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UnitLocation {
    /// The stripe.
    pub stripe: StripeId,
    /// The unit index within the stripe (a data unit, `< k`).
    pub unit: u8,
}

/// Which node holds each unit of each stripe. Data partition `p` is data
/// unit `p % k` of stripe `p / k`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    node_count: u32,
    data_units: usize,
    total_units: usize,
    /// Stripe-major: `nodes[stripe * total_units + unit]`.
    nodes: Vec<NodeId>,
}

impl Placement {
    /// Validates and wraps a placement table (stripe-major, `n` entries per
    /// stripe): every node in range, no two units of a stripe on one node.
    pub fn new(spec: CodeSpec, node_count: u32, nodes: Vec<NodeId>) -> Result<Placement, LayoutError> {
        let total_units = spec.total_units();
        if (node_count as usize) < total_units {
            return Err(LayoutError::TooFewNodes { node_count, units: total_units });
        }
        if nodes.is_empty() || !nodes.len().is_multiple_of(total_units) {
            let stripes = nodes.len() / total_units;
            return Err(LayoutError::WrongLength {
                got: nodes.len(),
                stripes,
                units: total_units,
                want: stripes.max(1) * total_units,
            });
        }
        for (stripe, units) in nodes.chunks_exact(total_units).enumerate() {
            for (unit, node) in units.iter().enumerate() {
                if node.0 >= node_count {
                    return Err(LayoutError::NodeOutOfRange { stripe: stripe as u32, unit, node: node.0, node_count });
                }
                if units[..unit].contains(node) {
                    return Err(LayoutError::SharedNode { stripe: stripe as u32, node: node.0 });
                }
            }
        }
        Ok(Placement { node_count, data_units: spec.data_units(), total_units, nodes })
    }

    /// A placement with no stripe yet, grown by [`Placement::push_stripe`]: a live executor learns
    /// stripes as requests name them, where the simulator knows them all up front.
    pub fn empty(spec: CodeSpec, node_count: u32) -> Result<Placement, LayoutError> {
        let total_units = spec.total_units();
        if (node_count as usize) < total_units {
            return Err(LayoutError::TooFewNodes { node_count, units: total_units });
        }
        Ok(Placement { node_count, data_units: spec.data_units(), total_units, nodes: Vec::new() })
    }

    /// Appends a stripe on `nodes` (one per unit, distinct, in range) and returns its id.
    pub fn push_stripe(&mut self, nodes: &[NodeId]) -> Result<StripeId, LayoutError> {
        let stripe = self.stripe_count();
        if nodes.len() != self.total_units {
            return Err(LayoutError::WrongLength {
                got: nodes.len(),
                stripes: 1,
                units: self.total_units,
                want: self.total_units,
            });
        }
        for (unit, node) in nodes.iter().enumerate() {
            if node.0 >= self.node_count {
                return Err(LayoutError::NodeOutOfRange { stripe, unit, node: node.0, node_count: self.node_count });
            }
            if nodes[..unit].contains(node) {
                return Err(LayoutError::SharedNode { stripe, node: node.0 });
            }
        }
        self.nodes.extend_from_slice(nodes);
        Ok(StripeId(stripe))
    }

    /// Moves unit `unit` of `stripe` to node `to` (EC-Store's chunk mover, once the copy landed).
    /// Refused, changing nothing, when `to` is out of range or already holds a unit of the stripe:
    /// two units of a stripe never share a node.
    pub fn move_unit(&mut self, stripe: StripeId, unit: u8, to: NodeId) -> Result<NodeId, LayoutError> {
        if to.0 >= self.node_count {
            return Err(LayoutError::NodeOutOfRange {
                stripe: stripe.0,
                unit: usize::from(unit),
                node: to.0,
                node_count: self.node_count,
            });
        }
        if self.stripe_nodes(stripe).contains(&to) {
            return Err(LayoutError::SharedNode { stripe: stripe.0, node: to.0 });
        }
        let slot = &mut self.nodes[stripe.index() * self.total_units + usize::from(unit)];
        Ok(std::mem::replace(slot, to))
    }

    /// Raises the node count (nodes joined); never lowers it, so every stripe stays in range.
    pub fn grow_node_count(&mut self, node_count: u32) {
        self.node_count = self.node_count.max(node_count);
    }

    /// Nodes in the cluster.
    pub fn node_count(&self) -> u32 {
        self.node_count
    }

    /// Stripes (coding groups).
    pub fn stripe_count(&self) -> u32 {
        (self.nodes.len() / self.total_units) as u32
    }

    /// Data partitions (`stripes * k`).
    pub fn partition_count(&self) -> u32 {
        self.stripe_count() * self.data_units as u32
    }

    /// The stripe and unit of a data partition.
    #[inline]
    pub fn locate(&self, partition: PartitionId) -> UnitLocation {
        debug_assert!(partition.0 < self.partition_count());
        let k = self.data_units as u32;
        UnitLocation { stripe: StripeId(partition.0 / k), unit: (partition.0 % k) as u8 }
    }

    /// The node holding unit `unit` of `stripe`.
    #[inline]
    pub fn node_of(&self, stripe: StripeId, unit: u8) -> NodeId {
        self.nodes[stripe.index() * self.total_units + unit as usize]
    }

    /// All nodes of a stripe, by unit index.
    #[inline]
    pub fn stripe_nodes(&self, stripe: StripeId) -> &[NodeId] {
        let start = stripe.index() * self.total_units;
        &self.nodes[start..start + self.total_units]
    }

    /// Units stored per node (for checking balance).
    pub fn units_per_node(&self) -> Vec<u32> {
        let mut counts = vec![0u32; self.node_count as usize];
        for node in &self.nodes {
            counts[node.index()] += 1;
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rs_6_3_has_28_recovery_sets_per_data_unit() {
        let layout = CodeLayout::new(CodeSpec::Rs { k: 6, m: 3 }).unwrap();
        for unit in 0..6u8 {
            let sets = layout.recovery_sets(unit);
            assert_eq!(sets.len(), 28);
            assert!(sets.iter().all(|s| s.units.len() == 6 && !s.units.contains(&unit) && !s.local));
        }
    }

    #[test]
    fn lrc_6_2_2_puts_the_local_group_first() {
        let layout = CodeLayout::new(CodeSpec::Lrc { k: 6, l: 2, r: 2 }).unwrap();
        let sets = layout.recovery_sets(1);
        assert_eq!(sets[0].units, vec![0, 2, 6]);
        assert!(sets[0].local);
        assert!(sets.len() > 1);
        let sets = layout.recovery_sets(4);
        assert_eq!(sets[0].units, vec![3, 5, 7]);
    }

    #[test]
    fn placement_rejects_shared_nodes_and_bad_lengths() {
        let spec = CodeSpec::Rs { k: 2, m: 1 };
        let ids = |v: &[u32]| v.iter().map(|&n| NodeId(n)).collect::<Vec<_>>();
        assert!(Placement::new(spec, 3, ids(&[0, 1, 2, 2, 1, 0])).is_ok());
        assert_eq!(Placement::new(spec, 3, ids(&[0, 1, 1])), Err(LayoutError::SharedNode { stripe: 0, node: 1 }));
        assert!(matches!(Placement::new(spec, 3, ids(&[0, 1])), Err(LayoutError::WrongLength { .. })));
        assert!(matches!(Placement::new(spec, 3, ids(&[0, 1, 3])), Err(LayoutError::NodeOutOfRange { .. })));
        assert!(matches!(Placement::new(spec, 2, ids(&[0, 1, 2])), Err(LayoutError::TooFewNodes { .. })));
        let placement = Placement::new(spec, 3, ids(&[0, 1, 2, 2, 1, 0])).unwrap();
        assert_eq!(placement.partition_count(), 4);
        assert_eq!(placement.locate(PartitionId(3)), UnitLocation { stripe: StripeId(1), unit: 1 });
        assert_eq!(placement.node_of(StripeId(1), 0), NodeId(2));
        assert_eq!(placement.units_per_node(), vec![2, 2, 2]);
    }

    #[test]
    fn an_empty_placement_grows_stripe_by_stripe_with_the_same_checks() {
        let spec = CodeSpec::Rs { k: 2, m: 1 };
        let ids = |v: &[u32]| v.iter().map(|&n| NodeId(n)).collect::<Vec<_>>();
        let mut placement = Placement::empty(spec, 3).unwrap();
        assert_eq!(placement.partition_count(), 0);
        assert_eq!(placement.push_stripe(&ids(&[2, 0, 1])), Ok(StripeId(0)));
        assert_eq!(placement.push_stripe(&ids(&[0, 0, 1])), Err(LayoutError::SharedNode { stripe: 1, node: 0 }));
        assert!(matches!(placement.push_stripe(&ids(&[0, 1, 3])), Err(LayoutError::NodeOutOfRange { .. })));
        assert!(matches!(placement.push_stripe(&ids(&[0, 1])), Err(LayoutError::WrongLength { .. })));
        placement.grow_node_count(4);
        placement.grow_node_count(2);
        assert_eq!(placement.node_count(), 4);
        assert_eq!(placement.push_stripe(&ids(&[0, 1, 3])), Ok(StripeId(1)));
        assert_eq!(placement.partition_count(), 4);
        assert_eq!(placement.locate(PartitionId(3)), UnitLocation { stripe: StripeId(1), unit: 1 });
        assert!(matches!(Placement::empty(spec, 2), Err(LayoutError::TooFewNodes { .. })));
    }

    #[test]
    fn a_unit_moves_only_to_a_node_of_the_cluster_that_holds_none_of_its_stripe() {
        let spec = CodeSpec::Rs { k: 2, m: 1 };
        let ids = |v: &[u32]| v.iter().map(|&n| NodeId(n)).collect::<Vec<_>>();
        let mut placement = Placement::new(spec, 5, ids(&[0, 1, 2, 2, 3, 4])).unwrap();
        assert_eq!(placement.move_unit(StripeId(0), 1, NodeId(4)), Ok(NodeId(1)));
        assert_eq!(placement.stripe_nodes(StripeId(0)), &ids(&[0, 4, 2])[..]);
        let before = placement.clone();
        assert_eq!(placement.move_unit(StripeId(0), 0, NodeId(2)), Err(LayoutError::SharedNode { stripe: 0, node: 2 }));
        assert!(matches!(placement.move_unit(StripeId(1), 0, NodeId(5)), Err(LayoutError::NodeOutOfRange { .. })));
        assert_eq!(placement, before);
    }
}
