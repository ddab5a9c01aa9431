//! `lowtail bench s3` as a user runs it: a real process that starts its own cluster, runs short
//! PUT, GET and DELETE phases, stops the cluster and prints exactly one JSON array; the same beside
//! a peer (a second cluster this test starts), interleaved over two rounds, with the comparison
//! table; and its refusals of argument combinations that cannot work.

mod common;

use std::process::{Command, Output};
use std::sync::Mutex;

/// The runs that start clusters take turns: on a small CI machine two at once would each measure
/// the other's load and take longer than one after the other.
static CLUSTERS: Mutex<()> = Mutex::new(());

fn lowtail_bench_s3(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowtail")).args(["bench", "s3"]).args(args).output().expect("lowtail runs")
}

fn rows_of(json: &[u8]) -> Vec<serde_json::Value> {
    let rows: serde_json::Value = serde_json::from_slice(json).expect("one JSON value");
    rows.as_array().expect("a JSON array").clone()
}

#[test]
fn bench_s3_quick_json_reports_put_get_and_delete_rows_without_errors() {
    let _turn = CLUSTERS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let output = lowtail_bench_s3(&["--quick", "--duration-s", "1", "--sizes", "4KiB", "--concurrency", "2", "--json"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "lowtail bench s3 failed: {}\n{stderr}", output.status);
    let rows = rows_of(&output.stdout);
    let ops: Vec<&str> = rows.iter().map(|row| row["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["put", "get", "delete"]);
    assert_eq!(rows[2]["requests"], rows[0]["requests"], "every object written is deleted once");
    for row in &rows {
        assert_eq!((&row["target"], &row["round"]), (&"lowtail".into(), &1.into()), "{row}");
        assert_eq!(row["object_bytes"], 4096, "{row}");
        assert_eq!(row["concurrency"], 2, "{row}");
        assert!(row["requests"].as_u64().unwrap() > 0, "{row}");
        assert_eq!(row["errors"], 0, "{row}");
        assert!(row["ops_per_s"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["p50_ms"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["p99_ms"].as_f64().unwrap() >= row["p50_ms"].as_f64().unwrap(), "{row}");
        assert!(row["max_ms"].as_f64().unwrap() >= row["p99_ms"].as_f64().unwrap(), "{row}");
        // The fresh cluster runs as child processes, so its CPU time is read.
        assert!(row["server_cpu_ms_per_op"].as_f64().unwrap() > 0.0, "{row}");
        assert!((0.0..=100.0).contains(&row["host_idle_pct"].as_f64().unwrap()), "{row}");
    }
}

#[test]
fn bench_s3_beside_a_peer_interleaves_both_over_rounds_and_compares_them() {
    let _turn = CLUSTERS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut up = common::start_up(dir.path());
    let peer = common::wait_for_manifest(dir.path(), &mut up);
    let pids: Vec<String> = peer
        .gateway
        .iter()
        .map(|gateway| gateway.pid)
        .chain(peer.nodes.iter().map(|node| node.pid))
        .map(|pid| pid.to_string())
        .collect();
    let json_out = dir.path().join("rows.json");
    let mut args = vec!["--quick", "--duration-s", "1", "--rounds", "2", "--sizes", "4KiB", "--concurrency", "2"];
    args.extend(["--peer", &peer.endpoint, "--peer-name", "twin", "--peer-region", &peer.region]);
    args.extend(["--peer-access-key", &peer.access_key, "--peer-secret-key", &peer.secret_key]);
    for pid in &pids {
        args.extend(["--peer-pid", pid]);
    }
    args.extend(["--json-out", json_out.to_str().unwrap()]);
    let output = lowtail_bench_s3(&args);
    common::interrupt(up);
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "lowtail bench s3 failed: {}\n{stdout}\n{stderr}", output.status);

    let rows = rows_of(&std::fs::read(&json_out).unwrap());
    let order: Vec<(u64, &str, &str)> = rows
        .iter()
        .map(|row| (row["round"].as_u64().unwrap(), row["op"].as_str().unwrap(), row["target"].as_str().unwrap()))
        .collect();
    // The first turn alternates by round: lowtail first in round 1, the twin first in round 2.
    let one_round = |round, first, second| {
        ["put", "get", "delete"].into_iter().flat_map(move |op| [(round, op, first), (round, op, second)])
    };
    let expected: Vec<_> = one_round(1, "lowtail", "twin").chain(one_round(2, "twin", "lowtail")).collect();
    assert_eq!(order, expected, "interleaved phase by phase");
    for row in &rows {
        assert_eq!((&row["errors"], &row["concurrency"], &row["object_bytes"]), (&0.into(), &2.into(), &4096.into()));
        assert!(row["server_cpu_ms_per_op"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["ops_per_s"].as_f64().unwrap() > 0.0, "{row}");
    }
    for expected in ["lowtail beside twin: medians over 2 round(s)", "twin ops/s", "CPU ms/op lowtail ÷ twin", "Host: "]
    {
        assert!(stdout.contains(expected), "{expected:?} missing from\n{stdout}");
    }
    assert!(stdout.contains(&format!("server CPU: {} process(es), pid(s) ", pids.len())), "{stdout}");
}

/// The scenarios on a fresh cluster: node 0 made fail-slow, then killed and started again; every
/// phase's row in the documented order, none failed, and the table of each scenario beside healthy.
#[test]
fn bench_s3_measures_fail_slow_down_rebuild_and_hot_beside_healthy() {
    let _turn = CLUSTERS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let json_out = dir.path().join("rows.json");
    let output = lowtail_bench_s3(&[
        "--duration-s",
        "2",
        "--sizes",
        "4KiB",
        "--concurrency",
        "2",
        "--scenarios",
        "fail-slow,down,rebuild,hot",
        "--json-out",
        json_out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "lowtail bench s3 failed: {}\n{stdout}\n{stderr}", output.status);
    let rows = rows_of(&std::fs::read(&json_out).unwrap());
    let order: Vec<(&str, &str)> =
        rows.iter().map(|row| (row["scenario"].as_str().unwrap(), row["op"].as_str().unwrap())).collect();
    let expected = [
        ("healthy", "put"),
        ("healthy", "get"),
        ("fail-slow", "put"),
        ("fail-slow", "get"),
        ("fail-slow", "delete"),
        ("down", "put"),
        ("down", "get"),
        ("down", "delete"),
        ("rebuild", "put"),
        ("rebuild", "get"),
        ("rebuild", "delete"),
        ("hot", "get"),
        ("healthy", "delete"),
    ];
    assert_eq!(order, expected);
    for row in &rows {
        assert_eq!(row["errors"], 0, "{row}");
        assert!(row["p999_ms"].as_f64().unwrap() >= row["p99_ms"].as_f64().unwrap(), "{row}");
    }
    // The healthy DELETE removes what the healthy PUT wrote; each scenario's what its own wrote.
    assert_eq!(rows[12]["requests"], rows[0]["requests"]);
    for (delete, put) in [(4, 2), (7, 5), (10, 8)] {
        assert_eq!(rows[delete]["requests"], rows[put]["requests"], "{}", rows[delete]);
    }
    for expected in ["Each scenario beside healthy", "p99.9 ×", "storage node 0 (pid ", "90 % of every 100 ms"] {
        assert!(stdout.contains(expected), "{expected:?} missing from\n{stdout}");
    }
    // The node came back empty and was rebuilt: the whole cluster again, and what it took.
    for expected in
        ["to whole s", "rebuilt MB", "Rebuilds: from the victim's restart", "with a data unit on node 0 first"]
    {
        assert!(stdout.contains(expected), "{expected:?} missing from\n{stdout}");
    }
}

#[test]
fn bench_s3_refuses_arguments_that_do_not_go_together() {
    let refusals: [(&[&str], &str); 10] = [
        (&["--scenarios", "slow"], "healthy, fail-slow, down"),
        (&["--scenarios", "fail-slow", "--fail-slow-stopped-pct", "100"], "1 to 99"),
        (&["--victim-pid", "1"], "--endpoint <URL>"),
        (&["--peer-access-key", "k"], "--peer <URL>"),
        (
            &["--endpoint", "http://127.0.0.1:1", "--access-key", "k", "--secret-key", "s", "--cluster", "c.json"],
            "cannot be used with",
        ),
        (&["--pid", "1"], "--endpoint <URL>"),
        (&["--peer", "http://127.0.0.1:1"], "--peer-access-key"),
        (&["--peer-name", "old"], "--peer-cluster <FILE>"),
        (&["--peer-victim-dir", "/srv/minio/d1"], "--peer-access-key <KEY>"),
        (&["--peer", "https://127.0.0.1:1", "--peer-access-key", "k", "--peer-secret-key", "s"], "plain HTTP"),
    ];
    for (args, expected) in refusals {
        let output = lowtail_bench_s3(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(expected), "{args:?}: {expected:?} missing from\n{stderr}");
    }
}

/// `lowtail bench backend` on a fresh cluster: both operations measured and fitted, every read code
/// from k to n_max predicted (longer codes faster with no queueing, lower capacity, more storage),
/// and a verdict.
#[test]
fn bench_backend_measures_fits_and_predicts_every_code() {
    let _turn = CLUSTERS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let output = Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["bench", "backend", "--requests", "60", "--threads", "4", "--chunk-bytes", "64KiB", "--json"])
        .output()
        .expect("lowtail runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "lowtail bench backend failed: {}\n{stderr}", output.status);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON report");
    let ops = report["ops"].as_array().unwrap();
    assert_eq!(ops.iter().map(|op| op["op"].as_str().unwrap()).collect::<Vec<_>>(), ["put", "get"]);
    for op in ops {
        assert_eq!((op["samples"].as_u64(), op["failed"].as_u64()), (Some(60), Some(0)), "{op}");
        assert!(op["shift_ms"].as_f64().unwrap() >= 0.0 && op["exp_mean_ms"].as_f64().unwrap() > 0.0, "{op}");
    }
    let codes = report["predictions"].as_array().unwrap();
    assert_eq!(codes.iter().map(|c| c["n"].as_u64().unwrap()).collect::<Vec<_>>(), [3, 4, 5, 6]);
    for pair in codes.windows(2) {
        assert!(
            pair[1]["service_ms"].as_f64() < pair[0]["service_ms"].as_f64(),
            "racing more tasks is faster: {pair:?}"
        );
        assert!(pair[1]["capacity_per_s"].as_f64() < pair[0]["capacity_per_s"].as_f64(), "and sustains less: {pair:?}");
    }
    assert_eq!(codes[3]["storage_factor"], 2.0);
    assert!(report["verdict"].as_str().unwrap().starts_with("FEC "), "{report}");
}
