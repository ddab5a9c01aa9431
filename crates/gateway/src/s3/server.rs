//! The HTTP/1.1 server in front of the S3 service: accepts connections until told to stop, then lets
//! requests in flight finish (up to `DRAIN_TIMEOUT`). Owns connections and the HTTP framing around
//! each exchange: a request id per request (the `x-amz-request-id` header, and the id error documents
//! carry), `Connection: close` when an answer leaves part of the request body unread, the 206
//! status of a ranged HEAD, and GetObjectAttributes' unquoted ETag. It must not parse S3 requests
//! or write S3 XML (that is `s3s`'s) nor decide an operation's outcome (that is the service's).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::header::{CONNECTION, CONTENT_RANGE, HeaderValue};
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use s3s::service::S3Service;
use s3s::{HttpError, HttpResponse};
use tokio::net::TcpListener;

/// How long `serve` waits, after shutdown is signalled, for open connections to finish.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause after a failed accept (out of file descriptors, ...), so the loop does not spin.
const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(100);
/// The response header that names the request (S3's).
const REQUEST_ID_HEADER: &str = "x-amz-request-id";

/// Largest DeleteObjects body read whole to check its digest: 1000 keys of at most 1024 bytes, XML
/// escaped, fit in far less. A larger one reaches the service cut to nothing (MalformedXML).
const MAX_MULTI_DELETE_BODY_BYTES: usize = 8 << 20;

tokio::task_local! {
    /// The id of the request whose answer the current task is computing.
    static REQUEST_ID: String;
    /// The current request's body, when it was read whole here (DeleteObjects).
    static WHOLE_BODY: Option<Bytes>;
}

/// The id of the request being served on this task, for error documents; `None` outside `serve`.
pub fn current_request_id() -> Option<String> {
    REQUEST_ID.try_with(String::clone).ok()
}

/// The body of the request being served on this task when the server read it whole before the
/// service (DeleteObjects, whose `Content-MD5` and checksum s3s does not check); else `None`.
pub fn buffered_body() -> Option<Bytes> {
    WHOLE_BODY.try_with(Clone::clone).ok().flatten()
}

/// Whether `request` is a DeleteObjects (`POST /bucket?delete`).
fn is_multi_delete<B>(request: &hyper::Request<B>) -> bool {
    request.method() == Method::POST
        && request
            .uri()
            .query()
            .is_some_and(|query| query.split('&').any(|pair| pair.split('=').next() == Some("delete")))
}

/// Reads a DeleteObjects body whole (bounded), for the service to check the request's
/// `Content-MD5` and checksum against. A body over the bound, or one that fails, is passed on empty.
async fn buffer_multi_delete(request: hyper::Request<Incoming>) -> (hyper::Request<s3s::Body>, Option<Bytes>) {
    use http_body_util::BodyExt;
    let (parts, body) = request.into_parts();
    match http_body_util::Limited::new(body, MAX_MULTI_DELETE_BODY_BYTES).collect().await {
        Ok(collected) => {
            let bytes = collected.to_bytes();
            (hyper::Request::from_parts(parts, s3s::Body::from(bytes.clone())), Some(bytes))
        }
        Err(error) => {
            tracing::debug!(%error, "a DeleteObjects body was not read whole");
            (hyper::Request::from_parts(parts, s3s::Body::empty()), None)
        }
    }
}

/// Request ids: a per-process random tag and a counter, so ids are unique within a process and
/// unlikely to repeat across gateways or restarts.
struct RequestIds {
    tag: u32,
    next: AtomicU64,
}

impl RequestIds {
    fn new() -> Self {
        RequestIds { tag: rand::random(), next: AtomicU64::new(1) }
    }

    fn next(&self) -> String {
        format!("{:08X}{:012X}", self.tag, self.next.fetch_add(1, Ordering::Relaxed))
    }
}

/// A request body that records whether it was read to its end.
struct TrackedBody {
    inner: Incoming,
    finished: Arc<AtomicBool>,
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.finished.store(true, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// An answer's body that holds `held` (the request's count in flight) until the body is sent: a
/// GET's bytes go out after its headers, and repair's pacing must see the time a download takes.
struct HeldUntilSent<G> {
    inner: s3s::Body,
    held: Option<G>,
}

impl<G: Unpin> HttpBody for HeldUntilSent<G> {
    type Data = Bytes;
    type Error = <s3s::Body as HttpBody>::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) || self.inner.is_end_stream() {
            self.held = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// `response` with its body holding `held` until sent (an empty body: `held` is dropped now).
fn hold_until_sent<G: Unpin + Send + Sync + 'static>(response: &mut HttpResponse, held: G) {
    if !response.body().is_end_stream() {
        let inner = std::mem::take(response.body_mut());
        *response.body_mut() = s3s::Body::http_body(HeldUntilSent { inner, held: Some(held) });
    }
}

/// Serves one request: assigns its id, runs the S3 service with the id in scope, and fixes up the
/// HTTP framing of the answer.
async fn handle(
    service: S3Service,
    ids: Arc<RequestIds>,
    request: hyper::Request<Incoming>,
) -> Result<HttpResponse, HttpError> {
    // Background work (repair) paces itself by how busy clients keep the gateway: a request counts
    // until its answer's body is sent.
    let busy = crate::data::services::foreground::request_in_flight();
    let id = ids.next();
    let is_head = request.method() == Method::HEAD;
    let is_attributes = super::attributes::is_attributes_request(&request);
    let finished = Arc::new(AtomicBool::new(request.body().is_end_stream()));
    let (request, whole_body) = if is_multi_delete(&request) {
        let (request, md5) = buffer_multi_delete(request).await;
        finished.store(md5.is_some(), Ordering::Relaxed);
        (request, md5)
    } else {
        let tracked = Arc::clone(&finished);
        (request.map(|inner| s3s::Body::http_body(TrackedBody { inner, finished: tracked })), None)
    };
    let answer = WHOLE_BODY.scope(whole_body, service.call(request));
    let mut response = REQUEST_ID.scope(id.clone(), answer).await?;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    // An answer given before the body was read (a refused upload, an unknown bucket) leaves the rest
    // of the body on the connection; hyper then closes it, and a client that was not told so would
    // send its next request into a closed connection.
    if !finished.load(Ordering::Relaxed) {
        response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    }
    if response.status().is_client_error() || response.status().is_server_error() {
        complete_error_document(&mut response, &id);
    }
    // s3s 0.14 always answers HeadObject with 200; a ranged HEAD is partial content, as its
    // Content-Range says.
    if is_head && response.status() == StatusCode::OK && response.headers().contains_key(CONTENT_RANGE) {
        *response.status_mut() = StatusCode::PARTIAL_CONTENT;
    }
    if is_attributes && response.status() == StatusCode::OK {
        unquote_attributes_etag(&mut response);
    }
    hold_until_sent(&mut response, busy);
    Ok(response)
}

/// S3 answers GetObjectAttributes' ETag unquoted, unlike every other ETag (which `s3s` quotes).
fn unquote_attributes_etag(response: &mut HttpResponse) {
    let Some(document) = response.body().bytes() else { return };
    if let Some(unquoted) = super::attributes::unquote_etag(&document) {
        response.headers_mut().remove(hyper::header::CONTENT_LENGTH);
        *response.body_mut() = s3s::Body::from(Bytes::from(unquoted));
    }
}

/// Adds the request id (and a message `s3s` left out) to an error document `s3s` wrote before any
/// handler ran (a signature, a bucket name or a path it refused).
fn complete_error_document(response: &mut HttpResponse, request_id: &str) {
    let Some(document) = response.body().bytes() else { return };
    if let Some(completed) = super::errors::completed_error_document(&document, request_id) {
        // hyper frames the new body by its length.
        response.headers_mut().remove(hyper::header::CONTENT_LENGTH);
        *response.body_mut() = s3s::Body::from(Bytes::from(completed));
    }
}

/// Serves `service` on `listener` until `shutdown` completes, then stops accepting, waits up to
/// `DRAIN_TIMEOUT` for requests in flight, and returns.
pub async fn serve(listener: TcpListener, service: S3Service, shutdown: impl Future<Output = ()>) {
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    // Clients that keep a connection open but send nothing must not hold it forever.
    http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(Duration::from_secs(60));
    let ids = Arc::new(RequestIds::new());
    tokio::pin!(shutdown);
    // Runs until shutdown: a server's accept loop is bounded by its lifetime, not by a count.
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let (service, ids) = (service.clone(), Arc::clone(&ids));
                    let per_request = hyper::service::service_fn(move |request| {
                        handle(service.clone(), Arc::clone(&ids), request)
                    });
                    let connection = http.serve_connection(TokioIo::new(stream), per_request);
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

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// A token whose drop is seen through its Arc's count.
    struct Token(#[allow(dead_code)] Arc<()>);

    #[tokio::test]
    async fn an_answer_holds_its_request_in_flight_until_its_body_is_sent() {
        let token = Arc::new(());
        let mut response = hyper::Response::new(s3s::Body::from(Bytes::from_static(b"the object's bytes")));
        hold_until_sent(&mut response, Token(Arc::clone(&token)));
        assert_eq!(Arc::strong_count(&token), 2, "held while the body waits to be sent");
        assert_eq!(response.body().size_hint().exact(), Some(18), "framed by its length as before");
        let mut body = response.into_body();
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), Bytes::from_static(b"the object's bytes"));
        assert_eq!(Arc::strong_count(&token), 1, "let go once the last bytes are out");
        // An empty answer lets go at once; a body dropped unsent (a client gone) lets go too.
        let mut empty = hyper::Response::new(s3s::Body::empty());
        hold_until_sent(&mut empty, Token(Arc::clone(&token)));
        assert_eq!(Arc::strong_count(&token), 1);
        let mut unsent = hyper::Response::new(s3s::Body::from(Bytes::from_static(b"x")));
        hold_until_sent(&mut unsent, Token(Arc::clone(&token)));
        drop(unsent);
        assert_eq!(Arc::strong_count(&token), 1);
    }
}
