//! One reconstruction session's execution: this node's steps, a window of them at a time — take
//! what peers pushed into a step, add the coefficient times this node's packet, send the sum on the
//! node's emulated uplink back to the requestor or pushed to a peer (one call per packet).
//!
//! Local packets are read through the node's queue, in the session's class, a batch at a time
//! (merged reads of at most [`READ_BATCH_BYTES`]), no further ahead than the window, so the disk
//! overlaps the network. Owns the session's reads, arithmetic and sends, and the pool of peer
//! connections. Must not choose what to read or where to send (the plan says), or outlive its
//! session (the caller bounds it by the plan's timeout and the requestor's stream).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;
use tonic::Status;
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use super::{Inbox, SessionPlan, runs};
use crate::classes::ClassId;
use crate::error::{NodeError, UnitId};
use crate::lock;
use crate::proto::{self, node_client};
use crate::rpc::{AttachSecret, CONNECT_TIMEOUT, MAX_MESSAGE_BYTES};
use crate::scheduler::{Scheduler, blocking};
use crate::store::{StagedUnit, UnitWrite};

/// Bytes of local packets read as one queued task (at least one packet).
pub const READ_BATCH_BYTES: u64 = 1 << 20;
/// Most ranges in one batch read.
const READ_BATCH_RANGES: usize = 64;
/// Peer connections kept; past this the pool starts afresh.
const MAX_PEER_CLIENTS: usize = 1024;

/// What the requestor's stream carries.
pub type RequestorStream = mpsc::Sender<Result<proto::ReconstructResponse, Status>>;

type PeerClient = node_client::NodeClient<InterceptedService<Channel, AttachSecret>>;

/// Connections to the nodes sessions push to, carrying the cluster secret.
#[derive(Debug)]
pub struct Peers {
    secret: Option<AsciiMetadataValue>,
    clients: Mutex<HashMap<String, PeerClient>>,
}

impl Peers {
    /// A pool whose calls carry `secret`.
    pub fn new(secret: &str) -> Peers {
        Peers { secret: MetadataValue::try_from(secret).ok(), clients: Mutex::new(HashMap::new()) }
    }

    /// A client of the node at `addr` (connected lazily, kept for the next session).
    fn client(&self, addr: &str) -> Result<PeerClient, NodeError> {
        let mut clients = lock(&self.clients);
        if let Some(client) = clients.get(addr) {
            return Ok(client.clone());
        }
        let secret =
            self.secret.clone().ok_or_else(|| NodeError::InvalidArgument("the cluster secret is not ASCII".into()))?;
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| NodeError::InvalidArgument(format!("peer address {addr}: {e}")))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true);
        let client = node_client::NodeClient::with_interceptor(endpoint.connect_lazy(), AttachSecret::new(secret))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        if clients.len() >= MAX_PEER_CLIENTS {
            clients.clear();
        }
        clients.insert(addr.to_string(), client.clone());
        Ok(client)
    }
}

/// Aborts a spawned task when dropped (a cancelled session stops reading).
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs `plan` to its end: every step sent (a push acknowledged by its peer). What it did, or why
/// it stopped.
///
/// Up to a window of steps from the lowest one not yet sent run at once, each as soon as its
/// pushes and its local packet are in, and leaves as soon as it is computed (a push is one call, so
/// a packet a peer cannot take yet holds back no other): the chains of APLS's lists pipeline.
pub async fn run(
    scheduler: &Arc<Scheduler>,
    peers: &Peers,
    plan: &SessionPlan,
    inbox: &Inbox,
    requestor: &RequestorStream,
) -> Result<proto::SessionDone, NodeError> {
    let local = Arc::new(LocalPackets::default());
    let window = plan.window_steps();
    let (allowance, allowed) = watch::channel(window);
    let reader = tokio::spawn(read_local(Arc::clone(scheduler), plan.clone(), Arc::clone(&local), allowed));
    let mut reader = AbortOnDrop(reader);
    let writer = match plan.store {
        Some(unit) => Some(UnitWriter::open(scheduler, unit, plan.range_bytes).await?),
        None => None,
    };
    let out = Out { scheduler, peers, plan, requestor, writer: writer.as_ref() };
    let (mut running, mut sending) = (FuturesUnordered::new(), FuturesUnordered::new());
    let mut sent = vec![false; plan.steps.len()];
    let (steps, mut armed, mut base, mut bytes_sent) = (plan.steps.len(), 0, 0, 0);
    // Bounded: each pass finishes a step or sends one, and there are 2 × steps of those.
    while base < steps {
        while armed < steps && armed < base + window {
            running.push(compute(plan, armed, inbox, &local));
            armed += 1;
        }
        tokio::select! {
            Some(computed) = running.next() => {
                let (index, data) = computed?;
                bytes_sent += data.len() as u64;
                sending.push(out.send(index, data));
            }
            Some(done) = sending.next() => {
                sent[done?] = true;
                while sent.get(base).copied().unwrap_or(false) {
                    base += 1;
                }
                inbox.advance(base);
                allowance.send_replace(base + window);
            }
        }
    }
    drop((running, sending));
    let stored_bytes = match writer {
        Some(writer) => writer.commit(scheduler, plan.class).await?,
        None => 0,
    };
    let (bytes_read, disk_tasks) = (&mut reader.0).await.unwrap_or_default();
    Ok(proto::SessionDone { bytes_read, bytes_sent, bytes_received: inbox.bytes_received(), disk_tasks, stored_bytes })
}

/// Where a session's packets go.
struct Out<'a> {
    scheduler: &'a Scheduler,
    peers: &'a Peers,
    plan: &'a SessionPlan,
    requestor: &'a RequestorStream,
    /// A storing session's unit.
    writer: Option<&'a UnitWriter>,
}

impl Out<'_> {
    /// Step `index`'s packet: stored (a storing session), or on the node's emulated uplink to the
    /// requestor's stream or pushed to its peer (acknowledged once the peer's inbox holds it).
    async fn send(&self, index: usize, data: Bytes) -> Result<usize, NodeError> {
        let (plan, step) = (self.plan, &self.plan.steps[index]);
        if let Some(writer) = self.writer {
            writer.put(step.packet, data).await?;
            return Ok(index);
        }
        self.scheduler.egress().transmit(data.len() as u64).await;
        match &step.to {
            None => {
                let message = proto::ReconstructResponse { packet: step.packet, data, done: None };
                self.requestor.send(Ok(message)).await.map_err(|_| NodeError::Cancelled)?;
            }
            Some((addr, to_node)) => {
                let session = Bytes::copy_from_slice(&plan.id);
                let (from_source, packet, to_node) = (u32::from(plan.source), step.packet, *to_node);
                let push = proto::PushRequest { session, from_source, packet, data, to_node };
                let mut client = self.peers.client(addr)?;
                client
                    .push(push)
                    .await
                    .map_err(|status| NodeError::Unavailable(format!("push to {addr}: {}", status.message())))?;
            }
        }
        Ok(index)
    }
}

/// A storing session's unit: packets appended in packet order to a staged unit, committed through
/// the node's queue once all are in. Holds at most the session's window of packets out of order.
struct UnitWriter {
    state: tokio::sync::Mutex<WriterState>,
}

struct WriterState {
    /// `None` once an append failed (the staged file is then gone).
    staged: Option<StagedUnit>,
    next: u32,
    pending: BTreeMap<u32, Bytes>,
}

impl UnitWriter {
    async fn open(scheduler: &Scheduler, unit: UnitId, len: u64) -> Result<UnitWriter, NodeError> {
        let store = Arc::clone(scheduler.store());
        let staged = blocking(move || store.begin_write(unit, len)).await?;
        let state = WriterState { staged: Some(staged), next: 0, pending: BTreeMap::new() };
        Ok(UnitWriter { state: tokio::sync::Mutex::new(state) })
    }

    /// Takes `packet`; appends every packet now in order.
    async fn put(&self, packet: u32, data: Bytes) -> Result<(), NodeError> {
        let mut state = self.state.lock().await;
        state.pending.insert(packet, data);
        // Bounded: each pass appends one pending packet.
        loop {
            let next = state.next;
            let Some(data) = state.pending.remove(&next) else { return Ok(()) };
            let mut staged = state.staged.take().ok_or_else(|| NodeError::Unavailable("an append failed".into()))?;
            state.staged = Some(
                blocking(move || {
                    staged.append(&data)?;
                    Ok(staged)
                })
                .await?,
            );
            state.next += 1;
        }
    }

    /// Commits the unit as a task of `class` (durable once this returns); its bytes.
    async fn commit(self, scheduler: &Scheduler, class: ClassId) -> Result<u64, NodeError> {
        let mut state = self.state.into_inner();
        let staged = state.staged.take().ok_or_else(|| NodeError::Unavailable("an append failed".into()))?;
        if staged.written() != staged.total_len() || !state.pending.is_empty() {
            return Err(NodeError::Unavailable(format!("stored {} of {} bytes", staged.written(), staged.total_len())));
        }
        let bytes = staged.total_len();
        scheduler.write(class, UnitWrite::Staged(staged)).await?;
        Ok(bytes)
    }
}

/// Step `index`: what was pushed into it plus its coefficient times this node's packet.
async fn compute(
    plan: &SessionPlan,
    index: usize,
    inbox: &Inbox,
    local: &LocalPackets,
) -> Result<(usize, Bytes), NodeError> {
    let step = &plan.steps[index];
    let sum = inbox.take(step.packet, step.inputs).await?;
    let data = match step.coefficient {
        None => sum.expect("a step without a local packet has inputs").freeze(),
        Some(coefficient) => add_scaled(coefficient, &local.take(step.packet).await?, sum),
    };
    debug_assert_eq!(data.len() as u64, plan.packet_len(step.packet));
    Ok((index, data))
}

/// `coefficient · own`, plus `sum` when peers pushed one.
fn add_scaled(coefficient: u8, own: &[u8], sum: Option<BytesMut>) -> Bytes {
    let engine = codec::engine::best();
    match sum {
        Some(mut sum) => {
            engine.mul_add_slice(coefficient, own, &mut sum);
            sum.freeze()
        }
        None => {
            let mut out = vec![0u8; own.len()];
            engine.mul_slice(coefficient, own, &mut out);
            Bytes::from(out)
        }
    }
}

/// This node's packets as the reader has read them, until their steps take them.
#[derive(Debug, Default)]
struct LocalPackets {
    state: Mutex<(HashMap<u32, Bytes>, Option<String>)>,
    ready: Notify,
}

impl LocalPackets {
    /// Hands over a read batch, or why it failed.
    fn put(&self, batch: Result<Vec<(u32, Bytes)>, NodeError>) {
        let mut state = lock(&self.state);
        match batch {
            Ok(packets) => state.0.extend(packets),
            Err(error) => state.1 = Some(error.to_string()),
        }
        drop(state);
        self.ready.notify_waiters();
    }

    /// `packet` once it has been read.
    async fn take(&self, packet: u32) -> Result<Bytes, NodeError> {
        // Bounded: the reader reads every local packet or reports why not; the session's timeout
        // ends the wait otherwise.
        loop {
            let ready = self.ready.notified();
            {
                let mut state = lock(&self.state);
                if let Some(data) = state.0.remove(&packet) {
                    return Ok(data);
                }
                if let Some(why) = &state.1 {
                    return Err(NodeError::Unavailable(format!("reading local packet {packet}: {why}")));
                }
            }
            ready.await;
        }
    }
}

/// Reads the plan's local packets in step order, a batch per queued task, no further ahead than the
/// steps `allowed` (the window's end); returns the bytes read and the tasks.
async fn read_local(
    scheduler: Arc<Scheduler>,
    plan: SessionPlan,
    local: Arc<LocalPackets>,
    mut allowed: watch::Receiver<usize>,
) -> (u64, u64) {
    let (indices, packets): (Vec<usize>, Vec<u32>) =
        plan.steps.iter().enumerate().filter(|(_, s)| s.coefficient.is_some()).map(|(i, s)| (i, s.packet)).unzip();
    let (mut bytes_read, mut tasks, mut first) = (0, 0, 0);
    for batch in batched(&plan, &packets) {
        let step = indices[first];
        first += batch.len();
        if allowed.wait_for(|&allowed| step < allowed).await.is_err() {
            break;
        }
        let read = read_batch(&scheduler, &plan, batch).await;
        tasks += 1;
        bytes_read += read.as_ref().map_or(0, |p| p.iter().map(|(_, d)| d.len() as u64).sum());
        let failed = read.is_err();
        local.put(read);
        if failed {
            break;
        }
    }
    (bytes_read, tasks)
}

/// One batch of local packets read as one queued task.
async fn read_batch(scheduler: &Scheduler, plan: &SessionPlan, batch: &[u32]) -> Result<Vec<(u32, Bytes)>, NodeError> {
    let runs = runs(batch);
    let ranges = runs
        .iter()
        .map(|&(first, count)| {
            let end = plan.packet_offset(first + count - 1) + plan.packet_len(first + count - 1);
            (plan.unit, plan.packet_offset(first), end - plan.packet_offset(first))
        })
        .collect();
    let (results, _) = scheduler.read_many(plan.class, ranges).await?;
    let mut packets = Vec::with_capacity(batch.len());
    for (&(first, count), result) in runs.iter().zip(results) {
        let data = result?;
        for packet in first..first + count {
            let start = (plan.packet_offset(packet) - plan.packet_offset(first)) as usize;
            packets.push((packet, data.slice(start..start + plan.packet_len(packet) as usize)));
        }
    }
    Ok(packets)
}

/// `packets` cut into batches of at most [`READ_BATCH_BYTES`] (at least one packet each) and
/// [`READ_BATCH_RANGES`] runs.
fn batched<'a>(plan: &SessionPlan, packets: &'a [u32]) -> Vec<&'a [u32]> {
    let mut batches = Vec::new();
    let (mut start, mut bytes, mut batch_runs) = (0, 0, 0);
    for (i, &packet) in packets.iter().enumerate() {
        let len = plan.packet_len(packet);
        let new_run = i == start || packets[i - 1] + 1 != packet;
        if i > start && (bytes + len > READ_BATCH_BYTES || (new_run && batch_runs >= READ_BATCH_RANGES)) {
            batches.push(&packets[start..i]);
            (start, bytes, batch_runs) = (i, 0, 0);
        }
        bytes += len;
        batch_runs += usize::from(i == start || packets[i - 1] + 1 != packet);
    }
    if start < packets.len() {
        batches.push(&packets[start..]);
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::UnitId;

    fn plan(packet_bytes: u32, packets: &[u32]) -> SessionPlan {
        SessionPlan {
            id: [0; 16],
            source: 0,
            unit: UnitId::new(1, 0),
            range_offset: 0,
            range_bytes: 100 << 20,
            packet_bytes,
            steps: packets
                .iter()
                .map(|&p| super::super::Step { packet: p, coefficient: Some(1), inputs: 0, to: None })
                .collect(),
            timeout: std::time::Duration::from_secs(1),
            store: None,
            class: crate::classes::ClassId::DEFAULT,
        }
    }

    #[test]
    fn local_reads_are_batched_by_bytes_and_runs() {
        let packets: Vec<u32> = (0..40).collect();
        let sizes: Vec<usize> = batched(&plan(64 << 10, &packets), &packets).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, vec![16, 16, 8], "1 MiB of 64 KiB packets a batch");
        let big = [0, 1, 2];
        assert_eq!(batched(&plan(4 << 20, &big), &big).len(), 3, "a packet past the batch size is its own batch");
        let scattered: Vec<u32> = (0..200).map(|p| p * 2).collect();
        let batches = batched(&plan(4 << 10, &scattered), &scattered);
        assert!(batches.iter().all(|b| runs(b).len() <= READ_BATCH_RANGES), "runs per batch bounded");
        assert_eq!(batches.iter().map(|b| b.len()).sum::<usize>(), 200);
        assert_eq!(runs(&[1, 2, 3, 7, 8, 10]), vec![(1, 3), (7, 2), (10, 1)]);
    }

    #[test]
    fn a_packet_is_the_coefficient_times_the_local_one_plus_what_was_pushed() {
        let own = [1u8, 2, 3, 4];
        assert_eq!(add_scaled(1, &own, None).as_ref(), &own);
        let pushed = BytesMut::from(&[1u8, 2, 0, 0][..]);
        assert_eq!(add_scaled(1, &own, Some(pushed)).as_ref(), &[0, 0, 3, 4]);
        let doubled = add_scaled(2, &own, None);
        assert_eq!(
            doubled.as_ref(),
            &[codec::gf::mul(2, 1), codec::gf::mul(2, 2), codec::gf::mul(2, 3), codec::gf::mul(2, 4)]
        );
    }
}
