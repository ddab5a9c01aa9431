//! The stores `lowtail bench s3` measures: a lowtail cluster (a fresh one, or a running one by its
//! `cluster.json`) or any S3 endpoint, and the server processes each one's CPU time is read from.
//!
//! Owns: the description of a target and its checks, starting a fresh cluster as a child
//! `lowtail up` (so that its gateway's CPU time is not mixed with the client's) and stopping it,
//! reading a manifest's pids, resolving process names to pids, the process the scenarios fault
//! (its victim) and waiting until a lowtail cluster counts every node Up again.
//! Must not: send S3 requests (the phases do), charge one process to two targets or to the client,
//! or signal a process it did not start, but its victim (which the scenarios signal).

use crate::host_cpu::{GroupCpu, is_readable, pids_named};
use crate::s3_adversity::Wipe;
use crate::s3_client::S3Endpoint;
use anyhow::{Context, bail, ensure};
use launcher::gateway_admin::GatewayAdmin;
use launcher::{Lifetime, Manifest, Supervised};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// The name of lowtail's target when not told otherwise.
pub const LOWTAIL_TARGET_NAME: &str = "lowtail";
/// Longest a fresh cluster may take to write its manifest (9 nodes, a debug build, 2 busy cores).
const FRESH_START_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest a fresh cluster gets to stop its gateway and nodes before it is killed.
const FRESH_STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the start of a fresh cluster is checked.
const FRESH_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Longest a lowtail cluster may take to count every node Up again after a scenario.
const NODES_UP_TIMEOUT: Duration = Duration::from_secs(120);
/// Objects the `hot` scenario locates (one admin call each) to find those on its hot node.
const HOT_LOCATED: usize = 512;
/// Longest a rebuild may take before the benchmark gives up on it.
const REBUILD_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How often a rebuild's progress is asked.
const REBUILD_POLL_INTERVAL: Duration = Duration::from_millis(250);
/// CPU time a target's server processes may use, all together, and still count as quiet: 5 % of
/// one core (idle, lowtail's 10 processes and MinIO's 9 use about 1 %; a rebuild or heal, tens).
const QUIET_CPU_MS_PER_S: f64 = 50.0;
/// The window over which a target's CPU time is judged quiet.
const QUIET_WINDOW: Duration = Duration::from_secs(1);
/// Quiet windows in a row that make a target quiet: a store healing in bursts (MinIO retrying a
/// drive's heal) passes one quiet second between two.
const QUIET_WINDOWS_IN_A_ROW: usize = 3;
/// Longest the benchmark waits for a target to fall quiet before going on regardless.
const QUIET_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// The storage node a lowtail target's scenarios fault when none is named.
pub const DEFAULT_VICTIM_NODE: u32 = 0;

/// The process of a target its scenarios fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VictimSpec {
    /// A lowtail cluster's storage node, by id.
    Node(u32),
    /// A server process of an S3 endpoint, by pid.
    Pid(u32),
}

/// Where a target's store is.
#[derive(Clone, Debug)]
pub enum TargetSource {
    /// A fresh 9-node rs-6-3 lowtail cluster, started for the run (`lowtail up` in a temporary
    /// directory) and stopped after; the path is the `lowtail` executable.
    Fresh(PathBuf),
    /// A running lowtail cluster, by the `cluster.json` that `lowtail up` wrote.
    Manifest(PathBuf),
    /// Any S3 endpoint.
    Endpoint(S3Endpoint),
}

/// One store to measure.
#[derive(Clone, Debug)]
pub struct TargetSpec {
    /// Its name in the rows (`lowtail`, `minio`).
    pub name: String,
    /// Where it is.
    pub source: TargetSource,
    /// Its server processes on this host (endpoints only; a lowtail cluster's come from its manifest).
    pub server_pids: Vec<u32>,
    /// Names (`/proc/PID/comm`) of further server processes, resolved to pids at the start.
    pub server_process_names: Vec<String>,
    /// The process the scenarios fault (a lowtail cluster's default: node [`DEFAULT_VICTIM_NODE`]).
    pub victim: Option<VictimSpec>,
    /// The victim's data directory, which `rebuild` empties (endpoints only: a lowtail node's comes
    /// from the manifest).
    pub victim_data_dir: Option<PathBuf>,
}

impl TargetSpec {
    /// A lowtail cluster under its usual name.
    pub fn lowtail(source: TargetSource) -> TargetSpec {
        TargetSpec {
            name: LOWTAIL_TARGET_NAME.to_string(),
            source,
            server_pids: Vec::new(),
            server_process_names: Vec::new(),
            victim: None,
            victim_data_dir: None,
        }
    }

    /// Refuses what cannot be measured, naming the target.
    pub fn validate(&self) -> anyhow::Result<()> {
        let name = &self.name;
        ensure!(!name.trim().is_empty(), "a target's name must not be empty");
        let Some(endpoint) = self.endpoint() else {
            ensure!(
                self.server_pids.is_empty() && self.server_process_names.is_empty(),
                "{name}: server pids go with an S3 endpoint; a lowtail cluster's processes come from its manifest"
            );
            ensure!(
                !matches!(self.victim, Some(VictimSpec::Pid(_))),
                "{name}: a lowtail cluster's victim is a node (by id), not a pid"
            );
            ensure!(
                self.victim_data_dir.is_none(),
                "{name}: a lowtail node's data directory comes from the cluster's manifest"
            );
            return Ok(());
        };
        ensure!(
            !matches!(self.victim, Some(VictimSpec::Node(_))),
            "{name}: an S3 endpoint's victim is a server process (by pid), not a lowtail node"
        );
        ensure!(
            endpoint.url.starts_with("http://"),
            "{name}: endpoint {} is not an http:// URL (the benchmark client speaks plain HTTP, without TLS)",
            endpoint.url
        );
        ensure!(
            !endpoint.access_key.is_empty() && !endpoint.secret_key.is_empty(),
            "{name}: empty access or secret key"
        );
        ensure!(!endpoint.region.is_empty(), "{name}: empty region");
        ensure!(!self.server_pids.contains(&0), "{name}: 0 is not a process id");
        ensure!(self.server_process_names.iter().all(|n| !n.is_empty()), "{name}: empty process name");
        Ok(())
    }

    /// Whether it is an S3 endpoint rather than a lowtail cluster.
    pub fn is_endpoint(&self) -> bool {
        self.endpoint().is_some()
    }

    fn endpoint(&self) -> Option<&S3Endpoint> {
        match &self.source {
            TargetSource::Endpoint(endpoint) => Some(endpoint),
            TargetSource::Fresh(_) | TargetSource::Manifest(_) => None,
        }
    }
}

/// A target ready to measure.
#[derive(Debug)]
pub struct Target {
    /// Its name in the rows.
    pub name: String,
    /// Where and as whom to send requests.
    pub endpoint: S3Endpoint,
    /// What it is, for the legend.
    pub description: String,
    /// The server processes its CPU time is read from (empty: not measured).
    pub server_pids: Vec<u32>,
    /// Why its CPU time is or is not measured, for the legend.
    pub cpu_note: String,
    /// The gateway's pid, whose resident memory is sampled (lowtail on this host only).
    pub gateway_pid: Option<u32>,
    /// The process the scenarios fault, when they need one.
    pub victim_pid: Option<u32>,
    /// The victim, in words, for the legend.
    pub victim_note: String,
    /// What `rebuild` empties: the victim's data directory.
    pub victim_wipe: Option<Wipe>,
    /// Data units per stripe of a lowtail cluster's code (k): a rebuilt byte is decoded from k.
    pub data_units: Option<usize>,
    /// How the `hot` scenario ordered the objects, for the legend (empty without it).
    pub hot_note: String,
    /// A lowtail cluster's node data directories, as (id, directory).
    node_dirs: Vec<(u32, PathBuf)>,
    /// A lowtail cluster's node the `hot` scenario's most popular objects share, and its gateway's
    /// admin client (which locates objects).
    hot: Option<(u32, GatewayAdmin)>,
    /// A lowtail gateway's admin address (`http://host:port`), asked whether every node is Up.
    admin_base: Option<String>,
    /// A lowtail cluster's nodes on this host, as (id, pid).
    node_pids: Vec<(u32, u32)>,
    /// Processes started again in place of killed victims (the newest is the victim now).
    restarted: Vec<Child>,
    fresh: Option<FreshCluster>,
}

impl Target {
    /// Stops the cluster started for it, if any, with the processes started again in it. Processes
    /// started again in a cluster or store not started for the run stay: they took the place of
    /// the ones the run killed.
    pub async fn stop(mut self) {
        if let Some(fresh) = self.fresh.take() {
            fresh.up.stop(FRESH_STOP_TIMEOUT).await;
            for child in &mut self.restarted {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    /// The victim was started again as `child`: its pid is the victim's and a server process's
    /// from now on.
    pub fn replace_victim(&mut self, child: Child) {
        let new_pid = child.id();
        if let Some(old_pid) = self.victim_pid.replace(new_pid) {
            for pid in self.server_pids.iter_mut().filter(|pid| **pid == old_pid) {
                *pid = new_pid;
            }
        }
        self.restarted.push(child);
    }

    /// Waits until a lowtail cluster's gateway counts every node Up (at once for other stores,
    /// whose victim listening again is all the benchmark can see).
    pub async fn wait_ready(&self) -> anyhow::Result<()> {
        let Some(base) = self.admin_base.clone() else { return Ok(()) };
        let deadline = Instant::now() + NODES_UP_TIMEOUT;
        loop {
            let base = base.clone();
            let down = tokio::task::spawn_blocking(move || nodes_not_up(&base)).await??;
            if down.is_empty() {
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "{}: nodes {} not Up {} s after the scenario",
                self.name,
                down.join(", "),
                NODES_UP_TIMEOUT.as_secs()
            );
            tokio::time::sleep(FRESH_POLL_INTERVAL).await;
        }
    }
}

/// How a wait for a target's processes to fall quiet ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settled {
    /// How long it waited.
    pub waited: Duration,
    /// Whether a window found them quiet (false: [`QUIET_TIMEOUT`] passed first).
    pub quiet: bool,
}

impl Target {
    /// Waits until the target's server processes use less than [`QUIET_CPU_MS_PER_S`] over
    /// [`QUIET_WINDOWS_IN_A_ROW`] [`QUIET_WINDOW`]s in a row, at most [`QUIET_TIMEOUT`]; `None` when their CPU time is not measured
    /// (no pids here, or a process gone), since nothing then says when they are quiet.
    pub async fn wait_quiet(&self) -> Option<Settled> {
        wait_quiet(&self.server_pids, QUIET_TIMEOUT).await
    }
}

/// Waits until `pids` together use less than [`QUIET_CPU_MS_PER_S`] over
/// [`QUIET_WINDOWS_IN_A_ROW`] [`QUIET_WINDOW`]s in a row, at most about `timeout`.
async fn wait_quiet(pids: &[u32], timeout: Duration) -> Option<Settled> {
    if pids.is_empty() {
        return None;
    }
    let started = Instant::now();
    let mut quiet_windows = 0;
    loop {
        let before = GroupCpu::read(pids);
        tokio::time::sleep(QUIET_WINDOW).await;
        let used_ms = before.used_ms_until(&GroupCpu::read(pids))?;
        let quiet_now = used_ms / QUIET_WINDOW.as_secs_f64() < QUIET_CPU_MS_PER_S;
        quiet_windows = if quiet_now { quiet_windows + 1 } else { 0 };
        let quiet = quiet_windows >= QUIET_WINDOWS_IN_A_ROW;
        if quiet || started.elapsed() >= timeout {
            return Some(Settled { waited: started.elapsed(), quiet });
        }
    }
}

/// How far a lowtail cluster's repair is, from its gateway's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepairProgress {
    /// Bytes of units rebuilt since the gateway started.
    pub bytes_repaired: u64,
    /// Stripes short of n units at the last census.
    pub stripes_short: u64,
    /// When that census was taken (unix ms).
    pub counted_at_ms: u64,
}

impl Target {
    /// A lowtail cluster's repair progress (`None` for other stores, which do not say).
    pub async fn repair_progress(&self) -> anyhow::Result<Option<RepairProgress>> {
        let Some(base) = self.admin_base.clone() else { return Ok(None) };
        let status = tokio::task::spawn_blocking(move || launcher::admin::fetch_status(&base)).await??;
        let repair = &status["repair"];
        let census = &repair["census"];
        Ok(Some(RepairProgress {
            bytes_repaired: repair["bytes_repaired"].as_u64().unwrap_or(0),
            stripes_short: census["stripes_under_redundant"].as_u64().unwrap_or(u64::MAX),
            counted_at_ms: census["counted_at_ms"].as_u64().unwrap_or(0),
        }))
    }

    /// Waits until a census taken after `after_ms` (unix ms) finds every stripe whole; the
    /// progress then (`None` for other stores). Bounded by [`REBUILD_TIMEOUT`].
    pub async fn wait_whole(&self, after_ms: u64) -> anyhow::Result<Option<RepairProgress>> {
        let deadline = Instant::now() + REBUILD_TIMEOUT;
        loop {
            let Some(progress) = self.repair_progress().await? else { return Ok(None) };
            if progress.counted_at_ms > after_ms && progress.stripes_short == 0 {
                return Ok(Some(progress));
            }
            ensure!(
                Instant::now() < deadline,
                "{}: {} stripes still short of n units {} s after the rebuild began",
                self.name,
                progress.stripes_short,
                REBUILD_TIMEOUT.as_secs()
            );
            tokio::time::sleep(REBUILD_POLL_INTERVAL).await;
        }
    }
}

/// The nodes the gateway at `base` does not count Up, as `id (state)`.
fn nodes_not_up(base: &str) -> anyhow::Result<Vec<String>> {
    let status = launcher::admin::fetch_status(base)?;
    let nodes = status["nodes"].as_array().with_context(|| format!("{base}/admin/status lists no nodes"))?;
    Ok(nodes
        .iter()
        .filter(|node| node["state"] != "Up")
        .map(|node| format!("{} ({})", node["id"], node["state"].as_str().unwrap_or("?")))
        .collect())
}

/// A `lowtail up` started for the run, and the directory it runs in.
#[derive(Debug)]
struct FreshCluster {
    up: Supervised,
    _dir: tempfile::TempDir,
}

/// Gets `spec` ready: starts its cluster when fresh, reads its manifest, resolves its server
/// processes and, when `needs_victim`, the process its scenarios fault. `taken_pids` are the
/// processes of targets already started, which it must not share.
pub async fn start(spec: &TargetSpec, taken_pids: &[u32], needs_victim: bool) -> anyhow::Result<Target> {
    let mut target = start_without_victim(spec, taken_pids).await?;
    if needs_victim {
        let resolved = resolve_victim(spec, &target);
        match resolved {
            Ok((pid, note, wipe)) => {
                (target.victim_pid, target.victim_note, target.victim_wipe) = (Some(pid), note, wipe)
            }
            Err(error) => {
                target.stop().await;
                return Err(error);
            }
        }
    }
    Ok(target)
}

/// The victim's pid and its description; refused when it is not a server process of the target
/// running on this host.
fn resolve_victim(spec: &TargetSpec, target: &Target) -> anyhow::Result<(u32, String, Option<Wipe>)> {
    let is_lowtail = spec.endpoint().is_none();
    let victim = match spec.victim {
        Some(victim) => victim,
        None if is_lowtail => VictimSpec::Node(DEFAULT_VICTIM_NODE),
        None => bail!("its scenarios need a server process to fault: name one by pid"),
    };
    match victim {
        VictimSpec::Node(id) => {
            let pid = target.node_pids.iter().find(|(node, _)| *node == id).map(|(_, pid)| *pid);
            let pid = pid.with_context(|| format!("the cluster has no node {id} running on this host"))?;
            let dir = target.node_dirs.iter().find(|(node, _)| *node == id).map(|(_, dir)| dir.clone());
            // Emptied but for the configuration its command line names: a new disk, same node.
            let wipe = dir.map(|dir| Wipe { dir, keep: vec!["node.toml".into()] });
            Ok((pid, format!("storage node {id} (pid {pid})"), wipe))
        }
        VictimSpec::Pid(pid) => {
            ensure!(is_readable(pid), "no process {pid} runs on this host");
            ensure!(
                target.server_pids.is_empty() || target.server_pids.contains(&pid),
                "process {pid} is not one of its server processes ({})",
                join_pids(&target.server_pids)
            );
            Ok((pid, format!("server process {pid}"), target.victim_wipe.clone()))
        }
    }
}

async fn start_without_victim(spec: &TargetSpec, taken_pids: &[u32]) -> anyhow::Result<Target> {
    match &spec.source {
        TargetSource::Fresh(binary) => {
            let (fresh, manifest) = start_fresh(binary).await?;
            let description = "a fresh local lowtail cluster (9 nodes, rs-6-3, started for this run)";
            let mut target = lowtail_target(spec, &manifest, description);
            target.fresh = Some(fresh);
            Ok(target)
        }
        TargetSource::Manifest(path) => {
            let manifest =
                Manifest::read(path).with_context(|| format!("cannot read the cluster manifest {}", path.display()))?;
            Ok(lowtail_target(spec, &manifest, "the running lowtail cluster"))
        }
        TargetSource::Endpoint(endpoint) => {
            let server_pids = endpoint_pids(spec, taken_pids)?;
            let cpu_note = match server_pids.len() {
                0 => "not measured (no server pids given)".to_string(),
                count => format!("{count} process(es), pid(s) {}", join_pids(&server_pids)),
            };
            Ok(Target {
                name: spec.name.clone(),
                endpoint: endpoint.clone(),
                description: "the S3 endpoint".to_string(),
                server_pids,
                cpu_note,
                gateway_pid: None,
                victim_pid: None,
                victim_note: String::new(),
                victim_wipe: spec.victim_data_dir.clone().map(|dir| Wipe { dir, keep: Vec::new() }),
                data_units: None,
                node_dirs: Vec::new(),
                hot: None,
                hot_note: String::new(),
                admin_base: None,
                restarted: Vec::new(),
                node_pids: Vec::new(),
                fresh: None,
            })
        }
    }
}

fn lowtail_target(spec: &TargetSpec, manifest: &Manifest, description: &str) -> Target {
    let here = processes_here(manifest);
    let server_pids: Vec<u32> = here
        .iter()
        .flat_map(|(gateway, nodes)| std::iter::once(*gateway).chain(nodes.iter().map(|&(_, pid)| pid)))
        .collect();
    let cpu_note = if server_pids.is_empty() {
        "not measured (the manifest's processes do not run on this host)".to_string()
    } else {
        format!("the gateway and {} nodes ({} processes)", manifest.nodes.len(), server_pids.len())
    };
    Target {
        name: spec.name.clone(),
        endpoint: S3Endpoint::from_manifest(manifest),
        description: description.to_string(),
        // Resident memory is sampled only where CPU time is read: the pid is this host's.
        gateway_pid: here.as_ref().map(|(gateway, _)| *gateway),
        node_pids: here.map(|(_, nodes)| nodes).unwrap_or_default(),
        server_pids,
        cpu_note,
        victim_pid: None,
        victim_note: String::new(),
        victim_wipe: None,
        data_units: manifest.code.parse::<codec::CodeSpec>().ok().map(|code| code.data_units()),
        node_dirs: manifest.nodes.iter().map(|node| (node.id, node.data_dir.clone())).collect(),
        hot: hot_of(spec, manifest),
        hot_note: String::new(),
        admin_base: launcher::admin::gateway_http(manifest),
        restarted: Vec::new(),
        fresh: None,
    }
}

/// The node the `hot` scenario concentrates on (the victim's, by default node
/// [`DEFAULT_VICTIM_NODE`]) and the gateway's admin client, when the cluster's secret is readable.
fn hot_of(spec: &TargetSpec, manifest: &Manifest) -> Option<(u32, GatewayAdmin)> {
    let node = match spec.victim {
        Some(VictimSpec::Node(id)) => id,
        _ => DEFAULT_VICTIM_NODE,
    };
    let base = launcher::admin::gateway_http(manifest)?;
    let secret = launcher::admin::cluster_secret_from_dir(&manifest.dir).ok()?;
    Some((node, GatewayAdmin { base, secret }))
}

impl Target {
    /// `keys` (index, key) reordered for the `hot` scenario's Zipf draw, the most popular first: for
    /// a lowtail cluster the objects with a data unit on its hot node first (of the first
    /// [`HOT_LOCATED`] located), in their order, then the rest; for other stores as given (MinIO
    /// spreads every object over every drive of its set). The note says which node is hot.
    pub async fn hot_order(&self, keys: Vec<(u64, String)>, bucket: &str) -> anyhow::Result<(Vec<u64>, String)> {
        let Some((node, admin)) = self.hot.clone() else {
            return Ok((keys.into_iter().map(|(index, _)| index).collect(), "as written".into()));
        };
        let bucket = bucket.to_string();
        let keys_in_order: Vec<u64> = keys.iter().map(|(index, _)| *index).collect();
        let located = tokio::task::spawn_blocking(move || {
            keys.iter()
                .enumerate()
                .map(|(at, (index, key))| match at < HOT_LOCATED {
                    true => admin.locate(&bucket, key).map(|nodes| (*index, nodes.contains(&node))),
                    false => Ok((*index, false)),
                })
                .collect::<anyhow::Result<Vec<_>>>()
        })
        .await?;
        let located = match located {
            Ok(located) => located,
            // An older lowtail cannot say where an object is: its objects go as written, and the
            // note says so.
            Err(error) if error.downcast_ref::<launcher::gateway_admin::NoLocateEndpoint>().is_some() => {
                let note = format!("as written (its gateway cannot locate objects: {error})");
                return Ok((keys_in_order, note));
            }
            Err(error) => return Err(error),
        };
        let hot_count = located.iter().filter(|(_, hot)| *hot).count();
        let (hot, cold): (Vec<_>, Vec<_>) = located.into_iter().partition(|(_, hot)| *hot);
        let order = hot.into_iter().chain(cold).map(|(index, _)| index).collect();
        Ok((order, format!("{hot_count} objects with a data unit on node {node} first")))
    }
}

/// The gateway's pid and every node's (id, pid), when all of them run on this host: the gateway
/// as the manifest's `lowtail up` process, each node as the one process running `lowtail node`
/// on its config (so a node restarted by hand, whose pid the manifest does not know, is found).
/// `None` otherwise: a manifest from another host names pids that here belong to unrelated
/// processes, and a cluster missing a process would be undercounted.
fn processes_here(manifest: &Manifest) -> Option<(u32, Vec<(u32, u32)>)> {
    let gateway = manifest.gateway.as_ref()?.pid;
    let is_up = is_readable(gateway)
        && launcher::processes::command_line(gateway).is_some_and(|args| args.iter().any(|a| a == b"up"));
    if !is_up || manifest.nodes.is_empty() {
        return None;
    }
    let mut nodes = Vec::with_capacity(manifest.nodes.len());
    for node in &manifest.nodes {
        match launcher::processes::running_nodes(&[node.data_dir.join("node.toml")])[..] {
            [pid] => nodes.push((node.id, pid)),
            _ => return None,
        }
    }
    Some((gateway, nodes))
}

/// The explicit pids of an endpoint and those of its process names, neither this process nor
/// another target's.
fn endpoint_pids(spec: &TargetSpec, taken_pids: &[u32]) -> anyhow::Result<Vec<u32>> {
    // The caller's context names the target.
    let own = std::process::id();
    let mut pids = Vec::new();
    for &pid in &spec.server_pids {
        ensure!(is_readable(pid), "no process {pid} runs on this host");
        ensure!(pid != own, "process {pid} is this benchmark's own client");
        ensure!(!taken_pids.contains(&pid), "process {pid} is already another target's");
        pids.push(pid);
    }
    for process_name in &spec.server_process_names {
        let named: Vec<u32> =
            pids_named(process_name).into_iter().filter(|pid| *pid != own && !taken_pids.contains(pid)).collect();
        if named.is_empty() {
            bail!("no process named {process_name} runs on this host (besides this one and other targets')");
        }
        pids.extend(named);
    }
    pids.sort_unstable();
    pids.dedup();
    Ok(pids)
}

/// Pids as `1, 2, 3`.
pub fn join_pids(pids: &[u32]) -> String {
    pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

/// Starts `binary up` on a fresh temporary directory and waits for its manifest.
async fn start_fresh(binary: &Path) -> anyhow::Result<(FreshCluster, Manifest)> {
    let dir = tempfile::tempdir().context("cannot create a temporary directory for the cluster")?;
    let cluster_dir = dir.path().join("cluster");
    let mut command = std::process::Command::new(binary);
    command.arg("up").arg("--dir").arg(&cluster_dir);
    command.args(["--nodes", "9", "--code", "rs-6-3", "--listen", "127.0.0.1:0"]);
    // Tied to this process: a benchmark that dies takes its gateway with it.
    let mut up = Supervised::spawn(command, "lowtail up", &dir.path().join("up.log"), Lifetime::WithParent)?;
    let manifest = match wait_for_manifest(&cluster_dir.join("cluster.json"), &mut up).await {
        Ok(manifest) => manifest,
        Err(error) => {
            up.stop(FRESH_STOP_TIMEOUT).await;
            return Err(error);
        }
    };
    Ok((FreshCluster { up, _dir: dir }, manifest))
}

/// Waits until the manifest at `path` names `up` as its gateway (written once the cluster serves).
async fn wait_for_manifest(path: &Path, up: &mut Supervised) -> anyhow::Result<Manifest> {
    let deadline = Instant::now() + FRESH_START_TIMEOUT;
    loop {
        if !up.is_running() {
            return Err(up.exited_error("while the benchmark's cluster started"));
        }
        if let Some(manifest) = Manifest::read_served_by(path, up.pid()) {
            return Ok(manifest);
        }
        ensure!(
            Instant::now() < deadline,
            "the benchmark's cluster did not start within {} s; the end of {}:\n{}",
            FRESH_START_TIMEOUT.as_secs(),
            up.log().display(),
            up.log_tail(launcher::child::LOG_TAIL_LINES)
        );
        tokio::time::sleep(FRESH_POLL_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(url: &str) -> TargetSource {
        TargetSource::Endpoint(S3Endpoint {
            url: url.into(),
            region: "us-east-1".into(),
            access_key: "k".into(),
            secret_key: "s".into(),
        })
    }

    fn peer(url: &str) -> TargetSpec {
        TargetSpec { name: "peer".into(), ..TargetSpec::lowtail(endpoint(url)) }
    }

    #[tokio::test]
    async fn a_busy_process_is_not_quiet_and_a_sleeping_one_is() {
        let mut sleeping = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let mut busy = std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
        let quiet = wait_quiet(&[sleeping.id()], Duration::from_secs(5)).await.unwrap();
        let loud = wait_quiet(&[sleeping.id(), busy.id()], Duration::from_secs(2)).await.unwrap();
        for child in [&mut sleeping, &mut busy] {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        assert!(quiet.quiet && quiet.waited < Duration::from_secs(5), "{quiet:?}");
        assert!(!loud.quiet && loud.waited >= Duration::from_secs(2), "{loud:?}");
        assert!(wait_quiet(&[], Duration::from_secs(1)).await.is_none(), "no processes: nothing to judge");
    }

    #[test]
    fn targets_refuse_what_cannot_be_measured() {
        assert!(peer("http://127.0.0.1:9900").validate().is_ok());
        let error = peer("https://s3.example.com").validate().unwrap_err().to_string();
        assert!(error.contains("plain HTTP"), "{error}");
        let lowtail_with_pid =
            TargetSpec { server_pids: vec![7], ..TargetSpec::lowtail(TargetSource::Manifest("c.json".into())) };
        let error = lowtail_with_pid.validate().unwrap_err().to_string();
        assert!(error.contains("manifest"), "{error}");
        let zero = TargetSpec { server_pids: vec![0], ..peer("http://h") };
        assert!(zero.validate().is_err());
        let unnamed = TargetSpec { name: " ".into(), ..peer("http://h") };
        assert!(unnamed.validate().is_err());
    }

    #[test]
    fn endpoint_pids_refuse_missing_own_and_taken_processes() {
        let own = std::process::id();
        let with_pids = |pids: Vec<u32>| TargetSpec { server_pids: pids, ..peer("http://h") };
        assert!(endpoint_pids(&with_pids(vec![u32::MAX]), &[]).unwrap_err().to_string().contains("no process"));
        assert!(endpoint_pids(&with_pids(vec![own]), &[]).unwrap_err().to_string().contains("own client"));
        let parent = std::os::unix::process::parent_id();
        assert!(endpoint_pids(&with_pids(vec![parent]), &[parent]).unwrap_err().to_string().contains("another"));
        assert_eq!(endpoint_pids(&with_pids(vec![parent, parent]), &[]).unwrap(), [parent]);
        // This process's own name matches only this process, which is the client's: refused.
        let exe = std::env::current_exe().unwrap();
        let own_name = exe.file_name().unwrap().to_str().unwrap().to_string();
        let by_name = TargetSpec { server_process_names: vec![own_name], ..peer("http://h") };
        assert!(endpoint_pids(&by_name, &[]).unwrap_err().to_string().contains("no process named"));
    }

    #[test]
    fn a_manifest_of_processes_not_on_this_host_measures_nothing() {
        let manifest = Manifest {
            endpoint: "http://127.0.0.1:1".into(),
            region: "us-east-1".into(),
            access_key: "k".into(),
            secret_key: "s".into(),
            code: "rs-6-3".into(),
            dir: "/nowhere".into(),
            gateway: Some(launcher::GatewayEntry {
                pid: std::process::id(),
                endpoint: "http://127.0.0.1:1".into(),
                metrics: "http://127.0.0.1:2".into(),
            }),
            nodes: Vec::new(),
        };
        // This test process is no `lowtail up`.
        let target = lowtail_target(&TargetSpec::lowtail(TargetSource::Manifest("c".into())), &manifest, "x");
        assert!(target.server_pids.is_empty() && target.gateway_pid.is_none(), "{target:?}");
        assert!(target.cpu_note.contains("not measured"), "{}", target.cpu_note);
    }
}
