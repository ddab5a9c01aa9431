//! Reports from small synthetic record logs: statistics against values
//! computed by hand, utilisation from task intervals, "no data" handling,
//! byte-identical output for identical records, the HTML's links, the CSV
//! round trip, and text in the PNGs.

use model::{
    FrontendId, NEVER, NodeId, ObjectId, Outcome, PartitionId, RecordLog, RequestId, RequestRecord, TaskRecord,
    TaskRole,
};
use report::{Experiment, Metric, RunInfo, RunResult, SweepPoint, summarize, write_experiment, write_records_csv};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

const MS: u64 = 1_000_000;

fn request(id: u64, arrival_ms: u64, decided_ms: u64, completion_ms: u64, probes: u32) -> RequestRecord {
    RequestRecord {
        request: RequestId(id),
        frontend: FrontendId((id % 2) as u16),
        object: ObjectId(100 + id),
        partition: PartitionId(id as u32),
        bytes: 100,
        arrival_ns: arrival_ms * MS,
        decision_start_ns: arrival_ms * MS,
        decision_end_ns: decided_ms * MS,
        completion_ns: completion_ms * MS,
        probes,
        probe_wait_ns: 0,
        decision_cpu_ns: 1_000 + id,
        degraded: false,
        timed_out: false,
        outcome: Outcome::Ok,
        class: 0,
        latency_class: 0,
    }
}

fn task(node: u32, role: TaskRole, enqueue_ms: u64, start_ms: Option<u64>, finish_ms: Option<u64>) -> TaskRecord {
    TaskRecord {
        node: NodeId(node),
        unit: node as u8,
        role,
        cancelled: false,
        cancel_ns: NEVER,
        failed: false,
        bytes: 100,
        enqueue_ns: enqueue_ms * MS,
        start_ns: start_ms.map_or(NEVER, |ms| ms * MS),
        finish_ns: finish_ms.map_or(NEVER, |ms| ms * MS),
    }
}

/// Four requests over four nodes (node 3 idle):
/// - r0: arrives 0, decided 1, done 10 ms; one task on node 0 served 1..10.
/// - r1: arrives 10, decided 12, done 30; degraded: node 1 waits 12..14 and
///   serves 14..30, node 2 serves 12..20, node 0's task is cancelled waiting.
/// - r2: arrives 20, decided 20, done 60; node 0 serves 20..60.
/// - r3: arrives 40, decided 41, fails at 50; node 1's task is aborted in
///   service 41..50.
fn hand_log() -> RecordLog {
    let mut log = RecordLog::new();
    log.push(request(0, 0, 1, 10, 3), &[task(0, TaskRole::Normal, 1, Some(1), Some(10))]);
    let mut r1 = request(1, 10, 12, 30, 3);
    r1.degraded = true;
    let mut cancelled = task(0, TaskRole::Normal, 12, None, None);
    cancelled.cancelled = true;
    cancelled.cancel_ns = 22 * MS;
    log.push(
        r1,
        &[
            cancelled,
            task(1, TaskRole::Degraded, 12, Some(14), Some(30)),
            task(2, TaskRole::Degraded, 12, Some(12), Some(20)),
        ],
    );
    log.push(request(2, 20, 20, 60, 0), &[task(0, TaskRole::Normal, 20, Some(20), Some(60))]);
    let mut r3 = request(3, 40, 41, 50, 1);
    r3.outcome = Outcome::Failed;
    r3.timed_out = true;
    let mut aborted = task(1, TaskRole::Normal, 41, Some(41), Some(50));
    aborted.cancelled = true;
    aborted.cancel_ns = 49 * MS;
    log.push(r3, &[aborted]);
    log
}

fn info(code: &str, policy: &str) -> RunInfo {
    RunInfo::new(code, policy, 3, 4, 7)
}

fn close(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() <= 1e-12 * expected.abs()
}

#[test]
fn summary_matches_hand_computed_values() {
    let summary = summarize(&hand_log(), &info("rs-6-3", "normal"));
    assert_eq!((summary.requests, summary.failed, summary.degraded, summary.timed_out), (4, 1, 1, 1));

    // Successful request latencies 10, 20, 40 ms.
    let latency = summary.request_latency.unwrap();
    assert_eq!(latency.count, 3);
    // 70 ms / 3, rounded to the records' nanosecond resolution.
    assert_eq!(latency.mean_s, 0.023333333);
    assert_eq!(
        (latency.min_s, latency.median_s, latency.p95_s, latency.p99_s, latency.max_s),
        (0.01, 0.02, 0.04, 0.04, 0.04)
    );
    // Deviations −13⅓, −3⅓, 16⅔ ms: variance 1400/9 ms².
    assert!(close(latency.var_s2, 1400.0 / 9.0 * 1e-6), "{}", latency.var_s2);

    // Completed tasks 9, 18, 8, 40 ms (cancelled and aborted ones excluded).
    let task = summary.task_latency.unwrap();
    assert_eq!(task.count, 4);
    assert_eq!((task.mean_s, task.median_s, task.max_s), (0.01875, 0.009, 0.04));
    // Started tasks wait 0, 2, 0, 0, 0 ms.
    let waiting = summary.waiting.unwrap();
    assert_eq!((waiting.count, waiting.mean_s, waiting.max_s), (5, 0.0004, 0.002));
    // Controller 1, 2, 0, 1 ms (the failed request was decided too).
    let controller = summary.controller.unwrap();
    assert_eq!((controller.count, controller.mean_s, controller.median_s), (4, 0.001, 0.001));

    // 7 probes over the 40 ms arrival span.
    assert_eq!(summary.probes_per_s, Some(175.0));
    // Periodic refresh probes, carried by no request, come in with the run.
    let mut lazy = info("rs-6-3", "lmlf-lazy");
    lazy.refresh_probes = 13;
    assert_eq!(summarize(&hand_log(), &lazy).probes_per_s, Some(500.0));
    assert_eq!(summary.degraded_fraction, Some(0.25));
    assert_eq!(summary.timed_out_fraction, Some(0.25));
}

#[test]
fn utilisation_comes_from_service_intervals_clipped_to_the_window() {
    let summary = summarize(&hand_log(), &info("rs-6-3", "normal"));
    // Window = arrival span 0..40 ms. Node 0: 1..10 and 20..40 (clipped) =
    // 29 ms; node 1: 14..30 = 16 ms (41..50 is outside); node 2: 12..20;
    // node 3 idle but counted.
    assert_eq!(summary.window_ns, Some((0, 40 * MS)));
    let busy: Vec<f64> = summary.nodes.iter().map(|n| n.busy_fraction).collect();
    assert_eq!(busy, vec![0.725, 0.4, 0.2, 0.0]);
    assert_eq!(summary.utilisation_mean, Some(0.33125));
    assert_eq!(summary.utilisation_max, Some(0.725));
    let node0 = summary.nodes[0];
    assert_eq!((node0.tasks, node0.bytes_enqueued, node0.bytes_served, node0.busy_s), (3, 300, 200, 0.029));

    // An explicit window 0..100 ms sees every interval whole, the aborted
    // service on node 1 included; two slots per node halve the fraction.
    let mut wide = info("rs-6-3", "normal");
    wide.window_ns = Some((0, 100 * MS));
    wide.servers_per_node = 2;
    let summary = summarize(&hand_log(), &wide);
    let busy: Vec<f64> = summary.nodes.iter().map(|n| n.busy_s).collect();
    assert_eq!(busy, vec![0.049, 0.025, 0.008, 0.0]);
    assert_eq!(summary.nodes[0].busy_fraction, 0.245);

    // Nodes named in records beyond node_count are still reported.
    let mut small = info("rs-6-3", "normal");
    small.node_count = 1;
    assert_eq!(summarize(&hand_log(), &small).nodes.len(), 3);
}

#[test]
fn summary_row_has_the_issue_fields_in_order_and_no_nan_without_data() {
    let row = summarize(&hand_log(), &info("lrc-6-2-2", "lmlf-pw2")).row();
    let text = serde_json::to_string(&row).unwrap();
    let leading = [
        "code",
        "policy",
        "requests",
        "mean",
        "median",
        "p95",
        "p99",
        "max",
        "task_mean",
        "probes_per_s",
        "degraded_fraction",
        "frontends",
        "load",
    ];
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
    // serde_json without preserve_order sorts keys; check order in the text.
    let positions: Vec<usize> = leading.iter().map(|k| text.find(&format!("\"{k}\":")).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert!(keys.len() > leading.len());
    assert_eq!(value["code"], "lrc-6-2-2");
    assert_eq!(value["requests"], 4);
    assert_eq!(value["median"], 0.02);
    assert_eq!(value["frontends"], 3);
    assert_eq!(value["load"], 0.33125);

    // Empty log: every statistic is null, nothing is NaN.
    let empty = summarize(&RecordLog::new(), &info("rs-6-3", "normal"));
    assert!(empty.request_latency.is_none() && empty.probes_per_s.is_none());
    let text = serde_json::to_string(&empty.row()).unwrap();
    assert!(!text.contains("NaN") && text.contains("\"mean\":null"), "{text}");
    assert_eq!(empty.nodes.len(), 4);

    // A single request: no arrival span, so no probe rate; all failed: no
    // latency, but the failures are counted.
    let mut log = RecordLog::new();
    let mut failed = request(0, 5, 6, 9, 2);
    failed.outcome = Outcome::Failed;
    log.push(failed, &[]);
    let summary = summarize(&log, &info("rs-6-3", "normal"));
    assert_eq!((summary.failed, summary.probes_per_s, summary.request_latency), (1, None, None));
    assert_eq!(summary.utilisation_mean, None);
}

/// A bigger log with spread latencies, deterministic without an RNG.
fn spread_log(requests: u64, skew: u64) -> RecordLog {
    let mut log = RecordLog::new();
    for id in 0..requests {
        let arrival = id * 3;
        // A multiplicative congruential sequence gives varied latencies.
        let latency = 1 + (id * 7919 + skew * 104_729) % 97;
        let node = (id % 9) as u32;
        let mut record = request(id, arrival, arrival + (id % 3), arrival + latency + 2, (id % 4) as u32);
        record.degraded = id % 5 == 0;
        let start = arrival + 2 + (id % 2);
        let finish = (start + latency / 2 + 1).max(arrival + 3);
        log.push(record, &[task(node, TaskRole::Normal, arrival + 2, Some(start), Some(finish))]);
    }
    log
}

fn experiment_runs() -> Vec<RunResult> {
    let mut runs = Vec::new();
    for (code, policies) in
        [("rs-6-3", ["normal", "lmlf", "lmlf-pw2"]), ("lrc-6-2-2", ["normal", "llf-pw2", "opt-lazy"])]
    {
        for (index, policy) in policies.iter().enumerate() {
            let mut run = RunInfo::new(code, policy, 3, 9, 1);
            run.offered_load = Some(0.7);
            runs.push(RunResult::from_log(&spread_log(300, index as u64), &run));
        }
    }
    runs
}

fn sweep_points(runs: &[RunResult]) -> Vec<SweepPoint> {
    let mut points = Vec::new();
    for run in runs {
        for (step, load) in [0.3, 0.5, 0.7].into_iter().enumerate() {
            let mut point = SweepPoint::from_summary(&run.summary, load);
            point.latency_s_median = point.latency_s_median.map(|v| v * (1.0 + step as f64));
            points.push(point);
        }
    }
    points
}

fn write(dir: &Path, runs: &[RunResult], sweep: &[SweepPoint], png: bool) {
    let experiment = Experiment {
        title: "hu2017 <test>",
        runs,
        sweep,
        sweep_x_label: "offered load (mean utilisation)",
        findings: "LMLF-PW2 wins.\n\nSecond paragraph & <b>escaped</b>.",
        log_x: true,
        png,
        links: &[],
    };
    write_experiment(dir, &experiment).unwrap();
}

fn files_under(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                files.push((name, fs::read(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn same_records_give_byte_identical_files() {
    let runs = experiment_runs();
    let sweep = sweep_points(&runs);
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    write(first.path(), &runs, &sweep, true);
    // Recompute everything from fresh logs, in reverse log order: the
    // statistics must not depend on the order records were emitted in.
    let mut rebuilt = Vec::new();
    for (code, policies) in
        [("rs-6-3", ["normal", "lmlf", "lmlf-pw2"]), ("lrc-6-2-2", ["normal", "llf-pw2", "opt-lazy"])]
    {
        for (index, policy) in policies.iter().enumerate() {
            let log = spread_log(300, index as u64);
            let mut reversed = RecordLog::new();
            for i in (0..log.len()).rev() {
                let record = log.get(i);
                reversed.push(*record.request, record.tasks);
            }
            let mut run = RunInfo::new(code, policy, 3, 9, 1);
            run.offered_load = Some(0.7);
            rebuilt.push(RunResult::from_log(&reversed, &run));
        }
    }
    write(second.path(), &rebuilt, &sweep_points(&rebuilt), true);
    let first_files = files_under(first.path());
    let second_files = files_under(second.path());
    let names: Vec<&String> = first_files.iter().map(|f| &f.0).collect();
    assert!(names.iter().any(|n| n.as_str() == "summary.json"));
    assert!(names.iter().any(|n| n.ends_with("rs-6-3-cdf-request.svg")));
    assert!(names.iter().any(|n| n.ends_with("lrc-6-2-2-sweep.png")));
    assert_eq!(first_files.len(), second_files.len());
    for ((name, bytes), (other_name, other_bytes)) in first_files.iter().zip(&second_files) {
        assert_eq!(name, other_name);
        assert!(bytes == other_bytes, "{name} differs between identical inputs");
    }
    // And a different input does change the summary (the test can fail).
    let mut changed = runs.clone();
    changed[0] = RunResult::from_log(&spread_log(301, 0), &changed[0].summary.run.clone());
    let third = tempfile::tempdir().unwrap();
    write(third.path(), &changed, &sweep, false);
    assert_ne!(
        fs::read(first.path().join("summary.json")).unwrap(),
        fs::read(third.path().join("summary.json")).unwrap()
    );
}

#[test]
fn summary_json_is_one_row_per_run() {
    let runs = experiment_runs();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &runs, &[], false);
    let rows: Vec<report::SummaryRow> =
        serde_json::from_slice(&fs::read(dir.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(rows.len(), 6);
    assert_eq!((rows[0].code.as_str(), rows[0].policy.as_str()), ("rs-6-3", "normal"));
    assert_eq!(rows[3].code, "lrc-6-2-2");
    assert_eq!(rows[0].requests, 300);
    assert_eq!(rows[0].mean, runs[0].summary.request_latency.map(|s| s.mean_s));
    // No sweep: no sweep plot, and the tables have one section per code.
    assert!(!dir.path().join("plots/rs-6-3-sweep.svg").exists());
    let tables = fs::read_to_string(dir.path().join("tables.md")).unwrap();
    assert_eq!(tables.matches("\n## ").count(), 2, "{tables}");
    assert!(tables.contains("| lmlf-pw2 | 300 |"), "{tables}");
    assert_eq!(tables.matches("\n### Task, waiting and controller latency").count(), 2, "{tables}");
    let text = fs::read_to_string(dir.path().join("tables.txt")).unwrap();
    assert!(text.contains("probes/s") && text.contains("opt-lazy"), "{text}");
}

#[test]
fn html_links_every_plot_and_every_link_exists() {
    let runs = experiment_runs();
    let sweep = sweep_points(&runs);
    let dir = tempfile::tempdir().unwrap();
    let log = spread_log(300, 0);
    write_records_csv(&dir.path().join("records"), &runs[0].summary.run, &log).unwrap();
    write(dir.path(), &runs, &sweep, true);
    let html = fs::read_to_string(dir.path().join("report.html")).unwrap();

    let plots: BTreeSet<String> = fs::read_dir(dir.path().join("plots"))
        .unwrap()
        .map(|e| format!("plots/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    // 2 codes × (4 CDFs + 4 box plots + 3 load plots + 1 sweep), SVG and PNG.
    assert_eq!(plots.len(), 2 * 12 * 2, "{plots:?}");
    for plot in &plots {
        assert!(html.contains(&format!("\"{plot}\"")), "report.html does not link {plot}");
    }
    let links: Vec<&str> =
        html.split("href=\"").skip(1).chain(html.split("src=\"").skip(1)).map(|s| &s[..s.find('"').unwrap()]).collect();
    for link in &links {
        if !link.starts_with('#') {
            assert!(dir.path().join(link).is_file(), "report.html links missing {link}");
        }
    }
    assert!(links.contains(&"records/rs-6-3_normal_requests.csv"));
    assert!(!links.contains(&"records/rs-6-3_lmlf_requests.csv"), "records not written are not linked");
    for code in ["rs-6-3", "lrc-6-2-2"] {
        assert!(html.contains(&format!("<section id=\"code-{code}\">")));
    }
    assert!(html.contains("Second paragraph &amp; &lt;b&gt;escaped&lt;/b&gt;."), "findings are escaped");
    assert!(html.contains("hu2017 &lt;test&gt;"));
    assert!(!html.contains("<script"));
}

#[test]
fn records_csv_round_trips() {
    let log = hand_log();
    let dir = tempfile::tempdir().unwrap();
    let files = write_records_csv(dir.path(), &info("rs-6-3", "llf"), &log).unwrap();
    assert!(files.requests.ends_with("rs-6-3_llf_requests.csv"));

    let mut reader = csv::Reader::from_path(&files.requests).unwrap();
    let headers = reader.headers().unwrap().clone();
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), log.len());
    for (row, record) in rows.iter().zip(log.iter()) {
        let r = record.request;
        assert_eq!(row[column("request")].parse::<u64>().unwrap(), r.request.0);
        assert_eq!(row[column("arrival_ns")].parse::<u64>().unwrap(), r.arrival_ns);
        assert_eq!(row[column("completion_ns")].parse::<u64>().unwrap(), r.completion_ns);
        assert_eq!(row[column("probes")].parse::<u32>().unwrap(), r.probes);
        assert_eq!(row[column("degraded")].parse::<bool>().unwrap(), r.degraded);
        assert_eq!(row[column("tasks")].parse::<usize>().unwrap(), record.tasks.len());
        assert_eq!(row[column("probe_wait_ns")].parse::<u64>().unwrap(), r.probe_wait_ns);
        assert_eq!(row[column("decision_cpu_ns")].parse::<u64>().unwrap(), r.decision_cpu_ns);
        assert_eq!(row[column("class")].parse::<u8>().unwrap(), r.class);
    }
    assert_eq!(&rows[3][column("outcome")], "failed");
    assert_eq!(&rows[3][column("latency_ns")], "", "a failed request has no latency");
    assert_eq!(rows[1][column("latency_ns")].parse::<u64>().unwrap(), 20 * MS);

    let mut reader = csv::Reader::from_path(&files.tasks).unwrap();
    let headers = reader.headers().unwrap().clone();
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let tasks: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(tasks.len(), log.all_tasks().len());
    // The join key groups tasks with their request, in plan order.
    let of_r1: Vec<&csv::StringRecord> = tasks.iter().filter(|t| &t[column("request")] == "1").collect();
    assert_eq!(of_r1.len(), 3);
    assert_eq!(&of_r1[0][column("cancelled")], "true");
    assert_eq!(of_r1[0][column("cancel_ns")].parse::<u64>().unwrap(), 22 * MS);
    assert_eq!(&of_r1[1][column("cancel_ns")], "", "a task not cancelled has no cancel time");
    assert_eq!(&of_r1[1][column("failed")], "false");
    assert_eq!(&of_r1[0][column("start_ns")], "", "a time never reached is an empty cell");
    assert_eq!(&of_r1[1][column("role")], "degraded");
    assert_eq!(of_r1[1][column("waiting_ns")].parse::<u64>().unwrap(), 2 * MS);
    assert_eq!(of_r1[2][column("node")].parse::<u32>().unwrap(), 2);
}

#[test]
fn pngs_contain_drawn_text() {
    let runs = experiment_runs();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &runs[..1], &[], true);
    if let Ok(keep) = std::env::var("LOWTAIL_REPORT_KEEP") {
        // For looking at the figures by eye.
        write(Path::new(&keep), &runs, &sweep_points(&runs), true);
    }
    let file = fs::File::open(dir.path().join("plots/rs-6-3-cdf-request.png")).unwrap();
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file)).read_info().unwrap();
    let mut pixels = vec![0; decoder.output_buffer_size()];
    let info = decoder.next_frame(&mut pixels).unwrap();
    assert_eq!((info.width, info.height), (900, 560));
    // The caption band (top 40 rows) holds only the title: dark pixels
    // there are glyphs, which plotters draws only when a font is available.
    let row_bytes = info.width as usize * 3;
    let dark = pixels[..40 * row_bytes].chunks(3).filter(|p| p.iter().all(|&c| c < 100)).count();
    assert!(dark > 200, "no title text in the PNG ({dark} dark pixels)");
}

#[test]
fn bad_experiments_are_refused() {
    let runs = experiment_runs();
    let dir = tempfile::tempdir().unwrap();
    let base = Experiment {
        title: "t",
        runs: &runs,
        sweep: &[],
        sweep_x_label: "load",
        findings: "",
        log_x: false,
        png: false,
        links: &[],
    };
    let none = Experiment { runs: &[], ..base };
    assert!(write_experiment(dir.path(), &none).unwrap_err().to_string().contains("no runs"));
    let duplicated = vec![runs[0].clone(), runs[0].clone()];
    let twice = Experiment { runs: &duplicated, ..base };
    assert!(write_experiment(dir.path(), &twice).unwrap_err().to_string().contains("one run per"));
    // A run without any data still gets a row and a section, with no plots
    // of metrics it has no samples of.
    let empty = vec![RunResult::from_log(&RecordLog::new(), &info("rs-6-3", "normal"))];
    let written = write_experiment(dir.path(), &Experiment { runs: &empty, ..base }).unwrap();
    assert!(written.files.iter().all(|f| !f.to_string_lossy().contains("cdf")), "{written:?}");
    assert!(empty[0].curves(Metric::Request).cdf.is_empty());
    let html = fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(html.contains("<td>—</td>"));
}

#[test]
fn the_navigation_links_other_pages_first_and_escapes_them() {
    let dir = tempfile::tempdir().unwrap();
    let runs = experiment_runs();
    let experiment = Experiment {
        title: "links",
        runs: &runs,
        sweep: &[],
        sweep_x_label: "x",
        findings: "",
        log_x: false,
        png: false,
        links: &[("other.html", "another <page>")],
    };
    write_experiment(dir.path(), &experiment).unwrap();
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(html.contains("<nav><ul>\n<li><a href=\"other.html\">another &lt;page&gt;</a></li>"), "{html}");
}
