//! Times as S3 speaks them (`s3s` timestamps) and as the metadata store keeps them (Unix
//! milliseconds), and the wall clock that dates new buckets, objects, uploads and parts. Owns these
//! conversions only; must not read or write the store.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use s3s::dto::Timestamp;

/// Now, in Unix milliseconds (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_millis() as u64).unwrap_or(0)
}

/// The timestamp of Unix milliseconds `ms`, as an answer carries it.
pub fn timestamp(ms: u64) -> Timestamp {
    Timestamp::from(UNIX_EPOCH + Duration::from_millis(ms))
}

/// Unix milliseconds of a client's timestamp (0 for one before 1970, which S3 clients do not send).
pub fn timestamp_ms(time: Timestamp) -> u64 {
    let time = time::OffsetDateTime::from(time);
    u64::try_from(time.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}
