//! `KvStore`: the one implementation of every `MetaStore` rule (existence checks, emptiness, CAS on stripe
//! versions, the node index, multipart completion) over any `Backend`. Owns the metadata rules; it must not
//! know how a backend stores bytes or achieves atomicity.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use serde::de::DeserializeOwned;

use crate::condition::WriteCondition;
use crate::error::{MetaError, Result};
use crate::format::{self, prefix_end};
use crate::kv::{Backend, Kv, TxnFuture};
use crate::listing;
use crate::records::{self, get_record, put_record};
use crate::store::MetaStore;
use crate::types::{
    AccessKeyClass, BucketMeta, Committed, CompletedPart, HistoryPage, Layout, Lease, ListObjectsQuery,
    MultipartCompletion, NodeId, NodeInfo, NodeState, ObjectListing, ObjectMeta, PartMeta, StoredProfile, StripeId,
    StripeMeta, UploadMeta, VersionStamp, Versioning, WriteAck,
};
use crate::validate;
use crate::versions::{self, KeyVersions};

/// Most entries `scan_all` reads before giving up (buckets, nodes, uploads of a bucket, parts of an upload
/// are all far fewer in any sane cluster; an unbounded read would be a bug or an attack).
const MAX_SCAN_ALL_ENTRIES: usize = 1_000_000;
/// Most stripes or index entries one `list_stripes` / `stripes_on_node` call returns.
pub const MAX_STRIPE_PAGE: usize = 10_000;

/// The metadata store over a backend. `RedbStore` and `EtcdStore` are this type with their backends.
pub struct KvStore<B: Backend> {
    backend: B,
}

impl<B: Backend> KvStore<B> {
    pub(crate) fn with_backend(backend: B) -> Self {
        KvStore { backend }
    }

    pub(crate) fn backend_ref(&self) -> &B {
        &self.backend
    }
}

/// Runs a transaction body that needs owned copies of some arguments: each attempt clones them, because an
/// optimistic backend may run the body several times.
macro_rules! txn {
    ($backend:expr, $mode:ident, ($($arg:ident),*), |$kv:ident| $body:expr) => {{
        $backend
            .$mode(move |$kv: &mut dyn Kv| -> TxnFuture<'_, _> {
                $(let $arg = $arg.clone();)*
                Box::pin(async move { $body })
            })
            .await
            .map_err(|error| $backend.integrity().doubt(error))
    }};
}

/// Every record in `start..end`; at most `MAX_SCAN_ALL_ENTRIES`.
async fn scan_all<T: DeserializeOwned>(kv: &mut dyn Kv, start: Vec<u8>, end: &[u8]) -> Result<Vec<T>> {
    records::scan_all(kv, start, end, MAX_SCAN_ALL_ENTRIES).await
}

fn range_of(prefix: &[u8]) -> (Vec<u8>, Vec<u8>) {
    // Every prefix of the schema ends in '/', so it has an end.
    (prefix.to_vec(), prefix_end(prefix).expect("schema prefixes end with '/'"))
}

impl<B: Backend> KvStore<B> {
    /// One transaction of [`MetaStore::complete_multipart`]: `None` when the bucket is versioned
    /// and no `sequence` was given.
    async fn try_complete_multipart(
        &self,
        ((bucket, key, upload_id, named), object, condition): (
            (String, String, String, Vec<CompletedPart>),
            ObjectMeta,
            WriteCondition,
        ),
        sequence: Option<u64>,
    ) -> Result<Option<MultipartCompletion>> {
        txn!(self.backend, write, (bucket, key, upload_id, named, object, condition, sequence), |kv| {
            let versioning = require_bucket(kv, &bucket).await?.versioning;
            require_upload(kv, &bucket, &key, &upload_id).await?;
            let stored = upload_parts(kv, &bucket, &upload_id).await?;
            check_named_parts(&named, &stored)?;
            let Some(committed) =
                commit_version(kv, (&bucket, &key, versioning), &object, &condition, sequence).await?
            else {
                return Ok(None);
            };
            kv.delete(format::upload_key(&bucket, &upload_id))?;
            let (start, end) = range_of(&format::part_prefix(&bucket, &upload_id));
            kv.delete_range(start, end)?;
            let previous = committed.released.into_iter().next();
            Ok(Some(MultipartCompletion { previous, version: committed.version, parts: stored }))
        })
    }

    /// Writes `object` (a delete marker when `object.version.delete_marker`) as the key's newest
    /// version.
    async fn write_version(
        &self,
        bucket: &str,
        key: &str,
        object: ObjectMeta,
        condition: &WriteCondition,
    ) -> Result<Committed> {
        self.with_version_sequence((bucket, "a write"), |sequence| {
            let written = (bucket.to_string(), key.to_string(), object.clone(), condition.clone());
            self.try_write_version(written, sequence)
        })
        .await
    }

    /// Runs `attempt` (one transaction) until it commits. `None` from it means the bucket is
    /// versioned and the write needs a sequence: it is taken from the store's counter outside the
    /// transaction, only then, so an unversioned write costs no counter round trip. The second
    /// attempt has one; a third is needed only if the bucket became versioned between the first
    /// two, and the bound turns more into a Conflict the client retries.
    async fn with_version_sequence<T, Fut>(
        &self,
        (bucket, during): (&str, &str),
        mut attempt: impl FnMut(Option<u64>) -> Fut,
    ) -> Result<T>
    where
        Fut: std::future::Future<Output = Result<Option<T>>>,
    {
        let mut sequence: Option<u64> = None;
        for _attempt in 0..3 {
            match attempt(sequence).await? {
                Some(done) => return Ok(done),
                None => sequence = Some(self.backend.next_id("version").await?),
            }
        }
        Err(MetaError::Conflict(format!("bucket {bucket}'s versioning kept changing during {during}")))
    }

    /// One transaction of [`KvStore::write_version`]: `None` when the bucket is versioned and no
    /// `sequence` was given.
    async fn try_write_version(
        &self,
        (bucket, key, object, condition): (String, String, ObjectMeta, WriteCondition),
        sequence: Option<u64>,
    ) -> Result<Option<Committed>> {
        txn!(self.backend, write, (bucket, key, object, condition, sequence), |kv| {
            let versioning = require_bucket(kv, &bucket).await?.versioning;
            commit_version(kv, (&bucket, &key, versioning), &object, &condition, sequence).await
        })
    }
}

/// Inside a transaction: writes `object` (a delete marker when `object.version.delete_marker`)
/// as the newest version of `key` in `bucket` (whose versioning is given) if `condition` holds;
/// `None`, changing nothing, when the bucket is versioned and no `sequence` was given.
async fn commit_version(
    kv: &mut dyn Kv,
    (bucket, key, versioning): (&str, &str, Versioning),
    object: &ObjectMeta,
    condition: &WriteCondition,
    sequence: Option<u64>,
) -> Result<Option<Committed>> {
    let sequence = match (versioning, sequence) {
        (Versioning::Unversioned, _) => 0,
        (_, Some(sequence)) => sequence,
        (_, None) => return Ok(None),
    };
    if versioning == Versioning::Unversioned {
        // One record, as before versions existed: no history to read or guard.
        let object_key = format::object_key(bucket, key);
        let current: Option<ObjectMeta> = get_record(kv, &object_key).await?;
        condition.check(bucket, key, current.as_ref())?;
        match object.version.delete_marker {
            true if current.is_some() => kv.delete(object_key)?,
            true => {}
            false => put_record(kv, object_key, &ObjectMeta { version: VersionStamp::default(), ..object.clone() })?,
        }
        return Ok(Some(Committed { version: VersionStamp::default(), released: current.into_iter().collect() }));
    }
    let versions = KeyVersions { bucket, key };
    let before = versions.read(kv).await?;
    // What the key reads as now: its current version (absent when that is a delete marker).
    condition.check(bucket, key, before.current.as_ref())?;
    let (after, committed) = before.clone().written(versioning, object.clone(), sequence);
    versions.store(kv, &before, &after)?;
    Ok(Some(committed))
}

/// Checks that every part a completion names was uploaded with the ETag it names.
fn check_named_parts(named: &[CompletedPart], stored: &[PartMeta]) -> Result<()> {
    let by_number: BTreeMap<u16, &PartMeta> = stored.iter().map(|part| (part.part_number, part)).collect();
    for wanted in named {
        match by_number.get(&wanted.part_number) {
            None => {
                return Err(MetaError::InvalidPart { part_number: wanted.part_number, reason: "not uploaded".into() });
            }
            Some(part) if !same_etag(&part.etag, &wanted.etag) => {
                return Err(MetaError::InvalidPart {
                    part_number: wanted.part_number,
                    reason: format!("ETag {:?} does not match the uploaded part's {:?}", wanted.etag, part.etag),
                });
            }
            Some(_) => {}
        }
    }
    Ok(())
}

async fn require_bucket(kv: &mut dyn Kv, bucket: &str) -> Result<BucketMeta> {
    validate::bucket_name(bucket).map_err(|_| MetaError::NoSuchBucket(bucket.to_string()))?;
    get_record(kv, &format::bucket_key(bucket)).await?.ok_or_else(|| MetaError::NoSuchBucket(bucket.to_string()))
}

async fn require_upload(kv: &mut dyn Kv, bucket: &str, key: &str, upload_id: &str) -> Result<UploadMeta> {
    require_bucket(kv, bucket).await?;
    let upload: Option<UploadMeta> = get_record(kv, &format::upload_key(bucket, upload_id)).await?;
    upload.filter(|upload| upload.key == key).ok_or_else(|| MetaError::NoSuchUpload(upload_id.to_string()))
}

async fn upload_parts(kv: &mut dyn Kv, bucket: &str, upload_id: &str) -> Result<Vec<PartMeta>> {
    let (start, end) = range_of(&format::part_prefix(bucket, upload_id));
    scan_all(kv, start, &end).await
}

async fn require_node(kv: &mut dyn Kv, id: NodeId) -> Result<NodeInfo> {
    get_record(kv, &format::node_key(id)).await?.ok_or(MetaError::NoSuchNode(id.0))
}

async fn require_stripe(kv: &mut dyn Kv, id: StripeId) -> Result<StripeMeta> {
    get_record(kv, &format::stripe_key(id)).await?.ok_or(MetaError::NoSuchStripe(id.0))
}

/// Keeps the node → stripe index and the under-redundant index of `stripe` in step with its record,
/// given what the record was before (`None` for a new stripe).
fn index_stripe(kv: &mut dyn Kv, stripe: &StripeMeta, old: Option<&StripeMeta>) -> Result<()> {
    let old_nodes: BTreeSet<NodeId> = old.map(|old| old.placement.iter().copied().collect()).unwrap_or_default();
    let new_nodes: BTreeSet<NodeId> = stripe.placement.iter().copied().collect();
    for &node in old_nodes.difference(&new_nodes) {
        kv.delete(format::node_stripe_key(node, stripe.id))?;
    }
    for &node in new_nodes.difference(&old_nodes) {
        kv.put(format::node_stripe_key(node, stripe.id), Vec::new())?;
    }
    let was_under = old.is_some_and(|old| !old.missing_units.is_empty());
    match (was_under, !stripe.missing_units.is_empty()) {
        (false, true) => kv.put(format::under_redundant_key(stripe.id), Vec::new())?,
        (true, false) => kv.delete(format::under_redundant_key(stripe.id))?,
        _ => {}
    }
    Ok(())
}

/// ETags are compared without the quotes some clients keep.
fn same_etag(a: &str, b: &str) -> bool {
    a.trim_matches('"') == b.trim_matches('"')
}

#[async_trait]
impl<B: Backend> MetaStore for KvStore<B> {
    async fn create_bucket(&self, bucket: BucketMeta) -> Result<()> {
        validate::bucket_name(&bucket.name)?;
        txn!(self.backend, write, (bucket), |kv| {
            let key = format::bucket_key(&bucket.name);
            if kv.get(&key).await?.is_some() {
                return Err(MetaError::BucketAlreadyExists(bucket.name.clone()));
            }
            put_record(kv, key, &bucket)
        })
    }

    async fn get_bucket(&self, name: &str) -> Result<BucketMeta> {
        let name = name.to_string();
        txn!(self.backend, read_point, (name), |kv| require_bucket(kv, &name).await)
    }

    async fn set_bucket_write_ack(&self, name: &str, write_ack: WriteAck) -> Result<BucketMeta> {
        let name = name.to_string();
        txn!(self.backend, write, (name, write_ack), |kv| {
            let mut bucket = require_bucket(kv, &name).await?;
            bucket.write_ack = write_ack;
            put_record(kv, format::bucket_key(&name), &bucket)?;
            Ok(bucket)
        })
    }

    async fn set_bucket_class(&self, name: &str, class: Option<u8>) -> Result<BucketMeta> {
        class.map_or(Ok(()), validate::class)?;
        let name = name.to_string();
        txn!(self.backend, write, (name, class), |kv| {
            let mut bucket = require_bucket(kv, &name).await?;
            bucket.class = class;
            put_record(kv, format::bucket_key(&name), &bucket)?;
            Ok(bucket)
        })
    }

    async fn set_bucket_profile(&self, name: &str, class: Option<u8>, profile: Option<&str>) -> Result<BucketMeta> {
        profile.map_or(Ok(()), validate::profile_name)?;
        class.map_or(Ok(()), validate::class)?;
        let (name, profile) = (name.to_string(), profile.map(str::to_string));
        txn!(self.backend, write, (name, class, profile), |kv| {
            let mut bucket = require_bucket(kv, &name).await?;
            if let Some(profile) = &profile
                && get_record::<StoredProfile>(kv, &format::profile_key(profile)).await?.is_none()
            {
                return Err(MetaError::InvalidArgument(format!("no profile {profile:?}: set it first")));
            }
            match (class, profile.clone()) {
                (None, profile) => bucket.profile = profile,
                (Some(class), Some(profile)) => {
                    bucket.class_profiles.insert(class, profile);
                }
                (Some(class), None) => {
                    bucket.class_profiles.remove(&class);
                }
            }
            put_record(kv, format::bucket_key(&name), &bucket)?;
            Ok(bucket)
        })
    }

    async fn set_bucket_tags(&self, name: &str, tags: BTreeMap<String, String>) -> Result<BucketMeta> {
        validate::tags(&tags)?;
        let name = name.to_string();
        txn!(self.backend, write, (name, tags), |kv| {
            let mut bucket = require_bucket(kv, &name).await?;
            bucket.tags = tags;
            put_record(kv, format::bucket_key(&name), &bucket)?;
            Ok(bucket)
        })
    }

    async fn set_bucket_versioning(&self, name: &str, versioning: Versioning) -> Result<BucketMeta> {
        if versioning == Versioning::Unversioned {
            return Err(MetaError::InvalidArgument("a bucket's versioning is Enabled or Suspended".into()));
        }
        let name = name.to_string();
        txn!(self.backend, write, (name, versioning), |kv| {
            let mut bucket = require_bucket(kv, &name).await?;
            bucket.versioning = versioning;
            put_record(kv, format::bucket_key(&name), &bucket)?;
            Ok(bucket)
        })
    }

    async fn list_buckets(&self) -> Result<Vec<BucketMeta>> {
        txn!(self.backend, read, (), |kv| {
            let (start, end) = range_of(&format::bucket_prefix());
            scan_all(kv, start, &end).await
        })
    }

    async fn delete_bucket(&self, name: &str) -> Result<()> {
        let name = name.to_string();
        txn!(self.backend, write, (name), |kv| {
            require_bucket(kv, &name).await?;
            for prefix in [format::object_prefix(&name), format::upload_prefix(&name), format::version_prefix(&name)] {
                let (start, end) = range_of(&prefix);
                if !kv.scan(&start, &end, 1).await?.is_empty() {
                    return Err(MetaError::BucketNotEmpty(name.clone()));
                }
            }
            // Guards of keys with no versions left are removed with their last version; none should
            // remain, and a bucket made again under this name must not find any.
            let (start, end) = range_of(&format::version_head_prefix(&name));
            kv.delete_range(start, end)?;
            kv.delete(format::bucket_key(&name))
        })
    }

    async fn put_object_if(
        &self,
        bucket: &str,
        key: &str,
        meta: ObjectMeta,
        condition: &WriteCondition,
    ) -> Result<Committed> {
        validate::object_key(key)?;
        validate::tags(&meta.tags)?;
        let meta = ObjectMeta { version: VersionStamp::default(), ..meta };
        self.write_version(bucket, key, meta, condition).await
    }

    async fn delete_version(
        &self,
        bucket: &str,
        key: &str,
        version_id: &str,
        condition: &WriteCondition,
    ) -> Result<Option<ObjectMeta>> {
        validate::object_key(key)?;
        validate::version_id(version_id)?;
        let (bucket, key, version_id, condition) =
            (bucket.to_string(), key.to_string(), version_id.to_string(), condition.clone());
        txn!(self.backend, write, (bucket, key, version_id, condition), |kv| {
            require_bucket(kv, &bucket).await?;
            let versions = KeyVersions { bucket: &bucket, key: &key };
            let before = versions.read(kv).await?;
            condition.check(&bucket, &key, before.find(&version_id))?;
            let (after, removed) = before.clone().without(&version_id);
            if removed.is_some() {
                versions.store(kv, &before, &after)?;
            }
            Ok(removed)
        })
    }

    async fn get_version(&self, bucket: &str, key: &str, version_id: &str) -> Result<ObjectMeta> {
        validate::object_key(key)?;
        let (bucket, key, version_id) = (bucket.to_string(), key.to_string(), version_id.to_string());
        txn!(self.backend, read, (bucket, key, version_id), |kv| {
            require_bucket(kv, &bucket).await?;
            let missing = || MetaError::NoSuchVersion {
                bucket: bucket.clone(),
                key: key.clone(),
                version_id: version_id.clone(),
            };
            if validate::version_id(&version_id).is_err() {
                return Err(missing());
            }
            let history = KeyVersions { bucket: &bucket, key: &key }.read(kv).await?;
            history.find(&version_id).cloned().ok_or_else(missing)
        })
    }

    async fn key_versions(&self, bucket: &str, key: &str) -> Result<Vec<ObjectMeta>> {
        validate::object_key(key)?;
        let (bucket, key) = (bucket.to_string(), key.to_string());
        txn!(self.backend, read, (bucket, key), |kv| {
            require_bucket(kv, &bucket).await?;
            Ok(KeyVersions { bucket: &bucket, key: &key }.read(kv).await?.all())
        })
    }

    async fn get_object(&self, bucket: &str, key: &str) -> Result<ObjectMeta> {
        validate::object_key(key)?;
        let (bucket, key) = (bucket.to_string(), key.to_string());
        txn!(self.backend, read_point, (bucket, key), |kv| {
            require_bucket(kv, &bucket).await?;
            get_record(kv, &format::object_key(&bucket, &key))
                .await?
                .ok_or_else(|| MetaError::NoSuchKey { bucket: bucket.clone(), key: key.clone() })
        })
    }

    async fn delete_object_if(
        &self,
        bucket: &str,
        key: &str,
        condition: &WriteCondition,
        at_ms: u64,
    ) -> Result<Committed> {
        validate::object_key(key)?;
        let marker = ObjectMeta::delete_marker(at_ms);
        self.write_version(bucket, key, marker, condition).await
    }

    async fn set_object_tags(&self, bucket: &str, key: &str, tags: BTreeMap<String, String>) -> Result<ObjectMeta> {
        validate::object_key(key)?;
        validate::tags(&tags)?;
        let (bucket, key) = (bucket.to_string(), key.to_string());
        txn!(self.backend, write, (bucket, key, tags), |kv| {
            require_bucket(kv, &bucket).await?;
            let object_key = format::object_key(&bucket, &key);
            let mut object: ObjectMeta = get_record(kv, &object_key)
                .await?
                .ok_or_else(|| MetaError::NoSuchKey { bucket: bucket.clone(), key: key.clone() })?;
            object.tags = tags;
            put_record(kv, object_key, &object)?;
            Ok(object)
        })
    }

    async fn move_object(&self, bucket: &str, key: &str, expected: &ObjectMeta, layout: Layout) -> Result<ObjectMeta> {
        validate::object_key(key)?;
        let (bucket, key, expected) = (bucket.to_string(), key.to_string(), expected.clone());
        txn!(self.backend, write, (bucket, key, expected, layout), |kv| {
            require_bucket(kv, &bucket).await?;
            let object_key = format::object_key(&bucket, &key);
            let current: Option<ObjectMeta> = get_record(kv, &object_key).await?;
            if current.as_ref() != Some(&expected) {
                return Err(MetaError::Conflict(format!("object {bucket}/{key} changed since it was read")));
            }
            let moved = ObjectMeta { layout: layout.clone(), ..expected.clone() };
            put_record(kv, object_key, &moved)?;
            Ok(moved)
        })
    }

    async fn list_histories(&self, bucket: &str, after: Option<&str>, max_versions: usize) -> Result<HistoryPage> {
        let (bucket, after) = (bucket.to_string(), after.map(str::to_string));
        txn!(self.backend, read, (bucket, after, max_versions), |kv| {
            require_bucket(kv, &bucket).await?;
            versions::list_histories(kv, &bucket, after.as_deref(), max_versions).await
        })
    }

    async fn list_objects(&self, bucket: &str, query: &ListObjectsQuery) -> Result<ObjectListing> {
        let (bucket, query) = (bucket.to_string(), query.clone());
        txn!(self.backend, read, (bucket, query), |kv| {
            require_bucket(kv, &bucket).await?;
            listing::list_objects(kv, &bucket, &query).await
        })
    }

    async fn allocate_stripe_id(&self) -> Result<StripeId> {
        self.backend.next_id("stripe").await.map(StripeId)
    }

    async fn create_stripe(&self, stripe: StripeMeta) -> Result<StripeMeta> {
        validate::stripe(&stripe)?;
        let stripe = StripeMeta { version: 1, ..stripe };
        txn!(self.backend, write, (stripe), |kv| {
            let key = format::stripe_key(stripe.id);
            if kv.get(&key).await?.is_some() {
                return Err(MetaError::Conflict(format!("stripe {} already exists", stripe.id)));
            }
            put_record(kv, key, &stripe)?;
            index_stripe(kv, &stripe, None)?;
            Ok(stripe)
        })
    }

    async fn get_stripe(&self, id: StripeId) -> Result<StripeMeta> {
        txn!(self.backend, read_point, (), |kv| require_stripe(kv, id).await)
    }

    async fn update_stripe(&self, id: StripeId, expected_version: u64, stripe: StripeMeta) -> Result<StripeMeta> {
        if stripe.id != id {
            return Err(MetaError::InvalidArgument(format!("stripe record {} passed to update {id}", stripe.id)));
        }
        validate::stripe(&stripe)?;
        let stripe = StripeMeta { version: expected_version.wrapping_add(1), ..stripe };
        txn!(self.backend, write, (stripe), |kv| {
            let current = require_stripe(kv, id).await?;
            if current.version != expected_version {
                return Err(MetaError::Conflict(format!(
                    "stripe {id} is at version {}, not {expected_version}",
                    current.version
                )));
            }
            put_record(kv, format::stripe_key(id), &stripe)?;
            index_stripe(kv, &stripe, Some(&current))?;
            Ok(stripe)
        })
    }

    async fn delete_stripe(&self, id: StripeId) -> Result<StripeMeta> {
        txn!(self.backend, write, (), |kv| {
            let current = require_stripe(kv, id).await?;
            kv.delete(format::stripe_key(id))?;
            for &node in &current.placement {
                kv.delete(format::node_stripe_key(node, id))?;
            }
            if !current.missing_units.is_empty() {
                kv.delete(format::under_redundant_key(id))?;
            }
            Ok(current)
        })
    }

    async fn list_stripes(&self, after: Option<StripeId>, limit: usize) -> Result<Vec<StripeMeta>> {
        let limit = limit.min(MAX_STRIPE_PAGE);
        txn!(self.backend, read, (), |kv| {
            let (mut start, end) = range_of(&format::stripe_prefix());
            if let Some(after) = after {
                start = format::key_successor(&format::stripe_key(after));
            }
            let mut stripes = Vec::new();
            for (key, value) in kv.scan(&start, &end, limit).await? {
                stripes.push(format::decode(&key, &value)?);
            }
            Ok(stripes)
        })
    }

    async fn stripes_on_node(&self, node: NodeId, after: Option<StripeId>, limit: usize) -> Result<Vec<StripeId>> {
        let limit = limit.min(MAX_STRIPE_PAGE);
        txn!(self.backend, read, (), |kv| {
            let (mut start, end) = range_of(&format::node_stripe_prefix(node));
            if let Some(after) = after {
                start = format::key_successor(&format::node_stripe_key(node, after));
            }
            kv.scan(&start, &end, limit).await?.iter().map(|(key, _)| format::stripe_of_index_key(key)).collect()
        })
    }

    async fn under_redundant_stripes(&self, after: Option<StripeId>, limit: usize) -> Result<Vec<StripeId>> {
        let limit = limit.min(MAX_STRIPE_PAGE);
        txn!(self.backend, read, (), |kv| {
            let (mut start, end) = range_of(&format::under_redundant_prefix());
            if let Some(after) = after {
                start = format::key_successor(&format::under_redundant_key(after));
            }
            kv.scan(&start, &end, limit).await?.iter().map(|(key, _)| format::stripe_of_index_key(key)).collect()
        })
    }

    async fn register_node(&self, node: NodeInfo) -> Result<()> {
        validate::node(&node)?;
        txn!(self.backend, write, (node), |kv| put_record(kv, format::node_key(node.id), &node))
    }

    async fn get_node(&self, id: NodeId) -> Result<NodeInfo> {
        txn!(self.backend, read_point, (), |kv| require_node(kv, id).await)
    }

    async fn list_nodes(&self) -> Result<Vec<NodeInfo>> {
        txn!(self.backend, read, (), |kv| {
            let (start, end) = range_of(&format::node_prefix());
            scan_all(kv, start, &end).await
        })
    }

    async fn heartbeat(&self, id: NodeId, now_ms: u64) -> Result<NodeInfo> {
        txn!(self.backend, write, (), |kv| {
            let mut node = require_node(kv, id).await?;
            node.last_heartbeat_ms = node.last_heartbeat_ms.max(now_ms);
            put_record(kv, format::node_key(id), &node)?;
            Ok(node)
        })
    }

    async fn set_node_state(&self, id: NodeId, state: NodeState, now_ms: u64) -> Result<NodeInfo> {
        txn!(self.backend, write, (), |kv| {
            let mut node = require_node(kv, id).await?;
            node.down_since_ms = match (node.state, state) {
                (NodeState::Down, NodeState::Down) => node.down_since_ms.or(Some(now_ms)),
                (_, NodeState::Down) => Some(now_ms),
                _ => None,
            };
            node.state = state;
            put_record(kv, format::node_key(id), &node)?;
            Ok(node)
        })
    }

    async fn set_node_checking(&self, id: NodeId, since_ms: u64) -> Result<NodeInfo> {
        txn!(self.backend, write, (), |kv| {
            let mut node = require_node(kv, id).await?;
            node.checking_since_ms.get_or_insert(since_ms);
            put_record(kv, format::node_key(id), &node)?;
            Ok(node)
        })
    }

    async fn set_node_directory(&self, id: NodeId, directory: crate::types::AdmittedDirectory) -> Result<NodeInfo> {
        txn!(self.backend, write, (directory), |kv| {
            let mut node = require_node(kv, id).await?;
            node.directory = Some(directory);
            node.checking_since_ms = None;
            put_record(kv, format::node_key(id), &node)?;
            Ok(node)
        })
    }

    async fn create_multipart(&self, upload: UploadMeta) -> Result<UploadMeta> {
        validate::object_key(&upload.key)?;
        validate::tags(&upload.tags)?;
        // Allocated outside the transaction: a failed creation only leaves a gap in the numbering.
        let upload = UploadMeta { upload_id: format::upload_id(self.backend.next_id("upload").await?), ..upload };
        txn!(self.backend, write, (upload), |kv| {
            require_bucket(kv, &upload.bucket).await?;
            put_record(kv, format::upload_key(&upload.bucket, &upload.upload_id), &upload)?;
            Ok(upload)
        })
    }

    async fn get_multipart(&self, bucket: &str, key: &str, upload_id: &str) -> Result<UploadMeta> {
        validate::upload_id(upload_id)?;
        let (bucket, key, upload_id) = (bucket.to_string(), key.to_string(), upload_id.to_string());
        txn!(self.backend, read_point, (bucket, key, upload_id), |kv| require_upload(kv, &bucket, &key, &upload_id)
            .await)
    }

    async fn put_part(&self, bucket: &str, key: &str, upload_id: &str, part: PartMeta) -> Result<Option<PartMeta>> {
        validate::part_number(part.part_number)?;
        validate::upload_id(upload_id)?;
        let (bucket, key, upload_id) = (bucket.to_string(), key.to_string(), upload_id.to_string());
        txn!(self.backend, write, (bucket, key, upload_id, part), |kv| {
            require_upload(kv, &bucket, &key, &upload_id).await?;
            let part_key = format::part_key(&bucket, &upload_id, part.part_number);
            let previous = get_record(kv, &part_key).await?;
            put_record(kv, part_key, &part)?;
            Ok(previous)
        })
    }

    async fn list_parts(&self, bucket: &str, key: &str, upload_id: &str) -> Result<Vec<PartMeta>> {
        validate::upload_id(upload_id)?;
        let (bucket, key, upload_id) = (bucket.to_string(), key.to_string(), upload_id.to_string());
        txn!(self.backend, read, (bucket, key, upload_id), |kv| {
            require_upload(kv, &bucket, &key, &upload_id).await?;
            upload_parts(kv, &bucket, &upload_id).await
        })
    }

    async fn list_uploads(&self, bucket: &str, prefix: &str) -> Result<Vec<UploadMeta>> {
        let (bucket, prefix) = (bucket.to_string(), prefix.to_string());
        txn!(self.backend, read, (bucket, prefix), |kv| {
            require_bucket(kv, &bucket).await?;
            let (start, end) = range_of(&format::upload_prefix(&bucket));
            let mut uploads: Vec<UploadMeta> = scan_all(kv, start, &end).await?;
            uploads.retain(|upload| upload.key.starts_with(&prefix));
            uploads.sort_by(|a, b| (&a.key, a.initiated_ms, &a.upload_id).cmp(&(&b.key, b.initiated_ms, &b.upload_id)));
            Ok(uploads)
        })
    }

    async fn complete_multipart(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
        object: ObjectMeta,
        condition: &WriteCondition,
    ) -> Result<MultipartCompletion> {
        validate::upload_id(upload_id)?;
        if parts.is_empty() {
            return Err(MetaError::InvalidArgument("a completion must name at least one part".into()));
        }
        for part in parts {
            validate::part_number(part.part_number)?;
        }
        if parts.windows(2).any(|pair| pair[0].part_number >= pair[1].part_number) {
            return Err(MetaError::InvalidPartOrder);
        }
        let completion = (bucket.to_string(), key.to_string(), upload_id.to_string(), parts.to_vec());
        self.with_version_sequence((bucket, "a completion"), |sequence| {
            self.try_complete_multipart((completion.clone(), object.clone(), condition.clone()), sequence)
        })
        .await
    }

    async fn abort_multipart(&self, bucket: &str, key: &str, upload_id: &str) -> Result<Vec<PartMeta>> {
        validate::upload_id(upload_id)?;
        let (bucket, key, upload_id) = (bucket.to_string(), key.to_string(), upload_id.to_string());
        txn!(self.backend, write, (bucket, key, upload_id), |kv| {
            require_upload(kv, &bucket, &key, &upload_id).await?;
            let parts = upload_parts(kv, &bucket, &upload_id).await?;
            kv.delete(format::upload_key(&bucket, &upload_id))?;
            let (start, end) = range_of(&format::part_prefix(&bucket, &upload_id));
            kv.delete_range(start, end)?;
            Ok(parts)
        })
    }

    async fn set_access_key_class(&self, access_key: &str, class: Option<u8>) -> Result<()> {
        validate::access_key(access_key)?;
        class.map_or(Ok(()), validate::class)?;
        let access_key = access_key.to_string();
        txn!(self.backend, write, (access_key, class), |kv| {
            let key = format::access_key_key(&access_key);
            match class {
                Some(class) => put_record(kv, key, &AccessKeyClass { access_key: access_key.clone(), class }),
                None => kv.delete(key),
            }
        })
    }

    async fn get_access_key_class(&self, access_key: &str) -> Result<Option<u8>> {
        validate::access_key(access_key)?;
        let access_key = access_key.to_string();
        txn!(self.backend, read_point, (access_key), |kv| {
            let entry: Option<AccessKeyClass> = get_record(kv, &format::access_key_key(&access_key)).await?;
            Ok(entry.map(|entry| entry.class))
        })
    }

    async fn list_access_key_classes(&self) -> Result<Vec<AccessKeyClass>> {
        txn!(self.backend, read, (), |kv| {
            let (start, end) = range_of(&format::access_key_prefix());
            scan_all(kv, start, &end).await
        })
    }

    async fn put_profile(&self, profile: StoredProfile) -> Result<()> {
        validate::profile_name(&profile.name)?;
        txn!(self.backend, write, (profile), |kv| put_record(kv, format::profile_key(&profile.name), &profile))
    }

    async fn list_profiles(&self) -> Result<Vec<StoredProfile>> {
        txn!(self.backend, read, (), |kv| {
            let (start, end) = range_of(&format::profile_prefix());
            scan_all(kv, start, &end).await
        })
    }

    async fn delete_profile(&self, name: &str) -> Result<()> {
        validate::profile_name(name)?;
        let name = name.to_string();
        txn!(self.backend, write, (name), |kv| {
            let (start, end) = range_of(&format::bucket_prefix());
            let buckets: Vec<BucketMeta> = scan_all(kv, start, &end).await?;
            if let Some(bucket) = buckets.iter().find(|bucket| bucket.names_profile(&name)) {
                return Err(MetaError::InvalidArgument(format!(
                    "profile {name:?} serves bucket {:?}: name another profile there first",
                    bucket.name
                )));
            }
            kv.delete(format::profile_key(&name))
        })
    }

    async fn get_config(&self, name: &str) -> Result<Option<String>> {
        validate::config_name(name)?;
        let name = name.to_string();
        txn!(self.backend, read_point, (name), |kv| get_record(kv, &format::config_key(&name)).await)
    }

    async fn put_config(&self, name: &str, value: &str) -> Result<()> {
        validate::config_name(name)?;
        let (name, value) = (name.to_string(), value.to_string());
        txn!(self.backend, write, (name, value), |kv| put_record(kv, format::config_key(&name), &value))
    }

    async fn put_config_if_absent(&self, name: &str, value: &str) -> Result<String> {
        validate::config_name(name)?;
        let (name, value) = (name.to_string(), value.to_string());
        txn!(self.backend, write, (name, value), |kv| {
            let key = format::config_key(&name);
            if let Some(existing) = get_record::<String>(kv, &key).await? {
                return Ok(existing);
            }
            put_record(kv, key, &value)?;
            Ok(value)
        })
    }

    async fn claim_lease(&self, name: &str, holder: &str, now_ms: u64, ttl_ms: u64) -> Result<Lease> {
        validate::lease(name, holder, ttl_ms)?;
        let (name, holder) = (name.to_string(), holder.to_string());
        txn!(self.backend, write, (name, holder), |kv| {
            let key = format::lease_key(&name);
            let current: Option<Lease> = get_record(kv, &key).await?;
            match current {
                Some(lease) if lease.holder != holder && lease.expires_ms > now_ms => Ok(lease),
                _ => {
                    let lease = Lease { holder: holder.clone(), expires_ms: now_ms.saturating_add(ttl_ms) };
                    put_record(kv, key, &lease)?;
                    Ok(lease)
                }
            }
        })
    }

    async fn export_records(&self, after: Option<Vec<u8>>, limit: usize) -> Result<Vec<crate::kv::Entry>> {
        let limit = limit.clamp(1, MAX_STRIPE_PAGE);
        txn!(self.backend, read, (after), |kv| {
            let start = after.as_deref().map_or_else(Vec::new, format::key_successor);
            // Every key of the schema is printable text, below 0xff.
            kv.scan(&start, &[0xff], limit).await
        })
    }

    async fn import_records(&self, records: Vec<crate::kv::Entry>) -> Result<()> {
        let records = std::sync::Arc::new(records);
        txn!(self.backend, write, (records), |kv| {
            for (key, value) in records.iter() {
                kv.put(key.clone(), value.clone())?;
            }
            Ok(())
        })
    }

    fn damage(&self) -> crate::integrity::DamageReport {
        self.backend.integrity().report()
    }
}
