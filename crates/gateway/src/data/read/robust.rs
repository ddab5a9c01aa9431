//! The robust read of a unit range: what the gateway runs when no policy plan applies (no
//! controller, a stripe of another code, the controller's catalog starting afresh) or a planned
//! read failed, and what repair runs to rebuild a unit. It is a plan like a policy's, run by the
//! execution core through `executor::drive` (each round's plan admitted by the read's task pool,
//! when it has one): the unit itself with its recovery set as the fallback after the read timeout
//! (`Reads::read_timeout`, Normal of Hu et al.), or the recovery set alone when the unit's node is
//! not Up. A round that fails marks the units that failed and plans again without them (at
//! most n + 1 rounds); when no readable set is left, units on Down nodes are tried too, and then the
//! target itself, because membership can mark a slow but live node Down. A unit that must be
//! rebuilt is first tried segmented when so configured (`segmented`).
//!
//! Owns the choice of the robust plan and the rounds. Must not run a quorum, a timeout or a cancel
//! itself (the core does), nor decide a policy's plan.

use std::collections::BTreeSet;
use std::sync::Mutex;

use bytes::Bytes;
use codec::ErasureCode;
use meta::NodeState;
use model::{DecodeAt, PlannedTask, Quorum, ReadPlan, ReconstructionTopology, TaskRole};
use tokio::time::Instant;

use crate::data::DataError;
use crate::data::io::stripe_io::{decode, undecodable};
use crate::data::read::admission::admit_plan;
use crate::data::read::executor::{self, Clock, TaskEnd, TaskResult};
use crate::data::read::plan::recovery_units;
use crate::data::read::range::RangeRead;

/// How a read's bytes came: read as they are, or rebuilt from other units and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rebuilt {
    /// Read as they are.
    No,
    /// Decoded at the gateway from whole ranges of other units.
    Gateway,
    /// Decoded at the gateway from segments of every survivor.
    Segmented,
    /// Rebuilt by a dataflow among the storage nodes (APLS).
    Nodes,
}

impl Rebuilt {
    /// The reconstruction layer's decision as records name it.
    pub fn name(self) -> &'static str {
        match self {
            Rebuilt::No => "none",
            Rebuilt::Gateway => "gateway",
            Rebuilt::Segmented => "segmented",
            Rebuilt::Nodes => "nodes",
        }
    }

    /// Whether the bytes were decoded (a degraded read).
    pub fn is_degraded(self) -> bool {
        self != Rebuilt::No
    }
}

/// Bytes of the range, read robustly, and how they came.
pub async fn read(range: RangeRead<'_>, timeout_ns: u64) -> Result<(Bytes, Rebuilt), DataError> {
    if let Some(bytes) = crate::data::read::segmented::read_lost(range).await {
        return Ok((bytes, Rebuilt::Segmented));
    }
    if let Some(bytes) = crate::data::read::node_dataflow::read_lost(range).await {
        return Ok((bytes, Rebuilt::Nodes));
    }
    let failed = range.stripe.missing_units.iter().map(|&unit| usize::from(unit)).collect();
    let (bytes, decoded) = rounds(range, failed, true, timeout_ns).await?;
    Ok((bytes, if decoded { Rebuilt::Gateway } else { Rebuilt::No }))
}

/// The range rebuilt from other units, never reading the target or a unit in `failed`.
pub async fn rebuild(range: RangeRead<'_>, mut failed: BTreeSet<usize>) -> Result<Bytes, DataError> {
    failed.extend(range.stripe.missing_units.iter().map(|&unit| usize::from(unit)));
    rounds(range, failed, false, 0).await.map(|(bytes, _)| bytes)
}

/// Plans and runs rounds until one serves the range or nothing readable is left.
async fn rounds(
    range: RangeRead<'_>,
    mut failed: BTreeSet<usize>,
    may_read_target: bool,
    timeout_ns: u64,
) -> Result<(Bytes, bool), DataError> {
    // Units known gone (corrupt or absent on a live node, or recorded missing and not still being
    // written): only when these alone leave too few is the data lost; otherwise it is unavailable
    // (a node Down or not answering, units still landing) and the client should retry.
    let now_ms = crate::data::cluster::membership::unix_now_ms();
    let mut gone_units: BTreeSet<usize> = if range.stripe.is_pending_for(now_ms, range.io.incarnation()) {
        BTreeSet::new()
    } else {
        range.stripe.missing_units.iter().map(|&unit| usize::from(unit)).collect()
    };
    let clock = Clock { epoch: Instant::now() };
    // Each failed round adds at least one unit to `failed`, so n + 1 rounds exhaust the stripe.
    for _round in 0..=range.stripe.placement.len() {
        let Some(plan) = robust_plan(range, &failed, may_read_target, timeout_ns) else { break };
        let gone: Mutex<Vec<(usize, bool)>> = Mutex::new(Vec::new());
        let run_task = |i: usize| read_task(range, plan.tasks[i], clock, &gone);
        let admitted = admit_plan(range.admission, &plan).await?;
        let driven =
            executor::drive(&plan, range.unit as u8, range.code, clock, admitted.as_ref(), run_task, None).await;
        if let Some((tasks, decoded)) = driven.completed {
            if decoded {
                range.io.count_degraded();
            }
            return served_bytes(range, &plan, &tasks, decoded, &driven.bytes).map(|bytes| (bytes, decoded));
        }
        let failures = std::mem::take(&mut *crate::data::lock(&gone));
        if failures.is_empty() {
            break;
        }
        for (unit, unit_gone) in failures {
            failed.insert(unit);
            if unit_gone {
                gone_units.insert(unit);
            }
        }
    }
    let present: Vec<bool> = (0..range.stripe.placement.len()).map(|unit| !gone_units.contains(&unit)).collect();
    Err(undecodable(range.stripe.id, range.unit, &failed, range.code.is_decodable(&present)))
}

/// The bytes a completed plan serves: the unit's own (`decoded` false), or the unit decoded from
/// the completing tasks' units (through the recovery set the code picks among them). Shared by the
/// robust read and the controller's planned reads.
pub(crate) fn served_bytes(
    range: RangeRead<'_>,
    plan: &ReadPlan,
    tasks: &[usize],
    decoded: bool,
    bytes: &[Option<Bytes>],
) -> Result<Bytes, DataError> {
    if !decoded {
        return Ok(bytes[tasks[0]].clone().expect("the completing task delivered"));
    }
    let code = range.code;
    let mut answered: Vec<Option<&Bytes>> = vec![None; code.total_units()];
    for &task in tasks {
        answered[usize::from(plan.tasks[task].unit)] = bytes[task].as_ref();
    }
    decoded_from(code, &answered, range.unit)
}

/// Unit `unit` decoded from the units `answered` holds, through the recovery set the code picks
/// among them.
fn decoded_from(code: &dyn ErasureCode, answered: &[Option<&Bytes>], unit: usize) -> Result<Bytes, DataError> {
    let present: Vec<bool> = answered.iter().map(Option::is_some).collect();
    let sources = recovery_units(code, &present, unit)
        .ok_or_else(|| DataError::Internal(format!("units {present:?} do not give unit {unit}")))?;
    let buffers: Vec<Bytes> = sources.iter().map(|&s| answered[s].cloned().unwrap_or_default()).collect();
    decode(code, unit, &sources, &buffers)
}

/// The range of every unit in `units` from a completed first-k-of-n `plan` over the row: each
/// unit's own bytes where its task delivered, else decoded from the units that did (every task
/// that delivered counts, so a row whose quorum was met holds k of an MDS code's units); and
/// whether any was decoded (a row read is degraded if any of its units is, not only its first).
pub(crate) fn served_units(
    range: RangeRead<'_>,
    plan: &ReadPlan,
    units: std::ops::Range<usize>,
    bytes: &[Option<Bytes>],
) -> Result<(Vec<Bytes>, bool), DataError> {
    let code = range.code;
    let mut answered: Vec<Option<&Bytes>> = vec![None; code.total_units()];
    for (task, delivered) in plan.tasks.iter().zip(bytes) {
        if let Some(delivered) = delivered {
            answered[usize::from(task.unit)] = Some(delivered);
        }
    }
    let decoded = units.clone().any(|unit| answered[unit].is_none());
    let served = units
        .map(|unit| match answered[unit] {
            Some(own) => Ok(own.clone()),
            None => decoded_from(code, &answered, unit),
        })
        .collect::<Result<Vec<Bytes>, DataError>>()?;
    Ok((served, decoded))
}

/// The plan of one round, `None` when nothing readable can give the range.
fn robust_plan(
    range: RangeRead<'_>,
    failed: &BTreeSet<usize>,
    may_read_target: bool,
    timeout_ns: u64,
) -> Option<ReadPlan> {
    let RangeRead { stripe, nodes, code, unit, .. } = range;
    let up = |u: usize| nodes.get(&stripe.placement[u]).is_some_and(|n| n.state == NodeState::Up);
    let not_failed: Vec<bool> = (0..stripe.placement.len()).map(|u| u != unit && !failed.contains(&u)).collect();
    let readable: Vec<bool> = not_failed.iter().enumerate().map(|(u, &ok)| ok && up(u)).collect();
    let target_ok = may_read_target && !failed.contains(&unit) && !stripe.is_missing(unit);
    let task = |u: usize, role| PlannedTask {
        node: model::NodeId(stripe.placement[u].0),
        unit: u as u8,
        offset: range.offset,
        length: range.length,
        role,
    };
    if target_ok && up(unit) {
        let mut tasks = vec![task(unit, TaskRole::Normal)];
        let Some(set) = recovery_units(code, &readable, unit) else { return Some(ReadPlan::normal(tasks[0])) };
        tasks.extend(set.into_iter().map(|u| task(u, TaskRole::Fallback)));
        return Some(ReadPlan {
            tasks,
            quorum: Quorum::NormalThenFallback { timeout_ns },
            decode: DecodeAt::Gateway,
            topology: ReconstructionTopology::Gateway,
            deadline_ns: None,
        });
    }
    match recovery_units(code, &readable, unit).or_else(|| recovery_units(code, &not_failed, unit)) {
        Some(set) => Some(ReadPlan::degraded(set.into_iter().map(|u| task(u, TaskRole::Degraded)).collect())),
        // Its node is marked Down, perhaps only because a probe timed out: ask it before giving up.
        None if target_ok => Some(ReadPlan::normal(task(unit, TaskRole::Normal))),
        None => None,
    }
}

/// One task of a robust plan: the unit range from its node. A failure is noted in `gone` with
/// whether the copy itself is gone (corrupt or missing) rather than its node slow or unreachable.
async fn read_task(
    range: RangeRead<'_>,
    task: PlannedTask,
    clock: Clock,
    gone: &Mutex<Vec<(usize, bool)>>,
) -> TaskResult {
    let sent_ns = clock.now_ns();
    let unit = usize::from(task.unit);
    match range.io.read_unit_timed(range.nodes, range.stripe, unit, task.offset, task.length).await {
        Ok((bytes, timing)) => (TaskEnd::Done { timing, sent_ns, received_ns: clock.now_ns() }, Some(bytes)),
        Err(error) => {
            tracing::info!(%error, "unit read failed; reading elsewhere");
            crate::data::lock(gone).push((unit, error.gone));
            (TaskEnd::Failed { sent_ns }, None)
        }
    }
}
