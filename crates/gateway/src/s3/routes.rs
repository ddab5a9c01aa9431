//! The S3 service's custom routes, which `s3s` runs after a request's signature is verified and
//! before its own operations: the batch read (`batch_get`) and the detour for unusable `Range`
//! headers (`unusable_range`). `s3s` takes one route; this one dispatches to the two. Owns the
//! dispatch only; must not answer a request neither route claims, or let an unsigned one through.

use hyper::http::Extensions;
use hyper::{HeaderMap, Method, Uri};
use s3s::route::S3Route;
use s3s::{Body, S3Request, S3Response, S3Result};

use super::batch_get::BatchGet;
use super::unusable_range::IgnoreUnusableRange;

/// Both routes.
pub struct Routes {
    /// `POST /{bucket}?lowtail-batch-get`.
    pub batch_get: BatchGet,
    /// GET and HEAD with a `Range` that is not one byte range.
    pub unusable_range: IgnoreUnusableRange,
}

#[async_trait::async_trait]
impl S3Route for Routes {
    fn is_match(&self, method: &Method, uri: &Uri, headers: &HeaderMap, extensions: &mut Extensions) -> bool {
        BatchGet::is_match(method, uri) || self.unusable_range.is_match(method, uri, headers, extensions)
    }

    async fn check_access(&self, req: &mut S3Request<Body>) -> S3Result<()> {
        if BatchGet::is_match(&req.method, &req.uri) {
            return BatchGet::check_access(req);
        }
        self.unusable_range.check_access(req).await
    }

    async fn call(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        if BatchGet::is_match(&req.method, &req.uri) {
            return self.batch_get.call(req).await;
        }
        self.unusable_range.call(req).await
    }
}
