//! Buckets: ListBuckets, CreateBucket, DeleteBucket (which aborts the pending uploads of a bucket
//! without objects, as S3 does), HeadBucket, GetBucketLocation and GetBucketVersioning (buckets are
//! never versioned). Owns these answers; must not touch objects or their bytes (uploads are aborted
//! through `abandoned_uploads`).

use meta::{BucketMeta, MetaError};
use s3s::dto::{
    Bucket, BucketLocationConstraint, CreateBucketInput, CreateBucketOutput, DeleteBucketInput, DeleteBucketOutput,
    GetBucketLocationInput, GetBucketLocationOutput, GetBucketVersioningInput, GetBucketVersioningOutput,
    HeadBucketInput, HeadBucketOutput, ListBucketsInput, ListBucketsOutput,
};
use s3s::{S3ErrorCode, S3Request, S3Response, S3Result};

use super::abandoned_uploads;
use super::errors::{from_meta, s3};
use super::list::owner;
use super::names::check_bucket_name;
use super::service::LowtailS3;
use super::timestamps::{now_ms, timestamp};
use super::unsupported::refuse_unsupported;

/// Largest `max-buckets` of a ListBuckets (S3's limit).
const MAX_LIST_BUCKETS: i32 = 10_000;

pub async fn list_buckets(
    service: &LowtailS3,
    req: S3Request<ListBucketsInput>,
) -> S3Result<S3Response<ListBucketsOutput>> {
    let input = req.input;
    let max_buckets = match input.max_buckets {
        None => usize::MAX,
        Some(max) if (1..=MAX_LIST_BUCKETS).contains(&max) => max as usize,
        Some(max) => {
            return Err(s3(
                S3ErrorCode::InvalidArgument,
                format!("max-buckets is {max}; it must be between 1 and {MAX_LIST_BUCKETS}"),
            ));
        }
    };
    let prefix = input.prefix.clone().unwrap_or_default();
    let after = input.continuation_token.clone().unwrap_or_default();
    let region_of = |bucket: &BucketMeta| bucket.region.clone().unwrap_or_else(|| service.options.region.clone());
    let mut listed = service.meta.list_buckets().await.map_err(from_meta)?.into_iter().filter(|bucket| {
        bucket.name.starts_with(&prefix)
            && bucket.name > after
            && input.bucket_region.as_ref().is_none_or(|region| *region == region_of(bucket))
    });
    let buckets: Vec<Bucket> = listed
        .by_ref()
        .take(max_buckets)
        .map(|bucket| Bucket {
            name: Some(bucket.name.clone()),
            creation_date: Some(timestamp(bucket.created_ms)),
            bucket_region: Some(region_of(&bucket)),
        })
        .collect();
    // The token is the last name listed: names are unique and listed in order.
    let continuation_token = listed.next().and(buckets.last()).and_then(|bucket| bucket.name.clone());
    let output = ListBucketsOutput {
        buckets: Some(buckets),
        owner: owner(req.credentials.as_ref()),
        continuation_token,
        prefix: input.prefix,
    };
    Ok(S3Response::new(output))
}

pub async fn create_bucket(
    service: &LowtailS3,
    req: S3Request<CreateBucketInput>,
) -> S3Result<S3Response<CreateBucketOutput>> {
    refuse_unsupported(&req.headers)?;
    let name = req.input.bucket;
    check_bucket_name(&name)?;
    let region = req
        .input
        .create_bucket_configuration
        .and_then(|configuration| configuration.location_constraint)
        .map(|constraint| constraint.as_str().to_string())
        .filter(|region| !region.is_empty());
    let requester = req.credentials.as_ref().map(|credentials| credentials.access_key.clone());
    let bucket = BucketMeta {
        versioning: Default::default(),
        tags: Default::default(),
        name: name.clone(),
        created_ms: now_ms(),
        region,
        owner: requester.clone(),
        write_ack: meta::WriteAck::All,
        class: None,
        profile: None,
        class_profiles: Default::default(),
    };
    match service.meta.create_bucket(bucket).await {
        Ok(()) => {}
        Err(MetaError::BucketAlreadyExists(_)) => {
            let existing = service.meta.get_bucket(&name).await.map_err(from_meta)?;
            let code = if existing.owner == requester {
                S3ErrorCode::BucketAlreadyOwnedByYou
            } else {
                S3ErrorCode::BucketAlreadyExists
            };
            return Err(s3(code, format!("bucket {name} already exists")));
        }
        Err(error) => return Err(from_meta(error)),
    }
    let output = CreateBucketOutput { location: Some(format!("/{name}")) };
    Ok(S3Response::new(output))
}

pub async fn delete_bucket(
    service: &LowtailS3,
    req: S3Request<DeleteBucketInput>,
) -> S3Result<S3Response<DeleteBucketOutput>> {
    let bucket = &req.input.bucket;
    // S3 deletes a bucket without objects whatever uploads are pending, aborting them. One
    // begun after this still makes the delete fail with BucketNotEmpty, as an object would.
    let query = meta::ListObjectsQuery { max_keys: 1, ..Default::default() };
    let listing = service.meta.list_objects(bucket, &query).await.map_err(from_meta)?;
    if listing.objects.is_empty() {
        abandoned_uploads::abort_uploads(service.meta.as_ref(), service.data.as_ref(), bucket, u64::MAX)
            .await
            .map_err(from_meta)?;
    }
    service.meta.delete_bucket(bucket).await.map_err(from_meta)?;
    Ok(S3Response::new(DeleteBucketOutput::default()))
}

pub async fn head_bucket(
    service: &LowtailS3,
    req: S3Request<HeadBucketInput>,
) -> S3Result<S3Response<HeadBucketOutput>> {
    let bucket = service.meta.get_bucket(&req.input.bucket).await.map_err(from_meta)?;
    let region = bucket.region.unwrap_or_else(|| service.options.region.clone());
    let mut response = S3Response::new(HeadBucketOutput { bucket_region: Some(region), ..Default::default() });
    // Current SDKs read the bucket's ARN from HeadBucket (s3s 0.14 has no field for it).
    if let Ok(arn) = hyper::header::HeaderValue::from_str(&format!("arn:aws:s3:::{}", bucket.name)) {
        response.headers.insert("x-amz-bucket-arn", arn);
    }
    Ok(response)
}

pub async fn get_bucket_location(
    service: &LowtailS3,
    req: S3Request<GetBucketLocationInput>,
) -> S3Result<S3Response<GetBucketLocationOutput>> {
    let bucket = service.meta.get_bucket(&req.input.bucket).await.map_err(from_meta)?;
    // S3 answers an empty constraint for us-east-1.
    let location_constraint = bucket.region.filter(|region| region != "us-east-1").map(BucketLocationConstraint::from);
    Ok(S3Response::new(GetBucketLocationOutput { location_constraint }))
}

/// Buckets are never versioned: S3's answer for a bucket whose versioning was never enabled, a
/// configuration without `Status` (clients such as rclone's purge ask before deleting).
pub async fn get_bucket_versioning(
    service: &LowtailS3,
    req: S3Request<GetBucketVersioningInput>,
) -> S3Result<S3Response<GetBucketVersioningOutput>> {
    service.meta.get_bucket(&req.input.bucket).await.map_err(from_meta)?;
    Ok(S3Response::new(GetBucketVersioningOutput::default()))
}
