//! The unit stream's wire format: the connection's hello, a request's fixed header (and a merged
//! read's fixed-size ranges after it), a response's fixed head (and a merged read's per-range
//! heads), all little-endian and of fixed size so either side reads them with one `read_exact`.
//!
//! Owns encoding and decoding and their validation. Must not do I/O or touch the scheduler: the
//! [`super::server`] and [`super::client`] move these frames and the raw unit bytes that follow
//! them.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes, BytesMut};
use tonic::Code;

use crate::classes::ClassId;
use crate::error::{NodeError, UnitId};
use crate::proto;
use crate::scheduler::{MAX_RANGES_PER_READ, RangeRead, RangeResults, TaskTiming};

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
/// Size of one range of a merged read's request: stripe (u64), unit (u16), offset, length (u64).
pub const RANGE_BYTES: usize = 8 + 2 + 8 + 8;
/// Size of a merged read's per-range head: code (u8), payload length (u64).
pub const RANGE_HEAD_BYTES: usize = 1 + 8;
/// Classes a request header can name: the op byte's high four bits carry the class, so a client
/// that knows no classes (their bits zero) asks for class 0, as a gRPC call without the metadata.
pub const MAX_WIRE_CLASS: u8 = 15;
const _: () = assert!(crate::classes::MAX_CLASSES <= MAX_WIRE_CLASS as usize + 1, "every class fits the header");

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
    /// The unit's descriptor (`offset` bytes, often none) and then its `length` bytes follow the
    /// header; the response says when they are durable.
    Write,
    /// A merged read: `length` ranges of [`RANGE_BYTES`] follow the header (whose unit and offset
    /// are zero), all read as one task. The response's head (its payload length is all that
    /// follows) is followed, per range in order, by a [`RangeHead`] and its bytes or message.
    ReadMany,
}

/// One request header. A write's bytes follow it on the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Read or write.
    pub op: Op,
    /// The latency class of the task (not checked here: the node refuses one it does not serve,
    /// with a message, as over gRPC). At most [`MAX_WIRE_CLASS`].
    pub class: ClassId,
    /// The unit (a merged read: 0/0, its units are in its ranges).
    pub unit: UnitId,
    /// Read: first byte. Write: the length of the unit's descriptor, sent before its bytes (at most
    /// `store::MAX_DESCRIPTOR_BYTES`). Merged read: zero.
    pub offset: u64,
    /// Read: bytes asked for. Write: the unit's length. Merged read: the number of ranges.
    pub length: u64,
}

impl Request {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; REQUEST_BYTES] {
        assert!(self.class.0 <= MAX_WIRE_CLASS, "a class in four bits; the client refuses others");
        let mut bytes = [0u8; REQUEST_BYTES];
        let mut at = Cursor::new(&mut bytes);
        let op: u8 = match self.op {
            Op::Read => 1,
            Op::Write => 2,
            Op::ReadMany => 3,
        };
        at.put(&[op | (self.class.0 << 4)]);
        at.put(&self.unit.stripe.to_le_bytes());
        at.put(&self.unit.unit.to_le_bytes());
        at.put(&self.offset.to_le_bytes());
        at.put(&self.length.to_le_bytes());
        bytes
    }

    /// The header in `bytes`, or what is wrong with it.
    pub fn decode(bytes: &[u8; REQUEST_BYTES]) -> Result<Self, String> {
        let op = match bytes[0] & 0x0f {
            1 => Op::Read,
            2 => Op::Write,
            3 => Op::ReadMany,
            other => return Err(format!("unknown unit-stream operation {other}")),
        };
        let class = ClassId(bytes[0] >> 4);
        let stripe = u64_at(bytes, 1);
        let unit = u16::from_le_bytes([bytes[9], bytes[10]]);
        let request =
            Self { op, class, unit: UnitId::new(stripe, unit), offset: u64_at(bytes, 11), length: u64_at(bytes, 19) };
        if op == Op::Write && request.offset > crate::store::MAX_DESCRIPTOR_BYTES as u64 {
            return Err(format!("a unit-stream write's descriptor of {} bytes", request.offset));
        }
        if op == Op::ReadMany {
            if request.unit != UnitId::new(0, 0) || request.offset != 0 {
                return Err("a merged read's header names no unit and no offset".into());
            }
            // Refused here, before its ranges are read: a count past the limit could be anything.
            // An empty request passes: it is refused (without closing) as the gRPC one is.
            if request.length > MAX_RANGES_PER_READ as u64 {
                return Err(format!("a merged read of {} ranges; at most {MAX_RANGES_PER_READ}", request.length));
            }
        }
        Ok(request)
    }
}

/// A merged read's request of `class`: its header, then its ranges.
pub fn read_many_request(class: ClassId, ranges: &[RangeRead]) -> Bytes {
    let header = Request { op: Op::ReadMany, class, unit: UnitId::new(0, 0), offset: 0, length: ranges.len() as u64 };
    let mut bytes = BytesMut::with_capacity(REQUEST_BYTES + ranges.len() * RANGE_BYTES);
    bytes.extend_from_slice(&header.encode());
    // Bounded by the ranges given.
    for &(unit, offset, length) in ranges {
        let mut range = [0u8; RANGE_BYTES];
        let mut at = Cursor::new(&mut range);
        at.put(&unit.stripe.to_le_bytes());
        at.put(&unit.unit.to_le_bytes());
        at.put(&offset.to_le_bytes());
        at.put(&length.to_le_bytes());
        bytes.extend_from_slice(&range);
    }
    bytes.freeze()
}

/// The ranges a merged read's header announced, from their bytes (a whole number of ranges).
pub fn decode_ranges(bytes: &[u8]) -> Vec<RangeRead> {
    assert_eq!(bytes.len() % RANGE_BYTES, 0, "the caller reads whole ranges");
    let decode = |range: &[u8]| {
        let unit = UnitId::new(u64_at(range, 0), u16::from_le_bytes([range[8], range[9]]));
        (unit, u64_at(range, 10), u64_at(range, 18))
    };
    bytes.chunks_exact(RANGE_BYTES).map(decode).collect()
}

/// The head of one range of a merged read's answer; `payload_len` bytes follow it (the range's
/// bytes, or its error's message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeHead {
    /// `Code::Ok`, or the range's error code (`NotFound`, `DataLoss`, `OutOfRange`, `Internal`).
    pub code: Code,
    /// Bytes that follow.
    pub payload_len: u64,
}

impl RangeHead {
    /// The head's bytes.
    pub fn encode(&self) -> [u8; RANGE_HEAD_BYTES] {
        let mut bytes = [0u8; RANGE_HEAD_BYTES];
        let mut at = Cursor::new(&mut bytes);
        at.put(&[self.code as i32 as u8]);
        at.put(&self.payload_len.to_le_bytes());
        bytes
    }

    /// The head in `bytes`, or what is wrong with it.
    pub fn decode(bytes: &[u8; RANGE_HEAD_BYTES]) -> Result<Self, String> {
        let head = Self { code: Code::from(i32::from(bytes[0])), payload_len: u64_at(bytes, 1) };
        if head.code != Code::Ok && head.payload_len > MAX_MESSAGE_BYTES {
            return Err(format!("a range's error message of {} bytes", head.payload_len));
        }
        Ok(head)
    }
}

/// A merged read's whole answer: the response head (OK, the task's timing, the length of all that
/// follows), then per range its head and its bytes or message. The ranges' bytes are not copied.
pub(crate) fn read_many_answer(results: RangeResults, timing: TaskTiming) -> Parts {
    let payloads: Vec<(Code, Bytes)> = results
        .into_iter()
        .map(|result| match result {
            Ok(data) => (Code::Ok, data),
            Err(error) => (error.code(), Bytes::from(error_message(&error))),
        })
        .collect();
    let payload_len = payloads.iter().map(|(_, payload)| (RANGE_HEAD_BYTES + payload.len()) as u64).sum();
    let mut small = BytesMut::new();
    small.extend_from_slice(&ResponseHead { code: Code::Ok, timing: Some(timing), payload_len }.encode());
    let mut parts = Parts::default();
    // Bounded by the ranges. Heads and messages are gathered; a range's bytes stay a part of
    // their own.
    for (code, payload) in payloads {
        small.extend_from_slice(&RangeHead { code, payload_len: payload.len() as u64 }.encode());
        if code == Code::Ok {
            parts.push(small.split().freeze());
            parts.push(payload);
        } else {
            small.extend_from_slice(&payload);
        }
    }
    parts.push(small.freeze());
    parts
}

/// An error's message as a response carries it: at most [`MAX_MESSAGE_BYTES`], cut at a character.
pub(crate) fn error_message(error: &NodeError) -> String {
    let mut message = error.to_string();
    message.truncate(MAX_MESSAGE_BYTES as usize);
    // Bounded: a character is at most 4 bytes.
    while !message.is_char_boundary(message.len()) {
        message.pop();
    }
    message
}

/// Bytes sent as they are, part after part, with vectored writes (no copy into one buffer).
#[derive(Debug, Default)]
pub(crate) struct Parts {
    /// Never an empty part, so `chunk` is empty only when nothing remains.
    parts: VecDeque<Bytes>,
    remaining: usize,
}

impl Parts {
    fn push(&mut self, part: Bytes) {
        if !part.is_empty() {
            self.remaining += part.len();
            self.parts.push_back(part);
        }
    }
}

impl Buf for Parts {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.parts.front().map_or(&[], |part| part)
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let filled = dst.len().min(self.parts.len());
        dst.iter_mut().zip(&self.parts).for_each(|(slot, part)| *slot = IoSlice::new(part));
        filled
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end");
        self.remaining -= cnt;
        // Bounded: every pass drops a part or ends.
        while cnt > 0 {
            let front = self.parts.front_mut().expect("cnt <= remaining");
            if cnt < front.len() {
                front.advance(cnt);
                return;
            }
            cnt -= front.len();
            self.parts.pop_front();
        }
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
                    // Not on the wire: the client sets the class it asked for.
                    class: 0,
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

    fn timing() -> TaskTiming {
        TaskTiming {
            node_id: 9,
            task_id: 1,
            enqueue_ns: 2,
            start_ns: 3,
            finish_ns: 4,
            bytes: 5,
            outcome: TaskOutcome::Corrupt,
            bytes_ahead: 6,
            emulated_service_ns: 7,
            // The response head carries no class: the client knows the one it asked for.
            class: ClassId::DEFAULT,
        }
    }

    #[test]
    fn requests_and_heads_round_trip() {
        for op in [Op::Read, Op::Write] {
            let request = Request {
                op,
                class: ClassId(MAX_WIRE_CLASS),
                unit: UnitId::new(u64::MAX - 3, 65_535),
                offset: if op == Op::Read { 7 } else { 0 },
                length: 1 << 40,
            };
            assert_eq!(Request::decode(&request.encode()), Ok(request));
        }
        let merged = Request { op: Op::ReadMany, class: ClassId(3), unit: UnitId::new(0, 0), offset: 0, length: 1024 };
        assert_eq!(Request::decode(&merged.encode()), Ok(merged));
        let head = ResponseHead { code: Code::Ok, timing: Some(timing()), payload_len: 1 << 33 };
        assert_eq!(ResponseHead::decode(&head.encode()), Ok(head));
        let error = ResponseHead { code: Code::DataLoss, timing: None, payload_len: 12 };
        assert_eq!(ResponseHead::decode(&error.encode()), Ok(error));
    }

    #[test]
    fn malformed_frames_are_refused() {
        let read = Request { op: Op::Read, class: ClassId(2), unit: UnitId::new(1, 2), offset: 3, length: 4 };
        let mut request = read.encode();
        request[0] = 0x29;
        assert!(Request::decode(&request).unwrap_err().contains("unknown"), "op 9 of class 2");
        let described =
            Request { op: Op::Write, class: ClassId::DEFAULT, unit: UnitId::new(1, 2), offset: 3, length: 4 }.encode();
        assert_eq!(Request::decode(&described).unwrap().offset, 3, "a write's descriptor length");
        let too_long = crate::store::MAX_DESCRIPTOR_BYTES as u64 + 1;
        let write =
            Request { op: Op::Write, class: ClassId::DEFAULT, unit: UnitId::new(1, 2), offset: too_long, length: 4 }
                .encode();
        assert!(Request::decode(&write).is_err(), "a descriptor over the limit");
        let huge = ResponseHead { code: Code::Internal, timing: None, payload_len: MAX_MESSAGE_BYTES + 1 };
        assert!(ResponseHead::decode(&huge.encode()).is_err());
        let mut bad_flag = ResponseHead { code: Code::Ok, timing: None, payload_len: 0 }.encode();
        bad_flag[1] = 2;
        assert!(ResponseHead::decode(&bad_flag).is_err());
        let merged = Request { op: Op::ReadMany, class: ClassId(1), unit: UnitId::new(0, 0), offset: 0, length: 1025 };
        assert!(Request::decode(&merged.encode()).unwrap_err().contains("at most 1024"));
        let named = Request { op: Op::ReadMany, class: ClassId(1), unit: UnitId::new(1, 0), offset: 0, length: 1 };
        assert!(Request::decode(&named.encode()).is_err(), "a merged read's header names no unit");
        let long = RangeHead { code: Code::NotFound, payload_len: MAX_MESSAGE_BYTES + 1 };
        assert!(RangeHead::decode(&long.encode()).is_err());
    }

    #[test]
    fn the_existing_request_header_is_unchanged() {
        let read =
            Request { op: Op::Read, class: ClassId::DEFAULT, unit: UnitId::new(0x0102, 0x0304), offset: 5, length: 6 };
        let mut expected = vec![1u8, 2, 1, 0, 0, 0, 0, 0, 0, 4, 3];
        expected.extend_from_slice(&5u64.to_le_bytes());
        expected.extend_from_slice(&6u64.to_le_bytes());
        assert_eq!(read.encode().as_slice(), expected.as_slice(), "class 0 sends the bytes it always did");
        assert_eq!((REQUEST_BYTES, RESPONSE_HEAD_BYTES), (27, 71));
        // A class is the op byte's high four bits; the rest of the header is untouched.
        expected[0] = 0x71;
        assert_eq!(Request { class: ClassId(7), ..read }.encode().as_slice(), expected.as_slice());
        assert_eq!(Request::decode(expected.as_slice().try_into().unwrap()).unwrap().class, ClassId(7));
    }

    #[test]
    fn a_merged_read_request_carries_its_ranges() {
        let ranges = vec![(UnitId::new(u64::MAX, 65_535), 1, u64::MAX), (UnitId::new(3, 4), 0, 0)];
        let bytes = read_many_request(ClassId(5), &ranges);
        assert_eq!(bytes.len(), REQUEST_BYTES + 2 * RANGE_BYTES);
        let header = Request::decode(bytes[..REQUEST_BYTES].try_into().unwrap()).unwrap();
        assert_eq!((header.op, header.class, header.length), (Op::ReadMany, ClassId(5), 2));
        assert_eq!(decode_ranges(&bytes[REQUEST_BYTES..]), ranges);
    }

    #[test]
    fn a_merged_read_answer_frames_every_range_in_order() {
        let unit = UnitId::new(1, 2);
        let results = vec![
            Ok(Bytes::from_static(b"first")),
            Err(NodeError::NotFound(unit)),
            Ok(Bytes::new()),
            Err(NodeError::Corrupt { unit, what: "block 1".into() }),
            Ok(Bytes::from_static(b"last")),
        ];
        let mut answer = read_many_answer(results, timing());
        let bytes = answer.copy_to_bytes(answer.remaining());
        let head = ResponseHead::decode(bytes[..RESPONSE_HEAD_BYTES].try_into().unwrap()).unwrap();
        assert_eq!((head.code, head.timing), (Code::Ok, Some(timing())));
        let mut rest = &bytes[RESPONSE_HEAD_BYTES..];
        assert_eq!(head.payload_len, rest.len() as u64);
        let mut ranges = Vec::new();
        // Bounded: every pass consumes a head.
        while !rest.is_empty() {
            let range = RangeHead::decode(rest[..RANGE_HEAD_BYTES].try_into().unwrap()).unwrap();
            let end = RANGE_HEAD_BYTES + range.payload_len as usize;
            ranges.push((range.code, String::from_utf8(rest[RANGE_HEAD_BYTES..end].to_vec()).unwrap()));
            rest = &rest[end..];
        }
        let codes: Vec<_> = ranges.iter().map(|(code, _)| *code).collect();
        assert_eq!(codes, [Code::Ok, Code::NotFound, Code::Ok, Code::DataLoss, Code::Ok]);
        assert_eq!((ranges[0].1.as_str(), ranges[2].1.as_str(), ranges[4].1.as_str()), ("first", "", "last"));
        assert_eq!(ranges[1].1, NodeError::NotFound(unit).to_string());
    }

    #[test]
    fn parts_advance_across_their_boundaries() {
        let mut parts = Parts::default();
        for part in [&b"ab"[..], b"", b"cde", b"f"] {
            parts.push(Bytes::copy_from_slice(part));
        }
        assert_eq!(parts.remaining(), 6);
        let mut slices = [IoSlice::new(&[]); 2];
        assert_eq!(parts.chunks_vectored(&mut slices), 2, "the empty part was left out");
        assert_eq!((&*slices[0], &*slices[1]), (&b"ab"[..], &b"cde"[..]));
        parts.advance(3);
        assert_eq!((parts.chunk(), parts.remaining()), (&b"de"[..], 3));
        parts.advance(2);
        assert_eq!(parts.chunk(), b"f");
        parts.advance(1);
        assert!(!parts.has_remaining() && parts.chunk().is_empty());
    }
}
