//! The simulator's network: links of a bandwidth that packets cross one at a time, and the route a
//! packet takes from one site to another. A site has an uplink (its sender: one packet at a time,
//! each paying a per-packet cost; which packet is the caller's choice, `reconstruct`'s is its reads in
//! turn) and a downlink (FCFS by arrival, shared by every sender to it); one hop latency lies between
//! them.
//! Store-and-forward per link, so a transfer of d packets over two links takes d·p/b + p/b′ + the
//! hop, and concurrent flows into one downlink share it packet by packet.
//!
//! Racks and switches (the latency-classes paper) add links between the uplink and the downlink of
//! a route: [`Network::route`] is where they go.
//!
//! Must not: know what a packet carries or decide what is sent (the dataflow's and its executor's),
//! or read a clock (time is an argument, and callers cross links in time order).

/// A link of the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LinkId(pub u32);

/// Bandwidths of one site's two links, bytes per second (`f64::INFINITY`: no limit).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SitePorts {
    /// What it can send.
    pub uplink_bytes_per_s: f64,
    /// What it can receive.
    pub downlink_bytes_per_s: f64,
}

impl SitePorts {
    /// The same bandwidth both ways.
    pub fn symmetric(bytes_per_s: f64) -> SitePorts {
        SitePorts { uplink_bytes_per_s: bytes_per_s, downlink_bytes_per_s: bytes_per_s }
    }
}

/// One FCFS link: when it is next free, and what crossed it.
#[derive(Clone, Debug)]
struct Link {
    rate_bytes_per_s: f64,
    free_at_ns: u64,
    bytes: u64,
    packets: u64,
}

/// Sites' links and the time to cross them.
#[derive(Clone, Debug)]
pub struct Network {
    links: Vec<Link>,
    /// Per site: its uplink and its downlink.
    ports: Vec<(LinkId, LinkId)>,
    hop_latency_ns: u64,
    per_packet_ns: u64,
    receive_per_packet_ns: u64,
}

impl Network {
    /// A network of sites with these ports, one hop latency between links, a per-packet cost each
    /// sender pays on its uplink and one each receiver pays on its downlink.
    pub fn new(sites: &[SitePorts], hop_latency_ns: u64, per_packet_ns: u64, receive_per_packet_ns: u64) -> Network {
        let mut links = Vec::with_capacity(2 * sites.len());
        let mut ports = Vec::with_capacity(sites.len());
        for site in sites {
            for rate in [site.uplink_bytes_per_s, site.downlink_bytes_per_s] {
                assert!(rate > 0.0, "a link has a positive bandwidth");
                links.push(Link { rate_bytes_per_s: rate, free_at_ns: 0, bytes: 0, packets: 0 });
            }
            let up = LinkId(links.len() as u32 - 2);
            ports.push((up, LinkId(up.0 + 1)));
        }
        Network { links, ports, hop_latency_ns, per_packet_ns, receive_per_packet_ns }
    }

    /// The links a packet crosses from `from` to `to` after the sender's uplink (today: the
    /// receiver's downlink).
    pub fn route(&self, from: usize, to: usize) -> [LinkId; 1] {
        debug_assert_ne!(from, to, "a site does not send to itself");
        [self.ports[to].1]
    }

    /// The sender's uplink of site `site`.
    pub fn uplink(&self, site: usize) -> LinkId {
        self.ports[site].0
    }

    /// The hop latency between links.
    pub fn hop_latency_ns(&self) -> u64 {
        self.hop_latency_ns
    }

    /// Time to put `bytes` on `link`: transmission, plus the sender's per-packet cost on an uplink
    /// or the receiver's on a downlink.
    pub fn service_ns(&self, link: LinkId, bytes: u32) -> u64 {
        let rate = self.links[link.0 as usize].rate_bytes_per_s;
        let transmit = if rate.is_finite() { (f64::from(bytes) * 1e9 / rate).round() as u64 } else { 0 };
        let is_uplink = link.0.is_multiple_of(2);
        transmit + if is_uplink { self.per_packet_ns } else { self.receive_per_packet_ns }
    }

    /// A packet of `bytes` reaching `link` at `now_ns` (callers cross in time order, so free-at is
    /// FCFS): when it has crossed.
    pub fn cross(&mut self, link: LinkId, now_ns: u64, bytes: u32) -> u64 {
        let service = self.service_ns(link, bytes);
        let link = &mut self.links[link.0 as usize];
        let start = now_ns.max(link.free_at_ns);
        link.free_at_ns = start + service;
        link.bytes += u64::from(bytes);
        link.packets += 1;
        link.free_at_ns
    }

    /// Bytes and packets that crossed `link`.
    pub fn carried(&self, link: LinkId) -> (u64, u64) {
        let link = &self.links[link.0 as usize];
        (link.bytes, link.packets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crossing_is_fcfs_store_and_forward_at_the_links_rate() {
        let mut net = Network::new(&[SitePorts::symmetric(1e6), SitePorts::symmetric(2e6)], 100, 7, 0);
        let up = net.uplink(0);
        let [down] = net.route(0, 1);
        // 1 000 bytes: 1 ms on the uplink (+ 7 ns per packet), 0.5 ms on the receiver's downlink.
        assert_eq!(net.cross(up, 0, 1_000), 1_000_007);
        assert_eq!(net.cross(up, 10, 1_000), 2_000_014, "the second waits for the first");
        assert_eq!(net.cross(down, 1_000_107, 1_000), 1_500_107);
        assert_eq!(net.cross(down, 1_000_200, 1_000), 2_000_107, "FCFS behind the first");
        assert_eq!(net.carried(down), (2_000, 2));
        let free = Network::new(&[SitePorts::symmetric(f64::INFINITY), SitePorts::symmetric(1.0)], 0, 0, 3);
        assert_eq!(free.service_ns(free.route(0, 1)[0], 1), 1_000_000_003, "the receiver's per-packet cost");
        assert_eq!(free.service_ns(free.uplink(0), 1_000_000), 0);
    }
}
