//! Holds on stripes by the long reads of this gateway (a GetObject body sent as it is read, a
//! copy): a release of a held stripe is deferred until its last hold ends, so a read that began
//! before an overwrite or delete reads the old bytes to the end. Owns the hold counts and the
//! deferred releases. Must not delete anything itself (it tells its owner which stripes to delete
//! and when), or outlive the process: a deferred stripe left by a crash is unreferenced, and the
//! stripe collector deletes it.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use meta::{Layout, StripeId};

use crate::data::lock;

/// A hold on a layout's stripes: while it lives, a release of them on this gateway is deferred.
/// Dropping it ends the hold (and deletes what was released meanwhile).
#[must_use = "the stripes are held only while this lives"]
pub struct ReadHold(Option<Box<dyn FnOnce() + Send + Sync>>);

impl ReadHold {
    /// A hold that ends by running `end`.
    pub fn new(end: impl FnOnce() + Send + Sync + 'static) -> Self {
        ReadHold(Some(Box::new(end)))
    }

    /// A hold on nothing (a layout without stripes of its own, or a store that deletes nothing).
    pub fn none() -> Self {
        ReadHold(None)
    }
}

impl Drop for ReadHold {
    fn drop(&mut self) {
        if let Some(end) = self.0.take() {
            end();
        }
    }
}

impl std::fmt::Debug for ReadHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadHold").field("holds", &self.0.is_some()).finish()
    }
}

/// The hold counts of the stripes being read and the releases waiting for them.
#[derive(Debug, Default)]
pub struct StripeHolds {
    table: Mutex<HoldTable>,
}

#[derive(Debug, Default)]
struct HoldTable {
    /// Holds per stripe; a stripe is here only while held (count ≥ 1).
    holders: HashMap<StripeId, usize>,
    /// Held stripes already released: deleted when their last hold ends. Always a subset of
    /// `holders`' keys, so it is bounded by the reads in progress.
    released: HashSet<StripeId>,
}

impl StripeHolds {
    /// Holds `stripes` (once each time they appear).
    pub fn hold(&self, stripes: &[StripeId]) {
        let mut table = lock(&self.table);
        for &stripe in stripes {
            *table.holders.entry(stripe).or_default() += 1;
        }
    }

    /// Of `stripes`, being released: returns those to delete now; the held ones are deleted when
    /// their last hold ends (returned by [`unhold`](Self::unhold) then).
    pub fn release(&self, stripes: Vec<StripeId>) -> Vec<StripeId> {
        let mut table = lock(&self.table);
        let (held, free): (Vec<_>, Vec<_>) = stripes.into_iter().partition(|stripe| table.holders.contains_key(stripe));
        table.released.extend(held);
        free
    }

    /// Ends one hold of each of `stripes`; returns those released meanwhile whose last hold this
    /// was: the caller deletes them now.
    pub fn unhold(&self, stripes: &[StripeId]) -> Vec<StripeId> {
        let mut table = lock(&self.table);
        let mut doomed = Vec::new();
        for stripe in stripes {
            let count = table.holders.get_mut(stripe).expect("a stripe is unheld only after it was held");
            *count -= 1;
            if *count == 0 {
                table.holders.remove(stripe);
                if table.released.remove(stripe) {
                    doomed.push(*stripe);
                }
            }
        }
        debug_assert!(table.released.iter().all(|stripe| table.holders.contains_key(stripe)));
        doomed
    }

    /// Released stripes waiting for their reads to end.
    pub fn deferred(&self) -> usize {
        lock(&self.table).released.len()
    }
}

/// The stripes a layout owns outright (those of its striped parts, not packed stripes it shares):
/// what a release deletes and a hold keeps.
pub fn owned_stripes(layout: &Layout) -> Vec<StripeId> {
    match layout {
        Layout::Packed { .. } => Vec::new(),
        Layout::Striped { .. } => layout.stripes(),
        Layout::Composite { pieces } => pieces.iter().flat_map(|piece| owned_stripes(&piece.layout)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_stripe_is_deleted_when_its_last_hold_ends() {
        let holds = StripeHolds::default();
        let (a, b, c) = (StripeId(1), StripeId(2), StripeId(3));
        holds.hold(&[a, b]);
        holds.hold(&[a]);
        assert_eq!(holds.release(vec![a, c]), vec![c], "an unheld stripe is deleted at once");
        assert_eq!(holds.deferred(), 1);
        assert!(holds.unhold(&[a, b]).is_empty(), "a is still held once; b was never released");
        assert_eq!(holds.unhold(&[a]), vec![a], "the last hold deletes what was released");
        assert_eq!(holds.deferred(), 0);
        assert_eq!(holds.release(vec![a, b]), vec![a, b], "nothing held any more");
    }

    #[test]
    fn a_hold_ends_when_dropped() {
        let ended = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&ended);
        let hold = ReadHold::new(move || flag.store(true, std::sync::atomic::Ordering::SeqCst));
        assert!(!ended.load(std::sync::atomic::Ordering::SeqCst));
        drop(hold);
        assert!(ended.load(std::sync::atomic::Ordering::SeqCst));
        drop(ReadHold::none());
    }
}
