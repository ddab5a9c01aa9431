//! The node's side of the unit stream: routes each accepted connection by its first bytes (the
//! unit stream's magic here, anything else to the gRPC server), checks the hello's secret, then
//! serves read, merged-read and write requests one after another on the connection.
//!
//! Owns the connection's life: its limits, cancellation (a client that closes the connection, or
//! sends anything while its request waits, cancels it, as a reset gRPC stream does) and a clean
//! refusal (the error is sent, then the rest of the request is drained so the client reads it).
//! Must not execute tasks (reads and writes go through the scheduler's queue, in their class, as the
//! gRPC service's do) and must not decide policy.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tonic::Code;

use super::wire::{self, Op, Request, ResponseHead};
use crate::error::{NodeError, UnitId};
use crate::rpc::SecretCheck;
use crate::scheduler::{Scheduler, TaskTiming, blocking};
use crate::store::{UnitImage, UnitWrite};

/// Most unit-stream connections a node keeps open; one more is refused with `ResourceExhausted`.
pub const MAX_CONNECTIONS: usize = 4096;
/// How long a new connection may take to send its first bytes, and a unit-stream client its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// An idle unit-stream connection is closed after this long (the client's pool drops them sooner).
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Bytes of a write received per blocking append. A unit up to this size is received whole into
/// memory and written by its task in one call (one hand-off to the blocking pool, one `pwrite`).
const WRITE_CHUNK_BYTES: usize = 1 << 20;
/// Most time spent draining a refused request's bytes so that its client reads the refusal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves the unit stream of one node.
pub(crate) struct StreamServer {
    scheduler: Arc<Scheduler>,
    secret: SecretCheck,
    connections: Arc<Semaphore>,
}

impl StreamServer {
    /// A server of `scheduler`'s units for clients that present `secret`.
    pub(crate) fn new(scheduler: Arc<Scheduler>, secret: &str) -> Arc<Self> {
        Arc::new(Self {
            scheduler,
            secret: SecretCheck::new(secret),
            connections: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        })
    }

    /// Accepts connections on `listener` until `stop` turns true, handing gRPC ones to `grpc` and
    /// serving unit-stream ones itself. Serving connections end when idle after `stop`.
    pub(crate) async fn route(
        self: Arc<Self>,
        listener: TcpListener,
        grpc: mpsc::Sender<io::Result<TcpStream>>,
        mut stop: watch::Receiver<bool>,
    ) {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = stop.wait_for(|stopped| *stopped) => return,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of descriptors and the like: pause rather than spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let server = Arc::clone(&self);
            let (grpc, stop) = (grpc.clone(), stop.clone());
            tokio::spawn(async move { server.dispatch(stream, grpc, stop).await });
        }
    }

    async fn dispatch(
        self: Arc<Self>,
        stream: TcpStream,
        grpc: mpsc::Sender<io::Result<TcpStream>>,
        stop: watch::Receiver<bool>,
    ) {
        let mut first = [0u8; wire::MAGIC.len()];
        let peeked = tokio::time::timeout(HELLO_TIMEOUT, peek_exact(&stream, &mut first)).await;
        match peeked {
            Ok(Ok(())) if first == wire::MAGIC => self.serve(stream, stop).await,
            // HTTP/2 (or a connection that closed early: tonic sees it end).
            Ok(_) => {
                let _ = grpc.send(Ok(stream)).await;
            }
            Err(_) => tracing::debug!("a connection sent nothing for {HELLO_TIMEOUT:?}; closed"),
        }
    }

    async fn serve(self: Arc<Self>, mut stream: TcpStream, mut stop: watch::Receiver<bool>) {
        let Ok(_permit) = Arc::clone(&self.connections).try_acquire_owned() else {
            let message = format!("the node serves at most {MAX_CONNECTIONS} unit-stream connections");
            return refuse(stream, Code::ResourceExhausted, &message).await;
        };
        match tokio::time::timeout(HELLO_TIMEOUT, self.hello(&mut stream)).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(message))) => return refuse(stream, Code::Unauthenticated, &message).await,
            Ok(Err(_)) | Err(_) => return,
        }
        // Bounded by the idle timeout and by stop: each pass serves one request.
        loop {
            let mut header = [0u8; wire::REQUEST_BYTES];
            let received = tokio::select! {
                received = tokio::time::timeout(IDLE_TIMEOUT, stream.read_exact(&mut header)) => received,
                _ = stop.wait_for(|stopped| *stopped) => return,
            };
            if !matches!(received, Ok(Ok(_))) {
                return;
            }
            let request = match Request::decode(&header) {
                Ok(request) => request,
                Err(message) => return refuse(stream, Code::InvalidArgument, &message).await,
            };
            let keep = match request.op {
                Op::Read => self.read(&mut stream, request).await,
                Op::ReadMany => self.read_many(&mut stream, request).await,
                Op::Write => self.write(&mut stream, request).await,
            };
            if keep.is_err() {
                return;
            }
        }
    }

    async fn hello(&self, stream: &mut TcpStream) -> io::Result<Result<(), String>> {
        let mut head = [0u8; wire::MAGIC.len() + 2];
        stream.read_exact(&mut head).await?;
        let len = usize::from(u16::from_le_bytes([head[4], head[5]]));
        if len == 0 || len > wire::MAX_SECRET_BYTES {
            return Ok(Err(format!("a secret of {len} bytes")));
        }
        let mut presented = vec![0u8; len];
        stream.read_exact(&mut presented).await?;
        Ok(if self.secret.accepts(&presented) { Ok(()) } else { Err("wrong cluster secret".into()) })
    }

    /// Serves one read; an error means the connection must close.
    async fn read(&self, stream: &mut TcpStream, request: Request) -> io::Result<()> {
        let began = Instant::now();
        let (mut reader, mut writer) = stream.split();
        let task = self.scheduler.read(request.class, request.unit, request.offset, request.length);
        let result = until_client_leaves(&mut reader, task).await?;
        observe(&self.scheduler, "read_range", began, result.as_ref().err());
        match result {
            Ok((data, timing)) => {
                self.scheduler.egress().transmit(data.len() as u64).await;
                let head = ResponseHead { code: Code::Ok, timing: Some(timing), payload_len: data.len() as u64 };
                // One vectored write: the head and the unit's bytes leave in one system call.
                writer.write_all_buf(&mut Bytes::copy_from_slice(&head.encode()).chain(data)).await
            }
            Err(error) => send_error(&mut writer, &error).await,
        }
    }

    /// Serves one merged read: receives its ranges, runs them as one task, answers with the task's
    /// head and then, per range in order, its head and its bytes (or its error's message). A
    /// refusal of the whole request (empty, too many bytes, queue full) leaves the connection
    /// usable: its ranges were all read.
    async fn read_many(&self, stream: &mut TcpStream, request: Request) -> io::Result<()> {
        let began = Instant::now();
        let count = usize::try_from(request.length).expect("the header's decoding bounds the count");
        let mut ranges = vec![0u8; count * wire::RANGE_BYTES];
        stream.read_exact(&mut ranges).await?;
        let (mut reader, mut writer) = stream.split();
        let task = self.scheduler.read_many(request.class, wire::decode_ranges(&ranges));
        let result = until_client_leaves(&mut reader, task).await?;
        observe(&self.scheduler, "read_units", began, result.as_ref().err());
        match result {
            // Vectored writes: heads and bytes leave together, the bytes uncopied.
            Ok((results, timing)) => {
                self.scheduler.egress().transmit(answer_bytes(&results)).await;
                writer.write_all_buf(&mut wire::read_many_answer(results, timing)).await
            }
            Err(error) => send_error(&mut writer, &error).await,
        }
    }

    /// Serves one write: receives the unit's bytes (into memory or a staged file), commits them
    /// through the queue, answers once they are durable.
    async fn write(&self, stream: &mut TcpStream, request: Request) -> io::Result<()> {
        let began = Instant::now();
        // The header's decoding bounds the descriptor's length.
        let mut descriptor = vec![0u8; request.offset as usize];
        stream.read_exact(&mut descriptor).await?;
        // A class the node does not serve is refused before a byte of the unit is received.
        if let Err(error) = self.scheduler.admits(request.class) {
            observe(&self.scheduler, "write_unit", began, Some(&error));
            send_error(stream, &error).await?;
            return drain(stream, request.length).await;
        }
        let result = match self.receive(stream, request.unit, request.length, Bytes::from(descriptor)).await? {
            Ok(write) => {
                let (mut reader, _) = stream.split();
                until_client_leaves(&mut reader, self.scheduler.write(request.class, write)).await?
            }
            Err((error, unread)) => {
                // The refusal first (the client reads it once it has sent the rest), then the rest
                // is drained so the connection can serve the next request.
                observe(&self.scheduler, "write_unit", began, Some(&error));
                send_error(stream, &error).await?;
                return drain(stream, unread).await;
            }
        };
        observe(&self.scheduler, "write_unit", began, result.as_ref().err());
        match result {
            Ok(timing) => send_head(stream, Code::Ok, Some(timing), 0).await,
            Err(error) => send_error(stream, &error).await,
        }
    }

    /// Receives a write's `total_len` bytes: whole into memory up to [`WRITE_CHUNK_BYTES`], else
    /// into a staged file chunk by chunk. `Ok(Err((error, unread)))` is a refusal with `unread`
    /// bytes of the body still on the connection; `Err` is a broken connection.
    async fn receive(
        &self,
        stream: &mut TcpStream,
        unit: UnitId,
        total_len: u64,
        descriptor: Bytes,
    ) -> io::Result<Result<UnitWrite, (NodeError, u64)>> {
        let store = Arc::clone(self.scheduler.store());
        if total_len > store.max_unit_bytes() {
            let error = store.begin_write(unit, total_len).expect_err("over the limit, refused before any I/O");
            return Ok(Err((error, total_len)));
        }
        if total_len <= WRITE_CHUNK_BYTES as u64 {
            let mut image = UnitImage::buffer(total_len as usize);
            receive_into(stream, &mut image, total_len as usize).await?;
            return Ok(Ok(UnitWrite::Image(UnitImage::new(unit, image, descriptor))));
        }
        let first = receive_chunk(stream, total_len).await?;
        let mut rest = total_len - first.len() as u64;
        let begun = blocking(move || {
            let mut staged = store.begin_described_write(unit, total_len, descriptor)?;
            staged.append(&first)?;
            Ok(staged)
        })
        .await;
        let mut staged = match begun {
            Ok(staged) => staged,
            Err(error) => return Ok(Err((error, rest))),
        };
        // Bounded: every pass receives at least one byte of the declared length.
        while rest > 0 {
            let chunk = receive_chunk(stream, rest).await?;
            rest -= chunk.len() as u64;
            staged = match blocking(move || staged.append(&chunk).map(|()| staged)).await {
                Ok(staged) => staged,
                Err(error) => return Ok(Err((error, rest))),
            };
        }
        Ok(Ok(UnitWrite::Staged(staged)))
    }
}

/// Runs `task` unless the client closes the connection (or breaks the protocol by sending while
/// it waits) first: then the task's future is dropped, which cancels it in the scheduler, and the
/// connection must close.
async fn until_client_leaves<T>(
    reader: &mut (impl AsyncRead + Unpin),
    task: impl Future<Output = Result<T, NodeError>>,
) -> io::Result<Result<T, NodeError>> {
    let mut probe = [0u8; 1];
    tokio::select! {
        result = task => Ok(result),
        _ = reader.read(&mut probe) => Err(io::Error::new(io::ErrorKind::ConnectionAborted, "the client left")),
    }
}

/// Up to `WRITE_CHUNK_BYTES` of the `rest` bytes still due, in a buffer that is not zeroed first.
async fn receive_chunk(stream: &mut TcpStream, rest: u64) -> io::Result<BytesMut> {
    let want = usize::try_from(rest.min(WRITE_CHUNK_BYTES as u64)).expect("at most a chunk");
    let mut chunk = BytesMut::with_capacity(want);
    receive_into(stream, &mut chunk, want).await?;
    Ok(chunk)
}

/// Appends exactly `want` bytes from `stream` to `buffer` (its spare capacity is not zeroed first).
async fn receive_into(stream: &mut TcpStream, buffer: &mut BytesMut, want: usize) -> io::Result<()> {
    let end = buffer.len() + want;
    let mut limited = (&mut *stream).take(want as u64);
    // Bounded: every pass adds at least one byte or ends.
    while buffer.len() < end {
        if limited.read_buf(buffer).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(())
}

/// Reads and discards the `unread` bytes of a refused request so the client, still sending them,
/// reads the refusal instead of a reset. Fails (the connection must close) if they do not all
/// arrive within the drain timeout.
async fn drain(stream: &mut TcpStream, unread: u64) -> io::Result<()> {
    let mut limited = (&mut *stream).take(unread);
    let copied = tokio::time::timeout(DRAIN_TIMEOUT, tokio::io::copy(&mut limited, &mut tokio::io::sink())).await;
    match copied {
        Ok(Ok(copied)) if copied == unread => Ok(()),
        _ => Err(io::ErrorKind::UnexpectedEof.into()),
    }
}

/// Sends a refusal and closes: the write side first, then whatever the client still sends is
/// drained (for a bounded time) so that it reads the refusal.
async fn refuse(mut stream: TcpStream, code: Code, message: &str) {
    let head = ResponseHead { code, timing: None, payload_len: message.len() as u64 };
    if stream.write_all(&head.encode()).await.is_err() || stream.write_all(message.as_bytes()).await.is_err() {
        return;
    }
    let _ = stream.shutdown().await;
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, tokio::io::copy(&mut stream, &mut tokio::io::sink())).await;
}

async fn send_error(writer: &mut (impl AsyncWriteExt + Unpin), error: &NodeError) -> io::Result<()> {
    let message = wire::error_message(error);
    send_head(writer, error.code(), None, message.len() as u64).await?;
    writer.write_all(message.as_bytes()).await
}

async fn send_head(
    writer: &mut (impl AsyncWriteExt + Unpin),
    code: Code,
    timing: Option<TaskTiming>,
    payload_len: u64,
) -> io::Result<()> {
    writer.write_all(&ResponseHead { code, timing, payload_len }.encode()).await
}

/// Records the request's duration as the gRPC service does, so dashboards see one family.
fn observe(scheduler: &Scheduler, rpc: &'static str, began: Instant, error: Option<&NodeError>) {
    let code = error.map_or_else(|| "ok".to_string(), |error| format!("{:?}", error.code()).to_lowercase());
    crate::rpc::observe_rpc(scheduler.node_id().to_string(), rpc, began, code);
}

/// Waits until `stream` has `buffer.len()` bytes to read and copies them without consuming them;
/// fails if the connection ends first.
async fn peek_exact(stream: &TcpStream, buffer: &mut [u8]) -> io::Result<()> {
    // Bounded by the caller's timeout; each pass waits for more bytes to arrive.
    loop {
        let peeked = stream.peek(buffer).await?;
        if peeked == buffer.len() {
            return Ok(());
        }
        if peeked == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Bytes a merged read's answer carries (what the emulated uplink is held for).
pub(crate) fn answer_bytes(results: &crate::scheduler::RangeResults) -> u64 {
    results.iter().map(|result| result.as_ref().map_or(0, |data| data.len() as u64)).sum()
}
