//! `ErasureData`: the erasure-coded [`ObjectData`] over storage nodes. Writes cut an object into
//! stripes of k data units, encode them, write all n units in parallel and only then record the
//! stripe (Sealed) in the metadata store; reads fetch only the byte ranges they need, degraded
//! through [`StripeIo`] when a unit is down, corrupt or slow; release deletes stripes once their
//! holds end and `orphans.release_delay_ms` has passed ([`crate::data::objects::delayed`]). Must not
//! touch object metadata (keys, buckets), decide which units a degraded read uses (that is
//! [`crate::data::read::plan`]) or keep object bytes after a write is acknowledged.
//!
//! Objects up to `packed.max_object_bytes` go to the [`Packer`] (appended into a shared open
//! stripe); when it refuses (packing off, a replica node down, too many seals pending) they are
//! written like large ones, as one stripe whose unit size is the object split k ways.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use codec::ErasureCode;
use futures_util::{StreamExt, TryStreamExt, stream};
use meta::{Layout, MetaError, MetaStore, NodeId, NodeState, StripeId, StripeMeta, StripeSegment, WriteAck};

use crate::classes::{ClassId, ClassScheduling};
use crate::data::cluster::class_shares::SharesPublisher;
use crate::data::cluster::membership::unix_now_ms;
use crate::data::cluster::membership::{BackgroundTask, Membership};
use crate::data::config::DataConfig;
use crate::data::io::connections::NodeConnections;
use crate::data::io::stripe_io::{NodeMap, StripeIo};
use crate::data::objects::delayed::DelayedReleases;
use crate::data::objects::holds::{ReadHold, StripeHolds, owned_stripes};
use crate::data::objects::packed::{PackRefused, Packed, Packer};
use crate::data::read::Reads;
use crate::data::read::controller::{Controller, ControllerConfig};
use crate::data::services::mover::MoverService;
use crate::data::services::orphans::OrphanCollector;
use crate::data::services::repair::{RepairService, RepairStatus};
use crate::data::write::cut::{CutLimits, StripeCut, cut_stripes};
use crate::data::write::late_copies::{LateCopies, LateCopy};
use crate::data::write::pending::PendingWrites;
use crate::data::write::stripe_write::{
    EarlyWrites, Landing, UNIT_ALIGN_BYTES, UnitWrites, encode_units, forget_placement, judge, place_new_stripe,
    unit_checksums, write_units, write_units_early,
};
use crate::data::{BodyStream, DataError, ObjectData, Redundancy, Written};
use execution::WriteRule;

/// How often the packer checks its open stripe's age and retries failed seals.
const PACKER_TICK: Duration = Duration::from_millis(200);
/// How long shutdown waits for open stripes to be sealed, and then for pending units to land.
const SHUTDOWN_SEAL_TIMEOUT: Duration = Duration::from_secs(10);

/// Released stripes taken from the delay queue at once, and deleted at once of them.
const RELEASE_DELETE_BATCH: usize = 256;
const RELEASE_DELETE_PARALLEL: usize = 8;

/// Stripes read per page when the placer's unit counts are loaded at start.
const STRIPE_PAGE: usize = 512;
/// Most stripes whose placements are counted at start (beyond that counts start from the sample).
const MAX_STRIPES_COUNTED: usize = 1 << 20;

/// The erasure-coded data path. Cheap to clone.
#[derive(Clone)]
pub struct ErasureData {
    io: Arc<StripeIo>,
    reads: Arc<Reads>,
    code: Arc<dyn ErasureCode>,
    code_name: String,
    /// Failures a fully written stripe of `code` survives.
    full_failures_tolerated: usize,
    packer: Arc<Packer>,
    holds: Arc<StripeHolds>,
    delayed: Arc<DelayedReleases>,
    pending: Arc<PendingWrites>,
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

/// Consecutive pieces of one stripe, read as one row under a row-reading policy.
type RowGroup = Vec<UnitPiece>;

/// `pieces` (in object order) grouped by stripe: the pieces of one stripe are consecutive.
fn row_groups(pieces: Vec<UnitPiece>) -> Vec<RowGroup> {
    let mut groups: Vec<RowGroup> = Vec::new();
    for piece in pieces {
        match groups.last_mut() {
            Some(group) if group[0].stripe.id == piece.stripe.id => group.push(piece),
            _ => groups.push(vec![piece]),
        }
    }
    groups
}

impl ErasureData {
    /// The pieces of one stripe through one row read of the range that covers them all in every
    /// unit (FAST CLOUD's request: the same range of n units, done at the first k; `hedged`'s
    /// around a node it avoids), each piece cut from its unit's bytes.
    async fn read_row_group(&self, nodes: &NodeMap, mut row: RowGroup) -> Result<Vec<Bytes>, DataError> {
        if row.len() == 1 {
            let piece = row.pop().expect("one piece");
            return Ok(vec![self.read_piece(nodes, piece).await?]);
        }
        let start = row.iter().map(|p| p.offset).min().expect("a group has pieces");
        let end = row.iter().map(|p| p.offset + p.length).max().expect("a group has pieces");
        let units = row[0].unit..row[row.len() - 1].unit + 1;
        assert_eq!(units.len(), row.len(), "a stripe's pieces are of consecutive units");
        let (stripe, code) = (&row[0].stripe, &row[0].code);
        let read = self.reads.read_units(nodes, stripe, code.as_ref(), units, start, end - start).await?;
        Ok(row
            .iter()
            .zip(read)
            .map(|(piece, unit)| {
                let from = (piece.offset - start) as usize;
                unit.slice(from..from + piece.length as usize)
            })
            .collect())
    }

    /// Whether the read policy wants `row`'s pieces (of one stripe, more than one) read as one row.
    fn wants_row(&self, nodes: &NodeMap, row: &RowGroup) -> bool {
        if row.len() < 2 {
            return false;
        }
        let start = row.iter().map(|p| p.offset).min().expect("a group has pieces");
        let end = row.iter().map(|p| p.offset + p.length).max().expect("a group has pieces");
        let units = row[0].unit..row[row.len() - 1].unit + 1;
        self.reads.wants_row(nodes, &row[0].stripe, row[0].code.as_ref(), units, start, end - start)
    }

    async fn read_piece(&self, nodes: &NodeMap, piece: UnitPiece) -> Result<Bytes, DataError> {
        self.reads.read_range(nodes, &piece.stripe, piece.code.as_ref(), piece.unit, piece.offset, piece.length).await
    }

    /// A data path over the nodes registered in `meta`, with no background tasks (see
    /// [`crate::data::start`] for membership and repair). Validates `config` and loads the per-node unit
    /// counts placement balances from the existing stripes. Released stripes wait out
    /// `orphans.release_delay_ms` for the task [`ErasureData::start`] runs: without it they wait
    /// until the stripe collector deletes them.
    pub async fn new(config: DataConfig, meta: Arc<dyn MetaStore>) -> Result<Self, DataError> {
        config.validate()?;
        let delayed = Arc::new(DelayedReleases::new(Duration::from_millis(config.orphans.release_delay_ms)));
        let cluster = Arc::new(NodeConnections::new(
            meta,
            config.cluster_secret.clone(),
            config.node_rpc_timeout(),
            config.node_transport,
        ));
        let code_name = config.code_spec()?.to_string();
        let io = Arc::new(StripeIo::new(cluster, config));
        let code = io.code(&code_name)?;
        let reads = Arc::new(Reads::new(Arc::clone(&io)));
        let straggler = io.config().straggler_wait();
        if straggler.is_none() && io.config().pending.straggler.is_none() {
            tracing::info!(
                code = %code_name,
                ack_min_failures_tolerated = io.config().ack_min_failures_tolerated,
                "the straggler rule is off: all copies but one would survive fewer failures than the durability rule demands"
            );
        }
        let late_copies = LateCopies::new(io.config().pending.max_late_copies_per_node);
        let late = (straggler, Arc::clone(&late_copies));
        let packer = Packer::new(Arc::clone(&io), Arc::clone(&reads), (Arc::clone(&code), code_name.clone()), late);
        let full_failures_tolerated = io.config().full_failures_tolerated()?;
        let holds = Arc::new(StripeHolds::default());
        if let Some(backend) = io.backend() {
            backend.check().await?;
            crate::data::cluster::membership::register_slots(
                io.cluster().meta().as_ref(),
                code.total_units(),
                unix_now_ms(),
            )
            .await?;
        }
        let pending = Arc::new(PendingWrites::new(Arc::clone(&io), &io.config().pending, straggler, late_copies));
        let data = Self { io, reads, code, code_name, full_failures_tolerated, packer, holds, delayed, pending };
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

    /// The background half of early-acknowledged writes.
    pub fn pending(&self) -> &Arc<PendingWrites> {
        &self.pending
    }

    /// The packer of small objects.
    pub fn packer(&self) -> &Arc<Packer> {
        &self.packer
    }

    /// Released stripes waiting out their delay.
    pub fn delayed_releases(&self) -> &Arc<DelayedReleases> {
        &self.delayed
    }

    /// Deletes released stripes as their delay ends, until stopped. What still waits then is left
    /// to the stripe collector (it is unreferenced), like what a crash leaves.
    async fn delete_released(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let data = &self;
        loop {
            let due = self.delayed.take_due(tokio::time::Instant::now(), RELEASE_DELETE_BATCH);
            let more = due.len() == RELEASE_DELETE_BATCH;
            let deletes = stream::iter(due)
                .map(|(stripe, attempts)| async move {
                    let result = data.delete_stripe(stripe).await;
                    if let Err(error) = &result {
                        tracing::warn!(%stripe, %error, "could not delete a released stripe");
                    }
                    data.delayed.deleted(stripe, attempts, result.is_ok(), tokio::time::Instant::now());
                })
                .buffer_unordered(RELEASE_DELETE_PARALLEL)
                .collect::<()>();
            tokio::select! {
                _ = stop.changed() => break,
                () = deletes => {}
            }
            // After the deletes: a failed one was queued again.
            let next = if more { Some(tokio::time::Instant::now()) } else { self.delayed.next_due() };
            tokio::select! {
                _ = stop.changed() => break,
                () = self.delayed.queued(), if next.is_none() => {}
                () = tokio::time::sleep_until(next.unwrap_or_else(tokio::time::Instant::now)), if next.is_some() => {}
            }
        }
        let waiting = self.delayed.waiting();
        if waiting > 0 {
            tracing::info!(stripes = waiting, "released stripes left to the stripe collector at shutdown");
        }
    }

    /// Deletes `stripes` of released layouts a delay from now (at once when there is none or the
    /// queue is full).
    async fn delete_after_delay(&self, stripes: Vec<StripeId>) -> Result<(), DataError> {
        for stripe in self.delayed.schedule(stripes, tokio::time::Instant::now()) {
            self.delete_stripe(stripe).await?;
        }
        Ok(())
    }

    /// The shared unit I/O (counters, corrupt reports, cluster view), for membership and repair.
    pub fn io(&self) -> &Arc<StripeIo> {
        &self.io
    }

    /// Data-unit range reads, where the read controller is attached.
    pub fn reads(&self) -> &Arc<Reads> {
        &self.reads
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
                chunk.slice(start..end)
            })
            .collect();
        encode_units(self.code.as_ref(), data, unit_bytes)
    }

    /// Writes the n units of a new stripe and records it (Sealed); returns the record and the
    /// redundancy of its durable units. Units go to n distinct nodes, Up ones first; with fewer
    /// than n Up (but at least k) the rest are placed on Down nodes unwritten. A unit whose write
    /// fails is placed elsewhere ([`write_units`]); one no node can take is left missing. The
    /// stripe is recorded only if what is durable meets the durability rule ([`judge`]), with its
    /// missing units in the same transaction (so repair finds it); otherwise, and if recording
    /// fails, the units written are deleted and nothing references them.
    ///
    /// Under an early `ack` rule (`k+1`, `k`) it returns as soon as the units landed survive the
    /// rule's failures, and under the straggler rule (`pending.straggler`) once all units but one
    /// landed and that one is late: the stripe is recorded with the others missing and pending
    /// before it returns, and [`PendingWrites`] lands them in the background.
    async fn write_stripe(
        &self,
        units: Vec<Bytes>,
        unit_bytes: u64,
        ack: WriteAck,
        descriptor: Bytes,
    ) -> Result<(StripeMeta, Redundancy), DataError> {
        let n = units.len();
        let descriptors = vec![descriptor; n];
        let nodes: NodeMap = self.io.cluster().node_map().await?;
        let node_list: Vec<_> = nodes.values().cloned().collect();
        let (placement, to_write) = place_new_stripe(&self.io, &node_list, n, self.code.data_units())?;
        let meta = self.io.cluster().meta();
        let id = match meta.allocate_stripe_id().await {
            Ok(id) => id,
            Err(error) => {
                forget_placement(&self.io, &placement);
                return Err(DataError::Meta(error.to_string()));
            }
        };
        let rule =
            WriteRule { early_failures_tolerated: ack.early_failures_tolerated(), straggler: self.pending.straggler() };
        let quorum = (rule != WriteRule::default()).then(|| self.pending.try_reserve()).flatten();
        let writes = match quorum {
            None => write_units(&self.io, &nodes, &node_list, id, (&units, &descriptors), placement, &to_write).await,
            Some(permit) => {
                let code = self.code.as_ref();
                let described = (units.as_slice(), descriptors.as_slice());
                match write_units_early(&self.io, &nodes, code, id, described, (placement, &to_write), rule).await {
                    EarlyWrites::Acked { writes, landing, straggler } => {
                        self.pending.count_acked(straggler);
                        let landing = self.pending.admit(landing);
                        let checksums = unit_checksums(&units);
                        return self.record_early(nodes, (id, unit_bytes, checksums), writes, landing, permit).await;
                    }
                    EarlyWrites::Ended(writes) => {
                        self.retry_failed(&nodes, &node_list, id, (&units, &descriptors), writes, &to_write).await
                    }
                }
            }
        };
        let tolerated = match judge(&self.io, &nodes, self.code.as_ref(), id, &writes).await {
            Ok(tolerated) => tolerated,
            Err(error) => {
                forget_placement(&self.io, &writes.placement);
                return Err(error);
            }
        };
        let mut stripe = self.new_stripe_record(id, unit_bytes, writes.placement.clone(), unit_checksums(&units));
        if stripe.mark_missing(writes.missing(), unix_now_ms()) {
            self.io.counters().degraded_writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            metrics::counter!("lowtail_gateway_degraded_writes_total").increment(1);
        }
        match meta.create_stripe(stripe).await {
            Ok(stored) => {
                let redundancy =
                    Redundancy { failures_tolerated: tolerated, full: self.full_failures_tolerated, pending: false };
                Ok((stored, redundancy))
            }
            Err(error) => {
                self.io.delete_units_best_effort(&nodes, id, &writes.durable_units()).await;
                forget_placement(&self.io, &writes.placement);
                Err(DataError::Meta(error.to_string()))
            }
        }
    }

    /// The descriptor of the units of a stripe holding bytes `offset .. offset + length` of the
    /// write under way (labelled by the S3 layer: [`crate::data::io::descriptor::labelled`]).
    fn describe_segment(&self, unit_bytes: u64, offset: u64, length: u64) -> Bytes {
        crate::data::io::descriptor::UnitDescriptor {
            format: crate::data::io::descriptor::FORMAT,
            code: self.code_name.clone(),
            unit_bytes,
            written_ms: unix_now_ms(),
            holds: crate::data::io::descriptor::Holds::Segment {
                label: crate::data::io::descriptor::current(),
                object_offset_bytes: offset,
                length_bytes: length,
            },
        }
        .encode()
    }

    /// A new sealed stripe's record, every unit durable (the caller marks the missing ones), with
    /// the units' CRC-32Cs (what a returning node's copies are checked against).
    fn new_stripe_record(
        &self,
        id: StripeId,
        unit_bytes: u64,
        placement: Vec<NodeId>,
        unit_checksums: Vec<u32>,
    ) -> StripeMeta {
        let unit_checksums = Some(unit_checksums);
        StripeMeta { unit_checksums, ..StripeMeta::sealed(id, self.code_name.as_str(), unit_bytes, placement) }
    }

    /// After a first round that ended before an early rule was met: the failed units written
    /// again as under `all` ([`write_units`]: elsewhere after a retry), merged with what landed.
    async fn retry_failed(
        &self,
        nodes: &NodeMap,
        node_list: &[meta::NodeInfo],
        id: StripeId,
        described: (&[Bytes], &[Bytes]),
        first: UnitWrites,
        to_write: &[bool],
    ) -> UnitWrites {
        let failed: Vec<bool> = (0..described.0.len()).map(|unit| to_write[unit] && !first.durable[unit]).collect();
        if !failed.contains(&true) {
            return first;
        }
        let retried = write_units(&self.io, nodes, node_list, id, described, first.placement, &failed).await;
        let durable = (0..described.0.len()).map(|unit| first.durable[unit] || retried.durable[unit]).collect();
        UnitWrites { placement: retried.placement, durable }
    }

    /// Records a stripe acknowledged early, its `landing` units (and any never written) missing and
    /// pending, then hands the landing writes to [`PendingWrites`]. If recording fails, the write
    /// fails and every unit is deleted once its write has ended.
    async fn record_early(
        &self,
        nodes: NodeMap,
        (id, unit_bytes, unit_checksums): (StripeId, u64, Vec<u32>),
        writes: UnitWrites,
        landing: Vec<(Landing, LateCopy)>,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<(StripeMeta, Redundancy), DataError> {
        let tolerated = self.code.failures_tolerated(&writes.durable).expect("acknowledged early only when decodable");
        let now_ms = unix_now_ms();
        let mut stripe = self.new_stripe_record(id, unit_bytes, writes.placement.clone(), unit_checksums);
        stripe.mark_missing(writes.missing(), now_ms);
        // With every late unit dropped nothing lands: the stripe is degraded, repair's at once.
        if !landing.is_empty() {
            stripe.pending_until_ms = Some(self.pending.pending_until_ms(now_ms));
            stripe.pending_writer = Some(self.io.incarnation().to_string());
        }
        // Pending, not degraded, when every unit short is one still landing.
        let pending = writes.missing().len() == landing.len();
        match self.io.cluster().meta().create_stripe(stripe).await {
            Ok(stored) => {
                if !landing.is_empty() {
                    self.pending.finish(nodes, stored.clone(), landing, permit);
                }
                Ok((stored, Redundancy { failures_tolerated: tolerated, full: self.full_failures_tolerated, pending }))
            }
            Err(error) => {
                let io = Arc::clone(&self.io);
                forget_placement(&io, &writes.placement);
                let mut written = writes.durable_units();
                tokio::spawn(crate::classes::carried(async move {
                    for ((unit, node, handle), _place) in landing {
                        if let Ok(Ok(())) = handle.await {
                            written.push((unit, node));
                        }
                    }
                    io.delete_units_best_effort(&nodes, id, &written).await;
                    drop(permit);
                }));
                Err(DataError::Meta(error.to_string()))
            }
        }
    }

    /// Deletes a stripe's record, then its units (best effort), and returns the record deleted;
    /// `None` when there was none. The caller knows nothing references the stripe: [`Self::release`]
    /// for a layout no object holds any more, the stripe collector for a stripe none has held for
    /// its grace period.
    pub async fn delete_stripe(&self, id: StripeId) -> Result<Option<StripeMeta>, DataError> {
        let meta = self.io.cluster().meta();
        // The record goes first: a failed unit delete then leaves an orphan, never a dangling record.
        let stripe = match meta.delete_stripe(id).await {
            Ok(stripe) => stripe,
            Err(MetaError::NoSuchStripe(_)) => return Ok(None),
            Err(error) => return Err(DataError::Meta(error.to_string())),
        };
        forget_placement(&self.io, &stripe.placement);
        let nodes = self.io.cluster().node_map().await?;
        let all: Vec<(usize, NodeId)> = stripe.placement.iter().copied().enumerate().collect();
        self.io.delete_units_best_effort(&nodes, id, &all).await;
        Ok(Some(stripe))
    }

    async fn read_striped(&self, segments: &[StripeSegment], range: Range<u64>) -> Result<Vec<Bytes>, DataError> {
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
        // Each stripe's pieces as one row read where the policy reads rows or wants this one as
        // a row (around a node it avoids), else piece by piece.
        let mut reads: Vec<RowGroup> = Vec::new();
        for row in row_groups(pieces) {
            if self.reads.reads_rows() || self.wants_row(nodes, &row) {
                reads.push(row);
            } else {
                reads.extend(row.into_iter().map(|piece| vec![piece]));
            }
        }
        let parts: Vec<Bytes> = stream::iter(reads.into_iter().map(|row| self.read_row_group(nodes, row)))
            .buffered(self.io.config().max_parallel_unit_reads)
            .try_collect::<Vec<Vec<Bytes>>>()
            .await?
            .into_iter()
            .flatten()
            .collect();
        let read: usize = parts.iter().map(Bytes::len).sum();
        assert_eq!(read as u64, range.end - range.start, "the unit ranges cover the whole range");
        Ok(parts)
    }
}

/// Runs the futures `source` yields, at most `limit` at once, and returns their outputs in the
/// order they were yielded. `source` is pulled only while fewer than `limit` run, and the ones
/// running are driven while it is awaited (a body arriving slowly does not stall the stripes already
/// cut from it). `may_start(i)` is asked before the i-th starts. After its first refusal, the
/// first error from `source` or the first failure, nothing more is pulled or started, the ones in
/// flight are awaited (never dropped halfway), and the error comes back with every output that did
/// succeed, so the caller can undo them. (`buffered` with `try_collect`, as reads use, would drop
/// the writes still in flight at the first error, leaving units and stripe records for the
/// collectors instead of undoing them now.)
async fn in_order_bounded<T, Fut>(
    limit: usize,
    mut may_start: impl FnMut(usize) -> Result<(), DataError>,
    source: impl futures_util::Stream<Item = Result<Fut, DataError>>,
) -> Result<Vec<T>, (DataError, Vec<T>)>
where
    Fut: std::future::Future<Output = Result<T, DataError>>,
{
    assert!(limit > 0, "at least one in flight");
    let mut source = std::pin::pin!(source);
    let mut in_flight = futures_util::stream::FuturesUnordered::new();
    let mut outputs: Vec<Option<T>> = Vec::new();
    let (mut source_ended, mut failure) = (false, None);
    // Each round takes one item from `source` or finishes one future. `source` is finite (a
    // body's stripes, bounded by the size limit and the write deadline), so this ends.
    loop {
        let may_pull = failure.is_none() && !source_ended && in_flight.len() < limit;
        if !may_pull && in_flight.is_empty() {
            break;
        }
        tokio::select! {
            // Finished writes first: their slots are what the next pull waits for.
            biased;
            Some((index, output)) = in_flight.next(), if !in_flight.is_empty() => match output {
                Ok(value) => outputs[index] = Some(value),
                Err(error) => {
                    failure.get_or_insert(error);
                }
            },
            item = source.next(), if may_pull => match item {
                None => source_ended = true,
                Some(Err(error)) => failure = Some(error),
                Some(Ok(future)) => {
                    let index = outputs.len();
                    match may_start(index) {
                        Err(refused) => failure = Some(refused),
                        Ok(()) => {
                            outputs.push(None);
                            in_flight.push(async move { (index, future.await) });
                        }
                    }
                }
            },
        }
    }
    assert!(in_flight.is_empty(), "every started future was awaited");
    match failure {
        None => Ok(outputs.into_iter().map(|output| output.expect("every started future finished")).collect()),
        Some(error) => Err((error, outputs.into_iter().flatten().collect())),
    }
}

/// `ceil(len / k)` rounded up to [`UNIT_ALIGN_BYTES`]: the unit size of a partial last stripe.
pub fn last_stripe_unit_bytes(len: u64, k: u64) -> u64 {
    len.div_ceil(k).div_ceil(UNIT_ALIGN_BYTES).max(1) * UNIT_ALIGN_BYTES
}

impl ErasureData {
    /// Stores a body given whole, acknowledged by `ack`: small ones packed (their m + 1 replicas
    /// durable, or all but one late one under the straggler rule, before any rule acknowledges
    /// them), the rest striped.
    async fn write_whole(&self, body: Bytes, ack: WriteAck) -> Result<Written, DataError> {
        let size = body.len() as u64;
        let limit = self.io.config().max_object_bytes;
        if size > limit {
            return Err(DataError::TooLarge { size, limit });
        }
        // An empty object is packed too (a replica of no bytes, described like any other object),
        // so that it leaves a trace on the nodes for a metadata rebuild; striped, it has no stripe.
        let packing_max = self.io.config().packed.max_object_bytes;
        if packing_max > 0 && size <= packing_max {
            match self.packer.write(&body).await {
                // m + 1 replicas survive m failures, as the code does once sealed.
                Ok(Packed { layout, late_copy: false }) => {
                    return Ok(Written { layout, redundancy: self.full_redundancy() });
                }
                Ok(Packed { layout, late_copy: true }) => {
                    self.pending.count_acked(true);
                    let full = self.full_failures_tolerated;
                    let redundancy = Redundancy { failures_tolerated: full.saturating_sub(1), full, pending: true };
                    return Ok(Written { layout, redundancy });
                }
                Err(PackRefused::NotNow(why)) => tracing::debug!(%why, "object striped instead of packed"),
                Err(PackRefused::Failed(error)) => {
                    tracing::info!(%error, "packing failed; object striped instead");
                }
            }
        }
        if body.is_empty() {
            return Ok(Written {
                layout: Layout::Striped { segments: Vec::new() },
                redundancy: self.full_redundancy(),
            });
        }
        let deadline = self.write_deadline();
        // Cutting a body given whole slices it: no copy.
        let cuts = cut_stripes(stream::iter([Ok(body)]).boxed(), self.cut_limits(deadline));
        self.write_striped(cuts, deadline, ack).await
    }

    /// The redundancy of bytes whose every unit is durable.
    fn full_redundancy(&self) -> Redundancy {
        Redundancy::full(self.full_failures_tolerated)
    }

    /// When a write starting now must be done (`write_deadline_ms`).
    fn write_deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_millis(self.io.config().write_deadline_ms)
    }

    /// How a body of this data path is cut into stripes, for a write that must be done by `deadline`.
    fn cut_limits(&self, deadline: tokio::time::Instant) -> CutLimits {
        let config = self.io.config();
        CutLimits {
            stripe_bytes: self.code.data_units() as u64 * config.unit_bytes,
            max_body_bytes: config.max_object_bytes,
            deadline,
        }
    }

    /// Writes the stripes `cuts` yields, up to `max_parallel_stripe_writes` at once, and returns the
    /// layout of them all. Past `deadline` no stripe is started: the stripe collector's grace
    /// assumes no stripe record waits longer than this (plus one stripe's write) for its object's
    /// commit. On any failure every stripe written is dropped again, and the error comes back.
    async fn write_striped(
        &self,
        cuts: impl futures_util::Stream<Item = Result<StripeCut, DataError>> + Send,
        deadline: tokio::time::Instant,
        ack: WriteAck,
    ) -> Result<Written, DataError> {
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
        let write_deadline_ms = self.io.config().write_deadline_ms;
        let may_start = |i: usize| {
            if i > 0 && tokio::time::Instant::now() > deadline {
                return Err(DataError::Unavailable(format!(
                    "the write ran past write_deadline_ms ({write_deadline_ms} ms) after {i} stripes; nothing was kept"
                )));
            }
            Ok(())
        };
        let writes = cuts.map(|cut| {
            cut.map(|cut| async move {
                let length = cut.bytes.len() as u64;
                // Only an object's last stripe is short; its units are the rest split k ways.
                let this_unit_bytes =
                    if length == k * unit_bytes { unit_bytes } else { last_stripe_unit_bytes(length, k) };
                let units = self.encode(&cut.bytes, this_unit_bytes)?;
                let descriptor = self.describe_segment(this_unit_bytes, cut.offset_bytes, length);
                let (stripe, redundancy) = self.write_stripe(units, this_unit_bytes, ack, descriptor).await?;
                let segment = StripeSegment {
                    stripe: stripe.id,
                    unit_bytes: this_unit_bytes,
                    object_offset_bytes: cut.offset_bytes,
                    length_bytes: length,
                };
                Ok((segment, redundancy))
            })
        });
        let parallel = self.io.config().max_parallel_stripe_writes;
        match in_order_bounded(parallel, may_start, writes).await {
            Ok(written) => {
                let redundancy = written.iter().map(|(_, r)| *r).fold(self.full_redundancy(), Redundancy::min);
                let segments = written.into_iter().map(|(segment, _)| segment).collect();
                Ok(Written { layout: Layout::Striped { segments }, redundancy })
            }
            Err((error, written)) => {
                // Nothing half-written stays referenced: drop the stripes already recorded.
                for (segment, _) in written {
                    if let Err(cleanup) = self.delete_stripe(segment.stripe).await {
                        tracing::warn!(stripe = %segment.stripe, %cleanup, "could not drop stripe of a failed write");
                    }
                }
                Err(error)
            }
        }
    }
}

#[async_trait]
impl ObjectData for ErasureData {
    async fn write(&self, body: Bytes) -> Result<Written, DataError> {
        self.write_whole(body, WriteAck::All).await
    }

    async fn write_stream(&self, body: BodyStream<'_>, ack: WriteAck) -> Result<Written, DataError> {
        // The deadline counts from the first byte awaited: receiving the body is part of the write.
        let deadline = self.write_deadline();
        let mut cuts = cut_stripes(body, self.cut_limits(deadline)).peekable();
        let first = match cuts.next().await {
            None => return self.write_whole(Bytes::new(), ack).await,
            Some(first) => first?,
        };
        match std::pin::Pin::new(&mut cuts).peek().await {
            // The whole body fits one stripe: written as a body given whole (packed if small).
            None => self.write_whole(first.bytes, ack).await,
            Some(Err(_)) => Err(cuts.next().await.expect("peeked").expect_err("peeked an error")),
            Some(Ok(_)) => self.write_striped(stream::iter([Ok(first)]).chain(cuts), deadline, ack).await,
        }
    }

    async fn read(&self, layout: &Layout, range: Range<u64>) -> Result<Bytes, DataError> {
        self.read_parts(layout, range).await.map(node::client::joined)
    }

    async fn read_parts(&self, layout: &Layout, range: Range<u64>) -> Result<Vec<Bytes>, DataError> {
        let size = layout.size_bytes();
        if range.start > range.end || range.end > size {
            return Err(DataError::InvalidRange { start: range.start, end: range.end, size });
        }
        if range.is_empty() {
            return Ok(Vec::new());
        }
        match layout {
            Layout::Striped { segments } => self.read_striped(segments, range).await,
            Layout::Composite { pieces } => {
                let mut out = Vec::new();
                for piece in pieces {
                    let piece_end = piece.object_offset_bytes + piece.length_bytes;
                    if piece_end <= range.start || piece.object_offset_bytes >= range.end {
                        continue;
                    }
                    let start = range.start.max(piece.object_offset_bytes) - piece.object_offset_bytes;
                    let end = range.end.min(piece_end) - piece.object_offset_bytes;
                    out.extend(Box::pin(self.read_parts(&piece.layout, start..end)).await?);
                }
                Ok(out)
            }
            Layout::Packed { stripe, unit, offset_bytes, replica_unit, .. } => {
                Ok(vec![self.packer.read(*stripe, *unit, *offset_bytes, *replica_unit, range).await?])
            }
        }
    }

    async fn release(&self, layout: &Layout) -> Result<(), DataError> {
        // A packed object's stripe holds other objects: its bytes just become dead. Held stripes
        // wait for their last read on this gateway to end, then all wait out the delay for reads
        // on the others.
        self.delete_after_delay(self.holds.release(owned_stripes(layout))).await
    }

    fn read_batch<'a>(&'a self, layouts: &'a [Layout]) -> crate::data::objects::batch::BatchStream<'a> {
        match self.reads.controller() {
            // Backend mode has no nodes to merge tasks on: each object is read on its own.
            Some(controller) if self.io.backend().is_none() => {
                crate::data::objects::batch::read_planned(self, &self.io, &self.reads, controller, layouts)
            }
            _ => crate::data::objects::batch::read_each(self, layouts),
        }
    }

    fn examine(&self, layout: &Layout) {
        let (io, stripes) = (Arc::clone(&self.io), layout.stripes());
        tokio::spawn(async move {
            let Ok(nodes) = io.cluster().node_map().await else { return };
            for id in stripes {
                let Ok(stripe) = io.stripe(id).await else { continue };
                for unit in (0..stripe.placement.len()).filter(|&unit| !stripe.is_missing(unit)) {
                    // A unit that fails a block checksum is reported to repair by the read itself.
                    if let Err(error) = io.read_unit(&nodes, &stripe, unit, 0, stripe.unit_bytes).await {
                        tracing::warn!(stripe = %id, unit, %error, "a unit examined after a failed end-to-end check");
                    }
                }
            }
        });
    }

    fn observe_coaccess(&self, stripes: &[StripeId]) {
        if let Some(controller) = self.reads.controller() {
            controller.observe_coaccess(stripes);
        }
    }

    fn hold(&self, layout: &Layout) -> ReadHold {
        let stripes = owned_stripes(layout);
        if stripes.is_empty() {
            return ReadHold::none();
        }
        self.holds.hold(&stripes);
        let data = self.clone();
        ReadHold::new(move || {
            let doomed = data.holds.unhold(&stripes);
            if doomed.is_empty() {
                return;
            }
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                tracing::warn!(
                    stripes = doomed.len(),
                    "released stripes outlived the runtime; the stripe collector deletes them"
                );
                return;
            };
            runtime.spawn(async move {
                if let Err(error) = data.delete_after_delay(doomed).await {
                    tracing::warn!(%error, "could not delete a released stripe after its last read");
                }
            });
        })
    }
}

/// The packer's timer: seals its open stripe when old enough, retries failed seals.
fn packer_ticks(packer: Arc<Packer>) -> BackgroundTask {
    BackgroundTask::spawn("packer", move |mut stop| async move {
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                () = tokio::time::sleep(PACKER_TICK) => packer.tick().await,
            }
        }
    })
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
    /// The orphan collector.
    pub orphans: Arc<OrphanCollector>,
    /// EC-Store's mover, once a controller is attached (over storage nodes).
    pub mover: Option<Arc<MoverService>>,
    tasks: Vec<BackgroundTask>,
}

impl RunningData {
    /// Attaches a read controller built from `config` (every data-unit read of a sealed stripe then
    /// follows its policy) and starts its lazy-refresh task. Once per data path.
    pub fn start_controller(&mut self, config: &ControllerConfig) -> Result<Arc<Controller>, DataError> {
        let admission = self.data.io.config().admission;
        let controller = Arc::new(Controller::with_admission(config, &self.data.code_name, admission)?);
        if self.data.io.backend().is_some() {
            controller.forbid_probing()?;
        }
        self.data.reads.attach_controller(Arc::clone(&controller))?;
        let (refresher, io) = (Arc::clone(&controller), Arc::clone(&self.data.io));
        // Over an S3 backend there are no nodes to tell class shares to.
        let shares = self
            .data
            .io
            .backend()
            .is_none()
            .then(|| Arc::new(SharesPublisher::new(self.data.io.config().gateway_id())));
        self.tasks
            .push(BackgroundTask::spawn("controller-refresh", move |stop| refresher.run_refresh(io, shares, stop)));
        if self.data.io.backend().is_none() {
            let (access, io) = (Arc::clone(&controller), Arc::clone(&self.data.io));
            self.tasks.push(BackgroundTask::spawn("controller-access", move |stop| access.run_access(io, stop)));
            let mover = Arc::new(MoverService::new(
                Arc::clone(&self.data.io),
                Arc::clone(&controller),
                Arc::clone(&self.repair),
                config.mover.clone(),
            ));
            self.tasks.push(Arc::clone(&mover).spawn());
            self.mover = Some(mover);
        }
        Ok(controller)
    }

    /// Repair progress, for `lowtail admin status`.
    pub fn repair_status(&self) -> RepairStatus {
        self.repair.status()
    }

    /// Stops membership, repair and the packer's timer, then seals the open stripes and waits for
    /// the units of early-acknowledged writes to land (both bounded: an open stripe left behind is
    /// sealed from its replicas by the next start, a pending unit is rebuilt by repair after its
    /// deadline).
    pub async fn shutdown(self) {
        for task in self.tasks {
            task.shutdown().await;
        }
        if let Err(error) = self.data.packer.flush(SHUTDOWN_SEAL_TIMEOUT).await {
            tracing::warn!(%error, "open stripes left to be sealed at the next start");
        }
        if !self.data.pending.drain(SHUTDOWN_SEAL_TIMEOUT).await {
            let left = self.data.pending.status().stripes_in_flight;
            tracing::warn!(
                stripes = left,
                "early-acknowledged stripes still landing: repair finishes them after their deadline"
            );
        }
    }
}

/// What the data path needs to know of the latency classes (`crate::classes`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DataClasses {
    /// The class of node calls made outside any request: the worst class.
    pub background: ClassId,
    /// What membership tells every node to do with the classes.
    pub scheduling: ClassScheduling,
}

impl ErasureData {
    /// [`ErasureData::new`] plus the membership and repair background tasks, with one latency
    /// class served first come first served (the nodes' behaviour without classes).
    pub async fn start(config: DataConfig, meta: Arc<dyn MetaStore>) -> Result<RunningData, DataError> {
        Self::start_classed(config, meta, DataClasses::default()).await
    }

    /// [`ErasureData::start`] with `classes`: background work in their background class, and the
    /// nodes told their scheduling as membership finds them.
    pub async fn start_classed(
        config: DataConfig,
        meta: Arc<dyn MetaStore>,
        classes: DataClasses,
    ) -> Result<RunningData, DataError> {
        let membership_config = config.membership.clone();
        let repair_config = config.repair.clone();
        let orphan_config = config.orphans.clone();
        let data = Self::new(config, meta).await?;
        // Before any background work starts, so none of it runs in a better class.
        data.io.cluster().set_background_class(classes.background);
        match data.packer.recover().await {
            Ok(0) => {}
            Ok(stripes) => tracing::info!(stripes, "sealing open stripes left by the previous run"),
            Err(error) => tracing::warn!(%error, "open stripes of the previous run not recovered yet"),
        }
        let membership = Arc::new(Membership::new(Arc::clone(data.io.cluster()), membership_config));
        membership.set_class_scheduling(classes.scheduling);
        let repair = Arc::new(RepairService::new(Arc::clone(&data.io), repair_config));
        let orphans = Arc::new(OrphanCollector::new(Arc::clone(&data.io), orphan_config));
        let mut tasks = vec![Arc::clone(&repair).spawn()];
        // Over an S3 backend there are no nodes to probe, and nothing is packed: repair (of units
        // whose write or read failed) and the orphan collector (of keys no stripe records) run.
        if data.io.backend().is_none() {
            tasks.push(Arc::clone(&membership).spawn());
            tasks.push(packer_ticks(Arc::clone(&data.packer)));
        }
        tasks.extend(Arc::clone(&orphans).spawn());
        if !data.delayed.delay().is_zero() {
            let deleter = data.clone();
            tasks.push(BackgroundTask::spawn("release-delay", move |stop| deleter.delete_released(stop)));
        }
        Ok(RunningData { data, membership, repair, orphans, mover: None, tasks })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// What a run of [`in_order_bounded`] did: how many ran at once at most, which started, and
    /// how many are still running.
    #[derive(Default)]
    struct Trace {
        running: usize,
        most_running: usize,
        started: Vec<usize>,
    }

    /// A job that yields more the lower its index (so later ones finish first) and fails at `fail`.
    async fn job(trace: &Mutex<Trace>, index: usize, count: usize, fail: Option<usize>) -> Result<usize, DataError> {
        {
            let mut trace = trace.lock().unwrap();
            trace.running += 1;
            trace.most_running = trace.most_running.max(trace.running);
            trace.started.push(index);
        }
        for _ in 0..(count - index) {
            tokio::task::yield_now().await;
        }
        trace.lock().unwrap().running -= 1;
        if fail == Some(index) { Err(DataError::Unavailable(format!("job {index}"))) } else { Ok(index * 10) }
    }

    /// `count` jobs as a source stream.
    fn jobs<'a>(
        trace: &'a Mutex<Trace>,
        count: usize,
        fail: Option<usize>,
    ) -> impl futures_util::Stream<Item = Result<impl Future<Output = Result<usize, DataError>> + 'a, DataError>> + 'a
    {
        stream::iter((0..count).map(move |i| Ok(job(trace, i, count, fail))))
    }

    #[tokio::test]
    async fn outputs_come_back_in_order_with_at_most_the_limit_in_flight() {
        let trace = Mutex::new(Trace::default());
        let outputs = in_order_bounded(3, |_| Ok(()), jobs(&trace, 10, None)).await.unwrap();
        assert_eq!(outputs, (0..10).map(|i| i * 10).collect::<Vec<_>>());
        let trace = trace.into_inner().unwrap();
        assert_eq!((trace.most_running, trace.running), (3, 0));
        let trace = Mutex::new(Trace::default());
        in_order_bounded(1, |_| Ok(()), jobs(&trace, 5, None)).await.unwrap();
        assert_eq!(trace.into_inner().unwrap().most_running, 1, "a limit of 1 runs one after another");
    }

    #[tokio::test]
    async fn a_failure_stops_new_starts_awaits_the_rest_and_returns_what_succeeded() {
        let trace = Mutex::new(Trace::default());
        let (error, mut done) = in_order_bounded(3, |_| Ok(()), jobs(&trace, 10, Some(1))).await.unwrap_err();
        assert!(error.to_string().contains("job 1"), "{error}");
        let trace = trace.into_inner().unwrap();
        assert_eq!(trace.running, 0, "nothing left running");
        // Jobs 0..3 start; 2 finishes first and frees a slot for 3, then 1 fails: 4 never starts.
        assert_eq!(trace.started, vec![0, 1, 2, 3]);
        done.sort_unstable();
        assert_eq!(done, vec![0, 20, 30], "every success is handed back to be undone");
    }

    #[tokio::test]
    async fn a_refused_start_ends_the_run_after_the_ones_in_flight() {
        let trace = Mutex::new(Trace::default());
        let refuse = |i: usize| if i == 2 { Err(DataError::Unavailable("deadline".into())) } else { Ok(()) };
        let (error, done) = in_order_bounded(4, refuse, jobs(&trace, 6, None)).await.unwrap_err();
        assert!(error.to_string().contains("deadline"), "{error}");
        assert_eq!(trace.into_inner().unwrap().started, vec![0, 1]);
        assert_eq!(done, vec![0, 10]);
    }

    #[tokio::test]
    async fn an_error_from_the_source_ends_the_run_after_the_ones_in_flight() {
        let trace = Mutex::new(Trace::default());
        let source = jobs(&trace, 6, None).take(2).chain(stream::iter([Err(DataError::Body("reset".into()))]));
        let (error, done) = in_order_bounded(4, |_| Ok(()), source).await.unwrap_err();
        assert_eq!(error, DataError::Body("reset".into()));
        assert_eq!(trace.into_inner().unwrap().running, 0, "nothing left running");
        assert_eq!(done, vec![0, 10]);
    }

    #[tokio::test]
    async fn futures_in_flight_run_while_the_source_waits() {
        // The source's second item waits for the first future to finish: a helper that awaited
        // the source alone while it had room would never finish.
        let (finished, first_done) = tokio::sync::oneshot::channel::<()>();
        let first = futures_util::FutureExt::boxed(async move {
            tokio::task::yield_now().await;
            finished.send(()).expect("the source waits");
            Ok(1)
        });
        let source = stream::iter([Ok(first)]).chain(stream::once(async move {
            first_done.await.expect("the first future finished");
            Ok(futures_util::FutureExt::boxed(async { Ok(2) }))
        }));
        let run = in_order_bounded(2, |_| Ok(()), source);
        let outputs = tokio::time::timeout(Duration::from_secs(10), run).await.expect("no deadlock").unwrap();
        assert_eq!(outputs, vec![1, 2]);
    }
}
