//! `StripeIo`: unit-level I/O shared by the write and read paths and by repair: reading a unit
//! range from its node, the "Normal" degraded read (start a recovery-set read when the data unit's
//! node is Down, returns a corrupt unit, fails or is slower than the timeout; keep whichever answer
//! comes first and drop the other), gateway-side decoding, unit writes and deletes, the placer, and
//! the counters. In backend mode every unit operation is a request to the S3 backend instead
//! ([`crate::data::io::backend`]). Must not choose which units to read (that is [`crate::data::read::plan`]) or touch object
//! metadata.

use policy::reconstruct::ReconstructSettings;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use codec::ErasureCode;
use codec::engine::{Coefficients, Mode};
use futures_util::StreamExt;
use meta::{MetaError, NodeId, NodeInfo, StripeId, StripeMeta};

use crate::data::DataError;
use crate::data::config::DataConfig;
use crate::data::io::backend::S3Backend;
use crate::data::io::connections::NodeConnections;
use crate::data::io::placement::Placer;

/// Most corrupt-unit reports kept for repair; later ones are dropped (the node's own list of corrupt
/// units still has them, and repair polls it).
pub const MAX_CORRUPT_REPORTS: usize = 10_000;
/// Unit deletes one call keeps in flight. A sealed packed stripe deletes every replica of its
/// objects (hundreds per parity node): all at once, they queued ahead of client reads on the
/// nodes' connections and blocking pools and stalled them for hundreds of milliseconds.
pub const MAX_CONCURRENT_DELETES: usize = 16;

/// Node records keyed by id, as read once per operation.
pub type NodeMap = HashMap<NodeId, NodeInfo>;

/// Whether node `id` is registered in `nodes` and Up.
pub fn is_up(nodes: &NodeMap, id: NodeId) -> bool {
    nodes.get(&id).is_some_and(|node| node.state == meta::NodeState::Up)
}

/// Counters of the data path (also exported through the `metrics` crate).
#[derive(Debug, Default)]
pub struct DataCounters {
    /// Unit ranges served through a recovery set instead of their own unit.
    pub degraded_reads: AtomicU64,
    /// Corrupt units reported by nodes.
    pub corrupt_units: AtomicU64,
    /// Unit writes that failed and were placed elsewhere.
    pub write_retries: AtomicU64,
    /// Stripes recorded with units missing (a degraded write or seal: some unit no node took), left
    /// for repair through the under-redundant index.
    pub degraded_writes: AtomicU64,
    /// Unit ranges rebuilt segmented or by the nodes (`[data.reconstruct]`).
    pub rebuilt_reads: AtomicU64,
    /// Such rebuilds that gave up (the range was then read by recovery set).
    pub rebuild_fallbacks: AtomicU64,
    /// Units repair rebuilt straight into their new node by a dataflow among the nodes.
    pub repaired_on_nodes: AtomicU64,
}

/// Shared unit I/O; see the module documentation.
pub struct StripeIo {
    cluster: Arc<NodeConnections>,
    config: DataConfig,
    placer: Mutex<Placer>,
    codes: Mutex<HashMap<String, Arc<dyn ErasureCode>>>,
    corrupt_reports: Mutex<BTreeSet<(StripeId, u16, NodeId)>>,
    counters: DataCounters,
    /// How units that must be rebuilt are rebuilt: the config's at first, switched at run time
    /// (`PUT /admin/reconstruct`).
    reconstruct: Mutex<ReconstructSettings>,
    /// In backend mode, where every unit lives instead of on its node.
    backend: Option<S3Backend>,
    /// The emulated downlink (`[data.ingress]`; unshaped by default).
    ingress: node::link::Link,
    /// This process as a writer of pending units: `gateway_id@<random>`, new at each start.
    incarnation: String,
}

impl std::fmt::Debug for StripeIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeIo").field("config", &self.config).field("counters", &self.counters).finish()
    }
}

impl StripeIo {
    /// Unit I/O over `cluster` with `config` (validated by the caller).
    pub fn new(cluster: Arc<NodeConnections>, config: DataConfig) -> Self {
        let placer = Placer::new(config.rack_aware, config.placement_seed);
        Self {
            cluster,
            placer: Mutex::new(placer),
            codes: Mutex::new(HashMap::new()),
            backend: config.backend.as_ref().map(S3Backend::new),
            corrupt_reports: Mutex::new(BTreeSet::new()),
            counters: DataCounters::default(),
            reconstruct: Mutex::new(config.reconstruct.clone()),
            ingress: node::link::Link::with_shape(config.ingress),
            incarnation: format!("{}@{:016x}", config.gateway_id(), rand::random::<u64>()),
            config,
        }
    }

    /// This process as the writer of the pending units of stripes it acknowledges early
    /// ([`StripeMeta::pending_writer`]): the gateway id and a value new at each start, so that a
    /// restarted gateway tells its own earlier, dead landings from another gateway's live ones.
    pub fn incarnation(&self) -> &str {
        &self.incarnation
    }

    /// How a unit that must be rebuilt is rebuilt now.
    pub fn reconstruct(&self) -> ReconstructSettings {
        crate::data::lock(&self.reconstruct).clone()
    }

    /// Switches how units that must be rebuilt are rebuilt (reads already under way keep theirs);
    /// bad settings change nothing.
    pub fn set_reconstruct(&self, settings: ReconstructSettings) -> Result<ReconstructSettings, DataError> {
        crate::data::config::validate_reconstruct(&settings, &self.config)?;
        tracing::info!(kind = ?settings.kind, "reconstruction switched");
        *crate::data::lock(&self.reconstruct) = settings.clone();
        Ok(settings)
    }

    /// The emulated downlink every unit read's answer waits for (`[data.ingress]`).
    pub fn ingress(&self) -> &node::link::Link {
        &self.ingress
    }

    /// Reshapes the emulated downlink; a bad shape changes nothing.
    pub fn set_ingress(&self, shape: node::link::LinkShape) -> Result<node::link::LinkShape, DataError> {
        shape.validate().map_err(|why| DataError::Internal(format!("ingress: {why}")))?;
        tracing::info!(?shape, "gateway downlink reshaped");
        self.ingress.set_shape(shape);
        Ok(shape)
    }

    /// The S3 backend of a backend-mode gateway (`None` on a cluster of storage nodes).
    pub fn backend(&self) -> Option<&S3Backend> {
        self.backend.as_ref()
    }

    /// The cluster view.
    pub fn cluster(&self) -> &Arc<NodeConnections> {
        &self.cluster
    }

    /// The configuration.
    pub fn config(&self) -> &DataConfig {
        &self.config
    }

    /// The counters.
    pub fn counters(&self) -> &DataCounters {
        &self.counters
    }

    /// The placer (short critical sections only: never held across an await).
    pub fn placer(&self) -> MutexGuard<'_, Placer> {
        crate::data::lock(&self.placer)
    }

    /// The built code named `name` (cached: building inverts matrices).
    pub fn code(&self, name: &str) -> Result<Arc<dyn ErasureCode>, DataError> {
        let mut codes = crate::data::lock(&self.codes);
        if let Some(code) = codes.get(name) {
            return Ok(Arc::clone(code));
        }
        let spec: codec::CodeSpec = name.parse().map_err(|e| DataError::Internal(format!("code {name:?}: {e}")))?;
        let code: Arc<dyn ErasureCode> =
            Arc::from(spec.build().map_err(|e| DataError::Internal(format!("code {name:?}: {e}")))?);
        codes.insert(name.to_string(), Arc::clone(&code));
        Ok(code)
    }

    /// A stripe's record.
    pub async fn stripe(&self, id: StripeId) -> Result<StripeMeta, DataError> {
        self.cluster.meta().get_stripe(id).await.map_err(|e| match e {
            MetaError::NoSuchStripe(_) => DataError::Lost(format!("stripe {id} has no record")),
            other => DataError::Meta(other.to_string()),
        })
    }

    /// Records that `unit` of `stripe` failed its checksum on its node, for repair.
    pub fn report_corrupt(&self, stripe: StripeId, unit: u16, node: NodeId) {
        tracing::warn!(%stripe, unit, %node, "corrupt unit reported by its node; scheduled for repair");
        self.counters.corrupt_units.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("lowtail_gateway_corrupt_units_total").increment(1);
        let mut reports = crate::data::lock(&self.corrupt_reports);
        if reports.len() < MAX_CORRUPT_REPORTS {
            reports.insert((stripe, unit, node));
        }
    }

    /// Takes every pending corrupt-unit report: (stripe, unit, node that holds the corrupt copy).
    pub fn take_corrupt_reports(&self) -> Vec<(StripeId, u16, NodeId)> {
        let mut reports = crate::data::lock(&self.corrupt_reports);
        std::mem::take(&mut *reports).into_iter().collect()
    }

    /// Corrupt-unit reports not yet taken by repair.
    pub fn pending_corrupt_reports(&self) -> usize {
        crate::data::lock(&self.corrupt_reports).len()
    }

    /// Reads `length` bytes at `offset` of `unit` of `stripe` from the unit's node. A corrupt unit is
    /// reported; every failure comes back as a [`UnitReadError`] (the caller reads elsewhere).
    pub async fn read_unit(
        &self,
        nodes: &NodeMap,
        stripe: &StripeMeta,
        unit: usize,
        offset: u64,
        length: u64,
    ) -> Result<Bytes, UnitReadError> {
        self.read_unit_timed(nodes, stripe, unit, offset, length).await.map(|(data, _timing)| data)
    }

    /// [`StripeIo::read_unit`] with the node's timing of the task (for the controller's records).
    pub async fn read_unit_timed(
        &self,
        nodes: &NodeMap,
        stripe: &StripeMeta,
        unit: usize,
        offset: u64,
        length: u64,
    ) -> Result<(Bytes, node::TaskTiming), UnitReadError> {
        let node_id = stripe.placement[unit];
        if stripe.is_missing(unit) {
            // Never asked for: its node may hold a stale copy (an earlier, failed seal's).
            return Err(UnitReadError {
                message: format!("unit {}/{unit} is recorded missing", stripe.id),
                gone: true,
            });
        }
        let transient = |message: String| UnitReadError { message, gone: false };
        if let Some(backend) = &self.backend {
            return self.read_backend_unit(backend, stripe, unit, offset, length).await;
        }
        let node = nodes.get(&node_id).ok_or_else(|| transient(format!("node {node_id} is not registered")))?;
        let client = self.cluster.client(node).await.map_err(|e| transient(e.to_string()))?;
        let unit_index = u16::try_from(unit).map_err(|_| transient(format!("unit index {unit} too large")))?;
        self.cluster.loads().record_request(node_id, length);
        match client.read_range(stripe.id.0, unit_index, offset, length).await {
            Ok(answer) => {
                self.ingress.transmit(answer.0.len() as u64).await;
                Ok(answer)
            }
            Err(error) => {
                let gone = self.note_failed_read(stripe.id, unit_index, node_id, &error);
                Err(UnitReadError { message: format!("unit {}/{unit} on node {node_id}: {error}", stripe.id), gone })
            }
        }
    }

    /// Whether a failed read found its unit gone: corrupt, or not on its node (a lost file, a wiped
    /// disk). Either way the copy must be rebuilt, which is what a corrupt report asks repair to do
    /// (it records the unit missing first), so it is reported here.
    fn note_failed_read(&self, stripe: StripeId, unit: u16, node: NodeId, error: &node::ClientError) -> bool {
        let gone = error.is_corrupt() || error.is_not_found();
        if gone {
            self.report_corrupt(stripe, unit, node);
        }
        gone
    }

    /// Units `(stripe, unit, length)` held by `node`, each read whole, as ONE merged task there
    /// (`NodeClient::read_units`), with the node's timing of it: per unit its bytes, or `None`
    /// when it failed (a gone unit is reported as [`StripeIo::read_unit`] reports it; a unit recorded
    /// missing is not asked for). The error is the whole call's (nothing asked, no connection, the
    /// node refused the request, backend mode, which has no nodes).
    pub async fn read_whole_units_timed(
        &self,
        nodes: &NodeMap,
        node: NodeId,
        units: &[(&StripeMeta, u16, u64)],
    ) -> Result<(Vec<Option<Bytes>>, node::TaskTiming), String> {
        if self.backend.is_some() {
            return Err("backend mode has no merged reads".into());
        }
        let asked: Vec<usize> = (0..units.len()).filter(|&i| !units[i].0.is_missing(usize::from(units[i].1))).collect();
        if asked.is_empty() {
            return Err(format!("every unit asked of node {node} is recorded missing"));
        }
        let wire: Vec<node::UnitRange> = asked
            .iter()
            .map(|&i| node::UnitRange { stripe: units[i].0.id.0, unit: units[i].1, offset: 0, length: units[i].2 })
            .collect();
        let info = nodes.get(&node).ok_or_else(|| format!("node {node} is not registered"))?;
        let client = self.cluster.client(info).await.map_err(|e| e.to_string())?;
        self.cluster.loads().record_request(node, wire.iter().map(|range| range.length).sum());
        let (answers, timing) = client.read_units(&wire).await.map_err(|e| e.to_string())?;
        self.ingress.transmit(answered_bytes(&answers)).await;
        let mut bytes: Vec<Option<Bytes>> = vec![None; units.len()];
        for (&i, answer) in asked.iter().zip(answers) {
            match answer {
                Ok(read) => bytes[i] = Some(read),
                Err(error) => {
                    self.note_failed_read(units[i].0.id, units[i].1, node, &error);
                }
            }
        }
        Ok((bytes, timing))
    }

    /// Byte ranges `(offset, length)` of one `unit` of `stripe`, as ONE merged task on its node (one
    /// per-task overhead): every range's bytes and the node's timing of the task, or the first
    /// failure (a gone unit is reported as [`StripeIo::read_unit`] reports it). Not in backend
    /// mode, which has no nodes.
    pub async fn read_unit_ranges(
        &self,
        nodes: &NodeMap,
        stripe: &StripeMeta,
        unit: usize,
        ranges: &[(u64, u64)],
    ) -> Result<(Vec<Bytes>, node::TaskTiming), DataError> {
        let node_id = stripe.placement[unit];
        let failed =
            |why: String| DataError::Unavailable(format!("unit {}/{unit} on node {node_id}: {why}", stripe.id));
        if self.backend.is_some() || stripe.is_missing(unit) {
            return Err(failed("not readable as a merged task".into()));
        }
        let unit_index = u16::try_from(unit).map_err(|_| failed("unit index too large".into()))?;
        let wire: Vec<node::UnitRange> = ranges
            .iter()
            .map(|&(offset, length)| node::UnitRange { stripe: stripe.id.0, unit: unit_index, offset, length })
            .collect();
        let info = nodes.get(&node_id).ok_or_else(|| failed("not registered".into()))?;
        let client = self.cluster.client(info).await.map_err(|e| failed(e.to_string()))?;
        self.cluster.loads().record_request(node_id, ranges.iter().map(|&(_, length)| length).sum());
        let (answers, timing) = client.read_units(&wire).await.map_err(|e| failed(e.to_string()))?;
        self.ingress.transmit(answered_bytes(&answers)).await;
        let bytes = answers
            .into_iter()
            .map(|answer| {
                answer.map_err(|error| {
                    self.note_failed_read(stripe.id, unit_index, node_id, &error);
                    failed(error.to_string())
                })
            })
            .collect::<Result<Vec<Bytes>, DataError>>()?;
        Ok((bytes, timing))
    }

    /// A unit's range from the backend, timed as a task that was in service from the request to
    /// its answer (the backend is one black box: no queue of its own is seen).
    async fn read_backend_unit(
        &self,
        backend: &S3Backend,
        stripe: &StripeMeta,
        unit: usize,
        offset: u64,
        length: u64,
    ) -> Result<(Bytes, node::TaskTiming), UnitReadError> {
        match backend.get_range(stripe.id, unit, offset, length).await {
            Ok((bytes, took)) => {
                let timing = node::TaskTiming {
                    node_id: stripe.placement[unit].0,
                    task_id: 0,
                    enqueue_ns: 0,
                    start_ns: 0,
                    finish_ns: took.as_nanos() as u64,
                    bytes: length,
                    outcome: node::TaskOutcome::Ok,
                    bytes_ahead: 0,
                    emulated_service_ns: 0,
                    class: node::ClassId::DEFAULT,
                };
                Ok((bytes, timing))
            }
            Err(error) => {
                if error.not_found {
                    // Gone from the backend: repair records it missing and rebuilds it.
                    self.report_corrupt(stripe.id, unit as u16, stripe.placement[unit]);
                }
                Err(UnitReadError { message: error.message, gone: error.not_found })
            }
        }
    }

    /// Counts a unit range served through a recovery set (counter and metric).
    pub fn count_degraded(&self) {
        self.counters.degraded_reads.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("lowtail_gateway_degraded_reads_total").increment(1);
    }

    /// Writes a unit to `node`, carrying `descriptor` (what the unit is, [`crate::data::io::descriptor`];
    /// empty: none); returns once it is durable there. A backend's keys carry no descriptor.
    pub async fn write_unit(
        &self,
        node: &NodeInfo,
        stripe: StripeId,
        unit: usize,
        (data, descriptor): (Bytes, Bytes),
    ) -> Result<(), String> {
        if let Some(backend) = &self.backend {
            return backend.put_unit(stripe, unit, data).await;
        }
        let client = self.cluster.client(node).await.map_err(|e| format!("node {}: {e}", node.id))?;
        let unit_index = u16::try_from(unit).map_err(|_| format!("unit index {unit} too large"))?;
        self.cluster.loads().record_request(node.id, data.len() as u64);
        client
            .write_described_unit(stripe.0, unit_index, data, descriptor)
            .await
            .map(|_| ())
            .map_err(|e| format!("node {}: {e}", node.id))
    }

    /// The descriptor a unit of `stripe` rewritten at index `unit` (by repair, by the mover) should
    /// carry, as the stripe's other units tell it: the unit's own copy on `own` first (a mover's
    /// source), then any other unit's on an Up node (a packed data unit takes its own objects from
    /// a parity unit's list). Empty when none answers with one: the unit is then written
    /// undescribed, its stripe described by its other units.
    pub async fn descriptor_for(
        &self,
        nodes: &NodeMap,
        stripe: &StripeMeta,
        unit: usize,
        own: Option<&NodeInfo>,
    ) -> Bytes {
        if self.backend.is_some() {
            return Bytes::new();
        }
        let Ok(code) = self.code(&stripe.code) else { return Bytes::new() };
        let k = code.data_units();
        let mut sources: Vec<(usize, &NodeInfo)> = own.map(|node| (unit, node)).into_iter().collect();
        for (other, node) in stripe.placement.iter().enumerate().filter(|&(other, _)| other != unit) {
            if let Some(info) = nodes.get(node).filter(|n| n.state == meta::NodeState::Up && !stripe.is_missing(other))
            {
                sources.push((other, info));
            }
        }
        // Bounded: at most one own copy and n - 1 others.
        for (source, node) in sources {
            let Some(descriptor) = self.unit_descriptor(node, stripe.id, source).await else { continue };
            let Some(decoded) = crate::data::io::descriptor::UnitDescriptor::decode(&descriptor) else { continue };
            return match decoded.holds {
                crate::data::io::descriptor::Holds::Packed { .. } if source < k && source != unit => continue,
                crate::data::io::descriptor::Holds::Packed { .. } => decoded.of_packed_unit(unit, k).encode(),
                _ => descriptor,
            };
        }
        Bytes::new()
    }

    /// The descriptor of unit `unit` of `stripe` on `node`, if it answers with a non-empty one.
    async fn unit_descriptor(&self, node: &NodeInfo, stripe: StripeId, unit: usize) -> Option<Bytes> {
        let unit = u16::try_from(unit).ok()?;
        let after = match unit.checked_sub(1) {
            Some(before) => (stripe.0, before),
            None => (stripe.0.checked_sub(1)?, u16::MAX),
        };
        let client = self.cluster.client(node).await.ok()?;
        let listed = client.list_units_with_descriptors(Some(after), 1).await.ok()?;
        let found = listed.units.into_iter().next()?;
        (found.stripe == stripe.0 && found.unit == u32::from(unit) && !found.descriptor.is_empty())
            .then_some(found.descriptor)
    }

    /// Deletes a unit from `node`, logging (not returning) failures: space on a dead node is
    /// reclaimed when it is wiped or its orphans collected.
    pub async fn delete_unit_best_effort(&self, node: &NodeInfo, stripe: StripeId, unit: usize) {
        let Ok(unit_index) = u16::try_from(unit) else { return };
        if let Some(backend) = &self.backend {
            if let Err(error) = backend.delete_unit(stripe, unit).await {
                metrics::counter!("lowtail_gateway_unit_deletes_failed_total").increment(1);
                tracing::info!(%stripe, unit, %error, "could not delete a unit from the backend; its key leaks");
            }
            return;
        }
        let result = match self.cluster.client(node).await {
            Ok(client) => client.delete_unit(stripe.0, unit_index).await.map(|_| ()),
            Err(error) => Err(error),
        };
        if let Err(error) = result {
            // Expected whenever a node is down; the orphan collector deletes the copy later. A
            // count, not a line per unit (a dead node would log one per unit it held).
            metrics::counter!("lowtail_gateway_unit_deletes_failed_total").increment(1);
            tracing::debug!(%stripe, unit, node = %node.id, %error, "could not delete unit; it is orphaned");
        }
    }

    /// Deletes units `(unit, node)` of `stripe`, best effort: one request per node for all of its
    /// units (up to [`node::server::MAX_DELETE_UNITS`] each), [`MAX_CONCURRENT_DELETES`] requests
    /// in flight.
    pub async fn delete_units_best_effort(&self, nodes: &NodeMap, stripe: StripeId, units: &[(usize, NodeId)]) {
        if self.backend.is_some() {
            let deletes: Vec<_> = units
                .iter()
                .filter_map(|&(unit, node)| {
                    nodes.get(&node).map(|info| self.delete_unit_best_effort(info, stripe, unit))
                })
                .collect();
            let mut deletes = futures_util::stream::iter(deletes).buffer_unordered(MAX_CONCURRENT_DELETES);
            while deletes.next().await.is_some() {}
            return;
        }
        let mut by_node: HashMap<NodeId, Vec<u16>> = HashMap::new();
        for &(unit, node) in units {
            if let Ok(unit) = u16::try_from(unit) {
                by_node.entry(node).or_default().push(unit);
            }
        }
        let batches: Vec<_> = by_node
            .iter()
            .filter_map(|(node, units)| nodes.get(node).map(|info| (info, units)))
            .flat_map(|(info, units)| units.chunks(node::server::MAX_DELETE_UNITS).map(move |chunk| (info, chunk)))
            .map(|(info, chunk)| self.delete_batch_best_effort(info, stripe, chunk))
            .collect();
        let mut batches = futures_util::stream::iter(batches).buffer_unordered(MAX_CONCURRENT_DELETES);
        while batches.next().await.is_some() {}
    }

    /// One `DeleteUnits` request to `node`, failures counted and logged (the orphan collector
    /// deletes what is left).
    async fn delete_batch_best_effort(&self, node: &NodeInfo, stripe: StripeId, units: &[u16]) {
        let result = match self.cluster.client(node).await {
            Ok(client) => client.delete_units(stripe.0, units).await.map(|_| ()),
            Err(error) => Err(error),
        };
        if let Err(error) = result {
            // As for one unit: expected whenever a node is down (or of a build without the batch
            // request, during an upgrade); the orphan collector deletes the copies later.
            metrics::counter!("lowtail_gateway_unit_deletes_failed_total").increment(units.len() as u64);
            tracing::debug!(%stripe, units = units.len(), node = %node.id, %error, "could not delete units; they are orphaned");
        }
    }
}

/// Why a unit read failed, and whether the copy itself is gone (corrupt, or missing on its node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitReadError {
    /// What happened.
    pub message: String,
    /// The copy is corrupt or missing: asking again will not help. Otherwise the node did not
    /// answer in time, refused, or was unreachable.
    pub gone: bool,
}

impl std::fmt::Display for UnitReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The error of a read that found too few units: data loss only when the units known gone (corrupt
/// or absent, or recorded missing and not still landing) leave too few to decode; otherwise the
/// data is there, on nodes that are Down or did not answer, or still landing, and the client should
/// retry (503).
pub(crate) fn undecodable(
    stripe: StripeId,
    target: usize,
    failed: &BTreeSet<usize>,
    decodable_when_back: bool,
) -> DataError {
    if decodable_when_back {
        DataError::Unavailable(format!(
            "unit {stripe}/{target}: units {failed:?} unreadable now (nodes down or not answering, or units still \
             landing); retry"
        ))
    } else {
        DataError::Lost(format!("unit {stripe}/{target}: units {failed:?} unreadable, too few left to decode"))
    }
}

/// Bytes a merged read's answers carry (what the emulated downlink is held for).
fn answered_bytes<E>(answers: &[Result<Bytes, E>]) -> u64 {
    answers.iter().map(|answer| answer.as_ref().map_or(0, |bytes| bytes.len() as u64)).sum()
}

/// `target = Σ c_j · sources_j` with the codec's repair coefficients, over equally long buffers.
pub fn decode(code: &dyn ErasureCode, target: usize, sources: &[usize], buffers: &[Bytes]) -> Result<Bytes, DataError> {
    assert_eq!(sources.len(), buffers.len(), "one buffer per source");
    let length = buffers.first().map_or(0, Bytes::len);
    assert!(buffers.iter().all(|b| b.len() == length), "recovery-set buffers of one length");
    let coefficients = code
        .repair_coefficients(target, sources)
        .map_err(|e| DataError::Internal(format!("repair coefficients of unit {target} from {sources:?}: {e}")))?;
    if length == 0 {
        return Ok(Bytes::new());
    }
    let mut output = vec![0u8; length];
    let slices: Vec<&[u8]> = buffers.iter().map(|b| b.as_ref()).collect();
    let coefficients = Coefficients::new(1, sources.len(), coefficients);
    codec::engine::best().combine(&coefficients, &slices, &mut [output.as_mut_slice()], Mode::Overwrite);
    Ok(Bytes::from(output))
}
