//! EC-Store's chunk movement (Abebe et al., §IV-C and §IV-D): the gain Δ = w1·E + w2·I of moving
//! one chunk of a block from site s to site d (Eqs. 5–8), and Algorithm 1 (selectMovementPlan),
//! which scans candidate blocks, their chunks from the most loaded site down and every destination
//! that holds no chunk of the block, and keeps the move of the largest positive Δ.
//!
//! - E, the access-cost change (Eq. 5): over the blocks B_i that appeared with B_b in past requests,
//!   Σ (cost(C, {B_b, B_i}) − cost(C', {B_b, B_i})) · λ_{b,i}, each pair's cost the least by the
//!   access model ([`crate::access_plan`], solved exactly: two blocks are tiny).
//! - I, the balance change (Eqs. 6–7): Ω_j = |1 − ω_j / ω̄|, Ω(s, d) = max(Ω_s, Ω_d), I = Ω(C) −
//!   Ω(C'). How a move shifts load is not published; here the chunk carries its own load (the
//!   caller's estimate: its block's access rate times its bytes, say), which leaves s for d.
//!
//! Owns: the arithmetic of a move's worth and the scan. Must not: know nodes, stripes or clocks, or
//! keep statistics (the caller gathers co-access likelihoods and loads and passes them in).

use crate::access_plan::{AccessInstance, BlockRead, DEFAULT_NODE_BUDGET, SiteCost, solve_exact};

/// A block as movement sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockState {
    /// The sites of its chunks (distinct), one per chunk.
    pub sites: Vec<usize>,
    /// Chunks a read needs (k).
    pub need: usize,
    /// Bytes of each chunk.
    pub chunk_bytes: u64,
    /// The load one of its chunks puts on its site, in the loads' unit.
    pub chunk_load: f64,
    /// Blocks read with it before and λ = P(both in a request | it is): (block index, λ).
    pub partners: Vec<(usize, f64)>,
}

/// The weights of Eq. 8.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoveWeights {
    /// w1, on E (cost units).
    pub access: f64,
    /// w2, on I (dimensionless, so w2 carries the cost unit).
    pub balance: f64,
}

impl MoveWeights {
    /// The paper's best (§V-B3): w1 = 1 and w2 = 3 where the average overhead is 5, that is
    /// w2 = 0.6 × the average site overhead, in the overheads' unit.
    pub fn paper(average_overhead: f64) -> Self {
        Self { access: 1.0, balance: 0.6 * average_overhead }
    }
}

/// What movement knows of the cluster: every site's costs and load, every relevant block.
#[derive(Clone, Debug, PartialEq)]
pub struct MovementState {
    /// o_j and m_j per site.
    pub sites: Vec<SiteCost>,
    /// ω_j per site.
    pub loads: Vec<f64>,
    /// The blocks (candidates and their partners), by index.
    pub blocks: Vec<BlockState>,
}

/// A move and its worth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Move {
    /// The block.
    pub block: usize,
    /// The site its chunk leaves.
    pub from: usize,
    /// The site it goes to (held no chunk of the block).
    pub to: usize,
    /// Δ, positive.
    pub gain: f64,
    /// Its E.
    pub access_gain: f64,
    /// Its I.
    pub balance_gain: f64,
}

impl MovementState {
    /// The least cost of reading blocks `a` and `b` together, `a`'s chunks on `a_sites`.
    fn pair_cost(&self, a: usize, a_sites: &[usize], b: usize) -> f64 {
        let read = |block: &BlockState, sites: &[usize]| BlockRead {
            chunk_bytes: block.chunk_bytes,
            sites: sites.to_vec(),
            need: block.need,
        };
        let (first, second) = (&self.blocks[a], &self.blocks[b]);
        let instance = AccessInstance {
            sites: self.sites.clone(),
            blocks: vec![read(first, a_sites), read(second, &second.sites)],
        };
        solve_exact(&instance, DEFAULT_NODE_BUDGET).map(|plan| plan.cost).unwrap_or(f64::INFINITY)
    }

    /// E of moving `block`'s chunk from `from` to `to` (Eq. 5). The move must be one: `from` holds
    /// a chunk of the block and `to` none.
    pub fn access_gain(&self, block: usize, from: usize, to: usize) -> f64 {
        let state = &self.blocks[block];
        assert!(
            state.sites.contains(&from) && !state.sites.contains(&to),
            "not a move of block {block}: {from} -> {to}"
        );
        let moved: Vec<usize> = state.sites.iter().map(|&s| if s == from { to } else { s }).collect();
        state
            .partners
            .iter()
            .filter(|&&(partner, _)| partner != block)
            .map(|&(partner, likelihood)| {
                (self.pair_cost(block, &state.sites, partner) - self.pair_cost(block, &moved, partner)) * likelihood
            })
            .sum()
    }

    /// I of moving a chunk of `load` from `from` to `to` (Eqs. 6–7); zero when every load is zero.
    pub fn balance_gain(&self, load: f64, from: usize, to: usize) -> f64 {
        let average = self.loads.iter().sum::<f64>() / self.loads.len().max(1) as f64;
        if average <= 0.0 {
            return 0.0;
        }
        let omega = |w: f64| (1.0 - w / average).abs();
        let before = omega(self.loads[from]).max(omega(self.loads[to]));
        let after = omega(self.loads[from] - load).max(omega(self.loads[to] + load));
        before - after
    }

    /// Δ of moving `block`'s chunk from `from` to `to` (Eq. 8).
    pub fn gain(&self, block: usize, from: usize, to: usize, weights: MoveWeights) -> Move {
        let access_gain = self.access_gain(block, from, to);
        let balance_gain = self.balance_gain(self.blocks[block].chunk_load, from, to);
        let gain = weights.access * access_gain + weights.balance * balance_gain;
        Move { block, from, to, gain, access_gain, balance_gain }
    }
}

/// Algorithm 1: over `candidates`, each block's chunks from the most loaded site down, every
/// destination that holds no chunk of the block and that `allowed(block, from, to)` admits (a site
/// that is up, where the caller's placement rules let the chunk go); the move of the largest Δ if
/// any is positive. Anytime: at most `max_evaluations` moves are scored (the best so far is
/// returned).
pub fn select_move(
    state: &MovementState,
    candidates: &[usize],
    weights: MoveWeights,
    max_evaluations: usize,
    allowed: &dyn Fn(usize, usize, usize) -> bool,
) -> Option<Move> {
    let mut best: Option<Move> = None;
    let mut left = max_evaluations;
    for &block in candidates {
        let sites = &state.blocks[block].sites;
        let mut sources = sites.clone();
        sources.sort_by(|&a, &b| state.loads[b].total_cmp(&state.loads[a]).then(a.cmp(&b)));
        let destinations: Vec<usize> = (0..state.sites.len()).filter(|&d| !sites.contains(&d)).collect();
        for &from in &sources {
            for &to in destinations.iter().filter(|&&to| allowed(block, from, to)) {
                if left == 0 {
                    return best;
                }
                left -= 1;
                let candidate = state.gain(block, from, to, weights);
                assert!(!sites.contains(&candidate.to), "a move never puts two chunks of a block on one site");
                if candidate.gain > best.map_or(0.0, |b| b.gain) {
                    best = Some(candidate);
                }
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uniform_sites(count: usize) -> Vec<SiteCost> {
        vec![SiteCost { overhead: 1.0, per_byte: 0.0 }; count]
    }

    fn block(sites: Vec<usize>, partners: Vec<(usize, f64)>) -> BlockState {
        BlockState { sites, need: 2, chunk_bytes: 1, chunk_load: 0.0, partners }
    }

    #[test]
    fn a_move_that_saves_one_site_access_gains_the_overhead_times_the_likelihood() {
        // Fig. 2's situation: two blocks of RS(2,1) read together (λ = 0.5) on six sites apart: four
        // site accesses. Moving a chunk of block 0 next to block 1's saves one.
        let state = MovementState {
            sites: uniform_sites(6),
            loads: vec![1.0; 6],
            blocks: vec![block(vec![0, 1, 2], vec![(1, 0.5)]), block(vec![3, 4, 5], vec![(0, 0.5)])],
        };
        assert!((state.access_gain(0, 0, 3) - 0.5).abs() < 1e-12);
        assert_eq!(state.access_gain(0, 0, 4), state.access_gain(0, 0, 3), "any of block 1's sites saves one");
        let best = select_move(&state, &[0], MoveWeights::paper(1.0), 1000, &|_, _, _| true).expect("a positive move");
        assert!(best.to >= 3 && (best.gain - 0.5).abs() < 1e-12, "{best:?}");
    }

    #[test]
    fn balance_rewards_moving_load_from_a_hot_site_to_a_cold_one() {
        let mut hot = block(vec![0, 1, 2], Vec::new());
        hot.chunk_load = 1.0;
        let state = MovementState { sites: uniform_sites(4), loads: vec![3.0, 1.0, 1.0, 1.0], blocks: vec![hot] };
        // Average 1.5: Ω(0) = 1, Ω(3) = 1/3; after the move ω = 2 and 2: Ω = 1/3 both.
        assert!((state.balance_gain(1.0, 0, 3) - (1.0 - 1.0 / 3.0)).abs() < 1e-12);
        assert!(state.balance_gain(1.0, 3, 0) < 0.0, "the other way unbalances");
        let best = select_move(&state, &[0], MoveWeights { access: 1.0, balance: 1.0 }, 1000, &|_, _, _| true).unwrap();
        assert_eq!((best.from, best.to), (0, 3), "the most loaded chunk to the only free site");
        let closed = select_move(&state, &[0], MoveWeights { access: 1.0, balance: 1.0 }, 1000, &|_, _, to| to != 3);
        assert_eq!(closed, None, "no move to a site that is not open");
    }

    #[test]
    fn no_move_is_chosen_without_a_positive_gain_and_the_scan_is_bounded() {
        let state = MovementState {
            sites: uniform_sites(5),
            loads: vec![1.0; 5],
            blocks: vec![block(vec![0, 1, 2], Vec::new())],
        };
        assert_eq!(select_move(&state, &[0], MoveWeights::paper(1.0), 1000, &|_, _, _| true), None);
        let mut skewed = state.clone();
        skewed.loads = vec![5.0, 1.0, 1.0, 1.0, 1.0];
        skewed.blocks[0].chunk_load = 1.0;
        assert!(
            select_move(&skewed, &[0], MoveWeights::paper(1.0), 0, &|_, _, _| true).is_none(),
            "no evaluation, no move"
        );
        assert!(
            select_move(&skewed, &[0], MoveWeights::paper(1.0), 1, &|_, _, _| true).is_some(),
            "the first is the hot chunk"
        );
    }
}
