//! `lowtail experiment fastcloud --live`: FAST CLOUD on a loopback cluster of real processes
//! (etcd, six `lowtail node`s, one `lowtail gateway` with L = 16 read task slots), the nodes
//! emulating the paper's 1 MB read delays (Δ = 61 ms plus an exponential of mean 79 ms per task,
//! every task served at once, as the paper's black-box store does), objects of k = 3 chunks on
//! RS(3,3) read whole through S3 by an open-loop Poisson client.
//!
//! Runs: (3,3) at 0.3 of C̃(3,3), whose unraced task records calibrate the delay model (the
//! paper's fit, FC11 live); (6,3) at the same load (the (6,3) < (3,3) ordering at low load, and the
//! online fit over raced tasks); BAFEC at 0.3, 0.6 and 0.9 with its thresholds from the
//! calibrated model and its online refit on, each beside the simulator's BAFEC over the same
//! arrivals and the calibrated model (FC13).
//!
//! Owns: the choice of runs and their judging. Must not: compute latencies other than from the
//! gateway's records, or start anything that outlives the run (the fleet kills its processes).

use super::judge::{describe_fit, finding};
use super::point::run_requests;
use super::{CODE, PaperFinding, SLOTS, read_class, read_delay};
use crate::live::blocking;
use crate::parallel::Progress;
use anyhow::{Context, ensure};
use bench::s3_client::{S3Endpoint, measurement_client};
use launcher::gateway_admin::GatewayAdmin;
use launcher::{Fleet, FleetConfig};
use load::executor::{LoopMode, execute};
use load::s3::{S3Fetch, ensure_bucket, prepare};
use model::{NEVER, ObjectId, Outcome, ReadRequest, Record, RequestRecord};
use node::ServiceModel;
use optimize::fec_model::{Admission, DelayFit, DelayModel};
use policy::fec::{BacklogMeasure, CodeLengthKind, OnlineFit};
use policy::{FecSettings, PolicyKind, PolicySettings};
use report::Sample;
use serde::Serialize;
use sim::fec::FecSetup;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The cluster's code: k = 3 data units and three parity units, so n runs from 3 to 6.
const LIVE_CODE: &str = "rs-3-3";
/// Storage nodes: one per unit.
const NODES: usize = 6;
/// Workers per node: more than tasks can be in flight (L), so no task waits at a node, as in the
/// paper's store; a cancelled task gives its worker back at once.
const NODE_WORKERS: usize = 64;
/// Bytes of each chunk (a data unit); the emulated delay replaces the I/O's, so the size only sets
/// how much the loopback carries.
const CHUNK_BYTES: u64 = 64 << 10;
/// Objects read (uniformly).
const OBJECTS: u64 = 64;
/// The bucket.
const BUCKET: &str = "fastcloud";
/// Loads of BAFEC's runs, as fractions of C̃(3,3).
pub const BAFEC_LOADS: [f64; 3] = [0.3, 0.6, 0.9];
/// Load of the fixed-code runs (low: where redundancy pays).
const FIXED_LOAD: f64 = 0.3;
/// How often the live BAFEC refits its model.
const FIT_PERIOD_MS: u64 = 2000;
/// Seconds of arrivals per run (quick: 10).
const RUN_S: f64 = 60.0;
const QUICK_RUN_S: f64 = 10.0;
/// How far BAFEC's live mean may be from the calibrated simulator's (the 20 %).
const LIVE_SIM_TOLERANCE: f64 = 0.20;

/// How to run an experiment on real processes (FAST CLOUD's `--live` and `--backend`, EC-Store's
/// `--live`).
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// Shorter runs (CI).
    pub quick: bool,
    /// Seed of everything drawn: arrivals or scans, objects, the nodes' delays, the simulation.
    pub seed: u64,
    /// The `lowtail` executable the processes run.
    pub binary: PathBuf,
    /// The etcd executable.
    pub etcd_binary: PathBuf,
}

impl LiveOptions {
    fn run_s(&self) -> f64 {
        if self.quick { QUICK_RUN_S } else { RUN_S }
    }
}

/// One live run and, for BAFEC, the simulator's beside it.
#[derive(Clone, Debug, Serialize)]
pub struct LiveRun {
    /// `(3,3)`, `(6,3)` or `bafec`.
    pub policy: String,
    /// Load, as a fraction of C̃(3,3).
    pub load: f64,
    /// Arrival rate, requests per second.
    pub rate_per_s: f64,
    /// Requests the gateway recorded (one row read each).
    pub requests: usize,
    /// Requests that failed (client or gateway).
    pub failed: u64,
    /// Mean latency at the gateway (arrival of the read to its k-th unit), seconds.
    pub mean_s: f64,
    /// Its 99th percentile.
    pub p99_s: f64,
    /// Mean latency at the client (the whole S3 GET), seconds.
    pub client_mean_s: f64,
    /// Tasks per request (n), averaged.
    pub mean_n: f64,
    /// The simulator's mean over the same arrivals and the calibrated model (BAFEC only).
    pub sim_mean_s: Option<f64>,
}

/// What the live experiment produced.
#[derive(Debug)]
pub struct LiveOutcome {
    /// The findings, as written to findings.json.
    pub findings: Vec<PaperFinding>,
    /// The runs, as written to live.json.
    pub runs: Vec<LiveRun>,
    /// The table, as written to live.md.
    pub markdown: String,
}

/// The emulated delay of node `id`: the paper's 1 MB read fit, its own seed.
fn node_model(seed: u64, id: u32) -> ServiceModel {
    let truth = read_delay();
    ServiceModel {
        enabled: true,
        replace_real_io: true,
        delay_shift_us: (truth.shift_s * 1e6) as u64,
        delay_exp_mean_us: (truth.exp_mean_s * 1e6) as u64,
        seed: seed.wrapping_mul(1000) + u64::from(id),
        ..ServiceModel::default()
    }
}

/// C̃(3,3) of the emulated model with L slots, non-blocking: the loads' unit.
fn capacity_per_s() -> f64 {
    read_class().capacity_per_s(usize::from(CODE.k))
}

/// Whole-object GETs arriving as a Poisson process of `rate_per_s` for `run_s` seconds.
fn arrivals(rate_per_s: f64, run_s: f64, seed: u64) -> Vec<ReadRequest> {
    let count = (rate_per_s * run_s).round().max(1.0) as usize;
    sim::fec::poisson_reads(count, rate_per_s, seed)
        .into_iter()
        .map(|request| ReadRequest {
            object: ObjectId(u64::from(request.partition.0) % OBJECTS),
            offset: 0,
            length: CHUNK_BYTES * u64::from(CODE.k),
            ..request
        })
        .collect()
}

/// A started and loaded cluster.
struct Cluster {
    fleet: Fleet,
    admin: GatewayAdmin,
    fetch: Arc<S3Fetch>,
}

async fn start_cluster(options: &LiveOptions, dir: &Path) -> anyhow::Result<Cluster> {
    let mut data = gateway::data::DataConfig { code: LIVE_CODE.to_owned(), ..Default::default() };
    // Every object striped (one stripe of three chunks), read through L slots.
    data.packed.max_object_bytes = 0;
    data.admission.slots = Some(SLOTS);
    let mut controller = launcher::fleet::ControllerTable::new();
    controller.insert("policy".into(), toml::Value::String(PolicyKind::FecFixed.name().into()));
    let (fleet, endpoint, admin) = one_gateway_fleet(options, dir, (NODES, NODE_WORKERS), data, controller).await?;
    let client = measurement_client(&endpoint, "lowtail-fastcloud", Duration::from_secs(60));
    let sizes: BTreeMap<ObjectId, u64> = (0..OBJECTS).map(|o| (ObjectId(o), CHUNK_BYTES * u64::from(CODE.k))).collect();
    ensure_bucket(&client, BUCKET).await?;
    prepare(std::slice::from_ref(&client), BUCKET, options.seed, &sizes, &|| {}).await.context("loading objects")?;
    for id in 0..NODES as u32 {
        fleet.set_service_model(id, &node_model(options.seed, id)).await?;
    }
    let fetch =
        Arc::new(S3Fetch { clients: vec![client], bucket: BUCKET.into(), seed: options.seed, sizes, verify_every: 10 });
    Ok(Cluster { fleet, admin, fetch })
}

/// A fleet of `nodes` nodes with `workers` each (their service model off, for loading) and one
/// gateway with `data` and `controller`: the fleet, the gateway's S3 endpoint and its admin client.
pub(crate) async fn one_gateway_fleet(
    options: &LiveOptions,
    dir: &Path,
    shape: (usize, usize),
    data: gateway::data::DataConfig,
    controller: launcher::fleet::ControllerTable,
) -> anyhow::Result<(Fleet, S3Endpoint, GatewayAdmin)> {
    one_gateway_fleet_with(options, dir, shape, data, controller, Default::default()).await
}

/// [`one_gateway_fleet`] whose gateway runs `classes`.
pub(crate) async fn one_gateway_fleet_with(
    options: &LiveOptions,
    dir: &Path,
    (nodes, workers): (usize, usize),
    data: gateway::data::DataConfig,
    controller: launcher::fleet::ControllerTable,
    classes: gateway::classes::ClassesConfig,
) -> anyhow::Result<(Fleet, S3Endpoint, GatewayAdmin)> {
    let config = FleetConfig {
        nodes,
        gateways: 1,
        service_model: ServiceModel::default(),
        node_workers: workers,
        data,
        controller,
        etcd_binary: options.etcd_binary.clone(),
        node_nice: 0,
        classes,
    };
    let fleet = Fleet::start(&options.binary, dir, &config, &|what| tracing::info!("{what}")).await?;
    let gateway = &fleet.gateways()[0];
    let credential = fleet.credential();
    let endpoint = S3Endpoint {
        url: gateway.s3_url(),
        region: fleet.region().to_owned(),
        access_key: credential.access_key.clone(),
        secret_key: credential.secret_key.clone(),
    };
    let admin = GatewayAdmin { base: gateway.http_url(), secret: fleet.cluster_secret().to_owned() };
    Ok((fleet, endpoint, admin))
}

/// What one run gave: the gateway's records and the client's.
struct Replayed {
    records: Vec<Record>,
    client_mean_s: f64,
    failed: u64,
}

/// Replays `requests` through the gateway of `admin` under `policy` with `fec`: the gateway's
/// records of them (none dropped) and the client's output.
pub(super) async fn replay_records(
    admin: &GatewayAdmin,
    fetch: &Arc<S3Fetch>,
    policy: PolicyKind,
    fec: FecSettings,
    requests: Vec<ReadRequest>,
) -> anyhow::Result<(Vec<Record>, load::executor::ExecutorOutput)> {
    let settings = PolicySettings { fec, ..Default::default() };
    let switch = admin.clone();
    blocking(move || switch.set_policy(policy, Some(&settings))).await?;
    let take = admin.clone();
    blocking(move || take.take_records()).await?;
    let output =
        execute(Arc::new(requests), 1, LoopMode::Open { max_in_flight: 4096 }, Arc::clone(fetch), Box::new(|| {}))
            .await;
    let take = admin.clone();
    let taken = blocking(move || take.take_records()).await?;
    ensure!(taken.dropped == 0, "the gateway dropped {} records", taken.dropped);
    Ok((taken.records, output))
}

/// Replays `requests` under `policy` with `fec`.
async fn replay(
    cluster: &Cluster,
    policy: PolicyKind,
    fec: FecSettings,
    requests: Vec<ReadRequest>,
) -> anyhow::Result<Replayed> {
    let (records, output) = replay_records(&cluster.admin, &cluster.fetch, policy, fec, requests).await?;
    let client_mean_s = latency_s(output.records.iter().filter(|r| r.outcome == Outcome::Ok)).0;
    let gateway_failed = records.iter().filter(|r| r.request.outcome != Outcome::Ok).count() as u64;
    Ok(Replayed { records, client_mean_s, failed: output.failed + gateway_failed })
}

/// Mean and 99th percentile (nearest rank) of the requests' latencies, seconds; zeros for none.
fn latency_s<'a>(requests: impl Iterator<Item = &'a RequestRecord>) -> (f64, f64) {
    let sample = Sample::new(requests.map(|r| r.completion_ns.saturating_sub(r.arrival_ns)).collect());
    let mean_s = sample.stats().map_or(0.0, |stats| stats.mean_s);
    (mean_s, sample.quantile_ns(0.99).unwrap_or(0) as f64 / 1e9)
}

/// The paper's fit over the tasks that were not cancelled (on-node time: entering the queue to
/// finishing), and the fec-* policies' online fit over every task.
fn fits(records: &[Record]) -> (Option<DelayFit>, Option<DelayFit>) {
    let delays: Vec<f64> = records
        .iter()
        .flat_map(|r| &r.tasks)
        .filter(|t| !t.cancelled && !t.failed && t.finish_ns != NEVER)
        .map(|t| t.finish_ns.saturating_sub(t.enqueue_ns) as f64 / 1e9)
        .collect();
    let online = OnlineFit::fit_records(records.iter().map(|r| (&r.request, r.tasks.as_slice())));
    (DelayModel::fit(&delays), online)
}

fn live_run(policy: &str, load: f64, replayed: &Replayed, sim_mean_s: Option<f64>) -> LiveRun {
    let (mean_s, p99_s) = latency_s(replayed.records.iter().map(|r| &r.request));
    let tasks: usize = replayed.records.iter().map(|r| r.tasks.len()).sum();
    LiveRun {
        policy: policy.to_owned(),
        load,
        rate_per_s: load * capacity_per_s(),
        requests: replayed.records.len(),
        failed: replayed.failed,
        mean_s,
        p99_s,
        client_mean_s: replayed.client_mean_s,
        mean_n: tasks as f64 / replayed.records.len().max(1) as f64,
        sim_mean_s,
    }
}

/// The simulator's BAFEC over `requests` with `model` (the calibrated one): its mean latency.
fn simulated_mean_s(model: DelayModel, requests: &[ReadRequest], seed: u64) -> anyhow::Result<f64> {
    let kind = CodeLengthKind::Bafec { backlog: BacklogMeasure::WaitingRequests };
    let setup = FecSetup::one_class(CODE, model, SLOTS, Admission::NonBlocking, kind, seed);
    Ok(run_requests(&setup, requests)?.mean_s)
}

/// The live BAFEC's settings: thresholds from `model`, refitted online.
fn bafec_settings(model: DelayModel) -> FecSettings {
    FecSettings {
        delay_shift_ms: model.shift_s * 1e3,
        delay_exp_mean_ms: model.exp_mean_s * 1e3,
        fit_period_ms: FIT_PERIOD_MS,
        fit_min_finished: 200,
        ..FecSettings::default()
    }
}

/// Runs every measurement on one cluster; `step` names each finished one.
async fn measure(options: &LiveOptions, dir: &Path, step: &dyn Fn(String)) -> anyhow::Result<(Vec<LiveRun>, LiveFits)> {
    let cluster = start_cluster(options, dir).await?;
    step("cluster started and loaded".into());
    let result = measure_on(options, &cluster, step).await;
    cluster.fleet.shutdown().await;
    result
}

/// The fits of the fixed-code runs.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LiveFits {
    /// The paper's fit of the (3,3) run's tasks (none raced): the calibrated model.
    pub unraced: Option<DelayFit>,
    /// The paper's fit of the (6,3) run's tasks that were not cancelled.
    pub raced_paper: Option<DelayFit>,
    /// The online (censored) fit of every task of the (6,3) run.
    pub raced_online: Option<DelayFit>,
}

async fn measure_on(
    options: &LiveOptions,
    cluster: &Cluster,
    step: &dyn Fn(String),
) -> anyhow::Result<(Vec<LiveRun>, LiveFits)> {
    let run_s = options.run_s();
    let rate = FIXED_LOAD * capacity_per_s();
    let no_fit = FecSettings { fit_period_ms: 0, ..FecSettings::default() };
    let mut runs = Vec::new();
    let fixed = |n: u16| FecSettings { fixed_n: n, ..no_fit };
    let requests = arrivals(rate, run_s, options.seed);
    let unraced = replay(cluster, PolicyKind::FecFixed, fixed(3), requests.clone()).await?;
    runs.push(live_run("(3,3)", FIXED_LOAD, &unraced, None));
    step("(3,3) at 0.3".into());
    let raced = replay(cluster, PolicyKind::FecFixed, fixed(6), requests).await?;
    runs.push(live_run("(6,3)", FIXED_LOAD, &raced, None));
    step("(6,3) at 0.3".into());
    let (unraced_fit, _) = fits(&unraced.records);
    let (raced_paper, raced_online) = fits(&raced.records);
    let calibrated = unraced_fit.map_or(read_delay(), |f| f.model);
    for (index, &load) in BAFEC_LOADS.iter().enumerate() {
        let seed = options.seed * 100 + index as u64 + 1;
        let requests = arrivals(load * capacity_per_s(), run_s, seed);
        let sim_mean_s = simulated_mean_s(calibrated, &requests, seed)?;
        let replayed = replay(cluster, PolicyKind::FecBafec, bafec_settings(calibrated), requests).await?;
        runs.push(live_run("bafec", load, &replayed, Some(sim_mean_s)));
        step(format!("bafec at {load}"));
    }
    Ok((runs, LiveFits { unraced: unraced_fit, raced_paper, raced_online }))
}

/// Runs the live experiment and writes live.json, live.md and findings.json under `out_dir`.
pub fn run(options: &LiveOptions, out_dir: &Path, progress: &(dyn Fn(Progress) + Sync)) -> anyhow::Result<LiveOutcome> {
    let (runs, fits) = on_processes("lowtail-fastcloud-", step_count(), progress, async |dir, step| {
        measure(options, dir, step).await
    })?;
    let findings = judge(&runs, &fits);
    let markdown = markdown(&runs, &fits);
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let json = serde_json::json!({ "runs": runs, "fits": fits, "emulated": read_delay(), "slots": SLOTS });
    std::fs::write(out_dir.join("live.json"), serde_json::to_string_pretty(&json)?)?;
    std::fs::write(out_dir.join("live.md"), &markdown)?;
    std::fs::write(out_dir.join("findings.json"), serde_json::to_string_pretty(&findings)?)?;
    Ok(LiveOutcome { findings, runs, markdown })
}

/// Runs `measure` on a runtime of its own in a fresh work directory (removed after), counting its
/// steps on `progress`; Ctrl-C ends it (dropping `measure`, whose processes die with their handles).
pub(crate) fn on_processes<T>(
    prefix: &str,
    steps: usize,
    progress: &(dyn Fn(Progress) + Sync),
    measure: impl AsyncFnOnce(&Path, &dyn Fn(String)) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let temp = tempfile::Builder::new().prefix(prefix).tempdir().context("creating a work directory")?;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    let done = std::sync::atomic::AtomicUsize::new(0);
    let step = |label: String| {
        let done = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        progress(Progress { done, total: steps, label });
    };
    let result = runtime.block_on(async {
        tokio::select! {
            result = measure(temp.path(), &step) => result,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted (Ctrl-C); the processes were stopped")),
        }
    });
    drop(runtime);
    result
}

/// Steps the progress bar counts.
pub fn step_count() -> usize {
    3 + BAFEC_LOADS.len()
}

/// The live findings (FC11 live, FC4 live, FC13).
pub fn judge(runs: &[LiveRun], fits: &LiveFits) -> Vec<PaperFinding> {
    let truth = read_delay();
    let mut findings = Vec::new();
    let failed: u64 = runs.iter().map(|r| r.failed).sum();
    findings.push(finding(
        "FC-live",
        "every live GET is served with the right bytes (one in ten compared)",
        "—",
        format!("{failed} failed of {} requests", runs.iter().map(|r| r.requests).sum::<usize>()),
        Some(failed == 0),
    ));
    let fit_finding = |claim: &str, fit: &Option<DelayFit>, judged: bool| {
        let (error, text) = fit.map_or((f64::INFINITY, "too few tasks to fit".into()), |f| describe_fit(&f, &truth));
        finding(
            "FC11",
            claim,
            "section V-D's fit; the issue asks within 10 % live",
            text,
            judged.then_some(error <= 0.10),
        )
    };
    findings.push(fit_finding(
        "live: the paper's fit of the (3,3) run's task records recovers the emulated Δ = 61 ms and 1/μ = 79 ms within 10 %",
        &fits.unraced,
        true,
    ));
    findings.push(fit_finding(
        "live: the paper's fit over the (6,3) run's tasks not cancelled",
        &fits.raced_paper,
        false,
    ));
    findings.push(fit_finding(
        "live: the fec-* policies' online fit over every task of the (6,3) run, cancels censored, recovers Δ and 1/μ within 10 %",
        &fits.raced_online,
        true,
    ));
    let mean_of = |policy: &str| runs.iter().find(|r| r.policy == policy).map(|r| r.mean_s);
    if let (Some(three), Some(six)) = (mean_of("(3,3)"), mean_of("(6,3)")) {
        findings.push(finding(
            "FC4",
            "live: at low load (0.3 of C̃(3,3)) (6,3) has a lower mean latency than (3,3)",
            "Fig. 5: (6,3) below (3,3) at low rates",
            format!("(3,3) {:.0} ms, (6,3) {:.0} ms", three * 1e3, six * 1e3),
            Some(six < three),
        ));
    }
    let bafec: Vec<&LiveRun> = runs.iter().filter(|r| r.policy == "bafec").collect();
    let within = |r: &LiveRun| r.sim_mean_s.is_some_and(|sim| (r.mean_s / sim - 1.0).abs() <= LIVE_SIM_TOLERANCE);
    findings.push(finding(
        "FC13",
        "live: BAFEC's mean latency is within 20 % of the calibrated simulator's at three loads",
        "the issue's check of the simulator against the live store",
        bafec
            .iter()
            .map(|r| {
                format!("{}: live {:.0} ms, sim {:.0} ms", r.load, r.mean_s * 1e3, r.sim_mean_s.unwrap_or(0.0) * 1e3)
            })
            .collect::<Vec<_>>()
            .join("; "),
        Some(bafec.len() == BAFEC_LOADS.len() && bafec.iter().all(|r| within(r))),
    ));
    findings
}

fn markdown(runs: &[LiveRun], fits: &LiveFits) -> String {
    let mut text = String::from(
        "| policy | load | req/s | requests | failed | mean n | mean ms (gateway) | p99 ms | mean ms (client) | sim mean ms |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        text.push_str(&format!(
            "| {} | {:.1} | {:.1} | {} | {} | {:.2} | {:.1} | {:.1} | {:.1} | {} |\n",
            r.policy,
            r.load,
            r.rate_per_s,
            r.requests,
            r.failed,
            r.mean_n,
            r.mean_s * 1e3,
            r.p99_s * 1e3,
            r.client_mean_s * 1e3,
            r.sim_mean_s.map_or("—".into(), |s| format!("{:.1}", s * 1e3))
        ));
    }
    let truth = read_delay();
    for (label, fit) in [
        ("(3,3), paper's fit", fits.unraced),
        ("(6,3), paper's fit", fits.raced_paper),
        ("(6,3), online fit", fits.raced_online),
    ] {
        let text_fit = fit.map_or("too few tasks".to_owned(), |f| describe_fit(&f, &truth).1);
        text.push_str(&format!("\n- {label}: {text_fit}"));
    }
    text.push('\n');
    text
}
