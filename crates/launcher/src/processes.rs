//! Storage nodes as child processes: each runs `lowtail node` with its own config file, data
//! directory and log file, gets the cluster secret through its environment (never on the command
//! line, where `ps` would show it), and is stopped with SIGTERM, then SIGKILL if it will not go.
//!
//! Must not: restart nodes that die. A node killed on purpose (a failure test, an operator) stays down
//! until the next `lowtail up`, as a real failure would; the gateway's membership notices.

use crate::state::{ClusterDir, NodeSlot};
use anyhow::{Context, bail};
use node::{NodeClient, NodeConfig};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Stops node processes a previous `lowtail up` on the same directory left running (it was killed
/// before it could stop them): two processes on one data directory would corrupt it. A pid counts as
/// such a node only while its command line is `lowtail node --config <this directory's node.toml>`,
/// so a pid reused by an unrelated process is left alone.
pub fn stop_leftover_nodes(dir: &ClusterDir, previous: &crate::manifest::Manifest) {
    for node in &previous.nodes {
        let config_file = dir.node_dir(node.id).join("node.toml");
        let Some(args) = command_line(node.pid) else { continue };
        let is_our_node = args.iter().any(|a| a == b"node")
            && args.iter().any(|a| a.as_slice() == config_file.as_os_str().as_encoded_bytes());
        if !is_our_node {
            continue;
        }
        tracing::warn!(node = node.id, pid = node.pid, "stopping a node left running by an earlier lowtail up");
        // SAFETY: kill(2) with a pid whose command line we just checked, and valid signals.
        unsafe { libc::kill(node.pid as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + NODE_STOP_TIMEOUT;
        while Path::new(&format!("/proc/{}", node.pid)).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if Path::new(&format!("/proc/{}", node.pid)).exists() {
            // SAFETY: as above.
            unsafe { libc::kill(node.pid as libc::pid_t, libc::SIGKILL) };
        }
    }
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
    child: Child,
}

/// The node's address file, as `node` writes it.
#[derive(serde::Deserialize)]
struct BoundAddresses {
    rpc_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
}

impl NodeProcess {
    /// Writes the node's config file and starts `binary node --config FILE` (binary is the `lowtail`
    /// executable). Returns once the process exists; [`NodeProcess::wait_ready`] waits for it to serve.
    pub fn spawn(
        binary: &Path,
        dir: &ClusterDir,
        slot: &NodeSlot,
        secret: &str,
        configure: impl FnOnce(&mut NodeConfig),
    ) -> anyhow::Result<NodeProcess> {
        let data_dir = dir.node_dir(slot.id);
        let log = dir.node_log(slot.id);
        std::fs::create_dir_all(&data_dir).with_context(|| format!("cannot create {}", data_dir.display()))?;
        std::fs::create_dir_all(log.parent().expect("logs live in a directory"))?;
        let address_file = data_dir.join("address.json");
        // A file left by an earlier run would name ports the new process does not hold.
        match std::fs::remove_file(&address_file) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error).with_context(|| format!("cannot remove {}", address_file.display())),
        }
        let loopback_any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut config = NodeConfig {
            node_id: slot.id,
            listen_addr: loopback_any_port,
            metrics_addr: Some(loopback_any_port),
            data_dir: data_dir.clone(),
            address_file: Some(address_file.clone()),
            ..NodeConfig::default()
        };
        configure(&mut config);
        // The secret travels in the environment; the file on disk holds everything else.
        let config_file = data_dir.join("node.toml");
        std::fs::write(&config_file, toml::to_string_pretty(&config)?)
            .with_context(|| format!("cannot write {}", config_file.display()))?;
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        let child = Command::new(binary)
            .arg("node")
            .arg("--config")
            .arg(&config_file)
            .env("LOWTAIL_CLUSTER_SECRET", secret)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("cannot start {} node", binary.display()))?;
        Ok(NodeProcess { slot: slot.clone(), data_dir, log, address_file, addresses: None, child })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
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
            if let Some(status) = self.child.try_wait()? {
                bail!("node {} exited with {status} while starting; see {}", self.slot.id, self.log.display());
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
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, then SIGKILL after [`NODE_STOP_TIMEOUT`]. A node that already exited is fine.
    pub async fn stop(mut self) {
        if !self.is_running() {
            return;
        }
        // SAFETY: kill(2) on our own child's pid with a valid signal.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + NODE_STOP_TIMEOUT;
        while Instant::now() < deadline {
            if !self.is_running() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracing::warn!(node = self.slot.id, "node did not stop after SIGTERM; killing it");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
