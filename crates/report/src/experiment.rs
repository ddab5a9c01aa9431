//! An experiment's results folder: the summaries of its runs, its sweep, and
//! every file written from them (`summary.json`, `runs.json`, `sweep.json`,
//! `tables.md`, `tables.txt`, `plots/`, `report.html`).
//!
//! Owns: [`RunResult`] (what a report keeps of a run once its log is
//! dropped), [`SweepPoint`], [`Experiment`], the sections and captions the
//! files share; `results_folder` writes them. Must
//! not: run anything or read a clock; file contents depend only on the
//! arguments, so the same runs give byte-identical files.

use crate::stats::BoxStats;
use crate::summary::{Samples, Summary, summarize_samples};
use model::RecordLog;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use crate::summary::RunInfo;

/// Points kept per CDF: enough for a smooth curve at 900 pixels wide, few
/// enough that a run's curves are kilobytes whatever its size.
const CDF_POINTS: usize = 1000;

/// A latency metric of the papers' figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Request latency: arrival → completion.
    Request,
    /// Task latency: enqueue on a node → finish.
    Task,
    /// Waiting time in a node's queue: enqueue → start of service.
    Waiting,
    /// Controller time: arrival → tasks sent.
    Controller,
}

impl Metric {
    /// Every metric, in the papers' order.
    pub const ALL: [Metric; 4] = [Metric::Request, Metric::Task, Metric::Waiting, Metric::Controller];

    /// Short name, used in file names.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Request => "request",
            Metric::Task => "task",
            Metric::Waiting => "waiting",
            Metric::Controller => "controller",
        }
    }

    /// Human title.
    pub fn title(self) -> &'static str {
        match self {
            Metric::Request => "Request latency",
            Metric::Task => "Task latency",
            Metric::Waiting => "Task waiting time",
            Metric::Controller => "Controller processing time",
        }
    }

    /// What one sample is, for axis labels.
    pub(crate) fn unit_of_count(self) -> &'static str {
        match self {
            Metric::Request | Metric::Controller => "requests",
            Metric::Task | Metric::Waiting => "tasks",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// The drawable part of one metric of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricCurves {
    /// Empirical CDF points `(seconds, fraction ≤)`, at most 1000.
    pub cdf: Vec<(f64, f64)>,
    /// Box-plot statistics; `None` without samples.
    pub boxplot: Option<BoxStats>,
}

/// What the report keeps of one run: its summary and the curves of its
/// metrics (kilobytes, so the log can be dropped after
/// [`RunResult::from_log`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The run's summary.
    pub summary: Summary,
    /// Curves per metric, in [`Metric::ALL`] order.
    pub curves: [MetricCurves; 4],
}

impl RunResult {
    /// Summarises a run's records and keeps its curves (sorting each metric
    /// once for both).
    pub fn from_log(log: &RecordLog, run: &RunInfo) -> RunResult {
        let samples = Samples::from_log(log);
        let summary = summarize_samples(log, run, &samples);
        let curves_of =
            |sample: &crate::Sample| MetricCurves { cdf: sample.cdf_points(CDF_POINTS), boxplot: sample.box_stats() };
        RunResult {
            summary,
            curves: [
                curves_of(&samples.request),
                curves_of(&samples.task),
                curves_of(&samples.waiting),
                curves_of(&samples.controller),
            ],
        }
    }

    /// The curves of one metric.
    pub fn curves(&self, metric: Metric) -> &MetricCurves {
        &self.curves[metric.index()]
    }
}

/// One point of a latency-vs-load sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Code name.
    pub code: String,
    /// Policy name.
    pub policy: String,
    /// The swept quantity (offered load or arrival rate; the experiment
    /// names it in [`Experiment::sweep_x_label`]).
    pub x: f64,
    /// Median request latency, seconds.
    pub latency_s_median: Option<f64>,
    /// 95th percentile of request latency, seconds.
    pub latency_s_p95: Option<f64>,
    /// 99th percentile of request latency, seconds.
    pub latency_s_p99: Option<f64>,
    /// Mean node utilisation measured in the run.
    pub utilisation_mean: Option<f64>,
}

impl SweepPoint {
    /// The point of a summarised run at `x`.
    pub fn from_summary(summary: &Summary, x: f64) -> SweepPoint {
        let latency = summary.request_latency.as_ref();
        SweepPoint {
            code: summary.run.code.clone(),
            policy: summary.run.policy.clone(),
            x,
            latency_s_median: latency.map(|s| s.median_s),
            latency_s_p95: latency.map(|s| s.p95_s),
            latency_s_p99: latency.map(|s| s.p99_s),
            utilisation_mean: summary.utilisation_mean,
        }
    }
}

/// Everything [`write_experiment`] writes from.
#[derive(Clone, Copy, Debug)]
pub struct Experiment<'a> {
    /// Title of the HTML page (`"hu2017: proactive degraded reads"`).
    pub title: &'a str,
    /// Runs; one per (code, policy), shown in this order (codes in order of
    /// first appearance).
    pub runs: &'a [RunResult],
    /// Latency-vs-load points, any order (sorted by x when drawn); may be empty.
    pub sweep: &'a [SweepPoint],
    /// Label of the sweep's x axis, with its unit (`"offered load (mean
    /// utilisation)"`, `"arrival rate (requests/s)"`).
    pub sweep_x_label: &'a str,
    /// Free-form findings, shown at the top of the HTML page (paragraphs
    /// separated by blank lines; HTML is escaped).
    pub findings: &'a str,
    /// Logarithmic x axes on CDFs (latency spans decades under load).
    pub log_x: bool,
    /// Also write a PNG beside every SVG.
    pub png: bool,
    /// Other pages the navigation links to, first: (relative address, text).
    pub links: &'a [(&'a str, &'a str)],
}

/// Files written, relative to the output folder, in the order written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WrittenFiles {
    /// Relative paths.
    pub files: Vec<PathBuf>,
}

/// A plot of one code, as the HTML shows it.
#[derive(Clone, Debug)]
pub(crate) struct PlotRef {
    /// File stem under `plots/`.
    pub stem: String,
    /// Caption.
    pub caption: String,
    /// Whether the PNG exists beside the SVG.
    pub png: bool,
    /// A load-per-node figure (shown smaller, grouped).
    pub load: bool,
}

/// One section of the report: a code with its runs and plots.
#[derive(Clone, Debug)]
pub(crate) struct CodeSection<'a> {
    pub code: &'a str,
    pub runs: Vec<&'a RunResult>,
    pub plots: Vec<PlotRef>,
}

pub(crate) fn detail_caption(code: &str) -> String {
    format!("Task, waiting and controller latency (seconds) and node load, {code}")
}

pub(crate) fn table_caption(code: &str) -> String {
    format!("Request latency (seconds) and probing overhead (probes/s), {code}")
}

/// A name safe in a file name: ASCII letters, digits, `-`, `_` and `.`;
/// anything else becomes `_`.
pub(crate) fn file_safe(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}
