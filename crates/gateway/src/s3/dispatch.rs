//! The S3 operations (through `s3s::S3`) mapped onto object metadata ([`meta::MetaStore`]) and
//! object bytes ([`crate::data::ObjectData`]). Owns the per-operation latency metric and the
//! dispatch: each operation runs inside [`observe`], the ones that move object bytes in their
//! latency class (`request_class`), and is handed to the module of its family (`bucket`, `get`,
//! `put`, `copy`, `delete`, `list`, `multipart`, `tagging`, `attributes`), which owns its S3
//! semantics.
//!
//! Must not: hold an operation's logic (its family module does). The operations as a whole must
//! not touch storage nodes or stripes directly (only through `ObjectData`), decide placement or any
//! other policy, or change anything when they answer with an error (data written for a request that
//! then fails is released).

use std::future::Future;
use std::time::Instant;

use s3s::dto::*;
use s3s::{S3, S3Request, S3Response, S3Result};
use tracing::Instrument;

use super::request_class::{ClassRequest, content_length};
use super::service::LowtailS3;
use super::{attributes, bucket, copy, delete, get, list, multipart, put, tagging};

/// Name of the request latency histogram (seconds), labelled by `operation` and `outcome`.
pub const REQUEST_SECONDS_METRIC: &str = "lowtail_s3_request_seconds";

/// Runs one operation inside a tracing span and records its latency in the request histogram.
async fn observe<T>(operation: &'static str, work: impl Future<Output = S3Result<T>>) -> S3Result<T> {
    let started = Instant::now();
    let result = work.instrument(tracing::info_span!("s3", operation)).await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(error) if error.status_code().is_some_and(|status| status.is_server_error()) => "server_error",
        Err(_) => "client_error",
    };
    metrics::histogram!(REQUEST_SECONDS_METRIC, "operation" => operation, "outcome" => outcome)
        .record(started.elapsed().as_secs_f64());
    match result {
        Err(mut error) => {
            // A client's mistake is not the server's failure: only the latter is worth a warning.
            if outcome == "server_error" {
                tracing::warn!(operation, code = error.code().as_str(), message = error.message(), "request failed");
            } else {
                tracing::debug!(operation, code = error.code().as_str(), message = error.message(), "request failed");
            }
            // The error document names the request, as its x-amz-request-id header does.
            if let Some(id) = super::server::current_request_id() {
                error.set_request_id(id);
            }
            Err(error)
        }
        ok => ok,
    }
}

/// The buckets a copy touches: its destination and, when named, its source's.
fn copied_buckets<'a>(destination: &'a str, source: &'a CopySource) -> Vec<&'a str> {
    match source {
        CopySource::Bucket { bucket, .. } => vec![destination, bucket],
        // Access points and outposts are refused by the copy itself.
        _ => vec![destination],
    }
}

#[async_trait::async_trait]
impl S3 for LowtailS3 {
    async fn list_buckets(&self, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        observe("ListBuckets", bucket::list_buckets(self, req)).await
    }

    async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        observe("CreateBucket", bucket::create_bucket(self, req)).await
    }

    async fn delete_bucket(&self, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
        observe("DeleteBucket", bucket::delete_bucket(self, req)).await
    }

    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        observe("HeadBucket", bucket::head_bucket(self, req)).await
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        observe("GetBucketLocation", bucket::get_bucket_location(self, req)).await
    }

    async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        observe("GetBucketVersioning", bucket::get_bucket_versioning(self, req)).await
    }

    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        let class = ClassRequest::of(&req, &[req.input.bucket.as_str()]);
        let work = put::put_object(self, req);
        observe("PutObject", self.classes.run(&class, |answer| content_length(answer.output.size), work)).await
    }

    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        let class = ClassRequest::of(&req, &[req.input.bucket.as_str()]);
        let work = get::get_object(self, req);
        let moved = |answer: &S3Response<GetObjectOutput>| content_length(answer.output.content_length);
        observe("GetObject", self.classes.run(&class, moved, work)).await
    }

    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        let class = ClassRequest::of(&req, &[req.input.bucket.as_str()]);
        observe("HeadObject", self.classes.run(&class, |_| 0, get::head_object(self, req))).await
    }

    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        let class = ClassRequest::of(&req, &copied_buckets(&req.input.bucket, &req.input.copy_source));
        observe("CopyObject", self.classes.run(&class, |_| 0, copy::copy_object(self, req))).await
    }

    async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        observe("GetObjectTagging", tagging::get_object_tagging(self, req)).await
    }

    async fn get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        observe("GetObjectAttributes", attributes::get_object_attributes(self, req)).await
    }

    async fn put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        observe("PutObjectTagging", tagging::put_object_tagging(self, req)).await
    }

    async fn delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        observe("DeleteObjectTagging", tagging::delete_object_tagging(self, req)).await
    }

    async fn get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        observe("GetBucketTagging", tagging::get_bucket_tagging(self, req)).await
    }

    async fn put_bucket_tagging(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        observe("PutBucketTagging", tagging::put_bucket_tagging(self, req)).await
    }

    async fn delete_bucket_tagging(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        observe("DeleteBucketTagging", tagging::delete_bucket_tagging(self, req)).await
    }

    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        observe("DeleteObject", delete::delete_object(self, req)).await
    }

    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        observe("DeleteObjects", delete::delete_objects(self, req)).await
    }

    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        observe("ListObjects", list::list_objects(self, req)).await
    }

    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        observe("ListObjectsV2", list::list_objects_v2(self, req)).await
    }

    async fn list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        observe("ListObjectVersions", list::list_object_versions(self, req)).await
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        observe("CreateMultipartUpload", multipart::create_multipart_upload(self, req)).await
    }

    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        let class = ClassRequest::of(&req, &[req.input.bucket.as_str()]);
        let sent = content_length(req.input.content_length);
        observe("UploadPart", self.classes.run(&class, |_| sent, multipart::upload_part(self, req))).await
    }

    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let class = ClassRequest::of(&req, &copied_buckets(&req.input.bucket, &req.input.copy_source));
        observe("UploadPartCopy", self.classes.run(&class, |_| 0, multipart::upload_part_copy(self, req))).await
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let class = ClassRequest::of(&req, &[req.input.bucket.as_str()]);
        let work = multipart::complete_multipart_upload(self, req);
        observe("CompleteMultipartUpload", self.classes.run(&class, |_| 0, work)).await
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        observe("AbortMultipartUpload", multipart::abort_multipart_upload(self, req)).await
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        observe("ListMultipartUploads", multipart::list_multipart_uploads(self, req)).await
    }

    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        observe("ListParts", multipart::list_parts(self, req)).await
    }
}
