//! EC-Store's chunk mover as a gateway service: it carries out the moves the controller's mover
//! proposes (Algorithm 1 over the co-access of batch reads and the nodes' loads), at most
//! `max_moves_per_s` and `max_bytes_per_s`, on one gateway of the cluster at a time (the `mover`
//! lease), and never while repair has work (repair goes first, as in HDFS and Ceph). A move copies
//! the unit (read from its node, written to the new one), then switches the stripe record by
//! compare-and-swap, then deletes the old copy after `orphans.release_delay_ms`, so that reads
//! that fetched the old placement finish. A mover stopped at any point leaves at worst one unit no
//! stripe references (the copy before the switch, or the old copy after it), which the orphan
//! collector deletes; a switch that loses its race deletes the copy at once.
//!
//! Owns the pacing, the lease, the copy / switch / release of a move and the node loads it reads
//! from the nodes' stats. Must not choose moves (the policy's, through the controller), move a unit
//! of a stripe with units missing, or delete a copy the metadata references.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use meta::{NodeId, NodeInfo, NodeState, StripeId, StripeMeta};
use serde::Serialize;
use tokio::time::Instant;

use crate::data::cluster::lease::LeaseClaims;
use crate::data::cluster::membership::{BackgroundTask, unix_now_ms};
use crate::data::config::MoverConfig;
use crate::data::io::stripe_io::{StripeIo, is_up};
use crate::data::read::controller::{Controller, StoreMove};
use crate::data::services::repair::RepairService;
use crate::data::{DataError, lock};

/// The lease the gateways elect one mover by.
pub const MOVER_LEASE: &str = "mover";
/// The lease's shortest term.
const MIN_LEASE_TERM: Duration = Duration::from_secs(30);
/// Old copies waiting for their release at most; past it the orphan collector gets the rest.
const MAX_WAITING_RELEASES: usize = 100_000;
/// Old copies deleted per round of the loop.
const RELEASES_PER_ROUND: usize = 64;

/// What the mover has done, for `GET /admin/mover`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MoverStatus {
    /// Whether it is switched on.
    pub enabled: bool,
    /// Whether this gateway held the lease at its last claim.
    pub holds_lease: bool,
    /// The lease's holder at the last claim.
    pub lease_holder: Option<String>,
    /// Whether it waits for repair.
    pub paused_for_repair: bool,
    /// Moves whose switch committed, since start.
    pub moves: u64,
    /// Proposals not carried out (the stripe changed, a read or write failed, the switch lost).
    pub moves_failed: u64,
    /// Bytes copied by committed moves.
    pub bytes_moved: u64,
    /// Δ of the last committed move.
    pub last_gain: Option<f64>,
    /// Old copies waiting for their release delay.
    pub releases_waiting: usize,
    /// Old copies deleted.
    pub releases_done: u64,
}

/// An old copy to delete once its delay is over, if it is still the copy that was moved away.
#[derive(Clone, Copy, Debug)]
struct Release {
    node: NodeId,
    stripe: StripeId,
    unit: u16,
    /// Its generation when the move switched (`None`: it could not be listed; then the orphan
    /// collector, which checks generations, deletes it).
    generation: Option<u64>,
    due: Instant,
}

/// A copied unit, not yet switched to.
#[derive(Debug)]
pub struct Copied {
    /// The move.
    pub moved: StoreMove,
    /// The stripe record the copy was made from (its version is what the switch expects).
    pub stripe: StripeMeta,
    /// The copy's generation on the new node, when it could be listed.
    generation: Option<u64>,
}

/// The service; see the module documentation.
pub struct MoverService {
    io: Arc<StripeIo>,
    controller: Arc<Controller>,
    repair: Arc<RepairService>,
    config: MoverConfig,
    enabled: AtomicBool,
    lease: LeaseClaims,
    releases: Mutex<VecDeque<Release>>,
    status: Mutex<MoverStatus>,
}

impl std::fmt::Debug for MoverService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MoverService").field("status", &self.status()).finish()
    }
}

impl MoverService {
    /// A mover over `io` carrying out `controller`'s proposals, waiting for `repair`.
    pub fn new(
        io: Arc<StripeIo>,
        controller: Arc<Controller>,
        repair: Arc<RepairService>,
        config: MoverConfig,
    ) -> MoverService {
        let lease = LeaseClaims::new(MOVER_LEASE, io.config().gateway_id());
        let enabled = AtomicBool::new(config.enabled);
        MoverService {
            io,
            controller,
            repair,
            config,
            enabled,
            lease,
            releases: Mutex::new(VecDeque::new()),
            status: Mutex::new(MoverStatus::default()),
        }
    }

    /// Switches the mover on or off (moves in flight finish; releases go on either way).
    pub fn set_enabled(&self, enabled: bool) -> MoverStatus {
        self.enabled.store(enabled, Ordering::Relaxed);
        tracing::info!(enabled, "mover switched");
        self.status()
    }

    /// What it has done.
    pub fn status(&self) -> MoverStatus {
        let mut status = lock(&self.status).clone();
        status.enabled = self.enabled.load(Ordering::Relaxed);
        status.releases_waiting = lock(&self.releases).len();
        status.lease_holder = self.lease.last_holder();
        status
    }

    /// Runs the mover until `stop` changes.
    pub fn spawn(self: Arc<Self>) -> BackgroundTask {
        BackgroundTask::spawn("mover", move |stop| self.run(stop))
    }

    async fn run(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let period = Duration::from_nanos(self.config.settings.period_ns());
        let load_period = Duration::from_millis(self.config.load_period_ms);
        let mut loads = LoadMeter::default();
        let mut next_load = Instant::now();
        loop {
            let round = Instant::now();
            self.release_due().await;
            let mut pause = period;
            if self.enabled.load(Ordering::Relaxed) {
                if round >= next_load {
                    next_load = round + load_period;
                    loads.measure(&self.io, &self.controller).await;
                }
                if let Some(bytes) = self.one_move().await {
                    // The byte cap: a move of b bytes holds the next back b / rate.
                    let copy = Duration::from_secs_f64(bytes as f64 / self.config.max_bytes_per_s as f64);
                    pause = pause.max(copy);
                }
            }
            tokio::select! {
                _ = stop.changed() => return,
                () = tokio::time::sleep_until(round + pause) => {}
            }
        }
    }

    /// One proposal carried out, if the mover may move now; the bytes it copied.
    async fn one_move(&self) -> Option<u64> {
        let repairing = self.repair_has_work();
        lock(&self.status).paused_for_repair = repairing;
        if repairing || !self.claim().await {
            return None;
        }
        let nodes = self.io.cluster().node_map().await.ok()?;
        let moved = self.controller.propose_move(&nodes, self.io.config().rack_aware)?;
        match self.copy(&moved).await {
            Ok(copied) => match self.switch(copied).await {
                Ok(()) => Some(moved.unit_bytes),
                Err(error) => {
                    tracing::info!(%error, stripe = %moved.stripe, "a move did not switch");
                    Some(moved.unit_bytes)
                }
            },
            Err(error) => {
                tracing::info!(%error, stripe = %moved.stripe, "a move was not copied");
                self.failed(&moved);
                None
            }
        }
    }

    /// Whether repair has stripes to rebuild (or nodes it is rebuilding): then the mover waits.
    fn repair_has_work(&self) -> bool {
        let status = self.repair.status();
        status.stripes_remaining > 0 || !status.nodes_repairing.is_empty()
    }

    /// Claims (or renews) the mover lease; whether this gateway holds it.
    async fn claim(&self) -> bool {
        let term = MIN_LEASE_TERM.max(Duration::from_nanos(self.config.settings.period_ns().saturating_mul(10)));
        let held =
            match self.lease.claim(self.io.cluster().meta().as_ref(), unix_now_ms(), term.as_millis() as u64).await {
                Ok(held) => held,
                Err(error) => {
                    tracing::warn!(%error, "mover lease not claimed");
                    false
                }
            };
        lock(&self.status).holds_lease = held;
        held
    }

    /// The first half of a move: the unit read from its node and written to the new one. The
    /// stripe record is not touched: a mover stopped after this leaves the copy to the orphan
    /// collector.
    pub async fn copy(&self, moved: &StoreMove) -> Result<Copied, DataError> {
        let nodes = self.io.cluster().node_map().await?;
        let stripe = self.io.stripe(moved.stripe).await?;
        let unit = usize::from(moved.unit);
        let movable = stripe.placement.get(unit) == Some(&moved.from)
            && !stripe.placement.contains(&moved.to)
            && stripe.missing_units.is_empty()
            && is_up(&nodes, moved.from)
            && is_up(&nodes, moved.to);
        if !movable {
            return Err(DataError::Unavailable(format!(
                "stripe {} changed since the move was proposed, or a node is not Up",
                stripe.id
            )));
        }
        let bytes = self
            .io
            .read_unit(&nodes, &stripe, unit, 0, stripe.unit_bytes)
            .await
            .map_err(|error| DataError::Unavailable(error.to_string()))?;
        let to = nodes.get(&moved.to).expect("checked Up");
        let descriptor = self.io.descriptor_for(&nodes, &stripe, unit, nodes.get(&moved.from)).await;
        self.io.write_unit(to, stripe.id, unit, (bytes, descriptor)).await.map_err(DataError::Unavailable)?;
        let generation = unit_generation(&self.io, to, stripe.id, moved.unit).await;
        Ok(Copied { moved: *moved, stripe, generation })
    }

    /// The second half: the stripe record switched to the copy (compare-and-swap on the version
    /// the copy was made from), the old copy queued for release. A lost switch deletes the copy.
    pub async fn switch(&self, copied: Copied) -> Result<(), DataError> {
        let Copied { moved, stripe, generation } = copied;
        let nodes = self.io.cluster().node_map().await?;
        let old_generation = match nodes.get(&moved.from) {
            Some(from) => unit_generation(&self.io, from, stripe.id, moved.unit).await,
            None => None,
        };
        let mut switched = stripe.clone();
        switched.placement[usize::from(moved.unit)] = moved.to;
        let meta = self.io.cluster().meta();
        if let Err(error) = meta.update_stripe(stripe.id, stripe.version, switched).await {
            if let (Some(to), Some(generation)) = (nodes.get(&moved.to), generation) {
                delete_if_generation(&self.io, to, stripe.id, moved.unit, generation).await;
            }
            self.failed(&moved);
            return Err(crate::data::meta_error(error));
        }
        {
            let mut placer = self.io.placer();
            placer.adjust(moved.from, -1);
            placer.adjust(moved.to, 1);
        }
        self.controller.move_ended(&moved, true);
        let due = Instant::now() + Duration::from_millis(self.io.config().orphans.release_delay_ms);
        let release =
            Release { node: moved.from, stripe: stripe.id, unit: moved.unit, generation: old_generation, due };
        let mut releases = lock(&self.releases);
        if releases.len() < MAX_WAITING_RELEASES {
            releases.push_back(release);
        }
        drop(releases);
        let mut status = lock(&self.status);
        status.moves += 1;
        status.bytes_moved += moved.unit_bytes;
        status.last_gain = Some(moved.gain);
        metrics::counter!("lowtail_mover_moves_total").increment(1);
        metrics::counter!("lowtail_mover_bytes_total").increment(moved.unit_bytes);
        metrics::gauge!("lowtail_mover_last_gain").set(moved.gain);
        Ok(())
    }

    fn failed(&self, moved: &StoreMove) {
        self.controller.move_ended(moved, false);
        lock(&self.status).moves_failed += 1;
        metrics::counter!("lowtail_mover_moves_failed_total").increment(1);
    }

    /// Deletes the old copies whose delay is over, unless the stripe names their node again or
    /// the copy was rewritten since (its generation changed). One round of releases (the service's loop runs one before each move).
    pub async fn release_due(&self) {
        let now = Instant::now();
        let due: Vec<Release> = {
            let mut releases = lock(&self.releases);
            let count = releases.iter().take_while(|r| r.due <= now).count().min(RELEASES_PER_ROUND);
            releases.drain(..count).collect()
        };
        if due.is_empty() {
            return;
        }
        let Ok(nodes) = self.io.cluster().node_map().await else { return };
        for release in due {
            let referenced = match self.io.cluster().meta().get_stripe(release.stripe).await {
                Ok(stripe) => stripe.placement.get(usize::from(release.unit)) == Some(&release.node),
                Err(meta::MetaError::NoSuchStripe(_)) => false,
                // Unknown: keep it (the orphan collector judges it later).
                Err(_) => true,
            };
            if let (false, Some(node), Some(generation)) = (referenced, nodes.get(&release.node), release.generation) {
                delete_if_generation(&self.io, node, release.stripe, release.unit, generation).await;
                lock(&self.status).releases_done += 1;
            }
        }
    }
}

/// Reads every node's served bytes from its stats and hands the controller their rates.
#[derive(Default)]
struct LoadMeter {
    last: BTreeMap<NodeId, (u64, Instant)>,
}

impl LoadMeter {
    async fn measure(&mut self, io: &StripeIo, controller: &Controller) {
        let Ok(nodes) = io.cluster().node_map().await else { return };
        let mut loads = BTreeMap::new();
        for (id, info) in nodes.iter().filter(|(_, n)| n.state == NodeState::Up) {
            let Ok(client) = io.cluster().client(info).await else { continue };
            let Ok(stats) = client.stats().await else { continue };
            let now = Instant::now();
            if let Some((bytes, at)) = self.last.insert(*id, (stats.bytes_read, now)) {
                let seconds = now.duration_since(at).as_secs_f64().max(1e-3);
                loads.insert(*id, stats.bytes_read.saturating_sub(bytes) as f64 / seconds);
            }
        }
        if !loads.is_empty() {
            controller.observe_node_loads(&loads);
        }
    }
}

/// The generation of unit `unit` of `stripe` on `node`, when it is there and answers.
async fn unit_generation(io: &StripeIo, node: &NodeInfo, stripe: StripeId, unit: u16) -> Option<u64> {
    let client = io.cluster().client(node).await.ok()?;
    // The listing starts after the unit just before this one.
    let after = match (stripe.0, unit) {
        (0, 0) => None,
        (s, 0) => Some((s - 1, u16::MAX)),
        (s, u) => Some((s, u - 1)),
    };
    let page = client.list_units(after, 1).await.ok()?;
    let listed = page.units.first()?;
    (listed.stripe == stripe.0 && listed.unit == u32::from(unit)).then_some(listed.generation)
}

/// Deletes a unit if it still has `generation` (best effort: the orphan collector is the backstop).
async fn delete_if_generation(io: &StripeIo, node: &NodeInfo, stripe: StripeId, unit: u16, generation: u64) {
    let Ok(client) = io.cluster().client(node).await else { return };
    if let Err(error) = client.delete_unit_if_generation(stripe.0, unit, generation).await {
        tracing::debug!(%error, %stripe, unit, "a moved unit's copy was not deleted; the orphan collector will");
    }
}
