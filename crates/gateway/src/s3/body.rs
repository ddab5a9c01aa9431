//! Request bodies on their way into the data path: each chunk is hashed (MD5, for the ETag; for a
//! long body by a task of its own, on another core, beside the body's encoding and writing) and
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

/// Bodies declared at least this long have their MD5 computed on another core, beside the
/// encoding and writing of their stripes (a shorter one is hashed in passing, cheaper than a hand-off).
pub const PARALLEL_MD5_MIN_BYTES: u64 = 256 << 10;
/// Chunks waiting for the parallel MD5; a body arriving faster than it is hashed waits for it.
const PARALLEL_MD5_BACKLOG: usize = 64;
/// Most bytes the parallel MD5 hashes between yields to the runtime.
const MD5_SLICE_BYTES: usize = 64 << 10;

/// The ETag's MD5 of a body, computed in passing or by a task of its own.
enum EtagMd5 {
    /// Hashed in the task reading the body.
    Inline(Md5),
    /// Chunks sent to a task on another runtime thread, which hashes them in order.
    Parallel { chunks: Option<tokio::sync::mpsc::Sender<Bytes>>, digest: tokio::task::JoinHandle<[u8; 16]> },
    /// The digest, once the body is over.
    Done([u8; 16]),
}

impl Default for EtagMd5 {
    fn default() -> Self {
        Self::Inline(Md5::new())
    }
}

/// Parallel MD5 tasks running now. Beyond one per CPU they only compete with the requests' own work
/// (every core is busy then), so a body that would exceed it is hashed in passing instead.
static PARALLEL_MD5_TASKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The CPUs this process may use, asked once (on Linux the answer reads cgroup files).
fn cpus() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// One running parallel MD5 task, counted while it lives.
struct ParallelMd5Slot;

impl ParallelMd5Slot {
    fn take() -> Option<Self> {
        use std::sync::atomic::Ordering;
        let cpus = cpus();
        PARALLEL_MD5_TASKS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |running| (running < cpus).then_some(running + 1))
            .ok()
            .map(|_| Self)
    }
}

impl Drop for ParallelMd5Slot {
    fn drop(&mut self) {
        PARALLEL_MD5_TASKS.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl EtagMd5 {
    /// A parallel MD5 when a CPU is free for it, else one in passing.
    fn parallel() -> Self {
        let Some(slot) = ParallelMd5Slot::take() else { return Self::default() };
        let (chunks, mut arrivals) = tokio::sync::mpsc::channel::<Bytes>(PARALLEL_MD5_BACKLOG);
        let digest = tokio::spawn(async move {
            let _slot = slot;
            let mut md5 = Md5::new();
            // Bounded by the body: the sender is dropped when it ends.
            while let Some(chunk) = arrivals.recv().await {
                for slice in chunk.chunks(MD5_SLICE_BYTES) {
                    md5.update(slice);
                    tokio::task::yield_now().await;
                }
            }
            md5.finalize().into()
        });
        Self::Parallel { chunks: Some(chunks), digest }
    }

    async fn update(&mut self, chunk: &Bytes) {
        match self {
            Self::Inline(md5) => md5.update(chunk),
            Self::Parallel { chunks: Some(chunks), .. } => {
                // The hashing task only ends once this sender is gone.
                let sent = chunks.send(chunk.clone()).await;
                assert!(sent.is_ok(), "the MD5 task outlives its sender");
            }
            Self::Parallel { chunks: None, .. } | Self::Done(_) => unreachable!("no update after the digest"),
        }
    }

    async fn finish(&mut self) -> [u8; 16] {
        let digest = match self {
            Self::Inline(md5) => md5.clone().finalize().into(),
            Self::Parallel { chunks, digest } => {
                chunks.take();
                digest.await.expect("the MD5 task does not panic")
            }
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
    /// A tally that also computes `checksum`'s digest, hashing the MD5 on another core when the
    /// body is declared at least [`PARALLEL_MD5_MIN_BYTES`] long and fewer such hashings run than
    /// the machine has CPUs.
    pub fn new(checksum: Option<&Declared>, declared_bytes: Option<u64>) -> Self {
        let md5 = match declared_bytes {
            Some(bytes) if bytes >= PARALLEL_MD5_MIN_BYTES => EtagMd5::parallel(),
            _ => EtagMd5::default(),
        };
        BodyTally { md5, checksum: checksum.map(Declared::hasher), ..Default::default() }
    }

    /// Finishes the MD5 once the body is over (waiting for the parallel hashing, if any); after
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

    #[test]
    fn parallel_md5_tasks_are_bounded_by_the_cpus() {
        let cpus = cpus();
        // Other tests may hold slots meanwhile: never more than one per CPU in all.
        let slots: Vec<_> = (0..cpus + 3).filter_map(|_| ParallelMd5Slot::take()).collect();
        assert!(slots.len() <= cpus, "{} slots on {cpus} CPUs", slots.len());
        assert!(PARALLEL_MD5_TASKS.load(std::sync::atomic::Ordering::Acquire) <= cpus);
        drop(slots);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_long_body_is_hashed_in_parallel_to_the_same_etag() {
        let body: Vec<u8> = (0..3 * PARALLEL_MD5_MIN_BYTES as usize + 17).map(|i| (i % 241) as u8).collect();
        for declared in [Some(body.len() as u64), None] {
            let mut tally = BodyTally::new(None, declared);
            if declared.is_none() {
                assert!(matches!(tally.md5, EtagMd5::Inline(_)), "a body of unknown length is hashed in passing");
            }
            // More chunks than the backlog holds, so the body waits for the hashing at times.
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
