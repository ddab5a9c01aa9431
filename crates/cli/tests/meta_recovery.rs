//! The metadata store of a `lowtail up` cluster lost or damaged (issue 52), with real processes and
//! the AWS SDK: a missing store is refused at start (an empty one would make every unit garbage)
//! and `lowtail admin meta rebuild` restores every object from the nodes; a damaged one is reported
//! by `lowtail admin meta check`, and its damaged records answer 500, never 404; a truncated one is
//! a clear refusal to start, not a panic.

mod common;

use aws_sdk_s3::primitives::ByteStream;
use common::{client, interrupt, pseudo_random, start_up, wait_for_manifest};
use std::path::Path;
use std::process::{Command, Output};

fn lowtail(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowtail")).args(args).arg("--dir").arg(dir).output().expect("lowtail runs")
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// `lowtail up` on `dir`, expected to refuse to start: what it said.
fn refused_up(dir: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["up", "--nodes", "9", "--code", "rs-6-3", "--listen", "127.0.0.1:0", "--dir"])
        .arg(dir)
        .output()
        .expect("lowtail runs");
    assert!(!output.status.success(), "lowtail up started: {}", text(&output));
    text(&output)
}

/// Starts a cluster in `dir`, writes `objects` into bucket `kept`, stops it.
async fn written(dir: &Path, objects: &[(String, Vec<u8>)]) {
    let mut up = start_up(dir);
    let manifest = wait_for_manifest(dir, &mut up);
    let s3 = client(&manifest);
    s3.create_bucket().bucket("kept").send().await.unwrap();
    for (key, bytes) in objects {
        s3.put_object().bucket("kept").key(key).body(ByteStream::from(bytes.clone())).send().await.unwrap();
    }
    interrupt(up);
}

fn objects() -> Vec<(String, Vec<u8>)> {
    [0usize, 10, 4000, 70_000, 3 << 20, 13 << 20]
        .iter()
        .enumerate()
        .map(|(i, &len)| (format!("object-{i}"), pseudo_random(len, 100 + i as u32)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_store_is_refused_at_start_and_rebuilt_from_the_nodes() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster");
    let objects = objects();
    written(&dir, &objects).await;
    std::fs::remove_file(dir.join("meta").join("meta.redb")).unwrap();
    let refusal = refused_up(&dir);
    assert!(refusal.contains("lowtail admin meta rebuild"), "{refusal}");
    let rebuilt = lowtail(&["admin", "meta", "rebuild", "--json"], &dir);
    assert!(rebuilt.status.success(), "{}", text(&rebuilt));
    let report: serde_json::Value = serde_json::from_slice(&rebuilt.stdout).unwrap();
    assert_eq!(report["objects_rolled_forward"], objects.len(), "{report}");
    let mut up = start_up(&dir);
    let manifest = wait_for_manifest(&dir, &mut up);
    let s3 = client(&manifest);
    for (key, bytes) in &objects {
        let got = common::try_get(&s3, "kept", key).await.unwrap_or_else(|e| panic!("{key}: {e}"));
        assert!(got == *bytes, "{key} rebuilt with other bytes");
    }
    interrupt(up);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_store_answers_errors_never_missing_objects_and_a_truncated_one_is_refused() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster");
    let objects = objects();
    written(&dir, &objects).await;
    let file = dir.join("meta").join("meta.redb");
    let mut bytes = std::fs::read(&file).unwrap();
    let needle = b"kept/object-3";
    let places: Vec<usize> =
        bytes.windows(needle.len()).enumerate().filter(|(_, w)| w == needle).map(|(i, _)| i).collect();
    assert!(!places.is_empty(), "the key is in the file");
    for place in places {
        bytes[place + needle.len() - 1] ^= 0x04;
    }
    std::fs::write(&file, &bytes).unwrap();
    let checked = lowtail(&["admin", "meta", "check"], &dir);
    assert!(!checked.status.success() && text(&checked).contains("1 damaged"), "{}", text(&checked));

    let mut up = start_up(&dir);
    let manifest = wait_for_manifest(&dir, &mut up);
    let s3 = client(&manifest);
    let damaged = s3.get_object().bucket("kept").key("object-3").send().await.unwrap_err();
    assert_eq!(damaged.raw_response().map(|r| r.status().as_u16()), Some(500), "{damaged:?}");
    let absent = s3.get_object().bucket("kept").key("never-written").send().await.unwrap_err();
    assert_eq!(absent.raw_response().map(|r| r.status().as_u16()), Some(500), "a miss is doubtful now");
    // A key damaged in the file also misleads the search for its neighbours in the same page: they
    // answer 500 too (doubtful), or their own bytes; never "no such key", never other bytes.
    let mut intact = 0;
    for (key, bytes) in objects.iter().filter(|(key, _)| key != "object-3") {
        match common::try_get(&s3, "kept", key).await {
            Ok(got) => {
                assert!(got == *bytes, "{key} answered other bytes");
                intact += 1;
            }
            Err(error) => assert!(error.contains("InternalError") && !error.contains("NoSuchKey"), "{key}: {error}"),
        }
    }
    assert!(intact > 0, "the other records still serve");
    let status = common::admin_status(&dir);
    assert_eq!(status["meta_damage"]["damaged_records"], 1, "{status}");
    interrupt(up);

    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(len / 2).unwrap();
    let refusal = refused_up(&dir);
    assert!(refusal.contains("lowtail admin meta rebuild") && !refusal.contains("panicked"), "{refusal}");
}
