//! `lowtail experiment ecstore --live`: EC-Store on a loopback cluster of real processes (etcd,
//! twelve `lowtail node`s emulating the simulator's stand-in disks, one `lowtail gateway`), read
//! by closed-loop clients through the S3 batch read (`POST /{bucket}?lowtail-batch-get`):
//! YCSB-E-like scans of up to ten 100 KB objects, Zipf start keys (unscrambled). The objects are
//! written in an order unrelated to their keys, so a scan's neighbouring keys are placed
//! independently (the paper's random placement) while the placer keeps the nodes balanced.
//!
//! Runs, on one cluster, in this order (the mover changes the placement for good, so the
//! configurations without it go first): EC (random units), EC-data, EC+LB, EC+C, then the mover
//! switched on and left to learn, then EC+C+M and EC+C+M+LB. Every part a client receives is
//! checked against the object's bytes.
//!
//! Owns: the choice of runs and their judging. Must not: compute statistics other than from the
//! gateway's records (`report::batch`) and the clients' checks, or leave processes behind.

use super::{Config, NODES as SIM_NODES};
use crate::fastcloud::PaperFinding;
use crate::fastcloud::finding;
use crate::fastcloud::live::one_gateway_fleet;
use crate::live::blocking;
use crate::parallel::Progress;
use anyhow::{Context, ensure};
use bench::s3_batch::{BatchClient, BatchRequest};
use bench::s3_client::measurement_client;
use launcher::Fleet;
use launcher::gateway_admin::GatewayAdmin;
use load::objects::{object_bytes, object_key};
use load::s3::{ensure_bucket, prepare};
use model::{BatchRecord, MoveRecord, ObjectId, Record, RecordLog, RequestId};
use node::ServiceModel;
use policy::ecstore::access::AccessSettings;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use report::Sample;
use report::batch::{BatchSummary, BatchWindow, summarize_batches};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use workload::batch::{BatchGenerator, BatchWorkload, YcsbEConfig};

/// The cluster's code (the paper's RS(2,2)).
const LIVE_CODE: &str = "rs-2-2";
/// Storage nodes (the paper's 32 do not fit two cores beside a gateway and the clients).
const NODES: usize = 12;
/// Bytes of a block (one object): the paper's default 100 KB.
const BLOCK_BYTES: u64 = 100_000;
/// Longest scan, in keys.
const MAX_SCAN: u32 = 10;
/// How long after the clients stop the batches still out (late binding's extra reads run to their
/// end after the answer) are given to settle before their records are taken.
const SETTLE: Duration = Duration::from_secs(1);
/// Closed-loop clients, no think time.
const CLIENTS: usize = 16;
/// The bucket.
const BUCKET: &str = "ycsb";
/// The emulated disks: the simulator's stand-in at a fifth of its rate (so that the nodes, not
/// the gateway's two cores, are the bottleneck): 20 MB/s, a per-task overhead of five times a
/// 50 KB chunk's transfer (12.5 ms), an exponential part of half that.
const RATE_BYTES_PER_S: f64 = 20e6;
const OVERHEAD_US: u64 = 12_500;
const EXP_MEAN_US: u64 = 6_250;

pub use crate::fastcloud::live::LiveOptions;

/// Durations and sizes of a live run.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LiveScale {
    /// Objects stored.
    pub blocks: u32,
    /// Seconds of each configuration's warm-up (not measured).
    pub warmup_s: u64,
    /// Seconds measured per configuration.
    pub measure_s: u64,
    /// Seconds the mover learns (moving, unmeasured) before EC+C+M is measured.
    pub learn_s: u64,
}

impl LiveScale {
    /// The scale of runs under `options` (`quick`: fewer objects, shorter spans).
    pub fn of(options: &LiveOptions) -> LiveScale {
        if options.quick {
            LiveScale { blocks: 400, warmup_s: 3, measure_s: 12, learn_s: 20 }
        } else {
            LiveScale { blocks: 2_000, warmup_s: 10, measure_s: 60, learn_s: 180 }
        }
    }
}

/// The configurations run live, in order.
pub const LIVE_CONFIGS: [Config; 6] =
    [Config::Ec, Config::EcData, Config::EcLb, Config::EcC, Config::EcCM, Config::EcCMLb];

/// One configuration's measurement.
#[derive(Clone, Debug, Serialize)]
pub struct LiveRun {
    /// The configuration's label.
    pub config: &'static str,
    /// The gateway's statistics of its batches (from its records).
    pub summary: BatchSummary,
    /// Batches the clients completed.
    pub client_batches: u64,
    /// Mean batch latency at the clients (request to last byte), milliseconds.
    pub client_mean_ms: f64,
    /// Batches whose answer was not 200, or a part not the object's bytes.
    pub client_failures: u64,
    /// Moves committed while it was measured.
    pub moves: u64,
}

/// What the live experiment produced.
#[derive(Debug)]
pub struct LiveOutcome {
    /// The findings, as written to findings-live.json.
    pub findings: Vec<PaperFinding>,
    /// The runs, as written to live.json.
    pub runs: Vec<LiveRun>,
    /// The table, as written to live.md.
    pub markdown: String,
}

/// Steps the progress bar counts: the cluster, the mover's learning and each configuration.
pub fn step_count() -> usize {
    2 + LIVE_CONFIGS.len()
}

/// The emulated disk of node `id`.
fn node_model(seed: u64, id: u32) -> ServiceModel {
    ServiceModel {
        enabled: true,
        replace_real_io: true,
        overhead_us: OVERHEAD_US,
        rate_bytes_per_s: RATE_BYTES_PER_S,
        delay_exp_mean_us: EXP_MEAN_US,
        seed: seed.wrapping_mul(1000) + u64::from(id),
        ..ServiceModel::default()
    }
}

/// `config`'s access settings on the live store: the simulator's, with the gateway's own estimate
/// of a loopback round trip and its block deadline (the defaults) instead of the model's network
/// and the paper's none.
fn live_access(config: Config) -> AccessSettings {
    let defaults = AccessSettings::default();
    AccessSettings {
        round_trip_ns: defaults.round_trip_ns,
        block_deadline_ns: defaults.block_deadline_ns,
        ..config.access()
    }
}

/// Block `index`'s object: a seeded permutation of the objects, written in object order, so
/// neighbouring keys are placed independently.
struct Blocks {
    objects: Vec<ObjectId>,
    seed: u64,
}

impl Blocks {
    fn new(count: u32, seed: u64) -> Blocks {
        let mut objects: Vec<ObjectId> = (0..u64::from(count)).map(ObjectId).collect();
        objects.shuffle(&mut ChaCha8Rng::seed_from_u64(seed ^ 0xB10C));
        Blocks { objects, seed }
    }

    fn key(&self, block: u32) -> String {
        object_key(self.seed, self.objects[block as usize])
    }

    fn bytes(&self, block: u32) -> Vec<u8> {
        object_bytes(self.seed, self.objects[block as usize], BLOCK_BYTES)
    }
}

/// A started, loaded cluster.
struct Cluster {
    fleet: Fleet,
    admin: GatewayAdmin,
    client: BatchClient,
}

async fn start_cluster(options: &LiveOptions, dir: &Path, blocks: &Blocks) -> anyhow::Result<Cluster> {
    let mut data = gateway::data::DataConfig { code: LIVE_CODE.to_owned(), ..Default::default() };
    // Every object striped: one stripe of two 50 KB data units and two parity units.
    data.packed.max_object_bytes = 0;
    let mut controller = launcher::fleet::ControllerTable::new();
    controller.insert("max_records".into(), toml::Value::Integer(2_000_000));
    // The nodes' service model is off while the objects load, on for the runs.
    let (fleet, endpoint, admin) = one_gateway_fleet(options, dir, (NODES, 1), data, controller).await?;
    let s3 = measurement_client(&endpoint, "lowtail-ecstore", Duration::from_secs(60));
    ensure_bucket(&s3, BUCKET).await?;
    let sizes: BTreeMap<ObjectId, u64> = blocks.objects.iter().map(|&o| (o, BLOCK_BYTES)).collect();
    prepare(std::slice::from_ref(&s3), BUCKET, blocks.seed, &sizes, &|| {}).await.context("loading objects")?;
    for id in 0..NODES as u32 {
        fleet.set_service_model(id, &node_model(options.seed, id)).await?;
    }
    let client =
        BatchClient::new(&endpoint.url, &endpoint.access_key, &endpoint.secret_key).with_region(&endpoint.region);
    Ok(Cluster { fleet, admin, client })
}

/// What the clients saw over one span.
#[derive(Debug, Default)]
struct Driven {
    latencies_ns: Vec<u64>,
    failures: u64,
}

/// `CLIENTS` closed-loop clients issuing scans until `until`, each part checked.
async fn drive(
    cluster: &Cluster,
    blocks: &Arc<Blocks>,
    generator: &Arc<Mutex<BatchGenerator>>,
    until: Instant,
    seed: u64,
) -> Driven {
    let mut clients = Vec::with_capacity(CLIENTS);
    for index in 0..CLIENTS {
        let (client, blocks, generator) = (cluster.client.clone(), Arc::clone(blocks), Arc::clone(generator));
        let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(7919) + index as u64);
        clients.push(tokio::spawn(async move {
            let mut driven = Driven::default();
            let mut batch = Vec::new();
            // Bounded by the deadline: each round is one request with the client's time limit.
            while Instant::now() < until {
                // The workload turned Zipf at time 0 (`change_at_ns` 0): the time passed is ignored.
                lock(&generator).next_batch(1, &mut rng, &mut batch);
                let keys: Vec<String> = batch.iter().map(|&b| blocks.key(b)).collect();
                let sent = Instant::now();
                let answer = client.get_batch(BUCKET, &BatchRequest::Keys(keys.clone())).await;
                let latency_ns = sent.elapsed().as_nanos() as u64;
                let right = answer.is_ok_and(|parts| {
                    parts.len() == batch.len()
                        && parts.iter().zip(&batch).all(|(part, &block)| {
                            part.status == 200
                                && part.key == blocks.key(block)
                                && part.body[..] == blocks.bytes(block)[..]
                        })
                });
                if right {
                    driven.latencies_ns.push(latency_ns);
                } else {
                    driven.failures += 1;
                }
                // A little randomness between clients keeps them from marching in step.
                if rng.random_bool(0.01) {
                    tokio::task::yield_now().await;
                }
            }
            driven
        }));
    }
    let mut all = Driven::default();
    for client in clients {
        if let Ok(driven) = client.await {
            all.latencies_ns.extend(driven.latencies_ns);
            all.failures += driven.failures;
        } else {
            all.failures += 1;
        }
    }
    all
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The gateway's records of one span, renumbered densely (the summariser indexes blocks by
/// request id from 0).
fn dense(records: Vec<Record>, batches: Vec<BatchRecord>) -> anyhow::Result<(RecordLog, Vec<BatchRecord>)> {
    let by_id: BTreeMap<u64, Record> = records.into_iter().map(|r| (r.request.request.0, r)).collect();
    let mut log = RecordLog::with_capacity(by_id.len(), by_id.len() * 3);
    let mut renumbered = Vec::with_capacity(batches.len());
    for mut batch in batches {
        let first = log.len() as u64;
        for id in batch.requests() {
            let record = by_id.get(&id).with_context(|| format!("the gateway kept no record of block request {id}"))?;
            let mut request = record.request;
            request.request = RequestId(log.len() as u64);
            log.push(request, &record.tasks);
        }
        batch.first_request = RequestId(first);
        renumbered.push(batch);
    }
    Ok((log, renumbered))
}

/// Runs `config` for a warm-up and a measured span; the measured span's statistics.
async fn run_config(
    cluster: &Cluster,
    config: Config,
    scale: &LiveScale,
    blocks: &Arc<Blocks>,
    generator: &Arc<Mutex<BatchGenerator>>,
    seed: u64,
) -> anyhow::Result<LiveRun> {
    switch(cluster, config).await?;
    drive(cluster, blocks, generator, Instant::now() + Duration::from_secs(scale.warmup_s), seed).await;
    take_all(&cluster.admin).await?;
    let driven =
        drive(cluster, blocks, generator, Instant::now() + Duration::from_secs(scale.measure_s), seed + 1).await;
    let (records, batches, moves) = take_all(&cluster.admin).await?;
    let (log, batches) = dense(records, batches)?;
    let window = BatchWindow { from_ns: 0, to_ns: u64::MAX, bucket_ns: 10_000_000_000 };
    let summary = summarize_batches(&batches, &log, &moves, node_count(&log), window);
    let client_batches = driven.latencies_ns.len() as u64;
    let client = Sample::new(driven.latencies_ns);
    Ok(LiveRun {
        config: config.name(),
        client_batches,
        client_mean_ms: client.stats().map_or(0.0, |s| s.mean_s * 1e3),
        client_failures: driven.failures,
        moves: summary.moves,
        summary,
    })
}

/// Nodes the records name (their dense ids are the gateway's, counted from 0).
fn node_count(log: &RecordLog) -> usize {
    (0..log.len()).flat_map(|i| log.get(i).tasks.iter().map(|t| t.node.index() + 1)).max().unwrap_or(0).max(NODES)
}

/// Takes the gateway's block, batch and move records, once the batches still out when the
/// clients stopped have settled.
async fn take_all(admin: &GatewayAdmin) -> anyhow::Result<(Vec<Record>, Vec<BatchRecord>, Vec<MoveRecord>)> {
    tokio::time::sleep(SETTLE).await;
    let admin = admin.clone();
    blocking(move || {
        // Blocks first: the gateway keeps a batch's block records before the batch's own, so a
        // batch taken here never has its blocks left for the next take.
        let taken = admin.take_records()?;
        let batches = admin.take_batches()?;
        ensure!(taken.dropped == 0, "the gateway dropped {} records", taken.dropped);
        Ok((taken.records, batches, admin.take_moves()?))
    })
    .await
}

async fn measure(options: &LiveOptions, dir: &Path, step: &dyn Fn(String)) -> anyhow::Result<Vec<LiveRun>> {
    let scale = LiveScale::of(options);
    let blocks = Arc::new(Blocks::new(scale.blocks, options.seed));
    let cluster = start_cluster(options, dir, &blocks).await?;
    step("cluster started and loaded".into());
    let result = measure_on(options, &cluster, &scale, &blocks, step).await;
    cluster.fleet.shutdown().await;
    result
}

async fn measure_on(
    options: &LiveOptions,
    cluster: &Cluster,
    scale: &LiveScale,
    blocks: &Arc<Blocks>,
    step: &dyn Fn(String),
) -> anyhow::Result<Vec<LiveRun>> {
    let workload = BatchWorkload::YcsbE(YcsbEConfig {
        blocks: scale.blocks,
        block_bytes: BLOCK_BYTES,
        max_scan_length: MAX_SCAN,
        zipf_exponent: 1.0,
        scrambled: false,
        change_at_ns: 0,
    });
    let generator = Arc::new(Mutex::new(workload.build(options.seed).context("the scan workload")?));
    let mut runs = Vec::new();
    for (index, &config) in LIVE_CONFIGS.iter().enumerate() {
        if config == Config::EcCM {
            learn(cluster, config, scale, blocks, &generator, options.seed).await?;
            step(format!("the mover learned for {} s", scale.learn_s));
        }
        let seed = options.seed * 100 + index as u64;
        let run = run_config(cluster, config, scale, blocks, &generator, seed).await?;
        step(format!("{}: {:.1} ms", run.config, run.summary.latency_ms_mean().unwrap_or(0.0)));
        runs.push(run);
    }
    Ok(runs)
}

/// The gateway switched to `config`: its access policy, and the mover on or off.
async fn switch(cluster: &Cluster, config: Config) -> anyhow::Result<()> {
    let (admin, access) = (cluster.admin.clone(), live_access(config));
    blocking(move || admin.set_access(&access)).await?;
    let (admin, moves) = (cluster.admin.clone(), config.moves());
    blocking(move || admin.set_mover(moves)).await
}

/// `config` (one that moves) while the clients read, unmeasured: the mover learns.
async fn learn(
    cluster: &Cluster,
    config: Config,
    scale: &LiveScale,
    blocks: &Arc<Blocks>,
    generator: &Arc<Mutex<BatchGenerator>>,
    seed: u64,
) -> anyhow::Result<()> {
    debug_assert!(config.moves(), "the mover learns under a configuration that moves");
    switch(cluster, config).await?;
    drive(cluster, blocks, generator, Instant::now() + Duration::from_secs(scale.learn_s), seed ^ 0x1EA2).await;
    Ok(())
}

/// Runs the live experiment and writes live.json, live.md and findings-live.json under `out_dir`.
pub fn run(options: &LiveOptions, out_dir: &Path, progress: &(dyn Fn(Progress) + Sync)) -> anyhow::Result<LiveOutcome> {
    let runs = crate::fastcloud::live::on_processes("lowtail-ecstore-", step_count(), progress, async |dir, step| {
        measure(options, dir, step).await
    })?;
    let findings = judge(&runs);
    let markdown = markdown(&runs, &LiveScale::of(options));
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let json = serde_json::json!({
        "scale": LiveScale::of(options),
        "nodes": NODES,
        "clients": CLIENTS,
        "code": LIVE_CODE,
        "block_bytes": BLOCK_BYTES,
        "service_model": node_model(options.seed, 0),
        "runs": runs,
    });
    std::fs::write(out_dir.join("live.json"), serde_json::to_string_pretty(&json)?)?;
    std::fs::write(out_dir.join("live.md"), &markdown)?;
    std::fs::write(out_dir.join("findings-live.json"), serde_json::to_string_pretty(&findings)?)?;
    Ok(LiveOutcome { findings, runs, markdown })
}

fn run_of(runs: &[LiveRun], config: Config) -> Option<&LiveRun> {
    runs.iter().find(|r| r.config == config.name())
}

/// The live findings (EA-L1 … EA-L5).
pub fn judge(runs: &[LiveRun]) -> Vec<PaperFinding> {
    let mean = |config: Config| run_of(runs, config).and_then(|r| r.summary.latency_ms_mean());
    let nodes = |config: Config| run_of(runs, config).map(|r| r.summary.distinct_nodes_mean);
    let reads = |config: Config| run_of(runs, config).map(|r| r.summary.reads_per_block);
    let mut findings = Vec::new();
    let failures: u64 = runs.iter().map(|r| r.client_failures + r.summary.failed).sum();
    let batches: u64 = runs.iter().map(|r| r.client_batches).sum();
    findings.push(finding(
        "EA-L1",
        "live: every batch read through the S3 batch surface is answered 200 with every object's bytes",
        "—",
        format!("{failures} failed of {batches} batches (every part compared)"),
        Some(failures == 0 && batches > 0),
    ));
    if let (Some(ec), Some(ecc), Some(eccm)) = (mean(Config::Ec), mean(Config::EcC), mean(Config::EcCM)) {
        findings.push(finding(
            "EA-L2",
            "live: mean batch latency EC+C+M < EC through the S3 batch surface",
            "−40 % (100 KB)",
            format!(
                "EC {ec:.1} ms, EC+C {ecc:.1} ms ({:+.1} %), EC+C+M {eccm:.1} ms ({:+.1} %)",
                pct(ecc, ec),
                pct(eccm, ec)
            ),
            Some(eccm < ec),
        ));
        findings.push(finding(
            "EA-L2b",
            "live: EC > EC+C > EC+C+M (the steps' sizes are reported: the mover's rests on its learning time)",
            "−15 %, −40 % against EC",
            format!("EC+C {:+.1} % against EC, EC+C+M {:+.1} % against EC+C", pct(ecc, ec), pct(eccm, ecc)),
            Some(ecc < ec && eccm < ecc),
        ));
    }
    if let (Some(lb), Some(cmlb)) = (mean(Config::EcLb), mean(Config::EcCMLb)) {
        findings.push(finding(
            "EA-L3",
            "live: mean batch latency EC+C+M+LB < EC+LB",
            "−40 % retrieval",
            format!("EC+LB {lb:.1} ms, EC+C+M+LB {cmlb:.1} ms ({:+.1} %)", pct(cmlb, lb)),
            Some(cmlb < lb),
        ));
    }
    if let (Some(ec), Some(lb), Some(ecc)) = (reads(Config::Ec), reads(Config::EcLb), reads(Config::EcC)) {
        let ratio = lb / ec;
        findings.push(finding(
            "EA-L4",
            "live: launched unit reads per block EC+LB / EC = (k + δ) / k = 1.50 ± 0.01; EC+C / EC ≤ 1.01",
            "+50 % chunk requests",
            format!("EC {ec:.3}, EC+LB {lb:.3} (ratio {ratio:.3}), EC+C {ecc:.3}"),
            Some((ratio - 1.5).abs() <= 0.01 && ecc / ec <= 1.01),
        ));
    }
    if let (Some(ec), Some(ecc), Some(eccm)) = (nodes(Config::Ec), nodes(Config::EcC), nodes(Config::EcCM)) {
        findings.push(finding(
            "EA-L5",
            "live: distinct nodes per batch EC+C < EC (the cost plan's mechanism); EC+C+M beside them",
            "Fig. 2",
            format!("EC {ec:.2}, EC+C {ecc:.2}, EC+C+M {eccm:.2}"),
            Some(ecc < ec),
        ));
    }
    let moves: u64 = runs.iter().map(|r| r.moves).sum();
    let most = runs.iter().map(|r| r.summary.moves_max_per_10_s).max().unwrap_or(0);
    let client_bytes: u64 = runs.iter().map(|r| r.summary.client_bytes_run).sum();
    let mover_bytes: u64 = runs.iter().map(|r| r.summary.mover_bytes).sum();
    findings.push(finding(
        "EA-L6",
        "live: the mover stays under its cap (1 move a second: at most 10 in any 10 s) and its bytes are a small part of the clients'",
        "< 1 chunk/s; < 0.1 % of traffic",
        format!(
            "{moves} moves while measured, at most {most} in 10 s; mover bytes {:.3} % of client bytes",
            100.0 * mover_bytes as f64 / client_bytes.max(1) as f64
        ),
        Some(most <= 10),
    ));
    findings
}

fn pct(value: f64, against: f64) -> f64 {
    (value / against - 1.0) * 100.0
}

fn markdown(runs: &[LiveRun], scale: &LiveScale) -> String {
    let mut text = format!(
        "{NODES} nodes ({SIM_NODES} in the simulator), {LIVE_CODE}, {} objects of {} KB, scans of up to {MAX_SCAN} (Zipf 1), \
         {CLIENTS} closed-loop clients; {} s warm-up and {} s measured per configuration, the mover learning {} s before EC+C+M.\n\n\
         | config | batches | mean ms (gateway) | p99 ms | mean ms (client) | nodes / batch | reads / block | λ % | plan-cache hits | moves | failures |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
        scale.blocks,
        BLOCK_BYTES / 1000,
        scale.warmup_s,
        scale.measure_s,
        scale.learn_s
    );
    for run in runs {
        let s = &run.summary;
        text += &format!(
            "| {} | {} | {} | {} | {:.1} | {:.2} | {:.2} | {:.1} | {} | {} | {} |\n",
            run.config,
            s.batches,
            s.latency.map_or("–".into(), |l| format!("{:.1}", l.mean_s * 1e3)),
            s.latency.map_or("–".into(), |l| format!("{:.1}", l.p99_s * 1e3)),
            run.client_mean_ms,
            s.distinct_nodes_mean,
            s.reads_per_block,
            s.imbalance_pct,
            s.hit_rate().map_or("–".into(), |h| format!("{:.0} %", h * 100.0)),
            run.moves,
            run.client_failures,
        );
    }
    text
}
