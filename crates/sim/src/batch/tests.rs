//! The batch engine against closed forms: one batch's latency term by term, per-site merging
//! saving exactly one overhead, a closed loop's response time N·E[S] (the interactive response
//! time law with zero think time), late binding's launched reads, cancels, failures, the solver off
//! the decision path, and determinism.

use super::*;
use crate::{NodeModel, Outage};
use model::{NEVER, NodeId, Outcome, PlanSource, TaskRole};
use policy::ecstore::access::{AccessKind, AccessSettings};
use workload::batch::{BatchTrace, BatchWorkload};

const OVERHEAD_NS: u64 = 2_000_000;
const RATE: f64 = 100e6;
const UNIT: u64 = 50_000;
const LATENCY_NS: u64 = 100_000;

fn nodes(count: usize) -> NodeModel {
    NodeModel {
        overhead_ns: OVERHEAD_NS,
        rates_bytes_per_s: vec![RATE; count],
        exp_mean_ns: 0,
        cancel_in_service: false,
        servers: 1,
        class_delays: Vec::new(),
        slowdown: None,
        outages: Vec::new(),
    }
}

fn setup(spec: &str, node_count: u32, stripes: &[&[u32]], clients: u32) -> BatchSetup {
    let spec: CodeSpec = spec.parse().unwrap();
    let table = stripes.iter().flat_map(|s| s.iter().map(|&n| NodeId(n))).collect();
    BatchSetup {
        spec,
        placement: Placement::new(spec, node_count, table).unwrap(),
        unit_bytes: vec![UNIT; stripes.len()],
        nodes: nodes(node_count as usize),
        network_latency_ns: LATENCY_NS,
        frontend: BatchFrontend::default(),
        site_batching: true,
        clients,
        think_ns: 0,
        end_ns: 2_000_000_000,
        solver: SolverModel::default(),
        failure_detect_ns: 0,
        load_period_ns: 5_000_000_000,
        seed: 5,
    }
}

fn generator(batches: &[&[u32]], blocks: usize) -> BatchGenerator {
    let trace = BatchTrace {
        batches: batches.iter().map(|b| b.to_vec()).collect(),
        block_bytes: vec![UNIT * 2; blocks],
        arrival_ns: vec![0; batches.len()],
    };
    BatchWorkload::Trace(trace).build(1).unwrap()
}

fn policy(kind: AccessKind, extra_reads: u8, cancel_extra: bool, k: usize) -> AccessPolicy {
    AccessPolicy::new(AccessSettings { kind, extra_reads, cancel_extra, ..AccessSettings::default() }, k).unwrap()
}

fn service_ns(bytes: u64) -> u64 {
    OVERHEAD_NS + (bytes as f64 * 1e9 / RATE).round() as u64
}

fn fixed_ns(blocks: u64) -> u64 {
    let f = BatchFrontend::default();
    f.metadata_ns + f.decision_ns + f.decision_per_block_ns * blocks + 2 * LATENCY_NS
}

#[test]
fn one_batch_takes_metadata_plan_round_trip_and_service_term_by_term() {
    // Two blocks whose data units are on four different nodes: nothing queues.
    let mut setup = setup("rs-2-2", 8, &[&[0, 1, 2, 3], &[4, 5, 6, 7]], 1);
    setup.end_ns = 1_000_000;
    let out = run_batches(&setup, policy(AccessKind::DataFirst, 0, false, 2), None, &generator(&[&[0, 1]], 2));
    assert_eq!(out.batches.len(), 1);
    let batch = out.batches[0];
    assert_eq!(batch.latency_ns(), fixed_ns(2) + service_ns(UNIT));
    assert_eq!(batch.bytes, 4 * UNIT);
    assert_eq!(out.records.len(), 2);
    for record in out.records.iter() {
        assert_eq!(record.tasks.len(), 2);
        assert!(!record.request.degraded && record.request.outcome == Outcome::Ok);
        assert!(record.tasks.iter().all(|t| t.role == TaskRole::Normal && t.latency_ns() == Some(service_ns(UNIT))));
    }
}

#[test]
fn hu_rules_wait_one_probe_round_trip_and_record_each_probe_once() {
    // The same batch as above, planned by probes: four nodes per block, eight in all.
    let mut setup = setup("rs-2-2", 8, &[&[0, 1, 2, 3], &[4, 5, 6, 7]], 1);
    setup.end_ns = 1_000_000;
    for kind in [AccessKind::Llf, AccessKind::Lmlf] {
        let out = run_batches(&setup, policy(kind, 0, false, 2), None, &generator(&[&[0, 1]], 2));
        let batch = out.batches[0];
        // Empty queues: the first k units, as data-first would; one probe round trip more.
        assert_eq!(batch.latency_ns(), fixed_ns(2) + 2 * LATENCY_NS + service_ns(UNIT), "{kind:?}");
        let probes: u32 = out.records.iter().map(|r| r.request.probes).sum();
        assert_eq!(probes, 8);
        assert!(out.records.iter().all(|r| r.request.probe_wait_ns == 2 * LATENCY_NS));
    }
}

#[test]
fn merging_a_batchs_units_on_one_node_saves_exactly_one_overhead_per_shared_node() {
    // Both blocks' data units are on nodes 0 and 1.
    let stripes: &[&[u32]] = &[&[0, 1, 2, 3], &[0, 1, 4, 5]];
    let mut merged = setup("rs-2-2", 8, stripes, 1);
    merged.end_ns = 1_000_000;
    let mut apart = merged.clone();
    apart.site_batching = false;
    let work = generator(&[&[0, 1]], 2);
    let one = run_batches(&merged, policy(AccessKind::DataFirst, 0, false, 2), None, &work).batches[0];
    let two = run_batches(&apart, policy(AccessKind::DataFirst, 0, false, 2), None, &work).batches[0];
    assert_eq!(one.latency_ns(), fixed_ns(2) + service_ns(2 * UNIT));
    // Apart, the second unit on each node waits behind the first: two overheads.
    assert_eq!(two.latency_ns(), fixed_ns(2) + 2 * service_ns(UNIT));
    assert_eq!(two.latency_ns() - one.latency_ns(), OVERHEAD_NS);
}

#[test]
fn a_closed_loop_on_one_bottleneck_node_answers_in_n_service_times() {
    // R: a 1-of-3 code whose first copy is always on node 0; data-first reads it there.
    let stripes: Vec<Vec<u32>> = (0..10).map(|s| vec![0, 1 + s % 3, 4 + s % 3]).collect();
    let refs: Vec<&[u32]> = stripes.iter().map(|s| s.as_slice()).collect();
    for (clients, exp_mean_ns) in [(4u32, 0u64), (8, 0), (8, 3_000_000)] {
        let mut setup = setup("rs-1-2", 8, &refs, clients);
        setup.nodes.exp_mean_ns = exp_mean_ns;
        setup.end_ns = 60_000_000_000;
        let batches: Vec<&[u32]> =
            (0..10).map(|b| std::slice::from_ref(&[0u32, 1, 2, 3, 4, 5, 6, 7, 8, 9][b])).collect();
        let out = run_batches(&setup, policy(AccessKind::DataFirst, 0, false, 1), None, &generator(&batches, 10));
        let steady: Vec<u64> =
            out.batches.iter().filter(|b| b.arrival_ns > 5_000_000_000).map(|b| b.latency_ns()).collect();
        let mean = steady.iter().sum::<u64>() as f64 / steady.len() as f64;
        let service = (service_ns(UNIT) + exp_mean_ns) as f64;
        // Response time law with Z = 0: R = N / X. Node 0 is never idle (the time a batch spends
        // outside it, at the frontend and on the wire, is shorter than N - 1 services), so
        // X = 1 / E[S] and R = N·E[S], the outside time included.
        assert!(fixed_ns(1) as f64 <= f64::from(clients - 1) * service_ns(UNIT) as f64);
        let expected = f64::from(clients) * service;
        let tolerance = if exp_mean_ns == 0 { 0.001 } else { 0.03 };
        assert!((mean / expected - 1.0).abs() < tolerance, "{clients} clients: {mean} ns vs N·E[S] = {expected} ns");
    }
}

#[test]
fn late_binding_launches_k_plus_delta_and_lets_the_extra_read_run_unless_cancelled() {
    let stripes: Vec<Vec<u32>> = (0..16).map(|s| (0..4).map(|u| (s + 2 * u) % 8).collect()).collect();
    let refs: Vec<&[u32]> = stripes.iter().map(|s| s.as_slice()).collect();
    let batches: Vec<Vec<u32>> = (0..16).map(|b| vec![b, (b + 5) % 16, (b + 9) % 16]).collect();
    let batch_refs: Vec<&[u32]> = batches.iter().map(|b| b.as_slice()).collect();
    let mut setup = setup("rs-2-2", 8, &refs, 6);
    setup.end_ns = 3_000_000_000;
    let work = generator(&batch_refs, 16);
    let plain = run_batches(&setup, policy(AccessKind::Random, 0, false, 2), None, &work);
    let lb = run_batches(&setup, policy(AccessKind::Random, 1, false, 2), None, &work);
    let cancel = run_batches(&setup, policy(AccessKind::Random, 1, true, 2), None, &work);
    let launched = |out: &BatchOutput| out.records.all_tasks().len() as f64 / out.records.len() as f64;
    assert_eq!(launched(&plain), 2.0);
    assert_eq!(launched(&lb), 3.0);
    assert!(lb.records.all_tasks().iter().all(|t| !t.cancelled && t.finish_ns != NEVER), "no read is cancelled");
    let dropped = cancel.records.all_tasks().iter().filter(|t| t.cancelled).count();
    assert!(dropped > 0, "queued extra reads are dropped when cancelled");
    assert!(cancel.records.all_tasks().iter().all(|t| t.validate().is_ok()));
    for out in [&plain, &lb, &cancel] {
        assert!(out.batches.iter().all(|b| b.outcome == Outcome::Ok));
        for b in &out.batches {
            let last = out.records.requests()[b.requests().start as usize..b.requests().end as usize]
                .iter()
                .map(|r| r.completion_ns)
                .max();
            assert_eq!(last, Some(b.completion_ns), "a batch completes with its last block");
        }
    }
}

#[test]
fn a_node_down_is_routed_around_once_detected() {
    let stripes: Vec<Vec<u32>> = (0..16).map(|s| (0..4).map(|u| (s + 2 * u) % 8).collect()).collect();
    let refs: Vec<&[u32]> = stripes.iter().map(|s| s.as_slice()).collect();
    let batches: Vec<Vec<u32>> = (0..16).map(|b| vec![b, (b + 3) % 16]).collect();
    let batch_refs: Vec<&[u32]> = batches.iter().map(|b| b.as_slice()).collect();
    let mut setup = setup("rs-2-2", 8, &refs, 4);
    setup.end_ns = 2_000_000_000;
    setup.nodes.outages = vec![Outage { node: 3, from_ns: 500_000_000, until_ns: NEVER }];
    setup.failure_detect_ns = 50_000_000;
    let out = run_batches(&setup, policy(AccessKind::Random, 0, false, 2), None, &generator(&batch_refs, 16));
    let known = 500_000_000 + 50_000_000;
    let after: Vec<_> = out.batches.iter().filter(|b| b.arrival_ns >= known).collect();
    assert!(!after.is_empty() && after.iter().all(|b| b.outcome == Outcome::Ok));
    for record in out.records.iter().filter(|r| r.request.arrival_ns >= known) {
        assert!(record.tasks.iter().all(|t| t.node != NodeId(3)));
    }
    let failed_tasks = out.records.all_tasks().iter().filter(|t| t.failed).count();
    let failed_batches = out.batches.iter().filter(|b| b.outcome == Outcome::Failed).count();
    assert!(failed_tasks > 0 && failed_batches > 0, "reads sent before detection fail");
    assert!(out.batches.iter().filter(|b| b.outcome == Outcome::Failed).all(|b| b.arrival_ns < known));
}

#[test]
fn the_cost_policy_decides_without_solving_and_its_cache_serves_repeated_batches() {
    let stripes: Vec<Vec<u32>> = (0..32).map(|s| (0..4).map(|u| (s * 3 + 5 * u) % 16).collect()).collect();
    let refs: Vec<&[u32]> = stripes.iter().map(|s| s.as_slice()).collect();
    let batches: Vec<Vec<u32>> = (0..8).map(|b| (0..6).map(|i| (b * 4 + i * 5) % 32).collect()).collect();
    let batch_refs: Vec<&[u32]> = batches.iter().map(|b| b.as_slice()).collect();
    let mut setup = setup("rs-2-2", 16, &refs, 8);
    setup.end_ns = 5_000_000_000;
    let out = run_batches(&setup, policy(AccessKind::Cost, 0, false, 2), None, &generator(&batch_refs, 32));
    assert!(out.solves >= 8, "every distinct batch was solved: {}", out.solves);
    assert!(out.batches.iter().all(|b| b.inline_solver_nodes == 0), "no batch of several blocks waits for a solve");
    let hits = out.batches.iter().filter(|b| b.source.is_cache_hit()).count();
    assert!(hits as f64 > 0.9 * out.batches.len() as f64, "{hits} hits of {}", out.batches.len());
    assert_eq!(out.batches.iter().filter(|b| b.source == PlanSource::Greedy).count() as u64, out.counters.misses);
    assert!(out.refresh_probes >= 16, "the cost table was refreshed by probing every node");
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let stripes: Vec<Vec<u32>> = (0..16).map(|s| (0..4).map(|u| (s + 3 * u) % 8).collect()).collect();
    let refs: Vec<&[u32]> = stripes.iter().map(|s| s.as_slice()).collect();
    let batches: Vec<Vec<u32>> = (0..16).map(|b| vec![b, (b + 7) % 16]).collect();
    let batch_refs: Vec<&[u32]> = batches.iter().map(|b| b.as_slice()).collect();
    let mut setup = setup("rs-2-2", 8, &refs, 5);
    setup.nodes.exp_mean_ns = 1_000_000;
    setup.end_ns = 1_000_000_000;
    let work = generator(&batch_refs, 16);
    let a = run_batches(&setup, policy(AccessKind::Cost, 1, false, 2), None, &work);
    let b = run_batches(&setup, policy(AccessKind::Cost, 1, false, 2), None, &work);
    assert_eq!(a.records, b.records);
    assert_eq!(a.batches, b.batches);
    setup.seed += 1;
    let c = run_batches(&setup, policy(AccessKind::Cost, 1, false, 2), None, &work);
    assert_ne!(a.records, c.records);
}

#[test]
fn bad_setups_are_refused() {
    let good = setup("rs-2-2", 8, &[&[0, 1, 2, 3]], 1);
    assert!(good.validate().is_ok());
    for bad in [
        BatchSetup { unit_bytes: vec![], ..good.clone() },
        BatchSetup { unit_bytes: vec![0], ..good.clone() },
        BatchSetup { clients: 0, ..good.clone() },
        BatchSetup { nodes: nodes(7), ..good.clone() },
    ] {
        assert!(bad.validate().is_err());
    }
}

/// Distinct nodes a batch's reads touched, from its blocks' task records.
fn distinct_nodes(out: &BatchOutput, batch: &model::BatchRecord) -> usize {
    let mut nodes: Vec<NodeId> = batch
        .requests()
        .flat_map(|r| out.records.get(r as usize).tasks.iter().map(|t| t.node).collect::<Vec<_>>())
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes.len()
}

#[test]
fn the_mover_co_locates_co_read_blocks_below_its_rate_cap_and_batches_touch_fewer_nodes() {
    // 32 blocks spread over 16 nodes, read in 8 fixed groups of 4.
    let random = policy::placement::balanced_random(
        "rs-2-2".parse().unwrap(),
        16,
        32,
        &mut <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(3),
    )
    .unwrap();
    let stripes: Vec<Vec<u32>> =
        (0..32).map(|s| random.stripe_nodes(model::StripeId(s)).iter().map(|n| n.0).collect()).collect();
    let refs: Vec<&[u32]> = stripes.iter().map(|s| s.as_slice()).collect();
    let groups: Vec<Vec<u32>> = (0..8).map(|g| (0..4).map(|i| (g + 8 * i) % 32).collect()).collect();
    let group_refs: Vec<&[u32]> = groups.iter().map(|b| b.as_slice()).collect();
    let mut setup = setup("rs-2-2", 16, &refs, 8);
    setup.end_ns = 120_000_000_000;
    setup.load_period_ns = 5_000_000_000;
    let work = generator(&group_refs, 32);
    let settings = policy::ecstore::mover::MoverSettings { max_moves_per_s: 2.0, ..Default::default() };
    let mover = policy::ecstore::mover::Mover::new(settings).unwrap();
    let moved = run_batches(&setup, policy(AccessKind::Cost, 0, false, 2), Some(mover), &work);
    let fixed = run_batches(&setup, policy(AccessKind::Cost, 0, false, 2), None, &work);
    assert!(fixed.moves.is_empty());
    let done: Vec<&model::MoveRecord> = moved.moves.iter().filter(|m| m.end_ns != NEVER).collect();
    assert!(done.len() >= 10, "{} moves", done.len());
    // The cap: starts at least one period apart.
    for pair in moved.moves.windows(2) {
        assert!(pair[1].start_ns - pair[0].start_ns >= 500_000_000);
    }
    let mean_nodes = |out: &BatchOutput, from_ns: u64| {
        let late: Vec<usize> =
            out.batches.iter().filter(|b| b.arrival_ns >= from_ns).map(|b| distinct_nodes(out, b)).collect();
        late.iter().sum::<usize>() as f64 / late.len() as f64
    };
    let (with, without) = (mean_nodes(&moved, 90_000_000_000), mean_nodes(&fixed, 90_000_000_000));
    assert!(with < 0.9 * without, "{with} nodes per batch with the mover, {without} without");
    let early = mean_nodes(&moved, 0);
    assert!(with < early, "the mover's batches touch fewer nodes over time: {early} then {with}");
    let mover_bytes: u64 = done.iter().map(|m| 2 * m.bytes).sum();
    let client_bytes: u64 = moved.batches.iter().map(|b| b.bytes).sum();
    assert!((mover_bytes as f64) < 0.01 * client_bytes as f64, "{mover_bytes} moved vs {client_bytes} read");
}

#[test]
fn a_block_past_its_plans_deadline_fails_at_the_deadline() {
    let mut setup = setup("rs-2-2", 8, &[&[0, 1, 2, 3], &[4, 5, 6, 7]], 1);
    setup.end_ns = 1_000_000;
    let run = |block_deadline_ns| {
        let settings = AccessSettings { kind: AccessKind::DataFirst, block_deadline_ns, ..AccessSettings::default() };
        let policy = AccessPolicy::new(settings, 2).unwrap();
        run_batches(&setup, policy, None, &generator(&[&[0, 1]], 2)).batches[0]
    };
    let unbounded = run(0);
    assert_eq!(unbounded.outcome, Outcome::Ok);
    // Half a task's service: every block gives up at its deadline, its reads cancelled.
    let deadline_ns = service_ns(UNIT) / 2;
    let bounded = run(deadline_ns);
    assert_eq!(bounded.outcome, Outcome::Failed);
    assert_eq!(bounded.completion_ns, bounded.decision_end_ns + deadline_ns, "{bounded:?}");
    assert!(bounded.completion_ns < unbounded.completion_ns);
    // A deadline the reads meet changes nothing.
    assert_eq!(run(1_000_000_000), unbounded);
}
