//! Segmented degraded reads (APLS's lists without node changes; issue 32, docs/lab/apls.md): when a
//! unit range must be rebuilt (its unit is recorded missing or its node is not Up) and
//! `[data.reconstruct] kind = "segmented"`, the range is split into q contiguous segments over the
//! q survivors on Up nodes; segment j is decoded at the gateway from the k survivors of APLS's list
//! r_j, so each survivor serves k/q of the range (its segments are one or two contiguous ranges,
//! read as ONE merged task on its node) instead of k survivors serving all of it. The segments and
//! lists are the execution core's dataflow (`Method::Segmented`, contiguous assignment).
//!
//! Any failure (a survivor does not answer, a range is corrupt) gives up the segmented read and the
//! caller reads as before (the robust read tries every decodable set). Only MDS codes (RS): an LRC
//! unit's recovery sets are not any k of the others. With an admission pool (`[data.admission]`)
//! the read is one request of q tasks, each merged task holding a slot while it runs.
//!
//! Must not: decide whether a read is degraded (the read policy's and membership's), or read a
//! unit that is recorded missing or on a node that is not Up.

use bytes::Bytes;
use codec::CodeSpec;
use execution::reconstruct::{Dataflow, Method};
use futures_util::future::try_join_all;
use policy::reconstruct::{ReconstructKind, ReconstructSettings, Survivor};

use crate::data::DataError;
use crate::data::io::stripe_io::{decode, is_up};
use crate::data::read::range::RangeRead;

/// Whether `range` must be rebuilt and the configuration asks for a segmented read (the controller
/// then leaves it to the robust read, which tries it first).
pub fn applies(range: RangeRead<'_>) -> bool {
    applies_under(range, &crate::profiles::reconstruct_settings(range.io.reconstruct()))
}

fn applies_under(range: RangeRead<'_>, settings: &ReconstructSettings) -> bool {
    settings.kind == ReconstructKind::Segmented
        && matches!(range.stripe.code_spec(), Ok(CodeSpec::Rs { .. }))
        && must_be_rebuilt(range)
        && spare_survivors(range)
}

/// Whether `range` must be rebuilt (its unit recorded missing or its node not Up) on nodes (not a
/// backend, whose configuration refuses any other kind than the gateway decode).
pub(crate) fn must_be_rebuilt(range: RangeRead<'_>) -> bool {
    let RangeRead { io, nodes, stripe, unit, .. } = range;
    io.backend().is_none() && (stripe.is_missing(unit) || !is_up(nodes, stripe.placement[unit]))
}

/// Whether an RS stripe has a survivor to spare for `range` (more than k usable): with no more than
/// k, every survivor is read whole anyway and the gateway decodes, as a segmented or APLS read would.
pub(crate) fn spare_survivors(range: RangeRead<'_>) -> bool {
    let RangeRead { nodes, stripe, code, unit, .. } = range;
    let usable = (0..stripe.placement.len())
        .filter(|&u| u != unit && !stripe.is_missing(u) && is_up(nodes, stripe.placement[u]))
        .count();
    usable > code.data_units()
}

/// What a rebuild of `range` by `how` gave: its bytes (counted degraded), or `None` after logging
/// why it gave up (the caller reads as before).
pub(crate) fn served(range: RangeRead<'_>, how: &'static str, outcome: Result<Bytes, DataError>) -> Option<Bytes> {
    match outcome {
        Ok(bytes) => {
            range.io.count_degraded();
            range.io.counters().rebuilt_reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            metrics::counter!("lowtail_gateway_rebuilt_reads_total", "how" => how).increment(1);
            Some(bytes)
        }
        Err(error) => {
            range.io.counters().rebuild_fallbacks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            metrics::counter!("lowtail_gateway_rebuilt_read_fallbacks_total", "how" => how).increment(1);
            tracing::info!(%error, how, "rebuilding read gave up; reading by recovery set");
            None
        }
    }
}

/// The range rebuilt from every survivor in segments, or `None` when a segmented read does not
/// apply or did not succeed (the caller reads as before).
pub async fn read_lost(range: RangeRead<'_>) -> Option<Bytes> {
    let settings = crate::profiles::reconstruct_settings(range.io.reconstruct());
    if !applies_under(range, &settings) || range.length == 0 {
        return None;
    }
    served(range, "segmented", read(range, &settings).await)
}

/// The survivors, least loaded first as the reconstruction policy ranks them, and the dataflow of
/// the range over them.
fn plan(range: RangeRead<'_>, settings: &ReconstructSettings) -> Result<(Vec<u8>, Dataflow), DataError> {
    let (method, sources) = chosen_dataflow(range, settings)?;
    let Method::Segmented { q, .. } = method else {
        return Err(DataError::Internal(format!("the policy chose {method:?} for a segmented read")));
    };
    let k = range.code.data_units() as u16;
    let flow = Dataflow::segmented(k, q, range.length).map_err(|e| DataError::Internal(e.to_string()))?;
    Ok((sources, flow))
}

/// The dataflow the reconstruction policy chooses for `range` of an RS stripe over its usable
/// survivors, and its sources; an error when it keeps the gateway decode (no more than k
/// survivors, or `auto` estimates the decode faster). Survivors are ranked by what this gateway
/// sent them within the load window plus what their last probe had queued (APLS's windowed table);
/// `auto` estimates with each survivor's probed rate (the slower of disk and link; unknown counts
/// as not binding) and the gateway's emulated downlink where it is shaped.
pub(crate) fn chosen_dataflow(
    range: RangeRead<'_>,
    settings: &ReconstructSettings,
) -> Result<(Method, Vec<u8>), DataError> {
    let RangeRead { io, nodes, stripe, code, unit, length, .. } = range;
    let loads = io.cluster().loads();
    let survivors: Vec<Survivor> = (0..stripe.placement.len())
        .filter(|&u| u != unit && !stripe.is_missing(u) && is_up(nodes, stripe.placement[u]))
        .map(|u| {
            let node = stripe.placement[u];
            let (load, rate) = loads.load_and_rate(node);
            Survivor {
                unit: u as u8,
                node: model::NodeId(node.0),
                load: load as f64,
                rate_bytes_per_s: rate.unwrap_or(f64::INFINITY),
            }
        })
        .collect();
    let mut settings = settings.clone();
    let downlink = io.ingress().shape();
    if downlink.bytes_per_s > 0.0 {
        settings.gateway_bytes_per_s = downlink.bytes_per_s;
    }
    let chosen = policy::reconstruct::choose(&settings, code.data_units() as u16, &survivors, length);
    match chosen.topology {
        model::ReconstructionTopology::Dataflow { dataflow, .. } => Ok((dataflow, chosen.sources)),
        _ => Err(DataError::Unavailable(format!(
            "{} survivors of {}: the policy keeps the gateway decode",
            survivors.len(),
            stripe.id
        ))),
    }
}

/// What one source read: its runs of packets and one buffer per run.
struct SourceRead {
    unit: usize,
    runs: Vec<(u32, u32)>,
    bytes: Vec<Bytes>,
}

impl SourceRead {
    /// Packet `packet`'s bytes (the source reads it: it is in one of its runs).
    fn packet(&self, flow: &Dataflow, packet: u32) -> Bytes {
        let (run, &(first, _)) = self
            .runs
            .iter()
            .enumerate()
            .find(|(_, (first, count))| (*first..first + count).contains(&packet))
            .expect("a member reads its packet");
        let start = (flow.packet_offset(packet) - flow.packet_offset(first)) as usize;
        let end = (flow.packet_offset(packet + 1).min(flow.range_bytes) - flow.packet_offset(first)) as usize;
        self.bytes[run].slice(start..end)
    }
}

async fn read(range: RangeRead<'_>, settings: &ReconstructSettings) -> Result<Bytes, DataError> {
    let (sources, flow) = plan(range, settings)?;
    // One request of the read's pool, one task per source, each holding a slot while it reads.
    let admitted = match range.admission {
        Some(pool) => Some(pool.admit(sources.len()).await?),
        None => None,
    };
    let admitted = admitted.as_ref();
    // One merged task per source: its runs of packets, as byte ranges of its unit.
    let reads = sources.iter().zip(flow.local_reads()).enumerate().map(|(task, (&unit, packets))| {
        let runs = node::session::runs(&packets);
        let ranges: Vec<(u64, u64)> = runs
            .iter()
            .map(|&(first, count)| {
                let start = flow.packet_offset(first);
                let end = flow.packet_offset(first + count).min(flow.range_bytes);
                (range.offset + start, end - start)
            })
            .collect();
        async move {
            let _slot = match admitted {
                Some(plan) => Some(plan.slot(task).await?),
                None => None,
            };
            let unit = usize::from(unit);
            let bytes = range.io.read_unit_ranges(range.nodes, range.stripe, unit, &ranges).await?;
            Ok::<_, DataError>(SourceRead { unit, runs, bytes })
        }
    });
    let answers = try_join_all(reads).await?;
    let mut out = Vec::with_capacity(range.length as usize);
    for packet in 0..flow.packets() {
        let members = flow.members(packet);
        let units: Vec<usize> = members.iter().map(|&m| answers[usize::from(m)].unit).collect();
        let buffers: Vec<Bytes> = members.iter().map(|&m| answers[usize::from(m)].packet(&flow, packet)).collect();
        out.extend_from_slice(&decode(range.code, range.unit, &units, &buffers)?);
    }
    debug_assert_eq!(out.len() as u64, range.length);
    Ok(Bytes::from(out))
}
