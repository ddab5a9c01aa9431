//! Policy tests over a fake view with fixed queues.

use super::*;
use crate::{ClusterView, placement};
use codec::CodeSpec;
use model::{
    CodeLayout, NodeId, ObjectId, PartitionId, Placement, QueueState, Quorum, ReadRequest, RequestId, TaskRole,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// A policy of Hu et al. (they plan from the view and ignore the frontend setup), or a FAST CLOUD
/// one for RS(6,3) and 16 non-blocking slots.
fn build(kind: PolicyKind, settings: &PolicySettings) -> Box<dyn ReadPolicy + Send> {
    let layout = CodeLayout::new(RS).unwrap();
    let frontend = FrontendSetup { layout: &layout, slots: Some(16), admission: Admission::NonBlocking };
    build_read_policy(kind, settings, &frontend).unwrap()
}

pub(crate) struct FakeView {
    pub(crate) placement: Placement,
    layout: CodeLayout,
    pub(crate) queues: Vec<u64>,
    /// Tasks behind each node's queued bytes.
    tasks: Vec<u32>,
    /// Per-task overhead of every node.
    overhead_ns: u64,
    /// Service rate of each node.
    rates_bytes_per_s: Vec<f64>,
    pub(crate) probes: u32,
    /// Nodes the executor knows unavailable.
    down: Vec<bool>,
}

impl FakeView {
    pub(crate) fn new(spec: CodeSpec) -> FakeView {
        let placement = placement::balanced_random(spec, 20, 4, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
        FakeView {
            placement,
            layout: CodeLayout::new(spec).unwrap(),
            queues: vec![0; 20],
            tasks: vec![1; 20],
            overhead_ns: 0,
            rates_bytes_per_s: vec![1e6; 20],
            probes: 0,
            down: vec![false; 20],
        }
    }

    pub(crate) fn node_of_partition(&self, partition: u32, unit: u8) -> NodeId {
        let location = self.placement.locate(PartitionId(partition));
        self.placement.node_of(location.stripe, unit)
    }
}

impl ClusterView for FakeView {
    fn placement(&self) -> &Placement {
        &self.placement
    }
    fn layout(&self) -> &CodeLayout {
        &self.layout
    }
    fn node_rate_bytes_per_s(&self, node: NodeId) -> f64 {
        self.rates_bytes_per_s[node.index()]
    }
    fn node_task_overhead_ns(&self, _node: NodeId) -> u64 {
        self.overhead_ns
    }
    fn frontend_count(&self) -> u32 {
        1
    }
    fn frontend_state(&self) -> crate::fec::FrontendState {
        crate::fec::FrontendState::unbounded()
    }
    fn probe(&mut self, node: NodeId) -> QueueState {
        self.probes += 1;
        QueueState { bytes: self.queues[node.index()], tasks: self.tasks[node.index()] }
    }
    fn node_unavailable(&self, node: NodeId) -> bool {
        self.down[node.index()]
    }
}

pub(crate) fn request(partition: u32, length: u64) -> ReadRequest {
    ReadRequest {
        id: RequestId(1),
        object: ObjectId(9),
        partition: PartitionId(partition),
        offset: 100,
        length,
        arrival_ns: 0,
        class: 0,
        latency_class: 0,
    }
}

/// Whether `kind` with `settings`, refreshed once over `view`, reads a 1 KB range of partition 0
/// degraded.
fn reads_degraded(kind: PolicyKind, settings: &PolicySettings, view: &mut FakeView) -> bool {
    let mut policy = build(kind, settings);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    policy.refresh(view, 0, &mut rng);
    policy.plan(view, 0, &request(0, 1000), &mut rng).is_proactive_degraded()
}

pub(crate) const RS: CodeSpec = CodeSpec::Rs { k: 6, m: 3 };
pub(crate) const LRC: CodeSpec = CodeSpec::Lrc { k: 6, l: 2, r: 2 };

#[test]
fn names_round_trip() {
    for kind in PolicyKind::ALL {
        assert_eq!(kind.name().parse::<PolicyKind>().unwrap(), kind);
        assert_eq!(build(kind, &PolicySettings::default()).name(), kind.name());
    }
    assert!("lmlf_pw2".parse::<PolicyKind>().is_err());
}

#[test]
fn idle_cluster_reads_normally_everywhere() {
    for spec in [RS, LRC] {
        for kind in PolicyKind::ALL {
            let mut view = FakeView::new(spec);
            let mut policy = build(kind, &PolicySettings::default());
            let plan = policy.plan(&mut view, 0, &request(3, 1000), &mut ChaCha8Rng::seed_from_u64(2));
            plan.validate().unwrap();
            assert_eq!(plan.tasks[0].role, TaskRole::Normal, "{kind} on {spec}");
            assert_eq!(plan.tasks[0].node, view.node_of_partition(3, 3));
            assert_eq!((plan.tasks[0].offset, plan.tasks[0].length), (100, 1000));
        }
    }
}

#[test]
fn normal_carries_timeout_and_fallback_set() {
    let mut view = FakeView::new(LRC);
    let mut policy = build(PolicyKind::Normal, &PolicySettings::default());
    let plan = policy.plan(&mut view, 0, &request(1, 10), &mut ChaCha8Rng::seed_from_u64(2));
    assert_eq!(plan.quorum, Quorum::NormalThenFallback { timeout_ns: 1_000_000_000 });
    // LRC: the fallback is the local group of unit 1: units 0, 2 and local parity 6.
    let units: Vec<u8> = plan.tasks[1..].iter().map(|t| t.unit).collect();
    assert_eq!(units, vec![0, 2, 6]);
    assert_eq!(view.probes, 0);
}

#[test]
fn probe_counts_follow_the_paper() {
    let cases = [
        (RS, PolicyKind::Llf, 9),
        (RS, PolicyKind::Lmlf, 9),
        (RS, PolicyKind::LmlfPw2, 7),
        (RS, PolicyKind::LlfPw2, 7),
    ];
    let cases = cases.into_iter().chain([(LRC, PolicyKind::LmlfPw2, 4), (LRC, PolicyKind::Lmlf, 10)]);
    for (spec, kind, probes) in cases {
        let mut view = FakeView::new(spec);
        let mut policy = build(kind, &PolicySettings::default());
        policy.plan(&mut view, 0, &request(0, 10), &mut ChaCha8Rng::seed_from_u64(2));
        assert_eq!(view.probes, probes, "{kind} on {spec}");
    }
    let mut view = FakeView::new(RS);
    let mut lazy = build(PolicyKind::LmlfLazy, &PolicySettings::default());
    lazy.plan(&mut view, 0, &request(0, 10), &mut ChaCha8Rng::seed_from_u64(2));
    assert_eq!(view.probes, 0);
    lazy.refresh(&mut view, 0, &mut ChaCha8Rng::seed_from_u64(2));
    assert_eq!(view.probes, 20);
}

#[test]
fn hot_original_node_triggers_a_degraded_read_and_lmlf_is_more_reluctant_than_llf() {
    let mut view = FakeView::new(RS);
    let hot = view.node_of_partition(0, 0);
    // The original node's queue is 3 KB. A 1 KB read: LLF compares 4 KB with
    // 1 KB elsewhere; LMLF compares 1000·3500 with 6·1000·500 = 3.0 M < 3.5 M.
    view.queues[hot.index()] = 3000;
    for (kind, degraded) in [(PolicyKind::Llf, true), (PolicyKind::Lmlf, true)] {
        let plan = build(kind, &PolicySettings::default()).plan(
            &mut view,
            0,
            &request(0, 1000),
            &mut ChaCha8Rng::seed_from_u64(2),
        );
        assert_eq!(plan.is_proactive_degraded(), degraded, "{kind}");
        assert!(plan.tasks.iter().all(|t| t.node != hot));
    }
    // 2.4 KB queue: LMLF: 1000·2900 = 2.9 M < 3.0 M, so normal; LLF still degraded.
    view.queues[hot.index()] = 2400;
    let llf = build(PolicyKind::Llf, &PolicySettings::default()).plan(
        &mut view,
        0,
        &request(0, 1000),
        &mut ChaCha8Rng::seed_from_u64(2),
    );
    let lmlf = build(PolicyKind::Lmlf, &PolicySettings::default()).plan(
        &mut view,
        0,
        &request(0, 1000),
        &mut ChaCha8Rng::seed_from_u64(2),
    );
    assert!(llf.is_proactive_degraded());
    assert!(!lmlf.is_proactive_degraded());
}

/// A node whose queue is short in bytes but long in tasks: counted in bytes (the paper) it looks
/// cheap and every policy that reads queues serves the read there; counting each task's overhead,
/// they all route around it.
#[test]
fn counting_task_overhead_sees_a_queue_of_many_small_tasks() {
    let kinds = [PolicyKind::Llf, PolicyKind::Lmlf, PolicyKind::LlfPw2, PolicyKind::LmlfPw2, PolicyKind::LmlfLazy];
    for spec in [RS, LRC] {
        for kind in kinds {
            for count_task_overhead in [false, true] {
                let mut view = FakeView::new(spec);
                // 10 ms per task at 1 MB/s weighs 10 KB. Every node has one task of 1 KB queued;
                // the original node has 20 tasks of 20 bytes each.
                view.overhead_ns = 10_000_000;
                view.queues.iter_mut().for_each(|q| *q = 1000);
                let original = view.node_of_partition(0, 0);
                view.queues[original.index()] = 400;
                view.tasks[original.index()] = 20;
                let settings = PolicySettings { count_task_overhead, ..Default::default() };
                assert_eq!(reads_degraded(kind, &settings, &mut view), count_task_overhead, "{kind} on {spec}");
            }
        }
    }
}

/// A node 10× slower with an empty queue, helpers with 2 KB queued, a 1 KB read: the normal read
/// takes 10 ms there against 3 ms for a degraded read. The paper's marginal load charges the slowed
/// node only 10× per byte² (1000·500/1e5 = 5 against 6·1000·2500/1e6 = 15 on RS, 7.5 on LRC) and
/// reads normally; charged by drain time (÷ S once more) the degraded read wins.
#[test]
fn drain_time_marginal_load_routes_around_a_slowed_node() {
    for spec in [RS, LRC] {
        for kind in [PolicyKind::Lmlf, PolicyKind::LmlfPw2, PolicyKind::LmlfLazy] {
            for marginal_load in [MarginalLoad::Bytes, MarginalLoad::DrainTime] {
                let mut view = FakeView::new(spec);
                view.queues.iter_mut().for_each(|q| *q = 2000);
                let slowed = view.node_of_partition(0, 0);
                view.queues[slowed.index()] = 0;
                view.rates_bytes_per_s[slowed.index()] = 1e5;
                let settings = PolicySettings { marginal_load, ..Default::default() };
                let degraded = marginal_load == MarginalLoad::DrainTime;
                assert_eq!(
                    reads_degraded(kind, &settings, &mut view),
                    degraded,
                    "{kind} on {spec} by {marginal_load:?}"
                );
            }
        }
    }
}

/// On equal rates drain time is the paper's marginal load divided by one constant, so every
/// decision is the same.
#[test]
fn drain_time_decides_as_the_paper_on_equal_rates() {
    for spec in [RS, LRC] {
        for kind in [PolicyKind::Lmlf, PolicyKind::LmlfPw2, PolicyKind::LmlfLazy] {
            let decide = |marginal_load: MarginalLoad| {
                let mut view = FakeView::new(spec);
                // A power of two, so dividing by it is exact and ties stay ties.
                view.rates_bytes_per_s.iter_mut().for_each(|r| *r = f64::from(1u32 << 20));
                let mut policy = build(kind, &PolicySettings { marginal_load, ..Default::default() });
                let mut rng = ChaCha8Rng::seed_from_u64(11);
                let mut plans = Vec::new();
                for round in 0..300u64 {
                    for (node, queue) in view.queues.iter_mut().enumerate() {
                        // 0 to 512 KB, cubed so a few nodes stand far above the rest.
                        *queue = ((round * 7919 + node as u64 * 104_729) % 9).pow(3) * 1000;
                    }
                    policy.refresh(&mut view, round, &mut rng);
                    plans.push(policy.plan(
                        &mut view,
                        round,
                        &request((round % 24) as u32, 200 + round * 13),
                        &mut rng,
                    ));
                }
                plans
            };
            let paper = decide(MarginalLoad::Bytes);
            assert!(paper.iter().any(|p| p.is_proactive_degraded()), "{kind} on {spec}: some reads degrade");
            assert_eq!(paper, decide(MarginalLoad::DrainTime), "{kind} on {spec}");
        }
    }
}

#[test]
fn marginal_load_names_parse_and_deserialize() {
    assert_eq!("drain-time".parse::<MarginalLoad>().unwrap(), MarginalLoad::DrainTime);
    assert_eq!("bytes".parse::<MarginalLoad>().unwrap(), MarginalLoad::Bytes);
    let error = "seconds".parse::<MarginalLoad>().unwrap_err();
    assert!(error.contains("bytes or drain-time"), "{error}");
    assert_eq!(PolicySettings::default().marginal_load, MarginalLoad::Bytes);
}

/// Opt-Lazy counts the overhead in the demand: a hot partition of tiny reads whose bytes fit in the
/// other nodes' queues stays on its idle original node when counted in bytes, and is spread when
/// its reads' overhead counts.
#[test]
fn opt_lazy_counts_task_overhead_in_demand() {
    let normal_share = |count_task_overhead: bool| {
        let mut view = FakeView::new(RS);
        view.overhead_ns = 10_000_000;
        view.queues.iter_mut().for_each(|q| *q = 5000);
        let original = view.node_of_partition(0, 0);
        view.queues[original.index()] = 0;
        view.tasks[original.index()] = 0;
        let mut policy = OptLazy::new(1_000_000_000, optimize::Objective::L2, false, count_task_overhead);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        // 500 reads of 10 bytes in one second: 5 KB of bytes, but 5 s of overhead.
        for _ in 0..500 {
            policy.plan(&mut view, 0, &request(0, 10), &mut rng);
        }
        policy.refresh(&mut view, 1_000_000_000, &mut rng);
        policy.normal_probability(0)
    };
    let (bytes_only, with_overhead) = (normal_share(false), normal_share(true));
    assert!(bytes_only > 0.999, "{bytes_only}");
    assert!(with_overhead < 0.9, "{with_overhead}");
}

#[test]
fn full_probing_avoids_a_loaded_helper() {
    let mut view = FakeView::new(RS);
    let original = view.node_of_partition(0, 0);
    view.queues[original.index()] = 100_000;
    let busy_helper = view.node_of_partition(0, 7);
    view.queues[busy_helper.index()] = 50_000;
    let plan = build(PolicyKind::Lmlf, &PolicySettings::default()).plan(
        &mut view,
        0,
        &request(0, 1000),
        &mut ChaCha8Rng::seed_from_u64(2),
    );
    assert!(plan.is_proactive_degraded());
    assert_eq!(plan.tasks.len(), 6);
    assert!(plan.tasks.iter().all(|t| t.node != busy_helper));
}

#[test]
fn same_view_time_and_seed_give_the_same_decision() {
    for spec in [RS, LRC] {
        for kind in PolicyKind::ALL {
            let decide = |seed: u64| {
                let mut view = FakeView::new(spec);
                for (i, q) in view.queues.iter_mut().enumerate() {
                    *q = (i as u64 * 7919) % 5000;
                }
                let mut policy = build(kind, &PolicySettings::default());
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let mut plans = Vec::new();
                for round in 0..50u32 {
                    if round % 10 == 0 {
                        policy.refresh(&mut view, round as u64, &mut rng);
                    }
                    plans.push(policy.plan(
                        &mut view,
                        round as u64,
                        &request(round % 24, 500 + round as u64),
                        &mut rng,
                    ));
                }
                (plans, view.probes)
            };
            assert_eq!(decide(5), decide(5), "{kind} on {spec}");
        }
    }
}

#[test]
fn opt_lazy_spreads_a_hot_partition_by_its_table() {
    let mut view = FakeView::new(RS);
    let mut policy = OptLazy::new(1, optimize::Objective::L2, false, false);
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    // Partition 0 is hot: 100 requests of 10 KB in the last period.
    for _ in 0..100 {
        policy.plan(&mut view, 0, &request(0, 10_000), &mut rng);
    }
    policy.refresh(&mut view, 1, &mut rng);
    let summary = policy.last_solve().unwrap();
    assert_eq!(summary.partitions, 1);
    // Optimum: x·1 MB on the original = (1-x)·1 MB on each of 6 helpers ⇒ x = 6/7.
    let normal = policy.normal_probability(0);
    assert!((normal - 6.0 / 7.0).abs() < 1e-6, "{normal}");
    let degraded =
        (0..7000).filter(|_| policy.plan(&mut view, 2, &request(0, 10_000), &mut rng).is_proactive_degraded()).count();
    assert!((800..1200).contains(&degraded), "{degraded} of 7000, expected about 1000");
    assert_eq!(policy.normal_probability(5), 1.0);
}

#[test]
fn opt_lazy_plans_with_its_old_table_while_its_refresh_work_runs() {
    let mut view = FakeView::new(RS);
    let mut policy = OptLazy::new(1, optimize::Objective::L2, false, false);
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    for _ in 0..100 {
        policy.plan(&mut view, 0, &request(0, 10_000), &mut rng);
    }
    let work = policy.begin_refresh(&mut view, 1, &mut rng).expect("opt-lazy solves off the executor's lock");
    // An executor may run the work on another thread: it owns everything it needs.
    fn runs_anywhere<T: Send + 'static>(_: &T) {}
    runs_anywhere(&work);
    // Until the result is installed, every read is planned by the old (empty) table, and its demand
    // counts towards the next period.
    assert!(policy.last_solve().is_none());
    for _ in 0..50 {
        assert!(!policy.plan(&mut view, 2, &request(3, 10_000), &mut rng).is_proactive_degraded());
    }
    policy.finish_refresh(work.run());
    assert_eq!(policy.last_solve().unwrap().partitions, 1, "only the hot partition of the last period");
    assert!((policy.normal_probability(0) - 6.0 / 7.0).abs() < 1e-6);
    policy.refresh(&mut view, 3, &mut rng);
    assert_eq!(policy.last_solve().unwrap().partitions, 1, "the reads planned during the work, on partition 3");
    assert!(policy.normal_probability(3) < 1.0 && policy.normal_probability(0) == 1.0);
}

#[test]
fn refresh_in_halves_decides_as_refresh_at_once() {
    // The simulator refreshes at once; the gateway begins under its lock, works without it and
    // finishes under it again. The same view, reads and seed must give the same table.
    for kind in [PolicyKind::OptLazy, PolicyKind::LmlfLazy] {
        let tables = |halves: bool| {
            let mut view = FakeView::new(RS);
            // Unit 0 of each of the 4 stripes, each hot on its own node.
            for partition in [0, 6, 12, 18] {
                let location = view.placement.locate(PartitionId(partition));
                let original = view.placement.node_of(location.stripe, location.unit);
                view.queues[original.index()] = 3_000_000;
            }
            let mut policy = build(kind, &PolicySettings::default());
            let mut rng = ChaCha8Rng::seed_from_u64(9);
            for round in 0..40u32 {
                policy.plan(&mut view, 0, &request(6 * (round % 4), 20_000), &mut rng);
            }
            if halves {
                if let Some(work) = policy.begin_refresh(&mut view, 1, &mut rng) {
                    policy.finish_refresh(work.run());
                }
            } else {
                policy.refresh(&mut view, 1, &mut rng);
            }
            (0..200u32)
                .map(|round| policy.plan(&mut view, 2, &request(6 * (round % 4), 20_000), &mut rng))
                .collect::<Vec<_>>()
        };
        let plans = tables(true);
        assert!(plans.iter().any(|plan| plan.is_proactive_degraded()), "{kind} reads around the queued nodes");
        assert_eq!(plans, tables(false), "{kind}");
    }
}

#[test]
#[should_panic(expected = "opt-lazy installs only the directions its own work solved")]
fn a_refresh_result_of_other_work_is_refused() {
    let mut policy = OptLazy::new(1, optimize::Objective::L2, false, false);
    policy.finish_refresh(crate::RefreshWork::new(|| 7u32).run());
}

#[test]
fn opt_lazy_demand_is_a_rate_so_the_table_does_not_depend_on_the_period() {
    // Problem (1) adds D_i, "the total request size per second" (section
    // 2.3), to queues in bytes. Counting the bytes of the last T instead made
    // the queue weigh T times less, so a longer period left a standing
    // backlog on hot nodes (Opt-Lazy fell behind LMLF-Lazy at high load).
    let hot_partition = 0;
    let mut tables = Vec::new();
    for period_s in [1u64, 4] {
        let mut view = FakeView::new(RS);
        let hot = view.node_of_partition(hot_partition, 0);
        view.queues[hot.index()] = 1_000_000;
        let period_ns = period_s * model::NANOS_PER_SECOND;
        let mut policy = OptLazy::new(period_ns, optimize::Objective::L2, false, false);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        // 2 MB/s of demand for partition 0 during the period.
        for _ in 0..200 * period_s {
            policy.plan(&mut view, 0, &request(hot_partition, 10_000), &mut rng);
        }
        policy.refresh(&mut view, period_ns, &mut rng);
        tables.push(policy.normal_probability(hot_partition));
    }
    // Optimum with D = 2 MB/s, Q = 1 MB on the original node and idle
    // helpers: Q + x·D = 6·(1 - x)·D ⇒ x = 11/14, whatever the period.
    for normal in tables {
        assert!((normal - 11.0 / 14.0).abs() < 1e-6, "{normal}");
    }
}

/// A view that records which nodes are probed, in order.
pub(crate) struct RecordingView {
    pub(crate) inner: FakeView,
    pub(crate) probed: Vec<NodeId>,
}

impl ClusterView for RecordingView {
    fn placement(&self) -> &Placement {
        self.inner.placement()
    }
    fn layout(&self) -> &CodeLayout {
        self.inner.layout()
    }
    fn node_rate_bytes_per_s(&self, node: NodeId) -> f64 {
        self.inner.node_rate_bytes_per_s(node)
    }
    fn node_task_overhead_ns(&self, node: NodeId) -> u64 {
        self.inner.node_task_overhead_ns(node)
    }
    fn frontend_count(&self) -> u32 {
        1
    }
    fn frontend_state(&self) -> crate::fec::FrontendState {
        crate::fec::FrontendState::unbounded()
    }
    fn probe(&mut self, node: NodeId) -> QueueState {
        self.probed.push(node);
        self.inner.probe(node)
    }
}

/// The live gateway sends `probe_targets` in one round trip before `plan`: every policy must then
/// probe exactly those nodes, in that order, whatever the queues say.
#[test]
fn plan_probes_exactly_the_announced_targets() {
    use rand::RngCore;
    for spec in [RS, LRC] {
        for kind in PolicyKind::ALL {
            let mut view = RecordingView { inner: FakeView::new(spec), probed: Vec::new() };
            let mut policy = build(kind, &PolicySettings::default());
            let mut rng = ChaCha8Rng::seed_from_u64(7);
            let mut saw_probes = false;
            for round in 0..200u64 {
                // Queues that change between rounds, so answers differ from request to request.
                for (node, queue) in view.inner.queues.iter_mut().enumerate() {
                    *queue = (rng.next_u64() % 4) * 1000 * (node as u64 % 3);
                }
                let partition = (round % u64::from(view.inner.placement.partition_count())) as u32;
                let request = request(partition, 500 + round);
                let mut targets = Vec::new();
                policy.probe_targets(&view, round, &request, &mut rng.clone(), &mut targets);
                view.probed.clear();
                let plan = policy.plan(&mut view, round, &request, &mut rng);
                plan.validate().unwrap();
                assert_eq!(view.probed, targets, "{kind} on {spec}: round {round}");
                saw_probes |= !targets.is_empty();
            }
            let probes_per_request =
                matches!(kind, PolicyKind::Llf | PolicyKind::Lmlf | PolicyKind::LlfPw2 | PolicyKind::LmlfPw2);
            assert_eq!(saw_probes, probes_per_request, "{kind} on {spec}");
        }
    }
}

/// What `hedged` observes of a read of `length` bytes of `partition` whose normal task ran on
/// `node` and took `latency_ns`; `overran` when its hedge fired.
fn hedged_record(
    node: NodeId,
    length: u64,
    latency_ns: u64,
    overran: bool,
) -> (model::RequestRecord, Vec<model::TaskRecord>) {
    let request = model::RequestRecord {
        request: RequestId(1),
        frontend: model::FrontendId(0),
        object: ObjectId(9),
        partition: PartitionId(0),
        bytes: length,
        arrival_ns: 0,
        decision_start_ns: 0,
        decision_end_ns: 0,
        completion_ns: latency_ns,
        probes: 0,
        probe_wait_ns: 0,
        decision_cpu_ns: 0,
        degraded: overran,
        timed_out: overran,
        outcome: model::Outcome::Ok,
        class: 0,
        latency_class: 0,
    };
    let task = model::TaskRecord {
        node,
        unit: 0,
        role: TaskRole::Normal,
        cancelled: overran,
        cancel_ns: if overran { latency_ns } else { model::NEVER },
        bytes: length,
        enqueue_ns: 0,
        start_ns: 0,
        finish_ns: if overran { model::NEVER } else { latency_ns },
        failed: false,
    };
    (request, vec![task])
}

fn hedged(settings: HedgedSettings) -> Hedged {
    Hedged::new(settings, 1_000_000_000)
}

#[test]
fn hedged_waits_the_longest_delay_until_it_has_seen_reads_then_about_their_tail() {
    let mut view = FakeView::new(RS);
    let mut policy = hedged(HedgedSettings::default());
    let plan = policy.plan(&mut view, 0, &request(3, 4096), &mut ChaCha8Rng::seed_from_u64(2));
    assert_eq!(plan.quorum, Quorum::NormalThenFallback { timeout_ns: 1_000_000_000 });
    assert_eq!(plan.tasks.iter().filter(|t| t.role == TaskRole::Fallback).count(), 6);
    // 4 KiB reads of 2 ms, one in a hundred of 4 ms: p99 × 1.5 ≈ 6 ms.
    for i in 0..200u64 {
        let (request, tasks) =
            hedged_record(NodeId(i as u32 % 9), 4096, if i % 100 == 99 { 4_000_000 } else { 2_000_000 }, false);
        policy.observe(&request, &tasks);
    }
    let delay = policy.delay_ns(4096);
    assert!((3_000_000..=6_000_000).contains(&delay), "delay {delay} ns");
    // Another size class has seen nothing: still the longest.
    assert_eq!(policy.delay_ns(1 << 20), 1_000_000_000);
    let plan = policy.plan(&mut view, 0, &request(3, 4096), &mut ChaCha8Rng::seed_from_u64(2));
    assert_eq!(plan.quorum, Quorum::NormalThenFallback { timeout_ns: delay });
}

#[test]
fn hedged_goes_around_a_node_that_keeps_overrunning_and_explores_it_now_and_then() {
    let mut view = FakeView::new(RS);
    let slow = view.node_of_partition(3, 3);
    let settings = HedgedSettings { explore_ms: 200, ..HedgedSettings::default() };
    let mut policy = hedged(settings);
    for _ in 0..20 {
        let (request, tasks) = hedged_record(slow, 4096, 50_000_000, true);
        policy.observe(&request, &tasks);
    }
    assert!(policy.avoids(slow));
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let ms = 1_000_000;
    // The first read of it explores (a hedged normal read); the next ones, within 200 ms, go around.
    let explore = policy.plan(&mut view, 1000 * ms, &request(3, 4096), &mut rng);
    assert_eq!(explore.tasks[0].node, slow);
    assert!(matches!(explore.quorum, Quorum::NormalThenFallback { .. }));
    for at_ms in [1001, 1100, 1199] {
        let plan = policy.plan(&mut view, at_ms * ms, &request(3, 4096), &mut rng);
        plan.validate().unwrap();
        assert!(plan.is_proactive_degraded(), "at {at_ms} ms");
        assert!(plan.tasks.iter().all(|task| task.node != slow), "a task on the avoided node at {at_ms} ms");
    }
    let again = policy.plan(&mut view, 1200 * ms, &request(3, 4096), &mut rng);
    assert_eq!(again.tasks[0].node, slow, "explored again after 200 ms");
    // Its reads served in time again: no longer avoided.
    for _ in 0..30 {
        let (request, tasks) = hedged_record(slow, 4096, 2_000_000, false);
        policy.observe(&request, &tasks);
    }
    assert!(!policy.avoids(slow));
    let plan = policy.plan(&mut view, 1201 * ms, &request(3, 4096), &mut rng);
    assert_eq!(plan.tasks[0].node, slow);
}

#[test]
fn hedged_tells_copy_reads_its_delay_and_its_slow_nodes() {
    let view = FakeView::new(RS);
    let slow = view.node_of_partition(3, 3);
    let mut policy = hedged(HedgedSettings::default());
    assert_eq!(policy.copy_wait_ns(4096), Some(1_000_000_000), "the longest until it has seen reads");
    for i in 0..64u64 {
        let (request, tasks) = hedged_record(NodeId(i as u32 % 9), 4096, 2_000_000, false);
        policy.observe(&request, &tasks);
    }
    assert_eq!(policy.copy_wait_ns(4096), Some(policy.delay_ns(4096)));
    assert!(policy.copy_wait_ns(4096).unwrap() < 10_000_000);
    assert!(!policy.tries_last(slow));
    for _ in 0..20 {
        let (request, tasks) = hedged_record(slow, 4096, 50_000_000, true);
        policy.observe(&request, &tasks);
    }
    assert!(policy.tries_last(slow));
    let normal = build(PolicyKind::Normal, &PolicySettings::default());
    assert_eq!((normal.copy_wait_ns(4096), normal.tries_last(slow)), (None, false), "normal keeps the executor's");
}

#[test]
fn hedged_draws_no_recovery_set_through_an_avoided_node() {
    let mut view = FakeView::new(RS);
    let helper = view.node_of_partition(3, 6);
    let mut policy = hedged(HedgedSettings::default());
    for _ in 0..20 {
        let (request, tasks) = hedged_record(helper, 4096, 50_000_000, true);
        policy.observe(&request, &tasks);
    }
    for seed in 0..50 {
        let plan = policy.plan(&mut view, 0, &request(3, 4096), &mut ChaCha8Rng::seed_from_u64(seed));
        assert_eq!(plan.tasks[0].role, TaskRole::Normal);
        assert!(plan.tasks[1..].iter().all(|task| task.node != helper), "seed {seed}: {plan:?}");
    }
}

#[test]
fn hedged_reads_a_row_around_an_avoided_node_as_one_plan_of_k_plus_one_units() {
    let mut view = FakeView::new(RS);
    let stripe = view.placement.locate(PartitionId(0)).stripe;
    let slow = view.node_of_partition(0, 3);
    let mut policy = hedged(HedgedSettings::default());
    assert!(!policy.wants_row(&view, 0, stripe, 0..6), "no avoided node: a plan per unit");
    for _ in 0..20 {
        let (request, tasks) = hedged_record(slow, 4096, 50_000_000, true);
        policy.observe(&request, &tasks);
    }
    assert!(!policy.wants_row(&view, 0, stripe, 0..6), "due an exploration, which the unit's own plan makes");
    let explore = policy.plan(&mut view, 0, &request(3, 4096), &mut ChaCha8Rng::seed_from_u64(1));
    assert_eq!(explore.tasks[0].node, slow);
    let ms = 1_000_000;
    assert!(policy.wants_row(&view, ms, stripe, 0..6));
    assert!(!policy.wants_row(&view, ms, stripe, 2..4), "two units read no fewer as one plan");
    assert!(!policy.wants_row(&view, ms, stripe, 4..6), "the avoided unit is outside the row");
    let mut parities = std::collections::BTreeSet::<u8>::new();
    for seed in 0..20 {
        let plan = policy.plan_row(&mut view, ms, &request(0, 4096), 0..6, &mut ChaCha8Rng::seed_from_u64(seed));
        plan.validate().unwrap();
        assert_eq!(plan.quorum, Quorum::FirstKOfN { k: 6 });
        let units: std::collections::BTreeSet<u8> = plan.tasks.iter().map(|task| task.unit).collect();
        assert_eq!((plan.tasks.len(), units.len()), (7, 7), "k + 1 distinct units: {plan:?}");
        assert!(plan.tasks.iter().all(|task| task.node != slow), "seed {seed}: {plan:?}");
        for task in &plan.tasks {
            let role = if task.unit < 6 { TaskRole::Normal } else { TaskRole::Degraded };
            assert_eq!((task.role, task.offset, task.length), (role, 100, 4096), "{task:?}");
        }
        parities.extend(units.range(6..));
    }
    assert_eq!(parities.len(), 3, "the parities read are spread: {parities:?}");
    // A row plan's record says nothing of one node: the avoided node stays avoided.
    let (row_request, mut row_tasks) = hedged_record(slow, 4096, 2_000_000, false);
    row_tasks.push(model::TaskRecord { node: view.node_of_partition(0, 0), ..row_tasks[0] });
    for _ in 0..30 {
        policy.observe(&row_request, &row_tasks);
    }
    assert!(policy.avoids(slow));
    let lrc = FakeView::new(LRC);
    let lrc_stripe = lrc.placement.locate(PartitionId(0)).stripe;
    let lrc_slow = lrc.node_of_partition(0, 3);
    let mut policy = hedged(HedgedSettings::default());
    for _ in 0..20 {
        let (request, tasks) = hedged_record(lrc_slow, 4096, 50_000_000, true);
        policy.observe(&request, &tasks);
    }
    policy.plan(&mut FakeView::new(LRC), 0, &request(3, 4096), &mut ChaCha8Rng::seed_from_u64(1));
    assert!(!policy.wants_row(&lrc, ms, lrc_stripe, 0..6), "an LRC's local sets are cheaper than a row");
}

#[test]
fn hedged_reads_a_row_around_a_down_node_with_no_spare() {
    let mut view = FakeView::new(RS);
    let stripe = view.placement.locate(PartitionId(0)).stripe;
    let down = view.node_of_partition(0, 2);
    view.down[down.index()] = true;
    let mut policy = hedged(HedgedSettings::default());
    assert!(policy.wants_row(&view, 0, stripe, 0..6), "a Down node is gone around from the first read");
    for seed in 0..20 {
        let plan = policy.plan_row(&mut view, 0, &request(0, 4096), 0..6, &mut ChaCha8Rng::seed_from_u64(seed));
        plan.validate().unwrap();
        assert_eq!(plan.quorum, Quorum::FirstKOfN { k: 6 });
        let units: std::collections::BTreeSet<u8> = plan.tasks.iter().map(|task| task.unit).collect();
        assert_eq!((plan.tasks.len(), units.len()), (6, 6), "k distinct units, no spare: {plan:?}");
        assert!(plan.tasks.iter().all(|task| task.node != down), "seed {seed}: {plan:?}");
    }
    // A slow node elsewhere in the stripe brings the spare back.
    let slow = view.node_of_partition(0, 5);
    for _ in 0..20 {
        let (request, tasks) = hedged_record(slow, 4096, 50_000_000, true);
        policy.observe(&request, &tasks);
    }
    policy.plan(&mut view, 0, &request(5, 4096), &mut ChaCha8Rng::seed_from_u64(1));
    let plan = policy.plan_row(&mut view, 1_000_000, &request(0, 4096), 0..4, &mut ChaCha8Rng::seed_from_u64(1));
    assert_eq!(plan.tasks.len(), 7, "{plan:?}");
    assert!(plan.tasks.iter().all(|task| task.node != down && task.node != slow), "{plan:?}");
}

#[test]
fn hedged_settings_out_of_range_are_refused() {
    assert!(HedgedSettings::default().validate().is_ok());
    let refused = |settings: HedgedSettings| settings.validate().unwrap_err();
    assert!(refused(HedgedSettings { hedge_quantile: 1.0, ..HedgedSettings::default() }).contains("hedge_quantile"));
    assert!(refused(HedgedSettings { hedge_multiplier: 0.5, ..HedgedSettings::default() }).contains("multiplier"));
    assert!(refused(HedgedSettings { hedge_min_ms: 0.0, ..HedgedSettings::default() }).contains("hedge_min_ms"));
    assert!(refused(HedgedSettings { slow_share: 1.0, ..HedgedSettings::default() }).contains("slow_share"));
    assert!(refused(HedgedSettings { explore_ms: 0, ..HedgedSettings::default() }).contains("explore_ms"));
    let settings = PolicySettings {
        hedged: HedgedSettings { slow_share: 0.0, ..HedgedSettings::default() },
        ..PolicySettings::default()
    };
    let layout = CodeLayout::new(RS).unwrap();
    let frontend = FrontendSetup { layout: &layout, slots: None, admission: Admission::NonBlocking };
    let error = build_read_policy(PolicyKind::Hedged, &settings, &frontend).err().unwrap().to_string();
    assert!(error.contains("hedged settings"), "{error}");
    assert_eq!("hedged".parse::<PolicyKind>().unwrap(), PolicyKind::Hedged);
    assert!(!PolicyKind::Hedged.probes_nodes());
}
