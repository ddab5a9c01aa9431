//! The HTTP/1.1 server in front of the S3 service: accepts connections until told to stop, then lets
//! requests in flight finish (up to `DRAIN_TIMEOUT`). Owns connections only; it must not look into
//! requests (that is `s3s`'s and the service's).

use std::future::Future;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use s3s::service::S3Service;
use tokio::net::TcpListener;

/// How long `serve` waits, after shutdown is signalled, for open connections to finish.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause after a failed accept (out of file descriptors, ...), so the loop does not spin.
const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// Serves `service` on `listener` until `shutdown` completes, then stops accepting, waits up to
/// `DRAIN_TIMEOUT` for requests in flight, and returns.
pub async fn serve(listener: TcpListener, service: S3Service, shutdown: impl Future<Output = ()>) {
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    // Clients that keep a connection open but send nothing must not hold it forever.
    http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(Duration::from_secs(60));
    tokio::pin!(shutdown);
    // Runs until shutdown: a server's accept loop is bounded by its lifetime, not by a count.
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let connection = http.serve_connection(TokioIo::new(stream), service.clone());
                    let connection = graceful.watch(connection);
                    tokio::spawn(async move {
                        if let Err(error) = connection.await {
                            tracing::debug!(%peer, %error, "S3 connection ended with an error");
                        }
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "accepting an S3 connection failed");
                    tokio::time::sleep(ACCEPT_RETRY_DELAY).await;
                }
            },
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("S3 server stopped"),
        () = tokio::time::sleep(DRAIN_TIMEOUT) => tracing::warn!("S3 server stopped with connections still open"),
    }
}
