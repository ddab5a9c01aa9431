//! Experiments: a configuration or a paper's evaluation run in the simulator and written as a
//! results folder (`summary.json`, tables, plots, `report.html`) by the `report` crate; and the
//! live version of hu2017 ([`live`]), which drives a loopback cluster of real processes and sets
//! the simulator beside it.
//!
//! Owns: the choice of runs (which codes, policies, loads and seeds), running independent runs on
//! several threads with results in a fixed order (so output never depends on scheduling), and
//! judging a paper's claims from the summaries. Must not: compute statistics itself (that is
//! `report`, from records only), contain policy or executor logic, or read a clock outside [`live`]
//! (simulated results depend only on the configuration and seed; the live experiment measures).

pub mod fastcloud;
pub mod fit;
pub mod hu2017;
pub mod live;
pub mod parallel;
pub mod simulate;

pub use hu2017::{Finding, Hu2017Options, Hu2017Outcome, SweepFinding};
pub use parallel::{Progress, run_parallel};
pub use simulate::{SimulateOptions, simulate};

use report::RunInfo;
use sim::{RunOutput, SimConfig};

/// What a report needs to know about a simulated run besides its records.
pub fn run_info(config: &SimConfig, output: &RunOutput, arrival_rate_per_s: Option<f64>) -> RunInfo {
    let mut info = RunInfo::new(
        &output.code,
        output.policy.name(),
        u32::from(output.frontends),
        config.cluster.nodes,
        config.seed,
    );
    info.refresh_probes = output.refresh_probes;
    info.arrival_rate_per_s = arrival_rate_per_s;
    info
}

/// The configured arrival rate of a generated workload (a trace has none).
pub fn configured_rate(config: &SimConfig) -> Option<f64> {
    match &config.workload {
        workload::WorkloadConfig::WasLike(was) => Some(was.rate_per_s),
        _ => None,
    }
}
