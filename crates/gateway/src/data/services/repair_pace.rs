//! How fast repair may read: between `min_read_bytes_per_s` and `max_read_bytes_per_s`, by the
//! share of the last window in which clients kept the gateway busy ([`crate::data::services::foreground`]): all of
//! the budget when idle, the floor when busy throughout, so a rebuild takes what is idle and backs
//! off under load, yet always progresses. A stripe one failure from loss is never slowed.
//!
//! Owns: the read budget's rate and its schedule (the earliest time the next paced read may
//! start). Must not: read or write units, or choose what to repair.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::data::config::RepairConfig;
use crate::data::services::foreground;

/// How often the busy share is sampled: shorter windows follow bursts, longer ones smooth them.
const WINDOW: Duration = Duration::from_millis(200);

/// The last reading of the meter and the share it gave.
#[derive(Debug)]
struct Sample {
    at: Instant,
    busy: Duration,
    share: f64,
}

/// Repair's read budget; see the module documentation.
#[derive(Debug)]
pub struct RepairPace {
    min_bytes_per_s: f64,
    max_bytes_per_s: f64,
    sample: Mutex<Sample>,
    /// Earliest time the next paced read may start.
    next_read_at: tokio::sync::Mutex<Instant>,
}

impl RepairPace {
    /// The budget of `config` (validated: 0 < min ≤ max).
    pub fn new(config: &RepairConfig) -> Self {
        assert!(
            0 < config.min_read_bytes_per_s && config.min_read_bytes_per_s <= config.max_read_bytes_per_s,
            "a validated repair budget"
        );
        let sample = Sample { at: Instant::now(), busy: foreground::busy_time(), share: 0.0 };
        Self {
            min_bytes_per_s: config.min_read_bytes_per_s as f64,
            max_bytes_per_s: config.max_read_bytes_per_s as f64,
            sample: Mutex::new(sample),
            next_read_at: tokio::sync::Mutex::new(Instant::now()),
        }
    }

    /// The share of the last window clients kept the gateway busy (sampled at most every
    /// [`WINDOW`]).
    pub fn busy_share(&self) -> f64 {
        let mut sample = self.sample.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let elapsed = sample.at.elapsed();
        if elapsed >= WINDOW {
            let busy = foreground::busy_time();
            sample.share = foreground::busy_share(sample.busy, busy, elapsed);
            (sample.at, sample.busy) = (Instant::now(), busy);
        }
        sample.share
    }

    /// The rate now: the floor plus the idle share of the rest; the whole budget when `urgent`.
    pub fn bytes_per_s(&self, urgent: bool) -> f64 {
        if urgent {
            return self.max_bytes_per_s;
        }
        rate(self.min_bytes_per_s, self.max_bytes_per_s, self.busy_share())
    }

    /// Waits until `bytes` more source bytes fit the budget (`urgent`: a stripe one failure from
    /// loss, read at the full budget).
    pub async fn wait_for(&self, bytes: u64, urgent: bool) {
        let cost = Duration::from_secs_f64(bytes as f64 / self.bytes_per_s(urgent));
        let start = {
            let mut next = self.next_read_at.lock().await;
            let start = (*next).max(Instant::now());
            *next = start + cost;
            start
        };
        tokio::time::sleep_until(start.into()).await;
    }
}

/// The rate between `min` and `max` for a busy share.
fn rate(min: f64, max: f64, busy_share: f64) -> f64 {
    assert!((0.0..=1.0).contains(&busy_share), "a share");
    min + (max - min) * (1.0 - busy_share)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_falls_from_the_budget_to_the_floor_as_clients_keep_the_gateway_busy() {
        assert_eq!(rate(8.0, 64.0, 0.0), 64.0);
        assert_eq!(rate(8.0, 64.0, 1.0), 8.0);
        assert_eq!(rate(8.0, 64.0, 0.5), 36.0);
    }

    #[test]
    fn an_urgent_stripe_is_read_at_the_whole_budget_however_busy() {
        let config =
            RepairConfig { min_read_bytes_per_s: 1 << 20, max_read_bytes_per_s: 64 << 20, ..Default::default() };
        let pace = RepairPace::new(&config);
        assert_eq!(pace.bytes_per_s(true), (64 << 20) as f64);
        // Idle (no request in flight in this test process's window, or few): near the budget.
        assert!(pace.bytes_per_s(false) >= (1 << 20) as f64);
    }

    #[test]
    #[should_panic(expected = "a validated repair budget")]
    fn a_floor_above_the_budget_is_never_built() {
        let config =
            RepairConfig { min_read_bytes_per_s: 65 << 20, max_read_bytes_per_s: 64 << 20, ..Default::default() };
        let _ = RepairPace::new(&config);
    }
}
