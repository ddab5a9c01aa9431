//! Workloads: the read requests an executor replays. A trace reader
//! ([`trace`]) and a generator shaped like the Windows Azure Storage trace of
//! Hu et al. ([`generator`]), both producing a [`Workload`]; and multi-object
//! ("batch") reads for EC-Store's experiments ([`batch`]: YCSB-E scans,
//! Wikipedia-like pages of images, batch trace replay), drawn one batch at a
//! time by a closed-loop client through a [`BatchGenerator`].
//!
//! Owns: request streams, object catalogs (object → partition, offset,
//! size). Must not: depend on an executor or a policy, read a clock, or draw
//! unseeded random numbers. Placement is not a workload concern: requests
//! name data partitions, and the executor's placement says where they live.

pub mod batch;
pub mod catalog;
pub mod generator;
pub mod trace;

pub use batch::{
    BatchGenerator, BatchTrace, BatchWorkload, BatchWorkloadError, PageConfig, YcsbEConfig, read_batch_trace,
};
pub use catalog::{Catalog, ObjectLocation};
pub use generator::{SizeDistribution, WasLikeConfig, ZipfOver};
pub use trace::{TraceError, TraceRequest, read_trace, trace_workload};

use model::ReadRequest;
use serde::{Deserialize, Serialize};

/// A workload: requests in arrival order over `partitions` data partitions.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Data partitions the requests name (`0..partitions`).
    pub partitions: u32,
    /// Requests, sorted by arrival time, ids `0..len`.
    pub requests: Vec<ReadRequest>,
    /// The span the workload covers (last arrival, or the configured duration).
    pub duration_ns: u64,
}

impl Workload {
    /// Checks the invariants executors rely on: arrival order, dense ids,
    /// partitions in range, non-empty reads.
    pub fn validate(&self) -> Result<(), String> {
        let mut previous = 0;
        for (index, request) in self.requests.iter().enumerate() {
            if request.id.0 != index as u64 {
                return Err(format!("request {index} has id {}", request.id.0));
            }
            if request.arrival_ns < previous {
                return Err(format!("request {index} arrives before its predecessor"));
            }
            if request.partition.0 >= self.partitions {
                return Err(format!("request {index} names partition {} of {}", request.partition.0, self.partitions));
            }
            if request.length == 0 {
                return Err(format!("request {index} reads no byte"));
            }
            previous = request.arrival_ns;
        }
        Ok(())
    }

    /// Bytes requested in total.
    pub fn total_bytes(&self) -> u64 {
        self.requests.iter().map(|r| r.length).sum()
    }

    /// The same workload with arrival times scaled by `factor` (> 1 slows it
    /// down); for load sweeps over one request sequence.
    pub fn with_time_scale(&self, factor: f64) -> Workload {
        assert!(factor > 0.0 && factor.is_finite());
        let scale = |t: u64| (t as f64 * factor).round() as u64;
        Workload {
            partitions: self.partitions,
            requests: self.requests.iter().map(|r| ReadRequest { arrival_ns: scale(r.arrival_ns), ..*r }).collect(),
            duration_ns: scale(self.duration_ns),
        }
    }
}

/// Where a workload comes from (the `[workload]` table of a simulation
/// config).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum WorkloadConfig {
    /// The WAS-like generator.
    WasLike(WasLikeConfig),
    /// Replay of a CSV/TSV trace of `time, object_id, size`.
    Trace {
        /// The trace file.
        path: std::path::PathBuf,
        /// Data partitions the trace's objects are grouped into at random.
        partitions: u32,
    },
}

impl Default for WorkloadConfig {
    fn default() -> WorkloadConfig {
        WorkloadConfig::WasLike(WasLikeConfig::default())
    }
}

/// A workload could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A trace problem.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A bad generator parameter.
    #[error("workload: {0}")]
    Config(String),
}

impl WorkloadConfig {
    /// Data partitions of the workload.
    pub fn partitions(&self) -> u32 {
        match self {
            WorkloadConfig::WasLike(config) => config.partitions,
            WorkloadConfig::Trace { partitions, .. } => *partitions,
        }
    }

    /// Builds the workload; `seed` drives every random choice.
    pub fn build(&self, seed: u64) -> Result<Workload, WorkloadError> {
        match self {
            WorkloadConfig::WasLike(config) => generator::generate(config, seed).map_err(WorkloadError::Config),
            WorkloadConfig::Trace { path, partitions } => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| TraceError::Io { path: path.display().to_string(), reason: e.to_string() })?;
                let trace = read_trace(&text)?;
                Ok(trace_workload(&trace, *partitions, seed)?)
            }
        }
    }
}
