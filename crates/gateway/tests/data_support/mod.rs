//! Test cluster for the data-path tests: real storage nodes started in-process on 127.0.0.1:0, a
//! temporary redb metadata store with every node registered, and helpers to stop nodes and
//! corrupt units.

#![allow(dead_code, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use gateway::data::{DataConfig, OrphanConfig};
use meta::{MetaStore, NodeId, NodeInfo, NodeState, RedbStore};
use node::{NodeClient, NodeConfig, RunningNode};

pub const SECRET: &str = "data-test-secret";

pub struct TestCluster {
    pub meta: Arc<dyn MetaStore>,
    pub nodes: Vec<Option<RunningNode>>,
    pub addresses: Vec<String>,
    pub dirs: Vec<tempfile::TempDir>,
    _meta_dir: tempfile::TempDir,
}

impl TestCluster {
    /// `count` nodes with ids 0.., node i in rack `rack{i % racks}`.
    pub async fn start(count: usize, racks: usize) -> Self {
        Self::start_with(count, racks, |_| {}).await
    }

    /// [`TestCluster::start`] with every node's config changed by `configure` first.
    pub async fn start_with(count: usize, racks: usize, configure: impl Fn(&mut NodeConfig)) -> Self {
        let meta_dir = tempfile::tempdir().unwrap();
        let meta: Arc<dyn MetaStore> = Arc::new(RedbStore::open(meta_dir.path()).unwrap());
        let mut nodes = Vec::new();
        let mut dirs = Vec::new();
        let mut addresses = Vec::new();
        for i in 0..count {
            let dir = tempfile::tempdir().unwrap();
            let mut config = NodeConfig {
                node_id: i as u32,
                listen_addr: "127.0.0.1:0".parse().unwrap(),
                data_dir: dir.path().to_path_buf(),
                cluster_secret: SECRET.into(),
                ..Default::default()
            };
            configure(&mut config);
            let node = node::start(config).await.unwrap();
            let address = node.rpc_addr().to_string();
            gateway::data::cluster::membership::register_node(
                meta.as_ref(),
                NodeId(i as u32),
                &address,
                &format!("rack{}", i % racks),
                1 << 40,
                0,
            )
            .await
            .unwrap();
            addresses.push(address);
            nodes.push(Some(node));
            dirs.push(dir);
        }
        Self { meta, nodes, addresses, dirs, _meta_dir: meta_dir }
    }

    pub fn config(&self, code: &str) -> DataConfig {
        DataConfig {
            code: code.into(),
            cluster_secret: SECRET.into(),
            placement_seed: Some(42),
            node_rpc_timeout_ms: 10_000,
            // Tests of release check what it deleted at once; `data_rw` tests the delay.
            orphans: OrphanConfig { release_delay_ms: 0, ..Default::default() },
            ..Default::default()
        }
    }

    /// Shuts node `i` down (its server stops answering).
    pub async fn stop(&mut self, i: usize) {
        if let Some(node) = self.nodes[i].take() {
            node.shutdown().await;
        }
    }

    /// Stops node `i` and marks it Down now, as membership would (repair's grace starts now).
    pub async fn kill(&mut self, i: usize) {
        self.stop(i).await;
        let now_ms = gateway::data::cluster::membership::unix_now_ms();
        self.meta.set_node_state(NodeId(i as u32), NodeState::Down, now_ms).await.unwrap();
    }

    /// Starts node `i` again on its data directory (a new port), registered Up at its new address.
    pub async fn restart(&mut self, i: usize) {
        assert!(self.nodes[i].is_none(), "node {i} is running");
        let config = NodeConfig {
            node_id: i as u32,
            listen_addr: "127.0.0.1:0".parse().unwrap(),
            data_dir: self.dirs[i].path().to_path_buf(),
            cluster_secret: SECRET.into(),
            ..Default::default()
        };
        let node = node::start(config).await.unwrap();
        let address = node.rpc_addr().to_string();
        let rack = self.node_info(i).await.rack;
        gateway::data::cluster::membership::register_node(
            self.meta.as_ref(),
            NodeId(i as u32),
            &address,
            &rack,
            1 << 40,
            0,
        )
        .await
        .unwrap();
        self.addresses[i] = address;
        self.nodes[i] = Some(node);
    }

    pub async fn client(&self, i: usize) -> NodeClient {
        NodeClient::connect(&self.addresses[i], SECRET).await.unwrap()
    }

    pub async fn node_info(&self, i: usize) -> NodeInfo {
        self.meta.get_node(NodeId(i as u32)).await.unwrap()
    }

    /// Flips one byte in the middle of the file of unit `(stripe, unit)` on node `i`.
    pub fn corrupt_unit(&self, i: usize, stripe: u64, unit: u16) {
        let node = self.nodes[i].as_ref().unwrap();
        let path = node.scheduler().store().path_of(node::UnitId::new(stripe, unit));
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0x5a;
        std::fs::write(&path, bytes).unwrap();
    }

    pub async fn shutdown(mut self) {
        for i in 0..self.nodes.len() {
            self.stop(i).await;
        }
    }
}

/// Deterministic bytes that differ between objects.
pub fn pattern(len: usize, seed: u64) -> Bytes {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

/// Random ranges within `0..size` (deterministic).
pub fn ranges(size: u64, count: usize, seed: u64) -> Vec<std::ops::Range<u64>> {
    let noise = pattern(count * 16, seed);
    (0..count)
        .map(|i| {
            let a = u64::from_le_bytes(noise[i * 16..i * 16 + 8].try_into().unwrap()) % (size + 1);
            let b = u64::from_le_bytes(noise[i * 16 + 8..i * 16 + 16].try_into().unwrap()) % (size + 1);
            a.min(b)..a.max(b)
        })
        .collect()
}

pub const SECOND: Duration = Duration::from_secs(1);
