//! `LowtailS3`: the S3 operations (through `s3s::S3`) mapped onto object metadata
//! ([`meta::MetaStore`]) and object bytes ([`ObjectData`]). Owns the S3 semantics: ETags, conditional
//! requests, ranges, listings, multipart rules, server-side copies, the order of data writes, metadata
//! commits and releases, and the per-operation latency metric.
//!
//! Must not: touch storage nodes or stripes directly (only through `ObjectData`), decide placement or
//! any other policy, or change anything when it answers with an error (data written for a request
//! that then fails is released).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::StreamExt;
use md5::{Digest, Md5};
use meta::validate::{MAX_KEY_BYTES, MAX_PART_NUMBER};
use meta::{
    BucketMeta, CompletedPart, CompositePiece, ContentHeaders, Layout, ListObjectsQuery, MAX_LIST_KEYS, MetaError,
    MetaStore, ObjectListing, ObjectMeta, PartMeta, StoredChecksum, UploadChecksum, UploadMeta,
};
use s3s::dto::*;
use s3s::{S3, S3Error, S3ErrorCode, S3Request, S3Response, S3Result, TrailingHeaders};
use tracing::Instrument;

use super::S3Options;
use super::abandoned_uploads;
use super::body::{BodyTally, DeclaredBody, tallied};
use super::checksum::{self, Completion, Declared};
use super::conditions::{self, Conditions, Precondition};
use super::copy::{self, Directive};
use super::errors::{from_data, from_meta, s3};
use super::listing::{page_uploads, start_after_marker, url_encode};
use super::read_body;
use super::unsupported::refuse_unsupported;
use crate::data::{ObjectData, Redundancy, Written};

/// Name of the request latency histogram (seconds), labelled by `operation` and `outcome`.
pub const REQUEST_SECONDS_METRIC: &str = "lowtail_s3_request_seconds";
/// Largest `max-buckets` of a ListBuckets (S3's limit).
const MAX_LIST_BUCKETS: i32 = 10_000;
/// Most keys one DeleteObjects request may name (S3's limit).
const MAX_DELETE_KEYS: usize = 1000;
/// Largest source a CopyObject copies (S3's limit; larger objects are copied part by part with
/// UploadPartCopy, as clients do). Bounds how long one request runs, not its memory (see `copy_bytes`).
const MAX_COPY_OBJECT_BYTES: u64 = 5 << 30;

/// What a request says about the body it sends.
struct BodyClaims<'a> {
    content_length: Option<i64>,
    content_md5: Option<&'a str>,
    /// The S3 checksum to check and keep, if any.
    checksum: Option<Declared>,
    /// Where an aws-chunked body's trailers arrive.
    trailers: Option<&'a TrailingHeaders>,
}

/// A body stored by `write_body`.
struct WrittenBody {
    written: Written,
    /// Hex MD5.
    etag: String,
    size_bytes: u64,
    checksum: Option<StoredChecksum>,
}

/// The S3 service: S3 semantics over a metadata store and an object data store.
pub struct LowtailS3 {
    meta: Arc<dyn MetaStore>,
    data: Arc<dyn ObjectData>,
    options: S3Options,
}

impl std::fmt::Debug for LowtailS3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LowtailS3").field("options", &self.options).finish_non_exhaustive()
    }
}

impl LowtailS3 {
    /// A service storing metadata in `meta` and object bytes in `data`.
    pub fn new(meta: Arc<dyn MetaStore>, data: Arc<dyn ObjectData>, options: S3Options) -> Self {
        LowtailS3 { meta, data, options }
    }

    /// Frees a layout nothing references any more. A failure leaks space but loses no data, so it is
    /// logged rather than failing a request whose change is already committed.
    /// The answer to a CompleteMultipartUpload whose upload is gone because this very completion
    /// already succeeded (a client retrying after a timeout): the object the upload became, with the
    /// ETag the same parts make. `None` when the key holds anything else.
    async fn completed_already(
        &self,
        input: &CompleteMultipartUploadInput,
        requested: &[CompletedPart],
    ) -> S3Result<Option<S3Response<CompleteMultipartUploadOutput>>> {
        let object = match self.meta.get_object(&input.bucket, &input.key).await {
            Ok(object) => object,
            Err(MetaError::NoSuchKey { .. }) => return Ok(None),
            Err(error) => return Err(from_meta(error)),
        };
        let etags: Vec<&str> = requested.iter().map(|part| part.etag.as_str()).collect();
        let same = object.completed_upload_id.as_deref() == Some(input.upload_id.as_str())
            && object.etag == multipart_etag(&etags)?;
        Ok(same.then(|| completed(input, object.etag.clone(), object.checksum.as_ref())))
    }

    async fn release(&self, layout: &Layout) {
        if let Err(error) = self.data.release(layout).await {
            tracing::warn!(%error, "could not release an unreferenced layout; its space leaks");
        }
    }

    /// Settles a metadata commit of a version whose bytes are `written`: on success the version it
    /// replaced (now unreferenced) is released, on failure `written` is, so neither leaks.
    async fn settle_commit(&self, committed: Result<Option<Layout>, MetaError>, written: &Layout) -> S3Result<()> {
        match committed {
            Ok(replaced) => {
                if let Some(replaced) = replaced {
                    self.release(&replaced).await;
                }
                Ok(())
            }
            Err(error) => {
                self.release(written).await;
                Err(from_meta(error))
            }
        }
    }

    /// Streams a request body into the data path and returns its layout, ETag (hex MD5), size and
    /// S3 checksum. The body is never held whole: the data path writes each stripe as its bytes
    /// arrive. A body above `max_object_bytes` (EntityTooLarge), one that fails to arrive
    /// (IncompleteBody, or the signature error of a streaming upload), or one unlike its
    /// Content-Length, Content-MD5 or checksum (IncompleteBody, BadDigest) leaves nothing stored.
    async fn write_body(&self, body: Option<StreamingBlob>, claims: BodyClaims<'_>) -> S3Result<WrittenBody> {
        let limit = self.options.max_object_bytes;
        let declared = DeclaredBody::new(claims.content_length, claims.content_md5, limit)?;
        let mut tally = BodyTally::with_checksum(claims.checksum.as_ref());
        let idle = self.options.body_idle_timeout;
        let written = self.data.write_stream(tallied(body, limit, idle, &mut tally)).await;
        let written = match written {
            Ok(written) => written,
            // The body's own failure is what the client needs to hear, not the write it stopped.
            Err(error) => return Err(tally.take_error().unwrap_or_else(|| from_data(error))),
        };
        let checksum = declared.check(&tally).and_then(|()| match (&claims.checksum, tally.take_checksum_digest()) {
            (Some(checksum), Some(digest)) => {
                // The trailers of an aws-chunked body are known once the body has been read.
                let trailers = claims.trailers.and_then(TrailingHeaders::take);
                checksum.verify(&digest, trailers.as_ref()).map(Some)
            }
            _ => Ok(None),
        });
        match checksum {
            Ok(checksum) => Ok(WrittenBody { etag: tally.etag(), size_bytes: tally.size_bytes(), checksum, written }),
            Err(error) => {
                self.release(&written.layout).await;
                Err(error)
            }
        }
    }

    /// The object's metadata, with conditional headers checked (412 / 304).
    async fn object_for_read(&self, bucket: &str, key: &str, conditions: &Conditions<'_>) -> S3Result<ObjectMeta> {
        check_key(key)?;
        let object = self.meta.get_object(bucket, key).await.map_err(from_meta)?;
        match conditions::evaluate(conditions, &object.etag, object.last_modified_ms) {
            Precondition::Proceed => Ok(object),
            Precondition::Failed => Err(s3(S3ErrorCode::PreconditionFailed, "a precondition does not hold")),
            Precondition::NotModified => {
                let mut error = S3Error::new(S3ErrorCode::NotModified);
                let mut headers = hyper::HeaderMap::new();
                if let Ok(value) = hyper::header::HeaderValue::from_str(&format!("\"{}\"", object.etag)) {
                    headers.insert(hyper::header::ETAG, value);
                }
                error.set_headers(headers);
                Err(error)
            }
        }
    }

    /// The object an `x-amz-copy-source` names, with its bucket and key, once its
    /// `x-amz-copy-source-if-*` headers hold. A copy never answers 304: a condition that does not
    /// hold is 412 either way, as S3 specifies.
    async fn copy_source<'a>(
        &self,
        source: &'a CopySource,
        conditions: &Conditions<'_>,
    ) -> S3Result<(&'a str, &'a str, ObjectMeta)> {
        let (bucket, key) = copy::source_object(source)?;
        check_key(key)?;
        let object = self.meta.get_object(bucket, key).await.map_err(from_meta)?;
        match conditions::evaluate(conditions, &object.etag, object.last_modified_ms) {
            Precondition::Proceed => Ok((bucket, key, object)),
            Precondition::Failed | Precondition::NotModified => {
                Err(s3(S3ErrorCode::PreconditionFailed, "a copy source precondition does not hold"))
            }
        }
    }

    /// Copies a whole object's bytes to a new layout, read through the same data path as GetObject
    /// and written through the same one as PutObject. Returns the layout, the copy's ETag and its
    /// checksum as `plan` says, computed from the bytes read; the ETag must equal the source's, or
    /// nothing is kept (a copy never stores bytes that differ from what the source's ETag vouches
    /// for).
    ///
    /// A multipart source is copied part by part into the same parts, so the copy has the source's
    /// multipart ETag; any other source is copied as one object. Either way the bytes stream from
    /// the read to the write (`copy_range`) and no write exceeds `max_object_bytes`. If anything
    /// fails, what was written is released.
    async fn copy_bytes(
        &self,
        source: &ObjectMeta,
        plan: UploadChecksum,
    ) -> S3Result<(Written, String, StoredChecksum)> {
        let (written, etag, checksum) = match &source.layout {
            Layout::Composite { pieces } => self.copy_parts(source, pieces, plan).await?,
            Layout::Striped { .. } | Layout::Packed { .. } => {
                let mut hasher = Some(checksum::Hasher::new(plan.algorithm));
                let (written, etag) = self.copy_range(&source.layout, 0..source.size_bytes, &mut hasher).await?;
                let digest = hasher.map(checksum::Hasher::finalize).unwrap_or_default();
                (written, etag, checksum::full(plan.algorithm, &digest))
            }
        };
        if etag != source.etag {
            self.release(&written.layout).await;
            tracing::error!(
                source_etag = %source.etag,
                read_etag = %etag,
                "the bytes read for a copy differ from its source's"
            );
            return Err(s3(S3ErrorCode::InternalError, "the bytes read for the copy do not match the source's ETag"));
        }
        Ok((written, etag, checksum))
    }

    /// `copy_bytes` of a multipart source: part by part, each part's checksum computed on its own
    /// for a COMPOSITE `plan`, all of them in one for a FULL_OBJECT one.
    async fn copy_parts(
        &self,
        source: &ObjectMeta,
        pieces: &[CompositePiece],
        plan: UploadChecksum,
    ) -> S3Result<(Written, String, StoredChecksum)> {
        let mut copied = Vec::with_capacity(pieces.len());
        let mut etags = Vec::with_capacity(pieces.len());
        let mut part_digests = Vec::with_capacity(pieces.len());
        let mut whole = (!plan.composite).then(|| checksum::Hasher::new(plan.algorithm));
        let mut redundancy: Option<Redundancy> = None;
        for piece in pieces {
            let range = piece.object_offset_bytes..piece.object_offset_bytes + piece.length_bytes;
            let mut part = plan.composite.then(|| checksum::Hasher::new(plan.algorithm));
            let hasher = if plan.composite { &mut part } else { &mut whole };
            match self.copy_range(&source.layout, range, hasher).await {
                Ok((written, etag)) => {
                    copied.push(CompositePiece {
                        object_offset_bytes: piece.object_offset_bytes,
                        length_bytes: piece.length_bytes,
                        layout: written.layout,
                    });
                    redundancy = Some(redundancy.map_or(written.redundancy, |r| r.min(written.redundancy)));
                    etags.push(etag);
                    part_digests.extend(part.map(checksum::Hasher::finalize));
                }
                Err(error) => {
                    self.release(&Layout::Composite { pieces: copied }).await;
                    return Err(error);
                }
            }
        }
        let layout = Layout::Composite { pieces: copied };
        let checksum = match whole {
            Some(whole) => checksum::full(plan.algorithm, &whole.finalize()),
            None => checksum::composite(plan.algorithm, &part_digests),
        };
        match (multipart_etag(&etags.iter().map(String::as_str).collect::<Vec<_>>()), redundancy) {
            (Ok(etag), Some(redundancy)) => Ok((Written { layout, redundancy }, etag, checksum)),
            (Err(error), _) => {
                self.release(&layout).await;
                Err(error)
            }
            (Ok(_), None) => Err(s3(S3ErrorCode::InternalError, "a multipart source without parts")),
        }
    }

    /// Reads bytes `range` of the object at `layout` and writes them as a new layout (at most
    /// `max_object_bytes`, EntityTooLarge beyond, as for a PutObject body). Returns the layout and
    /// the hex MD5 of the bytes, and feeds them to `hasher` if there is one. The bytes stream from
    /// the read to the write in the reads a GetObject body is cut into, so a copy holds no more of
    /// them than a streamed PutObject.
    async fn copy_range(
        &self,
        layout: &Layout,
        range: std::ops::Range<u64>,
        hasher: &mut Option<checksum::Hasher>,
    ) -> S3Result<(Written, String)> {
        let length = range.end - range.start;
        let limit = self.options.max_object_bytes;
        if length > limit {
            return Err(s3(
                S3ErrorCode::EntityTooLarge,
                format!("copying {length} bytes at once exceeds the limit of {limit}"),
            ));
        }
        let mut md5 = Md5::new();
        // The source stays readable to the end even if it is overwritten or deleted meanwhile.
        let _hold = self.data.hold(layout);
        let pieces = read_body::read_pieces(layout, range, read_body::READ_PIECE_BYTES);
        let reads = futures_util::stream::iter(pieces)
            .then(|piece| read_body::read_exact(self.data.as_ref(), layout, piece))
            .inspect(|read| {
                if let Ok(bytes) = read {
                    md5.update(bytes);
                    if let Some(hasher) = hasher.as_mut() {
                        hasher.update(bytes);
                    }
                }
            });
        let written = self.data.write_stream(reads.boxed()).await.map_err(from_data)?;
        Ok((written, hex::encode(md5.finalize())))
    }

    async fn list_v2(&self, bucket: &str, query: &ListObjectsQuery) -> S3Result<ObjectListing> {
        self.meta.list_objects(bucket, query).await.map_err(from_meta)
    }
}

/// Header of a write's response: how many node failures its bytes survive as acknowledged.
pub const FAILURES_TOLERATED_HEADER: &str = "x-lowtail-failures-tolerated";
/// Header of a write's response: `full`, or `degraded` when some units could not be stored and
/// repair still owes them (the durability contract's "reported in the response").
pub const REDUNDANCY_HEADER: &str = "x-lowtail-redundancy";

/// Adds the redundancy headers of a write's acknowledgement to its response.
fn with_redundancy<T>(mut response: S3Response<T>, redundancy: Redundancy) -> S3Response<T> {
    let state = if redundancy.is_full() { "full" } else { "degraded" };
    response.headers.insert(FAILURES_TOLERATED_HEADER, hyper::header::HeaderValue::from(redundancy.failures_tolerated));
    response.headers.insert(REDUNDANCY_HEADER, hyper::header::HeaderValue::from_static(state));
    response
}

/// Runs one operation inside a tracing span and records its latency in the request histogram.
async fn observe<T>(operation: &'static str, work: impl Future<Output = S3Result<T>>) -> S3Result<T> {
    let started = Instant::now();
    let result = work.instrument(tracing::info_span!("s3", operation)).await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(error) if error.status_code().is_some_and(|status| status.is_server_error()) => "server_error",
        Err(_) => "client_error",
    };
    metrics::histogram!(REQUEST_SECONDS_METRIC, "operation" => operation, "outcome" => outcome)
        .record(started.elapsed().as_secs_f64());
    match result {
        Err(mut error) => {
            // A client's mistake is not the server's failure: only the latter is worth a warning.
            if outcome == "server_error" {
                tracing::warn!(operation, code = error.code().as_str(), message = error.message(), "request failed");
            } else {
                tracing::debug!(operation, code = error.code().as_str(), message = error.message(), "request failed");
            }
            // The error document names the request, as its x-amz-request-id header does.
            if let Some(id) = super::server::current_request_id() {
                error.set_request_id(id);
            }
            Err(error)
        }
        ok => ok,
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_millis() as u64).unwrap_or(0)
}

/// The standard headers of a PUT or CreateMultipartUpload input (distinct s3s types with the same
/// field names), as the metadata store keeps them.
macro_rules! content_headers {
    ($input:expr) => {
        ContentHeaders {
            cache_control: $input.cache_control,
            content_disposition: $input.content_disposition,
            content_encoding: stored_content_encoding($input.content_encoding),
            content_language: $input.content_language,
            expires_ms: $input.expires.map(timestamp_ms),
        }
    };
}

/// Sets the checksum value fields of `$output` (any s3s output with S3's five `checksum_*`
/// fields) from an `Option<&StoredChecksum>`; with `with_type`, its `checksum_type` too (the
/// outputs that have one).
macro_rules! set_checksum {
    ($output:expr, $stored:expr) => {{
        let fields = checksum::fields($stored);
        $output.checksum_crc32 = fields.checksum_crc32;
        $output.checksum_crc32c = fields.checksum_crc32c;
        $output.checksum_crc64nvme = fields.checksum_crc64nvme;
        $output.checksum_sha1 = fields.checksum_sha1;
        $output.checksum_sha256 = fields.checksum_sha256;
    }};
    ($output:expr, $stored:expr, with_type) => {{
        let stored: Option<&StoredChecksum> = $stored;
        set_checksum!($output, stored);
        $output.checksum_type = stored.map(|stored| checksum::type_of(stored.composite));
    }};
}

/// Whether a GET or HEAD returns the object's checksum: asked for (`x-amz-checksum-mode: ENABLED`)
/// and answering the whole object (a range's bytes are not what the checksum covers).
fn checksum_asked(mode: Option<&ChecksumMode>, length: u64, object: &ObjectMeta) -> bool {
    mode.is_some_and(|mode| mode.as_str().eq_ignore_ascii_case(ChecksumMode::ENABLED)) && length == object.size_bytes
}

/// The Content-Encoding to keep: without `aws-chunked`, which describes how this request's body
/// was sent, not the object (S3 drops it too); none if nothing else was named.
fn stored_content_encoding(sent: Option<String>) -> Option<String> {
    let sent = sent?;
    let kept: Vec<&str> = sent
        .split(',')
        .map(str::trim)
        .filter(|coding| !coding.is_empty() && !coding.eq_ignore_ascii_case("aws-chunked"))
        .collect();
    (!kept.is_empty()).then(|| kept.join(", "))
}

/// The object a GET or HEAD input (distinct s3s types with the same field names) names, once its
/// conditional headers hold, with the byte range to answer and its Content-Range.
macro_rules! read_target {
    ($self:ident, $input:expr) => {{
        let input = &$input;
        let conditions = Conditions {
            if_match: input.if_match.as_ref(),
            if_none_match: input.if_none_match.as_ref(),
            if_modified_since: input.if_modified_since.as_ref(),
            if_unmodified_since: input.if_unmodified_since.as_ref(),
        };
        let object = $self.object_for_read(&input.bucket, &input.key, &conditions).await?;
        let (range, content_range, parts_count) = match input.part_number {
            None => {
                let (range, content_range) = resolve_range(input.range.as_ref(), object.size_bytes)?;
                (range, content_range, None)
            }
            Some(_) if input.range.is_some() => {
                return Err(s3(
                    S3ErrorCode::InvalidRequest,
                    "Cannot specify both Range header and partNumber query parameter",
                ));
            }
            Some(number) => part_range(&object, number)?,
        };
        (object, range, content_range, parts_count)
    }};
}

/// What GET and HEAD both answer about an object (`$output` is `GetObjectOutput` or
/// `HeadObjectOutput`: distinct s3s types with the same field names), plus `$extra` fields.
macro_rules! object_answer {
    ($output:ident, $object:expr, $length:expr, $content_range:expr, { $($field:ident: $value:expr),* $(,)? }) => {
        $output {
            $($field: $value,)*
            content_length: Some($length as i64),
            content_range: $content_range,
            accept_ranges: Some("bytes".into()),
            e_tag: Some(ETag::Strong($object.etag.clone())),
            last_modified: Some(timestamp($object.last_modified_ms)),
            metadata: output_metadata(&$object),
            content_type: Some($object.content_type.clone().unwrap_or_else(|| DEFAULT_CONTENT_TYPE.into())),
            cache_control: $object.headers.cache_control.clone(),
            content_disposition: $object.headers.content_disposition.clone(),
            content_encoding: $object.headers.content_encoding.clone(),
            content_language: $object.headers.content_language.clone(),
            expires: $object.headers.expires_ms.map(timestamp),
            ..Default::default()
        }
    };
}

fn timestamp(ms: u64) -> Timestamp {
    Timestamp::from(UNIX_EPOCH + Duration::from_millis(ms))
}

/// Unix milliseconds of a client's timestamp (0 for one before 1970, which S3 clients do not send).
fn timestamp_ms(time: Timestamp) -> u64 {
    let time = time::OffsetDateTime::from(time);
    u64::try_from(time.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

/// The bytes a GET or HEAD returns and, for a ranged request, its Content-Range header.
fn resolve_range(requested: Option<&s3s::dto::Range>, size: u64) -> S3Result<(std::ops::Range<u64>, Option<String>)> {
    let Some(requested) = requested else { return Ok((0..size, None)) };
    let range = requested.check(size).map_err(|_| {
        s3(S3ErrorCode::InvalidRange, format!("the range is not satisfiable for an object of {size} bytes"))
    })?;
    let content_range = format!("bytes {}-{}/{size}", range.start, range.end - 1);
    Ok((range, Some(content_range)))
}

/// The bytes of part `number` of `object` (GET and HEAD `?partNumber=N`), its Content-Range and the
/// object's part count: a multipart object's parts are its composite pieces, in order; any other
/// object is one part. A part past the last → 416 InvalidPartNumber, as S3 answers.
fn part_range(object: &ObjectMeta, number: i32) -> S3Result<(std::ops::Range<u64>, Option<String>, Option<i32>)> {
    let index =
        usize::try_from(number).ok().filter(|n| (1..=usize::from(MAX_PART_NUMBER)).contains(n)).ok_or_else(|| {
            s3(S3ErrorCode::InvalidArgument, "Part number must be an integer between 1 and 10000, inclusive")
        })? - 1;
    let (range, parts_count) = match &object.layout {
        Layout::Composite { pieces } => {
            let piece = pieces
                .get(index)
                .ok_or_else(|| invalid_part_number(format!("the object has {} parts, not {number}", pieces.len())))?;
            let start = piece.object_offset_bytes;
            (start..start + piece.length_bytes, Some(i32::try_from(pieces.len()).unwrap_or(i32::MAX)))
        }
        _ if index == 0 => (0..object.size_bytes, None),
        _ => return Err(invalid_part_number(format!("the object has 1 part, not {number}"))),
    };
    let size = object.size_bytes;
    let content_range = (!range.is_empty()).then(|| format!("bytes {}-{}/{size}", range.start, range.end - 1));
    Ok((range, content_range, parts_count))
}

/// S3's 416 InvalidPartNumber ("The requested partnumber is not satisfiable"), which s3s does not name.
fn invalid_part_number(message: String) -> s3s::S3Error {
    let mut error = s3(S3ErrorCode::Custom("InvalidPartNumber".into()), message);
    error.set_status_code(hyper::StatusCode::RANGE_NOT_SATISFIABLE);
    error
}

fn check_key(key: &str) -> S3Result<()> {
    if key.len() > MAX_KEY_BYTES {
        return Err(s3(
            S3ErrorCode::KeyTooLongError,
            format!("the key is {} bytes; the limit is {MAX_KEY_BYTES}", key.len()),
        ));
    }
    if key.is_empty() {
        return Err(s3(S3ErrorCode::InvalidArgument, "the object key must not be empty"));
    }
    Ok(())
}

/// S3's bucket naming rules (the metadata store's check) as an S3 `InvalidBucketName`.
fn check_bucket_name(name: &str) -> S3Result<()> {
    meta::validate::bucket_name(name).map_err(|error| s3(S3ErrorCode::InvalidBucketName, error.to_string()))
}

/// S3's bound on an object's user metadata: the bytes of every `x-amz-meta-*` name and value.
const MAX_USER_METADATA_BYTES: usize = 2048;
/// The Content-Type S3 answers for an object stored without one.
const DEFAULT_CONTENT_TYPE: &str = "binary/octet-stream";

/// `x-amz-meta-*` names lower-cased, as HTTP header names are case-insensitive; MetadataTooLarge
/// beyond [`MAX_USER_METADATA_BYTES`], before anything is stored.
fn user_metadata(metadata: Option<Metadata>) -> S3Result<std::collections::BTreeMap<String, String>> {
    let metadata: std::collections::BTreeMap<String, String> =
        metadata.unwrap_or_default().into_iter().map(|(name, value)| (name.to_ascii_lowercase(), value)).collect();
    let bytes: usize = metadata.iter().map(|(name, value)| name.len() + value.len()).sum();
    if bytes > MAX_USER_METADATA_BYTES {
        return Err(s3(
            S3ErrorCode::MetadataTooLarge,
            format!("user metadata of {bytes} bytes exceeds the limit of {MAX_USER_METADATA_BYTES}"),
        ));
    }
    Ok(metadata)
}

fn output_metadata(object: &ObjectMeta) -> Option<Metadata> {
    (!object.user_metadata.is_empty()).then(|| object.user_metadata.clone().into_iter().collect())
}

fn max_keys(requested: Option<i32>) -> S3Result<usize> {
    match requested {
        None => Ok(MAX_LIST_KEYS),
        Some(value) if value < 0 => Err(s3(S3ErrorCode::InvalidArgument, "max-keys must not be negative")),
        Some(value) => Ok((value as usize).min(MAX_LIST_KEYS)),
    }
}

/// Encodes a key, prefix or marker for a listing answer.
type Encode = fn(&str) -> String;

/// Whether the client asked for `encoding-type=url`, and the function that encodes accordingly.
fn encoder(encoding_type: &Option<EncodingType>) -> S3Result<(bool, Encode)> {
    match encoding_type.as_ref().map(EncodingType::as_str) {
        None => Ok((false, str::to_string)),
        Some(EncodingType::URL) => Ok((true, url_encode)),
        Some(other) => Err(s3(S3ErrorCode::InvalidArgument, format!("unknown encoding type {other:?}"))),
    }
}

fn owner(credentials: Option<&s3s::auth::Credentials>) -> Option<Owner> {
    credentials.map(|credentials| Owner {
        display_name: Some(credentials.access_key.clone()),
        id: Some(credentials.access_key.clone()),
    })
}

fn listed_object(key: String, object: &ObjectMeta, owner: Option<Owner>) -> Object {
    Object {
        key: Some(key),
        size: Some(object.size_bytes as i64),
        e_tag: Some(ETag::Strong(object.etag.clone())),
        last_modified: Some(timestamp(object.last_modified_ms)),
        storage_class: Some(ObjectStorageClass::from_static(ObjectStorageClass::STANDARD)),
        owner,
        ..Default::default()
    }
}

/// A listing's delimiter: an empty one is no delimiter, and is neither applied nor echoed (S3 answers
/// without a `Delimiter` element then).
fn delimiter(requested: Option<String>) -> Option<String> {
    requested.filter(|delimiter| !delimiter.is_empty())
}

fn common_prefixes(prefixes: &[String], encode: Encode) -> Option<CommonPrefixList> {
    (!prefixes.is_empty())
        .then(|| prefixes.iter().map(|prefix| CommonPrefix { prefix: Some(encode(prefix)) }).collect())
}

/// The v1 / ListObjectVersions next marker: the last entry of the page, key or common prefix.
fn last_entry(listing: &ObjectListing) -> Option<String> {
    let last_key = listing.objects.last().map(|object| object.key.clone());
    let last_prefix = listing.common_prefixes.last().cloned();
    last_key.max(last_prefix)
}

/// The ETag of a completed multipart upload: MD5 of the parts' binary MD5s, then `-` and the count.
fn multipart_etag(part_etags: &[&str]) -> S3Result<String> {
    let mut hasher = Md5::new();
    for etag in part_etags {
        let binary = hex::decode(etag).map_err(|_| s3(S3ErrorCode::InternalError, "a stored part ETag is not hex"))?;
        hasher.update(binary);
    }
    Ok(format!("{}-{}", hex::encode(hasher.finalize()), part_etags.len()))
}

fn part_number(number: i32) -> S3Result<u16> {
    u16::try_from(number).ok().filter(|number| (1..=MAX_PART_NUMBER).contains(number)).ok_or_else(|| {
        s3(S3ErrorCode::InvalidArgument, format!("part number must be an integer between 1 and {MAX_PART_NUMBER}"))
    })
}

#[async_trait::async_trait]
impl S3 for LowtailS3 {
    async fn list_buckets(&self, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        observe("ListBuckets", async {
            let input = req.input;
            let max_buckets = match input.max_buckets {
                None => usize::MAX,
                Some(max) if (1..=MAX_LIST_BUCKETS).contains(&max) => max as usize,
                Some(max) => {
                    return Err(s3(
                        S3ErrorCode::InvalidArgument,
                        format!("max-buckets is {max}; it must be between 1 and {MAX_LIST_BUCKETS}"),
                    ));
                }
            };
            let prefix = input.prefix.clone().unwrap_or_default();
            let after = input.continuation_token.clone().unwrap_or_default();
            let region_of = |bucket: &BucketMeta| bucket.region.clone().unwrap_or_else(|| self.options.region.clone());
            let mut listed = self.meta.list_buckets().await.map_err(from_meta)?.into_iter().filter(|bucket| {
                bucket.name.starts_with(&prefix)
                    && bucket.name > after
                    && input.bucket_region.as_ref().is_none_or(|region| *region == region_of(bucket))
            });
            let buckets: Vec<Bucket> = listed
                .by_ref()
                .take(max_buckets)
                .map(|bucket| Bucket {
                    name: Some(bucket.name.clone()),
                    creation_date: Some(timestamp(bucket.created_ms)),
                    bucket_region: Some(region_of(&bucket)),
                })
                .collect();
            // The token is the last name listed: names are unique and listed in order.
            let continuation_token = listed.next().and(buckets.last()).and_then(|bucket| bucket.name.clone());
            let output = ListBucketsOutput {
                buckets: Some(buckets),
                owner: owner(req.credentials.as_ref()),
                continuation_token,
                prefix: input.prefix,
            };
            Ok(S3Response::new(output))
        })
        .await
    }

    async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        observe("CreateBucket", async {
            refuse_unsupported(&req.headers)?;
            let name = req.input.bucket;
            check_bucket_name(&name)?;
            let region = req
                .input
                .create_bucket_configuration
                .and_then(|configuration| configuration.location_constraint)
                .map(|constraint| constraint.as_str().to_string())
                .filter(|region| !region.is_empty());
            let requester = req.credentials.as_ref().map(|credentials| credentials.access_key.clone());
            let bucket = BucketMeta { name: name.clone(), created_ms: now_ms(), region, owner: requester.clone() };
            match self.meta.create_bucket(bucket).await {
                Ok(()) => {}
                Err(MetaError::BucketAlreadyExists(_)) => {
                    let existing = self.meta.get_bucket(&name).await.map_err(from_meta)?;
                    let code = if existing.owner == requester {
                        S3ErrorCode::BucketAlreadyOwnedByYou
                    } else {
                        S3ErrorCode::BucketAlreadyExists
                    };
                    return Err(s3(code, format!("bucket {name} already exists")));
                }
                Err(error) => return Err(from_meta(error)),
            }
            let output = CreateBucketOutput { location: Some(format!("/{name}")) };
            Ok(S3Response::new(output))
        })
        .await
    }

    async fn delete_bucket(&self, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
        observe("DeleteBucket", async {
            let bucket = &req.input.bucket;
            // S3 deletes a bucket without objects whatever uploads are pending, aborting them. One
            // begun after this still makes the delete fail with BucketNotEmpty, as an object would.
            let query = meta::ListObjectsQuery { max_keys: 1, ..Default::default() };
            let listing = self.meta.list_objects(bucket, &query).await.map_err(from_meta)?;
            if listing.objects.is_empty() {
                abandoned_uploads::abort_uploads(self.meta.as_ref(), self.data.as_ref(), bucket, u64::MAX)
                    .await
                    .map_err(from_meta)?;
            }
            self.meta.delete_bucket(bucket).await.map_err(from_meta)?;
            Ok(S3Response::new(DeleteBucketOutput::default()))
        })
        .await
    }

    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        observe("HeadBucket", async {
            let bucket = self.meta.get_bucket(&req.input.bucket).await.map_err(from_meta)?;
            let region = bucket.region.unwrap_or_else(|| self.options.region.clone());
            let mut response = S3Response::new(HeadBucketOutput { bucket_region: Some(region), ..Default::default() });
            // Current SDKs read the bucket's ARN from HeadBucket (s3s 0.14 has no field for it).
            if let Ok(arn) = hyper::header::HeaderValue::from_str(&format!("arn:aws:s3:::{}", bucket.name)) {
                response.headers.insert("x-amz-bucket-arn", arn);
            }
            Ok(response)
        })
        .await
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        observe("GetBucketLocation", async {
            let bucket = self.meta.get_bucket(&req.input.bucket).await.map_err(from_meta)?;
            // S3 answers an empty constraint for us-east-1.
            let location_constraint =
                bucket.region.filter(|region| region != "us-east-1").map(BucketLocationConstraint::from);
            Ok(S3Response::new(GetBucketLocationOutput { location_constraint }))
        })
        .await
    }

    /// Buckets are never versioned: S3's answer for a bucket whose versioning was never enabled, a
    /// configuration without `Status` (clients such as rclone's purge ask before deleting).
    async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        observe("GetBucketVersioning", async {
            self.meta.get_bucket(&req.input.bucket).await.map_err(from_meta)?;
            Ok(S3Response::new(GetBucketVersioningOutput::default()))
        })
        .await
    }

    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        observe("PutObject", async {
            refuse_unsupported(&req.headers)?;
            let mut input = req.input;
            check_key(&input.key)?;
            let metadata = user_metadata(input.metadata.take())?;
            // Before reading the body, so a request into a missing bucket writes no data.
            self.meta.get_bucket(&input.bucket).await.map_err(from_meta)?;
            if input.if_match.is_some() || input.if_none_match.is_some() {
                // Conditional writes: checked before the write, not atomically with the commit.
                let existing = match self.meta.get_object(&input.bucket, &input.key).await {
                    Ok(object) => Some(object),
                    Err(MetaError::NoSuchKey { .. }) => None,
                    Err(error) => return Err(from_meta(error)),
                };
                let holds = match (&existing, &input.if_match, &input.if_none_match) {
                    (None, Some(_), _) => return Err(s3(S3ErrorCode::NoSuchKey, "the object does not exist")),
                    (Some(object), Some(condition), _) if !conditions::etag_matches(condition, &object.etag) => false,
                    (Some(object), _, Some(condition)) => !conditions::etag_matches(condition, &object.etag),
                    _ => true,
                };
                if !holds {
                    return Err(s3(S3ErrorCode::PreconditionFailed, "a precondition does not hold"));
                }
            }
            // Without a checksum of its own, an object gets S3's default, CRC64NVME.
            let claims = BodyClaims {
                content_length: input.content_length,
                content_md5: input.content_md5.as_deref(),
                checksum: Declared::from_headers(&req.headers, Some(meta::ChecksumAlgorithm::Crc64nvme))?,
                trailers: req.trailing_headers.as_ref(),
            };
            let body = self.write_body(input.body.take(), claims).await?;
            let object = ObjectMeta {
                size_bytes: body.size_bytes,
                etag: body.etag.clone(),
                content_type: input.content_type.take(),
                user_metadata: metadata,
                headers: content_headers!(input),
                last_modified_ms: now_ms(),
                completed_upload_id: None,
                checksum: body.checksum.clone(),
                layout: body.written.layout.clone(),
            };
            let committed = self.meta.put_object(&input.bucket, &input.key, object).await;
            self.settle_commit(committed.map(|replaced| replaced.map(|version| version.layout)), &body.written.layout)
                .await?;
            let mut output = PutObjectOutput {
                e_tag: Some(ETag::Strong(body.etag)),
                size: i64::try_from(body.size_bytes).ok(),
                ..Default::default()
            };
            set_checksum!(output, body.checksum.as_ref(), with_type);
            Ok(with_redundancy(S3Response::new(output), body.written.redundancy))
        })
        .await
    }

    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        observe("GetObject", async {
            let (object, range, content_range, parts_count) = read_target!(self, req.input);
            let length = range.end - range.start;
            // Read piece by piece: the first before answering, the rest as the client takes them,
            // all under a hold, so an overwrite or delete meanwhile waits to free the bytes.
            let hold = self.data.hold(&object.layout);
            let mut pieces = read_body::read_pieces(&object.layout, range, read_body::READ_PIECE_BYTES).into_iter();
            let first = match pieces.next() {
                None => Bytes::new(),
                Some(piece) => {
                    read_body::read_exact(self.data.as_ref(), &object.layout, piece).await.map_err(from_data)?
                }
            };
            let rest: Vec<_> = pieces.collect();
            let body = if rest.is_empty() {
                StreamingBlob::from(s3s::Body::from(first))
            } else {
                read_body::streamed(Arc::clone(&self.data), object.layout.clone(), hold, first, rest)
            };
            let mut output =
                object_answer!(GetObjectOutput, object, length, content_range, { body: Some(body), parts_count: parts_count });
            if checksum_asked(req.input.checksum_mode.as_ref(), length, &object) {
                set_checksum!(output, object.checksum.as_ref(), with_type);
            }
            Ok(S3Response::new(output))
        })
        .await
    }

    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        observe("HeadObject", async {
            let (object, range, content_range, parts_count) = read_target!(self, req.input);
            let length = range.end - range.start;
            // A ranged HEAD answers 206; s3s 0.14 ignores a status set here for HeadObject, so
            // `server` sets it from the Content-Range header.
            let mut output =
                object_answer!(HeadObjectOutput, object, length, content_range, { parts_count: parts_count });
            if checksum_asked(req.input.checksum_mode.as_ref(), length, &object) {
                set_checksum!(output, object.checksum.as_ref(), with_type);
            }
            Ok(S3Response::new(output))
        })
        .await
    }

    /// Server-side copy: the source's bytes are read and written again (a layout belongs to one
    /// object, so a copy never shares the source's), then the destination is committed as a
    /// PutObject commits: its old version stays readable until then, and is released after.
    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        observe("CopyObject", async {
            refuse_unsupported(&req.headers)?;
            let input = req.input;
            check_key(&input.key)?;
            let directive = copy::directive(input.metadata_directive.as_ref())?;
            // Before reading the source, so a copy into a missing bucket reads and writes nothing.
            self.meta.get_bucket(&input.bucket).await.map_err(from_meta)?;
            let conditions = Conditions {
                if_match: input.copy_source_if_match.as_ref(),
                if_none_match: input.copy_source_if_none_match.as_ref(),
                if_modified_since: input.copy_source_if_modified_since.as_ref(),
                if_unmodified_since: input.copy_source_if_unmodified_since.as_ref(),
            };
            let (source_bucket, source_key, source) = self.copy_source(&input.copy_source, &conditions).await?;
            // S3 refuses a copy that would change nothing; REPLACE is the one change lowtail supports
            // (storage classes, encryption and website redirects are not).
            if source_bucket == input.bucket && source_key == input.key && directive == Directive::Copy {
                return Err(s3(
                    S3ErrorCode::InvalidRequest,
                    "This copy request is illegal because it is trying to copy an object to itself without \
                     changing the object's metadata, storage class, website redirect location or encryption \
                     attributes.",
                ));
            }
            if source.size_bytes > MAX_COPY_OBJECT_BYTES {
                return Err(s3(
                    S3ErrorCode::InvalidRequest,
                    format!(
                        "The specified copy source is larger than the maximum allowable size for a copy source: \
                         {MAX_COPY_OBJECT_BYTES}"
                    ),
                ));
            }
            let plan = checksum::for_copy(source.checksum.as_ref(), input.checksum_algorithm.as_ref())?;
            let (content_type, user_metadata, headers) = match directive {
                Directive::Copy => (source.content_type.clone(), source.user_metadata.clone(), source.headers.clone()),
                Directive::Replace => (input.content_type, user_metadata(input.metadata)?, content_headers!(input)),
            };
            let (written, etag, copied_checksum) = self.copy_bytes(&source, plan).await?;
            let last_modified_ms = now_ms();
            let object = ObjectMeta {
                size_bytes: source.size_bytes,
                etag: etag.clone(),
                content_type,
                user_metadata,
                headers,
                last_modified_ms,
                completed_upload_id: None,
                checksum: Some(copied_checksum.clone()),
                layout: written.layout.clone(),
            };
            // For a copy onto itself the replaced version is the source: releasing it is safe
            // because the new version has bytes of its own.
            let committed = self.meta.put_object(&input.bucket, &input.key, object).await;
            self.settle_commit(committed.map(|replaced| replaced.map(|version| version.layout)), &written.layout)
                .await?;
            let mut result = CopyObjectResult {
                e_tag: Some(ETag::Strong(etag)),
                last_modified: Some(timestamp(last_modified_ms)),
                ..Default::default()
            };
            set_checksum!(result, Some(&copied_checksum), with_type);
            let output = CopyObjectOutput { copy_object_result: Some(result), ..Default::default() };
            Ok(with_redundancy(S3Response::new(output), written.redundancy))
        })
        .await
    }

    /// Objects never have tags (tagging is not supported): S3's answer for an object without tags,
    /// an empty tag set, rather than NotImplemented, because aws-cli asks it before every multipart
    /// server-side copy (`aws s3 cp` / `mv` between S3 locations above its 8 MiB threshold).
    async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        observe("GetObjectTagging", async {
            check_key(&req.input.key)?;
            self.meta.get_object(&req.input.bucket, &req.input.key).await.map_err(from_meta)?;
            Ok(S3Response::new(GetObjectTaggingOutput { tag_set: Vec::new(), version_id: None }))
        })
        .await
    }

    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        observe("DeleteObject", async {
            check_key(&req.input.key)?;
            let removed = self.meta.delete_object(&req.input.bucket, &req.input.key).await.map_err(from_meta)?;
            if let Some(removed) = removed {
                self.release(&removed.layout).await;
            }
            Ok(S3Response::new(DeleteObjectOutput::default()))
        })
        .await
    }

    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        observe("DeleteObjects", async {
            check_multi_delete_body(&req.headers)?;
            let input = req.input;
            if input.delete.objects.len() > MAX_DELETE_KEYS {
                return Err(s3(S3ErrorCode::MalformedXML, format!("at most {MAX_DELETE_KEYS} keys per request")));
            }
            self.meta.get_bucket(&input.bucket).await.map_err(from_meta)?;
            let quiet = input.delete.quiet.unwrap_or(false);
            let (mut deleted, mut errors) = (Vec::new(), Vec::new());
            for identifier in input.delete.objects {
                let outcome = match check_key(&identifier.key) {
                    Ok(()) => self.meta.delete_object(&input.bucket, &identifier.key).await.map_err(from_meta),
                    Err(error) => Err(error),
                };
                match outcome {
                    Ok(removed) => {
                        if let Some(removed) = removed {
                            self.release(&removed.layout).await;
                        }
                        if !quiet {
                            deleted.push(DeletedObject {
                                key: Some(identifier.key),
                                version_id: identifier.version_id,
                                ..Default::default()
                            });
                        }
                    }
                    Err(error) => errors.push(Error {
                        code: Some(error.code().as_str().to_string()),
                        message: error.message().map(str::to_string),
                        key: Some(identifier.key),
                        version_id: identifier.version_id,
                    }),
                }
            }
            let output = DeleteObjectsOutput {
                deleted: (!deleted.is_empty()).then_some(deleted),
                errors: (!errors.is_empty()).then_some(errors),
                ..Default::default()
            };
            Ok(S3Response::new(output))
        })
        .await
    }

    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        observe("ListObjects", async {
            let mut input = req.input;
            input.delimiter = delimiter(input.delimiter.take());
            let (encoded, encode) = encoder(&input.encoding_type)?;
            let prefix = input.prefix.unwrap_or_default();
            let max_keys = max_keys(input.max_keys)?;
            let query = ListObjectsQuery {
                prefix: prefix.clone(),
                delimiter: input.delimiter.clone(),
                start_after: input
                    .marker
                    .as_deref()
                    .map(|marker| start_after_marker(&prefix, input.delimiter.as_deref(), marker)),
                continuation_token: None,
                max_keys,
            };
            let listing = self.list_v2(&input.bucket, &query).await?;
            let next_marker =
                if listing.is_truncated { last_entry(&listing).map(|marker| encode(&marker)) } else { None };
            // ListObjects v1 always names each object's owner (v2 only with fetch-owner).
            let owner = owner(req.credentials.as_ref());
            let contents = listing
                .objects
                .iter()
                .map(|listed| listed_object(encode(&listed.key), &listed.meta, owner.clone()))
                .collect();
            let output = ListObjectsOutput {
                name: Some(input.bucket),
                // Not encoded: clients (botocore) decode a v1 answer's Marker, NextMarker, Delimiter,
                // keys and common prefixes, but not its Prefix, so S3 returns it as sent.
                prefix: Some(prefix.clone()),
                marker: Some(input.marker.as_deref().map(encode).unwrap_or_default()),
                max_keys: Some(max_keys as i32),
                is_truncated: Some(listing.is_truncated),
                contents: Some(contents),
                common_prefixes: common_prefixes(&listing.common_prefixes, encode),
                delimiter: input.delimiter.as_deref().map(encode),
                next_marker,
                encoding_type: encoded.then(|| EncodingType::from_static(EncodingType::URL)),
                ..Default::default()
            };
            Ok(S3Response::new(output))
        })
        .await
    }

    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        observe("ListObjectsV2", async {
            let mut input = req.input;
            input.delimiter = delimiter(input.delimiter.take());
            let (encoded, encode) = encoder(&input.encoding_type)?;
            let prefix = input.prefix.unwrap_or_default();
            let max_keys = max_keys(input.max_keys)?;
            let query = ListObjectsQuery {
                prefix: prefix.clone(),
                delimiter: input.delimiter.clone(),
                start_after: input.start_after.clone(),
                continuation_token: input.continuation_token.clone(),
                max_keys,
            };
            let listing = self.list_v2(&input.bucket, &query).await?;
            let owner = if input.fetch_owner.unwrap_or(false) { owner(req.credentials.as_ref()) } else { None };
            let contents = listing
                .objects
                .iter()
                .map(|listed| listed_object(encode(&listed.key), &listed.meta, owner.clone()))
                .collect();
            let output = ListObjectsV2Output {
                name: Some(input.bucket),
                prefix: Some(encode(&prefix)),
                max_keys: Some(max_keys as i32),
                key_count: Some(listing.key_count() as i32),
                continuation_token: input.continuation_token,
                is_truncated: Some(listing.is_truncated),
                next_continuation_token: listing.next_continuation_token.clone(),
                contents: Some(contents),
                common_prefixes: common_prefixes(&listing.common_prefixes, encode),
                delimiter: input.delimiter.as_deref().map(encode),
                start_after: input.start_after.as_deref().map(encode),
                encoding_type: encoded.then(|| EncodingType::from_static(EncodingType::URL)),
                ..Default::default()
            };
            Ok(S3Response::new(output))
        })
        .await
    }

    async fn list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        observe("ListObjectVersions", async {
            let mut input = req.input;
            input.delimiter = delimiter(input.delimiter.take());
            let (encoded, encode) = encoder(&input.encoding_type)?;
            let prefix = input.prefix.unwrap_or_default();
            let max_keys = max_keys(input.max_keys)?;
            // Buckets are unversioned: every object is its only ("null") version, so the version id
            // marker adds nothing to the key marker.
            let query = ListObjectsQuery {
                prefix: prefix.clone(),
                delimiter: input.delimiter.clone(),
                start_after: input
                    .key_marker
                    .as_deref()
                    .filter(|marker| !marker.is_empty())
                    .map(|marker| start_after_marker(&prefix, input.delimiter.as_deref(), marker)),
                continuation_token: None,
                max_keys,
            };
            let listing = self.list_v2(&input.bucket, &query).await?;
            let owner = owner(req.credentials.as_ref());
            let versions = listing
                .objects
                .iter()
                .map(|listed| ObjectVersion {
                    key: Some(encode(&listed.key)),
                    version_id: Some("null".into()),
                    is_latest: Some(true),
                    size: Some(listed.meta.size_bytes as i64),
                    e_tag: Some(ETag::Strong(listed.meta.etag.clone())),
                    last_modified: Some(timestamp(listed.meta.last_modified_ms)),
                    storage_class: Some(ObjectVersionStorageClass::from_static(ObjectVersionStorageClass::STANDARD)),
                    owner: owner.clone(),
                    ..Default::default()
                })
                .collect();
            let next_key_marker =
                if listing.is_truncated { last_entry(&listing).map(|marker| encode(&marker)) } else { None };
            let output = ListObjectVersionsOutput {
                name: Some(input.bucket),
                prefix: Some(encode(&prefix)),
                key_marker: Some(input.key_marker.as_deref().map(encode).unwrap_or_default()),
                version_id_marker: Some(input.version_id_marker.unwrap_or_default()),
                max_keys: Some(max_keys as i32),
                is_truncated: Some(listing.is_truncated),
                next_version_id_marker: next_key_marker.as_ref().map(|_| "null".to_string()),
                next_key_marker,
                versions: Some(versions),
                common_prefixes: common_prefixes(&listing.common_prefixes, encode),
                delimiter: input.delimiter.as_deref().map(encode),
                encoding_type: encoded.then(|| EncodingType::from_static(EncodingType::URL)),
                ..Default::default()
            };
            Ok(S3Response::new(output))
        })
        .await
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        observe("CreateMultipartUpload", async {
            refuse_unsupported(&req.headers)?;
            let input = req.input;
            check_key(&input.key)?;
            let upload_checksum =
                checksum::for_upload(input.checksum_algorithm.as_ref(), input.checksum_type.as_ref())?;
            let upload = UploadMeta {
                upload_id: String::new(),
                bucket: input.bucket.clone(),
                key: input.key.clone(),
                initiated_ms: now_ms(),
                content_type: input.content_type,
                user_metadata: user_metadata(input.metadata)?,
                headers: content_headers!(input),
                checksum: upload_checksum,
            };
            let upload = self.meta.create_multipart(upload).await.map_err(from_meta)?;
            let output = CreateMultipartUploadOutput {
                bucket: Some(input.bucket),
                key: Some(input.key),
                upload_id: Some(upload.upload_id),
                checksum_algorithm: input.checksum_algorithm,
                checksum_type: upload_checksum.map(|upload| checksum::type_of(upload.composite)),
                ..Default::default()
            };
            Ok(S3Response::new(output))
        })
        .await
    }

    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        observe("UploadPart", async {
            refuse_unsupported(&req.headers)?;
            let input = req.input;
            check_key(&input.key)?;
            let number = part_number(input.part_number)?;
            // Before reading the body, so a part for a missing upload writes no data.
            let upload =
                self.meta.get_multipart(&input.bucket, &input.key, &input.upload_id).await.map_err(from_meta)?;
            // A part of an upload created with a checksum is checked and recorded with it.
            let declared = Declared::from_headers(&req.headers, upload.checksum.map(|upload| upload.algorithm))?;
            checksum::check_part_algorithm(upload.checksum.as_ref(), declared.as_ref())?;
            let claims = BodyClaims {
                content_length: input.content_length,
                content_md5: input.content_md5.as_deref(),
                checksum: declared,
                trailers: req.trailing_headers.as_ref(),
            };
            let body = self.write_body(input.body, claims).await?;
            let part = PartMeta {
                part_number: number,
                size_bytes: body.size_bytes,
                etag: body.etag.clone(),
                last_modified_ms: now_ms(),
                checksum: body.checksum.clone(),
                layout: body.written.layout.clone(),
            };
            let committed = self.meta.put_part(&input.bucket, &input.key, &input.upload_id, part).await;
            self.settle_commit(committed.map(|replaced| replaced.map(|version| version.layout)), &body.written.layout)
                .await?;
            let mut output = UploadPartOutput { e_tag: Some(ETag::Strong(body.etag)), ..Default::default() };
            set_checksum!(output, body.checksum.as_ref());
            Ok(with_redundancy(S3Response::new(output), body.written.redundancy))
        })
        .await
    }

    /// A part copied from (a range of) an existing object, read and written as `copy_object` does;
    /// the part is recorded as UploadPart records one.
    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        observe("UploadPartCopy", async {
            refuse_unsupported(&req.headers)?;
            let input = req.input;
            check_key(&input.key)?;
            let number = part_number(input.part_number)?;
            // Before reading the source, so a part for a missing upload reads and writes nothing.
            let upload =
                self.meta.get_multipart(&input.bucket, &input.key, &input.upload_id).await.map_err(from_meta)?;
            let conditions = Conditions {
                if_match: input.copy_source_if_match.as_ref(),
                if_none_match: input.copy_source_if_none_match.as_ref(),
                if_modified_since: input.copy_source_if_modified_since.as_ref(),
                if_unmodified_since: input.copy_source_if_unmodified_since.as_ref(),
            };
            let (_, _, source) = self.copy_source(&input.copy_source, &conditions).await?;
            let range = copy::source_range(input.copy_source_range.as_deref(), source.size_bytes)?;
            let size_bytes = range.end - range.start;
            // The part's checksum, in its upload's algorithm, is computed from the bytes copied.
            let algorithm = upload.checksum.map(|upload| upload.algorithm);
            let mut hasher = algorithm.map(checksum::Hasher::new);
            let (written, etag) = self.copy_range(&source.layout, range, &mut hasher).await?;
            let part_checksum =
                algorithm.zip(hasher).map(|(algorithm, hasher)| checksum::full(algorithm, &hasher.finalize()));
            let last_modified_ms = now_ms();
            let part = PartMeta {
                part_number: number,
                size_bytes,
                etag: etag.clone(),
                last_modified_ms,
                checksum: part_checksum.clone(),
                layout: written.layout.clone(),
            };
            let committed = self.meta.put_part(&input.bucket, &input.key, &input.upload_id, part).await;
            self.settle_commit(committed.map(|replaced| replaced.map(|version| version.layout)), &written.layout)
                .await?;
            let mut result = CopyPartResult {
                e_tag: Some(ETag::Strong(etag)),
                last_modified: Some(timestamp(last_modified_ms)),
                ..Default::default()
            };
            set_checksum!(result, part_checksum.as_ref());
            let output = UploadPartCopyOutput { copy_part_result: Some(result), ..Default::default() };
            Ok(with_redundancy(S3Response::new(output), written.redundancy))
        })
        .await
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        observe("CompleteMultipartUpload", async {
            let mut input = req.input;
            check_key(&input.key)?;
            let named = input.multipart_upload.take().and_then(|upload| upload.parts).unwrap_or_default();
            if named.is_empty() {
                return Err(s3(S3ErrorCode::MalformedXML, "the completion names no parts"));
            }
            let mut requested = Vec::with_capacity(named.len());
            for part in &named {
                let number = part_number(part.part_number.unwrap_or(0))?;
                let etag = part.e_tag.as_ref().map(|etag| etag.value().to_string()).unwrap_or_default();
                requested.push(CompletedPart { part_number: number, etag });
            }
            if requested.windows(2).any(|pair| pair[0].part_number >= pair[1].part_number) {
                return Err(from_meta(MetaError::InvalidPartOrder));
            }
            let upload = match self.meta.get_multipart(&input.bucket, &input.key, &input.upload_id).await {
                Ok(upload) => upload,
                Err(MetaError::NoSuchUpload(id)) => {
                    return self
                        .completed_already(&input, &requested)
                        .await?
                        .ok_or_else(|| from_meta(MetaError::NoSuchUpload(id)));
                }
                Err(error) => return Err(from_meta(error)),
            };
            let stored = self.meta.list_parts(&input.bucket, &input.key, &input.upload_id).await.map_err(from_meta)?;
            let mut pieces = Vec::with_capacity(requested.len());
            let mut used: Vec<&PartMeta> = Vec::with_capacity(requested.len());
            let mut offset_bytes = 0u64;
            for (index, wanted) in requested.iter().enumerate() {
                let part = stored
                    .iter()
                    .find(|part| part.part_number == wanted.part_number && part.etag == wanted.etag)
                    .ok_or_else(|| {
                        s3(
                            S3ErrorCode::InvalidPart,
                            format!("part {} was not uploaded with that ETag", wanted.part_number),
                        )
                    })?;
                let is_last = index + 1 == requested.len();
                if !is_last && part.size_bytes < self.options.min_part_bytes {
                    return Err(s3(
                        S3ErrorCode::EntityTooSmall,
                        format!(
                            "part {} is {} bytes; every part but the last needs {}",
                            part.part_number, part.size_bytes, self.options.min_part_bytes
                        ),
                    ));
                }
                pieces.push(CompositePiece {
                    object_offset_bytes: offset_bytes,
                    length_bytes: part.size_bytes,
                    layout: part.layout.clone(),
                });
                offset_bytes += part.size_bytes;
                used.push(part);
            }
            if let Some(declared) = input.mpu_object_size
                && u64::try_from(declared).ok() != Some(offset_bytes)
            {
                return Err(s3(
                    S3ErrorCode::InvalidRequest,
                    format!("x-amz-mp-object-size is {declared}; the parts named make {offset_bytes} bytes"),
                ));
            }
            let completion = Completion { named: &named, parts: &used, whole: &input };
            let object_checksum = checksum::for_completion(upload.checksum.as_ref(), &completion)?;
            let etag = multipart_etag(&used.iter().map(|part| part.etag.as_str()).collect::<Vec<_>>())?;
            let object = ObjectMeta {
                size_bytes: offset_bytes,
                etag: etag.clone(),
                content_type: upload.content_type,
                user_metadata: upload.user_metadata,
                headers: upload.headers,
                last_modified_ms: now_ms(),
                completed_upload_id: Some(input.upload_id.clone()),
                checksum: object_checksum.clone(),
                layout: Layout::Composite { pieces },
            };
            let completion = self
                .meta
                .complete_multipart(&input.bucket, &input.key, &input.upload_id, &requested, object)
                .await
                .map_err(from_meta)?;
            // Parts the object does not reference are garbage now (the store removed their records).
            for part in &completion.parts {
                let referenced =
                    used.iter().any(|used| used.part_number == part.part_number && used.layout == part.layout);
                if !referenced {
                    self.release(&part.layout).await;
                }
            }
            if let Some(previous) = completion.previous {
                self.release(&previous.layout).await;
            }
            Ok(completed(&input, etag, object_checksum.as_ref()))
        })
        .await
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        observe("AbortMultipartUpload", async {
            let input = req.input;
            let (meta, data) = (self.meta.as_ref(), self.data.as_ref());
            abandoned_uploads::abort_upload(meta, data, &input.bucket, &input.key, &input.upload_id)
                .await
                .map_err(from_meta)?;
            Ok(S3Response::new(AbortMultipartUploadOutput::default()))
        })
        .await
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        observe("ListMultipartUploads", async {
            let mut input = req.input;
            input.delimiter = delimiter(input.delimiter.take());
            let (encoded, encode) = encoder(&input.encoding_type)?;
            let prefix = input.prefix.unwrap_or_default();
            let max_uploads = max_keys(input.max_uploads)?;
            let uploads = self.meta.list_uploads(&input.bucket, &prefix).await.map_err(from_meta)?;
            let page = page_uploads(
                uploads,
                &prefix,
                input.delimiter.as_deref(),
                input.key_marker.as_deref().filter(|marker| !marker.is_empty()),
                input.upload_id_marker.as_deref().filter(|marker| !marker.is_empty()),
                max_uploads,
            );
            let owner = owner(req.credentials.as_ref());
            let uploads = page
                .uploads
                .iter()
                .map(|upload| MultipartUpload {
                    key: Some(encode(&upload.key)),
                    upload_id: Some(upload.upload_id.clone()),
                    initiated: Some(timestamp(upload.initiated_ms)),
                    storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
                    owner: owner.clone(),
                    initiator: owner
                        .as_ref()
                        .map(|owner| Initiator { display_name: owner.display_name.clone(), id: owner.id.clone() }),
                    ..Default::default()
                })
                .collect();
            let output = ListMultipartUploadsOutput {
                bucket: Some(input.bucket),
                prefix: Some(encode(&prefix)),
                delimiter: input.delimiter.as_deref().map(encode),
                key_marker: Some(input.key_marker.as_deref().map(encode).unwrap_or_default()),
                upload_id_marker: Some(input.upload_id_marker.unwrap_or_default()),
                max_uploads: Some(max_uploads as i32),
                is_truncated: Some(page.is_truncated),
                next_key_marker: page.next_key_marker.as_deref().map(encode),
                next_upload_id_marker: page.next_upload_id_marker,
                uploads: Some(uploads),
                common_prefixes: common_prefixes(&page.common_prefixes, encode),
                encoding_type: encoded.then(|| EncodingType::from_static(EncodingType::URL)),
                ..Default::default()
            };
            Ok(S3Response::new(output))
        })
        .await
    }

    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        observe("ListParts", async {
            let input = req.input;
            let max_parts = max_keys(input.max_parts)?;
            let marker = input.part_number_marker.unwrap_or(0).max(0);
            let upload =
                self.meta.get_multipart(&input.bucket, &input.key, &input.upload_id).await.map_err(from_meta)?;
            let stored = self.meta.list_parts(&input.bucket, &input.key, &input.upload_id).await.map_err(from_meta)?;
            let mut after_marker = stored.into_iter().filter(|part| i32::from(part.part_number) > marker).peekable();
            let mut parts = Vec::new();
            // At most max_parts (≤ 1000) rounds.
            while parts.len() < max_parts {
                let Some(part) = after_marker.next() else { break };
                parts.push(part);
            }
            let is_truncated = after_marker.peek().is_some();
            let next_part_number_marker = parts.last().map(|part| i32::from(part.part_number));
            let owner = owner(req.credentials.as_ref());
            let output = ListPartsOutput {
                bucket: Some(input.bucket),
                key: Some(input.key),
                upload_id: Some(input.upload_id),
                part_number_marker: Some(marker),
                next_part_number_marker,
                max_parts: Some(max_parts as i32),
                is_truncated: Some(is_truncated),
                storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
                initiator: owner
                    .as_ref()
                    .map(|owner| Initiator { display_name: owner.display_name.clone(), id: owner.id.clone() }),
                owner,
                parts: Some(
                    parts
                        .iter()
                        .map(|part| {
                            let mut listed = Part {
                                part_number: Some(i32::from(part.part_number)),
                                e_tag: Some(ETag::Strong(part.etag.clone())),
                                size: Some(part.size_bytes as i64),
                                last_modified: Some(timestamp(part.last_modified_ms)),
                                ..Default::default()
                            };
                            set_checksum!(listed, part.checksum.as_ref());
                            listed
                        })
                        .collect(),
                ),
                checksum_algorithm: upload
                    .checksum
                    .map(|upload| ChecksumAlgorithm::from_static(checksum::name(upload.algorithm))),
                checksum_type: upload.checksum.map(|upload| checksum::type_of(upload.composite)),
                ..Default::default()
            };
            Ok(S3Response::new(output))
        })
        .await
    }
}

/// The answer to a CompleteMultipartUpload that made (or had made) the object with `etag`.
fn completed(
    input: &CompleteMultipartUploadInput,
    etag: String,
    object_checksum: Option<&StoredChecksum>,
) -> S3Response<CompleteMultipartUploadOutput> {
    let mut output = CompleteMultipartUploadOutput {
        bucket: Some(input.bucket.clone()),
        key: Some(input.key.clone()),
        e_tag: Some(ETag::Strong(etag)),
        location: Some(format!("/{}/{}", input.bucket, input.key)),
        ..Default::default()
    };
    set_checksum!(output, object_checksum, with_type);
    S3Response::new(output)
}

/// Checks a DeleteObjects request's `Content-MD5` (InvalidDigest, BadDigest) and S3 checksum
/// (InvalidRequest, BadDigest) against the body the server read whole, before any key is deleted:
/// s3s parses the body without checking either.
fn check_multi_delete_body(headers: &hyper::HeaderMap) -> S3Result<()> {
    let content_md5 = match headers.get("content-md5") {
        None => None,
        Some(value) => Some(value.to_str().map_err(|_| s3(S3ErrorCode::InvalidDigest, "Content-MD5 is not base64"))?),
    };
    let declared = DeclaredBody::new(None, content_md5, u64::MAX)?;
    let checksum = Declared::from_headers(headers, None)?;
    if content_md5.is_none() && checksum.is_none() {
        return Ok(());
    }
    let Some(body) = super::server::buffered_body() else {
        return Err(s3(S3ErrorCode::InternalError, "the body was not read whole to check it; nothing was deleted"));
    };
    declared.check_md5(Md5::digest(&body).into())?;
    if let Some(checksum) = checksum {
        checksum.verify(&checksum::digest(checksum.algorithm(), &body), None)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md5_hex(body: &[u8]) -> String {
        hex::encode(Md5::digest(body))
    }

    #[test]
    fn multipart_etag_is_md5_of_binary_md5s() {
        let first = md5_hex(b"hello ");
        let second = md5_hex(b"world");
        let mut concatenated = hex::decode(&first).unwrap();
        concatenated.extend(hex::decode(&second).unwrap());
        let expected = format!("{}-2", md5_hex(&concatenated));
        assert_eq!(multipart_etag(&[&first, &second]).unwrap(), expected);
    }

    #[test]
    fn bucket_names_are_checked() {
        for bad in ["foo.-bar", "foo-.bar", "foo..bar", "foo-", "ab", "Foo"] {
            assert_eq!(*check_bucket_name(bad).unwrap_err().code(), S3ErrorCode::InvalidBucketName, "{bad}");
        }
        for good in ["foo-bar.baz", "a1.b2-c3", "abc"] {
            assert!(check_bucket_name(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn keys_and_part_numbers_are_checked() {
        assert_eq!(*check_key(&"k".repeat(1025)).unwrap_err().code(), S3ErrorCode::KeyTooLongError);
        assert!(check_key(&"k".repeat(1024)).is_ok());
        assert!(part_number(0).is_err() && part_number(10_001).is_err() && part_number(-1).is_err());
        assert_eq!(part_number(10_000).unwrap(), 10_000);
    }
}
