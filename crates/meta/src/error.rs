//! `MetaError`: every way a metadata operation can fail, one variant per outcome the S3 layer maps to its
//! own error code. Owns the error type only; it must not decide HTTP status codes (that is the gateway's).

use thiserror::Error;

/// The error of every `MetaStore` operation. A returned error means nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MetaError {
    /// The bucket does not exist.
    #[error("no such bucket: {0}")]
    NoSuchBucket(String),
    /// A bucket of that name already exists.
    #[error("bucket already exists: {0}")]
    BucketAlreadyExists(String),
    /// The bucket still holds objects or multipart uploads.
    #[error("bucket not empty: {0}")]
    BucketNotEmpty(String),
    /// The object key does not exist in the bucket.
    #[error("no such key: {bucket}/{key}")]
    NoSuchKey {
        /// Bucket that was searched.
        bucket: String,
        /// Key that was not found.
        key: String,
    },
    /// The version of the key does not exist.
    #[error("no such version {version_id} of {bucket}/{key}")]
    NoSuchVersion {
        /// Bucket that was searched.
        bucket: String,
        /// Key whose version was asked for.
        key: String,
        /// The version id asked for.
        version_id: String,
    },
    /// The multipart upload does not exist (never created, completed or aborted).
    #[error("no such upload: {0}")]
    NoSuchUpload(String),
    /// A part named in a completion does not exist or its ETag differs.
    #[error("invalid part {part_number}: {reason}")]
    InvalidPart {
        /// Part number the client named.
        part_number: u16,
        /// Why it is invalid.
        reason: String,
    },
    /// The parts named in a completion are not in strictly ascending order.
    #[error("parts are not in ascending order")]
    InvalidPartOrder,
    /// The stripe does not exist.
    #[error("no such stripe: {0}")]
    NoSuchStripe(u64),
    /// The node is not registered.
    #[error("no such node: {0}")]
    NoSuchNode(u32),
    /// A compare-and-swap lost: the record changed since it was read (or a create found it existing), or a
    /// transaction kept losing races and gave up after its bounded number of attempts.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A conditional write's or delete's condition did not hold when it would have committed;
    /// nothing was changed.
    #[error("precondition failed: {0}")]
    PreconditionFailed(String),
    /// A bad input (bucket name, key length, part number, ...); nothing was changed.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The backend failed: I/O, etcd unreachable.
    #[error("metadata backend: {0}")]
    Backend(String),
    /// A record failed its check (its checksum, or its form), or a lookup missed while damaged records
    /// might hold what it looked for: the store cannot answer truthfully until it is repaired.
    #[error("metadata damaged: {0}")]
    Damaged(String),
}

/// Shorthand for results of this crate.
pub type Result<T, E = MetaError> = std::result::Result<T, E>;

impl MetaError {
    pub(crate) fn backend(context: &str, error: impl std::fmt::Display) -> Self {
        MetaError::Backend(format!("{context}: {error}"))
    }
}
