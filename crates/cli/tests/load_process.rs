//! `lowtail load` against `lowtail up` as real processes on loopback: an open-loop quick run whose
//! results hold one record per request, a second run that finds its objects already loaded, a
//! trace replayed, a gateway that does not answer refused by name, a closed loop of 4 clients, and
//! bad arguments refused before anything is written.

mod common;

use common::{interrupt, start_up, wait_for_manifest};
use std::path::Path;
use std::process::{Command, Output};

/// A short open-loop workload: about 150 requests over at most 100 objects of at most 64 KiB.
const SHORT: &[&str] = &[
    "--quick",
    "--duration-s",
    "3",
    "--rate",
    "50",
    "--max-objects",
    "100",
    "--max-object-bytes",
    "65536",
    "--no-png",
];

fn load(args: &[&str], extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowtail")).arg("load").args(args).args(extra).output().expect("lowtail runs")
}

fn text(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// Checks a results folder: one summary row with `requests` requests and no failure; with records,
/// one CSV row per request, each sent no earlier than its arrival. Returns the request count.
fn check_results(out: &Path, policy: &str, records: bool) -> u64 {
    let stats = json(&out.join("load.json"));
    let requests = stats["requests"].as_u64().unwrap();
    assert!(requests > 0, "{stats}");
    assert_eq!(stats["failed"], 0, "{stats}");
    let summary = json(&out.join("summary.json"));
    let rows = summary.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{summary}");
    assert_eq!(rows[0]["requests"].as_u64(), Some(requests), "{summary}");
    assert_eq!(rows[0]["failed"], 0, "{summary}");
    assert_eq!(rows[0]["policy"], policy, "{summary}");
    assert!(out.join("report.html").is_file());
    if records {
        let csv = std::fs::read_dir(out.join("records"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| path.to_string_lossy().ends_with("_requests.csv"))
            .expect("a requests CSV");
        let text = std::fs::read_to_string(&csv).unwrap();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let column = |name: &str| header.iter().position(|c| *c == name).unwrap_or_else(|| panic!("no {name} column"));
        let (arrival, sent, outcome) = (column("arrival_ns"), column("decision_start_ns"), column("outcome"));
        let mut rows = 0;
        for line in lines {
            let cells: Vec<&str> = line.split(',').collect();
            let (arrival_ns, sent_ns): (u64, u64) = (cells[arrival].parse().unwrap(), cells[sent].parse().unwrap());
            assert!(sent_ns >= arrival_ns, "sent before its arrival: {line}");
            assert_eq!(cells[outcome], "ok", "{line}");
            rows += 1;
        }
        assert_eq!(rows, requests, "one CSV row per request");
    }
    requests
}

#[test]
fn open_loop_records_every_request_and_a_second_run_reuses_the_objects() {
    let dir = tempfile::tempdir().unwrap();
    let mut up = start_up(&dir.path().join("cluster"));
    wait_for_manifest(&dir.path().join("cluster"), &mut up);
    let manifest = dir.path().join("cluster/cluster.json");
    let cluster = ["--cluster", manifest.to_str().unwrap()];

    let first = dir.path().join("first");
    let output = load(&cluster, &[SHORT, &["--records", "--out", first.to_str().unwrap()]].concat());
    assert!(output.status.success(), "{}", text(&output));
    let requests = check_results(&first, "open-loop", true);
    let prepared = json(&first.join("load.json"))["prepare"].clone();
    assert!(prepared["uploaded"].as_u64().unwrap() > 0, "{prepared}");
    assert_eq!(prepared["present"], 0, "{prepared}");
    assert!(String::from_utf8_lossy(&output.stdout).contains(&format!("{requests} requests")), "{}", text(&output));

    // Same seed, same objects: all found by HEAD, none written again.
    let second = dir.path().join("second");
    let output = load(&cluster, &[SHORT, &["--out", second.to_str().unwrap()]].concat());
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(check_results(&second, "open-loop", false), requests, "the same workload");
    let again = json(&second.join("load.json"));
    assert_eq!(again["prepare"]["uploaded"], 0, "{again}");
    assert_eq!(again["prepare"]["present"], prepared["objects"], "{again}");
    assert!(again["prepare_s"].as_f64().unwrap() < json(&first.join("load.json"))["prepare_s"].as_f64().unwrap());

    // A trace replayed as it is: 120 requests over 3 s on 30 objects, every one served.
    let trace = dir.path().join("trace.csv");
    let lines: String =
        (0..120).map(|i| format!("{:.3},t{},{}\n", f64::from(i) * 0.025, i % 30, 1000 + 500 * (i % 30))).collect();
    std::fs::write(&trace, format!("time,object_id,size\n{lines}")).unwrap();
    let replayed = dir.path().join("trace-run");
    let output = load(
        &cluster,
        &["--trace", trace.to_str().unwrap(), "--partitions", "4", "--no-png", "--out", replayed.to_str().unwrap()],
    );
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(check_results(&replayed, "open-loop", false), 120, "every line of the trace");

    // A second gateway that does not answer: refused before any request, naming it.
    let refused = dir.path().join("refused");
    let manifest_json = json(&manifest);
    let (access_key, secret_key) =
        (manifest_json["access_key"].as_str().unwrap(), manifest_json["secret_key"].as_str().unwrap());
    let output = load(
        &cluster,
        &[
            SHORT,
            &["--endpoint", "http://127.0.0.1:9", "--access-key", access_key, "--secret-key", secret_key],
            &["--out", refused.to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(!output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("gateway http://127.0.0.1:9 does not serve bucket"), "{}", text(&output));
    assert!(!refused.exists(), "a refused run writes nothing");
    interrupt(up);
}

#[test]
fn closed_loop_of_four_clients_serves_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let mut up = start_up(&dir.path().join("cluster"));
    wait_for_manifest(&dir.path().join("cluster"), &mut up);
    let manifest = dir.path().join("cluster/cluster.json");
    let out = dir.path().join("closed");
    let output = load(
        &["--cluster", manifest.to_str().unwrap(), "--clients", "4", "--think-ms", "2"],
        &[SHORT, &["--records", "--out", out.to_str().unwrap()]].concat(),
    );
    assert!(output.status.success(), "{}", text(&output));
    check_results(&out, "closed-loop", true);
    interrupt(up);
}

#[test]
fn bad_arguments_are_refused_with_a_clear_message_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out_arg = out.to_str().unwrap();
    let missing_manifest = dir.path().join("nowhere/cluster.json");
    let missing_config = dir.path().join("missing.toml");
    let cases: [(Vec<&str>, &str); 3] = [
        (vec!["--quick", "--out", out_arg], "--cluster"),
        (vec!["--cluster", missing_manifest.to_str().unwrap(), "--out", out_arg], "nowhere/cluster.json"),
        (
            vec![
                "--endpoint",
                "http://127.0.0.1:9",
                "--access-key",
                "a",
                "--secret-key",
                "b",
                "--config",
                missing_config.to_str().unwrap(),
                "--out",
                out_arg,
            ],
            "missing.toml",
        ),
    ];
    for (args, expected) in cases {
        let output = load(&args, &[]);
        assert!(!output.status.success(), "{args:?}: {}", text(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("error") && stderr.contains(expected), "{args:?}: {}", text(&output));
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
}
