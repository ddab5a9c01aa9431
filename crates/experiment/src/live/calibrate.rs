//! Calibration of the simulator from a live cluster's records, done by the experiment and never by
//! hand: the node model (per-task overhead and transfer rate, a least-squares fit of each finished
//! task's service time against its bytes), the network (one-way latency from single-task reads),
//! and the frontend model (the controller's own decision time, its cost per probe, and the probe
//! round trip).
//!
//! Owns: the estimators and how they set a [`SimConfig`]. Must not: read anything but records (a
//! calibration must be reproducible from the records the experiment writes), or tune a number to
//! make a finding hold.

use model::{NEVER, Record, TaskRole};
use serde::Serialize;
use sim::SimConfig;

/// Fewest finished tasks a node-model fit needs.
pub const MIN_TASKS: usize = 10;
/// Transfer rate used when the fit finds no measurable bytes-proportional cost (bytes per second):
/// high enough that the term vanishes, finite so the simulator's arithmetic stays exact.
pub const UNMEASURABLE_RATE_BYTES_PER_S: f64 = 1e12;

/// The fitted models, with what they were fitted on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Calibration {
    /// Fixed cost per task, microseconds (the fit's intercept).
    pub task_overhead_us: f64,
    /// Transfer rate, bytes per second (the inverse of the fit's slope).
    pub rate_bytes_per_s: f64,
    /// Root-mean-square residual of the service-time fit, microseconds.
    pub service_fit_rms_us: f64,
    /// Finished tasks the node model was fitted on.
    pub tasks: usize,
    /// One-way network latency between a gateway and a node, microseconds (median).
    pub network_latency_us: f64,
    /// Controller time per decision, without probing, microseconds (median).
    pub decision_us: f64,
    /// Extra controller time per probe sent, microseconds.
    pub per_probe_us: f64,
    /// Round trip of a probe batch, microseconds (median over decisions that probed; 0 if none).
    pub probe_rtt_us: f64,
    /// Requests the frontend model was fitted on.
    pub requests: usize,
}

/// Least squares of `y = a + b x`; `None` with fewer than two distinct x values.
pub fn fit_line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    if sxx <= f64::EPSILON * n {
        return None;
    }
    let slope = sxy / sxx;
    Some((mean_y - slope * mean_x, slope))
}

fn median(values: Vec<f64>) -> Option<f64> {
    bench::stats::median(&values)
}

/// The controller's own decision time of a request: deciding, without queueing at the frontend and
/// without waiting for probe replies (what the issue's "decision time excluding the probe round
/// trip" measures). The gateway records the probe wait inside each decision.
pub fn decision_time_ns(record: &Record) -> u64 {
    record.request.decision_compute_ns()
}

/// Fits the models on `records` (any mix of runs and gateways, in any order). Fails when there are
/// fewer than [`MIN_TASKS`] finished tasks.
pub fn calibrate<'a>(records: impl IntoIterator<Item = &'a Record>) -> anyhow::Result<Calibration> {
    let mut service = Vec::new();
    let mut one_way_us = Vec::new();
    let mut plain_decisions_us = Vec::new();
    let mut probing = Vec::new();
    let mut requests = 0;
    for record in records {
        requests += 1;
        let finished =
            |t: &&model::TaskRecord| !t.cancelled && !t.failed && t.start_ns != NEVER && t.finish_ns != NEVER;
        for task in record.tasks.iter().filter(finished) {
            service.push((task.bytes as f64, (task.finish_ns - task.start_ns) as f64 / 1e3));
        }
        let request = &record.request;
        let decision_us = decision_time_ns(record) as f64 / 1e3;
        if request.probes == 0 {
            plain_decisions_us.push(decision_us);
        } else {
            probing.push((request.probes, decision_us, request.probe_wait_ns as f64 / 1e3));
        }
        // A normal read served by its one task: what is left of the time from sending it to the
        // answer, once the node's own time is taken out, is the way there and back.
        if let [task] = record.tasks.as_slice()
            && task.role == TaskRole::Normal
            && finished(&task)
            && !request.degraded
            && request.completion_ns != NEVER
        {
            let outside = request
                .completion_ns
                .saturating_sub(request.decision_end_ns)
                .saturating_sub(task.finish_ns - task.enqueue_ns);
            one_way_us.push(outside as f64 / 2e3);
        }
    }
    anyhow::ensure!(
        service.len() >= MIN_TASKS,
        "only {} finished tasks in the records; the node model needs at least {MIN_TASKS}",
        service.len()
    );
    let (overhead_us, us_per_byte) = match fit_line(&service) {
        Some((intercept, slope)) if slope > 0.0 => (intercept.max(0.0), slope),
        // Every task the same size, or no bytes-proportional cost: all of it is overhead.
        _ => (median(service.iter().map(|p| p.1).collect()).unwrap_or(0.0), 0.0),
    };
    let rate_bytes_per_s = if us_per_byte > 0.0 { 1e6 / us_per_byte } else { UNMEASURABLE_RATE_BYTES_PER_S };
    let rms = (service.iter().map(|(x, y)| (y - overhead_us - us_per_byte * x).powi(2)).sum::<f64>()
        / service.len() as f64)
        .sqrt();
    let decision_us =
        median(plain_decisions_us.clone()).or_else(|| median(probing.iter().map(|p| p.1).collect())).unwrap_or(0.0);
    let per_probe_us =
        median(probing.iter().map(|&(probes, us, _)| (us - decision_us).max(0.0) / f64::from(probes)).collect())
            .unwrap_or(0.0);
    Ok(Calibration {
        task_overhead_us: overhead_us,
        rate_bytes_per_s,
        service_fit_rms_us: rms,
        tasks: service.len(),
        network_latency_us: median(one_way_us).unwrap_or(0.0),
        decision_us,
        per_probe_us,
        probe_rtt_us: median(probing.iter().map(|p| p.2).collect()).unwrap_or(0.0),
        requests,
    })
}

/// Whether a live node aborts a read already in service when its requester goes away: it does
/// (`node::scheduler` stops the emulated service when the reply channel closes), so a Normal read
/// that lost to its degraded read frees its node at once. Not fitted: it is how the node is built.
pub const LIVE_NODE_CANCELS_IN_SERVICE: bool = true;

impl Calibration {
    /// Sets the node, network and frontend models of `config` (homogeneous nodes, no extra
    /// exponential delay: the emulated service is deterministic).
    pub fn apply(&self, config: &mut SimConfig) {
        let us = |value: f64| value.round().max(0.0) as u64;
        config.cluster.task_overhead_us = us(self.task_overhead_us);
        config.cluster.rate_bytes_per_s = self.rate_bytes_per_s.round().max(1.0) as u64;
        config.cluster.exp_mean_us = 0;
        config.cluster.rate_spread = 0.0;
        config.cluster.network_latency_us = us(self.network_latency_us);
        config.cluster.cancel_in_service = LIVE_NODE_CANCELS_IN_SERVICE;
        config.frontends.decision_us = us(self.decision_us);
        config.frontends.per_probe_us = us(self.per_probe_us);
        config.frontends.probe_rtt_us = us(self.probe_rtt_us);
        // The gateway decides on while probe replies travel: its frontend is not held by them.
        config.frontends.probes_block_frontend = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{FrontendId, NodeId, ObjectId, Outcome, PartitionId, RequestId, RequestRecord, TaskRecord};

    /// A request read by one normal task of `bytes` served in 2 ms + bytes at 1 MB/s, with 150 µs
    /// each way, and a decision of 40 µs plus 10 µs per probe after a 300 µs probe wait.
    fn record(id: u64, bytes: u64, probes: u32) -> Record {
        let decision_start = id * 1_000_000_000;
        let probe_wait = if probes > 0 { 300_000 } else { 0 };
        let decision_end = decision_start + 40_000 + 10_000 * u64::from(probes) + probe_wait;
        let service = 2_000_000 + bytes * 1_000;
        let enqueue = decision_end + 150_000;
        let wait = 1_000 * (id % 7);
        let finish = enqueue + wait + service;
        Record {
            request: RequestRecord {
                request: RequestId(id),
                frontend: FrontendId(0),
                object: ObjectId(1),
                partition: PartitionId(0),
                bytes,
                arrival_ns: decision_start,
                decision_start_ns: decision_start,
                decision_end_ns: decision_end,
                completion_ns: finish + 150_000,
                probes,
                probe_wait_ns: probe_wait,
                decision_cpu_ns: decision_end - decision_start - probe_wait,
                degraded: false,
                timed_out: false,
                outcome: Outcome::Ok,
                class: 0,
                latency_class: 0,
            },
            tasks: vec![TaskRecord {
                node: NodeId(0),
                unit: 0,
                role: TaskRole::Normal,
                cancelled: false,
                cancel_ns: NEVER,
                failed: false,
                bytes,
                enqueue_ns: enqueue,
                start_ns: enqueue + wait,
                finish_ns: finish,
            }],
            layers: None,
        }
    }

    #[test]
    fn the_models_are_recovered_from_synthetic_records() {
        let records: Vec<Record> =
            (0..200).map(|i| record(i, 1_000 + (i * 37) % 60_000, if i % 2 == 0 { 0 } else { 2 })).collect();
        let fit = calibrate(&records).unwrap();
        assert!((fit.task_overhead_us - 2_000.0).abs() < 1.0, "{fit:?}");
        assert!((fit.rate_bytes_per_s - 1e6).abs() < 1e3, "{fit:?}");
        assert!(fit.service_fit_rms_us < 1.0, "{fit:?}");
        assert!((fit.network_latency_us - 150.0).abs() < 1.0, "{fit:?}");
        assert!((fit.decision_us - 40.0).abs() < 0.5, "{fit:?}");
        assert!((fit.per_probe_us - 10.0).abs() < 0.5, "{fit:?}");
        assert!((fit.probe_rtt_us - 300.0).abs() < 0.5, "{fit:?}");
        assert_eq!((fit.tasks, fit.requests), (200, 200));
        let mut config = SimConfig::default();
        fit.apply(&mut config);
        assert_eq!(config.cluster.task_overhead_us, 2_000);
        assert_eq!(config.frontends.probe_rtt_us, 300);
    }

    #[test]
    fn equal_sizes_make_it_all_overhead_and_too_few_tasks_are_refused() {
        let records: Vec<Record> = (0..20).map(|i| record(i, 4_096, 0)).collect();
        let fit = calibrate(&records).unwrap();
        assert_eq!(fit.rate_bytes_per_s, UNMEASURABLE_RATE_BYTES_PER_S);
        assert!((fit.task_overhead_us - (2_000.0 + 4_096.0)).abs() < 1.0, "{fit:?}");
        let error = calibrate(&records[..3]).unwrap_err().to_string();
        assert!(error.contains("only 3 finished tasks"), "{error}");
        assert_eq!(fit_line(&[(1.0, 2.0)]), None);
    }
}
