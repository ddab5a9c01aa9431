//! The comparison of two targets of one `lowtail bench s3` run: for every cell (scenario,
//! operation, object size, concurrency), the medians over rounds of each target's figures and
//! their ratios.
//!
//! Owns: how the rows of several rounds become one comparison line, and its table.
//! Must not: measure anything, or invent a figure a row does not have (a CPU median is taken over
//! the rounds that have one; none gives `-`, and so does a ratio over a zero).

use crate::byte_size::format_byte_size;
use crate::s3_row::{S3Op, S3Row};
use crate::stats::median;
use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};

/// One target's medians over the rounds of a cell.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetMedians {
    /// Rounds that had a row.
    pub rounds: usize,
    /// Median successful requests per second.
    pub ops_per_s: f64,
    /// Median of the rounds' median latencies, in milliseconds.
    pub p50_ms: f64,
    /// Median of the rounds' 99th percentile latencies, in milliseconds.
    pub p99_ms: f64,
    /// Median of the rounds' 99.9th percentile latencies over the rounds that have one, in ms.
    pub p999_ms: Option<f64>,
    /// Median server CPU time per successful request over the rounds that have one, in milliseconds.
    pub server_cpu_ms_per_op: Option<f64>,
}

/// One cell of the comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct ComparisonLine {
    /// What the phases ran under.
    pub scenario: String,
    /// The operation.
    pub op: S3Op,
    /// Bytes per object.
    pub object_bytes: usize,
    /// Requests in flight.
    pub concurrency: usize,
    /// The first target's medians (`None`: no row of it in this cell).
    pub first: Option<TargetMedians>,
    /// The second target's.
    pub second: Option<TargetMedians>,
}

impl ComparisonLine {
    /// First ÷ second of the median ops/s.
    pub fn ops_ratio(&self) -> Option<f64> {
        ratio(self.first.as_ref().map(|m| m.ops_per_s), self.second.as_ref().map(|m| m.ops_per_s))
    }

    /// First ÷ second of the median server CPU time per operation.
    pub fn cpu_ratio(&self) -> Option<f64> {
        let cpu = |medians: &Option<TargetMedians>| medians.as_ref().and_then(|m| m.server_cpu_ms_per_op);
        ratio(cpu(&self.first), cpu(&self.second))
    }
}

/// `numerator ÷ denominator`, none over a zero or a missing figure.
pub fn ratio(numerator: Option<f64>, denominator: Option<f64>) -> Option<f64> {
    let denominator = denominator.filter(|&value| value > 0.0)?;
    Some(numerator? / denominator)
}

/// The medians of `target`'s rows among `rows` (`None` when it has none).
pub fn medians_of<'a>(rows: impl Iterator<Item = &'a S3Row>, target: &str) -> Option<TargetMedians> {
    let rows: Vec<&S3Row> = rows.filter(|row| row.target == target).collect();
    let median_of = |figure: fn(&S3Row) -> f64| median(&rows.iter().map(|row| figure(row)).collect::<Vec<_>>());
    let cpu: Vec<f64> = rows.iter().filter_map(|row| row.server_cpu_ms_per_op).collect();
    let p999: Vec<f64> = rows.iter().filter_map(|row| row.p999_ms).collect();
    Some(TargetMedians {
        rounds: rows.len(),
        ops_per_s: median_of(|row| row.ops_per_s)?,
        p50_ms: median_of(|row| row.p50_ms)?,
        p99_ms: median_of(|row| row.p99_ms)?,
        p999_ms: median(&p999),
        server_cpu_ms_per_op: median(&cpu),
    })
}

/// A cell: (scenario, op, object size, concurrency).
pub type CellKey = (String, S3Op, usize, usize);

/// The cell of `row`.
pub fn cell_of(row: &S3Row) -> CellKey {
    (row.scenario.clone(), row.op, row.object_bytes, row.concurrency)
}

/// The cells of `rows` in the order the rows first name them.
pub fn cells_in_order(rows: &[S3Row]) -> Vec<CellKey> {
    let mut cells: Vec<CellKey> = Vec::new();
    for row in rows {
        let cell = cell_of(row);
        if !cells.contains(&cell) {
            cells.push(cell);
        }
    }
    cells
}

/// One line per (scenario, op, object size, concurrency) in the order the rows first name them,
/// comparing target `first` with target `second`.
pub fn compare(rows: &[S3Row], first: &str, second: &str) -> Vec<ComparisonLine> {
    cells_in_order(rows)
        .into_iter()
        .map(|cell| {
            let in_cell = || rows.iter().filter(|row| cell_of(row) == cell);
            let (scenario, op, object_bytes, concurrency) = cell.clone();
            ComparisonLine {
                scenario,
                op,
                object_bytes,
                concurrency,
                first: medians_of(in_cell(), first),
                second: medians_of(in_cell(), second),
            }
        })
        .collect()
}

/// What the comparison's legend says about the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFacts {
    /// The CPU model (`/proc/cpuinfo`).
    pub cpu_model: Option<String>,
    /// Logical CPUs this process may run on.
    pub logical_cpus: usize,
    /// The run's date, `YYYY-MM-DD` (UTC).
    pub date_utc: String,
}

/// The comparison as a table with its legend.
pub fn render_comparison(lines: &[ComparisonLine], first: &str, second: &str, host: &HostFacts) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    let mut header = vec!["scenario".to_string(), "op".into(), "object".into(), "concurrency".into()];
    for (what, with_ratio) in [("ops/s", true), ("p50 ms", false), ("p99 ms", false), ("CPU ms/op", true)] {
        header.extend([format!("{first} {what}"), format!("{second} {what}")]);
        if with_ratio {
            header.push(format!("{what} {first} ÷ {second}"));
        }
    }
    table.set_header(header);
    for line in lines {
        table.add_row(comparison_cells(line));
    }
    align_right(&mut table, 3..14);
    let rounds = lines.iter().filter_map(|line| line.first.as_ref().map(|m| m.rounds)).max().unwrap_or(0);
    format!(
        "{table}\n\
         {first} beside {second}: medians over {rounds} round(s) of interleaved phases. ops/s {first} ÷ {second} \
         above 1: {first} served more; CPU ms/op {first} ÷ {second} below 1: {first}'s server processes used less \
         CPU per operation (- where a target's CPU time was not measured).\n\
         Host: {cpu}, {cpus} logical CPUs shared by the client and both stores; {date} (UTC).",
        cpu = host.cpu_model.as_deref().unwrap_or("unknown CPU"),
        cpus = host.logical_cpus,
        date = host.date_utc,
    )
}

fn comparison_cells(line: &ComparisonLine) -> Vec<String> {
    let figure = |medians: &Option<TargetMedians>, get: fn(&TargetMedians) -> Option<f64>, decimals: usize| {
        optional_figure(medians.as_ref().and_then(get), decimals)
    };
    let (a, b) = (&line.first, &line.second);
    vec![
        line.scenario.clone(),
        line.op.name().to_string(),
        format_byte_size(line.object_bytes),
        line.concurrency.to_string(),
        figure(a, |m| Some(m.ops_per_s), 1),
        figure(b, |m| Some(m.ops_per_s), 1),
        ratio_text(line.ops_ratio()),
        figure(a, |m| Some(m.p50_ms), 2),
        figure(b, |m| Some(m.p50_ms), 2),
        figure(a, |m| Some(m.p99_ms), 2),
        figure(b, |m| Some(m.p99_ms), 2),
        figure(a, |m| m.server_cpu_ms_per_op, 3),
        figure(b, |m| m.server_cpu_ms_per_op, 3),
        ratio_text(line.cpu_ratio()),
    ]
}

/// Right-aligns the figures of `columns` of `table`.
pub fn align_right(table: &mut Table, columns: std::ops::Range<usize>) {
    for column in columns {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// A figure with `decimals` decimals, or `-` when there is none.
pub fn optional_figure(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_string(), |value| format!("{value:.decimals$}"))
}

/// A ratio as `1.23×`, or `-` when there is none.
pub fn ratio_text(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |value| format!("{value:.2}×"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(target: &str, round: usize, ops_per_s: f64, cpu: Option<f64>) -> S3Row {
        S3Row {
            target: target.into(),
            round,
            scenario: "healthy".into(),
            op: S3Op::Put,
            object_bytes: 4096,
            requests: 100,
            errors: 0,
            ops_per_s,
            mb_per_s: 0.0,
            p50_ms: ops_per_s / 100.0,
            p99_ms: ops_per_s / 10.0,
            p999_ms: None,
            max_ms: ops_per_s,
            concurrency: 8,
            gateway_rss_peak_mib: None,
            server_cpu_ms_per_op: cpu,
            host_idle_pct: Some(50.0),
        }
    }

    #[test]
    fn medians_over_odd_rounds_and_their_ratios() {
        let rows = [
            row("lowtail", 1, 300.0, Some(2.0)),
            row("minio", 1, 100.0, Some(1.0)),
            row("lowtail", 2, 100.0, Some(6.0)),
            row("minio", 2, 200.0, Some(3.0)),
            row("lowtail", 3, 200.0, Some(4.0)),
            row("minio", 3, 50.0, Some(2.0)),
        ];
        let lines = compare(&rows, "lowtail", "minio");
        assert_eq!(lines.len(), 1);
        let line = &lines[0];
        let (lowtail, minio) = (line.first.as_ref().unwrap(), line.second.as_ref().unwrap());
        assert_eq!((lowtail.rounds, lowtail.ops_per_s, lowtail.p50_ms, lowtail.p99_ms), (3, 200.0, 2.0, 20.0));
        assert_eq!((minio.ops_per_s, minio.server_cpu_ms_per_op), (100.0, Some(2.0)));
        assert_eq!(line.ops_ratio(), Some(2.0));
        assert_eq!(line.cpu_ratio(), Some(2.0));
    }

    #[test]
    fn medians_over_even_rounds_take_the_middle_two_and_missing_cpu_gives_no_ratio() {
        let rows = [
            row("lowtail", 1, 100.0, Some(1.0)),
            row("peer", 1, 100.0, None),
            row("lowtail", 2, 300.0, None),
            row("peer", 2, 300.0, None),
        ];
        let line = &compare(&rows, "lowtail", "peer")[0];
        let lowtail = line.first.as_ref().unwrap();
        assert_eq!(lowtail.ops_per_s, 200.0);
        // Only the round that had a figure counts; the peer had none at all.
        assert_eq!(lowtail.server_cpu_ms_per_op, Some(1.0));
        assert_eq!(line.second.as_ref().unwrap().server_cpu_ms_per_op, None);
        assert_eq!(line.ops_ratio(), Some(1.0));
        assert_eq!(line.cpu_ratio(), None);
    }

    #[test]
    fn cells_keep_their_order_and_a_zero_peer_gives_no_ratio() {
        let mut get = row("peer", 1, 0.0, Some(0.0));
        get.op = S3Op::Get;
        let rows = [row("lowtail", 1, 10.0, Some(1.0)), row("peer", 1, 5.0, Some(1.0)), get];
        let lines = compare(&rows, "lowtail", "peer");
        assert_eq!(lines.iter().map(|line| line.op).collect::<Vec<_>>(), [S3Op::Put, S3Op::Get]);
        assert_eq!(lines[1].first, None, "no lowtail row of the GET cell");
        assert_eq!((lines[1].ops_ratio(), lines[1].cpu_ratio()), (None, None));
    }

    #[test]
    fn the_table_shows_medians_ratios_and_the_host() {
        let rows = [row("lowtail", 1, 300.0, Some(2.0)), row("minio", 1, 100.0, None)];
        let host =
            HostFacts { cpu_model: Some("Test CPU 9000".into()), logical_cpus: 2, date_utc: "2026-01-02".into() };
        let text = render_comparison(&compare(&rows, "lowtail", "minio"), "lowtail", "minio", &host);
        for expected in
            ["lowtail ops/s", "minio CPU ms/op", "300.0", "100.0", "3.00×", "2.000", "Test CPU 9000", "2026-01-02"]
        {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
        assert!(text.contains(" - │"), "the missing CPU ratio is a dash:\n{text}");
    }
}
