//! EC-Store's chunk mover, the deciding half (Abebe et al., §IV-C, §IV-D, §V-A): the statistics it
//! keeps (co-access over a sliding window of sampled batches, each node's load) and the move it
//! proposes, Algorithm 1 ([`optimize::movement::select_move`]) over candidate blocks drawn in
//! proportion to their reads. Executors carry a proposal out (copy the unit, switch the placement,
//! release the old copy) at no more than their move rate.
//!
//! Unpublished, chosen here (and swept by the experiment): the sampling rate, the candidate and
//! partner counts, the evaluation budget, and how a move shifts load: a unit carries its block's
//! read rate over the window × its bytes × k / n (a read takes k of the n units), which leaves the
//! source for the destination.
//!
//! Must not: do I/O, read a clock, or move anything itself.

use super::coaccess::CoAccess;
use crate::ClusterView;
use model::{NodeId, StripeId};
use optimize::access_plan::SiteCost;
use optimize::movement::{self, BlockState, MoveWeights, MovementState};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Where a moved unit may go among racks, so a move keeps what placement promised: the executor
/// derives it from its placement (the mover's statistics know nothing of racks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RackRule {
    /// Any node (placement made no promise about racks).
    Free,
    /// Never more of a stripe's units in one rack than before the move (rack-aware placement: one
    /// unit per rack stays one unit per rack).
    Spread,
    /// Only within the unit's own rack (a placement that chose each stripe's racks, as JLWO's
    /// matching does, whose per-rack read shares then still apply).
    Stay,
}

impl RackRule {
    /// Whether moving the unit on `from` of a stripe on `nodes` to `to` keeps the rule.
    pub fn allows(self, view: &dyn ClusterView, nodes: &[NodeId], from: NodeId, to: NodeId) -> bool {
        let rack = |node: NodeId| view.node_rack(node);
        match self {
            RackRule::Free => true,
            RackRule::Stay => rack(to) == rack(from),
            RackRule::Spread => {
                let in_rack =
                    |r: u16, skip: Option<NodeId>| nodes.iter().filter(|&&n| Some(n) != skip && rack(n) == r).count();
                let most_before = nodes.iter().map(|&n| in_rack(rack(n), None)).max().unwrap_or(0);
                in_rack(rack(to), Some(from)) < most_before
            }
        }
    }
}

/// The mover's settings (a field left out of a config takes its default).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MoverSettings {
    /// Most moves started per second (the paper's "less than one chunk per second").
    pub max_moves_per_s: f64,
    /// Sampled batches the co-access window holds (the paper's 5 000).
    pub window: usize,
    /// One batch in `sample_every` is sampled.
    pub sample_every: u32,
    /// Blocks of a sampled batch counted (its pairs grow with the square).
    pub max_blocks_per_batch: usize,
    /// Candidate blocks per proposal.
    pub candidates: usize,
    /// Partners per candidate (the most likely) whose pair costs E sums.
    pub max_partners: usize,
    /// Moves scored per proposal (Algorithm 1 is anytime).
    pub max_evaluations: usize,
    /// w1 of Eq. 8.
    pub access_weight: f64,
    /// w2 of Eq. 8 as a multiple of the average site overhead (the paper's best: 3 where the
    /// average overhead was 5, so 0.6).
    pub balance_weight_per_overhead: f64,
}

impl Default for MoverSettings {
    fn default() -> Self {
        MoverSettings {
            max_moves_per_s: 1.0,
            window: CoAccess::PAPER_WINDOW,
            sample_every: 1,
            max_blocks_per_batch: 16,
            candidates: 8,
            max_partners: 16,
            max_evaluations: 2_000,
            access_weight: 1.0,
            balance_weight_per_overhead: 0.6,
        }
    }
}

impl MoverSettings {
    /// Checks the settings; returns what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.max_moves_per_s.is_finite() && self.max_moves_per_s > 0.0) {
            return Err(format!("max_moves_per_s {} must be positive", self.max_moves_per_s));
        }
        if self.window == 0
            || self.sample_every == 0
            || self.max_blocks_per_batch < 2
            || self.candidates == 0
            || self.max_evaluations == 0
        {
            return Err("window, sample_every, candidates and max_evaluations must be positive, \
                        max_blocks_per_batch at least 2"
                .into());
        }
        let weights = [self.access_weight, self.balance_weight_per_overhead];
        if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) {
            return Err("the weights must be finite and not negative".into());
        }
        Ok(())
    }

    /// Time between move starts.
    pub fn period_ns(&self) -> u64 {
        (1e9 / self.max_moves_per_s).ceil() as u64
    }
}

/// A move the mover proposes: unit `unit` of `stripe` from `from` to `to`, and its worth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProposedMove {
    /// The stripe.
    pub stripe: StripeId,
    /// Its unit that moves.
    pub unit: u8,
    /// Where it is.
    pub from: NodeId,
    /// Where it goes.
    pub to: NodeId,
    /// Δ.
    pub gain: f64,
    /// E.
    pub access_gain: f64,
    /// I.
    pub balance_gain: f64,
}

/// The mover's statistics and its proposals.
pub struct Mover {
    settings: MoverSettings,
    coaccess: CoAccess,
    /// When each batch of the window arrived, oldest first: the window's span in time.
    arrivals: VecDeque<u64>,
    /// ω_j: bytes per second each node served over the executor's last load period.
    loads: Vec<f64>,
    batches_seen: u64,
}

impl Mover {
    /// A mover with empty statistics.
    pub fn new(settings: MoverSettings) -> Result<Mover, String> {
        settings.validate()?;
        let coaccess = CoAccess::new(settings.window, settings.max_blocks_per_batch);
        Ok(Mover { settings, coaccess, arrivals: VecDeque::new(), loads: Vec::new(), batches_seen: 0 })
    }

    /// The settings.
    pub fn settings(&self) -> &MoverSettings {
        &self.settings
    }

    /// A batch read `stripes` at `now_ns`; one in `sample_every` is counted.
    pub fn observe_batch(&mut self, now_ns: u64, stripes: &[StripeId]) {
        self.batches_seen += 1;
        if !(self.batches_seen - 1).is_multiple_of(u64::from(self.settings.sample_every)) {
            return;
        }
        let blocks: Vec<u64> = stripes.iter().map(|s| u64::from(s.0)).collect();
        self.coaccess.record(&blocks);
        self.arrivals.push_back(now_ns);
        while self.arrivals.len() > self.coaccess.len() {
            self.arrivals.pop_front();
        }
    }

    /// Each node's load, bytes per second, by node.
    pub fn observe_loads(&mut self, bytes_per_s: &[f64]) {
        self.loads = bytes_per_s.to_vec();
    }

    /// Algorithm 1 over candidates drawn from the window: the move of the largest positive Δ, if
    /// any. `sites` are the cost table by node (o_j in ns, m_j in ns per byte); `unit_bytes` gives
    /// a stripe's unit size; blocks with a unit on a node the view knows is down are left to repair,
    /// no unit moves to such a node, and none breaks `racks`.
    pub fn propose(
        &self,
        view: &dyn ClusterView,
        sites: &[SiteCost],
        unit_bytes: &dyn Fn(StripeId) -> u64,
        now_ns: u64,
        racks: RackRule,
        rng: &mut dyn RngCore,
    ) -> Option<ProposedMove> {
        let node_count = view.placement().node_count() as usize;
        if sites.len() != node_count || self.loads.len() != node_count || self.coaccess.is_empty() {
            return None;
        }
        let up = |stripe: StripeId| view.placement().stripe_nodes(stripe).iter().all(|&n| !view.node_unavailable(n));
        let candidates: Vec<StripeId> = self
            .coaccess
            .candidates(self.settings.candidates, &mut RngAdapter(rng))
            .into_iter()
            .map(|b| StripeId(b as u32))
            .filter(|&s| s.0 < view.placement().stripe_count() && up(s))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let (state, indices) = self.state(view, sites, unit_bytes, &candidates, now_ns);
        let average_overhead = sites.iter().map(|s| s.overhead).sum::<f64>() / sites.len() as f64;
        let weights = MoveWeights {
            access: self.settings.access_weight,
            balance: self.settings.balance_weight_per_overhead * average_overhead,
        };
        // The candidate stripe of a block of the movement state (only candidates are scored).
        let stripe_of = |block: usize| candidates[indices.iter().position(|&i| i == block).expect("a candidate")];
        let allowed = |block: usize, from: usize, to: usize| {
            let (from, to) = (NodeId(from as u32), NodeId(to as u32));
            !view.node_unavailable(to) && racks.allows(view, view.placement().stripe_nodes(stripe_of(block)), from, to)
        };
        let chosen = movement::select_move(&state, &indices, weights, self.settings.max_evaluations, &allowed)?;
        let stripe = stripe_of(chosen.block);
        let nodes = view.placement().stripe_nodes(stripe);
        let unit = nodes.iter().position(|n| n.index() == chosen.from).expect("the source holds a unit") as u8;
        Some(ProposedMove {
            stripe,
            unit,
            from: NodeId(chosen.from as u32),
            to: NodeId(chosen.to as u32),
            gain: chosen.gain,
            access_gain: chosen.access_gain,
            balance_gain: chosen.balance_gain,
        })
    }

    /// The movement state of the candidates and their likeliest partners (sites are nodes), and
    /// the candidates' indices in it.
    fn state(
        &self,
        view: &dyn ClusterView,
        sites: &[SiteCost],
        unit_bytes: &dyn Fn(StripeId) -> u64,
        candidates: &[StripeId],
        now_ns: u64,
    ) -> (MovementState, Vec<usize>) {
        let placement = view.placement();
        let span_s = (now_ns.saturating_sub(self.arrivals.front().copied().unwrap_or(now_ns)) as f64 / 1e9).max(1.0);
        let units = placement.stripe_nodes(candidates[0]).len() as f64;
        let share = view.layout().data_units() as f64 / units;
        let mut index: BTreeMap<StripeId, usize> = BTreeMap::new();
        let mut blocks: Vec<BlockState> = Vec::new();
        let mut add = |stripe: StripeId, blocks: &mut Vec<BlockState>| -> usize {
            *index.entry(stripe).or_insert_with(|| {
                let bytes = unit_bytes(stripe);
                // The window holds one batch in `sample_every`: scale its reads back up.
                let sampled = self.coaccess.reads(u64::from(stripe.0)) * u64::from(self.settings.sample_every);
                let rate = sampled as f64 / span_s;
                blocks.push(BlockState {
                    sites: placement.stripe_nodes(stripe).iter().map(|n| n.index()).collect(),
                    need: view.layout().data_units(),
                    chunk_bytes: bytes,
                    chunk_load: rate * bytes as f64 * share,
                    partners: Vec::new(),
                });
                blocks.len() - 1
            })
        };
        let mut candidate_indices = Vec::with_capacity(candidates.len());
        for &stripe in candidates {
            let at = add(stripe, &mut blocks);
            candidate_indices.push(at);
            let partners: Vec<(usize, f64)> = self
                .coaccess
                .partners(u64::from(stripe.0))
                .into_iter()
                .filter(|&(b, _)| b < u64::from(placement.stripe_count()))
                .take(self.settings.max_partners)
                .map(|(b, likelihood)| (add(StripeId(b as u32), &mut blocks), likelihood))
                .collect();
            blocks[at].partners = partners;
        }
        (MovementState { sites: sites.to_vec(), loads: self.loads.clone(), blocks }, candidate_indices)
    }

    /// Named numbers for an executor's metrics and reports.
    pub fn gauges(&self) -> Vec<(&'static str, f64)> {
        vec![("window_batches", self.coaccess.len() as f64), ("batches_seen", self.batches_seen as f64)]
    }
}

/// `CoAccess::candidates` takes a sized `Rng`; the policy's random source is a trait object.
struct RngAdapter<'a>(&'a mut dyn RngCore);

impl RngCore for RngAdapter<'_> {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        self.0.fill_bytes(dst)
    }
}

#[cfg(test)]
mod tests;
