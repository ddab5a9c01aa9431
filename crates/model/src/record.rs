//! The one record schema: what every executor emits per request, and the
//! compact log that holds millions of them.
//!
//! Owns: [`RequestRecord`] and [`TaskRecord`] (the schema), [`Record`] (one
//! request with its tasks, the unit of export and of the live executor),
//! [`RecordLog`] (requests plus one flat arena of tasks: no allocation per
//! request). Must not: hold anything an executor knows that a live system
//! could not measure; every table and plot is computed from these fields.
//!
//! Stability: fields are only ever added, never renamed (reports and scripts
//! read them). Times are nanoseconds of the executor's clock; [`crate::NEVER`]
//! marks a moment that was never reached.

use crate::NEVER;
use crate::ids::{FrontendId, NodeId, ObjectId, PartitionId, RequestId};
use crate::plan::TaskRole;
use serde::{Deserialize, Serialize};

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Outcome {
    /// The bytes were returned.
    Ok = 0,
    /// The request could not be served (no decodable set of units answered).
    Failed = 1,
}

/// The per-request part of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// The request.
    pub request: RequestId,
    /// The frontend that served it.
    pub frontend: FrontendId,
    /// The object read.
    pub object: ObjectId,
    /// Its data partition.
    pub partition: PartitionId,
    /// Bytes requested.
    pub bytes: u64,
    /// Arrival at the frontend (timestamp A of Hu et al.).
    pub arrival_ns: u64,
    /// When the controller started deciding (after queueing at the frontend).
    pub decision_start_ns: u64,
    /// When the controller sent the tasks (timestamp B).
    pub decision_end_ns: u64,
    /// When the frontend had the requested bytes (timestamp E).
    pub completion_ns: u64,
    /// Queue probes the controller sent for this request.
    pub probes: u32,
    /// Part of the decision spent waiting for probe replies (the probe round trip), so the
    /// controller's own processing is `decision_end_ns - decision_start_ns - probe_wait_ns`.
    /// Zero when nothing was probed. Absent in records written before it existed.
    #[serde(default)]
    pub probe_wait_ns: u64,
    /// CPU time the controller's thread spent on the decision (both sides of the probe wait). The
    /// wall-clock [`Self::decision_compute_ns`] also counts lock waits and the time the thread
    /// was preempted on a busy host; this does not, so the two apart say which of them a slow
    /// decision was. The simulator writes its modelled decision time here. Zero where nothing
    /// measured it: client-side records, records written before it existed, and the decisions a
    /// gateway did not sample (it measures one in `[controller] cpu_sample_every`, because reading
    /// the clock is itself a point where the kernel preempts).
    #[serde(default)]
    pub decision_cpu_ns: u64,
    /// Whether the bytes came from a recovery set (a degraded read),
    /// whether proactive or after a timeout.
    pub degraded: bool,
    /// Whether the normal read timed out and a fallback was launched.
    pub timed_out: bool,
    /// How the request ended.
    pub outcome: Outcome,
    /// The request's operation class ([`crate::ReadRequest::class`]).
    #[serde(default)]
    pub class: u8,
    /// The request's latency class ([`crate::ReadRequest::latency_class`]).
    #[serde(default)]
    pub latency_class: u8,
}

impl RequestRecord {
    /// Request latency: arrival to completion (what the paper's tables
    /// report).
    #[inline]
    pub fn latency_ns(&self) -> u64 {
        debug_assert!(self.completion_ns >= self.arrival_ns);
        self.completion_ns - self.arrival_ns
    }

    /// The controller's own decision time: deciding, without queueing at
    /// the frontend and without waiting for probe replies.
    #[inline]
    pub fn decision_compute_ns(&self) -> u64 {
        debug_assert!(self.decision_end_ns >= self.decision_start_ns);
        (self.decision_end_ns - self.decision_start_ns).saturating_sub(self.probe_wait_ns)
    }

    /// Controller processing time: queueing at the frontend plus deciding
    /// (the paper's "controller processing time").
    #[inline]
    pub fn controller_ns(&self) -> u64 {
        debug_assert!(self.decision_end_ns >= self.arrival_ns);
        self.decision_end_ns - self.arrival_ns
    }
}

/// One task of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The node that held the task.
    pub node: NodeId,
    /// The unit index within the stripe.
    pub unit: u8,
    /// Why the task was planned.
    pub role: TaskRole,
    /// Whether the executor cancelled it before it finished; then
    /// `cancel_ns` says when.
    pub cancelled: bool,
    /// Bytes read.
    pub bytes: u64,
    /// Entered the node's queue (timestamp C).
    pub enqueue_ns: u64,
    /// Service started (timestamp D); [`NEVER`] if cancelled while waiting.
    pub start_ns: u64,
    /// Service ended (finished, or aborted when cancelled in service);
    /// [`NEVER`] if it never started.
    pub finish_ns: u64,
    /// When the executor cancelled it (sent the cancel: the request's quorum
    /// was complete, or its normal read lost to the fallback), on the
    /// executor's clock; [`NEVER`] when not `cancelled`. A task whose cancel
    /// arrived after it finished was not cancelled. (Added after the first
    /// schema: records without it read as [`NEVER`].)
    #[serde(default = "never")]
    pub cancel_ns: u64,
    /// Whether the node failed it (answered with an error, or not at all;
    /// in the simulator, a node in an outage). A failed task is not
    /// cancelled and has no latency.
    #[serde(default)]
    pub failed: bool,
}

fn never() -> u64 {
    NEVER
}

impl TaskRecord {
    /// Checks the fields agree: a cancel time exactly when cancelled, and a
    /// failed task is not also cancelled.
    pub fn validate(&self) -> Result<(), String> {
        if self.cancelled != (self.cancel_ns != NEVER) {
            return Err(format!("cancelled = {} but cancel_ns = {}", self.cancelled, self.cancel_ns));
        }
        if self.failed && self.cancelled {
            return Err("a task both failed and cancelled".into());
        }
        Ok(())
    }

    /// Waiting time in the node's queue, if the task started.
    #[inline]
    pub fn waiting_ns(&self) -> Option<u64> {
        (self.start_ns != NEVER).then(|| self.start_ns - self.enqueue_ns)
    }

    /// Task latency (enqueue to finish) of a task that ran to completion.
    #[inline]
    pub fn latency_ns(&self) -> Option<u64> {
        (!self.cancelled && !self.failed && self.finish_ns != NEVER).then(|| self.finish_ns - self.enqueue_ns)
    }

    /// Time the node spent serving the task, if it started.
    #[inline]
    pub fn service_ns(&self) -> Option<u64> {
        (self.start_ns != NEVER && self.finish_ns != NEVER).then(|| self.finish_ns - self.start_ns)
    }
}

/// One request with its tasks: the unit of export (one JSON line per
/// request) and what a live executor emits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The request part.
    #[serde(flatten)]
    pub request: RequestRecord,
    /// Its tasks, in plan order.
    pub tasks: Vec<TaskRecord>,
    /// What each layer of the request path decided, where the executor records it (the live
    /// gateway); absent in the simulator's records and in records written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<LayerDecisions>,
}

/// What each layer of a profile decided for one read (docs/profiles.md). The latency class is the
/// request's own field, and node scheduling follows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerDecisions {
    /// The profile that served it: a bucket's profile name, or `default` for the cluster's.
    pub profile: String,
    /// Selection and redundancy: the planner's name (a preset's, `lmlf-pw2`, or the composition,
    /// `lmlf-pw2+bafec`); empty for a read served without a plan.
    pub planner: String,
    /// Redundancy: the units the plan asked for up front (0 for a read served without a plan).
    pub units_asked: u8,
    /// The units the read was done at (the plan's quorum; 0 without a plan).
    pub units_needed: u8,
    /// Reconstruction: how bytes not read were rebuilt: `none` (nothing was), `gateway` (decoded
    /// at the gateway), `segmented` (segments of every survivor, decoded at the gateway) or
    /// `nodes` (a dataflow among the storage nodes, APLS).
    pub reconstruction: String,
    /// Admission: the task slots of the pool that admitted it (0: unbounded).
    pub admission_slots: u32,
}

/// A borrowed record out of a [`RecordLog`].
#[derive(Clone, Copy, Debug)]
pub struct RecordRef<'a> {
    /// The request part.
    pub request: &'a RequestRecord,
    /// Its tasks, in plan order.
    pub tasks: &'a [TaskRecord],
}

impl RecordRef<'_> {
    /// An owned copy.
    pub fn to_record(&self) -> Record {
        Record { request: *self.request, tasks: self.tasks.to_vec(), layers: None }
    }
}

/// Records of a run: requests, and every task in one flat arena. About 100
/// bytes per request plus 48 per task.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordLog {
    requests: Vec<RequestRecord>,
    /// `task_starts[i]..task_starts[i + 1]` are the tasks of request `i`;
    /// one more entry than `requests`.
    task_starts: Vec<u32>,
    tasks: Vec<TaskRecord>,
}

impl RecordLog {
    /// An empty log.
    pub fn new() -> RecordLog {
        RecordLog { requests: Vec::new(), task_starts: vec![0], tasks: Vec::new() }
    }

    /// An empty log with room for `requests` requests and `tasks` tasks.
    pub fn with_capacity(requests: usize, tasks: usize) -> RecordLog {
        let mut task_starts = Vec::with_capacity(requests + 1);
        task_starts.push(0);
        RecordLog { requests: Vec::with_capacity(requests), task_starts, tasks: Vec::with_capacity(tasks) }
    }

    /// Appends one request and its tasks.
    pub fn push(&mut self, request: RequestRecord, tasks: &[TaskRecord]) {
        if self.task_starts.is_empty() {
            self.task_starts.push(0);
        }
        debug_assert!(tasks.iter().all(|t| t.validate().is_ok()), "{tasks:?}");
        self.tasks.extend_from_slice(tasks);
        let end = u32::try_from(self.tasks.len()).expect("more than 4 G task records in one log");
        self.requests.push(request);
        self.task_starts.push(end);
        debug_assert_eq!(self.task_starts.len(), self.requests.len() + 1);
    }

    /// Appends an owned record.
    pub fn push_record(&mut self, record: &Record) {
        self.push(record.request, &record.tasks);
    }

    /// Requests in the log.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// Record `index` (in log order).
    pub fn get(&self, index: usize) -> RecordRef<'_> {
        let start = self.task_starts[index] as usize;
        let end = self.task_starts[index + 1] as usize;
        RecordRef { request: &self.requests[index], tasks: &self.tasks[start..end] }
    }

    /// Every record, in log order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = RecordRef<'_>> + '_ {
        (0..self.requests.len()).map(move |i| self.get(i))
    }

    /// The request parts only (cheap scans for latency tables).
    pub fn requests(&self) -> &[RequestRecord] {
        &self.requests
    }

    /// Every task of every request, in log order.
    pub fn all_tasks(&self) -> &[TaskRecord] {
        &self.tasks
    }

    /// Bytes of heap the log holds (for measuring memory per request).
    pub fn heap_bytes(&self) -> usize {
        self.requests.capacity() * size_of::<RequestRecord>()
            + self.task_starts.capacity() * size_of::<u32>()
            + self.tasks.capacity() * size_of::<TaskRecord>()
    }

    /// The same records ordered by request id (executors emit a record when
    /// its last task resolves, which is not arrival order).
    pub fn sorted_by_request(&self) -> RecordLog {
        let mut order: Vec<usize> = (0..self.requests.len()).collect();
        order.sort_by_key(|&i| self.requests[i].request);
        let mut sorted = RecordLog::with_capacity(self.requests.len(), self.tasks.len());
        for i in order {
            let record = self.get(i);
            sorted.push(*record.request, record.tasks);
        }
        sorted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: u64) -> RequestRecord {
        RequestRecord {
            request: RequestId(id),
            frontend: FrontendId(0),
            object: ObjectId(7),
            partition: PartitionId(3),
            bytes: 100,
            arrival_ns: 10,
            decision_start_ns: 12,
            decision_end_ns: 15,
            completion_ns: 40,
            probes: 2,
            probe_wait_ns: 0,
            decision_cpu_ns: 0,
            degraded: false,
            timed_out: false,
            outcome: Outcome::Ok,
            class: 0,
            latency_class: 0,
        }
    }

    fn task(node: u32, cancelled: bool) -> TaskRecord {
        TaskRecord {
            node: NodeId(node),
            unit: 0,
            role: TaskRole::Normal,
            cancelled,
            bytes: 100,
            enqueue_ns: 16,
            start_ns: if cancelled { NEVER } else { 20 },
            finish_ns: if cancelled { NEVER } else { 30 },
            cancel_ns: if cancelled { 18 } else { NEVER },
            failed: false,
        }
    }

    #[test]
    fn log_keeps_tasks_with_their_request_and_sorts() {
        let mut log = RecordLog::new();
        log.push(request(2), &[task(1, false), task(2, true)]);
        log.push(request(1), &[task(3, false)]);
        assert_eq!(log.len(), 2);
        assert_eq!(log.get(0).tasks.len(), 2);
        let sorted = log.sorted_by_request();
        assert_eq!(sorted.get(0).request.request, RequestId(1));
        assert_eq!(sorted.get(0).tasks[0].node, NodeId(3));
        assert_eq!(sorted.get(1).tasks[1].waiting_ns(), None);
        assert!(sorted.get(1).tasks[1].cancelled && !sorted.get(1).tasks[0].cancelled);
        assert_eq!(sorted.get(1).tasks[0].latency_ns(), Some(14));
        assert_eq!(sorted.get(1).request.latency_ns(), 30);
    }

    #[test]
    fn task_fields_must_agree_and_old_records_read_as_not_cancelled() {
        assert!(task(1, true).validate().is_ok() && task(1, false).validate().is_ok());
        let no_time = TaskRecord { cancel_ns: NEVER, ..task(1, true) };
        assert!(no_time.validate().unwrap_err().contains("cancel_ns"));
        let both = TaskRecord { failed: true, ..task(1, true) };
        assert!(both.validate().is_err());
        // A record written before `cancel_ns` and `failed` existed.
        let old = r#"{"node":1,"unit":0,"role":"Normal","cancelled":false,"bytes":100,"enqueue_ns":16,"start_ns":20,"finish_ns":30}"#;
        let read: TaskRecord = serde_json::from_str(old).unwrap();
        assert_eq!(read, task(1, false));
    }

    #[test]
    fn records_round_trip_through_json() {
        let record = Record { request: request(5), tasks: vec![task(1, false), task(2, true)], layers: None };
        let text = serde_json::to_string(&record).unwrap();
        assert!(text.contains("\"arrival_ns\":10"), "{text}");
        let back: Record = serde_json::from_str(&text).unwrap();
        assert_eq!(back, record);
        let mut log = RecordLog::new();
        log.push_record(&record);
        let back: RecordLog = serde_json::from_str(&serde_json::to_string(&log).unwrap()).unwrap();
        assert_eq!(back, log);
    }

    #[test]
    fn records_stay_compact() {
        // A paper-scale run keeps about 12 M of these per policy.
        assert!(size_of::<TaskRecord>() <= 48, "{}", size_of::<TaskRecord>());
        assert!(size_of::<RequestRecord>() <= 96, "{}", size_of::<RequestRecord>());
    }
}
