//! Released stripes waiting out `orphans.release_delay_ms` before they are deleted. A read fetches an
//! object's layout and then its stripes, so a read through any gateway that began before an
//! overwrite or delete committed may still be fetching the old stripes; deleting them a delay later
//! lets such reads finish, whichever gateway serves them (per-gateway [`crate::data::objects::holds`] cover reads
//! longer than the delay on the releasing gateway). Garage delays block deletion the same way.
//!
//! Owns the queue of waiting stripes, its bound and its counters. Must not delete anything itself
//! (its owner takes the due stripes and deletes them) or be the only record of a release: a stripe
//! left here by a crash, a shutdown or too many failed deletes is unreferenced, and the stripe
//! collector deletes it.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use meta::StripeId;
use serde::Serialize;
use tokio::time::Instant;

use crate::data::lock;

/// Most stripes waiting at once (24 bytes each); a release beyond it deletes at once.
pub const MAX_WAITING_STRIPES: usize = 1 << 20;
/// Deletes of one stripe tried before it is left to the stripe collector.
pub const MAX_DELETE_ATTEMPTS: u8 = 3;

/// One stripe waiting.
#[derive(Clone, Copy, Debug)]
struct Waiting {
    due: Instant,
    stripe: StripeId,
    /// Failed deletes so far.
    attempts: u8,
}

/// Counters since start, for `GET /admin/status` (`releases`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReleaseStatus {
    /// The delay, `orphans.release_delay_ms`.
    pub delay_ms: u64,
    /// Released stripes waiting now.
    pub waiting: u64,
    /// Released stripes deleted after their delay.
    pub deleted: u64,
    /// Released stripes deleted at once because the queue was full (reads on other gateways could
    /// be cut short).
    pub deleted_without_delay: u64,
    /// Stripes left to the stripe collector after `MAX_DELETE_ATTEMPTS` failed deletes.
    pub left_to_collector: u64,
}

/// The queue of released stripes, in the order they become due.
#[derive(Debug)]
pub struct DelayedReleases {
    delay: Duration,
    queue: Mutex<VecDeque<Waiting>>,
    /// The counters; `delay_ms` and `waiting` are filled in by [`DelayedReleases::status`].
    counters: Mutex<ReleaseStatus>,
    /// Woken when a stripe is queued, so the deleter sleeps while nothing waits.
    queued: tokio::sync::Notify,
}

impl DelayedReleases {
    /// A queue that keeps released stripes for `delay` (zero: every stripe is deleted at once).
    pub fn new(delay: Duration) -> Self {
        Self { delay, queue: Mutex::new(VecDeque::new()), counters: Mutex::default(), queued: Default::default() }
    }

    /// How long released stripes wait.
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// Queues `stripes`, released at `now`; returns those to delete at once (all of them without a
    /// delay, the ones beyond the bound when the queue is full).
    pub fn schedule(&self, stripes: Vec<StripeId>, now: Instant) -> Vec<StripeId> {
        if self.delay.is_zero() || stripes.is_empty() {
            return stripes;
        }
        let mut queue = lock(&self.queue);
        let due = not_before_back(&queue, now + self.delay);
        let room = MAX_WAITING_STRIPES.saturating_sub(queue.len()).min(stripes.len());
        let mut stripes = stripes.into_iter();
        queue.extend(stripes.by_ref().take(room).map(|stripe| Waiting { due, stripe, attempts: 0 }));
        let at_once: Vec<StripeId> = stripes.collect();
        gauge_waiting(&queue);
        drop(queue);
        lock(&self.counters).deleted_without_delay += at_once.len() as u64;
        if !at_once.is_empty() {
            tracing::warn!(stripes = at_once.len(), "release queue full: deleting released stripes without the delay");
        }
        self.queued.notify_one();
        at_once
    }

    /// Takes up to `max` stripes due at `now`, each with its failed attempts so far.
    pub fn take_due(&self, now: Instant, max: usize) -> Vec<(StripeId, u8)> {
        let mut queue = lock(&self.queue);
        let mut due = Vec::new();
        // The queue is in due order: every release waits the same delay, and a retry waits it again.
        while due.len() < max && queue.front().is_some_and(|waiting| waiting.due <= now) {
            let waiting = queue.pop_front().expect("the front was just seen");
            due.push((waiting.stripe, waiting.attempts));
        }
        debug_assert!(queue.iter().zip(queue.iter().skip(1)).all(|(a, b)| a.due <= b.due));
        gauge_waiting(&queue);
        due
    }

    /// Records the outcome of deleting a due stripe at `now`: a failed delete is queued again (a
    /// delay later) until `MAX_DELETE_ATTEMPTS`, then left to the stripe collector.
    pub fn deleted(&self, stripe: StripeId, attempts: u8, succeeded: bool, now: Instant) {
        if succeeded {
            lock(&self.counters).deleted += 1;
            metrics::counter!("lowtail_gateway_released_stripes_deleted_total").increment(1);
            return;
        }
        let attempts = attempts.saturating_add(1);
        if attempts >= MAX_DELETE_ATTEMPTS {
            lock(&self.counters).left_to_collector += 1;
            tracing::warn!(%stripe, attempts, "released stripe left to the stripe collector");
            return;
        }
        let mut queue = lock(&self.queue);
        let due = not_before_back(&queue, now + self.delay);
        queue.push_back(Waiting { due, stripe, attempts });
        gauge_waiting(&queue);
    }

    /// When the first waiting stripe is due; `None` when nothing waits.
    pub fn next_due(&self) -> Option<Instant> {
        lock(&self.queue).front().map(|waiting| waiting.due)
    }

    /// Resolves when a stripe was queued since the last call (or is queued later).
    pub async fn queued(&self) {
        self.queued.notified().await;
    }

    /// The counters, the delay and the stripes waiting now.
    pub fn status(&self) -> ReleaseStatus {
        let waiting = self.waiting() as u64;
        ReleaseStatus { delay_ms: self.delay.as_millis() as u64, waiting, ..lock(&self.counters).clone() }
    }

    /// Stripes waiting now.
    pub fn waiting(&self) -> usize {
        lock(&self.queue).len()
    }
}

fn gauge_waiting(queue: &VecDeque<Waiting>) {
    metrics::gauge!("lowtail_gateway_released_stripes_waiting").set(queue.len() as f64);
}

/// `due`, or the last waiting stripe's due time when that is later: callers read the clock before
/// they take the lock, so a release can reach the queue after a later one, and the queue must stay in
/// due order for [`DelayedReleases::take_due`] (the difference is the time between two lock takes).
fn not_before_back(queue: &VecDeque<Waiting>, due: Instant) -> Instant {
    queue.back().map_or(due, |last| last.due.max(due))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(range: std::ops::Range<u64>) -> Vec<StripeId> {
        range.map(StripeId).collect()
    }

    #[test]
    fn a_released_stripe_is_due_only_after_the_delay() {
        let delayed = DelayedReleases::new(Duration::from_secs(60));
        let start = Instant::now();
        assert!(delayed.schedule(ids(1..3), start).is_empty(), "nothing is deleted at once");
        assert!(delayed.schedule(ids(3..4), start + Duration::from_secs(10)).is_empty());
        assert!(delayed.take_due(start + Duration::from_secs(59), 10).is_empty(), "not before the delay");
        assert_eq!(delayed.next_due(), Some(start + Duration::from_secs(60)));
        let due: Vec<_> = delayed.take_due(start + Duration::from_secs(60), 10);
        assert_eq!(due, vec![(StripeId(1), 0), (StripeId(2), 0)], "the first two, not the later one");
        assert_eq!(delayed.take_due(start + Duration::from_secs(70), 10), vec![(StripeId(3), 0)]);
        assert_eq!(delayed.next_due(), None);
    }

    #[test]
    fn no_delay_deletes_at_once() {
        let delayed = DelayedReleases::new(Duration::ZERO);
        assert_eq!(delayed.schedule(ids(1..4), Instant::now()), ids(1..4));
        assert_eq!(delayed.waiting(), 0);
    }

    #[test]
    fn take_due_takes_at_most_the_batch() {
        let delayed = DelayedReleases::new(Duration::from_millis(1));
        let start = Instant::now();
        delayed.schedule(ids(0..5), start);
        let later = start + Duration::from_secs(1);
        assert_eq!(delayed.take_due(later, 3).len(), 3);
        assert_eq!(delayed.take_due(later, 3).len(), 2);
    }

    #[test]
    fn a_full_queue_deletes_the_rest_at_once() {
        let delayed = DelayedReleases::new(Duration::from_secs(1));
        let now = Instant::now();
        let many = MAX_WAITING_STRIPES as u64;
        assert!(delayed.schedule(ids(0..many - 2), now).is_empty());
        assert_eq!(delayed.schedule(ids(many - 2..many + 3), now), ids(many..many + 3), "only two fit");
        assert_eq!(delayed.waiting(), MAX_WAITING_STRIPES);
        assert_eq!(delayed.status().deleted_without_delay, 3);
    }

    #[test]
    fn a_failed_delete_is_retried_a_delay_later_then_left_to_the_collector() {
        let delay = Duration::from_secs(5);
        let delayed = DelayedReleases::new(delay);
        let start = Instant::now();
        delayed.schedule(ids(7..8), start);
        let mut now = start + delay;
        for attempt in 0..MAX_DELETE_ATTEMPTS {
            let due = delayed.take_due(now, 10);
            assert_eq!(due, vec![(StripeId(7), attempt)]);
            delayed.deleted(StripeId(7), attempt, false, now);
            assert!(delayed.take_due(now, 10).is_empty(), "a retry waits a delay again");
            now += delay;
        }
        assert_eq!(delayed.waiting(), 0, "given up after {MAX_DELETE_ATTEMPTS} attempts");
        let status = delayed.status();
        assert_eq!((status.left_to_collector, status.deleted), (1, 0));
        delayed.schedule(ids(8..9), now);
        let due = delayed.take_due(now + delay, 10);
        delayed.deleted(due[0].0, due[0].1, true, now + delay);
        assert_eq!(delayed.status().deleted, 1);
    }
}
