//! APLS's loaded mode (lowtail's extension; the paper reads one degraded unit at a time): RS(10,4)
//! stripes over 14 NIC-bound nodes (100 or 200 Mbps each, the gateway 1 500 Mbps), node 0 down, Poisson
//! reads of one 4 MB data unit of a uniformly chosen stripe, through the simulator's loaded engine.
//! A read whose unit was on node 0 is degraded and rebuilt by the method under test (the gateway
//! decode from the first k survivors, APLS or the segmented read over all 13); the others are
//! normal reads from their unit's node. The load ρ is the normal reads' share of a node's uplink.
//!
//! Owns the workload and the rows. Must not: judge (the judge's), or compute statistics except
//! through `report`.

use execution::reconstruct::{Assignment, Dataflow, Inner, Method};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use sim::network::SitePorts;
use sim::reconstruct::{DiskModel, LoadedRead, ReconstructSetup, run_loaded};
use std::sync::Arc;

const K: u16 = 10;
const NODES: usize = 14;
const STRIPES: usize = 1_000;
const UNIT_BYTES: u64 = 4_000_000;
const PACKET_BYTES: u32 = 262_144;
/// The loads: the normal reads' share of a node's uplink (the degraded reads, 1 in 14, add k units
/// each: about 1.6 × this in all, so 0.55 is near saturation).
pub const LOADS: [f64; 3] = [0.2, 0.4, 0.55];
/// The helpers' bandwidths, Mbps: at 100, the gateway's 1 500 is above k × a helper's (the gateway
/// decode is bound by its sources); at 200, below it (the gateway's link binds the decode).
pub const HELPER_MBPS: [f64; 2] = [100.0, 200.0];

/// One method at one load.
#[derive(Clone, Debug, Serialize)]
pub struct LoadedRow {
    /// The degraded reads' method.
    pub method: String,
    /// ρ.
    pub load: f64,
    /// The helpers' bandwidth, Mbps.
    pub helper_mbps: f64,
    /// Reads simulated, and how many were degraded.
    pub reads: usize,
    /// Degraded among them.
    pub degraded: usize,
    /// Degraded reads' latency, median and 99th percentile, seconds.
    pub degraded_p50_s: f64,
    /// See `degraded_p50_s`.
    pub degraded_p99_s: f64,
    /// Normal reads' latency, median and 99th percentile, seconds.
    pub normal_p50_s: f64,
    /// See `normal_p50_s`.
    pub normal_p99_s: f64,
}

/// The methods the degraded reads are rebuilt by.
pub fn methods() -> [Method; 3] {
    let q = (NODES - 1) as u16;
    [
        Method::GatewayDecode,
        Method::Apls { q, inner: Inner::Chain, assignment: Assignment::RoundRobin },
        Method::Segmented { q, assignment: Assignment::Contiguous },
    ]
}

/// Every (method, load) row, each from `reads` reads of the same seeded workload.
pub fn rows(reads: usize, seed: u64) -> Vec<LoadedRow> {
    HELPER_MBPS.iter().flat_map(|&mbps| rows_at(mbps, reads, seed)).collect()
}

fn rows_at(helper_mbps: f64, reads: usize, seed: u64) -> Vec<LoadedRow> {
    let helper = helper_mbps * 1e6 / 8.0;
    let setup = ReconstructSetup {
        nodes: vec![SitePorts::symmetric(helper); NODES],
        gateway: SitePorts::symmetric(1_500e6 / 8.0),
        hop_latency_ns: super::HOP_LATENCY_NS,
        per_packet_ns: super::PER_PACKET_NS,
        receive_per_packet_ns: 0,
        disk: DiskModel::INSTANT,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xA915);
    let placements: Vec<Vec<u32>> = (0..STRIPES)
        .map(|_| {
            let mut nodes: Vec<u32> = (0..NODES as u32).collect();
            nodes.shuffle(&mut rng);
            nodes
        })
        .collect();
    let normal = Arc::new(Dataflow::build(Method::Normal, 1, UNIT_BYTES, PACKET_BYTES).expect("valid"));
    let mut out = Vec::new();
    for load in LOADS {
        // ρ of the normal reads on the 13 live nodes' uplinks.
        let rate_per_s = load * (NODES - 1) as f64 * helper / UNIT_BYTES as f64;
        for method in methods() {
            let flow = Arc::new(Dataflow::build(method, K, UNIT_BYTES, PACKET_BYTES).expect("valid"));
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ load.to_bits());
            let mut t = 0.0f64;
            let mut degraded = Vec::with_capacity(reads);
            let reads: Vec<LoadedRead> = (0..reads)
                .map(|_| {
                    t += -(1.0 - rng.random::<f64>()).ln() / rate_per_s;
                    let stripe = &placements[rng.random_range(0..STRIPES)];
                    let unit = rng.random_range(0..usize::from(K));
                    let arrival_ns = (t * 1e9) as u64;
                    if stripe[unit] != 0 {
                        degraded.push(false);
                        return LoadedRead { arrival_ns, flow: Arc::clone(&normal), nodes: vec![stripe[unit]] };
                    }
                    degraded.push(true);
                    let survivors: Vec<u32> = stripe.iter().copied().filter(|&n| n != 0).collect();
                    let nodes = survivors[..usize::from(method.sources(K))].to_vec();
                    LoadedRead { arrival_ns, flow: Arc::clone(&flow), nodes }
                })
                .collect();
            let latencies = run_loaded(&setup, &reads);
            out.push(LoadedRow { helper_mbps, ..row(method, load, &latencies, &degraded) });
        }
    }
    out
}

fn row(method: Method, load: f64, latencies: &[u64], degraded: &[bool]) -> LoadedRow {
    let pick = |want: bool| {
        report::Sample::new(latencies.iter().zip(degraded).filter(|(_, d)| **d == want).map(|(l, _)| *l).collect())
    };
    let (bad, good) = (pick(true), pick(false));
    let q = |sample: &report::Sample, f: f64| sample.quantile_ns(f).unwrap_or(0) as f64 / 1e9;
    LoadedRow {
        method: method.name(),
        load,
        helper_mbps: 0.0,
        reads: latencies.len(),
        degraded: bad.len(),
        degraded_p50_s: q(&bad, 0.5),
        degraded_p99_s: q(&bad, 0.99),
        normal_p50_s: q(&good, 0.5),
        normal_p99_s: q(&good, 0.99),
    }
}
