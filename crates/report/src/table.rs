//! The papers' tables (Hu et al., Tables 1 and 2): one row per policy, request
//! latency mean, variance, median, p95, p99, min and max in seconds, probes
//! per second and the fraction of degraded reads; as Markdown and as plain
//! text.
//!
//! Also a detail table of what the papers show only in figures (task,
//! waiting and controller latency, node load).
//!
//! Owns: [`markdown_table`], [`text_table`], their detail counterparts and
//! the number formats they share. Must not: compute statistics (they come from [`Summary`]).

use crate::summary::Summary;
use comfy_table::presets::ASCII_MARKDOWN;
use comfy_table::{CellAlignment, Table};

const HEADER: [&str; 12] = [
    "policy",
    "requests",
    "mean (s)",
    "var (s²)",
    "median (s)",
    "p95 (s)",
    "p99 (s)",
    "min (s)",
    "max (s)",
    "probes/s",
    "degraded",
    "failed",
];

/// Four significant digits, plain notation down to 1e-4, scientific below
/// (variances of fast runs are tiny); `—` for "no data".
pub(crate) fn format_number(value: Option<f64>) -> String {
    match value {
        None => "—".to_owned(),
        Some(0.0) => "0".to_owned(),
        Some(v) if v.abs() >= 1e4 => format!("{v:.0}"),
        Some(v) if v.abs() >= 1e-4 => {
            let decimals = (3 - v.abs().log10().floor() as i32).max(0) as usize;
            format!("{v:.decimals$}")
        }
        Some(v) => format!("{v:.3e}"),
    }
}

/// The table's cells, one row per summary.
pub(crate) fn rows(summaries: &[&Summary]) -> Vec<Vec<String>> {
    summaries
        .iter()
        .map(|summary| {
            let latency = summary.request_latency.as_ref();
            vec![
                summary.run.policy.clone(),
                summary.requests.to_string(),
                format_number(latency.map(|s| s.mean_s)),
                format_number(latency.map(|s| s.var_s2)),
                format_number(latency.map(|s| s.median_s)),
                format_number(latency.map(|s| s.p95_s)),
                format_number(latency.map(|s| s.p99_s)),
                format_number(latency.map(|s| s.min_s)),
                format_number(latency.map(|s| s.max_s)),
                format_number(summary.probes_per_s),
                format_number(summary.degraded_fraction),
                summary.failed.to_string(),
            ]
        })
        .collect()
}

/// Column headers, shared with the HTML table.
pub(crate) fn header() -> &'static [&'static str] {
    &HEADER
}

const DETAIL_HEADER: [&str; 12] = [
    "policy",
    "task mean (s)",
    "task median (s)",
    "task p95 (s)",
    "task p99 (s)",
    "waiting mean (s)",
    "waiting p99 (s)",
    "controller mean (s)",
    "controller p99 (s)",
    "timed out",
    "load mean",
    "load max",
];

/// Headers of the detail table: what the papers show in figures rather than
/// tables (task, waiting and controller latency, node load).
pub(crate) fn detail_header() -> &'static [&'static str] {
    &DETAIL_HEADER
}

/// The detail table's cells, one row per summary.
pub(crate) fn detail_rows(summaries: &[&Summary]) -> Vec<Vec<String>> {
    summaries
        .iter()
        .map(|summary| {
            let task = summary.task_latency.as_ref();
            let waiting = summary.waiting.as_ref();
            let controller = summary.controller.as_ref();
            vec![
                summary.run.policy.clone(),
                format_number(task.map(|s| s.mean_s)),
                format_number(task.map(|s| s.median_s)),
                format_number(task.map(|s| s.p95_s)),
                format_number(task.map(|s| s.p99_s)),
                format_number(waiting.map(|s| s.mean_s)),
                format_number(waiting.map(|s| s.p99_s)),
                format_number(controller.map(|s| s.mean_s)),
                format_number(controller.map(|s| s.p99_s)),
                format_number(summary.timed_out_fraction),
                format_number(summary.utilisation_mean),
                format_number(summary.utilisation_max),
            ]
        })
        .collect()
}

fn markdown(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut text = format!("| {} |\n", header.join(" | "));
    text.push_str("|:---|");
    text.push_str(&"---:|".repeat(header.len() - 1));
    text.push('\n');
    for row in rows {
        text.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    text
}

fn plain(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut table = Table::new();
    table.load_preset(ASCII_MARKDOWN);
    table.set_header(header);
    for row in rows {
        table.add_row(row);
    }
    for index in 1..header.len() {
        if let Some(column) = table.column_mut(index) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table.to_string()
}

/// The paper's table as GitHub-flavoured Markdown (numbers right-aligned).
pub fn markdown_table(summaries: &[&Summary]) -> String {
    markdown(&HEADER, rows(summaries))
}

/// The paper's table as plain text for a terminal (ASCII borders, no
/// colours, a fixed width so output does not depend on the terminal).
pub fn text_table(summaries: &[&Summary]) -> String {
    plain(&HEADER, rows(summaries))
}

/// The detail table (task, waiting, controller latency, load) as Markdown.
pub fn detail_markdown_table(summaries: &[&Summary]) -> String {
    markdown(&DETAIL_HEADER, detail_rows(summaries))
}

/// The detail table as plain text.
pub fn detail_text_table(summaries: &[&Summary]) -> String {
    plain(&DETAIL_HEADER, detail_rows(summaries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_four_significant_digits() {
        assert_eq!(format_number(Some(0.114)), "0.1140");
        assert_eq!(format_number(Some(1.244)), "1.244");
        assert_eq!(format_number(Some(888.9)), "888.9");
        assert_eq!(format_number(Some(0.00005)), "5.000e-5");
        assert_eq!(format_number(Some(12345.6)), "12346");
        assert_eq!(format_number(Some(0.0)), "0");
        assert_eq!(format_number(None), "—");
    }
}
