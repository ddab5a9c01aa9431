//! Record integrity: every stored value is sealed with a CRC-32C of its key and its bytes, checked on
//! every read, and the damage found is remembered so that a lookup that misses is not taken for an
//! absent object while a damaged record might be that object. Owns the sealed value layout and the
//! damage log; it must not know the metadata rules (`ops`) or how a backend stores bytes.
//!
//! A sealed value is `[SEALED][crc32c(key ‖ payload), 4 bytes little-endian][payload]`, the payload
//! being what the rules stored (a `format` record, or nothing for an index entry). The key is in the
//! checksum, so a record whose key was damaged (and so moved in the key order) fails its check too.
//!
//! Stores written before values were sealed hold unsealed values; a store is *strict* once every value
//! has been sealed (`migrate` rewrites them and sets [`MARKER_KEY`]), and from then on an unsealed value
//! is damage like a failed checksum.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::Serialize;

use crate::error::{MetaError, Result};

/// The first byte of a sealed value.
pub const SEALED: u8 = 2;
/// Bytes a seal adds in front of the payload.
pub const SEAL_BYTES: usize = 5;
/// Present (sealed) once every value of the store is sealed.
pub const MARKER_KEY: &[u8] = b"format/record-checksums";
/// The damaged keys a log keeps by name (it counts all).
const MAX_NAMED_KEYS: usize = 64;
/// Damaged keys remembered so that each is counted once; past this, repeats may count again.
const MAX_REMEMBERED_KEYS: usize = 100_000;

/// What a damaged record may have been, by its key's prefix: a lookup of such a thing that misses
/// cannot be answered "no such …" while the damage lasts. A prefix not listed (the key itself
/// damaged) may have been anything.
const DOUBTFUL_BY_PREFIX: [(&str, &[Doubtful]); 13] = [
    ("object/", &[Doubtful::Objects]),
    ("bucket/", &[Doubtful::Buckets]),
    ("stripe/", &[Doubtful::Stripes]),
    ("upload/", &[Doubtful::Uploads]),
    ("part/", &[Doubtful::Uploads]),
    ("node/", &[]),
    ("node-stripe/", &[]),
    ("under-redundant/", &[]),
    ("config/", &[]),
    ("lease/", &[]),
    ("access-key/", &[]),
    ("counter/", &[]),
    ("format/", &[]),
];

/// A kind of record whose absence damage makes doubtful.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Doubtful {
    /// Objects (`NoSuchKey`).
    Objects,
    /// Buckets (`NoSuchBucket`).
    Buckets,
    /// Stripes (`NoSuchStripe`): the collectors must not take a stripe for gone.
    Stripes,
    /// Multipart uploads and their parts (`NoSuchUpload`).
    Uploads,
}

impl Doubtful {
    const ALL: [Doubtful; 4] = [Doubtful::Objects, Doubtful::Buckets, Doubtful::Stripes, Doubtful::Uploads];

    /// What a damaged record at `key` may have been.
    fn of_key(key: &str) -> &'static [Doubtful] {
        DOUBTFUL_BY_PREFIX.iter().find(|(prefix, _)| key.starts_with(prefix)).map_or(&Doubtful::ALL, |(_, kinds)| kinds)
    }

    /// The kind of absence `error` reports, if it is one.
    fn of_error(error: &MetaError) -> Option<Doubtful> {
        match error {
            MetaError::NoSuchKey { .. } => Some(Doubtful::Objects),
            MetaError::NoSuchBucket(_) => Some(Doubtful::Buckets),
            MetaError::NoSuchStripe(_) => Some(Doubtful::Stripes),
            MetaError::NoSuchUpload(_) => Some(Doubtful::Uploads),
            _ => None,
        }
    }
}

/// The checksum of a sealed value.
fn checksum(key: &[u8], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(key), payload)
}

/// `payload` sealed under `key`.
pub fn seal(key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut sealed = Vec::with_capacity(SEAL_BYTES + payload.len());
    sealed.push(SEALED);
    sealed.extend_from_slice(&checksum(key, payload).to_le_bytes());
    sealed.extend_from_slice(payload);
    sealed
}

/// What is wrong with a stored value, if anything; the payload of a sound sealed value.
fn check(key: &[u8], stored: &[u8]) -> std::result::Result<Vec<u8>, &'static str> {
    match stored.split_first() {
        Some((&SEALED, rest)) if rest.len() >= SEAL_BYTES - 1 => {
            let (crc, payload) = rest.split_at(SEAL_BYTES - 1);
            let crc = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
            if crc == checksum(key, payload) { Ok(payload.to_vec()) } else { Err("failed its checksum") }
        }
        Some((&SEALED, _)) => Err("is shorter than its seal"),
        _ => Err("is not sealed"),
    }
}

/// Whether `stored` is an unsealed value of a store written before seals (a format-1 record or an
/// empty index entry).
fn is_legacy(stored: &[u8]) -> bool {
    stored.first().is_none_or(|&first| first == crate::format::FORMAT_V1)
}

/// Whether `stored` (under `key`) is an unsealed value that a store written before seals holds.
pub fn needs_seal(key: &[u8], stored: &[u8]) -> bool {
    check(key, stored).is_err() && is_legacy(stored)
}

/// The damage a store has seen, for status and for the operator.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DamageReport {
    /// Damaged records found (each key counted once).
    pub damaged_records: u64,
    /// The first of their keys (lossy UTF-8), at most 64.
    pub keys: Vec<String>,
    /// What the damaged records may have been: a lookup of one of these that misses cannot be
    /// answered "no such …" (it answers [`MetaError::Damaged`]).
    pub doubtful: Vec<Doubtful>,
    /// Records the last whole check read (`None` before one ran).
    pub records_checked: Option<u64>,
}

/// A store's seals and damage log.
#[derive(Debug, Default)]
pub struct Integrity {
    /// Every value is sealed (unsealed ones are damage).
    strict: AtomicBool,
    damage: Mutex<DamageReport>,
    /// Damaged keys seen, so each is counted once.
    seen: Mutex<std::collections::BTreeSet<Vec<u8>>>,
    checked: AtomicU64,
}

impl Integrity {
    /// A log for a store whose values are all sealed when `strict`.
    pub fn new(strict: bool) -> Self {
        let integrity = Self::default();
        integrity.strict.store(strict, Ordering::Relaxed);
        integrity
    }

    /// From now on unsealed values are damage.
    pub fn set_strict(&self) {
        self.strict.store(true, Ordering::Relaxed);
    }

    /// Whether unsealed values are damage.
    pub fn is_strict(&self) -> bool {
        self.strict.load(Ordering::Relaxed)
    }

    /// The payload of the value stored at `key`, or [`MetaError::Damaged`] (and the damage noted).
    pub fn unseal(&self, key: &[u8], stored: &[u8]) -> Result<Vec<u8>> {
        match check(key, stored) {
            Ok(payload) => Ok(payload),
            Err(_) if !self.is_strict() && is_legacy(stored) => Ok(stored.to_vec()),
            Err(what) => Err(self.note(key, what)),
        }
    }

    /// Notes the damaged record at `key` and returns the error that reports it.
    pub fn note(&self, key: &[u8], what: &str) -> MetaError {
        let name = String::from_utf8_lossy(key).into_owned();
        let new = {
            let mut seen = crate::lock(&self.seen);
            if seen.len() < MAX_REMEMBERED_KEYS { seen.insert(key.to_vec()) } else { !seen.contains(key) }
        };
        if new {
            let mut damage = crate::lock(&self.damage);
            damage.damaged_records += 1;
            if damage.keys.len() < MAX_NAMED_KEYS {
                damage.keys.push(name.clone());
            }
            for &kind in Doubtful::of_key(&name) {
                if !damage.doubtful.contains(&kind) {
                    damage.doubtful.push(kind);
                    damage.doubtful.sort_unstable();
                }
            }
        }
        MetaError::Damaged(format!("the metadata record at {name} {what}"))
    }

    /// Notes that a whole check read `records` records.
    pub fn note_checked(&self, records: u64) {
        self.checked.store(records, Ordering::Relaxed);
        crate::lock(&self.damage).records_checked = Some(records);
    }

    /// The damage seen so far.
    pub fn report(&self) -> DamageReport {
        crate::lock(&self.damage).clone()
    }

    /// `error` as it is, unless it says an object, bucket, stripe or upload does not exist while
    /// damage makes that doubtful: then [`MetaError::Damaged`], since it might be a damaged record.
    pub fn doubt(&self, error: MetaError) -> MetaError {
        let Some(kind) = Doubtful::of_error(&error) else { return error };
        let missing = error;
        let damage = crate::lock(&self.damage);
        if !damage.doubtful.contains(&kind) {
            return missing;
        }
        MetaError::Damaged(format!(
            "{missing}, but {} metadata records are damaged and one may be it (run `lowtail admin meta check`)",
            damage.damaged_records
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_under_its_key_only() {
        let integrity = Integrity::new(true);
        let sealed = seal(b"object/b/k", b"\x01{\"a\":1}");
        assert_eq!(integrity.unseal(b"object/b/k", &sealed).unwrap(), b"\x01{\"a\":1}");
        assert!(matches!(integrity.unseal(b"object/b/x", &sealed), Err(MetaError::Damaged(_))));
        let empty = seal(b"node-stripe/00000001/0000000000000002", b"");
        assert_eq!(integrity.unseal(b"node-stripe/00000001/0000000000000002", &empty).unwrap(), b"");
    }

    #[test]
    fn every_flipped_bit_is_damage() {
        let key = b"stripe/0000000000000007";
        let sealed = seal(key, b"\x01{\"offset_bytes\":4096}");
        for byte in 0..sealed.len() {
            for bit in 0..8 {
                let mut flipped = sealed.clone();
                flipped[byte] ^= 1 << bit;
                let integrity = Integrity::new(true);
                assert!(integrity.unseal(key, &flipped).is_err(), "byte {byte} bit {bit}");
            }
        }
        let truncated = &sealed[..3];
        assert!(Integrity::new(true).unseal(key, truncated).is_err());
    }

    #[test]
    fn unsealed_values_pass_only_before_the_store_is_strict() {
        let legacy = b"\x01\"v\"";
        assert_eq!(Integrity::new(false).unseal(b"config/x", legacy).unwrap(), legacy);
        assert!(Integrity::new(false).unseal(b"node-stripe/1/2", b"").is_ok());
        assert!(Integrity::new(true).unseal(b"config/x", legacy).is_err());
    }

    #[test]
    fn damage_makes_misses_doubtful_of_what_it_may_have_been() {
        let integrity = Integrity::new(true);
        let missing = || MetaError::NoSuchKey { bucket: "b".into(), key: "k".into() };
        let _ = integrity.note(b"stripe/0000000000000001", "failed its checksum");
        assert!(matches!(integrity.doubt(missing()), MetaError::NoSuchKey { .. }));
        assert!(matches!(integrity.doubt(MetaError::NoSuchStripe(9)), MetaError::Damaged(_)));
        assert!(matches!(integrity.doubt(MetaError::NoSuchNode(9)), MetaError::NoSuchNode(9)));
        let _ = integrity.note(b"node-stripe/00000001/0000000000000001", "failed its checksum");
        assert!(matches!(integrity.doubt(MetaError::NoSuchBucket("b".into())), MetaError::NoSuchBucket(_)));
        let _ = integrity.note(b"objeXt/b/k", "failed its checksum");
        let _ = integrity.note(b"objeXt/b/k", "failed its checksum");
        assert!(matches!(integrity.doubt(missing()), MetaError::Damaged(_)));
        assert!(matches!(integrity.doubt(MetaError::NoSuchBucket("b".into())), MetaError::Damaged(_)));
        let report = integrity.report();
        assert_eq!((report.damaged_records, report.keys.len()), (3, 3), "each key counted once");
        assert_eq!(report.doubtful, Doubtful::ALL.to_vec(), "a damaged key may have been anything");
    }
}
