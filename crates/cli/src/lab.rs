//! The lab: `lowtail experiment`, `sim`, `load`, `bench` and `engines`, which reproduce papers, run
//! the simulator, replay workloads and measure. Built with the `lab` feature (on by default);
//! `--no-default-features` builds the server alone (`up`, `node`, `gateway`, `admin`) without the
//! experiment, plotting, simulator and benchmark-client crates. Like `main`, it parses arguments
//! and calls the library crates: it must not compute, measure or decide anything itself.

use anyhow::Context;
use bench::engines::{engine_listing, render_engine_listing, select_engine};
use bench::s3_bench::{QUICK_PHASE_DURATION, S3BenchConfig};
use bench::s3_client::S3Endpoint;
use bench::s3_target::{TargetSource, TargetSpec};
use bench::{CodecBenchConfig, Timing, parse_byte_size, run_codec_bench, run_s3_bench};
use clap::{Args, Subcommand};
use codec::CodeSpec;
use std::path::PathBuf;

use crate::print_stdout;

/// `lowtail bench ...`.
pub(crate) fn bench(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Codec(args) => bench_codec(args),
        BenchCommand::S3(args) => bench_s3(*args),
        BenchCommand::Backend(args) => bench_backend(args),
    }
}

/// `lowtail engines`.
pub(crate) fn engines() -> anyhow::Result<()> {
    print_stdout(&render_engine_listing(&engine_listing()?))
}

/// `lowtail experiment ...`.
pub(crate) fn experiment(command: ExperimentCommand) -> anyhow::Result<()> {
    match command {
        ExperimentCommand::Hu2017(args) => run_hu2017(args),
        ExperimentCommand::Hu2017Fit(args) => run_hu2017_fit(args),
        ExperimentCommand::Fastcloud(args) => run_fastcloud(args),
        ExperimentCommand::Ecstore(args) => run_ecstore(args),
        ExperimentCommand::Apls(args) => run_apls(args),
        ExperimentCommand::Xiang(args) => run_xiang(args),
    }
}

#[derive(Debug, Args)]
pub(crate) struct LoadArgs {
    /// A running cluster, by the cluster.json `lowtail up` wrote (its gateway; further gateways of
    /// the same cluster with --endpoint).
    #[arg(long, value_name = "FILE")]
    cluster: Vec<PathBuf>,
    /// A gateway's S3 endpoint URL (repeatable), with --access-key and --secret-key.
    #[arg(long, value_name = "URL")]
    endpoint: Vec<String>,
    /// Access key for --endpoint.
    #[arg(long, value_name = "KEY")]
    access_key: Option<String>,
    /// Secret key for --endpoint.
    #[arg(long, value_name = "KEY")]
    secret_key: Option<String>,
    /// Region for --endpoint.
    #[arg(long, value_name = "REGION", default_value = "us-east-1")]
    region: String,
    /// A `lowtail sim` config: its [workload] and seed are used.
    #[arg(long, value_name = "FILE", conflicts_with = "trace")]
    config: Option<PathBuf>,
    /// A trace of `time, object_id, size` lines (needs --partitions).
    #[arg(long, value_name = "FILE", requires = "partitions")]
    trace: Option<PathBuf>,
    /// Data partitions the trace's objects are grouped into.
    #[arg(long, value_name = "P")]
    partitions: Option<u32>,
    /// Seed of the workload and the object contents (default: the config's, else 1).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Span of the generator's arrivals, in seconds.
    #[arg(long, value_name = "S")]
    duration_s: Option<f64>,
    /// The generator's arrival rate, requests per second.
    #[arg(long, value_name = "PER_S")]
    rate: Option<f64>,
    /// A ~10 s run (10 s of arrivals at no more than 100 requests/s).
    #[arg(long)]
    quick: bool,
    /// Multiply arrival times by this (> 1 slows the run down).
    #[arg(long, value_name = "F")]
    time_scale: Option<f64>,
    /// Zipf exponent of object popularity of the generator (its default: 1.1).
    #[arg(long, value_name = "S")]
    zipf: Option<f64>,
    /// Object sizes (and read lengths) are clamped to this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = load::source::DEFAULT_MAX_OBJECT_BYTES)]
    max_object_bytes: u64,
    /// The generator's object count is clamped to this.
    #[arg(long, value_name = "N", default_value_t = load::source::DEFAULT_MAX_OBJECTS)]
    max_objects: u64,
    /// Open loop: most requests in flight (later ones wait; the wait counts in their latency).
    #[arg(long, value_name = "N", default_value_t = load::executor::DEFAULT_MAX_IN_FLIGHT)]
    max_in_flight: usize,
    /// Closed loop with this many clients instead of the open loop.
    #[arg(long, value_name = "N")]
    clients: Option<usize>,
    /// Closed loop: pause between a response and the client's next request, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0, requires = "clients")]
    think_ms: u64,
    /// Bucket of the objects (created when missing).
    #[arg(long, value_name = "NAME", default_value = load::objects::DEFAULT_BUCKET)]
    bucket: String,
    /// Do not load the objects first (they must be there already).
    #[arg(long)]
    no_prepare: bool,
    /// Compare the bytes of every Nth request (every request has its length checked).
    #[arg(long, value_name = "N", default_value_t = load::run::DEFAULT_VERIFY_EVERY)]
    verify_every: u64,
    /// Results folder (created; files of the same names are replaced).
    #[arg(long, value_name = "DIR", default_value = "load-results")]
    out: PathBuf,
    /// Also write the records as CSV under DIR/records.
    #[arg(long)]
    records: bool,
    /// Write SVG plots only (no PNGs).
    #[arg(long)]
    no_png: bool,
}

#[derive(Debug, Args)]
pub(crate) struct SimArgs {
    /// The simulation config (TOML).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Results folder (created; files of the same names are replaced).
    #[arg(long, value_name = "DIR", default_value = "sim-results")]
    out: PathBuf,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Simulations run at once (each on one thread).
    #[arg(long, value_name = "N", default_value_t = 2)]
    threads: usize,
    /// Also write every run's records as CSV under DIR/records (one row per request, one per task).
    #[arg(long)]
    records: bool,
    /// Write SVG plots only (no PNG copies).
    #[arg(long)]
    no_png: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ExperimentCommand {
    /// Hu et al., SoCC '17 (proactive degraded reads): the seven read policies on RS(6,3) and the
    /// paper's five on LRC(6,2,2) at the paper's scale (90 nodes, 2004 partitions, 12 M objects, a
    /// peak hour), 3 or 8 frontends as in the paper, and a latency-vs-load sweep. Writes
    /// summary.json, findings.json (the paper's claims, judged), findings-sweep.json (the same claims
    /// at every rate of the sweep), tables, plots and report.html.
    Hu2017(Hu2017Args),
    /// Fits the workload parameters Hu et al. do not publish (Zipf exponent of popularity and
    /// arrival rate) to the paper's Normal rows, from Normal runs only, over a grid; prints the
    /// grid and the best point, writes fit.json and plots/fit-loss.svg (docs/simulator.md).
    #[command(name = "hu2017-fit")]
    Hu2017Fit(Hu2017FitArgs),
    /// Liang & Kozat, FAST CLOUD (adaptive FEC), in the simulator: BAFEC's thresholds, Table I (the
    /// model's delay against simulation, 32 cells), fixed-code capacity, the low-load delays of
    /// Fig. 5, and BAFEC and Greedy against every fixed (n,3) code with their code mix (Figs. 6, 7,
    /// 11), from the paper's 1 MB read fit. Writes findings.json (each claim beside the paper's
    /// number), summary.json, table-1.md, adaptive.md, plots and report.html. About 5 minutes on two
    /// cores; --quick about 20 seconds (docs/lab/fastcloud.md).
    Fastcloud(FastcloudArgs),
    /// Abebe et al., EC-Store (access planning, late binding, chunk movement), in the simulator:
    /// R, EC, EC+LB, EC+C, EC+C+M, EC+C+M+LB and lowtail's data-units-first EC over YCSB-E-like
    /// scans (uniform, then Zipf), 10 KB and 1 MB blocks, 1-2 nodes down, Wikipedia-like pages, and
    /// a sweep over the parameters the paper does not publish. Writes findings.json (each claim
    /// beside the paper's number), findings-sweep.json, summary.json, tables.md, plots and
    /// report.html (docs/lab/ecstore.md).
    Ecstore(EcstoreArgs),
    /// Xie et al., APLS (degraded reads reconstructed by every survivor in parallel), in the
    /// simulator, one degraded read at a time: the normal read, lowtail's gateway decode,
    /// traditional, PPR, ECPipe, APLS and lowtail's segmented variant over the paper's grids
    /// (RS(10,4) 64 MB over packet size and helper bandwidth, 256 KB and 4 MB units, RS(6,6) with
    /// q = 6..11) and a per-packet-cost sweep. Writes findings.json, summary.json, tables.md, plots
    /// and report.html (docs/lab/apls.md). Seconds.
    Apls(AplsArgs),
    /// Xiang et al., differentiated latency classes (JLWO: placement, k-of-n scheduling and
    /// per-class bandwidth reservations), in the rack/class network simulator: JLWO's convergence
    /// (Fig. 2), chunk service time against reserved bandwidth (Fig. 3), the C2 sweep (Fig. 4),
    /// access concentration against the oblivious baseline (Fig. 5), file size (Fig. 6) and
    /// arrival rate (Fig. 7), each beside Theorem 1's bound, under reserved and work-conserving
    /// links. Writes findings.json, runs.json, runs.csv, queues.csv, tables.md, plots, report.html
    /// and timing.json (docs/lab/xiang.md). About a minute on two cores; --quick about ten seconds.
    Xiang(XiangArgs),
}

#[derive(Debug, Args)]
pub(crate) struct XiangArgs {
    /// Results folder (created; files of the same names are replaced).
    #[arg(long, value_name = "DIR", default_value = "xiang-results")]
    out: PathBuf,
    /// 100 files per class and 5 000 reads per run instead of 1 000 and 200 000 (noisier verdicts).
    #[arg(long)]
    quick: bool,
    /// Seed of the placement, the access weights and the simulations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Solves and simulations run at once (each on one thread).
    #[arg(long, value_name = "N", default_value_t = 2)]
    threads: usize,
    /// Write SVG plots only (no PNG copies).
    #[arg(long)]
    no_png: bool,
    /// On a loopback cluster of real processes instead of the simulator: etcd, 7 nodes emulating
    /// disks, a gateway with two classes served by reserved shares 0.7 / 0.3; both classes read at
    /// once; writes live.json, live.md and findings-live.json. Needs the etcd binary; about 30 s.
    #[arg(long, conflicts_with_all = ["threads", "no_png"])]
    live: bool,
}

#[derive(Debug, Args)]
pub(crate) struct AplsArgs {
    /// Results folder (created; files of the same names are replaced).
    #[arg(long, value_name = "DIR", default_value = "apls-results")]
    out: PathBuf,
    /// A coarser grid (4 packet sizes, 4 helper bandwidths); with --live, 1 MiB units and fewer GETs.
    #[arg(long)]
    quick: bool,
    /// Simulations run at once (each on one thread).
    #[arg(long, value_name = "N", default_value_t = 2)]
    threads: usize,
    /// Write SVG plots only (no PNG copies).
    #[arg(long)]
    no_png: bool,
    /// On a loopback cluster of real processes instead of the simulator: etcd, 9 nodes emulating
    /// bandwidth-bound disks and a gateway, RS(6,3), one node stopped; each lost unit read by a
    /// ranged GET with the gateway decode and with the segmented read in turn, beside the
    /// simulator's prediction; writes live.json, live.md and findings-live.json. Needs the etcd
    /// binary; about a minute.
    #[arg(long, conflicts_with_all = ["threads", "no_png"])]
    live: bool,
    /// Seed of the objects and the nodes' delays (with --live).
    #[arg(long, default_value_t = 1, requires = "live")]
    seed: u64,
}

#[derive(Debug, Args)]
pub(crate) struct EcstoreArgs {
    /// Results folder (created; files of the same names are replaced).
    #[arg(long, value_name = "DIR", default_value = "ecstore-results")]
    out: PathBuf,
    /// 10^5 blocks and 30 s + 90 s of virtual time instead of 10^6 and 20 + 20 minutes (its
    /// verdicts are noisier).
    #[arg(long)]
    quick: bool,
    /// 5 000 blocks and 3 s + 6 s: checks that every run goes through and every file is written
    /// (seconds; its verdicts say nothing about the paper).
    #[arg(long, conflicts_with = "quick")]
    smoke: bool,
    /// Seed of the placement, the workload and the service times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulations run at once (each on one thread).
    #[arg(long, value_name = "N", default_value_t = 2)]
    threads: usize,
    /// Skip the sweep over unpublished parameters (findings-sweep.json).
    #[arg(long)]
    no_sweep: bool,
    /// Seconds of virtual time before the workload turns Zipf (the warm-up), in place of the size's.
    #[arg(long, value_name = "S", requires = "measure_s", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    warmup_s: Option<u64>,
    /// Seconds of virtual time measured after the warm-up, in place of the size's (the mover moves at
    /// most one unit a second, so its effect grows with this).
    #[arg(long, value_name = "S", requires = "warmup_s", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    measure_s: Option<u64>,
    /// Only these parts of the evaluation, comma-separated: block-size, failures, pages,
    /// single-stripe, sweep (the default point, main, always runs). All of them when left out.
    #[arg(long, value_name = "PART,…", value_delimiter = ',')]
    parts: Option<Vec<experiment::ecstore::Part>>,
    /// Write SVG plots only (no PNG copies).
    #[arg(long)]
    no_png: bool,
    /// On a loopback cluster of real processes instead of the simulator: etcd, 12 nodes emulating
    /// the stand-in disks and a gateway, read through the S3 batch read by 16 closed-loop clients
    /// (EC, EC-data, EC+LB, EC+C, then the mover learning, EC+C+M, EC+C+M+LB); writes live.json,
    /// live.md and findings-live.json. Needs the etcd binary; about 12 minutes, --quick about 2.
    #[arg(long, conflicts_with_all = ["smoke", "no_sweep", "warmup_s", "measure_s", "threads", "parts"])]
    live: bool,
}

#[derive(Debug, Args)]
pub(crate) struct FastcloudArgs {
    /// Results folder (created; files of the same names are replaced).
    #[arg(long, value_name = "DIR", default_value = "fastcloud-results")]
    out: PathBuf,
    /// 20 000 requests per point and one seed instead of 150 000 and three (a smoke run: its
    /// verdicts are noisier).
    #[arg(long)]
    quick: bool,
    /// First seed (of arrivals and task delays); runs use --seeds consecutive seeds.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seeds per point (default 3, or 1 with --quick).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100))]
    seeds: Option<u64>,
    /// Simulations run at once (each on one thread).
    #[arg(long, value_name = "N", default_value_t = 2)]
    threads: usize,
    /// Write SVG plots only (no PNG copies).
    #[arg(long)]
    no_png: bool,
    /// Run on a loopback cluster of real processes instead (etcd, six storage nodes emulating the
    /// paper's 1 MB read delays, one gateway with 16 read task slots): the fit of live task
    /// records, (6,3) against (3,3) at low load, and BAFEC at three loads beside the calibrated
    /// simulator. Needs the etcd binary; about 6 minutes, --quick about 1.5 (docs/lab/fastcloud.md).
    #[arg(long)]
    live: bool,
    /// Run FAST CLOUD in its own setting instead: a gateway in backend mode (RS(3,3), units as keys)
    /// in front of a second lowtail cluster of real processes whose nodes give every task a
    /// heavy-tailed delay; the same GETs through (3,3) and (6,3), the client's tail and the backend
    /// requests per read. Needs the etcd binary; about 4 minutes, --quick about 1 (docs/backend.md).
    #[arg(long, conflicts_with = "live")]
    backend: bool,
}

#[derive(Debug, Args)]
pub(crate) struct Hu2017FitArgs {
    /// Results folder (created; fit.json and plots/fit-loss.* are replaced).
    #[arg(long, value_name = "DIR", default_value = "hu2017-fit")]
    out: PathBuf,
    /// A 2 x 2 grid of 20-second runs instead of 5 x 8 of a simulated hour (about 7 minutes).
    #[arg(long)]
    quick: bool,
    /// Seed of the workloads and runs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulations run at once (each on one thread).
    #[arg(long, value_name = "N", default_value_t = 2)]
    threads: usize,
    /// Write the SVG plot only (no PNG copy).
    #[arg(long)]
    no_png: bool,
}

#[derive(Debug, Args)]
pub(crate) struct Hu2017Args {
    /// Results folder (created; files of the same names are replaced).
    #[arg(long, value_name = "DIR", default_value = "hu2017-results")]
    out: PathBuf,
    /// Two simulated minutes per run instead of a peak hour (seconds of wall time).
    #[arg(long)]
    quick: bool,
    /// Seed of the workload and of every run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Headline arrival rate in requests per second (default: the fitted one, see
    /// docs/simulator.md). The sweep runs at 1/8 to 9/8 of it.
    #[arg(long, value_name = "REQ_PER_S")]
    rate: Option<f64>,
    /// Zipf exponent of object popularity (default: the fitted one, see docs/simulator.md; with
    /// --live, fitted together with the service scale, see docs/lab/hu2017-live.md).
    #[arg(long, value_name = "S")]
    zipf: Option<f64>,
    /// Skip the latency-vs-load sweep.
    #[arg(long)]
    no_sweep: bool,
    /// Run on a loopback cluster of real processes instead (etcd, 30 storage nodes with the service
    /// model, 3 gateways): Normal, LLF-PW2, LMLF-PW2, LMLF-Lazy and Opt-Lazy on RS(6,3) and
    /// LRC(6,2,2), a node made 10x slower during a run, and the simulator calibrated from the live
    /// records on the identical configuration (sim_vs_live.html). Needs the etcd binary; about 15
    /// minutes, --quick about 3 (docs/lab/hu2017-live.md).
    #[arg(long)]
    live: bool,
    /// With --live: the nodes' service time as a multiple of 10 ms per task + bytes at 2 MB/s,
    /// instead of fitting it (with the Zipf exponent) to the paper's Normal rows in a simulated
    /// stand-in of the cluster.
    #[arg(long, value_name = "F", requires = "live")]
    service_scale: Option<f64>,
    /// With --live: niceness of the storage node processes, 0 (the default: the gateways'
    /// priority) to 19 (they yield the CPU to the gateways and the client).
    #[arg(long, value_name = "N", requires = "live", value_parser = clap::value_parser!(i32).range(0..=19))]
    node_nice: Option<i32>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BenchCommand {
    /// Single-thread RS encode and decode throughput, with the memory ceiling.
    ///
    /// For every code and unit size: encode, decode with 1 lost data unit and
    /// decode with m lost data units, in GB/s of data input (k × unit bytes
    /// per second of thread CPU time), the median of several runs on 64-byte
    /// aligned buffers. Each operation's output is verified before it is
    /// timed. Next to each figure: the XOR ceiling (a plain read of the same
    /// k units: what the memory hierarchy allows) and the reed-solomon-erasure
    /// crate encoding the same shape in the same run.
    ///
    /// With --json, stdout is exactly one JSON array of objects with the
    /// fields code, k, m, unit_bytes, op ("encode" | "decode"), lost, gbps,
    /// engine, ceiling_gbps, and baseline_gbps on encode rows.
    Codec(CodecArgs),
    /// S3 PUT, GET and DELETE throughput, p50/p99 latency and server CPU time per operation, with the
    /// AWS SDK for Rust, against lowtail or any S3 endpoint, optionally beside a peer store.
    ///
    /// Without --cluster or --endpoint it starts a fresh local cluster (9 nodes, rs-6-3: `lowtail up`
    /// in a temporary directory, as a child process) and stops it afterwards; with --cluster
    /// DIR/cluster.json it measures that running cluster; with --endpoint URL any S3 store. With
    /// --peer URL it measures a second store as well, the two taking turns phase by phase (the
    /// first turn alternating by round), and prints a comparison (medians over --rounds). Objects go
    /// to --bucket (lowtail-bench), under a prefix of their own; the DELETE phases delete what the
    /// PUT phases wrote.
    ///
    /// For every round, concurrency and object size: a PUT phase (--concurrency clients writing new
    /// keys of random bytes back to back for --duration-s seconds), then a GET phase reading random
    /// keys of those just written (every GET's length is checked, and the bytes of every 50th), then a
    /// DELETE phase deleting each of them once (at most 10 minutes). Requests are not retried:
    /// failures are counted in the `errors` column, and any makes the command exit non-zero after
    /// printing. Each phase also reads the CPU time (user + system) of the target's server processes:
    /// lowtail's from its manifest, an endpoint's from --pid / --pid-of and the peer's from --peer-pid
    /// / --peer-pid-of; none given, none shown (docs/benchmarks.md).
    ///
    /// With --json, stdout is exactly one JSON array of objects with the fields target, round, op
    /// ("put" | "get" | "delete"), object_bytes, requests, errors, ops_per_s, mb_per_s, p50_ms,
    /// p99_ms, max_ms, concurrency, gateway_rss_peak_mib (the gateway's peak resident memory during
    /// the phase; null when it does not run on this host), server_cpu_ms_per_op (null when not
    /// measured) and host_idle_pct.
    S3(Box<S3Args>),
    /// Measure an S3 service's request delays and predict whether (n,k) coding in front of it
    /// (a gateway in backend mode) pays off: FAST CLOUD's section IV measurement, then its model.
    ///
    /// --threads clients PUT --requests distinct objects of --chunk-bytes, then GET as many at
    /// random, then delete them; every request is timed and none retried. Prints each operation's
    /// delay quantiles beside the Δ + Exp fit of them (the paper's: the worst 0.1 % dropped, 1/μ =
    /// std, Δ = mean − std) and the lag-1 correlation of a thread's consecutive delays (the model
    /// assumes independence); then, by the GET fit, every read code (n, k) for n = k..n_max with
    /// --slots task slots: its delay with no queueing and at 10, 50 and 90 % of the uncoded
    /// capacity, its capacity, its storage and requests per read, and a verdict. Without --endpoint
    /// or --cluster it measures a fresh local lowtail cluster (docs/backend.md).
    Backend(BackendArgs),
}

/// The store a benchmark measures: a fresh local cluster unless told otherwise.
#[derive(Debug, Args)]
pub(crate) struct TargetArgs {
    /// The cluster.json of a running cluster (written by `lowtail up`) instead of a fresh cluster.
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,
    /// Any S3 endpoint (http://) instead of lowtail, with --access-key and --secret-key.
    #[arg(long, value_name = "URL", conflicts_with = "cluster", requires_all = ["access_key", "secret_key"])]
    endpoint: Option<String>,
    /// Access key for --endpoint.
    #[arg(long, value_name = "KEY", requires = "endpoint")]
    access_key: Option<String>,
    /// Secret key for --endpoint.
    #[arg(long, value_name = "KEY", requires = "endpoint")]
    secret_key: Option<String>,
    /// Region for --endpoint [default: us-east-1].
    #[arg(long, value_name = "REGION", requires = "endpoint")]
    region: Option<String>,
}

impl TargetArgs {
    /// The store these arguments name.
    fn source(self) -> anyhow::Result<TargetSource> {
        Ok(match (self.endpoint, self.cluster) {
            (Some(url), _) => TargetSource::Endpoint(s3_endpoint(url, self.access_key, self.secret_key, self.region)),
            (None, Some(path)) => TargetSource::Manifest(path),
            (None, None) => TargetSource::Fresh(
                std::env::current_exe().context("cannot find the lowtail executable to start nodes with")?,
            ),
        })
    }
}

#[derive(Debug, Args)]
pub(crate) struct BackendArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Bucket to measure in (created if missing; the objects are deleted after).
    #[arg(long, value_name = "NAME", default_value = bench::s3_bench::DEFAULT_BUCKET)]
    bucket: String,
    /// Object size: the chunk size of the prediction.
    #[arg(long, value_name = "SIZE", default_value = "1MiB", value_parser = parse_byte_size)]
    chunk_bytes: usize,
    /// Requests in flight (the paper's 16 saturated threads).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: u32,
    /// Requests per operation.
    #[arg(long, value_name = "N", default_value_t = 2000, value_parser = clap::value_parser!(u32).range(10..=10_000_000))]
    requests: u32,
    /// k of the predicted codes.
    #[arg(long, value_name = "K", default_value_t = 3)]
    k: usize,
    /// Longest predicted code.
    #[arg(long, value_name = "N", default_value_t = 6)]
    n_max: usize,
    /// Task slots L of the predicted gateway (its [data.admission] slots).
    #[arg(long, value_name = "L", default_value_t = 16)]
    slots: usize,
    /// Seed of the bodies and the read order.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Print the report as JSON instead.
    #[arg(long)]
    json: bool,
}

fn bench_backend(args: BackendArgs) -> anyhow::Result<()> {
    let source = args.target.source()?;
    let config = bench::backend_bench::BackendBenchConfig {
        bucket: args.bucket,
        chunk_bytes: args.chunk_bytes,
        threads: args.threads as usize,
        requests: args.requests as usize,
        k: args.k,
        n_max: args.n_max,
        slots: args.slots,
        seed: args.seed,
    };
    let report = bench::backend_bench::run_backend_bench(source, &config, !args.json)?;
    let text = if args.json {
        serde_json::to_string_pretty(&report).expect("the report is plain data")
    } else {
        bench::backend_bench::render_text(&report)
    };
    print_stdout(&format!("{text}\n"))
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("peer_store").args(["peer", "peer_cluster"])))]
pub(crate) struct S3Args {
    #[command(flatten)]
    target: TargetArgs,
    /// The measured target's name in the rows and tables.
    #[arg(long, value_name = "NAME", default_value = bench::s3_target::LOWTAIL_TARGET_NAME)]
    name: String,
    /// A server process of --endpoint on this host, whose CPU time is read (repeatable).
    #[arg(long, value_name = "PID", requires = "endpoint")]
    pid: Vec<u32>,
    /// Every process named NAME (/proc/PID/comm) is a server process of --endpoint (repeatable).
    #[arg(long, value_name = "NAME", requires = "endpoint")]
    pid_of: Vec<String>,
    /// An S3 endpoint (http://) measured as well, interleaved phase by phase, with --peer-access-key
    /// and --peer-secret-key; a second table compares the two.
    #[arg(long, value_name = "URL", requires_all = ["peer_access_key", "peer_secret_key"])]
    peer: Option<String>,
    /// Access key for --peer.
    #[arg(long, value_name = "KEY", requires = "peer")]
    peer_access_key: Option<String>,
    /// Secret key for --peer.
    #[arg(long, value_name = "KEY", requires = "peer")]
    peer_secret_key: Option<String>,
    /// Region for --peer [default: us-east-1].
    #[arg(long, value_name = "REGION", requires = "peer")]
    peer_region: Option<String>,
    /// A second lowtail cluster measured as well, by its manifest (another build, other settings),
    /// interleaved phase by phase as --peer is; its nodes are faulted like the target's.
    #[arg(long, value_name = "FILE", conflicts_with = "peer")]
    peer_cluster: Option<PathBuf>,
    /// The storage node of --peer-cluster the scenarios fault [default: 0].
    #[arg(long, value_name = "ID", requires = "peer_cluster")]
    peer_victim_node: Option<u32>,
    /// The peer's name in the rows and tables [default: peer].
    #[arg(long, value_name = "NAME", requires = "peer_store")]
    peer_name: Option<String>,
    /// A server process of --peer on this host, whose CPU time is read (repeatable).
    #[arg(long, value_name = "PID", requires = "peer")]
    peer_pid: Vec<u32>,
    /// Every process named NAME (/proc/PID/comm, e.g. minio) is a server process of --peer,
    /// resolved at the start; this process and lowtail's are left out (repeatable).
    #[arg(long, value_name = "NAME", requires = "peer")]
    peer_pid_of: Vec<String>,
    /// Bucket of the objects (created on every target when missing).
    #[arg(long, value_name = "NAME", default_value = bench::s3_bench::DEFAULT_BUCKET)]
    bucket: String,
    /// Times the whole sequence of phases runs; the comparison takes medians over rounds.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    /// Object sizes, comma-separated, with an optional B, KiB, MiB or GiB suffix.
    #[arg(long, value_name = "SIZES", value_delimiter = ',', default_value = "4KiB,1MiB", value_parser = parse_byte_size)]
    sizes: Vec<usize>,
    /// Requests in flight (closed loop), comma-separated: every concurrency has phases of its own.
    #[arg(long, value_name = "N,..", value_delimiter = ',', default_value = "8", value_parser = clap::value_parser!(u32).range(1..=1024))]
    concurrency: Vec<u32>,
    /// Seconds each PUT and GET phase runs (default 10, or 2 with --quick).
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(u32).range(1..=3600))]
    duration_s: Option<u32>,
    /// A fast smoke run: 2 s phases instead of 10 s.
    #[arg(long)]
    quick: bool,
    /// Seed of the object contents and of the GET key choice.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Print a JSON array on stdout instead of the tables (and no progress bar).
    #[arg(long)]
    json: bool,
    /// Also write the rows as a JSON array to FILE (replaced), whatever stdout shows.
    #[arg(long, value_name = "FILE")]
    json_out: Option<PathBuf>,
    /// Adversities to measure beside healthy, comma-separated: fail-slow (the victim stopped and
    /// continued in a duty cycle), down (the victim killed, started again after), rebuild (the
    /// victim killed, its data directory emptied, started again before the phases, which run
    /// while the store rebuilds it), hot (a Zipf GET phase whose most popular objects share the
    /// victim node). Healthy is always measured.
    #[arg(long, value_name = "NAMES", value_delimiter = ',', value_parser = parse_scenario)]
    scenarios: Vec<bench::s3_adversity::Scenario>,
    /// The lowtail storage node the scenarios fault [default: 0] (with --cluster or a fresh cluster).
    #[arg(long, value_name = "ID", conflicts_with = "endpoint")]
    victim_node: Option<u32>,
    /// The server process of --endpoint the scenarios fault.
    #[arg(long, value_name = "PID", requires = "endpoint")]
    victim_pid: Option<u32>,
    /// The server process of --peer the scenarios fault (one of MinIO's, for example).
    #[arg(long, value_name = "PID", requires = "peer")]
    peer_victim_pid: Option<u32>,
    /// rebuild: the data directory of --victim-pid, emptied (a lowtail node's comes from the manifest).
    #[arg(long, value_name = "DIR", requires = "victim_pid")]
    victim_dir: Option<PathBuf>,
    /// rebuild: the data directory of --peer-victim-pid, emptied (a MinIO process's drive).
    #[arg(long, value_name = "DIR", requires = "peer_victim_pid")]
    peer_victim_dir: Option<PathBuf>,
    /// fail-slow: the share of every period the victim is stopped, in percent.
    #[arg(long, value_name = "PCT", default_value_t = 90)]
    fail_slow_stopped_pct: u32,
    /// fail-slow: the period of one stop and one run, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 100)]
    fail_slow_period_ms: u64,
}

/// A scenario by name; `healthy` is measured anyway and so is dropped later.
fn parse_scenario(name: &str) -> Result<bench::s3_adversity::Scenario, String> {
    bench::s3_adversity::Scenario::parse(name).map_err(|error| error.to_string())
}

#[derive(Debug, Args)]
pub(crate) struct CodecArgs {
    /// Print a JSON array on stdout instead of a table (and no progress bar).
    #[arg(long)]
    json: bool,
    /// Run on this engine (see `lowtail engines`) instead of the fastest supported one.
    #[arg(long, value_name = "NAME")]
    engine: Option<String>,
    /// A fast smoke run: 5 runs of at least 5 ms instead of 15 of at least 20 ms.
    #[arg(long)]
    quick: bool,
    /// RS codes to measure, comma-separated.
    #[arg(long, value_name = "CODES", value_delimiter = ',', default_value = "rs-6-3,rs-10-4,rs-12-4")]
    codes: Vec<CodeSpec>,
    /// Unit sizes, comma-separated, with an optional B, KiB, MiB or GiB suffix.
    #[arg(long, value_name = "SIZES", value_delimiter = ',', default_value = "64KiB,1MiB", value_parser = parse_byte_size)]
    unit_sizes: Vec<usize>,
    /// Timed runs per figure (the median is reported); overrides the count --quick implies.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    runs: Option<u32>,
}

/// A progress bar over `total` runs on stderr (hidden when stderr is not a terminal).
fn runs_progress(total: usize, what: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{what} [{{bar:30}}] {{pos}}/{{len}} runs {{msg}} ({{elapsed}})"
        ))
        .expect("a valid progress template")
        .progress_chars("=> "),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// One table per code, in order of first appearance.
fn print_tables<'a>(summaries: impl Iterator<Item = &'a report::Summary>) {
    let summaries: Vec<&report::Summary> = summaries.collect();
    let mut codes: Vec<&str> = Vec::new();
    for summary in &summaries {
        if !codes.contains(&summary.run.code.as_str()) {
            codes.push(&summary.run.code);
        }
    }
    for code in codes {
        let of_code: Vec<&report::Summary> = summaries.iter().copied().filter(|s| s.run.code == code).collect();
        println!("{code}:");
        println!("{}", report::text_table(&of_code).trim_end());
        println!();
    }
}

pub(crate) fn run_sim(args: SimArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.run.threads > 0, "--threads must be at least 1");
    let config = experiment::simulate::read_config(&args.config)?;
    let bar = runs_progress(config.policies.len(), "sim");
    let options =
        experiment::SimulateOptions { threads: args.run.threads, records_csv: args.run.records, png: !args.run.no_png };
    let started = std::time::Instant::now();
    let (runs, _files) = experiment::simulate(&config, &args.out, &options, &|progress| {
        bar.set_position(progress.done as u64);
        bar.set_message(progress.label);
    })?;
    bar.finish_and_clear();
    print_tables(runs.iter().map(|run| &run.summary));
    println!(
        "{} runs in {:.1} s; results in {} (open report.html)",
        runs.len(),
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    Ok(())
}

fn run_hu2017(args: Hu2017Args) -> anyhow::Result<()> {
    if args.live {
        return run_hu2017_live(args);
    }
    anyhow::ensure!(args.run.threads > 0, "--threads must be at least 1");
    if let Some(rate) = args.rate {
        anyhow::ensure!(rate.is_finite() && rate > 0.0, "--rate must be a positive number of requests per second");
    }
    let options = experiment::Hu2017Options {
        quick: args.quick,
        seed: args.seed,
        threads: args.run.threads,
        records_csv: args.run.records,
        png: !args.run.no_png,
        sweep_factors: if args.no_sweep { Vec::new() } else { experiment::hu2017::SWEEP_FACTORS.to_vec() },
        rate_per_s: args.rate,
        zipf_exponent: args.zipf,
        ..experiment::Hu2017Options::default()
    };
    let runs: usize = experiment::hu2017::codes().iter().map(|(_, policies)| policies.len()).sum();
    let bar = runs_progress(runs * (1 + options.sweep_factors.len()), "hu2017");
    let started = std::time::Instant::now();
    let outcome = experiment::hu2017::run(&options, &args.out, &|progress| {
        bar.set_position(progress.done as u64);
        bar.set_message(progress.label);
    })?;
    bar.finish_and_clear();
    print_tables(outcome.runs.iter().map(|run| &run.summary));
    print_findings(&outcome.findings);
    if !outcome.sweep_findings.is_empty() {
        println!("across the sweep (findings-sweep.json):");
        for line in experiment::hu2017::where_claims_hold(&outcome.sweep_findings) {
            println!("  {line}");
        }
        println!("  {}", experiment::hu2017::every_claim_line(&outcome.sweep_findings));
    }
    println!(
        "{} headline runs of {} requests at {:.0} req/s and {} sweep runs in {:.1} s; results in {} (open report.html)",
        outcome.runs.len(),
        outcome.requests,
        outcome.rate_per_s,
        outcome.sweep.len(),
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    Ok(())
}

fn run_hu2017_fit(args: Hu2017FitArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.threads > 0, "--threads must be at least 1");
    let options = experiment::fit::FitOptions {
        png: !args.no_png,
        ..experiment::fit::FitOptions::new(args.quick, args.seed, args.threads)
    };
    let bar = runs_progress(options.runs(), "hu2017-fit");
    let started = std::time::Instant::now();
    let outcome = experiment::fit::run_fit(&options, &args.out, &|progress| {
        bar.set_position(progress.done as u64);
        bar.set_message(progress.label);
    })?;
    bar.finish_and_clear();
    let mut out = String::new();
    for paper in &outcome.paper {
        out.push_str(&format!(
            "paper Normal {:<10} mean {:.3}  median {:.3}  p95 {:.3}  min {:.3} s\n",
            paper.code, paper.mean_s, paper.median_s, paper.p95_s, paper.min_s
        ));
    }
    out.push_str(&format!(
        "{:>5} {:>6}  {:<10} {:>6} {:>8} {:>8} {:>8} {:>8}  {:>6} {:>6} {:>6}  {:>7}\n",
        "zipf", "rate", "code", "load", "mean", "median", "p95", "min", "e_med", "e_p95", "e_mean", "loss"
    ));
    for (index, point) in outcome.points.iter().enumerate() {
        for (row_index, row) in point.rows.iter().enumerate() {
            let e = row.log_errors;
            let loss = if row_index == 0 { format!("{:7.3}", point.loss) } else { String::new() };
            let mark = if index == outcome.best && row_index == 0 { " <- best" } else { "" };
            out.push_str(&format!(
                "{:>5} {:>6.0}  {:<10} {:>6.3} {:>8.4} {:>8.4} {:>8.4} {:>8.4}  {:>6.2} {:>6.2} {:>6.2}  {:>7}{mark}\n",
                point.zipf_exponent,
                point.rate_per_s,
                row.code,
                row.load,
                row.mean_s,
                row.median_s,
                row.p95_s,
                row.min_s,
                e[0],
                e[1],
                e[2],
                loss
            ));
        }
    }
    let best = outcome.best_point();
    out.push_str(&format!(
        "best: Zipf {} at {:.0} requests/s (loss {:.3}); {} runs in {:.1} s; fit.json and plots/fit-loss.svg in {}\n\
         run the experiment there: lowtail experiment hu2017 --zipf {} --rate {:.0}\n",
        best.zipf_exponent,
        best.rate_per_s,
        best.loss,
        options.runs(),
        started.elapsed().as_secs_f64(),
        args.out.display(),
        best.zipf_exponent,
        best.rate_per_s
    ));
    print_stdout(&out)
}

fn print_findings(findings: &[experiment::Finding]) {
    for finding in findings {
        println!("[{}] {}: {} ({})", finding.verdict(), finding.code, finding.claim, finding.measured);
    }
}

fn print_paper_findings(findings: &[experiment::fastcloud::PaperFinding]) {
    for finding in findings {
        let verdict = match finding.holds {
            Some(true) => "holds",
            Some(false) => "DOES NOT HOLD",
            None => "reported",
        };
        println!(
            "[{verdict}] {} {}\n    paper: {}\n    lowtail: {}",
            finding.id, finding.claim, finding.paper, finding.measured
        );
    }
}

/// The options of FAST CLOUD's runs on real processes.
fn live_options(quick: bool, seed: u64) -> anyhow::Result<experiment::fastcloud::live::LiveOptions> {
    let etcd_binary = launcher::find_etcd_binary().context(
        "the live experiment needs the etcd binary (Debian: apt-get install etcd-server), on the PATH or in LOWTAIL_ETCD_BIN",
    )?;
    Ok(experiment::fastcloud::live::LiveOptions {
        quick,
        seed,
        binary: std::env::current_exe().context("cannot find the lowtail executable to start the cluster with")?,
        etcd_binary,
    })
}

fn run_fastcloud_backend(args: FastcloudArgs) -> anyhow::Result<()> {
    run_on_processes(
        &args.out,
        args.quick,
        args.seed,
        experiment::fastcloud::backend::step_count(),
        "fastcloud backend",
        |options, out, progress| {
            experiment::fastcloud::backend::run(options, out, progress)
                .map(|outcome| (outcome.markdown, outcome.findings))
        },
    )
}

fn run_fastcloud_live(args: FastcloudArgs) -> anyhow::Result<()> {
    run_on_processes(
        &args.out,
        args.quick,
        args.seed,
        experiment::fastcloud::live::step_count(),
        "fastcloud live",
        |options, out, progress| {
            experiment::fastcloud::live::run(options, out, progress).map(|outcome| (outcome.markdown, outcome.findings))
        },
    )
}

/// Runs an experiment on real processes (FAST CLOUD's, EC-Store's) with a progress bar, then prints its
/// table and findings.
fn run_on_processes(
    out: &std::path::Path,
    quick: bool,
    seed: u64,
    steps: usize,
    label: &'static str,
    run: impl FnOnce(
        &experiment::fastcloud::live::LiveOptions,
        &std::path::Path,
        &(dyn Fn(experiment::parallel::Progress) + Sync),
    ) -> anyhow::Result<(String, Vec<experiment::fastcloud::PaperFinding>)>,
) -> anyhow::Result<()> {
    let options = live_options(quick, seed)?;
    let bar = runs_progress(steps, label);
    let started = std::time::Instant::now();
    let (markdown, findings) = run(&options, out, &|progress| {
        bar.set_position(progress.done as u64);
        bar.set_message(progress.label);
    })?;
    bar.finish_and_clear();
    println!("{markdown}");
    print_paper_findings(&findings);
    println!("{label} runs in {:.1} s; results in {}", started.elapsed().as_secs_f64(), out.display());
    Ok(())
}

fn run_fastcloud(args: FastcloudArgs) -> anyhow::Result<()> {
    if args.live {
        return run_fastcloud_live(args);
    }
    if args.backend {
        return run_fastcloud_backend(args);
    }
    anyhow::ensure!(args.threads > 0, "--threads must be at least 1");
    let options = experiment::fastcloud::FastcloudOptions {
        quick: args.quick,
        first_seed: args.seed,
        seeds: args.seeds.unwrap_or(if args.quick { 1 } else { 3 }),
        threads: args.threads,
        png: !args.no_png,
    };
    let started = std::time::Instant::now();
    let outcome = with_runs_progress(experiment::fastcloud::run_count(&options), "fastcloud", |progress| {
        experiment::fastcloud::run(&options, &args.out, progress)
    })?;
    println!("Table I, |D_sim - D~| / D~ in percent, lowtail [paper]:\n{}", outcome.table_markdown);
    println!("{}", outcome.adaptive_markdown);
    print_paper_findings(&outcome.findings);
    print_simulations_done(outcome.runs, started, &args.out);
    Ok(())
}

/// Runs `run` behind a progress bar of `total` simulations.
fn with_runs_progress<T>(
    total: usize,
    what: &str,
    run: impl FnOnce(&(dyn Fn(experiment::Progress) + Sync)) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let bar = runs_progress(total, what);
    let outcome = run(&|progress| {
        bar.set_position(progress.done as u64);
        bar.set_message(progress.label);
    });
    bar.finish_and_clear();
    outcome
}

fn print_simulations_done(runs: usize, started: std::time::Instant, out: &std::path::Path) {
    println!(
        "{runs} simulations in {:.1} s; results in {} (open report.html)",
        started.elapsed().as_secs_f64(),
        out.display()
    );
}

fn run_ecstore(args: EcstoreArgs) -> anyhow::Result<()> {
    if args.live {
        return run_ecstore_live(args);
    }
    anyhow::ensure!(args.threads > 0, "--threads must be at least 1");
    let size = match (args.quick, args.smoke) {
        (_, true) => experiment::ecstore::Size::Smoke,
        (true, _) => experiment::ecstore::Size::Quick,
        _ => experiment::ecstore::Size::Paper,
    };
    let options = experiment::ecstore::EcstoreOptions {
        size,
        seed: args.seed,
        threads: args.threads,
        png: !args.no_png,
        sweep: !args.no_sweep,
        durations_s: args.warmup_s.zip(args.measure_s),
        parts: args.parts,
    };
    let started = std::time::Instant::now();
    let outcome = with_runs_progress(experiment::ecstore::run_count(&options), "ecstore", |progress| {
        experiment::ecstore::run(&options, &args.out, progress)
    })?;
    println!("{}", outcome.markdown);
    print_paper_findings(&outcome.findings);
    print_paper_findings(&outcome.sweep_findings);
    print_simulations_done(outcome.runs, started, &args.out);
    Ok(())
}

fn run_apls(args: AplsArgs) -> anyhow::Result<()> {
    if args.live {
        return run_on_processes(
            &args.out,
            args.quick,
            args.seed,
            experiment::apls::live::step_count(),
            "apls live",
            |options, out, progress| {
                experiment::apls::live::run(options, out, progress).map(|outcome| (outcome.markdown, outcome.findings))
            },
        );
    }
    anyhow::ensure!(args.threads > 0, "--threads must be at least 1");
    let options = experiment::apls::AplsOptions { quick: args.quick, threads: args.threads, png: !args.no_png };
    let started = std::time::Instant::now();
    let outcome = with_runs_progress(experiment::apls::run_count(&options), "apls", |progress| {
        experiment::apls::run(&options, &args.out, progress)
    })?;
    println!("{}", outcome.markdown);
    print_paper_findings(&outcome.findings);
    print_simulations_done(outcome.runs, started, &args.out);
    Ok(())
}

fn run_xiang(args: XiangArgs) -> anyhow::Result<()> {
    if args.live {
        return run_on_processes(
            &args.out,
            args.quick,
            args.seed,
            experiment::xiang::live::step_count(),
            "xiang live",
            |options, out, progress| {
                experiment::xiang::live::run(options, out, progress).map(|outcome| (outcome.markdown, outcome.findings))
            },
        );
    }
    anyhow::ensure!(args.threads > 0, "--threads must be at least 1");
    let options = experiment::xiang::XiangOptions {
        quick: args.quick,
        threads: args.threads,
        png: !args.no_png,
        seed: args.seed,
    };
    let started = std::time::Instant::now();
    let outcome = with_runs_progress(experiment::xiang::run_count(), "xiang", |progress| {
        experiment::xiang::run(&options, &args.out, progress)
    })?;
    println!("{}", outcome.markdown);
    print_paper_findings(&outcome.findings);
    print!("{}", outcome.timing_summary);
    print_simulations_done(outcome.runs, started, &args.out);
    Ok(())
}

fn run_ecstore_live(args: EcstoreArgs) -> anyhow::Result<()> {
    run_on_processes(
        &args.out,
        args.quick,
        args.seed,
        experiment::ecstore::live::step_count(),
        "ecstore live",
        |options, out, progress| {
            experiment::ecstore::live::run(options, out, progress).map(|outcome| (outcome.markdown, outcome.findings))
        },
    )
}

fn run_hu2017_live(args: Hu2017Args) -> anyhow::Result<()> {
    let etcd_binary = launcher::find_etcd_binary().context(
        "the live experiment needs the etcd binary (Debian: apt-get install etcd-server), on the PATH or in LOWTAIL_ETCD_BIN",
    )?;
    let options = experiment::live::LiveOptions {
        quick: args.quick,
        seed: args.seed,
        binary: std::env::current_exe().context("cannot find the lowtail executable to start the cluster with")?,
        etcd_binary,
        work_dir: None,
        threads: args.run.threads,
        png: !args.run.no_png,
        records_csv: args.run.records,
        rate_per_s: args.rate,
        duration_s: None,
        zipf_exponent: args.zipf,
        service_scale: args.service_scale,
        node_nice: args.node_nice.unwrap_or(experiment::live::NODE_NICE),
    };
    let bar = runs_progress(options.steps(), "hu2017 live");
    let outcome = experiment::live::run(&options, &args.out, &|progress| {
        bar.set_position(progress.done as u64);
        bar.set_message(progress.label);
    })?;
    bar.finish_and_clear();
    print_tables(outcome.pairs.iter().map(|pair| &pair.live.summary));
    for pair in &outcome.pairs {
        let (live, sim) = (pair.live.summary.request_latency, pair.sim.summary.request_latency);
        if let (Some(live), Some(sim)) = (live, sim) {
            println!(
                "{} {}: live p50/p95/p99 {:.1}/{:.1}/{:.1} ms, sim {:.1}/{:.1}/{:.1} ms",
                pair.live.summary.run.code,
                pair.live.summary.run.policy,
                live.median_s * 1e3,
                live.p95_s * 1e3,
                live.p99_s * 1e3,
                sim.median_s * 1e3,
                sim.p95_s * 1e3,
                sim.p99_s * 1e3
            );
        }
    }
    for row in &outcome.timeout_sensitivity {
        println!(
            "{} normal at a {} ms timeout (simulated): p50/p95 {:.1}/{:.1} ms; LMLF-PW2 against it: p50 {:+.1} %, \
             p95 {:+.1} %",
            row.code,
            row.normal_timeout_ms,
            row.normal_median * 1e3,
            row.normal_p95 * 1e3,
            row.lmlf_pw2_median_change_pct,
            row.lmlf_pw2_p95_change_pct
        );
    }
    print_findings(&outcome.findings);
    if outcome.regime.fitted() {
        println!("Regime fitted: {} (regime.json)", experiment::live::page::regime_text(&outcome.regime));
    }
    println!(
        "{} live runs of {} requests at {:.0} req/s, Zipf {}, service scale {}, in {:.0} s; results in {} (open \
         report.html and sim_vs_live.html)",
        outcome.pairs.len(),
        outcome.requests,
        outcome.rate_per_s,
        outcome.zipf_exponent,
        outcome.service_scale,
        outcome.wall_s,
        args.out.display()
    );
    Ok(())
}

fn bench_codec(args: CodecArgs) -> anyhow::Result<()> {
    let mut timing = if args.quick { Timing::QUICK } else { Timing::STANDARD };
    if let Some(runs) = args.runs {
        timing.runs = runs as usize;
    }
    let config = CodecBenchConfig {
        codes: args.codes,
        unit_sizes_bytes: args.unit_sizes,
        timing,
        engine: select_engine(args.engine.as_deref())?,
        show_progress: !args.json,
    };
    let report = run_codec_bench(&config).context("codec benchmark failed")?;
    let text = if args.json { bench::report::render_json(&report) } else { bench::report::render_table(&report) };
    print_stdout(&format!("{text}\n"))
}

fn bench_s3(args: S3Args) -> anyhow::Result<()> {
    let (json, json_out) = (args.json, args.json_out.clone());
    let config = s3_bench_config(args)?;
    let report = run_s3_bench(&config).context("S3 benchmark failed")?;
    if let Some(path) = &json_out {
        std::fs::write(path, format!("{}\n", bench::s3_bench::render_json(&report)))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let text = if json { bench::s3_bench::render_json(&report) } else { bench::s3_bench::render_table(&report) };
    print_stdout(&format!("{text}\n"))?;
    let errors = report.total_errors();
    anyhow::ensure!(errors == 0, "{errors} S3 requests failed (see the errors column)");
    Ok(())
}

/// The benchmark's settings from `lowtail bench s3`'s arguments.
fn s3_bench_config(args: S3Args) -> anyhow::Result<S3BenchConfig> {
    let source = args.target.source()?;
    use bench::s3_target::VictimSpec;
    let victim = args.victim_node.map(VictimSpec::Node).or(args.victim_pid.map(VictimSpec::Pid));
    let target = TargetSpec {
        name: args.name,
        server_pids: args.pid,
        server_process_names: args.pid_of,
        source,
        victim,
        victim_data_dir: args.victim_dir,
    };
    let peer_name = args.peer_name.unwrap_or_else(|| "peer".to_string());
    let peer_cluster = args.peer_cluster.map(|manifest| TargetSpec {
        name: peer_name.clone(),
        victim: args.peer_victim_node.map(VictimSpec::Node),
        ..TargetSpec::lowtail(TargetSource::Manifest(manifest))
    });
    let peer_endpoint = args.peer.map(|url| TargetSpec {
        name: peer_name,
        source: TargetSource::Endpoint(s3_endpoint(url, args.peer_access_key, args.peer_secret_key, args.peer_region)),
        server_pids: args.peer_pid,
        server_process_names: args.peer_pid_of,
        victim: args.peer_victim_pid.map(VictimSpec::Pid),
        victim_data_dir: args.peer_victim_dir,
    });
    let peer = peer_cluster.or(peer_endpoint);
    let mut config = S3BenchConfig::new(target);
    config.peer = peer;
    config.bucket = args.bucket;
    config.rounds = args.rounds as usize;
    config.object_sizes_bytes = args.sizes;
    config.concurrencies = args.concurrency.into_iter().map(|clients| clients as usize).collect();
    config.seed = args.seed;
    config.show_progress = !args.json;
    let mut scenarios = args.scenarios;
    scenarios.retain(|scenario| *scenario != bench::s3_adversity::Scenario::Healthy);
    config.scenarios = scenarios;
    config.fail_slow = bench::s3_adversity::FailSlowShape {
        stopped_pct: args.fail_slow_stopped_pct,
        period: std::time::Duration::from_millis(args.fail_slow_period_ms),
    };
    if args.quick {
        config.phase_duration = QUICK_PHASE_DURATION;
    }
    if let Some(seconds) = args.duration_s {
        config.phase_duration = std::time::Duration::from_secs(u64::from(seconds));
    }
    config.validate()?;
    Ok(config)
}

/// An endpoint from its arguments (clap has made sure the keys come with the URL).
fn s3_endpoint(
    url: String,
    access_key: Option<String>,
    secret_key: Option<String>,
    region: Option<String>,
) -> S3Endpoint {
    S3Endpoint {
        url,
        region: region.unwrap_or_else(|| "us-east-1".to_string()),
        access_key: access_key.unwrap_or_default(),
        secret_key: secret_key.unwrap_or_default(),
    }
}

#[derive(Debug, Args)]
pub(crate) struct GetBatchArgs {
    /// The bucket.
    #[arg(long)]
    bucket: String,
    /// Keys to read, answered in this order.
    #[arg(value_name = "KEY", conflicts_with = "prefix")]
    keys: Vec<String>,
    /// Read the keys starting with this instead (a scan: ListObjectsV2 and GETs in one request).
    #[arg(long, value_name = "PREFIX")]
    prefix: Option<String>,
    /// With --prefix: keys after this one.
    #[arg(long, value_name = "KEY", requires = "prefix")]
    start_after: Option<String>,
    /// With --prefix: at most this many keys (1 to 1000; default 1000).
    #[arg(long, value_name = "N", requires = "prefix")]
    max_keys: Option<usize>,
    /// Write each object read to DIR/KEY (keys with `..`, or absolute ones, are not written).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// A running cluster, by the cluster.json `lowtail up` wrote.
    #[arg(long, value_name = "FILE", conflicts_with = "endpoint")]
    cluster: Option<PathBuf>,
    /// A gateway's S3 endpoint URL, with --access-key and --secret-key.
    #[arg(long, value_name = "URL", requires_all = ["access_key", "secret_key"])]
    endpoint: Option<String>,
    /// Access key for --endpoint.
    #[arg(long, value_name = "KEY", env = "AWS_ACCESS_KEY_ID")]
    access_key: Option<String>,
    /// Secret key for --endpoint.
    #[arg(long, value_name = "KEY", env = "AWS_SECRET_ACCESS_KEY", hide_env_values = true)]
    secret_key: Option<String>,
    /// Region for --endpoint.
    #[arg(long, value_name = "REGION", default_value = "us-east-1")]
    region: String,
}

pub(crate) fn get_batch(args: GetBatchArgs) -> anyhow::Result<()> {
    let client = match (&args.cluster, &args.endpoint) {
        (Some(path), _) => {
            let manifest = launcher::Manifest::read(path)
                .with_context(|| format!("no running cluster described by {}", path.display()))?;
            bench::s3_batch::BatchClient::new(&manifest.endpoint, &manifest.access_key, &manifest.secret_key)
                .with_region(&manifest.region)
        }
        (None, Some(endpoint)) => bench::s3_batch::BatchClient::new(
            endpoint,
            args.access_key.as_deref().unwrap_or_default(),
            args.secret_key.as_deref().unwrap_or_default(),
        )
        .with_region(&args.region),
        (None, None) => anyhow::bail!("say which gateway: --cluster FILE or --endpoint URL"),
    };
    let request = match args.prefix {
        Some(prefix) => {
            bench::s3_batch::BatchRequest::Scan { prefix, start_after: args.start_after, max_keys: args.max_keys }
        }
        None if args.keys.is_empty() => anyhow::bail!("name the keys to read, or --prefix"),
        None => bench::s3_batch::BatchRequest::Keys(args.keys),
    };
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")?;
    let parts = runtime.block_on(client.get_batch(&args.bucket, &request))?;
    let mut failed = 0usize;
    let mut lines = String::new();
    for part in &parts {
        if part.status == 200 {
            let etag = part.etag.as_deref().unwrap_or("-");
            lines.push_str(&format!("{} {} {} bytes {etag}\n", part.status, part.key, part.body.len()));
            if let Some(out) = &args.out {
                write_under(out, &part.key, &part.body)?;
            }
        } else {
            failed += 1;
            let code = part.error_code.as_deref().unwrap_or("-");
            let message = String::from_utf8_lossy(&part.body);
            lines.push_str(&format!("{} {} {code}: {message}\n", part.status, part.key));
        }
    }
    print_stdout(&lines)?;
    if failed > 0 {
        anyhow::bail!("{failed} of {} objects were not read", parts.len());
    }
    Ok(())
}

/// Writes `bytes` to `dir/key`, refusing a key that would land outside `dir`.
fn write_under(dir: &std::path::Path, key: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let relative = std::path::Path::new(key);
    let inside = relative.components().all(|part| matches!(part, std::path::Component::Normal(_)));
    if !inside || key.is_empty() {
        anyhow::bail!("key {key:?} does not name a file under {}: not written", dir.display());
    }
    let path = dir.join(relative);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

pub(crate) fn run_load(args: LoadArgs) -> anyhow::Result<()> {
    let (gateways, code, node_count) = load::run::resolve_gateways(
        &args.cluster,
        &args.endpoint,
        args.access_key.as_deref(),
        args.secret_key.as_deref(),
        &args.region,
    )?;
    let source = match (args.config, args.trace, args.partitions) {
        (Some(config), _, _) => load::WorkloadSource::Config(config),
        (None, Some(path), Some(partitions)) => load::WorkloadSource::Trace { path, partitions },
        (None, None, None) => load::WorkloadSource::Generator,
        (None, _, _) => anyhow::bail!("--partitions goes with --trace"),
    };
    let mode = match args.clients {
        Some(clients) => load::LoopMode::Closed { clients, think: std::time::Duration::from_millis(args.think_ms) },
        None => load::LoopMode::Open { max_in_flight: args.max_in_flight },
    };
    let config = load::LoadConfig {
        gateways,
        code,
        node_count,
        source,
        caps: load::LiveCaps {
            seed: args.seed,
            duration_s: args.duration_s,
            rate_per_s: args.rate,
            quick: args.quick,
            max_object_bytes: args.max_object_bytes,
            max_objects: args.max_objects,
            time_scale: args.time_scale,
            zipf_exponent: args.zipf,
        },
        mode,
        bucket: args.bucket,
        prepare: !args.no_prepare,
        verify_every: args.verify_every,
        out_dir: args.out.clone(),
        records_csv: args.records,
        png: !args.no_png,
        show_progress: true,
    };
    let outcome = load::run_load(&config)?;
    let stats = &outcome.stats;
    if let Some(prepared) = &stats.prepare {
        println!(
            "objects: {} read by the workload, {} uploaded, {} already present ({:.1} s)",
            prepared.objects, prepared.uploaded, prepared.present, stats.prepare_s
        );
    }
    print_tables(std::iter::once(&outcome.result.summary));
    let row = outcome.result.summary.row();
    let ms = |seconds: Option<f64>| seconds.map_or("-".to_owned(), |s| format!("{:.2} ms", s * 1e3));
    println!(
        "{} over {} gateway(s): {} requests in {:.1} s, p50 {}, p95 {}, p99 {}, {} failed; results in {} (open report.html)",
        stats.mode,
        stats.gateways.len(),
        stats.requests,
        stats.run_s,
        ms(row.median),
        ms(row.p95),
        ms(row.p99),
        stats.failed,
        args.out.display()
    );
    for error in &stats.first_errors {
        eprintln!("failure: {error}");
    }
    anyhow::ensure!(stats.failed == 0, "{} of {} requests failed", stats.failed, stats.requests);
    Ok(())
}
