//! Request headers asking for features lowtail does not have: ACL grants, object lock and legal hold,
//! server-side encryption, storage classes other than STANDARD, website redirects. Accepting them
//! and storing the object anyway would break the promise they ask for (an object "locked" in
//! COMPLIANCE mode that a DELETE then removes), so a write carrying one is refused with the error
//! AWS gives a bucket without the feature, before anything is stored.
//!
//! Owns: the list of such headers and their errors. Must not: refuse what lowtail does do (`x-amz-acl:
//! private` and `bucket-owner-full-control` both mean "the owner alone", which every object here is).

use s3s::{S3ErrorCode, S3Result};

use super::errors::s3;

/// Canned ACLs that say what lowtail does anyway: only the bucket owner has access.
const OWNER_ONLY_ACLS: [&str; 2] = ["private", "bucket-owner-full-control"];

/// Refuses a write (PutObject, CopyObject, CreateMultipartUpload, UploadPart, UploadPartCopy,
/// CreateBucket) whose `headers` ask for an unsupported feature; see the module documentation.
pub fn refuse_unsupported(headers: &hyper::HeaderMap) -> S3Result<()> {
    for (name, value) in headers {
        let name = name.as_str();
        if name == "x-amz-acl" {
            let acl = value.to_str().unwrap_or_default().trim();
            if !OWNER_ONLY_ACLS.contains(&acl) {
                return Err(s3(
                    S3ErrorCode::AccessControlListNotSupported,
                    format!(
                        "ACLs are not supported: every object belongs to the bucket owner alone (x-amz-acl: {acl})"
                    ),
                ));
            }
        } else if name.starts_with("x-amz-grant-") {
            return Err(s3(
                S3ErrorCode::AccessControlListNotSupported,
                format!("ACLs are not supported: every object belongs to the bucket owner alone ({name})"),
            ));
        } else if name.starts_with("x-amz-object-lock-") {
            return Err(s3(
                S3ErrorCode::InvalidRequest,
                format!("Bucket is missing Object Lock Configuration: object lock is not supported ({name})"),
            ));
        } else if name == "x-amz-bucket-object-lock-enabled" && !value.as_bytes().eq_ignore_ascii_case(b"false") {
            return Err(s3(S3ErrorCode::NotImplemented, "object lock is not supported"));
        } else if name == "x-amz-storage-class" && value.as_bytes() != b"STANDARD" {
            // Every object is stored one way, by the cluster's code: another class would be served
            // as STANDARD, without the cost or the retrieval rules it asks for.
            let class = String::from_utf8_lossy(value.as_bytes());
            return Err(s3(
                S3ErrorCode::InvalidStorageClass,
                format!("the storage class {class:?} is not offered: every object is STANDARD"),
            ));
        } else if name == "x-amz-website-redirect-location" {
            // There is no website endpoint to redirect from, and a stored redirect nothing honours
            // would be a promise silently broken.
            return Err(s3(S3ErrorCode::NotImplemented, "website redirects are not supported"));
        } else if name.starts_with("x-amz-server-side-encryption")
            || name.starts_with("x-amz-copy-source-server-side-encryption")
        {
            return Err(s3(S3ErrorCode::NotImplemented, format!("server-side encryption is not supported ({name})")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(name: &str, value: &str) -> Option<S3ErrorCode> {
        let mut headers = hyper::HeaderMap::new();
        headers.insert(hyper::header::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
        refuse_unsupported(&headers).err().map(|error| error.code().clone())
    }

    #[test]
    fn features_lowtail_lacks_are_refused_and_what_it_does_passes() {
        assert_eq!(refused("x-amz-acl", "private"), None);
        assert_eq!(refused("x-amz-acl", "bucket-owner-full-control"), None);
        assert_eq!(refused("x-amz-acl", "public-read"), Some(S3ErrorCode::AccessControlListNotSupported));
        assert_eq!(refused("x-amz-grant-read", "id=x"), Some(S3ErrorCode::AccessControlListNotSupported));
        assert_eq!(refused("x-amz-object-lock-mode", "COMPLIANCE"), Some(S3ErrorCode::InvalidRequest));
        assert_eq!(refused("x-amz-object-lock-legal-hold", "ON"), Some(S3ErrorCode::InvalidRequest));
        assert_eq!(refused("x-amz-bucket-object-lock-enabled", "true"), Some(S3ErrorCode::NotImplemented));
        assert_eq!(refused("x-amz-bucket-object-lock-enabled", "false"), None);
        assert_eq!(refused("x-amz-server-side-encryption", "AES256"), Some(S3ErrorCode::NotImplemented));
        assert_eq!(
            refused("x-amz-server-side-encryption-customer-algorithm", "AES256"),
            Some(S3ErrorCode::NotImplemented)
        );
        assert_eq!(refused("x-amz-meta-acl", "public-read"), None, "user metadata is not an ACL");
        assert_eq!(refused("x-amz-tagging", "project=a"), None, "tags are kept (`tagging`)");
        assert_eq!(refused("x-amz-website-redirect-location", "/x"), Some(S3ErrorCode::NotImplemented));
        assert_eq!(refused("x-amz-storage-class", "STANDARD"), None);
        assert_eq!(refused("x-amz-storage-class", "GLACIER"), Some(S3ErrorCode::InvalidStorageClass));
        assert_eq!(refused("x-amz-storage-class", "standard"), Some(S3ErrorCode::InvalidStorageClass));
    }
}
