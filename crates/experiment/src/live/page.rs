//! The live experiment's results folder: the report crate's folder of the live runs (tables, plots,
//! `report.html`, `summary.json` with `sim_median`, `sim_p95` and `sim_p99` added to each row), the
//! simulator's own folder under `sim/`, `sim_vs_live.html` (linked from `report.html`), and
//! `findings.json`, `slow_node.json`, `timeout_sensitivity.json`, `calibration.json`, `regime.json`
//! (when the exponent or the service scale was fitted).
//!
//! Owns: the sim-vs-live page's markup and the extra JSON files. Must not: compute statistics (every
//! number comes from a `report` summary or the calibration) or write a file outside the folder.

use crate::live::regime::RegimeFit;
use crate::live::{CodeRuns, LiveOptions, LiveOutcome, Regime, SlowNodeRow, TimeoutRow};
use anyhow::Context;
use report::{Experiment, RunInfo, RunResult};
use std::fmt::Write as _;
use std::path::Path;

/// The sim-vs-live page's file name.
pub const PAGE: &str = "sim_vs_live.html";

fn json_file(dir: &Path, name: &str, value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)? + "\n";
    std::fs::write(dir.join(name), text).with_context(|| format!("writing {}", dir.join(name).display()))
}

fn findings_text(outcome: &LiveOutcome, options: &LiveOptions) -> String {
    let mut text = format!(
        "Live: {} requests per run at {:.0} requests/s over {} gateways, seed {}, Zipf {}, nodes at service scale {} \
         ({}){}; gateway-side records (arrival at the gateway to its last byte). The simulator replays the same \
         sequence over the placement read back from etcd, calibrated from these records; see {PAGE}.",
        outcome.requests,
        outcome.rate_per_s,
        super::GATEWAYS,
        options.seed,
        outcome.zipf_exponent,
        outcome.service_scale,
        if outcome.regime.fitted() {
            format!("fitted: {}; regime.json", regime_text(&outcome.regime))
        } else {
            "given".to_owned()
        },
        if options.quick { ", --quick: short runs, expect noise" } else { "" }
    );
    crate::hu2017::append_findings(&mut text, &outcome.findings);
    text
}

/// Writes the whole folder.
pub fn write(
    out_dir: &Path,
    options: &LiveOptions,
    outcome: &LiveOutcome,
    measured: &[CodeRuns],
) -> anyhow::Result<()> {
    let live: Vec<RunResult> = outcome.pairs.iter().map(|p| p.live.clone()).collect();
    let sim: Vec<RunResult> = outcome.pairs.iter().map(|p| p.sim.clone()).collect();
    let findings = findings_text(outcome, options);
    report::write_experiment(
        out_dir,
        &Experiment {
            title: "hu2017 live: the read policies of Hu et al. on a loopback cluster",
            runs: &live,
            sweep: &[],
            sweep_x_label: "arrival rate (requests/s)",
            findings: &findings,
            log_x: true,
            png: options.png,
            links: &[(PAGE, "simulator vs live"), ("sim/report.html", "simulator report")],
        },
    )?;
    report::write_experiment(
        &out_dir.join("sim"),
        &Experiment {
            title: "hu2017 live: the simulator on the live cluster's configuration, calibrated from its records",
            runs: &sim,
            sweep: &[],
            sweep_x_label: "arrival rate (requests/s)",
            findings: "The identical configuration of the live runs (placement, request sequence, frontends) in the \
                       simulator, its node and frontend models fitted on the live records (calibration.json).",
            log_x: true,
            png: options.png,
            links: &[],
        },
    )?;
    if options.records_csv {
        for code_runs in measured {
            for run in &code_runs.runs {
                let mut log = model::RecordLog::with_capacity(run.records.len(), 0);
                run.records.iter().for_each(|r| log.push_record(r));
                let info = RunInfo::new(
                    &code_runs.code,
                    run.policy.name(),
                    super::GATEWAYS as u32,
                    super::NODES as u32,
                    options.seed,
                );
                report::write_records_csv(&out_dir.join("records"), &info, &log)?;
            }
        }
    }
    add_sim_columns(out_dir, outcome)?;
    json_file(out_dir, "findings.json", &outcome.findings)?;
    json_file(out_dir, "slow_node.json", &outcome.slow_node)?;
    json_file(out_dir, "timeout_sensitivity.json", &outcome.timeout_sensitivity)?;
    let calibrations: Vec<serde_json::Value> =
        outcome.calibrations.iter().map(|(code, c)| serde_json::json!({ "code": code, "calibration": c })).collect();
    json_file(out_dir, "calibration.json", &calibrations)?;
    if outcome.regime.fitted() {
        json_file(out_dir, "regime.json", &outcome.regime)?;
        regime_plot(out_dir, &outcome.regime, options.png)?;
    }
    sim_vs_live_plot(out_dir, outcome, options.png)?;
    std::fs::write(out_dir.join(PAGE), page(outcome, &findings)).with_context(|| format!("writing {PAGE}"))
}

/// `plots/sim-vs-live.svg`: per code, each policy's simulated p50, p95 and p99 over its live one, and
/// the diagonal where they agree.
fn sim_vs_live_plot(out_dir: &Path, outcome: &LiveOutcome, png: bool) -> anyhow::Result<()> {
    let mut panels = Vec::new();
    for code in codes(outcome) {
        let pairs: Vec<(report::LatencyStats, report::LatencyStats)> = outcome
            .pairs
            .iter()
            .filter(|p| p.live.summary.run.code == code)
            .filter_map(|p| p.live.summary.request_latency.zip(p.sim.summary.request_latency))
            .collect();
        let mut lines = Vec::new();
        let mut largest: f64 = 0.0;
        for (name, pick) in [
            ("p50", (|l: &report::LatencyStats| l.median_s) as fn(&report::LatencyStats) -> f64),
            ("p95", |l| l.p95_s),
            ("p99", |l| l.p99_s),
        ] {
            let mut points: Vec<(f64, f64)> = pairs.iter().map(|(live, sim)| (pick(live), pick(sim))).collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            largest = points.iter().fold(largest, |m, &(x, y)| m.max(x).max(y));
            lines.push((format!("{name} (one point per policy)"), points));
        }
        lines.push(("sim = live".to_owned(), vec![(0.0, 0.0), (largest, largest)]));
        panels.push(report::LinePanel { caption: code.to_owned(), y_label: "simulated latency (s)".to_owned(), lines });
    }
    report::write_line_panels(
        &out_dir.join("plots"),
        "sim-vs-live",
        "The simulator against live: request latency percentiles per policy",
        "live latency (s)",
        &panels,
        png,
    )?;
    Ok(())
}

/// What the regime fits chose, in a sentence: the exponent on the stand-in, the scale on the live
/// placement, each with its loss and whether it is at the edge of its grid.
pub fn regime_text(regime: &Regime) -> String {
    let edge = |fit: &RegimeFit| if fit.at_edge() { ", at the edge of the grid" } else { "" };
    let mut parts = Vec::new();
    if let Some(fit) = &regime.stand_in {
        let chosen = fit.chosen();
        parts.push(format!(
            "Zipf {} (with scale {}) on the simulated stand-in, loss {:.3}{}",
            chosen.zipf_exponent,
            chosen.scale,
            chosen.loss,
            edge(fit)
        ));
    }
    if let Some(fit) = &regime.live_placement {
        let chosen = fit.chosen();
        let units: Vec<String> = chosen.normal.iter().map(|n| format!("{} {}", n.code, n.units)).collect();
        parts.push(format!(
            "service scale {} ({} µs per task + bytes at {:.2} MB/s) on the live placement (data units: {}), loss {:.3}{}",
            chosen.scale,
            chosen.overhead_us,
            chosen.rate_bytes_per_s / 1e6,
            units.join(", "),
            chosen.loss,
            edge(fit)
        ));
    }
    parts.join("; then ")
}

/// `plots/regime-fit.svg`: each fit's loss over the service scale (the stand-in's one line per
/// exponent, the live placement's one line), and Normal's node load over the scale in the fit that
/// chose the scale.
fn regime_plot(out_dir: &Path, regime: &Regime, png: bool) -> anyhow::Result<()> {
    let mut losses = Vec::new();
    for fit in [&regime.stand_in, &regime.live_placement].into_iter().flatten() {
        for (index, exponent) in fit.zipf_exponents.iter().enumerate() {
            let points = fit.row(index).iter().map(|p| (p.scale, p.loss.min(10.0))).collect();
            losses.push((format!("{}, Zipf {exponent}", fit.ground), points));
        }
    }
    let Some(deciding) = regime.live_placement.as_ref().or(regime.stand_in.as_ref()) else {
        return Ok(());
    };
    let chosen = deciding.chosen();
    let chosen_row = deciding.row(deciding.chosen_exponent_index());
    let mut loads = Vec::new();
    for (index, normal) in chosen.normal.iter().enumerate() {
        let points = chosen_row.iter().filter_map(|p| p.normal.get(index)?.load.map(|load| (p.scale, load))).collect();
        loads.push((format!("Normal on {}", normal.code), points));
    }
    let panels = [
        report::LinePanel {
            caption: format!(
                "loss (capped at 10) per fit and Zipf exponent; chosen: Zipf {}, scale {} ({})",
                chosen.zipf_exponent, chosen.scale, deciding.ground
            ),
            y_label: "squared log errors".to_owned(),
            lines: losses,
        },
        report::LinePanel {
            // Legends are drawn in the first panel only: say here which line is which.
            caption: format!(
                "Normal's mean node utilisation at Zipf {} ({}): RS(6,3) first colour, LRC(6,2,2) second",
                chosen.zipf_exponent, deciding.ground
            ),
            y_label: "load".to_owned(),
            lines: loads,
        },
    ];
    report::write_line_panels(
        &out_dir.join("plots"),
        "regime-fit",
        "Fitting popularity and the nodes' service scale to the paper's Normal rows",
        "service scale (× 10 ms per task + bytes at 2 MB/s)",
        &panels,
        png,
    )?;
    Ok(())
}

/// The codes of the pairs, in run order.
fn codes(outcome: &LiveOutcome) -> Vec<&str> {
    let mut codes: Vec<&str> = Vec::new();
    for pair in &outcome.pairs {
        if !codes.contains(&pair.live.summary.run.code.as_str()) {
            codes.push(&pair.live.summary.run.code);
        }
    }
    codes
}

/// `summary.json` rows get the simulator's `sim_median`, `sim_p95` and `sim_p99` (same unit as
/// `median`, `p95` and `p99`).
fn add_sim_columns(out_dir: &Path, outcome: &LiveOutcome) -> anyhow::Result<()> {
    let path = out_dir.join("summary.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut rows: Vec<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_str(&text).with_context(|| format!("{} is not an array of rows", path.display()))?;
    for row in &mut rows {
        let pair = outcome.pairs.iter().find(|p| {
            row.get("code").and_then(|c| c.as_str()) == Some(p.live.summary.run.code.as_str())
                && row.get("policy").and_then(|c| c.as_str()) == Some(p.live.summary.run.policy.as_str())
        });
        let sim = pair.map(|p| p.sim.summary.row());
        for (field, value) in [
            ("sim_median", sim.as_ref().and_then(|s| s.median)),
            ("sim_p95", sim.as_ref().and_then(|s| s.p95)),
            ("sim_p99", sim.as_ref().and_then(|s| s.p99)),
        ] {
            row.insert(field.to_owned(), serde_json::to_value(value)?);
        }
    }
    json_file(out_dir, "summary.json", &rows)
}

fn ms(seconds: Option<f64>) -> String {
    seconds.map_or_else(|| "–".to_owned(), |s| format!("{:.2}", s * 1e3))
}

fn us(seconds: Option<f64>) -> String {
    seconds.map_or_else(|| "–".to_owned(), |s| format!("{:.1}", s * 1e6))
}

fn ratio(sim: Option<f64>, live: Option<f64>) -> String {
    match (sim, live) {
        (Some(s), Some(l)) if l > 0.0 => format!("{:.2}", s / l),
        _ => "–".to_owned(),
    }
}

fn page(outcome: &LiveOutcome, findings: &str) -> String {
    let mut html = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>hu2017: simulator vs live</title>\n\
         <style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}table{border-collapse:collapse;\
         margin:1em 0}th,td{border:1px solid #bbb;padding:.3em .6em}td{text-align:right}td:first-child{text-align:left}\
         th{background:#eee}</style>\n</head>\n<body>\n<h1>hu2017: simulator vs live</h1>\n\
         <p><a href=\"report.html\">live report</a> · <a href=\"sim/report.html\">simulator report</a></p>\n",
    );
    html.push_str(
        "<p><img src=\"plots/sim-vs-live.svg\" alt=\"simulated over live latency percentiles\" width=\"100%\"></p>\n",
    );
    if outcome.regime.fitted() {
        let _ = writeln!(
            html,
            "<h2>Regime</h2>\n<p>Popularity Zipf {} and the nodes at service scale {}, fitted to the shape of the \
             paper's Normal rows (Normal only, simulated): {} (regime.json).</p>\n<p><img src=\"plots/regime-fit.svg\" \
             alt=\"regime fit\" width=\"100%\"></p>",
            outcome.zipf_exponent,
            outcome.service_scale,
            report::escape_html(&regime_text(&outcome.regime)),
        );
    }
    for code in codes(outcome) {
        let _ = writeln!(
            html,
            "<h2>{}</h2>\n<table>\n<tr><th>policy</th><th>live p50 ms</th><th>live p95 ms</th><th>live p99 ms</th>\
             <th>sim p50 ms</th><th>sim p95 ms</th><th>sim p99 ms</th><th>sim/live p50</th><th>sim/live p95</th>\
             <th>sim/live p99</th><th>decision p99 µs</th><th>its CPU p99 µs</th><th>host busy / steal %</th><th>client failures</th><th>records dropped</th></tr>",
            report::escape_html(code)
        );
        for pair in outcome.pairs.iter().filter(|p| p.live.summary.run.code == code) {
            let live = pair.live.summary.request_latency;
            let sim = pair.sim.summary.request_latency;
            let get = |l: Option<report::LatencyStats>, f: fn(&report::LatencyStats) -> f64| l.as_ref().map(f);
            let (lm, l95, l99) = (get(live, |l| l.median_s), get(live, |l| l.p95_s), get(live, |l| l.p99_s));
            let (sm, s95, s99) = (get(sim, |l| l.median_s), get(sim, |l| l.p95_s), get(sim, |l| l.p99_s));
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                report::escape_html(&pair.live.summary.run.policy),
                ms(lm),
                ms(l95),
                ms(l99),
                ms(sm),
                ms(s95),
                ms(s99),
                ratio(sm, lm),
                ratio(s95, l95),
                ratio(s99, l99),
                us(pair.decision_p99_s),
                us(pair.decision_cpu_p99_s),
                pair.host.map_or_else(|| "–".to_owned(), |h| format!("{:.0} / {:.0}", h.busy * 100.0, h.steal * 100.0)),
                pair.client_failed,
                pair.dropped
            );
        }
        html.push_str("</table>\n");
        if let Some((_, c)) = outcome.calibrations.iter().find(|(c, _)| c == code) {
            let _ = writeln!(
                html,
                "<p>Calibrated from {} live requests ({} finished tasks): per task {:.0} µs + bytes at {:.2} MB/s \
                 (fit RMS {:.0} µs), one-way network {:.0} µs, decision {:.0} µs + {:.0} µs per probe, probe round trip \
                 {:.0} µs.</p>",
                c.requests,
                c.tasks,
                c.task_overhead_us,
                c.rate_bytes_per_s / 1e6,
                c.service_fit_rms_us,
                c.network_latency_us,
                c.decision_us,
                c.per_probe_us,
                c.probe_rtt_us
            );
        }
    }
    slow_table(&mut html, &outcome.slow_node);
    timeout_table(&mut html, &outcome.timeout_sensitivity);
    html.push_str("<h2>Findings</h2>\n");
    for paragraph in findings.split("\n\n") {
        let _ = writeln!(html, "<p>{}</p>", report::escape_html(paragraph.trim()));
    }
    html.push_str("</body>\n</html>\n");
    html
}

fn slow_table(html: &mut String, rows: &[SlowNodeRow]) {
    if rows.is_empty() {
        return;
    }
    html.push_str(
        "<h2>A node made slower during the run</h2>\n<p>Both p99s are over the requests that arrived from \
         the slowdown on (in the healthy run: the same requests), so the healthy stretch before it does not dilute \
         the comparison.</p>\n<table>\n<tr><th>code</th><th>policy</th><th>node</th>\
         <th>slower by</th><th>from s</th><th>healthy p99 ms</th><th>slowed p99 ms</th><th>ratio</th>\
         <th>simulated ratio</th></tr>\n",
    );
    for row in rows {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}x</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            report::escape_html(&row.code),
            report::escape_html(&row.policy),
            row.node,
            row.factor,
            row.slowed_at_s,
            ms(row.healthy_p99),
            ms(row.slowed_p99),
            row.ratio.map_or_else(|| "–".to_owned(), |r| format!("{r:.2}")),
            row.sim_ratio.map_or_else(|| "–".to_owned(), |r| format!("{r:.2}"))
        );
    }
    html.push_str("</table>\n");
}

fn timeout_table(html: &mut String, rows: &[TimeoutRow]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        html,
        "<h2>Normal's timeout</h2>\n<p>The paper does not publish Normal's timeout; the runs use {} ms. Here Normal \
         runs at other timeouts in the calibrated simulator, against the simulated LMLF-PW2, which does not depend \
         on it. Normal's degraded reads after the timeout add to its load, so the cuts depend on the timeout \
         (timeout_sensitivity.json).</p>\n<table>\n<tr><th>code</th><th>Normal timeout ms</th><th>Normal p50 \
         ms</th><th>Normal p95 ms</th><th>Normal load</th><th>LMLF-PW2 p50 change</th><th>LMLF-PW2 p95 \
         change</th></tr>",
        super::policy_settings().normal_timeout_ms
    );
    for row in rows {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:+.1} %</td><td>{:+.1} %</td></tr>",
            report::escape_html(&row.code),
            row.normal_timeout_ms,
            ms(Some(row.normal_median)),
            ms(Some(row.normal_p95)),
            row.normal_load.map_or_else(|| "–".to_owned(), |load| format!("{load:.2}")),
            row.lmlf_pw2_median_change_pct,
            row.lmlf_pw2_p95_change_pct
        );
    }
    html.push_str("</table>\n");
}
