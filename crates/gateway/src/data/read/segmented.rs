//! Segmented degraded reads (APLS's lists without node changes; issue 32, docs/lab/apls.md): when a
//! unit range must be rebuilt (its unit is recorded missing or its node is not Up) and
//! `[data.reconstruct] kind = "segmented"`, the range is split into q contiguous segments over the
//! q survivors on Up nodes; segment j is decoded at the gateway from the k survivors of APLS's list
//! r_j, so each survivor serves k/q of the range (its segments are one or two contiguous ranges,
//! read as ONE merged task on its node) instead of k survivors serving all of it. The segments and
//! lists are the execution core's dataflow (`Method::Segmented`, contiguous assignment).
//!
//! Any failure (a survivor does not answer, a range is corrupt) gives up the segmented read and the
//! caller reads as before (the robust read tries every decodable set). Only MDS codes (RS): an LRC
//! unit's recovery sets are not any k of the others. The q merged tasks are one plan of the
//! execution core (`Quorum::All`, run by `executor::drive`); with an admission pool
//! (`[data.admission]`) the read is one request of q tasks, each holding a slot while it runs.
//!
//! Must not: decide whether a read is degraded (the read policy's and membership's), or read a
//! unit that is recorded missing or on a node that is not Up.

use bytes::Bytes;
use codec::CodeSpec;
use execution::reconstruct::{Dataflow, Method};
use model::{DecodeAt, PlannedTask, Quorum, ReadPlan, ReconstructionTopology, TaskRole};
use policy::reconstruct::{ReconstructKind, ReconstructSettings, Survivor};
use tokio::time::Instant;

use crate::data::DataError;
use crate::data::io::stripe_io::{decode, is_up};
use crate::data::read::admission::admit_plan;
use crate::data::read::executor::{self, Clock, TaskEnd, TaskResult};
use crate::data::read::range::RangeRead;

/// Whether `range` must be rebuilt and the configuration asks for a segmented read (the controller
/// then leaves it to the robust read, which tries it first).
pub fn applies(range: RangeRead<'_>) -> bool {
    applies_under(range, &crate::profiles::reconstruct_settings(range.io.reconstruct()))
}

fn applies_under(range: RangeRead<'_>, settings: &ReconstructSettings) -> bool {
    settings.kind == ReconstructKind::Segmented
        && matches!(range.stripe.code_spec(), Ok(CodeSpec::Rs { .. }))
        && must_be_rebuilt(range)
        && spare_survivors(range)
}

/// Whether `range` must be rebuilt (its unit recorded missing or its node not Up) on nodes (not a
/// backend, whose configuration refuses any other kind than the gateway decode).
pub(crate) fn must_be_rebuilt(range: RangeRead<'_>) -> bool {
    let RangeRead { io, nodes, stripe, unit, .. } = range;
    io.backend().is_none() && (stripe.is_missing(unit) || !is_up(nodes, stripe.placement[unit]))
}

/// Whether an RS stripe has a survivor to spare for `range` (more than k usable): with no more than
/// k, every survivor is read whole anyway and the gateway decodes, as a segmented or APLS read would.
pub(crate) fn spare_survivors(range: RangeRead<'_>) -> bool {
    let RangeRead { nodes, stripe, code, unit, .. } = range;
    let usable = (0..stripe.placement.len())
        .filter(|&u| u != unit && !stripe.is_missing(u) && is_up(nodes, stripe.placement[u]))
        .count();
    usable > code.data_units()
}

/// What a rebuild of `range` by `how` gave: its bytes (counted degraded), or `None` after logging
/// why it gave up (the caller reads as before).
pub(crate) fn served(range: RangeRead<'_>, how: &'static str, outcome: Result<Bytes, DataError>) -> Option<Bytes> {
    match outcome {
        Ok(bytes) => {
            range.io.count_degraded();
            range.io.counters().rebuilt_reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            metrics::counter!("lowtail_gateway_rebuilt_reads_total", "how" => how).increment(1);
            Some(bytes)
        }
        Err(error) => {
            range.io.counters().rebuild_fallbacks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            metrics::counter!("lowtail_gateway_rebuilt_read_fallbacks_total", "how" => how).increment(1);
            tracing::info!(%error, how, "rebuilding read gave up; reading by recovery set");
            None
        }
    }
}

/// The range rebuilt from every survivor in segments, or `None` when a segmented read does not
/// apply or did not succeed (the caller reads as before).
pub async fn read_lost(range: RangeRead<'_>) -> Option<Bytes> {
    let settings = crate::profiles::reconstruct_settings(range.io.reconstruct());
    if !applies_under(range, &settings) || range.length == 0 {
        return None;
    }
    served(range, "segmented", read(range, &settings).await)
}

/// The survivors, least loaded first as the reconstruction policy ranks them, and the dataflow of
/// the range over them.
fn plan(range: RangeRead<'_>, settings: &ReconstructSettings) -> Result<(Vec<u8>, Dataflow), DataError> {
    let (method, sources) = chosen_dataflow(range, settings)?;
    let Method::Segmented { q, .. } = method else {
        return Err(DataError::Internal(format!("the policy chose {method:?} for a segmented read")));
    };
    let k = range.code.data_units() as u16;
    let flow = Dataflow::segmented(k, q, range.length).map_err(|e| DataError::Internal(e.to_string()))?;
    Ok((sources, flow))
}

/// The dataflow the reconstruction policy chooses for `range` of an RS stripe over its usable
/// survivors, and its sources; an error when it keeps the gateway decode (no more than k
/// survivors, or `auto` estimates the decode faster). Survivors are ranked by what this gateway
/// sent them within the load window plus what their last probe had queued (APLS's windowed table);
/// `auto` estimates with each survivor's probed rate (the slower of disk and link; unknown counts
/// as not binding) and the gateway's emulated downlink where it is shaped.
pub(crate) fn chosen_dataflow(
    range: RangeRead<'_>,
    settings: &ReconstructSettings,
) -> Result<(Method, Vec<u8>), DataError> {
    let RangeRead { io, nodes, stripe, code, unit, length, .. } = range;
    let loads = io.cluster().loads();
    let survivors: Vec<Survivor> = (0..stripe.placement.len())
        .filter(|&u| u != unit && !stripe.is_missing(u) && is_up(nodes, stripe.placement[u]))
        .map(|u| {
            let node = stripe.placement[u];
            let (load, rate) = loads.load_and_rate(node);
            Survivor {
                unit: u as u8,
                node: model::NodeId(node.0),
                load: load as f64,
                rate_bytes_per_s: rate.unwrap_or(f64::INFINITY),
            }
        })
        .collect();
    let mut settings = settings.clone();
    let downlink = io.ingress().shape();
    if downlink.bytes_per_s > 0.0 {
        settings.gateway_bytes_per_s = downlink.bytes_per_s;
    }
    let chosen = policy::reconstruct::choose(&settings, code.data_units() as u16, &survivors, length);
    match chosen.topology {
        model::ReconstructionTopology::Dataflow { dataflow, .. } => Ok((dataflow, chosen.sources)),
        _ => Err(DataError::Unavailable(format!(
            "{} survivors of {}: the policy keeps the gateway decode",
            survivors.len(),
            stripe.id
        ))),
    }
}

/// One source's merged task: its unit, its runs of packets and their byte ranges of the unit.
struct SourceTask {
    unit: usize,
    runs: Vec<(u32, u32)>,
    ranges: Vec<(u64, u64)>,
}

impl SourceTask {
    /// Packet `packet`'s bytes in `read`, the task's runs one after another (the source reads
    /// it: it is in one of its runs).
    fn packet(&self, read: &Bytes, flow: &Dataflow, packet: u32) -> Bytes {
        let mut start = 0usize;
        for (&(first, count), &(_, length)) in self.runs.iter().zip(&self.ranges) {
            if (first..first + count).contains(&packet) {
                let from = start + (flow.packet_offset(packet) - flow.packet_offset(first)) as usize;
                let to =
                    start + (flow.packet_offset(packet + 1).min(flow.range_bytes) - flow.packet_offset(first)) as usize;
                return read.slice(from..to);
            }
            start += length as usize;
        }
        unreachable!("a member reads its packet")
    }
}

/// The segmented read of `range` as one plan of the execution core: a merged task per source,
/// every one needed (`Quorum::All`: the first failure gives up and drops the others), admitted by
/// the read's pool like any plan's tasks; then each packet decoded from its list's members.
async fn read(range: RangeRead<'_>, settings: &ReconstructSettings) -> Result<Bytes, DataError> {
    let (sources, flow) = plan(range, settings)?;
    let tasks: Vec<SourceTask> = sources
        .iter()
        .zip(flow.local_reads())
        .map(|(&unit, packets)| {
            let runs = node::session::runs(&packets);
            let ranges = runs
                .iter()
                .map(|&(first, count)| {
                    let start = flow.packet_offset(first);
                    let end = flow.packet_offset(first + count).min(flow.range_bytes);
                    (range.offset + start, end - start)
                })
                .collect();
            SourceTask { unit: usize::from(unit), runs, ranges }
        })
        .collect();
    let plan = ReadPlan {
        tasks: tasks.iter().map(|task| planned_task(range, task)).collect(),
        quorum: Quorum::All,
        decode: DecodeAt::Gateway,
        topology: ReconstructionTopology::Gateway,
        deadline_ns: None,
    };
    let admitted = admit_plan(range.admission, &plan).await?;
    let clock = Clock { epoch: Instant::now() };
    let run_task = |i: usize| read_source(range, &tasks[i], clock);
    let target = range.unit as u8;
    let driven = executor::drive(&plan, target, range.code, clock, admitted.as_ref(), run_task, None).await;
    if let Some(reason) = driven.failure {
        let failed: Vec<usize> = (0..tasks.len())
            .filter(|&i| matches!(driven.ends[i], TaskEnd::Failed { .. }))
            .map(|i| tasks[i].unit)
            .collect();
        return Err(DataError::Unavailable(format!(
            "segmented read of unit {}/{}: {reason:?} (units {failed:?} failed)",
            range.stripe.id, range.unit
        )));
    }
    let mut out = Vec::with_capacity(range.length as usize);
    for packet in 0..flow.packets() {
        let members = flow.members(packet);
        let units: Vec<usize> = members.iter().map(|&m| tasks[usize::from(m)].unit).collect();
        let buffers: Vec<Bytes> = members
            .iter()
            .map(|&m| {
                let read = driven.bytes[usize::from(m)].as_ref().expect("every task of a completed plan delivered");
                tasks[usize::from(m)].packet(read, &flow, packet)
            })
            .collect();
        out.extend_from_slice(&decode(range.code, range.unit, &units, &buffers)?);
    }
    debug_assert_eq!(out.len() as u64, range.length);
    Ok(Bytes::from(out))
}

/// A source's merged task as a planned task (its first byte and its total length, for records).
fn planned_task(range: RangeRead<'_>, task: &SourceTask) -> PlannedTask {
    PlannedTask {
        node: model::NodeId(range.stripe.placement[task.unit].0),
        unit: task.unit as u8,
        offset: task.ranges.first().map_or(range.offset, |&(offset, _)| offset),
        length: task.ranges.iter().map(|&(_, length)| length).sum(),
        role: TaskRole::Degraded,
    }
}

/// A source's merged task: its runs' bytes one after another.
async fn read_source(range: RangeRead<'_>, task: &SourceTask, clock: Clock) -> TaskResult {
    let sent_ns = clock.now_ns();
    match range.io.read_unit_ranges(range.nodes, range.stripe, task.unit, &task.ranges).await {
        Ok((runs, timing)) => {
            let bytes = match <[Bytes; 1]>::try_from(runs) {
                Ok([one]) => one,
                Err(runs) => Bytes::from(runs.concat()),
            };
            (TaskEnd::Done { timing, sent_ns, received_ns: clock.now_ns() }, Some(bytes))
        }
        Err(error) => {
            tracing::debug!(%error, unit = task.unit, "segmented read task failed");
            (TaskEnd::Failed { sent_ns }, None)
        }
    }
}
