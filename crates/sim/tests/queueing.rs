//! The engine against queueing theory: M/M/1 and M/D/1 mean waiting times
//! within 2 % of the formulas, M/M/3 within 3 % of Erlang C, an (n, k) fork-join with cancellation
//! between its known bounds, and admission pools whose slots make the
//! frontend the queue (M/M/1 again, at the frontend). Fixed seeds, long runs.

use codec::CodeSpec;
use execution::{AdmissionMode, AdmissionSettings};
use model::{
    CodeLayout, NodeId, ObjectId, PartitionId, Placement, PlannedTask, Quorum, ReadPlan, ReadRequest, RequestId,
    TaskRole,
};
use policy::{ClusterView, ReadPolicy};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim::{Engine, EngineSetup, FrontendModel, NodeModel};

/// Sends every request to nodes 0..fan_out, done at the first `k`.
struct Direct {
    fan_out: u32,
    k: u16,
}

impl ReadPolicy for Direct {
    fn name(&self) -> &'static str {
        "direct"
    }
    fn plan(
        &mut self,
        _view: &mut dyn ClusterView,
        _now_ns: u64,
        request: &ReadRequest,
        _rng: &mut dyn RngCore,
    ) -> ReadPlan {
        let task = |node: u32| PlannedTask {
            node: NodeId(node),
            unit: node as u8,
            offset: 0,
            length: request.length,
            role: TaskRole::Normal,
        };
        if self.fan_out == 1 {
            return ReadPlan::normal(task(0));
        }
        let mut plan = ReadPlan::normal(task(0));
        plan.tasks = (0..self.fan_out).map(task).collect();
        plan.quorum = Quorum::FirstKOfN { k: self.k };
        plan
    }
}

fn poisson_requests(count: usize, rate_per_ns: f64, seed: u64) -> Vec<ReadRequest> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut time = 0.0f64;
    (0..count)
        .map(|i| {
            let u: f64 = rng.random();
            time += -(1.0 - u).ln() / rate_per_ns;
            ReadRequest {
                id: RequestId(i as u64),
                object: ObjectId(0),
                partition: PartitionId(0),
                offset: 0,
                length: 1,
                arrival_ns: time as u64,
                class: 0,
                latency_class: 0,
            }
        })
        .collect()
}

/// A run's shape: `nodes` nodes whose tasks take `overhead_ns` plus Exp(`exp_mean_ns`), each
/// serving `servers` at once, and every request sent to nodes 0..fan_out, done at the first `k`,
/// behind `admission`.
#[derive(Clone, Copy)]
struct Shape {
    nodes: u32,
    fan_out: u32,
    k: u16,
    overhead_ns: u64,
    exp_mean_ns: u64,
    admission: AdmissionSettings,
    servers: usize,
}

/// A shape of FCFS nodes (one server each) and no admission bound.
fn shape(nodes: u32, fan_out: u32, k: u16, overhead_ns: u64, exp_mean_ns: u64) -> Shape {
    Shape { nodes, fan_out, k, overhead_ns, exp_mean_ns, admission: AdmissionSettings::default(), servers: 1 }
}

/// Runs `requests` on `shape`; returns the records.
fn run(shape: Shape, requests: &[ReadRequest]) -> model::RecordLog {
    let Shape { nodes, fan_out, k, overhead_ns, exp_mean_ns, admission, servers } = shape;
    let spec = CodeSpec::Rs { k: 1, m: nodes as usize - 1 };
    let placement = Placement::new(spec, nodes, (0..nodes).map(NodeId).collect()).unwrap();
    let layout = CodeLayout::new(spec).unwrap();
    let setup = EngineSetup {
        placement: &placement,
        layout: &layout,
        // Bytes cost nothing: service is the overhead plus the exponential.
        nodes: NodeModel {
            overhead_ns,
            rates_bytes_per_s: vec![1e18; nodes as usize],
            exp_mean_ns,
            cancel_in_service: true,
            servers,
            class_delays: Vec::new(),
            slowdown: None,
            outages: Vec::new(),
        },
        frontends: FrontendModel { admission, ..FrontendModel::instant() },
        network_latency_ns: 0,
        seed: 11,
    };
    Engine::new(setup, vec![Box::new(Direct { fan_out, k })]).run(requests).records
}

fn mean_waiting_ns(records: &model::RecordLog) -> f64 {
    let waits: Vec<u64> = records.all_tasks().iter().filter_map(|t| t.waiting_ns()).collect();
    waits.iter().map(|&w| w as f64).sum::<f64>() / waits.len() as f64
}

#[test]
fn mm1_mean_waiting_time_matches_the_formula() {
    // λ = 0.5 per ms, μ = 1 per ms: Wq = ρ / (μ - λ) = 1 ms.
    let requests = poisson_requests(2_000_000, 0.5e-6, 1);
    let records = run(shape(2, 1, 1, 0, 1_000_000), &requests);
    let measured = mean_waiting_ns(&records);
    let expected = 1_000_000.0;
    assert!((measured / expected - 1.0).abs() < 0.02, "M/M/1 Wq = {measured} ns, formula {expected} ns");
}

#[test]
fn mmc_mean_waiting_time_matches_erlang_c() {
    // c = 3 servers, λ = 2.4 per ms, μ = 1 per ms (ρ = 0.8): Wq = C(c, a) / (cμ − λ).
    let (servers, rate_per_ms, offered) = (3usize, 2.4f64, 2.4f64);
    let factorial = |n: usize| (1..=n).map(|i| i as f64).product::<f64>();
    let rho = offered / servers as f64;
    let tail = offered.powi(servers as i32) / factorial(servers) / (1.0 - rho);
    let head: f64 = (0..servers).map(|i| offered.powi(i as i32) / factorial(i)).sum();
    let erlang_c = tail / (head + tail);
    let expected = erlang_c / (servers as f64 - rate_per_ms) * 1e6;
    let requests = poisson_requests(2_000_000, rate_per_ms * 1e-6, 5);
    let records = run(Shape { servers, ..shape(2, 1, 1, 0, 1_000_000) }, &requests);
    let measured = mean_waiting_ns(&records);
    assert!((measured / expected - 1.0).abs() < 0.03, "M/M/3 Wq = {measured} ns, Erlang C {expected} ns");
    // And with as many servers as tasks can be in flight, nothing waits (M/M/∞).
    let records = run(Shape { servers: 64, ..shape(2, 1, 1, 0, 1_000_000) }, &requests[..200_000]);
    assert!(mean_waiting_ns(&records) < 1.0);
}

#[test]
fn md1_mean_waiting_time_matches_the_formula() {
    // λ = 0.6 per ms, D = 1 ms: Wq = ρ D / (2 (1 - ρ)) = 0.75 ms.
    let requests = poisson_requests(1_000_000, 0.6e-6, 2);
    let records = run(shape(2, 1, 1, 1_000_000, 0), &requests);
    let measured = mean_waiting_ns(&records);
    let expected = 0.6 * 1_000_000.0 / (2.0 * 0.4);
    assert!((measured / expected - 1.0).abs() < 0.02, "M/D/1 Wq = {measured} ns, formula {expected} ns");
    // Service is exactly D for every task.
    assert!(records.all_tasks().iter().all(|t| t.service_ns() == Some(1_000_000)));
}

#[test]
fn fork_join_with_cancellation_is_within_its_bounds() {
    // (n, k) = (4, 2), exponential service μ = 1 per ms, λ = 0.8 per ms.
    // Joshi, Liu and Soljanin (2014): Σ_{j<k} 1/((n-j)μ - λ) ≤ E[T] ≤ the
    // split-merge system's M/G/1 sojourn with S = X_(k:n).
    let (n, k, mu, lambda) = (4.0f64, 2.0f64, 1.0f64, 0.8f64);
    let requests = poisson_requests(400_000, lambda * 1e-6, 3);
    let records = run(shape(4, 4, 2, 0, 1_000_000), &requests);
    let mean_ms = records.requests().iter().map(|r| r.latency_ns() as f64).sum::<f64>() / records.len() as f64 / 1e6;
    let lower: f64 = (0..k as usize).map(|j| 1.0 / ((n - j as f64) * mu - lambda)).sum();
    let service_mean: f64 = (0..k as usize).map(|j| 1.0 / ((n - j as f64) * mu)).sum();
    let service_var: f64 = (0..k as usize).map(|j| (1.0 / ((n - j as f64) * mu)).powi(2)).sum();
    let second_moment = service_var + service_mean * service_mean;
    let upper = service_mean + lambda * second_moment / (2.0 * (1.0 - lambda * service_mean));
    assert!(lower <= mean_ms && mean_ms <= upper, "E[T] = {mean_ms} ms outside [{lower}, {upper}]");
    // Exactly k tasks of each request ran to completion; the others were cancelled.
    for record in records.iter().take(10_000) {
        assert_eq!(record.tasks.iter().filter(|t| !t.cancelled).count(), 2);
    }
}

fn mean_latency_ms(records: &model::RecordLog) -> f64 {
    records.requests().iter().map(|r| r.latency_ns() as f64).sum::<f64>() / records.len() as f64 / 1e6
}

#[test]
fn one_admission_slot_moves_the_m_m_1_queue_from_the_node_to_the_frontend() {
    // λ = 0.5 per ms, μ = 1 per ms: the sojourn is 1 / (μ - λ) = 2 ms, now spent waiting for
    // the frontend's one slot; the node never has a task waiting.
    let requests = poisson_requests(1_000_000, 0.5e-6, 4);
    let one_slot = AdmissionSettings { slots: Some(1), mode: AdmissionMode::NonBlocking };
    let records = run(Shape { admission: one_slot, ..shape(2, 1, 1, 0, 1_000_000) }, &requests);
    assert!(records.all_tasks().iter().all(|t| t.waiting_ns() == Some(0)), "one slot: no task waits at its node");
    let measured = mean_latency_ms(&records);
    assert!((measured / 2.0 - 1.0).abs() < 0.02, "sojourn {measured} ms, M/M/1 formula 2 ms");
}

#[test]
fn a_blocking_pool_of_two_slots_serving_first_one_of_two_is_an_m_m_1_queue_at_twice_the_rate() {
    // Blocking admission with L = 2 starts a request only when both slots are idle; the first of
    // its two exponential tasks to finish ends it and the other is cancelled, freeing both slots:
    // service Exp(2μ), so the sojourn is 1 / (2μ - λ) = 1 / (2 - 1.2) ms = 1.25 ms.
    let requests = poisson_requests(1_000_000, 1.2e-6, 5);
    let blocking = AdmissionSettings { slots: Some(2), mode: AdmissionMode::Blocking };
    let records = run(Shape { admission: blocking, ..shape(2, 2, 1, 0, 1_000_000) }, &requests);
    let measured = mean_latency_ms(&records);
    assert!((measured / 1.25 - 1.0).abs() < 0.02, "sojourn {measured} ms, M/M/1 at 2μ: 1.25 ms");
    // Both slots free together (the loser is cancelled at the winner's finish), so a non-blocking
    // pool, which admits on one idle slot, always finds two: the rules coincide, request for request.
    let non_blocking = AdmissionSettings { slots: Some(2), mode: AdmissionMode::NonBlocking };
    let same = run(Shape { admission: non_blocking, ..shape(2, 2, 1, 0, 1_000_000) }, &requests);
    assert!(same.requests().iter().zip(records.requests()).all(|(a, b)| a.completion_ns == b.completion_ns));
}
