//! The summary of one run, computed from its records alone: request, task,
//! waiting and controller latency statistics, probes per second, degraded
//! and failed requests, and per-node load from the tasks' service intervals.
//!
//! Owns: [`RunInfo`] (what the caller knows about a run that records do not
//! say), [`Summary`], [`NodeLoad`], [`SummaryRow`] (the `summary.json`
//! schema of issue 4) and [`summarize`]. Must not: read executor internals
//! or configuration beyond [`RunInfo`]; everything else comes from
//! [`RecordLog`] fields.
//!
//! Which records count where:
//! - request latency (arrival → completion): requests with outcome `Ok`;
//!   failed requests are counted in `failed` and left out of latencies;
//! - controller time (arrival → decision end): every request that was decided;
//! - task latency (enqueue → finish): tasks that ran to completion;
//! - waiting time (enqueue → start): tasks that started service;
//! - busy time: every started task's service interval (including tasks
//!   aborted in service, during which the node was busy), clipped to the run
//!   window;
//! - degraded fraction: degraded requests over all requests.

use crate::stats::{LatencyStats, Sample, round_nano, seconds};
use model::{NEVER, Outcome, RecordLog};
use serde::{Deserialize, Serialize};

/// What the caller knows about a run: labels, scale and the measurement
/// window. Reports never guess these from executor state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Code name, as `codec::CodeSpec` prints it (`rs-6-3`, `lrc-6-2-2`).
    pub code: String,
    /// Policy name (`normal`, `lmlf-pw2`, ...).
    pub policy: String,
    /// Frontends (controllers) in the run.
    pub frontends: u32,
    /// Storage nodes in the cluster, so that nodes that served no task count
    /// as idle in the mean utilisation. Nodes named in records beyond this
    /// count are still reported (the count is raised to cover them).
    pub node_count: u32,
    /// Worker slots per node; a node with `c` slots is fully utilised at `c`
    /// seconds of service per second. 1 for the FCFS nodes of Hu et al.
    pub servers_per_node: u32,
    /// The run's seed.
    pub seed: u64,
    /// Probes sent by periodic refreshes (the queue table of the lazy
    /// policies), which no request record carries; added to the requests'
    /// probes for probes per second. 0 for per-request probing.
    pub refresh_probes: u64,
    /// Offered load the run was configured for (a utilisation level), if any.
    pub offered_load: Option<f64>,
    /// Configured arrival rate (requests per second), if any.
    pub arrival_rate_per_s: Option<f64>,
    /// Measurement window `[start, end)` in record nanoseconds for node
    /// utilisation; `None` uses the span of arrivals (first to last), the
    /// period during which load was offered (the drain after the last
    /// arrival would dilute utilisation).
    pub window_ns: Option<(u64, u64)>,
}

impl RunInfo {
    /// A run with the required labels; optional fields empty, one server per
    /// node.
    pub fn new(code: &str, policy: &str, frontends: u32, node_count: u32, seed: u64) -> RunInfo {
        RunInfo {
            code: code.to_owned(),
            policy: policy.to_owned(),
            frontends,
            node_count,
            servers_per_node: 1,
            seed,
            refresh_probes: 0,
            offered_load: None,
            arrival_rate_per_s: None,
            window_ns: None,
        }
    }
}

/// Load on one storage node over the run window.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeLoad {
    /// Node index.
    pub node: u32,
    /// Tasks enqueued on the node (any outcome).
    pub tasks: u64,
    /// Bytes of every task enqueued on the node.
    pub bytes_enqueued: u64,
    /// Bytes of tasks that ran to completion.
    pub bytes_served: u64,
    /// Service time inside the window, in seconds.
    pub busy_s: f64,
    /// `busy_s` over the window length times servers per node.
    pub busy_fraction: f64,
}

/// Everything the report says about one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The run's labels.
    pub run: RunInfo,
    /// Requests in the log.
    pub requests: u64,
    /// Requests that failed.
    pub failed: u64,
    /// Requests served from a recovery set.
    pub degraded: u64,
    /// Requests whose normal read timed out.
    pub timed_out: u64,
    /// Queue probes sent, in total: the requests' probes plus
    /// [`RunInfo::refresh_probes`].
    pub probes: u64,
    /// First to last arrival, in seconds; `None` without requests.
    pub arrival_span_s: Option<f64>,
    /// Request latency (arrival → completion) of successful requests.
    pub request_latency: Option<LatencyStats>,
    /// Task latency (enqueue → finish) of completed tasks.
    pub task_latency: Option<LatencyStats>,
    /// Waiting time (enqueue → start) of started tasks.
    pub waiting: Option<LatencyStats>,
    /// Controller time (arrival → decision end: frontend queueing plus
    /// deciding and probing).
    pub controller: Option<LatencyStats>,
    /// Probes over the arrival span; `None` when the span is zero.
    pub probes_per_s: Option<f64>,
    /// Degraded requests over all requests; `None` without requests.
    pub degraded_fraction: Option<f64>,
    /// Timed-out requests over all requests; `None` without requests.
    pub timed_out_fraction: Option<f64>,
    /// The window utilisation was measured over, in record nanoseconds.
    pub window_ns: Option<(u64, u64)>,
    /// Per-node load, by node index (`node_count` entries, idle ones too).
    pub nodes: Vec<NodeLoad>,
    /// Mean of `busy_fraction` over nodes; `None` when the window is empty.
    pub utilisation_mean: Option<f64>,
    /// Largest `busy_fraction`; `None` when the window is empty.
    pub utilisation_max: Option<f64>,
}

/// One object of `summary.json` (issue 4): the first fields are the issue's
/// schema, in its order; the rest are additions. Latencies are seconds.
/// A statistic without data (no successful request, a zero arrival span) is
/// `null`, never NaN. Fields are only ever added, never renamed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    /// Code name.
    pub code: String,
    /// Policy name.
    pub policy: String,
    /// Requests in the run (successful and failed).
    pub requests: u64,
    /// Mean request latency.
    pub mean: Option<f64>,
    /// Median request latency.
    pub median: Option<f64>,
    /// 95th percentile of request latency.
    pub p95: Option<f64>,
    /// 99th percentile of request latency.
    pub p99: Option<f64>,
    /// Largest request latency.
    pub max: Option<f64>,
    /// Mean task latency.
    pub task_mean: Option<f64>,
    /// Queue probes per second of arrivals.
    pub probes_per_s: Option<f64>,
    /// Fraction of requests served by a degraded read.
    pub degraded_fraction: Option<f64>,
    /// Frontends.
    pub frontends: u32,
    /// Mean node utilisation over the run window.
    pub load: Option<f64>,
    /// Variance of request latency (seconds²).
    pub var: Option<f64>,
    /// Smallest request latency.
    pub min: Option<f64>,
    /// Failed requests.
    pub failed: u64,
    /// Median task latency.
    pub task_median: Option<f64>,
    /// 95th percentile of task latency.
    pub task_p95: Option<f64>,
    /// 99th percentile of task latency.
    pub task_p99: Option<f64>,
    /// Mean waiting time in node queues.
    pub waiting_mean: Option<f64>,
    /// 99th percentile of waiting time.
    pub waiting_p99: Option<f64>,
    /// Mean controller time.
    pub controller_mean: Option<f64>,
    /// 99th percentile of controller time.
    pub controller_p99: Option<f64>,
    /// Fraction of requests whose normal read timed out.
    pub timed_out_fraction: Option<f64>,
    /// Largest node utilisation.
    pub load_max: Option<f64>,
    /// Offered load the run was configured for.
    pub offered_load: Option<f64>,
    /// Configured arrival rate, requests per second.
    pub arrival_rate_per_s: Option<f64>,
    /// The run's seed.
    pub seed: u64,
}

impl Summary {
    /// The `summary.json` row of this run.
    pub fn row(&self) -> SummaryRow {
        let request = self.request_latency.as_ref();
        let task = self.task_latency.as_ref();
        SummaryRow {
            code: self.run.code.clone(),
            policy: self.run.policy.clone(),
            requests: self.requests,
            mean: request.map(|s| s.mean_s),
            median: request.map(|s| s.median_s),
            p95: request.map(|s| s.p95_s),
            p99: request.map(|s| s.p99_s),
            max: request.map(|s| s.max_s),
            task_mean: task.map(|s| s.mean_s),
            probes_per_s: self.probes_per_s,
            degraded_fraction: self.degraded_fraction,
            frontends: self.run.frontends,
            load: self.utilisation_mean,
            var: request.map(|s| s.var_s2),
            min: request.map(|s| s.min_s),
            failed: self.failed,
            task_median: task.map(|s| s.median_s),
            task_p95: task.map(|s| s.p95_s),
            task_p99: task.map(|s| s.p99_s),
            waiting_mean: self.waiting.map(|s| s.mean_s),
            waiting_p99: self.waiting.map(|s| s.p99_s),
            controller_mean: self.controller.map(|s| s.mean_s),
            controller_p99: self.controller.map(|s| s.p99_s),
            timed_out_fraction: self.timed_out_fraction,
            load_max: self.utilisation_max,
            offered_load: self.run.offered_load,
            arrival_rate_per_s: self.run.arrival_rate_per_s,
            seed: self.run.seed,
        }
    }
}

/// The four latency metrics of a run as sorted samples: what the summary's
/// statistics and the plots' CDFs and boxes are read from.
#[derive(Clone, Debug, Default)]
pub(crate) struct Samples {
    pub request: Sample,
    pub task: Sample,
    pub waiting: Sample,
    pub controller: Sample,
}

impl Samples {
    pub(crate) fn from_log(log: &RecordLog) -> Samples {
        let requests = log.requests();
        let request = requests
            .iter()
            .filter(|r| r.outcome == Outcome::Ok && r.completion_ns != NEVER && r.completion_ns >= r.arrival_ns)
            .map(|r| r.completion_ns - r.arrival_ns)
            .collect();
        let controller = requests
            .iter()
            .filter(|r| r.decision_end_ns != NEVER && r.decision_end_ns >= r.arrival_ns)
            .map(|r| r.decision_end_ns - r.arrival_ns)
            .collect();
        let tasks = log.all_tasks();
        let task = tasks.iter().filter_map(|t| t.latency_ns()).collect();
        let waiting = tasks.iter().filter_map(|t| t.waiting_ns()).collect();
        Samples {
            request: Sample::new(request),
            task: Sample::new(task),
            waiting: Sample::new(waiting),
            controller: Sample::new(controller),
        }
    }
}

/// Summarises one run from its records.
pub fn summarize(log: &RecordLog, run: &RunInfo) -> Summary {
    summarize_samples(log, run, &Samples::from_log(log))
}

pub(crate) fn summarize_samples(log: &RecordLog, run: &RunInfo, samples: &Samples) -> Summary {
    let requests = log.requests();
    let count = requests.len() as u64;
    let failed = requests.iter().filter(|r| r.outcome == Outcome::Failed).count() as u64;
    let degraded = requests.iter().filter(|r| r.degraded).count() as u64;
    let timed_out = requests.iter().filter(|r| r.timed_out).count() as u64;
    let probes: u64 = requests.iter().map(|r| u64::from(r.probes)).sum::<u64>() + run.refresh_probes;
    let first_arrival_ns = requests.iter().map(|r| r.arrival_ns).min();
    let last_arrival_ns = requests.iter().map(|r| r.arrival_ns).max();
    let arrival_span = first_arrival_ns.zip(last_arrival_ns);
    let arrival_span_s = arrival_span.map(|(first, last)| seconds((last - first) as f64));
    let probes_per_s = arrival_span_s.filter(|&span| span > 0.0).map(|span| round_nano(probes as f64 / span));
    let fraction = |part: u64| (count > 0).then(|| round_nano(part as f64 / count as f64));

    let window_ns = run.window_ns.or(arrival_span);
    let nodes = node_loads(log, run, window_ns);
    let has_window = window_ns.is_some_and(|(start, end)| end > start);
    let utilisation_mean = (has_window && !nodes.is_empty())
        .then(|| round_nano(nodes.iter().map(|n| n.busy_fraction).sum::<f64>() / nodes.len() as f64));
    let utilisation_max =
        (has_window && !nodes.is_empty()).then(|| nodes.iter().map(|n| n.busy_fraction).fold(0.0, f64::max));

    Summary {
        run: run.clone(),
        requests: count,
        failed,
        degraded,
        timed_out,
        probes,
        arrival_span_s,
        request_latency: samples.request.stats(),
        task_latency: samples.task.stats(),
        waiting: samples.waiting.stats(),
        controller: samples.controller.stats(),
        probes_per_s,
        degraded_fraction: fraction(degraded),
        timed_out_fraction: fraction(timed_out),
        window_ns,
        nodes,
        utilisation_mean,
        utilisation_max,
    }
}

/// Per-node tasks, bytes and busy time. Busy time sums each started task's
/// service interval clipped to the window: with one server per node (FCFS)
/// intervals on a node never overlap, and with `c` slots the sum is the
/// work done, which `busy_fraction` divides by `c`.
fn node_loads(log: &RecordLog, run: &RunInfo, window_ns: Option<(u64, u64)>) -> Vec<NodeLoad> {
    let tasks = log.all_tasks();
    let highest_node = tasks.iter().map(|t| t.node.0 as usize + 1).max().unwrap_or(0);
    let node_count = highest_node.max(run.node_count as usize);
    let mut tasks_per_node = vec![0u64; node_count];
    let mut bytes_enqueued = vec![0u64; node_count];
    let mut bytes_served = vec![0u64; node_count];
    let mut busy_ns = vec![0u64; node_count];
    let (window_start, window_end) = window_ns.unwrap_or((0, 0));
    for task in tasks {
        let node = task.node.index();
        tasks_per_node[node] += 1;
        bytes_enqueued[node] += task.bytes;
        if task.latency_ns().is_some() {
            bytes_served[node] += task.bytes;
        }
        if task.service_ns().is_some() {
            let start = task.start_ns.max(window_start);
            let end = task.finish_ns.min(window_end);
            busy_ns[node] += end.saturating_sub(start);
        }
    }
    let capacity_s = seconds(window_end.saturating_sub(window_start) as f64) * f64::from(run.servers_per_node.max(1));
    (0..node_count)
        .map(|node| {
            let busy_s = seconds(busy_ns[node] as f64);
            NodeLoad {
                node: node as u32,
                tasks: tasks_per_node[node],
                bytes_enqueued: bytes_enqueued[node],
                bytes_served: bytes_served[node],
                busy_s: round_nano(busy_s),
                busy_fraction: if capacity_s > 0.0 { round_nano(busy_s / capacity_s) } else { 0.0 },
            }
        })
        .collect()
}
