//! The controller's side of EC-Store's chunk mover: the policy's [`Mover`] proposes over the
//! catalog (the dense ids the batch plans and the co-access statistics share) and the access
//! policy's cost table; proposals leave in the store's ids ([`StoreMove`]) for the mover service
//! (`data::mover`) to carry out, and a committed move updates the catalog in place, so the moved
//! stripe keeps its statistics and the plans that read the moved unit are dropped (as in the
//! simulator). Move records are kept here with the other records.
//!
//! Must not: copy, write or delete a unit, or change metadata (the mover service's), or hold the
//! lock across an await.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use meta::{NodeId as StoreNodeId, StripeId as StoreStripeId};
use model::{MoveRecord, NEVER, NodeId as PolicyNodeId, StripeId as PolicyStripeId};
use policy::ecstore::mover::RackRule;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Controller, LiveView};
use crate::data::io::stripe_io::NodeMap;

/// A unit move, in the store's ids, and what the policy saw in it (zero gains for a move the
/// policy did not propose).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StoreMove {
    /// The stripe.
    pub stripe: StoreStripeId,
    /// Its unit that moves.
    pub unit: u16,
    /// The node holding it.
    pub from: StoreNodeId,
    /// The node it goes to (holding no unit of the stripe).
    pub to: StoreNodeId,
    /// The unit's bytes.
    pub unit_bytes: u64,
    /// Δ, E and I of Eq. 8.
    pub gain: f64,
    /// E.
    pub access_gain: f64,
    /// I.
    pub balance_gain: f64,
    /// When it was proposed (controller clock).
    pub proposed_ns: u64,
}

impl Controller {
    /// Each node's load (bytes per second it served over the last load period), by store node.
    pub fn observe_node_loads(&self, loads: &BTreeMap<StoreNodeId, f64>) {
        let mut state = self.lock();
        let state = &mut *state;
        for &id in loads.keys() {
            state.catalog.node(id);
        }
        let by_dense: Vec<f64> = state.catalog.nodes.iter().map(|id| loads.get(id).copied().unwrap_or(0.0)).collect();
        state.mover.observe_loads(&by_dense);
    }

    /// Algorithm 1's move over the statistics gathered so far, if one gains anything; `None` also
    /// before any batch was planned (no cost table, no co-access). Nodes not Up in `nodes` are
    /// neither left nor chosen, and the move keeps racks as placement promised: within its rack
    /// when the running policy places stripes on racks of its choosing (JLWO), one unit per rack
    /// when `rack_aware`, anywhere otherwise.
    pub fn propose_move(&self, nodes: &NodeMap, rack_aware: bool) -> Option<StoreMove> {
        let now_ns = self.now_ns();
        let mut state = self.lock();
        let state = &mut *state;
        let policy_places_racks =
            (0..node::MAX_CLASSES as u8).any(|class| state.policy.new_stripe_racks(class).is_some());
        let racks = match (policy_places_racks, rack_aware) {
            (true, _) => RackRule::Stay,
            (false, true) => RackRule::Spread,
            (false, false) => RackRule::Free,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(rand::RngCore::next_u64(&mut state.rng));
        let view = LiveView::of_batches(&state.catalog, &[], self.frontend_count, nodes);
        let by_dense = &state.catalog.by_dense;
        let unit_bytes = |stripe: PolicyStripeId| by_dense.get(stripe.index()).map_or(0, |&(_, bytes)| bytes);
        let proposal = state.mover.propose(&view, state.access.site_costs(), &unit_bytes, now_ns, racks, &mut rng)?;
        let (store_stripe, bytes) = *by_dense.get(proposal.stripe.index())?;
        Some(StoreMove {
            stripe: StoreStripeId(store_stripe),
            unit: u16::from(proposal.unit),
            from: *state.catalog.nodes.get(proposal.from.index())?,
            to: *state.catalog.nodes.get(proposal.to.index())?,
            unit_bytes: bytes,
            gain: proposal.gain,
            access_gain: proposal.access_gain,
            balance_gain: proposal.balance_gain,
            proposed_ns: now_ns,
        })
    }

    /// A move's end: when `committed` (the stripe record now names `to`), the catalog's placement
    /// follows it; either way it is recorded (a failed move ends at [`NEVER`]).
    pub fn move_ended(&self, moved: &StoreMove, committed: bool) {
        let end_ns = if committed { self.now_ns() } else { NEVER };
        let dense = {
            let mut state = self.lock();
            let state = &mut *state;
            let dense = dense_ids(&state.catalog, moved);
            if committed {
                follow_move(state, moved);
            }
            dense
        };
        // A move of a stripe the catalog does not hold (an operator's) has no dense ids to record.
        let Some((stripe, from, to)) = dense else { return };
        if self.max_records == 0 {
            return;
        }
        let record = MoveRecord {
            stripe,
            unit: moved.unit as u8,
            from,
            to,
            bytes: moved.unit_bytes,
            start_ns: moved.proposed_ns,
            end_ns,
            gain: moved.gain,
            access_gain: moved.access_gain,
            balance_gain: moved.balance_gain,
        };
        let mut records = crate::data::lock(&self.move_records);
        if records.len() >= self.max_records {
            self.counters.dropped_records.fetch_add(1, Ordering::Relaxed);
            return;
        }
        records.push_back(record);
    }

    /// Stripes read together by plain GETs (the S3 layer's guess, `s3::coaccess`): one batch of the
    /// mover's statistics, of the ones the catalog holds (those its reads registered). Keeps the
    /// access policy's load probes running, whose cost table the mover's proposals need.
    pub fn observe_coaccess(&self, stripes: &[StoreStripeId]) {
        let now_ns = self.now_ns();
        {
            let mut state = self.lock();
            let state = &mut *state;
            let mut dense: Vec<PolicyStripeId> =
                stripes.iter().filter_map(|id| state.catalog.stripes.get(&id.0).map(|(dense, _)| *dense)).collect();
            dense.sort_unstable();
            dense.dedup();
            if dense.len() < 2 {
                return;
            }
            state.mover.observe_batch(now_ns, &dense);
        }
        if self.last_batch_ns.swap(now_ns.max(1), Ordering::Relaxed) == 0 {
            self.access_wake.notify_one();
        }
    }

    /// Takes every move record kept so far.
    pub fn take_move_records(&self) -> Vec<MoveRecord> {
        std::mem::take(&mut *crate::data::lock(&self.move_records)).into()
    }

    /// The mover's statistics, by name (batches in the co-access window, batches seen).
    pub fn mover_gauges(&self) -> BTreeMap<String, f64> {
        self.lock().mover.gauges().into_iter().map(|(name, value)| (name.to_string(), value)).collect()
    }
}

/// A move's stripe and nodes in the catalog's dense ids, when it holds them.
fn dense_ids(catalog: &super::Catalog, moved: &StoreMove) -> Option<(PolicyStripeId, PolicyNodeId, PolicyNodeId)> {
    let (stripe, _) = catalog.stripes.get(&moved.stripe.0)?;
    Some((*stripe, *catalog.node_index.get(&moved.from)?, *catalog.node_index.get(&moved.to)?))
}

/// The catalog's placement after a committed move, when it still holds the stripe as it was.
fn follow_move(state: &mut super::State, moved: &StoreMove) {
    let catalog = &mut state.catalog;
    let Some((dense, nodes)) = catalog.stripes.get_mut(&moved.stripe.0) else { return };
    let unit = usize::from(moved.unit);
    if nodes.get(unit) != Some(&moved.from) || nodes.contains(&moved.to) {
        return;
    }
    let to = match catalog.node_index.get(&moved.to) {
        Some(&to) => to,
        None => return,
    };
    if catalog.placement.move_unit(*dense, moved.unit as u8, to).is_ok() {
        nodes[unit] = moved.to;
    }
}
