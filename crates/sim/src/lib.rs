//! lowtail's simulator: a discrete-event executor that runs the very same
//! policy values as the gateway, in virtual time, deterministically for a
//! seed, and emits the shared record schema.
//!
//! Entry points: [`run`] (one policy on a prepared [`Cluster`] and
//! [`workload::Workload`]) and [`run_config`] (every policy of a
//! [`SimConfig`]). Statistics are the `report` crate's, computed from the
//! records a run returns.
//!
//! The service model (defaults of [`ClusterConfig`]): per task a 4 ms fixed
//! cost plus bytes at 5 MB/s, FCFS, 250 µs one-way network latency; the
//! controller spends 50 µs per decision plus 20 µs per probe and one 500 µs
//! probe round trip when it probes. These stand in for the paper's EC2
//! t2.nano nodes (burstable, network- and EBS-bound), whose figures the
//! paper does not give: with them the default workload (600 requests/s of
//! the WAS-like generator) loads nodes ~15 % on average with hot spots near
//! saturation, and the smallest normal read takes ~5 ms (paper: 3 ms).
//!
//! Fidelity to the paper (Hu et al., SoCC '17). Taken from it: 90 storage
//! nodes, 2004 partitions, 12 M objects, a peak hour (section 4); 3
//! frontends for Normal and the lazy policies, 8 for per-request probing
//! (section 4); T = 1 s (LMLF-Lazy) and 4 s (Opt-Lazy); FCFS queues measured
//! in bytes (section 3). Derived from it: the peak-hour rate was about 112
//! requests/s (Table 2: 1008.7 probes/s ÷ 9 probes = 784.5 ÷ 7 = 112.1), and
//! our probes/s at 112 requests/s match Tables 1 and 2 (270, 67.5, 784.5,
//! 1008.7). Not given by the paper: node service rates, per-task cost, the
//! Normal timeout, object sizes (Fig. 2(b) has no numbers) and the skew
//! exponent; its min latencies (3 ms normal, 12-15 ms probing) imply about
//! 1.2 ms per probe, which the stand-in model (tuned to a higher request rate
//! on faster nodes) does not copy. The experiment's load axis is therefore
//! the request rate over this service model; `examples/sweep.rs` runs it.
//!
//! Must not: contain policy logic, read a clock, spawn threads, or draw
//! unseeded random numbers.

mod config;
mod engine;

pub mod batch;
pub mod fec;
pub mod network;
pub mod reconstruct;
pub mod scripted;
pub mod topology;
pub mod write;

pub use config::{ClusterConfig, ConfigError, FrontendConfig, OutageConfig, SimConfig, SlowNodeConfig};
pub use engine::{ClassDelay, Engine, EngineOutput, EngineSetup, FrontendModel, NodeModel, Outage, Slowdown};

use codec::CodeSpec;
use config::us;
use execution::AdmissionSettings;
use model::{CodeLayout, Placement, RecordLog};
use policy::{PolicyKind, build_read_policy};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use workload::Workload;

/// The static part of a run: code layout, placement and node rates, built
/// once per (config, code) and shared by every policy's run.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// The code.
    pub spec: CodeSpec,
    /// Its recovery sets.
    pub layout: CodeLayout,
    /// Which node holds each unit.
    pub placement: Placement,
    /// Processing rate per node, bytes per second.
    pub rates_bytes_per_s: Vec<f64>,
}

impl Cluster {
    /// Builds the cluster of `config` for `partitions` data partitions:
    /// balanced random placement and per-node rates, from the seed.
    pub fn build(config: &SimConfig, partitions: u32) -> Result<Cluster, ConfigError> {
        config.validate()?;
        let spec = config.code_spec()?;
        let layout = CodeLayout::new(spec).map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let k = spec.data_units() as u32;
        if partitions == 0 || !partitions.is_multiple_of(k) {
            return Err(ConfigError::Invalid(format!("{partitions} partitions are not whole stripes of k = {k}")));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed ^ 0x504c_4143);
        let placement = policy::placement::balanced_random(spec, config.cluster.nodes, partitions / k, &mut rng)
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let spread = config.cluster.rate_spread;
        let base = config.cluster.rate_bytes_per_s as f64;
        let rates_bytes_per_s = (0..config.cluster.nodes)
            .map(|_| if spread > 0.0 { base * rng.random_range(1.0 - spread..=1.0 + spread) } else { base })
            .collect();
        Ok(Cluster { spec, layout, placement, rates_bytes_per_s })
    }
}

/// The output of one policy's run.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// The policy.
    pub policy: PolicyKind,
    /// The code's canonical name.
    pub code: String,
    /// Frontends used.
    pub frontends: u16,
    /// One record per request, by request id.
    pub records: RecordLog,
    /// Service time per node (load and utilisation).
    pub node_busy_ns: Vec<u64>,
    /// Probes of periodic refreshes (per-request probes are in the records).
    pub refresh_probes: u64,
    /// Events the engine processed.
    pub events: u64,
}

/// Runs `policy` on `cluster` over `workload` with the models of `config`.
pub fn run(config: &SimConfig, cluster: &Cluster, policy: PolicyKind, workload: &Workload) -> RunOutput {
    let frontends = config.frontends_for(policy);
    let planners = (0..frontends)
        .map(|_| {
            let built = build_read_policy(policy, &config.policy, &config.frontend_setup(&cluster.layout));
            built.expect("SimConfig::validate builds every policy once") as Box<dyn policy::ReadPolicy>
        })
        .collect();
    let output = run_planners(config, cluster, planners, workload);
    RunOutput {
        policy,
        code: cluster.spec.to_string(),
        frontends,
        records: output.records,
        node_busy_ns: output.node_busy_ns,
        refresh_probes: output.refresh_probes,
        events: output.events,
    }
}

/// Runs the read layers of `profile` (selection and redundancy, composed by
/// [`policy::build_planner`] as the live gateway composes them; this engine models no other layer)
/// on `cluster` over `workload` with `frontends` frontends and the models of `config`. A preset's
/// profile gives exactly its policy's run.
pub fn run_profile(
    config: &SimConfig,
    cluster: &Cluster,
    profile: &policy::Profile,
    frontends: u16,
    workload: &Workload,
) -> Result<engine::EngineOutput, policy::BuildError> {
    let planners = (0..frontends)
        .map(|_| {
            policy::build_planner(profile, &config.policy, &config.frontend_setup(&cluster.layout))
                .map(|planner| planner as Box<dyn policy::ReadPolicy>)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(run_planners(config, cluster, planners, workload))
}

/// Runs one planner per frontend on `cluster` over `workload` with the models of `config`.
fn run_planners(
    config: &SimConfig,
    cluster: &Cluster,
    planners: Vec<Box<dyn policy::ReadPolicy>>,
    workload: &Workload,
) -> engine::EngineOutput {
    assert_eq!(
        workload.partitions,
        cluster.placement.partition_count(),
        "workload and placement disagree on partitions"
    );
    let frontends = u16::try_from(planners.len()).expect("at most u16::MAX frontends");
    let setup = EngineSetup {
        placement: &cluster.placement,
        layout: &cluster.layout,
        nodes: NodeModel {
            overhead_ns: us(config.cluster.task_overhead_us),
            rates_bytes_per_s: cluster.rates_bytes_per_s.clone(),
            exp_mean_ns: us(config.cluster.exp_mean_us),
            cancel_in_service: config.cluster.cancel_in_service,
            servers: config.cluster.servers_per_node as usize,
            class_delays: Vec::new(),
            slowdown: config.cluster.slow_node.map(|slow| Slowdown {
                node: slow.node,
                from_ns: slow.from_ms.saturating_mul(model::NANOS_PER_SECOND / 1000),
                factor: slow.factor,
            }),
            outages: config
                .cluster
                .outage
                .iter()
                .map(|outage| Outage {
                    node: outage.node,
                    from_ns: outage.from_ms.saturating_mul(model::NANOS_PER_SECOND / 1000),
                    until_ns: outage
                        .until_ms
                        .map_or(model::NEVER, |ms| ms.saturating_mul(model::NANOS_PER_SECOND / 1000)),
                })
                .collect(),
        },
        frontends: FrontendModel {
            count: frontends,
            decision_ns: us(config.frontends.decision_us),
            probe_rtt_ns: us(config.frontends.probe_rtt_us),
            per_probe_ns: us(config.frontends.per_probe_us),
            probes_block_frontend: config.frontends.probes_block_frontend,
            admission: AdmissionSettings { slots: config.frontends.admission_slots, mode: config.frontends.admission },
        },
        network_latency_ns: us(config.cluster.network_latency_us),
        // The same engine streams for every policy: common random numbers.
        seed: config.seed,
    };
    Engine::new(setup, planners).run(&workload.requests)
}

/// Builds the workload and cluster of `config` and runs each of its policies.
pub fn run_config(config: &SimConfig) -> Result<Vec<RunOutput>, ConfigError> {
    config.validate()?;
    let workload = config.workload.build(config.seed)?;
    let cluster = Cluster::build(config, workload.partitions)?;
    Ok(config.policies.iter().map(|&policy| run(config, &cluster, policy, &workload)).collect())
}
