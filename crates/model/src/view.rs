//! What a probe of a storage node returns.
//!
//! Must not: say how probes are sent or counted (executors do that).

use serde::{Deserialize, Serialize};

/// The queue of one storage node, as a probe sees it: the paper measures
/// load in bytes because tasks differ in size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueState {
    /// Bytes of every task on the node that has not finished (waiting and in
    /// service), the queue size Q of Hu et al.
    pub bytes: u64,
    /// Tasks on the node that have not finished.
    pub tasks: u32,
}

impl QueueState {
    /// What a node that cannot be reached (down, or its probe unanswered) looks like to a policy:
    /// full, so that no plan prefers it, with room left to add loads without overflow.
    pub const UNREACHABLE: QueueState = QueueState { bytes: 1 << 50, tasks: u32::MAX };
}
