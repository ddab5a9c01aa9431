//! The scripted scenarios behind the durability issue's figures, each against a default
//! `lowtail up` (9 nodes, RS(6,3)) driven by real S3 clients:
//!
//! - [`kills_then_restart`]: objects written while three nodes are killed one after another,
//!   Ctrl-C, a restart with every node, the census until no stripe is short, then more nodes
//!   killed and every object read back;
//! - [`writes_through_a_crash`]: clients writing while a node is killed, counting failed writes;
//! - [`soak`]: clients reading and writing for minutes while the gateway's resident memory is
//!   sampled;
//! - [`crate::scrub_scenario::scrub_and_repair`]: bytes flipped in a parity unit and a packed
//!   replica, found by the nodes' scrub and rewritten by repair.
//!
//! Owns the scripts and their printed results. Must not relax a check to make a figure look
//! better: every count comes from the clients' own answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_s3::primitives::ByteStream;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::cluster::{Cluster, ClusterSettings};
use crate::model::body_bytes;

pub(crate) const BUCKET: &str = "scenario";

/// Where a scenario runs.
#[derive(Debug, Clone)]
pub struct ScenarioSettings {
    /// The `lowtail` executable.
    pub lowtail: std::path::PathBuf,
    /// The cluster's directory.
    pub dir: std::path::PathBuf,
    /// Concurrent clients.
    pub clients: usize,
    /// Seed of the object sizes.
    pub seed: u64,
    /// The cluster's `up.toml` (empty: every default).
    pub up_toml: String,
    /// Keep the cluster's directory afterwards (its logs; its data can be many GB).
    pub keep: bool,
}

/// Stops the cluster and, unless asked to keep it, removes its directory (a soak writes gigabytes).
pub(crate) fn finish(mut cluster: Cluster, settings: &ScenarioSettings) {
    cluster.stop();
    drop(cluster);
    if !settings.keep {
        let _ = std::fs::remove_dir_all(&settings.dir);
    }
}

/// An acknowledged object: its key and the seed and size of its bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stored {
    pub(crate) index: u64,
    pub(crate) size_bytes: u64,
}

pub(crate) fn key(index: u64) -> String {
    format!("o/{index:06}")
}

pub(crate) fn client_of(cluster: &Cluster) -> aws_sdk_s3::Client {
    let endpoint = bench::s3_client::S3Endpoint::from_manifest(cluster.manifest());
    bench::s3_client::measurement_client(&endpoint, "lowtail-swarm", Duration::from_secs(120))
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?)
}

/// A size from 1 KiB to `max_bytes`, log-uniform (as many small objects as large ones).
fn size(rng: &mut rand_chacha::ChaCha8Rng, max_bytes: u64) -> u64 {
    let exponent = rng.random_range(10.0..(max_bytes as f64).log2());
    2f64.powf(exponent) as u64
}

/// Progress of [`put_all`], readable while it runs.
#[derive(Debug, Default)]
struct Progress {
    acknowledged: AtomicU64,
    failed: AtomicU64,
}

/// PUTs objects `0..sizes.len()` (object i of `sizes[i]` bytes) with `clients` clients until done
/// or stopped; the acknowledged ones.
async fn put_all(
    client: aws_sdk_s3::Client,
    sizes: Arc<Vec<u64>>,
    clients: usize,
    stop: Arc<std::sync::atomic::AtomicBool>,
    progress: Arc<Progress>,
) -> Vec<Stored> {
    let next = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (client, sizes, next, progress, stop) =
                (client.clone(), Arc::clone(&sizes), Arc::clone(&next), Arc::clone(&progress), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut stored = Vec::new();
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index as usize >= sizes.len() || stop.load(Ordering::Relaxed) {
                        return stored;
                    }
                    let size_bytes = sizes[index as usize];
                    let body = ByteStream::from(body_bytes(index, size_bytes));
                    match client.put_object().bucket(BUCKET).key(key(index)).body(body).send().await {
                        Ok(_) => {
                            stored.push(Stored { index, size_bytes });
                            progress.acknowledged.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(error) => {
                            progress.failed.fetch_add(1, Ordering::Relaxed);
                            eprintln!("PUT {} failed: {}", key(index), bench::s3_client::error_text(&error));
                        }
                    }
                }
            })
        })
        .collect();
    let mut stored = Vec::new();
    for task in tasks {
        stored.extend(task.await.unwrap_or_default());
    }
    stored
}

/// How many of `stored` fail to read back byte for byte (with the first few errors).
pub(crate) async fn count_unreadable(client: &aws_sdk_s3::Client, stored: &[Stored]) -> (u64, Vec<String>) {
    let mut lost = 0;
    let mut examples = Vec::new();
    for object in stored {
        let problem = match client.get_object().bucket(BUCKET).key(key(object.index)).send().await {
            Ok(output) => match output.body.collect().await {
                Ok(bytes) => (bytes.into_bytes() != body_bytes(object.index, object.size_bytes))
                    .then(|| "wrong bytes".to_string()),
                Err(error) => Some(format!("body: {error}")),
            },
            Err(error) => Some(bench::s3_client::error_text(&error)),
        };
        if let Some(problem) = problem {
            lost += 1;
            if examples.len() < 5 {
                examples.push(format!("{}: {problem}", key(object.index)));
            }
        }
    }
    (lost, examples)
}

/// What [`kills_then_restart`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct KillsReport {
    /// PUTs attempted.
    pub puts: u64,
    /// Acknowledged.
    pub acknowledged: u64,
    /// Of those, unreadable right after the writes (three nodes down).
    pub unreadable_with_three_down: u64,
    /// The census right after the restart, and the one that found no stripe short.
    pub census_after_restart: serde_json::Value,
    /// Seconds from the restart until the census found no stripe short.
    pub whole_after_s: f64,
    /// What repair did after the restart, as the gateway reports it (`repair` of its status, without
    /// the scrub list).
    pub repair_after_restart: serde_json::Value,
    /// The repair grace and scan interval in force (ms).
    pub grace_ms: u64,
    /// Acknowledged objects unreadable after one more node was killed, then after three.
    pub lost_after_one_more: u64,
    /// Same, after three.
    pub lost_after_three_more: u64,
    /// A few of the failures, if any.
    pub examples: Vec<String>,
}

/// The first scenario; see the module documentation.
pub fn kills_then_restart(settings: &ScenarioSettings, objects: usize, max_bytes: u64) -> anyhow::Result<KillsReport> {
    let mut cluster = Cluster::start(cluster_settings(settings, 9))?;
    let runtime = runtime()?;
    let client = client_of(&cluster);
    runtime.block_on(client.create_bucket().bucket(BUCKET).send())?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(settings.seed);
    let sizes: Arc<Vec<u64>> = Arc::new((0..objects).map(|_| size(&mut rng, max_bytes)).collect());
    let victims = crate::cluster::pick_nodes(&mut rng, 9, 3);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress = Arc::new(Progress::default());
    // The three kills land a quarter, a half and three quarters of the way through the writes.
    let writes =
        runtime.spawn(put_all(client.clone(), Arc::clone(&sizes), settings.clients, stop, Arc::clone(&progress)));
    for (i, &victim) in victims.iter().enumerate() {
        wait_for_progress(&progress, objects as u64 * (i as u64 + 1) / 4)?;
        println!("killing node {victim} (SIGKILL)");
        cluster.kill_node(victim);
    }
    let stored = runtime.block_on(writes)?;
    let failed = progress.failed.load(Ordering::Relaxed);
    println!("{} of {objects} PUTs acknowledged, {failed} failed", stored.len());
    let (unreadable, mut examples) = runtime.block_on(count_unreadable(&client, &stored));
    println!("with three nodes down: {unreadable} acknowledged objects unreadable");
    println!("stopping lowtail up (SIGINT, as Ctrl-C) and starting it again with every node");
    cluster.stop_gracefully_and_restart()?;
    let restarted = Instant::now();
    let grace_ms = 60_000;
    let (first, last) = wait_until_whole(&cluster, Duration::from_millis(grace_ms + 60_000))?;
    let whole_after_s = restarted.elapsed().as_secs_f64();
    let mut repair_after_restart = cluster.status().map(|status| status["repair"].clone()).unwrap_or_default();
    if let Some(repair) = repair_after_restart.as_object_mut() {
        repair.remove("scrub");
    }
    println!("census right after the restart: {first}");
    println!("no stripe short of a unit {whole_after_s:.1} s after the restart: {last}");
    println!("repair since the restart: {repair_after_restart}");
    let client = client_of(&cluster);
    let mut lost = Vec::new();
    for (count, victims) in [(1u32, 1u32), (3, 2)] {
        for node in crate::cluster::pick_nodes(&mut rng, 9, victims) {
            println!("killing node {node}");
            cluster.kill_node(node);
        }
        let (unreadable, more) = runtime.block_on(count_unreadable(&client, &stored));
        println!("{count} more nodes down: {unreadable} of {} acknowledged objects unreadable", stored.len());
        examples.extend(more);
        lost.push(unreadable);
    }
    finish(cluster, settings);
    Ok(KillsReport {
        puts: objects as u64,
        acknowledged: stored.len() as u64,
        unreadable_with_three_down: unreadable,
        census_after_restart: first,
        whole_after_s,
        repair_after_restart,
        grace_ms,
        lost_after_one_more: lost[0],
        lost_after_three_more: lost[1],
        examples,
    })
}

pub(crate) fn cluster_settings(settings: &ScenarioSettings, nodes: u32) -> ClusterSettings {
    ClusterSettings::up(settings.lowtail.clone(), settings.dir.clone(), nodes, settings.up_toml.clone())
}

/// Waits until `done` PUTs were answered (acknowledged or failed).
fn wait_for_progress(progress: &Progress, done: u64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(1200);
    while progress.acknowledged.load(Ordering::Relaxed) + progress.failed.load(Ordering::Relaxed) < done {
        anyhow::ensure!(Instant::now() < deadline, "the writes did not progress for twenty minutes");
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Polls the census until no stripe is short; the first census seen and the last.
pub(crate) fn wait_until_whole(
    cluster: &Cluster,
    timeout: Duration,
) -> anyhow::Result<(serde_json::Value, serde_json::Value)> {
    let deadline = Instant::now() + timeout;
    let mut first = None;
    loop {
        // Why a poll has no census: the status did not answer, or the repair lease holder had not
        // counted yet (an earlier failure said only "null").
        let (census, why_none) = match cluster.status() {
            Ok(status) => {
                let why = format!("no census in the status (lease holder: {})", status["repair"]["lease_holder"]);
                (status["repair"]["census"].clone(), why)
            }
            Err(error) => (serde_json::Value::Null, format!("the status did not answer: {error:#}")),
        };
        if !census.is_null() && first.is_none() {
            first = Some(census.clone());
        }
        if census["complete"] == true && census["stripes_under_redundant"] == 0 {
            return Ok((first.unwrap_or_default(), census));
        }
        let last = if census.is_null() { why_none } else { census.to_string() };
        anyhow::ensure!(Instant::now() < deadline, "still short after {timeout:?}: {last}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What [`writes_through_a_crash`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct CrashReport {
    /// PUTs attempted.
    pub puts: u64,
    /// Failed (an error or no answer).
    pub failed: u64,
    /// PUTs acknowledged after the kill (while the node was dead).
    pub acknowledged_after_kill: u64,
    /// Acknowledged objects unreadable afterwards.
    pub unreadable: u64,
    /// Examples of failures.
    pub examples: Vec<String>,
}

/// Clients write for `seconds`; a third of the way in one node is SIGKILLed.
pub fn writes_through_a_crash(
    settings: &ScenarioSettings,
    seconds: u64,
    max_bytes: u64,
) -> anyhow::Result<CrashReport> {
    let mut cluster = Cluster::start(cluster_settings(settings, 9))?;
    let runtime = runtime()?;
    let client = client_of(&cluster);
    runtime.block_on(client.create_bucket().bucket(BUCKET).send())?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(settings.seed);
    let sizes: Arc<Vec<u64>> = Arc::new((0..1_000_000).map(|_| size(&mut rng, max_bytes)).collect());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress = Arc::new(Progress::default());
    let writes =
        runtime.spawn(put_all(client.clone(), sizes, settings.clients, Arc::clone(&stop), Arc::clone(&progress)));
    std::thread::sleep(Duration::from_secs(seconds / 3));
    let victim = crate::cluster::pick_nodes(&mut rng, 9, 1)[0];
    let before = progress.acknowledged.load(Ordering::Relaxed);
    println!("killing node {victim} (SIGKILL) after {before} acknowledged PUTs");
    cluster.kill_node(victim);
    std::thread::sleep(Duration::from_secs(seconds - seconds / 3));
    stop.store(true, Ordering::Relaxed);
    let stored = runtime.block_on(writes)?;
    let failed = progress.failed.load(Ordering::Relaxed);
    let (unreadable, examples) = runtime.block_on(count_unreadable(&client, &stored));
    let puts = stored.len() as u64 + failed;
    let acknowledged_after_kill = stored.len() as u64 - before.min(stored.len() as u64);
    finish(cluster, settings);
    Ok(CrashReport { puts, failed, acknowledged_after_kill, unreadable, examples })
}

/// What [`soak`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    /// Requests served (PUT and GET).
    pub requests: u64,
    /// Failed ones.
    pub failed: u64,
    /// The gateway process's resident memory, sampled every 5 s: (seconds in, KiB).
    pub rss_kib: Vec<(u64, u64)>,
    /// Highest over lowest single sample after the warm-up (seals and reads in flight hold buffers
    /// for moments: this swings without a trend).
    pub rss_ratio_after_warmup: f64,
    /// Mean resident memory over the first minute after the warm-up, KiB.
    pub rss_first_minute_mean_kib: f64,
    /// Mean resident memory over the last minute, KiB.
    pub rss_last_minute_mean_kib: f64,
    /// The last minute's mean over the first's: the trend (1.0 = flat).
    pub rss_trend: f64,
    /// The gateway's metadata page cache (`lowtail_gateway_meta_cache_bytes`), sampled with the
    /// RSS: (seconds in, KiB). It fills up to `meta_cache_bytes` and stays there.
    pub meta_cache_kib: Vec<(u64, u64)>,
    /// Mean metadata cache over the first minute after the warm-up and over the last, KiB.
    pub meta_cache_first_last_minute_mean_kib: (f64, f64),
    /// The trend of the RSS less the metadata cache: what grows besides the bounded cache.
    pub rss_less_meta_cache_trend: f64,
    /// The bytes the gateway's program holds (`lowtail_process_heap_live_bytes`), sampled with the
    /// RSS: (seconds in, KiB). Against the RSS it tells a leak from an allocator that keeps pages.
    pub live_heap_kib: Vec<(u64, u64)>,
    /// The live heap's last minute mean over its first after the warm-up.
    pub live_heap_trend: f64,
    /// The RSS's least-squares line over every sample after the warm-up: its value at the end over
    /// its value at the warm-up's end. Single minutes swing by ±10 % (a metadata snapshot every
    /// 5 minutes, seals, reads in flight), so the minute means' ratio is noisy; the line is not, and
    /// a steady growth still shows in it.
    pub rss_fit_trend: f64,
    /// The same line's ratio for the live heap.
    pub live_heap_fit_trend: f64,
}

/// `clients` clients put and get objects for `minutes`; the gateway's RSS is sampled.
pub fn soak(settings: &ScenarioSettings, minutes: u64, warmup_s: u64, max_bytes: u64) -> anyhow::Result<SoakReport> {
    let cluster = Cluster::start(cluster_settings(settings, 9))?;
    let runtime = runtime()?;
    let client = client_of(&cluster);
    runtime.block_on(client.create_bucket().bucket(BUCKET).send())?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let requests = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..settings.clients as u64)
        .map(|client_index| {
            let (client, stop, requests, failed) =
                (client.clone(), Arc::clone(&stop), Arc::clone(&requests), Arc::clone(&failed));
            let seed = settings.seed ^ client_index;
            runtime.spawn(soak_client(client, seed, max_bytes, stop, requests, failed))
        })
        .collect();
    let pid = cluster.gateway_pid().ok_or_else(|| anyhow::anyhow!("no gateway"))?;
    let metrics_url = cluster.manifest().gateway.as_ref().map(|g| g.metrics.clone()).unwrap_or_default();
    let started = Instant::now();
    let (mut rss_kib, mut meta_cache_kib, mut live_heap_kib) = (Vec::new(), Vec::new(), Vec::new());
    while started.elapsed() < Duration::from_secs(minutes * 60) {
        std::thread::sleep(Duration::from_secs(5));
        let kib = resident_kib(pid)?;
        let gauge_kib = |name| gauge(&metrics_url, name).unwrap_or(0.0) as u64 / 1024;
        let cache_kib = gauge_kib("lowtail_gateway_meta_cache_bytes");
        let (live_kib, committed_kib) =
            (gauge_kib("lowtail_process_heap_live_bytes"), gauge_kib("lowtail_process_allocator_committed_bytes"));
        let at = started.elapsed().as_secs();
        let served = requests.load(Ordering::Relaxed);
        println!(
            "{at:>5} s  gateway RSS {kib:>8} KiB  live heap {live_kib:>8} KiB  allocator committed {committed_kib:>8} KiB  \
             metadata cache {cache_kib:>7} KiB  requests {served}"
        );
        rss_kib.push((at, kib));
        meta_cache_kib.push((at, cache_kib));
        live_heap_kib.push((at, live_kib));
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        let _ = runtime.block_on(task);
    }
    finish(cluster, settings);
    let after: Vec<u64> = rss_kib.iter().filter(|(at, _)| *at >= warmup_s).map(|(_, kib)| *kib).collect();
    let ratio = match (after.iter().max(), after.iter().min()) {
        (Some(&max), Some(&min)) if min > 0 => max as f64 / min as f64,
        _ => f64::NAN,
    };
    let end_s = rss_kib.last().map_or(0, |(at, _)| *at);
    let first_and_last =
        |series: &[(u64, u64)]| (minute_mean(series, warmup_s), minute_mean(series, end_s.saturating_sub(59)));
    let (first, last) = first_and_last(&rss_kib);
    let cache = first_and_last(&meta_cache_kib);
    let live = first_and_last(&live_heap_kib);
    let (rss_fit_trend, live_heap_fit_trend) = (fit_trend(&rss_kib, warmup_s), fit_trend(&live_heap_kib, warmup_s));
    Ok(SoakReport {
        requests: requests.load(Ordering::Relaxed),
        failed: failed.load(Ordering::Relaxed),
        rss_kib,
        rss_ratio_after_warmup: ratio,
        rss_first_minute_mean_kib: first,
        rss_last_minute_mean_kib: last,
        rss_trend: last / first,
        meta_cache_kib,
        meta_cache_first_last_minute_mean_kib: cache,
        rss_less_meta_cache_trend: (last - cache.1) / (first - cache.0),
        live_heap_trend: live.1 / live.0,
        rss_fit_trend,
        live_heap_fit_trend,
        live_heap_kib,
    })
}

/// The least-squares line through the samples of `series` from `from_s` on: its value at the last
/// sample over its value at `from_s` (NaN with fewer than two samples).
pub fn fit_trend(series: &[(u64, u64)], from_s: u64) -> f64 {
    let points: Vec<(f64, f64)> =
        series.iter().filter(|(at, _)| *at >= from_s).map(|&(at, kib)| (at as f64, kib as f64)).collect();
    let n = points.len() as f64;
    if points.len() < 2 {
        return f64::NAN;
    }
    let (mean_x, mean_y) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let covariance: f64 = points.iter().map(|(x, y)| (x - mean_x) * (y - mean_y)).sum();
    let variance: f64 = points.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
    let slope = covariance / variance;
    let at = |x: f64| mean_y + slope * (x - mean_x);
    at(points[points.len() - 1].0) / at(from_s as f64)
}

/// The mean of the samples of `series` taken in the minute from `from_s`.
fn minute_mean(series: &[(u64, u64)], from_s: u64) -> f64 {
    let inside: Vec<f64> =
        series.iter().filter(|(at, _)| (from_s..from_s + 60).contains(at)).map(|(_, kib)| *kib as f64).collect();
    inside.iter().sum::<f64>() / inside.len().max(1) as f64
}

/// The value of Prometheus gauge `name` at `url` (`None` when it cannot be read).
fn gauge(url: &str, name: &str) -> Option<f64> {
    let text = ureq::get(url).call().ok()?.body_mut().read_to_string().ok()?;
    text.lines().find(|line| line.starts_with(name))?.split_whitespace().last()?.parse().ok()
}

/// One soak client: puts (a quarter) and gets over a fixed set of 200 keys until stopped.
async fn soak_client(
    client: aws_sdk_s3::Client,
    seed: u64,
    max_bytes: u64,
    stop: Arc<std::sync::atomic::AtomicBool>,
    requests: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    while !stop.load(Ordering::Relaxed) {
        let index = (seed << 16) | rng.random_range(0..200u64);
        let ok = if rng.random_bool(0.25) {
            let body = ByteStream::from(body_bytes(index, size(&mut rng, max_bytes)));
            client.put_object().bucket(BUCKET).key(key(index)).body(body).send().await.is_ok()
        } else {
            match client.get_object().bucket(BUCKET).key(key(index)).send().await {
                Ok(output) => output.body.collect().await.is_ok(),
                Err(error) => error.as_service_error().is_some_and(|e| e.is_no_such_key()),
            }
        };
        requests.fetch_add(1, Ordering::Relaxed);
        if !ok {
            failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Resident memory of process `pid` (`VmRSS` of `/proc/PID/status`), in KiB.
fn resident_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).ok_or_else(|| anyhow::anyhow!("no VmRSS"))?;
    Ok(line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_flat_series_that_swings_fits_flat_and_a_growing_one_does_not() {
        let swinging: Vec<(u64, u64)> = (0..720).map(|i| (i * 5, if i % 7 == 0 { 130 } else { 100 })).collect();
        let flat = super::fit_trend(&swinging, 900);
        assert!((0.97..1.03).contains(&flat), "{flat}");
        let growing: Vec<(u64, u64)> = (0..720).map(|i| (i * 5, 100 + i / 10)).collect();
        let trend = super::fit_trend(&growing, 900);
        assert!(trend > 1.3, "{trend}");
        assert!(super::fit_trend(&[(1000, 5)], 900).is_nan());
    }
}
