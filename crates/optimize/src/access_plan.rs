//! EC-Store's access planning (Abebe et al., §IV-B, Eqs. 1–4): for a request of several blocks,
//! which chunks of each block to read so that the cost
//!
//! ```text
//! cost(Q) = Σ_j o_j·a_j + Σ_j Σ_{B_i ∈ Q} s_ij·m_j·z_i
//! ```
//!
//! is least, every block reading at least `need_i` of its chunks (k_i, or k_i + δ with late
//! binding) and a site's overhead o_j paid once when any chunk is read there (a_j). That per-site
//! overhead is what rewards reading co-located chunks.
//!
//! [`solve_exact`] is an exact branch and bound over the sites (include / exclude each, most shared
//! sites first). Its bound charges the overheads already paid, and for each block its cheapest
//! reads among the sites not excluded, an undecided site's overhead split evenly among the blocks
//! that could read there (a site used by some of them costs at least their shares); the reads that
//! bound picks are priced as a plan at every node, which keeps a good incumbent. It equals brute
//! force on every instance tested, and a node budget bounds a call; [`greedy`] is the paper's plan while the exact one is being solved: blocks in turn,
//! chunks at sites the plan already accesses first, the rest filled.
//!
//! Owns: the instance, the plan, their cost. Must not: know sites are nodes or blocks are stripes
//! (callers translate), read a clock, or keep state between calls (the plan cache is the policy's).

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

/// One site's costs: `overhead` paid once if any chunk is read there (o_j: its round trip and
/// queueing), `per_byte` for every byte read there (m_j).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SiteCost {
    /// o_j, any unit (seconds in lowtail's callers).
    pub overhead: f64,
    /// m_j, the same unit per byte.
    pub per_byte: f64,
}

/// One block of the request: where its chunks are and how many to read.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockRead {
    /// z_i, bytes of each chunk.
    pub chunk_bytes: u64,
    /// The sites holding one of its chunks each (distinct, indices into the instance's sites).
    pub sites: Vec<usize>,
    /// How many to read: k_i, or k_i + δ with late binding.
    pub need: usize,
}

/// A request's planning problem.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessInstance {
    /// Every site's costs.
    pub sites: Vec<SiteCost>,
    /// The blocks of the request.
    pub blocks: Vec<BlockRead>,
}

/// Why an instance has no plan.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    /// A block asks more chunks than it has, or none.
    #[error("block {block} asks {need} of its {chunks} chunks")]
    Need {
        /// The block.
        block: usize,
        /// What it asks.
        need: usize,
        /// What it has.
        chunks: usize,
    },
    /// A block names a site that is not in the instance, or one site twice.
    #[error("block {block} names site {site}, which is out of range or repeated")]
    Site {
        /// The block.
        block: usize,
        /// The site.
        site: usize,
    },
    /// A cost is negative or not finite.
    #[error("site {site} has a negative or non-finite cost")]
    Cost {
        /// The site.
        site: usize,
    },
}

/// A plan: for each block, the sites whose chunks it reads (ascending), and the plan's cost.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessPlan {
    /// Per block, the sites read.
    pub reads: Vec<Vec<usize>>,
    /// Its cost by Eq. 1.
    pub cost: f64,
    /// Whether it is known to be a least-cost plan (false: the solver's node budget ran out, and
    /// this is the best found).
    pub optimal: bool,
    /// Branch-and-bound nodes the solve visited (0 for the greedy plan): the work an executor
    /// charges a solve for.
    pub nodes: usize,
}

impl AccessPlan {
    /// The distinct sites the plan accesses, ascending.
    pub fn sites(&self) -> Vec<usize> {
        let mut sites: Vec<usize> = self.reads.iter().flatten().copied().collect();
        sites.sort_unstable();
        sites.dedup();
        sites
    }
}

impl AccessInstance {
    /// Checks the instance: every block asks 1..=its chunks, on distinct sites in range, and every
    /// cost is finite and non-negative.
    pub fn validate(&self) -> Result<(), AccessError> {
        if let Some(site) = self
            .sites
            .iter()
            .position(|s| !(s.overhead >= 0.0 && s.per_byte >= 0.0 && s.overhead.is_finite() && s.per_byte.is_finite()))
        {
            return Err(AccessError::Cost { site });
        }
        for (block, read) in self.blocks.iter().enumerate() {
            if read.need == 0 || read.need > read.sites.len() {
                return Err(AccessError::Need { block, need: read.need, chunks: read.sites.len() });
            }
            let mut seen = vec![false; self.sites.len()];
            for &site in &read.sites {
                if site >= self.sites.len() || std::mem::replace(&mut seen[site], true) {
                    return Err(AccessError::Site { block, site });
                }
            }
        }
        Ok(())
    }

    /// The cost of reading `reads` (per block, the sites read) by Eq. 1.
    pub fn cost(&self, reads: &[Vec<usize>]) -> f64 {
        assert_eq!(reads.len(), self.blocks.len(), "one list of sites per block");
        let mut accessed = vec![false; self.sites.len()];
        let mut cost = 0.0;
        for (block, sites) in self.blocks.iter().zip(reads) {
            for &site in sites {
                cost += self.media(site, block);
                if !std::mem::replace(&mut accessed[site], true) {
                    cost += self.sites[site].overhead;
                }
            }
        }
        cost
    }

    fn media(&self, site: usize, block: &BlockRead) -> f64 {
        self.sites[site].per_byte * block.chunk_bytes as f64
    }

    /// Block `block`'s `need` cheapest reads among the sites `allowed` admits: the sites and their
    /// media cost; `None` when too few are allowed.
    fn cheapest(&self, block: &BlockRead, allowed: impl Fn(usize) -> bool) -> Option<(Vec<usize>, f64)> {
        let mut candidates: Vec<usize> = block.sites.iter().copied().filter(|&s| allowed(s)).collect();
        if candidates.len() < block.need {
            return None;
        }
        candidates.sort_by(|&a, &b| self.media(a, block).total_cmp(&self.media(b, block)).then(a.cmp(&b)));
        candidates.truncate(block.need);
        let media = candidates.iter().map(|&s| self.media(s, block)).sum();
        candidates.sort_unstable();
        Some((candidates, media))
    }
}

/// Most branch-and-bound nodes one solve visits before it returns the best plan found.
pub const DEFAULT_NODE_BUDGET: usize = 200_000;

/// A least-cost plan of `instance` by Eqs. 1–4, exact unless `node_budget` nodes were not enough
/// (then the best found, `optimal: false`; the greedy plan is the first incumbent, so there is
/// always one).
pub fn solve_exact(instance: &AccessInstance, node_budget: usize) -> Result<AccessPlan, AccessError> {
    instance.validate()?;
    let incumbent = greedy(instance, GreedyFill::Cheapest)?;
    // Only sites holding a chunk of the request matter; the most shared first (their decision moves
    // the bound most), cheaper overheads first among equals.
    let mut sharers = vec![0usize; instance.sites.len()];
    instance.blocks.iter().flat_map(|b| &b.sites).for_each(|&s| sharers[s] += 1);
    let mut order: Vec<usize> = (0..instance.sites.len()).filter(|&s| sharers[s] > 0).collect();
    order.sort_by(|&a, &b| {
        let overhead = |s: usize| instance.sites[s].overhead;
        sharers[b].cmp(&sharers[a]).then(overhead(a).total_cmp(&overhead(b))).then(a.cmp(&b))
    });
    let mut search = Search {
        instance,
        order,
        sharers,
        state: vec![Decision::Open; instance.sites.len()],
        best: incumbent,
        nodes_left: node_budget,
        exhausted: false,
    };
    search.visit(0, 0.0);
    let mut best = search.best;
    best.optimal = !search.exhausted;
    best.nodes = node_budget - search.nodes_left;
    Ok(best)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    Open,
    In,
    Out,
}

struct Search<'a> {
    instance: &'a AccessInstance,
    order: Vec<usize>,
    /// Blocks of the request with a chunk at each site.
    sharers: Vec<usize>,
    state: Vec<Decision>,
    best: AccessPlan,
    nodes_left: usize,
    exhausted: bool,
}

impl Search<'_> {
    /// Decides site `order[depth]` both ways, `overheads` the sum of the sites decided In.
    fn visit(&mut self, depth: usize, overheads: f64) {
        if self.nodes_left == 0 {
            self.exhausted = true;
            return;
        }
        self.nodes_left -= 1;
        let Some((reads, rest)) = self.bound() else { return };
        // The bound's reads are a plan: priced for real, they may improve the incumbent.
        let cost = self.instance.cost(&reads);
        if cost < self.best.cost {
            self.best = AccessPlan { reads, cost, optimal: false, nodes: 0 };
        }
        if overheads + rest >= self.best.cost - 1e-12 * self.best.cost.abs().max(1.0) {
            return;
        }
        if depth == self.order.len() {
            // Every site decided: the bound's reads (priced above) are the cheapest among those In.
            return;
        }
        let site = self.order[depth];
        self.state[site] = Decision::In;
        self.visit(depth + 1, overheads + self.instance.sites[site].overhead);
        self.state[site] = Decision::Out;
        self.visit(depth + 1, overheads);
        self.state[site] = Decision::Open;
    }

    /// Every block's cheapest reads among the sites not excluded, an Open site's overhead split
    /// among the blocks that could read there: the reads, and their total (the bound's part beyond
    /// the overheads of the sites In); `None` when some block cannot be served.
    fn bound(&self) -> Option<(Vec<Vec<usize>>, f64)> {
        let mut total = 0.0;
        let mut reads = Vec::with_capacity(self.instance.blocks.len());
        for block in &self.instance.blocks {
            let share = |s: usize| match self.state[s] {
                Decision::Open => self.instance.sites[s].overhead / self.sharers[s] as f64,
                _ => 0.0,
            };
            let mut candidates: Vec<(f64, usize)> = block
                .sites
                .iter()
                .filter(|&&s| self.state[s] != Decision::Out)
                .map(|&s| (self.instance.media(s, block) + share(s), s))
                .collect();
            if candidates.len() < block.need {
                return None;
            }
            candidates.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            candidates.truncate(block.need);
            total += candidates.iter().map(|c| c.0).sum::<f64>();
            let mut sites: Vec<usize> = candidates.into_iter().map(|c| c.1).collect();
            sites.sort_unstable();
            reads.push(sites);
        }
        Some((reads, total))
    }
}

/// How the greedy plan fills a block that the sites already accessed cannot serve alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GreedyFill {
    /// The paper's: the remaining sites at random (seeded).
    Random(u64),
    /// The cheapest remaining, by overhead plus media cost.
    Cheapest,
}

/// EC-Store's greedy plan (§V-B1): blocks in the order given; each reads its chunks at sites the
/// plan already accesses (cheapest media first), and fills the rest by `fill`.
pub fn greedy(instance: &AccessInstance, fill: GreedyFill) -> Result<AccessPlan, AccessError> {
    instance.validate()?;
    let mut rng = match fill {
        GreedyFill::Random(seed) => Some(ChaCha8Rng::seed_from_u64(seed)),
        GreedyFill::Cheapest => None,
    };
    let mut accessed = vec![false; instance.sites.len()];
    let mut reads = Vec::with_capacity(instance.blocks.len());
    for block in &instance.blocks {
        let at_accessed = block.sites.iter().filter(|&&s| accessed[s]).count();
        let reuse = BlockRead { need: block.need.min(at_accessed), ..block.clone() };
        let (mut chosen, _) = instance.cheapest(&reuse, |s| accessed[s]).expect("no more than there are");
        let mut rest: Vec<usize> = block.sites.iter().copied().filter(|&s| !accessed[s]).collect();
        match rng.as_mut() {
            Some(rng) => rest.shuffle(rng),
            None => rest.sort_by(|&a, &b| {
                let total = |s: usize| instance.sites[s].overhead + instance.media(s, block);
                total(a).total_cmp(&total(b)).then(a.cmp(&b))
            }),
        }
        chosen.extend(rest.into_iter().take(block.need - chosen.len()));
        chosen.sort_unstable();
        assert_eq!(chosen.len(), block.need, "a block reads what it needs");
        chosen.iter().for_each(|&s| accessed[s] = true);
        reads.push(chosen);
    }
    let cost = instance.cost(&reads);
    Ok(AccessPlan { reads, cost, optimal: false, nodes: 0 })
}

#[cfg(test)]
mod tests;
