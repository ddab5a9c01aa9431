//! One phase of `lowtail bench s3`: its closed-loop clients (PUT of new keys, GET of the keys that
//! target's PUT wrote, DELETE of each of them once), and what is read beside them: the latency
//! histogram, the server processes' CPU time, the host's idle share and the gateway's peak memory.
//!
//! Owns: the requests of a phase, the check of every GET's length and of a sample of GETs' bytes,
//! and the row a phase becomes.
//! Must not: hide a failed or wrong request (every one is counted in its row's `errors`), retry a
//! request (a retry would hide a failure and blur the latency), or choose what to measure (the
//! benchmark's run does).

use crate::host_cpu::{CpuTicks, GroupCpu};
use crate::s3_client::error_text;
use crate::s3_row::{PhaseLabel, S3Op, S3Row, row_from_histogram};
use crate::s3_target::Target;
use anyhow::Context;
use aws_sdk_s3::primitives::ByteStream;
use futures_util::FutureExt;
use hdrhistogram::Histogram;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Zipf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Every `VERIFY_EVERY`-th GET has its bytes compared with what was written (every GET has its
/// length checked); comparing all of them would make the client, not the store, the bottleneck.
pub const VERIFY_EVERY: u64 = 50;
/// Failure messages kept for the report (the count of all of them is in the rows).
pub const KEPT_ERRORS: usize = 5;
/// How often the gateway's resident memory is sampled during a phase.
const RSS_SAMPLE_INTERVAL: Duration = Duration::from_millis(10);
/// Longest a DELETE phase runs: it deletes every object its PUT phase wrote, unless this passes.
const DELETE_PHASE_LIMIT: Duration = Duration::from_secs(600);

/// What the phases of one target in one cell share.
pub struct PhasePlan<'a> {
    /// The target.
    pub target: &'a Target,
    /// Its client.
    pub s3: &'a aws_sdk_s3::Client,
    /// The bucket of the objects.
    pub bucket: &'a str,
    /// The cell's key prefix (the run's, the round's and the concurrency's).
    pub prefix: &'a str,
    /// Seed of the object contents and of the GET key choice.
    pub seed: u64,
    /// How long a PUT or GET phase issues requests (a DELETE phase runs until it deleted everything).
    pub duration: Duration,
    /// A PUT or GET phase also ends after this many requests.
    pub max_requests: u64,
    /// A GET phase's key choice: uniform over the written keys (`None`), or Zipf with this
    /// exponent over them in the order given, the first the most popular.
    pub zipf_exponent: Option<f64>,
}

/// The key of object `index` of a cell whose keys are under `prefix`.
pub fn object_key(prefix: &str, object_bytes: usize, index: u64) -> String {
    format!("{prefix}/{object_bytes}/{index:010}")
}

/// Runs the phase `label` names with the plan's target; `written` are the objects that target's
/// PUT phase of the cell wrote (what GET reads and DELETE deletes; empty for PUT). Returns the
/// phase's row and what its clients saw.
pub async fn run_phase(
    plan: &PhasePlan<'_>,
    label: PhaseLabel,
    written: &Arc<Vec<u64>>,
) -> anyhow::Result<(S3Row, ClientTally)> {
    let (duration, max_requests) = match label.op {
        S3Op::Delete => (DELETE_PHASE_LIMIT, written.len() as u64),
        S3Op::Put | S3Op::Get => (plan.duration, plan.max_requests),
    };
    let phase = Arc::new(Phase {
        s3: plan.s3.clone(),
        bucket: plan.bucket.to_string(),
        prefix: plan.prefix.to_string(),
        seed: plan.seed,
        object_bytes: label.object_bytes,
        deadline: Instant::now() + duration,
        max_requests,
        issued: AtomicU64::new(0),
        zipf_exponent: plan.zipf_exponent,
    });
    let clients = phase_clients(&phase, &label, written);
    let target = plan.target;
    let rss = target.gateway_pid.and_then(RssPeak::start);
    let (server_before, host_before) = (GroupCpu::read(&target.server_pids), CpuTicks::now());
    let started = Instant::now();
    let tally = join_clients(clients.into_iter().map(tokio::spawn).collect()).await?;
    let elapsed = started.elapsed();
    let (server_after, host_after) = (GroupCpu::read(&target.server_pids), CpuTicks::now());
    let mut row = row_from_histogram(label, &tally.latencies_us, tally.requests, tally.errors, elapsed);
    let successes = row.requests.saturating_sub(row.errors);
    row.server_cpu_ms_per_op =
        server_before.used_ms_until(&server_after).filter(|_| successes > 0).map(|ms| ms / successes as f64);
    row.host_idle_pct = host_before.zip(host_after).and_then(|(before, after)| before.idle_pct_until(&after));
    row.gateway_rss_peak_mib = RssPeak::finish(rss).await;
    Ok((row, tally))
}

/// One client of a phase, as a future the phase spawns.
type ClientFuture = futures_util::future::BoxFuture<'static, ClientTally>;

/// The phase's `concurrency` clients of its operation.
fn phase_clients(phase: &Arc<Phase>, label: &PhaseLabel, written: &Arc<Vec<u64>>) -> Vec<ClientFuture> {
    (0..label.concurrency as u64)
        .map(|client| match label.op {
            S3Op::Put => put_client(Arc::clone(phase)).boxed(),
            S3Op::Get => {
                let client_seed = phase.seed ^ (phase.object_bytes as u64).rotate_left(32) ^ client;
                get_client(Arc::clone(phase), Arc::clone(written), client_seed).boxed()
            }
            S3Op::Delete => delete_client(Arc::clone(phase), Arc::clone(written)).boxed(),
        })
        .collect()
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

/// The content of object `index` of a run: regenerated for the GET check instead of kept, so a long
/// run of large objects does not hold everything it wrote in memory.
fn object_content(seed: u64, object_bytes: usize, index: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut bytes = vec![0u8; object_bytes];
    rng.fill_bytes(&mut bytes);
    bytes
}

pub(crate) fn new_histogram() -> Histogram<u64> {
    // 1 µs to 1 hour at 3 significant digits; `saturating_record` clamps anything beyond.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// What the clients of a phase saw.
pub struct ClientTally {
    latencies_us: Histogram<u64>,
    requests: u64,
    errors: u64,
    /// The objects a PUT phase wrote, by index.
    pub written: Vec<u64>,
    /// The first few failures.
    pub first_errors: Vec<String>,
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
    bucket: String,
    prefix: String,
    seed: u64,
    object_bytes: usize,
    deadline: Instant,
    max_requests: u64,
    issued: AtomicU64,
    zipf_exponent: Option<f64>,
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
        object_key(&self.prefix, self.object_bytes, index)
    }
}

async fn put_client(phase: Arc<Phase>) -> ClientTally {
    let mut tally = ClientTally::new();
    while let Some(index) = phase.next_request() {
        let body = ByteStream::from(object_content(phase.seed, phase.object_bytes, index));
        let started = Instant::now();
        let result = phase.s3.put_object().bucket(&phase.bucket).key(phase.key(index)).body(body).send().await;
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
    let zipf = phase.zipf_exponent.and_then(|exponent| Zipf::new(written.len() as f64, exponent).ok());
    while let Some(sequence) = phase.next_request() {
        // Zipf draws ranks 1..=n (as floats).
        let at = match &zipf {
            Some(zipf) => (zipf.sample(&mut rng) as usize).saturating_sub(1),
            None => rng.random_range(0..written.len()),
        };
        let index = written[at.min(written.len() - 1)];
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
        let result = phase.s3.delete_object().bucket(&phase.bucket).key(&key).send().await;
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
        .bucket(&phase.bucket)
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
