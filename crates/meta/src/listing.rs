//! ListObjectsV2 over the ordered key map: prefix, delimiter roll-up into common prefixes, start-after,
//! continuation tokens and max-keys, in lexicographic byte order of the keys. Owns the listing algorithm;
//! it must not write.
//!
//! The algorithm walks a cursor through `object/<bucket>/<prefix>…`. A key with the delimiter after the
//! prefix becomes a common prefix and the cursor jumps past every key under it, so a listing costs one scan
//! per returned common prefix plus one per page of keys, never one per rolled-up key. A continuation token
//! is the cursor (the smallest key the next page may return, relative to the bucket) in hex: opaque to
//! clients, and valid across gateways because it names a key position, not a server-side session.

use crate::error::{MetaError, Result};
use crate::format::{self, key_successor, prefix_end};
use crate::kv::Kv;
use crate::types::{ListObjectsQuery, ListedObject, MAX_LIST_KEYS, ObjectListing, ObjectMeta};

/// Entries fetched per scan while listing.
const SCAN_PAGE_ENTRIES: usize = 256;

/// Runs one listing page. The caller has checked that the bucket exists in the same transaction.
pub async fn list_objects(kv: &mut dyn Kv, bucket: &str, query: &ListObjectsQuery) -> Result<ObjectListing> {
    let max_keys = query.max_keys.min(MAX_LIST_KEYS);
    let delimiter = query.delimiter.as_deref().filter(|delimiter| !delimiter.is_empty());
    let base = format::object_prefix(bucket);
    let full_prefix = [base.as_slice(), query.prefix.as_bytes()].concat();
    // Exclusive end of the listed range; the bucket prefix ends in '/', so an end always exists.
    let end = prefix_end(&full_prefix).expect("object prefixes end with '/' and so have an end");

    // Smallest bucket-relative key the page may return.
    let mut cursor: Vec<u8> = match (&query.continuation_token, &query.start_after) {
        (Some(token), _) => decode_token(token)?,
        (None, Some(start_after)) => key_successor(start_after.as_bytes()),
        (None, None) => Vec::new(),
    };
    if cursor.as_slice() < query.prefix.as_bytes() {
        cursor = query.prefix.as_bytes().to_vec();
    }

    let mut listing = ObjectListing::default();
    if max_keys == 0 {
        return Ok(listing);
    }
    // Each round returns at least one entry or ends the listing, so max_keys + 1 rounds always suffice.
    'rounds: for _round in 0..=max_keys {
        let start = [base.as_slice(), cursor.as_slice()].concat();
        let page = kv.scan(&start, &end, SCAN_PAGE_ENTRIES).await?;
        let page_was_full = page.len() == SCAN_PAGE_ENTRIES;
        for (full_key, value) in page {
            if listing.key_count() == max_keys {
                // One more entry exists past the page.
                listing.is_truncated = true;
                listing.next_continuation_token = Some(encode_token(&cursor));
                break 'rounds;
            }
            let key = std::str::from_utf8(&full_key[base.len()..])
                .map_err(|_| MetaError::Backend(format!("non-UTF-8 object key in bucket {bucket}")))?;
            let after_prefix = &key[query.prefix.len()..];
            if let Some(delimiter) = delimiter
                && let Some(at) = after_prefix.find(delimiter)
            {
                let common_prefix = &key[..query.prefix.len() + at + delimiter.len()];
                listing.common_prefixes.push(common_prefix.to_string());
                // Skip every key under the common prefix: rescan from just past it.
                cursor = prefix_end(common_prefix.as_bytes()).expect("a common prefix ends in valid UTF-8");
                continue 'rounds;
            }
            let meta: ObjectMeta = format::decode(&full_key, &value)?;
            listing.objects.push(ListedObject { key: key.to_string(), meta });
            cursor = key_successor(key.as_bytes());
        }
        if !page_was_full {
            break;
        }
    }
    Ok(listing)
}

fn encode_token(cursor: &[u8]) -> String {
    cursor.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn decode_token(token: &str) -> Result<Vec<u8>> {
    let invalid = || MetaError::InvalidArgument("the continuation token is not valid".into());
    if !token.len().is_multiple_of(2) || token.len() > 2 * (crate::validate::MAX_KEY_BYTES + 1) {
        return Err(invalid());
    }
    (0..token.len())
        .step_by(2)
        .map(|at| token.get(at..at + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok()).ok_or_else(invalid))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_reject_garbage() {
        let cursor = "a/é\0".as_bytes();
        assert_eq!(decode_token(&encode_token(cursor)).unwrap(), cursor);
        for bad in ["abc", "zz", "é1"] {
            assert!(matches!(decode_token(bad), Err(MetaError::InvalidArgument(_))), "{bad}");
        }
    }
}
