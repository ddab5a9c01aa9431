//! One simulated point of the FAST CLOUD experiment: a setting, an arrival rate and a seed, run in
//! the simulator and reduced to what the findings read (mean and tail latency, code mix,
//! stability, and whether the records obey the model's definitions).
//!
//! Must not: judge anything (that is `judge`), or read anything but the records.

use model::{NEVER, RecordLog};
use report::Sample;
use serde::Serialize;
use sim::fec::{FecSetup, poisson_reads};

/// Requests completed per second in saturation: over the middle half of the completions of a run
/// whose arrivals far exceed its capacity (the frontend always has a request to admit).
pub fn saturated_throughput_per_s(
    setup: &FecSetup,
    model_capacity_per_s: f64,
    requests: usize,
    seed: u64,
) -> anyhow::Result<f64> {
    let reads = poisson_reads(requests, 3.0 * model_capacity_per_s, seed);
    let records = setup.run(&reads)?;
    let mut completions: Vec<u64> = records.requests().iter().map(|r| r.completion_ns).collect();
    completions.sort_unstable();
    let (from, to) = (completions.len() / 4, 3 * completions.len() / 4);
    Ok((to - from) as f64 / ((completions[to] - completions[from]) as f64 / 1e9))
}

/// What one run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// Requests run.
    pub requests: usize,
    /// Mean latency (completion − arrival), seconds.
    pub mean_s: f64,
    /// 99.9th percentile latency (nearest rank), seconds.
    pub p999_s: f64,
    /// Requests per code length n (index n; 0 ..= n_max).
    pub code_mix: Vec<u64>,
    /// The queue did not grow over the second half of the run (see [`grew`]).
    pub stable: bool,
    /// Model violations found in the records (see [`model_violations`]).
    pub violations: u64,
    /// Most tasks in flight at once.
    pub most_in_flight: u32,
}

impl Point {
    /// Mean code length.
    pub fn mean_n(&self) -> f64 {
        let total: u64 = self.code_mix.iter().sum();
        let weighted: u64 = self.code_mix.iter().enumerate().map(|(n, &count)| n as u64 * count).sum();
        weighted as f64 / total.max(1) as f64
    }

    /// Share of requests that used code length `n`.
    pub fn share_of(&self, n: usize) -> f64 {
        let total: u64 = self.code_mix.iter().sum();
        self.code_mix.get(n).copied().unwrap_or(0) as f64 / total.max(1) as f64
    }
}

/// Runs `setup` on `requests` Poisson reads at `rate_per_s` (arrivals from `workload_seed`).
pub fn run_point(setup: &FecSetup, rate_per_s: f64, requests: usize, workload_seed: u64) -> anyhow::Result<Point> {
    run_requests(setup, &poisson_reads(requests, rate_per_s, workload_seed))
}

/// Runs `setup` on `reads` (the live experiment's arrivals, replayed in the simulator).
pub fn run_requests(setup: &FecSetup, reads: &[model::ReadRequest]) -> anyhow::Result<Point> {
    let records = setup.run(reads)?;
    let (k, n_max) = setup.k().zip(setup.n_max()).expect("a setup that ran has classes");
    Ok(reduce(&records, k, n_max, setup.slots))
}

fn reduce(records: &RecordLog, k: usize, n_max: usize, slots: usize) -> Point {
    let by_arrival = records.sorted_by_request();
    let arrivals_latencies: Vec<(f64, f64)> =
        by_arrival.requests().iter().map(|r| (r.arrival_ns as f64, (r.completion_ns - r.arrival_ns) as f64)).collect();
    let stable = !grew(&arrivals_latencies[arrivals_latencies.len() / 2..]);
    let latencies: Vec<u64> = by_arrival.requests().iter().map(|r| r.completion_ns - r.arrival_ns).collect();
    let sample = Sample::new(latencies);
    let stats = sample.stats().expect("a run has requests");
    let mut code_mix = vec![0u64; n_max + 1];
    for record in by_arrival.iter() {
        code_mix[record.tasks.len().min(n_max)] += 1;
    }
    let (violations, most_in_flight) = model_violations(&by_arrival, k, n_max, slots);
    Point {
        requests: sample.len(),
        mean_s: stats.mean_s,
        p999_s: sample.quantile_ns(0.999).unwrap_or(0) as f64 / 1e9,
        code_mix,
        stable,
        violations,
        most_in_flight,
    }
}

/// Whether latency grew over `points` (arrival, latency), in arrival order: the least-squares
/// trend over their span exceeds half their mean latency. A queue past its capacity grows
/// linearly, and over the second half of a run that started empty the trend is then about two
/// thirds of the mean; a stable queue has none, and its fluctuations at 0.95 of capacity moved it
/// by −0.8 to +0.4 of the mean over 20 000 requests (8 seeds).
pub fn grew(points: &[(f64, f64)]) -> bool {
    if points.len() < 2 {
        return false;
    }
    let count = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / count;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / count;
    let covariance: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let variance: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.0 - mean_x)).sum();
    let span = points[points.len() - 1].0 - points[0].0;
    variance > 0.0 && covariance / variance * span > 0.5 * mean_y
}

/// Checks every record against the model's definitions (section III-C): k ≤ n ≤ n_max tasks; the
/// request completes at its k-th task finish; every other task is cancelled at that instant; never
/// more than L tasks in flight. Returns the violations counted and the most tasks in flight.
pub fn model_violations(records: &RecordLog, k: usize, n_max: usize, slots: usize) -> (u64, u32) {
    let mut violations = 0u64;
    let mut edges: Vec<(u64, i32)> = Vec::with_capacity(records.all_tasks().len() * 2);
    for record in records.iter() {
        let n = record.tasks.len();
        let mut finishes: Vec<u64> = record.tasks.iter().filter(|t| !t.cancelled).map(|t| t.finish_ns).collect();
        finishes.sort_unstable();
        let completion = record.request.completion_ns;
        let ok = (k..=n_max).contains(&n)
            && finishes.len() == k
            && finishes[k - 1] == completion
            && record.tasks.iter().filter(|t| t.cancelled).all(|t| t.cancel_ns == completion);
        violations += u64::from(!ok);
        for task in record.tasks.iter().filter(|t| t.enqueue_ns != NEVER) {
            let end = if task.cancelled { task.cancel_ns } else { task.finish_ns };
            edges.push((task.enqueue_ns, 1));
            edges.push((end, -1));
        }
    }
    // An end sorts before a start at the same instant: a freed slot is taken at once.
    edges.sort_unstable();
    let mut in_flight = 0i32;
    let most = edges.iter().map(|&(_, step)| {
        in_flight += step;
        in_flight
    });
    let most = most.max().unwrap_or(0).max(0) as u32;
    violations += u64::from(most as usize > slots);
    (violations, most)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linear_trend_grew_and_a_flat_one_did_not() {
        let growing: Vec<(f64, f64)> = (0..1000).map(|i| (f64::from(i), 10.0 + f64::from(i))).collect();
        assert!(grew(&growing));
        let flat: Vec<(f64, f64)> = (0..1000).map(|i| (f64::from(i), 10.0 + f64::from(i % 7))).collect();
        assert!(!grew(&flat));
        assert!(!grew(&growing[..1]));
    }
}
