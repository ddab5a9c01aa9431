//! The live side of `lowtail experiment hu2017 --live`: a fleet (etcd, `lowtail node` and `lowtail
//! gateway` processes) started, used through S3 from two gateways and torn down without leaving a
//! process; the experiment itself end to end (`--quick`), its outputs' schema checked. Skipped, with
//! the reason printed, when the `etcd` binary is absent.

mod common;

use aws_sdk_s3::primitives::ByteStream;
use std::path::Path;
use std::time::Duration;

/// The live runs share this machine; a test that judges an order of timings runs alone, the others
/// together (a tie of two medians under the others' load failed CI once).
static MACHINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared_machine() -> std::sync::RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn whole_machine() -> std::sync::RwLockWriteGuard<'static, ()> {
    MACHINE.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn etcd_or_skip(test: &str) -> Option<std::path::PathBuf> {
    let found = launcher::find_etcd_binary();
    if found.is_none() {
        println!("{test}: skipped: no etcd binary (PATH, /usr/bin, /usr/local/bin, LOWTAIL_ETCD_BIN)");
    }
    found
}

fn alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; its state is Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
}

/// A process's niceness (field 19 of /proc/PID/stat, the 17th after the command's closing paren).
fn niceness(pid: &str) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat.rsplit(')').next().unwrap().split_whitespace().nth(16).unwrap().parse().unwrap()
}

fn fleet_config(etcd: &Path) -> launcher::FleetConfig {
    let mut data = gateway::data::DataConfig { code: "rs-4-2".into(), ..gateway::data::DataConfig::default() };
    data.packed.seal_after_ms = 300;
    launcher::FleetConfig {
        nodes: 6,
        gateways: 2,
        service_model: node::ServiceModel::default(),
        data,
        controller: launcher::fleet::ControllerTable::new(),
        etcd_binary: etcd.to_path_buf(),
        node_workers: 1,
        node_nice: 5,
        classes: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_serves_s3_from_every_gateway_and_stops_without_leftovers() {
    let Some(etcd) = etcd_or_skip("a_fleet_serves_s3_from_every_gateway_and_stops_without_leftovers") else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_lowtail"));
    let fleet = launcher::Fleet::start(binary, temp.path(), &fleet_config(&etcd), &|_| {}).await.unwrap();
    let pids = fleet.pids();
    assert!(pids.iter().all(|&pid| alive(pid)));
    // Nodes run at the fleet's niceness (or this test's own, if higher); gateways at this test's.
    let own = niceness("self");
    for node in fleet.nodes() {
        assert_eq!(niceness(&node.pid().to_string()), own.max(5), "node {}", node.pid());
    }
    for gateway in fleet.gateways() {
        assert_eq!(niceness(&gateway.pid().to_string()), own, "{}", gateway.name);
    }

    let credential = fleet.credential();
    let clients: Vec<aws_sdk_s3::Client> = fleet
        .gateways()
        .iter()
        .map(|g| common::client_for(&g.s3_url(), fleet.region(), &credential.access_key, &credential.secret_key))
        .collect();
    clients[0].create_bucket().bucket("fleet").send().await.unwrap();
    let body = vec![7u8; 3000];
    clients[0].put_object().bucket("fleet").key("a").body(ByteStream::from(body.clone())).send().await.unwrap();
    assert_eq!(common::try_get(&clients[1], "fleet", "a").await.unwrap(), body, "read through the other gateway");

    let slow = node::ServiceModel { enabled: true, overhead_us: 1000, ..node::ServiceModel::default() };
    assert_eq!(fleet.set_service_model(3, &slow).await.unwrap(), slow);
    assert_eq!(common::try_get(&clients[0], "fleet", "a").await.unwrap(), body);

    fleet.shutdown().await;
    for pid in pids {
        assert!(!alive(pid), "process {pid} outlived the fleet");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_with_a_bad_node_niceness_is_refused_before_anything_starts() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("fleet");
    let binary = Path::new(env!("CARGO_BIN_EXE_lowtail"));
    for bad in [-1, 20] {
        let config = launcher::FleetConfig { node_nice: bad, ..fleet_config(Path::new("/nonexistent/etcd")) };
        let error = launcher::Fleet::start(binary, &root, &config, &|_| {}).await.unwrap_err();
        assert!(format!("{error:#}").contains("niceness"), "{error:#}");
        assert!(!root.exists(), "nothing was created");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_fleet_kills_its_processes() {
    let Some(etcd) = etcd_or_skip("a_dropped_fleet_kills_its_processes") else { return };
    let temp = tempfile::tempdir().unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_lowtail"));
    let fleet = launcher::Fleet::start(binary, temp.path(), &fleet_config(&etcd), &|_| {}).await.unwrap();
    let pids = fleet.pids();
    drop(fleet);
    tokio::time::sleep(Duration::from_millis(100)).await;
    for pid in pids {
        assert!(!alive(pid), "process {pid} outlived the dropped fleet");
    }
}

/// `lowtail experiment hu2017 --live --quick`: two clusters of processes, five policies on each
/// code, the slow-node runs and the simulator beside them. Checks the results folder's schema, not
/// the findings (a debug build on a shared machine measures its own CPU as much as the policies).
#[test]
fn the_quick_live_experiment_writes_the_results_folder() {
    let _machine = shared_machine();
    let Some(_etcd) = etcd_or_skip("the_quick_live_experiment_writes_the_results_folder") else { return };
    let out = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["experiment", "hu2017", "--live", "--quick", "--no-png", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("sim_vs_live.html"), "{stdout}");
    let read_json = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out.path().join(name)).unwrap()).unwrap()
    };
    let rows = read_json("summary.json");
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 10, "5 policies on 2 codes");
    for row in rows {
        for field in
            ["code", "policy", "requests", "median", "p95", "p99", "probes_per_s", "sim_median", "sim_p95", "sim_p99"]
        {
            assert!(row.get(field).is_some(), "summary row lacks {field}: {row}");
        }
        assert!(row["requests"].as_u64().unwrap() > 0, "{row}");
        assert!(row["sim_p99"].as_f64().is_some(), "{row}");
    }
    let slow = read_json("slow_node.json");
    let slow = slow.as_array().unwrap();
    assert_eq!(slow.len(), 6, "normal, lmlf-pw2 and llf-pw2 with a slowed node, on both codes");
    for row in slow {
        for field in ["code", "policy", "node", "factor", "healthy_p99", "slowed_p99", "ratio", "sim_ratio"] {
            assert!(row.get(field).is_some(), "slow-node row lacks {field}: {row}");
        }
        // The simulated slowdown ran: a slowed node never makes the simulated p99 smaller by much.
        assert!(row["sim_ratio"].as_f64().is_some_and(|r| r > 0.5), "{row}");
    }
    // Normal at several timeouts in the calibrated simulator; at the runs' own timeout it is the
    // simulated Normal of sim/summary.json, the same deterministic run.
    let timeouts = read_json("timeout_sensitivity.json");
    let timeouts = timeouts.as_array().unwrap();
    let per_code = experiment::live::TIMEOUT_SENSITIVITY_MS.len();
    assert_eq!(timeouts.len(), 2 * per_code, "every timeout on both codes");
    let sim_rows = read_json("sim/summary.json");
    let own_timeout_ms = experiment::live::policy_settings().normal_timeout_ms;
    for code in ["rs-6-3", "lrc-6-2-2"] {
        let sim_normal = sim_rows
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["code"] == code && row["policy"] == "normal")
            .unwrap_or_else(|| panic!("no simulated normal row for {code}"));
        let own = timeouts
            .iter()
            .find(|row| row["code"] == code && row["normal_timeout_ms"].as_u64() == Some(own_timeout_ms))
            .unwrap_or_else(|| panic!("no {own_timeout_ms} ms row for {code}: {timeouts:?}"));
        assert_eq!(own["normal_median"], sim_normal["median"], "{own} against {sim_normal}");
        assert_eq!(own["normal_p95"], sim_normal["p95"], "{own} against {sim_normal}");
        for row in timeouts.iter().filter(|row| row["code"] == code) {
            for field in ["normal_p95", "lmlf_pw2_median_change_pct", "lmlf_pw2_p95_change_pct"] {
                assert!(row[field].as_f64().is_some_and(f64::is_finite), "{field} in {row}");
            }
        }
    }
    assert!(!read_json("findings.json").as_array().unwrap().is_empty());
    assert_eq!(read_json("calibration.json").as_array().unwrap().len(), 2);
    let regime = read_json("regime.json");
    // Before loading, the exponent is fitted with the scale on the stand-in: every exponent of the
    // grid at every scale.
    let stand_in = &regime["stand_in"];
    let points = stand_in["points"].as_array().unwrap();
    let best = stand_in["best"].as_u64().unwrap() as usize;
    assert!(best < points.len() && points[best]["loss"].as_f64().is_some(), "{regime}");
    let exponents = stand_in["zipf_exponents"].as_array().unwrap().len();
    assert!(exponents > 1, "{regime}");
    let scales = stand_in["scales"].as_array().unwrap().len();
    assert_eq!(points.len(), exponents * scales);
    // After loading, the scale again on the live placement, at the chosen exponent, with the
    // units each code's gateways actually filled.
    let live = &regime["live_placement"];
    assert_eq!(live["ground"], "live placement", "{regime}");
    assert_eq!(live["zipf_exponents"][0], points[best]["zipf_exponent"], "{regime}");
    let live_points = live["points"].as_array().unwrap();
    assert_eq!(live_points.len(), scales, "{regime}");
    let chosen = &live_points[live["best"].as_u64().unwrap() as usize];
    for normal in chosen["normal"].as_array().unwrap() {
        assert!(normal["units"].as_u64().unwrap() > 0, "{regime}");
    }
    for plot in ["plots/sim-vs-live.svg", "plots/regime-fit.svg"] {
        assert!(out.path().join(plot).is_file(), "{plot} missing");
    }
    assert_eq!(read_json("sim/summary.json").as_array().unwrap().len(), 10);
    let report = std::fs::read_to_string(out.path().join("report.html")).unwrap();
    assert!(report.contains("href=\"sim_vs_live.html\""), "report.html links the sim-vs-live page");
    let page = std::fs::read_to_string(out.path().join("sim_vs_live.html")).unwrap();
    assert!(page.contains("lmlf-pw2") && page.contains("sim/live p95"), "{page}");
    assert!(page.contains("plots/sim-vs-live.svg") && page.contains("plots/regime-fit.svg"), "{page}");
    assert!(page.contains("Normal's timeout") && page.contains("timeout_sensitivity.json"), "{page}");
}

/// `lowtail experiment fastcloud --live --quick`: a FAST CLOUD cluster started, five runs replayed
/// through S3, every GET served, the runs and findings written. Judged here: no request failed and
/// (6,3) beats (3,3) at low load (the gap is tens of milliseconds); the fits and the comparison with
/// the simulator are too noisy in a 10-second run to judge in CI (the full run judges them).
#[test]
fn the_quick_fastcloud_live_experiment_writes_its_runs_and_findings() {
    let _machine = shared_machine();
    let Some(_etcd) = etcd_or_skip("the_quick_fastcloud_live_experiment_writes_its_runs_and_findings") else {
        return;
    };
    let (_out, read_json) = run_fastcloud_quick("--live");
    let live = read_json("live.json");
    let runs = live["runs"].as_array().unwrap();
    let policies: Vec<&str> = runs.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(policies, ["(3,3)", "(6,3)", "bafec", "bafec", "bafec"]);
    for run in runs {
        assert!(run["requests"].as_u64().unwrap() > 0, "{run}");
        assert_eq!(run["failed"], 0, "{run}");
    }
    assert_eq!(runs[0]["mean_n"], 3.0);
    assert_eq!(runs[1]["mean_n"], 6.0);
    assert!(runs[2..].iter().all(|r| r["sim_mean_s"].as_f64().is_some_and(|s| s > 0.0)));
    let findings = read_json("findings.json");
    let holds = |id: &str, claim_part: &str| {
        findings
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == id && f["claim"].as_str().unwrap().contains(claim_part))
            .unwrap_or_else(|| panic!("no {id} finding about {claim_part:?}: {findings}"))["holds"]
            .clone()
    };
    assert_eq!(holds("FC-live", "served"), true);
    assert_eq!(holds("FC4", "(6,3)"), true);
    assert!(holds("FC13", "BAFEC").is_boolean());
    assert!(holds("FC11", "online fit").is_boolean());
}

/// `lowtail experiment ecstore --live --quick`: an EC-Store cluster started and loaded, every
/// configuration read through the S3 batch read with every part checked, the runs and findings
/// written. Judged here: no batch failed, late binding launched exactly 1.5 × the reads, and the
/// cost plan touched fewer nodes per batch than random access (a gap of about a third); the
/// latency orders are judged by the full run (a 12-second run's mover has moved a dozen units).
#[test]
fn the_quick_ecstore_live_experiment_reads_through_the_batch_surface() {
    let _machine = shared_machine();
    let Some(_etcd) = etcd_or_skip("the_quick_ecstore_live_experiment_reads_through_the_batch_surface") else {
        return;
    };
    let out = quick_live_run("ecstore");
    let read_json = |name: &str| read_json(out.path(), name);
    let live = read_json("live.json");
    let runs = live["runs"].as_array().unwrap();
    let configs: Vec<&str> = runs.iter().map(|r| r["config"].as_str().unwrap()).collect();
    assert_eq!(configs, ["EC", "EC-data", "EC+LB", "EC+C", "EC+C+M", "EC+C+M+LB"]);
    for run in runs {
        assert!(run["summary"]["batches"].as_u64().unwrap() > 50, "{run}");
        assert_eq!(run["client_failures"], 0, "{run}");
    }
    let findings = read_json("findings-live.json");
    let holds = |id: &str| {
        findings
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == id)
            .unwrap_or_else(|| panic!("no {id} finding: {findings}"))["holds"]
            .clone()
    };
    assert_eq!(holds("EA-L1"), true, "{findings}");
    assert_eq!(holds("EA-L4"), true, "{findings}");
    assert_eq!(holds("EA-L5"), true, "{findings}");
    assert!(holds("EA-L2").is_boolean() && holds("EA-L2b").is_boolean(), "{findings}");
    assert!(out.path().join("live.md").is_file());
}

/// Runs `lowtail experiment NAME --live --quick` into a fresh folder, which it returns.
fn quick_live_run(name: &str) -> tempfile::TempDir {
    let out = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["experiment", name, "--live", "--quick", "--out"])
        .arg(out.path())
        .status()
        .unwrap();
    assert!(status.success(), "lowtail experiment {name} --live --quick");
    out
}

/// A JSON file of a results folder.
fn read_json(dir: &Path, name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
}

/// `lowtail experiment apls --live --quick`: a node stopped on a loopback fleet, each lost unit read
/// by the gateway decode, the segmented read and (with shaped links) APLS on the nodes, every answer
/// checked. Judged here: no GET failed, the segmented read was faster where disks bind and APLS where
/// links bind (their agreement with the simulator is reported by the findings, judged at full length).
#[test]
fn the_quick_apls_live_experiment_reads_lost_units_faster_segmented_and_by_apls() {
    let _machine = whole_machine();
    let Some(_etcd) = etcd_or_skip("the_quick_apls_live_experiment_reads_lost_units_faster_segmented_and_by_apls")
    else {
        return;
    };
    let out = quick_live_run("apls");
    let read_json = |name: &str| read_json(out.path(), name);
    let live = read_json("live.json");
    let kinds = live["kinds"].as_array().unwrap();
    let median = |phase: &str, kind: &str| {
        let found = kinds.iter().find(|k| k["phase"] == phase && k["kind"] == kind).unwrap();
        found["median_s"].as_f64().unwrap()
    };
    // How many objects lost a data unit depends on placement (the loads interleave its draws): at
    // least one, read in each of the two rounds.
    assert!(kinds.iter().all(|k| k["failed"] == 0 && k["gets"].as_u64().unwrap() >= 2), "{live}");
    assert!(median("disks", "segmented") < median("disks", "gateway"), "{live}");
    assert!(median("links", "apls") < median("links", "gateway"), "{live}");
    assert!(median("links", "auto") < median("links", "gateway"), "auto picks APLS here: {live}");
    let findings = read_json("findings-live.json");
    let ids: Vec<&str> = findings.as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["AA-10s", "AA-10", "AA-10b", "AA-5a", "AA-8s"]);
}

/// `lowtail experiment fastcloud --backend --quick`: a second cluster with heavy-tailed nodes as
/// the S3 service, a backend-mode gateway in front, the same GETs through (3,3) and (6,3), every one
/// served; the run's tail comparison is judged by the full run (a quick run has 160 reads per code:
/// its p99 is the second-slowest read), so here only that it is judged.
#[test]
fn the_quick_fastcloud_backend_experiment_round_trips_through_a_second_cluster() {
    let _machine = shared_machine();
    let Some(_etcd) = etcd_or_skip("the_quick_fastcloud_backend_experiment_round_trips_through_a_second_cluster")
    else {
        return;
    };
    let (_out, read_json) = run_fastcloud_quick("--backend");
    let backend = read_json("backend.json");
    let runs = backend["runs"].as_array().unwrap();
    assert_eq!(runs.iter().map(|r| r["code"].as_str().unwrap()).collect::<Vec<_>>(), ["(3,3)", "(6,3)"]);
    for run in runs {
        assert!(run["requests"].as_u64().unwrap() > 100, "{run}");
        assert_eq!(run["failed"], 0, "{run}");
    }
    assert_eq!(
        (runs[0]["backend_gets_per_read"].as_f64(), runs[1]["backend_gets_per_read"].as_f64()),
        (Some(3.0), Some(6.0))
    );
    let findings = read_json("findings.json");
    let verdicts: Vec<&serde_json::Value> = findings.as_array().unwrap().iter().map(|f| &f["holds"]).collect();
    assert_eq!(verdicts[0], &serde_json::Value::Bool(true), "every GET served: {findings}");
    assert!(verdicts[1].is_boolean() && verdicts[2].is_null(), "{findings}");
}

/// Runs `lowtail experiment fastcloud MODE --quick` into a temporary folder, which it returns with
/// a reader of its JSON files.
fn run_fastcloud_quick(mode: &str) -> (tempfile::TempDir, impl Fn(&str) -> serde_json::Value) {
    let out = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["experiment", "fastcloud", mode, "--quick", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let dir = out.path().to_path_buf();
    let read_json = move |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
    };
    (out, read_json)
}

/// `lowtail experiment xiang --live --quick`: two latency classes on a loopback fleet, the nodes
/// serving them by reserved shares 0.7 / 0.3, both classes reading at once, every answer checked;
/// then the same under the `jlwo` policy, whose solved shares the nodes run. Judged here: the
/// findings are written, class 2 is not starved (XL-3, XL-6) and every node of a solved rack runs
/// its shares (XL-4). The ratio of service times (XL-1) and the latency order (XL-2, XL-5) are
/// judged by the release run (docs/lab/xiang.md): a debug build's own work per task, which no share
/// scales, moves the ratio by about 10 %.
#[test]
fn the_quick_xiang_live_experiment_serves_the_classes_by_their_shares() {
    let _machine = shared_machine();
    let Some(_etcd) = etcd_or_skip("the_quick_xiang_live_experiment_serves_the_classes_by_their_shares") else {
        return;
    };
    let out = quick_live_run("xiang");
    let live = read_json(out.path(), "live.json");
    let classes = live["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 2, "{live}");
    assert!(classes.iter().all(|c| c["failed"] == 0 && c["gets"].as_u64().unwrap() > 0), "{live}");
    let findings = read_json(out.path(), "findings-live.json");
    let verdicts: Vec<(&str, bool)> = findings
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["id"].as_str().unwrap(), f["holds"].as_bool().unwrap()))
        .collect();
    let ids: Vec<&str> = verdicts.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, ["XL-1", "XL-2", "XL-3", "XL-4", "XL-5", "XL-6"], "{findings}");
    assert!(verdicts[2].1 && verdicts[5].1, "class 2 not starved: {findings}");
    assert!(verdicts[3].1, "the nodes run the shares JLWO solved: {findings}");
    let solved = live["jlwo"]["solved_shares"].as_object().unwrap();
    assert!(!solved.is_empty(), "{live}");
}
