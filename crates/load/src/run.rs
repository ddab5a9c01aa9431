//! One load run from start to results folder: gateways resolved, workload built, objects loaded,
//! requests sent, records turned into the report.
//!
//! Owns: [`LoadConfig`], its validation (everything that can be refused is refused before a byte is
//! sent or a file written), the progress bars, and the results folder: the report's files
//! (`summary.json`, tables, plots, `report.html`), the records CSV when asked, and `load.json`
//! ([`LoadStats`]: what the run did besides the records). Must not: print (the CLI does), or turn
//! failed requests into an error before the results are written.

use crate::executor::{ExecutorOutput, LoopMode, execute};
use crate::objects::object_sizes;
use crate::s3::{PrepareStats, S3Fetch, check_bucket_everywhere, ensure_bucket, prepare};
use crate::source::{LiveCaps, WorkloadSource, build_live_workload};
use anyhow::{Context, ensure};
use bench::s3_client::{S3Endpoint, measurement_client};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use model::RecordLog;
use serde::Serialize;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Time limit of one request: a hung request becomes a failure instead of a hung run.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Every `DEFAULT_VERIFY_EVERY`-th GET has its bytes compared unless told otherwise.
pub const DEFAULT_VERIFY_EVERY: u64 = 50;

/// Everything a load run needs.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// The gateways, requests spread round-robin over them (≥ 1).
    pub gateways: Vec<S3Endpoint>,
    /// The cluster's code when known (from a manifest), the report's `code` label; `s3` otherwise.
    pub code: Option<String>,
    /// Storage nodes of the cluster when known (0 otherwise).
    pub node_count: u32,
    /// Where the requests come from.
    pub source: WorkloadSource,
    /// Overrides and caps of the workload.
    pub caps: LiveCaps,
    /// Open or closed loop.
    pub mode: LoopMode,
    /// The bucket of the objects.
    pub bucket: String,
    /// Load the objects first (skipping those present with the right size).
    pub prepare: bool,
    /// Compare the bytes of every request whose id is a multiple of this.
    pub verify_every: u64,
    /// Results folder.
    pub out_dir: PathBuf,
    /// Also write the records as CSV under `out_dir/records`.
    pub records_csv: bool,
    /// Also write PNGs beside the SVG plots.
    pub png: bool,
    /// Draw progress bars on stderr (only when it is a terminal).
    pub show_progress: bool,
}

/// What a run did besides its records: `load.json` in the results folder.
#[derive(Clone, Debug, Serialize)]
pub struct LoadStats {
    /// `open-loop` or `closed-loop`.
    pub mode: String,
    /// Gateway endpoints, by the index records name as `frontend`.
    pub gateways: Vec<String>,
    /// The seed of the workload and of the object contents.
    pub seed: u64,
    /// Requests sent.
    pub requests: u64,
    /// Requests that failed (error, wrong length or wrong bytes).
    pub failed: u64,
    /// What loading the objects did (`None`: `--no-prepare`).
    pub prepare: Option<PrepareStats>,
    /// Wall time of loading the objects, in seconds.
    pub prepare_s: f64,
    /// Wall time from the first request's schedule to the last response, in seconds.
    pub run_s: f64,
    /// The first few failure messages.
    pub first_errors: Vec<String>,
}

/// A finished run.
#[derive(Debug)]
pub struct LoadOutcome {
    /// What it did.
    pub stats: LoadStats,
    /// The report's view of its records.
    pub result: report::RunResult,
}

/// The gateways named by `lowtail up` manifests and by endpoint URLs (sharing one set of
/// credentials), manifests first; with the code and node count of the first manifest.
pub fn resolve_gateways(
    manifests: &[PathBuf],
    endpoints: &[String],
    access_key: Option<&str>,
    secret_key: Option<&str>,
    region: &str,
) -> anyhow::Result<(Vec<S3Endpoint>, Option<String>, u32)> {
    ensure!(
        !manifests.is_empty() || !endpoints.is_empty(),
        "no gateway to load: name a cluster with --cluster DIR/cluster.json or a gateway with --endpoint URL"
    );
    let mut gateways = Vec::new();
    let mut code = None;
    let mut node_count = 0;
    let mut first: Option<(&PathBuf, PathBuf)> = None;
    for path in manifests {
        let manifest = launcher::Manifest::read(path)
            .with_context(|| format!("cannot read the cluster manifest {}", path.display()))?;
        // Each `lowtail up` is a cluster of its own with one gateway: objects loaded through one
        // would be missing from the other, and half the reads would fail.
        match &first {
            None => {
                first = Some((path, manifest.dir.clone()));
                code = Some(manifest.code.clone());
                node_count = u32::try_from(manifest.nodes.len()).unwrap_or(u32::MAX);
            }
            Some((first_path, dir)) => ensure!(
                *dir == manifest.dir,
                "{} and {} are two different clusters (each `lowtail up` runs one gateway over its own \
                 store); lowtail load spreads one workload over the gateways of one cluster: name further \
                 gateways of the same cluster with --endpoint",
                first_path.display(),
                path.display()
            ),
        }
        gateways.push(S3Endpoint::from_manifest(&manifest));
    }
    if !endpoints.is_empty() {
        let (Some(access_key), Some(secret_key)) = (access_key, secret_key) else {
            anyhow::bail!("--endpoint needs --access-key and --secret-key");
        };
        for url in endpoints {
            ensure!(
                url.starts_with("http://") || url.starts_with("https://"),
                "--endpoint {url} is not an http(s) URL"
            );
            gateways.push(S3Endpoint {
                url: url.clone(),
                region: region.to_owned(),
                access_key: access_key.to_owned(),
                secret_key: secret_key.to_owned(),
            });
        }
    }
    Ok((gateways, code, node_count))
}

impl LoadConfig {
    fn validate(&self) -> anyhow::Result<()> {
        ensure!(!self.gateways.is_empty(), "no gateway to load");
        ensure!(self.gateways.len() <= usize::from(u16::MAX), "at most {} gateways", u16::MAX);
        ensure!(!self.bucket.is_empty(), "the bucket name is empty");
        ensure!(self.verify_every > 0, "--verify-every must be at least 1");
        match self.mode {
            LoopMode::Open { max_in_flight } => {
                ensure!(
                    (1..=tokio::sync::Semaphore::MAX_PERMITS.min(u32::MAX as usize)).contains(&max_in_flight),
                    "--max-in-flight must be at least 1"
                );
            }
            LoopMode::Closed { clients, .. } => ensure!(clients > 0, "--clients must be at least 1"),
        }
        Ok(())
    }
}

fn progress_bar(show: bool, length: u64, template: &str) -> ProgressBar {
    if !show || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(length), ProgressDrawTarget::stderr());
    bar.set_style(ProgressStyle::with_template(template).expect("a valid progress template").progress_chars("=> "));
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Runs the load and writes the results folder. Failed requests do not make this an error (they
/// are in the records and in `stats.failed`); a refused config, an unreachable bucket or a failed
/// object load do, and then nothing is written.
pub fn run_load(config: &LoadConfig) -> anyhow::Result<LoadOutcome> {
    config.validate()?;
    let live = build_live_workload(&config.source, &config.caps)?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let clients: Vec<aws_sdk_s3::Client> =
        config.gateways.iter().map(|gateway| measurement_client(gateway, "lowtail-load", REQUEST_TIMEOUT)).collect();
    let requests = Arc::new(live.workload.requests);
    let sizes = object_sizes(&requests);

    let prepare_started = Instant::now();
    let prepared = runtime.block_on(async {
        let first_url = &config.gateways[0].url;
        ensure_bucket(&clients[0], &config.bucket).await.with_context(|| format!("through gateway {first_url}"))?;
        check_bucket_everywhere(&clients, &config.gateways, &config.bucket).await?;
        if !config.prepare {
            return anyhow::Ok(None);
        }
        let bar = progress_bar(
            config.show_progress,
            sizes.len() as u64,
            "{spinner} load: objects [{bar:30}] {pos}/{len} ({elapsed})",
        );
        let stats = prepare(&clients, &config.bucket, live.seed, &sizes, &|| bar.inc(1)).await;
        bar.finish_and_clear();
        Ok(Some(stats?))
    })?;
    let prepare_s = prepare_started.elapsed().as_secs_f64();

    let bar = progress_bar(
        config.show_progress,
        requests.len() as u64,
        "{spinner} load: requests [{bar:30}] {pos}/{len} ({elapsed}, eta {eta})",
    );
    let fetch = Arc::new(S3Fetch {
        clients,
        bucket: config.bucket.clone(),
        seed: live.seed,
        sizes,
        verify_every: config.verify_every,
    });
    let run_started = Instant::now();
    let on_done = {
        let bar = bar.clone();
        Box::new(move || bar.inc(1))
    };
    let output: ExecutorOutput =
        runtime.block_on(execute(Arc::clone(&requests), config.gateways.len(), config.mode, fetch, on_done));
    let run_s = run_started.elapsed().as_secs_f64();
    bar.finish_and_clear();

    let mut log = RecordLog::with_capacity(output.records.len(), 0);
    for record in &output.records {
        log.push(*record, &[]);
    }
    let mut info = report::RunInfo::new(
        config.code.as_deref().unwrap_or("s3"),
        config.mode.label(),
        config.gateways.len() as u32,
        config.node_count,
        live.seed,
    );
    if let LoopMode::Open { .. } = config.mode {
        info.arrival_rate_per_s = live.arrival_rate_per_s;
    }
    let stats = LoadStats {
        mode: config.mode.label().to_owned(),
        gateways: config.gateways.iter().map(|gateway| gateway.url.clone()).collect(),
        seed: live.seed,
        requests: output.records.len() as u64,
        failed: output.failed,
        prepare: prepared,
        prepare_s,
        run_s,
        first_errors: output.first_errors,
    };
    let result = write_results(&config.out_dir, &log, &info, &stats, config)?;
    Ok(LoadOutcome { stats, result })
}

fn write_results(
    out_dir: &Path,
    log: &RecordLog,
    info: &report::RunInfo,
    stats: &LoadStats,
    config: &LoadConfig,
) -> anyhow::Result<report::RunResult> {
    if config.records_csv {
        report::write_records_csv(&out_dir.join("records"), info, log)?;
    }
    let result = report::RunResult::from_log(log, info);
    let title = format!(
        "lowtail load: {} over {} gateway(s), {} requests, seed {}",
        stats.mode,
        stats.gateways.len(),
        stats.requests,
        stats.seed
    );
    let findings = format!(
        "Client-side records of a live run: latency runs from each request's scheduled arrival to its last \
         byte (open loop: a wait for an in-flight slot counts); decision_start_ns is when it was sent. \
         The client sees no probes, tasks or degraded reads. {} of {} requests failed.",
        stats.failed, stats.requests
    );
    let experiment = report::Experiment {
        title: &title,
        runs: std::slice::from_ref(&result),
        sweep: &[],
        sweep_x_label: "arrival rate (requests/s)",
        findings: &findings,
        log_x: true,
        png: config.png,
        links: &[],
    };
    report::write_experiment(out_dir, &experiment)?;
    let json = serde_json::to_string_pretty(stats).expect("plain data always serialises");
    std::fs::write(out_dir.join("load.json"), json + "\n")
        .with_context(|| format!("cannot write {}", out_dir.join("load.json").display()))?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateways_need_a_source_and_endpoints_need_credentials() {
        let error = resolve_gateways(&[], &[], None, None, "us-east-1").unwrap_err().to_string();
        assert!(error.contains("--cluster") && error.contains("--endpoint"), "{error}");
        let endpoints = ["http://127.0.0.1:1".to_owned()];
        let error = resolve_gateways(&[], &endpoints, Some("a"), None, "r").unwrap_err().to_string();
        assert!(error.contains("--secret-key"), "{error}");
        let error = resolve_gateways(&[PathBuf::from("/nonexistent/cluster.json")], &[], None, None, "r").unwrap_err();
        assert!(format!("{error:#}").contains("/nonexistent/cluster.json"), "{error:#}");
        let two = ["http://127.0.0.1:1".to_owned(), "http://127.0.0.1:2".to_owned()];
        let (gateways, code, nodes) = resolve_gateways(&[], &two, Some("a"), Some("b"), "r").unwrap();
        assert_eq!(
            gateways.iter().map(|g| g.url.as_str()).collect::<Vec<_>>(),
            ["http://127.0.0.1:1", "http://127.0.0.1:2"]
        );
        assert_eq!((code, nodes), (None, 0));
    }

    #[test]
    fn manifests_of_two_clusters_are_refused() {
        let manifest = |dir: &std::path::Path| {
            let manifest = launcher::Manifest {
                endpoint: "http://127.0.0.1:1".into(),
                region: "us-east-1".into(),
                access_key: "a".into(),
                secret_key: "b".into(),
                code: "rs-6-3".into(),
                dir: dir.to_path_buf(),
                gateway: None,
                nodes: Vec::new(),
            };
            let path = dir.join("cluster.json");
            manifest.write(&path).unwrap();
            path
        };
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (manifest(a.path()), manifest(b.path()));
        let error = resolve_gateways(&[a.clone(), b.clone()], &[], None, None, "r").unwrap_err().to_string();
        assert!(error.contains("two different clusters") && error.contains("--endpoint"), "{error}");
        let (gateways, code, _) = resolve_gateways(&[a.clone(), a], &[], None, None, "r").unwrap();
        assert_eq!((gateways.len(), code.as_deref()), (2, Some("rs-6-3")), "one cluster named twice is one cluster");
    }
}
