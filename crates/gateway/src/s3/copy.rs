//! Server-side copies (CopyObject, and the bytes UploadPartCopy copies): what a copy request names,
//! checked as S3 checks it (the source object of `x-amz-copy-source`: buckets are unversioned, so only
//! the `null` version exists; its `x-amz-copy-source-if-*` conditions; the `x-amz-metadata-directive`;
//! UploadPartCopy's `x-amz-copy-source-range`), and the copy itself: the source's bytes read through
//! the data path and written again as a new layout, which the destination is committed with as a
//! PutObject commits. Owns these checks and the copying; must not share a layout between two objects,
//! or keep bytes that differ from what the source's ETag vouches for.

use std::ops::Range;

use futures_util::StreamExt;
use md5::{Digest, Md5};
use meta::{CompositePiece, Layout, ObjectMeta, StoredChecksum, UploadChecksum, WriteAck};
use s3s::dto::{
    CopyObjectInput, CopyObjectOutput, CopyObjectResult, CopySource, ETag, MetadataDirective, TaggingDirective,
};
use s3s::{S3ErrorCode, S3Request, S3Response, S3Result};

use super::checksum::{self, set_checksum};
use super::conditions::{self, Conditions, Precondition};
use super::errors::{from_data, s3};
use super::etag::multipart_etag;
use super::names::check_key;
use super::read_body;
use super::service::LowtailS3;
use super::timestamps::{now_ms, timestamp};
use super::unsupported::refuse_unsupported;
use super::write::{content_headers, release, user_metadata, with_redundancy};
use crate::data::{Redundancy, Written};

/// Largest source a CopyObject copies (S3's limit; larger objects are copied part by part with
/// UploadPartCopy, as clients do). Bounds how long one request runs, not its memory (see `copy_bytes`).
const MAX_COPY_OBJECT_BYTES: u64 = 5 << 30;

/// Where a copy takes the new object's metadata from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directive {
    /// `COPY` (the default): the source's user metadata and standard headers.
    Copy,
    /// `REPLACE`: the request's.
    Replace,
}

/// The bucket, key and version id of a copy source. `s3s` has already URL-decoded them and
/// refused a header that is not `bucket/key[?versionId=...]` (InvalidArgument).
pub fn source_object(source: &CopySource) -> S3Result<(&str, &str, Option<&str>)> {
    match source {
        CopySource::Bucket { bucket, key, version_id } => Ok((bucket, key, version_id.as_deref())),
        // Access points and Outposts are AWS features with no counterpart here.
        _ => Err(s3(S3ErrorCode::InvalidArgument, "the copy source must be bucket/key")),
    }
}

/// The metadata directive of a CopyObject (COPY when absent).
pub fn directive(requested: Option<&MetadataDirective>) -> S3Result<Directive> {
    match requested.map(MetadataDirective::as_str) {
        None | Some(MetadataDirective::COPY) => Ok(Directive::Copy),
        Some(MetadataDirective::REPLACE) => Ok(Directive::Replace),
        Some(other) => Err(s3(S3ErrorCode::InvalidArgument, format!("unknown metadata directive {other:?}"))),
    }
}

/// The bytes of a source object of `size` bytes that an UploadPartCopy copies: all of them without
/// `x-amz-copy-source-range`, else its `bytes=first-last` (both given, as S3 requires: no suffix or
/// open ranges, no lists). A malformed range is InvalidArgument; one past the end, InvalidRange.
pub fn source_range(requested: Option<&str>, size: u64) -> S3Result<Range<u64>> {
    let Some(requested) = requested else { return Ok(0..size) };
    let malformed =
        || s3(S3ErrorCode::InvalidArgument, format!("the copy source range {requested:?} must be bytes=first-last"));
    let (first, last) =
        requested.strip_prefix("bytes=").and_then(|range| range.split_once('-')).ok_or_else(malformed)?;
    let number = |text: &str| {
        // Digits only: u64's parser would take a leading '+'.
        if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
            return None;
        }
        text.parse::<u64>().ok()
    };
    let (first, last) = number(first).zip(number(last)).ok_or_else(malformed)?;
    if first > last {
        return Err(malformed());
    }
    if last >= size {
        return Err(s3(
            S3ErrorCode::InvalidRange,
            format!("the copy source range {requested:?} is not within a source of {size} bytes"),
        ));
    }
    Ok(first..last + 1)
}

/// The `x-amz-copy-source-if-*` conditions of a CopyObject or UploadPartCopy input (distinct s3s
/// types with the same field names).
macro_rules! source_conditions {
    ($input:expr) => {
        $crate::s3::conditions::Conditions {
            if_match: $input.copy_source_if_match.as_ref(),
            if_none_match: $input.copy_source_if_none_match.as_ref(),
            if_modified_since: $input.copy_source_if_modified_since.as_ref(),
            if_unmodified_since: $input.copy_source_if_unmodified_since.as_ref(),
        }
    };
}
pub(super) use source_conditions;

/// Server-side copy: the source's bytes are read and written again (a layout belongs to one
/// object, so a copy never shares the source's), then the destination is committed as a
/// PutObject commits: its old version stays readable until then, and is released after.
pub async fn copy_object(
    service: &LowtailS3,
    req: S3Request<CopyObjectInput>,
) -> S3Result<S3Response<CopyObjectOutput>> {
    refuse_unsupported(&req.headers)?;
    let _in_flight = crate::data::io::descriptor::write_in_flight(now_ms());
    let input = req.input;
    check_key(&input.key)?;
    let directive = directive(input.metadata_directive.as_ref())?;
    // Before reading the source, so a copy into a missing bucket reads and writes nothing.
    let ack = super::write::bucket_write_ack(service, &input.bucket).await?;
    let conditions = source_conditions!(input);
    let (source_bucket, source_key, source) = copy_source(service, &input.copy_source, &conditions).await?;
    check_copy(&input, (source_bucket, source_key), &source, directive)?;
    let plan = checksum::for_copy(source.checksum.as_ref(), input.checksum_algorithm.as_ref())?;
    let tags = match input.tagging_directive.as_ref().map(TaggingDirective::as_str) {
        None | Some(TaggingDirective::COPY) => source.tags.clone(),
        Some(TaggingDirective::REPLACE) => super::tagging::from_header(input.tagging.as_deref())?,
        Some(other) => return Err(s3(S3ErrorCode::InvalidArgument, format!("unknown tagging directive {other:?}"))),
    };
    let (content_type, user_metadata, headers) = match directive {
        Directive::Copy => (source.content_type.clone(), source.user_metadata.clone(), source.headers.clone()),
        Directive::Replace => (input.content_type, user_metadata(input.metadata)?, content_headers!(input)),
    };
    // Labelled as the object it becomes (a multipart source's parts as an object's pieces carry no
    // label of their own: docs/durability.md).
    let label = match &source.layout {
        Layout::Composite { .. } => serde_json::Value::Null,
        _ => super::write::object_label(
            (&input.bucket, &input.key, None),
            Some(source.size_bytes),
            (&content_type, &user_metadata, &headers),
            Some(plan.algorithm),
        ),
    };
    let copied = copy_bytes(service, &source, plan, ack);
    let (written, etag, copied_checksum) = crate::data::io::descriptor::labelled(label, copied).await?;
    let last_modified_ms = now_ms();
    let object = ObjectMeta {
        version: Default::default(),
        tags,
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
    let committed = service.meta.put_object_if(&input.bucket, &input.key, object, &Default::default()).await;
    let version = super::write::settle_write(service, committed, &written.layout).await?;
    let mut result = CopyObjectResult {
        e_tag: Some(ETag::Strong(etag)),
        last_modified: Some(timestamp(last_modified_ms)),
        ..Default::default()
    };
    set_checksum!(result, Some(&copied_checksum), with_type);
    let output = CopyObjectOutput {
        copy_object_result: Some(result),
        version_id: super::versions::answered(&version),
        copy_source_version_id: super::versions::answered_id(&source),
        ..Default::default()
    };
    Ok(with_redundancy(S3Response::new(output), written.redundancy, ack))
}

/// What S3 refuses of a CopyObject once its source is known: a copy that would change nothing, and
/// a source above [`MAX_COPY_OBJECT_BYTES`].
fn check_copy(
    input: &CopyObjectInput,
    (source_bucket, source_key): (&str, &str),
    source: &ObjectMeta,
    directive: Directive,
) -> S3Result<()> {
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
    Ok(())
}

/// The object an `x-amz-copy-source` names, with its bucket and key, once its
/// `x-amz-copy-source-if-*` headers hold. A copy never answers 304: a condition that does not
/// hold is 412 either way, as S3 specifies.
pub async fn copy_source<'a>(
    service: &LowtailS3,
    source: &'a CopySource,
    conditions: &Conditions<'_>,
) -> S3Result<(&'a str, &'a str, ObjectMeta)> {
    let (bucket, key, version_id) = source_object(source)?;
    check_key(key)?;
    let object = super::versions::object_for(service, bucket, key, version_id).await?;
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
    service: &LowtailS3,
    source: &ObjectMeta,
    plan: UploadChecksum,
    ack: WriteAck,
) -> S3Result<(Written, String, StoredChecksum)> {
    let (written, etag, checksum) = match &source.layout {
        Layout::Composite { pieces } => copy_parts(service, source, pieces, plan, ack).await?,
        Layout::Striped { .. } | Layout::Packed { .. } => {
            let mut hasher = Some(checksum::Hasher::new(plan.algorithm));
            let (written, etag) = copy_range(service, &source.layout, 0..source.size_bytes, &mut hasher, ack).await?;
            let digest = hasher.map(checksum::Hasher::finalize).unwrap_or_default();
            (written, etag, checksum::full(plan.algorithm, &digest))
        }
    };
    if etag != source.etag {
        release(service, &written.layout).await;
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
    service: &LowtailS3,
    source: &ObjectMeta,
    pieces: &[CompositePiece],
    plan: UploadChecksum,
    ack: WriteAck,
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
        match copy_range(service, &source.layout, range, hasher, ack).await {
            Ok((written, etag)) => {
                // A COMPOSITE copy's parts each have a checksum of their own, as the source's did.
                let digest = part.map(checksum::Hasher::finalize);
                copied.push(CompositePiece {
                    checksum: digest.as_ref().map(|digest| checksum::full(plan.algorithm, digest)),
                    object_offset_bytes: piece.object_offset_bytes,
                    length_bytes: piece.length_bytes,
                    layout: written.layout,
                });
                redundancy = Some(redundancy.map_or(written.redundancy, |r| r.min(written.redundancy)));
                etags.push(etag);
                part_digests.extend(digest);
            }
            Err(error) => {
                release(service, &Layout::Composite { pieces: copied }).await;
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
            release(service, &layout).await;
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
pub async fn copy_range(
    service: &LowtailS3,
    layout: &Layout,
    range: Range<u64>,
    hasher: &mut Option<checksum::Hasher>,
    ack: WriteAck,
) -> S3Result<(Written, String)> {
    let length = range.end - range.start;
    let limit = service.options.max_object_bytes;
    if length > limit {
        return Err(s3(
            S3ErrorCode::EntityTooLarge,
            format!("copying {length} bytes at once exceeds the limit of {limit}"),
        ));
    }
    let mut md5 = Md5::new();
    // The source stays readable to the end even if it is overwritten or deleted meanwhile.
    let _hold = service.data.hold(layout);
    let pieces = read_body::read_pieces(layout, range, read_body::READ_PIECE_BYTES);
    let reads = futures_util::stream::iter(pieces)
        .then(|piece| read_body::read_exact(service.data.as_ref(), layout, piece))
        .flat_map(read_body::each_part)
        .inspect(|read| {
            if let Ok(bytes) = read {
                md5.update(bytes);
                if let Some(hasher) = hasher.as_mut() {
                    hasher.update(bytes);
                }
            }
        });
    let written = service.data.write_stream(reads.boxed(), ack).await.map_err(from_data)?;
    Ok((written, hex::encode(md5.finalize())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(header: &str) -> CopySource {
        CopySource::parse(header).expect("a bucket/key copy source")
    }

    #[test]
    fn sources_name_a_bucket_a_key_and_perhaps_a_version() {
        // Which version an id names is the store's (`versions::object_for`; tests/s3compat).
        let source = parsed("bucket/some%20dir/key%2Bplus");
        assert_eq!(source_object(&source).unwrap(), ("bucket", "some dir/key+plus", None));
        let source = parsed("/bucket/key?versionId=null");
        assert_eq!(source_object(&source).unwrap(), ("bucket", "key", Some("null")));
        let other = parsed("bucket/key?versionId=3HL4kqtJlcpXroDTDmJ");
        assert_eq!(source_object(&other).unwrap(), ("bucket", "key", Some("3HL4kqtJlcpXroDTDmJ")));
        let access_point = parsed("arn:aws:s3:us-west-2:123456789012:accesspoint/my-point/object/key");
        assert_eq!(*source_object(&access_point).unwrap_err().code(), S3ErrorCode::InvalidArgument);
    }

    #[test]
    fn directives() {
        assert_eq!(directive(None).unwrap(), Directive::Copy);
        assert_eq!(directive(Some(&MetadataDirective::from_static("COPY"))).unwrap(), Directive::Copy);
        assert_eq!(directive(Some(&MetadataDirective::from_static("REPLACE"))).unwrap(), Directive::Replace);
        let unknown = directive(Some(&MetadataDirective::from_static("MERGE"))).unwrap_err();
        assert_eq!(*unknown.code(), S3ErrorCode::InvalidArgument);
    }

    #[test]
    fn source_ranges() {
        assert_eq!(source_range(None, 10).unwrap(), 0..10);
        assert_eq!(source_range(None, 0).unwrap(), 0..0);
        assert_eq!(source_range(Some("bytes=0-9"), 10).unwrap(), 0..10);
        assert_eq!(source_range(Some("bytes=3-3"), 10).unwrap(), 3..4);
        for malformed in [
            "0-2",
            "bytes=0",
            "bytes=hello-world",
            "bytes=0-bar",
            "bytes=hello-",
            "bytes=0-2,3-5",
            "bytes=-3",
            "bytes=2-",
            "bytes=+1-2",
            "bytes=5-4",
        ] {
            let error = source_range(Some(malformed), 10).unwrap_err();
            assert_eq!(*error.code(), S3ErrorCode::InvalidArgument, "{malformed}");
        }
        assert_eq!(*source_range(Some("bytes=0-21"), 5).unwrap_err().code(), S3ErrorCode::InvalidRange);
        assert_eq!(*source_range(Some("bytes=0-0"), 0).unwrap_err().code(), S3ErrorCode::InvalidRange);
    }
}
