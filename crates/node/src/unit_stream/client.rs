//! The gateway's side of the unit stream: a small pool of idle connections to one node, and the
//! read, merged-read and write calls over them.
//!
//! Owns connecting, the hello, reusing connections and telling a stale pooled connection (the
//! node restarted) from a failed request. Must not retry anything else, time calls out (the
//! [`crate::NodeClient`] wrapping it does) or pick nodes. Dropping a call's future drops its
//! connection, which cancels the task on the node.

use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Code, Status};

use super::wire::{self, Op, RangeHead, Request, ResponseHead};
use crate::classes::ClassId;
use crate::error::UnitId;
use crate::rpc::{CONNECT_TIMEOUT, ClientError, UnitRange, protocol};
use crate::scheduler::TaskTiming;

/// Each range's bytes, or its own error, in request order.
type RangeAnswers = Vec<Result<Bytes, ClientError>>;

/// Most idle connections kept per node; more are closed when returned.
const MAX_IDLE: usize = 64;
/// A connection idle this long is closed rather than reused (the node closes them later).
const MAX_IDLE_AGE: Duration = Duration::from_secs(60);

/// Connections to one node's unit stream.
#[derive(Debug)]
pub(crate) struct StreamClient {
    addr: String,
    hello: Bytes,
    idle: Mutex<Vec<(TcpStream, Instant)>>,
}

/// A connection in use, and whether it came from the pool (a failure before any answer may then
/// be the pool's stale connection, not the node's refusal).
struct Checkout {
    stream: TcpStream,
    reused: bool,
}

impl StreamClient {
    /// A client of the node at `addr` (`host:port`), presenting `secret`.
    pub(crate) fn new(addr: &str, secret: &str) -> Result<Self, ClientError> {
        if secret.len() > wire::MAX_SECRET_BYTES {
            return Err(ClientError::Invalid(format!("a cluster secret longer than {} bytes", wire::MAX_SECRET_BYTES)));
        }
        Ok(Self {
            addr: addr.to_string(),
            hello: Bytes::from(wire::hello(secret.as_bytes())),
            idle: Mutex::new(Vec::new()),
        })
    }

    /// Reads `length` bytes at `offset` of `unit` as a task of `class`.
    pub(crate) async fn read(
        &self,
        class: ClassId,
        unit: UnitId,
        offset: u64,
        length: u64,
    ) -> Result<(Bytes, TaskTiming), ClientError> {
        const OP: &str = "read_range";
        let capacity = usize::try_from(length).map_err(|_| protocol(OP, "length does not fit in memory"))?;
        let request = Request { op: Op::Read, class: wire_class(OP, class)?, unit, offset, length }.encode();
        let (mut conn, head) = self.exchange(OP, || Bytes::copy_from_slice(&request)).await?;
        let head = ResponseHead::decode(&head).map_err(|what| protocol(OP, what))?;
        if head.code != Code::Ok {
            return Err(self.refusal(OP, conn, head).await);
        }
        if head.payload_len != length {
            return Err(protocol(OP, format!("node sent {} of {length} bytes", head.payload_len)));
        }
        let timing = classed(head.timing.ok_or_else(|| protocol(OP, "no task timing"))?, class);
        let mut data = BytesMut::with_capacity(capacity);
        receive_exact(&mut conn.stream, &mut data, capacity).await.map_err(|e| self.broken(OP, e))?;
        self.checkin(conn.stream);
        Ok((data.freeze(), timing))
    }

    /// Reads every range as one task of `class` on the node (a merged read).
    pub(crate) async fn read_many(
        &self,
        class: ClassId,
        ranges: &[UnitRange],
    ) -> Result<(RangeAnswers, TaskTiming), ClientError> {
        const OP: &str = "read_units";
        let reads: Vec<_> =
            ranges.iter().map(|range| (UnitId::new(range.stripe, range.unit), range.offset, range.length)).collect();
        let request = wire::read_many_request(wire_class(OP, class)?, &reads);
        // A merged read changes nothing on the node: sending it again after a stale connection is
        // safe.
        let (mut conn, head) = self.exchange(OP, || request.clone()).await?;
        let head = ResponseHead::decode(&head).map_err(|what| protocol(OP, what))?;
        if head.code != Code::Ok {
            return Err(self.refusal(OP, conn, head).await);
        }
        let timing = classed(head.timing.ok_or_else(|| protocol(OP, "no task timing"))?, class);
        let answers = self.receive_ranges(&mut conn.stream, ranges, head.payload_len).await?;
        self.checkin(conn.stream);
        Ok((answers, timing))
    }

    /// Receives a merged read's per-range heads and payloads, which the response head said take
    /// `payload_len` bytes in all.
    async fn receive_ranges(
        &self,
        stream: &mut TcpStream,
        ranges: &[UnitRange],
        payload_len: u64,
    ) -> Result<RangeAnswers, ClientError> {
        const OP: &str = "read_units";
        let mut answers = Vec::with_capacity(ranges.len());
        let mut received = 0u64;
        // Bounded: one pass per range asked for.
        for (index, range) in ranges.iter().enumerate() {
            let mut head = [0u8; wire::RANGE_HEAD_BYTES];
            stream.read_exact(&mut head).await.map_err(|e| self.broken(OP, e))?;
            let head = RangeHead::decode(&head).map_err(|what| protocol(OP, what))?;
            if head.code == Code::Ok && head.payload_len != range.length {
                let what = format!("range {index}: node sent {} of {} bytes", head.payload_len, range.length);
                return Err(protocol(OP, what));
            }
            received = received.saturating_add(wire::RANGE_HEAD_BYTES as u64 + head.payload_len);
            if received > payload_len {
                return Err(protocol(OP, format!("the ranges run past the {payload_len} bytes announced")));
            }
            let len = usize::try_from(head.payload_len).map_err(|_| protocol(OP, "a range does not fit in memory"))?;
            let mut payload = BytesMut::with_capacity(len);
            receive_exact(stream, &mut payload, len).await.map_err(|e| self.broken(OP, e))?;
            answers.push(match head.code {
                Code::Ok => Ok(payload.freeze()),
                code => {
                    let status = Status::new(code, String::from_utf8_lossy(&payload).into_owned());
                    Err(ClientError::Status { operation: OP, status })
                }
            });
        }
        if received != payload_len {
            return Err(protocol(OP, format!("the ranges took {received} of the {payload_len} bytes announced")));
        }
        Ok(answers)
    }

    /// Writes `unit` from `data` held in memory, carrying `descriptor` (empty: none), as a task of
    /// `class`; returns once it is durable on the node.
    pub(crate) async fn write(
        &self,
        class: ClassId,
        unit: UnitId,
        data: Bytes,
        descriptor: Bytes,
    ) -> Result<TaskTiming, ClientError> {
        const OP: &str = "write_unit";
        let class = wire_class(OP, class)?;
        let described = descriptor.len() as u64;
        let request = Request { op: Op::Write, class, unit, offset: described, length: data.len() as u64 }.encode();
        // Rewriting a unit is idempotent, so sending it again after a stale connection is safe even
        // if the first copy reached the node.
        let message = || Bytes::copy_from_slice(&request).chain(descriptor.clone()).chain(data.clone());
        let (conn, head) = self.exchange(OP, message).await?;
        self.write_answer(OP, conn, &head).await.map(|timing| classed(timing, class))
    }

    /// Sends `message()` and reads the answer's head, on a fresh connection once more if a pooled
    /// one turns out stale before any answer.
    async fn exchange<B: Buf>(
        &self,
        op: &'static str,
        message: impl Fn() -> B,
    ) -> Result<(Checkout, [u8; wire::RESPONSE_HEAD_BYTES]), ClientError> {
        // Bounded: a second pass only follows a stale pooled connection, and uses a fresh one.
        for _ in 0..2 {
            let mut conn = self.checkout(op).await?;
            let mut message = message();
            let answered = async {
                conn.stream.write_all_buf(&mut message).await?;
                read_head(&mut conn.stream).await
            }
            .await;
            match answered {
                Ok(head) => return Ok((conn, head)),
                Err(error) if conn.reused && is_stale(&error) => continue,
                Err(error) => return Err(self.broken(op, error)),
            }
        }
        Err(self.broken(op, io::Error::other("a fresh connection failed as the stale one did")))
    }

    /// Writes `unit` of `total_len` bytes from a stream of chunks. A stream that ends short or
    /// runs long is refused here (`InvalidArgument`) and nothing is committed on the node.
    pub(crate) async fn write_stream(
        &self,
        class: ClassId,
        (unit, descriptor): (UnitId, Bytes),
        total_len: u64,
        chunks: impl Stream<Item = Bytes> + Send,
    ) -> Result<TaskTiming, ClientError> {
        const OP: &str = "write_unit";
        let class = wire_class(OP, class)?;
        let mut conn = self.checkout(OP).await?;
        let described = descriptor.len() as u64;
        let request = Request { op: Op::Write, class, unit, offset: described, length: total_len }.encode();
        conn.stream.write_all(&request).await.map_err(|e| self.broken(OP, e))?;
        conn.stream.write_all(&descriptor).await.map_err(|e| self.broken(OP, e))?;
        let mut sent = 0u64;
        let mut chunks = std::pin::pin!(chunks);
        // Bounded by the stream, which is refused as soon as it passes total_len.
        while let Some(chunk) = chunks.next().await {
            sent += chunk.len() as u64;
            if sent > total_len {
                // Dropping the connection mid-body discards what the node staged.
                return Err(invalid(OP, format!("unit {unit} declared {total_len} bytes but more arrived")));
            }
            conn.stream.write_all(&chunk).await.map_err(|e| self.broken(OP, e))?;
        }
        if sent != total_len {
            return Err(invalid(
                OP,
                format!("unit {unit} declared {total_len} bytes but the stream ended after {sent}"),
            ));
        }
        let head = read_head(&mut conn.stream).await.map_err(|e| self.broken(OP, e))?;
        self.write_answer(OP, conn, &head).await.map(|timing| classed(timing, class))
    }

    async fn write_answer(
        &self,
        op: &'static str,
        conn: Checkout,
        head: &[u8; wire::RESPONSE_HEAD_BYTES],
    ) -> Result<TaskTiming, ClientError> {
        let head = ResponseHead::decode(head).map_err(|what| protocol(op, what))?;
        if head.code != Code::Ok {
            return Err(self.refusal(op, conn, head).await);
        }
        if head.payload_len != 0 {
            return Err(protocol(op, "a write's answer carries no bytes"));
        }
        let timing = head.timing.ok_or_else(|| protocol(op, "no task timing"))?;
        self.checkin(conn.stream);
        Ok(timing)
    }

    /// The node's refusal as a status; the connection is reused when the message arrived whole.
    async fn refusal(&self, op: &'static str, mut conn: Checkout, head: ResponseHead) -> ClientError {
        let len = usize::try_from(head.payload_len).expect("messages are bounded by the wire format");
        let mut message = BytesMut::with_capacity(len);
        let message = match receive_exact(&mut conn.stream, &mut message, len).await {
            Ok(()) => {
                // After a refused hello the node closes the connection; its next read fails and
                // is retried on a fresh connection, so keeping it costs nothing.
                self.checkin(conn.stream);
                String::from_utf8_lossy(&message).into_owned()
            }
            Err(error) => format!("(message lost: {error})"),
        };
        ClientError::Status { operation: op, status: Status::new(head.code, message) }
    }

    async fn checkout(&self, op: &'static str) -> Result<Checkout, ClientError> {
        // Bounded by the pool's size: each pass removes one connection.
        while let Some((stream, since)) = crate::lock(&self.idle).pop() {
            if since.elapsed() < MAX_IDLE_AGE && is_open(&stream) {
                return Ok(Checkout { stream, reused: true });
            }
        }
        let connect = TcpStream::connect(&self.addr);
        let mut stream = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| self.broken(op, io::Error::new(io::ErrorKind::TimedOut, "connect timed out")))?
            .map_err(|e| self.broken(op, e))?;
        stream.set_nodelay(true).map_err(|e| self.broken(op, e))?;
        stream.write_all(&self.hello).await.map_err(|e| self.broken(op, e))?;
        Ok(Checkout { stream, reused: false })
    }

    fn checkin(&self, stream: TcpStream) {
        let mut idle = crate::lock(&self.idle);
        if idle.len() < MAX_IDLE {
            idle.push((stream, Instant::now()));
        }
    }

    fn broken(&self, operation: &'static str, source: io::Error) -> ClientError {
        ClientError::Stream { operation, addr: self.addr.clone(), source }
    }
}

async fn read_head(stream: &mut TcpStream) -> io::Result<[u8; wire::RESPONSE_HEAD_BYTES]> {
    let mut head = [0u8; wire::RESPONSE_HEAD_BYTES];
    stream.read_exact(&mut head).await?;
    Ok(head)
}

/// Receives exactly `len` bytes into `buffer` (which is not zeroed first).
async fn receive_exact(stream: &mut TcpStream, buffer: &mut BytesMut, len: usize) -> io::Result<()> {
    let mut limited = stream.take(len as u64);
    // Bounded: every pass adds at least one byte or ends.
    while buffer.len() < len {
        if limited.read_buf(buffer).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(())
}

/// Whether a pooled connection still looks open: nothing is pending on an idle connection, so
/// readable means the node closed it.
fn is_open(stream: &TcpStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(stream.try_read(&mut probe), Err(error) if error.kind() == io::ErrorKind::WouldBlock)
}

/// Whether an error before any answer is what a connection the node has since closed gives.
fn is_stale(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe)
}

/// `class` when a request header can carry it. One past [`wire::MAX_WIRE_CLASS`] is refused here
/// with the node's own refusal (the node serves fewer classes than the header can name, so it
/// would refuse it too): the caller sees one answer whatever the transport.
fn wire_class(operation: &'static str, class: ClassId) -> Result<ClassId, ClientError> {
    if class.0 <= wire::MAX_WIRE_CLASS {
        return Ok(class);
    }
    let refusal = class.checked().expect_err("the node serves fewer classes than a header names");
    Err(ClientError::Status { operation, status: refusal.into() })
}

/// A timing from a response head, which carries no class: the task ran in the class asked for.
fn classed(mut timing: TaskTiming, class: ClassId) -> TaskTiming {
    timing.class = class;
    timing
}

fn invalid(operation: &'static str, message: String) -> ClientError {
    ClientError::Status { operation, status: Status::invalid_argument(message) }
}
