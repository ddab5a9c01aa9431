//! The write execution through its events: every copy started, retries elsewhere, the early and
//! straggler acknowledgements with what is left pending, and the durability rule's verdict.

use super::*;
use codec::CodeSpec;

const MS: u64 = 1_000_000;

fn straggler() -> WriteRule {
    WriteRule {
        early_failures_tolerated: None,
        straggler: Some(StragglerWait { share_of_quorum_time: 0.5, min_ns: 2 * MS }),
    }
}

fn settings(rule: WriteRule, retries: u32) -> WriteSettings {
    WriteSettings { rule, retries, min_failures_tolerated: 1 }
}

fn rs63() -> Box<dyn ErasureCode> {
    CodeSpec::Rs { k: 6, m: 3 }.build().expect("a code")
}

fn drain(execution: &mut WriteExecution) -> Vec<WriteAction> {
    std::iter::from_fn(|| execution.poll_action()).collect()
}

/// RS(6,3), unit u on node u, all nine written; the first `landed` land at `at_ns`.
fn rs63_with(code: &dyn ErasureCode, settings: WriteSettings, landed: usize, at_ns: u64) -> WriteExecution {
    let durability = Durability::Code(code);
    let mut execution = WriteExecution::start((0..9).collect(), &[true; 9], settings, durability, 0);
    let starts = drain(&mut execution);
    assert_eq!(starts.len(), 9, "every copy starts: {starts:?}");
    assert!(starts.iter().all(|a| matches!(a, WriteAction::Start { retry: false, .. })));
    (0..landed).for_each(|unit| execution.handle(WriteEvent::Ended { copy: unit, durable: true }, durability, at_ns));
    execution
}

#[test]
fn without_a_rule_the_write_waits_for_every_copy_and_completes() {
    let code = rs63();
    let durability = Durability::Code(code.as_ref());
    let mut execution = rs63_with(code.as_ref(), settings(WriteRule::default(), 3), 8, 10 * MS);
    execution.handle(WriteEvent::TimerFired, durability, 10_000 * MS);
    assert_eq!(drain(&mut execution), vec![]);
    execution.handle(WriteEvent::Ended { copy: 8, durable: true }, durability, 10_001 * MS);
    assert_eq!(drain(&mut execution), vec![WriteAction::Complete { failures_tolerated: 3 }]);
    assert!(execution.is_finished());
}

#[test]
fn the_straggler_rule_acknowledges_without_the_last_copy_past_its_share_of_the_quorum_time() {
    let code = rs63();
    let durability = Durability::Code(code.as_ref());
    let mut execution = rs63_with(code.as_ref(), settings(straggler(), 3), 8, 40 * MS);
    // Eight of nine landed at 40 ms: the ninth may run 20 ms later.
    assert_eq!(drain(&mut execution), vec![WriteAction::ArmTimer { at_ns: 60 * MS }]);
    execution.handle(WriteEvent::TimerFired, durability, 60 * MS);
    assert_eq!(drain(&mut execution), vec![WriteAction::Acknowledge { straggler: true }]);
    assert_eq!(execution.landing(), vec![8], "the late copy is pending");
    assert_eq!(execution.durable().iter().filter(|d| **d).count(), 8);
}

#[test]
fn the_straggler_wait_has_a_floor_and_needs_all_but_one_copy() {
    let code = rs63();
    let mut execution = rs63_with(code.as_ref(), settings(straggler(), 3), 8, MS);
    assert_eq!(drain(&mut execution), vec![WriteAction::ArmTimer { at_ns: 3 * MS }]);
    let mut execution = rs63_with(code.as_ref(), settings(straggler(), 3), 7, MS);
    execution.handle(WriteEvent::TimerFired, Durability::Code(code.as_ref()), 1_000 * MS);
    assert_eq!(drain(&mut execution), vec![]);
}

#[test]
fn a_failed_copy_is_placed_away_from_every_failed_node_written_again_at_once_and_awaited() {
    let code = rs63();
    let durability = Durability::Code(code.as_ref());
    let mut execution = rs63_with(code.as_ref(), settings(straggler(), 3), 6, 10 * MS);
    execution.handle(WriteEvent::Ended { copy: 7, durable: false }, durability, 11 * MS);
    assert_eq!(drain(&mut execution), vec![WriteAction::Place { copy: 7, avoid: vec![7] }]);
    execution.handle(WriteEvent::Placed { copy: 7, node: Some(9) }, durability, 11 * MS);
    assert_eq!(drain(&mut execution), vec![WriteAction::Start { copy: 7, node: 9, retry: true }]);
    execution.handle(WriteEvent::Ended { copy: 6, durable: true }, durability, 12 * MS);
    // Eight copies' worth would do, but a write failed: no straggler is left behind.
    execution.handle(WriteEvent::Ended { copy: 8, durable: true }, durability, 13 * MS);
    execution.handle(WriteEvent::TimerFired, durability, 1_000 * MS);
    assert_eq!(drain(&mut execution), vec![]);
    execution.handle(WriteEvent::Ended { copy: 7, durable: false }, durability, 1_001 * MS);
    assert_eq!(drain(&mut execution), vec![WriteAction::Place { copy: 7, avoid: vec![7, 9] }]);
    execution.handle(WriteEvent::Placed { copy: 7, node: Some(10) }, durability, 1_001 * MS);
    execution.handle(WriteEvent::Ended { copy: 7, durable: true }, durability, 1_010 * MS);
    let actions = drain(&mut execution);
    assert_eq!(actions.last(), Some(&WriteAction::Complete { failures_tolerated: 3 }), "{actions:?}");
    assert_eq!(execution.placement()[7], 10);
}

#[test]
fn a_copy_out_of_retries_or_of_nodes_stays_missing_and_the_durability_rule_judges() {
    let code = rs63();
    let durability = Durability::Code(code.as_ref());
    // No retries: unit 8 fails for good; eight durable survive two more failures.
    let mut execution = rs63_with(code.as_ref(), settings(WriteRule::default(), 0), 8, MS);
    execution.handle(WriteEvent::Ended { copy: 8, durable: false }, durability, 2 * MS);
    assert_eq!(drain(&mut execution), vec![WriteAction::Complete { failures_tolerated: 2 }]);
    assert_eq!(execution.copy_state(8), CopyState::Failed);
    assert_eq!(execution.placement()[8], 8, "it stays on the node it failed on");
    // No node can take three failed units: six durable survive nothing more, under a rule of one.
    let mut execution = rs63_with(code.as_ref(), settings(WriteRule::default(), 3), 6, MS);
    for copy in 6..9 {
        execution.handle(WriteEvent::Ended { copy, durable: false }, durability, 2 * MS);
        execution.handle(WriteEvent::Placed { copy, node: None }, durability, 2 * MS);
    }
    let actions = drain(&mut execution);
    assert_eq!(actions.last(), Some(&WriteAction::Fail { failures_tolerated: Some(0) }), "{actions:?}");
}

#[test]
fn the_early_rule_acknowledges_as_soon_as_its_failures_are_survived_with_a_retry_landing() {
    let code = rs63();
    let durability = Durability::Code(code.as_ref());
    let rule = WriteRule { early_failures_tolerated: Some(1), straggler: None };
    let mut execution = rs63_with(code.as_ref(), settings(rule, 3), 6, MS);
    execution.handle(WriteEvent::Ended { copy: 6, durable: false }, durability, 2 * MS);
    execution.handle(WriteEvent::Placed { copy: 6, node: Some(12) }, durability, 2 * MS);
    assert!(drain(&mut execution).iter().all(|a| !matches!(a, WriteAction::Acknowledge { .. })));
    execution.handle(WriteEvent::Ended { copy: 7, durable: true }, durability, 3 * MS);
    assert_eq!(drain(&mut execution), vec![WriteAction::Acknowledge { straggler: false }]);
    assert_eq!(execution.landing(), vec![6, 8], "the retried copy and the last one are pending");
    assert_eq!(execution.placement()[6], 12);
}

#[test]
fn replicas_leave_one_late_copy_behind_but_never_the_only_one() {
    let all = WriteSettings { rule: straggler(), retries: 0, min_failures_tolerated: 3 };
    let mut execution = WriteExecution::start(vec![5, 6, 7, 8], &[true; 4], all, Durability::Copies, 0);
    (0..3).for_each(|copy| execution.handle(WriteEvent::Ended { copy, durable: true }, Durability::Copies, 4 * MS));
    execution.handle(WriteEvent::TimerFired, Durability::Copies, 6 * MS);
    assert_eq!(drain(&mut execution).last(), Some(&WriteAction::Acknowledge { straggler: true }));
    assert_eq!(execution.copy_state(3), CopyState::Running);
    let one = WriteSettings { min_failures_tolerated: 0, ..all };
    let mut single = WriteExecution::start(vec![1], &[true], one, Durability::Copies, 0);
    single.handle(WriteEvent::TimerFired, Durability::Copies, 100 * MS);
    assert_eq!(drain(&mut single), vec![WriteAction::Start { copy: 0, node: 1, retry: false }]);
    single.handle(WriteEvent::Ended { copy: 0, durable: true }, Durability::Copies, 100 * MS);
    assert_eq!(drain(&mut single), vec![WriteAction::Complete { failures_tolerated: 0 }]);
}

#[test]
fn a_failed_replica_fails_a_write_that_needs_every_copy() {
    let all = WriteSettings { rule: straggler(), retries: 0, min_failures_tolerated: 2 };
    let mut execution = WriteExecution::start(vec![5, 6, 7], &[true; 3], all, Durability::Copies, 0);
    execution.handle(WriteEvent::Ended { copy: 0, durable: false }, Durability::Copies, MS);
    execution.handle(WriteEvent::Ended { copy: 1, durable: true }, Durability::Copies, MS);
    execution.handle(WriteEvent::Ended { copy: 2, durable: true }, Durability::Copies, 2 * MS);
    let actions = drain(&mut execution);
    assert_eq!(actions.last(), Some(&WriteAction::Fail { failures_tolerated: Some(1) }), "{actions:?}");
}

#[test]
fn skipped_copies_count_as_not_durable() {
    let code = rs63();
    let durability = Durability::Code(code.as_ref());
    let mut to_write = [true; 9];
    to_write[8] = false;
    let mut execution = WriteExecution::start((0..9).collect(), &to_write, settings(straggler(), 3), durability, 0);
    assert_eq!(drain(&mut execution).len(), 8, "the skipped copy is not started");
    (0..7).for_each(|unit| execution.handle(WriteEvent::Ended { copy: unit, durable: true }, durability, 10 * MS));
    // Seven durable and one down: not all but one; the eighth is awaited.
    execution.handle(WriteEvent::TimerFired, durability, 1_000 * MS);
    assert_eq!(drain(&mut execution), vec![]);
    execution.handle(WriteEvent::Ended { copy: 7, durable: true }, durability, 1_001 * MS);
    assert_eq!(drain(&mut execution), vec![WriteAction::Complete { failures_tolerated: 2 }]);
}
