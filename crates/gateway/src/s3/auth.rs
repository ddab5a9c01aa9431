//! The access keys the S3 API accepts: a fixed table from configuration, consulted by `s3s` while it
//! verifies SigV4 signatures (headers and presigned URLs); and the access rule applied after a
//! signature is verified (signed requests only, presigned URLs valid for 1 s to 7 days). Owns the
//! lookup and that rule only; it must not verify signatures itself (that is `s3s`'s) or log secrets.

use std::collections::HashMap;
use std::sync::Arc;

use meta::MetaStore;

use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::{S3ErrorCode, S3Result};

/// The longest validity of a presigned URL (SigV4's limit: 7 days).
pub const MAX_PRESIGNED_EXPIRES_SECS: i64 = 7 * 24 * 3600;

/// Access key → secret key.
pub struct CredentialTable {
    secrets: HashMap<String, SecretKey>,
}

impl std::fmt::Debug for CredentialTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Access keys only: secrets never reach logs.
        f.debug_struct("CredentialTable").field("access_keys", &self.secrets.keys().collect::<Vec<_>>()).finish()
    }
}

impl CredentialTable {
    /// A table of `(access key, secret key)` pairs; a repeated access key keeps its last secret.
    pub fn new(credentials: Vec<(String, String)>) -> Self {
        let secrets =
            credentials.into_iter().map(|(access_key, secret)| (access_key, SecretKey::from(secret))).collect();
        CredentialTable { secrets }
    }
}

#[async_trait::async_trait]
impl S3Auth for CredentialTable {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        // The code S3 answers for a key it does not know.
        self.secrets.get(access_key).cloned().ok_or_else(|| {
            s3s::S3Error::with_message(S3ErrorCode::InvalidAccessKeyId, "the access key is not known to this gateway")
        })
    }
}

/// Who may do what: any request signed with a known key, which `s3s` has verified by the time this
/// runs. Anonymous requests are refused (as `s3s`'s default check does): AccessDenied, or, as AWS
/// answers, NoSuchBucket when the bucket they name does not exist (CreateBucket aside). Presigned URLs whose
/// `X-Amz-Expires` is outside 1 s to 7 days, which `s3s` 0.14 accepts, are refused too.
pub struct SignedOnly {
    /// Where an anonymous request's bucket is looked up.
    pub meta: Arc<dyn MetaStore>,
}

impl std::fmt::Debug for SignedOnly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedOnly").finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl S3Access for SignedOnly {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        // A CreateBucket names a bucket that does not exist yet: AccessDenied, as for AWS.
        if cx.credentials().is_none()
            && cx.s3_op().name() != "CreateBucket"
            && let Some(bucket) = cx.s3_path().get_bucket_name()
            && let Err(meta::MetaError::NoSuchBucket(_)) = self.meta.get_bucket(bucket).await
        {
            return Err(s3s::S3Error::with_message(S3ErrorCode::NoSuchBucket, "The specified bucket does not exist"));
        }
        check_signed(cx.credentials(), cx.uri())
    }
}

/// [`SignedOnly`]'s rule for a request with `credentials` (verified by `s3s`) to `uri`.
pub fn check_signed(credentials: Option<&s3s::auth::Credentials>, uri: &hyper::Uri) -> S3Result<()> {
    if credentials.is_none() {
        return Err(s3s::S3Error::with_message(S3ErrorCode::AccessDenied, "Signature is required"));
    }
    if let Some(expires) = presigned_expires(uri.query().unwrap_or("")) {
        let valid = expires.parse::<i64>().is_ok_and(|secs| (1..=MAX_PRESIGNED_EXPIRES_SECS).contains(&secs));
        if !valid {
            return Err(s3s::S3Error::with_message(
                S3ErrorCode::AccessDenied,
                format!("X-Amz-Expires must be between 1 and {MAX_PRESIGNED_EXPIRES_SECS} seconds"),
            ));
        }
    }
    Ok(())
}

/// The raw `X-Amz-Expires` value of a query string, if present.
fn presigned_expires(query: &str) -> Option<&str> {
    query.split('&').find_map(|pair| pair.strip_prefix("X-Amz-Expires="))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_expiry_of_a_presigned_query() {
        let query = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=609901&X-Amz-Signature=ab";
        assert_eq!(presigned_expires(query), Some("609901"));
        assert_eq!(presigned_expires("list-type=2&prefix=X-Amz-Expires%3D1"), None);
        assert_eq!(presigned_expires(""), None);
    }
}
