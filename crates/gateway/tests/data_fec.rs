//! FAST CLOUD's read policies on real storage nodes: a read asks for every unit of the row and
//! is done at the first k (the rest cancelled on their nodes), decoding around a slow node; a
//! striped object's row is one plan; BAFEC refits its delay model from its own tasks' delays
//! (censored ones included) and the gateway shows it; the policies are refused where they cannot
//! run (a non-MDS code, BAFEC without slots) and the running policy stays.

mod data_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use data_support::{TestCluster, pattern};
use execution::AdmissionSettings;
use gateway::classes::{ClassId, ClassScheduling};
use gateway::data::MembershipConfig;
use gateway::data::cluster::class_shares::SharesPublisher;
use gateway::data::cluster::membership::{Membership, unix_now_ms};
use gateway::data::read::controller::{Controller, ControllerConfig};
use gateway::data::{ErasureData, ObjectData};
use meta::Layout;
use model::{NEVER, Outcome, Record};
use node::ServiceModel;
use policy::{FecSettings, PolicyKind, PolicySettings};

/// A data path over `cluster` with `slots` read task slots, and a FAST CLOUD controller on it.
async fn fec_data(
    cluster: &TestCluster,
    kind: PolicyKind,
    fec: FecSettings,
    slots: usize,
) -> (Arc<ErasureData>, Arc<Controller>) {
    let mut config = cluster.config("rs-6-3");
    config.admission.slots = Some(slots);
    let admission = config.admission;
    let data = Arc::new(ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap());
    let settings = PolicySettings { fec, ..Default::default() };
    let controller_config = ControllerConfig { policy: kind, settings, max_records: 1_000_000, ..Default::default() };
    let controller = Arc::new(Controller::with_admission(&controller_config, "rs-6-3", admission).unwrap());
    data.reads().attach_controller(Arc::clone(&controller)).unwrap();
    (data, controller)
}

fn finished(record: &Record) -> usize {
    record.tasks.iter().filter(|t| !t.cancelled && !t.failed && t.finish_ns != NEVER).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fec_read_asks_every_unit_is_done_at_the_first_k_and_decodes_around_a_slow_node() {
    let cluster = TestCluster::start(9, 9).await;
    let fec = FecSettings { fit_period_ms: 0, ..Default::default() };
    let (data, controller) = fec_data(&cluster, PolicyKind::FecFixed, fec, 18).await;
    let striped = pattern(600_000, 3);
    let striped_layout = data.write(striped.clone()).await.unwrap().layout;
    let small = pattern(3000, 4);
    let small_layout = data.write(small.clone()).await.unwrap().layout;
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    let Layout::Striped { segments } = &striped_layout else { panic!("a 600 kB object is striped") };
    let stripe = cluster.meta.get_stripe(segments[0].stripe).await.unwrap();
    // The node of data unit 0 takes 3 s a task: the row must be served by the other eight.
    let slow = stripe.placement[0].0 as usize;
    let model = ServiceModel { enabled: true, overhead_us: 3_000_000, ..Default::default() };
    cluster.client(slow).await.set_service_model(&model).await.unwrap();
    controller.take_records();

    assert!(data.read(&striped_layout, 0..striped.len() as u64).await.unwrap() == striped);
    let (records, _) = controller.take_records();
    assert_eq!(records.len(), 1, "the whole row of six data units is one plan");
    let record = &records[0];
    assert_eq!(record.request.outcome, Outcome::Ok);
    assert_eq!(record.tasks.len(), 9, "fec-fixed asks for n_max = every unit");
    assert_eq!(finished(record), 6, "done at the k-th finish: {:?}", record.tasks);
    assert!(record.tasks.iter().filter(|t| t.finish_ns == NEVER).all(|t| t.cancelled), "the rest cancelled");
    let slow_task = record.tasks.iter().find(|t| t.unit == 0).unwrap();
    assert!(slow_task.cancelled, "the slow node's task lost the race and was cancelled");
    assert!(record.request.degraded, "a parity unit stood in for data unit 0");
    assert_eq!(record.request.bytes, 6 * segments[0].unit_bytes, "the row's six whole units");

    // A range inside one unit, and a packed object: one unit's range, still n tasks and first k.
    let (start, end) = (10_000u64, 450_000u64);
    let part = data.read(&striped_layout, start..end).await.unwrap();
    assert!(part == striped.slice(start as usize..end as usize), "a ranged read across units");
    assert!(data.read(&small_layout, 0..small.len() as u64).await.unwrap() == small);
    let (records, _) = controller.take_records();
    assert_eq!(records.len(), 2, "one row read per stripe the reads touch");
    for record in &records {
        assert_eq!((record.tasks.len(), finished(record)), (9, 6), "{:?}", record.tasks);
    }
    assert_eq!(data.reads().pool().unwrap().occupancy(), (0, 0, 0), "every slot given back");
    cluster.client(slow).await.set_service_model(&ServiceModel::default()).await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bafec_refits_its_delay_model_from_its_own_tasks_and_shows_it() {
    let cluster = TestCluster::start(9, 9).await;
    let fec = FecSettings { fit_min_finished: 40, fit_period_ms: 60_000, ..Default::default() };
    let (data, controller) = fec_data(&cluster, PolicyKind::FecBafec, fec, 16).await;
    let body = pattern(600_000, 5);
    let layout = data.write(body.clone()).await.unwrap().layout;
    // Δ = 20 ms, 1/μ = 10 ms on every node (the emulated time replaces the real I/O's).
    let model = ServiceModel {
        enabled: true,
        delay_shift_us: 20_000,
        delay_exp_mean_us: 10_000,
        seed: 1,
        ..Default::default()
    };
    for node in 0..9 {
        let seeded = ServiceModel { seed: node as u64 + 1, ..model.clone() };
        cluster.client(node).await.set_service_model(&seeded).await.unwrap();
    }
    let before = controller.policy().gauges;
    assert_eq!(before.get("fec_delay_shift_seconds"), Some(&0.061), "the configured start: {before:?}");
    for _ in 0..40 {
        assert!(data.read(&layout, 0..body.len() as u64).await.unwrap() == body);
    }
    let (records, _) = controller.take_records();
    assert_eq!(records.len(), 40);
    assert!(records.iter().all(|r| r.tasks.len() == 9), "an idle frontend asks for n_max");
    assert!(records.iter().any(|r| r.tasks.iter().any(|t| t.cancelled)), "raced reads leave censored delays");
    controller.refresh_once(data.io()).await.unwrap();
    assert_eq!(controller.take_refresh_probes(), 0, "FAST CLOUD's refresh probes no node");
    let gauges = controller.policy().gauges;
    let shift = gauges["fec_fit_shift_seconds"];
    let mean = gauges["fec_fit_exp_mean_seconds"];
    // 240 finished and 120 censored delays: the mean's standard error is about 6 %; the node-side
    // time adds the real read to the emulated one.
    assert!((0.019..0.026).contains(&shift), "Δ {shift} s: {gauges:?}");
    assert!((0.006..0.015).contains(&mean), "1/μ {mean} s: {gauges:?}");
    assert_eq!(gauges["fec_delay_shift_seconds"], shift, "BAFEC's thresholds now come from the fit");
    for node in 0..9 {
        cluster.client(node).await.set_service_model(&ServiceModel::default()).await.unwrap();
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fec_policies_are_refused_where_they_cannot_run() {
    let lrc = Controller::new(&ControllerConfig::default(), "lrc-6-2-2").unwrap();
    let error = lrc.set_policy(PolicyKind::FecFixed, PolicySettings::default()).unwrap_err().to_string();
    assert!(error.contains("MDS"), "{error}");
    assert_eq!(lrc.policy().policy, ControllerConfig::default().policy, "the running policy stays");
    let unbounded = Controller::new(&ControllerConfig::default(), "rs-6-3").unwrap();
    let error = unbounded.set_policy(PolicyKind::FecBafec, PolicySettings::default()).unwrap_err().to_string();
    assert!(error.contains("slots"), "{error}");
    assert!(unbounded.set_policy(PolicyKind::FecGreedy, PolicySettings::default()).is_ok(), "greedy takes n_max");
    let bounded = AdmissionSettings { slots: Some(4), ..Default::default() };
    let fec = Controller::with_admission(&ControllerConfig::default(), "rs-6-3", bounded).unwrap();
    let bad = PolicySettings { fec: FecSettings { n_max: 10, ..Default::default() }, ..Default::default() };
    assert!(fec.set_policy(PolicyKind::FecFixed, bad).is_err(), "n_max above the code's n");
    assert!(fec.set_policy(PolicyKind::FecBafec, PolicySettings::default()).is_ok());
}

/// Xiang et al.'s `jlwo` policy on real nodes (9 nodes, 9 racks): every read asks k units of its
/// row drawn with π and decodes when a parity unit is among them; a refresh runs JLWO over what was
/// read and installs its table (the policy's gauges count the solved stripes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jlwo_reads_k_units_of_the_row_and_a_refresh_installs_its_table() {
    let (cluster, data, controller) = jlwo_on_nine_racks().await;
    let bodies: Vec<_> = (0..4).map(|i| pattern(700_000, 20 + i)).collect();
    let mut layouts = Vec::new();
    for body in &bodies {
        layouts.push(data.write(body.clone()).await.unwrap().layout);
    }
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    // Every object read in both latency classes: the class the S3 layer resolves reaches the
    // policy, which solves a π row per (stripe, class).
    for round in 0..6 {
        let class = ClassId(round % 2);
        for (body, layout) in bodies.iter().zip(&layouts) {
            let read = gateway::classes::scope(class, data.read(layout, 0..body.len() as u64)).await;
            assert!(read.unwrap() == *body, "identical");
        }
    }
    let (records, _) = controller.take_records();
    assert!(!records.is_empty());
    for record in &records {
        assert_eq!(record.tasks.len(), 6, "k = 6 units of the row: {:?}", record.tasks);
        assert_eq!(record.request.outcome, Outcome::Ok);
    }
    assert!(records.iter().any(|r| r.request.degraded), "a parity unit was drawn at least once");
    let read_as: BTreeSet<(u64, u8)> = records.iter().map(|r| (r.request.object.0, r.request.latency_class)).collect();
    let stripes = read_as.iter().map(|(stripe, _)| stripe).collect::<BTreeSet<_>>().len();
    assert_eq!(read_as.len(), 2 * stripes, "every stripe recorded in both classes: {read_as:?}");
    controller.refresh_once(data.io()).await.unwrap();
    let gauges = controller.policy().gauges;
    assert_eq!(gauges["jlwo_refreshes"], 1.0, "{gauges:?}");
    assert_eq!(gauges["jlwo_failed_solves"], 0.0, "{gauges:?}");
    assert_eq!(gauges["jlwo_files"], read_as.len() as f64, "every (stripe, class) read is solved: {gauges:?}");
    cluster.shutdown().await;
}

/// Nine nodes in nine racks under RS(6,3), read through a `jlwo` controller.
async fn jlwo_on_nine_racks() -> (TestCluster, Arc<ErasureData>, Arc<Controller>) {
    let cluster = TestCluster::start(9, 9).await;
    let data = Arc::new(ErasureData::new(cluster.config("rs-6-3"), Arc::clone(&cluster.meta)).await.unwrap());
    let mut settings = PolicySettings::default();
    settings.jlwo.unit_service = policy::classes::scheduling::ServiceMoments::deterministic(0.000_1);
    let config = ControllerConfig { policy: PolicyKind::Jlwo, settings, max_records: 1_000_000, ..Default::default() };
    let controller = Arc::new(Controller::new(&config, "rs-6-3").unwrap());
    data.reads().attach_controller(Arc::clone(&controller)).unwrap();
    (cluster, data, controller)
}

/// The class scheduling node `i` runs, as its stats say.
async fn running_scheduling(cluster: &TestCluster, i: usize) -> Option<ClassScheduling> {
    let stats = cluster.client(i).await.stats().await.unwrap();
    stats.class_scheduling.map(|scheduling| ClassScheduling::try_from(scheduling).unwrap())
}

/// JLWO's class shares reach the nodes: membership tells each node the reserved discipline of
/// `[classes]` with its own rack's published shares, and the configured ones again once none are
/// published; and a new stripe of each class is placed on the racks the solve chose for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jlwo_installs_its_class_shares_on_the_nodes_and_places_new_stripes_of_each_class() {
    let (cluster, data, controller) = jlwo_on_nine_racks().await;
    let membership = Membership::new(Arc::clone(data.io().cluster()), MembershipConfig::default());
    let configured = ClassScheduling::Reserved { shares: vec![0.7, 0.3] };
    membership.set_class_scheduling(configured.clone());
    let body = pattern(700_000, 40);
    let layout = data.write(body.clone()).await.unwrap().layout;
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    for round in 0..20 {
        let read = gateway::classes::scope(ClassId(round % 2), data.read(&layout, 0..body.len() as u64)).await;
        assert!(read.unwrap() == body, "identical");
    }
    assert!(controller.node_class_shares().is_empty(), "nothing solved yet");
    controller.refresh_once(data.io()).await.unwrap();
    let solved = controller.node_class_shares();
    assert!(!solved.is_empty(), "a solve gives the racks of the stripes read shares");
    // Published by the gateway holding the lease; membership reads what is published.
    let publisher = SharesPublisher::new("gw-test");
    assert!(publisher.publish(cluster.meta.as_ref(), solved.clone(), unix_now_ms(), 60_000).await.unwrap());
    membership.probe_round(unix_now_ms()).await.unwrap();
    assert_eq!(membership.rack_class_shares(), solved);
    for i in 0..9 {
        let info = cluster.node_info(i).await;
        let running = running_scheduling(&cluster, i).await;
        let expected = match solved.get(&info.rack) {
            Some(shares) => ClassScheduling::Reserved { shares: shares.clone() },
            None => configured.clone(),
        };
        assert_eq!(running, Some(expected.clone()), "node {i} in rack {}", info.rack);
        assert_eq!(membership.told(info.id), Some(expected));
    }
    // New stripes of a class go to the racks the solve chose for it, in its order.
    let placed = controller.new_stripe_racks();
    for class in 0..2u8 {
        let racks = &placed[&class];
        assert_eq!(data.io().placer().class_racks(class), racks.as_slice(), "the placer holds them");
        let big = pattern(6 << 20, 50 + u64::from(class));
        let layout = gateway::classes::scope(ClassId(class), data.write(big.clone())).await.unwrap().layout;
        let Layout::Striped { segments } = layout else { panic!("a 6 MiB object is striped") };
        for segment in &segments {
            let stripe = cluster.meta.get_stripe(segment.stripe).await.unwrap();
            let mut on = Vec::new();
            for node in &stripe.placement {
                on.push(cluster.meta.get_node(*node).await.unwrap().rack);
            }
            assert_eq!(&on, racks, "class {class}: stripe {} on {on:?}", segment.stripe);
        }
    }
    // A policy that solves no shares: every node back to the configured ones.
    assert!(publisher.publish(cluster.meta.as_ref(), Default::default(), unix_now_ms(), 60_000).await.unwrap());
    membership.probe_round(unix_now_ms()).await.unwrap();
    for i in 0..9 {
        let running = running_scheduling(&cluster, i).await;
        assert_eq!(running, Some(configured.clone()), "node {i}");
    }
    cluster.shutdown().await;
}
