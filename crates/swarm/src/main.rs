//! `lowtail-swarm`: the fault swarm and the durability scenarios from the command line (see the
//! library's documentation). Parses arguments and prints; the work is the library's.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use swarm::batch::{BatchSettings, run_batch};
use swarm::run::RunSettings;
use swarm::scenario::ScenarioSettings;
use swarm::schedule::{FaultKind, ScheduleSettings};

#[derive(Debug, Parser)]
#[command(name = "lowtail-swarm", about = "Fault swarm and durability scenarios against a real lowtail up")]
struct Cli {
    /// The `lowtail` executable (default: the one beside this program).
    #[arg(long, global = true)]
    lowtail: Option<PathBuf>,
    /// Where the clusters live (default: a new temporary directory).
    #[arg(long, global = true)]
    work_dir: Option<PathBuf>,
    /// An `up.toml` for the scenarios' cluster (default: every default of `lowtail up`).
    #[arg(long, global = true)]
    up_toml: Option<PathBuf>,
    /// Keep a scenario's cluster directory afterwards (its logs; its data can be many GB).
    #[arg(long, global = true)]
    keep_cluster: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Seeded random schedules of workload and faults, several seeds at once with --parallel;
    /// prints a table per seed and the sum (faults by kind, violations and their seeds, wall
    /// time), exits non-zero on any violation with the seed that replays it.
    Run(RunArgs),
    /// Objects written while three nodes are killed, Ctrl-C, restart, census, more kills.
    KillsRestart {
        /// Objects written (sizes log-uniform from 1 KiB to --max-bytes).
        #[arg(long, default_value_t = 1000)]
        objects: usize,
        /// Largest object.
        #[arg(long, default_value_t = 20 << 20)]
        max_bytes: u64,
        /// Concurrent clients.
        #[arg(long, default_value_t = 8)]
        clients: usize,
        /// Seed of the sizes and of the nodes killed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Clients writing while one node is SIGKILLed: failed PUTs counted.
    CrashWrites {
        /// Seconds of writing (the kill comes a third of the way in).
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Largest object.
        #[arg(long, default_value_t = 4 << 20)]
        max_bytes: u64,
        /// Concurrent clients.
        #[arg(long, default_value_t = 8)]
        clients: usize,
        /// Seed of the sizes and of the node killed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// A byte flipped in a parity unit and in a packed replica: the nodes' scrub finds both, repair
    /// rewrites them; the nodes' metrics printed before and after.
    Scrub {
        /// Seconds a scrub pass over each node's units takes (the default cluster's is a week).
        #[arg(long, default_value_t = 10)]
        pass_interval_s: u64,
        /// Seed of the units flipped.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// A node returns with an older copy of its data directory (keys overwritten and deleted
    /// meanwhile); the census must count what it lacks, and with three more nodes killed every key
    /// reads back as last written.
    StaleReturn {
        /// Keys written (half overwritten, an eighth deleted while the copy is aside).
        #[arg(long, default_value_t = 80)]
        keys: usize,
    },
    /// Objects written, the metadata store deleted, `lowtail admin meta rebuild`, every object read
    /// back: objects recovered of written, and the rebuild's time per million objects.
    MetaRebuild {
        /// Objects written (mostly 1 to 9 KiB, every 16th half of --max-bytes).
        #[arg(long, default_value_t = 2000)]
        objects: u64,
        /// Largest object.
        #[arg(long, default_value_t = 4 << 20)]
        max_bytes: u64,
        /// Concurrent clients.
        #[arg(long, default_value_t = 8)]
        clients: usize,
        /// Seconds the cluster runs on after the deletes before its store is lost (with a short
        /// `[meta_snapshots] interval_s` in --up-toml, a snapshot then knows the deletes).
        #[arg(long, default_value_t = 0)]
        settle_s: u64,
    },
    /// Clients reading and writing for minutes; the gateway's resident memory sampled.
    Soak {
        /// Minutes of load.
        #[arg(long, default_value_t = 10)]
        minutes: u64,
        /// Seconds after the start that the memory comparison leaves out.
        #[arg(long, default_value_t = 120)]
        warmup_s: u64,
        /// Largest object.
        #[arg(long, default_value_t = 256 << 10)]
        max_bytes: u64,
        /// Concurrent clients.
        #[arg(long, default_value_t = 4)]
        clients: usize,
        /// Seed of the keys and sizes.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// How many seeds.
    #[arg(long, default_value_t = 10)]
    seeds: u64,
    /// The first seed (seeds are consecutive).
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
    /// Epochs per seed.
    #[arg(long, default_value_t = 3)]
    epochs: usize,
    /// Seconds of workload and faults per epoch.
    #[arg(long, default_value_t = 20)]
    epoch_s: u64,
    /// Storage nodes (RS(6,3): 9 leaves no spare, 10 or more let repair move units).
    #[arg(long, default_value_t = 10)]
    nodes: u32,
    /// Concurrent clients.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Faults per epoch.
    #[arg(long, default_value_t = 6)]
    faults: usize,
    /// Most distinct nodes faulted per epoch (at most m = 3 for RS(6,3)).
    #[arg(long, default_value_t = 3)]
    faulty_nodes: u32,
    /// Seeds run at once, each its own cluster.
    #[arg(long, default_value_t = 1)]
    parallel: usize,
    /// Fault kinds left out (kill, corrupt, hang, full-disk, network, gateway, etcd); without
    /// etcd, no seed runs on etcd. Repeat or separate with commas.
    #[arg(long, value_delimiter = ',')]
    without: Vec<FaultKind>,
    /// The longest a hang, a full disk, a partition or an etcd outage lasts, in seconds.
    #[arg(long, default_value_t = 35)]
    longest_fault_s: u64,
    /// Seconds a quiesce may take.
    #[arg(long, default_value_t = 120)]
    quiesce_s: u64,
    /// Keep every seed's cluster directory (logs), not only the failing ones.
    #[arg(long)]
    keep: bool,
    /// Print the sum and every seed's report as JSON too.
    #[arg(long)]
    json: bool,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber_init();
    let cli = Cli::parse();
    let lowtail = match cli.lowtail {
        Some(path) => path,
        None => std::env::current_exe()?.with_file_name("lowtail"),
    };
    anyhow::ensure!(
        lowtail.exists(),
        "no lowtail at {} (build it: cargo build --release -p cli, or pass --lowtail)",
        lowtail.display()
    );
    let temp = tempfile_dir(cli.work_dir)?;
    let up_toml = match &cli.up_toml {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?,
        None => String::new(),
    };
    let keep = cli.keep_cluster;
    let settings = |name: &str, clients: usize, seed: u64| ScenarioSettings {
        lowtail: lowtail.clone(),
        dir: temp.join(name),
        clients,
        seed,
        up_toml: up_toml.clone(),
        keep,
    };
    match cli.command {
        Command::Run(args) => run(args, lowtail.clone(), temp.clone()),
        Command::KillsRestart { objects, max_bytes, clients, seed } => {
            let report =
                swarm::scenario::kills_then_restart(&settings("kills-restart", clients, seed), objects, max_bytes)?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            anyhow::ensure!(report.lost_after_one_more == 0 && report.lost_after_three_more == 0, "objects were lost");
            Ok(())
        }
        Command::CrashWrites { seconds, max_bytes, clients, seed } => {
            let report =
                swarm::scenario::writes_through_a_crash(&settings("crash-writes", clients, seed), seconds, max_bytes)?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            anyhow::ensure!(report.failed == 0 && report.unreadable == 0, "writes failed or objects were lost");
            Ok(())
        }
        Command::Scrub { pass_interval_s, seed } => {
            let report = swarm::scrub_scenario::scrub_and_repair(&settings("scrub", 1, seed), pass_interval_s)?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            anyhow::ensure!(report.unreadable == 0, "objects did not read back after repair");
            Ok(())
        }
        Command::StaleReturn { keys } => {
            let report = swarm::stale_scenario::stale_return(&settings("stale-return", 1, 1), keys)?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            anyhow::ensure!(!report.zero_before_checked, "the census said no stripe was short before the check");
            anyhow::ensure!(report.lost_after_three_more == 0, "keys were lost or wrong");
            Ok(())
        }
        Command::MetaRebuild { objects, max_bytes, clients, settle_s } => {
            let settle = Duration::from_secs(settle_s);
            let report =
                swarm::meta_scenario::lost_store(&settings("meta-rebuild", clients, 1), (objects, max_bytes), settle)?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            anyhow::ensure!(report.recovered + report.deleted == report.written, "objects were not recovered");
            Ok(())
        }
        Command::Soak { minutes, warmup_s, max_bytes, clients, seed } => {
            let report = swarm::scenario::soak(&settings("soak", clients, seed), minutes, warmup_s, max_bytes)?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(())
        }
    }
}

fn run(args: RunArgs, lowtail: PathBuf, work_dir: PathBuf) -> anyhow::Result<()> {
    let kinds: Vec<FaultKind> = FaultKind::ALL.into_iter().filter(|kind| !args.without.contains(kind)).collect();
    let settings = RunSettings {
        schedule: ScheduleSettings {
            nodes: args.nodes,
            epochs: args.epochs,
            epoch_ms: args.epoch_s * 1000,
            clients: args.clients,
            keys_per_client: 12,
            ops_per_client: 10_000,
            faulty_nodes: args.faulty_nodes,
            faults_per_epoch: args.faults,
            kinds: kinds.clone(),
            gateways: 1,
            longest_fault_ms: args.longest_fault_s * 1000,
        },
        lowtail,
        work_dir: work_dir.clone(),
        quiesce_timeout: Duration::from_secs(args.quiesce_s),
        keep: args.keep,
    };
    let batch = BatchSettings {
        first_seed: args.first_seed,
        seeds: args.seeds,
        parallel: args.parallel,
        etcd: kinds.contains(&FaultKind::Etcd),
    };
    // Refused up front, before any cluster starts: a fault kind this machine cannot do.
    let probe =
        swarm::run::cluster_settings(args.first_seed, &settings, swarm::Flavor::of(2, batch.etcd), work_dir.clone());
    swarm::cluster::check_possible(&probe)?;
    let finished = |seed: u64, outcome: &anyhow::Result<swarm::run::SeedReport>| match outcome {
        Ok(report) => {
            eprintln!(
                "seed {seed} ({}): {} violations in {:.0} s",
                report.cluster,
                report.violations.len(),
                report.duration_s
            );
            for violation in &report.violations {
                eprintln!("seed {seed}: {violation}");
            }
            for (key, why) in &report.losses_allowed {
                eprintln!("seed {seed}: {key}: lost as its acknowledgement allowed: {why}");
            }
            if !report.violations.is_empty() {
                eprintln!(
                    "replay: lowtail-swarm run --first-seed {seed} --seeds 1 --keep  (logs in {})",
                    work_dir.join(format!("seed-{seed}")).display()
                );
            }
        }
        Err(error) => eprintln!("seed {seed} did not run: {error:#}"),
    };
    let report = run_batch(&settings, &batch, &finished);
    println!("{}", swarm::report::table(&report.reports));
    println!("{}", swarm::report::summary(&report));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    let violations: usize = report.violations.values().map(Vec::len).sum();
    anyhow::ensure!(report.passed(), "{violations} invariant violations; {} seeds did not run", report.errors.len());
    Ok(())
}

fn tempfile_dir(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let dir = match given {
        Some(dir) => dir,
        None => std::env::temp_dir().join(format!("lowtail-swarm-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

fn tracing_subscriber_init() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}
