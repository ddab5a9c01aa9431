//! Many seeds, at most `parallel` clusters at once, each in its own directory (`seed-S` under the
//! work directory) and on its own ports (every port of a swarm cluster is picked by the kernel),
//! and their sum: seeds, operations, faults by kind over every seed, violations with their seeds,
//! and the wall time.
//!
//! Owns the worker threads (one cluster each at a time) and the sum. Must not judge anything the
//! seed reports do not say.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde::Serialize;

use crate::Flavor;
use crate::run::{RunSettings, SeedReport, run_seed};

/// Which seeds, how many at once.
#[derive(Debug, Clone)]
pub struct BatchSettings {
    /// The first seed (seeds are consecutive).
    pub first_seed: u64,
    /// How many seeds.
    pub seeds: u64,
    /// Most clusters running at once (at least 1).
    pub parallel: usize,
    /// Whether seeds may run on etcd with two gateways ([`Flavor::of`]).
    pub etcd: bool,
}

/// What a batch did and found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BatchReport {
    /// The seeds run, in order.
    pub seeds: Vec<u64>,
    /// Seeds by cluster ([`Flavor::name`]).
    pub clusters: BTreeMap<String, u64>,
    /// Operations performed over every seed.
    pub operations: u64,
    /// Of them, answered 2xx.
    pub operations_ok: u64,
    /// Faults injected by kind, over every seed.
    pub faults: BTreeMap<String, u64>,
    /// Faults refused by kind and reason, over every seed.
    pub faults_refused: BTreeMap<String, u64>,
    /// Faults done otherwise than scheduled, and why, over every seed.
    pub faults_changed: BTreeMap<String, u64>,
    /// Reads checked over every seed.
    pub reads_checked: u64,
    /// Of each seed that had any, the keys whose data was lost as the store's answers allowed
    /// (acknowledged below full redundancy, more nodes faulted since than it survived).
    pub losses_allowed: BTreeMap<u64, Vec<String>>,
    /// The violations of each seed that had any.
    pub violations: BTreeMap<u64, Vec<String>>,
    /// Seeds that could not run (their cluster did not start), with the error.
    pub errors: BTreeMap<u64, String>,
    /// Seconds the whole batch took.
    pub wall_s: f64,
    /// Every seed's own report, by seed.
    pub reports: Vec<SeedReport>,
}

impl BatchReport {
    /// Whether every seed ran and found nothing wrong.
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && self.errors.is_empty()
    }

    fn add(&mut self, report: SeedReport) {
        *self.clusters.entry(report.cluster.clone()).or_default() += 1;
        for counts in report.ops.values() {
            self.operations += counts.ok + counts.failed;
            self.operations_ok += counts.ok;
        }
        sum_into(&mut self.faults, &report.faults);
        sum_into(&mut self.faults_refused, &report.faults_refused);
        sum_into(&mut self.faults_changed, &report.faults_changed);
        self.reads_checked += report.reads_checked;
        if !report.violations.is_empty() {
            self.violations.insert(report.seed, report.violations.clone());
        }
        if !report.losses_allowed.is_empty() {
            self.losses_allowed.insert(report.seed, report.losses_allowed.keys().cloned().collect());
        }
        self.reports.push(report);
    }
}

fn sum_into(total: &mut BTreeMap<String, u64>, counts: &BTreeMap<String, u64>) {
    for (kind, count) in counts {
        *total.entry(kind.clone()).or_default() += count;
    }
}

/// Runs the seeds of `batch`, `finished` told of each seed as it ends (its report, or its error).
pub fn run_batch(
    settings: &RunSettings,
    batch: &BatchSettings,
    finished: &(dyn Fn(u64, &anyhow::Result<SeedReport>) + Sync),
) -> BatchReport {
    let started = Instant::now();
    let next = AtomicU64::new(batch.first_seed);
    let end = batch.first_seed + batch.seeds;
    let outcomes: Mutex<Vec<(u64, anyhow::Result<SeedReport>)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..batch.parallel.clamp(1, batch.seeds.max(1) as usize) {
            scope.spawn(|| {
                // Each worker takes the next seed until none is left: at most `parallel` at once.
                loop {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= end {
                        break;
                    }
                    let outcome = run_seed(seed, settings, Flavor::of(seed, batch.etcd));
                    finished(seed, &outcome);
                    outcomes.lock().expect("outcomes lock").push((seed, outcome));
                }
            });
        }
    });
    let mut outcomes = outcomes.into_inner().expect("outcomes lock");
    outcomes.sort_by_key(|(seed, _)| *seed);
    let mut report = BatchReport::default();
    for (seed, outcome) in outcomes {
        report.seeds.push(seed);
        match outcome {
            Ok(seed_report) => report.add(seed_report),
            Err(error) => {
                report.errors.insert(seed, format!("{error:#}"));
            }
        }
    }
    report.wall_s = started.elapsed().as_secs_f64();
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_reports_add_up_by_kind_and_violations_keep_their_seed() {
        let mut batch = BatchReport::default();
        let mut one = SeedReport { seed: 1, cluster: "swarm".into(), ..SeedReport::default() };
        one.faults.insert("hang node <1s".into(), 2);
        one.ops.insert("put".into(), crate::run::OpCounts { ok: 5, failed: 1 });
        let mut two = SeedReport { seed: 2, cluster: "swarm".into(), ..SeedReport::default() };
        two.faults.insert("hang node <1s".into(), 3);
        two.faults.insert("fill disk".into(), 1);
        two.violations.push("k: read no object".into());
        batch.add(one);
        batch.add(two);
        assert_eq!(batch.faults["hang node <1s"], 5);
        assert_eq!(batch.faults["fill disk"], 1);
        assert_eq!((batch.operations, batch.operations_ok), (6, 5));
        assert_eq!(batch.violations.keys().copied().collect::<Vec<_>>(), vec![2]);
        assert_eq!(batch.clusters["swarm"], 2);
        assert!(!batch.passed());
    }
}
