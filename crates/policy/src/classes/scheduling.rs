//! Xiang et al.'s probabilistic k-of-n scheduling as a read policy (`jlwo`): a read of a stripe in
//! class d asks k of its n units, drawn with the marginals π of (this frontend's rack, the stripe,
//! d) by the systematic sampler ([`super::Marginals`]), all k needed (`FirstKOfN { k }`), decoded
//! at the gateway when a parity unit is among them. The π table comes from JLWO
//! (`optimize::jlwo::solve`), run every refresh period off the request path over the stripes this
//! frontend saw requested, warm-started from the last solution and installed as Opt-Lazy's table
//! is ([`crate::ReadPolicy::begin_refresh`] hands out the solve as a [`crate::RefreshWork`]); until
//! a table exists, and for a stripe outside it, π is uniform (k/n: the oblivious baseline).
//!
//! What one frontend can solve: its own rack's demand (λ_{i,r,d} with i its rack; the paper's
//! JLWO is centralised and sees every rack's). Placement stays where the data is (JLWO's placement
//! step moves chunks, which a read policy cannot). The bandwidth JLWO reserves per class towards
//! each storage rack is handed out as that rack's class shares
//! ([`crate::ReadPolicy::node_class_shares`], [`super::RackClassShares`]): the executor installs
//! them on the rack's nodes. A stripe whose n units do not sit in n distinct racks (the paper's
//! model needs one chunk per rack) keeps uniform π.
//!
//! Must not: do I/O, read a clock (time and the refresh period come in as arguments), or draw
//! from any source but the caller's.

use std::collections::{BTreeMap, HashMap};

use model::{DecodeAt, NodeId, PlannedTask, Quorum, ReadPlan, ReadRequest, ReconstructionTopology, StripeId, TaskRole};
use optimize::jlwo::{self, FileDemand, Instance, JlwoLimits, Solution};
/// The moments types the settings hold, re-exported for callers that set them.
pub use optimize::jlwo::{ConnectionDelay, ServiceMoments};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use super::{Marginals, RackClassShares};
use crate::{ClusterView, ReadPolicy, RefreshResult, RefreshWork};

/// Most stripes one refresh solves for (the most requested first): bounds the solve's size.
pub const FILES_MAX: usize = 4096;
/// Most racks the policy models.
pub const RACKS_MAX: usize = 256;

/// What JLWO needs that the view does not say (docs/lab/xiang.md explains each).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JlwoReadSettings {
    /// C_d per class: how much the objective cares about class d (the paper's 1 and 0.4).
    pub class_weights: Vec<f64>,
    /// B, the aggregation switch's bandwidth shared by the inter-rack queues.
    pub aggregation_bandwidth_bps: f64,
    /// b, each rack's ToR bandwidth.
    pub tor_bandwidth_bps: f64,
    /// C, the most one queue may reserve (a port).
    pub queue_bandwidth_max_bps: f64,
    /// One unit's service time at bandwidth B (its moments).
    pub unit_service: ServiceMoments,
    /// Connection delay within a rack.
    pub connection_intra: ConnectionDelay,
    /// Connection delay between racks.
    pub connection_inter: ConnectionDelay,
    /// This frontend's rack.
    pub frontend_rack: u16,
    /// How often JLWO runs.
    pub refresh_period_ns: u64,
    /// ε of JLWO's stopping rule.
    pub tolerance_relative: f64,
    /// JLWO's iterations at most.
    pub iterations_max: u32,
}

impl Default for JlwoReadSettings {
    fn default() -> Self {
        JlwoReadSettings {
            class_weights: vec![1.0, 0.4],
            // Inter-rack reservations through a rack take from its ToR's b (eq. 3, corrected),
            // all of B when one rack asks for everything (one gateway): b > B leaves room.
            aggregation_bandwidth_bps: 10e9,
            tor_bandwidth_bps: 25e9,
            queue_bandwidth_max_bps: 1e9,
            // A 1.25 MB unit at B.
            unit_service: ServiceMoments::deterministic(0.001),
            connection_intra: ConnectionDelay { mean_s: 0.000_2, variance_s2: 0.0 },
            connection_inter: ConnectionDelay { mean_s: 0.000_5, variance_s2: 0.0 },
            frontend_rack: 0,
            refresh_period_ns: 10_000_000_000,
            tolerance_relative: 1e-3,
            iterations_max: 50,
        }
    }
}

impl JlwoReadSettings {
    /// Checks the settings; says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.class_weights.is_empty() || self.class_weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) {
            return Err("class_weights must be one finite, non-negative weight per class".into());
        }
        for (name, value) in [
            ("aggregation_bandwidth_bps", self.aggregation_bandwidth_bps),
            ("tor_bandwidth_bps", self.tor_bandwidth_bps),
            ("queue_bandwidth_max_bps", self.queue_bandwidth_max_bps),
        ] {
            if value.is_nan() || value <= 0.0 {
                return Err(format!("{name} must be positive, got {value}"));
            }
        }
        if usize::from(self.frontend_rack) >= RACKS_MAX {
            return Err(format!("frontend_rack must be below {RACKS_MAX}"));
        }
        if self.refresh_period_ns == 0 || self.iterations_max == 0 {
            return Err("refresh_period_ns and iterations_max must be positive".into());
        }
        Ok(())
    }
}

/// The (stripe, class) a π row belongs to.
type FileKey = (StripeId, u8);

/// What a refresh's solve returns: π rows for this frontend's rack, and the solution to warm-start
/// the next solve from.
struct Solved {
    rows: HashMap<FileKey, Marginals>,
    shares: RackClassShares,
    /// Per class, the racks a new stripe of it should go to (`None`: the class had no reads).
    new_stripe_racks: Vec<Option<Vec<u16>>>,
    solution: Option<(Vec<FileKey>, Solution)>,
    objective_s: f64,
    iterations: u32,
}

/// The policy; see the module documentation.
#[derive(Debug)]
pub struct JlwoRead {
    settings: JlwoReadSettings,
    /// Requests per (stripe, class) since the last refresh.
    counts: BTreeMap<FileKey, u64>,
    /// π over a stripe's n units, for this frontend's rack (validated when installed).
    rows: HashMap<FileKey, Marginals>,
    /// k/n over every unit: a stripe without a row (built at the first plan, from the code).
    uniform: Option<Marginals>,
    /// The last solution, by the files it was solved for (warm start).
    last: Option<(Vec<FileKey>, Solution)>,
    /// Each storage rack's class shares from the last solve (what this rack's reads reserve).
    shares: Option<RackClassShares>,
    /// Per class, the racks for a new stripe from the last solve.
    new_stripe_racks: Vec<Option<Vec<u16>>>,
    objective_s: f64,
    iterations: u32,
    refreshes: u64,
    /// Solves that installed nothing (a queue would saturate, or the ToRs cannot carry B).
    failed_solves: u64,
    /// Why the last solve installed nothing (`None` after one that installed).
    last_failure: Option<String>,
}

impl JlwoRead {
    /// A policy with `settings` (validated).
    pub fn new(settings: JlwoReadSettings) -> Result<JlwoRead, String> {
        settings.validate()?;
        Ok(JlwoRead {
            settings,
            counts: BTreeMap::new(),
            rows: HashMap::new(),
            uniform: None,
            last: None,
            shares: None,
            new_stripe_racks: Vec::new(),
            objective_s: 0.0,
            iterations: 0,
            refreshes: 0,
            failed_solves: 0,
            last_failure: None,
        })
    }

    /// π over `stripe`'s units for `class` as installed (`None`: uniform).
    pub fn marginals(&self, stripe: StripeId, class: u8) -> Option<&[f64]> {
        self.rows.get(&(stripe, class)).map(Marginals::pi)
    }

    /// The JLWO instance for what was requested since the last refresh: the most requested
    /// stripes whose units sit in distinct racks, each with its class.
    fn instance(&self, view: &dyn ClusterView, counts: &BTreeMap<FileKey, u64>) -> Option<(Vec<FileKey>, Instance)> {
        let placement = view.placement();
        let n = view.layout().total_units();
        let racks = (0..placement.node_count()).map(|j| usize::from(view.node_rack(NodeId(j))) + 1).max()?;
        let racks = racks.max(usize::from(self.settings.frontend_rack) + 1);
        if racks > RACKS_MAX || racks < n {
            return None;
        }
        let mut ranked: Vec<(&FileKey, &u64)> = counts.iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let period_s = self.settings.refresh_period_ns as f64 / 1e9;
        let mut keys = Vec::new();
        let mut files = Vec::new();
        for (&(stripe, class), &count) in ranked.into_iter().take(FILES_MAX) {
            let file_racks: Vec<u32> =
                placement.stripe_nodes(stripe).iter().map(|&node| u32::from(view.node_rack(node))).collect();
            let mut distinct = file_racks.clone();
            distinct.sort_unstable();
            distinct.dedup();
            if distinct.len() != n || usize::from(class) >= self.settings.class_weights.len() {
                continue;
            }
            let mut rates = vec![0.0; racks];
            rates[usize::from(self.settings.frontend_rack)] = count as f64 / period_s;
            keys.push((stripe, class));
            files.push(FileDemand { class: usize::from(class), racks: file_racks, request_rates_per_s: rates });
        }
        if files.is_empty() {
            return None;
        }
        let settings = &self.settings;
        let instance = Instance {
            rack_count: racks,
            aggregation_bandwidth_bps: settings.aggregation_bandwidth_bps,
            tor_bandwidth_bps: settings.tor_bandwidth_bps,
            queue_bandwidth_max_bps: settings.queue_bandwidth_max_bps,
            class_weights: settings.class_weights.clone(),
            service: settings.unit_service,
            connection: Instance::connection_intra_inter(racks, settings.connection_intra, settings.connection_inter),
            code_n: n,
            code_k: view.layout().data_units(),
            files,
        };
        Some((keys, instance))
    }
}

/// JLWO over `instance`, warm-started when the last solution was for the same files; π rows of
/// `rack` by file, validated here (off the request path; a row the sampler refuses is left out,
/// so its stripe is read uniformly). A failed solve (a queue that would saturate) installs nothing
/// and says why.
fn solve(
    keys: Vec<FileKey>,
    instance: Instance,
    last: Option<(Vec<FileKey>, Solution)>,
    limits: JlwoLimits,
    rack: usize,
) -> Result<Solved, String> {
    let warm = last.as_ref().filter(|(files, _)| *files == keys).map(|(_, solution)| solution);
    let outcome = jlwo::solve(&instance, &limits, warm)
        .map_err(|error| format!("JLWO over {} (stripe, class) pairs: {error}", keys.len()))?;
    let (racks, n, k) = (instance.rack_count, instance.code_n, instance.code_k);
    let classes = instance.class_count();
    let reserved = &outcome.evaluation.reserved_bps;
    let towards_rack: Vec<Vec<f64>> = (0..racks)
        .map(|storage| (0..classes).map(|class| reserved[(rack * racks + storage) * classes + class]).collect())
        .collect();
    let rows = keys
        .iter()
        .enumerate()
        .filter_map(|(file, key)| {
            let start = (file * racks + rack) * n;
            let row = Marginals::new(outcome.solution.schedule[start..start + n].to_vec(), k).ok()?;
            Some((*key, row))
        })
        .collect();
    let new_stripe_racks = (0..classes).map(|class| new_file_racks(&instance, &outcome.solution, class)).collect();
    Ok(Solved {
        rows,
        shares: RackClassShares::from_reserved_bps(&towards_rack),
        new_stripe_racks,
        objective_s: outcome.evaluation.objective,
        iterations: outcome.iterations,
        solution: Some((keys, outcome.solution)),
    })
}

/// The racks for a new stripe of `class`: JLWO's matching for a file read as the class's files
/// were on average (their mean request rates), `None` when the class had no reads to go by.
fn new_file_racks(instance: &Instance, solution: &Solution, class: usize) -> Option<Vec<u16>> {
    let of_class: Vec<&FileDemand> = instance.files.iter().filter(|file| file.class == class).collect();
    if of_class.is_empty() {
        return None;
    }
    let rates: Vec<f64> = (0..instance.rack_count)
        .map(|rack| of_class.iter().map(|file| file.request_rates_per_s[rack]).sum::<f64>() / of_class.len() as f64)
        .collect();
    let racks = jlwo::place_new_file(instance, solution, class, &rates).ok()?;
    racks.into_iter().map(|rack| u16::try_from(rack).ok()).collect()
}

impl ReadPolicy for JlwoRead {
    fn name(&self) -> &'static str {
        "jlwo"
    }

    fn plan(
        &mut self,
        view: &mut dyn ClusterView,
        _now_ns: u64,
        request: &ReadRequest,
        rng: &mut dyn RngCore,
    ) -> ReadPlan {
        let placement = view.placement();
        let layout = view.layout();
        let (n, k) = (layout.total_units(), layout.data_units());
        let stripe = placement.locate(request.partition).stripe;
        let key = (stripe, request.latency_class);
        *self.counts.entry(key).or_insert(0) += 1;
        let uniform = self.uniform.get_or_insert_with(|| Marginals::uniform(n, k).expect("a code has k ≤ n"));
        debug_assert_eq!((uniform.len(), uniform.k()), (n, k), "one code per policy");
        let marginals = self.rows.get(&key).unwrap_or(uniform);
        let mut chosen = Vec::with_capacity(k);
        marginals.sample(rng, &mut chosen);
        assert_eq!(chosen.len(), k, "the sampler draws k units");
        let tasks = chosen
            .into_iter()
            .map(|unit| {
                let unit = unit as u8;
                PlannedTask {
                    node: placement.node_of(stripe, unit),
                    unit,
                    offset: request.offset,
                    length: request.length,
                    role: if usize::from(unit) < k { TaskRole::Normal } else { TaskRole::Degraded },
                }
            })
            .collect();
        ReadPlan {
            tasks,
            quorum: Quorum::FirstKOfN { k: k as u16 },
            decode: DecodeAt::Gateway,
            topology: ReconstructionTopology::Gateway,
            deadline_ns: None,
        }
    }

    fn refresh_period_ns(&self) -> Option<u64> {
        Some(self.settings.refresh_period_ns)
    }

    fn refresh_reads_racks(&self) -> bool {
        true
    }

    fn refresh_probes_nodes(&self) -> bool {
        false
    }

    fn begin_refresh(
        &mut self,
        view: &mut dyn ClusterView,
        _now_ns: u64,
        _rng: &mut dyn RngCore,
    ) -> Option<RefreshWork> {
        let counts = std::mem::take(&mut self.counts);
        let (keys, instance) = self.instance(view, &counts)?;
        let limits = JlwoLimits {
            iterations_max: self.settings.iterations_max,
            tolerance_relative: self.settings.tolerance_relative,
            optimise_placement: false,
            ..JlwoLimits::default()
        };
        let last = self.last.clone();
        let rack = usize::from(self.settings.frontend_rack);
        Some(RefreshWork::new(move || solve(keys, instance, last, limits, rack)))
    }

    fn finish_refresh(&mut self, result: RefreshResult) {
        let solved =
            result.downcast::<Result<Solved, String>>().unwrap_or_else(|_| panic!("jlwo installs only its own work"));
        self.refreshes += 1;
        match solved {
            Ok(solved) => {
                self.last_failure = None;
                self.rows = solved.rows;
                self.shares = Some(solved.shares);
                self.new_stripe_racks = solved.new_stripe_racks;
                self.last = solved.solution;
                self.objective_s = solved.objective_s;
                self.iterations = solved.iterations;
            }
            Err(why) => {
                self.failed_solves += 1;
                self.last_failure = Some(why);
            }
        }
    }

    fn gauges(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("jlwo_objective_s", self.objective_s),
            ("jlwo_iterations", f64::from(self.iterations)),
            ("jlwo_refreshes", self.refreshes as f64),
            ("jlwo_files", self.rows.len() as f64),
            ("jlwo_failed_solves", self.failed_solves as f64),
        ]
    }

    fn node_class_shares(&self) -> Option<RackClassShares> {
        self.shares.clone()
    }

    fn refresh_failure(&self) -> Option<String> {
        self.last_failure.clone()
    }

    fn new_stripe_racks(&self, latency_class: u8) -> Option<Vec<u16>> {
        self.new_stripe_racks.get(usize::from(latency_class)).cloned().flatten()
    }
}

#[cfg(test)]
mod tests;
