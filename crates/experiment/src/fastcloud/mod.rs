//! `lowtail experiment fastcloud`: the evaluation of FAST CLOUD (Liang & Kozat) in the simulator,
//! on the execution core and the policies the gateway runs: the closed forms (thresholds, eq. 4),
//! Table I (the model's delay against simulation), fixed-code capacity (eq. 3), the low-load
//! delays of Fig. 5, and BAFEC and Greedy against every fixed code (Figs. 6 and 7, code mix of
//! Fig. 11), each finding judged from records with the paper's number beside lowtail's.
//!
//! Owns: the choice of runs and the judging. Must not: compute latency statistics other than from
//! records (see [`point`]), or pick parameters the paper does not publish to make a verdict pass:
//! where the paper leaves one open (the backlog measure, the run lengths) it is named here and the
//! alternatives are run side by side.

pub mod backend;
pub mod classes;
pub mod fig3;
pub mod live;
pub mod point;
pub mod table1;

use crate::parallel::{Progress, run_parallel};
use anyhow::Context;
use optimize::fec_model::{Admission, DelayModel, FecClass};
use point::{Point, run_point};
use policy::fec::{AckAt, AfterAck, ClassOp};
use policy::fec::{BacklogMeasure, ClassCode, CodeLengthKind};
use serde::Serialize;
use sim::fec::{FecClassSetup, FecSetup};
use std::path::{Path, PathBuf};

/// The paper's 1 MB read fit (section VI-A): Δ = 61 ms and a mean of 140 ms.
pub fn read_delay() -> DelayModel {
    DelayModel::new(0.061, 0.079).expect("published values")
}

/// The paper's 1 MB write fit: Δ = 114 ms and a mean of 140 ms.
pub fn write_delay() -> DelayModel {
    DelayModel::new(0.114, 0.026).expect("published values")
}

/// The evaluation's code: k = 3, n up to 6 (section VI-A), L = 16 slots, non-blocking.
pub const CODE: ClassCode = ClassCode { k: 3, n_max: 6 };
/// L of Figs. 5–11.
pub const SLOTS: usize = 16;
/// Loads of the adaptive comparison, as fractions of C̃(3,3).
pub const ADAPTIVE_LOADS: [f64; 6] = [0.1, 0.3, 0.5, 0.7, 0.85, 0.95];

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct FastcloudOptions {
    /// Fewer and shorter runs (a smoke run: its verdicts are noisier).
    pub quick: bool,
    /// The first seed; runs use `seeds` consecutive ones.
    pub first_seed: u64,
    /// Seeds per point (Table I and the adaptive comparison average or pool over them).
    pub seeds: u64,
    /// Simulations run at once.
    pub threads: usize,
    /// PNG copies of the plots.
    pub png: bool,
}

impl Default for FastcloudOptions {
    fn default() -> FastcloudOptions {
        FastcloudOptions { quick: false, first_seed: 1, seeds: 3, threads: 2, png: true }
    }
}

impl FastcloudOptions {
    fn requests_per_point(&self) -> usize {
        if self.quick { 20_000 } else { 150_000 }
    }

    fn seeds(&self) -> Vec<u64> {
        (self.first_seed..self.first_seed + self.seeds.max(1)).collect()
    }
}

/// One claim: the paper's number beside lowtail's. `holds` is `None` for a magnitude reported
/// rather than judged (it rests on something the paper does not publish, or the paper gives none).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PaperFinding {
    /// The acceptance criterion's id (FC1 …).
    pub id: &'static str,
    /// The claim.
    pub claim: String,
    /// What the paper reports.
    pub paper: String,
    /// What lowtail measured.
    pub measured: String,
    /// Whether it holds; `None` for a reported magnitude.
    pub holds: Option<bool>,
}

/// The code-length policies of the adaptive comparison, with their labels.
pub fn adaptive_policies() -> Vec<(&'static str, CodeLengthKind)> {
    let fixed = |n: u16| CodeLengthKind::Fixed { n: vec![n] };
    vec![
        ("(3,3)", fixed(3)),
        ("(4,3)", fixed(4)),
        ("(5,3)", fixed(5)),
        ("(6,3)", fixed(6)),
        ("greedy", CodeLengthKind::Greedy),
        ("bafec", CodeLengthKind::Bafec { backlog: BacklogMeasure::WaitingRequests }),
        ("bafec-waiting-work", CodeLengthKind::Bafec { backlog: BacklogMeasure::WaitingWork }),
    ]
}

/// Labels of the fixed codes among [`adaptive_policies`] (the first four).
const FIXED_POLICIES: usize = 4;

/// One simulation to run.
#[derive(Clone, Debug)]
enum Job {
    /// Table I cell (row, column) at load index `load`.
    Table { row: usize, column: usize, load: usize, seed: u64 },
    /// Adaptive comparison: policy index, load index.
    Adaptive { policy: usize, load: usize, seed: u64 },
    /// Fixed code n in saturation (arrivals at three times its model capacity).
    Capacity { n: usize },
    /// Fig. 8 or 9: read load step `read`, write load step `write`, fixed pair index `pair`.
    Grid { layers: classes::Layers, read: usize, write: usize, pair: usize },
    /// Figs. 10, 11: read share index `mix`, load index `load`, policy index `policy`.
    Mix { mix: usize, load: usize, policy: usize, seed: u64 },
    /// Writes of (6,3) acknowledged at k in saturation, the rest `rest`.
    WriteCapacity { rest: AfterAck },
    /// Writes of (6,3) acknowledged at k, the rest completed, at half their capacity.
    WriteDurability,
    /// The Δ+Exp fit of the task records of fixed code n at 0.3 of its capacity.
    Fit { n: usize },
    /// Fig. 3: code `fig3::CODES[code]` under size exponent `fig3::SIZE_EXPONENTS[beta]`.
    ServiceTime { code: usize, beta: usize },
}

/// What the experiment produced.
#[derive(Debug)]
pub struct FastcloudOutcome {
    /// The findings, as written to findings.json.
    pub findings: Vec<PaperFinding>,
    /// Table I, as written to table-1.md.
    pub table_markdown: String,
    /// The adaptive comparison, as written to adaptive.md.
    pub adaptive_markdown: String,
    /// Files written, relative to the results folder.
    pub files: Vec<PathBuf>,
    /// Simulations run.
    pub runs: usize,
}

/// Everything measured, as written to summary.json.
#[derive(Debug, Serialize)]
struct Summary {
    requests_per_point: usize,
    seeds: Vec<u64>,
    read_thresholds: optimize::fec_model::BacklogThresholds,
    write_thresholds: optimize::fec_model::BacklogThresholds,
    table_1: Vec<table1::Cell>,
    /// [policy][load], seeds pooled per point by averaging means and taking the worst p99.9.
    adaptive: Vec<AdaptiveRow>,
    capacity: Vec<CapacityRow>,
    /// Fig. 8: the best fixed pair at each pair of rates.
    grid: Vec<GridRow>,
    /// Fig. 9: the same with writes of k = 2.
    grid_fig9: Vec<GridRow>,
    /// Figs. 10, 11: every policy at every mix and load, seeds averaged.
    mixes: Vec<MixRow>,
    /// Saturated throughput of (6,3) writes acknowledged at k, by what the rest do.
    write_capacity: Vec<(AfterAck, f64)>,
    /// Writes completed in the background at half their capacity.
    write_durability: Option<WriteDurability>,
    /// The Δ+Exp fit of the uncancelled tasks' service times, by fixed code n.
    /// n, the paper's fit over the unraced tasks, the online (censored) fit over every task.
    fits: Vec<(usize, optimize::fec_model::DelayFit, Option<optimize::fec_model::DelayFit>)>,
    /// Fig. 3: service times of 2 MB reads by code and size model.
    fig_3: Vec<fig3::ServiceTimes>,
}

#[derive(Clone, Debug, Serialize)]
struct GridRow {
    read_load: f64,
    write_load: f64,
    /// The stable pair (n_read, n_write) of the least mean latency, if any was stable.
    best: Option<(u16, u16)>,
    best_mean_s: f64,
}

#[derive(Clone, Debug, Serialize)]
struct MixRow {
    read_share: f64,
    load: f64,
    policy: String,
    read: classes::ClassStats,
    write: classes::ClassStats,
    mean_s: f64,
    stable: bool,
}

fn grid_rows(jobs: &[Job], points: &[classes::ClassPoint], layers: classes::Layers) -> Vec<GridRow> {
    let mut rows = Vec::new();
    for read in 0..classes::GRID_STEPS {
        for write in 0..classes::GRID_STEPS - read {
            let best = jobs
                .iter()
                .zip(points)
                .filter_map(|(job, point)| match *job {
                    Job::Grid { layers: l, read: r, write: w, pair }
                        if l == layers && r == read && w == write && point.stable =>
                    {
                        Some((classes::fixed_pairs(layers)[pair], point.mean_s))
                    }
                    _ => None,
                })
                .min_by(|a, b| a.1.total_cmp(&b.1));
            rows.push(GridRow {
                read_load: classes::grid_load(read),
                write_load: classes::grid_load(write),
                best: best.map(|b| b.0),
                best_mean_s: best.map_or(f64::NAN, |b| b.1),
            });
        }
    }
    rows
}

fn mix_rows(jobs: &[Job], points: &[classes::ClassPoint]) -> Vec<MixRow> {
    let policies = classes::mix_policies();
    let mut rows = Vec::new();
    for (mix, &read_share) in classes::MIXES.iter().enumerate() {
        for (load, &fraction) in classes::MIX_LOADS.iter().enumerate() {
            for (policy, (name, _)) in policies.iter().enumerate() {
                let of_point: Vec<&classes::ClassPoint> = jobs
                    .iter()
                    .zip(points)
                    .filter(|(job, _)| matches!(job, Job::Mix { mix: m, load: l, policy: p, .. } if *m == mix && *l == load && *p == policy))
                    .map(|(_, point)| point)
                    .collect();
                let count = of_point.len() as f64;
                let average = |class: usize, f: fn(&classes::ClassStats) -> f64| {
                    of_point.iter().map(|p| f(&p.classes[class])).sum::<f64>() / count
                };
                let stats = |class: usize| classes::ClassStats {
                    requests: of_point.iter().map(|p| p.classes[class].requests).sum(),
                    mean_s: average(class, |s| s.mean_s),
                    p999_s: average(class, |s| s.p999_s),
                    mean_n: average(class, |s| s.mean_n),
                    share_n_at_least_5: average(class, |s| s.share_n_at_least_5),
                };
                rows.push(MixRow {
                    read_share,
                    load: fraction,
                    policy: name.clone(),
                    read: stats(classes::READ),
                    write: stats(classes::WRITE),
                    mean_s: of_point.iter().map(|p| p.mean_s).sum::<f64>() / count,
                    stable: of_point.iter().all(|p| p.stable),
                });
            }
        }
    }
    rows
}

#[derive(Clone, Debug, Serialize)]
struct AdaptiveRow {
    policy: &'static str,
    load: f64,
    rate_per_s: f64,
    mean_s: f64,
    p999_s: f64,
    mean_n: f64,
    share_n_max: f64,
    share_k: f64,
    stable: bool,
}

#[derive(Clone, Debug, Serialize)]
struct CapacityRow {
    n: usize,
    model_capacity_per_s: f64,
    simulated_per_s: f64,
}

pub(crate) fn read_class() -> FecClass {
    FecClass { delay: read_delay(), k: 3, slots: SLOTS, admission: Admission::NonBlocking }
}

/// The write fit's class, otherwise [`read_class`].
fn write_class() -> FecClass {
    FecClass { delay: write_delay(), ..read_class() }
}

fn setup(delay: DelayModel, slots: usize, admission: Admission, kind: CodeLengthKind, seed: u64) -> FecSetup {
    FecSetup::one_class(CODE, delay, slots, admission, kind, seed)
}

/// What a job measured.
enum Measured {
    Point(Point),
    /// Saturated throughput, requests per second.
    Throughput(f64),
    /// A two-class run.
    Classes(classes::ClassPoint),
    /// Writes completed in the background.
    Durability(WriteDurability),
    /// A fit of task records: (n, the fit).
    /// n, the paper's fit over the tasks not cancelled, and the online fit of FAST CLOUD's
    /// policies over every task (cancels censored), from the same records.
    Fit(usize, optimize::fec_model::DelayFit, Option<optimize::fec_model::DelayFit>),
    /// Fig. 3's service times of one code.
    ServiceTimes(fig3::ServiceTimes),
}

/// Acknowledged-at-k writes whose other units were completed in the background.
#[derive(Clone, Debug, Serialize)]
struct WriteDurability {
    writes: usize,
    /// Writes whose every unit was stored, the last after the acknowledgement.
    durable_after_ack: usize,
    /// Mean time from the acknowledgement to the last unit stored, seconds.
    mean_pending_s: f64,
}

/// A write-only setting of (6,3) with the write fit, acknowledged at k, the rest `rest`.
fn write_setup(rest: AfterAck, seed: u64) -> FecSetup {
    let class = FecClassSetup { code: CODE, delay: write_delay(), op: ClassOp::Write { ack: AckAt::K, rest } };
    let kind = CodeLengthKind::Fixed { n: vec![CODE.n_max] };
    FecSetup { classes: vec![class], slots: SLOTS, admission: Admission::NonBlocking, kind, seed }
}

fn write_durability(options: &FastcloudOptions) -> anyhow::Result<WriteDurability> {
    let setup = write_setup(AfterAck::Continue, options.first_seed);
    let capacity = write_class().capacity_per_s(usize::from(CODE.n_max));
    let records =
        setup.run(&sim::fec::poisson_reads(options.requests_per_point(), 0.5 * capacity, options.first_seed))?;
    let mut durable_after_ack = 0;
    let mut pending_s = 0.0;
    for record in records.iter() {
        let stored = record.tasks.iter().all(|t| !t.cancelled && t.finish_ns != model::NEVER);
        let last = record.tasks.iter().map(|t| t.finish_ns).max().unwrap_or(model::NEVER);
        if stored && last > record.request.completion_ns {
            durable_after_ack += 1;
            pending_s += (last - record.request.completion_ns) as f64 / 1e9;
        }
    }
    Ok(WriteDurability {
        writes: records.len(),
        durable_after_ack,
        mean_pending_s: pending_s / durable_after_ack.max(1) as f64,
    })
}

fn run_job(job: &Job, options: &FastcloudOptions) -> anyhow::Result<Measured> {
    if let Job::Capacity { n } = *job {
        let kind = CodeLengthKind::Fixed { n: vec![n as u16] };
        let seed = options.first_seed;
        let setup = setup(read_delay(), SLOTS, Admission::NonBlocking, kind, seed);
        let model = read_class().capacity_per_s(n);
        return Ok(Measured::Throughput(point::saturated_throughput_per_s(
            &setup,
            model,
            options.requests_per_point(),
            seed,
        )?));
    }
    let requests = options.requests_per_point();
    match *job {
        Job::Grid { layers, read, write, pair } => {
            let (read_rate, write_rate) = (
                classes::grid_load(read) * classes::class_capacity_per_s(classes::READ, layers),
                classes::grid_load(write) * classes::class_capacity_per_s(classes::WRITE, layers),
            );
            let (n_read, n_write) = classes::fixed_pairs(layers)[pair];
            let kind = CodeLengthKind::Fixed { n: vec![n_read, n_write] };
            let setup = classes::setup_for(layers, kind, options.first_seed);
            let seed = options.first_seed * 1_000 + (read * classes::GRID_STEPS + write) as u64;
            let rate = read_rate + write_rate;
            classes::run(&setup, rate, read_rate / rate, requests, seed).map(Measured::Classes)
        }
        Job::WriteCapacity { rest } => {
            let capacity = write_class().capacity_per_s(usize::from(CODE.n_max));
            let setup = write_setup(rest, options.first_seed);
            point::saturated_throughput_per_s(&setup, capacity, requests, options.first_seed).map(Measured::Throughput)
        }
        Job::WriteDurability => write_durability(options).map(Measured::Durability),
        Job::Fit { n } => {
            let kind = CodeLengthKind::Fixed { n: vec![n as u16] };
            let setup = setup(read_delay(), SLOTS, Admission::NonBlocking, kind, options.first_seed);
            let rate = 0.3 * read_class().capacity_per_s(n);
            let records =
                setup.run(&sim::fec::poisson_reads(options.requests_per_point(), rate, options.first_seed))?;
            // What a frontend sees of a task it did not cancel: its service time.
            let delays: Vec<f64> = records
                .all_tasks()
                .iter()
                .filter(|t| !t.cancelled)
                .filter_map(|t| t.service_ns())
                .map(|ns| ns as f64 / 1e9)
                .collect();
            let fit = DelayModel::fit(&delays).context("too few task records to fit")?;
            // What a fec-* policy's online fit makes of the same records (every task, the
            // window holding them all).
            let online_fit = policy::fec::OnlineFit::fit_records(records.iter().map(|r| (r.request, r.tasks)));
            Ok(Measured::Fit(n, fit, online_fit))
        }
        Job::ServiceTime { code, beta } => {
            let (n, k) = fig3::CODES[code];
            fig3::run(n, k, fig3::SIZE_EXPONENTS[beta], requests, options.first_seed).map(Measured::ServiceTimes)
        }
        Job::Mix { mix, load, policy, seed } => {
            let setup = classes::setup(classes::mix_policies()[policy].1.clone(), seed);
            let rate = classes::MIX_LOADS[load] * mix_capacity_per_s(classes::MIXES[mix]);
            let arrivals_seed = seed * 1_000 + (mix * classes::MIX_LOADS.len() + load) as u64;
            classes::run(&setup, rate, classes::MIXES[mix], requests, arrivals_seed).map(Measured::Classes)
        }
        _ => run_point_job(job, options).map(Measured::Point),
    }
}

/// One grid as a map: rows λ_write / C_write, columns λ_read / C_read, the best pair per cell.
fn grid_map(title: &str, grid: &[GridRow]) -> String {
    let mut text = format!(
        "{title}\n\nRows: λ_write / C_write; columns: λ_read / C_read; `-` where no pair was stable.\n\n| writes \\ reads |"
    );
    for step in 0..classes::GRID_STEPS {
        text += &format!(" {:.2} |", classes::grid_load(step));
    }
    text += "\n|---|";
    text += &"---|".repeat(classes::GRID_STEPS);
    for write in (0..classes::GRID_STEPS).rev() {
        text += &format!("\n| {:.2} |", classes::grid_load(write));
        for read in 0..classes::GRID_STEPS {
            let cell = grid.iter().find(|r| {
                (r.read_load - classes::grid_load(read)).abs() < 1e-9
                    && (r.write_load - classes::grid_load(write)).abs() < 1e-9
            });
            text += &match cell.and_then(|c| c.best) {
                Some((r, w)) => format!(" ({r},{w}) |"),
                None if cell.is_some() => " - |".to_owned(),
                None => " |".to_owned(),
            };
        }
    }
    text
}

/// C_α = L / Σ α_i u_i(k): the uncoded capacity of a mix with `read_share` reads.
fn mix_capacity_per_s(read_share: f64) -> f64 {
    let k = usize::from(CODE.k);
    SLOTS as f64 / (read_share * read_class().usage_s(k) + (1.0 - read_share) * write_class().usage_s(k))
}

fn run_point_job(job: &Job, options: &FastcloudOptions) -> anyhow::Result<Point> {
    let requests = options.requests_per_point();
    match *job {
        Job::Table { row, column, load, seed } => {
            let class = table1::cell_class(row, column);
            let (admission, slots, n) = table1::COLUMNS[column];
            let rate = table1::LOADS[load] * class.capacity_per_s(n);
            let kind = CodeLengthKind::Fixed { n: vec![n as u16] };
            let code = ClassCode { k: 3, n_max: n as u16 };
            let setup = FecSetup::one_class(code, class.delay, slots, admission, kind, seed);
            run_point(&setup, rate, requests, seed * 1_000 + load as u64)
        }
        Job::Adaptive { policy, load, seed } => {
            let rate = ADAPTIVE_LOADS[load] * read_class().capacity_per_s(3);
            let kind = adaptive_policies()[policy].1.clone();
            // Every policy sees the same arrivals at a load (common random numbers).
            run_point(
                &setup(read_delay(), SLOTS, Admission::NonBlocking, kind, seed),
                rate,
                requests,
                seed * 1_000 + load as u64,
            )
        }
        Job::Capacity { .. }
        | Job::Grid { .. }
        | Job::Mix { .. }
        | Job::WriteCapacity { .. }
        | Job::WriteDurability
        | Job::Fit { .. }
        | Job::ServiceTime { .. } => {
            unreachable!("run_job runs these")
        }
    }
}

fn label(job: &Job) -> String {
    match *job {
        Job::Table { row, column, load, seed } => {
            let (admission, slots, n) = table1::COLUMNS[column];
            format!(
                "table I {:?} L{slots} n{n} share {} at {} C, seed {seed}",
                admission,
                table1::SHIFT_SHARES[row],
                table1::LOADS[load]
            )
        }
        Job::Adaptive { policy, load, seed } => {
            format!("{} at {} C(3,3), seed {seed}", adaptive_policies()[policy].0, ADAPTIVE_LOADS[load])
        }
        Job::Capacity { n } => format!("({n},3) saturated"),
        Job::Grid { layers, read, write, pair } => {
            let (r, w) = classes::fixed_pairs(layers)[pair];
            format!(
                "fig. {} ({r},{w}) at reads {:.2}, writes {:.2}",
                layers.figure(),
                classes::grid_load(read),
                classes::grid_load(write)
            )
        }
        Job::WriteCapacity { rest } => format!("(6,3) writes acknowledged at k, the rest {rest:?}, saturated"),
        Job::WriteDurability => "(6,3) writes completed in the background".to_owned(),
        Job::Fit { n } => format!("fit of ({n},3) task records"),
        Job::ServiceTime { code, beta } => {
            let (n, k) = fig3::CODES[code];
            format!("fig. 3 ({n},{k}) at β {}", fig3::SIZE_EXPONENTS[beta])
        }
        Job::Mix { mix, load, policy, seed } => format!(
            "{} at {} C with {} reads, seed {seed}",
            classes::mix_policies()[policy].0,
            classes::MIX_LOADS[load],
            classes::MIXES[mix]
        ),
    }
}

fn jobs(options: &FastcloudOptions) -> Vec<Job> {
    let mut jobs = Vec::new();
    for seed in options.seeds() {
        for row in 0..table1::SHIFT_SHARES.len() {
            for column in 0..table1::COLUMNS.len() {
                jobs.extend((0..table1::LOADS.len()).map(|load| Job::Table { row, column, load, seed }));
            }
        }
        for policy in 0..adaptive_policies().len() {
            jobs.extend((0..ADAPTIVE_LOADS.len()).map(|load| Job::Adaptive { policy, load, seed }));
        }
    }
    jobs.extend((3..=6).map(|n| Job::Capacity { n }));
    jobs.extend([Job::WriteCapacity { rest: AfterAck::Cancel }, Job::WriteCapacity { rest: AfterAck::Continue }]);
    jobs.push(Job::WriteDurability);
    jobs.extend([Job::Fit { n: 3 }, Job::Fit { n: 6 }]);
    for beta in 0..fig3::SIZE_EXPONENTS.len() {
        jobs.extend((0..fig3::CODES.len()).map(|code| Job::ServiceTime { code, beta }));
    }
    // Figs. 8 and 9's grids, where (k,k) can be stable (λ_read/C_read + λ_write/C_write ≤ 1), one seed.
    for layers in classes::Layers::ALL {
        for read in 0..classes::GRID_STEPS {
            for write in 0..classes::GRID_STEPS - read {
                let pairs = classes::fixed_pairs(layers).len();
                jobs.extend((0..pairs).map(|pair| Job::Grid { layers, read, write, pair }));
            }
        }
    }
    for seed in options.seeds() {
        for mix in 0..classes::MIXES.len() {
            for load in 0..classes::MIX_LOADS.len() {
                jobs.extend((0..classes::mix_policies().len()).map(|policy| Job::Mix { mix, load, policy, seed }));
            }
        }
    }
    jobs
}

/// Number of simulations [`run`] will run.
pub fn run_count(options: &FastcloudOptions) -> usize {
    jobs(options).len()
}

/// Runs the experiment and writes its results folder under `out_dir`.
pub fn run(
    options: &FastcloudOptions,
    out_dir: &Path,
    progress: &(dyn Fn(Progress) + Sync),
) -> anyhow::Result<FastcloudOutcome> {
    anyhow::ensure!(options.threads > 0, "at least one thread");
    let jobs = jobs(options);
    let results = run_parallel(&jobs, options.threads, label, |job| run_job(job, options), progress);
    let measured: Vec<Measured> = results.into_iter().collect::<anyhow::Result<_>>()?;
    let mut capacity = Vec::new();
    let mut point_jobs = Vec::new();
    let mut points = Vec::new();
    let mut class_jobs = Vec::new();
    let mut class_points = Vec::new();
    let mut write_capacity = Vec::new();
    let mut write_durability = None;
    let mut fits = Vec::new();
    let mut fig_3 = Vec::new();
    for (job, measured) in jobs.into_iter().zip(measured) {
        match (measured, &job) {
            (Measured::Throughput(throughput), Job::WriteCapacity { rest }) => write_capacity.push((*rest, throughput)),
            (Measured::Durability(durability), _) => write_durability = Some(durability),
            (Measured::Fit(n, fit, online), _) => fits.push((n, fit, online)),
            (Measured::ServiceTimes(times), _) => fig_3.push(times),
            (Measured::Classes(point), _) => {
                class_jobs.push(job);
                class_points.push(point);
            }
            (Measured::Throughput(simulated_per_s), Job::Capacity { n }) => capacity.push(CapacityRow {
                n: *n,
                model_capacity_per_s: read_class().capacity_per_s(*n),
                simulated_per_s,
            }),
            (Measured::Point(point), _) => {
                point_jobs.push(job);
                points.push(point);
            }
            (Measured::Throughput(_), _) => unreachable!("only capacity jobs measure throughput"),
        }
    }
    let jobs = point_jobs;
    let grid = grid_rows(&class_jobs, &class_points, classes::Layers::Fig8);
    let grid_fig9 = grid_rows(&class_jobs, &class_points, classes::Layers::Fig9);
    let mixes = mix_rows(&class_jobs, &class_points);
    let seeds = options.seeds();
    let table_cells = table_cells(&jobs, &points);
    let adaptive = adaptive_rows(&jobs, &points, seeds.len());
    let violations: u64 = points.iter().map(|p| p.violations).sum();
    let most_in_flight = jobs
        .iter()
        .zip(&points)
        .filter(|(job, _)| !matches!(job, Job::Table { .. }))
        .map(|(_, p)| p.most_in_flight)
        .max()
        .unwrap_or(0);
    let summary = Summary {
        requests_per_point: options.requests_per_point(),
        seeds,
        read_thresholds: read_class().thresholds(6),
        write_thresholds: write_class().thresholds(6),
        table_1: table_cells,
        adaptive,
        capacity,
        grid,
        grid_fig9,
        mixes,
        write_capacity,
        write_durability,
        fits,
        fig_3,
    };
    let mut findings = judge::closed_forms(&summary.read_thresholds);
    findings.extend(judge::service_times(&summary.fig_3));
    findings.push(judge::table_1(&summary.table_1));
    findings.push(judge::capacity(&summary.capacity));
    findings.extend(judge::low_load(&summary.adaptive));
    findings.extend(judge::adaptive(&summary.adaptive));
    findings.extend(judge::two_classes(&summary.grid, &summary.grid_fig9, &summary.mixes));
    let write_model = write_class().capacity_per_s(usize::from(CODE.n_max));
    findings.extend(judge::writes(&summary.write_capacity, write_model, summary.write_durability.as_ref()));
    findings.extend(judge::fits(&summary.fits, &read_delay()));
    findings.push(judge::records(violations, most_in_flight, points.len()));
    let table_markdown = table1::markdown(&summary.table_1);
    let adaptive_markdown = adaptive_markdown(&summary.adaptive);
    let files = write(out_dir, options, &summary, &findings, &table_markdown, &adaptive_markdown)?;
    let runs = points.len()
        + summary.capacity.len()
        + class_points.len()
        + summary.write_capacity.len()
        + 1
        + summary.fits.len()
        + summary.fig_3.len();
    Ok(FastcloudOutcome { findings, table_markdown, adaptive_markdown, files, runs })
}

fn table_cells(jobs: &[Job], points: &[Point]) -> Vec<table1::Cell> {
    let mut cells = Vec::new();
    for row in 0..table1::SHIFT_SHARES.len() {
        for column in 0..table1::COLUMNS.len() {
            let means: Vec<f64> = (0..table1::LOADS.len())
                .map(|load| {
                    let of_cell = jobs.iter().zip(points).filter(|(job, _)| {
                        matches!(job, Job::Table { row: r, column: c, load: l, .. } if *r == row && *c == column && *l == load)
                    });
                    let means: Vec<f64> = of_cell.map(|(_, p)| p.mean_s).collect();
                    means.iter().sum::<f64>() / means.len() as f64
                })
                .collect();
            cells.push(table1::cell(row, column, &means));
        }
    }
    cells
}

fn adaptive_rows(jobs: &[Job], points: &[Point], seeds: usize) -> Vec<AdaptiveRow> {
    let policies = adaptive_policies();
    let mut rows = Vec::new();
    for (policy, (name, _)) in policies.iter().enumerate() {
        for (load, &fraction) in ADAPTIVE_LOADS.iter().enumerate() {
            let of_point: Vec<&Point> = jobs
                .iter()
                .zip(points)
                .filter(
                    |(job, _)| matches!(job, Job::Adaptive { policy: p, load: l, .. } if *p == policy && *l == load),
                )
                .map(|(_, point)| point)
                .collect();
            debug_assert_eq!(of_point.len(), seeds);
            let average =
                |f: &dyn Fn(&Point) -> f64| of_point.iter().map(|p| f(p)).sum::<f64>() / of_point.len() as f64;
            rows.push(AdaptiveRow {
                policy: name,
                load: fraction,
                rate_per_s: fraction * read_class().capacity_per_s(3),
                mean_s: average(&|p| p.mean_s),
                p999_s: average(&|p| p.p999_s),
                mean_n: average(&|p| p.mean_n()),
                share_n_max: average(&|p| p.share_of(6)),
                share_k: average(&|p| p.share_of(3)),
                stable: of_point.iter().all(|p| p.stable),
            });
        }
    }
    rows
}

/// The best stable fixed code's value of `metric` at `load`, if any fixed code was stable.
fn best_fixed(rows: &[AdaptiveRow], load: f64, metric: impl Fn(&AdaptiveRow) -> f64) -> Option<f64> {
    let fixed: Vec<&str> = adaptive_policies().iter().take(FIXED_POLICIES).map(|(name, _)| *name).collect();
    rows.iter().filter(|r| r.load == load && r.stable && fixed.contains(&r.policy)).map(metric).min_by(f64::total_cmp)
}

fn row<'a>(rows: &'a [AdaptiveRow], policy: &str, load: f64) -> &'a AdaptiveRow {
    rows.iter().find(|r| r.policy == policy && r.load == load).expect("every policy ran at every load")
}

fn adaptive_markdown(rows: &[AdaptiveRow]) -> String {
    let mut text = String::from(
        "Mean and 99.9th percentile latency (ms) by load (fraction of C̃(3,3) = 38.1 req/s), and the mean code length; \
         `unstable` where the queue grew. Ratios to the best stable fixed code in brackets.\n\n| policy |",
    );
    for load in ADAPTIVE_LOADS {
        text += &format!(" {load} |");
    }
    text += "\n|---|";
    text += &"---|".repeat(ADAPTIVE_LOADS.len());
    for (name, _) in adaptive_policies() {
        text += &format!("\n| {name} |");
        for load in ADAPTIVE_LOADS {
            let r = row(rows, name, load);
            if !r.stable {
                text += " unstable |";
                continue;
            }
            let mean_ratio = best_fixed(rows, load, |r| r.mean_s).map_or(f64::NAN, |best| r.mean_s / best);
            let tail_ratio = best_fixed(rows, load, |r| r.p999_s).map_or(f64::NAN, |best| r.p999_s / best);
            text += &format!(
                " {:.0} [{mean_ratio:.2}] / {:.0} [{tail_ratio:.2}], n {:.2} |",
                r.mean_s * 1e3,
                r.p999_s * 1e3,
                r.mean_n
            );
        }
    }
    text + "\n"
}

/// Figs. 8 and 9 as maps (best pair per cell) and Figs. 10/11 as tables.
fn classes_markdown(grid: &[GridRow], grid_fig9: &[GridRow], mixes: &[MixRow]) -> String {
    let mut text = grid_map("## Fig. 8: the best fixed pair (n_read, n_write) by load", grid);
    text += "\n\n";
    text += &grid_map("## Fig. 9: the same with writes of k = 2 (n_write from 2 to 5)", grid_fig9);
    text += "\n\n## Figs. 10, 11: MBAFEC and Greedy against the best fixed pair\n\nPer mix and load (fraction of C_α): read \
             and write mean / p99.9 in ms and mean n; the best stable fixed pair's read p99.9 for comparison.\n\n\
             | α_read | load | policy | read mean / p99.9, n | write mean / p99.9, n | best fixed read p99.9 |\n|---|---|---|---|---|---|";
    for share in classes::MIXES {
        for load in classes::MIX_LOADS {
            let best = mixes
                .iter()
                .filter(|r| r.read_share == share && r.load == load && r.stable && r.policy.starts_with('('))
                .min_by(|a, b| a.read.p999_s.total_cmp(&b.read.p999_s));
            for policy in ["mbafec", "greedy"] {
                let Some(r) = mixes.iter().find(|r| r.read_share == share && r.load == load && r.policy == policy)
                else {
                    continue;
                };
                text += &format!(
                    "\n| {share} | {load} | {policy} | {:.0} / {:.0}, {:.2} | {:.0} / {:.0}, {:.2} | {} |",
                    r.read.mean_s * 1e3,
                    r.read.p999_s * 1e3,
                    r.read.mean_n,
                    r.write.mean_s * 1e3,
                    r.write.p999_s * 1e3,
                    r.write.mean_n,
                    best.map_or("-".to_owned(), |b| format!("{:.0} {}", b.read.p999_s * 1e3, b.policy)),
                );
            }
        }
    }
    text + "\n"
}

fn write(
    out_dir: &Path,
    options: &FastcloudOptions,
    summary: &Summary,
    findings: &[PaperFinding],
    table_markdown: &str,
    adaptive_markdown: &str,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = crate::ResultsDir::create(out_dir)?;
    let mut put = |name: &str, text: String| out.put(name, text);
    put("findings.json", serde_json::to_string_pretty(findings)? + "\n")?;
    put("summary.json", serde_json::to_string_pretty(summary)? + "\n")?;
    put("table-1.md", format!("# Table I: |D_sim − D̃| / D̃ in percent, lowtail [paper]\n\n{table_markdown}"))?;
    put("adaptive.md", format!("# BAFEC and Greedy against fixed codes (Figs. 6, 7)\n\n{adaptive_markdown}"))?;
    let fig_3_markdown = fig3::markdown(&summary.fig_3);
    put("fig-3.md", format!("# Fig. 3: service times of 2 MB reads by code\n\n{fig_3_markdown}"))?;
    let classes_markdown = classes_markdown(&summary.grid, &summary.grid_fig9, &summary.mixes);
    put("classes.md", format!("# Two classes: reads and writes\n\n{classes_markdown}"))?;
    let mut plots = plots(out_dir, &summary.adaptive, options.png)?;
    plots.extend(fig_3_plot(out_dir, &summary.fig_3, options.png)?);
    let adaptive = format!("{adaptive_markdown}\n{classes_markdown}");
    let html = crate::paper_html(
        "FAST CLOUD (Liang &amp; Kozat), simulated",
        findings,
        &plots,
        &[("Fig. 3", &fig_3_markdown), ("Table I", table_markdown), ("Adaptive codes", &adaptive)],
    );
    put("report.html", html)?;
    Ok(out.files(plots))
}

fn plots(out_dir: &Path, rows: &[AdaptiveRow], png: bool) -> anyhow::Result<Vec<PathBuf>> {
    let ratio_lines = |metric: fn(&AdaptiveRow) -> f64| -> Vec<(String, Vec<(f64, f64)>)> {
        adaptive_policies()
            .iter()
            .map(|(name, _)| {
                let points = ADAPTIVE_LOADS
                    .iter()
                    .filter_map(|&load| {
                        let r = row(rows, name, load);
                        let best = best_fixed(rows, load, metric)?;
                        r.stable.then(|| (load, metric(r) / best))
                    })
                    .collect();
                ((*name).to_owned(), points)
            })
            .collect()
    };
    let panels = [
        report::LinePanel {
            caption: "mean latency (Fig. 6)".into(),
            y_label: "÷ best fixed code".into(),
            lines: ratio_lines(|r| r.mean_s),
        },
        report::LinePanel {
            caption: "99.9th percentile (Fig. 7)".into(),
            y_label: "÷ best fixed code".into(),
            lines: ratio_lines(|r| r.p999_s),
        },
    ];
    let mut files = report::write_line_panels(
        &out_dir.join("plots"),
        "adaptive",
        "FAST CLOUD: BAFEC and Greedy against fixed (n,3) codes, L = 16, 1 MB read fit",
        "load (fraction of C̃(3,3))",
        &panels,
        png,
    )?;
    let mix_lines = |share: fn(&AdaptiveRow) -> f64| -> Vec<(String, Vec<(f64, f64)>)> {
        ["greedy", "bafec", "bafec-waiting-work"]
            .iter()
            .map(|name| ((*name).to_owned(), ADAPTIVE_LOADS.iter().map(|&l| (l, share(row(rows, name, l)))).collect()))
            .collect()
    };
    let mix = [
        report::LinePanel {
            caption: "n = 6".into(),
            y_label: "share of requests".into(),
            lines: mix_lines(|r| r.share_n_max),
        },
        report::LinePanel {
            caption: "n = k = 3".into(),
            y_label: "share of requests".into(),
            lines: mix_lines(|r| r.share_k),
        },
    ];
    files.extend(report::write_line_panels(
        &out_dir.join("plots"),
        "code-mix",
        "FAST CLOUD: code mix by load (Fig. 11, one class)",
        "load (fraction of C̃(3,3))",
        &mix,
        png,
    )?);
    Ok(files)
}

/// Fig. 3: the CCDF of each code's service time, one panel per size model, drawn as its nines
/// (−log₁₀ of the CCDF: 1 at p90, 2 at p99), the paper's log-scale CCDF upside down.
fn fig_3_plot(out_dir: &Path, rows: &[fig3::ServiceTimes], png: bool) -> anyhow::Result<Vec<PathBuf>> {
    let panels: Vec<report::LinePanel> = fig3::SIZE_EXPONENTS
        .iter()
        .map(|&beta| report::LinePanel {
            caption: format!("β = {beta}"),
            y_label: "nines: −log₁₀ P(service time > t)".into(),
            lines: rows
                .iter()
                .filter(|r| r.beta == beta)
                .map(|r| {
                    let points = r.ccdf.iter().map(|&(s, tail)| (s * 1e3, -tail.log10())).collect();
                    (format!("({},{})", r.n, r.k), points)
                })
                .collect(),
        })
        .collect();
    report::write_line_panels(
        &out_dir.join("plots"),
        "fig-3",
        "FAST CLOUD Fig. 3: service time of 2 MB reads by code (chunk delay = 1 MB fit × size^β)",
        "t (ms)",
        &panels,
        png,
    )
}

mod judge;
pub(crate) use judge::finding;
