//! GET and HEAD requests whose `Range` header is not one byte range (`bytes=abc`, `bytes=5-2`,
//! several ranges, another unit). RFC 9110 lets a server ignore such a header and S3 does (200, the
//! whole object), but `s3s` refuses the request while parsing it (400), and the header cannot be
//! removed before that: it is signed. So an `s3s` custom route, which runs after the signature has
//! been verified, takes these requests, drops the header and the (verified) signature, and passes
//! them to a second service over the same `LowtailS3` that has no authentication and that nothing
//! but this route can reach. Owns that detour only; must not answer any other request, or let an
//! unsigned request through.

use hyper::header::{AUTHORIZATION, RANGE};
use hyper::http::Extensions;
use hyper::{HeaderMap, Method, Uri};
use s3s::route::S3Route;
use s3s::service::S3Service;
use s3s::{Body, S3ErrorCode, S3Request, S3Response, S3Result};

use super::auth;
use super::errors::s3;

/// Whether `headers` carry a `Range` that is not one byte range `s3s` can parse.
fn has_unusable_range(headers: &HeaderMap) -> bool {
    headers
        .get(RANGE)
        .is_some_and(|range| !range.to_str().is_ok_and(|range| s3s::dto::Range::parse(range.trim()).is_ok()))
}

/// `uri` without the query parameters of a presigned URL (`X-Amz-*`), already verified.
fn without_presigning(uri: &Uri) -> S3Result<Uri> {
    let Some(query) = uri.query() else { return Ok(uri.clone()) };
    let kept: Vec<&str> = query.split('&').filter(|pair| !pair.starts_with("X-Amz-")).collect();
    let path_and_query =
        if kept.is_empty() { uri.path().to_string() } else { format!("{}?{}", uri.path(), kept.join("&")) };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(
        path_and_query.parse().map_err(|_| s3(S3ErrorCode::InternalError, "could not rebuild the request's URI"))?,
    );
    Uri::from_parts(parts).map_err(|_| s3(S3ErrorCode::InternalError, "could not rebuild the request's URI"))
}

/// The route: GET and HEAD with an unusable `Range`, served by `unauthenticated` without it.
pub struct IgnoreUnusableRange {
    /// The same operations without authentication; reachable only through this route.
    pub unauthenticated: S3Service,
}

#[async_trait::async_trait]
impl S3Route for IgnoreUnusableRange {
    fn is_match(&self, method: &Method, _uri: &Uri, headers: &HeaderMap, _extensions: &mut Extensions) -> bool {
        matches!(*method, Method::GET | Method::HEAD) && has_unusable_range(headers)
    }

    async fn check_access(&self, req: &mut S3Request<Body>) -> S3Result<()> {
        auth::check_signed(req.credentials.as_ref(), &req.uri)
    }

    async fn call(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        tracing::debug!(range = ?req.headers.get(RANGE), "ignoring a Range header that is not one byte range");
        let access_key = req.credentials.as_ref().map(|credentials| credentials.access_key.clone());
        let mut headers = req.headers;
        headers.remove(RANGE);
        headers.remove(AUTHORIZATION);
        let mut request = hyper::Request::new(req.input);
        // The unsigned request keeps its key's latency class entitlement.
        if let Some(access_key) = access_key {
            request.extensions_mut().insert(super::request_class::RoutedAccessKey(access_key));
        }
        *request.method_mut() = req.method;
        *request.uri_mut() = without_presigning(&req.uri)?;
        *request.headers_mut() = headers;
        let response = self.unauthenticated.call(request).await.map_err(|error| {
            s3(S3ErrorCode::InternalError, format!("serving the request without its Range: {error:?}"))
        })?;
        let (parts, body) = response.into_parts();
        let mut answer = S3Response::new(body);
        answer.status = Some(parts.status);
        answer.headers = parts.headers;
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(RANGE, value.parse().unwrap());
        headers
    }

    #[test]
    fn only_ranges_that_are_not_one_byte_range_are_unusable() {
        for unusable in ["bytes=abc", "bytes=5-2", "bytes=0-1,3-4", "items=0-1", "bytes="] {
            assert!(has_unusable_range(&range(unusable)), "{unusable}");
        }
        for usable in ["bytes=0-1", "bytes=5-", "bytes=-3", "bytes=100-200"] {
            assert!(!has_unusable_range(&range(usable)), "{usable}");
        }
        assert!(!has_unusable_range(&HeaderMap::new()));
    }

    #[test]
    fn presigning_parameters_are_dropped_and_others_kept() {
        let uri: Uri = "/b/k?partNumber=1&X-Amz-Signature=ab&X-Amz-Expires=60".parse().unwrap();
        assert_eq!(without_presigning(&uri).unwrap(), "/b/k?partNumber=1");
        let uri: Uri = "/b/k?X-Amz-Signature=ab".parse().unwrap();
        assert_eq!(without_presigning(&uri).unwrap(), "/b/k");
    }
}
