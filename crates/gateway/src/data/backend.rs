//! The S3 backend (FAST CLOUD's own setting): a gateway whose units are keys in a bucket of another
//! S3-compatible service (AWS S3, MinIO, Ceph RGW, another lowtail) instead of files on storage
//! nodes. The stripe's n units live as `PREFIX` + `STRIPE/UNIT` keys; the metadata store keeps the
//! layout; reads and writes run through the same data path, controller and policies, a unit task
//! being one GET or PUT. The backend is a black box whose delays are random: FEC buys latency with
//! n/k more storage and requests (`lowtail_gateway_backend_*` metrics count them).
//!
//! The stripe's placement names *backend slots*: n virtual nodes registered in the metadata store
//! (`backend-slot-I`), always Up, so placement, records and policies see n distinct "nodes" as they
//! do on a cluster. Nothing probes them; durability is the backend's (repair still rebuilds a unit
//! whose write or read failed).
//!
//! Owns: the backend's client and configuration, the key of a unit, the slots' registration. Must
//! not: decide which units to read or write (the data path does) or keep bytes after a request.

use std::time::{Duration, Instant};

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation};
use bytes::Bytes;
use meta::{MetaStore, NodeId, NodeInfo, StripeId};
use serde::{Deserialize, Serialize};

use super::DataError;

/// The address a backend slot is registered with (never dialled).
pub const SLOT_ADDRESS_PREFIX: &str = "backend-slot-";

/// Where a backend-mode gateway keeps its units (`[data.backend]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BackendConfig {
    /// URL of the S3-compatible service: `https://s3.eu-west-1.amazonaws.com`, or
    /// `http://127.0.0.1:9000` for MinIO or another lowtail. Required.
    pub endpoint: String,
    /// The bucket the units go into; it must exist. Required.
    pub bucket: String,
    /// Region of the signatures. Default `us-east-1`.
    pub region: String,
    /// Access key id. Required.
    pub access_key: String,
    /// Secret key. Required.
    pub secret_key: String,
    /// Prefix of every unit key (`PREFIX` + `STRIPE/UNIT`, stripe in 16 hex digits). Default
    /// `lowtail/`, so one bucket can hold other data beside.
    pub prefix: String,
    /// Path-style URLs (`endpoint/bucket/key`): MinIO, Ceph RGW and lowtail need them. Default
    /// true; false for AWS's virtual-hosted style.
    pub path_style: bool,
    /// Time limit of one backend request; a GET past it counts as failed and the read goes on
    /// without it. Default 30 s.
    pub request_timeout_ms: u64,
}

impl Default for BackendConfig {
    fn default() -> Self {
        Self {
            endpoint: String::new(),
            bucket: String::new(),
            region: "us-east-1".into(),
            access_key: String::new(),
            secret_key: String::new(),
            prefix: "lowtail/".into(),
            path_style: true,
            request_timeout_ms: 30_000,
        }
    }
}

impl BackendConfig {
    /// Why the configuration cannot work, if it cannot.
    pub fn problem(&self) -> Option<String> {
        let missing: Vec<&str> = [
            ("endpoint", &self.endpoint),
            ("bucket", &self.bucket),
            ("access_key", &self.access_key),
            ("secret_key", &self.secret_key),
        ]
        .into_iter()
        .filter(|(_, value)| value.trim().is_empty())
        .map(|(name, _)| name)
        .collect();
        if !missing.is_empty() {
            return Some(format!("backend: {} must be set", missing.join(", ")));
        }
        if !(self.endpoint.starts_with("http://") || self.endpoint.starts_with("https://")) {
            return Some(format!("backend.endpoint {:?} must be an http:// or https:// URL", self.endpoint));
        }
        (self.request_timeout_ms == 0).then(|| "backend.request_timeout_ms must be positive".into())
    }
}

/// Why a backend read failed.
#[derive(Debug)]
pub struct BackendReadError {
    /// In words.
    pub message: String,
    /// The key is not there (the unit must be rebuilt), as opposed to a failed or slow request.
    pub not_found: bool,
}

/// The client of one backend bucket.
#[derive(Debug)]
pub struct S3Backend {
    client: aws_sdk_s3::Client,
    bucket: String,
    prefix: String,
}

impl S3Backend {
    /// A client of `config`'s bucket (nothing is sent yet: [`S3Backend::check`] does).
    pub fn new(config: &BackendConfig) -> Self {
        let credentials = Credentials::new(&config.access_key, &config.secret_key, None, None, "lowtail-backend");
        let sdk = aws_sdk_s3::Config::builder()
            .behavior_version_latest()
            .region(Region::new(config.region.clone()))
            .endpoint_url(&config.endpoint)
            .credentials_provider(credentials)
            .force_path_style(config.path_style)
            .http_client(aws_smithy_http_client::Builder::new().tls_provider(tls()).build_https())
            // One try: a slow or failed unit task is the policy's to route around, not the SDK's.
            .retry_config(RetryConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder().operation_timeout(Duration::from_millis(config.request_timeout_ms)).build(),
            )
            // Units carry the data path's own checks (decoding, the S3 layer's checksums).
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .build();
        Self {
            client: aws_sdk_s3::Client::from_conf(sdk),
            bucket: config.bucket.clone(),
            prefix: config.prefix.clone(),
        }
    }

    /// The key of `unit` of `stripe`.
    pub fn key(&self, stripe: StripeId, unit: usize) -> String {
        format!("{}{:016x}/{unit}", self.prefix, stripe.0)
    }

    /// Whether the bucket answers (HeadBucket), with the backend's reason when it does not.
    pub async fn check(&self) -> Result<(), DataError> {
        self.client.head_bucket().bucket(&self.bucket).send().await.map(|_| ()).map_err(|error| {
            DataError::Unavailable(format!("backend bucket {:?}: {}", self.bucket, error_text(&error)))
        })
    }

    /// Stores a unit (one PUT); returns once the backend acknowledged it.
    pub async fn put_unit(&self, stripe: StripeId, unit: usize, data: Bytes) -> Result<(), String> {
        let bytes = data.len() as u64;
        let began = Instant::now();
        let result = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(self.key(stripe, unit))
            .body(data.into())
            .send()
            .await
            .map(|_| ())
            .map_err(|error| format!("backend PUT {}: {}", self.key(stripe, unit), error_text(&error)));
        count("put", result.is_ok(), bytes, began);
        result
    }

    /// Bytes `offset .. offset + length` of a unit (one ranged GET), and how long it took.
    pub async fn get_range(
        &self,
        stripe: StripeId,
        unit: usize,
        offset: u64,
        length: u64,
    ) -> Result<(Bytes, Duration), BackendReadError> {
        let began = Instant::now();
        let key = self.key(stripe, unit);
        let range = format!("bytes={offset}-{}", offset + length.max(1) - 1);
        let answer = self.client.get_object().bucket(&self.bucket).key(&key).range(range).send().await;
        let result = match answer {
            Ok(output) => match output.body.collect().await {
                Ok(body) => Ok(body.into_bytes()),
                Err(error) => {
                    Err(BackendReadError { message: format!("backend GET {key}: body: {error}"), not_found: false })
                }
            },
            Err(error) => {
                let not_found = error.as_service_error().is_some_and(|e| e.is_no_such_key());
                Err(BackendReadError { message: format!("backend GET {key}: {}", error_text(&error)), not_found })
            }
        };
        let result = result.and_then(|bytes| {
            if bytes.len() as u64 == length {
                Ok(bytes)
            } else {
                let message = format!("backend GET {key}: {} bytes for a range of {length}", bytes.len());
                Err(BackendReadError { message, not_found: false })
            }
        });
        count("get", result.is_ok(), length, began);
        result.map(|bytes| (bytes, began.elapsed()))
    }

    /// Deletes a unit (one DELETE; S3 answers success for a key that is not there).
    pub async fn delete_unit(&self, stripe: StripeId, unit: usize) -> Result<(), String> {
        let began = Instant::now();
        let key = self.key(stripe, unit);
        let result = self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(&key)
            .send()
            .await
            .map(|_| ())
            .map_err(|error| format!("backend DELETE {key}: {}", error_text(&error)));
        count("delete", result.is_ok(), 0, began);
        result
    }
}

/// The TLS of an `https://` backend: rustls with ring's primitives (no C++ build).
fn tls() -> aws_smithy_http_client::tls::Provider {
    aws_smithy_http_client::tls::Provider::Rustls(aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring)
}

/// Counts a backend request in the metrics: requests by operation and outcome, bytes, seconds.
fn count(op: &'static str, ok: bool, bytes: u64, began: Instant) {
    let outcome = if ok { "ok" } else { "failed" };
    metrics::counter!("lowtail_gateway_backend_requests_total", "op" => op, "outcome" => outcome).increment(1);
    if ok {
        metrics::counter!("lowtail_gateway_backend_bytes_total", "op" => op).increment(bytes);
    }
    metrics::histogram!("lowtail_gateway_backend_request_seconds", "op" => op).record(began.elapsed().as_secs_f64());
}

/// The SDK's error with its source chain.
fn error_text(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    // Bounded: an error chain is a handful of links.
    for _ in 0..16 {
        let Some(cause) = source else { break };
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Registers the `n` backend slots in `meta` (ids 0..n, Up), or checks they are there. A metadata
/// store with other nodes belongs to a cluster of storage nodes, and is refused.
pub async fn register_slots(meta: &dyn MetaStore, n: usize, now_ms: u64) -> Result<Vec<NodeInfo>, DataError> {
    let existing = meta.list_nodes().await.map_err(super::meta_error)?;
    if let Some(node) = existing.iter().find(|node| !node.address.starts_with(SLOT_ADDRESS_PREFIX)) {
        return Err(DataError::Internal(format!(
            "backend mode needs a metadata store of its own: this one has storage node {} at {}",
            node.id, node.address
        )));
    }
    let mut slots = Vec::with_capacity(n);
    for slot in 0..n {
        let id = NodeId(slot as u32);
        match existing.iter().find(|node| node.id == id) {
            Some(node) => slots.push(node.clone()),
            None => {
                let address = format!("{SLOT_ADDRESS_PREFIX}{slot}");
                let rack = format!("slot-{slot}");
                slots.push(super::membership::register_node(meta, id, &address, &rack, u64::MAX, now_ms).await?);
            }
        }
    }
    Ok(slots)
}
