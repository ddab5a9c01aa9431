//! `lowtail experiment hu2017`: the evaluation of Hu et al. (SoCC '17, "Latency Reduction and Load
//! Balancing in Coded Storage Systems") in the simulator at the paper's scale: 90 storage nodes,
//! 2004 data partitions of a WAS-like catalog, a peak hour of requests; all seven read policies on
//! RS(6,3) and the paper's five on LRC(6,2,2), with 3 frontends for Normal and the lazy policies
//! and 8 for the probing ones (§4); plus a latency-vs-load sweep over the same request sequence
//! replayed faster and slower.
//!
//! Owns: the runs of the experiment, and the judgement of the paper's claims from the summaries
//! (each claim with the measured numbers and whether it holds: nothing is tuned to make it hold).
//! Must not: compute statistics (the `report` crate does), or change the models of the simulator.

use std::path::Path;

use anyhow::Context;
use policy::PolicyKind;
use report::{Experiment, RunResult, Summary, SweepPoint, WrittenFiles};
use serde::Serialize;
use sim::{Cluster, SimConfig};
use workload::{Workload, WorkloadConfig};

use crate::parallel::{Progress, run_parallel};
use crate::run_info;

/// The paper's codes with the policies it evaluated on each (§4: LRC without full probing).
pub fn codes() -> [(&'static str, Vec<PolicyKind>); 2] {
    [("rs-6-3", PolicyKind::ALL.to_vec()), ("lrc-6-2-2", PolicyKind::PAPER_LRC.to_vec())]
}

/// Simulated seconds of the headline runs: the paper replays "a typical peak hour".
pub const FULL_DURATION_S: f64 = 3600.0;
/// Simulated seconds of the headline runs with `--quick`.
pub const QUICK_DURATION_S: f64 = 120.0;
/// Simulated seconds (at the headline rate) of the request sequence each sweep point replays
/// (380 000 requests; longer sweeps would take the experiment past two minutes on two cores).
pub const FULL_SWEEP_DURATION_S: f64 = 200.0;
/// The same with `--quick`.
pub const QUICK_SWEEP_DURATION_S: f64 = 30.0;
/// The headline arrival rate, requests per second, as fitted by `lowtail experiment hu2017-fit`
/// (seed 1, 2026-11-22; [`crate::fit`]): the rate at which Normal's latency distribution has the
/// shape of the paper's Normal rows (median 35x the minimum on RS(6,3), p95 6.6x the median). The
/// paper's own rate (about 112 req/s, from its probe counts) does not carry over: it gives no
/// service model for its t2.nano nodes, and the simulator's stand-in nodes are barely loaded
/// there. The sweep shows every other rate.
pub const HEADLINE_RATE_PER_S: f64 = 1900.0;
/// The headline Zipf exponent of object popularity, fitted with the rate. The fit separates rates
/// clearly but not exponents from 0.3 to 0.7 (losses within 7 % of each other); 0.9 and the
/// generator's default 1.1 fit worse, because their hottest nodes saturate before the median
/// request queues.
pub const HEADLINE_ZIPF_EXPONENT: f64 = 0.3;
/// Sweep points as multiples of the headline arrival rate: 238 to 2138 requests per second.
pub const SWEEP_FACTORS: [f64; 9] = [0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.125];

/// How to run the experiment.
#[derive(Clone, Debug)]
pub struct Hu2017Options {
    /// Short runs (seconds of wall time) instead of a peak hour.
    pub quick: bool,
    /// Seed of the workload and of every run.
    pub seed: u64,
    /// Worker threads.
    pub threads: usize,
    /// Also write the headline runs' records as CSV.
    pub records_csv: bool,
    /// Also write PNGs beside the SVG plots.
    pub png: bool,
    /// Multiples of the headline rate to sweep (empty: no sweep).
    pub sweep_factors: Vec<f64>,
    /// Overrides the headline runs' simulated duration (seconds).
    pub duration_s: Option<f64>,
    /// Overrides the sweep's simulated duration at the headline rate (seconds).
    pub sweep_duration_s: Option<f64>,
    /// Overrides the headline arrival rate (requests per second; default [`HEADLINE_RATE_PER_S`]).
    pub rate_per_s: Option<f64>,
    /// Overrides the Zipf exponent of popularity (default [`HEADLINE_ZIPF_EXPONENT`]).
    pub zipf_exponent: Option<f64>,
}

impl Default for Hu2017Options {
    fn default() -> Self {
        Self {
            quick: false,
            seed: 1,
            threads: 2,
            records_csv: false,
            png: true,
            sweep_factors: SWEEP_FACTORS.to_vec(),
            duration_s: None,
            sweep_duration_s: None,
            rate_per_s: None,
            zipf_exponent: None,
        }
    }
}

/// One claim of the paper, judged on the measured runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// Code the claim was checked on.
    pub code: String,
    /// The claim, as the paper (or the issue quoting it) makes it.
    pub claim: String,
    /// What was measured.
    pub measured: String,
    /// Whether the measurement supports the claim.
    pub holds: bool,
}

/// One claim judged at one rate of the sweep (a row of `findings-sweep.json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepFinding {
    /// The sweep point's arrival rate, requests per second.
    pub rate_per_s: f64,
    /// The claim as judged on that point's runs.
    #[serde(flatten)]
    pub finding: Finding,
}

/// What the experiment produced.
#[derive(Debug)]
pub struct Hu2017Outcome {
    /// The headline runs, in order (RS(6,3) policies, then LRC(6,2,2)).
    pub runs: Vec<RunResult>,
    /// Latency-vs-load points.
    pub sweep: Vec<SweepPoint>,
    /// The paper's claims, judged on the headline runs.
    pub findings: Vec<Finding>,
    /// The same claims judged at every rate of the sweep, in rate order: where in load each holds.
    pub sweep_findings: Vec<SweepFinding>,
    /// The headline arrival rate (requests per second).
    pub rate_per_s: f64,
    /// Requests per headline run.
    pub requests: usize,
    /// Files written.
    pub files: WrittenFiles,
}

/// The simulation config of the headline runs: the simulator's paper-scale defaults with the
/// options' seed, duration and rate.
pub fn headline_config(options: &Hu2017Options) -> anyhow::Result<SimConfig> {
    let mut config = SimConfig { seed: options.seed, ..SimConfig::default() };
    let WorkloadConfig::WasLike(was) = &mut config.workload else {
        anyhow::bail!("the simulator's default workload is not the WAS-like generator")
    };
    was.duration_s = options.duration_s.unwrap_or(if options.quick { QUICK_DURATION_S } else { FULL_DURATION_S });
    was.rate_per_s = options.rate_per_s.unwrap_or(HEADLINE_RATE_PER_S);
    was.zipf_exponent = options.zipf_exponent.unwrap_or(HEADLINE_ZIPF_EXPONENT);
    config.validate()?;
    Ok(config)
}

fn rate_of(config: &SimConfig) -> f64 {
    match &config.workload {
        WorkloadConfig::WasLike(was) => was.rate_per_s,
        _ => unreachable!("headline_config makes a WAS-like workload"),
    }
}

#[derive(Clone, Copy, Debug)]
struct Job {
    code: usize,
    policy: PolicyKind,
    /// `None`: a headline run; `Some(i)`: sweep point `i`.
    sweep: Option<usize>,
}

/// Runs the experiment and writes its results folder under `out_dir`.
pub fn run(
    options: &Hu2017Options,
    out_dir: &Path,
    progress: &(dyn Fn(Progress) + Sync),
) -> anyhow::Result<Hu2017Outcome> {
    for &factor in &options.sweep_factors {
        anyhow::ensure!(factor.is_finite() && factor > 0.0, "sweep factor {factor} must be positive");
    }
    let config = headline_config(options)?;
    let rate = rate_of(&config);
    // The sweep replays one shorter request sequence at each rate (common random numbers).
    let mut sweep_config = config.clone();
    if let WorkloadConfig::WasLike(was) = &mut sweep_config.workload {
        was.duration_s = options.sweep_duration_s.unwrap_or(if options.quick {
            QUICK_SWEEP_DURATION_S
        } else {
            FULL_SWEEP_DURATION_S
        });
    }
    // The two sequences are built side by side: each is a serial pass over its requests.
    let (headline, sweep_base) = std::thread::scope(|scope| {
        let sweep = scope.spawn(|| {
            (!options.sweep_factors.is_empty()).then(|| sweep_config.workload.build(config.seed)).transpose()
        });
        let headline = config.workload.build(config.seed);
        (headline, sweep.join().expect("building a workload does not panic"))
    });
    let headline = headline.context("building the headline workload")?;
    let sweep_base = sweep_base.context("building the sweep workload")?;
    let sweep_workloads: Vec<Workload> = match &sweep_base {
        Some(base) => options.sweep_factors.iter().map(|factor| base.with_time_scale(1.0 / factor)).collect(),
        None => Vec::new(),
    };
    let codes = codes();
    let mut configs = Vec::new();
    let mut clusters = Vec::new();
    for (code, _) in &codes {
        let code_config = SimConfig { code: (*code).to_string(), ..config.clone() };
        clusters.push(Cluster::build(&code_config, headline.partitions).context("building the cluster")?);
        configs.push(code_config);
    }
    let mut jobs = Vec::new();
    for sweep in std::iter::once(None).chain((0..sweep_workloads.len()).map(Some)) {
        for (code, (_, policies)) in codes.iter().enumerate() {
            jobs.extend(policies.iter().map(|&policy| Job { code, policy, sweep }));
        }
    }
    let records_dir = out_dir.join("records");
    let results = run_parallel(
        &jobs,
        options.threads,
        |job| match job.sweep {
            None => format!("{} {}", codes[job.code].0, job.policy.name()),
            Some(i) => {
                format!("{} {} at {:.0} req/s", codes[job.code].0, job.policy.name(), rate * options.sweep_factors[i])
            }
        },
        |job| -> anyhow::Result<RunResult> {
            let config = &configs[job.code];
            let (workload, job_rate) = match job.sweep {
                None => (&headline, rate),
                Some(i) => (&sweep_workloads[i], rate * options.sweep_factors[i]),
            };
            let output = sim::run(config, &clusters[job.code], job.policy, workload);
            let info = run_info(config, &output, Some(job_rate));
            if options.records_csv && job.sweep.is_none() {
                report::write_records_csv(&records_dir, &info, &output.records)?;
            }
            Ok(RunResult::from_log(&output.records, &info))
        },
        progress,
    );
    let mut runs = Vec::new();
    let mut sweep = Vec::new();
    // Each sweep point's summaries, so the claims can be judged at every rate as at the headline.
    let mut sweep_summaries: Vec<Vec<Summary>> = vec![Vec::new(); sweep_workloads.len()];
    for (job, result) in jobs.iter().zip(results) {
        let result = result?;
        match job.sweep {
            None => runs.push(result),
            Some(i) => {
                let x = result.summary.run.arrival_rate_per_s.expect("sweep runs carry their rate");
                sweep.push(SweepPoint::from_summary(&result.summary, x));
                sweep_summaries[i].push(result.summary);
            }
        }
    }
    let headline_summaries: Vec<&Summary> = runs.iter().map(|run| &run.summary).collect();
    let findings = judge(&headline_summaries);
    let mut sweep_findings = Vec::new();
    for (factor, summaries) in options.sweep_factors.iter().zip(&sweep_summaries) {
        let summaries: Vec<&Summary> = summaries.iter().collect();
        let rate_per_s = rate * factor;
        sweep_findings.extend(judge(&summaries).into_iter().map(|finding| SweepFinding { rate_per_s, finding }));
    }
    sweep_findings.sort_by(|a, b| a.rate_per_s.total_cmp(&b.rate_per_s));
    let mut text = findings_text(&findings, rate, headline.requests.len(), options);
    append_sweep_findings(&mut text, &sweep_findings);
    let title = "hu2017: proactive degraded reads (Hu et al., SoCC '17), simulated at paper scale";
    let experiment = Experiment {
        title,
        runs: &runs,
        sweep: &sweep,
        sweep_x_label: "arrival rate (requests/s)",
        findings: &text,
        log_x: true,
        png: options.png,
        links: &[],
    };
    let mut files = report::write_experiment(out_dir, &experiment)?;
    let findings_json = serde_json::to_string_pretty(&findings)? + "\n";
    std::fs::write(out_dir.join("findings.json"), findings_json).context("writing findings.json")?;
    files.files.push("findings.json".into());
    let sweep_findings_json = serde_json::to_string_pretty(&sweep_findings)? + "\n";
    std::fs::write(out_dir.join("findings-sweep.json"), sweep_findings_json).context("writing findings-sweep.json")?;
    files.files.push("findings-sweep.json".into());
    Ok(Hu2017Outcome {
        runs,
        sweep,
        findings,
        sweep_findings,
        rate_per_s: rate,
        requests: headline.requests.len(),
        files,
    })
}

/// Mean node utilisation at which a run counts as overloaded in the findings' words.
const OVERLOADED_UTILISATION: f64 = 0.98;

/// Percentage change from `base` to `value` (negative = a cut).
pub(crate) fn change(base: f64, value: f64) -> f64 {
    if base > 0.0 { (value / base - 1.0) * 100.0 } else { 0.0 }
}

/// The paper's claims (§4.1, §4.2, Tables 1 and 2, and the thresholds issue 4 sets on them),
/// judged on each code's runs at one load (the headline's, or one sweep point's). A claim whose
/// policies did not run is skipped.
pub fn judge(summaries: &[&Summary]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut codes: Vec<&str> = Vec::new();
    for summary in summaries {
        if !codes.contains(&summary.run.code.as_str()) {
            codes.push(&summary.run.code);
        }
    }
    for code in codes {
        let get = |policy: PolicyKind| -> Option<&Summary> {
            summaries
                .iter()
                .copied()
                .find(|s| s.run.code == code && s.run.policy == policy.name() && s.request_latency.is_some())
        };
        let latency = |s: &Summary| s.request_latency.expect("filtered on presence");
        let mut add = |claim: &str, measured: String, holds: bool| {
            findings.push(Finding { code: code.to_string(), claim: claim.to_string(), measured, holds });
        };
        if let (Some(normal), Some(pw2)) = (get(PolicyKind::Normal), get(PolicyKind::LmlfPw2)) {
            let (n, p) = (latency(normal), latency(pw2));
            let median_cut = -change(n.median_s, p.median_s);
            let p95_cut = -change(n.p95_s, p.p95_s);
            add(
                "LMLF-PW2 cuts the median request latency by at least 40 % versus Normal",
                format!("median {:.4} s vs {:.4} s: cut {median_cut:.1} %", p.median_s, n.median_s),
                median_cut >= 40.0,
            );
            add(
                "LMLF-PW2 cuts the 95th-percentile request latency by at least 70 % versus Normal",
                format!("p95 {:.4} s vs {:.4} s: cut {p95_cut:.1} %", p.p95_s, n.p95_s),
                p95_cut >= 70.0,
            );
        }
        if let (Some(lmlf), Some(llf)) = (get(PolicyKind::Lmlf), get(PolicyKind::Llf))
            && let (Some(a), Some(b)) = (&lmlf.task_latency, &llf.task_latency)
        {
            add(
                "LMLF has lower task latency than LLF",
                format!("mean task latency {:.4} s vs {:.4} s", a.mean_s, b.mean_s),
                a.mean_s < b.mean_s,
            );
        }
        for (sampled, full) in [(PolicyKind::LmlfPw2, PolicyKind::Lmlf), (PolicyKind::LlfPw2, PolicyKind::Llf)] {
            if let (Some(s), Some(f)) = (get(sampled), get(full)) {
                let excess = change(latency(f).mean_s, latency(s).mean_s);
                // A claim that holds only because full probing collapsed says so: full probing
                // that sends too many degraded reads can overload every node.
                let overloaded = match f.utilisation_mean {
                    Some(load) if load >= OVERLOADED_UTILISATION => {
                        format!("; {} overloads the nodes here (mean node load {load:.3})", full.name())
                    }
                    _ => String::new(),
                };
                add(
                    &format!("{} is within 10 % of {} (mean request latency)", sampled.name(), full.name()),
                    format!("{:.4} s vs {:.4} s: {excess:+.1} %{overloaded}", latency(s).mean_s, latency(f).mean_s),
                    excess <= 10.0,
                );
            }
        }
        if let (Some(opt), Some(lazy)) = (get(PolicyKind::OptLazy), get(PolicyKind::LmlfLazy)) {
            let (o, l) = (latency(opt), latency(lazy));
            let (op, lp) = (opt.probes_per_s.unwrap_or(0.0), lazy.probes_per_s.unwrap_or(0.0));
            add(
                "Opt-Lazy beats LMLF-Lazy (mean and p95) with far fewer probes/s",
                format!(
                    "mean {:.4} vs {:.4} s, p95 {:.4} vs {:.4} s, probes/s {op:.1} vs {lp:.1}",
                    o.mean_s, l.mean_s, o.p95_s, l.p95_s
                ),
                o.mean_s < l.mean_s && o.p95_s < l.p95_s && op < lp / 2.0,
            );
        }
        let order = [PolicyKind::Normal, PolicyKind::LmlfLazy, PolicyKind::OptLazy, PolicyKind::LmlfPw2];
        let means: Option<Vec<f64>> = order.iter().map(|&p| get(p).map(|s| latency(s).mean_s)).collect();
        if let Some(means) = means {
            let shown: Vec<String> = order.iter().zip(&means).map(|(p, m)| format!("{} {m:.4}", p.name())).collect();
            add(
                "Table ordering of mean request latency: Normal > LMLF-Lazy > Opt-Lazy > LMLF-PW2",
                shown.join(" > "),
                means.windows(2).all(|pair| pair[0] > pair[1]),
            );
        }
    }
    findings
}

fn findings_text(findings: &[Finding], rate: f64, requests: usize, options: &Hu2017Options) -> String {
    let mut text = format!(
        "{requests} requests per headline run at {rate:.0} requests/s (seed {}{}). Each claim of the paper, \
         judged on these runs (nothing is tuned to make a claim hold):",
        options.seed,
        if options.quick { ", --quick: short runs, expect noise" } else { "" }
    );
    append_findings(&mut text, findings);
    text
}

/// Appends one paragraph per finding (`[holds] code: claim. Measured: ...`) to a report's findings.
pub fn append_findings(text: &mut String, findings: &[Finding]) {
    for finding in findings {
        text.push_str(&format!(
            "\n\n[{}] {}: {}. Measured: {}.",
            finding.verdict(),
            finding.code,
            finding.claim,
            finding.measured
        ));
    }
}

/// Appends a paragraph per (code, claim) saying at which of the sweep's rates it holds
/// ([`where_claims_hold`]), so a reader sees where in load each finding of the headline turns.
fn append_sweep_findings(text: &mut String, sweep_findings: &[SweepFinding]) {
    if sweep_findings.is_empty() {
        return;
    }
    text.push_str(
        "\n\nThe same claims at every rate of the sweep (shorter runs: one request sequence replayed at each \
         rate; findings-sweep.json has the numbers):",
    );
    for line in where_claims_hold(sweep_findings) {
        text.push_str("\n\n");
        text.push_str(&line);
    }
    text.push_str(&format!("\n\n{}", every_claim_line(sweep_findings)));
}

/// Says at which of the sweep's rates every claim holds at once, if at any.
pub fn every_claim_line(sweep_findings: &[SweepFinding]) -> String {
    let rates: Vec<String> =
        rates_where_every_claim_holds(sweep_findings).iter().map(|rate| format!("{rate:.0}")).collect();
    if rates.is_empty() {
        "At no rate of the sweep does every claim hold on every code at once.".to_string()
    } else {
        format!("Every claim holds on every code at once at {} requests/s.", rates.join(", "))
    }
}

/// One line per (code, claim), in first-seen order: the sweep rates at which the claim holds and
/// those at which it does not (`rs-6-3: <claim>. Holds at 950, 1188 requests/s; does not hold at 238.`).
pub fn where_claims_hold(sweep_findings: &[SweepFinding]) -> Vec<String> {
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for row in sweep_findings {
        let key = (row.finding.code.as_str(), row.finding.claim.as_str());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys.into_iter()
        .map(|(code, claim)| {
            let rates = |holds: bool| -> Vec<String> {
                sweep_findings
                    .iter()
                    .filter(|r| r.finding.code == code && r.finding.claim == claim && r.finding.holds == holds)
                    .map(|r| format!("{:.0}", r.rate_per_s))
                    .collect()
            };
            let (holding, failing) = (rates(true), rates(false));
            let verdict = match (holding.is_empty(), failing.is_empty()) {
                (false, true) => "Holds at every rate".to_string(),
                (true, _) => "Holds at no rate".to_string(),
                (false, false) => {
                    format!("Holds at {} requests/s; does not hold at {}", holding.join(", "), failing.join(", "))
                }
            };
            format!("{code}: {claim}. {verdict}.")
        })
        .collect()
}

/// The sweep's rates at which every claim judged there holds, on every code at once.
pub fn rates_where_every_claim_holds(sweep_findings: &[SweepFinding]) -> Vec<f64> {
    let mut rates: Vec<f64> = Vec::new();
    for row in sweep_findings {
        if !rates.contains(&row.rate_per_s) {
            rates.push(row.rate_per_s);
        }
    }
    rates.retain(|&rate| sweep_findings.iter().filter(|r| r.rate_per_s == rate).all(|r| r.finding.holds));
    rates
}

impl Finding {
    /// `holds` or `does not hold`.
    pub fn verdict(&self) -> &'static str {
        if self.holds { "holds" } else { "does not hold" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> Hu2017Options {
        Hu2017Options {
            quick: true,
            seed,
            threads: 2,
            png: false,
            sweep_factors: vec![0.5, 1.0],
            duration_s: Some(4.0),
            sweep_duration_s: Some(2.0),
            ..Hu2017Options::default()
        }
    }

    #[test]
    fn the_same_seed_writes_a_byte_identical_summary_and_another_seed_does_not() {
        let quiet = |_: Progress| {};
        let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let a = run(&small(5), dirs[0].path(), &quiet).unwrap();
        let b = run(&Hu2017Options { threads: 1, ..small(5) }, dirs[1].path(), &quiet).unwrap();
        let c = run(&small(6), dirs[2].path(), &quiet).unwrap();
        let summary = |dir: &tempfile::TempDir| std::fs::read(dir.path().join("summary.json")).unwrap();
        assert_eq!(summary(&dirs[0]), summary(&dirs[1]), "same seed, different thread counts");
        assert_ne!(summary(&dirs[0]), summary(&dirs[2]), "another seed");
        // 7 policies on RS(6,3) and the paper's 5 on LRC(6,2,2); 2 sweep points of each.
        assert_eq!(a.runs.len(), 12);
        assert_eq!(a.sweep.len(), 24);
        assert_eq!(b.findings, a.findings);
        assert!(!c.findings.is_empty());
        let rows: serde_json::Value = serde_json::from_slice(&summary(&dirs[0])).unwrap();
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), 12);
        for row in rows {
            for field in
                ["code", "policy", "requests", "mean", "median", "p95", "p99", "max", "task_mean", "probes_per_s"]
            {
                assert!(row.get(field).is_some(), "summary row lacks {field}: {row}");
            }
        }
        // Every claim judged at both sweep rates, in rate order, as the headline's are.
        assert_eq!(a.sweep_findings.len(), 2 * a.findings.len());
        assert!(a.sweep_findings.windows(2).all(|w| w[0].rate_per_s <= w[1].rate_per_s));
        let headline_rate = a.rate_per_s;
        assert_eq!(a.sweep_findings[0].rate_per_s, headline_rate * 0.5);
        assert_eq!(b.sweep_findings, a.sweep_findings);
        for file in ["report.html", "tables.md", "findings.json", "findings-sweep.json", "sweep.json"] {
            assert!(dirs[0].path().join(file).is_file(), "{file} written");
        }
    }

    #[test]
    fn where_claims_hold_lists_the_rates_of_each_verdict_per_code_and_claim() {
        let row = |rate_per_s: f64, code: &str, claim: &str, holds: bool| SweepFinding {
            rate_per_s,
            finding: Finding { code: code.into(), claim: claim.into(), measured: String::new(), holds },
        };
        let rows = [
            row(100.0, "rs-6-3", "a", false),
            row(100.0, "rs-6-3", "b", true),
            row(100.0, "lrc-6-2-2", "a", true),
            row(200.0, "rs-6-3", "a", true),
            row(200.0, "rs-6-3", "b", true),
            row(200.0, "lrc-6-2-2", "a", false),
            row(300.0, "rs-6-3", "a", true),
        ];
        assert_eq!(
            where_claims_hold(&rows),
            [
                "rs-6-3: a. Holds at 200, 300 requests/s; does not hold at 100.",
                "rs-6-3: b. Holds at every rate.",
                "lrc-6-2-2: a. Holds at 100 requests/s; does not hold at 200.",
            ]
        );
        assert!(where_claims_hold(&[]).is_empty());
        // 300 has only claims that hold; 100 and 200 each have one that fails.
        assert_eq!(rates_where_every_claim_holds(&rows), [300.0]);
        assert_eq!(every_claim_line(&rows), "Every claim holds on every code at once at 300 requests/s.");
        let failing: Vec<SweepFinding> = rows.iter().filter(|r| r.rate_per_s < 300.0).cloned().collect();
        assert!(rates_where_every_claim_holds(&failing).is_empty());
        assert_eq!(where_claims_hold(&failing[..1]), ["rs-6-3: a. Holds at no rate."]);
    }

    #[test]
    fn judgement_reads_the_numbers_it_is_given() {
        let quiet = |_: Progress| {};
        let dir = tempfile::tempdir().unwrap();
        let outcome = run(&Hu2017Options { sweep_factors: vec![], ..small(9) }, dir.path(), &quiet).unwrap();
        assert!(outcome.sweep.is_empty());
        let mut runs = outcome.runs.clone();
        // Make Normal 10x slower than everything: the cut claims must then hold.
        for run in &mut runs {
            if run.summary.run.policy == "normal"
                && let Some(latency) = run.summary.request_latency.as_mut()
            {
                latency.median_s *= 100.0;
                latency.p95_s *= 100.0;
                latency.mean_s *= 100.0;
            }
        }
        let judged = |runs: &[RunResult]| judge(&runs.iter().map(|r| &r.summary).collect::<Vec<_>>());
        let findings = judged(&runs);
        let cut = findings.iter().filter(|f| f.claim.contains("cuts the")).collect::<Vec<_>>();
        assert_eq!(cut.len(), 4, "two cut claims per code");
        assert!(cut.iter().all(|f| f.holds), "{cut:?}");
        // And 100x faster: they must fail.
        for run in &mut runs {
            if run.summary.run.policy == "normal"
                && let Some(latency) = run.summary.request_latency.as_mut()
            {
                latency.median_s /= 10_000.0;
                latency.p95_s /= 10_000.0;
            }
        }
        assert!(judged(&runs).iter().filter(|f| f.claim.contains("cuts the")).all(|f| !f.holds));
    }
}
