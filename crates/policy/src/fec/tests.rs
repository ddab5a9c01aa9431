//! Code-length choices against the paper's definitions (sections V-E, V-F, VI-D).

use super::*;

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
