//! Writing a stripe's units, shared by striped writes ([`crate::data::objects::erasure`]) and packed seals
//! ([`crate::data::objects::packed`]): encoding, placing the n units on distinct nodes, and writing
//! them through the execution core's write execution ([`write_units`]: a unit whose write fails is
//! placed elsewhere, at most `write_retries` times, else left missing; the durability rule
//! `ack_min_failures_tolerated` judges what landed). The caller records the stripe, with its
//! missing units, afterwards.
//!
//! Under an early write ack rule ([`meta::WriteAck`] `k+1` or `k`), or the straggler rule (on by
//! default: one unit late past a share of the others' time is left behind), the core may
//! acknowledge with writes still running, handed back ([`Landing`]) for the caller to finish in
//! the background.
//!
//! Must not: create or change stripe records, touch object metadata, or acknowledge anything: it
//! reports which units are durable and what they survive.

use std::sync::Arc;

use bytes::Bytes;
use codec::ErasureCode;
use execution::{Durability, WriteRule, WriteSettings};
use meta::{NodeId, NodeInfo, NodeState, StripeId};

use crate::data::DataError;
use crate::data::io::stripe_io::{NodeMap, StripeIo};
use crate::data::write::execute::{CopyTask, CopyWriter, WriteEnd, drive_write};

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

/// The CRC-32C of each unit, as stripe records keep them (`StripeMeta::unit_checksums`).
pub(crate) fn unit_checksums(units: &[Bytes]) -> Vec<u32> {
    units.iter().map(|unit| crc32c::crc32c(unit)).collect()
}

/// Zero-pads `data` (k data units, each at most `unit_bytes` long) to `unit_bytes` and appends the
/// parity units: the n units of a stripe.
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

/// What a stripe's unit writes came to.
pub(crate) struct UnitRun {
    /// Where the units are and which are durable.
    pub writes: UnitWrites,
    /// How the write ended, as the execution core decided.
    pub end: WriteEnd,
    /// After an acknowledgement, the unit writes still running (the caller lands them).
    pub landing: Vec<Landing>,
}

/// Writes the units flagged in `to_write` to their nodes in `placement` (`planned`, as
/// [`place_new_stripe`] returns them, counted by the placer), each as a task of its own, as the
/// execution core's write execution decides under `rule`: a unit whose write fails is placed on
/// another Up node holding no unit of the stripe and written again at once, at most
/// `write_retries` times; one that still fails, or that no node can take, stays on the node it
/// failed on, not durable. Returns when the core acknowledged (units still landing), or every
/// write ended (the caller [`judge`]s).
pub(crate) async fn write_units(
    io: &Arc<StripeIo>,
    (nodes, node_list): (&NodeMap, &[NodeInfo]),
    code: &dyn ErasureCode,
    id: StripeId,
    (units, descriptors): (&[Bytes], &[Bytes]),
    (placement, to_write): (Vec<NodeId>, &[bool]),
    rule: WriteRule,
) -> UnitRun {
    let n = units.len();
    assert_eq!(descriptors.len(), n, "one descriptor per unit");
    assert!(placement.len() == n && to_write.len() == n, "one node and one flag per unit");
    let config = io.config();
    let settings = WriteSettings {
        rule,
        retries: config.write_retries,
        min_failures_tolerated: config.ack_min_failures_tolerated,
    };
    let mut writer = UnitWriter { io, nodes, node_list, id, units, descriptors };
    let placement = placement.iter().map(|node| node.0).collect();
    let run = drive_write((placement, to_write), settings, Durability::Code(code), &mut writer, None).await;
    for (unit, error) in &run.errors {
        tracing::info!(stripe = %id, unit, %error, "unit write failed");
    }
    let landing = run.landing.into_iter().map(|(unit, node, task)| (unit, NodeId(node), task)).collect();
    let writes = UnitWrites { placement: run.placement.into_iter().map(NodeId).collect(), durable: run.durable };
    UnitRun { writes, end: run.end, landing }
}

/// A stripe's units written to nodes, and placed elsewhere by the placer (keeping its counts).
struct UnitWriter<'a> {
    io: &'a Arc<StripeIo>,
    nodes: &'a NodeMap,
    node_list: &'a [NodeInfo],
    id: StripeId,
    units: &'a [Bytes],
    descriptors: &'a [Bytes],
}

impl CopyWriter for UnitWriter<'_> {
    fn start(&mut self, unit: usize, node: u32, retry: bool) -> CopyTask {
        if retry {
            self.io.counters().write_retries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let (io, id, described) =
            (Arc::clone(self.io), self.id, (self.units[unit].clone(), self.descriptors[unit].clone()));
        let (node_id, node) = (NodeId(node), self.nodes.get(&NodeId(node)).cloned());
        // In the writing request's latency class: a spawned task starts without it.
        tokio::spawn(crate::classes::carried(async move {
            match node {
                Some(node) => io.write_unit(&node, id, unit, described).await,
                None => Err(format!("node {node_id} is not registered")),
            }
        }))
    }

    fn place(&mut self, unit: usize, avoid: &[u32], placement: &[u32]) -> Option<u32> {
        let peers: Vec<NodeId> = (0..placement.len()).filter(|&u| u != unit).map(|u| NodeId(placement[u])).collect();
        let avoid: Vec<NodeId> = avoid.iter().map(|&node| NodeId(node)).collect();
        let mut placer = self.io.placer();
        let found = placer.place(self.node_list, 1, &avoid, &peers).ok()?;
        placer.adjust(NodeId(placement[unit]), -1);
        Some(found[0].0)
    }
}

/// A unit write still running after an early acknowledgement: the unit, its node, the task.
pub(crate) type Landing = (usize, NodeId, CopyTask);

/// Judges unit writes that all ended: the further failures the durable units survive, when the
/// execution core found they meet the durability rule (`ack_min_failures_tolerated`). Otherwise
/// the durable units are deleted again (best effort; an undeleted one is an orphan) and the write
/// is `Unavailable`; the placer's counts are the caller's to undo.
pub(crate) async fn judge(io: &StripeIo, nodes: &NodeMap, id: StripeId, run: &UnitRun) -> Result<usize, DataError> {
    let writes = &run.writes;
    match run.end {
        WriteEnd::Complete { failures_tolerated } => return Ok(failures_tolerated),
        WriteEnd::Failed { .. } => {}
        WriteEnd::Acknowledged { .. } => unreachable!("judged only once every write ended"),
    }
    let rule = io.config().ack_min_failures_tolerated;
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
