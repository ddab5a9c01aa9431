//! `lowtail experiment apls --live`: degraded reads on a loopback cluster of real processes — the
//! gateway decode, the segmented read (APLS's lists without node changes) and APLS run by the
//! storage nodes — with the simulator's prediction for the same parameters beside each.
//!
//! The cluster: 9 nodes, RS(6,3), units of 2 MiB (1 MiB with `--quick`), 24 one-stripe objects
//! (12), about 2/3 of which have a data unit on node 0; node 0 stopped and marked Down by
//! membership. Two phases, each reading every lost data unit by a ranged GET, one at a time, the
//! reconstruction switched before every GET (`PUT /admin/reconstruct`) in rotating order, every
//! answer checked:
//! - `disks`: sources bound by their emulated disks (the service model: 20 MB/s, 2 ms per task),
//!   links unshaped — the gateway decode against the segmented read;
//! - `links`: sources bound by their emulated NICs (25 MB/s up and down, disks 200 MB/s and 2 ms),
//!   the gateway's downlink 50 MB/s (`PUT /admin/ingress`) — all three, APLS as a chain over the 8
//!   survivors in packets of 64 KiB, and `auto`, which chooses per GET from the rates the gateway's
//!   membership probes report (predicted as what the policy picks for the phase's rates).
//!
//! The prediction: the isolated simulator with each source's disk and links and the gateway's
//! downlink as the phase sets them, and, where links are shaped, a hop latency of one tick of the
//! emulation's timer (`node::link::TIMER_TICK`: a packet crossing an emulated link wakes its sender
//! up to a tick late, so it reaches the next hop that much later); the prediction without it is
//! reported beside.
//!
//! Owns the choice of runs and the judging. Must not: compute statistics except through `report`.

use super::judge_live;
use crate::fastcloud::PaperFinding;
use crate::fastcloud::live::{LiveOptions, one_gateway_fleet};
use crate::live::blocking;
use crate::parallel::Progress;
use anyhow::{Context, ensure};
use bench::s3_client::measurement_client;
use execution::reconstruct::{Assignment, Dataflow, Inner, Method};
use load::objects::{object_bytes, object_key};
use load::s3::{ensure_bucket, prepare};
use meta::{Layout, NodeId, NodeState};
use model::ObjectId;
use node::ServiceModel;
use node::link::LinkShape;
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
/// Every emulated read task's fixed cost.
const OVERHEAD_US: u64 = 2_000;
/// APLS's packet in the `links` phase.
const APLS_PACKET_BYTES: u32 = 64 << 10;
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

/// One phase's setting: the nodes' emulated disks and links, the gateway's downlink, the kinds read.
#[derive(Clone, Debug)]
pub struct Phase {
    /// `disks` or `links`.
    pub name: &'static str,
    /// Each node's disk rate, bytes per second.
    pub disk_bytes_per_s: f64,
    /// Each node's uplink and downlink, bytes per second (0: unshaped).
    pub node_link_bytes_per_s: f64,
    /// The gateway's downlink, bytes per second (0: unshaped).
    pub gateway_bytes_per_s: f64,
    /// The reconstructions compared.
    pub kinds: Vec<(&'static str, ReconstructKind)>,
}

/// The two phases (module documentation).
pub fn phases() -> Vec<Phase> {
    vec![
        Phase {
            name: "disks",
            disk_bytes_per_s: 20e6,
            node_link_bytes_per_s: 0.0,
            gateway_bytes_per_s: 0.0,
            kinds: vec![("gateway", ReconstructKind::Gateway), ("segmented", ReconstructKind::Segmented)],
        },
        Phase {
            name: "links",
            disk_bytes_per_s: 200e6,
            node_link_bytes_per_s: 25e6,
            gateway_bytes_per_s: 50e6,
            kinds: vec![
                ("gateway", ReconstructKind::Gateway),
                ("segmented", ReconstructKind::Segmented),
                ("apls", ReconstructKind::Apls),
                ("auto", ReconstructKind::Auto),
            ],
        },
    ]
}

impl Phase {
    /// The nodes' service model in this phase.
    fn node_model(&self, seed: u64) -> ServiceModel {
        ServiceModel {
            enabled: true,
            replace_real_io: true,
            overhead_us: OVERHEAD_US,
            rate_bytes_per_s: self.disk_bytes_per_s,
            egress_bytes_per_s: self.node_link_bytes_per_s,
            ingress_bytes_per_s: self.node_link_bytes_per_s,
            seed,
            ..ServiceModel::default()
        }
    }

    /// The hop latency the emulation adds: a timer tick where links are shaped (they sleep).
    pub fn hop_latency_ns(&self) -> u64 {
        let shaped = self.node_link_bytes_per_s > 0.0 || self.gateway_bytes_per_s > 0.0;
        if shaped { node::link::TIMER_TICK.as_nanos() as u64 } else { 0 }
    }

    /// The reconstruction settings of `kind` in this phase.
    fn settings(&self, kind: ReconstructKind) -> ReconstructSettings {
        ReconstructSettings { kind, packet_bytes: APLS_PACKET_BYTES, ..Default::default() }
    }
}

/// One kind's degraded GETs in one phase.
#[derive(Clone, Debug, Serialize)]
pub struct LiveKind {
    /// `disks` or `links`.
    pub phase: String,
    /// `gateway`, `segmented` or `apls`.
    pub kind: String,
    /// GETs served and checked.
    pub gets: usize,
    /// GETs that failed or answered wrong bytes.
    pub failed: usize,
    /// Median latency at the client, seconds.
    pub median_s: f64,
    /// The simulator's latency for the same read, seconds (a timer tick per hop where links are
    /// shaped).
    pub predicted_s: f64,
    /// The same without the tick: zero hop latency.
    pub predicted_untimed_s: f64,
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

/// Steps the progress bar counts: start and load, the failure, each phase's GETs.
pub fn step_count() -> usize {
    2 + phases().len()
}

/// Infinity for an unshaped (0) rate.
fn rate_or_unbound(bytes_per_s: f64) -> f64 {
    if bytes_per_s > 0.0 { bytes_per_s } else { f64::INFINITY }
}

/// The simulator's latency of one degraded read of a `unit` range under `kind` in `phase`, from
/// `q` survivors, each hop taking `hop_latency_ns`.
pub fn predicted_s(phase: &Phase, kind: ReconstructKind, unit: u64, q: u16, hop_latency_ns: u64) -> f64 {
    if kind == ReconstructKind::Auto {
        return predicted_s(phase, auto_choice(phase, unit, q), unit, q, hop_latency_ns);
    }
    let flow = match kind {
        // The gateway's own segmentation, or its decode of the whole range from k sources.
        ReconstructKind::Segmented => Dataflow::segmented(K, q, unit),
        ReconstructKind::Apls => Dataflow::build(
            Method::Apls { q, inner: Inner::Chain, assignment: Assignment::RoundRobin },
            K,
            unit,
            APLS_PACKET_BYTES,
        ),
        _ => Dataflow::build(Method::GatewayDecode, K, unit, u32::try_from(unit).expect("a unit under 4 GiB")),
    }
    .expect("a valid dataflow");
    let node = SitePorts::symmetric(rate_or_unbound(phase.node_link_bytes_per_s));
    let setup = ReconstructSetup {
        nodes: vec![node; usize::from(q)],
        gateway: SitePorts {
            uplink_bytes_per_s: f64::INFINITY,
            downlink_bytes_per_s: rate_or_unbound(phase.gateway_bytes_per_s),
        },
        hop_latency_ns,
        per_packet_ns: 0,
        receive_per_packet_ns: 0,
        disk: DiskModel {
            overhead_ns: OVERHEAD_US * 1_000,
            rate_bytes_per_s: phase.disk_bytes_per_s,
            whole_range: false,
        },
    };
    run_isolated(&setup, &flow).latency_ns as f64 / 1e9
}

/// What `kind = "auto"` picks for a lost `unit` in `phase` with `q` survivors, from the rates the
/// gateway's probes see there (each source the slower of its disk and its link) and its downlink.
pub fn auto_choice(phase: &Phase, unit: u64, q: u16) -> ReconstructKind {
    let rate = rate_or_unbound(phase.node_link_bytes_per_s).min(phase.disk_bytes_per_s);
    let survivors: Vec<policy::reconstruct::Survivor> = (1..=q)
        .map(|unit| policy::reconstruct::Survivor {
            unit: unit as u8,
            node: model::NodeId(u32::from(unit)),
            load: 0.0,
            rate_bytes_per_s: rate,
        })
        .collect();
    let mut settings = phase.settings(ReconstructKind::Auto);
    if phase.gateway_bytes_per_s > 0.0 {
        settings.gateway_bytes_per_s = phase.gateway_bytes_per_s;
    }
    match policy::reconstruct::choose(&settings, K, &survivors, unit).topology {
        model::ReconstructionTopology::Gateway => ReconstructKind::Gateway,
        _ => ReconstructKind::Apls,
    }
}

/// Runs the live experiment and writes live.json, live.md and findings-live.json.
pub fn run(options: &LiveOptions, out_dir: &Path, progress: &(dyn Fn(Progress) + Sync)) -> anyhow::Result<LiveOutcome> {
    let kinds = crate::fastcloud::live::on_processes("lowtail-apls-", step_count(), progress, async |dir, step| {
        measure(options, dir, step).await
    })?;
    let findings = judge_live(&kinds);
    let mut markdown = String::from(
        "| phase | reconstruction | GETs | failed | median ms | simulator ms | simulator, no tick, ms |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for kind in &kinds {
        markdown += &format!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} |\n",
            kind.phase,
            kind.kind,
            kind.gets,
            kind.failed,
            kind.median_s * 1e3,
            kind.predicted_s * 1e3,
            kind.predicted_untimed_s * 1e3
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
    step("loaded".into());
    fleet.stop_node(DOWN).await?;
    wait_down(&*meta, NodeId(DOWN)).await?;
    step(format!("node {DOWN} down"));
    let mut kinds = Vec::new();
    for phase in phases() {
        for id in (0..NODES as u32).filter(|&id| id != DOWN) {
            fleet.set_service_model(id, &phase.node_model(options.seed.wrapping_mul(1000) + u64::from(id))).await?;
        }
        let (shaping, shape) = (admin.clone(), LinkShape { bytes_per_s: phase.gateway_bytes_per_s, per_packet_us: 0 });
        blocking(move || shaping.set_ingress(&shape)).await?;
        kinds.extend(read_lost(&s3, &admin, &phase, &lost, rounds(options), unit).await?);
        step(format!("{} phase", phase.name));
    }
    fleet.check_running()?;
    fleet.shutdown().await;
    Ok(kinds)
}

/// Every lost range read under each of `phase`'s kinds, `rounds` times, the order rotating.
async fn read_lost(
    s3: &aws_sdk_s3::Client,
    admin: &launcher::gateway_admin::GatewayAdmin,
    phase: &Phase,
    lost: &[LostRange],
    rounds: usize,
    unit: u64,
) -> anyhow::Result<Vec<LiveKind>> {
    let mut latencies: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut failed: BTreeMap<&str, usize> = BTreeMap::new();
    let count = phase.kinds.len();
    for round in 0..rounds {
        for (index, range) in lost.iter().enumerate() {
            for turn in 0..count {
                let (name, kind) = phase.kinds[(round + index + turn) % count];
                let switch = admin.clone();
                let settings = phase.settings(kind);
                blocking(move || switch.set_reconstruct(&settings)).await?;
                match timed_get(s3, range).await {
                    Some(latency_ns) => latencies.entry(name).or_default().push(latency_ns),
                    None => *failed.entry(name).or_default() += 1,
                }
            }
        }
    }
    let q = (NODES - 1) as u16;
    Ok(phase
        .kinds
        .iter()
        .map(|&(name, kind)| {
            let sample = report::Sample::new(latencies.remove(name).unwrap_or_default());
            LiveKind {
                phase: phase.name.to_owned(),
                kind: name.to_owned(),
                gets: sample.len(),
                failed: failed.get(name).copied().unwrap_or(0),
                median_s: sample.quantile_ns(0.5).unwrap_or(0) as f64 / 1e9,
                predicted_s: predicted_s(phase, kind, unit, q, phase.hop_latency_ns()),
                predicted_untimed_s: predicted_s(phase, kind, unit, q, 0),
            }
        })
        .collect())
}

/// One ranged GET of a lost range: its latency, or `None` when it failed or answered wrong bytes.
async fn timed_get(s3: &aws_sdk_s3::Client, range: &LostRange) -> Option<u64> {
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
    body.is_some_and(|b| b[..] == range.bytes[..]).then_some(latency_ns)
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
