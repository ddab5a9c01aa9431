//! The batch read, lowtail's S3 extension for requests of several objects (EC-Store's multi-block
//! reads: a page's images, a range scan): `POST /{bucket}?lowtail-batch-get`, SigV4-signed like
//! any S3 request, with a JSON body naming the objects — `{"objects": [{"key": "a"}, ...]}` — or a
//! scan — `{"prefix": "p/", "start_after": "p/0042", "max_keys": 10}` (ListObjectsV2's keys, read
//! in the same call). The answer is `200` with a `multipart/mixed` body streamed in request (or
//! key) order, one part per object with its own status: `x-lowtail-status: 200` with the bytes,
//! `ETag`, `Last-Modified` and `Content-Type`, or `404` (`x-lowtail-error-code: NoSuchKey`) and
//! an error part for a read that failed. Not atomic: each part is one consistent version of its
//! object, and its ETag says which.
//!
//! The batch runs in the request's latency class (`request_class`), its reads included.
//!
//! Owns the route, its request format, limits and response encoding. Must not read bytes except
//! through [`ObjectData::read_batch`] or decide how they are read. `docs/s3.md` documents it.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::StreamExt;
use hyper::{HeaderMap, Method, Uri};
use meta::{ListObjectsQuery, MetaStore, ObjectMeta};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use s3s::dto::{StreamingBlob, TimestampFormat};
use s3s::{Body, S3ErrorCode, S3Request, S3Response, S3Result};
use serde::Deserialize;

use super::errors::{from_data, from_meta, s3};
use super::names::check_key;
use super::request_class::{ClassRequest, ClassResolver};
use super::{S3Options, auth, timestamps};
use crate::data::{DataError, ObjectData};

/// The query parameter that names the operation.
pub const BATCH_GET_QUERY: &str = "lowtail-batch-get";
/// Most objects one batch names (DeleteObjects' limit).
pub const MAX_BATCH_OBJECTS: usize = 1_000;
/// Most bytes of objects one batch reads (its objects are held in memory until their turn).
pub const MAX_BATCH_BYTES: u64 = 256 << 20;
/// Largest request body (1,000 keys of 1,024 bytes, escaped, fit).
const MAX_REQUEST_BYTES: usize = 8 << 20;
/// Object metadata looked up at once.
const PARALLEL_LOOKUPS: usize = 32;
/// Response chunks buffered ahead of the client.
const SEND_AHEAD: usize = 16;
/// What a key's header value escapes: controls, `%`, and everything not ASCII.
const KEY_ESCAPES: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/')
    .remove(b'!')
    .remove(b'*')
    .remove(b'(')
    .remove(b')')
    .remove(b'\'');

/// The request body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchGetRequest {
    objects: Option<Vec<NamedObject>>,
    prefix: Option<String>,
    start_after: Option<String>,
    max_keys: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedObject {
    key: String,
}

/// The answer's header: how many objects the batch names.
pub const BATCH_OBJECTS_HEADER: &str = "x-lowtail-batch-objects";
/// The answer's header: the bytes of the objects it reads (those that exist).
pub const BATCH_BYTES_HEADER: &str = "x-lowtail-batch-bytes";

/// The object bytes an answer says it carries.
fn batch_bytes(answer: &S3Response<Body>) -> u64 {
    let header = answer.headers.get(BATCH_BYTES_HEADER).and_then(|value| value.to_str().ok());
    header.and_then(|value| value.parse().ok()).unwrap_or(0)
}

/// What the batch reads: each key, with its metadata when it exists.
type Named = Vec<(String, Option<ObjectMeta>)>;

/// The route; see the module documentation.
pub struct BatchGet {
    /// Where keys are looked up.
    pub meta: Arc<dyn MetaStore>,
    /// Where bytes are read.
    pub data: Arc<dyn ObjectData>,
    /// The S3 layer's settings (the virtual-host domain).
    pub options: S3Options,
}

impl BatchGet {
    /// Whether a request is a batch read.
    pub fn is_match(method: &Method, uri: &Uri) -> bool {
        *method == Method::POST
            && uri.query().is_some_and(|query| {
                query.split('&').any(|pair| pair.split_once('=').map_or(pair, |(name, _)| name) == BATCH_GET_QUERY)
            })
    }

    /// Only signed requests (the signature itself `s3s` has verified).
    pub fn check_access(req: &S3Request<Body>) -> S3Result<()> {
        auth::check_signed(req.credentials.as_ref(), &req.uri)
    }

    /// Serves a verified batch read, in its latency class (`request_class`): refused before
    /// anything is read when it may not have one.
    pub async fn call(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        let bucket = bucket_of(&req.uri, &req.headers, self.options.virtual_host_domain.as_deref())?;
        let class = ClassRequest::of(&req, &[bucket.as_str()]);
        let resolver = ClassResolver {
            meta: Arc::clone(&self.meta),
            table: Arc::clone(&self.options.classes),
            profiles: self.options.profiles.clone(),
        };
        resolver.run(&class, batch_bytes, self.serve(req, bucket)).await
    }

    /// Serves a batch read of `bucket`.
    async fn serve(&self, mut req: S3Request<Body>, bucket: String) -> S3Result<S3Response<Body>> {
        self.meta.get_bucket(&bucket).await.map_err(from_meta)?;
        let body = req.input.store_all_limited(MAX_REQUEST_BYTES).await.map_err(|error| {
            s3(S3ErrorCode::MaxMessageLengthExceeded, format!("the batch request could not be read: {error}"))
        })?;
        let request: BatchGetRequest = serde_json::from_slice(&body)
            .map_err(|error| s3(S3ErrorCode::InvalidRequest, format!("the batch request is not valid: {error}")))?;
        let named = self.resolve(&bucket, request).await?;
        let bytes: u64 = named.iter().filter_map(|(_, object)| object.as_ref()).map(|o| o.size_bytes).sum();
        if bytes > MAX_BATCH_BYTES {
            return Err(s3(
                S3ErrorCode::InvalidRequest,
                format!("the batch reads {bytes} bytes, more than the {MAX_BATCH_BYTES} one batch may"),
            ));
        }
        metrics::counter!("lowtail_gateway_batch_gets_total").increment(1);
        metrics::counter!("lowtail_gateway_batch_get_objects_total").increment(named.len() as u64);
        let boundary = format!("lowtail-{:032x}", rand::random::<u128>());
        let count = named.len();
        let body = respond(Arc::clone(&self.data), named, boundary.clone());
        let mut answer = S3Response::new(Body::from(body));
        answer.headers.insert(
            hyper::header::CONTENT_TYPE,
            format!("multipart/mixed; boundary={boundary}").parse().expect("a boundary is a header value"),
        );
        answer.headers.insert(BATCH_OBJECTS_HEADER, count.into());
        answer.headers.insert(BATCH_BYTES_HEADER, bytes.into());
        Ok(answer)
    }

    /// The keys a request names, with their metadata (a missing key has none).
    async fn resolve(&self, bucket: &str, request: BatchGetRequest) -> S3Result<Named> {
        let BatchGetRequest { objects, prefix, start_after, max_keys } = request;
        let scan = prefix.is_some() || start_after.is_some() || max_keys.is_some();
        match (objects, scan) {
            (Some(_), true) => Err(s3(
                S3ErrorCode::InvalidRequest,
                "a batch names objects or a scan (prefix, start_after, max_keys), not both",
            )),
            (None, false) => Err(s3(S3ErrorCode::InvalidRequest, "a batch names objects, or a scan by prefix")),
            (Some(objects), false) => self.named(bucket, objects).await,
            (None, true) => self.scanned(bucket, prefix.unwrap_or_default(), start_after, max_keys).await,
        }
    }

    async fn named(&self, bucket: &str, objects: Vec<NamedObject>) -> S3Result<Named> {
        if objects.is_empty() || objects.len() > MAX_BATCH_OBJECTS {
            return Err(s3(
                S3ErrorCode::InvalidRequest,
                format!("a batch names 1 to {MAX_BATCH_OBJECTS} objects, not {}", objects.len()),
            ));
        }
        let mut seen = std::collections::HashSet::with_capacity(objects.len());
        for object in &objects {
            check_key(&object.key)?;
            if !seen.insert(object.key.as_str()) {
                return Err(s3(S3ErrorCode::InvalidRequest, format!("key {:?} is named twice", object.key)));
            }
        }
        let meta = &self.meta;
        futures_util::stream::iter(objects)
            .map(|object| async move {
                match meta.get_object(bucket, &object.key).await {
                    Ok(found) => Ok((object.key, Some(found))),
                    Err(meta::MetaError::NoSuchKey { .. }) => Ok((object.key, None)),
                    Err(error) => Err(from_meta(error)),
                }
            })
            .buffered(PARALLEL_LOOKUPS)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect()
    }

    async fn scanned(
        &self,
        bucket: &str,
        prefix: String,
        start_after: Option<String>,
        max_keys: Option<usize>,
    ) -> S3Result<Named> {
        let max_keys = max_keys.unwrap_or(MAX_BATCH_OBJECTS);
        if !(1..=MAX_BATCH_OBJECTS).contains(&max_keys) {
            return Err(s3(S3ErrorCode::InvalidArgument, format!("max_keys must be 1 to {MAX_BATCH_OBJECTS}")));
        }
        let query = ListObjectsQuery { prefix, delimiter: None, start_after, continuation_token: None, max_keys };
        let listing = self.meta.list_objects(bucket, &query).await.map_err(from_meta)?;
        Ok(listing.objects.into_iter().map(|listed| (listed.key, Some(listed.meta))).collect())
    }
}

/// The bucket a batch read names: the path's one segment, or the host's label under the
/// virtual-host domain.
fn bucket_of(uri: &Uri, headers: &HeaderMap, domain: Option<&str>) -> S3Result<String> {
    let host = headers.get(hyper::header::HOST).and_then(|h| h.to_str().ok()).map(|h| h.split(':').next().unwrap_or(h));
    let virtual_bucket = domain.and_then(|domain| host?.strip_suffix(domain)?.strip_suffix('.'));
    let path = uri.path().trim_start_matches('/');
    let named = match virtual_bucket {
        Some(bucket) if path.is_empty() => bucket.to_string(),
        Some(_) => return Err(s3(S3ErrorCode::InvalidRequest, "a batch read is sent to the bucket, not to a key")),
        None => {
            let segment = path.strip_suffix('/').unwrap_or(path);
            if segment.is_empty() || segment.contains('/') {
                return Err(s3(S3ErrorCode::InvalidRequest, "a batch read is sent to /{bucket}?lowtail-batch-get"));
            }
            percent_encoding::percent_decode_str(segment)
                .decode_utf8()
                .map_err(|_| s3(S3ErrorCode::InvalidBucketName, "the bucket name is not UTF-8"))?
                .into_owned()
        }
    };
    super::names::check_bucket_name(&named)?;
    Ok(named)
}

/// The response body: every object read through one batch, sent in request order. A task reads
/// and sends; the client taking the body paces it, and a client that leaves ends it (dropping the
/// reads still in flight).
fn respond(data: Arc<dyn ObjectData>, named: Named, boundary: String) -> StreamingBlob {
    let (chunks, received) = tokio::sync::mpsc::channel::<Result<Bytes, DataError>>(SEND_AHEAD);
    // Read in the batch's latency class, current here.
    tokio::spawn(crate::classes::carried(async move {
        let present: Vec<usize> = (0..named.len()).filter(|&i| named[i].1.is_some()).collect();
        let layouts: Vec<meta::Layout> =
            present.iter().map(|&i| named[i].1.as_ref().expect("present").layout.clone()).collect();
        let _holds: Vec<_> = layouts.iter().map(|layout| data.hold(layout)).collect();
        let mut read = data.read_batch(&layouts);
        let mut slot_of = vec![None; named.len()];
        for (slot, &index) in present.iter().enumerate() {
            slot_of[index] = Some(slot);
        }
        let mut results: Vec<Option<Result<Vec<Bytes>, DataError>>> = (0..present.len()).map(|_| None).collect();
        // Each object is sent once: the loop ends after the last, or when the client left.
        for (index, (key, object)) in named.iter().enumerate() {
            let part = match (object, slot_of[index]) {
                (Some(object), Some(slot)) => {
                    while results[slot].is_none() {
                        let Some((done, result)) = read.next().await else { break };
                        let slots = results.len();
                        results[slot_or_panic(done, slots)] = Some(result);
                    }
                    let result = results[slot].take().unwrap_or_else(|| Err(DataError::Internal("not read".into())));
                    object_part(&boundary, key, object, result)
                }
                _ => missing_part(&boundary, key),
            };
            for chunk in part {
                if chunks.send(Ok(chunk)).await.is_err() {
                    return;
                }
            }
        }
        let _ = chunks.send(Ok(Bytes::from(format!("--{boundary}--\r\n")))).await;
        // The answer is complete for the client; the batch read goes on until its last task is
        // resolved (late binding's extra reads run to their end) and its records are kept.
        drop(chunks);
        while read.next().await.is_some() {}
    }));
    StreamingBlob::wrap(tokio_stream::wrappers::ReceiverStream::new(received))
}

fn slot_or_panic(slot: usize, slots: usize) -> usize {
    assert!(slot < slots, "the batch read yielded object {slot} of {slots}");
    slot
}

/// A part's head: its boundary line and headers.
fn part_head(boundary: &str, key: &str, status: u16, headers: &[(&str, String)]) -> Bytes {
    let mut head = BytesMut::with_capacity(256);
    head.put_slice(format!("--{boundary}\r\n").as_bytes());
    head.put_slice(format!("x-lowtail-key: {}\r\n", utf8_percent_encode(key, KEY_ESCAPES)).as_bytes());
    head.put_slice(format!("x-lowtail-status: {status}\r\n").as_bytes());
    for (name, value) in headers {
        head.put_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    head.put_slice(b"\r\n");
    head.freeze()
}

/// An object's part: its bytes, or the error that kept them.
fn object_part(boundary: &str, key: &str, object: &ObjectMeta, read: Result<Vec<Bytes>, DataError>) -> Vec<Bytes> {
    let parts = match read {
        Ok(parts) if parts.iter().map(|p| p.len() as u64).sum::<u64>() == object.size_bytes => parts,
        Ok(_) => {
            return error_part(boundary, key, from_data(DataError::Internal("the batch read the wrong length".into())));
        }
        Err(error) => return error_part(boundary, key, from_data(error)),
    };
    let mut modified = Vec::new();
    let _ = timestamps::timestamp(object.last_modified_ms).format(TimestampFormat::HttpDate, &mut modified);
    let headers = [
        ("Content-Type", object.content_type.clone().unwrap_or_else(|| "application/octet-stream".into())),
        ("Content-Length", object.size_bytes.to_string()),
        ("ETag", format!("\"{}\"", object.etag)),
        ("Last-Modified", String::from_utf8_lossy(&modified).into_owned()),
    ];
    let mut out = vec![part_head(boundary, key, 200, &headers)];
    out.extend(parts);
    out.push(Bytes::from_static(b"\r\n"));
    out
}

/// The part of a key that does not exist.
fn missing_part(boundary: &str, key: &str) -> Vec<Bytes> {
    error_part(boundary, key, s3(S3ErrorCode::NoSuchKey, "The specified key does not exist."))
}

/// A part carrying an S3 error: its status, code and message.
fn error_part(boundary: &str, key: &str, error: s3s::S3Error) -> Vec<Bytes> {
    let status = error.code().status_code().map_or(500, |status| status.as_u16());
    let message = Bytes::from(error.message().unwrap_or_default().to_string());
    let headers = [
        ("x-lowtail-error-code", error.code().as_str().to_string()),
        ("Content-Type", "text/plain; charset=utf-8".to_string()),
        ("Content-Length", message.len().to_string()),
    ];
    vec![part_head(boundary, key, status, &headers), message, Bytes::from_static(b"\r\n")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_posts_with_the_query_parameter_match() {
        let matches = |method: Method, uri: &str| BatchGet::is_match(&method, &uri.parse().unwrap());
        assert!(matches(Method::POST, "/b?lowtail-batch-get"));
        assert!(matches(Method::POST, "/b?x=1&lowtail-batch-get="));
        assert!(!matches(Method::GET, "/b?lowtail-batch-get"));
        assert!(!matches(Method::POST, "/b?delete"));
        assert!(!matches(Method::POST, "/b?lowtail-batch-getx"));
    }

    #[test]
    fn the_bucket_is_the_paths_one_segment_or_the_virtual_host() {
        let headers = HeaderMap::new();
        let bucket = |uri: &str| bucket_of(&uri.parse().unwrap(), &headers, None);
        assert_eq!(bucket("/photos?lowtail-batch-get").unwrap(), "photos");
        assert_eq!(bucket("/photos/?lowtail-batch-get").unwrap(), "photos");
        assert!(bucket("/photos/key?lowtail-batch-get").is_err());
        assert!(bucket("/?lowtail-batch-get").is_err());
        let mut headers = HeaderMap::new();
        headers.insert(hyper::header::HOST, "photos.s3.local:9000".parse().unwrap());
        let uri: Uri = "/?lowtail-batch-get".parse().unwrap();
        assert_eq!(bucket_of(&uri, &headers, Some("s3.local")).unwrap(), "photos");
    }

    #[test]
    fn a_missing_key_is_a_404_part_with_the_s3_code() {
        let part: Vec<u8> = missing_part("B", "a b/é").concat();
        let text = String::from_utf8(part).unwrap();
        assert!(text.starts_with("--B\r\nx-lowtail-key: a%20b/%C3%A9\r\nx-lowtail-status: 404\r\n"), "{text}");
        assert!(text.contains("x-lowtail-error-code: NoSuchKey\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\nThe specified key does not exist.\r\n"), "{text}");
    }
}
