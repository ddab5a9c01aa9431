//! Multi-buffer MD5: up to sixteen independent messages hashed side by side, one 64-byte block of
//! each per kernel call.
//!
//! One MD5 is a chain (each block needs the previous block's result), so one message cannot use a
//! wide vector; sixteen messages can, one per 32-bit lane. A gateway receiving many PUT bodies at
//! once has exactly that: every body needs the MD5 of its bytes for its ETag. With AVX-512 one
//! round over sixteen lanes costs about what one block of one message costs in scalar code.
//!
//! Owns [`Lanes`]: each lane's queued bytes (shared [`Bytes`], never copied except one block at a
//! time into the kernel's staging), its length, its padding once it is ended, and its digest. Pure
//! and synchronous: it does no I/O, spawns nothing and never waits; whoever drives it decides when
//! to hash (`gateway::s3::md5_engine` runs it on a thread of its own).
//!
//! Must not: hash a lane's bytes out of order, or give a digest before the lane has ended and
//! every byte, padding included, has been compressed.

mod kernel;

use bytes::Bytes;
use std::collections::VecDeque;

use kernel::{INITIAL_STATE, LaneBlocks, LaneStates};
pub use kernel::{Kernel, LANES, SCALAR_MAX_LANES};

/// One message being hashed.
#[derive(Default)]
struct Lane {
    /// Bytes not yet compressed, in order; the first is consumed from `front_offset`.
    queued: VecDeque<Bytes>,
    front_offset: usize,
    /// Bytes in `queued` past `front_offset`.
    queued_bytes: usize,
    /// Message bytes received (the length MD5's padding records).
    message_bytes: u64,
    /// The message has ended and its padding is queued.
    ended: bool,
}

impl Lane {
    /// Copies the next 64 queued bytes into `block`, if 64 are queued.
    fn take_block(&mut self, block: &mut [u8; 64]) -> bool {
        if self.queued_bytes < 64 {
            return false;
        }
        let mut filled = 0;
        // Bounded: each pass copies at least one byte or drops an exhausted chunk.
        while filled < 64 {
            let front = self.queued.front().expect("queued_bytes counts the queued chunks");
            let available = &front[self.front_offset..];
            let take = available.len().min(64 - filled);
            block[filled..filled + take].copy_from_slice(&available[..take]);
            filled += take;
            self.front_offset += take;
            if self.front_offset == front.len() {
                self.queued.pop_front();
                self.front_offset = 0;
            }
        }
        self.queued_bytes -= 64;
        true
    }

    fn push(&mut self, chunk: Bytes) {
        assert!(!self.ended, "no bytes after a message's end");
        if chunk.is_empty() {
            return;
        }
        self.queued_bytes += chunk.len();
        self.message_bytes += chunk.len() as u64;
        self.queued.push_back(chunk);
    }

    /// Queues MD5's padding: 0x80, zeros to 56 mod 64, the message length in bits (little endian).
    fn end(&mut self) {
        assert!(!self.ended, "a message ends once");
        let partial = self.queued_bytes % 64;
        let padding_bytes = if partial < 56 { 64 - partial } else { 128 - partial };
        let mut padding = vec![0u8; padding_bytes];
        padding[0] = 0x80;
        padding[padding_bytes - 8..].copy_from_slice(&(self.message_bytes.wrapping_mul(8)).to_le_bytes());
        self.queued_bytes += padding_bytes;
        self.queued.push_back(Bytes::from(padding));
        self.ended = true;
    }

    fn done(&self) -> bool {
        self.ended && self.queued_bytes == 0
    }
}

/// Sixteen MD5 computations advanced together.
pub struct Lanes {
    kernel: Kernel,
    states: LaneStates,
    staging: LaneBlocks,
    lanes: [Option<Lane>; LANES],
}

impl Lanes {
    /// Empty lanes hashed by `kernel`.
    pub fn new(kernel: Kernel) -> Self {
        Self {
            kernel,
            states: LaneStates { words: [[0; LANES]; 4] },
            staging: LaneBlocks::default(),
            lanes: Default::default(),
        }
    }

    /// Starts a message in `lane`, which must be free.
    pub fn open(&mut self, lane: usize) {
        assert!(self.lanes[lane].is_none(), "lane {lane} is busy");
        self.lanes[lane] = Some(Lane::default());
        self.states.set_lane(lane, INITIAL_STATE);
    }

    /// Whether `lane` holds a message.
    pub fn is_open(&self, lane: usize) -> bool {
        self.lanes[lane].is_some()
    }

    /// Appends `chunk` to the message in `lane`.
    pub fn push(&mut self, lane: usize, chunk: Bytes) {
        self.lane_mut(lane).push(chunk);
    }

    /// Ends the message in `lane`: its digest is ready once [`Lanes::hash_round`] has hashed the
    /// rest of it.
    pub fn end(&mut self, lane: usize) {
        self.lane_mut(lane).end();
    }

    /// Drops the message in `lane`, hashed or not, freeing it.
    pub fn close(&mut self, lane: usize) {
        self.lanes[lane] = None;
    }

    /// The digest of the message in `lane` once it has ended and been hashed to its end; the lane
    /// is free afterwards.
    pub fn take_digest(&mut self, lane: usize) -> Option<[u8; 16]> {
        if !self.lanes[lane].as_ref().is_some_and(Lane::done) {
            return None;
        }
        self.lanes[lane] = None;
        let state = self.states.lane(lane);
        let mut digest = [0u8; 16];
        for (bytes, word) in digest.chunks_exact_mut(4).zip(state) {
            bytes.copy_from_slice(&word.to_le_bytes());
        }
        Some(digest)
    }

    /// Hashes the next block of every lane that has 64 bytes queued, in one kernel call; returns
    /// how many lanes advanced (0: nothing to do until more bytes or an end arrive).
    pub fn hash_round(&mut self) -> usize {
        let mut active = 0u16;
        for (lane, (slot, block)) in self.lanes.iter_mut().zip(self.staging.blocks.iter_mut()).enumerate() {
            if slot.as_mut().is_some_and(|lane| lane.take_block(block)) {
                active |= 1 << lane;
            }
        }
        if active != 0 {
            self.kernel.compress(&mut self.states, &self.staging, active);
        }
        active.count_ones() as usize
    }

    /// Whether the message in `lane` has ended (its digest is due once its bytes are hashed).
    pub fn has_ended(&self, lane: usize) -> bool {
        self.lanes[lane].as_ref().is_some_and(|lane| lane.ended)
    }

    /// Bytes queued in `lane` and not yet hashed (padding included once ended).
    pub fn queued_bytes(&self, lane: usize) -> usize {
        self.lanes[lane].as_ref().map_or(0, |lane| lane.queued_bytes)
    }

    fn lane_mut(&mut self, lane: usize) -> &mut Lane {
        self.lanes[lane].as_mut().unwrap_or_else(|| panic!("lane {lane} is not open"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use md5::{Digest, Md5};
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};

    fn hash_all(lanes: &mut Lanes) {
        // Bounded: every round consumes a block of at least one lane.
        while lanes.hash_round() > 0 {}
    }

    #[test]
    fn known_answers_on_every_kernel() {
        // RFC 1321, A.5.
        let cases: [(&[u8], &str); 4] = [
            (b"", "d41d8cd98f00b204e9800998ecf8427e"),
            (b"abc", "900150983cd24fb0d6963f7d28e17f72"),
            (b"message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for kernel in Kernel::available() {
            let mut lanes = Lanes::new(kernel);
            for (lane, (message, _)) in cases.iter().enumerate() {
                lanes.open(lane);
                lanes.push(lane, Bytes::from_static(message));
                lanes.end(lane);
            }
            hash_all(&mut lanes);
            for (lane, (_, expected)) in cases.iter().enumerate() {
                let digest = lanes.take_digest(lane).expect("ended and hashed");
                assert_eq!(hex(&digest), *expected, "{kernel:?}, lane {lane}");
                assert!(!lanes.is_open(lane), "the digest frees the lane");
            }
        }
    }

    #[test]
    fn no_digest_before_the_end_and_the_last_block() {
        let mut lanes = Lanes::new(Kernel::best());
        lanes.open(3);
        lanes.push(3, Bytes::from(vec![7u8; 200]));
        hash_all(&mut lanes);
        assert_eq!(lanes.take_digest(3), None, "not ended");
        assert_eq!(lanes.queued_bytes(3), 200 - 192);
        lanes.end(3);
        assert_eq!(lanes.take_digest(3), None, "ended, padding not hashed");
        hash_all(&mut lanes);
        assert_eq!(lanes.take_digest(3), Some(Md5::digest([7u8; 200]).into()));
    }

    #[test]
    fn a_closed_lane_is_free_and_the_others_unaffected() {
        let mut lanes = Lanes::new(Kernel::best());
        lanes.open(0);
        lanes.open(1);
        lanes.push(0, Bytes::from_static(b"left behind"));
        lanes.push(1, Bytes::from(vec![1u8; 100]));
        lanes.hash_round();
        lanes.close(0);
        lanes.open(0);
        lanes.push(0, Bytes::from_static(b"abc"));
        lanes.end(0);
        lanes.end(1);
        hash_all(&mut lanes);
        assert_eq!(lanes.take_digest(0), Some(Md5::digest(b"abc").into()));
        assert_eq!(lanes.take_digest(1), Some(Md5::digest([1u8; 100]).into()));
    }

    proptest! {
        /// Any messages, cut into any chunks, pushed interleaved in any order and hashed at any
        /// moment, give the digests of a plain MD5, on every kernel.
        #[test]
        fn lanes_agree_with_md5(seed in any::<u64>(), lane_count in 1usize..=LANES) {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let messages: Vec<Vec<u8>> = (0..lane_count)
                .map(|_| {
                    let length = match rng.random_range(0..4) { 0 => rng.random_range(0..130), 1 => 64 * rng.random_range(0..8), _ => rng.random_range(0..5000) };
                    (0..length).map(|_| rng.random()).collect()
                })
                .collect();
            for kernel in Kernel::available() {
                let mut lanes = Lanes::new(kernel);
                let mut offsets = vec![0usize; lane_count];
                (0..lane_count).for_each(|lane| lanes.open(lane));
                // Bounded: every pass pushes at least a byte of some lane or ends one.
                while (0..lane_count).any(|lane| offsets[lane] <= messages[lane].len()) {
                    let lane = rng.random_range(0..lane_count);
                    if offsets[lane] > messages[lane].len() { continue; }
                    if offsets[lane] == messages[lane].len() {
                        lanes.end(lane);
                        offsets[lane] += 1;
                    } else {
                        let take = rng.random_range(1..=300).min(messages[lane].len() - offsets[lane]);
                        lanes.push(lane, Bytes::copy_from_slice(&messages[lane][offsets[lane]..offsets[lane] + take]));
                        offsets[lane] += take;
                    }
                    if rng.random_bool(0.3) { lanes.hash_round(); }
                }
                hash_all(&mut lanes);
                for (lane, message) in messages.iter().enumerate() {
                    let expected: [u8; 16] = Md5::digest(message).into();
                    prop_assert_eq!(lanes.take_digest(lane), Some(expected), "{:?} lane {}", kernel, lane);
                }
            }
        }
    }

    fn hex(digest: &[u8]) -> String {
        digest.iter().map(|byte| format!("{byte:02x}")).collect()
    }
}
