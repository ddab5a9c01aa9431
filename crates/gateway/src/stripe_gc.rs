//! Unreferenced-stripe collection: deletes sealed stripe records (and their units) that no object
//! and no upload part references. They appear when every object of a packed stripe is deleted or
//! overwritten (a packed object's release only leaves its bytes dead), when the commit of a written
//! object fails after its stripes were recorded and their release failed too, when a gateway
//! dies between writing an object and committing it, and when a gateway stops or dies while released
//! stripes wait out their release delay. Left alone they cost a stripe's space for
//! ever, so the collector deletes them, slowly and carefully: a stripe is deleted only after it was
//! judged unreferenced in two scans at least `orphans.grace_ms` apart, with its record unchanged in
//! between.
//!
//! The grace is safe because nothing creates a reference to a sealed stripe that existed a grace
//! earlier: a striped write stops starting stripes at `write_deadline_ms` and commits (or releases)
//! right after, and a packed object is committed right after its append returns (the config refuses
//! a grace under twice the deadline plus one stripe's write). A scan lists the stripes first, then
//! the parts of every upload, then every object, so a part that becomes an object while the scan
//! runs is seen in one of the two listings. Any metadata error ends the scan before it deletes
//! anything: a reference list that may be incomplete never condemns a stripe.
//!
//! **Versions.** References come from whole key histories ([`MetaStore::list_histories`]: each
//! page one consistent read of current and noncurrent records, no key split across pages), so a
//! version that a write demotes or a delete promotes while the scan runs is still seen once, and a
//! noncurrent version's stripes are referenced like a current object's (docs/versioning.md).
//!
//! **Compaction.** A sealed packed stripe whose live objects are less than
//! `orphans.compact_below_live_fraction` of the bytes packed into it (the others deleted or
//! overwritten) has them
//! moved: each is read, written again (appended to an open stripe, acknowledged like a PUT) and
//! re-pointed by a conditional [`MetaStore::move_object`], which loses to any write or delete of the
//! object since the scan read it (the copy is then released). Once its objects are gone the stripe
//! is unreferenced and collected as above, a grace later, so a read that fetched the old layout
//! before the move still finds its bytes. Stripes an upload part or a multipart object references
//! are never compacted.
//!
//! **One collector per cluster.** A scan lists every object, so the gateways of a cluster elect one
//! to scan: before each scan a gateway claims the lease `stripe-gc` in the metadata store
//! ([`MetaStore::claim_lease`], by its `gateway_id`, for [`LEASE_SCANS`] scan intervals, renewed at
//! the end of every scan) and skips the scan when another gateway holds it. A holder that stops is
//! replaced once its term lapses. Nothing above depends on the lease for safety: two collectors at
//! once (clock skew, a holder paused past its term) only repeat each other's idempotent deletes and
//! conditional moves.
//!
//! **Unreadable stripes.** Repair cannot rebuild a stripe of which fewer than k units are readable;
//! if an object references it, the object is unreadable until nodes return, but a stripe nothing
//! references (a write whose gateway died before its commit, a release whose gateway died during
//! its delay, that then lost more units) is garbage waiting for this collector. Every
//! [`UNREADABLE_CHECK_INTERVAL`] (or ten times the last check's length, if longer) the collector
//! lists the references of the stripes repair's last census found unreadable and tells repair
//! which of them nothing references; the census counts those apart
//! (`stripes_unreadable_unreferenced`), not under-redundant. A reference committed after the
//! listing passed it (an object acknowledged at k that lost units before its commit) is counted
//! at the next check. Deleting stays this collector's, after its grace.
//!
//! This sits above both layers (see the crate documentation): it reads the S3 layer's records
//! (objects, uploads, parts) and deletes through the data path ([`ErasureData::delete_stripe`]).
//! Owns: the per-gateway list of candidate stripes and the decision rule ([`judge`]). Must not:
//! write object or upload records, delete a stripe that is open (the packer's), or delete after an
//! incomplete listing.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use meta::{Layout, ListObjectsQuery, MetaError, MetaStore, ObjectMeta, StripeId, StripeState};
use serde::Serialize;

use crate::data::cluster::lease::LeaseClaims;
use crate::data::cluster::membership::{BackgroundTask, unix_now_ms};
use crate::data::objects::erasure::ErasureData;
use crate::data::services::repair::RepairService;
use crate::data::{DataError, ObjectData, OrphanConfig, lock, meta_error};

/// Stripe records read per page.
const STRIPE_PAGE: usize = 1000;
/// Most stripes judged against one listing of the references (8 bytes each); a larger store is
/// judged in several windows, each listing every reference again.
const WINDOW_STRIPES: usize = 1 << 20;
/// Most windows one scan judges (a billion stripes); the rest wait for the next scan.
const MAX_WINDOWS: usize = 1024;
/// Most pages of one bucket's objects a scan reads (a billion keys); a bucket beyond it fails the
/// scan, since an incomplete listing must not condemn anything.
const MAX_OBJECT_PAGES: usize = 1 << 20;
/// Versions read per page of a bucket's histories.
const HISTORY_PAGE_VERSIONS: usize = 1000;
/// Most candidates remembered between scans; beyond it new ones wait for a later scan.
const MAX_CANDIDATES: usize = 1_000_000;
/// The lease the gateways' collectors elect one scanner by.
pub const LEASE_NAME: &str = "stripe-gc";
/// A lease's term, in scan intervals: the holder keeps it through one late round, and a stopped
/// holder is replaced within this many intervals of its last scan.
pub const LEASE_SCANS: u64 = 3;
/// How often the references of the stripes repair found unreadable are checked, at most.
pub const UNREADABLE_CHECK_INTERVAL: Duration = Duration::from_secs(15);
/// A check waits this many times the last check's length, so that a large store's listing
/// takes at most a tenth of the time.
const UNREADABLE_CHECK_SPACING: u32 = 10;

/// What to do with an unreferenced stripe judged now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// First seen unreferenced now (or its record changed since): remember it.
    Remember,
    /// Still within its grace: keep waiting.
    Wait,
    /// Unreferenced, unchanged, for at least the grace: delete it.
    Delete,
}

/// The decision rule: a stripe unreferenced now, with record version `version`, that was first
/// judged unreferenced as `previous` (its version then, and when).
pub fn judge(previous: Option<(u64, Instant)>, version: u64, now: Instant, grace: Duration) -> Verdict {
    match previous {
        Some((seen_version, first_seen)) if seen_version == version => {
            if now.saturating_duration_since(first_seen) >= grace { Verdict::Delete } else { Verdict::Wait }
        }
        _ => Verdict::Remember,
    }
}

/// Collection so far, for `lowtail admin status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StripeGcStatus {
    /// Scans finished since start.
    pub scans: u64,
    /// Scans given up (a metadata error): nothing was deleted in them.
    pub scans_failed: u64,
    /// Scans left to another gateway, which held the collector's lease.
    pub scans_skipped: u64,
    /// The gateway that held the lease at this gateway's last claim (`None` before the first).
    pub lease_holder: Option<String>,
    /// Unreferenced stripes deleted since start.
    pub stripes_deleted: u64,
    /// Bytes of their units (every unit, parity included).
    pub bytes_deleted: u64,
    /// Stripes judged unreferenced, waiting out the grace period.
    pub candidates: u64,
    /// Objects moved out of mostly dead packed stripes (compaction) since start.
    pub objects_moved: u64,
    /// Their bytes.
    pub bytes_moved: u64,
}

/// What one scan did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StripeScanReport {
    /// Sealed stripes judged.
    pub sealed: u64,
    /// Of those, referenced by no object and no part.
    pub unreferenced: u64,
    /// Of those, deleted now.
    pub deleted: u64,
    /// Bytes of the units deleted now.
    pub bytes_deleted: u64,
    /// Packed stripes found mostly dead (compaction targets).
    pub compaction_targets: u64,
    /// Objects moved out of them now.
    pub objects_moved: u64,
    /// Objects not moved because they changed since the scan read them (their copy released).
    pub moves_lost: u64,
}

#[derive(Clone, Copy, Debug)]
struct Candidate {
    version: u64,
    first_seen: Instant,
}

/// One window of sealed stripes, in id order, with what references them.
#[derive(Default)]
struct Window {
    ids: Vec<StripeId>,
    versions: Vec<u64>,
    /// Bytes packed into the stripe when it was sealed; for a stripe sealed before that was recorded,
    /// what k data units of its unit size hold (0 when its code does not parse).
    packed_bytes: Vec<u64>,
    referenced: Vec<bool>,
    /// Bytes of the objects whose whole layout is packed in the stripe.
    live_packed_bytes: Vec<u64>,
    /// Referenced by anything else (a part, a striped or multipart layout): never compacted.
    pinned: Vec<bool>,
}

impl Window {
    /// Sizes the per-stripe marks to the stripes listed.
    fn size_marks(&mut self) {
        let len = self.ids.len();
        assert!(self.versions.len() == len && self.packed_bytes.len() == len, "one entry per stripe");
        self.referenced = vec![false; len];
        self.live_packed_bytes = vec![0; len];
        self.pinned = vec![false; len];
    }

    fn index(&self, id: StripeId) -> Option<usize> {
        self.ids.binary_search(&id).ok()
    }

    /// Notes an object's layout (`object`) or an upload part's.
    fn mark(&mut self, layout: &Layout, object: bool) {
        if let (true, Layout::Packed { stripe, length_bytes, .. }) = (object, layout) {
            if let Some(i) = self.index(*stripe) {
                self.referenced[i] = true;
                self.live_packed_bytes[i] = self.live_packed_bytes[i].saturating_add(*length_bytes);
            }
            return;
        }
        for id in layout.stripes() {
            if let Some(i) = self.index(id) {
                self.referenced[i] = true;
                self.pinned[i] = true;
            }
        }
    }

    /// Whether stripe `i` is a packed stripe whose live objects fill less than `fraction` of it.
    fn compactable(&self, i: usize, fraction: f64) -> bool {
        let live = self.live_packed_bytes[i];
        !self.pinned[i] && live > 0 && (live as f64) < fraction * self.packed_bytes[i] as f64
    }
}

/// An object to move out of a compaction target, as the scan read it.
struct Move {
    bucket: String,
    key: String,
    object: ObjectMeta,
}

/// The unreferenced-stripe collector; see the module documentation.
pub struct StripeCollector {
    meta: Arc<dyn MetaStore>,
    data: ErasureData,
    config: OrphanConfig,
    candidates: Mutex<HashMap<StripeId, Candidate>>,
    lease: LeaseClaims,
    scans: AtomicU64,
    scans_failed: AtomicU64,
    scans_skipped: AtomicU64,
    stripes_deleted: AtomicU64,
    bytes_deleted: AtomicU64,
    objects_moved: AtomicU64,
    bytes_moved: AtomicU64,
    /// The unreadable stripes last found (referenced, unreferenced), logged when they change.
    unreadable_logged: Mutex<(usize, usize)>,
}

impl std::fmt::Debug for StripeCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeCollector").field("status", &self.status()).finish()
    }
}

impl StripeCollector {
    /// A collector over `meta` (the records) and `data` (which deletes), claiming the lease by the
    /// data path's `gateway_id`.
    pub fn new(meta: Arc<dyn MetaStore>, data: ErasureData, config: OrphanConfig) -> Self {
        let lease = LeaseClaims::new(LEASE_NAME, data.io().config().gateway_id());
        Self {
            meta,
            data,
            config,
            candidates: Mutex::new(HashMap::new()),
            lease,
            scans: AtomicU64::new(0),
            scans_failed: AtomicU64::new(0),
            scans_skipped: AtomicU64::new(0),
            stripes_deleted: AtomicU64::new(0),
            bytes_deleted: AtomicU64::new(0),
            objects_moved: AtomicU64::new(0),
            bytes_moved: AtomicU64::new(0),
            unreadable_logged: Mutex::new((0, 0)),
        }
    }

    /// Progress so far.
    pub fn status(&self) -> StripeGcStatus {
        StripeGcStatus {
            scans: self.scans.load(Ordering::Relaxed),
            scans_failed: self.scans_failed.load(Ordering::Relaxed),
            scans_skipped: self.scans_skipped.load(Ordering::Relaxed),
            lease_holder: self.lease.last_holder(),
            stripes_deleted: self.stripes_deleted.load(Ordering::Relaxed),
            bytes_deleted: self.bytes_deleted.load(Ordering::Relaxed),
            candidates: lock(&self.candidates).len() as u64,
            objects_moved: self.objects_moved.load(Ordering::Relaxed),
            bytes_moved: self.bytes_moved.load(Ordering::Relaxed),
        }
    }

    /// Runs a scan every `orphans.stripe_scan_interval_ms` until the returned task is stopped;
    /// `None` when collection is off (0).
    pub fn spawn(self: Arc<Self>) -> Option<BackgroundTask> {
        if self.config.stripe_scan_interval_ms == 0 {
            return None;
        }
        let interval = Duration::from_millis(self.config.stripe_scan_interval_ms);
        Some(BackgroundTask::periodic("stripe-gc", interval, move || {
            let collector = Arc::clone(&self);
            async move {
                match collector.round(unix_now_ms, Instant::now()).await {
                    Ok(Some(report)) if report.deleted > 0 => tracing::info!(?report, "unreferenced stripe scan"),
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "unreferenced stripe scan given up; nothing deleted"),
                }
            }
        }))
    }

    /// Checks the references of the stripes `repair` finds unreadable, every
    /// [`UNREADABLE_CHECK_INTERVAL`] at most, until the returned task is stopped. Runs on every
    /// gateway: only the repair lease's holder takes censuses, so only it has stripes to check.
    pub fn spawn_unreadable_check(self: Arc<Self>, repair: Arc<RepairService>) -> BackgroundTask {
        let next_check = Arc::new(Mutex::new(Instant::now()));
        BackgroundTask::periodic("unreadable-check", Duration::from_secs(1), move || {
            let (collector, repair, next_check) = (Arc::clone(&self), Arc::clone(&repair), Arc::clone(&next_check));
            async move {
                if Instant::now() < *lock(&next_check) {
                    return;
                }
                let started = Instant::now();
                if let Err(error) = collector.check_unreadable(&repair).await {
                    tracing::warn!(%error, "the unreadable stripes' references were not checked; tried again later");
                }
                let spacing = started.elapsed() * UNREADABLE_CHECK_SPACING;
                *lock(&next_check) = Instant::now() + UNREADABLE_CHECK_INTERVAL.max(spacing);
            }
        })
    }

    /// One check: which of the stripes `repair`'s last census found unreadable nothing references
    /// now, told to `repair`. A metadata error tells nothing (the last check's answer stands).
    pub async fn check_unreadable(&self, repair: &RepairService) -> Result<(), DataError> {
        let ids = repair.unreadable_stripes();
        let checked_at_ms = unix_now_ms();
        let referenced = if ids.is_empty() { BTreeSet::new() } else { self.referenced(&ids).await? };
        let unreferenced: BTreeSet<StripeId> = ids.iter().filter(|id| !referenced.contains(id)).copied().collect();
        let counts = (referenced.len(), unreferenced.len());
        if std::mem::replace(&mut *lock(&self.unreadable_logged), counts) != counts {
            if let Some(first) = referenced.first() {
                tracing::error!(
                    stripes = referenced.len(),
                    %first,
                    "stripes too few of whose units are readable hold objects: those objects cannot be read until nodes holding their units return"
                );
            }
            if let Some(first) = unreferenced.first() {
                tracing::info!(
                    stripes = unreferenced.len(),
                    %first,
                    "unreadable stripes that nothing references: garbage, left to the unreferenced-stripe collector"
                );
            }
        }
        repair.note_unreferenced(unreferenced, checked_at_ms);
        Ok(())
    }

    /// Which of `ids` an object, an upload part or a metadata snapshot references now (one
    /// listing of every reference).
    pub async fn referenced(&self, ids: &[StripeId]) -> Result<BTreeSet<StripeId>, DataError> {
        let mut window = Window { ids: ids.to_vec(), ..Window::default() };
        window.ids.sort();
        window.ids.dedup();
        window.versions = vec![0; window.ids.len()];
        window.packed_bytes = vec![0; window.ids.len()];
        window.size_marks();
        self.mark_references(&mut window).await?;
        Ok(window
            .ids
            .iter()
            .zip(&window.referenced)
            .filter(|(_, referenced)| **referenced)
            .map(|(id, _)| *id)
            .collect())
    }

    /// One round of the collector: claims the lease (wall clock `unix_ms()`, read at each claim)
    /// and scans at `now` if this gateway holds it, then renews it; `None` when another gateway
    /// holds the lease (this gateway's candidates are then dropped: its judgements would be stale).
    pub async fn round(&self, unix_ms: fn() -> u64, now: Instant) -> Result<Option<StripeScanReport>, DataError> {
        match self.claim(unix_ms()).await {
            Ok(true) => {}
            Ok(false) => {
                self.scans_skipped.fetch_add(1, Ordering::Relaxed);
                lock(&self.candidates).clear();
                return Ok(None);
            }
            Err(error) => {
                self.scans_failed.fetch_add(1, Ordering::Relaxed);
                return Err(meta_error(error));
            }
        }
        let report = self.scan_at(now).await?;
        // Renewed from the scan's end, so the term covers the wait for the next round. A failed
        // renewal leaves the term of the first claim, which is enough for one round.
        if let Err(error) = self.claim(unix_ms()).await {
            tracing::warn!(%error, "the stripe collector's lease was not renewed after its scan");
        }
        Ok(Some(report))
    }

    /// Claims the collector's lease at `now_ms`; whether this gateway holds it.
    async fn claim(&self, now_ms: u64) -> Result<bool, MetaError> {
        let term_ms = self.config.stripe_scan_interval_ms.max(1).saturating_mul(LEASE_SCANS);
        self.lease.claim(self.meta.as_ref(), now_ms, term_ms).await
    }

    /// One scan at time `now` (tests pass a later `now` to skip the grace): judges every sealed
    /// stripe against every object and upload part, remembers newly unreferenced ones, and deletes
    /// those judged unreferenced with the same record version at least `grace_ms` before. On a
    /// metadata error it deletes nothing more and keeps every candidate.
    pub async fn scan_at(&self, now: Instant) -> Result<StripeScanReport, DataError> {
        let result = self.scan_windows(now).await;
        match &result {
            Ok(_) => self.scans.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.scans_failed.fetch_add(1, Ordering::Relaxed),
        };
        metrics::gauge!("lowtail_gateway_unreferenced_stripe_candidates").set(lock(&self.candidates).len() as f64);
        result
    }

    async fn scan_windows(&self, now: Instant) -> Result<StripeScanReport, DataError> {
        let grace = Duration::from_millis(self.config.grace_ms);
        let mut report = StripeScanReport::default();
        let mut deletes_left = self.config.max_deletes_per_scan;
        let mut after: Option<StripeId> = None;
        for _window in 0..MAX_WINDOWS {
            let (mut window, last_listed, more) = self.list_window(after).await?;
            self.mark_references(&mut window).await?;
            // Every stripe of this window's id range that is not unreferenced now loses its candidacy
            // (referenced, deleted by someone else, or open again is impossible but harmless).
            let low = after.map_or(0, |id| id.0.saturating_add(1));
            let high = if more { last_listed.map_or(u64::MAX, |id| id.0) } else { u64::MAX };
            let unreferenced_now = |id: &StripeId| window.index(*id).is_some_and(|i| !window.referenced[i]);
            lock(&self.candidates).retain(|id, _| id.0 < low || id.0 > high || unreferenced_now(id));
            report.sealed += window.ids.len() as u64;
            report.unreferenced += window.referenced.iter().filter(|&&referenced| !referenced).count() as u64;
            for (i, &id) in window.ids.iter().enumerate() {
                if window.referenced[i] {
                    continue;
                }
                let version = window.versions[i];
                let previous = lock(&self.candidates).get(&id).map(|c| (c.version, c.first_seen));
                match judge(previous, version, now, grace) {
                    Verdict::Wait => {}
                    Verdict::Remember => {
                        let mut candidates = lock(&self.candidates);
                        if candidates.len() < MAX_CANDIDATES || candidates.contains_key(&id) {
                            candidates.insert(id, Candidate { version, first_seen: now });
                        }
                    }
                    Verdict::Delete if deletes_left == 0 => {}
                    Verdict::Delete => {
                        deletes_left -= 1;
                        match self.data.delete_stripe(id).await {
                            Ok(deleted) => {
                                lock(&self.candidates).remove(&id);
                                if let Some(stripe) = deleted {
                                    let bytes = stripe.unit_bytes.saturating_mul(stripe.placement.len() as u64);
                                    tracing::info!(stripe = %id, bytes, "unreferenced stripe deleted");
                                    report.deleted += 1;
                                    report.bytes_deleted += bytes;
                                    self.stripes_deleted.fetch_add(1, Ordering::Relaxed);
                                    self.bytes_deleted.fetch_add(bytes, Ordering::Relaxed);
                                    metrics::counter!("lowtail_gateway_unreferenced_stripes_deleted_total")
                                        .increment(1);
                                    metrics::counter!("lowtail_gateway_unreferenced_stripe_bytes_deleted_total")
                                        .increment(bytes);
                                }
                            }
                            // Kept as a candidate: the next scan tries again.
                            Err(error) => tracing::warn!(stripe = %id, %error, "unreferenced stripe not deleted"),
                        }
                    }
                }
            }
            self.compact(&window, &mut report).await?;
            if !more {
                return Ok(report);
            }
            after = last_listed;
        }
        tracing::warn!(windows = MAX_WINDOWS, "stripe scan stopped at its window bound; the rest waits for the next");
        Ok(report)
    }

    /// The next sealed stripes after `after`, up to [`WINDOW_STRIPES`]: the window, the last stripe
    /// listed (sealed or not), and whether more follow.
    async fn list_window(&self, mut after: Option<StripeId>) -> Result<(Window, Option<StripeId>, bool), DataError> {
        let mut window = Window::default();
        let mut last_listed = after;
        let mut more = true;
        // Bounded by the window: every page but the last adds STRIPE_PAGE listed stripes.
        for _page in 0..WINDOW_STRIPES.div_ceil(STRIPE_PAGE) {
            let page = self.meta.list_stripes(after, STRIPE_PAGE).await.map_err(meta_error)?;
            for stripe in &page {
                assert!(last_listed.is_none_or(|last| stripe.id > last), "stripes are listed in id order");
                last_listed = Some(stripe.id);
                if stripe.state == StripeState::Sealed {
                    window.ids.push(stripe.id);
                    window.versions.push(stripe.version);
                    let k = stripe.code_spec().map_or(0, |spec| spec.data_units() as u64);
                    window.packed_bytes.push(stripe.packed_bytes.unwrap_or(k.saturating_mul(stripe.unit_bytes)));
                }
            }
            if page.len() < STRIPE_PAGE {
                more = false;
                break;
            }
            after = last_listed;
            if window.ids.len() >= WINDOW_STRIPES {
                break;
            }
        }
        window.size_marks();
        Ok((window, last_listed, more))
    }

    /// Marks every stripe of `window` that an upload part or an object references. Parts are
    /// listed before objects: a part completed into an object meanwhile is then seen as one or
    /// the other.
    async fn mark_references(&self, window: &mut Window) -> Result<(), DataError> {
        // The metadata snapshots on the nodes are referenced by their list.
        let snapshots = crate::meta_snapshot::recorded(self.meta.as_ref()).await.map_err(meta_error)?;
        snapshots.iter().for_each(|snapshot| window.mark(&snapshot.layout, false));
        let buckets = self.meta.list_buckets().await.map_err(meta_error)?;
        for bucket in &buckets {
            // A bucket deleted meanwhile was empty: it references nothing.
            let uploads = match self.meta.list_uploads(&bucket.name, "").await {
                Ok(uploads) => uploads,
                Err(MetaError::NoSuchBucket(_)) => continue,
                Err(error) => return Err(meta_error(error)),
            };
            for upload in &uploads {
                match self.meta.list_parts(&bucket.name, &upload.key, &upload.upload_id).await {
                    Ok(parts) => parts.iter().for_each(|part| window.mark(&part.layout, false)),
                    // Completed (its parts are now an object's, listed below) or aborted (released).
                    Err(MetaError::NoSuchUpload(_)) => {}
                    Err(error) => return Err(meta_error(error)),
                }
            }
            self.mark_versions(&bucket.name, window).await?;
        }
        Ok(())
    }

    /// Marks what every version of `bucket`'s keys references, from whole histories (so a version
    /// moving between current and noncurrent meanwhile is seen once, where it is): a current
    /// object's packed bytes count as live for compaction; a noncurrent version pins its stripes
    /// (compaction moves current objects only). Nothing when the bucket was deleted meanwhile (it
    /// was empty); fails rather than stop early, since an incomplete listing must not condemn a
    /// stripe.
    async fn mark_versions(&self, bucket: &str, window: &mut Window) -> Result<(), DataError> {
        let mut after: Option<String> = None;
        for _page in 0..MAX_OBJECT_PAGES {
            let page = match self.meta.list_histories(bucket, after.as_deref(), HISTORY_PAGE_VERSIONS).await {
                Ok(page) => page,
                Err(MetaError::NoSuchBucket(_)) => return Ok(()),
                Err(error) => return Err(meta_error(error)),
            };
            for history in &page.histories {
                for (i, version) in history.versions.iter().enumerate() {
                    // The newest version is the current object unless it is a delete marker.
                    window.mark(&version.layout, i == 0 && !version.version.delete_marker);
                }
            }
            match page.next_after {
                Some(next) => after = Some(next),
                None => return Ok(()),
            }
        }
        Err(DataError::Internal(format!("bucket {bucket} has more than {MAX_OBJECT_PAGES} pages of versions")))
    }

    /// Calls `visit` with every object of `bucket` (none when the bucket was deleted meanwhile: it
    /// was empty). Fails rather than stop early, since an incomplete listing must not condemn a stripe.
    async fn for_each_object(&self, bucket: &str, mut visit: impl FnMut(&str, &ObjectMeta)) -> Result<(), DataError> {
        let mut query = ListObjectsQuery::default();
        for _page in 0..MAX_OBJECT_PAGES {
            let listing = match self.meta.list_objects(bucket, &query).await {
                Ok(listing) => listing,
                Err(MetaError::NoSuchBucket(_)) => return Ok(()),
                Err(error) => return Err(meta_error(error)),
            };
            listing.objects.iter().for_each(|object| visit(&object.key, &object.meta));
            match listing.next_continuation_token {
                Some(token) if listing.is_truncated => query.continuation_token = Some(token),
                _ => return Ok(()),
            }
        }
        Err(DataError::Internal(format!("bucket {bucket} has more than {MAX_OBJECT_PAGES} pages of objects")))
    }

    /// Moves the live objects out of the window's mostly dead packed stripes, at most
    /// `max_deletes_per_scan` a scan. A metadata error stops the moves (what moved stays moved).
    async fn compact(&self, window: &Window, report: &mut StripeScanReport) -> Result<(), DataError> {
        let fraction = self.config.compact_below_live_fraction;
        if fraction <= 0.0 {
            return Ok(());
        }
        let targets: Vec<StripeId> =
            (0..window.ids.len()).filter(|&i| window.compactable(i, fraction)).map(|i| window.ids[i]).collect();
        if targets.is_empty() {
            return Ok(());
        }
        report.compaction_targets += targets.len() as u64;
        // A second listing finds the targets' objects (the first kept only byte counts per stripe).
        let budget = self.config.max_deletes_per_scan;
        let mut moves: Vec<Move> = Vec::new();
        for bucket in self.meta.list_buckets().await.map_err(meta_error)? {
            self.for_each_object(&bucket.name, |key, object| {
                if let Layout::Packed { stripe, .. } = &object.layout
                    && moves.len() < budget
                    && targets.binary_search(stripe).is_ok()
                {
                    moves.push(Move { bucket: bucket.name.clone(), key: key.to_string(), object: object.clone() });
                }
            })
            .await?;
        }
        for planned in moves {
            let size = planned.object.size_bytes;
            // A node trouble stops this scan's moves; the next scan tries again.
            let copied = match self.data.read(&planned.object.layout, 0..size).await {
                Ok(bytes) => self.data.write(bytes).await.map(|written| written.layout),
                Err(error) => Err(error),
            };
            let copy = match copied {
                Ok(copy) => copy,
                Err(error) => {
                    tracing::warn!(bucket = %planned.bucket, key = %planned.key, %error, "compaction move failed");
                    return Ok(());
                }
            };
            match self.meta.move_object(&planned.bucket, &planned.key, &planned.object, copy.clone()).await {
                Ok(_) => {
                    report.objects_moved += 1;
                    self.objects_moved.fetch_add(1, Ordering::Relaxed);
                    self.bytes_moved.fetch_add(size, Ordering::Relaxed);
                    metrics::counter!("lowtail_gateway_compaction_objects_moved_total").increment(1);
                    metrics::counter!("lowtail_gateway_compaction_bytes_moved_total").increment(size);
                }
                Err(error) => {
                    // Nothing references the copy: release it (a packed copy's bytes just turn dead).
                    if let Err(release) = self.data.release(&copy).await {
                        tracing::warn!(%release, "copy of a moved object not released");
                    }
                    match error {
                        MetaError::Conflict(_) | MetaError::NoSuchBucket(_) => report.moves_lost += 1,
                        error => return Err(meta_error(error)),
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stripe_is_deleted_only_after_its_grace_with_its_record_unchanged() {
        let grace = Duration::from_secs(3600);
        let start = Instant::now();
        assert_eq!(judge(None, 1, start, grace), Verdict::Remember);
        assert_eq!(judge(Some((1, start)), 1, start + grace / 2, grace), Verdict::Wait);
        assert_eq!(judge(Some((1, start)), 1, start + grace, grace), Verdict::Delete);
        // Changed since it was judged (repair moved a unit): its grace starts over.
        assert_eq!(judge(Some((1, start)), 2, start + grace * 2, grace), Verdict::Remember);
        // A clock that went back never shortens the grace.
        assert_eq!(judge(Some((1, start + grace)), 1, start, grace), Verdict::Wait);
    }
}
