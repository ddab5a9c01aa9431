//! lowtail storage node: a checksummed unit store on local disk behind a task queue measured in
//! bytes (FCFS by default, or shared among latency classes), served over an authenticated gRPC
//! API, with optional service-model emulation so that a cluster on loopback queues like a cluster
//! of disks.
//!
//! The node executes what it is asked and reports what happened (task timings, queue state,
//! corrupt units). It must not decide policy: which units to read, when to read degraded, what to
//! cancel and what to repair are the gateway's decisions.
//!
//! Entry points: [`run`] (serve until a shutdown future completes) and [`start`] (for tests and
//! for `lowtail up`, which need the bound addresses). Clients use [`NodeClient`].

pub mod classes;
pub mod client;
pub mod config;
pub mod dir_sync;
pub mod error;
pub mod identity;
pub mod link;
pub mod metrics;
pub mod pacer;
pub mod queue;
pub mod rpc;
pub mod scheduler;
pub mod scrub;
pub mod server;
pub mod service_model;
pub mod session;
pub mod store;
pub mod unit_stream;

/// Generated protobuf messages and tonic client / server of `proto/node.proto`.
#[allow(missing_docs)]
pub mod proto {
    tonic::include_proto!("lowtail.node.v1");
}

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use classes::{CLASS_METADATA_KEY, ClassId, ClassQueueState, ClassScheduling, MAX_CLASSES};
pub use client::{NodeClient, ProbeReply};
pub use config::NodeConfig;
pub use error::{NodeError, UnitId};
pub use rpc::{ClientError, UnitRange};
pub use scheduler::{ClassCounters, MAX_MERGED_READ_BYTES, MAX_RANGES_PER_READ, Scheduler, TaskOutcome, TaskTiming};
pub use scrub::{ScrubConfig, ScrubProgress, Scrubber};
pub use service_model::ServiceModel;
pub use store::{ConditionalDelete, UnitStore};
pub use unit_stream::UnitTransport;

use crate::queue::QueueLimits;
use crate::server::NodeService;
use crate::unit_stream::server::StreamServer;

/// Locks `mutex`, recovering it from a thread that panicked while holding it: every structure the
/// node guards stays consistent between statements, so its last state is usable.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Accepted gRPC connections waiting for tonic to take them.
const ROUTED_BACKLOG: usize = 128;

/// How long shutdown waits for in-flight requests before dropping them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// A node that is serving. Stop it with [`RunningNode::shutdown`]; dropping it leaves the server
/// tasks running until the runtime ends.
#[derive(Debug)]
pub struct RunningNode {
    rpc_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    scheduler: Arc<Scheduler>,
    stop_rpc: oneshot::Sender<()>,
    /// Stops the connection router and, once idle, its unit-stream connections.
    stop_units: tokio::sync::watch::Sender<bool>,
    router: JoinHandle<()>,
    stop_metrics: Option<oneshot::Sender<()>>,
    rpc_server: JoinHandle<Result<(), tonic::transport::Error>>,
    metrics_server: Option<JoinHandle<std::io::Result<()>>>,
    workers: Vec<JoinHandle<()>>,
    background: JoinHandle<()>,
    scrubber: Arc<Scrubber>,
    scrub: JoinHandle<()>,
    sessions: Arc<session::Sessions>,
    /// The store, to see it released (its directory lock with it) before shutdown returns.
    store: std::sync::Weak<UnitStore>,
}

/// How long [`RunningNode::shutdown`] waits for the last reference to the store (a cancelled scrub
/// read finishing on a blocking thread) before it returns anyway.
const STORE_RELEASE_WAIT: Duration = Duration::from_secs(5);

impl RunningNode {
    /// Address the gRPC server is bound to.
    pub fn rpc_addr(&self) -> SocketAddr {
        self.rpc_addr
    }

    /// Address of the `/metrics` endpoint, when configured.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The node's scheduler (queue, counters, store), for in-process inspection.
    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.scheduler
    }

    /// The node's open reconstruction sessions, for in-process inspection.
    pub fn sessions(&self) -> &Arc<session::Sessions> {
        &self.sessions
    }

    /// The node's scrubber, for in-process inspection.
    pub fn scrubber(&self) -> &Arc<Scrubber> {
        &self.scrubber
    }

    /// Stops accepting requests, lets in-flight ones finish (at most [`SHUTDOWN_GRACE`]), drains
    /// the queue and stops the workers.
    pub async fn shutdown(self) {
        // Sessions end at once (their requestors fall back) rather than hold the grace period.
        self.sessions.close_all("the node is shutting down");
        let _ = self.stop_rpc.send(());
        let _ = self.stop_units.send(true);
        let _ = self.router.await;
        let mut rpc_server = self.rpc_server;
        match tokio::time::timeout(SHUTDOWN_GRACE, &mut rpc_server).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => tracing::error!(%error, "rpc server failed"),
            Ok(Err(error)) => tracing::error!(%error, "rpc server task failed"),
            Err(_) => {
                tracing::warn!("in-flight requests outlived the shutdown grace period; dropping them");
                rpc_server.abort();
            }
        }
        self.scheduler.close();
        for worker in self.workers {
            let _ = worker.await;
        }
        self.background.abort();
        self.scrub.abort();
        // Aborting only asks: wait until both tasks are gone.
        let _ = self.background.await;
        let _ = self.scrub.await;
        if let (Some(stop), Some(server)) = (self.stop_metrics, self.metrics_server) {
            let _ = stop.send(());
            let _ = server.await;
        }
        let node_id = self.scheduler.node_id();
        drop((self.scheduler, self.scrubber));
        // A scrub read cancelled mid-chunk finishes on its blocking thread; once it has, the store
        // and its directory lock are released, so the directory can be opened again at once.
        let deadline = tokio::time::Instant::now() + STORE_RELEASE_WAIT;
        while self.store.strong_count() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tracing::info!(node = node_id, "node stopped");
    }
}

/// Opens the store, binds the listeners and starts serving. Fails on an invalid config, an
/// unusable data dir or an address in use; nothing keeps running then.
pub async fn start(config: NodeConfig) -> Result<RunningNode, NodeError> {
    config.validate()?;
    let data_dir = config.data_dir.clone();
    let (max_unit_bytes, node_id) = (config.max_unit_bytes, config.node_id);
    let (store, identity) = tokio::task::spawn_blocking(move || {
        let store = UnitStore::open(&data_dir, max_unit_bytes)?;
        // After the store: its lock makes this process the directory's only one.
        let identity = identity::Identity::open(&data_dir, node_id, store.unit_count() > 0)?;
        Ok::<_, NodeError>((store, identity))
    })
    .await
    .map_err(|e| NodeError::io(&config.data_dir, std::io::Error::other(e.to_string())))??;
    let limits = QueueLimits { max_queued_bytes: config.max_queued_bytes, max_queued_tasks: config.max_queued_tasks };
    let store = Arc::new(store);
    let scrubber = Arc::new(Scrubber::new(Arc::clone(&store), config.scrub.clone(), &config.data_dir, config.node_id));
    let store_released = Arc::downgrade(&store);
    let scheduler = Scheduler::new(config.node_id, store, limits, config.service_model.clone())?;
    scheduler.set_class_scheduling(config.class_scheduling.clone())?;

    let rpc_listener = tokio::net::TcpListener::bind(config.listen_addr)
        .await
        .map_err(|e| NodeError::io(format!("listen address {}", config.listen_addr), e))?;
    let rpc_addr = rpc_listener.local_addr().map_err(|e| NodeError::io("rpc listener", e))?;
    let metrics_listener = match config.metrics_addr {
        Some(addr) => Some(metrics::bind(addr).await?),
        None => None,
    };
    let metrics_addr = match &metrics_listener {
        Some(listener) => Some(listener.local_addr().map_err(|e| NodeError::io("metrics listener", e))?),
        None => None,
    };
    if let Some(path) = &config.address_file {
        write_address_file(path, rpc_addr, metrics_addr)?;
    }
    // From here on nothing can fail: start the tasks.
    metrics::handle();
    let corrupt_gauge = ::metrics::gauge!("lowtail_node_corrupt_units", "node" => config.node_id.to_string());
    scheduler.store().publish_corrupt_count(corrupt_gauge);
    let workers = scheduler.spawn_workers(config.workers);
    let background = scheduler.spawn_background_load();
    let scrub = tokio::spawn(Arc::clone(&scrubber).run());

    let (stop_rpc, rpc_stopped) = oneshot::channel::<()>();
    let sessions = Arc::new(session::Sessions::default());
    let service = NodeService::new(
        Arc::clone(&scheduler),
        Arc::new(identity),
        Arc::clone(&scrubber),
        config.read_chunk_bytes,
        Arc::clone(&sessions),
        &config.cluster_secret,
    )
    .into_server(&config.cluster_secret);
    // One port, two protocols: the router hands HTTP/2 connections to tonic and serves the unit
    // stream itself.
    let (grpc_connections, incoming) = tokio::sync::mpsc::channel(ROUTED_BACKLOG);
    let (stop_units, units_stopped) = tokio::sync::watch::channel(false);
    let router = tokio::spawn(StreamServer::new(Arc::clone(&scheduler), &config.cluster_secret).route(
        rpc_listener,
        grpc_connections,
        units_stopped,
    ));
    let incoming = tokio_stream::wrappers::ReceiverStream::new(incoming);
    let rpc_server = tokio::spawn(
        tonic::transport::Server::builder().add_service(service).serve_with_incoming_shutdown(incoming, async {
            let _ = rpc_stopped.await;
        }),
    );

    let (stop_metrics, metrics_server) = match metrics_listener {
        Some(listener) => {
            let (stop, stopped) = oneshot::channel::<()>();
            let server = tokio::spawn(metrics::serve(listener, async {
                let _ = stopped.await;
            }));
            (Some(stop), Some(server))
        }
        None => (None, None),
    };
    tracing::info!(node = config.node_id, %rpc_addr, ?metrics_addr, workers = config.workers, "node serving");
    Ok(RunningNode {
        rpc_addr,
        metrics_addr,
        scheduler,
        stop_rpc,
        stop_units,
        router,
        stop_metrics,
        rpc_server,
        metrics_server,
        workers,
        background,
        scrubber,
        scrub,
        sessions,
        store: store_released,
    })
}

/// Writes the bound addresses atomically (temp file + rename), so a reader never sees half a file.
fn write_address_file(
    path: &std::path::Path,
    rpc_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
) -> Result<(), NodeError> {
    let body = format!(
        "{{\"rpc_addr\": \"{rpc_addr}\", \"metrics_addr\": {}}}\n",
        metrics_addr.map_or("null".to_string(), |a| format!("\"{a}\""))
    );
    let temp = path.with_extension("tmp");
    std::fs::write(&temp, body).map_err(|e| NodeError::io(&temp, e))?;
    std::fs::rename(&temp, path).map_err(|e| NodeError::io(path, e))
}

/// Serves `config` until `shutdown` completes, then drains cleanly. This is what `lowtail node`
/// calls.
pub async fn run(config: NodeConfig, shutdown: impl Future<Output = ()>) -> Result<(), NodeError> {
    let node = start(config).await?;
    shutdown.await;
    node.shutdown().await;
    Ok(())
}
