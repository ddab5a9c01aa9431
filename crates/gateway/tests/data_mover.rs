//! EC-Store's mover on real storage nodes: moves learned from batch reads run while objects are
//! read, batch-read, overwritten and deleted, and every acknowledged object reads back identical;
//! no stripe ever has two units on one node; the old copy is released; a mover stopped after its
//! copy leaves one orphan, which the collector deletes; a switch that loses its race deletes its
//! copy; plain reads the S3 layer takes for one request feed the mover's statistics.

mod data_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use data_support::{TestCluster, pattern};
use futures_util::StreamExt;
use gateway::data::config::MoverConfig;
use gateway::data::read::controller::{Controller, ControllerConfig, StoreMove};
use gateway::data::services::mover::MoverService;
use gateway::data::services::orphans::OrphanCollector;
use gateway::data::services::repair::RepairService;
use gateway::data::{ErasureData, ObjectData, OrphanConfig, RepairConfig};
use meta::{Layout, NodeId, StripeId};
use policy::ecstore::mover::MoverSettings;

const CODE: &str = "rs-2-2";

fn stripe_of(layout: &Layout) -> StripeId {
    match layout {
        Layout::Striped { segments } => segments[0].stripe,
        other => panic!("a one-stripe object, not {other:?}"),
    }
}

async fn attach(data: &ErasureData, moves_per_s: f64) -> (Arc<Controller>, Arc<MoverService>) {
    let settings = MoverSettings { max_moves_per_s: moves_per_s, ..Default::default() };
    let mover_config = MoverConfig { enabled: true, settings, load_period_ms: 100, ..Default::default() };
    let config = ControllerConfig { max_records: 100_000, mover: mover_config.clone(), ..Default::default() };
    let controller = Arc::new(Controller::new(&config, CODE).unwrap());
    data.reads().attach_controller(Arc::clone(&controller)).unwrap();
    let repair = Arc::new(RepairService::new(Arc::clone(data.io()), RepairConfig::default()));
    let mover = Arc::new(MoverService::new(Arc::clone(data.io()), Arc::clone(&controller), repair, mover_config));
    (controller, mover)
}

async fn units_on(cluster: &TestCluster, node: usize) -> Vec<(u64, u32)> {
    let listed = cluster.client(node).await.list_units(None, 0).await.unwrap();
    listed.units.iter().map(|u| (u.stripe, u.unit)).collect()
}

/// A move of `stripe`'s unit 0 to a node holding none of its units.
async fn hand_made_move(data: &ErasureData, stripe: StripeId, nodes: u32) -> StoreMove {
    let record = data.io().stripe(stripe).await.unwrap();
    let to = (0..nodes).map(NodeId).find(|n| !record.placement.contains(n)).unwrap();
    StoreMove {
        stripe,
        unit: 0,
        from: record.placement[0],
        to,
        unit_bytes: record.unit_bytes,
        gain: 0.0,
        access_gain: 0.0,
        balance_gain: 0.0,
        proposed_ns: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mover_moves_during_reads_overwrites_and_deletes_and_every_acknowledged_object_reads_back() {
    let cluster = TestCluster::start(8, 8).await;
    let data = Arc::new(ErasureData::new(cluster.config(CODE), Arc::clone(&cluster.meta)).await.unwrap());
    let (controller, mover) = attach(&data, 50.0).await;
    let mut objects: BTreeMap<usize, (Bytes, Layout)> = BTreeMap::new();
    for i in 0..24 {
        let body = pattern(90_000 + i * 1000, i as u64);
        let layout = data.write(body.clone()).await.unwrap().layout;
        objects.insert(i, (body, layout));
    }
    let running = Arc::clone(&mover).spawn();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut round = 0usize;
    // Pages of four co-read objects, read as batches; meanwhile objects are overwritten, deleted,
    // written anew and read whole. Bounded by the deadline and a round cap.
    while Instant::now() < deadline && round < 2_000 && mover.status().moves < 20 {
        let page: Vec<usize> = (0..4).map(|j| (round % 4) * 4 + j).collect();
        let layouts: Vec<Layout> = page.iter().map(|i| objects[i].1.clone()).collect();
        let mut read = data.read_batch(&layouts);
        while let Some((index, parts)) = read.next().await {
            let bytes: Vec<u8> = parts.unwrap().concat();
            assert!(bytes == objects[&page[index]].0, "object {} in a batch", page[index]);
        }
        drop(read);
        let churn = 16 + round % 8;
        match round % 3 {
            0 => {
                let body = pattern(95_000, 1_000 + round as u64);
                let layout = data.write(body.clone()).await.unwrap().layout;
                if let Some((_, old)) = objects.insert(churn, (body, layout)) {
                    data.release(&old).await.unwrap();
                }
            }
            1 => {
                if let Some((_, old)) = objects.remove(&churn) {
                    data.release(&old).await.unwrap();
                }
            }
            _ => {
                if let Some((body, layout)) = objects.get(&churn) {
                    assert!(data.read(layout, 0..body.len() as u64).await.unwrap() == *body);
                }
            }
        }
        round += 1;
    }
    running.shutdown().await;
    let status = mover.status();
    eprintln!("after {round} rounds: {status:?}");
    assert!(status.moves > 0, "the mover moved nothing in {round} rounds: {status:?}");
    for (i, (body, layout)) in &objects {
        let read = data.read(layout, 0..body.len() as u64).await.unwrap();
        assert!(read == *body, "object {i} reads back identical after the moves");
        let record = data.io().stripe(stripe_of(layout)).await.unwrap();
        let mut nodes = record.placement.clone();
        nodes.sort();
        nodes.dedup();
        assert_eq!(nodes.len(), record.placement.len(), "stripe {} has two units on one node", record.id);
    }
    let moves = controller.take_move_records();
    assert_eq!(moves.iter().filter(|m| m.end_ns != model::NEVER).count() as u64, status.moves);
    // Release delay 0 (the test cluster's): the old copies of the moves are gone.
    mover.release_due().await;
    assert!(mover.status().releases_done > 0, "{:?}", mover.status());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mover_stopped_after_its_copy_leaves_an_orphan_the_collector_deletes() {
    let cluster = TestCluster::start(6, 6).await;
    let data = ErasureData::new(cluster.config(CODE), Arc::clone(&cluster.meta)).await.unwrap();
    let (_controller, mover) = attach(&data, 1.0).await;
    let body = pattern(120_000, 7);
    let layout = data.write(body.clone()).await.unwrap().layout;
    let stripe = stripe_of(&layout);
    let moved = hand_made_move(&data, stripe, 6).await;
    let before = data.io().stripe(stripe).await.unwrap();
    // The copy lands; the mover "dies" before the switch.
    let copied = mover.copy(&moved).await.unwrap();
    drop(copied);
    let to = moved.to.0 as usize;
    assert!(units_on(&cluster, to).await.contains(&(stripe.0, 0)), "the copy is on the new node");
    assert_eq!(data.io().stripe(stripe).await.unwrap(), before, "the stripe record is untouched");
    assert!(data.read(&layout, 0..body.len() as u64).await.unwrap() == body);
    let orphans = OrphanCollector::new(Arc::clone(data.io()), OrphanConfig { grace_ms: 1_000, ..Default::default() });
    let start = Instant::now();
    orphans.scan_at(start).await.unwrap();
    let second = orphans.scan_at(start + Duration::from_secs(2)).await.unwrap();
    assert!(second.deleted >= 1, "{second:?}");
    assert!(!units_on(&cluster, to).await.contains(&(stripe.0, 0)), "the orphan copy was deleted");
    assert!(data.read(&layout, 0..body.len() as u64).await.unwrap() == body, "the object is whole");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_switch_commits_and_releases_or_loses_its_race_and_deletes_its_copy() {
    let cluster = TestCluster::start(6, 6).await;
    let data = ErasureData::new(cluster.config(CODE), Arc::clone(&cluster.meta)).await.unwrap();
    let (_controller, mover) = attach(&data, 1.0).await;
    let body = pattern(120_000, 8);
    let layout = data.write(body.clone()).await.unwrap().layout;
    let stripe = stripe_of(&layout);

    // Lost: the stripe record changed between the copy and the switch.
    let moved = hand_made_move(&data, stripe, 6).await;
    let copied = mover.copy(&moved).await.unwrap();
    let record = data.io().stripe(stripe).await.unwrap();
    cluster.meta.update_stripe(stripe, record.version, record.clone()).await.unwrap();
    assert!(mover.switch(copied).await.is_err(), "a switch on an old version is refused");
    assert!(!units_on(&cluster, moved.to.0 as usize).await.contains(&(stripe.0, 0)), "the copy was deleted");
    assert_eq!(data.io().stripe(stripe).await.unwrap().placement, record.placement);

    // Committed: the record names the new node, the old copy goes after the delay (0 here).
    let moved = hand_made_move(&data, stripe, 6).await;
    let copied = mover.copy(&moved).await.unwrap();
    mover.switch(copied).await.unwrap();
    let after = data.io().stripe(stripe).await.unwrap();
    assert_eq!(after.placement[0], moved.to);
    assert!(data.read(&layout, 0..body.len() as u64).await.unwrap() == body);
    assert!(units_on(&cluster, moved.from.0 as usize).await.contains(&(stripe.0, 0)), "kept until released");
    mover.release_due().await;
    assert!(!units_on(&cluster, moved.from.0 as usize).await.contains(&(stripe.0, 0)), "the old copy released");
    assert!(data.read(&layout, 0..body.len() as u64).await.unwrap() == body);
    assert_eq!(mover.status().moves, 1);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn plain_reads_taken_for_one_request_feed_the_movers_statistics() {
    let cluster = TestCluster::start(6, 6).await;
    let data = ErasureData::new(cluster.config(CODE), Arc::clone(&cluster.meta)).await.unwrap();
    let (controller, _mover) = attach(&data, 1.0).await;
    let mut stripes = Vec::new();
    for seed in 0..3 {
        let body = pattern(110_000, 20 + seed);
        let layout = data.write(body.clone()).await.unwrap().layout;
        // A plain read registers the stripe in the controller's catalog.
        assert!(data.read(&layout, 0..body.len() as u64).await.unwrap() == body);
        stripes.push(stripe_of(&layout));
    }
    let window = |controller: &Controller| controller.mover_gauges()["window_batches"];
    assert_eq!(window(&controller), 0.0);
    data.observe_coaccess(&stripes);
    assert_eq!(window(&controller), 1.0, "the three stripes are one batch of the statistics");
    // A stripe the catalog never saw is left out; one known stripe alone is no co-access.
    data.observe_coaccess(&[StripeId(999_999), stripes[0]]);
    assert_eq!(window(&controller), 1.0);
    cluster.shutdown().await;
}
