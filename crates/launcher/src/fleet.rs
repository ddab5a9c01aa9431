//! A throw-away multi-gateway cluster on loopback, every part a separate process: one etcd, N
//! `lowtail node` processes and G `lowtail gateway` processes sharing the metadata in etcd, each
//! gateway with its own `gateway_id` and its own `[controller]` frontend id. What a harness (the
//! live experiment, tests) starts, uses and tears down; `lowtail up` is the long-lived single-gateway
//! cluster instead.
//!
//! Owns: the order of start (etcd, nodes, registration of the nodes in etcd, gateways) and of stop
//! (gateways first so no request is cut off, then nodes, then etcd), fresh secrets and credentials,
//! and changing the nodes' service models at run time. Must not: keep anything across runs (the
//! directory is the caller's, usually temporary), or outlive its owner: every child is started
//! [`Lifetime::WithParent`] and killed when dropped, so an error or a panic leaves no process.

use crate::child::Lifetime;
use crate::etcd::EtcdProcess;
use crate::processes::{GatewayProcess, NodeProcess};
use crate::state::{ClusterDir, NodeSlot, random_token};
use anyhow::{Context, ensure};
use gateway::data::DataConfig;
use gateway::data::cluster::membership::{register_node, unix_now_ms};
use gateway::process::{Credential, GatewayConfig, MetaConfig};
use meta::{MetaStore, NodeId};
use node::{NodeClient, ServiceModel};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Most nodes and gateways one fleet starts on one machine (each is a process with its ports).
pub const MAX_FLEET_PROCESSES: usize = 128;
/// The etcd key prefix of a fleet's metadata.
pub const FLEET_META_PREFIX: &str = "/lowtail/fleet";

/// Records each fleet gateway keeps until they are taken, unless the harness sets its own.
pub const EXPERIMENT_MAX_RECORDS: i64 = 1_000_000;

/// Fields of a gateway's `[controller]` table (TOML values by field name).
pub type ControllerTable = toml::Table;

/// What to start.
#[derive(Clone, Debug)]
pub struct FleetConfig {
    /// Storage nodes (ids `0..nodes`, one rack each).
    pub nodes: usize,
    /// Gateways (frontend ids `0..gateways`).
    pub gateways: usize,
    /// Every node's service model at start (it can be changed later, see
    /// [`Fleet::set_service_model`]).
    pub service_model: ServiceModel,
    /// The gateways' data path; `cluster_secret` and `gateway_id` are set by the fleet.
    pub data: DataConfig,
    /// Fields of every gateway's `[controller]` table; `frontend_id` and `frontend_count` are set
    /// per gateway by the fleet.
    pub controller: ControllerTable,
    /// The etcd binary (see [`crate::etcd::find_etcd_binary`]).
    pub etcd_binary: PathBuf,
    /// Workers serving each node's queue (1: one disk-like server; FAST CLOUD's black-box store
    /// serves every task at once, so its experiment gives each node more workers than tasks can
    /// be in flight).
    pub node_workers: usize,
    /// Niceness of the node processes (0 ..= 19; [`crate::child::set_niceness`]). A fleet shares
    /// one machine's cores, where a real cluster gives its gateways their own: above 0, the nodes
    /// yield the CPU to the gateways and the harness when they contend.
    pub node_nice: i32,
    /// Every gateway's latency classes (`[classes]`; the default: one class, first come first
    /// served).
    pub classes: gateway::classes::ClassesConfig,
}

/// A running fleet.
#[derive(Debug)]
pub struct Fleet {
    root: PathBuf,
    secret: String,
    credential: Credential,
    region: String,
    etcd: EtcdProcess,
    nodes: Vec<NodeProcess>,
    gateways: Vec<GatewayProcess>,
}

impl Fleet {
    /// Starts everything under `root` (created), `binary` being the `lowtail` executable; `step`
    /// is told what is being started (a progress line). On any error every process started so far
    /// is killed and the error says which step failed.
    pub async fn start(binary: &Path, root: &Path, config: &FleetConfig, step: &dyn Fn(&str)) -> anyhow::Result<Fleet> {
        let spec: codec::CodeSpec =
            config.data.code.parse().with_context(|| format!("the fleet's code {:?}", config.data.code))?;
        ensure!(
            config.nodes >= spec.total_units() && config.nodes + config.gateways <= MAX_FLEET_PROCESSES,
            "a fleet of {} nodes and {} gateways: {spec} needs at least {} nodes, and at most {MAX_FLEET_PROCESSES} processes run on one machine",
            config.nodes,
            config.gateways,
            spec.total_units()
        );
        ensure!(config.gateways > 0, "a fleet needs at least one gateway");
        ensure!(
            (0..=crate::child::MAX_NICE).contains(&config.node_nice),
            "the fleet's node niceness {} is out of range 0 ..= {}",
            config.node_nice,
            crate::child::MAX_NICE
        );
        std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
        let secret = random_token(32);
        let credential = Credential {
            access_key: format!("LT{}", random_token(18).to_uppercase()),
            secret_key: random_token(40),
            class: None,
        };

        step("starting etcd");
        let etcd = EtcdProcess::start(&config.etcd_binary, &root.join("etcd"), Lifetime::WithParent)
            .await
            .context("starting etcd")?;

        step(&format!("starting {} storage nodes", config.nodes));
        let dir = ClusterDir::new(root);
        let mut nodes = Vec::with_capacity(config.nodes);
        for id in 0..config.nodes as u32 {
            let slot = NodeSlot { id, rack: format!("rack-{id}") };
            let (model, workers) = (config.service_model.clone(), config.node_workers);
            let node =
                NodeProcess::spawn(binary, &dir, &slot, &secret, Lifetime::WithParent, config.node_nice, |node| {
                    node.service_model = model;
                    node.workers = workers;
                })
                .with_context(|| format!("starting node {id}"))?;
            nodes.push(node);
        }
        for node in &mut nodes {
            node.wait_ready(&secret).await.with_context(|| format!("starting node {}", node.slot.id))?;
        }

        step("registering the nodes in etcd");
        let meta_config = MetaConfig::Etcd { endpoints: vec![etcd.endpoint.clone()], prefix: FLEET_META_PREFIX.into() };
        let meta = gateway::process::open_meta(&meta_config).await.context("connecting to the fleet's etcd")?;
        for node in &nodes {
            let address = node.rpc_addr().context("a ready node has an address")?.to_string();
            register_node(&*meta, NodeId(node.slot.id), &address, &node.slot.rack, 0, unix_now_ms())
                .await
                .with_context(|| format!("registering node {} in etcd", node.slot.id))?;
        }

        step(&format!("starting {} gateways", config.gateways));
        let region = "us-east-1".to_owned();
        let mut gateways = Vec::with_capacity(config.gateways);
        for index in 0..config.gateways {
            let mut data = config.data.clone();
            data.cluster_secret = secret.clone();
            data.gateway_id = Some(format!("gateway-{index}"));
            let gateway_config = GatewayConfig {
                credentials: vec![credential.clone()],
                region: region.clone(),
                meta: meta_config.clone(),
                data,
                classes: config.classes.clone(),
                ..GatewayConfig::default()
            };
            let mut controller = config.controller.clone();
            controller.insert("frontend_id".into(), toml::Value::Integer(index as i64));
            controller.insert("frontend_count".into(), toml::Value::Integer(config.gateways as i64));
            // A harness takes the gateways' records: keep them (a served gateway keeps none).
            controller.entry("max_records").or_insert(toml::Value::Integer(EXPERIMENT_MAX_RECORDS));
            // ... and a run's every stripe in the placement: a fresh start mid-run would reset the
            // policy's tables in the middle of a measurement.
            let max_catalog_stripes = gateway::data::read::controller::MAX_CATALOG_STRIPES as i64;
            controller.entry("max_catalog_stripes").or_insert(toml::Value::Integer(max_catalog_stripes));
            let gateway = start_gateway(binary, &root.join(format!("gateway-{index}")), &gateway_config, &controller)
                .await
                .with_context(|| format!("starting gateway {index}"))?;
            gateways.push(gateway);
        }
        Ok(Fleet { root: root.to_path_buf(), secret, credential, region, etcd, nodes, gateways })
    }

    /// The fleet's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The secret of node RPCs and of the gateways' admin endpoints.
    pub fn cluster_secret(&self) -> &str {
        &self.secret
    }

    /// The S3 key pair every gateway accepts.
    pub fn credential(&self) -> &Credential {
        &self.credential
    }

    /// The region S3 requests are signed for.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// etcd's client URL.
    pub fn etcd_endpoint(&self) -> &str {
        &self.etcd.endpoint
    }

    /// Every process id of the fleet: nodes, gateways, then etcd.
    pub fn pids(&self) -> Vec<u32> {
        let nodes = self.nodes.iter().map(NodeProcess::pid);
        nodes.chain(self.gateways.iter().map(GatewayProcess::pid)).chain([self.etcd.pid()]).collect()
    }

    /// The nodes, by id.
    pub fn nodes(&self) -> &[NodeProcess] {
        &self.nodes
    }

    /// The gateways, by frontend id.
    pub fn gateways(&self) -> &[GatewayProcess] {
        &self.gateways
    }

    /// The shared metadata store (a new etcd client).
    pub async fn meta(&self) -> anyhow::Result<Arc<dyn MetaStore>> {
        let config = MetaConfig::Etcd { endpoints: vec![self.etcd.endpoint.clone()], prefix: FLEET_META_PREFIX.into() };
        gateway::process::open_meta(&config).await
    }

    /// An error naming the first process of the fleet that is no longer running, with its log.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if !self.etcd.is_running() {
            return Err(self.etcd.exited_error("during the run"));
        }
        for node in &mut self.nodes {
            if !node.is_running() {
                anyhow::bail!("node {} exited during the run; see {}", node.slot.id, node.log.display());
            }
        }
        for gateway in &mut self.gateways {
            if !gateway.is_running() {
                return Err(gateway.exited_error("during the run"));
            }
        }
        Ok(())
    }

    /// Installs `model` on node `id` (an RPC with the cluster secret); returns what the node runs.
    pub async fn set_service_model(&self, id: u32, model: &ServiceModel) -> anyhow::Result<ServiceModel> {
        let node = self.nodes.iter().find(|node| node.slot.id == id).with_context(|| format!("no node {id}"))?;
        let address = node.rpc_addr().context("a ready node has an address")?.to_string();
        let client = NodeClient::connect(&address, &self.secret)
            .await
            .with_context(|| format!("connecting to node {id} at {address}"))?;
        client.set_service_model(model).await.with_context(|| format!("setting node {id}'s service model"))
    }

    /// Stops node `id` (its process ends; membership will mark it Down), as a failure would.
    pub async fn stop_node(&mut self, id: u32) -> anyhow::Result<()> {
        let position =
            self.nodes.iter().position(|node| node.slot.id == id).with_context(|| format!("no node {id}"))?;
        self.nodes.remove(position).stop().await;
        Ok(())
    }

    /// Stops the gateways (each drains its requests and seals its open stripes), then the nodes,
    /// then etcd.
    pub async fn shutdown(self) {
        for gateway in self.gateways {
            gateway.stop().await;
        }
        for node in self.nodes {
            node.stop().await;
        }
        self.etcd.stop().await;
    }
}

/// Starts a gateway and waits until it serves. It binds ports it picks itself, so no retry for a
/// port taken by another process is needed.
async fn start_gateway(
    binary: &Path,
    dir: &Path,
    config: &GatewayConfig,
    controller: &toml::Table,
) -> anyhow::Result<GatewayProcess> {
    let mut gateway = GatewayProcess::spawn(binary, dir, config, controller, Lifetime::WithParent)?;
    gateway.wait_ready().await?;
    Ok(gateway)
}
