//! Hedged: a normal read that goes around slow nodes and hedges the rest after an adaptive delay.
//! The tail-at-scale answer to a node that is slow but not dead (Dean and Barroso's hedged
//! requests, with Hu et al.'s proactive degraded read as the way around): no probes, only what the
//! frontend's own reads showed.
//!
//! - *Hedge delay.* A request's normal task runs; if it has not finished after the delay, a
//!   recovery set is read as well and the first to finish serves (Normal's quorum). The delay is a
//!   high quantile (`hedge_quantile`, default p99) of this frontend's recent normal reads of the
//!   same size class, times `hedge_multiplier`, within [`hedge_min_ms`, `normal_timeout_ms`]:
//!   healthy reads almost never hedge, a stalled one hedges after about the healthy tail.
//! - *Slow nodes.* Each node keeps a moving average of how often its normal tasks overran the
//!   hedge delay (or failed). A node whose average exceeds `slow_share` is avoided: its requests
//!   become proactive degraded reads of a recovery set without avoided nodes, and no recovery set
//!   is drawn through it. Healthy nodes overrun about 1 − quantile of the time; a node stopped most
//!   of every period overruns most of it.
//! - *Exploration.* An avoided node gets one hedged normal read at most every `explore_ms`, so
//!   that its average follows it back when it recovers; a node the executor knows is unavailable
//!   is avoided without exploring.
//! - *Copies.* A read it does not plan, any copy of which serves (a small object's replicas while
//!   its stripe is open), tries avoided nodes last and each copy for the hedge delay only.
//!
//! Must not: probe, read a clock (time comes as `now_ns`), or keep unbounded state (a fixed ring of
//! latencies per size class, one average per node).

use super::cost::{normal_task, sampled_set, set_tasks};
use crate::{ClusterView, ReadPolicy};
use codec::CodeSpec;
use model::{
    DecodeAt, NEVER, NodeId, Outcome, PlannedTask, Quorum, ReadPlan, ReadRequest, ReconstructionTopology, RecoverySet,
    RequestRecord, StripeId, TaskRecord, TaskRole,
};
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// Latencies kept per size class for the hedge delay.
const LATENCY_RING: usize = 512;
/// Fewest latencies of a size class before its quantile replaces the longest delay.
const MIN_SAMPLES: usize = 32;
/// Size classes by the request's length: up to 16 KiB, 128 KiB, 1 MiB, beyond.
const SIZE_CLASS_LIMITS: [u64; 3] = [16 << 10, 128 << 10, 1 << 20];
/// Weight of one observation in a node's moving overrun share.
const OVERRUN_WEIGHT: f64 = 0.1;
/// The hedge delay is recomputed after this many new latencies of its class.
const RECOMPUTE_EVERY: u32 = 16;

/// The settings of [`Hedged`] (`[controller.settings.hedged]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HedgedSettings {
    /// The quantile of recent normal-read latencies the hedge delay starts from.
    pub hedge_quantile: f64,
    /// The hedge delay is the quantile times this.
    pub hedge_multiplier: f64,
    /// Shortest hedge delay, in milliseconds.
    pub hedge_min_ms: f64,
    /// A node whose normal tasks overran the hedge delay (or failed) more than this share of the
    /// time, as a moving average, is avoided.
    pub slow_share: f64,
    /// An avoided node gets a hedged normal read at most this often, in milliseconds.
    pub explore_ms: u64,
}

impl Default for HedgedSettings {
    fn default() -> HedgedSettings {
        HedgedSettings {
            hedge_quantile: 0.99,
            hedge_multiplier: 1.5,
            hedge_min_ms: 1.0,
            slow_share: 0.3,
            explore_ms: 200,
        }
    }
}

impl HedgedSettings {
    /// Refuses settings that cannot work, saying which.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.5..1.0).contains(&self.hedge_quantile) {
            return Err(format!("hedge_quantile must be in [0.5, 1), not {}", self.hedge_quantile));
        }
        if !(self.hedge_multiplier >= 1.0 && self.hedge_multiplier <= 100.0) {
            return Err(format!("hedge_multiplier must be 1 to 100, not {}", self.hedge_multiplier));
        }
        if !(self.hedge_min_ms > 0.0 && self.hedge_min_ms <= 60_000.0) {
            return Err(format!("hedge_min_ms must be above 0 and at most 60000, not {}", self.hedge_min_ms));
        }
        if !(self.slow_share > 0.0 && self.slow_share < 1.0) {
            return Err(format!("slow_share must be in (0, 1), not {}", self.slow_share));
        }
        if self.explore_ms == 0 {
            return Err("explore_ms must be at least 1".into());
        }
        Ok(())
    }
}

/// Recent normal-read latencies of one size class, and the delay they give.
#[derive(Clone, Debug)]
struct SizeClass {
    latencies_ns: Vec<u64>,
    next: usize,
    since_recompute: u32,
    delay_ns: u64,
}

impl SizeClass {
    fn new(longest_ns: u64) -> SizeClass {
        SizeClass { latencies_ns: Vec::with_capacity(LATENCY_RING), next: 0, since_recompute: 0, delay_ns: longest_ns }
    }

    fn push(&mut self, latency_ns: u64) {
        if self.latencies_ns.len() < LATENCY_RING {
            self.latencies_ns.push(latency_ns);
        } else {
            self.latencies_ns[self.next] = latency_ns;
        }
        self.next = (self.next + 1) % LATENCY_RING;
        self.since_recompute += 1;
    }
}

/// What one node's normal tasks did lately.
#[derive(Clone, Copy, Debug, Default)]
struct NodeHistory {
    /// Moving share of normal tasks that overran the hedge delay or failed.
    overrun_share: f64,
    /// When it last got a normal read while avoided (`None`: never).
    last_explore_ns: Option<u64>,
}

/// The Hedged policy.
#[derive(Clone, Debug)]
pub struct Hedged {
    settings: HedgedSettings,
    longest_ns: u64,
    classes: Vec<SizeClass>,
    nodes: Vec<NodeHistory>,
}

impl Hedged {
    /// The policy with `settings`; `longest_ns` bounds the hedge delay (and is the delay until a
    /// size class has seen enough reads).
    pub fn new(settings: HedgedSettings, longest_ns: u64) -> Hedged {
        assert!(longest_ns > 0, "a zero longest delay would hedge every read");
        let classes = vec![SizeClass::new(longest_ns); SIZE_CLASS_LIMITS.len() + 1];
        Hedged { settings, longest_ns, classes, nodes: Vec::new() }
    }

    fn class_of(length: u64) -> usize {
        SIZE_CLASS_LIMITS.iter().position(|&limit| length <= limit).unwrap_or(SIZE_CLASS_LIMITS.len())
    }

    fn history(&mut self, node: NodeId) -> &mut NodeHistory {
        let index = node.0 as usize;
        if self.nodes.len() <= index {
            self.nodes.resize(index + 1, NodeHistory::default());
        }
        &mut self.nodes[index]
    }

    fn is_slow(&self, node: NodeId) -> bool {
        self.nodes.get(node.0 as usize).is_some_and(|history| history.overrun_share > self.settings.slow_share)
    }

    fn avoided(&self, view: &dyn ClusterView, node: NodeId) -> bool {
        view.node_unavailable(node) || self.is_slow(node)
    }

    /// The hedge delay of requests of `length` bytes.
    pub fn delay_ns(&self, length: u64) -> u64 {
        self.classes[Self::class_of(length)].delay_ns
    }

    /// Whether `node` is avoided now (for tests and status).
    pub fn avoids(&self, node: NodeId) -> bool {
        self.is_slow(node)
    }

    fn recompute(&mut self, class: usize) {
        let min_ns = (self.settings.hedge_min_ms * 1e6) as u64;
        let size = &mut self.classes[class];
        size.since_recompute = 0;
        if size.latencies_ns.len() < MIN_SAMPLES {
            return;
        }
        let mut sorted = size.latencies_ns.clone();
        sorted.sort_unstable();
        let at = ((sorted.len() as f64 * self.settings.hedge_quantile) as usize).min(sorted.len() - 1);
        let delay = (sorted[at] as f64 * self.settings.hedge_multiplier) as u64;
        size.delay_ns = delay.clamp(min_ns.min(self.longest_ns), self.longest_ns);
    }

    /// Whether an avoided `node` is due a hedged normal read (never when the executor knows it
    /// unavailable).
    fn explore_due(&self, view: &dyn ClusterView, node: NodeId, now_ns: u64) -> bool {
        if view.node_unavailable(node) {
            return false;
        }
        let interval_ns = self.settings.explore_ms.saturating_mul(1_000_000);
        let last = self.nodes.get(node.0 as usize).and_then(|history| history.last_explore_ns);
        last.is_none_or(|last| now_ns.saturating_sub(last) >= interval_ns)
    }

    /// Whether a read of an avoided `node` should explore it now (and note that it did).
    fn explore(&mut self, view: &dyn ClusterView, node: NodeId, now_ns: u64) -> bool {
        let due = self.explore_due(view, node, now_ns);
        if due {
            self.history(node).last_explore_ns = Some(now_ns);
        }
        due
    }

    /// Whether `node` is gone around now: avoided and not due an exploration.
    fn goes_around(&self, view: &dyn ClusterView, node: NodeId, now_ns: u64) -> bool {
        self.avoided(view, node) && !self.explore_due(view, node, now_ns)
    }

    /// The recovery set to read instead of (or after) the normal unit: the sampled one when it
    /// avoids every avoided node, else the one with the fewest avoided nodes (the first of equals).
    fn pick_set(&self, view: &dyn ClusterView, sets: &[RecoverySet], stripe_nodes: &[NodeId], sampled: usize) -> usize {
        let avoided_in = |set: &RecoverySet| {
            set.units.iter().filter(|&&unit| self.avoided(view, stripe_nodes[unit as usize])).count()
        };
        if avoided_in(&sets[sampled]) == 0 {
            return sampled;
        }
        (0..sets.len()).min_by_key(|&at| avoided_in(&sets[at])).expect("a unit has at least one recovery set")
    }
}

impl ReadPolicy for Hedged {
    fn name(&self) -> &'static str {
        "hedged"
    }

    fn plan(
        &mut self,
        view: &mut dyn ClusterView,
        now_ns: u64,
        request: &ReadRequest,
        rng: &mut dyn RngCore,
    ) -> ReadPlan {
        let placement = view.placement();
        let location = placement.locate(request.partition);
        let normal = normal_task(placement, location, request);
        let sets = view.layout().recovery_sets(location.unit);
        let sampled = sampled_set(sets, rng);
        // Only the chosen set is copied: the plan outlives the view's borrow.
        let set = sets[self.pick_set(&*view, sets, placement.stripe_nodes(location.stripe), sampled)].clone();
        let placement = view.placement();
        let go_around = self.avoided(&*view, normal.node) && !self.explore(&*view, normal.node, now_ns);
        if go_around {
            let tasks = set_tasks(placement, location, request, &set, TaskRole::Degraded).collect();
            return ReadPlan::degraded(tasks);
        }
        let mut tasks = Vec::with_capacity(1 + set.units.len());
        tasks.push(normal);
        tasks.extend(set_tasks(placement, location, request, &set, TaskRole::Fallback));
        ReadPlan {
            tasks,
            quorum: Quorum::NormalThenFallback { timeout_ns: self.delay_ns(request.length) },
            decode: DecodeAt::Gateway,
            topology: ReconstructionTopology::Gateway,
            deadline_ns: None,
        }
    }

    fn wants_row(&self, view: &dyn ClusterView, now_ns: u64, stripe: StripeId, units: Range<u8>) -> bool {
        // A row of two units reads no fewer units as one plan (k + 1) than unit by unit (1 + k).
        let mds = matches!(view.layout().spec(), CodeSpec::Rs { .. });
        let nodes = view.placement().stripe_nodes(stripe);
        mds && units.len() > 2 && units.clone().any(|unit| self.goes_around(view, nodes[usize::from(unit)], now_ns))
    }

    /// The row's data units that are not gone around, then other units (data first, the parities
    /// from a random one on, to spread them) to k, and one spare when a node is gone around for
    /// being slow: done at the first k (any k units of an RS stripe give every data unit). One
    /// plan reads k (+ 1) units where a plan per unit reads the row's other units once more for
    /// each recovery set. The spare hedges a judgement of slowness (what slowed one node, a
    /// shared disk or switch, may slow its peers); a Down node says nothing of its peers, and a
    /// spare read beside a healthy row costs every such read one more unit of work.
    fn plan_row(
        &mut self,
        view: &mut dyn ClusterView,
        now_ns: u64,
        request: &ReadRequest,
        units: Range<u8>,
        rng: &mut dyn RngCore,
    ) -> ReadPlan {
        let (k, n) = (view.layout().data_units(), view.layout().total_units());
        let placement = view.placement();
        let location = placement.locate(request.partition);
        assert_eq!(location.unit, units.start, "the request names the row's first unit");
        let nodes = placement.stripe_nodes(location.stripe);
        let first_parity = rng.random_range(k..n);
        let rest = (0..k).chain(first_parity..n).chain(k..first_parity);
        let order = units.clone().map(usize::from).chain(rest.filter(|unit| !units.contains(&(*unit as u8))));
        let gone: Vec<bool> = nodes.iter().map(|&node| self.goes_around(&*view, node, now_ns)).collect();
        let around_slow = (0..n).any(|unit| gone[unit] && !view.node_unavailable(nodes[unit]));
        let mut chosen: Vec<usize> = order.filter(|&unit| !gone[unit]).collect();
        chosen.truncate(k + usize::from(around_slow));
        let tasks: Vec<PlannedTask> = chosen
            .iter()
            .map(|&unit| PlannedTask {
                node: nodes[unit],
                unit: unit as u8,
                offset: request.offset,
                length: request.length,
                role: if units.contains(&(unit as u8)) { TaskRole::Normal } else { TaskRole::Degraded },
            })
            .collect();
        // Fewer than k units not gone around: all of them, and the executor's fallback for the rest.
        let quorum = Quorum::FirstKOfN { k: k.min(tasks.len()) as u16 };
        ReadPlan {
            tasks,
            quorum,
            decode: DecodeAt::Gateway,
            topology: ReconstructionTopology::Gateway,
            deadline_ns: None,
        }
    }

    fn observe(&mut self, request: &RequestRecord, tasks: &[TaskRecord]) {
        let mut normals = tasks.iter().filter(|task| task.role == TaskRole::Normal);
        let Some(normal) = normals.next() else { return };
        if normals.next().is_some() {
            // A row plan's: no one node's read stood for the request's latency.
            return;
        }
        let overran = request.timed_out || normal.failed || request.outcome != Outcome::Ok;
        let history = self.history(normal.node);
        history.overrun_share += OVERRUN_WEIGHT * (f64::from(u8::from(overran)) - history.overrun_share);
        // A normal read that served without a hedge: its whole latency at the frontend.
        let served_plainly = !overran && !request.degraded && request.completion_ns != NEVER;
        if served_plainly {
            let class = Self::class_of(request.bytes);
            let latency_ns = request.completion_ns.saturating_sub(request.decision_end_ns);
            self.classes[class].push(latency_ns);
            if self.classes[class].since_recompute >= RECOMPUTE_EVERY {
                self.recompute(class);
            }
        }
    }

    fn copy_wait_ns(&self, length: u64) -> Option<u64> {
        Some(self.delay_ns(length))
    }

    fn tries_last(&self, node: NodeId) -> bool {
        self.is_slow(node)
    }

    fn gauges(&self) -> Vec<(&'static str, f64)> {
        let avoided = (0..self.nodes.len()).filter(|&node| self.is_slow(NodeId(node as u32))).count();
        vec![
            ("hedged_nodes_avoided", avoided as f64),
            ("hedged_delay_ms_small", self.classes[0].delay_ns as f64 / 1e6),
            ("hedged_delay_ms_large", self.classes[SIZE_CLASS_LIMITS.len() - 1].delay_ns as f64 / 1e6),
        ]
    }
}
