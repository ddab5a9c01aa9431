//! Backend mode: a data path whose units are keys in a bucket of another S3 server (here a lowtail
//! S3 server over memory, its GETs given a heavy tail: every fifth one waits 400 ms). Objects round
//! trip through it as n keys per stripe, deletes remove the keys, and FAST CLOUD's reads (n GETs,
//! done at the first k) cut the tail that reads of the k data units alone suffer; policies that
//! probe nodes are refused, as are a missing bucket and a metadata store of a node cluster.

#![cfg(feature = "s3-backend")]

mod s3_common;

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use gateway::data::config::BackendConfig;
use gateway::data::objects::memory::MemoryData;
use gateway::data::read::controller::{Controller, ControllerConfig};
use gateway::data::{BodyStream, DataConfig, DataError, ErasureData, ObjectData, ReadHold, Written};
use gateway::s3::{S3Options, build_service, serve};
use meta::{Layout, MetaStore, WriteAck};
use policy::{FecSettings, PolicyKind, PolicySettings};
use s3_common::{ACCESS_KEY, SECRET_KEY, client_with};

/// How long a slow backend GET waits.
const SLOW_MS: u64 = 400;

/// Memory whose every fifth read waits [`SLOW_MS`] first: a heavy, deterministic tail.
struct TailedData {
    inner: MemoryData,
    reads: AtomicU64,
}

#[async_trait]
impl ObjectData for TailedData {
    async fn write(&self, body: Bytes) -> Result<Written, DataError> {
        self.inner.write(body).await
    }
    async fn write_stream(&self, body: BodyStream<'_>, ack: WriteAck) -> Result<Written, DataError> {
        self.inner.write_stream(body, ack).await
    }
    async fn read(&self, layout: &Layout, range: Range<u64>) -> Result<Bytes, DataError> {
        if self.reads.fetch_add(1, Ordering::Relaxed) % 5 == 4 {
            tokio::time::sleep(Duration::from_millis(SLOW_MS)).await;
        }
        self.inner.read(layout, range).await
    }
    async fn release(&self, layout: &Layout) -> Result<(), DataError> {
        self.inner.release(layout).await
    }
    fn hold(&self, layout: &Layout) -> ReadHold {
        self.inner.hold(layout)
    }
}

/// The backend S3 server: its endpoint, and the directory of its metadata.
async fn backend_server() -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let meta: Arc<dyn MetaStore> = Arc::new(meta::RedbStore::open(dir.path()).unwrap());
    let data = Arc::new(TailedData { inner: MemoryData::new(1 << 20), reads: AtomicU64::new(0) });
    let credentials = vec![(ACCESS_KEY.into(), SECRET_KEY.into())];
    let service = build_service(meta, data, credentials, S3Options::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(serve(listener, service, std::future::pending()));
    (endpoint, dir)
}

fn backend_config(endpoint: &str, bucket: &str) -> DataConfig {
    DataConfig {
        code: "rs-3-3".into(),
        cluster_secret: "unused-without-nodes".into(),
        packed: gateway::data::PackedConfig { max_object_bytes: 0, ..Default::default() },
        orphans: gateway::data::OrphanConfig { release_delay_ms: 0, ..Default::default() },
        backend: Some(BackendConfig {
            endpoint: endpoint.into(),
            bucket: bucket.into(),
            access_key: ACCESS_KEY.into(),
            secret_key: SECRET_KEY.into(),
            request_timeout_ms: 5_000,
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn unit_keys(client: &aws_sdk_s3::Client) -> usize {
    let listed = client.list_objects_v2().bucket("units").prefix("lowtail/").send().await.unwrap();
    listed.contents().len()
}

fn pattern(len: usize, seed: u8) -> Bytes {
    Bytes::from(s3_common::pattern(len, seed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_round_trip_through_a_backend_bucket_and_fec_reads_cut_its_tail() {
    let (endpoint, _backend_dir) = backend_server().await;
    let client = client_with(&endpoint, ACCESS_KEY, SECRET_KEY);
    client.create_bucket().bucket("units").send().await.unwrap();
    let meta_dir = tempfile::tempdir().unwrap();
    let meta: Arc<dyn MetaStore> = Arc::new(meta::RedbStore::open(meta_dir.path()).unwrap());
    let data = ErasureData::new(backend_config(&endpoint, "units"), Arc::clone(&meta)).await.unwrap();
    assert_eq!(meta.list_nodes().await.unwrap().len(), 6, "six backend slots registered");
    let controller_config = ControllerConfig {
        policy: PolicyKind::Normal,
        settings: PolicySettings { fec: FecSettings { fit_period_ms: 0, ..Default::default() }, ..Default::default() },
        max_records: 100_000,
        ..Default::default()
    };
    let controller = Arc::new(Controller::new(&controller_config, "rs-3-3").unwrap());
    controller.forbid_probing().unwrap();
    data.reads().attach_controller(Arc::clone(&controller)).unwrap();

    let objects: Vec<(Bytes, Layout)> = {
        let mut objects = Vec::new();
        for seed in 0..12u8 {
            let body = pattern(150_000, seed);
            let layout = data.write(body.clone()).await.unwrap().layout;
            objects.push((body, layout));
        }
        objects
    };
    assert_eq!(unit_keys(&client).await, 12 * 6, "one key per unit: n = 6 per stripe");

    // Reads of the k data units wait for every slow GET among them; n = 6 GETs done at the first
    // three never do (at most two of six consecutive GETs are slow).
    let mut slowest = Vec::new();
    for kind in [PolicyKind::Normal, PolicyKind::FecFixed] {
        controller.set_policy(kind, controller.policy().settings).unwrap();
        let mut worst = Duration::ZERO;
        for (body, layout) in &objects {
            let began = Instant::now();
            assert!(data.read(layout, 0..body.len() as u64).await.unwrap() == *body, "{kind}");
            worst = worst.max(began.elapsed());
        }
        slowest.push(worst);
    }
    assert!(slowest[0] >= Duration::from_millis(SLOW_MS), "normal waits for a slow GET: {slowest:?}");
    assert!(slowest[1] < Duration::from_millis(SLOW_MS / 2), "fec-fixed cuts the tail: {slowest:?}");
    let (records, _) = controller.take_records();
    let fec: Vec<_> = records.iter().filter(|r| r.tasks.len() == 6).collect();
    assert_eq!(fec.len(), objects.len(), "one row plan of six GETs per fec read");
    assert!(fec.iter().all(|r| r.tasks.iter().any(|t| t.cancelled)), "the losers are cancelled");

    // A policy that probes nodes cannot run without nodes; the running one stays.
    let refused = controller.set_policy(PolicyKind::LmlfPw2, controller.policy().settings).unwrap_err();
    assert!(refused.to_string().contains("probes storage nodes"), "{refused}");
    assert_eq!(controller.policy().policy, PolicyKind::FecFixed);

    // Releasing a layout deletes its keys.
    for (_, layout) in &objects[..4] {
        data.release(layout).await.unwrap();
    }
    assert_eq!(unit_keys(&client).await, 8 * 6, "released stripes' keys deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_and_a_node_clusters_metadata_are_refused() {
    let (endpoint, _backend_dir) = backend_server().await;
    let meta_dir = tempfile::tempdir().unwrap();
    let meta: Arc<dyn MetaStore> = Arc::new(meta::RedbStore::open(meta_dir.path()).unwrap());
    let error = ErasureData::new(backend_config(&endpoint, "no-such-bucket"), Arc::clone(&meta)).await.unwrap_err();
    assert!(error.to_string().contains("no-such-bucket"), "{error}");
    assert!(meta.list_nodes().await.unwrap().is_empty(), "nothing registered");

    let client = client_with(&endpoint, ACCESS_KEY, SECRET_KEY);
    client.create_bucket().bucket("units").send().await.unwrap();
    gateway::data::cluster::membership::register_node(
        meta.as_ref(),
        meta::NodeId(0),
        "127.0.0.1:7000",
        "r",
        1 << 40,
        0,
    )
    .await
    .unwrap();
    let error = ErasureData::new(backend_config(&endpoint, "units"), Arc::clone(&meta)).await.unwrap_err();
    assert!(error.to_string().contains("metadata store of its own"), "{error}");

    let mut packing = backend_config(&endpoint, "units");
    packing.packed.max_object_bytes = 4096;
    let error = ErasureData::new(packing, meta).await.unwrap_err();
    assert!(error.to_string().contains("packed.max_object_bytes = 0"), "{error}");
}

/// The configuration docs/backend.md shows is one a gateway accepts.
#[test]
fn the_documented_backend_config_parses_and_validates() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/backend.md")).unwrap();
    let start = doc.find("```toml\n").expect("a TOML block") + "```toml\n".len();
    let block = &doc[start..start + doc[start..].find("```").unwrap()];
    let config: gateway::process::GatewayConfig = toml::from_str(block).unwrap();
    config.data.validate().unwrap();
    assert_eq!(config.controller.policy, PolicyKind::FecBafec);
    assert_eq!(config.controller.settings.fec.n_max, 6);
    assert_eq!(config.data.admission.slots, Some(16));
    assert!(config.data.backend.is_some_and(|backend| !backend.path_style));
}

/// Keys no stripe records (a write cut short before its record, a release whose deletes failed)
/// are deleted by the orphan collector after two scans a grace apart with the same ETag; the keys
/// of recorded stripes and keys that name no unit are left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_no_stripe_records_are_collected_after_the_grace() {
    let (endpoint, _backend_dir) = backend_server().await;
    let client = client_with(&endpoint, ACCESS_KEY, SECRET_KEY);
    client.create_bucket().bucket("units").send().await.unwrap();
    let meta_dir = tempfile::tempdir().unwrap();
    let meta: Arc<dyn MetaStore> = Arc::new(meta::RedbStore::open(meta_dir.path()).unwrap());
    let config = backend_config(&endpoint, "units");
    let data = ErasureData::new(config.clone(), Arc::clone(&meta)).await.unwrap();
    let kept = data.write(pattern(100_000, 7)).await.unwrap().layout;
    let put = async |key: &str| {
        client.put_object().bucket("units").key(key).body(Bytes::from_static(b"stray").into()).send().await.unwrap();
    };
    put("lowtail/00000000000fffff/0").await;
    put("lowtail/00000000000fffff/4").await;
    put("lowtail/not-a-unit").await;
    assert_eq!(unit_keys(&client).await, 6 + 3);

    let collector =
        gateway::data::services::orphans::OrphanCollector::new(Arc::clone(data.io()), config.orphans.clone());
    let now = Instant::now();
    let first = collector.scan_at(now).await.unwrap();
    assert_eq!((first.orphans, first.deleted), (2, 0), "judged, within the grace: {first:?}");
    let later = now + Duration::from_millis(config.orphans.grace_ms);
    let second = collector.scan_at(later).await.unwrap();
    assert_eq!((second.orphans, second.deleted), (2, 2), "{second:?}");
    assert_eq!(unit_keys(&client).await, 6 + 1, "the stray unit keys gone, the other key kept");
    assert!(data.read(&kept, 0..100_000).await.unwrap() == pattern(100_000, 7), "the recorded stripe untouched");
}
