//! EC-Store's access planning for reads of several blocks (Abebe et al., §IV-B, §V-B1), and the
//! baselines it is judged against: which units of each block a batch reads.
//!
//! - [`AccessKind::Random`]: `need` units of each block at random (the paper's EC, after
//!   EC-Cache; with a 1-of-3 replicated code, its R).
//! - [`AccessKind::DataFirst`]: the data units, parity only for units that are down (lowtail's
//!   normal read, the stronger baseline).
//! - [`AccessKind::Llf`], [`AccessKind::Lmlf`]: Hu et al.'s least-latency-first and
//!   least-marginal-load-first rules applied to a whole block: probe the nodes of the block's units
//!   (one parallel round per batch, each node once) and read the `need` units of least expected
//!   latency or least marginal load. For a whole block of an MDS code every k units are an option,
//!   so the rule's best option is its k best units. Each block is planned on its own (Hu et al.
//!   have no batches): the footing on which EC-Store's plans are compared with theirs.
//! - [`AccessKind::Cost`]: the plan of least cost by Eqs. 1–4 over a table of site costs in
//!   physical units (o_j = round trip + per-task overhead + queued bytes / rate, m_j = 1 / rate),
//!   refreshed on a period like the paper's periodic load-status requests. One block is solved
//!   exactly while deciding (the k cheapest units); a batch of several looks in the plan cache,
//!   and on a miss gets the greedy plan at once while the exact plan is handed out as background
//!   work ([`AccessPolicy::next_solve`]) and cached when it returns.
//!
//! Late binding (`extra_reads` = δ) reads `need` = k + δ units and completes at the first k; the
//! others run to their end (the paper's), or are cancelled (`cancel_extra`).
//!
//! Must not: do I/O, read a clock, or solve an exact plan of several blocks while deciding.

use crate::read::cost;
use crate::{ClusterView, RefreshResult, RefreshWork};
use model::{
    BatchPlan, BlockRead, DecodeAt, NodeId, PlanSource, PlannedTask, QueueState, Quorum, ReadPlan,
    ReconstructionTopology, StripeId, TaskRole,
};
use optimize::access_plan::{self, AccessInstance, AccessPlan, GreedyFill, SiteCost};
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Which units a batch reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccessKind {
    /// Units at random.
    Random,
    /// Data units, parity in place of units that are down.
    DataFirst,
    /// The least-cost plan of EC-Store's model.
    Cost,
    /// Hu et al.'s least latency first per block, from fresh probes.
    Llf,
    /// Hu et al.'s least marginal load first per block, from fresh probes.
    Lmlf,
}

/// How the greedy plan of a cache miss fills a block the sites it already uses cannot serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GreedyFillKind {
    /// At random (the paper's).
    Random,
    /// The cheapest sites by the cost table.
    Cheapest,
}

/// An access policy's settings (a field left out of a config takes its default).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccessSettings {
    /// Which units to read.
    pub kind: AccessKind,
    /// δ: units read beyond the k a block needs (late binding); 0: none.
    pub extra_reads: u8,
    /// Whether the reads still out when a block has its k are cancelled (the paper lets them run).
    pub cancel_extra: bool,
    /// How a cache miss's greedy plan fills blocks.
    pub greedy_fill: GreedyFillKind,
    /// Exact plans the cache holds; the oldest is dropped past it.
    pub cache_capacity: usize,
    /// Solves waiting for the background worker; a miss past it gets no solve (its greedy plan
    /// serves until a later miss).
    pub max_pending_solves: usize,
    /// How far (relative) a site's overhead may move from the table cached plans were solved
    /// under before they are stale (used, and re-solved): the paper's "reload", its threshold not
    /// published.
    pub reload_threshold: f64,
    /// Period of the load-status probes of every node (each refresh probes each node once).
    pub refresh_period_ns: u64,
    /// Time constant of the average the table keeps of each node's queue: the paper's o_j is "the
    /// average response time of periodic load-status requests", reported every 5–10 s; one probe's
    /// snapshot of a queue that changes every millisecond would send every plan to whichever nodes
    /// happened to be idle at that instant.
    pub load_average_ns: u64,
    /// The part of a site's overhead the view does not report: the network round trip.
    pub round_trip_ns: u64,
    /// Branch-and-bound nodes one solve may visit.
    pub node_budget: usize,
    /// Each block's plan gives up this long after it starts if it has not completed (the
    /// execution core's deadline: its reads are cancelled and the shell reads the block another
    /// way, the gateway by its robust read); 0: no deadline (the paper's model).
    pub block_deadline_ns: u64,
}

impl Default for AccessSettings {
    fn default() -> Self {
        AccessSettings {
            kind: AccessKind::Cost,
            extra_reads: 0,
            cancel_extra: false,
            greedy_fill: GreedyFillKind::Random,
            cache_capacity: 65_536,
            max_pending_solves: 1_024,
            reload_threshold: 0.25,
            refresh_period_ns: 250_000_000,
            load_average_ns: 5_000_000_000,
            round_trip_ns: 500_000,
            node_budget: 20_000,
            // The gateway's read timeout (`normal_timeout_ms`'s default), which bounded a batch's
            // node tasks before the deadline was the plan's.
            block_deadline_ns: 1_000_000_000,
        }
    }
}

impl AccessSettings {
    /// Checks the settings; returns what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.cache_capacity == 0 || self.max_pending_solves == 0 || self.node_budget == 0 {
            return Err("cache_capacity, max_pending_solves and node_budget must be at least 1".into());
        }
        if !(self.reload_threshold.is_finite() && self.reload_threshold >= 0.0) {
            return Err(format!("reload_threshold {} must be finite and not negative", self.reload_threshold));
        }
        if self.refresh_period_ns == 0 || self.load_average_ns == 0 {
            return Err("refresh_period_ns and load_average_ns must be positive".into());
        }
        Ok(())
    }

    /// The canonical name: `ec-random`, `ec-data`, `ec-cost`, with `-lbδ` for late binding and
    /// `-cancel` when extra reads are cancelled.
    pub fn name(&self) -> String {
        let base = match self.kind {
            AccessKind::Random => "ec-random",
            AccessKind::DataFirst => "ec-data",
            AccessKind::Cost => "ec-cost",
            AccessKind::Llf => "hu-llf",
            AccessKind::Lmlf => "hu-lmlf",
        };
        let lb = if self.extra_reads > 0 { format!("-lb{}", self.extra_reads) } else { String::new() };
        let cancel = if self.cancel_extra && self.extra_reads > 0 { "-cancel" } else { "" };
        format!("{base}{lb}{cancel}")
    }
}

/// Counters of what the policy decided, for gauges and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AccessCounters {
    /// Batches planned.
    pub batches: u64,
    /// Plans from the cache, fresh.
    pub cache_hits: u64,
    /// Plans from the cache, solved under costs that have moved since.
    pub stale_hits: u64,
    /// Greedy plans of cache misses.
    pub misses: u64,
    /// Misses and stale hits whose solve was not queued (the queue was full).
    pub solves_dropped: u64,
    /// Exact plans installed.
    pub solves_installed: u64,
    /// Cached plans found stale (a site they read had moved past the reload threshold).
    pub reloads: u64,
}

/// A cached exact plan: per block of its key (stripes ascending), the units read, the nodes they
/// were on and those nodes' overheads when it was solved.
#[derive(Clone, Debug)]
struct CachedPlan {
    reads: Vec<Vec<(u8, NodeId, f64)>>,
}

/// One exact solve for the background worker, as it leaves the policy.
struct Solve {
    key: Vec<u32>,
    instance: AccessInstance,
    /// Per block, per site of the instance's block: the unit and its node.
    units: Vec<Vec<(u8, NodeId)>>,
    budget: usize,
}

/// What a solve returns to [`AccessPolicy::finish_solve`].
struct Solved {
    key: Vec<u32>,
    plan: AccessPlan,
    reads: Vec<Vec<(u8, NodeId, f64)>>,
}

/// An EC-Store access policy: one per planner (the gateway's, or the simulator's frontend).
pub struct AccessPolicy {
    settings: AccessSettings,
    /// k of the code every block is read under.
    data_units: usize,
    /// Site costs (o_j, m_j in nanoseconds and nanoseconds per byte), by node; empty before the
    /// first refresh.
    table: Vec<SiteCost>,
    /// Each node's queue (bytes, tasks), averaged over `load_average_ns`, and when last probed.
    queue_average: Vec<(f64, f64)>,
    last_refresh_ns: Option<u64>,
    cache: BTreeMap<Vec<u32>, CachedPlan>,
    /// Cache keys, oldest first, for eviction.
    cache_order: VecDeque<Vec<u32>>,
    solves: VecDeque<Solve>,
    queued: BTreeSet<Vec<u32>>,
    counters: AccessCounters,
}

impl AccessPolicy {
    /// A policy for blocks of a code with `data_units` = k.
    pub fn new(settings: AccessSettings, data_units: usize) -> Result<AccessPolicy, String> {
        settings.validate()?;
        if data_units == 0 {
            return Err("a code has at least one data unit".into());
        }
        Ok(AccessPolicy {
            settings,
            data_units,
            table: Vec::new(),
            queue_average: Vec::new(),
            last_refresh_ns: None,
            cache: BTreeMap::new(),
            cache_order: VecDeque::new(),
            solves: VecDeque::new(),
            queued: BTreeSet::new(),
            counters: AccessCounters::default(),
        })
    }

    /// The canonical name.
    pub fn name(&self) -> String {
        self.settings.name()
    }

    /// The settings.
    pub fn settings(&self) -> &AccessSettings {
        &self.settings
    }

    /// The cost table (o_j in ns, m_j in ns per byte) by node; empty before the first refresh or
    /// plan of the cost policy.
    pub fn site_costs(&self) -> &[SiteCost] {
        &self.table
    }

    /// What the policy decided so far.
    pub fn counters(&self) -> AccessCounters {
        self.counters
    }

    /// How often the executor must call [`AccessPolicy::refresh`] (only the cost policy keeps a
    /// table).
    pub fn refresh_period_ns(&self) -> Option<u64> {
        (self.settings.kind == AccessKind::Cost).then_some(self.settings.refresh_period_ns)
    }

    /// Probes every node once (counted by the view), folds the answers into each node's average
    /// queue (an exponential average of time constant `load_average_ns`) and rebuilds the cost
    /// table from the averages. A cached plan is stale once a site it reads has moved past the
    /// reload threshold from its cost when the plan was solved.
    pub fn refresh(&mut self, view: &mut dyn ClusterView, now_ns: u64) {
        let nodes = view.placement().node_count() as usize;
        let weight = match self.last_refresh_ns {
            Some(last) if self.queue_average.len() == nodes => {
                let elapsed = now_ns.saturating_sub(last) as f64;
                1.0 - (-elapsed / self.settings.load_average_ns as f64).exp()
            }
            _ => 1.0,
        };
        self.queue_average.resize(nodes, (0.0, 0.0));
        for node in 0..nodes {
            let queue = view.probe(NodeId(node as u32));
            let average = &mut self.queue_average[node];
            average.0 += weight * (queue.bytes.min(1 << 50) as f64 - average.0);
            average.1 += weight * (f64::from(queue.tasks.min(1 << 20)) - average.1);
        }
        self.last_refresh_ns = Some(now_ns);
        self.table =
            (0..nodes).map(|node| self.site_cost(view, NodeId(node as u32), self.queue_average[node])).collect();
    }

    /// A site's costs in nanoseconds: o_j is what a probe's answer would take, the round trip and
    /// the node's per-task overhead after the work queued ahead (`queue`: bytes at its rate, and a
    /// per-task overhead for each task); m_j is 1 / its rate.
    fn site_cost(&self, view: &dyn ClusterView, node: NodeId, queue: (f64, f64)) -> SiteCost {
        let rate = view.node_rate_bytes_per_s(node).max(1.0);
        let task_ns = view.node_task_overhead_ns(node) as f64;
        let waiting_ns = queue.0 * 1e9 / rate + queue.1 * task_ns;
        let overhead = self.settings.round_trip_ns as f64 + task_ns + waiting_ns;
        SiteCost { overhead, per_byte: 1e9 / rate }
    }

    /// Whether planning probes the batch's nodes (Hu et al.'s rules): an executor charges the
    /// probe round trip before the plan's tasks leave, and one that cannot answer a probe at once
    /// (the gateway) first probes [`AccessPolicy::probe_targets`] in one parallel round.
    pub fn probes_per_batch(&self) -> bool {
        matches!(self.settings.kind, AccessKind::Llf | AccessKind::Lmlf)
    }

    /// The nodes [`AccessPolicy::plan_batch`] probes for `blocks`, each once, in probe order:
    /// the nodes of each block's available units, blocks in order. Empty for the kinds that do not
    /// probe. Depends only on the placement and the known-down nodes, never on probe answers.
    pub fn probe_targets(&self, view: &dyn ClusterView, blocks: &[BlockRead]) -> Vec<NodeId> {
        if !self.probes_per_batch() {
            return Vec::new();
        }
        let mut seen = BTreeSet::new();
        let mut targets = Vec::new();
        for block in blocks {
            let nodes = view.placement().stripe_nodes(block.stripe);
            for unit in self.available_units(view, block.stripe) {
                let node = nodes[usize::from(unit)];
                if seen.insert(node) {
                    targets.push(node);
                }
            }
        }
        targets
    }

    /// Plans a batch of distinct blocks: one read plan per block, in order.
    pub fn plan_batch(&mut self, view: &mut dyn ClusterView, blocks: &[BlockRead], rng: &mut dyn RngCore) -> BatchPlan {
        assert!(!blocks.is_empty(), "a batch reads at least one block");
        debug_assert!(distinct(blocks), "a batch names each block once");
        self.counters.batches += 1;
        match self.settings.kind {
            AccessKind::Random => self.plan_by_rule(view, blocks, |units, _| units.shuffle_with(rng)),
            AccessKind::DataFirst => self.plan_by_rule(view, blocks, |_, _| {}),
            AccessKind::Cost => self.plan_by_cost(view, blocks, rng),
            AccessKind::Llf | AccessKind::Lmlf => self.plan_by_probes(view, blocks),
        }
    }

    /// Hu et al.'s rules per block: every target probed once, then each block's units ranked by
    /// the rule's score of a task of its unit size on that node, unreachable nodes last.
    fn plan_by_probes(&mut self, view: &mut dyn ClusterView, blocks: &[BlockRead]) -> BatchPlan {
        let targets = self.probe_targets(view, blocks);
        let queues: BTreeMap<NodeId, QueueState> = targets.iter().map(|&node| (node, view.probe(node))).collect();
        let kind = self.settings.kind;
        let plans = blocks
            .iter()
            .map(|block| {
                let nodes = view.placement().stripe_nodes(block.stripe);
                let mut ranked: Vec<(f64, u8)> = self
                    .available_units(view, block.stripe)
                    .into_iter()
                    .filter_map(|unit| {
                        let node = nodes[usize::from(unit)];
                        let queue = queues[&node];
                        (queue != QueueState::UNREACHABLE).then(|| (probed_score(kind, view, node, queue, block), unit))
                    })
                    .collect();
                ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                let preferred: Vec<u8> = ranked.into_iter().map(|(_, unit)| unit).collect();
                self.block_plan(view, block, &preferred)
            })
            .collect();
        BatchPlan { blocks: plans, source: PlanSource::Rule, inline_solver_nodes: 0 }
    }

    /// Each block's available units in the order `order` leaves them, the first `need` read.
    fn plan_by_rule(
        &mut self,
        view: &mut dyn ClusterView,
        blocks: &[BlockRead],
        mut order: impl FnMut(&mut Vec<u8>, StripeId),
    ) -> BatchPlan {
        let plans = blocks
            .iter()
            .map(|block| {
                let mut units = self.available_units(view, block.stripe);
                order(&mut units, block.stripe);
                self.block_plan(view, block, &units)
            })
            .collect();
        BatchPlan { blocks: plans, source: PlanSource::Rule, inline_solver_nodes: 0 }
    }

    /// Units of `stripe` on nodes not known to be down, ascending.
    fn available_units(&self, view: &dyn ClusterView, stripe: StripeId) -> Vec<u8> {
        let nodes = view.placement().stripe_nodes(stripe);
        (0..nodes.len() as u8).filter(|&unit| !view.node_unavailable(nodes[usize::from(unit)])).collect()
    }

    fn need(&self, units: usize) -> usize {
        (self.data_units + usize::from(self.settings.extra_reads)).min(units)
    }

    /// The read plan of a block from its units in order of preference: the first `need` of them,
    /// the first k `Normal` and the rest `Extra`. A block with fewer than k units available reads
    /// every unit it has, and fails if too few answer.
    fn block_plan(&self, view: &dyn ClusterView, block: &BlockRead, preferred: &[u8]) -> ReadPlan {
        let k = self.data_units;
        let nodes = view.placement().stripe_nodes(block.stripe);
        let chosen: Vec<u8> = if preferred.len() < k {
            (0..nodes.len() as u8).collect()
        } else {
            preferred[..self.need(preferred.len())].to_vec()
        };
        let tasks: Vec<PlannedTask> = chosen
            .iter()
            .enumerate()
            .map(|(position, &unit)| PlannedTask {
                node: nodes[usize::from(unit)],
                unit,
                offset: 0,
                length: block.unit_bytes,
                role: if position < k { TaskRole::Normal } else { TaskRole::Extra },
            })
            .collect();
        let quorum = if tasks.len() == k {
            Quorum::All
        } else if self.settings.cancel_extra {
            Quorum::FirstKOfN { k: k as u16 }
        } else {
            Quorum::AnyK { k: k as u16 }
        };
        let decode = if tasks.iter().any(|t| usize::from(t.unit) >= k) { DecodeAt::Gateway } else { DecodeAt::None };
        let deadline_ns = (self.settings.block_deadline_ns > 0).then_some(self.settings.block_deadline_ns);
        ReadPlan { tasks, quorum, decode, topology: ReconstructionTopology::Gateway, deadline_ns }
    }

    fn plan_by_cost(&mut self, view: &mut dyn ClusterView, blocks: &[BlockRead], rng: &mut dyn RngCore) -> BatchPlan {
        if self.table.len() != view.placement().node_count() as usize {
            // Before the first refresh: the static part of the costs, no probe.
            let nodes = view.placement().node_count();
            self.table = (0..nodes).map(|node| self.site_cost(view, NodeId(node), (0.0, 0.0))).collect();
        }
        let mut order: Vec<usize> = (0..blocks.len()).collect();
        order.sort_by_key(|&i| blocks[i].stripe);
        let sorted: Vec<BlockRead> = order.iter().map(|&i| blocks[i]).collect();
        let (instance, units) = self.instance(view, &sorted);
        let (chosen, source, inline_nodes) = if sorted.len() == 1 {
            let plan = access_plan::solve_exact(&instance, self.settings.node_budget).expect("instance is valid");
            (units_of(&instance, &plan, &units), PlanSource::Exact, plan.nodes as u64)
        } else {
            self.cached_or_greedy(view, &sorted, instance, units, rng)
        };
        let mut plans: Vec<Option<ReadPlan>> = vec![None; blocks.len()];
        for (position, &original) in order.iter().enumerate() {
            let preferred = self.cheapest_first(&sorted[position], &chosen[position], view);
            plans[original] = Some(self.block_plan(view, &sorted[position], &preferred));
        }
        let blocks = plans.into_iter().map(|plan| plan.expect("every block planned")).collect();
        BatchPlan { blocks, source, inline_solver_nodes: inline_nodes }
    }

    /// The instance of `blocks` (stripes ascending) over the nodes that hold their available
    /// units, and per block the unit and node behind each of its sites, in the same order.
    fn instance(&self, view: &dyn ClusterView, blocks: &[BlockRead]) -> (AccessInstance, Vec<Vec<(u8, NodeId)>>) {
        let mut sites: Vec<SiteCost> = Vec::new();
        let mut site_of_node: BTreeMap<NodeId, usize> = BTreeMap::new();
        let mut reads = Vec::with_capacity(blocks.len());
        let mut units = Vec::with_capacity(blocks.len());
        for block in blocks {
            let nodes = view.placement().stripe_nodes(block.stripe);
            let mut block_sites = Vec::new();
            let mut block_units = Vec::new();
            for unit in self.available_units(view, block.stripe) {
                let node = nodes[usize::from(unit)];
                let site = *site_of_node.entry(node).or_insert_with(|| {
                    sites.push(self.table[node.index()]);
                    sites.len() - 1
                });
                block_sites.push(site);
                block_units.push((unit, node));
            }
            if block_sites.is_empty() {
                // No unit up: the block's plan reads every unit and fails; the solve sees one of
                // them so that the instance stays well formed.
                let node = nodes[0];
                let site = *site_of_node.entry(node).or_insert_with(|| {
                    sites.push(self.table[node.index()]);
                    sites.len() - 1
                });
                block_sites.push(site);
                block_units.push((0, node));
            }
            let need = self.need(block_sites.len());
            reads.push(access_plan::BlockRead { chunk_bytes: block.unit_bytes, sites: block_sites, need });
            units.push(block_units);
        }
        (AccessInstance { sites, blocks: reads }, units)
    }

    /// The cached exact plan of `blocks` if it still fits the placement (stale ones re-solved),
    /// else the greedy plan with the exact one queued: per block, the units read.
    fn cached_or_greedy(
        &mut self,
        view: &dyn ClusterView,
        blocks: &[BlockRead],
        instance: AccessInstance,
        units: Vec<Vec<(u8, NodeId)>>,
        rng: &mut dyn RngCore,
    ) -> (Vec<Vec<u8>>, PlanSource, u64) {
        let key: Vec<u32> = blocks.iter().map(|b| b.stripe.0).collect();
        if let Some(cached) = self.cache.get(&key)
            && self.still_placed(view, blocks, cached)
        {
            let chosen = cached.reads.iter().map(|reads| reads.iter().map(|&(unit, ..)| unit).collect()).collect();
            let source = if self.fresh(cached) {
                self.counters.cache_hits += 1;
                PlanSource::CacheHit
            } else {
                self.counters.stale_hits += 1;
                self.counters.reloads += 1;
                self.queue_solve(key, instance.clone(), units.clone());
                PlanSource::StaleHit
            };
            return (chosen, source, 0);
        }
        self.counters.misses += 1;
        let fill = match self.settings.greedy_fill {
            GreedyFillKind::Random => GreedyFill::Random(rng.next_u64()),
            GreedyFillKind::Cheapest => GreedyFill::Cheapest,
        };
        let plan = access_plan::greedy(&instance, fill).expect("instance is valid");
        let chosen = units_of(&instance, &plan, &units);
        self.queue_solve(key, instance, units);
        (chosen, PlanSource::Greedy, 0)
    }

    /// Whether every unit a cached plan reads is still on the node it was solved for, and up.
    fn still_placed(&self, view: &dyn ClusterView, blocks: &[BlockRead], cached: &CachedPlan) -> bool {
        blocks.iter().zip(&cached.reads).all(|(block, reads)| {
            let nodes = view.placement().stripe_nodes(block.stripe);
            reads.iter().all(|&(unit, node, _)| nodes[usize::from(unit)] == node && !view.node_unavailable(node))
        })
    }

    /// Whether every site a cached plan reads costs what it did when the plan was solved, within
    /// the reload threshold.
    fn fresh(&self, cached: &CachedPlan) -> bool {
        let threshold = self.settings.reload_threshold;
        cached.reads.iter().flatten().all(|&(_, node, overhead)| {
            (self.table[node.index()].overhead - overhead).abs() <= threshold * overhead.max(f64::MIN_POSITIVE)
        })
    }

    fn queue_solve(&mut self, key: Vec<u32>, instance: AccessInstance, units: Vec<Vec<(u8, NodeId)>>) {
        if self.queued.contains(&key) {
            return;
        }
        if self.solves.len() >= self.settings.max_pending_solves {
            self.counters.solves_dropped += 1;
            return;
        }
        self.queued.insert(key.clone());
        let solve = Solve { key, instance, units, budget: self.settings.node_budget };
        self.solves.push_back(solve);
    }

    /// Solves waiting for the background worker.
    pub fn pending_solves(&self) -> usize {
        self.solves.len()
    }

    /// The next exact solve, as work that needs neither the view nor the policy (an executor runs
    /// it off the read path and hands the result to [`AccessPolicy::finish_solve`]).
    pub fn next_solve(&mut self) -> Option<RefreshWork> {
        let Solve { key, instance, units, budget } = self.solves.pop_front()?;
        self.queued.remove(&key);
        Some(RefreshWork::new(move || {
            let plan = access_plan::solve_exact(&instance, budget).expect("instance is valid");
            let reads = plan
                .reads
                .iter()
                .zip(&instance.blocks)
                .zip(&units)
                .map(|((reads, block), units)| {
                    reads
                        .iter()
                        .map(|&site| {
                            let (unit, node) = unit_at(block, units, site);
                            (unit, node, instance.sites[site].overhead)
                        })
                        .collect()
                })
                .collect();
            Solved { key, plan, reads }
        }))
    }

    /// Branch-and-bound nodes a solve's result visited (what an executor charges it for), or
    /// `None` for a result that is not a solve of this policy.
    pub fn solve_nodes(result: &RefreshResult) -> Option<usize> {
        result.peek::<Solved>().map(|solved| solved.plan.nodes)
    }

    /// Installs a solved plan in the cache (dropping the oldest past the capacity).
    pub fn finish_solve(&mut self, result: RefreshResult) {
        let Ok(Solved { key, reads, .. }) = result.downcast::<Solved>() else {
            panic!("{} was handed a result it did not ask for", self.name());
        };
        self.counters.solves_installed += 1;
        if self.cache.insert(key.clone(), CachedPlan { reads }).is_none() {
            self.cache_order.push_back(key);
        }
        while self.cache.len() > self.settings.cache_capacity {
            let Some(oldest) = self.cache_order.pop_front() else { break };
            self.cache.remove(&oldest);
        }
    }

    /// A block's chosen units, cheapest site first by the cost table (so the k `Normal` reads are
    /// the cheapest and late binding's extra ones the dearest).
    fn cheapest_first(&self, block: &BlockRead, chosen: &[u8], view: &dyn ClusterView) -> Vec<u8> {
        let nodes = view.placement().stripe_nodes(block.stripe);
        let mut ranked: Vec<(f64, u8)> = chosen
            .iter()
            .map(|&unit| {
                let site = self.table[nodes[usize::from(unit)].index()];
                (site.overhead + site.per_byte * block.unit_bytes as f64, unit)
            })
            .collect();
        ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        ranked.into_iter().map(|(_, unit)| unit).collect()
    }

    /// Named numbers for an executor's metrics and reports.
    pub fn gauges(&self) -> Vec<(&'static str, f64)> {
        let c = self.counters;
        vec![
            ("batches", c.batches as f64),
            ("cache_hits", c.cache_hits as f64),
            ("stale_hits", c.stale_hits as f64),
            ("misses", c.misses as f64),
            ("solves_dropped", c.solves_dropped as f64),
            ("solves_installed", c.solves_installed as f64),
            ("reloads", c.reloads as f64),
            ("cached_plans", self.cache.len() as f64),
            ("pending_solves", self.solves.len() as f64),
        ]
    }
}

/// Hu et al.'s score of reading a unit of `block` from `node` with queue `queue`, the per-task
/// overhead counted in bytes at the node's rate (lowtail's `count_task_overhead`: the cost model
/// it is compared with counts it too). LLF: the task's expected latency (Q + D) / S; LMLF: the
/// marginal load D·(Q + D/2) / S, Eq. (6).
fn probed_score(kind: AccessKind, view: &dyn ClusterView, node: NodeId, queue: QueueState, block: &BlockRead) -> f64 {
    let rate = view.node_rate_bytes_per_s(node).max(1.0);
    let overhead = cost::task_overhead_bytes(view, node, true);
    let queued = cost::queued_load(queue, overhead);
    let task = block.unit_bytes as f64 + overhead;
    match kind {
        AccessKind::Llf => (queued + task) / rate,
        AccessKind::Lmlf => cost::marginal_load(task, queued, rate),
        other => unreachable!("{other:?} does not probe"),
    }
}

/// The unit behind site `site` of `block` (`units` aligned with the block's sites).
fn unit_at(block: &access_plan::BlockRead, units: &[(u8, NodeId)], site: usize) -> (u8, NodeId) {
    let position = block.sites.iter().position(|&s| s == site).expect("a plan reads a block at its own sites");
    units[position]
}

/// Per block, the units a plan of `instance` reads.
fn units_of(instance: &AccessInstance, plan: &AccessPlan, units: &[Vec<(u8, NodeId)>]) -> Vec<Vec<u8>> {
    plan.reads
        .iter()
        .zip(&instance.blocks)
        .zip(units)
        .map(|((reads, block), units)| reads.iter().map(|&site| unit_at(block, units, site).0).collect())
        .collect()
}

fn distinct(blocks: &[BlockRead]) -> bool {
    let set: BTreeSet<StripeId> = blocks.iter().map(|b| b.stripe).collect();
    set.len() == blocks.len()
}

trait ShuffleWith {
    fn shuffle_with(&mut self, rng: &mut dyn RngCore);
}

impl ShuffleWith for Vec<u8> {
    /// Fisher-Yates with the policy's random source.
    fn shuffle_with(&mut self, rng: &mut dyn RngCore) {
        for i in (1..self.len()).rev() {
            let j = rng.random_range(0..=i);
            self.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests;
