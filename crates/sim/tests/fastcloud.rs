//! The engine running FAST CLOUD's model (Liang & Kozat, sections III and V): one frontend of L
//! task slots admitting non-blocking, key-value nodes whose task delays are i.i.d. Δ + Exp(1/μ)
//! (as many servers as tasks can be in flight), reads of n chunks done at the first k. Checked
//! against the model's closed forms (`optimize::fec_model`) and its definitions.

use model::{NEVER, ReadRequest, RecordLog};
use optimize::fec_model::{Admission, DelayModel, FecClass};
use policy::fec::{AckAt, AfterAck, BacklogMeasure, ClassCode, ClassOp, CodeLengthKind};
use sim::fec::{FecClassSetup, FecSetup, poisson_mix, poisson_reads};

const SLOTS: usize = 16;
const CODE: ClassCode = ClassCode { k: 3, n_max: 6 };

/// The paper's 1 MB read fit: Δ = 61 ms, 1/μ = 79 ms.
fn read_delay() -> DelayModel {
    DelayModel::new(0.061, 0.079).unwrap()
}

fn class() -> FecClass {
    FecClass { delay: read_delay(), k: 3, slots: SLOTS, admission: Admission::NonBlocking }
}

fn run(kind: CodeLengthKind, requests: &[ReadRequest]) -> RecordLog {
    let setup = FecSetup::one_class(CODE, read_delay(), SLOTS, Admission::NonBlocking, kind, 3);
    setup.run(requests).unwrap()
}

fn mean_latency_s(records: &RecordLog) -> f64 {
    let requests = records.requests();
    requests.iter().map(|r| (r.completion_ns - r.arrival_ns) as f64 / 1e9).sum::<f64>() / requests.len() as f64
}

fn fixed(n: u16) -> CodeLengthKind {
    CodeLengthKind::Fixed { n: vec![n] }
}

#[test]
fn fixed_codes_match_the_non_blocking_approximation_below_capacity() {
    for n in [3usize, 6] {
        let capacity = class().capacity_per_s(n);
        for load in [0.1, 0.5] {
            let requests = poisson_reads(60_000, load * capacity, n as u64);
            let simulated = mean_latency_s(&run(fixed(n as u16), &requests));
            let predicted = class().delay_s(n, load * capacity);
            let error = (simulated / predicted - 1.0).abs();
            // Table I's non-blocking L = 16 cells at Δ/(Δ + 1/μ) = 0.4: 1.0 % (n = 3) and 1.9 % (n = 6)
            // at low load, up to 13 % near capacity.
            let bound = if load < 0.2 { 0.03 } else { 0.10 };
            assert!(error < bound, "({n},3) at {load} C̃: simulated {simulated:.4} s, model {predicted:.4} s");
        }
    }
}

#[test]
fn records_obey_the_model_first_k_of_n_and_at_most_l_in_flight() {
    let capacity = class().capacity_per_s(3);
    let requests = poisson_reads(20_000, 0.7 * capacity, 9);
    let kind = CodeLengthKind::Bafec { backlog: BacklogMeasure::WaitingRequests };
    let records = run(kind, &requests);
    assert_eq!(records.len(), requests.len());
    let mut intervals = Vec::new();
    let mut lengths = [0usize; 7];
    for record in records.iter() {
        let n = record.tasks.len();
        assert!((3..=6).contains(&n));
        lengths[n] += 1;
        let mut finishes: Vec<u64> = record.tasks.iter().filter(|t| !t.cancelled).map(|t| t.finish_ns).collect();
        finishes.sort_unstable();
        assert_eq!(finishes.len(), 3, "exactly k tasks finish: {record:?}");
        assert_eq!(record.request.completion_ns, finishes[2], "done at the k-th finish");
        for task in record.tasks.iter().filter(|t| t.cancelled) {
            // Cancelled at the instant of completion, whether it had started or not.
            assert_eq!(task.cancel_ns, record.request.completion_ns);
        }
        for task in record.tasks.iter().filter(|t| t.enqueue_ns != NEVER) {
            let end = if task.cancelled { task.cancel_ns } else { task.finish_ns };
            intervals.push((task.enqueue_ns, 1i32));
            intervals.push((end, -1i32));
        }
    }
    // Ends sort before starts at the same instant: a freed slot is taken at once.
    intervals.sort_unstable();
    let mut in_flight = 0i32;
    let most = intervals
        .iter()
        .map(|&(_, step)| {
            in_flight += step;
            in_flight
        })
        .max()
        .unwrap();
    assert!(
        most <= SLOTS as i32 && most >= SLOTS as i32 - 2,
        "at most L tasks in flight, and the pool is used: {most}"
    );
    // At 0.7 C̃(3,3) BAFEC mixes codes.
    assert!(lengths[3] > 0 && lengths[6] > 0, "code mix {lengths:?}");
}

#[test]
fn adaptive_codes_stay_stable_where_the_longest_fixed_code_is_not() {
    // 0.9 C̃(3,3) is past C̃(6,3) ≈ 0.70 C̃(3,3): fixed n = 6 diverges, BAFEC and Greedy stay near (3,3).
    let capacity = class().capacity_per_s(3);
    let requests = poisson_reads(30_000, 0.9 * capacity, 13);
    let uncoded = mean_latency_s(&run(fixed(3), &requests));
    let longest = mean_latency_s(&run(fixed(6), &requests));
    let bafec = mean_latency_s(&run(CodeLengthKind::Bafec { backlog: BacklogMeasure::WaitingRequests }, &requests));
    let greedy = mean_latency_s(&run(CodeLengthKind::Greedy, &requests));
    assert!(longest > 10.0 * uncoded, "fixed (6,3) past its capacity: {longest} s vs {uncoded} s");
    assert!(bafec < 1.3 * uncoded && greedy < 1.3 * uncoded, "bafec {bafec} s, greedy {greedy} s, (3,3) {uncoded} s");
}

#[test]
fn each_class_takes_its_own_task_delays() {
    // Reads and writes of the paper's fits at low load, (3,3) for both: each class's mean is its
    // own D_s(3,3): 205.8 ms for reads, 161.7 ms for writes.
    let write_delay = DelayModel::new(0.114, 0.026).unwrap();
    let classes = vec![
        FecClassSetup { code: CODE, delay: read_delay(), op: ClassOp::Read },
        FecClassSetup { code: CODE, delay: write_delay, op: ClassOp::Write { ack: AckAt::K, rest: AfterAck::Cancel } },
    ];
    let kind = CodeLengthKind::Fixed { n: vec![3, 3] };
    let setup = FecSetup { classes, slots: SLOTS, admission: Admission::NonBlocking, kind, seed: 4 };
    let records = setup.run(&poisson_mix(40_000, 2.0, &[0.5, 0.5], 8)).unwrap();
    for (class, delay) in [(0u8, read_delay()), (1, write_delay)] {
        let latencies: Vec<f64> = records
            .requests()
            .iter()
            .filter(|r| r.class == class)
            .map(|r| (r.completion_ns - r.arrival_ns) as f64 / 1e9)
            .collect();
        assert!((19_000..21_000).contains(&latencies.len()), "class {class}: {}", latencies.len());
        let mean = latencies.iter().sum::<f64>() / latencies.len() as f64;
        let model = FecClass { delay, ..class_of(read_delay()) }.service_delay_s(3);
        assert!((mean / model - 1.0).abs() < 0.02, "class {class}: {mean} s, D_s {model} s");
    }
}

fn class_of(delay: DelayModel) -> FecClass {
    FecClass { delay, k: 3, slots: SLOTS, admission: Admission::NonBlocking }
}

#[test]
fn writes_are_acknowledged_at_their_rule_and_the_rest_finish_or_are_cancelled() {
    let write_delay = DelayModel::new(0.114, 0.026).unwrap();
    let run_writes = |ack: AckAt, rest: AfterAck| {
        let classes = vec![FecClassSetup { code: CODE, delay: write_delay, op: ClassOp::Write { ack, rest } }];
        let kind = CodeLengthKind::Fixed { n: vec![6] };
        let setup = FecSetup { classes, slots: SLOTS, admission: Admission::NonBlocking, kind, seed: 5 };
        setup.run(&poisson_reads(5_000, 5.0, 6)).unwrap()
    };
    for (ack, count) in [(AckAt::K, 3), (AckAt::KPlusOne, 4), (AckAt::AllN, 6)] {
        let continued = run_writes(ack, AfterAck::Continue);
        for record in continued.iter() {
            let mut finishes: Vec<u64> = record.tasks.iter().map(|t| t.finish_ns).collect();
            finishes.sort_unstable();
            assert!(record.tasks.iter().all(|t| !t.cancelled && t.finish_ns != NEVER), "every unit stored: {record:?}");
            assert_eq!(record.request.completion_ns, finishes[count - 1], "acknowledged at the {count}th");
            // Durable (the last unit stored) after the acknowledgement unless the rule waits for all.
            assert!(finishes[5] > record.request.completion_ns || count == 6);
        }
        let cancelled = run_writes(ack, AfterAck::Cancel);
        for record in cancelled.iter() {
            assert_eq!(record.tasks.iter().filter(|t| !t.cancelled).count(), count);
            assert!(record.tasks.iter().filter(|t| t.cancelled).all(|t| t.cancel_ns == record.request.completion_ns));
        }
    }
}
