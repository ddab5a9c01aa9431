//! lowtail's reports: records in, files out.
//!
//! Owns: aggregation of a run's [`model::RecordLog`] into a [`Summary`]
//! (exact latency statistics, probes per second, degraded fraction, per-node
//! load), batch reads' statistics ([`batch`]), the papers' tables, plots (CDFs, box plots, load per node, a
//! latency-vs-load sweep; SVG and PNG), CSV exports of records, and an HTML
//! page linking everything. Must not: read executor internals or
//! configuration (whatever records do not say comes in as [`RunInfo`]), read
//! a clock, or depend on an async runtime. Every output is a function of its
//! inputs: the same records give byte-identical files.
//!
//! Use: per run, [`RunResult::from_log`] (then the log may be dropped; call
//! [`write_records_csv`] first if records should be exported), then one
//! [`write_experiment`] over all runs and the sweep.

pub mod batch;
mod experiment;
mod html;
mod plot;
mod records;
mod results_folder;
mod stats;
mod summary;
mod table;

pub use experiment::{Experiment, Metric, MetricCurves, RunResult, SweepPoint, WrittenFiles};
pub use html::escape as escape_html;
pub use plot::{LinePanel, write_line_panels};
pub use records::{RecordFiles, record_file_names, write_records_csv};
pub use results_folder::write_experiment;
pub use stats::{BoxStats, LatencyStats, Sample};
pub use summary::{NodeLoad, RunInfo, Summary, SummaryRow, summarize};
pub use table::{detail_markdown_table, detail_text_table, markdown_table, text_table};
