//! The S3 API: the `s3s` protocol layer (XML, routing, SigV4 header and presigned-URL authentication)
//! in front of [`LowtailS3`], which maps S3 operations onto object metadata ([`meta::MetaStore`]) and
//! object bytes ([`crate::data::ObjectData`]); and the HTTP server that serves it.
//!
//! Must not: hand-write S3 XML or signature checks (that is `s3s`'s), reach storage nodes or stripes
//! except through `ObjectData`, or make policy decisions. `docs/s3.md` lists the supported operations,
//! limits and error codes.

pub mod abandoned_uploads;
mod attributes;
mod auth;
mod batch_get;
mod batch_hint;
mod body;
mod bucket;
pub(crate) mod checksum;
mod coaccess;
mod conditions;
mod copy;
mod delete;
mod dispatch;
mod errors;
mod etag;
mod get;
mod list;
mod md5_engine;
mod multipart;
mod names;
mod put;
mod read_body;
mod request_class;
mod routes;
mod server;
mod service;
mod tagging;
mod timestamps;
mod unsupported;
mod unusable_range;
mod verify;
mod versions;
mod write;
pub use write::{FAILURES_TOLERATED_HEADER, REDUNDANCY_HEADER, WRITE_ACK_HEADER};

use std::sync::Arc;

use meta::MetaStore;
use s3s::service::{S3Service, S3ServiceBuilder};

use crate::data::ObjectData;

pub use auth::CredentialTable;
pub use batch_get::{BATCH_GET_QUERY, MAX_BATCH_BYTES, MAX_BATCH_OBJECTS};
pub use batch_hint::{BATCH_HINT_HEADER, BATCHED_HEADER};
pub use dispatch::REQUEST_SECONDS_METRIC;
pub use server::{DRAIN_TIMEOUT, serve};
pub use service::LowtailS3;

/// S3's smallest part size for every part of a multipart upload but the last.
pub const S3_MIN_PART_BYTES: u64 = 5 << 20;
/// Default largest PutObject body or upload part: S3's single-PUT limit (bodies stream into
/// stripes, so the size costs no gateway memory).
pub const DEFAULT_MAX_OBJECT_BYTES: u64 = 5 << 30;

/// Settings of the S3 layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Options {
    /// Largest PutObject body or UploadPart body accepted (EntityTooLarge beyond). Multipart objects
    /// may be larger: up to 10 000 parts of this size.
    pub max_object_bytes: u64,
    /// Smallest size of every part but the last in CompleteMultipartUpload (EntityTooSmall below).
    pub min_part_bytes: u64,
    /// Region reported for buckets created without a location constraint.
    pub region: String,
    /// Domain for virtual-hosted-style requests (`bucket.DOMAIN/key`); path style always works.
    pub virtual_host_domain: Option<String>,
    /// How long a request body may go without a byte before the request fails with
    /// RequestTimeout (400) and nothing of it is kept.
    pub body_idle_timeout: std::time::Duration,
    /// How long hinted GETs (`x-lowtail-batch`) wait for the rest of their batch.
    pub batch_window: std::time::Duration,
    /// Whole-object GETs of one access key less than this apart are taken as one request of
    /// several objects, for the mover's statistics (`coaccess`); `None` follows none.
    pub coaccess_gap: Option<std::time::Duration>,
    /// The latency classes requests run in (`[classes]`; one class by default) and their counters.
    pub classes: Arc<crate::classes::ClassTable>,
    /// Which profile serves which bucket (docs/profiles.md); `None`: the cluster's default for all.
    pub profiles: Option<Arc<crate::profiles::ProfileDirectory>>,
}

impl Default for S3Options {
    fn default() -> Self {
        S3Options {
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
            min_part_bytes: S3_MIN_PART_BYTES,
            region: "us-east-1".to_string(),
            virtual_host_domain: None,
            body_idle_timeout: std::time::Duration::from_millis(DEFAULT_BODY_IDLE_TIMEOUT_MS),
            batch_window: std::time::Duration::from_millis(DEFAULT_BATCH_WINDOW_MS),
            coaccess_gap: Some(std::time::Duration::from_millis(DEFAULT_COACCESS_GAP_MS)),
            classes: Arc::new(crate::classes::ClassTable::default()),
            profiles: None,
        }
    }
}

/// Default of [`S3Options::coaccess_gap`], in milliseconds.
pub const DEFAULT_COACCESS_GAP_MS: u64 = 20;

/// Default of [`S3Options::batch_window`], in milliseconds.
pub const DEFAULT_BATCH_WINDOW_MS: u64 = 2;

/// Default of [`S3Options::body_idle_timeout`]: 20 s, about when S3 gives up on a silent client.
pub const DEFAULT_BODY_IDLE_TIMEOUT_MS: u64 = 20_000;

/// An error building the service from its settings.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// `virtual_host_domain` is not a valid domain.
    #[error("invalid virtual host domain {domain:?}: {reason}")]
    InvalidDomain {
        /// The domain given.
        domain: String,
        /// Why it was refused.
        reason: String,
    },
}

/// The S3 service over `meta` and `data`, accepting requests signed (SigV4 headers or presigned URLs)
/// with one of the `(access key, secret key)` pairs in `credentials`. Unsigned requests and requests
/// signed with unknown keys are refused with 403; with no credentials every request is refused.
pub fn build_service(
    meta: Arc<dyn MetaStore>,
    data: Arc<dyn ObjectData>,
    credentials: Vec<(String, String)>,
    options: S3Options,
) -> Result<S3Service, BuildError> {
    let host = |domain: &String| {
        s3s::host::SingleDomain::new(domain)
            .map_err(|error| BuildError::InvalidDomain { domain: domain.clone(), reason: error.to_string() })
    };
    // The same operations without authentication, reachable only through the route below, which
    // runs after a request's signature has been verified.
    let mut unauthenticated =
        S3ServiceBuilder::new(LowtailS3::new(Arc::clone(&meta), Arc::clone(&data), options.clone()));
    if let Some(domain) = &options.virtual_host_domain {
        unauthenticated.set_host(host(domain)?);
    }
    let domain = options.virtual_host_domain.clone();
    let batch_get = batch_get::BatchGet { meta: Arc::clone(&meta), data: Arc::clone(&data), options: options.clone() };
    let mut builder = S3ServiceBuilder::new(LowtailS3::new(Arc::clone(&meta), data, options));
    builder.set_auth(CredentialTable::new(credentials));
    // Runs only because an auth provider is set (s3s skips access checks without one).
    builder.set_access(auth::SignedOnly { meta });
    let unusable_range = unusable_range::IgnoreUnusableRange { unauthenticated: unauthenticated.build() };
    builder.set_route(routes::Routes { batch_get, unusable_range });
    if let Some(domain) = &domain {
        builder.set_host(host(domain)?);
    }
    Ok(builder.build())
}
