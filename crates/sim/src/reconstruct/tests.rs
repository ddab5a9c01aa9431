//! Isolated degraded reads against the closed forms of APLS §III-C and the derived ones of the
//! notes (B1.4): with no per-packet cost, no hop latency and an instant disk, each method's latency
//! is its busiest link's bytes over its bandwidth plus the pipeline's fill (each packet is stored
//! and forwarded at the sender's uplink and at the receiver's downlink, so a chain of H hops fills
//! in 2H − 1 serialisations); with packets small against the unit the paper's formulas alone are
//! within 2 %. The per-pair bytes are the dataflow's; a per-packet cost makes small packets dear.

use super::*;
use execution::reconstruct::{Assignment, Inner, Method};

/// The paper's setting: helpers at 100 Mbps, the requestor at 1 500 Mbps.
const HELPER: f64 = 12.5e6;
const REQUESTOR: f64 = 187.5e6;
const UNIT: u64 = 64_000_000;
/// Small against the unit: the fill is under 1 % of any method's time.
const PACKET: u32 = 16_384;

fn setup(sources: usize, requestor: f64) -> ReconstructSetup {
    ReconstructSetup {
        nodes: vec![SitePorts::symmetric(HELPER); sources],
        gateway: SitePorts::symmetric(requestor),
        hop_latency_ns: 0,
        per_packet_ns: 0,
        receive_per_packet_ns: 0,
        disk: DiskModel::INSTANT,
    }
}

fn latency_s(method: Method, k: u16, setup: &ReconstructSetup, packet: u32) -> f64 {
    let flow = Dataflow::build(method, k, UNIT, packet).unwrap();
    run_isolated(setup, &flow).latency_ns as f64 / 1e9
}

fn assert_close(measured: f64, expected: f64, what: &str) {
    assert!((measured / expected - 1.0).abs() < 0.02, "{what}: {measured:.4} s against {expected:.4} s");
    assert!(measured >= expected * 0.999, "{what}: faster than its busiest link allows");
}

#[test]
fn every_method_meets_its_closed_form_within_two_percent() {
    let c = UNIT as f64;
    let (k, q) = (10u16, 13u16);
    let s = setup(13, REQUESTOR);
    let apls = |inner, assignment| Method::Apls { q, inner, assignment };
    let expected = [
        (Method::Normal, c / HELPER),
        (Method::GatewayDecode, (f64::from(k) * c / REQUESTOR).max(c / HELPER)),
        (Method::Traditional, f64::from(k - 1) * c / HELPER),
        (Method::Ppr, 4.0 * c / HELPER),
        (Method::Ecpipe, c / HELPER),
        (apls(Inner::Chain, Assignment::RoundRobin), f64::from(k) * c / (f64::from(q) * HELPER)),
        (apls(Inner::Chain, Assignment::Contiguous), f64::from(k) * c / (f64::from(q) * HELPER)),
        (apls(Inner::Star, Assignment::RoundRobin), f64::from(k) * c / (f64::from(q) * HELPER)),
        (
            Method::Segmented { q, assignment: Assignment::RoundRobin },
            (f64::from(k) * c / (f64::from(q) * HELPER)).max(f64::from(k) * c / REQUESTOR),
        ),
    ];
    for (method, formula) in expected {
        assert_close(latency_s(method, k, &s, PACKET), formula, &method.name());
    }
    // Eq. 3 on RS(6,6): APLS / normal = 6/q.
    for q in 6..=11u16 {
        let method = Method::Apls { q, inner: Inner::Chain, assignment: Assignment::RoundRobin };
        assert_close(latency_s(method, 6, &setup(11, REQUESTOR), PACKET), 6.0 * c / (f64::from(q) * HELPER), "6/q");
    }
}

#[test]
fn with_larger_packets_the_fill_is_the_chains_serialisations() {
    let (c, p) = (UNIT as f64, 262_144.0);
    let (k, q) = (10u16, 13u16);
    let s = setup(13, REQUESTOR);
    // Normal: one uplink then the requestor's downlink. ECPipe and APLS: k uplinks, k − 1 source
    // downlinks and the requestor's.
    let fill = f64::from(2 * k - 2) * p / HELPER + p / REQUESTOR;
    for (method, formula) in [(Method::Normal, c / HELPER + p / REQUESTOR), (Method::Ecpipe, c / HELPER + fill)] {
        assert_close(latency_s(method, k, &s, p as u32), formula, &method.name());
    }
    // APLS's q chains start on different agents at once, so their fills overlap the steady state:
    // between Eq. 3 and Eq. 3 plus one chain's fill.
    let apls = Method::Apls { q, inner: Inner::Chain, assignment: Assignment::RoundRobin };
    let eq3 = f64::from(k) * c / (f64::from(q) * HELPER);
    let measured = latency_s(apls, k, &s, p as u32);
    assert!(measured > eq3 && measured < eq3 + fill, "{measured} against {eq3} + up to {fill}");
}

#[test]
fn a_requestor_no_faster_than_its_helpers_takes_aplss_gain() {
    // Eq. 2's case: the starter's downlink binds, so APLS is a normal read.
    let c = UNIT as f64;
    let s = setup(13, HELPER);
    let apls = Method::Apls { q: 13, inner: Inner::Chain, assignment: Assignment::RoundRobin };
    let fill = 19.0 * f64::from(PACKET) / HELPER;
    assert_close(latency_s(apls, 10, &s, PACKET), c / HELPER + fill, "APLS, starter at the helpers' bandwidth");
    assert_close(latency_s(Method::GatewayDecode, 10, &s, PACKET), 10.0 * c / HELPER, "gateway decode");
}

#[test]
fn the_transfers_carry_the_dataflows_bytes_and_the_disk_reads_what_it_must() {
    let (k, q) = (10u16, 13u16);
    let method = Method::Apls { q, inner: Inner::Chain, assignment: Assignment::RoundRobin };
    let flow = Dataflow::build(method, k, 13 * 1_000 * 64, 1_000).unwrap();
    let mut s = setup(13, REQUESTOR);
    let outcome = run_isolated(&s, &flow);
    let sent =
        |site: u16| outcome.transfers.iter().filter(|t| t.from == Site::Source(site)).map(|t| t.bytes).sum::<u64>();
    let into_requestor: u64 = outcome.transfers.iter().filter(|t| t.to == Site::Requestor).map(|t| t.bytes).sum();
    assert_eq!(into_requestor, flow.range_bytes);
    for site in 0..q {
        assert_eq!(sent(site), u64::from(k) * flow.range_bytes / u64::from(q));
    }
    assert!(outcome.disk_bytes.iter().all(|&b| b == u64::from(k) * flow.range_bytes / u64::from(q)));
    s.disk = DiskModel { whole_range: true, ..DiskModel::INSTANT };
    assert!(run_isolated(&s, &flow).disk_bytes.iter().all(|&b| b == flow.range_bytes), "the paper's agents read all");
}

#[test]
fn a_per_packet_cost_makes_small_packets_dear_and_hops_make_large_ones_dear() {
    let mut s = setup(13, REQUESTOR);
    s.per_packet_ns = 50_000;
    s.hop_latency_ns = 200_000;
    let apls = Method::Apls { q: 13, inner: Inner::Chain, assignment: Assignment::RoundRobin };
    let by_packet: Vec<f64> = [4_096, 65_536, 4 << 20].iter().map(|&p| latency_s(apls, 10, &s, p)).collect();
    assert!(by_packet[0] > by_packet[1] && by_packet[2] > by_packet[1], "U-shape: {by_packet:?}");
    // Deterministic: the same setup gives the same read.
    let flow = Dataflow::build(apls, 10, 1 << 20, 65_536).unwrap();
    assert_eq!(run_isolated(&s, &flow), run_isolated(&s, &flow));
}

fn normal(arrival_ns: u64, node: u32, bytes: u64) -> LoadedRead {
    let flow = Arc::new(Dataflow::build(Method::Normal, 1, bytes, PACKET).unwrap());
    LoadedRead { arrival_ns, flow, nodes: vec![node] }
}

#[test]
fn loaded_reads_on_distinct_nodes_barely_meet_and_on_one_node_share_it() {
    let cluster = setup(3, REQUESTOR);
    let alone = run_loaded(&cluster, &[normal(0, 0, 1_000_000)])[0];
    let apart = run_loaded(&cluster, &[normal(0, 0, 1_000_000), normal(0, 1, 1_000_000)]);
    // Two uplinks; only the gateway's downlink, 15 times faster, is shared (a packet's worth).
    assert!(apart.iter().all(|&l| l >= alone && l - alone < alone / 200), "{apart:?} against {alone}");
    // One uplink, two reads taking turns: both end at about twice the time.
    let together = run_loaded(&cluster, &[normal(0, 2, 1_000_000), normal(0, 2, 1_000_000)]);
    let transmit = (1e6 / HELPER * 1e9) as u64;
    assert!(together.iter().all(|&l| l.abs_diff(alone + transmit) < transmit / 20), "{together:?}");
    // The isolated read is the loaded engine with one read.
    let flow = Dataflow::build(Method::Normal, 1, 1_000_000, PACKET).unwrap();
    let isolated = run_isolated(&cluster, &flow);
    assert_eq!(isolated.latency_ns, alone);
}

#[test]
fn poisson_reads_of_one_node_respond_as_in_m_g_1_processor_sharing() {
    // One node's uplink shares itself among the reads in turn, a packet each: processor sharing of
    // a server whose read takes S = c/b alone; Poisson arrivals at ρ = 0.5. M/G/1-PS: the mean
    // response time is S/(1 − ρ), whatever the distribution (plus one packet's store and forward at
    // the gateway).
    use rand::{Rng, SeedableRng};
    let bytes = 250_000u64;
    let service_s = bytes as f64 / HELPER;
    let rho = 0.5;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let mut t = 0.0f64;
    let reads: Vec<LoadedRead> = (0..20_000)
        .map(|_| {
            t += -(1.0 - rng.random::<f64>()).ln() * service_s / rho;
            normal((t * 1e9) as u64, 0, bytes)
        })
        .collect();
    let latencies = run_loaded(&setup(1, REQUESTOR), &reads);
    let mean_s = latencies.iter().map(|&l| l as f64 / 1e9).sum::<f64>() / latencies.len() as f64;
    let tail_s = f64::from(PACKET.min(bytes as u32)) / REQUESTOR;
    let expected_s = service_s / (1.0 - rho) + tail_s;
    assert!((mean_s / expected_s - 1.0).abs() < 0.03, "mean {mean_s:.5} s against M/G/1-PS's {expected_s:.5} s");
}
