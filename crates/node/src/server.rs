//! The node's gRPC service: authenticates every request with the cluster secret, reads the latency
//! class of every request that creates tasks, translates messages to scheduler and store calls,
//! streams reads back in chunks and times every RPC.
//!
//! Owns the wire protocol and its validation. Must not execute tasks itself (everything that
//! costs disk time goes through the scheduler's queue) nor decide policy (a request's class is the
//! caller's to choose).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;
use tokio_stream::Stream;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status, Streaming};

use crate::classes::{CLASS_METADATA_KEY, ClassId, ClassScheduling};
use crate::error::{NodeError, UnitId};
use crate::proto::{self, node_server, write_unit_request::Part};
use crate::rpc::{SecretCheck, observe_rpc};
use crate::scheduler::{RangeResults, Scheduler, TaskOutcome, TaskTiming, blocking};
use crate::session::run::Peers;
use crate::session::{self, SessionPlan, Sessions};
use crate::store::{ConditionalDelete, UnitWrite};

/// Largest page `ListUnits` returns.
pub const MAX_LIST_UNITS: usize = 10_000;
/// Most units one `DeleteUnits` request may name.
pub const MAX_DELETE_UNITS: usize = 4096;
/// Largest page of `ListUnits` with checksums or descriptors (each unit's file is read).
pub const MAX_LIST_UNITS_WITH_CHECKSUMS: usize = 1_000;
/// A page with descriptors ends once they pass this (under gRPC's 4 MiB message).
const MAX_LIST_DESCRIPTOR_BYTES: usize = 2 << 20;

/// The gRPC `Node` service of one node.
#[derive(Debug, Clone)]
pub struct NodeService {
    scheduler: Arc<Scheduler>,
    identity: Arc<crate::identity::Identity>,
    scrubber: Arc<crate::scrub::Scrubber>,
    read_chunk_bytes: usize,
    node_label: String,
    sessions: Arc<Sessions>,
    peers: Arc<Peers>,
}

impl NodeService {
    /// A service over `scheduler`, streaming reads in chunks of `read_chunk_bytes`, reporting
    /// `scrubber`'s progress in its stats, running reconstruction sessions in `sessions` and
    /// pushing to peers with `secret`.
    pub fn new(
        scheduler: Arc<Scheduler>,
        identity: Arc<crate::identity::Identity>,
        scrubber: Arc<crate::scrub::Scrubber>,
        read_chunk_bytes: usize,
        sessions: Arc<Sessions>,
        secret: &str,
    ) -> Self {
        assert!(read_chunk_bytes > 0, "read chunks must be non-empty");
        let node_label = scheduler.node_id().to_string();
        let peers = Arc::new(Peers::new(secret));
        Self { scheduler, identity, scrubber, read_chunk_bytes, node_label, sessions, peers }
    }

    /// Opens a reconstruction session and runs it in its own task, which ends with the session:
    /// when its steps are done (the last message says how it went), when the requestor drops the
    /// stream, or at the plan's timeout.
    fn open_session(&self, class: ClassId, request: proto::ReconstructRequest) -> Result<SessionStream, Status> {
        // Refused before the session opens, not at its first local read.
        self.scheduler.admits(class)?;
        let plan = SessionPlan::from_proto(request, class)?;
        let open = self.sessions.open(&plan)?;
        let (requestor, answers) = tokio::sync::mpsc::channel(SESSION_STREAM_WINDOW);
        let (scheduler, peers) = (Arc::clone(&self.scheduler), Arc::clone(&self.peers));
        tokio::spawn(async move {
            let timeout = plan.timeout;
            let ran = tokio::select! {
                _ = requestor.closed() => Err(NodeError::Cancelled),
                _ = open.inbox().closed() => Err(NodeError::ShuttingDown),
                ran = tokio::time::timeout(timeout, session::run::run(&scheduler, &peers, &plan, open.inbox(), &requestor)) => {
                    ran.unwrap_or_else(|_| Err(NodeError::Unavailable(format!("timed out after {timeout:?}"))))
                }
            };
            drop(open);
            let outcome = if ran.is_ok() { "ok" } else { "failed" };
            metrics::counter!("lowtail_node_sessions_total", "outcome" => outcome).increment(1);
            let last = ran.map(|done| proto::ReconstructResponse { packet: 0, data: Bytes::new(), done: Some(done) });
            let _ = requestor.send(last.map_err(Status::from)).await;
        });
        Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(answers)))
    }

    /// Adds a peer's pushed packet to its session's inbox (on this node's emulated downlink).
    async fn push_inner(&self, push: proto::PushRequest) -> Result<proto::PushResponse, Status> {
        let id = session::session_id(&push.session)?;
        if push.data.is_empty() {
            return Err(Status::invalid_argument("a pushed packet without bytes"));
        }
        if push.to_node != self.scheduler.node_id() {
            let (meant, here) = (push.to_node, self.scheduler.node_id());
            return Err(Status::failed_precondition(format!("a push for node {meant} reached node {here}")));
        }
        let inbox = self.sessions.inbox(id)?;
        self.scheduler.ingress().transmit(push.data.len() as u64).await;
        let deposited = inbox.deposit(push.packet, push.data).await;
        if deposited.is_err() {
            self.sessions.forget_unopened(id, &inbox);
        }
        deposited.map(|()| proto::PushResponse {}).map_err(Status::from)
    }

    /// This service behind the secret check, ready to add to a tonic server.
    pub fn into_server(self, secret: &str) -> InterceptedService<node_server::NodeServer<Self>, SecretCheck> {
        let server = node_server::NodeServer::new(self)
            .max_decoding_message_size(crate::rpc::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(crate::rpc::MAX_MESSAGE_BYTES);
        InterceptedService::new(server, SecretCheck::new(secret))
    }

    /// Runs one RPC's `work`, records its duration and outcome (`observe`) and answers with it:
    /// every handler's frame, so none can forget its metric.
    async fn observed<T>(
        &self,
        rpc: &'static str,
        work: impl Future<Output = Result<T, Status>>,
    ) -> Result<Response<T>, Status> {
        let began = Instant::now();
        let result = work.await;
        self.observe(rpc, began, &result);
        result.map(Response::new)
    }

    fn observe<T>(&self, rpc: &'static str, began: Instant, result: &Result<T, Status>) {
        let code = match result {
            Ok(_) => "ok".to_string(),
            Err(status) => format!("{:?}", status.code()).to_lowercase(),
        };
        observe_rpc(self.node_label.clone(), rpc, began, code);
    }

    async fn write_unit_inner(
        &self,
        class: ClassId,
        mut stream: Streaming<proto::WriteUnitRequest>,
    ) -> Result<proto::WriteUnitResponse, Status> {
        // Refused before a byte is staged.
        self.scheduler.admits(class)?;
        let first = stream.message().await?.ok_or_else(|| Status::invalid_argument("empty write stream"))?;
        let Some(Part::Header(header)) = first.part else {
            return Err(Status::invalid_argument("the first message of a write must be its header"));
        };
        let unit = unit_id(header.stripe, header.unit)?;
        let store = Arc::clone(self.scheduler.store());
        let descriptor = header.descriptor;
        let mut staged = blocking(move || store.begin_described_write(unit, header.total_len, descriptor)).await?;
        // Bounded: every message must carry at least one byte and append refuses bytes past
        // total_len, so the loop runs at most total_len times.
        while let Some(message) = stream.message().await? {
            let chunk = match message.part {
                Some(Part::Chunk(chunk)) if !chunk.is_empty() => chunk,
                Some(Part::Chunk(_)) => return Err(Status::invalid_argument("empty data chunk")),
                _ => return Err(Status::invalid_argument("a write has exactly one header, first")),
            };
            staged = blocking(move || {
                staged.append(&chunk)?;
                Ok(staged)
            })
            .await?;
        }
        if staged.written() != staged.total_len() {
            return Err(NodeError::InvalidArgument(format!(
                "unit {unit} declared {} bytes but the stream ended after {}",
                staged.total_len(),
                staged.written()
            ))
            .into());
        }
        let timing = self.scheduler.write(class, UnitWrite::Staged(staged)).await?;
        Ok(proto::WriteUnitResponse { timing: Some(timing.into()) })
    }

    async fn read_range_inner(&self, class: ClassId, request: proto::ReadRangeRequest) -> Result<ReadStream, Status> {
        let unit = unit_id(request.stripe, request.unit)?;
        let (data, timing) = self.scheduler.read(class, unit, request.offset, request.length).await?;
        self.scheduler.egress().transmit(data.len() as u64).await;
        let mut timing = Some(proto::TaskTiming::from(timing));
        let messages = chunked(data, self.read_chunk_bytes)
            .into_iter()
            .map(|chunk| Ok(proto::ReadRangeResponse { chunk, timing: timing.take() }));
        Ok(Box::pin(tokio_stream::iter(messages.collect::<Vec<_>>())))
    }

    async fn read_units_inner(
        &self,
        class: ClassId,
        request: proto::ReadUnitsRequest,
    ) -> Result<ReadUnitsStream, Status> {
        let ranges = request
            .ranges
            .iter()
            .map(|range| Ok((unit_id(range.stripe, range.unit)?, range.offset, range.length)))
            .collect::<Result<Vec<_>, Status>>()?;
        let (results, timing) = self.scheduler.read_many(class, ranges).await?;
        self.scheduler.egress().transmit(crate::unit_stream::server::answer_bytes(&results)).await;
        let messages = read_units_messages(results, timing, self.read_chunk_bytes);
        Ok(Box::pin(tokio_stream::iter(messages.into_iter().map(Ok))))
    }

    fn stats_inner(&self) -> proto::StatsResponse {
        let scheduler = &self.scheduler;
        let counters = scheduler.counters();
        let queue = scheduler.queue_snapshot();
        let load = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
        proto::StatsResponse {
            node_id: scheduler.node_id(),
            uptime_ns: scheduler.now_ns(),
            bytes_read: load(&counters.bytes_read),
            bytes_written: load(&counters.bytes_written),
            tasks_completed: load(&counters.tasks_completed),
            tasks_cancelled: load(&counters.tasks_cancelled),
            tasks_rejected: load(&counters.tasks_rejected),
            tasks_failed: load(&counters.tasks_failed),
            background_tasks: load(&counters.background_tasks),
            background_bytes: load(&counters.background_bytes),
            units: scheduler.store().unit_count(),
            queued_bytes: queue.queued_bytes,
            queued_tasks: queue.queued_tasks,
            corrupt_units: scheduler
                .store()
                .corrupt_units()
                .into_iter()
                .map(|id| proto::UnitRef { stripe: id.stripe, unit: u32::from(id.unit) })
                .collect(),
            service_model: Some(proto::ServiceModel::from(&scheduler.service_model())),
            scrub: Some(scrub_progress(&self.scrubber)),
            sessions_open: self.sessions.open_count() as u64,
            sessions_started: self.sessions.started_count(),
            classes: scheduler
                .seen_classes()
                .into_iter()
                .map(|class| {
                    let class_counters = &counters.classes[class.index()];
                    proto::ClassStats {
                        class: u32::from(class.0),
                        tasks_completed: load(&class_counters.tasks_completed),
                        bytes_completed: load(&class_counters.bytes_completed),
                        service_total_ns: load(&class_counters.service_total_ns),
                    }
                })
                .collect(),
            class_scheduling: Some(proto::ClassScheduling::from(&scheduler.class_scheduling())),
        }
    }
}

/// The latency class a request names in its `x-lowtail-class` metadata (class 0 when it names
/// none), or why it is refused.
fn request_class<T>(request: &Request<T>) -> Result<ClassId, Status> {
    let Some(value) = request.metadata().get(CLASS_METADATA_KEY) else { return Ok(ClassId::DEFAULT) };
    let text = value.to_str().map_err(|_| {
        Status::invalid_argument(format!("{CLASS_METADATA_KEY} must be a decimal class number, not binary"))
    })?;
    Ok(ClassId::parse(text)?)
}

/// The scrubber's progress as the stats RPC reports it.
fn scrub_progress(scrubber: &crate::scrub::Scrubber) -> proto::ScrubProgress {
    let progress = scrubber.progress();
    proto::ScrubProgress {
        enabled: scrubber.enabled(),
        passes_completed: progress.passes_completed,
        last_pass_completed_ms: progress.last_pass_completed_ms,
        pass_started_ms: progress.pass_started_ms,
        pass_bytes_verified: progress.pass_bytes_verified,
        pass_bytes_total: progress.pass_bytes_total,
        corrupt_found: progress.corrupt_found,
        bytes_verified_since_start: scrubber.bytes_verified_total(),
    }
}

type SessionStream = Pin<Box<dyn Stream<Item = Result<proto::ReconstructResponse, Status>> + Send>>;
/// Packets a session queues towards the requestor beyond what HTTP/2's window holds.
const SESSION_STREAM_WINDOW: usize = 4;
type ReadStream = Pin<Box<dyn Stream<Item = Result<proto::ReadRangeResponse, Status>> + Send>>;
type ReadUnitsStream = Pin<Box<dyn Stream<Item = Result<proto::ReadUnitsResponse, Status>> + Send>>;

/// `data` in chunks of at most `chunk_bytes`, at least one (an empty range is one empty chunk, so
/// its message, which carries the timing or a range's head, is still sent).
fn chunked(mut data: Bytes, chunk_bytes: usize) -> Vec<Bytes> {
    let mut chunks = Vec::with_capacity(data.len().div_ceil(chunk_bytes).max(1));
    // Bounded: every pass takes up to chunk_bytes (> 0) and the loop ends once nothing is left.
    loop {
        chunks.push(data.split_to(data.len().min(chunk_bytes)));
        if data.is_empty() {
            return chunks;
        }
    }
}

/// A merged read's answer: per range, in order, its head (status, message) with its first chunk,
/// then its further chunks; the task timing rides in the very first message.
fn read_units_messages(results: RangeResults, timing: TaskTiming, chunk_bytes: usize) -> Vec<proto::ReadUnitsResponse> {
    let mut timing = Some(proto::TaskTiming::from(timing));
    let mut messages = Vec::with_capacity(results.len());
    // Bounded by the scheduler's limit on ranges per request.
    for result in results {
        let (status, message, data) = match result {
            Ok(data) => (proto::RangeStatus::Ok, String::new(), data),
            Err(error) => (range_status(&error), error.to_string(), Bytes::new()),
        };
        let mut head = Some(proto::RangeHead { status: status as i32, message });
        messages.extend(chunked(data, chunk_bytes).into_iter().map(|chunk| proto::ReadUnitsResponse {
            timing: timing.take(),
            range: head.take(),
            chunk,
        }));
    }
    messages
}

/// The status of a merged read's range that failed with `error` (the same failure a single read
/// reports with the matching gRPC code).
fn range_status(error: &NodeError) -> proto::RangeStatus {
    match error {
        NodeError::NotFound(_) => proto::RangeStatus::NotFound,
        NodeError::Corrupt { .. } => proto::RangeStatus::Corrupt,
        NodeError::OutOfRange { .. } => proto::RangeStatus::OutOfRange,
        _ => proto::RangeStatus::Internal,
    }
}

fn unit_id(stripe: u64, unit: u32) -> Result<UnitId, Status> {
    let unit = u16::try_from(unit)
        .map_err(|_| Status::invalid_argument(format!("unit index {unit} does not fit in 16 bits")))?;
    Ok(UnitId::new(stripe, unit))
}

/// The units of a `DeleteUnits` request, or why it is refused whole.
fn units_of(stripe: u64, units: &[u32]) -> Result<Vec<UnitId>, Status> {
    if units.is_empty() || units.len() > MAX_DELETE_UNITS {
        return Err(Status::invalid_argument(format!(
            "a delete of {} units; 1 to {MAX_DELETE_UNITS} per request",
            units.len()
        )));
    }
    units.iter().map(|&unit| unit_id(stripe, unit)).collect()
}

impl From<TaskTiming> for proto::TaskTiming {
    fn from(timing: TaskTiming) -> Self {
        let outcome = match timing.outcome {
            TaskOutcome::Ok => proto::TaskOutcome::Ok,
            TaskOutcome::Cancelled => proto::TaskOutcome::Cancelled,
            TaskOutcome::Failed => proto::TaskOutcome::Failed,
            TaskOutcome::Corrupt => proto::TaskOutcome::Corrupt,
        };
        Self {
            node_id: timing.node_id,
            task_id: timing.task_id,
            enqueue_ns: timing.enqueue_ns,
            start_ns: timing.start_ns,
            finish_ns: timing.finish_ns,
            bytes: timing.bytes,
            outcome: outcome as i32,
            bytes_ahead: timing.bytes_ahead,
            emulated_service_ns: timing.emulated_service_ns,
            class: u32::from(timing.class.0),
        }
    }
}

impl From<proto::TaskTiming> for TaskTiming {
    fn from(timing: proto::TaskTiming) -> Self {
        let outcome = match proto::TaskOutcome::try_from(timing.outcome) {
            Ok(proto::TaskOutcome::Ok) => TaskOutcome::Ok,
            Ok(proto::TaskOutcome::Cancelled) => TaskOutcome::Cancelled,
            Ok(proto::TaskOutcome::Corrupt) => TaskOutcome::Corrupt,
            _ => TaskOutcome::Failed,
        };
        Self {
            node_id: timing.node_id,
            task_id: timing.task_id,
            enqueue_ns: timing.enqueue_ns,
            start_ns: timing.start_ns,
            finish_ns: timing.finish_ns,
            bytes: timing.bytes,
            outcome,
            bytes_ahead: timing.bytes_ahead,
            emulated_service_ns: timing.emulated_service_ns,
            // A class past 8 bits cannot come from a node; saturate rather than wrap onto class 0.
            class: ClassId(u8::try_from(timing.class).unwrap_or(u8::MAX)),
        }
    }
}

#[tonic::async_trait]
impl node_server::Node for NodeService {
    async fn write_unit(
        &self,
        request: Request<Streaming<proto::WriteUnitRequest>>,
    ) -> Result<Response<proto::WriteUnitResponse>, Status> {
        self.observed("write_unit", async {
            self.write_unit_inner(request_class(&request)?, request.into_inner()).await
        })
        .await
    }

    type ReadRangeStream = ReadStream;

    async fn read_range(
        &self,
        request: Request<proto::ReadRangeRequest>,
    ) -> Result<Response<Self::ReadRangeStream>, Status> {
        // The handler waits for the queued task before answering: if the client resets the
        // stream meanwhile, this future is dropped and the scheduler cancels the task.
        self.observed("read_range", async {
            self.read_range_inner(request_class(&request)?, request.into_inner()).await
        })
        .await
    }

    type ReadUnitsStream = ReadUnitsStream;

    async fn read_units(
        &self,
        request: Request<proto::ReadUnitsRequest>,
    ) -> Result<Response<Self::ReadUnitsStream>, Status> {
        // As for read_range: the handler waits for the task, so a reset stream drops this future
        // and the scheduler cancels the task.
        self.observed("read_units", async {
            self.read_units_inner(request_class(&request)?, request.into_inner()).await
        })
        .await
    }

    async fn delete_unit(
        &self,
        request: Request<proto::DeleteUnitRequest>,
    ) -> Result<Response<proto::DeleteUnitResponse>, Status> {
        self.observed("delete_unit", async {
            let request = request.into_inner();
            let unit = unit_id(request.stripe, request.unit)?;
            let store = Arc::clone(self.scheduler.store());
            let (generation, only_if_corrupt) = (request.if_generation, request.only_if_corrupt);
            let answer = |outcome: ConditionalDelete| proto::DeleteUnitResponse {
                existed: outcome != ConditionalDelete::Absent,
                changed: outcome == ConditionalDelete::Changed,
            };
            blocking(move || match (generation, only_if_corrupt) {
                (0, false) => store.delete(unit).map(|existed| proto::DeleteUnitResponse { existed, changed: false }),
                (0, true) => store.delete_if_corrupt(unit).map(answer),
                (generation, false) => store.delete_if_generation(unit, generation).map(answer),
                (_, true) => {
                    Err(NodeError::InvalidArgument("if_generation and only_if_corrupt cannot be combined".into()))
                }
            })
            .await
            .map_err(Status::from)
        })
        .await
    }

    async fn delete_units(
        &self,
        request: Request<proto::DeleteUnitsRequest>,
    ) -> Result<Response<proto::DeleteUnitsResponse>, Status> {
        self.observed("delete_units", async {
            let request = request.into_inner();
            let units = units_of(request.stripe, &request.units)?;
            let store = Arc::clone(self.scheduler.store());
            blocking(move || store.delete_many(&units))
                .await
                .map(|existed| proto::DeleteUnitsResponse { existed: existed as u32 })
                .map_err(Status::from)
        })
        .await
    }

    async fn probe(&self, _request: Request<proto::ProbeRequest>) -> Result<Response<proto::ProbeResponse>, Status> {
        self.observed("probe", async {
            let queue = self.scheduler.queue_snapshot();
            let (service_rate_bytes_per_s, overhead_us) = self.scheduler.estimated_rate();
            Ok(proto::ProbeResponse {
                node_id: self.scheduler.node_id(),
                queued_bytes: queue.queued_bytes,
                queued_tasks: queue.queued_tasks,
                in_service_bytes: queue.in_service_bytes,
                in_service_tasks: queue.in_service_tasks,
                service_rate_bytes_per_s,
                overhead_us,
                now_ns: self.scheduler.now_ns(),
                egress_bytes_per_s: self.scheduler.egress().shape().bytes_per_s,
                classes: self.scheduler.class_queues().into_iter().map(proto::ClassQueue::from).collect(),
            })
        })
        .await
    }

    async fn stats(&self, _request: Request<proto::StatsRequest>) -> Result<Response<proto::StatsResponse>, Status> {
        self.observed("stats", async { Ok(self.stats_inner()) }).await
    }

    async fn list_units(
        &self,
        request: Request<proto::ListUnitsRequest>,
    ) -> Result<Response<proto::ListUnitsResponse>, Status> {
        self.observed("list_units", async {
            let request = request.into_inner();
            let after = request.after.map(|after| unit_id(after.stripe, after.unit)).transpose()?;
            let store = Arc::clone(self.scheduler.store());
            let reads_files = request.with_checksums || request.with_descriptors;
            let page = list_page(&store, after, request.limit, (request.with_checksums, request.with_descriptors));
            if reads_files {
                // Reads each unit's checksum table: off the runtime's threads.
                tokio::task::spawn_blocking(page).await.map_err(|e| Status::internal(e.to_string()))
            } else {
                Ok(page())
            }
        })
        .await
    }

    type ReconstructStream = SessionStream;

    async fn reconstruct(
        &self,
        request: Request<proto::ReconstructRequest>,
    ) -> Result<Response<Self::ReconstructStream>, Status> {
        self.observed("reconstruct", async { self.open_session(request_class(&request)?, request.into_inner()) }).await
    }

    async fn push(&self, request: Request<proto::PushRequest>) -> Result<Response<proto::PushResponse>, Status> {
        self.observed("push", self.push_inner(request.into_inner())).await
    }

    async fn set_service_model(
        &self,
        request: Request<proto::SetServiceModelRequest>,
    ) -> Result<Response<proto::SetServiceModelResponse>, Status> {
        self.observed("set_service_model", async {
            let model = request.into_inner().model.ok_or_else(|| Status::invalid_argument("model is required"))?;
            let model = self.scheduler.set_service_model(model.into())?;
            Ok(proto::SetServiceModelResponse { model: Some(proto::ServiceModel::from(&model)) })
        })
        .await
    }

    async fn set_class_scheduling(
        &self,
        request: Request<proto::SetClassSchedulingRequest>,
    ) -> Result<Response<proto::SetClassSchedulingResponse>, Status> {
        self.observed("set_class_scheduling", async {
            let scheduling =
                request.into_inner().scheduling.ok_or_else(|| Status::invalid_argument("scheduling is required"))?;
            let scheduling = self.scheduler.set_class_scheduling(ClassScheduling::try_from(scheduling)?)?;
            Ok(proto::SetClassSchedulingResponse { scheduling: Some(proto::ClassScheduling::from(&scheduling)) })
        })
        .await
    }

    async fn identity(
        &self,
        request: Request<proto::IdentityRequest>,
    ) -> Result<Response<proto::IdentityResponse>, Status> {
        self.observed("identity", async {
            let identity = Arc::clone(&self.identity);
            let current = match request.into_inner().claim {
                None => identity.current(),
                Some(claim) => {
                    let claim = crate::identity::Claim {
                        cluster_id: claim.cluster_id,
                        node_id: claim.node_id,
                        generation: claim.generation,
                    };
                    // A durable write (fsyncs): off the runtime's threads.
                    tokio::task::spawn_blocking(move || identity.claim(claim))
                        .await
                        .map_err(|e| Status::internal(e.to_string()))?
                        .map_err(|e| Status::failed_precondition(e.to_string()))?
                }
            };
            Ok(identity_response(current, self.scheduler.node_id()))
        })
        .await
    }
}

/// A page of the store's listing as `ListUnits` answers it, with each unit's checksum and
/// descriptor when asked.
fn list_page(
    store: &Arc<crate::store::UnitStore>,
    after: Option<UnitId>,
    limit: u32,
    (with_checksums, with_descriptors): (bool, bool),
) -> impl FnOnce() -> proto::ListUnitsResponse + Send + 'static {
    let most = if with_checksums || with_descriptors { MAX_LIST_UNITS_WITH_CHECKSUMS } else { MAX_LIST_UNITS };
    let limit = match limit {
        0 => most,
        limit => (limit as usize).min(most),
    };
    let store = Arc::clone(store);
    move || {
        let (listed, mut truncated) = store.list(after, limit);
        let mut units = Vec::with_capacity(listed.len());
        let mut descriptor_bytes = 0;
        for unit in &listed {
            let descriptor =
                if with_descriptors { store.descriptor(unit.id).unwrap_or_default() } else { Bytes::new() };
            descriptor_bytes += descriptor.len();
            units.push(proto::UnitInfo {
                stripe: unit.id.stripe,
                unit: u32::from(unit.id.unit),
                len: unit.data_len,
                generation: unit.generation,
                crc32c: if with_checksums { store.unit_checksum(unit.id).ok() } else { None },
                descriptor,
            });
            if descriptor_bytes > MAX_LIST_DESCRIPTOR_BYTES {
                truncated |= units.len() < listed.len();
                break;
            }
        }
        proto::ListUnitsResponse { units, truncated }
    }
}

fn identity_response(current: crate::identity::DirectoryIdentity, node_id: u32) -> proto::IdentityResponse {
    proto::IdentityResponse {
        directory_id: current.directory_id,
        created_ms: current.created_ms,
        held_units_at_creation: current.held_units_at_creation,
        claim: current.claim.map(|claim| proto::IdentityClaim {
            cluster_id: claim.cluster_id,
            node_id: claim.node_id,
            generation: claim.generation,
        }),
        configured_node_id: node_id,
        starts: current.starts,
    }
}
