//! The mapping of metadata and data-path errors onto the S3 error codes clients expect, and the
//! completion of the error documents `s3s` writes itself (request id, AWS's message). Owns the
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
        MetaError::NoSuchVersion { .. } => S3ErrorCode::NoSuchVersion,
        MetaError::NoSuchUpload(_) => S3ErrorCode::NoSuchUpload,
        MetaError::InvalidPart { .. } => S3ErrorCode::InvalidPart,
        MetaError::InvalidPartOrder => S3ErrorCode::InvalidPartOrder,
        MetaError::InvalidArgument(_) => S3ErrorCode::InvalidArgument,
        MetaError::PreconditionFailed(_) => S3ErrorCode::PreconditionFailed,
        // A transaction that kept losing races: the client should back off and retry.
        MetaError::Conflict(_) => S3ErrorCode::SlowDown,
        MetaError::NoSuchStripe(_) | MetaError::NoSuchNode(_) | MetaError::Backend(_) => {
            tracing::error!(%error, "metadata failure");
            S3ErrorCode::InternalError
        }
        // Never a "no such key" for what might be a damaged record, never its bytes.
        MetaError::Damaged(_) => {
            tracing::error!(%error, "damaged metadata; `lowtail admin meta check` lists it");
            S3ErrorCode::InternalError
        }
    };
    S3Error::with_message(code, error.to_string())
}

/// AWS's message for an error code `s3s` answers without one (from its request parsing, before a
/// handler runs).
fn default_message(code: &str) -> Option<&'static str> {
    match code {
        "InvalidBucketName" => Some("The specified bucket is not valid."),
        "InvalidURI" => Some("Couldn't parse the specified URI."),
        "KeyTooLongError" => Some("Your key is too long."),
        "AccessDenied" => Some("Access Denied"),
        "NotImplemented" => Some("A header you provided implies functionality that is not implemented."),
        _ => None,
    }
}

/// `document`, an S3 error document, with the request id and, where `s3s` left it out, the message
/// AWS gives for the code; `None` if it needs neither or is not an error document.
pub fn completed_error_document(document: &[u8], request_id: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(document).ok()?;
    let end = text.rfind("</Error>")?;
    let code = text.split_once("<Code>").and_then(|(_, rest)| rest.split_once("</Code>")).map(|(code, _)| code)?;
    let mut added = String::new();
    if !text.contains("<Message>")
        && let Some(message) = default_message(code)
    {
        added.push_str(&format!("<Message>{message}</Message>"));
    }
    if !text.contains("<RequestId>") {
        // Request ids are letters and digits only: nothing to escape.
        added.push_str(&format!("<RequestId>{request_id}</RequestId>"));
    }
    if added.is_empty() {
        return None;
    }
    Some(format!("{}{added}{}", &text[..end], &text[end..]).into_bytes())
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
        assert_eq!(*from_meta(MetaError::Damaged("x".into())).code(), S3ErrorCode::InternalError);
        assert_eq!(*from_data(DataError::Unavailable("x".into())).code(), S3ErrorCode::ServiceUnavailable);
        let range = DataError::InvalidRange { start: 1, end: 2, size: 0 };
        assert_eq!(*from_data(range).code(), S3ErrorCode::InvalidRange);
        assert_eq!(*from_data(DataError::TooLarge { size: 2, limit: 1 }).code(), S3ErrorCode::EntityTooLarge);
        assert_eq!(*from_data(DataError::Body("reset".into())).code(), S3ErrorCode::IncompleteBody);
    }
}

#[cfg(test)]
mod document_tests {
    use super::*;

    #[test]
    fn an_error_document_gets_its_request_id_and_a_missing_message() {
        let bare = br#"<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidBucketName</Code></Error>"#;
        let completed = String::from_utf8(completed_error_document(bare, "ABC1").unwrap()).unwrap();
        assert!(completed.ends_with(
            "<Code>InvalidBucketName</Code><Message>The specified bucket is not valid.</Message>\
             <RequestId>ABC1</RequestId></Error>"
        ));
        let whole = b"<Error><Code>NoSuchKey</Code><Message>m</Message><RequestId>X</RequestId></Error>";
        assert_eq!(completed_error_document(whole, "ABC1"), None);
        assert_eq!(completed_error_document(b"<ListBucketResult/>", "ABC1"), None);
    }
}
