//! Segmented degraded reads on real storage nodes (`[data.reconstruct] kind = "segmented"`): with a
//! node down, every object of RS(4,2) and RS(6,3) reads back identical, whole and ranged, with and
//! without a controller; every survivor of a lost unit serves a part of it (the gateway decode
//! would read k of them), with or without an admission pool (each survivor's task then holds a slot);
//! LRC keeps the gateway decode; a rebuild on the nodes takes one admission slot per survivor's session,
//! and beside a pool too small for that it is refused; a survivor that fails its task gives the
//! segmented plan up and the robust read serves the bytes.

mod data_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use data_support::{TestCluster, pattern};
use execution::AdmissionSettings;
use gateway::data::read::controller::{Controller, ControllerConfig};
use gateway::data::{DataConfig, ErasureData, ObjectData};
use meta::Layout;
use policy::reconstruct::{ReconstructKind, ReconstructSettings};

fn segmented(config: DataConfig) -> DataConfig {
    DataConfig { reconstruct: ReconstructSettings { kind: ReconstructKind::Segmented, ..Default::default() }, ..config }
}

async fn write_objects(data: &ErasureData, sizes: &[usize]) -> Vec<(Bytes, Layout)> {
    let mut objects = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        let body = pattern(size, 900 + i as u64);
        objects.push((body.clone(), data.write(body).await.unwrap().layout));
    }
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    objects
}

async fn assert_readable(data: &ErasureData, objects: &[(Bytes, Layout)], what: &str) {
    for (body, layout) in objects {
        let read = data.read(layout, 0..body.len() as u64).await.unwrap();
        assert!(read == *body, "{what}: {} B object read back identical", body.len());
        let (from, to) = (body.len() as u64 / 3, body.len() as u64 * 5 / 6);
        let part = data.read(layout, from..to).await.unwrap();
        assert!(part == body.slice(from as usize..to as usize), "{what}: ranged read");
    }
}

/// Reads served per node (from the nodes' stats), by node index.
async fn reads_per_node(cluster: &TestCluster, nodes: usize, down: usize) -> BTreeMap<usize, u64> {
    let mut reads = BTreeMap::new();
    for i in (0..nodes).filter(|&i| i != down) {
        reads.insert(i, cluster.client(i).await.stats().await.unwrap().tasks_completed);
    }
    reads
}

async fn every_object_reads_back_with_a_node_down(code: &str, nodes: usize, k: usize, slots: Option<usize>) {
    let mut cluster = TestCluster::start(nodes, nodes).await;
    let config = DataConfig { admission: AdmissionSettings { slots, ..Default::default() }, ..cluster.config(code) };
    let data = ErasureData::new(segmented(config), Arc::clone(&cluster.meta)).await.unwrap();
    let sizes = [0, 1_000, 100_000, 250_001, 4 << 20, (5 << 20) + 12_345];
    let objects = write_objects(&data, &sizes).await;
    // The node of the 4 MiB object's first data unit dies: its unit must be rebuilt.
    let Layout::Striped { segments } = &objects[4].1 else { panic!("a 4 MiB object is striped") };
    let stripe = cluster.meta.get_stripe(segments[0].stripe).await.unwrap();
    let down = stripe.placement[0].0 as usize;
    cluster.kill(down).await;
    let before = reads_per_node(&cluster, nodes, down).await;
    let one = &objects[4];
    let read = data.read(&one.1, 0..segments[0].length_bytes).await.unwrap();
    assert!(read == one.0.slice(..segments[0].length_bytes as usize), "{code}: the first stripe's bytes");
    let after = reads_per_node(&cluster, nodes, down).await;
    let survivors: Vec<usize> = stripe.placement.iter().map(|n| n.0 as usize).filter(|&n| n != down).collect();
    assert!(survivors.len() > k);
    for node in &survivors {
        assert!(after[node] > before[node], "{code}: survivor node {node} served a part of the lost unit");
    }
    let degraded = data.io().counters().degraded_reads.load(Ordering::Relaxed);
    assert!(degraded > 0);
    let rebuilt = data.io().counters().rebuilt_reads.load(Ordering::Relaxed);
    assert!(rebuilt > 0, "{code}: the lost range was read segmented (slots {slots:?})");
    if let Some(pool) = data.reads().pool() {
        assert_eq!(pool.occupancy(), (0, 0, 0), "{code}: every slot the segmented read took was given back");
    }
    assert_readable(&data, &objects, code).await;
    // Through a controller too: a lost unit is rebuilt segmented before any plan.
    let controller = Arc::new(Controller::new(&ControllerConfig::default(), code).unwrap());
    data.reads().attach_controller(Arc::clone(&controller)).unwrap();
    assert_readable(&data, &objects, &format!("{code} with a controller")).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rs_4_2_objects_read_back_from_every_survivor() {
    every_object_reads_back_with_a_node_down("rs-4-2", 7, 4, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rs_6_3_objects_read_back_from_every_survivor() {
    every_object_reads_back_with_a_node_down("rs-6-3", 9, 6, None).await;
}

/// Three slots for eight survivors' tasks: they take turns, and the read is still segmented.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rs_6_3_reads_segmented_through_an_admission_pool() {
    every_object_reads_back_with_a_node_down("rs-6-3", 9, 6, Some(3)).await;
}

/// A rebuild on the nodes holds one slot per survivor's session at once: beside a pool smaller than
/// the survivors it is refused with the reason (in the config and when switched to), and beside one
/// large enough a lost unit is rebuilt by the nodes through the pool, every slot given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rebuild_on_the_nodes_takes_a_slot_per_survivor_from_the_admission_pool() {
    let mut cluster = TestCluster::start(9, 9).await;
    let apls = ReconstructSettings { kind: ReconstructKind::Apls, ..Default::default() };
    let too_few = AdmissionSettings { slots: Some(7), ..Default::default() };
    for kind in [ReconstructKind::Apls, ReconstructKind::Auto] {
        let config = DataConfig {
            admission: too_few,
            reconstruct: ReconstructSettings { kind, ..Default::default() },
            ..cluster.config("rs-6-3")
        };
        let error = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap_err().to_string();
        assert!(error.contains("could never admit"), "{kind:?} beside 7 slots refused, saying why: {error}");
    }
    // Started with 7 slots and the gateway decode, a switch to APLS is refused and changes nothing.
    let config = DataConfig { admission: too_few, ..cluster.config("rs-6-3") };
    let data = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap();
    assert!(data.io().set_reconstruct(apls.clone()).is_err());
    assert_eq!(data.io().reconstruct().kind, ReconstructKind::Gateway);
    // Eight slots, one per survivor of RS(6,3) with a node down.
    let enough = AdmissionSettings { slots: Some(8), ..Default::default() };
    let config = DataConfig { admission: enough, reconstruct: apls, ..cluster.config("rs-6-3") };
    let data = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap();
    let objects = write_objects(&data, &[300_000, 4 << 20]).await;
    let Layout::Striped { segments } = &objects[1].1 else { panic!("a 4 MiB object is striped") };
    let down = cluster.meta.get_stripe(segments[0].stripe).await.unwrap().placement[0].0 as usize;
    cluster.kill(down).await;
    assert_readable(&data, &objects, "apls through a pool").await;
    let rebuilt = data.io().counters().rebuilt_reads.load(Ordering::Relaxed);
    assert!(rebuilt > 0, "the lost ranges were rebuilt by the nodes");
    let pool = data.reads().pool().expect("a bounded pool");
    assert_eq!(pool.occupancy(), (0, 0, 0), "every slot the dataflows took was given back");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lrc_keeps_the_gateway_decode() {
    let mut cluster = TestCluster::start(10, 10).await;
    let data = ErasureData::new(segmented(cluster.config("lrc-6-2-2")), Arc::clone(&cluster.meta)).await.unwrap();
    let objects = write_objects(&data, &[300_000, 3 << 20]).await;
    let Layout::Striped { segments } = &objects[1].1 else { panic!("striped") };
    let down = cluster.meta.get_stripe(segments[0].stripe).await.unwrap().placement[0].0 as usize;
    cluster.kill(down).await;
    assert_readable(&data, &objects, "lrc").await;
    cluster.shutdown().await;
}

/// A survivor whose unit is corrupt fails its merged task: the segmented plan (all of q, run by the
/// execution core) gives up at once, the robust read serves the bytes from another recovery set,
/// and every slot the plan took is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_survivor_gives_the_segmented_plan_up_and_the_robust_read_serves_it() {
    let mut cluster = TestCluster::start(9, 9).await;
    let admission = AdmissionSettings { slots: Some(4), ..Default::default() };
    let config = DataConfig { admission, ..cluster.config("rs-6-3") };
    let data = ErasureData::new(segmented(config), Arc::clone(&cluster.meta)).await.unwrap();
    let objects = write_objects(&data, &[4 << 20]).await;
    let Layout::Striped { segments } = &objects[0].1 else { panic!("a 4 MiB object is striped") };
    let stripe = cluster.meta.get_stripe(segments[0].stripe).await.unwrap();
    cluster.kill(stripe.placement[0].0 as usize).await;
    cluster.corrupt_unit(stripe.placement[1].0 as usize, stripe.id.0, 1);
    let length = segments[0].length_bytes;
    let read = data.read(&objects[0].1, 0..length).await.unwrap();
    assert!(read == objects[0].0.slice(..length as usize), "the first stripe's bytes");
    let counters = data.io().counters();
    assert!(counters.rebuild_fallbacks.load(Ordering::Relaxed) > 0, "the segmented plan gave up");
    assert_eq!(counters.rebuilt_reads.load(Ordering::Relaxed), 0, "nothing was served segmented");
    assert_eq!(data.reads().pool().unwrap().occupancy(), (0, 0, 0), "every slot given back");
    cluster.shutdown().await;
}
