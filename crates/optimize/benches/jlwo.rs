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
use optimize::jlwo::{JlwoLimits, min_cost_assignment, oblivious_baseline, paper_scale_instance, solve};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn bench(c: &mut Criterion) {
    let instance = paper_scale_instance(0.3, 1);
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
