//! EC-Store's setting in the simulator (Abebe et al., §VI): closed-loop clients that each read a
//! batch of blocks (whole stripes), wait for its last block, think, and read the next; FCFS nodes
//! where the units one batch reads on one node can run as one task (one per-task overhead: the
//! "o_j once per site" the cost model assumes); a frontend that looks up metadata, plans through
//! an [`AccessPolicy`], decodes blocks read from parity, and hands exact solves to one background
//! solver whose time is modelled. Each block read runs through the execution core
//! ([`execution::ReadExecution`], target [`execution::WHOLE_STRIPE`]); records are the shared
//! schema: one [`model::RequestRecord`] per block with its tasks, one [`model::BatchRecord`] per
//! batch.
//!
//! Must not: decide anything the policy or the execution core decides, read a clock, or draw
//! unseeded random numbers.

mod engine;

use crate::NodeModel;
use codec::CodeSpec;
use model::{BatchRecord, MoveRecord, Placement, RecordLog};
use policy::ecstore::access::{AccessCounters, AccessPolicy};
use policy::ecstore::mover::Mover;
use serde::{Deserialize, Serialize};
use workload::batch::BatchGenerator;

/// The frontend's costs (the paper's client service): none of them queues.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchFrontend {
    /// One metadata lookup per batch (R1 of the paper's read path).
    pub metadata_ns: u64,
    /// Fixed planning time per batch.
    pub decision_ns: u64,
    /// Planning time per block of the batch.
    pub decision_per_block_ns: u64,
    /// Decoding rate of a block read from parity, bytes of the block per second.
    pub decode_bytes_per_s: f64,
}

impl Default for BatchFrontend {
    fn default() -> Self {
        BatchFrontend {
            metadata_ns: 500_000,
            decision_ns: 20_000,
            decision_per_block_ns: 2_000,
            decode_bytes_per_s: 1e9,
        }
    }
}

/// The background solver of exact plans: one worker, FCFS; a solve takes `base_ns` plus
/// `ns_per_node` for every branch-and-bound node it visited. Inline solves (one block) are charged
/// to the decision at `ns_per_node`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SolverModel {
    /// Fixed time per solve (the paper's SCIP took "tens of milliseconds").
    pub base_ns: u64,
    /// Time per node visited.
    pub ns_per_node: u64,
}

impl Default for SolverModel {
    fn default() -> Self {
        SolverModel { base_ns: 50_000, ns_per_node: 1_000 }
    }
}

/// Everything a batch run needs besides the policy and the workload.
#[derive(Clone, Debug)]
pub struct BatchSetup {
    /// The blocks' code.
    pub spec: CodeSpec,
    /// Where each unit is: block `i` is stripe `i`.
    pub placement: Placement,
    /// Bytes of each unit of block `i` (its chunk size).
    pub unit_bytes: Vec<u64>,
    /// Nodes (FCFS, one server each; outages are failures without repair).
    pub nodes: NodeModel,
    /// One-way network latency.
    pub network_latency_ns: u64,
    /// Frontend costs.
    pub frontend: BatchFrontend,
    /// Whether a batch's units on one node run as one task.
    pub site_batching: bool,
    /// Closed-loop clients.
    pub clients: u32,
    /// Think time between a batch's completion and the client's next.
    pub think_ns: u64,
    /// Clients issue no batch at or after this time; the run ends when the last completes.
    pub end_ns: u64,
    /// The background solver.
    pub solver: SolverModel,
    /// Time from a node going down to the frontend knowing it (then plans avoid it).
    pub failure_detect_ns: u64,
    /// Period of the nodes' load reports to the mover's statistics (the paper's 5–10 s).
    pub load_period_ns: u64,
    /// Seed of the engine's streams.
    pub seed: u64,
}

impl BatchSetup {
    /// Checks the setup; returns what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        let stripes = self.placement.stripe_count() as usize;
        if self.unit_bytes.len() != stripes {
            return Err(format!("{} unit sizes for {stripes} blocks", self.unit_bytes.len()));
        }
        if self.unit_bytes.contains(&0) {
            return Err("a block has units of 0 bytes".into());
        }
        if self.nodes.rates_bytes_per_s.len() != self.placement.node_count() as usize {
            return Err("one rate per node".into());
        }
        if self.nodes.servers != 1 {
            return Err("batch nodes are FCFS with one server".into());
        }
        if self.load_period_ns == 0 {
            return Err("load_period_ns must be positive".into());
        }
        if self.clients == 0 || self.end_ns == 0 {
            return Err("a run needs clients and a positive end time".into());
        }
        if self.frontend.decode_bytes_per_s.is_nan() || self.frontend.decode_bytes_per_s <= 0.0 {
            return Err("decode rate must be positive".into());
        }
        if self.spec.total_units() > usize::from(u8::MAX) {
            return Err("codes of at most 254 units".into());
        }
        Ok(())
    }
}

/// What a batch run produced.
#[derive(Clone, Debug)]
pub struct BatchOutput {
    /// One record per block read, by request id (a batch's blocks are consecutive).
    pub records: RecordLog,
    /// One record per batch, by batch id.
    pub batches: Vec<BatchRecord>,
    /// Service time spent per node.
    pub node_busy_ns: Vec<u64>,
    /// What the policy decided (cache hits, solves).
    pub counters: AccessCounters,
    /// Exact solves the background solver ran, and its busy time.
    pub solves: u64,
    /// The solver's busy time.
    pub solver_busy_ns: u64,
    /// Probes of the cost table's refreshes.
    pub refresh_probes: u64,
    /// The mover's moves, in the order they started (none without a mover).
    pub moves: Vec<MoveRecord>,
    /// Events processed.
    pub events: u64,
    /// Time of the last event.
    pub end_ns: u64,
}

/// Runs `policy` (and `mover`, if any) over closed-loop clients reading batches from `generator`.
pub fn run_batches(
    setup: &BatchSetup,
    policy: AccessPolicy,
    mover: Option<Mover>,
    generator: &BatchGenerator,
) -> BatchOutput {
    if let Err(problem) = setup.validate() {
        panic!("invalid batch setup: {problem}");
    }
    assert_eq!(generator.block_bytes().len(), setup.unit_bytes.len(), "workload and placement disagree on blocks");
    engine::BatchEngine::new(setup, policy, mover, generator).run()
}

#[cfg(test)]
mod tests;
