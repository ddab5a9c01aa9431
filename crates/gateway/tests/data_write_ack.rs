//! Write acknowledgement rules on real storage nodes (FAST CLOUD's speculative write): under `k`
//! and `k+1` a stripe returns once the units landed survive the rule's failures, recorded with the
//! rest missing and pending before the answer; the writer lands them in the background and the
//! record ends whole; reads never wait for them. When the writing gateway dies first (its runtime
//! is shut down, killing its background tasks), the record stays pending until its deadline, then
//! another gateway's repair rebuilds what is missing; the same gateway started again rebuilds at
//! once (nobody lands them): nothing acknowledged is lost.

mod data_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use data_support::{TestCluster, pattern};
use futures_util::StreamExt;
use gateway::data::services::repair::RepairService;
use gateway::data::{DataConfig, ErasureData, ObjectData, Written};
use meta::{Layout, StripeMeta, WriteAck};
use node::ServiceModel;

/// Node i's writes (and reads) take `overhead_ms` more.
async fn slow_down(cluster: &TestCluster, nodes: &[usize], overhead_ms: u64) {
    let model = ServiceModel { enabled: overhead_ms > 0, overhead_us: overhead_ms * 1000, ..Default::default() };
    for &i in nodes {
        cluster.client(i).await.set_service_model(&model).await.unwrap();
    }
}

async fn write(data: &ErasureData, body: &Bytes, ack: WriteAck) -> Written {
    let stream = futures_util::stream::iter([Ok(body.clone())]).boxed();
    data.write_stream(stream, ack).await.unwrap()
}

async fn only_stripe(cluster: &TestCluster, layout: &Layout) -> StripeMeta {
    let Layout::Striped { segments } = layout else { panic!("a 600 kB object is striped: {layout:?}") };
    assert_eq!(segments.len(), 1, "one stripe");
    cluster.meta.get_stripe(segments[0].stripe).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_rules_return_before_the_slow_units_land_and_the_writer_completes_them() {
    let cluster = TestCluster::start(9, 9).await;
    let data = ErasureData::new(cluster.config("rs-6-3"), Arc::clone(&cluster.meta)).await.unwrap();
    let slow = [7, 8];
    slow_down(&cluster, &slow, 1500).await;
    let body = pattern(600_000, 1);

    let began = Instant::now();
    let all = write(&data, &body, WriteAck::All).await;
    assert!(began.elapsed() >= Duration::from_millis(1400), "all waits for the slow nodes");
    assert_eq!((all.redundancy.state(), all.redundancy.failures_tolerated), ("full", 3));

    for (ack, least_tolerated) in [(WriteAck::KPlusOne, 1), (WriteAck::K, 0)] {
        let began = Instant::now();
        let written = write(&data, &body, ack).await;
        let took = began.elapsed();
        assert!(took < Duration::from_millis(1200), "{ack} returns before the slow units land: {took:?}");
        assert_eq!(written.redundancy.state(), "pending", "{ack}: {:?}", written.redundancy);
        assert!(
            (least_tolerated..3).contains(&written.redundancy.failures_tolerated),
            "{ack}: {:?}",
            written.redundancy
        );
        let stripe = only_stripe(&cluster, &written.layout).await;
        let on_slow: Vec<u16> =
            (0..9u16).filter(|&u| slow.contains(&(stripe.placement[u as usize].0 as usize))).collect();
        // Recorded missing before the answer: the slow units, and under `k` perhaps a fast one
        // still landing when the sixth did.
        assert!(on_slow.iter().all(|u| stripe.missing_units.contains(u)), "{ack}: the slow units: {stripe:?}");
        assert!(stripe.missing_units.len() <= 3 - least_tolerated, "{ack}: {stripe:?}");
        assert!(stripe.pending_until_ms.is_some() && stripe.degraded_since_ms.is_some(), "{stripe:?}");
        // Readable at once, from the units that landed.
        assert!(data.read(&written.layout, 0..body.len() as u64).await.unwrap() == body);
        assert!(data.pending().status().stripes_in_flight >= 1);
        assert!(data.pending().drain(Duration::from_secs(10)).await, "{ack}: the writer lands the rest");
        let whole = only_stripe(&cluster, &written.layout).await;
        assert!(whole.missing_units.is_empty() && whole.pending_until_ms.is_none(), "{ack}: whole: {whole:?}");
        assert_eq!(whole.placement, stripe.placement, "landed where recorded");
    }
    let status = data.pending().status();
    assert_eq!((status.stripes_acked_early, status.stripes_in_flight, status.units_failed), (2, 0, 0), "{status:?}");
    assert!(status.units_landed >= 2, "{status:?}");
    cluster.shutdown().await;
}

/// A data config whose pending deadline passes quickly (the node timeout bounds it from below).
fn quick_deadline(cluster: &TestCluster) -> DataConfig {
    let mut config = cluster.config("rs-6-3");
    config.node_rpc_timeout_ms = 4_000;
    config.pending.deadline_ms = 5_000;
    config
}

/// A 600 kB body written under `k` by a gateway (`quick_deadline`) with nodes 6-8 slow, which dies
/// right after the acknowledgement: it runs on a runtime of its own, shut down then, so its
/// background unit writes die with it, as with a gateway killed mid-run. What it acknowledged and
/// the stripe as recorded then (the three slow units pending), with the nodes fast again.
async fn write_and_die(cluster: &TestCluster, body: &Bytes) -> (Written, StripeMeta) {
    let slow = [6, 7, 8];
    slow_down(cluster, &slow, 2_000).await;
    let (config, meta, body) = (quick_deadline(cluster), Arc::clone(&cluster.meta), body.clone());
    let written = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let written = runtime.block_on(async {
            let data = ErasureData::new(config, meta).await.unwrap();
            let stream = futures_util::stream::iter([Ok(body)]).boxed();
            data.write_stream(stream, WriteAck::K).await.unwrap()
        });
        runtime.shutdown_background();
        written
    })
    .join()
    .unwrap();
    assert_eq!((written.redundancy.state(), written.redundancy.failures_tolerated), ("pending", 0));
    let acked = only_stripe(cluster, &written.layout).await;
    assert_eq!(acked.missing_units.len(), 3, "the three slow units were pending: {acked:?}");
    assert!(acked.pending_writer.as_deref().is_some_and(|w| w.starts_with("gateway@")), "{acked:?}");
    slow_down(cluster, &slow, 0).await;
    (written, acked)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_dies_before_its_units_land_leaves_them_to_repair_after_the_deadline() {
    let cluster = TestCluster::start(9, 9).await;
    let (written, acked) = write_and_die(&cluster, &pattern(600_000, 2)).await;

    // Another gateway's repair leaves the stripe to its writer until the deadline...
    let mut config = quick_deadline(&cluster);
    config.gateway_id = Some("another".into());
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    repair.scan().await.unwrap();
    let census = repair.status().census.unwrap();
    assert_eq!((census.stripes_pending, census.stripes_under_redundant), (1, 1), "{census:?}");
    assert_eq!(census.bytes_pending, 3 * acked.unit_bytes, "{census:?}");
    assert_eq!(only_stripe(&cluster, &written.layout).await.missing_units, acked.missing_units, "left alone");
    assert!(data.read(&written.layout, 0..600_000).await.unwrap() == pattern(600_000, 2), "readable meanwhile");

    // ...then rebuilds what is still missing.
    let deadline = acked.pending_until_ms.unwrap();
    let wait_ms = deadline.saturating_sub(gateway::data::cluster::membership::unix_now_ms()) + 100;
    tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    repair.scan().await.unwrap();
    let whole = only_stripe(&cluster, &written.layout).await;
    assert!(whole.missing_units.is_empty() && whole.pending_until_ms.is_none(), "rebuilt: {whole:?}");
    // Durable on all nine: any three nodes may go.
    whole_and_survives_three(cluster, &repair, &data, &written, 2).await;
}

/// Repair's census shows nothing short, and the 600 kB body of `pattern_seed` written at `written`
/// still reads back with nodes 0-2 stopped; then the cluster stops.
async fn whole_and_survives_three(
    mut cluster: TestCluster,
    repair: &RepairService,
    data: &ErasureData,
    written: &Written,
    pattern_seed: u64,
) {
    let census = repair.status().census.unwrap();
    assert_eq!((census.stripes_pending, census.stripes_under_redundant), (0, 0), "{census:?}");
    for i in [0, 1, 2] {
        cluster.stop(i).await;
    }
    assert!(data.read(&written.layout, 0..600_000).await.unwrap() == pattern(600_000, pattern_seed));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_restarted_repairs_its_dead_landings_at_once() {
    let cluster = TestCluster::start(9, 9).await;
    let (written, acked) = write_and_die(&cluster, &pattern(600_000, 3)).await;
    // The same gateway (its id) started again: nobody lands the units, so it does not wait.
    let config = quick_deadline(&cluster);
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    repair.scan().await.unwrap();
    assert!(gateway::data::cluster::membership::unix_now_ms() < acked.pending_until_ms.unwrap(), "before the deadline");
    let whole = only_stripe(&cluster, &written.layout).await;
    assert!(whole.missing_units.is_empty() && whole.pending_writer.is_none(), "rebuilt at once: {whole:?}");
    whole_and_survives_three(cluster, &repair, &data, &written, 3).await;
}

/// A graceful stop waits (bounded) for the units of early-acknowledged writes to land: nothing is
/// left pending for repair.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_lands_the_pending_units_first() {
    let cluster = TestCluster::start(9, 9).await;
    let running = ErasureData::start(cluster.config("rs-6-3"), Arc::clone(&cluster.meta)).await.unwrap();
    slow_down(&cluster, &[4, 5], 1000).await;
    let written = write(&running.data, &pattern(600_000, 3), WriteAck::K).await;
    assert_eq!(written.redundancy.state(), "pending");
    running.shutdown().await;
    let stripe = only_stripe(&cluster, &written.layout).await;
    assert!(stripe.missing_units.is_empty() && stripe.pending_until_ms.is_none(), "landed before the stop: {stripe:?}");
    cluster.shutdown().await;
}

/// The straggler rule (unset: on where the code has a copy to spare), under the default `all`: with one node slow, a write is
/// acknowledged once the other eight units landed and the ninth is late, pending and short of one
/// failure, and the writer lands the ninth after; with two slow, or with the rule off, the write
/// waits for every unit. A packed object's replicas are acknowledged the same way, and the seal
/// waits for the late replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_slow_node_does_not_hold_a_write_under_the_straggler_rule() {
    let cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.pending.straggler = None;
    let data = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap();
    slow_down(&cluster, &[8], 1500).await;
    let body = pattern(600_000, 7);
    let began = Instant::now();
    let written = write(&data, &body, WriteAck::All).await;
    let took = began.elapsed();
    assert!(took < Duration::from_millis(1200), "not held by the slow node: {took:?}");
    assert_eq!((written.redundancy.state(), written.redundancy.failures_tolerated), ("pending", 2));
    let stripe = only_stripe(&cluster, &written.layout).await;
    let slow_unit = stripe.placement.iter().position(|node| node.0 == 8).unwrap() as u16;
    assert_eq!(stripe.missing_units, vec![slow_unit], "the slow unit, recorded pending: {stripe:?}");
    assert!(stripe.pending_until_ms.is_some(), "{stripe:?}");
    assert!(data.read(&written.layout, 0..body.len() as u64).await.unwrap() == body, "readable at once");
    assert!(data.pending().drain(Duration::from_secs(10)).await, "the writer lands the late unit");
    let whole = only_stripe(&cluster, &written.layout).await;
    assert!(whole.missing_units.is_empty() && whole.pending_until_ms.is_none(), "whole: {whole:?}");
    assert_eq!(data.pending().status().acked_past_straggler, 1);

    // A small object is packed: three of its four replicas suffice, the seal waits for the fourth.
    slow_down(&cluster, &[8], 0).await;
    let first = data.write(pattern(3_000, 8)).await.unwrap();
    assert_eq!(first.redundancy.state(), "full", "no node slow");
    let Layout::Packed { stripe, .. } = first.layout else { panic!("packed: {:?}", first.layout) };
    // Every replica goes to every parity node: slow the last one.
    let parity_node = cluster.meta.get_stripe(stripe).await.unwrap().placement[8].0 as usize;
    slow_down(&cluster, &[parity_node], 1500).await;
    let small = pattern(3_000, 9);
    let began = Instant::now();
    let packed = data.write(small.clone()).await.unwrap();
    let took = began.elapsed();
    assert!(matches!(packed.layout, Layout::Packed { stripe: s, .. } if s == stripe), "{:?}", packed.layout);
    assert!(took < Duration::from_millis(1200), "not held by the slow replica: {took:?}");
    assert_eq!((packed.redundancy.state(), packed.redundancy.failures_tolerated), ("pending", 2));
    assert!(data.read(&packed.layout, 0..small.len() as u64).await.unwrap() == small, "readable at once");
    data.packer().flush(Duration::from_secs(10)).await.unwrap();
    let sealed = cluster.meta.get_stripe(stripe).await.unwrap();
    assert!(sealed.state == meta::StripeState::Sealed && sealed.missing_units.is_empty(), "{sealed:?}");
    assert_eq!(data.pending().status().acked_past_straggler, 2);

    // Two slow nodes are more than one straggler: every unit is awaited.
    slow_down(&cluster, &[parity_node], 0).await;
    slow_down(&cluster, &[7, 8], 1500).await;
    let began = Instant::now();
    let waited = write(&data, &body, WriteAck::All).await;
    assert!(began.elapsed() >= Duration::from_millis(1400), "two slow nodes are waited for");
    assert_eq!(waited.redundancy.state(), "full");
    cluster.shutdown().await;
}

/// With the straggler rule turned off every write waits for its slowest unit; set on, the rule is refused
/// where the code has no copy to spare, and unset it is off there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_straggler_rule_can_be_turned_off_and_is_refused_beside_a_demand_for_every_unit() {
    let cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    assert_eq!(config.pending.straggler, None, "unset by default: on where the code has a copy to spare");
    config.pending.straggler = Some(false);
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    slow_down(&cluster, &[8], 1000).await;
    let began = Instant::now();
    let written = write(&data, &pattern(600_000, 9), WriteAck::All).await;
    assert!(began.elapsed() >= Duration::from_millis(900), "the slow unit is waited for");
    assert_eq!(written.redundancy.state(), "full");
    config.pending.straggler = Some(true);
    config.ack_min_failures_tolerated = 3;
    let refused = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap_err();
    assert!(refused.to_string().contains("unset pending.straggler"), "{refused}");
    // Unset, it is off where the code has no copy to spare, and the data path starts.
    let mut one_parity = cluster.config("rs-6-1");
    one_parity.pending.straggler = None;
    assert!(one_parity.straggler_wait().is_none());
    let mut unset = cluster.config("rs-6-3");
    unset.pending.straggler = None;
    assert!(unset.straggler_wait().is_some(), "unset, on for RS(6,3)");
    ErasureData::new(one_parity.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    one_parity.pending.straggler = Some(true);
    assert!(ErasureData::new(one_parity, Arc::clone(&cluster.meta)).await.is_err(), "set on, refused");
    cluster.shutdown().await;
}

/// A slow node is given at most `pending.max_late_copies_per_node` late copies at once: the
/// writes past it are acknowledged as fast, their late units dropped and recorded missing (left to
/// repair, not pending on this gateway), so its backlog does not grow with the write rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_node_is_given_a_bounded_backlog_of_late_copies() {
    let cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.pending.straggler = None;
    config.pending.max_late_copies_per_node = 1;
    let data = Arc::new(ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap());
    slow_down(&cluster, &[8], 1500).await;
    let bodies: Vec<Bytes> = (0..3).map(|seed| pattern(600_000, 20 + seed)).collect();
    let began = Instant::now();
    let writes = bodies.iter().map(|body| {
        let data = Arc::clone(&data);
        let body = body.clone();
        tokio::spawn(async move { write(&data, &body, WriteAck::All).await })
    });
    let written: Vec<Written> = futures_util::future::join_all(writes).await.into_iter().map(Result::unwrap).collect();
    let took = began.elapsed();
    assert!(took < Duration::from_millis(1200), "no write held by the slow node: {took:?}");
    let status = data.pending().status();
    assert_eq!((status.late_copies_in_flight, status.late_copies_dropped), (1, 2), "{status:?}");
    let mut states: Vec<&str> = written.iter().map(|w| w.redundancy.state()).collect();
    states.sort_unstable();
    assert_eq!(states, ["degraded", "degraded", "pending"], "one late unit landing, two dropped");
    for (w, body) in written.iter().zip(&bodies) {
        assert_eq!(w.redundancy.failures_tolerated, 2, "{:?}", w.redundancy);
        let stripe = only_stripe(&cluster, &w.layout).await;
        assert_eq!(stripe.missing_units.len(), 1, "{stripe:?}");
        let dropped = w.redundancy.state() == "degraded";
        assert_eq!(stripe.pending_until_ms.is_none(), dropped, "a dropped unit is repair's at once: {stripe:?}");
        assert!(data.read(&w.layout, 0..body.len() as u64).await.unwrap() == *body, "readable at once");
    }
    assert!(data.pending().drain(Duration::from_secs(10)).await, "the admitted late unit lands");
    assert_eq!(data.pending().status().late_copies_in_flight, 0);
    cluster.shutdown().await;
}
