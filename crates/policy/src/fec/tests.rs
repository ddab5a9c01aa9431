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
fn a_write_class_may_have_its_own_k_a_read_class_may_not() {
    let layout = model::CodeLayout::new(codec::CodeSpec::Rs { k: 3, m: 3 }).unwrap();
    let nb = Admission::NonBlocking;
    let two = ClassCode { k: 2, n_max: 5 };
    let policy = |classes: Vec<ClassCode>| CodeLengthPolicy::new(CodeLengthKind::Greedy, classes, 16, nb, &[]).unwrap();
    let write = ClassOp::Write { ack: AckAt::K, rest: AfterAck::Cancel };
    // Fig. 9: reads of k = 3 beside writes of k = 2 on six servers.
    assert!(FecRead::with_ops(policy(vec![READ, two]), vec![ClassOp::Read, write], &layout).is_ok());
    // A read decodes the stripe: its k is the code's.
    assert!(matches!(
        FecRead::with_ops(policy(vec![READ, two]), vec![ClassOp::Read, ClassOp::Read], &layout),
        Err(CodeLengthError::BadClass { class: 1, .. })
    ));
    // No class asks more units than there are.
    let seven = ClassCode { k: 2, n_max: 7 };
    assert!(FecRead::with_ops(policy(vec![READ, seven]), vec![ClassOp::Read, write], &layout).is_err());
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

mod as_read_policies {
    use crate::read::{BuildError, FecSettings, FrontendSetup, PolicyKind, PolicySettings, build_read_policy};
    use crate::{ReadPolicy, RefreshWork};
    use codec::CodeSpec;
    use model::{CodeLayout, FrontendId, NEVER, ObjectId, Outcome, PartitionId, RequestId, RequestRecord, TaskRecord};
    use optimize::fec_model::Admission;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn build(
        kind: PolicyKind,
        fec: FecSettings,
        spec: CodeSpec,
        slots: Option<u32>,
    ) -> Result<Box<dyn ReadPolicy + Send>, BuildError> {
        let layout = CodeLayout::new(spec).unwrap();
        let settings = PolicySettings { fec, ..Default::default() };
        build_read_policy(kind, &settings, &FrontendSetup { layout: &layout, slots, admission: Admission::NonBlocking })
    }

    const RS: CodeSpec = CodeSpec::Rs { k: 3, m: 3 };

    #[test]
    fn the_fec_kinds_parse_build_and_refuse_what_they_cannot_run() {
        for kind in PolicyKind::FEC {
            assert_eq!(kind.name().parse::<PolicyKind>().unwrap(), kind);
            assert!(kind.reads_rows() && !PolicyKind::ALL.contains(&kind));
            let policy = build(kind, FecSettings::default(), RS, Some(16)).unwrap();
            assert_eq!(
                policy.name(),
                ["fixed", "greedy", "bafec"][PolicyKind::FEC.iter().position(|k| *k == kind).unwrap()]
            );
            assert!(!policy.refresh_probes_nodes(), "{kind} probes nothing");
            assert_eq!(policy.refresh_period_ns(), Some(4_000_000_000), "the online fit's default period");
            let lrc = CodeSpec::Lrc { k: 6, l: 2, r: 2 };
            assert!(matches!(build(kind, FecSettings::default(), lrc, Some(16)), Err(BuildError::NotMds { .. })));
        }
        assert!(matches!(
            build(PolicyKind::FecBafec, FecSettings::default(), RS, None),
            Err(BuildError::BafecNeedsSlots)
        ));
        let bad = |fec| build(PolicyKind::FecFixed, fec, RS, Some(16)).is_err();
        assert!(bad(FecSettings { n_max: 7, ..Default::default() }));
        assert!(bad(FecSettings { n_max: 2, ..Default::default() }));
        assert!(bad(FecSettings { fixed_n: 5, n_max: 4, ..Default::default() }));
        assert!(bad(FecSettings { delay_exp_mean_ms: 0.0, ..Default::default() }));
        assert!(bad(FecSettings { fit_min_finished: 9000, ..Default::default() }));
        assert!(!bad(FecSettings { fit_min_finished: 9000, fit_period_ms: 0, ..Default::default() }));
        let off = build(PolicyKind::FecFixed, FecSettings { fit_period_ms: 0, ..Default::default() }, RS, None);
        assert_eq!(off.unwrap().refresh_period_ns(), None, "no fit, no refresh");
    }

    /// Records of `requests` raced reads of (n, k) whose task delays are Δ + Exp.
    fn raced_records(
        n: usize,
        k: usize,
        requests: usize,
        shift_s: f64,
        mean_s: f64,
    ) -> Vec<(RequestRecord, Vec<TaskRecord>)> {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        (0..requests)
            .map(|i| {
                let start = i as u64 * 1_000_000_000;
                let delays: Vec<u64> =
                    (0..n).map(|_| ((shift_s - mean_s * (1.0 - rng.random::<f64>()).ln()) * 1e9) as u64).collect();
                let mut sorted = delays.clone();
                sorted.sort_unstable();
                let kth = sorted[k - 1];
                let tasks = delays
                    .iter()
                    .enumerate()
                    .map(|(unit, &d)| {
                        let won = d <= kth;
                        TaskRecord {
                            node: model::NodeId(unit as u32),
                            unit: unit as u8,
                            role: model::TaskRole::Normal,
                            cancelled: !won,
                            bytes: 1 << 20,
                            enqueue_ns: start,
                            start_ns: start,
                            finish_ns: if won { start + d } else { NEVER },
                            cancel_ns: if won { NEVER } else { start + kth },
                            failed: false,
                        }
                    })
                    .collect();
                let request = RequestRecord {
                    request: RequestId(i as u64),
                    frontend: FrontendId(0),
                    object: ObjectId(0),
                    partition: PartitionId(0),
                    bytes: 3 << 20,
                    arrival_ns: start,
                    decision_start_ns: start,
                    decision_end_ns: start,
                    completion_ns: start + kth,
                    probes: 0,
                    probe_wait_ns: 0,
                    decision_cpu_ns: 0,
                    degraded: false,
                    timed_out: false,
                    outcome: Outcome::Ok,
                    class: 0,
                    latency_class: 0,
                };
                (request, tasks)
            })
            .collect()
    }

    fn refresh(policy: &mut Box<dyn ReadPolicy + Send>) {
        let work: RefreshWork = policy.begin_refresh(&mut NoView, 0, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
        policy.finish_refresh(work.run());
    }

    #[test]
    fn bafec_refits_its_delay_model_from_raced_tasks_and_moves_its_thresholds() {
        let mut policy = build(PolicyKind::FecBafec, FecSettings::default(), RS, Some(16)).unwrap();
        let gauge =
            |p: &(dyn ReadPolicy + Send), name: &str| p.gauges().into_iter().find(|(n, _)| *n == name).map(|(_, v)| v);
        assert_eq!(gauge(policy.as_ref(), "fec_delay_shift_seconds"), Some(0.061), "the configured start");
        // Fewer finished tasks than the minimum: the start model stays.
        for (request, tasks) in raced_records(6, 3, 50, 0.010, 0.005) {
            policy.observe(&request, &tasks);
        }
        refresh(&mut policy);
        assert_eq!(gauge(policy.as_ref(), "fec_delay_shift_seconds"), Some(0.061));
        assert_eq!(gauge(policy.as_ref(), "fec_fit_samples"), None);
        for (request, tasks) in raced_records(6, 3, 2000, 0.010, 0.005) {
            policy.observe(&request, &tasks);
        }
        refresh(&mut policy);
        let shift = gauge(policy.as_ref(), "fec_delay_shift_seconds").unwrap();
        let mean = gauge(policy.as_ref(), "fec_delay_exp_mean_seconds").unwrap();
        assert!((shift - 0.010).abs() < 0.0003, "Δ {shift}");
        assert!((mean - 0.005).abs() < 0.0005, "1/μ {mean}: the censored fit counts the cancelled");
        assert_eq!(gauge(policy.as_ref(), "fec_fit_samples"), Some(8192.0), "the window holds the last 8192 tasks");
    }

    /// A view for refreshes that must not look at it.
    struct NoView;

    impl crate::ClusterView for NoView {
        fn placement(&self) -> &model::Placement {
            unreachable!("FAST CLOUD's refresh looks at no view")
        }
        fn layout(&self) -> &CodeLayout {
            unreachable!()
        }
        fn node_rate_bytes_per_s(&self, _: model::NodeId) -> f64 {
            unreachable!()
        }
        fn node_task_overhead_ns(&self, _: model::NodeId) -> u64 {
            unreachable!()
        }
        fn frontend_count(&self) -> u32 {
            unreachable!()
        }
        fn probe(&mut self, _: model::NodeId) -> model::QueueState {
            unreachable!()
        }
        fn frontend_state(&self) -> super::FrontendState {
            unreachable!()
        }
    }
}
