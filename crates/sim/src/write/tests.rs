//! The simulator's write shell: acknowledgement times against the order statistics of exponential
//! service, a copy written elsewhere, determinism by seed.

use super::*;
use execution::{StragglerWait, WriteRule};

const MS: u64 = 1_000_000;
const RS63: CodeSpec = CodeSpec::Rs { k: 6, m: 3 };

fn settings(early_failures_tolerated: Option<usize>) -> WriteSettings {
    WriteSettings {
        rule: WriteRule { early_failures_tolerated, straggler: None },
        retries: 3,
        min_failures_tolerated: 1,
    }
}

/// E[the j-th smallest of n i.i.d. Exp(mean)] = mean × (1/n + 1/(n−1) + … + 1/(n−j+1)).
fn order_statistic_mean(n: usize, j: usize, mean: f64) -> f64 {
    (0..j).map(|i| mean / (n - i) as f64).sum()
}

fn mean_decision_ns(outputs: &[WriteOutput]) -> f64 {
    outputs.iter().map(|o| o.decided_ns as f64).sum::<f64>() / outputs.len() as f64
}

#[test]
fn acknowledgement_times_match_the_order_statistics_of_exponential_service() {
    let mean_ns = 10.0 * MS as f64;
    // ack at k: the 6th of 9 ends; k+1: the 7th; all: the 9th.
    for (early, landed) in [(Some(0), 6), (Some(1), 7), (None, 9)] {
        let outputs = exponential_writes(RS63, settings(early), mean_ns, 20_000, 7);
        let expected = order_statistic_mean(9, landed, mean_ns);
        let measured = mean_decision_ns(&outputs);
        assert!((measured / expected - 1.0).abs() < 0.03, "{early:?}: {measured} ns against {expected} ns");
        for output in outputs.iter().take(100) {
            let durable_then = output.landed_ns.iter().filter(|l| l.is_some_and(|at| at <= output.decided_ns)).count();
            assert_eq!(durable_then, landed, "{output:?}");
            assert!(output.landed_ns.iter().all(Option::is_some), "the pending copies land later: {output:?}");
        }
    }
}

#[test]
fn a_copy_on_a_down_node_is_written_elsewhere_and_awaited() {
    let mut service_ns = vec![5 * MS; 11];
    service_ns[9] = 30 * MS;
    let timeline = WriteTimeline {
        code: Some(RS63),
        placement: (0..9).collect(),
        to_write: vec![true; 9],
        service_ns,
        outages: vec![Outage { node: 4, from_ns: 0, until_ns: 1_000 * MS }],
        latency_ns: MS,
        settings: WriteSettings {
            rule: WriteRule {
                early_failures_tolerated: None,
                straggler: Some(StragglerWait { share_of_quorum_time: 0.5, min_ns: 2 * MS }),
            },
            ..settings(None)
        },
    };
    let output = run(&timeline);
    assert_eq!(output.placement[4], 9, "the lowest free node up");
    assert!(output.actions.contains(&(0, WriteAction::Place { copy: 4, avoid: vec![4] })), "{:?}", output.actions);
    // A failed copy turns the straggler rule off: the retry (30 ms + 2 ms) is awaited.
    assert_eq!(output.decided_ns, 32 * MS);
    assert_eq!(output.decision(), &WriteAction::Complete { failures_tolerated: 3 });
}

#[test]
fn runs_are_deterministic_by_seed() {
    let a = exponential_writes(RS63, settings(Some(1)), 1e6, 50, 3);
    assert_eq!(a, exponential_writes(RS63, settings(Some(1)), 1e6, 50, 3));
    assert_ne!(a, exponential_writes(RS63, settings(Some(1)), 1e6, 50, 4));
}
