//! Deciding and carrying out one planned read: the policy's probes announced and sent in one
//! parallel round trip, the plan asked of the request's planner (its profile's, or the cluster's),
//! and the plan run through the execution core (`executor::drive`), each task one node RPC.
//!
//! Must not: hold the controller's lock across an await, or decide what the policy or the
//! execution core decides.

use std::ops::Range;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use meta::NodeId as StoreNodeId;
use model::{NodeId as PolicyNodeId, ObjectId, PlannedTask, ReadRequest};
use policy::fec::FrontendState;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::catalog::{LiveView, record_rates};
use super::counters::count;
use super::records::ThreadCpu;
use super::{Controller, Decision, PLAN_ATTEMPTS};
use crate::data::DataError;
use crate::data::io::stripe_io::{NodeMap, StripeIo, is_up};
use crate::data::read::admission::{TaskPool, admit_plan};
use crate::data::read::executor::{self, Clock, TaskEnd, TaskResult};
use crate::data::read::range::RangeRead;
use crate::data::read::robust;

/// What executing a plan came to: the bytes of each unit asked for.
pub(super) enum Executed {
    Done { bytes: Vec<Bytes>, degraded: bool, timed_out: bool },
    Failed { timed_out: bool },
}

impl Controller {
    /// Plans a read: announced probes in one parallel round trip, then the policy's plan (its row
    /// plan for several `units`). `None` when the catalog had to start afresh (the read is served
    /// unplanned). Adds the probes it sent to `probes_sent`, whatever it returns.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn decide(
        &self,
        range: &RangeRead<'_>,
        units: Range<usize>,
        arrival_ns: u64,
        probes_sent: &mut u32,
    ) -> Result<Option<Decision>, DataError> {
        let RangeRead { io, nodes, stripe, unit, offset, length, admission, .. } = *range;
        let frontend = admission.map_or_else(FrontendState::unbounded, TaskPool::frontend_state);
        let active = crate::profiles::active();
        // A retried plan's decision spans every attempt, and its record counts every probe sent.
        let decision_start_ns = self.now_ns();
        let measure_cpu = self.decisions_begun.fetch_add(1, Ordering::Relaxed).is_multiple_of(self.cpu_sample_every);
        let (mut probe_wait_ns, mut decision_cpu_ns) = (0u64, 0u64);
        for _attempt in 0..PLAN_ATTEMPTS {
            let attempt_start_ns = self.now_ns();
            // Each phase runs without an await, so one thread's CPU clock covers it whole.
            let phase_one_cpu = ThreadCpu::start(measure_cpu);
            // Phase 1: the request in dense ids and the probes the policy will make.
            let (request, mut request_rng, targets, generation) = {
                let mut state = self.lock();
                let state = &mut *state;
                if state.ensure_planner(active.as_deref(), self.admission)? {
                    // A new planner may be due for a refresh before the loop's next wake.
                    self.switched.notify_one();
                }
                let Some(dense) = state.catalog.stripe(stripe)? else {
                    self.reset_catalog(state)?;
                    return Ok(None);
                };
                let (id, partition) = state.name_request(dense, unit);
                let request = ReadRequest {
                    id,
                    // The controller reads unit ranges; the S3 key is the layer above's. The store's
                    // stripe id names what was read.
                    object: ObjectId(stripe.id.0),
                    partition,
                    offset,
                    length,
                    arrival_ns,
                    class: 0,
                    // The class the S3 layer resolved (carried in the task), else the background one.
                    latency_class: io.cluster().call_class().0,
                };
                // One generator per request: concurrent decisions cannot shift each other's draws
                // between announcing probes and planning.
                let request_rng = ChaCha8Rng::seed_from_u64(state.rng.next_u64());
                let mut targets = Vec::new();
                let view = LiveView::of_read(&state.catalog, &[], self.frontend_count, frontend, nodes).reading(stripe);
                let planner = match active.as_deref() {
                    None => &mut *state.policy,
                    Some(active) => &mut *state.profiles.get_mut(&active.name).expect("ensured").policy,
                };
                planner.probe_targets(&view, attempt_start_ns, &request, &mut request_rng.clone(), &mut targets);
                targets.dedup();
                let store_targets: Vec<(PolicyNodeId, StoreNodeId)> =
                    targets.iter().map(|&t| (t, state.catalog.nodes[t.index()])).collect();
                (request, request_rng, store_targets, state.generation)
            };
            decision_cpu_ns += phase_one_cpu.elapsed_ns();
            // Phase 2: the probes, in parallel, outside the lock.
            let probe_sent_ns = self.now_ns();
            let (replies, sent) = self.probe_nodes(io, nodes, &targets).await;
            if !targets.is_empty() {
                probe_wait_ns += self.now_ns() - probe_sent_ns;
            }
            *probes_sent = probes_sent.saturating_add(sent as u32);
            // Phase 3: the plan.
            let phase_three_cpu = ThreadCpu::start(measure_cpu);
            let mut state = self.lock();
            if state.generation != generation {
                decision_cpu_ns += phase_three_cpu.elapsed_ns();
                continue;
            }
            let state = &mut *state;
            let answers = record_rates(&mut state.catalog, &replies);
            let mut view =
                LiveView::of_read(&state.catalog, &answers, self.frontend_count, frontend, nodes).reading(stripe);
            let planner = match active.as_deref() {
                None => &mut *state.policy,
                Some(active) => &mut *state.profiles.get_mut(&active.name).expect("same generation").policy,
            };
            let plan = if units.len() > 1 {
                let row = units.start as u8..units.end as u8;
                planner.plan_row(&mut view, self.now_ns(), &request, row, &mut request_rng)
            } else {
                planner.plan(&mut view, self.now_ns(), &request, &mut request_rng)
            };
            debug_assert_eq!(view.unanswered, 0, "{} probed a node it did not announce", planner.name());
            debug_assert!(plan.validate().is_ok(), "{:?}", plan.validate());
            let store_nodes = plan.tasks.iter().map(|t| state.catalog.nodes[t.node.index()]).collect();
            decision_cpu_ns += phase_three_cpu.elapsed_ns();
            return Ok(Some(Decision {
                plan,
                request,
                decision_start_ns,
                decision_end_ns: self.now_ns(),
                probes: *probes_sent,
                probe_wait_ns,
                decision_cpu_ns,
                store_nodes,
                generation,
                planner: active.as_ref().map_or_else(|| planner.name().to_string(), |a| a.profile.read_name()),
                profile: active,
            }));
        }
        Ok(None)
    }

    /// Probes `targets` in parallel; a node that fails to answer reports [`QueueState::UNREACHABLE`].
    /// A node that is not Up is answered for at once, unprobed (it looks full too). Returns the
    /// replies and how many probes were sent.
    pub(super) async fn probe_nodes(
        &self,
        io: &StripeIo,
        nodes: &NodeMap,
        targets: &[(PolicyNodeId, StoreNodeId)],
    ) -> (Vec<(PolicyNodeId, Option<node::ProbeReply>)>, usize) {
        let (up, down): (Vec<_>, Vec<_>) = targets.iter().partition(|(_, id)| is_up(nodes, *id));
        let mut replies: Vec<(PolicyNodeId, Option<node::ProbeReply>)> = Vec::with_capacity(targets.len());
        replies.extend(down.iter().map(|&&(dense, _)| (dense, None)));
        let sent = up.len();
        let mut probes: FuturesUnordered<_> = up
            .into_iter()
            .map(|&(dense, id)| async move {
                let probe = async {
                    let info = nodes.get(&id)?;
                    let client = io.cluster().client(info).await.ok()?;
                    client.probe().await.ok()
                };
                // A hung node that is still marked Up must not hold the decision for the whole
                // RPC timeout.
                let reply = match tokio::time::timeout(self.probe_timeout, probe).await {
                    Ok(reply) => reply,
                    Err(_) => {
                        count(&self.counters.probe_timeouts, "lowtail_controller_probe_timeouts_total", 1);
                        None
                    }
                };
                (dense, reply)
            })
            .collect();
        while let Some(reply) = probes.next().await {
            replies.push(reply);
        }
        (replies, sent)
    }

    /// Carries out `decision`'s plan for `units` through the execution core; says how each task
    /// ended.
    pub(super) async fn execute(
        &self,
        target: &RangeRead<'_>,
        units: Range<usize>,
        decision: &Decision,
    ) -> (Executed, Vec<TaskEnd>) {
        let plan = &decision.plan;
        let clock = Clock { epoch: self.epoch };
        let run_task = |i: usize| self.run_task(target, &plan.tasks[i], decision.store_nodes[i]);
        let admitted = match admit_plan(target.admission, plan).await {
            Ok(admitted) => admitted,
            Err(error) => {
                tracing::warn!(%error, "planned read not admitted");
                return (Executed::Failed { timed_out: false }, vec![TaskEnd::NotLaunched; plan.tasks.len()]);
            }
        };
        let driven =
            executor::drive(plan, target.unit as u8, target.code, clock, admitted.as_ref(), run_task, None).await;
        let timed_out = driven.timed_out;
        let served = match &driven.completed {
            Some((_, decoded)) if units.len() > 1 => robust::served_units(*target, plan, units, &driven.bytes)
                .map(|(bytes, row_decoded)| (bytes, *decoded || row_decoded)),
            Some((tasks, decoded)) => {
                robust::served_bytes(*target, plan, tasks, *decoded, &driven.bytes).map(|bytes| (vec![bytes], *decoded))
            }
            None => return (Executed::Failed { timed_out }, driven.ends),
        };
        let executed = match served {
            Ok((bytes, degraded)) => Executed::Done { bytes, degraded, timed_out },
            Err(error) => {
                tracing::warn!(%error, "a completed degraded read did not decode");
                Executed::Failed { timed_out }
            }
        };
        (executed, driven.ends)
    }

    /// One task: its bytes (None when it failed) and how it ended.
    async fn run_task(&self, target: &RangeRead<'_>, task: &PlannedTask, node: StoreNodeId) -> TaskResult {
        let RangeRead { io, nodes, stripe, .. } = *target;
        debug_assert_eq!(stripe.placement[usize::from(task.unit)], node, "plan and stripe agree on the node");
        let sent_ns = self.now_ns();
        if !is_up(nodes, node) || stripe.is_missing(usize::from(task.unit)) {
            // A node that is not Up, or a unit recorded missing, fails its task at once (no RPC
            // that could only time out or fail), so the plan's fallback or the robust read starts
            // without waiting.
            return (TaskEnd::Failed { sent_ns }, None);
        }
        match io.read_unit_timed(nodes, stripe, usize::from(task.unit), task.offset, task.length).await {
            Ok((bytes, timing)) => (TaskEnd::Done { timing, sent_ns, received_ns: self.now_ns() }, Some(bytes)),
            Err(_) => (TaskEnd::Failed { sent_ns }, None),
        }
    }
}
