//! The arithmetic of a benchmark figure: medians and throughput in GB/s.
//!
//! Owns: how run samples become one reported number.
//! Must not: time anything itself (see [`crate::measure`]).

use std::time::Duration;

/// Bytes in a (decimal) gigabyte, the unit every `gbps` figure uses.
pub const BYTES_PER_GB: f64 = 1e9;

/// Median of the samples (the mean of the middle two for an even count);
/// `None` for no samples. NaN sorts last and so only wins when most samples are NaN.
pub fn median(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 { sorted[middle] } else { (sorted[middle - 1] + sorted[middle]) / 2.0 })
}

/// Throughput in GB/s (1e9 bytes per second) of `bytes` processed in `elapsed`.
/// Zero elapsed time gives infinity, which a caller treats as a timer failure.
pub fn gbps(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / elapsed.as_secs_f64() / BYTES_PER_GB
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty_samples() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[4.0]), Some(4.0));
        assert_eq!(median(&[9.0, 1.0, 5.0]), Some(5.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        // One outlier run (a preemption, a page fault storm) does not move it.
        assert_eq!(median(&[10.0, 10.5, 0.1, 10.2, 9.9]), Some(10.0));
    }

    #[test]
    fn gbps_is_decimal_gigabytes_per_second() {
        assert_eq!(gbps(1_000_000_000, Duration::from_secs(1)), 1.0);
        // RS(10,4) with 1 MiB units: 10 MiB of data input in 1 ms.
        let bytes = 10 * 1024 * 1024;
        let figure = gbps(bytes, Duration::from_millis(1));
        assert!((figure - 10.48576).abs() < 1e-9, "{figure}");
        assert!(gbps(1, Duration::ZERO).is_infinite());
    }
}
