//! Opt-Lazy (Hu et al. sections 2.3 and 3.1): every T, probe every node,
//! take the per-partition demand of the last T, solve problem (1) and keep
//! the resulting load-direction table; direct each request at random by it.
//!
//! Must not: probe per request; solve on the request path (the solve is the
//! [`RefreshWork`] of a refresh, which an executor runs without holding the policy).

use super::cost::{degraded_plan, normal_task, sampled_set, task_overhead_bytes};
use super::lazy::refresh_queue_table;
use crate::{ClusterView, ReadPolicy, RefreshResult, RefreshWork};
use model::{CodeLayout, NodeId, Placement, ReadPlan, ReadRequest};
use optimize::{LoadDirectionProblem, Objective, Solution, SolveLimits};
use rand::{Rng, RngCore};

/// Marks the normal read in a direction entry.
const NORMAL: u16 = u16::MAX;

/// The Opt-Lazy policy.
#[derive(Clone, Debug)]
pub struct OptLazy {
    period_ns: u64,
    objective: Objective,
    all_combinations: bool,
    /// Whether a task weighs its node's per-task overhead besides its bytes: then the queue table
    /// counts the queued tasks' overhead and each request adds its original node's overhead to its
    /// partition's demand (every option reads one task per request from each of its nodes, so
    /// the overhead is the same on every node of an option).
    count_task_overhead: bool,
    queue_table: Vec<f64>,
    /// Bytes requested per partition since the last refresh (own frontend).
    demand_bytes: Vec<f64>,
    /// `entry_starts[p]..entry_starts[p+1]`: partition p's directions;
    /// empty means "normal read".
    entry_starts: Vec<u32>,
    /// (recovery set index or [`NORMAL`], cumulative probability).
    entries: Vec<(u16, f64)>,
    /// Statistics of the last solve, for tests and reports.
    last_solve: Option<SolveSummary>,
}

/// What the last refresh's solve did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SolveSummary {
    /// Partitions with demand in the problem.
    pub partitions: usize,
    /// Sweeps the solver used.
    pub sweeps: u32,
    /// The final duality gap relative to the objective.
    pub relative_gap: f64,
}

impl OptLazy {
    /// Opt-Lazy refreshed every `period_ns`; `count_task_overhead` as in
    /// [`super::PerRequest::new`].
    pub fn new(period_ns: u64, objective: Objective, all_combinations: bool, count_task_overhead: bool) -> OptLazy {
        assert!(period_ns > 0);
        OptLazy {
            period_ns,
            objective,
            all_combinations,
            count_task_overhead,
            queue_table: Vec::new(),
            demand_bytes: Vec::new(),
            entry_starts: Vec::new(),
            entries: Vec::new(),
            last_solve: None,
        }
    }

    /// The last solve's statistics.
    pub fn last_solve(&self) -> Option<SolveSummary> {
        self.last_solve
    }

    /// Probability of serving partition `partition` by the normal read.
    pub fn normal_probability(&self, partition: u32) -> f64 {
        let p = partition as usize;
        if p + 1 >= self.entry_starts.len() {
            return 1.0;
        }
        let entries = &self.entries[self.entry_starts[p] as usize..self.entry_starts[p + 1] as usize];
        if entries.is_empty() {
            return 1.0;
        }
        let mut previous = 0.0;
        let mut normal = 0.0;
        for &(option, cumulative) in entries {
            if option == NORMAL {
                normal += cumulative - previous;
            }
            previous = cumulative;
        }
        normal
    }
}

impl ReadPolicy for OptLazy {
    fn name(&self) -> &'static str {
        "opt-lazy"
    }

    fn plan(
        &mut self,
        view: &mut dyn ClusterView,
        _now_ns: u64,
        request: &ReadRequest,
        rng: &mut dyn RngCore,
    ) -> ReadPlan {
        let placement = view.placement();
        // A live executor's placement grows as stripes are learnt: keep the demand counted so far.
        let partitions = placement.partition_count() as usize;
        if self.demand_bytes.len() < partitions {
            self.demand_bytes.resize(partitions, 0.0);
        }
        let location = placement.locate(request.partition);
        let original = placement.node_of(location.stripe, location.unit);
        self.demand_bytes[request.partition.index()] +=
            request.length as f64 + task_overhead_bytes(view, original, self.count_task_overhead);
        let p = request.partition.index();
        if p + 1 < self.entry_starts.len() {
            let entries = &self.entries[self.entry_starts[p] as usize..self.entry_starts[p + 1] as usize];
            if !entries.is_empty() {
                let draw: f64 = rng.random::<f64>() * entries.last().unwrap().1;
                let chosen =
                    entries.iter().find(|(_, cumulative)| draw < *cumulative).unwrap_or(entries.last().unwrap()).0;
                if chosen != NORMAL {
                    let set = &view.layout().recovery_sets(location.unit)[chosen as usize];
                    return degraded_plan(placement, location, request, set);
                }
            }
        }
        ReadPlan::normal(normal_task(placement, location, request))
    }

    fn refresh_period_ns(&self) -> Option<u64> {
        Some(self.period_ns)
    }

    /// Probes the queue table, takes the demand of the last T (which starts again from zero:
    /// requests planned while the work runs count towards the next period) and draws each
    /// demanded partition's degraded option. The work builds problem (1) from them, solves it and
    /// lays out the direction table, so the executor's lock is held only for the probes' answers
    /// and the draws.
    fn begin_refresh(
        &mut self,
        view: &mut dyn ClusterView,
        _now_ns: u64,
        rng: &mut dyn RngCore,
    ) -> Option<RefreshWork> {
        refresh_queue_table(view, &mut self.queue_table, self.count_task_overhead);
        let placement = view.placement();
        let layout = view.layout();
        let node_count = placement.node_count() as usize;
        let partitions = placement.partition_count() as usize;
        if self.demand_bytes.len() < partitions {
            self.demand_bytes.resize(partitions, 0.0);
        }
        let demand_bytes = std::mem::replace(&mut self.demand_bytes, vec![0.0; partitions]);
        let rates: Vec<f64> = (0..node_count as u32).map(|j| view.node_rate_bytes_per_s(NodeId(j))).collect();
        // The random part, drawn here in partition order so a seed decides the same table whether
        // the work runs at once or later: the one sampled recovery set of each demanded partition.
        let sampled_sets: Option<Vec<u16>> = (!self.all_combinations).then(|| {
            let demanded = demand_bytes.iter().enumerate().filter(|(_, demand)| **demand > 0.0);
            demanded
                .map(|(partition, _)| {
                    let location = placement.locate(model::PartitionId(partition as u32));
                    sampled_set(layout.recovery_sets(location.unit), rng) as u16
                })
                .collect()
        });
        let period_s = self.period_ns as f64 / model::NANOS_PER_SECOND as f64;
        let inputs = RefreshInputs {
            placement: placement.clone(),
            layout: layout.clone(),
            queue: self.queue_table.clone(),
            rates,
            demand_bytes,
            sampled_sets,
            // D_i of problem (1) is a rate, "the instantaneous total request size per second"
            // (section 2.3): bytes of the last T over T, times the frontends (each sees a uniform
            // share of the requests).
            demand_scale: view.frontend_count().max(1) as f64 / period_s,
            objective: self.objective,
        };
        Some(RefreshWork::new(move || inputs.solve()))
    }

    fn finish_refresh(&mut self, result: RefreshResult) {
        let directions: Directions =
            result.downcast().expect("opt-lazy installs only the directions its own work solved");
        self.entry_starts = directions.entry_starts;
        self.entries = directions.entries;
        self.last_solve = Some(directions.summary);
    }
}

/// A solved load-direction table, laid out as [`OptLazy`] keeps it.
struct Directions {
    entry_starts: Vec<u32>,
    entries: Vec<(u16, f64)>,
    summary: SolveSummary,
}

/// What a refresh's work needs, taken from the view and the policy under the executor's lock.
struct RefreshInputs {
    placement: Placement,
    layout: CodeLayout,
    /// Queue table (bytes per node).
    queue: Vec<f64>,
    /// Node rates, bytes per second.
    rates: Vec<f64>,
    /// Bytes requested per partition in the last T.
    demand_bytes: Vec<f64>,
    /// The sampled recovery set of each partition with demand, in partition order; `None`: every
    /// combination is an option.
    sampled_sets: Option<Vec<u16>>,
    /// Turns the bytes of the last T into problem (1)'s demand rate.
    demand_scale: f64,
    objective: Objective,
}

impl RefreshInputs {
    /// Builds problem (1), solves it and lays out each partition's directions.
    fn solve(self) -> Directions {
        let mean_rate = self.rates.iter().sum::<f64>() / self.rates.len() as f64;
        let relative_rates: Vec<f64> = self.rates.iter().map(|r| r / mean_rate).collect();
        let mut problem = LoadDirectionProblem::new(&self.queue, &relative_rates);
        // (partition, set indices of its options after the normal one)
        let mut chosen_sets: Vec<(usize, Vec<u16>)> = Vec::new();
        let mut option_nodes: Vec<Vec<u32>> = Vec::new();
        let mut sampled = self.sampled_sets.iter().flatten();
        for (partition, &demand) in self.demand_bytes.iter().enumerate() {
            if demand <= 0.0 {
                continue;
            }
            let location = self.placement.locate(model::PartitionId(partition as u32));
            let sets = self.layout.recovery_sets(location.unit);
            let set_indices: Vec<u16> = match self.sampled_sets {
                None => (0..sets.len() as u16).collect(),
                Some(_) => vec![*sampled.next().expect("a sampled set per demanded partition")],
            };
            option_nodes.clear();
            option_nodes.push(vec![self.placement.node_of(location.stripe, location.unit).0]);
            for &index in &set_indices {
                option_nodes.push(
                    sets[index as usize].units.iter().map(|&u| self.placement.node_of(location.stripe, u).0).collect(),
                );
            }
            problem.add_partition(demand * self.demand_scale, option_nodes.iter().map(|o| o.as_slice()));
            chosen_sets.push((partition, set_indices));
        }
        let solution = problem.solve(self.objective, SolveLimits::default());
        Directions::lay_out(&problem, &solution, &chosen_sets, self.demand_bytes.len())
    }
}

impl Directions {
    /// Each of the first `partitions` partitions' directions from `problem`'s `solution`;
    /// `chosen_sets[row]` = (partition, recovery-set indices of its options after the normal
    /// read) for the problem's rows, in partition order.
    fn lay_out(
        problem: &LoadDirectionProblem,
        solution: &Solution,
        chosen_sets: &[(usize, Vec<u16>)],
        partitions: usize,
    ) -> Directions {
        let summary = SolveSummary {
            partitions: problem.partition_count(),
            sweeps: solution.sweeps,
            relative_gap: if solution.objective > 0.0 { solution.gap / solution.objective } else { 0.0 },
        };
        let mut entry_starts = Vec::with_capacity(partitions + 1);
        let mut entries = Vec::new();
        entry_starts.push(0);
        let mut next = chosen_sets.iter().enumerate().peekable();
        for partition in 0..partitions {
            if let Some((row, (p, set_indices))) = next.peek()
                && *p == partition
            {
                let options = problem.options_of(*row);
                let mut cumulative = 0.0;
                for (position, option) in options.enumerate() {
                    let weight = solution.weights[option];
                    if weight <= 0.0 {
                        continue;
                    }
                    cumulative += weight;
                    let id = if position == 0 { NORMAL } else { set_indices[position - 1] };
                    entries.push((id, cumulative));
                }
                next.next();
            }
            entry_starts.push(entries.len() as u32);
        }
        Directions { entry_starts, entries, summary }
    }
}
