//! The papers' tables (Hu et al., Tables 1 and 2): one row per policy, request
//! latency mean, variance, median, p95, p99, min and max in seconds, probes
//! per second and the fraction of degraded reads; as Markdown and as plain
//! text.
//!
//! Owns: [`markdown_table`], [`text_table`] and the number formats they
//! share. Must not: compute statistics (they come from [`Summary`]).

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
pub(crate) fn rows(summaries: &[&Summary]) -> Vec<[String; 12]> {
    summaries
        .iter()
        .map(|summary| {
            let latency = summary.request_latency.as_ref();
            [
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
pub(crate) fn header() -> [&'static str; 12] {
    HEADER
}

/// The table as GitHub-flavoured Markdown (numbers right-aligned).
pub fn markdown_table(summaries: &[&Summary]) -> String {
    let mut text = format!("| {} |\n", HEADER.join(" | "));
    text.push_str("|:---|");
    text.push_str(&"---:|".repeat(HEADER.len() - 1));
    text.push('\n');
    for row in rows(summaries) {
        text.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    text
}

/// The table as plain text for a terminal (ASCII borders, no colours, a
/// fixed width so output does not depend on the terminal).
pub fn text_table(summaries: &[&Summary]) -> String {
    let mut table = Table::new();
    table.load_preset(ASCII_MARKDOWN);
    table.set_header(HEADER);
    for row in rows(summaries) {
        table.add_row(row);
    }
    for index in 1..HEADER.len() {
        if let Some(column) = table.column_mut(index) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table.to_string()
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
