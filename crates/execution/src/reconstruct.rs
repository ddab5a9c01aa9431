//! Reconstruction dataflows (APLS, Xie et al., and its baselines): how the packets of one lost
//! unit's byte range travel from the surviving units' nodes (the *sources*) to the *requestor*
//! that asked for them, as data both executors run — the simulator over its modelled links, the
//! storage nodes (later) over their push streams. A [`Dataflow`] is a list of [`Transfer`]s, each
//! one packet from one site to another, sent once the transfers it adds to have arrived at its
//! sender (and, for a source, once its own packet is read from disk).
//!
//! The methods: a normal read (one copy of the unit, the baseline the paper normalises to), the
//! gateway decode (lowtail's degraded read: k sources send everything to the requestor), the
//! traditional read (a source as starter gathers k − 1 units and decodes), PPR (partial sums in a
//! binary tree), ECPipe (a chain of k sources, EC-A: the last sends on), APLS (q sources, q
//! reconstruction lists r_i = {F_(i−k+1)%q … F_i}, packets assigned to lists, a chain or a star
//! inside each list, the list's last member delivering to the requestor) and lowtail's segmented
//! variant (APLS's lists, but every member sends straight to the requestor, which decodes).
//!
//! What a transfer carries: the sum, over the sources folded into it, of each source's decoding
//! coefficient (for the packet's member set, [`Dataflow::members`]) times its packet; so the
//! requestor's packet is the sum of what reaches it. Where a coefficient is applied (at the sender
//! or at a decoding receiver) is the executor's choice.
//!
//! Must not: choose a method, the sources or a packet size (the reconstruction policy's), or know
//! about time, links or disks (the executor's).

pub mod watch;

pub use model::reconstruct::{Assignment, Inner, Method};
use serde::{Deserialize, Serialize};

/// A site of a dataflow: the i-th source (the executor maps it to a node holding a surviving
/// unit), or the requestor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Site {
    /// Source i, 0-based, in the order the dataflow was built with.
    Source(u16),
    /// The requestor (the gateway): where the reconstructed range ends.
    Requestor,
}

/// A segment of [`Dataflow::segmented`] is a multiple of this: whole 4 KiB pages of the units read.
pub const SEGMENT_ALIGN_BYTES: u64 = 4096;

/// One packet from one site to another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// Sender.
    pub from: Site,
    /// Receiver.
    pub to: Site,
    /// Which packet of the range (0-based).
    pub packet: u32,
    /// Its bytes (the last packet may be short).
    pub bytes: u32,
    /// Whether the sender adds its own unit's packet (a source reads it from disk first).
    pub reads_local: bool,
    /// Transfers that must have reached the sender before this one leaves (what it adds to).
    pub after: Vec<u32>,
}

/// Why a dataflow cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DataflowError {
    /// k must be at least 1 and q between k and the sources a stripe can have.
    #[error("q = {q} sources for k = {k}: need k ≥ 1 and k ≤ q ≤ 255")]
    Sources {
        /// k.
        k: u16,
        /// q.
        q: u16,
    },
    /// The range and packets must be non-empty, and at most 2^32 − 1 packets.
    #[error(
        "a range of {range_bytes} bytes in packets of {packet_bytes}: both must be positive and the packets fewer than 2^32"
    )]
    Packets {
        /// Bytes of the range.
        range_bytes: u64,
        /// Bytes of a packet.
        packet_bytes: u32,
    },
}

/// A method's transfers for one range of one lost unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dataflow {
    /// The method.
    pub method: Method,
    /// k of the code.
    pub k: u16,
    /// Bytes of the range.
    pub range_bytes: u64,
    /// Bytes of a packet.
    pub packet_bytes: u32,
    /// Every transfer, each after those it depends on.
    pub transfers: Vec<Transfer>,
}

impl Dataflow {
    /// The transfers of `method` rebuilding `range_bytes` in packets of `packet_bytes`, for a
    /// code of `k` data units.
    pub fn build(method: Method, k: u16, range_bytes: u64, packet_bytes: u32) -> Result<Dataflow, DataflowError> {
        let q = method.sources(k);
        if k == 0 || q > 255 || (method != Method::Normal && q < k) {
            return Err(DataflowError::Sources { k, q });
        }
        let packets = range_bytes.div_ceil(u64::from(packet_bytes.max(1)));
        if range_bytes == 0 || packet_bytes == 0 || packets >= u64::from(u32::MAX) {
            return Err(DataflowError::Packets { range_bytes, packet_bytes });
        }
        let mut flow = Builder { transfers: Vec::new(), range_bytes, packet_bytes };
        let packets = packets as u32;
        let all: Vec<u16> = (0..q).collect();
        for packet in 0..packets {
            match method {
                Method::Normal => {
                    flow.push(Site::Source(0), Site::Requestor, packet, true, Vec::new());
                }
                Method::GatewayDecode => flow.direct(&all, packet),
                Method::Traditional => flow.star(&all, packet),
                Method::Ppr => flow.tree(&all, packet),
                Method::Ecpipe => flow.chain(&all, packet),
                Method::Apls { q, inner, assignment } => {
                    let members = list(list_of(packet, packets, q, assignment), q, k);
                    match inner {
                        Inner::Chain => flow.chain(&members, packet),
                        Inner::Star => flow.star(&members, packet),
                    }
                }
                Method::Segmented { q, assignment } => {
                    flow.direct(&list(list_of(packet, packets, q, assignment), q, k), packet);
                }
            }
        }
        Ok(Dataflow { method, k, range_bytes, packet_bytes, transfers: flow.transfers })
    }

    /// The segmented read of `range_bytes` over `q` sources as the gateway runs it: q contiguous
    /// segments of whole pages ([`SEGMENT_ALIGN_BYTES`]; the last may be short), segment j from
    /// list r_j's k sources.
    pub fn segmented(k: u16, q: u16, range_bytes: u64) -> Result<Dataflow, DataflowError> {
        let segment = range_bytes.div_ceil(u64::from(q.max(1))).next_multiple_of(SEGMENT_ALIGN_BYTES).min(range_bytes);
        let packet_bytes =
            u32::try_from(segment).map_err(|_| DataflowError::Packets { range_bytes, packet_bytes: u32::MAX })?;
        Dataflow::build(Method::Segmented { q, assignment: Assignment::Contiguous }, k, range_bytes, packet_bytes)
    }

    /// Packets of the range.
    pub fn packets(&self) -> u32 {
        self.range_bytes.div_ceil(u64::from(self.packet_bytes)) as u32
    }

    /// Byte offset of `packet` in the range.
    pub fn packet_offset(&self, packet: u32) -> u64 {
        u64::from(packet) * u64::from(self.packet_bytes)
    }

    /// The sources whose units make up `packet` (those that read it from their own unit), in
    /// ascending order: the set the decoding coefficients of that packet are taken for.
    pub fn members(&self, packet: u32) -> Vec<u16> {
        let mut members: Vec<u16> = self
            .transfers
            .iter()
            .filter(|t| t.packet == packet && t.reads_local)
            .filter_map(|t| match t.from {
                Site::Source(s) => Some(s),
                Site::Requestor => None,
            })
            .collect();
        members.sort_unstable();
        members.dedup();
        members
    }

    /// The packets each source reads from its own unit, ascending, by source.
    pub fn local_reads(&self) -> Vec<Vec<u32>> {
        let mut reads = vec![Vec::new(); usize::from(self.method.sources(self.k))];
        for transfer in self.transfers.iter().filter(|t| t.reads_local) {
            if let Site::Source(source) = transfer.from {
                reads[usize::from(source)].push(transfer.packet);
            }
        }
        for packets in &mut reads {
            packets.sort_unstable();
            packets.dedup();
        }
        reads
    }

    /// Bytes each site sends and receives: (sources' sent, sources' received, the requestor's
    /// received).
    pub fn bytes_per_site(&self) -> (Vec<u64>, Vec<u64>, u64) {
        let sources = usize::from(self.method.sources(self.k));
        let (mut sent, mut received, mut requestor) = (vec![0u64; sources], vec![0u64; sources], 0u64);
        for t in &self.transfers {
            if let Site::Source(s) = t.from {
                sent[usize::from(s)] += u64::from(t.bytes);
            }
            match t.to {
                Site::Source(s) => received[usize::from(s)] += u64::from(t.bytes),
                Site::Requestor => requestor += u64::from(t.bytes),
            }
        }
        (sent, received, requestor)
    }
}

/// The list packet `packet` of `packets` uses among `q`.
fn list_of(packet: u32, packets: u32, q: u16, assignment: Assignment) -> u16 {
    match assignment {
        Assignment::RoundRobin => (packet % u32::from(q)) as u16,
        Assignment::Contiguous => (u64::from(packet) * u64::from(q) / u64::from(packets)) as u16,
    }
}

/// List r_j's members in chain order: F_(j−k+1)%q, …, F_j (§III-B3).
pub fn list(j: u16, q: u16, k: u16) -> Vec<u16> {
    debug_assert!(k <= q && j < q);
    (0..k)
        .map(|l| ((u32::from(j) + u32::from(q) * 2 - u32::from(k) + 1 + u32::from(l)) % u32::from(q)) as u16)
        .collect()
}

struct Builder {
    transfers: Vec<Transfer>,
    range_bytes: u64,
    packet_bytes: u32,
}

impl Builder {
    fn push(&mut self, from: Site, to: Site, packet: u32, reads_local: bool, after: Vec<u32>) -> u32 {
        let start = u64::from(packet) * u64::from(self.packet_bytes);
        let bytes = (self.range_bytes - start).min(u64::from(self.packet_bytes)) as u32;
        self.transfers.push(Transfer { from, to, packet, bytes, reads_local, after });
        (self.transfers.len() - 1) as u32
    }

    /// Every member sends its packet to the requestor.
    fn direct(&mut self, members: &[u16], packet: u32) {
        for &m in members {
            self.push(Site::Source(m), Site::Requestor, packet, true, Vec::new());
        }
    }

    /// The others send to the last member, which decodes and sends on.
    fn star(&mut self, members: &[u16], packet: u32) {
        let (&starter, others) = members.split_last().expect("a list has members");
        let gathered = others
            .iter()
            .map(|&m| self.push(Site::Source(m), Site::Source(starter), packet, true, Vec::new()))
            .collect();
        self.push(Site::Source(starter), Site::Requestor, packet, true, gathered);
    }

    /// Each member adds its term to what the previous one sent and forwards; the last sends on.
    fn chain(&mut self, members: &[u16], packet: u32) {
        let mut previous: Option<u32> = None;
        for (position, &m) in members.iter().enumerate() {
            let to = members.get(position + 1).map_or(Site::Requestor, |&next| Site::Source(next));
            previous = Some(self.push(Site::Source(m), to, packet, true, previous.into_iter().collect()));
        }
    }

    /// A binary tree over the members: in round r, member i with i mod 2^(r+1) = 2^r sends its
    /// partial sum to member i − 2^r; member 0 then sends on.
    fn tree(&mut self, members: &[u16], packet: u32) {
        let mut pending: Vec<Vec<u32>> = vec![Vec::new(); members.len()];
        let mut step = 1;
        while step < members.len() {
            for i in (step..members.len()).step_by(2 * step) {
                let after = std::mem::take(&mut pending[i]);
                let sent = self.push(Site::Source(members[i]), Site::Source(members[i - step]), packet, true, after);
                pending[i - step].push(sent);
            }
            step *= 2;
        }
        let after = std::mem::take(&mut pending[0]);
        self.push(Site::Source(members[0]), Site::Requestor, packet, true, after);
    }
}

#[cfg(test)]
mod tests;
