//! Unreferenced-stripe collection on real storage nodes: sealed stripes that no object and no upload
//! part references (a packed stripe whose objects were all deleted, a write whose commit never came)
//! are deleted with their units after the grace, and nothing referenced is touched: objects, parts
//! of an upload in progress, a packed stripe still holding one live object, an open stripe, and a
//! stripe whose object was committed late, between the scans. Compaction: the last live object of a
//! mostly dead packed stripe is moved out, and the stripe is then collected. Versions: a stripe only
//! noncurrent versions reference is kept and never compacted, and collected once they are deleted.
//! Also the write deadline: a striped write past it fails and leaves no stripe behind.

mod data_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use data_support::{TestCluster, pattern};
use gateway::data::services::repair::RepairService;
use gateway::data::{DataError, ErasureData, ObjectData, OrphanConfig};
use gateway::stripe_gc::StripeCollector;
use meta::{BucketMeta, Layout, MetaError, MetaStore, ObjectMeta, PartMeta, StripeId, UploadMeta};

const BUCKET: &str = "stripe-gc";

fn object(body: &Bytes, layout: &Layout) -> ObjectMeta {
    ObjectMeta {
        version: Default::default(),
        tags: Default::default(),
        size_bytes: body.len() as u64,
        etag: format!("{:x}", body.len()),
        content_type: None,
        user_metadata: BTreeMap::new(),
        headers: Default::default(),
        last_modified_ms: 1,
        completed_upload_id: None,
        checksum: None,
        layout: layout.clone(),
    }
}

async fn commit(meta: &dyn MetaStore, key: &str, body: &Bytes, layout: &Layout) {
    meta.put_object(BUCKET, key, object(body, layout)).await.unwrap();
}

async fn create_bucket(meta: &dyn MetaStore) {
    let bucket = BucketMeta {
        versioning: Default::default(),
        tags: Default::default(),
        name: BUCKET.into(),
        created_ms: 1,
        region: None,
        owner: None,
        write_ack: meta::WriteAck::All,
        class: None,
        profile: None,
        class_profiles: Default::default(),
    };
    meta.create_bucket(bucket).await.unwrap();
}

fn only_stripe(layout: &Layout) -> StripeId {
    let stripes = layout.stripes();
    assert_eq!(stripes.len(), 1, "{layout:?}");
    stripes[0]
}

/// Whether any node still holds a unit of `stripe` (data or parity).
async fn units_left(cluster: &TestCluster, stripe: StripeId, nodes: usize) -> usize {
    let mut held = 0;
    for i in 0..nodes {
        let listing = cluster.client(i).await.list_units(None, 0).await.unwrap();
        held += listing.units.iter().filter(|unit| unit.stripe == stripe.0).count();
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreferenced_stripes_are_deleted_after_the_grace_and_nothing_referenced_is() {
    let cluster = TestCluster::start(10, 10).await;
    let config = cluster.config("rs-6-3");
    let meta = Arc::clone(&cluster.meta);
    let data = ErasureData::new(config.clone(), Arc::clone(&meta)).await.unwrap();
    create_bucket(meta.as_ref()).await;
    let flush = || data.packer().flush(Duration::from_secs(30));

    // Referenced: a striped object, and a packed stripe keeping one live object of two.
    let striped = (pattern(5 << 20, 1), Layout::Striped { segments: Vec::new() });
    let striped = (striped.0.clone(), data.write(striped.0).await.unwrap().layout);
    commit(meta.as_ref(), "striped", &striped.0, &striped.1).await;
    let small = pattern(1000, 2);
    let small_layout = data.write(small.clone()).await.unwrap().layout;
    assert!(matches!(small_layout, Layout::Packed { .. }), "{small_layout:?}");
    commit(meta.as_ref(), "small", &small, &small_layout).await;
    let gone = pattern(900, 3);
    let gone_layout = data.write(gone.clone()).await.unwrap().layout;
    assert_eq!(only_stripe(&gone_layout), only_stripe(&small_layout), "both packed into one stripe");
    commit(meta.as_ref(), "gone", &gone, &gone_layout).await;
    let removed = meta.delete_object(BUCKET, "gone").await.unwrap().unwrap();
    data.release(&removed.layout).await.unwrap();
    flush().await.unwrap();

    // Unreferenced: a packed stripe whose only object was deleted, once sealed.
    let lonely = pattern(800, 4);
    let lonely_layout = data.write(lonely.clone()).await.unwrap().layout;
    let lonely_stripe = only_stripe(&lonely_layout);
    assert_ne!(lonely_stripe, only_stripe(&small_layout), "a new stripe after the flush");
    commit(meta.as_ref(), "lonely", &lonely, &lonely_layout).await;
    let removed = meta.delete_object(BUCKET, "lonely").await.unwrap().unwrap();
    data.release(&removed.layout).await.unwrap();
    flush().await.unwrap();

    // Referenced: a part of an upload in progress.
    let upload = meta
        .create_multipart(UploadMeta {
            tags: Default::default(),
            upload_id: String::new(),
            bucket: BUCKET.into(),
            key: "multi".into(),
            initiated_ms: 1,
            content_type: None,
            user_metadata: BTreeMap::new(),
            headers: Default::default(),
            checksum: None,
        })
        .await
        .unwrap();
    let part = pattern(2 << 20, 5);
    let part_layout = data.write(part.clone()).await.unwrap().layout;
    let part_meta = PartMeta {
        part_number: 1,
        size_bytes: part.len() as u64,
        etag: "p1".into(),
        last_modified_ms: 1,
        checksum: None,
        layout: part_layout.clone(),
    };
    meta.put_part(BUCKET, "multi", &upload.upload_id, part_meta).await.unwrap();

    // Unreferenced: a striped write whose commit never came.
    let leaked_layout = data.write(pattern(3 << 20, 6)).await.unwrap().layout;
    let leaked_stripe = only_stripe(&leaked_layout);
    // Not yet referenced at the first scan, committed before the second (a slow commit).
    let late = pattern(100 << 10, 7);
    let late_layout = data.write(late.clone()).await.unwrap().layout;
    // Open, so never judged: a small object not yet committed, in a stripe not yet sealed.
    let open_layout = data.write(pattern(700, 8)).await.unwrap().layout;
    let open_stripe = only_stripe(&open_layout);

    // Compaction off: the stripe of "small" is mostly dead, and is the next test's.
    let gc_config = OrphanConfig { compact_below_live_fraction: 0.0, ..Default::default() };
    let collector = StripeCollector::new(Arc::clone(&meta), data.clone(), gc_config);
    let grace = Duration::from_millis(OrphanConfig::default().grace_ms);
    let start = Instant::now();
    let first = collector.scan_at(start).await.unwrap();
    assert_eq!((first.unreferenced, first.deleted), (3, 0), "lonely, leaked and late: {first:?}");
    assert_eq!(collector.status().candidates, 3);
    commit(meta.as_ref(), "late", &late, &late_layout).await;

    let second = collector.scan_at(start + grace).await.unwrap();
    assert_eq!((second.unreferenced, second.deleted), (2, 2), "{second:?}");
    for stripe in [lonely_stripe, leaked_stripe] {
        assert!(matches!(meta.get_stripe(stripe).await, Err(MetaError::NoSuchStripe(_))), "{stripe} deleted");
        assert_eq!(units_left(&cluster, stripe, 10).await, 0, "every unit of {stripe} deleted");
    }
    let status = collector.status();
    assert_eq!((status.scans, status.stripes_deleted, status.candidates), (2, 2, 0), "{status:?}");
    // Units of 800 B packed in 64 B steps, and 3 MiB split six ways: n units of each.
    assert!(status.bytes_deleted >= 9 * (3 << 20) / 6, "{status:?}");

    // Everything referenced is whole and reads back; the open stripe is still open.
    for (body, layout) in
        [(&striped.0, &striped.1), (&small, &small_layout), (&part, &part_layout), (&late, &late_layout)]
    {
        for stripe in layout.stripes() {
            let record = meta.get_stripe(stripe).await.unwrap();
            assert_eq!(units_left(&cluster, stripe, 10).await, record.placement.len(), "{stripe} whole");
        }
        assert_eq!(data.read(layout, 0..body.len() as u64).await.unwrap(), *body);
    }
    assert_eq!(meta.get_stripe(open_stripe).await.unwrap().state, meta::StripeState::Open);
    let third = collector.scan_at(start + grace * 3).await.unwrap();
    assert_eq!((third.unreferenced, third.deleted), (0, 0), "{third:?}");

    // Once sealed, the open stripe's uncommitted object makes it garbage too, after its own grace.
    flush().await.unwrap();
    let fourth = collector.scan_at(start + grace * 4).await.unwrap();
    assert_eq!((fourth.unreferenced, fourth.deleted), (1, 0), "{fourth:?}");
    let fifth = collector.scan_at(start + grace * 5).await.unwrap();
    assert_eq!(fifth.deleted, 1, "{fifth:?}");
    assert!(matches!(meta.get_stripe(open_stripe).await, Err(MetaError::NoSuchStripe(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_striped_write_past_its_deadline_fails_and_keeps_nothing() {
    let cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.write_deadline_ms = 1;
    config.max_parallel_stripe_writes = 2;
    let data = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap();
    // Five stripes of 6 MiB, two at a time: the first is always written, and the third (at the
    // latest) finds the deadline passed once one of the first two has taken a stripe's write.
    let error = data.write(pattern((25 << 20) + 5, 9)).await.unwrap_err();
    assert!(matches!(&error, DataError::Unavailable(why) if why.contains("write_deadline_ms")), "{error}");
    assert!(cluster.meta.list_stripes(None, 100).await.unwrap().is_empty(), "the first stripe was dropped");
    // One stripe's worth fits any deadline.
    let body = pattern(5 << 20, 10);
    let layout = data.write(body.clone()).await.unwrap().layout;
    assert_eq!(data.read(&layout, 0..body.len() as u64).await.unwrap(), body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mostly_dead_packed_stripe_is_compacted_then_collected() {
    let cluster = TestCluster::start(9, 9).await;
    let meta = Arc::clone(&cluster.meta);
    let data = ErasureData::new(cluster.config("rs-6-3"), Arc::clone(&meta)).await.unwrap();
    create_bucket(meta.as_ref()).await;
    // Four objects fill four of six data units of one stripe; three are deleted, so the live one
    // fills 1000 B of 6 x 1024: under half.
    let mut layouts = Vec::new();
    for (i, key) in ["a", "b", "c", "live"].into_iter().enumerate() {
        let body = pattern(1000, 20 + i as u64);
        let layout = data.write(body.clone()).await.unwrap().layout;
        commit(meta.as_ref(), key, &body, &layout).await;
        layouts.push((key, body, layout));
    }
    let old_stripe = only_stripe(&layouts[3].2);
    assert!(layouts.iter().all(|(_, _, layout)| only_stripe(layout) == old_stripe), "one stripe");
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    for (key, _, _) in &layouts[..3] {
        let removed = meta.delete_object(BUCKET, key).await.unwrap().unwrap();
        data.release(&removed.layout).await.unwrap();
    }
    let before = meta.get_object(BUCKET, "live").await.unwrap();

    let collector = StripeCollector::new(Arc::clone(&meta), data.clone(), OrphanConfig::default());
    let grace = Duration::from_millis(OrphanConfig::default().grace_ms);
    let start = Instant::now();
    let first = collector.scan_at(start).await.unwrap();
    assert_eq!((first.compaction_targets, first.objects_moved, first.deleted), (1, 1, 0), "{first:?}");
    let after = meta.get_object(BUCKET, "live").await.unwrap();
    assert_ne!(only_stripe(&after.layout), old_stripe, "moved to another stripe");
    assert_eq!(ObjectMeta { layout: before.layout.clone(), ..after.clone() }, before, "only the layout changed");
    let body = &layouts[3].1;
    assert_eq!(data.read(&after.layout, 0..body.len() as u64).await.unwrap(), *body);
    // A read holding the old layout still finds the bytes until the old stripe's grace is over.
    assert_eq!(data.read(&before.layout, 0..body.len() as u64).await.unwrap(), *body);

    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    let second = collector.scan_at(start + grace / 2).await.unwrap();
    assert_eq!((second.unreferenced, second.objects_moved, second.deleted), (1, 0, 0), "{second:?}");
    let third = collector.scan_at(start + grace * 2).await.unwrap();
    assert_eq!((third.deleted, third.compaction_targets), (1, 0), "{third:?}");
    assert!(matches!(meta.get_stripe(old_stripe).await, Err(MetaError::NoSuchStripe(_))));
    assert_eq!(units_left(&cluster, old_stripe, 9).await, 0);
    let status = collector.status();
    assert_eq!((status.objects_moved, status.bytes_moved, status.stripes_deleted), (1, 1000, 1), "{status:?}");
    let now = meta.get_object(BUCKET, "live").await.unwrap();
    assert_eq!(data.read(&now.layout, 0..body.len() as u64).await.unwrap(), *body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noncurrent_versions_keep_their_stripes_and_pin_them_against_compaction() {
    let cluster = TestCluster::start(9, 9).await;
    let meta = Arc::clone(&cluster.meta);
    let data = ErasureData::new(cluster.config("rs-6-3"), Arc::clone(&meta)).await.unwrap();
    create_bucket(meta.as_ref()).await;
    meta.set_bucket_versioning(BUCKET, meta::Versioning::Enabled).await.unwrap();
    // Four small objects packed into one stripe, all of them noncurrent versions after: three keys
    // deleted (delete markers) and the fourth overwritten by a striped version.
    let mut packed = Vec::new();
    for (i, key) in ["a", "b", "c", "d"].into_iter().enumerate() {
        let body = pattern(1000, 40 + i as u64);
        let layout = data.write(body.clone()).await.unwrap().layout;
        commit(meta.as_ref(), key, &body, &layout).await;
        packed.push((key, body, layout));
    }
    let packed_stripe = only_stripe(&packed[0].2);
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    let newest = pattern(3 << 20, 50);
    let newest_layout = data.write(newest.clone()).await.unwrap().layout;
    commit(meta.as_ref(), "d", &newest, &newest_layout).await;
    for key in ["a", "b", "c"] {
        assert_eq!(meta.delete_object(BUCKET, key).await.unwrap(), None, "a marker releases nothing");
    }

    // The stripe is referenced by noncurrent versions only: never collected, never compacted.
    let collector = StripeCollector::new(Arc::clone(&meta), data.clone(), OrphanConfig::default());
    let grace = Duration::from_millis(OrphanConfig::default().grace_ms);
    let start = Instant::now();
    for at in [start, start + grace, start + grace * 2] {
        let report = collector.scan_at(at).await.unwrap();
        let judged = (report.unreferenced, report.deleted, report.compaction_targets, report.objects_moved);
        assert_eq!(judged, (0, 0, 0, 0), "{report:?}");
    }
    for (key, body, layout) in &packed {
        let version = &meta.key_versions(BUCKET, key).await.unwrap();
        let old = version.iter().find(|v| v.layout == *layout).expect("the packed version is kept");
        assert_eq!(data.read(&old.layout, 0..body.len() as u64).await.unwrap(), *body, "{key}");
    }

    // Its versions deleted (and, as after a gateway that died before releasing, not released), the
    // stripe is garbage a grace later; the current striped version is untouched.
    for (key, _, layout) in &packed {
        let versions = meta.key_versions(BUCKET, key).await.unwrap();
        let old = versions.iter().find(|v| v.layout == *layout).unwrap();
        meta.delete_version(BUCKET, key, old.version.id_or_null(), &Default::default()).await.unwrap().unwrap();
    }
    let first = collector.scan_at(start + grace * 3).await.unwrap();
    assert_eq!((first.unreferenced, first.deleted), (1, 0), "{first:?}");
    let second = collector.scan_at(start + grace * 4).await.unwrap();
    assert_eq!((second.unreferenced, second.deleted), (1, 1), "{second:?}");
    assert!(matches!(meta.get_stripe(packed_stripe).await, Err(MetaError::NoSuchStripe(_))));
    let current = meta.get_object(BUCKET, "d").await.unwrap();
    assert_eq!(data.read(&current.layout, 0..newest.len() as u64).await.unwrap(), newest);
}

/// The wall clock the lease test's collectors claim by.
static LEASE_CLOCK_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn lease_clock() -> u64 {
    LEASE_CLOCK_MS.load(std::sync::atomic::Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_gateway_scans_at_a_time_and_another_takes_over_when_its_lease_lapses() {
    use gateway::stripe_gc::LEASE_SCANS;
    let set_clock = |ms: u64| LEASE_CLOCK_MS.store(ms, std::sync::atomic::Ordering::SeqCst);
    let cluster = TestCluster::start(9, 9).await;
    let meta = Arc::clone(&cluster.meta);
    let collector = |id: &str| {
        let mut config = cluster.config("rs-6-3");
        config.gateway_id = Some(id.into());
        let meta = Arc::clone(&meta);
        async move {
            let data = ErasureData::new(config.clone(), Arc::clone(&meta)).await.unwrap();
            (StripeCollector::new(meta, data.clone(), config.orphans), data)
        }
    };
    let ((a, data), (b, _)) = (collector("gateway-a").await, collector("gateway-b").await);
    let term_ms = OrphanConfig::default().stripe_scan_interval_ms * LEASE_SCANS;
    // A write never committed: garbage the scanning gateway remembers.
    data.write(pattern(1 << 20, 40)).await.unwrap();
    let now = Instant::now();

    set_clock(1_000);
    let first = a.round(lease_clock, now).await.unwrap().expect("nobody held the lease: a scans");
    assert_eq!(first.unreferenced, 1, "{first:?}");
    assert_eq!(a.status().candidates, 1);
    set_clock(2_000);
    assert!(b.round(lease_clock, now).await.unwrap().is_none(), "a holds the lease: b skips");
    let status = b.status();
    assert_eq!((status.scans, status.scans_skipped, status.lease_holder.as_deref()), (0, 1, Some("gateway-a")));

    // a renews at every round; b takes over only once a's last renewal has lapsed.
    set_clock(3_000);
    assert!(a.round(lease_clock, now).await.unwrap().is_some());
    set_clock(3_000 + term_ms - 1);
    assert!(b.round(lease_clock, now).await.unwrap().is_none(), "a's term runs until {}", 3_000 + term_ms);
    set_clock(3_000 + term_ms);
    let taken = b.round(lease_clock, now).await.unwrap().expect("a's term lapsed: b scans");
    assert_eq!(taken.unreferenced, 1, "{taken:?}");
    assert!(a.round(lease_clock, now).await.unwrap().is_none(), "now b holds it");
    let status = a.status();
    assert_eq!((status.scans, status.scans_skipped, status.candidates), (2, 1, 0), "a dropped its candidates");
    assert_eq!(status.lease_holder.as_deref(), Some("gateway-b"));
}

/// Loses units 0..4 of `stripe` (their files deleted, recorded missing): 5 of 9 are left, too few
/// to read or rebuild from.
async fn lose_four_units(cluster: &TestCluster, stripe: StripeId) {
    let mut record = cluster.meta.get_stripe(stripe).await.unwrap();
    for unit in 0..4u16 {
        let node = record.placement[usize::from(unit)];
        cluster.client(node.0 as usize).await.delete_unit(stripe.0, unit).await.unwrap();
    }
    record.missing_units = vec![0, 1, 2, 3];
    record.degraded_since_ms = Some(1);
    cluster.meta.update_stripe(stripe, record.version, record).await.unwrap();
}

/// A stripe too few of whose units are readable is counted under-redundant when an object
/// references it (its object is unreadable) and apart, as garbage, when nothing does (a write whose
/// commit never came); a reference that appears later is counted at the next check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_stripe_nothing_references_is_garbage_not_under_redundant() {
    let cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.packed.max_object_bytes = 0;
    let meta = Arc::clone(&cluster.meta);
    let data = ErasureData::new(config.clone(), Arc::clone(&meta)).await.unwrap();
    create_bucket(meta.as_ref()).await;
    let kept = pattern(1 << 20, 1);
    let kept_layout = data.write(kept.clone()).await.unwrap().layout;
    commit(meta.as_ref(), "kept", &kept, &kept_layout).await;
    let uncommitted = pattern(1 << 20, 2);
    let uncommitted_layout = data.write(uncommitted.clone()).await.unwrap().layout;
    lose_four_units(&cluster, only_stripe(&kept_layout)).await;
    lose_four_units(&cluster, only_stripe(&uncommitted_layout)).await;

    let repair = Arc::new(RepairService::new(Arc::clone(data.io()), config.repair.clone()));
    let collector = StripeCollector::new(Arc::clone(&meta), data.clone(), config.orphans.clone());
    let census = |repair: &RepairService| repair.status().census.expect("a census");
    repair.scan().await.unwrap();
    let before = census(&repair);
    assert_eq!((before.stripes_under_redundant, before.stripes_unreadable_unreferenced), (2, 0), "{before:?}");
    assert_eq!(before.unreferenced_checked_at_ms, None);
    assert_eq!(repair.unreadable_stripes().len(), 2);

    collector.check_unreadable(&repair).await.unwrap();
    repair.scan().await.unwrap();
    let checked = census(&repair);
    assert_eq!((checked.stripes_under_redundant, checked.stripes_unreadable_unreferenced), (1, 1), "{checked:?}");
    assert!(checked.unreferenced_checked_at_ms.is_some());
    let blocked: u64 = repair.status().blocked.iter().map(|b| b.stripes).sum();
    assert_eq!(blocked, 1, "garbage holds nothing up: {:?}", repair.status().blocked);

    // Committed late: the next check counts it as an unreadable object's stripe again.
    commit(meta.as_ref(), "late", &uncommitted, &uncommitted_layout).await;
    collector.check_unreadable(&repair).await.unwrap();
    repair.scan().await.unwrap();
    let late = census(&repair);
    assert_eq!((late.stripes_under_redundant, late.stripes_unreadable_unreferenced), (2, 0), "{late:?}");
    cluster.shutdown().await;
}
