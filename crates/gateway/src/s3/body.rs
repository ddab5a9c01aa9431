//! Request bodies on their way into the data path: each chunk is hashed (MD5, for the ETag) and
//! counted as it passes, the size limit is enforced as it arrives, and a body that fails ends with
//! the S3 error the client should see. Owns the body checks of PutObject and UploadPart
//! (Content-Length, Content-MD5, the size limit; the S3 checksums' rules are `checksum`'s). Must not store or release anything: the handler
//! decides what to keep once the body is known to be whole and right.

use base64::Engine as _;
use bytes::Bytes;
use futures_util::StreamExt;
use md5::{Digest, Md5};
use s3s::dto::StreamingBlob;
use s3s::{S3Error, S3ErrorCode, S3Result};

use super::checksum::{Declared, Hasher};
use super::errors::s3;
use crate::data::{BodyStream, DataError};

/// What a body turned out to be, learnt while the data path read it.
#[derive(Default)]
pub struct BodyTally {
    md5: Md5,
    size_bytes: u64,
    /// The S3 checksum being computed, if the request declared one (or it has a default).
    checksum: Option<Hasher>,
    /// Why the body failed, in the form the client gets (the data path only sees that it failed).
    error: Option<S3Error>,
}

impl BodyTally {
    /// A tally that also computes `checksum`'s digest.
    pub fn with_checksum(checksum: Option<&Declared>) -> Self {
        BodyTally { checksum: checksum.map(Declared::hasher), ..Default::default() }
    }

    /// The digest of the declared checksum's algorithm, once the body has passed.
    pub fn take_checksum_digest(&mut self) -> Option<Vec<u8>> {
        self.checksum.take().map(Hasher::finalize)
    }

    /// Bytes that passed.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// The hex MD5 of the bytes that passed: the ETag of a body stored in one piece.
    pub fn etag(&self) -> String {
        hex::encode(self.md5.clone().finalize())
    }

    /// The error that ended the body, if it was the body's fault.
    pub fn take_error(&mut self) -> Option<S3Error> {
        self.error.take()
    }
}

/// What a request declared about its body, checked before (the format) and after (the values) the
/// body is read.
pub struct DeclaredBody {
    length_bytes: Option<u64>,
    md5: Option<[u8; 16]>,
}

impl DeclaredBody {
    /// The declared `Content-Length` and `Content-MD5`: EntityTooLarge for a length above `limit`,
    /// InvalidDigest for an MD5 that is not base64 of 16 bytes. Checked before any byte is stored.
    pub fn new(content_length: Option<i64>, content_md5: Option<&str>, limit: u64) -> S3Result<Self> {
        let length_bytes = content_length.and_then(|length| u64::try_from(length).ok());
        if let Some(length) = length_bytes
            && length > limit
        {
            return Err(too_large(length, limit));
        }
        let md5 = match content_md5 {
            None => None,
            Some(content_md5) => {
                let declared = base64::engine::general_purpose::STANDARD
                    .decode(content_md5.trim())
                    .map_err(|_| s3(S3ErrorCode::InvalidDigest, "Content-MD5 is not base64"))?;
                // Not the 16 bytes of an MD5 at all: S3 calls that an invalid digest, not a mismatch.
                let md5: [u8; 16] = declared
                    .try_into()
                    .map_err(|_| s3(S3ErrorCode::InvalidDigest, "Content-MD5 is not a 128-bit digest"))?;
                Some(md5)
            }
        };
        Ok(DeclaredBody { length_bytes, md5 })
    }

    /// BadDigest unless the declared Content-MD5 (if any) is `md5`, the digest of a body read whole.
    pub fn check_md5(&self, md5: [u8; 16]) -> S3Result<()> {
        match self.md5 {
            Some(declared) if declared != md5 => {
                Err(s3(S3ErrorCode::BadDigest, "the Content-MD5 does not match the body"))
            }
            _ => Ok(()),
        }
    }

    /// Whether the body read is the one declared: IncompleteBody if it is shorter than its
    /// Content-Length, BadDigest if its MD5 is not the Content-MD5.
    pub fn check(&self, tally: &BodyTally) -> S3Result<()> {
        if let Some(length) = self.length_bytes
            && length != tally.size_bytes
        {
            return Err(s3(S3ErrorCode::IncompleteBody, "the body is shorter than its Content-Length"));
        }
        if let Some(md5) = self.md5
            && hex::encode(md5) != tally.etag()
        {
            return Err(s3(S3ErrorCode::BadDigest, "the Content-MD5 does not match the body"));
        }
        Ok(())
    }
}

fn too_large(size: u64, limit: u64) -> S3Error {
    s3(S3ErrorCode::EntityTooLarge, format!("the body of {size} bytes exceeds the limit of {limit}"))
}

/// A chunk of a request body, or the body falling silent.
enum Arrival<E> {
    Chunk(Result<Bytes, E>),
    /// Nothing arrived for the idle timeout; the body ends here.
    Idle(std::time::Duration),
}

/// `body`'s chunks, ending with [`Arrival::Idle`] if `idle` passes without one.
fn idle_limited<S, E>(body: S, idle: std::time::Duration) -> impl futures_util::Stream<Item = Arrival<E>>
where
    S: futures_util::Stream<Item = Result<Bytes, E>> + Unpin,
{
    futures_util::stream::unfold(Some(body), move |body| async move {
        let mut body = body?;
        match tokio::time::timeout(idle, body.next()).await {
            Ok(Some(chunk)) => Some((Arrival::Chunk(chunk), Some(body))),
            Ok(None) => None,
            Err(_) => Some((Arrival::Idle(idle), None)),
        }
    })
}

/// `body` as the data path reads it, tallied into `tally`. A chunk that takes the body past
/// `limit`, a failure to receive it (a signature mismatch of a streaming upload, a reset
/// connection), or `idle` passing without a byte (RequestTimeout, as S3 answers a client that
/// stops sending) ends it with [`DataError::Body`], and the S3 error waits in `tally`.
pub fn tallied(
    body: Option<StreamingBlob>,
    limit: u64,
    idle: std::time::Duration,
    tally: &mut BodyTally,
) -> BodyStream<'_> {
    let Some(body) = body else { return futures_util::stream::empty().boxed() };
    idle_limited(body, idle)
        .map(move |arrival| {
            let failed = |tally: &mut BodyTally, error: S3Error| {
                let message = error.message().unwrap_or("the body failed").to_owned();
                tally.error.get_or_insert(error);
                Err(DataError::Body(message))
            };
            let chunk = match arrival {
                Arrival::Chunk(chunk) => chunk,
                Arrival::Idle(idle) => {
                    let why = format!(
                        "Your socket connection to the server was not read from or written to within the timeout \
                     period ({} s without a byte of the body).",
                        idle.as_secs_f64()
                    );
                    return failed(tally, s3(S3ErrorCode::RequestTimeout, why));
                }
            };
            let chunk: Bytes = match chunk {
                Ok(chunk) => chunk,
                Err(error) => {
                    let error = match error.downcast::<S3Error>() {
                        Ok(error) => *error,
                        Err(error) => s3(S3ErrorCode::IncompleteBody, format!("reading the request body: {error}")),
                    };
                    return failed(tally, error);
                }
            };
            let size_bytes = tally.size_bytes + chunk.len() as u64;
            if size_bytes > limit {
                return failed(tally, too_large(size_bytes, limit));
            }
            tally.size_bytes = size_bytes;
            tally.md5.update(&chunk);
            if let Some(checksum) = &mut tally.checksum {
                checksum.update(&chunk);
            }
            Ok(chunk)
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: std::time::Duration = std::time::Duration::from_secs(20);

    fn blob(chunks: Vec<Result<Bytes, std::io::Error>>) -> Option<StreamingBlob> {
        Some(StreamingBlob::wrap(futures_util::stream::iter(chunks)))
    }

    async fn drain(body: BodyStream<'_>) -> Result<Vec<u8>, DataError> {
        let mut out = Vec::new();
        let mut body = body;
        while let Some(chunk) = body.next().await {
            out.extend_from_slice(&chunk?);
        }
        Ok(out)
    }

    #[tokio::test]
    async fn hashes_and_counts_what_passes() {
        let mut tally = BodyTally::default();
        let chunks = vec![Ok(Bytes::from_static(b"hello ")), Ok(Bytes::from_static(b"world"))];
        let out = drain(tallied(blob(chunks), 100, IDLE, &mut tally)).await.unwrap();
        assert_eq!(out, b"hello world");
        assert_eq!(tally.size_bytes(), 11);
        assert_eq!(tally.etag(), hex::encode(Md5::digest(b"hello world")));
        assert!(tally.take_error().is_none());

        let mut empty = BodyTally::default();
        assert!(drain(tallied(None, 100, IDLE, &mut empty)).await.unwrap().is_empty());
        assert_eq!(empty.etag(), "d41d8cd98f00b204e9800998ecf8427e", "the MD5 of no bytes");
    }

    #[tokio::test]
    async fn a_body_past_the_limit_or_broken_ends_with_the_clients_error() {
        let mut tally = BodyTally::default();
        let chunks = vec![Ok(Bytes::from_static(b"0123")), Ok(Bytes::from_static(b"4567"))];
        let error = drain(tallied(blob(chunks), 6, IDLE, &mut tally)).await.unwrap_err();
        assert!(matches!(error, DataError::Body(_)), "{error}");
        assert_eq!(*tally.take_error().unwrap().code(), S3ErrorCode::EntityTooLarge);

        let mut tally = BodyTally::default();
        let chunks = vec![Ok(Bytes::from_static(b"0123")), Err(std::io::Error::other("reset"))];
        drain(tallied(blob(chunks), 100, IDLE, &mut tally)).await.unwrap_err();
        assert_eq!(*tally.take_error().unwrap().code(), S3ErrorCode::IncompleteBody);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_arriving_ends_with_request_timeout() {
        let mut tally = BodyTally::default();
        let first = futures_util::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"0123456789"))]);
        let silent = first.chain(futures_util::stream::pending());
        let body = Some(StreamingBlob::wrap(silent));
        let started = tokio::time::Instant::now();
        let error = drain(tallied(body, 100, IDLE, &mut tally)).await.unwrap_err();
        assert!(matches!(error, DataError::Body(_)), "{error}");
        assert_eq!(*tally.take_error().unwrap().code(), S3ErrorCode::RequestTimeout);
        assert_eq!(tally.size_bytes(), 10, "what arrived was counted");
        assert_eq!(started.elapsed(), IDLE, "ended one idle period after the last byte");
    }

    #[test]
    fn declared_length_and_md5_are_checked() {
        let limit = 100;
        assert_eq!(*DeclaredBody::new(Some(101), None, limit).err().unwrap().code(), S3ErrorCode::EntityTooLarge);
        assert_eq!(*DeclaredBody::new(None, Some("%%"), limit).err().unwrap().code(), S3ErrorCode::InvalidDigest);
        assert_eq!(*DeclaredBody::new(None, Some("AAAA"), limit).err().unwrap().code(), S3ErrorCode::InvalidDigest);

        let mut tally = BodyTally::default();
        tally.md5.update(b"abc");
        tally.size_bytes = 3;
        let right = base64::engine::general_purpose::STANDARD.encode(Md5::digest(b"abc"));
        let wrong = base64::engine::general_purpose::STANDARD.encode(Md5::digest(b"abd"));
        DeclaredBody::new(Some(3), Some(&right), limit).unwrap().check(&tally).unwrap();
        let short = DeclaredBody::new(Some(4), None, limit).unwrap().check(&tally).unwrap_err();
        assert_eq!(*short.code(), S3ErrorCode::IncompleteBody);
        let bad = DeclaredBody::new(None, Some(&wrong), limit).unwrap().check(&tally).unwrap_err();
        assert_eq!(*bad.code(), S3ErrorCode::BadDigest);
    }
}
