//! The `lowtail` binary. It parses the command line and calls the library
//! crates; it holds no logic of its own, so everything it does can be tested
//! and reused without it.
//!
//! Must not: compute, measure or decide anything itself.

use anyhow::Context;
use bench::engines::{engine_listing, render_engine_listing, select_engine};
use bench::{CodecBenchConfig, Timing, parse_byte_size, run_codec_bench};
use clap::{Args, Parser, Subcommand};
use codec::CodeSpec;
use std::io::Write;
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
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("lowtail: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Bench(BenchCommand::Codec(args)) => bench_codec(args),
        Command::Engines => print_stdout(&render_engine_listing(&engine_listing()?)),
    }
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

/// Writes to stdout, turning a closed pipe into an error instead of a panic.
fn print_stdout(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).context("cannot write to stdout")
}
