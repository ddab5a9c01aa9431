//! Shared types of lowtail's scheduling spine: ids, code layouts, placement,
//! read requests (single and batches of blocks), read and write plans, and the one record schema that every
//! executor (the simulator and the live gateway) emits.
//!
//! Owns: plain data and the arithmetic that is a property of the data (which
//! node holds a unit, which units rebuild a unit, how many bytes a plan reads).
//! Must not: decide anything (that is `policy`), keep time, draw random
//! numbers, or do I/O. Times are integer nanoseconds (`u64`) of virtual or
//! monotonic time so that runs are bit-reproducible.

mod batch;
mod ids;
mod layout;
mod plan;
pub mod reconstruct;
mod record;
mod request;
mod view;

pub use batch::{BatchPlan, BatchRecord, BlockRead, MoveRecord, PlanSource};
pub use ids::{FrontendId, NodeId, ObjectId, PartitionId, RequestId, StripeId};
pub use layout::{CodeLayout, LayoutError, Placement, RecoverySet, UnitLocation};
pub use plan::{
    AckRule, DecodeAt, PlannedTask, Quorum, ReadPlan, ReconstructionTopology, TaskRole, UnitWrite, WritePlan,
};
pub use record::{LayerDecisions, Outcome, Record, RecordLog, RecordRef, RequestRecord, TaskRecord};
pub use request::ReadRequest;
pub use view::QueueState;

/// Nanoseconds per second, for conversions at the edges (configs, reports).
pub const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// Sentinel for a time that was never reached (a task cancelled before it
/// started has `start_ns == NEVER` and `finish_ns == NEVER`).
pub const NEVER: u64 = u64::MAX;
