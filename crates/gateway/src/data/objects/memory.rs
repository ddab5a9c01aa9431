//! `MemoryData`: an in-memory [`ObjectData`] for tests of the layers above the data path (the S3 layer
//! above all). It lays objects out as the erasure-coded store would (`Layout::Striped`, one synthetic
//! stripe per segment of at most `segment_bytes`), reads any layout it produced (and `Composite`s of
//! them), and forgets a stripe's bytes when its layout is released, so tests can check garbage
//! collection. It can be made to fail (every call, or writes after a given number of them), so tests
//! can check that a request failing halfway changes nothing.
//!
//! Must not: be used to hold acknowledged data in a real gateway (nothing survives the process), or
//! contain erasure coding: it stands in for the data path, it does not imitate its internals.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use meta::{Layout, StripeId, StripeSegment};

use crate::data::objects::holds::{ReadHold, StripeHolds};
use crate::data::{BodyStream, DataError, ObjectData, Redundancy, Written};

/// Default most object bytes per synthetic stripe (as a striped layout of k = 6 units of 1 MiB holds).
pub const DEFAULT_SEGMENT_BYTES: u64 = 6 << 20;
/// Data units per synthetic stripe: only used to report a plausible `unit_bytes` in layouts.
const DATA_UNITS_PER_STRIPE: u64 = 6;

/// Object bytes in memory, keyed by synthetic stripe id.
#[derive(Debug)]
pub struct MemoryData {
    /// Most object bytes per stripe; larger objects get several segments.
    segment_bytes: u64,
    /// Largest body `write` accepts (`DataError::TooLarge` beyond).
    max_write_bytes: u64,
    /// Next synthetic stripe id.
    next_stripe: AtomicU64,
    /// Bytes of each live stripe (the object bytes of its segment).
    stripes: Arc<Mutex<HashMap<StripeId, Bytes>>>,
    /// Stripes held by reads, whose release waits for them.
    holds: Arc<StripeHolds>,
    /// When set, every call fails with `DataError::Unavailable` (as with too many nodes down).
    unavailable: AtomicBool,
    /// How many more writes may succeed (`u64::MAX`: any number); later ones fail with
    /// `DataError::Unavailable`, so a test can fail a request between two of its writes.
    writes_left: AtomicU64,
}

impl Default for MemoryData {
    fn default() -> Self {
        MemoryData::new(DEFAULT_SEGMENT_BYTES)
    }
}

impl MemoryData {
    /// An empty store cutting objects into segments of at most `segment_bytes` (at least 1).
    pub fn new(segment_bytes: u64) -> Self {
        MemoryData {
            segment_bytes: segment_bytes.max(1),
            max_write_bytes: u64::MAX,
            next_stripe: AtomicU64::new(1),
            stripes: Arc::new(Mutex::new(HashMap::new())),
            holds: Arc::new(StripeHolds::default()),
            unavailable: AtomicBool::new(false),
            writes_left: AtomicU64::new(u64::MAX),
        }
    }

    /// The same store refusing writes of more than `max_write_bytes` with `DataError::TooLarge`.
    pub fn with_max_write_bytes(mut self, max_write_bytes: u64) -> Self {
        self.max_write_bytes = max_write_bytes;
        self
    }

    /// Makes every later call fail with `DataError::Unavailable` (`true`) or work again (`false`).
    pub fn set_unavailable(&self, unavailable: bool) {
        self.unavailable.store(unavailable, Ordering::SeqCst);
    }

    /// Lets only the next `writes` calls of `write` succeed (`None`: any number); later ones fail with
    /// `DataError::Unavailable` until this is called again. Reads and releases keep working.
    pub fn limit_writes(&self, writes: Option<u64>) {
        self.writes_left.store(writes.unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// Number of stripes holding bytes (written and not yet released).
    pub fn live_stripes(&self) -> usize {
        self.lock().len()
    }

    /// Object bytes held in live stripes.
    pub fn live_bytes(&self) -> u64 {
        self.lock().values().map(|bytes| bytes.len() as u64).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<StripeId, Bytes>> {
        // A panic while holding the lock cannot leave the map half-updated (every update is one
        // insert or remove), so a poisoned lock is still consistent.
        crate::data::lock(&self.stripes)
    }

    fn check_available(&self) -> Result<(), DataError> {
        if self.unavailable.load(Ordering::SeqCst) {
            return Err(DataError::Unavailable("the in-memory store is set unavailable".into()));
        }
        Ok(())
    }

    /// Appends bytes `range` (relative to the layout's object) of `layout` to `out`.
    fn read_into(
        &self,
        stripes: &HashMap<StripeId, Bytes>,
        layout: &Layout,
        range: Range<u64>,
        out: &mut Vec<u8>,
    ) -> Result<(), DataError> {
        let stripe_bytes = |stripe: &StripeId| {
            stripes.get(stripe).ok_or_else(|| DataError::Lost(format!("stripe {stripe} is not in the in-memory store")))
        };
        match layout {
            Layout::Packed { stripe, offset_bytes, length_bytes, .. } => {
                if range.end > *length_bytes {
                    return Err(DataError::InvalidRange { start: range.start, end: range.end, size: *length_bytes });
                }
                let bytes = stripe_bytes(stripe)?;
                out.extend_from_slice(slice(bytes, offset_bytes + range.start..offset_bytes + range.end)?);
            }
            Layout::Striped { segments } => {
                let size: u64 = segments.iter().map(|segment| segment.length_bytes).sum();
                if range.end > size {
                    return Err(DataError::InvalidRange { start: range.start, end: range.end, size });
                }
                for segment in segments {
                    let segment_range = segment.object_offset_bytes..segment.object_offset_bytes + segment.length_bytes;
                    let start = range.start.max(segment_range.start);
                    let end = range.end.min(segment_range.end);
                    if start < end {
                        let bytes = stripe_bytes(&segment.stripe)?;
                        let base = segment.object_offset_bytes;
                        out.extend_from_slice(slice(bytes, start - base..end - base)?);
                    }
                }
            }
            Layout::Composite { pieces } => {
                let size: u64 = pieces.iter().map(|piece| piece.length_bytes).sum();
                if range.end > size {
                    return Err(DataError::InvalidRange { start: range.start, end: range.end, size });
                }
                for piece in pieces {
                    let start = range.start.max(piece.object_offset_bytes);
                    let end = range.end.min(piece.object_offset_bytes + piece.length_bytes);
                    if start < end {
                        let base = piece.object_offset_bytes;
                        self.read_into(stripes, &piece.layout, start - base..end - base, out)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// `bytes[range]`, or `DataError::Lost` when the stored stripe is shorter than its layout says.
fn slice(bytes: &Bytes, range: Range<u64>) -> Result<&[u8], DataError> {
    let start = usize::try_from(range.start).map_err(|_| DataError::Internal("offset overflows usize".into()))?;
    let end = usize::try_from(range.end).map_err(|_| DataError::Internal("offset overflows usize".into()))?;
    bytes.get(start..end).ok_or_else(|| DataError::Lost(format!("stored stripe is shorter than {end} bytes")))
}

#[async_trait]
impl ObjectData for MemoryData {
    async fn write(&self, body: Bytes) -> Result<Written, DataError> {
        self.check_available()?;
        let allowed = self.writes_left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| match left {
            u64::MAX => Some(u64::MAX),
            0 => None,
            left => Some(left - 1),
        });
        if allowed.is_err() {
            return Err(DataError::Unavailable("the in-memory store's write limit is used up".into()));
        }
        let size = body.len() as u64;
        if size > self.max_write_bytes {
            return Err(DataError::TooLarge { size, limit: self.max_write_bytes });
        }
        let mut segments = Vec::new();
        let mut stripes = self.lock();
        let mut offset = 0u64;
        // One segment per round, each at least one byte: ends after size / segment_bytes + 1 rounds.
        while offset < size {
            let length = self.segment_bytes.min(size - offset);
            let stripe = StripeId(self.next_stripe.fetch_add(1, Ordering::Relaxed));
            let (start, end) = (offset as usize, (offset + length) as usize);
            stripes.insert(stripe, body.slice(start..end));
            segments.push(StripeSegment {
                stripe,
                unit_bytes: length.div_ceil(DATA_UNITS_PER_STRIPE),
                object_offset_bytes: offset,
                length_bytes: length,
            });
            offset += length;
        }
        // One copy in memory: it survives no failure, and never will.
        Ok(Written { layout: Layout::Striped { segments }, redundancy: Redundancy::full(0) })
    }

    async fn write_stream(&self, mut body: BodyStream<'_>, _ack: meta::WriteAck) -> Result<Written, DataError> {
        // Every rule is met at once: the one copy is complete when the body is in. Held whole, as this store holds everything: the limit is checked as the body arrives.
        let mut collected = BytesMut::new();
        // Ends with the body; the limit stops one that never ends.
        while let Some(chunk) = body.next().await {
            let chunk = chunk?;
            let size = collected.len() as u64 + chunk.len() as u64;
            if size > self.max_write_bytes {
                return Err(DataError::TooLarge { size, limit: self.max_write_bytes });
            }
            collected.extend_from_slice(&chunk);
        }
        self.write(collected.freeze()).await
    }

    async fn read(&self, layout: &Layout, range: Range<u64>) -> Result<Bytes, DataError> {
        self.check_available()?;
        if range.start > range.end {
            return Err(DataError::InvalidRange { start: range.start, end: range.end, size: 0 });
        }
        let capacity = usize::try_from(range.end - range.start).unwrap_or(0);
        let mut out = Vec::with_capacity(capacity);
        let stripes = self.lock();
        self.read_into(&stripes, layout, range, &mut out)?;
        Ok(Bytes::from(out))
    }

    async fn release(&self, layout: &Layout) -> Result<(), DataError> {
        self.check_available()?;
        let mut stripes = self.lock();
        for stripe in self.holds.release(layout.stripes()) {
            stripes.remove(&stripe);
        }
        Ok(())
    }

    fn hold(&self, layout: &Layout) -> ReadHold {
        let held = layout.stripes();
        self.holds.hold(&held);
        let (holds, stripes) = (Arc::clone(&self.holds), Arc::clone(&self.stripes));
        ReadHold::new(move || {
            let mut stripes = crate::data::lock(&stripes);
            for stripe in holds.unhold(&held) {
                stripes.remove(&stripe);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meta::CompositePiece;

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().expect("runtime").block_on(future)
    }

    #[test]
    fn writes_segments_reads_ranges_and_releases() {
        block_on(async {
            let data = MemoryData::new(4);
            let body = Bytes::from_static(b"0123456789");
            let layout = data.write(body.clone()).await.unwrap().layout;
            let Layout::Striped { segments } = &layout else { panic!("striped expected") };
            assert_eq!(segments.len(), 3);
            assert_eq!(data.live_stripes(), 3);
            for (start, end) in [(0, 10), (3, 9), (4, 8), (9, 10), (5, 5)] {
                assert_eq!(data.read(&layout, start..end).await.unwrap(), body.slice(start as usize..end as usize));
            }
            assert!(matches!(data.read(&layout, 5..11).await, Err(DataError::InvalidRange { .. })));
            data.release(&layout).await.unwrap();
            assert_eq!(data.live_stripes(), 0);
            assert!(matches!(data.read(&layout, 0..1).await, Err(DataError::Lost(_))));
        });
    }

    #[test]
    fn reads_composites_and_empty_objects() {
        block_on(async {
            let data = MemoryData::new(3);
            let first = data.write(Bytes::from_static(b"abcde")).await.unwrap().layout;
            let second = data.write(Bytes::from_static(b"fgh")).await.unwrap().layout;
            let composite = Layout::Composite {
                pieces: vec![
                    CompositePiece {
                        checksum: Default::default(),
                        object_offset_bytes: 0,
                        length_bytes: 5,
                        layout: first,
                    },
                    CompositePiece {
                        checksum: Default::default(),
                        object_offset_bytes: 5,
                        length_bytes: 3,
                        layout: second,
                    },
                ],
            };
            assert_eq!(data.read(&composite, 2..7).await.unwrap(), Bytes::from_static(b"cdefg"));
            let empty = data.write(Bytes::new()).await.unwrap().layout;
            assert_eq!(empty, Layout::Striped { segments: vec![] });
            assert!(data.read(&empty, 0..0).await.unwrap().is_empty());
            data.set_unavailable(true);
            assert!(matches!(data.read(&composite, 0..1).await, Err(DataError::Unavailable(_))));
        });
    }

    #[test]
    fn limited_writes_fail_after_the_limit() {
        block_on(async {
            let data = MemoryData::new(3);
            data.limit_writes(Some(1));
            let written = data.write(Bytes::from_static(b"abc")).await.unwrap().layout;
            assert!(matches!(data.write(Bytes::from_static(b"d")).await, Err(DataError::Unavailable(_))));
            assert_eq!(data.read(&written, 0..3).await.unwrap(), Bytes::from_static(b"abc"));
            data.limit_writes(None);
            data.write(Bytes::from_static(b"d")).await.unwrap();
            assert_eq!(data.live_stripes(), 2);
        });
    }
}
