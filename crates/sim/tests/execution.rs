//! The engine driving the execution core: timeouts, failed tasks from node outages, cancelled
//! losers, a timer that fires while the normal result is on its way, and a fallback that waits for
//! an admission slot. One stripe of RS(6,3) with unit u on node u, one request, deterministic
//! service (`sim::scripted`).

use execution::{Action, AdmissionMode, AdmissionSettings};
use model::{NodeId, PlannedTask, Quorum, ReadPlan, TaskRole};
use sim::scripted::{Timeline, run};
use sim::{EngineOutput, Outage};

const MS: u64 = 1_000_000;

/// Unit 0 read from node 0, units 1..=6 as the fallback after 100 ms.
fn normal_then_fallback() -> ReadPlan {
    let task = |unit: u8, role| PlannedTask { node: NodeId(u32::from(unit)), unit, offset: 0, length: 4096, role };
    let mut tasks = vec![task(0, TaskRole::Normal)];
    tasks.extend((1..=6).map(|unit| task(unit, TaskRole::Fallback)));
    ReadPlan {
        tasks,
        quorum: Quorum::NormalThenFallback { timeout_ns: 100 * MS },
        decode: model::DecodeAt::Gateway,
        topology: model::ReconstructionTopology::Gateway,
        deadline_ns: None,
    }
}

/// Node 0 serves in `node0_ns`, the others in 10 ms.
fn timeline(node0_ns: u64, latency_ns: u64, outages: Vec<Outage>) -> Timeline {
    let mut service_ns = vec![10 * MS; 9];
    service_ns[0] = node0_ns;
    Timeline {
        code: codec::CodeSpec::Rs { k: 6, m: 3 },
        plan: normal_then_fallback(),
        service_ns,
        outages,
        latency_ns,
        admission: AdmissionSettings::default(),
    }
}

fn actions(output: &EngineOutput) -> Vec<(u64, Action)> {
    output.actions.iter().map(|(at, _, action)| (*at, action.clone())).collect()
}

fn starts(at_ns: u64, tasks: std::ops::RangeInclusive<usize>) -> Vec<(u64, Action)> {
    tasks.map(|task| (at_ns, Action::Start { task })).collect()
}

fn opening() -> Vec<(u64, Action)> {
    vec![(0, Action::Start { task: 0 }), (0, Action::ArmTimer { at_ns: 100 * MS })]
}

#[test]
fn a_slow_normal_read_times_out_and_loses_to_its_fallback() {
    let output = run(&timeline(1000 * MS, 0, Vec::new()));
    let mut expected = opening();
    expected.extend(starts(100 * MS, 1..=6));
    expected.push((110 * MS, Action::Complete { decoded: true }));
    expected.push((110 * MS, Action::Cancel { task: 0 }));
    assert_eq!(actions(&output), expected);
    let record = output.records.iter().next().unwrap();
    assert!(record.request.degraded && record.request.timed_out);
    assert_eq!(record.request.completion_ns, 110 * MS);
    assert!(record.tasks[0].cancelled, "the loser was cancelled");
}

#[test]
fn a_node_that_is_down_fails_its_task_and_the_fallback_starts_at_once() {
    let outage = Outage { node: 0, from_ns: 0, until_ns: model::NEVER };
    let output = run(&timeline(10 * MS, 0, vec![outage]));
    let mut expected = opening();
    expected.extend(starts(0, 1..=6));
    expected.push((10 * MS, Action::Complete { decoded: true }));
    assert_eq!(actions(&output), expected);
    let record = output.records.iter().next().unwrap();
    assert!(record.tasks[0].failed && record.tasks[0].latency_ns().is_none());
    assert!(record.request.degraded && !record.request.timed_out, "launched by the failure, not the timer");
}

#[test]
fn a_node_going_down_fails_the_task_it_serves_and_a_failed_fallback_leaves_the_normal_read_to_win() {
    // Node 3 goes down at 105 ms, in the middle of its fallback task (100..110 ms): the fallback
    // side cannot finish, its other tasks are cancelled, and the normal read (300 ms) wins.
    let outage = Outage { node: 3, from_ns: 105 * MS, until_ns: 200 * MS };
    let output = run(&timeline(300 * MS, 0, vec![outage]));
    let mut expected = opening();
    expected.extend(starts(100 * MS, 1..=6));
    expected.extend([1, 2, 4, 5, 6].map(|task| (105 * MS, Action::Cancel { task })));
    expected.push((300 * MS, Action::Complete { decoded: false }));
    assert_eq!(actions(&output), expected);
    let record = output.records.iter().next().unwrap();
    assert!(!record.request.degraded && record.request.timed_out);
    assert!(record.tasks[3].failed && record.tasks.iter().filter(|t| t.cancelled).count() == 5);
}

#[test]
fn the_timer_firing_while_the_normal_result_travels_launches_the_fallback() {
    // Node 0 finishes at 97 ms (5 ms there, 92 ms of service); its result reaches the frontend at
    // 102 ms. The frontend cannot know the node is done, so the timer at 100 ms launches the
    // fallback, which the normal result then beats: cancelled on the way, it never runs. (Before
    // the execution core the engine looked at the node's state and launched nothing.)
    let output = run(&timeline(92 * MS, 5 * MS, Vec::new()));
    let record = output.records.iter().next().unwrap();
    assert!(record.request.timed_out && !record.request.degraded);
    assert_eq!(record.request.completion_ns, 102 * MS);
    assert!(record.tasks[1..].iter().all(|t| t.cancelled && t.start_ns == model::NEVER), "{:?}", record.tasks);
}

#[test]
fn with_one_slot_the_fallback_waits_behind_the_normal_read_and_never_reaches_a_node() {
    // The normal task holds the frontend's only slot; the timeout starts the fallback, whose six
    // tasks queue for that slot; the normal read (300 ms) wins and the queued tasks are withdrawn
    // without being sent, so the record has the normal task alone.
    let mut one_slot = timeline(300 * MS, 0, Vec::new());
    one_slot.admission = AdmissionSettings { slots: Some(1), mode: AdmissionMode::NonBlocking };
    let output = run(&one_slot);
    let mut expected = opening();
    expected.extend(starts(100 * MS, 1..=6));
    expected.push((300 * MS, Action::Complete { decoded: false }));
    expected.extend((1..=6).map(|task| (300 * MS, Action::Cancel { task })));
    assert_eq!(actions(&output), expected);
    let record = output.records.iter().next().unwrap();
    assert_eq!(record.request.completion_ns, 300 * MS);
    assert!(!record.request.degraded && record.request.timed_out);
    assert_eq!(record.tasks.len(), 1, "withdrawn tasks never reached a node: {:?}", record.tasks);
}
