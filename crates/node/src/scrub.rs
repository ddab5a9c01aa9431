//! Scrubbing: a background pass over every unit the node stores (data, parity and packed replicas
//! alike), reading it whole and verifying its checksums, paced so one pass takes about
//! `pass_interval_s` (the whole cluster once a week by default) and never reads faster than
//! `max_bytes_per_s`. A unit that fails lands in the store's corrupt list, which the gateways'
//! repair polls and rebuilds from. The scrub runs on the node, not the gateway, so the bytes it
//! reads never cross the network: the cost is one disk read per unit per pass.
//!
//! Progress (where the pass is, when the last one ended) is kept in `scrub.json` beside the units,
//! so a restart resumes the pass instead of starting the week over.
//!
//! Owns its pacing, its progress and its file. Must not repair, delete or rewrite anything (the
//! gateway decides repair), or read through the client task queue (its budget is its own).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{NodeError, UnitId};
use crate::store::UnitStore;

/// Units listed per page of the store's index.
const PAGE_UNITS: usize = 256;
/// Bytes verified per read (bounds the memory a scrub holds).
const CHUNK_BYTES: u64 = 1 << 20;
/// Progress is saved at most this often.
const SAVE_EVERY: Duration = Duration::from_secs(10);
/// Name of the progress file in the data directory.
const STATE_FILE: &str = "scrub.json";

/// The `[scrub]` section of a node's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScrubConfig {
    /// How long one pass over every unit should take; the scrub reads at (bytes stored) / this,
    /// capped by `max_bytes_per_s`, and starts the next pass when this long has passed since the
    /// last one began. 0 turns scrubbing off. Default 604 800 (a week).
    pub pass_interval_s: u64,
    /// Most bytes per second the scrub reads, whatever the pass needs. Default 16 MiB/s.
    pub max_bytes_per_s: u64,
}

impl Default for ScrubConfig {
    fn default() -> Self {
        Self { pass_interval_s: 7 * 24 * 3600, max_bytes_per_s: 16 << 20 }
    }
}

impl ScrubConfig {
    /// Checks the configuration.
    pub fn validate(&self) -> Result<(), NodeError> {
        if self.pass_interval_s > 0 && self.max_bytes_per_s == 0 {
            return Err(NodeError::InvalidArgument("scrub.max_bytes_per_s must be positive".into()));
        }
        Ok(())
    }
}

/// What the scrub has done, for the node's stats and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubProgress {
    /// Passes finished (since the node's data directory was created).
    pub passes_completed: u64,
    /// When the last pass ended (unix ms); 0 before the first.
    pub last_pass_completed_ms: u64,
    /// When the current pass began (unix ms).
    pub pass_started_ms: u64,
    /// The last unit the current pass verified (it resumes after it).
    pub cursor: Option<(u64, u16)>,
    /// Bytes the current pass has verified.
    pub pass_bytes_verified: u64,
    /// Bytes stored when the current pass began (what it has to verify, about).
    pub pass_bytes_total: u64,
    /// Units found corrupt by scrubbing, in all.
    pub corrupt_found: u64,
}

/// The scrubber of one store; see the module documentation.
#[derive(Debug)]
pub struct Scrubber {
    store: Arc<UnitStore>,
    config: ScrubConfig,
    state_file: PathBuf,
    progress: Mutex<ScrubProgress>,
    bytes_verified_total: AtomicU64,
    node_label: String,
}

fn unix_now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Scrubber {
    /// A scrubber of `store`, resuming the progress saved under `data_dir`.
    pub fn new(store: Arc<UnitStore>, config: ScrubConfig, data_dir: &Path, node_id: u32) -> Self {
        let state_file = data_dir.join(STATE_FILE);
        let progress = std::fs::read(&state_file)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<ScrubProgress>(&bytes).ok())
            .unwrap_or_default();
        Self {
            store,
            config,
            state_file,
            progress: Mutex::new(progress),
            bytes_verified_total: AtomicU64::new(0),
            node_label: node_id.to_string(),
        }
    }

    /// Progress so far.
    pub fn progress(&self) -> ScrubProgress {
        self.lock().clone()
    }

    /// Whether scrubbing is on.
    pub fn enabled(&self) -> bool {
        self.config.pass_interval_s > 0
    }

    /// Bytes verified since the node started.
    pub fn bytes_verified_total(&self) -> u64 {
        self.bytes_verified_total.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ScrubProgress> {
        crate::lock(&self.progress)
    }

    /// Scrubs pass after pass until the task is aborted; returns at once when scrubbing is off.
    pub async fn run(self: Arc<Self>) {
        if self.config.pass_interval_s == 0 {
            return;
        }
        loop {
            self.wait_for_pass().await;
            self.pass().await;
        }
    }

    /// Waits until the next pass is due: `pass_interval_s` after the last one began.
    async fn wait_for_pass(&self) {
        let (started_ms, resuming) = {
            let progress = self.lock();
            (progress.pass_started_ms, progress.cursor.is_some())
        };
        if resuming || started_ms == 0 {
            return;
        }
        let due_ms = started_ms.saturating_add(self.config.pass_interval_s.saturating_mul(1000));
        let wait_ms = due_ms.saturating_sub(unix_now_ms());
        tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    }

    /// The rate a pass reads at now: the bytes stored over the pass interval, within the budget
    /// (taken again every page, so a store that grows during a pass is still read in about one).
    fn rate_bytes_per_s(&self) -> f64 {
        let wanted = self.store.stored_bytes() as f64 / self.config.pass_interval_s.max(1) as f64;
        wanted.clamp(1.0, self.config.max_bytes_per_s as f64)
    }

    /// One pass (or the rest of one), paced.
    async fn pass(&self) {
        let mut after = self.begin_pass();
        let mut next_at = tokio::time::Instant::now();
        let mut saved_at = std::time::Instant::now();
        loop {
            let rate = self.rate_bytes_per_s();
            let (page, more) = self.store.list(after.map(|(stripe, unit)| UnitId::new(stripe, unit)), PAGE_UNITS);
            for listed in &page {
                let bytes = self.verify(listed.id, listed.data_len).await;
                // Paced by what was read: the next read waits until the budget allows it.
                next_at += Duration::from_secs_f64(bytes.max(1) as f64 / rate);
                tokio::time::sleep_until(next_at).await;
                after = Some((listed.id.stripe, listed.id.unit));
                self.lock().cursor = after;
                if saved_at.elapsed() >= SAVE_EVERY {
                    saved_at = std::time::Instant::now();
                    self.save();
                }
            }
            if !more {
                break;
            }
        }
        self.end_pass();
    }

    /// Starts a pass (or resumes one); where to resume after.
    fn begin_pass(&self) -> Option<(u64, u16)> {
        let mut progress = self.lock();
        if progress.cursor.is_none() {
            progress.pass_started_ms = unix_now_ms();
            progress.pass_bytes_verified = 0;
        }
        progress.pass_bytes_total = self.store.stored_bytes();
        progress.cursor
    }

    fn end_pass(&self) {
        {
            let mut progress = self.lock();
            progress.passes_completed += 1;
            progress.last_pass_completed_ms = unix_now_ms();
            progress.cursor = None;
            metrics::counter!("lowtail_node_scrub_passes_total", "node" => self.node_label.clone()).increment(1);
            metrics::gauge!("lowtail_node_scrub_last_pass_completed_seconds", "node" => self.node_label.clone())
                .set(progress.last_pass_completed_ms as f64 / 1000.0);
            tracing::info!(
                passes = progress.passes_completed,
                bytes = progress.pass_bytes_verified,
                "scrub pass completed"
            );
        }
        self.save();
    }

    /// Reads unit `id` whole, verifying every block; returns the bytes read. A unit deleted
    /// meanwhile is skipped; one that fails its checksums is marked corrupt by the store.
    async fn verify(&self, id: UnitId, data_len: u64) -> u64 {
        let mut offset = 0u64;
        // At least one read, so an empty unit's header and length are checked too.
        loop {
            let length = CHUNK_BYTES.min(data_len - offset);
            let store = Arc::clone(&self.store);
            let read = tokio::task::spawn_blocking(move || store.read_range(id, offset, length)).await;
            match read {
                Ok(Ok(_)) => {}
                Ok(Err(NodeError::Corrupt { what, .. })) => {
                    tracing::warn!(unit = %id, %what, "scrub found a corrupt unit");
                    self.lock().corrupt_found += 1;
                    metrics::counter!("lowtail_node_scrub_corrupt_found_total", "node" => self.node_label.clone())
                        .increment(1);
                    break;
                }
                // Deleted or rewritten shorter meanwhile, or an I/O error the next pass retries.
                Ok(Err(error)) => {
                    tracing::debug!(unit = %id, %error, "scrub skipped a unit");
                    break;
                }
                Err(error) => {
                    tracing::warn!(unit = %id, %error, "scrub read panicked");
                    break;
                }
            }
            offset += length;
            if offset >= data_len {
                break;
            }
        }
        self.lock().pass_bytes_verified += offset;
        self.bytes_verified_total.fetch_add(offset, Ordering::Relaxed);
        metrics::counter!("lowtail_node_scrub_bytes_total", "node" => self.node_label.clone()).increment(offset);
        offset
    }

    /// Saves the progress (temp file and rename: a crash leaves the old or the new, never half).
    fn save(&self) {
        let bytes = serde_json::to_vec(&*self.lock()).expect("progress serialises");
        let temp = self.state_file.with_extension("json.tmp");
        let result = std::fs::write(&temp, bytes).and_then(|()| std::fs::rename(&temp, &self.state_file));
        if let Err(error) = result {
            tracing::warn!(file = %self.state_file.display(), %error, "could not save scrub progress");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with(dir: &Path, units: &[(u64, u16, usize)]) -> Arc<UnitStore> {
        let store = Arc::new(UnitStore::open(dir, 1 << 30).unwrap());
        for &(stripe, unit, len) in units {
            let id = UnitId::new(stripe, unit);
            let mut staged = store.begin_write(id, len as u64).unwrap();
            staged.append(&vec![unit as u8; len]).unwrap();
            store.commit(staged).unwrap();
        }
        store
    }

    fn flip_byte(store: &UnitStore, id: UnitId, at: usize) {
        let path = store.path_of(id);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[at] ^= 0x01;
        std::fs::write(&path, bytes).unwrap();
    }

    #[tokio::test]
    async fn a_pass_reads_every_unit_and_finds_the_flipped_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let units = [(1, 0, 3 << 20), (1, 1, 0), (2, 0x8000, 5000), (3, 4, 70_000)];
        let store = store_with(dir.path(), &units);
        flip_byte(&store, UnitId::new(2, 0x8000), 60); // a packed replica
        flip_byte(&store, UnitId::new(1, 0), 40 + (2 << 20) + 7); // in the unit's third MiB
        let config = ScrubConfig { pass_interval_s: 1, max_bytes_per_s: 1 << 30 };
        let scrubber = Scrubber::new(Arc::clone(&store), config, dir.path(), 7);
        scrubber.pass().await;
        let progress = scrubber.progress();
        assert_eq!((progress.passes_completed, progress.corrupt_found), (1, 2), "{progress:?}");
        assert_eq!(store.corrupt_units(), vec![UnitId::new(1, 0), UnitId::new(2, 0x8000)]);
        let stored: u64 = units.iter().map(|u| u.2 as u64).sum();
        assert_eq!(progress.pass_bytes_total, stored);
        assert!(progress.pass_bytes_verified >= stored - (3 << 20), "{progress:?}");
        assert!(progress.cursor.is_none() && progress.last_pass_completed_ms > 0);
        // Saved: a new scrubber (a restart) knows the pass happened.
        let again = Scrubber::new(store, ScrubConfig::default(), dir.path(), 7);
        assert_eq!(again.progress().passes_completed, 1);
    }

    #[tokio::test]
    async fn the_pace_holds_the_byte_budget() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with(dir.path(), &[(1, 0, 1_000_000), (1, 1, 1_000_000), (1, 2, 1_000_000)]);
        // A pass of a second would read at 3 MB/s; the budget holds it to 2 MB/s: the third
        // read may start no earlier than 1 s in (the second's wait ends at 1.0 s), and the pass
        // ends after its wait at 1.5 s.
        let config = ScrubConfig { pass_interval_s: 1, max_bytes_per_s: 2_000_000 };
        let scrubber = Scrubber::new(store, config, dir.path(), 1);
        let started = std::time::Instant::now();
        scrubber.pass().await;
        assert!(started.elapsed() >= Duration::from_millis(1450), "{:?}", started.elapsed());
    }

    #[test]
    fn a_budget_of_zero_is_refused_unless_scrubbing_is_off() {
        assert!(ScrubConfig { pass_interval_s: 10, max_bytes_per_s: 0 }.validate().is_err());
        assert!(ScrubConfig { pass_interval_s: 0, max_bytes_per_s: 0 }.validate().is_ok());
        assert!(ScrubConfig::default().validate().is_ok());
    }
}
