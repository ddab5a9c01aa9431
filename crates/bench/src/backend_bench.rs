//! `lowtail bench backend`: FAST CLOUD's measurement of an S3 service (section IV: saturated
//! threads writing distinct keys of one chunk size, then reading them back, every request's delay
//! recorded), the Δ + Exp fit of each operation's delays and how well it describes them, whether
//! consecutive delays are independent (the model's assumption), and the model's prediction of
//! what (n,k) coding buys there: the delay of every code length at low to high load, its capacity,
//! and its cost in storage and requests.
//!
//! Owns: the measurement's requests and their timing, the report and its rendering. Must not:
//! retry a request (a failure is counted, not hidden in a slow success) or re-derive the model's
//! formulas (they are `optimize::fec_model`'s).

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use bytes_of::random_body;
use futures_util::StreamExt;
use optimize::fec_model::{Admission, DelayModel, FecClass};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::s3_client::{S3Endpoint, error_text, measurement_client};
use crate::s3_target::{TargetSource, TargetSpec};

/// Longest one request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The loads the prediction is made at, as fractions of the uncoded capacity C(k).
pub const PREDICTION_LOADS: [f64; 3] = [0.1, 0.5, 0.9];
/// Quantiles compared between the measurement and the fit.
const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];
/// Most failed requests of a phase, as a share, before the measurement is refused.
const MAX_FAILED_SHARE: f64 = 0.01;

/// What to measure and predict.
#[derive(Clone, Debug)]
pub struct BackendBenchConfig {
    /// The service's bucket (created if missing); the keys go under a prefix of their own and are deleted after.
    pub bucket: String,
    /// Bytes of every object: the chunk size the prediction is for.
    pub chunk_bytes: usize,
    /// Requests in flight at once (the paper's 16 saturated threads).
    pub threads: usize,
    /// Requests per operation.
    pub requests: usize,
    /// k of the codes predicted.
    pub k: usize,
    /// Longest code predicted.
    pub n_max: usize,
    /// L, the proxy's task slots, of the prediction.
    pub slots: usize,
    /// Seed of the bodies and of the read order.
    pub seed: u64,
}

/// One operation's measured delays and their fit.
#[derive(Clone, Debug, Serialize)]
pub struct OpDelays {
    /// `put` or `get`.
    pub op: &'static str,
    /// Requests that succeeded (their delays are the sample).
    pub samples: usize,
    /// Requests that failed.
    pub failed: usize,
    /// Mean delay, ms.
    pub mean_ms: f64,
    /// Measured delay at each of [`QUANTILES`], ms.
    pub measured_ms: Vec<(f64, f64)>,
    /// The paper's fit (the worst 0.1 % dropped; 1/μ = std, Δ = mean − std).
    pub shift_ms: f64,
    /// Its 1/μ, ms.
    pub exp_mean_ms: f64,
    /// The fit's delay at each of [`QUANTILES`], ms.
    pub model_ms: Vec<(f64, f64)>,
    /// Pearson correlation of consecutive delays of one thread (≈ 0 when independent).
    pub lag1_correlation: f64,
}

/// What the model says of one code (n, k) for reads.
#[derive(Clone, Debug, Serialize)]
pub struct CodePrediction {
    /// Tasks per request.
    pub n: usize,
    /// Of which the first k finish it.
    pub k: usize,
    /// Mean delay with no queueing (the k-th of n delays), ms.
    pub service_ms: f64,
    /// Requests per second it sustains with `slots` slots.
    pub capacity_per_s: f64,
    /// Mean delay at each of [`PREDICTION_LOADS`] × C(k), ms; `None` where the code is unstable.
    pub delay_ms: Vec<Option<f64>>,
    /// Storage per byte stored, n/k.
    pub storage_factor: f64,
    /// Backend requests per read.
    pub requests_per_read: usize,
}

/// The whole measurement and prediction.
#[derive(Clone, Debug, Serialize)]
pub struct BackendReport {
    /// The service's endpoint.
    pub endpoint: String,
    /// Chunk size, bytes.
    pub chunk_bytes: usize,
    /// Requests in flight.
    pub threads: usize,
    /// Writes, then reads.
    pub ops: Vec<OpDelays>,
    /// Read codes (k..=n_max, k) by the GET fit.
    pub predictions: Vec<CodePrediction>,
    /// The uncoded capacity C(k) the loads are fractions of, req/s.
    pub capacity_k_per_s: f64,
    /// In words: whether FEC pays off on this service, and at what cost.
    pub verdict: String,
}

/// Gets `source` ready (a fresh local cluster is started and stopped after), then measures and
/// predicts; a progress bar on stderr when `show_progress` and stderr is a terminal.
pub fn run_backend_bench(
    source: TargetSource,
    config: &BackendBenchConfig,
    show_progress: bool,
) -> anyhow::Result<BackendReport> {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let spec = TargetSpec::lowtail(source);
        let target = crate::s3_target::start(&spec, &[], false).await.context("cannot get the service ready")?;
        let progress = progress_bar(show_progress);
        let result = run(&target.endpoint, config, &progress).await;
        progress.finish_and_clear();
        target.stop().await;
        result
    })
}

fn progress_bar(show: bool) -> indicatif::ProgressBar {
    if !show || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} bench backend [{bar:30}] {pos}/{len} requests ({elapsed})")
            .expect("a valid progress template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Runs the measurement against `endpoint` and the prediction.
pub async fn run(
    endpoint: &S3Endpoint,
    config: &BackendBenchConfig,
    progress: &indicatif::ProgressBar,
) -> anyhow::Result<BackendReport> {
    ensure!(
        config.threads > 0 && config.requests > 0 && config.chunk_bytes > 0,
        "threads, requests and chunk bytes must be positive"
    );
    ensure!(config.k >= 1 && config.n_max >= config.k && config.slots > 0, "need 1 <= k <= n_max and slots > 0");
    let s3 = measurement_client(endpoint, "lowtail-bench-backend", REQUEST_TIMEOUT);
    crate::s3_bench::ensure_bucket(&s3, &config.bucket).await?;
    let prefix = format!("lowtail-bench-backend/{:016x}/", ChaCha8Rng::seed_from_u64(config.seed).random::<u64>());
    let keys: Vec<String> = (0..config.requests).map(|i| format!("{prefix}{i}")).collect();
    progress.set_length(3 * config.requests as u64);
    let body = random_body(config.chunk_bytes, config.seed);
    let puts = timed(config.threads, keys.iter().cloned(), progress, |key| {
        let (s3, bucket, body) = (s3.clone(), config.bucket.clone(), body.clone());
        async move {
            s3.put_object()
                .bucket(bucket)
                .key(key)
                .body(body.into())
                .send()
                .await
                .map(|_| ())
                .map_err(|e| error_text(&e))
        }
    })
    .await;
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed ^ 0x9e37_79b9);
    let reads: Vec<String> = (0..config.requests).map(|_| keys[rng.random_range(0..keys.len())].clone()).collect();
    let length = config.chunk_bytes;
    let gets = timed(config.threads, reads.into_iter(), progress, |key| {
        let (s3, bucket) = (s3.clone(), config.bucket.clone());
        async move {
            let output = s3.get_object().bucket(bucket).key(key).send().await.map_err(|e| error_text(&e))?;
            let bytes = output.body.collect().await.map_err(|e| e.to_string())?.into_bytes();
            if bytes.len() == length { Ok(()) } else { Err(format!("{} bytes of {length}", bytes.len())) }
        }
    })
    .await;
    // Untimed: the keys are the measurement's, never left behind.
    let _ = timed(config.threads, keys.into_iter(), progress, |key| {
        let (s3, bucket) = (s3.clone(), config.bucket.clone());
        async move { s3.delete_object().bucket(bucket).key(key).send().await.map(|_| ()).map_err(|e| error_text(&e)) }
    })
    .await;
    let ops = vec![summarise("put", &puts)?, summarise("get", &gets)?];
    let read = DelayModel::new(ops[1].shift_ms / 1e3, ops[1].exp_mean_ms / 1e3).context("the GET fit is degenerate")?;
    let class = FecClass { delay: read, k: config.k, slots: config.slots, admission: Admission::NonBlocking };
    let predictions = (config.k..=config.n_max).map(|n| predict(&class, n)).collect::<Vec<_>>();
    let verdict = verdict(&predictions, &ops[1]);
    Ok(BackendReport {
        endpoint: endpoint.url.clone(),
        chunk_bytes: config.chunk_bytes,
        threads: config.threads,
        ops,
        capacity_k_per_s: class.capacity_per_s(config.k),
        predictions,
        verdict,
    })
}

/// The delays of one request per item, `threads` in flight; per thread, in the order it sent them
/// (`Err` for a failed request).
async fn timed<I, F, Fut>(
    threads: usize,
    items: I,
    progress: &indicatif::ProgressBar,
    request: F,
) -> Vec<Vec<Result<f64, String>>>
where
    I: Iterator<Item = String>,
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let items: Vec<String> = items.collect();
    let per_thread = items.len().div_ceil(threads);
    let chunks: Vec<Vec<String>> = items.chunks(per_thread.max(1)).map(<[String]>::to_vec).collect();
    futures_util::stream::iter(chunks)
        .map(|chunk| async {
            let mut delays = Vec::with_capacity(chunk.len());
            for item in chunk {
                let began = Instant::now();
                let result = request(item).await;
                delays.push(result.map(|()| began.elapsed().as_secs_f64()));
                progress.inc(1);
            }
            delays
        })
        .buffer_unordered(threads)
        .collect()
        .await
}

/// One operation's delays as measured and as fitted; refused when too many requests failed.
fn summarise(op: &'static str, threads: &[Vec<Result<f64, String>>]) -> anyhow::Result<OpDelays> {
    let all: Vec<&Result<f64, String>> = threads.iter().flatten().collect();
    let failed: Vec<&String> = all.iter().filter_map(|r| r.as_ref().err()).collect();
    let share = failed.len() as f64 / all.len().max(1) as f64;
    ensure!(
        share <= MAX_FAILED_SHARE,
        "{} of {} {op} requests failed (first: {}): the delays would describe a failing service",
        failed.len(),
        all.len(),
        failed.first().map_or("", |s| s.as_str())
    );
    let mut delays: Vec<f64> = all.iter().filter_map(|r| r.as_ref().ok().copied()).collect();
    let fit = DelayModel::fit(&delays).with_context(|| format!("too few {op} delays to fit"))?;
    delays.sort_by(f64::total_cmp);
    let quantile = |q: f64| delays[((q * delays.len() as f64).ceil() as usize).clamp(1, delays.len()) - 1];
    let model = fit.model;
    Ok(OpDelays {
        op,
        samples: delays.len(),
        failed: failed.len(),
        mean_ms: 1e3 * delays.iter().sum::<f64>() / delays.len() as f64,
        measured_ms: QUANTILES.iter().map(|&q| (q, 1e3 * quantile(q))).collect(),
        shift_ms: 1e3 * model.shift_s,
        exp_mean_ms: 1e3 * model.exp_mean_s,
        model_ms: QUANTILES.iter().map(|&q| (q, 1e3 * (model.shift_s - model.exp_mean_s * (1.0 - q).ln()))).collect(),
        lag1_correlation: lag1(threads),
    })
}

/// Pearson correlation of (delay i, delay i+1) pairs within each thread.
fn lag1(threads: &[Vec<Result<f64, String>>]) -> f64 {
    let pairs: Vec<(f64, f64)> = threads
        .iter()
        .flat_map(|thread| {
            thread.windows(2).filter_map(|pair| match (&pair[0], &pair[1]) {
                (Ok(a), Ok(b)) => Some((*a, *b)),
                _ => None,
            })
        })
        .collect();
    let count = pairs.len() as f64;
    if count < 2.0 {
        return 0.0;
    }
    let (mean_a, mean_b) =
        (pairs.iter().map(|p| p.0).sum::<f64>() / count, pairs.iter().map(|p| p.1).sum::<f64>() / count);
    let covariance: f64 = pairs.iter().map(|(a, b)| (a - mean_a) * (b - mean_b)).sum();
    let spread =
        |mean: f64, pick: fn(&(f64, f64)) -> f64| pairs.iter().map(|p| (pick(p) - mean).powi(2)).sum::<f64>().sqrt();
    let denominator = spread(mean_a, |p| p.0) * spread(mean_b, |p| p.1);
    if denominator > 0.0 { covariance / denominator } else { 0.0 }
}

/// The model's read delay of (n, k) at the prediction loads, its capacity and its costs.
fn predict(class: &FecClass, n: usize) -> CodePrediction {
    let uncoded = class.capacity_per_s(class.k);
    let capacity = class.capacity_per_s(n);
    let delay_ms = PREDICTION_LOADS
        .iter()
        .map(|&load| {
            let rate = load * uncoded;
            (rate < capacity).then(|| 1e3 * class.delay_s(n, rate)).filter(|d| d.is_finite())
        })
        .collect();
    CodePrediction {
        n,
        k: class.k,
        service_ms: 1e3 * class.service_delay_s(n),
        capacity_per_s: capacity,
        delay_ms,
        storage_factor: n as f64 / class.k as f64,
        requests_per_read: n,
    }
}

/// Whether coding pays off at low load, how much, and what it costs.
fn verdict(predictions: &[CodePrediction], get: &OpDelays) -> String {
    let (uncoded, longest) = (&predictions[0], &predictions[predictions.len() - 1]);
    if predictions.len() == 1 {
        return "only (k,k) was predicted: give --n-max above k".into();
    }
    let cut = 1.0 - longest.service_ms / uncoded.service_ms;
    let shift_share = get.shift_ms / (get.shift_ms + get.exp_mean_ms);
    let pays = cut >= 0.1;
    format!(
        "{}: at low load ({},{}) reads take {:.0} ms against {:.0} ms for ({},{}) ({:.0} % less), for {:.2}x the storage and {} GETs per read instead of {}; capacity {:.1} against {:.1} req/s, so an adaptive code (BAFEC) falls back to k as load grows. The GET delay is {:.0} % constant part (Δ), the rest random (1/μ): {}",
        if pays { "FEC pays off" } else { "FEC does not pay off" },
        longest.n,
        longest.k,
        longest.service_ms,
        uncoded.service_ms,
        uncoded.n,
        uncoded.k,
        100.0 * cut,
        longest.storage_factor / uncoded.storage_factor,
        longest.requests_per_read,
        uncoded.requests_per_read,
        longest.capacity_per_s,
        uncoded.capacity_per_s,
        100.0 * shift_share,
        if pays {
            "the random part is what racing n tasks cuts"
        } else {
            "the delay is mostly a constant racing cannot cut"
        }
    ) + ". The model takes the service's delays as independent of the load added (a large service's are); a small one's grow with it: measure at the load you will run"
}

/// Renders the report as tables and the verdict.
pub fn render_text(report: &BackendReport) -> String {
    let mut table = comfy_table::Table::new();
    table.set_header([
        "op",
        "requests",
        "failed",
        "mean ms",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "Δ ms",
        "1/μ ms",
        "fit p50/p99/p99.9 ms",
        "lag-1 r",
    ]);
    for op in &report.ops {
        let measured: Vec<String> = op.measured_ms.iter().map(|(_, ms)| format!("{ms:.1}")).collect();
        let model: Vec<String> =
            op.model_ms.iter().filter(|(q, _)| *q != 0.9).map(|(_, ms)| format!("{ms:.1}")).collect();
        table.add_row(vec![
            op.op.to_string(),
            op.samples.to_string(),
            op.failed.to_string(),
            format!("{:.1}", op.mean_ms),
            measured[0].clone(),
            measured[1].clone(),
            measured[2].clone(),
            measured[3].clone(),
            format!("{:.1}", op.shift_ms),
            format!("{:.1}", op.exp_mean_ms),
            model.join(" / "),
            format!("{:.3}", op.lag1_correlation),
        ]);
    }
    let mut codes = comfy_table::Table::new();
    let mut header = vec!["read code".to_string(), "no-queue ms".into(), "capacity req/s".into()];
    header.extend(PREDICTION_LOADS.iter().map(|load| format!("ms at {:.0} % C(k)", 100.0 * load)));
    header.extend(["storage".to_string(), "GETs/read".into()]);
    codes.set_header(header);
    for code in &report.predictions {
        let mut row = vec![
            format!("({},{})", code.n, code.k),
            format!("{:.1}", code.service_ms),
            format!("{:.1}", code.capacity_per_s),
        ];
        row.extend(code.delay_ms.iter().map(|d| d.map_or("unstable".into(), |ms| format!("{ms:.1}"))));
        row.extend([format!("{:.2}x", code.storage_factor), code.requests_per_read.to_string()]);
        codes.add_row(row);
    }
    format!(
        "{} ({} B objects, {} requests in flight)\n{table}\nread codes by the GET fit (C(k) = {:.1} req/s):\n{codes}\n{}\n",
        report.endpoint, report.chunk_bytes, report.threads, report.capacity_k_per_s, report.verdict
    )
}

mod bytes_of {
    use rand::{RngCore, SeedableRng};

    /// `len` seeded random bytes (incompressible, as real chunks are).
    pub fn random_body(len: usize, seed: u64) -> Vec<u8> {
        let mut body = vec![0u8; len];
        rand_chacha::ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut body);
        body
    }
}
