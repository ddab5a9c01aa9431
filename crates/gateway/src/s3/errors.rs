//! The mapping of metadata and data-path errors onto the S3 error codes clients expect. Owns the
//! codes and messages only; it must not decide what a handler does next (retry, release, ...).

use s3s::{S3Error, S3ErrorCode};

use crate::data::DataError;
use meta::MetaError;

/// The S3 error for a metadata error.
pub fn from_meta(error: MetaError) -> S3Error {
    let code = match &error {
        MetaError::NoSuchBucket(_) => S3ErrorCode::NoSuchBucket,
        MetaError::BucketAlreadyExists(_) => S3ErrorCode::BucketAlreadyExists,
        MetaError::BucketNotEmpty(_) => S3ErrorCode::BucketNotEmpty,
        MetaError::NoSuchKey { .. } => S3ErrorCode::NoSuchKey,
        MetaError::NoSuchUpload(_) => S3ErrorCode::NoSuchUpload,
        MetaError::InvalidPart { .. } => S3ErrorCode::InvalidPart,
        MetaError::InvalidPartOrder => S3ErrorCode::InvalidPartOrder,
        MetaError::InvalidArgument(_) => S3ErrorCode::InvalidArgument,
        // A transaction that kept losing races: the client should back off and retry.
        MetaError::Conflict(_) => S3ErrorCode::SlowDown,
        MetaError::NoSuchStripe(_) | MetaError::NoSuchNode(_) | MetaError::Backend(_) => {
            tracing::error!(%error, "metadata failure");
            S3ErrorCode::InternalError
        }
    };
    S3Error::with_message(code, error.to_string())
}

/// The S3 error for a data-path error.
pub fn from_data(error: DataError) -> S3Error {
    let code = match &error {
        DataError::Unavailable(_) => S3ErrorCode::ServiceUnavailable,
        DataError::InvalidRange { .. } => S3ErrorCode::InvalidRange,
        DataError::TooLarge { .. } => S3ErrorCode::EntityTooLarge,
        DataError::Body(_) => S3ErrorCode::IncompleteBody,
        DataError::Lost(_) | DataError::Meta(_) | DataError::Internal(_) => {
            tracing::error!(%error, "data path failure");
            S3ErrorCode::InternalError
        }
    };
    S3Error::with_message(code, error.to_string())
}

/// An S3 error with a code and a message.
pub fn s3(code: S3ErrorCode, message: impl Into<String>) -> S3Error {
    S3Error::with_message(code, message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_clients_expect() {
        let key = MetaError::NoSuchKey { bucket: "b".into(), key: "k".into() };
        assert_eq!(*from_meta(key).code(), S3ErrorCode::NoSuchKey);
        assert_eq!(*from_meta(MetaError::BucketNotEmpty("b".into())).code(), S3ErrorCode::BucketNotEmpty);
        assert_eq!(*from_meta(MetaError::Backend("x".into())).code(), S3ErrorCode::InternalError);
        assert_eq!(*from_data(DataError::Unavailable("x".into())).code(), S3ErrorCode::ServiceUnavailable);
        let range = DataError::InvalidRange { start: 1, end: 2, size: 0 };
        assert_eq!(*from_data(range).code(), S3ErrorCode::InvalidRange);
        assert_eq!(*from_data(DataError::TooLarge { size: 2, limit: 1 }).code(), S3ErrorCode::EntityTooLarge);
        assert_eq!(*from_data(DataError::Body("reset".into())).code(), S3ErrorCode::IncompleteBody);
    }
}
