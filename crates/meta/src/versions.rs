//! Versions of a versioned bucket's keys, inside one transaction of `ops`: where each version
//! record lives (`format`: the current version at `object/…` unless it is a delete marker, every
//! other version under `version/…`, newest first), how a write, a delete and a delete of one
//! version change them, and which versions they release. Owns those rules; must not open
//! transactions, allocate sequences (the caller passes one) or know anything of S3 requests.
//!
//! A change reads the key's whole history first ([`History::read`]), computes the new history in
//! memory (pure functions, tested below), then writes the difference ([`History::store`]): the
//! backends' rule is that a transaction never reads a key after writing it. Every change also
//! rewrites the key's guard record (`version-head/…`), which every change reads first, so two
//! transactions changing one key's history conflict even where one only deletes a record the
//! other scanned (etcd guards scanned ranges against insertions and changes, not deletions).
//!
//! The invariant every change keeps: a key's `object/` record, when present, is its newest
//! version and is not a delete marker; when it is absent, the key reads as absent, and its newest
//! version record (if any) is a delete marker. At most one `null` version exists per key.

use std::collections::BTreeMap;

use crate::error::{MetaError, Result};
use crate::format;
use crate::kv::Kv;
use crate::records::{get_record, put_record, scan_all};
use crate::types::{Committed, HistoryPage, KeyHistory, ObjectMeta, VersionStamp, Versioning};

/// Most versions of one key a transaction reads.
pub const MAX_KEY_VERSIONS: usize = 100_000;
/// Version records read per scan.
const SCAN_PAGE_ENTRIES: usize = 256;

/// One key's versions as a transaction read them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct History {
    /// The current version, when it is not a delete marker.
    pub current: Option<ObjectMeta>,
    /// Every other version, newest first.
    pub others: Vec<ObjectMeta>,
}

/// Where one key's versions live.
pub(crate) struct KeyVersions<'a> {
    pub bucket: &'a str,
    pub key: &'a str,
}

impl KeyVersions<'_> {
    /// Reads the key's history (and its guard, so a concurrent change conflicts).
    pub async fn read(&self, kv: &mut dyn Kv) -> Result<History> {
        kv.get(&format::version_head_key(self.bucket, self.key)).await?;
        let current = get_record(kv, &format::object_key(self.bucket, self.key)).await?;
        let start = format::key_versions_prefix(self.bucket, self.key);
        let others = scan_all(kv, start, &format::key_versions_end(self.bucket, self.key), MAX_KEY_VERSIONS).await?;
        Ok(History { current, others })
    }

    /// Writes what changed from `before` to `after`, and the key's guard.
    pub fn store(&self, kv: &mut dyn Kv, before: &History, after: &History) -> Result<()> {
        let object_key = format::object_key(self.bucket, self.key);
        match (&before.current, &after.current) {
            (_, Some(current)) if before.current.as_ref() != Some(current) => put_record(kv, object_key, current)?,
            (Some(_), None) => kv.delete(object_key)?,
            _ => {}
        }
        let by_sequence = |history: &History| -> BTreeMap<u64, ObjectMeta> {
            history.others.iter().map(|version| (version.version.sequence, version.clone())).collect()
        };
        let (old, new) = (by_sequence(before), by_sequence(after));
        for sequence in old.keys().filter(|sequence| !new.contains_key(sequence)) {
            kv.delete(format::version_key(self.bucket, self.key, *sequence))?;
        }
        for (sequence, version) in new.iter().filter(|(sequence, version)| old.get(sequence) != Some(version)) {
            put_record(kv, format::version_key(self.bucket, self.key, *sequence), version)?;
        }
        let head = format::version_head_key(self.bucket, self.key);
        match after.current.is_some() || !after.others.is_empty() {
            true => kv.put(head, format::encode(&(after.others.len() as u64))),
            false => kv.delete(head),
        }
    }
}

impl History {
    /// The version `version_id` names (`null` names the null version), current or not.
    pub fn find(&self, version_id: &str) -> Option<&ObjectMeta> {
        self.current.iter().chain(&self.others).find(|version| version.version.is(version_id))
    }

    /// Every version, newest first.
    pub fn all(self) -> Vec<ObjectMeta> {
        self.current.into_iter().chain(self.others).collect()
    }

    /// The history after `object` (a delete marker when `object.version.delete_marker`) is written
    /// as the newest version under `versioning` (a versioned bucket's: an unversioned write reads
    /// no history) with `sequence`, and what that releases. `object`'s stamp is the store's to set.
    pub fn written(mut self, versioning: Versioning, mut object: ObjectMeta, sequence: u64) -> (History, Committed) {
        let marker = object.version.delete_marker;
        let mut released = Vec::new();
        let id = match versioning {
            Versioning::Unversioned => unreachable!("an unversioned write replaces one record and reads no history"),
            Versioning::Enabled => Some(format::version_suffix(sequence)),
            Versioning::Suspended => {
                // The null version is replaced wherever it is.
                if let Some(null) = self.current.take_if(|current| current.version.id.is_none()) {
                    released.push(null);
                }
                if let Some(at) = self.others.iter().position(|version| version.version.id.is_none()) {
                    released.push(self.others.remove(at));
                }
                None
            }
        };
        object.version = VersionStamp { id, sequence, delete_marker: marker };
        let version = object.version.clone();
        if let Some(current) = self.current.take() {
            self.others.insert(0, current);
        }
        match marker {
            true => self.others.insert(0, object),
            false => self.current = Some(object),
        }
        released.retain(|version| !version.version.delete_marker);
        assert!(released.len() <= 1, "a key has at most one null version to release");
        (self, Committed { version, released })
    }

    /// The history without the version `version_id` names, and that version (`None`: no such
    /// version, nothing changed). The newest remaining version becomes current unless it is a
    /// delete marker.
    pub fn without(mut self, version_id: &str) -> (History, Option<ObjectMeta>) {
        let removed = match self.current.take_if(|current| current.version.is(version_id)) {
            Some(current) => Some(current),
            None => {
                let at = self.others.iter().position(|version| version.version.is(version_id));
                at.map(|at| self.others.remove(at))
            }
        };
        if self.current.is_none() && self.others.first().is_some_and(|newest| !newest.version.delete_marker) {
            self.current = Some(self.others.remove(0));
        }
        (self, removed)
    }
}

/// Most versions one page of [`list_histories`] holds (a key's whole history may exceed it).
pub const MAX_HISTORY_PAGE_VERSIONS: usize = 10_000;

/// One page of the keys of `bucket` after `after` (all keys when `None`) with their whole
/// histories (newest first, the current version first), read in the caller's one transaction:
/// whole keys of about `max_versions` versions in all, so no key's history is split across pages
/// and a version that moves between `object/` and `version/` is seen once, where it is.
pub(crate) async fn list_histories(
    kv: &mut dyn Kv,
    bucket: &str,
    after: Option<&str>,
    max_versions: usize,
) -> Result<HistoryPage> {
    let limit = max_versions.clamp(1, MAX_HISTORY_PAGE_VERSIONS);
    let (others, others_cut) = other_versions_after(kv, bucket, after, limit).await?;
    let start = match after {
        Some(after) => format::key_successor(&format::object_key(bucket, after)),
        None => format::object_prefix(bucket),
    };
    let end = match &others_cut {
        Some(cut) => format::object_key(bucket, cut),
        None => format::prefix_end(&format::object_prefix(bucket)).expect("object prefixes end with '/'"),
    };
    let mut current = kv.scan(&start, &end, limit + 1).await?;
    let current_cut = match current.len() > limit {
        true => Some(key_of_object(bucket, &current[limit].0)?),
        false => None,
    };
    current.truncate(limit);
    let cut = match (others_cut, current_cut) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut histories: BTreeMap<String, Vec<ObjectMeta>> = BTreeMap::new();
    for (record_key, value) in &current {
        histories.entry(key_of_object(bucket, record_key)?).or_default().push(format::decode(record_key, value)?);
    }
    for (key, version) in others {
        histories.entry(key).or_default().push(version);
    }
    if let Some(cut) = &cut {
        histories.retain(|key, _| key < cut);
    }
    let next_after = cut.and_then(|_| histories.keys().next_back().cloned());
    let histories = histories.into_iter().map(|(key, versions)| KeyHistory { key, versions }).collect();
    Ok(HistoryPage { histories, next_after })
}

/// The version records (not `object/`) of the keys after `after`, whole keys, at least `limit`
/// records unless the bucket has fewer, in key order, newest first within a key; and the first key
/// left out, if any.
async fn other_versions_after(
    kv: &mut dyn Kv,
    bucket: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<(Vec<(String, ObjectMeta)>, Option<String>)> {
    let mut cursor = match after {
        Some(after) => format::key_versions_end(bucket, after),
        None => format::version_prefix(bucket),
    };
    let end = format::prefix_end(&format::version_prefix(bucket)).expect("version prefixes end with '/'");
    let mut versions: Vec<(String, ObjectMeta)> = Vec::new();
    for _page in 0..(limit + MAX_KEY_VERSIONS).div_ceil(SCAN_PAGE_ENTRIES) + 1 {
        let page = kv.scan(&cursor, &end, SCAN_PAGE_ENTRIES).await?;
        for (record_key, value) in &page {
            let key = format::key_of_version(bucket, record_key)?;
            if versions.len() >= limit && versions.last().is_some_and(|(last, _)| *last != key) {
                return Ok((versions, Some(key)));
            }
            versions.push((key, format::decode(record_key, value)?));
        }
        match page.last() {
            Some((last, _)) if page.len() == SCAN_PAGE_ENTRIES => cursor = format::key_successor(last),
            _ => return Ok((versions, None)),
        }
    }
    Err(MetaError::Backend(format!("a key of bucket {bucket} has more than {MAX_KEY_VERSIONS} versions")))
}

fn key_of_object(bucket: &str, record_key: &[u8]) -> Result<String> {
    let key = &record_key[format::object_prefix(bucket).len()..];
    String::from_utf8(key.to_vec()).map_err(|_| MetaError::Backend(format!("non-UTF-8 object key in bucket {bucket}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Layout;

    fn object(size_bytes: u64) -> ObjectMeta {
        ObjectMeta {
            size_bytes,
            etag: format!("e{size_bytes}"),
            content_type: None,
            user_metadata: Default::default(),
            headers: Default::default(),
            last_modified_ms: 0,
            completed_upload_id: None,
            checksum: None,
            tags: Default::default(),
            version: VersionStamp::default(),
            layout: Layout::Striped { segments: Vec::new() },
        }
    }

    fn marker() -> ObjectMeta {
        ObjectMeta::delete_marker(0)
    }

    fn sizes(history: &History) -> (Option<u64>, Vec<u64>) {
        (history.current.as_ref().map(|c| c.size_bytes), history.others.iter().map(|o| o.size_bytes).collect())
    }

    #[test]
    fn writes_keep_the_invariant_in_every_state() {
        let unversioned = History { current: Some(object(1)), others: Vec::new() };
        let (enabled, committed) = unversioned.clone().written(Versioning::Enabled, object(2), 5);
        assert_eq!(sizes(&enabled), (Some(2), vec![1]));
        assert!(committed.released.is_empty());
        assert_eq!(committed.version.id, Some(format::version_suffix(5)));
        let (deleted, committed) = enabled.written(Versioning::Enabled, marker(), 6);
        assert_eq!(sizes(&deleted), (None, vec![0, 2, 1]));
        assert!(committed.version.delete_marker && deleted.others[0].version.delete_marker);
        // Suspended: the null version (the oldest here) is released, the new one is null.
        let (suspended, committed) = deleted.written(Versioning::Suspended, object(3), 7);
        assert_eq!(sizes(&suspended), (Some(3), vec![0, 2]));
        assert_eq!(committed.released.iter().map(|r| r.size_bytes).collect::<Vec<_>>(), [1]);
        assert_eq!(suspended.current.as_ref().unwrap().version.id, None);
        let (marked, committed) = suspended.written(Versioning::Suspended, marker(), 8);
        assert_eq!(sizes(&marked), (None, vec![0, 0, 2]));
        assert_eq!(committed.released.iter().map(|r| r.size_bytes).collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn removing_a_version_makes_the_newest_live_one_current() {
        let history = History::default().written(Versioning::Enabled, object(1), 1).0;
        let history = history.written(Versioning::Enabled, object(2), 2).0;
        let history = history.written(Versioning::Enabled, marker(), 3).0;
        let marker_id = format::version_suffix(3);
        let (without_marker, removed) = history.clone().without(&marker_id);
        assert!(removed.unwrap().version.delete_marker);
        assert_eq!(sizes(&without_marker), (Some(2), vec![1]));
        let (without_two, removed) = history.clone().without(&format::version_suffix(2));
        assert_eq!(removed.unwrap().size_bytes, 2);
        assert_eq!(sizes(&without_two), (None, vec![0, 1]), "a marker stays newest, not current");
        let (same, removed) = history.clone().without("0123456789abcdef");
        assert_eq!((same, removed), (history, None));
    }
}
