//! `lowtail experiment ecstore`: the evaluation of EC-Store (Abebe et al.) in the simulator, on the
//! access policies, the mover and the execution core the gateway runs: the paper's configurations
//! (R, EC, EC+LB, EC+C, EC+C+M, EC+C+M+LB, and lowtail's data-units-first EC beside its random EC)
//! over YCSB-E-like scans that turn from uniform to Zipf after the warm-up, 10 KB and 1 MB blocks,
//! a Wikipedia-like page workload, 1–2 nodes failed without repair, and a sweep over the
//! parameters the paper does not publish; each finding judged from records with the paper's number
//! beside lowtail's.
//!
//! The stand-in service model (the paper's HDDs and 10 GbE are not characterised): FCFS nodes of
//! 100 MB/s with a per-task overhead of `overhead_ratio` × a 50 KB chunk's transfer (the paper's
//! o : m·z = 5 : 1 by default, so 2.5 ms) plus an exponential part of half that; 100 µs one way
//! on the network; the units one batch reads on one node run as one task.
//!
//! Owns: the choice of runs and the judging. Must not: compute statistics other than through
//! `report` from records, or pick unpublished parameters to make a verdict pass (they are swept).

mod judge;
pub mod live;

use crate::fastcloud::PaperFinding;
use crate::parallel::{Progress, run_parallel};
use anyhow::Context;
use codec::CodeSpec;
use model::Placement;
use policy::ecstore::access::{AccessKind, AccessPolicy, AccessSettings};
use policy::ecstore::mover::{Mover, MoverSettings};
use rand::SeedableRng;
use report::batch::{BatchSummary, BatchWindow, summarize_batches};
use serde::Serialize;
use sim::NodeModel;
use sim::batch::{BatchFrontend, BatchSetup, SolverModel, run_batches};
use std::path::{Path, PathBuf};
use workload::batch::{BatchWorkload, PageConfig, YcsbEConfig};

/// Nodes of the paper's testbed that store data (§VI-A).
pub const NODES: u32 = 32;
/// Node rate of the stand-in model, bytes per second.
pub const RATE_BYTES_PER_S: f64 = 100e6;
/// The chunk whose transfer time the overhead ratio is taken against: a 100 KB block's under
/// RS(2,2).
pub const REFERENCE_CHUNK_BYTES: u64 = 50_000;

/// One of the paper's configurations (and lowtail's baseline).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Config {
    /// Three copies, one read at random.
    R,
    /// RS(2,2), k units at random (EC-Cache's access).
    Ec,
    /// RS(2,2), the data units (lowtail's normal read).
    EcData,
    /// EC with late binding, δ = 1.
    EcLb,
    /// The cost model.
    EcC,
    /// The cost model and the mover.
    EcCM,
    /// The cost model, the mover and late binding.
    EcCMLb,
    /// RS(2,2), Hu et al.'s least latency first per block from fresh probes (lowtail's).
    HuLlf,
    /// RS(2,2), Hu et al.'s least marginal load first per block from fresh probes (lowtail's).
    HuLmlf,
}

impl Config {
    /// Every configuration, in the paper's order.
    pub const ALL: [Config; 7] =
        [Config::R, Config::Ec, Config::EcData, Config::EcLb, Config::EcC, Config::EcCM, Config::EcCMLb];

    /// The paper's label.
    pub fn name(self) -> &'static str {
        match self {
            Config::R => "R",
            Config::Ec => "EC",
            Config::EcData => "EC-data",
            Config::EcLb => "EC+LB",
            Config::EcC => "EC+C",
            Config::EcCM => "EC+C+M",
            Config::EcCMLb => "EC+C+M+LB",
            Config::HuLlf => "Hu-LLF",
            Config::HuLmlf => "Hu-LMLF",
        }
    }

    fn code(self) -> CodeSpec {
        match self {
            Config::R => CodeSpec::Rs { k: 1, m: 2 },
            _ => CodeSpec::Rs { k: 2, m: 2 },
        }
    }

    fn access(self) -> AccessSettings {
        let (kind, extra_reads) = match self {
            Config::R | Config::Ec => (AccessKind::Random, 0),
            Config::EcData => (AccessKind::DataFirst, 0),
            Config::EcLb => (AccessKind::Random, 1),
            Config::EcC | Config::EcCM => (AccessKind::Cost, 0),
            Config::EcCMLb => (AccessKind::Cost, 1),
            Config::HuLlf => (AccessKind::Llf, 0),
            Config::HuLmlf => (AccessKind::Lmlf, 0),
        };
        // The paper's reads have no deadline.
        let round_trip_ns = 2 * NETWORK_LATENCY_NS;
        AccessSettings { kind, extra_reads, round_trip_ns, block_deadline_ns: 0, ..AccessSettings::default() }
    }

    fn moves(self) -> bool {
        matches!(self, Config::EcCM | Config::EcCMLb)
    }
}

/// One-way network latency of the stand-in model.
const NETWORK_LATENCY_NS: u64 = 100_000;

/// What the clients read.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Load {
    /// YCSB-E-like scans of blocks of one size.
    Scans {
        /// Block size.
        block_bytes: u64,
        /// Longest scan.
        max_scan_length: u32,
        /// Zipf exponent of the start key after the change.
        zipf_exponent: f64,
    },
    /// Pages of images (Wikipedia-like).
    Pages,
}

/// A point of the evaluation: the load, the model's unpublished ratio, clients, failures.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Scenario {
    /// What the clients read.
    pub load: Load,
    /// Per-task overhead ÷ a 50 KB chunk's transfer time.
    pub overhead_ratio: f64,
    /// Closed-loop clients.
    pub clients: u32,
    /// Nodes down (without repair) from the measured window's start.
    pub failed_nodes: u32,
}

impl Scenario {
    /// The default point: 100 KB blocks, scans of up to 10, Zipf 1, ratio 5, 100 clients.
    pub fn default_point() -> Scenario {
        Scenario {
            load: Load::Scans { block_bytes: 100_000, max_scan_length: 10, zipf_exponent: 1.0 },
            overhead_ratio: 5.0,
            clients: 100,
            failed_nodes: 0,
        }
    }

    fn describe(&self) -> String {
        let load = match self.load {
            Load::Scans { block_bytes, max_scan_length, zipf_exponent } => {
                format!("scans ≤{max_scan_length} of {} KB, zipf {zipf_exponent}", block_bytes / 1000)
            }
            Load::Pages => "pages".into(),
        };
        let failed = if self.failed_nodes > 0 { format!(", {} down", self.failed_nodes) } else { String::new() };
        format!("{load}, o:mz {}, {} clients{failed}", self.overhead_ratio, self.clients)
    }
}

/// How big a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Size {
    /// The paper's: 10^6 blocks, 20 minutes of warm-up and 20 measured.
    Paper,
    /// 10^5 blocks, 30 s + 90 s of virtual time: the verdicts are noisier.
    Quick,
    /// 5 000 blocks, 3 s + 6 s: checks that everything runs and is written, not the paper.
    Smoke,
}

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct EcstoreOptions {
    /// How big a run is.
    pub size: Size,
    /// The run's seed.
    pub seed: u64,
    /// Simulations at once.
    pub threads: usize,
    /// PNG copies of the plots.
    pub png: bool,
    /// Also the sweep over the unpublished parameters (findings-sweep.json).
    pub sweep: bool,
    /// The warm-up and the measured window in seconds of virtual time, in place of the size's.
    pub durations_s: Option<(u64, u64)>,
    /// Only these parts (the default point always runs: every finding is judged against it);
    /// `None`: every part.
    pub parts: Option<Vec<Part>>,
}

impl Default for EcstoreOptions {
    fn default() -> Self {
        EcstoreOptions {
            size: Size::Paper,
            seed: 1,
            threads: 2,
            png: true,
            sweep: true,
            durations_s: None,
            parts: None,
        }
    }
}

impl EcstoreOptions {
    /// The scale of the runs: the size's, with the durations asked for.
    pub fn scale(&self) -> Scale {
        let mut scale = Scale::of(self.size);
        if let Some((warmup_s, measure_s)) = self.durations_s {
            scale.warmup_ns = warmup_s * 1_000_000_000;
            scale.measure_ns = measure_s * 1_000_000_000;
        }
        scale
    }

    /// Whether `part` runs.
    pub fn runs(&self, part: Part) -> bool {
        let asked = self.parts.as_ref().is_none_or(|parts| part == Part::Main || parts.contains(&part));
        asked && (part != Part::Sweep || self.sweep)
    }
}

/// Durations and sizes of a run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Scale {
    /// Blocks stored (YCSB keys).
    pub blocks: u32,
    /// Warm-up (uniform keys) before the change to Zipf.
    pub warmup_ns: u64,
    /// The measured window after it.
    pub measure_ns: u64,
    /// Time-series bucket (the paper's minute).
    pub bucket_ns: u64,
}

impl Scale {
    /// The scale of a run of `size`.
    pub fn of(size: Size) -> Scale {
        const S: u64 = 1_000_000_000;
        match size {
            Size::Paper => Scale { blocks: 1_000_000, warmup_ns: 1_200 * S, measure_ns: 1_200 * S, bucket_ns: 60 * S },
            Size::Quick => Scale { blocks: 100_000, warmup_ns: 30 * S, measure_ns: 90 * S, bucket_ns: 10 * S },
            Size::Smoke => Scale { blocks: 5_000, warmup_ns: 3 * S, measure_ns: 6 * S, bucket_ns: S },
        }
    }

    fn window(&self) -> BatchWindow {
        BatchWindow { from_ns: self.warmup_ns, to_ns: self.warmup_ns + self.measure_ns, bucket_ns: self.bucket_ns }
    }
}

/// Which part of the evaluation a run belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Part {
    /// The default point (Figs. 4a–d, Table II).
    Main,
    /// Other block sizes (Fig. 4e).
    BlockSize,
    /// Failed nodes (Fig. 4f).
    Failures,
    /// The page workload (Figs. 4g–h).
    Pages,
    /// The sweep over unpublished parameters.
    Sweep,
    /// Single-stripe GETs (batches of one block): EC-Store's k cheapest units against Hu et al.'s
    /// rules, on one footing.
    SingleStripe,
}

impl Part {
    /// Every part, in the order the experiment runs them.
    pub const ALL: [Part; 6] =
        [Part::Main, Part::BlockSize, Part::Failures, Part::Pages, Part::SingleStripe, Part::Sweep];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Part::Main => "main",
            Part::BlockSize => "block-size",
            Part::Failures => "failures",
            Part::Pages => "pages",
            Part::SingleStripe => "single-stripe",
            Part::Sweep => "sweep",
        }
    }
}

impl std::str::FromStr for Part {
    type Err = String;

    fn from_str(name: &str) -> Result<Part, String> {
        Part::ALL.into_iter().find(|part| part.name() == name.trim()).ok_or_else(|| {
            let names: Vec<&str> = Part::ALL.iter().map(|part| part.name()).collect();
            format!("unknown part {name:?}: use {}", names.join(", "))
        })
    }
}

/// One simulation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Job {
    /// Its part.
    pub part: Part,
    /// The configuration.
    pub config: Config,
    /// The point.
    pub scenario: Scenario,
}

/// A run's result: its job and its statistics (from records).
#[derive(Clone, Debug, Serialize)]
pub struct RunRow {
    /// What ran.
    pub job: Job,
    /// Configuration label.
    pub config: &'static str,
    /// The point, in words.
    pub scenario: String,
    /// Statistics of its records.
    pub summary: BatchSummary,
    /// What the access policy decided (cache hits, misses, solves, reloads).
    pub counters: policy::ecstore::access::AccessCounters,
    /// Solves the background solver ran.
    pub solves: u64,
    /// Moves that, replayed on the initial placement, found their unit elsewhere or put two units
    /// of a stripe on one node (0 when the mover keeps its contract).
    pub move_violations: u64,
}

/// What the experiment produced.
#[derive(Debug)]
pub struct EcstoreOutcome {
    /// Findings at the default point (findings.json).
    pub findings: Vec<PaperFinding>,
    /// The sweep's findings (findings-sweep.json); empty without the sweep.
    pub sweep_findings: Vec<PaperFinding>,
    /// The main table, as written to tables.md.
    pub markdown: String,
    /// Files written, relative to the results folder.
    pub files: Vec<PathBuf>,
    /// Simulations run.
    pub runs: usize,
}

/// Sweep axes: o : m·z, Zipf exponent, clients (the others at the default).
const SWEEP_RATIOS: [f64; 3] = [1.0, 5.0, 25.0];
const SWEEP_ZIPF: [f64; 3] = [0.9, 1.0, 1.2];
const SWEEP_CLIENTS: [u32; 2] = [50, 100];
/// The configurations the sweep judges.
const SWEEP_CONFIGS: [Config; 3] = [Config::Ec, Config::EcC, Config::EcCM];

/// The configurations of the single-stripe comparison.
pub const SINGLE_STRIPE_CONFIGS: [Config; 5] = [Config::Ec, Config::EcData, Config::HuLlf, Config::HuLmlf, Config::EcC];

/// Every simulation of the experiment, in a fixed order.
pub fn jobs(options: &EcstoreOptions) -> Vec<Job> {
    let base = Scenario::default_point();
    let mut jobs: Vec<Job> =
        Config::ALL.iter().map(|&config| Job { part: Part::Main, config, scenario: base }).collect();
    let compared = [Config::R, Config::Ec, Config::EcLb, Config::EcC, Config::EcCM];
    for block_bytes in [10_000, 1_000_000] {
        let load = Load::Scans { block_bytes, max_scan_length: 10, zipf_exponent: 1.0 };
        for &config in &compared {
            jobs.push(Job { part: Part::BlockSize, config, scenario: Scenario { load, ..base } });
        }
    }
    for failed_nodes in [1, 2] {
        for config in [Config::Ec, Config::EcC, Config::EcCM] {
            jobs.push(Job { part: Part::Failures, config, scenario: Scenario { failed_nodes, ..base } });
        }
    }
    for config in [Config::R, Config::Ec, Config::EcLb, Config::EcC, Config::EcCM, Config::EcCMLb] {
        jobs.push(Job { part: Part::Pages, config, scenario: Scenario { load: Load::Pages, ..base } });
    }
    for config in [Config::HuLlf, Config::HuLmlf] {
        jobs.push(Job { part: Part::Main, config, scenario: base });
    }
    let single =
        Scenario { load: Load::Scans { block_bytes: 100_000, max_scan_length: 1, zipf_exponent: 1.0 }, ..base };
    for config in SINGLE_STRIPE_CONFIGS {
        jobs.push(Job { part: Part::SingleStripe, config, scenario: single });
    }
    for point in sweep_points() {
        for config in SWEEP_CONFIGS {
            jobs.push(Job { part: Part::Sweep, config, scenario: point });
        }
    }
    jobs.retain(|job| options.runs(job.part));
    jobs
}

/// The sweep's points (the default point among them).
pub fn sweep_points() -> Vec<Scenario> {
    let base = Scenario::default_point();
    let mut points = Vec::new();
    for overhead_ratio in SWEEP_RATIOS {
        for zipf_exponent in SWEEP_ZIPF {
            for clients in SWEEP_CLIENTS {
                let load = Load::Scans { block_bytes: 100_000, max_scan_length: 10, zipf_exponent };
                points.push(Scenario { load, overhead_ratio, clients, failed_nodes: 0 });
            }
        }
    }
    debug_assert!(points.contains(&base));
    points
}

/// Simulations [`run`] will run.
pub fn run_count(options: &EcstoreOptions) -> usize {
    jobs(options).len()
}

fn label(job: &Job) -> String {
    format!("{} {}", job.config.name(), job.scenario.describe())
}

/// The workload of a job at a scale, its change to Zipf at the warm-up's end.
fn workload(job: &Job, scale: &Scale) -> BatchWorkload {
    match job.scenario.load {
        Load::Scans { block_bytes, max_scan_length, zipf_exponent } => BatchWorkload::YcsbE(YcsbEConfig {
            blocks: scale.blocks,
            block_bytes,
            max_scan_length,
            zipf_exponent,
            scrambled: false,
            change_at_ns: scale.warmup_ns,
        }),
        Load::Pages => {
            let paper = PageConfig::paper(scale.warmup_ns);
            // A smaller site at a smaller scale: fewer pages and images, and (a quick run's pages
            // would otherwise be solved at the cost of 200-block plans) at most 50 images a page.
            let shrink = (1_000_000 / scale.blocks).max(1);
            let images_per_page_max = if shrink > 1 { 50 } else { paper.images_per_page_max };
            BatchWorkload::Pages(PageConfig {
                pages: paper.pages / shrink,
                images: paper.images / shrink,
                images_per_page_max,
                ..paper
            })
        }
    }
}

/// Runs one job and summarises its records.
pub fn run_job(job: &Job, options: &EcstoreOptions) -> anyhow::Result<RunRow> {
    let scale = options.scale();
    let generator = workload(job, &scale).build(options.seed).context("building the workload")?;
    let spec = job.config.code();
    let k = spec.data_units() as u64;
    let blocks = generator.block_bytes().len() as u32;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(options.seed ^ 0x5e_ed);
    // The paper's baselines place each block at random (EC-Cache's), not balanced: neighbouring
    // keys of a scan land where chance puts them.
    let placement: Placement = policy::placement::uniform_random(spec, NODES, blocks, &mut rng)
        .map_err(|e| anyhow::anyhow!("placement: {e}"))?;
    let unit_bytes = generator.block_bytes().iter().map(|&b| b.div_ceil(k)).collect();
    let overhead_ns = (job.scenario.overhead_ratio * REFERENCE_CHUNK_BYTES as f64 * 1e9 / RATE_BYTES_PER_S) as u64;
    let end_ns = scale.warmup_ns + scale.measure_ns;
    let outages = (0..job.scenario.failed_nodes)
        .map(|i| sim::Outage { node: (7 + 11 * i) % NODES, from_ns: scale.warmup_ns, until_ns: model::NEVER })
        .collect();
    let setup = BatchSetup {
        spec,
        placement,
        unit_bytes,
        nodes: NodeModel {
            overhead_ns,
            rates_bytes_per_s: vec![RATE_BYTES_PER_S; NODES as usize],
            exp_mean_ns: overhead_ns / 2,
            cancel_in_service: false,
            servers: 1,
            class_delays: Vec::new(),
            slowdown: None,
            outages,
        },
        network_latency_ns: NETWORK_LATENCY_NS,
        frontend: BatchFrontend::default(),
        site_batching: true,
        clients: job.scenario.clients,
        think_ns: 0,
        end_ns,
        solver: SolverModel::default(),
        failure_detect_ns: 0,
        load_period_ns: 5_000_000_000,
        seed: options.seed,
    };
    let policy = AccessPolicy::new(job.config.access(), spec.data_units()).map_err(anyhow::Error::msg)?;
    let mover =
        job.config.moves().then(|| Mover::new(MoverSettings::default()).map_err(anyhow::Error::msg)).transpose()?;
    let initial = setup.placement.clone();
    let output = run_batches(&setup, policy, mover, &generator);
    let summary = summarize_batches(&output.batches, &output.records, &output.moves, NODES as usize, scale.window());
    Ok(RunRow {
        job: *job,
        config: job.config.name(),
        scenario: job.scenario.describe(),
        summary,
        counters: output.counters,
        solves: output.solves,
        move_violations: replay_moves(initial, &output.moves),
    })
}

/// Replays `moves` on the placement they started from; counts the moves whose unit was not where
/// the record says or whose destination already held a unit of the stripe.
fn replay_moves(mut placement: Placement, moves: &[model::MoveRecord]) -> u64 {
    let mut violations = 0;
    for m in moves.iter().filter(|m| m.end_ns != model::NEVER) {
        match placement.move_unit(m.stripe, m.unit, m.to) {
            Ok(from) if from == m.from => {}
            _ => violations += 1,
        }
    }
    violations
}

/// Runs the experiment and writes its results folder.
pub fn run(
    options: &EcstoreOptions,
    out_dir: &Path,
    progress: &(dyn Fn(Progress) + Sync),
) -> anyhow::Result<EcstoreOutcome> {
    anyhow::ensure!(options.threads > 0, "at least one thread");
    let jobs = jobs(options);
    let results = run_parallel(&jobs, options.threads, label, |job| run_job(job, options), progress);
    let rows: Vec<RunRow> = results.into_iter().collect::<anyhow::Result<_>>()?;
    let findings = judge::findings(&rows, &options.scale());
    let sweep_findings = if options.runs(Part::Sweep) { judge::sweep_findings(&rows) } else { Vec::new() };
    let markdown = tables(&rows);
    let files = write(out_dir, options, &rows, &findings, &sweep_findings, &markdown)?;
    Ok(EcstoreOutcome { findings, sweep_findings, markdown, files, runs: rows.len() })
}

/// The rows of `part` at its configurations.
fn rows_of(rows: &[RunRow], part: Part) -> impl Iterator<Item = &RunRow> {
    rows.iter().filter(move |r| r.job.part == part)
}

fn tables(rows: &[RunRow]) -> String {
    let mut text = String::from(
        "| part | config | point | batches | mean ms | p99 ms | nodes/batch | reads/block | λ % | hit rate | moves |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        let s = &row.summary;
        let latency = s.latency;
        text += &format!(
            "| {:?} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.1} | {} | {} |\n",
            row.job.part,
            row.config,
            row.scenario,
            s.batches,
            latency.map_or("–".into(), |l| format!("{:.1}", l.mean_s * 1e3)),
            latency.map_or("–".into(), |l| format!("{:.1}", l.p99_s * 1e3)),
            s.distinct_nodes_mean,
            s.reads_per_block,
            s.imbalance_pct,
            s.hit_rate().map_or("–".into(), |h| format!("{:.0} %", h * 100.0)),
            s.moves,
        );
    }
    text
}

fn write(
    out_dir: &Path,
    options: &EcstoreOptions,
    rows: &[RunRow],
    findings: &[PaperFinding],
    sweep_findings: &[PaperFinding],
    markdown: &str,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = crate::ResultsDir::create(out_dir)?;
    #[derive(Serialize)]
    struct SummaryFile<'a> {
        size: Size,
        seed: u64,
        scale: Scale,
        runs: &'a [RunRow],
    }
    let summary = SummaryFile { size: options.size, seed: options.seed, scale: options.scale(), runs: rows };
    out.put_json("summary.json", &summary)?;
    out.put_json("findings.json", &findings)?;
    if options.runs(Part::Sweep) {
        out.put_json("findings-sweep.json", &sweep_findings)?;
    }
    out.put("tables.md", markdown.to_owned())?;
    let plots = plots(out_dir, rows, options.png)?;
    let html = crate::paper_html("EC-Store (Abebe et al.), simulated", findings, &plots, &[("Runs", markdown)]);
    out.put("report.html", html)?;
    Ok(out.files(plots))
}

fn plots(out_dir: &Path, rows: &[RunRow], png: bool) -> anyhow::Result<Vec<PathBuf>> {
    let main: Vec<&RunRow> = rows_of(rows, Part::Main).collect();
    let lines = |series: fn(&BatchSummary) -> &Vec<(f64, f64)>| -> Vec<(String, Vec<(f64, f64)>)> {
        main.iter().map(|r| (r.config.to_owned(), series(&r.summary).clone())).collect()
    };
    let over_time = [
        report::LinePanel {
            caption: "mean batch latency (Fig. 4a)".into(),
            y_label: "ms".into(),
            lines: lines(|s| &s.latency_ms_by_bucket),
        },
        report::LinePanel {
            caption: "distinct nodes per batch".into(),
            y_label: "nodes".into(),
            lines: lines(|s| &s.distinct_nodes_by_bucket),
        },
    ];
    let plots_dir = out_dir.join("plots");
    let mut files = report::write_line_panels(
        &plots_dir,
        "over-time",
        "EC-Store: YCSB-E-like scans, uniform then Zipf (the change at the warm-up's end)",
        "time (s)",
        &over_time,
        png,
    )?;
    let cdf = [report::LinePanel {
        caption: "batch latency CDF, measured window (Fig. 4c)".into(),
        y_label: "fraction of batches".into(),
        lines: main
            .iter()
            .map(|r| (r.config.to_owned(), r.summary.cdf.iter().map(|&(s, f)| (s * 1e3, f)).collect()))
            .collect(),
    }];
    files.extend(report::write_line_panels(&plots_dir, "cdf", "EC-Store: batch latency", "ms", &cdf, png)?);
    let bytes = [report::LinePanel {
        caption: "bytes read per node, measured window, sorted (Fig. 4d)".into(),
        y_label: "MB".into(),
        lines: main
            .iter()
            .map(|r| {
                let mut per_node = r.summary.bytes_per_node.clone();
                per_node.sort_unstable_by(|a, b| b.cmp(a));
                let points = per_node.iter().enumerate().map(|(i, &b)| (i as f64, b as f64 / 1e6)).collect();
                (r.config.to_owned(), points)
            })
            .collect(),
    }];
    files.extend(report::write_line_panels(
        &plots_dir,
        "bytes-per-node",
        "EC-Store: load per node",
        "node rank",
        &bytes,
        png,
    )?);
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn smoke() -> EcstoreOptions {
        EcstoreOptions { size: Size::Smoke, threads: 1, png: false, ..EcstoreOptions::default() }
    }

    #[test]
    fn the_same_seed_gives_byte_identical_rows_and_another_seed_does_not() {
        let job = Job { part: Part::Main, config: Config::EcCMLb, scenario: Scenario::default_point() };
        let json = |options: &EcstoreOptions| serde_json::to_string(&run_job(&job, options).unwrap()).unwrap();
        let first = json(&smoke());
        assert_eq!(first, json(&smoke()));
        assert_ne!(first, json(&EcstoreOptions { seed: 2, ..smoke() }));
    }

    #[test]
    fn every_configuration_runs_at_the_default_point_and_the_sweep_holds_it() {
        let all = jobs(&smoke());
        for config in Config::ALL {
            assert!(all.iter().any(|j| j.part == Part::Main && j.config == config), "{config:?}");
        }
        let sweep = sweep_points();
        assert_eq!(sweep.len(), SWEEP_RATIOS.len() * SWEEP_ZIPF.len() * SWEEP_CLIENTS.len());
        assert!(sweep.contains(&Scenario::default_point()));
        let without = jobs(&EcstoreOptions { sweep: false, ..smoke() });
        assert_eq!(all.len() - without.len(), sweep.len() * SWEEP_CONFIGS.len());
        // Parts asked for run with the default point; the others do not.
        let single = EcstoreOptions { parts: Some(vec![Part::SingleStripe]), ..smoke() };
        let parts: std::collections::BTreeSet<&str> = jobs(&single).iter().map(|j| j.part.name()).collect();
        assert_eq!(parts, ["main", "single-stripe"].into_iter().collect());
        assert_eq!(jobs(&single).len(), Config::ALL.len() + 2 + SINGLE_STRIPE_CONFIGS.len());
        assert_eq!("pages".parse::<Part>(), Ok(Part::Pages));
        assert!("page".parse::<Part>().unwrap_err().contains("single-stripe"));
    }

    #[test]
    fn durations_asked_for_replace_the_sizes() {
        assert_eq!(smoke().scale(), Scale::of(Size::Smoke));
        let longer = EcstoreOptions { durations_s: Some((10, 600)), ..smoke() }.scale();
        assert_eq!((longer.warmup_ns, longer.measure_ns), (10_000_000_000, 600_000_000_000));
        assert_eq!(longer.blocks, Scale::of(Size::Smoke).blocks);
    }

    #[test]
    fn replaying_moves_finds_a_unit_that_was_not_where_its_record_says() {
        let spec = CodeSpec::Rs { k: 2, m: 2 };
        let placement = Placement::new(spec, 6, [0, 1, 2, 3].into_iter().map(model::NodeId).collect()).unwrap();
        let record = |unit: u8, from: u32, to: u32| model::MoveRecord {
            stripe: model::StripeId(0),
            unit,
            from: model::NodeId(from),
            to: model::NodeId(to),
            bytes: 1,
            start_ns: 0,
            end_ns: 1,
            gain: 1.0,
            access_gain: 1.0,
            balance_gain: 0.0,
        };
        assert_eq!(replay_moves(placement.clone(), &[record(0, 0, 4), record(0, 4, 5)]), 0);
        assert_eq!(replay_moves(placement.clone(), &[record(0, 1, 4)]), 1, "unit 0 was on node 0");
        assert_eq!(replay_moves(placement, &[record(0, 0, 3)]), 1, "node 3 holds unit 3");
    }
}
