//! The conformance suite every `MetaStore` backend must pass: each case gets a fresh, empty store and
//! checks one area of the contract (results, errors, atomicity, ordering). Owns no backend set-up.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use meta::{
    AccessKeyClass, BucketMeta, Committed, CompletedPart, CompositePiece, ContentHeaders, EtagCondition, Layout, Lease,
    ListObjectsQuery, MetaError, MetaStore, NodeId, NodeInfo, NodeState, ObjectMeta, PartMeta, StoredProfile, StripeId,
    StripeMeta, StripeSegment, StripeState, UploadMeta, Versioning, WriteAck, WriteCondition,
};

/// No condition.
const NONE: WriteCondition =
    WriteCondition { if_match: None, if_none_match: None, if_size_bytes: None, if_last_modified_secs: None };

/// A conformance case: runs against a fresh store and panics on a violation.
pub type Case = fn(Arc<dyn MetaStore>) -> Pin<Box<dyn Future<Output = ()> + Send>>;

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        /// Every case, by name.
        pub const CASES: &[(&str, Case)] = &[$((stringify!($name), |store| Box::pin($name(store)))),*];
    };
}

cases!(
    bucket_lifecycle,
    bucket_not_empty_is_atomic,
    objects,
    object_moves_are_conditional,
    conditional_writes,
    conditional_writes_race,
    tags,
    versions,
    versions_keep_keys_apart,
    versions_race,
    histories_are_listed_whole,
    versioned_completions,
    listing_examples,
    listing_matches_model,
    stripe_ids_are_unique,
    stripes_and_cas,
    node_index,
    under_redundant_index,
    nodes,
    multipart,
    config,
    leases,
    bucket_classes,
    bucket_profiles,
    access_key_classes,
    node_directories,
    records_export_and_import,
);

pub fn bucket(name: &str) -> BucketMeta {
    BucketMeta {
        versioning: Default::default(),
        tags: Default::default(),
        name: name.into(),
        created_ms: 1_700_000_000_000,
        region: Some("us-east-1".into()),
        owner: None,
        write_ack: WriteAck::All,
        class: None,
        profile: None,
        class_profiles: Default::default(),
    }
}

pub fn object(size_bytes: u64, stripe: u64) -> ObjectMeta {
    ObjectMeta {
        version: Default::default(),
        tags: Default::default(),
        size_bytes,
        etag: format!("etag-{size_bytes}-{stripe}"),
        content_type: Some("application/octet-stream".into()),
        user_metadata: BTreeMap::from([("color".to_string(), "blue".to_string())]),
        headers: ContentHeaders {
            cache_control: Some("max-age=60".into()),
            expires_ms: Some(1_800_000_000_000),
            ..ContentHeaders::default()
        },
        last_modified_ms: 1_700_000_000_001,
        completed_upload_id: None,
        checksum: None,
        layout: Layout::Packed {
            stripe: StripeId(stripe),
            unit: 2,
            offset_bytes: 4096,
            length_bytes: size_bytes,
            replica_unit: None,
        },
    }
}

pub fn stripe(id: StripeId, nodes: [u32; 9]) -> StripeMeta {
    StripeMeta::open(id, "rs-6-3", 1 << 20, nodes.iter().map(|&n| NodeId(n)).collect())
}

fn node(id: u32) -> NodeInfo {
    NodeInfo {
        id: NodeId(id),
        address: format!("127.0.0.1:{}", 7000 + id),
        rack: format!("rack-{}", id % 3),
        capacity_bytes: 1 << 40,
        state: NodeState::Up,
        last_heartbeat_ms: 0,
        down_since_ms: None,
        directory: None,
        checking_since_ms: None,
    }
}

fn is_precondition_failed<T: std::fmt::Debug>(result: Result<T, MetaError>) -> bool {
    matches!(result, Err(MetaError::PreconditionFailed(_)))
}

fn if_absent() -> WriteCondition {
    WriteCondition { if_none_match: Some(EtagCondition::Any), ..NONE }
}

fn if_etag(etag: &str) -> WriteCondition {
    WriteCondition { if_match: Some(EtagCondition::Etags(vec![etag.to_string()])), ..NONE }
}

async fn conditional_writes(store: Arc<dyn MetaStore>) {
    store.create_bucket(bucket("cond")).await.unwrap();
    let (first, second) = (object(10, 1), object(20, 2));
    let missing = store.put_object_if("cond", "k", first.clone(), &if_etag(&first.etag)).await;
    assert!(matches!(missing, Err(MetaError::NoSuchKey { .. })), "If-Match on no object: {missing:?}");
    assert_eq!(store.put_object_if("cond", "k", first.clone(), &if_absent()).await, Ok(Committed::default()));
    assert!(is_precondition_failed(store.put_object_if("cond", "k", second.clone(), &if_absent()).await));
    assert!(is_precondition_failed(store.put_object_if("cond", "k", second.clone(), &if_etag("other")).await));
    assert_eq!(store.get_object("cond", "k").await.unwrap(), first, "a failed condition changes nothing");
    let replaced = store.put_object_if("cond", "k", second.clone(), &if_etag(&first.etag)).await.unwrap();
    assert_eq!(replaced.released, std::slice::from_ref(&first));
    // Deletes: by ETag, by size and last-modified second.
    assert!(is_precondition_failed(store.delete_object_if("cond", "k", &if_etag(&first.etag), 0).await));
    let wrong_size = WriteCondition { if_size_bytes: Some(21), ..NONE };
    assert!(is_precondition_failed(store.delete_object_if("cond", "k", &wrong_size, 0).await));
    let modified_secs = (second.last_modified_ms / 1000) as i64;
    let exact = WriteCondition { if_size_bytes: Some(20), if_last_modified_secs: Some(modified_secs), ..NONE };
    let deleted = store.delete_object_if("cond", "k", &exact, 0).await.unwrap();
    assert_eq!(deleted.released, std::slice::from_ref(&second));
    assert!(matches!(store.delete_object_if("cond", "k", &exact, 0).await, Err(MetaError::NoSuchKey { .. })));
    // A completion whose condition fails leaves the upload and its parts as they were.
    store.put_object("cond", "k", first.clone()).await.unwrap();
    let id = store.create_multipart(upload("cond", "k")).await.unwrap().upload_id;
    store.put_part("cond", "k", &id, part(1, "e1")).await.unwrap();
    let named = [CompletedPart { part_number: 1, etag: "e1".into() }];
    let refused = store.complete_multipart("cond", "k", &id, &named, second.clone(), &if_absent()).await;
    assert!(matches!(refused, Err(MetaError::PreconditionFailed(_))), "{refused:?}");
    assert_eq!(store.list_parts("cond", "k", &id).await.unwrap().len(), 1);
    let on_first = if_etag(&first.etag);
    let done = store.complete_multipart("cond", "k", &id, &named, second.clone(), &on_first).await.unwrap();
    assert_eq!(done.previous, Some(first));
}

async fn conditional_writes_race(store: Arc<dyn MetaStore>) {
    // 16 writers race an `If-None-Match: *` write of one key: exactly one wins; then 16 race an
    // `If-Match` on the winner's ETag: exactly one replaces it.
    const WRITERS: u64 = 16;
    store.create_bucket(bucket("race")).await.unwrap();
    let race = |condition: fn(&str) -> WriteCondition, offset: u64, expected: String| {
        let store = Arc::clone(&store);
        async move {
            let writes: Vec<_> = (0..WRITERS)
                .map(|i| {
                    let (store, expected) = (Arc::clone(&store), expected.clone());
                    tokio::spawn(async move {
                        let written = object(offset + i, offset + i);
                        store
                            .put_object_if("race", "lock", written.clone(), &condition(&expected))
                            .await
                            .map(|_| written)
                    })
                })
                .collect();
            let mut results = Vec::with_capacity(writes.len());
            for write in writes {
                results.push(write.await.unwrap());
            }
            let winners: Vec<ObjectMeta> = results.iter().filter_map(|result| result.clone().ok()).collect();
            assert_eq!(winners.len(), 1, "{results:?}");
            assert!(results.iter().filter(|r| r.is_err()).all(|r| is_precondition_failed(r.clone())), "{results:?}");
            assert_eq!(store.get_object("race", "lock").await.unwrap(), winners[0]);
            winners[0].etag.clone()
        }
    };
    let winner = race(|_| if_absent(), 100, String::new()).await;
    race(if_etag, 200, winner).await;
}

async fn tags(store: Arc<dyn MetaStore>) {
    store.create_bucket(bucket("tagged")).await.unwrap();
    let tags = BTreeMap::from([("project".to_string(), "alpha".to_string()), ("tier".to_string(), String::new())]);
    let tagged = store.set_bucket_tags("tagged", tags.clone()).await.unwrap();
    assert_eq!(tagged, BucketMeta { tags: tags.clone(), ..bucket("tagged") });
    assert_eq!(store.get_bucket("tagged").await.unwrap().tags, tags);
    assert_eq!(
        store.set_bucket_tags("nope-nope", tags.clone()).await,
        Err(MetaError::NoSuchBucket("nope-nope".into()))
    );
    let missing = store.set_object_tags("tagged", "k", tags.clone()).await;
    assert!(matches!(missing, Err(MetaError::NoSuchKey { .. })), "{missing:?}");
    store.put_object("tagged", "k", object(10, 1)).await.unwrap();
    let written = store.set_object_tags("tagged", "k", tags.clone()).await.unwrap();
    assert_eq!(written, ObjectMeta { tags: tags.clone(), ..object(10, 1) }, "only the tags change");
    assert_eq!(store.get_object("tagged", "k").await.unwrap(), written);
    let too_many: BTreeMap<String, String> = (0..=50).map(|i| (format!("k{i}"), String::new())).collect();
    assert!(is_invalid(store.set_object_tags("tagged", "k", too_many.clone()).await));
    assert!(is_invalid(store.set_bucket_tags("tagged", too_many).await));
    let long_key = BTreeMap::from([("k".repeat(129), String::new())]);
    assert!(is_invalid(store.set_object_tags("tagged", "k", long_key).await));
    assert_eq!(store.get_object("tagged", "k").await.unwrap(), written, "a refused tag set changes nothing");
    assert!(store.set_object_tags("tagged", "k", BTreeMap::new()).await.unwrap().tags.is_empty());
    assert!(store.set_bucket_tags("tagged", BTreeMap::new()).await.unwrap().tags.is_empty());
}

fn ids(versions: &[ObjectMeta]) -> Vec<(String, bool)> {
    versions.iter().map(|v| (v.version.id_or_null().to_string(), v.version.delete_marker)).collect()
}

async fn versions(store: Arc<dyn MetaStore>) {
    store.create_bucket(bucket("ver")).await.unwrap();
    assert!(is_invalid(store.set_bucket_versioning("ver", Versioning::Unversioned).await));
    let missing = store.set_bucket_versioning("nope-nope", Versioning::Enabled).await;
    assert_eq!(missing, Err(MetaError::NoSuchBucket("nope-nope".into())));
    let (a, b, c, d) = (object(1, 1), object(2, 2), object(3, 3), object(4, 4));
    store.put_object("ver", "k", a.clone()).await.unwrap();
    let enabled = store.set_bucket_versioning("ver", Versioning::Enabled).await.unwrap();
    assert_eq!(enabled.versioning, Versioning::Enabled);
    // Enabled: a write is a new version and keeps the older ones.
    let put_b = store.put_object_if("ver", "k", b.clone(), &NONE).await.unwrap();
    assert!(put_b.released.is_empty() && put_b.version.id.is_some(), "{put_b:?}");
    let b_id = put_b.version.id.clone().unwrap();
    let versions = store.key_versions("ver", "k").await.unwrap();
    assert_eq!(ids(&versions), [(b_id.clone(), false), ("null".into(), false)]);
    assert_eq!(store.get_object("ver", "k").await.unwrap().etag, b.etag);
    assert_eq!(store.get_version("ver", "k", "null").await.unwrap().etag, a.etag);
    assert_eq!(store.get_version("ver", "k", &b_id).await.unwrap().etag, b.etag);
    let absent = store.get_version("ver", "k", "0123456789abcdef").await;
    assert!(matches!(absent, Err(MetaError::NoSuchVersion { .. })), "{absent:?}");
    // A delete adds a marker: the key reads absent, lists nowhere, and the bucket is not empty.
    let marker = store.delete_object_if("ver", "k", &NONE, 77).await.unwrap();
    assert!(marker.version.delete_marker && marker.released.is_empty(), "{marker:?}");
    let marker_id = marker.version.id.clone().unwrap();
    assert!(matches!(store.get_object("ver", "k").await, Err(MetaError::NoSuchKey { .. })));
    assert!(store.list_objects("ver", &ListObjectsQuery::default()).await.unwrap().objects.is_empty());
    assert_eq!(store.get_version("ver", "k", &marker_id).await.unwrap().last_modified_ms, 77);
    assert!(matches!(store.delete_bucket("ver").await, Err(MetaError::BucketNotEmpty(_))));
    // If-None-Match: * holds for a key whose newest version is a marker.
    let put_c = store.put_object_if("ver", "k", c.clone(), &if_absent()).await.unwrap();
    let c_id = put_c.version.id.clone().unwrap();
    let expected = [(c_id.clone(), false), (marker_id.clone(), true), (b_id.clone(), false), ("null".into(), false)];
    assert_eq!(ids(&store.key_versions("ver", "k").await.unwrap()), expected);
    // Deleting versions: the newest remaining one becomes current (a marker never does).
    assert_eq!(store.delete_version("ver", "k", &c_id, &NONE).await.unwrap().unwrap().etag, c.etag);
    assert!(matches!(store.get_object("ver", "k").await, Err(MetaError::NoSuchKey { .. })), "the marker");
    store.delete_version("ver", "k", &marker_id, &NONE).await.unwrap().unwrap();
    assert_eq!(store.get_object("ver", "k").await.unwrap().etag, b.etag, "b is current again");
    assert_eq!(store.delete_version("ver", "k", "0123456789abcdef", &NONE).await, Ok(None));
    assert!(is_invalid(store.delete_version("ver", "k", "not-an-id", &NONE).await));
    // Suspended: a write replaces the null version wherever it is.
    store.put_object("ver", "k", d.clone()).await.unwrap();
    store.set_bucket_versioning("ver", Versioning::Suspended).await.unwrap();
    let put_c = store.put_object_if("ver", "k", c.clone(), &NONE).await.unwrap();
    assert_eq!((put_c.version.id.as_deref(), put_c.released.len()), (None, 1), "{put_c:?}");
    assert_eq!(put_c.released[0].etag, a.etag, "the old null version is released");
    let after: Vec<String> = store.key_versions("ver", "k").await.unwrap().iter().map(|v| v.etag.clone()).collect();
    assert_eq!(after, [c.etag.clone(), d.etag.clone(), b.etag.clone()]);
    // A suspended delete replaces the null version with a null marker; deleting it brings d back.
    let marker = store.delete_object_if("ver", "k", &NONE, 88).await.unwrap();
    assert_eq!((marker.version.id.as_deref(), marker.version.delete_marker), (None, true));
    assert_eq!(marker.released.iter().map(|v| v.etag.as_str()).collect::<Vec<_>>(), [c.etag.as_str()]);
    assert!(matches!(store.get_object("ver", "k").await, Err(MetaError::NoSuchKey { .. })));
    store.delete_version("ver", "k", "null", &NONE).await.unwrap().unwrap();
    assert_eq!(store.get_object("ver", "k").await.unwrap().etag, d.etag);
    // Every version deleted: the bucket can go.
    for version in store.key_versions("ver", "k").await.unwrap() {
        store.delete_version("ver", "k", version.version.id_or_null(), &NONE).await.unwrap().unwrap();
    }
    assert_eq!(store.key_versions("ver", "k").await.unwrap(), []);
    store.delete_bucket("ver").await.unwrap();
}

async fn versions_keep_keys_apart(store: Arc<dyn MetaStore>) {
    // Keys that are prefixes of each other, or hold a NUL byte, keep their own histories.
    store.create_bucket(bucket("apart")).await.unwrap();
    store.set_bucket_versioning("apart", Versioning::Enabled).await.unwrap();
    let keys = ["a", "a\0b", "a\0", "ab", "a/b"];
    for (i, key) in keys.iter().enumerate() {
        for round in 0..2u64 {
            store.put_object("apart", key, object(10 * i as u64 + round, round)).await.unwrap();
        }
        store.delete_object("apart", key).await.unwrap();
    }
    for (i, key) in keys.iter().enumerate() {
        let versions = store.key_versions("apart", key).await.unwrap();
        let sizes: Vec<u64> = versions.iter().map(|v| v.size_bytes).collect();
        assert_eq!(sizes, [0, 10 * i as u64 + 1, 10 * i as u64], "{key:?}");
        assert!(versions[0].version.delete_marker);
    }
}

async fn versions_race(store: Arc<dyn MetaStore>) {
    // 16 writers of one key of a versioned bucket at once: 16 versions, none lost or merged.
    store.create_bucket(bucket("raced")).await.unwrap();
    store.set_bucket_versioning("raced", Versioning::Enabled).await.unwrap();
    let writes: Vec<_> = (0..16u64)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.put_object_if("raced", "k", object(i, i), &NONE).await.unwrap() })
        })
        .collect();
    let mut written = BTreeSet::new();
    for write in writes {
        written.insert(write.await.unwrap().version.id.unwrap());
    }
    let versions = store.key_versions("raced", "k").await.unwrap();
    let stored: BTreeSet<String> = versions.iter().map(|v| v.version.id.clone().unwrap()).collect();
    assert_eq!((written.len(), stored), (16, written));
    assert_eq!(store.get_object("raced", "k").await.unwrap(), versions[0], "the newest is current");
}

async fn histories_are_listed_whole(store: Arc<dyn MetaStore>) {
    // Keys with only a current version, only markers, both, and NUL bytes, listed a few versions a
    // page: every key once, whole, in order, as `key_versions` gives it.
    store.create_bucket(bucket("hist")).await.unwrap();
    store.put_object("hist", "plain", object(1, 1)).await.unwrap();
    store.set_bucket_versioning("hist", Versioning::Enabled).await.unwrap();
    let keys = ["a", "a\0", "a\0b", "b", "deleted", "plain", "z"];
    for (i, key) in keys.iter().enumerate() {
        for round in 0..(i as u64 % 3 + 1) {
            store.put_object("hist", key, object(100 * i as u64 + round, round)).await.unwrap();
        }
        if *key == "deleted" || *key == "a\0" {
            store.delete_object("hist", key).await.unwrap();
        }
    }
    for max_versions in [1, 3, 1000] {
        let (mut after, mut listed) = (None::<String>, Vec::new());
        for _page in 0..100 {
            let page = store.list_histories("hist", after.as_deref(), max_versions).await.unwrap();
            listed.extend(page.histories);
            match page.next_after {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let listed_keys: Vec<&str> = listed.iter().map(|history| history.key.as_str()).collect();
        assert_eq!(listed_keys, keys, "max {max_versions}");
        for history in &listed {
            assert_eq!(history.versions, store.key_versions("hist", &history.key).await.unwrap(), "{:?}", history.key);
        }
    }
    let missing = store.list_histories("nope-nope", None, 10).await;
    assert_eq!(missing, Err(MetaError::NoSuchBucket("nope-nope".into())));
}

async fn versioned_completions(store: Arc<dyn MetaStore>) {
    // A completed upload is a new version like a PUT: the old one stays, nothing is released.
    store.create_bucket(bucket("mpv")).await.unwrap();
    store.set_bucket_versioning("mpv", Versioning::Enabled).await.unwrap();
    let first = store.put_object_if("mpv", "k", object(1, 1), &NONE).await.unwrap();
    let id = store.create_multipart(upload("mpv", "k")).await.unwrap().upload_id;
    store.put_part("mpv", "k", &id, part(1, "e1")).await.unwrap();
    let named = [CompletedPart { part_number: 1, etag: "e1".into() }];
    let done = store.complete_multipart("mpv", "k", &id, &named, object(2, 2), &NONE).await.unwrap();
    assert_eq!((done.previous, done.version.delete_marker), (None, false));
    let ids: Vec<String> =
        store.key_versions("mpv", "k").await.unwrap().iter().map(|v| v.version.id_or_null().into()).collect();
    assert_eq!(ids, [done.version.id.clone().unwrap(), first.version.id.clone().unwrap()]);
    assert_eq!(store.get_object("mpv", "k").await.unwrap().size_bytes, 2);
}

fn is_invalid<T: std::fmt::Debug>(result: Result<T, MetaError>) -> bool {
    matches!(result, Err(MetaError::InvalidArgument(_)))
}

async fn bucket_lifecycle(store: Arc<dyn MetaStore>) {
    for name in ["b-two", "a-one", "c.three"] {
        store.create_bucket(bucket(name)).await.unwrap();
    }
    assert_eq!(store.create_bucket(bucket("a-one")).await, Err(MetaError::BucketAlreadyExists("a-one".into())));
    let names: Vec<String> = store.list_buckets().await.unwrap().into_iter().map(|b| b.name).collect();
    assert_eq!(names, ["a-one", "b-two", "c.three"]);
    assert_eq!(store.get_bucket("b-two").await.unwrap(), bucket("b-two"));
    for bad in ["ab", "Upper", "under_score", "192.168.0.1", "-dash"] {
        assert!(is_invalid(store.create_bucket(bucket(bad)).await), "{bad}");
    }
    assert_eq!(store.list_buckets().await.unwrap().len(), 3, "invalid names change nothing");
    assert_eq!(store.get_bucket("nope-nope").await, Err(MetaError::NoSuchBucket("nope-nope".into())));
    store.delete_bucket("b-two").await.unwrap();
    assert_eq!(store.get_bucket("b-two").await, Err(MetaError::NoSuchBucket("b-two".into())));
    assert_eq!(store.delete_bucket("b-two").await, Err(MetaError::NoSuchBucket("b-two".into())));
    // A deleted name can be used again.
    store.create_bucket(bucket("b-two")).await.unwrap();
    // The write-ack rule is the one bucket setting that changes; it is kept whole.
    let fast = store.set_bucket_write_ack("a-one", WriteAck::K).await.unwrap();
    assert_eq!(fast, BucketMeta { write_ack: WriteAck::K, ..bucket("a-one") });
    assert_eq!(store.get_bucket("a-one").await.unwrap(), fast);
    assert_eq!(store.get_bucket("c.three").await.unwrap().write_ack, WriteAck::All, "others untouched");
    assert_eq!(
        store.set_bucket_write_ack("nope-nope", WriteAck::K).await,
        Err(MetaError::NoSuchBucket("nope-nope".into()))
    );
    assert_eq!("k+1".parse::<WriteAck>(), Ok(WriteAck::KPlusOne));
    assert!("k+2".parse::<WriteAck>().is_err());
}

async fn bucket_not_empty_is_atomic(store: Arc<dyn MetaStore>) {
    store.create_bucket(bucket("full")).await.unwrap();
    store.put_object("full", "k", object(1, 1)).await.unwrap();
    assert_eq!(store.delete_bucket("full").await, Err(MetaError::BucketNotEmpty("full".into())));
    assert!(store.get_object("full", "k").await.is_ok(), "a refused delete changes nothing");
    store.delete_object("full", "k").await.unwrap();
    let upload = store.create_multipart(upload("full", "big")).await.unwrap();
    assert_eq!(store.delete_bucket("full").await, Err(MetaError::BucketNotEmpty("full".into())));
    store.abort_multipart("full", "big", &upload.upload_id).await.unwrap();
    store.delete_bucket("full").await.unwrap();

    // Race a put into the bucket against its deletion: exactly one may win, and a won delete never leaves
    // an object behind (a re-created bucket with the same name is empty).
    for round in 0..12 {
        store.create_bucket(bucket("racing")).await.unwrap();
        let (putter, deleter) = (Arc::clone(&store), Arc::clone(&store));
        let key = format!("key-{round}");
        let put = tokio::spawn(async move { putter.put_object("racing", &key, object(1, 1)).await });
        let delete = tokio::spawn(async move { deleter.delete_bucket("racing").await });
        let (put, delete) = (put.await.unwrap(), delete.await.unwrap());
        match (&put, &delete) {
            (Ok(None), Err(MetaError::BucketNotEmpty(_))) => {
                store.delete_object("racing", &format!("key-{round}")).await.unwrap();
                store.delete_bucket("racing").await.unwrap();
            }
            (Err(MetaError::NoSuchBucket(_)), Ok(())) => {}
            other => panic!("round {round}: impossible outcome {other:?}"),
        }
        store.create_bucket(bucket("racing")).await.unwrap();
        assert_eq!(store.list_objects("racing", &ListObjectsQuery::default()).await.unwrap().key_count(), 0);
        store.delete_bucket("racing").await.unwrap();
    }
}

async fn objects(store: Arc<dyn MetaStore>) {
    store.create_bucket(bucket("objs")).await.unwrap();
    assert_eq!(store.put_object("objs", "a/b.txt", object(10, 1)).await.unwrap(), None);
    assert_eq!(store.get_object("objs", "a/b.txt").await.unwrap(), object(10, 1));
    // Overwrite returns the previous version so its layout can be collected.
    let striped = ObjectMeta {
        completed_upload_id: None,
        checksum: None,
        layout: Layout::Striped {
            segments: vec![
                StripeSegment { stripe: StripeId(7), unit_bytes: 100, object_offset_bytes: 0, length_bytes: 600 },
                StripeSegment { stripe: StripeId(8), unit_bytes: 10, object_offset_bytes: 600, length_bytes: 5 },
            ],
        },
        ..object(605, 0)
    };
    assert_eq!(store.put_object("objs", "a/b.txt", striped.clone()).await.unwrap(), Some(object(10, 1)));
    assert_eq!(store.get_object("objs", "a/b.txt").await.unwrap(), striped);
    assert_eq!(striped.layout.stripes(), [StripeId(7), StripeId(8)]);
    assert_eq!(store.delete_object("objs", "a/b.txt").await.unwrap(), Some(striped));
    assert_eq!(store.delete_object("objs", "a/b.txt").await.unwrap(), None, "deleting an absent key succeeds");
    assert!(matches!(store.get_object("objs", "a/b.txt").await, Err(MetaError::NoSuchKey { .. })));
    assert!(matches!(store.get_object("nobucket", "k").await, Err(MetaError::NoSuchBucket(_))));
    assert!(matches!(store.put_object("nobucket", "k", object(1, 1)).await, Err(MetaError::NoSuchBucket(_))));
    assert!(matches!(store.delete_object("nobucket", "k").await, Err(MetaError::NoSuchBucket(_))));
    // Key limits: 1024 bytes of UTF-8 is the maximum.
    let longest = "é".repeat(512);
    store.put_object("objs", &longest, object(1, 1)).await.unwrap();
    assert!(is_invalid(store.put_object("objs", &format!("{longest}x"), object(1, 1)).await));
    assert!(is_invalid(store.put_object("objs", "", object(1, 1)).await));
    let listed = store.list_objects("objs", &ListObjectsQuery::default()).await.unwrap();
    assert_eq!(listed.objects.iter().map(|o| o.key.as_str()).collect::<Vec<_>>(), [longest.as_str()]);
    // Composite layouts (completed multipart uploads) round-trip too.
    let composite = ObjectMeta {
        completed_upload_id: None,
        checksum: None,
        layout: Layout::Composite {
            pieces: vec![
                CompositePiece {
                    checksum: Default::default(),
                    object_offset_bytes: 0,
                    length_bytes: 605,
                    layout: object(605, 3).layout,
                },
                CompositePiece {
                    checksum: Default::default(),
                    object_offset_bytes: 605,
                    length_bytes: 5,
                    layout: object(5, 4).layout,
                },
            ],
        },
        ..object(610, 0)
    };
    store.put_object("objs", "composite", composite.clone()).await.unwrap();
    assert_eq!(store.get_object("objs", "composite").await.unwrap(), composite);
    assert_eq!(composite.layout.stripes(), [StripeId(3), StripeId(4)]);
}

fn listed_keys(listing: &meta::ObjectListing) -> Vec<&str> {
    listing.objects.iter().map(|o| o.key.as_str()).collect()
}

fn query(prefix: &str, delimiter: Option<&str>, max_keys: usize) -> ListObjectsQuery {
    ListObjectsQuery { prefix: prefix.into(), delimiter: delimiter.map(Into::into), max_keys, ..Default::default() }
}

async fn object_moves_are_conditional(store: Arc<dyn MetaStore>) {
    store.create_bucket(bucket("moves")).await.unwrap();
    let original = object(100, 7);
    store.put_object("moves", "k", original.clone()).await.unwrap();
    let new_layout = object(100, 8).layout;
    let moved = store.move_object("moves", "k", &original, new_layout.clone()).await.unwrap();
    assert_eq!(
        moved,
        ObjectMeta { completed_upload_id: None, layout: new_layout.clone(), ..original.clone() },
        "only the layout changes"
    );
    assert_eq!(store.get_object("moves", "k").await.unwrap(), moved);
    // The record read before the move is stale now: a second mover loses and writes nothing.
    let stale = store.move_object("moves", "k", &original, object(100, 9).layout).await;
    assert!(matches!(stale, Err(MetaError::Conflict(_))), "{stale:?}");
    assert_eq!(store.get_object("moves", "k").await.unwrap(), moved);
    // An overwrite or a delete since the read also wins over the move.
    let overwritten = object(200, 10);
    store.put_object("moves", "k", overwritten.clone()).await.unwrap();
    assert!(matches!(
        store.move_object("moves", "k", &moved, object(100, 11).layout).await,
        Err(MetaError::Conflict(_))
    ));
    assert_eq!(store.get_object("moves", "k").await.unwrap(), overwritten);
    store.delete_object("moves", "k").await.unwrap();
    assert!(matches!(
        store.move_object("moves", "k", &overwritten, new_layout.clone()).await,
        Err(MetaError::Conflict(_))
    ));
    assert!(matches!(store.get_object("moves", "k").await, Err(MetaError::NoSuchKey { .. })), "a move never recreates");
    assert!(matches!(store.move_object("nope", "k", &original, new_layout).await, Err(MetaError::NoSuchBucket(_))));
}

async fn listing_examples(store: Arc<dyn MetaStore>) {
    store.create_bucket(bucket("photos")).await.unwrap();
    for key in ["2024/jan/a.jpg", "2024/jan/b.jpg", "2024/feb/c.jpg", "2025/x.jpg", "readme", "2024/top.jpg"] {
        store.put_object("photos", key, object(1, 1)).await.unwrap();
    }
    let page = store.list_objects("photos", &query("", Some("/"), 1000)).await.unwrap();
    assert_eq!(listed_keys(&page), ["readme"]);
    assert_eq!(page.common_prefixes, ["2024/", "2025/"]);
    assert!(!page.is_truncated && page.next_continuation_token.is_none());

    let page = store.list_objects("photos", &query("2024/", Some("/"), 1000)).await.unwrap();
    assert_eq!(listed_keys(&page), ["2024/top.jpg"]);
    assert_eq!(page.common_prefixes, ["2024/feb/", "2024/jan/"]);

    // Pagination over common prefixes and keys mixed: one entry per page.
    let mut seen = Vec::new();
    let mut token = None;
    for _ in 0..10 {
        let q = ListObjectsQuery { continuation_token: token.clone(), ..query("2024/", Some("/"), 1) };
        let page = store.list_objects("photos", &q).await.unwrap();
        assert_eq!(page.key_count(), 1);
        seen.extend(page.common_prefixes.iter().cloned());
        seen.extend(page.objects.iter().map(|o| o.key.clone()));
        assert_eq!(page.is_truncated, page.next_continuation_token.is_some());
        token = page.next_continuation_token;
        if token.is_none() {
            break;
        }
    }
    assert_eq!(seen, ["2024/feb/", "2024/jan/", "2024/top.jpg"]);

    // max-keys 0: nothing, not truncated (as S3 answers).
    let page = store.list_objects("photos", &query("", None, 0)).await.unwrap();
    assert_eq!(page.key_count(), 0);
    assert!(!page.is_truncated);
    // start-after, and a continuation token wins over it.
    let q = ListObjectsQuery { start_after: Some("2024/jan/a.jpg".into()), ..query("", None, 2) };
    let page = store.list_objects("photos", &q).await.unwrap();
    assert_eq!(listed_keys(&page), ["2024/jan/b.jpg", "2024/top.jpg"]);
    let q = ListObjectsQuery { continuation_token: page.next_continuation_token.clone(), ..q };
    assert_eq!(listed_keys(&store.list_objects("photos", &q).await.unwrap()), ["2025/x.jpg", "readme"]);
    // start-after inside a rolled-up prefix still returns the prefix (later keys roll up into it).
    let q = ListObjectsQuery { start_after: Some("2024/feb/c.jpg".into()), ..query("", Some("/"), 1000) };
    let page = store.list_objects("photos", &q).await.unwrap();
    assert_eq!(page.common_prefixes, ["2024/", "2025/"]);
    // A multi-character delimiter, and one that never occurs.
    let page = store.list_objects("photos", &query("", Some("/jan/"), 1000)).await.unwrap();
    assert_eq!(page.common_prefixes, ["2024/jan/"]);
    let page = store.list_objects("photos", &query("", Some("|"), 1000)).await.unwrap();
    assert_eq!(page.key_count(), 6);
    // Bad tokens are rejected; missing buckets are NoSuchBucket.
    let q = ListObjectsQuery { continuation_token: Some("not a token".into()), ..Default::default() };
    assert!(is_invalid(store.list_objects("photos", &q).await));
    assert!(matches!(store.list_objects("nobucket", &q).await, Err(MetaError::NoSuchBucket(_))));
    // A bucket whose name extends another's does not leak into its listing.
    store.create_bucket(bucket("photos-2")).await.unwrap();
    store.put_object("photos-2", "other", object(1, 1)).await.unwrap();
    assert_eq!(store.list_objects("photos", &query("", None, 1000)).await.unwrap().key_count(), 6);
}

/// S3 ListObjectsV2 by definition, on a sorted key list: all entries (keys and deduplicated common
/// prefixes) after `start_after`, in order.
fn model_entries(keys: &BTreeSet<String>, prefix: &str, delimiter: Option<&str>, start_after: &str) -> Vec<String> {
    let mut entries: Vec<String> = Vec::new();
    for key in keys.iter().filter(|k| k.starts_with(prefix) && k.as_str() > start_after) {
        let entry = match delimiter.and_then(|d| key[prefix.len()..].find(d).map(|at| (d, at))) {
            Some((d, at)) => format!("{}/CP", &key[..prefix.len() + at + d.len()]),
            None => key.clone(),
        };
        if entries.last() != Some(&entry) {
            entries.push(entry);
        }
    }
    entries
}

async fn listing_matches_model(store: Arc<dyn MetaStore>) {
    store.create_bucket(bucket("model")).await.unwrap();
    let keys: BTreeSet<String> = [
        "a",
        "a/",
        "a//b",
        "a/b",
        "a/b/c",
        "a/b/d",
        "a/c",
        "a0",
        "a.b",
        "a--b--c",
        "a--d",
        "b",
        "/leading",
        "//",
        "dir/",
        "dir/sub/",
        "dir/sub/file",
        "é",
        "é/ü",
        "日本/語",
        "日本/語/x",
        "😀",
        "😀/😀",
        "z/z/z/z",
        "zz",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    for key in &keys {
        store.put_object("model", key, object(1, 1)).await.unwrap();
    }
    let prefixes = ["", "a", "a/", "a/b", "d", "日", "😀", "zz", "/", "nothing"];
    let delimiters = [None, Some("/"), Some("--"), Some("b")];
    for prefix in prefixes {
        for delimiter in delimiters {
            for start_after in [None, Some("a/b"), Some("é")] {
                let expected = model_entries(&keys, prefix, delimiter, start_after.unwrap_or(""));
                for max_keys in [1, 3, 1000] {
                    let mut got = Vec::new();
                    let mut token: Option<String> = None;
                    let pages_needed = expected.len().div_ceil(max_keys).max(1);
                    for page_index in 0..pages_needed {
                        let q = ListObjectsQuery {
                            prefix: prefix.into(),
                            delimiter: delimiter.map(Into::into),
                            start_after: start_after.map(Into::into),
                            continuation_token: token.clone(),
                            max_keys,
                        };
                        let page = store.list_objects("model", &q).await.unwrap();
                        let context =
                            format!("{prefix:?} {delimiter:?} {start_after:?} max {max_keys} page {page_index}");
                        let mut entries: Vec<String> = page.objects.iter().map(|o| o.key.clone()).collect();
                        entries.extend(page.common_prefixes.iter().map(|cp| format!("{cp}/CP")));
                        entries.sort_by(|a, b| a.trim_end_matches("/CP").cmp(b.trim_end_matches("/CP")));
                        let last_page = page_index + 1 == pages_needed;
                        assert_eq!(page.is_truncated, !last_page, "{context}");
                        assert_eq!(page.next_continuation_token.is_some(), page.is_truncated, "{context}");
                        assert!(entries.len() == max_keys || last_page, "{context}: short page");
                        got.extend(entries);
                        token = page.next_continuation_token;
                    }
                    assert_eq!(got, expected, "{prefix:?} {delimiter:?} {start_after:?} max {max_keys}");
                }
            }
        }
    }
}

async fn stripe_ids_are_unique(store: Arc<dyn MetaStore>) {
    let mut ids = BTreeSet::new();
    let mut last = StripeId(0);
    for _ in 0..20 {
        let id = store.allocate_stripe_id().await.unwrap();
        assert!(id > last, "ids increase");
        last = id;
        ids.insert(id);
    }
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.allocate_stripe_id().await.unwrap() })
        })
        .collect();
    for task in tasks {
        assert!(ids.insert(task.await.unwrap()), "duplicate stripe id");
    }
    assert_eq!(ids.len(), 84);
}

async fn stripes_and_cas(store: Arc<dyn MetaStore>) {
    let id = store.allocate_stripe_id().await.unwrap();
    let created = store.create_stripe(stripe(id, [1, 2, 3, 4, 5, 6, 7, 8, 9])).await.unwrap();
    assert_eq!(created.version, 1);
    assert_eq!(store.get_stripe(id).await.unwrap(), created);
    assert!(matches!(store.create_stripe(stripe(id, [1, 2, 3, 4, 5, 6, 7, 8, 9])).await, Err(MetaError::Conflict(_))));
    // Move unit 0 from node 1 to node 10 and seal.
    let mut moved = created.clone();
    moved.placement[0] = NodeId(10);
    moved.state = StripeState::Sealed;
    moved.unit_checksums = Some(vec![7; 9]);
    let updated = store.update_stripe(id, 1, moved.clone()).await.unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(updated.placement[0], NodeId(10));
    assert_eq!(store.get_stripe(id).await.unwrap(), updated);
    // A stale version loses and changes nothing.
    assert!(matches!(store.update_stripe(id, 1, created.clone()).await, Err(MetaError::Conflict(_))));
    assert_eq!(store.get_stripe(id).await.unwrap(), updated);
    // Two concurrent updates from the same version: exactly one wins.
    let results: Vec<_> = [11u32, 12]
        .into_iter()
        .map(|node| {
            let (store, mut next) = (Arc::clone(&store), updated.clone());
            next.placement[1] = NodeId(node);
            tokio::spawn(async move { store.update_stripe(id, 2, next).await })
        })
        .collect();
    let mut wins = 0;
    for task in results {
        match task.await.unwrap() {
            Ok(stripe) => {
                wins += 1;
                assert_eq!(stripe.version, 3);
            }
            Err(MetaError::Conflict(_)) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(wins, 1);
    // Bad stripes are refused.
    let bad_code = StripeMeta { code: "rs-x".into(), ..stripe(StripeId(999), [1, 2, 3, 4, 5, 6, 7, 8, 9]) };
    assert!(is_invalid(store.create_stripe(bad_code).await));
    assert!(is_invalid(store.create_stripe(stripe(StripeId(999), [1, 1, 3, 4, 5, 6, 7, 8, 9])).await));
    let short = StripeMeta { placement: vec![NodeId(1)], ..stripe(StripeId(999), [1, 2, 3, 4, 5, 6, 7, 8, 9]) };
    assert!(is_invalid(store.create_stripe(short).await));
    let wrong_checksums =
        StripeMeta { unit_checksums: Some(vec![1]), ..stripe(StripeId(999), [1, 2, 3, 4, 5, 6, 7, 8, 9]) };
    assert!(is_invalid(store.create_stripe(wrong_checksums).await));
    assert!(is_invalid(store.update_stripe(id, 3, stripe(StripeId(id.0 + 1), [1, 2, 3, 4, 5, 6, 7, 8, 9])).await));
    assert_eq!(store.get_stripe(StripeId(999)).await, Err(MetaError::NoSuchStripe(999)));
    assert!(matches!(
        store.update_stripe(StripeId(999), 1, stripe(StripeId(999), [1, 2, 3, 4, 5, 6, 7, 8, 9])).await,
        Err(MetaError::NoSuchStripe(999))
    ));
    let lrc = StripeMeta { code: "lrc-6-2-2".into(), ..stripe(StripeId(1000), [1, 2, 3, 4, 5, 6, 7, 8, 9]) };
    assert!(is_invalid(store.create_stripe(lrc.clone()).await), "lrc-6-2-2 has 10 units");
    let lrc = StripeMeta { placement: (1..=10).map(NodeId).collect(), ..lrc };
    store.create_stripe(lrc).await.unwrap();
    // Delete returns the stripe; afterwards it is gone.
    let deleted = store.delete_stripe(id).await.unwrap();
    assert_eq!(deleted.version, 3);
    assert_eq!(store.get_stripe(id).await, Err(MetaError::NoSuchStripe(id.0)));
    assert_eq!(store.delete_stripe(id).await, Err(MetaError::NoSuchStripe(id.0)));
}

async fn node_index(store: Arc<dyn MetaStore>) {
    let mut ids = Vec::new();
    for i in 0..30u32 {
        let id = store.allocate_stripe_id().await.unwrap();
        // Node 100 holds a unit of every third stripe; the others spread over nodes 1..=20.
        let mut nodes = [0u32; 9];
        for (unit, slot) in nodes.iter_mut().enumerate() {
            *slot = 1 + (i + unit as u32) % 20;
        }
        if i % 3 == 0 {
            nodes[4] = 100;
        }
        store.create_stripe(stripe(id, nodes)).await.unwrap();
        ids.push((id, nodes));
    }
    let on_100: Vec<StripeId> = ids.iter().filter(|(_, n)| n.contains(&100)).map(|(id, _)| *id).collect();
    assert_eq!(store.stripes_on_node(NodeId(100), None, 1000).await.unwrap(), on_100);
    // Paged through the index.
    let first = store.stripes_on_node(NodeId(100), None, 4).await.unwrap();
    let rest = store.stripes_on_node(NodeId(100), first.last().copied(), 1000).await.unwrap();
    assert_eq!([first, rest].concat(), on_100);
    for node in 1..=20u32 {
        let expected: Vec<StripeId> = ids.iter().filter(|(_, n)| n.contains(&node)).map(|(id, _)| *id).collect();
        assert_eq!(store.stripes_on_node(NodeId(node), None, 1000).await.unwrap(), expected, "node {node}");
    }
    // Moving a unit off node 100 updates the index in the same transaction; so does a delete.
    let (moved, _) = ids[0];
    let mut current = store.get_stripe(moved).await.unwrap();
    current.placement[4] = NodeId(200);
    store.update_stripe(moved, current.version, current).await.unwrap();
    assert_eq!(store.stripes_on_node(NodeId(200), None, 10).await.unwrap(), [moved]);
    assert!(!store.stripes_on_node(NodeId(100), None, 1000).await.unwrap().contains(&moved));
    let (deleted, nodes) = ids[3];
    store.delete_stripe(deleted).await.unwrap();
    for node in nodes {
        assert!(!store.stripes_on_node(NodeId(node), None, 1000).await.unwrap().contains(&deleted));
    }
    assert!(store.stripes_on_node(NodeId(555), None, 10).await.unwrap().is_empty());
    // list_stripes pages through everything, ascending.
    let all = store.list_stripes(None, 1000).await.unwrap();
    assert_eq!(all.len(), 29);
    assert!(all.windows(2).all(|pair| pair[0].id < pair[1].id));
    let page = store.list_stripes(Some(all[9].id), 5).await.unwrap();
    assert_eq!(page, all[10..15]);
}

async fn under_redundant_index(store: Arc<dyn MetaStore>) {
    let sealed = |id: StripeId| StripeMeta { state: StripeState::Sealed, ..stripe(id, [1, 2, 3, 4, 5, 6, 7, 8, 9]) };
    let mut ids = Vec::new();
    for i in 0..6u64 {
        let id = store.allocate_stripe_id().await.unwrap();
        let mut record = sealed(id);
        if i % 2 == 1 {
            assert!(record.mark_missing([8, 7], 1000 + i));
        }
        store.create_stripe(record).await.unwrap();
        ids.push(id);
    }
    let odd: Vec<StripeId> = ids.iter().skip(1).step_by(2).copied().collect();
    assert_eq!(store.under_redundant_stripes(None, 100).await.unwrap(), odd, "created under-redundant");
    let first = store.under_redundant_stripes(None, 1).await.unwrap();
    let rest = store.under_redundant_stripes(first.last().copied(), 100).await.unwrap();
    assert_eq!([first, rest].concat(), odd, "paged");
    let stored = store.get_stripe(ids[1]).await.unwrap();
    assert_eq!((stored.missing_units.clone(), stored.degraded_since_ms), (vec![7, 8], Some(1001)));
    // A unit found lost later enters the index in the update's transaction; a repair leaves it.
    let mut lost = store.get_stripe(ids[0]).await.unwrap();
    assert!(lost.mark_missing([0], 2000));
    store.update_stripe(ids[0], lost.version, lost).await.unwrap();
    let mut repaired = store.get_stripe(ids[1]).await.unwrap();
    repaired.clear_missing([7]);
    assert_eq!(repaired.degraded_since_ms, Some(1001), "still one unit short");
    let repaired = store.update_stripe(ids[1], repaired.version, repaired).await.unwrap();
    assert!(store.under_redundant_stripes(None, 100).await.unwrap().contains(&ids[1]));
    let mut whole = repaired;
    whole.pending_until_ms = Some(5000);
    whole.pending_writer = Some("gw-a@1".into());
    assert!(whole.is_pending(4999) && !whole.is_pending(5000));
    assert!(
        whole.is_pending_for(4999, "gw-a@1") && whole.is_pending_for(4999, "gw-b@7"),
        "its writer, another gateway"
    );
    assert!(!whole.is_pending_for(4999, "gw-a@2"), "a later incarnation of its writer: nobody lands them");
    whole.clear_missing([8]);
    assert_eq!((whole.degraded_since_ms, whole.pending_until_ms), (None, None), "pending ends with the last unit");
    assert_eq!(whole.pending_writer, None, "and so does its writer");
    store.update_stripe(ids[1], whole.version, whole).await.unwrap();
    store.delete_stripe(ids[3]).await.unwrap();
    assert_eq!(store.under_redundant_stripes(None, 100).await.unwrap(), [ids[0], ids[5]]);
    // Malformed missing units are refused and change nothing.
    let bad_records = [
        StripeMeta { missing_units: vec![3, 2], degraded_since_ms: Some(1), ..sealed(StripeId(900)) },
        StripeMeta { missing_units: vec![9], degraded_since_ms: Some(1), ..sealed(StripeId(900)) },
        StripeMeta { missing_units: vec![1], degraded_since_ms: None, ..sealed(StripeId(900)) },
        StripeMeta { missing_units: Vec::new(), degraded_since_ms: Some(1), ..sealed(StripeId(900)) },
        StripeMeta { pending_until_ms: Some(1), ..sealed(StripeId(900)) },
        StripeMeta {
            missing_units: vec![1],
            degraded_since_ms: Some(1),
            pending_writer: Some("gw@1".into()),
            ..sealed(StripeId(900))
        },
        StripeMeta {
            missing_units: vec![1],
            degraded_since_ms: Some(1),
            ..stripe(StripeId(900), [1, 2, 3, 4, 5, 6, 7, 8, 9])
        },
    ];
    for bad in bad_records {
        assert!(is_invalid(store.create_stripe(bad).await));
    }
    assert_eq!(store.get_stripe(StripeId(900)).await, Err(MetaError::NoSuchStripe(900)));
}

async fn nodes(store: Arc<dyn MetaStore>) {
    for id in [3, 1, 2] {
        store.register_node(node(id)).await.unwrap();
    }
    let listed: Vec<u32> = store.list_nodes().await.unwrap().iter().map(|n| n.id.0).collect();
    assert_eq!(listed, [1, 2, 3]);
    assert_eq!(store.get_node(NodeId(2)).await.unwrap(), node(2));
    assert_eq!(store.heartbeat(NodeId(2), 5000).await.unwrap().last_heartbeat_ms, 5000);
    assert_eq!(store.heartbeat(NodeId(2), 4000).await.unwrap().last_heartbeat_ms, 5000, "never backwards");
    assert_eq!(store.set_node_state(NodeId(2), NodeState::Draining, 1).await.unwrap().state, NodeState::Draining);
    // Down is dated when it starts, kept while it lasts and cleared when it ends.
    assert_eq!(store.set_node_state(NodeId(1), NodeState::Down, 7000).await.unwrap().down_since_ms, Some(7000));
    assert_eq!(store.set_node_state(NodeId(1), NodeState::Down, 9000).await.unwrap().down_since_ms, Some(7000));
    assert_eq!(store.set_node_state(NodeId(1), NodeState::Up, 9500).await.unwrap().down_since_ms, None);
    assert_eq!(store.set_node_state(NodeId(1), NodeState::Down, 9900).await.unwrap().down_since_ms, Some(9900));
    let stored = store.get_node(NodeId(2)).await.unwrap();
    assert_eq!((stored.state, stored.last_heartbeat_ms), (NodeState::Draining, 5000));
    // Re-registering replaces the record (a node restarted on a new port).
    let moved = NodeInfo { address: "127.0.0.1:9999".into(), ..node(2) };
    store.register_node(moved.clone()).await.unwrap();
    assert_eq!(store.get_node(NodeId(2)).await.unwrap(), moved);
    assert_eq!(store.get_node(NodeId(9)).await, Err(MetaError::NoSuchNode(9)));
    assert_eq!(store.heartbeat(NodeId(9), 1).await, Err(MetaError::NoSuchNode(9)));
    assert_eq!(store.set_node_state(NodeId(9), NodeState::Down, 1).await, Err(MetaError::NoSuchNode(9)));
    assert!(is_invalid(store.register_node(NodeInfo { address: " ".into(), ..node(9) }).await));
    // Concurrent heartbeats and a state change on one node: every read-modify-write lands.
    let beats: Vec<_> = (1..=10u64)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.heartbeat(NodeId(3), 10_000 + i).await.unwrap() })
        })
        .collect();
    let state = {
        let store = Arc::clone(&store);
        tokio::spawn(async move { store.set_node_state(NodeId(3), NodeState::Down, 1).await.unwrap() })
    };
    for beat in beats {
        beat.await.unwrap();
    }
    state.await.unwrap();
    let stored = store.get_node(NodeId(3)).await.unwrap();
    assert_eq!((stored.state, stored.last_heartbeat_ms), (NodeState::Down, 10_010));
}

pub fn upload(bucket: &str, key: &str) -> UploadMeta {
    UploadMeta {
        tags: Default::default(),
        upload_id: "ignored".into(),
        bucket: bucket.into(),
        key: key.into(),
        initiated_ms: 1_700_000_000_000,
        content_type: Some("video/mp4".into()),
        user_metadata: BTreeMap::from([("k".to_string(), "v".to_string())]),
        headers: ContentHeaders { content_disposition: Some("attachment".into()), ..ContentHeaders::default() },
        checksum: None,
    }
}

fn part(part_number: u16, etag: &str) -> PartMeta {
    PartMeta {
        part_number,
        size_bytes: 5 << 20,
        etag: etag.into(),
        last_modified_ms: 1_700_000_000_002,
        checksum: None,
        layout: object(5 << 20, u64::from(part_number)).layout,
    }
}

fn completed(pairs: &[(u16, &str)]) -> Vec<CompletedPart> {
    pairs.iter().map(|&(part_number, etag)| CompletedPart { part_number, etag: etag.into() }).collect()
}

async fn multipart(store: Arc<dyn MetaStore>) {
    store.create_bucket(bucket("mpu")).await.unwrap();
    let first = store.create_multipart(upload("mpu", "video.mp4")).await.unwrap();
    let second = store.create_multipart(upload("mpu", "video.mp4")).await.unwrap();
    let other = store.create_multipart(upload("mpu", "audio/a.mp3")).await.unwrap();
    assert_ne!(first.upload_id, second.upload_id);
    assert_eq!(first.upload_id.len(), 16);
    assert_eq!(store.get_multipart("mpu", "video.mp4", &first.upload_id).await.unwrap(), first);
    assert!(matches!(store.create_multipart(upload("nobucket", "k")).await, Err(MetaError::NoSuchBucket(_))));

    let listed: Vec<(String, String)> =
        store.list_uploads("mpu", "").await.unwrap().into_iter().map(|u| (u.key, u.upload_id)).collect();
    assert_eq!(
        listed,
        [
            ("audio/a.mp3".to_string(), other.upload_id.clone()),
            ("video.mp4".to_string(), first.upload_id.clone()),
            ("video.mp4".to_string(), second.upload_id.clone())
        ]
    );
    assert_eq!(store.list_uploads("mpu", "audio/").await.unwrap(), std::slice::from_ref(&other));

    let id = first.upload_id.clone();
    for (number, etag) in [(3, "e3"), (1, "e1"), (2, "e2-old")] {
        assert_eq!(store.put_part("mpu", "video.mp4", &id, part(number, etag)).await.unwrap(), None);
    }
    assert_eq!(store.put_part("mpu", "video.mp4", &id, part(2, "e2")).await.unwrap(), Some(part(2, "e2-old")));
    let parts = store.list_parts("mpu", "video.mp4", &id).await.unwrap();
    assert_eq!(
        parts.iter().map(|p| (p.part_number, p.etag.as_str())).collect::<Vec<_>>(),
        [(1, "e1"), (2, "e2"), (3, "e3")]
    );
    // Part numbers and upload ids are checked.
    assert!(is_invalid(store.put_part("mpu", "video.mp4", &id, part(0, "x")).await));
    assert!(is_invalid(store.put_part("mpu", "video.mp4", &id, part(10_001, "x")).await));
    store.put_part("mpu", "video.mp4", &second.upload_id, part(10_000, "max")).await.unwrap();
    assert!(matches!(
        store.put_part("mpu", "video.mp4", "ffffffffffffffff", part(1, "x")).await,
        Err(MetaError::NoSuchUpload(_))
    ));
    assert!(matches!(
        store.put_part("mpu", "video.mp4", "garbage/../x", part(1, "x")).await,
        Err(MetaError::NoSuchUpload(_))
    ));
    assert!(matches!(store.put_part("mpu", "wrong-key", &id, part(1, "x")).await, Err(MetaError::NoSuchUpload(_))));

    // Failed completions change nothing.
    let final_object = ObjectMeta { size_bytes: 10 << 20, etag: "combined-2".into(), ..object(10 << 20, 0) };
    let result = store
        .complete_multipart(
            "mpu",
            "video.mp4",
            &id,
            &completed(&[(1, "e1"), (2, "wrong")]),
            final_object.clone(),
            &NONE,
        )
        .await;
    assert!(matches!(result, Err(MetaError::InvalidPart { part_number: 2, .. })), "{result:?}");
    let result = store
        .complete_multipart("mpu", "video.mp4", &id, &completed(&[(1, "e1"), (4, "e4")]), final_object.clone(), &NONE)
        .await;
    assert!(matches!(result, Err(MetaError::InvalidPart { part_number: 4, .. })), "{result:?}");
    let result = store
        .complete_multipart("mpu", "video.mp4", &id, &completed(&[(2, "e2"), (1, "e1")]), final_object.clone(), &NONE)
        .await;
    assert_eq!(result, Err(MetaError::InvalidPartOrder));
    assert!(is_invalid(store.complete_multipart("mpu", "video.mp4", &id, &[], final_object.clone(), &NONE).await));
    assert_eq!(store.list_parts("mpu", "video.mp4", &id).await.unwrap().len(), 3);
    assert!(matches!(store.get_object("mpu", "video.mp4").await, Err(MetaError::NoSuchKey { .. })));

    // An existing object is replaced and returned; unused part 3 comes back for collection.
    store.put_object("mpu", "video.mp4", object(1, 1)).await.unwrap();
    let done = store
        .complete_multipart(
            "mpu",
            "video.mp4",
            &id,
            &completed(&[(1, "\"e1\""), (2, "e2")]),
            final_object.clone(),
            &NONE,
        )
        .await
        .unwrap();
    assert_eq!(done.previous, Some(object(1, 1)));
    assert_eq!(done.parts.iter().map(|p| p.part_number).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(store.get_object("mpu", "video.mp4").await.unwrap(), final_object);
    assert!(matches!(store.list_parts("mpu", "video.mp4", &id).await, Err(MetaError::NoSuchUpload(_))));
    assert!(matches!(
        store.complete_multipart("mpu", "video.mp4", &id, &completed(&[(1, "e1")]), final_object.clone(), &NONE).await,
        Err(MetaError::NoSuchUpload(_))
    ));
    assert!(matches!(store.put_part("mpu", "video.mp4", &id, part(5, "late")).await, Err(MetaError::NoSuchUpload(_))));

    // Abort returns the parts and removes the upload; aborting twice is NoSuchUpload.
    let aborted = store.abort_multipart("mpu", "video.mp4", &second.upload_id).await.unwrap();
    assert_eq!(aborted, [part(10_000, "max")]);
    assert!(matches!(
        store.abort_multipart("mpu", "video.mp4", &second.upload_id).await,
        Err(MetaError::NoSuchUpload(_))
    ));
    assert_eq!(store.list_uploads("mpu", "").await.unwrap(), std::slice::from_ref(&other));
    store.abort_multipart("mpu", "audio/a.mp3", &other.upload_id).await.unwrap();
    store.delete_object("mpu", "video.mp4").await.unwrap();
    store.delete_bucket("mpu").await.unwrap();
}

async fn leases(store: Arc<dyn MetaStore>) {
    let claim = |holder: &'static str, now_ms: u64| {
        let store = Arc::clone(&store);
        async move { store.claim_lease("stripe-gc", holder, now_ms, 1000).await.unwrap() }
    };
    let lease = |holder: &str, expires_ms| Lease { holder: holder.into(), expires_ms };
    assert_eq!(claim("a", 10_000).await, lease("a", 11_000), "nobody held it");
    assert_eq!(claim("b", 10_500).await, lease("a", 11_000), "a holds it: b is told so, nothing changes");
    assert_eq!(claim("a", 10_900).await, lease("a", 11_900), "a renews");
    assert_eq!(claim("b", 11_899).await, lease("a", 11_900));
    assert_eq!(claim("b", 11_900).await, lease("b", 12_900), "a's term lapsed: b takes over");
    assert_eq!(claim("a", 12_000).await, lease("b", 12_900));
    let other = store.claim_lease("other", "a", 12_000, 5).await.unwrap();
    assert_eq!(other, lease("a", 12_005), "leases are independent");
    assert!(is_invalid(store.claim_lease("", "a", 0, 1).await));
    assert!(is_invalid(store.claim_lease("x", "", 0, 1).await));
    assert!(is_invalid(store.claim_lease("x", "a", 0, 0).await));
    assert_eq!(claim("b", 12_100).await, lease("b", 13_100), "the refused claims changed nothing");
}

async fn config(store: Arc<dyn MetaStore>) {
    assert_eq!(store.get_config("policy").await.unwrap(), None);
    store.put_config("policy", "lmlf").await.unwrap();
    assert_eq!(store.get_config("policy").await.unwrap().as_deref(), Some("lmlf"));
    store.put_config("policy", "{\"name\": \"opt-lazy\"}").await.unwrap();
    assert_eq!(store.get_config("policy").await.unwrap().as_deref(), Some("{\"name\": \"opt-lazy\"}"));
    assert!(is_invalid(store.put_config("", "x").await));
    assert!(is_invalid(store.get_config(&"n".repeat(257)).await));
}

async fn node_directories(store: Arc<dyn MetaStore>) {
    store.register_node(node(4)).await.unwrap();
    let checking = store.set_node_checking(NodeId(4), 100).await.unwrap();
    assert_eq!(checking.checking_since_ms, Some(100));
    assert_eq!(store.set_node_checking(NodeId(4), 200).await.unwrap().checking_since_ms, Some(100), "kept");
    let directory = meta::AdmittedDirectory { directory_id: "d".into(), starts: 3, generation: 2, admitted_ms: 9 };
    let admitted = store.set_node_directory(NodeId(4), directory.clone()).await.unwrap();
    assert_eq!((admitted.directory, admitted.checking_since_ms), (Some(directory), None), "the check ends");
    assert!(matches!(store.set_node_checking(NodeId(5), 1).await, Err(MetaError::NoSuchNode(5))));
    // The first value set stays; racing callers all learn it.
    assert_eq!(store.put_config_if_absent("cluster-id", "a").await.unwrap(), "a");
    assert_eq!(store.put_config_if_absent("cluster-id", "b").await.unwrap(), "a");
    assert_eq!(store.get_config("cluster-id").await.unwrap().as_deref(), Some("a"));
}

async fn records_export_and_import(store: Arc<dyn MetaStore>) {
    store.create_bucket(bucket("exported")).await.unwrap();
    for i in 0..25 {
        store.put_object("exported", &format!("k{i:02}"), object(i, 1)).await.unwrap();
    }
    let mut records = Vec::new();
    let mut after = None;
    for _page in 0..100 {
        let page = store.export_records(after.clone(), 7).await.unwrap();
        let Some((last, _)) = page.last() else { break };
        after = Some(last.clone());
        records.extend(page);
    }
    assert!(records.windows(2).all(|pair| pair[0].0 < pair[1].0), "in key order");
    let objects: Vec<_> = records.iter().filter(|(key, _)| key.starts_with(b"object/exported/")).collect();
    assert_eq!(objects.len(), 25);
    // Written back elsewhere under another bucket's keys, they read as the objects they were.
    let copied: Vec<_> = objects
        .iter()
        .map(|(key, value)| ([b"object/copy/".as_slice(), &key[b"object/exported/".len()..]].concat(), value.clone()))
        .chain([(b"bucket/copy".to_vec(), meta::format::encode(&bucket("copy")))])
        .collect();
    store.import_records(copied).await.unwrap();
    assert_eq!(store.get_object("copy", "k07").await.unwrap(), object(7, 1));
    assert_eq!(store.list_objects("copy", &ListObjectsQuery::default()).await.unwrap().objects.len(), 25);
}

async fn bucket_classes(store: Arc<dyn MetaStore>) {
    store.create_bucket(bucket("gold-one")).await.unwrap();
    store.create_bucket(bucket("plain-one")).await.unwrap();
    store.set_bucket_write_ack("gold-one", WriteAck::K).await.unwrap();
    let classed = store.set_bucket_class("gold-one", Some(2)).await.unwrap();
    // The class is kept beside the other settings, which it leaves alone.
    assert_eq!(classed, BucketMeta { write_ack: WriteAck::K, class: Some(2), ..bucket("gold-one") });
    assert_eq!(store.get_bucket("gold-one").await.unwrap(), classed);
    assert_eq!(store.get_bucket("plain-one").await.unwrap().class, None, "others untouched");
    for bad in [0, meta::validate::MAX_CLASS + 1] {
        assert!(is_invalid(store.set_bucket_class("gold-one", Some(bad)).await), "class {bad}");
    }
    assert_eq!(store.get_bucket("gold-one").await.unwrap(), classed, "a refused class changes nothing");
    assert_eq!(store.set_bucket_class("nope-nope", Some(1)).await, Err(MetaError::NoSuchBucket("nope-nope".into())));
    let cleared = store.set_bucket_class("gold-one", None).await.unwrap();
    assert_eq!(cleared, BucketMeta { write_ack: WriteAck::K, ..bucket("gold-one") });
    let names: Vec<Option<u8>> = store.list_buckets().await.unwrap().into_iter().map(|b| b.class).collect();
    assert_eq!(names, [None, None]);
}

async fn bucket_profiles(store: Arc<dyn MetaStore>) {
    let fast = StoredProfile { name: "fast".into(), layers: r#"{"selection":"lmlf-pw2"}"#.into() };
    store.create_bucket(bucket("tuned-one")).await.unwrap();
    assert!(is_invalid(store.set_bucket_profile("tuned-one", None, Some("fast")).await), "a profile not stored");
    assert_eq!(store.get_bucket("tuned-one").await.unwrap().profile, None, "a refused profile changes nothing");
    assert!(is_invalid(store.put_profile(StoredProfile { name: "Bad Name".into(), ..fast.clone() }).await));
    store.put_profile(fast.clone()).await.unwrap();
    store.put_profile(StoredProfile { name: "alpha".into(), layers: "{}".into() }).await.unwrap();
    let names: Vec<String> = store.list_profiles().await.unwrap().into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["alpha", "fast"]);
    let tuned = store.set_bucket_profile("tuned-one", None, Some("fast")).await.unwrap();
    assert_eq!(tuned, BucketMeta { profile: Some("fast".into()), ..bucket("tuned-one") });
    assert_eq!(store.get_bucket("tuned-one").await.unwrap(), tuned);
    assert!(is_invalid(store.delete_profile("fast").await), "a profile in use stays");
    assert_eq!(store.list_profiles().await.unwrap().len(), 2);
    let replaced = StoredProfile { layers: r#"{"selection":"llf"}"#.into(), ..fast };
    store.put_profile(replaced.clone()).await.unwrap();
    assert_eq!(store.list_profiles().await.unwrap()[1], replaced);
    assert_eq!(store.set_bucket_profile("tuned-one", None, None).await.unwrap().profile, None);
    // A class's own profile: set, refused outside the classes, kept through a delete, cleared.
    let classed = store.set_bucket_profile("tuned-one", Some(2), Some("fast")).await.unwrap();
    assert_eq!(classed.class_profiles, [(2, "fast".to_string())].into());
    assert_eq!((classed.profile_for(2), classed.profile_for(1)), (Some("fast"), None));
    for bad in [0, meta::validate::MAX_CLASS + 1] {
        assert!(is_invalid(store.set_bucket_profile("tuned-one", Some(bad), Some("alpha")).await), "class {bad}");
    }
    assert!(is_invalid(store.set_bucket_profile("tuned-one", Some(3), Some("never-set")).await));
    assert_eq!(store.get_bucket("tuned-one").await.unwrap(), classed, "a refused change changes nothing");
    assert!(is_invalid(store.delete_profile("fast").await), "a class's profile stays");
    let both = store.set_bucket_profile("tuned-one", None, Some("alpha")).await.unwrap();
    assert_eq!((both.profile_for(2), both.profile_for(1)), (Some("fast"), Some("alpha")));
    let cleared = store.set_bucket_profile("tuned-one", Some(2), None).await.unwrap();
    assert_eq!(cleared, BucketMeta { profile: Some("alpha".into()), ..bucket("tuned-one") });
    assert_eq!(store.set_bucket_profile("tuned-one", None, None).await.unwrap(), bucket("tuned-one"));
    store.delete_profile("fast").await.unwrap();
    store.delete_profile("never-set").await.unwrap();
    let names: Vec<String> = store.list_profiles().await.unwrap().into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["alpha"]);
}

async fn access_key_classes(store: Arc<dyn MetaStore>) {
    assert_eq!(store.list_access_key_classes().await.unwrap(), []);
    assert_eq!(store.get_access_key_class("AKIDEXAMPLE").await.unwrap(), None);
    store.set_access_key_class("AKIDEXAMPLE", Some(2)).await.unwrap();
    store.set_access_key_class("AKHIGH", Some(1)).await.unwrap();
    store.set_access_key_class("AKHIGH", Some(3)).await.unwrap();
    assert_eq!(store.get_access_key_class("AKIDEXAMPLE").await.unwrap(), Some(2));
    let entry = |key: &str, class| AccessKeyClass { access_key: key.into(), class };
    assert_eq!(
        store.list_access_key_classes().await.unwrap(),
        [entry("AKHIGH", 3), entry("AKIDEXAMPLE", 2)],
        "sorted by key, the last set kept"
    );
    for (key, class) in [("", Some(1)), ("has space", Some(1)), (&"K".repeat(129), Some(1)), ("AKHIGH", Some(0))] {
        assert!(is_invalid(store.set_access_key_class(key, class).await), "{key:?} {class:?}");
    }
    assert!(is_invalid(store.set_access_key_class("AKHIGH", Some(meta::validate::MAX_CLASS + 1)).await));
    assert_eq!(store.get_access_key_class("AKHIGH").await.unwrap(), Some(3), "a refused change changes nothing");
    store.set_access_key_class("AKHIGH", None).await.unwrap();
    store.set_access_key_class("AKHIGH", None).await.unwrap();
    assert_eq!(store.list_access_key_classes().await.unwrap(), [entry("AKIDEXAMPLE", 2)]);
    // The table lives apart from buckets and config.
    assert_eq!(store.list_buckets().await.unwrap(), []);
}
