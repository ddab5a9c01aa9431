//! Service-model emulation: the parameters that make a node on loopback queue like a disk, and
//! the seeded sampling of emulated service times and background arrivals.
//!
//! Owns the model's knobs, their validation and the random draws. Must not sleep, touch the queue
//! or decide anything about scheduling; the scheduler applies what this computes. The same
//! parameters drive the simulator's node model, so names and units match it.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::NodeError;
use crate::proto;

/// Emulated service model of a node (see `crates/node/README.md`). Off by default.
///
/// Service time of a task of `B` bytes = `overhead_us` + `B / rate_bytes_per_s` (when the rate is
/// positive) + `delay_shift_us` + Exp(`delay_exp_mean_us`) (when the mean is positive) +
/// Lomax(`tail_scale_us`, `tail_shape`) (when the scale is positive: a heavy tail).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceModel {
    /// Emulate at all. When false every other knob is ignored and tasks take their real I/O time.
    pub enabled: bool,
    /// True: the emulated time replaces the real I/O time (the worker does the I/O, then sleeps for
    /// what is left of the emulated time, so a task takes max(real, emulated)). False: the worker
    /// sleeps for the emulated time and then does the I/O.
    pub replace_real_io: bool,
    /// Fixed cost of every task, microseconds.
    pub overhead_us: u64,
    /// Transfer rate, bytes per second; 0 leaves out the bytes-proportional term.
    pub rate_bytes_per_s: f64,
    /// Δ of the Δ + Exp delay, microseconds, added to every task.
    pub delay_shift_us: u64,
    /// Mean of the exponential delay, microseconds; 0 leaves it out.
    pub delay_exp_mean_us: u64,
    /// Seed of the delay and background-arrival draws; setting the model reseeds them.
    pub seed: u64,
    /// Background tasks entering the queue per second; 0 = no background load.
    pub background_tasks_per_s: f64,
    /// Size of each background task, bytes.
    pub background_task_bytes: u64,
    /// True: background arrivals are Poisson; false: evenly spaced.
    pub background_poisson: bool,
    /// Scale λ of a heavy-tailed delay added to every task, microseconds: Lomax (Pareto type II),
    /// P(X > x) = (1 + x/λ)^−α, mean λ/(α − 1), as a store with stragglers has. 0 leaves it out.
    pub tail_scale_us: u64,
    /// Its shape α; more than 1 (a finite mean); the smaller, the heavier the tail.
    pub tail_shape: f64,
    /// Emulated uplink, bytes per second (0 = not shaped): every read answer and every packet a
    /// reconstruction session sends waits for its turn on it (FCFS), as on a NIC of that rate.
    pub egress_bytes_per_s: f64,
    /// Emulated downlink, bytes per second (0 = not shaped): every packet pushed to this node by
    /// another node's reconstruction session waits for its turn on it.
    pub ingress_bytes_per_s: f64,
    /// Cost of each packet on either link, microseconds (the paper's per-packet overhead; also
    /// charged once per read answer). Only applies to a shaped link.
    pub link_per_packet_us: u64,
}

impl Default for ServiceModel {
    fn default() -> Self {
        Self {
            enabled: false,
            replace_real_io: true,
            overhead_us: 0,
            rate_bytes_per_s: 0.0,
            delay_shift_us: 0,
            delay_exp_mean_us: 0,
            seed: 0,
            background_tasks_per_s: 0.0,
            background_task_bytes: 0,
            background_poisson: true,
            tail_scale_us: 0,
            tail_shape: 2.0,
            egress_bytes_per_s: 0.0,
            ingress_bytes_per_s: 0.0,
            link_per_packet_us: 0,
        }
    }
}

/// Longest emulated service time of one task; bounds a sleep a bad parameter could make endless.
pub const MAX_SERVICE_TIME: Duration = Duration::from_secs(600);
/// Highest background arrival rate accepted, tasks per second.
pub const MAX_BACKGROUND_TASKS_PER_S: f64 = 100_000.0;

impl ServiceModel {
    /// Checks every knob; a model that fails is never installed.
    pub fn validate(&self) -> Result<(), NodeError> {
        let bad = |what: String| Err(NodeError::InvalidArgument(format!("service model: {what}")));
        if !self.rate_bytes_per_s.is_finite() || self.rate_bytes_per_s < 0.0 {
            return bad(format!("rate_bytes_per_s must be finite and >= 0, got {}", self.rate_bytes_per_s));
        }
        for (name, rate) in
            [("egress_bytes_per_s", self.egress_bytes_per_s), ("ingress_bytes_per_s", self.ingress_bytes_per_s)]
        {
            if !rate.is_finite() || rate < 0.0 {
                return bad(format!("{name} must be finite and >= 0, got {rate}"));
            }
        }
        if !self.background_tasks_per_s.is_finite()
            || !(0.0..=MAX_BACKGROUND_TASKS_PER_S).contains(&self.background_tasks_per_s)
        {
            return bad(format!(
                "background_tasks_per_s must be in [0, {MAX_BACKGROUND_TASKS_PER_S}], got {}",
                self.background_tasks_per_s
            ));
        }
        if self.tail_scale_us > 0 && !(self.tail_shape.is_finite() && self.tail_shape > 1.0) {
            return bad(format!("tail_shape must be finite and more than 1, got {}", self.tail_shape));
        }
        let max_us = MAX_SERVICE_TIME.as_micros() as u64;
        for (name, value) in [
            ("tail_scale_us", self.tail_scale_us),
            ("overhead_us", self.overhead_us),
            ("delay_shift_us", self.delay_shift_us),
            ("delay_exp_mean_us", self.delay_exp_mean_us),
            ("link_per_packet_us", self.link_per_packet_us),
        ] {
            if value > max_us {
                return bad(format!("{name} must be at most {max_us}, got {value}"));
            }
        }
        Ok(())
    }

    /// Whether background tasks are generated.
    pub fn has_background_load(&self) -> bool {
        self.enabled && self.background_tasks_per_s > 0.0
    }

    /// Whether the model emulates a transfer rate (so a reserved class's share slows its bytes).
    pub fn has_rate(&self) -> bool {
        self.enabled && self.rate_bytes_per_s > 0.0
    }

    /// Deterministic part of the service time of a task of `bytes` (overhead, transfer, Δ).
    pub fn deterministic_service_time(&self, bytes: u64) -> Duration {
        self.deterministic_service_time_at_share(bytes, 1.0)
    }

    /// [`ServiceModel::deterministic_service_time`] on a server that has `share` (in (0, 1]) of
    /// the node's rate, as a reserved class's does: only the transfer slows, the per-task
    /// overhead and Δ stay (they are not bandwidth).
    pub fn deterministic_service_time_at_share(&self, bytes: u64, share: f64) -> Duration {
        assert!(share > 0.0 && share <= 1.0 + crate::classes::SHARES_SUM_TOLERANCE, "a share is in (0, 1]: {share}");
        let rate_bytes_per_s = self.rate_bytes_per_s * share;
        let transfer_s = if rate_bytes_per_s > 0.0 { bytes as f64 / rate_bytes_per_s } else { 0.0 };
        let total = Duration::from_micros(self.overhead_us + self.delay_shift_us)
            + Duration::from_secs_f64(transfer_s.min(MAX_SERVICE_TIME.as_secs_f64()));
        total.min(MAX_SERVICE_TIME)
    }
}

impl From<&ServiceModel> for proto::ServiceModel {
    fn from(model: &ServiceModel) -> Self {
        Self {
            enabled: model.enabled,
            replace_real_io: model.replace_real_io,
            overhead_us: model.overhead_us,
            rate_bytes_per_s: model.rate_bytes_per_s,
            delay_shift_us: model.delay_shift_us,
            delay_exp_mean_us: model.delay_exp_mean_us,
            seed: model.seed,
            background_tasks_per_s: model.background_tasks_per_s,
            background_task_bytes: model.background_task_bytes,
            background_poisson: model.background_poisson,
            tail_scale_us: model.tail_scale_us,
            tail_shape: model.tail_shape,
            egress_bytes_per_s: model.egress_bytes_per_s,
            ingress_bytes_per_s: model.ingress_bytes_per_s,
            link_per_packet_us: model.link_per_packet_us,
        }
    }
}

impl From<proto::ServiceModel> for ServiceModel {
    fn from(model: proto::ServiceModel) -> Self {
        Self {
            enabled: model.enabled,
            replace_real_io: model.replace_real_io,
            overhead_us: model.overhead_us,
            rate_bytes_per_s: model.rate_bytes_per_s,
            delay_shift_us: model.delay_shift_us,
            delay_exp_mean_us: model.delay_exp_mean_us,
            seed: model.seed,
            background_tasks_per_s: model.background_tasks_per_s,
            background_task_bytes: model.background_task_bytes,
            background_poisson: model.background_poisson,
            tail_scale_us: model.tail_scale_us,
            tail_shape: model.tail_shape,
            egress_bytes_per_s: model.egress_bytes_per_s,
            ingress_bytes_per_s: model.ingress_bytes_per_s,
            link_per_packet_us: model.link_per_packet_us,
        }
    }
}

/// A model with its random streams: service-time delays and background arrivals draw from
/// separate seeded streams so that changing one does not shift the other.
#[derive(Debug)]
pub struct ModelState {
    model: ServiceModel,
    delay_rng: ChaCha8Rng,
    arrival_rng: ChaCha8Rng,
}

impl ModelState {
    /// Installs `model` (assumed validated) with fresh streams from its seed.
    pub fn new(model: ServiceModel) -> Self {
        let delay_rng = ChaCha8Rng::seed_from_u64(model.seed);
        let arrival_rng = ChaCha8Rng::seed_from_u64(model.seed ^ 0x9e37_79b9_7f4a_7c15);
        Self { model, delay_rng, arrival_rng }
    }

    /// The model in force.
    pub fn model(&self) -> &ServiceModel {
        &self.model
    }

    /// Emulated service time of a task of `bytes`, or `None` when the model is off. Draws the
    /// exponential delay from the seeded stream, so a seed and a task order give the same times.
    pub fn sample_service_time(&mut self, bytes: u64) -> Option<Duration> {
        self.sample_service_time_at_share(bytes, 1.0)
    }

    /// [`ModelState::sample_service_time`] on a server with `share` of the node's rate (a
    /// reserved class's): the transfer term is `bytes / (share × rate)`; the delays are drawn as
    /// for any task.
    pub fn sample_service_time_at_share(&mut self, bytes: u64, share: f64) -> Option<Duration> {
        if !self.model.enabled {
            return None;
        }
        let mut time = self.model.deterministic_service_time_at_share(bytes, share);
        if self.model.delay_exp_mean_us > 0 {
            let mean_s = self.model.delay_exp_mean_us as f64 / 1e6;
            time +=
                Duration::from_secs_f64(sample_exp(&mut self.delay_rng, mean_s).min(MAX_SERVICE_TIME.as_secs_f64()));
        }
        if self.model.tail_scale_us > 0 {
            let scale_s = self.model.tail_scale_us as f64 / 1e6;
            let tail_s = sample_lomax(&mut self.delay_rng, scale_s, self.model.tail_shape);
            time += Duration::from_secs_f64(tail_s.min(MAX_SERVICE_TIME.as_secs_f64()));
        }
        Some(time.min(MAX_SERVICE_TIME))
    }

    /// Time until the next background arrival, or `None` without background load.
    pub fn next_background_gap(&mut self) -> Option<Duration> {
        if !self.model.has_background_load() {
            return None;
        }
        let mean_s = 1.0 / self.model.background_tasks_per_s;
        let gap_s = if self.model.background_poisson { sample_exp(&mut self.arrival_rng, mean_s) } else { mean_s };
        Some(Duration::from_secs_f64(gap_s.min(MAX_SERVICE_TIME.as_secs_f64())))
    }
}

/// Lomax(scale, shape) by inversion: scale · ((1 − u)^(−1/shape) − 1), `1 - u` in (0, 1].
fn sample_lomax(rng: &mut ChaCha8Rng, scale: f64, shape: f64) -> f64 {
    let u: f64 = rng.random();
    scale * ((1.0 - u).powf(-1.0 / shape) - 1.0)
}

/// Exp(mean) by inversion; `1 - u` is in (0, 1], so the logarithm is finite.
fn sample_exp(rng: &mut ChaCha8Rng, mean: f64) -> f64 {
    let u: f64 = rng.random();
    -mean * (1.0 - u).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 ms of overhead, 1 MB/s, a 0.5 ms shift.
    fn one_ms_at_one_megabyte_per_s() -> ServiceModel {
        ServiceModel {
            enabled: true,
            overhead_us: 1000,
            rate_bytes_per_s: 1_000_000.0,
            delay_shift_us: 500,
            ..Default::default()
        }
    }

    #[test]
    fn service_time_is_overhead_plus_transfer_plus_shift() {
        let model = one_ms_at_one_megabyte_per_s();
        assert_eq!(model.deterministic_service_time(2000), Duration::from_micros(1000 + 2000 + 500));
        let mut state = ModelState::new(model);
        assert_eq!(state.sample_service_time(2000), Some(Duration::from_micros(3500)));
        assert!(ModelState::new(ServiceModel::default()).sample_service_time(10).is_none());
    }

    #[test]
    fn a_share_slows_the_transfer_only() {
        let model = one_ms_at_one_megabyte_per_s();
        // 1 ms + 3000 B / (0.3 × 1 MB/s) + 0.5 ms.
        assert_eq!(model.deterministic_service_time_at_share(3000, 0.3), Duration::from_micros(1000 + 10_000 + 500));
        let mut state = ModelState::new(model);
        assert_eq!(state.sample_service_time_at_share(3000, 1.0), Some(Duration::from_micros(1000 + 3000 + 500)));
    }

    #[test]
    fn exponential_delays_are_seeded_and_have_the_right_mean() {
        let model = ServiceModel { enabled: true, delay_exp_mean_us: 1000, seed: 42, ..Default::default() };
        let draw = |model: &ServiceModel| {
            let mut state = ModelState::new(model.clone());
            (0..20_000).map(|_| state.sample_service_time(0).unwrap().as_secs_f64()).collect::<Vec<_>>()
        };
        let first = draw(&model);
        assert_eq!(first, draw(&model), "same seed, same draws");
        assert_ne!(first, draw(&ServiceModel { seed: 43, ..model.clone() }));
        let mean = first.iter().sum::<f64>() / first.len() as f64;
        assert!((mean - 0.001).abs() < 0.00005, "mean {mean}");
    }

    #[test]
    fn the_lomax_tail_has_its_mean_and_its_quantile() {
        let model =
            ServiceModel { enabled: true, tail_scale_us: 10_000, tail_shape: 3.0, seed: 5, ..Default::default() };
        model.validate().unwrap();
        let mut state = ModelState::new(model);
        let mut draws: Vec<f64> = (0..200_000).map(|_| state.sample_service_time(0).unwrap().as_secs_f64()).collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 0.005).abs() < 0.0003, "mean {mean}, λ/(α − 1) = 5 ms");
        draws.sort_by(f64::total_cmp);
        // P(X > x) = 0.01 at x = λ (0.01^(−1/α) − 1) = 10 ms × 3.6416 = 36.4 ms.
        let p99 = draws[(0.99 * draws.len() as f64) as usize];
        assert!((p99 - 0.036_416).abs() < 0.002, "p99 {p99}");
        let light = ServiceModel { tail_scale_us: 1000, tail_shape: 1.0, ..Default::default() };
        assert!(matches!(light.validate(), Err(NodeError::InvalidArgument(_))), "an infinite mean is refused");
    }

    #[test]
    fn background_gaps() {
        let even = ServiceModel {
            enabled: true,
            background_tasks_per_s: 50.0,
            background_poisson: false,
            ..Default::default()
        };
        assert_eq!(ModelState::new(even.clone()).next_background_gap(), Some(Duration::from_millis(20)));
        assert!(ModelState::new(ServiceModel { enabled: false, ..even }).next_background_gap().is_none());
    }

    #[test]
    fn validation_refuses_nonsense() {
        for bad in [
            ServiceModel { rate_bytes_per_s: -1.0, ..Default::default() },
            ServiceModel { rate_bytes_per_s: f64::NAN, ..Default::default() },
            ServiceModel { background_tasks_per_s: 1e9, ..Default::default() },
            ServiceModel { overhead_us: u64::MAX, ..Default::default() },
        ] {
            assert!(matches!(bad.validate(), Err(NodeError::InvalidArgument(_))), "{bad:?}");
        }
        ServiceModel::default().validate().unwrap();
    }

    #[test]
    fn proto_round_trip() {
        let model =
            ServiceModel { enabled: true, overhead_us: 7, rate_bytes_per_s: 3.5, seed: 9, ..Default::default() };
        assert_eq!(ServiceModel::from(proto::ServiceModel::from(&model)), model);
    }
}
