//! Streamed bodies over the erasure-coded data path (nine real storage nodes on 127.0.0.1, RS(6,3),
//! stripes of 6 MiB): a PutObject body is written stripe by stripe while it arrives, and a body that
//! stops halfway, or is not the one its Content-MD5 declares, leaves no stripe and no unit behind; a
//! GetObject body over 8 MiB is sent as it is read, whole or ranged. Clients: `aws-sdk-s3`, and a raw TCP connection for a body cut off mid-upload.

mod data_support;
mod s3_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use base64::Engine as _;
use data_support::TestCluster;
use gateway::data::{DataConfig, ErasureData, ObjectData};
use gateway::s3::{S3Options, build_service, serve};
use md5::Digest;
use s3_common::{ACCESS_KEY, SECRET_KEY, client_with, failure, md5_hex, pattern};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Full stripes of RS(6,3) at the default 1 MiB unit.
const STRIPE_BYTES: usize = 6 << 20;

struct Gateway {
    cluster: TestCluster,
    endpoint: String,
    shutdown: tokio::sync::oneshot::Sender<()>,
}

async fn start() -> Gateway {
    start_configured(|_| {}).await
}

/// [`start`], with `configure` applied to the data path's configuration.
async fn start_configured(configure: impl FnOnce(&mut DataConfig)) -> Gateway {
    let cluster = TestCluster::start(9, 9).await;
    let mut config: DataConfig = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    configure(&mut config);
    let data: Arc<dyn ObjectData> = Arc::new(ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap());
    let (endpoint, shutdown) = serve_s3(&cluster, data).await;
    Gateway { cluster, endpoint, shutdown }
}

/// An S3 server over `data` and the cluster's metadata; returns its endpoint and its stop.
async fn serve_s3(cluster: &TestCluster, data: Arc<dyn ObjectData>) -> (String, tokio::sync::oneshot::Sender<()>) {
    serve_s3_with(cluster, data, S3Options::default()).await
}

/// [`serve_s3`] with `options`.
async fn serve_s3_with(
    cluster: &TestCluster,
    data: Arc<dyn ObjectData>,
    options: S3Options,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let credentials = vec![(ACCESS_KEY.into(), SECRET_KEY.into())];
    let service = build_service(Arc::clone(&cluster.meta), data, credentials, options).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(listener, service, async move {
        let _ = stop.await;
    }));
    (endpoint, shutdown)
}

impl Gateway {
    async fn stripes(&self) -> usize {
        self.cluster.meta.list_stripes(None, 100).await.unwrap().len()
    }

    /// Waits (up to 20 s) until `stripes_recorded(count)` holds.
    async fn wait_for_stripes(&self, what: &str, holds: impl Fn(usize) -> bool) {
        let started = Instant::now();
        // Polls every 20 ms: bounded by the 20 s limit.
        while !holds(self.stripes().await) {
            assert!(started.elapsed() < Duration::from_secs(20), "{what}: {} stripes recorded", self.stripes().await);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn assert_no_units(&self) {
        for i in 0..9 {
            let units = self.cluster.client(i).await.list_units(None, 0).await.unwrap().units;
            assert!(units.is_empty(), "node {i} keeps no unit of a failed upload: {units:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_stream_into_stripes_and_failed_ones_leave_nothing() {
    let gateway = start().await;
    let client = client_with(&gateway.endpoint, ACCESS_KEY, SECRET_KEY);
    client.create_bucket().bucket("streams").send().await.unwrap();

    // A body of three and a half stripes round-trips, with the MD5 ETag of the bytes.
    let body = pattern(STRIPE_BYTES * 7 / 2, 1);
    let put =
        client.put_object().bucket("streams").key("whole").body(ByteStream::from(body.clone())).send().await.unwrap();
    assert_eq!(put.e_tag().unwrap().trim_matches('"'), md5_hex(&body));
    // Bodies over 8 MiB are sent as they are read, in reads along the stripes.
    let got = client.get_object().bucket("streams").key("whole").send().await.unwrap();
    assert_eq!(got.content_length(), Some(body.len() as i64));
    assert!(got.body.collect().await.unwrap().into_bytes() == body, "read back identical");
    let (first, last) = (1000, STRIPE_BYTES * 3 + 12_345);
    let got =
        client.get_object().bucket("streams").key("whole").range(format!("bytes={first}-{last}")).send().await.unwrap();
    assert_eq!(got.content_length(), Some((last - first + 1) as i64));
    assert!(got.body.collect().await.unwrap().into_bytes() == body[first..=last], "a range across reads");
    client.delete_object().bucket("streams").key("whole").send().await.unwrap();
    // The last GET's hold on the stripes may end a moment after its body was read: they go then.
    gateway.wait_for_stripes("after the delete", |stripes| stripes == 0).await;

    // A Content-MD5 that is not the body's: BadDigest, after its stripes were written, and they are
    // dropped again. The same for a part.
    let wrong_md5 = base64::engine::general_purpose::STANDARD.encode(md5::Md5::digest(b"something else"));
    let error = client
        .put_object()
        .bucket("streams")
        .key("bad")
        .content_md5(&wrong_md5)
        .body(ByteStream::from(body.clone()))
        .send()
        .await
        .unwrap_err();
    assert_eq!(failure(&error), (400, "BadDigest".into()));
    let upload = client.create_multipart_upload().bucket("streams").key("parts").send().await.unwrap();
    let error = client
        .upload_part()
        .bucket("streams")
        .key("parts")
        .upload_id(upload.upload_id().unwrap())
        .part_number(1)
        .content_md5(&wrong_md5)
        .body(ByteStream::from(body.clone()))
        .send()
        .await
        .unwrap_err();
    assert_eq!(failure(&error), (400, "BadDigest".into()));
    assert_eq!(gateway.stripes().await, 0, "no stripe of a body with the wrong digest is kept");
    gateway.assert_no_units().await;

    // A presigned PUT whose client sends 13 of its 30 MiB and then stops: the first two stripes are
    // written while the rest is awaited (the body is not held whole first) ...
    let expires = PresigningConfig::expires_in(Duration::from_secs(300)).unwrap();
    let presigned = client.put_object().bucket("streams").key("cut").presigned(expires).await.unwrap();
    let uri: hyper::Uri = presigned.uri().parse().unwrap();
    let mut connection = tokio::net::TcpStream::connect(uri.authority().unwrap().as_str()).await.unwrap();
    let declared = STRIPE_BYTES * 5;
    let head = format!(
        "PUT {} HTTP/1.1\r\nHost: {}\r\nContent-Length: {declared}\r\n\r\n",
        uri.path_and_query().unwrap(),
        uri.authority().unwrap()
    );
    connection.write_all(head.as_bytes()).await.unwrap();
    let sent = pattern(13 << 20, 2);
    connection.write_all(&sent).await.unwrap();
    gateway.wait_for_stripes("stripes written while the body arrives", |stripes| stripes >= 2).await;
    // ... and when the connection closes, they are dropped and the key never appears.
    connection.shutdown().await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), connection.read_to_end(&mut answer)).await;
    drop(connection);
    gateway.wait_for_stripes("stripes of the cut-off body dropped", |stripes| stripes == 0).await;
    gateway.assert_no_units().await;
    let error = client.head_object().bucket("streams").key("cut").send().await.unwrap_err();
    assert_eq!(failure(&error).0, 404);

    let _ = gateway.shutdown.send(());
    gateway.cluster.shutdown().await;
}

/// A PUT's answer says how redundant the object is: `full` with every unit stored, `degraded` with
/// the failures it still survives when a node died unnoticed and no spare took its unit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_says_how_many_failures_its_object_survives() {
    // Every unit awaited: under the straggler rule a unit late on this busy machine could make
    // the first answer pending (that answer is `data_write_ack`'s to test).
    let mut gateway = start_configured(|config| config.pending.straggler = Some(false)).await;
    let client = client_with(&gateway.endpoint, ACCESS_KEY, SECRET_KEY);
    client.create_bucket().bucket("redundancy").send().await.unwrap();
    let put = async |client: &aws_sdk_s3::Client, key: &str| {
        let expires = PresigningConfig::expires_in(Duration::from_secs(300)).unwrap();
        let request = client.put_object().bucket("redundancy").key(key).presigned(expires).await.unwrap();
        let headers: Vec<(String, String)> =
            request.headers().map(|(name, value)| (name.to_string(), value.to_string())).collect();
        let body = bytes::Bytes::from(pattern(3 << 20, 4));
        let (status, headers, _) = s3_common::raw_request("PUT", request.uri(), &headers, body).await;
        let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_string());
        (status, header("x-lowtail-redundancy"), header("x-lowtail-failures-tolerated"))
    };
    let full = put(&client, "whole").await;
    assert_eq!(full, (200, Some("full".into()), Some("3".into())));
    gateway.cluster.stop(4).await; // dead, still Up in the metadata: nine nodes, no spare
    let degraded = put(&client, "degraded").await;
    assert_eq!(degraded, (200, Some("degraded".into()), Some("2".into())));
    let read = client.get_object().bucket("redundancy").key("degraded").send().await.unwrap();
    assert_eq!(read.body.collect().await.unwrap().into_bytes().to_vec(), pattern(3 << 20, 4));
    let _ = gateway.shutdown.send(());
    gateway.cluster.shutdown().await;
}

/// A bucket whose write ack rule is `k` answers a PUT before its slow units land: `pending`, with
/// the failures the landed units survive; the object reads back at once and its stripe ends whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_into_a_bucket_acked_at_k_answers_pending_before_its_slow_units_land() {
    let gateway = start().await;
    let client = client_with(&gateway.endpoint, ACCESS_KEY, SECRET_KEY);
    client.create_bucket().bucket("fast").send().await.unwrap();
    gateway.cluster.meta.set_bucket_write_ack("fast", meta::WriteAck::K).await.unwrap();
    let slow = node::ServiceModel { enabled: true, overhead_us: 2_000_000, ..Default::default() };
    for i in [2, 5] {
        gateway.cluster.client(i).await.set_service_model(&slow).await.unwrap();
    }
    let expires = PresigningConfig::expires_in(Duration::from_secs(300)).unwrap();
    let request = client.put_object().bucket("fast").key("early").presigned(expires).await.unwrap();
    let headers: Vec<(String, String)> =
        request.headers().map(|(name, value)| (name.to_string(), value.to_string())).collect();
    let body = bytes::Bytes::from(pattern(3 << 20, 5));
    let started = Instant::now();
    let (status, headers, _) = s3_common::raw_request("PUT", request.uri(), &headers, body.clone()).await;
    let took = started.elapsed();
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_string());
    assert_eq!((status, header("x-lowtail-redundancy").as_deref()), (200, Some("pending")), "{headers:?}");
    let tolerated: usize = header("x-lowtail-failures-tolerated").unwrap().parse().unwrap();
    assert!(tolerated < 3, "short of the slow units: {tolerated}");
    assert!(took < Duration::from_millis(1800), "answered before the slow units landed: {took:?}");
    let read = client.get_object().bucket("fast").key("early").send().await.unwrap();
    assert!(read.body.collect().await.unwrap().into_bytes() == body, "read back at once");
    let whole = async || {
        let stripes = gateway.cluster.meta.list_stripes(None, 100).await.unwrap();
        stripes.iter().all(|stripe| stripe.missing_units.is_empty() && stripe.pending_until_ms.is_none())
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !whole().await {
        assert!(Instant::now() < deadline, "the slow units landed and the stripes ended whole");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = gateway.shutdown.send(());
    gateway.cluster.shutdown().await;
}

/// A client that declares 100 bytes, sends 10 and falls silent holds its connection only for the
/// body idle timeout: it gets RequestTimeout (400) and nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stops_arriving_times_out_and_keeps_nothing() {
    let cluster = TestCluster::start(9, 9).await;
    let data: Arc<dyn ObjectData> =
        Arc::new(ErasureData::new(cluster.config("rs-6-3"), Arc::clone(&cluster.meta)).await.unwrap());
    let options = S3Options { body_idle_timeout: Duration::from_secs(1), ..S3Options::default() };
    let (endpoint, stop) = serve_s3_with(&cluster, data, options).await;
    let client = client_with(&endpoint, ACCESS_KEY, SECRET_KEY);
    client.create_bucket().bucket("idle").send().await.unwrap();
    let expires = PresigningConfig::expires_in(Duration::from_secs(300)).unwrap();
    let presigned = client.put_object().bucket("idle").key("silent").presigned(expires).await.unwrap();
    let uri: hyper::Uri = presigned.uri().parse().unwrap();
    let mut connection = tokio::net::TcpStream::connect(uri.authority().unwrap().as_str()).await.unwrap();
    let head = format!(
        "PUT {} HTTP/1.1\r\nHost: {}\r\nContent-Length: 100\r\n\r\n0123456789",
        uri.path_and_query().unwrap(),
        uri.authority().unwrap()
    );
    let started = Instant::now();
    connection.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(10), connection.read(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer[..read.expect("answered within 10 s").unwrap()]).to_string();
    let took = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 400") && answer.contains("RequestTimeout"), "{answer}");
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(5), "answered after {took:?}");
    let error = client.head_object().bucket("idle").key("silent").send().await.unwrap_err();
    assert_eq!(failure(&error).0, 404);
    assert!(cluster.meta.list_stripes(None, 10).await.unwrap().is_empty(), "nothing of the body kept");
    let _ = stop.send(());
    cluster.shutdown().await;
}

/// Two gateways over one cluster: a GetObject body streaming from one is read to its end although
/// the object is overwritten and then deleted through the other meanwhile, because the other keeps
/// the released stripes for its release delay (the holds of the reading gateway do not see releases
/// elsewhere). With `release_delay_ms = 0` the body is cut short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_streaming_from_one_gateway_survives_an_overwrite_through_another() {
    let cluster = TestCluster::start(9, 9).await;
    let mut config: DataConfig = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    config.orphans.release_delay_ms = 60_000;
    let mut gateways = Vec::new();
    for _ in 0..2 {
        let running = ErasureData::start(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
        let (endpoint, stop) = serve_s3(&cluster, Arc::new(running.data.clone())).await;
        gateways.push((client_with(&endpoint, ACCESS_KEY, SECRET_KEY), stop, running));
    }
    let (reader, other) = (&gateways[0].0, &gateways[1].0);
    reader.create_bucket().bucket("shared").send().await.unwrap();
    // Sixteen stripes, read in pieces of two: far more than the reads ahead and the sockets hold.
    let old = pattern(16 * STRIPE_BYTES, 30);
    reader.put_object().bucket("shared").key("k").body(ByteStream::from(old.clone())).send().await.unwrap();
    // The answer has begun: the first piece is read, the rest is read as the body is taken.
    let answer = reader.get_object().bucket("shared").key("k").send().await.unwrap();
    other.put_object().bucket("shared").key("k").body(ByteStream::from(b"new".to_vec())).send().await.unwrap();
    other.delete_object().bucket("shared").key("k").send().await.unwrap();
    assert_eq!(gateways[1].2.data.delayed_releases().status().waiting, 17, "sixteen stripes and the new one's");
    let body = answer.body.collect().await.expect("the old body is whole").into_bytes();
    assert!(body == old, "the old bytes to the end");
    for (_, stop, running) in gateways {
        let _ = stop.send(());
        running.shutdown().await;
    }
    cluster.shutdown().await;
}
