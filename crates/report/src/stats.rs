//! Exact order statistics of one metric: a sorted sample of nanosecond
//! durations and what tables and plots read from it (mean, variance,
//! nearest-rank percentiles, box-plot quartiles, CDF points).
//!
//! Owns: [`Sample`], [`LatencyStats`], [`BoxStats`]. Must not: know where a
//! sample came from (that is `summary`), or approximate: every percentile is
//! an observed value of the sample (nearest rank, no interpolation, no
//! histogram buckets), so a reported p99 is a latency some request really had.
//!
//! Cost: one `sort_unstable` of `u64`s per metric (about 0.1 s for ten
//! million samples) and 8 bytes per sample while it lives. Sorting also fixes
//! the order of the floating-point sums, so the same multiset of samples gives
//! bit-identical statistics whatever order the executor emitted records in.

use model::NANOS_PER_SECOND;
use serde::{Deserialize, Serialize};

/// Converts nanoseconds to seconds.
pub(crate) fn seconds(nanos: f64) -> f64 {
    nanos / NANOS_PER_SECOND as f64
}

/// Rounds a value in seconds (or a fraction) to 1e-9, the resolution of the
/// records, so that the JSON shows `0.0125` and not `0.012500000000000002`.
/// Deterministic: the same input gives the same bits.
pub(crate) fn round_nano(value: f64) -> f64 {
    debug_assert!(value.is_finite());
    (value * 1e9).round() / 1e9
}

/// A sorted sample of durations in nanoseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    sorted_ns: Vec<u64>,
}

impl Sample {
    /// Sorts `values_ns` into a sample.
    pub fn new(mut values_ns: Vec<u64>) -> Sample {
        values_ns.sort_unstable();
        Sample { sorted_ns: values_ns }
    }

    /// Samples held.
    pub fn len(&self) -> usize {
        self.sorted_ns.len()
    }

    /// Whether the sample is empty.
    pub fn is_empty(&self) -> bool {
        self.sorted_ns.is_empty()
    }

    /// The values, ascending.
    pub fn sorted_ns(&self) -> &[u64] {
        &self.sorted_ns
    }

    /// The nearest-rank `fraction` quantile (the smallest value with at least
    /// `fraction` of the sample at or below it); `None` on an empty sample.
    /// `fraction` is clamped to `0..=1`; 0 gives the minimum.
    pub fn quantile_ns(&self, fraction: f64) -> Option<u64> {
        let count = self.sorted_ns.len();
        if count == 0 {
            return None;
        }
        let fraction = fraction.clamp(0.0, 1.0);
        // ceil(q·n) is the 1-based rank; computed in f64, which is exact for
        // the sample sizes a run produces (< 2^53).
        let rank = (fraction * count as f64).ceil() as usize;
        Some(self.sorted_ns[rank.clamp(1, count) - 1])
    }

    /// Mean, variance and percentiles; `None` on an empty sample ("no data",
    /// never a NaN).
    pub fn stats(&self) -> Option<LatencyStats> {
        let count = self.sorted_ns.len();
        let min_ns = *self.sorted_ns.first()?;
        let max_ns = *self.sorted_ns.last()?;
        // The sum is exact in u128; the mean is one rounding of it.
        let sum_ns: u128 = self.sorted_ns.iter().map(|&v| u128::from(v)).sum();
        let mean_ns = sum_ns as f64 / count as f64;
        // Two-pass population variance (ddof = 0, as numpy's default, which
        // the paper's tables most likely used), in seconds² to keep the
        // squares in range.
        let mean_s = seconds(mean_ns);
        let sum_squares: f64 = self
            .sorted_ns
            .iter()
            .map(|&v| {
                let deviation = seconds(v as f64) - mean_s;
                deviation * deviation
            })
            .sum();
        let quantile_s = |fraction: f64| seconds(self.quantile_ns(fraction).unwrap_or(0) as f64);
        Some(LatencyStats {
            count: count as u64,
            mean_s: round_nano(mean_s),
            var_s2: sum_squares / count as f64,
            min_s: seconds(min_ns as f64),
            median_s: quantile_s(0.5),
            p95_s: quantile_s(0.95),
            p99_s: quantile_s(0.99),
            max_s: seconds(max_ns as f64),
        })
    }

    /// Box-plot statistics (Tukey): quartiles, whiskers at the most extreme
    /// samples within 1.5 IQR of the box, plus p99 and max, which the box
    /// plot marks because outliers are far too many to draw one by one.
    pub fn box_stats(&self) -> Option<BoxStats> {
        let q1 = seconds(self.quantile_ns(0.25)? as f64);
        let median = seconds(self.quantile_ns(0.5)? as f64);
        let q3 = seconds(self.quantile_ns(0.75)? as f64);
        let reach = 1.5 * (q3 - q1);
        let in_low_fence = self.sorted_ns.partition_point(|&v| seconds(v as f64) < q1 - reach);
        let in_high_fence = self.sorted_ns.partition_point(|&v| seconds(v as f64) <= q3 + reach);
        // The fences always include q1 and q3 themselves, so both indices
        // point inside the sample.
        let whisker_low = seconds(self.sorted_ns[in_low_fence] as f64);
        let whisker_high = seconds(self.sorted_ns[in_high_fence - 1] as f64);
        Some(BoxStats {
            whisker_low_s: whisker_low,
            q1_s: q1,
            median_s: median,
            q3_s: q3,
            whisker_high_s: whisker_high,
            p99_s: seconds(self.quantile_ns(0.99)? as f64),
            max_s: seconds(*self.sorted_ns.last()? as f64),
        })
    }

    /// Points `(value in seconds, fraction of the sample ≤ value)` of the
    /// empirical CDF, at most `max_points` of them at evenly spaced ranks;
    /// the last point is always the maximum at fraction 1. Empty on an empty
    /// sample.
    pub fn cdf_points(&self, max_points: usize) -> Vec<(f64, f64)> {
        let count = self.sorted_ns.len();
        let points = max_points.max(2).min(count);
        (1..=points)
            .map(|j| {
                // Rank ceil(j·n / points), 1-based; the last is n.
                let rank = (j * count).div_ceil(points);
                (seconds(self.sorted_ns[rank - 1] as f64), rank as f64 / count as f64)
            })
            .collect()
    }
}

/// Summary statistics of one latency metric, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Samples.
    pub count: u64,
    /// Mean.
    pub mean_s: f64,
    /// Population variance (seconds²).
    pub var_s2: f64,
    /// Smallest sample.
    pub min_s: f64,
    /// Median (nearest rank).
    pub median_s: f64,
    /// 95th percentile (nearest rank).
    pub p95_s: f64,
    /// 99th percentile (nearest rank).
    pub p99_s: f64,
    /// Largest sample.
    pub max_s: f64,
}

/// What a box plot draws for one metric of one run, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BoxStats {
    /// Lower whisker: smallest sample ≥ q1 − 1.5 IQR.
    pub whisker_low_s: f64,
    /// First quartile.
    pub q1_s: f64,
    /// Median.
    pub median_s: f64,
    /// Third quartile.
    pub q3_s: f64,
    /// Upper whisker: largest sample ≤ q3 + 1.5 IQR.
    pub whisker_high_s: f64,
    /// 99th percentile.
    pub p99_s: f64,
    /// Largest sample.
    pub max_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(values: &[u64]) -> Sample {
        Sample::new(values.iter().map(|v| v * 1_000_000).collect())
    }

    #[test]
    fn nearest_rank_percentiles_are_observed_values() {
        // 1..=100 ms: p95 is the 95th value, p99 the 99th, median the 50th.
        let sample = ms(&(1..=100).rev().collect::<Vec<_>>());
        let stats = sample.stats().unwrap();
        assert_eq!(stats.count, 100);
        assert_eq!(stats.min_s, 0.001);
        assert_eq!(stats.median_s, 0.050);
        assert_eq!(stats.p95_s, 0.095);
        assert_eq!(stats.p99_s, 0.099);
        assert_eq!(stats.max_s, 0.100);
        assert_eq!(stats.mean_s, 0.0505);
        // Population variance of 1..=100 is (100² − 1) / 12 ms².
        let expected = (100.0f64 * 100.0 - 1.0) / 12.0 * 1e-6;
        assert!((stats.var_s2 - expected).abs() < 1e-15, "{} vs {expected}", stats.var_s2);
    }

    #[test]
    fn small_samples_and_edges() {
        let sample = ms(&[4, 1, 3, 2]);
        assert_eq!(sample.quantile_ns(0.5), Some(2_000_000));
        assert_eq!(sample.quantile_ns(0.0), Some(1_000_000));
        assert_eq!(sample.quantile_ns(1.0), Some(4_000_000));
        assert_eq!(sample.quantile_ns(0.51), Some(3_000_000));
        let one = ms(&[7]);
        let stats = one.stats().unwrap();
        assert_eq!((stats.median_s, stats.p99_s, stats.var_s2), (0.007, 0.007, 0.0));
        assert!(Sample::default().stats().is_none());
        assert!(Sample::default().box_stats().is_none());
        assert!(Sample::default().cdf_points(10).is_empty());
    }

    #[test]
    fn box_whiskers_stop_at_the_fences() {
        // Quartiles 2 and 4 ms, IQR 2 ms, fences at −1 and 7 ms: 100 ms is
        // an outlier, 6 ms the upper whisker.
        let sample = ms(&[1, 2, 2, 3, 3, 4, 4, 6, 100]);
        let stats = sample.box_stats().unwrap();
        assert_eq!(stats.q1_s, 0.002);
        assert_eq!(stats.median_s, 0.003);
        assert_eq!(stats.q3_s, 0.004);
        assert_eq!(stats.whisker_low_s, 0.001);
        assert_eq!(stats.whisker_high_s, 0.006);
        assert_eq!(stats.max_s, 0.1);
    }

    #[test]
    fn cdf_points_end_at_the_maximum() {
        let sample = ms(&(1..=10).collect::<Vec<_>>());
        let all = sample.cdf_points(100);
        assert_eq!(all.len(), 10);
        assert_eq!(all[0], (0.001, 0.1));
        assert_eq!(all[9], (0.010, 1.0));
        let few = sample.cdf_points(4);
        assert_eq!(few.len(), 4);
        assert_eq!(few[3], (0.010, 1.0));
        assert_eq!(few[0], (0.003, 0.3));
    }
}
