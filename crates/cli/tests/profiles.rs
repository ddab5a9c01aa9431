//! Profiles on real nodes (docs/profiles.md): one `lowtail up` gateway, two buckets. Bucket
//! `tuned` names a profile composing LMLF-PW2 selection, BAFEC's n, APLS reconstruction, class 2
//! and ack at k+1, with the admission pool on; bucket `plain` keeps the cluster's default. Every
//! read's record shows each layer's decision; `tuned`'s reads of a dead node's units are rebuilt
//! by the nodes while `plain`'s are decoded at the gateway as before. Profiles that cannot run are
//! refused when set, with the reason, and change nothing. A third bucket, `batched`, names
//! `access = "ecstore"`: its GETs' whole stripes are planned by EC-Store's access planner. Within
//! `plain`, class 2 names a profile of its own.

mod common;

use std::path::Path;
use std::time::Duration;

use aws_sdk_s3::presigning::PresigningConfig;
use common::{
    admin_status, client, kill_and_wait, lowtail_admin_of as admin, poll, pseudo_random, start_up_with,
    wait_for_manifest,
};
use model::Record;

/// Every record the gateway kept since the last take.
fn take_records(dir: &Path) -> Vec<Record> {
    let gateway_http = launcher::admin::gateway_http_from_dir(dir).unwrap();
    let secret = launcher::admin::cluster_secret_from_dir(dir).unwrap();
    let mut response = ureq::post(&format!("{gateway_http}/admin/records/take"))
        .header(gateway::admin_secret::SECRET_HEADER, &secret)
        .send_empty()
        .unwrap();
    let body = response.body_mut().with_config().limit(1 << 30).read_to_string().unwrap();
    body.lines().map(|line| serde_json::from_str(line).expect("a record per line")).collect()
}

/// PUTs `body` as `bucket/key` (presigned, so the answer's headers can be read) and returns the
/// write ack rule it was acknowledged under.
async fn put_ack(s3: &aws_sdk_s3::Client, bucket: &str, key: &str, body: Vec<u8>) -> String {
    let expires = PresigningConfig::expires_in(Duration::from_secs(300)).unwrap();
    let request = s3.put_object().bucket(bucket).key(key).presigned(expires).await.unwrap();
    let uri = request.uri().to_string();
    let headers: Vec<(String, String)> =
        request.headers().map(|(name, value)| (name.to_string(), value.to_string())).collect();
    tokio::task::spawn_blocking(move || {
        let mut put = ureq::put(&uri);
        for (name, value) in &headers {
            put = put.header(name, value);
        }
        let response = put.send(&body[..]).expect("the PUT is acknowledged");
        let ack = response.headers().get(gateway::s3::WRITE_ACK_HEADER).expect("the ack rule is reported");
        ack.to_str().unwrap().to_string()
    })
    .await
    .unwrap()
}

fn records_of<'a>(records: &'a [Record], profile: &str) -> Vec<&'a Record> {
    records.iter().filter(|record| record.layers.as_ref().is_some_and(|layers| layers.profile == profile)).collect()
}

const UP_TOML: &str = r#"nodes = 9
code = "rs-6-3"

[data]
unit_bytes = 65536

[data.admission]
slots = 16

[data.membership]
probe_interval_ms = 500
down_after_probes = 2

[data.repair]
grace_ms = 600000

[controller]
policy = "normal"
max_records = 100000

[classes]
classes = [{ name = "gold", weight = 1.0, share = 0.7 }, { name = "silver", weight = 0.4, share = 0.3 }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_buckets_compose_their_request_paths_from_their_profiles() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster");
    let up_toml = temp.path().join("up.toml");
    std::fs::write(&up_toml, UP_TOML).unwrap();
    let mut up = start_up_with(&dir, &["--config", up_toml.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let manifest = wait_for_manifest(&dir, &mut up);
    let s3 = client(&manifest);
    for bucket in ["tuned", "plain", "batched"] {
        s3.create_bucket().bucket(bucket).send().await.unwrap();
    }

    // Refused when set, with the reason; nothing is stored.
    let refusals: [(&[&str], &str); 5] = [
        (&["--access", "ecstore", "--redundancy", "fixed"], "EC-Store's own late binding"),
        (&["--selection", "opt-lazy", "--redundancy", "bafec"], "cannot rank the n units"),
        (&["--selection", "jlwo"], "can only be the cluster's default profile"),
        (&["--class", "3"], "the gateway runs classes 1 to 2"),
        (&["--reconstruction", "sideways"], "unknown variant `sideways`"),
    ];
    for (flags, reason) in refusals {
        let (ok, text) = admin(&dir, "profile", &[&["set", "bad"], flags].concat());
        assert!(!ok && text.contains(reason), "{flags:?}: {text}");
    }
    let (ok, text) = admin(&dir, "bucket", &["profile", "tuned", "bad"]);
    assert!(!ok && text.contains("no profile") && text.contains("set it first"), "{text}");
    let (ok, text) = admin(&dir, "profile", &["show"]);
    assert!(ok && text.contains("default: selection normal, redundancy k, reconstruction gateway"), "{text}");
    assert!(!text.contains("bad"), "a refused profile is not stored: {text}");

    let fast = [
        "set",
        "fast",
        "--selection",
        "lmlf-pw2",
        "--redundancy",
        "bafec",
        "--reconstruction",
        "apls",
        "--class",
        "2",
        "--write-ack",
        "k+1",
    ];
    let (ok, text) = admin(&dir, "profile", &fast);
    assert!(ok, "{text}");
    let (ok, text) = admin(&dir, "bucket", &["profile", "tuned", "fast"]);
    assert!(ok && text.contains("tuned: profile now fast"), "{text}");
    let (ok, text) = admin(&dir, "profile", &["show"]);
    let described = "fast: selection lmlf-pw2, redundancy bafec, reconstruction apls, class 2, write ack k+1";
    assert!(ok && text.contains(&format!("{described}  (buckets: tuned)")), "{text}");

    let (ok, text) = admin(&dir, "profile", &["set", "grouped", "--access", "ecstore"]);
    assert!(ok, "{text}");
    let (ok, text) = admin(&dir, "bucket", &["profile", "batched", "grouped"]);
    assert!(ok, "{text}");

    // Writes: each bucket's ack rule, reported in the answer. Striped objects (above the packing
    // limit), so every read is planned.
    let objects: Vec<(String, Vec<u8>)> =
        (0..6).map(|i| (format!("object-{i}"), pseudo_random(300_000 + i * 4096, i as u32))).collect();
    for (key, bytes) in &objects {
        assert_eq!(put_ack(&s3, "tuned", key, bytes.clone()).await, "k+1", "{key}");
        assert_eq!(put_ack(&s3, "plain", key, bytes.clone()).await, "all", "{key}");
    }
    let (key, bytes) = &objects[0];
    assert_eq!(put_ack(&s3, "batched", key, bytes.clone()).await, "all");
    let _ = take_records(&dir);
    let object = s3.get_object().bucket("batched").key(key).send().await.unwrap();
    assert!(object.body.collect().await.unwrap().into_bytes() == bytes[..], "batched/{key}");
    let records = take_records(&dir);
    let batched = records_of(&records, "grouped");
    assert!(!batched.is_empty(), "{records:?}");
    for record in batched {
        assert_eq!(record.layers.as_ref().unwrap().planner, "ecstore-access", "a whole stripe planned as a block");
    }
    let read_all = async |s3: &aws_sdk_s3::Client| {
        for bucket in ["tuned", "plain"] {
            for (key, bytes) in &objects {
                let object = s3.get_object().bucket(bucket).key(key).send().await.unwrap();
                assert!(object.body.collect().await.unwrap().into_bytes() == bytes[..], "{bucket}/{key}");
            }
        }
    };
    let _ = take_records(&dir);
    read_all(&s3).await;
    let records = take_records(&dir);
    let (tuned, plain) = (records_of(&records, "fast"), records_of(&records, "default"));
    assert!(!tuned.is_empty() && !plain.is_empty(), "{records:?}");
    assert_eq!(tuned.len() + plain.len(), records.len(), "every read's record names its profile");
    for record in &tuned {
        let layers = record.layers.as_ref().unwrap();
        assert_eq!(layers.planner, "lmlf-pw2+bafec", "{layers:?}");
        assert!((6..=9).contains(&layers.units_asked) && layers.units_needed == 6, "BAFEC's n of k: {layers:?}");
        assert_eq!(layers.admission_slots, 16, "{layers:?}");
        // Done at the first k of n: a parity among them is decoded at the gateway.
        assert!(["none", "gateway"].contains(&layers.reconstruction.as_str()), "{layers:?}");
        assert!(record.tasks.iter().all(|task| !task.failed), "healthy: {record:?}");
        assert_eq!(record.request.latency_class, 1, "class 2 (the second, 0-based 1)");
        assert!(record.request.probes >= 7, "LMLF-PW2 probes the row and a sampled set: {record:?}");
    }
    for record in &plain {
        let layers = record.layers.as_ref().unwrap();
        assert_eq!((layers.planner.as_str(), layers.units_asked, layers.units_needed), ("normal", 1, 1), "{layers:?}");
        assert_eq!((record.request.latency_class, record.request.probes), (0, 0), "{record:?}");
    }

    // Within a bucket, a class names its own profile: `plain`'s class-2 requests run under
    // `silver`, its class-1 requests keep the default; a profile naming another class is refused.
    let (ok, text) = admin(&dir, "bucket", &["profile", "plain", "fast", "--class", "1"]);
    assert!(!ok && text.contains("class = 2 in a profile for class 1"), "{text}");
    let (ok, text) = admin(&dir, "profile", &["set", "silver", "--selection", "lmlf"]);
    assert!(ok, "{text}");
    let (ok, text) = admin(&dir, "bucket", &["profile", "plain", "silver", "--class", "2"]);
    assert!(ok && text.contains("plain class 2: profile now silver"), "{text}");
    let (ok, text) = admin(&dir, "profile", &["set", "silver", "--selection", "lmlf", "--class", "1"]);
    assert!(!ok && text.contains("bucket \"plain\" names it for class 2"), "a change breaking a use: {text}");
    let (ok, text) = admin(&dir, "profile", &["show"]);
    assert!(
        ok && text.contains("silver: selection lmlf, redundancy k, reconstruction gateway  (buckets: plain class 2)"),
        "{text}"
    );
    let _ = take_records(&dir);
    for class in ["1", "2"] {
        let (key, bytes) = &objects[1];
        let request = s3.get_object().bucket("plain").key(key).customize().mutate_request(move |request| {
            request.headers_mut().insert("x-lowtail-class", class);
        });
        let object = request.send().await.unwrap();
        assert!(object.body.collect().await.unwrap().into_bytes() == bytes[..], "class {class}");
    }
    let records = take_records(&dir);
    let (silver, plain) = (records_of(&records, "silver"), records_of(&records, "default"));
    assert!(!silver.is_empty() && !plain.is_empty() && silver.len() + plain.len() == records.len(), "{records:?}");
    assert!(silver.iter().all(|r| r.request.latency_class == 1 && r.layers.as_ref().unwrap().planner == "lmlf"));
    assert!(plain.iter().all(|r| r.request.latency_class == 0), "{plain:?}");
    let (ok, text) = admin(&dir, "bucket", &["profile", "plain", "none", "--class", "2"]);
    assert!(ok && text.contains("plain class 2: profile now the cluster's default"), "{text}");

    // A node dies: the tuned bucket's lost units are rebuilt by the nodes (APLS, admitted by the
    // pool), the plain bucket's decoded at the gateway, and every byte reads back.
    kill_and_wait(manifest.nodes[0].pid);
    poll("the dead node is Down", Duration::from_secs(30), || {
        let status = admin_status(&dir);
        let node = status["nodes"].as_array().unwrap().iter().find(|n| n["id"] == manifest.nodes[0].id).cloned();
        match node {
            Some(node) if node["state"] == "Down" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let _ = take_records(&dir);
    read_all(&s3).await;
    let records = take_records(&dir);
    let rebuilt = |profile: &str, how: &str| {
        records_of(&records, profile).iter().filter(|r| r.layers.as_ref().unwrap().reconstruction == how).count()
    };
    assert!(rebuilt("fast", "nodes") > 0, "tuned: lost units rebuilt by the nodes: {records:?}");
    // (Its row reads are still done at the first k of n, decoding a parity at the gateway when one
    // is among them: that is the redundancy layer's, not a lost unit's.)
    assert_eq!(rebuilt("fast", "segmented"), 0, "{records:?}");
    assert!(rebuilt("default", "gateway") > 0, "plain: decoded at the gateway: {records:?}");
    assert_eq!(rebuilt("default", "nodes"), 0, "plain keeps the default reconstruction: {records:?}");
    for record in records_of(&records, "fast") {
        assert_eq!(record.layers.as_ref().unwrap().admission_slots, 16, "{record:?}");
    }
    drop(up);
}
