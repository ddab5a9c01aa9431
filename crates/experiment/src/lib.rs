//! Experiments: a configuration or a paper's evaluation run in the simulator and written as a
//! results folder (`summary.json`, tables, plots, `report.html`) by the `report` crate; and the
//! live version of hu2017 ([`live`]), which drives a loopback cluster of real processes and sets
//! the simulator beside it.
//!
//! Owns: the choice of runs (which codes, policies, loads and seeds), running independent runs on
//! several threads with results in a fixed order (so output never depends on scheduling), and
//! judging a paper's claims from the summaries. Must not: compute statistics itself (that is
//! `report`, from records only), contain policy or executor logic, or read a clock outside [`live`]
//! (simulated results depend only on the configuration and seed; the live experiment measures).

pub mod apls;
pub mod ecstore;
pub mod fastcloud;
pub mod fit;
pub mod hu2017;
pub mod live;
pub mod parallel;
pub mod simulate;
pub mod xiang;

pub use hu2017::{Finding, Hu2017Options, Hu2017Outcome, SweepFinding};
pub use parallel::{Progress, run_parallel};
pub use simulate::{SimulateOptions, simulate};

use report::RunInfo;
use sim::{RunOutput, SimConfig};

/// A results folder being written: it exists once made, and remembers every file put in it.
pub(crate) struct ResultsDir<'a> {
    dir: &'a std::path::Path,
    files: Vec<std::path::PathBuf>,
}

impl<'a> ResultsDir<'a> {
    /// Creates `dir` (and its parents) if need be.
    pub(crate) fn create(dir: &'a std::path::Path) -> anyhow::Result<ResultsDir<'a>> {
        use anyhow::Context;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(ResultsDir { dir, files: Vec::new() })
    }

    /// Writes `name` (relative to the folder), replacing a file of that name.
    pub(crate) fn put(&mut self, name: &str, text: String) -> anyhow::Result<()> {
        use anyhow::Context;
        std::fs::write(self.dir.join(name), text).with_context(|| format!("writing {name}"))?;
        self.files.push(std::path::PathBuf::from(name));
        Ok(())
    }

    /// Writes `value` as pretty JSON.
    pub(crate) fn put_json(&mut self, name: &str, value: &impl serde::Serialize) -> anyhow::Result<()> {
        self.put(name, serde_json::to_string_pretty(value)? + "\n")
    }

    /// The files written (relative to the folder), and `more` after them.
    pub(crate) fn files(mut self, more: Vec<std::path::PathBuf>) -> Vec<std::path::PathBuf> {
        self.files.extend(more);
        self.files
    }
}

/// What a report needs to know about a simulated run besides its records.
pub fn run_info(config: &SimConfig, output: &RunOutput, arrival_rate_per_s: Option<f64>) -> RunInfo {
    let mut info = RunInfo::new(
        &output.code,
        output.policy.name(),
        u32::from(output.frontends),
        config.cluster.nodes,
        config.seed,
    );
    info.refresh_probes = output.refresh_probes;
    info.arrival_rate_per_s = arrival_rate_per_s;
    info
}

/// The configured arrival rate of a generated workload (a trace has none).
pub fn configured_rate(config: &SimConfig) -> Option<f64> {
    match &config.workload {
        workload::WorkloadConfig::WasLike(was) => Some(was.rate_per_s),
        _ => None,
    }
}

/// A paper's results page: its findings (the paper's number beside lowtail's, and the verdict),
/// the SVG plots, then `sections` of preformatted text under their headings. `title` is HTML.
pub fn paper_html(
    title: &str,
    findings: &[fastcloud::PaperFinding],
    plots: &[std::path::PathBuf],
    sections: &[(&str, &str)],
) -> String {
    let escape = report::escape_html;
    let mut html = format!(
        "<!doctype html><meta charset=utf-8><title>{title}</title>\
         <style>body{{font-family:sans-serif;max-width:1200px;margin:auto}}td,th{{border:1px solid #ccc;padding:4px}}\
         table{{border-collapse:collapse}}</style><h1>{title}</h1>\
         <h2>Findings</h2><table><tr><th>id</th><th>claim</th><th>paper</th><th>lowtail</th><th>verdict</th></tr>",
    );
    for f in findings {
        let verdict = match f.holds {
            Some(true) => "holds",
            Some(false) => "does not hold",
            None => "reported",
        };
        html += &format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{verdict}</td></tr>",
            f.id,
            escape(&f.claim),
            escape(&f.paper),
            escape(&f.measured)
        );
    }
    html += "</table>";
    for plot in plots.iter().filter(|p| p.extension().is_some_and(|e| e == "svg")) {
        html += &format!("<p><img src=\"{}\" style=\"max-width:100%\"></p>", escape(&plot.to_string_lossy()));
    }
    for (heading, text) in sections {
        html += &format!("<h2>{}</h2><pre>{}</pre>", escape(heading), escape(text));
    }
    html
}
