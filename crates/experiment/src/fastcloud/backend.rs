//! `lowtail experiment fastcloud --backend`: FAST CLOUD in its own setting, a proxy in front of a
//! black-box S3 service. The service is a second lowtail cluster of real processes (etcd, six
//! `lowtail node`s, one `lowtail gateway`) whose nodes give every task a heavy-tailed delay (2 ms
//! plus a Lomax of scale 5 ms and shape 1.5: p99 ≈ 105 ms, p99.9 ≈ 500 ms, as a store with
//! stragglers has); in front of it, a gateway in backend mode (RS(3,3), every unit a key of the
//! service's bucket). The same open-loop Poisson GETs are replayed through the front under (3,3)
//! (the k data units only) and (6,3) (all six, done at the first three), and the tail each leaves
//! is measured at the client and at the front gateway, with the cost in backend requests.
//!
//! Owns: the setting, the runs and their judging. Must not: compute a latency other than from the
//! front gateway's records and the client's, or leave a process behind (the fleet kills its own;
//! the front gateway is stopped).

use super::PaperFinding;
use super::judge::finding;
use super::live::LiveOptions;
use crate::parallel::Progress;
use anyhow::Context;
use bench::s3_client::{S3Endpoint, measurement_client};
use gateway::data::config::BackendConfig;
use gateway::process::{Credential, GatewayConfig, MetaConfig};
use launcher::gateway_admin::GatewayAdmin;
use launcher::{Fleet, FleetConfig};
use load::s3::{S3Fetch, ensure_bucket, prepare};
use model::{ObjectId, Outcome, ReadRequest};
use node::ServiceModel;
use policy::{FecSettings, PolicyKind};
use report::Sample;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The front gateway's code: objects of k = 3 chunks, up to three parity chunks raced.
const FRONT_CODE: &str = "rs-3-3";
/// The service's own code over its six nodes.
const SERVICE_CODE: &str = "rs-4-2";
/// Nodes of the service.
const SERVICE_NODES: usize = 6;
/// Workers per service node: no task waits at a node (the service is a black box that serves
/// every request at once; its delay is the emulated one).
const NODE_WORKERS: usize = 64;
/// Bytes of each chunk: one key of the service, packed there (one node task per GET).
const CHUNK_BYTES: u64 = 32 << 10;
/// Objects read (uniformly).
const OBJECTS: u64 = 48;
/// Arrivals per second: low load, where racing pays.
const RATE_PER_S: f64 = 20.0;
/// Seconds of arrivals per run (quick: 8).
const RUN_S: f64 = 90.0;
const QUICK_RUN_S: f64 = 8.0;
/// The service's emulated delay per task: Δ, µs...
pub const SERVICE_SHIFT_US: u64 = 2_000;
/// ...plus a Lomax tail of this scale, µs...
pub const SERVICE_TAIL_SCALE_US: u64 = 5_000;
/// ...and this shape (heavy: the variance is infinite below 2).
pub const SERVICE_TAIL_SHAPE: f64 = 1.5;
/// The front's bucket and the service's.
const FRONT_BUCKET: &str = "photos";
const SERVICE_BUCKET: &str = "units";

/// One run through the front gateway.
#[derive(Clone, Debug, Serialize)]
pub struct BackendRun {
    /// `(3,3)` or `(6,3)`.
    pub code: String,
    /// Requests recorded at the front gateway.
    pub requests: usize,
    /// Requests that failed (client or gateway).
    pub failed: u64,
    /// Front gateway latencies (arrival to the k-th chunk), ms: mean, p50, p99, p99.9.
    pub gateway_ms: [f64; 4],
    /// Client latencies (the whole S3 GET), ms: mean, p50, p99, p99.9.
    pub client_ms: [f64; 4],
    /// Backend GETs per read (tasks per request), averaged.
    pub backend_gets_per_read: f64,
}

/// What the backend experiment produced.
#[derive(Debug)]
pub struct BackendOutcome {
    /// The findings, as written to findings.json.
    pub findings: Vec<PaperFinding>,
    /// The runs, as written to backend.json.
    pub runs: Vec<BackendRun>,
    /// The table, as written to backend.md.
    pub markdown: String,
}

/// Steps the progress bar counts.
pub fn step_count() -> usize {
    4
}

/// The service nodes' delay.
fn service_model(seed: u64, id: u32) -> ServiceModel {
    ServiceModel {
        enabled: true,
        replace_real_io: true,
        delay_shift_us: SERVICE_SHIFT_US,
        tail_scale_us: SERVICE_TAIL_SCALE_US,
        tail_shape: SERVICE_TAIL_SHAPE,
        seed: seed.wrapping_mul(1000) + u64::from(id),
        ..ServiceModel::default()
    }
}

/// Runs the experiment and writes backend.json, backend.md and findings.json under `out_dir`.
pub fn run(
    options: &LiveOptions,
    out_dir: &Path,
    progress: &(dyn Fn(Progress) + Sync),
) -> anyhow::Result<BackendOutcome> {
    let runs = super::live::on_processes("lowtail-backend-", step_count(), progress, async |dir, step| {
        measure(options, dir, step).await
    })?;
    let findings = judge(&runs);
    let markdown = markdown(&runs);
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let service = serde_json::json!({
        "shift_us": SERVICE_SHIFT_US, "tail_scale_us": SERVICE_TAIL_SCALE_US, "tail_shape": SERVICE_TAIL_SHAPE,
        "nodes": SERVICE_NODES, "code": SERVICE_CODE,
    });
    let json =
        serde_json::json!({ "runs": runs, "service": service, "front_code": FRONT_CODE, "rate_per_s": RATE_PER_S });
    std::fs::write(out_dir.join("backend.json"), serde_json::to_string_pretty(&json)?)?;
    std::fs::write(out_dir.join("backend.md"), &markdown)?;
    std::fs::write(out_dir.join("findings.json"), serde_json::to_string_pretty(&findings)?)?;
    Ok(BackendOutcome { findings, runs, markdown })
}

/// The service, the front gateway over it, and what reads through the front.
struct Setting {
    service: Fleet,
    front: gateway::process::RunningGateway,
    admin: GatewayAdmin,
    fetch: Arc<S3Fetch>,
}

async fn measure(options: &LiveOptions, dir: &Path, step: &dyn Fn(String)) -> anyhow::Result<Vec<BackendRun>> {
    let setting = start(options, dir).await?;
    step("service and front gateway started, objects loaded".into());
    let result = measure_on(options, &setting, step).await;
    setting.front.shutdown().await;
    setting.service.shutdown().await;
    result
}

async fn start(options: &LiveOptions, dir: &Path) -> anyhow::Result<Setting> {
    let data = gateway::data::DataConfig { code: SERVICE_CODE.to_owned(), ..Default::default() };
    let config = FleetConfig {
        nodes: SERVICE_NODES,
        gateways: 1,
        service_model: ServiceModel::default(),
        node_workers: NODE_WORKERS,
        data,
        controller: launcher::fleet::ControllerTable::new(),
        etcd_binary: options.etcd_binary.clone(),
        node_nice: 0,
        classes: Default::default(),
    };
    let service =
        Fleet::start(&options.binary, &dir.join("service"), &config, &|what| tracing::info!("{what}")).await?;
    let credential = service.credential().clone();
    let service_endpoint = S3Endpoint {
        url: service.gateways()[0].s3_url(),
        region: service.region().to_owned(),
        access_key: credential.access_key.clone(),
        secret_key: credential.secret_key.clone(),
    };
    ensure_bucket(&measurement_client(&service_endpoint, "lowtail-backend", Duration::from_secs(60)), SERVICE_BUCKET)
        .await?;
    let front = start_front(dir, &service_endpoint).await?;
    let front_endpoint = S3Endpoint {
        url: format!("http://{}", front.s3_addr()),
        region: "us-east-1".into(),
        access_key: "front-access".into(),
        secret_key: "front-secret-key".into(),
    };
    let client = measurement_client(&front_endpoint, "lowtail-backend", Duration::from_secs(60));
    let http = front.http_addr().context("the front gateway has an HTTP endpoint")?;
    let admin = GatewayAdmin { base: format!("http://{http}"), secret: FRONT_SECRET.into() };
    let sizes: BTreeMap<ObjectId, u64> = (0..OBJECTS).map(|o| (ObjectId(o), CHUNK_BYTES * 3)).collect();
    ensure_bucket(&client, FRONT_BUCKET).await?;
    prepare(std::slice::from_ref(&client), FRONT_BUCKET, options.seed, &sizes, &|| {})
        .await
        .context("loading objects")?;
    // The service's tail is on for the reads only: loading is not measured.
    for id in 0..SERVICE_NODES as u32 {
        service.set_service_model(id, &service_model(options.seed, id)).await?;
    }
    let fetch = Arc::new(S3Fetch {
        clients: vec![client],
        bucket: FRONT_BUCKET.into(),
        seed: options.seed,
        sizes,
        verify_every: 10,
    });
    Ok(Setting { service, front, admin, fetch })
}

/// The front gateway's cluster secret (its admin calls need it; it has no nodes).
const FRONT_SECRET: &str = "front-has-no-nodes";

/// The front gateway: backend mode over `service`'s bucket, in this process.
async fn start_front(dir: &Path, service: &S3Endpoint) -> anyhow::Result<gateway::process::RunningGateway> {
    let mut data = gateway::data::DataConfig {
        code: FRONT_CODE.to_owned(),
        cluster_secret: FRONT_SECRET.into(),
        ..Default::default()
    };
    data.packed.max_object_bytes = 0;
    data.orphans.release_delay_ms = 0;
    data.backend = Some(BackendConfig {
        endpoint: service.url.clone(),
        bucket: SERVICE_BUCKET.into(),
        region: service.region.clone(),
        access_key: service.access_key.clone(),
        secret_key: service.secret_key.clone(),
        ..Default::default()
    });
    let mut config = GatewayConfig {
        s3_listen: "127.0.0.1:0".parse().expect("an address"),
        http_listen: Some("127.0.0.1:0".parse().expect("an address")),
        credentials: vec![Credential {
            access_key: "front-access".into(),
            secret_key: "front-secret-key".into(),
            class: None,
        }],
        meta: MetaConfig::Embedded { dir: dir.join("front-meta"), cache_bytes: meta::DEFAULT_CACHE_BYTES },
        data,
        ..Default::default()
    };
    config.controller.policy = PolicyKind::FecFixed;
    config.controller.max_records = 1_000_000;
    let meta = gateway::process::open_meta(&config.meta).await?;
    gateway::process::start(config, meta).await.context("starting the front gateway in backend mode")
}

async fn measure_on(
    options: &LiveOptions,
    setting: &Setting,
    step: &dyn Fn(String),
) -> anyhow::Result<Vec<BackendRun>> {
    let run_s = if options.quick { QUICK_RUN_S } else { RUN_S };
    let count = (RATE_PER_S * run_s).round() as usize;
    let requests: Vec<ReadRequest> = sim::fec::poisson_reads(count, RATE_PER_S, options.seed)
        .into_iter()
        .map(|request| ReadRequest {
            object: ObjectId(u64::from(request.partition.0) % OBJECTS),
            offset: 0,
            length: CHUNK_BYTES * 3,
            ..request
        })
        .collect();
    let mut runs = Vec::new();
    for n in [3u16, 6] {
        runs.push(replay(setting, n, requests.clone()).await?);
        step(format!("({n},3) through the front gateway"));
    }
    // The service's nodes back to no delay, so stopping is quick.
    for id in 0..SERVICE_NODES as u32 {
        setting.service.set_service_model(id, &ServiceModel::default()).await?;
    }
    step("done".into());
    Ok(runs)
}

/// Replays `requests` through the front gateway with every read asking `n` units.
async fn replay(setting: &Setting, n: u16, requests: Vec<ReadRequest>) -> anyhow::Result<BackendRun> {
    let fec = FecSettings { fixed_n: n, fit_period_ms: 0, ..FecSettings::default() };
    let (records, output) =
        super::live::replay_records(&setting.admin, &setting.fetch, PolicyKind::FecFixed, fec, requests).await?;
    let gateway_failed = records.iter().filter(|r| r.request.outcome != Outcome::Ok).count() as u64;
    let gateway_ns: Vec<u64> =
        records.iter().map(|r| r.request.completion_ns.saturating_sub(r.request.arrival_ns)).collect();
    let client_ns: Vec<u64> = output
        .records
        .iter()
        .filter(|r| r.outcome == Outcome::Ok)
        .map(|r| r.completion_ns.saturating_sub(r.arrival_ns))
        .collect();
    let tasks: usize = records.iter().map(|r| r.tasks.len()).sum();
    Ok(BackendRun {
        code: format!("({n},3)"),
        requests: records.len(),
        failed: output.failed + gateway_failed,
        gateway_ms: summary_ms(gateway_ns),
        client_ms: summary_ms(client_ns),
        backend_gets_per_read: tasks as f64 / records.len().max(1) as f64,
    })
}

/// Mean, p50, p99 and p99.9 of `latencies_ns`, ms (zeros for none).
fn summary_ms(latencies_ns: Vec<u64>) -> [f64; 4] {
    let sample = Sample::new(latencies_ns);
    let quantile = |q: f64| sample.quantile_ns(q).unwrap_or(0) as f64 / 1e6;
    [sample.stats().map_or(0.0, |s| s.mean_s * 1e3), quantile(0.5), quantile(0.99), quantile(0.999)]
}

/// The findings: the round trip, the tail cut, its cost.
pub fn judge(runs: &[BackendRun]) -> Vec<PaperFinding> {
    let mut findings = Vec::new();
    let failed: u64 = runs.iter().map(|r| r.failed).sum();
    let requests: usize = runs.iter().map(|r| r.requests).sum();
    findings.push(finding(
        "FC-backend",
        "objects round-trip through the front gateway's backend bucket: every GET served, one in ten compared byte for byte",
        "—",
        format!("{failed} failed of {requests}"),
        Some(failed == 0 && requests > 0),
    ));
    let [Some(three), Some(six)] = ["(3,3)", "(6,3)"].map(|code| runs.iter().find(|r| r.code == code)) else {
        return findings;
    };
    let cut = |i: usize| 1.0 - six.client_ms[i] / three.client_ms[i];
    findings.push(finding(
        "FC-backend",
        "over a service with a heavy-tailed delay, (6,3) cuts the client's p99 latency below (3,3)'s",
        "abstract and Fig. 3: coding cuts the tail of S3 reads (−69 % at p99 for (3,2) vs (1,1) in 2012)",
        format!(
            "p99 {:.0} → {:.0} ms ({:.0} % less), p99.9 {:.0} → {:.0} ms, mean {:.1} → {:.1} ms",
            three.client_ms[2],
            six.client_ms[2],
            100.0 * cut(2),
            three.client_ms[3],
            six.client_ms[3],
            three.client_ms[0],
            six.client_ms[0]
        ),
        Some(six.client_ms[2] < three.client_ms[2]),
    ));
    findings.push(finding(
        "FC-backend",
        "the cost: backend GETs per read and storage per byte",
        "n/k storage, n requests per read",
        format!(
            "{:.2} GETs per read against {:.2}; 2.00x the storage of (3,3)",
            six.backend_gets_per_read, three.backend_gets_per_read
        ),
        None,
    ));
    findings
}

/// The runs as a markdown table.
pub fn markdown(runs: &[BackendRun]) -> String {
    let mut text = format!(
        "FAST CLOUD over an S3 service: a lowtail cluster whose nodes delay every task by {} ms + Lomax(scale {} ms, shape {}), {} GETs/s of 3 × {} KiB objects\n\n\
         | code | requests | failed | client mean ms | p50 | p99 | p99.9 | gateway p99 ms | backend GETs/read |\n|---|---|---|---|---|---|---|---|---|\n",
        SERVICE_SHIFT_US / 1000,
        SERVICE_TAIL_SCALE_US / 1000,
        SERVICE_TAIL_SHAPE,
        RATE_PER_S,
        CHUNK_BYTES >> 10
    );
    for run in runs {
        text.push_str(&format!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |\n",
            run.code,
            run.requests,
            run.failed,
            run.client_ms[0],
            run.client_ms[1],
            run.client_ms[2],
            run.client_ms[3],
            run.gateway_ms[2],
            run.backend_gets_per_read
        ));
    }
    text
}
