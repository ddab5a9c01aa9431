//! Multipart uploads nobody will finish. A client that crashes mid-upload leaves its parts stored and
//! counted for ever; S3 users set the lifecycle rule `AbortIncompleteMultipartUpload` for exactly
//! this. Here it applies to every bucket: uploads initiated more than `abort_incomplete_uploads_after_s`
//! ago (default 7 days, 0 = never) are aborted in the background, and DeleteBucket on a bucket with no
//! objects aborts its pending uploads instead of refusing (`aws s3 rb --force`, `rclone purge` and
//! `s3cmd rb --recursive` delete the objects, then the bucket).
//!
//! Owns: which uploads to abort, and releasing their parts' bytes. Must not: touch objects, or abort an
//! upload initiated after the cut-off (one that completes or is aborted meanwhile is skipped: the
//! metadata store answers `NoSuchUpload`).

use std::sync::Arc;
use std::time::Duration;

use meta::{MetaError, MetaStore};

use crate::data::ObjectData;
use crate::data::cluster::membership::{BackgroundTask, unix_now_ms};

/// Default of `abort_incomplete_uploads_after_s`: 7 days, the age S3's documentation suggests.
pub const DEFAULT_ABORT_AFTER_S: u64 = 7 * 24 * 3600;
/// Longest wait between two background rounds.
const MAX_ROUND_INTERVAL: Duration = Duration::from_secs(3600);
/// Shortest wait between two background rounds.
const MIN_ROUND_INTERVAL: Duration = Duration::from_secs(1);

/// Aborts the pending uploads of `bucket` initiated before `initiated_before_ms` (all of them with
/// `u64::MAX`) and releases their parts. Returns how many it aborted.
pub async fn abort_uploads(
    meta: &dyn MetaStore,
    data: &dyn ObjectData,
    bucket: &str,
    initiated_before_ms: u64,
) -> Result<u64, MetaError> {
    let mut aborted = 0;
    for upload in meta.list_uploads(bucket, "").await? {
        if upload.initiated_ms >= initiated_before_ms {
            continue;
        }
        match abort_upload(meta, data, bucket, &upload.key, &upload.upload_id).await {
            Ok(()) => aborted += 1,
            // Completed or aborted since the listing: nothing of it is ours to release.
            Err(MetaError::NoSuchUpload(_)) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(aborted)
}

/// Aborts one upload (AbortMultipartUpload, and the aborts above) and releases its parts' bytes.
pub async fn abort_upload(
    meta: &dyn MetaStore,
    data: &dyn ObjectData,
    bucket: &str,
    key: &str,
    upload_id: &str,
) -> Result<(), MetaError> {
    for part in meta.abort_multipart(bucket, key, upload_id).await? {
        if let Err(error) = data.release(&part.layout).await {
            tracing::warn!(%bucket, %key, %error, "could not release a part of an aborted upload; its space leaks");
        }
    }
    Ok(())
}

/// Aborts, every bucket, the uploads older than a set age; see the module documentation.
pub struct UploadExpiry {
    meta: Arc<dyn MetaStore>,
    data: Arc<dyn ObjectData>,
    max_age: Duration,
}

impl UploadExpiry {
    /// Expiry of uploads older than `max_age_s` seconds; `None` when 0 (off).
    pub fn new(meta: Arc<dyn MetaStore>, data: Arc<dyn ObjectData>, max_age_s: u64) -> Option<Self> {
        (max_age_s > 0).then(|| Self { meta, data, max_age: Duration::from_secs(max_age_s) })
    }

    /// One round: every bucket's uploads older than the age, aborted. Returns how many.
    pub async fn round(&self, now_ms: u64) -> Result<u64, MetaError> {
        let cutoff_ms = now_ms.saturating_sub(u64::try_from(self.max_age.as_millis()).unwrap_or(u64::MAX));
        let mut aborted = 0;
        for bucket in self.meta.list_buckets().await? {
            match abort_uploads(self.meta.as_ref(), self.data.as_ref(), &bucket.name, cutoff_ms).await {
                Ok(count) => aborted += count,
                // Deleted since the listing: nothing left to abort.
                Err(MetaError::NoSuchBucket(_)) => {}
                Err(error) => return Err(error),
            }
        }
        if aborted > 0 {
            tracing::info!(
                uploads = aborted,
                max_age_s = self.max_age.as_secs(),
                "aborted incomplete multipart uploads"
            );
            metrics::counter!("lowtail_gateway_uploads_expired_total").increment(aborted);
        }
        Ok(aborted)
    }

    /// Runs rounds every tenth of the age (between a second and an hour) until stopped.
    pub fn spawn(self) -> BackgroundTask {
        let interval = (self.max_age / 10).clamp(MIN_ROUND_INTERVAL, MAX_ROUND_INTERVAL);
        let expiry = Arc::new(self);
        BackgroundTask::periodic("upload-expiry", interval, move || {
            let expiry = Arc::clone(&expiry);
            async move {
                if let Err(error) = expiry.round(unix_now_ms()).await {
                    tracing::warn!(%error, "incomplete uploads not expired this round; tried again next round");
                }
            }
        })
    }
}
