//! Test harness for the S3 API: a real server on 127.0.0.1:0 over the redb metadata store in a temporary
//! directory and `MemoryData`, an `aws-sdk-s3` client over plain HTTP, and a raw HTTP client for
//! presigned URLs and unsigned requests.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use bytes::Bytes;
use gateway::data::objects::memory::MemoryData;
use gateway::s3::{S3Options, build_service, serve};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;

/// The access key every test server accepts.
pub const ACCESS_KEY: &str = "lowtail-test-access";
/// Its secret.
pub const SECRET_KEY: &str = "lowtail-test-secret-0123456789";

/// A running S3 server; stops (gracefully) when dropped.
pub struct TestServer {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The object bytes behind the server.
    pub data: Arc<MemoryData>,
    /// The metadata behind the server.
    pub meta: Arc<dyn meta::MetaStore>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// Starts a server with default options.
pub async fn start() -> TestServer {
    start_with(S3Options::default()).await
}

/// Starts a server with `options`.
pub async fn start_with(options: S3Options) -> TestServer {
    let dir = tempfile::tempdir().expect("temporary directory");
    let meta: Arc<dyn meta::MetaStore> = Arc::new(meta::RedbStore::open(dir.path()).expect("redb store"));
    // Small segments, so larger objects span several synthetic stripes.
    let data = Arc::new(MemoryData::new(1 << 20));
    let service = build_service(Arc::clone(&meta), data.clone(), vec![(ACCESS_KEY.into(), SECRET_KEY.into())], options)
        .expect("service");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("address"));
    let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(listener, service, async move {
        let _ = stop.await;
    }));
    TestServer { endpoint, data, meta, shutdown: Some(shutdown), _dir: dir }
}

/// An SDK client for `endpoint` with the given keys (path style, plain HTTP, no retries so that
/// expected errors come back at once).
pub fn client_with(endpoint: &str, access_key: &str, secret_key: &str) -> aws_sdk_s3::Client {
    let credentials = Credentials::new(access_key, secret_key, None, None, "lowtail-test");
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(credentials)
        .force_path_style(true)
        .retry_config(RetryConfig::disabled())
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// An SDK client with the right keys.
pub fn client(server: &TestServer) -> aws_sdk_s3::Client {
    client_with(&server.endpoint, ACCESS_KEY, SECRET_KEY)
}

/// HTTP status and S3 error code of a failed SDK call.
pub fn failure<E: ProvideErrorMetadata + std::fmt::Debug>(error: &SdkError<E, HttpResponse>) -> (u16, String) {
    let status = error.raw_response().map(|response| response.status().as_u16());
    let status = status.unwrap_or_else(|| panic!("expected an S3 error response, got {error:?}"));
    (status, error.code().unwrap_or_default().to_string())
}

/// Sends a raw HTTP request; returns status, headers and body.
pub async fn raw_request(
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: Bytes,
) -> (u16, hyper::HeaderMap, Bytes) {
    let client: HyperClient<_, Full<Bytes>> =
        HyperClient::builder(TokioExecutor::new()).build(hyper_util::client::legacy::connect::HttpConnector::new());
    let mut request = hyper::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = request.body(Full::new(body)).expect("request");
    let response = tokio::time::timeout(Duration::from_secs(30), client.request(request))
        .await
        .expect("raw request timed out")
        .expect("raw request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.expect("body").to_bytes();
    (status, headers, body)
}

/// `size` bytes of a deterministic pattern (differs per `seed`).
pub fn pattern(size: usize, seed: u8) -> Vec<u8> {
    (0..size).map(|at| (at as u64).wrapping_mul(2_654_435_761).rotate_right(13) as u8 ^ seed).collect()
}

/// Hex MD5 of `bytes`.
pub fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest;
    hex::encode(md5::Md5::digest(bytes))
}
