//! The S3 side of a load run: the bucket, loading the objects a workload reads, and the checked GET
//! each request becomes.
//!
//! Owns: [`prepare`] (HEAD each object, PUT the missing or wrongly sized ones, a bounded number at a
//! time) and [`S3Fetch`] (a GET of the requested range, its length checked, its bytes on every
//! `verify_every`-th request). Must not: retry (the clients have retries off), keep object bodies
//! beyond the requests in flight, or decide when requests are sent (the executor does).

use crate::executor::{Fetch, FetchFuture, Fetched};
use crate::objects::{object_bytes, object_key};
use aws_sdk_s3::primitives::ByteStream;
use bench::s3_client::{S3Endpoint, error_text};
use futures_util::StreamExt;
use model::{ObjectId, ReadRequest};
use std::collections::BTreeMap;
use tokio::time::Instant;

/// Objects loaded at once by [`prepare`]: enough to keep a loopback cluster busy, few enough that
/// bodies in memory stay under `PREPARE_CONCURRENCY × max_object_bytes`.
pub const PREPARE_CONCURRENCY: usize = 16;

/// What [`prepare`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PrepareStats {
    /// Distinct objects the workload reads.
    pub objects: u64,
    /// Objects written by this run.
    pub uploaded: u64,
    /// Objects already present with the right size, left alone.
    pub present: u64,
    /// Bytes written.
    pub bytes_uploaded: u64,
}

/// Creates `bucket` through `client` unless it exists.
pub async fn ensure_bucket(client: &aws_sdk_s3::Client, bucket: &str) -> anyhow::Result<()> {
    if client.head_bucket().bucket(bucket).send().await.is_ok() {
        return Ok(());
    }
    client
        .create_bucket()
        .bucket(bucket)
        .send()
        .await
        .map_err(|error| anyhow::anyhow!("cannot create bucket {bucket}: {}", error_text(&error)))?;
    Ok(())
}

/// Checks that every gateway after the first (`clients[1..]`, one per `gateways` entry) serves
/// `bucket`, which was made through the first: a gateway that is down, or serves another cluster,
/// fails the run before any request, naming itself.
pub async fn check_bucket_everywhere(
    clients: &[aws_sdk_s3::Client],
    gateways: &[S3Endpoint],
    bucket: &str,
) -> anyhow::Result<()> {
    assert_eq!(clients.len(), gateways.len(), "a client per gateway");
    for (client, gateway) in clients.iter().zip(gateways).skip(1) {
        client.head_bucket().bucket(bucket).send().await.map_err(|error| {
            anyhow::anyhow!(
                "gateway {} does not serve bucket {bucket}, which {} does ({}): every gateway must be up \
                 and serve the same cluster",
                gateway.url,
                gateways[0].url,
                error_text(&error)
            )
        })?;
    }
    Ok(())
}

/// Loads every object of `sizes` into `bucket`, spreading the writes round-robin over `clients`;
/// an object already there with its size is skipped (so a second run over the same objects only
/// HEADs). `on_object` is called once per object (a progress bar). Fails on the first PUT that fails:
/// a run over missing objects would only measure errors.
pub async fn prepare(
    clients: &[aws_sdk_s3::Client],
    bucket: &str,
    seed: u64,
    sizes: &BTreeMap<ObjectId, u64>,
    on_object: &(dyn Fn() + Sync),
) -> anyhow::Result<PrepareStats> {
    assert!(!clients.is_empty(), "at least one gateway");
    let mut stats = PrepareStats { objects: sizes.len() as u64, ..PrepareStats::default() };
    let mut writes = futures_util::stream::iter(sizes.iter().enumerate())
        .map(|(index, (&object, &size))| {
            let client = clients[index % clients.len()].clone();
            async move { load_object(&client, bucket, seed, object, size).await }
        })
        .buffer_unordered(PREPARE_CONCURRENCY);
    while let Some(written) = writes.next().await {
        match written? {
            Some(bytes) => {
                stats.uploaded += 1;
                stats.bytes_uploaded += bytes;
            }
            None => stats.present += 1,
        }
        on_object();
    }
    debug_assert_eq!(stats.uploaded + stats.present, stats.objects);
    Ok(stats)
}

/// Writes one object unless present with `size` bytes; returns the bytes written (`None`: present).
async fn load_object(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    seed: u64,
    object: ObjectId,
    size: u64,
) -> anyhow::Result<Option<u64>> {
    let key = object_key(seed, object);
    if let Ok(head) = client.head_object().bucket(bucket).key(&key).send().await
        && head.content_length() == i64::try_from(size).ok()
    {
        return Ok(None);
    }
    let body = ByteStream::from(object_bytes(seed, object, size));
    client
        .put_object()
        .bucket(bucket)
        .key(&key)
        .body(body)
        .send()
        .await
        .map_err(|error| anyhow::anyhow!("cannot load {bucket}/{key} ({size} bytes): {}", error_text(&error)))?;
    Ok(Some(size))
}

/// A request as an S3 GET of its object's first `length` bytes (with `Range` when that is not the
/// whole object), through the client of its gateway.
pub struct S3Fetch {
    /// One client per gateway, by gateway index.
    pub clients: Vec<aws_sdk_s3::Client>,
    /// The bucket.
    pub bucket: String,
    /// Seed of the object contents.
    pub seed: u64,
    /// Each object's loaded size.
    pub sizes: BTreeMap<ObjectId, u64>,
    /// Every request whose id is a multiple of this has its bytes compared (every one its length).
    pub verify_every: u64,
}

impl Fetch for S3Fetch {
    fn fetch(&self, request: ReadRequest, gateway: usize) -> FetchFuture {
        let client = self.clients[gateway].clone();
        let bucket = self.bucket.clone();
        let key = object_key(self.seed, request.object);
        let object_size = self.sizes.get(&request.object).copied().unwrap_or(request.length);
        let verify = request.id.0.is_multiple_of(self.verify_every);
        let seed = self.seed;
        Box::pin(async move {
            let mut get = client.get_object().bucket(&bucket).key(&key);
            if request.length < object_size {
                get = get.range(format!("bytes=0-{}", request.length - 1));
            }
            let body = match get.send().await {
                Ok(response) => response.body.collect().await.map_err(|error| format!("GET {key}: body: {error}")),
                Err(error) => Err(format!("GET {key}: {}", error_text(&error))),
            };
            let last_byte = Instant::now();
            let outcome = body.and_then(|body| {
                let body = body.into_bytes();
                if body.len() as u64 != request.length {
                    return Err(format!("GET {key}: {} bytes, {} requested", body.len(), request.length));
                }
                if verify && body[..] != object_bytes(seed, request.object, request.length)[..] {
                    return Err(format!("GET {key}: the bytes differ from those loaded"));
                }
                Ok(())
            });
            Fetched { last_byte, outcome }
        })
    }
}
