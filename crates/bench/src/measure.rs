//! Timing operations: calibrate how many repetitions make a run long enough
//! to mean something, warm up, then time several runs and report the median
//! throughput. Operations compared with each other are timed interleaved,
//! round by round, so a burst of interference from a noisy neighbour lands
//! on one run of each rather than on every run of one.
//!
//! Owns: the run protocol every throughput figure of lowtail follows.
//! Must not: know what the operation does (callers verify its output).

use crate::cpu_time::thread_cpu_time;
use crate::stats::{gbps, median};
use anyhow::{Context, bail, ensure};
use std::time::Duration;

/// How long and how often to time an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Timed runs; the median of their throughputs is reported.
    pub runs: usize,
    /// Least thread CPU time of one run. Runs shorter than a few milliseconds
    /// measure the timer and the first cache misses more than the kernel.
    pub min_run: Duration,
}

impl Timing {
    /// The default: 15 runs of at least 20 ms.
    pub const STANDARD: Timing = Timing { runs: 15, min_run: Duration::from_millis(20) };
    /// A smoke test: 5 runs of at least 5 ms, for CI and `--quick`.
    pub const QUICK: Timing = Timing { runs: 5, min_run: Duration::from_millis(5) };
}

/// The result of timing one operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// Median throughput of the timed runs, GB/s.
    pub gbps_median: f64,
    /// Throughput of every timed run, GB/s, in run order.
    pub gbps_runs: Vec<f64>,
    /// Repetitions of the operation in one run.
    pub ops_per_run: u64,
}

/// Most repetitions calibration will ask for: far beyond any real need, it
/// only stops a broken timer (always reading zero) from looping for ever.
const MAX_OPS_PER_RUN: u64 = 1 << 32;

/// Times `op`, which processes `bytes_per_op` bytes of input per call.
pub fn measure(
    bytes_per_op: u64,
    timing: Timing,
    mut op: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Measurement> {
    let mut measurements = measure_interleaved(&[bytes_per_op], timing, |_| op())?;
    Ok(measurements.pop().expect("one operation, one measurement"))
}

/// Times several operations side by side: `op(i)` runs operation i, which
/// processes `bytes_per_op[i]` bytes of input per call. Returns one
/// measurement per operation, in order.
///
/// Calibration doubles as warm-up: each operation is repeated in growing
/// batches until one batch takes at least `timing.min_run`, so caches,
/// branch predictors and page tables are warm. Then every round times one
/// run of each operation in turn.
pub fn measure_interleaved(
    bytes_per_op: &[u64],
    timing: Timing,
    mut op: impl FnMut(usize) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<Measurement>> {
    ensure!(timing.runs > 0, "at least one timed run is needed");
    ensure!(!bytes_per_op.is_empty(), "no operations to time");
    ensure!(bytes_per_op.iter().all(|&b| b > 0), "an operation must process at least one byte");
    let mut run = |index: usize, ops: u64| -> anyhow::Result<Duration> {
        let start = thread_cpu_time();
        for _ in 0..ops {
            op(index)?;
        }
        Ok(thread_cpu_time().saturating_sub(start))
    };

    let mut ops_per_run = vec![1u64; bytes_per_op.len()];
    for (index, ops) in ops_per_run.iter_mut().enumerate() {
        loop {
            let elapsed = run(index, *ops).context("operation failed during warm-up")?;
            if elapsed >= timing.min_run {
                break;
            }
            *ops = next_ops_per_run(*ops, elapsed, timing.min_run);
            if *ops > MAX_OPS_PER_RUN {
                bail!("the thread CPU clock does not advance: cannot time this operation");
            }
        }
    }

    let mut gbps_runs = vec![Vec::with_capacity(timing.runs); bytes_per_op.len()];
    for _ in 0..timing.runs {
        for (index, runs) in gbps_runs.iter_mut().enumerate() {
            let elapsed = run(index, ops_per_run[index]).context("operation failed during a timed run")?;
            ensure!(!elapsed.is_zero(), "a timed run took no CPU time: the thread CPU clock is broken");
            runs.push(gbps(bytes_per_op[index] * ops_per_run[index], elapsed));
        }
    }
    Ok(gbps_runs
        .into_iter()
        .zip(ops_per_run)
        .map(|(gbps_runs, ops_per_run)| {
            let gbps_median = median(&gbps_runs).expect("at least one run");
            Measurement { gbps_median, gbps_runs, ops_per_run }
        })
        .collect())
}

/// The next batch size: aim 20% past `min_run` from the rate just observed,
/// but grow at least 2× and at most 100× per step, so a noisy first sample can
/// neither stall calibration nor overshoot it by orders of magnitude.
fn next_ops_per_run(ops_per_run: u64, elapsed: Duration, min_run: Duration) -> u64 {
    let at_least = ops_per_run.saturating_mul(2);
    let at_most = ops_per_run.saturating_mul(100);
    if elapsed.is_zero() {
        return at_most;
    }
    let aimed = (ops_per_run as f64 * min_run.as_secs_f64() * 1.2 / elapsed.as_secs_f64()).ceil() as u64;
    aimed.clamp(at_least, at_most)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_grows_within_bounds() {
        let min_run = Duration::from_millis(20);
        // 1 op took 1 ms: aim for 24 ops.
        assert_eq!(next_ops_per_run(1, Duration::from_millis(1), min_run), 24);
        // Nearly long enough: still at least double.
        assert_eq!(next_ops_per_run(10, Duration::from_millis(19), min_run), 20);
        // Far too short (or unmeasurable): at most 100×.
        assert_eq!(next_ops_per_run(3, Duration::from_nanos(1), min_run), 300);
        assert_eq!(next_ops_per_run(3, Duration::ZERO, min_run), 300);
    }

    #[test]
    fn measures_a_memory_pass_and_reports_each_run() {
        let source = vec![7u8; 256 * 1024];
        let mut destination = vec![0u8; source.len()];
        let timing = Timing { runs: 3, min_run: Duration::from_millis(2) };
        let measurement = measure(source.len() as u64, timing, || {
            destination.copy_from_slice(std::hint::black_box(&source));
            std::hint::black_box(&mut destination);
            Ok(())
        })
        .unwrap();
        assert_eq!(measurement.gbps_runs.len(), 3);
        assert!(measurement.gbps_runs.iter().all(|g| g.is_finite() && *g > 0.0));
        assert_eq!(Some(measurement.gbps_median), median(&measurement.gbps_runs));
        assert!(measurement.ops_per_run >= 1);
        assert_eq!(destination, source);
    }

    #[test]
    fn interleaved_operations_each_get_every_run() {
        let mut calls = [0u64; 2];
        let timing = Timing { runs: 4, min_run: Duration::from_millis(1) };
        let measurements = measure_interleaved(&[10, 20], timing, |i| {
            calls[i] += 1;
            let mut x = 0u64;
            for j in 0..2000u64 {
                x = std::hint::black_box(x.wrapping_add(j));
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(measurements.len(), 2);
        for (measurement, calls) in measurements.iter().zip(calls) {
            assert_eq!(measurement.gbps_runs.len(), 4);
            // Warm-up batches plus four timed runs of the calibrated size.
            assert!(calls >= 4 * measurement.ops_per_run);
        }
        assert!(measure_interleaved(&[], timing, |_| Ok(())).is_err());
    }

    #[test]
    fn a_failing_operation_is_an_error() {
        let result = measure(1, Timing::QUICK, || anyhow::bail!("wrong bytes"));
        assert!(format!("{:#}", result.unwrap_err()).contains("wrong bytes"));
    }
}
