//! Writes an experiment's results folder ([`write_experiment`]): `summary.json`, `runs.json`,
//! `sweep.json`, `tables.md`, `tables.txt`, `plots/`, `report.html`, from the [`Experiment`] alone.
//! Must not: run anything or read a clock; the same runs give byte-identical files.

use crate::experiment::{
    CodeSection, Experiment, Metric, PlotRef, RunResult, SweepPoint, WrittenFiles, detail_caption, file_safe,
    table_caption,
};
use crate::plot::{self, BarFigure, BoxFigure, BoxItem, CdfFigure, Panel, PanelFigure, Series};
use crate::summary::{Summary, SummaryRow};
use crate::{html, table};
use anyhow::{Context, bail};
use serde::Serialize;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

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
