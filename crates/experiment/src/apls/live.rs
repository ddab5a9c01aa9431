//! `lowtail experiment apls --live`: degraded reads on a loopback cluster of real processes, the
//! gateway decode against the segmented read (APLS's lists without node changes), and the
//! simulator's prediction for the same parameters beside them.
//!
//! The setting: 9 emulated nodes (the service model: 20 MB/s, 2 ms per task, standing for
//! bandwidth-bound sources), RS(6,3), units of 2 MiB (1 MiB with `--quick`), 24 one-stripe objects
//! (12), about 2/3 of which have a data unit on node 0;
//! node 0 stopped and marked Down by membership; then each object's data unit that was on node 0
//! is read by a ranged GET, one at a time, the reconstruction switched between the two kinds
//! before every GET (`PUT /admin/reconstruct`), in alternating order, every answer checked. The
//! prediction: the isolated simulator with each source's disk at the nodes' rate and overhead.
//!
//! Owns the choice of runs and the judging. Must not: compute statistics except through `report`.

use super::judge_live;
use crate::fastcloud::PaperFinding;
use crate::fastcloud::live::{LiveOptions, one_gateway_fleet};
use crate::live::blocking;
use crate::parallel::Progress;
use anyhow::{Context, ensure};
use bench::s3_client::measurement_client;
use execution::reconstruct::{Dataflow, Method};
use load::objects::{object_bytes, object_key};
use load::s3::{ensure_bucket, prepare};
use meta::{Layout, NodeId, NodeState};
use model::ObjectId;
use node::ServiceModel;
use policy::reconstruct::{ReconstructKind, ReconstructSettings};
use serde::Serialize;
use sim::network::SitePorts;
use sim::reconstruct::{DiskModel, ReconstructSetup, run_isolated};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

const CODE: &str = "rs-6-3";
const K: u16 = 6;
const NODES: usize = 9;
const RATE_BYTES_PER_S: f64 = 20e6;
const OVERHEAD_US: u64 = 2_000;
const BUCKET: &str = "apls";
/// The node that fails.
const DOWN: u32 = 0;

fn unit_bytes(options: &LiveOptions) -> u64 {
    if options.quick { 1 << 20 } else { 2 << 20 }
}

fn objects(options: &LiveOptions) -> u64 {
    if options.quick { 12 } else { 24 }
}

fn rounds(options: &LiveOptions) -> usize {
    if options.quick { 2 } else { 3 }
}

/// One kind's degraded GETs.
#[derive(Clone, Debug, Serialize)]
pub struct LiveKind {
    /// `gateway` or `segmented`.
    pub kind: String,
    /// GETs served and checked.
    pub gets: usize,
    /// GETs that failed or answered wrong bytes.
    pub failed: usize,
    /// Median latency at the client, seconds.
    pub median_s: f64,
    /// The simulator's latency for the same read, seconds.
    pub predicted_s: f64,
}

/// The live run's outcome.
#[derive(Debug)]
pub struct LiveOutcome {
    /// findings-live.json.
    pub findings: Vec<PaperFinding>,
    /// The two kinds.
    pub kinds: Vec<LiveKind>,
    /// live.md.
    pub markdown: String,
}

/// Steps the progress bar counts: start and load, the failure, the GETs.
pub fn step_count() -> usize {
    3
}

/// The simulator's latency of one degraded read of a `unit` range under `kind`.
pub fn predicted_s(kind: ReconstructKind, unit: u64, q: u16) -> f64 {
    // The gateway's own segmentation, or its decode of the whole range from k sources.
    let flow = match kind {
        ReconstructKind::Segmented => Dataflow::segmented(K, q, unit),
        _ => Dataflow::build(Method::GatewayDecode, K, unit, u32::try_from(unit).expect("a unit under 4 GiB")),
    }
    .expect("a valid dataflow");
    let setup = ReconstructSetup {
        // Loopback links are not the bound: the emulated disks are.
        nodes: vec![SitePorts::symmetric(f64::INFINITY); usize::from(q)],
        gateway: SitePorts::symmetric(f64::INFINITY),
        hop_latency_ns: 0,
        per_packet_ns: 0,
        receive_per_packet_ns: 0,
        disk: DiskModel { overhead_ns: OVERHEAD_US * 1_000, rate_bytes_per_s: RATE_BYTES_PER_S, whole_range: false },
    };
    run_isolated(&setup, &flow).latency_ns as f64 / 1e9
}

/// Runs the live experiment and writes live.json, live.md and findings-live.json.
pub fn run(options: &LiveOptions, out_dir: &Path, progress: &(dyn Fn(Progress) + Sync)) -> anyhow::Result<LiveOutcome> {
    let kinds = crate::fastcloud::live::on_processes("lowtail-apls-", step_count(), progress, async |dir, step| {
        measure(options, dir, step).await
    })?;
    let findings = judge_live(&kinds);
    let mut markdown =
        String::from("| reconstruction | GETs | failed | median ms | simulator ms |\n|---|---|---|---|---|\n");
    for kind in &kinds {
        markdown += &format!(
            "| {} | {} | {} | {:.1} | {:.1} |\n",
            kind.kind,
            kind.gets,
            kind.failed,
            kind.median_s * 1e3,
            kind.predicted_s * 1e3
        );
    }
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let json = serde_json::json!({ "kinds": kinds, "unit_bytes": unit_bytes(options), "code": CODE });
    std::fs::write(out_dir.join("live.json"), serde_json::to_string_pretty(&json)? + "\n")?;
    std::fs::write(out_dir.join("live.md"), &markdown)?;
    std::fs::write(out_dir.join("findings-live.json"), serde_json::to_string_pretty(&findings)? + "\n")?;
    Ok(LiveOutcome { findings, kinds, markdown })
}

/// A lost unit's range: its object, the unit's byte range in it, and the expected bytes.
struct LostRange {
    key: String,
    range: (u64, u64),
    bytes: Vec<u8>,
}

async fn measure(options: &LiveOptions, dir: &Path, step: &dyn Fn(String)) -> anyhow::Result<Vec<LiveKind>> {
    let unit = unit_bytes(options);
    let mut data = gateway::data::DataConfig { code: CODE.to_owned(), unit_bytes: unit, ..Default::default() };
    data.packed.max_object_bytes = 0;
    data.membership.probe_interval_ms = 200;
    // Which objects lose a data unit with node 0 depends on placement: seeded (the parallel loads
    // still interleave its draws).
    data.placement_seed = Some(options.seed);
    let (mut fleet, endpoint, admin) =
        one_gateway_fleet(options, dir, (NODES, 1), data, launcher::fleet::ControllerTable::new()).await?;
    let s3 = measurement_client(&endpoint, "lowtail-apls", Duration::from_secs(120));
    ensure_bucket(&s3, BUCKET).await?;
    let object_size = unit * u64::from(K);
    let sizes: BTreeMap<ObjectId, u64> = (0..objects(options)).map(|i| (ObjectId(i), object_size)).collect();
    prepare(std::slice::from_ref(&s3), BUCKET, options.seed, &sizes, &|| {}).await.context("loading objects")?;
    let meta = fleet.meta().await?;
    let mut lost = Vec::new();
    for &object in sizes.keys() {
        let key = object_key(options.seed, object);
        let Layout::Striped { segments } = meta.get_object(BUCKET, &key).await?.layout else {
            anyhow::bail!("object {key} is not striped");
        };
        let stripe = meta.get_stripe(segments[0].stripe).await?;
        if let Some(index) = stripe.placement[..usize::from(K)].iter().position(|&n| n == NodeId(DOWN)) {
            let range = (index as u64 * unit, unit);
            let all = object_bytes(options.seed, object, object_size);
            lost.push(LostRange { key, range, bytes: all[range.0 as usize..(range.0 + unit) as usize].to_vec() });
        }
    }
    ensure!(!lost.is_empty(), "no object has a data unit on node {DOWN}");
    for id in 0..NODES as u32 {
        let model = ServiceModel {
            enabled: true,
            replace_real_io: true,
            overhead_us: OVERHEAD_US,
            rate_bytes_per_s: RATE_BYTES_PER_S,
            seed: options.seed.wrapping_mul(1000) + u64::from(id),
            ..ServiceModel::default()
        };
        fleet.set_service_model(id, &model).await?;
    }
    step("loaded".into());
    fleet.stop_node(DOWN).await?;
    wait_down(&*meta, NodeId(DOWN)).await?;
    step(format!("node {DOWN} down"));
    let mut latencies: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut failed: BTreeMap<&str, usize> = BTreeMap::new();
    let kinds = [("gateway", ReconstructKind::Gateway), ("segmented", ReconstructKind::Segmented)];
    for round in 0..rounds(options) {
        for (index, range) in lost.iter().enumerate() {
            let order = if (round + index) % 2 == 0 { [kinds[0], kinds[1]] } else { [kinds[1], kinds[0]] };
            for (name, kind) in order {
                let switch = admin.clone();
                let settings = ReconstructSettings { kind, ..Default::default() };
                blocking(move || switch.set_reconstruct(&settings)).await?;
                let sent = Instant::now();
                let answer = s3
                    .get_object()
                    .bucket(BUCKET)
                    .key(&range.key)
                    .range(format!("bytes={}-{}", range.range.0, range.range.0 + range.range.1 - 1))
                    .send()
                    .await;
                let body = match answer {
                    Ok(output) => output.body.collect().await.ok().map(|b| b.into_bytes()),
                    Err(_) => None,
                };
                let latency_ns = sent.elapsed().as_nanos() as u64;
                if body.is_some_and(|b| b[..] == range.bytes[..]) {
                    latencies.entry(name).or_default().push(latency_ns);
                } else {
                    *failed.entry(name).or_default() += 1;
                }
            }
        }
    }
    step("degraded GETs".into());
    fleet.check_running()?;
    fleet.shutdown().await;
    let q = (NODES - 1) as u16;
    Ok(kinds
        .iter()
        .map(|&(name, kind)| {
            let sample = report::Sample::new(latencies.remove(name).unwrap_or_default());
            LiveKind {
                kind: name.to_owned(),
                gets: sample.len(),
                failed: failed.get(name).copied().unwrap_or(0),
                median_s: sample.quantile_ns(0.5).unwrap_or(0) as f64 / 1e9,
                predicted_s: predicted_s(kind, unit, q),
            }
        })
        .collect())
}

/// Waits (at most 30 s) until membership has marked `node` Down.
async fn wait_down(meta: &dyn meta::MetaStore, node: NodeId) -> anyhow::Result<()> {
    for _ in 0..300 {
        if meta.get_node(node).await?.state == NodeState::Down {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("node {node} was not marked Down within 30 s")
}
