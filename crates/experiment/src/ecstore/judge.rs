//! EC-Store's findings, judged from the runs' record statistics with the paper's number beside
//! lowtail's (the ids are the acceptance criteria of issue 31's notes, EA-1 …).
//!
//! Must not: compute statistics (they come from `report`), or judge a magnitude that rests on what
//! the paper does not publish (those are reported, `holds: None`).

use super::{Config, Part, RunRow, Scale, Scenario, sweep_points};
use crate::fastcloud::{PaperFinding, finding};
use report::batch::BatchSummary;

fn row(rows: &[RunRow], part: Part, config: Config, pick: impl Fn(&Scenario) -> bool) -> Option<&RunRow> {
    rows.iter().find(|r| r.job.part == part && r.job.config == config && pick(&r.job.scenario))
}

fn main(rows: &[RunRow], config: Config) -> &BatchSummary {
    &row(rows, Part::Main, config, |_| true).expect("every configuration runs at the default point").summary
}

fn mean_ms(summary: &BatchSummary) -> f64 {
    summary.latency_ms_mean().unwrap_or(f64::INFINITY)
}

fn change(from: f64, to: f64) -> String {
    format!("{:+.1} %", (to / from - 1.0) * 100.0)
}

/// The mean of the last quarter of a series' points from `from_s` on, and its first point there.
fn first_and_late(series: &[(f64, f64)], from_s: f64) -> Option<(f64, f64)> {
    let measured: Vec<f64> = series.iter().filter(|(t, _)| *t >= from_s).map(|p| p.1).collect();
    let first = *measured.first()?;
    let late = &measured[measured.len() - (measured.len() / 4).max(1)..];
    Some((first, late.iter().sum::<f64>() / late.len() as f64))
}

/// The findings at the default point and the other parts.
pub(super) fn findings(rows: &[RunRow], scale: &Scale) -> Vec<PaperFinding> {
    let mut out = Vec::new();
    let [r, ec, data, lb, c, cm, cmlb] = Config::ALL.map(|config| main(rows, config));
    let (ec_ms, c_ms, cm_ms) = (mean_ms(ec), mean_ms(c), mean_ms(cm));
    let measured = format!(
        "EC {ec_ms:.1} ms, EC+C {c_ms:.1} ms ({}), EC+C+M {cm_ms:.1} ms ({} against EC, {} against EC+C)",
        change(ec_ms, c_ms),
        change(ec_ms, cm_ms),
        change(c_ms, cm_ms)
    );
    // The claim is the order; the notes' acceptance adds a 5 % margin per step, judged
    // apart so that each verdict says what it is about.
    out.push(finding(
        "EA-1",
        "mean batch latency EC > EC+C > EC+C+M (100 KB scans, Zipf phase)",
        "EC+C −15 %, EC+C+M −40 % against EC",
        measured.clone(),
        Some(c_ms < ec_ms && cm_ms < c_ms),
    ));
    out.push(finding(
        "EA-1m",
        "each of those steps at least 5 % lower (the notes' margin)",
        "EC+C −15 %, EC+C+M a further −29 % (−40 % against EC)",
        measured,
        Some(c_ms <= 0.95 * ec_ms && cm_ms <= 0.95 * c_ms),
    ));
    let data_ms = mean_ms(data);
    out.push(finding(
        "EA-1b",
        "the same with lowtail's data-units-first EC in place of the paper's random EC",
        "not in the paper (its EC reads k random units)",
        format!(
            "EC-data {data_ms:.1} ms; EC+C {}, EC+C+M {} against it",
            change(data_ms, c_ms),
            change(data_ms, cm_ms)
        ),
        None,
    ));
    let (lb_ms, cmlb_ms) = (mean_ms(lb), mean_ms(cmlb));
    out.push(finding(
        "EA-2",
        "EC+C+M+LB < EC+LB (mean batch latency)",
        "retrieval −40 %",
        format!("EC+LB {lb_ms:.1} ms, EC+C+M+LB {cmlb_ms:.1} ms ({})", change(lb_ms, cmlb_ms)),
        Some(cmlb_ms < lb_ms),
    ));
    out.push(launched_reads(ec, lb, cm));
    out.push(imbalance(r, ec, lb, c, cm, cmlb));
    out.extend(distinct_nodes(ec, c, cm, scale));
    out.extend(throttle_and_planning(rows, ec, c, cm));
    out.extend(other_parts(rows, r, ec, cm));
    out.extend(hu_rules(rows, c));
    out
}

/// EA-13: single-stripe GETs planned by EC-Store's k cheapest units and by Hu et al.'s LLF and
/// LMLF on one footing (same nodes, workload and records); and Hu's rules on the default point's
/// batches, where each block is planned alone.
fn hu_rules(rows: &[RunRow], c: &BatchSummary) -> Vec<PaperFinding> {
    let mut out = Vec::new();
    let single = |config: Config| row(rows, Part::SingleStripe, config, |_| true).map(|r| &r.summary);
    let describe = |name: &str, s: &BatchSummary| {
        format!(
            "{name} {:.1} ms (p99 {:.1}, λ {:.1} %, {:.1} probes per request)",
            mean_ms(s),
            s.latency.map_or(f64::NAN, |l| l.p99_s * 1e3),
            s.imbalance_pct,
            s.probes_per_batch
        )
    };
    if let [Some(ec), Some(data), Some(llf), Some(lmlf), Some(cost)] = super::SINGLE_STRIPE_CONFIGS.map(single) {
        let oblivious = mean_ms(ec).min(mean_ms(data));
        let aware = [mean_ms(llf), mean_ms(lmlf), mean_ms(cost)];
        out.push(finding(
            "EA-13",
            "single-stripe GETs (batches of one block): every load-aware plan (EC+C's k cheapest units, Hu-LLF, \
             Hu-LMLF) has a lower mean than both load-oblivious reads (EC's random units, lowtail's data units)",
            "not in EC-Store's paper; Hu et al.: load-aware reads beat the normal read",
            [("EC", ec), ("EC-data", data), ("Hu-LLF", llf), ("Hu-LMLF", lmlf), ("EC+C", cost)]
                .iter()
                .map(|(name, s)| describe(name, s))
                .collect::<Vec<_>>()
                .join("; "),
            Some(aware.iter().all(|&ms| ms < oblivious)),
        ));
        out.push(finding(
            "EA-13b",
            "single-stripe GETs: EC+C's k cheapest units from its averaged cost table (no probe per GET) against \
             Hu's rules from fresh probes (reported: it rests on the probe round trip and the table's period)",
            "not in either paper",
            format!(
                "EC+C {} against Hu-LLF, {} against Hu-LMLF",
                change(mean_ms(llf), mean_ms(cost)),
                change(mean_ms(lmlf), mean_ms(cost))
            ),
            None,
        ));
    }
    if let (Some(llf), Some(lmlf)) =
        (row(rows, Part::Main, Config::HuLlf, |_| true), row(rows, Part::Main, Config::HuLmlf, |_| true))
    {
        out.push(finding(
            "EA-13c",
            "the default point's batches: EC+C's batch plans against Hu's rules planning each block alone \
             (reported)",
            "not in either paper",
            format!(
                "{}; {}; EC+C {:.1} ms ({:.2} nodes per batch) against Hu-LLF's {:.2}",
                describe("Hu-LLF", &llf.summary),
                describe("Hu-LMLF", &lmlf.summary),
                mean_ms(c),
                c.distinct_nodes_mean,
                llf.summary.distinct_nodes_mean
            ),
            None,
        ));
    }
    out
}

fn launched_reads(ec: &BatchSummary, lb: &BatchSummary, cm: &BatchSummary) -> PaperFinding {
    let lb_ratio = lb.reads_per_block / ec.reads_per_block;
    let cm_ratio = cm.reads_per_block / ec.reads_per_block;
    let mover_share = cm.mover_bytes as f64 / cm.client_bytes_run.max(1) as f64;
    finding(
        "EA-3",
        "launched reads per block EC+LB / EC = (k+δ)/k = 1.50 ± 0.01, EC+C+M / EC ≤ 1.01; the mover's bytes ≤ 1 % of client bytes",
        "EC+LB makes +50 % chunk requests; mover traffic < 0.1 % of the benchmark's",
        format!(
            "EC+LB / EC = {lb_ratio:.3}, EC+C+M / EC = {cm_ratio:.3}; mover {:.3} % of client bytes ({} moves)",
            mover_share * 100.0,
            cm.moves
        ),
        Some((lb_ratio - 1.5).abs() <= 0.01 && cm_ratio <= 1.01 && mover_share <= 0.01),
    )
}

fn imbalance(
    r: &BatchSummary,
    ec: &BatchSummary,
    lb: &BatchSummary,
    c: &BatchSummary,
    cm: &BatchSummary,
    cmlb: &BatchSummary,
) -> PaperFinding {
    let l = |s: &BatchSummary| s.imbalance_pct;
    finding(
        "EA-4",
        "load imbalance λ over bytes per node: EC+C < EC, EC+C+M < EC+C, EC+LB < EC; R within 25 % of EC",
        "Table II: R 45.4, EC 43.0, EC+LB 22.8, EC+C 31.1, EC+C+M 24.5, EC+C+M+LB 19.8",
        format!(
            "R {:.1}, EC {:.1}, EC+LB {:.1}, EC+C {:.1}, EC+C+M {:.1}, EC+C+M+LB {:.1}",
            l(r),
            l(ec),
            l(lb),
            l(c),
            l(cm),
            l(cmlb)
        ),
        Some(l(c) < l(ec) && l(cm) < l(c) && l(lb) < l(ec) && (l(r) / l(ec) - 1.0).abs() <= 0.25),
    )
}

fn distinct_nodes(ec: &BatchSummary, c: &BatchSummary, cm: &BatchSummary, scale: &Scale) -> Vec<PaperFinding> {
    let from_s = scale.warmup_ns as f64 / 1e9;
    let nodes_order = cm.distinct_nodes_mean < c.distinct_nodes_mean && c.distinct_nodes_mean < ec.distinct_nodes_mean;
    let cm_trend = first_and_late(&cm.distinct_nodes_by_bucket, from_s);
    let c_trend = first_and_late(&c.distinct_nodes_by_bucket, from_s);
    let trend_holds = match (cm_trend, c_trend) {
        (Some((cm_first, cm_late)), Some((c_first, c_late))) => {
            cm_late < cm_first && (c_late / c_first - 1.0).abs() <= 0.03
        }
        _ => false,
    };
    let show = |t: Option<(f64, f64)>| t.map_or("–".into(), |(a, b)| format!("{a:.2} → {b:.2}"));
    let cm_latency = first_and_late(&cm.latency_ms_by_bucket, from_s);
    let c_latency = first_and_late(&c.latency_ms_by_bucket, from_s);
    let learning = match (cm_latency, c_latency) {
        (Some((cm_first, cm_late)), Some((c_first, c_late))) => {
            cm_late <= 0.9 * cm_first && (c_late / c_first - 1.0).abs() < 0.05
        }
        _ => false,
    };
    let show_ms = |t: Option<(f64, f64)>| t.map_or("–".into(), |(a, b)| format!("{a:.1} → {b:.1} ms"));
    vec![
        finding(
            "EA-5",
            "distinct nodes per batch EC+C+M < EC+C < EC; over the Zipf phase EC+C+M's falls while EC+C's stays within ±3 % (first bucket → mean of the last quarter)",
            "Fig. 2's rationale: co-located blocks are read from fewer sites",
            format!(
                "EC {:.2}, EC+C {:.2}, EC+C+M {:.2}; over time EC+C+M {}, EC+C {}",
                ec.distinct_nodes_mean,
                c.distinct_nodes_mean,
                cm.distinct_nodes_mean,
                show(cm_trend),
                show(c_trend)
            ),
            Some(nodes_order && trend_holds),
        ),
        finding(
            "EA-6",
            "EC+C+M learns: the last quarter of the measured buckets ≤ 0.9 × its first after the change, while EC+C's moves < 5 %",
            "Fig. 4a: EC+C+M falls over the first 8 minutes",
            format!("EC+C+M {}, EC+C {}", show_ms(cm_latency), show_ms(c_latency)),
            Some(learning),
        ),
    ]
}

fn throttle_and_planning(rows: &[RunRow], ec: &BatchSummary, c: &BatchSummary, cm: &BatchSummary) -> Vec<PaperFinding> {
    let movers: Vec<&RunRow> = rows.iter().filter(|r| r.job.config.moves()).collect();
    let most = movers.iter().map(|r| r.summary.moves_max_per_10_s).max().unwrap_or(0);
    let violations: u64 = movers.iter().map(|r| r.move_violations).sum();
    let inline: u64 = rows
        .iter()
        .filter(|r| matches!(r.job.config, Config::EcC | Config::EcCM | Config::EcCMLb))
        .map(|r| r.summary.multi_block_inline_solves)
        .sum();
    let hit = |s: &BatchSummary| s.hit_rate().map_or("–".into(), |h| format!("{:.1} %", h * 100.0));
    vec![
        finding(
            "EA-7",
            "moves start at most once a second (≤ 10 in any 10 s) and no move puts two units of a stripe on one node (replayed from the move records)",
            "the mover moves \"less than one chunk per second\"",
            format!("at most {most} moves in 10 s over {} runs with the mover; {violations} violations", movers.len()),
            Some(most <= 10 && violations == 0),
        ),
        finding(
            "EA-8",
            "no decision on several blocks waits for an exact solve; EC+C's decision p99 ≤ 2 × EC's",
            "the ILP takes tens of ms, so a greedy plan serves while it is solved; 90 % plan-cache hits",
            format!(
                "{inline} multi-block decisions solved inline; decision p99 EC {:.0} µs, EC+C {:.0} µs; cache hits EC+C {}, EC+C+M {}",
                ec.decision_ns_p99 as f64 / 1e3,
                c.decision_ns_p99 as f64 / 1e3,
                hit(c),
                hit(cm)
            ),
            Some(inline == 0 && c.decision_ns_p99 <= 2 * ec.decision_ns_p99),
        ),
        finding(
            "EA-5b",
            "retrieval dominates a batch's latency (metadata and planning are small)",
            "Fig. 4b",
            format!(
                "EC: metadata {:.2} ms, planning {:.3} ms, retrieval and decode {:.1} ms",
                ec.metadata_ms_mean, ec.plan_ms_mean, ec.retrieval_ms_mean
            ),
            Some(ec.retrieval_ms_mean > 4.0 * (ec.metadata_ms_mean + ec.plan_ms_mean)),
        ),
    ]
}

fn other_parts(rows: &[RunRow], r: &BatchSummary, ec: &BatchSummary, cm: &BatchSummary) -> Vec<PaperFinding> {
    let mut out = Vec::new();
    let failed = |config: Config, nodes: u32| {
        row(rows, Part::Failures, config, |s| s.failed_nodes == nodes).map(|r| mean_ms(&r.summary))
    };
    let mut failure_text = Vec::new();
    let mut failure_holds = true;
    for nodes in [1, 2] {
        let (Some(ec_f), Some(cm_f)) = (failed(Config::Ec, nodes), failed(Config::EcCM, nodes)) else { continue };
        failure_holds &= cm_f < ec_f;
        failure_text.push(format!(
            "{nodes} down: EC {ec_f:.1} ms ({:+.1} ms), EC+C+M {cm_f:.1} ms ({:+.1} ms)",
            ec_f - mean_ms(ec),
            cm_f - mean_ms(cm)
        ));
    }
    if !failure_text.is_empty() {
        out.push(finding(
            "EA-9",
            "with 1 and 2 nodes down from the measured window (no repair), EC+C+M < EC still",
            "+1 ms (1 node), +5 ms (2 nodes) for all systems; the gains persist",
            failure_text.join("; "),
            Some(failure_holds),
        ));
    }
    let page = |config: Config| row(rows, Part::Pages, config, |_| true).map(|r| mean_ms(&r.summary));
    if let (Some(p_ec), Some(p_c), Some(p_cm)) = (page(Config::Ec), page(Config::EcC), page(Config::EcCM)) {
        let share = (p_ec - p_c) / (p_ec - p_cm);
        out.push(finding(
            "EA-10",
            "Wikipedia-like pages: EC > EC+C > EC+C+M (mean batch latency)",
            "EC+C+M −40 % against EC; EC+C about half of that",
            format!(
                "EC {p_ec:.1} ms, EC+C {p_c:.1} ms ({}), EC+C+M {p_cm:.1} ms ({}); EC+C's share of the reduction {:.0} %",
                change(p_ec, p_c),
                change(p_ec, p_cm),
                share * 100.0
            ),
            Some(p_ec > p_c && p_c > p_cm),
        ));
    }
    let size = |config: Config, bytes: u64| {
        row(
            rows,
            Part::BlockSize,
            config,
            |s| matches!(s.load, super::Load::Scans { block_bytes, .. } if block_bytes == bytes),
        )
        .map(|r| mean_ms(&r.summary))
    };
    let sizes: Vec<String> = [10_000u64, 1_000_000]
        .iter()
        .filter_map(|&bytes| {
            let (ec_s, cm_s, r_s, lb_s) = (
                size(Config::Ec, bytes)?,
                size(Config::EcCM, bytes)?,
                size(Config::R, bytes)?,
                size(Config::EcLb, bytes)?,
            );
            Some(format!(
                "{} KB: EC+C+M {} against EC, {} against R, {} against EC+LB",
                bytes / 1000,
                change(ec_s, cm_s),
                change(r_s, cm_s),
                change(lb_s, cm_s)
            ))
        })
        .collect();
    out.push(finding(
        "EA-12",
        "EC+C+M against R, and the gain at other block sizes (reported: they rest on the unpublished service times)",
        "100 KB: −20 % against R; 1 MB: −50 % against EC, −27 % against R, −21 % against EC+LB",
        format!("100 KB: EC+C+M {} against R; {}", change(mean_ms(r), mean_ms(cm)), sizes.join("; ")),
        None,
    ));
    out
}

/// Whether an order holds over the (EC, EC+C, EC+C+M) summaries of one point.
type OrderClaim = fn(&BatchSummary, &BatchSummary, &BatchSummary) -> bool;

/// EA-11: EA-1, EA-4 and EA-5's orders at every sweep point; they must hold at the default point
/// and at ≥ 80 % of the points, and the failing points are named.
pub(super) fn sweep_findings(rows: &[RunRow]) -> Vec<PaperFinding> {
    let points = sweep_points();
    let claims: [(&'static str, &str, OrderClaim); 3] = [
        ("EA-11/EA-1", "mean batch latency EC > EC+C > EC+C+M", |ec, c, cm| {
            mean_ms(ec) > mean_ms(c) && mean_ms(c) > mean_ms(cm)
        }),
        ("EA-11/EA-4", "load imbalance λ EC > EC+C > EC+C+M", |ec, c, cm| {
            ec.imbalance_pct > c.imbalance_pct && c.imbalance_pct > cm.imbalance_pct
        }),
        ("EA-11/EA-5", "distinct nodes per batch EC > EC+C > EC+C+M", |ec, c, cm| {
            ec.distinct_nodes_mean > c.distinct_nodes_mean && c.distinct_nodes_mean > cm.distinct_nodes_mean
        }),
    ];
    let at = |point: &Scenario, config: Config| row(rows, Part::Sweep, config, |s| s == point).map(|r| &r.summary);
    let default = Scenario::default_point();
    claims
        .iter()
        .map(|&(id, claim, holds_at)| {
            let mut failing = Vec::new();
            let mut held = 0;
            let mut default_holds = false;
            for point in &points {
                let (Some(ec), Some(c), Some(cm)) =
                    (at(point, Config::Ec), at(point, Config::EcC), at(point, Config::EcCM))
                else {
                    continue;
                };
                if holds_at(ec, c, cm) {
                    held += 1;
                    default_holds |= *point == default;
                } else {
                    failing.push(point.describe());
                }
            }
            let share = held as f64 / points.len() as f64;
            let failing_text = if failing.is_empty() { "none".into() } else { failing.join("; ") };
            finding(
                id,
                &format!("{claim}, at the default point and at ≥ 80 % of the sweep's points"),
                "the paper publishes one point",
                format!(
                    "holds at {held} of {} points ({:.0} %); fails at: {failing_text}",
                    points.len(),
                    share * 100.0
                ),
                Some(default_holds && share >= 0.8),
            )
        })
        .collect()
}
