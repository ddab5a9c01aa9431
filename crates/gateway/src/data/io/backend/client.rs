//! The backend's S3 client (the `s3-backend` feature): the requests a backend-mode gateway sends
//! for its units, one GET, PUT, DELETE or LIST each, never retried (a slow or failed unit task is
//! the read plan's to route around), counted on `/metrics`.
//!
//! Must not: decide which units to read or write, or keep bytes after a request.

use std::time::{Duration, Instant};

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation};
use bytes::Bytes;
use meta::StripeId;

use super::{BackendReadError, ListedUnit};
use crate::data::DataError;
use crate::data::config::BackendConfig;

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

    /// The stripe and unit a key names, if it is a unit key (`PREFIX` + 16 hex digits + `/` + unit).
    pub fn parse_key(&self, key: &str) -> Option<(StripeId, u16)> {
        let (stripe, unit) = key.strip_prefix(&self.prefix)?.split_once('/')?;
        if stripe.len() != 16 {
            return None;
        }
        Some((StripeId(u64::from_str_radix(stripe, 16).ok()?), unit.parse().ok()?))
    }

    /// One page of the unit keys under the prefix (other keys skipped), and the token of the next
    /// page (`None` after the last).
    pub async fn list_units(&self, continuation: Option<String>) -> Result<(Vec<ListedUnit>, Option<String>), String> {
        let began = Instant::now();
        let answer = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(&self.prefix)
            .set_continuation_token(continuation)
            .send()
            .await
            .map_err(|error| format!("backend LIST {}: {}", self.prefix, error_text(&error)));
        count("list", answer.is_ok(), 0, began);
        let output = answer?;
        let units = output
            .contents()
            .iter()
            .filter_map(|object| {
                let (stripe, unit) = self.parse_key(object.key()?)?;
                let etag = object.e_tag().unwrap_or_default().to_owned();
                Some(ListedUnit { stripe, unit, etag, bytes: object.size().unwrap_or(0).max(0) as u64 })
            })
            .collect();
        let next = output
            .is_truncated()
            .unwrap_or(false)
            .then(|| output.next_continuation_token().map(str::to_owned))
            .flatten();
        Ok((units, next))
    }

    /// Whether the bucket answers (HeadBucket), with the backend's reason when it does not.
    pub async fn check(&self) -> Result<(), DataError> {
        self.client.head_bucket().bucket(&self.bucket).send().await.map(|_| ()).map_err(|error| {
            DataError::Unavailable(format!("backend bucket {:?}: {}", self.bucket, error_text(&error)))
        })
    }

    /// Stores a unit (one PUT); returns once the backend acknowledged it.
    pub async fn put_unit(&self, stripe: StripeId, unit: usize, data: Bytes) -> Result<(), String> {
        let (bytes, key) = (data.len() as u64, self.key(stripe, unit));
        let began = Instant::now();
        let result = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .body(data.into())
            .send()
            .await
            .map(|_| ())
            .map_err(|error| format!("backend PUT {key}: {}", error_text(&error)));
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
