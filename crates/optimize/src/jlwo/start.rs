//! A cold start that follows the demand: where JLWO's oblivious start (equal W over every
//! inter-rack queue, equal w) leaves a loaded queue saturated — a few client racks asking much,
//! most queues idle — W and w are spread in proportion to each queue's load under uniform π,
//! with a small floor so every queue keeps some bandwidth (Σ W = 1, eq. 23), and B·W clipped to
//! the port cap with the excess handed to the queues below it (bounded rounds).
//!
//! Must not: decide anything but the starting weights (π stays uniform, z zero, placement the
//! instance's); the alternation improves from here.

use super::{Instance, Solution, initial_solution};

/// Share of the weights spread evenly over every queue (the rest follows the load).
const FLOOR_SHARE: f64 = 0.05;
/// Rounds of clipping to the port cap at most.
const CAP_ROUNDS_MAX: usize = 64;

/// The demand-proportional start; see the module documentation.
pub fn demand_start(instance: &Instance) -> Solution {
    let mut solution = initial_solution(instance);
    let (racks, classes, n, k) = (instance.rack_count, instance.class_count(), instance.code_n, instance.code_k);
    let uniform = k as f64 / n as f64;
    let mut loads = vec![0.0; racks * racks * classes];
    for file in &instance.files {
        for (client, rate) in file.request_rates_per_s.iter().enumerate() {
            for &storage in &file.racks {
                loads[(client * racks + storage as usize) * classes + file.class] += rate * uniform;
            }
        }
    }
    let inter: Vec<usize> = (0..loads.len()).filter(|q| (q / classes) / racks != (q / classes) % racks).collect();
    let total: f64 = inter.iter().map(|&q| loads[q]).sum();
    if total > 0.0 {
        let floor = FLOOR_SHARE / inter.len() as f64;
        for &q in &inter {
            solution.inter_weights[q] = floor + (1.0 - FLOOR_SHARE) * loads[q] / total;
        }
        clip_to_cap(
            &mut solution.inter_weights,
            &inter,
            instance.queue_bandwidth_max_bps / instance.aggregation_bandwidth_bps,
        );
    }
    for rack in 0..racks {
        let intra: Vec<f64> = (0..classes).map(|d| loads[(rack * racks + rack) * classes + d]).collect();
        let sum: f64 = intra.iter().sum();
        if sum > 0.0 {
            for (d, load) in intra.iter().enumerate() {
                solution.intra_shares[rack * classes + d] =
                    FLOOR_SHARE / classes as f64 + (1.0 - FLOOR_SHARE) * load / sum;
            }
        }
    }
    solution
}

/// Clips each of `queues`' weights to `cap` and hands what was cut to the queues below it, in
/// proportion to their weights, until none is over (or the rounds run out: then the sum may fall
/// short of 1, which the feasibility check reports).
fn clip_to_cap(weights: &mut [f64], queues: &[usize], cap: f64) {
    for _ in 0..CAP_ROUNDS_MAX {
        let excess: f64 = queues.iter().map(|&q| (weights[q] - cap).max(0.0)).sum();
        if excess <= 1e-15 {
            return;
        }
        let below: f64 = queues.iter().map(|&q| weights[q]).filter(|&w| w < cap).sum();
        if below <= 0.0 {
            return;
        }
        for &q in queues {
            if weights[q] >= cap {
                weights[q] = cap;
            } else {
                weights[q] += excess * weights[q] / below;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{
        ConnectionDelay, FileDemand, Instance, JlwoError, JlwoLimits, ServiceMoments, check_feasible, solve,
    };
    use super::*;

    /// Six racks, (3,2), one class; every request from rack 0, at `rate` per file for 4 files over
    /// racks 1–3: under equal W each inter queue gets 1/30 of B, too little for racks 1–3.
    fn one_rack_asks(rate: f64) -> Instance {
        let files = (0..4)
            .map(|f| FileDemand {
                class: 0,
                racks: vec![1, 2, 3 + (f % 2) * 2],
                request_rates_per_s: vec![rate, 0.0, 0.0, 0.0, 0.0, 0.0],
            })
            .collect();
        Instance {
            rack_count: 6,
            aggregation_bandwidth_bps: 10e9,
            tor_bandwidth_bps: 25e9,
            queue_bandwidth_max_bps: 4e9,
            class_weights: vec![1.0],
            service: ServiceMoments::deterministic(0.001),
            connection: Instance::connection_intra_inter(6, ConnectionDelay::default(), ConnectionDelay::default()),
            code_n: 3,
            code_k: 2,
            files,
        }
    }

    #[test]
    fn a_demand_start_is_feasible_where_the_oblivious_one_saturates() {
        let instance = one_rack_asks(100.0);
        let oblivious = check_feasible(&instance, &initial_solution(&instance));
        assert!(matches!(oblivious, Err(JlwoError::Saturated { .. })), "{oblivious:?}");
        let start = demand_start(&instance);
        check_feasible(&instance, &start).unwrap();
        let cap = instance.queue_bandwidth_max_bps / instance.aggregation_bandwidth_bps;
        assert!(start.inter_weights.iter().all(|&w| w <= cap + 1e-12));
        assert!((start.inter_weights.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        let outcome = solve(&instance, &JlwoLimits { optimise_placement: false, ..Default::default() }, None).unwrap();
        assert!(outcome.evaluation.objective <= outcome.initial_objective);
        // Too much even for the best start: the oblivious start's error comes back.
        assert!(matches!(solve(&one_rack_asks(1e5), &JlwoLimits::default(), None), Err(JlwoError::Saturated { .. })));
    }
}
