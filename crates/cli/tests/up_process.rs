//! `lowtail up` as a user runs it: a real process that starts 9 node processes and the gateway, a
//! real S3 client (the AWS SDK for Rust) against it, m = 3 nodes killed with SIGKILL (reads go on,
//! writes go on while they can survive one more failure), a clean stop on SIGINT (Ctrl-C), and a restart on the same directory that still
//! serves every object.

mod common;

use aws_sdk_s3::primitives::ByteStream;
use common::{client, get, interrupt, pseudo_random, signal, start_up, wait_for_manifest};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_serves_s3_survives_m_failures_and_restarts_with_its_data() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster");
    let objects: Vec<(String, Vec<u8>)> = [0usize, 1, 5000, 3 << 20, 9 << 20, 64 << 20]
        .iter()
        .enumerate()
        .map(|(i, &len)| (format!("object-{i}"), pseudo_random(len, i as u32)))
        .collect();

    let mut up = start_up(&dir);
    let manifest = wait_for_manifest(&dir, &mut up);
    assert_eq!(manifest.nodes.len(), 9);
    let s3 = client(&manifest);
    s3.create_bucket().bucket("demo").send().await.unwrap();
    for (key, bytes) in &objects {
        s3.put_object().bucket("demo").key(key).body(ByteStream::from(bytes.clone())).send().await.unwrap();
    }
    for node in &manifest.nodes[..2] {
        signal(node.pid, libc::SIGKILL);
    }
    // Writes go on once membership has marked the killed nodes Down (three missed probes, a second
    // apart): the new stripes are written degraded, 7 of 9 units, still surviving one more failure.
    let written_degraded = pseudo_random(2 << 20, 99);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let put = s3
            .put_object()
            .bucket("demo")
            .key("written-with-2-down")
            .body(ByteStream::from(written_degraded.clone()))
            .send()
            .await;
        if put.is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "writes did not resume with 2 nodes down: {put:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(get(&s3, "written-with-2-down").await == written_degraded);
    signal(manifest.nodes[2].pid, libc::SIGKILL);
    for (key, bytes) in &objects {
        assert!(get(&s3, key).await == *bytes, "{key} differs with 3 nodes killed");
    }
    assert!(get(&s3, "written-with-2-down").await == written_degraded, "degraded write with 3 down");
    // With m nodes down a new stripe could survive no further failure: the durability rule refuses
    // the write (503, retryable) instead of acknowledging it.
    let refused = s3
        .put_object()
        .bucket("demo")
        .key("refused-with-3-down")
        .body(ByteStream::from(pseudo_random(1 << 20, 7)))
        .send()
        .await;
    let error = refused.expect_err("a write with 3 of 9 nodes down was acknowledged");
    assert_eq!(error.raw_response().map(|r| r.status().as_u16()), Some(503), "{error:?}");
    interrupt(up);

    let mut up = start_up(&dir);
    let manifest = wait_for_manifest(&dir, &mut up);
    let s3 = client(&manifest);
    for (key, bytes) in &objects {
        assert!(get(&s3, key).await == *bytes, "{key} differs after a restart");
    }
    assert!(get(&s3, "written-with-2-down").await == written_degraded, "degraded write after a restart");
    let listed = s3.list_objects_v2().bucket("demo").send().await.unwrap();
    assert_eq!(listed.key_count(), Some(objects.len() as i32 + 1));
    interrupt(up);
}

/// A writer PUTs objects back to back (packed ones of 64 KiB, striped ones of 300 KiB and 2 MiB)
/// while a node is SIGKILLed and then `lowtail up` itself (the gateway, with the nodes it
/// started left running as orphans) is SIGKILLed mid-write. A restart on the same directory stops
/// the orphans, starts every node again (the killed one too) and serves every object whose PUT was
/// acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_killing_a_node_and_the_gateway_mid_write() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster");
    let mut up = start_up(&dir);
    let manifest = wait_for_manifest(&dir, &mut up);
    let s3 = client(&manifest);
    s3.create_bucket().bucket("demo").send().await.unwrap();

    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn({
        let (s3, acknowledged, stop) = (s3.clone(), Arc::clone(&acknowledged), Arc::clone(&stop));
        async move {
            for i in 0..100_000u32 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let body = ByteStream::from(pseudo_random(mid_write_size(i), i));
                let put = s3.put_object().bucket("demo").key(format!("w-{i}")).body(body).send().await;
                if put.is_ok() {
                    acknowledged.lock().unwrap().push(i);
                } else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    signal(manifest.nodes[0].pid, libc::SIGKILL);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    signal(up.id(), libc::SIGKILL);
    up.wait().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() >= 5, "the writer got only {} PUTs through", acknowledged.len());

    let orphans: Vec<u32> = manifest.nodes[1..].iter().map(|node| node.pid).collect();
    assert!(orphans.iter().all(|&pid| launcher::processes::command_line(pid).is_some()), "orphans still run");
    // The orphans are found without the manifest (a run killed before writing it; the fault swarm
    // removed it, and every gateway restart left a second process on each node's directory).
    std::fs::remove_file(dir.join("cluster.json")).unwrap();
    let mut up = start_up(&dir);
    let restarted = wait_for_manifest(&dir, &mut up);
    for pid in orphans {
        assert!(
            launcher::processes::command_line(pid).is_none_or(|args| !args.iter().any(|a| a == b"node")),
            "node process {pid} from the killed run was not stopped"
        );
    }
    let s3 = client(&restarted);
    for i in &acknowledged {
        assert!(get(&s3, &format!("w-{i}")).await == pseudo_random(mid_write_size(*i), *i), "acknowledged w-{i} lost");
    }
    assert!(
        acknowledged.iter().any(|&i| mid_write_size(i) > 64 << 10),
        "no striped object was acknowledged: {acknowledged:?}"
    );
    interrupt(up);
}

/// Size of the mid-write test's `i`-th object: packed (64 KiB, the packing threshold), or striped
/// (300 KiB, or 2 MiB + 5).
fn mid_write_size(i: u32) -> usize {
    [64 << 10, 300 << 10, (2 << 20) + 5][i as usize % 3]
}

/// A small object deleted through S3 leaves its packed stripe referenced by nothing once sealed; the
/// gateway's unreferenced-stripe collector deletes that stripe after the grace (short here), and
/// `lowtail admin status` and the metrics say so, while every live object still reads back. A striped
/// object deleted through S3 keeps its stripe for the release delay (short here too), then the
/// gateway deletes it itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_packed_stripe_whose_objects_were_deleted_is_collected() {
    use common::{admin_status, metric_total, poll, start_up_with};
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster");
    // The shortest grace the config accepts for these timeouts: 10 x 700 ms for units, and
    // 2 x (1000 + 700) ms for stripes; the release delay must fit in it.
    let up_toml = temp.path().join("up.toml");
    std::fs::write(
        &up_toml,
        "[data]\nnode_rpc_timeout_ms = 700\nwrite_retries = 0\nwrite_deadline_ms = 1000\n\n\
         [data.orphans]\nstripe_scan_interval_ms = 300\ngrace_ms = 7000\nrelease_delay_ms = 1000\n\n\
         [data.packed]\nseal_after_ms = 200\n",
    )
    .unwrap();
    let mut up = start_up_with(&dir, &["--config", up_toml.to_str().unwrap()]);
    let manifest = wait_for_manifest(&dir, &mut up);
    let s3 = client(&manifest);
    s3.create_bucket().bucket("demo").send().await.unwrap();
    let put = |key: &'static str, bytes: Vec<u8>| {
        let s3 = s3.clone();
        async move { s3.put_object().bucket("demo").key(key).body(ByteStream::from(bytes)).send().await.unwrap() }
    };
    put("deleted", pseudo_random(3000, 1)).await;
    s3.delete_object().bucket("demo").key("deleted").send().await.unwrap();
    put("striped-deleted", pseudo_random(300_000, 4)).await;
    s3.delete_object().bucket("demo").key("striped-deleted").send().await.unwrap();
    let releases = admin_status(&dir)["releases"].clone();
    // Waiting, unless this host stalled the test past the delay (data_rw checks the delay itself).
    let seen = releases["waiting"].as_u64().unwrap() + releases["deleted"].as_u64().unwrap();
    assert_eq!(seen, 1, "the striped object's stripe is released: {releases}");
    // Past the seal, so the live objects go to stripes of their own.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let live = [("small", pseudo_random(2000, 2)), ("striped", pseudo_random(300_000, 3))];
    for (key, bytes) in &live {
        put(key, bytes.clone()).await;
    }
    let status = poll("an unreferenced stripe deleted", Duration::from_secs(60), || {
        let status = admin_status(&dir);
        match status["stripe_gc"]["stripes_deleted"].as_u64() {
            Some(deleted) if deleted >= 1 => Ok(status),
            _ => Err(status["stripe_gc"].to_string()),
        }
    })
    .await;
    assert_eq!(status["stripe_gc"]["stripes_deleted"], 1, "only the deleted object's stripe: {status}");
    let releases = &status["releases"];
    assert_eq!((&releases["waiting"], &releases["deleted"]), (&0.into(), &1.into()), "after the delay: {status}");
    let metrics = manifest.gateway.as_ref().unwrap().metrics.clone();
    assert_eq!(metric_total(&metrics, "lowtail_gateway_unreferenced_stripes_deleted_total"), 1.0);
    assert_eq!(metric_total(&metrics, "lowtail_gateway_released_stripes_deleted_total"), 1.0);
    for (key, bytes) in &live {
        assert!(get(&s3, key).await == *bytes, "{key} reads back after collection");
    }
    let text = std::process::Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["admin", "status", "--dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("stripe_gc:") && text.contains("stripes_deleted: 1"), "{text}");
    assert!(text.contains("releases:") && text.contains("delay_ms: 1000"), "{text}");
    interrupt(up);
}
