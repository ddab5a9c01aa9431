//! JLWO of Xiang, Aggarwal, Chen and Lan, "differentiated latency classes" (§III–§IV): choose
//! chunk placement S_r, probabilistic scheduling π, inter-rack bandwidth weights W and intra-rack
//! class shares w so that Σ_d C_d·T̄_d, the class-weighted Theorem 1 bound on mean file latency,
//! is least. Racks i, j ∈ 0..N (i the client rack, j the storage rack: data flows j → i), classes
//! d ∈ 0..D; every (i, j, d) is one FCFS queue served at its own reserved bandwidth.
//!
//! Corrections to the paper (see `spec-fastcloud-xiang.md` B2, B3, B8):
//! - Lemma 2 with the transfer time, the service variance and Λ² ([`moments`]);
//! - (3) with "+": inter-rack traffic in and out of a rack both hold its ToR bandwidth;
//! - (19) as ρ = Λ·μ·B/B_eff < 1;
//! - (25) as intra-rack B_eff = min(w·b_eff, C): the same optimum whenever (25) can hold, and
//!   no infeasibility when b_eff > D·C (the weights module says why);
//! - z per (client rack, class) inside the solve, so that (16) and (29) are exact (the model
//!   module says why); the tightest per-file z is applied in the reported bounds;
//! - (29) in its clean form, and S_r after a move is β(S_r) (the placement module says why);
//! - the loop stops when the *decrease* of the normalised objective O/O⁰ is at most ε.
//!
//! Method: alternation of exact or descent sub-steps (W, w by pair descent on capped simplices;
//! π by block coordinate descent; placement by the Hungarian method per file; z by bisection), a
//! sub-step kept only if the objective does not rise (Theorem 2's monotonicity, enforced).
//!
//! Owns: the problem types, the alternation and the evaluations. Must not: read a clock (the
//! caller times runs), draw random numbers, do I/O, or loop unbounded: every loop has a cap
//! ([`JlwoLimits`] and the submodules' constants).

pub mod bound;
pub mod hungarian;
mod model;
pub mod moments;
mod paper_scale;
mod placement;
mod scheduling;
mod simplex;
mod start;
mod weights;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use bound::{auxiliary_f, optimal_z_s, order_statistic_bound_s};
pub use hungarian::{Assignment, AssignmentError, min_cost_assignment};
pub use moments::{ConnectionDelay, DelayMoments, ServiceMoments, delay_moments, printed_delay_moments, utilisation};
pub use paper_scale::paper_scale_instance;
pub use placement::place_new_file;
pub use start::demand_start;

use model::{Loads, Model};
use simplex::PairLimits;

/// The least weight a class is solved with, relative to the largest (see [`solve`]).
pub const ZERO_WEIGHT_FLOOR: f64 = 1e-6;

/// Relative tolerance of the equality constraints in [`check_feasible`] (Σπ = k, Σ W = 1, ...).
const FEASIBILITY_TOLERANCE: f64 = 1e-9;

/// One file: its class, where its n chunks are (one per rack), and who asks for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileDemand {
    /// d, in 0..D.
    pub class: usize,
    /// S_r: n distinct racks (the starting placement; JLWO may move the file).
    pub racks: Vec<u32>,
    /// λ_{i,r,d} per client rack i (length N), requests per second.
    pub request_rates_per_s: Vec<f64>,
}

/// A JLWO instance. Bandwidths in any one unit (bits per second by convention): only their
/// ratios and their comparison with the caps matter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    /// N.
    pub rack_count: usize,
    /// B: the aggregation switch's total, shared by all inter-rack queues through W (2).
    pub aggregation_bandwidth_bps: f64,
    /// b: each rack's ToR switch; what inter-rack reservations through the rack leave is shared
    /// among its intra-rack class queues through w (3), (4).
    pub tor_bandwidth_bps: f64,
    /// C: the most any one queue may reserve (the switch port rate, (24), (25)); +∞ for none.
    pub queue_bandwidth_max_bps: f64,
    /// C_d per class (length D): how much the objective cares about class d.
    pub class_weights: Vec<f64>,
    /// Moments of X, one standard chunk's service time at bandwidth B.
    pub service: ServiceMoments,
    /// Connection delay N_{i,j} at [i·N + j] (client rack i, storage rack j).
    pub connection: Vec<ConnectionDelay>,
    /// n: chunks per file.
    pub code_n: usize,
    /// k: chunks a read needs.
    pub code_k: usize,
    /// The files.
    pub files: Vec<FileDemand>,
}

impl Instance {
    /// N×N connection delays: `intra` on the diagonal, `inter` elsewhere.
    pub fn connection_intra_inter(
        rack_count: usize,
        intra: ConnectionDelay,
        inter: ConnectionDelay,
    ) -> Vec<ConnectionDelay> {
        (0..rack_count * rack_count).map(|ij| if ij / rack_count == ij % rack_count { intra } else { inter }).collect()
    }

    /// D.
    pub fn class_count(&self) -> usize {
        self.class_weights.len()
    }

    /// Checks sizes, ranges and that some request exists.
    pub fn validate(&self) -> Result<(), JlwoError> {
        let invalid = |why: String| Err(JlwoError::InvalidInstance(why));
        let racks = self.rack_count;
        if racks < 2 {
            return invalid(format!("{racks} racks: inter-rack weights need at least 2"));
        }
        if self.class_weights.is_empty() || self.class_weights.iter().any(|c| !c.is_finite() || *c < 0.0) {
            return invalid("class weights: at least one, each finite and ≥ 0".into());
        }
        if !(1 <= self.code_k && self.code_k <= self.code_n && self.code_n <= racks) {
            return invalid(format!("need 1 ≤ k ≤ n ≤ N, have k = {}, n = {}, N = {racks}", self.code_k, self.code_n));
        }
        let b = (self.aggregation_bandwidth_bps, self.tor_bandwidth_bps, self.queue_bandwidth_max_bps);
        if !(b.0 > 0.0 && b.0.is_finite() && b.1 >= 0.0 && b.1.is_finite() && b.2 > 0.0) {
            return invalid(format!("bandwidths: need B > 0, b ≥ 0 finite and cap > 0, have {b:?}"));
        }
        let s = self.service;
        if ServiceMoments::new(s.mean_s, s.second_moment_s2, s.third_moment_s3).is_none() {
            return invalid(format!("service moments {s:?} belong to no positive random variable"));
        }
        if self.connection.len() != racks * racks
            || self.connection.iter().any(|c| {
                !(c.mean_s.is_finite() && c.variance_s2.is_finite() && c.mean_s >= 0.0 && c.variance_s2 >= 0.0)
            })
        {
            return invalid(format!("connection delays: need {} finite non-negative pairs", racks * racks));
        }
        let mut total_rate = 0.0;
        for (f, file) in self.files.iter().enumerate() {
            if file.class >= self.class_count() {
                return invalid(format!("file {f}: class {} of {}", file.class, self.class_count()));
            }
            let distinct = file.racks.iter().enumerate().all(|(p, r)| !file.racks[..p].contains(r));
            if file.racks.len() != self.code_n || !distinct || file.racks.iter().any(|&r| r as usize >= racks) {
                return invalid(format!("file {f}: racks {:?} are not n = {} distinct racks", file.racks, self.code_n));
            }
            if file.request_rates_per_s.len() != racks
                || file.request_rates_per_s.iter().any(|r| !r.is_finite() || *r < 0.0)
            {
                return invalid(format!("file {f}: need {racks} finite non-negative request rates"));
            }
            total_rate += file.request_rates_per_s.iter().sum::<f64>();
        }
        if total_rate.is_nan() || total_rate <= 0.0 {
            return invalid("no requests: λ_all = 0".into());
        }
        Ok(())
    }
}

/// Why JLWO gave no answer.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum JlwoError {
    /// The instance is malformed.
    #[error("invalid JLWO instance: {0}")]
    InvalidInstance(String),
    /// A solution does not fit the instance (sizes, ranges, sums).
    #[error("solution does not fit the instance: {0}")]
    InvalidSolution(String),
    /// A loaded queue is unstable: ρ = Λ·μ·B/B_eff ≥ 1.
    #[error(
        "queue (client rack {client_rack}, storage rack {storage_rack}, class {class}) saturates: ρ = {utilisation}"
    )]
    Saturated {
        /// i.
        client_rack: usize,
        /// j.
        storage_rack: usize,
        /// d.
        class: usize,
        /// ρ (+∞ with no bandwidth).
        utilisation: f64,
    },
    /// Inter-rack reservations through a rack exceed its ToR bandwidth b: b_eff < 0.
    #[error("rack {rack}: inter-rack reservations exceed the ToR bandwidth (b_eff = {intra_bandwidth_bps})")]
    NoIntraRackBandwidth {
        /// The rack.
        rack: usize,
        /// b_eff, negative.
        intra_bandwidth_bps: f64,
    },
    /// A queue reserves more than the port cap.
    #[error(
        "queue (client rack {client_rack}, storage rack {storage_rack}, class {class}) reserves {reserved_bps} > cap {cap_bps}"
    )]
    QueueCapExceeded {
        /// i.
        client_rack: usize,
        /// j.
        storage_rack: usize,
        /// d.
        class: usize,
        /// B_eff.
        reserved_bps: f64,
        /// The cap.
        cap_bps: f64,
    },
}

/// Iteration caps and tolerances of a JLWO run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct JlwoLimits {
    /// Outer iterations at most.
    pub iterations_max: u32,
    /// ε: stop when an iteration lowers the normalised objective O/O⁰ by at most this (the
    /// paper's 0.01). The alternation can cross plateaus (W and π must move together to leave
    /// one): at the paper's scale 0.01 stops after 3 iterations at 0.84·O⁰, 1e-4 after ~50 at
    /// 0.47·O⁰.
    pub tolerance_relative: f64,
    /// Run the placement sub-step (off: S_r stays where the instance puts it, e.g. for data
    /// already written).
    pub optimise_placement: bool,
    /// Sweeps of the π sub-step per iteration.
    pub schedule_sweeps: u32,
    /// Pair steps of the W sub-step per iteration at most.
    pub inter_weight_steps_max: u32,
    /// Pair steps per π block, and per rack's w, at most.
    pub block_steps_max: u32,
    /// Slope evaluations per line search at most.
    pub line_search_iterations_max: u32,
    /// A sub-problem stops when its largest KKT violation is at most this share of its gradient.
    pub violation_relative: f64,
}

impl Default for JlwoLimits {
    fn default() -> JlwoLimits {
        JlwoLimits {
            iterations_max: 200,
            tolerance_relative: 0.01,
            optimise_placement: true,
            schedule_sweeps: 1,
            inter_weight_steps_max: 2000,
            block_steps_max: 16,
            line_search_iterations_max: 60,
            violation_relative: 1e-6,
        }
    }
}

/// JLWO's variables, flat. N racks, D classes, n chunks per file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Solution {
    /// N.
    pub rack_count: usize,
    /// D.
    pub class_count: usize,
    /// n.
    pub code_n: usize,
    /// S_r of file r at [r·n .. (r+1)·n], in position order.
    pub racks: Vec<u32>,
    /// π at [(r·N + i)·n + p]: the probability that a request for file r from client rack i
    /// reads the chunk at position p (rack `racks[r·n + p]`). Uniform k/n for racks that do not
    /// request r.
    pub schedule: Vec<f64>,
    /// W_{i,j,d} at [(i·N + j)·D + d]; 0 on i = j.
    pub inter_weights: Vec<f64>,
    /// w_{i,d} at [i·D + d].
    pub intra_shares: Vec<f64>,
    /// z_{i,d} at [i·D + d], seconds.
    pub z_s: Vec<f64>,
}

impl Solution {
    /// S_r of file `file`.
    pub fn file_racks(&self, file: usize) -> &[u32] {
        &self.racks[file * self.code_n..(file + 1) * self.code_n]
    }

    /// π of file `file` for requests from `client_rack`, by position in [`Solution::file_racks`].
    pub fn file_schedule(&self, file: usize, client_rack: usize) -> &[f64] {
        let start = (file * self.rack_count + client_rack) * self.code_n;
        &self.schedule[start..start + self.code_n]
    }
}

/// What one outer iteration did: the objective after each sub-step (so monotonicity can be
/// checked at every sub-step), and what moved.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct IterationTrace {
    /// After the W sub-step.
    pub objective_after_inter_weights: f64,
    /// After the w sub-step.
    pub objective_after_intra_shares: f64,
    /// After the π sub-step.
    pub objective_after_schedule: f64,
    /// After the placement sub-step (equal to the previous when it is off).
    pub objective_after_placement: f64,
    /// After the z sub-step: O^(t).
    pub objective: f64,
    /// Files the placement moved.
    pub files_moved: u32,
    /// Pair steps taken by the W, w and π sub-steps.
    pub pair_steps: u32,
    /// Sub-steps undone because the objective rose (rounding; expected 0).
    pub rejected_sub_steps: u32,
}

/// The bound of a solution, per class and per (file, client rack).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Σ_d C_d·T̄_d with the solution's z per (client rack, class), seconds.
    pub objective: f64,
    /// T̄_d of (15) (weighted by λ/λ_all), per class, seconds.
    pub class_bounds_s: Vec<f64>,
    /// The bound on the mean latency of a class-d request, T̄_d·λ_all/λ_d (0 for a class
    /// without requests), with z per (client rack, class).
    pub class_mean_bounds_s: Vec<f64>,
    /// The same with each (file, client rack)'s own optimal z: the tightest Theorem 1 gives.
    pub class_mean_bounds_per_file_z_s: Vec<f64>,
    /// Theorem 1's tightest bound for a request for file r from rack i at [r·N + i] (also for
    /// racks that do not request r, under their uniform π: +∞ where that reads a queue left with
    /// no bandwidth), seconds.
    pub file_bounds_s: Vec<f64>,
    /// Λ_{i,j,d} at [(i·N + j)·D + d], chunk requests per second.
    pub arrival_per_s: Vec<f64>,
    /// B_eff_{i,j,d} at [(i·N + j)·D + d].
    pub reserved_bps: Vec<f64>,
    /// The largest ρ over loaded queues.
    pub utilisation_max: f64,
}

/// A JLWO run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JlwoOutcome {
    /// The variables at the end.
    pub solution: Solution,
    /// Their bound.
    pub evaluation: Evaluation,
    /// O⁰: the objective at the starting point (with its optimal z).
    pub initial_objective: f64,
    /// One entry per iteration.
    pub trace: Vec<IterationTrace>,
    /// Iterations run.
    pub iterations: u32,
    /// The decrease fell to ε before the cap.
    pub converged: bool,
    /// The warm start was used (false: none given, or it no longer fits or is infeasible
    /// under the new rates, so the run started cold).
    pub warm_started: bool,
}

/// The oblivious starting point: the instance's placement, uniform π = k/n on S_r, equal W
/// over all inter-rack queues, equal w, z = 0.
pub fn initial_solution(instance: &Instance) -> Solution {
    let (racks, classes, n) = (instance.rack_count, instance.class_count(), instance.code_n);
    let inter_queue_count = racks * (racks - 1) * classes;
    let mut inter_weights = vec![0.0; racks * racks * classes];
    for (queue, weight) in inter_weights.iter_mut().enumerate() {
        let pair = queue / classes;
        if pair / racks != pair % racks {
            *weight = 1.0 / inter_queue_count as f64;
        }
    }
    Solution {
        rack_count: racks,
        class_count: classes,
        code_n: n,
        racks: instance.files.iter().flat_map(|f| f.racks.iter().copied()).collect(),
        schedule: vec![instance.code_k as f64 / n as f64; instance.files.len() * racks * n],
        inter_weights,
        intra_shares: vec![1.0 / classes as f64; racks * classes],
        z_s: vec![0.0; racks * classes],
    }
}

/// Checks every constraint of JLWO on `solution`: sizes, distinct racks, Σπ = k with
/// 0 ≤ π ≤ 1, Σ W = 1 with 0 ≤ B·W ≤ cap and W = 0 on i = j, Σ_d w = 1 with w ≥ 0, b_eff ≥ 0,
/// and ρ < 1 on every loaded queue (the worst one is named). Intra-rack B_eff ≤ cap holds by
/// construction: B_eff = min(w·b_eff, cap).
pub fn check_feasible(instance: &Instance, solution: &Solution) -> Result<(), JlwoError> {
    instance.validate()?;
    check_shape(instance, solution)?;
    let invalid = |why: String| Err(JlwoError::InvalidSolution(why));
    let (racks, classes, k) = (instance.rack_count, instance.class_count(), instance.code_k);
    for f in 0..instance.files.len() {
        let file_racks = solution.file_racks(f);
        let distinct = file_racks.iter().enumerate().all(|(p, r)| !file_racks[..p].contains(r));
        if !distinct || file_racks.iter().any(|&r| r as usize >= racks) {
            return invalid(format!("file {f}: racks {file_racks:?} are not n distinct racks"));
        }
        for client in 0..racks {
            let pi = solution.file_schedule(f, client);
            let sum: f64 = pi.iter().sum();
            let in_box = pi.iter().all(|&p| (-FEASIBILITY_TOLERANCE..=1.0 + FEASIBILITY_TOLERANCE).contains(&p));
            if !in_box || (sum - k as f64).abs() > FEASIBILITY_TOLERANCE * k as f64 {
                return invalid(format!("file {f}, client rack {client}: π = {pi:?} (need Σ = {k}, 0 ≤ π ≤ 1)"));
            }
        }
    }
    let model = Model::new(instance);
    let big_b = instance.aggregation_bandwidth_bps;
    let cap = instance.queue_bandwidth_max_bps;
    let mut weight_sum = 0.0;
    for (queue, &weight) in solution.inter_weights.iter().enumerate() {
        let (client, storage, class) = model.queue_parts(queue);
        if client == storage {
            if weight != 0.0 {
                return invalid(format!("W at ({client}, {client}, {class}) = {weight}: intra-rack queues use w"));
            }
            continue;
        }
        if weight.is_nan() || weight < 0.0 {
            return invalid(format!("W at ({client}, {storage}, {class}) = {weight} < 0"));
        }
        if big_b * weight > cap * (1.0 + FEASIBILITY_TOLERANCE) {
            let (client_rack, storage_rack, reserved_bps, cap_bps) = (client, storage, big_b * weight, cap);
            return Err(JlwoError::QueueCapExceeded { client_rack, storage_rack, class, reserved_bps, cap_bps });
        }
        weight_sum += weight;
    }
    if (weight_sum - 1.0).abs() > FEASIBILITY_TOLERANCE {
        return invalid(format!("Σ W = {weight_sum}, need 1"));
    }
    for rack in 0..racks {
        let shares = &solution.intra_shares[rack * classes..(rack + 1) * classes];
        let sum: f64 = shares.iter().sum();
        if shares.iter().any(|w| w.is_nan() || *w < 0.0) || (sum - 1.0).abs() > FEASIBILITY_TOLERANCE {
            return invalid(format!("rack {rack}: w = {shares:?} (need Σ = 1, w ≥ 0)"));
        }
    }
    let loads = model.loads(solution);
    for (rack, &intra) in loads.intra_bandwidth.iter().enumerate() {
        if intra < -FEASIBILITY_TOLERANCE * instance.tor_bandwidth_bps.max(big_b) {
            return Err(JlwoError::NoIntraRackBandwidth { rack, intra_bandwidth_bps: intra });
        }
    }
    let (worst, rho) = worst_utilisation(&model, &loads);
    if rho >= 1.0 {
        let (client_rack, storage_rack, class) = model.queue_parts(worst);
        return Err(JlwoError::Saturated { client_rack, storage_rack, class, utilisation: rho });
    }
    Ok(())
}

fn check_shape(instance: &Instance, solution: &Solution) -> Result<(), JlwoError> {
    let (racks, classes, n) = (instance.rack_count, instance.class_count(), instance.code_n);
    let files = instance.files.len();
    let fits = solution.rack_count == racks
        && solution.class_count == classes
        && solution.code_n == n
        && solution.racks.len() == files * n
        && solution.schedule.len() == files * racks * n
        && solution.inter_weights.len() == racks * racks * classes
        && solution.intra_shares.len() == racks * classes
        && solution.z_s.len() == racks * classes;
    if fits {
        Ok(())
    } else {
        Err(JlwoError::InvalidSolution(format!(
            "sizes are not those of {files} files, N = {racks}, D = {classes}, n = {n}"
        )))
    }
}

/// The loaded queue with the largest ρ, and that ρ (0 if none is loaded).
fn worst_utilisation(model: &Model, loads: &Loads) -> (usize, f64) {
    let instance = model.instance;
    let mut worst = (0, 0.0);
    for queue in 0..model.queue_count() {
        let rho = utilisation(
            loads.arrival[queue],
            loads.reserved[queue],
            instance.aggregation_bandwidth_bps,
            instance.service.mean_s,
        );
        if rho > worst.1 {
            worst = (queue, rho);
        }
    }
    worst
}

/// The bound of `solution` (its z per (client rack, class) for the objective, each request's
/// optimal z for the per-file bounds). An unstable solution evaluates to +∞, not an error.
pub fn evaluate(instance: &Instance, solution: &Solution) -> Result<Evaluation, JlwoError> {
    instance.validate()?;
    check_shape(instance, solution)?;
    let model = Model::new(instance);
    let loads = model.loads(solution);
    Ok(evaluate_loads(&model, solution, &loads))
}

fn evaluate_loads(model: &Model, solution: &Solution, loads: &Loads) -> Evaluation {
    let instance = model.instance;
    let (racks, classes, n) = (model.racks, model.classes, model.code_n);
    let class_bounds_s = model.class_bounds(loads, &solution.z_s);
    let per_class_mean = |bound: f64, class: usize| {
        let rate = model.class_rate[class];
        if rate > 0.0 { bound * model.total_rate / rate } else { 0.0 }
    };
    let class_mean_bounds_s = class_bounds_s.iter().enumerate().map(|(d, &t)| per_class_mean(t, d)).collect();
    let mut file_bounds_s = vec![0.0; instance.files.len() * racks];
    let mut weighted_tight = vec![0.0; classes];
    let mut moments = Vec::with_capacity(n);
    for (f, file) in instance.files.iter().enumerate() {
        for client in 0..racks {
            moments.clear();
            for &rack in solution.file_racks(f) {
                let queue = model.queue(client, rack as usize, file.class);
                moments.push(model.queue_moments(queue, loads.arrival[queue], loads.reserved[queue]));
            }
            let pi = solution.file_schedule(f, client);
            let z = optimal_z_s(pi, &moments);
            let bound = order_statistic_bound_s(z, pi, &moments);
            file_bounds_s[f * racks + client] = bound;
            let rate = file.request_rates_per_s[client];
            if rate > 0.0 {
                weighted_tight[file.class] += rate * bound;
            }
        }
    }
    let class_mean_bounds_per_file_z_s = weighted_tight
        .iter()
        .enumerate()
        .map(|(d, &t)| if model.class_rate[d] > 0.0 { t / model.class_rate[d] } else { 0.0 })
        .collect();
    Evaluation {
        objective: model.objective(loads, &solution.z_s),
        class_bounds_s,
        class_mean_bounds_s,
        class_mean_bounds_per_file_z_s,
        file_bounds_s,
        arrival_per_s: loads.arrival.clone(),
        reserved_bps: loads.reserved.clone(),
        utilisation_max: worst_utilisation(model, loads).1,
    }
}

/// The oblivious baseline: [`initial_solution`] (the instance's placement, uniform π, equal
/// weights) with its optimal z per (client rack, class), and its bound, so an experiment can
/// set JLWO beside it. Unstable: objective +∞ (no error).
pub fn oblivious_baseline(instance: &Instance) -> Result<(Solution, Evaluation), JlwoError> {
    instance.validate()?;
    let model = Model::new(instance);
    let mut solution = initial_solution(instance);
    let loads = model.loads(&solution);
    model.optimise_z(&loads, &mut solution.z_s);
    let evaluation = evaluate_loads(&model, &solution, &loads);
    Ok((solution, evaluation))
}

/// Runs JLWO from `warm_start` (a previous solution for the same files and racks; its
/// placement replaces the instance's) or, without one or when it is infeasible under the new
/// rates, from [`initial_solution`]. A cold start that is already infeasible is an error naming
/// the constraint (e.g. the queue that saturates).
///
/// A class of weight C_d = 0 is solved with C_d = [`ZERO_WEIGHT_FLOOR`] × the largest weight:
/// at exactly 0 its delay would cost nothing however close to saturation its queues were driven,
/// and the descent would have no barrier keeping them stable.
pub fn solve(
    instance: &Instance,
    limits: &JlwoLimits,
    warm_start: Option<&Solution>,
) -> Result<JlwoOutcome, JlwoError> {
    instance.validate()?;
    let largest = instance.class_weights.iter().copied().fold(0.0, f64::max);
    if instance.class_weights.iter().any(|&w| w < ZERO_WEIGHT_FLOOR * largest) {
        let floored = instance.class_weights.iter().map(|&w| w.max(ZERO_WEIGHT_FLOOR * largest)).collect();
        return solve(&Instance { class_weights: floored, ..instance.clone() }, limits, warm_start);
    }
    assert!(limits.iterations_max > 0 && limits.tolerance_relative >= 0.0, "limits need an iteration");
    let model = Model::new(instance);
    let warm = warm_start.filter(|s| check_feasible(instance, s).is_ok());
    let warm_started = warm.is_some();
    let mut solution = match warm {
        Some(previous) => previous.clone(),
        None => {
            // The oblivious start, or, where it leaves a loaded queue saturated, the
            // demand-proportional one; the oblivious start's error when neither is feasible.
            let cold = initial_solution(instance);
            match check_feasible(instance, &cold) {
                Ok(()) => cold,
                Err(error) => {
                    let demand = demand_start(instance);
                    check_feasible(instance, &demand).map_err(|_| error)?;
                    demand
                }
            }
        }
    };
    let mut loads = model.loads(&solution);
    model.optimise_z(&loads, &mut solution.z_s);
    let initial_objective = model.objective(&loads, &solution.z_s);
    debug_assert!(initial_objective.is_finite(), "a feasible start has a finite bound");
    let pair_limits = |steps_max: u32| PairLimits {
        steps_max,
        line_search_iterations_max: limits.line_search_iterations_max,
        violation_relative: limits.violation_relative,
    };
    let (inter_limits, block_limits) =
        (pair_limits(limits.inter_weight_steps_max), pair_limits(limits.block_steps_max));
    let mut current = initial_objective;
    let mut trace = Vec::new();
    let mut converged = false;
    for _ in 0..limits.iterations_max {
        let previous = current;
        let mut step = IterationTrace {
            objective_after_inter_weights: 0.0,
            objective_after_intra_shares: 0.0,
            objective_after_schedule: 0.0,
            objective_after_placement: 0.0,
            objective: 0.0,
            files_moved: 0,
            pair_steps: 0,
            rejected_sub_steps: 0,
        };

        let saved = solution.inter_weights.clone();
        step.pair_steps += weights::improve_inter_weights(
            &model,
            &loads,
            &mut solution.inter_weights,
            &solution.intra_shares,
            &solution.z_s,
            &inter_limits,
        );
        model.fill_reserved(&solution, &mut loads.reserved, &mut loads.intra_bandwidth);
        if !accept(&model, &loads, &solution, &mut current) {
            solution.inter_weights = saved;
            model.fill_reserved(&solution, &mut loads.reserved, &mut loads.intra_bandwidth);
            step.rejected_sub_steps += 1;
        }
        step.objective_after_inter_weights = current;

        let saved = solution.intra_shares.clone();
        step.pair_steps +=
            weights::improve_intra_shares(&model, &loads, &mut solution.intra_shares, &solution.z_s, &block_limits);
        model.fill_reserved(&solution, &mut loads.reserved, &mut loads.intra_bandwidth);
        if !accept(&model, &loads, &solution, &mut current) {
            solution.intra_shares = saved;
            model.fill_reserved(&solution, &mut loads.reserved, &mut loads.intra_bandwidth);
            step.rejected_sub_steps += 1;
        }
        step.objective_after_intra_shares = current;

        let saved = solution.schedule.clone();
        let z = solution.z_s.clone();
        for _ in 0..limits.schedule_sweeps {
            step.pair_steps += scheduling::improve_schedule(&model, &mut solution, &mut loads, &z, &block_limits);
        }
        // Λ afresh: the sweep's running updates carry rounding.
        model.fill_arrivals(&solution, &mut loads.arrival);
        if !accept(&model, &loads, &solution, &mut current) {
            solution.schedule = saved;
            model.fill_arrivals(&solution, &mut loads.arrival);
            step.rejected_sub_steps += 1;
        }
        step.objective_after_schedule = current;

        if limits.optimise_placement {
            let saved = solution.racks.clone();
            step.files_moved = placement::improve_placement(&model, &mut solution, &mut loads, &z);
            model.fill_arrivals(&solution, &mut loads.arrival);
            if !accept(&model, &loads, &solution, &mut current) {
                solution.racks = saved;
                model.fill_arrivals(&solution, &mut loads.arrival);
                step.files_moved = 0;
                step.rejected_sub_steps += 1;
            }
        }
        step.objective_after_placement = current;

        let saved = solution.z_s.clone();
        model.optimise_z(&loads, &mut solution.z_s);
        if !accept(&model, &loads, &solution, &mut current) {
            solution.z_s = saved;
            step.rejected_sub_steps += 1;
        }
        step.objective = current;
        trace.push(step);
        if previous - current <= limits.tolerance_relative * initial_objective.abs() {
            converged = true;
            break;
        }
    }
    let evaluation = evaluate_loads(&model, &solution, &loads);
    let iterations = trace.len() as u32;
    Ok(JlwoOutcome { solution, evaluation, initial_objective, trace, iterations, converged, warm_started })
}

/// Theorem 2's monotonicity, enforced: the new point is kept only if its objective is not
/// above `current` (which it then becomes) and it is feasible. A class of weight C_d = 0 adds
/// nothing to the objective however slow its queues get, so a step may drive one of them to the
/// edge of saturation at no cost: the feasibility check refuses that point.
fn accept(model: &Model, loads: &Loads, solution: &Solution, current: &mut f64) -> bool {
    let objective = model.objective(loads, &solution.z_s);
    if objective <= *current && check_feasible(model.instance, solution).is_ok() {
        *current = objective;
        true
    } else {
        false
    }
}
