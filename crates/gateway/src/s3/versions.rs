//! Version ids on requests to buckets that are never versioned: every object is its `null`
//! version (S3's id for an object written while a bucket was unversioned), so `versionId=null`
//! names it and any other id names a version that does not exist. A request naming one is
//! answered as S3 answers it, never served from the current object: a GET or HEAD is NoSuchVersion,
//! a DELETE removes nothing (S3's deletes of what does not exist succeed). Owns that rule; must not
//! read or change objects.

use s3s::{S3ErrorCode, S3Result};

use super::errors::s3;

/// The version id of every object here.
pub const NULL_VERSION: &str = "null";

/// What a request's `versionId` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Named {
    /// No version id, or `null`: the object the key holds.
    Current,
    /// An id of a version that does not exist.
    Missing,
}

/// What `version_id` names; InvalidArgument for an empty one.
pub fn named(version_id: Option<&str>) -> S3Result<Named> {
    match version_id {
        None | Some(NULL_VERSION) => Ok(Named::Current),
        Some("") => Err(s3(S3ErrorCode::InvalidArgument, "the version id must not be empty")),
        Some(_) => Ok(Named::Missing),
    }
}

/// The object the key holds, for a read naming `version_id` of `what`; NoSuchVersion for any other
/// version (InvalidArgument for an empty id).
pub fn require_current(version_id: Option<&str>, what: &str) -> S3Result<()> {
    match named(version_id)? {
        Named::Current => Ok(()),
        Named::Missing => Err(s3(
            S3ErrorCode::NoSuchVersion,
            format!("no version {:?} of {what}: the bucket is not versioned", version_id.unwrap_or_default()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_null_version_exists() {
        assert_eq!(named(None).unwrap(), Named::Current);
        assert_eq!(named(Some("null")).unwrap(), Named::Current);
        assert_eq!(named(Some("3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY")).unwrap(), Named::Missing);
        assert_eq!(named(Some("")).unwrap_err().code(), &S3ErrorCode::InvalidArgument);
        assert!(require_current(Some("null"), "the object").is_ok());
        assert_eq!(require_current(Some("v2"), "the object").unwrap_err().code(), &S3ErrorCode::NoSuchVersion);
    }
}
