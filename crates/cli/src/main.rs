//! The `lowtail` binary. It parses the command line and calls the library
//! crates; it holds no logic of its own, so everything it does can be tested
//! and reused without it.
//!
//! Must not: compute, measure or decide anything itself.

use anyhow::Context;

/// mimalloc returns freed memory to the system; glibc's malloc held the gateway's freed buffers in
/// its arenas (see docs/data-path.md, "Memory").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use bench::engines::{engine_listing, render_engine_listing, select_engine};
use bench::s3_bench::{ClusterSource, QUICK_PHASE_DURATION, S3BenchConfig};
use bench::{CodecBenchConfig, Timing, parse_byte_size, run_codec_bench, run_s3_bench};
use clap::{Args, Parser, Subcommand};
use codec::CodeSpec;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// lowtail: an erasure-coded object store scheduled for low median and tail
/// latency, and a simulator that runs the same scheduling code at scale.
#[derive(Debug, Parser)]
#[command(name = "lowtail", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure parts of lowtail on this machine.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// List the GF(2^8) engines, which ones this CPU supports, and the one chosen.
    ///
    /// The codec picks the fastest supported engine once per process; the
    /// environment variable LOWTAIL_ENGINE (an engine name) overrides it. The
    /// chosen engine is marked with `*`.
    Engines,
    /// Run one storage node: a checksummed unit store behind a byte-measured FCFS queue, served over
    /// authenticated gRPC, until Ctrl-C or SIGTERM.
    ///
    /// Settings come from --config (TOML; every field and the service-model knobs are documented in
    /// crates/node/README.md), then the flags below override them. The cluster secret can also come
    /// from the environment variable LOWTAIL_CLUSTER_SECRET, which keeps it out of `ps`.
    Node(NodeArgs),
    /// Start a whole local cluster: storage nodes as separate processes, the gateway and the embedded
    /// metadata store, on loopback, with all data under --dir. Prints the S3 endpoint and credentials.
    ///
    /// The first start chooses the cluster's secret, S3 credentials and ports and keeps them in
    /// DIR/cluster.toml; starting again on the same directory keeps every object. DIR/cluster.json
    /// lists the endpoint, credentials and every node's pid, ports and data directory. Ctrl-C stops
    /// everything cleanly.
    Up(UpArgs),
    /// Run one gateway (S3 API, data path, membership, repair) from a TOML config, until Ctrl-C or
    /// SIGTERM. Several gateways can serve one cluster through the etcd metadata backend.
    Gateway(GatewayArgs),
    /// Operate a running cluster.
    #[command(subcommand)]
    Admin(AdminCommand),
    /// Run a simulation config: every policy it names on one workload and one cluster, in virtual
    /// time, deterministically for its seed; writes summary.json, tables, plots and report.html.
    ///
    /// The config is TOML (documented in docs/simulator.md; examples in examples/): seed, code,
    /// policies, [cluster] (nodes and their service model), [frontends], [policy] and [workload]
    /// (the WAS-like generator or a trace file).
    Sim(SimArgs),
    /// Reproduce a paper's evaluation and write its results folder.
    #[command(subcommand)]
    Experiment(ExperimentCommand),
    /// Replay a workload against running gateways as S3 GETs and write a results folder.
    ///
    /// Open loop by default (each request at its arrival time, latency from that time, at most
    /// --max-in-flight at once); closed loop with --clients N. Loads the objects first (--prepare,
    /// skipping those already present). Records are client-side, in the shared record schema; exits
    /// non-zero after writing the results if any request failed. Documented in docs/load.md.
    Load(Box<LoadArgs>),
}

#[derive(Debug, Args)]
struct LoadArgs {
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
struct SimArgs {
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
struct RunArgs {
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
enum ExperimentCommand {
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
}

#[derive(Debug, Args)]
struct Hu2017FitArgs {
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
struct Hu2017Args {
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
    /// --live, fitted together with the service scale, see docs/live-experiment.md).
    #[arg(long, value_name = "S")]
    zipf: Option<f64>,
    /// Skip the latency-vs-load sweep.
    #[arg(long)]
    no_sweep: bool,
    /// Run on a loopback cluster of real processes instead (etcd, 30 storage nodes with the service
    /// model, 3 gateways): Normal, LLF-PW2, LMLF-PW2, LMLF-Lazy and Opt-Lazy on RS(6,3) and
    /// LRC(6,2,2), a node made 10x slower during a run, and the simulator calibrated from the live
    /// records on the identical configuration (sim_vs_live.html). Needs the etcd binary; about 15
    /// minutes, --quick about 3 (docs/live-experiment.md).
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

#[derive(Debug, Args)]
struct UpArgs {
    /// Directory holding the whole cluster (created on first start).
    #[arg(long, value_name = "DIR", default_value = "lowtail-data")]
    dir: PathBuf,
    /// TOML file with nodes, code, racks, s3_listen, [data] and [service_model] (see docs/cluster.md).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Storage nodes to start (default 9, or the config file's).
    #[arg(long, value_name = "N")]
    nodes: Option<usize>,
    /// Code of new stripes, e.g. rs-6-3 or lrc-6-2-2 (default rs-6-3, or the config file's).
    #[arg(long, value_name = "CODE")]
    code: Option<CodeSpec>,
    /// S3 address (default 127.0.0.1:9000 when free; kept across restarts).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Racks to spread the nodes over, round robin (0 = one per node).
    #[arg(long, value_name = "N")]
    racks: Option<usize>,
}

#[derive(Debug, Args)]
struct GatewayArgs {
    /// TOML configuration (see docs/cluster.md).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Nodes and their states, and repair progress, as the running gateway sees them.
    Status(AdminStatusArgs),
    /// Register a storage node (started with `lowtail node`) in the metadata store of a gateway
    /// config, so every gateway sharing that store places units on it. `lowtail up` does this itself.
    ///
    /// The node must answer a probe with the config's data.cluster_secret first. Registering a known
    /// id again updates its address and rack.
    AddNode(AdminAddNodeArgs),
    /// Show or switch the read policy of running gateways (normal, llf, lmlf, llf-pw2, lmlf-pw2,
    /// lmlf-lazy, opt-lazy). A switch takes effect at once for new reads; the policy's tables start
    /// empty. It lasts until the gateway restarts (its config's [controller] policy then applies).
    #[command(subcommand)]
    Policy(AdminPolicyCommand),
}

#[derive(Debug, Subcommand)]
enum AdminPolicyCommand {
    /// Print each gateway's policy and settings.
    Show(AdminPolicyTarget),
    /// Switch every named gateway to POLICY.
    Set(AdminPolicySetArgs),
}

#[derive(Debug, Args)]
struct AdminPolicyTarget {
    /// Cluster directory of a `lowtail up` cluster (its gateway, and its secret for switching).
    #[arg(long, value_name = "DIR", default_value = "lowtail-data", conflicts_with = "gateway")]
    dir: PathBuf,
    /// A gateway's HTTP endpoint instead, e.g. http://127.0.0.1:9100; repeat for several gateways
    /// (switching then needs LOWTAIL_CLUSTER_SECRET in the environment).
    #[arg(long, value_name = "URL")]
    gateway: Vec<String>,
}

#[derive(Debug, Args)]
struct AdminPolicySetArgs {
    /// The policy.
    #[arg(value_name = "POLICY")]
    policy: String,
    /// Policy settings as JSON, e.g. '{"normal_timeout_ms": 200}'; fields left out take their
    /// defaults. Without it the gateway keeps its current settings.
    #[arg(long, value_name = "JSON")]
    settings: Option<String>,
    #[command(flatten)]
    target: AdminPolicyTarget,
}

#[derive(Debug, Args)]
struct AdminAddNodeArgs {
    /// A gateway's TOML configuration: its [meta] section says where to register, and its
    /// data.cluster_secret is what the node must accept.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The node's id (its node_id).
    #[arg(long, value_name = "N")]
    id: u32,
    /// The node's RPC address as gateways reach it, e.g. 10.0.0.7:7000.
    #[arg(long, value_name = "HOST:PORT")]
    address: String,
    /// The node's rack, for rack-aware placement (default rack-<id>).
    #[arg(long, value_name = "NAME")]
    rack: Option<String>,
}

#[derive(Debug, Args)]
struct AdminStatusArgs {
    /// Cluster directory of a `lowtail up` cluster (its cluster.json names the gateway).
    #[arg(long, value_name = "DIR", default_value = "lowtail-data", conflicts_with = "gateway")]
    dir: PathBuf,
    /// The gateway's HTTP endpoint instead, e.g. http://127.0.0.1:9100.
    #[arg(long, value_name = "URL")]
    gateway: Option<String>,
    /// Print the raw JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct NodeArgs {
    /// TOML configuration file; without one, the defaults plus the flags below.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// This node's id in the cluster.
    #[arg(long, value_name = "N")]
    node_id: Option<u32>,
    /// Address the gRPC server listens on (port 0 picks a free one; the log says which).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Address of the Prometheus /metrics endpoint.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// Directory holding this node's units.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The cluster secret every request must carry.
    #[arg(long, value_name = "SECRET", env = "LOWTAIL_CLUSTER_SECRET", hide_env_values = true)]
    secret: Option<String>,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
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
    /// S3 PUT, GET and DELETE throughput and p50/p99 latency against a cluster, with the AWS SDK for Rust.
    ///
    /// Without --cluster it starts a fresh local cluster (9 nodes, rs-6-3, as `lowtail up` does) in a
    /// temporary directory and stops it afterwards; with --cluster DIR/cluster.json it measures that
    /// running cluster (in the bucket lowtail-bench, under a prefix of its own; the DELETE phases
    /// delete what the PUT phases wrote).
    ///
    /// For every object size: a PUT phase (--concurrency clients writing new keys of random bytes back
    /// to back for --duration-s seconds), then a GET phase reading random keys of those just written
    /// (every GET's length is checked, and the bytes of every 50th), then a DELETE phase deleting each
    /// of them once (at most 10 minutes). Requests are not retried: failures
    /// are counted in the `errors` column, and any makes the command exit non-zero after printing.
    ///
    /// With --json, stdout is exactly one JSON array of objects with the fields op ("put" | "get" | "delete"),
    /// object_bytes, requests, errors, ops_per_s, mb_per_s, p50_ms, p99_ms, max_ms, concurrency,
    /// gateway_rss_peak_mib (the gateway's peak resident memory during the phase; null when it does
    /// not run on this host).
    S3(S3Args),
}

#[derive(Debug, Args)]
struct S3Args {
    /// The cluster.json of a running cluster (written by `lowtail up`) instead of a fresh cluster.
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,
    /// Object sizes, comma-separated, with an optional B, KiB, MiB or GiB suffix.
    #[arg(long, value_name = "SIZES", value_delimiter = ',', default_value = "4KiB,1MiB", value_parser = parse_byte_size)]
    sizes: Vec<usize>,
    /// Requests in flight (closed loop).
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    concurrency: u32,
    /// Seconds each phase runs (default 10, or 2 with --quick).
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(u32).range(1..=3600))]
    duration_s: Option<u32>,
    /// A fast smoke run: 2 s phases instead of 10 s.
    #[arg(long)]
    quick: bool,
    /// Seed of the object contents and of the GET key choice.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Print a JSON array on stdout instead of a table (and no progress bar).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct CodecArgs {
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

fn main() -> ExitCode {
    disable_transparent_huge_pages();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("lowtail: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Threads a long-running process may run blocking work (disk I/O, metadata transactions) on: far
/// more than a disk or the metadata store serves at once, far fewer than tokio's 512. Every thread
/// holds the allocator's thread-local free pages, so 270 threads of a node held hundreds of MB.
const MAX_BLOCKING_THREADS: usize = 64;

/// Turns transparent huge pages off for this process (and the nodes it starts, which inherit it).
/// mimalloc asks for huge pages on its arenas; a 2 MiB page stays resident while any byte of it is
/// in use, so freed memory never left: in a soak, nodes held 2 GB (1.9 GB of it huge pages) and the
/// gateway's memory kept rising (docs/data-path.md, "Memory"). Redis and most databases advise the
/// same. Where the kernel refuses, lowtail runs on regardless.
fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes integers only and touches no memory of this process.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// The async runtime of a process that serves (`up`, `gateway`, `node`).
fn serving_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build()
        .context("cannot start the async runtime")
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Bench(BenchCommand::Codec(args)) => bench_codec(args),
        Command::Bench(BenchCommand::S3(args)) => bench_s3(args),
        Command::Engines => print_stdout(&render_engine_listing(&engine_listing()?)),
        Command::Node(args) => run_node(args),
        Command::Up(args) => run_up(args),
        Command::Gateway(args) => run_gateway(args),
        Command::Admin(AdminCommand::Status(args)) => admin_status(args),
        Command::Admin(AdminCommand::AddNode(args)) => admin_add_node(args),
        Command::Admin(AdminCommand::Policy(command)) => admin_policy(command),
        Command::Sim(args) => run_sim(args),
        Command::Experiment(ExperimentCommand::Hu2017(args)) => run_hu2017(args),
        Command::Experiment(ExperimentCommand::Hu2017Fit(args)) => run_hu2017_fit(args),
        Command::Load(args) => run_load(*args),
    }
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

fn run_sim(args: SimArgs) -> anyhow::Result<()> {
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

fn run_up(args: UpArgs) -> anyhow::Result<()> {
    let mut config = match &args.config {
        Some(path) => launcher::UpConfig::from_toml_file(path)?,
        None => launcher::UpConfig::default(),
    };
    config.nodes = args.nodes.unwrap_or(config.nodes);
    config.racks = args.racks.unwrap_or(config.racks);
    config.s3_listen = args.listen.or(config.s3_listen);
    let code: CodeSpec = match args.code {
        Some(code) => code,
        None => config.code.parse().context("config: code")?,
    };
    config.code = code.to_string();
    let options = launcher::UpOptions {
        dir: args.dir,
        nodes: config.nodes,
        code,
        s3_listen: config.s3_listen,
        racks: config.racks,
    };
    let binary = std::env::current_exe().context("cannot find the lowtail executable to start nodes with")?;
    init_logging();
    let runtime = serving_runtime()?;
    runtime.block_on(async {
        let cluster = launcher::up(&options, &config, &binary).await?;
        print_stdout(&cluster.manifest().summary())?;
        shutdown_signal().await;
        eprintln!("lowtail: stopping the gateway and {} nodes", cluster.manifest().nodes.len());
        cluster.shutdown().await;
        Ok(())
    })
}

fn run_gateway(args: GatewayArgs) -> anyhow::Result<()> {
    let config = gateway::process::GatewayConfig::from_toml_file(&args.config)?;
    config.validate()?;
    init_logging();
    let runtime = serving_runtime()?;
    runtime.block_on(gateway::process::run(config, shutdown_signal()))
}

fn admin_status(args: AdminStatusArgs) -> anyhow::Result<()> {
    let base = match args.gateway {
        Some(url) => url.trim_end_matches('/').to_string(),
        None => launcher::admin::gateway_http_from_dir(&args.dir)?,
    };
    let status = launcher::admin::fetch_status(&base)?;
    if args.json {
        return print_stdout(&format!("{}\n", serde_json::to_string_pretty(&status)?));
    }
    print_stdout(&launcher::admin::render_status(&status)?)
}

/// The gateways a policy command addresses, and how to get the secret a switch needs.
fn policy_gateways(target: &AdminPolicyTarget) -> anyhow::Result<Vec<String>> {
    if target.gateway.is_empty() {
        return Ok(vec![launcher::admin::gateway_http_from_dir(&target.dir)?]);
    }
    Ok(target.gateway.iter().map(|url| url.trim_end_matches('/').to_string()).collect())
}

fn admin_policy(command: AdminPolicyCommand) -> anyhow::Result<()> {
    use launcher::gateway_admin::GatewayAdmin;
    let mut text = String::new();
    match command {
        AdminPolicyCommand::Show(target) => {
            // Reading the policy needs no secret.
            for base in policy_gateways(&target)? {
                let state = GatewayAdmin { base: base.clone(), secret: String::new() }.policy()?;
                text.push_str(&format!("{base}: {} {}\n", state.policy, serde_json::to_string(&state.settings)?));
            }
        }
        AdminPolicyCommand::Set(args) => {
            // Checked here so a typo changes no gateway.
            let kind: policy::PolicyKind = args.policy.parse()?;
            let settings = match &args.settings {
                Some(json) => Some(
                    serde_json::from_str::<policy::PolicySettings>(json)
                        .with_context(|| format!("--settings {json:?}"))?,
                ),
                None => None,
            };
            let secret = if args.target.gateway.is_empty() {
                launcher::admin::cluster_secret_from_dir(&args.target.dir)?
            } else {
                std::env::var("LOWTAIL_CLUSTER_SECRET")
                    .context("set LOWTAIL_CLUSTER_SECRET to the cluster secret to switch gateways given by --gateway")?
            };
            let gateways = policy_gateways(&args.target)?;
            // Every gateway is reached first: one that cannot be switches none.
            for base in &gateways {
                GatewayAdmin { base: base.clone(), secret: String::new() }
                    .policy()
                    .with_context(|| format!("{base} does not answer; no gateway was switched"))?;
            }
            let mut switched: Vec<&str> = Vec::new();
            for base in &gateways {
                let admin = GatewayAdmin { base: base.clone(), secret: secret.clone() };
                let state = admin.set_policy(kind, settings.as_ref()).with_context(|| match switched.as_slice() {
                    [] => format!("{base}: not switched; no gateway was switched"),
                    done => format!(
                        "{base}: not switched, but {} already run {kind}: run the command again, or check with \
                         `lowtail admin policy show`",
                        done.join(", ")
                    ),
                })?;
                text.push_str(&format!("{base}: now {}\n", state.policy));
                switched.push(base);
            }
        }
    }
    print_stdout(&text)
}

fn admin_add_node(args: AdminAddNodeArgs) -> anyhow::Result<()> {
    let config = gateway::process::GatewayConfig::from_toml_file(&args.config)?;
    let rack = args.rack.unwrap_or_else(|| format!("rack-{}", args.id));
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let node = runtime.block_on(launcher::admin::add_node(&config, args.id, &args.address, &rack))?;
    print_stdout(&format!("registered node {} at {} in rack {} ({:?})\n", node.id, node.address, node.rack, node.state))
}

fn run_node(args: NodeArgs) -> anyhow::Result<()> {
    let mut config = match &args.config {
        Some(path) => node::NodeConfig::from_toml_file(path)?,
        None => node::NodeConfig::default(),
    };
    config.node_id = args.node_id.unwrap_or(config.node_id);
    config.listen_addr = args.listen.unwrap_or(config.listen_addr);
    config.metrics_addr = args.metrics.or(config.metrics_addr);
    config.data_dir = args.data_dir.unwrap_or(config.data_dir);
    config.cluster_secret = args.secret.unwrap_or(config.cluster_secret);
    config.validate()?;
    init_logging();
    let runtime = serving_runtime()?;
    runtime.block_on(node::run(config, shutdown_signal())).context("node failed")
}

/// Default log filter. `s3s` logs every request that ends in an error at ERROR, a client's mistake
/// (404, 403, 412) as much as a failure; the gateway logs its own answers instead (client errors at
/// DEBUG, server errors at WARN), so `s3s`'s request logs are off unless `RUST_LOG` asks.
const DEFAULT_LOG_FILTER: &str = "info,s3s::ops=off";

/// Structured logs on stderr; `RUST_LOG` filters them (default: [`DEFAULT_LOG_FILTER`]). Colours only
/// when stderr is a terminal: `lowtail up` sends each process's logs to a file.
fn init_logging() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    // A second initialisation (impossible in this binary) would only keep the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// Completes on Ctrl-C or SIGTERM, the two ways a node is asked to stop.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                // Without a SIGTERM handler Ctrl-C still works; SIGTERM then kills as it would anyway.
                let _ = interrupt.await;
                return;
            }
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
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
    let cluster = match args.cluster {
        Some(path) => ClusterSource::Manifest(path),
        None => ClusterSource::Fresh(
            std::env::current_exe().context("cannot find the lowtail executable to start nodes with")?,
        ),
    };
    let mut config = S3BenchConfig::new(cluster);
    config.object_sizes_bytes = args.sizes;
    config.concurrency = args.concurrency as usize;
    config.seed = args.seed;
    config.show_progress = !args.json;
    if args.quick {
        config.phase_duration = QUICK_PHASE_DURATION;
    }
    if let Some(seconds) = args.duration_s {
        config.phase_duration = std::time::Duration::from_secs(u64::from(seconds));
    }
    let report = run_s3_bench(&config).context("S3 benchmark failed")?;
    let text = if args.json { bench::s3_bench::render_json(&report) } else { bench::s3_bench::render_table(&report) };
    print_stdout(&format!("{text}\n"))?;
    let errors = report.total_errors();
    anyhow::ensure!(errors == 0, "{errors} S3 requests failed (see the errors column)");
    Ok(())
}

/// Writes to stdout, turning a closed pipe into an error instead of a panic.
fn print_stdout(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).context("cannot write to stdout")
}

fn run_load(args: LoadArgs) -> anyhow::Result<()> {
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
