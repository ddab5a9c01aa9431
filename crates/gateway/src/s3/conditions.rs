//! Conditional requests (`If-Match`, `If-None-Match`, `If-Modified-Since`, `If-Unmodified-Since`)
//! evaluated as S3 and RFC 9110 do, and a write's conditions in the form the metadata store checks
//! them at the commit. Owns the decision only; it must not read or write objects.

use s3s::dto::{ETagCondition, Timestamp};

/// What a GET or HEAD should do after its preconditions are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// Serve the object.
    Proceed,
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

/// The conditional headers of a request.
#[derive(Debug, Default, Clone, Copy)]
pub struct Conditions<'a> {
    /// `If-Match`.
    pub if_match: Option<&'a ETagCondition>,
    /// `If-None-Match`.
    pub if_none_match: Option<&'a ETagCondition>,
    /// `If-Modified-Since`.
    pub if_modified_since: Option<&'a Timestamp>,
    /// `If-Unmodified-Since`.
    pub if_unmodified_since: Option<&'a Timestamp>,
}

/// Evaluates `conditions` against an existing object with `etag` (unquoted) last modified at
/// `last_modified_ms`. Order and precedence as in RFC 9110 §13.2.2, which is also S3's: If-Match
/// (else If-Unmodified-Since) can fail the request; then If-None-Match (else If-Modified-Since) can
/// make it 304.
pub fn evaluate(conditions: &Conditions<'_>, etag: &str, last_modified_ms: u64) -> Precondition {
    // HTTP dates have one-second resolution, so compare whole seconds.
    let modified_secs = (last_modified_ms / 1000) as i64;
    if let Some(condition) = conditions.if_match {
        if !etag_matches(condition, etag) {
            return Precondition::Failed;
        }
    } else if let Some(since) = conditions.if_unmodified_since
        && modified_secs > unix_secs(since)
    {
        return Precondition::Failed;
    }
    if let Some(condition) = conditions.if_none_match {
        if etag_matches(condition, etag) {
            return Precondition::NotModified;
        }
    } else if let Some(since) = conditions.if_modified_since
        && modified_secs <= unix_secs(since)
    {
        return Precondition::NotModified;
    }
    Precondition::Proceed
}

/// Whether an `If-Match` / `If-None-Match` value names the object (`*` names any existing object).
pub fn etag_matches(condition: &ETagCondition, etag: &str) -> bool {
    match condition {
        ETagCondition::Any => true,
        ETagCondition::ETag(tag) => tag.value() == etag,
    }
}

/// A write's or delete's `If-Match` / `If-None-Match` (and a delete's size and last-modified
/// conditions) as the metadata store checks them in the transaction that commits.
pub fn write_condition(
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
    if_size_bytes: Option<i64>,
    if_last_modified: Option<&Timestamp>,
) -> meta::WriteCondition {
    let etags = |condition: &ETagCondition| match condition {
        ETagCondition::Any => meta::EtagCondition::Any,
        ETagCondition::ETag(tag) => meta::EtagCondition::Etags(vec![tag.value().to_string()]),
    };
    meta::WriteCondition {
        if_match: if_match.map(etags),
        if_none_match: if_none_match.map(etags),
        // A negative size names no object.
        if_size_bytes: if_size_bytes.map(|size| u64::try_from(size).unwrap_or(u64::MAX)),
        if_last_modified_secs: if_last_modified.map(unix_secs),
    }
}

fn unix_secs(timestamp: &Timestamp) -> i64 {
    time::OffsetDateTime::from(timestamp.clone()).unix_timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;
    use s3s::dto::ETag;
    use std::time::{Duration, UNIX_EPOCH};

    fn at(secs: u64) -> Timestamp {
        Timestamp::from(UNIX_EPOCH + Duration::from_secs(secs))
    }

    #[test]
    fn precedence_follows_rfc_9110() {
        let same = ETagCondition::ETag(ETag::Strong("abc".into()));
        let other = ETagCondition::ETag(ETag::Strong("xyz".into()));
        let (before, after) = (at(999), at(1001));
        let modified_ms = 1_000_500;
        let check = |conditions: Conditions<'_>| evaluate(&conditions, "abc", modified_ms);
        assert_eq!(check(Conditions::default()), Precondition::Proceed);
        assert_eq!(check(Conditions { if_match: Some(&other), ..Default::default() }), Precondition::Failed);
        assert_eq!(
            check(Conditions { if_match: Some(&ETagCondition::Any), ..Default::default() }),
            Precondition::Proceed
        );
        // If-Match true wins over a failing If-Unmodified-Since.
        let conditions = Conditions { if_match: Some(&same), if_unmodified_since: Some(&before), ..Default::default() };
        assert_eq!(check(conditions), Precondition::Proceed);
        assert_eq!(
            check(Conditions { if_unmodified_since: Some(&before), ..Default::default() }),
            Precondition::Failed
        );
        assert_eq!(check(Conditions { if_none_match: Some(&same), ..Default::default() }), Precondition::NotModified);
        assert_eq!(
            check(Conditions { if_modified_since: Some(&after), ..Default::default() }),
            Precondition::NotModified
        );
        assert_eq!(check(Conditions { if_modified_since: Some(&before), ..Default::default() }), Precondition::Proceed);
        // If-None-Match false wins over an If-Modified-Since that would say 304.
        let conditions =
            Conditions { if_none_match: Some(&other), if_modified_since: Some(&after), ..Default::default() };
        assert_eq!(check(conditions), Precondition::Proceed);
        // Same second as the modification: not modified since.
        assert_eq!(
            check(Conditions { if_modified_since: Some(&at(1000)), ..Default::default() }),
            Precondition::NotModified
        );
    }
}
