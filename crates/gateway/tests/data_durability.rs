//! The durability contract on real storage nodes: a stripe stored with fewer than n durable units
//! (a degraded write or seal, a unit found corrupt) is known durably and brought back to n by
//! repair, whatever order the failures, restarts and returns come in; a gateway that restarts (a
//! fresh repair service) forgets nothing; and afterwards m more failures lose nothing.

mod data_support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use data_support::{TestCluster, pattern};
use gateway::data::cluster::membership::Membership;
use gateway::data::services::repair::{Blocker, RepairService};
use gateway::data::{ErasureData, MembershipConfig, ObjectData, RepairConfig};
use meta::{Layout, NodeId, StripeState};

async fn assert_readable(data: &ErasureData, objects: &[(Bytes, Layout)], what: &str) {
    for (body, layout) in objects {
        let read = data.read(layout, 0..body.len() as u64).await.unwrap();
        assert!(read == *body, "{what}: {} B object read back identical", body.len());
    }
}

/// Every stripe has all n units durable on distinct Up nodes.
async fn assert_whole(cluster: &TestCluster, what: &str) {
    assert!(cluster.meta.under_redundant_stripes(None, 10).await.unwrap().is_empty(), "{what}: index empty");
    for stripe in cluster.meta.list_stripes(None, 10_000).await.unwrap() {
        if stripe.state == StripeState::Open {
            continue;
        }
        assert!(stripe.missing_units.is_empty(), "{what}: stripe {} misses {:?}", stripe.id, stripe.missing_units);
        for (unit, node) in stripe.placement.iter().enumerate() {
            let held = cluster.client(node.0 as usize).await.read_range(stripe.id.0, unit as u16, 0, 0).await;
            assert!(held.is_ok(), "{what}: unit {unit} of stripe {} is not on node {node}", stripe.id);
        }
    }
}

/// The scenario, in one process: with exactly n nodes (no spare), a node dies and objects
/// are written degraded (units left missing on it); a second node dies unannounced mid-way (its
/// units fail to write); the gateway "restarts" (a new repair service: nothing in memory); the
/// nodes return; one scan rebuilds every missing unit in place; then m other nodes die and every
/// object still reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn degraded_writes_are_repaired_in_place_when_their_nodes_return_after_a_restart() {
    let mut cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.repair = RepairConfig { grace_ms: 60_000, ..Default::default() };
    config.packed.seal_after_ms = 60_000;
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let mut objects = Vec::new();
    let mut write = async |data: &ErasureData, seed: u64| {
        for (i, size) in [700usize, 100 << 10, (7 << 20) + 5].into_iter().enumerate() {
            let body = pattern(size, seed + i as u64);
            let written = data.write(body.clone()).await.unwrap();
            objects.push((body, written.layout));
        }
    };
    write(&data, 1).await;
    cluster.kill(2).await;
    write(&data, 10).await;
    cluster.stop(5).await; // dead, still Up in the metadata
    write(&data, 20).await;
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    assert_readable(&data, &objects, "two nodes dead").await;
    let under = cluster.meta.under_redundant_stripes(None, 1000).await.unwrap();
    assert!(under.len() >= 4, "degraded stripes recorded: {under:?}");

    // Within the grace, with no spare node: repair can do nothing, and says why.
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    repair.scan().await.unwrap();
    let status = repair.status();
    let census = status.census.clone().expect("the only gateway holds the lease");
    assert!(census.stripes_under_redundant >= under.len() as u64, "{census:?}");
    assert!(census.oldest_degraded_since_ms.is_some(), "{census:?}");
    assert!(status.blocked.iter().any(|b| b.cause == Blocker::NoSpareNode), "{status:?}");
    assert_eq!(status.nodes_in_grace.iter().map(|n| n.node).collect::<Vec<_>>(), vec![NodeId(2)], "{status:?}");

    // The gateway restarts (nothing of the above in memory) and the nodes come back.
    drop(repair);
    cluster.restart(2).await;
    cluster.restart(5).await;
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    repair.scan().await.unwrap();
    let status = repair.status();
    assert!(status.units_repaired >= under.len() as u64, "{status:?}");
    assert_eq!(status.census.as_ref().map(|c| c.stripes_under_redundant), Some(0), "{status:?}");
    assert!(status.blocked.is_empty(), "{status:?}");
    assert_whole(&cluster, "after one scan").await;

    // Full redundancy again: any m = 3 nodes may go.
    for i in [0, 2, 5] {
        cluster.kill(i).await;
    }
    assert_readable(&data, &objects, "three more nodes down after repair").await;
    cluster.shutdown().await;
}

/// With a spare node, missing units are rebuilt onto it at once (they are durable nowhere, so
/// there is nothing to wait for), while a Down node's intact units wait out the grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_units_move_to_a_spare_at_once_and_a_down_nodes_units_wait_for_the_grace() {
    let mut cluster = TestCluster::start(10, 10).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    config.repair = RepairConfig { grace_ms: 60_000, ..Default::default() };
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let before = pattern(3 << 20, 1);
    let before_layout = data.write(before.clone()).await.unwrap().layout;
    // Placement is random among equally loaded nodes: the first stripe is on 9 of the 10 nodes.
    // One of them goes Down and stays (its intact unit waits for the grace); the one left out
    // goes Down too and returns empty, a spare for the stripes written meanwhile.
    let Layout::Striped { segments } = &before_layout else { panic!("striped") };
    let before_placement = cluster.meta.get_stripe(segments[0].stripe).await.unwrap().placement;
    let down = before_placement[0];
    let spare = (0..10).map(NodeId).find(|n| !before_placement.contains(n)).expect("one node left out");
    // Both go Down now (the grace starts): 8 Up nodes for 9 units, so each stripe written now
    // leaves one unit missing, placed on a Down node.
    cluster.kill(down.0 as usize).await;
    cluster.kill(spare.0 as usize).await;
    let body = pattern(3 << 20, 2);
    let written = data.write(body.clone()).await.unwrap();
    assert_eq!(written.redundancy.failures_tolerated, 2);
    let under = cluster.meta.under_redundant_stripes(None, 10).await.unwrap();
    assert!(!under.is_empty());
    for id in &under {
        let stripe = cluster.meta.get_stripe(*id).await.unwrap();
        assert_eq!(stripe.missing_units.len(), 1, "{stripe:?}");
        let on = stripe.placement[usize::from(stripe.missing_units[0])];
        assert!(on == down || on == spare, "the missing unit is recorded on a Down node: {stripe:?}");
    }
    // The spare returns, empty of the new stripes.
    cluster.restart(spare.0 as usize).await;
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    repair.scan().await.unwrap();
    let status = repair.status();
    for id in &under {
        let stripe = cluster.meta.get_stripe(*id).await.unwrap();
        assert!(stripe.missing_units.is_empty(), "stripe {id} rebuilt: {stripe:?}");
        assert!(stripe.placement.contains(&spare) && !stripe.placement.contains(&down), "onto the spare: {stripe:?}");
    }
    // What remains short is only the intact unit of the Down node, waiting for the grace.
    let census = status.census.clone().unwrap();
    assert_eq!((census.stripes_missing_units, census.stripes_under_redundant), (0, 1), "{census:?}");
    assert_eq!(status.stripe_failures, 0, "{status:?}");
    assert!(status.blocked.is_empty(), "waiting is not blocked: {status:?}");
    assert_eq!(status.nodes_in_grace.iter().map(|n| n.node).collect::<Vec<_>>(), vec![down]);
    assert_readable(&data, &[(before, before_layout), (body, written.layout)], "after the spare repair").await;
    cluster.shutdown().await;
}

/// A packed stripe sealed while a node is dead is sealed degraded (its unit recorded missing)
/// rather than kept open, and repair restores it when the node returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_packed_stripe_seals_degraded_with_a_dead_node_and_is_repaired_when_it_returns() {
    let mut cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.seal_after_ms = 60_000;
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let mut objects = Vec::new();
    for i in 0..20 {
        let body = pattern(1000 + i * 37, 100 + i as u64);
        objects.push((body.clone(), data.write(body).await.unwrap().layout));
    }
    let open = cluster.meta.list_stripes(None, 10).await.unwrap();
    assert_eq!(open.len(), 1);
    let dead = open[0].placement[3].0 as usize;
    cluster.kill(dead).await;
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    let sealed = cluster.meta.get_stripe(open[0].id).await.unwrap();
    assert_eq!(sealed.state, StripeState::Sealed);
    assert_eq!(sealed.missing_units, vec![3], "sealed with the dead node's unit missing");
    assert_readable(&data, &objects, "sealed degraded").await;
    cluster.restart(dead).await;
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    repair.scan().await.unwrap();
    assert_whole(&cluster, "after the node returned").await;
    for i in [0usize, 1, 2].into_iter().filter(|&i| i != dead).chain([dead]).take(3) {
        cluster.kill(i).await;
    }
    assert_readable(&data, &objects, "three nodes down after repair").await;
    cluster.shutdown().await;
}

/// Every node scrubs its own units: a flipped byte in a parity unit and in a packed replica (of a
/// stripe still open) is found without any read asking for them, and repair rewrites both; the
/// node's corrupt-units gauge falls back to zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrubbing_finds_a_rotten_parity_unit_and_replica_and_repair_rewrites_them() {
    let mut cluster = TestCluster::start_with(9, 9, |node| {
        node.scrub = node::ScrubConfig { pass_interval_s: 1, max_bytes_per_s: 1 << 30 };
    })
    .await;
    let mut config = cluster.config("rs-6-3");
    config.packed.seal_after_ms = 600_000;
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let big = pattern(2 << 20, 1);
    let big_layout = data.write(big.clone()).await.unwrap().layout;
    let small = pattern(3000, 2);
    let small_layout = data.write(small.clone()).await.unwrap().layout;
    let Layout::Striped { segments } = &big_layout else { panic!("striped") };
    let striped = cluster.meta.get_stripe(segments[0].stripe).await.unwrap();
    let Layout::Packed { stripe: open_id, replica_unit: Some(seq), .. } = small_layout else { panic!("packed") };
    let open = cluster.meta.get_stripe(open_id).await.unwrap();
    assert_eq!(open.state, StripeState::Open);
    let parity_node = striped.placement[7].0 as usize;
    let replica_node = open.placement[8].0 as usize; // a parity node holds every replica
    cluster.corrupt_unit(parity_node, striped.id.0, 7);
    cluster.corrupt_unit(replica_node, open_id.0, seq);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let found = |i: usize| cluster.nodes[i].as_ref().unwrap().scheduler().store().corrupt_units().len();
    while found(parity_node) == 0 || found(replica_node) == 0 {
        assert!(std::time::Instant::now() < deadline, "scrub did not find the flipped bytes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    repair.scan().await.unwrap();
    let status = repair.status();
    assert_eq!((status.units_marked_missing, status.replicas_repaired), (1, 1), "{status:?}");
    assert_eq!(status.units_repaired, 1, "{status:?}");
    assert!(status.scrub.iter().any(|s| s.corrupt_found > 0 && s.passes_completed > 0), "{:?}", status.scrub);
    for i in [parity_node, replica_node] {
        assert_eq!(found(i), 0, "node {i} forgot its corrupt unit once rewritten");
        let metrics = node::metrics::handle().render();
        let line = format!("lowtail_node_corrupt_units{{node=\"{i}\"}} 0");
        assert!(metrics.contains(&line), "gauge of node {i} back at zero:\n{metrics}");
    }
    let replica = cluster.client(replica_node).await.read_range(open_id.0, seq, 24, 3000).await.unwrap().0;
    assert!(replica == small, "the replica holds the object again");
    assert_readable(&data, &[(big, big_layout), (small, small_layout)], "after scrub and repair").await;
    assert_whole(&cluster, "after scrub and repair").await;
    // A node that stops answering before membership notices is named in the status, not skipped.
    cluster.stop(parity_node).await;
    repair.scan().await.unwrap();
    let scrub = repair.status().scrub;
    assert!(scrub.iter().any(|s| s.node.0 as usize == parity_node && s.unanswered.is_some()), "{scrub:?}");
    cluster.shutdown().await;
}

/// Copies every file of `from` (a stopped node's data directory) into `to`, replacing what is
/// there: the node's directory restored from an image taken earlier.
fn copy_directory(from: &std::path::Path, to: &std::path::Path) {
    if to.exists() {
        std::fs::remove_dir_all(to).unwrap();
    }
    std::fs::create_dir_all(to.join("units")).unwrap();
    for entry in std::fs::read_dir(from).unwrap().chain(std::fs::read_dir(from.join("units")).unwrap()) {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            let relative = entry.path().strip_prefix(from).unwrap().to_path_buf();
            std::fs::copy(entry.path(), to.join(relative)).unwrap();
        }
    }
}

/// Runs probe rounds until no node's units are being checked and every node is admitted.
async fn admit_all(membership: &Membership, cluster: &TestCluster) {
    for _round in 0..100 {
        membership.probe_round(gateway::data::cluster::membership::unix_now_ms()).await.unwrap();
        let nodes = cluster.meta.list_nodes().await.unwrap();
        let settled = nodes.iter().all(|n| n.checking_since_ms.is_none() && n.directory.is_some());
        if settled && membership.directory_status().checking.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nodes not admitted: {:?}", membership.directory_status());
}

/// Issue 52's stale return: a node stopped, its directory copied aside, the node back and more
/// objects written (some of their units on it), then the node returns with the old copy. It is
/// recognised as older at once, its units are checked before its stripes count as whole, what it
/// lacks is recorded missing and rebuilt, and then any m = 3 other nodes may die.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_returning_with_an_older_copy_of_its_directory_is_checked_before_its_stripes_count() {
    let mut cluster = TestCluster::start(10, 10).await;
    let mut config = cluster.config("rs-6-3");
    config.repair = RepairConfig { grace_ms: 60_000, ..Default::default() };
    config.packed.max_object_bytes = 0;
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let membership = Membership::new(Arc::clone(data.io().cluster()), MembershipConfig::default());
    admit_all(&membership, &cluster).await;
    let mut objects = Vec::new();
    for seed in 0..4 {
        let body = pattern((1 << 20) + seed as usize * 4099, seed);
        objects.push((body.clone(), data.write(body).await.unwrap().layout));
    }
    let stale = 5;
    cluster.stop(stale).await;
    let aside = tempfile::tempdir().unwrap();
    copy_directory(cluster.dirs[stale].path(), aside.path());
    cluster.restart(stale).await;
    admit_all(&membership, &cluster).await;
    let admitted = cluster.node_info(stale).await.directory.expect("admitted");
    for seed in 10..20 {
        let body = pattern((1 << 20) + seed as usize * 4099, seed);
        objects.push((body.clone(), data.write(body).await.unwrap().layout));
    }
    let on_stale_after_copy: usize =
        cluster.meta.stripes_on_node(NodeId(stale as u32), None, 10_000).await.unwrap().len();

    // The node returns with the copy taken before those writes.
    cluster.stop(stale).await;
    copy_directory(aside.path(), cluster.dirs[stale].path());
    cluster.restart(stale).await;
    membership.probe_round(gateway::data::cluster::membership::unix_now_ms()).await.unwrap();
    let checking = cluster.node_info(stale).await;
    // Either still checking (counted short) or done (what it lacks recorded): never whole unseen.
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    if checking.checking_since_ms.is_some() {
        // Repair runs beside the check: it rebuilds what the check recorded so far.
        repair.scan().await.unwrap();
        let census = repair.status().census.expect("the only gateway holds the lease");
        assert!(census.stripes_on_unavailable_nodes > 0, "the node being checked counts: {census:?}");
    }
    let repaired_during_the_check = repair.status().units_repaired;
    admit_all(&membership, &cluster).await;
    let status = membership.directory_status();
    let (_, report) = status.last_checks.iter().find(|(id, _)| *id == NodeId(stale as u32)).expect("checked");
    assert!(report.checksums_compared, "an older copy's checksums are compared: {report:?}");
    assert!(report.units_lost > 0 && report.units_marked_missing == report.units_lost, "{report:?}");
    assert!(report.units_expected as usize <= on_stale_after_copy);
    assert!(cluster.node_info(stale).await.directory.unwrap().generation > admitted.generation);
    let under = cluster.meta.under_redundant_stripes(None, 1000).await.unwrap();
    assert_eq!(under.len() as u64 + repaired_during_the_check, report.units_marked_missing, "one per stripe");

    // Repair rebuilds in place; then any three other nodes may go.
    repair.scan().await.unwrap();
    assert_eq!(repair.status().census.map(|c| c.stripes_under_redundant), Some(0));
    assert_whole(&cluster, "after the stale node's units were rebuilt").await;
    for i in [0, 3, 8] {
        cluster.kill(i).await;
    }
    assert_readable(&data, &objects, "three more nodes down after the stale return").await;
    cluster.shutdown().await;
}

/// A node that answers with another cluster's directory is refused (kept Down) and nothing of its
/// units counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_another_clusters_directory_is_refused() {
    let mut cluster = TestCluster::start(9, 9).await;
    let config = cluster.config("rs-6-3");
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let membership = Membership::new(Arc::clone(data.io().cluster()), MembershipConfig::default());
    admit_all(&membership, &cluster).await;
    cluster.stop(4).await;
    let identity_path = cluster.dirs[4].path().join(node::identity::IDENTITY_FILE);
    let text = std::fs::read_to_string(&identity_path).unwrap();
    let cluster_id = cluster.meta.get_config("cluster-id").await.unwrap().unwrap();
    std::fs::write(&identity_path, text.replace(&cluster_id, "another-cluster")).unwrap();
    cluster.restart(4).await;
    membership.probe_round(gateway::data::cluster::membership::unix_now_ms()).await.unwrap();
    let refused = membership.directory_status().refused;
    assert!(refused.iter().any(|(id, why)| *id == NodeId(4) && why.contains("another-cluster")), "{refused:?}");
    assert_eq!(cluster.node_info(4).await.state, meta::NodeState::Down);
    cluster.shutdown().await;
}

/// A read that failed an end-to-end check has its stripes examined: every unit read whole, so one
/// that rotted is found (and reported for repair) even though the failed read did not touch it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn examining_a_layout_finds_a_unit_whose_blocks_rotted() {
    let cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    let data = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap();
    let layout = data.write(pattern(2 << 20, 7)).await.unwrap().layout;
    let stripe = cluster.meta.get_stripe(layout.stripes()[0]).await.unwrap();
    let (parity, node) = (7u16, stripe.placement[7]);
    cluster.corrupt_unit(node.0 as usize, stripe.id.0, parity);
    assert!(data.io().take_corrupt_reports().is_empty());
    data.examine(&layout);
    for _ in 0..100 {
        let reports = data.io().take_corrupt_reports();
        if !reports.is_empty() {
            assert_eq!(reports, vec![(stripe.id, parity, node)]);
            cluster.shutdown().await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the rotten parity unit was not found");
}

/// A node whose disk was replaced (an empty directory under the same node id) is checked like an
/// older copy: every unit the stripes place on it is recorded missing, and repair refills it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_a_new_disk_is_refilled_before_its_stripes_count() {
    let mut cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let membership = Membership::new(Arc::clone(data.io().cluster()), MembershipConfig::default());
    admit_all(&membership, &cluster).await;
    let mut objects = Vec::new();
    for seed in 0..3 {
        let body = pattern(1 << 20, 40 + seed);
        objects.push((body.clone(), data.write(body).await.unwrap().layout));
    }
    let replaced = 2;
    let on_it = cluster.meta.stripes_on_node(NodeId(replaced as u32), None, 100).await.unwrap().len() as u64;
    cluster.stop(replaced).await;
    std::fs::remove_dir_all(cluster.dirs[replaced].path()).unwrap();
    std::fs::create_dir_all(cluster.dirs[replaced].path()).unwrap();
    cluster.restart(replaced).await;
    admit_all(&membership, &cluster).await;
    let status = membership.directory_status();
    let (_, report) = status.last_checks.iter().find(|(id, _)| *id == NodeId(replaced as u32)).expect("checked");
    assert!(report.checksums_compared && report.units_listed == 0, "{report:?}");
    assert_eq!((report.units_expected, report.units_lost), (on_it, on_it), "every unit it held: {report:?}");
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    repair.scan().await.unwrap();
    assert_eq!(repair.status().census.map(|c| c.stripes_under_redundant), Some(0));
    assert_whole(&cluster, "after the new disk was refilled").await;
    for i in [0, 4, 6] {
        cluster.kill(i).await;
    }
    assert_readable(&data, &objects, "three more down after the refill").await;
    cluster.shutdown().await;
}

/// A node's check compares its listing with the stripe records read after it: a stripe written
/// between the two has units the listing lacks, and they are looked up again before anything is
/// recorded missing; a unit truly gone is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_does_not_take_units_written_after_its_listing_for_lost() {
    let cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    let data = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap();
    let client = cluster.client(0).await;
    let listed = gateway::data::cluster::reconcile::list_units(&client, true).await.unwrap();
    let body = pattern(1 << 20, 7);
    let layout = data.write(body.clone()).await.unwrap().layout;
    let Layout::Striped { segments } = &layout else { panic!("striped") };
    let stripe = segments[0].stripe;
    let node = cluster.node_info(0).await;
    let check = |listed| {
        let (meta, client, node) = (Arc::clone(&cluster.meta), client.clone(), node.clone());
        async move { gateway::data::cluster::reconcile::mark_lost_units(meta.as_ref(), &client, &node, &listed, true).await }
    };
    let report = check(listed.clone()).await.unwrap();
    assert_eq!((report.units_expected, report.units_lost, report.units_marked_missing), (1, 0, 0), "{report:?}");
    assert!(cluster.meta.get_stripe(stripe).await.unwrap().missing_units.is_empty());
    // Gone for real: recorded missing.
    let unit = cluster.meta.get_stripe(stripe).await.unwrap().placement.iter().position(|n| *n == NodeId(0));
    let unit = u16::try_from(unit.expect("a unit on node 0 (9 units, 9 nodes)")).unwrap();
    assert!(client.delete_unit(stripe.0, unit).await.unwrap());
    let report = check(listed).await.unwrap();
    assert_eq!((report.units_lost, report.units_marked_missing), (1, 1), "{report:?}");
    assert_eq!(cluster.meta.get_stripe(stripe).await.unwrap().missing_units, vec![unit]);
    assert!(data.read(&layout, 0..body.len() as u64).await.unwrap() == body, "read around the lost unit");
    cluster.shutdown().await;
}
