//! The access keys the S3 API accepts: a fixed table from configuration, consulted by `s3s` while it
//! verifies SigV4 signatures (headers and presigned URLs). Owns the lookup only; it must not verify
//! signatures itself (that is `s3s`'s) or log secrets.

use std::collections::HashMap;

use s3s::auth::{S3Auth, SecretKey};
use s3s::{S3ErrorCode, S3Result};

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
