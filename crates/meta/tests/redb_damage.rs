//! A damaged `meta.redb`: bytes flipped where object keys and stripe fields are stored, the file
//! truncated, values written before seals. Every damaged record is an error when read and every
//! lookup it might hide answers `Damaged`, never "no such key" or wrong data; a file that cannot be
//! walked is refused with what to do, never a panic.

#[path = "common/conformance.rs"]
#[allow(dead_code)]
mod conformance;

use meta::{ListObjectsQuery, MetaError, MetaStore, RedbStore, StripeId};

const OBJECTS: usize = 40;

/// A store with `OBJECTS` objects (keys `key-00` ..) and one stripe per object; closed on return.
async fn written_store(dir: &std::path::Path) -> Vec<StripeId> {
    let store = RedbStore::open(dir).unwrap();
    store.create_bucket(conformance::bucket("photos")).await.unwrap();
    let mut stripes = Vec::new();
    for i in 0..OBJECTS {
        let id = store.allocate_stripe_id().await.unwrap();
        store.create_stripe(conformance::stripe(id, [1, 2, 3, 4, 5, 6, 7, 8, 9])).await.unwrap();
        store.put_object("photos", &format!("key-{i:02}"), conformance::object(100 + i as u64, id.0)).await.unwrap();
        stripes.push(id);
    }
    stripes
}

/// Flips one byte in every place of the file that holds `needle`; how many places.
fn flip_everywhere(path: &std::path::Path, needle: &[u8], offset_in_needle: usize) -> usize {
    let mut bytes = std::fs::read(path).unwrap();
    let places: Vec<usize> =
        bytes.windows(needle.len()).enumerate().filter(|(_, w)| *w == needle).map(|(i, _)| i).collect();
    for &place in &places {
        bytes[place + offset_in_needle] ^= 0x20;
    }
    std::fs::write(path, bytes).unwrap();
    places.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_object_key_is_never_taken_for_a_missing_object() {
    let dir = tempfile::tempdir().unwrap();
    written_store(dir.path()).await;
    let path = dir.path().join(meta::DATABASE_FILE_NAME);
    assert!(flip_everywhere(&path, b"photos/key-17", 11) > 0, "the key is in the file");
    let store = RedbStore::open(dir.path()).expect("a damaged record does not stop the store opening");
    let damage = store.damage();
    assert_eq!(damage.damaged_records, 1, "{damage:?}");
    assert_eq!(damage.records_checked.map(|n| n > OBJECTS as u64), Some(true));
    match store.get_object("photos", "key-17").await {
        Err(MetaError::Damaged(why)) => assert!(why.contains("damaged"), "{why}"),
        other => panic!("an object whose record is damaged answered {other:?}"),
    }
    // Intact objects still read; a listing over the damage fails rather than leave the object out.
    assert_eq!(store.get_object("photos", "key-03").await.unwrap().size_bytes, 103);
    assert!(matches!(store.list_objects("photos", &ListObjectsQuery::default()).await, Err(MetaError::Damaged(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flipped_digits_of_stripe_fields_are_damage_not_other_data() {
    let dir = tempfile::tempdir().unwrap();
    let stripes = written_store(dir.path()).await;
    let path = dir.path().join(meta::DATABASE_FILE_NAME);
    // The object records name their stripe as `"stripe":<id>`: a digit changed points elsewhere.
    let needle = format!("\"stripe\":{}", stripes[5].0);
    assert!(flip_everywhere(&path, needle.as_bytes(), needle.len() - 1) > 0);
    let unit_bytes = b"\"unit_bytes\":1048576";
    assert!(flip_everywhere(&path, unit_bytes, unit_bytes.len() - 2) > 0, "every stripe record's unit size");
    let store = RedbStore::open(dir.path()).unwrap();
    for (i, stripe) in stripes.iter().enumerate() {
        match store.get_object("photos", &format!("key-{i:02}")).await {
            Ok(meta) => assert_eq!(meta.layout.stripes(), [*stripe], "key-{i:02} read as another object"),
            Err(MetaError::Damaged(_)) => assert_eq!(i, 5, "only key-05's record was changed"),
            Err(other) => panic!("key-{i:02}: {other}"),
        }
    }
    for id in stripes {
        assert!(matches!(store.get_stripe(id).await, Err(MetaError::Damaged(_))), "stripe {id}");
    }
    // A stripe lookup that misses is doubtful now: a collector must not take it for gone.
    assert!(matches!(store.get_stripe(StripeId(1 << 40)).await, Err(MetaError::Damaged(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_file_is_refused_with_what_to_do_not_a_panic() {
    for fraction in [2u64, 3, 10] {
        let dir = tempfile::tempdir().unwrap();
        written_store(dir.path()).await;
        let path = dir.path().join(meta::DATABASE_FILE_NAME);
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len / fraction).unwrap();
        match RedbStore::open(dir.path()) {
            Err(MetaError::Damaged(why)) => assert!(why.contains("lowtail admin meta rebuild"), "{why}"),
            Err(other) => panic!("1/{fraction} of the file: {other}"),
            Ok(_) => panic!("1/{fraction} of the file opened"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_written_before_seals_are_sealed_on_open_and_checked_after() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(meta::DATABASE_FILE_NAME);
    {
        // What a store before seals held: format-1 records and empty index values, no marker.
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let table: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("lowtail-meta");
            let mut table = txn.open_table(table).unwrap();
            let bucket = meta::format::encode(&conformance::bucket("old"));
            table.insert(b"bucket/old".as_slice(), bucket.as_slice()).unwrap();
            let object = meta::format::encode(&conformance::object(7, 1));
            table.insert(b"object/old/k".as_slice(), object.as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    {
        let store = RedbStore::open(dir.path()).unwrap();
        assert_eq!(store.get_object("old", "k").await.unwrap().size_bytes, 7);
        assert_eq!(store.damage().damaged_records, 0);
    }
    // Sealed now: a flipped byte in the old record is found.
    assert!(flip_everywhere(&path, b"\"size_bytes\":7", 13) > 0);
    let store = RedbStore::open(dir.path()).unwrap();
    assert!(matches!(store.get_object("old", "k").await, Err(MetaError::Damaged(_))));
    assert_eq!(store.damage().damaged_records, 1);
}
