//! Access policies over a fake view: the rules' choices, the cost plan's exactness, the plan
//! cache (miss, solve, hit, stale, invalidated, evicted) and late binding's shape.

use super::*;
use crate::ecstore::test_view::TestView;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Stripes on the nodes given, 8 nodes of 1 MB/s and 1 ms per task.
fn view(stripes: &[[u32; 4]]) -> TestView {
    TestView::new(8, stripes, 1e6, 1_000_000)
}

fn policy(kind: AccessKind, extra_reads: u8) -> AccessPolicy {
    AccessPolicy::new(AccessSettings { kind, extra_reads, ..AccessSettings::default() }, 2).unwrap()
}

fn blocks(stripes: &[u32]) -> Vec<BlockRead> {
    stripes.iter().map(|&s| BlockRead { stripe: StripeId(s), unit_bytes: 1_000 }).collect()
}

fn units(plan: &ReadPlan) -> Vec<u8> {
    plan.tasks.iter().map(|t| t.unit).collect()
}

fn nodes_of(plan: &BatchPlan) -> BTreeSet<NodeId> {
    plan.blocks.iter().flat_map(|b| b.tasks.iter().map(|t| t.node)).collect()
}

fn rng() -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(7)
}

#[test]
fn random_reads_k_distinct_units_spread_over_all_and_avoids_nodes_known_down() {
    let mut view = view(&[[0, 1, 2, 3]]);
    let mut policy = policy(AccessKind::Random, 0);
    let mut seen = BTreeSet::new();
    let mut rng = rng();
    for _ in 0..200 {
        let plan = policy.plan_batch(&mut view, &blocks(&[0]), &mut rng);
        let read = &plan.blocks[0];
        assert_eq!(read.tasks.len(), 2);
        assert_eq!(read.quorum, Quorum::All);
        assert_ne!(read.tasks[0].unit, read.tasks[1].unit);
        assert_eq!(read.decode == DecodeAt::Gateway, read.tasks.iter().any(|t| t.unit >= 2));
        seen.extend(units(read));
        assert_eq!(plan.source, PlanSource::Rule);
    }
    assert_eq!(seen.len(), 4, "parity is read as often as data");
    view.down[1] = true;
    for _ in 0..50 {
        let plan = policy.plan_batch(&mut view, &blocks(&[0]), &mut rng);
        assert!(plan.blocks[0].tasks.iter().all(|t| t.node != NodeId(1)));
    }
    assert_eq!(view.probes, 0, "rules probe nothing");
}

#[test]
fn data_first_reads_the_data_units_and_parity_only_for_a_unit_down() {
    let mut view = view(&[[0, 1, 2, 3]]);
    let mut policy = policy(AccessKind::DataFirst, 0);
    let plan = policy.plan_batch(&mut view, &blocks(&[0]), &mut rng());
    assert_eq!(units(&plan.blocks[0]), vec![0, 1]);
    assert_eq!(plan.blocks[0].decode, DecodeAt::None);
    view.down[0] = true;
    let plan = policy.plan_batch(&mut view, &blocks(&[0]), &mut rng());
    assert_eq!(units(&plan.blocks[0]), vec![1, 2]);
    assert_eq!(plan.blocks[0].decode, DecodeAt::Gateway);
    // Too few units up: every unit is read, and the block fails unless k answer.
    view.down[1] = true;
    view.down[2] = true;
    let plan = policy.plan_batch(&mut view, &blocks(&[0]), &mut rng());
    assert_eq!(units(&plan.blocks[0]), vec![0, 1, 2, 3]);
    assert_eq!(plan.blocks[0].quorum, Quorum::AnyK { k: 2 });
}

#[test]
fn one_block_is_solved_at_once_as_its_k_cheapest_units() {
    let mut view = view(&[[0, 1, 2, 3]]);
    let mut policy = policy(AccessKind::Cost, 0);
    // Node 0 has a second's work queued (1 MB at 1 MB/s): after a refresh it is dearest.
    view.queues[0] = 1_000_000;
    policy.refresh(&mut view, 0);
    assert_eq!(view.probes, 8);
    let plan = policy.plan_batch(&mut view, &blocks(&[0]), &mut rng());
    assert_eq!(plan.source, PlanSource::Exact);
    assert!(plan.inline_solver_nodes > 0);
    let mut read = units(&plan.blocks[0]);
    read.sort_unstable();
    assert_eq!(read, vec![1, 2]);
    assert_eq!(policy.pending_solves(), 0, "nothing is left to solve");
}

#[test]
fn a_batch_gets_the_greedy_plan_then_the_cached_exact_one() {
    // Blocks 0 and 1 share nodes 4 and 5 (their parity); their data are apart.
    let mut view = view(&[[0, 1, 4, 5], [2, 3, 4, 5], [6, 7, 0, 1]]);
    let mut policy = policy(AccessKind::Cost, 0);
    policy.refresh(&mut view, 0);
    let first = policy.plan_batch(&mut view, &blocks(&[1, 0]), &mut rng());
    assert_eq!(first.source, PlanSource::Greedy);
    assert_eq!(first.inline_solver_nodes, 0, "no batch waits for a solve");
    assert_eq!(policy.pending_solves(), 1);
    // The same miss again does not queue the solve twice.
    policy.plan_batch(&mut view, &blocks(&[0, 1]), &mut rng());
    assert_eq!(policy.pending_solves(), 1);
    let work = policy.next_solve().unwrap();
    let result = work.run();
    assert!(AccessPolicy::solve_nodes(&result).unwrap() > 0);
    policy.finish_solve(result);
    let hit = policy.plan_batch(&mut view, &blocks(&[1, 0]), &mut rng());
    assert_eq!(hit.source, PlanSource::CacheHit);
    // The exact plan reads both blocks at their shared nodes: two sites, not four.
    assert_eq!(nodes_of(&hit), BTreeSet::from([NodeId(4), NodeId(5)]));
    // The plans come back in the batch's order.
    assert!(hit.blocks[0].tasks.iter().all(|t| view.placement.stripe_nodes(StripeId(1)).contains(&t.node)));
    let counters = policy.counters();
    assert_eq!((counters.misses, counters.cache_hits, counters.solves_installed), (2, 1, 1));
}

#[test]
fn moved_costs_make_cached_plans_stale_and_a_moved_unit_drops_them() {
    let mut view = view(&[[0, 1, 4, 5], [2, 3, 4, 5], [6, 7, 0, 1]]);
    let mut policy = policy(AccessKind::Cost, 0);
    policy.refresh(&mut view, 0);
    policy.plan_batch(&mut view, &blocks(&[0, 1]), &mut rng());
    let solved = policy.next_solve().unwrap().run();
    policy.finish_solve(solved);
    view.queues[4] = 5_000_000;
    // A probe a moment later barely moves the average; one after many time constants moves it.
    let base = policy.site_costs()[4].overhead;
    policy.refresh(&mut view, 50_000_000);
    let partly = policy.site_costs()[4].overhead - base;
    let expected = (1.0 - (-0.01f64).exp()) * 5e9;
    assert!((partly / expected - 1.0).abs() < 1e-6, "{partly} vs {expected}");
    policy.refresh(&mut view, 60_000_000_000);
    assert!((policy.site_costs()[4].overhead - (base + 5e9)).abs() < 1e6);
    let stale = policy.plan_batch(&mut view, &blocks(&[0, 1]), &mut rng());
    assert_eq!(stale.source, PlanSource::StaleHit);
    assert_eq!(policy.pending_solves(), 1, "a stale plan is solved again");
    assert_eq!(policy.counters().reloads, 1);
    let solved = policy.next_solve().unwrap().run();
    policy.finish_solve(solved);
    let fresh = policy.plan_batch(&mut view, &blocks(&[0, 1]), &mut rng());
    assert_eq!(fresh.source, PlanSource::CacheHit);
    assert!(!nodes_of(&fresh).contains(&NodeId(4)), "the re-solve avoids the loaded node");
    // A unit the plan reads moves: the plan no longer fits, and the batch misses.
    let read = fresh.blocks[0].tasks[0];
    let free = (0..8).map(NodeId).find(|n| !view.placement.stripe_nodes(StripeId(0)).contains(n)).unwrap();
    view.placement.move_unit(StripeId(0), read.unit, free).unwrap();
    let moved = policy.plan_batch(&mut view, &blocks(&[0, 1]), &mut rng());
    assert_eq!(moved.source, PlanSource::Greedy);
}

#[test]
fn the_cache_holds_at_most_its_capacity_and_the_solve_queue_its_bound() {
    let stripes: Vec<[u32; 4]> = (0..8).map(|s| [s % 8, (s + 1) % 8, (s + 2) % 8, (s + 3) % 8]).collect();
    let mut view = view(&stripes);
    let settings = AccessSettings { cache_capacity: 2, max_pending_solves: 3, ..AccessSettings::default() };
    let mut policy = AccessPolicy::new(settings, 2).unwrap();
    for pair in [[0, 1], [2, 3], [4, 5], [6, 7]] {
        policy.plan_batch(&mut view, &blocks(&pair), &mut rng());
    }
    assert_eq!(policy.pending_solves(), 3);
    assert_eq!(policy.counters().solves_dropped, 1);
    while let Some(work) = policy.next_solve() {
        policy.finish_solve(work.run());
    }
    assert_eq!(policy.gauges().iter().find(|g| g.0 == "cached_plans").unwrap().1, 2.0);
    // The oldest ([0, 1]) was evicted; the newest two hit.
    assert_eq!(policy.plan_batch(&mut view, &blocks(&[0, 1]), &mut rng()).source, PlanSource::Greedy);
    assert_eq!(policy.plan_batch(&mut view, &blocks(&[4, 5]), &mut rng()).source, PlanSource::CacheHit);
}

#[test]
fn late_binding_reads_k_plus_delta_and_cancels_only_when_asked() {
    let mut view = view(&[[0, 1, 2, 3], [4, 5, 6, 7]]);
    for kind in [AccessKind::Random, AccessKind::DataFirst, AccessKind::Cost] {
        let mut lb = policy(kind, 1);
        let plan = lb.plan_batch(&mut view, &blocks(&[0, 1]), &mut rng());
        for read in &plan.blocks {
            assert_eq!(read.tasks.len(), 3, "{kind:?}");
            assert_eq!(read.quorum, Quorum::AnyK { k: 2 });
            let roles: Vec<TaskRole> = read.tasks.iter().map(|t| t.role).collect();
            assert_eq!(roles, vec![TaskRole::Normal, TaskRole::Normal, TaskRole::Extra]);
            assert!(read.validate().is_ok());
        }
    }
    let settings =
        AccessSettings { kind: AccessKind::Random, extra_reads: 1, cancel_extra: true, ..Default::default() };
    assert_eq!(settings.name(), "ec-random-lb1-cancel");
    let mut cancel = AccessPolicy::new(settings, 2).unwrap();
    let plan = cancel.plan_batch(&mut view, &blocks(&[0]), &mut rng());
    assert_eq!(plan.blocks[0].quorum, Quorum::FirstKOfN { k: 2 });
}

#[test]
fn bad_settings_are_refused() {
    for settings in [
        AccessSettings { cache_capacity: 0, ..AccessSettings::default() },
        AccessSettings { reload_threshold: f64::NAN, ..AccessSettings::default() },
        AccessSettings { refresh_period_ns: 0, ..AccessSettings::default() },
    ] {
        assert!(AccessPolicy::new(settings, 2).is_err());
    }
    assert!(AccessPolicy::new(AccessSettings::default(), 0).is_err());
    assert_eq!(AccessSettings::default().name(), "ec-cost");
    assert_eq!(AccessSettings { extra_reads: 1, ..AccessSettings::default() }.name(), "ec-cost-lb1");
}

#[test]
fn hu_rules_probe_each_node_of_the_batch_once_and_read_the_least_loaded_units() {
    // Two blocks share nodes 2 and 3; node 1 is known down.
    let mut view = view(&[[0, 1, 2, 3], [2, 3, 4, 5]]);
    view.down[1] = true;
    view.queues = vec![50_000, 0, 0, 90_000, 10_000, 20_000, 0, 0];
    for kind in [AccessKind::Llf, AccessKind::Lmlf] {
        let mut policy = policy(kind, 0);
        assert!(policy.probes_per_batch());
        let targets = policy.probe_targets(&view, &blocks(&[0, 1]));
        assert_eq!(targets, vec![NodeId(0), NodeId(2), NodeId(3), NodeId(4), NodeId(5)]);
        view.probes = 0;
        let plan = policy.plan_batch(&mut view, &blocks(&[0, 1]), &mut rng());
        assert_eq!(view.probes, 5, "{kind:?}: each announced node once, and nothing else");
        // Block 0: units on nodes 0 (50 KB), 2 (empty), 3 (90 KB); block 1: 2, 3, 4 (10 KB), 5.
        assert_eq!(units(&plan.blocks[0]), vec![2, 0], "{kind:?}");
        assert_eq!(units(&plan.blocks[1]), vec![0, 2], "{kind:?}");
        assert_eq!(plan.source, PlanSource::Rule);
        assert!(plan.blocks.iter().all(|b| b.validate().is_ok()));
    }
    // A queue that moves moves the choice: the rules read fresh probes, not a table.
    let mut llf = policy(AccessKind::Llf, 1);
    view.queues[2] = 1_000_000;
    let plan = llf.plan_batch(&mut view, &blocks(&[0]), &mut rng());
    assert_eq!(units(&plan.blocks[0]), vec![0, 3, 2], "late binding's extra read is the most loaded");
    assert_eq!(plan.blocks[0].tasks[2].role, TaskRole::Extra);
    assert_eq!(AccessSettings { kind: AccessKind::Lmlf, ..Default::default() }.name(), "hu-lmlf");
    assert!(!policy(AccessKind::Cost, 0).probes_per_batch());
    assert!(policy(AccessKind::Cost, 0).probe_targets(&view, &blocks(&[0])).is_empty());
}
