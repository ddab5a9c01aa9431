//! The gateway's ETag MD5 engines: long PUT bodies hashed side by side in the lanes of
//! [`md5lanes::Lanes`], on a thread of the engine's own.
//!
//! One MD5 stream runs at scalar speed whatever the CPU; sixteen streams in the sixteen 32-bit lanes
//! of AVX-512 cost about what one does. Concurrent PUTs are exactly sixteen streams, so each body
//! takes a free lane of an engine and sends its chunks there; the engine thread drains whatever
//! arrived from every lane, hashes one block of each lane per round (with several bodies open,
//! waiting until a digest is awaited, so rounds run full), and answers each body's digest once its
//! end has been hashed. A body finding no free lane is hashed in passing by its own task,
//! as before the engines existed. There is one engine per [`CPUS_PER_ENGINE`] CPUs, so nothing here
//! is serial on a large gateway.
//!
//! Owns the engines' threads, their lane allocation and the protocol between a body's
//! [`LaneHandle`] and its engine. Must not: block a runtime thread (bodies send through a bounded
//! channel and await), hold more than [`LANE_QUEUE_MAX_BYTES`] of a lane's bytes unhashed, or
//! answer a digest for a lane that did not end (a body dropped midway is forgotten).

use bytes::Bytes;
use md5lanes::{Kernel, LANES, Lanes, SCALAR_MAX_LANES};
use std::sync::atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use tokio::sync::{mpsc, oneshot};

/// CPUs served by one engine thread. One AVX-512 engine hashes a few GB/s, more than a PUT stream
/// of eight cores delivers.
const CPUS_PER_ENGINE: usize = 8;
/// Commands waiting for an engine; a body sending faster than its engine hashes waits.
const COMMAND_BACKLOG: usize = 256;
/// Rounds hashed between two looks at the command queue: new chunks join the rounds sooner, so
/// more lanes are busy per round.
const ROUNDS_PER_DRAIN: usize = 64;
/// Bytes a body collects before sending them to its engine: one hand-off (and one wake of the
/// engine's thread) per this many bytes rather than per chunk the network delivered. At most this
/// much is left to hash when the digest is awaited.
const SEND_BATCH_BYTES: usize = 128 << 10;
/// Bytes a lane may hold waiting for a full round before it is hashed anyway (so an engine holds
/// at most 16 MiB of bodies).
const LANE_QUEUE_MAX_BYTES: usize = 1 << 20;

enum Command {
    Open {
        lane: usize,
        generation: u64,
        digest: oneshot::Sender<[u8; 16]>,
    },
    /// The body's next chunks, in order; with `end`, its last ones, and its digest is awaited.
    Push {
        lane: usize,
        generation: u64,
        chunks: Vec<Bytes>,
        end: bool,
    },
    /// A body dropped before its end: free its lane now rather than at the next look.
    Abandon {
        lane: usize,
        generation: u64,
    },
}

/// One engine: its command queue and which of its lanes are taken.
struct Engine {
    commands: mpsc::Sender<Command>,
    busy_lanes: Arc<AtomicU16>,
    generations: AtomicU64,
}

/// A body's lane in an engine: chunks in order, then [`LaneHandle::finish`] for the digest.
pub struct LaneHandle {
    commands: mpsc::Sender<Command>,
    lane: usize,
    generation: u64,
    digest: Option<oneshot::Receiver<[u8; 16]>>,
    /// Chunks not yet sent, and their bytes.
    batch: Vec<Bytes>,
    batch_bytes: usize,
}

impl LaneHandle {
    /// A lane of some engine, or None when every lane is busy (or the queue full): the caller
    /// hashes in passing then.
    pub fn take() -> Option<Self> {
        let engines = engines();
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let first = NEXT.fetch_add(1, Ordering::Relaxed);
        (0..engines.len()).find_map(|offset| engines[(first + offset) % engines.len()].open())
    }

    /// Adds `chunk` to the body's bytes, sending a batch to the engine every
    /// [`SEND_BATCH_BYTES`] (waits while the engine's queue is full).
    pub async fn update(&mut self, chunk: Bytes) {
        self.batch_bytes += chunk.len();
        self.batch.push(chunk);
        if self.batch_bytes >= SEND_BATCH_BYTES {
            self.send_batch(false).await;
        }
    }

    /// The MD5 of every chunk given, once the engine has hashed them.
    pub async fn finish(mut self) -> [u8; 16] {
        let digest = self.digest.take().expect("a lane finishes once");
        self.send_batch(true).await;
        digest.await.expect("an engine answers every lane that ended")
    }

    /// Sends the chunks collected so far (and, with `end`, the body's end).
    async fn send_batch(&mut self, end: bool) {
        self.batch_bytes = 0;
        let chunks = std::mem::take(&mut self.batch);
        let sent =
            self.commands.send(Command::Push { lane: self.lane, generation: self.generation, chunks, end }).await;
        assert!(sent.is_ok(), "MD5 engines run as long as the process");
    }
}

impl Drop for LaneHandle {
    fn drop(&mut self) {
        if self.digest.is_some() {
            // If the queue is full the engine is busy and sees the closed receiver at its next look.
            let _ = self.commands.try_send(Command::Abandon { lane: self.lane, generation: self.generation });
        }
    }
}

impl Engine {
    fn start(index: usize) -> Self {
        let (commands, queue) = mpsc::channel(COMMAND_BACKLOG);
        let busy_lanes = Arc::new(AtomicU16::new(0));
        let thread_lanes = Arc::clone(&busy_lanes);
        std::thread::Builder::new()
            .name(format!("md5-engine-{index}"))
            .spawn(move || EngineThread::new(queue, thread_lanes).run())
            .expect("the MD5 engine thread starts");
        Self { commands, busy_lanes, generations: AtomicU64::new(0) }
    }

    fn open(&self) -> Option<LaneHandle> {
        let taken = self.busy_lanes.fetch_update(Ordering::AcqRel, Ordering::Acquire, |busy| {
            (busy != u16::MAX).then(|| busy | (1 << busy.trailing_ones()))
        });
        let lane = taken.ok()?.trailing_ones() as usize;
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        let (digest, answer) = oneshot::channel();
        if self.commands.try_send(Command::Open { lane, generation, digest }).is_err() {
            self.busy_lanes.fetch_and(!(1 << lane), Ordering::AcqRel);
            return None;
        }
        Some(LaneHandle {
            commands: self.commands.clone(),
            lane,
            generation,
            digest: Some(answer),
            batch: Vec::new(),
            batch_bytes: 0,
        })
    }
}

/// The engines, started on first use (threads of their own, so they outlive any one runtime).
fn engines() -> &'static [Engine] {
    static ENGINES: OnceLock<Vec<Engine>> = OnceLock::new();
    ENGINES.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        (0..cpus.div_ceil(CPUS_PER_ENGINE)).map(Engine::start).collect()
    })
}

/// What an engine's thread holds: the lanes, and per lane the body's generation and digest answer.
struct EngineThread {
    queue: mpsc::Receiver<Command>,
    busy_lanes: Arc<AtomicU16>,
    lanes: Lanes,
    owners: [Option<(u64, oneshot::Sender<[u8; 16]>)>; LANES],
}

impl EngineThread {
    fn new(queue: mpsc::Receiver<Command>, busy_lanes: Arc<AtomicU16>) -> Self {
        Self { queue, busy_lanes, lanes: Lanes::new(Kernel::best()), owners: Default::default() }
    }

    /// Until the process ends: wait for a command, take every queued one, hash, answer.
    fn run(mut self) {
        // Bounded by the process: the senders live in a static.
        while let Some(command) = self.queue.blocking_recv() {
            self.apply(command);
            self.hash_queued();
        }
    }

    /// Hashes while a round would be worth it (see [`EngineThread::round_is_due`]), looking at the
    /// queue between slices of rounds; otherwise leaves the bytes queued until more arrive.
    fn hash_queued(&mut self) {
        let (mut rounds, mut blocks) = (0u64, 0u64);
        // Bounded: every pass hashes at least one block or returns.
        loop {
            self.drain_queue();
            let mut advanced = 0;
            for _ in 0..ROUNDS_PER_DRAIN {
                if !self.round_is_due() {
                    break;
                }
                let lanes = self.lanes.hash_round();
                if lanes == 0 {
                    break;
                }
                rounds += 1;
                advanced += lanes;
            }
            blocks += advanced as u64;
            self.answer_and_reap();
            if advanced == 0 {
                break;
            }
        }
        if rounds > 0 {
            metrics::counter!("lowtail_gateway_md5_rounds_total").increment(rounds);
            metrics::counter!("lowtail_gateway_md5_blocks_total").increment(blocks);
        }
    }

    /// Whether to run a round now. With at most [`SCALAR_MAX_LANES`] bodies open a round could not
    /// be fuller, so any lane with a block runs (the scalar kernel, as soon as bytes arrive). With
    /// more, bytes wait until some body's digest is awaited (its lane has ended) or some lane holds
    /// [`LANE_QUEUE_MAX_BYTES`]: a PUT awaits its ETag only after its units are written, so by then
    /// the other open bodies' bytes are queued too and every round runs many lanes, where hashing
    /// each chunk as it arrives would run rounds of one or two.
    fn round_is_due(&self) -> bool {
        let (mut open, mut ready, mut urgent) = (0u32, 0u32, false);
        for lane in (0..LANES).filter(|&lane| self.lanes.is_open(lane)) {
            let queued = self.lanes.queued_bytes(lane);
            open += 1;
            ready += u32::from(queued >= 64);
            urgent |= queued > 0 && (self.lanes.has_ended(lane) || queued >= LANE_QUEUE_MAX_BYTES);
        }
        ready > 0 && (urgent || open <= SCALAR_MAX_LANES)
    }

    /// Applies the commands queued now (at most a queue's worth, so a busy queue cannot starve the
    /// hashing).
    fn drain_queue(&mut self) {
        for _ in 0..COMMAND_BACKLOG {
            match self.queue.try_recv() {
                Ok(command) => self.apply(command),
                Err(_) => return,
            }
        }
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::Open { lane, generation, digest } => {
                assert!(self.owners[lane].is_none(), "lane {lane} was handed out twice");
                self.lanes.open(lane);
                self.owners[lane] = Some((generation, digest));
            }
            Command::Push { lane, generation, chunks, end } if self.owns(lane, generation) => {
                chunks.into_iter().for_each(|chunk| self.lanes.push(lane, chunk));
                if end {
                    self.lanes.end(lane);
                }
            }
            Command::Abandon { lane, generation } if self.owns(lane, generation) => {
                self.release(lane);
            }
            // A lane already reaped (its body dropped): nothing of it is kept.
            Command::Push { .. } | Command::Abandon { .. } => {}
        }
    }

    fn owns(&self, lane: usize, generation: u64) -> bool {
        self.owners[lane].as_ref().is_some_and(|(owner, _)| *owner == generation)
    }

    /// Sends the digests that are ready; frees the lanes whose bodies are gone.
    fn answer_and_reap(&mut self) {
        for lane in 0..LANES {
            let Some((_, answer)) = &self.owners[lane] else { continue };
            if answer.is_closed() {
                self.release(lane);
            } else if let Some(digest) = self.lanes.take_digest(lane) {
                let (_, answer) = self.release(lane).expect("checked above");
                // A body that stopped waiting just now no longer needs it.
                let _ = answer.send(digest);
            }
        }
    }

    /// Frees `lane` (its bytes, its owner, its busy bit) and returns its owner.
    fn release(&mut self, lane: usize) -> Option<(u64, oneshot::Sender<[u8; 16]>)> {
        self.lanes.close(lane);
        self.busy_lanes.fetch_and(!(1 << lane), Ordering::AcqRel);
        self.owners[lane].take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use md5::{Digest, Md5};

    /// The engines are shared by the process: one test at a time takes their lanes.
    static ENGINES_IN_USE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_bodies_get_their_own_digests() {
        let _engines = ENGINES_IN_USE.lock().await;
        let bodies: Vec<Vec<u8>> =
            (0..40u32).map(|i| (0..(i * 7919 % 300_000)).map(|b| (b * (i + 1)) as u8).collect()).collect();
        let tasks = bodies.iter().cloned().map(|body| {
            tokio::spawn(async move {
                let mut lane = LaneHandle::take()?;
                for chunk in body.chunks(16_411) {
                    lane.update(Bytes::copy_from_slice(chunk)).await;
                }
                Some(lane.finish().await)
            })
        });
        let digests = futures_util::future::join_all(tasks).await;
        let mut hashed_in_lanes = 0;
        for (body, digest) in bodies.iter().zip(digests) {
            if let Some(digest) = digest.expect("no panic") {
                assert_eq!(digest, <[u8; 16]>::from(Md5::digest(body)));
                hashed_in_lanes += 1;
            }
        }
        // Other tests of the process may hold a lane or two meanwhile.
        assert!(hashed_in_lanes >= LANES / 2, "an engine's lanes served: {hashed_in_lanes}");
    }

    /// An engine thread's state, driven by hand (no thread).
    fn engine_state() -> EngineThread {
        let (_commands, queue) = mpsc::channel(1);
        EngineThread::new(queue, Arc::new(AtomicU16::new(0)))
    }

    fn open(engine: &mut EngineThread, lane: usize) -> oneshot::Receiver<[u8; 16]> {
        let (digest, answer) = oneshot::channel();
        engine.apply(Command::Open { lane, generation: lane as u64, digest });
        answer
    }

    fn push(engine: &mut EngineThread, lane: usize, bytes: usize) {
        let chunks = vec![Bytes::from(vec![lane as u8; bytes])];
        engine.apply(Command::Push { lane, generation: lane as u64, chunks, end: false });
    }

    #[test]
    fn bytes_wait_for_a_full_round_only_while_several_bodies_are_open() {
        let mut engine = engine_state();
        let _answers: Vec<_> = (0..2).map(|lane| open(&mut engine, lane)).collect();
        push(&mut engine, 0, 4096);
        assert!(engine.round_is_due(), "two bodies: a round could not be fuller, hash as bytes come");
        let _third = open(&mut engine, 2);
        assert!(!engine.round_is_due(), "three bodies: the bytes wait");
        push(&mut engine, 1, LANE_QUEUE_MAX_BYTES);
        assert!(engine.round_is_due(), "a lane at its bound is hashed");
        engine.hash_queued();
        assert_eq!(engine.lanes.queued_bytes(0), 4096 - 64, "one round ran, lane 0 in it");
        assert!(!engine.round_is_due(), "back under the bound: waiting again");
        engine.apply(Command::Push { lane: 0, generation: 0, chunks: Vec::new(), end: true });
        engine.hash_queued();
        assert!(!engine.lanes.is_open(0), "an awaited digest is hashed to its end and answered");
        assert!(engine.lanes.queued_bytes(1) < LANE_QUEUE_MAX_BYTES - 4096, "lane 1 rode along");
    }

    #[tokio::test]
    async fn a_dropped_body_frees_its_lane() {
        let _engines = ENGINES_IN_USE.lock().await;
        let mut dropped = LaneHandle::take().expect("a free lane");
        dropped.update(Bytes::from_static(b"never ended")).await;
        let engine = engines().iter().find(|e| e.commands.same_channel(&dropped.commands)).expect("its engine");
        let lane = dropped.lane;
        drop(dropped);
        let freed = async {
            // Bounded by the timeout below.
            while engine.busy_lanes.load(Ordering::Acquire) & (1 << lane) != 0 {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), freed).await.expect("the lane is freed");
        let mut next = LaneHandle::take().expect("a free lane");
        next.update(Bytes::from_static(b"abc")).await;
        assert_eq!(next.finish().await, <[u8; 16]>::from(Md5::digest(b"abc")));
    }
}
