//! `lowtail up`: the whole local cluster in one call. Chooses or reloads the cluster's state, starts
//! every node as a child process and waits until each answers, registers them in the embedded
//! metadata store, starts the gateway in this process, and writes `cluster.json`.
//!
//! Must not: keep anything in memory that a restart would need: everything lives under the
//! directory, so `lowtail up` on the same directory finds every object again.

use crate::manifest::{GatewayEntry, Manifest};
use crate::processes::NodeProcess;
use crate::state::{ClusterDir, ClusterState, UpOptions};
use anyhow::Context;
use gateway::data::DataConfig;
use gateway::data::cluster::membership::{register_node, unix_now_ms};
use gateway::data::read::controller::ControllerConfig;
use gateway::process::{Credential, GatewayConfig, MetaConfig, RunningGateway};
use meta::{MetaStore, NodeId};
use node::ServiceModel;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

/// `lowtail up`'s configuration file (TOML). Command-line flags override its top-level fields.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpConfig {
    /// Storage nodes. Default 9.
    pub nodes: usize,
    /// Code of new stripes. Default `rs-6-3`.
    pub code: String,
    /// Racks the nodes are spread over, round robin; 0 (the default) = one rack per node.
    pub racks: usize,
    /// S3 address; absent = 127.0.0.1:9000 (refused when busy), kept across restarts.
    pub s3_listen: Option<SocketAddr>,
    /// How long a request body may go without a byte before the request fails with
    /// RequestTimeout. Default 20 000 ms.
    pub body_idle_timeout_ms: u64,
    /// Multipart uploads initiated longer ago are aborted, their parts deleted. Default 604 800 (7
    /// days); 0 = never.
    pub abort_incomplete_uploads_after_s: u64,
    /// How long hinted GETs (`x-lowtail-batch`) wait for the rest of their batch. Default 2 ms.
    pub batch_window_ms: u64,
    /// Whole-object GETs of one access key less than this apart count as one request for the
    /// mover's statistics. Default 20 ms; 0 = not followed.
    pub coaccess_gap_ms: u64,
    /// Most memory the embedded metadata store caches pages in. Default 16 MiB.
    pub meta_cache_bytes: usize,
    /// The gateway's data path (unit size, timeouts, membership, repair). `code` and
    /// `cluster_secret` here are ignored: the cluster's own are used.
    pub data: DataConfig,
    /// Service-model emulation applied to every node (off by default); see the node's README.
    pub service_model: ServiceModel,
    /// Every node's scrubbing (default: a pass a week, at most 16 MiB/s).
    pub scrub: node::ScrubConfig,
    /// The gateway's read controller: the policy reads follow (default `hedged`) and its settings;
    /// see docs/controller.md. Switch a running cluster with `lowtail admin policy set`.
    pub controller: ControllerConfig,
    /// The gateway's latency classes and how the nodes serve them (default: one class, first come
    /// first served); see docs/classes.md. The cluster's one access key has `default_class`.
    pub classes: gateway::classes::ClassesConfig,
    /// Copies of the metadata store written to the nodes, from which `lowtail admin meta rebuild`
    /// restores it (default: every 5 minutes, the newest 2 kept); see docs/durability.md.
    pub meta_snapshots: gateway::meta_snapshot::MetaSnapshotConfig,
    /// Named profiles, one policy per layer of the request path, that buckets name with `lowtail
    /// admin bucket profile` (`[profiles.NAME]`, default none); see docs/profiles.md.
    pub profiles: std::collections::BTreeMap<String, policy::Profile>,
    /// A test facility (the fault swarm's network faults): node i is registered in the metadata
    /// store, so reached by the gateway and by the other nodes, at the i-th of these addresses
    /// instead of the one it bound, e.g. a proxy in front of it that forwards to the address in
    /// the node's `address.json` (a new one at every start). Empty (the default): the bound ones.
    pub registered_node_addresses: Vec<SocketAddr>,
}

impl Default for UpConfig {
    fn default() -> Self {
        UpConfig {
            nodes: 9,
            code: "rs-6-3".to_string(),
            racks: 0,
            s3_listen: None,
            body_idle_timeout_ms: gateway::s3::DEFAULT_BODY_IDLE_TIMEOUT_MS,
            abort_incomplete_uploads_after_s: gateway::s3::abandoned_uploads::DEFAULT_ABORT_AFTER_S,
            batch_window_ms: gateway::s3::DEFAULT_BATCH_WINDOW_MS,
            coaccess_gap_ms: gateway::s3::DEFAULT_COACCESS_GAP_MS,
            meta_cache_bytes: meta::DEFAULT_CACHE_BYTES,
            data: DataConfig::default(),
            service_model: ServiceModel::default(),
            scrub: node::ScrubConfig::default(),
            controller: ControllerConfig::default(),
            classes: gateway::classes::ClassesConfig::default(),
            profiles: std::collections::BTreeMap::new(),
            meta_snapshots: gateway::meta_snapshot::MetaSnapshotConfig::default(),
            registered_node_addresses: Vec::new(),
        }
    }
}

impl UpConfig {
    /// Reads a TOML file; missing fields take their defaults, unknown ones are refused.
    pub fn from_toml_file(path: &Path) -> anyhow::Result<UpConfig> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("{}", path.display()))
    }
}

/// A running local cluster.
pub struct LocalCluster {
    dir: ClusterDir,
    manifest: Manifest,
    nodes: Vec<NodeProcess>,
    gateway: RunningGateway,
    /// The exclusive lock on `DIR/up.lock`, held while this cluster runs (released by the kernel if
    /// the process dies), so a second `lowtail up` on the directory is refused even while this one
    /// is still starting.
    _dir_lock: std::fs::File,
}

impl LocalCluster {
    /// What `cluster.json` says.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The cluster directory.
    pub fn dir(&self) -> &ClusterDir {
        &self.dir
    }

    /// The gateway running in this process.
    pub fn gateway(&self) -> &RunningGateway {
        &self.gateway
    }

    /// Stops the gateway (in-flight requests finish first), then every node.
    pub async fn shutdown(self) {
        self.gateway.shutdown().await;
        let stops: Vec<_> = self.nodes.into_iter().map(NodeProcess::stop).collect();
        for stop in stops {
            stop.await;
        }
    }
}

/// Starts (or restarts) the cluster in `options.dir`; `binary` is the `lowtail` executable the
/// nodes run as.
pub async fn up(options: &UpOptions, config: &UpConfig, binary: &Path) -> anyhow::Result<LocalCluster> {
    let dir = ClusterDir::new(&options.dir);
    let dir_lock = dir.lock()?;
    let state = dir.load_or_create(options)?;
    anyhow::ensure!(
        config.registered_node_addresses.is_empty() || config.registered_node_addresses.len() == state.nodes.len(),
        "registered_node_addresses names {} addresses for {} nodes",
        config.registered_node_addresses.len(),
        state.nodes.len()
    );
    if let Ok(previous) = Manifest::read(&dir.manifest_file())
        && let Some(gateway) = &previous.gateway
        && gateway.pid != std::process::id()
        && crate::processes::command_line(gateway.pid).is_some_and(|args| args.iter().any(|a| a == b"up"))
    {
        anyhow::bail!(
            "a lowtail up (pid {}) is already running on {}; stop it first",
            gateway.pid,
            dir.root().display()
        );
    }
    crate::meta_admin::refuse_a_missing_store(&dir, &state)?;
    let nodes = crate::processes::start_nodes(binary, &dir, &state, (&config.service_model, &config.scrub)).await?;
    match start_gateway(&dir, &state, config, &nodes).await {
        Ok((gateway, manifest)) => Ok(LocalCluster { dir, manifest, nodes, gateway, _dir_lock: dir_lock }),
        Err(error) => {
            crate::processes::stop_all(nodes).await;
            Err(error)
        }
    }
}

async fn start_gateway(
    dir: &ClusterDir,
    state: &ClusterState,
    config: &UpConfig,
    nodes: &[NodeProcess],
) -> anyhow::Result<(RunningGateway, Manifest)> {
    let meta_config = MetaConfig::Embedded { dir: dir.meta_dir(), cache_bytes: config.meta_cache_bytes };
    let meta: Arc<dyn MetaStore> = gateway::process::open_meta(&meta_config).await?;
    for (index, node) in nodes.iter().enumerate() {
        let bound = node.rpc_addr().context("a ready node has an address")?;
        let address = config.registered_node_addresses.get(index).copied().unwrap_or(bound).to_string();
        register_node(&*meta, NodeId(node.slot.id), &address, &node.slot.rack, 0, unix_now_ms())
            .await
            .with_context(|| format!("cannot register node {}", node.slot.id))?;
    }
    let mut data = config.data.clone();
    data.code = state.code.clone();
    data.cluster_secret = state.cluster_secret.clone();
    let gateway_config = GatewayConfig {
        s3_listen: state.s3_listen,
        http_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        credentials: vec![Credential {
            access_key: state.access_key.clone(),
            secret_key: state.secret_key.clone(),
            class: None,
        }],
        region: state.region.clone(),
        body_idle_timeout_ms: config.body_idle_timeout_ms,
        abort_incomplete_uploads_after_s: config.abort_incomplete_uploads_after_s,
        batch_window_ms: config.batch_window_ms,
        coaccess_gap_ms: config.coaccess_gap_ms,
        meta: meta_config,
        data,
        controller: config.controller.clone(),
        classes: config.classes.clone(),
        meta_snapshots: config.meta_snapshots.clone(),
        profiles: config.profiles.clone(),
        ..GatewayConfig::default()
    };
    let gateway = gateway::process::start(gateway_config, meta).await?;
    let endpoint = format!("http://{}", gateway.s3_addr());
    let manifest = Manifest {
        endpoint: endpoint.clone(),
        region: state.region.clone(),
        access_key: state.access_key.clone(),
        secret_key: state.secret_key.clone(),
        code: state.code.clone(),
        dir: dir.root().to_path_buf(),
        gateway: Some(GatewayEntry {
            pid: std::process::id(),
            endpoint,
            metrics: gateway.http_addr().map(|a| format!("http://{a}/metrics")).unwrap_or_default(),
        }),
        nodes: nodes.iter().map(NodeProcess::manifest_entry).collect(),
    };
    manifest.write(&dir.manifest_file())?;
    Ok((gateway, manifest))
}

pub use crate::processes::shared_runtime_threads;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_share_the_cpus_and_each_keeps_at_least_one_thread() {
        let cpus = std::thread::available_parallelism().unwrap().get();
        assert_eq!(shared_runtime_threads(1), cpus);
        assert_eq!(shared_runtime_threads(cpus * 9), 1);
        assert_eq!(shared_runtime_threads(0), cpus, "no nodes is treated as one");
        assert!(shared_runtime_threads(9) * 9 >= cpus, "together they can use every CPU");
    }

    #[tokio::test]
    async fn registered_node_addresses_must_name_one_address_per_node_before_anything_starts() {
        let temp = tempfile::tempdir().unwrap();
        let options = UpOptions {
            dir: temp.path().join("c"),
            nodes: 9,
            code: codec::CodeSpec::Rs { k: 6, m: 3 },
            s3_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            racks: 0,
        };
        let config =
            UpConfig { registered_node_addresses: vec!["127.0.0.1:7000".parse().unwrap()], ..UpConfig::default() };
        let Err(error) = up(&options, &config, Path::new("/nonexistent/lowtail")).await else {
            panic!("one address for nine nodes was accepted")
        };
        assert!(error.to_string().contains("names 1 addresses for 9 nodes"), "{error}");
        assert!(!options.dir.join("nodes").exists(), "no node started");
    }

    #[test]
    fn a_second_up_on_a_directory_is_refused_until_the_first_lets_go() {
        let temp = tempfile::tempdir().unwrap();
        let dir = ClusterDir::new(temp.path().join("c"));
        let first = dir.lock().unwrap();
        let error = dir.lock().unwrap_err().to_string();
        assert!(error.contains("another lowtail up is running (or starting)"), "{error}");
        drop(first);
        dir.lock().expect("free once the first is gone");
    }
}
