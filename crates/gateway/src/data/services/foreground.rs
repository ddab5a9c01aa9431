//! How busy this gateway is with client requests: a process-wide meter of the time during which at
//! least one S3 request is in flight. Background work reads it to back off under client load and
//! to use what is idle (repair's pacing, [`crate::data::services::repair`]).
//!
//! Owns: the count of requests in flight and the busy time. Must not: delay, refuse or reorder a
//! request (it only counts), or know what the requests are.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Requests in flight, and the busy time so far.
struct Meter {
    in_flight: u64,
    /// Busy time of the stretches that ended.
    busy_before: Duration,
    /// When the current busy stretch began, while one is in flight.
    busy_since: Option<Instant>,
}

static METER: Mutex<Meter> = Mutex::new(Meter { in_flight: 0, busy_before: Duration::ZERO, busy_since: None });

fn meter() -> std::sync::MutexGuard<'static, Meter> {
    METER.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One client request in flight, counted until dropped.
#[derive(Debug)]
pub struct InFlight(());

/// Counts a client request in flight until the guard is dropped.
pub fn request_in_flight() -> InFlight {
    let mut meter = meter();
    if meter.in_flight == 0 {
        meter.busy_since = Some(Instant::now());
    }
    meter.in_flight += 1;
    InFlight(())
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut meter = meter();
        assert!(meter.in_flight > 0, "a request leaves once");
        meter.in_flight -= 1;
        if meter.in_flight == 0
            && let Some(since) = meter.busy_since.take()
        {
            meter.busy_before += since.elapsed();
        }
    }
}

/// The time with at least one request in flight, since the process started, up to now.
pub fn busy_time() -> Duration {
    let meter = meter();
    meter.busy_before + meter.busy_since.map_or(Duration::ZERO, |since| since.elapsed())
}

/// The share of a window that was busy, from two readings of [`busy_time`] and the window's length.
pub fn busy_share(busy_at_start: Duration, busy_at_end: Duration, window: Duration) -> f64 {
    if window.is_zero() {
        return 0.0;
    }
    (busy_at_end.saturating_sub(busy_at_start).as_secs_f64() / window.as_secs_f64()).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_grows_only_while_a_request_is_in_flight() {
        // The meter is process-wide: other tests' requests may add to it, never subtract.
        let before = busy_time();
        let first = request_in_flight();
        let second = request_in_flight();
        std::thread::sleep(Duration::from_millis(30));
        drop(first);
        std::thread::sleep(Duration::from_millis(30));
        drop(second);
        let during = busy_time() - before;
        assert!(during >= Duration::from_millis(60), "two overlapping requests: {during:?}");
        assert_eq!(busy_share(before, before + Duration::from_millis(50), Duration::from_millis(100)), 0.5);
        assert_eq!(busy_share(before, before + Duration::from_secs(9), Duration::from_secs(1)), 1.0);
        assert_eq!(busy_share(before, before, Duration::ZERO), 0.0);
    }
}
