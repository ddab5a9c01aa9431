//! JLWO against independent references: Lemma 2 against an M/G/1 simulation (Lindley's
//! recursion), Theorem 1 against Monte-Carlo order statistics of k-subsets drawn with the given
//! marginals, the Hungarian method against brute force, the gradients against finite
//! differences, the placement step against all placements of a file, and the alternation's
//! claims (monotone, feasible, better than the oblivious baseline, symmetric classes equal).

use super::model::Model;
use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

// ---------------------------------------------------------------------------------------------
// Helpers

fn assert_close(what: &str, got: f64, want: f64, relative: f64) {
    assert!((got - want).abs() <= relative * want.abs(), "{what}: got {got}, want {want} ± {:.2} %", relative * 100.0);
}

/// Exp(mean) by inversion.
fn exponential(rng: &mut ChaCha8Rng, mean: f64) -> f64 {
    -mean * (1.0 - rng.random::<f64>()).ln()
}

/// Simulates an M/G/1 FCFS queue (Lindley) with Δ+Exp service at `reference/reserved` scale
/// plus an independent Exp(η) connection delay; returns the sample mean and variance of D.
fn simulate_delay(
    rng: &mut ChaCha8Rng,
    arrival_per_s: f64,
    scale: f64,
    shift_s: f64,
    exp_mean_s: f64,
    connection_mean_s: f64,
    customers: usize,
) -> (f64, f64) {
    let mut wait = 0.0f64;
    let (mut sum, mut sum_sq) = (0.0, 0.0);
    let warmup = customers / 20;
    let mut counted = 0.0;
    for index in 0..customers + warmup {
        let service = scale * (shift_s + exponential(rng, exp_mean_s));
        let delay = exponential(rng, connection_mean_s) + wait + service;
        if index >= warmup {
            sum += delay;
            sum_sq += delay * delay;
            counted += 1.0;
        }
        let gap = exponential(rng, 1.0 / arrival_per_s);
        wait = (wait + service - gap).max(0.0);
    }
    let mean = sum / counted;
    (mean, sum_sq / counted - mean * mean)
}

/// Systematic (Madow) sampling of a k-subset with marginals π (Σπ = k, π ≤ 1).
fn systematic_sample(pi: &[f64], u: f64, chosen: &mut Vec<usize>) {
    chosen.clear();
    let mut cumulative = 0.0;
    let mut next = u;
    for (j, &p) in pi.iter().enumerate() {
        let end = cumulative + p;
        if next < end {
            chosen.push(j);
            next += 1.0;
        }
        cumulative = end;
    }
}

/// A random point of {Σ x = k, 0 ≤ x ≤ 1} in n coordinates.
fn random_marginals(rng: &mut ChaCha8Rng, n: usize, k: usize) -> Vec<f64> {
    let mut x: Vec<f64> = (0..n).map(|_| rng.random_range(0.05..1.0)).collect();
    // Scale towards Σ = k, clamping at 1 and rescaling the rest (terminates: ≤ n clamps).
    for _ in 0..=n {
        let fixed: f64 = x.iter().filter(|&&v| v >= 1.0).count() as f64;
        let free: f64 = x.iter().filter(|&&v| v < 1.0).sum();
        let factor = (k as f64 - fixed) / free;
        for v in x.iter_mut().filter(|v| **v < 1.0) {
            *v = (*v * factor).min(1.0);
        }
    }
    let sum: f64 = x.iter().sum();
    assert!((sum - k as f64).abs() < 1e-9, "marginals sum to {sum}");
    x
}

#[derive(Clone, Copy)]
struct Setup {
    racks: usize,
    code_n: usize,
    code_k: usize,
    classes: usize,
    files_per_class: usize,
    total_rate_per_s: f64,
    /// Share of every file's requests from rack 0 (the rest uniform over all racks).
    concentration: f64,
    seed: u64,
}

impl Setup {
    fn small() -> Setup {
        Setup {
            racks: 5,
            code_n: 3,
            code_k: 2,
            classes: 2,
            files_per_class: 12,
            total_rate_per_s: 3.0,
            concentration: 0.0,
            seed: 7,
        }
    }

    /// B = 10, b = 10, cap 4 (Gbit/s): equal weights leave each rack 10 − 2·10/N for intra
    /// traffic. A chunk takes Δ+Exp (10 ms + 10 ms) at B, so 0.8 s at an equal inter share of 5
    /// racks and 2 classes.
    fn instance(&self, class_weights: &[f64]) -> Instance {
        assert_eq!(class_weights.len(), self.classes);
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut files = Vec::new();
        let file_count = self.files_per_class * self.classes;
        for f in 0..file_count {
            let mut racks: Vec<u32> = (0..self.racks as u32).collect();
            for i in 0..self.code_n {
                let j = rng.random_range(i..self.racks);
                racks.swap(i, j);
            }
            racks.truncate(self.code_n);
            let popularity = rng.random_range(0.5..1.5);
            let file_rate = self.total_rate_per_s * popularity / file_count as f64;
            let rates = (0..self.racks)
                .map(|i| {
                    let uniform = (1.0 - self.concentration) / self.racks as f64;
                    file_rate * (uniform + if i == 0 { self.concentration } else { 0.0 })
                })
                .collect();
            files.push(FileDemand { class: f % self.classes, racks, request_rates_per_s: rates });
        }
        Instance {
            rack_count: self.racks,
            aggregation_bandwidth_bps: 10e9,
            tor_bandwidth_bps: 10e9,
            queue_bandwidth_max_bps: 4e9,
            class_weights: class_weights.to_vec(),
            service: ServiceMoments::shifted_exponential(0.01, 0.01),
            connection: Instance::connection_intra_inter(
                self.racks,
                ConnectionDelay { mean_s: 0.001, variance_s2: 1e-6 },
                ConnectionDelay { mean_s: 0.003, variance_s2: 9e-6 },
            ),
            code_n: self.code_n,
            code_k: self.code_k,
            files,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Lemma 2

#[test]
fn corrected_moments_match_an_mg1_simulation() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let service = ServiceMoments::shifted_exponential(0.2, 0.3);
    let connection = ConnectionDelay { mean_s: 0.05, variance_s2: 0.05 * 0.05 };
    let reference = 10.0;
    for (reserved, arrival) in [(5.0, 0.2), (2.5, 0.3), (10.0, 1.4)] {
        let moments = delay_moments(arrival, reserved, reference, &service, &connection);
        let rho = utilisation(arrival, reserved, reference, service.mean_s);
        assert!(rho < 0.8, "ρ = {rho}");
        let (mean, variance) =
            simulate_delay(&mut rng, arrival, reference / reserved, 0.2, 0.3, connection.mean_s, 2_000_000);
        assert_close(&format!("E[D] at ρ = {rho:.2}"), mean, moments.mean_s, 0.03);
        assert_close(&format!("Var[D] at ρ = {rho:.2}"), variance, moments.variance_s2, 0.03);
    }
}

#[test]
fn moments_follow_the_briefs_unscaled_formulas() {
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    for _ in 0..200 {
        let service = ServiceMoments::shifted_exponential(rng.random_range(0.0..1.0), rng.random_range(0.01..1.0));
        let connection =
            ConnectionDelay { mean_s: rng.random_range(0.0..0.1), variance_s2: rng.random_range(0.0..0.01) };
        let big_b = rng.random_range(1.0..100.0);
        let be = rng.random_range(0.1..1.0) * big_b;
        let lambda = rng.random_range(0.0..0.95) * be / (service.mean_s * big_b);
        let (mu, g2, g3, s2) =
            (service.mean_s, service.second_moment_s2, service.third_moment_s3, service.variance_s2());
        let gap = be - lambda * mu * big_b;
        let mean = connection.mean_s + mu * big_b / be + lambda * g2 * big_b * big_b / (2.0 * be * gap);
        let variance = connection.variance_s2
            + s2 * big_b * big_b / (be * be)
            + lambda * g3 * big_b.powi(3) / (3.0 * be * be * gap)
            + lambda * lambda * g2 * g2 * big_b.powi(4) / (4.0 * be * be * gap * gap);
        let got = delay_moments(lambda, be, big_b, &service, &connection);
        assert_close("E[D]", got.mean_s, mean, 1e-9);
        assert_close("Var[D]", got.variance_s2, variance, 1e-9);
    }
}

#[test]
fn printed_lemma_2_underestimates_the_delay_at_low_load() {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let service = ServiceMoments::shifted_exponential(0.2, 0.3);
    let connection = ConnectionDelay { mean_s: 0.05, variance_s2: 0.05 * 0.05 };
    let (reference, reserved, arrival) = (10.0, 5.0, 0.1);
    let (mean, variance) = simulate_delay(&mut rng, arrival, 2.0, 0.2, 0.3, connection.mean_s, 1_000_000);
    let printed = printed_delay_moments(arrival, reserved, reference, &service, &connection);
    let corrected = delay_moments(arrival, reserved, reference, &service, &connection);
    // (9) leaves out the transfer time μ·B/B_eff = 1 s, most of a lightly loaded queue's delay.
    assert!(printed.mean_s < 0.25 * mean, "printed E[D] {} vs simulated {mean}", printed.mean_s);
    assert!(printed.variance_s2 < 0.5 * variance, "printed Var[D] {} vs simulated {variance}", printed.variance_s2);
    assert_close("corrected E[D]", mean, corrected.mean_s, 0.03);
    // And Theorem 1 with (9)/(10) for a single chunk read (k = n = 1) is below the true mean.
    let bound = order_statistic_bound_s(optimal_z_s(&[1.0], &[printed]), &[1.0], &[printed]);
    assert!(bound < mean, "a bound from the printed moments ({bound}) is under the mean ({mean})");
}

#[test]
fn saturated_or_unserved_queues_have_infinite_moments_never_nan() {
    let service = ServiceMoments::exponential(1.0);
    let connection = ConnectionDelay { mean_s: 0.1, variance_s2: 0.01 };
    for (arrival, reserved) in [(1.0, 1.0), (2.0, 1.0), (1.0, 0.0), (0.0, 0.0), (1.0, -1.0)] {
        for m in [
            delay_moments(arrival, reserved, 1.0, &service, &connection),
            printed_delay_moments(arrival, reserved, 1.0, &service, &connection),
        ] {
            assert_eq!(m.mean_s, f64::INFINITY, "Λ = {arrival}, B_eff = {reserved}");
            assert_eq!(m.variance_s2, f64::INFINITY);
        }
    }
    let idle = delay_moments(0.0, 0.5, 1.0, &service, &connection);
    assert_close("idle E[D]", idle.mean_s, 0.1 + 2.0, 1e-12);
    assert_close("idle Var[D]", idle.variance_s2, 0.01 + 4.0, 1e-12);
    assert_eq!(utilisation(0.0, 0.0, 1.0, 1.0), 0.0);
    assert_eq!(utilisation(1.0, 0.0, 1.0, 1.0), f64::INFINITY);
    assert_eq!(
        order_statistic_bound_s(0.0, &[1.0, 1.0], &[idle, delay_moments(2.0, 1.0, 1.0, &service, &connection)]),
        f64::INFINITY
    );
    assert_eq!(optimal_z_s(&[1.0, 1.0], &[idle, delay_moments(2.0, 1.0, 1.0, &service, &connection)]), 0.0);
    assert!(ServiceMoments::new(1.0, 0.5, 1.0).is_none(), "Γ₂ < μ² is no distribution");
    assert!(ServiceMoments::new(1.0, 2.0, 3.0).is_none(), "Γ₃·μ < Γ₂² is no distribution");
    assert!(ServiceMoments::new(1.0, 2.0, 6.0).is_some());
}

#[test]
fn moment_slopes_match_finite_differences() {
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    for _ in 0..200 {
        let service = ServiceMoments::shifted_exponential(rng.random_range(0.0..1.0), rng.random_range(0.01..1.0));
        let connection = ConnectionDelay { mean_s: 0.01, variance_s2: 1e-4 };
        let big_b = 10.0;
        let be = rng.random_range(0.5..10.0);
        let lambda = rng.random_range(0.01..0.9) * be / (service.mean_s * big_b);
        let slopes = moments::delay_moments_with_slopes(lambda, be, big_b, &service, &connection);
        let at = |a: f64, b: f64| delay_moments(a, b, big_b, &service, &connection);
        let (ha, hb) = (1e-6 * lambda, 1e-6 * be);
        let da = |f: fn(DelayMoments) -> f64| (f(at(lambda + ha, be)) - f(at(lambda - ha, be))) / (2.0 * ha);
        let db = |f: fn(DelayMoments) -> f64| (f(at(lambda, be + hb)) - f(at(lambda, be - hb))) / (2.0 * hb);
        assert_close("∂E/∂Λ", slopes.mean_per_arrival, da(|m| m.mean_s), 1e-5);
        assert_close("∂V/∂Λ", slopes.variance_per_arrival, da(|m| m.variance_s2), 1e-5);
        assert_close("∂E/∂B", slopes.mean_per_bandwidth, db(|m| m.mean_s), 1e-5);
        assert_close("∂V/∂B", slopes.variance_per_bandwidth, db(|m| m.variance_s2), 1e-5);
    }
}

// ---------------------------------------------------------------------------------------------
// Theorem 1

#[test]
fn bound_is_above_monte_carlo_order_statistics() {
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let mut chosen = Vec::new();
    for instance in 0..30 {
        let n = rng.random_range(2..=8);
        let k = rng.random_range(1..=n);
        let pi = random_marginals(&mut rng, n, k);
        let shifts: Vec<f64> = (0..n).map(|_| rng.random_range(0.0..1.0)).collect();
        let means: Vec<f64> = (0..n).map(|_| rng.random_range(0.1..2.0)).collect();
        let moments: Vec<DelayMoments> =
            (0..n).map(|j| DelayMoments { mean_s: shifts[j] + means[j], variance_s2: means[j] * means[j] }).collect();
        let samples = 200_000;
        let (mut sum, mut sum_sq) = (0.0, 0.0);
        let mut counts = vec![0u32; n];
        for _ in 0..samples {
            systematic_sample(&pi, rng.random::<f64>(), &mut chosen);
            assert_eq!(chosen.len(), k, "systematic sampling reads k racks");
            let mut slowest = 0.0f64;
            for &j in &chosen {
                counts[j] += 1;
                slowest = slowest.max(shifts[j] + exponential(&mut rng, means[j]));
            }
            sum += slowest;
            sum_sq += slowest * slowest;
        }
        for j in 0..n {
            let share = counts[j] as f64 / samples as f64;
            assert!((share - pi[j]).abs() < 0.01, "instance {instance}: marginal {share} vs π {}", pi[j]);
        }
        let mean = sum / samples as f64;
        let standard_error = ((sum_sq / samples as f64 - mean * mean) / samples as f64).sqrt();
        let z = optimal_z_s(&pi, &moments);
        let best = order_statistic_bound_s(z, &pi, &moments);
        assert!(best >= mean - 4.0 * standard_error, "instance {instance}: bound {best} < E[max] {mean}");
        for _ in 0..5 {
            let other = rng.random_range(-3.0..5.0);
            assert!(order_statistic_bound_s(other, &pi, &moments) >= mean - 4.0 * standard_error);
        }
        // Not vacuous: for k = n every rack is read and the bound is within the spread.
        assert!(best < mean + 3.0 * means.iter().cloned().fold(0.0, f64::max) * k as f64);
    }
}

#[test]
fn optimal_z_minimises_the_bound_and_solves_its_equation() {
    let mut rng = ChaCha8Rng::seed_from_u64(22);
    for _ in 0..300 {
        let n = rng.random_range(1..=10);
        let k = rng.random_range(1..=n);
        let pi = random_marginals(&mut rng, n, k);
        let moments: Vec<DelayMoments> = (0..n)
            .map(|_| DelayMoments { mean_s: rng.random_range(0.0..5.0), variance_s2: rng.random_range(0.0..4.0) })
            .collect();
        let z = optimal_z_s(&pi, &moments);
        let best = order_statistic_bound_s(z, &pi, &moments);
        for step in 0..200 {
            let other = -10.0 + step as f64 * 0.1;
            let value = order_statistic_bound_s(other, &pi, &moments);
            assert!(best <= value + 1e-9 * value.abs().max(1.0), "z* = {z}: {best} > {value} at z = {other}");
        }
        if k >= 2 {
            let equation: f64 = pi
                .iter()
                .zip(&moments)
                .map(|(p, m)| {
                    let h = m.mean_s - z;
                    let root = (h * h + m.variance_s2).sqrt();
                    if root == 0.0 { 0.5 * p } else { 0.5 * p * (1.0 + h / root) }
                })
                .sum();
            let smooth = moments.iter().all(|m| m.variance_s2 > 1e-3);
            if smooth {
                assert!((equation - 1.0).abs() < 1e-6, "Σ(π/2)(1 + H/√(H²+G)) = {equation} at z* = {z}");
            }
        } else {
            // k = 1: the bound falls to Σ π E as z → −∞, the exact mean of one random read.
            let expected: f64 = pi.iter().zip(&moments).map(|(p, m)| p * m.mean_s).sum();
            let spread = moments.iter().map(|m| m.variance_s2.sqrt()).fold(0.0, f64::max);
            assert!(best >= expected - 1e-9 && best <= expected + spread / 4e4 + 1e-9, "k = 1: {best} vs {expected}");
        }
    }
}

#[test]
fn auxiliary_f_does_not_cancel_far_below_the_mean() {
    for (h, g) in [(-1e8, 1.0), (-1e3, 1e-6), (0.0, 4.0), (3.0, 16.0), (-3.0, 16.0)] {
        let f = auxiliary_f(h, g);
        let naive = h + (h * h + g).sqrt();
        assert!(f > 0.0, "f({h}, {g}) = {f}");
        if h.abs() < 1e3 {
            assert_close("f", f, naive, 1e-12);
        } else {
            assert_close("f ≈ G/(2|H|)", f, g / (2.0 * h.abs()), 1e-6);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Hungarian method

fn brute_force(costs: &[f64], size: usize) -> Option<f64> {
    let mut permutation: Vec<usize> = (0..size).collect();
    let mut best: Option<f64> = None;
    // Heap's algorithm over all size! permutations.
    fn visit(costs: &[f64], size: usize, permutation: &mut Vec<usize>, depth: usize, best: &mut Option<f64>) {
        if depth == 1 || size == 0 {
            let cost: f64 = (0..size).map(|r| costs[r * size + permutation[r]]).sum();
            if cost.is_finite() && best.is_none_or(|b| cost < b) {
                *best = Some(cost);
            }
            return;
        }
        for i in 0..depth {
            visit(costs, size, permutation, depth - 1, best);
            if depth.is_multiple_of(2) { permutation.swap(i, depth - 1) } else { permutation.swap(0, depth - 1) }
        }
    }
    visit(costs, size, &mut permutation, size.max(1), &mut best);
    best
}

#[test]
fn hungarian_equals_brute_force() {
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    let mut checked = 0;
    let mut infeasible = 0;
    let cases: Vec<(usize, usize)> = (1..=7).map(|s| (s, 400)).chain([(6, 10_000)]).collect();
    for (size, count) in cases {
        for case in 0..count {
            let style = case % 4;
            let costs: Vec<f64> = (0..size * size)
                .map(|_| match style {
                    // Continuous costs, of both signs.
                    0 => rng.random_range(-100.0..100.0),
                    // Few distinct values: many ties.
                    1 => f64::from(rng.random_range(0..3u8)),
                    // Forbidden entries, sometimes enough to make it infeasible.
                    2 => {
                        if rng.random_bool(0.45) {
                            f64::INFINITY
                        } else {
                            f64::from(rng.random_range(0..10u8))
                        }
                    }
                    // Large and tiny magnitudes together.
                    _ => rng.random_range(0.0..1.0) * 10f64.powi(rng.random_range(-6..7)),
                })
                .collect();
            let want = brute_force(&costs, size);
            match (min_cost_assignment(&costs, size), want) {
                (Ok(assignment), Some(best)) => {
                    let mut seen = vec![false; size];
                    for &c in &assignment.columns {
                        assert!(!seen[c], "column {c} twice");
                        seen[c] = true;
                    }
                    let cost: f64 = (0..size).map(|r| costs[r * size + assignment.columns[r]]).sum();
                    assert_close("assignment cost", assignment.cost, cost, 1e-12);
                    assert!(
                        (cost - best).abs() <= 1e-9 * best.abs().max(1.0),
                        "size {size}: Hungarian {cost} vs brute force {best} on {costs:?}"
                    );
                }
                (Err(AssignmentError::Infeasible), None) => infeasible += 1,
                (got, want) => panic!("size {size}: Hungarian {got:?} vs brute force {want:?} on {costs:?}"),
            }
            checked += 1;
        }
    }
    assert!(checked > 12_000 && infeasible > 50, "{checked} checked, {infeasible} infeasible");
}

#[test]
fn hungarian_refuses_nan_and_negative_infinity() {
    assert!(matches!(
        min_cost_assignment(&[1.0, f64::NAN, 2.0, 3.0], 2),
        Err(AssignmentError::InvalidCost { row: 0, column: 1, .. })
    ));
    assert!(matches!(
        min_cost_assignment(&[1.0, 2.0, f64::NEG_INFINITY, 3.0], 2),
        Err(AssignmentError::InvalidCost { .. })
    ));
    assert!(matches!(min_cost_assignment(&[1.0, 2.0, 3.0], 2), Err(AssignmentError::NotSquare { .. })));
    let empty = min_cost_assignment(&[], 0).unwrap();
    assert!(empty.columns.is_empty() && empty.cost == 0.0);
}

// ---------------------------------------------------------------------------------------------
// The objective and its pieces

#[test]
fn objective_equals_the_per_file_bounds_with_shared_z() {
    let setup = Setup { concentration: 0.5, ..Setup::small() };
    let instance = setup.instance(&[1.0, 0.4]);
    let (solution, evaluation) = oblivious_baseline(&instance).unwrap();
    // Recompute (15) from (11) file by file, with the moments of each queue from Λ summed here.
    let (racks, classes, n) = (instance.rack_count, instance.class_count(), instance.code_n);
    let mut arrival = vec![0.0; racks * racks * classes];
    for (f, file) in instance.files.iter().enumerate() {
        for i in 0..racks {
            for (p, &j) in solution.file_racks(f).iter().enumerate() {
                arrival[(i * racks + j as usize) * classes + file.class] +=
                    file.request_rates_per_s[i] * solution.file_schedule(f, i)[p];
            }
        }
    }
    let total: f64 = instance.files.iter().flat_map(|f| f.request_rates_per_s.iter()).sum();
    let equal_inter = instance.aggregation_bandwidth_bps / (racks * (racks - 1) * classes) as f64;
    let intra = (instance.tor_bandwidth_bps - 2.0 * (racks - 1) as f64 * classes as f64 * equal_inter) / classes as f64;
    let mut by_class = vec![0.0; classes];
    for (f, file) in instance.files.iter().enumerate() {
        for i in 0..racks {
            let rate = file.request_rates_per_s[i];
            let z = solution.z_s[i * classes + file.class];
            let moments: Vec<DelayMoments> = solution
                .file_racks(f)
                .iter()
                .map(|&j| {
                    let j = j as usize;
                    let reserved = if i == j { intra } else { equal_inter };
                    delay_moments(
                        arrival[(i * racks + j) * classes + file.class],
                        reserved,
                        instance.aggregation_bandwidth_bps,
                        &instance.service,
                        &instance.connection[i * racks + j],
                    )
                })
                .collect();
            by_class[file.class] += rate / total * order_statistic_bound_s(z, solution.file_schedule(f, i), &moments);
        }
    }
    let objective: f64 = by_class.iter().zip(&instance.class_weights).map(|(t, c)| t * c).sum();
    assert_close("objective", evaluation.objective, objective, 1e-9);
    for (d, &bound) in by_class.iter().enumerate() {
        assert_close("T̄_d", evaluation.class_bounds_s[d], bound, 1e-9);
        // Each request's own z can only tighten the bound.
        assert!(evaluation.class_mean_bounds_per_file_z_s[d] <= evaluation.class_mean_bounds_s[d] * (1.0 + 1e-12));
    }
    let _ = n;
}

#[test]
fn weight_gradient_matches_finite_differences() {
    let setup = Setup { concentration: 0.3, ..Setup::small() };
    let instance = setup.instance(&[1.0, 0.5]);
    let model = Model::new(&instance);
    let mut solution = initial_solution(&instance);
    // Leave the equal point so that the two ends of each inter-rack queue differ.
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    let sum_before: f64 = solution.inter_weights.iter().sum();
    for w in solution.inter_weights.iter_mut().filter(|w| **w > 0.0) {
        *w *= rng.random_range(0.8..1.2);
    }
    let sum_after: f64 = solution.inter_weights.iter().sum();
    solution.inter_weights.iter_mut().for_each(|w| *w *= sum_before / sum_after);
    solution.intra_shares = (0..instance.rack_count).flat_map(|_| [0.6, 0.4]).collect();
    let loads = model.loads(&solution);
    model.optimise_z(&loads, &mut solution.z_s);
    let gradient =
        weights::inter_weight_gradient(&model, &loads, &solution.inter_weights, &solution.intra_shares, &solution.z_s);
    let objective_at = |weights: &[f64]| {
        let mut trial = solution.clone();
        trial.inter_weights.copy_from_slice(weights);
        model.objective(&model.loads(&trial), &solution.z_s)
    };
    let mut checked = 0;
    for q in (0..gradient.len()).filter(|&q| solution.inter_weights[q] > 0.0).step_by(3) {
        let h = 1e-6 * solution.inter_weights[q];
        let mut plus = solution.inter_weights.clone();
        plus[q] += h;
        let mut minus = solution.inter_weights.clone();
        minus[q] -= h;
        let numeric = (objective_at(&plus) - objective_at(&minus)) / (2.0 * h);
        assert!(
            (gradient[q] - numeric).abs() <= 1e-4 * numeric.abs().max(1e-3),
            "queue {q}: {} vs {numeric}",
            gradient[q]
        );
        checked += 1;
    }
    assert!(checked > 5);
}

#[test]
fn sub_steps_end_at_their_kkt_points() {
    let setup = Setup { concentration: 0.6, ..Setup::small() };
    let instance = setup.instance(&[1.0, 0.5]);
    let model = Model::new(&instance);
    let (mut solution, _) = oblivious_baseline(&instance).unwrap();
    let mut loads = model.loads(&solution);
    let z = solution.z_s.clone();
    let limits = simplex::PairLimits { steps_max: 10_000, line_search_iterations_max: 60, violation_relative: 1e-9 };
    // π: every (file, client) block, after enough sweeps that later blocks no longer move
    // earlier ones' loads much: no pair (to below 1, from above 0) with a worse marginal.
    for _ in 0..30 {
        scheduling::improve_schedule(&model, &mut solution, &mut loads, &z, &limits);
    }
    let mut blocks = 0;
    for (f, file) in instance.files.iter().enumerate() {
        for &client in model.file_clients(f) {
            let client = client as usize;
            let rate = file.request_rates_per_s[client];
            let pi = solution.file_schedule(f, client);
            let marginal: Vec<f64> = solution
                .file_racks(f)
                .iter()
                .map(|&j| {
                    let q = model.queue(client, j as usize, file.class);
                    rate * model.term_slopes(q, loads.arrival[q], loads.reserved[q], &z).per_arrival
                })
                .collect();
            let lowest_open = (0..pi.len()).filter(|&p| pi[p] < 1.0).map(|p| marginal[p]).fold(f64::INFINITY, f64::min);
            let highest_used =
                (0..pi.len()).filter(|&p| pi[p] > 0.0).map(|p| marginal[p]).fold(f64::NEG_INFINITY, f64::max);
            assert!(
                highest_used - lowest_open <= 1e-3 * highest_used.abs(),
                "file {f}, client {client}: {marginal:?} at π {pi:?}"
            );
            blocks += 1;
        }
    }
    assert!(blocks > 50);
    // W: with no cap binding, equal marginals on every queue that holds weight, none lower outside.
    weights::improve_inter_weights(&model, &loads, &mut solution.inter_weights, &solution.intra_shares, &z, &limits);
    model.fill_reserved(&solution, &mut loads.reserved, &mut loads.intra_bandwidth);
    let gradient = weights::inter_weight_gradient(&model, &loads, &solution.inter_weights, &solution.intra_shares, &z);
    let inter: Vec<usize> = (0..gradient.len()).filter(|&q| model.queue_parts(q).0 != model.queue_parts(q).1).collect();
    let cap = instance.queue_bandwidth_max_bps / instance.aggregation_bandwidth_bps;
    let lowest_open =
        inter.iter().filter(|&&q| solution.inter_weights[q] < cap).map(|&q| gradient[q]).fold(f64::INFINITY, f64::min);
    let highest_used = inter
        .iter()
        .filter(|&&q| solution.inter_weights[q] > 0.0)
        .map(|&q| gradient[q])
        .fold(f64::NEG_INFINITY, f64::max);
    assert!(
        highest_used - lowest_open <= 1e-6 * highest_used.abs(),
        "W marginals from {lowest_open} to {highest_used}"
    );
    check_feasible(&instance, &solution).unwrap();
}

// ---------------------------------------------------------------------------------------------
// The alternation

/// Every sub-step and iteration of the trace is at or below the one before it.
fn assert_monotone(outcome: &JlwoOutcome) {
    let mut previous = outcome.initial_objective;
    for (t, step) in outcome.trace.iter().enumerate() {
        for value in [
            step.objective_after_inter_weights,
            step.objective_after_intra_shares,
            step.objective_after_schedule,
            step.objective_after_placement,
            step.objective,
        ] {
            assert!(value <= previous, "iteration {t}: {value} > {previous}");
            previous = value;
        }
    }
}

#[test]
fn jlwo_never_rises_and_beats_the_baseline_on_concentrated_access() {
    let setup = Setup { concentration: 0.8, total_rate_per_s: 2.5, ..Setup::small() };
    let instance = setup.instance(&[1.0, 0.4]);
    let (_, baseline) = oblivious_baseline(&instance).unwrap();
    let limits = JlwoLimits { tolerance_relative: 1e-4, ..JlwoLimits::default() };
    let outcome = solve(&instance, &limits, None).unwrap();
    assert_monotone(&outcome);
    assert_close("O⁰ is the baseline", outcome.initial_objective, baseline.objective, 1e-12);
    assert!(outcome.converged && outcome.iterations >= 2, "{} iterations", outcome.iterations);
    assert!(outcome.trace.iter().all(|t| t.rejected_sub_steps == 0), "{:?}", outcome.trace);
    check_feasible(&instance, &outcome.solution).unwrap();
    let gain = outcome.evaluation.objective / baseline.objective;
    assert!(gain < 0.8, "JLWO {} vs baseline {}", outcome.evaluation.objective, baseline.objective);
    assert!(outcome.trace.iter().any(|t| t.files_moved > 0), "placement never moved a file");
    // Class 1 (C = 1) is served faster than class 2 (C = 0.4).
    let means = &outcome.evaluation.class_mean_bounds_s;
    assert!(means[0] < means[1], "{means:?}");
    // The reported objective is the evaluation of the returned solution.
    assert_close(
        "evaluation",
        evaluate(&instance, &outcome.solution).unwrap().objective,
        outcome.evaluation.objective,
        1e-12,
    );
}

#[test]
fn symmetric_classes_with_equal_weights_get_equal_bounds() {
    // Class 1's files are class 0's, copied: same racks, same rates.
    let setup = Setup { concentration: 0.5, classes: 1, files_per_class: 16, total_rate_per_s: 1.5, ..Setup::small() };
    let mut instance = setup.instance(&[1.0]);
    let copies: Vec<FileDemand> = instance.files.iter().map(|f| FileDemand { class: 1, ..f.clone() }).collect();
    instance.files.extend(copies);
    instance.class_weights = vec![1.0, 1.0];
    let outcome = solve(&instance, &JlwoLimits { tolerance_relative: 1e-4, ..JlwoLimits::default() }, None).unwrap();
    assert_monotone(&outcome);
    let means = &outcome.evaluation.class_mean_bounds_s;
    assert!(outcome.evaluation.objective < outcome.initial_objective * 0.98);
    assert_close("class 1 vs class 0", means[1], means[0], 0.005);

    // The same instance with C_2 = 0.3: class 2 pays.
    instance.class_weights = vec![1.0, 0.3];
    let outcome = solve(&instance, &JlwoLimits { tolerance_relative: 1e-4, ..JlwoLimits::default() }, None).unwrap();
    let means = &outcome.evaluation.class_mean_bounds_s;
    assert!(means[1] > 1.05 * means[0], "{means:?}");

    // C_2 = 0: class 2 counts for nothing, yet every point kept stays feasible (no class-2 queue
    // driven to saturation), and class 2 is slowest of all.
    instance.class_weights = vec![1.0, 0.0];
    let outcome = solve(&instance, &JlwoLimits { tolerance_relative: 1e-4, ..JlwoLimits::default() }, None).unwrap();
    check_feasible(&instance, &outcome.solution).unwrap();
    let zero = &outcome.evaluation.class_mean_bounds_s;
    assert!(zero[1].is_finite() && zero[1] > means[1] && zero[0] <= means[0] * 1.001, "{zero:?} against {means:?}");
}

#[test]
fn warm_start_from_a_solution_stops_at_once() {
    let setup = Setup { concentration: 0.5, ..Setup::small() };
    let instance = setup.instance(&[1.0, 0.4]);
    let limits = JlwoLimits { tolerance_relative: 1e-3, ..JlwoLimits::default() };
    let first = solve(&instance, &limits, None).unwrap();
    let second = solve(&instance, &limits, Some(&first.solution)).unwrap();
    assert!(second.warm_started && !first.warm_started);
    assert!(second.iterations <= 2, "{} iterations from a converged point", second.iterations);
    assert!(second.initial_objective <= first.evaluation.objective * (1.0 + 1e-12));
    assert_monotone(&second);
    // A warm start of the wrong shape is ignored, not trusted.
    let mut wrong = first.solution.clone();
    wrong.schedule.pop();
    let cold = solve(&instance, &limits, Some(&wrong)).unwrap();
    assert!(!cold.warm_started);
    assert_close("cold again", cold.initial_objective, first.initial_objective, 1e-12);
}

#[test]
fn cold_start_names_the_saturated_queue() {
    // Everything requested from rack 0: its inter-rack queues saturate at equal weights.
    let setup = Setup { concentration: 1.0, total_rate_per_s: 40.0, ..Setup::small() };
    let instance = setup.instance(&[1.0, 1.0]);
    match solve(&instance, &JlwoLimits::default(), None) {
        Err(JlwoError::Saturated { client_rack: 0, utilisation, .. }) => assert!(utilisation >= 1.0),
        other => panic!("expected rack 0 to saturate, got {other:?}"),
    }
    let (_, baseline) = oblivious_baseline(&instance).unwrap();
    assert_eq!(baseline.objective, f64::INFINITY);
    // A ToR smaller than the inter-rack reservations through it.
    let mut small_tor = Setup::small().instance(&[1.0, 1.0]);
    small_tor.tor_bandwidth_bps = 1e9;
    assert!(matches!(solve(&small_tor, &JlwoLimits::default(), None), Err(JlwoError::NoIntraRackBandwidth { .. })));
}

#[test]
fn placement_step_leaves_no_better_placement_for_the_last_file() {
    let setup = Setup { concentration: 0.6, racks: 5, code_n: 3, files_per_class: 6, ..Setup::small() };
    let instance = setup.instance(&[1.0, 0.7]);
    let model = Model::new(&instance);
    let (mut solution, _) = oblivious_baseline(&instance).unwrap();
    let mut loads = model.loads(&solution);
    let z = solution.z_s.clone();
    let moved = placement::improve_placement(&model, &mut solution, &mut loads, &z);
    assert!(moved > 0);
    let fresh = model.loads(&solution);
    for (running, recomputed) in loads.arrival.iter().zip(&fresh.arrival) {
        assert!((running - recomputed).abs() <= 1e-12 * recomputed.max(1.0), "running Λ {running} vs {recomputed}");
    }
    let best = model.objective(&loads, &z);
    let last = instance.files.len() - 1;
    let n = instance.code_n;
    let mut tried = 0;
    for a in 0..5u32 {
        for b in (0..5u32).filter(|&b| b != a) {
            for c in (0..5u32).filter(|&c| c != a && c != b) {
                let mut trial = solution.clone();
                trial.racks[last * n..(last + 1) * n].copy_from_slice(&[a, b, c]);
                let value = model.objective(&model.loads(&trial), &z);
                assert!(value >= best * (1.0 - 1e-12), "racks {:?} give {value} < {best}", [a, b, c]);
                tried += 1;
            }
        }
    }
    assert_eq!(tried, 60);
}

/// Paper scale (§V-C): N = 10, (7,4), 2 classes, 1000 files per class, requests from every rack,
/// run to the paper's ε = 0.01 and on to ε = 1e-4.
/// `cargo test -p optimize --release -- --ignored paper_scale --nocapture` prints the traces.
#[test]
#[ignore = "paper scale: run in release"]
fn paper_scale_converges_within_the_cap() {
    let instance = paper_scale_instance(0.3, 1);
    let (_, baseline) = oblivious_baseline(&instance).unwrap();
    let mut objectives = Vec::new();
    for tolerance in [0.01, 1e-4] {
        let limits = JlwoLimits { tolerance_relative: tolerance, ..JlwoLimits::default() };
        let outcome = solve(&instance, &limits, None).unwrap();
        assert_monotone(&outcome);
        check_feasible(&instance, &outcome.solution).unwrap();
        println!("ε = {tolerance}:");
        for (t, step) in outcome.trace.iter().enumerate() {
            println!(
                "  iteration {t}: O/O⁰ = {:.5} (after W {:.5}, w {:.5}, π {:.5}, S {:.5}), moved {}, pair steps {}",
                step.objective / outcome.initial_objective,
                step.objective_after_inter_weights / outcome.initial_objective,
                step.objective_after_intra_shares / outcome.initial_objective,
                step.objective_after_schedule / outcome.initial_objective,
                step.objective_after_placement / outcome.initial_objective,
                step.files_moved,
                step.pair_steps
            );
        }
        println!(
            "  baseline {:.4} s, JLWO {:.4} s, class means {:?} (per-file z {:?}), ρ max {:.3}",
            baseline.objective,
            outcome.evaluation.objective,
            outcome.evaluation.class_mean_bounds_s,
            outcome.evaluation.class_mean_bounds_per_file_z_s,
            outcome.evaluation.utilisation_max
        );
        assert!(outcome.converged, "{} iterations", outcome.iterations);
        assert!(outcome.evaluation.objective < baseline.objective);
        let means = &outcome.evaluation.class_mean_bounds_s;
        assert!(means[0] < means[1], "C = (1, 0.3): class 1 faster, {means:?}");
        objectives.push(outcome.evaluation.objective);
    }
    assert!(objectives[1] <= objectives[0]);
}

#[test]
fn a_new_file_goes_where_its_class_adds_least_to_the_objective() {
    // The oblivious point reserves bandwidth for every queue, so every set of racks has a cost
    // (after JLWO, queues nobody reads have none: the next test).
    let setup = Setup { concentration: 0.5, total_rate_per_s: 2.5, ..Setup::small() };
    let instance = setup.instance(&[1.0, 0.4]);
    let (solution, _) = oblivious_baseline(&instance).unwrap();
    let (racks, n, k) = (instance.rack_count, instance.code_n, instance.code_k);
    let mut chosen_by_class = Vec::new();
    for class in 0..2 {
        // The class's mean file, read from every rack with uniform π, as a new file is.
        let of_class: Vec<&FileDemand> = instance.files.iter().filter(|f| f.class == class).collect();
        let rates: Vec<f64> = (0..racks)
            .map(|i| of_class.iter().map(|f| f.request_rates_per_s[i]).sum::<f64>() / of_class.len() as f64)
            .collect();
        let chosen = place_new_file(&instance, &solution, class, &rates).unwrap();
        assert_eq!(chosen.len(), n);
        // Every set of n racks, the file added with uniform π: the chosen set's objective is least.
        let objective_with = |set: &[u32]| {
            let mut grown = instance.clone();
            grown.files.push(FileDemand { class, racks: set.to_vec(), request_rates_per_s: rates.clone() });
            let mut grown_solution = solution.clone();
            grown_solution.racks.extend_from_slice(set);
            grown_solution.schedule.extend(std::iter::repeat_n(k as f64 / n as f64, racks * n));
            evaluate(&grown, &grown_solution).map_or(f64::INFINITY, |evaluation| evaluation.objective)
        };
        let best = objective_with(&chosen);
        assert!(best.is_finite(), "class {class}: {chosen:?}");
        let mut sets = 0;
        for mask in 0u32..(1 << racks) {
            if mask.count_ones() as usize != n {
                continue;
            }
            let set: Vec<u32> = (0..racks as u32).filter(|j| mask & (1 << j) != 0).collect();
            let objective = objective_with(&set);
            assert!(
                best <= objective * (1.0 + 1e-12),
                "class {class}: {chosen:?} ({best}) beaten by {set:?} ({objective})"
            );
            sets += 1;
        }
        assert_eq!(sets, 10, "C(5, 3) sets tried");
        chosen_by_class.push(chosen);
    }
    assert_ne!(chosen_by_class[0], chosen_by_class[1], "each class where its own queues have room");
    assert!(place_new_file(&instance, &solution, 2, &[0.0; 5]).is_err(), "no class 2");
    assert!(place_new_file(&instance, &solution, 0, &[1.0; 4]).is_err(), "a rate per rack");
    assert!(place_new_file(&instance, &solution, 0, &[f64::NAN; 5]).is_err());
}

#[test]
fn a_new_file_read_where_jlwo_reserved_nothing_goes_to_the_least_loaded_racks_after_the_costed_ones() {
    // Concentrated on rack 0: JLWO moves each class's files to few racks and reserves nothing
    // from rack 0 towards the others in that class.
    let setup = Setup { concentration: 0.8, total_rate_per_s: 2.5, ..Setup::small() };
    let instance = setup.instance(&[1.0, 0.4]);
    let outcome = solve(&instance, &JlwoLimits { tolerance_relative: 1e-4, ..JlwoLimits::default() }, None).unwrap();
    let mut rates = vec![0.0; instance.rack_count];
    rates[0] = 0.1;
    let evaluation = &outcome.evaluation;
    let classes = instance.class_count();
    // Rack j has a cost if queue (0, j, class 0) stays stable with the file's 2/3 of 0.1/s.
    let stable = |j: usize| {
        let queue = j * classes;
        let arrival = evaluation.arrival_per_s[queue] + 0.1 * 2.0 / 3.0;
        utilisation(
            arrival,
            evaluation.reserved_bps[queue],
            instance.aggregation_bandwidth_bps,
            instance.service.mean_s,
        ) < 1.0
    };
    let costed: Vec<u32> = (0..5u32).filter(|&j| stable(j as usize)).collect();
    assert!(costed.len() < instance.code_n, "the case needs racks without class-0 bandwidth from rack 0: {costed:?}");
    let chosen = place_new_file(&instance, &outcome.solution, 0, &rates).unwrap();
    assert_eq!(chosen.len(), instance.code_n);
    let mut head = chosen[..costed.len()].to_vec();
    head.sort_unstable();
    assert_eq!(head, costed, "the racks with a finite cost first: {chosen:?}");
    let load = |j: u32| -> f64 { (0..5).map(|i| evaluation.arrival_per_s[(i * 5 + j as usize) * classes]).sum() };
    let rest: Vec<f64> = chosen[costed.len()..].iter().map(|&j| load(j)).collect();
    let others: Vec<u32> = (0..5u32).filter(|j| !chosen.contains(j)).collect();
    for &j in &others {
        assert!(rest.iter().all(|&l| l <= load(j)), "{chosen:?} took a busier rack than {j}");
    }
    let mut distinct = chosen.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), instance.code_n, "distinct racks");
}
