//! Writes in virtual time: one write's copies sent to nodes with scripted service times and
//! outages, run by the execution core's [`WriteExecution`] (the gateway's shell of the same state
//! machine is `gateway::data::write::execute`; the agreement test runs one timeline in both), and
//! runs of many independent writes with exponential service times, checked against the order
//! statistics' closed forms. A run says what the core did and when, and when each copy landed,
//! the ones left pending after an acknowledgement included.
//!
//! Timing: a copy's write sent at t to a node down at t fails at t; otherwise it is durable at
//! t + service + 2 × latency unless the node goes down before then, which fails it at that moment.
//! A failed copy is placed by [`first_free_node`], the rule both shells use in the agreement test.
//!
//! Must not: decide anything the core decides, or be used for measurements of the papers (no
//! queueing: each write has the nodes to itself).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use codec::{CodeSpec, ErasureCode};
use execution::{Durability, WriteAction, WriteEvent, WriteExecution, WriteSettings};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::engine::Outage;

/// One write: copy c goes to node `placement[c]` if `to_write[c]`; node u takes `service_ns[u]` to
/// store a copy; `outages` take nodes down; every message takes `latency_ns`.
#[derive(Clone, Debug)]
pub struct WriteTimeline {
    /// The copies are a stripe of this code's units; `None`: whole copies of the same bytes.
    pub code: Option<CodeSpec>,
    /// Each copy's node.
    pub placement: Vec<u32>,
    /// Which copies are written (the others' nodes are down at the start).
    pub to_write: Vec<bool>,
    /// Service time of each node, ns (the cluster's nodes are `0..service_ns.len()`).
    pub service_ns: Vec<u64>,
    /// Node outages.
    pub outages: Vec<Outage>,
    /// One-way network latency, ns.
    pub latency_ns: u64,
    /// The write's retries, ack rule and durability rule.
    pub settings: WriteSettings,
}

/// What became of one write.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteOutput {
    /// Every action of the core, with its time.
    pub actions: Vec<(u64, WriteAction)>,
    /// When the core acknowledged, completed or failed.
    pub decided_ns: u64,
    /// Each copy's node at the end.
    pub placement: Vec<u32>,
    /// When each copy became durable (a pending one after the acknowledgement); `None`: never.
    pub landed_ns: Vec<Option<u64>>,
}

impl WriteOutput {
    /// The core's last action: acknowledge, complete or fail.
    pub fn decision(&self) -> &WriteAction {
        &self.actions.last().expect("a write decides").1
    }
}

/// The node a failed copy goes to: the lowest-numbered of `0..nodes` not in `avoid`, holding no
/// copy (`placement`) and up at `at_ns`.
pub fn first_free_node(nodes: u32, avoid: &[u32], placement: &[u32], outages: &[Outage], at_ns: u64) -> Option<u32> {
    (0..nodes).find(|node| !avoid.contains(node) && !placement.contains(node) && !is_down(outages, *node, at_ns))
}

fn is_down(outages: &[Outage], node: u32, at_ns: u64) -> bool {
    outages.iter().any(|o| o.takes_down(node, at_ns))
}

/// When a copy's write sent to `node` at `sent_ns` ends, and whether durable.
pub fn copy_end(timeline: &WriteTimeline, node: u32, sent_ns: u64) -> (u64, bool) {
    if is_down(&timeline.outages, node, sent_ns) {
        return (sent_ns, false);
    }
    let done_ns = sent_ns + timeline.service_ns[node as usize] + 2 * timeline.latency_ns;
    let next_down = timeline.outages.iter().filter(|o| o.node == node && o.from_ns > sent_ns).map(|o| o.from_ns).min();
    match next_down.filter(|&at| at < done_ns) {
        Some(at) => (at, false),
        None => (done_ns, true),
    }
}

/// A copy's write ending: when, which copy, its start's serial (stale ends of a replaced start do
/// not occur: a copy runs one write at a time), durable or not.
type End = Reverse<(u64, u64, usize, bool)>;

/// Runs `timeline`.
pub fn run(timeline: &WriteTimeline) -> WriteOutput {
    let code = timeline.code.map(|spec| spec.build().expect("a valid code"));
    let durability = match &code {
        Some(code) => Durability::Code(code.as_ref() as &dyn ErasureCode),
        None => Durability::Copies,
    };
    let nodes = timeline.service_ns.len() as u32;
    assert!(timeline.placement.iter().all(|&node| node < nodes), "every copy on a node of the cluster");
    let copies = timeline.placement.len();
    let mut execution =
        WriteExecution::start(timeline.placement.clone(), &timeline.to_write, timeline.settings, durability, 0);
    let mut ends: BinaryHeap<End> = BinaryHeap::new();
    let (mut now_ns, mut serial, mut timer) = (0u64, 0u64, None::<u64>);
    let mut actions = Vec::new();
    let mut landed_ns = vec![None; copies];
    let mut decided_ns = None;
    // Every start ends once and the core arms one deadline: bounded by the starts.
    let steps = 2 * copies * (timeline.settings.retries as usize + 1) + 4;
    for _step in 0..steps {
        while let Some(action) = execution.poll_action() {
            actions.push((now_ns, action.clone()));
            match action {
                WriteAction::Start { copy, node, .. } => {
                    let (at_ns, durable) = copy_end(timeline, node, now_ns);
                    serial += 1;
                    ends.push(Reverse((at_ns, serial, copy, durable)));
                }
                WriteAction::Place { copy, avoid } => {
                    let node = first_free_node(nodes, &avoid, execution.placement(), &timeline.outages, now_ns);
                    execution.handle(WriteEvent::Placed { copy, node }, durability, now_ns);
                }
                WriteAction::ArmTimer { at_ns } => timer = Some(at_ns),
                _ => decided_ns = Some(now_ns),
            }
        }
        if decided_ns.is_some() {
            break;
        }
        // A copy's end before the timer at the same time, as the gateway's shell polls them.
        let next_end = ends.peek().map(|Reverse((at, ..))| *at);
        if next_end.is_some_and(|end_ns| timer.is_none_or(|timer_ns| end_ns <= timer_ns)) {
            let Reverse((at_ns, _, copy, durable)) = ends.pop().expect("peeked");
            now_ns = at_ns;
            if durable {
                landed_ns[copy] = Some(at_ns);
            }
            execution.handle(WriteEvent::Ended { copy, durable }, durability, now_ns);
        } else {
            now_ns = timer.take().expect("the core waits for a write or its timer");
            execution.handle(WriteEvent::TimerFired, durability, now_ns);
        }
    }
    let decided_ns = decided_ns.unwrap_or_else(|| panic!("a write of {copies} copies took more than {steps} steps"));
    // The pending copies land (or not) after the acknowledgement, the core no longer told.
    for Reverse((at_ns, _, copy, durable)) in ends.into_sorted_vec().into_iter().rev() {
        if durable {
            landed_ns[copy] = Some(at_ns);
        }
    }
    WriteOutput { actions, decided_ns, placement: execution.placement().to_vec(), landed_ns }
}

/// `count` independent writes of a stripe of `code`, unit u on node u, every service time drawn
/// Exp(`mean_ns`) afresh, no latency, no outage, under `settings`: their outputs.
pub fn exponential_writes(
    code: CodeSpec,
    settings: WriteSettings,
    mean_ns: f64,
    count: usize,
    seed: u64,
) -> Vec<WriteOutput> {
    let n = code.total_units() as u32;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let service_ns =
                (0..n).map(|_| (-(1.0 - rng.random::<f64>()).ln() * mean_ns).round().max(1.0) as u64).collect();
            run(&WriteTimeline {
                code: Some(code),
                placement: (0..n).collect(),
                to_write: vec![true; n as usize],
                service_ns,
                outages: Vec::new(),
                latency_ns: 0,
                settings,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
