//! Deleting objects: DeleteObject, and DeleteObjects (at most 1000 keys, each deleted or failed on
//! its own, its body's Content-MD5 and checksum checked first); a version id names the object or a
//! version that does not exist (`versions`), never deleting the object for another version's id.
//! Owns these answers; a removed version's bytes are released once its record is gone. Must not
//! delete anything when the request as a whole is refused.

use md5::{Digest, Md5};
use s3s::dto::{
    DeleteObjectInput, DeleteObjectOutput, DeleteObjectsInput, DeleteObjectsOutput, DeletedObject, ETagCondition, Error,
};
use s3s::{S3ErrorCode, S3Request, S3Response, S3Result};

use super::body::DeclaredBody;
use super::checksum::{self, Declared};
use super::conditions;
use super::errors::{from_meta, s3};
use super::names::check_key;
use super::service::LowtailS3;
use super::versions;

/// Most keys one DeleteObjects request may name (S3's limit).
const MAX_DELETE_KEYS: usize = 1000;

pub async fn delete_object(
    service: &LowtailS3,
    req: S3Request<DeleteObjectInput>,
) -> S3Result<S3Response<DeleteObjectOutput>> {
    let input = &req.input;
    check_key(&input.key)?;
    let condition = conditions::write_condition(
        input.if_match.as_ref(),
        None,
        input.if_match_size,
        input.if_match_last_modified_time.as_ref(),
    );
    let deleted =
        versions::delete(service, (&input.bucket, &input.key), input.version_id.as_deref(), &condition).await?;
    let output = DeleteObjectOutput {
        version_id: deleted.version_id,
        delete_marker: deleted.delete_marker.then_some(true),
        ..Default::default()
    };
    Ok(S3Response::new(output))
}

pub async fn delete_objects(
    service: &LowtailS3,
    req: S3Request<DeleteObjectsInput>,
) -> S3Result<S3Response<DeleteObjectsOutput>> {
    check_multi_delete_body(&req.headers)?;
    let input = req.input;
    if input.delete.objects.len() > MAX_DELETE_KEYS {
        return Err(s3(S3ErrorCode::MalformedXML, format!("at most {MAX_DELETE_KEYS} keys per request")));
    }
    service.meta.get_bucket(&input.bucket).await.map_err(from_meta)?;
    let quiet = input.delete.quiet.unwrap_or(false);
    let (mut deleted, mut errors) = (Vec::new(), Vec::new());
    for identifier in input.delete.objects {
        let outcome = match check_key(&identifier.key) {
            Ok(()) => {
                let if_match = identifier.e_tag.clone().map(ETagCondition::ETag);
                let modified = identifier.last_modified_time.as_ref();
                let condition = conditions::write_condition(if_match.as_ref(), None, identifier.size, modified);
                let version_id = identifier.version_id.as_deref();
                versions::delete(service, (&input.bucket, &identifier.key), version_id, &condition).await
            }
            Err(error) => Err(error),
        };
        match outcome {
            Ok(done) => {
                if !quiet {
                    // A delete naming a version answers it; one writing a marker answers the marker's.
                    let wrote_marker = identifier.version_id.is_none() && done.delete_marker;
                    let (version_id, marker_id) =
                        if wrote_marker { (None, done.version_id) } else { (done.version_id, None) };
                    deleted.push(DeletedObject {
                        key: Some(identifier.key),
                        version_id,
                        delete_marker: done.delete_marker.then_some(true),
                        delete_marker_version_id: marker_id,
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
