//! Lemma 2 of Xiang et al., corrected: the mean and variance of a chunk's delay D = N + Q at a
//! queue that is its own M/G/1 FCFS server at a reserved bandwidth B_eff, when a standard chunk
//! takes X seconds at the reference bandwidth B (so X·B/B_eff at B_eff, the paper's (8)) and the
//! connection delay N is independent of the queue. With s = B/B_eff and ρ = Λ·μ·s:
//!
//! ```text
//! E[D]   = η + μ·s + Λ·Γ₂·s²/(2(1 − ρ))                      (transfer + Pollaczek–Khinchine wait)
//! Var[D] = ξ² + σ²·s² + Λ·Γ₃·s³/(3(1 − ρ)) + Λ²·Γ₂²·s⁴/(4(1 − ρ)²)      (Takács)
//! ```
//!
//! which are the brief's forms with s = B/B_eff multiplied out. The paper's printed (9) and (10)
//! drop the transfer time μ·s and the service variance σ²·s², and print Λ for Λ² in the last
//! term; [`printed_delay_moments`] keeps them as printed, only so that an experiment can show
//! how far below the true delay they fall.
//!
//! Owns: these closed forms and their derivatives in Λ and B_eff (for the solver's gradients).
//! Must not: return NaN. A saturated queue (ρ ≥ 1), or one asked to carry chunks with no
//! bandwidth, has infinite moments; an idle queue with no bandwidth too (a chunk sent there
//! would never arrive), which makes "no bandwidth" an infinite price rather than a free one.

use serde::{Deserialize, Serialize};

/// The moments of X, the service time of one standard chunk at the reference bandwidth B.
/// Stored as raw moments (μ = E\[X\], Γ₂ = E\[X²\], Γ₃ = E\[X³\]) so that σ² = Γ₂ − μ² cannot
/// disagree with them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServiceMoments {
    /// μ = E\[X\], seconds.
    pub mean_s: f64,
    /// Γ₂ = E\[X²\], seconds².
    pub second_moment_s2: f64,
    /// Γ₃ = E\[X³\], seconds³.
    pub third_moment_s3: f64,
}

impl ServiceMoments {
    /// The moments if they can belong to a positive random variable: μ > 0, Γ₂ ≥ μ² and
    /// Γ₃·μ ≥ Γ₂² (Cauchy–Schwarz on X^½·X^{3/2}), all finite; `None` otherwise.
    pub fn new(mean_s: f64, second_moment_s2: f64, third_moment_s3: f64) -> Option<ServiceMoments> {
        let finite = mean_s.is_finite() && second_moment_s2.is_finite() && third_moment_s3.is_finite();
        // Rounding of moments computed elsewhere: allow a relative 1e-12 below the inequalities.
        let slack = 1.0 - 1e-12;
        let valid = finite
            && mean_s > 0.0
            && second_moment_s2 >= slack * mean_s * mean_s
            && third_moment_s3 * mean_s >= slack * second_moment_s2 * second_moment_s2;
        valid.then_some(ServiceMoments { mean_s, second_moment_s2, third_moment_s3 })
    }

    /// X ≡ `value_s` (a fixed chunk at a fixed rate).
    pub fn deterministic(value_s: f64) -> ServiceMoments {
        assert!(value_s > 0.0 && value_s.is_finite(), "a service time is positive");
        ServiceMoments { mean_s: value_s, second_moment_s2: value_s.powi(2), third_moment_s3: value_s.powi(3) }
    }

    /// X ~ Exp(mean `mean_s`): Γ₂ = 2μ², Γ₃ = 6μ³.
    pub fn exponential(mean_s: f64) -> ServiceMoments {
        ServiceMoments::shifted_exponential(0.0, mean_s)
    }

    /// X = Δ + Exp(m), the Δ+Exp model lowtail's nodes use: E\[X^t\] = Σ_i C(t,i) Δ^(t−i) i! m^i.
    pub fn shifted_exponential(shift_s: f64, exp_mean_s: f64) -> ServiceMoments {
        assert!(shift_s >= 0.0 && exp_mean_s >= 0.0 && shift_s + exp_mean_s > 0.0, "Δ, m ≥ 0, not both 0");
        let (a, m) = (shift_s, exp_mean_s);
        ServiceMoments {
            mean_s: a + m,
            second_moment_s2: a * a + 2.0 * a * m + 2.0 * m * m,
            third_moment_s3: a.powi(3) + 3.0 * a * a * m + 6.0 * a * m * m + 6.0 * m.powi(3),
        }
    }

    /// σ² = Γ₂ − μ² (clamped at 0 against rounding), seconds².
    pub fn variance_s2(&self) -> f64 {
        (self.second_moment_s2 - self.mean_s * self.mean_s).max(0.0)
    }
}

/// The connection delay N_{i,j} between a client rack and a storage rack: mean η, variance ξ².
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConnectionDelay {
    /// η, seconds.
    pub mean_s: f64,
    /// ξ², seconds².
    pub variance_s2: f64,
}

/// Mean and variance of a chunk's delay D = N + Q.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DelayMoments {
    /// E\[D\], seconds; +∞ for a saturated queue.
    pub mean_s: f64,
    /// Var\[D\], seconds²; +∞ for a saturated queue.
    pub variance_s2: f64,
}

impl DelayMoments {
    const INFINITE: DelayMoments = DelayMoments { mean_s: f64::INFINITY, variance_s2: f64::INFINITY };

    /// Both moments finite (the queue is stable).
    pub fn is_finite(&self) -> bool {
        self.mean_s.is_finite() && self.variance_s2.is_finite()
    }
}

/// ρ = Λ·μ·B/B_eff: 0 for an idle queue, +∞ for a busy queue with no bandwidth.
pub fn utilisation(arrival_per_s: f64, reserved_bps: f64, reference_bps: f64, service_mean_s: f64) -> f64 {
    if arrival_per_s <= 0.0 {
        return 0.0;
    }
    if reserved_bps <= 0.0 {
        return f64::INFINITY;
    }
    arrival_per_s * service_mean_s * reference_bps / reserved_bps
}

/// Corrected Lemma 2: E\[D\] and Var\[D\] of a queue receiving Poisson chunk requests at
/// `arrival_per_s` (Λ) and served at `reserved_bps` (B_eff), X measured at `reference_bps` (B).
/// Infinite when ρ ≥ 1 or B_eff ≤ 0.
pub fn delay_moments(
    arrival_per_s: f64,
    reserved_bps: f64,
    reference_bps: f64,
    service: &ServiceMoments,
    connection: &ConnectionDelay,
) -> DelayMoments {
    delay_moments_with_slopes(arrival_per_s, reserved_bps, reference_bps, service, connection).moments
}

/// The paper's (9) and (10) exactly as printed: no transfer time, no service variance, and Λ
/// where Λ² belongs. Kept to document the erratum; the solver never uses it. Infinite when
/// ρ ≥ 1 or B_eff ≤ 0.
pub fn printed_delay_moments(
    arrival_per_s: f64,
    reserved_bps: f64,
    reference_bps: f64,
    service: &ServiceMoments,
    connection: &ConnectionDelay,
) -> DelayMoments {
    let Some((scale, slack)) = scale_and_slack(arrival_per_s, reserved_bps, reference_bps, service) else {
        return DelayMoments::INFINITE;
    };
    let lambda = arrival_per_s;
    let wait_mean_s = lambda * service.second_moment_s2 * scale * scale / (2.0 * slack);
    DelayMoments {
        mean_s: connection.mean_s + wait_mean_s,
        variance_s2: connection.variance_s2
            + lambda * service.third_moment_s3 * scale.powi(3) / (3.0 * slack)
            + lambda * service.second_moment_s2.powi(2) * scale.powi(4) / (4.0 * slack * slack),
    }
}

/// The corrected moments with their partial derivatives in Λ and in B_eff. Every field is +∞
/// (the derivatives in B_eff −∞) when the queue is saturated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct MomentSlopes {
    pub moments: DelayMoments,
    /// ∂E\[D\]/∂Λ, s².
    pub mean_per_arrival: f64,
    /// ∂Var\[D\]/∂Λ, s³.
    pub variance_per_arrival: f64,
    /// ∂E\[D\]/∂B_eff, s per bandwidth unit.
    pub mean_per_bandwidth: f64,
    /// ∂Var\[D\]/∂B_eff, s² per bandwidth unit.
    pub variance_per_bandwidth: f64,
}

/// s = B/B_eff and 1 − ρ, or `None` when the queue cannot be stable.
fn scale_and_slack(
    arrival_per_s: f64,
    reserved_bps: f64,
    reference_bps: f64,
    service: &ServiceMoments,
) -> Option<(f64, f64)> {
    if reserved_bps <= 0.0 || !reserved_bps.is_finite() {
        return None;
    }
    let scale = reference_bps / reserved_bps;
    let slack = 1.0 - arrival_per_s.max(0.0) * service.mean_s * scale;
    (slack > 0.0 && scale.is_finite()).then_some((scale, slack))
}

pub(crate) fn delay_moments_with_slopes(
    arrival_per_s: f64,
    reserved_bps: f64,
    reference_bps: f64,
    service: &ServiceMoments,
    connection: &ConnectionDelay,
) -> MomentSlopes {
    let Some((s, slack)) = scale_and_slack(arrival_per_s, reserved_bps, reference_bps, service) else {
        return MomentSlopes {
            moments: DelayMoments::INFINITE,
            mean_per_arrival: f64::INFINITY,
            variance_per_arrival: f64::INFINITY,
            mean_per_bandwidth: f64::NEG_INFINITY,
            variance_per_bandwidth: f64::NEG_INFINITY,
        };
    };
    let lambda = arrival_per_s.max(0.0);
    let (mu, gamma2, gamma3) = (service.mean_s, service.second_moment_s2, service.third_moment_s3);
    let sigma2 = service.variance_s2();
    // The Pollaczek–Khinchine wait w = ΛΓ₂s²/(2(1−ρ)); its square is the last variance term.
    let wait = lambda * gamma2 * s * s / (2.0 * slack);
    let third = lambda * gamma3 * s.powi(3) / (3.0 * slack);
    let mean = connection.mean_s + mu * s + wait;
    let variance = connection.variance_s2 + sigma2 * s * s + third + wait * wait;
    // Derivatives in s (ρ = Λμs, d(1−ρ)/ds = −Λμ) and in Λ (d(1−ρ)/dΛ = −μs).
    let wait_per_scale = lambda * gamma2 * s / slack + lambda * lambda * mu * gamma2 * s * s / (2.0 * slack * slack);
    let third_per_scale =
        lambda * gamma3 * s * s / slack + lambda * lambda * mu * gamma3 * s.powi(3) / (3.0 * slack * slack);
    let mean_per_scale = mu + wait_per_scale;
    let variance_per_scale = 2.0 * sigma2 * s + third_per_scale + 2.0 * wait * wait_per_scale;
    let wait_per_arrival = gamma2 * s * s / (2.0 * slack * slack);
    let third_per_arrival = gamma3 * s.powi(3) / (3.0 * slack * slack);
    // ds/dB_eff = −B/B_eff² = −s²/B.
    let scale_per_bandwidth = -s * s / reference_bps;
    MomentSlopes {
        moments: DelayMoments { mean_s: mean, variance_s2: variance },
        mean_per_arrival: wait_per_arrival,
        variance_per_arrival: third_per_arrival + 2.0 * wait * wait_per_arrival,
        mean_per_bandwidth: mean_per_scale * scale_per_bandwidth,
        variance_per_bandwidth: variance_per_scale * scale_per_bandwidth,
    }
}
