//! Degraded reads rebuilt by the storage nodes (APLS, ECPipe, PPR, traditional; issue 32,
//! docs/lab/apls.md): the gateway turns the execution core's [`Dataflow`] into one session plan per
//! source node — per packet it sends, what is pushed into it, the codec's repair coefficient for its
//! own packet, and where the sum goes — opens every session, and adds up the packets that come back.
//! With `[data.reconstruct] kind = "apls"` a unit range that must be rebuilt goes this way first
//! ([`read_lost`]); RS codes get APLS over every usable survivor, LRC codes a chain over their
//! cheapest recovery set (a local group).
//!
//! Any failure (a node refuses or dies, a session times out, a packet is wrong) gives up the
//! dataflow: every session is dropped, which cancels it on its node, and the caller reads as before
//! (the gateway decode). Must not: decide whether a read is degraded (the read policy's and
//! membership's), choose the method (the reconstruction policy's), or trust a node's packet it did
//! not ask for.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use codec::{CodeSpec, ErasureCode};
use execution::reconstruct::watch::{DataflowLimits, DataflowWatch, WatchEvent, WatchFailure, WatchOutcome};
use execution::reconstruct::{Dataflow, Method, Site};
use futures_util::StreamExt;
use futures_util::future::try_join_all;
use meta::{NodeInfo, StripeId};
use node::proto;
use policy::reconstruct::{ReconstructKind, ReconstructSettings};
use rand::Rng;
use tokio::time::Instant;

use crate::data::DataError;
use crate::data::io::stripe_io::{StripeIo, is_up};
use crate::data::read::range::RangeRead;

/// Longest a dataflow may take before the gateway gives up on it (and each node's session with it).
pub const DATAFLOW_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest the gateway waits for the next message of any session before it gives up (a node that
/// stopped answering without closing its connection).
pub const STALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest packet a session accepts.
pub const MAX_PACKET_BYTES: u32 = node::session::MAX_PACKET_BYTES;

/// One source of a dataflow: the surviving unit it reads and the node holding it.
#[derive(Clone, Debug)]
pub struct Source {
    /// The unit's index in the stripe.
    pub unit: usize,
    /// Its node.
    pub node: NodeInfo,
}

/// What a dataflow rebuilds, and how.
#[derive(Clone, Copy)]
pub struct Rebuild<'a> {
    /// The stripe's code.
    pub code: &'a dyn ErasureCode,
    /// The stripe.
    pub stripe: StripeId,
    /// The unit rebuilt.
    pub target: usize,
    /// The range's first byte in that unit (the range is `flow.range_bytes` long).
    pub offset: u64,
    /// The dataflow.
    pub flow: &'a Dataflow,
    /// Its sources: the flow's source i is `sources[i]`.
    pub sources: &'a [Source],
}

/// The range of `rebuild`, rebuilt by running its dataflow on the nodes of its sources.
pub async fn run(io: &StripeIo, rebuild: Rebuild<'_>) -> Result<Bytes, DataError> {
    let Rebuild { stripe, target, flow, sources, .. } = rebuild;
    let session: [u8; 16] = rand::rng().random();
    let requests = plans(rebuild, session)?;
    let mut assembly = Assembly::new(flow);
    // A source with no transfer (fewer packets than lists) opens no session.
    let sessions: Vec<(usize, &NodeInfo, proto::ReconstructRequest)> = requests
        .into_iter()
        .enumerate()
        .filter(|(_, request)| !request.steps.is_empty())
        .map(|(i, request)| (i, &sources[i].node, request))
        .collect();
    // Each packet takes its turn on the emulated downlink as it comes; the range is whole when the
    // last has crossed.
    let mut crossed = None;
    execute(io, (stripe, target), (flow, true), sessions, |_, message| {
        crossed = io.ingress().reserve_now(message.data.len() as u64).max(crossed);
        assembly.take(message)
    })
    .await?;
    if let Some(crossed) = crossed {
        tokio::time::sleep_until(crossed).await;
    }
    Ok(Bytes::from(assembly.out))
}

/// Rebuilds the whole unit of `rebuild` (offset 0, the unit's length) straight into `home`, its new
/// node (repair): the sources push what they would send the gateway to `home`'s session, which
/// stores it as the unit and answers once it is durable; no unit byte crosses the gateway.
pub async fn rebuild_into(io: &StripeIo, rebuild: Rebuild<'_>, home: &NodeInfo) -> Result<(), DataError> {
    let Rebuild { stripe, target, offset, flow, sources, .. } = rebuild;
    assert_eq!(offset, 0, "a unit is rebuilt whole");
    let session: [u8; 16] = rand::rng().random();
    let mut sessions: Vec<(usize, &NodeInfo, proto::ReconstructRequest)> = Vec::new();
    for (i, mut request) in plans(rebuild, session)?.into_iter().enumerate() {
        if request.steps.is_empty() {
            continue;
        }
        for step in request.steps.iter_mut().filter(|step| step.to_addr.is_empty()) {
            (step.to_addr, step.to_node) = (home.address.clone(), home.id.0);
        }
        sessions.push((i, &sources[i].node, request));
    }
    let mut inputs = vec![0u32; flow.packets() as usize];
    flow.transfers.iter().filter(|t| t.to == Site::Requestor).for_each(|t| inputs[t.packet as usize] += 1);
    let steps = (0u32..).zip(inputs).map(|(packet, inputs)| proto::SessionStep {
        packet,
        reads_local: false,
        coefficient: 0,
        inputs,
        to_addr: String::new(),
        to_node: 0,
    });
    let store = proto::ReconstructRequest {
        session: Bytes::copy_from_slice(&session),
        source: sources.len() as u32,
        unit: None,
        range_offset: 0,
        range_bytes: flow.range_bytes,
        packet_bytes: flow.packet_bytes,
        steps: steps.collect(),
        timeout_ms: DATAFLOW_TIMEOUT.as_millis() as u64,
        store: Some(proto::UnitRef { stripe: stripe.0, unit: target as u32 }),
    };
    sessions.push((sources.len(), home, store));
    let mut stored = false;
    execute(io, (stripe, target), (flow, false), sessions, |i, message| match message.done {
        Some(done) if i == sources.len() => {
            stored = done.stored_bytes == flow.range_bytes;
            Ok(())
        }
        Some(_) => Ok(()),
        None => Err(format!("sent packet {} back, which a storing dataflow does not", message.packet)),
    })
    .await?;
    if !stored {
        return Err(DataError::Unavailable(format!("unit {stripe}/{target} was not stored whole on {}", home.id)));
    }
    Ok(())
}

/// How long the gateway waits on a dataflow: the execution core's timer ([`DataflowWatch`]).
pub const LIMITS: DataflowLimits =
    DataflowLimits { stall_ns: STALL_TIMEOUT.as_nanos() as u64, total_ns: DATAFLOW_TIMEOUT.as_nanos() as u64 };

/// Opens every session (`(index, node, plan)`) of `flow` and hands each message to `take` while the
/// execution core's [`DataflowWatch`] waits for every packet the requestor is sent (when
/// `packets_here`) and every session's last message; a failed session, a refused message, a
/// silence of [`STALL_TIMEOUT`] or [`DATAFLOW_TIMEOUT`] in all gives up (every stream dropped,
/// which cancels the sessions).
async fn execute(
    io: &StripeIo,
    (stripe, target): (StripeId, usize),
    (flow, packets_here): (&Dataflow, bool),
    sessions: Vec<(usize, &NodeInfo, proto::ReconstructRequest)>,
    take: impl FnMut(usize, proto::ReconstructResponse) -> Result<(), String>,
) -> Result<(), DataError> {
    let unavailable = |why: String| DataError::Unavailable(format!("dataflow of unit {stripe}/{target}: {why}"));
    let nodes: HashMap<usize, meta::NodeId> = sessions.iter().map(|&(i, node, _)| (i, node.id)).collect();
    let awaited: Vec<usize> = sessions.iter().map(|&(i, _, _)| i).collect();
    let mut watch = DataflowWatch::start(flow, packets_here, &awaited, LIMITS, 0);
    let epoch = Instant::now();
    let opened = sessions.into_iter().map(|(i, node, request)| async move {
        let failed = |why: String| (i, why);
        let client = io.cluster().client(node).await.map_err(|e| failed(e.to_string()))?;
        let local_packets = request.steps.iter().filter(|step| step.reads_local).count() as u64;
        io.cluster().loads().record_request(node.id, local_packets * u64::from(request.packet_bytes));
        let stream = client.reconstruct(request).await.map_err(|e| failed(e.to_string()))?;
        Ok::<_, (usize, String)>(stream.map(move |message| (i, message.map_err(|status| status.message().to_string()))))
    });
    let deadline = epoch + Duration::from_nanos(watch.deadline_ns());
    let mut errors = Vec::new();
    let (_, outcome) = match tokio::time::timeout_at(deadline, try_join_all(opened)).await {
        Ok(Ok(streams)) => {
            watch_streams(futures_util::stream::select_all(streams), &mut watch, epoch, take, &mut errors).await
        }
        Ok(Err(failed)) => {
            errors.push(failed);
            (0, WatchOutcome::Fail(WatchFailure::SessionFailed { session: errors[0].0 }))
        }
        Err(_) => (0, WatchOutcome::Fail(WatchFailure::Stalled)),
    };
    match outcome {
        WatchOutcome::Complete => Ok(()),
        WatchOutcome::Fail(WatchFailure::SessionFailed { session }) => {
            let why = errors.into_iter().find(|(i, _)| *i == session).map_or_else(String::new, |(_, why)| why);
            Err(unavailable(format!("node {}: {why}", nodes.get(&session).copied().unwrap_or(meta::NodeId(0)))))
        }
        WatchOutcome::Fail(WatchFailure::Stalled) => Err(unavailable(format!("no packet for {STALL_TIMEOUT:?}"))),
        WatchOutcome::Fail(WatchFailure::TooLong) => Err(unavailable(format!("took more than {DATAFLOW_TIMEOUT:?}"))),
        WatchOutcome::Fail(WatchFailure::Unexpected { source, packet }) => {
            Err(unavailable(format!("source {source} sent packet {packet}, which it was not to send, or twice")))
        }
        WatchOutcome::Fail(WatchFailure::Incomplete) => {
            Err(unavailable("a session ended without its packets or its last message".into()))
        }
    }
}

/// Feeds `watch` the messages of `streams` (session, message), each handed to `take` first (a
/// refused one or an error fails its session, its reason in `errors`), and the core's timer, until the watch
/// decides; returns when (ns since `epoch`) and what. The gateway's dataflow shell, and the
/// agreement test's.
pub async fn watch_streams<S>(
    mut streams: S,
    watch: &mut DataflowWatch,
    epoch: Instant,
    mut take: impl FnMut(usize, proto::ReconstructResponse) -> Result<(), String>,
    errors: &mut Vec<(usize, String)>,
) -> (u64, WatchOutcome)
where
    S: futures_util::Stream<Item = (usize, Result<proto::ReconstructResponse, String>)> + Unpin,
{
    let now_ns = || u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
    // Bounded: an event that does not decide is progress (a packet or a session's end it awaits).
    loop {
        if let Some(outcome) = watch.outcome() {
            return (now_ns(), outcome);
        }
        let deadline = epoch + Duration::from_nanos(watch.deadline_ns());
        let event = match tokio::time::timeout_at(deadline, streams.next()).await {
            Err(_) => WatchEvent::TimerFired,
            Ok(None) => WatchEvent::StreamsEnded,
            Ok(Some((session, Err(why)))) => {
                errors.push((session, why));
                WatchEvent::SessionFailed { session }
            }
            Ok(Some((session, Ok(message)))) => {
                let event = match message.done {
                    Some(_) => WatchEvent::SessionDone { session },
                    None => WatchEvent::Packet { source: session as u16, packet: message.packet },
                };
                match take(session, message) {
                    Ok(()) => event,
                    Err(why) => {
                        errors.push((session, why));
                        WatchEvent::SessionFailed { session }
                    }
                }
            }
        };
        watch.handle(event, now_ns());
    }
}

/// Every source's session plan: its transfers as steps, each local packet's coefficient from the
/// codec for that packet's member set.
fn plans(rebuild: Rebuild<'_>, session: [u8; 16]) -> Result<Vec<proto::ReconstructRequest>, DataError> {
    let Rebuild { code, stripe, target, offset, flow, sources } = rebuild;
    let mut coefficients: HashMap<Vec<u16>, Vec<u8>> = HashMap::new();
    let mut steps: Vec<Vec<proto::SessionStep>> = vec![Vec::new(); sources.len()];
    for transfer in &flow.transfers {
        let Site::Source(from) = transfer.from else {
            return Err(DataError::Internal("a dataflow transfer leaves the requestor".into()));
        };
        let coefficient = if transfer.reads_local {
            let members = flow.members(transfer.packet);
            let position = members.iter().position(|&m| m == from).expect("a local read makes its sender a member");
            if !coefficients.contains_key(&members) {
                let units: Vec<usize> = members.iter().map(|&m| sources[usize::from(m)].unit).collect();
                let found = code.repair_coefficients(target, &units).map_err(|e| {
                    DataError::Internal(format!("repair coefficients of unit {target} from {units:?}: {e}"))
                })?;
                coefficients.insert(members.clone(), found);
            }
            u32::from(coefficients[&members][position])
        } else {
            0
        };
        let (to_addr, to_node) = match transfer.to {
            Site::Requestor => (String::new(), 0),
            Site::Source(to) => (sources[usize::from(to)].node.address.clone(), sources[usize::from(to)].node.id.0),
        };
        steps[usize::from(from)].push(proto::SessionStep {
            packet: transfer.packet,
            reads_local: transfer.reads_local,
            coefficient,
            inputs: transfer.after.len() as u32,
            to_addr,
            to_node,
        });
    }
    Ok(steps
        .into_iter()
        .enumerate()
        .map(|(i, mut steps)| {
            steps.sort_by_key(|step| step.packet);
            proto::ReconstructRequest {
                session: Bytes::copy_from_slice(&session),
                source: i as u32,
                unit: Some(proto::UnitRef { stripe: stripe.0, unit: sources[i].unit as u32 }),
                range_offset: offset,
                range_bytes: flow.range_bytes,
                packet_bytes: flow.packet_bytes,
                steps,
                timeout_ms: DATAFLOW_TIMEOUT.as_millis() as u64,
                store: None,
            }
        })
        .collect())
}

/// The range as its packets come back: each packet the sum of what the requestor is sent of it
/// (which packets are due, and from whom, the execution core's watch checks).
struct Assembly<'a> {
    flow: &'a Dataflow,
    out: Vec<u8>,
}

impl<'a> Assembly<'a> {
    fn new(flow: &'a Dataflow) -> Self {
        Assembly { flow, out: vec![0; flow.range_bytes as usize] }
    }

    /// Adds one message; refuses a packet outside the range or of the wrong length.
    fn take(&mut self, message: proto::ReconstructResponse) -> Result<(), String> {
        if message.done.is_some() {
            return Ok(());
        }
        let packet = message.packet;
        if packet >= self.flow.packets() {
            return Err(format!("sent packet {packet} of a range of {}", self.flow.packets()));
        }
        let start = self.flow.packet_offset(packet) as usize;
        let end = (start + self.flow.packet_bytes as usize).min(self.out.len());
        if message.data.len() != end - start {
            return Err(format!("packet {packet}: {} bytes (expected {})", message.data.len(), end - start));
        }
        codec::engine::best().mul_add_slice(1, &message.data, &mut self.out[start..end]);
        Ok(())
    }
}

/// Whether `range` must be rebuilt and the configuration has the nodes rebuild it (the controller
/// then leaves it to the robust read, which tries this first).
pub fn applies(range: RangeRead<'_>) -> bool {
    applies_under(range, &crate::profiles::reconstruct_settings(range.io.reconstruct()))
}

/// Repair's rebuild of `range` (a whole unit) straight into `home`, its new node, when
/// `[data.reconstruct] kind = "apls"`: the same dataflow as a degraded read's, its result stored by
/// `home` instead of sent to the gateway. `Err` when it does not apply or did not succeed (repair
/// then rebuilds at the gateway).
pub async fn repair_into(range: RangeRead<'_>, home: &NodeInfo) -> Result<(), DataError> {
    let settings = range.io.reconstruct();
    if !settings.kind.rebuilds_on_nodes() || range.io.backend().is_some() || range.offset != 0 {
        return Err(DataError::Internal("repair rebuilds on the nodes only with kind = \"apls\" or \"auto\"".into()));
    }
    // Repair's rebuilt bytes need not cross the gateway at all: `auto` takes APLS whenever a
    // survivor is spare (its estimate compares reads served at the gateway).
    let settings = ReconstructSettings { kind: ReconstructKind::Apls, ..settings };
    let (flow, sources) = plan(range, &settings)?;
    let RangeRead { io, code, stripe, unit, offset, .. } = range;
    rebuild_into(io, Rebuild { code, stripe: stripe.id, target: unit, offset, flow: &flow, sources: &sources }, home)
        .await?;
    io.counters().repaired_on_nodes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// Whether `range` must be rebuilt and `settings` have the nodes rebuild it: always with `apls`
/// (for an RS stripe, with a survivor to spare), with `auto` when the policy estimates APLS faster
/// than the gateway decode (RS stripes only: an LRC stripe's degraded read already reads one small
/// local group).
fn applies_under(range: RangeRead<'_>, settings: &ReconstructSettings) -> bool {
    let rs = matches!(range.stripe.code_spec(), Ok(CodeSpec::Rs { .. }));
    let chosen = match settings.kind {
        ReconstructKind::Apls => !rs || crate::data::read::segmented::spare_survivors(range),
        ReconstructKind::Auto => rs && crate::data::read::segmented::chosen_dataflow(range, settings).is_ok(),
        _ => false,
    };
    chosen && crate::data::read::segmented::must_be_rebuilt(range)
}

/// The range rebuilt by the nodes, or `None` when that does not apply or did not succeed (the
/// caller reads as before).
pub async fn read_lost(range: RangeRead<'_>) -> Option<Bytes> {
    let settings = crate::profiles::reconstruct_settings(range.io.reconstruct());
    if !applies_under(range, &settings) || range.length == 0 {
        return None;
    }
    let outcome = match plan(range, &settings) {
        Ok((flow, sources)) => admitted_run(range, &flow, &sources).await,
        Err(error) => Err(error),
    };
    crate::data::read::segmented::served(range, "nodes", outcome)
}

/// Runs `range`'s dataflow as one request of the read's admission pool, its sessions its tasks: a
/// chain needs every session open at once, so it starts once it holds a slot for each.
async fn admitted_run(range: RangeRead<'_>, flow: &Dataflow, sources: &[Source]) -> Result<Bytes, DataError> {
    let admitted = match range.admission {
        Some(pool) => Some(pool.admit(sources.len()).await?),
        None => None,
    };
    let _slots = match &admitted {
        Some(plan) => try_join_all((0..sources.len()).map(|task| plan.slot(task))).await?,
        None => Vec::new(),
    };
    let RangeRead { io, code, stripe, unit, offset, .. } = range;
    run(io, Rebuild { code, stripe: stripe.id, target: unit, offset, flow, sources }).await
}

/// The dataflow of `range` and its sources: APLS over the usable survivors of an RS stripe, ECPipe
/// over the cheapest usable recovery set of an LRC one.
fn plan(range: RangeRead<'_>, settings: &ReconstructSettings) -> Result<(Dataflow, Vec<Source>), DataError> {
    let RangeRead { nodes, stripe, code, unit, length, .. } = range;
    let usable = |u: usize| u != unit && !stripe.is_missing(u) && is_up(nodes, stripe.placement[u]);
    let packet_bytes = settings.packet_bytes.min(MAX_PACKET_BYTES).min(u32::try_from(length).unwrap_or(u32::MAX));
    let (method, k, units) = if matches!(stripe.code_spec(), Ok(CodeSpec::Rs { .. })) {
        let (method, sources) = crate::data::read::segmented::chosen_dataflow(range, settings)?;
        (method, code.data_units() as u16, sources.into_iter().map(usize::from).collect::<Vec<_>>())
    } else {
        let sets = code.recovery_sets(unit, 16).map_err(|e| DataError::Internal(e.to_string()))?;
        let set = sets.into_iter().find(|set| set.iter().all(|&u| usable(u))).ok_or_else(|| {
            DataError::Unavailable(format!("no recovery set of unit {}/{unit} on Up nodes", stripe.id))
        })?;
        (Method::Ecpipe, set.len() as u16, set)
    };
    let flow = Dataflow::build(method, k, length, packet_bytes).map_err(|e| DataError::Internal(e.to_string()))?;
    let sources = units
        .into_iter()
        .map(|u| {
            let node = nodes.get(&stripe.placement[u]).cloned();
            node.map(|node| Source { unit: u, node })
                .ok_or_else(|| DataError::Unavailable(format!("node {} not registered", stripe.placement[u])))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((flow, sources))
}
