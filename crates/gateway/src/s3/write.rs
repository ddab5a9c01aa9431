//! What the operations that store or drop bytes share: a request body streamed into the data path
//! and checked (`write_body`), the metadata a new object takes from its request (`user_metadata`,
//! `content_headers!`), the settling of a metadata commit (`settle_commit`), the release of layouts
//! nothing references any more, and the redundancy headers of a write's answer.
//!
//! Must not: commit metadata (each operation does, in its own order), or keep bytes of a request that
//! fails: what was written for it is released before the error is answered.

use std::collections::BTreeMap;

use meta::{Layout, MetaError, StoredChecksum, WriteAck};
use policy::fec::AckAt;
use s3s::dto::{Metadata, StreamingBlob};
use s3s::{S3ErrorCode, S3Response, S3Result, TrailingHeaders};

use super::body::{BodyTally, DeclaredBody, tallied};
use super::checksum::Declared;
use super::errors::{from_data, from_meta, s3};
use super::service::LowtailS3;
use crate::data::{Redundancy, Written};

/// Header of a write's response: how many node failures its bytes survive as acknowledged.
pub const FAILURES_TOLERATED_HEADER: &str = "x-lowtail-failures-tolerated";
/// Header of a write's response: `full`; `pending` when the bucket's write ack rule acknowledged
/// it before every unit landed (the rest land in the background); `degraded` when some units
/// could not be stored and repair owes them (the durability contract's "reported in the
/// response").
pub const REDUNDANCY_HEADER: &str = "x-lowtail-redundancy";
/// S3's bound on an object's user metadata: the bytes of every `x-amz-meta-*` name and value.
const MAX_USER_METADATA_BYTES: usize = 2048;

/// What a request says about the body it sends.
pub struct BodyClaims<'a> {
    pub content_length: Option<i64>,
    pub content_md5: Option<&'a str>,
    /// The S3 checksum to check and keep, if any.
    pub checksum: Option<Declared>,
    /// Where an aws-chunked body's trailers arrive.
    pub trailers: Option<&'a TrailingHeaders>,
}

/// A body stored by `write_body`.
pub struct WrittenBody {
    pub written: Written,
    /// Hex MD5.
    pub etag: String,
    pub size_bytes: u64,
    pub checksum: Option<StoredChecksum>,
}

/// Frees a layout nothing references any more. A failure leaks space but loses no data, so it is
/// logged rather than failing a request whose change is already committed.
pub async fn release(service: &LowtailS3, layout: &Layout) {
    if let Err(error) = service.data.release(layout).await {
        tracing::warn!(%error, "could not release an unreferenced layout; its space leaks");
    }
}

/// Settles a metadata commit of a version whose bytes are `written`: on success the version it
/// replaced (now unreferenced) is released, on failure `written` is, so neither leaks.
pub async fn settle_commit(
    service: &LowtailS3,
    committed: Result<Option<Layout>, MetaError>,
    written: &Layout,
) -> S3Result<()> {
    match committed {
        Ok(replaced) => {
            if let Some(replaced) = replaced {
                release(service, &replaced).await;
            }
            Ok(())
        }
        Err(error) => {
            release(service, written).await;
            Err(from_meta(error))
        }
    }
}

/// `settle_commit` of an object's write: the version it replaced (if one was released) released,
/// or, if the commit failed, the written bytes; the version written.
pub async fn settle_write(
    service: &LowtailS3,
    committed: Result<meta::Committed, MetaError>,
    written: &Layout,
) -> S3Result<meta::VersionStamp> {
    let version = committed.as_ref().map(|committed| committed.version.clone()).unwrap_or_default();
    let replaced = committed.map(|committed| committed.released.into_iter().next().map(|version| version.layout));
    settle_commit(service, replaced, written).await?;
    Ok(version)
}

/// Streams a request body into the data path and returns its layout, ETag (hex MD5), size and
/// S3 checksum. The body is never held whole: the data path writes each stripe as its bytes
/// arrive. A body above `max_object_bytes` (EntityTooLarge), one that fails to arrive
/// (IncompleteBody, or the signature error of a streaming upload), or one unlike its
/// Content-Length, Content-MD5 or checksum (IncompleteBody, BadDigest) leaves nothing stored.
pub async fn write_body(
    service: &LowtailS3,
    body: Option<StreamingBlob>,
    claims: BodyClaims<'_>,
    ack: WriteAck,
) -> S3Result<WrittenBody> {
    let limit = service.options.max_object_bytes;
    let declared = DeclaredBody::new(claims.content_length, claims.content_md5, limit)?;
    let declared_bytes = claims.content_length.and_then(|length| u64::try_from(length).ok());
    let mut tally = BodyTally::new(claims.checksum.as_ref(), declared_bytes);
    let idle = service.options.body_idle_timeout;
    let written = service.data.write_stream(tallied(body, limit, idle, &mut tally), ack).await;
    let written = match written {
        Ok(written) => written,
        // The body's own failure is what the client needs to hear, not the write it stopped.
        Err(error) => return Err(tally.take_error().unwrap_or_else(|| from_data(error))),
    };
    tally.finish().await;
    let checksum = declared.check(&tally).and_then(|()| match (&claims.checksum, tally.take_checksum_digest()) {
        (Some(checksum), Some(digest)) => {
            // The trailers of an aws-chunked body are known once the body has been read.
            let trailers = claims.trailers.and_then(TrailingHeaders::take);
            checksum.verify(&digest, trailers.as_ref()).map(Some)
        }
        _ => Ok(None),
    });
    match checksum {
        Ok(checksum) => Ok(WrittenBody { etag: tally.etag(), size_bytes: tally.size_bytes(), checksum, written }),
        Err(error) => {
            release(service, &written.layout).await;
            Err(error)
        }
    }
}

/// The label a write of `(bucket, key, part)` puts on its units (`data::descriptor`), so that
/// its record can be rebuilt from the nodes: the declared size, the content type, user metadata
/// and headers, and the algorithm of its checksum.
pub fn object_label(
    (bucket, key, part): (&str, &str, Option<crate::labels::PartOf>),
    size_bytes: Option<u64>,
    (content_type, user_metadata, headers): (&Option<String>, &BTreeMap<String, String>, &meta::ContentHeaders),
    checksum: Option<meta::ChecksumAlgorithm>,
) -> serde_json::Value {
    crate::labels::WriteLabel::Object(Box::new(crate::labels::ObjectLabel {
        bucket: bucket.to_string(),
        key: key.to_string(),
        part,
        size_bytes,
        content_type: content_type.clone(),
        user_metadata: user_metadata.clone(),
        headers: headers.clone(),
        checksum,
        started_ms: super::timestamps::now_ms(),
        write_id: rand::random(),
    }))
    .to_value()
}

/// When writes to `bucket` are acknowledged; NoSuchBucket if it does not exist (asked before a
/// body is read, so a request into a missing bucket writes nothing).
/// A rule set on the bucket (`lowtail admin bucket ack`) comes first, then its profile's.
pub async fn bucket_write_ack(service: &LowtailS3, bucket: &str) -> S3Result<WriteAck> {
    let stored = service.meta.get_bucket(bucket).await.map_err(from_meta)?.write_ack;
    // The request's profile (its class's, within the class scope every write runs in), else the
    // bucket's.
    let profile = crate::profiles::active()
        .or_else(|| service.options.profiles.as_ref().and_then(|profiles| profiles.for_bucket(bucket)));
    Ok(match (stored, profile.and_then(|active| active.profile.write_ack)) {
        (WriteAck::All, Some(AckAt::K)) => WriteAck::K,
        (WriteAck::All, Some(AckAt::KPlusOne)) => WriteAck::KPlusOne,
        (stored, _) => stored,
    })
}

/// The header naming the write ack rule a write was acknowledged under (its bucket's own rule, else
/// its profile's): `all`, `k+1` or `k`.
pub const WRITE_ACK_HEADER: &str = "x-lowtail-write-ack";

/// Adds the redundancy headers of a write's acknowledgement under `ack` to its response.
pub fn with_redundancy<T>(mut response: S3Response<T>, redundancy: Redundancy, ack: WriteAck) -> S3Response<T> {
    response.headers.insert(WRITE_ACK_HEADER, hyper::header::HeaderValue::from_static(ack.name()));
    let state = redundancy.state();
    response.headers.insert(FAILURES_TOLERATED_HEADER, hyper::header::HeaderValue::from(redundancy.failures_tolerated));
    response.headers.insert(REDUNDANCY_HEADER, hyper::header::HeaderValue::from_static(state));
    response
}

/// `x-amz-meta-*` names lower-cased, as HTTP header names are case-insensitive; MetadataTooLarge
/// beyond [`MAX_USER_METADATA_BYTES`], before anything is stored.
pub fn user_metadata(metadata: Option<Metadata>) -> S3Result<BTreeMap<String, String>> {
    let metadata: BTreeMap<String, String> =
        metadata.unwrap_or_default().into_iter().map(|(name, value)| (name.to_ascii_lowercase(), value)).collect();
    let bytes: usize = metadata.iter().map(|(name, value)| name.len() + value.len()).sum();
    if bytes > MAX_USER_METADATA_BYTES {
        return Err(s3(
            S3ErrorCode::MetadataTooLarge,
            format!("user metadata of {bytes} bytes exceeds the limit of {MAX_USER_METADATA_BYTES}"),
        ));
    }
    Ok(metadata)
}

/// The Content-Encoding to keep: without `aws-chunked`, which describes how this request's body
/// was sent, not the object (S3 drops it too); none if nothing else was named.
pub fn stored_content_encoding(sent: Option<String>) -> Option<String> {
    let sent = sent?;
    let kept: Vec<&str> = sent
        .split(',')
        .map(str::trim)
        .filter(|coding| !coding.is_empty() && !coding.eq_ignore_ascii_case("aws-chunked"))
        .collect();
    (!kept.is_empty()).then(|| kept.join(", "))
}

/// The standard headers of a PUT, CopyObject or CreateMultipartUpload input (distinct s3s types
/// with the same field names), as the metadata store keeps them.
macro_rules! content_headers {
    ($input:expr) => {
        ::meta::ContentHeaders {
            cache_control: $input.cache_control,
            content_disposition: $input.content_disposition,
            content_encoding: $crate::s3::write::stored_content_encoding($input.content_encoding),
            content_language: $input.content_language,
            expires_ms: $input.expires.map($crate::s3::timestamps::timestamp_ms),
        }
    };
}
pub(super) use content_headers;
