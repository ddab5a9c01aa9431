//! PutObject: a conditional write's `If-Match` / `If-None-Match` checked, the body streamed into the
//! data path (`write::write_body`), then the object committed (its conditions checked again in the
//! commit's transaction), replacing (and releasing) the version it overwrites. Owns PutObject's rules only; must not commit anything before the body is known to
//! be whole and right, nor keep its bytes when the commit fails.

use meta::{MetaError, ObjectMeta};
use s3s::dto::{ETag, PutObjectInput, PutObjectOutput};
use s3s::{S3ErrorCode, S3Request, S3Response, S3Result};

use super::checksum::{Declared, set_checksum};
use super::conditions;
use super::errors::{from_meta, s3};
use super::names::check_key;
use super::service::LowtailS3;
use super::timestamps::now_ms;
use super::unsupported::refuse_unsupported;
use super::write::{self, BodyClaims, content_headers, user_metadata, with_redundancy};
use crate::data::io::descriptor::labelled;

pub async fn put_object(service: &LowtailS3, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
    refuse_unsupported(&req.headers)?;
    // From the write's start to its commit: a metadata snapshot meanwhile knows it may miss it.
    let _in_flight = crate::data::io::descriptor::write_in_flight(now_ms());
    let mut input = req.input;
    check_key(&input.key)?;
    let metadata = user_metadata(input.metadata.take())?;
    let tags = super::tagging::from_header(input.tagging.as_deref())?;
    // Before reading the body, so a request into a missing bucket writes no data.
    let ack = write::bucket_write_ack(service, &input.bucket).await?;
    check_conditions(service, &input).await?;
    // Without a checksum of its own, an object gets S3's default, CRC64NVME.
    let claims = BodyClaims {
        content_length: input.content_length,
        content_md5: input.content_md5.as_deref(),
        checksum: Declared::from_headers(&req.headers, Some(meta::ChecksumAlgorithm::Crc64nvme))?,
        trailers: req.trailing_headers.as_ref(),
    };
    let content_type = input.content_type.take();
    let body = input.body.take();
    let headers = content_headers!(input);
    let label = write::object_label(
        (&input.bucket, &input.key, None),
        claims.content_length.and_then(|length| u64::try_from(length).ok()),
        (&content_type, &metadata, &headers),
        claims.checksum.as_ref().map(Declared::algorithm),
    );
    let body = labelled(label, write::write_body(service, body, claims, ack)).await?;
    let object = ObjectMeta {
        version: Default::default(),
        tags,
        size_bytes: body.size_bytes,
        etag: body.etag.clone(),
        content_type,
        user_metadata: metadata,
        headers,
        last_modified_ms: now_ms(),
        completed_upload_id: None,
        checksum: body.checksum.clone(),
        layout: body.written.layout.clone(),
    };
    // Checked again where it commits: of writers racing on the key, only those it holds for win.
    let condition = conditions::write_condition(input.if_match.as_ref(), input.if_none_match.as_ref(), None, None);
    let committed = service.meta.put_object_if(&input.bucket, &input.key, object, &condition).await;
    let version = write::settle_write(service, committed, &body.written.layout).await?;
    let mut output = PutObjectOutput {
        e_tag: Some(ETag::Strong(body.etag)),
        size: i64::try_from(body.size_bytes).ok(),
        version_id: super::versions::answered(&version),
        ..Default::default()
    };
    set_checksum!(output, body.checksum.as_ref(), with_type);
    Ok(with_redundancy(S3Response::new(output), body.written.redundancy, ack))
}

/// A conditional write's `If-Match` / `If-None-Match` against the object the key holds now
/// (PreconditionFailed, or NoSuchKey for `If-Match` on no object), so a write that would fail writes
/// no bytes; the commit checks them again in its transaction.
async fn check_conditions(service: &LowtailS3, input: &PutObjectInput) -> S3Result<()> {
    if input.if_match.is_some() || input.if_none_match.is_some() {
        let existing = match service.meta.get_object(&input.bucket, &input.key).await {
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
    Ok(())
}
