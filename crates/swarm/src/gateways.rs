//! What serves a swarm's S3 clients and what it stands on, in the two shapes a seed's cluster takes
//! ([`crate::Flavor`]): `lowtail up` as a child (the embedded metadata store and one gateway in
//! one process, which starts the nodes itself), or etcd with two `lowtail gateway` processes (the
//! nodes started here, registered in etcd), each gateway behind a front (a [`NodeProxy`] that
//! never faults) so its S3 address stays the same across its restarts.
//!
//! Owns these processes: gateway kills and restarts, etcd stops and returns. Must not touch a node
//! once started (the cluster kills and restarts nodes by their config file), or judge anything.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use launcher::gateway_admin::GatewayAdmin;
use launcher::{ClusterDir, EtcdProcess, GatewayProcess, Lifetime, Manifest, NodeProcess, NodeSlot};
use rand::Rng;

use crate::proxy::NodeProxy;

/// How long `lowtail up` gets to write its manifest.
const UP_START_TIMEOUT: Duration = Duration::from_secs(120);
/// The etcd key prefix of a swarm cluster's metadata.
const ETCD_PREFIX: &str = "/lowtail/swarm";
/// The code of an etcd cluster's stripes (`lowtail up`'s default).
const ETCD_CODE: &str = "rs-6-3";

/// The log filter of a swarm's cluster (`RUST_LOG` syntax, e.g. `info,gateway=debug` to replay a
/// seed with the gateway's decisions in `up.log`); default `warn`.
pub const CLUSTER_LOG_ENV: &str = "LOWTAIL_SWARM_CLUSTER_LOG";

fn cluster_log_filter() -> String {
    std::env::var(CLUSTER_LOG_ENV).unwrap_or_else(|_| "warn".into())
}

/// What the gateways are started with.
#[derive(Debug, Clone)]
pub struct GatewaySettings {
    /// The `lowtail` executable.
    pub lowtail: PathBuf,
    /// The swarm's directory of this cluster (`up.toml`, `up.log`, `cluster/` below it).
    pub dir: PathBuf,
    /// Storage nodes.
    pub nodes: u32,
    /// Where each node is registered (empty: where it listens).
    pub registered: Vec<SocketAddr>,
}

/// `lowtail up` as a child process.
pub struct UpGateway {
    settings: GatewaySettings,
    listen: String,
    child: Option<Child>,
    manifest: Manifest,
}

impl UpGateway {
    /// Starts `lowtail up` on `settings.dir/cluster` with `settings.dir/up.toml` and waits for it.
    pub fn start(settings: GatewaySettings) -> anyhow::Result<UpGateway> {
        let listen = launcher::processes::free_loopback_addr()?.to_string();
        let (child, manifest) = start_up(&settings, &listen)?;
        Ok(UpGateway { settings, listen, child: Some(child), manifest })
    }

    fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|up| matches!(up.try_wait(), Ok(None)))
    }

    fn kill(&mut self) {
        if let Some(mut up) = self.child.take() {
            let _ = up.kill();
            let _ = up.wait();
        }
    }

    fn restart(&mut self) -> anyhow::Result<()> {
        if self.running() {
            return Ok(());
        }
        let (child, manifest) = start_up(&self.settings, &self.listen)?;
        self.child = Some(child);
        self.manifest = manifest;
        Ok(())
    }

    /// Stops `lowtail up` with SIGINT (it stops its nodes), SIGKILL after a minute.
    fn stop(&mut self) {
        if let Some(mut up) = self.child.take() {
            // SAFETY: kill(2) of our own child.
            unsafe { libc::kill(up.id() as libc::pid_t, libc::SIGINT) };
            let deadline = Instant::now() + Duration::from_secs(60);
            while matches!(up.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = up.kill();
            let _ = up.wait();
        }
    }
}

/// The last `lowtail: error:` line `log` gained from byte `from` on (what a start that failed said).
fn last_error_since(log: &std::path::Path, from: u64) -> Option<String> {
    let bytes = std::fs::read(log).ok()?;
    let since = bytes.get(usize::try_from(from).ok()?..)?;
    String::from_utf8_lossy(since).lines().rev().find(|line| line.starts_with("lowtail: error:")).map(str::to_string)
}

/// Starts `lowtail up` and waits until its manifest names this process.
fn start_up(settings: &GatewaySettings, listen: &str) -> anyhow::Result<(Child, Manifest)> {
    let dir = settings.dir.join("cluster");
    let log_path = settings.dir.join("up.log");
    let log = std::fs::OpenOptions::new().create(true).append(true).open(&log_path)?;
    let log_start = log.metadata()?.len();
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
        .env("RUST_LOG", cluster_log_filter())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context("cannot start lowtail up")?;
    let deadline = Instant::now() + UP_START_TIMEOUT;
    loop {
        if let Ok(Some(status)) = up.try_wait() {
            let why = last_error_since(&log_path, log_start).unwrap_or_default();
            bail!("lowtail up exited ({status}) while starting: {why}; see {}", log_path.display());
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

/// One gateway of an etcd cluster: its config, its process while it runs, and its front.
struct EtcdGateway {
    config: gateway::process::GatewayConfig,
    controller: toml::Table,
    dir: PathBuf,
    process: Option<GatewayProcess>,
    /// Where its front forwards: the gateway's S3 address of the moment.
    s3_addr: Arc<Mutex<Option<SocketAddr>>>,
    front: NodeProxy,
}

/// How etcd was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EtcdStop {
    /// SIGSTOP: continued on return.
    Stopped,
    /// SIGKILL: started again on its data on return.
    Killed,
}

/// etcd, the nodes and two gateways, every one a process of this swarm.
pub struct EtcdGateways {
    runtime: tokio::runtime::Handle,
    etcd_binary: PathBuf,
    lowtail: PathBuf,
    etcd: EtcdProcess,
    /// How etcd is stopped now, if it is.
    etcd_stopped: Option<EtcdStop>,
    /// Gateways whose restart waits for etcd to return.
    deferred: std::collections::BTreeSet<usize>,
    gateways: Vec<EtcdGateway>,
    /// The nodes as first started (a node killed and restarted by hand runs outside these).
    _nodes: Vec<NodeProcess>,
    manifest: Manifest,
    secret: String,
}

impl EtcdGateways {
    /// Starts etcd, the nodes (their scrub and service model from `up_toml`) and `gateways`
    /// gateways (data, controller and classes from `up_toml`), on `runtime`.
    pub fn start(
        settings: &GatewaySettings,
        up_toml: &str,
        gateways: u32,
        runtime: &tokio::runtime::Handle,
    ) -> anyhow::Result<EtcdGateways> {
        let etcd_binary = launcher::find_etcd_binary()
            .context("an etcd seed needs etcd (Debian: etcd-server; or LOWTAIL_ETCD_BIN), or --without etcd")?;
        let up: launcher::UpConfig = toml::from_str(up_toml).context("the swarm's up.toml")?;
        let secret: String = rand::rng().sample_iter(rand::distr::Alphanumeric).take(32).map(char::from).collect();
        let etcd =
            runtime.block_on(EtcdProcess::start(&etcd_binary, &settings.dir.join("etcd"), Lifetime::Detached))?;
        let meta =
            gateway::process::MetaConfig::Etcd { endpoints: vec![etcd.endpoint.clone()], prefix: ETCD_PREFIX.into() };
        let nodes = runtime.block_on(start_nodes(settings, &up, &secret, &meta))?;
        let credential = gateway::process::Credential {
            access_key: format!("SWARM{}", secret[..12].to_uppercase()),
            secret_key: secret[12..].to_string(),
            class: None,
        };
        let mut started = Vec::new();
        for index in 0..gateways {
            let mut data = up.data.clone();
            data.code = ETCD_CODE.into();
            data.cluster_secret = secret.clone();
            data.gateway_id = Some(format!("gateway-{index}"));
            let config = gateway::process::GatewayConfig {
                credentials: vec![credential.clone()],
                meta: meta.clone(),
                data,
                controller: up.controller.clone(),
                classes: up.classes.clone(),
                ..gateway::process::GatewayConfig::default()
            };
            let mut controller = toml::Table::new();
            controller.insert("frontend_id".into(), toml::Value::Integer(index.into()));
            controller.insert("frontend_count".into(), toml::Value::Integer(gateways.into()));
            let dir = settings.dir.join(format!("gateway-{index}"));
            started.push(runtime.block_on(EtcdGateway::start(&settings.lowtail, dir, config, controller))?);
        }
        let manifest = Manifest {
            endpoint: started[0].front_url(),
            region: "us-east-1".into(),
            access_key: credential.access_key,
            secret_key: credential.secret_key,
            code: ETCD_CODE.into(),
            dir: settings.dir.join("cluster"),
            gateway: None,
            nodes: nodes.iter().map(NodeProcess::manifest_entry).collect(),
        };
        Ok(EtcdGateways {
            runtime: runtime.clone(),
            etcd_binary,
            lowtail: settings.lowtail.clone(),
            etcd,
            etcd_stopped: None,
            deferred: Default::default(),
            gateways: started,
            _nodes: nodes,
            manifest,
            secret,
        })
    }

    fn kill(&mut self, index: usize) {
        if let Some(gateway) = self.gateways.get_mut(index) {
            // Dropping a supervised child kills it (SIGKILL).
            gateway.process = None;
            *gateway.s3_addr.lock().expect("front lock") = None;
        }
    }

    /// Starts gateway `index` again, or, while etcd is stopped (a gateway exits at once when its
    /// metadata store does not answer), once etcd returns: what was deferred, in words.
    fn restart(&mut self, index: usize) -> anyhow::Result<Vec<String>> {
        if self.etcd_stopped.is_some() {
            self.deferred.insert(index);
            return Ok(vec![format!("restart of gateway {index} waited for etcd")]);
        }
        let lowtail = self.lowtail.clone();
        let gateway = self.gateways.get_mut(index).with_context(|| format!("no gateway {index}"))?;
        if gateway.process.as_mut().is_some_and(GatewayProcess::is_running) {
            return Ok(Vec::new());
        }
        self.runtime.block_on(gateway.spawn(&lowtail))?;
        Ok(Vec::new())
    }

    /// SIGSTOPs etcd, or SIGKILLs it (a kill stays one when a stop follows).
    fn stop_etcd(&mut self, kill: bool) {
        let signal = if kill { libc::SIGKILL } else { libc::SIGSTOP };
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(self.etcd.pid() as libc::pid_t, signal) };
        let killed = kill || self.etcd_stopped == Some(EtcdStop::Killed);
        self.etcd_stopped = Some(if killed { EtcdStop::Killed } else { EtcdStop::Stopped });
    }

    /// SIGCONTs etcd, or starts it again on its data when it was killed. A kill is remembered
    /// rather than read off the process: one just sent may not have taken yet (a process of many
    /// threads on a busy machine), and a process taken for running then was never started again.
    fn return_etcd(&mut self) -> anyhow::Result<()> {
        let Some(stop) = self.etcd_stopped else { return Ok(()) };
        // SAFETY: kill(2) of our own child (a dead one ignores it).
        unsafe { libc::kill(self.etcd.pid() as libc::pid_t, libc::SIGCONT) };
        if stop == EtcdStop::Killed || !self.etcd.is_running() {
            // Waits (bounded) for the killed process to be gone first.
            self.runtime.block_on(self.etcd.restart(&self.etcd_binary))?;
        }
        self.etcd_stopped = None;
        for index in std::mem::take(&mut self.deferred) {
            self.restart(index)?;
        }
        Ok(())
    }
}

/// Starts the nodes of an etcd cluster, pins their addresses (so a node restarted by hand listens
/// where it did) and registers them in etcd.
async fn start_nodes(
    settings: &GatewaySettings,
    up: &launcher::UpConfig,
    secret: &str,
    meta: &gateway::process::MetaConfig,
) -> anyhow::Result<Vec<NodeProcess>> {
    let dir = ClusterDir::new(settings.dir.join("cluster"));
    let threads = launcher::up::shared_runtime_threads(settings.nodes as usize);
    let mut nodes = Vec::new();
    for id in 0..settings.nodes {
        let slot = NodeSlot { id, rack: format!("rack-{id}") };
        let node = NodeProcess::spawn(&settings.lowtail, &dir, &slot, secret, Lifetime::Detached, 0, |node| {
            node.scrub = up.scrub.clone();
            node.service_model = up.service_model.clone();
            node.runtime_threads = Some(threads);
        })?;
        nodes.push(node);
    }
    let store = gateway::process::open_meta(meta).await.context("connecting to the swarm's etcd")?;
    let now_ms = gateway::data::cluster::membership::unix_now_ms();
    for (index, node) in nodes.iter_mut().enumerate() {
        node.wait_ready(secret).await?;
        node.pin_addresses()?;
        let bound = node.rpc_addr().context("a ready node has an address")?;
        let address = settings.registered.get(index).copied().unwrap_or(bound).to_string();
        gateway::data::cluster::membership::register_node(
            &*store,
            meta::NodeId(node.slot.id),
            &address,
            &node.slot.rack,
            0,
            now_ms,
        )
        .await
        .with_context(|| format!("cannot register node {}", node.slot.id))?;
    }
    Ok(nodes)
}

impl EtcdGateway {
    async fn start(
        lowtail: &Path,
        dir: PathBuf,
        config: gateway::process::GatewayConfig,
        controller: toml::Table,
    ) -> anyhow::Result<EtcdGateway> {
        let s3_addr = Arc::new(Mutex::new(None));
        let target = Arc::clone(&s3_addr);
        let front = NodeProxy::start(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            Arc::new(move || *target.lock().expect("front lock")),
        )
        .await?;
        let mut gateway = EtcdGateway { config, controller, dir, process: None, s3_addr, front };
        gateway.spawn(lowtail).await?;
        Ok(gateway)
    }

    async fn spawn(&mut self, lowtail: &Path) -> anyhow::Result<()> {
        let mut process =
            GatewayProcess::spawn(lowtail, &self.dir, &self.config, &self.controller, Lifetime::Detached)?;
        process.wait_ready().await?;
        let s3_addr: SocketAddr = process.s3_url().trim_start_matches("http://").parse()?;
        *self.s3_addr.lock().expect("front lock") = Some(s3_addr);
        self.process = Some(process);
        Ok(())
    }

    fn front_url(&self) -> String {
        format!("http://{}", self.front.address())
    }
}

/// The gateways of a swarm's cluster, in either shape.
pub enum Gateways {
    /// `lowtail up`.
    Up(Box<UpGateway>),
    /// etcd and gateway processes.
    Etcd(Box<EtcdGateways>),
}

impl Gateways {
    /// The manifest (an etcd cluster's names its first gateway's front and no gateway process).
    pub fn manifest(&self) -> &Manifest {
        match self {
            Gateways::Up(up) => &up.manifest,
            Gateways::Etcd(etcd) => &etcd.manifest,
        }
    }

    /// Each gateway's S3 endpoint URL, the same across its restarts.
    pub fn endpoints(&self) -> Vec<String> {
        match self {
            Gateways::Up(up) => vec![up.manifest.endpoint.clone()],
            Gateways::Etcd(etcd) => etcd.gateways.iter().map(EtcdGateway::front_url).collect(),
        }
    }

    /// The cluster secret.
    pub fn secret(&self) -> anyhow::Result<String> {
        match self {
            Gateways::Up(up) => launcher::admin::cluster_secret_from_dir(&up.settings.dir.join("cluster")),
            Gateways::Etcd(etcd) => Ok(etcd.secret.clone()),
        }
    }

    /// Whether gateway `index` runs.
    pub fn running(&mut self, index: usize) -> bool {
        match self {
            Gateways::Up(up) => index == 0 && up.running(),
            Gateways::Etcd(etcd) => {
                etcd.gateways.get_mut(index).is_some_and(|g| g.process.as_mut().is_some_and(GatewayProcess::is_running))
            }
        }
    }

    /// The pid of gateway `index` while it runs (`lowtail up`'s on a single-gateway cluster).
    pub fn pid(&self, index: usize) -> Option<u32> {
        match self {
            Gateways::Up(up) => up.child.as_ref().filter(|_| index == 0).map(Child::id),
            Gateways::Etcd(etcd) => etcd.gateways.get(index)?.process.as_ref().map(GatewayProcess::pid),
        }
    }

    /// Every gateway's admin endpoint, `None` for one that is not running.
    pub fn admins(&self) -> anyhow::Result<Vec<Option<GatewayAdmin>>> {
        let secret = self.secret()?;
        Ok(match self {
            Gateways::Up(up) => {
                let base =
                    up.child.as_ref().map(|_| launcher::admin::gateway_http_from_dir(&up.settings.dir.join("cluster")));
                vec![base.transpose()?.map(|base| GatewayAdmin { base, secret })]
            }
            Gateways::Etcd(etcd) => etcd
                .gateways
                .iter()
                .map(|g| g.process.as_ref().map(|p| GatewayAdmin { base: p.http_url(), secret: secret.clone() }))
                .collect(),
        })
    }

    /// SIGKILLs gateway `index` (`lowtail up`'s nodes run on, detached, as after a crash).
    pub fn kill(&mut self, index: usize) {
        match self {
            Gateways::Up(up) => up.kill(),
            Gateways::Etcd(etcd) => etcd.kill(index),
        }
    }

    /// Starts gateway `index` again and waits for it (`lowtail up` stops the nodes left running
    /// and starts them all again); what was deferred, in words.
    pub fn restart(&mut self, index: usize) -> anyhow::Result<Vec<String>> {
        match self {
            Gateways::Up(up) => up.restart().map(|()| Vec::new()),
            Gateways::Etcd(etcd) => etcd.restart(index),
        }
    }

    /// Stops etcd (SIGKILL when `kill`, else SIGSTOP); refused without etcd.
    pub fn stop_etcd(&mut self, kill: bool) -> anyhow::Result<()> {
        match self {
            Gateways::Up(_) => bail!("this cluster runs on lowtail up's embedded store: no etcd to stop"),
            Gateways::Etcd(etcd) => {
                etcd.stop_etcd(kill);
                Ok(())
            }
        }
    }

    /// Continues or restarts a stopped etcd (nothing when it runs, or there is none).
    pub fn return_etcd(&mut self) -> anyhow::Result<()> {
        match self {
            Gateways::Up(_) => Ok(()),
            Gateways::Etcd(etcd) => etcd.return_etcd(),
        }
    }

    /// Starts every gateway that is not running.
    pub fn restart_all(&mut self) -> anyhow::Result<()> {
        (0..self.endpoints().len()).try_for_each(|index| self.restart(index).map(|_| ()))
    }

    /// Stops everything this owns: `lowtail up` with SIGINT (it stops its nodes); the gateways,
    /// the first nodes and etcd with SIGKILL.
    pub fn stop(&mut self) {
        match self {
            Gateways::Up(up) => up.stop(),
            Gateways::Etcd(etcd) => {
                let _ = etcd.return_etcd();
                etcd.gateways.iter_mut().for_each(|g| g.process = None);
                etcd._nodes.clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_start_says_the_last_error_it_logged_not_an_earlier_starts() {
        let temp = tempfile::tempdir().unwrap();
        let log = temp.path().join("up.log");
        std::fs::write(&log, "lowtail: error: cannot open the metadata store in x: metadata damaged\n").unwrap();
        let from = std::fs::metadata(&log).unwrap().len();
        assert_eq!(last_error_since(&log, from), None, "nothing logged since");
        let more = "WARN something\nlowtail: error: node 7 exited\nlowtail: error: node failed: in use\nINFO after\n";
        std::fs::write(&log, format!("{}{more}", std::fs::read_to_string(&log).unwrap())).unwrap();
        assert_eq!(last_error_since(&log, from).as_deref(), Some("lowtail: error: node failed: in use"));
        assert!(last_error_since(&log, 0).is_some());
        assert_eq!(last_error_since(&temp.path().join("absent"), 0), None);
    }
}
