//! Writing a stripe's units, shared by striped writes ([`crate::data::objects::erasure`]) and packed seals
//! ([`crate::data::objects::packed`]): encoding, placing the n units on distinct nodes, writing them in parallel
//! (a unit whose write fails is placed elsewhere, at most `write_retries` more rounds, else left
//! missing) and judging by the durability rule (`ack_min_failures_tolerated`) whether what landed
//! may be acknowledged. The caller records the stripe, with its missing units, afterwards.
//!
//! Under an early write ack rule ([`meta::WriteAck`] `k+1` or `k`), or the straggler rule (on by
//! default: one unit late past a share of the others' time is left behind), the first round's unit
//! writes run as tasks of their own and [`write_units_early`] returns when the execution core's
//! write quorum acknowledges, handing back the writes still running ([`Landing`]) for the caller
//! to finish in the background.
//!
//! Must not: create or change stripe records, touch object metadata, or acknowledge anything: it
//! reports which units are durable and what they survive.

use std::sync::Arc;

use bytes::Bytes;
use codec::ErasureCode;
use execution::{CopyState, Durability, WriteQuorum, WriteRule, WriteVerdict};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use meta::{NodeId, NodeInfo, NodeState, StripeId};
use tokio::task::JoinHandle;

use crate::data::DataError;
use crate::data::io::stripe_io::{NodeMap, StripeIo};

/// Alignment of the unit size of an object's last stripe (the codec kernels' step).
pub const UNIT_ALIGN_BYTES: u64 = 64;

/// What became of a stripe's unit writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnitWrites {
    /// Where each unit is stored, or was meant to be (its node holds no durable copy when the unit
    /// is not `durable`). Distinct nodes, all counted by the placer.
    pub placement: Vec<NodeId>,
    /// Which units are durable on their node.
    pub durable: Vec<bool>,
}

impl UnitWrites {
    /// The units not durable, for the stripe record.
    pub fn missing(&self) -> Vec<u16> {
        (0..self.durable.len()).filter(|&unit| !self.durable[unit]).map(|unit| unit as u16).collect()
    }

    /// The durable units and their nodes.
    pub fn durable_units(&self) -> Vec<(usize, NodeId)> {
        (0..self.durable.len()).filter(|&unit| self.durable[unit]).map(|unit| (unit, self.placement[unit])).collect()
    }
}

/// Zero-pads `data` (k data units, each at most `unit_bytes` long) to `unit_bytes` and appends the
/// parity units: the n units of a stripe.
/// The CRC-32C of each unit, as stripe records keep them (`StripeMeta::unit_checksums`).
pub(crate) fn unit_checksums(units: &[Bytes]) -> Vec<u32> {
    units.iter().map(|unit| crc32c::crc32c(unit)).collect()
}

pub(crate) fn encode_units(code: &dyn ErasureCode, data: Vec<Bytes>, unit_bytes: u64) -> Result<Vec<Bytes>, DataError> {
    let unit_len = usize::try_from(unit_bytes).map_err(|_| DataError::Internal("unit too large".into()))?;
    assert_eq!(data.len(), code.data_units(), "one buffer per data unit");
    let data: Vec<Bytes> = data
        .into_iter()
        .map(|unit| {
            assert!(unit.len() <= unit_len, "a data unit longer than the stripe's unit size");
            if unit.len() == unit_len {
                unit
            } else {
                let mut padded = vec![0u8; unit_len];
                padded[..unit.len()].copy_from_slice(&unit);
                Bytes::from(padded)
            }
        })
        .collect();
    let mut parity = vec![vec![0u8; unit_len]; code.parity_units()];
    {
        let data_slices: Vec<&[u8]> = data.iter().map(|b| b.as_ref()).collect();
        let mut parity_slices: Vec<&mut [u8]> = parity.iter_mut().map(|p| p.as_mut_slice()).collect();
        code.encode(&data_slices, &mut parity_slices).map_err(|e| DataError::Internal(format!("encode: {e}")))?;
    }
    Ok(data.into_iter().chain(parity.into_iter().map(Bytes::from)).collect())
}

/// Undoes the placer's count of `placement` (units that will not exist after all).
pub(crate) fn forget_placement(io: &StripeIo, placement: &[NodeId]) {
    let mut placer = io.placer();
    placement.iter().for_each(|node| placer.adjust(*node, -1));
}

/// The placement of a new stripe of `n` units and which of them to write now (counted by the
/// placer): Up nodes for as many units as there are Up nodes, the rest on distinct Down nodes,
/// never written (missing from the start). Fewer than `k` Up nodes, or fewer than `n` Up and Down
/// nodes in all, is `Unavailable` and counts nothing.
pub(crate) fn place_new_stripe(
    io: &StripeIo,
    node_list: &[NodeInfo],
    n: usize,
    k: usize,
) -> Result<(Vec<NodeId>, Vec<bool>), DataError> {
    let up = node_list.iter().filter(|node| node.state == NodeState::Up).count();
    if up < k {
        return Err(DataError::Unavailable(format!("{up} storage nodes up, a stripe needs at least {k}")));
    }
    let written_now = n.min(up);
    // In the latency class of the write (the background class for repair's and the packer's own).
    let class = io.cluster().call_class().0;
    let mut placement =
        io.placer().place_new(node_list, written_now, class).map_err(|e| DataError::Unavailable(e.to_string()))?;
    let mut down: Vec<NodeId> =
        node_list.iter().filter(|node| node.state == NodeState::Down).map(|node| node.id).collect();
    down.sort();
    down.truncate(n - written_now);
    if down.len() < n - written_now {
        forget_placement(io, &placement);
        return Err(DataError::Unavailable(format!(
            "{up} storage nodes up and {} down: a stripe needs {n} distinct nodes",
            down.len()
        )));
    }
    let mut placer = io.placer();
    down.iter().for_each(|&node| placer.adjust(node, 1));
    drop(placer);
    placement.extend(down);
    let to_write = (0..n).map(|unit| unit < written_now).collect();
    Ok((placement, to_write))
}

/// Moves the units of `placement` whose node is not Up to Up nodes holding no unit of the stripe,
/// one at a time while the placer finds one (keeping the placer's counts); returns which units are
/// on Up nodes now, to be written. A unit no node can take stays where it is, to be left missing.
pub(crate) fn move_off_unavailable(
    io: &StripeIo,
    nodes: &NodeMap,
    node_list: &[NodeInfo],
    placement: &mut [NodeId],
) -> Vec<bool> {
    let is_up = |node: &NodeId| nodes.get(node).is_some_and(|info| info.state == NodeState::Up);
    for unit in 0..placement.len() {
        if is_up(&placement[unit]) {
            continue;
        }
        let peers: Vec<NodeId> = (0..placement.len()).filter(|&u| u != unit).map(|u| placement[u]).collect();
        let mut placer = io.placer();
        if let Ok(found) = placer.place(node_list, 1, &[placement[unit]], &peers) {
            placer.adjust(placement[unit], -1);
            placement[unit] = found[0];
        }
    }
    placement.iter().map(is_up).collect()
}

/// Writes the units flagged in `to_write` to their nodes in `placement` (already counted by the
/// placer), in parallel. A unit whose write fails is placed on another Up node holding no unit of
/// the stripe and written again, at most `write_retries` more rounds; one that still fails, or
/// that no node can take, stays on the node it failed on and is reported not durable. Never fails:
/// the caller judges what landed ([`judge`]).
pub(crate) async fn write_units(
    io: &StripeIo,
    nodes: &NodeMap,
    node_list: &[NodeInfo],
    id: StripeId,
    (units, descriptors): (&[Bytes], &[Bytes]),
    mut placement: Vec<NodeId>,
    to_write: &[bool],
) -> UnitWrites {
    let n = units.len();
    assert_eq!(descriptors.len(), n, "one descriptor per unit");
    assert_eq!(placement.len(), n, "one node per unit");
    assert_eq!(to_write.len(), n, "one flag per unit");
    let mut pending: Vec<usize> = (0..n).filter(|&unit| to_write[unit]).collect();
    let mut durable = vec![false; n];
    let mut failed_nodes: Vec<NodeId> = Vec::new();
    // Each round writes every pending unit once: at most write_retries + 1 rounds.
    for round in 0..=io.config().write_retries {
        let current = &placement;
        let results = futures_util::future::join_all(pending.iter().map(|&unit| async move {
            match nodes.get(&current[unit]) {
                Some(node) => io.write_unit(node, id, unit, (units[unit].clone(), descriptors[unit].clone())).await,
                None => Err(format!("node {} is not registered", current[unit])),
            }
        }))
        .await;
        let mut failed = Vec::new();
        for (&unit, result) in pending.iter().zip(results) {
            match result {
                Ok(()) => durable[unit] = true,
                Err(error) => {
                    tracing::info!(stripe = %id, unit, %error, "unit write failed");
                    failed_nodes.push(placement[unit]);
                    failed.push(unit);
                }
            }
        }
        if failed.is_empty() || round == io.config().write_retries {
            break;
        }
        pending =
            failed.into_iter().filter(|&unit| replace(io, node_list, &mut placement, unit, &failed_nodes)).collect();
        io.counters().write_retries.fetch_add(pending.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }
    UnitWrites { placement, durable }
}

/// Moves unit `unit` to another node (not in `excluded`, holding no unit of the stripe); whether
/// one was found.
fn replace(io: &StripeIo, node_list: &[NodeInfo], placement: &mut [NodeId], unit: usize, excluded: &[NodeId]) -> bool {
    let peers: Vec<NodeId> = (0..placement.len()).filter(|&u| u != unit).map(|u| placement[u]).collect();
    let mut placer = io.placer();
    match placer.place(node_list, 1, excluded, &peers) {
        Ok(found) => {
            placer.adjust(placement[unit], -1);
            placement[unit] = found[0];
            true
        }
        Err(_) => false,
    }
}

/// A unit write still running after an early acknowledgement: the unit, its node, the task.
pub(crate) type Landing = (usize, NodeId, JoinHandle<Result<(), String>>);

/// What the first round of a stripe's unit writes under a [`WriteRule`] came to.
pub(crate) enum EarlyWrites {
    /// The rule acknowledged the units landed; `landing` are still being written (the units not
    /// durable in `writes` that are not in `landing` were never written: their node is Down).
    /// `straggler` when it was the straggler rule (one late unit), not the bucket's early one.
    Acked { writes: UnitWrites, landing: Vec<Landing>, straggler: bool },
    /// Every write ended before the rule acknowledged (some failed, or none was late): judge and
    /// retry as under `all`.
    Ended(UnitWrites),
}

/// Writes the units flagged in `to_write` to their nodes in `placement` (`planned`, as
/// [`place_new_stripe`] returns them), each as a task of its own (it runs on when this returns),
/// and returns when the execution core's [`WriteQuorum`] acknowledges under `rule` with units
/// still being written, or when every write has ended. No retries here: a failed unit is the
/// caller's to retry or leave missing.
pub(crate) async fn write_units_early(
    io: &Arc<StripeIo>,
    nodes: &NodeMap,
    code: &dyn ErasureCode,
    id: StripeId,
    (units, descriptors): (&[Bytes], &[Bytes]),
    planned: (Vec<NodeId>, &[bool]),
    rule: WriteRule,
) -> EarlyWrites {
    let (placement, to_write) = planned;
    let n = units.len();
    assert_eq!(descriptors.len(), n, "one descriptor per unit");
    assert!(placement.len() == n && to_write.len() == n, "one node and one flag per unit");
    let mut running: Vec<Option<JoinHandle<Result<(), String>>>> = (0..n)
        .map(|unit| {
            let node = nodes.get(&placement[unit]).filter(|_| to_write[unit]).cloned();
            node.map(|node| {
                let (io, described) = (Arc::clone(io), (units[unit].clone(), descriptors[unit].clone()));
                // In the writing request's latency class: a spawned task starts without it.
                tokio::spawn(crate::classes::carried(async move { io.write_unit(&node, id, unit, described).await }))
            })
        })
        .collect();
    let started: Vec<bool> = running.iter().map(Option::is_some).collect();
    if !started.contains(&true) {
        return EarlyWrites::Ended(UnitWrites { placement, durable: vec![false; n] });
    }
    let durability = Durability::Code(code);
    let mut quorum = WriteQuorum::start(&started, rule, durability, 0);
    let straggler = {
        let ended = running
            .iter_mut()
            .enumerate()
            .filter_map(|(unit, handle)| handle.as_mut().map(|handle| async move { (unit, handle.await) }));
        drive_quorum(
            &mut quorum,
            durability,
            ended.collect(),
            |unit, error| tracing::info!(stripe = %id, unit, %error, "unit write failed"),
        )
        .await
    };
    // A JoinHandle is awaited once: the ones whose result was not taken are still landing.
    let landing: Vec<Landing> = (0..n)
        .filter(|&unit| quorum.copy_state(unit) == CopyState::Running)
        .filter_map(|unit| running[unit].take().map(|handle| (unit, placement[unit], handle)))
        .collect();
    let writes = UnitWrites { placement, durable: quorum.durable() };
    match straggler {
        Some(straggler) if !landing.is_empty() => EarlyWrites::Acked { writes, landing, straggler },
        _ => EarlyWrites::Ended(writes),
    }
}

/// Feeds `quorum` the ends of the copy writes in `ended` (copy, task outcome; a failed task is a
/// failed write, told to `on_failure`) until its verdict is no longer to wait: `Some(straggler)`
/// when it acknowledges with copies still running, `None` when every write has ended.
pub(crate) async fn drive_quorum<F>(
    quorum: &mut WriteQuorum,
    durability: Durability<'_>,
    mut ended: FuturesUnordered<F>,
    mut on_failure: impl FnMut(usize, &str),
) -> Option<bool>
where
    F: std::future::Future<Output = (usize, Result<Result<(), String>, tokio::task::JoinError>)>,
{
    let clock = QuorumClock::start();
    loop {
        let until_ns = match quorum.verdict(durability, clock.now_ns()) {
            WriteVerdict::Ended => return None,
            WriteVerdict::Acknowledge { straggler } => return Some(straggler),
            WriteVerdict::Wait { until_ns } => until_ns,
        };
        let Some((copy, result)) = clock.next_before(&mut ended, until_ns).await else { continue };
        let result = result.unwrap_or_else(|error| Err(format!("write task ended abnormally: {error}")));
        if let Err(error) = &result {
            on_failure(copy, error);
        }
        quorum.unit_ended(copy, result.is_ok(), durability, clock.now_ns());
    }
}

/// The shell's clock for a [`WriteQuorum`]: nanoseconds since the write started, and waiting for
/// the next write to end or a deadline, whichever comes first.
struct QuorumClock {
    started: tokio::time::Instant,
}

impl QuorumClock {
    fn start() -> Self {
        Self { started: tokio::time::Instant::now() }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The next item of `ended`, or `None` once `until_ns` (if any) has come first.
    async fn next_before<S: futures_util::Stream + Unpin>(
        &self,
        ended: &mut S,
        until_ns: Option<u64>,
    ) -> Option<S::Item> {
        match until_ns {
            None => ended.next().await,
            Some(until_ns) => {
                let deadline = self.started + std::time::Duration::from_nanos(until_ns);
                tokio::time::timeout_at(deadline, ended.next()).await.ok().flatten()
            }
        }
    }
}

/// Judges unit writes by the durability rule: the further failures the durable units survive,
/// when at least `ack_min_failures_tolerated`. Otherwise the durable units are deleted again (best
/// effort; an undeleted one is an orphan) and the write is `Unavailable`; the placer's counts are
/// the caller's to undo.
pub(crate) async fn judge(
    io: &StripeIo,
    nodes: &NodeMap,
    code: &dyn ErasureCode,
    id: StripeId,
    writes: &UnitWrites,
) -> Result<usize, DataError> {
    let rule = io.config().ack_min_failures_tolerated;
    let tolerated = code.failures_tolerated(&writes.durable);
    if let Some(tolerated) = tolerated.filter(|&tolerated| tolerated >= rule) {
        return Ok(tolerated);
    }
    io.delete_units_best_effort(nodes, id, &writes.durable_units()).await;
    let stored = writes.durable.iter().filter(|d| **d).count();
    let failed: Vec<NodeId> = writes.missing().iter().map(|&unit| writes.placement[usize::from(unit)]).collect();
    Err(DataError::Unavailable(format!(
        "stripe {id}: only {stored} of {} units could be stored (no durable copy on nodes {failed:?}); \
         the durability rule (ack_min_failures_tolerated = {rule}) needs what is stored to survive {rule} \
         more node failures",
        writes.durable.len()
    )))
}
