//! The metadata store lost whole and rebuilt from the storage nodes (issue 52): objects written
//! through S3 (packed, one stripe, several stripes; with content types and user metadata), some
//! overwritten and deleted, a snapshot taken, more written after it (one left in an open packed
//! stripe), then the store is thrown away and `meta_rebuild` restores it from the nodes alone.
//! Every acknowledged object must read back, byte for byte, with its ETag and metadata.

mod data_support;
mod s3_common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use data_support::TestCluster;
use gateway::data::{ErasureData, ObjectData, OrphanConfig, PackedConfig};
use gateway::meta_rebuild::{RebuildSource, rebuild};
use gateway::meta_snapshot::{MetaSnapshotConfig, MetaSnapshots};
use gateway::s3::{S3Options, build_service, serve};
use meta::{MetaStore, RedbStore};

/// An S3 endpoint over `meta` and `data`; stops when the sender is dropped.
async fn s3_over(
    meta: Arc<dyn MetaStore>,
    data: ErasureData,
) -> (aws_sdk_s3::Client, tokio::sync::oneshot::Sender<()>) {
    let object_data: Arc<dyn ObjectData> = Arc::new(data);
    let credentials = vec![(s3_common::ACCESS_KEY.into(), s3_common::SECRET_KEY.into())];
    let service = build_service(meta, object_data, credentials, S3Options::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(listener, service, async move {
        let _ = stopped.await;
    }));
    (s3_common::client_with(&endpoint, s3_common::ACCESS_KEY, s3_common::SECRET_KEY), stop)
}

/// What a client was told it stored: bytes, ETag, content type, user metadata.
type Acknowledged = BTreeMap<String, (Vec<u8>, String, Option<String>, Option<String>)>;

async fn put(client: &aws_sdk_s3::Client, expected: &mut Acknowledged, key: &str, size: usize, seed: u8) {
    let body = s3_common::pattern(size, seed);
    let content_type: Option<String> = seed.is_multiple_of(2).then(|| format!("application/x-test-{seed}"));
    let color = format!("color-{seed}");
    let mut request =
        client.put_object().bucket("rebuilt").key(key).body(ByteStream::from(body.clone())).metadata("color", &color);
    if let Some(content_type) = &content_type {
        request = request.content_type(content_type);
    }
    let etag = request.send().await.unwrap().e_tag.unwrap().trim_matches('"').to_string();
    // What the store answers for the content type (its default when none was sent).
    let head = client.head_object().bucket("rebuilt").key(key).send().await.unwrap();
    assert_eq!(head.e_tag.as_deref().map(|e| e.trim_matches('"')), Some(etag.as_str()));
    expected.insert(key.to_string(), (body, etag, head.content_type, Some(color)));
}

async fn check_all(client: &aws_sdk_s3::Client, expected: &Acknowledged) -> usize {
    let mut recovered = 0;
    for (key, (body, etag, content_type, color)) in expected {
        let Ok(got) = client.get_object().bucket("rebuilt").key(key).send().await else {
            eprintln!("{key}: not found after the rebuild");
            continue;
        };
        let (got_etag, got_type) = (got.e_tag.clone().unwrap_or_default(), got.content_type.clone());
        let got_color = got.metadata.as_ref().and_then(|m| m.get("color").cloned());
        let bytes = got.body.collect().await.unwrap().into_bytes();
        let same = bytes.as_ref() == body.as_slice()
            && got_etag.trim_matches('"') == etag
            && got_type == *content_type
            && got_color == *color;
        if same {
            recovered += 1;
        } else {
            eprintln!("{key}: read back differently ({} bytes, etag {got_etag})", bytes.len());
        }
    }
    recovered
}

async fn rebuilt_store(
    cluster: &TestCluster,
    config: gateway::data::DataConfig,
) -> (Arc<dyn MetaStore>, gateway::meta_rebuild::RebuildReport, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let target: Arc<dyn MetaStore> = Arc::new(RedbStore::open(dir.path()).unwrap());
    let nodes = cluster.meta.list_nodes().await.unwrap();
    let report = rebuild(RebuildSource { nodes, data: config }, Arc::clone(&target)).await.unwrap();
    eprintln!("{report:?}");
    assert!(report.nodes_unanswered.is_empty() && report.units_undescribed == 0, "{report:?}");
    (target, report, dir)
}

fn data_config(cluster: &TestCluster) -> gateway::data::DataConfig {
    let mut config = cluster.config("rs-6-3");
    config.unit_bytes = 256 << 10;
    config.packed = PackedConfig { seal_after_ms: 600_000, ..Default::default() };
    config.orphans = OrphanConfig { release_delay_ms: 0, ..Default::default() };
    config
}

/// A cluster of 9 nodes with an S3 endpoint over it and the bucket `rebuilt`.
async fn written_cluster()
-> (TestCluster, gateway::data::DataConfig, ErasureData, aws_sdk_s3::Client, tokio::sync::oneshot::Sender<()>) {
    let cluster = TestCluster::start(9, 9).await;
    let config = data_config(&cluster);
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let (client, stop) = s3_over(Arc::clone(&cluster.meta), data.clone()).await;
    client.create_bucket().bucket("rebuilt").send().await.unwrap();
    (cluster, config, data, client, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_object_is_rebuilt_from_a_snapshot_and_the_units_written_since() {
    let (cluster, config, data, client, stop) = written_cluster().await;
    let mut expected = Acknowledged::new();
    for (i, size) in [100usize, 3000, 70_000, 900_000, 4 << 20].into_iter().enumerate() {
        put(&client, &mut expected, &format!("before/{i}"), size, i as u8).await;
    }
    put(&client, &mut expected, "before/0", 5000, 50).await; // overwritten
    client.delete_object().bucket("rebuilt").key("before/3").send().await.unwrap();
    expected.remove("before/3");
    put(&client, &mut expected, "before/packed-deleted", 500, 51).await;
    client.delete_object().bucket("rebuilt").key("before/packed-deleted").send().await.unwrap();
    expected.remove("before/packed-deleted");
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    let snapshots = MetaSnapshots::new(Arc::clone(&cluster.meta), data.clone(), MetaSnapshotConfig::default(), true);
    let taken = snapshots.take().await.unwrap();
    assert!(taken.size_bytes > 0);
    // After the snapshot: new objects, an overwrite, a delete of a striped object, and a small
    // object left in an open packed stripe (only its replicas on the nodes).
    tokio::time::sleep(Duration::from_millis(20)).await;
    for (i, size) in [200usize, 600_000, (3 << 20) + 7].into_iter().enumerate() {
        put(&client, &mut expected, &format!("after/{i}"), size, 10 + i as u8).await;
    }
    put(&client, &mut expected, "before/1", 2 << 20, 60).await;
    client.delete_object().bucket("rebuilt").key("before/4").send().await.unwrap();
    expected.remove("before/4");
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    put(&client, &mut expected, "after/open", 1234, 20).await;
    drop(stop);

    // The store is lost; a new one is rebuilt from the nodes.
    let (target, report, _dir) = rebuilt_store(&cluster, config.clone()).await;
    assert_eq!(report.snapshot.as_ref().map(|s| s.snapshot_id), Some(taken.label.snapshot_id), "{report:?}");
    assert!(report.objects_from_snapshot >= 4 && report.objects_rolled_forward >= 4, "{report:?}");
    assert_eq!(report.objects_rewritten_from_replicas, 1, "the object in the open stripe: {report:?}");
    let rebuilt = ErasureData::new(config, Arc::clone(&target)).await.unwrap();
    let (client, _stop) = s3_over(Arc::clone(&target), rebuilt).await;
    assert_eq!(check_all(&client, &expected).await, expected.len(), "every acknowledged object recovered");
    let gone = client.get_object().bucket("rebuilt").key("before/4").send().await;
    assert!(gone.is_err(), "a striped object deleted after the snapshot stays deleted");
    let gone = client.get_object().bucket("rebuilt").key("before/packed-deleted").send().await;
    assert!(gone.is_err(), "a packed object deleted before the snapshot stays deleted (its bytes remain)");
    let listed = client.list_objects_v2().bucket("rebuilt").send().await.unwrap();
    assert_eq!(listed.key_count, Some(expected.len() as i32), "nothing else listed");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_snapshot_the_units_alone_rebuild_every_object() {
    let (cluster, config, data, client, stop) = written_cluster().await;
    let mut expected = Acknowledged::new();
    for (i, size) in [10usize, 5000, 300_000, (2 << 20) + 1].into_iter().enumerate() {
        put(&client, &mut expected, &format!("k{i}"), size, 30 + i as u8).await;
    }
    put(&client, &mut expected, "k2", 40_000, 40).await;
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    drop(stop);
    let (target, report, _dir) = rebuilt_store(&cluster, config.clone()).await;
    assert_eq!((report.snapshot.is_none(), report.objects_rolled_forward), (true, 4), "{report:?}");
    let rebuilt = ErasureData::new(config, Arc::clone(&target)).await.unwrap();
    let (client, _stop) = s3_over(target, rebuilt).await;
    assert_eq!(check_all(&client, &expected).await, expected.len());
    cluster.shutdown().await;
}

/// A write whose bytes are lost (four of its nine units deleted: a write that failed after a few
/// units landed, or whose units were lost since) does not stop the rebuild: it is reported and
/// passed over, and the key's write before it, which reads back, is rolled forward instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_bytes_are_lost_is_passed_over_for_the_one_before() {
    let cluster = TestCluster::start(9, 9).await;
    let mut config = data_config(&cluster);
    // The overwritten version's units stay on the nodes (released stripes wait out their delay).
    config.orphans.release_delay_ms = 600_000;
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let (client, stop) = s3_over(Arc::clone(&cluster.meta), data.clone()).await;
    client.create_bucket().bucket("rebuilt").send().await.unwrap();
    let mut expected = Acknowledged::new();
    put(&client, &mut expected, "k", 300_000, 1).await;
    put(&client, &mut expected, "other", 300_000, 3).await;
    let mut overwritten = Acknowledged::new();
    put(&client, &mut overwritten, "k", 300_000, 2).await;
    drop(stop);
    let layout = cluster.meta.get_object("rebuilt", "k").await.unwrap().layout;
    for stripe in layout.stripes() {
        let record = cluster.meta.get_stripe(stripe).await.unwrap();
        for unit in 0..4u16 {
            let node = record.placement[usize::from(unit)].0 as usize;
            assert!(cluster.client(node).await.delete_unit(stripe.0, unit).await.unwrap());
        }
    }
    let (target, report, _dir) = rebuilt_store(&cluster, config.clone()).await;
    assert_eq!(report.writes_unreadable, ["rebuilt/k"], "{report:?}");
    assert_eq!(report.objects_rolled_forward, 2, "{report:?}");
    let rebuilt = ErasureData::new(config, Arc::clone(&target)).await.unwrap();
    let (client, _stop) = s3_over(target, rebuilt).await;
    assert_eq!(check_all(&client, &expected).await, 2, "k as first written, and the other object");
    cluster.shutdown().await;
}
