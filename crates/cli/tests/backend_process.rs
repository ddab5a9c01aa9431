//! `lowtail gateway` in backend mode in front of a second S3 service (a `lowtail up` cluster): the
//! client's objects round trip through the front gateway, each stripe stored as n keys in the
//! backend's bucket; reads by `fec-fixed` (n GETs, first k); deletes remove the keys; the front's
//! metrics count the backend requests; a policy that probes nodes is refused.

#![cfg(feature = "s3-backend")]

mod common;

use std::time::{Duration, Instant};

use aws_sdk_s3::primitives::ByteStream;
use common::{client, client_for, interrupt, poll, pseudo_random, start_up, try_get, wait_for_manifest};

/// Kills the front gateway when the test ends, however it ends.
struct Front(std::process::Child);

impl Drop for Front {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn backend_keys(backend: &aws_sdk_s3::Client) -> usize {
    let listed = backend.list_objects_v2().bucket("units").prefix("front/").send().await.unwrap();
    listed.contents().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_mode_gateway_stores_each_stripe_as_keys_of_another_s3_service() {
    let temp = tempfile::tempdir().unwrap();
    let mut up = start_up(&temp.path().join("backend"));
    let manifest = wait_for_manifest(&temp.path().join("backend"), &mut up);
    let backend = client(&manifest);
    backend.create_bucket().bucket("units").send().await.unwrap();

    let config = temp.path().join("front.toml");
    let address_file = temp.path().join("front.address.json");
    std::fs::write(
        &config,
        format!(
            r#"s3_listen = "127.0.0.1:0"
http_listen = "127.0.0.1:0"
address_file = "{}"

[[credentials]]
access_key = "front-access"
secret_key = "front-secret-key"

[meta]
backend = "embedded"
dir = "{}"

[controller]
policy = "fec-fixed"

[data]
code = "rs-3-2"
cluster_secret = "no-nodes-here"
packed.max_object_bytes = 0
# Released stripes are deleted at once (by default they wait 10 minutes for reads elsewhere).
orphans.release_delay_ms = 0

[data.backend]
endpoint = "{}"
bucket = "units"
region = "{}"
access_key = "{}"
secret_key = "{}"
prefix = "front/"
"#,
            address_file.display(),
            temp.path().join("front-meta").display(),
            manifest.endpoint,
            manifest.region,
            manifest.access_key,
            manifest.secret_key,
        ),
    )
    .unwrap();
    let log = temp.path().join("front.log");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["gateway", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut front_process = Front(child);
    let (s3_addr, http_addr) = poll("front gateway address file", Duration::from_secs(30), || {
        if let Ok(Some(status)) = front_process.0.try_wait() {
            panic!("the front gateway exited ({status}): {}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        let text = std::fs::read_to_string(&address_file).map_err(|e| e.to_string())?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        Ok((value["s3_addr"].as_str().unwrap().to_string(), value["http_addr"].as_str().unwrap().to_string()))
    })
    .await;
    let front = client_for(&format!("http://{s3_addr}"), "us-east-1", "front-access", "front-secret-key");
    let deadline = Instant::now() + Duration::from_secs(30);
    while front.list_buckets().send().await.is_err() {
        assert!(Instant::now() < deadline, "the front gateway does not serve S3");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    front.create_bucket().bucket("photos").send().await.unwrap();
    let sizes = [0usize, 10, 300_000, (5 << 20) + 7];
    for (i, &len) in sizes.iter().enumerate() {
        let body = ByteStream::from(pseudo_random(len, 900 + i as u32));
        front.put_object().bucket("photos").key(format!("p{i}")).body(body).send().await.unwrap();
    }
    for (i, &len) in sizes.iter().enumerate() {
        let bytes = try_get(&front, "photos", &format!("p{i}")).await.unwrap();
        assert!(bytes == pseudo_random(len, 900 + i as u32), "p{i} reads back different");
    }
    // The empty object has no stripe; 10 B and 300 kB one each; 5 MiB + 7 a full stripe of 3 × 1 MiB
    // and a short one.
    let stripes = 1 + 1 + 2;
    assert_eq!(backend_keys(&backend).await, stripes * 5, "five keys (rs-3-2) per stripe");
    front.delete_object().bucket("photos").key("p3").send().await.unwrap();
    assert_eq!(backend_keys(&backend).await, 2 * 5, "the deleted object's keys are gone");

    let metrics =
        ureq::get(&format!("http://{http_addr}/metrics")).call().unwrap().body_mut().read_to_string().unwrap();
    let gets = metrics
        .lines()
        .filter(|line| line.starts_with("lowtail_gateway_backend_requests_total") && line.contains("op=\"get\""))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>();
    assert!(gets >= 5.0, "backend GETs counted on /metrics: {gets}");
    let refused = ureq::put(&format!("http://{http_addr}/admin/policy"))
        .config()
        .http_status_as_error(false)
        .build()
        .header(gateway::admin_secret::SECRET_HEADER, "no-nodes-here")
        .send(r#"{"policy": "lmlf-pw2"}"#)
        .unwrap();
    assert_eq!(refused.status().as_u16(), 400, "a probing policy is refused over a backend");
    drop(front_process);
    interrupt(up);
}
