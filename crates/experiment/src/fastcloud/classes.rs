//! Two classes, reads and writes, with the paper's 1 MB fits (section VI): the grids of Figs. 8 and
//! 9 (the best of the 16 fixed code pairs at each pair of rates; k_write = 3, then 2), and MBAFEC and
//! Greedy against the best fixed pair at three mixes (Figs. 10 and 11). Writes are modelled as the paper's analysis does:
//! n tasks, done at the k-th, the rest cancelled (section III-C), with the write fit's delays.
//!
//! Must not: judge (that is `judge`); everything here is runs and their per-class statistics.

use super::point::grew;
use super::{CODE, SLOTS, read_delay, write_delay};
use model::RecordLog;
use optimize::fec_model::Admission;
use policy::fec::{AckAt, AfterAck, BacklogMeasure, ClassCode, ClassOp, CodeLengthKind};
use report::Sample;
use serde::Serialize;
use sim::fec::{FecClassSetup, FecSetup, poisson_mix};

/// Class index of reads.
pub const READ: usize = 0;
/// Class index of writes.
pub const WRITE: usize = 1;
/// Read shares α_read of Figs. 10 and 11 (read-heavy, balanced, write-heavy).
pub const MIXES: [f64; 3] = [0.9, 0.5, 0.1];
/// Loads of the mixes, as fractions of the uncoded capacity C_α = L / Σ α_i u_i(k).
pub const MIX_LOADS: [f64; 5] = [0.1, 0.3, 0.5, 0.7, 0.9];
/// Grid steps of Fig. 8: λ_read/C_read and λ_write/C_write at 0.05, 0.15, …, 0.95.
pub const GRID_STEPS: usize = 10;

/// Which grid of fixed code pairs: Fig. 8 (k = 3 for both classes) or Fig. 9 (writes of k = 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Layers {
    /// k_read = k_write = 3, n from 3 to 6.
    Fig8,
    /// k_read = 3 (n 3..6), k_write = 2 (n 2..5).
    Fig9,
}

impl Layers {
    /// Both grids.
    pub const ALL: [Layers; 2] = [Layers::Fig8, Layers::Fig9];

    /// The write class's code.
    pub fn write_code(self) -> ClassCode {
        match self {
            Layers::Fig8 => CODE,
            Layers::Fig9 => ClassCode { k: 2, n_max: 5 },
        }
    }

    /// The code of `class`.
    pub fn code(self, class: usize) -> ClassCode {
        if class == READ { CODE } else { self.write_code() }
    }

    /// The figure's number.
    pub fn figure(self) -> u8 {
        match self {
            Layers::Fig8 => 8,
            Layers::Fig9 => 9,
        }
    }
}

/// The uncoded capacity of one class alone, L/u(k) = L / (k(Δ + 1/μ)): 38.1 req/s for both fits
/// at k = 3.
pub fn class_capacity_per_s(class: usize, layers: Layers) -> f64 {
    let k = usize::from(layers.code(class).k);
    let model = if class == READ { super::read_class() } else { super::write_class() };
    optimize::fec_model::FecClass { k, ..model }.capacity_per_s(k)
}

/// A grid coordinate: 0.05 + 0.1·step.
pub fn grid_load(step: usize) -> f64 {
    0.05 + 0.1 * step as f64
}

/// The 16 fixed pairs (n_read, n_write) of a grid.
pub fn fixed_pairs(layers: Layers) -> Vec<(u16, u16)> {
    let write = layers.write_code();
    (CODE.k..=CODE.n_max).flat_map(|r| (write.k..=write.n_max).map(move |w| (r, w))).collect()
}

/// The policies of the mixes: the fixed pairs, Greedy and MBAFEC.
pub fn mix_policies() -> Vec<(String, CodeLengthKind)> {
    let mut policies: Vec<(String, CodeLengthKind)> = fixed_pairs(Layers::Fig8)
        .into_iter()
        .map(|(r, w)| (format!("({r},{w})"), CodeLengthKind::Fixed { n: vec![r, w] }))
        .collect();
    policies.push(("greedy".into(), CodeLengthKind::Greedy));
    policies.push(("mbafec".into(), CodeLengthKind::Bafec { backlog: BacklogMeasure::WaitingRequests }));
    policies
}

/// The two-class setting of Figs. 8, 10 and 11 under `kind`.
pub fn setup(kind: CodeLengthKind, seed: u64) -> FecSetup {
    setup_for(Layers::Fig8, kind, seed)
}

/// The two-class setting of `layers` under `kind`.
pub fn setup_for(layers: Layers, kind: CodeLengthKind, seed: u64) -> FecSetup {
    // Writes as the paper's analysis has them: done at the k-th stored unit, the rest cancelled.
    let write = ClassOp::Write { ack: AckAt::K, rest: AfterAck::Cancel };
    let classes = vec![
        FecClassSetup { code: CODE, delay: read_delay(), op: ClassOp::Read },
        FecClassSetup { code: layers.write_code(), delay: write_delay(), op: write },
    ];
    FecSetup { classes, slots: SLOTS, admission: Admission::NonBlocking, kind, seed }
}

/// One class's statistics in a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClassStats {
    /// Requests of the class.
    pub requests: usize,
    /// Mean latency, seconds.
    pub mean_s: f64,
    /// 99.9th percentile, seconds.
    pub p999_s: f64,
    /// Mean code length.
    pub mean_n: f64,
    /// Share of its requests with n ≥ 5.
    pub share_n_at_least_5: f64,
}

/// A two-class run's result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassPoint {
    /// Reads, then writes.
    pub classes: [ClassStats; 2],
    /// Mean latency over every request, seconds.
    pub mean_s: f64,
    /// The queue did not grow over the second half.
    pub stable: bool,
}

/// Runs the two-class `setup` on `requests` arrivals at `rate_per_s` with `read_share` reads.
pub fn run(
    setup: &FecSetup,
    rate_per_s: f64,
    read_share: f64,
    requests: usize,
    seed: u64,
) -> anyhow::Result<ClassPoint> {
    let arrivals = poisson_mix(requests, rate_per_s, &[read_share, 1.0 - read_share], seed);
    let records = setup.run(&arrivals)?.sorted_by_request();
    Ok(reduce(&records))
}

fn reduce(records: &RecordLog) -> ClassPoint {
    let points: Vec<(f64, f64)> =
        records.requests().iter().map(|r| (r.arrival_ns as f64, (r.completion_ns - r.arrival_ns) as f64)).collect();
    let stable = !grew(&points[points.len() / 2..]);
    let all = Sample::new(records.requests().iter().map(|r| r.completion_ns - r.arrival_ns).collect());
    let classes = [READ, WRITE].map(|class| {
        let of_class: Vec<_> = records.iter().filter(|r| usize::from(r.request.class) == class).collect();
        if of_class.is_empty() {
            return ClassStats::default();
        }
        let sample = Sample::new(of_class.iter().map(|r| r.request.completion_ns - r.request.arrival_ns).collect());
        let count = of_class.len() as f64;
        ClassStats {
            requests: of_class.len(),
            mean_s: sample.stats().map_or(0.0, |s| s.mean_s),
            p999_s: sample.quantile_ns(0.999).unwrap_or(0) as f64 / 1e9,
            mean_n: of_class.iter().map(|r| r.tasks.len() as f64).sum::<f64>() / count,
            share_n_at_least_5: of_class.iter().filter(|r| r.tasks.len() >= 5).count() as f64 / count,
        }
    });
    ClassPoint { classes, mean_s: all.stats().map_or(0.0, |s| s.mean_s), stable }
}
