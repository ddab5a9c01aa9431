//! The client of lowtail's batch read (`POST /{bucket}?lowtail-batch-get`, docs/s3.md): the
//! request signed with SigV4 by `aws-sigv4` (the AWS SDK's own signer), sent over plain HTTP, and
//! the `multipart/mixed` answer split into its parts. Used by `lowtail get-batch`, the load
//! generator's batch mode and the end-to-end tests. Must not interpret a part's status beyond
//! reporting it.

use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};
use aws_sigv4::http_request::{PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// The query parameter of the batch read.
pub const BATCH_GET_QUERY: &str = "lowtail-batch-get";
/// Most parts an answer is parsed into (the gateway sends at most 1,000).
const MAX_PARTS: usize = 100_000;
/// Most header lines of one part.
const MAX_PART_HEADERS: usize = 64;

/// What a batch reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchRequest {
    /// These keys, answered in this order.
    Keys(Vec<String>),
    /// The keys a ListObjectsV2 of `prefix` after `start_after` gives, at most `max_keys`.
    Scan {
        /// Keys starting with this.
        prefix: String,
        /// Keys after this.
        start_after: Option<String>,
        /// At most this many (the gateway's default and limit: 1,000).
        max_keys: Option<usize>,
    },
}

impl BatchRequest {
    /// The JSON body.
    pub fn to_json(&self) -> String {
        match self {
            BatchRequest::Keys(keys) => {
                let objects: Vec<_> = keys.iter().map(|key| serde_json::json!({ "key": key })).collect();
                serde_json::json!({ "objects": objects }).to_string()
            }
            BatchRequest::Scan { prefix, start_after, max_keys } => {
                let mut body = serde_json::json!({ "prefix": prefix });
                if let Some(after) = start_after {
                    body["start_after"] = after.clone().into();
                }
                if let Some(max) = max_keys {
                    body["max_keys"] = (*max).into();
                }
                body.to_string()
            }
        }
    }
}

/// One object of an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchPart {
    /// Its key.
    pub key: String,
    /// 200, or the S3 status of its error (404 for a missing key).
    pub status: u16,
    /// Its ETag (quoted, as S3 sends it) when read.
    pub etag: Option<String>,
    /// The S3 error code when not read (`NoSuchKey`, ...).
    pub error_code: Option<String>,
    /// The object's bytes, or the error's message.
    pub body: Bytes,
}

/// A signing client of one gateway's batch read.
#[derive(Clone, Debug)]
pub struct BatchClient {
    endpoint: String,
    access_key: String,
    secret_key: String,
    region: String,
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
}

impl BatchClient {
    /// A client of the gateway at `endpoint` (`http://host:port`) signing with the given key.
    pub fn new(endpoint: &str, access_key: &str, secret_key: &str) -> BatchClient {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        BatchClient {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            access_key: access_key.to_string(),
            secret_key: secret_key.to_string(),
            region: "us-east-1".to_string(),
            client: Client::builder(TokioExecutor::new()).build(connector),
            timeout: Duration::from_secs(120),
        }
    }

    /// The same client signing for `region`.
    pub fn with_region(mut self, region: &str) -> BatchClient {
        self.region = region.to_string();
        self
    }

    /// Reads `request` from `bucket`: every part, in the gateway's order. An answer that is not
    /// 200 is an error carrying the gateway's S3 error document.
    pub async fn get_batch(&self, bucket: &str, request: &BatchRequest) -> anyhow::Result<Vec<BatchPart>> {
        let (content_type, body) = self.send(bucket, request.to_json()).await?;
        parse_multipart(&content_type, &body)
    }

    /// Sends a signed batch request with `body` as it is (tests send bad ones); answers the
    /// content type and body of a 200.
    pub async fn send(&self, bucket: &str, body: String) -> anyhow::Result<(String, Bytes)> {
        let (status, content_type, answer) = self.send_raw(bucket, body).await?;
        if status != 200 {
            bail!("batch read answered {status}: {}", String::from_utf8_lossy(&answer));
        }
        Ok((content_type, answer))
    }

    /// Sends a signed batch request; answers the status, content type and body whatever they are.
    pub async fn send_raw(&self, bucket: &str, body: String) -> anyhow::Result<(u16, String, Bytes)> {
        let uri = format!("{}/{bucket}?{BATCH_GET_QUERY}", self.endpoint);
        let mut request = hyper::Request::post(&uri)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.clone())))
            .context("building the batch request")?;
        self.sign(&mut request, body.as_bytes())?;
        let answer = tokio::time::timeout(self.timeout, async {
            let response = self.client.request(request).await.context("sending the batch request")?;
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let bytes = response.into_body().collect().await.context("reading the batch answer")?.to_bytes();
            anyhow::Ok((status, content_type, bytes))
        })
        .await
        .context("the batch read timed out")??;
        Ok(answer)
    }

    fn sign(&self, request: &mut hyper::Request<Full<Bytes>>, body: &[u8]) -> anyhow::Result<()> {
        let credentials =
            aws_credential_types::Credentials::new(&self.access_key, &self.secret_key, None, None, "lowtail");
        let identity = credentials.into();
        let mut settings = SigningSettings::default();
        // S3 signs the payload's hash in x-amz-content-sha256 (and the gateway requires it).
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("s3")
            .time(SystemTime::now())
            .settings(settings)
            .build()
            .context("signing parameters")?
            .into();
        let uri = request.uri().to_string();
        let headers: Vec<(String, String)> = request
            .headers()
            .iter()
            .filter_map(|(name, value)| Some((name.as_str().to_string(), value.to_str().ok()?.to_string())))
            .collect();
        let signable = SignableRequest::new(
            "POST",
            &uri,
            headers.iter().map(|(name, value)| (name.as_str(), value.as_str())),
            SignableBody::Bytes(body),
        )
        .context("the request cannot be signed")?;
        let (instructions, _signature) = sign(signable, &params).context("signing the request")?.into_parts();
        instructions.apply_to_request_http1x(request);
        Ok(())
    }
}

/// The parts of a `multipart/mixed` batch answer.
pub fn parse_multipart(content_type: &str, body: &[u8]) -> anyhow::Result<Vec<BatchPart>> {
    let boundary = content_type
        .split(';')
        .filter_map(|param| param.trim().strip_prefix("boundary="))
        .next()
        .with_context(|| format!("the answer's content type {content_type:?} names no boundary"))?;
    let opening = format!("--{boundary}\r\n");
    let closing = format!("--{boundary}--\r\n");
    let mut rest = body;
    let mut parts = Vec::new();
    // Each round consumes one part (at least its boundary line): bounded by the body's length.
    while parts.len() < MAX_PARTS {
        if rest == closing.as_bytes() {
            return Ok(parts);
        }
        rest = rest.strip_prefix(opening.as_bytes()).context("a part does not start with the boundary")?;
        let (part, after) = one_part(rest)?;
        parts.push(part);
        rest = after;
    }
    bail!("more than {MAX_PARTS} parts")
}

/// One part's headers and body, and what follows it.
fn one_part(text: &[u8]) -> anyhow::Result<(BatchPart, &[u8])> {
    let mut part = BatchPart { key: String::new(), status: 0, etag: None, error_code: None, body: Bytes::new() };
    let mut length: Option<usize> = None;
    let mut rest = text;
    for _ in 0..MAX_PART_HEADERS {
        let end = rest.windows(2).position(|w| w == b"\r\n").context("a part's header line does not end")?;
        let line = std::str::from_utf8(&rest[..end]).context("a part's header is not UTF-8")?;
        rest = &rest[end + 2..];
        if line.is_empty() {
            let length = length.context("a part has no Content-Length")?;
            anyhow::ensure!(rest.len() >= length + 2, "a part is cut short");
            part.body = Bytes::copy_from_slice(&rest[..length]);
            anyhow::ensure!(&rest[length..length + 2] == b"\r\n", "a part's body does not end with CRLF");
            return Ok((part, &rest[length + 2..]));
        }
        let (name, value) = line.split_once(':').with_context(|| format!("bad part header {line:?}"))?;
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "x-lowtail-key" => {
                part.key = percent_encoding::percent_decode_str(value).decode_utf8().context("a key")?.into_owned();
            }
            "x-lowtail-status" => part.status = value.parse().context("a part's status")?,
            "x-lowtail-error-code" => part.error_code = Some(value.to_string()),
            "etag" => part.etag = Some(value.to_string()),
            "content-length" => length = Some(value.parse().context("a part's Content-Length")?),
            _ => {}
        }
    }
    bail!("a part has more than {MAX_PART_HEADERS} headers")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_split_by_their_lengths_not_by_looking_for_the_boundary() {
        let body = b"--B\r\nx-lowtail-key: a%20b\r\nx-lowtail-status: 200\r\nETag: \"e\"\r\nContent-Length: 7\r\n\r\n--B\r\nxy\r\n\
--B\r\nx-lowtail-key: c\r\nx-lowtail-status: 404\r\nx-lowtail-error-code: NoSuchKey\r\nContent-Length: 2\r\n\r\nno\r\n--B--\r\n";
        let parts = parse_multipart("multipart/mixed; boundary=B", body).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!((parts[0].key.as_str(), parts[0].status, &parts[0].body[..]), ("a b", 200, &b"--B\r\nxy"[..]));
        assert_eq!(parts[0].etag.as_deref(), Some("\"e\""));
        assert_eq!((parts[1].status, parts[1].error_code.as_deref()), (404, Some("NoSuchKey")));
    }

    #[test]
    fn a_cut_answer_is_an_error() {
        let body = b"--B\r\nx-lowtail-key: a\r\nContent-Length: 9\r\n\r\nshort\r\n";
        assert!(parse_multipart("multipart/mixed; boundary=B", body).is_err());
        assert!(parse_multipart("text/plain", b"").is_err());
        let unterminated = b"--B\r\nx-lowtail-key: a\r\nContent-Length: 1\r\n\r\nx\r\n";
        assert!(parse_multipart("multipart/mixed; boundary=B", unterminated).is_err());
    }

    #[test]
    fn requests_are_the_documented_json() {
        let keys = BatchRequest::Keys(vec!["a".into(), "b\"".into()]);
        assert_eq!(keys.to_json(), r#"{"objects":[{"key":"a"},{"key":"b\""}]}"#);
        let scan = BatchRequest::Scan { prefix: "p/".into(), start_after: None, max_keys: Some(5) };
        assert_eq!(scan.to_json(), r#"{"max_keys":5,"prefix":"p/"}"#);
    }
}
