//! Agreement by construction: the simulator's engine and the gateway's executor shell drive the
//! same execution core, so one scripted timeline (service times, a node down, a timeout) gives the
//! same actions at the same times in both; reads (`sim::scripted` against the read executor) and
//! writes (`sim::write` against the write shell: retries elsewhere, ack rules, the durability rule)
//! and a dataflow's messages at its requestor (`sim::reconstruct::scripted` against the node
//! dataflow shell: completion, a stall, the whole run's limit, a broken session). The gateway side runs on tokio's paused clock with each
//! task's I/O replaced by a sleep and an answer; the simulator side is `sim::scripted`. Both
//! admit the plan's tasks through the core's admission pool (unbounded, or a few slots).

use bytes::Bytes;
use execution::reconstruct::watch::{DataflowLimits, DataflowWatch, WatchFailure, WatchOutcome};
use execution::reconstruct::{Dataflow, Method};
use execution::{
    Action, AdmissionMode, AdmissionSettings, Durability, StragglerWait, WriteAction, WriteRule, WriteSettings,
};
use gateway::data::read::admission::TaskPool;
use gateway::data::read::executor::{self, Clock, TaskEnd, TaskResult};
use gateway::data::read::node_dataflow;
use gateway::data::write::execute::{CopyTask, CopyWriter, drive_write};
use model::{NodeId, PlannedTask, Quorum, ReadPlan, TaskRole};
use sim::Outage;
use sim::reconstruct::scripted::{DataflowScript, Message};
use sim::scripted::Timeline;
use sim::write::WriteTimeline;
use std::time::Duration;

const MS: u64 = 1_000_000;

fn task(unit: u8, role: TaskRole) -> PlannedTask {
    PlannedTask { node: NodeId(u32::from(unit)), unit, offset: 0, length: 4096, role }
}

fn plan(tasks: Vec<PlannedTask>, quorum: Quorum) -> ReadPlan {
    ReadPlan::new(tasks, quorum, model::DecodeAt::Gateway)
}

/// Unit 0 from node 0, units 1..=6 after 100 ms.
fn normal_then_fallback() -> ReadPlan {
    let mut tasks = vec![task(0, TaskRole::Normal)];
    tasks.extend((1..=6).map(|unit| task(unit, TaskRole::Fallback)));
    plan(tasks, Quorum::NormalThenFallback { timeout_ns: 100 * MS })
}

/// Whether node `node` is down at `at_ns`, and when it goes down after `at_ns`.
fn outage_of(outages: &[Outage], node: u32, at_ns: u64) -> (bool, Option<u64>) {
    let down = outages.iter().any(|o| o.takes_down(node, at_ns));
    let next = outages.iter().filter(|o| o.node == node && o.from_ns > at_ns).map(|o| o.from_ns).min();
    (down, next)
}

/// The timeline in the gateway's shell: task i sleeps its node's service time and delivers, or
/// fails at once on a node that is down, or fails when its node goes down while it runs.
async fn live_actions(timeline: &Timeline) -> Vec<(u64, Action)> {
    let code = timeline.code.build().unwrap();
    let clock = Clock { epoch: tokio::time::Instant::now() };
    let mut trace = Vec::new();
    let run_task = |i: usize| {
        let node = timeline.plan.tasks[i].node.0;
        let service_ns = timeline.service_ns[node as usize];
        let outages = timeline.outages.clone();
        async move {
            let sent_ns = clock.now_ns();
            let (down, next_down_ns) = outage_of(&outages, node, sent_ns);
            let fails_at = if down { Some(sent_ns) } else { next_down_ns.filter(|&at| at < sent_ns + service_ns) };
            if let Some(at_ns) = fails_at {
                tokio::time::sleep(Duration::from_nanos(at_ns - sent_ns)).await;
                return (TaskEnd::Failed { sent_ns }, None) as TaskResult;
            }
            tokio::time::sleep(Duration::from_nanos(service_ns)).await;
            let timing = node::TaskTiming {
                node_id: node,
                task_id: i as u64,
                enqueue_ns: 0,
                start_ns: 0,
                finish_ns: service_ns,
                bytes: 4096,
                outcome: node::TaskOutcome::Ok,
                bytes_ahead: 0,
                emulated_service_ns: 0,
                class: node::ClassId::DEFAULT,
            };
            (TaskEnd::Done { timing, sent_ns, received_ns: clock.now_ns() }, Some(Bytes::from_static(b"unit")))
        }
    };
    let pool = TaskPool::new(timeline.admission);
    let admitted = pool.admit(timeline.plan.upfront_tasks()).await.unwrap();
    let target = timeline.plan.tasks[0].unit;
    executor::drive(&timeline.plan, target, code.as_ref(), clock, Some(&admitted), run_task, Some(&mut trace)).await;
    trace
}

fn sim_actions(timeline: &Timeline) -> Vec<(u64, Action)> {
    sim::scripted::run(timeline).actions.into_iter().map(|(at, _, action)| (at, action)).collect()
}

fn timeline(plan: ReadPlan, service_ms: [u64; 9], outages: Vec<Outage>) -> Timeline {
    Timeline {
        code: codec::CodeSpec::Rs { k: 6, m: 3 },
        plan,
        service_ns: service_ms.map(|ms| ms * MS).to_vec(),
        outages,
        latency_ns: 0,
        admission: AdmissionSettings::default(),
    }
}

async fn assert_agree(timeline: &Timeline) -> Vec<(u64, Action)> {
    let simulated = sim_actions(timeline);
    let live = live_actions(timeline).await;
    assert_eq!(live, simulated, "the two shells disagree on {timeline:?}");
    simulated
}

#[tokio::test(start_paused = true)]
async fn a_timeout_and_a_cancelled_loser_agree() {
    let actions = assert_agree(&timeline(normal_then_fallback(), [1000, 10, 10, 10, 10, 10, 10, 10, 10], vec![])).await;
    assert!(actions.contains(&(100 * MS, Action::Start { task: 1 })), "the timeout launched the fallback");
    assert!(actions.contains(&(110 * MS, Action::Cancel { task: 0 })), "the loser was cancelled");
}

#[tokio::test(start_paused = true)]
async fn a_failed_task_and_a_failed_fallback_agree() {
    let down = |node, from_ms, until_ms| Outage { node, from_ns: from_ms * MS, until_ns: until_ms * MS };
    // Node 0 down: the normal task fails and the fallback starts at once.
    assert_agree(&timeline(normal_then_fallback(), [10; 9], vec![down(0, 0, 1000)])).await;
    // Node 3 goes down under its fallback task: the normal read wins at 300 ms.
    let actions =
        assert_agree(&timeline(normal_then_fallback(), [300, 10, 10, 10, 10, 10, 10, 10, 10], vec![down(3, 105, 200)]))
            .await;
    assert_eq!(actions.last(), Some(&(300 * MS, Action::Complete { decoded: false })));
}

#[tokio::test(start_paused = true)]
async fn first_k_of_n_with_a_failure_agrees() {
    let tasks = (0..9).map(|unit| task(unit, TaskRole::Degraded)).collect();
    let service = [50, 20, 30, 40, 60, 70, 80, 90, 15];
    let actions = assert_agree(&timeline(
        plan(tasks, Quorum::FirstKOfN { k: 6 }),
        service,
        vec![Outage { node: 2, from_ns: 25 * MS, until_ns: 500 * MS }],
    ))
    .await;
    assert!(actions.iter().any(|(_, a)| matches!(a, Action::Complete { decoded: false })), "{actions:?}");
}

#[tokio::test(start_paused = true)]
async fn first_k_of_n_through_three_slots_agrees() {
    // Nine tasks, three slots: the tasks leave in order as slots free; the winners' quorum cancels
    // the ones still waiting for a slot (they never reach a node) and the running losers.
    let tasks = (0..9).map(|unit| task(unit, TaskRole::Degraded)).collect();
    let service = [50, 20, 30, 40, 60, 70, 80, 90, 15];
    let mut timeline = timeline(plan(tasks, Quorum::FirstKOfN { k: 6 }), service, vec![]);
    timeline.admission = AdmissionSettings { slots: Some(3), mode: AdmissionMode::NonBlocking };
    let actions = assert_agree(&timeline).await;
    let unbounded_done = 70 * MS;
    let done_ns = actions.iter().find(|(_, a)| matches!(a, Action::Complete { .. })).map(|(at, _)| *at).unwrap();
    assert!(done_ns > unbounded_done, "three slots finish later than nine ({done_ns} ns): {actions:?}");
}

#[tokio::test(start_paused = true)]
async fn a_fallback_waiting_for_the_only_slot_agrees() {
    // The normal task holds the one slot; the fallback started at the timeout waits for it, and
    // the normal read's answer cancels it before any of its tasks is sent.
    let mut timeline = timeline(normal_then_fallback(), [300, 10, 10, 10, 10, 10, 10, 10, 10], vec![]);
    timeline.admission = AdmissionSettings { slots: Some(1), mode: AdmissionMode::NonBlocking };
    let actions = assert_agree(&timeline).await;
    assert!(actions.contains(&(300 * MS, Action::Complete { decoded: false })), "{actions:?}");
}

/// A small object's copies (`Quorum::FirstCopy`, 40 ms apart): the first copy's node is down, so the
/// second goes out at once; it is slow, so the third goes out at its wait and wins; the second is
/// cancelled. Both shells launch and cancel alike.
#[tokio::test(start_paused = true)]
async fn copies_a_wait_apart_agree() {
    // Copies of data unit 0 on nodes 6, 7 and 8.
    let copy = |node: u32, role| PlannedTask { node: NodeId(node), ..task(0, role) };
    let tasks = vec![copy(6, TaskRole::Normal), copy(7, TaskRole::Fallback), copy(8, TaskRole::Fallback)];
    let copies = plan(tasks, Quorum::FirstCopy { wait_ns: 40 * MS });
    let down = Outage { node: 6, from_ns: 0, until_ns: 1000 * MS };
    let service = [10, 10, 10, 10, 10, 10, 10, 300, 20];
    let actions = assert_agree(&timeline(copies, service, vec![down])).await;
    assert!(actions.contains(&(0, Action::Start { task: 1 })), "a failed copy's successor at once: {actions:?}");
    assert!(actions.contains(&(40 * MS, Action::Start { task: 2 })), "the next a wait later: {actions:?}");
    assert!(actions.contains(&(60 * MS, Action::Complete { decoded: false })), "{actions:?}");
    assert!(actions.contains(&(60 * MS, Action::Cancel { task: 1 })), "the slow copy cancelled: {actions:?}");
}

/// The write timeline in the gateway's write shell: copy writes sleep until `sim::write::copy_end`
/// says they end, and a failed copy is placed by the simulator's rule (`first_free_node`).
struct ScriptedWriter {
    timeline: WriteTimeline,
    epoch: tokio::time::Instant,
}

impl CopyWriter for ScriptedWriter {
    fn start(&mut self, _copy: usize, node: u32, _retry: bool) -> CopyTask {
        let sent_ns = self.epoch.elapsed().as_nanos() as u64;
        let (end_ns, durable) = sim::write::copy_end(&self.timeline, node, sent_ns);
        let at = self.epoch + Duration::from_nanos(end_ns);
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            if durable { Ok(()) } else { Err(format!("node {node} is down")) }
        })
    }

    fn place(&mut self, _copy: usize, avoid: &[u32], placement: &[u32]) -> Option<u32> {
        let nodes = self.timeline.service_ns.len() as u32;
        let now_ns = self.epoch.elapsed().as_nanos() as u64;
        sim::write::first_free_node(nodes, avoid, placement, &self.timeline.outages, now_ns)
    }
}

async fn assert_writes_agree(timeline: &WriteTimeline) -> Vec<(u64, WriteAction)> {
    let simulated = sim::write::run(timeline).actions;
    let code = timeline.code.map(|spec| spec.build().unwrap());
    let durability = code.as_ref().map_or(Durability::Copies, |code| Durability::Code(code.as_ref()));
    let mut writer = ScriptedWriter { timeline: timeline.clone(), epoch: tokio::time::Instant::now() };
    let mut live = Vec::new();
    let planned = (timeline.placement.clone(), timeline.to_write.as_slice());
    drive_write(planned, timeline.settings, durability, &mut writer, Some(&mut live)).await;
    assert_eq!(live, simulated, "the two write shells disagree on {timeline:?}");
    simulated
}

/// RS(6,3) over `nodes` nodes (unit u on node u), every unit written, node u serving in
/// `service_ms[u]`.
fn write_timeline(service_ms: &[u64], outages: Vec<Outage>, settings: WriteSettings) -> WriteTimeline {
    WriteTimeline {
        code: Some(codec::CodeSpec::Rs { k: 6, m: 3 }),
        placement: (0..9).collect(),
        to_write: vec![true; 9],
        service_ns: service_ms.iter().map(|ms| ms * MS).collect(),
        outages,
        latency_ns: 0,
        settings,
    }
}

fn write_settings(early_failures_tolerated: Option<usize>, straggler: bool, retries: u32) -> WriteSettings {
    let straggler = straggler.then_some(StragglerWait { share_of_quorum_time: 0.5, min_ns: 2 * MS });
    WriteSettings { rule: WriteRule { early_failures_tolerated, straggler }, retries, min_failures_tolerated: 1 }
}

#[tokio::test(start_paused = true)]
async fn a_straggler_left_pending_agrees() {
    let service = [10, 12, 14, 16, 18, 20, 22, 24, 100];
    let actions = assert_writes_agree(&write_timeline(&service, vec![], write_settings(None, true, 3))).await;
    // Eight landed by 24 ms; the ninth may run half as long again.
    assert_eq!(actions.last(), Some(&(36 * MS, WriteAction::Acknowledge { straggler: true })), "{actions:?}");
}

#[tokio::test(start_paused = true)]
async fn a_failed_unit_written_elsewhere_under_ack_k_plus_one_agrees() {
    // Node 2 is down from the start and node 5 goes down under its write: each is placed on the
    // lowest free node up (9, then 10) and written again; k + 1 = 7 durable acknowledge.
    let service = [10, 12, 14, 16, 18, 30, 22, 24, 26, 35, 41, 50];
    let down = |node, from_ms| Outage { node, from_ns: from_ms * MS, until_ns: 1_000 * MS };
    let timeline = write_timeline(&service, vec![down(2, 0), down(5, 25)], write_settings(Some(1), true, 3));
    let actions = assert_writes_agree(&timeline).await;
    assert!(actions.contains(&(0, WriteAction::Start { copy: 2, node: 9, retry: true })), "{actions:?}");
    assert!(actions.contains(&(25 * MS, WriteAction::Start { copy: 5, node: 10, retry: true })), "{actions:?}");
    // Seven durable at 26 ms (units 0, 1, 3, 4, 6, 7, 8), the retried units still landing.
    assert_eq!(actions.last(), Some(&(26 * MS, WriteAction::Acknowledge { straggler: false })), "{actions:?}");
}

#[tokio::test(start_paused = true)]
async fn units_out_of_retries_judged_by_the_durability_rule_agree() {
    // No retries: nodes 7 and 8 go down under their writes; seven durable survive one more failure.
    let service = [10, 12, 14, 16, 18, 20, 22, 24, 26];
    let down = |node, from_ms| Outage { node, from_ns: from_ms * MS, until_ns: 1_000 * MS };
    let timeline = write_timeline(&service, vec![down(7, 15), down(8, 23)], write_settings(None, true, 0));
    let actions = assert_writes_agree(&timeline).await;
    assert_eq!(actions.last(), Some(&(23 * MS, WriteAction::Complete { failures_tolerated: 1 })), "{actions:?}");
}

#[tokio::test(start_paused = true)]
async fn a_failed_replica_fails_the_write_in_both_shells() {
    let timeline = WriteTimeline {
        code: None,
        placement: vec![6, 7, 8],
        to_write: vec![true; 3],
        service_ns: [10, 10, 10, 10, 10, 10, 10, 15, 20].map(|ms| ms * MS).to_vec(),
        outages: vec![Outage { node: 6, from_ns: 0, until_ns: 1_000 * MS }],
        latency_ns: 0,
        settings: WriteSettings { retries: 0, min_failures_tolerated: 2, ..write_settings(None, true, 0) },
    };
    let actions = assert_writes_agree(&timeline).await;
    assert_eq!(actions.last(), Some(&(20 * MS, WriteAction::Fail { failures_tolerated: Some(1) })), "{actions:?}");
}

/// A dataflow script played through the gateway's dataflow shell: the messages as one stream
/// (the merged sessions), each arriving at its time, then the end of the streams or silence.
async fn live_dataflow(script: &DataflowScript) -> (u64, WatchOutcome) {
    let epoch = tokio::time::Instant::now();
    let mut messages = script.messages.clone().into_iter();
    let streams_end_ns = script.streams_end_ns;
    let stream = futures_util::stream::unfold((), move |()| {
        let next = messages.next();
        async move {
            let Some((at_ns, session, message)) = next else {
                match streams_end_ns {
                    Some(at_ns) => tokio::time::sleep_until(epoch + Duration::from_nanos(at_ns)).await,
                    None => std::future::pending::<()>().await,
                }
                return None;
            };
            tokio::time::sleep_until(epoch + Duration::from_nanos(at_ns)).await;
            let response = |packet, done| node::proto::ReconstructResponse { packet, data: Bytes::new(), done };
            let item = match message {
                Message::Packet(packet) => Ok(response(packet, None)),
                Message::Done => Ok(response(0, Some(node::proto::SessionDone::default()))),
                Message::Error => Err("the session broke".to_string()),
            };
            Some(((session, item), ()))
        }
    });
    let mut watch = DataflowWatch::start(&script.flow, true, &script.sessions, script.limits, 0);
    let mut errors = Vec::new();
    node_dataflow::watch_streams(Box::pin(stream), &mut watch, epoch, |_, _| Ok(()), &mut errors).await
}

async fn assert_dataflows_agree(script: &DataflowScript) -> (u64, WatchOutcome) {
    let simulated = sim::reconstruct::scripted::run(script);
    let live = live_dataflow(script).await;
    assert_eq!(live, simulated, "the two dataflow shells disagree on {script:?}");
    simulated
}

/// The gateway decode of k = 2 over two packets, sources 0 and 1 each sending both, under the
/// gateway's limits scaled down (a stall of 5 ms, 30 ms in all).
fn dataflow_script(messages: Vec<(u64, usize, Message)>, streams_end_ms: Option<u64>) -> DataflowScript {
    DataflowScript {
        flow: Dataflow::build(Method::GatewayDecode, 2, 8192, 4096).unwrap(),
        sessions: vec![0, 1],
        messages: messages.into_iter().map(|(ms, session, message)| (ms * MS, session, message)).collect(),
        streams_end_ns: streams_end_ms.map(|ms| ms * MS),
        limits: DataflowLimits { stall_ns: 5 * MS, total_ns: 30 * MS },
    }
}

#[tokio::test(start_paused = true)]
async fn a_dataflow_completed_stalled_or_broken_agrees() {
    use Message::{Done, Error, Packet};
    let whole =
        vec![(1, 0, Packet(0)), (2, 1, Packet(0)), (3, 0, Packet(1)), (4, 1, Packet(1)), (5, 0, Done), (6, 1, Done)];
    assert_eq!(
        assert_dataflows_agree(&dataflow_script(whole.clone(), Some(7))).await,
        (6 * MS, WatchOutcome::Complete)
    );
    // Source 1 goes silent after its first packet without closing its stream: 5 ms after the last
    // progress (source 0's done at 5 ms) the core's timer gives up.
    let silent = vec![(1, 0, Packet(0)), (2, 1, Packet(0)), (3, 0, Packet(1)), (5, 0, Done)];
    let stalled = assert_dataflows_agree(&dataflow_script(silent.clone(), None)).await;
    assert_eq!(stalled, (10 * MS, WatchOutcome::Fail(WatchFailure::Stalled)));
    // A packet every 4 ms never stalls, but the whole run is limited to 30 ms.
    let slow = vec![
        (4, 0, Packet(0)),
        (8, 1, Packet(0)),
        (12, 0, Packet(1)),
        (16, 1, Packet(1)),
        (20, 0, Done),
        (24, 1, Done),
    ];
    let mut limited = dataflow_script(slow, Some(40));
    limited.limits.total_ns = 22 * MS;
    assert_eq!(assert_dataflows_agree(&limited).await, (22 * MS, WatchOutcome::Fail(WatchFailure::TooLong)));
    // A broken session, and streams that end short.
    let broken = vec![(1, 0, Packet(0)), (2, 1, Error)];
    let failed = assert_dataflows_agree(&dataflow_script(broken, None)).await;
    assert_eq!(failed, (2 * MS, WatchOutcome::Fail(WatchFailure::SessionFailed { session: 1 })));
    let short = assert_dataflows_agree(&dataflow_script(silent, Some(6))).await;
    assert_eq!(short, (6 * MS, WatchOutcome::Fail(WatchFailure::Incomplete)));
}
