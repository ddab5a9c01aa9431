//! `NodeConfig`: everything a storage node is started with, TOML-friendly, with documented
//! defaults. Owns parsing-level validation; must not start anything.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::classes::ClassScheduling;
use crate::error::NodeError;
use crate::service_model::ServiceModel;

/// Configuration of one storage node. Every field has a default; `cluster_secret` must be set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// This node's id in the cluster, reported in every task timing. Default 0.
    pub node_id: u32,
    /// Address the gRPC server listens on. Default `127.0.0.1:7400`; port 0 picks a free port.
    pub listen_addr: SocketAddr,
    /// Address of the Prometheus `/metrics` endpoint; absent (the default) = no endpoint.
    pub metrics_addr: Option<SocketAddr>,
    /// Directory holding the units (under `units/`). Default `lowtail-node`.
    pub data_dir: PathBuf,
    /// Shared secret every request must carry in `x-lowtail-secret`. Required, no default.
    pub cluster_secret: String,
    /// Workers serving the queue (FCFS and weighted sharing; under reserved class scheduling every
    /// class is one server of its own). Default 1: one disk-like server.
    pub workers: usize,
    /// Most bytes waiting in the queue before tasks are refused. Default 1 GiB.
    pub max_queued_bytes: u64,
    /// Most tasks waiting in the queue before tasks are refused. Default 4096.
    pub max_queued_tasks: u64,
    /// Largest unit a write accepts. Default 256 MiB.
    pub max_unit_bytes: u64,
    /// Size of the chunks a ranged read is streamed in. Default 1 MiB (under gRPC's 4 MiB limit).
    pub read_chunk_bytes: usize,
    /// Threads of the node process's async runtime (its RPCs and its queue; disk work runs on a
    /// separate bounded pool). Default: one per CPU. Nodes sharing a machine share its CPUs:
    /// `lowtail up` gives each of its nodes CPUs ÷ nodes, rounded up, because more threads than
    /// that only switch among each other (docs/benchmarks.md has the measurement).
    pub runtime_threads: Option<usize>,
    /// Emulated service model; off by default.
    pub service_model: ServiceModel,
    /// How the node shares its service among latency classes; FCFS (classes change nothing) by
    /// default. Replaceable at run time (`SetClassScheduling`).
    pub class_scheduling: ClassScheduling,
    /// Background verification of every stored unit's checksums (on by default: a pass a week).
    pub scrub: crate::scrub::ScrubConfig,
    /// When set, the node writes the addresses it bound (`{"rpc_addr": .., "metrics_addr": ..}`,
    /// JSON) to this file once it listens, so a launcher can use port 0 and learn the real ports
    /// without racing other processes for a port it picked in advance. Absent by default.
    pub address_file: Option<PathBuf>,
}

/// Hard ceiling on `workers`; more would not behave like a disk and only cost memory.
pub const MAX_WORKERS: usize = 256;
/// Largest read chunk; gRPC's default message limit is 4 MiB.
pub const MAX_READ_CHUNK_BYTES: usize = 2 << 20;

impl Default for NodeConfig {
    fn default() -> Self {
        Self {
            node_id: 0,
            listen_addr: SocketAddr::from(([127, 0, 0, 1], 7400)),
            metrics_addr: None,
            data_dir: PathBuf::from("lowtail-node"),
            cluster_secret: String::new(),
            workers: 1,
            max_queued_bytes: 1 << 30,
            max_queued_tasks: 4096,
            max_unit_bytes: 256 << 20,
            read_chunk_bytes: 1 << 20,
            runtime_threads: None,
            service_model: ServiceModel::default(),
            class_scheduling: ClassScheduling::default(),
            scrub: crate::scrub::ScrubConfig::default(),
            address_file: None,
        }
    }
}

impl NodeConfig {
    /// Reads a TOML file (missing fields take their defaults, unknown ones are refused). Does not
    /// validate: callers apply command-line overrides first, then [`NodeConfig::validate`].
    pub fn from_toml_file(path: &std::path::Path) -> Result<NodeConfig, NodeError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| NodeError::InvalidArgument(format!("cannot read node config {}: {e}", path.display())))?;
        toml::from_str(&text).map_err(|e| NodeError::InvalidArgument(format!("node config {}: {e}", path.display())))
    }

    /// Checks the configuration; a node never starts with one that fails.
    pub fn validate(&self) -> Result<(), NodeError> {
        let bad = |what: &str| Err(NodeError::InvalidArgument(format!("node config: {what}")));
        if self.cluster_secret.is_empty() {
            return bad("cluster_secret must be set");
        }
        if !(1..=MAX_WORKERS).contains(&self.workers) {
            return bad(&format!("workers must be in 1..={MAX_WORKERS}, got {}", self.workers));
        }
        if self.max_queued_tasks == 0 || self.max_queued_bytes == 0 {
            return bad("max_queued_tasks and max_queued_bytes must be positive");
        }
        if self.runtime_threads.is_some_and(|threads| !(1..=MAX_WORKERS).contains(&threads)) {
            return bad(&format!("runtime_threads must be in 1..={MAX_WORKERS}"));
        }
        if !(1..=MAX_READ_CHUNK_BYTES).contains(&self.read_chunk_bytes) {
            return bad(&format!("read_chunk_bytes must be in 1..={MAX_READ_CHUNK_BYTES}"));
        }
        self.scrub.validate()?;
        self.class_scheduling.validate()?;
        self.service_model.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_with_defaults() {
        let config: NodeConfig = toml::from_str(
            r#"
            node_id = 3
            listen_addr = "127.0.0.1:0"
            data_dir = "/tmp/x"
            cluster_secret = "s3cret"
            [service_model]
            enabled = true
            rate_bytes_per_s = 100e6
            overhead_us = 500
            "#,
        )
        .unwrap();
        assert_eq!(config.node_id, 3);
        assert_eq!(config.workers, 1);
        assert_eq!(config.max_unit_bytes, 256 << 20);
        assert!(config.service_model.enabled && config.service_model.replace_real_io);
        config.validate().unwrap();
        assert!(toml::from_str::<NodeConfig>("bogus = 1").is_err(), "unknown fields are refused");
    }

    #[test]
    fn toml_file_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        let missing = NodeConfig::from_toml_file(&path).unwrap_err().to_string();
        assert!(missing.contains("node.toml"), "{missing}");
        std::fs::write(&path, "workers = \"many\"").unwrap();
        let bad = NodeConfig::from_toml_file(&path).unwrap_err().to_string();
        assert!(bad.contains("node.toml") && bad.contains("workers"), "{bad}");
        std::fs::write(&path, "node_id = 7\ncluster_secret = \"s\"").unwrap();
        assert_eq!(NodeConfig::from_toml_file(&path).unwrap().node_id, 7);
    }

    #[test]
    fn validation() {
        assert!(NodeConfig::default().validate().is_err(), "no secret");
        let ok = NodeConfig { cluster_secret: "x".into(), ..Default::default() };
        ok.validate().unwrap();
        assert!(NodeConfig { workers: 0, ..ok.clone() }.validate().is_err());
        assert!(NodeConfig { read_chunk_bytes: 0, ..ok.clone() }.validate().is_err());
        assert!(NodeConfig { runtime_threads: Some(0), ..ok.clone() }.validate().is_err());
        assert!(NodeConfig { runtime_threads: Some(2), ..ok.clone() }.validate().is_ok());
        let oversubscribed = ClassScheduling::Reserved { shares: vec![0.8, 0.4] };
        assert!(NodeConfig { class_scheduling: oversubscribed, ..ok }.validate().is_err());
    }

    #[test]
    fn class_scheduling_in_the_config_file() {
        let config: NodeConfig = toml::from_str(
            r#"
            cluster_secret = "s"
            [class_scheduling]
            discipline = "reserved"
            shares = [0.7, 0.3]
            "#,
        )
        .unwrap();
        assert_eq!(config.class_scheduling, ClassScheduling::Reserved { shares: vec![0.7, 0.3] });
        config.validate().unwrap();
        assert_eq!(toml::from_str::<NodeConfig>("").unwrap().class_scheduling, ClassScheduling::Fcfs);
        // What `lowtail up` writes for its nodes reads back the same.
        for class_scheduling in [ClassScheduling::Fcfs, ClassScheduling::WeightedSharing { weights: vec![1.0, 0.4] }] {
            let written = NodeConfig { class_scheduling, ..Default::default() };
            let text = toml::to_string_pretty(&written).unwrap();
            assert_eq!(toml::from_str::<NodeConfig>(&text).unwrap(), written, "{text}");
        }
    }
}
