//! An experiment's results folder: the summaries of its runs, its sweep, and
//! every file written from them (`summary.json`, `runs.json`, `sweep.json`,
//! `tables.md`, `tables.txt`, `plots/`, `report.html`).
//!
//! Owns: [`RunResult`] (what a report keeps of a run once its log is
//! dropped), [`SweepPoint`], [`Experiment`] and [`write_experiment`]. Must
//! not: run anything or read a clock; file contents depend only on the
//! arguments, so the same runs give byte-identical files.

use crate::plot::{self, BarFigure, BoxFigure, BoxItem, CdfFigure, Panel, PanelFigure, Series};
use crate::stats::BoxStats;
use crate::summary::{Samples, Summary, SummaryRow, summarize_samples};
use crate::{html, table};
use anyhow::{Context, bail};
use model::RecordLog;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

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
    fn unit_of_count(self) -> &'static str {
        match self {
            Metric::Request | Metric::Controller => "requests",
            Metric::Task | Metric::Waiting => "tasks",
        }
    }

    fn index(self) -> usize {
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

/// Writes the experiment's results folder under `out_dir` (created if
/// missing; files of the same names are replaced): `summary.json` (array of
/// [`SummaryRow`]), `runs.json` (array of full [`Summary`], per-node load
/// included), `sweep.json`, `tables.md`, `tables.txt`, `plots/*.svg` (and
/// `.png`), `report.html`. Record CSVs are written per run by
/// [`crate::write_records_csv`] into `out_dir/records/`, and the page links
/// those that exist.
///
/// Errors: no runs, two runs with the same (code, policy), a non-finite
/// sweep x, or any I/O failure.
pub fn write_experiment(out_dir: &Path, experiment: &Experiment<'_>) -> anyhow::Result<WrittenFiles> {
    validate(experiment)?;
    let plots_dir = out_dir.join("plots");
    fs::create_dir_all(&plots_dir).with_context(|| format!("creating {}", plots_dir.display()))?;
    let mut written = WrittenFiles::default();

    let rows: Vec<SummaryRow> = experiment.runs.iter().map(|run| run.summary.row()).collect();
    write_file(out_dir, "summary.json", &json_text(&rows)?, &mut written)?;
    let summaries: Vec<&Summary> = experiment.runs.iter().map(|run| &run.summary).collect();
    write_file(out_dir, "runs.json", &json_text(&summaries)?, &mut written)?;
    write_file(out_dir, "sweep.json", &json_text(&experiment.sweep)?, &mut written)?;

    let mut sections = code_sections(experiment.runs);
    let policy_order = policy_order(experiment.runs);
    let mut tables_markdown = format!("# {}\n", experiment.title);
    let mut tables_text = String::new();
    for section in &sections {
        let summaries: Vec<&Summary> = section.runs.iter().map(|run| &run.summary).collect();
        let caption = table_caption(section.code);
        let detail = detail_caption(section.code);
        tables_markdown.push_str(&format!("\n## {caption}\n\n{}", table::markdown_table(&summaries)));
        tables_markdown.push_str(&format!("\n### {detail}\n\n{}", table::detail_markdown_table(&summaries)));
        tables_text.push_str(&format!("{caption}\n{}\n\n", table::text_table(&summaries)));
        tables_text.push_str(&format!("{detail}\n{}\n\n", table::detail_text_table(&summaries)));
    }
    write_file(out_dir, "tables.md", &tables_markdown, &mut written)?;
    write_file(out_dir, "tables.txt", &tables_text, &mut written)?;

    for section in &mut sections {
        let plots = draw_code_plots(&plots_dir, section, experiment, &policy_order, &mut written)?;
        section.plots = plots;
    }

    let page = html::page(out_dir, experiment, &sections);
    write_file(out_dir, "report.html", &page, &mut written)?;
    Ok(written)
}

fn validate(experiment: &Experiment<'_>) -> anyhow::Result<()> {
    if experiment.runs.is_empty() {
        bail!("no runs to report");
    }
    let mut seen = BTreeSet::new();
    for run in experiment.runs {
        let info = &run.summary.run;
        if info.code.is_empty() || info.policy.is_empty() {
            bail!("a run has an empty code or policy name ({:?} / {:?})", info.code, info.policy);
        }
        if !seen.insert((info.code.as_str(), info.policy.as_str())) {
            bail!("two runs of code {} with policy {}: one run per (code, policy)", info.code, info.policy);
        }
    }
    if let Some(point) = experiment.sweep.iter().find(|p| !p.x.is_finite()) {
        bail!("sweep point of {} / {} has a non-finite x ({})", point.code, point.policy, point.x);
    }
    Ok(())
}

/// Codes in order of first appearance, each with its runs in input order.
fn code_sections(runs: &[RunResult]) -> Vec<CodeSection<'_>> {
    let mut sections: Vec<CodeSection<'_>> = Vec::new();
    for run in runs {
        let code = run.summary.run.code.as_str();
        match sections.iter_mut().find(|s| s.code == code) {
            Some(section) => section.runs.push(run),
            None => sections.push(CodeSection { code, runs: vec![run], plots: Vec::new() }),
        }
    }
    sections
}

/// Policies in order of first appearance, so that a policy has the same
/// colour in every plot of the experiment.
fn policy_order(runs: &[RunResult]) -> Vec<&str> {
    let mut order: Vec<&str> = Vec::new();
    for run in runs {
        let policy = run.summary.run.policy.as_str();
        if !order.contains(&policy) {
            order.push(policy);
        }
    }
    order
}

fn colour_of(policy_order: &[&str], policy: &str) -> usize {
    policy_order.iter().position(|&p| p == policy).unwrap_or(policy_order.len())
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

fn draw_code_plots(
    plots_dir: &Path,
    section: &CodeSection<'_>,
    experiment: &Experiment<'_>,
    policy_order: &[&str],
    written: &mut WrittenFiles,
) -> anyhow::Result<Vec<PlotRef>> {
    let code = section.code;
    let code_file = file_safe(code);
    let mut plots = Vec::new();
    let mut add = |stem: String, caption: String, files: Vec<PathBuf>| {
        written.files.extend(files);
        let load = stem.starts_with(&format!("{code_file}-load-"));
        plots.push(PlotRef { stem, caption, png: experiment.png, load });
    };

    for metric in Metric::ALL {
        let series: Vec<Series> = section
            .runs
            .iter()
            .map(|run| Series {
                label: run.summary.run.policy.clone(),
                colour: colour_of(policy_order, &run.summary.run.policy),
                points: run.curves(metric).cdf.clone(),
            })
            .filter(|series| !series.points.is_empty())
            .collect();
        if series.is_empty() {
            continue;
        }
        let stem = format!("{code_file}-cdf-{}", metric.name());
        let figure = CdfFigure {
            title: format!("{} CDF, {code}", metric.title()),
            x_label: format!("{} (s{})", metric.title(), if experiment.log_x { ", log scale" } else { "" }),
            y_label: format!("fraction of {}", metric.unit_of_count()),
            series,
            log_x: experiment.log_x,
        };
        let files = plot::render(&figure, plots_dir, &stem, experiment.png)?;
        add(stem, format!("{} CDF, one line per policy", metric.title()), files);

        let boxes: Vec<BoxItem> = section
            .runs
            .iter()
            .filter_map(|run| {
                run.curves(metric).boxplot.map(|stats| BoxItem {
                    label: run.summary.run.policy.clone(),
                    colour: colour_of(policy_order, &run.summary.run.policy),
                    stats,
                })
            })
            .collect();
        let stem = format!("{code_file}-box-{}", metric.name());
        let figure = BoxFigure {
            title: format!("{}, {code}", metric.title()),
            y_label: format!("{} (s)", metric.title()),
            boxes,
        };
        let files = plot::render(&figure, plots_dir, &stem, experiment.png)?;
        add(
            stem,
            format!("{}: box = quartiles, line = median, whiskers = 1.5 IQR, ◆ = p99, ○ = max", metric.title()),
            files,
        );
    }

    for run in &section.runs {
        let summary = &run.summary;
        if summary.nodes.is_empty() || summary.utilisation_mean.is_none() {
            continue;
        }
        let policy = &summary.run.policy;
        let stem = format!("{code_file}-load-{}", file_safe(policy));
        let figure = BarFigure {
            title: format!("Load per node, {code}, {policy}"),
            x_label: "storage node".to_owned(),
            y_label: "busy fraction of the run window".to_owned(),
            values: summary.nodes.iter().map(|n| n.busy_fraction).collect(),
            mean: summary.utilisation_mean,
            colour: colour_of(policy_order, policy),
        };
        let files = plot::render(&figure, plots_dir, &stem, experiment.png)?;
        add(stem, format!("Load per node (service time over the run window), {policy}"), files);
    }

    let sweep_points: Vec<&SweepPoint> = experiment.sweep.iter().filter(|p| p.code == code).collect();
    if !sweep_points.is_empty() {
        let mut policies: Vec<&str> = Vec::new();
        for point in &sweep_points {
            if !policies.contains(&point.policy.as_str()) {
                policies.push(&point.policy);
            }
        }
        let series_of = |pick: fn(&SweepPoint) -> Option<f64>| -> Vec<Series> {
            policies
                .iter()
                .map(|&policy| {
                    let mut points: Vec<(f64, f64)> = sweep_points
                        .iter()
                        .filter(|p| p.policy == policy)
                        .filter_map(|p| pick(p).map(|y| (p.x, y)))
                        .collect();
                    points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
                    Series { label: policy.to_owned(), colour: colour_of(policy_order, policy), points }
                })
                .filter(|series| !series.points.is_empty())
                .collect()
        };
        let panel = |statistic: &str, pick: fn(&SweepPoint) -> Option<f64>| Panel {
            caption: format!("{statistic} request latency"),
            y_label: format!("{statistic} request latency (s)"),
            series: series_of(pick),
        };
        let figure = PanelFigure {
            title: format!("Request latency vs load, {code}"),
            x_label: experiment.sweep_x_label.to_owned(),
            panels: vec![
                panel("median", |p| p.latency_s_median),
                panel("p95", |p| p.latency_s_p95),
                panel("p99", |p| p.latency_s_p99),
            ],
        };
        let stem = format!("{code_file}-sweep");
        let files = plot::render(&figure, plots_dir, &stem, experiment.png)?;
        add(stem, "Request latency (median, p95, p99) against load, one line per policy".to_owned(), files);
    }
    Ok(plots)
}

fn json_text<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(value).context("serialising JSON")?;
    text.push('\n');
    Ok(text)
}

fn write_file(out_dir: &Path, name: &str, contents: &str, written: &mut WrittenFiles) -> anyhow::Result<()> {
    let path = out_dir.join(name);
    fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
    written.files.push(PathBuf::from(name));
    Ok(())
}
