//! One reconstruction session's execution: this node's steps in packet order — take what peers
//! pushed into the step, add the coefficient times this node's packet, send the sum on its emulated
//! uplink to a peer (a push stream per peer) or back to the requestor.
//!
//! Local packets are read through the node's FCFS queue a batch at a time (merged reads of at most
//! [`READ_BATCH_BYTES`]), one batch ahead of the steps, so the disk overlaps the network. Owns the
//! session's reads, arithmetic and sends, and the pool of peer connections. Must not choose what to
//! read or where to send (the plan says), or outlive its session (the caller bounds it by the
//! plan's timeout and the requestor's stream).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tonic::Status;
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use super::{Inbox, SessionPlan, Step};
use crate::client::{AttachSecret, CONNECT_TIMEOUT, MAX_MESSAGE_BYTES};
use crate::error::NodeError;
use crate::proto::{self, node_client};
use crate::scheduler::{Scheduler, lock};

/// Bytes of local packets read as one queued task (at least one packet).
pub const READ_BATCH_BYTES: u64 = 1 << 20;
/// Most ranges in one batch read.
const READ_BATCH_RANGES: usize = 64;
/// Packets queued towards one peer beyond what HTTP/2's window holds.
const PUSH_QUEUE: usize = 4;
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

/// Runs `plan` to its end: every step sent, every push acknowledged. What it did, or why it stopped.
pub async fn run(
    scheduler: &Arc<Scheduler>,
    peers: &Peers,
    plan: &SessionPlan,
    inbox: &Inbox,
    requestor: &RequestorStream,
) -> Result<proto::SessionDone, NodeError> {
    let (local_tx, mut local_rx) = mpsc::channel(1);
    let mut reader = AbortOnDrop(tokio::spawn(read_local(Arc::clone(scheduler), plan.clone(), local_tx)));
    let mut outputs = Outputs { plan, peers, requestor, pushes: HashMap::new(), bytes_sent: 0 };
    let mut local = VecDeque::new();
    for (index, step) in plan.steps.iter().enumerate() {
        let sum = inbox.take(index, step.packet, step.inputs).await?;
        let data = match step.coefficient {
            None => sum.expect("a step without a local packet has inputs").freeze(),
            Some(coefficient) => {
                let own = next_local(&mut local, &mut local_rx, step.packet).await?;
                add_scaled(coefficient, &own, sum)
            }
        };
        debug_assert_eq!(data.len() as u64, plan.packet_len(step.packet));
        scheduler.egress().transmit(data.len() as u64).await;
        outputs.send(step, data).await?;
    }
    let bytes_sent = outputs.finish().await?;
    let (bytes_read, disk_tasks) = (&mut reader.0).await.unwrap_or_default();
    Ok(proto::SessionDone { bytes_read, bytes_sent, bytes_received: inbox.bytes_received(), disk_tasks })
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

/// A batch of local packets as the reader hands them over.
type LocalBatch = Result<Vec<(u32, Bytes)>, NodeError>;

/// The next local packet, which must be `packet` (the reader reads them in step order).
async fn next_local(
    local: &mut VecDeque<(u32, Bytes)>,
    batches: &mut mpsc::Receiver<LocalBatch>,
    packet: u32,
) -> Result<Bytes, NodeError> {
    if local.is_empty() {
        let batch = batches.recv().await.ok_or_else(|| NodeError::Unavailable("the local reader stopped".into()))?;
        local.extend(batch?);
    }
    let (read, data) = local.pop_front().ok_or_else(|| NodeError::Unavailable("an empty local batch".into()))?;
    assert_eq!(read, packet, "local packets come in step order");
    Ok(data)
}

/// Reads the plan's local packets in step order, a batch per queued task, one batch ahead; returns
/// the bytes read and the tasks.
async fn read_local(scheduler: Arc<Scheduler>, plan: SessionPlan, batches: mpsc::Sender<LocalBatch>) -> (u64, u64) {
    let packets: Vec<u32> = plan.steps.iter().filter(|s| s.coefficient.is_some()).map(|s| s.packet).collect();
    let (mut bytes_read, mut tasks) = (0, 0);
    for batch in batched(&plan, &packets) {
        let runs = runs(batch);
        let ranges = runs
            .iter()
            .map(|&(first, count)| {
                let end = plan.packet_offset(first + count - 1) + plan.packet_len(first + count - 1);
                (plan.unit, plan.packet_offset(first), end - plan.packet_offset(first))
            })
            .collect();
        let read = scheduler.read_many(ranges).await.and_then(|(results, _)| {
            let mut packets = Vec::with_capacity(batch.len());
            for (&(first, count), result) in runs.iter().zip(results) {
                let data = result?;
                for packet in first..first + count {
                    let start = (plan.packet_offset(packet) - plan.packet_offset(first)) as usize;
                    packets.push((packet, data.slice(start..start + plan.packet_len(packet) as usize)));
                }
            }
            Ok(packets)
        });
        tasks += 1;
        bytes_read += read.as_ref().map_or(0, |p| p.iter().map(|(_, d)| d.len() as u64).sum());
        let failed = read.is_err();
        if batches.send(read).await.is_err() || failed {
            break;
        }
    }
    (bytes_read, tasks)
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

/// Ascending packets as runs of consecutive ones: (first, count).
fn runs(packets: &[u32]) -> Vec<(u32, u32)> {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &packet in packets {
        match runs.last_mut() {
            Some((first, count)) if *first + *count == packet => *count += 1,
            _ => runs.push((packet, 1)),
        }
    }
    runs
}

/// Where a session's packets go: the requestor's stream, or a push stream per peer.
struct Outputs<'a> {
    plan: &'a SessionPlan,
    peers: &'a Peers,
    requestor: &'a RequestorStream,
    pushes: HashMap<String, Push>,
    bytes_sent: u64,
}

/// One push stream to a peer: its queue and the call that drains it.
struct Push {
    queue: mpsc::Sender<proto::PushRequest>,
    call: AbortOnDrop<Result<(), Status>>,
}

impl Outputs<'_> {
    async fn send(&mut self, step: &Step, data: Bytes) -> Result<(), NodeError> {
        self.bytes_sent += data.len() as u64;
        let Some(addr) = &step.to else {
            let message = proto::ReconstructResponse { packet: step.packet, data, done: None };
            return self.requestor.send(Ok(message)).await.map_err(|_| NodeError::Cancelled);
        };
        if !self.pushes.contains_key(addr) {
            let push = self.open(addr)?;
            self.pushes.insert(addr.clone(), push);
        }
        let push = self.pushes.get_mut(addr).expect("opened above");
        let message = proto::PushRequest { session: Bytes::new(), from_source: 0, packet: step.packet, data };
        if push.queue.send(message).await.is_err() {
            let push = self.pushes.remove(addr).expect("present");
            return Err(push_failure(addr, push).await);
        }
        Ok(())
    }

    /// A push stream to `addr`, its first message naming the session and this node.
    fn open(&self, addr: &str) -> Result<Push, NodeError> {
        let mut client = self.peers.client(addr)?;
        let (queue, receiver) = mpsc::channel(PUSH_QUEUE);
        let hello = proto::PushRequest {
            session: Bytes::copy_from_slice(&self.plan.id),
            from_source: u32::from(self.plan.source),
            packet: 0,
            data: Bytes::new(),
        };
        queue.try_send(hello).expect("a new queue has room");
        let stream = tokio_stream::wrappers::ReceiverStream::new(receiver);
        let call = tokio::spawn(async move { client.push(stream).await.map(|_| ()) });
        Ok(Push { queue, call: AbortOnDrop(call) })
    }

    /// Closes every push stream and waits for each peer to acknowledge all of it; the bytes sent.
    async fn finish(mut self) -> Result<u64, NodeError> {
        for (addr, push) in self.pushes.drain() {
            drop(push.queue);
            let mut call = push.call;
            match (&mut call.0).await {
                Ok(Ok(())) => {}
                Ok(Err(status)) => return Err(NodeError::Unavailable(format!("push to {addr}: {}", status.message()))),
                Err(join) => return Err(NodeError::Unavailable(format!("push to {addr}: {join}"))),
            }
        }
        Ok(self.bytes_sent)
    }
}

/// Why a push stream to `addr` stopped taking packets.
async fn push_failure(addr: &str, push: Push) -> NodeError {
    let mut call = push.call;
    let why = match (&mut call.0).await {
        Ok(Err(status)) => status.message().to_string(),
        Ok(Ok(())) => "the peer closed the stream early".into(),
        Err(join) => join.to_string(),
    };
    NodeError::Unavailable(format!("push to {addr}: {why}"))
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
            steps: packets.iter().map(|&p| Step { packet: p, coefficient: Some(1), inputs: 0, to: None }).collect(),
            timeout: std::time::Duration::from_secs(1),
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
