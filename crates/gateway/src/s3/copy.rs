//! What a copy request (CopyObject, UploadPartCopy) names, checked as S3 checks it: the source object
//! of `x-amz-copy-source` (buckets are unversioned, so only the `null` version exists), the
//! `x-amz-metadata-directive`, and UploadPartCopy's `x-amz-copy-source-range`. Owns parsing and
//! validation only; it must not read or write objects (the service does, through the data path).

use std::ops::Range;

use s3s::dto::{CopySource, MetadataDirective};
use s3s::{S3ErrorCode, S3Result};

use super::errors::s3;

/// Where a copy takes the new object's metadata from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directive {
    /// `COPY` (the default): the source's user metadata and standard headers.
    Copy,
    /// `REPLACE`: the request's.
    Replace,
}

/// The bucket and key of a copy source. `s3s` has already URL-decoded them and refused a header
/// that is not `bucket/key[?versionId=...]` (InvalidArgument).
pub fn source_object(source: &CopySource) -> S3Result<(&str, &str)> {
    match source {
        CopySource::Bucket { bucket, key, version_id } => {
            match version_id.as_deref() {
                // Every object of an unversioned bucket is its "null" version.
                None | Some("null") => {}
                Some("") => return Err(s3(S3ErrorCode::InvalidArgument, "the version id must not be empty")),
                // No bucket is ever versioned, so no other version exists.
                Some(other) => {
                    return Err(s3(S3ErrorCode::NoSuchVersion, format!("no version {other:?} of the source object")));
                }
            }
            Ok((bucket, key))
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(header: &str) -> CopySource {
        CopySource::parse(header).expect("a bucket/key copy source")
    }

    #[test]
    fn sources_name_the_null_version_only() {
        let source = parsed("bucket/some%20dir/key%2Bplus");
        assert_eq!(source_object(&source).unwrap(), ("bucket", "some dir/key+plus"));
        let source = parsed("/bucket/key?versionId=null");
        assert_eq!(source_object(&source).unwrap(), ("bucket", "key"));
        let other = parsed("bucket/key?versionId=3HL4kqtJlcpXroDTDmJ");
        assert_eq!(*source_object(&other).unwrap_err().code(), S3ErrorCode::NoSuchVersion);
        let empty = parsed("bucket/key?versionId=");
        assert_eq!(*source_object(&empty).unwrap_err().code(), S3ErrorCode::InvalidArgument);
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
