//! End-to-end tests of latency classes on a node on 127.0.0.1: reserved shares give each class
//! its share of the emulated rate (service times in inverse ratio of the shares, class 0 ahead
//! under contention, class 1 never starved); the class travels with every call that creates tasks
//! over both transports and comes back in timings, probes, stats and metrics; an unknown class is
//! refused and changes nothing; `SetClassScheduling` round-trips and refuses a bad discipline.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use node::{ClassId, ClassScheduling, NodeClient, NodeConfig, RunningNode, ServiceModel, UnitRange, UnitTransport};
use tonic::Code;

const SECRET: &str = "test-secret";

async fn start_with(configure: impl FnOnce(&mut NodeConfig)) -> (RunningNode, tempfile::TempDir, NodeClient) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = NodeConfig {
        node_id: 4,
        listen_addr: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().to_path_buf(),
        cluster_secret: SECRET.into(),
        ..Default::default()
    };
    configure(&mut config);
    let node = node::start(config).await.unwrap();
    let client = NodeClient::connect(&node.rpc_addr().to_string(), SECRET).await.unwrap();
    (node, dir, client)
}

fn pattern(len: usize) -> Bytes {
    (0..len).map(|i| (i % 251) as u8).collect::<Vec<u8>>().into()
}

/// The `q` quantile of `samples` (nearest rank).
fn quantile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
    samples[rank - 1]
}

/// Completed tasks and total service ns of `class` in a stats answer (zero when not listed).
fn class_stats(stats: &node::proto::StatsResponse, class: u32) -> (u64, u64) {
    stats
        .classes
        .iter()
        .find(|entry| entry.class == class)
        .map_or((0, 0), |entry| (entry.tasks_completed, entry.service_total_ns))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_shares_order_the_classes_and_starve_none() {
    // Large enough that a timer firing a few ms late barely moves the ratio.
    const UNIT_BYTES: u64 = 400_000;
    const LOOPS: usize = 3;
    const READS_PER_LOOP: usize = 6;
    let shares = vec![0.7, 0.3];
    let (node, _dir, client) = start_with(|config| {
        // 0.5 ms + 400 kB / (share × 10 MB/s): 57.6 ms for class 0, 133.8 ms for class 1.
        config.service_model =
            ServiceModel { enabled: true, overhead_us: 500, rate_bytes_per_s: 10e6, ..Default::default() };
        config.class_scheduling = ClassScheduling::Reserved { shares: shares.clone() };
    })
    .await;
    client.write_unit(1, 0, pattern(UNIT_BYTES as usize)).await.unwrap();
    let before = client.stats().await.unwrap();
    let clients = [client.clone(), client.clone().with_class(ClassId(1))];
    let began = Instant::now();
    // Each class keeps LOOPS reads outstanding: both are backlogged at once (contention).
    let mut loops = Vec::new();
    for (class, client) in clients.iter().enumerate() {
        for _ in 0..LOOPS {
            let client = client.clone();
            loops.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                for _ in 0..READS_PER_LOOP {
                    let sent = Instant::now();
                    let (data, timing) = client.read_range(1, 0, 0, UNIT_BYTES).await.unwrap();
                    latencies.push(sent.elapsed());
                    assert_eq!(data.len() as u64, UNIT_BYTES);
                    assert_eq!(timing.class, ClassId(class as u8), "the task ran in the class asked for");
                }
                (class, latencies, began.elapsed())
            }));
        }
    }
    let mut latencies = [Vec::new(), Vec::new()];
    let mut done_after = [Duration::ZERO; 2];
    for handle in loops {
        // Every read of both classes succeeded (the unwraps above): class 1 is not starved.
        let (class, mut samples, after) = handle.await.unwrap();
        latencies[class].append(&mut samples);
        done_after[class] = done_after[class].max(after);
    }
    let after = client.stats().await.unwrap();
    let reads = (LOOPS * READS_PER_LOOP) as u64;
    let mut mean_service_ms = [0.0; 2];
    for (class, mean_ms) in mean_service_ms.iter_mut().enumerate() {
        let (tasks_before, ns_before) = class_stats(&before, class as u32);
        let (tasks, ns) = class_stats(&after, class as u32);
        assert_eq!(tasks - tasks_before, reads, "class {class}: every read completed");
        *mean_ms = (ns - ns_before) as f64 / (tasks - tasks_before) as f64 / 1e6;
    }
    let ratio = mean_service_ms[1] / mean_service_ms[0];
    let inverse_shares = shares[0] / shares[1];
    println!(
        "mean service ms {mean_service_ms:?} (ratio {ratio:.3}, inverse shares {inverse_shares:.3}); \
         done after {done_after:?}"
    );
    assert!(
        (ratio / inverse_shares - 1.0).abs() < 0.1,
        "mean service times {mean_service_ms:?} ms: ratio {ratio}, inverse shares {inverse_shares}"
    );
    let (p50, p99): (Vec<_>, Vec<_>) =
        latencies.iter_mut().map(|samples| (quantile(samples, 0.5), quantile(samples, 0.99))).unzip();
    println!("latency p50 {p50:?}, p99 {p99:?}");
    assert!(p50[0] < p50[1] && p99[0] < p99[1], "class 0 ahead: p50 {p50:?}, p99 {p99:?}");
    assert!(done_after[0] < done_after[1], "class 0 was not slowed to class 1's pace: {done_after:?}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_class_travels_with_every_task_over_both_transports() {
    let (node, _dir, client) = start_with(|config| config.metrics_addr = Some("127.0.0.1:0".parse().unwrap())).await;
    // FCFS, the default, serves every class alike.
    for (class, transport) in [(1u8, UnitTransport::Stream), (2, UnitTransport::Grpc)] {
        let classed = client.clone().with_transport(transport).with_class(ClassId(class));
        assert_eq!(classed.class(), ClassId(class));
        let stripe = u64::from(class);
        let written = classed.write_unit(stripe, 0, pattern(5000)).await.unwrap();
        let (_, read) = classed.read_range(stripe, 0, 0, 5000).await.unwrap();
        let range = UnitRange { stripe, unit: 0, offset: 10, length: 100 };
        let (_, merged) = classed.read_units(&[range, range]).await.unwrap();
        for timing in [written, read, merged] {
            assert_eq!(timing.class, ClassId(class), "{transport:?}");
        }
    }
    // A reconstruction session's local reads run in the class of its call.
    let session = node::proto::ReconstructRequest {
        session: vec![9u8; 16].into(),
        source: 0,
        unit: Some(node::proto::UnitRef { stripe: 1, unit: 0 }),
        range_offset: 0,
        range_bytes: 5000,
        packet_bytes: 5000,
        steps: vec![node::proto::SessionStep {
            packet: 0,
            reads_local: true,
            coefficient: 1,
            inputs: 0,
            to_addr: String::new(),
            to_node: 0,
        }],
        timeout_ms: 5000,
        store: None,
    };
    let mut answers = client.clone().with_class(ClassId(3)).reconstruct(session).await.unwrap();
    let mut packets = 0;
    // Bounded by the session: one packet, then its last message.
    while let Some(answer) = answers.message().await.unwrap() {
        if answer.done.is_some() {
            break;
        }
        assert_eq!(answer.data, pattern(5000), "coefficient 1: the packet itself");
        packets += 1;
    }
    assert_eq!(packets, 1);
    let stats = client.stats().await.unwrap();
    let completed: Vec<_> = stats.classes.iter().map(|entry| (entry.class, entry.tasks_completed)).collect();
    assert_eq!(completed, vec![(1, 3), (2, 3), (3, 1)], "per class: write, read, merged read; the session's read");
    assert!(stats.classes.iter().all(|entry| entry.service_total_ns > 0 && entry.bytes_completed > 0));
    let probe = client.probe().await.unwrap();
    let seen: Vec<_> = probe.classes.iter().map(|state| (state.class.0, state.queued_tasks)).collect();
    assert_eq!(seen, vec![(1, 0), (2, 0), (3, 0)], "every class that has had a task, none waiting");
    let addr = node.metrics_addr().unwrap();
    let body = common::metrics_page(addr).await;
    for series in [
        "lowtail_node_class_queued_bytes{node=\"4\",class=\"2\"}",
        "lowtail_node_class_queued_tasks{node=\"4\",class=\"1\"}",
        "lowtail_node_class_service_seconds_bucket{node=\"4\",class=\"3\"",
    ] {
        assert!(body.contains(series), "{series} missing from:\n{body}");
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_class_is_refused_and_changes_nothing() {
    let (node, dir, client) =
        start_with(|config| config.class_scheduling = ClassScheduling::Reserved { shares: vec![1.0] }).await;
    let range = UnitRange { stripe: 1, unit: 0, offset: 0, length: 10 };
    for transport in [UnitTransport::Stream, UnitTransport::Grpc] {
        // 8 is past the classes, 15 the most a unit-stream header names, 200 more than it can;
        // 1 is a class without a share under the discipline in force.
        for (class, why) in [(8u8, "unknown"), (15, "unknown"), (200, "unknown"), (1, "has no share")] {
            let classed = client.clone().with_transport(transport).with_class(ClassId(class));
            let session = node::proto::ReconstructRequest::default();
            for (call, result) in [
                ("write", classed.write_unit(1, 0, pattern(3 << 20)).await.map(|_| ())),
                ("small write", classed.write_unit(1, 1, pattern(10)).await.map(|_| ())),
                ("read", classed.read_range(1, 0, 0, 10).await.map(|_| ())),
                ("merged read", classed.read_units(&[range]).await.map(|_| ())),
                ("session", classed.reconstruct(session).await.map(|_| ())),
            ] {
                let error = result.unwrap_err();
                assert_eq!(error.code(), Some(Code::InvalidArgument), "{transport:?} class {class} {call}: {error}");
                let message = error.to_string();
                assert!(message.contains(&format!("class {class}")) && message.contains(why), "{message}");
            }
        }
        // The connection that carried the refusals still serves.
        let default = client.clone().with_transport(transport);
        assert!(default.read_range(1, 0, 0, 10).await.unwrap_err().is_not_found(), "nothing was written");
    }
    // Unparsable metadata: the raw generated client.
    let mut raw = node::proto::node_client::NodeClient::connect(format!("http://{}", node.rpc_addr())).await.unwrap();
    for value in ["abc", "-1", "1.5", ""] {
        let mut request =
            tonic::Request::new(node::proto::ReadRangeRequest { stripe: 1, unit: 0, offset: 0, length: 1 });
        request.metadata_mut().insert("x-lowtail-secret", SECRET.parse().unwrap());
        request.metadata_mut().insert("x-lowtail-class", value.parse().unwrap());
        let status = raw.read_range(request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{value:?}: {status:?}");
        assert!(status.message().contains("x-lowtail-class"), "{status:?}");
    }
    let stats = client.stats().await.unwrap();
    assert_eq!(
        (stats.units, stats.tasks_completed, stats.tasks_failed, stats.tasks_rejected, stats.bytes_written),
        (0, 0, 0, 0, 0)
    );
    assert!(stats.classes.is_empty(), "no class has had a task: {:?}", stats.classes);
    assert_eq!(stats.sessions_started, 0, "no session was opened");
    assert!(client.probe().await.unwrap().classes.is_empty());
    let files = std::fs::read_dir(dir.path().join("units")).unwrap().count();
    assert_eq!(files, 0, "no unit file, not even a temp one");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_class_scheduling_round_trips_and_a_bad_one_is_refused() {
    let (node, _dir, client) = start_with(|_| {}).await;
    let in_force =
        |stats: node::proto::StatsResponse| ClassScheduling::try_from(stats.class_scheduling.unwrap()).unwrap();
    assert_eq!(in_force(client.stats().await.unwrap()), ClassScheduling::Fcfs, "the default");
    let weighted = ClassScheduling::WeightedSharing { weights: vec![1.0, 0.4] };
    assert_eq!(client.set_class_scheduling(&weighted).await.unwrap(), weighted);
    assert_eq!(in_force(client.stats().await.unwrap()), weighted);
    for bad in [
        ClassScheduling::Reserved { shares: vec![0.7, 0.4] },
        ClassScheduling::Reserved { shares: vec![] },
        ClassScheduling::WeightedSharing { weights: vec![1.0, -1.0] },
        ClassScheduling::WeightedSharing { weights: vec![f64::NAN] },
        ClassScheduling::WeightedSharing { weights: vec![0.0, 0.0] },
        ClassScheduling::WeightedSharing { weights: vec![1.0; 9] },
    ] {
        let error = client.set_class_scheduling(&bad).await.unwrap_err();
        assert_eq!(error.code(), Some(Code::InvalidArgument), "{bad:?}: {error}");
        assert!(error.to_string().contains("class scheduling"), "{error}");
        assert_eq!(in_force(client.stats().await.unwrap()), weighted, "a refused discipline changes nothing");
    }
    // Class 2 has no weight under [1, 0.4]; under Reserved [0.5, 0.2, 0.3] it does.
    let classed = client.clone().with_class(ClassId(2));
    assert_eq!(classed.write_unit(1, 0, pattern(10)).await.unwrap_err().code(), Some(Code::InvalidArgument));
    let reserved = ClassScheduling::Reserved { shares: vec![0.5, 0.2, 0.3] };
    assert_eq!(client.set_class_scheduling(&reserved).await.unwrap(), reserved);
    assert_eq!(classed.write_unit(1, 0, pattern(10)).await.unwrap().class, ClassId(2));
    // Behind the cluster secret like every call.
    let intruder = NodeClient::connect(&node.rpc_addr().to_string(), "wrong-secret").await.unwrap();
    let refused = intruder.set_class_scheduling(&ClassScheduling::Fcfs).await.unwrap_err();
    assert_eq!(refused.code(), Some(Code::Unauthenticated));
    assert_eq!(client.set_class_scheduling(&ClassScheduling::Fcfs).await.unwrap(), ClassScheduling::Fcfs);
    node.shutdown().await;
}
