//! The execution core: how a plan runs, as sans-I/O state machines that both executors drive (the
//! simulator with virtual-time events, the gateway with node RPC completions and its runtime's timers), so
//! the two agree by construction. Modelled on quinn-proto: a shell feeds events in
//! ([`ReadExecution::handle`]) and carries out the actions that come back
//! ([`ReadExecution::poll_action`]).
//!
//! - [`read`]: one read plan's execution: which tasks start, when the fallback launches, when the
//!   read is complete (from which units, decoded or not), what is cancelled, when it failed.
//! - [`admission`]: a pool of L in-flight tasks with a request queue, blocking or not.
//! - [`reconstruct`]: the packet dataflows of degraded reads (gateway decode, traditional, PPR,
//!   ECPipe, APLS, segmented).
//! - [`recovery`]: which units determine a target unit (the code's answer, shared by both shells).
//! - [`write`]: one write's execution: its copies, retries elsewhere, when it is acknowledged (all,
//!   early, or without one straggler), what is left pending, and whether it met the durability rule.
//!
//! Must not: read a clock, sleep, spawn, do I/O or draw randomness; time is an argument and every
//! effect is an action for the shell to carry out.

pub mod admission;
pub mod read;
pub mod reconstruct;
pub mod recovery;
pub mod write;

pub use admission::{Admission, AdmissionMode, AdmissionSettings, Admitted};
pub use read::{Action, Event, FailReason, ReadExecution, TaskState, WHOLE_STRIPE};
pub use write::{
    CopyState, Durability, StragglerWait, WriteAction, WriteEvent, WriteExecution, WriteRule, WriteSettings,
};
