//! The load regime of the live experiment: fits the popularity skew of the request sequence and
//! the time scale of the nodes' emulated service model the way `lowtail experiment hu2017-fit`
//! fits the paper-scale simulation, so that the live cluster runs where Normal's latency
//! distribution has the shape of the paper's Normal rows.
//!
//! At paper scale the fit's free parameters are the arrival rate and the Zipf exponent. Live, the
//! rate is pinned by what two cores drive through real processes (about 100 requests/s), so the
//! free parameters are the exponent and how slow the emulated nodes are. The exponent is fitted
//! again rather than taken from paper scale because its effect on the nodes depends on how many
//! objects share a unit: 12 M objects over 2004 partitions average a skew out that 10,000
//! objects over a few hundred units keep. The fit runs Normal only, in a simulated stand-in of the
//! live cluster (its node, gateway, code and request sequence; objects packed into units as the
//! gateways pack them, placed at random), for each (exponent, scale) of a grid, and keeps the
//! point whose Normal rows are closest in shape to the paper's ([`crate::fit::log_errors`], summed
//! over both codes). Nothing else is chosen by hand.
//!
//! The fit runs twice. Before loading, on the stand-in, it chooses the exponent (the data set to
//! load depends on it) with the scale. After loading, on the placement read back from the live
//! clusters, it chooses the scale again with the exponent fixed. The two grounds differ: the
//! stand-in packs units full and places them at random, while the gateways seal stripes a second
//! after they open (units partly filled: 350–500 data units instead of 258 for seed 1) and place
//! them as the writes arrive. Under a skewed popularity that decides how hot the hottest nodes run
//! (docs/lab/hu2017-live.md). The second fit runs on the placement the runs and their simulation
//! use.
//!
//! Owns: the grid of scales, the stand-in, the fit over any ground, `regime.json`'s content.
//! Must not: start processes or look at any policy other than Normal.

use std::collections::BTreeMap;

use anyhow::Context;
use model::{ObjectId, PartitionId};
use policy::PolicyKind;
use serde::Serialize;
use workload::Workload;

use crate::fit::{PAPER_NORMAL, argmin, log_errors};

/// Per-task overhead of the emulated node at scale 1, µs.
pub const BASE_OVERHEAD_US: f64 = 10_000.0;
/// Transfer rate of the emulated node at scale 1, bytes per second.
pub const BASE_RATE_BYTES_PER_S: f64 = 2_000_000.0;
/// The scales tried: from where nothing queues at the live rate to where RS(6,3)'s Normal
/// saturates (steps of an eighth: the regime changes fast near saturation).
pub const SCALES: [f64; 17] =
    [1.0, 1.125, 1.25, 1.375, 1.5, 1.625, 1.75, 1.875, 2.0, 2.125, 2.25, 2.375, 2.5, 2.625, 2.75, 2.875, 3.0];
/// One-way network latency of the stand-in, µs: what earlier live runs calibrated on loopback
/// (0.32 to 0.38 ms; docs/lab/hu2017-live.md).
pub const LOOPBACK_NETWORK_US: u64 = 350;
/// Probe round trip of the stand-in, µs (calibrated 1.0 to 1.6 ms; unused by Normal).
pub const LOOPBACK_PROBE_RTT_US: u64 = 1_200;

/// One (exponent, scale) point's Normal runs.
#[derive(Clone, Debug, Serialize)]
pub struct ScalePoint {
    /// Zipf exponent of object popularity in the request sequence.
    pub zipf_exponent: f64,
    /// Multiple of the base service time.
    pub scale: f64,
    /// The emulated per-task overhead, µs.
    pub overhead_us: u64,
    /// The emulated transfer rate, bytes per second.
    pub rate_bytes_per_s: f64,
    /// Sum over codes of the squared log errors of the shape (0 = the paper's shape).
    pub loss: f64,
    /// Per code: Normal's mean node utilisation and latency statistics (seconds).
    pub normal: Vec<NormalRow>,
}

/// Normal on one code at one point.
#[derive(Clone, Debug, Serialize)]
pub struct NormalRow {
    /// The code.
    pub code: String,
    /// Data units (partitions) of the placement the sequence was read from.
    pub units: u32,
    /// Mean node utilisation.
    pub load: Option<f64>,
    /// Request latency.
    pub latency: report::LatencyStats,
}

/// The fit: every point tried, and the one the experiment runs at.
#[derive(Clone, Debug, Serialize)]
pub struct RegimeFit {
    /// What Normal ran on: `"stand-in"` (random placement) or `"live placement"`.
    pub ground: &'static str,
    /// The exponents tried.
    pub zipf_exponents: Vec<f64>,
    /// The scales tried.
    pub scales: Vec<f64>,
    /// Every point, exponent-major (all scales of the first exponent, then the next).
    pub points: Vec<ScalePoint>,
    /// Index of the chosen point.
    pub best: usize,
}

impl RegimeFit {
    /// The chosen point.
    pub fn chosen(&self) -> &ScalePoint {
        &self.points[self.best]
    }

    /// Index of the chosen point's exponent in [`RegimeFit::zipf_exponents`].
    pub fn chosen_exponent_index(&self) -> usize {
        self.best / self.scales.len()
    }

    /// Whether the chosen point is on the edge of a grid of more than one value (the loss may fall
    /// further beyond it, e.g. with `--quick`'s light load).
    pub fn at_edge(&self) -> bool {
        let on_edge = |index: usize, len: usize| len > 1 && (index == 0 || index + 1 == len);
        on_edge(self.best % self.scales.len(), self.scales.len())
            || on_edge(self.chosen_exponent_index(), self.zipf_exponents.len())
    }

    /// The points of one exponent, in scale order.
    pub fn row(&self, exponent: usize) -> &[ScalePoint] {
        let scales = self.scales.len();
        &self.points[exponent * scales..(exponent + 1) * scales]
    }
}

/// The emulated service model at `scale`: (per-task overhead µs, bytes per second).
pub fn service_at(scale: f64) -> (u64, f64) {
    assert!(scale.is_finite() && scale > 0.0, "a service scale is positive");
    ((BASE_OVERHEAD_US * scale).round() as u64, BASE_RATE_BYTES_PER_S / scale)
}

/// `workload` with its objects grouped into data units as the gateways pack them: objects in id
/// order, spread round robin over `gateways`, each gateway appending into units of at most
/// `unit_bytes` (a new unit when the next object does not fit). Which unit an object lands in
/// live depends on timing; the stand-in needs only as many units, filled alike.
pub fn packed_stand_in(workload: &Workload, unit_bytes: u64, gateways: usize) -> anyhow::Result<Workload> {
    anyhow::ensure!(unit_bytes > 0 && gateways > 0, "packing needs a unit size and a gateway");
    let mut sizes: BTreeMap<ObjectId, u64> = BTreeMap::new();
    for request in &workload.requests {
        sizes.insert(request.object, request.length);
    }
    // Per gateway: (open unit's partition, bytes in it).
    let mut open: Vec<Option<(u32, u64)>> = vec![None; gateways];
    let mut units = 0u32;
    let mut location: BTreeMap<ObjectId, (PartitionId, u64)> = BTreeMap::new();
    for (index, (&object, &size)) in sizes.iter().enumerate() {
        anyhow::ensure!(size <= unit_bytes, "object {} of {size} bytes does not fit a unit of {unit_bytes}", object.0);
        let slot = &mut open[index % gateways];
        let (unit, used) = match *slot {
            Some((unit, used)) if used + size <= unit_bytes => (unit, used),
            _ => {
                units = units.checked_add(1).context("too many units")?;
                (units - 1, 0)
            }
        };
        location.insert(object, (PartitionId(unit), used));
        *slot = Some((unit, used + size));
    }
    let mut requests = workload.requests.clone();
    for request in &mut requests {
        let (partition, offset) = location[&request.object];
        request.partition = partition;
        request.offset = offset;
    }
    let stand_in = Workload { partitions: units.max(1), requests, duration_ns: workload.duration_ns };
    stand_in.validate().map_err(|reason| anyhow::anyhow!("the packed stand-in is inconsistent: {reason}"))?;
    Ok(stand_in)
}

/// The simulated stand-in of the live cluster for `code` at `scale`.
pub fn stand_in_config(seed: u64, code: &str, scale: f64, nodes: usize, gateways: usize) -> sim::SimConfig {
    let (overhead_us, rate_bytes_per_s) = service_at(scale);
    let mut config = sim::SimConfig { seed, code: code.to_owned(), ..sim::SimConfig::default() };
    config.cluster.nodes = nodes as u32;
    config.cluster.task_overhead_us = overhead_us;
    config.cluster.rate_bytes_per_s = rate_bytes_per_s.round() as u64;
    config.cluster.network_latency_us = LOOPBACK_NETWORK_US;
    config.cluster.cancel_in_service = super::calibrate::LIVE_NODE_CANCELS_IN_SERVICE;
    config.frontends.count = gateways as u16;
    config.frontends.probe_rtt_us = LOOPBACK_PROBE_RTT_US;
    // The gateway's controller probes asynchronously (docs/controller.md).
    config.frontends.probes_block_frontend = false;
    config.policy = super::policy_settings();
    config.policies = vec![PolicyKind::Normal];
    config
}

/// The stand-in's cluster for `config`'s code and the workload it runs: the stand-in's partitions
/// rounded up to whole stripes (a gateway seals a stripe with empty data units too). Its nodes run
/// at `config`'s rate; [`at_rate`] moves them to another scale's.
fn stand_in_cluster(config: &sim::SimConfig, stand_in: &Workload) -> anyhow::Result<(sim::Cluster, Workload)> {
    let k = config.code_spec().context("the stand-in's code")?.data_units() as u32;
    let partitions = stand_in.partitions.div_ceil(k) * k;
    let workload = Workload { partitions, ..stand_in.clone() };
    Ok((sim::Cluster::build(config, partitions).context("the stand-in's cluster")?, workload))
}

/// `cluster` (same placement) with every node at `config`'s transfer rate.
pub fn at_rate(cluster: &sim::Cluster, config: &sim::SimConfig) -> sim::Cluster {
    let mut cluster = cluster.clone();
    cluster.rates_bytes_per_s = vec![config.cluster.rate_bytes_per_s as f64; cluster.rates_bytes_per_s.len()];
    cluster
}

/// What Normal runs on at one exponent: per code of [`PAPER_NORMAL`], in its order, a cluster
/// (its placement; the rates are set per scale) and the request sequence at its partitions.
pub struct Ground {
    /// Zipf exponent of the sequence.
    pub zipf_exponent: f64,
    /// Per code: the cluster and the workload.
    pub per_code: Vec<(sim::Cluster, Workload)>,
}

/// Names the stand-in ground of a fit in `regime.json`.
pub const STAND_IN: &str = "stand-in";
/// Names the ground of a fit on the placement read back from the live clusters.
pub const LIVE_PLACEMENT: &str = "live placement";

impl Ground {
    /// The stand-in at `zipf_exponent`: its packed request sequence over a random balanced
    /// placement per code.
    pub fn stand_in(
        seed: u64,
        zipf_exponent: f64,
        packed: &Workload,
        nodes: usize,
        gateways: usize,
    ) -> anyhow::Result<Ground> {
        let mut per_code = Vec::with_capacity(PAPER_NORMAL.len());
        for paper in &PAPER_NORMAL {
            per_code.push(stand_in_cluster(&stand_in_config(seed, paper.code, 1.0, nodes, gateways), packed)?);
        }
        Ok(Ground { zipf_exponent, per_code })
    }
}

/// Runs Normal on both codes at every (exponent, scale) over `grounds` (one per exponent), and
/// picks the point; `ground` names what they are ([`STAND_IN`], [`LIVE_PLACEMENT`]).
pub fn fit(
    seed: u64,
    ground: &'static str,
    grounds: &[Ground],
    scales: &[f64],
    nodes: usize,
    gateways: usize,
    threads: usize,
) -> anyhow::Result<RegimeFit> {
    anyhow::ensure!(!scales.is_empty() && !grounds.is_empty(), "the regime fit needs a scale and an exponent");
    let codes = PAPER_NORMAL.len();
    for each in grounds {
        anyhow::ensure!(each.per_code.len() == codes, "a ground of the regime fit has a cluster per code");
    }
    // Jobs run exponent-major, then scale, then code; results come back in job order.
    let jobs: Vec<(usize, usize, usize)> = (0..grounds.len())
        .flat_map(|e| (0..scales.len()).flat_map(move |s| (0..codes).map(move |c| (e, s, c))))
        .collect();
    let rows = crate::parallel::run_parallel(
        &jobs,
        threads,
        |&(e, s, c)| format!("regime {} zipf {} ×{}", PAPER_NORMAL[c].code, grounds[e].zipf_exponent, scales[s]),
        |&(e, s, c)| {
            let paper = &PAPER_NORMAL[c];
            let config = stand_in_config(seed, paper.code, scales[s], nodes, gateways);
            let (cluster, workload) = &grounds[e].per_code[c];
            let output = sim::run(&config, &at_rate(cluster, &config), PolicyKind::Normal, workload);
            let info = crate::run_info(&config, &output, None);
            let summary = report::summarize(&output.records, &info);
            summary.request_latency.map(|latency| NormalRow {
                code: paper.code.to_owned(),
                units: workload.partitions,
                load: summary.utilisation_mean,
                latency,
            })
        },
        |_| {},
    );
    let mut points = Vec::with_capacity(grounds.len() * scales.len());
    for (e, each) in grounds.iter().enumerate() {
        for (s, &scale) in scales.iter().enumerate() {
            let mut loss = 0.0;
            let mut normal = Vec::new();
            for (c, paper) in PAPER_NORMAL.iter().enumerate() {
                let index = (e * scales.len() + s) * codes + c;
                debug_assert_eq!(jobs[index], (e, s, c));
                match &rows[index] {
                    Some(row) => {
                        loss += log_errors(&row.latency, paper).iter().map(|e| e * e).sum::<f64>();
                        normal.push(row.clone());
                    }
                    None => loss = f64::INFINITY,
                }
            }
            let (overhead_us, rate_bytes_per_s) = service_at(scale);
            points.push(ScalePoint {
                zipf_exponent: each.zipf_exponent,
                scale,
                overhead_us,
                rate_bytes_per_s,
                loss,
                normal,
            });
        }
    }
    let best = argmin(points.iter().map(|p| p.loss)).context("no point of the grid gave a finite loss")?;
    Ok(RegimeFit {
        ground,
        zipf_exponents: grounds.iter().map(|g| g.zipf_exponent).collect(),
        scales: scales.to_vec(),
        points,
        best,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use model::{ReadRequest, RequestId};

    /// A whole-object read of `length` bytes arriving at `id` µs (also used by `placement`'s tests).
    pub(crate) fn request(id: u64, object: u64, length: u64) -> ReadRequest {
        ReadRequest {
            id: RequestId(id),
            object: ObjectId(object),
            partition: PartitionId(0),
            offset: 0,
            length,
            arrival_ns: id * 1000,
            class: 0,
            latency_class: 0,
        }
    }

    #[test]
    fn packing_fills_units_per_gateway_in_object_order() {
        // Objects 0..6 of 400 bytes, units of 1000 bytes, 2 gateways: gateway 0 packs 0, 2, 4 (two
        // fit a unit, the third opens another), gateway 1 packs 1, 3, 5 alike: 4 units.
        let requests: Vec<ReadRequest> = (0..6).map(|o| request(o, o, 400)).collect();
        let workload = Workload { partitions: 1, requests, duration_ns: 10_000 };
        let packed = packed_stand_in(&workload, 1000, 2).unwrap();
        assert_eq!(packed.partitions, 4);
        let at: Vec<(u32, u64)> = packed.requests.iter().map(|r| (r.partition.0, r.offset)).collect();
        assert_eq!(at, [(0, 0), (1, 0), (0, 400), (1, 400), (2, 0), (3, 0)]);
        assert!(packed_stand_in(&workload, 300, 2).is_err(), "an object larger than a unit is refused");
    }

    #[test]
    fn slower_nodes_load_the_stand_in_more_and_the_fit_picks_a_finite_point() {
        let stand_in_at = |exponent: f64| {
            let config = workload::WasLikeConfig {
                objects: 600,
                partitions: 60,
                duration_s: 20.0,
                rate_per_s: 40.0,
                zipf_exponent: exponent,
                sizes: workload::SizeDistribution { max_bytes: 64 << 10, ..Default::default() },
                ..Default::default()
            };
            let workload = workload::WorkloadConfig::WasLike(config).build(3).unwrap();
            Ground::stand_in(3, exponent, &packed_stand_in(&workload, 256 << 10, 3).unwrap(), 12, 3).unwrap()
        };
        let fit = fit(3, STAND_IN, &[stand_in_at(0.3), stand_in_at(1.1)], &[1.0, 4.0], 12, 3, 1).unwrap();
        assert_eq!(fit.points.len(), 4);
        assert_eq!(fit.row(1)[0].zipf_exponent, 1.1);
        assert_eq!(fit.row(1)[1].scale, 4.0);
        let load = |p: &ScalePoint| p.normal[0].load.unwrap();
        for exponent in 0..2 {
            let row = fit.row(exponent);
            assert!(load(&row[1]) > 3.0 * load(&row[0]), "{row:?}");
        }
        assert!(fit.chosen().loss.is_finite());
        assert!(fit.points.iter().all(|p| p.loss >= fit.chosen().loss));
        assert!(fit.at_edge(), "two points a side: any is an edge");
        let point = fit.points[0].clone();
        let mut grid = RegimeFit {
            ground: STAND_IN,
            zipf_exponents: vec![0.3; 3],
            scales: vec![1.0; 3],
            points: vec![point; 9],
            best: 4,
        };
        assert!(!grid.at_edge(), "the middle of a 3 × 3 grid");
        for edge in [1, 3, 5, 7, 8] {
            grid.best = edge;
            assert!(grid.at_edge(), "{edge} is on an edge");
        }
        let single = RegimeFit { zipf_exponents: vec![0.3], scales: vec![1.0, 2.0, 3.0], best: 1, ..grid };
        assert!(!single.at_edge(), "one exponent given: only the scale can be at an edge");
    }
}
