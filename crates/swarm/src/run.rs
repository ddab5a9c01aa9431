//! One seed's run: the schedule's epochs against a real cluster, each ending with a quiesce and a
//! check, and a last check that m more failures lose nothing. The invariants:
//!
//! 1. every read returns a version its key may hold, byte for byte (no acknowledged write lost,
//!    nothing half-written ever visible), and none says the data is lost unless the store's answers
//!    allowed it ([`Model::excuses_loss`]: written below full redundancy, and more nodes faulted
//!    since than the answer said it survives; the quiesce then deletes the key, as an operator
//!    would, and counts it);
//! 2. after each epoch the cluster quiesces: every fault that lasts undone, every node back and
//!    Up at every gateway, every unit the epoch corrupted found by a scrub pass begun after it,
//!    and no stripe short of a unit (the census of the gateway holding the repair lease);
//! 3. after the last epoch, `faulty_nodes` more nodes killed (and marked Down by membership) lose
//!    nothing.
//!
//! Owns the epoch's timing and the counts of the report. Must not decide what is correct beyond
//! asking the [`Model`], or reach into the cluster except through [`Cluster`] and S3.

use bench::s3_batch::{BatchClient, BatchRequest};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use serde::Serialize;

use crate::Flavor;
use crate::cluster::{Cluster, ClusterSettings, pick_nodes, rng};
use crate::model::{Ack, Model, Read, Version, body_bytes};
use crate::proxy::Mode;
use crate::redundancy::RedundancyCapture;
use crate::schedule::{Epoch, Fault, FaultKind, Op, Schedule, ScheduleSettings, TimedFault, draw};

/// The bucket every client writes in.
const BUCKET: &str = "swarm";
/// A request unanswered this long counts as uncertain.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// A client pauses this long after an error (the gateway may be restarting).
const ERROR_PAUSE: Duration = Duration::from_millis(200);
/// Each node's file system when full-disk faults are drawn: room for a run's units (released
/// stripes are kept 10 minutes) in a sparse image, so a limit rather than space taken.
pub const NODE_DISK_BYTES: u64 = 4 << 30;

/// Everything a run needs beside its seed.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// What the schedules are drawn for (per seed, `kinds` less etcd off etcd and `gateways` as
    /// the seed's [`Flavor`] has them).
    pub schedule: ScheduleSettings,
    /// The `lowtail` executable.
    pub lowtail: std::path::PathBuf,
    /// Where each seed's cluster lives (a directory per seed under it).
    pub work_dir: std::path::PathBuf,
    /// How long a quiesce may take before it is a violation.
    pub quiesce_timeout: Duration,
    /// Keep each seed's cluster directory (its logs) even when the run passed.
    pub keep: bool,
}

/// Outcomes of one kind of operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OpCounts {
    /// Answered 2xx (a read: with the right bytes or a right 404).
    pub ok: u64,
    /// Answered with an error or not at all.
    pub failed: u64,
}

/// What one seed's run did and found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// Its cluster ([`Flavor::name`]).
    pub cluster: String,
    /// The bucket's write ack rule.
    pub write_ack: String,
    /// Epochs run.
    pub epochs: usize,
    /// Operations by kind.
    pub ops: BTreeMap<String, OpCounts>,
    /// Faults injected (and undone) by kind ([`Fault::label`]).
    pub faults: BTreeMap<String, u64>,
    /// Faults the cluster could not do, by kind and reason (a node not running to hang, a unit
    /// file not there to damage).
    pub faults_refused: BTreeMap<String, u64>,
    /// Faults done otherwise than scheduled, and why: ended early (`lowtail up` restarted every
    /// node), deferred (a gateway restart waits for etcd), or still there at a quiesce.
    pub faults_changed: BTreeMap<String, u64>,
    /// Reads checked against the model (during the epochs, after each quiesce, after the m losses).
    pub reads_checked: u64,
    /// Seconds each quiesce took.
    pub quiesce_s: Vec<f64>,
    /// Per quiesce, what kept the cluster from being whole and for how many seconds (the
    /// status's reason with its numbers as `N`): which condition a slow quiesce waited on.
    pub quiesce_blockers: Vec<BTreeMap<String, f64>>,
    /// Units EC-Store's mover moved, as the gateway counted them after each epoch's quiesce (a
    /// gateway killed mid-epoch takes its count since its start along: a lower bound).
    pub moves: u64,
    /// Acknowledged writes by the redundancy their answer named (`full`, `pending`, `degraded`;
    /// `unnamed` when it named none).
    pub acks_by_redundancy: BTreeMap<String, u64>,
    /// Keys whose data was lost as the store's answers allowed ([`Model::excuses_loss`]), each
    /// with what it was (then deleted by the quiesce).
    pub losses_allowed: BTreeMap<String, String>,
    /// Every invariant violated, in words (empty when the run passed).
    pub violations: Vec<String>,
    /// Seconds the whole run took.
    pub duration_s: f64,
}

/// Shared by the clients and the checks of one run.
struct Shared {
    model: Mutex<Model>,
    report: Mutex<SeedReport>,
    /// Each fault (or undo) done to a node: when (unix ms) and which node.
    node_faults: Mutex<Vec<(u64, u32)>>,
}

impl Shared {
    fn new(model: Model, report: SeedReport) -> Self {
        Self { model: Mutex::new(model), report: Mutex::new(report), node_faults: Mutex::new(Vec::new()) }
    }

    fn node_faulted(&self, node: u32) {
        self.node_faults.lock().expect("faults lock").push((unix_now_ms(), node));
    }

    /// Distinct nodes with a fault (or undo) at or after `since_ms`.
    fn nodes_faulted_since(&self, since_ms: u64) -> usize {
        let faults = self.node_faults.lock().expect("faults lock");
        let nodes: std::collections::BTreeSet<u32> =
            faults.iter().filter(|(at_ms, _)| *at_ms >= since_ms).map(|(_, node)| *node).collect();
        nodes.len()
    }

    /// Whether a read of `key` that found its data lost (of `size_bytes`, when known) is allowed;
    /// counted when it is.
    fn loss_allowed(&self, key: &str, size_bytes: Option<u64>, why: &str) -> bool {
        let model = self.model.lock().expect("model lock");
        let allowed = model.excuses_loss(key, size_bytes, |ms| self.nodes_faulted_since(ms));
        drop(model);
        if allowed {
            self.report
                .lock()
                .expect("report lock")
                .losses_allowed
                .entry(key.to_string())
                .or_insert_with(|| why.into());
        }
        allowed
    }

    fn count_op(&self, kind: &str, ok: bool) {
        let mut report = self.report.lock().expect("report lock");
        let counts = report.ops.entry(kind.to_string()).or_default();
        if ok { counts.ok += 1 } else { counts.failed += 1 }
    }

    fn violation(&self, what: String) {
        tracing::error!(%what, "invariant violated");
        self.report.lock().expect("report lock").violations.push(what);
    }
}

/// The schedule settings of a seed of `flavor`: no etcd faults off etcd, a gateway fault picking
/// one of the flavor's gateways.
pub fn seed_schedule_settings(settings: &ScheduleSettings, flavor: Flavor) -> ScheduleSettings {
    // etcd faults need etcd; damaged metadata records need the embedded store's file.
    let kinds = settings
        .kinds
        .iter()
        .copied()
        .filter(|&kind| (kind != FaultKind::Etcd || flavor.etcd) && (kind != FaultKind::MetaDamage || !flavor.etcd))
        .collect();
    ScheduleSettings { kinds, gateways: flavor.gateways(), ..settings.clone() }
}

/// The cluster a seed of `flavor` runs on, with what its fault kinds need (proxies for network
/// faults, a file system per node for full disks).
pub fn cluster_settings(seed: u64, settings: &RunSettings, flavor: Flavor, dir: std::path::PathBuf) -> ClusterSettings {
    let kinds = &settings.schedule.kinds;
    ClusterSettings {
        etcd_gateways: if flavor.etcd { flavor.gateways() } else { 0 },
        proxies: kinds.contains(&FaultKind::Network),
        node_disk_bytes: kinds.contains(&FaultKind::FullDisk).then_some(NODE_DISK_BYTES),
        ..ClusterSettings::up(settings.lowtail.clone(), dir, settings.schedule.nodes, flavor.up_toml(seed))
    }
}

/// Runs `seed`'s schedule against a fresh cluster of `flavor`; the report says what it found.
pub fn run_seed(seed: u64, settings: &RunSettings, flavor: Flavor) -> anyhow::Result<SeedReport> {
    let started = Instant::now();
    let schedule = draw(seed, &seed_schedule_settings(&settings.schedule, flavor));
    let dir = settings.work_dir.join(format!("seed-{seed}"));
    let _ = std::fs::remove_dir_all(&dir);
    let cluster = Cluster::start(cluster_settings(seed, settings, flavor, dir.clone()))?;
    let report = SeedReport {
        seed,
        cluster: flavor.name().to_string(),
        write_ack: schedule.write_ack.to_string(),
        ..SeedReport::default()
    };
    let model = Model::new(uncertain_failures_tolerated(schedule.write_ack));
    let shared = Arc::new(Shared::new(model, report));
    let cluster = Arc::new(Mutex::new(cluster));
    let quiesce_timeout = flavor.quiesce_timeout(settings.quiesce_timeout);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let outcome = runtime.block_on(run_epochs(&schedule, quiesce_timeout, &cluster, &shared));
    drop(runtime);
    drop(cluster);
    outcome?;
    let mut report = shared.report.lock().expect("report lock").clone();
    report.epochs = schedule.epochs.len();
    report.duration_s = started.elapsed().as_secs_f64();
    if report.violations.is_empty() && !settings.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(report)
}

/// What a write under `rule` survives at least when it happened: the rule's early floor, or the
/// durability rule's (the gateways' default `data.ack_min_failures_tolerated`, which the swarm's
/// clusters keep) when it was acknowledged degraded.
fn uncertain_failures_tolerated(rule: meta::WriteAck) -> usize {
    let durability_rule = gateway::data::DataConfig::default().ack_min_failures_tolerated;
    rule.early_failures_tolerated().unwrap_or(usize::MAX).min(durability_rule)
}

async fn run_epochs(
    schedule: &Schedule,
    quiesce_timeout: Duration,
    cluster: &Arc<Mutex<Cluster>>,
    shared: &Arc<Shared>,
) -> anyhow::Result<()> {
    let clients: Vec<Clients> = {
        let cluster = cluster.lock().expect("cluster lock");
        cluster.endpoints().iter().map(|url| Clients::new(cluster.manifest(), url)).collect()
    };
    let first = clients.first().context("the cluster has no gateway")?.s3.clone();
    first.create_bucket().bucket(BUCKET).send().await.map_err(|e| anyhow::anyhow!("create bucket: {e:?}"))?;
    let admin = cluster.lock().expect("cluster lock").admin()?;
    let write_ack = schedule.write_ack;
    tokio::task::spawn_blocking(move || admin.set_write_ack(BUCKET, write_ack)).await??;
    let mut moves = MoveCount::default();
    for (index, epoch) in schedule.epochs.iter().enumerate() {
        tracing::info!(seed = schedule.seed, epoch = index, "epoch starts");
        run_epoch(epoch, cluster, shared, &clients).await;
        quiesce_and_check(quiesce_timeout, cluster, shared, &first, index).await;
        shared.report.lock().expect("report lock").moves += moves.since_last(cluster).await;
    }
    lose_more_and_check(schedule, quiesce_timeout, cluster, shared, &first).await;
    Ok(())
}

/// The epoch's clients (client i through gateway i modulo their number) and faults, side by side,
/// until both are done.
async fn run_epoch(epoch: &Epoch, cluster: &Arc<Mutex<Cluster>>, shared: &Arc<Shared>, clients: &[Clients]) {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(epoch.length_ms);
    let faults = {
        let (cluster, shared, faults) = (Arc::clone(cluster), Arc::clone(shared), epoch.faults.clone());
        let start = Instant::now();
        tokio::task::spawn_blocking(move || inject(&faults, start, &cluster, &shared))
    };
    let tasks: Vec<_> = epoch
        .clients
        .iter()
        .enumerate()
        .map(|(index, ops)| {
            let (ops, shared, clients) = (ops.clone(), Arc::clone(shared), clients[index % clients.len()].clone());
            tokio::spawn(async move {
                for op in ops {
                    if tokio::time::Instant::now() >= deadline {
                        break;
                    }
                    if !perform(&clients, &op, &shared).await {
                        tokio::time::sleep(ERROR_PAUSE).await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    let _ = faults.await;
}

/// Applies `faults` at their times (a blocking thread: restarts wait for processes), each counted
/// by its label, or as refused with the reason.
fn inject(faults: &[TimedFault], start: Instant, cluster: &Mutex<Cluster>, shared: &Shared) {
    for timed in faults {
        let at = start + Duration::from_millis(timed.at_ms);
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        let done = {
            let mut cluster = cluster.lock().expect("cluster lock");
            let done = apply(&timed.fault, &mut cluster);
            rebuild_if_refused(done, &mut cluster, shared)
        };
        let label = timed.fault.label();
        let mut report = shared.report.lock().expect("report lock");
        match done {
            Ok(changed) => {
                tracing::info!(fault = ?timed.fault, "fault injected");
                if let Some(node) = timed.fault.node() {
                    shared.node_faulted(node);
                }
                *report.faults.entry(label.clone()).or_default() += 1;
                for what in changed {
                    *report.faults_changed.entry(format!("{what} (by {label})")).or_default() += 1;
                }
            }
            Err(why) if timed.fault.is_undo() => {
                drop(report);
                shared.violation(format!("could not undo a fault ({label}): {why:#}"));
            }
            Err(why) => {
                tracing::info!(fault = ?timed.fault, %why, "fault refused");
                *report.faults_refused.entry(format!("{label}: {}", blocker_kind(&format!("{why:#}")))).or_default() +=
                    1;
            }
        }
    }
}

/// Does `fault` to the cluster; what it changed of other faults, in words.
fn apply(fault: &Fault, cluster: &mut Cluster) -> anyhow::Result<Vec<String>> {
    match *fault {
        Fault::KillNode(node) => cluster.kill_node(node),
        Fault::RestartNode(node) => cluster.restart_node(node)?,
        Fault::KillGateway(gateway) => cluster.kill_gateway(gateway),
        Fault::RestartGateway(gateway) => return cluster.restart_gateway(gateway),
        Fault::CorruptUnit { node, kind, damage, pick, offset_pick, length_pick } => {
            match cluster.damage_unit(node, kind, damage, [pick, offset_pick, length_pick])? {
                Some((path, what)) => tracing::info!(file = %path.display(), %what, "unit damaged"),
                None => anyhow::bail!("no such unit file on the node"),
            }
        }
        Fault::HangNode { node, .. } => cluster.hang_node(node)?,
        Fault::ContinueNode(node) => cluster.continue_node(node),
        Fault::FillDisk { node, .. } => cluster.fill_disk(node)?,
        Fault::FreeDisk(node) => cluster.free_disk(node)?,
        Fault::SlowNetwork { node, latency_ms, .. } => cluster.set_network(node, Mode::Pass { latency_ms })?,
        Fault::ResetConnections { node } => cluster.reset_connections(node)?,
        Fault::Partition { node, refuse, .. } => {
            cluster.set_network(node, if refuse { Mode::Refuse } else { Mode::BlackHole })?;
            if refuse {
                cluster.reset_connections(node)?;
            }
        }
        Fault::HealNetwork(node) => cluster.set_network(node, Mode::Pass { latency_ms: 0 })?,
        Fault::StopEtcd { kill, .. } => cluster.stop_etcd(kill)?,
        Fault::ReturnEtcd => cluster.return_etcd()?,
        Fault::CopyAside(node) => cluster.copy_aside(node)?,
        Fault::ReturnStale(node) => cluster.return_stale(node)?,
        Fault::DamageMetadata { pick } => return cluster.damage_metadata(pick),
    }
    Ok(Vec::new())
}

/// The mover's count of moves, read from the gateway between epochs.
#[derive(Default)]
struct MoveCount {
    /// The gateway's pid and its count when last read.
    last: Option<(u32, u64)>,
}

impl MoveCount {
    /// Moves since the last reading (all of the gateway's count when it restarted since).
    async fn since_last(&mut self, cluster: &Arc<Mutex<Cluster>>) -> u64 {
        let (pid, admin) = {
            let cluster = cluster.lock().expect("cluster lock");
            (cluster.gateway_pid(), cluster.admin())
        };
        let (Some(pid), Ok(admin)) = (pid, admin) else { return 0 };
        let read = tokio::task::spawn_blocking(move || admin.mover()).await;
        let Ok(Ok(status)) = read else { return 0 };
        let now = status["status"]["moves"].as_u64().unwrap_or(0);
        let since = match self.last {
            Some((last_pid, last)) if last_pid == pid => now.saturating_sub(last),
            _ => now,
        };
        self.last = Some((pid, now));
        since
    }
}

/// The clients' two ways in to one gateway: the AWS SDK and lowtail's batch read.
#[derive(Clone)]
struct Clients {
    s3: aws_sdk_s3::Client,
    batch: BatchClient,
}

impl Clients {
    /// Clients of the gateway at `url`, with the credentials of `manifest`.
    fn new(manifest: &launcher::Manifest, url: &str) -> Clients {
        let endpoint = bench::s3_client::S3Endpoint {
            url: url.to_string(),
            ..bench::s3_client::S3Endpoint::from_manifest(manifest)
        };
        let batch =
            BatchClient::new(&endpoint.url, &endpoint.access_key, &endpoint.secret_key).with_region(&endpoint.region);
        Clients { s3: bench::s3_client::measurement_client(&endpoint, "lowtail-swarm", REQUEST_TIMEOUT), batch }
    }
}

/// Performs one operation and records it; whether it succeeded.
async fn perform(clients: &Clients, op: &Op, shared: &Shared) -> bool {
    let client = &clients.s3;
    match op {
        Op::Put { key, body_seed, size_bytes } => {
            let body = body_bytes(*body_seed, *size_bytes);
            let capture = RedundancyCapture::default();
            let put = client.put_object().bucket(BUCKET).key(key).body(ByteStream::from(body));
            let sent = put.customize().interceptor(capture.clone()).send().await;
            let version = Version::Body { seed: *body_seed, size_bytes: *size_bytes };
            wrote_captured(shared, "put", key, version, sent.is_ok(), &capture)
        }
        Op::Multipart { key, body_seed, part_bytes } => {
            let size_bytes = part_bytes.iter().sum();
            let capture = RedundancyCapture::default();
            let done = multipart(client, key, *body_seed, part_bytes, &capture).await.is_ok();
            wrote_captured(shared, "multipart", key, Version::Body { seed: *body_seed, size_bytes }, done, &capture)
        }
        Op::Delete { key } => {
            let sent = client.delete_object().bucket(BUCKET).key(key).send().await;
            let ack = if sent.is_ok() { Ack::Acknowledged } else { Ack::Uncertain };
            wrote(shared, "delete", key, Version::Absent, ack)
        }
        Op::Get { key } => read_and_check(client, key, shared, false).await,
        Op::BatchGet { keys } => batch_read_and_check(clients, keys, shared).await,
    }
}

/// A batch read of `keys`, each part checked as a GET's answer would be (a batch is not atomic:
/// each part is one version of its key, read while the batch ran).
async fn batch_read_and_check(clients: &Clients, keys: &[String], shared: &Shared) -> bool {
    let parts = match clients.batch.get_batch(BUCKET, &BatchRequest::Keys(keys.to_vec())).await {
        Ok(parts) => parts,
        Err(error) => {
            // The gateway restarting, or too many nodes down: no answer is no claim.
            tracing::debug!(%error, "a batch read failed");
            shared.count_op("batch-get", false);
            return false;
        }
    };
    if parts.len() != keys.len() || parts.iter().zip(keys).any(|(part, key)| part.key != *key) {
        shared.violation(format!(
            "batch read of {keys:?} answered parts {:?}",
            parts.iter().map(|p| &p.key).collect::<Vec<_>>()
        ));
        return false;
    }
    let mut all_read = true;
    for part in parts {
        let read = match (part.status, part.error_code.as_deref()) {
            (200, _) => Read::Bytes(part.body.to_vec()),
            (404, Some("NoSuchKey")) => Read::Absent,
            (status, code) => {
                let why =
                    format!("batch part {status} {}: {}", code.unwrap_or("-"), String::from_utf8_lossy(&part.body));
                failed_read(&clients.s3, shared, &part.key, &why, false).await;
                all_read = false;
                continue;
            }
        };
        let wrong = shared.model.lock().expect("model lock").check_read(&part.key, &read);
        shared.report.lock().expect("report lock").reads_checked += 1;
        if let Some(wrong) = wrong {
            shared.violation(format!("batch read: {wrong}"));
        }
    }
    shared.count_op("batch-get", all_read);
    all_read
}

/// [`wrote`], as the answer `capture` caught tells it, counted by its redundancy.
fn wrote_captured(
    shared: &Shared,
    kind: &str,
    key: &str,
    version: Version,
    ok: bool,
    capture: &RedundancyCapture,
) -> bool {
    if ok {
        let state = capture.state().unwrap_or_else(|| "unnamed".into());
        *shared.report.lock().expect("report lock").acks_by_redundancy.entry(state).or_default() += 1;
    }
    wrote(shared, kind, key, version, capture.ack(ok))
}

fn wrote(shared: &Shared, kind: &str, key: &str, version: Version, ack: Ack) -> bool {
    let ok = ack != Ack::Uncertain;
    shared.model.lock().expect("model lock").wrote(key, version, ack);
    shared.count_op(kind, ok);
    ok
}

/// A multipart upload of `part_bytes`-sized parts of the body of `seed`, the redundancy its parts'
/// answers named caught by `capture`; aborted if it fails.
async fn multipart(
    client: &aws_sdk_s3::Client,
    key: &str,
    seed: u64,
    part_bytes: &[u64],
    capture: &RedundancyCapture,
) -> anyhow::Result<()> {
    use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
    let body = body_bytes(seed, part_bytes.iter().sum());
    let created = client.create_multipart_upload().bucket(BUCKET).key(key).send().await?;
    let upload_id = created.upload_id().unwrap_or_default().to_string();
    let mut parts = Vec::new();
    let mut offset = 0usize;
    let result: anyhow::Result<()> = async {
        for (index, &bytes) in part_bytes.iter().enumerate() {
            let number = index as i32 + 1;
            let piece = body[offset..offset + bytes as usize].to_vec();
            offset += bytes as usize;
            let sent = client
                .upload_part()
                .bucket(BUCKET)
                .key(key)
                .upload_id(&upload_id)
                .part_number(number)
                .body(ByteStream::from(piece))
                .customize()
                .interceptor(capture.clone())
                .send()
                .await?;
            parts
                .push(CompletedPart::builder().part_number(number).set_e_tag(sent.e_tag().map(str::to_string)).build());
        }
        let upload = CompletedMultipartUpload::builder().set_parts(Some(parts)).build();
        client
            .complete_multipart_upload()
            .bucket(BUCKET)
            .key(key)
            .upload_id(&upload_id)
            .multipart_upload(upload)
            .send()
            .await?;
        Ok(())
    }
    .await;
    if result.is_err() {
        let _ = client.abort_multipart_upload().bucket(BUCKET).key(key).upload_id(&upload_id).send().await;
    }
    result
}

/// Reads `key` and checks it against the model. A failed read is a violation when `must_answer`
/// (the cluster is quiesced, or has lost no more than it tolerates) or when it says data is lost.
/// A read that must answer is retried while it is answered 503 (a node slow to answer on a busy
/// machine, the answer says retry), as clients do, at most [`MUST_ANSWER_ATTEMPTS`] times.
async fn read_and_check(client: &aws_sdk_s3::Client, key: &str, shared: &Shared, must_answer: bool) -> bool {
    let mut answer = get(client, key).await;
    let attempts = if must_answer { MUST_ANSWER_ATTEMPTS } else { 1 };
    for _ in 1..attempts {
        if !answer.as_ref().is_err_and(|why| why.starts_with("Some(503)")) {
            break;
        }
        tokio::time::sleep(MUST_ANSWER_PAUSE).await;
        answer = get(client, key).await;
    }
    let read = match answer {
        Ok(read) => read,
        Err(why) => {
            failed_read(client, shared, key, &why, must_answer).await;
            shared.count_op("get", false);
            return false;
        }
    };
    let wrong = shared.model.lock().expect("model lock").check_read(key, &read);
    shared.report.lock().expect("report lock").reads_checked += 1;
    if let Some(wrong) = wrong {
        shared.violation(wrong);
    }
    shared.count_op("get", true);
    true
}

/// Reads a quiesced cluster must answer get this many tries while answered 503.
const MUST_ANSWER_ATTEMPTS: usize = 4;
/// The pause between them.
const MUST_ANSWER_PAUSE: Duration = Duration::from_secs(2);

/// A GET of `key`: what it found, or why it found nothing, in words.
async fn get(client: &aws_sdk_s3::Client, key: &str) -> Result<Read, String> {
    match client.get_object().bucket(BUCKET).key(key).send().await {
        Ok(output) => match output.body.collect().await {
            Ok(bytes) => Ok(Read::Bytes(bytes.into_bytes().to_vec())),
            Err(error) => Err(format!("body cut off: {error}")),
        },
        Err(error) if error.as_service_error().is_some_and(|e| e.is_no_such_key()) => Ok(Read::Absent),
        Err(error) => {
            let status = error.raw_response().map(|r| r.status().as_u16());
            Err(format!("{status:?} {}: {}", error.code().unwrap_or("-"), bench::s3_client::error_text(&error)))
        }
    }
}

/// A read of `key` failed with `why`: a violation when it says the data is lost (unless the
/// store's answers allowed that: then true) or when the read `must_answer`. The object's size, by
/// a HEAD (metadata only), tells which of the key's versions was found lost.
async fn failed_read(client: &aws_sdk_s3::Client, shared: &Shared, key: &str, why: &str, must_answer: bool) -> bool {
    if !why.contains(DATA_LOST) {
        if must_answer {
            shared.violation(format!("{key}: read failed: {why}"));
        }
        return false;
    }
    let size_bytes = match client.head_object().bucket(BUCKET).key(key).send().await {
        Ok(head) => head.content_length().and_then(|length| u64::try_from(length).ok()),
        Err(_) => None,
    };
    if shared.loss_allowed(key, size_bytes, why) {
        return true;
    }
    let context = shared.model.lock().expect("model lock").loss_context(key, |ms| shared.nodes_faulted_since(ms));
    shared.violation(format!("{key}: read failed: {why} (found {size_bytes:?} bytes; {context})"));
    false
}

/// What a gateway's error says when too few of a stripe's units are left to decode.
const DATA_LOST: &str = "data lost";

/// Every key of the model read and checked.
async fn check_every_key(client: &aws_sdk_s3::Client, shared: &Shared) {
    let keys: Vec<String> = shared.model.lock().expect("model lock").keys().cloned().collect();
    for key in keys {
        read_and_check(client, &key, shared, true).await;
    }
}

/// Undoes what still lasts, brings every node and gateway back and waits for the cluster to be
/// whole, then reads every key.
async fn quiesce_and_check(
    timeout: Duration,
    cluster: &Arc<Mutex<Cluster>>,
    shared: &Arc<Shared>,
    client: &aws_sdk_s3::Client,
    epoch: usize,
) {
    let started = Instant::now();
    let (cluster_for_wait, shared_for_wait) = (Arc::clone(cluster), Arc::clone(shared));
    let (mut waited, mut blockers) = blocking_wait(move || {
        let mut blockers = BTreeMap::new();
        let waited =
            quiesce(&mut cluster_for_wait.lock().expect("cluster lock"), &shared_for_wait, timeout, &mut blockers);
        (waited, blockers)
    })
    .await;
    if waited.as_ref().is_err_and(|why| format!("{why:#}").contains(UNREADABLE_STOP)) {
        // Objects whose stripes cannot be read: if the store's answers allowed their loss, an
        // operator deletes them (the cluster is not whole while anything references those stripes).
        settle_losses(client, shared).await;
        let remaining = timeout.saturating_sub(started.elapsed()).max(AFTER_SETTLING);
        let cluster = Arc::clone(cluster);
        (waited, blockers) = blocking_wait(move || {
            let since_ms = unix_now_ms();
            let cluster = cluster.lock().expect("cluster lock");
            let waited = wait_for_status(&cluster, remaining, None, &mut blockers, |s| whole(s, since_ms));
            (waited, blockers)
        })
        .await;
    }
    match waited {
        Ok(()) => shared.model.lock().expect("model lock").whole(),
        Err(why) => shared.violation(format!("epoch {epoch}: the cluster did not quiesce: {why:#}")),
    }
    {
        let mut report = shared.report.lock().expect("report lock");
        report.quiesce_s.push(started.elapsed().as_secs_f64());
        report.quiesce_blockers.push(blockers);
    }
    check_every_key(client, shared).await;
}

/// Runs a wait on a blocking thread; a panic is its error.
async fn blocking_wait(
    wait: impl FnOnce() -> (anyhow::Result<()>, BTreeMap<String, f64>) + Send + 'static,
) -> (anyhow::Result<()>, BTreeMap<String, f64>) {
    match tokio::task::spawn_blocking(wait).await {
        Ok(waited) => waited,
        Err(error) => (Err(anyhow::anyhow!("the wait panicked: {error}")), BTreeMap::new()),
    }
}

/// Reads each key whose data may be lost as the store allowed; those whose read finds it lost (and
/// allowed: [`Shared::loss_allowed`]) are deleted, as an operator would once the loss is known.
async fn settle_losses(client: &aws_sdk_s3::Client, shared: &Shared) {
    let keys = shared.model.lock().expect("model lock").keys_at_risk();
    for key in keys {
        let Err(why) = get(client, &key).await else { continue };
        if !failed_read(client, shared, &key, &why, false).await {
            continue;
        }
        for _attempt in 0..DELETE_ATTEMPTS {
            if client.delete_object().bucket(BUCKET).key(&key).send().await.is_ok() {
                shared.model.lock().expect("model lock").wrote(&key, Version::Absent, Ack::Acknowledged);
                break;
            }
            tokio::time::sleep(ERROR_PAUSE).await;
        }
    }
}

/// The least a quiesce waits for a whole cluster once the allowed losses are settled (their
/// deletes release the unreadable stripes; repair's next census counts them gone).
const AFTER_SETTLING: Duration = Duration::from_secs(60);

/// Tries at deleting a key whose loss was allowed.
const DELETE_ATTEMPTS: usize = 5;

/// What ends a quiesce's wait early: stripes too few of whose units are readable held it for
/// [`UNREADABLE_PATIENCE`] (repair retries them every scan: a node returning would have helped by
/// then).
const UNREADABLE_STOP: &str = "held by stripes too few of whose units are readable";
/// The census's reason for such stripes.
const UNREADABLE_BLOCKER: &str = "too_few_readable";
/// How long a quiesce waits on unreadable stripes before asking which objects are lost.
const UNREADABLE_PATIENCE: Duration = Duration::from_secs(150);

/// Undoes what lasts (the schedule undid it already: anything left is counted and taken for a
/// fault of its node), restarts what is down and waits (bounded) until the statuses show a whole
/// cluster ([`whole`]), adding what held it up to `blockers`.
fn quiesce(
    cluster: &mut Cluster,
    shared: &Shared,
    timeout: Duration,
    blockers: &mut BTreeMap<String, f64>,
) -> anyhow::Result<()> {
    let undone = cluster.undo_all_and_restart();
    let undone = match rebuild_if_refused(undone, cluster, shared)? {
        // Rebuilt: the rest of the undoing, with the gateway back.
        rebuilt if rebuilt.iter().any(|what| what.starts_with(REFUSED)) => {
            rebuilt.into_iter().chain(cluster.undo_all_and_restart()?).collect()
        }
        undone => undone,
    };
    for what in undone {
        if let Some(node) = node_named(&what) {
            shared.node_faulted(node);
        }
        *shared
            .report
            .lock()
            .expect("report lock")
            .faults_changed
            .entry(format!("{what}: left to the quiesce"))
            .or_default() += 1;
    }
    // With every node back, so that the rebuild sees every unit.
    if cluster.metadata_damaged() {
        rebuild_metadata(cluster, shared)?;
    }
    let since_ms = unix_now_ms();
    wait_for_status(cluster, timeout, Some(UNREADABLE_PATIENCE), blockers, |statuses| whole(statuses, since_ms))
}

/// The node a [`Cluster::undo_all_and_restart`] line names (`… of node N`).
fn node_named(undone: &str) -> Option<u32> {
    let (_, after) = undone.split_once("of node ")?;
    after.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// What `lowtail up` says when it refuses a damaged metadata store at start.
const DAMAGED_STORE_REFUSAL: [&str; 2] = ["cannot open the metadata store in", "metadata damaged"];

/// What [`rebuild_if_refused`] says it did.
const REFUSED: &str = "lowtail up refused its damaged metadata store at start; rebuilt from the nodes";

/// When `done` failed because `lowtail up` refused to start on a damaged metadata store (a damaged
/// record in a store then closed by a crash or a kill), the operator's answer: the store rebuilt
/// from the nodes and the gateway started ([`rebuild_metadata`]). Any other outcome is `done`.
fn rebuild_if_refused(
    done: anyhow::Result<Vec<String>>,
    cluster: &mut Cluster,
    shared: &Shared,
) -> anyhow::Result<Vec<String>> {
    match done {
        Err(error) if DAMAGED_STORE_REFUSAL.iter().all(|said| format!("{error:#}").contains(said)) => {
            tracing::info!(%error, "lowtail up refused its damaged metadata store; rebuilding it");
            rebuild_metadata(cluster, shared)?;
            Ok(vec![REFUSED.to_string()])
        }
        done => done,
    }
}

/// The operator's answer to damaged metadata: the store rebuilt from the nodes. What a rebuild
/// cannot know (a delete since its snapshot) widens what each key may hold.
fn rebuild_metadata(cluster: &mut Cluster, shared: &Shared) -> anyhow::Result<()> {
    let report = cluster.rebuild_metadata()?;
    tracing::info!(%report, "metadata store rebuilt from the nodes");
    let snapshot = &report["snapshot"];
    let since_ms = snapshot["writes_since_ms"].as_u64().unwrap_or_else(|| {
        snapshot["taken_ms"].as_u64().map_or(0, |taken| taken.saturating_sub(DEFAULT_WRITE_DEADLINE_MS))
    });
    shared.model.lock().expect("model lock").rebuilt(since_ms);
    let mut report_of_seed = shared.report.lock().expect("report lock");
    *report_of_seed.faults.entry("rebuild the metadata store".into()).or_default() += 1;
    let unreadable = report["objects_unreadable"].as_array().map_or(0, Vec::len);
    drop(report_of_seed);
    if unreadable > 0 {
        shared.violation(format!("the rebuilt metadata store holds {unreadable} unreadable objects: {report}"));
    }
    Ok(())
}

/// The gateways' `data.write_deadline_ms` (a rebuild without the snapshot's own horizon goes back
/// this far).
const DEFAULT_WRITE_DEADLINE_MS: u64 = 1_200_000;

/// Polls every gateway's status (bounded by `timeout`) until `why_not` finds nothing missing,
/// adding to `blockers` how long each kind of reason ([`blocker_kind`]) held it up, in seconds.
/// With `unreadable_patience`, a reason naming unreadable stripes that lasts that long (at most
/// half the wait) ends the wait early ([`UNREADABLE_STOP`]), and so does the end of the wait while
/// that is the reason: the caller then asks which objects are lost, instead of a quiesce failing
/// on what the answers may have allowed.
fn wait_for_status(
    cluster: &Cluster,
    timeout: Duration,
    unreadable_patience: Option<Duration>,
    blockers: &mut BTreeMap<String, f64>,
    why_not: impl Fn(&[serde_json::Value]) -> Option<String>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let unreadable_patience = unreadable_patience.map(|patience| patience.min(timeout / 2));
    let mut last = String::from("no status yet");
    let mut polled = Instant::now();
    let mut unreadable_since: Option<Instant> = None;
    while Instant::now() < deadline {
        match cluster.statuses().into_iter().collect::<anyhow::Result<Vec<_>>>() {
            Ok(statuses) => match why_not(&statuses) {
                None => return Ok(()),
                Some(why) => last = why,
            },
            Err(error) => last = format!("{error:#}"),
        }
        let unreadable = last.contains(UNREADABLE_BLOCKER);
        let since = *unreadable_since.get_or_insert_with(Instant::now);
        if !unreadable {
            unreadable_since = None;
        } else if unreadable_patience.is_some_and(|patience| since.elapsed() >= patience) {
            anyhow::bail!("{UNREADABLE_STOP}: {last}");
        }
        std::thread::sleep(Duration::from_millis(500));
        *blockers.entry(blocker_kind(&last)).or_default() += polled.elapsed().as_secs_f64();
        polled = Instant::now();
    }
    Err(gave_up(&last, timeout, unreadable_patience.is_some()))
}

/// The error of a wait of `timeout` that ended on `last`: [`UNREADABLE_STOP`] when it was
/// `patient` of unreadable stripes and they were the reason.
fn gave_up(last: &str, timeout: Duration, patient: bool) -> anyhow::Error {
    if patient && last.contains(UNREADABLE_BLOCKER) {
        anyhow::anyhow!("{UNREADABLE_STOP}: {last}")
    } else {
        anyhow::anyhow!("after {timeout:?}: {last}")
    }
}

/// A reason's kind: its words before any `:` or `;`, each run of digits as `N` (`node 3 has not
/// finished a scrub pass…` and `node 5 …` are one kind).
fn blocker_kind(reason: &str) -> String {
    let head = reason.split([':', ';']).next().unwrap_or(reason).trim();
    let mut kind = String::with_capacity(head.len());
    for c in head.chars() {
        if c.is_ascii_digit() {
            if !kind.ends_with('N') {
                kind.push('N');
            }
        } else {
            kind.push(c);
        }
    }
    kind
}

/// Why the gateways' `statuses` are not of a whole cluster yet (`None` when they are): at every
/// gateway every node Up and no packed stripe unsealed; at the holder of the repair lease (the
/// one with a census) a scrub pass by every node since `scrubbed_since_ms`, no corrupt unit and
/// no stripe short.
fn whole(statuses: &[serde_json::Value], scrubbed_since_ms: u64) -> Option<String> {
    for (index, status) in statuses.iter().enumerate() {
        let at = if statuses.len() > 1 { format!(" (gateway {index})") } else { String::new() };
        let Some(nodes) = status["nodes"].as_array() else { return Some(format!("no nodes in the status{at}")) };
        if let Some(node) = nodes.iter().find(|n| n["state"] != "Up") {
            return Some(format!("node {} is {}{at}", node["id"], node["state"]));
        }
        if status["packed"]["unsealed_stripes"].as_u64().unwrap_or(0) > 0 || status["packed"]["busy"] == true {
            return Some(format!("packed stripes waiting to be sealed{at}"));
        }
    }
    let Some(holder) = statuses.iter().find(|status| !status["repair"]["census"].is_null()) else {
        return Some("no complete census yet".into());
    };
    repaired(holder, scrubbed_since_ms)
}

/// Why the repair lease holder's `status` shows work left (`None` when it shows none).
fn repaired(status: &serde_json::Value, scrubbed_since_ms: u64) -> Option<String> {
    let nodes = status["nodes"].as_array()?;
    let repair = &status["repair"];
    let scrub = repair["scrub"].as_array().cloned().unwrap_or_default();
    if let Some(node) = scrub.iter().find(|s| !s["unanswered"].is_null()) {
        return Some(format!("node {} gives no stats: {}", node["node"], node["unanswered"]));
    }
    if scrub.len() < nodes.len() {
        return Some(format!("{} of {} nodes reported their scrub", scrub.len(), nodes.len()));
    }
    if let Some(node) = scrub.iter().find(|s| s["last_pass_completed_ms"].as_u64().unwrap_or(0) < scrubbed_since_ms) {
        return Some(format!("node {} has not finished a scrub pass since the epoch ended", node["node"]));
    }
    if let Some(node) = scrub.iter().find(|s| s["corrupt_now"].as_u64().unwrap_or(0) > 0) {
        return Some(format!("node {} lists corrupt units", node["node"]));
    }
    let census = &repair["census"];
    if census["complete"] != true {
        return Some("no complete census yet".into());
    }
    if census["counted_at_ms"].as_u64().unwrap_or(0) < scrubbed_since_ms {
        return Some("no census since the epoch ended".into());
    }
    if census["stripes_under_redundant"].as_u64() != Some(0) {
        return Some(format!("census: {census}; blocked: {}", repair["blocked"]));
    }
    None
}

/// Kills `faulty_nodes` nodes at random and reads every key: a whole cluster loses nothing.
async fn lose_more_and_check(
    schedule: &Schedule,
    timeout: Duration,
    cluster: &Arc<Mutex<Cluster>>,
    shared: &Arc<Shared>,
    client: &aws_sdk_s3::Client,
) {
    let victims = pick_nodes(&mut rng(schedule.seed), schedule.settings.nodes, schedule.settings.faulty_nodes);
    {
        let mut cluster = cluster.lock().expect("cluster lock");
        victims.iter().for_each(|&node| cluster.kill_node(node));
    }
    tracing::info!(?victims, "nodes killed for the last check");
    *shared.report.lock().expect("report lock").faults.entry("kill node (last check)".into()).or_default() +=
        victims.len() as u64;
    // Until membership has marked them Down, a read that needs them is answered 503 (retry: the
    // data may be there), not data loss; the check is of a cluster that knows what it lost. A
    // failed read fails fast (the unit stream's connection is refused at once), so this waits.
    let waited = {
        let (cluster, victims) = (Arc::clone(cluster), victims.clone());
        tokio::task::spawn_blocking(move || wait_until_down(&cluster.lock().expect("cluster lock"), &victims, timeout))
            .await
    };
    match waited {
        Ok(Ok(())) => {}
        Ok(Err(why)) => shared.violation(format!("last check: {why:#}")),
        Err(error) => shared.violation(format!("last check: waiting for membership panicked: {error}")),
    }
    check_every_key(client, shared).await;
}

/// Waits (bounded) until every gateway's status shows every node of `victims` Down.
fn wait_until_down(cluster: &Cluster, victims: &[u32], timeout: Duration) -> anyhow::Result<()> {
    let mut blockers = BTreeMap::new();
    wait_for_status(cluster, timeout, None, &mut blockers, |statuses| {
        statuses.iter().find_map(|status| not_down(status, victims))
    })
    .map_err(|why| why.context("membership did not mark the killed nodes Down"))
}

/// Which of `victims` `status` does not show Down yet, in words (`None`: all are).
fn not_down(status: &serde_json::Value, victims: &[u32]) -> Option<String> {
    let Some(nodes) = status["nodes"].as_array() else { return Some("no nodes in the status".into()) };
    let up: Vec<u64> = nodes
        .iter()
        .filter(|node| node["state"] != "Down")
        .filter_map(|node| node["id"].as_u64())
        .filter(|id| victims.iter().any(|&victim| u64::from(victim) == *id))
        .collect();
    (!up.is_empty() || nodes.is_empty()).then(|| format!("killed nodes {up:?} not yet Down"))
}

fn unix_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::{UNREADABLE_STOP, blocker_kind, gave_up};
    use std::time::Duration;

    #[test]
    fn a_wait_that_ends_on_unreadable_stripes_goes_on_to_judge_losses_when_patient() {
        let unreadable = r#"census: {}; blocked: [{"cause":"too_few_readable","stripes":1}]"#;
        let patient = gave_up(unreadable, Duration::from_secs(120), true).to_string();
        assert!(patient.starts_with(UNREADABLE_STOP), "{patient}");
        let impatient = gave_up(unreadable, Duration::from_secs(120), false).to_string();
        assert!(impatient.starts_with("after 120s"), "{impatient}");
        let other = gave_up("node 3 is \"Down\"", Duration::from_secs(120), true).to_string();
        assert!(other.starts_with("after 120s"), "{other}");
    }

    #[test]
    fn reasons_of_one_kind_are_counted_together() {
        let scrub = "node 3 has not finished a scrub pass since the epoch ended";
        assert_eq!(blocker_kind(scrub), "node N has not finished a scrub pass since the epoch ended");
        assert_eq!(blocker_kind(scrub), blocker_kind("node 12 has not finished a scrub pass since the epoch ended"));
        assert_eq!(blocker_kind("census: {\"stripes_under_redundant\":4}; blocked: []"), "census");
        assert_eq!(blocker_kind("after 5s: connection refused"), "after Ns");
    }
}
