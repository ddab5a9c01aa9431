//! One phase's row of `lowtail bench s3` (`S3Row`, the JSON schema of its output), the operation
//! and phase it names, and how a phase's histogram becomes one. The bottom of the benchmark's
//! modules: the phases produce rows, the comparison and the scenario tables read them, the
//! benchmark orders and renders them.
//!
//! Owns: the row's fields and their meaning, and their serialisation (rows of older runs parse).
//! Must not: measure, order or render anything.

use crate::s3_adversity::Scenario;
use crate::s3_target::LOWTAIL_TARGET_NAME;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Which S3 operation a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum S3Op {
    /// PutObject of a new key.
    Put,
    /// GetObject of a key written in the PUT phase, body read to the end.
    Get,
    /// DeleteObject of each key written in the PUT phase, once.
    Delete,
}

impl S3Op {
    /// The name in rows and tables.
    pub fn name(self) -> &'static str {
        match self {
            S3Op::Put => "put",
            S3Op::Get => "get",
            S3Op::Delete => "delete",
        }
    }
}

fn default_target() -> String {
    LOWTAIL_TARGET_NAME.to_string()
}

fn default_round() -> usize {
    1
}

fn default_scenario() -> String {
    Scenario::Healthy.name().to_string()
}

/// One phase's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct S3Row {
    /// The target's name (`lowtail`, or a peer's); rows written before targets existed are lowtail's.
    #[serde(default = "default_target")]
    pub target: String,
    /// The round, from 1.
    #[serde(default = "default_round")]
    pub round: usize,
    /// What the phase ran under (`healthy`, `fail-slow`, `down`); rows written before scenarios
    /// existed are `healthy`.
    #[serde(default = "default_scenario")]
    pub scenario: String,
    /// The operation.
    pub op: S3Op,
    /// Bytes per object.
    pub object_bytes: usize,
    /// Requests issued, failed ones included.
    pub requests: u64,
    /// Requests that failed, or (GET) returned the wrong length or the wrong bytes.
    pub errors: u64,
    /// Successful requests per second of phase wall time.
    pub ops_per_s: f64,
    /// Object bytes moved by successful requests, in 1e6 bytes per second of phase wall time.
    pub mb_per_s: f64,
    /// Median latency of all requests, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile latency of all requests, in milliseconds.
    pub p99_ms: f64,
    /// 99.9th percentile latency of all requests, in milliseconds (`None` in rows written before it
    /// was measured).
    #[serde(default)]
    pub p999_ms: Option<f64>,
    /// Slowest request, in milliseconds.
    pub max_ms: f64,
    /// Requests in flight.
    pub concurrency: usize,
    /// Peak resident memory of the gateway's process during the phase, in MiB (VmRSS sampled every
    /// 10 ms); `None` when the gateway does not run on this host, and for other stores.
    #[serde(default)]
    pub gateway_rss_peak_mib: Option<f64>,
    /// User + system CPU time of the target's server processes during the phase per successful
    /// request, in milliseconds; `None` when its processes are not known on this host (or no
    /// request succeeded).
    #[serde(default)]
    pub server_cpu_ms_per_op: Option<f64>,
    /// Share of the whole host's CPU time that was idle or waiting for I/O during the phase, in
    /// percent; `None` where `/proc/stat` cannot be read.
    #[serde(default)]
    pub host_idle_pct: Option<f64>,
}

/// Which phase a row is of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseLabel {
    /// The target's name.
    pub target: String,
    /// The round, from 1.
    pub round: usize,
    /// What the phase runs under.
    pub scenario: Scenario,
    /// The operation.
    pub op: S3Op,
    /// Bytes per object.
    pub object_bytes: usize,
    /// Requests in flight.
    pub concurrency: usize,
}

/// The figures of a phase: `latencies_us` holds every request's latency in microseconds, `requests`
/// counts them all and `errors` the failed ones; `elapsed` is the phase's wall time. The CPU,
/// idle and memory figures are left for the caller, which read them.
pub fn row_from_histogram(
    label: PhaseLabel,
    latencies_us: &Histogram<u64>,
    requests: u64,
    errors: u64,
    elapsed: Duration,
) -> S3Row {
    let successes = requests.saturating_sub(errors);
    let seconds = elapsed.as_secs_f64();
    let per_second = |count: f64| if seconds > 0.0 { count / seconds } else { 0.0 };
    let ms = |us: u64| us as f64 / 1000.0;
    let empty = latencies_us.is_empty();
    S3Row {
        target: label.target,
        round: label.round,
        scenario: label.scenario.name().to_string(),
        op: label.op,
        object_bytes: label.object_bytes,
        requests,
        errors,
        ops_per_s: per_second(successes as f64),
        mb_per_s: per_second(successes as f64 * label.object_bytes as f64) / 1e6,
        p50_ms: if empty { 0.0 } else { ms(latencies_us.value_at_quantile(0.50)) },
        p99_ms: if empty { 0.0 } else { ms(latencies_us.value_at_quantile(0.99)) },
        p999_ms: Some(if empty { 0.0 } else { ms(latencies_us.value_at_quantile(0.999)) }),
        max_ms: if empty { 0.0 } else { ms(latencies_us.max()) },
        concurrency: label.concurrency,
        gateway_rss_peak_mib: None,
        server_cpu_ms_per_op: None,
        host_idle_pct: None,
    }
}

/// How long a target's server processes took to fall quiet after a scenario was lifted (the
/// benchmark waits, so that one target's background work, such as a peer healing a wiped drive,
/// does not run under the next target's phases).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SettleRow {
    /// The target.
    pub target: String,
    /// The round (from 1).
    pub round: usize,
    /// Bytes per object of the cell.
    pub object_bytes: usize,
    /// The scenario lifted.
    pub scenario: String,
    /// From the scenario's end (lowtail: once whole again) until a window found the processes
    /// quiet, s.
    pub seconds: f64,
    /// Whether they fell quiet before the wait's bound (false: the run went on regardless).
    pub quiet: bool,
}

/// One rebuild under `lowtail bench s3`'s `rebuild` scenario: the victim came back with an empty
/// data directory, the scenario's phases ran while the store rebuilt it, and this is how long after
/// the restart every stripe was whole again and what was rebuilt (lowtail only: other stores do not
/// say).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RebuildRow {
    /// The target.
    pub target: String,
    /// The round (from 1).
    pub round: usize,
    /// Bytes per object of the cell.
    pub object_bytes: usize,
    /// Requests in flight in the cell's phases.
    pub concurrency: usize,
    /// From the restart to the first census that found every stripe whole, s.
    pub seconds_to_whole: f64,
    /// Bytes of units rebuilt meanwhile.
    pub bytes_rebuilt: u64,
    /// Data units per stripe of the target's code (k), when known: each rebuilt byte is decoded
    /// from k read.
    #[serde(default)]
    pub data_units: Option<usize>,
}

impl RebuildRow {
    /// Rebuilt bytes per second, in MB/s (1e6 bytes), over the whole rebuild.
    pub fn mb_per_s(&self) -> f64 {
        if self.seconds_to_whole <= 0.0 { 0.0 } else { self.bytes_rebuilt as f64 / 1e6 / self.seconds_to_whole }
    }

    /// The rebuild's ideal time at idle, s: the k × rebuilt bytes it must read, at the rate the
    /// healthy cluster served GETs (`healthy_get_mb_per_s`: every byte a client got was one unit
    /// byte read from a node), as if nothing else ran. `None` without k or a rate.
    pub fn ideal_seconds(&self, healthy_get_mb_per_s: f64) -> Option<f64> {
        let k = self.data_units?;
        (healthy_get_mb_per_s > 0.0).then(|| k as f64 * self.bytes_rebuilt as f64 / 1e6 / healthy_get_mb_per_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s3_phase::new_histogram;

    fn histogram(values_us: &[u64]) -> Histogram<u64> {
        let mut histogram = new_histogram();
        for &value in values_us {
            histogram.record(value).unwrap();
        }
        histogram
    }

    fn label(op: S3Op, object_bytes: usize, concurrency: usize) -> PhaseLabel {
        PhaseLabel { target: "lowtail".into(), round: 2, scenario: Scenario::Healthy, op, object_bytes, concurrency }
    }

    #[test]
    fn row_counts_successes_only_in_throughput_and_every_request_in_latency() {
        // 100 requests: 98 of 1 ms, one of 5 ms and one failed after 250 ms.
        let mut values = vec![1000; 98];
        values.extend([5000, 250_000]);
        let row = row_from_histogram(label(S3Op::Put, 1 << 20, 8), &histogram(&values), 100, 1, Duration::from_secs(2));
        assert_eq!((row.target.as_str(), row.round), ("lowtail", 2));
        assert_eq!(row.requests, 100);
        assert_eq!(row.errors, 1);
        assert!((row.ops_per_s - 49.5).abs() < 1e-9, "{row:?}");
        assert!((row.mb_per_s - 99.0 * 1_048_576.0 / 2.0 / 1e6).abs() < 1e-9, "{row:?}");
        assert!((row.p50_ms - 1.0).abs() < 0.01, "{row:?}");
        assert!((row.p99_ms - 5.0).abs() < 0.01, "{row:?}");
        assert!((row.max_ms - 250.0).abs() < 0.25, "{row:?}");
        assert_eq!(row.concurrency, 8);
    }

    #[test]
    fn row_of_an_empty_phase_is_zeros_not_nan() {
        let row = row_from_histogram(label(S3Op::Get, 4096, 2), &new_histogram(), 0, 0, Duration::ZERO);
        assert_eq!((row.ops_per_s, row.mb_per_s, row.p50_ms, row.p99_ms, row.max_ms), (0.0, 0.0, 0.0, 0.0, 0.0));
    }
}
