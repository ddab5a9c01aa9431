//! The read controller on real storage nodes: every policy of Hu et al. serves every byte (packed
//! and striped objects, RS and LRC) and records each read in the shared schema with the probes it
//! announced; LMLF-PW2 reads around a node with a standing queue; Normal launches its degraded read
//! after the timeout and cancels the loser; a planned read whose node died falls back and is still
//! served, and once its node is Down the policies plan around it without probing it; a read of an
//! open packed stripe is recorded without tasks; records are taken once and switching policy takes
//! effect; a probe of a hung node gives up after the probe timeout; the refresh task runs every
//! period until stopped; reads through a bounded admission pool keep at most its slots in flight;
//! `hedged` reads a row around a node it avoids or knows Down as one plan of k + 1 units.

mod data_support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use data_support::{TestCluster, pattern};
use gateway::data::read::controller::{Controller, ControllerConfig};
use gateway::data::{ErasureData, ObjectData};
use meta::Layout;
use model::{NEVER, Outcome, Record, TaskRole};
use node::ServiceModel;
use policy::{PolicyKind, PolicySettings};

/// Writes small (packed) and large (striped) objects and seals the packed stripes.
async fn write_objects(data: &ErasureData) -> Vec<(Bytes, Layout)> {
    let mut objects = Vec::new();
    for (i, size) in [1usize, 3000, 40_000, 300_000].into_iter().enumerate() {
        let body = pattern(size, 100 + i as u64);
        let layout = data.write(body.clone()).await.unwrap().layout;
        objects.push((body, layout));
    }
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    objects
}

async fn with_controller(data: &ErasureData, code: &str, policy: PolicyKind) -> Arc<Controller> {
    let config = ControllerConfig { policy, max_records: 1_000_000, ..Default::default() };
    let controller = Arc::new(Controller::new(&config, code).unwrap());
    data.reads().attach_controller(Arc::clone(&controller)).unwrap();
    controller
}

fn check_record_times(record: &Record) {
    let r = &record.request;
    assert!(r.arrival_ns <= r.decision_start_ns && r.decision_start_ns <= r.decision_end_ns);
    assert!(r.decision_end_ns <= r.completion_ns, "{r:?}");
    assert!(r.decision_end_ns - r.decision_start_ns >= r.probe_wait_ns);
    // The deciding thread's CPU time, where it was sampled, lies inside the wall-clock decision
    // (the two clocks are read microseconds apart, hence the slack).
    assert!(r.decision_cpu_ns <= r.decision_compute_ns() + 5_000, "{r:?}");
    for task in &record.tasks {
        if !task.cancelled && task.start_ns != NEVER {
            assert!(task.enqueue_ns <= task.start_ns && task.start_ns <= task.finish_ns, "{task:?}");
        }
    }
}

async fn every_policy_reads_every_byte(code: &str, nodes: usize, pw2_probes: u32) {
    let cluster = TestCluster::start(nodes, nodes).await;
    let data = ErasureData::new(cluster.config(code), Arc::clone(&cluster.meta)).await.unwrap();
    let objects = write_objects(&data).await;
    let controller = with_controller(&data, code, PolicyKind::Normal).await;
    for kind in PolicyKind::ALL {
        controller.set_policy(kind, PolicySettings::default()).unwrap();
        assert_eq!(controller.policy().policy, kind);
        if matches!(kind, PolicyKind::LmlfLazy | PolicyKind::OptLazy) {
            controller.take_refresh_probes();
            controller.refresh_once(data.io()).await.unwrap();
            assert_eq!(controller.take_refresh_probes(), nodes as u64, "a refresh probes every node once");
            assert_eq!(controller.take_refresh_probes(), 0, "refresh probes are taken once");
        }
        let mut reads = 0;
        for (body, layout) in &objects {
            let read = data.read(layout, 0..body.len() as u64).await.unwrap();
            assert!(read == *body, "{kind} on {code}: {} B object read back identical", body.len());
            if body.len() > 10 {
                let (start, end) = (body.len() as u64 / 3, body.len() as u64 / 2);
                let part = data.read(layout, start..end).await.unwrap();
                assert!(part == body.slice(start as usize..end as usize), "{kind} on {code}: ranged read");
            }
            reads += 1;
        }
        let (records, dropped) = controller.take_records();
        assert_eq!(dropped, 0);
        assert!(records.len() >= reads, "{kind}: one record per unit range read at least");
        // One decision in `cpu_sample_every` (8 by default) measures its CPU time, and deciding
        // costs some; among n consecutive decisions that is n / 8 rounded down or up.
        let measured = records.iter().filter(|r| r.request.decision_cpu_ns > 0).count();
        let every = ControllerConfig::default().cpu_sample_every as usize;
        assert!(
            (records.len() / every..=records.len().div_ceil(every)).contains(&measured),
            "{kind}: {measured} of {} decisions measured their CPU time",
            records.len()
        );
        for record in &records {
            assert_eq!(record.request.outcome, Outcome::Ok);
            check_record_times(record);
            let expected_probes = match kind {
                PolicyKind::LlfPw2 | PolicyKind::LmlfPw2 => pw2_probes,
                PolicyKind::Llf | PolicyKind::Lmlf => nodes.min(if code.starts_with("rs") { 9 } else { 10 }) as u32,
                _ => 0,
            };
            assert_eq!(record.request.probes, expected_probes, "{kind} on {code}");
            assert!(!record.tasks.is_empty());
        }
        assert!(controller.take_records().0.is_empty(), "records are taken once");
    }
    assert!(controller.counters().refresh_probes.load(std::sync::atomic::Ordering::Relaxed) >= 2 * nodes as u64);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_policy_reads_every_byte_rs() {
    every_policy_reads_every_byte("rs-6-3", 9, 7).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_policy_reads_every_byte_lrc() {
    // PW2 on LRC probes the original node and its local group of three.
    every_policy_reads_every_byte("lrc-6-2-2", 10, 4).await;
}

/// The node holding data unit 0 of a striped object's first stripe.
async fn first_unit_node(cluster: &TestCluster, layout: &Layout) -> usize {
    let Layout::Striped { segments } = layout else { panic!("expected a striped layout") };
    let stripe = cluster.meta.get_stripe(segments[0].stripe).await.unwrap();
    stripe.placement[0].0 as usize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lmlf_pw2_reads_around_a_queue_and_normal_waits_for_its_timeout() {
    let cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    let data = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap();
    let body = pattern(60_000, 7);
    let layout = data.write(body.clone()).await.unwrap().layout;
    let hot = first_unit_node(&cluster, &layout).await;
    // A standing queue: evenly spaced 1 MiB background tasks that each take longer (40 ms) than the
    // gap (33 ms), so the backlog only grows and every probe sees at least one MiB. (With the gap
    // equal to the service time, timer jitter left moments with an empty node, and a probe there
    // rightly chose the normal read.)
    let busy = ServiceModel {
        enabled: true,
        overhead_us: 40_000,
        background_tasks_per_s: 30.0,
        background_task_bytes: 1 << 20,
        background_poisson: false,
        ..Default::default()
    };
    cluster.client(hot).await.set_service_model(&busy).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let controller = with_controller(&data, "rs-6-3", PolicyKind::LmlfPw2).await;
    let unit_bytes = 10_000; // 60,000 B over six data units
    for _ in 0..10 {
        let read = data.read(&layout, 0..unit_bytes).await.unwrap();
        assert!(read == body.slice(..unit_bytes as usize));
    }
    let (records, _) = controller.take_records();
    assert_eq!(records.len(), 10);
    for record in &records {
        assert!(record.request.degraded, "LMLF-PW2 reads around the queued node: {record:?}");
        assert!(record.tasks.iter().all(|t| t.role == TaskRole::Degraded && t.node.0 != u32::MAX));
        assert_eq!(record.request.probes, 7);
        assert!(record.request.probe_wait_ns > 0);
    }
    let degraded = data.io().counters().degraded_reads.load(std::sync::atomic::Ordering::Relaxed);
    assert!(degraded >= 10, "planned degraded reads are counted like the robust ones: {degraded}");

    // Normal with a short timeout: the normal task waits behind the queue, the fallback wins.
    let settings = PolicySettings { normal_timeout_ms: 20, ..Default::default() };
    controller.set_policy(PolicyKind::Normal, settings).unwrap();
    let slow = ServiceModel { enabled: true, overhead_us: 2_000_000, ..Default::default() };
    cluster.client(hot).await.set_service_model(&slow).await.unwrap();
    let started = std::time::Instant::now();
    let read = data.read(&layout, 0..unit_bytes).await.unwrap();
    assert!(read == body.slice(..unit_bytes as usize));
    assert!(started.elapsed() < Duration::from_secs(1), "the fallback did not wait for the slow node");
    let (records, _) = controller.take_records();
    let record = &records[0];
    assert!(record.request.timed_out && record.request.degraded, "{record:?}");
    assert_eq!(record.request.probes, 0);
    assert!(record.tasks[0].cancelled, "the slow normal task was cancelled");
    let fallback_finish_ns = record.tasks[1..].iter().map(|t| t.finish_ns).max().unwrap();
    assert!(
        record.tasks[0].cancel_ns >= fallback_finish_ns && record.tasks[0].cancel_ns <= record.request.completion_ns,
        "cancelled once the fallback had answered: {:?}",
        record.tasks
    );
    assert!(record.tasks[1..].iter().all(|t| t.role == TaskRole::Fallback && !t.cancelled && t.finish_ns != NEVER));
    check_record_times(record);
    cluster.client(hot).await.set_service_model(&ServiceModel::default()).await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planned_read_whose_node_died_is_served_and_recorded_degraded() {
    let mut cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    let data = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap();
    let body = pattern(60_000, 8);
    let layout = data.write(body.clone()).await.unwrap().layout;
    let victim = first_unit_node(&cluster, &layout).await;
    // Every node's rate fixed alike: rates measured from the write differ by whatever else the
    // machine runs, and LMLF-Lazy reads around a node it measured several times slower.
    let alike = ServiceModel { enabled: true, rate_bytes_per_s: 1e9, ..Default::default() };
    for node in 0..9 {
        cluster.client(node).await.set_service_model(&alike).await.unwrap();
    }
    let controller = with_controller(&data, "rs-6-3", PolicyKind::LmlfLazy).await;
    controller.refresh_once(data.io()).await.unwrap();
    // Stopped but still Up in the metadata (membership has not noticed), and idle in the lazy
    // table: LMLF-Lazy plans the normal read, which fails; the robust read serves it.
    cluster.stop(victim).await;
    let expect_degraded = |records: &[Record], what: &str| {
        assert_eq!(records.len(), 1, "{what}");
        let request = &records[0].request;
        assert!(request.degraded && request.outcome == Outcome::Ok, "{what}: {request:?}");
    };
    let read = data.read(&layout, 0..10_000).await.unwrap();
    assert!(read == body.slice(..10_000));
    expect_degraded(&controller.take_records().0, "lmlf-lazy");
    assert_eq!(controller.counters().fallbacks.load(std::sync::atomic::Ordering::Relaxed), 1);
    // Normal's own fallback set serves it, at once (the failure does not wait for the timeout).
    let normal_read_at_once = async |what: &str| -> Vec<Record> {
        controller.set_policy(PolicyKind::Normal, PolicySettings::default()).unwrap();
        let started = std::time::Instant::now();
        assert!(data.read(&layout, 0..10_000).await.unwrap() == body.slice(..10_000));
        assert!(started.elapsed() < Duration::from_millis(900), "{what}: no wait for the 1 s timeout");
        let records = controller.take_records().0;
        expect_degraded(&records, what);
        records
    };
    let records = normal_read_at_once("normal").await;
    assert!(!records[0].request.timed_out);
    // LMLF-PW2's probe of the dead node fails: it looks full, and the plan reads around it.
    controller.set_policy(PolicyKind::LmlfPw2, PolicySettings::default()).unwrap();
    assert!(data.read(&layout, 0..10_000).await.unwrap() == body.slice(..10_000));
    let records = controller.take_records().0;
    expect_degraded(&records, "lmlf-pw2");
    assert!(records[0].tasks.iter().all(|t| t.role == TaskRole::Degraded));
    assert_eq!(controller.counters().fallbacks.load(std::sync::atomic::Ordering::Relaxed), 1);
    // Once membership marks it Down, the policies go on planning, with the node full in their
    // view and never probed; a task planned on it fails at once.
    cluster.kill(victim).await;
    let counter = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    let sent_before = counter(&controller.counters().request_probes);
    assert!(data.read(&layout, 0..10_000).await.unwrap() == body.slice(..10_000));
    let records = controller.take_records().0;
    expect_degraded(&records, "lmlf-pw2, node down");
    assert_eq!(records[0].request.probes, 6, "the Down node is answered for, not probed");
    assert_eq!(counter(&controller.counters().request_probes) - sent_before, 6);
    assert!(records[0].tasks.iter().all(|t| t.role == TaskRole::Degraded && !t.failed));
    let records = normal_read_at_once("normal, node down").await;
    let normal = &records[0].tasks[0];
    assert!(normal.role == TaskRole::Normal && normal.failed && normal.start_ns == NEVER, "{normal:?}");
    controller.set_policy(PolicyKind::LmlfLazy, PolicySettings::default()).unwrap();
    controller.take_refresh_probes();
    controller.refresh_once(data.io()).await.unwrap();
    assert_eq!(controller.take_refresh_probes(), 8, "a refresh probes the eight nodes that are Up");
    let read = data.read(&layout, 0..body.len() as u64).await.unwrap();
    assert!(read == body);
    let records = controller.take_records().0;
    assert!(!records.is_empty());
    for record in &records {
        assert!(record.tasks.iter().all(|t| !t.failed), "the lazy table keeps reads off the Down node");
        assert_eq!(record.request.outcome, Outcome::Ok);
    }
    assert_eq!(counter(&controller.counters().bypassed), 0, "every read was planned");
    assert_eq!(counter(&controller.counters().fallbacks), 1, "and none fell back since the first");
    cluster.shutdown().await;
}

/// A small object read while its packed stripe is still open comes from a replica, without a
/// plan; it is recorded all the same, with no tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_an_open_packed_stripe_is_recorded_without_tasks() {
    let cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.seal_after_ms = 600_000;
    let data = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap();
    let controller = with_controller(&data, "rs-6-3", PolicyKind::LmlfPw2).await;
    let body = pattern(3000, 11);
    let layout = data.write(body.clone()).await.unwrap().layout;
    assert!(matches!(layout, Layout::Packed { .. }), "{layout:?}");
    assert!(data.read(&layout, 0..body.len() as u64).await.unwrap() == body);
    let records = controller.take_records().0;
    assert_eq!(records.len(), 1);
    let request = &records[0].request;
    assert!(records[0].tasks.is_empty(), "{:?}", records[0].tasks);
    assert_eq!((request.outcome, request.bytes, request.probes), (Outcome::Ok, 3000, 0));
    assert!(!request.degraded);
    assert!(request.arrival_ns == request.decision_end_ns && request.completion_ns > request.arrival_ns);
    assert_eq!(controller.counters().planned_reads.load(std::sync::atomic::Ordering::Relaxed), 0);
    // Sealed, the same object is read as the policy plans.
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    assert!(data.read(&layout, 0..body.len() as u64).await.unwrap() == body);
    let records = controller.take_records().0;
    assert_eq!(records.len(), 1);
    assert!(!records[0].tasks.is_empty());
    assert_eq!(records[0].request.probes, 7);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_beyond_the_limit_are_counted_and_dropped() {
    let cluster = TestCluster::start(9, 9).await;
    let data = ErasureData::new(cluster.config("rs-6-3"), Arc::clone(&cluster.meta)).await.unwrap();
    let objects = write_objects(&data).await;
    let config = ControllerConfig { max_records: 2, ..Default::default() };
    let controller = Arc::new(Controller::new(&config, "rs-6-3").unwrap());
    data.reads().attach_controller(Arc::clone(&controller)).unwrap();
    assert!(data.reads().attach_controller(Arc::clone(&controller)).is_err(), "one controller per data path");
    for (body, layout) in &objects {
        data.read(layout, 0..body.len() as u64).await.unwrap();
    }
    let (records, dropped) = controller.take_records();
    assert_eq!(records.len(), 2);
    assert!(dropped >= 2, "dropped {dropped}");
    assert_eq!(controller.take_records().1, 0, "the count restarts after a take");
    cluster.shutdown().await;
}

/// A node that accepts connections but never answers (hung, yet still Up in the metadata):
/// LMLF-PW2's probe of it gives up after `probe_timeout_ms`, not the node RPC timeout, the node
/// looks full, and the read goes around it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_of_a_hung_node_gives_up_after_the_probe_timeout() {
    let mut cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    let rpc_timeout = Duration::from_millis(config.node_rpc_timeout_ms);
    let data = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap();
    let body = pattern(60_000, 9);
    let layout = data.write(body.clone()).await.unwrap().layout;
    let victim = first_unit_node(&cluster, &layout).await;
    let config =
        ControllerConfig { policy: PolicyKind::LmlfPw2, probe_timeout_ms: 200, max_records: 100, ..Default::default() };
    let controller = Arc::new(Controller::new(&config, "rs-6-3").unwrap());
    data.reads().attach_controller(Arc::clone(&controller)).unwrap();
    let victim_info = cluster.node_info(victim).await;
    cluster.stop(victim).await;
    // Its address now takes connections and never answers; the pooled connection is dropped so
    // the probe meets the hung listener.
    let hung = tokio::net::TcpListener::bind(&cluster.addresses[victim]).await.unwrap();
    let holder = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = hung.accept().await {
            open.push(socket);
        }
    });
    data.io().cluster().forget(victim_info.id);
    let started = std::time::Instant::now();
    let read = data.read(&layout, 0..10_000).await.unwrap();
    let elapsed = started.elapsed();
    assert!(read == body.slice(..10_000));
    let records = controller.take_records().0;
    assert_eq!(records.len(), 1);
    let request = &records[0].request;
    assert!(
        (200_000_000..rpc_timeout.as_nanos() as u64).contains(&request.probe_wait_ns),
        "the probes waited {} ms (probe timeout 200 ms, RPC timeout {rpc_timeout:?})",
        request.probe_wait_ns / 1_000_000
    );
    assert!(records[0].tasks.iter().all(|t| t.role == TaskRole::Degraded), "{:?}", records[0].tasks);
    assert_eq!(controller.counters().probe_timeouts.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert!(elapsed < rpc_timeout, "the read took {elapsed:?}");
    holder.abort();
    cluster.shutdown().await;
}

/// The gateway's refresh task refreshes a lazy policy every period T, and ends when told to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_refresh_task_refreshes_every_period_until_stopped() {
    let cluster = TestCluster::start(9, 9).await;
    let data = ErasureData::new(cluster.config("rs-6-3"), Arc::clone(&cluster.meta)).await.unwrap();
    let settings = PolicySettings { lmlf_lazy_period_ms: 100, ..Default::default() };
    let config = ControllerConfig { policy: PolicyKind::LmlfLazy, settings, ..Default::default() };
    let controller = Arc::new(Controller::new(&config, "rs-6-3").unwrap());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(Arc::clone(&controller).run_refresh(Arc::clone(data.io()), None, stopped));
    tokio::time::sleep(Duration::from_millis(1050)).await;
    let refreshes = controller.take_refresh_probes() / 9;
    // About ten at T = 100 ms; a loaded host may delay a few, never add one.
    assert!((3..=11).contains(&refreshes), "{refreshes} refreshes in 1.05 s at T = 100 ms");
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task).await.expect("the refresh task ends when stopped").unwrap();
    let after = controller.take_refresh_probes();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(controller.take_refresh_probes(), 0, "no refresh after the stop ({after} probes at the stop)");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_through_two_admission_slots_keep_two_tasks_in_flight_and_are_all_served() {
    let cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    config.admission.slots = Some(2);
    let data = Arc::new(ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap());
    let body = pattern(600_000, 11);
    let layout = data.write(body.clone()).await.unwrap().layout;
    // Every node takes 5 ms a task, so the reads overlap and queue for the two slots.
    let slow = ServiceModel { enabled: true, overhead_us: 5_000, ..Default::default() };
    for node in 0..9 {
        cluster.client(node).await.set_service_model(&slow).await.unwrap();
    }
    let controller = with_controller(&data, "rs-6-3", PolicyKind::LmlfPw2).await;
    let readers: Vec<_> = (0..6)
        .map(|_| {
            let (data, layout, body) = (Arc::clone(&data), layout.clone(), body.clone());
            tokio::spawn(async move { assert!(data.read(&layout, 0..body.len() as u64).await.unwrap() == body) })
        })
        .collect();
    let mut most_busy = 0;
    let mut most_waiting = 0;
    while !readers.iter().all(|r| r.is_finished()) {
        let (busy, requests, tasks) = data.reads().pool().expect("two slots bound the pool").occupancy();
        (most_busy, most_waiting) = (most_busy.max(busy), most_waiting.max(requests + tasks));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for reader in readers {
        reader.await.unwrap();
    }
    assert!(most_busy <= 2, "{most_busy} tasks in flight through two slots");
    assert!(most_waiting > 0, "six reads of six units each queued for two slots");
    assert_eq!(data.reads().pool().expect("two slots bound the pool").occupancy(), (0, 0, 0), "every slot given back");
    let (records, _) = controller.take_records();
    assert_eq!(records.len(), 36, "six reads of six data units, each one plan");
    assert!(records.iter().all(|r| r.request.outcome == Outcome::Ok));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hedged_reads_a_row_around_a_node_it_avoids_as_one_plan_of_k_plus_one_units() {
    let cluster = TestCluster::start(9, 9).await;
    let data = ErasureData::new(cluster.config("rs-6-3"), Arc::clone(&cluster.meta)).await.unwrap();
    let body = pattern(600_000, 7); // six data units of 100 kB
    let layout = data.write(body.clone()).await.unwrap().layout;
    let controller = with_controller(&data, "rs-6-3", PolicyKind::Hedged).await;
    let hedged = policy::read::HedgedSettings { explore_ms: 600_000, ..Default::default() };
    let settings = PolicySettings { normal_timeout_ms: 100, hedged, ..Default::default() };
    controller.set_policy(PolicyKind::Hedged, settings).unwrap();
    let Layout::Striped { segments } = &layout else { panic!("a 600 kB object is striped") };
    // Data unit 2's node: not the row's first unit, whose read alone once decided "degraded".
    let slow = cluster.meta.get_stripe(segments[0].stripe).await.unwrap().placement[2].0 as usize;
    let model = ServiceModel { enabled: true, overhead_us: 2_000_000, ..Default::default() };
    cluster.client(slow).await.set_service_model(&model).await.unwrap();
    // Reads of data unit 2 alone overrun the hedge delay until the node is avoided, then one
    // explores it.
    for _ in 0..5 {
        assert!(data.read(&layout, 200_000..201_000).await.unwrap() == body.slice(200_000..201_000));
    }
    assert_eq!(controller.policy().gauges.get("hedged_nodes_avoided"), Some(&1.0));
    controller.take_records();
    assert!(data.read(&layout, 0..body.len() as u64).await.unwrap() == body);
    let (records, _) = controller.take_records();
    assert_eq!(records.len(), 1, "the row is one plan: {records:?}");
    let record = &records[0];
    assert_eq!((record.request.outcome, record.request.degraded), (Outcome::Ok, true));
    assert_eq!(record.tasks.len(), 7, "k + 1 units, not a recovery set per unit: {:?}", record.tasks);
    assert!(record.tasks.iter().all(|task| task.unit != 2), "none of the avoided node's unit 2: {:?}", record.tasks);
    let finished = record.tasks.iter().filter(|t| !t.cancelled && !t.failed && t.finish_ns != NEVER).count();
    assert!(finished >= 6, "done at the first six: {:?}", record.tasks);
    let row_units = record.tasks.iter().filter(|task| task.role == TaskRole::Normal).count();
    assert_eq!(row_units, 5, "the row's five other data units are read for themselves");
    // Two units of a row read no fewer as one plan: each its own.
    assert!(data.read(&layout, 150_000..250_000).await.unwrap() == body.slice(150_000..250_000));
    assert_eq!(controller.take_records().0.len(), 2);
    cluster.client(slow).await.set_service_model(&ServiceModel::default()).await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hedged_reads_a_row_around_a_unit_recorded_missing_as_around_a_down_node() {
    let cluster = TestCluster::start(9, 9).await;
    let data = ErasureData::new(cluster.config("rs-6-3"), Arc::clone(&cluster.meta)).await.unwrap();
    let body = pattern(600_000, 11);
    let layout = data.write(body.clone()).await.unwrap().layout;
    let controller = with_controller(&data, "rs-6-3", PolicyKind::Hedged).await;
    let Layout::Striped { segments } = &layout else { panic!("a 600 kB object is striped") };
    // Unit 3 as a node back with an empty disk leaves it: recorded missing, until repair.
    let mut stripe = cluster.meta.get_stripe(segments[0].stripe).await.unwrap();
    stripe.mark_missing([3], 1);
    cluster.meta.update_stripe(stripe.id, stripe.version, stripe.clone()).await.unwrap();
    assert!(data.read(&layout, 0..body.len() as u64).await.unwrap() == body);
    let (records, _) = controller.take_records();
    assert_eq!(records.len(), 1, "the row is one plan: {records:?}");
    let tasks = &records[0].tasks;
    assert!(records[0].request.degraded && records[0].request.outcome == Outcome::Ok);
    assert_eq!(tasks.len(), 6, "k units, none a recovery set per unit: {tasks:?}");
    assert!(tasks.iter().all(|t| t.unit != 3 && !t.failed), "the missing unit is not asked for: {tasks:?}");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hedged_goes_around_a_down_node_from_the_first_read() {
    let mut cluster = TestCluster::start(9, 9).await;
    let data = ErasureData::new(cluster.config("rs-6-3"), Arc::clone(&cluster.meta)).await.unwrap();
    let body = pattern(600_000, 8);
    let layout = data.write(body.clone()).await.unwrap().layout;
    let controller = with_controller(&data, "rs-6-3", PolicyKind::Hedged).await;
    let victim = first_unit_node(&cluster, &layout).await;
    cluster.kill(victim).await;
    assert!(data.read(&layout, 0..1000).await.unwrap() == body.slice(0..1000));
    assert!(data.read(&layout, 0..body.len() as u64).await.unwrap() == body);
    let (records, _) = controller.take_records();
    assert_eq!(records.len(), 2, "a unit read, then the row as one plan: {records:?}");
    assert!(records[0].tasks.iter().all(|t| t.role == TaskRole::Degraded), "{:?}", records[0].tasks);
    assert_eq!(records[1].tasks.len(), 6, "k units, no spare beside a Down node: {:?}", records[1].tasks);
    for record in &records {
        assert!(record.request.degraded && record.request.outcome == Outcome::Ok);
        assert!(record.tasks.iter().all(|t| t.unit != 0 && !t.failed), "no task on the Down node: {:?}", record.tasks);
    }
    cluster.shutdown().await;
}
