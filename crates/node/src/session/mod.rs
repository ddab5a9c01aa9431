//! Reconstruction sessions (issue 32, docs/lab/apls.md): a node's part of a dataflow that rebuilds one
//! range of a lost unit among the storage nodes — APLS, ECPipe, PPR, the traditional read. The
//! requestor (the gateway) builds the dataflow and sends each source node its [`SessionPlan`]: per
//! step, in packet order, how many packets other nodes push into it, the coefficient this node's
//! own packet is multiplied by, and where the sum goes (a peer, or back to the requestor).
//!
//! Owns the plan's validation ([`SessionPlan::from_proto`]), the registry of open sessions and
//! their inboxes ([`inbox`]) and a session's execution ([`run`]). Must not choose a method,
//! sources or coefficients (the gateway's policy and codec do), or read a unit except through the
//! node's queue (in the class of the session's call).
//!
//! Bounds (the flow control): at most [`MAX_SESSIONS`] open; a session runs and sends at most its
//! window of steps past its lowest unsent one ([`SessionPlan::window_steps`]: [`WINDOW_BYTES`] of
//! packets, at least [`MIN_WINDOW_STEPS`]), and its inbox takes pushes only for those (a push
//! beyond waits, and so does its sender's step); packets at most [`MAX_PACKET_BYTES`]; every
//! session ends by its timeout (at most [`MAX_SESSION_TIMEOUT`]). A session holds at most about
//! twice its window in memory.

pub mod inbox;
pub mod run;

use std::time::Duration;

use crate::classes::ClassId;
use crate::error::{NodeError, UnitId};
use crate::proto;

pub use inbox::{Inbox, Sessions};

/// A session's id: 16 bytes the requestor chose, the same on every node of one dataflow.
pub type SessionId = [u8; 16];

/// Most sessions open on a node at once (pushes waiting for their session count too); past it a
/// session is refused and its requestor reads as before.
pub const MAX_SESSIONS: usize = 64;
/// Largest packet (a message carries one, under the 8 MiB message limit).
pub const MAX_PACKET_BYTES: u32 = 4 << 20;
/// Packet bytes a session's window spans (the chains of APLS's lists pipeline as deep as it lets
/// them).
pub const WINDOW_BYTES: u64 = 4 << 20;
/// Fewest steps in a window, whatever the packet size (and before a session's plan is known).
pub const MIN_WINDOW_STEPS: usize = 8;
/// Most inputs pushed into one step.
pub const MAX_INPUTS: u32 = 255;
/// Most distinct peers one session pushes to.
pub const MAX_PEERS: usize = 64;
/// Longest session timeout accepted, and the one a plan gets when it asks none.
pub const MAX_SESSION_TIMEOUT: Duration = Duration::from_secs(600);
/// Timeout of a plan that asks none.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a push waits for its session to be opened on this node (the requestor's call to this
/// node may arrive after an upstream node's first packet).
pub const OPEN_WAIT: Duration = Duration::from_secs(10);
/// Longest peer address.
const MAX_ADDR_BYTES: usize = 256;

/// One packet this node sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Which packet of the range.
    pub packet: u32,
    /// The coefficient this node's own packet is multiplied by, when it adds it.
    pub coefficient: Option<u8>,
    /// Packets pushed into this step before it leaves.
    pub inputs: u8,
    /// The peer it goes to, address and node id (`None`: back to the requestor).
    pub to: Option<(String, u32)>,
}

/// This node's part of one dataflow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionPlan {
    /// The session.
    pub id: SessionId,
    /// This node's index among the dataflow's sources.
    pub source: u16,
    /// The unit this node reads.
    pub unit: UnitId,
    /// The range's first byte in the unit.
    pub range_offset: u64,
    /// The range's length.
    pub range_bytes: u64,
    /// Its packet size.
    pub packet_bytes: u32,
    /// The steps, ascending by packet.
    pub steps: Vec<Step>,
    /// The session gives up after this long.
    pub timeout: Duration,
    /// The unit this node stores what it would send back as (repair into a new node), if any.
    pub store: Option<UnitId>,
    /// The latency class of the session's tasks (its local reads and its stored unit): the
    /// `x-lowtail-class` of the `Reconstruct` call.
    pub class: ClassId,
}

impl SessionPlan {
    /// The plan a `Reconstruct` request of `class` carries, or why it is refused (nothing is
    /// opened then).
    pub fn from_proto(request: proto::ReconstructRequest, class: ClassId) -> Result<SessionPlan, NodeError> {
        class.checked()?;
        let bad = |what: String| Err(NodeError::InvalidArgument(format!("reconstruction session: {what}")));
        let id = session_id(&request.session)?;
        let Ok(source) = u16::try_from(request.source) else {
            return bad(format!("source {} does not fit in 16 bits", request.source));
        };
        let unit = request.unit.unwrap_or_default();
        let unit = unit_id(unit.stripe, unit.unit)?;
        if request.packet_bytes == 0 || request.packet_bytes > MAX_PACKET_BYTES {
            return bad(format!("packet_bytes {} must be in 1..={MAX_PACKET_BYTES}", request.packet_bytes));
        }
        if request.range_bytes == 0 || request.range_offset.checked_add(request.range_bytes).is_none() {
            return bad(format!(
                "range of {} bytes at {} is empty or overflows",
                request.range_bytes, request.range_offset
            ));
        }
        let packets = request.range_bytes.div_ceil(u64::from(request.packet_bytes));
        let timeout = match request.timeout_ms {
            0 => DEFAULT_SESSION_TIMEOUT,
            ms if Duration::from_millis(ms) > MAX_SESSION_TIMEOUT => {
                return bad(format!("timeout_ms {ms} is more than {} s", MAX_SESSION_TIMEOUT.as_secs()));
            }
            ms => Duration::from_millis(ms),
        };
        let steps = steps(request.steps, packets)?;
        let store = request.store.map(|unit| unit_id(unit.stripe, unit.unit)).transpose()?;
        if store.is_some()
            && (request.range_offset != 0 || steps.len() as u64 != packets || steps.iter().any(|s| s.to.is_some()))
        {
            return bad("a storing session covers its whole unit, one step per packet, each stored".into());
        }
        Ok(SessionPlan {
            id,
            source,
            unit,
            range_offset: request.range_offset,
            range_bytes: request.range_bytes,
            packet_bytes: request.packet_bytes,
            steps,
            timeout,
            store,
            class,
        })
    }

    /// Bytes of `packet` (the last may be short).
    pub fn packet_len(&self, packet: u32) -> u64 {
        let start = u64::from(packet) * u64::from(self.packet_bytes);
        (self.range_bytes - start).min(u64::from(self.packet_bytes))
    }

    /// Steps a session runs, sends and takes pushes for past its lowest unsent one.
    pub fn window_steps(&self) -> usize {
        ((WINDOW_BYTES / u64::from(self.packet_bytes)) as usize).max(MIN_WINDOW_STEPS)
    }

    /// The byte offset of `packet` in the unit.
    pub fn packet_offset(&self, packet: u32) -> u64 {
        self.range_offset + u64::from(packet) * u64::from(self.packet_bytes)
    }
}

/// Ascending packets as runs of consecutive ones: (first, count) — what one ranged read covers.
pub fn runs(packets: &[u32]) -> Vec<(u32, u32)> {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &packet in packets {
        match runs.last_mut() {
            Some((first, count)) if *first + *count == packet => *count += 1,
            _ => runs.push((packet, 1)),
        }
    }
    runs
}

/// A unit id from the wire (its index must fit in 16 bits).
fn unit_id(stripe: u64, unit: u32) -> Result<UnitId, NodeError> {
    let index = u16::try_from(unit)
        .map_err(|_| NodeError::InvalidArgument(format!("unit index {unit} does not fit in 16 bits")))?;
    Ok(UnitId::new(stripe, index))
}

/// The session id in `bytes`, which must be 16 long.
pub fn session_id(bytes: &[u8]) -> Result<SessionId, NodeError> {
    SessionId::try_from(bytes)
        .map_err(|_| NodeError::InvalidArgument(format!("a session id is 16 bytes, not {}", bytes.len())))
}

/// The steps of a request, checked: ascending packets of the range, each at most once, each adding
/// something, coefficients nonzero, inputs and peers bounded.
fn steps(raw: Vec<proto::SessionStep>, packets: u64) -> Result<Vec<Step>, NodeError> {
    let bad = |what: String| Err(NodeError::InvalidArgument(format!("reconstruction session: {what}")));
    if raw.is_empty() {
        return bad("no steps".into());
    }
    let mut steps: Vec<Step> = Vec::with_capacity(raw.len());
    let mut peers = std::collections::BTreeSet::new();
    for step in raw {
        if u64::from(step.packet) >= packets || steps.last().is_some_and(|last| last.packet >= step.packet) {
            return bad(format!("step packet {} out of order or past the range's {packets} packets", step.packet));
        }
        if step.inputs > MAX_INPUTS || (!step.reads_local && step.inputs == 0) {
            return bad(format!("packet {}: {} inputs, reads_local {}", step.packet, step.inputs, step.reads_local));
        }
        let coefficient = match (step.reads_local, u8::try_from(step.coefficient)) {
            (false, _) => None,
            (true, Ok(c)) if c != 0 => Some(c),
            (true, _) => {
                return bad(format!("packet {}: coefficient {} not in 1..=255", step.packet, step.coefficient));
            }
        };
        if step.to_addr.len() > MAX_ADDR_BYTES {
            return bad(format!("peer address of {} bytes", step.to_addr.len()));
        }
        let to = (!step.to_addr.is_empty()).then_some((step.to_addr, step.to_node));
        if let Some((addr, _)) = &to {
            peers.insert(addr.clone());
        }
        steps.push(Step { packet: step.packet, coefficient, inputs: step.inputs as u8, to });
    }
    if peers.len() > MAX_PEERS {
        return bad(format!("{} peers, at most {MAX_PEERS}", peers.len()));
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(steps: Vec<proto::SessionStep>) -> proto::ReconstructRequest {
        proto::ReconstructRequest {
            session: vec![7u8; 16].into(),
            source: 1,
            unit: Some(proto::UnitRef { stripe: 3, unit: 2 }),
            range_offset: 100,
            range_bytes: 1000,
            packet_bytes: 300,
            steps,
            timeout_ms: 0,
            store: None,
        }
    }

    fn step(packet: u32, reads_local: bool, inputs: u32, to: &str) -> proto::SessionStep {
        proto::SessionStep { packet, reads_local, coefficient: 5, inputs, to_addr: to.into(), to_node: 1 }
    }

    #[test]
    fn a_good_plan_is_read_with_its_packets_and_default_timeout() {
        let plan = SessionPlan::from_proto(request(vec![step(0, true, 0, "peer:1"), step(3, true, 2, "")]), ClassId(1))
            .unwrap();
        assert_eq!(plan.class, ClassId(1));
        assert_eq!(plan.steps.len(), 2);
        assert_eq!(plan.steps[0].to, Some(("peer:1".to_string(), 1)));
        assert_eq!(plan.steps[1], Step { packet: 3, coefficient: Some(5), inputs: 2, to: None });
        assert_eq!(plan.timeout, DEFAULT_SESSION_TIMEOUT);
        assert_eq!((plan.packet_len(0), plan.packet_len(3)), (300, 100), "the last packet is short");
        assert_eq!(plan.packet_offset(3), 1000);
    }

    #[test]
    fn malformed_plans_are_refused_with_the_reason() {
        let cases: Vec<(proto::ReconstructRequest, &str)> = vec![
            (
                proto::ReconstructRequest { session: vec![1u8; 15].into(), ..request(vec![step(0, true, 0, "")]) },
                "16 bytes",
            ),
            (request(vec![]), "no steps"),
            (request(vec![step(4, true, 0, "")]), "past the range"),
            (request(vec![step(1, true, 0, ""), step(1, true, 0, "")]), "out of order"),
            (request(vec![step(0, false, 0, "")]), "inputs"),
            (request(vec![proto::SessionStep { coefficient: 0, ..step(0, true, 0, "") }]), "coefficient"),
            (request(vec![step(0, true, 256, "")]), "inputs"),
            (proto::ReconstructRequest { packet_bytes: 0, ..request(vec![step(0, true, 0, "")]) }, "packet_bytes"),
            (proto::ReconstructRequest { timeout_ms: 700_000, ..request(vec![step(0, true, 0, "")]) }, "timeout"),
            (
                proto::ReconstructRequest {
                    store: Some(proto::UnitRef { stripe: 3, unit: 4 }),
                    range_offset: 0,
                    ..request(vec![step(0, false, 1, ""), step(1, false, 1, ""), step(2, false, 1, "")])
                },
                "whole unit",
            ),
        ];
        for (request, why) in cases {
            let error = SessionPlan::from_proto(request, ClassId::DEFAULT).unwrap_err().to_string();
            assert!(error.contains(why), "{error} should say {why}");
        }
    }
}
