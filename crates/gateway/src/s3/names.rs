//! S3's rules for the names a request gives: object keys, bucket names and part numbers, refused with
//! the error codes S3 answers. Owns these checks only; they are pure and must not read or write the
//! store (the operations call them before anything is read or written).

use meta::validate::{MAX_KEY_BYTES, MAX_PART_NUMBER};
use s3s::{S3ErrorCode, S3Result};

use super::errors::s3;

/// An object key: not empty, at most [`MAX_KEY_BYTES`] (KeyTooLongError beyond).
pub fn check_key(key: &str) -> S3Result<()> {
    if key.len() > MAX_KEY_BYTES {
        return Err(s3(
            S3ErrorCode::KeyTooLongError,
            format!("the key is {} bytes; the limit is {MAX_KEY_BYTES}", key.len()),
        ));
    }
    if key.is_empty() {
        return Err(s3(S3ErrorCode::InvalidArgument, "the object key must not be empty"));
    }
    Ok(())
}

/// S3's bucket naming rules (the metadata store's check) as an S3 `InvalidBucketName`.
pub fn check_bucket_name(name: &str) -> S3Result<()> {
    meta::validate::bucket_name(name).map_err(|error| s3(S3ErrorCode::InvalidBucketName, error.to_string()))
}

/// A part number of a multipart upload: 1 to [`MAX_PART_NUMBER`].
pub fn part_number(number: i32) -> S3Result<u16> {
    u16::try_from(number).ok().filter(|number| (1..=MAX_PART_NUMBER).contains(number)).ok_or_else(|| {
        s3(S3ErrorCode::InvalidArgument, format!("part number must be an integer between 1 and {MAX_PART_NUMBER}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_are_checked() {
        for bad in ["foo.-bar", "foo-.bar", "foo..bar", "foo-", "ab", "Foo"] {
            assert_eq!(*check_bucket_name(bad).unwrap_err().code(), S3ErrorCode::InvalidBucketName, "{bad}");
        }
        for good in ["foo-bar.baz", "a1.b2-c3", "abc"] {
            assert!(check_bucket_name(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn keys_and_part_numbers_are_checked() {
        assert_eq!(*check_key(&"k".repeat(1025)).unwrap_err().code(), S3ErrorCode::KeyTooLongError);
        assert!(check_key(&"k".repeat(1024)).is_ok());
        assert!(part_number(0).is_err() && part_number(10_001).is_err() && part_number(-1).is_err());
        assert_eq!(part_number(10_000).unwrap(), 10_000);
    }
}
