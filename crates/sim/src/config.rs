//! The simulation config (`lowtail sim --config FILE`): cluster, code,
//! frontends, policies, workload and seed, as TOML.
//!
//! Defaults model the paper's testbed (90 storage nodes, RS(6,3), 2004 data
//! partitions, a peak hour) with a service model chosen so that the skewed
//! workload makes hot spots (see the crate doc). Must not: run anything.

use codec::CodeSpec;
use execution::AdmissionMode;
use model::NANOS_PER_SECOND;
use policy::{PolicyKind, PolicySettings};
use serde::{Deserialize, Serialize};
use workload::WorkloadConfig;

/// A bad config.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A field out of range or inconsistent with another.
    #[error("config: {0}")]
    Invalid(String),
    /// The workload could not be built.
    #[error(transparent)]
    Workload(#[from] workload::WorkloadError),
    /// A config file that could not be read, parsed or validated.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Storage nodes and the network.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// Storage nodes (paper: 90).
    pub nodes: u32,
    /// Fixed cost of every task on a node, µs (seek, request handling).
    pub task_overhead_us: u64,
    /// Node processing rate in bytes per second (S_j).
    pub rate_bytes_per_s: u64,
    /// Mean of an extra exponential service delay per task, µs (the Δ+Exp
    /// model; 0 = deterministic service).
    pub exp_mean_us: u64,
    /// Heterogeneity: each node's rate is multiplied by a factor drawn
    /// uniformly from [1 - spread, 1 + spread] (0 = homogeneous).
    pub rate_spread: f64,
    /// One-way network latency between a frontend and a node, µs.
    pub network_latency_us: u64,
    /// Whether a cancelled task that is already in service is aborted (the
    /// node frees at once) or runs to its end. Waiting tasks are always
    /// removed from the queue.
    pub cancel_in_service: bool,
    /// Tasks each node serves at once: 1 (the default) is the FCFS node of Hu et al., whose
    /// tasks wait for each other; more model a key-value server whose task delays are independent
    /// (FAST CLOUD's backend: give it at least as many servers as tasks can be in flight).
    pub servers_per_node: u32,
    /// One node made slower part-way through the run (`[cluster.slow_node]`), as the live
    /// experiment's slow-node runs do; none by default.
    pub slow_node: Option<SlowNodeConfig>,
    /// Nodes that fail and return at given times (`[[cluster.outage]]`); none by default.
    pub outage: Vec<OutageConfig>,
}

/// A node down from `from_ms` until `until_ms` (for good without it): it fails every task it
/// holds when it goes down and every task that reaches it meanwhile, and a probe finds it
/// unreachable, as a live node that crashed and restarted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutageConfig {
    /// The node (0-based).
    pub node: u32,
    /// When it goes down, ms of simulated time.
    pub from_ms: u64,
    /// When it is back, ms of simulated time (absent: never).
    pub until_ms: Option<u64>,
}

/// A node made `factor` times slower (its per-task overhead × factor, its rate ÷ factor) for
/// every task that starts `from_ms` or later into the run. Probes report the slowed figures from
/// then on, as a live node's do.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlowNodeConfig {
    /// The node (0-based).
    pub node: u32,
    /// When it slows, ms of simulated time.
    pub from_ms: u64,
    /// How many times slower (≥ 1).
    pub factor: f64,
}

impl Default for ClusterConfig {
    fn default() -> ClusterConfig {
        ClusterConfig {
            nodes: 90,
            task_overhead_us: 4000,
            rate_bytes_per_s: 5_000_000,
            exp_mean_us: 0,
            rate_spread: 0.0,
            network_latency_us: 250,
            cancel_in_service: false,
            servers_per_node: 1,
            slow_node: None,
            outage: Vec::new(),
        }
    }
}

/// Frontends (controllers).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FrontendConfig {
    /// Frontends; 0 means the paper's choice per policy (8 for per-request
    /// probing policies, 3 for Normal and the lazy ones).
    pub count: u16,
    /// Controller time per decision, µs (table look-ups, bookkeeping).
    pub decision_us: u64,
    /// Round trip of a batch of parallel queue probes, µs.
    pub probe_rtt_us: u64,
    /// Controller time per probe sent, µs.
    pub per_probe_us: u64,
    /// Whether a frontend waits out a decision's probe round trip before deciding the next request
    /// (the paper's controller; default true) or decides on while the replies travel and dispatches
    /// the plan when they are in (lowtail's gateway, whose probes are asynchronous).
    pub probes_block_frontend: bool,
    /// Task slots per frontend (FAST CLOUD's L threads): at most this many tasks in flight, the
    /// rest wait in the frontend's task queue. Absent: unbounded (every task leaves at once).
    pub admission_slots: Option<usize>,
    /// When a request waiting for slots is admitted: `"non_blocking"` (one idle slot, the
    /// default) or `"blocking"` (as many idle slots as the plan starts tasks).
    pub admission: AdmissionMode,
}

impl Default for FrontendConfig {
    fn default() -> FrontendConfig {
        FrontendConfig {
            count: 0,
            decision_us: 50,
            probe_rtt_us: 500,
            per_probe_us: 20,
            probes_block_frontend: true,
            admission_slots: None,
            admission: AdmissionMode::NonBlocking,
        }
    }
}

/// A whole simulation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// Seed of every random choice (placement, workload, frontends, service).
    pub seed: u64,
    /// The code, by canonical name (`rs-6-3`, `lrc-6-2-2`).
    pub code: String,
    /// Policies to run, each on the same workload and placement.
    pub policies: Vec<PolicyKind>,
    /// Cluster and service model.
    pub cluster: ClusterConfig,
    /// Frontends.
    pub frontends: FrontendConfig,
    /// Policy parameters.
    pub policy: PolicySettings,
    /// The workload.
    pub workload: WorkloadConfig,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            seed: 1,
            code: "rs-6-3".into(),
            policies: PolicyKind::ALL.to_vec(),
            cluster: ClusterConfig::default(),
            frontends: FrontendConfig::default(),
            policy: PolicySettings::default(),
            workload: WorkloadConfig::default(),
        }
    }
}

pub(crate) fn us(value: u64) -> u64 {
    value.saturating_mul(NANOS_PER_SECOND / 1_000_000)
}

impl SimConfig {
    /// Reads a config file (TOML) and validates it: every error names the file. A relative trace
    /// path is taken from the config file's folder, so a config and its trace travel together.
    pub fn from_toml_file(path: &std::path::Path) -> Result<SimConfig, ConfigError> {
        let file_error = |reason: String| ConfigError::File { path: path.display().to_string(), reason };
        let text = std::fs::read_to_string(path).map_err(|e| file_error(format!("cannot read it: {e}")))?;
        let mut config: SimConfig =
            toml::from_str(&text).map_err(|e| file_error(format!("not a valid simulation config: {e}")))?;
        if let WorkloadConfig::Trace { path: trace, .. } = &mut config.workload
            && trace.is_relative()
            && let Some(folder) = path.parent()
        {
            *trace = folder.join(&*trace);
        }
        config.validate().map_err(|e| file_error(e.to_string()))?;
        Ok(config)
    }

    /// The code.
    pub fn code_spec(&self) -> Result<CodeSpec, ConfigError> {
        self.code.parse::<CodeSpec>().map_err(|e| ConfigError::Invalid(e.to_string()))
    }

    /// Frontends used for `policy`.
    pub fn frontends_for(&self, policy: PolicyKind) -> u16 {
        if self.frontends.count == 0 { policy.paper_frontends() } else { self.frontends.count }
    }

    /// What the policies are built for: the code and the frontends' admission pool.
    pub fn frontend_setup<'a>(&self, layout: &'a model::CodeLayout) -> policy::FrontendSetup<'a> {
        let blocking = self.frontends.admission == AdmissionMode::Blocking;
        policy::FrontendSetup::new(layout, self.frontends.admission_slots, blocking)
    }

    /// Checks every field; the message names the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |s: String| Err(ConfigError::Invalid(s));
        let spec = self.code_spec()?;
        let layout = model::CodeLayout::new(spec).map_err(|e| ConfigError::Invalid(e.to_string()))?;
        for &policy in &self.policies {
            if let Err(error) = policy::build_read_policy(policy, &self.policy, &self.frontend_setup(&layout)) {
                return invalid(format!("policy {policy}: {error}"));
            }
        }
        if (self.cluster.nodes as usize) < spec.total_units() {
            return invalid(format!(
                "cluster.nodes = {} cannot hold the {} units of a {spec} stripe",
                self.cluster.nodes,
                spec.total_units()
            ));
        }
        if self.cluster.rate_bytes_per_s == 0 {
            return invalid("cluster.rate_bytes_per_s must be positive".into());
        }
        if !(0.0..1.0).contains(&self.cluster.rate_spread) {
            return invalid("cluster.rate_spread must be in [0, 1)".into());
        }
        if let Some(slow) = self.cluster.slow_node {
            if slow.node >= self.cluster.nodes {
                return invalid(format!(
                    "cluster.slow_node.node = {} is not one of the {} nodes (0-based)",
                    slow.node, self.cluster.nodes
                ));
            }
            if !(slow.factor.is_finite() && slow.factor >= 1.0) {
                return invalid(format!("cluster.slow_node.factor = {} must be a number ≥ 1", slow.factor));
            }
        }
        for outage in &self.cluster.outage {
            if outage.node >= self.cluster.nodes {
                return invalid(format!(
                    "cluster.outage.node = {} is not one of the {} nodes (0-based)",
                    outage.node, self.cluster.nodes
                ));
            }
            if outage.until_ms.is_some_and(|until| until <= outage.from_ms) {
                return invalid(format!(
                    "cluster.outage of node {}: until_ms must come after from_ms = {}",
                    outage.node, outage.from_ms
                ));
            }
        }
        let partitions = self.workload.partitions();
        if partitions == 0 || !(partitions as usize).is_multiple_of(spec.data_units()) {
            return invalid(format!(
                "workload partitions = {partitions} must be a positive multiple of k = {} of {spec}",
                spec.data_units()
            ));
        }
        if self.policies.is_empty() {
            return invalid("policies is empty".into());
        }
        if self.cluster.servers_per_node == 0 {
            return invalid("cluster.servers_per_node must be at least 1".into());
        }
        if self.frontends.admission_slots == Some(0) {
            return invalid("frontends.admission_slots must be at least 1 (leave it out for no bound)".into());
        }
        Ok(())
    }
}
