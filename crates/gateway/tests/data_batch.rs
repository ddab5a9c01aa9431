//! Batch reads (EC-Store) on real storage nodes: every access policy reads back every byte of
//! packed, striped, multi-stripe and empty objects; the units one batch reads on a node run as one
//! task there; late binding launches k + δ reads per block; a killed node's blocks are still read;
//! blocks and batches are recorded.

mod data_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use data_support::{TestCluster, pattern};
use futures_util::StreamExt;
use gateway::data::read::controller::{Controller, ControllerConfig};
use gateway::data::{ErasureData, ObjectData};
use meta::Layout;
use model::{Outcome, TaskRole};
use policy::ecstore::access::{AccessKind, AccessSettings};

const CODE: &str = "rs-2-2";

async fn with_controller(data: &ErasureData) -> Arc<Controller> {
    let config = ControllerConfig { max_records: 100_000, ..Default::default() };
    let controller = Arc::new(Controller::new(&config, CODE).unwrap());
    data.reads().attach_controller(Arc::clone(&controller)).unwrap();
    controller
}

/// Objects of every layout: packed (sealed), one stripe, several stripes, empty.
async fn write_objects(data: &ErasureData, sizes: &[usize]) -> Vec<(Bytes, Layout)> {
    let mut objects = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        let body = pattern(size, 500 + i as u64);
        let layout = data.write(body.clone()).await.unwrap().layout;
        objects.push((body, layout));
    }
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    objects
}

/// Reads `objects` as one batch and checks every byte; each object is yielded once.
async fn read_back(data: &ErasureData, objects: &[(Bytes, Layout)]) {
    let layouts: Vec<Layout> = objects.iter().map(|(_, layout)| layout.clone()).collect();
    let mut seen = BTreeSet::new();
    let mut read = data.read_batch(&layouts);
    while let Some((index, result)) = read.next().await {
        assert!(seen.insert(index), "object {index} yielded twice");
        let parts = result.unwrap_or_else(|error| panic!("object {index}: {error}"));
        let bytes: Vec<u8> = parts.concat();
        assert!(bytes == objects[index].0, "object {index} ({} B) read back identical", objects[index].0.len());
    }
    assert_eq!(seen.len(), objects.len(), "every object yielded");
}

fn access(kind: AccessKind, extra_reads: u8, cancel_extra: bool) -> AccessSettings {
    AccessSettings { kind, extra_reads, cancel_extra, ..Default::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_access_policy_reads_every_byte_of_every_layout() {
    let cluster = TestCluster::start(8, 8).await;
    let data = ErasureData::new(cluster.config(CODE), Arc::clone(&cluster.meta)).await.unwrap();
    let objects = write_objects(&data, &[0, 1_000, 30_000, 100_000, 250_000, 5 << 20, 100_001]).await;
    let controller = with_controller(&data).await;
    for (kind, delta, cancel) in [
        (AccessKind::Random, 0, false),
        (AccessKind::DataFirst, 0, false),
        (AccessKind::Cost, 0, false),
        (AccessKind::Cost, 1, false),
        (AccessKind::Cost, 2, true),
        (AccessKind::Llf, 0, false),
        (AccessKind::Lmlf, 1, false),
    ] {
        controller.set_access(access(kind, delta, cancel)).unwrap();
        controller.take_records();
        read_back(&data, &objects).await;
        let batches = controller.take_batch_records();
        assert_eq!(batches.len(), 1, "one batch record per batch");
        assert_eq!(batches[0].blocks, 6, "the striped objects' stripes (1 + 1 + 3 + 1)");
        assert_eq!(batches[0].outcome, Outcome::Ok);
        // Its blocks' records (the packed objects' reads are recorded on their own); each launched
        // k + δ reads.
        let (records, _) = controller.take_records();
        let planned: Vec<_> = records.iter().filter(|r| batches[0].requests().contains(&r.request.request.0)).collect();
        assert_eq!(planned.len(), 6, "{kind:?} δ {delta}: one record per stripe read");
        // Hu et al.'s rules probe each node of the batch once, before planning; the others probe
        // nothing per batch.
        let probes: u32 = planned.iter().map(|r| r.request.probes).sum();
        let nodes: BTreeSet<u32> = planned.iter().flat_map(|r| r.tasks.iter().map(|t| t.node.0)).collect();
        match kind {
            AccessKind::Llf | AccessKind::Lmlf => assert!(probes as usize >= nodes.len() && probes <= 8, "{probes}"),
            _ => assert_eq!(probes, 0, "{kind:?}"),
        }
        for record in planned {
            assert_eq!(record.tasks.len(), 2 + usize::from(delta), "{kind:?}: k + δ reads");
            let extra = record.tasks.iter().filter(|t| t.role == TaskRole::Extra).count();
            assert_eq!(extra, usize::from(delta));
            assert_eq!(record.request.outcome, Outcome::Ok);
            assert!(record.request.arrival_ns <= record.request.completion_ns);
        }
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_units_a_batch_reads_on_one_node_are_one_task_there() {
    let cluster = TestCluster::start(6, 6).await;
    let data = ErasureData::new(cluster.config(CODE), Arc::clone(&cluster.meta)).await.unwrap();
    // Twenty one-stripe objects on six nodes: most nodes serve several of a batch's units.
    let sizes = vec![200_000; 20];
    let objects = write_objects(&data, &sizes).await;
    let controller = with_controller(&data).await;
    controller.set_access(access(AccessKind::DataFirst, 0, false)).unwrap();
    let completed = |stats: &[node::proto::StatsResponse]| stats.iter().map(|s| s.tasks_completed).sum::<u64>();
    let mut before = Vec::new();
    for i in 0..6 {
        before.push(cluster.client(i).await.stats().await.unwrap());
    }
    read_back(&data, &objects).await;
    let mut after = Vec::new();
    for i in 0..6 {
        after.push(cluster.client(i).await.stats().await.unwrap());
    }
    let (records, _) = controller.take_records();
    let reads: usize = records.iter().map(|r| r.tasks.len()).sum();
    let nodes: BTreeSet<u32> = records.iter().flat_map(|r| r.tasks.iter().map(|t| t.node.0)).collect();
    assert_eq!(reads, 40, "two data units per object");
    assert_eq!(completed(&after) - completed(&before), nodes.len() as u64, "one task per node the batch read");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_reads_around_a_killed_node() {
    let mut cluster = TestCluster::start(6, 6).await;
    let data = ErasureData::new(cluster.config(CODE), Arc::clone(&cluster.meta)).await.unwrap();
    let objects = write_objects(&data, &[150_000, 90_000, 3 << 20, 70_000, 120_000]).await;
    let controller = with_controller(&data).await;
    for (kind, delta, cancel) in [(AccessKind::DataFirst, 0, false), (AccessKind::Cost, 1, true)] {
        controller.set_access(access(kind, delta, cancel)).unwrap();
        // Stopped but not yet marked Down: the plan reads it, its task fails, the block falls back.
        cluster.stop(1).await;
        read_back(&data, &objects).await;
        // Down: the plan reads around it.
        cluster.kill(1).await;
        read_back(&data, &objects).await;
        cluster.restart(1).await;
    }
    let batches = controller.take_batch_records();
    assert!(batches.iter().all(|b| b.outcome == Outcome::Ok), "{batches:?}");
    cluster.shutdown().await;
}

/// A GET under a profile with `access = "ecstore"`: the stripes its range covers whole are one
/// EC-Store batch (recorded as one, each block with k + δ reads and the profile's name), the
/// stripes it covers in part go per range, and every byte reads back, with a node killed too.
/// Outside the profile, a GET makes no batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_get_under_an_ecstore_profile_reads_its_whole_stripes_as_one_batch() {
    let mut cluster = TestCluster::start(8, 8).await;
    let data = ErasureData::new(cluster.config(CODE), Arc::clone(&cluster.meta)).await.unwrap();
    let objects = write_objects(&data, &[5 << 20]).await;
    let (body, layout) = &objects[0];
    let Layout::Striped { segments } = layout else { panic!("a 5 MiB object is striped") };
    assert!(segments.len() >= 3, "{} stripes", segments.len());
    let controller = with_controller(&data).await;
    controller.set_access(access(AccessKind::Cost, 1, false)).unwrap();
    let profile = policy::Profile { access: policy::profile::Access::Ecstore, ..Default::default() };
    let active = Arc::new(gateway::profiles::ActiveProfile { name: "batched".into(), profile, refusal: None });
    let get =
        |range: std::ops::Range<u64>| gateway::profiles::scope(Some(Arc::clone(&active)), data.read(layout, range));
    let size = body.len() as u64;
    assert!(get(0..size).await.unwrap() == *body, "the whole object");
    let batches = controller.take_batch_records();
    assert_eq!(batches.len(), 1, "one batch for the GET");
    assert_eq!(batches[0].blocks as usize, segments.len(), "every stripe whole");
    let (records, _) = controller.take_records();
    assert_eq!(records.len(), segments.len(), "one record per block");
    for record in &records {
        let layers = record.layers.as_ref().expect("the layers' decisions");
        assert_eq!((layers.profile.as_str(), layers.planner.as_str()), ("batched", "ecstore-access"));
        assert_eq!(record.tasks.len(), 3, "k + δ reads");
    }
    // From inside the first stripe to inside the last: the middle ones as a batch.
    let (from, to) = (segments[0].length_bytes / 2, size - segments.last().unwrap().length_bytes / 2);
    assert!(get(from..to).await.unwrap() == body.slice(from as usize..to as usize), "a ranged GET");
    assert_eq!(controller.take_batch_records()[0].blocks as usize, segments.len() - 2, "the stripes covered whole");
    // Outside the profile: per range.
    assert!(data.read(layout, 0..size).await.unwrap() == *body);
    assert!(controller.take_batch_records().is_empty(), "no batch outside the profile");
    cluster.kill(0).await;
    assert!(get(0..size).await.unwrap() == *body, "with a node killed");
    assert_eq!(controller.take_batch_records().len(), 1);
    cluster.shutdown().await;
}

/// A block's plan carries its deadline (the access settings' `block_deadline_ns`), run by the
/// execution core: past it the block's reads are cancelled and the robust read serves it, so a
/// deadline no read can meet still reads back every byte, each block counted as a fallback and
/// recorded timed out (and served degraded, by the robust read); the default deadline is never
/// reached on a healthy cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_block_past_its_plans_deadline_is_read_robustly() {
    let cluster = TestCluster::start(8, 8).await;
    let data = ErasureData::new(cluster.config(CODE), Arc::clone(&cluster.meta)).await.unwrap();
    let objects = write_objects(&data, &[100_000, 250_000, 5 << 20]).await;
    let controller = with_controller(&data).await;
    let fallbacks = || controller.counters().fallbacks.load(std::sync::atomic::Ordering::Relaxed);
    controller.set_access(AccessSettings { block_deadline_ns: 1_000, ..access(AccessKind::Cost, 0, false) }).unwrap();
    let before = fallbacks();
    read_back(&data, &objects).await;
    let (records, _) = controller.take_records();
    let blocks = records.iter().filter(|r| r.layers.as_ref().is_some_and(|l| l.planner == "ecstore-access")).count();
    assert!(blocks > 0 && fallbacks() - before == blocks as u64, "every block fell back: {blocks}");
    assert!(records.iter().all(|r| r.request.timed_out && r.request.degraded), "recorded timed out");
    controller.set_access(access(AccessKind::Cost, 0, false)).unwrap();
    let before = fallbacks();
    read_back(&data, &objects).await;
    assert_eq!(fallbacks(), before, "the default deadline is not reached");
    cluster.shutdown().await;
}
