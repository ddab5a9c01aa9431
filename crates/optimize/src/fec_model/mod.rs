//! FAST CLOUD's queueing model (Liang & Kozat, sections IV–VI): the Δ+Exp task-delay model and its
//! fit, a fixed (n, k) code's usage, capacity and delay approximations under blocking and
//! non-blocking admission of at most L tasks, and the backlog thresholds Q_n that BAFEC (one class)
//! and MBAFEC (one set per class) choose code lengths by. All in seconds and requests per second.
//!
//! Owns: closed forms on plain numbers. Must not: know requests, queues, clocks or executors; the
//! policies and the simulator feed it numbers and read numbers back.

use serde::{Deserialize, Serialize};

/// Share of the slowest task delays the fit drops before taking moments (the paper's 0.1 %).
pub const FIT_DROPPED_SHARE: f64 = 0.001;

/// Task delays of one class (one operation on one chunk size): a constant Δ plus an exponential
/// of mean 1/μ, tasks independent of each other (the paper's section IV).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DelayModel {
    /// Δ, seconds.
    pub shift_s: f64,
    /// 1/μ, seconds.
    pub exp_mean_s: f64,
}

/// What a fit of task delays found, beside the model: how many samples it used and how many
/// it dropped, and whether Δ came out negative and was clamped to 0.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DelayFit {
    /// Δ and 1/μ.
    pub model: DelayModel,
    /// Delays the moments were taken over.
    pub samples_used: usize,
    /// The slowest delays left out.
    pub samples_dropped: usize,
    /// mean − std was negative (a tail heavier than exponential's): Δ set to 0.
    pub shift_clamped: bool,
    /// Delays known only to exceed their value (tasks cancelled before they finished); 0 for
    /// the paper's fit, which takes none.
    #[serde(default)]
    pub samples_censored: usize,
}

impl DelayModel {
    /// The model from Δ and 1/μ in seconds; `None` unless both are finite, Δ ≥ 0 and 1/μ > 0.
    pub fn new(shift_s: f64, exp_mean_s: f64) -> Option<DelayModel> {
        let valid = shift_s.is_finite() && exp_mean_s.is_finite() && shift_s >= 0.0 && exp_mean_s > 0.0;
        valid.then_some(DelayModel { shift_s, exp_mean_s })
    }

    /// The paper's fit (section V-D): drop the slowest 0.1 % of `delays_s`, then 1/μ = their
    /// standard deviation and Δ = mean − std (clamped at 0). `None` with fewer than two usable
    /// samples, a non-finite or negative sample, or no spread at all.
    pub fn fit(delays_s: &[f64]) -> Option<DelayFit> {
        if delays_s.iter().any(|d| !d.is_finite() || *d < 0.0) {
            return None;
        }
        let mut sorted = delays_s.to_vec();
        sorted.sort_by(f64::total_cmp);
        let dropped = (sorted.len() as f64 * FIT_DROPPED_SHARE).floor() as usize;
        let kept = &sorted[..sorted.len() - dropped];
        if kept.len() < 2 {
            return None;
        }
        let mean = kept.iter().sum::<f64>() / kept.len() as f64;
        let variance = kept.iter().map(|d| (d - mean) * (d - mean)).sum::<f64>() / kept.len() as f64;
        let std = variance.sqrt();
        // Rounding leaves equal samples a spread of ~1e-17 of their mean: that is none.
        if std <= mean * 1e-9 {
            return None;
        }
        let shift = mean - std;
        Some(DelayFit {
            model: DelayModel { shift_s: shift.max(0.0), exp_mean_s: std },
            samples_used: kept.len(),
            samples_dropped: dropped,
            shift_clamped: shift < 0.0,
            samples_censored: 0,
        })
    }

    /// A fit that also learns from tasks cancelled before they finished, for delays observed
    /// through first-k-of-n races: the cancelled are the slow ones, so the paper's fit over the
    /// finished alone comes out low (in the simulator, 1/μ 67 % low for (6,3) at 30 % load).
    /// `finished_s` are complete delays; `censored_s` are the times tasks had run when cancelled,
    /// known only to be below their delays. Δ is the [`FIT_DROPPED_SHARE`] quantile of the
    /// finished (the lowest 0.1 % dropped as the paper drops the highest; with a constant shift
    /// the fastest tasks sit on it), and 1/μ the exponential's maximum-likelihood mean under right
    /// censoring: Σ (t − Δ)⁺ over every task, finished or censored, ÷ the finished count. With
    /// nothing censored and nothing below Δ that is the mean of the finished minus Δ. `None` with
    /// fewer than two finished, a non-finite or negative sample, or no spread above Δ.
    pub fn fit_censored(finished_s: &[f64], censored_s: &[f64]) -> Option<DelayFit> {
        let valid = |d: &f64| d.is_finite() && *d >= 0.0;
        if !finished_s.iter().all(valid) || !censored_s.iter().all(valid) || finished_s.len() < 2 {
            return None;
        }
        let mut sorted = finished_s.to_vec();
        sorted.sort_by(f64::total_cmp);
        let dropped = (sorted.len() as f64 * FIT_DROPPED_SHARE).floor() as usize;
        let shift = sorted[dropped];
        let excess: f64 = sorted.iter().chain(censored_s).map(|d| (d - shift).max(0.0)).sum();
        let exp_mean = excess / sorted.len() as f64;
        if exp_mean <= shift.max(f64::MIN_POSITIVE) * 1e-9 {
            return None;
        }
        Some(DelayFit {
            model: DelayModel { shift_s: shift, exp_mean_s: exp_mean },
            samples_used: sorted.len(),
            samples_dropped: dropped,
            shift_clamped: false,
            samples_censored: censored_s.len(),
        })
    }

    /// Mean task delay Δ + 1/μ.
    pub fn mean_s(&self) -> f64 {
        self.shift_s + self.exp_mean_s
    }

    /// Δ/(Δ + 1/μ): the share of the mean that is constant (Table I's rows).
    pub fn shift_share(&self) -> f64 {
        self.shift_s / self.mean_s()
    }
}

/// How the frontend admits the request at the head of its queue (section III-C).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Admission {
    /// Only with n idle slots: its n tasks start together.
    Blocking,
    /// With one idle slot: its tasks queue for slots (work conserving; the paper's evaluations).
    NonBlocking,
}

/// One class of requests under a fixed frontend: its delay model, k, and the frontend's L slots.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FecClass {
    /// The class's task delays.
    pub delay: DelayModel,
    /// Chunks a request needs (the code's k).
    pub k: usize,
    /// L: tasks in flight at most.
    pub slots: usize,
    /// How the frontend admits a request.
    pub admission: Admission,
}

impl FecClass {
    /// u(n) = nΔ + k/μ: slot-seconds one request of code (n, k) holds on average, the n − k
    /// slowest tasks cancelled at the k-th finish.
    pub fn usage_s(&self, n: usize) -> f64 {
        assert!(self.k >= 1 && n >= self.k, "a code needs 1 ≤ k ≤ n (k {}, n {n})", self.k);
        n as f64 * self.delay.shift_s + self.k as f64 * self.delay.exp_mean_s
    }

    /// The capacity estimate C̃ in requests per second: (L − (n − 1)/2)/u(n) blocking (the middle
    /// of the paper's bounds (2)), L/u(n) non-blocking (eq. 3).
    pub fn capacity_per_s(&self, n: usize) -> f64 {
        let slots = self.slots as f64;
        let busy = match self.admission {
            Admission::Blocking => {
                assert!(n <= self.slots, "blocking admission cannot start {n} tasks in {} slots", self.slots);
                slots - (n as f64 - 1.0) / 2.0
            }
            Admission::NonBlocking => slots,
        };
        busy / self.usage_s(n)
    }

    /// D_s(n, k) = Δ + Σ_{j=n−k+1}^{n} 1/(jμ): the k-th order statistic of n task delays.
    pub fn service_delay_s(&self, n: usize) -> f64 {
        assert!(self.k >= 1 && n >= self.k, "a code needs 1 ≤ k ≤ n (k {}, n {n})", self.k);
        let tail: f64 = (n - self.k + 1..=n).map(|j| 1.0 / j as f64).sum();
        self.delay.shift_s + self.delay.exp_mean_s * tail
    }

    /// D̃_q(n, k, λ): the request queue as an M/G/1 queue whose service times are Erlang of shape
    /// n and mean 1/C̃ (Pollaczek–Khinchin), λ(n + 1)/(2n·C̃·(C̃ − λ)). Infinite at or past C̃.
    pub fn queueing_delay_s(&self, n: usize, rate_per_s: f64) -> f64 {
        let capacity = self.capacity_per_s(n);
        if rate_per_s >= capacity {
            return f64::INFINITY;
        }
        let n = n as f64;
        rate_per_s * (n + 1.0) / (2.0 * n * capacity * (capacity - rate_per_s))
    }

    /// D̃ = D_s + D̃_q: the mean request delay the model predicts at `rate_per_s`.
    pub fn delay_s(&self, n: usize, rate_per_s: f64) -> f64 {
        self.service_delay_s(n) + self.queueing_delay_s(n, rate_per_s)
    }

    /// λ_n of eq. (4): the arrival rate where (n, k) and (n + 1, k) predict the same delay; below
    /// it n + 1 is better. The one root in (0, C̃(n + 1)) of
    /// a(C̃_n − λ)(C̃_{n+1} − λ) + Aλ(C̃_{n+1} − λ) − A′λ(C̃_n − λ), a = D_s(n) − D_s(n + 1),
    /// A = (n + 1)/(2n·C̃_n), A′ = (n + 2)/(2(n + 1)·C̃_{n+1}). There is exactly one: the
    /// quadratic is a·C̃_n·C̃_{n+1} > 0 at 0 and −A′·C̃_{n+1}(C̃_n − C̃_{n+1}) < 0 at C̃_{n+1}.
    pub fn crossover_rate_per_s(&self, n: usize) -> f64 {
        let (c0, c1) = (self.capacity_per_s(n), self.capacity_per_s(n + 1));
        let a = self.service_delay_s(n) - self.service_delay_s(n + 1);
        let nf = n as f64;
        let big_a = (nf + 1.0) / (2.0 * nf * c0);
        let big_a1 = (nf + 2.0) / (2.0 * (nf + 1.0) * c1);
        assert!(a > 0.0 && c0 > c1 && c1 > 0.0, "a longer code serves faster and holds more slots");
        let quadratic = |x: f64| a * (c0 - x) * (c1 - x) + big_a * x * (c1 - x) - big_a1 * x * (c0 - x);
        // The root of the closed form, refined by bisection so cancellation cannot move it out of
        // the interval: the sign change is unique there.
        let (mut low, mut high) = (0.0, c1);
        for _ in 0..200 {
            let middle = 0.5 * (low + high);
            if quadratic(middle) > 0.0 {
                low = middle;
            } else {
                high = middle;
            }
            if high - low <= f64::EPSILON * c1 {
                break;
            }
        }
        0.5 * (low + high)
    }

    /// Q_n = λ_n · D̃_q(n, λ_n) (Little's law): the mean request-queue length where n and n + 1
    /// cross.
    pub fn crossover_backlog(&self, n: usize) -> f64 {
        let rate = self.crossover_rate_per_s(n);
        rate * self.queueing_delay_s(n, rate)
    }

    /// BAFEC's thresholds for codes k ..= `n_max` of this class.
    pub fn thresholds(&self, n_max: usize) -> BacklogThresholds {
        assert!(n_max >= self.k, "n_max {n_max} below k {}", self.k);
        let crossings = (self.k..n_max)
            .map(|n| Crossing { n, rate_per_s: self.crossover_rate_per_s(n), backlog: self.crossover_backlog(n) })
            .collect();
        BacklogThresholds { k: self.k, n_max, crossings }
    }
}

/// Where codes n and n + 1 of one class predict the same delay.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Crossing {
    /// The shorter of the two codes.
    pub n: usize,
    /// λ_n.
    pub rate_per_s: f64,
    /// Q_n.
    pub backlog: f64,
}

/// BAFEC's table for one class: Q_k > Q_{k+1} > … > Q_{n_max − 1}.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BacklogThresholds {
    /// The class's k: the shortest code.
    pub k: usize,
    /// The longest code.
    pub n_max: usize,
    /// One per n in k .. n_max, in order of n.
    pub crossings: Vec<Crossing>,
}

impl BacklogThresholds {
    /// The code length for a request that finds `backlog` waiting (section V-E): k at or above
    /// Q_k, n where Q_n ≤ backlog < Q_{n−1}, n_max below Q_{n_max − 1}.
    pub fn code_length(&self, backlog: f64) -> usize {
        self.crossings.iter().find(|c| backlog >= c.backlog).map_or(self.n_max, |c| c.n)
    }

    /// Whether every threshold is below the one before it (the paper's "easy to show").
    pub fn strictly_decreasing(&self) -> bool {
        self.crossings.windows(2).all(|pair| pair[1].backlog < pair[0].backlog)
    }
}

#[cfg(test)]
mod tests;
