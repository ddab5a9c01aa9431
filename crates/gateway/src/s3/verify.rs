//! End-to-end checks of GetObject bodies: a GET of a whole object recomputes what the object's
//! record vouches for while its bytes go out (its full-object S3 checksum, else the ETag's MD5, a
//! multipart ETag from its parts' MD5s), and a body that does not match is never delivered whole:
//! the last piece is held back until the check passes, so on a mismatch the client sees the body end
//! early (short of its Content-Length), never wrong bytes with a clean end. A whole body read in one
//! piece is checked before the answer starts (a mismatch is a 500).
//!
//! This is the last line behind the nodes' block checksums and the metadata records' seals: it
//! catches whatever those cannot (a record that points at the wrong bytes, a decode that went
//! wrong). Owns the check only; must not read or repair data.

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use md5::{Digest, Md5};
use meta::{Layout, ObjectMeta};

use super::checksum::{self, Hasher};
use crate::data::DataError;

/// What a whole-object GET is checked against.
pub struct Expected {
    check: Check,
    /// For the log when it fails: the object and its layout.
    what: String,
    /// Called once if the bytes do not match (the store examines them).
    on_mismatch: Option<Box<dyn FnOnce() + Send + Sync>>,
}

enum Check {
    /// The record's full-object checksum: the algorithm's running digest and the stored value.
    Checksum(Hasher, String, meta::ChecksumAlgorithm),
    /// The ETag: plain MD5 of the bytes, or MD5 of the parts' MD5s with `-N` (part boundaries as
    /// the object's pieces lie).
    Etag { part_ends: Vec<u64>, seen: u64, part: Md5, part_digests: Vec<u8>, expected: String },
}

impl Expected {
    /// The check of a GET of all of `object`'s bytes (none for a range: nothing vouches for one).
    pub fn of(object: &ObjectMeta, name: &str, whole: bool) -> Option<Self> {
        if !whole {
            return None;
        }
        let what = format!("{name} ({} bytes, layout {:?})", object.size_bytes, object.layout);
        if let Some(stored) = object.checksum.as_ref().filter(|stored| !stored.composite) {
            let check = Check::Checksum(Hasher::new(stored.algorithm), stored.value.clone(), stored.algorithm);
            return Some(Self { check, what, on_mismatch: None });
        }
        let part_ends = match &object.layout {
            Layout::Composite { pieces } if object.etag.contains('-') => {
                pieces.iter().map(|piece| piece.object_offset_bytes + piece.length_bytes).collect()
            }
            _ if !object.etag.contains('-') => vec![object.size_bytes],
            _ => return None,
        };
        let etag = Check::Etag {
            part_ends,
            seen: 0,
            part: Md5::new(),
            part_digests: Vec::new(),
            expected: object.etag.clone(),
        };
        Some(Self { check: etag, what, on_mismatch: None })
    }

    /// `self`, calling `examine` if the bytes turn out not to match.
    pub fn on_mismatch(mut self, examine: impl FnOnce() + Send + Sync + 'static) -> Self {
        self.on_mismatch = Some(Box::new(examine));
        self
    }

    /// Adds the next bytes of the body.
    pub fn update(&mut self, mut bytes: &[u8]) {
        match &mut self.check {
            Check::Checksum(hasher, _, _) => hasher.update(bytes),
            Check::Etag { part_ends, seen, part, part_digests, .. } => {
                // Bounded: each pass consumes bytes up to the next part's end.
                while !bytes.is_empty() {
                    let end = part_ends.iter().copied().find(|&end| end > *seen).unwrap_or(u64::MAX);
                    let take = (end - *seen).min(bytes.len() as u64) as usize;
                    part.update(&bytes[..take]);
                    *seen += take as u64;
                    bytes = &bytes[take..];
                    if *seen == end {
                        part_digests.extend_from_slice(&std::mem::take(part).finalize());
                    }
                }
            }
        }
    }

    /// Whether the bytes seen match; on a mismatch it is logged and counted.
    pub fn matches(self) -> bool {
        let (matched, computed) = match self.check {
            Check::Checksum(hasher, stored, algorithm) => {
                let computed = checksum::full(algorithm, &hasher.finalize()).value;
                (computed == stored, computed)
            }
            Check::Etag { part_ends, part_digests, expected, .. } => {
                let computed = if expected.contains('-') {
                    format!("{}-{}", hex::encode(Md5::digest(&part_digests)), part_ends.len())
                } else {
                    hex::encode(&part_digests)
                };
                (computed == expected, computed)
            }
        };
        if !matched {
            metrics::counter!("lowtail_gateway_get_checksum_mismatches_total").increment(1);
            tracing::error!(object = %self.what, %computed, "a GET's bytes do not match the object's checksum; answer aborted, its units examined");
            if let Some(examine) = self.on_mismatch {
                examine();
            }
        }
        matched
    }
}

/// `parts`, the whole body, checked before it is answered.
pub fn check_whole(mut expected: Expected, parts: &[Bytes]) -> Result<(), DataError> {
    parts.iter().for_each(|part| expected.update(part));
    if expected.matches() {
        Ok(())
    } else {
        Err(DataError::Internal("the object's bytes do not match its checksum (logged); try again".into()))
    }
}

/// A checked body's state: the body, the check (gone once the body ended) and the buffer held back.
type Checking<S> = (S, Option<Expected>, Option<Bytes>);

/// `body` with each buffer checked as it passes and the last held back until the whole matched:
/// on a mismatch the body ends with an error in its place.
pub fn checked<S>(body: S, expected: Expected) -> impl Stream<Item = Result<Bytes, DataError>> + Send + Sync
where
    S: Stream<Item = Result<Bytes, DataError>> + Send + Sync + Unpin + 'static,
{
    let start: Checking<S> = (body, Some(expected), None);
    futures_util::stream::unfold(start, |(mut body, expected, mut held)| async move {
        let mut expected = expected?;
        // Bounded by the body: each pass takes one buffer from it.
        loop {
            match body.next().await {
                Some(Ok(bytes)) => {
                    expected.update(&bytes);
                    if let Some(previous) = held.replace(bytes) {
                        return Some((Ok(previous), (body, Some(expected), held)));
                    }
                }
                Some(Err(error)) => return Some((Err(error), (body, None, None))),
                None => {
                    let ended = if expected.matches() {
                        Ok(held?)
                    } else {
                        Err(DataError::Internal("the object's bytes do not match its checksum".into()))
                    };
                    return Some((ended, (body, None, None)));
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use meta::{CompositePiece, ContentHeaders, StripeId, StripeSegment};

    fn object(bytes: &[u8], etag: String, checksum: Option<meta::StoredChecksum>, layout: Layout) -> ObjectMeta {
        ObjectMeta {
            version: Default::default(),
            tags: Default::default(),
            size_bytes: bytes.len() as u64,
            etag,
            content_type: None,
            user_metadata: Default::default(),
            headers: ContentHeaders::default(),
            last_modified_ms: 0,
            completed_upload_id: None,
            checksum,
            layout,
        }
    }

    fn striped(len: u64) -> Layout {
        Layout::Striped {
            segments: vec![StripeSegment {
                stripe: StripeId(1),
                unit_bytes: len,
                object_offset_bytes: 0,
                length_bytes: len,
            }],
        }
    }

    fn crc64(bytes: &[u8]) -> meta::StoredChecksum {
        let mut hasher = Hasher::new(meta::ChecksumAlgorithm::Crc64nvme);
        hasher.update(bytes);
        checksum::full(meta::ChecksumAlgorithm::Crc64nvme, &hasher.finalize())
    }

    async fn stream(expected: Expected, chunks: &[&'static [u8]]) -> Vec<Result<Bytes, DataError>> {
        let body = futures_util::stream::iter(chunks.iter().map(|c| Ok(Bytes::from_static(c))).collect::<Vec<_>>());
        checked(body, expected).collect().await
    }

    #[tokio::test]
    async fn a_matching_body_passes_whole_and_a_wrong_one_loses_its_last_piece() {
        let good: &[u8] = b"abcdefghij";
        let record = object(good, hex::encode(Md5::digest(good)), Some(crc64(good)), striped(10));
        let passed = stream(Expected::of(&record, "b/k", true).unwrap(), &[b"abc", b"defg", b"hij"]).await;
        assert_eq!(passed.into_iter().map(Result::unwrap).collect::<Vec<_>>(), [&b"abc"[..], b"defg", b"hij"]);
        let wrong = stream(Expected::of(&record, "b/k", true).unwrap(), &[b"abc", b"deXg", b"hij"]).await;
        assert_eq!(wrong.len(), 3);
        assert!(wrong[..2].iter().all(Result::is_ok) && wrong[2].is_err(), "the last piece is withheld");
        assert!(Expected::of(&record, "b/k", false).is_none(), "a range is not checked");
        assert!(
            check_whole(Expected::of(&record, "b/k", true).unwrap(), &[Bytes::from_static(b"abcdefghiX")]).is_err()
        );
    }

    #[test]
    fn without_a_checksum_the_etag_is_recomputed_plain_or_per_part() {
        let bytes = b"0123456789";
        let plain = object(bytes, hex::encode(Md5::digest(bytes)), None, striped(10));
        assert!(check_whole(Expected::of(&plain, "b/k", true).unwrap(), &[Bytes::from_static(bytes)]).is_ok());
        let parts: Vec<u8> = [&bytes[..4], &bytes[4..]].iter().flat_map(|part| Md5::digest(part).to_vec()).collect();
        let etag = format!("{}-2", hex::encode(Md5::digest(&parts)));
        let piece = |offset: u64, length: u64| CompositePiece {
            checksum: Default::default(),
            object_offset_bytes: offset,
            length_bytes: length,
            layout: striped(length),
        };
        let multipart = object(bytes, etag, None, Layout::Composite { pieces: vec![piece(0, 4), piece(4, 6)] });
        let chunks = [Bytes::from_static(&bytes[..3]), Bytes::from_static(&bytes[3..])];
        assert!(check_whole(Expected::of(&multipart, "b/k", true).unwrap(), &chunks).is_ok(), "parts across chunks");
        let other = [Bytes::from_static(b"0123456788")];
        assert!(check_whole(Expected::of(&multipart, "b/k", true).unwrap(), &other).is_err());
    }
}
