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
//! Then the `jlwo` phase: a second cluster, the same but with the gateway's `jlwo` policy, which
//! solves JLWO from the reads it sees every second and publishes the class shares it solves; a
//! first round of reads gives it demand, rounds repeat (at most [`JLWO_SETTLE_ROUNDS`]) until every
//! node runs its rack's solved shares (read back from the node), then a measured round. Judged:
//! the nodes run the solved shares, class 1 faster than class 2 under them, no starvation.
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
    5
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

/// The `jlwo` phase: what JLWO solved and the nodes ran, and the classes under it.
#[derive(Clone, Debug, Serialize)]
pub struct JlwoLive {
    /// The shares the gateway published, by rack (class 1, class 2).
    pub solved_shares: BTreeMap<String, Vec<f64>>,
    /// Storage nodes.
    pub nodes: usize,
    /// Nodes in a rack with solved shares.
    pub nodes_in_solved_racks: usize,
    /// Nodes of a solved rack running its solved shares when the measured reads began.
    pub nodes_running_solved: usize,
    /// Per class under the solved shares (`share`: the mean over the solved racks).
    pub classes: Vec<LiveClass>,
}

/// What the two phases measured.
struct Measured {
    reserved: Vec<LiveClass>,
    jlwo: JlwoLive,
}

/// What the live run produced.
#[derive(Debug)]
pub struct LiveOutcome {
    /// Findings (findings-live.json).
    pub findings: Vec<PaperFinding>,
    /// Per class, under the configured reserved shares.
    pub classes: Vec<LiveClass>,
    /// The `jlwo` phase.
    pub jlwo: JlwoLive,
    /// live.md.
    pub markdown: String,
}

/// Runs the live experiment and writes live.json, live.md and findings-live.json.
pub fn run(options: &LiveOptions, out_dir: &Path, progress: &(dyn Fn(Progress) + Sync)) -> anyhow::Result<LiveOutcome> {
    let measured =
        crate::fastcloud::live::on_processes("lowtail-xiang-", step_count(), progress, async |dir, step| {
            measure(options, dir, step).await
        })?;
    let Measured { reserved: classes, jlwo } = measured;
    let mut findings = judge(&classes);
    findings.extend(judge_jlwo(&jlwo));
    let markdown = format!(
        "Configured reserved shares:\n\n{}\nThe `jlwo` policy's solved shares ({} of {} nodes running them):\n\n{}\n{}",
        class_table(&classes),
        jlwo.nodes_running_solved,
        jlwo.nodes,
        shares_table(&jlwo.solved_shares),
        class_table(&jlwo.classes)
    );
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let json = serde_json::json!({ "classes": classes, "jlwo": jlwo, "code": CODE, "unit_bytes": UNIT_BYTES });
    std::fs::write(out_dir.join("live.json"), serde_json::to_string_pretty(&json)? + "\n")?;
    std::fs::write(out_dir.join("live.md"), &markdown)?;
    std::fs::write(out_dir.join("findings-live.json"), serde_json::to_string_pretty(&findings)? + "\n")?;
    Ok(LiveOutcome { findings, classes, jlwo, markdown })
}

/// The classes as a Markdown table.
fn class_table(classes: &[LiveClass]) -> String {
    let mut markdown = String::from(
        "| class | share | GETs | failed | p50 ms | p99 ms | node tasks | mean service ms | expected ms |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for c in classes {
        markdown += &format!(
            "| {} | {:.3} | {} | {} | {:.1} | {:.1} | {} | {:.2} | {:.2} |\n",
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
    markdown
}

/// The solved shares by rack as a Markdown table.
fn shares_table(shares: &BTreeMap<String, Vec<f64>>) -> String {
    let mut markdown = String::from("| rack | class 1 | class 2 |\n|---|---|---|\n");
    for (rack, row) in shares {
        let cell = |class: usize| row.get(class).map_or("–".to_string(), |share| format!("{share:.3}"));
        markdown += &format!("| {rack} | {} | {} |\n", cell(0), cell(1));
    }
    markdown
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

/// A started cluster with both buckets loaded: `gold` in class 1, `silver` in class 2.
struct Loaded {
    fleet: launcher::Fleet,
    s3: aws_sdk_s3::Client,
    admin: launcher::gateway_admin::GatewayAdmin,
    sizes: BTreeMap<ObjectId, u64>,
}

/// Starts the cluster in `dir` with `controller` as the gateway's `[controller]`, and loads it.
async fn start_loaded(
    options: &LiveOptions,
    dir: &Path,
    controller: launcher::fleet::ControllerTable,
    step: &dyn Fn(String),
) -> anyhow::Result<Loaded> {
    let mut data = gateway::data::DataConfig { code: CODE.to_owned(), unit_bytes: UNIT_BYTES, ..Default::default() };
    data.packed.max_object_bytes = 0;
    data.membership.probe_interval_ms = 200;
    data.placement_seed = Some(options.seed);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (fleet, endpoint, admin) =
        one_gateway_fleet_with(options, dir, (NODES, 1), data, controller, classes_config()).await?;
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
    Ok(Loaded { fleet, s3, admin, sizes })
}

/// Both classes reading at once, with the nodes' per-class counters around it: per class the
/// GETs' latencies and failures, and the tasks and service time the nodes completed.
async fn read_measured(
    options: &LiveOptions,
    loaded: &Loaded,
) -> anyhow::Result<([(Vec<u64>, usize); 2], [(u64, u64); 2])> {
    let before = class_stats(&loaded.fleet).await?;
    let latencies = read_both(options, &loaded.s3, &loaded.sizes).await?;
    let after = class_stats(&loaded.fleet).await?;
    let done = [0, 1].map(|class| (after[class].0 - before[class].0, after[class].1 - before[class].1));
    Ok((latencies, done))
}

/// Per class, what the GETs and the nodes' tasks came to, under `shares` (class 1, class 2).
fn live_classes(latencies: &[(Vec<u64>, usize); 2], done: &[(u64, u64); 2], shares: [f64; 2]) -> Vec<LiveClass> {
    (0..2)
        .map(|class| {
            let (gets, failed) = &latencies[class];
            let sample = report::Sample::new(gets.clone());
            let (tasks, service_ns) = done[class];
            LiveClass {
                class: class as u8 + 1,
                share: shares[class],
                gets: sample.len(),
                failed: *failed,
                latency_s_p50: sample.quantile_ns(0.5).unwrap_or(0) as f64 / 1e9,
                latency_s_p99: sample.quantile_ns(0.99).unwrap_or(0) as f64 / 1e9,
                tasks,
                service_s_mean: if tasks == 0 { 0.0 } else { service_ns as f64 / tasks as f64 / 1e9 },
                service_s_expected: OVERHEAD_US as f64 / 1e6 + UNIT_BYTES as f64 / (shares[class] * DISK_BYTES_PER_S),
            }
        })
        .collect()
}

async fn measure(options: &LiveOptions, dir: &Path, step: &dyn Fn(String)) -> anyhow::Result<Measured> {
    let mut loaded = start_loaded(options, &dir.join("reserved"), Default::default(), step).await?;
    step("reading in both classes".into());
    let (latencies, done) = read_measured(options, &loaded).await?;
    loaded.fleet.check_running()?;
    loaded.fleet.shutdown().await;
    let reserved = live_classes(&latencies, &done, SHARES);
    let jlwo = measure_jlwo(options, &dir.join("jlwo"), step).await?;
    step("stopping".into());
    Ok(Measured { reserved, jlwo })
}

/// The `jlwo` phase: the same cluster with the gateway's `jlwo` policy, which solves JLWO every
/// refresh period from the reads it sees and installs the shares it solves on the nodes (in
/// place of the configured 0.7 / 0.3). A first round of reads gives it demand; once the nodes run
/// the solved shares, a second round is measured.
async fn measure_jlwo(options: &LiveOptions, dir: &Path, step: &dyn Fn(String)) -> anyhow::Result<JlwoLive> {
    let controller = jlwo_controller()?;
    let mut loaded = start_loaded(options, dir, controller, step).await?;
    step("jlwo: reading in both classes until the nodes run the solved shares".into());
    let mut solved = BTreeMap::new();
    let mut running = Vec::new();
    for _round in 0..JLWO_SETTLE_ROUNDS {
        read_both(options, &loaded.s3, &loaded.sizes).await?;
        // Membership tells the nodes within a probe interval (200 ms) of a publication.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let admin = loaded.admin.clone();
        solved = blocking(move || admin.classes()).await?.solved_shares;
        running = node_schedulings(&loaded.fleet).await?;
        if !solved.is_empty() && running.iter().all(|(rack, scheduling)| runs_solved(&solved, rack, scheduling)) {
            break;
        }
    }
    let (latencies, done) = read_measured(options, &loaded).await?;
    loaded.fleet.check_running()?;
    loaded.fleet.shutdown().await;
    let nodes_running_solved =
        running.iter().filter(|(rack, s)| solved.contains_key(rack) && runs_solved(&solved, rack, s)).count();
    let mean_share = |class: usize| {
        let total: f64 = solved.values().map(|shares| shares.get(class).copied().unwrap_or(0.0)).sum();
        if solved.is_empty() { SHARES[class] } else { total / solved.len() as f64 }
    };
    Ok(JlwoLive {
        nodes: running.len(),
        nodes_in_solved_racks: running.iter().filter(|(rack, _)| solved.contains_key(rack)).count(),
        nodes_running_solved,
        classes: live_classes(&latencies, &done, [mean_share(0), mean_share(1)]),
        solved_shares: solved,
    })
}

/// Settle rounds of reads at most before the `jlwo` phase measures (each is a reading round; the
/// policy solves every [`JLWO_REFRESH_NS`] and membership pushes every 200 ms).
const JLWO_SETTLE_ROUNDS: usize = 8;

/// How often the `jlwo` phase's gateway solves JLWO.
const JLWO_REFRESH_NS: u64 = 1_000_000_000;

/// The gateway's `[controller]` for the `jlwo` phase: JLWO's network mapped onto the emulated
/// nodes (one per rack): a queue reaches at most one node's rate (C), the aggregation carries
/// every node's (B = 7 nodes' rates) and a ToR twice that (b = 2B: every read enters the
/// frontend's rack, whose own node keeps room under corrected eq. 3; the gateway's loopback link is
/// not shaped); one unit's service time at B; a refresh every second.
fn jlwo_controller() -> anyhow::Result<launcher::fleet::ControllerTable> {
    let node_bps = DISK_BYTES_PER_S * 8.0;
    let aggregation_bps = node_bps * NODES as f64;
    let unit_s = UNIT_BYTES as f64 * 8.0 / aggregation_bps;
    let text = format!(
        "policy = \"jlwo\"\n[settings.jlwo]\nrefresh_period_ns = {JLWO_REFRESH_NS}\n\
         aggregation_bandwidth_bps = {aggregation_bps}\ntor_bandwidth_bps = {}\n\
         queue_bandwidth_max_bps = {node_bps}\n\
         unit_service = {{ mean_s = {unit_s}, second_moment_s2 = {}, third_moment_s3 = {} }}\n",
        2.0 * aggregation_bps,
        unit_s * unit_s,
        unit_s * unit_s * unit_s
    );
    toml::from_str(&text).context("the jlwo phase's controller table")
}

/// Each node's rack and its stats.
async fn node_stats(fleet: &launcher::Fleet) -> anyhow::Result<Vec<(String, node::proto::StatsResponse)>> {
    let mut out = Vec::with_capacity(fleet.nodes().len());
    for process in fleet.nodes() {
        let address = process.rpc_addr().context("a node without an address")?;
        let client = node::NodeClient::connect(&address.to_string(), fleet.cluster_secret()).await?;
        out.push((process.slot.rack.clone(), client.stats().await?));
    }
    Ok(out)
}

/// Each node's rack and the class scheduling it runs, as its stats say.
async fn node_schedulings(fleet: &launcher::Fleet) -> anyhow::Result<Vec<(String, node::ClassScheduling)>> {
    node_stats(fleet)
        .await?
        .into_iter()
        .map(|(rack, stats)| {
            let scheduling = stats.class_scheduling.context("a node's stats without its scheduling")?;
            let scheduling = node::ClassScheduling::try_from(scheduling).map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok((rack, scheduling))
        })
        .collect()
}

/// Whether a node of `rack` runs what the solved shares say it should (its rack's, else the
/// configured ones).
fn runs_solved(solved: &BTreeMap<String, Vec<f64>>, rack: &str, scheduling: &node::ClassScheduling) -> bool {
    let shares = solved.get(rack).cloned().unwrap_or_else(|| SHARES.to_vec());
    *scheduling == node::ClassScheduling::Reserved { shares }
}

/// Per class (0-based) the nodes' completed tasks and their service time, summed over the nodes.
async fn class_stats(fleet: &launcher::Fleet) -> anyhow::Result<[(u64, u64); 2]> {
    let mut sums = [(0u64, 0u64); 2];
    for (_, stats) in node_stats(fleet).await? {
        for class in stats.classes {
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

/// The `jlwo` phase's findings (XL-4 to XL-6).
pub fn judge_jlwo(jlwo: &JlwoLive) -> Vec<PaperFinding> {
    let mut findings = Vec::new();
    let shares: Vec<String> = jlwo
        .solved_shares
        .iter()
        .map(|(rack, row)| format!("{rack} {}", row.iter().map(|s| format!("{s:.3}")).collect::<Vec<_>>().join("/")))
        .collect();
    findings.push(finding(
        "XL-4",
        "live, the `jlwo` policy: JLWO solved from the gateway's reads every second, and every node of a rack it \
         solved runs that rack's shares (read back from the node) in place of the configured 0.7 / 0.3",
        "JLWO's bandwidth weights W, w installed per (rack, class) (§III)",
        format!(
            "{} of {} nodes in solved racks run their solved shares ({} nodes); shares {}",
            jlwo.nodes_running_solved,
            jlwo.nodes_in_solved_racks,
            jlwo.nodes,
            if shares.is_empty() { "none".into() } else { shares.join(", ") }
        ),
        Some(jlwo.nodes_in_solved_racks > 0 && jlwo.nodes_running_solved == jlwo.nodes_in_solved_racks),
    ));
    if let [gold, silver] = &jlwo.classes[..] {
        let faster_p50 = 1.0 - gold.latency_s_p50 / silver.latency_s_p50;
        findings.push(finding(
            "XL-5",
            "live, under the shares JLWO solved (class 1's the larger): class 1's chunks are served faster than \
             class 2's at the nodes",
            "class 1 about 30 % faster than class 2 (Figs. 6, 7)",
            format!(
                "mean service {:.2} against {:.2} ms, ratio {:.3} (the mean solved shares {:.3} / {:.3} with the \
                 overhead: {:.3}); GET p50 {:.1} against {:.1} ms (class 1 {:.1} % faster: closed-loop readers \
                 take a faster class's speed as throughput)",
                gold.service_s_mean * 1e3,
                silver.service_s_mean * 1e3,
                silver.service_s_mean / gold.service_s_mean,
                gold.share,
                silver.share,
                silver.service_s_expected / gold.service_s_expected,
                gold.latency_s_p50 * 1e3,
                silver.latency_s_p50 * 1e3,
                faster_p50 * 100.0,
            ),
            Some(
                gold.tasks > 0
                    && silver.tasks > 0
                    && gold.share > silver.share
                    && gold.service_s_mean < silver.service_s_mean,
            ),
        ));
        findings.push(finding(
            "XL-6",
            "live, under the solved shares: no class starves — every GET of both classes answered",
            "–",
            format!(
                "class 1: {} answered, {} failed; class 2: {} answered, {} failed",
                gold.gets, gold.failed, silver.gets, silver.failed
            ),
            Some(gold.gets > 0 && silver.gets > 0 && gold.failed == 0 && silver.failed == 0),
        ));
    }
    findings
}
