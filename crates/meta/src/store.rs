//! The `MetaStore` trait: every metadata operation the gateway, the repair service and `lowtail up` need,
//! object-safe so callers hold an `Arc<dyn MetaStore>`. Owns the contract (atomicity, errors, ordering);
//! it must not contain backend code.

use async_trait::async_trait;

use std::collections::BTreeMap;

use crate::condition::WriteCondition;
use crate::error::Result;
use crate::types::{
    AccessKeyClass, BucketMeta, Committed, CompletedPart, HistoryPage, Layout, Lease, MultipartCompletion, NodeId,
    NodeInfo, NodeState, ObjectListing, ObjectMeta, PartMeta, StoredProfile, StripeId, StripeMeta, UploadMeta,
    Versioning, WriteAck,
};

/// Cluster metadata. Every mutating call is one atomic, durable transaction: it either happens entirely
/// or returns an error and changes nothing. Times are unix milliseconds passed in by the caller; the store
/// reads no clock. Inputs are validated first (`MetaError::InvalidArgument`).
#[async_trait]
pub trait MetaStore: Send + Sync {
    // ---- buckets ----

    /// Creates a bucket; `BucketAlreadyExists` if the name is taken.
    async fn create_bucket(&self, bucket: BucketMeta) -> Result<()>;
    /// A bucket; `NoSuchBucket` if absent.
    async fn get_bucket(&self, name: &str) -> Result<BucketMeta>;
    /// Sets when writes to bucket `name` are acknowledged and returns the bucket as stored;
    /// `NoSuchBucket` if absent. Writes already acknowledged keep the rule they were written under.
    async fn set_bucket_write_ack(&self, name: &str, write_ack: WriteAck) -> Result<BucketMeta>;
    /// Sets the latency class (1-based) of requests to bucket `name`, or clears it (`None`), and
    /// returns the bucket as stored; `NoSuchBucket` if absent, `InvalidArgument` for a class outside
    /// `1..=validate::MAX_CLASS`.
    async fn set_bucket_class(&self, name: &str, class: Option<u8>) -> Result<BucketMeta>;
    /// Names the profile that serves bucket `name`'s requests (`class` `None`) or one latency
    /// class's requests to it (`Some(class)`, 1-based), or clears it (`profile` `None`: the
    /// bucket's profile for a class, the cluster's default for the bucket), and returns the bucket
    /// as stored; `NoSuchBucket` if absent, `InvalidArgument` for a profile not stored (checked
    /// atomically with the change) or a class outside `1..=validate::MAX_CLASS`.
    async fn set_bucket_profile(&self, name: &str, class: Option<u8>, profile: Option<&str>) -> Result<BucketMeta>;
    /// Replaces bucket `name`'s tags (empty: removes them) and returns the bucket as stored;
    /// `NoSuchBucket` if absent.
    async fn set_bucket_tags(&self, name: &str, tags: BTreeMap<String, String>) -> Result<BucketMeta>;
    /// Sets bucket `name`'s versioning to `Enabled` or `Suspended` and returns the bucket;
    /// `InvalidArgument` for `Unversioned` (a bucket never goes back), `NoSuchBucket` if absent.
    async fn set_bucket_versioning(&self, name: &str, versioning: Versioning) -> Result<BucketMeta>;
    /// All buckets, sorted by name.
    async fn list_buckets(&self) -> Result<Vec<BucketMeta>>;
    /// Deletes a bucket; `BucketNotEmpty` if it holds any object or multipart upload (checked atomically
    /// with the delete).
    async fn delete_bucket(&self, name: &str) -> Result<()>;

    // ---- objects ----

    /// Writes an object's metadata, replacing any previous version, and returns the replaced version (its
    /// layout is garbage the caller collects).
    async fn put_object(&self, bucket: &str, key: &str, meta: ObjectMeta) -> Result<Option<ObjectMeta>> {
        let committed = self.put_object_if(bucket, key, meta, &WriteCondition::default()).await?;
        Ok(committed.released.into_iter().next())
    }
    /// Writes an object as its key's newest version, if `condition` holds for the object the key
    /// holds, checked in the transaction that writes (`PreconditionFailed`, or `NoSuchKey` for a
    /// condition that needs an object; nothing is written otherwise). In an unversioned bucket it
    /// replaces the key's object; in a versioned one the store stamps it with a new version
    /// (`meta.version` is ignored) and keeps the older ones (a suspended bucket's write replaces
    /// the `null` version). Returns the version written and what it released.
    async fn put_object_if(
        &self,
        bucket: &str,
        key: &str,
        meta: ObjectMeta,
        condition: &WriteCondition,
    ) -> Result<Committed>;
    /// An object's metadata; `NoSuchKey` if absent.
    async fn get_object(&self, bucket: &str, key: &str) -> Result<ObjectMeta>;
    /// Deletes an object and returns what was removed (`None` if there was nothing: S3 deletes of absent
    /// keys succeed).
    /// In a versioned bucket it adds a delete marker stamped at time 0 (S3's deletes use
    /// [`MetaStore::delete_object_if`] with their time).
    async fn delete_object(&self, bucket: &str, key: &str) -> Result<Option<ObjectMeta>> {
        let committed = self.delete_object_if(bucket, key, &WriteCondition::default(), 0).await?;
        Ok(committed.released.into_iter().next())
    }
    /// Deletes the key's object if `condition` holds, checked in the transaction that deletes (as
    /// [`MetaStore::put_object_if`]). In a versioned bucket it adds a delete marker as the key's
    /// newest version, last modified at `at_ms` (a suspended bucket's replaces the `null`
    /// version). Returns the marker written (the default stamp when unversioned) and what it
    /// released.
    async fn delete_object_if(
        &self,
        bucket: &str,
        key: &str,
        condition: &WriteCondition,
        at_ms: u64,
    ) -> Result<Committed>;
    /// Deletes the version `version_id` of the key (`null` names the null version) if
    /// `condition` holds for it, making the newest remaining version current; returns it (its
    /// layout is garbage), `None` when there is no such version. `InvalidArgument` for an id the
    /// store could not have given.
    async fn delete_version(
        &self,
        bucket: &str,
        key: &str,
        version_id: &str,
        condition: &WriteCondition,
    ) -> Result<Option<ObjectMeta>>;
    /// The version `version_id` of the key, a delete marker included; `NoSuchVersion` if absent.
    async fn get_version(&self, bucket: &str, key: &str, version_id: &str) -> Result<ObjectMeta>;
    /// Every version of the key, newest first, delete markers included.
    async fn key_versions(&self, bucket: &str, key: &str) -> Result<Vec<ObjectMeta>>;
    /// Replaces the tags of the object `bucket/key` holds (empty: removes them), keeping everything
    /// else, and returns the record written; `NoSuchKey` if absent.
    async fn set_object_tags(&self, bucket: &str, key: &str, tags: BTreeMap<String, String>) -> Result<ObjectMeta>;
    /// Moves an object's bytes: replaces its layout with `layout` only if its record is still exactly
    /// `expected` (compaction, which must never undo a write that came after it read the record).
    /// Everything else (size, ETag, times, metadata) is kept. Returns the record written; `Conflict`
    /// when the object changed or is gone, and then nothing was written.
    async fn move_object(&self, bucket: &str, key: &str, expected: &ObjectMeta, layout: Layout) -> Result<ObjectMeta>;
    /// One page of the keys of `bucket` after `after`, each with its whole history (every version,
    /// newest first, delete markers included), about `max_versions` versions in all but never a
    /// key split across pages; each page is one consistent read, so a version that moves between
    /// current and noncurrent is listed once. What the collectors take references from.
    async fn list_histories(&self, bucket: &str, after: Option<&str>, max_versions: usize) -> Result<HistoryPage>;
    /// One page of a ListObjectsV2 listing.
    async fn list_objects(&self, bucket: &str, query: &crate::types::ListObjectsQuery) -> Result<ObjectListing>;

    // ---- stripes ----

    /// A new stripe id, never handed out before in this cluster (increasing, not necessarily dense).
    async fn allocate_stripe_id(&self) -> Result<StripeId>;
    /// Stores a new stripe (version set to 1) and indexes it by node; `Conflict` if the id is taken.
    async fn create_stripe(&self, stripe: StripeMeta) -> Result<StripeMeta>;
    /// A stripe; `NoSuchStripe` if absent.
    async fn get_stripe(&self, id: StripeId) -> Result<StripeMeta>;
    /// Replaces a stripe if its stored version is `expected_version` (`Conflict` otherwise), bumps the
    /// version and updates the node index in the same transaction. Returns the stored stripe.
    async fn update_stripe(&self, id: StripeId, expected_version: u64, stripe: StripeMeta) -> Result<StripeMeta>;
    /// Deletes a stripe and its index entries; returns it.
    async fn delete_stripe(&self, id: StripeId) -> Result<StripeMeta>;
    /// Up to `limit` stripes with ids greater than `after` (all from the start when `None`), ascending.
    async fn list_stripes(&self, after: Option<StripeId>, limit: usize) -> Result<Vec<StripeMeta>>;
    /// Up to `limit` ids of stripes with a unit on `node`, greater than `after`, ascending (through the
    /// node index: cost proportional to the answer, not to the number of stripes).
    async fn stripes_on_node(&self, node: NodeId, after: Option<StripeId>, limit: usize) -> Result<Vec<StripeId>>;
    /// Up to `limit` ids of under-redundant stripes (with `missing_units`), greater than `after`,
    /// ascending. The index is kept by `create_stripe`, `update_stripe` and `delete_stripe` in the
    /// same transaction as the record, so no stripe committed with a missing unit can be absent.
    async fn under_redundant_stripes(&self, after: Option<StripeId>, limit: usize) -> Result<Vec<StripeId>>;

    // ---- nodes ----

    /// Registers a node or replaces its record.
    async fn register_node(&self, node: NodeInfo) -> Result<()>;
    /// A node; `NoSuchNode` if absent.
    async fn get_node(&self, id: NodeId) -> Result<NodeInfo>;
    /// All nodes, by id.
    async fn list_nodes(&self) -> Result<Vec<NodeInfo>>;
    /// Records a heartbeat at `now_ms` (never moves the time backwards).
    async fn heartbeat(&self, id: NodeId, now_ms: u64) -> Result<NodeInfo>;
    /// Sets a node's membership state. Marking a node Down that was not Down dates `down_since_ms`
    /// at `now_ms`; any other state clears it.
    async fn set_node_state(&self, id: NodeId, state: NodeState, now_ms: u64) -> Result<NodeInfo>;
    /// Records that node `id`'s units are being checked since `since_ms` (`NodeInfo::checking_since_ms`);
    /// a check already under way keeps its start.
    async fn set_node_checking(&self, id: NodeId, since_ms: u64) -> Result<NodeInfo>;
    /// Records the data directory the cluster admitted on node `id` (`NodeInfo::directory`) and ends
    /// its check (`checking_since_ms` cleared), in one transaction.
    async fn set_node_directory(&self, id: NodeId, directory: crate::types::AdmittedDirectory) -> Result<NodeInfo>;

    // ---- multipart uploads ----

    /// Starts a multipart upload of `upload.key` into `upload.bucket`; the store allocates the upload id
    /// (the `upload_id` passed in is ignored) and returns the stored record.
    async fn create_multipart(&self, upload: UploadMeta) -> Result<UploadMeta>;
    /// The upload; `NoSuchUpload` if absent or for another key.
    async fn get_multipart(&self, bucket: &str, key: &str, upload_id: &str) -> Result<UploadMeta>;
    /// Stores a part, replacing a part of the same number, and returns the replaced part (garbage).
    async fn put_part(&self, bucket: &str, key: &str, upload_id: &str, part: PartMeta) -> Result<Option<PartMeta>>;
    /// The upload's parts, sorted by part number.
    async fn list_parts(&self, bucket: &str, key: &str, upload_id: &str) -> Result<Vec<PartMeta>>;
    /// The bucket's uploads whose key starts with `prefix`, sorted by key, then initiation, then id.
    async fn list_uploads(&self, bucket: &str, prefix: &str) -> Result<Vec<UploadMeta>>;
    /// Atomically checks that every named part exists with the given ETag (`InvalidPart`) in ascending
    /// order (`InvalidPartOrder`) and that `condition` holds for the object the key holds (as
    /// [`MetaStore::put_object_if`]), writes `object` (whose layout the caller built from the
    /// parts), and removes the upload and all its parts.
    async fn complete_multipart(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
        object: ObjectMeta,
        condition: &WriteCondition,
    ) -> Result<MultipartCompletion>;
    /// Removes the upload and its parts; returns the parts (garbage).
    async fn abort_multipart(&self, bucket: &str, key: &str, upload_id: &str) -> Result<Vec<PartMeta>>;

    // ---- access keys ----

    /// Sets the best latency class (1-based) requests signed with `access_key` may run in, or
    /// removes the key's entry (`None`; removing an absent entry succeeds). `InvalidArgument` for a
    /// malformed key or a class outside `1..=validate::MAX_CLASS`.
    async fn set_access_key_class(&self, access_key: &str, class: Option<u8>) -> Result<()>;
    /// The class entitlement stored for `access_key`, `None` if it has none.
    async fn get_access_key_class(&self, access_key: &str) -> Result<Option<u8>>;
    /// Every stored class entitlement, sorted by access key.
    async fn list_access_key_classes(&self) -> Result<Vec<AccessKeyClass>>;

    // ---- profiles ----

    /// Stores a named profile, replacing one of that name.
    async fn put_profile(&self, profile: StoredProfile) -> Result<()>;
    /// Every stored profile, sorted by name.
    async fn list_profiles(&self) -> Result<Vec<StoredProfile>>;
    /// Deletes a named profile; `InvalidArgument` while a bucket names it (checked atomically), and
    /// nothing changes for one not stored.
    async fn delete_profile(&self, name: &str) -> Result<()>;

    // ---- config ----

    /// A cluster-wide setting, `None` if unset.
    async fn get_config(&self, name: &str) -> Result<Option<String>>;
    /// Sets a cluster-wide setting.
    async fn put_config(&self, name: &str, value: &str) -> Result<()>;
    /// Sets a cluster-wide setting unless it is set; returns the value it has afterwards (so two
    /// callers racing with different values both learn the one that stayed).
    async fn put_config_if_absent(&self, name: &str, value: &str) -> Result<String>;

    // ---- leases ----

    /// Claims lease `name` for `holder` until `now_ms + ttl_ms`, atomically: granted when nobody
    /// holds it, its term lapsed by `now_ms`, or `holder` holds it already (a renewal). Returns the
    /// lease as it stands afterwards: `holder` has it exactly when the returned holder is `holder`.
    /// Times are the callers' clocks, so a lease elects one runner for work that stays safe when two
    /// run at once for a while (skew, a holder paused past its term); it is not a lock.
    async fn claim_lease(&self, name: &str, holder: &str, now_ms: u64, ttl_ms: u64) -> Result<Lease>;

    // ---- whole-store copies ----

    /// Up to `limit` (at most 10 000) records with keys after `after` (from the first when `None`),
    /// in key order, as the rules stored them (seals checked and removed): what a metadata snapshot
    /// copies. A damaged record fails the call.
    async fn export_records(&self, after: Option<Vec<u8>>, limit: usize) -> Result<Vec<crate::kv::Entry>>;
    /// Writes `records` (keys and payloads as [`MetaStore::export_records`] gives them) in one
    /// transaction, replacing what those keys held: a rebuild restoring a snapshot. Applies no
    /// rule: the caller vouches for the records' consistency.
    async fn import_records(&self, records: Vec<crate::kv::Entry>) -> Result<()>;

    // ---- integrity ----

    /// The damaged records found so far (on open, where the backend checks every record, and by
    /// reads since); see `integrity`.
    fn damage(&self) -> crate::integrity::DamageReport;
}
