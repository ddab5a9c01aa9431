//! The open reconstruction sessions of a node and their inboxes: where packets other nodes push
//! wait, summed per packet, until the session's step for that packet takes them.
//!
//! Owns the registry (bounded, [`super::MAX_SESSIONS`]), the per-step sums and the window that
//! bounds them (the session's window of steps past its lowest unsent one). Must not read units,
//! send anything or know the dataflow beyond this node's steps.
//!
//! Why no deadlock: a node's window starts at its lowest step not yet sent, and each push is its
//! own call (a packet beyond a peer's window holds back no other). Take the lowest packet P not yet
//! delivered: every step of an earlier packet has been sent everywhere, so P's step is the first of
//! every window that has one, its pushes are taken, and it runs and leaves; by induction every
//! packet is delivered.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{MAX_SESSIONS, MIN_WINDOW_STEPS, OPEN_WAIT, SessionId, SessionPlan};
use crate::error::NodeError;
use crate::lock;

/// The open sessions of one node.
#[derive(Debug, Default)]
pub struct Sessions {
    open: Mutex<HashMap<SessionId, Arc<Inbox>>>,
    started: AtomicU64,
}

/// Where one session's pushed packets wait.
#[derive(Debug)]
pub struct Inbox {
    state: Mutex<InboxState>,
    changed: Notify,
}

/// A step's pushed packets.
#[derive(Debug)]
enum Partial {
    /// The sum so far and how many inputs it holds.
    Summing(BytesMut, u8),
    /// Its step took the sum.
    Taken,
}

#[derive(Debug)]
struct InboxState {
    /// Per packet with inputs: (its step's index, inputs expected, bytes); `None` until the session
    /// is opened (a push may come first).
    expected: Option<HashMap<u32, (usize, u8, u64)>>,
    /// Until when pushes wait: the session's deadline once open, else [`OPEN_WAIT`] from creation.
    deadline: Instant,
    /// The window's first step: the lowest not yet sent; and its length in steps.
    base: usize,
    window: usize,
    /// Per packet in the window: its pushed sum, or taken.
    partial: HashMap<u32, Partial>,
    /// Why the session ended, once it has.
    closed: Option<String>,
    bytes_received: u64,
}

/// A session opened on this node: removed from the registry, its inbox closed, when dropped.
#[derive(Debug)]
pub struct OpenSession {
    sessions: Arc<Sessions>,
    id: SessionId,
    inbox: Arc<Inbox>,
}

impl Sessions {
    /// Sessions open now (pushes waiting for theirs included).
    pub fn open_count(&self) -> usize {
        lock(&self.open).len()
    }

    /// Sessions opened since the node started.
    pub fn started_count(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }

    /// Opens `plan`'s session (its inbox may already hold pushes); refused when the id is open
    /// already or too many sessions are.
    pub fn open(self: &Arc<Self>, plan: &SessionPlan) -> Result<OpenSession, NodeError> {
        let inbox = self.inbox(plan.id)?;
        inbox.expect(plan)?;
        self.started.fetch_add(1, Ordering::Relaxed);
        Ok(OpenSession { sessions: Arc::clone(self), id: plan.id, inbox })
    }

    /// The inbox of session `id`, created (unopened) when it does not exist yet.
    pub fn inbox(&self, id: SessionId) -> Result<Arc<Inbox>, NodeError> {
        let mut open = lock(&self.open);
        if let Some(inbox) = open.get(&id) {
            return Ok(Arc::clone(inbox));
        }
        if open.len() >= MAX_SESSIONS {
            return Err(NodeError::Overloaded(format!("{MAX_SESSIONS} reconstruction sessions open")));
        }
        let inbox = Arc::new(Inbox::new());
        open.insert(id, Arc::clone(&inbox));
        Ok(inbox)
    }

    /// Forgets `id` if it is still `inbox` (a session that ended, or a push whose session never
    /// opened), and closes the inbox.
    fn forget(&self, id: SessionId, inbox: &Arc<Inbox>, why: &str) {
        let mut open = lock(&self.open);
        if open.get(&id).is_some_and(|current| Arc::ptr_eq(current, inbox)) {
            open.remove(&id);
        }
        drop(open);
        inbox.close(why);
    }

    /// Ends every open session (the node is shutting down): their steps and pushes fail at once.
    pub fn close_all(&self, why: &str) {
        let open: Vec<Arc<Inbox>> = lock(&self.open).values().cloned().collect();
        for inbox in open {
            inbox.close(why);
        }
    }

    /// Gives up on a push's inbox whose session never opened.
    pub fn forget_unopened(&self, id: SessionId, inbox: &Arc<Inbox>) {
        if !inbox.is_open() {
            self.forget(id, inbox, "the session was never opened on this node");
        }
    }
}

impl OpenSession {
    /// The session's inbox.
    pub fn inbox(&self) -> &Arc<Inbox> {
        &self.inbox
    }
}

impl Drop for OpenSession {
    fn drop(&mut self) {
        self.sessions.forget(self.id, &self.inbox, "the session ended");
    }
}

impl Inbox {
    fn new() -> Inbox {
        Inbox {
            state: Mutex::new(InboxState {
                expected: None,
                deadline: Instant::now() + OPEN_WAIT,
                base: 0,
                window: MIN_WINDOW_STEPS,
                partial: HashMap::new(),
                closed: None,
                bytes_received: 0,
            }),
            changed: Notify::new(),
        }
    }

    fn is_open(&self) -> bool {
        lock(&self.state).expected.is_some()
    }

    /// Takes `plan`'s steps as what this inbox expects; refused if it already has a plan.
    fn expect(&self, plan: &SessionPlan) -> Result<(), NodeError> {
        let mut state = lock(&self.state);
        if state.expected.is_some() || state.closed.is_some() {
            return Err(NodeError::InvalidArgument("reconstruction session id already in use".into()));
        }
        let expected = plan.steps.iter().enumerate().filter(|(_, step)| step.inputs > 0);
        state.expected = Some(expected.map(|(i, s)| (s.packet, (i, s.inputs, plan.packet_len(s.packet)))).collect());
        state.deadline = Instant::now() + plan.timeout;
        state.window = plan.window_steps();
        // Pushes that came before the plan are checked against it now.
        let expected = state.expected.as_ref().expect("set above");
        for (packet, partial) in &state.partial {
            let Partial::Summing(sum, count) = partial else { unreachable!("nothing is taken before the plan") };
            let fits =
                expected.get(packet).is_some_and(|&(_, inputs, len)| *count <= inputs && sum.len() as u64 == len);
            if !fits {
                return Err(NodeError::InvalidArgument(format!(
                    "packet {packet} was pushed before the session opened, not as its plan says"
                )));
            }
        }
        drop(state);
        self.changed.notify_waiters();
        Ok(())
    }

    fn close(&self, why: &str) {
        let mut state = lock(&self.state);
        state.closed.get_or_insert_with(|| why.to_string());
        state.partial.clear();
        drop(state);
        self.changed.notify_waiters();
    }

    /// Returns once the session is closed (ended, or the node is shutting down).
    pub async fn closed(&self) {
        // Bounded: each pass waits for a change; closing is the change that ends it.
        loop {
            let changed = self.changed.notified();
            if lock(&self.state).closed.is_some() {
                return;
            }
            changed.await;
        }
    }

    /// Bytes pushed into this inbox so far.
    pub fn bytes_received(&self) -> u64 {
        lock(&self.state).bytes_received
    }

    /// Adds a pushed packet to its step's sum, waiting while the step is beyond the window (or the
    /// session not yet open); fails when the session ended, the packet is not expected or it waits
    /// past the session's deadline.
    pub async fn deposit(&self, packet: u32, data: Bytes) -> Result<(), NodeError> {
        // Bounded: each pass waits for a change or the deadline, which ends the loop.
        loop {
            let changed = self.changed.notified();
            let deadline = {
                let mut state = lock(&self.state);
                if let Some(why) = &state.closed {
                    return Err(NodeError::Unavailable(format!("pushed packet {packet}: {why}")));
                }
                let admitted = match &state.expected {
                    Some(_) => {
                        let (index, _, _) = check_pushed(&state, packet, data.len() as u64)?;
                        index < state.base + state.window
                    }
                    None => state.partial.len() < MIN_WINDOW_STEPS,
                };
                if admitted {
                    add(&mut state, packet, &data)?;
                    drop(state);
                    self.changed.notify_waiters();
                    return Ok(());
                }
                state.deadline
            };
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return Err(NodeError::Unavailable(format!(
                    "pushed packet {packet} waited past the session's deadline"
                )));
            }
        }
    }

    /// The sum pushed into `packet`'s step (`inputs` of them) once all have arrived; `None` at once
    /// for a step with no inputs.
    pub async fn take(&self, packet: u32, inputs: u8) -> Result<Option<BytesMut>, NodeError> {
        if inputs == 0 {
            return Ok(None);
        }
        // Bounded: each pass waits for a change; the session's own timeout ends it otherwise.
        loop {
            let changed = self.changed.notified();
            {
                let mut state = lock(&self.state);
                if let Some(why) = &state.closed {
                    return Err(NodeError::Unavailable(format!("session closed: {why}")));
                }
                if let Some(Partial::Summing(_, count)) = state.partial.get(&packet)
                    && *count == inputs
                {
                    let Some(Partial::Summing(sum, _)) = state.partial.insert(packet, Partial::Taken) else {
                        unreachable!("checked above")
                    };
                    return Ok(Some(sum));
                }
            }
            changed.await;
        }
    }

    /// Moves the window to start at step `base` (the lowest not yet sent), forgetting the steps
    /// before it, and wakes the pushes it now admits.
    pub fn advance(&self, base: usize) {
        let mut state = lock(&self.state);
        if base <= state.base {
            return;
        }
        state.base = base;
        let InboxState { expected, partial, .. } = &mut *state;
        if let Some(expected) = expected {
            partial.retain(|packet, _| expected.get(packet).is_some_and(|&(index, _, _)| index >= base));
        }
        drop(state);
        self.changed.notify_waiters();
    }
}

/// The step a pushed `packet` of `bytes` belongs to: (index, inputs, bytes), or why it is refused.
fn check_pushed(state: &InboxState, packet: u32, bytes: u64) -> Result<(usize, u8, u64), NodeError> {
    let expected = state.expected.as_ref().expect("checked against an open session's plan");
    let Some(&(index, inputs, len)) = expected.get(&packet) else {
        return Err(NodeError::InvalidArgument(format!("packet {packet} was not expected from a push")));
    };
    if len != bytes || index < state.base {
        return Err(NodeError::InvalidArgument(format!(
            "pushed packet {packet}: {bytes} bytes (expected {len}), step {index} (the window starts at {})",
            state.base
        )));
    }
    match state.partial.get(&packet) {
        Some(Partial::Taken) => Err(NodeError::InvalidArgument(format!("packet {packet} pushed after its step ran"))),
        Some(Partial::Summing(_, count)) if *count >= inputs => {
            Err(NodeError::InvalidArgument(format!("packet {packet} pushed more than {inputs} times")))
        }
        _ => Ok((index, inputs, len)),
    }
}

/// Adds `data` to `packet`'s sum (XOR: the sender applied its coefficients).
fn add(state: &mut InboxState, packet: u32, data: &[u8]) -> Result<(), NodeError> {
    state.bytes_received += data.len() as u64;
    match state.partial.get_mut(&packet) {
        None => {
            state.partial.insert(packet, Partial::Summing(BytesMut::from(data), 1));
        }
        Some(Partial::Summing(sum, count)) => {
            if sum.len() != data.len() {
                return Err(NodeError::InvalidArgument(format!("packet {packet} pushed with two lengths")));
            }
            codec::engine::best().mul_add_slice(1, data, sum);
            *count += 1;
        }
        Some(Partial::Taken) => unreachable!("checked before"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::UnitId;
    use crate::session::Step;

    fn plan(id: u8, steps: Vec<Step>) -> SessionPlan {
        SessionPlan {
            id: [id; 16],
            source: 0,
            unit: UnitId::new(1, 0),
            range_offset: 0,
            range_bytes: 4 * 20,
            packet_bytes: 4,
            steps,
            timeout: std::time::Duration::from_secs(5),
            store: None,
            class: crate::classes::ClassId::DEFAULT,
        }
    }

    fn step(packet: u32, inputs: u8) -> Step {
        Step { packet, coefficient: None, inputs, to: None }
    }

    #[tokio::test]
    async fn pushes_are_summed_per_packet_and_taken_once_all_arrived() {
        let sessions = Arc::new(Sessions::default());
        let early = sessions.inbox([1; 16]).unwrap();
        early.deposit(0, Bytes::from_static(&[1, 2, 3, 4])).await.unwrap();
        early.deposit(1, Bytes::from_static(&[9, 9, 9, 9])).await.unwrap();
        let open = sessions.open(&plan(1, vec![step(0, 2), step(1, 1)])).unwrap();
        assert!(Arc::ptr_eq(open.inbox(), &early), "pushes before the plan land in the same inbox");
        open.inbox().deposit(0, Bytes::from_static(&[1, 0, 3, 0])).await.unwrap();
        let error = open.inbox().deposit(1, Bytes::from_static(&[9, 9, 9, 9])).await.unwrap_err();
        assert!(error.to_string().contains("more than 1"), "{error}");
        assert_eq!(open.inbox().take(0, 2).await.unwrap().unwrap().as_ref(), &[0, 2, 0, 4]);
        let again = open.inbox().deposit(0, Bytes::from_static(&[9, 9, 9, 9])).await.unwrap_err();
        assert!(again.to_string().contains("after its step ran"), "{again}");
        assert_eq!(open.inbox().bytes_received(), 12);
        let error = open.inbox().deposit(7, Bytes::from_static(&[0; 4])).await.unwrap_err();
        assert!(error.to_string().contains("not expected"), "{error}");
        drop(open);
        assert_eq!(sessions.open_count(), 0, "an ended session leaves the registry");
    }

    #[tokio::test]
    async fn a_push_beyond_the_window_waits_for_the_session_to_move() {
        let sessions = Arc::new(Sessions::default());
        let steps: Vec<Step> = (0..20).map(|p| step(p, 1)).collect();
        // Packets of an eighth of the window's bytes: a window of 8 steps.
        let packet_bytes = (crate::session::WINDOW_BYTES / 8) as u32;
        let plan = SessionPlan { packet_bytes, range_bytes: 20 * u64::from(packet_bytes), ..plan(2, steps) };
        assert_eq!(plan.window_steps(), 8);
        let open = sessions.open(&plan).unwrap();
        let inbox = Arc::clone(open.inbox());
        let packet = Bytes::from(vec![1u8; packet_bytes as usize]);
        let pushed = packet.clone();
        let far = tokio::spawn(async move { inbox.deposit(8, pushed).await });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!far.is_finished(), "a packet past the window waits");
        open.inbox().deposit(0, packet).await.unwrap();
        open.inbox().take(0, 1).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!far.is_finished(), "taking a step does not move the window: sending it does");
        open.inbox().advance(1);
        far.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_closed_session_refuses_pushes_and_frees_waiters() {
        let sessions = Arc::new(Sessions::default());
        let open = sessions.open(&plan(3, vec![step(0, 1)])).unwrap();
        let inbox = Arc::clone(open.inbox());
        let waiting = tokio::spawn(async move { inbox.take(0, 1).await });
        drop(open);
        assert!(waiting.await.unwrap().is_err(), "a step waiting for pushes ends with its session");
        assert!(sessions.open(&plan(3, vec![step(0, 1)])).is_ok(), "the id is free again");
    }
}
