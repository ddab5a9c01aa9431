//! What each key may hold, as far as the client knows: the checker of the swarm's invariants.
//! Every key has one writer (its client) and is acted on one operation at a time, so its
//! possible contents after each operation are a short list: an acknowledged write or delete leaves
//! exactly one; one that failed or whose answer was lost may or may not have happened, so it adds
//! its version beside the ones already possible. A read must return one of them, byte for byte.
//!
//! Owns the bytes of every version (drawn from its seed, never stored) and the rule above. Must not
//! talk to the cluster.

use std::collections::BTreeMap;

/// One version a key may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// No object.
    Absent,
    /// The object written with these bytes ([`body_bytes`] of the seed and size).
    #[allow(missing_docs)]
    Body { seed: u64, size_bytes: u64 },
}

/// How an operation ended, as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    /// A 2xx answer: it happened.
    Acknowledged,
    /// An error answer or none (a lost connection, a timeout): it may or may not have happened.
    Uncertain,
}

/// The bytes of a version's body: a xorshift stream of `seed`, the same every time.
pub fn body_bytes(seed: u64, size_bytes: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut bytes = Vec::with_capacity(size_bytes as usize);
    while (bytes.len() as u64) < size_bytes {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let take = (size_bytes as usize - bytes.len()).min(8);
        bytes.extend_from_slice(&state.to_le_bytes()[..take]);
    }
    bytes
}

/// What a read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// 404 NoSuchKey.
    Absent,
    /// These bytes.
    Bytes(Vec<u8>),
}

/// The possible contents of every key; see the module documentation.
#[derive(Debug, Default)]
pub struct Model {
    keys: BTreeMap<String, Vec<Version>>,
    /// Every write and delete of each key with when it ended (unix ms), for [`Model::rebuilt`].
    history: BTreeMap<String, Vec<(u64, Version)>>,
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

impl Model {
    /// Records that a write of `version` (or a delete: `Version::Absent`) to `key` ended with `ack`.
    pub fn wrote(&mut self, key: &str, version: Version, ack: Ack) {
        self.history.entry(key.to_string()).or_default().push((unix_ms(), version));
        let possible = self.keys.entry(key.to_string()).or_insert_with(|| vec![Version::Absent]);
        match ack {
            Ack::Acknowledged => *possible = vec![version],
            Ack::Uncertain => {
                if !possible.contains(&version) {
                    possible.push(version);
                }
            }
        }
    }

    /// The metadata store was rebuilt from the nodes, rolling forward every write that began after
    /// `since_ms` (docs/durability.md): a delete since then may be undone and an uncertain write
    /// may be kept, so each key may now hold what it held at `since_ms` or anything written after.
    pub fn rebuilt(&mut self, since_ms: u64) {
        for (key, writes) in &self.history {
            let possible = self.keys.entry(key.clone()).or_insert_with(|| vec![Version::Absent]);
            let before = writes.iter().rev().find(|(at, _)| *at < since_ms).map_or(Version::Absent, |(_, v)| *v);
            let since = writes.iter().filter(|(at, _)| *at >= since_ms).map(|(_, version)| *version);
            for version in std::iter::once(before).chain(since) {
                if !possible.contains(&version) {
                    possible.push(version);
                }
            }
        }
    }

    /// The versions `key` may hold now.
    pub fn possible(&self, key: &str) -> Vec<Version> {
        self.keys.get(key).cloned().unwrap_or_else(|| vec![Version::Absent])
    }

    /// Every key written so far.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.keys.keys()
    }

    /// Checks a read of `key`: `None` when it found one of the possible versions; else what is
    /// wrong, in words. A read that found bytes pins the key to them: later reads must agree.
    pub fn check_read(&mut self, key: &str, read: &Read) -> Option<String> {
        let possible = self.possible(key);
        let found = possible.iter().copied().find(|version| matches(version, read));
        match found {
            Some(version) => {
                self.keys.insert(key.to_string(), vec![version]);
                None
            }
            None => Some(describe_mismatch(key, &possible, read)),
        }
    }
}

fn matches(version: &Version, read: &Read) -> bool {
    match (version, read) {
        (Version::Absent, Read::Absent) => true,
        (Version::Body { seed, size_bytes }, Read::Bytes(bytes)) => {
            bytes.len() as u64 == *size_bytes && *bytes == body_bytes(*seed, *size_bytes)
        }
        _ => false,
    }
}

fn describe_mismatch(key: &str, possible: &[Version], read: &Read) -> String {
    let found = match read {
        Read::Absent => "no object".to_string(),
        Read::Bytes(bytes) => format!("{} bytes matching no version written", bytes.len()),
    };
    format!("{key}: read {found}; it may hold only {possible:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(seed: u64, size_bytes: u64) -> Version {
        Version::Body { seed, size_bytes }
    }

    #[test]
    fn acknowledged_writes_pin_a_key_and_uncertain_ones_widen_it() {
        let mut model = Model::default();
        assert!(model.check_read("k", &Read::Absent).is_none(), "never written");
        model.wrote("k", body(1, 10), Ack::Acknowledged);
        assert!(model.check_read("k", &Read::Absent).is_some(), "an acknowledged write is there");
        model.wrote("k", body(2, 20), Ack::Uncertain);
        model.wrote("k", Version::Absent, Ack::Uncertain);
        assert_eq!(model.possible("k").len(), 3);
        assert!(model.check_read("k", &Read::Bytes(body_bytes(2, 20))).is_none());
        // The read pinned it: the older version is no longer possible.
        assert!(model.check_read("k", &Read::Bytes(body_bytes(1, 10))).is_some());
        model.wrote("k", Version::Absent, Ack::Acknowledged);
        assert!(model.check_read("k", &Read::Absent).is_none());
    }

    #[test]
    fn a_rebuild_may_bring_back_what_was_written_or_deleted_since_its_snapshot() {
        let mut model = Model::default();
        model.wrote("old", body(1, 10), Ack::Acknowledged);
        model.wrote("gone", body(2, 10), Ack::Acknowledged);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let since_ms = unix_ms();
        std::thread::sleep(std::time::Duration::from_millis(5));
        model.wrote("gone", Version::Absent, Ack::Acknowledged);
        model.rebuilt(since_ms);
        assert_eq!(model.possible("old"), [body(1, 10)], "written before: as it was");
        assert!(model.check_read("gone", &Read::Bytes(body_bytes(2, 10))).is_none(), "a delete since may be undone");
        assert!(model.check_read("old", &Read::Absent).is_some(), "never an older state than the snapshot's");
    }

    #[test]
    fn half_written_or_foreign_bytes_are_caught() {
        let mut model = Model::default();
        model.wrote("k", body(1, 1000), Ack::Acknowledged);
        let mut torn = body_bytes(1, 1000);
        torn[999] ^= 1;
        assert!(model.check_read("k", &Read::Bytes(torn)).unwrap().contains("1000 bytes"));
        assert!(model.check_read("k", &Read::Bytes(body_bytes(1, 999))).is_some(), "a short read");
        assert_eq!(body_bytes(5, 13), body_bytes(5, 13));
        assert_ne!(body_bytes(5, 13), body_bytes(6, 13));
    }
}
