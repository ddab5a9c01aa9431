//! The seam between the S3 layer and the erasure-coded data path: [`ObjectData`] stores and reads
//! object bytes and says where they live as a [`meta::Layout`]; the S3 layer records that layout in
//! the metadata store. Neither side knows the other's internals.
//!
//! Must not: touch object metadata (keys, buckets, ETags): that is the S3 layer's, through
//! [`meta::MetaStore`].

use async_trait::async_trait;
use bytes::Bytes;
use meta::Layout;
use std::ops::Range;

// The data path, one folder per layer, each calling only the ones listed before it: `config`
// (knobs), `io` (unit I/O on nodes or the backend), `cluster` (what the nodes are and are told),
// `read` (a unit range read, planned by the controller), `write` (a stripe's units written),
// `services` (repair, the mover, orphan collection), `objects` (objects as striped or packed
// stripes: the `ObjectData` the S3 layer calls).
pub mod cluster;
pub mod config;
pub mod io;
pub mod objects;
pub mod read;
pub mod services;
pub mod write;

pub use config::{DataConfig, MembershipConfig, OrphanConfig, PackedConfig, PendingConfig, RepairConfig};
pub use objects::erasure::ErasureData;
pub use objects::holds::ReadHold;

/// Locks `mutex`, taking the data over from a holder that panicked: the background services keep
/// only counters and bookkeeping behind their locks, which stay usable.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A metadata store error as the data path reports it.
pub(crate) fn meta_error(error: meta::MetaError) -> DataError {
    DataError::Meta(error.to_string())
}

/// What can go wrong storing or reading object bytes. The S3 layer maps these onto S3 errors
/// (`Unavailable` → 503 SlowDown / ServiceUnavailable, `InvalidRange` → 416, the rest → 500).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataError {
    /// Too few nodes are up to place or read the data (more than the code tolerates are down).
    #[error("not enough storage nodes available: {0}")]
    Unavailable(String),
    /// The requested byte range is not within the object.
    #[error("range {start}..{end} is outside an object of {size} bytes")]
    InvalidRange {
        /// First byte asked for.
        start: u64,
        /// One past the last byte asked for.
        end: u64,
        /// Object size.
        size: u64,
    },
    /// The object is larger than this gateway accepts in one write.
    #[error("object of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Bytes offered.
        size: u64,
        /// Most accepted.
        limit: u64,
    },
    /// The data cannot be rebuilt from what survives (more losses than the code corrects).
    #[error("data lost: {0}")]
    Lost(String),
    /// Metadata (stripe records) could not be read or written.
    #[error("metadata: {0}")]
    Meta(String),
    /// The body of a streamed write ended with an error (the sender's, not the store's).
    #[error("the body could not be read: {0}")]
    Body(String),
    /// Anything else, with context.
    #[error("{0}")]
    Internal(String),
}

/// How redundant a write's bytes were when it was acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Redundancy {
    /// Further node failures the bytes survive as acknowledged, whichever nodes fail (the least over
    /// their stripes).
    pub failures_tolerated: usize,
    /// What they survive once every unit is durable: the code's own tolerance.
    pub full: usize,
    /// Whether every unit short at the acknowledgement was still being written (the bucket's write
    /// ack rule acknowledged it early) rather than failed: the writer lands them in the background,
    /// repair if it stops. False when the bytes are full.
    pub pending: bool,
}

impl Redundancy {
    /// As redundant as the code makes them: nothing left for repair to restore.
    pub fn full(failures: usize) -> Self {
        Self { failures_tolerated: failures, full: failures, pending: false }
    }

    /// Whether the bytes were acknowledged with every unit durable.
    pub fn is_full(&self) -> bool {
        self.failures_tolerated >= self.full
    }

    /// `full`; `pending` when short only of units still being written; `degraded` when some unit
    /// could not be stored and repair owes it.
    pub fn state(&self) -> &'static str {
        match (self.is_full(), self.pending) {
            (true, _) => "full",
            (false, true) => "pending",
            (false, false) => "degraded",
        }
    }

    /// The lesser of two (the redundancy of bytes stored in both places): pending only when neither
    /// is degraded.
    pub fn min(self, other: Self) -> Self {
        let failures_tolerated = self.failures_tolerated.min(other.failures_tolerated);
        let full = self.full.min(other.full);
        let not_degraded = |r: &Self| r.is_full() || r.pending;
        let pending = failures_tolerated < full && not_degraded(&self) && not_degraded(&other);
        Self { failures_tolerated, full, pending }
    }
}

/// What a write stored: where the bytes live and how redundant they were at the acknowledgement
/// (below `full` after a degraded write, until repair restores the missing units).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Where the bytes live.
    pub layout: Layout,
    /// Their redundancy when the write returned.
    pub redundancy: Redundancy,
}

/// An object body as it arrives: chunks of any size, in order, ending with the body or with the
/// error that fails the write.
pub type BodyStream<'a> = futures_util::stream::BoxStream<'a, Result<Bytes, DataError>>;

/// Stores and reads object bytes. Implementations: the erasure-coded store over storage nodes, and
/// an in-memory one for tests of the layers above.
#[async_trait]
pub trait ObjectData: Send + Sync {
    /// Stores `body` and returns where it lives and how redundant it is. When this returns Ok the
    /// bytes survive the loss of any `redundancy.failures_tolerated` storage nodes from now on (the
    /// code's full tolerance unless the write was degraded, and never fewer than the configured
    /// durability rule allows), and repair brings them back to full: an acknowledged write is never
    /// lost within that guarantee.
    async fn write(&self, body: Bytes) -> Result<Written, DataError>;

    /// Stores a body that arrives as a stream, as [`write`](Self::write) stores a whole one, and
    /// acknowledges it by `ack` (a bucket's rule): below `all`, a stripe may return once the units
    /// landed survive the rule's failures, the rest recorded pending and finished in the background
    /// (`Written::redundancy` says so). An error from `body` (or running past the limits `write`
    /// has) fails the write, and nothing of it is kept. The erasure-coded store writes each stripe
    /// as soon as its bytes are in, so a large body is never held whole.
    async fn write_stream(&self, body: BodyStream<'_>, ack: meta::WriteAck) -> Result<Written, DataError>;

    /// Reads bytes `range` (within `0..size` of the object) of the object stored at `layout`,
    /// through a degraded read when a unit's node is down, slow or returns a corrupt unit.
    async fn read(&self, layout: &Layout, range: Range<u64>) -> Result<Bytes, DataError>;

    /// [`read`](Self::read) as the buffers the store read, in order and not joined: a body sent to
    /// a client needs no single buffer, and joining a 1 MiB object's six unit ranges was a copy of
    /// every byte a GET serves. Their lengths add up to the range's.
    async fn read_parts(&self, layout: &Layout, range: Range<u64>) -> Result<Vec<Bytes>, DataError> {
        Ok(vec![self.read(layout, range).await?])
    }

    /// Frees the space of a layout that no object references any more (after an overwrite, delete or
    /// aborted upload). Packed objects only mark their bytes dead until the stripe is compacted.
    /// Stripes under a [`ReadHold`] of this store are freed when the last hold on them ends; the
    /// erasure-coded store then keeps them `orphans.release_delay_ms` longer, for reads of the old
    /// layout through other gateways.
    async fn release(&self, layout: &Layout) -> Result<(), DataError>;

    /// Reads several whole objects as one request (EC-Store's multi-object read): yields `(i,
    /// object i's bytes as parts)` as each is read, in any order, each once. The erasure-coded
    /// store plans the stripes of its striped objects together, one merged task per node; other
    /// objects are read as [`read_parts`](Self::read_parts) reads them. The stream ends once every
    /// task the batch launched is resolved (late binding's extra reads after the last object) and
    /// the batch is recorded; dropped before then, it cancels what is still out and records nothing.
    fn read_batch<'a>(&'a self, layouts: &'a [Layout]) -> objects::batch::BatchStream<'a> {
        objects::batch::read_each(self, layouts)
    }

    /// Examines the stored bytes of `layout` after a read of them failed an end-to-end check: every
    /// unit of its stripes is read whole in the background, so that a unit whose blocks fail their
    /// checksums is found and repaired. Stores without units ignore it.
    fn examine(&self, layout: &Layout) {
        let _ = layout;
    }

    /// Hears that `stripes` were read together (plain GETs the S3 layer took for one request), for
    /// EC-Store's mover statistics. Stores without them ignore it.
    fn observe_coaccess(&self, stripes: &[meta::StripeId]) {
        let _ = stripes;
    }

    /// Keeps `layout`'s bytes readable on this store until the hold is dropped, even if the layout
    /// is released meanwhile: a long read (a body sent as it is read, a copy) that began before an
    /// overwrite or delete reads the old bytes to the end. Holds are per process: a release through
    /// another gateway is deferred only by its release delay.
    fn hold(&self, layout: &Layout) -> ReadHold;
}

#[cfg(test)]
mod tests {
    use super::Redundancy;

    #[test]
    fn redundancy_states_combine_to_the_worst() {
        let full = Redundancy::full(3);
        let pending = Redundancy { failures_tolerated: 0, full: 3, pending: true };
        let degraded = Redundancy { failures_tolerated: 1, full: 3, pending: false };
        assert_eq!((full.state(), pending.state(), degraded.state()), ("full", "pending", "degraded"));
        assert_eq!(full.min(full), full);
        assert_eq!(full.min(pending), pending);
        assert_eq!(pending.min(full), pending);
        let both = pending.min(degraded);
        assert_eq!((both.state(), both.failures_tolerated), ("degraded", 0));
        assert_eq!(degraded.min(pending).state(), "degraded");
    }
}
