//! Theorem 1 of Xiang et al. (Lemma 1, after Bertsimas–Natarajan): for a request that reads a
//! random k-subset A of its racks, rack j with marginal probability π_j, and for any z ∈ ℝ,
//!
//! ```text
//! E[max_{j∈A} D_j] ≤ z + Σ_j (π_j/2)·f_j(z),   f_j = H_j + √(H_j² + G_j),  H_j = E[D_j] − z,  G_j = Var[D_j]
//! ```
//!
//! whatever the dependence between the D_j (it is z + Σ_j π_j·E\[(D_j − z)⁺\] bounded through
//! the first two moments). The right side is convex in z; its minimiser solves
//! Σ_j (π_j/2)(1 + H_j/√(H_j² + G_j)) = 1, whose left side falls from Σπ = k to 0 as z grows, so
//! bisection finds it.
//!
//! Owns: f, the bound, the optimal z. Must not: loop unbounded (bracket growth and bisection are
//! capped) or return NaN: an unstable queue (infinite moments) carrying weight makes the bound
//! +∞ at every z.

use super::moments::DelayMoments;

/// Bracket doublings at most when searching the optimal z.
const BRACKET_DOUBLINGS_MAX: u32 = 80;
/// Bisection steps at most (from a bracket of the delays' spread, 100 halvings reach f64's end).
const BISECTION_STEPS_MAX: u32 = 100;

/// f(H, G) = H + √(H² + G), in a form that does not cancel when H ≪ 0 (there it equals
/// G/(√(H² + G) − H), tiny and positive).
pub fn auxiliary_f(excess_mean_s: f64, variance_s2: f64) -> f64 {
    let root = (excess_mean_s * excess_mean_s + variance_s2).sqrt();
    if excess_mean_s >= 0.0 { excess_mean_s + root } else { variance_s2 / (root - excess_mean_s) }
}

/// f and its partial derivatives ∂f/∂H = f/√(H² + G) and ∂f/∂G = 1/(2√(H² + G)).
pub(crate) fn auxiliary_f_slopes(excess_mean_s: f64, variance_s2: f64) -> (f64, f64, f64) {
    // At H = G = 0 (a deterministic delay equal to z) f has a kink; any subgradient will do,
    // and a tiny positive root keeps the slopes finite instead of 0/0.
    let root = (excess_mean_s * excess_mean_s + variance_s2).sqrt().max(1e-300);
    let value = auxiliary_f(excess_mean_s, variance_s2);
    (value, value / root, 0.5 / root)
}

/// Theorem 1's bound at `z_s`: z + Σ_j (π_j/2)·f(E_j − z, V_j). Terms with π_j = 0 are left out
/// (an unread rack's queue may be unstable); +∞ if a read one is unstable.
pub fn order_statistic_bound_s(z_s: f64, probabilities: &[f64], moments: &[DelayMoments]) -> f64 {
    assert_eq!(probabilities.len(), moments.len(), "one moment pair per rack");
    let mut bound = z_s;
    for (&p, m) in probabilities.iter().zip(moments) {
        if p <= 0.0 {
            continue;
        }
        if !m.is_finite() {
            return f64::INFINITY;
        }
        bound += 0.5 * p * auxiliary_f(m.mean_s - z_s, m.variance_s2);
    }
    bound
}

/// The z minimising [`order_statistic_bound_s`], by bisection on the monotone equation above.
/// Weights need not sum to an integer: the solver calls this with Λ_{i,j,d}/Σ_r λ_{i,r,d} (which
/// sum to k). When they sum to 1 (k = 1) the bound decreases towards Σ_j π_j·E_j (the exact mean)
/// as z → −∞ and has no minimiser: the returned z is then far below the means, where the bound is
/// within spread/40000 of that limit. (Weights summing to less than 1 are no k-subset: Lemma 1
/// does not hold for them.) Returns 0 when a weighted queue is unstable or no weight is
/// positive (the bound is then +∞ or z itself, and z is arbitrary).
pub fn optimal_z_s(probabilities: &[f64], moments: &[DelayMoments]) -> f64 {
    assert_eq!(probabilities.len(), moments.len(), "one moment pair per rack");
    let (mut mean_min, mut mean_max, mut spread) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for (&p, m) in probabilities.iter().zip(moments) {
        if p <= 0.0 {
            continue;
        }
        if !m.is_finite() {
            return 0.0;
        }
        mean_min = mean_min.min(m.mean_s);
        mean_max = mean_max.max(m.mean_s);
        spread = spread.max(m.variance_s2.sqrt());
    }
    if mean_min > mean_max {
        return 0.0;
    }
    let width0 = (spread + (mean_max - mean_min)).max(1e-9 * mean_max.abs().max(1.0)).max(1e-12);
    if probabilities.iter().filter(|p| **p > 0.0).sum::<f64>() <= 1.0 + 1e-9 {
        // One read (k = 1): no minimiser. Far enough below the means that the bound exceeds its
        // limit Σπ_j·E_j by at most Σπ_j·G_j/(4|H_j|) ≤ spread/40000, near enough that z·Σπ
        // does not cancel away the digits of the means.
        return mean_min - 1e4 * width0;
    }
    // Slope of the bound in z: 1 − Σ_j (π_j/2)(1 + H_j/√(H_j² + G_j)); increasing in z.
    let slope = |z: f64| -> f64 {
        let mut falling = 0.0;
        for (&p, m) in probabilities.iter().zip(moments) {
            if p > 0.0 {
                let h = m.mean_s - z;
                let root = (h * h + m.variance_s2).sqrt();
                // 1 + h/root without cancellation for h ≪ 0; a zero root (h = G = 0) counts half.
                let share = if root == 0.0 {
                    1.0
                } else if h >= 0.0 {
                    1.0 + h / root
                } else {
                    m.variance_s2 / (root * (root - h))
                };
                falling += 0.5 * p * share;
            }
        }
        1.0 - falling
    };
    let (mut low, mut high) = (mean_min - width0, mean_max + width0);
    let mut width = width0;
    for _ in 0..BRACKET_DOUBLINGS_MAX {
        if slope(low) <= 0.0 {
            break;
        }
        width *= 2.0;
        low = mean_min - width;
    }
    width = width0;
    for _ in 0..BRACKET_DOUBLINGS_MAX {
        if slope(high) >= 0.0 {
            break;
        }
        width *= 2.0;
        high = mean_max + width;
    }
    if slope(low) > 0.0 || slope(high) < 0.0 {
        // Not bracketed within the caps (weights summing to just above 1): the far end.
        return if slope(low) > 0.0 { low } else { high };
    }
    for _ in 0..BISECTION_STEPS_MAX {
        let middle = 0.5 * (low + high);
        if middle <= low || middle >= high {
            break;
        }
        if slope(middle) < 0.0 { low = middle } else { high = middle }
    }
    0.5 * (low + high)
}
