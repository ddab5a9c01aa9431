//! Version ids on S3 requests: which version a read, a copy source or a delete names, and what a
//! delete answers, over the metadata store's versions (docs/versioning.md). No id names the key's
//! current version; `null` names its null version (every object of a bucket never versioned);
//! another id names a version the store gave, or none: a read then answers `NoSuchVersion`, a
//! delete removes nothing and succeeds (S3's deletes of what is absent do). A read naming a delete
//! marker is `MethodNotAllowed` with `x-amz-delete-marker: true`. Owns these rules; must not read
//! or write object bytes (a removed version's are released by `write::release`).

use meta::{ObjectMeta, VersionStamp, WriteCondition};
use s3s::{S3Error, S3ErrorCode, S3Result};

use super::errors::{from_meta, s3};
use super::service::LowtailS3;
use super::timestamps::now_ms;
use super::write::release;

/// The header saying an answer is about a delete marker.
pub const DELETE_MARKER_HEADER: &str = "x-amz-delete-marker";

/// The version of `bucket/key` that `version_id` names (the current one without an id).
pub async fn object_for(
    service: &LowtailS3,
    bucket: &str,
    key: &str,
    version_id: Option<&str>,
) -> S3Result<ObjectMeta> {
    let Some(version_id) = version_id else { return service.meta.get_object(bucket, key).await.map_err(from_meta) };
    if version_id.is_empty() {
        return Err(s3(S3ErrorCode::InvalidArgument, "the version id must not be empty"));
    }
    let version = service.meta.get_version(bucket, key, version_id).await.map_err(from_meta)?;
    if version.version.delete_marker {
        let mut error = s3(S3ErrorCode::MethodNotAllowed, format!("version {version_id:?} is a delete marker"));
        let mut headers = hyper::HeaderMap::new();
        headers.insert(DELETE_MARKER_HEADER, hyper::header::HeaderValue::from_static("true"));
        error.set_headers(headers);
        return Err(error);
    }
    Ok(version)
}

/// The version id S3 answers for `object`: none for an object of a bucket never versioned.
pub fn answered_id(object: &ObjectMeta) -> Option<String> {
    answered(&object.version)
}

/// The version id S3 answers for a version written or deleted with `version`.
pub fn answered(version: &VersionStamp) -> Option<String> {
    (!version.is_unversioned()).then(|| version.id_or_null().to_string())
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Deleted {
    /// The version deleted, or the delete marker written; none in a bucket never versioned.
    pub version_id: Option<String>,
    /// Whether it was (or wrote) a delete marker.
    pub delete_marker: bool,
}

/// Deletes what `version_id` names in `bucket/key` if `condition` holds when it commits: without
/// an id, the key's object (a delete marker in a versioned bucket); with one, exactly that version.
/// Releases the bytes of what it removed.
pub async fn delete(
    service: &LowtailS3,
    (bucket, key): (&str, &str),
    version_id: Option<&str>,
    condition: &WriteCondition,
) -> S3Result<Deleted> {
    let Some(version_id) = version_id else {
        let committed = service.meta.delete_object_if(bucket, key, condition, now_ms()).await.map_err(from_meta)?;
        for removed in &committed.released {
            release(service, &removed.layout).await;
        }
        let version = &committed.version;
        return Ok(Deleted { version_id: answered(version), delete_marker: version.delete_marker });
    };
    if version_id.is_empty() {
        return Err(s3(S3ErrorCode::InvalidArgument, "the version id must not be empty"));
    }
    let named = Deleted { version_id: Some(version_id.to_string()), delete_marker: false };
    if meta::validate::version_id(version_id).is_err() {
        // An id the store never gave names no version: nothing to delete (or to check a condition on).
        service.meta.get_bucket(bucket).await.map_err(from_meta)?;
        if !condition.is_none() {
            return Err(s3(S3ErrorCode::PreconditionFailed, "no such version to check the condition against"));
        }
        return Ok(named);
    }
    match service.meta.delete_version(bucket, key, version_id, condition).await.map_err(from_meta)? {
        Some(removed) => {
            release(service, &removed.layout).await;
            Ok(Deleted { delete_marker: removed.version.delete_marker, ..named })
        }
        None => Ok(named),
    }
}

/// Checks that a change (tagging) naming `version_id` names the key's current version: another
/// existing version is `NotImplemented` (the store changes current versions only), a version that
/// does not exist `NoSuchVersion`.
pub async fn require_current(service: &LowtailS3, bucket: &str, key: &str, version_id: Option<&str>) -> S3Result<()> {
    let Some(version_id) = version_id else { return Ok(()) };
    let current = service.meta.get_object(bucket, key).await.map_err(from_meta)?;
    if current.version.is(version_id) {
        return Ok(());
    }
    object_for(service, bucket, key, Some(version_id)).await?;
    Err(S3Error::with_message(
        S3ErrorCode::NotImplemented,
        format!("changing version {version_id:?}, which is not the key's current version, is not supported"),
    ))
}
