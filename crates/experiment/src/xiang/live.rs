//! `lowtail experiment xiang --live`: two latency classes on a loopback cluster of real processes,
//! the nodes serving them by reserved shares (the paper's model: each class a server at its share
//! of a node's rate), every answer checked.
//!
//! The cluster: 7 nodes, (7,4) (`rs-4-3`, the paper's code), each node's emulated disk at 20 MB/s
//! and 1 ms per task; a gateway with two classes, shares 0.7 and 0.3 (`[classes] scheduling =
//! "reserved"`), pushed to the nodes by membership. Two buckets of the same objects (4 units of
//! 256 KiB each): `gold` in class 1 (the key's own), `silver` set to class 2 (`lowtail admin
//! bucket class`). Then both classes read at once, each by closed-loop readers GETting whole
//! objects until every reader has done its share: contention at every node.
//!
//! Judged from records: the nodes' per-class task counters (mean service time per class, from
//! `Stats`) against the inverse ratio of the shares, with the unscaled per-task overhead counted;
//! the GETs' latencies per class (class 1's median and p99 below class 2's); and no starvation
//! (every class-2 GET answered).
//!
//! Owns the choice of runs and the judging. Must not: compute statistics except through `report`.

use crate::fastcloud::live::{LiveOptions, one_gateway_fleet_with};
use crate::fastcloud::{PaperFinding, finding};
use crate::live::blocking;
use crate::parallel::Progress;
use anyhow::{Context, ensure};
use bench::s3_client::measurement_client;
use gateway::classes::{ClassSpec, ClassesConfig, Scheduling};
use load::objects::{object_bytes, object_key};
use load::s3::{ensure_bucket, prepare};
use model::ObjectId;
use node::ServiceModel;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

const CODE: &str = "rs-4-3";
const K: u64 = 4;
const NODES: usize = 7;
/// Each unit's bytes.
const UNIT_BYTES: u64 = 256 << 10;
/// The nodes' emulated disk.
const DISK_BYTES_PER_S: f64 = 20e6;
/// Every emulated task's fixed cost (not scaled by a share).
const OVERHEAD_US: u64 = 1_000;
/// The classes' shares of a node (class 1, class 2).
pub const SHARES: [f64; 2] = [0.7, 0.3];
/// The buckets of the two classes.
const BUCKETS: [&str; 2] = ["gold", "silver"];
/// Readers per class.
const READERS: usize = 2;

fn gets_per_class(options: &LiveOptions) -> usize {
    if options.quick { 24 } else { 120 }
}

fn objects(options: &LiveOptions) -> u64 {
    if options.quick { 6 } else { 16 }
}

/// Steps the progress bar counts.
pub fn step_count() -> usize {
    3
}

/// One class's GETs and its tasks on the nodes.
#[derive(Clone, Debug, Serialize)]
pub struct LiveClass {
    /// 1-based, as users see it.
    pub class: u8,
    /// Its share of each node.
    pub share: f64,
    /// GETs answered with the object's bytes.
    pub gets: usize,
    /// GETs that failed or answered wrong bytes.
    pub failed: usize,
    /// GET latency, median and p99, seconds.
    pub latency_s_p50: f64,
    /// See `latency_s_p50`.
    pub latency_s_p99: f64,
    /// The nodes' tasks of this class while it ran, and their mean service time (start to
    /// finish on the node), seconds.
    pub tasks: u64,
    /// See `tasks`.
    pub service_s_mean: f64,
    /// What the emulation makes a task of this class take: overhead + unit / (share × rate).
    pub service_s_expected: f64,
}

/// What the live run produced.
#[derive(Debug)]
pub struct LiveOutcome {
    /// Findings (findings-live.json).
    pub findings: Vec<PaperFinding>,
    /// Per class.
    pub classes: Vec<LiveClass>,
    /// live.md.
    pub markdown: String,
}

/// Runs the live experiment and writes live.json, live.md and findings-live.json.
pub fn run(options: &LiveOptions, out_dir: &Path, progress: &(dyn Fn(Progress) + Sync)) -> anyhow::Result<LiveOutcome> {
    let classes = crate::fastcloud::live::on_processes("lowtail-xiang-", step_count(), progress, async |dir, step| {
        measure(options, dir, step).await
    })?;
    let findings = judge(&classes);
    let mut markdown = String::from(
        "| class | share | GETs | failed | p50 ms | p99 ms | node tasks | mean service ms | expected ms |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for c in &classes {
        markdown += &format!(
            "| {} | {:.1} | {} | {} | {:.1} | {:.1} | {} | {:.2} | {:.2} |\n",
            c.class,
            c.share,
            c.gets,
            c.failed,
            c.latency_s_p50 * 1e3,
            c.latency_s_p99 * 1e3,
            c.tasks,
            c.service_s_mean * 1e3,
            c.service_s_expected * 1e3
        );
    }
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let json = serde_json::json!({ "classes": classes, "code": CODE, "unit_bytes": UNIT_BYTES });
    std::fs::write(out_dir.join("live.json"), serde_json::to_string_pretty(&json)? + "\n")?;
    std::fs::write(out_dir.join("live.md"), &markdown)?;
    std::fs::write(out_dir.join("findings-live.json"), serde_json::to_string_pretty(&findings)? + "\n")?;
    Ok(LiveOutcome { findings, classes, markdown })
}

/// The gateway's classes: two, reserved shares.
fn classes_config() -> ClassesConfig {
    let spec = |name: &str, weight: f64, share: f64| ClassSpec { name: name.into(), weight, share: Some(share) };
    ClassesConfig {
        classes: vec![spec("gold", 1.0, SHARES[0]), spec("silver", 0.4, SHARES[1])],
        default_class: 1,
        scheduling: Scheduling::Reserved,
    }
}

async fn measure(options: &LiveOptions, dir: &Path, step: &dyn Fn(String)) -> anyhow::Result<Vec<LiveClass>> {
    let mut data = gateway::data::DataConfig { code: CODE.to_owned(), unit_bytes: UNIT_BYTES, ..Default::default() };
    data.packed.max_object_bytes = 0;
    data.membership.probe_interval_ms = 200;
    data.placement_seed = Some(options.seed);
    let (mut fleet, endpoint, admin) =
        one_gateway_fleet_with(options, dir, (NODES, 1), data, Default::default(), classes_config()).await?;
    let model = ServiceModel {
        enabled: true,
        replace_real_io: true,
        overhead_us: OVERHEAD_US,
        rate_bytes_per_s: DISK_BYTES_PER_S,
        seed: options.seed,
        ..ServiceModel::default()
    };
    for id in 0..NODES as u32 {
        fleet.set_service_model(id, &model).await?;
    }
    step("loading objects".into());
    let s3 = measurement_client(&endpoint, "lowtail-xiang", Duration::from_secs(120));
    let sizes: BTreeMap<ObjectId, u64> = (0..objects(options)).map(|i| (ObjectId(i), UNIT_BYTES * K)).collect();
    for bucket in BUCKETS {
        ensure_bucket(&s3, bucket).await?;
        prepare(std::slice::from_ref(&s3), bucket, options.seed, &sizes, &|| {}).await.context("loading objects")?;
    }
    let class_admin = admin.clone();
    blocking(move || class_admin.set_bucket_class(BUCKETS[1], Some(2))).await?;
    step("reading in both classes".into());
    let before = class_stats(&fleet).await?;
    let latencies = read_both(options, &s3, &sizes).await?;
    let after = class_stats(&fleet).await?;
    fleet.check_running()?;
    step("stopping".into());
    fleet.shutdown().await;
    Ok((0..2)
        .map(|class| {
            let (gets, failed) = &latencies[class];
            let sample = report::Sample::new(gets.clone());
            let tasks = after[class].0 - before[class].0;
            let service_ns = after[class].1 - before[class].1;
            LiveClass {
                class: class as u8 + 1,
                share: SHARES[class],
                gets: sample.len(),
                failed: *failed,
                latency_s_p50: sample.quantile_ns(0.5).unwrap_or(0) as f64 / 1e9,
                latency_s_p99: sample.quantile_ns(0.99).unwrap_or(0) as f64 / 1e9,
                tasks,
                service_s_mean: if tasks == 0 { 0.0 } else { service_ns as f64 / tasks as f64 / 1e9 },
                service_s_expected: OVERHEAD_US as f64 / 1e6 + UNIT_BYTES as f64 / (SHARES[class] * DISK_BYTES_PER_S),
            }
        })
        .collect())
}

/// Per class (0-based) the nodes' completed tasks and their service time, summed over the nodes.
async fn class_stats(fleet: &launcher::Fleet) -> anyhow::Result<[(u64, u64); 2]> {
    let mut sums = [(0u64, 0u64); 2];
    for process in fleet.nodes() {
        let address = process.rpc_addr().context("a node without an address")?;
        let client = node::NodeClient::connect(&address.to_string(), fleet.cluster_secret()).await?;
        for class in client.stats().await?.classes {
            if let Some(sum) = sums.get_mut(class.class as usize) {
                sum.0 += class.tasks_completed;
                sum.1 += class.service_total_ns;
            }
        }
    }
    Ok(sums)
}

/// Both classes' readers at once; per class the GETs' latencies (ns) and the failures.
async fn read_both(
    options: &LiveOptions,
    s3: &aws_sdk_s3::Client,
    sizes: &BTreeMap<ObjectId, u64>,
) -> anyhow::Result<[(Vec<u64>, usize); 2]> {
    let per_reader = gets_per_class(options) / READERS;
    let mut readers = tokio::task::JoinSet::new();
    for reader in 0..2 * READERS {
        let (s3, sizes, seed) = (s3.clone(), sizes.clone(), options.seed);
        readers.spawn(async move {
            let class = reader % 2;
            let mut latencies = Vec::with_capacity(per_reader);
            let mut failed = 0;
            for get in 0..per_reader {
                let object = ObjectId(((reader + get * 2 * READERS) as u64) % sizes.len() as u64);
                match timed_get(&s3, BUCKETS[class], seed, object, sizes[&object]).await {
                    Some(latency_ns) => latencies.push(latency_ns),
                    None => failed += 1,
                }
            }
            (class, latencies, failed)
        });
    }
    let mut out: [(Vec<u64>, usize); 2] = Default::default();
    while let Some(done) = readers.join_next().await {
        let (class, latencies, failed) = done.context("a reader panicked")?;
        out[class].0.extend(latencies);
        out[class].1 += failed;
    }
    ensure!(out.iter().all(|(l, f)| !l.is_empty() || *f > 0), "no GET ran");
    Ok(out)
}

/// One whole-object GET: its latency, or `None` when it failed or answered wrong bytes.
async fn timed_get(s3: &aws_sdk_s3::Client, bucket: &str, seed: u64, object: ObjectId, size: u64) -> Option<u64> {
    let sent = Instant::now();
    let answer = s3.get_object().bucket(bucket).key(object_key(seed, object)).send().await;
    let body = match answer {
        Ok(output) => output.body.collect().await.ok().map(|b| b.into_bytes()),
        Err(_) => None,
    };
    let latency_ns = sent.elapsed().as_nanos() as u64;
    body.is_some_and(|b| b[..] == object_bytes(seed, object, size)[..]).then_some(latency_ns)
}

/// The live findings (ids XL-…).
pub fn judge(classes: &[LiveClass]) -> Vec<PaperFinding> {
    let mut findings = Vec::new();
    let [gold, silver] = classes else { return findings };
    let measured = silver.service_s_mean / gold.service_s_mean;
    let shares = gold.share / silver.share;
    let expected = silver.service_s_expected / gold.service_s_expected;
    findings.push(finding(
        "XL-1",
        "live, reserved shares 0.7 / 0.3 at the nodes: the mean chunk service time per class is in the inverse \
         ratio of the shares within 10 % (with the per-task overhead, which no share scales, counted)",
        "service time ∝ 1 / reserved bandwidth (Fig. 3: 1.364 for a bandwidth ratio of 1.318)",
        format!(
            "class 2 / class 1 mean service {measured:.3} ({:.1} against {:.1} ms over {} and {} tasks); shares' \
             inverse ratio {shares:.3}, with the overhead {expected:.3}",
            silver.service_s_mean * 1e3,
            gold.service_s_mean * 1e3,
            silver.tasks,
            gold.tasks
        ),
        Some(gold.tasks > 0 && silver.tasks > 0 && (measured / expected - 1.0).abs() <= 0.10),
    ));
    findings.push(finding(
        "XL-2",
        "live, both classes reading at once: class 1's median and p99 GET latency below class 2's",
        "class 1 about 30 % faster than class 2 (Figs. 6, 7)",
        format!(
            "p50 {:.1} against {:.1} ms, p99 {:.1} against {:.1} ms",
            gold.latency_s_p50 * 1e3,
            silver.latency_s_p50 * 1e3,
            gold.latency_s_p99 * 1e3,
            silver.latency_s_p99 * 1e3
        ),
        Some(
            gold.gets > 0
                && silver.gets > 0
                && gold.latency_s_p50 < silver.latency_s_p50
                && gold.latency_s_p99 < silver.latency_s_p99,
        ),
    ));
    findings.push(finding(
        "XL-3",
        "live: class 2 is not starved — every one of its GETs answered the object's bytes while class 1 read",
        "–",
        format!(
            "class 2: {} answered, {} failed; class 1: {} answered, {} failed",
            silver.gets, silver.failed, gold.gets, gold.failed
        ),
        Some(silver.gets > 0 && silver.failed == 0 && gold.failed == 0),
    ));
    findings
}
