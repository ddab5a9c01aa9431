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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::StreamExt;
use meta::{Entry, Layout, MetaError, MetaStore};
use serde::{Deserialize, Serialize};

use crate::data::cluster::lease::LeaseClaims;
use crate::data::cluster::membership::{BackgroundTask, unix_now_ms};
use crate::data::objects::erasure::ErasureData;
use crate::data::{DataError, ObjectData, meta_error};
use crate::labels::{SnapshotLabel, WriteLabel};

/// The config entry listing the snapshots on the nodes, oldest first.
pub const SNAPSHOTS_CONFIG: &str = "meta-snapshots";
/// The lease electing the one gateway that takes snapshots.
pub const SNAPSHOT_LEASE: &str = "meta-snapshot";
/// The first bytes of a snapshot blob.
const MAGIC: &[u8; 8] = b"LTMSNAP1";
/// Records read per page while a snapshot is taken (one read transaction, one piece of the blob).
const EXPORT_PAGE: usize = 10_000;
/// Most records a snapshot copies (a bound on how long one runs).
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
    /// Its size.
    pub size_bytes: u64,
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
    let mut blob = BytesMut::new();
    blob.put_slice(MAGIC);
    blob.put_slice(&encode_page(records));
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
    /// This gateway is the cluster's only one (the embedded store): its writes in flight are all.
    sole_gateway: bool,
}

impl MetaSnapshots {
    /// Snapshots of `meta` written through `data`; `sole_gateway` when this is the cluster's only
    /// gateway (the embedded store), so that its writes in flight are all the cluster's.
    pub fn new(meta: Arc<dyn MetaStore>, data: ErasureData, config: MetaSnapshotConfig, sole_gateway: bool) -> Self {
        let lease = LeaseClaims::new(SNAPSHOT_LEASE, data.io().config().gateway_id());
        Self { meta, data, lease, config, sole_gateway }
    }

    /// Copies every record and writes the copy to the nodes (streamed: a page of records at a
    /// time), lists it and releases the snapshots past `keep`; what it listed.
    pub async fn take(&self) -> Result<SnapshotRecord, DataError> {
        let taken_ms = unix_now_ms();
        let writes_since_ms = self.sole_gateway.then(|| {
            crate::data::io::descriptor::oldest_in_flight_ms().map_or(taken_ms, |oldest| oldest.min(taken_ms))
        });
        let label = SnapshotLabel { taken_ms, writes_since_ms, snapshot_id: rand::random() };
        let records = Arc::new(AtomicU64::new(0));
        let blob = export_stream(Arc::clone(&self.meta), Arc::clone(&records));
        let write = self.data.write_stream(blob, meta::WriteAck::All);
        let written =
            crate::data::io::descriptor::labelled(WriteLabel::Snapshot(label.clone()).to_value(), write).await?;
        let size_bytes = written.layout.size_bytes();
        let record = SnapshotRecord { label, size_bytes, layout: written.layout };
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
        metrics::gauge!("lowtail_gateway_meta_snapshot_bytes").set(size_bytes as f64);
        let records = records.load(Ordering::Relaxed);
        tracing::info!(records, bytes = size_bytes, "metadata snapshot written to the nodes");
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

/// Where [`export_stream`] is.
enum Stage {
    Magic,
    Pages(Option<Vec<u8>>),
    Trailer,
    Done,
}

/// The blob of every record of `meta` as [`encode_records`] lays it out, a page of records at a
/// time (each page its own read transaction: records changed while it runs may be seen old or new,
/// which the rebuild's roll-forward covers); `records` counts them.
fn export_stream(meta: Arc<dyn MetaStore>, records: Arc<AtomicU64>) -> crate::data::BodyStream<'static> {
    let start = (Stage::Magic, crc32c::crc32c(&[]), 0u64);
    futures_util::stream::unfold(start, move |(stage, crc, count)| {
        let (meta, records) = (Arc::clone(&meta), Arc::clone(&records));
        async move {
            let (bytes, next) = match stage {
                Stage::Done => return None,
                Stage::Magic => (Bytes::from_static(MAGIC), Stage::Pages(None)),
                Stage::Trailer => {
                    let count_bytes = count.to_le_bytes();
                    let crc = crc32c::crc32c_append(crc, &count_bytes);
                    let trailer = [count_bytes.as_slice(), &crc.to_le_bytes()].concat();
                    return Some((Ok(Bytes::from(trailer)), (Stage::Done, crc, count)));
                }
                Stage::Pages(_) if count as usize >= MAX_RECORDS => {
                    let error =
                        DataError::Internal(format!("the metadata store holds more than {MAX_RECORDS} records"));
                    return Some((Err(error), (Stage::Done, crc, count)));
                }
                Stage::Pages(after) => match meta.export_records(after, EXPORT_PAGE).await {
                    Err(error) => return Some((Err(meta_error(error)), (Stage::Done, crc, count))),
                    Ok(page) => {
                        let last = page.last().map(|(key, _)| key.clone());
                        let next = if page.len() < EXPORT_PAGE { Stage::Trailer } else { Stage::Pages(last) };
                        records.fetch_add(page.len() as u64, Ordering::Relaxed);
                        let encoded = encode_page(&page);
                        return Some((
                            Ok(encoded.clone()),
                            (next, crc32c::crc32c_append(crc, &encoded), count + page.len() as u64),
                        ));
                    }
                },
            };
            let crc = crc32c::crc32c_append(crc, &bytes);
            Some((Ok(bytes), (next, crc, count)))
        }
    })
    .boxed()
}

/// Records laid out as in a snapshot blob: each key and value after its little-endian u32 length.
fn encode_page(records: &[Entry]) -> Bytes {
    let size: usize = records.iter().map(|(key, value)| 8 + key.len() + value.len()).sum();
    let mut page = BytesMut::with_capacity(size);
    for (key, value) in records {
        page.put_u32_le(u32::try_from(key.len()).expect("keys are short"));
        page.put_slice(key);
        page.put_u32_le(u32::try_from(value.len()).expect("records are under 4 GiB"));
        page.put_slice(value);
    }
    page.freeze()
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
    fn streamed_pages_make_the_blob_encode_records_makes() {
        let records: Vec<Entry> = (0..25).map(|i| (format!("k{i:03}").into_bytes(), vec![i as u8; i])).collect();
        let mut streamed = BytesMut::new();
        let mut crc = crc32c::crc32c(&[]);
        for part in [Bytes::from_static(MAGIC), encode_page(&records[..10]), encode_page(&records[10..])] {
            crc = crc32c::crc32c_append(crc, &part);
            streamed.put_slice(&part);
        }
        let count = (records.len() as u64).to_le_bytes();
        crc = crc32c::crc32c_append(crc, &count);
        streamed.put_slice(&count);
        streamed.put_u32_le(crc);
        assert_eq!(streamed.freeze(), encode_records(&records));
    }

    #[test]
    fn keeping_no_snapshot_is_refused() {
        assert!(MetaSnapshotConfig { keep: 0, ..Default::default() }.validate().is_err());
        assert!(MetaSnapshotConfig::default().validate().is_ok());
    }
}
