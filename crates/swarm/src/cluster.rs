//! The real cluster a swarm runs against, and the faults done to it from outside, as an operator's
//! bad day would: SIGKILL of a node or of a gateway, a node started again by hand on its data
//! directory, a node hung (SIGSTOP) and continued, its disk filled and freed, a unit file damaged,
//! latency, resets and partitions on the path to a node (through its [`NodeProxy`]), etcd stopped
//! and returned; and the cluster's own account of itself (`GET /admin/status` of each gateway).
//! The gateways and what they stand on are [`Gateways`]' (`lowtail up`, or etcd and two gateways).
//!
//! Owns the processes, mounts and proxies it starts, and stops and removes them all when dropped.
//! A fault it cannot do is refused with the reason, never skipped. Must not look inside the
//! metadata store or decide what is correct (the checker does).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use launcher::{ClusterDir, Manifest};
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::disk::NodeDisk;
use crate::gateways::{EtcdGateways, GatewaySettings, Gateways, UpGateway};
use crate::proxy::{Mode, NodeProxy};
use crate::schedule::{Damage, UnitKind};

pub use crate::gateways::CLUSTER_LOG_ENV;

/// Unit indexes at or above this are packed replicas.
const REPLICA_UNIT_BASE: u16 = 0x8000;

/// What the cluster is started with.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// The `lowtail` executable.
    pub lowtail: PathBuf,
    /// The cluster's directory (created).
    pub dir: PathBuf,
    /// Storage nodes.
    pub nodes: u32,
    /// `up.toml` beside the directory: repair grace, scrub pace, and so on (on etcd: the
    /// gateways' and nodes' sections).
    pub up_toml: String,
    /// Gateways on etcd (0: `lowtail up`, its embedded store and its one gateway).
    pub etcd_gateways: u32,
    /// A proxy in front of every node, where the gateway and the other nodes reach it (network
    /// faults).
    pub proxies: bool,
    /// Each node's data directory on a file system of its own of this size (full-disk faults; root
    /// only).
    pub node_disk_bytes: Option<u64>,
}

impl ClusterSettings {
    /// `lowtail up` of `nodes` nodes with `up_toml`, nothing in front of the nodes or under them.
    pub fn up(lowtail: PathBuf, dir: PathBuf, nodes: u32, up_toml: String) -> ClusterSettings {
        ClusterSettings { lowtail, dir, nodes, up_toml, etcd_gateways: 0, proxies: false, node_disk_bytes: None }
    }
}

/// A running cluster and what this driver did to it.
pub struct Cluster {
    settings: ClusterSettings,
    gateways: Gateways,
    /// Nodes this driver restarted by hand (their pids, to stop at the end).
    restarted: Vec<Child>,
    /// Node proxies by node id (empty without proxies).
    proxies: Vec<NodeProxy>,
    /// Node disks by node id (empty unless each node has its own).
    disks: Vec<NodeDisk>,
    /// Nodes stopped with SIGSTOP now.
    hung: BTreeSet<u32>,
    secret: String,
    data_units: u16,
    /// Runs the proxies and the etcd cluster's waits; dropped last.
    _runtime: tokio::runtime::Runtime,
}

impl Cluster {
    /// Starts a cluster on a fresh directory and waits for it to serve.
    pub fn start(mut settings: ClusterSettings) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&settings.dir).with_context(|| format!("cannot create {}", settings.dir.display()))?;
        // Absolute, so a node's config path reads the same in every process's command line.
        settings.dir = settings.dir.canonicalize()?;
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let node_dirs = ClusterDir::new(settings.dir.join("cluster"));
        let disks = match settings.node_disk_bytes {
            Some(bytes) => (0..settings.nodes)
                .map(|id| {
                    let image = settings.dir.join("disks").join(format!("node-{id}.img"));
                    NodeDisk::mount(&node_dirs.node_dir(id), &image, bytes)
                })
                .collect(),
            None => Ok(Vec::new()),
        }?;
        let proxies = if settings.proxies { start_proxies(&runtime, &node_dirs, settings.nodes)? } else { Vec::new() };
        let registered: Vec<SocketAddr> = proxies.iter().map(NodeProxy::address).collect();
        let gateway_settings = GatewaySettings {
            lowtail: settings.lowtail.clone(),
            dir: settings.dir.clone(),
            nodes: settings.nodes,
            registered: registered.clone(),
        };
        let gateways = if settings.etcd_gateways > 0 {
            let handle = runtime.handle();
            Gateways::Etcd(Box::new(EtcdGateways::start(
                &gateway_settings,
                &settings.up_toml,
                settings.etcd_gateways,
                handle,
            )?))
        } else {
            std::fs::write(settings.dir.join("up.toml"), up_toml_registering(&settings.up_toml, &registered))?;
            Gateways::Up(Box::new(UpGateway::start(gateway_settings)?))
        };
        let secret = gateways.secret()?;
        let data_units = data_units_of(&gateways.manifest().code)?;
        Ok(Self {
            settings,
            gateways,
            restarted: Vec::new(),
            proxies,
            disks,
            hung: BTreeSet::new(),
            secret,
            data_units,
            _runtime: runtime,
        })
    }

    /// The S3 endpoint (the first gateway's) and credentials, and the nodes.
    pub fn manifest(&self) -> &Manifest {
        self.gateways.manifest()
    }

    /// Each gateway's S3 endpoint URL (each the same across its restarts).
    pub fn endpoints(&self) -> Vec<String> {
        self.gateways.endpoints()
    }

    /// Data units per stripe of the cluster's code.
    pub fn data_units(&self) -> u16 {
        self.data_units
    }

    /// The pid of the first gateway (`lowtail up`'s on a single-gateway cluster), while it runs.
    pub fn gateway_pid(&self) -> Option<u32> {
        self.gateways.pid(0)
    }

    /// Stops the whole cluster as Ctrl-C does and starts it again with every node.
    pub fn stop_gracefully_and_restart(&mut self) -> anyhow::Result<()> {
        self.stop();
        self.restart_gateway(0).map(|_| ())
    }

    /// SIGKILLs gateway `index` (`lowtail up`'s nodes run on, detached, as after a crash).
    pub fn kill_gateway(&mut self, index: u32) {
        self.gateways.kill(index as usize);
    }

    /// Starts gateway `index` again and waits for it to serve; what that changed of other faults,
    /// in words. `lowtail up` stops the nodes left running and starts them all again, rewriting
    /// their configs: a hung node is continued and a full disk freed first (those faults end
    /// early). A gateway on a stopped etcd would exit at once: its restart waits for etcd's return.
    pub fn restart_gateway(&mut self, index: u32) -> anyhow::Result<Vec<String>> {
        let mut changed = Vec::new();
        if matches!(self.gateways, Gateways::Up(_)) && !self.gateways.running(0) {
            changed = self.undo_node_faults()?.into_iter().map(|what| format!("{what} ended early")).collect();
            self.reap_restarted();
        }
        changed.extend(self.gateways.restart(index as usize)?);
        Ok(changed)
    }

    /// SIGKILLs node `id`, wherever it runs (started by the launcher or restarted by hand).
    pub fn kill_node(&mut self, id: u32) {
        self.kill_node_pids(id);
    }

    /// SIGKILLs node `id`; the pids signalled.
    fn kill_node_pids(&mut self, id: u32) -> Vec<u32> {
        let pids = self.node_pids(id);
        for &pid in &pids {
            // SAFETY: kill(2) of a pid whose command line names this cluster's node `id`.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        self.hung.remove(&id);
        self.reap_restarted();
        pids
    }

    /// Waits (up to `timeout`) until every process of `pids` has exited; whether they all did. By
    /// process state, not command line: an exiting process loses its command line before it
    /// closes its files, so its directory's lock outlives what [`Cluster::node_pids`] sees.
    fn wait_gone(&mut self, pids: &[u32], timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            self.reap_restarted();
            if !pids.iter().any(|&pid| launcher::processes::is_alive(pid)) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts node `id` by hand on its data directory and config (pinned to the address it had),
    /// unless it runs already.
    pub fn restart_node(&mut self, id: u32) -> anyhow::Result<()> {
        if !self.node_pids(id).is_empty() {
            return Ok(());
        }
        let entry = self.manifest().nodes.iter().find(|n| n.id == id).context("no such node")?;
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&entry.log)?;
        let child = Command::new(&self.settings.lowtail)
            .arg("node")
            .arg("--config")
            .arg(entry.data_dir.join("node.toml"))
            .env("LOWTAIL_CLUSTER_SECRET", &self.secret)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start node {id}"))?;
        self.restarted.push(child);
        Ok(())
    }

    /// Stops node `id` (SIGKILL, waiting until it is gone), copies its data directory aside and starts
    /// it again: the copy is what [`Cluster::return_stale`] puts back.
    pub fn copy_aside(&mut self, id: u32) -> anyhow::Result<()> {
        self.stop_node_for_good(id)?;
        let data_dir = self.node_data_dir(id)?;
        copy_directory(&data_dir, &self.stale_copy(id))?;
        self.restart_node(id)
    }

    /// Stops node `id`, puts the copy [`Cluster::copy_aside`] took in place of its data directory
    /// (an older copy: a disk restored from an image) and starts it again.
    pub fn return_stale(&mut self, id: u32) -> anyhow::Result<()> {
        let copy = self.stale_copy(id);
        anyhow::ensure!(copy.exists(), "no copy of node {id}'s directory was taken");
        self.stop_node_for_good(id)?;
        let data_dir = self.node_data_dir(id)?;
        copy_directory(&copy, &data_dir)?;
        std::fs::remove_dir_all(&copy)?;
        self.restart_node(id)
    }

    /// Whether a copy of node `id`'s directory is aside (a stale return still owed).
    pub fn has_stale_copy(&self, id: u32) -> bool {
        self.stale_copy(id).exists()
    }

    fn stale_copy(&self, id: u32) -> PathBuf {
        self.settings.dir.join("stale-copies").join(format!("node-{id}"))
    }

    fn node_data_dir(&self, id: u32) -> anyhow::Result<PathBuf> {
        let entry = self.manifest().nodes.iter().find(|n| n.id == id).context("no such node")?;
        Ok(entry.data_dir.clone())
    }

    /// SIGKILLs node `id` (continuing it first if hung) and waits (at most 10 s) until no process
    /// serves its directory.
    fn stop_node_for_good(&mut self, id: u32) -> anyhow::Result<()> {
        self.continue_node(id);
        let pids = self.kill_node_pids(id);
        anyhow::ensure!(self.wait_gone(&pids, NODE_EXIT_TIMEOUT), "node {id} did not stop after SIGKILL");
        Ok(())
    }

    /// Damages one record of the embedded metadata store (`lowtail up` only): the cluster is
    /// stopped as Ctrl-C stops it (a store closed cleanly: one closed by a crash is checked page by
    /// page when it opens, and a damaged page then refuses the start, which is the other case),
    /// one hex digit of the `pick`-th object record's ETag in `meta.redb` changed, and the cluster
    /// started again. The record fails its checksum from then on; `lowtail admin meta rebuild`
    /// ([`Cluster::rebuild_metadata`]) undoes it.
    pub fn damage_metadata(&mut self, pick: u64) -> anyhow::Result<Vec<String>> {
        let file = self.meta_file()?;
        self.stop();
        let damaged = flip_an_etag_digit(&file, pick);
        let restarted = self.restart_gateway(0)?;
        damaged?;
        Ok(restarted)
    }

    /// Whether the gateways report damaged metadata records.
    pub fn metadata_damaged(&self) -> bool {
        self.statuses()
            .into_iter()
            .flatten()
            .any(|status| status["meta_damage"]["damaged_records"].as_u64().unwrap_or(0) > 0)
    }

    /// Stops the cluster, rebuilds its metadata store from the nodes (`lowtail admin meta rebuild
    /// --replace`) and starts it again; the rebuild's report.
    pub fn rebuild_metadata(&mut self) -> anyhow::Result<Value> {
        let file = self.meta_file()?;
        self.stop();
        let cluster_dir = file.parent().and_then(Path::parent).context("the store's directory")?.to_path_buf();
        let output = Command::new(&self.settings.lowtail)
            .args(["admin", "meta", "rebuild", "--replace", "--json", "--dir"])
            .arg(&cluster_dir)
            .output()?;
        anyhow::ensure!(output.status.success(), "rebuild failed: {}", String::from_utf8_lossy(&output.stderr));
        let report: Value = serde_json::from_slice(&output.stdout)?;
        self.restart_gateway(0)?;
        Ok(report)
    }

    /// The embedded store's file (refused on etcd).
    fn meta_file(&self) -> anyhow::Result<PathBuf> {
        anyhow::ensure!(self.settings.etcd_gateways == 0, "the cluster's metadata is in etcd, not a file");
        Ok(self.settings.dir.join("cluster").join("meta").join(meta::DATABASE_FILE_NAME))
    }

    /// SIGSTOPs node `id`: it keeps its connections and answers nothing. Refused when it is not
    /// running.
    pub fn hang_node(&mut self, id: u32) -> anyhow::Result<()> {
        anyhow::ensure!(self.signal_node(id, libc::SIGSTOP) > 0, "node {id} is not running");
        self.hung.insert(id);
        Ok(())
    }

    /// SIGCONTs node `id` (nothing when it was not hung).
    pub fn continue_node(&mut self, id: u32) {
        self.signal_node(id, libc::SIGCONT);
        self.hung.remove(&id);
    }

    /// Sends `signal` to every process of node `id`; how many.
    fn signal_node(&self, id: u32, signal: libc::c_int) -> usize {
        let pids = self.node_pids(id);
        for &pid in &pids {
            // SAFETY: kill(2) of a pid whose command line names this cluster's node `id`.
            unsafe { libc::kill(pid as libc::pid_t, signal) };
        }
        pids.len()
    }

    fn disk(&mut self, id: u32) -> anyhow::Result<&mut NodeDisk> {
        let reason = "the nodes' disks are not their own (the cluster was started without full-disk faults)";
        self.disks.get_mut(id as usize).context(reason)
    }

    /// Fills node `id`'s file system.
    pub fn fill_disk(&mut self, id: u32) -> anyhow::Result<()> {
        self.disk(id)?.fill()
    }

    /// Frees node `id`'s file system.
    pub fn free_disk(&mut self, id: u32) -> anyhow::Result<()> {
        self.disk(id)?.free()
    }

    fn proxy(&self, id: u32) -> anyhow::Result<&NodeProxy> {
        self.proxies
            .get(id as usize)
            .context("the nodes have no proxies (the cluster was started without network faults)")
    }

    /// What the proxy of node `id` does from now on.
    pub fn set_network(&self, id: u32, mode: Mode) -> anyhow::Result<()> {
        self.proxy(id)?.set(mode);
        Ok(())
    }

    /// Resets every open connection to node `id`.
    pub fn reset_connections(&self, id: u32) -> anyhow::Result<()> {
        self.proxy(id)?.reset_all();
        Ok(())
    }

    /// Stops etcd (SIGKILL when `kill`, else SIGSTOP); refused on `lowtail up`.
    pub fn stop_etcd(&mut self, kill: bool) -> anyhow::Result<()> {
        self.gateways.stop_etcd(kill)
    }

    /// Continues etcd, or starts it again on its data.
    pub fn return_etcd(&mut self) -> anyhow::Result<()> {
        self.gateways.return_etcd()
    }

    /// Continues every hung node and frees every full disk; what was still faulted, in words.
    fn undo_node_faults(&mut self) -> anyhow::Result<Vec<String>> {
        let mut undone: Vec<String> = Vec::new();
        for id in std::mem::take(&mut self.hung) {
            self.continue_node(id);
            undone.push(format!("hang of node {id}"));
        }
        for (id, disk) in self.disks.iter_mut().enumerate() {
            if disk.is_full() {
                disk.free()?;
                undone.push(format!("full disk of node {id}"));
            }
        }
        Ok(undone)
    }

    /// Undoes every fault that lasts (hangs, full disks, slow or cut networks, a stopped etcd) and
    /// starts every gateway and node that is down; what was still faulted, in words.
    pub fn undo_all_and_restart(&mut self) -> anyhow::Result<Vec<String>> {
        let mut undone = self.undo_node_faults()?;
        for (id, proxy) in self.proxies.iter().enumerate() {
            if proxy.mode() != (Mode::Pass { latency_ms: 0 }) {
                proxy.set(Mode::Pass { latency_ms: 0 });
                undone.push(format!("network of node {id}"));
            }
        }
        self.return_etcd()?;
        let owed: Vec<u32> = (0..self.settings.nodes).filter(|&id| self.has_stale_copy(id)).collect();
        for id in owed {
            self.return_stale(id)?;
            undone.push(format!("stale return of node {id}"));
        }
        self.reap_restarted();
        self.gateways.restart_all()?;
        for id in 0..self.settings.nodes {
            self.restart_node(id)?;
        }
        Ok(undone)
    }

    /// The pids of every process running node `id` of this cluster (started by the launcher or by
    /// hand: the same config file either way).
    fn node_pids(&self, id: u32) -> Vec<u32> {
        let Some(entry) = self.manifest().nodes.iter().find(|n| n.id == id) else { return Vec::new() };
        launcher::processes::running_nodes(&[entry.data_dir.join("node.toml")])
    }

    fn reap_restarted(&mut self) {
        self.restarted.retain_mut(|child| matches!(child.try_wait(), Ok(None)));
    }

    /// Flips one byte of a unit file of node `id` (the `pick`-th of its files of `kind`, at
    /// `offset_pick` modulo its length); the file flipped, or `None` when the node has none.
    pub fn corrupt_unit(
        &self,
        id: u32,
        kind: UnitKind,
        pick: u64,
        offset_pick: u64,
    ) -> anyhow::Result<Option<PathBuf>> {
        Ok(self.damage_unit(id, kind, Damage::Flip, [pick, offset_pick, 0])?.map(|(path, _)| path))
    }

    /// Damages a unit file of node `id`: the `pick`-th of its files of `kind` (`picks` = pick,
    /// offset pick, length pick; see [`crate::damage::damage_unit`]); the file and what was done,
    /// or `None` when the node has no such file (or nothing in the part to damage).
    pub fn damage_unit(
        &self,
        id: u32,
        kind: UnitKind,
        damage: Damage,
        [pick, offset_pick, length_pick]: [u64; 3],
    ) -> anyhow::Result<Option<(PathBuf, String)>> {
        let entry = self.manifest().nodes.iter().find(|n| n.id == id).context("no such node")?;
        let mut files: Vec<PathBuf> = std::fs::read_dir(entry.data_dir.join("units"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|path| unit_kind(path, self.data_units) == Some(kind))
            .collect();
        if files.is_empty() {
            return Ok(None);
        }
        files.sort();
        let path = files.swap_remove((pick % files.len() as u64) as usize);
        let done = crate::damage::damage_unit(&path, damage, offset_pick, length_pick)?;
        Ok(done.map(|what| (path, what)))
    }

    /// `GET /admin/status` of each gateway (an error for one that is not running or answers
    /// none).
    pub fn statuses(&self) -> Vec<anyhow::Result<Value>> {
        match self.gateways.admins() {
            Ok(admins) => admins
                .into_iter()
                .enumerate()
                .map(|(index, admin)| {
                    let admin = admin.with_context(|| format!("gateway {index} is not running"))?;
                    fetch_status(&admin.base)
                })
                .collect(),
            Err(error) => vec![Err(error)],
        }
    }

    /// `GET /admin/status` of the first gateway that answers.
    pub fn status(&self) -> anyhow::Result<Value> {
        let mut last = None;
        for status in self.statuses() {
            match status {
                Ok(status) => return Ok(status),
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no gateway")))
    }

    /// The admin endpoint of the first running gateway, with the cluster secret.
    pub fn admin(&self) -> anyhow::Result<launcher::gateway_admin::GatewayAdmin> {
        self.gateways.admins()?.into_iter().flatten().next().context("no gateway is running")
    }

    /// Stops every process: the gateways (`lowtail up` with SIGINT: it stops its nodes), then the
    /// nodes wherever they run. The mounts and proxies stay until the cluster is dropped.
    pub fn stop(&mut self) {
        for id in self.hung.clone() {
            self.continue_node(id);
        }
        self.gateways.stop();
        let pids: Vec<u32> = (0..self.settings.nodes).flat_map(|id| self.kill_node_pids(id)).collect();
        // A start right after must find every directory's lock free.
        if !self.wait_gone(&pids, NODE_EXIT_TIMEOUT) {
            tracing::warn!("nodes still exiting {} s after SIGKILL", NODE_EXIT_TIMEOUT.as_secs());
        }
        for mut child in self.restarted.drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How long a SIGKILLed node may take to exit (a loaded machine, a process tearing down gigabytes).
const NODE_EXIT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a gateway gets to answer its status (one waiting on a stopped etcd may never).
const STATUS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// `GET {base}/admin/status`, as JSON, within [`STATUS_TIMEOUT`].
fn fetch_status(base: &str) -> anyhow::Result<Value> {
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(STATUS_TIMEOUT)).build().into();
    let url = format!("{base}/admin/status");
    let body = agent.get(&url).call().with_context(|| url.clone())?.body_mut().read_to_string()?;
    serde_json::from_str(&body).with_context(|| format!("{url} did not answer JSON"))
}

/// A proxy per node, each forwarding to the address in the node's `address.json` of the moment.
fn start_proxies(runtime: &tokio::runtime::Runtime, dirs: &ClusterDir, nodes: u32) -> anyhow::Result<Vec<NodeProxy>> {
    (0..nodes)
        .map(|id| {
            let address_file = dirs.node_dir(id).join("address.json");
            let upstream = Arc::new(move || node_address(&address_file));
            let listen = SocketAddr::from(([127, 0, 0, 1], 0));
            runtime.block_on(NodeProxy::start(listen, upstream)).context("cannot start a node proxy")
        })
        .collect()
}

/// The RPC address a node reported in its address file.
fn node_address(address_file: &Path) -> Option<SocketAddr> {
    let text = std::fs::read_to_string(address_file).ok()?;
    let reported: Value = serde_json::from_str(&text).ok()?;
    reported["rpc_addr"].as_str()?.parse().ok()
}

/// `up_toml` with the nodes registered at `registered` (nothing added when empty); the key comes
/// first, before any table.
fn up_toml_registering(up_toml: &str, registered: &[SocketAddr]) -> String {
    if registered.is_empty() {
        return up_toml.to_string();
    }
    let addresses: Vec<String> = registered.iter().map(|a| format!("\"{a}\"")).collect();
    format!("# Each node behind the swarm's proxy.\nregistered_node_addresses = [{}]\n{up_toml}", addresses.join(", "))
}

/// What kind of unit a file holds, by its name `<stripe:016x>-<unit:04x>.unit`.
fn unit_kind(path: &Path, data_units: u16) -> Option<UnitKind> {
    let name = path.file_name()?.to_str()?.strip_suffix(".unit")?;
    let unit = u16::from_str_radix(name.split_once('-')?.1, 16).ok()?;
    Some(match unit {
        u if u >= REPLICA_UNIT_BASE => UnitKind::Replica,
        u if u < data_units => UnitKind::Data,
        _ => UnitKind::Parity,
    })
}

fn data_units_of(code: &str) -> anyhow::Result<u16> {
    // `rs-K-M` or `lrc-K-L-R`: K comes second.
    let k = code.split('-').nth(1).and_then(|k| k.parse().ok());
    k.with_context(|| format!("cannot read k from code {code:?}"))
}

/// A seeded generator for the driver's own random choices (which nodes to kill at the end).
pub fn rng(seed: u64) -> rand_chacha::ChaCha8Rng {
    rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5eed)
}

/// `count` distinct node ids of `nodes`, drawn with `rng`.
pub fn pick_nodes(rng: &mut rand_chacha::ChaCha8Rng, nodes: u32, count: u32) -> Vec<u32> {
    let mut all: Vec<u32> = (0..nodes).collect();
    let mut chosen = Vec::new();
    for _ in 0..count.min(nodes) {
        chosen.push(all.swap_remove(rng.random_range(0..all.len())));
    }
    chosen
}

/// Fails, saying why, when `settings` ask for what this machine cannot do.
pub fn check_possible(settings: &ClusterSettings) -> anyhow::Result<()> {
    if settings.node_disk_bytes.is_some()
        && let Some(why) = crate::disk::unavailable()
    {
        bail!(why);
    }
    if settings.etcd_gateways > 0 && launcher::find_etcd_binary().is_none() {
        bail!("etcd seeds need etcd (Debian: etcd-server; or LOWTAIL_ETCD_BIN): install it, or --without etcd");
    }
    Ok(())
}

/// Replaces `to` with a copy of `from` (a stopped node's data directory: its files and `units/`),
/// keeping `to` itself (it may be a mount point).
pub(crate) fn copy_directory(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(to)? {
        let path = entry?.path();
        if path.is_dir() { std::fs::remove_dir_all(&path)? } else { std::fs::remove_file(&path)? }
    }
    std::fs::create_dir_all(to.join("units"))?;
    for entry in std::fs::read_dir(from)?.chain(std::fs::read_dir(from.join("units"))?) {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            let relative = entry.path().strip_prefix(from)?.to_path_buf();
            std::fs::copy(entry.path(), to.join(relative))?;
        }
    }
    Ok(())
}

/// Changes one hex digit of the `pick`-th (modulo their number) object ETag stored in the metadata
/// file `file` (`"etag":"` followed by hex digits): the record's checksum fails from then on.
fn flip_an_etag_digit(file: &Path, pick: u64) -> anyhow::Result<()> {
    let mut bytes = std::fs::read(file)?;
    let needle = b"\"etag\":\"";
    let places: Vec<usize> =
        bytes.windows(needle.len()).enumerate().filter(|(_, window)| *window == needle).map(|(at, _)| at).collect();
    anyhow::ensure!(!places.is_empty(), "no object record in the metadata file yet");
    let at = places[(pick % places.len() as u64) as usize] + needle.len();
    // The same ETag wherever it is (the live page and older copies of it): the one that is read
    // changes whichever it is.
    let etag = bytes[at..(at + 32).min(bytes.len())].to_vec();
    let copies: Vec<usize> = bytes
        .windows(etag.len())
        .enumerate()
        .filter(|(_, window)| *window == etag.as_slice())
        .map(|(at, _)| at)
        .collect();
    for copy in copies {
        bytes[copy] = if bytes[copy] == b'0' { b'1' } else { b'0' };
    }
    std::fs::write(file, bytes)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_files_are_told_apart_by_index() {
        let kind = |name: &str| unit_kind(Path::new(name), 6);
        assert_eq!(kind("/u/0000000000000001-0000.unit"), Some(UnitKind::Data));
        assert_eq!(kind("/u/0000000000000001-0005.unit"), Some(UnitKind::Data));
        assert_eq!(kind("/u/0000000000000001-0006.unit"), Some(UnitKind::Parity));
        assert_eq!(kind("/u/0000000000000001-8003.unit"), Some(UnitKind::Replica));
        assert_eq!(kind("/u/.0000000000000001-0000.unit.1.2.tmp"), None);
        assert_eq!(data_units_of("rs-6-3").unwrap(), 6);
        assert_eq!(data_units_of("lrc-6-2-2").unwrap(), 6);
    }

    #[test]
    fn registered_addresses_come_before_any_table_and_parse() {
        let registered = ["127.0.0.1:7001".parse().unwrap(), "127.0.0.1:7002".parse().unwrap()];
        let text = up_toml_registering(crate::SWARM_UP_TOML, &registered);
        let config: launcher::UpConfig = toml::from_str(&text).unwrap();
        assert_eq!(config.registered_node_addresses, registered);
        assert_eq!(up_toml_registering("x = 1", &[]), "x = 1");
    }
}
