//! The unit stream's wire format: the connection's hello, a request's fixed header and a
//! response's fixed head, all little-endian and of fixed size so either side reads them with one
//! `read_exact`.
//!
//! Owns encoding and decoding and their validation. Must not do I/O or touch the scheduler: the
//! [`super::server`] and [`super::client`] move these frames and the raw unit bytes that follow
//! them.

use tonic::Code;

use crate::error::UnitId;
use crate::proto;
use crate::scheduler::TaskTiming;

/// First bytes of a unit-stream connection. An HTTP/2 connection starts with `PRI `, so the node
/// tells the two apart on one port by these four bytes.
pub const MAGIC: [u8; 4] = *b"LTU1";
/// Longest cluster secret the hello carries.
pub const MAX_SECRET_BYTES: usize = 1024;
/// Size of a request header.
pub const REQUEST_BYTES: usize = 1 + 8 + 2 + 8 + 8;
const TIMING_BYTES: usize = 4 + 8 * 5 + 1 + 8 * 2;
/// Size of a response head.
pub const RESPONSE_HEAD_BYTES: usize = 1 + 1 + TIMING_BYTES + 8;
/// Longest error message a response carries.
pub const MAX_MESSAGE_BYTES: u64 = 64 << 10;

/// The hello a client sends once per connection: the magic, then the secret's length and bytes.
pub fn hello(secret: &[u8]) -> Vec<u8> {
    assert!(!secret.is_empty() && secret.len() <= MAX_SECRET_BYTES, "secret length checked at connect");
    let mut hello = Vec::with_capacity(MAGIC.len() + 2 + secret.len());
    hello.extend_from_slice(&MAGIC);
    hello.extend_from_slice(&(secret.len() as u16).to_le_bytes());
    hello.extend_from_slice(secret);
    hello
}

/// What a request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `length` bytes at `offset` of the unit; the response carries them.
    Read,
    /// The unit's `length` bytes follow the header; the response says when they are durable.
    Write,
}

/// One request header. A write's bytes follow it on the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Read or write.
    pub op: Op,
    /// The unit.
    pub unit: UnitId,
    /// Read: first byte. Write: zero.
    pub offset: u64,
    /// Read: bytes asked for. Write: the unit's length.
    pub length: u64,
}

impl Request {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; REQUEST_BYTES] {
        let mut bytes = [0u8; REQUEST_BYTES];
        let mut at = Cursor::new(&mut bytes);
        at.put(&[match self.op {
            Op::Read => 1,
            Op::Write => 2,
        }]);
        at.put(&self.unit.stripe.to_le_bytes());
        at.put(&self.unit.unit.to_le_bytes());
        at.put(&self.offset.to_le_bytes());
        at.put(&self.length.to_le_bytes());
        bytes
    }

    /// The header in `bytes`, or what is wrong with it.
    pub fn decode(bytes: &[u8; REQUEST_BYTES]) -> Result<Self, String> {
        let op = match bytes[0] {
            1 => Op::Read,
            2 => Op::Write,
            other => return Err(format!("unknown unit-stream operation {other}")),
        };
        let stripe = u64_at(bytes, 1);
        let unit = u16::from_le_bytes([bytes[9], bytes[10]]);
        let request =
            Self { op, unit: UnitId::new(stripe, unit), offset: u64_at(bytes, 11), length: u64_at(bytes, 19) };
        if op == Op::Write && request.offset != 0 {
            return Err("a unit-stream write starts at offset 0".into());
        }
        Ok(request)
    }
}

/// The fixed head of a response; `payload_len` bytes follow it (a read's data or an error's
/// message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    /// `Code::Ok`, or the error's code (the same the gRPC service would answer).
    pub code: Code,
    /// The task's timing, on success.
    pub timing: Option<TaskTiming>,
    /// Bytes that follow.
    pub payload_len: u64,
}

impl ResponseHead {
    /// The head's bytes.
    pub fn encode(&self) -> [u8; RESPONSE_HEAD_BYTES] {
        let mut bytes = [0u8; RESPONSE_HEAD_BYTES];
        let mut at = Cursor::new(&mut bytes);
        at.put(&[self.code as i32 as u8, u8::from(self.timing.is_some())]);
        // The gRPC message's fields and outcome codes, so both transports map timings alike.
        let timing = self.timing.map(proto::TaskTiming::from).unwrap_or_default();
        at.put(&timing.node_id.to_le_bytes());
        for value in [timing.task_id, timing.enqueue_ns, timing.start_ns, timing.finish_ns, timing.bytes] {
            at.put(&value.to_le_bytes());
        }
        at.put(&[timing.outcome as u8]);
        at.put(&timing.bytes_ahead.to_le_bytes());
        at.put(&timing.emulated_service_ns.to_le_bytes());
        at.put(&self.payload_len.to_le_bytes());
        bytes
    }

    /// The head in `bytes`, or what is wrong with it.
    pub fn decode(bytes: &[u8; RESPONSE_HEAD_BYTES]) -> Result<Self, String> {
        let code = Code::from(i32::from(bytes[0]));
        let timing = match bytes[1] {
            0 => None,
            1 => {
                let outcome = proto::TaskOutcome::try_from(i32::from(bytes[46]))
                    .ok()
                    .filter(|outcome| *outcome != proto::TaskOutcome::Unspecified)
                    .ok_or_else(|| format!("unknown task outcome {}", bytes[46]))?;
                Some(TaskTiming::from(proto::TaskTiming {
                    node_id: u32::from_le_bytes(bytes[2..6].try_into().expect("4 bytes")),
                    task_id: u64_at(bytes, 6),
                    enqueue_ns: u64_at(bytes, 14),
                    start_ns: u64_at(bytes, 22),
                    finish_ns: u64_at(bytes, 30),
                    bytes: u64_at(bytes, 38),
                    outcome: outcome as i32,
                    bytes_ahead: u64_at(bytes, 47),
                    emulated_service_ns: u64_at(bytes, 55),
                }))
            }
            other => return Err(format!("bad timing flag {other}")),
        };
        let payload_len = u64_at(bytes, 63);
        if code != Code::Ok && payload_len > MAX_MESSAGE_BYTES {
            return Err(format!("an error message of {payload_len} bytes"));
        }
        Ok(Self { code, timing, payload_len })
    }
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// Writes fields one after another into a fixed buffer; overrunning it is a bug.
struct Cursor<'a> {
    bytes: &'a mut [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a mut [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    fn put(&mut self, field: &[u8]) {
        self.bytes[self.at..self.at + field.len()].copy_from_slice(field);
        self.at += field.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::TaskOutcome;

    #[test]
    fn requests_and_heads_round_trip() {
        for op in [Op::Read, Op::Write] {
            let request = Request {
                op,
                unit: UnitId::new(u64::MAX - 3, 65_535),
                offset: if op == Op::Read { 7 } else { 0 },
                length: 1 << 40,
            };
            assert_eq!(Request::decode(&request.encode()), Ok(request));
        }
        let timing = TaskTiming {
            node_id: 9,
            task_id: 1,
            enqueue_ns: 2,
            start_ns: 3,
            finish_ns: 4,
            bytes: 5,
            outcome: TaskOutcome::Corrupt,
            bytes_ahead: 6,
            emulated_service_ns: 7,
        };
        let head = ResponseHead { code: Code::Ok, timing: Some(timing), payload_len: 1 << 33 };
        assert_eq!(ResponseHead::decode(&head.encode()), Ok(head));
        let error = ResponseHead { code: Code::DataLoss, timing: None, payload_len: 12 };
        assert_eq!(ResponseHead::decode(&error.encode()), Ok(error));
    }

    #[test]
    fn malformed_frames_are_refused() {
        let mut request = Request { op: Op::Read, unit: UnitId::new(1, 2), offset: 3, length: 4 }.encode();
        request[0] = 9;
        assert!(Request::decode(&request).unwrap_err().contains("unknown"));
        let write = Request { op: Op::Write, unit: UnitId::new(1, 2), offset: 3, length: 4 }.encode();
        assert!(Request::decode(&write).is_err(), "a write not at offset 0");
        let huge = ResponseHead { code: Code::Internal, timing: None, payload_len: MAX_MESSAGE_BYTES + 1 };
        assert!(ResponseHead::decode(&huge.encode()).is_err());
        let mut bad_flag = ResponseHead { code: Code::Ok, timing: None, payload_len: 0 }.encode();
        bad_flag[1] = 2;
        assert!(ResponseHead::decode(&bad_flag).is_err());
    }
}
