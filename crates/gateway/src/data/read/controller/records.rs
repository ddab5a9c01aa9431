//! The controller's records in the shared schema: one `model::Record` per read (planned, with
//! per-task timings from the nodes placed on the gateway's clock, or unplanned, without tasks),
//! kept up to `max_records` until taken, and the deciding thread's CPU time. Must not change what
//! a read does.

use std::collections::VecDeque;
use std::sync::MutexGuard;
use std::sync::atomic::Ordering;

use meta::StripeMeta;
use model::{
    FrontendId, LayerDecisions, NEVER, ObjectId, Outcome, PlannedTask, Quorum, ReadPlan, Record, RequestRecord,
    TaskRecord,
};

use super::counters::count;
use super::{Controller, Decision};
use crate::data::read::executor::TaskEnd;
use crate::data::read::robust::Rebuilt;
use crate::profiles::ActiveProfile;

/// A read served without a plan, as [`Controller::record_unplanned`] records it.
pub struct Unplanned<'a> {
    /// The stripe read.
    pub stripe: &'a StripeMeta,
    /// The data unit read.
    pub unit: usize,
    /// Bytes asked for.
    pub length: u64,
    /// When the read arrived, on the controller's clock ([`Controller::now_ns`]).
    pub arrival_ns: u64,
    /// Whether and how the bytes were rebuilt from other units.
    pub rebuilt: Rebuilt,
    /// Whether the bytes were returned.
    pub served: bool,
    /// The latency class it was read in ([`crate::data::io::connections::NodeConnections::call_class`]).
    pub latency_class: u8,
    /// What each layer decided.
    pub layers: LayerDecisions,
}

/// How a planned read was served, for its record.
pub(super) struct Served {
    pub(super) bytes: u64,
    pub(super) degraded: bool,
    pub(super) timed_out: bool,
    pub(super) ok: bool,
    pub(super) layers: LayerDecisions,
}

/// What each layer decided for a read: `profile`'s (`None`: the cluster default), planned by
/// `planner` as `plan` (`None`: served without a plan), its bytes rebuilt as `rebuilt`, admitted by
/// a pool of `admission_slots` (0: unbounded).
pub fn layer_decisions(
    profile: Option<&ActiveProfile>,
    planner: &str,
    plan: Option<&ReadPlan>,
    rebuilt: Rebuilt,
    admission_slots: u32,
) -> LayerDecisions {
    let (units_asked, units_needed) = plan.map_or((0, 0), |plan| {
        let asked = plan.upfront_tasks();
        let needed = match plan.quorum {
            Quorum::All => asked,
            Quorum::AnyK { k } | Quorum::FirstKOfN { k } => usize::from(k),
            Quorum::NormalThenFallback { .. } | Quorum::FirstCopy { .. } => 1,
        };
        (u8::try_from(asked).unwrap_or(u8::MAX), u8::try_from(needed).unwrap_or(u8::MAX))
    });
    LayerDecisions {
        profile: profile.map_or_else(|| DEFAULT_PROFILE.to_string(), |profile| profile.name.clone()),
        planner: planner.to_string(),
        units_asked,
        units_needed,
        reconstruction: rebuilt.name().to_string(),
        admission_slots,
    }
}

/// The name records give the cluster's default profile.
pub const DEFAULT_PROFILE: &str = "default";

/// The calling thread's CPU clock at a start: what a stretch of synchronous code cost in CPU,
/// without the time the thread waited for a lock or for a core.
pub(super) struct ThreadCpu {
    /// `None` when this decision's CPU time is not measured.
    pub(super) start_ns: Option<u64>,
}

impl ThreadCpu {
    /// Reads the thread's CPU clock if `measure`; otherwise measures nothing and costs nothing.
    pub(super) fn start(measure: bool) -> Self {
        Self { start_ns: measure.then(thread_cpu_ns) }
    }

    /// CPU time since [`Self::start`] (0 when not measured); call it on the same thread (no await
    /// in between).
    pub(super) fn elapsed_ns(&self) -> u64 {
        self.start_ns.map_or(0, |start_ns| thread_cpu_ns().saturating_sub(start_ns))
    }
}

pub(super) fn thread_cpu_ns() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    // A thread's CPU clock starts at zero and never goes negative.
    debug_assert!(now.tv_sec >= 0 && now.tv_nsec >= 0);
    (now.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(now.tv_nsec as u64)
}

/// A task's record. Node timestamps are on the node's clock; they are placed on the gateway's by
/// splitting the time outside the node evenly between the way there and back (no clock sync needed;
/// waiting and service durations are the node's own).
pub(super) fn task_record(task: &PlannedTask, end: TaskEnd, dispatched_ns: u64) -> TaskRecord {
    let base = TaskRecord {
        node: task.node,
        unit: task.unit,
        role: task.role,
        cancelled: false,
        cancel_ns: NEVER,
        failed: false,
        bytes: task.length,
        enqueue_ns: dispatched_ns,
        start_ns: NEVER,
        finish_ns: NEVER,
    };
    match end {
        TaskEnd::Done { timing, sent_ns, received_ns } => {
            let on_node_ns = timing.finish_ns.saturating_sub(timing.enqueue_ns);
            let outside_ns = received_ns.saturating_sub(sent_ns).saturating_sub(on_node_ns);
            let enqueue_ns = sent_ns + outside_ns / 2;
            TaskRecord {
                enqueue_ns,
                start_ns: enqueue_ns + timing.start_ns.saturating_sub(timing.enqueue_ns),
                finish_ns: enqueue_ns + on_node_ns,
                ..base
            }
        }
        TaskEnd::Cancelled { sent_ns, cancel_ns } => {
            TaskRecord { enqueue_ns: sent_ns, cancelled: true, cancel_ns, ..base }
        }
        TaskEnd::Failed { sent_ns } => TaskRecord { enqueue_ns: sent_ns, failed: true, ..base },
        // A fallback task the normal read made unnecessary.
        TaskEnd::NotLaunched => TaskRecord { enqueue_ns: dispatched_ns, ..base },
    }
}

impl Controller {
    /// Takes every record kept so far (completion order) and the count dropped since the last take.
    pub fn take_records(&self) -> (Vec<Record>, u64) {
        let records: Vec<Record> = std::mem::take(&mut *self.lock_records()).into();
        (records, self.counters.dropped_records.swap(0, Ordering::Relaxed))
    }

    /// Probes the lazy refreshes sent since the last call: they load the nodes like per-request
    /// probes but belong to no record, so reports add them to a run's probes per second.
    pub fn take_refresh_probes(&self) -> u64 {
        self.counters.refresh_probes_untaken.swap(0, Ordering::Relaxed)
    }

    pub(super) fn lock_records(&self) -> MutexGuard<'_, VecDeque<Record>> {
        crate::data::lock(&self.records)
    }

    pub(super) fn keep(&self, record: Record) {
        if self.max_records == 0 {
            return;
        }
        let mut records = self.lock_records();
        if records.len() >= self.max_records {
            count(&self.counters.dropped_records, "lowtail_controller_records_dropped_total", 1);
            return;
        }
        records.push_back(record);
    }

    /// Keeps the record of a planned read and lets the policy that planned it observe it.
    pub(super) fn record_planned(&self, decision: &Decision, ends: &[TaskEnd], arrival_ns: u64, served: Served) {
        let completion_ns = self.now_ns();
        let tasks: Vec<TaskRecord> = decision
            .plan
            .tasks
            .iter()
            .zip(ends)
            .map(|(task, end)| task_record(task, *end, decision.decision_end_ns))
            .collect();
        let request = RequestRecord {
            request: decision.request.id,
            frontend: FrontendId(self.frontend_id),
            object: decision.request.object,
            partition: decision.request.partition,
            bytes: served.bytes,
            arrival_ns,
            decision_start_ns: decision.decision_start_ns,
            decision_end_ns: decision.decision_end_ns,
            completion_ns,
            probes: decision.probes,
            probe_wait_ns: decision.probe_wait_ns,
            decision_cpu_ns: decision.decision_cpu_ns,
            degraded: served.degraded,
            timed_out: served.timed_out,
            outcome: if served.ok { Outcome::Ok } else { Outcome::Failed },
            class: decision.request.class,
            latency_class: decision.request.latency_class,
        };
        {
            let mut state = self.lock();
            if state.generation == decision.generation {
                state.planner(decision.profile.as_deref()).observe(&request, &tasks);
            }
        }
        self.keep(Record { request, tasks, layers: Some(served.layers) });
    }

    /// Records a read served without a plan (no tasks, no decision time), completed now. A stripe
    /// the catalog cannot hold (another code than the controller's) has no partition to name, so
    /// its read goes unrecorded; `reads_bypassed` counts it with the rest.
    pub fn record_unplanned(&self, read: &Unplanned<'_>) {
        let completion_ns = self.now_ns();
        let located = if !self.is_own_code(read.stripe) {
            None
        } else {
            let mut state = self.lock();
            let state = &mut *state;
            let dense = match state.catalog.stripe(read.stripe) {
                Ok(None) => {
                    // Full: the planned path would start afresh too.
                    self.reset_catalog(state).ok().and_then(|()| state.catalog.stripe(read.stripe).ok().flatten())
                }
                Ok(found) => found,
                Err(_) => None,
            };
            dense.map(|dense| state.name_request(dense, read.unit))
        };
        let Some((id, partition)) = located else {
            tracing::debug!(stripe = %read.stripe.id, "a read of a stripe outside the controller's code is not recorded");
            return;
        };
        self.keep(Record {
            request: RequestRecord {
                request: id,
                frontend: FrontendId(self.frontend_id),
                object: ObjectId(read.stripe.id.0),
                partition,
                bytes: read.length,
                arrival_ns: read.arrival_ns,
                decision_start_ns: read.arrival_ns,
                decision_end_ns: read.arrival_ns,
                completion_ns,
                probes: 0,
                probe_wait_ns: 0,
                decision_cpu_ns: 0,
                degraded: read.rebuilt.is_degraded(),
                timed_out: false,
                outcome: if read.served { Outcome::Ok } else { Outcome::Failed },
                class: 0,
                latency_class: read.latency_class,
            },
            tasks: Vec::new(),
            layers: Some(read.layers.clone()),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{NodeId as PolicyNodeId, TaskRole};

    fn timing(enqueue_ns: u64, start_ns: u64, finish_ns: u64) -> node::TaskTiming {
        node::TaskTiming {
            node_id: 3,
            task_id: 1,
            enqueue_ns,
            start_ns,
            finish_ns,
            bytes: 100,
            outcome: node::TaskOutcome::Ok,
            bytes_ahead: 0,
            emulated_service_ns: 0,
            class: node::ClassId::DEFAULT,
        }
    }

    fn task() -> PlannedTask {
        PlannedTask { node: PolicyNodeId(2), unit: 1, offset: 0, length: 100, role: TaskRole::Normal }
    }

    #[test]
    fn node_timestamps_land_inside_the_round_trip_with_their_durations() {
        // Sent at 1000, answered at 2000; on the node: 100 ns waiting, 500 ns service.
        let end = TaskEnd::Done { timing: timing(5_000_000, 5_000_100, 5_000_600), sent_ns: 1000, received_ns: 2000 };
        let record = task_record(&task(), end, 900);
        assert!(!record.cancelled && !record.failed);
        assert_eq!(record.enqueue_ns, 1200, "400 ns outside the node, half of it before");
        assert_eq!(record.waiting_ns(), Some(100));
        assert_eq!(record.service_ns(), Some(500));
        assert_eq!(record.finish_ns, 1800);
    }

    #[test]
    fn cancelled_and_failed_tasks_never_started() {
        let record = task_record(&task(), TaskEnd::Cancelled { sent_ns: 50, cancel_ns: 70 }, 10);
        assert!(record.cancelled && record.cancel_ns == 70 && record.start_ns == NEVER && record.enqueue_ns == 50);
        assert!(!record.failed);
        let record = task_record(&task(), TaskEnd::Failed { sent_ns: 60 }, 10);
        assert!(record.failed && !record.cancelled && record.enqueue_ns == 60);
        assert!(record.latency_ns().is_none());
        let fallback = PlannedTask { role: TaskRole::Fallback, ..task() };
        let record = task_record(&fallback, TaskEnd::NotLaunched, 10);
        assert!(!record.cancelled && record.start_ns == NEVER, "a fallback never launched was not cancelled");
    }
}
