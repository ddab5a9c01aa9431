//! Metadata snapshots on the storage nodes: every `interval_s` the holder of the `meta-snapshot`
//! lease copies every record of the metadata store into one blob and writes it through the data
//! path like an object (erasure-coded, repaired, its units described as a snapshot), then lists it
//! in the store (`config/meta-snapshots`, the newest `keep`) and releases the older ones. A store
//! lost whole is rebuilt from the newest snapshot the nodes hold plus what the units written since
//! describe (`meta_rebuild`).
//!
//! Beside the two layers, like `stripe_gc`: it reads every record and writes through the data path.
//! Owns the snapshot blob's format and the list of snapshots. Must not: change a record it copies,
//! or release a snapshot before a newer one is listed.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use meta::{Entry, Layout, MetaError, MetaStore};
use serde::{Deserialize, Serialize};

use crate::data::erasure::ErasureData;
use crate::data::lease::LeaseClaims;
use crate::data::membership::{BackgroundTask, unix_now_ms};
use crate::data::{DataError, ObjectData, meta_error};
use crate::labels::{SnapshotLabel, WriteLabel};

/// The config entry listing the snapshots on the nodes, oldest first.
pub const SNAPSHOTS_CONFIG: &str = "meta-snapshots";
/// The lease electing the one gateway that takes snapshots.
pub const SNAPSHOT_LEASE: &str = "meta-snapshot";
/// The first bytes of a snapshot blob.
const MAGIC: &[u8; 8] = b"LTMSNAP1";
/// Records read per page while a snapshot is taken.
const EXPORT_PAGE: usize = 10_000;
/// Most records a snapshot copies (a bound on its memory: a larger store needs a larger bound).
const MAX_RECORDS: usize = 50_000_000;

/// `[meta_snapshots]`: how often snapshots are taken and how many are kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetaSnapshotConfig {
    /// Seconds between snapshots; 0 = none. Default 300.
    pub interval_s: u64,
    /// Snapshots kept on the nodes (older ones are released). Default 2, at least 1.
    pub keep: usize,
}

impl Default for MetaSnapshotConfig {
    fn default() -> Self {
        Self { interval_s: 300, keep: 2 }
    }
}

impl MetaSnapshotConfig {
    /// Refuses a configuration that cannot work, with the reason.
    pub fn validate(&self) -> Result<(), String> {
        if self.keep == 0 {
            return Err("meta_snapshots.keep must be at least 1: a snapshot is released only for a newer one".into());
        }
        Ok(())
    }
}

/// A snapshot on the nodes, as the list records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    /// What it is.
    pub label: SnapshotLabel,
    /// Where its bytes live.
    pub layout: Layout,
}

/// The snapshots listed in the metadata store, oldest first.
pub async fn recorded(meta: &dyn MetaStore) -> Result<Vec<SnapshotRecord>, MetaError> {
    match meta.get_config(SNAPSHOTS_CONFIG).await? {
        None => Ok(Vec::new()),
        Some(text) => serde_json::from_str(&text)
            .map_err(|error| MetaError::Damaged(format!("the list of metadata snapshots does not parse: {error}"))),
    }
}

/// The blob of `records`: the magic, then each key and value (a little-endian u32 length before
/// each), the count (u64) and the CRC-32C of everything before it.
pub fn encode_records(records: &[Entry]) -> Bytes {
    let size: usize = records.iter().map(|(key, value)| 8 + key.len() + value.len()).sum();
    let mut blob = BytesMut::with_capacity(MAGIC.len() + size + 12);
    blob.put_slice(MAGIC);
    for (key, value) in records {
        blob.put_u32_le(u32::try_from(key.len()).expect("keys are short"));
        blob.put_slice(key);
        blob.put_u32_le(u32::try_from(value.len()).expect("records are under 4 GiB"));
        blob.put_slice(value);
    }
    blob.put_u64_le(records.len() as u64);
    let crc = crc32c::crc32c(&blob);
    blob.put_u32_le(crc);
    blob.freeze()
}

/// The records of a blob [`encode_records`] made, or what is wrong with it.
pub fn decode_records(blob: &[u8]) -> Result<Vec<Entry>, String> {
    let body_len = blob.len().checked_sub(4).filter(|&len| len >= MAGIC.len() + 8).ok_or("a snapshot too short")?;
    let (body, crc) = blob.split_at(body_len);
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err("a snapshot that fails its checksum".into());
    }
    if &body[..MAGIC.len()] != MAGIC {
        return Err("not a metadata snapshot".into());
    }
    let (mut rest, count) = body[MAGIC.len()..].split_at(body.len() - MAGIC.len() - 8);
    let count = u64::from_le_bytes(count.try_into().expect("8 bytes"));
    let mut records = Vec::new();
    let take = |rest: &mut &[u8]| -> Result<Vec<u8>, String> {
        let len = rest.get(..4).ok_or("a record cut short")?;
        let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
        let bytes = rest.get(4..4 + len).ok_or("a record cut short")?.to_vec();
        *rest = &rest[4 + len..];
        Ok(bytes)
    };
    // Bounded: every pass consumes at least 8 bytes.
    while !rest.is_empty() {
        let key = take(&mut rest)?;
        let value = take(&mut rest)?;
        records.push((key, value));
    }
    if records.len() as u64 != count {
        return Err(format!("a snapshot of {} records that says {count}", records.len()));
    }
    Ok(records)
}

/// Takes the snapshots; see the module documentation.
pub struct MetaSnapshots {
    meta: Arc<dyn MetaStore>,
    data: ErasureData,
    lease: LeaseClaims,
    config: MetaSnapshotConfig,
}

impl MetaSnapshots {
    /// Snapshots of `meta` written through `data`.
    pub fn new(meta: Arc<dyn MetaStore>, data: ErasureData, config: MetaSnapshotConfig) -> Self {
        let lease = LeaseClaims::new(SNAPSHOT_LEASE, data.io().config().gateway_id());
        Self { meta, data, lease, config }
    }

    /// Copies every record and writes the copy to the nodes, lists it and releases the snapshots
    /// past `keep`; what it listed.
    pub async fn take(&self) -> Result<SnapshotRecord, DataError> {
        let records = export_all(self.meta.as_ref()).await?;
        let max_stripe_id = records
            .iter()
            .filter_map(|(key, _)| key.strip_prefix(b"stripe/"))
            .filter_map(|hex| u64::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok())
            .max()
            .unwrap_or(0);
        let blob = encode_records(&records);
        let label = SnapshotLabel {
            taken_ms: unix_now_ms(),
            size_bytes: blob.len() as u64,
            max_stripe_id,
            snapshot_id: rand::random(),
        };
        let written =
            crate::data::descriptor::labelled(WriteLabel::Snapshot(label.clone()).to_value(), self.data.write(blob))
                .await?;
        let record = SnapshotRecord { label, layout: written.layout };
        let mut listed = recorded(self.meta.as_ref()).await.map_err(meta_error)?;
        listed.push(record.clone());
        let dropped: Vec<SnapshotRecord> = listed.drain(..listed.len().saturating_sub(self.config.keep)).collect();
        let text = serde_json::to_string(&listed).expect("snapshot records serialize");
        if let Err(error) = self.meta.put_config(SNAPSHOTS_CONFIG, &text).await {
            self.release(&record.layout).await;
            return Err(meta_error(error));
        }
        for old in dropped {
            self.release(&old.layout).await;
        }
        metrics::counter!("lowtail_gateway_meta_snapshots_total").increment(1);
        metrics::gauge!("lowtail_gateway_meta_snapshot_bytes").set(record.label.size_bytes as f64);
        tracing::info!(
            records = records.len(),
            bytes = record.label.size_bytes,
            "metadata snapshot written to the nodes"
        );
        Ok(record)
    }

    async fn release(&self, layout: &Layout) {
        if let Err(error) = self.data.release(layout).await {
            tracing::warn!(%error, "a metadata snapshot not released; the stripe collector takes it later");
        }
    }

    /// Takes a snapshot every `interval_s` while this gateway holds the lease; none when 0.
    pub fn spawn(self: Arc<Self>) -> Option<BackgroundTask> {
        let interval = Duration::from_secs(self.config.interval_s);
        (self.config.interval_s > 0).then(|| {
            BackgroundTask::periodic("meta-snapshots", interval, move || {
                let snapshots = Arc::clone(&self);
                async move {
                    let term_ms = 3 * interval.as_millis() as u64;
                    match snapshots.lease.claim(snapshots.meta.as_ref(), unix_now_ms(), term_ms).await {
                        Ok(true) => {
                            if let Err(error) = snapshots.take().await {
                                tracing::warn!(%error, "metadata snapshot failed; tried again next interval");
                            }
                        }
                        Ok(false) => {}
                        Err(error) => tracing::warn!(%error, "metadata snapshot lease not claimed"),
                    }
                }
            })
        })
    }
}

/// Every record of `meta`, in key order.
async fn export_all(meta: &dyn MetaStore) -> Result<Vec<Entry>, DataError> {
    let mut records = Vec::new();
    let mut after = None;
    // Bounded by MAX_RECORDS.
    while records.len() < MAX_RECORDS {
        let page = meta.export_records(after.clone(), EXPORT_PAGE).await.map_err(meta_error)?;
        let full = page.len() == EXPORT_PAGE;
        after = page.last().map(|(key, _)| key.clone());
        records.extend(page);
        if !full {
            return Ok(records);
        }
    }
    Err(DataError::Internal(format!("the metadata store holds more than {MAX_RECORDS} records")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_blob_round_trips_and_damage_is_found() {
        let records: Vec<Entry> =
            vec![(b"bucket/a".to_vec(), b"\x01{}".to_vec()), (b"node-stripe/1/2".to_vec(), Vec::new())];
        let blob = encode_records(&records);
        assert_eq!(decode_records(&blob).unwrap(), records);
        assert_eq!(decode_records(&encode_records(&[])).unwrap(), Vec::<Entry>::new());
        for at in 0..blob.len() {
            let mut flipped = blob.to_vec();
            flipped[at] ^= 0x10;
            assert!(decode_records(&flipped).is_err(), "byte {at}");
        }
        assert!(decode_records(&blob[..blob.len() - 1]).is_err());
    }

    #[test]
    fn keeping_no_snapshot_is_refused() {
        assert!(MetaSnapshotConfig { keep: 0, ..Default::default() }.validate().is_err());
        assert!(MetaSnapshotConfig::default().validate().is_ok());
    }
}
