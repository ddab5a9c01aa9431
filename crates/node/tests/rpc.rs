//! End-to-end tests of a node on 127.0.0.1 (unit bytes over the unit stream and over gRPC, the
//! same tests for each): streaming round trips, authentication,
//! probes, cancellation by dropping a future, the service model set at run time, corruption,
//! admission limits, merged reads of several ranges as one task, metrics and shutdown.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use node::{
    ClientError, ConditionalDelete, NodeClient, NodeConfig, RunningNode, ServiceModel, TaskOutcome, UnitRange,
    UnitTransport,
};
use tonic::Code;

const SECRET: &str = "test-secret";

async fn start_with(
    transport: UnitTransport,
    configure: impl FnOnce(&mut NodeConfig),
) -> (RunningNode, tempfile::TempDir, NodeClient) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = NodeConfig {
        node_id: 7,
        listen_addr: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().to_path_buf(),
        cluster_secret: SECRET.into(),
        ..Default::default()
    };
    configure(&mut config);
    let node = node::start(config).await.unwrap();
    let client = NodeClient::connect(&node.rpc_addr().to_string(), SECRET).await.unwrap().with_transport(transport);
    (node, dir, client)
}

/// Runs a test of unit reads and writes once over each transport: they must behave alike.
macro_rules! over_both_transports {
    ($($test:ident),* $(,)?) => {
        $(
            mod $test {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn stream() {
                    super::$test(node::UnitTransport::Stream).await
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn grpc() {
                    super::$test(node::UnitTransport::Grpc).await
                }
            }
        )*
    };
}

over_both_transports!(
    ten_mib_round_trip_ranges_list_delete,
    missing_or_wrong_secret_is_refused_and_writes_nothing,
    probe_reflects_queue_and_dropping_a_read_cancels_it_on_the_node,
    dropping_a_read_in_service_frees_the_node_at_once,
    corrupt_unit_is_never_served_and_is_reported,
    bad_input_gets_clear_errors_and_changes_nothing,
    full_queue_refuses_with_resource_exhausted,
    read_units_round_trips_ranges_in_order_as_one_task,
    read_units_pays_one_overhead_for_all_its_ranges,
    read_units_fails_only_the_missing_and_corrupt_ranges,
    read_units_refuses_bad_requests_whole,
    dropping_read_units_cancels_it_on_the_node,
);

fn pattern(len: usize) -> Bytes {
    (0..len).map(|i| (i % 251) as u8 ^ (i >> 16) as u8).collect::<Vec<u8>>().into()
}

/// `len` bytes unlike those of another `seed`.
fn seeded(len: usize, seed: u8) -> Bytes {
    pattern(len).iter().map(|byte| byte ^ seed).collect::<Vec<u8>>().into()
}

fn range(stripe: u64, unit: u16, offset: u64, length: u64) -> UnitRange {
    UnitRange { stripe, unit, offset, length }
}

/// Flips one data byte of a stored unit, as a failing disk would.
fn corrupt(node: &RunningNode, stripe: u64, unit: u16, at: usize) {
    let path = node.scheduler().store().path_of(node::UnitId::new(stripe, unit));
    let mut raw = std::fs::read(&path).unwrap();
    raw[node::store::HEADER_BYTES as usize + at] ^= 0xff;
    std::fs::write(&path, raw).unwrap();
}

fn slow(overhead_ms: u64) -> ServiceModel {
    ServiceModel { enabled: true, overhead_us: overhead_ms * 1000, ..Default::default() }
}

async fn ten_mib_round_trip_ranges_list_delete(transport: UnitTransport) {
    let (node, _dir, client) = start_with(transport, |_| {}).await;
    let data = pattern(10 << 20);
    let timing = client.write_unit(42, 3, data.clone()).await.unwrap();
    assert_eq!((timing.node_id, timing.bytes, timing.outcome), (7, 10 << 20, TaskOutcome::Ok));
    assert!(timing.enqueue_ns <= timing.start_ns && timing.start_ns <= timing.finish_ns);
    let (read, timing) = client.read_range(42, 3, 0, data.len() as u64).await.unwrap();
    assert!(read == data, "10 MiB read back identical");
    assert_eq!(timing.bytes, 10 << 20);
    let (part, _) = client.read_range(42, 3, 1_000_000, 3_000_000).await.unwrap();
    assert_eq!(part, data.slice(1_000_000..4_000_000));
    let (empty, _) = client.read_range(42, 3, 5, 0).await.unwrap();
    assert!(empty.is_empty());
    client.write_unit(42, 4, Bytes::new()).await.unwrap();
    let listed = client.list_units(None, 0).await.unwrap();
    let listed: Vec<_> = listed.units.iter().map(|u| (u.stripe, u.unit, u.len)).collect();
    assert_eq!(listed, vec![(42, 3, 10 << 20), (42, 4, 0)]);
    let stats = client.stats().await.unwrap();
    assert_eq!((stats.node_id, stats.units, stats.bytes_written), (7, 2, 10 << 20));
    assert_eq!(stats.bytes_read, (10 << 20) + 3_000_000);
    assert!(client.delete_unit(42, 3).await.unwrap());
    assert!(!client.delete_unit(42, 3).await.unwrap());
    let err = client.read_range(42, 3, 0, 1).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::NotFound), "{err}");
    // A delete conditional on the listed generation keeps a unit written since the listing.
    let listed = client.list_units(None, 0).await.unwrap().units[0].generation;
    client.write_unit(42, 4, pattern(10)).await.unwrap();
    assert_eq!(client.delete_unit_if_generation(42, 4, listed).await.unwrap(), ConditionalDelete::Changed);
    assert_eq!(client.read_range(42, 4, 0, 10).await.unwrap().0, pattern(10));
    let current = client.list_units(None, 0).await.unwrap().units[0].generation;
    assert_eq!(client.delete_unit_if_generation(42, 4, current).await.unwrap(), ConditionalDelete::Deleted);
    assert_eq!(client.delete_unit_if_generation(42, 4, current).await.unwrap(), ConditionalDelete::Absent);
    // A batch delete: every unit named goes, those already gone are counted out; a batch that is
    // empty or too long is refused whole.
    for unit in [5, 6, 0x8000] {
        client.write_unit(43, unit, pattern(10)).await.unwrap();
    }
    assert_eq!(client.delete_units(43, &[5, 6, 7, 0x8000]).await.unwrap(), 3);
    assert_eq!(client.delete_units(43, &[5]).await.unwrap(), 0);
    assert!(client.list_units(None, 0).await.unwrap().units.is_empty());
    client.write_unit(43, 5, pattern(10)).await.unwrap();
    let too_many: Vec<u16> = (0..=node::server::MAX_DELETE_UNITS as u16).collect();
    for refused in [&[][..], &too_many[..]] {
        let err = client.delete_units(43, refused).await.unwrap_err();
        assert_eq!(err.code(), Some(Code::InvalidArgument), "{err}");
    }
    assert_eq!(client.read_range(43, 5, 0, 10).await.unwrap().0, pattern(10), "a refused batch deleted nothing");
    node.shutdown().await;
}

async fn missing_or_wrong_secret_is_refused_and_writes_nothing(transport: UnitTransport) {
    let (node, dir, client) = start_with(transport, |_| {}).await;
    let addr = node.rpc_addr().to_string();
    let intruder = NodeClient::connect(&addr, "wrong-secret").await.unwrap().with_transport(transport);
    for result in [
        intruder.write_unit(1, 0, pattern(1000)).await.map(|_| ()),
        intruder.read_range(1, 0, 0, 1).await.map(|_| ()),
        intruder.probe().await.map(|_| ()),
        intruder.delete_unit(1, 0).await.map(|_| ()),
        intruder.set_service_model(&slow(1)).await.map(|_| ()),
    ] {
        assert_eq!(result.unwrap_err().code(), Some(Code::Unauthenticated));
    }
    // No secret at all: the raw generated client.
    let mut raw = node::proto::node_client::NodeClient::connect(format!("http://{addr}")).await.unwrap();
    let status = raw.stats(node::proto::StatsRequest {}).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    let stats = client.stats().await.unwrap();
    assert_eq!((stats.units, stats.bytes_written), (0, 0));
    assert!(!stats.service_model.unwrap().enabled, "model unchanged");
    assert_eq!(std::fs::read_dir(dir.path().join("units")).unwrap().count(), 0, "no file, not even a temp one");
    assert!(matches!(NodeClient::connect(&addr, "").await, Err(ClientError::Invalid(_))));
    node.shutdown().await;
}

async fn probe_reflects_queue_and_dropping_a_read_cancels_it_on_the_node(transport: UnitTransport) {
    let (node, _dir, client) = start_with(transport, |_| {}).await;
    client.write_unit(1, 0, pattern(100_000)).await.unwrap();
    client.set_service_model(&slow(400)).await.unwrap();
    let probe = client.probe().await.unwrap();
    assert_eq!((probe.queued_tasks, probe.in_service_tasks), (0, 0));

    let first = {
        let client = client.clone();
        tokio::spawn(async move { client.read_range(1, 0, 0, 10_000).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = {
        let client = client.clone();
        tokio::spawn(async move { client.read_range(1, 0, 0, 30_000).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let probe = client.probe().await.unwrap();
    assert_eq!((probe.queued_tasks, probe.queued_bytes), (1, 30_000), "{probe:?}");
    assert_eq!((probe.in_service_tasks, probe.in_service_bytes), (1, 10_000), "{probe:?}");

    // The gateway no longer needs the second read: dropping its future resets the stream.
    second.abort();
    let _ = second.await;
    let deadline = Instant::now() + Duration::from_millis(200);
    loop {
        let probe = client.probe().await.unwrap();
        if probe.queued_tasks == 0 {
            assert_eq!(probe.queued_bytes, 0);
            assert_eq!(probe.in_service_tasks, 1, "the first read is still being served");
            break;
        }
        assert!(Instant::now() < deadline, "the node did not cancel the dropped read: {probe:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(client.stats().await.unwrap().tasks_cancelled, 1);
    let (_, timing) = first.await.unwrap().unwrap();
    assert!(timing.finish_ns - timing.start_ns >= 400_000_000);
    assert_eq!(node.scheduler().queue_snapshot(), Default::default());
    node.shutdown().await;
}

/// A read dropped while the node serves it is cut short: the node frees at once, and the read
/// queued behind it starts then, not when the dropped one's emulated service would have ended.
/// (The live experiment's calibration relies on this: `cancel_in_service = true`.)
async fn dropping_a_read_in_service_frees_the_node_at_once(transport: UnitTransport) {
    let (node, _dir, client) = start_with(transport, |_| {}).await;
    client.write_unit(1, 0, pattern(100_000)).await.unwrap();
    client.set_service_model(&slow(2_000)).await.unwrap();
    let in_service = {
        let client = client.clone();
        tokio::spawn(async move { client.read_range(1, 0, 0, 10_000).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let behind = {
        let client = client.clone();
        tokio::spawn(async move { client.read_range(1, 0, 0, 20_000).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let probe = client.probe().await.unwrap();
    assert_eq!((probe.in_service_tasks, probe.in_service_bytes, probe.queued_tasks), (1, 10_000, 1), "{probe:?}");

    let dropped_at = Instant::now();
    in_service.abort();
    let _ = in_service.await;
    // The read behind it now runs its own 2 s; it would have waited about 1.9 s more otherwise.
    let (_, timing) = behind.await.unwrap().unwrap();
    let waited = dropped_at.elapsed();
    assert!(waited < Duration::from_millis(3_500), "the node kept serving the dropped read: {waited:?}");
    assert!(
        timing.start_ns - timing.enqueue_ns < 1_000_000_000,
        "it waited {} ms",
        (timing.start_ns - timing.enqueue_ns) / 1_000_000
    );
    assert_eq!(client.stats().await.unwrap().tasks_cancelled, 1);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_model_set_at_run_time_takes_effect() {
    let (node, _dir, client) = start_with(UnitTransport::Stream, |_| {}).await;
    client.write_unit(2, 1, pattern(500_000)).await.unwrap();
    let time_read = || async {
        let began = Instant::now();
        let (_, timing) = client.read_range(2, 1, 0, 500_000).await.unwrap();
        (began.elapsed(), timing)
    };
    let (fast, _) = time_read().await;
    assert!(fast < Duration::from_millis(30), "no model: {fast:?}");
    // 10 ms + 500 000 B / 20 MB/s = 35 ms.
    let model = ServiceModel { enabled: true, overhead_us: 10_000, rate_bytes_per_s: 20e6, ..Default::default() };
    assert_eq!(client.set_service_model(&model).await.unwrap(), model);
    let (slowed, timing) = time_read().await;
    assert_eq!(timing.emulated_service_ns, 35_000_000);
    assert!(slowed >= Duration::from_millis(35) && slowed < Duration::from_millis(90), "{slowed:?}");
    let probe = client.probe().await.unwrap();
    assert_eq!((probe.service_rate_bytes_per_s, probe.overhead_us), (20e6, 10_000));
    // Ten times slower mid-run, as experiments do.
    client.set_service_model(&ServiceModel { rate_bytes_per_s: 2e6, ..model.clone() }).await.unwrap();
    let (slower, timing) = time_read().await;
    assert_eq!(timing.emulated_service_ns, 260_000_000);
    assert!(slower >= Duration::from_millis(260) && slower < Duration::from_millis(340), "{slower:?}");
    let bad = ServiceModel { rate_bytes_per_s: -5.0, ..model };
    let err = client.set_service_model(&bad).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument));
    assert_eq!(client.stats().await.unwrap().service_model.unwrap().rate_bytes_per_s, 2e6, "bad model not installed");
    node.shutdown().await;
}

async fn corrupt_unit_is_never_served_and_is_reported(transport: UnitTransport) {
    let (node, _dir, client) = start_with(transport, |_| {}).await;
    let data = pattern(300_000);
    client.write_unit(5, 2, data.clone()).await.unwrap();
    let path = node.scheduler().store().path_of(node::UnitId::new(5, 2));
    let mut raw = std::fs::read(&path).unwrap();
    raw[node::store::HEADER_BYTES as usize + 70_000] ^= 0xff; // block 1
    std::fs::write(&path, raw).unwrap();
    let err = client.read_range(5, 2, 0, 300_000).await.unwrap_err();
    assert!(err.is_corrupt(), "{err}");
    let (head, _) = client.read_range(5, 2, 0, 65_536).await.unwrap();
    assert_eq!(head, data.slice(..65_536), "block 0 verifies on its own");
    let stats = client.stats().await.unwrap();
    assert_eq!(stats.corrupt_units.iter().map(|u| (u.stripe, u.unit)).collect::<Vec<_>>(), vec![(5, 2)]);
    assert_eq!(stats.tasks_failed, 1);
    // Repair rewrites the unit: served again, no longer listed.
    client.write_unit(5, 2, data.clone()).await.unwrap();
    assert_eq!(client.read_range(5, 2, 0, 300_000).await.unwrap().0, data);
    assert!(client.stats().await.unwrap().corrupt_units.is_empty());
    node.shutdown().await;
}

async fn bad_input_gets_clear_errors_and_changes_nothing(transport: UnitTransport) {
    let (node, _dir, client) = start_with(transport, |config| config.max_unit_bytes = 1 << 20).await;
    client.write_unit(3, 0, pattern(1000)).await.unwrap();
    let code = |result: Result<(), ClientError>| result.unwrap_err().code();
    assert_eq!(code(client.read_range(3, 0, 900, 101).await.map(|_| ())), Some(Code::OutOfRange));
    assert_eq!(code(client.read_range(3, 1, 0, 1).await.map(|_| ())), Some(Code::NotFound));
    assert_eq!(code(client.write_unit(3, 1, pattern((1 << 20) + 1)).await.map(|_| ())), Some(Code::InvalidArgument));
    // Declared 1000 bytes, sent 500.
    let short = tokio_stream::iter(vec![pattern(500)]);
    assert_eq!(code(client.write_unit_stream(3, 2, 1000, short).await.map(|_| ())), Some(Code::InvalidArgument));
    // Declared 10 bytes, sent 20.
    let long = tokio_stream::iter(vec![pattern(20)]);
    assert_eq!(code(client.write_unit_stream(3, 0, 10, long).await.map(|_| ())), Some(Code::InvalidArgument));
    let stats = client.stats().await.unwrap();
    assert_eq!(stats.units, 1);
    assert_eq!(client.read_range(3, 0, 0, 1000).await.unwrap().0, pattern(1000), "original intact");
    node.shutdown().await;
}

async fn full_queue_refuses_with_resource_exhausted(transport: UnitTransport) {
    let (node, _dir, client) = start_with(transport, |config| config.max_queued_tasks = 1).await;
    client.write_unit(4, 0, pattern(1000)).await.unwrap();
    client.set_service_model(&slow(300)).await.unwrap();
    let mut reads = Vec::new();
    for _ in 0..2 {
        let client = client.clone();
        reads.push(tokio::spawn(async move { client.read_range(4, 0, 0, 100).await }));
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    // One in service, one waiting: the next is refused.
    let err = client.read_range(4, 0, 0, 100).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::ResourceExhausted), "{err}");
    for read in reads {
        read.await.unwrap().unwrap();
    }
    assert_eq!(client.stats().await.unwrap().tasks_rejected, 1);
    node.shutdown().await;
}

async fn read_units_round_trips_ranges_in_order_as_one_task(transport: UnitTransport) {
    // Small gRPC chunks, so that one range spans several messages.
    let (node, _dir, client) = start_with(transport, |config| config.read_chunk_bytes = 64 << 10).await;
    let (a, b, c) = (seeded(300_000, 1), seeded(70_000, 2), seeded(1000, 3));
    client.write_unit(10, 0, a.clone()).await.unwrap();
    client.write_unit(10, 1, b.clone()).await.unwrap();
    client.write_unit(11, 5, c.clone()).await.unwrap();
    let before = client.stats().await.unwrap();
    let asked = [
        (range(10, 1, 5, 60_000), b.slice(5..60_005)),
        (range(11, 5, 0, 1000), c.clone()),
        (range(10, 0, 100_000, 200_000), a.slice(100_000..300_000)),
        (range(10, 1, 7, 0), Bytes::new()),
        (range(10, 0, 0, 300_000), a.clone()),
        (range(10, 1, 5, 60_000), b.slice(5..60_005)),
    ];
    let ranges: Vec<UnitRange> = asked.iter().map(|(range, _)| *range).collect();
    let (results, timing) = client.read_units(&ranges).await.unwrap();
    assert_eq!(results.len(), asked.len());
    for (k, (result, (_, expected))) in results.iter().zip(&asked).enumerate() {
        assert!(result.as_ref().unwrap() == expected, "range {k} differs");
    }
    let total: u64 = ranges.iter().map(|range| range.length).sum();
    assert_eq!((timing.node_id, timing.bytes, timing.outcome), (7, total, TaskOutcome::Ok));
    assert!(timing.enqueue_ns <= timing.start_ns && timing.start_ns <= timing.finish_ns);
    let after = client.stats().await.unwrap();
    assert_eq!(after.tasks_completed - before.tasks_completed, 1, "one task for every range");
    assert_eq!(after.bytes_read - before.bytes_read, total);
    let (_, next) = client.read_range(11, 5, 0, 1).await.unwrap();
    assert_eq!(next.task_id, timing.task_id + 1, "the merged read took one task id");
    node.shutdown().await;
}

async fn read_units_pays_one_overhead_for_all_its_ranges(transport: UnitTransport) {
    let (node, _dir, client) = start_with(transport, |_| {}).await;
    client.write_unit(12, 0, pattern(400_000)).await.unwrap();
    client.write_unit(12, 1, pattern(100_000)).await.unwrap();
    // A large per-task overhead and a fast transfer: the overhead dominates every task.
    let overhead_ns = 20_000_000;
    let model =
        ServiceModel { enabled: true, overhead_us: overhead_ns / 1000, rate_bytes_per_s: 1e9, ..Default::default() };
    client.set_service_model(&model).await.unwrap();
    let ranges = [
        range(12, 0, 0, 100_000),
        range(12, 1, 0, 100_000),
        range(12, 0, 200_000, 100_000),
        range(12, 0, 300_000, 100_000),
    ];
    let (results, timing) = client.read_units(&ranges).await.unwrap();
    assert!(results.iter().all(Result::is_ok));
    // Measured by the node's own account of the task, not by the wall clock.
    assert!(
        (overhead_ns..2 * overhead_ns).contains(&timing.emulated_service_ns),
        "one overhead, not four: {} ns",
        timing.emulated_service_ns
    );
    let single_read_of_the_sum = model.deterministic_service_time(400_000).as_nanos() as u64;
    assert_eq!(timing.emulated_service_ns, single_read_of_the_sum, "as one read of 400 000 bytes");
    let mut separate_ns = 0;
    for range in &ranges {
        separate_ns += client
            .read_range(range.stripe, range.unit, range.offset, range.length)
            .await
            .unwrap()
            .1
            .emulated_service_ns;
    }
    assert!(separate_ns >= 4 * overhead_ns, "four single reads pay four overheads: {separate_ns} ns");
    node.shutdown().await;
}

async fn read_units_fails_only_the_missing_and_corrupt_ranges(transport: UnitTransport) {
    let (node, _dir, client) = start_with(transport, |_| {}).await;
    let (good, bad) = (seeded(100_000, 4), seeded(300_000, 5));
    client.write_unit(13, 0, good.clone()).await.unwrap();
    client.write_unit(13, 1, bad.clone()).await.unwrap();
    corrupt(&node, 13, 1, 70_000); // block 1
    let before = client.stats().await.unwrap();
    let ranges = [
        range(13, 0, 0, 1000),
        range(13, 2, 0, 10),
        range(13, 1, 0, 65_536),
        range(13, 1, 70_000, 10_000),
        range(13, 0, 99_000, 2000),
        range(13, 0, 1000, 1000),
    ];
    let (results, timing) = client.read_units(&ranges).await.unwrap();
    assert_eq!(results[0].as_ref().unwrap(), &good.slice(..1000));
    let missing = results[1].as_ref().unwrap_err();
    assert!(missing.is_not_found(), "{missing}");
    assert_eq!(results[2].as_ref().unwrap(), &bad.slice(..65_536), "block 0 verifies on its own");
    let corrupt = results[3].as_ref().unwrap_err();
    assert!(corrupt.is_corrupt(), "{corrupt}");
    assert_eq!(results[4].as_ref().unwrap_err().code(), Some(Code::OutOfRange));
    assert_eq!(results[5].as_ref().unwrap(), &good.slice(1000..2000));
    let total: u64 = ranges.iter().map(|range| range.length).sum();
    assert_eq!((timing.bytes, timing.outcome), (total, TaskOutcome::Corrupt));
    let after = client.stats().await.unwrap();
    assert_eq!(after.corrupt_units.iter().map(|u| (u.stripe, u.unit)).collect::<Vec<_>>(), vec![(13, 1)]);
    assert_eq!(after.tasks_failed - before.tasks_failed, 1, "one task, with failed ranges");
    assert_eq!(after.bytes_read - before.bytes_read, 1000 + 65_536 + 1000, "the bytes served");
    node.shutdown().await;
}

async fn read_units_refuses_bad_requests_whole(transport: UnitTransport) {
    let (node, _dir, client) = start_with(transport, |_| {}).await;
    client.write_unit(14, 0, pattern(1000)).await.unwrap();
    let too_many = vec![range(14, 0, 0, 1); node::MAX_RANGES_PER_READ + 1];
    let too_large = [range(14, 9, 0, node::MAX_MERGED_READ_BYTES), range(14, 9, 0, 1)];
    for ranges in [&[][..], &too_many, &too_large] {
        let refused = client.read_units(ranges).await.map(|_| ()).unwrap_err();
        assert_eq!(refused.code(), Some(Code::InvalidArgument), "{} ranges: {refused}", ranges.len());
    }
    // The client still reads (over the same connection, or a fresh one after the node closed it).
    let (results, _) = client.read_units(&[range(14, 0, 0, 1000)]).await.unwrap();
    assert_eq!(results[0].as_ref().unwrap(), &pattern(1000));
    let stats = client.stats().await.unwrap();
    assert_eq!((stats.tasks_completed, stats.tasks_failed, stats.tasks_rejected), (2, 0, 0), "nothing queued");
    node.shutdown().await;
}

async fn dropping_read_units_cancels_it_on_the_node(transport: UnitTransport) {
    let (node, _dir, client) = start_with(transport, |_| {}).await;
    client.write_unit(15, 0, pattern(100_000)).await.unwrap();
    client.set_service_model(&slow(400)).await.unwrap();
    let first = {
        let client = client.clone();
        tokio::spawn(async move { client.read_range(15, 0, 0, 10_000).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let merged = {
        let client = client.clone();
        tokio::spawn(async move { client.read_units(&[range(15, 0, 0, 20_000), range(15, 0, 50_000, 10_000)]).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let probe = client.probe().await.unwrap();
    assert_eq!((probe.queued_tasks, probe.queued_bytes), (1, 30_000), "one task of the sum: {probe:?}");
    merged.abort();
    let _ = merged.await;
    let deadline = Instant::now() + Duration::from_millis(200);
    // Bounded by the deadline.
    while client.probe().await.unwrap().queued_tasks > 0 {
        assert!(Instant::now() < deadline, "the node did not cancel the dropped merged read");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The client's timeout gives up the same way.
    let impatient = client.clone().with_timeout(Duration::from_millis(50));
    let timed_out = impatient.read_units(&[range(15, 0, 0, 1)]).await.map(|_| ()).unwrap_err();
    assert!(matches!(timed_out, ClientError::Timeout { .. }), "{timed_out}");
    let (_, timing) = first.await.unwrap().unwrap();
    assert!(timing.finish_ns - timing.start_ns >= 400_000_000);
    let stats = client.stats().await.unwrap();
    assert_eq!((stats.tasks_cancelled, stats.tasks_completed), (2, 2), "the write and the first read");
    assert_eq!(node.scheduler().queue_snapshot(), Default::default());
    node.shutdown().await;
}

/// gRPC carries a unit index in 32 bits: one past 16 refuses the whole merged read before queueing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_units_over_grpc_refuses_a_unit_index_past_16_bits() {
    let (node, _dir, client) = start_with(UnitTransport::Grpc, |_| {}).await;
    let mut raw = node::proto::node_client::NodeClient::connect(format!("http://{}", node.rpc_addr())).await.unwrap();
    let ranges = vec![
        node::proto::UnitRange { stripe: 1, unit: 0, offset: 0, length: 1 },
        node::proto::UnitRange { stripe: 1, unit: 65_536, offset: 0, length: 1 },
    ];
    let mut request = tonic::Request::new(node::proto::ReadUnitsRequest { ranges });
    request.metadata_mut().insert(node::rpc::SECRET_METADATA_KEY, SECRET.parse().unwrap());
    let status = raw.read_units(request).await.map(|_| ()).unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status}");
    let stats = client.stats().await.unwrap();
    assert_eq!((stats.tasks_completed, stats.tasks_failed, stats.tasks_rejected), (0, 0, 0), "nothing queued");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_serves_prometheus_text() {
    let (node, _dir, client) =
        start_with(UnitTransport::Stream, |config| config.metrics_addr = Some("127.0.0.1:0".parse().unwrap())).await;
    client.write_unit(6, 0, pattern(4096)).await.unwrap();
    client.read_range(6, 0, 0, 4096).await.unwrap();
    client.probe().await.unwrap();
    let addr = node.metrics_addr().unwrap();
    let body = common::metrics_page(addr).await;
    assert!(body.starts_with("HTTP/1.0 200") || body.starts_with("HTTP/1.1 200"), "{body}");
    for name in [
        "lowtail_node_rpc_duration_seconds_bucket",
        "lowtail_node_queued_bytes",
        "lowtail_node_read_bytes_total",
        "lowtail_node_written_bytes_total",
        "lowtail_node_tasks_total",
    ] {
        assert!(body.contains(name), "{name} missing from:\n{body}");
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_until_shutdown_and_data_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    // Pick a free port for the first run and reuse it for the second.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = NodeConfig {
        listen_addr: format!("127.0.0.1:{port}").parse().unwrap(),
        data_dir: dir.path().to_path_buf(),
        cluster_secret: SECRET.into(),
        ..Default::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(node::run(config.clone(), async {
        let _ = stopped.await;
    }));
    let client = connect_retrying(port).await;
    client.write_unit(8, 8, pattern(70_000)).await.unwrap();
    assert_eq!(client.read_range(8, 8, 0, 70_000).await.unwrap().0, pattern(70_000));
    stop.send(()).unwrap();
    // Shutdown does not wait for the client's idle unit-stream connection: it closes it.
    tokio::time::timeout(Duration::from_secs(5), server).await.unwrap().unwrap().unwrap();

    let node = node::start(config).await.unwrap();
    // The same client: its pooled connections are to the stopped process and are replaced.
    assert_eq!(client.read_range(8, 8, 0, 70_000).await.unwrap().0, pattern(70_000));
    client.write_unit(8, 9, pattern(10)).await.unwrap();
    node.shutdown().await;
    assert!(node::start(NodeConfig { cluster_secret: String::new(), ..Default::default() }).await.is_err());
}

async fn connect_retrying(port: u16) -> NodeClient {
    for _ in 0..100 {
        if let Ok(client) = NodeClient::connect(&format!("127.0.0.1:{port}"), SECRET).await {
            return client;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("node on port {port} never came up");
}
