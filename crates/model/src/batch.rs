//! Reads of several blocks at once (EC-Store's requests, Abebe et al.): what a batch asks for, the
//! plan an access policy returns for it, and the record an executor writes per batch beside the
//! per-block [`crate::RequestRecord`]s; and the record of one chunk move of EC-Store's mover.
//!
//! A block is one stripe read whole; a batch is complete when its last block is. A batch's block
//! reads take consecutive request ids from [`BatchRecord::first_request`], so the per-block records
//! (and their tasks) of a batch are found without a field of their own.
//!
//! Must not: decide anything or keep time.

use crate::ids::{NodeId, RequestId, StripeId};
use crate::plan::ReadPlan;
use crate::record::Outcome;
use serde::{Deserialize, Serialize};

/// One block of a batch: a whole stripe, read as `need` of its units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockRead {
    /// The stripe holding the block.
    pub stripe: StripeId,
    /// Bytes of each of its units (the chunk size z of EC-Store).
    pub unit_bytes: u64,
}

/// Where a batch's plan came from: what the plan cache's hit rate is computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum PlanSource {
    /// A rule that needs no model (random units, data units first).
    Rule = 0,
    /// Solved exactly while deciding (a request small enough to: one block).
    Exact = 1,
    /// A cached exact plan, solved under the current costs.
    CacheHit = 2,
    /// A cached exact plan solved under costs that have since moved; re-solved in the background.
    StaleHit = 3,
    /// The greedy plan of a cache miss; the exact one is solved in the background.
    Greedy = 4,
}

impl PlanSource {
    /// Whether the plan came out of the plan cache.
    pub fn is_cache_hit(self) -> bool {
        matches!(self, PlanSource::CacheHit | PlanSource::StaleHit)
    }
}

/// An access policy's plan for a batch: one read plan per block, in the batch's order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchPlan {
    /// Per block, its units to read and when it is complete (every task's `length` is the unit's
    /// length; a block is read whole).
    pub blocks: Vec<ReadPlan>,
    /// Where the plan came from.
    pub source: PlanSource,
    /// Branch-and-bound nodes the decision itself explored (a single block solved inline): what
    /// an executor charges the decision for, and what shows that no batch waited for a solve.
    pub inline_solver_nodes: u64,
}

/// What an executor records of one batch (its blocks' records carry their tasks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchRecord {
    /// Unique within a run.
    pub batch: u64,
    /// The closed-loop client that issued it.
    pub client: u32,
    /// Its blocks' records are requests `first_request .. first_request + blocks`.
    pub first_request: RequestId,
    /// Blocks read.
    pub blocks: u32,
    /// Bytes of the blocks (what the client gets back).
    pub bytes: u64,
    /// When the client issued it.
    pub arrival_ns: u64,
    /// When planning started (after the metadata lookup).
    pub decision_start_ns: u64,
    /// When the plan's tasks were sent.
    pub decision_end_ns: u64,
    /// When its last block was available (after decoding).
    pub completion_ns: u64,
    /// Modelled or measured CPU time of the decision.
    pub decision_cpu_ns: u64,
    /// Where the plan came from.
    pub source: PlanSource,
    /// Branch-and-bound nodes explored while deciding.
    pub inline_solver_nodes: u64,
    /// Failed when any block failed.
    pub outcome: Outcome,
}

impl BatchRecord {
    /// Batch latency: issue to last block.
    pub fn latency_ns(&self) -> u64 {
        debug_assert!(self.completion_ns >= self.arrival_ns);
        self.completion_ns - self.arrival_ns
    }

    /// The request ids of its blocks.
    pub fn requests(&self) -> std::ops::Range<u64> {
        self.first_request.0..self.first_request.0 + u64::from(self.blocks)
    }
}

/// One unit moved by EC-Store's mover: copied from `from` to `to`, then the placement switched.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoveRecord {
    /// The stripe.
    pub stripe: StripeId,
    /// The unit moved.
    pub unit: u8,
    /// The node it left.
    pub from: NodeId,
    /// The node it went to.
    pub to: NodeId,
    /// Bytes copied.
    pub bytes: u64,
    /// When the move was chosen.
    pub start_ns: u64,
    /// When the placement switched ([`crate::NEVER`]: the move failed and nothing changed).
    pub end_ns: u64,
    /// Δ, and its parts E (access, in the cost table's unit: ns) and I (balance).
    pub gain: f64,
    /// E.
    pub access_gain: f64,
    /// I.
    pub balance_gain: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_names_its_blocks_requests_and_round_trips() {
        let record = BatchRecord {
            batch: 3,
            client: 1,
            first_request: RequestId(10),
            blocks: 4,
            bytes: 400,
            arrival_ns: 100,
            decision_start_ns: 110,
            decision_end_ns: 120,
            completion_ns: 1_100,
            decision_cpu_ns: 10,
            source: PlanSource::StaleHit,
            inline_solver_nodes: 0,
            outcome: Outcome::Ok,
        };
        assert_eq!(record.latency_ns(), 1_000);
        assert_eq!(record.requests(), 10..14);
        assert!(record.source.is_cache_hit() && !PlanSource::Greedy.is_cache_hit());
        let text = serde_json::to_string(&record).unwrap();
        assert!(text.contains("\"source\":\"stale_hit\""), "{text}");
        assert_eq!(serde_json::from_str::<BatchRecord>(&text).unwrap(), record);
    }
}
