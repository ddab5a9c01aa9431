//! Degraded reads by reconstruction dataflow (APLS, Xie et al.) in isolation, the paper's method:
//! one read at a time over the modelled [`Network`], its sources reading their packets from disk
//! (an FCFS task each, packets ready as the disk reaches them), each transfer leaving its sender
//! once what it adds to has arrived and its own packet is read, the read complete when the last
//! packet reaches the requestor. Decoding arithmetic is free (the paper's model).
//!
//! Sites: source i of the dataflow is site i; the requestor (the paper's starter, lowtail's
//! gateway) is the last site.
//!
//! Must not: decide the dataflow (the execution core builds it from the policy's method), or read a
//! clock or draw randomness (the run is a function of its setup).

use crate::network::{Network, SitePorts};
use execution::reconstruct::{Dataflow, Site};
use model::NEVER;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

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

/// The setting of an isolated degraded read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IsolatedSetup {
    /// Each source's links, source i at index i (as many as the dataflow's sources, or more).
    pub sources: Vec<SitePorts>,
    /// The requestor's links.
    pub requestor: SitePorts,
    /// Latency of each hop, and of the request reaching the sources.
    pub hop_latency_ns: u64,
    /// Cost a sender pays per packet.
    pub per_packet_ns: u64,
    /// Cost a receiver pays per packet (many senders into one receiver pay it in turn: incast).
    #[serde(default)]
    pub receive_per_packet_ns: u64,
    /// The sources' disks.
    pub disk: DiskModel,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A transfer's inputs and packet are ready at its sender.
    Ready(u32),
    /// A sender's uplink finished putting a transfer's packet on the wire.
    Sent(u32),
    /// The packet reached its receiver's downlink.
    Arrive(u32),
    /// The packet is at its receiver.
    Delivered(u32),
}

/// Runs one read of `flow` in isolation.
pub fn run_isolated(setup: &IsolatedSetup, flow: &Dataflow) -> IsolatedOutcome {
    let sources = usize::from(flow.method.sources(flow.k));
    assert!(setup.sources.len() >= sources, "{} sources set up for a dataflow of {sources}", setup.sources.len());
    let requestor = sources;
    let mut ports = setup.sources[..sources].to_vec();
    ports.push(setup.requestor);
    let mut run = Run::new(
        setup,
        flow,
        Network::new(&ports, setup.hop_latency_ns, setup.per_packet_ns, setup.receive_per_packet_ns),
        requestor,
    );
    run.start();
    run.finish()
}

struct Run<'a> {
    flow: &'a Dataflow,
    net: Network,
    requestor: usize,
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    sequence: u64,
    /// Per transfer: inputs still to arrive, when its own packet is read, who waits on it.
    waiting: Vec<u32>,
    local_ready_ns: Vec<u64>,
    dependents: Vec<Vec<u32>>,
    /// Per site: ready transfers by (packet, transfer), and whether its uplink is busy.
    ready: Vec<BTreeSet<(u32, u32)>>,
    busy: Vec<bool>,
    sent_ns: Vec<u64>,
    arrived_ns: Vec<u64>,
    to_requestor_left: usize,
    completion_ns: u64,
    disk_bytes: Vec<u64>,
}

impl<'a> Run<'a> {
    fn new(setup: &IsolatedSetup, flow: &'a Dataflow, net: Network, requestor: usize) -> Run<'a> {
        let count = flow.transfers.len();
        let mut dependents = vec![Vec::new(); count];
        for (index, t) in flow.transfers.iter().enumerate() {
            for &input in &t.after {
                dependents[input as usize].push(index as u32);
            }
        }
        let (local_ready_ns, disk_bytes) = disk_schedule(setup, flow);
        Run {
            flow,
            net,
            requestor,
            events: BinaryHeap::new(),
            sequence: 0,
            waiting: flow.transfers.iter().map(|t| t.after.len() as u32).collect(),
            local_ready_ns,
            dependents,
            ready: vec![BTreeSet::new(); requestor + 1],
            busy: vec![false; requestor + 1],
            sent_ns: vec![NEVER; count],
            arrived_ns: vec![NEVER; count],
            to_requestor_left: flow.transfers.iter().filter(|t| t.to == Site::Requestor).count(),
            completion_ns: 0,
            disk_bytes,
        }
    }

    fn site(&self, site: Site) -> usize {
        match site {
            Site::Source(s) => usize::from(s),
            Site::Requestor => self.requestor,
        }
    }

    fn schedule(&mut self, at_ns: u64, event: Event) {
        self.events.push(Reverse((at_ns, self.sequence, event)));
        self.sequence += 1;
    }

    fn start(&mut self) {
        for index in 0..self.flow.transfers.len() {
            if self.waiting[index] == 0 {
                self.schedule(self.local_ready_ns[index], Event::Ready(index as u32));
            }
        }
        // Bounded: every transfer passes through each event kind once.
        let limit = 8 * self.flow.transfers.len() + 8;
        for _ in 0..limit {
            let Some(Reverse((now, _, event))) = self.events.pop() else { return };
            self.handle(now, event);
        }
        panic!("an isolated read handled more events than its transfers allow");
    }

    fn handle(&mut self, now: u64, event: Event) {
        match event {
            Event::Ready(t) => {
                let transfer = &self.flow.transfers[t as usize];
                let site = self.site(transfer.from);
                self.ready[site].insert((transfer.packet, t));
                self.send_next(site, now);
            }
            Event::Sent(t) => {
                let from = self.site(self.flow.transfers[t as usize].from);
                self.busy[from] = false;
                self.schedule(now + self.net.hop_latency_ns(), Event::Arrive(t));
                self.send_next(from, now);
            }
            Event::Arrive(t) => {
                let transfer = &self.flow.transfers[t as usize];
                let (from, to) = (self.site(transfer.from), self.site(transfer.to));
                let [downlink] = self.net.route(from, to);
                let done = self.net.cross(downlink, now, transfer.bytes);
                self.schedule(done, Event::Delivered(t));
            }
            Event::Delivered(t) => self.delivered(now, t),
        }
    }

    /// The site's uplink takes its lowest-numbered ready packet, if it is free.
    fn send_next(&mut self, site: usize, now: u64) {
        if self.busy[site] {
            return;
        }
        let Some((_, t)) = self.ready[site].pop_first() else { return };
        self.busy[site] = true;
        self.sent_ns[t as usize] = now;
        let done = self.net.cross(self.net.uplink(site), now, self.flow.transfers[t as usize].bytes);
        self.schedule(done, Event::Sent(t));
    }

    fn delivered(&mut self, now: u64, t: u32) {
        self.arrived_ns[t as usize] = now;
        if self.flow.transfers[t as usize].to == Site::Requestor {
            self.to_requestor_left -= 1;
            if self.to_requestor_left == 0 {
                self.completion_ns = now;
            }
        }
        for index in std::mem::take(&mut self.dependents[t as usize]) {
            let waiting = &mut self.waiting[index as usize];
            *waiting -= 1;
            if *waiting == 0 {
                let at = now.max(self.local_ready_ns[index as usize]);
                self.schedule(at, Event::Ready(index));
            }
        }
    }

    fn finish(self) -> IsolatedOutcome {
        assert_eq!(self.to_requestor_left, 0, "every packet reached the requestor");
        let mut pairs: Vec<SiteTransfer> = Vec::new();
        for (index, t) in self.flow.transfers.iter().enumerate() {
            let (sent, arrived) = (self.sent_ns[index], self.arrived_ns[index]);
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
        IsolatedOutcome { latency_ns: self.completion_ns, transfers: pairs, disk_bytes: self.disk_bytes }
    }
}

/// When each transfer's own packet is read (for transfers that read one), and the bytes each
/// source reads: the request reaches every source one hop after it leaves, each source reads its
/// packets in one FCFS task in ascending order (all of the range with `whole_range`).
fn disk_schedule(setup: &IsolatedSetup, flow: &Dataflow) -> (Vec<u64>, Vec<u64>) {
    let disk = setup.disk;
    let start_ns = setup.hop_latency_ns + disk.overhead_ns;
    let reads = flow.local_reads();
    let mut ready_at: Vec<Vec<(u32, u64)>> = Vec::with_capacity(reads.len());
    let mut disk_bytes = Vec::with_capacity(reads.len());
    for packets in &reads {
        let wanted: Vec<u32> =
            if disk.whole_range && !packets.is_empty() { (0..flow.packets()).collect() } else { packets.clone() };
        let mut read_bytes = 0u64;
        let mut at = Vec::with_capacity(wanted.len());
        for packet in wanted {
            let end = (flow.packet_offset(packet) + u64::from(flow.packet_bytes)).min(flow.range_bytes);
            read_bytes += end - flow.packet_offset(packet);
            let elapsed = if disk.rate_bytes_per_s.is_finite() {
                (read_bytes as f64 * 1e9 / disk.rate_bytes_per_s).round() as u64
            } else {
                0
            };
            at.push((packet, start_ns + elapsed));
        }
        ready_at.push(at);
        disk_bytes.push(read_bytes);
    }
    let local = flow
        .transfers
        .iter()
        .map(|t| match (t.reads_local, t.from) {
            (true, Site::Source(s)) => {
                let at = &ready_at[usize::from(s)];
                let i = at.binary_search_by_key(&t.packet, |&(p, _)| p).expect("a source reads what it sends");
                at[i].1
            }
            _ => setup.hop_latency_ns,
        })
        .collect();
    (local, disk_bytes)
}

#[cfg(test)]
mod tests;
