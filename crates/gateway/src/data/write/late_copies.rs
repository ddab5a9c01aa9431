//! The bound on copies a node is given after their write was acknowledged: a unit or replica
//! still landing when the straggler rule (or a bucket's early ack rule) acknowledged its write.
//! A node that is slow but not dead is the one that collects them; unbounded, its backlog grows
//! with the write rate and every read of it waits behind that backlog. Past the bound a late copy
//! is dropped instead: it is left missing, as a failed copy is, for repair (striped units, after
//! the stripe's pending deadline) or the seal (packed replicas, written again from the open
//! stripe's buffer), both of which the durability contract already covers.
//!
//! Owns: the count of late copies in flight per node, the bound, and the count of copies dropped.
//! Must not: do I/O (it only aborts the task of a copy it drops), decide when a write is acknowledged (the execution core's `WriteExecution`
//! does), or record anything in metadata (the caller records a dropped copy missing).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use meta::NodeId;
use tokio::task::JoinHandle;

use crate::data::lock;

/// Late copies in flight per node, at most `max_per_node` each.
#[derive(Debug)]
pub struct LateCopies {
    max_per_node: usize,
    in_flight: std::sync::Mutex<BTreeMap<NodeId, usize>>,
    dropped: AtomicU64,
}

/// One late copy admitted to its node: the node's count goes down when this is dropped (the copy
/// landed or failed).
#[derive(Debug)]
pub struct LateCopy {
    copies: Arc<LateCopies>,
    node: NodeId,
}

impl LateCopies {
    /// At most `max_per_node` late copies in flight to any one node (positive: validated).
    pub fn new(max_per_node: usize) -> Arc<Self> {
        assert!(max_per_node > 0, "a node takes at least one late copy");
        Arc::new(Self { max_per_node, in_flight: std::sync::Mutex::new(BTreeMap::new()), dropped: AtomicU64::new(0) })
    }

    /// A place for one more late copy on `node`, or `None` (counted as dropped) when it has its
    /// bound in flight: the caller then abandons the copy and leaves it missing.
    pub fn admit(self: &Arc<Self>, node: NodeId) -> Option<LateCopy> {
        let mut in_flight = lock(&self.in_flight);
        let count = in_flight.entry(node).or_insert(0);
        if *count >= self.max_per_node {
            drop(in_flight);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("lowtail_gateway_late_copies_dropped_total").increment(1);
            return None;
        }
        *count += 1;
        Some(LateCopy { copies: Arc::clone(self), node })
    }

    /// The late write `handle` to `node` with its place, or `None` when `node` has its bound in
    /// flight: the write is then aborted (the gateway holds no more of it) and the caller leaves
    /// the copy missing.
    pub fn admit_or_abort<T>(
        self: &Arc<Self>,
        node: NodeId,
        handle: JoinHandle<T>,
    ) -> Option<(JoinHandle<T>, LateCopy)> {
        match self.admit(node) {
            Some(place) => Some((handle, place)),
            None => {
                tracing::debug!(%node, "late copy dropped: its node has its bound of late copies in flight");
                handle.abort();
                None
            }
        }
    }

    /// Late copies dropped at the bound since start.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Late copies in flight now, all nodes together.
    pub fn in_flight(&self) -> u64 {
        lock(&self.in_flight).values().map(|&count| count as u64).sum()
    }
}

impl Drop for LateCopy {
    fn drop(&mut self) {
        let mut in_flight = lock(&self.copies.in_flight);
        let count = in_flight.get_mut(&self.node).expect("an admitted copy's node is counted");
        assert!(*count > 0, "a node's late copies are counted once each");
        *count -= 1;
        if *count == 0 {
            in_flight.remove(&self.node);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_takes_its_bound_of_late_copies_and_the_rest_are_dropped() {
        let copies = LateCopies::new(2);
        let first = copies.admit(NodeId(3)).expect("one");
        let second = copies.admit(NodeId(3)).expect("two");
        assert!(copies.admit(NodeId(3)).is_none(), "the third is past the bound");
        let other = copies.admit(NodeId(4)).expect("another node has its own bound");
        assert_eq!((copies.in_flight(), copies.dropped()), (3, 1));
        drop(first);
        let again = copies.admit(NodeId(3)).expect("a landed copy frees its place");
        drop((second, again, other));
        assert_eq!((copies.in_flight(), copies.dropped()), (0, 1));
    }
}
