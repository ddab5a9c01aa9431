//! The node's error type and its mapping onto gRPC status codes. Owns how a failure is named and
//! which code a client sees; must not decide what the caller does about it (retry, degraded read
//! and repair are the gateway's business).

use std::fmt;
use std::path::PathBuf;

use tonic::{Code, Status};

/// One erasure-coded shard of a stripe: the unit `unit` of stripe `stripe`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnitId {
    /// Stripe the unit belongs to.
    pub stripe: u64,
    /// Index of the unit within its stripe (data units first, then parities).
    pub unit: u16,
}

impl UnitId {
    /// The unit `unit` of stripe `stripe`.
    pub fn new(stripe: u64, unit: u16) -> Self {
        Self { stripe, unit }
    }
}

impl fmt::Display for UnitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.stripe, self.unit)
    }
}

/// Everything a node operation can fail with. Each variant maps to one distinct gRPC code
/// ([`NodeError::code`]) so that a client can tell them apart without parsing messages.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The unit is not stored on this node.
    #[error("unit {0} not found")]
    NotFound(UnitId),
    /// Bytes of the unit failed their checksum; they are never served.
    #[error("unit {unit} is corrupt: {what}")]
    Corrupt {
        /// The unit that failed.
        unit: UnitId,
        /// Which part failed (a block, the header, the length).
        what: String,
    },
    /// A ranged read asked for bytes past the unit's end.
    #[error("range offset {offset} length {length} is beyond unit {unit} of {unit_len} bytes")]
    OutOfRange {
        /// The unit read.
        unit: UnitId,
        /// Requested start.
        offset: u64,
        /// Requested length.
        length: u64,
        /// The unit's length.
        unit_len: u64,
    },
    /// A malformed request (unit index too large, unit too long, chunk lengths that do not add up).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The queue is at its configured limit; the task was not admitted.
    #[error(
        "queue full: {queued_tasks} tasks / {queued_bytes} bytes queued, limits {max_queued_tasks} tasks / \
         {max_queued_bytes} bytes, task of {task_bytes} bytes refused"
    )]
    QueueFull {
        /// Tasks waiting when the task was refused.
        queued_tasks: u64,
        /// Bytes waiting when the task was refused.
        queued_bytes: u64,
        /// Configured task limit.
        max_queued_tasks: u64,
        /// Configured byte limit.
        max_queued_bytes: u64,
        /// Size of the refused task.
        task_bytes: u64,
    },
    /// The task was cancelled before it finished.
    #[error("task cancelled")]
    Cancelled,
    /// Too many reconstruction sessions are open; the new one was not opened.
    #[error("reconstruction sessions exhausted: {0}")]
    Overloaded(String),
    /// A reconstruction session could not go on (a peer failed, the session ended or timed out).
    #[error("reconstruction session failed: {0}")]
    Unavailable(String),
    /// The node is shutting down and takes no new tasks.
    #[error("node is shutting down")]
    ShuttingDown,
    /// Another process holds the data directory (a node already runs on it).
    #[error("data directory {0} is in use by another lowtail node process; stop that one first")]
    DirectoryInUse(PathBuf),
    /// A file-system operation failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl NodeError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }

    /// The gRPC code a client sees for this error. `Corrupt` is `DataLoss`, distinct from every
    /// other failure, so a gateway knows to read elsewhere and to schedule repair.
    pub fn code(&self) -> Code {
        match self {
            Self::NotFound(_) => Code::NotFound,
            Self::Corrupt { .. } => Code::DataLoss,
            Self::OutOfRange { .. } => Code::OutOfRange,
            Self::InvalidArgument(_) => Code::InvalidArgument,
            Self::QueueFull { .. } => Code::ResourceExhausted,
            Self::Cancelled => Code::Cancelled,
            Self::Overloaded(_) => Code::ResourceExhausted,
            Self::Unavailable(_) => Code::Unavailable,
            Self::ShuttingDown => Code::Unavailable,
            Self::DirectoryInUse(_) => Code::FailedPrecondition,
            Self::Io { .. } => Code::Internal,
        }
    }
}

impl From<NodeError> for Status {
    fn from(error: NodeError) -> Self {
        Status::new(error.code(), error.to_string())
    }
}
