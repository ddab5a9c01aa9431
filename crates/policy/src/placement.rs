//! Placement policies: which node holds each unit of each stripe.
//!
//! Must not: read or write data; it returns a table.

use codec::CodeSpec;
use model::{LayoutError, NodeId, Placement};
use rand::Rng;
use rand::seq::SliceRandom;

/// The randomized balanced placement of Windows Azure Storage used by Hu et
/// al.: each stripe's n units go to n distinct random nodes among the least
/// loaded ones, so per-node storage differs by at most one unit.
pub fn balanced_random(
    spec: CodeSpec,
    node_count: u32,
    stripe_count: u32,
    rng: &mut (impl Rng + ?Sized),
) -> Result<Placement, LayoutError> {
    let n = units_on_enough_nodes(spec, node_count)?;
    let mut units_held = vec![0u32; node_count as usize];
    let mut order: Vec<u32> = (0..node_count).collect();
    let mut table = Vec::with_capacity(stripe_count as usize * n);
    for _ in 0..stripe_count {
        order.shuffle(rng);
        // Stable: random order among nodes holding equally many units.
        order.sort_by_key(|&node| units_held[node as usize]);
        let mut chosen: Vec<u32> = order[..n].to_vec();
        chosen.shuffle(rng);
        for &node in &chosen {
            units_held[node as usize] += 1;
            table.push(NodeId(node));
        }
    }
    let placement = Placement::new(spec, node_count, table)?;
    let counts = placement.units_per_node();
    debug_assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1);
    Ok(placement)
}

/// Random placement as EC-Store's (and EC-Cache's) baselines have it: each stripe's n units on n
/// distinct nodes drawn uniformly, independently of every other stripe, so per-node storage and the
/// nodes of neighbouring stripes are as uneven as chance makes them.
pub fn uniform_random(
    spec: CodeSpec,
    node_count: u32,
    stripe_count: u32,
    rng: &mut (impl Rng + ?Sized),
) -> Result<Placement, LayoutError> {
    let n = units_on_enough_nodes(spec, node_count)?;
    let mut table = Vec::with_capacity(stripe_count as usize * n);
    for _ in 0..stripe_count {
        let chosen = rand::seq::index::sample(rng, node_count as usize, n);
        table.extend(chosen.iter().map(|node| NodeId(node as u32)));
    }
    Placement::new(spec, node_count, table)
}

/// The code's units per stripe, if `node_count` nodes can hold them on distinct nodes.
fn units_on_enough_nodes(spec: CodeSpec, node_count: u32) -> Result<usize, LayoutError> {
    let n = spec.total_units();
    if (node_count as usize) < n {
        return Err(LayoutError::TooFewNodes { node_count, units: n });
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn paper_placement_is_balanced_and_valid() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let placement = balanced_random(CodeSpec::Rs { k: 6, m: 3 }, 90, 334, &mut rng).unwrap();
        let counts = placement.units_per_node();
        assert_eq!(counts.iter().sum::<u32>(), 334 * 9);
        assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1, "{counts:?}");
        assert_eq!(placement.partition_count(), 2004);
        let again = balanced_random(CodeSpec::Rs { k: 6, m: 3 }, 90, 334, &mut ChaCha8Rng::seed_from_u64(3)).unwrap();
        assert_eq!(placement, again);
    }

    #[test]
    fn uniform_placement_is_valid_reproducible_and_not_balanced_by_design() {
        let spec = CodeSpec::Rs { k: 2, m: 2 };
        let placement = uniform_random(spec, 32, 8, &mut ChaCha8Rng::seed_from_u64(3)).unwrap();
        assert_eq!(placement, uniform_random(spec, 32, 8, &mut ChaCha8Rng::seed_from_u64(3)).unwrap());
        // Eight stripes of four units on 32 nodes: balanced placement uses every node once; chance
        // almost never does.
        let counts = placement.units_per_node();
        assert_eq!(counts.iter().sum::<u32>(), 32);
        assert!(counts.iter().any(|&c| c != 1), "{counts:?}");
        let balanced = balanced_random(spec, 32, 8, &mut ChaCha8Rng::seed_from_u64(3)).unwrap();
        assert!(balanced.units_per_node().iter().all(|&c| c == 1));
        assert!(uniform_random(spec, 3, 1, &mut ChaCha8Rng::seed_from_u64(3)).is_err());
    }
}
