//! `lowtail sim --config FILE`: every policy of one simulation config on one workload and one
//! cluster, in parallel, written as a results folder.
//!
//! Owns: reading and validating the TOML config, the runs, and the folder. Must not: compute
//! statistics (the `report` crate does, from records).

use std::path::Path;

use anyhow::Context;
use report::{Experiment, RunResult, WrittenFiles};
use sim::{Cluster, SimConfig};

use crate::parallel::{Progress, run_parallel};
use crate::{configured_rate, run_info};

/// How to run and what to write.
#[derive(Clone, Debug)]
pub struct SimulateOptions {
    /// Worker threads (one run each at a time).
    pub threads: usize,
    /// Also write every run's records as CSV under `records/` (large at paper scale).
    pub records_csv: bool,
    /// Also write PNGs beside the SVG plots.
    pub png: bool,
}

impl Default for SimulateOptions {
    fn default() -> Self {
        Self { threads: 2, records_csv: false, png: true }
    }
}

/// Reads a simulation config (TOML): a clear error names the file and the field.
pub fn read_config(path: &Path) -> anyhow::Result<SimConfig> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let config: SimConfig =
        toml::from_str(&text).with_context(|| format!("{} is not a valid simulation config", path.display()))?;
    config.validate().with_context(|| format!("{}", path.display()))?;
    Ok(config)
}

/// Runs every policy of `config` and writes the results folder `out_dir`. Returns the runs'
/// results (in the config's policy order) and the files written.
pub fn simulate(
    config: &SimConfig,
    out_dir: &Path,
    options: &SimulateOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> anyhow::Result<(Vec<RunResult>, WrittenFiles)> {
    config.validate()?;
    anyhow::ensure!(!config.policies.is_empty(), "the config names no policies");
    let workload = config.workload.build(config.seed).context("building the workload")?;
    let cluster = Cluster::build(config, workload.partitions).context("building the cluster")?;
    let rate = configured_rate(config);
    let records_dir = out_dir.join("records");
    let results = run_parallel(
        &config.policies,
        options.threads,
        |policy| format!("{} {}", config.code, policy.name()),
        |&policy| -> anyhow::Result<RunResult> {
            let output = sim::run(config, &cluster, policy, &workload);
            let info = run_info(config, &output, rate);
            if options.records_csv {
                report::write_records_csv(&records_dir, &info, &output.records)?;
            }
            Ok(RunResult::from_log(&output.records, &info))
        },
        progress,
    );
    let runs: Vec<RunResult> = results.into_iter().collect::<anyhow::Result<_>>()?;
    let title = format!("lowtail sim: {} on {}, seed {}", policy_list(config), config.code, config.seed);
    let experiment = Experiment {
        title: &title,
        runs: &runs,
        sweep: &[],
        sweep_x_label: "arrival rate (requests/s)",
        findings: "",
        log_x: true,
        png: options.png,
    };
    let files = report::write_experiment(out_dir, &experiment)?;
    Ok((runs, files))
}

fn policy_list(config: &SimConfig) -> String {
    config.policies.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
}
