//! Cuts an object body, as it arrives, into the byte runs of its stripes: full stripes of
//! `stripe_bytes` and a shorter last one. It owns the body's size limit and the wait for its next
//! chunk. Must not: encode, write or record anything (that is [`crate::data::objects::erasure`]), or read ahead of
//! the stripe it is asked for, so a write holds only the stripes it is working on.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

use crate::data::{BodyStream, DataError};

/// One stripe's bytes of an object: `bytes.len()` is `stripe_bytes`, except for the object's last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripeCut {
    /// Where the bytes start in the object.
    pub offset_bytes: u64,
    /// The bytes.
    pub bytes: Bytes,
}

/// Limits of a cut.
#[derive(Debug, Clone, Copy)]
pub struct CutLimits {
    /// Bytes of a full stripe (k × the unit size). Positive.
    pub stripe_bytes: u64,
    /// Largest body accepted: one byte more ends the cut with [`DataError::TooLarge`].
    pub max_body_bytes: u64,
    /// When waiting for the body ends with [`DataError::Unavailable`].
    pub deadline: tokio::time::Instant,
}

/// The stripes of `body`, in order. Each stripe is read from `body` only when asked for. The stream
/// ends after the last stripe, or after its first error (from the body, the size limit or the
/// deadline); nothing is read after an error.
pub fn cut_stripes(body: BodyStream<'_>, limits: CutLimits) -> BoxStream<'_, Result<StripeCut, DataError>> {
    assert!(limits.stripe_bytes > 0, "a stripe holds at least one byte");
    let cutter = Cutter { body, limits, pending: VecDeque::new(), pending_bytes: 0, offset_bytes: 0, ended: false };
    futures_util::stream::unfold(cutter, |mut cutter| async move {
        let item = cutter.next_stripe().await?;
        Some((item, cutter))
    })
    .boxed()
}

struct Cutter<'a> {
    body: BodyStream<'a>,
    limits: CutLimits,
    /// Chunks received and not yet cut, `pending_bytes` in all, none empty.
    pending: VecDeque<Bytes>,
    pending_bytes: u64,
    /// Object offset of the first pending byte.
    offset_bytes: u64,
    /// The body ended (or failed): nothing more is read from it.
    ended: bool,
}

impl Cutter<'_> {
    async fn next_stripe(&mut self) -> Option<Result<StripeCut, DataError>> {
        let stripe_bytes = self.limits.stripe_bytes;
        // Each round takes one chunk from the body or ends it; the deadline bounds a body that
        // sends nothing but empty chunks or nothing at all.
        while !self.ended && self.pending_bytes < stripe_bytes {
            match tokio::time::timeout_at(self.limits.deadline, self.body.next()).await {
                Err(_elapsed) => {
                    return self.fail(DataError::Unavailable(format!(
                        "the write ran past write_deadline_ms waiting for the body after {} bytes; nothing was kept",
                        self.offset_bytes + self.pending_bytes
                    )));
                }
                Ok(None) => self.ended = true,
                Ok(Some(Err(error))) => return self.fail(error),
                Ok(Some(Ok(chunk))) => {
                    let size = self.offset_bytes + self.pending_bytes + chunk.len() as u64;
                    if size > self.limits.max_body_bytes {
                        return self.fail(DataError::TooLarge { size, limit: self.limits.max_body_bytes });
                    }
                    if !chunk.is_empty() {
                        self.pending_bytes += chunk.len() as u64;
                        self.pending.push_back(chunk);
                    }
                }
            }
        }
        if self.pending_bytes == 0 {
            return None;
        }
        let length = self.pending_bytes.min(stripe_bytes);
        let cut = StripeCut { offset_bytes: self.offset_bytes, bytes: self.take(length) };
        self.offset_bytes += length;
        Some(Ok(cut))
    }

    /// Ends the cut with `error`: what is pending is dropped and the body is not read again.
    fn fail(&mut self, error: DataError) -> Option<Result<StripeCut, DataError>> {
        self.ended = true;
        self.pending.clear();
        self.pending_bytes = 0;
        Some(Err(error))
    }

    /// The first `length` pending bytes: a slice of the first chunk when it holds them all (no
    /// copy, as when a body given whole is cut), else copied from the chunks that do.
    fn take(&mut self, length: u64) -> Bytes {
        assert!(length > 0 && length <= self.pending_bytes, "take only what is pending");
        self.pending_bytes -= length;
        let length = usize::try_from(length).expect("a stripe fits in memory");
        let front = self.pending.front_mut().expect("pending bytes are in chunks");
        if front.len() >= length {
            let bytes = front.split_to(length);
            if front.is_empty() {
                self.pending.pop_front();
            }
            return bytes;
        }
        let mut joined = BytesMut::with_capacity(length);
        // Each round moves one chunk (or the part of one that is needed): at most pending.len() rounds.
        while joined.len() < length {
            let chunk = self.pending.front_mut().expect("pending bytes are in chunks");
            let wanted = length - joined.len();
            if chunk.len() > wanted {
                joined.extend_from_slice(&chunk.split_to(wanted));
            } else {
                joined.extend_from_slice(chunk);
                self.pending.pop_front();
            }
        }
        joined.freeze()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use futures_util::TryStreamExt;
    use futures_util::stream;

    use super::*;

    fn limits(stripe_bytes: u64, max_body_bytes: u64) -> CutLimits {
        CutLimits { stripe_bytes, max_body_bytes, deadline: tokio::time::Instant::now() + Duration::from_secs(60) }
    }

    fn body_of(bytes: &[u8], chunk_lengths: &[usize]) -> Vec<Result<Bytes, DataError>> {
        let mut chunks = Vec::new();
        let (mut at, mut lengths) = (0, chunk_lengths.iter().cycle());
        while at < bytes.len() {
            let length = (*lengths.next().expect("cycled")).min(bytes.len() - at);
            chunks.push(Ok(Bytes::copy_from_slice(&bytes[at..at + length])));
            at += length;
        }
        chunks
    }

    #[tokio::test]
    async fn any_chunking_cuts_into_full_stripes_and_a_last_one() {
        let object: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        for chunking in [&[1000][..], &[1], &[99], &[100], &[333, 1, 0, 7], &[250, 50]] {
            let chunks = body_of(&object, chunking);
            let cuts: Vec<StripeCut> =
                cut_stripes(stream::iter(chunks).boxed(), limits(100, 1000)).try_collect().await.unwrap();
            assert_eq!(cuts.len(), 10, "{chunking:?}");
            for (i, cut) in cuts.iter().enumerate() {
                assert_eq!(cut.offset_bytes, i as u64 * 100);
                assert_eq!(&cut.bytes[..], &object[i * 100..(i + 1) * 100], "{chunking:?} stripe {i}");
            }
        }
        let cuts: Vec<StripeCut> = cut_stripes(stream::iter(body_of(&object[..250], &[64])).boxed(), limits(100, 1000))
            .try_collect()
            .await
            .unwrap();
        let lengths: Vec<usize> = cuts.iter().map(|cut| cut.bytes.len()).collect();
        assert_eq!(lengths, vec![100, 100, 50], "only the last stripe is short");
        let none: Vec<StripeCut> =
            cut_stripes(stream::iter(vec![Ok(Bytes::new())]).boxed(), limits(100, 1000)).try_collect().await.unwrap();
        assert!(none.is_empty(), "an empty body has no stripes");
    }

    #[tokio::test]
    async fn a_body_given_whole_is_sliced_without_copies() {
        let whole = Bytes::from(vec![5u8; 300]);
        let cuts: Vec<StripeCut> =
            cut_stripes(stream::iter(vec![Ok(whole.clone())]).boxed(), limits(128, 300)).try_collect().await.unwrap();
        for cut in &cuts {
            let at = cut.offset_bytes as usize;
            assert_eq!(cut.bytes.as_ptr(), whole[at..].as_ptr(), "stripe at {at} shares the body's memory");
        }
    }

    #[tokio::test]
    async fn stripes_are_read_only_when_asked_for() {
        let pulled = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&pulled);
        let body = stream::iter(body_of(&[1u8; 1000], &[10])).inspect(move |chunk| {
            counter.fetch_add(chunk.as_ref().map_or(0, |c| c.len() as u64), Ordering::SeqCst);
        });
        let mut cuts = cut_stripes(body.boxed(), limits(100, 1000));
        cuts.next().await.unwrap().unwrap();
        assert_eq!(pulled.load(Ordering::SeqCst), 100, "one stripe's chunks and no more");
        cuts.next().await.unwrap().unwrap();
        assert_eq!(pulled.load(Ordering::SeqCst), 200);
    }

    #[tokio::test]
    async fn errors_end_the_cut() {
        let mut chunks = body_of(&[1u8; 250], &[50]);
        chunks.insert(3, Err(DataError::Body("connection reset".into())));
        let mut cuts = cut_stripes(stream::iter(chunks).boxed(), limits(100, 1000));
        assert_eq!(cuts.next().await.unwrap().unwrap().bytes.len(), 100);
        assert_eq!(cuts.next().await.unwrap().unwrap_err(), DataError::Body("connection reset".into()));
        assert!(cuts.next().await.is_none(), "nothing after the error");

        let mut cuts = cut_stripes(stream::iter(body_of(&[1u8; 250], &[50])).boxed(), limits(100, 220));
        cuts.next().await.unwrap().unwrap();
        cuts.next().await.unwrap().unwrap();
        assert_eq!(cuts.next().await.unwrap().unwrap_err(), DataError::TooLarge { size: 250, limit: 220 });
        assert!(cuts.next().await.is_none());
    }

    #[tokio::test]
    async fn a_body_that_stops_arriving_fails_at_the_deadline() {
        let stalled = stream::iter(vec![Ok(Bytes::from_static(b"abc"))]).chain(stream::pending());
        let limits = CutLimits {
            stripe_bytes: 100,
            max_body_bytes: 1000,
            deadline: tokio::time::Instant::now() + Duration::from_millis(50),
        };
        let error = cut_stripes(stalled.boxed(), limits).next().await.unwrap().unwrap_err();
        assert!(matches!(&error, DataError::Unavailable(why) if why.contains("after 3 bytes")), "{error}");
    }
}
