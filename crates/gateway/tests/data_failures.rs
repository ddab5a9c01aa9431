//! Failures on real storage nodes: m nodes down (reads degrade, writes continue), a slow node
//! (degraded read after the timeout), a corrupt unit (served degraded, reported, repaired),
//! membership noticing a dead node, and repair restoring full redundancy so m more losses are
//! survivable, at no more than its read budget. RS(6,3) and LRC(6,2,2).

mod data_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use data_support::{TestCluster, pattern};
use gateway::data::cluster::membership::Membership;
use gateway::data::services::orphans::OrphanCollector;
use gateway::data::services::repair::RepairService;
use gateway::data::{ErasureData, MembershipConfig, ObjectData, OrphanConfig, RepairConfig};
use meta::{Layout, NodeId, NodeState};
use node::ServiceModel;

async fn write_objects(data: &ErasureData, seed: u64) -> Vec<(Bytes, Layout)> {
    let mut objects = Vec::new();
    for (i, size) in [1usize, 100 << 10, (5 << 20) + 17].into_iter().enumerate() {
        let body = pattern(size, seed + i as u64);
        let layout = data.write(body.clone()).await.unwrap().layout;
        objects.push((body, layout));
    }
    objects
}

async fn assert_readable(data: &ErasureData, objects: &[(Bytes, Layout)], what: &str) {
    for (body, layout) in objects {
        let read = data.read(layout, 0..body.len() as u64).await.unwrap();
        assert!(read == *body, "{what}: {} B object read back identical", body.len());
        let mid = body.len() as u64 / 3;
        let part = data.read(layout, mid..body.len() as u64).await.unwrap();
        assert!(part == body.slice(mid as usize..), "{what}: ranged read");
    }
}

async fn lose_m_then_repair_then_lose_m_more(code: &str, m: usize) {
    let mut cluster = TestCluster::start(13, 13).await;
    let mut config = cluster.config(code);
    config.repair = RepairConfig { grace_ms: 0, ..Default::default() };
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let objects = write_objects(&data, 10).await;
    // The nodes of the large object's first m data units die, so reads must decode whatever
    // placement the (parallel) stripe writes drew.
    let Layout::Striped { segments } = &objects[2].1 else { panic!("a 5 MiB object is striped") };
    let first = cluster.meta.get_stripe(segments[0].stripe).await.unwrap();
    let dead: BTreeSet<NodeId> = first.placement[..m].iter().copied().collect();
    for node in &dead {
        cluster.kill(node.0 as usize).await;
    }
    assert_readable(&data, &objects, "m nodes down").await;
    assert!(data.io().counters().degraded_reads.load(Ordering::Relaxed) > 0);
    let more = write_objects(&data, 20).await;
    assert_readable(&data, &more, "written with m nodes down").await;

    // Open packing stripes are sealed (onto Up nodes) by their packer, not rebuilt by repair.
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    repair.scan().await.unwrap();
    let status = repair.status();
    assert!(status.stripes_repaired > 0 && status.stripe_failures == 0, "{status:?}");
    for stripe in cluster.meta.list_stripes(None, 1000).await.unwrap() {
        assert!(stripe.placement.iter().all(|node| !dead.contains(node)), "stripe {} still on a dead node", stripe.id);
        assert_eq!(stripe.placement.iter().collect::<BTreeSet<_>>().len(), stripe.placement.len());
    }
    let survivors: Vec<usize> = (0..cluster.nodes.len()).filter(|&i| !dead.contains(&NodeId(i as u32))).collect();
    for &i in &survivors[..m] {
        cluster.kill(i).await;
    }
    assert_readable(&data, &objects, "2m nodes down after repair").await;
    assert_readable(&data, &more, "2m nodes down after repair").await;
    cluster.shutdown().await;
}

/// A node that comes back after repair rebuilt its units elsewhere holds orphans. The collector
/// deletes them once they stayed orphans for the grace period, keeps one written again in between
/// until it has waited out a grace of its own, and deletes nothing a stripe references.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_of_a_node_back_after_repair_are_deleted_after_the_grace_and_nothing_else() {
    let mut cluster = TestCluster::start(10, 10).await;
    let mut config = cluster.config("rs-6-3");
    config.repair = RepairConfig { grace_ms: 0, ..Default::default() };
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let objects = write_objects(&data, 30).await;
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    let Layout::Striped { segments } = &objects[2].1 else { panic!("a 5 MiB object is striped") };
    let away = cluster.meta.get_stripe(segments[0].stripe).await.unwrap().placement[0].0 as usize;
    let held_before = cluster.client(away).await.list_units(None, 0).await.unwrap().units.len();
    assert!(held_before > 0);
    cluster.kill(away).await;
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    repair.scan().await.unwrap();
    assert_eq!(repair.status().stripe_failures, 0);
    cluster.restart(away).await;
    // An orphan of a write that never created its stripe, on another node.
    let other = (away + 1) % 10;
    let ghost = 1 << 40;
    cluster.client(other).await.write_unit(ghost, 0, pattern(100, 1)).await.unwrap();

    let orphans = OrphanCollector::new(Arc::clone(data.io()), OrphanConfig::default());
    let grace = Duration::from_millis(OrphanConfig::default().grace_ms);
    let start = Instant::now();
    let first = orphans.scan_at(start).await.unwrap();
    assert_eq!((first.orphans, first.deleted), (held_before as u64 + 1, 0), "{first:?}");
    assert_eq!(orphans.status().candidates, held_before as u64 + 1);
    // Written again between the scans: its grace starts over.
    cluster.client(other).await.write_unit(ghost, 0, pattern(100, 2)).await.unwrap();
    let second = orphans.scan_at(start + grace).await.unwrap();
    assert_eq!((second.deleted, second.rewritten), (held_before as u64, 1), "{second:?}");
    assert_eq!(cluster.client(away).await.list_units(None, 0).await.unwrap().units.len(), 0);
    assert_eq!(cluster.client(other).await.read_range(ghost, 0, 0, 100).await.unwrap().0, pattern(100, 2));
    let third = orphans.scan_at(start + grace * 2).await.unwrap();
    assert_eq!((third.orphans, third.deleted), (1, 1), "{third:?}");
    let status = orphans.status();
    assert_eq!((status.units_deleted, status.candidates, status.scans), (held_before as u64 + 1, 0, 3));

    // Every unit every stripe places is still where it is placed, and every object reads back.
    for stripe in cluster.meta.list_stripes(None, 1000).await.unwrap() {
        for (unit, node) in stripe.placement.iter().enumerate() {
            let held = cluster.client(node.0 as usize).await.read_range(stripe.id.0, unit as u16, 0, 0).await;
            assert!(held.is_ok(), "unit {unit} of stripe {} is gone from node {node}", stripe.id);
        }
    }
    assert_readable(&data, &objects, "after orphan collection").await;
    let fourth = orphans.scan_at(start + grace * 3).await.unwrap();
    assert_eq!((fourth.orphans, fourth.deleted), (0, 0), "{fourth:?}");
    cluster.shutdown().await;
}

/// Repair reads at most `max_read_bytes_per_s` of source units, so a rebuild does not crowd out
/// client reads: the k source units of each rebuilt unit are charged before they are read, so the
/// last rebuild of a scan cannot start before every earlier charge has elapsed at that rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_reads_no_faster_than_its_budget() {
    let mut cluster = TestCluster::start(10, 10).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    let budget_bytes_per_s = 1_000_000u64;
    config.repair = RepairConfig {
        grace_ms: 0,
        max_read_bytes_per_s: budget_bytes_per_s,
        min_read_bytes_per_s: budget_bytes_per_s,
        ..Default::default()
    };
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let mut objects = Vec::new();
    for i in 0..12 {
        let body = pattern(200 << 10, 70 + i);
        let layout = data.write(body.clone()).await.unwrap().layout;
        objects.push((body, layout));
    }
    cluster.kill(0).await;
    // The source bytes repair is charged for: k units of each stripe that had a unit on node 0.
    let mut charges_bytes: Vec<u64> = Vec::new();
    for stripe in cluster.meta.list_stripes(None, 1000).await.unwrap() {
        if stripe.placement.contains(&NodeId(0)) {
            charges_bytes.push(stripe.unit_bytes * 6);
        }
    }
    charges_bytes.sort_unstable();
    assert!(charges_bytes.len() >= 5, "too few stripes on node 0 to pace: {charges_bytes:?}");
    let before_last_bytes: u64 = charges_bytes[..charges_bytes.len() - 1].iter().sum();
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    let started = Instant::now();
    repair.scan().await.unwrap();
    let elapsed = started.elapsed();
    let status = repair.status();
    assert_eq!(status.stripes_repaired as usize, charges_bytes.len(), "{status:?}");
    assert_eq!(status.stripe_failures, 0, "{status:?}");
    let floor = Duration::from_secs_f64(before_last_bytes as f64 / budget_bytes_per_s as f64);
    assert!(elapsed >= floor, "repaired {} stripes in {elapsed:?}, under the budget's {floor:?}", charges_bytes.len());
    assert_readable(&data, &objects, "after a paced repair").await;
    cluster.shutdown().await;
}

/// Repair backs off to `min_read_bytes_per_s` while clients keep the gateway busy throughout (a
/// request held in flight for the whole scan), where idle it would read at the full budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_backs_off_to_its_floor_while_clients_keep_the_gateway_busy() {
    let mut cluster = TestCluster::start(10, 10).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    let floor_bytes_per_s = 1_000_000u64;
    config.repair = RepairConfig {
        grace_ms: 0,
        max_read_bytes_per_s: 1 << 30,
        min_read_bytes_per_s: floor_bytes_per_s,
        ..Default::default()
    };
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    for i in 0..12 {
        data.write(pattern(200 << 10, 120 + i)).await.unwrap();
    }
    cluster.kill(0).await;
    let stripes = cluster.meta.list_stripes(None, 1000).await.unwrap();
    let mut charges_bytes: Vec<u64> =
        stripes.iter().filter(|s| s.placement.contains(&NodeId(0))).map(|s| s.unit_bytes * 6).collect();
    charges_bytes.sort_unstable();
    assert!(charges_bytes.len() >= 5, "too few stripes on node 0: {charges_bytes:?}");
    // A client request in flight from before the pace's first window (which starts with the
    // service) to the end of the scan: a window even a little idle would lift the rate far above
    // the floor, the budget being 1 GiB/s.
    let busy = gateway::data::services::foreground::request_in_flight();
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    repair.scan().await.unwrap();
    let elapsed = started.elapsed();
    let status = repair.status();
    drop(busy);
    assert_eq!(status.stripes_repaired as usize, charges_bytes.len(), "{status:?}");
    assert!(status.client_busy_pct >= 90, "{status:?}");
    let before_last_bytes: u64 = charges_bytes[..charges_bytes.len() - 1].iter().sum();
    let floor = Duration::from_secs_f64(before_last_bytes as f64 / floor_bytes_per_s as f64);
    assert!(
        elapsed >= floor,
        "busy: {} stripes in {elapsed:?}, faster than the floor's {floor:?}",
        charges_bytes.len()
    );
    cluster.shutdown().await;
}

/// A scan rebuilding a dead node's units elsewhere stops starting stripes once the node is back Up:
/// its units are intact, so moving the rest would only cost reads and writes, and the scan's view
/// (and the status it publishes) would stay stale for as long as it runs. The fault swarm saw
/// scans run for minutes on the node map they began with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_stops_moving_a_nodes_units_once_the_node_is_back() {
    let mut cluster = TestCluster::start(10, 10).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    config.repair = RepairConfig {
        grace_ms: 0,
        max_read_bytes_per_s: 400_000,
        min_read_bytes_per_s: 400_000,
        ..Default::default()
    };
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    for i in 0..16 {
        data.write(pattern(200 << 10, 90 + i)).await.unwrap();
    }
    cluster.kill(0).await;
    let meta = Arc::clone(&cluster.meta);
    let on_node_0 = || async {
        let stripes = meta.list_stripes(None, 1000).await.unwrap();
        stripes.iter().filter(|stripe| stripe.placement.contains(&NodeId(0))).count()
    };
    let before = on_node_0().await;
    assert!(before >= 8, "too few stripes on node 0: {before}");
    let repair = Arc::new(RepairService::new(Arc::clone(data.io()), config.repair.clone()));
    let scan = tokio::spawn({
        let repair = Arc::clone(&repair);
        async move { repair.scan().await }
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cluster.restart(0).await;
    tokio::time::timeout(Duration::from_secs(10), scan).await.expect("the scan ends soon").unwrap().unwrap();
    let moved = repair.status().stripes_repaired as usize;
    assert!(moved < before, "the scan moved all {before} stripes although node 0 came back");
    assert_eq!(on_node_0().await, before - moved, "the rest stay on node 0");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rs_survives_m_losses_and_repair_restores_redundancy() {
    lose_m_then_repair_then_lose_m_more("rs-6-3", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lrc_survives_losses_and_repair_restores_redundancy() {
    // LRC(6,2,2) decodes every 3-loss pattern.
    lose_m_then_repair_then_lose_m_more("lrc-6-2-2", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unannounced_dead_nodes_are_read_around_and_noticed_by_membership() {
    let mut cluster = TestCluster::start(10, 10).await;
    let data = ErasureData::new(cluster.config("rs-6-3"), Arc::clone(&cluster.meta)).await.unwrap();
    let objects = write_objects(&data, 30).await;
    // Stopped but still Up in the metadata: reads fail over on the connection error.
    cluster.stop(0).await;
    cluster.stop(1).await;
    assert_readable(&data, &objects, "dead but not yet Down").await;
    let membership = Membership::new(
        Arc::clone(data.io().cluster()),
        MembershipConfig { probe_interval_ms: 200, down_after_probes: 2 },
    );
    membership.probe_round(1).await.unwrap();
    assert_eq!(cluster.node_info(0).await.state, NodeState::Up, "one miss is not enough");
    let round = membership.probe_round(2).await.unwrap();
    let mut marked = round.marked_down.clone();
    marked.sort();
    assert_eq!(marked, vec![NodeId(0), NodeId(1)]);
    assert_eq!(cluster.node_info(0).await.state, NodeState::Down);
    assert_eq!(cluster.node_info(1).await.state, NodeState::Down);
    // Heartbeats are written once they are HEARTBEAT_REFRESH_MS old, not every round.
    assert_eq!(cluster.node_info(2).await.last_heartbeat_ms, 0, "too soon for a heartbeat");
    let refresh_ms = gateway::data::cluster::membership::HEARTBEAT_REFRESH_MS;
    membership.probe_round(refresh_ms).await.unwrap();
    assert_eq!(cluster.node_info(2).await.last_heartbeat_ms, refresh_ms, "answering nodes get heartbeats");
    membership.probe_round(refresh_ms + 5).await.unwrap();
    assert_eq!(cluster.node_info(2).await.last_heartbeat_ms, refresh_ms, "and not again before the next refresh");
    assert_readable(&data, &objects, "two Down").await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_node_is_read_around_after_the_timeout() {
    let cluster = TestCluster::start(9, 9).await;
    let data = ErasureData::new(cluster.config("rs-6-3"), Arc::clone(&cluster.meta)).await.unwrap();
    let body = pattern(200_000, 5); // above the packing limit: striped
    let layout = data.write(body.clone()).await.unwrap().layout;
    let Layout::Striped { segments } = &layout else { panic!() };
    let stripe = cluster.meta.get_stripe(segments[0].stripe).await.unwrap();
    let slow = stripe.placement[0].0 as usize;
    let model = ServiceModel { enabled: true, overhead_us: 5_000_000, ..Default::default() };
    cluster.client(slow).await.set_service_model(&model).await.unwrap();
    let started = Instant::now();
    let read = data.read(&layout, 0..body.len() as u64).await.unwrap();
    let took = started.elapsed();
    assert!(read == body);
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(3), "took {took:?}");
    assert!(data.io().counters().degraded_reads.load(Ordering::Relaxed) >= 1);
    cluster.client(slow).await.set_service_model(&ServiceModel::default()).await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_unit_is_served_degraded_reported_and_repaired() {
    let cluster = TestCluster::start(10, 10).await;
    let config = cluster.config("rs-6-3");
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let body = pattern(300_000, 6);
    let layout = data.write(body.clone()).await.unwrap().layout;
    let Layout::Striped { segments } = &layout else { panic!() };
    let stripe = cluster.meta.get_stripe(segments[0].stripe).await.unwrap();
    let holder = stripe.placement[1].0 as usize;
    cluster.corrupt_unit(holder, stripe.id.0, 1);
    let read = data.read(&layout, 0..body.len() as u64).await.unwrap();
    assert!(read == body, "corrupt unit read around");
    assert_eq!(data.io().counters().corrupt_units.load(Ordering::Relaxed), 1);
    assert_eq!(data.io().pending_corrupt_reports(), 1);
    // Open packing stripes are sealed (onto Up nodes) by their packer, not rebuilt by repair.
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    repair.scan().await.unwrap();
    let status = repair.status();
    assert_eq!((status.units_marked_missing, status.units_repaired), (1, 1), "{status:?}");
    let repaired = cluster.meta.get_stripe(stripe.id).await.unwrap();
    assert_eq!(repaired.placement[1], stripe.placement[1], "rewritten in place");
    assert!(repaired.missing_units.is_empty() && repaired.degraded_since_ms.is_none(), "{repaired:?}");
    assert!(cluster.meta.under_redundant_stripes(None, 10).await.unwrap().is_empty());
    let stats = cluster.client(holder).await.stats().await.unwrap();
    assert!(stats.corrupt_units.is_empty(), "the node forgot the corrupt copy: {:?}", stats.corrupt_units);
    let census = status.census.expect("the only gateway holds the lease");
    assert_eq!(census.stripes_under_redundant, 0, "{census:?}");
    let degraded_before = data.io().counters().degraded_reads.load(Ordering::Relaxed);
    let read = data.read(&layout, 0..body.len() as u64).await.unwrap();
    assert!(read == body);
    assert_eq!(data.io().counters().degraded_reads.load(Ordering::Relaxed), degraded_before, "normal read again");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_services_repair_after_the_grace_period() {
    let mut cluster = TestCluster::start(11, 11).await;
    let mut config = cluster.config("rs-6-3");
    config.membership = MembershipConfig { probe_interval_ms: 100, down_after_probes: 2 };
    config.repair = RepairConfig { grace_ms: 500, scan_interval_ms: 100, ..Default::default() };
    let running = ErasureData::start(config, Arc::clone(&cluster.meta)).await.unwrap();
    let objects = write_objects(&running.data, 40).await;
    cluster.stop(3).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let stripes = cluster.meta.stripes_on_node(NodeId(3), None, 10).await.unwrap();
        if stripes.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "repair did not finish: {:?}", running.repair_status());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cluster.node_info(3).await.state, NodeState::Down);
    assert!(running.repair_status().units_repaired > 0);
    assert_readable(&running.data, &objects, "after background repair").await;
    running.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_node_wrongly_marked_down_is_read_when_nothing_else_decodes() {
    let mut cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    let data = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap();
    let objects = write_objects(&data, 60).await;
    for i in 0..3 {
        cluster.kill(i).await;
    }
    // A fourth node is alive but Down in the metadata (a probe timed out on a loaded machine):
    // only by reading it anyway can the stripes still be decoded.
    cluster.meta.set_node_state(NodeId(3), NodeState::Down, 0).await.unwrap();
    assert_readable(&data, &objects, "3 nodes dead and a live one marked Down").await;
    // A fourth node dead as well leaves the data unavailable, not lost: it is on nodes that may
    // return (and it reads again when one does).
    cluster.kill(3).await;
    // (Six data units on nine nodes: some data unit of every stripe is on a dead node.)
    let (body, layout) = &objects[2];
    let error = data.read(layout, 0..body.len() as u64).await.unwrap_err();
    assert!(matches!(error, gateway::data::DataError::Unavailable(_)), "{error}");
    cluster.restart(3).await;
    assert!(data.read(layout, 0..body.len() as u64).await.unwrap() == *body, "back with its node");
    // Units gone from live nodes beyond what the code survives are data loss, reported as such.
    for i in 0..3 {
        cluster.restart(i).await;
    }
    let stripe = cluster.meta.get_stripe(layout.stripes()[0]).await.unwrap();
    for (unit, node) in stripe.placement.iter().enumerate().take(4) {
        let client = cluster.client(node.0 as usize).await;
        assert!(client.delete_unit(stripe.id.0, unit as u16).await.unwrap(), "unit {unit} on node {node}");
    }
    let error = data.read(layout, 0..body.len() as u64).await.unwrap_err();
    assert!(matches!(error, gateway::data::DataError::Lost(_)), "{error}");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overloaded_live_nodes_make_a_read_unavailable_not_lost() {
    let cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    config.node_rpc_timeout_ms = 600;
    let data = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap();
    let body = pattern(600_000, 8);
    let layout = data.write(body.clone()).await.unwrap().layout;
    let Layout::Striped { segments } = &layout else { panic!("striped") };
    let stripe = cluster.meta.get_stripe(segments[0].stripe).await.unwrap();
    // Four live nodes (data units 0..4) answer far slower than the RPC timeout: every node is Up,
    // nothing is lost, but no six units can be read in time.
    let slow = ServiceModel { enabled: true, overhead_us: 3_000_000, ..Default::default() };
    for unit in 0..4 {
        cluster.client(stripe.placement[unit].0 as usize).await.set_service_model(&slow).await.unwrap();
    }
    let error = data.read(&layout, 0..100).await.unwrap_err();
    assert!(matches!(error, gateway::data::DataError::Unavailable(_)), "{error}");
    for unit in 0..4 {
        let node = stripe.placement[unit].0 as usize;
        cluster.client(node).await.set_service_model(&ServiceModel::default()).await.unwrap();
    }
    // Once the nodes keep up again, the same read succeeds: the data was never lost.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match data.read(&layout, 0..body.len() as u64).await {
            Ok(read) => {
                assert!(read == body);
                break;
            }
            Err(error) => {
                assert!(Instant::now() < deadline, "still failing: {error}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    cluster.shutdown().await;
}

/// Two gateways over one cluster: only the holder of the repair lease rebuilds a dead node's units,
/// so each stripe is read and rebuilt once, and the other gateway names the holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_gateway_repairs_a_dead_node_while_the_other_leaves_it_to_the_lease_holder() {
    let mut cluster = TestCluster::start(10, 10).await;
    let mut services = Vec::new();
    let mut first_data = None;
    for id in ["gateway-a", "gateway-b"] {
        let mut config = cluster.config("rs-6-3");
        config.repair = RepairConfig { grace_ms: 0, ..Default::default() };
        config.gateway_id = Some(id.into());
        let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
        services.push(RepairService::new(Arc::clone(data.io()), config.repair.clone()));
        first_data.get_or_insert(data);
    }
    let data = first_data.unwrap();
    let objects = write_objects(&data, 70).await;
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    let Layout::Striped { segments } = &objects[2].1 else { panic!("a 5 MiB object is striped") };
    let dead = cluster.meta.get_stripe(segments[0].stripe).await.unwrap().placement[0];
    let on_dead = cluster.meta.stripes_on_node(dead, None, 1000).await.unwrap().len() as u64;
    assert!(on_dead > 0);
    cluster.kill(dead.0 as usize).await;

    let (a, b) = tokio::join!(services[0].scan(), services[1].scan());
    a.unwrap();
    b.unwrap();
    let statuses: Vec<_> = services.iter().map(RepairService::status).collect();
    let holder = statuses[0].lease_holder.clone().expect("a lease was claimed");
    assert_eq!(statuses[1].lease_holder.as_ref(), Some(&holder), "both see one holder");
    let (repairer, other) =
        if holder == "gateway-a" { (&statuses[0], &statuses[1]) } else { (&statuses[1], &statuses[0]) };
    assert_eq!((repairer.stripes_repaired, repairer.stripe_failures), (on_dead, 0), "{repairer:?}");
    assert_eq!(repairer.nodes_repairing, vec![dead]);
    assert_eq!((other.stripes_repaired, other.stripe_failures), (0, 0), "{other:?}");
    assert!(other.nodes_repairing.is_empty(), "the other gateway left the dead node alone: {other:?}");
    assert!(cluster.meta.stripes_on_node(dead, None, 10).await.unwrap().is_empty(), "nothing left on the dead node");
    assert_readable(&data, &objects, "after one gateway's repair").await;
    cluster.shutdown().await;
}
