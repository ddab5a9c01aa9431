//! The scheduling sub-problem of JLWO (Lemma 3): with W, w, z and the placement fixed, choose
//! π_{i,j,r,d} for every file r and client rack i on the capped simplex Σ_j π = k, 0 ≤ π ≤ 1,
//! support S_r (20), (21). Λ·f(z, Λ, B_eff) is convex in Λ and Λ is linear in π, so one block per
//! (file, client rack) is a convex problem; we sweep the blocks in order (Gauss–Seidel block
//! coordinate descent, each block improved by pair descent with the other blocks' loads fixed)
//! and keep Λ current after each block, so later files see where earlier ones moved.
//!
//! A block is separable: π at position p only moves the load of queue (i, S_r[p], d), by
//! λ_{i,r,d}·π. With thousands of files per queue a single block is nearly linear, so most pair
//! steps run to a bound of the box (a full step, one slope evaluation).
//!
//! Owns: π and the matching update of Λ. Must not: change W, w, z or the placement; a trial
//! point where a queue would saturate is refused (slope +∞), which keeps (19).

use super::Solution;
use super::model::{Loads, Model};
use super::simplex::{PairLimits, PairProblem, PairScratch, pair_descent};

/// One (file, client rack) block.
struct BlockProblem<'m, 'a> {
    model: &'m Model<'a>,
    /// Queue of each position of the file's racks.
    queues: &'m [usize],
    /// Λ of each of those queues without this block's contribution.
    base_arrival: &'m [f64],
    reserved: &'m [f64],
    rate: f64,
    z: &'m [f64],
}

impl BlockProblem<'_, '_> {
    fn marginal(&self, position: usize, probability: f64) -> f64 {
        let queue = self.queues[position];
        let arrival = self.base_arrival[position] + self.rate * probability;
        self.rate * self.model.term_slopes(queue, arrival, self.reserved[queue], self.z).per_arrival
    }
}

impl PairProblem for BlockProblem<'_, '_> {
    fn gradient(&mut self, x: &[f64], up: &mut [f64], down: &mut [f64]) {
        // Smooth in π: both sides agree.
        for position in 0..x.len() {
            up[position] = self.marginal(position, x[position]);
            down[position] = up[position];
        }
    }

    fn slope(&mut self, x: &[f64], to: usize, from: usize, delta: f64) -> f64 {
        // +∞ from a saturating `to` makes the difference +∞: "too far".
        self.marginal(to, x[to] + delta) - self.marginal(from, x[from] - delta)
    }
}

/// Sweeps over all (file, client rack) blocks once; Λ in `loads` is kept current. Returns pair
/// steps taken.
pub(crate) fn improve_schedule(
    model: &Model,
    solution: &mut Solution,
    loads: &mut Loads,
    z: &[f64],
    limits: &PairLimits,
) -> u32 {
    let n = model.code_n;
    let upper = vec![1.0; n];
    let mut queues = vec![0usize; n];
    let mut base = vec![0.0; n];
    let mut x = vec![0.0; n];
    let mut scratch = PairScratch::default();
    let mut steps = 0;
    for (f, file) in model.instance.files.iter().enumerate() {
        for &client in model.file_clients(f) {
            let client = client as usize;
            let rate = file.request_rates_per_s[client];
            let block = (f * model.racks + client) * n;
            x.copy_from_slice(&solution.schedule[block..block + n]);
            for p in 0..n {
                queues[p] = model.queue(client, solution.racks[f * n + p] as usize, file.class);
                base[p] = (loads.arrival[queues[p]] - rate * x[p]).max(0.0);
            }
            let mut problem =
                BlockProblem { model, queues: &queues, base_arrival: &base, reserved: &loads.reserved, rate, z };
            let taken = pair_descent(&mut problem, &mut x, &upper, &mut scratch, limits);
            if taken > 0 {
                steps += taken;
                solution.schedule[block..block + n].copy_from_slice(&x);
                for p in 0..n {
                    loads.arrival[queues[p]] = base[p] + rate * x[p];
                }
            }
        }
    }
    steps
}
