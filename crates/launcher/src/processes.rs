//! Storage nodes and gateways as child processes: a node runs `lowtail node` with its own config
//! file, data directory and log file, and gets the cluster secret through its environment (never on
//! the command line, where `ps` would show it); a gateway runs `lowtail gateway` with its config file
//! (mode 0600: it holds the secrets). Both are [`Supervised`]: stopped with SIGTERM, then SIGKILL if
//! they will not go, and killed if dropped while running.
//!
//! Must not: restart nodes that die. A node killed on purpose (a failure test, an operator) stays down
//! until the next `lowtail up`, as a real failure would; the gateway's membership notices.

use crate::child::{Lifetime, Supervised};
use crate::state::{ClusterDir, ClusterState, NodeSlot};
use anyhow::{Context, bail};
use node::{NodeClient, NodeConfig};
use std::net::SocketAddr;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Stops node processes a previous `lowtail up` on the same directory left running (it was killed
/// before it could stop them, or a node was restarted by hand): two processes on one data
/// directory would corrupt it. A process counts as such a node only while its command line is
/// `lowtail node --config <node.toml of one of this directory's nodes `node_ids`>` (a relative
/// path taken from the process's working directory), so an unrelated process is left alone. The
/// nodes come from the directory's state, not from the last manifest: a run killed before it
/// wrote its manifest, or a manifest removed, must not hide them. All get SIGTERM at once, then
/// SIGKILL if they are still there after [`NODE_STOP_TIMEOUT`]; returns once they are gone (or
/// [`NODE_KILL_TIMEOUT`] after the SIGKILL).
pub fn stop_leftover_nodes(dir: &ClusterDir, node_ids: &[u32]) {
    let configs: Vec<PathBuf> = node_ids.iter().map(|&id| dir.node_dir(id).join("node.toml")).collect();
    let leftovers = running_nodes(&configs);
    if leftovers.is_empty() {
        return;
    }
    tracing::warn!(nodes = leftovers.len(), "stopping nodes left running by an earlier lowtail up");
    eprintln!(
        "stopping {} storage nodes left running by an earlier lowtail up (all at once; up to {} s) ...",
        leftovers.len(),
        NODE_STOP_TIMEOUT.as_secs()
    );
    let started = Instant::now();
    for &pid in &leftovers {
        // SAFETY: kill(2) with a pid whose command line we just checked, and a valid signal.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    }
    let deadline = started + NODE_STOP_TIMEOUT;
    while leftovers.iter().any(|&pid| is_alive(pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stubborn: Vec<u32> = leftovers.iter().copied().filter(|&pid| is_alive(pid)).collect();
    for &pid in &stubborn {
        // SAFETY: as above.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
    // A killed node holds its directory's lock until it is gone: a node started on the directory
    // before then refuses to start ("in use by another lowtail node process").
    let killed_by = Instant::now() + NODE_KILL_TIMEOUT;
    while stubborn.iter().any(|&pid| is_alive(pid)) && Instant::now() < killed_by {
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "stopped {} leftover nodes in {:.1} s ({} of them killed after not stopping in time)",
        leftovers.len(),
        started.elapsed().as_secs_f64(),
        stubborn.len()
    );
}

/// The pids of the live processes running `lowtail node --config <one of configs>` (relative paths
/// compared as absolute ones, a process's own taken from its working directory).
pub fn running_nodes(configs: &[PathBuf]) -> Vec<u32> {
    let configs: Vec<PathBuf> = configs.iter().filter_map(|config| std::path::absolute(config).ok()).collect();
    running_pids()
        .into_iter()
        .filter(|&pid| is_alive(pid) && node_config(pid).is_some_and(|config| configs.contains(&config)))
        .collect()
}

/// The absolute `--config` path of process `pid` when it runs `lowtail node --config <path>`.
fn node_config(pid: u32) -> Option<PathBuf> {
    let args = command_line(pid)?;
    if !args.iter().any(|a| a == b"node") {
        return None;
    }
    let at = args.iter().position(|a| a == b"--config")?;
    let config = PathBuf::from(std::ffi::OsString::from_vec(args.get(at + 1)?.clone()));
    if config.is_absolute() {
        return Some(config);
    }
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
    Some(cwd.join(config))
}

/// Whether process `pid` exists and has not exited (a zombie waiting for a parent that may never
/// reap it, as under a container's first process, counts as gone).
pub fn is_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // The state follows the command name in parentheses, which may itself hold spaces.
    stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()).is_some_and(|state| state != "Z")
}

/// The pids of every process (the numeric entries of `/proc`).
fn running_pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok()).collect()
}

/// The arguments of a running process, or `None` when there is no such process.
pub fn command_line(pid: u32) -> Option<Vec<Vec<u8>>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(raw.split(|&b| b == 0).filter(|a| !a.is_empty()).map(<[u8]>::to_vec).collect())
}

/// How long a node gets to answer its first probe.
pub const NODE_START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a node gets to stop after SIGTERM before it is killed.
pub const NODE_STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a node SIGKILLed as a leftover gets to be gone.
pub const NODE_KILL_TIMEOUT: Duration = Duration::from_secs(5);

/// A running node process.
#[derive(Debug)]
pub struct NodeProcess {
    /// The node's slot (id, rack, ports).
    pub slot: NodeSlot,
    /// Its data directory.
    pub data_dir: PathBuf,
    /// Its log file.
    pub log: PathBuf,
    /// Where the node reports the addresses it bound.
    address_file: PathBuf,
    /// gRPC and metrics addresses, known once [`NodeProcess::wait_ready`] returned.
    addresses: Option<(SocketAddr, Option<SocketAddr>)>,
    process: Supervised,
}

/// The node's address file, as `node` writes it.
#[derive(serde::Deserialize)]
struct BoundAddresses {
    rpc_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
}

impl NodeProcess {
    /// Writes the node's config file and starts `binary node --config FILE` (binary is the `lowtail`
    /// executable) at niceness `nice` ([`crate::child::set_niceness`]). Returns once the process
    /// exists; [`NodeProcess::wait_ready`] waits for it to serve.
    pub fn spawn(
        binary: &Path,
        dir: &ClusterDir,
        slot: &NodeSlot,
        secret: &str,
        lifetime: Lifetime,
        nice: i32,
        configure: impl FnOnce(&mut NodeConfig),
    ) -> anyhow::Result<NodeProcess> {
        let data_dir = dir.node_dir(slot.id);
        let log = dir.node_log(slot.id);
        let config_file = data_dir.join("node.toml");
        let mut command = Command::new(binary);
        command.arg("node").arg("--config").arg(&config_file).env("LOWTAIL_CLUSTER_SECRET", secret);
        // Before anything is written: a bad niceness changes nothing.
        crate::child::set_niceness(&mut command, nice)?;
        std::fs::create_dir_all(&data_dir).with_context(|| format!("cannot create {}", data_dir.display()))?;
        std::fs::create_dir_all(log.parent().expect("logs live in a directory"))?;
        let address_file = data_dir.join("address.json");
        remove_stale_address_file(&address_file)?;
        // Outside the ephemeral range: the node is restarted by hand on these (`pin_addresses`).
        let mut config = NodeConfig {
            node_id: slot.id,
            listen_addr: free_loopback_addr()?,
            metrics_addr: Some(free_loopback_addr()?),
            data_dir: data_dir.clone(),
            address_file: Some(address_file.clone()),
            ..NodeConfig::default()
        };
        configure(&mut config);
        // The secret travels in the environment; the file on disk holds everything else.
        std::fs::write(&config_file, toml::to_string_pretty(&config)?)
            .with_context(|| format!("cannot write {}", config_file.display()))?;
        let process = Supervised::spawn(command, &format!("node {}", slot.id), &log, lifetime)?;
        Ok(NodeProcess { slot: slot.clone(), data_dir, log, address_file, addresses: None, process })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The node's RPC address (known once [`NodeProcess::wait_ready`] returned).
    pub fn rpc_addr(&self) -> Option<SocketAddr> {
        self.addresses.map(|(rpc, _)| rpc)
    }

    /// The node's metrics address (known once [`NodeProcess::wait_ready`] returned).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.addresses.and_then(|(_, metrics)| metrics)
    }

    /// Waits until the node has reported its addresses and answers a probe; fails if the process
    /// exits first or the timeout passes, pointing at the node's log.
    pub async fn wait_ready(&mut self, secret: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + NODE_START_TIMEOUT;
        loop {
            if !self.process.is_running() {
                return Err(self.process.exited_error("while starting"));
            }
            if self.addresses.is_none()
                && let Ok(text) = std::fs::read_to_string(&self.address_file)
            {
                let bound: BoundAddresses = serde_json::from_str(&text)
                    .with_context(|| format!("node {} wrote a bad {}", self.slot.id, self.address_file.display()))?;
                self.addresses = Some((bound.rpc_addr, bound.metrics_addr));
            }
            if let Some((rpc_addr, _)) = self.addresses
                && let Ok(client) = NodeClient::connect(&rpc_addr.to_string(), secret).await
                && client.probe().await.is_ok()
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("node {} did not answer within {NODE_START_TIMEOUT:?}; see {}", self.slot.id, self.log.display());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// The node's entry in `cluster.json`.
    pub fn manifest_entry(&self) -> crate::manifest::NodeEntry {
        crate::manifest::NodeEntry {
            id: self.slot.id,
            pid: self.pid(),
            rack: self.slot.rack.clone(),
            rpc_addr: self.rpc_addr().map(|a| a.to_string()).unwrap_or_default(),
            metrics: self.metrics_addr().map(|a| format!("http://{a}/metrics")).unwrap_or_default(),
            data_dir: self.data_dir.clone(),
            log: self.log.clone(),
        }
    }

    /// Writes the addresses the node bound into its config file (once [`NodeProcess::wait_ready`]
    /// returned), so that the node restarted by hand (`lowtail node --config FILE`, the cluster
    /// secret in `LOWTAIL_CLUSTER_SECRET`) listens where the gateway already knows it and rejoins
    /// as soon as membership probes it. The next `lowtail up` picks fresh ports again.
    pub fn pin_addresses(&self) -> anyhow::Result<()> {
        let Some((rpc_addr, metrics_addr)) = self.addresses else { bail!("node {} is not ready", self.slot.id) };
        let config_file = self.data_dir.join("node.toml");
        let mut config = NodeConfig::from_toml_file(&config_file)?;
        config.listen_addr = rpc_addr;
        config.metrics_addr = metrics_addr.or(config.metrics_addr);
        std::fs::write(&config_file, toml::to_string_pretty(&config)?)
            .with_context(|| format!("cannot write {}", config_file.display()))
    }

    /// SIGTERM, then SIGKILL after [`NODE_STOP_TIMEOUT`]. A node that already exited is fine.
    pub async fn stop(self) {
        self.process.stop(NODE_STOP_TIMEOUT).await;
    }
}

/// How long a gateway gets to listen after it started.
pub const GATEWAY_START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a gateway gets to drain and stop after SIGTERM before it is killed.
pub const GATEWAY_STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `lowtail gateway` process.
#[derive(Debug)]
pub struct GatewayProcess {
    /// Its name (`gateway_id` in its config).
    pub name: String,
    /// Its config file.
    pub config_file: PathBuf,
    /// Where the gateway reports the addresses it bound.
    address_file: PathBuf,
    /// S3 and HTTP (`/metrics`, `/admin/...`) addresses, known once [`GatewayProcess::wait_ready`]
    /// returned.
    addresses: Option<(SocketAddr, SocketAddr)>,
    /// Whether this build's gateway config has a `[controller]` section (the gateway controller of
    /// issue 5); without it the controller settings given to [`GatewayProcess::spawn`] were dropped.
    pub has_controller: bool,
    process: Supervised,
}

/// Removes a child's address file before it starts: a file left by an earlier run would name ports
/// the new process does not hold.
fn remove_stale_address_file(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error).with_context(|| format!("cannot remove {}", path.display())),
    }
}

/// The gateway's address file, as `gateway` writes it.
#[derive(serde::Deserialize)]
struct GatewayAddresses {
    s3_addr: SocketAddr,
    http_addr: Option<SocketAddr>,
}

/// A free loopback port outside the kernel's ephemeral range ([`crate::ports`]), for a child
/// restarted on the same address. Another process could bind it before the child does; the child
/// then exits with a clear error and the caller may try again.
pub fn free_loopback_addr() -> anyhow::Result<SocketAddr> {
    crate::ports::stable_loopback_addr()
}

impl GatewayProcess {
    /// Writes `config` to `dir/gateway.toml` (mode 0600), listening on loopback ports the gateway
    /// picks itself and reports in `dir/address.json` (no port is picked here, so none can be taken
    /// by another process before the gateway binds it), and starts `binary gateway --config FILE`, its log in `dir/gateway.log`. `controller` holds
    /// fields of the config's `[controller]` table (policy, frontend_id, ...), merged over the
    /// defaults when this build's gateway has a controller section and ignored otherwise
    /// ([`GatewayProcess::has_controller`] says which). Returns once the process exists;
    /// [`GatewayProcess::wait_ready`] waits for it to listen.
    pub fn spawn(
        binary: &Path,
        dir: &Path,
        config: &gateway::process::GatewayConfig,
        controller: &toml::Table,
        lifetime: Lifetime,
    ) -> anyhow::Result<GatewayProcess> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut config = config.clone();
        let loopback_any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        config.s3_listen = loopback_any_port;
        config.http_listen = Some(loopback_any_port);
        let address_file = dir.join("address.json");
        remove_stale_address_file(&address_file)?;
        config.address_file = Some(address_file.clone());
        let name = config.data.gateway_id().to_owned();
        let toml::Value::Table(mut table) =
            toml::Value::try_from(&config).context("the gateway config does not serialise")?
        else {
            bail!("the gateway config does not serialise to a table");
        };
        let has_controller = match table.get_mut("controller") {
            Some(toml::Value::Table(section)) => {
                section.extend(controller.iter().map(|(key, value)| (key.clone(), value.clone())));
                true
            }
            _ => false,
        };
        let config_file = dir.join("gateway.toml");
        crate::state::write_private(&config_file, &toml::to_string_pretty(&table)?)?;
        let mut command = Command::new(binary);
        command.arg("gateway").arg("--config").arg(&config_file);
        let process = Supervised::spawn(command, &format!("gateway {name}"), &dir.join("gateway.log"), lifetime)?;
        Ok(GatewayProcess { name, config_file, address_file, addresses: None, has_controller, process })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The S3 endpoint URL. Panics before [`GatewayProcess::wait_ready`] returned.
    pub fn s3_url(&self) -> String {
        format!("http://{}", self.addresses.expect("the gateway is ready").0)
    }

    /// The HTTP endpoint's base URL (`/metrics`, `/admin/...` below it). Panics before
    /// [`GatewayProcess::wait_ready`] returned.
    pub fn http_url(&self) -> String {
        format!("http://{}", self.addresses.expect("the gateway is ready").1)
    }

    /// Waits until the gateway has reported its addresses (it binds them once its data path runs)
    /// and both accept connections; fails, with the end of its log, if the process exits first or
    /// the timeout passes.
    pub async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + GATEWAY_START_TIMEOUT;
        loop {
            if !self.process.is_running() {
                return Err(self.process.exited_error("while starting"));
            }
            if self.addresses.is_none()
                && let Ok(text) = std::fs::read_to_string(&self.address_file)
            {
                let bound: GatewayAddresses = serde_json::from_str(&text)
                    .with_context(|| format!("{} wrote a bad {}", self.name, self.address_file.display()))?;
                let http_addr = bound.http_addr.context("the gateway reported no HTTP address")?;
                self.addresses = Some((bound.s3_addr, http_addr));
            }
            if let Some((s3_addr, http_addr)) = self.addresses
                && tokio::net::TcpStream::connect(s3_addr).await.is_ok()
                && tokio::net::TcpStream::connect(http_addr).await.is_ok()
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "{} did not listen within {GATEWAY_START_TIMEOUT:?}; see {}",
                    self.process.name(),
                    self.process.log().display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// An error saying the gateway ended, with the end of its log.
    pub fn exited_error(&mut self, what: &str) -> anyhow::Error {
        self.process.exited_error(what)
    }

    /// SIGTERM (the gateway drains S3 requests and seals its open stripes), then SIGKILL after
    /// [`GATEWAY_STOP_TIMEOUT`].
    pub async fn stop(self) {
        self.process.stop(GATEWAY_STOP_TIMEOUT).await;
    }
}

/// Starts every node of `state` (stopping any an earlier run left) and waits until each answers.
pub async fn start_nodes(
    binary: &Path,
    dir: &ClusterDir,
    state: &ClusterState,
    (service_model, scrub): (&node::ServiceModel, &node::ScrubConfig),
) -> anyhow::Result<Vec<NodeProcess>> {
    let node_ids: Vec<u32> = state.nodes.iter().map(|slot| slot.id).collect();
    stop_leftover_nodes(dir, &node_ids);
    let mut nodes = Vec::with_capacity(state.nodes.len());
    let runtime_threads = shared_runtime_threads(state.nodes.len());
    for slot in &state.nodes {
        let (model, scrub) = (service_model.clone(), scrub.clone());
        let node = NodeProcess::spawn(binary, dir, slot, &state.cluster_secret, Lifetime::Detached, 0, |node_config| {
            node_config.service_model = model;
            node_config.scrub = scrub;
            node_config.runtime_threads = Some(runtime_threads);
        });
        match node {
            Ok(node) => nodes.push(node),
            Err(error) => {
                stop_all(nodes).await;
                return Err(error);
            }
        }
    }
    for node in &mut nodes {
        if let Err(error) = node.wait_ready(&state.cluster_secret).await.and_then(|()| node.pin_addresses()) {
            stop_all(nodes).await;
            return Err(error);
        }
    }
    Ok(nodes)
}

/// Stops `nodes`, one after another.
pub async fn stop_all(nodes: Vec<NodeProcess>) {
    for node in nodes {
        node.stop().await;
    }
}

/// Runtime threads of each of `nodes` nodes sharing this machine: its CPUs divided among them,
/// rounded up (at least 1).
pub fn shared_runtime_threads(nodes: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    cpus.div_ceil(nodes.max(1)).max(1)
}
