//! Erasure-coded writes and reads over real storage nodes: sizes from 0 B to 20 MiB with RS(6,3)
//! and LRC(6,2,2), whole and ranged reads, invalid ranges, too few nodes. Packing is off here:
//! these are the striped layout's tests (`data_packed.rs` has the packed layout's).

mod data_support;

use std::sync::Arc;

use data_support::{TestCluster, pattern, ranges};
use gateway::data::{DataConfig, DataError, ErasureData, ObjectData};
use meta::{Layout, NodeId};
use std::sync::atomic::Ordering;

fn striped_only(mut config: DataConfig) -> DataConfig {
    config.packed.max_object_bytes = 0;
    config
}

const SIZES: [usize; 5] = [0, 1, 100 << 10, (5 << 20) + 17, 20 << 20];

async fn round_trips(code: &str) {
    let cluster = TestCluster::start(12, 12).await;
    let data = ErasureData::new(striped_only(cluster.config(code)), Arc::clone(&cluster.meta)).await.unwrap();
    for (seed, size) in SIZES.into_iter().enumerate() {
        let body = pattern(size, seed as u64);
        let layout = data.write(body.clone()).await.unwrap().layout;
        let Layout::Striped { segments } = &layout else { panic!("striped layout expected") };
        assert_eq!(segments.iter().map(|s| s.length_bytes).sum::<u64>(), size as u64);
        let whole = data.read(&layout, 0..size as u64).await.unwrap();
        assert!(whole == body, "{code} {size} B read back identical");
        for range in ranges(size as u64, 12, seed as u64 + 100) {
            let part = data.read(&layout, range.clone()).await.unwrap();
            assert!(part == body.slice(range.start as usize..range.end as usize), "{code} {size} B {range:?}");
        }
        let err = data.read(&layout, 0..size as u64 + 1).await.unwrap_err();
        assert_eq!(err, DataError::InvalidRange { start: 0, end: size as u64 + 1, size: size as u64 });
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rs_6_3_round_trips() {
    round_trips("rs-6-3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lrc_6_2_2_round_trips() {
    round_trips("lrc-6-2-2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_go_on_degraded_within_the_durability_rule_and_stop_below_it() {
    let mut cluster = TestCluster::start(9, 9).await;
    let data = ErasureData::new(striped_only(cluster.config("rs-6-3")), Arc::clone(&cluster.meta)).await.unwrap();
    let layout = data.write(pattern(1000, 1)).await.unwrap().layout;
    data.release(&layout).await.unwrap();
    assert!(cluster.meta.list_stripes(None, 10).await.unwrap().is_empty(), "release dropped the stripe");

    // One node Down with only n nodes: the stripe is written degraded, its last parity unit placed
    // on the Down node unwritten and recorded missing (under-redundant, for repair), and reads back.
    cluster.kill(4).await;
    let body = pattern(100_000, 2);
    let written = data.write(body.clone()).await.unwrap();
    assert_eq!((written.redundancy.failures_tolerated, written.redundancy.full), (2, 3), "8 of 9 units stored");
    assert!(data.read(&written.layout, 0..body.len() as u64).await.unwrap() == body);
    let stripes = cluster.meta.list_stripes(None, 10).await.unwrap();
    assert_eq!(stripes.len(), 1);
    assert_eq!(stripes[0].placement[8], NodeId(4), "the unwritten parity unit is placed on the Down node");
    assert_eq!(stripes[0].missing_units, vec![8], "and recorded missing");
    assert!(stripes[0].degraded_since_ms.is_some());
    assert_eq!(cluster.meta.under_redundant_stripes(None, 10).await.unwrap(), vec![stripes[0].id]);
    assert_eq!(data.io().counters().degraded_writes.load(Ordering::Relaxed), 1);
    data.release(&written.layout).await.unwrap();
    assert!(cluster.meta.under_redundant_stripes(None, 10).await.unwrap().is_empty(), "released with its record");

    // A node that is Up in the metadata but dead (crashed, not yet noticed): its unit write fails
    // and no node is left to take it, so that unit is missing too: 7 of 9 units still survive one
    // more failure, which the default rule asks, so the write is acknowledged at once.
    cluster.stop(5).await;
    let body = pattern((20 << 20) + 3, 3);
    let written = data.write(body.clone()).await.unwrap();
    assert_eq!(written.redundancy.failures_tolerated, 1, "7 of 9 units stored");
    assert!(data.read(&written.layout, 0..body.len() as u64).await.unwrap() == body);
    for stripe in cluster.meta.list_stripes(None, 10).await.unwrap() {
        let missing: Vec<NodeId> = stripe.missing_units.iter().map(|&u| stripe.placement[usize::from(u)]).collect();
        assert_eq!(missing.len(), 2, "stripe {}: {:?}", stripe.id, stripe.missing_units);
        assert!(missing.contains(&NodeId(4)) && missing.contains(&NodeId(5)), "{missing:?}");
    }
    data.release(&written.layout).await.unwrap();

    // A stricter rule refuses what the default accepts: every unit written is deleted again, for
    // an object of four stripes written in parallel too, and no stripe is recorded.
    let strict = DataConfig { ack_min_failures_tolerated: 2, ..striped_only(cluster.config("rs-6-3")) };
    let strict = ErasureData::new(strict, Arc::clone(&cluster.meta)).await.unwrap();
    for body in [pattern(1000, 5), pattern((20 << 20) + 3, 6)] {
        let err = strict.write(body).await.unwrap_err();
        assert!(matches!(&err, DataError::Unavailable(why) if why.contains("ack_min_failures_tolerated")), "{err}");
        assert!(cluster.meta.list_stripes(None, 10).await.unwrap().is_empty(), "no stripe recorded");
    }

    // Fewer than k nodes up: refused before anything is written.
    for i in [6, 7, 8] {
        cluster.kill(i).await;
    }
    let err = data.write(pattern(1000, 4)).await.unwrap_err();
    assert!(matches!(err, DataError::Unavailable(_)), "{err}");
    assert!(cluster.meta.list_stripes(None, 10).await.unwrap().is_empty(), "no stripe recorded");
    for i in [0, 1, 2, 3] {
        let units = cluster.client(i).await.list_units(None, 0).await.unwrap().units;
        assert!(units.is_empty(), "node {i} keeps no half-written unit: {units:?}");
    }
    cluster.shutdown().await;
}

/// `body` as chunks of `chunk_bytes` (the last shorter), as a request body arrives.
fn chunked(body: &bytes::Bytes, chunk_bytes: usize) -> Vec<Result<bytes::Bytes, DataError>> {
    (0..body.len()).step_by(chunk_bytes).map(|at| Ok(body.slice(at..(at + chunk_bytes).min(body.len())))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_writes_store_what_whole_writes_store_and_a_broken_body_leaves_nothing() {
    use futures_util::StreamExt;
    let cluster = TestCluster::start(9, 9).await;
    let data = ErasureData::new(striped_only(cluster.config("rs-6-3")), Arc::clone(&cluster.meta)).await.unwrap();
    // Chunks of a size no stripe is a multiple of, so stripes are joined across chunks; sizes from
    // empty (no segment) and a short single stripe up to three and a half stripes.
    let stripe_bytes = 6usize << 20;
    for (seed, size) in [0, 1000, stripe_bytes, (stripe_bytes * 7) / 2].into_iter().enumerate() {
        let body = pattern(size, seed as u64 + 40);
        let streamed = data
            .write_stream(futures_util::stream::iter(chunked(&body, 65_537)).boxed(), meta::WriteAck::All)
            .await
            .unwrap()
            .layout;
        let whole = data.write(body.clone()).await.unwrap().layout;
        match (&streamed, &whole) {
            (Layout::Striped { segments: a }, Layout::Striped { segments: b }) => {
                let shape = |segments: &[meta::StripeSegment]| {
                    segments.iter().map(|s| (s.object_offset_bytes, s.length_bytes, s.unit_bytes)).collect::<Vec<_>>()
                };
                assert_eq!(shape(a), shape(b), "{size} B: the same stripes as a whole write");
            }
            other => panic!("{size} B: layouts differ in kind: {other:?}"),
        }
        assert!(data.read(&streamed, 0..size as u64).await.unwrap() == body, "{size} B streamed reads back");
        data.release(&streamed).await.unwrap();
        data.release(&whole).await.unwrap();
    }
    assert!(cluster.meta.list_stripes(None, 10).await.unwrap().is_empty(), "all released");

    // A body that breaks after two and a half stripes: the stripes already written are dropped.
    let body = pattern(stripe_bytes * 4, 50);
    let mut chunks = chunked(&body.slice(..stripe_bytes * 5 / 2), 1 << 20);
    chunks.push(Err(DataError::Body("connection reset".into())));
    let err = data.write_stream(futures_util::stream::iter(chunks).boxed(), meta::WriteAck::All).await.unwrap_err();
    assert_eq!(err, DataError::Body("connection reset".into()));
    // Beyond the size limit: the same.
    let mut small = striped_only(cluster.config("rs-6-3"));
    small.max_object_bytes = (stripe_bytes * 2) as u64;
    let limited = ErasureData::new(small, Arc::clone(&cluster.meta)).await.unwrap();
    let err = limited
        .write_stream(futures_util::stream::iter(chunked(&body, 1 << 20)).boxed(), meta::WriteAck::All)
        .await
        .unwrap_err();
    assert!(matches!(err, DataError::TooLarge { limit, .. } if limit == (stripe_bytes * 2) as u64), "{err}");
    assert!(cluster.meta.list_stripes(None, 10).await.unwrap().is_empty(), "no stripe recorded");
    for i in 0..9 {
        let units = cluster.client(i).await.list_units(None, 0).await.unwrap().units;
        assert!(units.is_empty(), "node {i} keeps no unit of a failed streamed write: {units:?}");
    }

    // A small body that arrives in pieces is packed, as one given whole is.
    let packing = ErasureData::new(cluster.config("rs-6-3"), Arc::clone(&cluster.meta)).await.unwrap();
    let small = pattern(1000, 51);
    let packed = packing
        .write_stream(futures_util::stream::iter(chunked(&small, 300)).boxed(), meta::WriteAck::All)
        .await
        .unwrap()
        .layout;
    assert!(matches!(packed, Layout::Packed { .. }), "{packed:?}");
    assert!(packing.read(&packed, 0..1000).await.unwrap() == small);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_layout_stays_readable_after_release_and_is_deleted_when_the_hold_ends() {
    let cluster = TestCluster::start(9, 9).await;
    let data = ErasureData::new(striped_only(cluster.config("rs-6-3")), Arc::clone(&cluster.meta)).await.unwrap();
    let body = pattern((13 << 20) + 5, 60);
    let layout = data.write(body.clone()).await.unwrap().layout;
    let hold = data.hold(&layout);
    let second = data.hold(&layout);
    data.release(&layout).await.unwrap();
    assert_eq!(cluster.meta.list_stripes(None, 10).await.unwrap().len(), 3, "released but held: kept");
    assert!(data.read(&layout, 0..body.len() as u64).await.unwrap() == body, "still readable");
    drop(hold);
    assert_eq!(cluster.meta.list_stripes(None, 10).await.unwrap().len(), 3, "one hold is left");
    drop(second);
    let started = std::time::Instant::now();
    // The last hold's end deletes the stripes (records, then units) on a task of their own: wait
    // until every record and unit is gone.
    loop {
        let mut left = cluster.meta.list_stripes(None, 10).await.unwrap().len();
        for i in 0..9 {
            left += cluster.client(i).await.list_units(None, 0).await.unwrap().units.len();
        }
        if left == 0 {
            break;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "{left} records and units left");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // A release with no hold deletes at once, as before.
    let layout = data.write(pattern(1000, 61)).await.unwrap().layout;
    data.release(&layout).await.unwrap();
    assert!(cluster.meta.list_stripes(None, 10).await.unwrap().is_empty());
    cluster.shutdown().await;
}

/// Stripe records and units the cluster holds.
async fn stored(cluster: &TestCluster) -> (usize, usize) {
    let records = cluster.meta.list_stripes(None, 1000).await.unwrap().len();
    let mut units = 0;
    for i in 0..cluster.nodes.len() {
        units += cluster.client(i).await.list_units(None, 0).await.unwrap().units.len();
    }
    (records, units)
}

/// Waits until the cluster holds nothing; returns how long that took from `since`.
async fn until_empty(cluster: &TestCluster, since: std::time::Instant) -> std::time::Duration {
    loop {
        if stored(cluster).await == (0, 0) {
            return since.elapsed();
        }
        assert!(since.elapsed() < std::time::Duration::from_secs(30), "{:?} left", stored(cluster).await);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_through_one_gateway_keeps_the_stripes_for_reads_through_another_until_the_delay_ends() {
    let cluster = TestCluster::start(9, 9).await;
    let delay = std::time::Duration::from_millis(1500);
    let mut config = striped_only(cluster.config("rs-6-3"));
    config.orphans.release_delay_ms = delay.as_millis() as u64;
    // Two gateways over one metadata store, each with its own holds and release queue.
    let reader = ErasureData::start(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let writer = ErasureData::start(config, Arc::clone(&cluster.meta)).await.unwrap();
    let body = pattern((13 << 20) + 5, 70);
    let layout = writer.data.write(body.clone()).await.unwrap().layout;
    let stripes = stored(&cluster).await;
    assert_eq!(stripes, (3, 27));

    // The writer's gateway releases (an overwrite committed there); the reader's read of the old
    // layout began before and goes on.
    let released = std::time::Instant::now();
    writer.data.release(&layout).await.unwrap();
    assert_eq!(stored(&cluster).await, stripes, "released, but kept for the delay");
    assert!(reader.data.read(&layout, 0..body.len() as u64).await.unwrap() == body, "read whole elsewhere");
    assert_eq!(writer.data.delayed_releases().status().waiting, 3);
    let took = until_empty(&cluster, released).await;
    assert!(took >= delay, "deleted {took:?} after the release, before the {delay:?} delay");
    let status = writer.data.delayed_releases().status();
    assert_eq!((status.waiting, status.deleted, status.deleted_without_delay), (0, 3, 0), "{status:?}");

    // A held layout waits for its hold on this gateway, then the delay.
    let layout = writer.data.write(pattern(3 << 20, 71)).await.unwrap().layout;
    let hold = writer.data.hold(&layout);
    writer.data.release(&layout).await.unwrap();
    tokio::time::sleep(delay * 2).await;
    assert_eq!(stored(&cluster).await.0, 1, "held: no delay runs yet");
    let unheld = std::time::Instant::now();
    drop(hold);
    let took = until_empty(&cluster, unheld).await;
    assert!(took >= delay, "deleted {took:?} after the hold ended, before the {delay:?} delay");

    // At shutdown what still waits is left (unreferenced) for the stripe collector.
    let layout = writer.data.write(pattern(1000, 72)).await.unwrap().layout;
    writer.data.release(&layout).await.unwrap();
    writer.shutdown().await;
    tokio::time::sleep(delay + std::time::Duration::from_millis(500)).await;
    assert_eq!(stored(&cluster).await.0, 1, "not deleted by a stopped gateway");
    reader.shutdown().await;
    cluster.shutdown().await;
}
