//! `lowtail bench s3`: PUT, GET and DELETE throughput and latency of a lowtail cluster through its S3
//! API, measured with the AWS SDK for Rust as a real client would see them.
//!
//! Owns: the choice of cluster (a running one named by its `cluster.json`, or a fresh 9-node rs-6-3
//! cluster in a temporary directory), the closed-loop PUT, GET and DELETE phases per object size, the
//! check of every GET's length and of a sample of GETs' bytes, the latency histograms, the gateway's
//! peak resident memory per phase (when it runs on this host), the rows they become, and their
//! rendering as a table or JSON.
//! Must not: hide a failed or wrong request (every one is counted in its row's `errors`), retry a
//! request (a retry would hide a failure and blur the latency), or print anything (output is the
//! caller's).

use crate::byte_size::format_byte_size;
use crate::s3_client::{S3Endpoint, error_text, measurement_client};
use anyhow::{Context, ensure};
use aws_sdk_s3::primitives::ByteStream;
use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use futures_util::FutureExt;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
/// Bucket the benchmark writes into (created when missing).
pub const BUCKET: &str = "lowtail-bench";
/// Every `VERIFY_EVERY`-th GET has its bytes compared with what was written (every GET has its
/// length checked); comparing all of them would make the client, not the store, the bottleneck.
pub const VERIFY_EVERY: u64 = 50;
/// Time limit of one request: a hung request becomes an error instead of a hung benchmark.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Failure messages kept for the report (the count of all of them is in the rows).
const KEPT_ERRORS: usize = 5;
/// Longest a DELETE phase runs: it deletes every object its PUT phase wrote, unless this passes.
const DELETE_PHASE_LIMIT: Duration = Duration::from_secs(600);
/// How often the gateway's resident memory is sampled during a phase.
const RSS_SAMPLE_INTERVAL: Duration = Duration::from_millis(10);

/// Which cluster to measure.
#[derive(Clone, Debug)]
pub enum ClusterSource {
    /// A running cluster, by the `cluster.json` that `lowtail up` wrote.
    Manifest(PathBuf),
    /// A fresh 9-node rs-6-3 cluster started for the run in a temporary directory and stopped after;
    /// the path is the `lowtail` executable the nodes run as.
    Fresh(PathBuf),
}

/// What to measure and how.
#[derive(Clone, Debug)]
pub struct S3BenchConfig {
    /// Which cluster.
    pub cluster: ClusterSource,
    /// Object sizes, one PUT phase and one GET phase each.
    pub object_sizes_bytes: Vec<usize>,
    /// Requests in flight (closed loop: each client issues its next request when its last one ends).
    pub concurrency: usize,
    /// How long each phase issues requests.
    pub phase_duration: Duration,
    /// A phase also ends after this many requests.
    pub max_requests_per_phase: u64,
    /// Seed of the object contents and of the GET key choice.
    pub seed: u64,
    /// Draw a progress bar on stderr (only ever drawn when stderr is a terminal).
    pub show_progress: bool,
}

impl S3BenchConfig {
    /// The defaults against `cluster`.
    pub fn new(cluster: ClusterSource) -> S3BenchConfig {
        S3BenchConfig {
            cluster,
            object_sizes_bytes: DEFAULT_OBJECT_SIZES_BYTES.to_vec(),
            concurrency: DEFAULT_CONCURRENCY,
            phase_duration: DEFAULT_PHASE_DURATION,
            max_requests_per_phase: DEFAULT_MAX_REQUESTS_PER_PHASE,
            seed: 1,
            show_progress: false,
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        ensure!(!self.object_sizes_bytes.is_empty(), "no object sizes to measure");
        ensure!(self.object_sizes_bytes.iter().all(|&bytes| bytes > 0), "object sizes must be at least 1 byte");
        ensure!(self.concurrency > 0, "concurrency must be at least 1");
        ensure!(!self.phase_duration.is_zero(), "the phase duration must be positive");
        ensure!(self.max_requests_per_phase > 0, "at least one request per phase is needed");
        Ok(())
    }
}

/// Which S3 operation a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum S3Op {
    /// PutObject of a new key.
    Put,
    /// GetObject of a key written in the PUT phase, body read to the end.
    Get,
    /// DeleteObject of each key written in the PUT phase, once.
    Delete,
}

impl S3Op {
    fn name(self) -> &'static str {
        match self {
            S3Op::Put => "put",
            S3Op::Get => "get",
            S3Op::Delete => "delete",
        }
    }
}

/// One phase's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct S3Row {
    /// The operation.
    pub op: S3Op,
    /// Bytes per object.
    pub object_bytes: usize,
    /// Requests issued, failed ones included.
    pub requests: u64,
    /// Requests that failed, or (GET) returned the wrong length or the wrong bytes.
    pub errors: u64,
    /// Successful requests per second of phase wall time.
    pub ops_per_s: f64,
    /// Object bytes moved by successful requests, in 1e6 bytes per second of phase wall time.
    pub mb_per_s: f64,
    /// Median latency of all requests, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile latency of all requests, in milliseconds.
    pub p99_ms: f64,
    /// Slowest request, in milliseconds.
    pub max_ms: f64,
    /// Requests in flight.
    pub concurrency: usize,
    /// Peak resident memory of the gateway's process during the phase, in MiB (VmRSS sampled every
    /// 10 ms); `None` when the gateway does not run on this host.
    #[serde(default)]
    pub gateway_rss_peak_mib: Option<f64>,
}

/// A whole run.
#[derive(Clone, Debug)]
pub struct S3BenchReport {
    /// One PUT and one GET row per object size, in that order.
    pub rows: Vec<S3Row>,
    /// The endpoint measured.
    pub endpoint: String,
    /// Whether the cluster was started for this run.
    pub fresh_cluster: bool,
    /// How long each phase issued requests.
    pub phase_duration: Duration,
    /// The first few failures, for the message that goes with a non-zero `errors`.
    pub first_errors: Vec<String>,
}

impl S3BenchReport {
    /// Failed requests over all rows.
    pub fn total_errors(&self) -> u64 {
        self.rows.iter().map(|row| row.errors).sum()
    }
}

/// The figures of a phase: `latencies_us` holds every request's latency in microseconds, `requests`
/// counts them all and `errors` the failed ones; `elapsed` is the phase's wall time.
pub fn row_from_histogram(
    op: S3Op,
    object_bytes: usize,
    latencies_us: &Histogram<u64>,
    requests: u64,
    errors: u64,
    elapsed: Duration,
    concurrency: usize,
) -> S3Row {
    let successes = requests.saturating_sub(errors);
    let seconds = elapsed.as_secs_f64();
    let per_second = |count: f64| if seconds > 0.0 { count / seconds } else { 0.0 };
    let ms = |us: u64| us as f64 / 1000.0;
    let empty = latencies_us.is_empty();
    S3Row {
        op,
        object_bytes,
        requests,
        errors,
        ops_per_s: per_second(successes as f64),
        mb_per_s: per_second(successes as f64 * object_bytes as f64) / 1e6,
        p50_ms: if empty { 0.0 } else { ms(latencies_us.value_at_quantile(0.50)) },
        p99_ms: if empty { 0.0 } else { ms(latencies_us.value_at_quantile(0.99)) },
        max_ms: if empty { 0.0 } else { ms(latencies_us.max()) },
        concurrency,
        gateway_rss_peak_mib: None,
    }
}

/// Resident memory of process `pid` in bytes (`VmRSS` of `/proc/PID/status`), if it can be read.
fn resident_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|line| line.strip_prefix("VmRSS:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

/// The peak resident memory of a process over a phase, sampled by a task of its own.
struct RssPeak {
    stop: tokio::sync::oneshot::Sender<()>,
    sampler: tokio::task::JoinHandle<u64>,
}

impl RssPeak {
    /// Starts sampling `pid`; `None` when its memory cannot be read (not on this host, not Linux).
    fn start(pid: u32) -> Option<RssPeak> {
        let first = resident_bytes(pid)?;
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let sampler = tokio::spawn(async move {
            let mut peak = first;
            // Ends when the phase ends (the sender is used or dropped).
            loop {
                tokio::select! {
                    _ = &mut stopped => return peak,
                    () = tokio::time::sleep(RSS_SAMPLE_INTERVAL) => {
                        peak = peak.max(resident_bytes(pid).unwrap_or(0));
                    }
                }
            }
        });
        Some(RssPeak { stop, sampler })
    }

    /// Stops sampling `rss` (if it ran) and returns the peak in MiB.
    async fn finish(rss: Option<RssPeak>) -> Option<f64> {
        let rss = rss?;
        let _ = rss.stop.send(());
        let peak = rss.sampler.await.ok()?;
        Some(peak as f64 / (1 << 20) as f64)
    }
}

/// Runs the benchmark: starts a cluster if asked to, then for every object size a PUT phase and a
/// GET phase over the keys written; stops the cluster it started, even when a phase fails.
pub fn run_s3_bench(config: &S3BenchConfig) -> anyhow::Result<S3BenchReport> {
    config.validate()?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(run_async(config))
}

async fn run_async(config: &S3BenchConfig) -> anyhow::Result<S3BenchReport> {
    match &config.cluster {
        ClusterSource::Manifest(path) => {
            let manifest = launcher::Manifest::read(path)
                .with_context(|| format!("cannot read the cluster manifest {}", path.display()))?;
            run_phases(config, &manifest, false).await
        }
        ClusterSource::Fresh(binary) => {
            let temp = tempfile::tempdir().context("cannot create a temporary directory for the cluster")?;
            let listen = "127.0.0.1:0".parse().expect("a valid socket address");
            let options = launcher::UpOptions {
                dir: temp.path().join("cluster"),
                nodes: 9,
                code: codec::CodeSpec::Rs { k: 6, m: 3 },
                s3_listen: Some(listen),
                racks: 0,
            };
            let up_config = launcher::UpConfig { s3_listen: Some(listen), ..launcher::UpConfig::default() };
            let cluster = launcher::up(&options, &up_config, binary).await.context("cannot start a local cluster")?;
            let result = run_phases(config, cluster.manifest(), true).await;
            cluster.shutdown().await;
            result
        }
    }
}

fn client(manifest: &launcher::Manifest) -> aws_sdk_s3::Client {
    measurement_client(&S3Endpoint::from_manifest(manifest), "lowtail-bench", REQUEST_TIMEOUT)
}

/// The content of object `index` of a run: regenerated for the GET check instead of kept, so a long
/// run of large objects does not hold everything it wrote in memory.
fn object_content(seed: u64, object_bytes: usize, index: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut bytes = vec![0u8; object_bytes];
    rng.fill_bytes(&mut bytes);
    bytes
}

fn new_histogram() -> Histogram<u64> {
    // 1 µs to 1 hour at 3 significant digits; `saturating_record` clamps anything beyond.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// What one client of a phase saw.
struct ClientTally {
    latencies_us: Histogram<u64>,
    requests: u64,
    errors: u64,
    written: Vec<u64>,
    first_errors: Vec<String>,
}

impl ClientTally {
    fn new() -> ClientTally {
        ClientTally {
            latencies_us: new_histogram(),
            requests: 0,
            errors: 0,
            written: Vec::new(),
            first_errors: Vec::new(),
        }
    }

    fn record(&mut self, started: Instant, outcome: Result<(), String>) {
        self.requests += 1;
        self.latencies_us.saturating_record(started.elapsed().as_micros().max(1) as u64);
        if let Err(message) = outcome {
            self.errors += 1;
            if self.first_errors.len() < KEPT_ERRORS {
                self.first_errors.push(message);
            }
        }
    }
}

/// Everything the clients of one phase share.
struct Phase {
    s3: aws_sdk_s3::Client,
    prefix: String,
    seed: u64,
    object_bytes: usize,
    deadline: Instant,
    max_requests: u64,
    issued: AtomicU64,
}

impl Phase {
    /// The next request's sequence number, or `None` once the phase is over (time or count).
    fn next_request(&self) -> Option<u64> {
        if Instant::now() >= self.deadline {
            return None;
        }
        let sequence = self.issued.fetch_add(1, Ordering::Relaxed);
        (sequence < self.max_requests).then_some(sequence)
    }

    fn key(&self, index: u64) -> String {
        format!("{}/{}/{index:010}", self.prefix, self.object_bytes)
    }
}

async fn put_client(phase: Arc<Phase>) -> ClientTally {
    let mut tally = ClientTally::new();
    while let Some(index) = phase.next_request() {
        let body = ByteStream::from(object_content(phase.seed, phase.object_bytes, index));
        let started = Instant::now();
        let result = phase.s3.put_object().bucket(BUCKET).key(phase.key(index)).body(body).send().await;
        let outcome = result.map(|_| ()).map_err(|error| format!("PUT {}: {}", phase.key(index), error_text(&error)));
        if outcome.is_ok() {
            tally.written.push(index);
        }
        tally.record(started, outcome);
    }
    tally
}

async fn get_client(phase: Arc<Phase>, written: Arc<Vec<u64>>, client_seed: u64) -> ClientTally {
    let mut tally = ClientTally::new();
    let mut rng = ChaCha8Rng::seed_from_u64(client_seed);
    while let Some(sequence) = phase.next_request() {
        let index = written[rng.random_range(0..written.len())];
        let key = phase.key(index);
        let started = Instant::now();
        let outcome = get_and_check(&phase, &key, index, sequence).await;
        tally.record(started, outcome);
    }
    tally
}

async fn delete_client(phase: Arc<Phase>, written: Arc<Vec<u64>>) -> ClientTally {
    let mut tally = ClientTally::new();
    // The phase issues at most `written.len()` requests, so every sequence names a written key.
    while let Some(sequence) = phase.next_request() {
        let key = phase.key(written[sequence as usize]);
        let started = Instant::now();
        let result = phase.s3.delete_object().bucket(BUCKET).key(&key).send().await;
        tally.record(started, result.map(|_| ()).map_err(|error| format!("DELETE {key}: {}", error_text(&error))));
    }
    tally
}

/// One GET, its body read to the end and its length checked; the bytes too on every
/// [`VERIFY_EVERY`]-th request. The latency includes reading the body but not the byte check.
async fn get_and_check(phase: &Phase, key: &str, index: u64, sequence: u64) -> Result<(), String> {
    let object = phase
        .s3
        .get_object()
        .bucket(BUCKET)
        .key(key)
        .send()
        .await
        .map_err(|error| format!("GET {key}: {}", error_text(&error)))?;
    let body = object.body.collect().await.map_err(|error| format!("GET {key}: body: {error}"))?.into_bytes();
    if body.len() != phase.object_bytes {
        return Err(format!("GET {key}: {} bytes, {} written", body.len(), phase.object_bytes));
    }
    if sequence.is_multiple_of(VERIFY_EVERY) && body[..] != object_content(phase.seed, phase.object_bytes, index)[..] {
        return Err(format!("GET {key}: the bytes differ from those written"));
    }
    Ok(())
}

async fn ensure_bucket(s3: &aws_sdk_s3::Client) -> anyhow::Result<()> {
    if s3.head_bucket().bucket(BUCKET).send().await.is_ok() {
        return Ok(());
    }
    s3.create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .map_err(|error| anyhow::anyhow!("cannot create bucket {BUCKET}: {}", error_text(&error)))?;
    Ok(())
}

fn progress_bar(config: &S3BenchConfig) -> ProgressBar {
    let phases = 3 * config.object_sizes_bytes.len() as u64;
    if !config.show_progress || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(phases), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} bench s3 [{bar:30}] {pos}/{len} phases {msg} ({elapsed})")
            .expect("a valid progress template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

async fn run_phases(
    config: &S3BenchConfig,
    manifest: &launcher::Manifest,
    fresh_cluster: bool,
) -> anyhow::Result<S3BenchReport> {
    let s3 = client(manifest);
    ensure_bucket(&s3).await?;
    // A prefix of its own per run, so runs against one cluster never read each other's objects.
    let run_id = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let prefix = format!("run-{run_id}");
    // The gateway's memory is read from /proc when it runs here (a remote pid reads as nothing).
    let gateway_pid = manifest.gateway.as_ref().map(|gateway| gateway.pid);
    let bar = progress_bar(config);
    let mut rows = Vec::new();
    let mut first_errors = Vec::new();
    for &object_bytes in &config.object_sizes_bytes {
        let phase_of = |duration: Duration, max_requests: u64| {
            Arc::new(Phase {
                s3: s3.clone(),
                prefix: prefix.clone(),
                seed: config.seed,
                object_bytes,
                deadline: Instant::now() + duration,
                max_requests,
                issued: AtomicU64::new(0),
            })
        };
        let new_phase = || phase_of(config.phase_duration, config.max_requests_per_phase);
        let size = format_byte_size(object_bytes);
        let mut record = |row: S3Row, tally: &ClientTally| {
            rows.push(row);
            first_errors.extend(tally.first_errors.iter().cloned());
            bar.inc(1);
        };

        bar.set_message(format!("put {size}"));
        let phase = new_phase();
        let clients = (0..config.concurrency).map(|_| put_client(Arc::clone(&phase)).boxed()).collect();
        let (row, tally) = run_phase(S3Op::Put, object_bytes, config.concurrency, gateway_pid, clients).await?;
        record(row, &tally);

        let written = Arc::new(tally.written);
        ensure!(
            !written.is_empty(),
            "no {size} object was written, so there is nothing to GET; first failures: {}",
            tally.first_errors.join("; ")
        );
        bar.set_message(format!("get {size}"));
        let phase = new_phase();
        let clients = (0..config.concurrency as u64)
            .map(|client| {
                let client_seed = config.seed ^ (object_bytes as u64).rotate_left(32) ^ client;
                get_client(Arc::clone(&phase), Arc::clone(&written), client_seed).boxed()
            })
            .collect();
        let (row, tally) = run_phase(S3Op::Get, object_bytes, config.concurrency, gateway_pid, clients).await?;
        record(row, &tally);

        bar.set_message(format!("delete {size}"));
        let phase = phase_of(DELETE_PHASE_LIMIT, written.len() as u64);
        let clients =
            (0..config.concurrency).map(|_| delete_client(Arc::clone(&phase), Arc::clone(&written)).boxed()).collect();
        let (row, tally) = run_phase(S3Op::Delete, object_bytes, config.concurrency, gateway_pid, clients).await?;
        record(row, &tally);
    }
    bar.finish_and_clear();
    first_errors.truncate(KEPT_ERRORS);
    Ok(S3BenchReport {
        rows,
        endpoint: manifest.endpoint.clone(),
        fresh_cluster,
        phase_duration: config.phase_duration,
        first_errors,
    })
}

/// One client of a phase, as a future the phase spawns.
type ClientFuture = futures_util::future::BoxFuture<'static, ClientTally>;

/// Runs one phase: spawns `clients`, waits for them and samples the gateway's resident memory
/// meanwhile; returns the phase's row and what its clients saw.
async fn run_phase(
    op: S3Op,
    object_bytes: usize,
    concurrency: usize,
    gateway_pid: Option<u32>,
    clients: Vec<ClientFuture>,
) -> anyhow::Result<(S3Row, ClientTally)> {
    let rss = gateway_pid.and_then(RssPeak::start);
    let started = Instant::now();
    let tally = join_clients(clients.into_iter().map(tokio::spawn).collect()).await?;
    let mut row = tally_row(op, object_bytes, &tally, started.elapsed(), concurrency);
    row.gateway_rss_peak_mib = RssPeak::finish(rss).await;
    Ok((row, tally))
}

/// Waits for every client of a phase and merges what they saw.
async fn join_clients(clients: Vec<tokio::task::JoinHandle<ClientTally>>) -> anyhow::Result<ClientTally> {
    let mut total = ClientTally::new();
    for client in clients {
        let tally = client.await.context("a benchmark client panicked")?;
        total.latencies_us.add(&tally.latencies_us).expect("histograms with the same bounds merge");
        total.requests += tally.requests;
        total.errors += tally.errors;
        total.written.extend(tally.written);
        total.first_errors.extend(tally.first_errors);
    }
    total.first_errors.truncate(KEPT_ERRORS);
    Ok(total)
}

fn tally_row(op: S3Op, object_bytes: usize, tally: &ClientTally, elapsed: Duration, concurrency: usize) -> S3Row {
    row_from_histogram(op, object_bytes, &tally.latencies_us, tally.requests, tally.errors, elapsed, concurrency)
}

/// The rows as a JSON array (one object per row), nothing else.
pub fn render_json(report: &S3BenchReport) -> String {
    serde_json::to_string_pretty(&report.rows).expect("rows are plain data and always serialise")
}

/// One table line per row, then a legend, and the first failures when there were any.
pub fn render_table(report: &S3BenchReport) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "op",
        "object",
        "requests",
        "errors",
        "ops/s",
        "MB/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "concurrency",
        "gateway RSS MiB",
    ]);
    for row in &report.rows {
        table.add_row(vec![
            row.op.name().to_string(),
            format_byte_size(row.object_bytes),
            row.requests.to_string(),
            if row.errors == 0 { "0".to_string() } else { format!("{} FAILED", row.errors) },
            format!("{:.1}", row.ops_per_s),
            format!("{:.2}", row.mb_per_s),
            format!("{:.2}", row.p50_ms),
            format!("{:.2}", row.p99_ms),
            format!("{:.2}", row.max_ms),
            row.concurrency.to_string(),
            row.gateway_rss_peak_mib.map_or_else(|| "-".to_string(), |mib| format!("{mib:.0}")),
        ]);
    }
    for column in 2..11 {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let cluster = if report.fresh_cluster {
        "a fresh local cluster (9 nodes, rs-6-3, started for this run)"
    } else {
        "the running cluster"
    };
    let mut text = format!(
        "{table}\n\
         {cluster} at {endpoint}; each phase {seconds:.1} s, closed loop (each client sends its next request when its \
         last one ends), AWS SDK for Rust without retries.\n\
         PUT writes new keys of random bytes; GET reads random keys of that PUT phase to the end, checks every \
         length and the bytes of every {VERIFY_EVERY}th; DELETE deletes every key that PUT phase wrote, once.\n\
         ops/s and MB/s (1e6 bytes of object per s, freed for DELETE): successful requests over the phase's wall \
         time; latencies: \
         every request, failed ones included; gateway RSS: the peak resident memory of the gateway's process \
         during the phase (sampled every 10 ms; - when it does not run on this host).",
        endpoint = report.endpoint,
        seconds = report.phase_duration.as_secs_f64(),
    );
    for error in &report.first_errors {
        text.push_str(&format!("\nfailure: {error}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values_us: &[u64]) -> Histogram<u64> {
        let mut histogram = new_histogram();
        for &value in values_us {
            histogram.record(value).unwrap();
        }
        histogram
    }

    #[test]
    fn row_counts_successes_only_in_throughput_and_every_request_in_latency() {
        // 100 requests: 98 of 1 ms, one of 5 ms and one failed after 250 ms.
        let mut values = vec![1000; 98];
        values.extend([5000, 250_000]);
        let row = row_from_histogram(S3Op::Put, 1 << 20, &histogram(&values), 100, 1, Duration::from_secs(2), 8);
        assert_eq!(row.requests, 100);
        assert_eq!(row.errors, 1);
        assert!((row.ops_per_s - 49.5).abs() < 1e-9, "{row:?}");
        assert!((row.mb_per_s - 99.0 * 1_048_576.0 / 2.0 / 1e6).abs() < 1e-9, "{row:?}");
        assert!((row.p50_ms - 1.0).abs() < 0.01, "{row:?}");
        assert!((row.p99_ms - 5.0).abs() < 0.01, "{row:?}");
        assert!((row.max_ms - 250.0).abs() < 0.25, "{row:?}");
        assert_eq!(row.concurrency, 8);
    }

    #[test]
    fn row_of_an_empty_phase_is_zeros_not_nan() {
        let row = row_from_histogram(S3Op::Get, 4096, &new_histogram(), 0, 0, Duration::ZERO, 2);
        assert_eq!((row.ops_per_s, row.mb_per_s, row.p50_ms, row.p99_ms, row.max_ms), (0.0, 0.0, 0.0, 0.0, 0.0));
    }

    fn report(errors: u64) -> S3BenchReport {
        let row = |op| S3Row {
            op,
            object_bytes: 4096,
            requests: 1000,
            errors,
            ops_per_s: 500.0,
            mb_per_s: 2.048,
            p50_ms: 1.5,
            p99_ms: 7.25,
            max_ms: 12.0,
            concurrency: 8,
            gateway_rss_peak_mib: Some(73.5),
        };
        S3BenchReport {
            rows: vec![row(S3Op::Put), row(S3Op::Get), row(S3Op::Delete)],
            endpoint: "http://127.0.0.1:9000".into(),
            fresh_cluster: true,
            phase_duration: Duration::from_secs(10),
            first_errors: if errors > 0 { vec!["GET k: boom".into()] } else { Vec::new() },
        }
    }

    #[test]
    fn json_is_an_array_of_rows_with_the_documented_fields() {
        let json: serde_json::Value = serde_json::from_str(&render_json(&report(0))).unwrap();
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
                "max_ms",
                "mb_per_s",
                "object_bytes",
                "op",
                "ops_per_s",
                "p50_ms",
                "p99_ms",
                "requests"
            ]
        );
        let parsed: Vec<S3Row> = serde_json::from_value(json).unwrap();
        assert_eq!(parsed, report(0).rows);
    }

    #[test]
    fn table_shows_figures_and_flags_errors() {
        let text = render_table(&report(0));
        for expected in
            ["put", "get", "delete", "4 KiB", "1000", "500.0", "2.05", "1.50", "7.25", "12.00", "10.0 s", "74"]
        {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
        assert!(!text.contains("FAILED"), "{text}");
        let text = render_table(&report(3));
        assert!(text.contains("3 FAILED") && text.contains("failure: GET k: boom"), "{text}");
    }

    #[tokio::test]
    async fn the_peak_resident_memory_of_a_process_is_sampled() {
        let own = std::process::id();
        let now = resident_bytes(own).expect("this process's VmRSS");
        assert!(now > 1 << 20, "{now} bytes resident");
        let peak = RssPeak::start(own).expect("sampling this process");
        // 64 MiB touched and held across several samples must show in the peak.
        let held = std::hint::black_box(vec![1u8; 64 << 20]);
        tokio::time::sleep(RSS_SAMPLE_INTERVAL * 5).await;
        let peak_mib = RssPeak::finish(Some(peak)).await.expect("a peak");
        assert!(peak_mib * (1 << 20) as f64 >= (now + (60 << 20)) as f64, "peak {peak_mib} MiB, {now} B before");
        drop(held);
        assert!(resident_bytes(u32::MAX).is_none(), "no such process");
    }

    #[test]
    fn object_content_is_reproducible_and_differs_per_object() {
        assert_eq!(object_content(7, 4096, 3), object_content(7, 4096, 3));
        assert_ne!(object_content(7, 4096, 3), object_content(7, 4096, 4));
        assert_eq!(object_content(7, 100, 0).len(), 100);
    }

    #[test]
    fn config_refuses_what_cannot_run() {
        let mut config = S3BenchConfig::new(ClusterSource::Fresh(PathBuf::from("lowtail")));
        assert!(config.validate().is_ok());
        config.concurrency = 0;
        assert!(config.validate().is_err());
    }
}
