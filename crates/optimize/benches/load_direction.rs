//! Problem (1) at the paper's scale: 2004 partitions on 90 nodes, with the
//! paper's two options per partition (normal + one degraded combination)
//! and with every RS(6,3) combination (29 options).

// criterion_group! defines an undocumented public function; nothing here is API.
#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use optimize::{LoadDirectionProblem, Objective, SolveLimits};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn paper_scale(options_per_partition: usize) -> LoadDirectionProblem {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let nodes = 90;
    let queue: Vec<f64> = (0..nodes).map(|_| rng.random_range(0.0..4e6)).collect();
    let mut problem = LoadDirectionProblem::new(&queue, &vec![1.0; nodes]);
    for _ in 0..334 {
        let mut stripe: Vec<u32> = (0..nodes as u32).collect();
        for i in 0..9 {
            let j = rng.random_range(i..nodes);
            stripe.swap(i, j);
        }
        for unit in 0..6 {
            let others: Vec<u32> = (0..9).filter(|&u| u != unit).map(|u| stripe[u]).collect();
            let mut options = vec![vec![stripe[unit]]];
            // 6-subsets of the 8 others: drop two.
            'outer: for a in 0..8 {
                for b in a + 1..8 {
                    if options.len() == options_per_partition {
                        break 'outer;
                    }
                    options
                        .push(others.iter().enumerate().filter(|(i, _)| *i != a && *i != b).map(|(_, n)| *n).collect());
                }
            }
            // Zipf-like demand: a few hot partitions.
            let demand = 1e7 / (1.0 + rng.random_range(0.0f64..2004.0)).powf(1.2);
            problem.add_partition(demand, options.iter().map(|o| o.as_slice()));
        }
    }
    problem
}

fn bench(c: &mut Criterion) {
    let two = paper_scale(2);
    let all = paper_scale(29);
    c.bench_function("l2 2004x90 two options", |b| b.iter(|| two.solve(Objective::L2, SolveLimits::default())));
    c.bench_function("l2 2004x90 29 options", |b| b.iter(|| all.solve(Objective::L2, SolveLimits::default())));
    c.bench_function("linf 2004x90 two options", |b| b.iter(|| two.solve(Objective::LInf, SolveLimits::default())));
}

criterion_group!(benches, bench);
criterion_main!(benches);
