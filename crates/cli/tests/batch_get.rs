//! lowtail's batch read through `lowtail up` as a user runs it: objects written with the AWS SDK
//! (packed, one stripe, several stripes, empty) and read back in one signed
//! `POST /{bucket}?lowtail-batch-get` — byte-identical parts in request order, a 404 part for a
//! missing key, the scan form equal to ListObjectsV2 plus GETs; unsigned and wrongly signed
//! requests refused, bad requests answered 400 with nothing read; hinted parallel GETs
//! (`x-lowtail-batch`) read together and answered each alone; `lowtail get-batch` writing
//! the objects to files; `examples/batch_get.py` (botocore) where Python has botocore; and the
//! gateway's records of the batches, late binding's extra reads included, from its admin endpoint.

mod common;

use aws_sdk_s3::primitives::ByteStream;
use bench::s3_batch::{BatchClient, BatchRequest};
use common::{client, poll, pseudo_random, start_up_with, wait_for_manifest};
use std::process::Command;
use std::time::Duration;

/// A presigned GET with `x-lowtail-batch: hint` (and `range`): status, `x-lowtail-batched`, body.
fn hinted_get(url: &str, hint: &str, range: Option<&str>) -> (u16, String, Vec<u8>) {
    let mut request = ureq::get(url).header("x-lowtail-batch", hint);
    if let Some(range) = range {
        request = request.header("range", range);
    }
    let mut answer = request.config().http_status_as_error(false).build().call().unwrap();
    let batched = answer.headers().get("x-lowtail-batched").map_or("", |v| v.to_str().unwrap()).to_string();
    let body = answer.body_mut().read_to_vec().unwrap();
    (answer.status().as_u16(), batched, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_get_reads_objects_of_every_layout_in_one_signed_request() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster");
    // Late binding (δ = 1) and records kept: the batches' records are checked at the end.
    let up_toml = temp.path().join("up.toml");
    // Plain GETs a second apart count as one request (the mover's statistics, checked below); a
    // hint's window wide enough that three threads' GETs meet in it on a loaded machine.
    let config = "coaccess_gap_ms = 1000\nbatch_window_ms = 300\n\n[controller]\nmax_records = 100000\n\n[controller.access]\nextra_reads = 1\n";
    std::fs::write(&up_toml, config).unwrap();
    let mut up = start_up_with(
        &dir,
        &["--nodes", "6", "--code", "rs-2-2", "--listen", "127.0.0.1:0", "--config", up_toml.to_str().unwrap()],
    );
    let manifest = wait_for_manifest(&dir, &mut up);
    let s3 = client(&manifest);
    s3.create_bucket().bucket("pages").send().await.unwrap();
    let sizes = [0usize, 700, 40_000, 100_000, 150_000, 5 << 20, 100_000, 1];
    let objects: Vec<(String, Vec<u8>)> =
        sizes.iter().enumerate().map(|(i, &len)| (format!("page/{i:02}"), pseudo_random(len, 40 + i as u32))).collect();
    for (key, bytes) in &objects {
        s3.put_object().bucket("pages").key(key).body(ByteStream::from(bytes.clone())).send().await.unwrap();
    }
    let batch =
        BatchClient::new(&manifest.endpoint, &manifest.access_key, &manifest.secret_key).with_region(&manifest.region);

    // By keys, in the order asked, a missing key in the middle.
    let mut keys: Vec<String> = objects.iter().rev().map(|(key, _)| key.clone()).collect();
    keys.insert(3, "page/missing".into());
    let parts = batch.get_batch("pages", &BatchRequest::Keys(keys.clone())).await.unwrap();
    assert_eq!(parts.iter().map(|p| p.key.clone()).collect::<Vec<_>>(), keys, "parts in request order");
    for part in &parts {
        if part.key == "page/missing" {
            assert_eq!((part.status, part.error_code.as_deref()), (404, Some("NoSuchKey")));
            continue;
        }
        let (_, bytes) = objects.iter().find(|(key, _)| *key == part.key).unwrap();
        assert_eq!(part.status, 200, "{}", part.key);
        assert!(part.body == *bytes, "{} read back identical", part.key);
        let head = s3.head_object().bucket("pages").key(&part.key).send().await.unwrap();
        assert_eq!(part.etag.as_deref(), head.e_tag(), "{}: the part's ETag is the object's", part.key);
    }

    // A scan: ListObjectsV2's keys after start_after, each object's bytes.
    let scan = BatchRequest::Scan { prefix: "page/".into(), start_after: Some("page/01".into()), max_keys: Some(4) };
    let parts = batch.get_batch("pages", &scan).await.unwrap();
    let listed = s3.list_objects_v2().bucket("pages").prefix("page/").start_after("page/01").max_keys(4).send().await;
    let listed: Vec<String> = listed.unwrap().contents().iter().map(|o| o.key().unwrap().to_string()).collect();
    assert_eq!(parts.iter().map(|p| p.key.clone()).collect::<Vec<_>>(), listed);
    for part in &parts {
        let got = s3.get_object().bucket("pages").key(&part.key).send().await.unwrap();
        assert!(part.body == got.body.collect().await.unwrap().into_bytes(), "{}", part.key);
    }

    // The gateway kept both batches once their extra reads ended: the keys' (seven striped
    // objects, one stripe each but the 5 MiB one's three) and the scan's; each block read k + δ.
    let admin = launcher::gateway_admin::GatewayAdmin {
        base: launcher::admin::gateway_http_from_dir(&dir).unwrap(),
        secret: launcher::admin::cluster_secret_from_dir(&dir).unwrap(),
    };
    let mut batches = Vec::new();
    poll("the batch records", Duration::from_secs(10), || {
        batches.extend(admin.take_batches().map_err(|e| e.to_string())?);
        if batches.len() == 2 { Ok(()) } else { Err(format!("{} batch records", batches.len())) }
    })
    .await;
    assert!(batches.iter().all(|b| b.outcome == model::Outcome::Ok), "{batches:?}");
    let records = admin.take_records().unwrap().records;
    for batch in &batches {
        for id in batch.requests() {
            let record = records.iter().find(|r| r.request.request.0 == id).expect("a record of every block");
            assert_eq!(record.tasks.len(), 3, "k + δ unit reads per block: {record:?}");
        }
    }

    // Hinted GETs: three parallel GETs under one id are read as one batch, each answered alone.
    let presign = |key: &str| {
        let s3 = s3.clone();
        let key = key.to_string();
        async move {
            let expires = aws_sdk_s3::presigning::PresigningConfig::expires_in(Duration::from_secs(300)).unwrap();
            s3.get_object().bucket("pages").key(key).presigned(expires).await.unwrap().uri().to_string()
        }
    };
    let hinted_keys = ["page/03", "page/04", "page/06"];
    let mut urls = Vec::new();
    for key in hinted_keys {
        urls.push(presign(key).await);
    }
    let answers: Vec<(u16, String, Vec<u8>)> = std::thread::scope(|scope| {
        let gets: Vec<_> = urls.iter().map(|url| scope.spawn(move || hinted_get(url, "page-17;n=3", None))).collect();
        gets.into_iter().map(|get| get.join().unwrap()).collect()
    });
    for ((status, batched, body), key) in answers.iter().zip(hinted_keys) {
        let (_, bytes) = objects.iter().find(|(k, _)| k == key).unwrap();
        assert_eq!((*status, batched.as_str()), (200, "3"), "{key}");
        assert!(*body == *bytes, "{key} read back identical through the hint");
    }
    // Alone past the window; ranged: read alone; a malformed hint refused.
    let (status, batched, body) = hinted_get(&urls[0], "lonely;n=2", None);
    assert_eq!((status, batched.as_str()), (200, "1"));
    assert!(body == objects[3].1);
    let (status, batched, body) = hinted_get(&urls[0], "ranged;n=1", Some("bytes=10-19"));
    assert_eq!((status, batched.as_str(), body.len()), (206, "1", 10));
    let (status, _, body) = hinted_get(&urls[0], "no-count", None);
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("<Code>InvalidArgument</Code>"));

    // Refusals: nothing is read, the answer says why.
    let wrong = BatchClient::new(&manifest.endpoint, &manifest.access_key, "not-the-secret");
    let (status, _, body) = wrong.send_raw("pages", BatchRequest::Keys(keys.clone()).to_json()).await.unwrap();
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&body));
    let unsigned = ureq::post(&format!("{}/pages?lowtail-batch-get", manifest.endpoint))
        .config()
        .http_status_as_error(false)
        .build()
        .send(BatchRequest::Keys(keys.clone()).to_json().as_bytes())
        .unwrap();
    assert_eq!(unsigned.status().as_u16(), 403, "an unsigned batch is refused");
    for (bad, code) in [
        (r#"{"objects": []}"#, "InvalidRequest"),
        (r#"{"objects": [{"key": "a"}, {"key": "a"}]}"#, "InvalidRequest"),
        (r#"{"objects": [{"key": "a", "range": "bytes=0-1"}]}"#, "InvalidRequest"),
        (r#"{"objects": [{"key": "a"}], "prefix": "p"}"#, "InvalidRequest"),
        (r#"{"prefix": "p", "max_keys": 0}"#, "InvalidArgument"),
        ("not json", "InvalidRequest"),
    ] {
        let (status, _, body) = batch.send_raw("pages", bad.to_string()).await.unwrap();
        let body = String::from_utf8_lossy(&body);
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body.contains(&format!("<Code>{code}</Code>")), "{bad}: {body}");
    }
    let (status, _, body) = batch.send_raw("no-such-bucket", BatchRequest::Keys(keys).to_json()).await.unwrap();
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));

    // `lowtail get-batch` writes what it read under --out.
    let out = temp.path().join("out");
    let cluster_json = dir.join("cluster.json");
    let run = Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["get-batch", "--bucket", "pages", "--cluster"])
        .arg(&cluster_json)
        .arg("--out")
        .arg(&out)
        .args(["page/03", "page/05"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(String::from_utf8_lossy(&run.stdout).starts_with("200 page/03 100000 bytes"));
    assert!(std::fs::read(out.join("page/05")).unwrap() == objects[5].1);
    let missing = Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["get-batch", "--bucket", "pages", "--cluster"])
        .arg(&cluster_json)
        .args(["page/03", "page/missing"])
        .output()
        .unwrap();
    assert!(!missing.status.success(), "a missing key fails the command");
    assert!(String::from_utf8_lossy(&missing.stdout).contains("404 page/missing NoSuchKey"));

    // `lowtail admin access` and `lowtail admin mover` on the running gateway.
    let admin = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_lowtail")).arg("admin").args(args).arg("--dir").arg(&dir).output();
        let out = out.unwrap();
        (
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )
    };
    let (ok, text) = admin(&["access", "set", r#"{"kind": "random", "extra_reads": 1}"#]);
    assert!(ok && text.contains("batch reads now ec-random-lb1"), "{text}");
    let (ok, text) = admin(&["access", "show"]);
    assert!(ok && text.contains(r#""kind":"random""#), "{text}");
    let (ok, text) = admin(&["access", "set", r#"{"kind": "cheapest"}"#]);
    assert!(!ok && text.contains("access settings"), "a bad kind is refused: {text}");
    let (ok, text) = admin(&["mover", "on"]);
    assert!(ok && text.contains(r#""enabled":true"#), "{text}");
    let (ok, text) = admin(&["mover", "off"]);
    assert!(ok && text.contains(r#""enabled":false"#), "{text}");
    // Plain GETs of one key close together feed the mover's co-access statistics once the next
    // GET after the gap closes their session.
    let window_batches = || {
        let (ok, text) = admin(&["mover", "show"]);
        assert!(ok, "{text}");
        let json: serde_json::Value = serde_json::from_str(text.split_once(": ").unwrap().1.trim()).unwrap();
        json["statistics"]["window_batches"].as_f64().unwrap()
    };
    let before = window_batches();
    for key in ["page/02", "page/03", "page/04"] {
        s3.get_object().bucket("pages").key(key).send().await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    s3.get_object().bucket("pages").key("page/06").send().await.unwrap();
    assert_eq!(window_batches(), before + 1.0, "the three GETs are one request of the statistics");

    // The Python example (botocore's S3 signer), where botocore is installed (CI installs it).
    let has_botocore = Command::new("python3").args(["-c", "import botocore"]).status().is_ok_and(|s| s.success());
    if has_botocore {
        let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/batch_get.py");
        let run = Command::new("python3")
            .arg(&example)
            .args([&manifest.endpoint, &manifest.access_key, &manifest.secret_key, "pages", "page/05", "page/00"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(run.status.success(), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
        assert!(stdout.starts_with(&format!("200 page/05 {} ", 5 << 20)), "{stdout}");
        assert!(stdout.contains("\n200 page/00 0 "), "{stdout}");
    } else {
        eprintln!("python3 with botocore not found: the Python example was not run");
    }
    common::interrupt(up);
}
