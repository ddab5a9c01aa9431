//! `report.html`: one static page, readable without JavaScript or network:
//! the findings, then one section per code with its table and its figures
//! (SVGs as images, each linking its PNG), then the data files.
//!
//! Owns: the page's markup and HTML escaping. Must not: compute numbers
//! (cells come from the tables module) or list a plot that was not written
//! (it shows exactly the [`PlotRef`]s the plot step returned), and it reads
//! the folder only to link record CSVs that exist.

use crate::experiment::{CodeSection, Experiment, PlotRef, detail_caption, table_caption};
use crate::records::record_file_names;
use crate::table;
use std::fmt::Write as _;
use std::path::Path;

const STYLE: &str = "body{font-family:sans-serif;max-width:1400px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #bbb;padding:.3em .6em}\
td{text-align:right;font-variant-numeric:tabular-nums}td:first-child{text-align:left}th{background:#eee}\
figure{display:inline-block;margin:.5em;vertical-align:top}figure img{max-width:100%;border:1px solid #ddd}\
figcaption{font-size:.9em;max-width:900px}.findings{background:#f6f6f6;padding:.5em 1em;border-left:4px solid #888}\
.load figure img{width:440px}";

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            _ => escaped.push(c),
        }
    }
    escaped
}

/// The whole page. `out_dir` is only looked at for record CSVs.
pub(crate) fn page(out_dir: &Path, experiment: &Experiment<'_>, sections: &[CodeSection<'_>]) -> String {
    let title = escape(experiment.title);
    let mut html = String::new();
    // Writing into a String cannot fail; the results are ignored for that reason.
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n"
    );
    html.push_str("<nav><ul>\n");
    for (address, text) in experiment.links {
        let _ = writeln!(html, "<li><a href=\"{}\">{}</a></li>", escape(address), escape(text));
    }
    for section in sections {
        let code = escape(section.code);
        let _ = writeln!(html, "<li><a href=\"#code-{code}\">{code}</a></li>");
    }
    html.push_str("<li><a href=\"#data\">data files</a></li>\n</ul></nav>\n");

    html.push_str("<h2 id=\"findings\">Findings</h2>\n<div class=\"findings\">\n");
    let paragraphs: Vec<&str> = experiment.findings.split("\n\n").map(str::trim).filter(|p| !p.is_empty()).collect();
    if paragraphs.is_empty() {
        html.push_str("<p><em>No findings were written for this experiment.</em></p>\n");
    }
    for paragraph in paragraphs {
        let _ = writeln!(html, "<p>{}</p>", escape(paragraph).replace('\n', "<br>\n"));
    }
    html.push_str("</div>\n");

    for section in sections {
        section_html(&mut html, section);
    }

    html.push_str("<h2 id=\"data\">Data files</h2>\n<ul>\n");
    for (file, what) in [
        ("summary.json", "one object per (code, policy): the summary.json schema"),
        ("runs.json", "full summaries, with per-node load"),
        ("sweep.json", "latency-vs-load points"),
        ("tables.md", "the tables as Markdown"),
        ("tables.txt", "the tables as plain text"),
    ] {
        let _ = writeln!(html, "<li><a href=\"{file}\">{file}</a>: {what}</li>");
    }
    for section in sections {
        for run in &section.runs {
            let (requests, tasks) = record_file_names(&run.summary.run);
            if out_dir.join("records").join(&requests).is_file() && out_dir.join("records").join(&tasks).is_file() {
                let _ = writeln!(
                    html,
                    "<li>records of {} / {}: <a href=\"records/{requests}\">requests</a>, \
                     <a href=\"records/{tasks}\">tasks</a> (CSV, joined on <code>request</code>)</li>",
                    escape(section.code),
                    escape(&run.summary.run.policy),
                    requests = escape(&requests),
                    tasks = escape(&tasks),
                );
            }
        }
    }
    html.push_str("</ul>\n</body>\n</html>\n");
    html
}

fn section_html(html: &mut String, section: &CodeSection<'_>) {
    let code = escape(section.code);
    let _ = writeln!(html, "<section id=\"code-{code}\">\n<h2>{code}</h2>");
    let summaries: Vec<_> = section.runs.iter().map(|run| &run.summary).collect();
    table_html(html, &table_caption(section.code), table::header(), table::rows(&summaries));
    table_html(html, &detail_caption(section.code), table::detail_header(), table::detail_rows(&summaries));

    let (load_plots, other_plots): (Vec<&PlotRef>, Vec<&PlotRef>) = section.plots.iter().partition(|plot| plot.load);
    for plot in other_plots {
        figure_html(html, plot);
    }
    if !load_plots.is_empty() {
        html.push_str("<h3>Load per node</h3>\n<div class=\"load\">\n");
        for plot in load_plots {
            figure_html(html, plot);
        }
        html.push_str("</div>\n");
    }
    html.push_str("</section>\n");
}

fn table_html(html: &mut String, caption: &str, header: &[&str], rows: Vec<Vec<String>>) {
    let _ = writeln!(html, "<table>\n<caption>{}</caption>\n<thead><tr>", escape(caption));
    for column in header {
        let _ = write!(html, "<th>{}</th>", escape(column));
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        html.push_str("<tr>");
        for cell in row {
            let _ = write!(html, "<td>{}</td>", escape(&cell));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody>\n</table>\n");
}

fn figure_html(html: &mut String, plot: &PlotRef) {
    let stem = escape(&plot.stem);
    let caption = escape(&plot.caption);
    let _ = write!(html, "<figure><a href=\"plots/{stem}.svg\"><img src=\"plots/{stem}.svg\" alt=\"{caption}\"></a>");
    let _ = write!(html, "<figcaption>{caption}");
    if plot.png {
        let _ = write!(html, " (<a href=\"plots/{stem}.png\">PNG</a>)");
    }
    html.push_str("</figcaption></figure>\n");
}
