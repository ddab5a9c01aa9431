//! The packed layout: small objects appended into the data units of a shared *open* stripe, as the
//! partitions of Windows Azure Storage pack small blobs, instead of each paying for a stripe of its
//! own (n unit files, n node writes and n reads' worth of per-task overhead for a few KiB).
//!
//! Life of an open stripe:
//! 1. **Open.** The packer places n nodes, records the stripe `Open` (with the full unit size as
//!    its capacity) and lists it under this gateway's name in the metadata store, so a restart
//!    finds it again. With a node Down it opens around it: the Down node takes a data position
//!    that takes no appends (so every object still gets its m + 1 replicas on Up nodes), left to
//!    the seal, when the stripe sealed without it still meets the durability rule; small objects
//!    then stay packed (one unit read each) instead of being striped while a node is down.
//! 2. **Append.** An object goes into the least-filled data unit it fits in. Before the write is
//!    acknowledged its bytes are durable as a *replica unit* (unit index `0x8000 | seq`, a header
//!    naming the data unit and offset, then the bytes) on the data unit's node and on every parity
//!    node: m + 1 copies on distinct nodes for RS, so an acknowledged object survives any m
//!    failures (n − k + 1 for LRC, which survives more than any pattern the code decodes). Under
//!    the straggler rule (`pending.straggler`, on by default) the write is acknowledged once all
//!    replicas but one are durable and that one is late (the execution core's write quorum):
//!    reported pending, one failure fewer survived until it lands or the stripe seals. The
//!    gateway keeps the data units' bytes in memory. A read of an object in an open stripe reads
//!    any replica.
//! 3. **Seal.** When no object fits any more, or `seal_after_ms` after opening, the stripe is taken
//!    out of service, in-flight appends are awaited, the data units are cut to their fullest fill
//!    (rounded to 64 bytes), encoded, written as ordinary units (nodes that are down are replaced),
//!    and the record flips to `Sealed`; only then are the replicas deleted. Reads then go to the
//!    data unit, degraded like any other stripe.
//! 4. **Recovery.** After a crash, the open stripes this gateway had listed are rebuilt from their
//!    replicas (every parity node holds all of them, each with its header) and sealed.
//!
//! A replica write that fails (a node is down) closes the stripe for appends and sends it to be
//! sealed; the object is then written striped by the caller instead. Deleted packed objects leave
//! dead bytes in their stripe: compaction is not built.
//!
//! Must not: touch object metadata, or acknowledge an object before its write quorum allows it.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use codec::ErasureCode;
use meta::{Layout, NodeId, NodeInfo, NodeState, StripeId, StripeMeta, StripeState};
use tokio::sync::{Mutex, OwnedRwLockReadGuard, RwLock};
use tokio::time::Instant;

use crate::data::cluster::membership::unix_now_ms;
use crate::data::io::descriptor::{FORMAT, Holds, PackedObject, UnitDescriptor};
use crate::data::io::replica::{MAX_OBJECTS_PER_STRIPE, REPLICA_HEADER_BYTES, REPLICA_UNIT_BASE, ReplicaHeader};
use crate::data::io::stripe_io::{NodeMap, StripeIo};
use crate::data::read::Reads;
use crate::data::read::controller::{Unplanned, layer_decisions};
use crate::data::read::robust::Rebuilt;
use crate::data::write::execute::{CopyTask, CopyWriter, WriteEnd, drive_write};
use crate::data::write::late_copies::LateCopies;
use crate::data::write::stripe_write::{forget_placement, place_new_stripe};
use crate::data::{DataError, meta_error};
use execution::{Durability, WriteRule, WriteSettings};

mod copies;
mod recover;
mod seal;

/// Prefix of the metadata config entry listing a gateway's open stripes.
const REGISTRY_PREFIX: &str = "packed-open/";
/// Units listed per page when replicas are looked up on a node.
const LIST_PAGE: u32 = 1024;
/// Reads of an open stripe's object retried after the stripe was sealed under them.
const READ_ATTEMPTS: usize = 3;
/// How often `tick` retries rebuilding stripes a previous run left open that could not be rebuilt.
const UNRECOVERED_RETRY: Duration = Duration::from_secs(1);

/// The nodes holding the replicas of an object appended to data unit `unit`: the unit's own node
/// first (where a sealed read will go), then every parity node.
fn replica_nodes(stripe: &StripeMeta, k: usize, unit: usize) -> Vec<NodeId> {
    std::iter::once(stripe.placement[unit]).chain(stripe.placement[k..].iter().copied()).collect()
}

/// A stripe taking appends.
struct OpenStripe {
    /// The record as stored (`Open`, capacity `unit_bytes`, its version for the seal's CAS).
    stripe: StripeMeta,
    /// Which data units take appends: not those placed on a node that was Down at the opening.
    usable: Vec<bool>,
    /// Bytes of each data unit so far (fill = length).
    units: Vec<BytesMut>,
    /// Replica units written or being written: seq → data unit.
    replicas: BTreeMap<u16, u16>,
    /// What each replica's object is (its write's label and place), for the sealed units'
    /// descriptors: seq → object.
    objects: BTreeMap<u16, PackedObject>,
    /// Appends hold a read guard until their replicas are written; sealing takes the write side.
    in_flight: Arc<RwLock<()>>,
    opened_at: Instant,
}

impl OpenStripe {
    /// The least-filled data unit with room for `length` more bytes.
    fn unit_for(&self, length: u64) -> Option<usize> {
        let capacity = self.stripe.unit_bytes;
        (0..self.units.len())
            .filter(|&u| self.usable[u] && self.units[u].len() as u64 + length <= capacity)
            .min_by_key(|&u| (self.units[u].len(), u))
    }
}

struct PackerState {
    open: Option<OpenStripe>,
    /// Stripes closed for appends whose seal has not succeeded yet (retried by `tick`).
    unsealed: Vec<OpenStripe>,
    /// Seals running now.
    sealing: usize,
    /// Every stripe this gateway must seal (open, unsealed or sealing), as listed in the registry.
    registered: Vec<StripeId>,
    /// Registered stripes of a previous run not rebuilt from their replicas yet (a parity node did
    /// not answer); `tick` tries again.
    unrecovered: Vec<StripeId>,
    /// When `tick` may try `unrecovered` again (each try reads every node of each stripe).
    retry_unrecovered_at: Option<Instant>,
}

/// An object packed: where, and whether one of its replicas was still being written when it was
/// acknowledged (the straggler rule): it then has one copy fewer until that lands or the stripe
/// is sealed.
#[derive(Debug)]
pub struct Packed {
    /// Where the object is.
    pub layout: Layout,
    /// Whether a replica was still being written at the acknowledgement.
    pub late_copy: bool,
}

/// Why an object could not be packed; the caller stripes it instead.
#[derive(Debug)]
pub enum PackRefused {
    /// Packing is off, the object is too large, or too many stripes are sealing.
    NotNow(String),
    /// The open stripe could not take it (a replica write failed); the stripe is being sealed.
    Failed(DataError),
}

/// Status of the packer, for `lowtail admin status`.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PackedStatus {
    /// Bytes appended to the open stripe's data units.
    pub open_bytes: u64,
    /// Objects in the open stripe.
    pub open_objects: u64,
    /// Stripes closed for appends and not yet sealed (sealing or waiting for a retry).
    pub unsealed_stripes: usize,
    /// The packer stayed busy (opening a stripe: a metadata write) past [`STATUS_WAIT`]: the
    /// counts are the last ones read, and unsealed stripes may be more.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub busy: bool,
}

/// How long a status waits for the packer's state before answering with the last counts: a
/// status must answer while a metadata write is slow (`lowtail admin status` is what an operator
/// looks at then).
pub const STATUS_WAIT: Duration = Duration::from_secs(1);

/// The packer of one gateway. Shared by `Arc`; its background tick seals stripes on time.
pub struct Packer {
    io: Arc<StripeIo>,
    reads: Arc<Reads>,
    code: Arc<dyn ErasureCode>,
    code_name: String,
    /// The straggler rule's wait, when it is on.
    straggler: Option<execution::StragglerWait>,
    /// The bound on late replicas per node (shared with the striped path's late units).
    late_copies: Arc<LateCopies>,
    state: Mutex<PackerState>,
    /// The last status read (answered when the state is busy past [`STATUS_WAIT`]).
    last_status: std::sync::Mutex<PackedStatus>,
    me: Weak<Packer>,
}

impl std::fmt::Debug for Packer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packer").field("code", &self.code_name).finish_non_exhaustive()
    }
}

impl Packer {
    /// A packer writing stripes of `code` (and its name) through `io`, reading sealed ones through
    /// `reads`, acknowledging objects without one late replica under `straggler` when it is on,
    /// a node given at most the bound of `late_copies` late replicas at once.
    pub fn new(
        io: Arc<StripeIo>,
        reads: Arc<Reads>,
        (code, code_name): (Arc<dyn ErasureCode>, String),
        (straggler, late_copies): (Option<execution::StragglerWait>, Arc<LateCopies>),
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            io,
            reads,
            code,
            code_name,
            straggler,
            late_copies,
            state: Mutex::new(PackerState {
                open: None,
                unsealed: Vec::new(),
                sealing: 0,
                registered: Vec::new(),
                unrecovered: Vec::new(),
                retry_unrecovered_at: None,
            }),
            last_status: std::sync::Mutex::new(PackedStatus::default()),
            me: me.clone(),
        })
    }

    fn registry_key(&self) -> String {
        format!("{REGISTRY_PREFIX}{}", self.io.config().gateway_id())
    }

    async fn save_registry(&self, registered: &[StripeId]) -> Result<(), DataError> {
        let ids: Vec<u64> = registered.iter().map(|id| id.0).collect();
        let value = serde_json::to_string(&ids).map_err(|e| DataError::Internal(e.to_string()))?;
        self.io.cluster().meta().put_config(&self.registry_key(), &value).await.map_err(meta_error)
    }

    /// Current status.
    pub async fn status(&self) -> PackedStatus {
        let Ok(state) = tokio::time::timeout(STATUS_WAIT, self.state.lock()).await else {
            return PackedStatus { busy: true, ..crate::data::lock(&self.last_status).clone() };
        };
        let status = PackedStatus {
            open_bytes: state.open.as_ref().map_or(0, |o| o.units.iter().map(|u| u.len() as u64).sum()),
            open_objects: state.open.as_ref().map_or(0, |o| o.replicas.len() as u64),
            unsealed_stripes: state.unsealed.len() + state.sealing + state.unrecovered.len(),
            busy: false,
        };
        drop(state);
        *crate::data::lock(&self.last_status) = status.clone();
        status
    }

    /// Packs `body` (at most `packed.max_object_bytes`; an empty one takes no room but is described
    /// like the others). Returns its layout once every replica is durable, or all but one late one
    /// (the straggler rule, `pending.straggler`).
    pub async fn write(&self, body: &Bytes) -> Result<Packed, PackRefused> {
        let config = self.io.config();
        let length = body.len() as u64;
        if config.packed.max_object_bytes == 0 || length > config.packed.max_object_bytes {
            return Err(PackRefused::NotNow(format!("{length} bytes is not packed")));
        }
        let label = crate::data::io::descriptor::current();
        let (stripe, object, seq, guard) = {
            let mut state = self.state.lock().await;
            let fits = state.open.as_ref().is_some_and(|open| {
                open.replicas.len() < usize::from(MAX_OBJECTS_PER_STRIPE) && open.unit_for(length).is_some()
            });
            if !fits {
                if let Some(full) = state.open.take() {
                    self.send_to_seal(&mut state, full);
                }
                if state.sealing + state.unsealed.len() >= config.packed.max_sealing_stripes {
                    return Err(PackRefused::NotNow("too many stripes are being sealed".into()));
                }
                let open = self.open_stripe(&mut state).await.map_err(PackRefused::NotNow)?;
                state.open = Some(open);
            }
            let open = state.open.as_mut().expect("an open stripe");
            let unit = open.unit_for(length).expect("a fresh stripe fits any packable object");
            let offset = open.units[unit].len() as u64;
            open.units[unit].extend_from_slice(body);
            let seq = REPLICA_UNIT_BASE + open.replicas.len() as u16;
            open.replicas.insert(seq, unit as u16);
            let object = PackedObject { label, unit: unit as u16, offset_bytes: offset, length_bytes: length };
            open.objects.insert(seq, object.clone());
            let guard: OwnedRwLockReadGuard<()> =
                Arc::clone(&open.in_flight).try_read_owned().expect("only a seal takes the write side, after removal");
            (open.stripe.clone(), object, seq, guard)
        };
        let (unit, offset) = (usize::from(object.unit), object.offset_bytes);
        let header = ReplicaHeader { unit: object.unit, offset, length };
        let replica = (header.encode(body), self.describe(&stripe, Holds::Replica { object }));
        match self.write_replicas(&stripe, (unit, seq), replica, guard).await {
            Ok(late_copy) => Ok(Packed {
                late_copy,
                layout: Layout::Packed {
                    stripe: stripe.id,
                    unit: unit as u16,
                    offset_bytes: offset,
                    length_bytes: length,
                    replica_unit: Some(seq),
                },
            }),
            Err(error) => {
                // The stripe's replica nodes are not all writable: no more appends to it.
                let mut state = self.state.lock().await;
                if state.open.as_ref().is_some_and(|open| open.stripe.id == stripe.id) {
                    let broken = state.open.take().expect("checked");
                    self.send_to_seal(&mut state, broken);
                }
                Err(PackRefused::Failed(error))
            }
        }
    }

    /// The descriptor of a unit of `stripe` holding `holds`.
    fn describe(&self, stripe: &StripeMeta, holds: Holds) -> Bytes {
        let written_ms = unix_now_ms();
        UnitDescriptor { format: FORMAT, code: stripe.code.clone(), unit_bytes: stripe.unit_bytes, written_ms, holds }
            .encode()
    }

    /// Writes an object's replicas, each as a task of its own, and returns when the execution
    /// core's write quorum says: every replica durable (`false`), or all but one late one under the
    /// straggler rule (`true`: that one lands in the background, holding `guard` so the stripe is
    /// not sealed before it ends). A replica whose write fails, or whose node is not Up, fails the
    /// write, as before.
    async fn write_replicas(
        &self,
        stripe: &StripeMeta,
        (unit, seq): (usize, u16),
        replica: (Bytes, Bytes),
        guard: OwnedRwLockReadGuard<()>,
    ) -> Result<bool, DataError> {
        let nodes = self.io.cluster().node_map().await?;
        let targets = replica_nodes(stripe, self.code.data_units(), unit);
        let mut writer = ReplicaWriter { io: &self.io, nodes: &nodes, id: stripe.id, seq, replica };
        // Every replica, or all but one late one: a failed one fails the write (no other node
        // holds the stripe's replica unit).
        let settings = WriteSettings {
            rule: WriteRule { early_failures_tolerated: None, straggler: self.straggler },
            retries: 0,
            min_failures_tolerated: targets.len() - 1,
        };
        let placement = targets.iter().map(|node| node.0).collect();
        let to_write = vec![true; targets.len()];
        let run = drive_write((placement, &to_write), settings, Durability::Copies, &mut writer, None).await;
        let late = matches!(run.end, WriteEnd::Acknowledged { .. });
        // A JoinHandle is awaited once: the copies whose end was not taken are still running;
        // past its node's bound a late one is dropped (the seal writes the units whole).
        let still_running: Vec<_> = run
            .landing
            .into_iter()
            .filter_map(|(_, node, handle)| {
                let (handle, place) = self.late_copies.admit_or_abort(NodeId(node), handle)?;
                Some((NodeId(node), handle, place))
            })
            .collect();
        let id = stripe.id;
        tokio::spawn(async move {
            for (node, handle, place) in still_running {
                let outcome = handle.await;
                drop(place);
                match outcome {
                    Ok(Ok(())) => {}
                    // Its object keeps the other copies until the stripe is sealed (as units).
                    outcome => tracing::info!(stripe = %id, seq, %node, ?outcome, "late replica write failed"),
                }
            }
            // The seal waits for this: every replica write has ended before the stripe seals.
            drop(guard);
        });
        match (run.end, run.errors.first()) {
            (WriteEnd::Failed { .. }, Some((_, error))) => {
                Err(DataError::Unavailable(format!("replica of stripe {id}: {error}")))
            }
            (WriteEnd::Failed { .. }, None) => {
                Err(DataError::Unavailable(format!("replica of stripe {id} not stored")))
            }
            _ => Ok(late),
        }
    }

    /// Places, registers and records a new open stripe. Needs n Up nodes (with fewer, small objects
    /// are striped, which can write degraded).
    async fn open_stripe(&self, state: &mut PackerState) -> Result<OpenStripe, String> {
        let config = self.io.config();
        let k = self.code.data_units();
        let nodes = self.io.cluster().nodes().await.map_err(|e| e.to_string())?;
        let (placement, usable) = self.place_open(&nodes)?;
        let meta = self.io.cluster().meta();
        let created = async {
            let id = meta.allocate_stripe_id().await.map_err(meta_error)?;
            // Registered before it exists: a crash in between leaves a name that recovery drops,
            // never an open stripe nobody will seal.
            let mut registered = state.registered.clone();
            registered.push(id);
            self.save_registry(&registered).await?;
            state.registered = registered;
            let record = StripeMeta::open(id, self.code_name.as_str(), config.unit_bytes, placement.clone());
            meta.create_stripe(record).await.map_err(meta_error)
        }
        .await;
        match created {
            Ok(stripe) => {
                metrics::counter!("lowtail_gateway_packed_stripes_opened_total").increment(1);
                if usable.contains(&false) {
                    metrics::counter!("lowtail_gateway_packed_stripes_opened_around_down_total").increment(1);
                    tracing::info!(stripe = %stripe.id, placement = ?stripe.placement, "packed stripe opened around a Down node");
                }
                let unit_capacity = usize::try_from(config.unit_bytes).unwrap_or(usize::MAX);
                Ok(OpenStripe {
                    stripe,
                    usable,
                    units: (0..k).map(|_| BytesMut::with_capacity(unit_capacity.min(1 << 20))).collect(),
                    replicas: BTreeMap::new(),
                    objects: BTreeMap::new(),
                    in_flight: Arc::new(RwLock::new(())),
                    opened_at: Instant::now(),
                })
            }
            Err(error) => {
                forget_placement(&self.io, &placement);
                Err(error.to_string())
            }
        }
    }

    /// Places a new open stripe: n distinct nodes, the Up ones first. With fewer than n Up, Down
    /// nodes take the first data positions, which take no appends (every object keeps its m + 1
    /// replicas on Up nodes) and are the seal's to write (if the node is back) or leave missing,
    /// as long as the stripe sealed without them still meets the durability rule. Returns the
    /// placement and which data units take appends.
    fn place_open(&self, nodes: &[NodeInfo]) -> Result<(Vec<NodeId>, Vec<bool>), String> {
        let (n, k) = (self.code.total_units(), self.code.data_units());
        let up = nodes.iter().filter(|node| node.state == NodeState::Up).count();
        let around = n.saturating_sub(up);
        if around > 0 {
            let sealed_without: Vec<bool> = (0..n).map(|unit| unit >= around).collect();
            let tolerated = self.code.failures_tolerated(&sealed_without);
            let ack_min = self.io.config().ack_min_failures_tolerated;
            if around >= k || tolerated.is_none_or(|tolerated| tolerated < ack_min) {
                return Err(format!(
                    "{up} storage nodes up; an open stripe needs {n}, or all but the data units its seal may leave missing"
                ));
            }
        }
        let (mut placement, _) = place_new_stripe(&self.io, nodes, n, k).map_err(|e| e.to_string())?;
        // The Down nodes come last from the placer: they take the first data positions instead.
        placement.rotate_right(around);
        assert!(
            placement[..around].iter().all(|id| nodes.iter().any(|n| n.id == *id && n.state != NodeState::Up)),
            "the positions no append goes to are the nodes that are not Up"
        );
        Ok((placement, (0..k).map(|unit| unit >= around).collect()))
    }

    /// Bytes `range` of a packed object in stripe `stripe_id`.
    pub async fn read(
        &self,
        stripe_id: StripeId,
        unit: u16,
        offset: u64,
        replica_unit: Option<u16>,
        range: std::ops::Range<u64>,
    ) -> Result<Bytes, DataError> {
        let length = range.end - range.start;
        // A replica read has no plan, but the controller records it like every read: once, when it
        // is served or finally fails (a retry that finds the stripe sealed records itself).
        let controller = self.reads.controller();
        let arrival_ns = controller.map(|c| c.now_ns()).unwrap_or(0);
        for attempt in 0..READ_ATTEMPTS {
            let stripe = self.io.stripe(stripe_id).await?;
            let code = self.io.code(&stripe.code)?;
            let nodes = self.io.cluster().node_map().await?;
            if stripe.state == StripeState::Sealed {
                let unit = usize::from(unit);
                if unit >= code.data_units() || offset + range.end > stripe.unit_bytes {
                    return Err(DataError::Internal(format!(
                        "packed object outside data unit {unit} of stripe {stripe_id}"
                    )));
                }
                return self.reads.read_range(&nodes, &stripe, code.as_ref(), unit, offset + range.start, length).await;
            }
            let seq = replica_unit
                .ok_or_else(|| DataError::Internal(format!("object in open stripe {stripe_id} has no replica unit")))?;
            let result = self.read_replica(&stripe, &nodes, code.as_ref(), unit, seq, &range).await;
            let last = attempt + 1 == READ_ATTEMPTS;
            if let Some(controller) = controller
                && (result.is_ok() || last)
            {
                let read = Unplanned {
                    stripe: &stripe,
                    unit: usize::from(unit),
                    length,
                    arrival_ns,
                    rebuilt: Rebuilt::No,
                    served: result.is_ok(),
                    latency_class: self.io.cluster().call_class().0,
                    layers: layer_decisions(crate::profiles::active().as_deref(), "", None, Rebuilt::No, 0),
                };
                controller.record_unplanned(&read);
            }
            match result {
                Ok(bytes) => return Ok(bytes),
                Err(last_error) => {
                    tracing::info!(stripe = %stripe_id, %last_error, "no replica answered; the stripe may have been sealed");
                }
            }
        }
        Err(DataError::Unavailable(format!("object in open stripe {stripe_id}: no replica could be read")))
    }

    /// Bytes `range` of the object held in replica `seq` of data unit `unit` of open `stripe`: its
    /// copies raced a wait apart by the execution core (`copies::read_first_copy`), in the read
    /// policy's order and wait (`Controller::copy_read_order`); else the last error.
    async fn read_replica(
        &self,
        stripe: &StripeMeta,
        nodes: &NodeMap,
        code: &dyn ErasureCode,
        unit: u16,
        seq: u16,
        range: &std::ops::Range<u64>,
    ) -> Result<Bytes, String> {
        let length = range.end - range.start;
        let mut order = replica_nodes(stripe, code.data_units(), usize::from(unit));
        // The read policy's wait per copy and its slow nodes last (hedged); else the read timeout.
        let wait = match self.reads.controller() {
            Some(controller) => controller.copy_read_order(&mut order, length),
            None => self.reads.read_timeout(),
        };
        let targets: Vec<&NodeInfo> =
            order.iter().filter_map(|node_id| nodes.get(node_id).filter(|node| node.state == NodeState::Up)).collect();
        let copy =
            copies::CopyRange { stripe: stripe.id, unit, seq, offset: REPLICA_HEADER_BYTES + range.start, length };
        copies::read_first_copy(&self.io, code, &copy, &targets, wait).await
    }
}

/// An object's replicas written to the nodes of its stripe's replica unit; never placed elsewhere.
struct ReplicaWriter<'a> {
    io: &'a Arc<StripeIo>,
    nodes: &'a NodeMap,
    id: StripeId,
    seq: u16,
    replica: (Bytes, Bytes),
}

impl CopyWriter for ReplicaWriter<'_> {
    fn start(&mut self, _copy: usize, node: u32, _retry: bool) -> CopyTask {
        let (io, replica, id, seq) = (Arc::clone(self.io), self.replica.clone(), self.id, usize::from(self.seq));
        let node_id = NodeId(node);
        let node = self.nodes.get(&node_id).filter(|node| node.state == NodeState::Up).cloned();
        // In the writing request's latency class: a spawned task starts without it.
        tokio::spawn(crate::classes::carried(async move {
            match node {
                Some(node) => io.write_unit(&node, id, seq, replica).await,
                None => Err(format!("node {node_id} is not up")),
            }
        }))
    }

    fn place(&mut self, _copy: usize, _avoid: &[u32], _placement: &[u32]) -> Option<u32> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::DataConfig;
    use crate::data::io::connections::NodeConnections;

    #[tokio::test(start_paused = true)]
    async fn a_status_answers_with_the_last_counts_while_the_packer_is_busy() {
        let dir = tempfile::tempdir().unwrap();
        let meta: Arc<dyn meta::MetaStore> = Arc::new(meta::RedbStore::open(dir.path()).unwrap());
        let config = DataConfig::default();
        let cluster = Arc::new(NodeConnections::new(meta, "secret", Duration::from_secs(1), config.node_transport));
        let code_name = config.code_spec().unwrap().to_string();
        let io = Arc::new(StripeIo::new(cluster, config));
        let code = io.code(&code_name).unwrap();
        let packer = Packer::new(
            Arc::clone(&io),
            Arc::new(Reads::new(Arc::clone(&io))),
            (code, code_name),
            (None, LateCopies::new(16)),
        );
        let idle = packer.status().await;
        assert!(!idle.busy && idle.unsealed_stripes == 0, "{idle:?}");
        // Held as opening a stripe holds it across a metadata write.
        let held = packer.state.lock().await;
        let asked = tokio::time::Instant::now();
        let busy = packer.status().await;
        assert!(busy.busy, "{busy:?}");
        assert_eq!(asked.elapsed(), STATUS_WAIT, "answered once the wait ran out");
        drop(held);
        assert!(!packer.status().await.busy);
    }
}
