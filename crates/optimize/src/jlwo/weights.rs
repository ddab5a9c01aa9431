//! The bandwidth sub-problems of JLWO (Lemma 4), with π, z and the placement fixed:
//!
//! - inter-rack weights W_{i,j,d} (i ≠ j) on the capped simplex Σ W = 1, 0 ≤ B·W ≤ port cap (23),
//!   (24). W reaches the objective twice: B_eff = B·W of its own queue (2), and b_eff of both end
//!   racks through the corrected (3), which the intra-rack queues of those racks share by w (4);
//!   the gradient carries both.
//! - intra-rack shares w_{i,d} per rack on Σ_d w = 1 (22).
//!
//! (25), intra-rack B_eff ≤ port cap, is applied as B_eff = min(w·b_eff, cap) (see the model): a
//! share beyond the cap is bandwidth the queue cannot use. That has the paper's optimum whenever
//! (25) can hold (giving the excess to another class never hurts), stays convex (a convex
//! decreasing f of a concave min), and leaves no boundary for the pair steps to stall on.
//!
//! Both by pair descent ([`super::simplex`]). The guard: a trial point where a loaded queue is
//! unstable (ρ ≥ 1, (19) in its dimensionally correct form) or a rack's b_eff < 0 is infeasible,
//! so every accepted point keeps them; W through a rack whose b_eff is already 0 cannot grow.
//!
//! Owns: these two steps. Must not: touch π, z or the placement.

use super::model::{Loads, Model};
use super::simplex::{PairLimits, PairProblem, PairScratch, pair_descent};

/// b_eff within this share of b counts as 0 (rounding of Σ W): W through the rack cannot grow,
/// and the rack's intra-rack queues see no bandwidth.
const EXHAUSTED_RELATIVE: f64 = 1e-12;

/// The inter-rack weights as one vector over the queues with i ≠ j.
struct InterProblem<'m, 'a> {
    model: &'m Model<'a>,
    /// Queue index of each coordinate.
    queues: &'m [usize],
    arrival: &'m [f64],
    intra_shares: &'m [f64],
    z: &'m [f64],
    /// Σ of W over the queues touching each rack (as client or storage) at the last gradient.
    rack_usage: Vec<f64>,
    /// One-sided ∂(intra terms of rack r)/∂b_eff at the last gradient: (as b_eff falls, as it grows).
    intra_slope: Vec<(f64, f64)>,
}

/// Every inter-rack queue (i ≠ j): W's coordinates.
fn inter_rack_queues(model: &Model) -> Vec<usize> {
    (0..model.queue_count())
        .filter(|&q| {
            let (client, storage, _) = model.queue_parts(q);
            client != storage
        })
        .collect()
}

impl<'m, 'a> InterProblem<'m, 'a> {
    /// W's sub-problem over `queues` at `loads`, the other variables fixed.
    fn new(model: &'m Model<'a>, queues: &'m [usize], loads: &'m Loads, intra_shares: &'m [f64], z: &'m [f64]) -> Self {
        InterProblem {
            model,
            queues,
            arrival: &loads.arrival,
            intra_shares,
            z,
            rack_usage: vec![0.0; model.racks],
            intra_slope: vec![(0.0, 0.0); model.racks],
        }
    }
}

impl InterProblem<'_, '_> {
    /// The one-sided derivatives of the rack's intra-rack terms in b_eff at ToR residue
    /// `intra_bandwidth`: (as b_eff falls, as b_eff grows); `None` if a queue there would be
    /// unstable or b_eff < 0. A queue at its port cap counts only as b_eff falls.
    fn intra_slopes_at(&self, rack: usize, intra_bandwidth: f64) -> Option<(f64, f64)> {
        let model = self.model;
        if intra_bandwidth < -EXHAUSTED_RELATIVE * model.instance.tor_bandwidth_bps {
            return None;
        }
        let intra_bandwidth = intra_bandwidth.max(0.0);
        let cap = model.instance.queue_bandwidth_max_bps;
        let (mut falling, mut growing) = (0.0, 0.0);
        for class in 0..model.classes {
            let share = self.intra_shares[rack * model.classes + class];
            let queue = model.queue(rack, rack, class);
            let wanted = share * intra_bandwidth;
            let term = model.term_slopes(queue, self.arrival[queue], wanted.min(cap), self.z);
            if !term.value.is_finite() {
                return None;
            }
            // Above the cap more ToR bandwidth buys this queue nothing.
            if wanted <= cap {
                falling += term.per_bandwidth * share;
            }
            if wanted < cap {
                growing += term.per_bandwidth * share;
            }
        }
        Some((falling, growing))
    }
}

impl PairProblem for InterProblem<'_, '_> {
    fn gradient(&mut self, x: &[f64], up: &mut [f64], down: &mut [f64]) {
        let model = self.model;
        let (big_b, tor) = (model.instance.aggregation_bandwidth_bps, model.instance.tor_bandwidth_bps);
        self.rack_usage.iter_mut().for_each(|u| *u = 0.0);
        for (c, &queue) in self.queues.iter().enumerate() {
            let (client, storage, _) = model.queue_parts(queue);
            self.rack_usage[client] += x[c];
            self.rack_usage[storage] += x[c];
        }
        for rack in 0..model.racks {
            let intra = tor - big_b * self.rack_usage[rack];
            // The current point is feasible: a None here would be a bug upstream; −∞ stops the
            // descent (the pair choice refuses a non-finite gradient).
            self.intra_slope[rack] =
                self.intra_slopes_at(rack, intra).unwrap_or((f64::NEG_INFINITY, f64::NEG_INFINITY));
        }
        for (c, &queue) in self.queues.iter().enumerate() {
            let (client, storage, _) = model.queue_parts(queue);
            let own = model.term_slopes(queue, self.arrival[queue], big_b * x[c], self.z).per_bandwidth;
            // More W here: both end racks' b_eff fall; less: they grow.
            up[c] = big_b * (own - self.intra_slope[client].0 - self.intra_slope[storage].0);
            down[c] = big_b * (own - self.intra_slope[client].1 - self.intra_slope[storage].1);
        }
    }

    fn slope(&mut self, x: &[f64], to: usize, from: usize, delta: f64) -> f64 {
        let model = self.model;
        let (big_b, tor) = (model.instance.aggregation_bandwidth_bps, model.instance.tor_bandwidth_bps);
        let (to_client, to_storage, _) = model.queue_parts(self.queues[to]);
        let (from_client, from_storage, _) = model.queue_parts(self.queues[from]);
        let touched = [to_client, to_storage, from_client, from_storage];
        let mut intra_slopes = [0.0; 4];
        for (position, &rack) in touched.iter().enumerate() {
            let change = delta * (f64::from(u8::from(rack == to_client || rack == to_storage)))
                - delta * (f64::from(u8::from(rack == from_client || rack == from_storage)));
            let intra = tor - big_b * (self.rack_usage[rack] + change);
            match self.intra_slopes_at(rack, intra) {
                // Moving on along the line changes b_eff by −B·(change/δ)·dδ: the side it moves to.
                Some((falling, growing)) => intra_slopes[position] = if change > 0.0 { falling } else { growing },
                None => return f64::INFINITY,
            }
        }
        let queue_to = self.queues[to];
        let queue_from = self.queues[from];
        let own_to = model.term_slopes(queue_to, self.arrival[queue_to], big_b * (x[to] + delta), self.z);
        let own_from = model.term_slopes(queue_from, self.arrival[queue_from], big_b * (x[from] - delta), self.z);
        if !own_to.value.is_finite() || !own_from.value.is_finite() {
            return f64::INFINITY;
        }
        let gradient_to = big_b * (own_to.per_bandwidth - intra_slopes[0] - intra_slopes[1]);
        let gradient_from = big_b * (own_from.per_bandwidth - intra_slopes[2] - intra_slopes[3]);
        gradient_to - gradient_from
    }

    fn can_increase(&self, c: usize) -> bool {
        let model = self.model;
        let (client, storage, _) = model.queue_parts(self.queues[c]);
        let (big_b, tor) = (model.instance.aggregation_bandwidth_bps, model.instance.tor_bandwidth_bps);
        [client, storage].iter().all(|&r| tor - big_b * self.rack_usage[r] > EXHAUSTED_RELATIVE * tor)
    }
}

/// Pair descent on W (the solution's `inter_weights`, a feasible point); returns steps taken.
pub(crate) fn improve_inter_weights(
    model: &Model,
    loads: &Loads,
    inter_weights: &mut [f64],
    intra_shares: &[f64],
    z: &[f64],
    limits: &PairLimits,
) -> u32 {
    let queues = inter_rack_queues(model);
    let mut x: Vec<f64> = queues.iter().map(|&q| inter_weights[q]).collect();
    let instance = model.instance;
    let cap = (instance.queue_bandwidth_max_bps / instance.aggregation_bandwidth_bps).min(1.0);
    let upper = vec![cap; x.len()];
    let mut problem = InterProblem::new(model, &queues, loads, intra_shares, z);
    let mut scratch = PairScratch::default();
    let steps = pair_descent(&mut problem, &mut x, &upper, &mut scratch, limits);
    for (&q, &value) in queues.iter().zip(&x) {
        inter_weights[q] = value;
    }
    steps
}

/// One rack's intra-rack shares.
struct IntraProblem<'m, 'a> {
    model: &'m Model<'a>,
    rack: usize,
    intra_bandwidth: f64,
    arrival: &'m [f64],
    z: &'m [f64],
}

impl IntraProblem<'_, '_> {
    /// The one-sided ∂(objective)/∂w of class `class` at share `share` (as w grows, as w
    /// falls), `None` if that point is unstable. Past the port cap more share buys nothing.
    fn marginals(&self, class: usize, share: f64) -> Option<(f64, f64)> {
        let model = self.model;
        let cap = model.instance.queue_bandwidth_max_bps;
        let queue = model.queue(self.rack, self.rack, class);
        let wanted = share * self.intra_bandwidth;
        let term = model.term_slopes(queue, self.arrival[queue], wanted.min(cap), self.z);
        if !term.value.is_finite() {
            return None;
        }
        let slope = self.intra_bandwidth * term.per_bandwidth;
        Some((if wanted < cap { slope } else { 0.0 }, if wanted <= cap { slope } else { 0.0 }))
    }
}

impl PairProblem for IntraProblem<'_, '_> {
    fn gradient(&mut self, x: &[f64], up: &mut [f64], down: &mut [f64]) {
        for class in 0..x.len() {
            // The current point is feasible; −∞ would stop the descent rather than mislead it.
            let (growing, falling) = self.marginals(class, x[class]).unwrap_or((f64::NEG_INFINITY, f64::NEG_INFINITY));
            up[class] = growing;
            down[class] = falling;
        }
    }

    fn slope(&mut self, x: &[f64], to: usize, from: usize, delta: f64) -> f64 {
        match (self.marginals(to, x[to] + delta), self.marginals(from, x[from] - delta)) {
            (Some((growing, _)), Some((_, falling))) => growing - falling,
            _ => f64::INFINITY,
        }
    }
}

/// Pair descent on every rack's w (a feasible point); returns steps taken.
pub(crate) fn improve_intra_shares(
    model: &Model,
    loads: &Loads,
    intra_shares: &mut [f64],
    z: &[f64],
    limits: &PairLimits,
) -> u32 {
    let classes = model.classes;
    let mut scratch = PairScratch::default();
    let mut steps = 0;
    for rack in 0..model.racks {
        let intra_bandwidth = loads.intra_bandwidth[rack];
        if classes < 2 || intra_bandwidth <= 0.0 {
            continue;
        }
        let upper = vec![1.0; classes];
        let shares = &mut intra_shares[rack * classes..(rack + 1) * classes];
        let mut problem = IntraProblem { model, rack, intra_bandwidth, arrival: &loads.arrival, z };
        steps += pair_descent(&mut problem, shares, &upper, &mut scratch, limits);
    }
    steps
}

/// The gradient of the objective in W over the inter-rack queues (0 on i = j), for tests
/// against finite differences.
#[cfg(test)]
pub(super) fn inter_weight_gradient(
    model: &Model,
    loads: &Loads,
    inter_weights: &[f64],
    intra_shares: &[f64],
    z: &[f64],
) -> Vec<f64> {
    let queues = inter_rack_queues(model);
    let x: Vec<f64> = queues.iter().map(|&q| inter_weights[q]).collect();
    let mut problem = InterProblem::new(model, &queues, loads, intra_shares, z);
    let mut out = vec![0.0; x.len()];
    let mut down = vec![0.0; x.len()];
    problem.gradient(&x, &mut out, &mut down);
    let mut full = vec![0.0; inter_weights.len()];
    for (&q, &g) in queues.iter().zip(&out) {
        full[q] = g;
    }
    full
}
