//! Typed records over a transaction's `Kv`: read one, write one, read a whole range (bounded), each
//! value in the storage format (`format::encode` / `decode`). Shared by `ops` and `versions`. Owns
//! that seam only; must not know what the keys mean (`format` and `ops` do).

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{MetaError, Result};
use crate::format;
use crate::kv::Kv;

/// Entries fetched per scan when a whole range is read.
const SCAN_PAGE_ENTRIES: usize = 1000;

/// The record at `key`, if any.
pub async fn get_record<T: DeserializeOwned>(kv: &mut dyn Kv, key: &[u8]) -> Result<Option<T>> {
    match kv.get(key).await? {
        Some(bytes) => format::decode(key, &bytes).map(Some),
        None => Ok(None),
    }
}

/// Sets `key` to `value` when the transaction commits.
pub fn put_record<T: Serialize>(kv: &mut dyn Kv, key: Vec<u8>, value: &T) -> Result<()> {
    kv.put(key, format::encode(value))
}

/// Every record in `start..end`, in pages; at most `max_entries` (more is a backend error: an
/// unbounded read would be a bug or an attack).
pub async fn scan_all<T: DeserializeOwned>(
    kv: &mut dyn Kv,
    start: Vec<u8>,
    end: &[u8],
    max_entries: usize,
) -> Result<Vec<T>> {
    let mut records = Vec::new();
    let mut cursor = start;
    for _page in 0..max_entries.div_ceil(SCAN_PAGE_ENTRIES) {
        let page = kv.scan(&cursor, end, SCAN_PAGE_ENTRIES).await?;
        let full = page.len() == SCAN_PAGE_ENTRIES;
        for (key, value) in &page {
            records.push(format::decode(key, value)?);
        }
        match page.last() {
            Some((last, _)) if full => cursor = format::key_successor(last),
            _ => return Ok(records),
        }
    }
    Err(MetaError::Backend(format!("more than {max_entries} entries under {}", String::from_utf8_lossy(&cursor))))
}
