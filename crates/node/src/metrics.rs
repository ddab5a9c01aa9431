//! Prometheus metrics of the node: installs the process-wide `metrics` recorder once and serves
//! its rendering on `GET /metrics`.
//!
//! Owns the exporter and its HTTP endpoint. Must not define what is measured (the scheduler and
//! the server record their own metrics, labelled with the node id so several nodes in one process
//! stay apart).

use std::net::SocketAddr;
use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;

use crate::error::NodeError;

/// Latency buckets (seconds) of every `_seconds` histogram: 50 µs to 30 s.
const LATENCY_BUCKETS_S: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// How often histogram samples are drained into their buckets. The recorder keeps every sample
/// until then: without upkeep a process nobody scrapes grew by every request it served (found by
/// a soak: the gateway's live heap rose 14 MB in 200 s).
const UPKEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// The process's Prometheus handle, installing the recorder on first use. If another recorder
/// was installed first (an embedding process), the node's metrics go to that one and this
/// handle renders an empty page.
pub fn handle() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS_S)
            .expect("bucket list is non-empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was already installed; /metrics will not show the node's metrics");
        }
        let upkeep = handle.clone();
        let spawned = std::thread::Builder::new().name("metrics-upkeep".into()).spawn(move || {
            loop {
                std::thread::sleep(UPKEEP_INTERVAL);
                upkeep.run_upkeep();
            }
        });
        if let Err(error) = spawned {
            tracing::warn!(%error, "no metrics upkeep thread: histograms grow until /metrics is scraped");
        }
        handle
    })
}

/// Binds the metrics endpoint; returns the listener (its address may be port 0 resolved).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, NodeError> {
    TcpListener::bind(addr).await.map_err(|e| NodeError::io(format!("metrics address {addr}"), e))
}

/// Serves `GET /metrics` on `listener` until `shutdown` completes.
pub async fn serve(listener: TcpListener, shutdown: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
    let handle = handle();
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let body = handle.render();
            async move { body }
        }),
    );
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}
