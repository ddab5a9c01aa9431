//! How a codec benchmark is shown: a table for people, a JSON array for
//! scripts.
//!
//! Owns: the layout of `lowtail bench codec` output.
//! Must not: compute or adjust figures (every number comes from a row).

use crate::byte_size::format_byte_size;
use crate::codec_bench::{CodecBenchReport, CodecRow, Op};
use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};

/// The rows as a JSON array (one object per row), nothing else.
pub fn render_json(report: &CodecBenchReport) -> String {
    serde_json::to_string_pretty(&report.rows).expect("rows are plain data and always serialise")
}

/// One table line per (code, unit size): encode, decode with 1 and with m
/// lost data units, the memory ceiling and the baseline, then a legend.
pub fn render_table(report: &CodecBenchReport) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "code",
        "unit",
        "k × unit",
        "encode GB/s",
        "decode 1 lost GB/s",
        "decode m lost GB/s",
        "XOR ceiling GB/s",
        "baseline encode GB/s",
        "encode ÷ baseline",
        "engine",
    ]);

    let mut configurations: Vec<(&str, usize)> = Vec::new();
    for row in &report.rows {
        if !configurations.contains(&(row.code.as_str(), row.unit_bytes)) {
            configurations.push((row.code.as_str(), row.unit_bytes));
        }
    }
    for (code, unit_bytes) in configurations {
        let rows: Vec<&CodecRow> =
            report.rows.iter().filter(|r| r.code == code && r.unit_bytes == unit_bytes).collect();
        let first = rows[0];
        let find = |op: Op, lost: usize| rows.iter().find(|r| r.op == op && r.lost == lost).map(|r| r.gbps);
        let encode = find(Op::Encode, 0);
        let baseline = rows.iter().find_map(|r| r.baseline_gbps);
        let ratio = match (encode, baseline) {
            (Some(encode), Some(baseline)) if baseline > 0.0 => format!("{:.2}×", encode / baseline),
            _ => "–".to_string(),
        };
        table.add_row(vec![
            code.to_string(),
            format_byte_size(unit_bytes),
            format_byte_size(first.k * unit_bytes),
            figure(encode),
            figure(find(Op::Decode, 1)),
            figure(find(Op::Decode, first.m)),
            figure(Some(first.ceiling_gbps)),
            figure(baseline),
            ratio,
            first.engine.clone(),
        ]);
    }
    for column in 2..9 {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }

    let timing = report.timing;
    format!(
        "{table}\n\
         GB/s: 1e9 bytes of data input (k × unit) per second of thread CPU time, one thread; median of {runs} runs \
         of at least {min_run_ms} ms each after warm-up; 64-byte aligned buffers; engine {engine}.\n\
         Decode loses data units 0..lost and rebuilds them from k survivors; every operation's output was checked \
         once (encode against the reference engine, decode against the original bytes).\n\
         XOR ceiling: a plain read of the same k data units (XOR-reduce, no GF arithmetic) — what the memory \
         hierarchy allows for that working set; sets larger than L2 stream from L3 and every figure is bounded by it.\n\
         Baseline: the reed-solomon-erasure crate (simd-accel) encoding the same shape in the same run.",
        runs = timing.runs,
        min_run_ms = timing.min_run.as_millis(),
        engine = report.engine,
    )
}

fn figure(gbps: Option<f64>) -> String {
    gbps.map_or_else(|| "–".to_string(), |gbps| format!("{gbps:.2}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Timing;
    use codec::EngineKind;

    fn report() -> CodecBenchReport {
        let row = |op, lost, gbps, baseline_gbps| CodecRow {
            code: "rs-10-4".into(),
            k: 10,
            m: 4,
            unit_bytes: 1 << 20,
            op,
            lost,
            gbps,
            engine: "avx2".into(),
            ceiling_gbps: 21.5,
            baseline_gbps,
        };
        CodecBenchReport {
            rows: vec![
                row(Op::Encode, 0, 15.0, Some(7.5)),
                row(Op::Decode, 1, 20.25, None),
                row(Op::Decode, 4, 14.1, None),
            ],
            engine: EngineKind::Avx2,
            timing: Timing::STANDARD,
        }
    }

    #[test]
    fn json_is_an_array_of_the_rows() {
        let parsed: Vec<CodecRow> = serde_json::from_str(&render_json(&report())).unwrap();
        assert_eq!(parsed, report().rows);
    }

    #[test]
    fn table_pivots_rows_and_quotes_the_baseline_ratio() {
        let text = render_table(&report());
        for expected in ["rs-10-4", "1 MiB", "10 MiB", "15.00", "20.25", "14.10", "21.50", "7.50", "2.00×", "avx2"] {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
        assert!(text.contains("median of 15 runs"), "{text}");
    }
}
