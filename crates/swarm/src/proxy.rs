//! A TCP proxy in front of one storage node, written for the swarm (no toxiproxy offline): the
//! node is registered in the metadata store under the proxy's address, so the gateway's calls and
//! the other nodes' pushes (APLS sessions) reach it through here, and the swarm can put faults on
//! that path: latency added to every byte each way, every open connection reset, a partition
//! (connections black-holed, or refused with a reset) and its healing.
//!
//! Owns its listener, the connections through it and their bounded queues. Must not look at the
//! bytes it carries, or decide where the node is: it asks `upstream` at each connection (the
//! node's address changes when `lowtail up` restarts it).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Most connections through one proxy at once; more are reset at once.
const MAX_CONNECTIONS: usize = 4096;
/// Chunks read but not yet written (waiting out the latency), per direction of a connection.
const CHUNKS_IN_FLIGHT: usize = 64;
/// Largest chunk read at once.
const CHUNK_BYTES: usize = 64 << 10;
/// How long a connection to the node may take before the incoming one is reset.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the proxy does with the bytes and connections through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward every byte after `latency_ms` (0: at once).
    #[allow(missing_docs)]
    Pass { latency_ms: u64 },
    /// Forward nothing: open connections hang, new ones are accepted and hang (until healed,
    /// when what waited flows on).
    BlackHole,
    /// New connections are reset as soon as they are accepted (open ones were reset when the
    /// partition began).
    Refuse,
}

/// Where the node is now (`None`: unknown, the connection is reset).
pub type Upstream = Arc<dyn Fn() -> Option<SocketAddr> + Send + Sync>;

/// A running proxy; stops (its connections reset) when dropped.
pub struct NodeProxy {
    address: SocketAddr,
    mode: watch::Sender<Mode>,
    /// Bumped to reset every open connection.
    resets: watch::Sender<u64>,
    accept: tokio::task::JoinHandle<()>,
}

impl NodeProxy {
    /// Listens on `listen` (port 0: one the kernel picks) on the current runtime and forwards each
    /// connection to `upstream()`.
    pub async fn start(listen: SocketAddr, upstream: Upstream) -> io::Result<NodeProxy> {
        let listener = TcpListener::bind(listen).await?;
        let address = listener.local_addr()?;
        let (mode, _) = watch::channel(Mode::Pass { latency_ms: 0 });
        let (resets, _) = watch::channel(0u64);
        let accept = tokio::spawn(accept_loop(listener, upstream, mode.subscribe(), resets.subscribe()));
        Ok(NodeProxy { address, mode, resets, accept })
    }

    /// The address clients connect to.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// What the proxy does from now on (open connections included).
    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// What the proxy does now.
    pub fn mode(&self) -> Mode {
        *self.mode.borrow()
    }

    /// Resets every open connection (both sides see a reset).
    pub fn reset_all(&self) {
        self.resets.send_modify(|generation| *generation += 1);
    }
}

impl Drop for NodeProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.reset_all();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: Upstream,
    mode: watch::Receiver<Mode>,
    resets: watch::Receiver<u64>,
) {
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        let inbound = match listener.accept().await {
            Ok((inbound, _)) => inbound,
            Err(error) => {
                // Out of descriptors, or a connection gone before it was accepted: pause, go on.
                tracing::debug!(%error, "proxy accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if *mode.borrow() == Mode::Refuse || open.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
            reset(&inbound);
            continue;
        }
        open.fetch_add(1, Ordering::Relaxed);
        let (upstream, mode, resets, open) = (Arc::clone(&upstream), mode.clone(), resets.clone(), Arc::clone(&open));
        tokio::spawn(async move {
            connection(inbound, &upstream, mode, resets).await;
            open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Closes `stream` with a reset (RST) instead of an orderly close, once it is dropped.
fn reset(stream: &TcpStream) {
    let _ = socket2::SockRef::from(stream).set_linger(Some(Duration::ZERO));
}

/// One connection through the proxy, until either side closes both ways, an error, or a reset.
async fn connection(
    inbound: TcpStream,
    upstream: &Upstream,
    mut mode: watch::Receiver<Mode>,
    mut resets: watch::Receiver<u64>,
) {
    resets.mark_unchanged();
    // A black-holed connection waits here before the node ever sees it.
    let outbound = tokio::select! {
        outbound = connect_when_passing(upstream, &mut mode) => outbound,
        _ = resets.changed() => None,
    };
    let Some(outbound) = outbound else { return reset(&inbound) };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    let (mut in_read, mut in_write) = inbound.into_split();
    let (mut out_read, mut out_write) = outbound.into_split();
    let closed_cleanly = tokio::select! {
        piped = async {
            tokio::try_join!(
                pipe(&mut in_read, &mut out_write, mode.clone()),
                pipe(&mut out_read, &mut in_write, mode.clone())
            )
        } => piped.is_ok(),
        _ = resets.changed() => false,
    };
    if !closed_cleanly {
        // One side failed (or the swarm reset it): the other sees a reset too, as it would
        // without the proxy.
        reset(in_write.as_ref());
        reset(out_write.as_ref());
    }
}

async fn connect_when_passing(upstream: &Upstream, mode: &mut watch::Receiver<Mode>) -> Option<TcpStream> {
    mode.wait_for(|mode| *mode != Mode::BlackHole).await.ok()?;
    let address = upstream()?;
    tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await.ok()?.ok()
}

/// Waits while the proxy black-holes; the latency to add now. An error once the proxy is gone.
async fn passing(mode: &mut watch::Receiver<Mode>) -> io::Result<Duration> {
    let now = *mode.wait_for(|mode| *mode != Mode::BlackHole).await.map_err(|_| io::Error::other("proxy stopped"))?;
    Ok(match now {
        Mode::Pass { latency_ms } => Duration::from_millis(latency_ms),
        Mode::BlackHole | Mode::Refuse => Duration::ZERO,
    })
}

/// Copies `from` to `to`, each chunk held until its latency has passed (a bounded queue between
/// the reading and the writing, so latency delays bytes without capping the throughput), then
/// closes `to`'s writing side.
async fn pipe(from: &mut OwnedReadHalf, to: &mut OwnedWriteHalf, mode: watch::Receiver<Mode>) -> io::Result<()> {
    let (chunks, mut due) = mpsc::channel::<(Instant, bytes::Bytes)>(CHUNKS_IN_FLIGHT);
    let mut read_mode = mode.clone();
    let reading = async move {
        loop {
            let mut buffer = bytes::BytesMut::with_capacity(CHUNK_BYTES);
            if from.read_buf(&mut buffer).await? == 0 {
                return Ok::<_, io::Error>(());
            }
            // The latency of the moment the bytes arrived (a black hole holds them here).
            let latency = passing(&mut read_mode).await?;
            if chunks.send((Instant::now() + latency, buffer.freeze())).await.is_err() {
                return Ok(());
            }
        }
    };
    let mut write_mode = mode;
    let writing = async move {
        while let Some((at, chunk)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            passing(&mut write_mode).await?;
            to.write_all(&chunk).await?;
        }
        to.shutdown().await
    };
    tokio::try_join!(reading, writing).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server; its address.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut read, mut write) = stream.split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                });
            }
        });
        address
    }

    async fn proxy_to_echo() -> NodeProxy {
        let target = echo().await;
        NodeProxy::start("127.0.0.1:0".parse().unwrap(), Arc::new(move || Some(target))).await.unwrap()
    }

    /// Sends `bytes` and reads them back, within `within`; how long it took.
    async fn round_trip(stream: &mut TcpStream, bytes: &[u8], within: Duration) -> io::Result<Duration> {
        let started = Instant::now();
        let exchange = async {
            stream.write_all(bytes).await?;
            let mut back = vec![0u8; bytes.len()];
            stream.read_exact(&mut back).await?;
            assert_eq!(back, bytes);
            Ok(started.elapsed())
        };
        tokio::time::timeout(within, exchange)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no answer"))?
    }

    #[tokio::test]
    async fn bytes_pass_and_latency_is_added_each_way_without_capping_throughput() {
        let proxy = proxy_to_echo().await;
        let mut stream = TcpStream::connect(proxy.address()).await.unwrap();
        let fast = round_trip(&mut stream, b"hello", Duration::from_secs(5)).await.unwrap();
        assert!(fast < Duration::from_millis(100), "{fast:?}");
        proxy.set(Mode::Pass { latency_ms: 150 });
        let slow = round_trip(&mut stream, b"again", Duration::from_secs(5)).await.unwrap();
        assert!(slow >= Duration::from_millis(300), "150 ms each way: {slow:?}");
        // 8 MiB in 64 KiB chunks: one latency each way, not one per chunk.
        let big: Vec<u8> = (0..8 << 20).map(|i: u32| i as u8).collect();
        let took = round_trip(&mut stream, &big, Duration::from_secs(20)).await.unwrap();
        assert!(took < Duration::from_secs(5), "{took:?}");
    }

    #[tokio::test]
    async fn a_reset_drops_open_connections_and_new_ones_pass() {
        let proxy = proxy_to_echo().await;
        let mut stream = TcpStream::connect(proxy.address()).await.unwrap();
        round_trip(&mut stream, b"one", Duration::from_secs(5)).await.unwrap();
        proxy.reset_all();
        let cut = round_trip(&mut stream, b"two", Duration::from_secs(5)).await;
        assert!(cut.is_err(), "the reset connection answers nothing: {cut:?}");
        let mut again = TcpStream::connect(proxy.address()).await.unwrap();
        round_trip(&mut again, b"three", Duration::from_secs(5)).await.unwrap();
    }

    #[tokio::test]
    async fn a_black_hole_holds_bytes_until_healed_and_a_refusal_resets() {
        let proxy = proxy_to_echo().await;
        let mut open = TcpStream::connect(proxy.address()).await.unwrap();
        round_trip(&mut open, b"before", Duration::from_secs(5)).await.unwrap();
        proxy.set(Mode::BlackHole);
        let held = round_trip(&mut open, b"during", Duration::from_millis(500)).await;
        assert_eq!(held.unwrap_err().kind(), io::ErrorKind::TimedOut, "no answer through a partition");
        let mut new = TcpStream::connect(proxy.address()).await.unwrap();
        new.write_all(b"waiting").await.unwrap();
        proxy.set(Mode::Pass { latency_ms: 0 });
        // What waited flows on once healed: the held echo of "during" first.
        let mut back = [0u8; 6];
        tokio::time::timeout(Duration::from_secs(5), open.read_exact(&mut back)).await.unwrap().unwrap();
        assert_eq!(&back, b"during");
        let mut back = [0u8; 7];
        tokio::time::timeout(Duration::from_secs(5), new.read_exact(&mut back)).await.unwrap().unwrap();
        assert_eq!(&back, b"waiting");
        proxy.set(Mode::Refuse);
        proxy.reset_all();
        let mut refused = TcpStream::connect(proxy.address()).await.unwrap();
        let answer = round_trip(&mut refused, b"x", Duration::from_secs(5)).await;
        assert!(answer.is_err_and(|e| e.kind() != io::ErrorKind::TimedOut), "refused with a reset, not a hang");
        assert!(round_trip(&mut open, b"y", Duration::from_secs(5)).await.is_err(), "open ones were reset");
        proxy.set(Mode::Pass { latency_ms: 0 });
        let mut healed = TcpStream::connect(proxy.address()).await.unwrap();
        round_trip(&mut healed, b"healed", Duration::from_secs(5)).await.unwrap();
    }
}
