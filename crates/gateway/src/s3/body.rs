//! Request bodies on their way into the data path: each chunk is hashed (MD5, for the ETag; for a
//! long body by an MD5 engine, beside other bodies and the body's own encoding and writing) and
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
use super::md5_engine::LaneHandle;
use crate::data::{BodyStream, DataError};

/// Bodies declared at least this long have their MD5 computed by an MD5 engine (in a SIMD lane,
/// beside other bodies', on the engine's thread); a shorter one is hashed in passing, cheaper than
/// the hand-off.
pub const LANE_MD5_MIN_BYTES: u64 = 256 << 10;

/// The ETag's MD5 of a body, computed in passing or by an MD5 engine.
enum EtagMd5 {
    /// Hashed in the task reading the body.
    Inline(Md5),
    /// Chunks sent to a lane of an MD5 engine, which hashes them in order.
    Lane(Option<LaneHandle>),
    /// The digest, once the body is over.
    Done([u8; 16]),
}

impl Default for EtagMd5 {
    fn default() -> Self {
        Self::Inline(Md5::new())
    }
}

impl EtagMd5 {
    /// A lane of an MD5 engine when one is free, else one in passing.
    fn in_lane() -> Self {
        LaneHandle::take().map_or_else(Self::default, |lane| Self::Lane(Some(lane)))
    }

    async fn update(&mut self, chunk: &Bytes) {
        match self {
            Self::Inline(md5) => md5.update(chunk),
            Self::Lane(Some(lane)) => lane.update(chunk.clone()).await,
            Self::Lane(None) | Self::Done(_) => unreachable!("no update after the digest"),
        }
    }

    async fn finish(&mut self) -> [u8; 16] {
        let digest = match self {
            Self::Inline(md5) => md5.clone().finalize().into(),
            Self::Lane(lane) => lane.take().expect("finished once").finish().await,
            Self::Done(digest) => *digest,
        };
        *self = Self::Done(digest);
        digest
    }
}

/// What a body turned out to be, learnt while the data path read it.
#[derive(Default)]
pub struct BodyTally {
    md5: EtagMd5,
    size_bytes: u64,
    /// The S3 checksum being computed, if the request declared one (or it has a default).
    checksum: Option<Hasher>,
    /// Why the body failed, in the form the client gets (the data path only sees that it failed).
    error: Option<S3Error>,
}

impl BodyTally {
    /// A tally that also computes `checksum`'s digest, hashing the MD5 in a lane of an MD5 engine
    /// when the body is declared at least [`LANE_MD5_MIN_BYTES`] long and a lane is free.
    pub fn new(checksum: Option<&Declared>, declared_bytes: Option<u64>) -> Self {
        let md5 = match declared_bytes {
            Some(bytes) if bytes >= LANE_MD5_MIN_BYTES => EtagMd5::in_lane(),
            _ => EtagMd5::default(),
        };
        BodyTally { md5, checksum: checksum.map(Declared::hasher), ..Default::default() }
    }

    /// Finishes the MD5 once the body is over (waiting for its engine, if any); after
    /// this [`BodyTally::etag`] can be read.
    pub async fn finish(&mut self) {
        self.md5.finish().await;
    }

    /// The digest of the declared checksum's algorithm, once the body has passed.
    pub fn take_checksum_digest(&mut self) -> Option<Vec<u8>> {
        self.checksum.take().map(Hasher::finalize)
    }

    /// Bytes that passed.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// The hex MD5 of the bytes that passed: the ETag of a body stored in one piece. Only after
    /// [`BodyTally::finish`].
    pub fn etag(&self) -> String {
        let EtagMd5::Done(digest) = &self.md5 else { panic!("the ETag is read after the tally is finished") };
        hex::encode(digest)
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
    let arrivals = idle_limited(body, idle).boxed();
    futures_util::stream::unfold((arrivals, tally), move |(mut arrivals, tally)| async move {
        let arrival = arrivals.next().await?;
        let item = tally.take(arrival, limit).await;
        Some((item, (arrivals, tally)))
    })
    .boxed()
}

impl BodyTally {
    /// Counts and hashes one arrival of the body, or records why the body failed.
    async fn take<E>(&mut self, arrival: Arrival<E>, limit: u64) -> Result<Bytes, DataError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let chunk = match arrival {
            Arrival::Chunk(chunk) => chunk,
            Arrival::Idle(idle) => {
                let why = format!(
                    "Your socket connection to the server was not read from or written to within the timeout \
                 period ({} s without a byte of the body).",
                    idle.as_secs_f64()
                );
                return self.failed(s3(S3ErrorCode::RequestTimeout, why));
            }
        };
        let chunk: Bytes = match chunk {
            Ok(chunk) => chunk,
            Err(error) => {
                let error = match error.into().downcast::<S3Error>() {
                    Ok(error) => *error,
                    Err(error) => s3(S3ErrorCode::IncompleteBody, format!("reading the request body: {error}")),
                };
                return self.failed(error);
            }
        };
        let size_bytes = self.size_bytes + chunk.len() as u64;
        if size_bytes > limit {
            return self.failed(too_large(size_bytes, limit));
        }
        self.size_bytes = size_bytes;
        self.md5.update(&chunk).await;
        if let Some(checksum) = &mut self.checksum {
            checksum.update(&chunk);
        }
        Ok(chunk)
    }

    fn failed(&mut self, error: S3Error) -> Result<Bytes, DataError> {
        let message = error.message().unwrap_or("the body failed").to_owned();
        self.error.get_or_insert(error);
        Err(DataError::Body(message))
    }
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
        tally.finish().await;
        assert_eq!(tally.etag(), hex::encode(Md5::digest(b"hello world")));
        assert!(tally.take_error().is_none());

        let mut empty = BodyTally::default();
        assert!(drain(tallied(None, 100, IDLE, &mut empty)).await.unwrap().is_empty());
        empty.finish().await;
        assert_eq!(empty.etag(), "d41d8cd98f00b204e9800998ecf8427e", "the MD5 of no bytes");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_long_body_is_hashed_in_a_lane_to_the_same_etag() {
        let body: Vec<u8> = (0..3 * LANE_MD5_MIN_BYTES as usize + 17).map(|i| (i % 241) as u8).collect();
        for declared in [Some(body.len() as u64), None] {
            let mut tally = BodyTally::new(None, declared);
            if declared.is_none() {
                assert!(matches!(tally.md5, EtagMd5::Inline(_)), "a body of unknown length is hashed in passing");
            }
            // More chunks than an engine's queue holds, so the body waits for the hashing at times.
            let chunks = body.chunks(1000).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
            let out = drain(tallied(blob(chunks), u64::MAX, IDLE, &mut tally)).await.unwrap();
            assert!(out == body);
            tally.finish().await;
            assert_eq!(tally.etag(), hex::encode(Md5::digest(&body)), "declared {declared:?}");
        }
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

        let mut tally = BodyTally { md5: EtagMd5::Done(Md5::digest(b"abc").into()), ..Default::default() };
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
