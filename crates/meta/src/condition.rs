//! Conditional writes: what a write or delete requires of the object its key holds (S3's
//! `If-Match`, `If-None-Match`, and a delete's `x-amz-if-match-size` and
//! `x-amz-if-match-last-modified-time`), checked inside the transaction that commits the change, so
//! of writers racing on one key exactly the ones whose condition holds at their commit win. Owns
//! the rule; must not read or write records (`ops` calls it with the record it read).

use crate::error::{MetaError, Result};
use crate::types::ObjectMeta;

/// An ETag condition: `*` (any object) or one of these ETags (unquoted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EtagCondition {
    /// Any object at all.
    Any,
    /// An object with one of these ETags.
    Etags(Vec<String>),
}

impl EtagCondition {
    /// Whether an object with `etag` (unquoted) meets the condition.
    pub fn matches(&self, etag: &str) -> bool {
        match self {
            EtagCondition::Any => true,
            EtagCondition::Etags(etags) => etags.iter().any(|wanted| wanted.trim_matches('"') == etag),
        }
    }
}

/// What a write or delete requires of the object its key holds when it commits. The default
/// requires nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteCondition {
    /// The key must hold an object matching this (`NoSuchKey` when it holds none).
    pub if_match: Option<EtagCondition>,
    /// The key must not hold an object matching this (`If-None-Match: *`: must hold none).
    pub if_none_match: Option<EtagCondition>,
    /// The object must be this many bytes (`NoSuchKey` when there is none).
    pub if_size_bytes: Option<u64>,
    /// The object must have been last modified in this second, unix seconds (`NoSuchKey` when
    /// there is none): HTTP dates have one-second resolution.
    pub if_last_modified_secs: Option<i64>,
}

impl WriteCondition {
    /// Whether the condition asks for anything.
    pub fn is_none(&self) -> bool {
        *self == WriteCondition::default()
    }

    /// Checks the condition against `existing`, the object `bucket/key` holds now:
    /// `PreconditionFailed` when it does not hold, `NoSuchKey` when it needs an object and there is
    /// none.
    pub fn check(&self, bucket: &str, key: &str, existing: Option<&ObjectMeta>) -> Result<()> {
        let needs_object =
            self.if_match.is_some() || self.if_size_bytes.is_some() || self.if_last_modified_secs.is_some();
        let Some(object) = existing else {
            if needs_object {
                return Err(MetaError::NoSuchKey { bucket: bucket.to_string(), key: key.to_string() });
            }
            return Ok(());
        };
        let failed = |why: &str| Err(MetaError::PreconditionFailed(format!("{bucket}/{key}: {why}")));
        if self.if_match.as_ref().is_some_and(|condition| !condition.matches(&object.etag)) {
            return failed("its ETag does not match If-Match");
        }
        if self.if_none_match.as_ref().is_some_and(|condition| condition.matches(&object.etag)) {
            return failed("it matches If-None-Match");
        }
        if self.if_size_bytes.is_some_and(|size| size != object.size_bytes) {
            return failed("its size does not match");
        }
        let modified_secs = (object.last_modified_ms / 1000) as i64;
        if self.if_last_modified_secs.is_some_and(|secs| secs != modified_secs) {
            return failed("its last-modified time does not match");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(etag: &str) -> ObjectMeta {
        ObjectMeta {
            version: Default::default(),
            tags: Default::default(),
            size_bytes: 5,
            etag: etag.into(),
            content_type: None,
            user_metadata: Default::default(),
            headers: Default::default(),
            last_modified_ms: 7_500,
            completed_upload_id: None,
            checksum: None,
            layout: crate::types::Layout::Striped { segments: Vec::new() },
        }
    }

    #[test]
    fn conditions_hold_or_say_which_failed() {
        let absent = WriteCondition { if_none_match: Some(EtagCondition::Any), ..Default::default() };
        assert_eq!(absent.check("b", "k", None), Ok(()));
        assert!(matches!(absent.check("b", "k", Some(&object("e1"))), Err(MetaError::PreconditionFailed(_))));
        let matching =
            WriteCondition { if_match: Some(EtagCondition::Etags(vec!["\"e1\"".into()])), ..Default::default() };
        assert_eq!(matching.check("b", "k", Some(&object("e1"))), Ok(()));
        assert!(matches!(matching.check("b", "k", Some(&object("e2"))), Err(MetaError::PreconditionFailed(_))));
        assert!(matches!(matching.check("b", "k", None), Err(MetaError::NoSuchKey { .. })));
        let sized = WriteCondition { if_size_bytes: Some(5), if_last_modified_secs: Some(7), ..Default::default() };
        assert_eq!(sized.check("b", "k", Some(&object("e1"))), Ok(()));
        let stale = WriteCondition { if_last_modified_secs: Some(8), ..Default::default() };
        assert!(matches!(stale.check("b", "k", Some(&object("e1"))), Err(MetaError::PreconditionFailed(_))));
        assert!(WriteCondition::default().is_none() && WriteCondition::default().check("b", "k", None).is_ok());
    }
}
