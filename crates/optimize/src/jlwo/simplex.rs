//! Pair descent (SMO, as in `load_direction`) for a convex function over a capped simplex
//! {x : Σ x = const, 0 ≤ x_c ≤ upper_c}: move mass from the coordinate with the largest
//! partial derivative among those that can give (x > 0) to the one with the smallest among those
//! that can take (x < upper), by a line search along that pair. The pair with the largest
//! violation is the one KKT measures, so a small violation is the stopping rule; for smooth
//! convex functions this working-set choice converges (Lin, 2001; Keerthi and Gilbert, 2002).
//!
//! The line search only ever lands where the directional slope is still ≤ 0, so every step lowers
//! the function (a convex function falls while its slope is negative), and it treats an
//! infeasible trial point (a saturated queue: slope reported +∞) as "too far". JLWO's objective
//! blows up at the edge of stability, so its feasible part of the line is an interval around the
//! current point and the search stays inside it.
//!
//! Owns: the step rule and its caps. Must not: know what the coordinates mean (the problem
//! supplies gradients and slopes), allocate per step beyond the gradient buffers, or loop
//! unbounded.

/// A convex function on a capped simplex, seen through its derivatives.
pub(crate) trait PairProblem {
    /// The one-sided partial derivatives at `x`: `up[c]` = d/dt f(x + t·e_c) and `down[c]` =
    /// −d/dt f(x − t·e_c) at t = 0⁺ (equal where f is smooth; up ≥ down at a kink, such as a
    /// queue reaching its port cap). Also the moment to cache what [`PairProblem::slope`] needs
    /// at `x`: slopes are only asked between two gradient calls, at points of the line through
    /// the `x` of the last one.
    fn gradient(&mut self, x: &[f64], up: &mut [f64], down: &mut [f64]);
    /// The derivative in δ of the function at x + δ(e_to − e_from), x the point of the last
    /// gradient call; +∞ if that point is infeasible.
    fn slope(&mut self, x: &[f64], to: usize, from: usize, delta: f64) -> f64;
    /// Whether coordinate `c` may grow at the point of the last gradient call, for constraints
    /// beyond the box (a problem with only the box keeps the default).
    fn can_increase(&self, _c: usize) -> bool {
        true
    }
}

/// Caps and tolerances of one pair descent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PairLimits {
    /// Pair attempts at most (a step, or a pair found blocked).
    pub steps_max: u32,
    /// Slope evaluations per line search at most.
    pub line_search_iterations_max: u32,
    /// Stop when the largest violation g_from − g_to is at most this share of |g|.
    pub violation_relative: f64,
}

/// Buffers reused across descents.
#[derive(Clone, Debug, Default)]
pub(crate) struct PairScratch {
    up: Vec<f64>,
    down: Vec<f64>,
    /// Coordinates found unable to grow (`blocked_up`) or shrink (`blocked_down`) since the
    /// last step, and the list of those set, to clear them cheaply.
    blocked_up: Vec<bool>,
    blocked_down: Vec<bool>,
    blocked: Vec<usize>,
}

/// Improves `x` (feasible on entry, and kept so) by at most `limits.steps_max` pair attempts;
/// returns the steps taken. A pair whose line search cannot move (a constraint outside the box
/// is active, or stability is at the edge) is set aside and the next most violating pair tried,
/// until a step succeeds (which clears the set-aside list) or no pair is left.
pub(crate) fn pair_descent<P: PairProblem>(
    problem: &mut P,
    x: &mut [f64],
    upper: &[f64],
    scratch: &mut PairScratch,
    limits: &PairLimits,
) -> u32 {
    debug_assert_eq!(x.len(), upper.len());
    let PairScratch { up, down, blocked_up, blocked_down, blocked } = scratch;
    for buffer in [&mut *up, &mut *down] {
        buffer.clear();
        buffer.resize(x.len(), 0.0);
    }
    for flags in [&mut *blocked_up, &mut *blocked_down] {
        flags.clear();
        flags.resize(x.len(), false);
    }
    blocked.clear();
    let mut steps = 0;
    let mut fresh_gradient = false;
    for _ in 0..limits.steps_max {
        if !fresh_gradient {
            problem.gradient(x, up, down);
            fresh_gradient = true;
        }
        let (mut to, mut from) = (usize::MAX, usize::MAX);
        for c in 0..x.len() {
            let may_grow = x[c] < upper[c] && !blocked_up[c];
            if may_grow && (to == usize::MAX || up[c] < up[to]) && problem.can_increase(c) {
                to = c;
            }
            if x[c] > 0.0 && !blocked_down[c] && (from == usize::MAX || down[c] > down[from]) {
                from = c;
            }
        }
        if to == usize::MAX || from == usize::MAX || to == from {
            break;
        }
        let (low_gradient, high_gradient) = (up[to], down[from]);
        if !low_gradient.is_finite() || high_gradient.is_nan() {
            break;
        }
        let violation = high_gradient - low_gradient;
        let scale = high_gradient.abs().max(low_gradient.abs());
        let worth_a_step = violation > limits.violation_relative * scale;
        if !worth_a_step {
            break;
        }
        let reach = (upper[to] - x[to]).min(x[from]);
        let slope_at_zero = if violation.is_finite() { -violation } else { f64::NEG_INFINITY };
        let delta = line_search(problem, x, to, from, reach, slope_at_zero, limits.line_search_iterations_max);
        if delta <= 0.0 {
            blocked_up[to] = true;
            blocked_down[from] = true;
            blocked.extend([to, from]);
            continue;
        }
        // Land exactly on the bound a full step reaches, so "x > 0" and "x < upper" stay exact.
        if delta >= reach {
            if upper[to] - x[to] <= x[from] {
                x[from] -= upper[to] - x[to];
                x[to] = upper[to];
            } else {
                x[to] += x[from];
                x[from] = 0.0;
            }
        } else {
            x[to] += delta;
            x[from] -= delta;
        }
        x[from] = x[from].max(0.0);
        x[to] = x[to].min(upper[to]);
        steps += 1;
        fresh_gradient = false;
        for &c in blocked.iter() {
            blocked_up[c] = false;
            blocked_down[c] = false;
        }
        blocked.clear();
    }
    steps
}

/// The step along e_to − e_from in [0, reach]: the full reach if the slope is still ≤ 0 there,
/// else a point where the slope has risen to nearly 0 from `slope_at_zero` (< 0), by false
/// position (Illinois) with bisection when a trial point is infeasible. Always a point whose slope
/// is ≤ 0, so the function has fallen; 0 if none was found.
fn line_search<P: PairProblem>(
    problem: &mut P,
    x: &[f64],
    to: usize,
    from: usize,
    reach: f64,
    slope_at_zero: f64,
    iterations_max: u32,
) -> f64 {
    let end_slope = problem.slope(x, to, from, reach);
    if end_slope <= 0.0 {
        return reach;
    }
    // Close enough to the 1-D minimum: the outer loop picks the next pair anyway.
    let good_enough = if slope_at_zero.is_finite() { 1e-3 * slope_at_zero.abs() } else { 0.0 };
    let (mut low, mut low_slope) = (0.0, slope_at_zero);
    let (mut high, mut high_slope) = (reach, end_slope);
    // Illinois: halve the slope kept at an end that stays twice in a row.
    let mut kept_end = 0i8;
    for _ in 0..iterations_max {
        let trial = if high_slope.is_finite() && low_slope.is_finite() {
            let t = low + (high - low) * (-low_slope) / (high_slope - low_slope);
            if t > low && t < high { t } else { 0.5 * (low + high) }
        } else {
            0.5 * (low + high)
        };
        if trial <= low || trial >= high {
            break;
        }
        let s = problem.slope(x, to, from, trial);
        if s <= 0.0 {
            low = trial;
            low_slope = s;
            if -s <= good_enough {
                break;
            }
            if kept_end == 1 && high_slope.is_finite() {
                high_slope *= 0.5;
            }
            kept_end = 1;
        } else {
            high = trial;
            high_slope = s;
            if kept_end == -1 {
                low_slope *= 0.5;
            }
            kept_end = -1;
        }
    }
    low
}
