//! CSV export of a run's records for pandas users: one file of requests and
//! one of tasks, joined on `request`.
//!
//! Owns: the two CSV layouts, their file names, [`write_records_csv`]. Must
//! not: drop or reinterpret fields: every field of the record schema is a
//! column, times stay integer nanoseconds of the executor's clock, and a
//! moment never reached ([`model::NEVER`]) is an empty cell (NaN in pandas),
//! never `18446744073709551615`. Derived columns (latencies) follow the
//! schema's original columns for convenience; fields added to the schema
//! later come after them, so no column ever moves.
//!
//! Parquet is not written: every Rust Parquet writer brings arrow and
//! several minutes of build for what `pandas.read_csv` already does.

use crate::experiment::file_safe;
use crate::summary::RunInfo;
use anyhow::Context;
use model::{NEVER, Outcome, RecordLog, TaskRole};
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Header of the requests file.
pub const REQUEST_COLUMNS: &str = "request,frontend,object,partition,bytes,arrival_ns,decision_start_ns,\
decision_end_ns,completion_ns,probes,degraded,timed_out,outcome,tasks,latency_ns,controller_ns,probe_wait_ns,decision_cpu_ns,class,latency_class";

/// Header of the tasks file.
pub const TASK_COLUMNS: &str = "request,task,node,unit,role,cancelled,bytes,enqueue_ns,start_ns,finish_ns,waiting_ns,latency_ns,service_ns,cancel_ns,failed";

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
    // Rows are assembled as bytes: formatting through `write!` cost about
    // 2 µs per task row, which is most of an export of millions of tasks.
    let mut line = Row::default();
    for record in log.iter() {
        let r = record.request;
        let ok_completion = r.outcome == Outcome::Ok && r.completion_ns >= r.arrival_ns;
        line.clear();
        line.number(r.request.0);
        line.number(u64::from(r.frontend.0));
        line.number(r.object.0);
        line.number(u64::from(r.partition.0));
        line.number(r.bytes);
        line.time(r.arrival_ns);
        line.time(r.decision_start_ns);
        line.time(r.decision_end_ns);
        line.time(r.completion_ns);
        line.number(u64::from(r.probes));
        line.text(if r.degraded { "true" } else { "false" });
        line.text(if r.timed_out { "true" } else { "false" });
        line.text(outcome_name(r.outcome));
        line.number(record.tasks.len() as u64);
        line.optional(difference(ok_completion, r.completion_ns, r.arrival_ns));
        line.optional(difference(r.decision_end_ns >= r.arrival_ns, r.decision_end_ns, r.arrival_ns));
        line.number(r.probe_wait_ns);
        line.number(r.decision_cpu_ns);
        line.number(u64::from(r.class));
        line.number(u64::from(r.latency_class));
        requests.write_all(line.finish())?;
        for (index, task) in record.tasks.iter().enumerate() {
            line.clear();
            line.number(r.request.0);
            line.number(index as u64);
            line.number(u64::from(task.node.0));
            line.number(u64::from(task.unit));
            line.text(role_name(task.role));
            line.text(if task.cancelled { "true" } else { "false" });
            line.number(task.bytes);
            line.time(task.enqueue_ns);
            line.time(task.start_ns);
            line.time(task.finish_ns);
            line.optional(task.waiting_ns());
            line.optional(task.latency_ns());
            line.optional(task.service_ns());
            line.time(task.cancel_ns);
            line.text(if task.failed { "true" } else { "false" });
            tasks.write_all(line.finish())?;
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

/// One CSV row being assembled: fields separated by commas, ended by a
/// newline. Cells are numbers, fixed words or empty, so none needs quoting.
#[derive(Default)]
struct Row {
    bytes: Vec<u8>,
    cells: usize,
}

impl Row {
    fn clear(&mut self) {
        self.bytes.clear();
        self.cells = 0;
    }

    /// Starts a cell: a comma before every cell but the first.
    fn separate(&mut self) {
        if self.cells > 0 {
            self.bytes.push(b',');
        }
        self.cells += 1;
    }

    fn number(&mut self, mut value: u64) {
        self.separate();
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (value % 10) as u8;
            value /= 10;
            if value == 0 {
                break;
            }
        }
        self.bytes.extend_from_slice(&digits[start..]);
    }

    fn text(&mut self, word: &str) {
        self.separate();
        self.bytes.extend_from_slice(word.as_bytes());
    }

    /// A time, or an empty cell for [`NEVER`].
    fn time(&mut self, nanos: u64) {
        self.optional((nanos != NEVER).then_some(nanos));
    }

    fn optional(&mut self, value: Option<u64>) {
        match value {
            Some(value) => self.number(value),
            None => self.separate(),
        }
    }

    fn finish(&mut self) -> &[u8] {
        self.bytes.push(b'\n');
        &self.bytes
    }
}

/// `end − start` when `valid` and both moments were reached.
fn difference(valid: bool, end: u64, start: u64) -> Option<u64> {
    (valid && end != NEVER && start != NEVER).then(|| end - start)
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
        TaskRole::Extra => "extra",
    }
}
