//! Tests of the access planner: the exact solver against brute force on random instances, the
//! greedy plan's feasibility, co-location, late binding, the node budget, refusals.

use super::*;
use rand::Rng;

/// A random instance: up to `max_sites` sites with overheads and media costs of a few units, up to
/// `max_blocks` blocks of 2..=6 chunks on distinct sites, each asking 1..=its chunks.
fn random_instance(rng: &mut ChaCha8Rng, max_sites: usize, max_blocks: usize) -> AccessInstance {
    let site_count = rng.random_range(3..=max_sites);
    let sites = (0..site_count)
        .map(|_| SiteCost { overhead: rng.random_range(0.0..5.0), per_byte: rng.random_range(0.0..0.01) })
        .collect();
    let blocks = (0..rng.random_range(1..=max_blocks))
        .map(|_| {
            let mut all: Vec<usize> = (0..site_count).collect();
            all.shuffle(rng);
            all.truncate(rng.random_range(2..=site_count.min(6)));
            let need = rng.random_range(1..=all.len());
            BlockRead { chunk_bytes: rng.random_range(1..1000), sites: all, need }
        })
        .collect();
    AccessInstance { sites, blocks }
}

/// The least cost over every choice of exactly `need` chunks per block (reading more never costs
/// less: every cost is non-negative), priced by Eq. 1 directly.
fn brute_force(instance: &AccessInstance) -> f64 {
    fn choices(sites: &[usize], need: usize) -> Vec<Vec<usize>> {
        if need == 0 {
            return vec![Vec::new()];
        }
        if sites.len() < need {
            return Vec::new();
        }
        let (first, rest) = sites.split_first().expect("need > 0 and len >= need");
        let mut with: Vec<Vec<usize>> = choices(rest, need - 1)
            .into_iter()
            .map(|mut c| {
                c.push(*first);
                c
            })
            .collect();
        with.extend(choices(rest, need));
        with
    }
    let per_block: Vec<Vec<Vec<usize>>> = instance.blocks.iter().map(|b| choices(&b.sites, b.need)).collect();
    let mut best = f64::INFINITY;
    let mut index = vec![0usize; per_block.len()];
    // Bounded: an odometer over the product of the blocks' choices.
    loop {
        let reads: Vec<Vec<usize>> = index.iter().zip(&per_block).map(|(&i, c)| c[i].clone()).collect();
        best = best.min(instance.cost(&reads));
        let Some(digit) = (0..index.len()).find(|&d| index[d] + 1 < per_block[d].len()) else { break };
        index[digit] += 1;
        index[..digit].iter_mut().for_each(|i| *i = 0);
    }
    best
}

fn assert_feasible(instance: &AccessInstance, plan: &AccessPlan) {
    for (block, sites) in instance.blocks.iter().zip(&plan.reads) {
        assert_eq!(sites.len(), block.need, "{plan:?}");
        assert!(sites.windows(2).all(|w| w[0] < w[1]), "distinct, ascending: {plan:?}");
        assert!(sites.iter().all(|s| block.sites.contains(s)), "only sites holding a chunk: {plan:?}");
    }
    assert!((instance.cost(&plan.reads) - plan.cost).abs() < 1e-9, "the cost is the plan's");
}

#[test]
fn the_exact_solver_equals_brute_force_and_greedy_is_feasible_and_never_cheaper() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut beats_random_greedy = 0;
    for case in 0..400 {
        let instance = random_instance(&mut rng, 9, 3);
        let exact = solve_exact(&instance, DEFAULT_NODE_BUDGET).unwrap();
        assert!(exact.optimal, "case {case}");
        assert_feasible(&instance, &exact);
        let brute = brute_force(&instance);
        assert!((exact.cost - brute).abs() <= 1e-9 * brute.max(1.0), "case {case}: {} vs {brute}", exact.cost);
        for fill in [GreedyFill::Cheapest, GreedyFill::Random(case)] {
            let plan = greedy(&instance, fill).unwrap();
            assert_feasible(&instance, &plan);
            assert!(plan.cost >= exact.cost - 1e-9, "case {case}: greedy {} below exact {}", plan.cost, exact.cost);
            beats_random_greedy += usize::from(matches!(fill, GreedyFill::Random(_)) && plan.cost > exact.cost + 1e-9);
        }
    }
    // The instances are not trivial: planning matters in many of them.
    assert!(beats_random_greedy > 100, "the exact plan beats the paper's greedy in {beats_random_greedy} of 400");
}

#[test]
fn the_per_site_overhead_rewards_co_located_chunks() {
    // Two blocks of RS(2,1): block 0 on sites 0, 1, 2; block 1 on sites 1, 2, 3. Every site costs the
    // same: the least-cost plan reads both blocks from sites 1 and 2 (two overheads, not four).
    let even = SiteCost { overhead: 1.0, per_byte: 0.001 };
    let block = |sites: Vec<usize>| BlockRead { chunk_bytes: 100, sites, need: 2 };
    let instance = AccessInstance { sites: vec![even; 4], blocks: vec![block(vec![0, 1, 2]), block(vec![1, 2, 3])] };
    let plan = solve_exact(&instance, DEFAULT_NODE_BUDGET).unwrap();
    assert_eq!(plan.reads, [vec![1, 2], vec![1, 2]]);
    assert_eq!(plan.sites(), [1, 2]);
    assert!((plan.cost - (2.0 + 4.0 * 0.1)).abs() < 1e-12);
    // A loaded site (its overhead up) is avoided even at the price of a third site.
    let mut loaded = instance.clone();
    loaded.sites[2].overhead = 10.0;
    let plan = solve_exact(&loaded, DEFAULT_NODE_BUDGET).unwrap();
    assert_eq!(plan.sites(), [0, 1, 3]);
}

#[test]
fn late_binding_reads_the_k_plus_delta_cheapest() {
    let sites = (0..6).map(|j| SiteCost { overhead: 1.0 + j as f64, per_byte: 0.0 }).collect();
    let instance =
        AccessInstance { sites, blocks: vec![BlockRead { chunk_bytes: 1, sites: (0..6).collect(), need: 4 }] };
    let plan = solve_exact(&instance, DEFAULT_NODE_BUDGET).unwrap();
    assert_eq!(plan.reads, [vec![0, 1, 2, 3]], "k = 3 plus δ = 1, the four least loaded");
}

#[test]
fn a_spent_node_budget_returns_the_best_found_and_says_so() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let instance = random_instance(&mut rng, 9, 3);
    let plan = solve_exact(&instance, 1).unwrap();
    assert!(!plan.optimal);
    assert_feasible(&instance, &plan);
    assert!(plan.cost <= greedy(&instance, GreedyFill::Cheapest).unwrap().cost);
}

#[test]
fn bad_instances_are_refused() {
    let site = SiteCost { overhead: 1.0, per_byte: 0.0 };
    let block = |sites: Vec<usize>, need| BlockRead { chunk_bytes: 1, sites, need };
    let with = |blocks| AccessInstance { sites: vec![site; 3], blocks };
    assert!(matches!(solve_exact(&with(vec![block(vec![0, 1], 3)]), 10), Err(AccessError::Need { .. })));
    assert!(matches!(solve_exact(&with(vec![block(vec![0, 1], 0)]), 10), Err(AccessError::Need { .. })));
    assert!(matches!(solve_exact(&with(vec![block(vec![0, 5], 1)]), 10), Err(AccessError::Site { .. })));
    assert!(matches!(greedy(&with(vec![block(vec![1, 1], 1)]), GreedyFill::Cheapest), Err(AccessError::Site { .. })));
    let negative = AccessInstance { sites: vec![SiteCost { overhead: -1.0, per_byte: 0.0 }], blocks: vec![] };
    assert!(matches!(negative.validate(), Err(AccessError::Cost { site: 0 })));
}
