//! `lowtail admin policy` against a running `lowtail up` whose up.toml sets the controller: show the
//! policy, switch it, refuse a bad
//! name without changing anything, and see the switch in the records the gateway keeps (LMLF-PW2
//! sends 1 + 6 probes per read on RS(6,3)); records are exported only with the cluster secret.
//! `lowtail admin bucket` sets a bucket's write ack rule (the objects then written at k read back)
//! and latency class, and `lowtail admin class` an access key's.

mod common;

use aws_sdk_s3::primitives::ByteStream;
use common::{client, get, interrupt, lowtail_admin_of, pseudo_random, start_up_with, wait_for_manifest};
use std::path::Path;
use std::process::Command;

fn lowtail_admin(dir: &Path, args: &[&str]) -> (bool, String) {
    lowtail_admin_of(dir, "policy", args)
}

fn lowtail_admin_bucket(dir: &Path, args: &[&str]) -> (bool, String) {
    lowtail_admin_of(dir, "bucket", args)
}

/// `POST /admin/records/take` with `secret`: (HTTP status, the records).
fn take_records(gateway_http: &str, secret: &str) -> (u16, Vec<model::Record>) {
    let mut response = ureq::post(&format!("{gateway_http}/admin/records/take"))
        .config()
        .http_status_as_error(false)
        .build()
        .header(gateway::admin_secret::SECRET_HEADER, secret)
        .send_empty()
        .unwrap();
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().unwrap();
    let records = if status == 200 {
        body.lines().map(|line| serde_json::from_str(line).expect("a record per line")).collect()
    } else {
        Vec::new()
    };
    (status, records)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_policy_switches_the_gateway_and_records_show_it() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster");
    // The policy's settings come from up.toml's [controller] section.
    let up_toml = temp.path().join("up.toml");
    std::fs::write(
        &up_toml,
        "[controller]\npolicy = \"normal\"\nmax_records = 100000\nsettings = { normal_timeout_ms = 700 }\n\n\
         [data.packed]\nseal_after_ms = 600000\n",
    )
    .unwrap();
    let mut up = start_up_with(&dir, &["--config", up_toml.to_str().unwrap()]);
    let manifest = wait_for_manifest(&dir, &mut up);
    let gateway_http = launcher::admin::gateway_http_from_dir(&dir).unwrap();
    let secret = launcher::admin::cluster_secret_from_dir(&dir).unwrap();
    let s3 = client(&manifest);
    s3.create_bucket().bucket("demo").send().await.unwrap();
    // The bucket's write ack rule: set, shown, a bad rule and a missing bucket refused unchanged.
    let (ok, text) = lowtail_admin_bucket(&dir, &["ack", "demo", "k"]);
    assert!(ok && text.contains("demo: write ack now k"), "{text}");
    let (ok, text) = lowtail_admin_bucket(&dir, &["ack", "demo", "k+2"]);
    assert!(!ok && text.contains("unknown write ack rule"), "{text}");
    let (ok, text) = lowtail_admin_bucket(&dir, &["ack", "no-such-bucket", "all"]);
    assert!(!ok && text.to_lowercase().contains("no-such-bucket"), "{text}");
    let (ok, text) = lowtail_admin_bucket(&dir, &["show"]);
    assert!(ok && text.contains("demo  write ack k  class none"), "{text}");
    // Latency classes: the one class of a default gateway set and cleared; others refused unchanged.
    let (ok, text) = lowtail_admin_bucket(&dir, &["class", "demo", "1"]);
    assert!(ok && text.contains("demo: class now 1"), "{text}");
    let (ok, text) = lowtail_admin_bucket(&dir, &["class", "demo", "2"]);
    assert!(!ok && text.contains("class 2 is not run here: classes are 1 to 1"), "{text}");
    let (ok, text) = lowtail_admin_bucket(&dir, &["class", "demo", "gold"]);
    assert!(!ok && text.contains("a class is a number from 1"), "{text}");
    let (ok, text) = lowtail_admin_bucket(&dir, &["show"]);
    assert!(ok && text.contains("demo  write ack k  class 1"), "{text}");
    assert!(lowtail_admin_bucket(&dir, &["class", "demo", "none"]).0);
    let (ok, text) = lowtail_admin_of(&dir, "class", &["key", "batch-key", "1"]);
    assert!(ok && text.contains("batch-key: class now 1"), "{text}");
    let (ok, text) = lowtail_admin_of(&dir, "class", &["show"]);
    assert!(
        ok && text.contains("1 classes, fcfs scheduling") && text.contains("access key batch-key: class 1 (table)"),
        "{text}"
    );
    // Striped (above the packing limit), so reads are planned at once without waiting for a seal.
    let objects: Vec<(String, Vec<u8>)> =
        (0..4).map(|i| (format!("object-{i}"), pseudo_random(200_000 + i * 1000, i as u32))).collect();
    for (key, bytes) in &objects {
        s3.put_object().bucket("demo").key(key).body(ByteStream::from(bytes.clone())).send().await.unwrap();
    }

    let (ok, text) = lowtail_admin(&dir, &["show"]);
    assert!(ok && text.contains(": normal ") && text.contains("\"normal_timeout_ms\":700"), "{text}");
    for (key, bytes) in &objects {
        assert!(get(&s3, key).await == *bytes);
    }
    let (status, records) = take_records(&gateway_http, &secret);
    assert_eq!(status, 200);
    assert!(!records.is_empty() && records.iter().all(|r| r.request.probes == 0), "normal does not probe");

    let (ok, text) = lowtail_admin(&dir, &["set", "lmlf_pw2"]);
    assert!(!ok && text.contains("unknown policy"), "{text}");
    let (ok, text) = lowtail_admin(&dir, &["set", "lmlf-pw2", "--settings", r#"{"normal_timeout_ms": 0}"#]);
    assert!(!ok && text.contains("must be positive"), "{text}");
    // Several gateways, one of which does not answer: none is switched, and the error says which.
    let output = Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["admin", "policy", "set", "lmlf-pw2", "--gateway", &gateway_http, "--gateway", "http://127.0.0.1:9"])
        .env("LOWTAIL_CLUSTER_SECRET", &secret)
        .output()
        .expect("lowtail runs");
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{text}");
    assert!(text.contains("http://127.0.0.1:9 does not answer; no gateway was switched"), "{text}");
    let (ok, text) = lowtail_admin(&dir, &["show"]);
    assert!(ok && text.contains(": normal "), "refused changes change nothing: {text}");

    let (ok, text) = lowtail_admin(&dir, &["set", "lmlf-pw2"]);
    assert!(ok && text.contains("now lmlf-pw2"), "{text}");
    assert_eq!(common::admin_status(&dir)["policy"]["policy"], "lmlf-pw2", "admin status shows the policy");
    for (key, bytes) in &objects {
        assert!(get(&s3, key).await == *bytes, "{key} under lmlf-pw2");
    }
    let (status, _) = take_records(&gateway_http, "not-the-secret");
    assert_eq!(status, 403);
    let (status, records) = take_records(&gateway_http, &secret);
    assert_eq!(status, 200);
    assert!(!records.is_empty());
    for record in &records {
        assert_eq!(record.request.probes, 7, "LMLF-PW2 on RS(6,3): the original node and a set of six");
        assert!(record.request.probe_wait_ns > 0 && record.request.completion_ns >= record.request.decision_end_ns);
    }
    // The controller's counters are on /metrics too.
    let metrics_url = format!("{gateway_http}/metrics");
    let planned = common::metric(&metrics_url, "lowtail_controller_reads_planned_total");
    let probes = common::metric(&metrics_url, "lowtail_controller_request_probes_total");
    assert!(planned >= records.len() as f64, "{planned} planned reads on /metrics, {} records", records.len());
    assert!(probes >= 7.0 * records.len() as f64, "{probes} request probes on /metrics");

    // Small objects wait in an open packed stripe (sealed after 10 minutes here), read from their
    // replicas without a plan (recorded, with no tasks); `POST /admin/packed/seal` seals them now,
    // and then reads are planned.
    let small: Vec<(String, Vec<u8>)> =
        (0..3).map(|i| (format!("small-{i}"), pseudo_random(1000 + i * 10, 50 + i as u32))).collect();
    for (key, bytes) in &small {
        s3.put_object().bucket("demo").key(key).body(ByteStream::from(bytes.clone())).send().await.unwrap();
        assert!(get(&s3, key).await == *bytes, "{key} from its replicas");
    }
    let (_, records) = take_records(&gateway_http, &secret);
    assert_eq!(records.len(), small.len(), "every read is recorded");
    for record in &records {
        assert!(record.tasks.is_empty() && record.request.probes == 0, "reads of an open stripe are not planned");
    }
    let admin =
        |secret: &str| launcher::gateway_admin::GatewayAdmin { base: gateway_http.clone(), secret: secret.into() };
    let refused = admin("not-the-secret").seal_open_stripes().unwrap_err();
    assert!(format!("{refused:#}").contains("403"), "{refused:#}");
    admin(&secret).seal_open_stripes().unwrap();
    for (key, bytes) in &small {
        assert!(get(&s3, key).await == *bytes, "{key} once sealed");
    }
    let (_, records) = take_records(&gateway_http, &secret);
    assert_eq!(records.len(), small.len(), "every read of a sealed stripe is planned and recorded");
    interrupt(up);
}
