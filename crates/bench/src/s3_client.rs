//! The AWS SDK client every lowtail measurement drives a cluster with, and the text of its errors.
//!
//! Owns: the client settings a measurement needs (plain HTTP without TLS, path-style addressing, no
//! retries, a per-request time limit, no client-side checksums) and [`error_text`].
//! Must not: send a request itself or decide what counts as a failure (its callers do).

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation};
use std::time::Duration;

/// Where and as whom a client talks to a gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Endpoint {
    /// The gateway's S3 endpoint URL (`http://127.0.0.1:9000`).
    pub url: String,
    /// Region of the signatures.
    pub region: String,
    /// Access key id.
    pub access_key: String,
    /// Secret key.
    pub secret_key: String,
}

impl S3Endpoint {
    /// The endpoint and credentials that `lowtail up` wrote into a manifest.
    pub fn from_manifest(manifest: &launcher::Manifest) -> S3Endpoint {
        S3Endpoint {
            url: manifest.endpoint.clone(),
            region: manifest.region.clone(),
            access_key: manifest.access_key.clone(),
            secret_key: manifest.secret_key.clone(),
        }
    }
}

/// A client of `endpoint` over plain HTTP; `app_name` labels the credentials, `request_timeout`
/// turns a hung request into an error instead of a hung measurement.
pub fn measurement_client(
    endpoint: &S3Endpoint,
    app_name: &'static str,
    request_timeout: Duration,
) -> aws_sdk_s3::Client {
    let credentials = Credentials::new(&endpoint.access_key, &endpoint.secret_key, None, None, app_name);
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .region(Region::new(endpoint.region.clone()))
        .endpoint_url(&endpoint.url)
        .credentials_provider(credentials)
        .force_path_style(true)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        // No retries: a retried request would be counted as one slow success instead of a failure.
        .retry_config(RetryConfig::disabled())
        .timeout_config(TimeoutConfig::builder().operation_timeout(request_timeout).build())
        // Client-side CRCs are the client's cost, not the store's; the GET checks compare bytes.
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// The SDK's error with its source chain (its `Display` alone often says only "service error").
pub fn error_text(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
