//! JLWO at the paper's §V-C scale: N = 10 racks, (7,4), 2 classes, 1000 files per class,
//! requests from every rack, C = (1, 0.3); a full run to ε = 0.01 (the paper's) and to ε = 1e-4,
//! the oblivious baseline's evaluation, and one Hungarian solve of a 10×10 placement matrix.
//!
//! The topology is consistent rather than the published one (B = 96 Gbit/s with b = 792 Mbit/s
//! leaves b_eff < 0 under (3)): B = 40, b = 9.6, port cap 1 Gbit/s (the same instance as the
//! ignored test `paper_scale_converges_within_the_cap`).

// criterion_group! defines an undocumented public function; nothing here is API.
#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use optimize::jlwo::{
    ConnectionDelay, FileDemand, Instance, JlwoLimits, ServiceMoments, min_cost_assignment, oblivious_baseline, solve,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn paper_scale(seed: u64) -> Instance {
    let racks = 10;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let files_per_class = 1000;
    let total_rate = 12.0;
    let files = (0..2 * files_per_class)
        .map(|f| {
            let mut all: Vec<u32> = (0..racks as u32).collect();
            for i in 0..7 {
                let j = rng.random_range(i..racks);
                all.swap(i, j);
            }
            all.truncate(7);
            let weights: Vec<f64> = (0..racks).map(|_| rng.random_range(0.0..1.0f64).powi(3)).collect();
            let sum: f64 = weights.iter().sum();
            let file_rate = total_rate / (2 * files_per_class) as f64;
            FileDemand {
                class: f % 2,
                racks: all,
                request_rates_per_s: weights.iter().map(|w| file_rate * w / sum).collect(),
            }
        })
        .collect();
    Instance {
        rack_count: racks,
        aggregation_bandwidth_bps: 40e9,
        tor_bandwidth_bps: 9.6e9,
        queue_bandwidth_max_bps: 1e9,
        class_weights: vec![1.0, 0.3],
        service: ServiceMoments::shifted_exponential(0.004, 0.001),
        connection: Instance::connection_intra_inter(
            racks,
            ConnectionDelay { mean_s: 0.0005, variance_s2: 0.0005f64.powi(2) },
            ConnectionDelay { mean_s: 0.002, variance_s2: 0.002f64.powi(2) },
        ),
        code_n: 7,
        code_k: 4,
        files,
    }
}

fn bench(c: &mut Criterion) {
    let instance = paper_scale(1);
    let mut group = c.benchmark_group("jlwo paper scale");
    group.sample_size(10);
    for tolerance in [0.01, 1e-4] {
        let limits = JlwoLimits { tolerance_relative: tolerance, ..JlwoLimits::default() };
        let outcome = solve(&instance, &limits, None).unwrap();
        eprintln!(
            "ε = {tolerance}: {} iterations, converged {}, O/O⁰ = {:.4}",
            outcome.iterations,
            outcome.converged,
            outcome.evaluation.objective / outcome.initial_objective
        );
        group
            .bench_function(format!("solve ε = {tolerance}"), |b| b.iter(|| solve(&instance, &limits, None).unwrap()));
    }
    group.bench_function("oblivious baseline", |b| b.iter(|| oblivious_baseline(&instance).unwrap()));
    group.finish();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let costs: Vec<f64> = (0..100).map(|_| rng.random_range(0.0..1.0)).collect();
    c.bench_function("hungarian 10x10", |b| b.iter(|| min_cost_assignment(&costs, 10).unwrap()));
}

criterion_group!(benches, bench);
criterion_main!(benches);
