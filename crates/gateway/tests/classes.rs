//! Latency classes end to end (docs/classes.md): a whole gateway (`process::start`, with its admin
//! endpoint) over real storage nodes on 127.0.0.1, two classes, and `aws-sdk-s3` clients of three
//! access keys. Classes are observed where they matter: in each node's per-class task counters
//! (`Stats`), which only move when a task ran in that class.

mod data_support;
mod s3_common;

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use bytes::Bytes;
use data_support::{SECRET, TestCluster};
use gateway::admin_secret::SECRET_HEADER;
use gateway::classes::{ClassSpec, ClassesConfig, Scheduling};
use gateway::process::{Credential, GatewayConfig, RunningGateway};
use s3_common::{client_with, failure, pattern, raw_request};

type Client = aws_sdk_s3::Client;

/// A key with no entitlement of its own: the default class, 1.
const GOLD: (&str, &str) = ("gold-key", "gold-secret-key");
/// A key whose credential entry entitles it to class 2.
const SILVER: (&str, &str) = ("silver-key", "silver-secret-key");
/// A key entitled to class 2 by the metadata store's table, set through the admin route.
const DEMOTED: (&str, &str) = ("demoted-key", "demoted-secret-key");
/// Striped, not packed (a packed object's seal may run in the background class later).
const OBJECT_BYTES: usize = 300 << 10;

struct Setup {
    cluster: TestCluster,
    gateway: RunningGateway,
    admin: String,
}

impl Setup {
    async fn start() -> Setup {
        Setup::start_with(3, "rs-2-1", |_| {}).await
    }

    /// A gateway of `code` over `nodes` nodes in as many racks, its config changed by `configure`.
    async fn start_with(nodes: usize, code: &str, configure: impl FnOnce(&mut GatewayConfig)) -> Setup {
        let cluster = TestCluster::start(nodes, nodes).await;
        let class = |name: &str, weight| ClassSpec { name: name.into(), weight, share: None };
        let credential = |(access_key, secret_key): (&str, &str), class| Credential {
            access_key: access_key.into(),
            secret_key: secret_key.into(),
            class,
        };
        let config = GatewayConfig {
            s3_listen: "127.0.0.1:0".parse().unwrap(),
            http_listen: Some("127.0.0.1:0".parse().unwrap()),
            credentials: vec![credential(GOLD, None), credential(SILVER, Some(2)), credential(DEMOTED, None)],
            data: cluster.config(code),
            classes: ClassesConfig {
                classes: vec![class("gold", 1.0), class("silver", 0.4)],
                default_class: 1,
                scheduling: Scheduling::Weighted,
            },
            ..Default::default()
        };
        let mut config = config;
        configure(&mut config);
        let gateway = gateway::process::start(config, Arc::clone(&cluster.meta)).await.unwrap();
        let admin = format!("http://{}", gateway.http_addr().unwrap());
        Setup { cluster, gateway, admin }
    }

    fn client(&self, (access_key, secret_key): (&str, &str)) -> Client {
        client_with(&format!("http://{}", self.gateway.s3_addr()), access_key, secret_key)
    }

    /// Tasks completed per class (0-based) on every node, summed.
    async fn tasks_by_class(&self) -> [u64; 2] {
        let mut tasks = [0; 2];
        for node in 0..self.cluster.nodes.len() {
            let stats = self.cluster.client(node).await.stats().await.unwrap();
            for class in stats.classes.iter().filter(|class| class.class < 2) {
                tasks[class.class as usize] += class.tasks_completed;
            }
        }
        tasks
    }

    /// An admin `PUT` of `body` to `path`, with the secret when `secret`; status and body.
    async fn put(&self, path: &str, body: &str, secret: bool) -> (u16, String) {
        let headers = if secret { vec![(SECRET_HEADER.to_string(), SECRET.to_string())] } else { Vec::new() };
        let url = format!("{}{path}", self.admin);
        let (status, _, body) = raw_request("PUT", &url, &headers, Bytes::from(body.to_string())).await;
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// `GET /admin/classes` as JSON.
    async fn classes(&self) -> serde_json::Value {
        let (status, _, body) = raw_request("GET", &format!("{}/admin/classes", self.admin), &[], Bytes::new()).await;
        assert_eq!(status, 200);
        serde_json::from_slice(&body).unwrap()
    }
}

async fn put(client: &Client, bucket: &str, key: &str) {
    let body = ByteStream::from(pattern(OBJECT_BYTES, 7));
    client.put_object().bucket(bucket).key(key).body(body).send().await.expect("put");
}

/// A GET sending `x-lowtail-class: header` when given; the body's length, or status and code.
async fn get(client: &Client, bucket: &str, key: &str, header: Option<&'static str>) -> Result<usize, (u16, String)> {
    let request = client.get_object().bucket(bucket).key(key).customize().mutate_request(move |request| {
        if let Some(header) = header {
            request.headers_mut().insert("x-lowtail-class", header);
        }
    });
    match request.send().await {
        Ok(output) => Ok(output.body.collect().await.expect("body").into_bytes().len()),
        Err(error) => Err(failure(&error)),
    }
}

/// A batch read of `keys` from `bucket` signed with `key`, sending `x-lowtail-class: header` when
/// given; the answer's status and body.
async fn batch_get(
    setup: &Setup,
    key: (&str, &str),
    bucket: &str,
    keys: &[&str],
    header: Option<&str>,
) -> (u16, Bytes) {
    use aws_sigv4::http_request::{PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings, sign};
    let objects: Vec<serde_json::Value> = keys.iter().map(|key| serde_json::json!({ "key": key })).collect();
    let body = serde_json::json!({ "objects": objects }).to_string();
    let uri = format!("http://{}/{bucket}?lowtail-batch-get", setup.gateway.s3_addr());
    let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
    if let Some(header) = header {
        headers.push(("x-lowtail-class".to_string(), header.to_string()));
    }
    let identity = aws_credential_types::Credentials::new(key.0, key.1, None, None, "test").into();
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("s3")
        .time(std::time::SystemTime::now())
        .settings(settings)
        .build()
        .unwrap()
        .into();
    let pairs = headers.iter().map(|(name, value)| (name.as_str(), value.as_str()));
    let signable = SignableRequest::new("POST", &uri, pairs, SignableBody::Bytes(body.as_bytes())).unwrap();
    let (instructions, _) = sign(signable, &params).unwrap().into_parts();
    let (signed, _) = instructions.into_parts();
    headers.extend(signed.into_iter().map(|header| (header.name().to_string(), header.value().to_string())));
    let (status, _, answer) = raw_request("POST", &uri, &headers, Bytes::from(body)).await;
    (status, answer)
}

/// Waits until every node runs `expected` (membership tells them at its first rounds).
async fn wait_for_scheduling(setup: &Setup, expected: &node::ClassScheduling) {
    for _ in 0..100 {
        let mut told = 0;
        for node in 0..setup.cluster.nodes.len() {
            let stats = setup.cluster.client(node).await.stats().await.unwrap();
            let scheduling = stats.class_scheduling.map(node::ClassScheduling::try_from);
            told += usize::from(matches!(scheduling, Some(Ok(ref s)) if s == expected));
        }
        if told == setup.cluster.nodes.len() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the nodes were not told {expected:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_run_in_their_class_on_the_nodes_and_refusals_touch_nothing() {
    let setup = Setup::start().await;
    wait_for_scheduling(&setup, &node::ClassScheduling::WeightedSharing { weights: vec![1.0, 0.4] }).await;
    let (gold, silver, demoted) = (setup.client(GOLD), setup.client(SILVER), setup.client(DEMOTED));
    for bucket in ["open", "slow"] {
        gold.create_bucket().bucket(bucket).send().await.expect("create");
    }
    put(&gold, "open", "a").await;
    put(&gold, "slow", "b").await;

    // A class-1 key reads in class 1; asking for class 2 lowers it.
    let before = setup.tasks_by_class().await;
    assert_eq!(get(&gold, "open", "a", None).await, Ok(OBJECT_BYTES));
    let after = setup.tasks_by_class().await;
    assert!(after[0] > before[0], "a class-1 read ran in class 1: {before:?} → {after:?}");
    let before = setup.tasks_by_class().await;
    assert_eq!(get(&gold, "open", "a", Some("2")).await, Ok(OBJECT_BYTES));
    let after = setup.tasks_by_class().await;
    assert_eq!(after[0], before[0], "x-lowtail-class: 2 moved the read out of class 1");
    assert!(after[1] > before[1], "and into class 2: {before:?} → {after:?}");

    // Refusals read nothing: 403 above the entitlement (config's or table's), 400 for no class.
    assert_eq!(setup.put("/admin/access-keys/demoted-key/class", "2", true).await.0, 200);
    let before = setup.tasks_by_class().await;
    let denied = get(&silver, "open", "a", Some("1")).await.unwrap_err();
    assert_eq!(denied, (403, "AccessDenied".into()));
    assert_eq!(get(&demoted, "open", "a", Some("1")).await.unwrap_err(), (403, "AccessDenied".into()));
    assert_eq!(get(&gold, "open", "a", Some("9")).await.unwrap_err(), (400, "InvalidArgument".into()));
    assert_eq!(get(&gold, "open", "a", Some("gold")).await.unwrap_err(), (400, "InvalidArgument".into()));
    let refused_put = silver
        .put_object()
        .bucket("open")
        .key("refused")
        .body(ByteStream::from(pattern(OBJECT_BYTES, 1)))
        .customize()
        .mutate_request(|request| {
            request.headers_mut().insert("x-lowtail-class", "1");
        })
        .send()
        .await
        .unwrap_err();
    assert_eq!(failure(&refused_put), (403, "AccessDenied".into()));
    assert_eq!(setup.tasks_by_class().await, before, "no refused request created a node task");
    assert!(gold.head_object().bucket("open").key("refused").send().await.is_err(), "nothing was written");
    let silver_read = silver.get_object().bucket("open").key("a").send().await.expect("silver reads in its class");
    assert_eq!(silver_read.body.collect().await.unwrap().into_bytes().len(), OBJECT_BYTES);

    // A bucket of class 2 makes a class-1 key's reads class 2.
    assert_eq!(setup.put("/admin/buckets/slow/class", "2", true).await.0, 200);
    let before = setup.tasks_by_class().await;
    assert_eq!(get(&gold, "slow", "b", None).await, Ok(OBJECT_BYTES));
    assert_eq!(get(&gold, "slow", "b", Some("1")).await, Ok(OBJECT_BYTES), "its entitlement allows 1; the bucket wins");
    let after = setup.tasks_by_class().await;
    assert_eq!(after[0], before[0], "no class-1 task for the class-2 bucket: {before:?} → {after:?}");
    assert!(after[1] >= before[1] + 2, "its reads ran in class 2: {before:?} → {after:?}");

    // The batch read too: refused above the entitlement, run in the bucket's class.
    let before = setup.tasks_by_class().await;
    let (status, answer) = batch_get(&setup, SILVER, "open", &["a"], Some("1")).await;
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&answer));
    assert!(String::from_utf8_lossy(&answer).contains("AccessDenied"));
    assert_eq!(setup.tasks_by_class().await, before, "a refused batch reads nothing");
    let (status, answer) = batch_get(&setup, GOLD, "slow", &["b"], None).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    assert!(answer.len() > OBJECT_BYTES, "the object's bytes are in the answer");
    let after = setup.tasks_by_class().await;
    assert_eq!(after[0], before[0], "the class-2 bucket's batch ran no class-1 task: {before:?} → {after:?}");
    assert!(after[1] > before[1], "its reads ran in class 2: {before:?} → {after:?}");

    // A GET detoured for an unusable Range keeps its key's entitlement.
    let detoured = silver
        .get_object()
        .bucket("open")
        .key("a")
        .customize()
        .mutate_request(|request| {
            request.headers_mut().insert("range", "bytes=abc");
            request.headers_mut().insert("x-lowtail-class", "1");
        })
        .send()
        .await
        .unwrap_err();
    assert_eq!(failure(&detoured), (403, "AccessDenied".into()));

    // The gateway counts per class and reports the entitlements.
    let classes = setup.classes().await;
    let requests = |class: usize| classes["classes"][class]["requests"].as_u64().unwrap();
    assert!(requests(0) >= 2 && requests(1) >= 3, "{classes}");
    assert_eq!((classes["refused_denied"].as_u64(), classes["refused_invalid"].as_u64()), (Some(5), Some(2)));
    let keys = classes["access_keys"].as_array().unwrap();
    assert!(keys.iter().any(|k| k["access_key"] == "demoted-key" && k["class"] == 2 && k["source"] == "table"));
    assert!(keys.iter().any(|k| k["access_key"] == "silver-key" && k["class"] == 2 && k["source"] == "config"));
    assert_eq!(classes["nodes_scheduled"].as_array().unwrap().len(), 3, "{classes}");
    assert_eq!(classes["solved_shares"], serde_json::json!({}), "no policy solves shares here: {classes}");
    let status = setup.gateway.status().await.unwrap();
    assert_eq!(status.classes.classes[1].requests, requests(1));
    setup.gateway.shutdown().await;
    setup.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_routes_need_the_secret_and_change_nothing_on_bad_input() {
    let setup = Setup::start().await;
    setup.client(GOLD).create_bucket().bucket("photos").send().await.expect("create");
    let meta = &setup.cluster.meta;
    for (path, body, secret, status) in [
        ("/admin/buckets/photos/class", "2", false, 403),
        ("/admin/buckets/photos/class", "3", true, 400),
        ("/admin/buckets/photos/class", "0", true, 400),
        ("/admin/buckets/photos/class", "fast", true, 400),
        ("/admin/buckets/missing-bucket/class", "2", true, 404),
        ("/admin/access-keys/gold-key/class", "1", false, 403),
        ("/admin/access-keys/gold-key/class", "9", true, 400),
        ("/admin/access-keys/gold-key/class", "", true, 400),
        ("/admin/access-keys/bad%20key/class", "2", true, 400),
    ] {
        let (got, answer) = setup.put(path, body, secret).await;
        assert_eq!(got, status, "{path} {body:?}: {answer}");
    }
    assert_eq!(meta.get_bucket("photos").await.unwrap().class, None, "refused changes change nothing");
    assert!(meta.list_access_key_classes().await.unwrap().is_empty());

    let (status, answer) = setup.put("/admin/buckets/photos/class", "2", true).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains("\"class\":2"), "the answer is the bucket as stored: {answer}");
    assert_eq!(meta.get_bucket("photos").await.unwrap().class, Some(2));
    assert_eq!(setup.put("/admin/buckets/photos/class", "none", true).await.0, 200);
    assert_eq!(meta.get_bucket("photos").await.unwrap().class, None);
    assert_eq!(setup.put("/admin/access-keys/gold-key/class", "2", true).await.0, 200);
    assert_eq!(meta.get_access_key_class("gold-key").await.unwrap(), Some(2));
    assert_eq!(setup.put("/admin/access-keys/gold-key/class", "none", true).await.0, 200);
    assert_eq!(meta.get_access_key_class("gold-key").await.unwrap(), None);
    setup.gateway.shutdown().await;
    setup.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_is_told_the_scheduling_again() {
    let mut setup = Setup::start().await;
    let weighted = node::ClassScheduling::WeightedSharing { weights: vec![1.0, 0.4] };
    wait_for_scheduling(&setup, &weighted).await;
    // Back on its data directory with its own (default) scheduling, at a new address.
    setup.cluster.stop(0).await;
    setup.cluster.restart(0).await;
    let stats = setup.cluster.client(0).await.stats().await.unwrap();
    let fresh = stats.class_scheduling.map(node::ClassScheduling::try_from);
    assert!(matches!(fresh, Some(Ok(node::ClassScheduling::Fcfs))), "{fresh:?}");
    wait_for_scheduling(&setup, &weighted).await;
    setup.gateway.shutdown().await;
    setup.cluster.shutdown().await;
}

/// The `jlwo` policy end to end: GETs in both classes, a refresh solves JLWO, the gateway publishes
/// the shares it solved, and membership tells each node its rack's in the configured discipline
/// (`weighted`: as weights); `GET /admin/classes` lists them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jlwo_gateway_tells_each_racks_nodes_the_shares_it_solved() {
    let setup = Setup::start_with(9, "rs-6-3", |config| {
        config.controller.policy = policy::PolicyKind::Jlwo;
        let jlwo = &mut config.controller.settings.jlwo;
        jlwo.refresh_period_ns = 300_000_000;
        jlwo.unit_service = policy::classes::scheduling::ServiceMoments::deterministic(0.000_1);
        config.data.membership.probe_interval_ms = 100;
    })
    .await;
    let (gold, silver) = (setup.client(GOLD), setup.client(SILVER));
    gold.create_bucket().bucket("media").send().await.expect("create");
    let body = ByteStream::from(pattern(2 << 20, 9));
    gold.put_object().bucket("media").key("film").body(body).send().await.expect("put");
    for _ in 0..10 {
        assert_eq!(get(&gold, "media", "film", None).await, Ok(2 << 20));
        assert_eq!(get(&silver, "media", "film", None).await, Ok(2 << 20));
    }
    // Shares are solved and published, and every node comes to run its rack's (a solve of reads
    // counted before the last one may still replace them once: compared with what is published
    // each time).
    for attempt in 0..100 {
        let solved = setup.classes().await["solved_shares"].clone();
        let racks = solved.as_object().cloned().unwrap_or_default();
        let mut matching = 0;
        for node in 0..setup.cluster.nodes.len() {
            let rack = setup.cluster.node_info(node).await.rack;
            let weights =
                racks.get(&rack).map_or(vec![1.0, 0.4], |shares| serde_json::from_value(shares.clone()).unwrap());
            let stats = setup.cluster.client(node).await.stats().await.unwrap();
            let running = stats.class_scheduling.map(node::ClassScheduling::try_from);
            let expected = node::ClassScheduling::WeightedSharing { weights };
            matching += usize::from(matches!(running, Some(Ok(ref s)) if *s == expected));
        }
        if !racks.is_empty() && matching == setup.cluster.nodes.len() {
            break;
        }
        assert!(attempt < 99, "the nodes were not told their racks' solved shares {solved}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Switched to a policy that solves nothing: the gateway withdraws its shares, and every node
    // runs the configured weights again.
    let (status, answer) = setup.put("/admin/policy", r#"{"policy": "normal"}"#, true).await;
    assert_eq!(status, 200, "{answer}");
    wait_for_scheduling(&setup, &node::ClassScheduling::WeightedSharing { weights: vec![1.0, 0.4] }).await;
    assert_eq!(setup.classes().await["solved_shares"], serde_json::json!({}));
    setup.gateway.shutdown().await;
    setup.cluster.shutdown().await;
}
