//! Dataflows run by real storage nodes (issue 32): every loss pattern of RS(6,3) and LRC(6,2,2), a
//! sample of RS(10,4)'s, every method (traditional, PPR, ECPipe, APLS as chain and star, the direct
//! methods), packets that do and do not divide the range: the rebuilt bytes equal the lost unit's.
//! With `kind = "apls"` a GET with a node down reads back identical, every survivor running a
//! session; dropping the read frees every session; killing a source mid-read still serves the GET;
//! repair rebuilds a lost unit straight into its new node, byte for byte. With `kind = "auto"` the
//! probed rates decide: a whole lost unit is rebuilt by the nodes, a small range at the gateway.

mod data_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use codec::ErasureCode;
use data_support::{TestCluster, pattern};
use execution::reconstruct::{Assignment, Dataflow, Inner, Method};
use gateway::data::cluster::membership::{Membership, unix_now_ms};
use gateway::data::read::node_dataflow::{self, Rebuild, Source};
use gateway::data::services::repair::RepairService;
use gateway::data::{DataConfig, ErasureData, MembershipConfig, ObjectData, RepairConfig};
use meta::{Layout, StripeMeta};
use node::ServiceModel;
use policy::reconstruct::{ReconstructKind, ReconstructSettings};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

fn apls(config: DataConfig) -> DataConfig {
    let reconstruct = ReconstructSettings { kind: ReconstructKind::Apls, packet_bytes: 64 << 10, ..Default::default() };
    DataConfig { reconstruct, ..config }
}

/// One object of `size` bytes; its first stripe and that stripe's units as the nodes hold them.
async fn one_stripe(cluster: &TestCluster, data: &ErasureData, size: usize) -> (StripeMeta, Vec<Bytes>) {
    let written = data.write(pattern(size, 77)).await.unwrap();
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    let Layout::Striped { segments } = &written.layout else { panic!("striped") };
    let stripe = cluster.meta.get_stripe(segments[0].stripe).await.unwrap();
    let mut units = Vec::new();
    for (unit, node) in stripe.placement.iter().enumerate() {
        let client = cluster.client(node.0 as usize).await;
        let (bytes, _) = client.read_range(stripe.id.0, unit as u16, 0, stripe.unit_bytes).await.unwrap();
        units.push(bytes);
    }
    (stripe, units)
}

/// The methods over `survivors` (k of them, or all of them for APLS and the segmented read) with
/// their packet sizes: one that divides the range, one that does not.
fn methods(k: u16, survivors: usize, range: u64) -> Vec<(Method, u32, usize)> {
    let q = survivors as u16;
    let divides = (range / 4).max(1) as u32;
    let odd = (range / 3 + 1).max(1) as u32;
    let mut methods = vec![
        (Method::Traditional, odd, usize::from(k)),
        (Method::Ppr, divides, usize::from(k)),
        (Method::Ecpipe, odd, usize::from(k)),
        (Method::GatewayDecode, divides, usize::from(k)),
    ];
    if q > k {
        let chain = Method::Apls { q, inner: Inner::Chain, assignment: Assignment::RoundRobin };
        let star = Method::Apls { q, inner: Inner::Star, assignment: Assignment::Contiguous };
        methods.push((chain, divides, survivors));
        methods.push((star, odd, survivors));
        methods.push((Method::Segmented { q, assignment: Assignment::RoundRobin }, odd, survivors));
    }
    methods
}

/// Rebuilds `target` of `stripe` by every method from the units not in `lost` (for an LRC, from
/// its cheapest surviving recovery set), over a sub-range; checks the bytes.
async fn rebuild_every_way(
    data: &ErasureData,
    code: &dyn ErasureCode,
    stripe: &StripeMeta,
    units: &[Bytes],
    lost: &[usize],
    mds: bool,
) -> usize {
    let nodes = data.io().cluster().node_map().await.unwrap();
    let target = lost[0];
    let alive: Vec<usize> = (0..units.len()).filter(|u| !lost.contains(u)).collect();
    let survivors = if mds {
        alive
    } else {
        let sets = code.recovery_sets(target, 32).unwrap();
        let Some(set) = sets.into_iter().find(|set| set.iter().all(|u| alive.contains(u))) else { return 0 };
        set
    };
    let k = if mds { code.data_units() as u16 } else { survivors.len() as u16 };
    let offset = 1_000u64;
    let range = units[target].len() as u64 - offset - 7;
    let mut runs = 0;
    for (method, packet, count) in methods(k, survivors.len(), range) {
        let sources: Vec<Source> = survivors[..count]
            .iter()
            .map(|&unit| Source { unit, node: nodes[&stripe.placement[unit]].clone() })
            .collect();
        let flow = Dataflow::build(method, k, range, packet).unwrap();
        let rebuild = Rebuild { code, stripe: stripe.id, target, offset, flow: &flow, sources: &sources };
        let rebuilt =
            node_dataflow::run(data.io(), rebuild).await.unwrap_or_else(|e| panic!("{method:?} lost {lost:?}: {e}"));
        let expected = units[target].slice(offset as usize..(offset + range) as usize);
        assert!(rebuilt == expected, "{method:?} with packets of {packet} B rebuilt unit {target}, lost {lost:?}");
        runs += 1;
    }
    runs
}

/// Every set of 1..=m lost units (or `sample` of them, seeded) with a decodable rest.
fn loss_patterns(code: &dyn ErasureCode, sample: Option<usize>) -> Vec<Vec<usize>> {
    let n = code.total_units();
    let mut patterns = Vec::new();
    for mask in 1u32..(1 << n) {
        let lost: Vec<usize> = (0..n).filter(|u| mask & (1 << u) != 0).collect();
        let present: Vec<bool> = (0..n).map(|u| mask & (1 << u) == 0).collect();
        if lost.len() <= code.parity_units() && code.is_decodable(&present) {
            patterns.push(lost);
        }
    }
    if let Some(count) = sample {
        patterns.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(32));
        patterns.truncate(count);
    }
    patterns
}

async fn every_pattern_every_method(code_name: &str, nodes: usize, sample: Option<usize>, mds: bool) {
    let cluster = TestCluster::start(nodes, nodes).await;
    let data = ErasureData::new(cluster.config(code_name), Arc::clone(&cluster.meta)).await.unwrap();
    let code = data.io().code(code_name).unwrap();
    let (stripe, units) = one_stripe(&cluster, &data, 40_000 * code.data_units()).await;
    let mut runs = 0;
    for lost in loss_patterns(code.as_ref(), sample) {
        runs += rebuild_every_way(&data, code.as_ref(), &stripe, &units, &lost, mds).await;
    }
    assert!(runs > 100, "{code_name}: {runs} dataflows checked");
    for i in 0..nodes {
        let stats = cluster.client(i).await.stats().await.unwrap();
        assert_eq!(stats.sessions_open, 0, "{code_name}: node {i} has no session left open");
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rs_6_3_every_loss_pattern_every_method_rebuilds_the_bytes() {
    every_pattern_every_method("rs-6-3", 9, None, true).await;
}

/// 40 of RS(10,4)'s 1,470 loss patterns, sampled; all of them with `LOWTAIL_ALL_LOSS_PATTERNS=1`
/// (`LOWTAIL_ALL_LOSS_PATTERNS=1 cargo test --release -p gateway --test data_dataflow rs_10_4`,
/// docs/lab/apls.md), too long for every CI run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rs_10_4_sampled_loss_patterns_every_method_rebuild_the_bytes() {
    let all = std::env::var("LOWTAIL_ALL_LOSS_PATTERNS").is_ok_and(|v| v == "1");
    every_pattern_every_method("rs-10-4", 14, (!all).then_some(40), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lrc_6_2_2_every_loss_pattern_rebuilds_from_its_recovery_set() {
    every_pattern_every_method("lrc-6-2-2", 10, None, false).await;
}

/// Sessions open on every running node, in all.
async fn sessions_open(cluster: &TestCluster) -> u64 {
    let mut open = 0;
    for i in (0..cluster.nodes.len()).filter(|&i| cluster.nodes[i].is_some()) {
        open += cluster.client(i).await.stats().await.unwrap().sessions_open;
    }
    open
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn apls_reads_with_a_node_down_run_on_every_survivor_and_read_back_identical() {
    let mut cluster = TestCluster::start(9, 9).await;
    let data = ErasureData::new(apls(cluster.config("rs-6-3")), Arc::clone(&cluster.meta)).await.unwrap();
    let bodies: Vec<Bytes> = [100_000, 3 << 20, (4 << 20) + 999].iter().map(|&n| pattern(n, n as u64)).collect();
    let mut layouts = Vec::new();
    for body in &bodies {
        layouts.push(data.write(body.clone()).await.unwrap().layout);
    }
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    let Layout::Striped { segments } = &layouts[1] else { panic!("striped") };
    let stripe = cluster.meta.get_stripe(segments[0].stripe).await.unwrap();
    let down = stripe.placement[0].0 as usize;
    cluster.kill(down).await;
    for (body, layout) in bodies.iter().zip(&layouts) {
        assert!(data.read(layout, 0..body.len() as u64).await.unwrap() == *body, "whole object");
        let (from, to) = (body.len() as u64 / 5, body.len() as u64 * 4 / 5);
        assert!(data.read(layout, from..to).await.unwrap() == body.slice(from as usize..to as usize), "ranged");
    }
    for node in stripe.placement.iter().map(|n| n.0 as usize).filter(|&n| n != down) {
        let stats = cluster.client(node).await.stats().await.unwrap();
        assert!(stats.sessions_started > 0, "survivor {node} ran a session");
    }
    assert_eq!(sessions_open(&cluster).await, 0, "every session ended");
    let counters = data.io().counters();
    let (rebuilt, fallbacks, degraded) = (
        counters.rebuilt_reads.load(Ordering::Relaxed),
        counters.rebuild_fallbacks.load(Ordering::Relaxed),
        counters.degraded_reads.load(Ordering::Relaxed),
    );
    assert!(
        rebuilt >= 1 && rebuilt == degraded,
        "the lost unit's ranges were rebuilt by the nodes: {rebuilt}, {fallbacks} gave up, {degraded} degraded"
    );
    assert_eq!(counters.rebuild_fallbacks.load(Ordering::Relaxed), 0, "no dataflow gave up");
    cluster.shutdown().await;
}

/// A 6 MiB object written and flushed, its first stripe, and the node of that stripe's unit 0
/// killed (marked Down): `(body, layout, stripe, killed node)`.
async fn an_object_with_a_node_down(
    cluster: &mut TestCluster,
    data: &ErasureData,
    seed: u64,
) -> (Bytes, Layout, StripeMeta, usize) {
    let body = pattern(6 << 20, seed);
    let layout = data.write(body.clone()).await.unwrap().layout;
    data.packer().flush(Duration::from_secs(30)).await.unwrap();
    let Layout::Striped { segments } = &layout else { panic!("striped") };
    let stripe = cluster.meta.get_stripe(segments[0].stripe).await.unwrap();
    let down = stripe.placement[0].0 as usize;
    cluster.kill(down).await;
    (body, layout, stripe, down)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dropping_a_read_frees_every_session_and_a_source_killed_mid_read_falls_back() {
    let mut cluster = TestCluster::start(9, 9).await;
    let data = Arc::new(ErasureData::new(apls(cluster.config("rs-6-3")), Arc::clone(&cluster.meta)).await.unwrap());
    let (body, layout, stripe, down) = an_object_with_a_node_down(&mut cluster, &data, 5).await;
    // Slow survivors: every local read takes 1.5 s, so the sessions are open when the read goes.
    let slow = ServiceModel { enabled: true, overhead_us: 1_500_000, ..Default::default() };
    let survivors: Vec<usize> = stripe.placement.iter().map(|n| n.0 as usize).filter(|&n| n != down).collect();
    for &node in &survivors {
        cluster.client(node).await.set_service_model(&slow).await.unwrap();
    }
    let reading = {
        let (data, layout) = (Arc::clone(&data), layout.clone());
        tokio::spawn(async move { data.read(&layout, 0..segments_len(&layout)).await })
    };
    wait_until(|| async { sessions_open(&cluster).await >= survivors.len() as u64 }).await;
    reading.abort();
    let _ = reading.await;
    wait_until(|| async { sessions_open(&cluster).await == 0 }).await;

    // A source dies mid-read: the dataflow gives up and the gateway decodes from the rest.
    let reading = {
        let (data, layout) = (Arc::clone(&data), layout.clone());
        tokio::spawn(async move { data.read(&layout, 0..segments_len(&layout)).await })
    };
    wait_until(|| async { sessions_open(&cluster).await >= survivors.len() as u64 }).await;
    let victim = survivors[rand::rng().random_range(0..survivors.len())];
    cluster.kill(victim).await;
    let read = tokio::time::timeout(Duration::from_secs(60), reading).await.unwrap().unwrap().unwrap();
    assert!(read == body.slice(..read.len()), "served by the fallback, identical");
    assert!(data.io().counters().rebuild_fallbacks.load(Ordering::Relaxed) >= 1, "the dataflow gave up");
    cluster.shutdown().await;
}

fn segments_len(layout: &Layout) -> u64 {
    let Layout::Striped { segments } = layout else { panic!("striped") };
    segments[0].length_bytes
}

/// Polls `condition` every 20 ms for at most 10 s.
async fn wait_until<F: Future<Output = bool>>(condition: impl Fn() -> F) {
    for _ in 0..500 {
        if condition().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("condition not met within 10 s");
}

/// Repair with `kind = "apls"`: each lost unit rebuilt by the survivors straight into its new node
/// (no unit byte through the gateway), byte for byte the unit it replaces, for RS and LRC.
async fn repair_rebuilds_into_the_new_node(code_name: &str, nodes: usize) {
    let mut cluster = TestCluster::start(nodes, nodes).await;
    let mut config = apls(cluster.config(code_name));
    config.repair = RepairConfig { grace_ms: 0, ..Default::default() };
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let mut stripes = Vec::new();
    for size in [3 << 20, (5 << 20) + 77] {
        stripes.push(one_stripe(&cluster, &data, size).await);
    }
    let down = stripes[0].0.placement[0];
    cluster.kill(down.0 as usize).await;
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    repair.scan().await.unwrap();
    let status = repair.status();
    assert!(status.stripes_repaired > 0 && status.stripe_failures == 0, "{code_name}: {status:?}");
    let repaired = data.io().counters().repaired_on_nodes.load(Ordering::Relaxed);
    assert!(repaired >= 1, "{code_name}: rebuilt on the nodes");
    for (before, units) in &stripes {
        let after = cluster.meta.get_stripe(before.id).await.unwrap();
        for (unit, node) in after.placement.iter().enumerate() {
            assert_ne!(*node, down, "{code_name}: unit {unit} of stripe {} left the dead node", before.id);
            let client = cluster.client(node.0 as usize).await;
            let (bytes, _) = client.read_range(after.id.0, unit as u16, 0, after.unit_bytes).await.unwrap();
            assert!(bytes == units[unit], "{code_name}: unit {unit} of stripe {} identical on node {node}", before.id);
        }
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rs_6_3_repair_rebuilds_into_the_new_node() {
    repair_rebuilds_into_the_new_node("rs-6-3", 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lrc_6_2_2_repair_rebuilds_into_the_new_node() {
    repair_rebuilds_into_the_new_node("lrc-6-2-2", 11).await;
}

/// `kind = "auto"` over the probed rates (node links 25 MB/s, the gateway's downlink 50 MB/s): a
/// whole lost unit is faster by APLS on the nodes (the gateway's link would carry k units), a
/// 1000-byte range by the gateway decode (APLS's chain would cross k hops first); both identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn auto_rebuilds_a_whole_unit_on_the_nodes_and_a_small_range_at_the_gateway() {
    let mut cluster = TestCluster::start(9, 9).await;
    let mut config = cluster.config("rs-6-3");
    config.reconstruct =
        ReconstructSettings { kind: ReconstructKind::Auto, packet_bytes: 64 << 10, ..Default::default() };
    let data = ErasureData::new(config, Arc::clone(&cluster.meta)).await.unwrap();
    let (body, layout, stripe, down) = an_object_with_a_node_down(&mut cluster, &data, 11).await;
    let links =
        ServiceModel { enabled: true, egress_bytes_per_s: 25e6, ingress_bytes_per_s: 25e6, ..Default::default() };
    for node in (0..9).filter(|&n| n != down) {
        cluster.client(node).await.set_service_model(&links).await.unwrap();
    }
    data.io().set_ingress(node::link::LinkShape { bytes_per_s: 50e6, per_packet_us: 0 }).unwrap();
    let membership = Membership::new(Arc::clone(data.io().cluster()), MembershipConfig::default());
    membership.probe_round(unix_now_ms()).await.unwrap();
    let survivor = stripe.placement[1];
    assert_eq!(data.io().cluster().loads().probed(survivor).sending_bytes_per_s(), Some(25e6), "the probe's rate");

    let counters = data.io().counters();
    let small = data.read(&layout, 0..1000).await.unwrap();
    assert!(small == body.slice(..1000), "small range identical");
    assert_eq!(counters.degraded_reads.load(Ordering::Relaxed), 1);
    assert_eq!(counters.rebuilt_reads.load(Ordering::Relaxed), 0, "a small range is decoded at the gateway");
    let whole = data.read(&layout, 0..stripe.unit_bytes).await.unwrap();
    assert!(whole == body.slice(..stripe.unit_bytes as usize), "whole unit identical");
    assert_eq!(counters.rebuilt_reads.load(Ordering::Relaxed), 1, "a whole unit is rebuilt by the nodes");
    assert_eq!(counters.rebuild_fallbacks.load(Ordering::Relaxed), 0);
    for node in stripe.placement.iter().map(|n| n.0 as usize).filter(|&n| n != down) {
        assert!(cluster.client(node).await.stats().await.unwrap().sessions_started > 0, "survivor {node} took part");
    }
    cluster.shutdown().await;
}

/// APLS's light-loaded starter for repair (`kind = "apls"`): a lost unit is rebuilt into one of the
/// nodes this gateway sent least within its window. Three rounds, each loading all but two
/// candidates: the new node is one of the two every time, and the unit reads back identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn repair_rebuilds_into_a_light_loaded_node() {
    let mut cluster = TestCluster::start(16, 16).await;
    let mut config = apls(cluster.config("rs-6-3"));
    config.repair = RepairConfig { grace_ms: 0, ..Default::default() };
    let data = ErasureData::new(config.clone(), Arc::clone(&cluster.meta)).await.unwrap();
    let (first, units) = one_stripe(&cluster, &data, 3 << 20).await;
    let repair = RepairService::new(Arc::clone(data.io()), config.repair.clone());
    let loads = data.io().cluster().loads();
    for (round, expected) in units.iter().enumerate().take(3) {
        let before = cluster.meta.get_stripe(first.id).await.unwrap();
        let victim = before.placement[round];
        cluster.kill(victim.0 as usize).await;
        let candidates: Vec<meta::NodeId> = (0..16u32)
            .map(meta::NodeId)
            .filter(|n| cluster.nodes[n.0 as usize].is_some() && !before.placement.contains(n))
            .collect();
        let light: Vec<meta::NodeId> = candidates[..2].to_vec();
        let busiest = candidates.iter().map(|&n| loads.window_load(n).requests).max().unwrap();
        for &node in &candidates[2..] {
            for _ in 0..busiest + 100 {
                loads.record_request(node, 1 << 20);
            }
        }
        assert_eq!(loads.light_loaded(&candidates), light, "round {round}: the table's light set");
        repair.scan().await.unwrap();
        let after = cluster.meta.get_stripe(first.id).await.unwrap();
        let home = after.placement[round];
        assert!(light.contains(&home), "round {round}: unit {round} went to {home}, not one of {light:?}");
        let (bytes, _) = cluster
            .client(home.0 as usize)
            .await
            .read_range(first.id.0, round as u16, 0, first.unit_bytes)
            .await
            .unwrap();
        assert!(bytes == expected, "round {round}: the rebuilt unit identical");
    }
    cluster.shutdown().await;
}
