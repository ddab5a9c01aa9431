//! `lowtail bench s3`: PUT, GET and DELETE throughput, latency and server CPU time per operation
//! of a lowtail cluster, or of any S3 endpoint, through the S3 API, measured with the AWS SDK for
//! Rust as a real client would see them; optionally of a peer store as well, interleaved phase by
//! phase, so that both see the same machine at nearly the same time.
//!
//! Owns: the benchmark's settings and their checks, the order of the phases (rounds ×
//! concurrencies × object sizes × scenarios × PUT, GET, DELETE × targets), the rows they become
//! (`S3Row`, the JSON schema) and their rendering as a table or JSON.
//! Must not: hide a failed request (every one is counted in its row's `errors`), run a phase itself
//! (`s3_phase` does), start or stop a store (`s3_target` does), fault a process itself
//! (`s3_adversity` does), or print anything (output is the caller's).

use crate::byte_size::format_byte_size;
use crate::host_cpu::{clock_ticks_per_s, cpu_model};
use crate::s3_adversity::{ApplyTo, FailSlowShape, Scenario};
use crate::s3_client::{error_text, measurement_client};
use crate::s3_compare::{HostFacts, align_right, compare, optional_figure, render_comparison};
pub use crate::s3_phase::VERIFY_EVERY;
use crate::s3_phase::{ClientTally, KEPT_ERRORS, PhasePlan, run_phase};
pub use crate::s3_row::{PhaseLabel, RebuildRow, S3Op, S3Row, SettleRow, row_from_histogram};
use crate::s3_target::{Target, TargetSource, TargetSpec};
use anyhow::{Context, ensure};
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Object sizes measured when none are named: a small object (one stripe, latency-bound) and a
/// large one (bandwidth-bound).
pub const DEFAULT_OBJECT_SIZES_BYTES: [usize; 2] = [4 * 1024, 1024 * 1024];
/// Requests in flight when not told otherwise.
pub const DEFAULT_CONCURRENCY: usize = 8;
/// Length of each phase when not told otherwise.
pub const DEFAULT_PHASE_DURATION: Duration = Duration::from_secs(10);
/// Length of each phase with `--quick`.
pub const QUICK_PHASE_DURATION: Duration = Duration::from_secs(2);
/// Upper bound of requests per phase, so a very fast cluster cannot make a phase's key list (and the
/// objects it leaves) grow without bound.
pub const DEFAULT_MAX_REQUESTS_PER_PHASE: u64 = 1_000_000;
/// Bucket the benchmark writes into when not told otherwise (created when missing).
pub const DEFAULT_BUCKET: &str = "lowtail-bench";
/// Most rounds of one run: a bound on the run's length, far above any sensible use.
pub const MAX_ROUNDS: usize = 1000;
/// Time limit of one request: a hung request becomes an error instead of a hung benchmark.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The Zipf exponent of the `hot` scenario's key popularity (EC-Store's and YCSB's skew, about 1).
pub const HOT_ZIPF_EXPONENT: f64 = 1.0;

/// What to measure and how.
#[derive(Clone, Debug)]
pub struct S3BenchConfig {
    /// The store measured (lowtail, or an S3 endpoint).
    pub target: TargetSpec,
    /// A second store measured as well, interleaved with the first phase by phase.
    pub peer: Option<TargetSpec>,
    /// Bucket of the objects, created on every target when missing.
    pub bucket: String,
    /// Object sizes, one PUT, GET and DELETE phase each.
    pub object_sizes_bytes: Vec<usize>,
    /// Requests in flight (closed loop: each client issues its next request when its last one
    /// ends); every concurrency has phases of its own.
    pub concurrencies: Vec<usize>,
    /// Times the whole sequence of phases runs.
    pub rounds: usize,
    /// How long each PUT and GET phase issues requests.
    pub phase_duration: Duration,
    /// A phase also ends after this many requests.
    pub max_requests_per_phase: u64,
    /// Seed of the object contents and of the GET key choice.
    pub seed: u64,
    /// Draw a progress bar on stderr (only ever drawn when stderr is a terminal).
    pub show_progress: bool,
    /// The adversities each cell is also measured under, beside `healthy` (always measured: it is
    /// the baseline, and its PUT writes what every scenario's GET reads).
    pub scenarios: Vec<Scenario>,
    /// The duty cycle of `fail-slow`.
    pub fail_slow: FailSlowShape,
}

impl S3BenchConfig {
    /// The defaults against `target`, without a peer.
    pub fn new(target: TargetSpec) -> S3BenchConfig {
        S3BenchConfig {
            target,
            peer: None,
            bucket: DEFAULT_BUCKET.to_string(),
            object_sizes_bytes: DEFAULT_OBJECT_SIZES_BYTES.to_vec(),
            concurrencies: vec![DEFAULT_CONCURRENCY],
            rounds: 1,
            phase_duration: DEFAULT_PHASE_DURATION,
            max_requests_per_phase: DEFAULT_MAX_REQUESTS_PER_PHASE,
            seed: 1,
            show_progress: false,
            scenarios: Vec::new(),
            fail_slow: FailSlowShape::default(),
        }
    }

    /// Refuses what cannot run, saying which setting is wrong.
    pub fn validate(&self) -> anyhow::Result<()> {
        ensure!(!self.object_sizes_bytes.is_empty(), "no object sizes to measure");
        ensure!(self.object_sizes_bytes.iter().all(|&bytes| bytes > 0), "object sizes must be at least 1 byte");
        if let Some(bytes) = first_repeated(&self.object_sizes_bytes) {
            anyhow::bail!("object size {} is named twice", format_byte_size(bytes));
        }
        ensure!(!self.concurrencies.is_empty(), "no concurrency to measure");
        ensure!(self.concurrencies.iter().all(|&clients| clients > 0), "concurrency must be at least 1");
        if let Some(clients) = first_repeated(&self.concurrencies) {
            anyhow::bail!("concurrency {clients} is named twice");
        }
        ensure!((1..=MAX_ROUNDS).contains(&self.rounds), "rounds must be 1 to {MAX_ROUNDS}, not {}", self.rounds);
        ensure!(!self.phase_duration.is_zero(), "the phase duration must be positive");
        ensure!(self.max_requests_per_phase > 0, "at least one request per phase is needed");
        validate_bucket_name(&self.bucket)?;
        ensure!(!self.scenarios.contains(&Scenario::Healthy), "healthy is always measured: name only adversities");
        if let Some(at) = (1..self.scenarios.len()).find(|&at| self.scenarios[..at].contains(&self.scenarios[at])) {
            anyhow::bail!("scenario {} is named twice", self.scenarios[at].name());
        }
        if self.scenarios.contains(&Scenario::FailSlow) {
            self.fail_slow.validate()?;
        }
        self.target.validate()?;
        let rebuild_without_dir = self
            .target_specs()
            .find(|spec| spec.is_endpoint() && spec.victim_data_dir.is_none())
            .filter(|_| self.scenarios.contains(&Scenario::Rebuild));
        if let Some(spec) = rebuild_without_dir {
            anyhow::bail!(
                "{}: scenario rebuild empties the victim's data directory: name it (--victim-dir, --peer-victim-dir)",
                spec.name
            );
        }
        if let Some(peer) = &self.peer {
            peer.validate()?;
            ensure!(
                !matches!(peer.source, TargetSource::Fresh(_)),
                "the peer must be an S3 endpoint or a running lowtail cluster (its manifest)"
            );
            ensure!(peer.name != self.target.name, "the peer's name must differ from the target's ({})", peer.name);
            if let (TargetSource::Manifest(mine), TargetSource::Manifest(theirs)) = (&self.target.source, &peer.source)
            {
                ensure!(mine != theirs, "the peer is the target's own cluster ({}): name another", theirs.display());
            }
        }
        Ok(())
    }

    /// The targets in the order their phases run.
    fn target_specs(&self) -> impl Iterator<Item = &TargetSpec> {
        std::iter::once(&self.target).chain(&self.peer)
    }

    /// Every scenario a cell runs, `healthy` first.
    fn all_scenarios(&self) -> impl Iterator<Item = Scenario> + '_ {
        std::iter::once(Scenario::Healthy).chain(self.scenarios.iter().copied())
    }
}

fn first_repeated(values: &[usize]) -> Option<usize> {
    values.iter().enumerate().find(|(at, value)| values[..*at].contains(value)).map(|(_, &value)| value)
}

/// S3's bucket naming rules (3 to 63 lowercase letters, digits, dots and hyphens, starting and
/// ending with a letter or digit), checked here so that a bad name is refused before any store
/// is started.
fn validate_bucket_name(bucket: &str) -> anyhow::Result<()> {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let alphanumeric = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    ensure!(
        (3..=63).contains(&bucket.len())
            && bucket.chars().all(allowed)
            && alphanumeric(bucket.chars().next())
            && alphanumeric(bucket.chars().last()),
        "bucket name {bucket:?} is not a valid S3 bucket name (3 to 63 lowercase letters, digits, '.' and '-', \
         starting and ending with a letter or digit)"
    );
    Ok(())
}

/// A target as the report describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetSummary {
    /// Its name in the rows.
    pub name: String,
    /// Its S3 endpoint.
    pub endpoint: String,
    /// What it is.
    pub description: String,
    /// Whose CPU time its `server_cpu_ms_per_op` is, or why there is none.
    pub cpu_note: String,
    /// The process its scenarios faulted (empty without scenarios).
    pub victim_note: String,
}

/// A whole run.
#[derive(Clone, Debug)]
pub struct S3BenchReport {
    /// One row per phase, in the order they ran.
    pub rows: Vec<S3Row>,
    /// One row per rebuild of the `rebuild` scenario that the target reported on.
    pub rebuilds: Vec<RebuildRow>,
    /// One row per scenario lifted on a target whose CPU time is measured: how long it took to
    /// fall quiet before the next phase.
    pub settles: Vec<SettleRow>,
    /// The targets, the measured one first.
    pub targets: Vec<TargetSummary>,
    /// The bucket of the objects.
    pub bucket: String,
    /// How long each PUT and GET phase issued requests.
    pub phase_duration: Duration,
    /// Rounds run.
    pub rounds: usize,
    /// The adversities measured beside `healthy`.
    pub scenarios: Vec<Scenario>,
    /// The duty cycle of `fail-slow`.
    pub fail_slow: FailSlowShape,
    /// The machine and the date.
    pub host: HostFacts,
    /// The first few failures, for the message that goes with a non-zero `errors`.
    pub first_errors: Vec<String>,
}

impl S3BenchReport {
    /// Failed requests over all rows.
    pub fn total_errors(&self) -> u64 {
        self.rows.iter().map(|row| row.errors).sum()
    }
}

/// Runs the benchmark: gets every target ready (starting a fresh cluster if asked to), runs the
/// rounds, and stops what it started, even when a phase fails.
pub fn run_s3_bench(config: &S3BenchConfig) -> anyhow::Result<S3BenchReport> {
    config.validate()?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(run_async(config))
}

async fn run_async(config: &S3BenchConfig) -> anyhow::Result<S3BenchReport> {
    let mut targets: Vec<Target> = Vec::new();
    let needs_victim = config.scenarios.iter().any(|scenario| scenario.needs_victim());
    for spec in config.target_specs() {
        // A process is charged to one target only: the first that names it.
        let taken: Vec<u32> = targets.iter().flat_map(|target| target.server_pids.iter().copied()).collect();
        match crate::s3_target::start(spec, &taken, needs_victim).await {
            Ok(target) => targets.push(target),
            Err(error) => {
                stop_all(targets).await;
                return Err(error.context(format!("cannot get target {} ready", spec.name)));
            }
        }
    }
    let result = run_rounds(config, &mut targets).await;
    stop_all(targets).await;
    result
}

async fn stop_all(targets: Vec<Target>) {
    for target in targets {
        target.stop().await;
    }
}

/// One (round, concurrency, object size): its phases read and write under a prefix of their own.
struct Cell {
    round: usize,
    concurrency: usize,
    object_bytes: usize,
    prefix: String,
}

/// The rows and failures of the phases run so far.
#[derive(Default)]
struct Collected {
    rows: Vec<S3Row>,
    rebuilds: Vec<RebuildRow>,
    settles: Vec<SettleRow>,
    first_errors: Vec<String>,
}

async fn run_rounds(config: &S3BenchConfig, targets: &mut [Target]) -> anyhow::Result<S3BenchReport> {
    let clients: Vec<aws_sdk_s3::Client> =
        targets.iter().map(|target| measurement_client(&target.endpoint, "lowtail-bench", REQUEST_TIMEOUT)).collect();
    for (target, s3) in targets.iter().zip(&clients) {
        ensure_bucket(s3, &config.bucket).await.with_context(|| format!("target {}", target.name))?;
    }
    // A prefix of its own per run, so runs against one store never read each other's objects.
    let run_id = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let bar = progress_bar(config, targets.len());
    let mut progress = Progress { bar: &bar, collected: Collected::default() };
    for round in 1..=config.rounds {
        for &concurrency in &config.concurrencies {
            for &object_bytes in &config.object_sizes_bytes {
                let prefix = format!("run-{run_id}/round-{round}/c{concurrency}");
                let cell = Cell { round, concurrency, object_bytes, prefix };
                run_cell(config, targets, &clients, &cell, &mut progress).await?;
            }
        }
    }
    bar.finish_and_clear();
    let mut collected = progress.collected;
    collected.first_errors.truncate(KEPT_ERRORS);
    Ok(S3BenchReport {
        rows: collected.rows,
        rebuilds: collected.rebuilds,
        settles: collected.settles,
        targets: targets.iter().map(summary).collect(),
        bucket: config.bucket.clone(),
        phase_duration: config.phase_duration,
        rounds: config.rounds,
        scenarios: config.scenarios.clone(),
        fail_slow: config.fail_slow,
        host: host_facts(),
        first_errors: collected.first_errors,
    })
}

fn summary(target: &Target) -> TargetSummary {
    TargetSummary {
        name: target.name.clone(),
        endpoint: target.endpoint.url.clone(),
        description: target.description.clone(),
        cpu_note: target.cpu_note.clone(),
        victim_note: match target.hot_note.is_empty() {
            true => target.victim_note.clone(),
            false => format!("{} (hot: {})", target.victim_note, target.hot_note).trim_start().to_string(),
        },
    }
}

fn host_facts() -> HostFacts {
    HostFacts {
        cpu_model: cpu_model(),
        logical_cpus: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        date_utc: time::OffsetDateTime::now_utc().date().to_string(),
    }
}

/// The cell's healthy PUT phase on every target, then its healthy GET phase on every target (each
/// reading what its own PUT wrote); then each scenario on every target in turn (PUT, GET of the
/// healthy PUT's objects, DELETE of the scenario's own, under the fault); then the healthy DELETE
/// phase on every target.
async fn run_cell(
    config: &S3BenchConfig,
    targets: &mut [Target],
    clients: &[aws_sdk_s3::Client],
    cell: &Cell,
    progress: &mut Progress<'_>,
) -> anyhow::Result<()> {
    let order = turn_order(targets.len(), cell.round);
    let mut healthy_written: Vec<Arc<Vec<u64>>> = (0..targets.len()).map(|_| Arc::new(Vec::new())).collect();
    for &index in &order {
        settle_others(targets, index).await;
        let plan = phase_plan(config, &targets[index], &clients[index], &cell.prefix);
        let written = run_put(&plan, cell, Scenario::Healthy, progress).await?;
        healthy_written[index] = Arc::new(written);
    }
    for &index in &order {
        settle_others(targets, index).await;
        let plan = phase_plan(config, &targets[index], &clients[index], &cell.prefix);
        run_recorded(&plan, cell, Scenario::Healthy, S3Op::Get, &healthy_written[index], progress).await?;
    }
    for &scenario in &config.scenarios {
        for &index in &order {
            settle_others(targets, index).await;
            let read = Arc::clone(&healthy_written[index]);
            run_under(config, &mut targets[index], &clients[index], cell, scenario, &read, progress).await?;
        }
    }
    for &index in &order {
        settle_others(targets, index).await;
        let plan = phase_plan(config, &targets[index], &clients[index], &cell.prefix);
        run_recorded(&plan, cell, Scenario::Healthy, S3Op::Delete, &healthy_written[index], progress).await?;
    }
    Ok(())
}

/// Waits until every target but `index` has fallen quiet, so that what another target's last phase
/// left running (sealing the stripes a PUT phase filled, deleting their replicas, healing) does not
/// run under this one's phases and is charged to its tail (docs/benchmarks.md, "Settling").
async fn settle_others(targets: &[Target], index: usize) {
    for (other, target) in targets.iter().enumerate() {
        if other != index {
            target.wait_quiet().await;
        }
    }
}

/// What a phase of `target` in a cell whose keys are under `prefix` runs with.
fn phase_plan<'a>(
    config: &'a S3BenchConfig,
    target: &'a Target,
    s3: &'a aws_sdk_s3::Client,
    prefix: &'a str,
) -> PhasePlan<'a> {
    PhasePlan {
        target,
        s3,
        bucket: &config.bucket,
        prefix,
        seed: config.seed,
        duration: config.phase_duration,
        max_requests: config.max_requests_per_phase,
        zipf_exponent: None,
    }
}

/// A PUT phase; the objects it wrote (refused when none was: there would be nothing to GET).
async fn run_put(
    plan: &PhasePlan<'_>,
    cell: &Cell,
    scenario: Scenario,
    progress: &mut Progress<'_>,
) -> anyhow::Result<Vec<u64>> {
    let tally = run_recorded(plan, cell, scenario, S3Op::Put, &Arc::new(Vec::new()), progress).await?;
    ensure!(
        !tally.written.is_empty(),
        "{}: no {} object was written under {}, so there is nothing to GET or DELETE; first failures: {}",
        plan.target.name,
        format_byte_size(cell.object_bytes),
        scenario.name(),
        tally.first_errors.join("; ")
    );
    Ok(tally.written)
}

/// `scenario` on `target`: applied to its victim, then a PUT phase of new keys, a GET phase of the
/// healthy PUT's objects (`healthy_written`: placed while every process was well, as data is when
/// a node turns slow or fails) and a DELETE phase of the new keys; then lifted, and the target
/// ready again before the next phase. Lifted even when a phase fails.
async fn run_under(
    config: &S3BenchConfig,
    target: &mut Target,
    s3: &aws_sdk_s3::Client,
    cell: &Cell,
    scenario: Scenario,
    healthy_written: &Arc<Vec<u64>>,
    progress: &mut Progress<'_>,
) -> anyhow::Result<()> {
    let fallback_log = std::env::temp_dir().join(format!("lowtail-bench-restarted-{}.log", std::process::id()));
    let to = ApplyTo {
        pid: target.victim_pid,
        shape: config.fail_slow,
        wipe: target.victim_wipe.clone(),
        fallback_log: fallback_log.clone(),
    };
    let before = target.repair_progress().await?;
    let mut applied = tokio::task::spawn_blocking(move || crate::s3_adversity::apply(scenario, &to))
        .await?
        .with_context(|| format!("{}: cannot apply {}", target.name, scenario.name()))?;
    let (restarted_at, restarted_at_ms) = (Instant::now(), unix_now_ms());
    if let Some(child) = applied.take_restarted() {
        target.replace_victim(child);
    }
    let scenario_prefix = format!("{}/{}", cell.prefix, scenario.name());
    if scenario.is_workload() {
        return run_hot(config, target, s3, cell, healthy_written, progress).await;
    }
    let measured = async {
        let write_plan = phase_plan(config, target, s3, &scenario_prefix);
        let written = Arc::new(run_put(&write_plan, cell, scenario, progress).await?);
        let read_plan = phase_plan(config, target, s3, &cell.prefix);
        run_recorded(&read_plan, cell, scenario, S3Op::Get, healthy_written, progress).await?;
        run_recorded(&write_plan, cell, scenario, S3Op::Delete, &written, progress).await?;
        anyhow::Ok(())
    }
    .await;
    let lifted = tokio::task::spawn_blocking(move || applied.lift(&fallback_log))
        .await?
        .with_context(|| format!("{}: cannot lift {}", target.name, scenario.name()))?;
    if let Some(child) = lifted.restarted {
        target.replace_victim(child);
    }
    target.wait_ready().await?;
    measured?;
    if scenario == Scenario::Rebuild
        && let (Some(before), Some(whole)) = (before, target.wait_whole(restarted_at_ms).await?)
    {
        progress.collected.rebuilds.push(RebuildRow {
            target: target.name.clone(),
            round: cell.round,
            object_bytes: cell.object_bytes,
            concurrency: cell.concurrency,
            seconds_to_whole: restarted_at.elapsed().as_secs_f64(),
            bytes_rebuilt: whole.bytes_repaired.saturating_sub(before.bytes_repaired),
            data_units: target.data_units,
        });
    }
    // Whatever the scenario left running (a peer healing a wiped drive, which says nothing of its
    // progress) must not run under the next target's phases.
    if let Some(settled) = target.wait_quiet().await {
        progress.collected.settles.push(SettleRow {
            target: target.name.clone(),
            round: cell.round,
            object_bytes: cell.object_bytes,
            scenario: scenario.name().into(),
            seconds: settled.waited.as_secs_f64(),
            quiet: settled.quiet,
        });
    }
    Ok(())
}

/// `hot` on `target`: one GET phase over the healthy PUT's objects, drawn Zipf-wise
/// ([`HOT_ZIPF_EXPONENT`]) with the ones sharing the target's hot node the most popular.
async fn run_hot(
    config: &S3BenchConfig,
    target: &mut Target,
    s3: &aws_sdk_s3::Client,
    cell: &Cell,
    healthy_written: &Arc<Vec<u64>>,
    progress: &mut Progress<'_>,
) -> anyhow::Result<()> {
    let keys: Vec<(u64, String)> = healthy_written
        .iter()
        .map(|&index| (index, crate::s3_phase::object_key(&cell.prefix, cell.object_bytes, index)))
        .collect();
    let (order, note) = target.hot_order(keys, &config.bucket).await?;
    target.hot_note = note;
    let mut plan = phase_plan(config, target, s3, &cell.prefix);
    plan.zipf_exponent = Some(HOT_ZIPF_EXPONENT);
    run_recorded(&plan, cell, Scenario::Hot, S3Op::Get, &Arc::new(order), progress).await?;
    Ok(())
}

/// Now, in unix milliseconds.
fn unix_now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The order in which `targets` take their turns in `round` (from 1): as given in odd rounds,
/// reversed in even ones. A phase runs right after the other target's phase of the same kind and
/// inherits what that one left the machine doing (a PUT's page-cache writeback, compactions): one
/// fixed order charged it to the same target every round (docs/benchmarks.md: one build's 4 KiB
/// GET p99 2–3× the other's, whichever build ran first and so read right after the other's PUT).
fn turn_order(targets: usize, round: usize) -> Vec<usize> {
    if round % 2 == 1 { (0..targets).collect() } else { (0..targets).rev().collect() }
}

/// The progress bar and what the phases so far collected.
struct Progress<'a> {
    bar: &'a ProgressBar,
    collected: Collected,
}

/// Runs one phase and keeps its row and failures.
async fn run_recorded(
    plan: &PhasePlan<'_>,
    cell: &Cell,
    scenario: Scenario,
    op: S3Op,
    written: &Arc<Vec<u64>>,
    progress: &mut Progress<'_>,
) -> anyhow::Result<ClientTally> {
    let label = PhaseLabel {
        target: plan.target.name.clone(),
        round: cell.round,
        scenario,
        op,
        object_bytes: cell.object_bytes,
        concurrency: cell.concurrency,
    };
    progress.bar.set_message(format!(
        "round {} {} {} {} {} ×{}",
        cell.round,
        label.target,
        scenario.name(),
        op.name(),
        format_byte_size(cell.object_bytes),
        cell.concurrency
    ));
    let (row, tally) = run_phase(plan, label, written).await?;
    progress.collected.rows.push(row);
    progress.collected.first_errors.extend(tally.first_errors.iter().cloned());
    progress.bar.inc(1);
    Ok(tally)
}

pub(crate) async fn ensure_bucket(s3: &aws_sdk_s3::Client, bucket: &str) -> anyhow::Result<()> {
    if s3.head_bucket().bucket(bucket).send().await.is_ok() {
        return Ok(());
    }
    s3.create_bucket()
        .bucket(bucket)
        .send()
        .await
        .map_err(|error| anyhow::anyhow!("cannot create bucket {bucket}: {}", error_text(&error)))?;
    Ok(())
}

fn progress_bar(config: &S3BenchConfig, targets: usize) -> ProgressBar {
    let scenarios = config.all_scenarios().count();
    let phases = config.rounds * config.concurrencies.len() * config.object_sizes_bytes.len() * scenarios * 3 * targets;
    if !config.show_progress || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(phases as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} bench s3 [{bar:30}] {pos}/{len} phases {msg} ({elapsed})")
            .expect("a valid progress template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// The rows as a JSON array (one object per row), nothing else.
pub fn render_json(report: &S3BenchReport) -> String {
    serde_json::to_string_pretty(&report.rows).expect("rows are plain data and always serialise")
}

/// One table line per row and a legend; with two targets, the comparison table after it; the
/// first failures when there were any.
pub fn render_table(report: &S3BenchReport) -> String {
    let mut text = format!("{}\n{}", rows_table(&report.rows), legend(report));
    if let [first, second] = &report.targets[..] {
        let lines = compare(&report.rows, &first.name, &second.name);
        text.push_str("\n\n");
        text.push_str(&render_comparison(&lines, &first.name, &second.name, &report.host));
    }
    if !report.scenarios.is_empty() {
        let names: Vec<String> = report.targets.iter().map(|target| target.name.clone()).collect();
        let victims: Vec<(String, String)> =
            report.targets.iter().map(|target| (target.name.clone(), target.victim_note.clone())).collect();
        let lines = crate::s3_scenarios::against_healthy(&report.rows, &names);
        text.push_str("\n\n");
        text.push_str(&crate::s3_scenarios::render_scenarios(&lines, report.fail_slow, &victims));
    }
    if !report.rebuilds.is_empty() {
        text.push_str("\n\n");
        text.push_str(&crate::s3_scenarios::render_rebuilds(&report.rebuilds, &report.rows));
    }
    if !report.settles.is_empty() {
        text.push_str("\n\n");
        text.push_str(&crate::s3_scenarios::render_settles(&report.settles));
    }
    for error in &report.first_errors {
        text.push_str(&format!("\nfailure: {error}"));
    }
    text
}

fn rows_table(rows: &[S3Row]) -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "target",
        "round",
        "scenario",
        "op",
        "object",
        "concurrency",
        "requests",
        "errors",
        "ops/s",
        "MB/s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "server CPU ms/op",
        "host idle %",
        "gateway RSS MiB",
    ]);
    for row in rows {
        table.add_row(vec![
            row.target.clone(),
            row.round.to_string(),
            row.scenario.clone(),
            row.op.name().to_string(),
            format_byte_size(row.object_bytes),
            row.concurrency.to_string(),
            row.requests.to_string(),
            if row.errors == 0 { "0".to_string() } else { format!("{} FAILED", row.errors) },
            format!("{:.1}", row.ops_per_s),
            format!("{:.2}", row.mb_per_s),
            format!("{:.2}", row.p50_ms),
            format!("{:.2}", row.p99_ms),
            optional_figure(row.p999_ms, 2),
            format!("{:.2}", row.max_ms),
            optional_figure(row.server_cpu_ms_per_op, 3),
            optional_figure(row.host_idle_pct, 0),
            optional_figure(row.gateway_rss_peak_mib, 0),
        ]);
    }
    align_right(&mut table, 5..17);
    table
}

fn legend(report: &S3BenchReport) -> String {
    let targets: Vec<String> = report
        .targets
        .iter()
        .map(|t| format!("{}: {} at {}; server CPU: {}.", t.name, t.description, t.endpoint, t.cpu_note))
        .collect();
    format!(
        "{targets}\n\
         {rounds} round(s); in each, for every concurrency and object size, a PUT, a GET and a DELETE phase{scenarios}, the \
         targets taking turns phase by phase (in the order given in odd rounds, reversed in even ones; before each phase, the other targets' server processes were let fall quiet, under 5 % of one core over three seconds in a row, so that one's background work does not run under the other's phases); PUT and GET phases {seconds:.1} s each, closed loop (each client sends \
         its next request when its last one ends), AWS SDK for Rust without retries, bucket {bucket}.\n\
         PUT writes new keys of random bytes; GET reads random keys of that target's PUT phase to the end, checks \
         every length and the bytes of every {VERIFY_EVERY}th; DELETE deletes every key that PUT phase wrote, once.\n\
         ops/s and MB/s (1e6 bytes of object per s, freed for DELETE): successful requests over the phase's wall \
         time; latencies: every request, failed ones included.\n\
         server CPU ms/op: user + system CPU time of the target's server processes over the phase (/proc/PID/stat, \
         counted in 1/{ticks} s ticks per process), per successful request; - where not measured. host idle %: \
         the share of all CPUs' time that was idle or waiting for I/O over the phase (/proc/stat): near 0 the \
         CPUs were saturated (the client included), high the store was waiting (disk, network, locks). gateway \
         RSS: the peak resident memory of lowtail's gateway process during the phase (sampled every 10 ms; - \
         when it does not run on this host).",
        targets = targets.join("\n"),
        rounds = report.rounds,
        scenarios = scenarios_text(&report.scenarios),
        seconds = report.phase_duration.as_secs_f64(),
        bucket = report.bucket,
        ticks = clock_ticks_per_s(),
    )
}

/// What the legend says of the scenarios: nothing without any.
fn scenarios_text(scenarios: &[Scenario]) -> String {
    if scenarios.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = scenarios.iter().map(|scenario| scenario.name()).collect();
    format!(
        " healthy, then under each scenario ({}) one target at a time (the healthy DELETE after them all)",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_alternate_the_first_turn_by_round() {
        assert_eq!(turn_order(2, 1), [0, 1]);
        assert_eq!(turn_order(2, 2), [1, 0]);
        assert_eq!(turn_order(2, 3), [0, 1]);
        assert_eq!(turn_order(1, 2), [0]);
    }
    use crate::s3_client::S3Endpoint;
    use std::path::PathBuf;

    fn row(target: &str, op: S3Op, errors: u64) -> S3Row {
        S3Row {
            target: target.into(),
            round: 1,
            scenario: "healthy".into(),
            op,
            object_bytes: 4096,
            requests: 1000,
            errors,
            ops_per_s: 500.0,
            mb_per_s: 2.048,
            p50_ms: 1.5,
            p99_ms: 7.25,
            p999_ms: Some(9.5),
            max_ms: 12.0,
            concurrency: 8,
            gateway_rss_peak_mib: Some(73.5),
            server_cpu_ms_per_op: Some(0.625),
            host_idle_pct: Some(41.0),
        }
    }

    fn target_summary(name: &str) -> TargetSummary {
        TargetSummary {
            name: name.into(),
            endpoint: "http://127.0.0.1:9000".into(),
            description: "a fresh local lowtail cluster".into(),
            cpu_note: "the gateway and 9 nodes (10 processes)".into(),
            victim_note: String::new(),
        }
    }

    fn report(errors: u64, targets: &[&str]) -> S3BenchReport {
        let rows = [S3Op::Put, S3Op::Get, S3Op::Delete]
            .into_iter()
            .flat_map(|op| targets.iter().map(move |target| row(target, op, errors)))
            .collect();
        S3BenchReport {
            rows,
            rebuilds: Vec::new(),
            settles: Vec::new(),
            targets: targets.iter().map(|name| target_summary(name)).collect(),
            bucket: DEFAULT_BUCKET.into(),
            phase_duration: Duration::from_secs(10),
            rounds: 1,
            scenarios: Vec::new(),
            fail_slow: FailSlowShape::default(),
            host: HostFacts { cpu_model: Some("Test CPU".into()), logical_cpus: 2, date_utc: "2026-01-02".into() },
            first_errors: if errors > 0 { vec!["GET k: boom".into()] } else { Vec::new() },
        }
    }

    #[test]
    fn json_is_an_array_of_rows_with_the_documented_fields() {
        let json: serde_json::Value = serde_json::from_str(&render_json(&report(0, &["lowtail"]))).unwrap();
        let rows = json.as_array().unwrap();
        let ops: Vec<&str> = rows.iter().map(|row| row["op"].as_str().unwrap()).collect();
        assert_eq!(ops, ["put", "get", "delete"]);
        let mut fields: Vec<&str> = rows[0].as_object().unwrap().keys().map(String::as_str).collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            [
                "concurrency",
                "errors",
                "gateway_rss_peak_mib",
                "host_idle_pct",
                "max_ms",
                "mb_per_s",
                "object_bytes",
                "op",
                "ops_per_s",
                "p50_ms",
                "p999_ms",
                "p99_ms",
                "requests",
                "round",
                "scenario",
                "server_cpu_ms_per_op",
                "target"
            ]
        );
        let parsed: Vec<S3Row> = serde_json::from_value(json).unwrap();
        assert_eq!(parsed, report(0, &["lowtail"]).rows);
    }

    #[test]
    fn rows_of_older_runs_without_the_newer_fields_still_parse() {
        let old = r#"[{"op":"put","object_bytes":4096,"requests":10,"errors":0,"ops_per_s":5.0,"mb_per_s":0.02,
            "p50_ms":1.0,"p99_ms":2.0,"max_ms":3.0,"concurrency":8}]"#;
        let rows: Vec<S3Row> = serde_json::from_str(old).unwrap();
        assert_eq!((rows[0].target.as_str(), rows[0].round, rows[0].scenario.as_str()), ("lowtail", 1, "healthy"));
        assert_eq!(
            (rows[0].server_cpu_ms_per_op, rows[0].host_idle_pct, rows[0].gateway_rss_peak_mib, rows[0].p999_ms),
            (None, None, None, None)
        );
    }

    #[test]
    fn table_shows_figures_and_flags_errors() {
        let text = render_table(&report(0, &["lowtail"]));
        for expected in [
            "put",
            "get",
            "delete",
            "4 KiB",
            "1000",
            "500.0",
            "2.05",
            "1.50",
            "7.25",
            "12.00",
            "10.0 s",
            "74",
            "0.625",
            "41",
            "server CPU ms/op",
            "host idle %",
            "the gateway and 9 nodes",
        ] {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
        assert!(!text.contains("FAILED") && !text.contains("beside"), "{text}");
        let text = render_table(&report(3, &["lowtail"]));
        assert!(text.contains("3 FAILED") && text.contains("failure: GET k: boom"), "{text}");
    }

    #[test]
    fn table_of_two_targets_has_the_comparison_and_a_missing_figure_is_a_dash() {
        let mut report = report(0, &["lowtail", "minio"]);
        for row in report.rows.iter_mut().filter(|row| row.target == "minio") {
            row.server_cpu_ms_per_op = None;
        }
        let text = render_table(&report);
        assert!(
            text.contains("lowtail beside minio") && text.contains("Test CPU") && text.contains("2026-01-02"),
            "{text}"
        );
        assert!(text.contains("minio ops/s") && text.contains("1.00×"), "{text}");
        assert!(text.contains(" - ┆"), "no CPU figure for minio shows as a dash:\n{text}");
    }

    fn config() -> S3BenchConfig {
        S3BenchConfig::new(TargetSpec::lowtail(TargetSource::Fresh(PathBuf::from("lowtail"))))
    }

    fn endpoint_spec(name: &str) -> TargetSpec {
        let endpoint = S3Endpoint {
            url: "http://127.0.0.1:9900".into(),
            region: "us-east-1".into(),
            access_key: "k".into(),
            secret_key: "s".into(),
        };
        TargetSpec { name: name.into(), ..TargetSpec::lowtail(TargetSource::Endpoint(endpoint)) }
    }

    fn refusal(change: impl FnOnce(&mut S3BenchConfig)) -> String {
        let mut config = config();
        change(&mut config);
        config.validate().expect_err("refused").to_string()
    }

    #[test]
    fn config_refuses_what_cannot_run() {
        assert!(config().validate().is_ok());
        let mut with_peer = config();
        with_peer.peer = Some(endpoint_spec("minio"));
        with_peer.concurrencies = vec![1, 8, 32];
        with_peer.rounds = 3;
        assert!(with_peer.validate().is_ok());
        assert!(refusal(|c| c.concurrencies = vec![0]).contains("at least 1"));
        assert!(refusal(|c| c.concurrencies = Vec::new()).contains("no concurrency"));
        assert!(refusal(|c| c.concurrencies = vec![8, 1, 8]).contains("concurrency 8 is named twice"));
        assert!(refusal(|c| c.object_sizes_bytes = vec![4096, 4096]).contains("4 KiB is named twice"));
        assert!(refusal(|c| c.rounds = 0).contains("rounds"));
        assert!(refusal(|c| c.bucket = "Bench_Bucket".into()).contains("bucket name"));
        assert!(refusal(|c| c.bucket = "ab".into()).contains("bucket name"));
        assert!(refusal(|c| c.peer = Some(endpoint_spec("lowtail"))).contains("must differ"));
        assert!(refusal(|c| c.scenarios = vec![Scenario::Healthy]).contains("always measured"));
        assert!(refusal(|c| c.scenarios = vec![Scenario::Down, Scenario::Down]).contains("down is named twice"));
        let no_cycle = FailSlowShape { stopped_pct: 100, ..FailSlowShape::default() };
        assert!(refusal(|c| (c.scenarios, c.fail_slow) = (vec![Scenario::FailSlow], no_cycle)).contains("99"));
        let fresh_peer = TargetSpec { name: "twin".into(), ..config().target };
        assert!(refusal(|c| c.peer = Some(fresh_peer)).contains("S3 endpoint or a running lowtail cluster"));
        let manifest = || TargetSource::Manifest("/srv/a/cluster.json".into());
        let same_cluster = |c: &mut S3BenchConfig| {
            c.target = TargetSpec::lowtail(manifest());
            c.peer = Some(TargetSpec { name: "twin".into(), ..TargetSpec::lowtail(manifest()) });
        };
        assert!(refusal(same_cluster).contains("the target's own cluster"));
        let pids_on_lowtail = TargetSpec { server_pids: vec![1], ..config().target };
        assert!(refusal(|c| c.target = pids_on_lowtail).contains("manifest"));
        let rebuild_without_dir =
            |c: &mut S3BenchConfig| (c.scenarios, c.peer) = (vec![Scenario::Rebuild], Some(endpoint_spec("minio")));
        assert!(refusal(rebuild_without_dir).contains("--peer-victim-dir"));
        let dir_on_lowtail = TargetSpec { victim_data_dir: Some("/srv/node0".into()), ..config().target };
        assert!(refusal(|c| c.target = dir_on_lowtail).contains("manifest"));
    }
}
