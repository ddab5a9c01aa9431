//! Every quorum through its events: completion, fallback on timeout and on failure, cancellation
//! of losers, failure when the quorum cannot be met, settling.

use super::*;
use codec::CodeSpec;
use model::{NodeId, PlannedTask};

fn rs63() -> Box<dyn ErasureCode> {
    CodeSpec::Rs { k: 6, m: 3 }.build().unwrap()
}

fn task(unit: u8, role: TaskRole) -> PlannedTask {
    PlannedTask { node: NodeId(u32::from(unit)), unit, offset: 0, length: 10, role }
}

fn plan(tasks: Vec<PlannedTask>, quorum: Quorum) -> ReadPlan {
    ReadPlan::new(tasks, quorum, model::DecodeAt::Gateway)
}

/// Unit 0 read normally, units 1..=6 as its fallback.
fn normal_then_fallback() -> ReadPlan {
    let mut tasks = vec![task(0, TaskRole::Normal)];
    tasks.extend((1..=6).map(|u| task(u, TaskRole::Fallback)));
    plan(tasks, Quorum::NormalThenFallback { timeout_ns: 1_000 })
}

fn drain(execution: &mut ReadExecution) -> Vec<Action> {
    std::iter::from_fn(|| execution.poll_action()).collect()
}

fn starts(range: std::ops::RangeInclusive<usize>) -> Vec<Action> {
    range.map(|task| Action::Start { task }).collect()
}

#[test]
fn a_normal_read_completes_from_its_own_task() {
    let code = rs63();
    let mut read = ReadExecution::start(&ReadPlan::normal(task(2, TaskRole::Normal)), 2, 0);
    assert_eq!(drain(&mut read), vec![Action::Start { task: 0 }]);
    read.handle(Event::Finished { task: 0 }, code.as_ref());
    assert_eq!(drain(&mut read), vec![Action::Complete { decoded: false }]);
    assert!(read.is_complete() && read.is_settled() && !read.timed_out());
    assert_eq!(read.served_by().to_vec(), vec![0]);
}

#[test]
fn a_degraded_read_waits_for_its_whole_recovery_set_and_decodes() {
    let code = rs63();
    let tasks = (1..=6).map(|u| task(u, TaskRole::Degraded)).collect();
    let mut read = ReadExecution::start(&ReadPlan::degraded(tasks), 0, 0);
    assert_eq!(drain(&mut read), starts(0..=5));
    for t in [3, 0, 1, 2, 5] {
        read.handle(Event::Finished { task: t }, code.as_ref());
        assert!(drain(&mut read).is_empty());
    }
    read.handle(Event::Finished { task: 4 }, code.as_ref());
    assert_eq!(drain(&mut read), vec![Action::Complete { decoded: true }]);
    assert_eq!(read.served_by().to_vec(), vec![3, 0, 1, 2, 5, 4]);
}

#[test]
fn a_failed_task_fails_an_all_quorum_and_cancels_the_rest() {
    let code = rs63();
    let tasks = (1..=6).map(|u| task(u, TaskRole::Degraded)).collect();
    let mut read = ReadExecution::start(&ReadPlan::degraded(tasks), 0, 0);
    drain(&mut read);
    read.handle(Event::Finished { task: 0 }, code.as_ref());
    read.handle(Event::Failed { task: 1 }, code.as_ref());
    let mut expected = vec![Action::Fail { reason: FailReason::TooManyFailed }];
    expected.extend((2..=5).map(|task| Action::Cancel { task }));
    assert_eq!(drain(&mut read), expected);
    assert!(!read.is_settled(), "cancels not yet effective");
    for t in 2..=4 {
        read.handle(Event::Cancelled { task: t }, code.as_ref());
    }
    read.handle(Event::Finished { task: 5 }, code.as_ref());
    assert!(read.is_settled() && read.failure() == Some(FailReason::TooManyFailed));
    assert!(drain(&mut read).is_empty(), "a late finish changes nothing");
}

#[test]
fn the_timeout_launches_the_fallback_and_the_first_side_to_finish_wins() {
    let code = rs63();
    let mut read = ReadExecution::start(&normal_then_fallback(), 0, 500);
    assert_eq!(drain(&mut read), vec![Action::Start { task: 0 }, Action::ArmTimer { at_ns: 1_500 }]);
    read.handle(Event::TimerFired, code.as_ref());
    assert_eq!(drain(&mut read), starts(1..=6));
    assert!(read.timed_out());
    for t in 1..=6 {
        read.handle(Event::Finished { task: t }, code.as_ref());
    }
    assert_eq!(drain(&mut read), vec![Action::Complete { decoded: true }, Action::Cancel { task: 0 }]);
    assert_eq!(read.served_by().to_vec(), (1..=6).collect::<Vec<usize>>());
    read.handle(Event::Cancelled { task: 0 }, code.as_ref());
    assert!(read.is_settled());
}

#[test]
fn the_normal_task_beating_its_fallback_cancels_the_fallback() {
    let code = rs63();
    let mut read = ReadExecution::start(&normal_then_fallback(), 0, 0);
    drain(&mut read);
    read.handle(Event::TimerFired, code.as_ref());
    drain(&mut read);
    read.handle(Event::Finished { task: 2 }, code.as_ref());
    read.handle(Event::Finished { task: 0 }, code.as_ref());
    let mut expected = vec![Action::Complete { decoded: false }];
    expected.extend([1, 3, 4, 5, 6].map(|task| Action::Cancel { task }));
    assert_eq!(read.served_by().to_vec(), vec![0]);
    assert_eq!(drain(&mut read), expected);
}

#[test]
fn a_timer_after_the_normal_task_finished_is_stale() {
    let code = rs63();
    let mut read = ReadExecution::start(&normal_then_fallback(), 0, 0);
    drain(&mut read);
    read.handle(Event::Finished { task: 0 }, code.as_ref());
    drain(&mut read);
    read.handle(Event::TimerFired, code.as_ref());
    assert!(drain(&mut read).is_empty());
    assert!(!read.timed_out() && read.is_settled());
}

#[test]
fn a_failed_normal_task_launches_the_fallback_at_once() {
    let code = rs63();
    let mut read = ReadExecution::start(&normal_then_fallback(), 0, 0);
    drain(&mut read);
    read.handle(Event::Failed { task: 0 }, code.as_ref());
    assert_eq!(drain(&mut read), starts(1..=6));
    assert!(!read.timed_out(), "launched by the failure, not the timer");
    read.handle(Event::TimerFired, code.as_ref());
    assert!(drain(&mut read).is_empty(), "the timer is stale");
}

#[test]
fn a_failed_fallback_leaves_the_normal_task_to_win_or_fail() {
    let code = rs63();
    let mut read = ReadExecution::start(&normal_then_fallback(), 0, 0);
    drain(&mut read);
    read.handle(Event::TimerFired, code.as_ref());
    drain(&mut read);
    read.handle(Event::Failed { task: 3 }, code.as_ref());
    assert_eq!(drain(&mut read), [1, 2, 4, 5, 6].map(|task| Action::Cancel { task }).to_vec());
    assert!(read.failure().is_none(), "the normal task is still out");
    read.handle(Event::Failed { task: 0 }, code.as_ref());
    assert_eq!(drain(&mut read), vec![Action::Fail { reason: FailReason::TooManyFailed }]);
}

#[test]
fn first_k_of_n_completes_at_k_and_cancels_the_rest() {
    let code = rs63();
    let tasks = (0..9).map(|u| task(u, TaskRole::Degraded)).collect();
    let mut read = ReadExecution::start(&plan(tasks, Quorum::FirstKOfN { k: 6 }), 0, 0);
    assert_eq!(drain(&mut read), starts(0..=8));
    for t in [8, 7, 6, 5, 4] {
        read.handle(Event::Finished { task: t }, code.as_ref());
    }
    read.handle(Event::Failed { task: 3 }, code.as_ref());
    assert!(drain(&mut read).is_empty(), "6 of 8 still possible");
    read.handle(Event::Finished { task: 1 }, code.as_ref());
    let mut expected = vec![Action::Complete { decoded: true }];
    expected.extend([0, 2].map(|task| Action::Cancel { task }));
    assert_eq!(read.served_by().to_vec(), vec![8, 7, 6, 5, 4, 1]);
    assert_eq!(drain(&mut read), expected);
}

#[test]
fn any_k_completes_at_k_and_lets_the_others_run() {
    let code = rs63();
    let tasks = (0..8).map(|u| task(u, TaskRole::Degraded)).collect();
    let mut read = ReadExecution::start(&plan(tasks, Quorum::AnyK { k: 6 }), 7, 0);
    drain(&mut read);
    for t in 0..6 {
        read.handle(Event::Finished { task: t }, code.as_ref());
    }
    assert_eq!(drain(&mut read), vec![Action::Complete { decoded: true }]);
    assert!(!read.is_settled(), "two tasks still run");
    assert_eq!(read.served_by().to_vec(), (0..6).collect::<Vec<usize>>());
    read.handle(Event::Finished { task: 6 }, code.as_ref());
    read.handle(Event::Finished { task: 7 }, code.as_ref());
    assert!(read.is_settled() && drain(&mut read).is_empty());
}

#[test]
fn k_of_n_fails_once_too_few_tasks_are_left() {
    let code = rs63();
    let tasks = (0..7).map(|u| task(u, TaskRole::Degraded)).collect();
    let mut read = ReadExecution::start(&plan(tasks, Quorum::FirstKOfN { k: 6 }), 0, 0);
    drain(&mut read);
    read.handle(Event::Failed { task: 1 }, code.as_ref());
    assert!(drain(&mut read).is_empty());
    read.handle(Event::Failed { task: 2 }, code.as_ref());
    let mut expected = vec![Action::Fail { reason: FailReason::TooManyFailed }];
    expected.extend([0, 3, 4, 5, 6].map(|task| Action::Cancel { task }));
    assert_eq!(drain(&mut read), expected);
}

#[test]
fn an_lrc_quorum_waits_for_units_that_determine_the_target() {
    // LRC(6,2,2): units 0..6 data, 6 and 7 local parities of groups {0,1,2} and {3,4,5}, 8 and 9
    // global. Units 3, 4, 5 and 7 are 4 units of one group: they say nothing about unit 0.
    let code = CodeSpec::Lrc { k: 6, l: 2, r: 2 }.build().unwrap();
    let tasks = [3, 4, 5, 7, 1, 2, 6].map(|u| task(u, TaskRole::Degraded)).to_vec();
    let mut read = ReadExecution::start(&plan(tasks, Quorum::FirstKOfN { k: 2 }), 0, 0);
    drain(&mut read);
    for t in 0..4 {
        read.handle(Event::Finished { task: t }, code.as_ref());
    }
    assert!(drain(&mut read).is_empty(), "two units, but not ones that give unit 0");
    read.handle(Event::Finished { task: 4 }, code.as_ref());
    read.handle(Event::Finished { task: 5 }, code.as_ref());
    assert!(drain(&mut read).is_empty());
    read.handle(Event::Finished { task: 6 }, code.as_ref());
    let actions = drain(&mut read);
    assert!(matches!(&actions[0], Action::Complete { decoded: true, .. }), "{actions:?}");
}

#[test]
fn abort_cancels_everything_and_completes_nothing() {
    let code = rs63();
    let mut read = ReadExecution::start(&normal_then_fallback(), 0, 0);
    drain(&mut read);
    read.handle(Event::Abort, code.as_ref());
    assert_eq!(drain(&mut read), vec![Action::Fail { reason: FailReason::Aborted }, Action::Cancel { task: 0 }]);
    read.handle(Event::Cancelled { task: 0 }, code.as_ref());
    assert!(read.is_settled() && !read.is_complete());
}

#[test]
#[should_panic(expected = "finished while")]
fn an_event_for_a_task_never_started_is_the_shells_bug() {
    let code = rs63();
    let mut read = ReadExecution::start(&normal_then_fallback(), 0, 0);
    read.handle(Event::Finished { task: 3 }, code.as_ref());
}

#[test]
fn a_whole_stripe_read_of_its_data_units_does_not_decode() {
    let code: Box<dyn ErasureCode> = CodeSpec::Rs { k: 2, m: 2 }.build().unwrap();
    let tasks = vec![task(1, TaskRole::Normal), task(0, TaskRole::Normal)];
    let mut read = ReadExecution::start(&plan(tasks, Quorum::All), WHOLE_STRIPE, 0);
    assert_eq!(drain(&mut read), starts(0..=1));
    read.handle(Event::Finished { task: 1 }, code.as_ref());
    assert!(drain(&mut read).is_empty());
    read.handle(Event::Finished { task: 0 }, code.as_ref());
    assert_eq!(drain(&mut read), vec![Action::Complete { decoded: false }]);
    assert_eq!(read.served_by().to_vec(), vec![1, 0]);
}

#[test]
fn a_whole_stripe_read_with_late_binding_completes_from_the_first_k_and_decodes_from_parity() {
    let code: Box<dyn ErasureCode> = CodeSpec::Rs { k: 2, m: 2 }.build().unwrap();
    let tasks = vec![task(0, TaskRole::Normal), task(3, TaskRole::Normal), task(2, TaskRole::Extra)];
    let mut read = ReadExecution::start(&plan(tasks, Quorum::AnyK { k: 2 }), WHOLE_STRIPE, 0);
    assert_eq!(drain(&mut read), starts(0..=2));
    read.handle(Event::Finished { task: 2 }, code.as_ref());
    assert!(drain(&mut read).is_empty());
    read.handle(Event::Finished { task: 0 }, code.as_ref());
    // Late binding cancels nothing: the third read runs to its end.
    assert_eq!(drain(&mut read), vec![Action::Complete { decoded: true }]);
    assert_eq!(read.served_by().to_vec(), vec![2, 0]);
    assert!(!read.is_settled());
    read.handle(Event::Finished { task: 1 }, code.as_ref());
    assert!(read.is_settled() && drain(&mut read).is_empty());
}

/// Three copies of one range (a small object's replicas), a wait of 100 ns between launches.
fn three_copies() -> ReadPlan {
    let tasks = vec![task(6, TaskRole::Normal), task(7, TaskRole::Fallback), task(8, TaskRole::Fallback)];
    plan(tasks, Quorum::FirstCopy { wait_ns: 100 })
}

#[test]
fn copies_are_launched_a_wait_apart_raced_and_the_first_to_finish_serves() {
    let code = rs63();
    let mut read = ReadExecution::start(&three_copies(), 6, 1_000);
    assert_eq!(drain(&mut read), vec![Action::Start { task: 0 }, Action::ArmTimer { at_ns: 1_100 }]);
    read.handle(Event::TimerFired, code.as_ref());
    assert_eq!(drain(&mut read), vec![Action::Start { task: 1 }, Action::ArmTimer { at_ns: 1_200 }]);
    assert!(read.timed_out(), "a copy went out because the first was slow");
    // The first copy, still out, answers first: it serves, the second is cancelled.
    read.handle(Event::Finished { task: 0 }, code.as_ref());
    assert_eq!(drain(&mut read), vec![Action::Complete { decoded: false }, Action::Cancel { task: 1 }]);
    assert_eq!(read.served_by().to_vec(), vec![0]);
    read.handle(Event::TimerFired, code.as_ref());
    assert!(drain(&mut read).is_empty(), "the third copy is never launched once served");
    read.handle(Event::Cancelled { task: 1 }, code.as_ref());
    assert!(read.is_settled() && read.task_state(2) == TaskState::Dormant);
}

#[test]
fn a_failed_copy_launches_the_next_at_once_and_no_copy_left_fails_the_read() {
    let code = rs63();
    let mut read = ReadExecution::start(&three_copies(), 6, 0);
    drain(&mut read);
    read.handle(Event::Failed { task: 0 }, code.as_ref());
    assert_eq!(drain(&mut read), vec![Action::Start { task: 1 }], "no wait when nothing is out");
    read.handle(Event::TimerFired, code.as_ref());
    assert_eq!(drain(&mut read), vec![Action::Start { task: 2 }], "the last copy: no timer left to arm");
    read.handle(Event::Failed { task: 2 }, code.as_ref());
    assert!(drain(&mut read).is_empty(), "copy 1 is still out");
    read.handle(Event::Failed { task: 1 }, code.as_ref());
    assert_eq!(drain(&mut read), vec![Action::Fail { reason: FailReason::TooManyFailed }]);
    assert!(read.is_settled());
    // One copy alone arms no timer, and its answer serves.
    let single = plan(vec![task(6, TaskRole::Normal)], Quorum::FirstCopy { wait_ns: 100 });
    single.validate().unwrap();
    let mut read = ReadExecution::start(&single, 6, 0);
    assert_eq!(drain(&mut read), vec![Action::Start { task: 0 }]);
    read.handle(Event::Finished { task: 0 }, code.as_ref());
    assert_eq!(drain(&mut read), vec![Action::Complete { decoded: false }]);
    let misordered = plan(vec![task(6, TaskRole::Fallback)], Quorum::FirstCopy { wait_ns: 100 });
    assert!(misordered.validate().is_err());
}

#[test]
fn a_plan_past_its_deadline_fails_and_cancels_what_is_out_and_one_within_it_completes() {
    let code = rs63();
    let tasks: Vec<PlannedTask> = (0..6).map(|u| task(u, TaskRole::Normal)).collect();
    let timed = ReadPlan { deadline_ns: Some(500), ..plan(tasks, Quorum::All) };
    let mut read = ReadExecution::start(&timed, WHOLE_STRIPE, 100);
    let mut expected = starts(0..=5);
    expected.push(Action::ArmTimer { at_ns: 600 });
    assert_eq!(drain(&mut read), expected);
    (0..4).for_each(|t| read.handle(Event::Finished { task: t }, code.as_ref()));
    read.handle(Event::TimerFired, code.as_ref());
    let reason = FailReason::DeadlinePassed;
    assert_eq!(drain(&mut read), vec![Action::Fail { reason }, Action::Cancel { task: 4 }, Action::Cancel { task: 5 }]);
    assert!(read.timed_out() && read.failure() == Some(reason));
    // Within it: the timer firing after completion changes nothing.
    let mut read = ReadExecution::start(&timed, WHOLE_STRIPE, 100);
    drain(&mut read);
    (0..6).for_each(|t| read.handle(Event::Finished { task: t }, code.as_ref()));
    assert_eq!(drain(&mut read), vec![Action::Complete { decoded: false }]);
    read.handle(Event::TimerFired, code.as_ref());
    assert!(drain(&mut read).is_empty() && read.is_complete() && !read.timed_out());
    // A quorum with a timer of its own takes no deadline.
    let mut fallback = normal_then_fallback();
    fallback.deadline_ns = Some(1);
    assert!(fallback.validate().is_err());
}
