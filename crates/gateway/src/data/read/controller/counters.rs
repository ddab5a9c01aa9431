//! The controller's counters (planned reads, probes, fallbacks, dropped records, ...), each
//! mirrored by a Prometheus counter. Must not decide anything from them.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the controller.
#[derive(Debug, Default)]
pub struct ControllerCounters {
    /// Reads planned by the policy.
    pub planned_reads: AtomicU64,
    /// Probes sent for single requests.
    pub request_probes: AtomicU64,
    /// Probes sent by lazy refreshes.
    pub refresh_probes: AtomicU64,
    /// Refresh probes since the last [`Controller::take_records`] (they belong to no record).
    pub refresh_probes_untaken: AtomicU64,
    /// Planned reads that had to fall back to the robust degraded read.
    pub fallbacks: AtomicU64,
    /// Reads not planned (a stripe of another code, the catalog starting afresh): the robust path
    /// served them. Recorded without tasks when the stripe is of the controller's code.
    pub bypassed: AtomicU64,
    /// Records dropped because nobody took them.
    pub dropped_records: AtomicU64,
    /// Probes (of requests or refreshes) not answered within `probe_timeout_ms`.
    pub probe_timeouts: AtomicU64,
    /// Load probes the batch reads' access policy sent (its cost table's refreshes).
    pub access_probes: AtomicU64,
}

/// Adds `n` to a controller counter and to its Prometheus counter `metric`.
pub(super) fn count(counter: &AtomicU64, metric: &'static str, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
    metrics::counter!(metric).increment(n);
}
