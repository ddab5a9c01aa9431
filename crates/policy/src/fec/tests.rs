//! Code-length choices and the slot pool, against the paper's definitions (section III-C, V-E,
//! V-F) and against invariants over random event sequences.

use super::admission::{AfterQuorum, PoolAction, PoolError, PooledRequest, SlotPool};
use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, HashSet};

const READ: ClassCode = ClassCode { k: 3, n_max: 6 };

fn read_model() -> DelayModel {
    DelayModel::new(0.061, 0.079).unwrap()
}

fn write_model() -> DelayModel {
    DelayModel::new(0.114, 0.026).unwrap()
}

fn state(idle_slots: u32, waiting_requests: u32, waiting_tasks: u32) -> FrontendState {
    FrontendState { slots: 16, idle_slots, waiting_requests, waiting_tasks }
}

#[test]
fn greedy_takes_every_idle_slot_up_to_n_max() {
    let greedy = CodeLengthPolicy::new(CodeLengthKind::Greedy, vec![READ], 16, Admission::NonBlocking, &[]).unwrap();
    assert_eq!(greedy.name(), "greedy");
    let chosen: Vec<u16> =
        [0, 2, 3, 4, 5, 6, 16].iter().map(|&idle| greedy.code_length(&state(idle, 0, 0), 0)).collect();
    assert_eq!(chosen, vec![3, 3, 3, 4, 5, 6, 6]);
}

#[test]
fn bafec_follows_its_thresholds_and_the_backlog_measure() {
    let bafec = |backlog| {
        let kind = CodeLengthKind::Bafec { backlog };
        CodeLengthPolicy::new(kind, vec![READ], 16, Admission::NonBlocking, &[read_model()]).unwrap()
    };
    let literal = bafec(BacklogMeasure::WaitingRequests);
    assert_eq!(literal.name(), "bafec");
    // Q_3 ≈ 1.47, Q_4 ≈ 0.83, Q_5 ≈ 0.52: whole requests give {0 → 6, 1 → 4, ≥ 2 → 3}.
    let by_requests: Vec<u16> = (0..4).map(|q| literal.code_length(&state(0, q, 0), 0)).collect();
    assert_eq!(by_requests, vec![6, 4, 3, 3]);
    // Waiting tasks count only under the work measure: 2 tasks of k = 3 are 0.67 requests → n = 5.
    assert_eq!(literal.code_length(&state(0, 0, 2), 0), 6);
    assert_eq!(bafec(BacklogMeasure::WaitingWork).code_length(&state(0, 0, 2), 0), 5);
}

#[test]
fn mbafec_reads_keep_redundancy_that_writes_drop() {
    let write = ClassCode { k: 3, n_max: 6 };
    let kind = CodeLengthKind::Bafec { backlog: BacklogMeasure::WaitingRequests };
    let policy =
        CodeLengthPolicy::new(kind, vec![READ, write], 16, Admission::NonBlocking, &[read_model(), write_model()])
            .unwrap();
    assert_eq!(policy.name(), "mbafec");
    // One request waiting: reads still use n = 4, writes (Q_3 ≈ 0.34) are down to k.
    assert_eq!(policy.code_length(&state(0, 1, 0), 0), 4);
    assert_eq!(policy.code_length(&state(0, 1, 0), 1), 3);
    for backlog in 0..5 {
        let s = state(0, backlog, 0);
        assert!(policy.code_length(&s, 0) >= policy.code_length(&s, 1));
    }
}

#[test]
fn bad_configurations_are_refused() {
    let nb = Admission::NonBlocking;
    let fixed = |n: Vec<u16>| CodeLengthPolicy::new(CodeLengthKind::Fixed { n }, vec![READ], 16, nb, &[]);
    assert_eq!(fixed(vec![4]).unwrap().code_length(&state(16, 0, 0), 0), 4);
    assert!(matches!(fixed(vec![7]), Err(CodeLengthError::BadFixed { .. })));
    assert!(matches!(fixed(vec![2]), Err(CodeLengthError::BadFixed { .. })));
    assert!(matches!(fixed(vec![4, 4]), Err(CodeLengthError::BadFixed { .. })));
    let bafec = CodeLengthKind::Bafec { backlog: BacklogMeasure::WaitingRequests };
    assert!(matches!(
        CodeLengthPolicy::new(bafec.clone(), vec![READ], 16, nb, &[]),
        Err(CodeLengthError::MissingModels { .. })
    ));
    assert!(matches!(CodeLengthPolicy::new(bafec, vec![], 16, nb, &[]), Err(CodeLengthError::NoClasses)));
    let zero = ClassCode { k: 0, n_max: 3 };
    assert!(matches!(
        CodeLengthPolicy::new(CodeLengthKind::Greedy, vec![zero], 16, nb, &[]),
        Err(CodeLengthError::BadClass { .. })
    ));
    assert!(matches!(
        CodeLengthPolicy::new(CodeLengthKind::Greedy, vec![READ], 4, Admission::Blocking, &[]),
        Err(CodeLengthError::TooLongForSlots { .. })
    ));
}

fn read(key: u64, tasks: u16, quorum: u16) -> PooledRequest {
    PooledRequest { key, tasks, quorum, after_quorum: AfterQuorum::Cancel }
}

fn starts(actions: &[PoolAction]) -> Vec<(u64, u16)> {
    actions
        .iter()
        .filter_map(|a| match *a {
            PoolAction::Start { request, task } => Some((request, task)),
            _ => None,
        })
        .collect()
}

#[test]
fn non_blocking_admits_with_one_idle_slot_and_queues_the_rest() {
    let mut pool = SlotPool::new(4, Admission::NonBlocking, 100);
    let mut actions = Vec::new();
    pool.arrive(read(1, 3, 2), &mut actions).unwrap();
    assert_eq!(starts(&actions), vec![(1, 0), (1, 1), (1, 2)]);
    actions.clear();
    // One slot idle: request 2 is admitted, one task starts, two wait.
    pool.arrive(read(2, 3, 2), &mut actions).unwrap();
    assert_eq!(starts(&actions), vec![(2, 0)]);
    assert_eq!(pool.state(), FrontendState { slots: 4, idle_slots: 0, waiting_requests: 0, waiting_tasks: 2 });
    actions.clear();
    pool.arrive(read(3, 3, 2), &mut actions).unwrap();
    assert!(actions.is_empty());
    assert_eq!(pool.state().waiting_requests, 1);
    // Request 1 reaches its quorum: its third task is cancelled, and the two freed slots go to
    // request 2's waiting tasks before request 3 is admitted.
    pool.task_done(1, 0, &mut actions).unwrap();
    assert_eq!(starts(&actions), vec![(2, 1)]);
    actions.clear();
    pool.task_done(1, 2, &mut actions).unwrap();
    assert_eq!(
        actions,
        vec![
            PoolAction::Quorum { request: 1 },
            PoolAction::Cancel { request: 1, task: 1 },
            PoolAction::Retired { request: 1 },
            PoolAction::Start { request: 2, task: 2 },
            PoolAction::Start { request: 3, task: 0 },
        ]
    );
    assert_eq!(pool.busy_slots(), 4);
    assert_eq!(pool.task_done(1, 1, &mut actions), Err(PoolError::NotRunning { key: 1, task: 1 }));
}

#[test]
fn blocking_admits_only_with_n_idle_slots() {
    let mut pool = SlotPool::new(5, Admission::Blocking, 100);
    let mut actions = Vec::new();
    pool.arrive(read(1, 3, 3), &mut actions).unwrap();
    pool.arrive(read(2, 3, 3), &mut actions).unwrap();
    assert_eq!(starts(&actions).len(), 3, "two idle slots do not admit a request of three tasks");
    assert_eq!(pool.state().idle_slots, 2);
    actions.clear();
    pool.task_done(1, 0, &mut actions).unwrap();
    assert_eq!(starts(&actions), vec![(2, 0), (2, 1), (2, 2)]);
    let too_long = pool.arrive(read(9, 6, 3), &mut actions);
    assert!(matches!(too_long, Err(PoolError::BadRequest { .. })));
}

#[test]
fn continued_writes_hold_their_slots_after_the_ack_and_failures_fail_requests() {
    let mut pool = SlotPool::new(4, Admission::NonBlocking, 1);
    let mut actions = Vec::new();
    let write = PooledRequest { key: 7, tasks: 4, quorum: 3, after_quorum: AfterQuorum::Continue };
    pool.arrive(write, &mut actions).unwrap();
    for task in 0..3 {
        pool.task_done(7, task, &mut actions).unwrap();
    }
    assert!(actions.contains(&PoolAction::Quorum { request: 7 }));
    assert!(!actions.iter().any(|a| matches!(a, PoolAction::Cancel { .. } | PoolAction::Retired { .. })));
    assert_eq!(pool.busy_slots(), 1, "the fourth write goes on in the background");
    actions.clear();
    pool.task_done(7, 3, &mut actions).unwrap();
    assert_eq!(actions, vec![PoolAction::Retired { request: 7 }]);
    // A read of 3 needing 2 fails at its second failure; its last task is cancelled.
    actions.clear();
    pool.arrive(read(8, 3, 2), &mut actions).unwrap();
    pool.task_failed(8, 0, &mut actions).unwrap();
    assert!(!actions.contains(&PoolAction::Failed { request: 8 }));
    pool.task_failed(8, 1, &mut actions).unwrap();
    let tail = &actions[actions.len() - 3..];
    assert_eq!(
        tail,
        [
            PoolAction::Failed { request: 8 },
            PoolAction::Cancel { request: 8, task: 2 },
            PoolAction::Retired { request: 8 }
        ]
    );
    assert_eq!(pool.busy_slots(), 0);
    // Bounds and bad requests change nothing.
    assert!(matches!(pool.arrive(read(9, 2, 3), &mut actions), Err(PoolError::BadRequest { .. })));
    assert!(matches!(pool.arrive(read(9, 0, 0), &mut actions), Err(PoolError::BadRequest { .. })));
    let mut full = SlotPool::new(1, Admission::NonBlocking, 1);
    full.arrive(read(1, 1, 1), &mut actions).unwrap();
    full.arrive(read(2, 1, 1), &mut actions).unwrap();
    assert_eq!(full.arrive(read(3, 1, 1), &mut actions), Err(PoolError::Full { waiting: 1 }));
    assert_eq!(full.arrive(read(2, 1, 1), &mut actions), Err(PoolError::DuplicateKey { key: 2 }));
    assert_eq!(full.requests_in_pool(), 2);
}

/// Random arrivals, finishes and failures under both rules: never more than L running, requests
/// admitted in arrival order, a quorum exactly at the quorum-th finish, nothing of a cancelled
/// request started after it, blocking requests started whole, every request retired once.
#[test]
fn random_event_sequences_keep_the_pools_invariants() {
    for (seed, admission) in (0..40).map(|s| (s, if s % 2 == 0 { Admission::NonBlocking } else { Admission::Blocking }))
    {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let slots = rng.random_range(1..=12u32);
        let mut pool = SlotPool::new(slots, admission, 1_000);
        let mut running: Vec<(u64, u16)> = Vec::new();
        let mut finished: HashMap<u64, u16> = HashMap::new();
        let mut quorum_of: HashMap<u64, (u16, AfterQuorum)> = HashMap::new();
        let mut tasks_of: HashMap<u64, u16> = HashMap::new();
        let (mut decided, mut retired) = (HashSet::new(), HashSet::new());
        let mut first_start_order = Vec::new();
        let mut next_key = 0u64;
        for _ in 0..2_000 {
            let mut actions = Vec::new();
            if running.is_empty() || rng.random_bool(0.4) {
                let max_tasks = if admission == Admission::Blocking { slots.min(6) as u16 } else { 6 };
                let tasks = rng.random_range(1..=max_tasks);
                let quorum = rng.random_range(1..=tasks);
                let after = if rng.random_bool(0.3) { AfterQuorum::Continue } else { AfterQuorum::Cancel };
                pool.arrive(PooledRequest { key: next_key, tasks, quorum, after_quorum: after }, &mut actions).unwrap();
                quorum_of.insert(next_key, (quorum, after));
                tasks_of.insert(next_key, tasks);
                next_key += 1;
            } else {
                let (request, task) = running.swap_remove(rng.random_range(0..running.len()));
                if rng.random_bool(0.1) {
                    pool.task_failed(request, task, &mut actions).unwrap();
                } else {
                    pool.task_done(request, task, &mut actions).unwrap();
                    *finished.entry(request).or_default() += 1;
                }
            }
            let mut started_now: HashMap<u64, u16> = HashMap::new();
            for action in &actions {
                match *action {
                    PoolAction::Start { request, task } => {
                        assert!(!decided.contains(&request) || quorum_of[&request].1 == AfterQuorum::Continue);
                        if !first_start_order.contains(&request) {
                            first_start_order.push(request);
                        }
                        *started_now.entry(request).or_default() += 1;
                        running.push((request, task));
                    }
                    PoolAction::Cancel { request, task } => running.retain(|&r| r != (request, task)),
                    PoolAction::Quorum { request } => {
                        assert_eq!(finished.get(&request).copied().unwrap_or(0), quorum_of[&request].0);
                        assert!(decided.insert(request));
                    }
                    PoolAction::Failed { request } => assert!(decided.insert(request)),
                    PoolAction::Retired { request } => {
                        assert!(running.iter().all(|&(r, _)| r != request));
                        assert!(decided.contains(&request) && retired.insert(request));
                    }
                }
            }
            assert!(running.len() as u32 == pool.busy_slots() && pool.busy_slots() <= slots);
            if admission == Admission::Blocking {
                // A blocking request's tasks all start in the event that admits it.
                for (request, count) in started_now {
                    assert_eq!(count, tasks_of[&request], "request {request} started in part");
                }
            }
        }
        let mut sorted = first_start_order.clone();
        sorted.sort_unstable();
        assert_eq!(first_start_order, sorted, "requests start in arrival order");
    }
}
