//! Summaries computed from records only (plus the run's refresh-probe count,
//! which no request carries): the columns of the paper's Tables 1 and 2.
//!
//! Must not: read engine internals; the report crate can compute the same
//! numbers from the same records.

use model::{NANOS_PER_SECOND, RecordLog};
use serde::{Deserialize, Serialize};

/// One row: request latency statistics in seconds, task latency, probes,
/// degraded reads and load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Requests.
    pub requests: u64,
    /// Mean request latency, s.
    pub mean: f64,
    /// Variance of request latency, s².
    pub var: f64,
    /// Median, s.
    pub median: f64,
    /// 95th percentile, s.
    pub p95: f64,
    /// 99th percentile, s.
    pub p99: f64,
    /// Minimum, s.
    pub min: f64,
    /// Maximum, s.
    pub max: f64,
    /// Mean latency of tasks that ran to completion, s.
    pub task_mean: f64,
    /// Mean waiting time of tasks that started, s.
    pub waiting_mean: f64,
    /// Mean controller time (frontend queueing + decision), s.
    pub controller_mean: f64,
    /// Probes per second of the run (per request and periodic).
    pub probes_per_s: f64,
    /// Fraction of requests served by a degraded read.
    pub degraded_fraction: f64,
    /// Mean node utilisation: service time over nodes × span.
    pub load: f64,
    /// Span of the run: first arrival to last completion, s.
    pub span_s: f64,
}

/// The value at quantile `q` of sorted `values` (nearest rank).
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    assert!(!sorted.is_empty() && (0.0..=1.0).contains(&q));
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

impl Summary {
    /// Summarises `records` of a run on `node_count` nodes whose periodic
    /// refreshes sent `refresh_probes` probes.
    pub fn from_records(records: &RecordLog, node_count: u32, refresh_probes: u64) -> Summary {
        assert!(!records.is_empty(), "no record to summarise");
        let seconds = |ns: f64| ns / NANOS_PER_SECOND as f64;
        let requests = records.requests();
        let mut latencies: Vec<u64> = requests.iter().map(|r| r.latency_ns()).collect();
        latencies.sort_unstable();
        let n = latencies.len() as f64;
        let mean_ns = latencies.iter().map(|&l| l as f64).sum::<f64>() / n;
        let var_ns2 = latencies.iter().map(|&l| (l as f64 - mean_ns).powi(2)).sum::<f64>() / n;
        let first = requests.iter().map(|r| r.arrival_ns).min().unwrap();
        let last = requests.iter().map(|r| r.completion_ns).max().unwrap();
        let span_ns = (last - first).max(1) as f64;
        let (mut task_sum, mut task_count, mut wait_sum, mut wait_count, mut busy) = (0.0, 0u64, 0.0, 0u64, 0.0);
        for task in records.all_tasks() {
            if let Some(latency) = task.latency_ns() {
                task_sum += latency as f64;
                task_count += 1;
            }
            if let Some(waiting) = task.waiting_ns() {
                wait_sum += waiting as f64;
                wait_count += 1;
            }
            busy += task.service_ns().unwrap_or(0) as f64;
        }
        let probes: u64 = requests.iter().map(|r| u64::from(r.probes)).sum::<u64>() + refresh_probes;
        Summary {
            requests: latencies.len() as u64,
            mean: seconds(mean_ns),
            var: seconds(seconds(var_ns2)),
            median: seconds(quantile(&latencies, 0.5) as f64),
            p95: seconds(quantile(&latencies, 0.95) as f64),
            p99: seconds(quantile(&latencies, 0.99) as f64),
            min: seconds(latencies[0] as f64),
            max: seconds(*latencies.last().unwrap() as f64),
            task_mean: seconds(task_sum / task_count.max(1) as f64),
            waiting_mean: seconds(wait_sum / wait_count.max(1) as f64),
            controller_mean: seconds(requests.iter().map(|r| r.controller_ns() as f64).sum::<f64>() / n),
            probes_per_s: probes as f64 / seconds(span_ns),
            degraded_fraction: requests.iter().filter(|r| r.degraded).count() as f64 / n,
            load: busy / (span_ns * node_count as f64),
            span_s: seconds(span_ns),
        }
    }
}
