//! The real cluster a swarm runs against: `lowtail up` as a child process on a directory of its
//! own, and the faults done to it from outside, as an operator's bad day would: SIGKILL of a node
//! or of `lowtail up` (the gateway), a node started again by hand on its data directory, a byte
//! flipped in a unit file, and the cluster's own account of itself (`GET /admin/status`).
//!
//! Owns the processes it starts and stops them all when dropped. Must not look inside the
//! metadata store or decide what is correct (the checker does).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use launcher::Manifest;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::schedule::UnitKind;

/// How long `lowtail up` gets to write its manifest.
const UP_START_TIMEOUT: Duration = Duration::from_secs(120);
/// Bytes of a unit file's header (see the node's store).
const UNIT_HEADER_BYTES: u64 = 40;
/// Unit indexes at or above this are packed replicas.
const REPLICA_UNIT_BASE: u16 = 0x8000;

/// The log filter of a swarm's cluster (`RUST_LOG` syntax, e.g. `info,gateway=debug` to replay a
/// seed with the gateway's decisions in `up.log`); default `warn`.
pub const CLUSTER_LOG_ENV: &str = "LOWTAIL_SWARM_CLUSTER_LOG";

/// What the cluster is started with.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// The `lowtail` executable.
    pub lowtail: PathBuf,
    /// The cluster's directory (created).
    pub dir: PathBuf,
    /// Storage nodes.
    pub nodes: u32,
    /// `up.toml` beside the directory: repair grace, scrub pace, and so on.
    pub up_toml: String,
}

/// A running (or, between a kill and a restart, stopped) `lowtail up` and what it started.
pub struct Cluster {
    settings: ClusterSettings,
    listen: String,
    up: Option<Child>,
    /// Nodes this driver restarted by hand (their pids, to stop at the end).
    restarted: Vec<Child>,
    manifest: Manifest,
    secret: String,
    data_units: u16,
}

impl Cluster {
    /// Starts `lowtail up` on a fresh directory and waits for it to serve.
    pub fn start(mut settings: ClusterSettings) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&settings.dir).with_context(|| format!("cannot create {}", settings.dir.display()))?;
        // Absolute, so a node's config path reads the same in every process's command line.
        settings.dir = settings.dir.canonicalize()?;
        std::fs::write(settings.dir.join("up.toml"), &settings.up_toml)?;
        let listen = free_loopback_address()?;
        let (up, manifest) = start_up(&settings, &listen)?;
        let secret = launcher::admin::cluster_secret_from_dir(&settings.dir.join("cluster"))?;
        let data_units = data_units_of(&manifest.code)?;
        Ok(Self { settings, listen, up: Some(up), restarted: Vec::new(), manifest, secret, data_units })
    }

    /// The S3 endpoint and credentials (the endpoint stays the same across gateway restarts).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Data units per stripe of the cluster's code.
    pub fn data_units(&self) -> u16 {
        self.data_units
    }

    /// Whether the gateway (`lowtail up`) is running.
    pub fn gateway_running(&mut self) -> bool {
        self.up.as_mut().is_some_and(|up| matches!(up.try_wait(), Ok(None)))
    }

    /// The pid of `lowtail up` (which runs the gateway), while it runs.
    pub fn gateway_pid(&self) -> Option<u32> {
        self.up.as_ref().map(Child::id)
    }

    /// Stops the whole cluster as Ctrl-C does and starts it again with every node.
    pub fn stop_gracefully_and_restart(&mut self) -> anyhow::Result<()> {
        self.stop();
        self.restart_gateway()
    }

    /// SIGKILLs `lowtail up` (its nodes run on, detached, as after a crash).
    pub fn kill_gateway(&mut self) {
        if let Some(mut up) = self.up.take() {
            let _ = up.kill();
            let _ = up.wait();
        }
    }

    /// Starts `lowtail up` again on the same directory (it stops the nodes left running and starts
    /// them all again) and waits for it to serve.
    pub fn restart_gateway(&mut self) -> anyhow::Result<()> {
        if self.gateway_running() {
            return Ok(());
        }
        self.reap_restarted();
        let (up, manifest) = start_up(&self.settings, &self.listen)?;
        self.up = Some(up);
        self.manifest = manifest;
        Ok(())
    }

    /// SIGKILLs node `id`, wherever it runs (started by `lowtail up` or restarted by hand).
    pub fn kill_node(&mut self, id: u32) {
        for pid in self.node_pids(id) {
            // SAFETY: kill(2) of a pid whose command line names this cluster's node `id`.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        self.reap_restarted();
    }

    /// Starts node `id` by hand on its data directory and config (which `lowtail up` pinned to the
    /// address the gateway knows), unless it runs already.
    pub fn restart_node(&mut self, id: u32) -> anyhow::Result<()> {
        if !self.node_pids(id).is_empty() {
            return Ok(());
        }
        let entry = self.manifest.nodes.iter().find(|n| n.id == id).context("no such node")?;
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

    /// The pids of every process running node `id` of this cluster (started by `lowtail up` or by
    /// hand: the same config file either way).
    fn node_pids(&self, id: u32) -> Vec<u32> {
        let Some(entry) = self.manifest.nodes.iter().find(|n| n.id == id) else { return Vec::new() };
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
        let entry = self.manifest.nodes.iter().find(|n| n.id == id).context("no such node")?;
        let mut files: Vec<PathBuf> = std::fs::read_dir(entry.data_dir.join("units"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|path| unit_kind(path, self.data_units) == Some(kind))
            .collect();
        if files.is_empty() {
            return Ok(None);
        }
        files.sort();
        let path = files.swap_remove((pick % files.len() as u64) as usize);
        let mut bytes = std::fs::read(&path)?;
        if bytes.len() as u64 <= UNIT_HEADER_BYTES {
            return Ok(None);
        }
        let at = UNIT_HEADER_BYTES + offset_pick % (bytes.len() as u64 - UNIT_HEADER_BYTES);
        bytes[at as usize] ^= 0x20;
        std::fs::write(&path, bytes)?;
        Ok(Some(path))
    }

    /// `GET /admin/status` of the gateway.
    pub fn status(&self) -> anyhow::Result<Value> {
        let base = launcher::admin::gateway_http_from_dir(&self.cluster_dir())?;
        launcher::admin::fetch_status(&base)
    }

    /// The gateway's admin endpoint, with the cluster secret.
    pub fn admin(&self) -> anyhow::Result<launcher::gateway_admin::GatewayAdmin> {
        let base = launcher::admin::gateway_http_from_dir(&self.cluster_dir())?;
        let secret = launcher::admin::cluster_secret_from_dir(&self.cluster_dir())?;
        Ok(launcher::gateway_admin::GatewayAdmin { base, secret })
    }

    fn cluster_dir(&self) -> PathBuf {
        self.settings.dir.join("cluster")
    }

    /// Stops everything: `lowtail up` with SIGINT (it stops its nodes), then the nodes restarted by
    /// hand.
    pub fn stop(&mut self) {
        if let Some(mut up) = self.up.take() {
            // SAFETY: kill(2) of our own child.
            unsafe { libc::kill(up.id() as libc::pid_t, libc::SIGINT) };
            let deadline = Instant::now() + Duration::from_secs(60);
            while matches!(up.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = up.kill();
            let _ = up.wait();
        }
        for id in 0..self.settings.nodes {
            self.kill_node(id);
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

/// A loopback address with a port free now, kept for every start of the gateway.
fn free_loopback_address() -> anyhow::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.to_string())
}

/// Starts `lowtail up` and waits until its manifest names this process.
fn start_up(settings: &ClusterSettings, listen: &str) -> anyhow::Result<(Child, Manifest)> {
    let dir = settings.dir.join("cluster");
    let log = std::fs::OpenOptions::new().create(true).append(true).open(settings.dir.join("up.log"))?;
    let mut up = Command::new(&settings.lowtail)
        .arg("up")
        .arg("--config")
        .arg(settings.dir.join("up.toml"))
        .arg("--nodes")
        .arg(settings.nodes.to_string())
        .arg("--listen")
        .arg(listen)
        .arg("--dir")
        .arg(&dir)
        // Warnings only, unless the operator replaying a seed asks for more.
        .env("RUST_LOG", std::env::var(CLUSTER_LOG_ENV).unwrap_or_else(|_| "warn".into()))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context("cannot start lowtail up")?;
    let deadline = Instant::now() + UP_START_TIMEOUT;
    loop {
        if let Ok(Some(status)) = up.try_wait() {
            bail!("lowtail up exited ({status}) while starting; see {}", settings.dir.join("up.log").display());
        }
        if let Some(manifest) = Manifest::read_served_by(&dir.join("cluster.json"), up.id()) {
            return Ok((up, manifest));
        }
        if Instant::now() > deadline {
            let _ = up.kill();
            bail!("lowtail up did not serve within {UP_START_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
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
}
