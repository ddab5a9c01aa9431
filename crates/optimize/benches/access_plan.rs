//! EC-Store's access planning at the paper's scale: requests of 1, 10 and 50 blocks of RS(6,3)
//! (need 6, or 7 with late binding) placed at random on 32 sites with random loads (overheads of
//! 0.2–2 ms, media cost of 1 GB/s); the exact branch and bound beside the greedy plan. The paper's
//! SCIP took "tens of milliseconds", which is why it solves off the read path.

// criterion_group! defines an undocumented public function; nothing here is API.
#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use optimize::access_plan::{
    AccessInstance, BlockRead, DEFAULT_NODE_BUDGET, GreedyFill, SiteCost, greedy, solve_exact,
};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn request(blocks: usize, need: usize) -> AccessInstance {
    let mut rng = ChaCha8Rng::seed_from_u64(blocks as u64);
    let site_count = 32;
    let sites = (0..site_count).map(|_| SiteCost { overhead: rng.random_range(2e-4..2e-3), per_byte: 1e-9 }).collect();
    let blocks = (0..blocks)
        .map(|_| {
            let mut all: Vec<usize> = (0..site_count).collect();
            all.shuffle(&mut rng);
            all.truncate(9);
            BlockRead { chunk_bytes: 1 << 20, sites: all, need }
        })
        .collect();
    AccessInstance { sites, blocks }
}

fn bench(c: &mut Criterion) {
    for blocks in [1, 10, 50] {
        for need in [6, 7] {
            let instance = request(blocks, need);
            let plan = solve_exact(&instance, DEFAULT_NODE_BUDGET).unwrap();
            let quick = greedy(&instance, GreedyFill::Random(1)).unwrap();
            eprintln!(
                "{blocks} blocks, need {need}: exact {} ({} sites, cost {:.3} ms), paper's greedy {:.3} ms ({} sites)",
                if plan.optimal { "optimal" } else { "budget spent" },
                plan.sites().len(),
                plan.cost * 1e3,
                quick.cost * 1e3,
                quick.sites().len()
            );
            c.bench_function(&format!("exact {blocks} blocks need {need}"), |b| {
                b.iter(|| solve_exact(&instance, DEFAULT_NODE_BUDGET).unwrap())
            });
            c.bench_function(&format!("greedy {blocks} blocks need {need}"), |b| {
                b.iter(|| greedy(&instance, GreedyFill::Random(1)).unwrap())
            });
        }
    }
}

criterion_group! { name = benches; config = Criterion::default().sample_size(10); targets = bench }
criterion_main!(benches);
