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

pub mod cluster;
pub mod config;
pub mod controller;
pub mod cut;
pub mod delayed;
pub mod erasure;
pub mod holds;
pub mod lease;
pub mod membership;
pub mod memory;
pub mod orphans;
pub mod packed;
pub mod placement;
pub mod plan;
pub mod repair;
pub mod stripe_io;

pub use config::{DataConfig, MembershipConfig, OrphanConfig, PackedConfig, RepairConfig};
pub use erasure::ErasureData;
pub use holds::ReadHold;

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

/// An object body as it arrives: chunks of any size, in order, ending with the body or with the
/// error that fails the write.
pub type BodyStream<'a> = futures_util::stream::BoxStream<'a, Result<Bytes, DataError>>;

/// Stores and reads object bytes. Implementations: the erasure-coded store over storage nodes, and
/// an in-memory one for tests of the layers above.
#[async_trait]
pub trait ObjectData: Send + Sync {
    /// Stores `body` and returns where it lives. When this returns Ok the bytes survive the loss of
    /// any m storage nodes (any decodable pattern for LRC): an acknowledged write is never lost.
    async fn write(&self, body: Bytes) -> Result<Layout, DataError>;

    /// Stores a body that arrives as a stream, as [`write`](Self::write) stores a whole one. An
    /// error from `body` (or running past the limits `write` has) fails the write, and nothing of it
    /// is kept. The erasure-coded store writes each stripe as soon as its bytes are in, so a large
    /// body is never held whole.
    async fn write_stream(&self, body: BodyStream<'_>) -> Result<Layout, DataError>;

    /// Reads bytes `range` (within `0..size` of the object) of the object stored at `layout`,
    /// through a degraded read when a unit's node is down, slow or returns a corrupt unit.
    async fn read(&self, layout: &Layout, range: Range<u64>) -> Result<Bytes, DataError>;

    /// Frees the space of a layout that no object references any more (after an overwrite, delete or
    /// aborted upload). Packed objects only mark their bytes dead until the stripe is compacted.
    /// Stripes under a [`ReadHold`] of this store are freed when the last hold on them ends; the
    /// erasure-coded store then keeps them `orphans.release_delay_ms` longer, for reads of the old
    /// layout through other gateways.
    async fn release(&self, layout: &Layout) -> Result<(), DataError>;

    /// Keeps `layout`'s bytes readable on this store until the hold is dropped, even if the layout
    /// is released meanwhile: a long read (a body sent as it is read, a copy) that began before an
    /// overwrite or delete reads the old bytes to the end. Holds are per process: a release through
    /// another gateway is deferred only by its release delay.
    fn hold(&self, layout: &Layout) -> ReadHold;
}
