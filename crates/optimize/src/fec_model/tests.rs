//! The model against the paper's worked quantities (the published 1 MB read and write fits,
//! k = 3, L = 16) and against its structural claims on a grid of parameters.

use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The paper's 1 MB read fit (section VI-A): Δ = 61 ms, mean 140 ms.
fn read_class(admission: Admission) -> FecClass {
    FecClass { delay: DelayModel::new(0.061, 0.079).unwrap(), k: 3, slots: 16, admission }
}

/// The paper's 1 MB write fit: Δ = 114 ms, mean 140 ms.
fn write_class() -> FecClass {
    FecClass { delay: DelayModel::new(0.114, 0.026).unwrap(), k: 3, slots: 16, admission: Admission::NonBlocking }
}

fn assert_close(what: &str, got: f64, want: f64, relative: f64) {
    assert!((got - want).abs() <= relative * want.abs(), "{what}: got {got}, want {want} ± {:.2} %", relative * 100.0);
}

#[test]
fn usage_capacity_and_service_delay_match_the_closed_forms() {
    let read = read_class(Admission::NonBlocking);
    // u(n) = nΔ + k/μ; C̃_nb = L/u(n); D_s = Δ + Σ 1/(jμ) over the k slowest-to-finish phases.
    for (n, usage, capacity, service_ms) in
        [(3, 0.420, 38.10, 205.8), (4, 0.481, 33.26, 146.6), (5, 0.542, 29.52, 122.9), (6, 0.603, 26.53, 109.7)]
    {
        assert_close(&format!("u({n})"), read.usage_s(n), usage, 0.001);
        assert_close(&format!("C({n})"), read.capacity_per_s(n), capacity, 0.001);
        assert_close(&format!("D_s({n})"), read.service_delay_s(n) * 1e3, service_ms, 0.001);
    }
    // The paper's Fig. 5 prose at low load: (3,3) about 200 ms, (4,3) under 150 ms.
    assert!((0.19..0.22).contains(&read.delay_s(3, 0.5)) && read.delay_s(4, 0.5) < 0.150);
    let blocking = read_class(Admission::Blocking);
    assert_close("blocking C(6)", blocking.capacity_per_s(6), (16.0 - 2.5) / 0.603, 0.001);
    // P-K with Erlang-n service of mean 1/C̃: λ(n+1)/(2nC̃(C̃−λ)).
    let (c, rate) = (read.capacity_per_s(4), 20.0);
    assert_close("D_q", read.queueing_delay_s(4, rate), rate * 5.0 / (8.0 * c * (c - rate)), 1e-12);
    assert_eq!(read.queueing_delay_s(4, c), f64::INFINITY);
}

#[test]
fn thresholds_for_the_published_read_and_write_fits() {
    let read = read_class(Admission::NonBlocking).thresholds(6);
    let rates: Vec<f64> = read.crossings.iter().map(|c| c.rate_per_s).collect();
    let backlogs: Vec<f64> = read.crossings.iter().map(|c| c.backlog).collect();
    for (got, want) in rates.iter().zip([28.44, 22.16, 17.56]) {
        assert_close("read λ_n", *got, want, 0.005);
    }
    for (got, want) in backlogs.iter().zip([1.466, 0.831, 0.524]) {
        assert_close("read Q_n", *got, want, 0.005);
    }
    let write = write_class().thresholds(6);
    for (crossing, (rate, backlog)) in write.crossings.iter().zip([(19.22, 0.342), (11.25, 0.141), (7.05, 0.068)]) {
        assert_close("write λ_n", crossing.rate_per_s, rate, 0.005);
        assert_close("write Q_n", crossing.backlog, backlog, 0.01);
    }
    let blocking = read_class(Admission::Blocking).thresholds(6);
    for (crossing, backlog) in blocking.crossings.iter().zip([1.111, 0.573, 0.321]) {
        assert_close("blocking read Q_n", crossing.backlog, backlog, 0.005);
    }
    // At each crossing the two codes predict the same delay.
    let class = read_class(Admission::NonBlocking);
    for crossing in &read.crossings {
        let (n, rate) = (crossing.n, crossing.rate_per_s);
        assert_close("equal delays", class.delay_s(n, rate), class.delay_s(n + 1, rate), 1e-9);
    }
}

#[test]
fn bafec_picks_codes_by_backlog() {
    let thresholds = read_class(Admission::NonBlocking).thresholds(6);
    // Q_3 ≈ 1.466, Q_4 ≈ 0.831, Q_5 ≈ 0.524.
    assert_eq!(thresholds.code_length(0.0), 6);
    assert_eq!(thresholds.code_length(0.6), 5);
    assert_eq!(thresholds.code_length(1.0), 4);
    assert_eq!(thresholds.code_length(1.466 + 0.01), 3);
    assert_eq!(thresholds.code_length(100.0), 3);
    // With whole requests waiting the table collapses to {0 → 6, 1 → 4, ≥ 2 → 3}.
    let by_count: Vec<usize> = (0..4).map(|q| thresholds.code_length(q as f64)).collect();
    assert_eq!(by_count, vec![6, 4, 3, 3]);
    let uncoded = read_class(Admission::NonBlocking).thresholds(3);
    assert!(uncoded.crossings.is_empty() && uncoded.code_length(0.0) == 3);
}

#[test]
fn thresholds_decrease_in_n_across_a_grid_of_parameters() {
    let mut cases = 0;
    for k in 2..=6 {
        for slots in [8, 16, 32, 64, 128] {
            for step in 0..18 {
                // Δμ from 0.05 to 20, evenly in log scale.
                let shift_times_rate = 0.05 * (400.0f64).powf(step as f64 / 17.0);
                let delay = DelayModel::new(shift_times_rate * 0.1, 0.1).unwrap();
                for admission in [Admission::Blocking, Admission::NonBlocking] {
                    let n_max = 2 * k;
                    if admission == Admission::Blocking && n_max > slots {
                        continue;
                    }
                    let thresholds = FecClass { delay, k, slots, admission }.thresholds(n_max);
                    assert!(thresholds.strictly_decreasing(), "k {k} L {slots} Δμ {shift_times_rate}: {thresholds:?}");
                    assert!(thresholds.crossings.iter().all(|c| c.backlog > 0.0 && c.rate_per_s > 0.0));
                    cases += 1;
                }
            }
        }
    }
    assert!(cases >= 850, "{cases}");
}

#[test]
fn the_fit_recovers_a_shifted_exponential() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let (shift, mean) = (0.061, 0.079);
    let delays: Vec<f64> = (0..200_000).map(|_| shift - mean * (1.0 - rng.random::<f64>()).ln()).collect();
    let fit = DelayModel::fit(&delays).unwrap();
    assert_eq!(fit.samples_dropped, 200);
    assert_eq!(fit.samples_used, 199_800);
    assert!(!fit.shift_clamped);
    // Dropping the slowest 0.1 % trims the exponential's std by about 1 %, as in the paper.
    assert_close("Δ", fit.model.shift_s, shift, 0.03);
    assert_close("1/μ", fit.model.exp_mean_s, mean, 0.03);
}

#[test]
fn the_fit_clamps_a_negative_shift_and_refuses_bad_samples() {
    // A heavy tail: std above the mean, so mean − std < 0.
    let mut delays = vec![0.001; 900];
    delays.extend(std::iter::repeat_n(1.0, 100));
    let fit = DelayModel::fit(&delays).unwrap();
    assert!(fit.shift_clamped && fit.model.shift_s == 0.0 && fit.model.exp_mean_s > 0.0);
    assert!(DelayModel::fit(&[]).is_none());
    assert!(DelayModel::fit(&[0.1]).is_none());
    assert!(DelayModel::fit(&[0.1, 0.1, 0.1]).is_none(), "no spread");
    assert!(DelayModel::fit(&[0.1, f64::NAN]).is_none());
    assert!(DelayModel::fit(&[0.1, -0.2]).is_none());
    assert!(DelayModel::new(-0.1, 0.1).is_none() && DelayModel::new(0.1, 0.0).is_none());
}

/// Delays of a first-k-of-n race: per request n draws, the k fastest finished, the others
/// censored at the k-th.
fn raced_delays(rng: &mut ChaCha8Rng, model: DelayModel, n: usize, k: usize, requests: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut finished, mut censored) = (Vec::new(), Vec::new());
    for _ in 0..requests {
        let mut draws: Vec<f64> =
            (0..n).map(|_| model.shift_s - model.exp_mean_s * (1.0 - rng.random::<f64>()).ln()).collect();
        draws.sort_by(f64::total_cmp);
        let kth = draws[k - 1];
        finished.extend_from_slice(&draws[..k]);
        censored.extend(std::iter::repeat_n(kth, n - k));
    }
    (finished, censored)
}

#[test]
fn the_censored_fit_recovers_a_raced_shifted_exponential() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let model = DelayModel::new(0.061, 0.079).unwrap();
    for (n, k) in [(3, 3), (4, 3), (6, 3), (9, 6)] {
        let (finished, censored) = raced_delays(&mut rng, model, n, k, 40_000);
        let fit = DelayModel::fit_censored(&finished, &censored).unwrap();
        assert_eq!(fit.samples_censored, censored.len());
        assert_close(&format!("({n},{k}) Δ"), fit.model.shift_s, model.shift_s, 0.02);
        assert_close(&format!("({n},{k}) 1/μ"), fit.model.exp_mean_s, model.exp_mean_s, 0.03);
        if n > k {
            // The paper's fit over the finished alone: the cancelled were the slow ones.
            let naive = DelayModel::fit(&finished).unwrap();
            assert!(naive.model.exp_mean_s < 0.8 * model.exp_mean_s, "({n},{k}): {naive:?}");
        }
    }
}

#[test]
fn the_censored_fit_refuses_bad_samples() {
    assert!(DelayModel::fit_censored(&[0.1], &[]).is_none());
    assert!(DelayModel::fit_censored(&[0.1, 0.1], &[0.05]).is_none(), "no spread above Δ");
    assert!(DelayModel::fit_censored(&[0.1, 0.2], &[f64::NAN]).is_none());
    assert!(DelayModel::fit_censored(&[0.1, -0.2], &[]).is_none());
    let fit = DelayModel::fit_censored(&[0.1, 0.3], &[0.5]).unwrap();
    assert_close("1/μ", fit.model.exp_mean_s, (0.2 + 0.4) / 2.0, 1e-9);
}
