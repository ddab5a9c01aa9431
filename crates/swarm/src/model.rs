//! What each key may hold, as far as the client knows: the checker of the swarm's invariants.
//! Every key has one writer (its client) and is acted on one operation at a time, so its
//! possible contents after each operation are a short list: an acknowledged write or delete leaves
//! exactly one; one that failed or whose answer was lost may or may not have happened, so it adds
//! its version beside the ones already possible. A read must return one of them, byte for byte.
//!
//! A read may also find the data lost, and that is allowed only where the store said it could be:
//! a write acknowledged below its code's full redundancy (`x-lowtail-failures-tolerated: f`, under
//! a bucket's `k` or `k+1` rule or degraded) survives f node failures until the store restores the
//! rest, and one not acknowledged survives what the bucket's rule promises at least. So a loss is
//! excused ([`Model::excuses_loss`]) only when every version the key may hold is such a write and
//! more nodes than it survives were faulted since; a cluster found whole since ends every excuse.
//!
//! Owns the bytes of every version (drawn from its seed, never stored) and the rules above. Must
//! not talk to the cluster.

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
    /// A 2xx answer: it happened, as redundant as its code makes it (or a delete).
    Acknowledged,
    /// A 2xx answer saying the bytes survive only `failures_tolerated` node failures until the
    /// store restores the rest (`x-lowtail-redundancy: pending` or `degraded`).
    Below {
        /// What the answer said they survive.
        failures_tolerated: usize,
    },
    /// An error answer or none (a lost connection, a timeout): it may or may not have happened.
    Uncertain,
}

/// A version that may be lost when enough nodes fail: written at `since_ms`, surviving
/// `failures_tolerated` node failures until the cluster is whole again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Risk {
    version: Version,
    since_ms: u64,
    failures_tolerated: usize,
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
    /// Of each key's possible versions, those that may be lost ([`Model::excuses_loss`]).
    risks: BTreeMap<String, Vec<Risk>>,
    /// What a write not acknowledged survives at least if it happened: the bucket rule's floor.
    uncertain_failures_tolerated: usize,
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

impl Model {
    /// A model for a bucket whose writes, when they happen without an answer, survive at least
    /// `uncertain_failures_tolerated` node failures (the floor of its write ack rule).
    pub fn new(uncertain_failures_tolerated: usize) -> Self {
        Self { uncertain_failures_tolerated, ..Self::default() }
    }

    /// Records that a write of `version` (or a delete: `Version::Absent`) to `key` ended with `ack`.
    pub fn wrote(&mut self, key: &str, version: Version, ack: Ack) {
        let now_ms = unix_ms();
        self.history.entry(key.to_string()).or_default().push((now_ms, version));
        let possible = self.keys.entry(key.to_string()).or_insert_with(|| vec![Version::Absent]);
        let risks = self.risks.entry(key.to_string()).or_default();
        let risk = |failures_tolerated| Risk { version, since_ms: now_ms, failures_tolerated };
        match ack {
            Ack::Acknowledged | Ack::Below { .. } => {
                *possible = vec![version];
                risks.clear();
                if let (Ack::Below { failures_tolerated }, Version::Body { .. }) = (ack, version) {
                    risks.push(risk(failures_tolerated));
                }
            }
            Ack::Uncertain => {
                if !possible.contains(&version) {
                    possible.push(version);
                }
                if matches!(version, Version::Body { .. }) {
                    risks.push(risk(self.uncertain_failures_tolerated));
                }
            }
        }
    }

    /// Whether a read of `key` that found its data lost is one the store's answers allowed: every
    /// version with bytes the key may hold (of `size_bytes`, when the object's size is known and
    /// some version has it) was written below full redundancy (or without an answer) since the
    /// cluster was last whole, and `nodes_faulted_since(ms)` (distinct nodes faulted at or after
    /// `ms`) is more than it survives.
    pub fn excuses_loss(&self, key: &str, size_bytes: Option<u64>, nodes_faulted_since: impl Fn(u64) -> usize) -> bool {
        let risks = self.risks.get(key).map_or(&[][..], Vec::as_slice);
        let bodies: Vec<Version> =
            self.possible(key).into_iter().filter(|v| matches!(v, Version::Body { .. })).collect();
        let sized = |v: &&Version| matches!(v, Version::Body { size_bytes: size, .. } if Some(*size) == size_bytes);
        let found: Vec<Version> = bodies.iter().filter(sized).copied().collect();
        let mut bodies = if found.is_empty() { bodies } else { found }.into_iter().peekable();
        bodies.peek().is_some()
            && bodies.all(|version| {
                risks
                    .iter()
                    .any(|risk| risk.version == version && nodes_faulted_since(risk.since_ms) > risk.failures_tolerated)
            })
    }

    /// Why a loss of `key` is not excused, in words: its possible versions and what each was
    /// written at (`full` when at full redundancy), with `nodes_faulted_since` each write.
    pub fn loss_context(&self, key: &str, nodes_faulted_since: impl Fn(u64) -> usize) -> String {
        let risks = self.risks.get(key).map_or(&[][..], Vec::as_slice);
        let versions: Vec<String> = self
            .possible(key)
            .iter()
            .filter(|version| matches!(version, Version::Body { .. }))
            .map(|version| match risks.iter().find(|risk| risk.version == *version) {
                Some(risk) => format!(
                    "{version:?} surviving {} node failures, {} nodes faulted since",
                    risk.failures_tolerated,
                    nodes_faulted_since(risk.since_ms)
                ),
                None => format!("{version:?} at full redundancy"),
            })
            .collect();
        format!("it may hold {}", versions.join("; "))
    }

    /// The keys that may hold a version [`excuses_loss`](Self::excuses_loss) could excuse.
    pub fn keys_at_risk(&self) -> Vec<String> {
        self.risks.iter().filter(|(_, risks)| !risks.is_empty()).map(|(key, _)| key.clone()).collect()
    }

    /// The cluster was found whole (every stripe at full redundancy): nothing written so far may
    /// be lost any more.
    pub fn whole(&mut self) {
        self.risks.clear();
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
                if let Some(risks) = self.risks.get_mut(key) {
                    risks.retain(|risk| risk.version == version);
                }
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
    fn a_loss_is_excused_only_below_full_redundancy_and_past_what_the_answer_said_it_survives() {
        let mut model = Model::new(1);
        let faulted = |n: usize| move |_since_ms: u64| n;
        model.wrote("full", body(1, 10), Ack::Acknowledged);
        assert!(!model.excuses_loss("full", None, faulted(5)), "acknowledged at full redundancy: never lost");
        model.wrote("early", body(2, 10), Ack::Below { failures_tolerated: 1 });
        assert!(!model.excuses_loss("early", None, faulted(1)), "one node faulted: it survives that");
        assert!(model.excuses_loss("early", None, faulted(2)));
        model.wrote("early", body(3, 10), Ack::Uncertain);
        assert!(!model.excuses_loss("early", None, faulted(1)), "the uncertain write survives the rule's 1 too");
        assert!(model.excuses_loss("early", None, faulted(2)), "both versions past what they survive");
        model.wrote("mixed", body(4, 10), Ack::Acknowledged);
        model.wrote("mixed", body(5, 10), Ack::Uncertain);
        assert!(!model.excuses_loss("mixed", None, faulted(9)), "the lost one may be the full write");
        assert!(model.check_read("mixed", &Read::Bytes(body_bytes(5, 10))).is_none());
        assert!(model.excuses_loss("mixed", None, faulted(2)), "pinned to the uncertain write");
        assert!(!model.excuses_loss("never", None, faulted(9)), "nothing written, nothing to lose");
        model.wrote("sized", body(6, 10), Ack::Acknowledged);
        model.wrote("sized", body(7, 20), Ack::Uncertain);
        assert!(!model.excuses_loss("sized", None, faulted(2)), "either may be the one lost");
        assert!(model.excuses_loss("sized", Some(20), faulted(2)), "the HEAD says it is the uncertain one");
        assert!(!model.excuses_loss("sized", Some(10), faulted(2)), "the HEAD says it is the full one");
        assert!(!model.excuses_loss("sized", Some(99), faulted(2)), "no version of that size: all may be");
        model.wrote("gone", Version::Absent, Ack::Uncertain);
        assert!(!model.excuses_loss("gone", None, faulted(9)), "a delete leaves no bytes to lose");
        assert_eq!(model.keys_at_risk(), ["early", "mixed", "sized"]);
        model.whole();
        assert!(!model.excuses_loss("early", None, faulted(9)), "the cluster was whole since");
        assert!(model.keys_at_risk().is_empty());
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
