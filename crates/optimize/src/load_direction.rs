//! Problem (1) of Hu et al. (SoCC '17): choose, for every partition i, the
//! probabilities of serving its requests by the normal read (x_i) or by each
//! degraded-read combination c (y_ic), so that the expected node loads L plus
//! the queues Q minimise a load-balancing metric F(L + Q):
//!
//! ```text
//! minimise  F(L + Q)
//! s.t.      L_j = Σ_{i: s(i)=j} D_i x_i + Σ_{(i,c): j∈c} D_i y_ic
//!           x_i + Σ_c y_ic = 1,  x, y ≥ 0
//! ```
//!
//! Here every choice of partition i (the normal read or a combination) is an
//! *option*: a set of nodes that each receive D_i bytes when it is chosen.
//!
//! Method: the ℓ2 metric F = ½ Σ_j (L_j + Q_j)² / S_j is a separable convex
//! quadratic in L and the constraints are one simplex per partition, so we
//! use block-coordinate descent with SMO steps (as in SVM solvers): within a
//! partition, move probability mass from the option with the largest
//! gradient (among those in use) to the one with the smallest, by the exact
//! minimising step of the 1-D quadratic. Exact block minimisation of a convex
//! function over a product of simplices converges (Luo and Tseng, 1992).
//! With two options per partition (the paper's simplification) each block is
//! solved exactly by one step. The stopping rule is the Frank-Wolfe duality
//! gap, which bounds the distance to the optimal objective from above.
//!
//! The ℓ∞ metric (max_j (L_j + Q_j) / S_j) is a linear program; we solve its
//! smooth surrogate Σ_j ((L_j + Q_j) / S_j / scale)^p with p = 32 by the same
//! steps (the 1-D step by bisection). Its max is within a factor m^(1/p) of
//! the ℓ∞ optimum (1.15 for 90 nodes) and in practice much closer.
//!
//! Must not: allocate in the solve loop beyond the solution arrays, or run
//! unbounded: every loop has an iteration cap ([`SolveLimits`]).

use serde::{Deserialize, Serialize};

/// The load-balancing metric F.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// ½ Σ_j (L_j + Q_j)² / S_j: aggregated per-byte processing time (the
    /// paper's choice).
    #[default]
    L2,
    /// max_j (L_j + Q_j) / S_j, through a p = 32 norm surrogate. Named
    /// `linf` in configs (`l_inf`, serde's own spelling, is read too).
    #[serde(rename = "linf", alias = "l_inf")]
    LInf,
}

/// Exponent of the ℓ∞ surrogate.
const LINF_POWER: i32 = 32;

/// Iteration caps and tolerance of a solve.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SolveLimits {
    /// Sweeps over all partitions at most.
    pub sweeps_max: u32,
    /// SMO steps per partition per sweep at most.
    pub steps_per_block_max: u32,
    /// Stop when the duality gap is at most this fraction of the objective.
    pub relative_gap: f64,
}

impl Default for SolveLimits {
    fn default() -> SolveLimits {
        SolveLimits { sweeps_max: 200, steps_per_block_max: 8, relative_gap: 1e-6 }
    }
}

/// An instance of problem (1), stored flat: partitions → options → nodes.
#[derive(Clone, Debug, Default)]
pub struct LoadDirectionProblem {
    queue: Vec<f64>,
    inverse_rate: Vec<f64>,
    demand: Vec<f64>,
    /// `option_starts[i]..option_starts[i+1]`: options of partition i.
    option_starts: Vec<u32>,
    /// `node_starts[o]..node_starts[o+1]`: nodes of option o.
    node_starts: Vec<u32>,
    nodes: Vec<u32>,
}

/// The solution: one probability per option (flat, in the order options
/// were added), the expected loads, and how the solve went.
#[derive(Clone, Debug, PartialEq)]
pub struct Solution {
    /// Probability of each option; those of a partition sum to 1.
    pub weights: Vec<f64>,
    /// Expected load L_j plus queue Q_j per node.
    pub node_totals: Vec<f64>,
    /// The objective (for ℓ∞, the max of (L_j + Q_j) / S_j).
    pub objective: f64,
    /// The Frank-Wolfe duality gap of the solved (surrogate) objective.
    pub gap: f64,
    /// Sweeps used.
    pub sweeps: u32,
}

impl LoadDirectionProblem {
    /// A problem over `queue_bytes.len()` nodes with queues Q_j and relative
    /// processing rates S_j (all positive; use 1.0 for a homogeneous cluster).
    pub fn new(queue_bytes: &[f64], node_rates: &[f64]) -> LoadDirectionProblem {
        assert_eq!(queue_bytes.len(), node_rates.len(), "one rate per node");
        assert!(node_rates.iter().all(|&s| s > 0.0 && s.is_finite()), "node rates must be positive");
        assert!(queue_bytes.iter().all(|&q| q >= 0.0 && q.is_finite()), "queues must be non-negative");
        LoadDirectionProblem {
            queue: queue_bytes.to_vec(),
            inverse_rate: node_rates.iter().map(|s| 1.0 / s).collect(),
            demand: Vec::new(),
            option_starts: vec![0],
            node_starts: vec![0],
            nodes: Vec::new(),
        }
    }

    /// Adds a partition with demand `demand_bytes` (D_i) and its options,
    /// each a set of distinct nodes. The first option is where all of the
    /// demand starts (the normal read, by convention). Returns its index.
    pub fn add_partition<'a>(&mut self, demand_bytes: f64, options: impl IntoIterator<Item = &'a [u32]>) -> usize {
        assert!(demand_bytes >= 0.0 && demand_bytes.is_finite(), "demand must be non-negative");
        let node_count = self.queue.len() as u32;
        for option in options {
            assert!(!option.is_empty(), "an option reads at least one node");
            for (position, &node) in option.iter().enumerate() {
                assert!(node < node_count, "node {node} out of range");
                assert!(!option[..position].contains(&node), "node {node} twice in one option");
            }
            self.nodes.extend_from_slice(option);
            self.node_starts.push(self.nodes.len() as u32);
        }
        let options_end = (self.node_starts.len() - 1) as u32;
        assert!(options_end > *self.option_starts.last().unwrap(), "a partition needs at least one option");
        self.option_starts.push(options_end);
        self.demand.push(demand_bytes);
        self.demand.len() - 1
    }

    /// Partitions added.
    pub fn partition_count(&self) -> usize {
        self.demand.len()
    }

    /// Options of partition `partition`, as a range of flat option indices.
    pub fn options_of(&self, partition: usize) -> std::ops::Range<usize> {
        self.option_starts[partition] as usize..self.option_starts[partition + 1] as usize
    }

    fn option_nodes(&self, option: usize) -> &[u32] {
        &self.nodes[self.node_starts[option] as usize..self.node_starts[option + 1] as usize]
    }

    /// Solves the problem.
    pub fn solve(&self, objective: Objective, limits: SolveLimits) -> Solution {
        assert!(limits.sweeps_max > 0 && limits.steps_per_block_max > 0);
        let option_count = self.node_starts.len() - 1;
        let mut weights = vec![0.0; option_count];
        let mut totals = self.queue.clone();
        for partition in 0..self.partition_count() {
            let first = self.option_starts[partition] as usize;
            weights[first] = 1.0;
            for &node in self.option_nodes(first) {
                totals[node as usize] += self.demand[partition];
            }
        }
        // The ℓ∞ surrogate is evaluated on totals divided by a fixed scale (the
        // initial max) so that powers neither overflow nor all underflow.
        let scale = totals.iter().zip(&self.inverse_rate).map(|(t, r)| t * r).fold(0.0f64, f64::max).max(1.0);
        let metric = Metric { objective, scale, inverse_rate: &self.inverse_rate };
        let mut gradients = Vec::new();
        let mut sweeps = 0;
        let mut gap = f64::INFINITY;
        while sweeps < limits.sweeps_max {
            sweeps += 1;
            gap = 0.0;
            for partition in 0..self.partition_count() {
                let demand = self.demand[partition];
                let options = self.options_of(partition);
                if demand == 0.0 || options.len() < 2 {
                    continue;
                }
                gap += self.improve_block(partition, &metric, &mut weights, &mut totals, &mut gradients, limits);
            }
            let value = metric.value(&totals);
            if gap <= limits.relative_gap * value.abs().max(f64::MIN_POSITIVE) {
                break;
            }
        }
        // Report the true gap of the final point (the loop's is a running one).
        gap = gap.min(self.duality_gap(&metric, &weights, &totals, &mut gradients));
        let objective_value = match objective {
            Objective::L2 => metric.value(&totals),
            Objective::LInf => totals.iter().zip(&self.inverse_rate).map(|(t, r)| t * r).fold(0.0, f64::max),
        };
        Solution { weights, node_totals: totals, objective: objective_value, gap, sweeps }
    }

    /// Gradient of each option of `partition` into `gradients`.
    fn block_gradients(&self, partition: usize, metric: &Metric, totals: &[f64], gradients: &mut Vec<f64>) {
        gradients.clear();
        let demand = self.demand[partition];
        for option in self.options_of(partition) {
            let sum: f64 =
                self.option_nodes(option).iter().map(|&j| metric.derivative(j as usize, totals[j as usize])).sum();
            gradients.push(demand * sum);
        }
    }

    /// SMO steps on one partition; returns its duality gap before the steps.
    fn improve_block(
        &self,
        partition: usize,
        metric: &Metric,
        weights: &mut [f64],
        totals: &mut [f64],
        gradients: &mut Vec<f64>,
        limits: SolveLimits,
    ) -> f64 {
        let options = self.options_of(partition);
        let demand = self.demand[partition];
        let mut block_gap = 0.0;
        for step in 0..limits.steps_per_block_max {
            self.block_gradients(partition, metric, totals, gradients);
            let (mut best, mut worst) = (0usize, usize::MAX);
            for (position, &g) in gradients.iter().enumerate() {
                if g < gradients[best] {
                    best = position;
                }
                if weights[options.start + position] > 0.0 && (worst == usize::MAX || g > gradients[worst]) {
                    worst = position;
                }
            }
            debug_assert!(worst != usize::MAX, "a partition's weights sum to 1");
            if step == 0 {
                block_gap =
                    options.clone().zip(gradients.iter()).map(|(o, g)| weights[o] * (g - gradients[best])).sum();
            }
            let difference = gradients[worst] - gradients[best];
            if worst == best || difference <= 1e-12 * gradients[worst].abs() {
                break;
            }
            let (to, from) = (options.start + best, options.start + worst);
            let movable = weights[from];
            let delta = self.step_length(metric, totals, to, from, demand, movable, difference);
            if delta <= 0.0 {
                break;
            }
            weights[from] -= delta;
            weights[to] += delta;
            if weights[from] < 1e-15 {
                weights[to] += weights[from];
                weights[from] = 0.0;
            }
            for &j in self.option_nodes(to) {
                totals[j as usize] += demand * delta;
            }
            for &j in self.option_nodes(from) {
                totals[j as usize] = (totals[j as usize] - demand * delta).max(self.queue[j as usize]);
            }
        }
        block_gap
    }

    /// The exact minimising step of moving mass from option `from` to `to`,
    /// clamped to `[0, movable]`.
    #[allow(clippy::too_many_arguments)]
    fn step_length(
        &self,
        metric: &Metric,
        totals: &[f64],
        to: usize,
        from: usize,
        demand: f64,
        movable: f64,
        difference: f64,
    ) -> f64 {
        let to_nodes = self.option_nodes(to);
        let from_nodes = self.option_nodes(from);
        match metric.objective {
            Objective::L2 => {
                // d/dδ = -(g_from - g_to) + δ D² Σ_{j ∈ to Δ from} 1/S_j.
                let curvature: f64 = to_nodes
                    .iter()
                    .filter(|j| !from_nodes.contains(j))
                    .chain(from_nodes.iter().filter(|j| !to_nodes.contains(j)))
                    .map(|&j| self.inverse_rate[j as usize])
                    .sum::<f64>()
                    * demand
                    * demand;
                if curvature <= 0.0 {
                    return 0.0;
                }
                (difference / curvature).clamp(0.0, movable)
            }
            Objective::LInf => {
                // The derivative in δ is increasing (convexity): bisect its root.
                let slope = |delta: f64| -> f64 {
                    let up: f64 = to_nodes
                        .iter()
                        .filter(|j| !from_nodes.contains(j))
                        .map(|&j| metric.derivative(j as usize, totals[j as usize] + demand * delta))
                        .sum();
                    let down: f64 = from_nodes
                        .iter()
                        .filter(|j| !to_nodes.contains(j))
                        .map(|&j| metric.derivative(j as usize, totals[j as usize] - demand * delta))
                        .sum();
                    up - down
                };
                if slope(movable) <= 0.0 {
                    return movable;
                }
                let (mut low, mut high) = (0.0, movable);
                for _ in 0..40 {
                    let middle = 0.5 * (low + high);
                    if slope(middle) <= 0.0 { low = middle } else { high = middle }
                }
                low
            }
        }
    }

    fn duality_gap(&self, metric: &Metric, weights: &[f64], totals: &[f64], gradients: &mut Vec<f64>) -> f64 {
        let mut gap = 0.0;
        for partition in 0..self.partition_count() {
            self.block_gradients(partition, metric, totals, gradients);
            let best = gradients.iter().copied().fold(f64::INFINITY, f64::min);
            gap += self.options_of(partition).zip(gradients.iter()).map(|(o, g)| weights[o] * (g - best)).sum::<f64>();
        }
        gap
    }
}

/// The metric's per-node term and its derivative.
struct Metric<'a> {
    objective: Objective,
    scale: f64,
    inverse_rate: &'a [f64],
}

impl Metric<'_> {
    #[inline]
    fn derivative(&self, node: usize, total: f64) -> f64 {
        match self.objective {
            Objective::L2 => total * self.inverse_rate[node],
            Objective::LInf => {
                let u = total * self.inverse_rate[node] / self.scale;
                u.powi(LINF_POWER - 1) * self.inverse_rate[node] / self.scale
            }
        }
    }

    fn value(&self, totals: &[f64]) -> f64 {
        match self.objective {
            Objective::L2 => totals.iter().zip(self.inverse_rate).map(|(t, r)| 0.5 * t * t * r).sum(),
            Objective::LInf => totals
                .iter()
                .zip(self.inverse_rate)
                .map(|(t, r)| (t * r / self.scale).powi(LINF_POWER) / LINF_POWER as f64)
                .sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn l2(totals: &[f64], rates: &[f64]) -> f64 {
        totals.iter().zip(rates).map(|(t, s)| 0.5 * t * t / s).sum()
    }

    #[test]
    fn matches_a_brute_force_grid_on_two_partitions() {
        let queue = [5.0, 0.0, 1.0, 2.0];
        let rates = [1.0, 2.0, 1.0, 0.5];
        let mut problem = LoadDirectionProblem::new(&queue, &rates);
        problem.add_partition(4.0, [&[0u32][..], &[1, 2][..]]);
        problem.add_partition(3.0, [&[2u32][..], &[0, 3][..]]);
        let solution = problem.solve(Objective::L2, SolveLimits::default());
        let mut best = f64::INFINITY;
        let steps = 2000;
        for a in 0..=steps {
            for b in 0..=steps {
                let (x1, x2) = (a as f64 / steps as f64, b as f64 / steps as f64);
                let totals = [
                    5.0 + 4.0 * x1 + 3.0 * (1.0 - x2),
                    4.0 * (1.0 - x1),
                    1.0 + 4.0 * (1.0 - x1) + 3.0 * x2,
                    2.0 + 3.0 * (1.0 - x2),
                ];
                best = best.min(l2(&totals, &rates));
            }
        }
        assert!(solution.objective <= best + 1e-6, "{} > grid {}", solution.objective, best);
        assert!(solution.objective >= best - 1e-3, "{} far below grid {}", solution.objective, best);
        assert!((solution.objective - l2(&solution.node_totals, &rates)).abs() < 1e-9);
    }

    #[test]
    fn satisfies_the_optimality_conditions_on_random_instances() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..20 {
            let nodes = 12;
            let queue: Vec<f64> = (0..nodes).map(|_| rng.random_range(0.0..100.0)).collect();
            let rates: Vec<f64> = (0..nodes).map(|_| rng.random_range(0.5..2.0)).collect();
            let mut problem = LoadDirectionProblem::new(&queue, &rates);
            for _ in 0..30 {
                let mut all: Vec<u32> = (0..nodes as u32).collect();
                for i in 0..all.len() {
                    let j = rng.random_range(i..all.len());
                    all.swap(i, j);
                }
                let options: Vec<Vec<u32>> =
                    vec![all[..1].to_vec(), all[1..4].to_vec(), all[2..5].to_vec(), all[4..8].to_vec()];
                problem.add_partition(rng.random_range(0.0..50.0), options.iter().map(|o| o.as_slice()));
            }
            let solution = problem.solve(Objective::L2, SolveLimits { sweeps_max: 2000, ..SolveLimits::default() });
            assert!(solution.gap <= 1e-5 * solution.objective, "gap {} of {}", solution.gap, solution.objective);
            for partition in 0..problem.partition_count() {
                let sum: f64 = problem.options_of(partition).map(|o| solution.weights[o]).sum();
                assert!((sum - 1.0).abs() < 1e-9);
                assert!(problem.options_of(partition).all(|o| solution.weights[o] >= 0.0));
            }
            // Lower bound by weak duality: f(w) - gap ≤ f* ≤ f(w), and a
            // random feasible point is never better than the optimum.
            let mut random_totals = queue.clone();
            for partition in 0..problem.partition_count() {
                let options = problem.options_of(partition);
                let chosen = rng.random_range(options.clone());
                for &j in problem.option_nodes(chosen) {
                    random_totals[j as usize] += problem.demand[partition];
                }
            }
            assert!(l2(&random_totals, &rates) >= solution.objective - solution.gap);
        }
    }

    #[test]
    fn hot_partitions_are_spread_and_cold_ones_stay_normal() {
        // Node 0 holds a hot partition; its recovery set (1, 2) is idle.
        let mut problem = LoadDirectionProblem::new(&[0.0; 4], &[1.0; 4]);
        problem.add_partition(100.0, [&[0u32][..], &[1, 2][..]]);
        problem.add_partition(1.0, [&[3u32][..], &[1, 2][..]]);
        let solution = problem.solve(Objective::L2, SolveLimits::default());
        // Optimum: 100 x = 2 · 100 (1 - x) ⇒ x = 2/3 (each recovery node gets a third).
        assert!((solution.weights[0] - 2.0 / 3.0).abs() < 1e-6, "{:?}", solution.weights);
        assert!(solution.weights[2] > 0.99, "{:?}", solution.weights);
    }

    #[test]
    fn linf_lowers_the_maximum() {
        let mut problem = LoadDirectionProblem::new(&[10.0, 0.0, 0.0, 0.0], &[1.0; 4]);
        problem.add_partition(30.0, [&[0u32][..], &[1, 2][..], &[2, 3][..]]);
        let l2 = problem.solve(Objective::L2, SolveLimits::default());
        let linf = problem.solve(Objective::LInf, SolveLimits { sweeps_max: 500, ..SolveLimits::default() });
        let max_l2 = l2.node_totals.iter().copied().fold(0.0, f64::max);
        assert!(linf.objective <= max_l2 + 1e-9, "{} > {}", linf.objective, max_l2);
        // The ℓ∞ optimum: 10 + 30x = 30(1-x) ⇒ max = 20 (x = 1/3, degraded split over 2 combos).
        assert!(linf.objective < 20.0 * 1.1, "{}", linf.objective);
    }
}
