//! `NodeClient`: the typed client of a storage node's RPC, for the gateway, repair and tests.
//!
//! Unit bytes (reads, merged reads and writes) travel over the unit stream by default, or over
//! gRPC ([`NodeClient::with_transport`]); every other call is gRPC.
//!
//! Owns connecting, attaching the cluster secret (and the latency class of the calls that create
//! tasks), chunking writes, reassembling streamed reads (a merged read's ranges among them) and
//! timeouts. Must not retry, fail over, pick nodes or choose a class: that is policy, the
//! caller's business.
//! Dropping any returned future cancels the request; the node then removes the task from its
//! queue if it was still waiting.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio_stream::{Stream, StreamExt};
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use crate::classes::{CLASS_METADATA_KEY, ClassId, ClassQueueState, ClassScheduling};
use crate::error::UnitId;
use crate::proto::{self, node_client, write_unit_request::Part};
use crate::rpc::{AttachSecret, CONNECT_TIMEOUT, ClientError, MAX_MESSAGE_BYTES, UnitRange, protocol};
use crate::scheduler::TaskTiming;
use crate::service_model::ServiceModel;
use crate::store::ConditionalDelete;
use crate::unit_stream::UnitTransport;
use crate::unit_stream::client::StreamClient;

/// Size of the chunks [`NodeClient::write_unit`] sends.
pub const WRITE_CHUNK_BYTES: usize = 1 << 20;
/// Default limit on one whole call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Queue state a probe returns.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeReply {
    /// Node probed.
    pub node_id: u32,
    /// Bytes waiting.
    pub queued_bytes: u64,
    /// Tasks waiting.
    pub queued_tasks: u64,
    /// Bytes in service.
    pub in_service_bytes: u64,
    /// Tasks in service.
    pub in_service_tasks: u64,
    /// Estimated service rate, bytes/s (0 = not yet measured).
    pub service_rate_bytes_per_s: f64,
    /// Per-task overhead that goes with the rate, µs.
    pub overhead_us: u64,
    /// The emulated egress link's rate, bytes/s (0 = not shaped).
    pub egress_bytes_per_s: f64,
    /// Node clock when probed, ns.
    pub now_ns: u64,
    /// Per latency class, every class that has had a task on the node, by class (the totals
    /// above include them all, and background load).
    pub classes: Vec<ClassQueueState>,
}

/// Typed client of one storage node. Cheap to clone (one shared HTTP/2 connection for the control
/// calls, one shared pool of unit-stream connections for unit bytes).
#[derive(Clone, Debug)]
pub struct NodeClient {
    inner: node_client::NodeClient<InterceptedService<Channel, AttachSecret>>,
    units: Arc<StreamClient>,
    transport: UnitTransport,
    timeout: Duration,
    /// The latency class of the tasks this client's calls create.
    class: ClassId,
}

impl NodeClient {
    /// Connects to the node at `addr` (`host:port` or an `http://` URI) with the cluster secret.
    pub async fn connect(addr: &str, secret: &str) -> Result<Self, ClientError> {
        let uri = if addr.contains("://") { addr.to_string() } else { format!("http://{addr}") };
        let endpoint = Endpoint::from_shared(uri)
            .map_err(|e| ClientError::Invalid(format!("address {addr}: {e}")))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true);
        if secret.is_empty() {
            return Err(ClientError::Invalid("empty cluster secret".into()));
        }
        let value: AsciiMetadataValue = MetadataValue::try_from(secret)
            .map_err(|_| ClientError::Invalid("the cluster secret must be visible ASCII".into()))?;
        let authority = endpoint.uri().authority().map(|authority| authority.to_string());
        let authority = authority.ok_or_else(|| ClientError::Invalid(format!("address {addr} names no host")))?;
        let units = Arc::new(StreamClient::new(&authority, secret)?);
        let channel =
            endpoint.connect().await.map_err(|source| ClientError::Connect { addr: addr.to_string(), source })?;
        let inner = node_client::NodeClient::with_interceptor(channel, AttachSecret::new(value))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(Self {
            inner,
            units,
            transport: UnitTransport::default(),
            timeout: DEFAULT_TIMEOUT,
            class: ClassId::DEFAULT,
        })
    }

    /// The same client moving unit bytes over `transport`.
    pub fn with_transport(mut self, transport: UnitTransport) -> Self {
        self.transport = transport;
        self
    }

    /// The same client with another limit on each whole call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The same client with its tasks (writes, reads, merged reads, reconstruction sessions) in
    /// latency class `class`. Not checked here: a node refuses a class it does not serve with
    /// `InvalidArgument`, whatever the transport.
    pub fn with_class(mut self, class: ClassId) -> Self {
        self.class = class;
        self
    }

    /// The latency class of this client's tasks.
    pub fn class(&self) -> ClassId {
        self.class
    }

    /// `message` as a request carrying this client's class (class 0 is sent as no entry: a node
    /// reads that as class 0, and an older node sees the request it always did).
    fn classed<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if self.class != ClassId::DEFAULT {
            let value = AsciiMetadataValue::try_from(self.class.0.to_string()).expect("a decimal number is ASCII");
            request.metadata_mut().insert(CLASS_METADATA_KEY, value);
        }
        request
    }

    async fn timed<T>(
        &self,
        operation: &'static str,
        call: impl Future<Output = Result<T, ClientError>>,
    ) -> Result<T, ClientError> {
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| ClientError::Timeout { operation, timeout: self.timeout })?
    }

    /// Writes a unit held in memory; returns once it is durable on the node.
    pub async fn write_unit(&self, stripe: u64, unit: u16, data: Bytes) -> Result<TaskTiming, ClientError> {
        self.write_described_unit(stripe, unit, data, Bytes::new()).await
    }

    /// [`NodeClient::write_unit`] of a unit that carries `descriptor` (what the writer says the
    /// unit is; at most 1 MiB; empty: none), which the node keeps with it.
    pub async fn write_described_unit(
        &self,
        stripe: u64,
        unit: u16,
        data: Bytes,
        descriptor: Bytes,
    ) -> Result<TaskTiming, ClientError> {
        if self.transport == UnitTransport::Stream {
            let write = self.units.write(self.class, UnitId::new(stripe, unit), data, descriptor);
            return self.timed("write_unit", write).await;
        }
        let total_len = data.len() as u64;
        let chunks = (0..data.len())
            .step_by(WRITE_CHUNK_BYTES)
            .map(move |at| data.slice(at..(at + WRITE_CHUNK_BYTES).min(data.len())));
        self.write_described_unit_stream((stripe, unit, descriptor), total_len, tokio_stream::iter(chunks)).await
    }

    /// Writes a unit of `total_len` bytes from a stream of non-empty chunks (each at most 2 MiB),
    /// so a unit need not fit in memory.
    pub async fn write_unit_stream(
        &self,
        stripe: u64,
        unit: u16,
        total_len: u64,
        chunks: impl Stream<Item = Bytes> + Send + 'static,
    ) -> Result<TaskTiming, ClientError> {
        self.write_described_unit_stream((stripe, unit, Bytes::new()), total_len, chunks).await
    }

    /// [`NodeClient::write_unit_stream`] of a unit that carries a descriptor.
    pub async fn write_described_unit_stream(
        &self,
        (stripe, unit, descriptor): (u64, u16, Bytes),
        total_len: u64,
        chunks: impl Stream<Item = Bytes> + Send + 'static,
    ) -> Result<TaskTiming, ClientError> {
        const OP: &str = "write_unit";
        if self.transport == UnitTransport::Stream {
            let unit = (UnitId::new(stripe, unit), descriptor);
            let write = self.units.write_stream(self.class, unit, total_len, chunks);
            return self.timed(OP, write).await;
        }
        let header = proto::WriteUnitRequest {
            part: Some(Part::Header(proto::WriteHeader { stripe, unit: u32::from(unit), total_len, descriptor })),
        };
        let messages = self.classed(
            tokio_stream::once(header)
                .chain(chunks.map(|chunk| proto::WriteUnitRequest { part: Some(Part::Chunk(chunk)) })),
        );
        let mut inner = self.inner.clone();
        self.timed(OP, async move {
            let reply =
                inner.write_unit(messages).await.map_err(|status| ClientError::Status { operation: OP, status })?;
            let timing = reply.into_inner().timing.ok_or_else(|| protocol(OP, "no task timing"))?;
            Ok(timing.into())
        })
        .await
    }

    /// Opens this node's part of a reconstruction dataflow (see `Reconstruct` in node.proto): the
    /// packets it sends back, then a last message with the session's [`proto::SessionDone`]. The
    /// session's own timeout bounds it (not the client's); dropping the stream cancels it.
    pub async fn reconstruct(
        &self,
        request: proto::ReconstructRequest,
    ) -> Result<tonic::Streaming<proto::ReconstructResponse>, ClientError> {
        const OP: &str = "reconstruct";
        let mut inner = self.inner.clone();
        let request = self.classed(request);
        let opened = self.timed(OP, async move {
            inner.reconstruct(request).await.map_err(|status| ClientError::Status { operation: OP, status })
        });
        Ok(opened.await?.into_inner())
    }

    /// Reads `length` bytes at `offset` of a unit, with the node's timing of the task.
    pub async fn read_range(
        &self,
        stripe: u64,
        unit: u16,
        offset: u64,
        length: u64,
    ) -> Result<(Bytes, TaskTiming), ClientError> {
        const OP: &str = "read_range";
        if self.transport == UnitTransport::Stream {
            return self.timed(OP, self.units.read(self.class, UnitId::new(stripe, unit), offset, length)).await;
        }
        let request = self.classed(proto::ReadRangeRequest { stripe, unit: u32::from(unit), offset, length });
        let mut inner = self.inner.clone();
        self.timed(OP, async move {
            let status = |status| ClientError::Status { operation: OP, status };
            let mut stream = inner.read_range(request).await.map_err(status)?.into_inner();
            let capacity = usize::try_from(length).map_err(|_| protocol(OP, "length does not fit in memory"))?;
            let mut chunks: Vec<Bytes> = Vec::new();
            let mut received = 0usize;
            let mut timing = None;
            // Bounded by the node: it sends `length` bytes in finitely many chunks; more is refused.
            while let Some(message) = stream.message().await.map_err(status)? {
                if timing.is_none() {
                    timing = message.timing;
                }
                if received + message.chunk.len() > capacity {
                    return Err(protocol(OP, format!("node sent more than the {length} bytes asked for")));
                }
                received += message.chunk.len();
                chunks.push(message.chunk);
            }
            if received != capacity {
                return Err(protocol(OP, format!("node sent {received} of {length} bytes")));
            }
            let timing = timing.ok_or_else(|| protocol(OP, "no task timing"))?;
            Ok((joined(chunks), timing.into()))
        })
        .await
    }

    /// Reads every range as ONE task in the node's queue (one per-task overhead, the sum of the
    /// bytes), with the node's timing of that task. The outer error is the call's (connection,
    /// refusal of the whole request, timeout); each inner result is one range's, in order
    /// (`ClientError::Status` with NotFound / DataLoss / OutOfRange, so `is_not_found()` and
    /// `is_corrupt()` work on it as on `read_range`'s errors).
    ///
    /// The node refuses the whole request (`InvalidArgument`) when it is empty, has more than
    /// [`crate::MAX_RANGES_PER_READ`] ranges or asks more than [`crate::MAX_MERGED_READ_BYTES`] in
    /// all. Dropping the future cancels the node's task.
    pub async fn read_units(
        &self,
        ranges: &[UnitRange],
    ) -> Result<(Vec<Result<Bytes, ClientError>>, TaskTiming), ClientError> {
        const OP: &str = "read_units";
        if self.transport == UnitTransport::Stream {
            return self.timed(OP, self.units.read_many(self.class, ranges)).await;
        }
        let request = self.classed(proto::ReadUnitsRequest {
            ranges: ranges
                .iter()
                .map(|range| proto::UnitRange {
                    stripe: range.stripe,
                    unit: u32::from(range.unit),
                    offset: range.offset,
                    length: range.length,
                })
                .collect(),
        });
        let mut inner = self.inner.clone();
        self.timed(OP, async move {
            let status = |status| ClientError::Status { operation: OP, status };
            let mut stream = inner.read_units(request).await.map_err(status)?.into_inner();
            let mut assembly = RangeAssembly { ranges, answers: Vec::with_capacity(ranges.len()), receiving: None };
            let mut timing = None;
            // Bounded by the node: it sends the ranges asked for in finitely many chunks; the
            // assembly refuses a range or a byte more.
            while let Some(mut message) = stream.message().await.map_err(status)? {
                if timing.is_none() {
                    timing = message.timing.take();
                }
                assembly.push(message)?;
            }
            let timing = timing.ok_or_else(|| protocol(OP, "no task timing"))?;
            Ok((assembly.finish()?, timing.into()))
        })
        .await
    }

    /// Deletes a unit; returns whether it existed.
    pub async fn delete_unit(&self, stripe: u64, unit: u16) -> Result<bool, ClientError> {
        const OP: &str = "delete_unit";
        let mut inner = self.inner.clone();
        let request =
            proto::DeleteUnitRequest { stripe, unit: u32::from(unit), if_generation: 0, only_if_corrupt: false };
        self.timed(OP, async move {
            let reply =
                inner.delete_unit(request).await.map_err(|status| ClientError::Status { operation: OP, status })?;
            Ok(reply.into_inner().existed)
        })
        .await
    }

    /// Deletes `units` of `stripe` together (at most [`crate::server::MAX_DELETE_UNITS`]); returns
    /// how many existed.
    pub async fn delete_units(&self, stripe: u64, units: &[u16]) -> Result<u32, ClientError> {
        const OP: &str = "delete_units";
        let mut inner = self.inner.clone();
        let request = proto::DeleteUnitsRequest { stripe, units: units.iter().map(|&unit| u32::from(unit)).collect() };
        self.timed(OP, async move {
            let reply =
                inner.delete_units(request).await.map_err(|status| ClientError::Status { operation: OP, status })?;
            Ok(reply.into_inner().existed)
        })
        .await
    }

    /// Deletes a unit only if it still has `generation` (from [`NodeClient::list_units`]): a unit
    /// written again since it was listed is kept.
    pub async fn delete_unit_if_generation(
        &self,
        stripe: u64,
        unit: u16,
        generation: u64,
    ) -> Result<ConditionalDelete, ClientError> {
        assert_ne!(generation, 0, "generation 0 would delete unconditionally");
        let request = proto::DeleteUnitRequest {
            stripe,
            unit: u32::from(unit),
            if_generation: generation,
            only_if_corrupt: false,
        };
        self.conditional_delete(request).await
    }

    /// Deletes a unit only while the node lists it corrupt: a copy rewritten since it was listed
    /// (which clears the mark) is kept.
    pub async fn delete_unit_if_corrupt(&self, stripe: u64, unit: u16) -> Result<ConditionalDelete, ClientError> {
        let request =
            proto::DeleteUnitRequest { stripe, unit: u32::from(unit), if_generation: 0, only_if_corrupt: true };
        self.conditional_delete(request).await
    }

    async fn conditional_delete(&self, request: proto::DeleteUnitRequest) -> Result<ConditionalDelete, ClientError> {
        const OP: &str = "delete_unit";
        let mut inner = self.inner.clone();
        self.timed(OP, async move {
            let reply =
                inner.delete_unit(request).await.map_err(|status| ClientError::Status { operation: OP, status })?;
            let reply = reply.into_inner();
            Ok(match (reply.existed, reply.changed) {
                (_, true) => ConditionalDelete::Changed,
                (true, false) => ConditionalDelete::Deleted,
                (false, false) => ConditionalDelete::Absent,
            })
        })
        .await
    }

    /// Queue state and estimated service rate.
    pub async fn probe(&self) -> Result<ProbeReply, ClientError> {
        const OP: &str = "probe";
        let mut inner = self.inner.clone();
        self.timed(OP, async move {
            let reply = inner
                .probe(proto::ProbeRequest {})
                .await
                .map_err(|status| ClientError::Status { operation: OP, status })?;
            let reply = reply.into_inner();
            Ok(ProbeReply {
                node_id: reply.node_id,
                queued_bytes: reply.queued_bytes,
                queued_tasks: reply.queued_tasks,
                in_service_bytes: reply.in_service_bytes,
                in_service_tasks: reply.in_service_tasks,
                service_rate_bytes_per_s: reply.service_rate_bytes_per_s,
                overhead_us: reply.overhead_us,
                egress_bytes_per_s: reply.egress_bytes_per_s,
                now_ns: reply.now_ns,
                classes: reply.classes.into_iter().map(ClassQueueState::from).collect(),
            })
        })
        .await
    }

    /// The node's counters, corrupt units, queue and service model.
    pub async fn stats(&self) -> Result<proto::StatsResponse, ClientError> {
        const OP: &str = "stats";
        let mut inner = self.inner.clone();
        self.timed(OP, async move {
            let reply = inner
                .stats(proto::StatsRequest {})
                .await
                .map_err(|status| ClientError::Status { operation: OP, status })?;
            Ok(reply.into_inner())
        })
        .await
    }

    /// One page of the units stored, after `after` (exclusive), at most `limit` (0 = node maximum).
    pub async fn list_units(
        &self,
        after: Option<(u64, u16)>,
        limit: u32,
    ) -> Result<proto::ListUnitsResponse, ClientError> {
        self.list_units_page(after, limit, (false, false)).await
    }

    /// [`NodeClient::list_units`] with each unit's descriptor (`UnitInfo::descriptor`); pages of at
    /// most 1000 units and about 2 MiB of descriptors.
    pub async fn list_units_with_descriptors(
        &self,
        after: Option<(u64, u16)>,
        limit: u32,
    ) -> Result<proto::ListUnitsResponse, ClientError> {
        self.list_units_page(after, limit, (false, true)).await
    }

    /// [`NodeClient::list_units`] with each unit's CRC-32C (`UnitInfo::crc32c`), combined by the node
    /// from its block checksums; pages of at most 1000.
    pub async fn list_units_with_checksums(
        &self,
        after: Option<(u64, u16)>,
        limit: u32,
    ) -> Result<proto::ListUnitsResponse, ClientError> {
        self.list_units_page(after, limit, (true, false)).await
    }

    async fn list_units_page(
        &self,
        after: Option<(u64, u16)>,
        limit: u32,
        (with_checksums, with_descriptors): (bool, bool),
    ) -> Result<proto::ListUnitsResponse, ClientError> {
        const OP: &str = "list_units";
        let mut inner = self.inner.clone();
        let request = proto::ListUnitsRequest {
            after: after.map(|(stripe, unit)| proto::UnitRef { stripe, unit: u32::from(unit) }),
            limit,
            with_checksums,
            with_descriptors,
        };
        self.timed(OP, async move {
            let reply =
                inner.list_units(request).await.map_err(|status| ClientError::Status { operation: OP, status })?;
            Ok(reply.into_inner())
        })
        .await
    }

    /// The node's data directory identity; with `claim`, recorded durably by the node first.
    pub async fn identity(
        &self,
        claim: Option<crate::identity::Claim>,
    ) -> Result<proto::IdentityResponse, ClientError> {
        const OP: &str = "identity";
        let mut inner = self.inner.clone();
        let request = proto::IdentityRequest {
            claim: claim.map(|claim| proto::IdentityClaim {
                cluster_id: claim.cluster_id,
                node_id: claim.node_id,
                generation: claim.generation,
            }),
        };
        self.timed(OP, async move {
            let reply =
                inner.identity(request).await.map_err(|status| ClientError::Status { operation: OP, status })?;
            Ok(reply.into_inner())
        })
        .await
    }

    /// Replaces the node's service model; returns the model now in force.
    pub async fn set_service_model(&self, model: &ServiceModel) -> Result<ServiceModel, ClientError> {
        const OP: &str = "set_service_model";
        let mut inner = self.inner.clone();
        let request = proto::SetServiceModelRequest { model: Some(model.into()) };
        self.timed(OP, async move {
            let reply = inner
                .set_service_model(request)
                .await
                .map_err(|status| ClientError::Status { operation: OP, status })?;
            let model = reply.into_inner().model.ok_or_else(|| protocol(OP, "no model in the answer"))?;
            Ok(model.into())
        })
        .await
    }

    /// Replaces how the node shares its service among latency classes; returns the discipline
    /// now in force. A malformed one is refused (`InvalidArgument`) and the node keeps its own.
    pub async fn set_class_scheduling(&self, scheduling: &ClassScheduling) -> Result<ClassScheduling, ClientError> {
        const OP: &str = "set_class_scheduling";
        let mut inner = self.inner.clone();
        let request = proto::SetClassSchedulingRequest { scheduling: Some(scheduling.into()) };
        self.timed(OP, async move {
            let reply = inner
                .set_class_scheduling(request)
                .await
                .map_err(|status| ClientError::Status { operation: OP, status })?;
            let scheduling =
                reply.into_inner().scheduling.ok_or_else(|| protocol(OP, "no discipline in the answer"))?;
            ClassScheduling::try_from(scheduling).map_err(|error| protocol(OP, error.to_string()))
        })
        .await
    }
}

/// Reassembles a merged read's gRPC answer: per range a head (its status) and its chunks.
struct RangeAssembly<'a> {
    ranges: &'a [UnitRange],
    /// The ranges done, in order.
    answers: Vec<Result<Bytes, ClientError>>,
    /// Chunks and byte count of the range being received (its head said OK); it is range
    /// `answers.len()`.
    receiving: Option<(Vec<Bytes>, u64)>,
}

impl RangeAssembly<'_> {
    const OP: &'static str = "read_units";

    fn push(&mut self, message: proto::ReadUnitsResponse) -> Result<(), ClientError> {
        if let Some(head) = message.range {
            self.close_range()?;
            if self.answers.len() == self.ranges.len() {
                return Err(protocol(Self::OP, "node sent more ranges than asked for"));
            }
            match range_code(head.status)? {
                Code::Ok => self.receiving = Some((Vec::new(), 0)),
                code => {
                    let status = Status::new(code, head.message);
                    self.answers.push(Err(ClientError::Status { operation: Self::OP, status }));
                }
            }
        }
        if message.chunk.is_empty() {
            return Ok(());
        }
        let length = self.ranges.get(self.answers.len()).map_or(0, |range| range.length);
        let Some((chunks, received)) = &mut self.receiving else {
            return Err(protocol(Self::OP, "node sent bytes outside a range that succeeded"));
        };
        *received += message.chunk.len() as u64;
        if *received > length {
            return Err(protocol(Self::OP, format!("node sent more than the {length} bytes of a range")));
        }
        chunks.push(message.chunk);
        Ok(())
    }

    /// Ends the range being received, which must have all its bytes.
    fn close_range(&mut self) -> Result<(), ClientError> {
        let Some((chunks, received)) = self.receiving.take() else { return Ok(()) };
        let length = self.ranges[self.answers.len()].length;
        if received != length {
            let what = format!("range {}: node sent {received} of {length} bytes", self.answers.len());
            return Err(protocol(Self::OP, what));
        }
        self.answers.push(Ok(joined(chunks)));
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<Result<Bytes, ClientError>>, ClientError> {
        self.close_range()?;
        if self.answers.len() != self.ranges.len() {
            let what = format!("node answered {} of {} ranges", self.answers.len(), self.ranges.len());
            return Err(protocol(Self::OP, what));
        }
        Ok(self.answers)
    }
}

/// The code a client sees for a merged read's range status (the code a single read's error has).
fn range_code(status: i32) -> Result<Code, ClientError> {
    match proto::RangeStatus::try_from(status) {
        Ok(proto::RangeStatus::Ok) => Ok(Code::Ok),
        Ok(proto::RangeStatus::NotFound) => Ok(Code::NotFound),
        Ok(proto::RangeStatus::Corrupt) => Ok(Code::DataLoss),
        Ok(proto::RangeStatus::OutOfRange) => Ok(Code::OutOfRange),
        Ok(proto::RangeStatus::Internal) => Ok(Code::Internal),
        Ok(proto::RangeStatus::Unspecified) | Err(_) => {
            Err(protocol(RangeAssembly::OP, format!("unknown range status {status}")))
        }
    }
}

/// `parts` as one buffer: the one part itself when there is one (a unit range up to the node's
/// read chunk size, the usual case; no copy), copied together otherwise. The gateway joins a read's
/// unit ranges with it too.
pub fn joined(mut parts: Vec<Bytes>) -> Bytes {
    if parts.len() == 1 {
        return parts.pop().expect("one part");
    }
    let mut data = BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
    parts.iter().for_each(|part| data.extend_from_slice(part));
    data.freeze()
}
