//! Opt-Lazy's refresh at the paper's scale (90 nodes, 2004 data partitions of RS(6,3), demand on
//! every partition), in its three parts: `begin_refresh` and `finish_refresh`, which the gateway
//! runs under its controller lock, and the work between them (the solve of problem (1)), which it
//! runs on a blocking thread without the lock. Reads wait only for the first two.

// criterion_group! defines an undocumented public function; nothing here is API.
#![allow(missing_docs)]

use codec::CodeSpec;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use model::{CodeLayout, NodeId, ObjectId, PartitionId, Placement, QueueState, ReadRequest, RequestId};
use optimize::Objective;
use policy::read::OptLazy;
use policy::{ClusterView, ReadPolicy, placement};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const NODES: u32 = 90;
const STRIPES: u32 = 334;

/// A cluster at the paper's scale with random standing queues.
struct PaperScale {
    placement: Placement,
    layout: CodeLayout,
    queues: Vec<u64>,
}

impl ClusterView for PaperScale {
    fn placement(&self) -> &Placement {
        &self.placement
    }
    fn layout(&self) -> &CodeLayout {
        &self.layout
    }
    fn node_rate_bytes_per_s(&self, _node: NodeId) -> f64 {
        5e6
    }
    fn node_task_overhead_ns(&self, _node: NodeId) -> u64 {
        4_000_000
    }
    fn frontend_count(&self) -> u32 {
        3
    }
    fn frontend_state(&self) -> policy::fec::FrontendState {
        policy::fec::FrontendState::unbounded()
    }
    fn probe(&mut self, node: NodeId) -> QueueState {
        QueueState { bytes: self.queues[node.index()], tasks: 1 }
    }
}

/// The view and an Opt-Lazy that planned a period of Zipf-like reads on every partition.
fn prepared() -> (PaperScale, OptLazy) {
    let spec: CodeSpec = "rs-6-3".parse().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let placement = placement::balanced_random(spec, NODES, STRIPES, &mut rng).unwrap();
    let queues = (0..NODES).map(|_| rng.random_range(0..4_000_000)).collect();
    let mut view = PaperScale { placement, layout: CodeLayout::new(spec).unwrap(), queues };
    let mut policy = OptLazy::new(4_000_000_000, Objective::L2, false, false);
    let partitions = view.placement.partition_count();
    for partition in 0..partitions {
        let reads = 1 + (2000.0 / (1.0 + f64::from(partition)).powf(0.9)) as u64;
        for read in 0..reads {
            let request = ReadRequest {
                id: RequestId(read),
                object: ObjectId(u64::from(partition)),
                partition: PartitionId(partition),
                offset: 0,
                length: 32 * 1024,
                arrival_ns: 0,
                class: 0,
                latency_class: 0,
            };
            policy.plan(&mut view, 0, &request, &mut rng);
        }
    }
    (view, policy)
}

fn bench(c: &mut Criterion) {
    let (mut view, policy) = prepared();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    c.bench_function("opt-lazy 2004x90 begin_refresh (locked)", |b| {
        b.iter_batched(
            || policy.clone(),
            |mut policy| {
                let work = policy.begin_refresh(&mut view, 1, &mut rng);
                (policy, work)
            },
            BatchSize::SmallInput,
        )
    });
    c.bench_function("opt-lazy 2004x90 refresh work (unlocked)", |b| {
        b.iter_batched(
            || policy.clone().begin_refresh(&mut view, 1, &mut rng).unwrap(),
            |work| work.run(),
            BatchSize::SmallInput,
        )
    });
    c.bench_function("opt-lazy 2004x90 finish_refresh (locked)", |b| {
        b.iter_batched(
            || {
                let mut policy = policy.clone();
                let result = policy.begin_refresh(&mut view, 1, &mut rng).unwrap().run();
                (policy, result)
            },
            |(mut policy, result)| {
                policy.finish_refresh(result);
                policy
            },
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
