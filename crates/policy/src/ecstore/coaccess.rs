//! EC-Store's co-access statistics (§V-A): over a sliding window of the last `window` sampled
//! requests, how often each block was read and how often each pair of blocks was read together,
//! so that λ_{b,i} = P({B_b, B_i} ⊆ Q | B_b ∈ Q) = together(b, i) / reads(b). A request leaving the
//! window takes its counts with it. The mover's candidates are drawn in proportion to how often
//! each block was read (Algorithm 1's GETCANDIDATEBLOCKS: hot blocks first, others explored too).
//!
//! Owns: the window and its counts, bounded: at most `window` requests of at most
//! `max_blocks_per_request` blocks each (a request's first blocks, in its order). Must not: choose
//! which requests to sample (the caller's rate), or read a clock.

use std::collections::{HashMap, VecDeque};

use rand::Rng;

/// A block, by whatever id the caller uses (an object's stripe, say).
pub type BlockId = u64;

/// The sliding window of co-access; see the module documentation.
#[derive(Clone, Debug)]
pub struct CoAccess {
    window: usize,
    max_blocks_per_request: usize,
    requests: VecDeque<Vec<BlockId>>,
    reads: HashMap<BlockId, u64>,
    /// Per block, the blocks read with it and how often (both directions kept, so a block's
    /// partners are found without scanning every pair).
    together: HashMap<BlockId, HashMap<BlockId, u64>>,
}

impl CoAccess {
    /// The paper's window is the last 5 000 sampled requests.
    pub const PAPER_WINDOW: usize = 5_000;

    /// An empty window of `window` requests, each counted for its first `max_blocks_per_request`
    /// distinct blocks (pairs grow with its square).
    pub fn new(window: usize, max_blocks_per_request: usize) -> Self {
        assert!(window > 0 && max_blocks_per_request > 0, "a window holds something");
        Self {
            window,
            max_blocks_per_request,
            requests: VecDeque::with_capacity(window.min(1 << 16)),
            reads: HashMap::new(),
            together: HashMap::new(),
        }
    }

    /// Counts a sampled request of `blocks` (repeats ignored); the oldest leaves a full window.
    pub fn record(&mut self, blocks: &[BlockId]) {
        let mut distinct: Vec<BlockId> = Vec::with_capacity(blocks.len().min(self.max_blocks_per_request));
        for &block in blocks {
            if distinct.len() == self.max_blocks_per_request {
                break;
            }
            if !distinct.contains(&block) {
                distinct.push(block);
            }
        }
        self.count(&distinct, true);
        self.requests.push_back(distinct);
        if self.requests.len() > self.window {
            let oldest = self.requests.pop_front().expect("the window is not empty");
            self.count(&oldest, false);
        }
        debug_assert!(self.requests.len() <= self.window);
    }

    fn count(&mut self, blocks: &[BlockId], add: bool) {
        let change = |counter: &mut u64| {
            if add {
                *counter += 1;
            } else {
                *counter = counter.checked_sub(1).expect("a request leaving was counted when it came");
            }
        };
        for (i, &a) in blocks.iter().enumerate() {
            change(self.reads.entry(a).or_insert(0));
            for &b in &blocks[i + 1..] {
                change(self.together.entry(a).or_default().entry(b).or_insert(0));
                change(self.together.entry(b).or_default().entry(a).or_insert(0));
            }
        }
        if !add {
            for &a in blocks {
                if self.reads.get(&a) == Some(&0) {
                    self.reads.remove(&a);
                }
                if let Some(partners) = self.together.get_mut(&a) {
                    partners.retain(|_, count| *count > 0);
                    if partners.is_empty() {
                        self.together.remove(&a);
                    }
                }
            }
        }
    }

    /// Requests in the window.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// How many requests of the window read `block`.
    pub fn reads(&self, block: BlockId) -> u64 {
        self.reads.get(&block).copied().unwrap_or(0)
    }

    /// λ_{b,i}: of the window's requests that read `block`, the share that also read `other`.
    pub fn likelihood(&self, block: BlockId, other: BlockId) -> f64 {
        let reads = self.reads(block);
        if reads == 0 || block == other {
            return 0.0;
        }
        let together = self.together.get(&block).and_then(|partners| partners.get(&other)).copied().unwrap_or(0);
        together as f64 / reads as f64
    }

    /// The blocks read with `block` in the window and their λ, most likely first.
    pub fn partners(&self, block: BlockId) -> Vec<(BlockId, f64)> {
        let reads = self.reads(block).max(1) as f64;
        let mut partners: Vec<(BlockId, f64)> = self
            .together
            .get(&block)
            .map(|partners| partners.iter().map(|(&other, &count)| (other, count as f64 / reads)).collect())
            .unwrap_or_default();
        partners.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        partners
    }

    /// Up to `count` distinct blocks drawn in proportion to their reads in the window (hot blocks
    /// are likely, the others still explored), from `rng`.
    pub fn candidates(&self, count: usize, rng: &mut impl Rng) -> Vec<BlockId> {
        let mut pool: Vec<(BlockId, u64)> = self.reads.iter().map(|(&b, &n)| (b, n)).collect();
        pool.sort_unstable();
        let mut chosen = Vec::with_capacity(count.min(pool.len()));
        // Bounded: each round removes one block from the pool.
        while chosen.len() < count && !pool.is_empty() {
            let total: u64 = pool.iter().map(|&(_, n)| n).sum();
            let mut ticket = rng.random_range(0..total);
            let index = pool
                .iter()
                .position(|&(_, n)| {
                    if ticket < n {
                        return true;
                    }
                    ticket -= n;
                    false
                })
                .expect("a ticket below the total falls on a block");
            chosen.push(pool.swap_remove(index).0);
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn likelihoods_follow_the_window() {
        let mut stats = CoAccess::new(3, 16);
        stats.record(&[1, 2]);
        stats.record(&[1, 3]);
        stats.record(&[1, 2, 2]);
        assert_eq!(stats.reads(1), 3);
        assert!((stats.likelihood(1, 2) - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(stats.likelihood(2, 1), 1.0, "every read of 2 read 1 too");
        assert_eq!(stats.partners(1), [(2, 2.0 / 3.0), (3, 1.0 / 3.0)]);
        // The first request leaves: its pair with it.
        stats.record(&[4]);
        assert_eq!((stats.len(), stats.reads(1)), (3, 2));
        assert_eq!(stats.likelihood(1, 2), 0.5);
        stats.record(&[5]);
        stats.record(&[6]);
        assert_eq!(stats.reads(1), 0);
        assert!(stats.partners(1).is_empty());
        assert_eq!(stats.likelihood(1, 2), 0.0);
    }

    #[test]
    fn a_request_counts_at_most_its_first_blocks() {
        let mut stats = CoAccess::new(10, 2);
        stats.record(&[1, 2, 3, 4]);
        assert_eq!((stats.reads(1), stats.reads(2), stats.reads(3)), (1, 1, 0));
    }

    #[test]
    fn candidates_are_distinct_and_favour_hot_blocks() {
        let mut stats = CoAccess::new(1000, 4);
        for i in 0..900 {
            stats.record(&[7, 100 + i % 10]);
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut seven_first = 0;
        for _ in 0..200 {
            let drawn = stats.candidates(3, &mut rng);
            assert_eq!(drawn.len(), 3);
            assert!(drawn.iter().all(|b| drawn.iter().filter(|c| *c == b).count() == 1), "{drawn:?}");
            seven_first += usize::from(drawn[0] == 7);
        }
        // Block 7 holds half the reads: drawn first about half the time.
        assert!((70..=130).contains(&seven_first), "{seven_first}");
        assert_eq!(stats.candidates(100, &mut rng).len(), 11, "no more than there are");
    }
}
