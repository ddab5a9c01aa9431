//! Degraded reads by reconstruction dataflow (APLS, Xie et al.): in isolation, the paper's method
//! ([`run_isolated`]: one read at a time), or many reads, normal and degraded, sharing one cluster
//! ([`run_loaded`], the loaded mode the paper does not have); over the modelled [`Network`], the
//! sources reading their packets from disk (an FCFS task each, packets ready as the disk reaches
//! them), each transfer leaving its sender
//! once what it adds to has arrived and its own packet is read, the read complete when the last
//! packet reaches the requestor. Decoding arithmetic is free (the paper's model).
//!
//! Sites: in isolation source i of the dataflow is site i; loaded, each read names the node behind
//! each source; the requestor (the paper's starter, lowtail's gateway) is the last site. A sender's
//! uplink serves the reads with a packet ready in turn, a packet each (processor sharing among its
//! flows, deterministically), each read's lowest-numbered packet first; each node's disk serves one
//! read's task after another.
//!
//! Must not: decide the dataflow (the execution core builds it from the policy's method), or read a
//! clock or draw randomness (the run is a function of its setup).

use crate::network::{Network, SitePorts};
use execution::reconstruct::watch::{DataflowLimits, DataflowWatch, WatchEvent, WatchOutcome};
use execution::reconstruct::{Dataflow, Site, Transfer};
use model::NEVER;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::sync::Arc;

/// A source's disk.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiskModel {
    /// Fixed cost of the read task.
    pub overhead_ns: u64,
    /// Read rate (`f64::INFINITY`: the paper's model, disk not counted).
    pub rate_bytes_per_s: f64,
    /// Whether a source reads its whole range even when it needs only some packets (the paper's
    /// agents fetch the whole chunk), or only the packets it sends.
    pub whole_range: bool,
}

impl DiskModel {
    /// A disk that takes no time.
    pub const INSTANT: DiskModel = DiskModel { overhead_ns: 0, rate_bytes_per_s: f64::INFINITY, whole_range: false };
}

/// What crossed from one site to another during a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteTransfer {
    /// Sender.
    pub from: Site,
    /// Receiver.
    pub to: Site,
    /// Bytes.
    pub bytes: u64,
    /// Packets.
    pub packets: u32,
    /// When its first packet left the sender.
    pub first_sent_ns: u64,
    /// When its last packet arrived.
    pub last_arrived_ns: u64,
}

/// An isolated read's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IsolatedOutcome {
    /// From the request leaving the requestor to the last packet reaching it.
    pub latency_ns: u64,
    /// Per (sender, receiver) pair.
    pub transfers: Vec<SiteTransfer>,
    /// Bytes each source read from disk.
    pub disk_bytes: Vec<u64>,
}

/// The cluster degraded reads run on: every node's links and FCFS disk, and the gateway (the
/// requestor of every read). In isolation, source i of the one read is node i.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReconstructSetup {
    /// Each node's links, by node index.
    pub nodes: Vec<SitePorts>,
    /// The gateway's links.
    pub gateway: SitePorts,
    /// Latency of each hop, and of a request reaching its sources.
    pub hop_latency_ns: u64,
    /// Cost a sender pays per packet.
    pub per_packet_ns: u64,
    /// Cost a receiver pays per packet (many senders into one receiver pay it in turn: incast).
    #[serde(default)]
    pub receive_per_packet_ns: u64,
    /// Every node's disk (one FCFS task per read and source).
    pub disk: DiskModel,
}

/// One read of the loaded mode: when it arrives at the gateway, its dataflow, and the node behind
/// each of the dataflow's sources.
#[derive(Clone, Debug)]
pub struct LoadedRead {
    /// Arrival at the gateway.
    pub arrival_ns: u64,
    /// What moves.
    pub flow: Arc<Dataflow>,
    /// Node of source i, by i.
    pub nodes: Vec<u32>,
}

/// Runs `reads` over one cluster; returns each read's latency (arrival to its last packet at the
/// gateway), in order.
pub fn run_loaded(setup: &ReconstructSetup, reads: &[LoadedRead]) -> Vec<u64> {
    let nodes = setup.nodes.len();
    assert!(reads.iter().all(|r| r.nodes.iter().all(|&n| (n as usize) < nodes)), "every source is one of the nodes");
    let run = run_reads(setup, nodes, reads);
    reads.iter().zip(&run.completion_ns).map(|(read, &done)| done - read.arrival_ns).collect()
}

/// Runs one read of `flow` in isolation: source i on node i (the nodes beyond its sources left out).
pub fn run_isolated(setup: &ReconstructSetup, flow: &Dataflow) -> IsolatedOutcome {
    let sources = usize::from(flow.method.sources(flow.k));
    assert!(setup.nodes.len() >= sources, "{} nodes set up for a dataflow of {sources} sources", setup.nodes.len());
    let reads = [LoadedRead { arrival_ns: 0, flow: Arc::new(flow.clone()), nodes: (0..sources as u32).collect() }];
    let run = run_reads(setup, sources, &reads);
    IsolatedOutcome { latency_ns: run.completion_ns[0], transfers: run.pairs(0), disk_bytes: run.disk_bytes }
}

/// `reads` run to their end over the first `nodes` nodes of `setup` and its gateway.
fn run_reads<'a>(setup: &ReconstructSetup, nodes: usize, reads: &'a [LoadedRead]) -> Run<'a> {
    let mut ports = setup.nodes[..nodes].to_vec();
    ports.push(setup.gateway);
    let net = Network::new(&ports, setup.hop_latency_ns, setup.per_packet_ns, setup.receive_per_packet_ns);
    let mut run = Run::new(net, setup.disk, setup.hop_latency_ns, nodes, reads);
    run.run();
    run
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A read's request reaches its sources: their disk tasks are queued.
    Start(u32),
    /// A transfer's inputs and packet are ready at its sender (ids are global: a read's base plus
    /// the transfer's index in its dataflow).
    Ready(u32),
    /// A sender's uplink finished putting a transfer's packet on the wire.
    Sent(u32),
    /// The packet reached its receiver's downlink.
    Arrive(u32),
    /// The packet is at its receiver.
    Delivered(u32),
}

struct Run<'a> {
    reads: &'a [LoadedRead],
    net: Network,
    disk: DiskModel,
    hop_latency_ns: u64,
    gateway: usize,
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    sequence: u64,
    /// Per read: its first global transfer id.
    base: Vec<u32>,
    /// Per global transfer: its read, inputs still to arrive, when its own packet is read, who
    /// waits on it.
    read_of: Vec<u32>,
    waiting: Vec<u32>,
    local_ready_ns: Vec<u64>,
    dependents: Vec<Vec<u32>>,
    /// Per site: ready transfers by read, then (packet, transfer); the read its uplink served last
    /// (reads take turns, a packet each: processor sharing among the flows, deterministically);
    /// whether its uplink is busy; when its disk is next free.
    ready: Vec<BTreeMap<u32, BTreeSet<(u32, u32)>>>,
    last_served: Vec<u32>,
    busy: Vec<bool>,
    disk_free_ns: Vec<u64>,
    sent_ns: Vec<u64>,
    arrived_ns: Vec<u64>,
    /// Per read: the execution core's watch of its packets reaching the gateway (no limits: the
    /// model has no faults), and when the last did.
    watches: Vec<DataflowWatch>,
    completion_ns: Vec<u64>,
    /// Bytes each node read from disk.
    disk_bytes: Vec<u64>,
}

impl<'a> Run<'a> {
    fn new(net: Network, disk: DiskModel, hop_latency_ns: u64, gateway: usize, reads: &'a [LoadedRead]) -> Run<'a> {
        let mut base = Vec::with_capacity(reads.len());
        let mut read_of = Vec::new();
        let mut waiting = Vec::new();
        let mut dependents: Vec<Vec<u32>> = Vec::new();
        for (r, read) in reads.iter().enumerate() {
            let first = u32::try_from(read_of.len()).expect("fewer than 2^32 transfers");
            base.push(first);
            dependents.resize(read_of.len() + read.flow.transfers.len(), Vec::new());
            for (index, t) in read.flow.transfers.iter().enumerate() {
                read_of.push(r as u32);
                waiting.push(t.after.len() as u32);
                for &input in &t.after {
                    dependents[(first + input) as usize].push(first + index as u32);
                }
            }
        }
        let total = read_of.len();
        let watches = reads
            .iter()
            .map(|read| DataflowWatch::start(&read.flow, true, &[], DataflowLimits::NONE, read.arrival_ns))
            .collect();
        Run {
            reads,
            net,
            disk,
            hop_latency_ns,
            gateway,
            events: BinaryHeap::new(),
            sequence: 0,
            base,
            read_of,
            waiting,
            local_ready_ns: vec![NEVER; total],
            dependents,
            ready: vec![BTreeMap::new(); gateway + 1],
            last_served: vec![u32::MAX; gateway + 1],
            busy: vec![false; gateway + 1],
            disk_free_ns: vec![0; gateway + 1],
            sent_ns: vec![NEVER; total],
            arrived_ns: vec![NEVER; total],
            watches,
            completion_ns: vec![NEVER; reads.len()],
            disk_bytes: vec![0; gateway],
        }
    }

    fn transfer(&self, global: u32) -> &'a Transfer {
        let read = self.read_of[global as usize] as usize;
        &self.reads[read].flow.transfers[(global - self.base[read]) as usize]
    }

    fn site(&self, global: u32, site: Site) -> usize {
        match site {
            Site::Source(s) => self.reads[self.read_of[global as usize] as usize].nodes[usize::from(s)] as usize,
            Site::Requestor => self.gateway,
        }
    }

    fn schedule(&mut self, at_ns: u64, event: Event) {
        self.events.push(Reverse((at_ns, self.sequence, event)));
        self.sequence += 1;
    }

    fn run(&mut self) {
        for (r, read) in self.reads.iter().enumerate() {
            self.schedule(read.arrival_ns + self.hop_latency_ns, Event::Start(r as u32));
        }
        // Bounded: every read starts once and every transfer passes through each event kind once.
        let limit = 5 * self.read_of.len() + self.reads.len() + 8;
        for _ in 0..limit {
            let Some(Reverse((now, _, event))) = self.events.pop() else {
                let complete = Some(WatchOutcome::Complete);
                assert!(self.watches.iter().all(|w| w.outcome() == complete), "every packet reached the gateway");
                return;
            };
            self.handle(now, event);
        }
        panic!("the reads handled more events than their transfers allow");
    }

    fn handle(&mut self, now: u64, event: Event) {
        match event {
            Event::Start(read) => self.start(now, read),
            Event::Ready(t) => {
                let transfer = self.transfer(t);
                let site = self.site(t, transfer.from);
                self.ready[site].entry(self.read_of[t as usize]).or_default().insert((transfer.packet, t));
                self.send_next(site, now);
            }
            Event::Sent(t) => {
                let from = self.site(t, self.transfer(t).from);
                self.busy[from] = false;
                self.schedule(now + self.net.hop_latency_ns(), Event::Arrive(t));
                self.send_next(from, now);
            }
            Event::Arrive(t) => {
                let transfer = self.transfer(t);
                let [downlink] = self.net.route(self.site(t, transfer.from), self.site(t, transfer.to));
                let done = self.net.cross(downlink, now, transfer.bytes);
                self.schedule(done, Event::Delivered(t));
            }
            Event::Delivered(t) => self.delivered(now, t),
        }
    }

    /// Each source's disk task for the read (FCFS behind the tasks already queued on its node),
    /// each packet ready as the task reaches it; then the transfers that wait for nothing else.
    fn start(&mut self, now: u64, read: u32) {
        let flow: &Dataflow = &self.reads[read as usize].flow;
        let mut ready_at: Vec<Vec<(u32, u64)>> = Vec::new();
        for (source, packets) in flow.local_reads().iter().enumerate() {
            let node = self.reads[read as usize].nodes[source] as usize;
            let wanted: Vec<u32> = if self.disk.whole_range && !packets.is_empty() {
                (0..flow.packets()).collect()
            } else {
                packets.clone()
            };
            let start = now.max(self.disk_free_ns[node]) + if wanted.is_empty() { 0 } else { self.disk.overhead_ns };
            let mut bytes = 0u64;
            let mut at = Vec::with_capacity(wanted.len());
            for packet in wanted {
                let end = (flow.packet_offset(packet) + u64::from(flow.packet_bytes)).min(flow.range_bytes);
                bytes += end - flow.packet_offset(packet);
                let elapsed = if self.disk.rate_bytes_per_s.is_finite() {
                    (bytes as f64 * 1e9 / self.disk.rate_bytes_per_s).round() as u64
                } else {
                    0
                };
                at.push((packet, start + elapsed));
            }
            if let Some(&(_, last)) = at.last() {
                self.disk_free_ns[node] = last;
            }
            self.disk_bytes[node] += bytes;
            ready_at.push(at);
        }
        let base = self.base[read as usize];
        for (index, t) in flow.transfers.iter().enumerate() {
            let global = base + index as u32;
            let ready = match (t.reads_local, t.from) {
                (true, Site::Source(s)) => {
                    let at = &ready_at[usize::from(s)];
                    let i = at.binary_search_by_key(&t.packet, |&(p, _)| p).expect("a source reads what it sends");
                    at[i].1
                }
                _ => now,
            };
            self.local_ready_ns[global as usize] = ready;
            if t.after.is_empty() {
                self.schedule(ready, Event::Ready(global));
            }
        }
    }

    /// The site's uplink, if free, takes the lowest-numbered ready packet of the next read in turn
    /// after the one it served last.
    fn send_next(&mut self, site: usize, now: u64) {
        if self.busy[site] {
            return;
        }
        let ready = &mut self.ready[site];
        let after = self.last_served[site];
        let next = ready.range(after.saturating_add(1)..).next().or_else(|| ready.iter().next()).map(|(&read, _)| read);
        let Some(read) = next else { return };
        let packets = ready.get_mut(&read).expect("a read with ready packets");
        let (_, t) = packets.pop_first().expect("not empty");
        if packets.is_empty() {
            ready.remove(&read);
        }
        self.last_served[site] = read;
        self.busy[site] = true;
        self.sent_ns[t as usize] = now;
        let done = self.net.cross(self.net.uplink(site), now, self.transfer(t).bytes);
        self.schedule(done, Event::Sent(t));
    }

    fn delivered(&mut self, now: u64, t: u32) {
        self.arrived_ns[t as usize] = now;
        let read = self.read_of[t as usize] as usize;
        if let (Site::Source(source), Site::Requestor) = (self.transfer(t).from, self.transfer(t).to) {
            let packet = self.transfer(t).packet;
            self.watches[read].handle(WatchEvent::Packet { source, packet }, now);
            if self.watches[read].outcome() == Some(WatchOutcome::Complete) {
                self.completion_ns[read] = now;
            }
        }
        for dependent in std::mem::take(&mut self.dependents[t as usize]) {
            let waiting = &mut self.waiting[dependent as usize];
            *waiting -= 1;
            if *waiting == 0 {
                let at = now.max(self.local_ready_ns[dependent as usize]);
                self.schedule(at, Event::Ready(dependent));
            }
        }
    }

    /// Per (sender, receiver) pair of read `read`: what crossed.
    fn pairs(&self, read: usize) -> Vec<SiteTransfer> {
        let base = self.base[read] as usize;
        let mut pairs: Vec<SiteTransfer> = Vec::new();
        for (index, t) in self.reads[read].flow.transfers.iter().enumerate() {
            let (sent, arrived) = (self.sent_ns[base + index], self.arrived_ns[base + index]);
            match pairs.iter_mut().find(|p| p.from == t.from && p.to == t.to) {
                Some(pair) => {
                    pair.bytes += u64::from(t.bytes);
                    pair.packets += 1;
                    pair.first_sent_ns = pair.first_sent_ns.min(sent);
                    pair.last_arrived_ns = pair.last_arrived_ns.max(arrived);
                }
                None => pairs.push(SiteTransfer {
                    from: t.from,
                    to: t.to,
                    bytes: u64::from(t.bytes),
                    packets: 1,
                    first_sent_ns: sent,
                    last_arrived_ns: arrived,
                }),
            }
        }
        pairs.sort_by_key(|p| (p.from, p.to));
        pairs
    }
}

pub mod scripted;

#[cfg(test)]
mod tests;
