//! Each adversity of one `lowtail bench s3` run beside `healthy`: for every target and cell
//! (operation, object size, concurrency), the medians over rounds of the figures under the
//! scenario and their ratios to the same target's healthy medians of the same run.
//!
//! Owns: how a scenario's rows and the healthy rows become one line, and its table.
//! Must not: measure anything, or compare figures of different targets or cells (a ratio is always
//! one target's scenario over that target's own healthy cell; one without the other gives none).

use crate::byte_size::format_byte_size;
use crate::s3_adversity::{FailSlowShape, Scenario};
use crate::s3_compare::{
    CellKey, TargetMedians, align_right, cell_of, cells_in_order, medians_of, optional_figure, ratio, ratio_text,
};
use crate::s3_row::{RebuildRow, S3Op, S3Row, SettleRow};
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};

/// One target's cell under one scenario, beside its healthy cell.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioLine {
    /// The target's name.
    pub target: String,
    /// The scenario.
    pub scenario: String,
    /// The operation.
    pub op: S3Op,
    /// Bytes per object.
    pub object_bytes: usize,
    /// Requests in flight.
    pub concurrency: usize,
    /// The medians under the scenario.
    pub under: TargetMedians,
    /// The same target's healthy medians of the cell (`None`: no healthy row).
    pub healthy: Option<TargetMedians>,
}

impl ScenarioLine {
    /// The scenario's median p50 ÷ healthy's.
    pub fn p50_ratio(&self) -> Option<f64> {
        self.ratio_of(|m| Some(m.p50_ms))
    }

    /// The scenario's median p99 ÷ healthy's.
    pub fn p99_ratio(&self) -> Option<f64> {
        self.ratio_of(|m| Some(m.p99_ms))
    }

    /// The scenario's median p99.9 ÷ healthy's.
    pub fn p999_ratio(&self) -> Option<f64> {
        self.ratio_of(|m| m.p999_ms)
    }

    /// The scenario's median ops/s ÷ healthy's.
    pub fn ops_ratio(&self) -> Option<f64> {
        self.ratio_of(|m| Some(m.ops_per_s))
    }

    /// The scenario's median server CPU per operation ÷ healthy's.
    pub fn cpu_ratio(&self) -> Option<f64> {
        self.ratio_of(|m| m.server_cpu_ms_per_op)
    }

    fn ratio_of(&self, figure: fn(&TargetMedians) -> Option<f64>) -> Option<f64> {
        ratio(figure(&self.under), self.healthy.as_ref().and_then(figure))
    }
}

/// One line per (op, object size, concurrency, scenario other than healthy, target), targets
/// side by side, in the order the rows first name the cells.
pub fn against_healthy(rows: &[S3Row], targets: &[String]) -> Vec<ScenarioLine> {
    let healthy = Scenario::Healthy.name();
    let cells = cells_in_order(rows);
    let mut measures: Vec<(S3Op, usize, usize)> = Vec::new();
    for (_, op, object_bytes, concurrency) in &cells {
        if !measures.contains(&(*op, *object_bytes, *concurrency)) {
            measures.push((*op, *object_bytes, *concurrency));
        }
    }
    let mut scenarios: Vec<&str> = Vec::new();
    for (scenario, ..) in cells.iter().filter(|(scenario, ..)| scenario != healthy) {
        if !scenarios.contains(&scenario.as_str()) {
            scenarios.push(scenario);
        }
    }
    let in_cell = |cell: CellKey| rows.iter().filter(move |row| cell_of(row) == cell);
    let mut lines = Vec::new();
    for (op, object_bytes, concurrency) in measures {
        for &scenario in &scenarios {
            for target in targets {
                let Some(under) = medians_of(in_cell((scenario.into(), op, object_bytes, concurrency)), target) else {
                    continue;
                };
                lines.push(ScenarioLine {
                    target: target.clone(),
                    scenario: scenario.to_string(),
                    op,
                    object_bytes,
                    concurrency,
                    under,
                    healthy: medians_of(in_cell((healthy.into(), op, object_bytes, concurrency)), target),
                });
            }
        }
    }
    lines
}

/// The lines as a table with its legend.
pub fn render_scenarios(lines: &[ScenarioLine], fail_slow: FailSlowShape, victims: &[(String, String)]) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "target",
        "scenario",
        "op",
        "object",
        "concurrency",
        "p50 ms",
        "p50 ×",
        "p99 ms",
        "p99 ×",
        "p99.9 ms",
        "p99.9 ×",
        "ops/s",
        "ops/s ×",
        "CPU ms/op",
        "CPU ×",
    ]);
    for line in lines {
        table.add_row(vec![
            line.target.clone(),
            line.scenario.clone(),
            line.op.name().to_string(),
            format_byte_size(line.object_bytes),
            line.concurrency.to_string(),
            format!("{:.2}", line.under.p50_ms),
            ratio_text(line.p50_ratio()),
            format!("{:.2}", line.under.p99_ms),
            ratio_text(line.p99_ratio()),
            optional_figure(line.under.p999_ms, 2),
            ratio_text(line.p999_ratio()),
            format!("{:.1}", line.under.ops_per_s),
            ratio_text(line.ops_ratio()),
            optional_figure(line.under.server_cpu_ms_per_op, 3),
            ratio_text(line.cpu_ratio()),
        ]);
    }
    align_right(&mut table, 4..15);
    let victims: Vec<String> = victims.iter().map(|(target, victim)| format!("{target}: {victim}")).collect();
    let rounds = lines.iter().map(|line| line.under.rounds).max().unwrap_or(0);
    format!(
        "{table}\n\
         Each scenario beside healthy: medians over {rounds} round(s) under the scenario, and × the same target's \
         healthy median of the same run (latency × above 1: slower; ops/s × below 1: fewer).\n\
         fail-slow: the victim stopped (SIGSTOP) {stopped} % of every {period} ms and continued (SIGCONT) for the \
         rest; down: the victim killed (SIGKILL) before the scenario's phases and started again after them; \
         rebuild: the victim killed, its data directory emptied (a new disk) and started again before the \
         phases, which run while the store rebuilds it; hot: no fault, one GET phase over the healthy PUT's \
         objects drawn Zipf-wise (exponent 1), the most popular those with a data unit on the victim node \
         (lowtail, located through its /admin/locate; other stores' in the order written). Under \
         a scenario, PUT writes new keys, GET reads the objects the healthy PUT wrote (placed while every process \
         was well), DELETE deletes the scenario's own.\n\
         Victims: {victims}.",
        stopped = fail_slow.stopped_pct,
        period = fail_slow.period.as_millis(),
        victims = victims.join("; "),
    )
}

/// The rebuilds of the `rebuild` scenario, one line each, with the ideal time from the same
/// round's fastest healthy GET cell of the target in `rows`.
pub fn render_rebuilds(rebuilds: &[RebuildRow], rows: &[S3Row]) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    let header = ["target", "round", "object", "concurrency", "to whole s", "rebuilt MB", "MB/s", "ideal s", "× ideal"];
    table.set_header(header.to_vec());
    for rebuild in rebuilds {
        let ideal = rebuild.ideal_seconds(healthy_get_mb_per_s(rows, &rebuild.target, rebuild.round));
        let (ideal_s, times_ideal) = match ideal {
            Some(ideal) if ideal > 0.0 => (format!("{ideal:.1}"), format!("{:.1}×", rebuild.seconds_to_whole / ideal)),
            _ => ("–".into(), "–".into()),
        };
        table.add_row(vec![
            rebuild.target.clone(),
            rebuild.round.to_string(),
            format_byte_size(rebuild.object_bytes),
            rebuild.concurrency.to_string(),
            format!("{:.1}", rebuild.seconds_to_whole),
            format!("{:.1}", rebuild.bytes_rebuilt as f64 / 1e6),
            format!("{:.1}", rebuild.mb_per_s()),
            ideal_s,
            times_ideal,
        ]);
    }
    align_right(&mut table, 1..9);
    format!(
        "{table}\n\
         Rebuilds: from the victim's restart with an empty data directory to the first repair census that found \
         every stripe whole, and the bytes of units rebuilt meanwhile (from the gateway's status; the scenario's \
         phases ran during the first part of it, the rest was idle). Ideal: the k × rebuilt bytes a rebuild reads, \
         at the rate the healthy cluster served GETs in the same round (its fastest healthy GET cell: each byte a \
         client got was a unit byte read from a node), as if the survivors did nothing else. Other stores do not \
         report theirs."
    )
}

/// How long each target took to fall quiet after each scenario, one line per lift.
pub fn render_settles(settles: &[SettleRow]) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec!["target", "round", "object", "after", "quiet after s"]);
    for settle in settles {
        let waited = format!("{:.1}{}", settle.seconds, if settle.quiet { "" } else { " (not quiet)" });
        table.add_row(vec![
            settle.target.clone(),
            settle.round.to_string(),
            format_byte_size(settle.object_bytes),
            settle.scenario.clone(),
            waited,
        ]);
    }
    align_right(&mut table, 1..5);
    format!(
        "{table}\n\
         Settling: after each scenario was lifted (lowtail: once whole again), the benchmark waited until the \
         target's server processes used under 5 % of one core over three seconds in a row, so that what the scenario left \
         running (a store healing a wiped drive in the background) did not run under the next phases; \
         \"not quiet\": 10 minutes passed first and the run went on. For a store that does not report its \
         repair, the time after `rebuild` is the nearest figure to its heal time."
    )
}

/// The fastest healthy GET rate of `target` in `round`, MB/s (0 without one).
fn healthy_get_mb_per_s(rows: &[S3Row], target: &str, round: usize) -> f64 {
    rows.iter()
        .filter(|row| row.target == target && row.round == round && row.scenario == "healthy" && row.op == S3Op::Get)
        .map(|row| row.mb_per_s)
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn row(target: &str, scenario: &str, round: usize, p99_ms: f64) -> S3Row {
        S3Row {
            target: target.into(),
            round,
            scenario: scenario.into(),
            op: S3Op::Get,
            object_bytes: 4096,
            requests: 100,
            errors: 0,
            ops_per_s: 1000.0 / p99_ms,
            mb_per_s: 0.0,
            p50_ms: p99_ms / 4.0,
            p99_ms,
            p999_ms: Some(p99_ms * 2.0),
            max_ms: p99_ms * 3.0,
            concurrency: 8,
            gateway_rss_peak_mib: None,
            server_cpu_ms_per_op: Some(1.0),
            host_idle_pct: None,
        }
    }

    #[test]
    fn each_target_is_compared_with_its_own_healthy_cell() {
        let rows = [
            row("lowtail", "healthy", 1, 4.0),
            row("minio", "healthy", 1, 10.0),
            row("lowtail", "fail-slow", 1, 5.0),
            row("minio", "fail-slow", 1, 50.0),
            row("lowtail", "healthy", 2, 4.0),
            row("minio", "healthy", 2, 10.0),
            row("lowtail", "fail-slow", 2, 4.4),
            row("minio", "fail-slow", 2, 40.0),
            row("lowtail", "healthy", 3, 8.0),
            row("minio", "healthy", 3, 10.0),
            row("lowtail", "fail-slow", 3, 6.0),
            row("minio", "fail-slow", 3, 45.0),
        ];
        let lines = against_healthy(&rows, &["lowtail".into(), "minio".into()]);
        assert_eq!(lines.len(), 2);
        let (lowtail, minio) = (&lines[0], &lines[1]);
        assert_eq!((lowtail.target.as_str(), lowtail.scenario.as_str()), ("lowtail", "fail-slow"));
        // Medians: lowtail's fail-slow p99 5.0 over its healthy 4.0; MinIO's 45 over 10.
        assert_eq!(lowtail.p99_ratio(), Some(1.25));
        assert_eq!(minio.p99_ratio(), Some(4.5));
        assert_eq!(lowtail.p999_ratio(), Some(1.25));
        assert_eq!(minio.ops_ratio(), Some((1000.0 / 45.0) / 100.0));
        assert_eq!(lowtail.cpu_ratio(), Some(1.0));
        let text = render_scenarios(
            &lines,
            FailSlowShape { stopped_pct: 90, period: Duration::from_millis(100) },
            &[("lowtail".into(), "storage node 0 (pid 7)".into())],
        );
        for expected in ["fail-slow", "1.25×", "4.50×", "90 % of every 100 ms", "storage node 0 (pid 7)"] {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
    }

    #[test]
    fn a_rebuild_line_gives_its_rate() {
        let rebuild = RebuildRow {
            target: "lowtail".into(),
            round: 1,
            object_bytes: 1 << 20,
            concurrency: 8,
            seconds_to_whole: 20.0,
            bytes_rebuilt: 100_000_000,
            data_units: Some(6),
        };
        assert_eq!(rebuild.mb_per_s(), 5.0);
        // 6 × 100 MB at the healthy GET rate of 150 MB/s (the round's faster cell): 4 s.
        let mut healthy = vec![row("lowtail", "healthy", 1, 10.0), row("lowtail", "healthy", 1, 10.0)];
        healthy[0].mb_per_s = 40.0;
        healthy[1].mb_per_s = 150.0;
        let mut other_round = row("lowtail", "healthy", 2, 10.0);
        other_round.mb_per_s = 600.0;
        healthy.push(other_round);
        let text = render_rebuilds(std::slice::from_ref(&rebuild), &healthy);
        for expected in ["to whole s", "20.0", "100.0", "5.0", "1 MiB", "4.0", "5.0×"] {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
        let unknown = RebuildRow { data_units: None, ..rebuild };
        assert!(render_rebuilds(&[unknown], &healthy).contains('–'), "no k: no ideal");
    }

    #[test]
    fn a_settle_line_says_when_the_wait_gave_up() {
        let settle = |quiet| SettleRow {
            target: "minio".into(),
            round: 2,
            object_bytes: 4096,
            scenario: "rebuild".into(),
            seconds: 41.25,
            quiet,
        };
        let text = render_settles(&[settle(true)]);
        assert!(text.contains("41.2") && text.contains("rebuild") && !text.contains("(not quiet)"), "{text}");
        assert!(render_settles(&[settle(false)]).contains("41.2 (not quiet)"));
    }

    #[test]
    fn a_scenario_without_its_healthy_cell_has_no_ratio() {
        let lines = against_healthy(&[row("lowtail", "down", 1, 5.0)], &["lowtail".into()]);
        assert_eq!(lines.len(), 1);
        assert_eq!((lines[0].p50_ratio(), lines[0].p99_ratio(), lines[0].ops_ratio()), (None, None, None));
        assert!(against_healthy(&[row("lowtail", "healthy", 1, 5.0)], &["lowtail".into()]).is_empty());
    }
}
