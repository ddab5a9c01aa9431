//! `lowtail load`: a workload (the WAS-like generator or a trace) replayed against running gateways
//! as S3 GETs, open loop (every request at its arrival time) or closed loop (N clients with think
//! time), recorded client-side in the shared record schema and written as a results folder.
//!
//! Owns: the choice of workload and its caps for a live cluster ([`source`]), object keys and
//! contents ([`objects`]), the open- and closed-loop executors over any fetch function
//! ([`executor`]), the S3 side: loading the objects and the checked GETs ([`s3`]), and the run as a
//! whole ([`run`]).
//! Must not: decide anything a policy decides (it is a client: it sees neither probes nor degraded
//! reads), retry a request, or hide a failed one (every failure is a record with
//! `Outcome::Failed`). It reads a monotonic clock: it is an executor-side driver, not the policy spine.

pub mod executor;
pub mod objects;
pub mod run;
pub mod s3;
pub mod source;

pub use executor::{LoopMode, gateway_for};
pub use run::{LoadConfig, LoadOutcome, LoadStats, run_load};
pub use source::{LiveCaps, WorkloadSource};
