//! What the node RPC's two sides share: the cluster secret's metadata key and both of its checks
//! (`AttachSecret` on a client's calls, `SecretCheck` on the server's), the message limit, the
//! connect timeout, a client's errors and unit ranges, and the duration metric of every request.
//! Below `client`, `server`, `session` and `unit_stream`; must not connect or serve anything.

use std::sync::Arc;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::{Code, Request, Status};

/// Metadata entry that carries the cluster secret.
pub const SECRET_METADATA_KEY: &str = "x-lowtail-secret";
/// Largest message either side accepts (chunks are at most 2 MiB).
pub const MAX_MESSAGE_BYTES: usize = 8 << 20;
/// Limit on establishing the connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A failed client call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The address or secret cannot be used.
    #[error("invalid client setting: {0}")]
    Invalid(String),
    /// No connection could be made.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The node's address.
        addr: String,
        /// Why.
        source: tonic::transport::Error,
    },
    /// The call did not finish within the client's timeout.
    #[error("{operation} timed out after {timeout:?}")]
    Timeout {
        /// The RPC.
        operation: &'static str,
        /// The limit.
        timeout: Duration,
    },
    /// The node answered with an error status (see [`ClientError::code`]).
    #[error("node refused {operation}: {status}")]
    Status {
        /// The RPC.
        operation: &'static str,
        /// The node's answer.
        status: tonic::Status,
    },
    /// The unit stream's connection failed (refused, reset, closed mid-answer).
    #[error("unit stream to {addr} failed in {operation}: {source}")]
    Stream {
        /// The call.
        operation: &'static str,
        /// The node's address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The node's answer broke the protocol (wrong length, missing timing).
    #[error("protocol violation in {operation}: {what}")]
    Protocol {
        /// The RPC.
        operation: &'static str,
        /// What was wrong.
        what: String,
    },
}

impl ClientError {
    /// The gRPC code of a node error (`DataLoss` = corrupt unit, `NotFound`, `OutOfRange`,
    /// `ResourceExhausted` = queue full, `Unauthenticated`, ...); `None` for local failures.
    pub fn code(&self) -> Option<Code> {
        match self {
            Self::Status { status, .. } => Some(status.code()),
            _ => None,
        }
    }

    /// Whether the unit failed its checksum on the node (read it elsewhere, repair it).
    pub fn is_corrupt(&self) -> bool {
        self.code() == Some(Code::DataLoss)
    }

    /// Whether the node does not hold the unit asked for.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(Code::NotFound)
    }
}

/// Adds the cluster secret to every request.
#[derive(Clone)]
pub struct AttachSecret {
    value: AsciiMetadataValue,
}

impl std::fmt::Debug for AttachSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AttachSecret(..)")
    }
}

impl AttachSecret {
    /// Attaches `value` (the cluster secret, checked ASCII).
    pub(crate) fn new(value: AsciiMetadataValue) -> AttachSecret {
        AttachSecret { value }
    }
}

impl Interceptor for AttachSecret {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        request.metadata_mut().insert(SECRET_METADATA_KEY, self.value.clone());
        Ok(request)
    }
}

/// One range of one unit in a merged read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnitRange {
    /// Stripe of the unit.
    pub stripe: u64,
    /// Index of the unit within its stripe.
    pub unit: u16,
    /// First byte.
    pub offset: u64,
    /// Bytes asked for.
    pub length: u64,
}

/// A protocol violation in `operation` (shared with the unit stream's client).
pub(crate) fn protocol(operation: &'static str, what: impl Into<String>) -> ClientError {
    ClientError::Protocol { operation, what: what.into() }
}

/// Refuses requests that do not carry the cluster secret (compared in constant time).
#[derive(Clone)]
pub struct SecretCheck {
    secret: Arc<[u8]>,
}

impl SecretCheck {
    /// A check against `secret` (must not be empty).
    pub fn new(secret: &str) -> Self {
        assert!(!secret.is_empty(), "an empty cluster secret would let anyone in");
        Self { secret: Arc::from(secret.as_bytes()) }
    }

    /// Whether `presented` is the cluster secret (compared in constant time).
    pub fn accepts(&self, presented: &[u8]) -> bool {
        bool::from(presented.ct_eq(&self.secret))
    }
}

impl std::fmt::Debug for SecretCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretCheck(..)")
    }
}

impl Interceptor for SecretCheck {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let presented = request.metadata().get(SECRET_METADATA_KEY).map(|value| value.as_bytes());
        match presented {
            Some(presented) if self.accepts(presented) => Ok(request),
            Some(_) => Err(Status::unauthenticated("wrong cluster secret")),
            None => Err(Status::unauthenticated(format!("missing {SECRET_METADATA_KEY}"))),
        }
    }
}

/// Records one request's duration (gRPC calls and unit-stream requests alike).
pub(crate) fn observe_rpc(node: String, rpc: &'static str, began: Instant, code: String) {
    metrics::histogram!("lowtail_node_rpc_duration_seconds", "node" => node, "rpc" => rpc, "code" => code)
        .record(began.elapsed().as_secs_f64());
}
