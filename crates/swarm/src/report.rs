//! The swarm's table: one row per seed (operations, faults, reads checked, the longest quiesce,
//! violations, time) and a total. Must not compute anything the reports do not hold.

use comfy_table::Table;

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
        let quiesce = report.quiesce_s.iter().copied().fold(0.0, f64::max);
        table.add_row([
            report.seed.to_string(),
            report.write_ack.clone(),
            report.epochs.to_string(),
            ops_text(report),
            faults_text(report),
            report.reads_checked.to_string(),
            report.moves.to_string(),
            format!("{quiesce:.1}"),
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
