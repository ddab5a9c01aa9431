//! The reconstruction policy (APLS, Xie et al.): how a degraded read of one unit range is rebuilt —
//! at the gateway from k sources (lowtail's decode), or by a dataflow among the nodes (APLS over q
//! survivors; lowtail's segmented variant) — and from which survivors. The read policies decide
//! *whether* a read is degraded; this decides *how*.
//!
//! `Auto` chooses per read with the closed forms the simulator is tested against (docs/lab/apls.md):
//! the gateway decode takes max(k·c/b_g, c/b_s), APLS max(k·c/(q·b_s), c/b_g) plus its chain's fill
//! (k hops of latency, per-packet cost and one packet's transfer), so small ranges and fast nodes keep
//! the gateway decode (the paper's crossover, A-5) and large ranges on bandwidth-bound nodes go to
//! APLS. b_s is a node's rate as the view reports it; b_g, the hop latency and the per-packet cost
//! are settings.
//!
//! Must not: do I/O, read a clock or draw randomness; build or run a dataflow (the execution core's).

use model::reconstruct::{Assignment, Inner, Method};
use model::{NodeId, ReconstructionTopology};
use serde::{Deserialize, Serialize};

/// Which reconstruction to use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReconstructKind {
    /// k sources to the gateway, which decodes (lowtail's degraded read).
    #[default]
    Gateway,
    /// APLS over every usable survivor.
    Apls,
    /// APLS's lists read straight into the gateway (no node changes).
    Segmented,
    /// The faster of the gateway decode and APLS by the closed forms, per read.
    Auto,
}

impl ReconstructKind {
    /// The kind's name as configs spell it.
    pub fn name(self) -> &'static str {
        match self {
            ReconstructKind::Gateway => "gateway",
            ReconstructKind::Apls => "apls",
            ReconstructKind::Segmented => "segmented",
            ReconstructKind::Auto => "auto",
        }
    }

    /// Whether this kind may have the storage nodes rebuild a unit (a dataflow among them).
    pub fn rebuilds_on_nodes(self) -> bool {
        matches!(self, ReconstructKind::Apls | ReconstructKind::Auto)
    }
}

/// The policy's settings (a field left out of a config takes its default).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReconstructSettings {
    /// Which reconstruction.
    pub kind: ReconstructKind,
    /// Packet size of a dataflow (a multiple of 64 KiB reads whole checksum blocks).
    pub packet_bytes: u32,
    /// How a list combines a packet.
    pub inner: Inner,
    /// How packets are spread over the lists.
    pub assignment: Assignment,
    /// Most survivors a dataflow uses (q); `None`: all of them.
    pub max_sources: Option<u16>,
    /// The gateway's link, bytes per second (b_g of the closed forms).
    pub gateway_bytes_per_s: f64,
    /// One hop's latency between nodes, for `Auto`'s estimate.
    pub hop_latency_ns: u64,
    /// A sender's cost per packet, for `Auto`'s estimate.
    pub per_packet_ns: u64,
}

impl Default for ReconstructSettings {
    fn default() -> Self {
        ReconstructSettings {
            kind: ReconstructKind::Gateway,
            packet_bytes: 256 * 1024,
            inner: Inner::Chain,
            assignment: Assignment::RoundRobin,
            max_sources: None,
            gateway_bytes_per_s: 1.25e9,
            hop_latency_ns: 100_000,
            per_packet_ns: 50_000,
        }
    }
}

impl ReconstructSettings {
    /// Checks the settings; returns what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.packet_bytes == 0 {
            return Err("packet_bytes must be positive".into());
        }
        if !(self.gateway_bytes_per_s.is_finite() && self.gateway_bytes_per_s > 0.0) {
            return Err(format!("gateway_bytes_per_s {} must be positive and finite", self.gateway_bytes_per_s));
        }
        if self.max_sources == Some(0) {
            return Err("max_sources must be at least 1".into());
        }
        Ok(())
    }
}

/// A unit that survives, where it is, how loaded its node is and how fast it serves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Survivor {
    /// The unit's index in its stripe.
    pub unit: u8,
    /// Its node.
    pub node: NodeId,
    /// The node's load (queued bytes, or whatever the caller ranks by; lower first).
    pub load: f64,
    /// The node's rate, bytes per second (b_s).
    pub rate_bytes_per_s: f64,
}

/// The choice: the topology for the plan and its sources, in dataflow order (for the gateway
/// decode, the k units read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reconstruction {
    /// How the units travel.
    pub topology: ReconstructionTopology,
    /// The units read, source 0 first.
    pub sources: Vec<u8>,
}

/// How to rebuild `range_bytes` of a lost unit of a code with `k` data units from `survivors`
/// (fewer than k: every survivor, at the gateway, which then fails to decode as it must).
pub fn choose(settings: &ReconstructSettings, k: u16, survivors: &[Survivor], range_bytes: u64) -> Reconstruction {
    debug_assert!(settings.validate().is_ok());
    let mut ranked = survivors.to_vec();
    ranked.sort_by(|a, b| a.load.total_cmp(&b.load).then(a.unit.cmp(&b.unit)));
    let usable = ranked.len().min(255) as u16;
    let q = settings.max_sources.map_or(usable, |cap| cap.min(usable));
    let gateway = |ranked: &[Survivor]| Reconstruction {
        topology: ReconstructionTopology::Gateway,
        sources: ranked.iter().take(usize::from(k.max(1))).map(|s| s.unit).collect(),
    };
    if q <= k {
        // No survivor to spare: the dataflows would read the same k units through more hops.
        return gateway(&ranked);
    }
    let apls = Method::Apls { q, inner: settings.inner, assignment: settings.assignment };
    let method = match settings.kind {
        ReconstructKind::Gateway => return gateway(&ranked),
        ReconstructKind::Apls => apls,
        ReconstructKind::Segmented => Method::Segmented { q, assignment: settings.assignment },
        ReconstructKind::Auto => {
            let chosen = &ranked[..usize::from(q)];
            if estimate_apls_ns(settings, k, chosen, range_bytes)
                < estimate_gateway_ns(settings, k, chosen, range_bytes)
            {
                apls
            } else {
                return gateway(&ranked);
            }
        }
    };
    let sources = ranked.iter().take(usize::from(q)).map(|s| s.unit).collect();
    Reconstruction {
        topology: ReconstructionTopology::Dataflow { dataflow: method, packet_bytes: settings.packet_bytes },
        sources,
    }
}

/// The slowest source's rate among `sources` (the chain and the decode wait for it).
fn slowest_rate(sources: &[Survivor]) -> f64 {
    sources.iter().map(|s| s.rate_bytes_per_s).fold(f64::INFINITY, f64::min).max(1.0)
}

/// The gateway decode from the k least-loaded sources: the gateway's link carries k·c, each
/// source's c; one hop.
pub fn estimate_gateway_ns(settings: &ReconstructSettings, k: u16, sources: &[Survivor], range_bytes: u64) -> f64 {
    let k_sources = &sources[..usize::from(k).min(sources.len())];
    let c = range_bytes as f64;
    let seconds = (f64::from(k) * c / settings.gateway_bytes_per_s).max(c / slowest_rate(k_sources));
    seconds * 1e9 + settings.hop_latency_ns as f64
}

/// APLS over `sources` (q of them): each sends k·c/q (and pays the per-packet cost on its share
/// of the packets), the gateway receives c, and a chain of k hops fills first.
pub fn estimate_apls_ns(settings: &ReconstructSettings, k: u16, sources: &[Survivor], range_bytes: u64) -> f64 {
    let (c, k_f, q) = (range_bytes as f64, f64::from(k), sources.len() as f64);
    let rate = slowest_rate(sources);
    let packet = f64::from(settings.packet_bytes).min(c.max(1.0));
    let packets_per_source = (c / packet).ceil() * k_f / q;
    let per_packet_s = settings.per_packet_ns as f64 / 1e9;
    let sending = k_f * c / (q * rate) + packets_per_source * per_packet_s;
    let fill = k_f * (settings.hop_latency_ns as f64 / 1e9 + per_packet_s + packet / rate);
    (sending.max(c / settings.gateway_bytes_per_s) + fill) * 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    fn survivors(count: u8, rate: f64) -> Vec<Survivor> {
        (0..count)
            .map(|unit| Survivor {
                unit,
                node: NodeId(u32::from(unit) + 10),
                load: f64::from(unit % 3),
                rate_bytes_per_s: rate,
            })
            .collect()
    }

    #[test]
    fn fixed_kinds_pick_the_least_loaded_survivors() {
        let all = survivors(13, 12.5e6);
        let gateway = choose(&ReconstructSettings::default(), 10, &all, 1 << 20);
        assert_eq!(gateway.topology, ReconstructionTopology::Gateway);
        assert_eq!(gateway.sources.len(), 10);
        // Loads 0, 1, 2 by unit: the five of load 0, the four of load 1, then unit 2.
        assert_eq!(gateway.sources, vec![0, 3, 6, 9, 12, 1, 4, 7, 10, 2]);
        let settings = ReconstructSettings { kind: ReconstructKind::Apls, max_sources: Some(12), ..Default::default() };
        let apls = choose(&settings, 10, &all, 1 << 20);
        let ReconstructionTopology::Dataflow { dataflow: Method::Apls { q, .. }, packet_bytes } = apls.topology else {
            panic!("{:?}", apls.topology)
        };
        assert_eq!((q, packet_bytes, apls.sources.len()), (12, 256 * 1024, 12));
        assert!(!apls.sources.contains(&11), "the most loaded survivor is left out");
        let segmented =
            choose(&ReconstructSettings { kind: ReconstructKind::Segmented, ..Default::default() }, 10, &all, 1);
        assert!(matches!(
            segmented.topology,
            ReconstructionTopology::Dataflow { dataflow: Method::Segmented { q: 13, .. }, .. }
        ));
        // Only k survivors: nothing to spread over, the gateway decodes.
        let few = choose(&settings, 10, &all[..10], 1 << 30);
        assert_eq!(few.topology, ReconstructionTopology::Gateway);
    }

    #[test]
    fn auto_keeps_the_gateway_for_small_ranges_and_fast_nodes_and_takes_apls_for_large_ranges_on_slow_ones() {
        let auto =
            ReconstructSettings { kind: ReconstructKind::Auto, gateway_bytes_per_s: 187.5e6, ..Default::default() };
        let slow = survivors(13, 12.5e6);
        let is_apls = |r: &Reconstruction| matches!(r.topology, ReconstructionTopology::Dataflow { .. });
        assert!(is_apls(&choose(&auto, 10, &slow, 64_000_000)), "64 MB on 100 Mbps nodes");
        assert!(
            !is_apls(&choose(&auto, 10, &survivors(13, 187.5e6), 256_000)),
            "256 KB on nodes as fast as the gateway"
        );
        // The estimates are the closed forms: APLS is k/q of the gateway decode's bound plus its fill.
        let c = 64_000_000u64;
        let gateway = estimate_gateway_ns(&auto, 10, &slow, c);
        assert!((gateway / 1e9 - 5.12).abs() < 0.01, "c/b_s: {gateway}");
        let no_overheads = ReconstructSettings { hop_latency_ns: 0, per_packet_ns: 0, packet_bytes: 1, ..auto };
        let apls = estimate_apls_ns(&no_overheads, 10, &slow, c);
        assert!((apls / 1e9 - 10.0 * 5.12 / 13.0).abs() < 0.01, "Eq. 3: {apls}");
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(ReconstructSettings { packet_bytes: 0, ..Default::default() }.validate().is_err());
        assert!(ReconstructSettings { gateway_bytes_per_s: f64::NAN, ..Default::default() }.validate().is_err());
        assert!(ReconstructSettings { max_sources: Some(0), ..Default::default() }.validate().is_err());
        assert!(ReconstructSettings::default().validate().is_ok());
    }
}
