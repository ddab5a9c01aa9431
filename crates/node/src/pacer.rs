//! Token buckets that keep a reserved class within its share of the node's rate when its tasks
//! do real I/O (no emulated transfer rate): under `ClassScheduling::Reserved` a class is a server
//! at `share × rate`, and a disk that happens to be faster must not let it take more.
//!
//! Owns the bucket arithmetic only, on instants it is given (no clock, no sleeping), so it can be
//! tested exactly. Must not decide a class's share or the node's rate (the scheduler passes them)
//! nor wait: the scheduler holds a task until the instant this returns.

use std::time::{Duration, Instant};

use crate::service_model::MAX_SERVICE_TIME;

/// Tokens a bucket holds at most, as time at its rate: a class idle for a while may start its
/// next task at once, but never gets more than this much ahead of its share.
pub const BURST: Duration = Duration::from_millis(10);

/// One class's bucket, in bytes.
#[derive(Clone, Copy, Debug)]
pub struct Pacer {
    /// Bytes the class may still move now; negative while a task's bytes are being paid back.
    tokens_bytes: f64,
    /// When `tokens_bytes` was last brought up to date.
    updated: Option<Instant>,
}

impl Default for Pacer {
    fn default() -> Self {
        Self { tokens_bytes: 0.0, updated: None }
    }
}

impl Pacer {
    /// Takes `bytes` from the bucket for a task starting at `now`, the bucket refilling at
    /// `rate_bytes_per_s`: the instant before which the task must not finish (the bucket is in
    /// debt until then), or `None` when it need not wait (or there is no rate to pace at).
    pub fn reserve(&mut self, now: Instant, bytes: u64, rate_bytes_per_s: f64) -> Option<Instant> {
        if !(rate_bytes_per_s.is_finite() && rate_bytes_per_s > 0.0) {
            self.updated = Some(now);
            return None;
        }
        let burst_bytes = rate_bytes_per_s * BURST.as_secs_f64();
        let elapsed_s =
            self.updated.map_or(f64::INFINITY, |updated| now.saturating_duration_since(updated).as_secs_f64());
        self.tokens_bytes = (self.tokens_bytes + elapsed_s * rate_bytes_per_s).min(burst_bytes);
        self.updated = Some(now);
        self.tokens_bytes -= bytes as f64;
        assert!(self.tokens_bytes <= burst_bytes, "a bucket never holds more than its burst");
        if self.tokens_bytes >= 0.0 {
            return None;
        }
        // Bounded like any service time: a huge task at a tiny rate must not hold a worker forever.
        let debt_s = (-self.tokens_bytes / rate_bytes_per_s).min(MAX_SERVICE_TIME.as_secs_f64());
        Some(now + Duration::from_secs_f64(debt_s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_to_back_tasks_move_at_the_rate_and_no_faster() {
        let mut pacer = Pacer::default();
        let start = Instant::now();
        let rate = 3e6; // 0.3 of a 10 MB/s node
        let mut now = start;
        let mut moved = 0u64;
        // Instant I/O: each task ends when the bucket lets it; the next starts right then.
        for _ in 0..100 {
            let bytes = 250_000;
            now = pacer.reserve(now, bytes, rate).unwrap_or(now);
            moved += bytes;
        }
        let achieved = moved as f64 / (now - start).as_secs_f64();
        assert!(achieved <= rate * 1.01, "{achieved} B/s for a {rate} B/s share");
        assert!(achieved > rate * 0.97, "{achieved} B/s");
    }

    #[test]
    fn an_idle_class_saves_at_most_a_burst() {
        let mut pacer = Pacer::default();
        let start = Instant::now();
        let rate = 1e6;
        assert_eq!(pacer.reserve(start, 10_000, rate), None, "a fresh bucket is full: 10 ms of 1 MB/s");
        let later = start + Duration::from_secs(60);
        assert_eq!(pacer.reserve(later, 10_000, rate), None);
        // A minute idle saved only the burst: the next 10 kB waits its 10 ms.
        let until = pacer.reserve(later, 10_000, rate).unwrap();
        assert_eq!(until - later, Duration::from_millis(10));
        assert_eq!(Pacer::default().reserve(start, 1 << 30, 0.0), None, "no rate known: not paced");
    }
}
