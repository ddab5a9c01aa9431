//! Storage format shared by both backends: the key schema and the value encoding. Owns the byte layout of
//! everything stored; it must not know which backend holds the bytes.
//!
//! Values are one format byte (`FORMAT_V1` = 1) followed by the record as JSON (serde_json). JSON keeps
//! records readable with `etcdctl get`, and serde's defaults let new optional fields be added without a
//! new format; an incompatible change gets a new format byte and a decoder for the old one.
//!
//! Keys (UTF-8 text; the etcd backend puts its configurable prefix in front):
//!
//! | key | value |
//! |---|---|
//! | `bucket/<name>` | `BucketMeta` |
//! | `object/<bucket>/<key>` | `ObjectMeta`: the key's current version, unless that is a delete marker |
//! | `version-head/<bucket>/<escaped key>\0` | the number of a key's other versions; a guard every change of its versions rewrites |
//! | `version/<bucket>/<escaped key>\0<16 hex>` | `ObjectMeta`: every other version of a versioned bucket's key (noncurrent ones, and a current delete marker); the suffix is `u64::MAX` − the version's sequence, so a key's versions sort newest first |
//! | `stripe/<id: 16 hex>` | `StripeMeta` |
//! | `node/<id: 8 hex>` | `NodeInfo` |
//! | `node-stripe/<node: 8 hex>/<stripe: 16 hex>` | empty; index of the stripes with a unit on a node |
//! | `under-redundant/<stripe: 16 hex>` | empty; index of the stripes with missing units |
//! | `upload/<bucket>/<upload id>` | `UploadMeta` |
//! | `part/<bucket>/<upload id>/<part: 5 digits>` | `PartMeta` |
//! | `config/<name>` | config value (JSON string) |
//! | `access-key/<access key>` | `AccessKeyClass` |
//! | `profile/<name>` | `StoredProfile` |
//! | `counter/<name>` | last id handed out (redb only; etcd uses its revision) |
//!
//! Bucket names cannot contain `/`, so `object/<bucket>/` is a prefix of exactly that bucket's objects, and
//! the byte order of `object/<bucket>/<key>` is the byte order of the keys: S3's listing order. Fixed-width
//! hex makes numeric order byte order.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{MetaError, Result};
use crate::types::{NodeId, StripeId};

/// The current value format: one byte, then JSON.
pub const FORMAT_V1: u8 = 1;

/// Encodes a record in the current format.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = vec![FORMAT_V1];
    // Serializing plain data structs (strings, numbers, maps with string keys) cannot fail.
    serde_json::to_writer(&mut bytes, value).expect("metadata records serialize to JSON");
    bytes
}

/// Decodes a record, checking the format byte.
pub fn decode<T: DeserializeOwned>(key: &[u8], bytes: &[u8]) -> Result<T> {
    match bytes.split_first() {
        Some((&FORMAT_V1, json)) => serde_json::from_slice(json).map_err(|error| {
            MetaError::Backend(format!("corrupt record at {}: {error}", String::from_utf8_lossy(key)))
        }),
        Some((format, _)) => Err(MetaError::Backend(format!(
            "record at {} has unknown format {format}; written by a newer lowtail?",
            String::from_utf8_lossy(key)
        ))),
        None => Err(MetaError::Backend(format!("empty record at {}", String::from_utf8_lossy(key)))),
    }
}

/// The smallest byte string greater than every string starting with `prefix` (the exclusive end of the
/// prefix's range). `None` when no such string exists (`prefix` empty or all `0xff`).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The smallest byte string greater than `key`.
pub fn key_successor(key: &[u8]) -> Vec<u8> {
    let mut next = key.to_vec();
    next.push(0);
    next
}

/// Key of a bucket.
pub fn bucket_key(bucket: &str) -> Vec<u8> {
    format!("bucket/{bucket}").into_bytes()
}

/// Prefix of all bucket keys.
pub fn bucket_prefix() -> Vec<u8> {
    b"bucket/".to_vec()
}

/// Prefix of one bucket's objects.
pub fn object_prefix(bucket: &str) -> Vec<u8> {
    format!("object/{bucket}/").into_bytes()
}

/// Key of an object.
pub fn object_key(bucket: &str, key: &str) -> Vec<u8> {
    let mut bytes = object_prefix(bucket);
    bytes.extend_from_slice(key.as_bytes());
    bytes
}

/// Prefix of every version record of `bucket`.
pub fn version_prefix(bucket: &str) -> Vec<u8> {
    format!("version/{bucket}/").into_bytes()
}

/// Prefix of the version records of `key` in `bucket`: the key escaped so that no key's prefix is
/// another's (`\0` becomes `\0\xff`), then `\0`; the order of keys is kept.
pub fn key_versions_prefix(bucket: &str, key: &str) -> Vec<u8> {
    let mut bytes = version_prefix(bucket);
    for &byte in key.as_bytes() {
        bytes.push(byte);
        if byte == 0 {
            bytes.push(0xff);
        }
    }
    bytes.push(0);
    bytes
}

/// The exclusive end of `key`'s version records: its prefix then `0xff`, which keeps out the
/// records of the keys that continue it with a NUL (escaped as `\0\xff`; UTF-8 has no `0xff`).
pub fn key_versions_end(bucket: &str, key: &str) -> Vec<u8> {
    let mut end = key_versions_prefix(bucket, key);
    end.push(0xff);
    end
}

/// Key of the guard record of `key`'s versions (`versions` rewrites it with every change).
pub fn version_head_key(bucket: &str, key: &str) -> Vec<u8> {
    let mut bytes = format!("version-head/{bucket}/").into_bytes();
    bytes.extend_from_slice(&key_versions_prefix(bucket, key)[version_prefix(bucket).len()..]);
    bytes
}

/// Prefix of every version guard record of `bucket`.
pub fn version_head_prefix(bucket: &str) -> Vec<u8> {
    format!("version-head/{bucket}/").into_bytes()
}

/// Key of the version of `key` with `sequence`.
pub fn version_key(bucket: &str, key: &str, sequence: u64) -> Vec<u8> {
    let mut bytes = key_versions_prefix(bucket, key);
    bytes.extend_from_slice(version_suffix(sequence).as_bytes());
    bytes
}

/// The suffix of a version record (and a versioned write's id): newest first in byte order.
pub fn version_suffix(sequence: u64) -> String {
    format!("{:016x}", u64::MAX - sequence)
}

/// The key a version record under `bucket`'s version prefix is of, from the record key's rest.
pub fn key_of_version(bucket: &str, record_key: &[u8]) -> Result<String> {
    let rest = &record_key[version_prefix(bucket).len()..];
    let mut key = Vec::with_capacity(rest.len());
    let mut bytes = rest.iter();
    while let Some(&byte) = bytes.next() {
        if byte == 0 {
            match bytes.clone().next() {
                Some(0xff) => {
                    bytes.next();
                    key.push(0);
                }
                _ => return String::from_utf8(key).map_err(|_| corrupt_version_key(record_key)),
            }
        } else {
            key.push(byte);
        }
    }
    Err(corrupt_version_key(record_key))
}

fn corrupt_version_key(record_key: &[u8]) -> MetaError {
    MetaError::Backend(format!("malformed version key {}", String::from_utf8_lossy(record_key)))
}

/// Key of a stripe.
pub fn stripe_key(id: StripeId) -> Vec<u8> {
    format!("stripe/{:016x}", id.0).into_bytes()
}

/// Prefix of all stripe keys.
pub fn stripe_prefix() -> Vec<u8> {
    b"stripe/".to_vec()
}

/// Key of a node.
pub fn node_key(id: NodeId) -> Vec<u8> {
    format!("node/{:08x}", id.0).into_bytes()
}

/// Prefix of all node keys.
pub fn node_prefix() -> Vec<u8> {
    b"node/".to_vec()
}

/// Key of an entry of the node → stripe index.
pub fn node_stripe_key(node: NodeId, stripe: StripeId) -> Vec<u8> {
    format!("node-stripe/{:08x}/{:016x}", node.0, stripe.0).into_bytes()
}

/// Prefix of one node's index entries.
pub fn node_stripe_prefix(node: NodeId) -> Vec<u8> {
    format!("node-stripe/{:08x}/", node.0).into_bytes()
}

/// Key of an entry of the under-redundant index.
pub fn under_redundant_key(stripe: StripeId) -> Vec<u8> {
    format!("under-redundant/{:016x}", stripe.0).into_bytes()
}

/// Prefix of the under-redundant index.
pub fn under_redundant_prefix() -> Vec<u8> {
    b"under-redundant/".to_vec()
}

/// Parses the stripe id out of a node → stripe or under-redundant index key (its last component).
pub fn stripe_of_index_key(key: &[u8]) -> Result<StripeId> {
    let text = std::str::from_utf8(key).ok();
    text.and_then(|text| text.rsplit('/').next())
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .map(StripeId)
        .ok_or_else(|| MetaError::Backend(format!("corrupt index key {}", String::from_utf8_lossy(key))))
}

/// Prefix of one bucket's multipart uploads.
pub fn upload_prefix(bucket: &str) -> Vec<u8> {
    format!("upload/{bucket}/").into_bytes()
}

/// Key of a multipart upload.
pub fn upload_key(bucket: &str, upload_id: &str) -> Vec<u8> {
    format!("upload/{bucket}/{upload_id}").into_bytes()
}

/// Prefix of one upload's parts.
pub fn part_prefix(bucket: &str, upload_id: &str) -> Vec<u8> {
    format!("part/{bucket}/{upload_id}/").into_bytes()
}

/// Key of a part.
pub fn part_key(bucket: &str, upload_id: &str, part_number: u16) -> Vec<u8> {
    format!("part/{bucket}/{upload_id}/{part_number:05}").into_bytes()
}

/// Key of a lease.
pub fn lease_key(name: &str) -> Vec<u8> {
    format!("lease/{name}").into_bytes()
}

/// Key of an access key's class entitlement.
pub fn access_key_key(access_key: &str) -> Vec<u8> {
    format!("access-key/{access_key}").into_bytes()
}

/// Prefix of every access key's class entitlement.
pub fn access_key_prefix() -> Vec<u8> {
    b"access-key/".to_vec()
}

/// Key of a named profile.
pub fn profile_key(name: &str) -> Vec<u8> {
    format!("profile/{name}").into_bytes()
}

/// Prefix of every named profile.
pub fn profile_prefix() -> Vec<u8> {
    b"profile/".to_vec()
}

/// Key of a config entry.
pub fn config_key(name: &str) -> Vec<u8> {
    format!("config/{name}").into_bytes()
}

/// Formats an allocated upload number as an upload id.
pub fn upload_id(number: u64) -> String {
    format!("{number:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_successors() {
        assert_eq!(prefix_end(b"object/a/"), Some(b"object/a0".to_vec()));
        assert_eq!(prefix_end(&[b'a', 0xff]), Some(b"b".to_vec()));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
        assert_eq!(prefix_end(b""), None);
        assert_eq!(key_successor(b"ab"), b"ab\0".to_vec());
    }

    #[test]
    fn values_round_trip_and_reject_unknown_formats() {
        let bytes = encode(&"hello".to_string());
        assert_eq!(bytes[0], FORMAT_V1);
        assert_eq!(decode::<String>(b"k", &bytes).unwrap(), "hello");
        let mut future = bytes.clone();
        future[0] = 2;
        assert!(matches!(decode::<String>(b"k", &future), Err(MetaError::Backend(_))));
        assert!(decode::<String>(b"k", b"").is_err());
    }

    #[test]
    fn index_keys_parse() {
        let key = node_stripe_key(NodeId(7), StripeId(0xabc));
        assert!(key.starts_with(&node_stripe_prefix(NodeId(7))));
        assert_eq!(stripe_of_index_key(&key).unwrap(), StripeId(0xabc));
    }
}
