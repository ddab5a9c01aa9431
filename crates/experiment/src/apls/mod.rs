//! `lowtail experiment apls`: the evaluation of APLS (Xie et al.) in the simulator, isolated mode
//! (one degraded read at a time, the paper's method): the normal read, lowtail's gateway decode,
//! the traditional read, PPR, ECPipe (EC-A), APLS (ECPipe inside its lists, packets round robin)
//! and lowtail's segmented variant over the paper's grids — RS(10,4) 64 MB units over packet size ×
//! helper bandwidth (Fig. 7), 256 KB and 4 MB units (Fig. 9), RS(6,6) with q = 6 … 11 (Fig. 8) —
//! each latency normalised to the normal read of the same unit, plus the closed forms with no
//! per-packet cost and a per-packet-cost sweep; each finding judged from the runs' outcomes (their
//! latency and per-pair transfer records) with the paper's number beside lowtail's.
//!
//! The setting the paper does not publish (chosen, and swept where it is a number): the requestor
//! (the starter) at 1 500 Mbps as in the paper; helpers' links symmetric (the same limit up and
//! down: the paper's `tc` setup is not given); a hop latency of 100 µs; a per-packet cost of 50 µs
//! at the sender (swept: 0, 10, 50, 200 µs), none at the receiver (a run with 50 µs there too shows
//! the incast the paper names); disks not counted (the paper's formulas). Bandwidths
//! in Mbps of 10^6 bits, sizes in MB of 10^6 bytes (the paper's 5.12 s normal read of 64 MB at 100
//! Mbps).
//!
//! Owns: the choice of runs and the judging. Must not: decide a dataflow (the execution core's) or
//! pick unpublished parameters to make a verdict pass (they are swept).

mod judge;
pub mod live;
pub mod loaded;

use judge::judge_live;

use crate::fastcloud::PaperFinding;
use crate::parallel::{Progress, run_parallel};
use anyhow::Context;
use execution::reconstruct::{Assignment, Dataflow, Inner, Method};
use serde::Serialize;
use sim::network::SitePorts;
use sim::reconstruct::{DiskModel, IsolatedOutcome, ReconstructSetup, run_isolated};
use std::path::{Path, PathBuf};

/// The requestor's bandwidth (the paper's 1 500 Mbps), Mbps.
pub const REQUESTOR_MBPS: f64 = 1_500.0;
/// Hop latency of the stand-in network.
pub const HOP_LATENCY_NS: u64 = 100_000;
/// Per-packet cost at the sender by default.
pub const PER_PACKET_NS: u64 = 50_000;
/// Helper bandwidths of the grids, Mbps (the paper names 100, 200, 800 and 1 500).
pub const HELPER_MBPS: [f64; 5] = [100.0, 200.0, 400.0, 800.0, 1_500.0];
/// Packet sizes of Fig. 7's grid (16 KB to 1 MB).
pub const PACKETS: [u32; 7] = [16_384, 32_768, 65_536, 131_072, 262_144, 524_288, 1_048_576];
/// Per-packet costs of the sweep, ns.
pub const PER_PACKET_SWEEP_NS: [u64; 4] = [0, 10_000, 50_000, 200_000];
/// 64 MB, the paper's unit of Figs. 7 and 8.
pub const UNIT_64_MB: u64 = 64_000_000;

/// Which figure a run belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Part {
    /// Closed forms: no per-packet cost, no hop latency.
    ClosedForm,
    /// Fig. 7: RS(10,4), 64 MB, packet × helper bandwidth.
    Packets,
    /// Fig. 9: RS(10,4), 256 KB and 4 MB units.
    UnitSize,
    /// Fig. 8: RS(6,6), 64 MB, q = 6 … 11 at 100 Mbps.
    Sources,
    /// The per-packet cost sweep (RS(10,4), 64 MB, 100 Mbps).
    PacketCost,
    /// Helpers at the requestor's bandwidth with the per-packet cost paid by receivers too.
    ReceiveCost,
}

/// One isolated read.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Job {
    /// Its figure.
    pub part: Part,
    /// The method.
    pub method: Method,
    /// k of the code (m is q − k + 1 for the sources).
    pub k: u16,
    /// Survivors the setup has (k + m − 1).
    pub survivors: u16,
    /// Unit bytes.
    pub unit_bytes: u64,
    /// Packet bytes.
    pub packet_bytes: u32,
    /// Helpers' bandwidth, Mbps.
    pub helper_mbps: f64,
    /// Per-packet cost at the sender, ns.
    pub per_packet_ns: u64,
    /// Per-packet cost at the receiver, ns.
    pub receive_per_packet_ns: u64,
    /// Hop latency, ns.
    pub hop_latency_ns: u64,
}

/// A run's result.
#[derive(Clone, Debug, Serialize)]
pub struct RunRow {
    /// What ran.
    pub job: Job,
    /// The method's name.
    pub method: String,
    /// The outcome: latency and the per-pair transfer records.
    pub outcome: IsolatedOutcome,
}

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct AplsOptions {
    /// A coarser grid (packets 16 KB, 64 KB, 256 KB, 1 MB; helpers 100, 200, 800, 1 500 Mbps).
    pub quick: bool,
    /// Simulations at once.
    pub threads: usize,
    /// PNG copies of the plots.
    pub png: bool,
}

/// What the experiment produced.
#[derive(Debug)]
pub struct AplsOutcome {
    /// Findings (findings.json).
    pub findings: Vec<PaperFinding>,
    /// The tables, as written to tables.md.
    pub markdown: String,
    /// Files written, relative to the results folder.
    pub files: Vec<PathBuf>,
    /// Reads simulated in isolation.
    pub runs: usize,
}

/// Reads of each loaded-mode run.
fn loaded_reads(options: &AplsOptions) -> usize {
    if options.quick { 1_500 } else { 6_000 }
}

/// Bytes per second of a bandwidth in Mbps (10^6 bits).
fn mbps(megabits_per_s: f64) -> f64 {
    megabits_per_s * 1e6 / 8.0
}

/// The methods of the RS(k, m) grids with q = k + m − 1 sources.
pub fn methods(k: u16, q: u16) -> Vec<Method> {
    vec![
        Method::Normal,
        Method::GatewayDecode,
        Method::Traditional,
        Method::Ppr,
        Method::Ecpipe,
        Method::Apls { q, inner: Inner::Chain, assignment: Assignment::RoundRobin },
        Method::Segmented { q, assignment: Assignment::RoundRobin },
    ]
    .into_iter()
    .filter(|m| m.sources(k) <= q)
    .collect()
}

fn grid(options: &AplsOptions) -> (Vec<u32>, Vec<f64>) {
    if options.quick {
        (vec![16_384, 65_536, 262_144, 1_048_576], vec![100.0, 200.0, 800.0, 1_500.0])
    } else {
        (PACKETS.to_vec(), HELPER_MBPS.to_vec())
    }
}

/// Every read of the experiment, in a fixed order.
pub fn jobs(options: &AplsOptions) -> Vec<Job> {
    let (packets, helpers) = grid(options);
    let base = Job {
        part: Part::Packets,
        method: Method::Normal,
        k: 10,
        survivors: 13,
        unit_bytes: UNIT_64_MB,
        packet_bytes: 65_536,
        helper_mbps: 100.0,
        per_packet_ns: PER_PACKET_NS,
        receive_per_packet_ns: 0,
        hop_latency_ns: HOP_LATENCY_NS,
    };
    let mut jobs = Vec::new();
    for method in methods(10, 13) {
        for helper_mbps in [100.0, 800.0, 1_500.0] {
            jobs.push(Job {
                part: Part::ClosedForm,
                method,
                helper_mbps,
                per_packet_ns: 0,
                hop_latency_ns: 0,
                packet_bytes: 16_384,
                ..base
            });
        }
    }
    for method in methods(10, 13) {
        for &packet_bytes in &packets {
            for &helper_mbps in &helpers {
                jobs.push(Job { method, packet_bytes, helper_mbps, ..base });
            }
        }
    }
    for unit_bytes in [256_000, 4_000_000] {
        for method in methods(10, 13) {
            for &packet_bytes in packets.iter().filter(|&&p| u64::from(p) <= unit_bytes) {
                for &helper_mbps in &helpers {
                    jobs.push(Job { part: Part::UnitSize, method, unit_bytes, packet_bytes, helper_mbps, ..base });
                }
            }
        }
    }
    for q in 6..=11u16 {
        for method in [
            Method::Normal,
            Method::Ecpipe,
            Method::Apls { q, inner: Inner::Chain, assignment: Assignment::RoundRobin },
        ] {
            for &packet_bytes in &packets {
                jobs.push(Job { part: Part::Sources, method, k: 6, survivors: 11, packet_bytes, ..base });
            }
        }
    }
    for per_packet_ns in PER_PACKET_SWEEP_NS {
        for method in [Method::Ecpipe, Method::Apls { q: 13, inner: Inner::Chain, assignment: Assignment::RoundRobin }]
        {
            for &packet_bytes in &PACKETS {
                jobs.push(Job { part: Part::PacketCost, method, packet_bytes, per_packet_ns, ..base });
            }
        }
    }
    for method in [
        Method::Normal,
        Method::Ecpipe,
        Method::Apls { q: 13, inner: Inner::Chain, assignment: Assignment::RoundRobin },
    ] {
        for &packet_bytes in &packets {
            let receive_per_packet_ns = PER_PACKET_NS;
            jobs.push(Job {
                part: Part::ReceiveCost,
                method,
                packet_bytes,
                helper_mbps: REQUESTOR_MBPS,
                receive_per_packet_ns,
                ..base
            });
        }
    }
    jobs
}

/// Reads [`run`] will simulate.
pub fn run_count(options: &AplsOptions) -> usize {
    jobs(options).len()
}

/// Runs one read.
pub fn run_job(job: &Job) -> anyhow::Result<RunRow> {
    let flow = Dataflow::build(job.method, job.k, job.unit_bytes, job.packet_bytes).context("building the dataflow")?;
    let setup = ReconstructSetup {
        nodes: vec![SitePorts::symmetric(mbps(job.helper_mbps)); usize::from(job.survivors)],
        gateway: SitePorts::symmetric(mbps(REQUESTOR_MBPS)),
        hop_latency_ns: job.hop_latency_ns,
        per_packet_ns: job.per_packet_ns,
        receive_per_packet_ns: job.receive_per_packet_ns,
        disk: DiskModel { whole_range: true, ..DiskModel::INSTANT },
    };
    Ok(RunRow { job: *job, method: job.method.name(), outcome: run_isolated(&setup, &flow) })
}

fn label(job: &Job) -> String {
    format!("{:?} {} {} B packets, {} Mbps", job.part, job.method.name(), job.packet_bytes, job.helper_mbps)
}

/// Runs the experiment and writes its results folder.
pub fn run(options: &AplsOptions, out_dir: &Path, progress: &(dyn Fn(Progress) + Sync)) -> anyhow::Result<AplsOutcome> {
    anyhow::ensure!(options.threads > 0, "at least one thread");
    let jobs = jobs(options);
    let rows: Vec<RunRow> =
        run_parallel(&jobs, options.threads, label, run_job, progress).into_iter().collect::<anyhow::Result<_>>()?;
    let loaded = loaded::rows(loaded_reads(options), 1);
    let mut findings = judge::findings(&rows);
    findings.extend(judge::loaded_findings(&loaded));
    let markdown = judge::tables(&rows) + &judge::loaded_table(&loaded);
    let files = write(out_dir, options, &rows, &loaded, &findings, &markdown)?;
    Ok(AplsOutcome { findings, markdown, files, runs: rows.len() })
}

fn write(
    out_dir: &Path,
    options: &AplsOptions,
    rows: &[RunRow],
    loaded: &[loaded::LoadedRow],
    findings: &[PaperFinding],
    markdown: &str,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = crate::ResultsDir::create(out_dir)?;
    #[derive(Serialize)]
    struct SummaryFile<'a> {
        quick: bool,
        runs: &'a [RunRow],
        loaded: &'a [loaded::LoadedRow],
    }
    out.put_json("summary.json", &SummaryFile { quick: options.quick, runs: rows, loaded })?;
    out.put_json("findings.json", &findings)?;
    out.put("tables.md", markdown.to_owned())?;
    let plots = judge::plots(out_dir, rows, options.png)?;
    let html = crate::paper_html("APLS (Xie et al.), simulated in isolation", findings, &plots, &[("Runs", markdown)]);
    out.put("report.html", html)?;
    Ok(out.files(plots))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_job_gives_the_same_row_and_every_part_is_planned() {
        let options = AplsOptions { quick: true, threads: 1, png: false };
        let all = jobs(&options);
        for part in
            [Part::ClosedForm, Part::Packets, Part::UnitSize, Part::Sources, Part::PacketCost, Part::ReceiveCost]
        {
            assert!(all.iter().any(|j| j.part == part), "{part:?}");
        }
        let job = all.iter().find(|j| matches!(j.method, Method::Apls { .. }) && j.part == Part::UnitSize).unwrap();
        let json = |job: &Job| serde_json::to_string(&run_job(job).unwrap()).unwrap();
        assert_eq!(json(job), json(job));
        assert!(jobs(&AplsOptions { quick: false, ..options }).len() > all.len());
    }
}
