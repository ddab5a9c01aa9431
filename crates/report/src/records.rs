//! CSV export of a run's records for pandas users: one file of requests and
//! one of tasks, joined on `request`.
//!
//! Owns: the two CSV layouts, their file names, [`write_records_csv`]. Must
//! not: drop or reinterpret fields: every field of the record schema is a
//! column, times stay integer nanoseconds of the executor's clock, and a
//! moment never reached ([`model::NEVER`]) is an empty cell (NaN in pandas),
//! never `18446744073709551615`. Derived columns (latencies) are added after
//! the schema's columns for convenience.
//!
//! Parquet is not written: every Rust Parquet writer brings arrow and
//! several minutes of build for what `pandas.read_csv` already does.

use crate::experiment::file_safe;
use crate::summary::RunInfo;
use anyhow::Context;
use model::{NEVER, Outcome, RecordLog, TaskRole};
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Header of the requests file.
pub const REQUEST_COLUMNS: &str = "request,frontend,object,partition,bytes,arrival_ns,decision_start_ns,\
decision_end_ns,completion_ns,probes,degraded,timed_out,outcome,tasks,latency_ns,controller_ns";

/// Header of the tasks file.
pub const TASK_COLUMNS: &str =
    "request,task,node,unit,role,cancelled,bytes,enqueue_ns,start_ns,finish_ns,waiting_ns,latency_ns,service_ns";

/// The two files of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordFiles {
    /// One row per request.
    pub requests: PathBuf,
    /// One row per task, `request` joining it to its request.
    pub tasks: PathBuf,
}

/// File names (no folder) of a run's CSVs: `{code}_{policy}_requests.csv`
/// and `{code}_{policy}_tasks.csv`.
pub fn record_file_names(run: &RunInfo) -> (String, String) {
    let stem = format!("{}_{}", file_safe(&run.code), file_safe(&run.policy));
    (format!("{stem}_requests.csv"), format!("{stem}_tasks.csv"))
}

/// Writes a run's records as two CSVs into `dir` (created if missing), rows
/// in log order. Returns their paths.
pub fn write_records_csv(dir: &Path, run: &RunInfo, log: &RecordLog) -> anyhow::Result<RecordFiles> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (requests_name, tasks_name) = record_file_names(run);
    let files = RecordFiles { requests: dir.join(requests_name), tasks: dir.join(tasks_name) };

    let mut requests = csv_file(&files.requests)?;
    let mut tasks = csv_file(&files.tasks)?;
    writeln!(requests, "{REQUEST_COLUMNS}")?;
    writeln!(tasks, "{TASK_COLUMNS}")?;
    let mut line = String::with_capacity(256);
    for record in log.iter() {
        let r = record.request;
        line.clear();
        let ok_completion = r.outcome == Outcome::Ok && r.completion_ns >= r.arrival_ns;
        write!(
            line,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.request.0,
            r.frontend.0,
            r.object.0,
            r.partition.0,
            r.bytes,
            r.arrival_ns,
            time(r.decision_start_ns),
            time(r.decision_end_ns),
            time(r.completion_ns),
            r.probes,
            r.degraded,
            r.timed_out,
            outcome_name(r.outcome),
            record.tasks.len(),
            difference(ok_completion, r.completion_ns, r.arrival_ns),
            difference(r.decision_end_ns >= r.arrival_ns, r.decision_end_ns, r.arrival_ns),
        )?;
        writeln!(requests, "{line}")?;
        for (index, task) in record.tasks.iter().enumerate() {
            line.clear();
            write!(
                line,
                "{},{},{},{},{},{},{},{},{},{},{},{},{}",
                r.request.0,
                index,
                task.node.0,
                task.unit,
                role_name(task.role),
                task.cancelled,
                task.bytes,
                time(task.enqueue_ns),
                time(task.start_ns),
                time(task.finish_ns),
                optional(task.waiting_ns()),
                optional(task.latency_ns()),
                optional(task.service_ns()),
            )?;
            writeln!(tasks, "{line}")?;
        }
    }
    requests.flush().with_context(|| format!("writing {}", files.requests.display()))?;
    tasks.flush().with_context(|| format!("writing {}", files.tasks.display()))?;
    Ok(files)
}

fn csv_file(path: &Path) -> anyhow::Result<BufWriter<File>> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    Ok(BufWriter::with_capacity(1 << 20, file))
}

/// A time, or an empty cell for [`NEVER`].
fn time(nanos: u64) -> String {
    if nanos == NEVER { String::new() } else { nanos.to_string() }
}

fn optional(value: Option<u64>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}

/// `end − start` when `valid` and both moments were reached, else empty.
fn difference(valid: bool, end: u64, start: u64) -> String {
    if valid && end != NEVER && start != NEVER { (end - start).to_string() } else { String::new() }
}

fn outcome_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Ok => "ok",
        Outcome::Failed => "failed",
    }
}

fn role_name(role: TaskRole) -> &'static str {
    match role {
        TaskRole::Normal => "normal",
        TaskRole::Degraded => "degraded",
        TaskRole::Fallback => "fallback",
    }
}
