//! Statistics of a run of batch reads (EC-Store's requests of several blocks), from its records
//! only: batch latency and its breakdown, latency and distinct nodes per batch over time, launched
//! reads per block, bytes read per node and the load imbalance of the paper's Table II, decision
//! times and where plans came from, and the mover's moves.
//!
//! Must not: read executor internals or configuration: everything comes from [`BatchRecord`]s,
//! the blocks' [`RecordLog`] and [`MoveRecord`]s, and the window the caller names.

use crate::stats::{LatencyStats, Sample};
use model::{BatchRecord, MoveRecord, NEVER, NodeId, Outcome, RecordLog};
use serde::{Deserialize, Serialize};

/// Points kept of the batch-latency CDF.
const CDF_POINTS: usize = 500;

/// Which part of a run is measured, and the width of its time series' buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchWindow {
    /// Batches issued from here on are measured (the warm-up before it is not).
    pub from_ns: u64,
    /// Batches issued before here are measured.
    pub to_ns: u64,
    /// Width of a time-series bucket (the paper's minute).
    pub bucket_ns: u64,
}

/// A run's batch statistics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchSummary {
    /// Batches issued in the window.
    pub batches: u64,
    /// Of them, failed (a block could not be read).
    pub failed: u64,
    /// Batch latency (issue to last block) of the window's successful batches, seconds.
    pub latency: Option<LatencyStats>,
    /// Mean metadata time (issue to planning), milliseconds.
    pub metadata_ms_mean: f64,
    /// Mean planning time, milliseconds.
    pub plan_ms_mean: f64,
    /// Mean time from the plan's dispatch to the last block (retrieval and decode), milliseconds.
    pub retrieval_ms_mean: f64,
    /// Per bucket of the whole run (warm-up included): (bucket start in seconds, mean batch
    /// latency in milliseconds) of the batches issued in it.
    pub latency_ms_by_bucket: Vec<(f64, f64)>,
    /// Mean distinct nodes a batch's reads touched, in the window.
    pub distinct_nodes_mean: f64,
    /// Per bucket of the whole run: (bucket start, mean distinct nodes per batch).
    pub distinct_nodes_by_bucket: Vec<(f64, f64)>,
    /// Unit reads launched per block read, in the window.
    pub reads_per_block: f64,
    /// Queue probes the window's batches sent while planning (Hu et al.'s rules probe; the cost
    /// policy's periodic table refresh is not a batch's).
    pub probes_per_batch: f64,
    /// Bytes each node served to the window's reads (tasks that started), by node.
    pub bytes_per_node: Vec<u64>,
    /// The paper's λ: (most loaded − mean) / mean × 100, over bytes per node.
    pub imbalance_pct: f64,
    /// Blocks read from parity (decoded), as a share of the window's blocks.
    pub decoded_share: f64,
    /// 99th percentile of the decisions' CPU time, nanoseconds.
    pub decision_ns_p99: u64,
    /// Batches of more than one block in the window.
    pub multi_block_batches: u64,
    /// Of them, planned from the plan cache.
    pub cache_hits: u64,
    /// Of them, those whose decision explored branch-and-bound nodes (waited for a solve).
    pub multi_block_inline_solves: u64,
    /// Bytes the window's batches returned to clients.
    pub client_bytes: u64,
    /// Moves completed over the whole run.
    pub moves: u64,
    /// Moves that failed (nothing changed).
    pub moves_failed: u64,
    /// Bytes the completed moves carried (read once and written once each).
    pub mover_bytes: u64,
    /// Most moves started in any 10-second span of the run.
    pub moves_max_per_10_s: u64,
    /// Client bytes returned over the whole run (to set the mover's bytes against).
    pub client_bytes_run: u64,
    /// Batch-latency CDF of the window, (seconds, fraction).
    pub cdf: Vec<(f64, f64)>,
}

impl BatchSummary {
    /// The plan cache's hit rate over the window's batches of several blocks.
    pub fn hit_rate(&self) -> Option<f64> {
        (self.multi_block_batches > 0).then(|| self.cache_hits as f64 / self.multi_block_batches as f64)
    }

    /// Mean batch latency in milliseconds, if any batch succeeded.
    pub fn latency_ms_mean(&self) -> Option<f64> {
        self.latency.map(|l| l.mean_s * 1e3)
    }
}

/// Summarises a run: `batches` by batch id, `log` the blocks' records by request id (a batch's
/// blocks at [`BatchRecord::requests`]), `moves` the mover's, `node_count` nodes.
pub fn summarize_batches(
    batches: &[BatchRecord],
    log: &RecordLog,
    moves: &[MoveRecord],
    node_count: usize,
    window: BatchWindow,
) -> BatchSummary {
    let measured: Vec<&BatchRecord> =
        batches.iter().filter(|b| (window.from_ns..window.to_ns).contains(&b.arrival_ns)).collect();
    let ok: Vec<&&BatchRecord> = measured.iter().filter(|b| b.outcome == Outcome::Ok).collect();
    let latency = Sample::new(ok.iter().map(|b| b.latency_ns()).collect());
    let mean_ms = |f: &dyn Fn(&BatchRecord) -> u64| {
        if ok.is_empty() { 0.0 } else { ok.iter().map(|b| f(b) as f64).sum::<f64>() / ok.len() as f64 / 1e6 }
    };
    let mut bytes_per_node = vec![0u64; node_count];
    let (mut reads, mut blocks, mut decoded, mut probes) = (0u64, 0u64, 0u64, 0u64);
    let mut distinct = Vec::with_capacity(measured.len());
    for batch in &measured {
        distinct.push(distinct_nodes(log, batch) as f64);
        for request in batch.requests() {
            let record = log.get(request as usize);
            debug_assert_eq!(record.request.request.0, request, "the log is by request id");
            blocks += 1;
            decoded += u64::from(record.request.degraded);
            reads += record.tasks.len() as u64;
            probes += u64::from(record.request.probes);
            for task in record.tasks.iter().filter(|t| t.start_ns != NEVER && !t.failed) {
                bytes_per_node[task.node.index()] += task.bytes;
            }
        }
    }
    let multi: Vec<&&BatchRecord> = measured.iter().filter(|b| b.blocks > 1).collect();
    let decisions = Sample::new(measured.iter().map(|b| b.decision_cpu_ns).collect());
    let done: Vec<&MoveRecord> = moves.iter().filter(|m| m.end_ns != NEVER).collect();
    BatchSummary {
        batches: measured.len() as u64,
        failed: (measured.len() - ok.len()) as u64,
        latency: latency.stats(),
        metadata_ms_mean: mean_ms(&|b| b.decision_start_ns - b.arrival_ns),
        plan_ms_mean: mean_ms(&|b| b.decision_end_ns - b.decision_start_ns),
        retrieval_ms_mean: mean_ms(&|b| b.completion_ns - b.decision_end_ns),
        latency_ms_by_bucket: by_bucket(batches, window.bucket_ns, |b| {
            (b.outcome == Outcome::Ok).then(|| b.latency_ns() as f64 / 1e6)
        }),
        distinct_nodes_mean: mean(&distinct),
        distinct_nodes_by_bucket: by_bucket(batches, window.bucket_ns, |b| Some(distinct_nodes(log, b) as f64)),
        reads_per_block: if blocks == 0 { 0.0 } else { reads as f64 / blocks as f64 },
        probes_per_batch: if measured.is_empty() { 0.0 } else { probes as f64 / measured.len() as f64 },
        imbalance_pct: imbalance_pct(&bytes_per_node),
        bytes_per_node,
        decoded_share: if blocks == 0 { 0.0 } else { decoded as f64 / blocks as f64 },
        decision_ns_p99: decisions.quantile_ns(0.99).unwrap_or(0),
        multi_block_batches: multi.len() as u64,
        cache_hits: multi.iter().filter(|b| b.source.is_cache_hit()).count() as u64,
        multi_block_inline_solves: multi.iter().filter(|b| b.inline_solver_nodes > 0).count() as u64,
        client_bytes: measured.iter().map(|b| b.bytes).sum(),
        moves: done.len() as u64,
        moves_failed: (moves.len() - done.len()) as u64,
        mover_bytes: done.iter().map(|m| 2 * m.bytes).sum(),
        moves_max_per_10_s: most_in_span(moves.iter().map(|m| m.start_ns).collect(), 10_000_000_000),
        client_bytes_run: batches.iter().map(|b| b.bytes).sum(),
        cdf: latency.cdf_points(CDF_POINTS),
    }
}

/// Distinct nodes the tasks of a batch's blocks were sent to.
pub fn distinct_nodes(log: &RecordLog, batch: &BatchRecord) -> usize {
    let mut nodes: Vec<NodeId> =
        batch.requests().flat_map(|r| log.get(r as usize).tasks.iter().map(|t| t.node)).collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes.len()
}

/// The paper's load imbalance λ = (L_max − L_avg) / L_avg × 100 (Table II); 0 without load.
pub fn imbalance_pct(loads: &[u64]) -> f64 {
    if loads.is_empty() {
        return 0.0;
    }
    let average = loads.iter().sum::<u64>() as f64 / loads.len() as f64;
    let most = loads.iter().copied().max().unwrap_or(0) as f64;
    if average > 0.0 { (most - average) / average * 100.0 } else { 0.0 }
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() { 0.0 } else { values.iter().sum::<f64>() / values.len() as f64 }
}

/// Per bucket of issue time, the mean of `value` over the batches that have one.
fn by_bucket(batches: &[BatchRecord], bucket_ns: u64, value: impl Fn(&BatchRecord) -> Option<f64>) -> Vec<(f64, f64)> {
    assert!(bucket_ns > 0, "buckets have a width");
    let mut sums: Vec<(f64, u64)> = Vec::new();
    for batch in batches {
        let Some(v) = value(batch) else { continue };
        let bucket = (batch.arrival_ns / bucket_ns) as usize;
        if sums.len() <= bucket {
            sums.resize(bucket + 1, (0.0, 0));
        }
        sums[bucket].0 += v;
        sums[bucket].1 += 1;
    }
    sums.iter()
        .enumerate()
        .filter(|(_, (_, n))| *n > 0)
        .map(|(i, (sum, n))| ((i as u64 * bucket_ns) as f64 / 1e9, sum / *n as f64))
        .collect()
}

/// The most of `starts` within any span of `span_ns` (a sliding window over the sorted times).
fn most_in_span(mut starts: Vec<u64>, span_ns: u64) -> u64 {
    starts.sort_unstable();
    let mut most = 0;
    let mut first = 0;
    for (last, &time) in starts.iter().enumerate() {
        while time - starts[first] >= span_ns {
            first += 1;
        }
        most = most.max(last + 1 - first);
    }
    most as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{
        FrontendId, ObjectId, PartitionId, PlanSource, RequestId, RequestRecord, StripeId, TaskRecord, TaskRole,
    };

    fn task(node: u32, bytes: u64) -> TaskRecord {
        TaskRecord {
            node: NodeId(node),
            unit: 0,
            role: TaskRole::Normal,
            cancelled: false,
            bytes,
            enqueue_ns: 10,
            start_ns: 20,
            finish_ns: 30,
            cancel_ns: NEVER,
            failed: false,
        }
    }

    fn block(id: u64, arrival_ns: u64, degraded: bool) -> RequestRecord {
        RequestRecord {
            request: RequestId(id),
            frontend: FrontendId(0),
            object: ObjectId(id),
            partition: PartitionId(0),
            bytes: 200,
            arrival_ns,
            decision_start_ns: arrival_ns + 1,
            decision_end_ns: arrival_ns + 2,
            completion_ns: arrival_ns + 1_000_000,
            // Distinct per block, so that the sum over a batch's blocks shows.
            probes: id as u32,
            probe_wait_ns: 0,
            decision_cpu_ns: 1,
            degraded,
            timed_out: false,
            outcome: Outcome::Ok,
            class: 0,
            latency_class: 0,
        }
    }

    fn batch(id: u64, first: u64, blocks: u32, arrival_ns: u64, latency_ns: u64, source: PlanSource) -> BatchRecord {
        BatchRecord {
            batch: id,
            client: 0,
            first_request: RequestId(first),
            blocks,
            bytes: 200 * u64::from(blocks),
            arrival_ns,
            decision_start_ns: arrival_ns + 1_000_000,
            decision_end_ns: arrival_ns + 1_500_000,
            completion_ns: arrival_ns + latency_ns,
            decision_cpu_ns: 500_000,
            source,
            inline_solver_nodes: 0,
            outcome: Outcome::Ok,
        }
    }

    #[test]
    fn a_small_run_is_summarised_from_its_records() {
        let mut log = RecordLog::new();
        // Batch 0 (warm-up): one block on nodes 0, 1. Batch 1: two blocks on nodes 0, 1 and 1, 2.
        log.push(block(0, 0, false), &[task(0, 100), task(1, 100)]);
        log.push(block(1, 5_000_000_000, false), &[task(0, 100), task(1, 100)]);
        log.push(block(2, 5_000_000_000, true), &[task(1, 100), task(2, 100), task(3, 100)]);
        let batches = [
            batch(0, 0, 1, 0, 4_000_000, PlanSource::Exact),
            batch(1, 1, 2, 5_000_000_000, 10_000_000, PlanSource::CacheHit),
        ];
        let moves = [MoveRecord {
            stripe: StripeId(1),
            unit: 0,
            from: NodeId(0),
            to: NodeId(3),
            bytes: 100,
            start_ns: 1,
            end_ns: 2,
            gain: 1.0,
            access_gain: 1.0,
            balance_gain: 0.0,
        }];
        let window = BatchWindow { from_ns: 1_000_000_000, to_ns: 10_000_000_000, bucket_ns: 1_000_000_000 };
        let summary = summarize_batches(&batches, &log, &moves, 4, window);
        assert_eq!((summary.batches, summary.failed), (1, 0));
        assert_eq!(summary.latency.unwrap().mean_s, 0.010);
        assert_eq!(summary.distinct_nodes_mean, 4.0);
        assert_eq!(summary.reads_per_block, 2.5);
        assert_eq!(summary.probes_per_batch, 3.0, "blocks 1 and 2 of the one measured batch");
        assert_eq!(summary.bytes_per_node, vec![100, 200, 100, 100]);
        assert_eq!(summary.imbalance_pct, (200.0 - 125.0) / 125.0 * 100.0);
        assert_eq!(summary.decoded_share, 0.5);
        assert_eq!(summary.hit_rate(), Some(1.0));
        assert_eq!((summary.metadata_ms_mean, summary.plan_ms_mean, summary.retrieval_ms_mean), (1.0, 0.5, 8.5));
        assert_eq!(summary.latency_ms_by_bucket, vec![(0.0, 4.0), (5.0, 10.0)]);
        assert_eq!(summary.distinct_nodes_by_bucket, vec![(0.0, 2.0), (5.0, 4.0)]);
        assert_eq!((summary.moves, summary.mover_bytes, summary.moves_max_per_10_s), (1, 200, 1));
    }

    #[test]
    fn moves_in_a_span_and_imbalance_have_their_edge_cases() {
        assert_eq!(most_in_span(vec![0, 5, 9, 10, 30], 10), 3);
        assert_eq!(most_in_span(Vec::new(), 10), 0);
        assert_eq!(imbalance_pct(&[]), 0.0);
        assert_eq!(imbalance_pct(&[0, 0]), 0.0);
        assert_eq!(imbalance_pct(&[1, 3]), 50.0);
    }
}
