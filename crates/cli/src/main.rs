//! The `lowtail` binary. It parses the command line and calls the library
//! crates; it holds no logic of its own, so everything it does can be tested
//! and reused without it.
//!
//! Must not: compute, measure or decide anything itself.

use anyhow::Context;

mod admin_profile;
mod allocator;
#[cfg(feature = "lab")]
mod lab;

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
    #[cfg(feature = "lab")]
    #[command(subcommand)]
    Bench(lab::BenchCommand),
    /// List the GF(2^8) engines, which ones this CPU supports, and the one chosen.
    ///
    /// The codec picks the fastest supported engine once per process; the
    /// environment variable LOWTAIL_ENGINE (an engine name) overrides it. The
    /// chosen engine is marked with `*`.
    #[cfg(feature = "lab")]
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
    #[cfg(feature = "lab")]
    Sim(lab::SimArgs),
    /// Reproduce a paper's evaluation and write its results folder.
    #[cfg(feature = "lab")]
    #[command(subcommand)]
    Experiment(lab::ExperimentCommand),
    /// Replay a workload against running gateways as S3 GETs and write a results folder.
    ///
    /// Open loop by default (each request at its arrival time, latency from that time, at most
    /// --max-in-flight at once); closed loop with --clients N. Loads the objects first (--prepare,
    /// skipping those already present). Records are client-side, in the shared record schema; exits
    /// non-zero after writing the results if any request failed. Documented in docs/load.md.
    #[cfg(feature = "lab")]
    Load(Box<lab::LoadArgs>),
    /// Read several objects in one request: lowtail's batch read (`POST /{bucket}?lowtail-batch-get`,
    /// docs/s3.md), planned together by the gateway (EC-Store's access plans).
    ///
    /// Names keys, or a scan (--prefix, --start-after, --max-keys). Prints one line per object
    /// (status, key, bytes, ETag) and, with --out, writes each object read under DIR at its key.
    /// Exits non-zero if any object was not read.
    #[cfg(feature = "lab")]
    GetBatch(lab::GetBatchArgs),
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
    /// S3 address of a new cluster (default 127.0.0.1:9000; refused when busy; 127.0.0.1:0 = a free
    /// port at every start); kept across restarts.
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
    /// Show or switch the read policy of running gateways (normal, hedged, llf, lmlf, llf-pw2,
    /// lmlf-pw2, lmlf-lazy, opt-lazy, fec-fixed, fec-greedy, fec-bafec, jlwo). A switch takes effect at once for new reads; the policy's tables start
    /// empty. It lasts until the gateway restarts (its config's [controller] policy then applies).
    #[command(subcommand)]
    Policy(AdminPolicyCommand),
    /// Show buckets' settings, or set when writes to a bucket are acknowledged (its write ack
    /// rule: all, k+1 or k; see docs/data-path.md for what each guarantees).
    #[command(subcommand)]
    Bucket(AdminBucketCommand),
    /// Show or set how batch reads choose units (EC-Store's access policy: cost, random or
    /// data-first, late binding; docs/lab/ecstore.md), with the plan cache's numbers.
    #[command(subcommand)]
    Access(AdminAccessCommand),
    /// Show EC-Store's mover (moves, bytes, lease, paused for repair), or switch it on or off.
    #[command(subcommand)]
    Mover(AdminMoverCommand),
    /// Show the latency classes (per-class counters, access keys' entitlements), or set the best
    /// class an access key's requests may run in (docs/classes.md).
    #[command(subcommand)]
    Class(AdminClassCommand),
    /// Show, set or delete profiles: one policy per layer of the request path (selection,
    /// redundancy, reconstruction, class, write ack) that a bucket names with `lowtail admin
    /// bucket profile` (docs/profiles.md).
    #[command(subcommand)]
    Profile(admin_profile::AdminProfileCommand),
    /// Check the embedded metadata store of a stopped `lowtail up` cluster, or rebuild it from the
    /// storage nodes (docs/durability.md).
    #[command(subcommand)]
    Meta(AdminMetaCommand),
}

#[derive(Debug, Subcommand)]
enum AdminMetaCommand {
    /// Read every record of the metadata store and check its checksum; exits non-zero on damage.
    Check(AdminMetaArgs),
    /// Rebuild the metadata store from the storage nodes: the newest metadata snapshot they hold,
    /// then what their units say was written since. Starts the cluster's nodes, and stops them after.
    Rebuild(AdminMetaRebuildArgs),
}

#[derive(Debug, Args)]
struct AdminMetaArgs {
    /// Cluster directory of a `lowtail up` cluster (stopped).
    #[arg(long, value_name = "DIR", default_value = "lowtail-data")]
    dir: PathBuf,
    /// Print the raw JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct AdminMetaRebuildArgs {
    #[command(flatten)]
    meta: AdminMetaArgs,
    /// Rebuild even though a store exists (it is moved aside to meta.redb.replaced-<time>).
    #[arg(long)]
    replace: bool,
}

#[derive(Debug, Subcommand)]
enum AdminClassCommand {
    /// Print the classes, their counters, the access keys' entitlements and the nodes told the
    /// scheduling.
    Show(AdminPolicyTarget),
    /// Set the best class ACCESS_KEY's requests may run in (1 is the best), on every gateway of
    /// the cluster; `none` removes the key's entry (its credential's class, or the default, applies).
    Key(AdminClassKeyArgs),
}

#[derive(Debug, Args)]
struct AdminClassKeyArgs {
    /// The access key.
    #[arg(value_name = "ACCESS_KEY")]
    access_key: String,
    /// The class, 1-based, or none.
    #[arg(value_name = "N|none")]
    class: String,
    #[command(flatten)]
    target: AdminPolicyTarget,
}

#[derive(Debug, Subcommand)]
enum AdminAccessCommand {
    /// Print each gateway's access settings and plan-cache numbers.
    Show(AdminPolicyTarget),
    /// Set the access settings (JSON, e.g. '{"kind": "cost", "extra_reads": 1}'; fields left out
    /// take their defaults) on every named gateway.
    Set(AdminAccessSetArgs),
}

#[derive(Debug, Args)]
struct AdminAccessSetArgs {
    /// The settings as JSON.
    #[arg(value_name = "JSON")]
    settings: String,
    #[command(flatten)]
    target: AdminPolicyTarget,
}

#[derive(Debug, Subcommand)]
enum AdminMoverCommand {
    /// Print each gateway's mover status.
    Show(AdminPolicyTarget),
    /// Switch the mover on.
    On(AdminPolicyTarget),
    /// Switch the mover off (a move in progress finishes).
    Off(AdminPolicyTarget),
}

#[derive(Debug, Subcommand)]
enum AdminBucketCommand {
    /// Print every bucket with its write ack rule and latency class.
    Show(AdminPolicyTarget),
    /// Set BUCKET's write ack rule: `all` (default: every unit durable), `k+1` (the units landed
    /// survive one more failure) or `k` (they decode the data; the rest land in the background).
    Ack(AdminBucketAckArgs),
    /// Set the latency class of requests to BUCKET (1 is the best; a request runs in the worse of
    /// it and its access key's class), or `none` to clear it.
    Class(AdminBucketClassArgs),
    /// Print the storage nodes holding the data units of KEY in BUCKET, in object order.
    Locate(AdminBucketLocateArgs),
    /// Name the profile whose layers serve BUCKET's requests (`lowtail admin profile set` stores
    /// it), or `none` for the cluster's default.
    Profile(admin_profile::AdminBucketProfileArgs),
}

#[derive(Debug, Args)]
struct AdminBucketLocateArgs {
    /// The bucket.
    #[arg(value_name = "BUCKET")]
    bucket: String,
    /// The object's key.
    #[arg(value_name = "KEY")]
    key: String,
    #[command(flatten)]
    target: AdminPolicyTarget,
}

#[derive(Debug, Args)]
struct AdminBucketClassArgs {
    /// The bucket.
    #[arg(value_name = "BUCKET")]
    bucket: String,
    /// The class, 1-based, or none.
    #[arg(value_name = "N|none")]
    class: String,
    #[command(flatten)]
    target: AdminPolicyTarget,
}

#[derive(Debug, Args)]
struct AdminBucketAckArgs {
    /// The bucket.
    #[arg(value_name = "BUCKET")]
    bucket: String,
    /// The rule: all, k+1 or k.
    #[arg(value_name = "RULE")]
    rule: String,
    #[command(flatten)]
    target: AdminPolicyTarget,
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

/// The async runtime of a process that serves (`up`, `gateway`, `node`), with `threads` workers
/// (default: one per CPU); it also starts the process's memory gauges.
fn serving_runtime(threads: Option<usize>) -> anyhow::Result<tokio::runtime::Runtime> {
    allocator::start_gauges();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = threads {
        builder.worker_threads(threads);
    }
    builder.enable_all().max_blocking_threads(MAX_BLOCKING_THREADS).build().context("cannot start the async runtime")
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        #[cfg(feature = "lab")]
        Command::Bench(command) => lab::bench(command),
        #[cfg(feature = "lab")]
        Command::Engines => lab::engines(),
        Command::Node(args) => run_node(args),
        Command::Up(args) => run_up(args),
        Command::Gateway(args) => run_gateway(args),
        Command::Admin(AdminCommand::Status(args)) => admin_status(args),
        Command::Admin(AdminCommand::AddNode(args)) => admin_add_node(args),
        Command::Admin(AdminCommand::Policy(command)) => admin_policy(command),
        Command::Admin(AdminCommand::Bucket(command)) => admin_bucket(command),
        Command::Admin(AdminCommand::Access(command)) => admin_access(command),
        Command::Admin(AdminCommand::Mover(command)) => admin_mover(command),
        Command::Admin(AdminCommand::Class(command)) => admin_class(command),
        Command::Admin(AdminCommand::Profile(command)) => admin_profile::run(command),
        Command::Admin(AdminCommand::Meta(command)) => admin_meta(command),
        #[cfg(feature = "lab")]
        Command::Sim(args) => lab::run_sim(args),
        #[cfg(feature = "lab")]
        Command::Experiment(command) => lab::experiment(command),
        #[cfg(feature = "lab")]
        Command::Load(args) => lab::run_load(*args),
        #[cfg(feature = "lab")]
        Command::GetBatch(args) => lab::get_batch(args),
    }
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
    let runtime = serving_runtime(None)?;
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
    let runtime = serving_runtime(None)?;
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

fn admin_bucket(command: AdminBucketCommand) -> anyhow::Result<()> {
    use launcher::gateway_admin::GatewayAdmin;
    match command {
        AdminBucketCommand::Show(target) => {
            // Every gateway reads the one metadata store: the first answers for all.
            let base = policy_gateways(&target)?.remove(0);
            let buckets = GatewayAdmin { base, secret: String::new() }.buckets()?;
            if buckets.is_empty() {
                println!("no buckets");
            }
            for bucket in buckets {
                let class = bucket.class.map_or_else(|| "none".to_string(), |class| class.to_string());
                println!("{}  write ack {}  class {class}", bucket.name, bucket.write_ack);
            }
        }
        AdminBucketCommand::Ack(args) => {
            let rule: meta::WriteAck = args.rule.parse().map_err(anyhow::Error::msg)?;
            let secret = target_secret(&args.target)?;
            let base = policy_gateways(&args.target)?.remove(0);
            let bucket = GatewayAdmin { base, secret }.set_write_ack(&args.bucket, rule)?;
            println!("{}: write ack now {}", bucket.name, bucket.write_ack);
        }
        AdminBucketCommand::Locate(args) => {
            let secret = target_secret(&args.target)?;
            let base = policy_gateways(&args.target)?.remove(0);
            let nodes = GatewayAdmin { base, secret }.locate(&args.bucket, &args.key)?;
            let nodes: Vec<String> = nodes.iter().map(u32::to_string).collect();
            println!("{}/{}: data units on nodes {}", args.bucket, args.key, nodes.join(", "));
        }
        AdminBucketCommand::Profile(args) => admin_profile::set_bucket(args)?,
        AdminBucketCommand::Class(args) => {
            let class = class_argument(&args.class)?;
            let secret = target_secret(&args.target)?;
            let base = policy_gateways(&args.target)?.remove(0);
            let bucket = GatewayAdmin { base, secret }.set_bucket_class(&args.bucket, class)?;
            println!("{}: class now {}", bucket.name, bucket.class.map_or_else(|| "none".into(), |c| c.to_string()));
        }
    }
    Ok(())
}

/// A class as the admin commands take it: a number from 1, or `none`. Whether the gateway runs
/// that many classes is the gateway's check.
fn class_argument(text: &str) -> anyhow::Result<Option<u8>> {
    if text.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    match text.parse::<u8>() {
        Ok(class) if class >= 1 => Ok(Some(class)),
        _ => anyhow::bail!("a class is a number from 1 (the best) or none, not {text:?}"),
    }
}

fn admin_class(command: AdminClassCommand) -> anyhow::Result<()> {
    use launcher::gateway_admin::GatewayAdmin;
    match command {
        AdminClassCommand::Show(target) => {
            let mut text = String::new();
            for base in policy_gateways(&target)? {
                let view = GatewayAdmin { base: base.clone(), secret: String::new() }.classes()?;
                text.push_str(&launcher::admin::render_classes_view(&base, &view));
            }
            print_stdout(&text)?;
        }
        AdminClassCommand::Key(args) => {
            let class = class_argument(&args.class)?;
            let secret = target_secret(&args.target)?;
            // The table lives in the metadata store: one gateway sets it for all.
            let base = policy_gateways(&args.target)?.remove(0);
            GatewayAdmin { base, secret }.set_key_class(&args.access_key, class)?;
            let shown = class.map_or_else(|| "none (its credential's class or the default)".into(), |c| c.to_string());
            println!("{}: class now {shown}", args.access_key);
        }
    }
    Ok(())
}

/// The cluster secret for a change: from the cluster directory, or LOWTAIL_CLUSTER_SECRET for
/// gateways named by --gateway.
fn target_secret(target: &AdminPolicyTarget) -> anyhow::Result<String> {
    if target.gateway.is_empty() {
        launcher::admin::cluster_secret_from_dir(&target.dir)
    } else {
        std::env::var("LOWTAIL_CLUSTER_SECRET")
            .context("set LOWTAIL_CLUSTER_SECRET to the cluster secret to change gateways given by --gateway")
    }
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
                if !state.gauges.is_empty() {
                    // FAST CLOUD's delay model in use and its last fit.
                    text.push_str(&format!("{base}: state {}\n", serde_json::to_string(&state.gauges)?));
                }
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
            let secret = target_secret(&args.target)?;
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

fn admin_access(command: AdminAccessCommand) -> anyhow::Result<()> {
    use launcher::gateway_admin::GatewayAdmin;
    let mut text = String::new();
    match command {
        AdminAccessCommand::Show(target) => {
            for base in policy_gateways(&target)? {
                let state = GatewayAdmin { base: base.clone(), secret: String::new() }.access()?;
                text.push_str(&format!("{base}: {state}\n"));
            }
        }
        AdminAccessCommand::Set(args) => {
            // Checked here so a typo changes no gateway.
            let settings: policy::ecstore::access::AccessSettings =
                serde_json::from_str(&args.settings).with_context(|| format!("access settings {:?}", args.settings))?;
            settings.validate().map_err(|why| anyhow::anyhow!("access settings: {why}"))?;
            let secret = target_secret(&args.target)?;
            for base in policy_gateways(&args.target)? {
                GatewayAdmin { base: base.clone(), secret: secret.clone() }.set_access(&settings)?;
                text.push_str(&format!("{base}: batch reads now {}\n", settings.name()));
            }
        }
    }
    print_stdout(&text)
}

fn admin_mover(command: AdminMoverCommand) -> anyhow::Result<()> {
    use launcher::gateway_admin::GatewayAdmin;
    let (target, switch) = match command {
        AdminMoverCommand::Show(target) => (target, None),
        AdminMoverCommand::On(target) => (target, Some(true)),
        AdminMoverCommand::Off(target) => (target, Some(false)),
    };
    let secret = if switch.is_some() { target_secret(&target)? } else { String::new() };
    let mut text = String::new();
    for base in policy_gateways(&target)? {
        let admin = GatewayAdmin { base: base.clone(), secret: secret.clone() };
        if let Some(enabled) = switch {
            admin.set_mover(enabled)?;
        }
        text.push_str(&format!("{base}: {}\n", admin.mover()?));
    }
    print_stdout(&text)
}

fn admin_meta(command: AdminMetaCommand) -> anyhow::Result<()> {
    match command {
        AdminMetaCommand::Check(args) => {
            let damage = launcher::meta_admin::check(&args.dir)?;
            if args.json {
                print_stdout(&format!("{}\n", serde_json::to_string_pretty(&damage)?))?;
            } else {
                let checked = damage.records_checked.unwrap_or(0);
                print_stdout(&format!("{checked} records checked, {} damaged\n", damage.damaged_records))?;
                for key in &damage.keys {
                    print_stdout(&format!("  damaged: {key}\n"))?;
                }
            }
            anyhow::ensure!(
                damage.damaged_records == 0,
                "the metadata store is damaged: rebuild it with `lowtail admin meta rebuild --replace --dir {}`",
                args.dir.display()
            );
            Ok(())
        }
        AdminMetaCommand::Rebuild(args) => {
            init_logging();
            let binary = std::env::current_exe().context("cannot find this program's path")?;
            let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
            let report = runtime.block_on(launcher::meta_admin::rebuild(&args.meta.dir, &binary, args.replace))?;
            if args.meta.json {
                return print_stdout(&format!("{}\n", serde_json::to_string_pretty(&report)?));
            }
            print_stdout(&launcher::meta_admin::render_report(&report))
        }
    }
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
    let runtime = serving_runtime(config.runtime_threads)?;
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

/// Writes to stdout, turning a closed pipe into an error instead of a panic.
pub(crate) fn print_stdout(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).context("cannot write to stdout")
}
