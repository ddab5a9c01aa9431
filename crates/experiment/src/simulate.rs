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

/// Reads a simulation config (TOML): a clear error names the file and the field. A relative trace
/// path is taken from the config file's folder, so a config and its trace travel together.
pub fn read_config(path: &Path) -> anyhow::Result<SimConfig> {
    Ok(SimConfig::from_toml_file(path)?)
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
        links: &[],
    };
    let files = report::write_experiment(out_dir, &experiment)?;
    Ok((runs, files))
}

fn policy_list(config: &SimConfig) -> String {
    config.policies.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use workload::WorkloadConfig;

    fn examples() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
    }

    #[test]
    fn every_example_config_reads_and_a_trace_path_is_taken_from_its_folder() {
        let mut seen = 0;
        for entry in std::fs::read_dir(examples()).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if name.starts_with("sim-") && name.ends_with(".toml") {
                let config = read_config(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                if let WorkloadConfig::Trace { path: trace, .. } = &config.workload {
                    assert!(trace.is_file(), "{} names {}", path.display(), trace.display());
                }
                seen += 1;
            }
        }
        assert!(seen >= 3, "the example configs");
    }

    #[test]
    fn bad_configs_are_refused_with_the_file_named() {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("unknown.toml", "seed = 1\nsed = 2\n"),
            ("nodes.toml", "[cluster]\nnodes = 0\n"),
            ("policy.toml", "policies = [\"fastest\"]\n"),
            ("trace.toml", "[workload]\nkind = \"trace\"\npath = \"missing.csv\"\npartitions = 6\n"),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            let outcome = read_config(&path).and_then(|config| {
                simulate(&config, &dir.path().join("out"), &SimulateOptions::default(), &|_| {}).map(|_| ())
            });
            let error = format!("{:#}", outcome.expect_err(name));
            assert!(error.contains(name) || error.contains("missing.csv"), "{name}: {error}");
        }
        assert!(!dir.path().join("out").exists(), "nothing written for a bad config");
    }

    #[test]
    fn a_trace_replays_through_every_policy_into_a_results_folder() {
        let config = read_config(&examples().join("sim-trace.toml")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let options = SimulateOptions { png: false, records_csv: true, ..SimulateOptions::default() };
        let (runs, files) = simulate(&config, dir.path(), &options, &|_| {}).unwrap();
        assert_eq!(runs.len(), config.policies.len());
        for run in &runs {
            assert_eq!(run.summary.requests, 6000, "every line of the sample trace is a request");
        }
        assert!(files.files.iter().any(|f| f.ends_with("summary.json")));
        assert!(dir.path().join("records").read_dir().unwrap().count() >= 2 * runs.len());
    }
}
