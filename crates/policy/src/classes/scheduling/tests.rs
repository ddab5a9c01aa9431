//! The `jlwo` read policy: uniform k-of-n until a table exists; after a refresh (JLWO run as the
//! refresh work) each requested stripe's π is JLWO's for this frontend's rack, and plans draw
//! their k units with exactly those marginals.

use super::*;
use crate::ClusterView;
use codec::CodeSpec;
use model::{CodeLayout, ObjectId, PartitionId, Placement, QueueState, RequestId};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const SPEC: CodeSpec = CodeSpec::Rs { k: 4, m: 2 };
const RACKS: u32 = 8;

/// 16 nodes, node j in rack j mod 8; stripe s's unit u on node (s + u) mod 16, so its six units
/// sit in six distinct racks, and stripes 0–3 all use racks 3, 4 and 5.
struct RackView {
    placement: Placement,
    layout: CodeLayout,
    /// Racks the nodes are spread over (1: every node in rack 0).
    racks: u32,
}

impl RackView {
    fn new(stripes: u32) -> RackView {
        let mut placement = Placement::empty(SPEC, 16).unwrap();
        for s in 0..stripes {
            let nodes: Vec<NodeId> = (0..6).map(|u| NodeId((s + u) % 16)).collect();
            placement.push_stripe(&nodes).unwrap();
        }
        RackView { placement, layout: CodeLayout::new(SPEC).unwrap(), racks: RACKS }
    }
}

impl ClusterView for RackView {
    fn placement(&self) -> &Placement {
        &self.placement
    }
    fn layout(&self) -> &CodeLayout {
        &self.layout
    }
    fn node_rate_bytes_per_s(&self, _node: NodeId) -> f64 {
        1e8
    }
    fn node_task_overhead_ns(&self, _node: NodeId) -> u64 {
        0
    }
    fn frontend_count(&self) -> u32 {
        1
    }
    fn probe(&mut self, _node: NodeId) -> QueueState {
        panic!("jlwo probes nothing")
    }
    fn frontend_state(&self) -> crate::fec::FrontendState {
        crate::fec::FrontendState::unbounded()
    }
    fn node_rack(&self, node: NodeId) -> u16 {
        (node.0 % self.racks) as u16
    }
}

fn request(stripe: u32, class: u8) -> ReadRequest {
    // One partition per data unit: a stripe's first partition is 4·stripe.
    ReadRequest {
        id: RequestId(1),
        object: ObjectId(1),
        partition: PartitionId(stripe * 4),
        offset: 0,
        length: 1 << 20,
        arrival_ns: 0,
        class: 0,
        latency_class: class,
    }
}

/// How often each unit of `stripe` is read in `draws` plans, as a share of the plans.
fn unit_shares(policy: &mut JlwoRead, view: &mut RackView, stripe: u32, class: u8, draws: u32) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut reads = [0u32; 6];
    for _ in 0..draws {
        let plan = policy.plan(view, 0, &request(stripe, class), &mut rng);
        assert_eq!(plan.tasks.len(), 4);
        assert_eq!(plan.quorum, Quorum::FirstKOfN { k: 4 });
        let mut units: Vec<u8> = plan.tasks.iter().map(|t| t.unit).collect();
        units.sort_unstable();
        units.dedup();
        assert_eq!(units.len(), 4, "k distinct units");
        for task in &plan.tasks {
            assert_eq!(task.node, view.placement.node_of(StripeId(stripe), task.unit));
            reads[usize::from(task.unit)] += 1;
        }
    }
    reads.iter().map(|&r| f64::from(r) / f64::from(draws)).collect()
}

#[test]
fn without_a_table_every_unit_is_read_with_k_over_n() {
    let mut view = RackView::new(4);
    let mut policy = JlwoRead::new(JlwoReadSettings::default()).unwrap();
    assert_eq!(policy.new_stripe_racks(0), None, "nothing solved: new stripes placed as always");
    for share in unit_shares(&mut policy, &mut view, 1, 0, 30_000) {
        assert!((share - 4.0 / 6.0).abs() < 0.01, "{share}");
    }
}

#[test]
fn a_refresh_installs_jlwos_marginals_and_plans_follow_them() {
    let mut view = RackView::new(8);
    // 600 requests/s from rack 0 for stripes 0–3 (class 0) and 20/s for stripe 6 (class 1), units
    // of 250 KB: 2 ms at a queue's 1 Gbit/s cap, so racks 3–5, which every one of stripes 0–3
    // uses, would run their queues near 80 % under uniform π; the other racks have room.
    let settings = JlwoReadSettings {
        frontend_rack: 0,
        tolerance_relative: 1e-4,
        unit_service: ServiceMoments::deterministic(0.000_2),
        ..Default::default()
    };
    let mut policy = JlwoRead::new(settings).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for i in 0..6000u32 {
        policy.plan(&mut view, 0, &request(i % 4, 0), &mut rng);
    }
    for _ in 0..200 {
        policy.plan(&mut view, 0, &request(6, 1), &mut rng);
    }
    let work = policy.begin_refresh(&mut view, 0, &mut rng).expect("requests to solve for");
    assert!(policy.marginals(StripeId(0), 0).is_none(), "nothing installed before the work's result");
    policy.finish_refresh(work.run());
    let gauges: BTreeMap<&str, f64> = policy.gauges().into_iter().collect();
    assert_eq!(gauges["jlwo_files"], 5.0, "stripes 0–3 in class 0, stripe 6 in class 1");
    assert!(gauges["jlwo_objective_s"] > 0.0 && gauges["jlwo_failed_solves"] == 0.0);
    let row = policy.marginals(StripeId(0), 0).expect("a solved stripe").to_vec();
    assert!((row.iter().sum::<f64>() - 4.0).abs() < 1e-6 && row.iter().all(|p| (-1e-9..=1.0 + 1e-9).contains(p)));
    // Stripe 0's units 3, 4, 5 sit in the shared racks 3, 4, 5.
    let shared: f64 = row[3..6].iter().sum::<f64>() / 3.0;
    assert!(shared < 4.0 / 6.0 - 0.02, "JLWO reads the shared racks less: {row:?}");
    let shares = unit_shares(&mut policy, &mut view, 0, 0, 30_000);
    for (share, pi) in shares.iter().zip(&row) {
        assert!((share - pi).abs() < 0.012, "plans follow π: {shares:?} against {row:?}");
    }
    assert!(policy.marginals(StripeId(6), 1).is_some());
    assert!(policy.marginals(StripeId(6), 0).is_none() && policy.marginals(StripeId(5), 0).is_none());
    // Where new stripes of each class go: n distinct racks of the eight.
    for class in 0..2 {
        let racks = policy.new_stripe_racks(class).expect("a class with reads has racks for new stripes");
        let mut distinct = racks.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!((racks.len(), distinct.len()), (6, 6), "class {class}: {racks:?}");
        assert!(racks.iter().all(|&rack| u32::from(rack) < RACKS), "{racks:?}");
    }
    assert_eq!(policy.new_stripe_racks(2), None, "no class 3");
}

#[test]
fn without_distinct_racks_there_is_nothing_to_solve() {
    let mut view = RackView::new(2);
    view.racks = 1;
    let mut policy = JlwoRead::new(JlwoReadSettings::default()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    policy.plan(&mut view, 0, &request(0, 0), &mut rng);
    assert!(policy.begin_refresh(&mut view, 0, &mut rng).is_none(), "one rack: no stripe spans n racks");
    view.racks = RACKS;
    policy.plan(&mut view, 0, &request(0, 0), &mut rng);
    assert!(policy.begin_refresh(&mut view, 0, &mut rng).is_some(), "six racks: solvable");
    assert!(JlwoRead::new(JlwoReadSettings { class_weights: vec![], ..Default::default() }).is_err());
    assert!(JlwoRead::new(JlwoReadSettings { tor_bandwidth_bps: 0.0, ..Default::default() }).is_err());
}

#[test]
fn a_refresh_hands_out_each_racks_class_shares_and_the_weightier_class_gets_more() {
    let mut view = RackView::new(8);
    // Both classes read stripes 0–3 equally: JLWO splits each loaded rack's bandwidth by the
    // classes' weights (1 and 0.4), with no port cap to even them out.
    let settings = JlwoReadSettings {
        queue_bandwidth_max_bps: 10e9,
        unit_service: ServiceMoments::deterministic(0.000_2),
        ..Default::default()
    };
    let mut policy = JlwoRead::new(settings).unwrap();
    assert!(policy.node_class_shares().is_none(), "nothing solved yet: the configured shares stay");
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for i in 0..8000u32 {
        policy.plan(&mut view, 0, &request(i % 4, (i / 4 % 2) as u8), &mut rng);
    }
    let work = policy.begin_refresh(&mut view, 0, &mut rng).expect("requests to solve for");
    policy.finish_refresh(work.run());
    let shares = policy.node_class_shares().expect("a solve hands out shares");
    assert_eq!((shares.racks(), shares.classes()), (RACKS as usize, 2));
    // Stripes 0–3 use racks 0–7 between them (units on nodes s..s+5); racks 3–5 hold a unit of each.
    for rack in 3..6u16 {
        let row = shares.rack(rack).expect("a loaded rack has shares");
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-9, "rack {rack}: {row:?}");
        assert!(row[0] > row[1], "rack {rack}: class 1 (weight 1) over class 2 (weight 0.4): {row:?}");
        assert!(row[1] >= RackClassShares::SHARE_MIN, "rack {rack}: class 2 not starved: {row:?}");
    }
}

#[test]
fn a_failed_solve_installs_nothing_and_says_why() {
    let mut view = RackView::new(8);
    // 1 s units at a 1 Gbit/s cap: 600 reads/s saturate any split.
    let settings = JlwoReadSettings { unit_service: ServiceMoments::deterministic(1.0), ..Default::default() };
    let mut policy = JlwoRead::new(settings).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    for i in 0..6000u32 {
        policy.plan(&mut view, 0, &request(i % 4, 0), &mut rng);
    }
    let work = policy.begin_refresh(&mut view, 0, &mut rng).expect("requests to solve for");
    policy.finish_refresh(work.run());
    let why = policy.refresh_failure().expect("the solve failed");
    assert!(why.contains("saturates") || why.contains("bandwidth"), "{why}");
    let gauges: BTreeMap<&str, f64> = policy.gauges().into_iter().collect();
    assert_eq!((gauges["jlwo_failed_solves"], gauges["jlwo_files"]), (1.0, 0.0));
    assert!(policy.node_class_shares().is_none() && policy.new_stripe_racks(0).is_none(), "nothing installed");
}
