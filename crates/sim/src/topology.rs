//! The network model of the latency-classes paper (Xiang et al., §II–§III) as a discrete-event
//! simulator, deterministic for a seed: N racks, D classes, files whose n chunks sit on n distinct
//! racks S_r, Poisson reads per (client rack i, file r) at rate λ_{i,r}, each reading the k racks
//! [`policy::classes::Marginals`] draws (systematic sampling with the π table of (i, r)); a chunk
//! from storage rack j to client rack i of class d waits its connection delay N_{i,j}, then crosses
//! queue q_{i,j,d}; a read is done when its last chunk is (arrival to the k-th chunk's finish).
//!
//! Bandwidths (eq. 2–4), with i the client rack and j the storage rack (data flows j → i, the
//! notes' reading of the paper's varying index order): an inter-rack queue (i ≠ j) has
//! B^eff_{i,j,d} = W_{i,j,d}·B; an intra-rack queue has B^eff_{i,i,d} = w_{i,d}·b^eff_i with
//! b^eff_i = b − Σ_d Σ_{l≠i} (W_{i,l,d} + W_{l,i,d})·B: the ToR bandwidth less the rack's incoming
//! and outgoing inter-rack reservations. The paper prints a "−" between the two sums; its prose
//! ("minus incoming and outgoing") and the physics say "+", which is what this uses. Weights need
//! not use all of B (Σ W ≤ 1, Σ_d w_{i,d} ≤ 1, each within 1e-6); a ToR whose inter-rack
//! reservations exceed b is an error, as is a read that could use a queue of no bandwidth.
//!
//! Service: X is a chunk's service time at the reference bandwidth B ([`Distribution`], whose first
//! three moments are the μ, Γ₂, Γ₃ of Lemma 2); a chunk carries X·B bytes of work, so a queue of
//! bandwidth B^eff serves it in X·B/B^eff (eq. 8). Two link disciplines ([`LinkDiscipline`]):
//! - `Reserved`: every queue is its own FCFS server at its B^eff: the paper's model (each queue an
//!   M/G/1, the premise of Lemma 2 and Theorem 1); bandwidth a queue does not use is lost.
//! - `WeightedSharing`: work-conserving generalised processor sharing (a fluid model) at the
//!   storage rack. Rack j's inter-rack queues q_{·≠j,j,·} share its aggregation uplink,
//!   Σ_{i≠j,d} W_{i,j,d}·B, and its intra-rack queues q_{j,j,·} share its ToR share, b^eff_j·Σ_d w_{j,d}:
//!   each backlogged queue serves its head chunk at the group's capacity times its weight (its
//!   B^eff) over the backlogged queues' weights, FCFS within the queue. With every queue of a group
//!   backlogged each gets exactly its reservation (so the disciplines agree at saturation); idle
//!   shares go to the backlogged queues. Why the storage side and one link: that is where lowtail
//!   enforces shares (a node's egress per class, notes D1), the paper reserves the same rate on both
//!   ToRs, and a flow crossing two shared links would need a joint (max-min) allocation whose extra
//!   fidelity nothing here measures. Intra and inter groups stay apart, as in the paper's model
//!   (ToR versus aggregation switch).
//!
//! Choices the paper leaves open: the connection delay comes first, then the queue (a Poisson
//! stream displaced by i.i.d. delays is Poisson again, so each queue is still M/G/1), drawn from
//! one distribution for intra-rack and one for inter-rack pairs (mean η, variance ξ²); servers
//! inside a rack and disks are not modelled (the paper's model has neither); a read never asks
//! for more than k chunks and nothing is cancelled; the run stops after a fixed number of reads,
//! from an empty system (callers drop a warm-up if they want a stationary sample).
//!
//! Time runs in f64 seconds inside (the fluid model needs continuous time) and the records carry
//! nanoseconds, rounded. Three random streams derived from the seed (arrivals; rack choice;
//! connection and service draws) are drawn in arrival order, so both disciplines see the same
//! reads, racks and chunk sizes for a seed (common random numbers).
//!
//! Must not: decide placement, π or weights (the optimiser's and `policy::classes`'), read a clock
//! or draw unseeded randomness.

use policy::classes::Marginals;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// How far weight sums and a ToR's remaining bandwidth may stray past their limits.
pub const WEIGHT_TOLERANCE: f64 = 1e-6;
/// Most racks.
pub const MAX_RACKS: u16 = 1024;
/// Most reads in one run (records are held in memory).
pub const MAX_REQUESTS: u32 = 50_000_000;

/// A non-negative random duration, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Distribution {
    /// Always `value_s`.
    Constant {
        /// The duration.
        value_s: f64,
    },
    /// Exponential of mean `mean_s`.
    Exponential {
        /// Its mean.
        mean_s: f64,
    },
    /// `shift_s` plus an exponential of mean `exp_mean_s` (a transfer of a fixed size plus a
    /// random overhead, or a connection's fixed and random parts).
    ShiftedExponential {
        /// The fixed part.
        shift_s: f64,
        /// Mean of the exponential part.
        exp_mean_s: f64,
    },
}

impl Distribution {
    /// `bytes` at `bytes_per_s` plus an exponential of mean `exp_mean_s` (X for chunks of a fixed
    /// size at the reference bandwidth B, with a random per-chunk overhead).
    pub fn transfer_plus_exponential(bytes: f64, bytes_per_s: f64, exp_mean_s: f64) -> Distribution {
        Distribution::ShiftedExponential { shift_s: bytes / bytes_per_s, exp_mean_s }
    }

    /// Checks every parameter is finite and non-negative.
    pub fn validate(&self) -> Result<(), String> {
        let parameters: &[f64] = match self {
            Distribution::Constant { value_s } => &[*value_s],
            Distribution::Exponential { mean_s } => &[*mean_s],
            Distribution::ShiftedExponential { shift_s, exp_mean_s } => &[*shift_s, *exp_mean_s],
        };
        if parameters.iter().all(|p| p.is_finite() && *p >= 0.0) {
            Ok(())
        } else {
            Err(format!("{self:?} needs finite non-negative parameters"))
        }
    }

    /// (shift, exponential mean): every variant is one of these.
    fn parts(&self) -> (f64, f64) {
        match *self {
            Distribution::Constant { value_s } => (value_s, 0.0),
            Distribution::Exponential { mean_s } => (0.0, mean_s),
            Distribution::ShiftedExponential { shift_s, exp_mean_s } => (shift_s, exp_mean_s),
        }
    }

    /// The raw moments E[X], E[X²], E[X³] (μ, Γ₂, Γ₃ of Lemma 2), in s, s², s³.
    pub fn moments(&self) -> [f64; 3] {
        // X = s + Y with Y ~ Exp(mean m): E[Y^t] = t!·m^t.
        let (s, m) = self.parts();
        [s + m, s * s + 2.0 * s * m + 2.0 * m * m, s.powi(3) + 3.0 * s * s * m + 6.0 * s * m * m + 6.0 * m.powi(3)]
    }

    /// E[X].
    pub fn mean(&self) -> f64 {
        self.moments()[0]
    }

    /// Var[X] (the σ² of Lemma 2, or the ξ² of a connection delay).
    pub fn variance(&self) -> f64 {
        let (_, m) = self.parts();
        m * m
    }

    /// One draw.
    pub fn sample(&self, rng: &mut (impl RngCore + ?Sized)) -> f64 {
        let (s, m) = self.parts();
        if m == 0.0 {
            return s;
        }
        let u: f64 = rng.random();
        s - m * (1.0 - u).ln()
    }
}

/// How the queues of a link use its bandwidth.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkDiscipline {
    /// Each queue an FCFS server at its own reserved bandwidth (the paper's model).
    #[default]
    Reserved,
    /// Work-conserving weighted sharing (GPS) among a storage rack's backlogged queues.
    WeightedSharing,
}

/// The network, its weights and the run's length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySetup {
    /// Racks N.
    pub racks: u16,
    /// Classes D.
    pub classes: u8,
    /// Aggregation switch bandwidth B, bytes per second (also the reference bandwidth of X).
    pub aggregate_bytes_per_s: f64,
    /// ToR bandwidth b of every rack, bytes per second.
    pub tor_bytes_per_s: f64,
    /// W_{i,j,d} at [`queue_index`]`(racks, classes, i, j, d)`; zero where i = j.
    pub inter_weights: Vec<f64>,
    /// w_{i,d} at `i·classes + d`.
    pub intra_weights: Vec<f64>,
    /// Connection delay N_{i,i} of a read inside its own rack.
    pub intra_connection: Distribution,
    /// Connection delay N_{i,j}, i ≠ j.
    pub inter_connection: Distribution,
    /// X: a chunk's service time at bandwidth B.
    pub service: Distribution,
    /// How queues share bandwidth.
    pub discipline: LinkDiscipline,
    /// Reads to simulate.
    pub requests: u32,
    /// Seed of every random draw.
    pub seed: u64,
}

/// W and w spread evenly: every inter-rack queue 1/(N(N−1)D) of B, every class 1/D of its ToR
/// (the oblivious baseline's equal weights).
pub fn equal_weights(racks: u16, classes: u8) -> (Vec<f64>, Vec<f64>) {
    let (n, d) = (usize::from(racks), usize::from(classes));
    let mut inter = vec![0.0; n * n * d];
    if n > 1 {
        let share = 1.0 / (n * (n - 1) * d) as f64;
        for i in 0..n {
            for j in (0..n).filter(|&j| j != i) {
                inter[(i * n + j) * d..(i * n + j + 1) * d].fill(share);
            }
        }
    }
    (inter, vec![1.0 / d as f64; n * d])
}

/// The index of queue q_{i,j,d} (client rack i, storage rack j, class d) in per-queue tables.
pub fn queue_index(racks: u16, classes: u8, client: u16, storage: u16, class: u8) -> usize {
    debug_assert!(client < racks && storage < racks && class < classes);
    (usize::from(client) * usize::from(racks) + usize::from(storage)) * usize::from(classes) + usize::from(class)
}

/// A file: its class, its racks S_r (n distinct), its read rates and read marginals.
#[derive(Clone, Debug, PartialEq)]
pub struct FileSpec {
    /// Its class d.
    pub class: u8,
    /// S_r: the racks of its chunks, chunk c on `racks[c]`.
    pub racks: Vec<u16>,
    /// λ_{i,r} per client rack i, reads per second (N entries).
    pub rates_per_s: Vec<f64>,
    /// π_{i,·,r} over `racks`: one entry for every client rack, or N (one per client rack).
    pub marginals: Vec<Marginals>,
}

impl FileSpec {
    /// The marginals reads from `client` use.
    fn marginals_for(&self, client: u16) -> &Marginals {
        if self.marginals.len() == 1 { &self.marginals[0] } else { &self.marginals[usize::from(client)] }
    }
}

/// Why a run was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TopologyError {
    /// A setting out of range.
    #[error("invalid setup: {0}")]
    Setup(String),
    /// A weight table of the wrong size, or a weight negative, not finite or summing past 1.
    #[error("invalid weights: {0}")]
    Weights(String),
    /// Inter-rack reservations through a rack exceed its ToR bandwidth.
    #[error("rack {rack}: inter-rack reservations leave {intra_bytes_per_s} bytes/s of its ToR")]
    TorOverbooked {
        /// The rack.
        rack: u16,
        /// b^eff of the rack (negative).
        intra_bytes_per_s: f64,
    },
    /// A file that cannot be read as given.
    #[error("file {file}: {reason}")]
    File {
        /// The file.
        file: usize,
        /// What is wrong.
        reason: String,
    },
    /// A read that could use a queue without bandwidth: it would never finish.
    #[error(
        "file {file} read from rack {client} may use rack {storage}, but q({client},{storage},{class}) has no bandwidth"
    )]
    NoBandwidth {
        /// The file.
        file: usize,
        /// Client rack.
        client: u16,
        /// Storage rack.
        storage: u16,
        /// Class.
        class: u8,
    },
}

impl TopologySetup {
    /// Checks sizes and ranges; returns B^eff of every queue ([`queue_index`] order).
    pub fn effective_bandwidths(&self) -> Result<Vec<f64>, TopologyError> {
        let setup = |reason: String| Err(TopologyError::Setup(reason));
        if self.racks == 0 || self.racks > MAX_RACKS {
            return setup(format!("{} racks: need 1 to {MAX_RACKS}", self.racks));
        }
        if self.classes == 0 {
            return setup("at least one class".into());
        }
        for (name, value) in
            [("aggregate_bytes_per_s", self.aggregate_bytes_per_s), ("tor_bytes_per_s", self.tor_bytes_per_s)]
        {
            if !(value.is_finite() && value > 0.0) {
                return setup(format!("{name} = {value} must be positive and finite"));
            }
        }
        for (name, distribution) in [
            ("intra_connection", self.intra_connection),
            ("inter_connection", self.inter_connection),
            ("service", self.service),
        ] {
            distribution.validate().map_err(|e| TopologyError::Setup(format!("{name}: {e}")))?;
        }
        if self.service.mean() <= 0.0 {
            return setup("the service time X must have a positive mean".into());
        }
        if self.requests == 0 || self.requests > MAX_REQUESTS {
            return setup(format!("{} requests: need 1 to {MAX_REQUESTS}", self.requests));
        }
        let (n, d) = (usize::from(self.racks), usize::from(self.classes));
        let weights = |reason: String| Err(TopologyError::Weights(reason));
        if self.inter_weights.len() != n * n * d || self.intra_weights.len() != n * d {
            return weights(format!(
                "{} inter and {} intra weights for {n} racks and {d} classes (need {} and {})",
                self.inter_weights.len(),
                self.intra_weights.len(),
                n * n * d,
                n * d
            ));
        }
        if let Some(bad) = self.inter_weights.iter().chain(&self.intra_weights).find(|w| !(w.is_finite() && **w >= 0.0))
        {
            return weights(format!("weight {bad} is not finite and non-negative"));
        }
        for i in 0..self.racks {
            for class in 0..self.classes {
                let w = self.inter_weights[queue_index(self.racks, self.classes, i, i, class)];
                if w != 0.0 {
                    return weights(format!("W({i},{i},{class}) = {w}: an intra-rack queue has no inter-rack weight"));
                }
            }
            let intra: f64 = self.intra_weights[usize::from(i) * d..(usize::from(i) + 1) * d].iter().sum();
            if intra > 1.0 + WEIGHT_TOLERANCE {
                return weights(format!("rack {i}: intra-rack weights sum to {intra}"));
            }
        }
        let inter: f64 = self.inter_weights.iter().sum();
        if inter > 1.0 + WEIGHT_TOLERANCE {
            return weights(format!("inter-rack weights sum to {inter}"));
        }
        let big_b = self.aggregate_bytes_per_s;
        let mut bandwidths: Vec<f64> = self.inter_weights.iter().map(|w| w * big_b).collect();
        for i in 0..self.racks {
            let intra = self.intra_rack_bytes_per_s(i);
            if intra < -WEIGHT_TOLERANCE * self.tor_bytes_per_s {
                return Err(TopologyError::TorOverbooked { rack: i, intra_bytes_per_s: intra });
            }
            for class in 0..self.classes {
                let w = self.intra_weights[usize::from(i) * d + usize::from(class)];
                bandwidths[queue_index(self.racks, self.classes, i, i, class)] = w * intra.max(0.0);
            }
        }
        Ok(bandwidths)
    }

    /// b^eff_i (eq. 3, sign corrected): the ToR bandwidth b less every inter-rack reservation
    /// into and out of rack `rack`. Negative when the reservations overbook the ToR.
    pub fn intra_rack_bytes_per_s(&self, rack: u16) -> f64 {
        let mut reserved = 0.0;
        for other in (0..self.racks).filter(|&l| l != rack) {
            for class in 0..self.classes {
                reserved += self.inter_weights[queue_index(self.racks, self.classes, rack, other, class)]
                    + self.inter_weights[queue_index(self.racks, self.classes, other, rack, class)];
            }
        }
        self.tor_bytes_per_s - reserved * self.aggregate_bytes_per_s
    }
}

/// One chunk of a read, as it went. Times are nanoseconds from the start of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRecord {
    /// The storage rack j it came from.
    pub rack: u16,
    /// Its index in the file's rack set (the chunk, or stripe unit).
    pub unit: u8,
    /// Its queue q_{i,j,d} ([`queue_index`]).
    pub queue: u32,
    /// Entered the queue (the read's arrival plus the connection delay).
    pub enqueue_ns: u64,
    /// Reached the head of its queue: service began.
    pub start_ns: u64,
    /// Its last byte was sent.
    pub finish_ns: u64,
}

impl ChunkRecord {
    /// Waiting in the queue before service.
    pub fn queue_delay_ns(&self) -> u64 {
        self.start_ns - self.enqueue_ns
    }

    /// Service (transfer) time.
    pub fn service_ns(&self) -> u64 {
        self.finish_ns - self.start_ns
    }

    /// Q of the paper: waiting plus transfer.
    pub fn sojourn_ns(&self) -> u64 {
        self.finish_ns - self.enqueue_ns
    }
}

/// One read, as it went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadRecord {
    /// Its id: arrival order from 0.
    pub request: u64,
    /// The file read (index into the run's files).
    pub file: u32,
    /// The file's class.
    pub class: u8,
    /// The client's rack i.
    pub client_rack: u16,
    /// Arrival at the client.
    pub arrival_ns: u64,
    /// Its last chunk's finish.
    pub finish_ns: u64,
    /// Its k chunks, in rack-set order.
    pub chunks: Vec<ChunkRecord>,
}

impl ReadRecord {
    /// Arrival to the last chunk's finish.
    pub fn latency_ns(&self) -> u64 {
        self.finish_ns - self.arrival_ns
    }

    /// A chunk's connection delay N_{i,j}.
    pub fn connection_ns(&self, chunk: &ChunkRecord) -> u64 {
        chunk.enqueue_ns - self.arrival_ns
    }
}

/// What a run returns.
#[derive(Clone, Debug, PartialEq)]
pub struct TopologyOutput {
    /// One record per read, by id.
    pub records: Vec<ReadRecord>,
    /// B^eff of every queue ([`queue_index`] order).
    pub effective_bytes_per_s: Vec<f64>,
    /// Events handled.
    pub events: u64,
}

/// Checks `setup` and `files`, then simulates `setup.requests` reads.
pub fn run(setup: &TopologySetup, files: &[FileSpec]) -> Result<TopologyOutput, TopologyError> {
    let bandwidths = setup.effective_bandwidths()?;
    let arrivals = check_files(setup, files, &bandwidths)?;
    let mut sim = Simulation::new(setup, files, bandwidths, arrivals);
    sim.run();
    Ok(TopologyOutput { records: sim.records, effective_bytes_per_s: sim.bandwidths, events: sim.events_handled })
}

/// Cumulative read rates over the (file, client rack) pairs that read, for drawing which pair the
/// next read of the superposed Poisson stream belongs to.
struct ArrivalTable {
    cumulative_per_s: Vec<f64>,
    pairs: Vec<(u32, u16)>,
}

fn check_files(setup: &TopologySetup, files: &[FileSpec], bandwidths: &[f64]) -> Result<ArrivalTable, TopologyError> {
    if files.is_empty() || files.len() > u32::MAX as usize {
        return Err(TopologyError::Setup(format!("{} files", files.len())));
    }
    let mut table = ArrivalTable { cumulative_per_s: Vec::new(), pairs: Vec::new() };
    let mut total = 0.0;
    let mut seen = vec![false; usize::from(setup.racks)];
    for (index, file) in files.iter().enumerate() {
        let fail = |reason: String| Err(TopologyError::File { file: index, reason });
        if file.class >= setup.classes {
            return fail(format!("class {} of {}", file.class, setup.classes));
        }
        if file.racks.is_empty() || file.racks.len() > usize::from(u8::MAX) {
            return fail(format!("{} racks", file.racks.len()));
        }
        seen.fill(false);
        for &rack in &file.racks {
            if rack >= setup.racks || seen[usize::from(rack)] {
                return fail(format!("rack {rack} repeated or not among the {} racks", setup.racks));
            }
            seen[usize::from(rack)] = true;
        }
        if file.rates_per_s.len() != usize::from(setup.racks) {
            return fail(format!("{} rates for {} racks", file.rates_per_s.len(), setup.racks));
        }
        if file.marginals.len() != 1 && file.marginals.len() != usize::from(setup.racks) {
            return fail(format!("{} marginal tables: need 1 or {}", file.marginals.len(), setup.racks));
        }
        if let Some(m) = file.marginals.iter().find(|m| m.len() != file.racks.len()) {
            return fail(format!("marginals over {} racks for a file on {}", m.len(), file.racks.len()));
        }
        for (client, &rate) in file.rates_per_s.iter().enumerate() {
            if !(rate.is_finite() && rate >= 0.0) {
                return fail(format!("rate {rate} from rack {client}"));
            }
            if rate == 0.0 {
                continue;
            }
            let client = client as u16;
            for (&storage, &pi) in file.racks.iter().zip(file.marginals_for(client).pi()) {
                let queue = queue_index(setup.racks, setup.classes, client, storage, file.class);
                if pi > 0.0 && bandwidths[queue] <= 0.0 {
                    return Err(TopologyError::NoBandwidth { file: index, client, storage, class: file.class });
                }
            }
            total += rate;
            table.cumulative_per_s.push(total);
            table.pairs.push((index as u32, client));
        }
    }
    if !(total.is_finite() && total > 0.0) {
        return Err(TopologyError::Setup(format!("total read rate {total} must be positive and finite")));
    }
    Ok(table)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Read number `n` arrives.
    Arrival(u32),
    /// A chunk's connection is up: it joins its queue.
    Enqueue(u32),
    /// A sharing group's next head chunk finishes, if nothing changed since (its version).
    GroupDone { group: u32, version: u64 },
}

/// A queue q_{i,j,d}.
#[derive(Clone, Debug)]
struct Queue {
    bytes_per_s: f64,
    /// `Reserved`: when its server is next free.
    free_at_s: f64,
    /// `WeightedSharing`: its group, its chunks (head first) and the head's work left.
    group: u32,
    fifo: VecDeque<u32>,
    head_left_bytes: f64,
}

/// `WeightedSharing`: the queues sharing one link (a storage rack's uplink or ToR share).
#[derive(Clone, Debug, Default)]
struct Group {
    capacity_bytes_per_s: f64,
    /// Backlogged queues.
    active: Vec<u32>,
    /// When the heads' work left was last brought up to date.
    updated_s: f64,
    /// Bumped whenever the active set changes: a scheduled completion of an older version is stale.
    version: u64,
    /// The queue whose head the current version's completion finishes.
    next: u32,
}

#[derive(Clone, Copy, Debug)]
struct Chunk {
    read: u32,
    slot: u8,
    queue: u32,
    work_bytes: f64,
    enqueue_s: f64,
}

struct Simulation<'a> {
    setup: &'a TopologySetup,
    files: &'a [FileSpec],
    bandwidths: Vec<f64>,
    arrivals: ArrivalTable,
    arrival_rng: ChaCha8Rng,
    choice_rng: ChaCha8Rng,
    draw_rng: ChaCha8Rng,
    queues: Vec<Queue>,
    groups: Vec<Group>,
    chunks: Vec<Chunk>,
    /// Per read: chunks not yet finished, and the latest finish so far.
    left: Vec<u8>,
    finish_s: Vec<f64>,
    records: Vec<ReadRecord>,
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    sequence: u64,
    now_s: f64,
    events_handled: u64,
    /// Most chunks a read asks for (the largest k).
    k_most: usize,
    scratch: Vec<usize>,
}

fn to_ns(seconds: f64) -> u64 {
    debug_assert!(seconds.is_finite() && seconds >= 0.0);
    (seconds * 1e9).round() as u64
}

/// A stream of the run's seed.
fn stream(seed: u64, index: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x746f_706f_6c6f_6779);
    rng.set_stream(index);
    rng
}

impl<'a> Simulation<'a> {
    fn new(setup: &'a TopologySetup, files: &'a [FileSpec], bandwidths: Vec<f64>, arrivals: ArrivalTable) -> Self {
        let (racks, classes) = (setup.racks, setup.classes);
        let mut queues = Vec::with_capacity(bandwidths.len());
        let mut groups = vec![Group::default(); 2 * usize::from(racks)];
        for client in 0..racks {
            for storage in 0..racks {
                for class in 0..classes {
                    let index = queue_index(racks, classes, client, storage, class);
                    debug_assert_eq!(index, queues.len());
                    // Rack j's inter-rack queues share group 2j, its intra-rack queues group 2j + 1.
                    let group = 2 * u32::from(storage) + u32::from(client == storage);
                    groups[group as usize].capacity_bytes_per_s += bandwidths[index];
                    queues.push(Queue {
                        bytes_per_s: bandwidths[index],
                        free_at_s: 0.0,
                        group,
                        fifo: VecDeque::new(),
                        head_left_bytes: 0.0,
                    });
                }
            }
        }
        let requests = setup.requests as usize;
        let k_most = files.iter().flat_map(|f| &f.marginals).map(Marginals::k).max().unwrap_or(1);
        Simulation {
            setup,
            files,
            bandwidths,
            arrivals,
            arrival_rng: stream(setup.seed, 1),
            choice_rng: stream(setup.seed, 2),
            draw_rng: stream(setup.seed, 3),
            queues,
            groups,
            chunks: Vec::with_capacity(requests * k_most),
            left: Vec::with_capacity(requests),
            finish_s: Vec::with_capacity(requests),
            records: Vec::with_capacity(requests),
            heap: BinaryHeap::new(),
            sequence: 0,
            now_s: 0.0,
            events_handled: 0,
            k_most,
            scratch: Vec::with_capacity(k_most),
        }
    }

    fn schedule(&mut self, at_s: f64, event: Event) {
        assert!(
            at_s.is_finite() && at_s >= self.now_s,
            "events are scheduled at or after now ({at_s} < {})",
            self.now_s
        );
        // Non-negative finite f64s order as their bits do.
        self.heap.push(Reverse((at_s.to_bits(), self.sequence, event)));
        self.sequence += 1;
    }

    fn total_rate_per_s(&self) -> f64 {
        *self.arrivals.cumulative_per_s.last().expect("checked: some pair reads")
    }

    fn run(&mut self) {
        let first = Distribution::Exponential { mean_s: 1.0 / self.total_rate_per_s() }.sample(&mut self.arrival_rng);
        self.schedule(first, Event::Arrival(0));
        // Bounded: each read arrives once; each chunk enqueues once and, when sharing, finishes once
        // and changes its group's active set at most twice (two possibly stale completions).
        let limit = u64::from(self.setup.requests) * (1 + 4 * self.k_most as u64) + 16;
        for _ in 0..limit {
            let Some(Reverse((bits, _, event))) = self.heap.pop() else { break };
            let now = f64::from_bits(bits);
            debug_assert!(now >= self.now_s, "time never runs backwards");
            self.now_s = now;
            self.events_handled += 1;
            match event {
                Event::Arrival(read) => self.arrive(read),
                Event::Enqueue(chunk) => self.enqueue(chunk),
                Event::GroupDone { group, version } => {
                    if self.groups[group as usize].version == version {
                        self.finish_head(group);
                    }
                }
            }
        }
        assert!(self.heap.is_empty(), "the run handled more events than its reads allow");
        assert_eq!(self.records.len(), self.setup.requests as usize, "every read arrived");
        assert!(self.left.iter().all(|&l| l == 0), "every chunk finished");
        assert!(self.queues.iter().all(|q| q.fifo.is_empty()), "every queue drained");
    }

    fn arrive(&mut self, read: u32) {
        let now = self.now_s;
        let total = self.total_rate_per_s();
        let point = self.arrival_rng.random::<f64>() * total;
        let pair = self.arrivals.cumulative_per_s.partition_point(|&c| c <= point).min(self.arrivals.pairs.len() - 1);
        let (file_index, client) = self.arrivals.pairs[pair];
        if read + 1 < self.setup.requests {
            let gap = Distribution::Exponential { mean_s: 1.0 / total }.sample(&mut self.arrival_rng);
            self.schedule(now + gap, Event::Arrival(read + 1));
        }
        let file = &self.files[file_index as usize];
        let marginals = file.marginals_for(client);
        let mut chosen = std::mem::take(&mut self.scratch);
        marginals.sample(&mut self.choice_rng, &mut chosen);
        let mut record = ReadRecord {
            request: u64::from(read),
            file: file_index,
            class: file.class,
            client_rack: client,
            arrival_ns: to_ns(now),
            finish_ns: 0,
            chunks: Vec::with_capacity(chosen.len()),
        };
        for (slot, &position) in chosen.iter().enumerate() {
            let storage = file.racks[position];
            let queue = queue_index(self.setup.racks, self.setup.classes, client, storage, file.class);
            let connection = if storage == client { self.setup.intra_connection } else { self.setup.inter_connection };
            let delay_s = connection.sample(&mut self.draw_rng);
            let work_bytes = self.setup.service.sample(&mut self.draw_rng) * self.setup.aggregate_bytes_per_s;
            let id = u32::try_from(self.chunks.len()).expect("fewer than 2^32 chunks");
            self.chunks.push(Chunk {
                read,
                slot: slot as u8,
                queue: queue as u32,
                work_bytes,
                enqueue_s: now + delay_s,
            });
            record.chunks.push(ChunkRecord {
                rack: storage,
                unit: position as u8,
                queue: queue as u32,
                enqueue_ns: 0,
                start_ns: 0,
                finish_ns: 0,
            });
            self.schedule(now + delay_s, Event::Enqueue(id));
        }
        assert_eq!(chosen.len(), marginals.k(), "a read asks for k chunks");
        self.left.push(chosen.len() as u8);
        self.finish_s.push(now);
        debug_assert_eq!(self.records.len(), read as usize);
        self.records.push(record);
        self.scratch = chosen;
    }

    fn enqueue(&mut self, id: u32) {
        let now = self.now_s;
        let chunk = self.chunks[id as usize];
        let queue = &mut self.queues[chunk.queue as usize];
        assert!(queue.bytes_per_s > 0.0, "checked: reads only use queues with bandwidth");
        match self.setup.discipline {
            LinkDiscipline::Reserved => {
                let start = now.max(queue.free_at_s);
                let finish = start + chunk.work_bytes / queue.bytes_per_s;
                queue.free_at_s = finish;
                self.started(id, start);
                self.finished(id, finish);
            }
            LinkDiscipline::WeightedSharing => {
                let group = queue.group;
                self.advance(group);
                let queue = &mut self.queues[chunk.queue as usize];
                queue.fifo.push_back(id);
                assert!(queue.fifo.len() <= self.chunks.len(), "a queue holds at most the chunks of the run");
                if queue.fifo.len() == 1 {
                    queue.head_left_bytes = chunk.work_bytes;
                    self.groups[group as usize].active.push(chunk.queue);
                    self.started(id, now);
                }
                self.reschedule(group);
            }
        }
    }

    /// Brings the heads' work left in `group` up to now, each backlogged queue having been served at
    /// its weighted share of the group's capacity since the last change.
    fn advance(&mut self, group: u32) {
        let now = self.now_s;
        let group = &mut self.groups[group as usize];
        let elapsed = now - group.updated_s;
        group.updated_s = now;
        if elapsed <= 0.0 || group.active.is_empty() {
            return;
        }
        let weight: f64 = group.active.iter().map(|&q| self.queues[q as usize].bytes_per_s).sum();
        for &q in &group.active {
            let queue = &mut self.queues[q as usize];
            let rate = group.capacity_bytes_per_s * queue.bytes_per_s / weight;
            queue.head_left_bytes = (queue.head_left_bytes - rate * elapsed).max(0.0);
        }
    }

    /// Schedules the group's next head completion at the current shares (stale ones are ignored).
    fn reschedule(&mut self, group_id: u32) {
        let now = self.now_s;
        let group = &mut self.groups[group_id as usize];
        group.version += 1;
        let Some(&first) = group.active.first() else { return };
        let weight: f64 = group.active.iter().map(|&q| self.queues[q as usize].bytes_per_s).sum();
        let time_left = |q: u32| {
            let queue = &self.queues[q as usize];
            queue.head_left_bytes * weight / (group.capacity_bytes_per_s * queue.bytes_per_s)
        };
        let (mut next, mut soonest) = (first, time_left(first));
        for &q in &group.active[1..] {
            let t = time_left(q);
            if t < soonest {
                (next, soonest) = (q, t);
            }
        }
        group.next = next;
        let event = Event::GroupDone { group: group_id, version: group.version };
        self.schedule(now + soonest, event);
    }

    /// The group's scheduled head finishes now; the next chunk of its queue starts.
    fn finish_head(&mut self, group_id: u32) {
        self.advance(group_id);
        let now = self.now_s;
        let (q, capacity) = {
            let group = &self.groups[group_id as usize];
            (group.next, group.capacity_bytes_per_s)
        };
        let queue = &mut self.queues[q as usize];
        let id = queue.fifo.pop_front().expect("a scheduled completion has a head chunk");
        // What rounding left of its work (the event's time is rounded to an ulp of now) is served in
        // this instant.
        let slack_bytes = 1e-6 * self.chunks[id as usize].work_bytes + capacity * now * 1e-12;
        debug_assert!(
            queue.head_left_bytes <= slack_bytes,
            "{} bytes left at the head's finish",
            queue.head_left_bytes
        );
        match queue.fifo.front() {
            Some(&head) => {
                queue.head_left_bytes = self.chunks[head as usize].work_bytes;
                self.started(head, now);
            }
            None => {
                queue.head_left_bytes = 0.0;
                let active = &mut self.groups[group_id as usize].active;
                let at = active.iter().position(|&a| a == q).expect("a queue with chunks is active");
                active.remove(at);
            }
        }
        self.finished(id, now);
        self.reschedule(group_id);
    }

    fn started(&mut self, id: u32, start_s: f64) {
        let chunk = self.chunks[id as usize];
        let record = &mut self.records[chunk.read as usize].chunks[usize::from(chunk.slot)];
        record.enqueue_ns = to_ns(chunk.enqueue_s);
        record.start_ns = to_ns(start_s);
        debug_assert!(start_s >= chunk.enqueue_s);
    }

    fn finished(&mut self, id: u32, finish_s: f64) {
        let chunk = self.chunks[id as usize];
        let read = chunk.read as usize;
        let record = &mut self.records[read];
        record.chunks[usize::from(chunk.slot)].finish_ns = to_ns(finish_s);
        self.finish_s[read] = self.finish_s[read].max(finish_s);
        assert!(self.left[read] > 0, "a chunk finishes once");
        self.left[read] -= 1;
        if self.left[read] == 0 {
            record.finish_ns = to_ns(self.finish_s[read]);
            debug_assert_eq!(record.finish_ns, record.chunks.iter().map(|c| c.finish_ns).max().unwrap_or(0));
        }
    }
}

#[cfg(test)]
mod tests;
