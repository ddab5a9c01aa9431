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
use futures_util::{StreamExt, stream};
use meta::{Layout, MetaError, MetaStore, NodeId, StripeId, StripeMeta, WriteAck};

use crate::data::cluster::membership::unix_now_ms;
use crate::data::config::DataConfig;
use crate::data::io::connections::NodeConnections;
use crate::data::io::stripe_io::StripeIo;
use crate::data::objects::delayed::DelayedReleases;
use crate::data::objects::holds::{ReadHold, StripeHolds, owned_stripes};
use crate::data::objects::packed::Packer;
use crate::data::read::Reads;
use crate::data::write::cut::cut_stripes;
use crate::data::write::late_copies::LateCopies;
use crate::data::write::pending::PendingWrites;
use crate::data::write::stripe_write::forget_placement;
use crate::data::{BodyStream, DataError, ObjectData, Written};

mod read;
mod running;
mod write;
pub use running::{DataClasses, RunningData};
pub use write::last_stripe_unit_bytes;

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

impl ErasureData {
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
}

impl ErasureData {}

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

impl ErasureData {}
