//! The swarm's tables: one row per seed (its cluster, operations, faults, reads checked, the
//! longest quiesce, violations, time) and a total; and a batch's sum (seeds, operations, faults by
//! kind, violations with their seeds, wall time). Must not compute anything the reports do not
//! hold.

use comfy_table::Table;

use crate::batch::BatchReport;
use crate::run::SeedReport;

fn ops_text(report: &SeedReport) -> String {
    report
        .ops
        .iter()
        .map(|(kind, counts)| format!("{kind} {}/{}", counts.ok, counts.ok + counts.failed))
        .collect::<Vec<_>>()
        .join(", ")
}

fn faults_text(report: &SeedReport) -> String {
    report.faults.iter().map(|(kind, count)| format!("{kind} {count}")).collect::<Vec<_>>().join(", ")
}

/// The table of `reports`, with a total row.
pub fn table(reports: &[SeedReport]) -> String {
    let mut table = Table::new();
    table.set_header([
        "seed",
        "cluster",
        "write ack",
        "epochs",
        "operations (ok/all)",
        "faults",
        "reads checked",
        "moves",
        "longest quiesce s",
        "violations",
        "s",
    ]);
    for report in reports {
        let quiesce = longest_quiesce_text(report);
        table.add_row([
            report.seed.to_string(),
            report.cluster.clone(),
            report.write_ack.clone(),
            report.epochs.to_string(),
            ops_text(report),
            faults_text(report),
            report.reads_checked.to_string(),
            report.moves.to_string(),
            quiesce,
            report.violations.len().to_string(),
            format!("{:.0}", report.duration_s),
        ]);
    }
    let ops: u64 = reports.iter().flat_map(|r| r.ops.values()).map(|c| c.ok + c.failed).sum();
    let faults: u64 = reports.iter().flat_map(|r| r.faults.values()).sum();
    let reads: u64 = reports.iter().map(|r| r.reads_checked).sum();
    let moves: u64 = reports.iter().map(|r| r.moves).sum();
    let violations: usize = reports.iter().map(|r| r.violations.len()).sum();
    let seconds: f64 = reports.iter().map(|r| r.duration_s).sum();
    let epochs: usize = reports.iter().map(|r| r.epochs).sum();
    table.add_row([
        format!("{} seeds", reports.len()),
        String::new(),
        String::new(),
        epochs.to_string(),
        format!("{ops} operations"),
        format!("{faults} faults"),
        reads.to_string(),
        moves.to_string(),
        String::new(),
        violations.to_string(),
        format!("{seconds:.0}"),
    ]);
    table.to_string()
}

/// The sum of a batch: one row per figure, faults one kind a line.
pub fn summary(batch: &BatchReport) -> String {
    let lines = |counts: &std::collections::BTreeMap<String, u64>| {
        let text: Vec<String> = counts.iter().map(|(kind, count)| format!("{kind}: {count}")).collect();
        if text.is_empty() { "none".to_string() } else { text.join("\n") }
    };
    let seeds = match (batch.seeds.first(), batch.seeds.last()) {
        (Some(first), Some(last)) => format!("{} ({first}..={last})", batch.seeds.len()),
        _ => "0".to_string(),
    };
    let clusters: Vec<String> = batch.clusters.iter().map(|(name, count)| format!("{name}: {count}")).collect();
    let (violations, losses_allowed) = (count_with_seeds(&batch.violations), count_with_seeds(&batch.losses_allowed));
    let errors: Vec<String> = batch.errors.iter().map(|(seed, error)| format!("seed {seed}: {error}")).collect();
    let mut table = Table::new();
    table.set_header(["", "all seeds"]);
    table.add_row(["seeds".to_string(), seeds]);
    table.add_row(["clusters".to_string(), clusters.join("\n")]);
    table.add_row(["operations (ok/all)".to_string(), format!("{}/{}", batch.operations_ok, batch.operations)]);
    table.add_row(["reads checked".to_string(), batch.reads_checked.to_string()]);
    table.add_row(["faults by kind".to_string(), lines(&batch.faults)]);
    table.add_row(["faults refused".to_string(), lines(&batch.faults_refused)]);
    table.add_row(["faults changed".to_string(), lines(&batch.faults_changed)]);
    table.add_row(["losses the answers allowed".to_string(), losses_allowed]);
    table.add_row(["violations".to_string(), violations]);
    if !errors.is_empty() {
        table.add_row(["seeds that did not run".to_string(), errors.join("\n")]);
    }
    table.add_row(["wall time s".to_string(), format!("{:.0}", batch.wall_s)]);
    table.to_string()
}

/// How many things `by_seed` holds and in which seeds: `0`, or `3 (seeds 5, 9)`.
fn count_with_seeds(by_seed: &std::collections::BTreeMap<u64, Vec<String>>) -> String {
    if by_seed.is_empty() {
        return "0".to_string();
    }
    let count: usize = by_seed.values().map(Vec::len).sum();
    let seeds: Vec<String> = by_seed.keys().map(u64::to_string).collect();
    format!("{count} (seeds {})", seeds.join(", "))
}

/// The longest quiesce in seconds, with what held it up longest (`24.1 (node N has not finished a
/// scrub pass… 20.0)`).
fn longest_quiesce_text(report: &SeedReport) -> String {
    let longest = report.quiesce_s.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1));
    let Some((index, seconds)) = longest else { return "–".into() };
    let blocker = report
        .quiesce_blockers
        .get(index)
        .and_then(|blockers| blockers.iter().max_by(|a, b| a.1.total_cmp(b.1)))
        .map_or(String::new(), |(kind, held_s)| format!(" ({kind} {held_s:.1})"));
    format!("{seconds:.1}{blocker}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_quiesce_names_what_held_it_up_longest() {
        let mut report = SeedReport::default();
        assert_eq!(longest_quiesce_text(&report), "–");
        report.quiesce_s = vec![3.0, 24.1, 5.0];
        let blockers = |pairs: &[(&str, f64)]| pairs.iter().map(|(k, s)| (k.to_string(), *s)).collect();
        report.quiesce_blockers =
            vec![blockers(&[("census", 2.5)]), blockers(&[("census", 3.0), ("scrub", 20.0)]), blockers(&[])];
        assert_eq!(longest_quiesce_text(&report), "24.1 (scrub 20.0)");
    }

    #[test]
    fn the_summary_names_every_fault_kind_and_the_seeds_with_violations() {
        let batch = BatchReport {
            seeds: vec![4, 5, 6],
            faults: [("hang node >10s".to_string(), 3), ("fill disk".to_string(), 2)].into(),
            violations: [(5, vec!["a".to_string(), "b".to_string()])].into(),
            losses_allowed: [(6, vec!["c0/k1".to_string()])].into(),
            wall_s: 61.2,
            ..BatchReport::default()
        };
        let text = summary(&batch);
        for expected in ["3 (4..=6)", "hang node >10s: 3", "fill disk: 2", "2 (seeds 5)", "1 (seeds 6)", "61"] {
            assert!(text.contains(expected), "{expected} missing from\n{text}");
        }
    }
}
