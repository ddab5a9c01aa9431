//! `ErasureData`: the erasure-coded [`ObjectData`] over storage nodes. Writes cut an object into
//! stripes of k data units, encode them, write all n units in parallel and only then record the
//! stripe (Sealed) in the metadata store; reads fetch only the byte ranges they need, degraded
//! through [`StripeIo`] when a unit is down, corrupt or slow; release deletes stripes. Must not
//! touch object metadata (keys, buckets), decide which units a degraded read uses (that is
//! [`super::plan`]) or keep object bytes after a write is acknowledged.
//!
//! Small objects are written the same way as large ones, as one stripe whose unit size is the
//! object split k ways (rounded up to 64 bytes): true packing into shared open stripes is not built.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use codec::ErasureCode;
use futures_util::{StreamExt, TryStreamExt, stream};
use meta::{Layout, MetaError, MetaStore, NodeId, NodeState, StripeId, StripeMeta, StripeSegment, StripeState};

use super::cluster::ClusterView;
use super::config::DataConfig;
use super::membership::{BackgroundTask, Membership};
use super::repair::{RepairService, RepairStatus};
use super::stripe_io::{NodeMap, StripeIo};
use super::{DataError, ObjectData};

/// Alignment of the unit size of an object's last stripe (the codec kernels' step).
pub const UNIT_ALIGN_BYTES: u64 = 64;

/// Stripes read per page when the placer's unit counts are loaded at start.
const STRIPE_PAGE: usize = 512;
/// Most stripes whose placements are counted at start (beyond that counts start from the sample).
const MAX_STRIPES_COUNTED: usize = 1 << 20;

/// The erasure-coded data path. Cheap to clone.
#[derive(Clone)]
pub struct ErasureData {
    io: Arc<StripeIo>,
    code: Arc<dyn ErasureCode>,
    code_name: String,
}

impl std::fmt::Debug for ErasureData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ErasureData").field("code", &self.code_name).field("io", &self.io).finish()
    }
}

/// One unit range an object read needs.
struct UnitPiece {
    stripe: Arc<StripeMeta>,
    code: Arc<dyn ErasureCode>,
    unit: usize,
    offset: u64,
    length: u64,
}

impl ErasureData {
    async fn read_piece(&self, nodes: &NodeMap, piece: UnitPiece) -> Result<Bytes, DataError> {
        self.io.read_data_range(nodes, &piece.stripe, piece.code.as_ref(), piece.unit, piece.offset, piece.length).await
    }

    /// A data path over the nodes registered in `meta`, with no background tasks (see
    /// [`super::start`] for membership and repair). Validates `config` and loads the per-node unit
    /// counts placement balances from the existing stripes.
    pub async fn new(config: DataConfig, meta: Arc<dyn MetaStore>) -> Result<Self, DataError> {
        config.validate()?;
        let cluster = Arc::new(ClusterView::new(meta, config.cluster_secret.clone(), config.node_rpc_timeout()));
        let code_name = config.code_spec()?.to_string();
        let io = Arc::new(StripeIo::new(cluster, config));
        let code = io.code(&code_name)?;
        let data = Self { io, code, code_name };
        data.count_existing_units().await?;
        Ok(data)
    }

    async fn count_existing_units(&self) -> Result<(), DataError> {
        let meta = self.io.cluster().meta();
        let mut after = None;
        let mut counted = 0;
        while counted < MAX_STRIPES_COUNTED {
            let page = meta.list_stripes(after, STRIPE_PAGE).await.map_err(|e| DataError::Meta(e.to_string()))?;
            let Some(last) = page.last() else { break };
            after = Some(last.id);
            counted += page.len();
            let mut placer = self.io.placer();
            for stripe in &page {
                stripe.placement.iter().for_each(|node| placer.adjust(*node, 1));
            }
        }
        Ok(())
    }

    /// The shared unit I/O (counters, corrupt reports, cluster view), for membership and repair.
    pub fn io(&self) -> &Arc<StripeIo> {
        &self.io
    }

    /// Encodes one stripe's worth of object bytes into n units of `unit_bytes` each (the data zero
    /// padded).
    fn encode(&self, chunk: &Bytes, unit_bytes: u64) -> Result<Vec<Bytes>, DataError> {
        let k = self.code.data_units();
        let unit_len = usize::try_from(unit_bytes).map_err(|_| DataError::Internal("unit too large".into()))?;
        assert!(chunk.len() <= k * unit_len, "a stripe holds at most k units of bytes");
        let data: Vec<Bytes> = (0..k)
            .map(|i| {
                let start = (i * unit_len).min(chunk.len());
                let end = ((i + 1) * unit_len).min(chunk.len());
                if end - start == unit_len {
                    chunk.slice(start..end)
                } else {
                    let mut padded = vec![0u8; unit_len];
                    padded[..end - start].copy_from_slice(&chunk[start..end]);
                    Bytes::from(padded)
                }
            })
            .collect();
        let mut parity = vec![vec![0u8; unit_len]; self.code.parity_units()];
        {
            let data_slices: Vec<&[u8]> = data.iter().map(|b| b.as_ref()).collect();
            let mut parity_slices: Vec<&mut [u8]> = parity.iter_mut().map(|p| p.as_mut_slice()).collect();
            self.code
                .encode(&data_slices, &mut parity_slices)
                .map_err(|e| DataError::Internal(format!("encode: {e}")))?;
        }
        Ok(data.into_iter().chain(parity.into_iter().map(Bytes::from)).collect())
    }

    /// Writes the n units of a new stripe to n distinct Up nodes (a unit whose write fails is
    /// placed elsewhere, at most `write_retries` more rounds), then records the stripe. On failure
    /// the units written are deleted and nothing references them.
    ///
    /// With fewer than n nodes up (but at least k), the stripe is written *degraded*: the data units
    /// and as many parity units as there are Up nodes are written, and the remaining parity units are
    /// recorded on distinct Down nodes without being written. The stripe then tolerates exactly as
    /// many further failures as the cluster has left before losing m nodes in all, so an
    /// acknowledged object still survives any m failures counted from a healthy cluster; and repair
    /// rebuilds those units when it rebuilds everything else those Down nodes held.
    async fn write_stripe(&self, units: Vec<Bytes>, unit_bytes: u64) -> Result<StripeMeta, DataError> {
        let n = units.len();
        let k = self.code.data_units();
        let nodes: NodeMap = self.io.cluster().node_map().await?;
        let node_list: Vec<_> = nodes.values().cloned().collect();
        let up = node_list.iter().filter(|node| node.state == NodeState::Up).count();
        let written_now = n.min(up);
        if written_now < k {
            return Err(DataError::Unavailable(format!("{up} storage nodes up, a stripe needs at least {k}")));
        }
        let mut placement = self
            .io
            .placer()
            .place(&node_list, written_now, &[], &[])
            .map_err(|e| DataError::Unavailable(e.to_string()))?;
        if written_now < n {
            let mut down: Vec<NodeId> =
                node_list.iter().filter(|node| node.state == NodeState::Down).map(|node| node.id).collect();
            down.sort();
            down.truncate(n - written_now);
            if down.len() < n - written_now {
                self.forget_placement(&placement);
                return Err(DataError::Unavailable(format!(
                    "{up} storage nodes up and {} down: a stripe needs {n} distinct nodes",
                    down.len()
                )));
            }
            let mut placer = self.io.placer();
            down.iter().for_each(|&node| placer.adjust(node, 1));
            drop(placer);
            placement.extend(down);
            self.io.counters().degraded_writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            metrics::counter!("lowtail_gateway_degraded_writes_total").increment(1);
        }
        debug_assert_eq!(placement.len(), n);
        let meta = self.io.cluster().meta();
        let id = match meta.allocate_stripe_id().await {
            Ok(id) => id,
            Err(error) => {
                self.forget_placement(&placement);
                return Err(DataError::Meta(error.to_string()));
            }
        };
        // Units written_now..n (parity only) stay unwritten on their Down nodes.
        let mut pending: Vec<usize> = (0..written_now).collect();
        let mut failed_nodes: Vec<NodeId> = Vec::new();
        let mut written: Vec<bool> = (0..n).map(|unit| unit >= written_now).collect();
        let retries = self.io.config().write_retries;
        let mut round = 0;
        while !pending.is_empty() {
            let results = futures_util::future::join_all(pending.iter().map(|&unit| {
                let node = &nodes[&placement[unit]];
                self.io.write_unit(node, id, unit, units[unit].clone())
            }))
            .await;
            let mut still_pending = Vec::new();
            for (&unit, result) in pending.iter().zip(results) {
                match result {
                    Ok(()) => written[unit] = true,
                    Err(error) => {
                        tracing::warn!(stripe = %id, unit, %error, "unit write failed");
                        failed_nodes.push(placement[unit]);
                        still_pending.push(unit);
                    }
                }
            }
            pending = still_pending;
            if pending.is_empty() {
                break;
            }
            let replacement = if round < retries {
                let peers: Vec<NodeId> = (0..n).filter(|u| !pending.contains(u)).map(|u| placement[u]).collect();
                let mut placer = self.io.placer();
                pending.iter().for_each(|&unit| placer.adjust(placement[unit], -1));
                placer.place(&node_list, pending.len(), &failed_nodes, &peers).map_err(|e| e.to_string())
            } else {
                pending.iter().for_each(|&unit| self.io.placer().adjust(placement[unit], -1));
                Err(format!("unit writes still failing after {retries} retries"))
            };
            match replacement {
                Ok(replacement) => {
                    self.io
                        .counters()
                        .write_retries
                        .fetch_add(pending.len() as u64, std::sync::atomic::Ordering::Relaxed);
                    for (&unit, node) in pending.iter().zip(replacement) {
                        placement[unit] = node;
                    }
                }
                Err(why) => {
                    let done: Vec<(usize, NodeId)> =
                        (0..written_now).filter(|&u| written[u]).map(|u| (u, placement[u])).collect();
                    self.io.delete_units_best_effort(&nodes, id, &done).await;
                    self.forget_placement(&done.iter().map(|(_, node)| *node).collect::<Vec<_>>());
                    return Err(DataError::Unavailable(format!("stripe {id}: {why}")));
                }
            }
            round += 1;
        }
        assert!(written.iter().all(|w| *w), "every unit on an Up node durable before the stripe is recorded");
        let stripe = StripeMeta {
            id,
            code: self.code_name.clone(),
            unit_bytes,
            placement: placement.clone(),
            state: StripeState::Sealed,
            unit_checksums: None,
            version: 0,
        };
        match meta.create_stripe(stripe).await {
            Ok(stored) => Ok(stored),
            Err(error) => {
                let all: Vec<(usize, NodeId)> = placement.iter().copied().enumerate().collect();
                self.io.delete_units_best_effort(&nodes, id, &all).await;
                self.forget_placement(&placement);
                Err(DataError::Meta(error.to_string()))
            }
        }
    }

    fn forget_placement(&self, placement: &[NodeId]) {
        let mut placer = self.io.placer();
        placement.iter().for_each(|node| placer.adjust(*node, -1));
    }

    /// Deletes a stripe's record, then its units (best effort). An absent stripe is not an error.
    async fn delete_stripe(&self, id: StripeId) -> Result<(), DataError> {
        let meta = self.io.cluster().meta();
        // The record goes first: a failed unit delete then leaves an orphan, never a dangling record.
        let stripe = match meta.delete_stripe(id).await {
            Ok(stripe) => stripe,
            Err(MetaError::NoSuchStripe(_)) => return Ok(()),
            Err(error) => return Err(DataError::Meta(error.to_string())),
        };
        self.forget_placement(&stripe.placement);
        let nodes = self.io.cluster().node_map().await?;
        let all: Vec<(usize, NodeId)> = stripe.placement.iter().copied().enumerate().collect();
        self.io.delete_units_best_effort(&nodes, id, &all).await;
        Ok(())
    }

    async fn read_striped(&self, segments: &[StripeSegment], range: Range<u64>) -> Result<Bytes, DataError> {
        let nodes = self.io.cluster().node_map().await?;
        // Every unit range the read needs, in object order.
        let mut pieces = Vec::new();
        for segment in segments {
            let segment_end = segment.object_offset_bytes + segment.length_bytes;
            if segment_end <= range.start || segment.object_offset_bytes >= range.end {
                continue;
            }
            let stripe = Arc::new(self.io.stripe(segment.stripe).await?);
            if stripe.unit_bytes != segment.unit_bytes {
                return Err(DataError::Internal(format!("stripe {} unit size disagrees with the layout", stripe.id)));
            }
            let code = self.io.code(&stripe.code)?;
            let k = code.data_units() as u64;
            assert!(segment.length_bytes <= k * segment.unit_bytes, "segment longer than its stripe");
            let start = range.start.max(segment.object_offset_bytes) - segment.object_offset_bytes;
            let end = range.end.min(segment_end) - segment.object_offset_bytes;
            let mut position = start;
            while position < end {
                let unit = position / segment.unit_bytes;
                let offset = position % segment.unit_bytes;
                let length = (segment.unit_bytes - offset).min(end - position);
                pieces.push(UnitPiece {
                    stripe: Arc::clone(&stripe),
                    code: Arc::clone(&code),
                    unit: unit as usize,
                    offset,
                    length,
                });
                position += length;
            }
        }
        let nodes = &nodes;
        let parts: Vec<Bytes> = stream::iter(pieces.into_iter().map(|piece| self.read_piece(nodes, piece)))
            .buffered(self.io.config().max_parallel_unit_reads)
            .try_collect()
            .await?;
        if parts.len() == 1 {
            return Ok(parts.into_iter().next().unwrap_or_default());
        }
        let mut out = BytesMut::with_capacity(usize::try_from(range.end - range.start).unwrap_or(0));
        parts.iter().for_each(|part| out.extend_from_slice(part));
        assert_eq!(out.len() as u64, range.end - range.start, "read assembled the whole range");
        Ok(out.freeze())
    }
}

/// Size of the object stored at `layout`.
pub fn layout_size(layout: &Layout) -> u64 {
    match layout {
        Layout::Packed { length_bytes, .. } => *length_bytes,
        Layout::Striped { segments } => segments.last().map_or(0, |s| s.object_offset_bytes + s.length_bytes),
        Layout::Composite { pieces } => pieces.last().map_or(0, |p| p.object_offset_bytes + p.length_bytes),
    }
}

/// `ceil(len / k)` rounded up to [`UNIT_ALIGN_BYTES`]: the unit size of a partial last stripe.
pub fn last_stripe_unit_bytes(len: u64, k: u64) -> u64 {
    len.div_ceil(k).div_ceil(UNIT_ALIGN_BYTES).max(1) * UNIT_ALIGN_BYTES
}

#[async_trait]
impl ObjectData for ErasureData {
    async fn write(&self, body: Bytes) -> Result<Layout, DataError> {
        let size = body.len() as u64;
        let limit = self.io.config().max_object_bytes;
        if size > limit {
            return Err(DataError::TooLarge { size, limit });
        }
        if body.is_empty() {
            return Ok(Layout::Striped { segments: Vec::new() });
        }
        let k = self.code.data_units();
        let up = self.io.cluster().nodes().await?.iter().filter(|node| node.state == NodeState::Up).count();
        if up < k {
            return Err(DataError::Unavailable(format!(
                "{up} storage nodes up, a stripe of {} needs at least {k}",
                self.code_name
            )));
        }
        let k = k as u64;
        let unit_bytes = self.io.config().unit_bytes;
        let stripe_bytes = k * unit_bytes;
        let mut segments: Vec<StripeSegment> = Vec::new();
        let mut offset = 0;
        while offset < size {
            let end = (offset + stripe_bytes).min(size);
            let chunk = body.slice(offset as usize..end as usize);
            let this_unit_bytes =
                if end - offset == stripe_bytes { unit_bytes } else { last_stripe_unit_bytes(end - offset, k) };
            let written = match self.encode(&chunk, this_unit_bytes) {
                Ok(units) => self.write_stripe(units, this_unit_bytes).await,
                Err(error) => Err(error),
            };
            match written {
                Ok(stripe) => segments.push(StripeSegment {
                    stripe: stripe.id,
                    unit_bytes: this_unit_bytes,
                    object_offset_bytes: offset,
                    length_bytes: end - offset,
                }),
                Err(error) => {
                    // Nothing half-written stays referenced: drop the stripes already recorded.
                    for segment in &segments {
                        if let Err(cleanup) = self.delete_stripe(segment.stripe).await {
                            tracing::warn!(stripe = %segment.stripe, %cleanup, "could not drop stripe of a failed write");
                        }
                    }
                    return Err(error);
                }
            }
            offset = end;
        }
        Ok(Layout::Striped { segments })
    }

    async fn read(&self, layout: &Layout, range: Range<u64>) -> Result<Bytes, DataError> {
        let size = layout_size(layout);
        if range.start > range.end || range.end > size {
            return Err(DataError::InvalidRange { start: range.start, end: range.end, size });
        }
        if range.is_empty() {
            return Ok(Bytes::new());
        }
        match layout {
            Layout::Striped { segments } => self.read_striped(segments, range).await,
            Layout::Composite { pieces } => {
                let mut out = BytesMut::with_capacity(usize::try_from(range.end - range.start).unwrap_or(0));
                for piece in pieces {
                    let piece_end = piece.object_offset_bytes + piece.length_bytes;
                    if piece_end <= range.start || piece.object_offset_bytes >= range.end {
                        continue;
                    }
                    let start = range.start.max(piece.object_offset_bytes) - piece.object_offset_bytes;
                    let end = range.end.min(piece_end) - piece.object_offset_bytes;
                    let part = Box::pin(self.read(&piece.layout, start..end)).await?;
                    out.extend_from_slice(&part);
                }
                Ok(out.freeze())
            }
            Layout::Packed { .. } => {
                Err(DataError::Internal("packed layouts are not written by the erasure-coded store yet".into()))
            }
        }
    }

    async fn release(&self, layout: &Layout) -> Result<(), DataError> {
        for stripe in layout.stripes() {
            self.delete_stripe(stripe).await?;
        }
        Ok(())
    }
}

/// The data path with membership and repair running beside it (what `lowtail gateway` holds).
#[derive(Debug)]
pub struct RunningData {
    /// The data path (hand clones to the S3 layer).
    pub data: ErasureData,
    /// The failure detector.
    pub membership: Arc<Membership>,
    /// The repair service.
    pub repair: Arc<RepairService>,
    tasks: Vec<BackgroundTask>,
}

impl RunningData {
    /// Repair progress, for `lowtail admin status`.
    pub fn repair_status(&self) -> RepairStatus {
        self.repair.status()
    }

    /// Stops membership and repair (the data path itself keeps working).
    pub async fn shutdown(self) {
        for task in self.tasks {
            task.shutdown().await;
        }
    }
}

impl ErasureData {
    /// [`ErasureData::new`] plus the membership and repair background tasks.
    pub async fn start(config: DataConfig, meta: Arc<dyn MetaStore>) -> Result<RunningData, DataError> {
        let membership_config = config.membership.clone();
        let repair_config = config.repair.clone();
        let data = Self::new(config, meta).await?;
        let membership = Arc::new(Membership::new(Arc::clone(data.io.cluster()), membership_config));
        let repair = Arc::new(RepairService::new(Arc::clone(&data.io), repair_config));
        let tasks = vec![Arc::clone(&membership).spawn(), Arc::clone(&repair).spawn()];
        Ok(RunningData { data, membership, repair, tasks })
    }
}
