//! The unit stream: the node's data plane for unit bytes, beside its gRPC control calls on the
//! same port. A read's answer is a fixed head and the unit's raw bytes; a merged read's (several
//! ranges as one task) is a fixed head and, per range, a small fixed head and its raw bytes; a
//! write is a fixed header and the raw bytes, answered once they are durable. No HTTP/2 framing,
//! flow control or per-message protobuf: the bytes cross the connection once each way with one
//! copy into and out of the kernel (docs/benchmarks.md has the measurement against gRPC).
//!
//! Owns the transport only. The node's tasks still go through its queue, in their class, and the
//! same error codes reach the client as over gRPC. Must not decide policy.

pub(crate) mod client;
pub(crate) mod server;
pub mod wire;

use serde::{Deserialize, Serialize};

/// How a [`crate::NodeClient`] moves unit bytes (reads and writes); every other call is gRPC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitTransport {
    /// The unit stream (the default).
    #[default]
    Stream,
    /// gRPC streaming calls, as before the unit stream existed; kept to compare and as a fallback.
    Grpc,
}
