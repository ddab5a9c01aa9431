//! End-to-end tests of the S3 API: a real server on 127.0.0.1 (redb metadata, in-memory object bytes)
//! driven by `aws-sdk-s3` over plain HTTP, plus raw HTTP for presigned URLs and unsigned requests.

mod s3_common;

use std::time::{Duration, SystemTime};

use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::{ByteStream, DateTime};
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, Delete, ObjectIdentifier};
use bytes::Bytes;
use gateway::s3::S3Options;
use s3_common::*;

type Client = aws_sdk_s3::Client;

async fn put(client: &Client, bucket: &str, key: &str, body: Vec<u8>) -> String {
    let output = client.put_object().bucket(bucket).key(key).body(ByteStream::from(body)).send().await.expect("put");
    output.e_tag().expect("etag").to_string()
}

async fn get(client: &Client, bucket: &str, key: &str) -> Vec<u8> {
    let output = client.get_object().bucket(bucket).key(key).send().await.expect("get");
    output.body.collect().await.expect("body").into_bytes().to_vec()
}

async fn get_range(client: &Client, bucket: &str, key: &str, range: &str) -> (Option<String>, Vec<u8>) {
    let output = client.get_object().bucket(bucket).key(key).range(range).send().await.expect("ranged get");
    let content_range = output.content_range().map(str::to_string);
    (content_range, output.body.collect().await.expect("body").into_bytes().to_vec())
}

async fn keys_v2(client: &Client, bucket: &str) -> Vec<String> {
    let output = client.list_objects_v2().bucket(bucket).send().await.expect("list");
    output.contents().iter().filter_map(|object| object.key().map(str::to_string)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_lifecycle_and_error_codes() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("alpha").send().await.expect("create");
    client.head_bucket().bucket("alpha").send().await.expect("head");
    let buckets = client.list_buckets().send().await.expect("list buckets");
    assert_eq!(buckets.buckets().iter().filter_map(|bucket| bucket.name()).collect::<Vec<_>>(), vec!["alpha"]);
    let location = client.get_bucket_location().bucket("alpha").send().await.expect("location");
    assert!(location.location_constraint().is_none_or(|constraint| constraint.as_str().is_empty()));

    let again = client.create_bucket().bucket("alpha").send().await.unwrap_err();
    assert_eq!(failure(&again), (409, "BucketAlreadyOwnedByYou".into()));
    let bad_name = client.create_bucket().bucket("Bad_Name").send().await.unwrap_err();
    assert_eq!(failure(&bad_name), (400, "InvalidBucketName".into()));

    put(&client, "alpha", "k", b"v".to_vec()).await;
    let not_empty = client.delete_bucket().bucket("alpha").send().await.unwrap_err();
    assert_eq!(failure(&not_empty), (409, "BucketNotEmpty".into()));
    let missing_key = client.get_object().bucket("alpha").key("nope").send().await.unwrap_err();
    assert_eq!(failure(&missing_key), (404, "NoSuchKey".into()));
    let missing_bucket = client.get_object().bucket("nowhere").key("k").send().await.unwrap_err();
    assert_eq!(failure(&missing_bucket), (404, "NoSuchBucket".into()));
    let missing_bucket =
        client.put_object().bucket("nowhere").key("k").body(ByteStream::from_static(b"x")).send().await;
    assert_eq!(failure(&missing_bucket.unwrap_err()), (404, "NoSuchBucket".into()));
    let missing_list = client.list_objects_v2().bucket("nowhere").send().await.unwrap_err();
    assert_eq!(failure(&missing_list), (404, "NoSuchBucket".into()));

    client.delete_object().bucket("alpha").key("k").send().await.expect("delete");
    // Deleting an absent key succeeds, as in S3.
    client.delete_object().bucket("alpha").key("k").send().await.expect("delete again");
    client.delete_bucket().bucket("alpha").send().await.expect("delete bucket");
    let gone = client.head_bucket().bucket("alpha").send().await.unwrap_err();
    assert_eq!(failure(&gone).0, 404);
    assert_eq!(server.data.live_stripes(), 0, "deleted objects are released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_of_every_size_round_trip_and_overwrites_release() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("sizes").send().await.expect("create");
    for (size, seed) in [(0usize, 1u8), (1, 2), (5 << 20, 3), (21 << 20, 4)] {
        let body = pattern(size, seed);
        let key = format!("object-{size}");
        let etag = put(&client, "sizes", &key, body.clone()).await;
        assert_eq!(etag, format!("\"{}\"", md5_hex(&body)), "ETag is the quoted MD5");
        let read = get(&client, "sizes", &key).await;
        assert!(read == body, "bytes of a {size}-byte object differ");
        let head = client.head_object().bucket("sizes").key(&key).send().await.expect("head");
        assert_eq!(head.content_length(), Some(size as i64));
        assert_eq!(head.e_tag(), Some(etag.as_str()));
    }

    // Content-Type and user metadata round trip, through GET and HEAD.
    client
        .put_object()
        .bucket("sizes")
        .key("typed")
        .content_type("text/plain; charset=utf-8")
        .metadata("Colour", "blue")
        .metadata("owner-id", "42")
        .body(ByteStream::from_static(b"hello"))
        .send()
        .await
        .expect("put with metadata");
    let got = client.get_object().bucket("sizes").key("typed").send().await.expect("get");
    assert_eq!(got.content_type(), Some("text/plain; charset=utf-8"));
    let metadata = got.metadata().expect("metadata");
    assert_eq!(metadata.get("colour").map(String::as_str), Some("blue"));
    assert_eq!(metadata.get("owner-id").map(String::as_str), Some("42"));
    let head = client.head_object().bucket("sizes").key("typed").send().await.expect("head");
    assert_eq!(head.metadata().and_then(|m| m.get("colour")).map(String::as_str), Some("blue"));

    // An overwrite releases the old bytes once the new version is committed.
    let before = server.data.live_bytes();
    put(&client, "sizes", &format!("object-{}", 5 << 20), b"small now".to_vec()).await;
    assert_eq!(server.data.live_bytes(), before - (5 << 20) + 9);
    assert_eq!(get(&client, "sizes", &format!("object-{}", 5 << 20)).await, b"small now");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranged_reads() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("ranges").send().await.expect("create");
    let body = pattern(3 << 20, 7);
    put(&client, "ranges", "r", body.clone()).await;
    let size = body.len();
    let (range, bytes) = get_range(&client, "ranges", "r", "bytes=0-0").await;
    assert_eq!((range.as_deref(), bytes.as_slice()), (Some(format!("bytes 0-0/{size}").as_str()), &body[..1]));
    let (range, bytes) = get_range(&client, "ranges", "r", "bytes=-100").await;
    assert_eq!(range, Some(format!("bytes {}-{}/{size}", size - 100, size - 1)));
    assert_eq!(bytes, &body[size - 100..]);
    // Across a segment boundary (segments are 1 MiB).
    let (start, end) = ((1 << 20) - 10, (2 << 20) + 10);
    let (_, bytes) = get_range(&client, "ranges", "r", &format!("bytes={start}-{end}")).await;
    assert_eq!(bytes, &body[start..=end]);
    let (range, bytes) = get_range(&client, "ranges", "r", &format!("bytes={}-", size - 5)).await;
    assert_eq!((range, bytes.as_slice()), (Some(format!("bytes {}-{}/{size}", size - 5, size - 1)), &body[size - 5..]));
    // A last byte past the end is clamped, as in S3.
    let (_, bytes) = get_range(&client, "ranges", "r", &format!("bytes={}-{}", size - 2, size + 100)).await;
    assert_eq!(bytes, &body[size - 2..]);
    let past_end = client.get_object().bucket("ranges").key("r").range(format!("bytes={size}-")).send().await;
    assert_eq!(failure(&past_end.unwrap_err()), (416, "InvalidRange".into()));
    put(&client, "ranges", "empty", Vec::new()).await;
    let on_empty = client.get_object().bucket("ranges").key("empty").range("bytes=0-0").send().await;
    assert_eq!(failure(&on_empty.unwrap_err()).0, 416);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_requests() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("cond").send().await.expect("create");
    let etag = put(&client, "cond", "c", b"conditional".to_vec()).await;
    let past = DateTime::from(SystemTime::now() - Duration::from_secs(3600));
    let future = DateTime::from(SystemTime::now() + Duration::from_secs(3600));

    let get = || client.get_object().bucket("cond").key("c");
    get().if_match(&etag).send().await.expect("If-Match with the ETag");
    assert_eq!(failure(&get().if_match("\"0000\"").send().await.unwrap_err()).0, 412);
    assert_eq!(failure(&get().if_none_match(&etag).send().await.unwrap_err()).0, 304);
    get().if_none_match("\"0000\"").send().await.expect("If-None-Match with another ETag");
    assert_eq!(failure(&get().if_modified_since(future).send().await.unwrap_err()).0, 304);
    get().if_modified_since(past).send().await.expect("modified since an hour ago");
    assert_eq!(failure(&get().if_unmodified_since(past).send().await.unwrap_err()).0, 412);
    get().if_unmodified_since(future).send().await.expect("unmodified since");
    // HEAD obeys the same conditions.
    let head = || client.head_object().bucket("cond").key("c");
    assert_eq!(failure(&head().if_none_match(&etag).send().await.unwrap_err()).0, 304);
    assert_eq!(failure(&head().if_match("\"0000\"").send().await.unwrap_err()).0, 412);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_v1_v2_and_versions() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("lists").send().await.expect("create");
    let keys = ["a/1", "a/2", "a/b/3", "b", "c/1", "c/2", "d"];
    for key in keys {
        put(&client, "lists", key, key.as_bytes().to_vec()).await;
    }
    assert_eq!(keys_v2(&client, "lists").await, keys);

    // Prefix and delimiter.
    let output = client.list_objects_v2().bucket("lists").prefix("a/").delimiter("/").send().await.expect("list");
    let listed: Vec<_> = output.contents().iter().filter_map(|o| o.key()).collect();
    let prefixes: Vec<_> = output.common_prefixes().iter().filter_map(|p| p.prefix()).collect();
    assert_eq!((listed, prefixes), (vec!["a/1", "a/2"], vec!["a/b/"]));
    assert_eq!(output.contents()[0].size(), Some(3));

    // v2 pagination with a delimiter: entries are keys and common prefixes, two per page.
    let mut entries = Vec::new();
    let mut token: Option<String> = None;
    for _page in 0..10 {
        let output = client
            .list_objects_v2()
            .bucket("lists")
            .delimiter("/")
            .max_keys(2)
            .set_continuation_token(token.clone())
            .send()
            .await
            .expect("page");
        entries.extend(output.contents().iter().filter_map(|o| o.key().map(str::to_string)));
        entries.extend(output.common_prefixes().iter().filter_map(|p| p.prefix().map(str::to_string)));
        token = output.next_continuation_token().map(str::to_string);
        if !output.is_truncated().unwrap_or(false) {
            break;
        }
    }
    entries.sort();
    assert_eq!(entries, vec!["a/", "b", "c/", "d"]);
    let after = client.list_objects_v2().bucket("lists").start_after("c/1").send().await.expect("start after");
    assert_eq!(after.contents().iter().filter_map(|o| o.key()).collect::<Vec<_>>(), vec!["c/2", "d"]);

    // v1 with markers, with and without a delimiter.
    for delimiter in [None, Some("/")] {
        let mut entries = Vec::new();
        let mut marker: Option<String> = None;
        for _page in 0..10 {
            let output = client
                .list_objects()
                .bucket("lists")
                .set_delimiter(delimiter.map(str::to_string))
                .max_keys(2)
                .set_marker(marker.clone())
                .send()
                .await
                .expect("v1 page");
            entries.extend(output.contents().iter().filter_map(|o| o.key().map(str::to_string)));
            entries.extend(output.common_prefixes().iter().filter_map(|p| p.prefix().map(str::to_string)));
            marker = output.next_marker().map(str::to_string);
            if !output.is_truncated().unwrap_or(false) {
                break;
            }
        }
        entries.sort();
        let expected: Vec<&str> = if delimiter.is_some() { vec!["a/", "b", "c/", "d"] } else { keys.to_vec() };
        assert_eq!(entries, expected, "v1 with delimiter {delimiter:?}");
    }

    // ListObjectVersions on an unversioned bucket: each object once, version "null", latest.
    let versions = client.list_object_versions().bucket("lists").prefix("c/").send().await.expect("versions");
    let listed: Vec<_> = versions
        .versions()
        .iter()
        .map(|version| (version.key().unwrap_or(""), version.version_id().unwrap_or(""), version.is_latest()))
        .collect();
    assert_eq!(listed, vec![("c/1", "null", Some(true)), ("c/2", "null", Some(true))]);
    let paged = client.list_object_versions().bucket("lists").max_keys(3).send().await.expect("versions page");
    assert_eq!(paged.is_truncated(), Some(true));
    assert_eq!(paged.next_key_marker(), Some("a/b/3"));
    let rest = client.list_object_versions().bucket("lists").key_marker("a/b/3").send().await.expect("rest");
    assert_eq!(rest.versions().len(), 4);
}

/// GetBucketVersioning answers what S3 answers for a bucket whose versioning was never enabled (no
/// `Status`), not NotImplemented: rclone's purge asks it first and logs an error on NotImplemented.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_versioning_is_never_enabled() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("plain").send().await.expect("create");
    let versioning = client.get_bucket_versioning().bucket("plain").send().await.expect("versioning");
    assert_eq!((versioning.status(), versioning.mfa_delete()), (None, None));
    let missing = client.get_bucket_versioning().bucket("nowhere").send().await.unwrap_err();
    assert_eq!(failure(&missing), (404, "NoSuchBucket".into()));
}

/// Versions the store keeps (a bucket's versioning set through the store: PutBucketVersioning is
/// not accepted until the rest of versioning is built, docs/versioning.md) are read, copied and
/// deleted by version id, with the ids and delete markers S3 answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_ids_name_the_stores_versions() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("ver").send().await.expect("create");
    server.meta.set_bucket_versioning("ver", meta::Versioning::Enabled).await.expect("enable");
    let put_version = async |body: &'static [u8]| {
        let put = client.put_object().bucket("ver").key("k").body(ByteStream::from_static(body)).send().await;
        put.expect("put").version_id().expect("a version id").to_string()
    };
    let (one, two) = (put_version(b"one").await, put_version(b"two").await);
    assert_ne!(one, two);
    let current = client.get_object().bucket("ver").key("k").send().await.expect("get");
    assert_eq!(current.version_id(), Some(two.as_str()));
    let old = client.get_object().bucket("ver").key("k").version_id(&one).send().await.expect("get v1");
    assert_eq!(old.body.collect().await.unwrap().into_bytes().as_ref(), b"one");
    let head = client.head_object().bucket("ver").key("k").version_id(&one).send().await.expect("head v1");
    assert_eq!((head.version_id(), head.content_length()), (Some(one.as_str()), Some(3)));
    let copied =
        client.copy_object().bucket("ver").key("copy").copy_source(format!("ver/k?versionId={one}")).send().await;
    assert_eq!(copied.expect("copy").copy_source_version_id(), Some(one.as_str()));
    let copy = client.get_object().bucket("ver").key("copy").send().await.expect("get copy");
    assert_eq!(copy.body.collect().await.unwrap().into_bytes().as_ref(), b"one");

    // A delete writes a marker: the key reads absent, the marker is not readable by its id.
    let deleted = client.delete_object().bucket("ver").key("k").send().await.expect("delete");
    assert_eq!(deleted.delete_marker(), Some(true));
    let marker = deleted.version_id().expect("the marker's id").to_string();
    let absent = client.get_object().bucket("ver").key("k").send().await.unwrap_err();
    assert_eq!(failure(&absent), (404, "NoSuchKey".into()));
    let by_id = client.get_object().bucket("ver").key("k").version_id(&marker).send().await.unwrap_err();
    assert_eq!(failure(&by_id), (405, "MethodNotAllowed".into()));
    // Deleting the marker brings the newest version back; deleting a version removes it only.
    let unmarked = client.delete_object().bucket("ver").key("k").version_id(&marker).send().await.expect("unmark");
    assert_eq!((unmarked.delete_marker(), unmarked.version_id()), (Some(true), Some(marker.as_str())));
    assert_eq!(get(&client, "ver", "k").await, b"two");
    client.delete_object().bucket("ver").key("k").version_id(&one).send().await.expect("delete v1");
    let gone = client.get_object().bucket("ver").key("k").version_id(&one).send().await.unwrap_err();
    assert_eq!(failure(&gone), (404, "NoSuchVersion".into()));
    assert_eq!(get(&client, "ver", "k").await, b"two", "deleting another version leaves the current one");
    let ids = server.meta.key_versions("ver", "k").await.unwrap();
    assert_eq!(ids.iter().map(|v| v.version.id_or_null()).collect::<Vec<_>>(), [two.as_str()]);
}

/// GetObjectTagging of an object written without tags answers an empty tag set: aws-cli asks it
/// before every multipart server-side copy. (Tags themselves: tests/s3compat/test_tagging.py.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untagged_object_answers_an_empty_tag_set() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("tags").send().await.expect("create");
    put(&client, "tags", "k", b"v".to_vec()).await;
    let tagging = client.get_object_tagging().bucket("tags").key("k").send().await.expect("tagging");
    assert!(tagging.tag_set().is_empty());
    let missing = client.get_object_tagging().bucket("tags").key("absent").send().await.unwrap_err();
    assert_eq!(failure(&missing), (404, "NoSuchKey".into()));
    let missing = client.get_object_tagging().bucket("nowhere").key("k").send().await.unwrap_err();
    assert_eq!(failure(&missing), (404, "NoSuchBucket".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_uploads() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("multi").send().await.expect("create");
    let parts = [pattern(5 << 20, 1), pattern(5 << 20, 2), pattern(1 << 20, 3)];
    let created = client.create_multipart_upload().bucket("multi").key("big").content_type("application/x-test").send();
    let upload_id = created.await.expect("create upload").upload_id().expect("id").to_string();
    let mut completed = Vec::new();
    for (index, part) in parts.iter().enumerate() {
        let number = index as i32 + 1;
        let output = client
            .upload_part()
            .bucket("multi")
            .key("big")
            .upload_id(&upload_id)
            .part_number(number)
            .body(ByteStream::from(part.clone()))
            .send()
            .await
            .expect("upload part");
        assert_eq!(output.e_tag(), Some(format!("\"{}\"", md5_hex(part)).as_str()));
        completed.push(CompletedPart::builder().part_number(number).e_tag(output.e_tag().unwrap()).build());
    }
    // A fourth part the completion will not name: released on completion.
    let extra = client.upload_part().bucket("multi").key("big").upload_id(&upload_id).part_number(4);
    extra.body(ByteStream::from_static(b"never used")).send().await.expect("extra part");

    let uploads = client.list_multipart_uploads().bucket("multi").send().await.expect("list uploads");
    assert_eq!(uploads.uploads().iter().filter_map(|u| u.upload_id()).collect::<Vec<_>>(), vec![upload_id.as_str()]);
    let listed = client.list_parts().bucket("multi").key("big").upload_id(&upload_id).send().await.expect("parts");
    let sizes: Vec<_> = listed.parts().iter().map(|part| (part.part_number(), part.size())).collect();
    assert_eq!(
        sizes,
        vec![(Some(1), Some(5 << 20)), (Some(2), Some(5 << 20)), (Some(3), Some(1 << 20)), (Some(4), Some(10))]
    );
    let page =
        client.list_parts().bucket("multi").key("big").upload_id(&upload_id).max_parts(2).send().await.expect("page");
    assert_eq!((page.parts().len(), page.is_truncated(), page.next_part_number_marker()), (2, Some(true), Some("2")));

    // Out of order → InvalidPartOrder; a wrong ETag → InvalidPart.
    let reversed =
        CompletedMultipartUpload::builder().set_parts(Some(completed.iter().rev().cloned().collect())).build();
    let complete = || client.complete_multipart_upload().bucket("multi").key("big").upload_id(&upload_id);
    assert_eq!(
        failure(&complete().multipart_upload(reversed).send().await.unwrap_err()),
        (400, "InvalidPartOrder".into())
    );
    let wrong = CompletedMultipartUpload::builder()
        .parts(CompletedPart::builder().part_number(1).e_tag("\"00000000000000000000000000000000\"").build())
        .build();
    assert_eq!(failure(&complete().multipart_upload(wrong).send().await.unwrap_err()), (400, "InvalidPart".into()));

    let upload = CompletedMultipartUpload::builder().set_parts(Some(completed)).build();
    let done = complete().multipart_upload(upload).send().await.expect("complete");
    let etag = done.e_tag().expect("etag").to_string();
    assert!(etag.ends_with("-3\""), "{etag}");
    let whole: Vec<u8> = parts.concat();
    assert!(get(&client, "multi", "big").await == whole, "completed object bytes differ");
    let head = client.head_object().bucket("multi").key("big").send().await.expect("head");
    assert_eq!(
        (head.content_length(), head.e_tag(), head.content_type()),
        (Some(whole.len() as i64), Some(etag.as_str()), Some("application/x-test"))
    );
    let (_, bytes) = get_range(&client, "multi", "big", &format!("bytes={}-{}", (5 << 20) - 3, (5 << 20) + 3)).await;
    assert_eq!(bytes, &whole[(5 << 20) - 3..=(5 << 20) + 3]);
    assert_eq!(server.data.live_bytes(), whole.len() as u64, "the unnamed part was released");
    let after = client.list_multipart_uploads().bucket("multi").send().await.expect("list uploads");
    assert!(after.uploads().is_empty());

    // Abort releases the parts; the upload is gone afterwards.
    let aborted = client.create_multipart_upload().bucket("multi").key("gone").send().await.expect("create");
    let aborted_id = aborted.upload_id().unwrap().to_string();
    client
        .upload_part()
        .bucket("multi")
        .key("gone")
        .upload_id(&aborted_id)
        .part_number(1)
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .expect("part");
    client.abort_multipart_upload().bucket("multi").key("gone").upload_id(&aborted_id).send().await.expect("abort");
    assert_eq!(server.data.live_bytes(), whole.len() as u64);
    let listed = client.list_parts().bucket("multi").key("gone").upload_id(&aborted_id).send().await.unwrap_err();
    assert_eq!(failure(&listed), (404, "NoSuchUpload".into()));

    // A part below 5 MiB that is not the last → EntityTooSmall.
    let small = client.create_multipart_upload().bucket("multi").key("small").send().await.expect("create");
    let small_id = small.upload_id().unwrap().to_string();
    let mut small_parts = Vec::new();
    for number in 1..=2 {
        let output = client.upload_part().bucket("multi").key("small").upload_id(&small_id).part_number(number);
        let output = output.body(ByteStream::from(pattern(1024, number as u8))).send().await.expect("part");
        small_parts.push(CompletedPart::builder().part_number(number).e_tag(output.e_tag().unwrap()).build());
    }
    let upload = CompletedMultipartUpload::builder().set_parts(Some(small_parts)).build();
    let too_small =
        client.complete_multipart_upload().bucket("multi").key("small").upload_id(&small_id).multipart_upload(upload);
    assert_eq!(failure(&too_small.send().await.unwrap_err()), (400, "EntityTooSmall".into()));
    let missing = client.upload_part().bucket("multi").key("small").upload_id("0000000000000000").part_number(1);
    assert_eq!(
        failure(&missing.body(ByteStream::from_static(b"x")).send().await.unwrap_err()),
        (404, "NoSuchUpload".into())
    );
}

/// An abandoned upload neither blocks deleting its bucket nor lives for ever: DeleteBucket on a bucket
/// with no objects aborts its pending uploads and releases their parts (before, 409 BucketNotEmpty,
/// so `aws s3 rb --force` and `rclone purge` failed), and uploads older than
/// `abort_incomplete_uploads_after_s` are aborted in the background.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_uploads_go_with_their_bucket_and_after_their_age() {
    use gateway::data::cluster::membership::unix_now_ms;
    use gateway::s3::abandoned_uploads::UploadExpiry;

    let server = start().await;
    let client = client(&server);
    let start_upload = |bucket: &'static str| {
        let client = client.clone();
        async move {
            client.create_bucket().bucket(bucket).send().await.expect("create");
            let upload = client.create_multipart_upload().bucket(bucket).key("big").send().await.expect("initiate");
            let id = upload.upload_id().expect("upload id").to_string();
            let part = ByteStream::from(vec![7u8; 100_000]);
            client
                .upload_part()
                .bucket(bucket)
                .key("big")
                .upload_id(&id)
                .part_number(1)
                .body(part)
                .send()
                .await
                .expect("part");
        }
    };
    start_upload("crashed").await;
    put(&client, "crashed", "k", b"v".to_vec()).await;
    let refused = client.delete_bucket().bucket("crashed").send().await.unwrap_err();
    assert_eq!(failure(&refused), (409, "BucketNotEmpty".into()), "an object still blocks it");
    let uploads = client.list_multipart_uploads().bucket("crashed").send().await.expect("list uploads");
    assert_eq!(uploads.uploads().len(), 1, "the refused delete aborted nothing");
    client.delete_object().bucket("crashed").key("k").send().await.expect("delete");
    client.delete_bucket().bucket("crashed").send().await.expect("a bucket with only an upload is deleted");
    assert_eq!(server.data.live_stripes(), 0, "the upload's part was released");

    start_upload("old").await;
    let data: std::sync::Arc<dyn gateway::data::ObjectData> = server.data.clone();
    let expiry = UploadExpiry::new(std::sync::Arc::clone(&server.meta), data, 3600).expect("on");
    assert_eq!(expiry.round(unix_now_ms()).await.unwrap(), 0, "younger than the age: kept");
    assert_eq!(expiry.round(unix_now_ms() + 3_601_000).await.unwrap(), 1, "older: aborted");
    let uploads = client.list_multipart_uploads().bucket("old").send().await.expect("list uploads");
    assert!(uploads.uploads().is_empty());
    assert_eq!(server.data.live_stripes(), 0, "its part was released");
    client.delete_bucket().bucket("old").send().await.expect("empty now");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_delete() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("del").send().await.expect("create");
    for key in ["x", "y", "z"] {
        put(&client, "del", key, key.as_bytes().to_vec()).await;
    }
    let identifiers = |keys: &[&str]| {
        keys.iter().map(|key| ObjectIdentifier::builder().key(*key).build().expect("identifier")).collect::<Vec<_>>()
    };
    let delete = Delete::builder().set_objects(Some(identifiers(&["x", "absent"]))).build().expect("delete");
    let output = client.delete_objects().bucket("del").delete(delete).send().await.expect("delete objects");
    let mut deleted: Vec<_> = output.deleted().iter().filter_map(|d| d.key()).collect();
    deleted.sort();
    assert_eq!(deleted, vec!["absent", "x"]);
    assert!(output.errors().is_empty());
    let quiet = Delete::builder().set_objects(Some(identifiers(&["y", "z"]))).quiet(true).build().expect("delete");
    let output = client.delete_objects().bucket("del").delete(quiet).send().await.expect("quiet delete");
    assert!(output.deleted().is_empty() && output.errors().is_empty());
    assert!(keys_v2(&client, "del").await.is_empty());
    assert_eq!(server.data.live_stripes(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presigned_urls() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("signed").send().await.expect("create");
    let expires = PresigningConfig::expires_in(Duration::from_secs(300)).expect("config");
    let put_request =
        client.put_object().bucket("signed").key("p").presigned(expires.clone()).await.expect("presign put");
    let headers: Vec<(String, String)> =
        put_request.headers().map(|(name, value)| (name.to_string(), value.to_string())).collect();
    let (status, _, _) = raw_request("PUT", put_request.uri(), &headers, Bytes::from_static(b"presigned body")).await;
    assert_eq!(status, 200);
    let get_request = client.get_object().bucket("signed").key("p").presigned(expires).await.expect("presign get");
    let (status, _, body) = raw_request("GET", get_request.uri(), &[], Bytes::new()).await;
    assert_eq!((status, body.as_ref()), (200, b"presigned body".as_ref()));
    // A tampered signature is refused.
    let tampered = get_request.uri().replace("/signed/p?", "/signed/other?");
    let (status, _, _) = raw_request("GET", &tampered, &[], Bytes::new()).await;
    assert_eq!(status, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_credentials_and_unsigned_requests_change_nothing() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("safe").send().await.expect("create");
    put(&client, "safe", "k", b"original".to_vec()).await;

    let wrong_secret = client_with(&server.endpoint, ACCESS_KEY, "not-the-secret");
    let error = wrong_secret.put_object().bucket("safe").key("k").body(ByteStream::from_static(b"evil")).send().await;
    assert_eq!(failure(&error.unwrap_err()), (403, "SignatureDoesNotMatch".into()));
    let error = wrong_secret.create_bucket().bucket("intruder").send().await.unwrap_err();
    assert_eq!(failure(&error).0, 403);
    let error = wrong_secret.delete_object().bucket("safe").key("k").send().await.unwrap_err();
    assert_eq!(failure(&error).0, 403);
    let unknown_key = client_with(&server.endpoint, "nobody", SECRET_KEY);
    let error = unknown_key.get_object().bucket("safe").key("k").send().await.unwrap_err();
    assert_eq!(failure(&error), (403, "InvalidAccessKeyId".into()));

    let url = format!("{}/safe/k", server.endpoint);
    let (status, _, body) = raw_request("PUT", &url, &[], Bytes::from_static(b"anonymous")).await;
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&body));
    let (status, _, _) = raw_request("GET", &url, &[], Bytes::new()).await;
    assert_eq!(status, 403);
    let (status, _, _) = raw_request("PUT", &format!("{}/anonymous-bucket", server.endpoint), &[], Bytes::new()).await;
    assert_eq!(status, 403);

    assert_eq!(get(&client, "safe", "k").await, b"original");
    let buckets = client.list_buckets().send().await.expect("list");
    assert_eq!(buckets.buckets().iter().filter_map(|bucket| bucket.name()).collect::<Vec<_>>(), vec!["safe"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_s3_errors() {
    let server = start_with(S3Options { max_object_bytes: 1 << 20, ..S3Options::default() }).await;
    let client = client(&server);
    client.create_bucket().bucket("limits").send().await.expect("create");
    let long_key = "k".repeat(1025);
    let error = client.put_object().bucket("limits").key(&long_key).body(ByteStream::from_static(b"x")).send().await;
    assert_eq!(failure(&error.unwrap_err()), (400, "KeyTooLongError".into()));
    put(&client, "limits", &"k".repeat(1024), b"longest key".to_vec()).await;
    let error =
        client.put_object().bucket("limits").key("big").body(ByteStream::from(pattern((1 << 20) + 1, 0))).send().await;
    assert_eq!(failure(&error.unwrap_err()), (400, "EntityTooLarge".into()));
    let error = client.list_objects_v2().bucket("limits").continuation_token("not-hex").send().await.unwrap_err();
    assert_eq!(failure(&error), (400, "InvalidArgument".into()));

    // The data path being unavailable is a 503 and changes nothing.
    server.data.set_unavailable(true);
    let error = client.put_object().bucket("limits").key("u").body(ByteStream::from_static(b"x")).send().await;
    assert_eq!(failure(&error.unwrap_err()), (503, "ServiceUnavailable".into()));
    server.data.set_unavailable(false);
    assert_eq!(keys_v2(&client, "limits").await, vec!["k".repeat(1024)]);
}

/// Gaps the S3 compatibility suite (tests/s3compat) found: an empty delimiter is no delimiter and is
/// not echoed, ListObjects v1 names owners and returns its Prefix unencoded, a Content-MD5 that is
/// not 16 bytes is InvalidDigest, and labels may not start or end with a hyphen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compatibility_fixes_from_s3_tests() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("compat").send().await.expect("create");
    for key in ["a b/1", "c"] {
        put(&client, "compat", key, b"x".to_vec()).await;
    }

    let v2 = client.list_objects_v2().bucket("compat").delimiter("").send().await.expect("list v2");
    assert_eq!(v2.delimiter(), None);
    assert!(v2.common_prefixes().is_empty());
    assert_eq!(v2.contents().len(), 2);
    let v1 = client.list_objects().bucket("compat").delimiter("").send().await.expect("list v1");
    assert_eq!(v1.delimiter(), None);
    assert_eq!(v1.contents().len(), 2);
    let owner = v1.contents()[0].owner().expect("v1 lists owners");
    assert_eq!(owner.id(), Some(ACCESS_KEY));

    let encoded = client
        .list_objects()
        .bucket("compat")
        .prefix("a b/")
        .encoding_type(aws_sdk_s3::types::EncodingType::Url)
        .send()
        .await
        .expect("list v1 url");
    assert_eq!(encoded.prefix(), Some("a b/"));
    assert_eq!(encoded.contents()[0].key(), Some("a%20b/1"));

    let error = client
        .put_object()
        .bucket("compat")
        .key("md5")
        .content_md5("YWJyYWNhZGFicmE=")
        .body(ByteStream::from_static(b"bar"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(failure(&error), (400, "InvalidDigest".into()));

    for name in ["foo.-bar", "foo-.bar"] {
        let error = client.create_bucket().bucket(name).send().await.unwrap_err();
        assert_eq!(failure(&error), (400, "InvalidBucketName".into()), "{name}");
    }
}

/// The HTTP framing `serve` adds: a request id in a header and in error documents, 206 for a ranged
/// HEAD, and `Connection: close` when an answer leaves the request body unread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_ranged_head_and_unread_bodies() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("framing").send().await.expect("create");
    put(&client, "framing", "k", b"testcontent".to_vec()).await;
    let expires = PresigningConfig::expires_in(Duration::from_secs(300)).expect("config");

    let head = client.head_object().bucket("framing").key("k").presigned(expires.clone()).await.expect("presign");
    let range = vec![("range".to_string(), "bytes=4-7".to_string())];
    let (status, headers, _) = raw_request("HEAD", head.uri(), &range, Bytes::new()).await;
    assert_eq!(status, 206);
    assert_eq!(headers.get("content-range").and_then(|v| v.to_str().ok()), Some("bytes 4-7/11"));
    let (status, _, _) = raw_request("HEAD", head.uri(), &[], Bytes::new()).await;
    assert_eq!(status, 200);

    let missing = client.get_object().bucket("framing").key("missing").presigned(expires).await.expect("presign");
    let (status, headers, body) = raw_request("GET", missing.uri(), &[], Bytes::new()).await;
    assert_eq!(status, 404);
    let id = headers.get("x-amz-request-id").and_then(|v| v.to_str().ok()).expect("request id").to_string();
    assert!(String::from_utf8_lossy(&body).contains(&format!("<RequestId>{id}</RequestId>")), "{body:?}");
    let (_, again, _) = raw_request("GET", missing.uri(), &[], Bytes::new()).await;
    assert_ne!(again.get("x-amz-request-id").and_then(|v| v.to_str().ok()), Some(id.as_str()), "ids are unique");

    // Refused before its body is read: the client is told the connection ends.
    let url = format!("{}/framing/k", server.endpoint);
    let (status, headers, _) = raw_request("PUT", &url, &[], Bytes::from(vec![7u8; 64 << 10])).await;
    assert_eq!(status, 403);
    assert_eq!(headers.get("connection").and_then(|v| v.to_str().ok()), Some("close"));
    let (status, headers, _) = raw_request("GET", &url, &[], Bytes::new()).await;
    assert_eq!(status, 403);
    assert_eq!(headers.get("connection"), None, "nothing unread, the connection stays open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_headers_are_kept_with_the_object() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("headers").send().await.expect("create");
    let expires = DateTime::from_secs(2_000_000_000);
    client
        .put_object()
        .bucket("headers")
        .key("page.html.gz")
        .cache_control("public, max-age=14400")
        .content_disposition("attachment; filename=\"page.html\"")
        .content_encoding("gzip")
        .content_language("de-CH")
        .expires(expires)
        .body(ByteStream::from_static(b"not really gzip"))
        .send()
        .await
        .expect("put with headers");
    let got = client.get_object().bucket("headers").key("page.html.gz").send().await.expect("get");
    assert_eq!(got.cache_control(), Some("public, max-age=14400"));
    assert_eq!(got.content_disposition(), Some("attachment; filename=\"page.html\""));
    assert_eq!(got.content_encoding(), Some("gzip"));
    assert_eq!(got.content_language(), Some("de-CH"));
    #[allow(deprecated)]
    let got_expires = got.expires().copied();
    assert_eq!(got_expires, Some(expires));
    let head = client.head_object().bucket("headers").key("page.html.gz").send().await.expect("head");
    assert_eq!(head.cache_control(), Some("public, max-age=14400"));
    assert_eq!(head.content_language(), Some("de-CH"));

    // Set when the upload is created, kept by the object it completes.
    let created = client.create_multipart_upload().bucket("headers").key("multi").cache_control("no-store").send();
    let upload_id = created.await.expect("create upload").upload_id().expect("id").to_string();
    let part = client.upload_part().bucket("headers").key("multi").upload_id(&upload_id).part_number(1);
    let etag = part.body(ByteStream::from_static(b"one part")).send().await.expect("part").e_tag().unwrap().to_string();
    client
        .complete_multipart_upload()
        .bucket("headers")
        .key("multi")
        .upload_id(&upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .parts(CompletedPart::builder().part_number(1).e_tag(etag).build())
                .build(),
        )
        .send()
        .await
        .expect("complete");
    let head = client.head_object().bucket("headers").key("multi").send().await.expect("head multipart");
    assert_eq!(head.cache_control(), Some("no-store"));
    assert_eq!(head.content_encoding(), None, "headers not sent are not invented");
}

/// `x-amz-copy-source` for `bucket/key`, percent-encoded as clients send it (the SDK sends the
/// header as given).
fn copy_source(bucket: &str, key: &str) -> String {
    let mut encoded = format!("{bucket}/");
    for byte in key.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => encoded.push(byte as char),
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    encoded
}

/// Uploads `parts` as a multipart object; returns its ETag.
async fn put_multipart(client: &Client, bucket: &str, key: &str, parts: &[Vec<u8>]) -> String {
    let created = client.create_multipart_upload().bucket(bucket).key(key).send().await.expect("create upload");
    let upload_id = created.upload_id().expect("upload id").to_string();
    let mut completed = Vec::new();
    for (index, part) in parts.iter().enumerate() {
        let number = index as i32 + 1;
        let output = client.upload_part().bucket(bucket).key(key).upload_id(&upload_id).part_number(number);
        let output = output.body(ByteStream::from(part.clone())).send().await.expect("upload part");
        completed.push(CompletedPart::builder().part_number(number).e_tag(output.e_tag().unwrap()).build());
    }
    let upload = CompletedMultipartUpload::builder().set_parts(Some(completed)).build();
    let done =
        client.complete_multipart_upload().bucket(bucket).key(key).upload_id(&upload_id).multipart_upload(upload);
    done.send().await.expect("complete").e_tag().expect("etag").to_string()
}

/// CopyObject within and across buckets, of empty, small, several-stripe (9 MiB over 1 MiB
/// segments) and multipart objects, and keys that need encoding: identical bytes, the source's ETag,
/// and a copy independent of its source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_object_copies_bytes_within_and_across_buckets() {
    let server = start().await;
    let client = client(&server);
    for bucket in ["src", "dst"] {
        client.create_bucket().bucket(bucket).send().await.expect("create");
    }
    let objects = [("empty", Vec::new()), ("small", b"hello, copy".to_vec()), ("dir/a b+c%é.bin", pattern(9 << 20, 1))];
    for (key, body) in &objects {
        let etag = put(&client, "src", key, body.clone()).await;
        for (bucket, target) in [("src", format!("{key}.copy")), ("dst", key.to_string())] {
            let copied = client
                .copy_object()
                .bucket(bucket)
                .key(&target)
                .copy_source(copy_source("src", key))
                .send()
                .await
                .unwrap_or_else(|error| panic!("copy {key} to {bucket}/{target}: {error:?}"));
            let result = copied.copy_object_result().expect("CopyObjectResult");
            assert_eq!(result.e_tag(), Some(etag.as_str()), "the copy's ETag is the MD5 of the same bytes");
            let modified = result.last_modified().expect("LastModified").secs();
            let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64;
            assert!((now - modified).abs() < 60, "LastModified is the copy's time");
            assert!(get(&client, bucket, &target).await == *body, "bytes of {bucket}/{target} differ");
            let head = client.head_object().bucket(bucket).key(&target).send().await.expect("head");
            assert_eq!((head.content_length(), head.e_tag()), (Some(body.len() as i64), Some(etag.as_str())));
        }
    }
    let total: u64 = objects.iter().map(|(_, body)| body.len() as u64).sum();
    assert_eq!(server.data.live_bytes(), 3 * total, "every copy has bytes of its own");

    // `?versionId=null` names the only version of an object in an unversioned bucket.
    let versioned = format!("{}?versionId=null", copy_source("src", "small"));
    client.copy_object().bucket("dst").key("null-version").copy_source(versioned).send().await.expect("copy null");
    assert_eq!(get(&client, "dst", "null-version").await, b"hello, copy");

    // A multipart source is copied part by part: same bytes, same multipart ETag.
    let parts = [pattern(5 << 20, 2), pattern(5 << 20, 3), pattern(1 << 20, 4)];
    let etag = put_multipart(&client, "src", "multi", &parts).await;
    assert!(etag.ends_with("-3\""), "{etag}");
    let copied = client.copy_object().bucket("dst").key("multi").copy_source("src/multi").send().await.expect("copy");
    assert_eq!(copied.copy_object_result().and_then(|result| result.e_tag()), Some(etag.as_str()));
    assert!(get(&client, "dst", "multi").await == parts.concat(), "multipart copy differs");
    let (_, bytes) = get_range(&client, "dst", "multi", &format!("bytes={}-{}", (5 << 20) - 2, (5 << 20) + 2)).await;
    assert_eq!(bytes, &parts.concat()[(5 << 20) - 2..=(5 << 20) + 2]);

    // Deleting the sources leaves the copies whole.
    for key in ["small", "dir/a b+c%é.bin", "multi"] {
        client.delete_object().bucket("src").key(key).send().await.expect("delete source");
    }
    assert_eq!(get(&client, "dst", "small").await, b"hello, copy");
    assert!(get(&client, "dst", "dir/a b+c%é.bin").await == objects[2].1);
    assert!(get(&client, "dst", "multi").await == parts.concat());
}

/// `x-amz-metadata-directive`: COPY (the default) carries user metadata and the standard headers
/// over and ignores the request's; REPLACE takes them from the request. A copy onto itself needs
/// REPLACE (else InvalidRequest, as in S3), and then changes metadata only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_object_metadata_directives() {
    use aws_sdk_s3::types::MetadataDirective;
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("meta").send().await.expect("create");
    let expires = DateTime::from_secs(2_000_000_000);
    let body = pattern(3 << 20, 5);
    let etag = client
        .put_object()
        .bucket("meta")
        .key("source")
        .content_type("audio/ogg")
        .metadata("key1", "value1")
        .metadata("key2", "value2")
        .cache_control("max-age=60")
        .content_disposition("inline")
        .content_encoding("identity")
        .content_language("fr")
        .expires(expires)
        .body(ByteStream::from(body.clone()))
        .send()
        .await
        .expect("put")
        .e_tag()
        .unwrap()
        .to_string();

    // COPY, implicit and explicit; the request's metadata is ignored then, as in S3.
    let implicit = client.copy_object().bucket("meta").key("kept").copy_source("meta/source").metadata("ignored", "x");
    implicit.send().await.expect("copy");
    let explicit = client.copy_object().bucket("meta").key("kept-explicit").copy_source("meta/source");
    explicit.metadata_directive(MetadataDirective::Copy).content_type("text/ignored").send().await.expect("copy");
    for key in ["kept", "kept-explicit"] {
        let head = client.head_object().bucket("meta").key(key).send().await.expect("head");
        let metadata = head.metadata().expect("metadata");
        assert_eq!(metadata.len(), 2, "{metadata:?}");
        assert_eq!((metadata["key1"].as_str(), metadata["key2"].as_str()), ("value1", "value2"));
        assert_eq!(head.content_type(), Some("audio/ogg"));
        assert_eq!(head.cache_control(), Some("max-age=60"));
        assert_eq!(head.content_disposition(), Some("inline"));
        assert_eq!(head.content_encoding(), Some("identity"));
        assert_eq!(head.content_language(), Some("fr"));
        #[allow(deprecated)]
        let head_expires = head.expires().copied();
        assert_eq!(head_expires, Some(expires));
    }

    // REPLACE: only what the request carries.
    client
        .copy_object()
        .bucket("meta")
        .key("replaced")
        .copy_source("meta/source")
        .metadata_directive(MetadataDirective::Replace)
        .content_type("audio/mpeg")
        .metadata("key3", "value3")
        .cache_control("no-cache")
        .send()
        .await
        .expect("copy with REPLACE");
    let head = client.head_object().bucket("meta").key("replaced").send().await.expect("head");
    assert_eq!(head.metadata().map(|m| m.len()), Some(1));
    assert_eq!(head.metadata().and_then(|m| m.get("key3")).map(String::as_str), Some("value3"));
    assert_eq!((head.content_type(), head.cache_control()), (Some("audio/mpeg"), Some("no-cache")));
    assert_eq!((head.content_disposition(), head.content_language(), head.content_encoding()), (None, None, None));
    assert_eq!(head.e_tag(), Some(etag.as_str()));

    // Onto itself: refused without REPLACE, changing nothing.
    let live = server.data.live_bytes();
    for directive in [None, Some(MetadataDirective::Copy)] {
        let copy = client.copy_object().bucket("meta").key("source").copy_source("meta/source");
        let error = copy.set_metadata_directive(directive).send().await.unwrap_err();
        assert_eq!(failure(&error), (400, "InvalidRequest".into()));
    }
    let unknown = client.copy_object().bucket("meta").key("other").copy_source("meta/source");
    let error = unknown.metadata_directive(MetadataDirective::from("MERGE")).send().await.unwrap_err();
    assert_eq!(failure(&error), (400, "InvalidArgument".into()));
    assert_eq!(server.data.live_bytes(), live);

    // With REPLACE (what rclone does to update a modification time): new metadata, same bytes and
    // ETag, a later LastModified, and the old version's bytes released.
    let before = client.head_object().bucket("meta").key("source").send().await.expect("head").last_modified;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let copied = client
        .copy_object()
        .bucket("meta")
        .key("source")
        .copy_source("meta/source")
        .metadata_directive(MetadataDirective::Replace)
        .metadata("mtime", "1700000000.5")
        .content_type("audio/ogg")
        .send()
        .await
        .expect("copy onto itself with REPLACE");
    assert_eq!(copied.copy_object_result().and_then(|result| result.e_tag()), Some(etag.as_str()));
    let head = client.head_object().bucket("meta").key("source").send().await.expect("head");
    assert_eq!(head.metadata().map(|m| m.len()), Some(1));
    assert_eq!(head.metadata().and_then(|m| m.get("mtime")).map(String::as_str), Some("1700000000.5"));
    assert_eq!((head.content_type(), head.cache_control()), (Some("audio/ogg"), None));
    assert!(head.last_modified > before, "{:?} after {before:?}", head.last_modified);
    assert!(get(&client, "meta", "source").await == body);
    assert_eq!(server.data.live_bytes(), live, "the replaced version is released");
}

/// `x-amz-copy-source-if-*`: a condition that does not hold is 412 PreconditionFailed (never 304),
/// with S3's precedence, and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_object_conditions() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("cond").send().await.expect("create");
    let etag = put(&client, "cond", "source", b"bar".to_vec()).await;
    let past = DateTime::from(SystemTime::now() - Duration::from_secs(3600));
    let future = DateTime::from(SystemTime::now() + Duration::from_secs(3600));
    let live = server.data.live_bytes();
    let copy = || client.copy_object().bucket("cond").key("copy").copy_source("cond/source");

    let refused = [
        copy().copy_source_if_match("\"ABCORZ\""),
        copy().copy_source_if_none_match(&etag),
        copy().copy_source_if_none_match("*"),
        copy().copy_source_if_modified_since(future),
        copy().copy_source_if_unmodified_since(past),
        // If-None-Match fails and If-Modified-Since holds: 412, as S3 documents.
        copy().copy_source_if_none_match(&etag).copy_source_if_modified_since(past),
        // If-Match wins over If-Unmodified-Since only when it holds.
        copy().copy_source_if_match("\"ABCORZ\"").copy_source_if_unmodified_since(future),
    ];
    for (index, request) in refused.into_iter().enumerate() {
        assert_eq!(failure(&request.send().await.unwrap_err()), (412, "PreconditionFailed".into()), "case {index}");
    }
    assert_eq!(server.data.live_bytes(), live, "a refused copy writes nothing");
    let missing = client.head_object().bucket("cond").key("copy").send().await.unwrap_err();
    assert_eq!(failure(&missing).0, 404);

    let allowed = [
        copy().copy_source_if_match(&etag),
        copy().copy_source_if_match("*"),
        copy().copy_source_if_none_match("\"ABCORZ\""),
        copy().copy_source_if_modified_since(past),
        copy().copy_source_if_unmodified_since(future),
        // If-Match holds and If-Unmodified-Since fails: copied, as S3 documents.
        copy().copy_source_if_match(&etag).copy_source_if_unmodified_since(past),
    ];
    for (index, request) in allowed.into_iter().enumerate() {
        request.send().await.unwrap_or_else(|error| panic!("case {index}: {error:?}"));
        assert_eq!(get(&client, "cond", "copy").await, b"bar");
    }
}

/// A copy that fails, however it fails, changes nothing: the destination keeps its old version
/// (bytes and ETag) and no bytes are left behind, even when the copy failed after writing part of
/// them. Missing sources and bad `x-amz-copy-source` headers get S3's codes, and so do requests
/// without a valid signature.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_copies_change_nothing() {
    let server = start().await;
    let client = client(&server);
    for bucket in ["src", "dst"] {
        client.create_bucket().bucket(bucket).send().await.expect("create");
    }
    let old_etag = put(&client, "dst", "k", b"old version".to_vec()).await;
    put(&client, "src", "small", b"new version".to_vec()).await;
    let parts = [pattern(5 << 20, 6), pattern(5 << 20, 7), pattern(100, 8)];
    put_multipart(&client, "src", "multi", &parts).await;
    let live = server.data.live_bytes();
    let copy_to_k = |source: &str| client.copy_object().bucket("dst").key("k").copy_source(source);

    let cases: [(&str, (u16, &str)); 8] = [
        ("src/absent", (404, "NoSuchKey")),
        ("nowhere/small", (404, "NoSuchBucket")),
        ("no-key-at-all", (400, "InvalidArgument")),
        ("src/", (400, "InvalidArgument")),
        ("src/small?versionId=3HL4kqtJlcpXroDTDmJ", (404, "NoSuchVersion")),
        ("src/small?versionId=", (400, "InvalidArgument")),
        ("arn:aws:s3:us-east-1:123456789012:accesspoint/point/object/small", (400, "InvalidArgument")),
        ("Bad_Bucket/small", (400, "InvalidArgument")),
    ];
    for (source, (status, code)) in cases {
        let error = copy_to_k(source).send().await.unwrap_err();
        assert_eq!(failure(&error), (status, code.to_string()), "copy source {source:?}");
    }
    let error = client.copy_object().bucket("nowhere").key("k").copy_source("src/small").send().await.unwrap_err();
    assert_eq!(failure(&error), (404, "NoSuchBucket".into()));

    // The data path fails before anything is written, and after the first of three parts is.
    server.data.set_unavailable(true);
    assert_eq!(failure(&copy_to_k("src/small").send().await.unwrap_err()), (503, "ServiceUnavailable".into()));
    server.data.set_unavailable(false);
    server.data.limit_writes(Some(1));
    assert_eq!(failure(&copy_to_k("src/multi").send().await.unwrap_err()), (503, "ServiceUnavailable".into()));
    server.data.limit_writes(None);
    assert_eq!(server.data.live_bytes(), live, "the part copied before the failure is released");

    // Without a valid signature.
    let wrong_secret = client_with(&server.endpoint, ACCESS_KEY, "not-the-secret");
    let error = wrong_secret.copy_object().bucket("dst").key("k").copy_source("src/small").send().await.unwrap_err();
    assert_eq!(failure(&error), (403, "SignatureDoesNotMatch".into()));
    let headers = vec![("x-amz-copy-source".to_string(), "src/small".to_string())];
    let (status, _, body) = raw_request("PUT", &format!("{}/dst/k", server.endpoint), &headers, Bytes::new()).await;
    assert_eq!(status, 403);
    assert!(String::from_utf8_lossy(&body).contains("<Code>AccessDenied</Code>"), "{body:?}");

    assert_eq!(get(&client, "dst", "k").await, b"old version");
    let head = client.head_object().bucket("dst").key("k").send().await.expect("head");
    assert_eq!(head.e_tag(), Some(old_etag.as_str()));
    assert_eq!(server.data.live_bytes(), live);
    assert_eq!(keys_v2(&client, "dst").await, vec!["k"]);
    // And the same copy, once the data path works, replaces the old version.
    client.copy_object().bucket("dst").key("k").copy_source("src/multi").send().await.expect("copy");
    assert!(get(&client, "dst", "k").await == parts.concat());
}

/// UploadPartCopy: parts copied from ranges of (or whole) objects in any bucket, completed into an
/// object with the bytes in order and the multipart ETag of the copied ranges' MD5s; S3's errors for
/// bad ranges, missing uploads and conditions that do not hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_part_copy() {
    let server = start().await;
    let client = client(&server);
    for bucket in ["src", "dst"] {
        client.create_bucket().bucket(bucket).send().await.expect("create");
    }
    let big = pattern(10 << 20, 9);
    put(&client, "src", "big", big.clone()).await;
    let small_etag = put(&client, "src", "small", b"the tail".to_vec()).await;
    let created = client.create_multipart_upload().bucket("dst").key("assembled").send().await.expect("create");
    let upload_id = created.upload_id().expect("upload id").to_string();
    let part_copy = |number: i32, source: &str| {
        client
            .upload_part_copy()
            .bucket("dst")
            .key("assembled")
            .upload_id(&upload_id)
            .part_number(number)
            .copy_source(source)
    };

    let first = part_copy(1, "src/big").copy_source_range(format!("bytes=0-{}", (5 << 20) - 1)).send().await;
    let second =
        part_copy(2, "src/big").copy_source_range(format!("bytes={}-{}", 5 << 20, (10 << 20) - 1)).send().await;
    let third = part_copy(3, "src/small").copy_source_if_match(&small_etag).send().await;
    let mut completed = Vec::new();
    let mut binary_md5s = Vec::new();
    for (number, (output, bytes)) in
        [(first, &big[..5 << 20]), (second, &big[5 << 20..]), (third, b"the tail".as_slice())].into_iter().enumerate()
    {
        let output = output.unwrap_or_else(|error| panic!("part {}: {error:?}", number + 1));
        let etag = output.copy_part_result().and_then(|result| result.e_tag()).expect("part ETag").to_string();
        assert_eq!(etag, format!("\"{}\"", md5_hex(bytes)));
        binary_md5s.extend(hex::decode(md5_hex(bytes)).unwrap());
        completed.push(CompletedPart::builder().part_number(number as i32 + 1).e_tag(etag).build());
    }

    let bad_range = part_copy(4, "src/small").copy_source_range("bytes=0-21").send().await.unwrap_err();
    assert_eq!(failure(&bad_range), (416, "InvalidRange".into()));
    for malformed in ["0-2", "bytes=0", "bytes=hello-world", "bytes=0-bar", "bytes=hello-", "bytes=0-2,3-5", "bytes=-3"]
    {
        let error = part_copy(4, "src/small").copy_source_range(malformed).send().await.unwrap_err();
        assert_eq!(failure(&error), (400, "InvalidArgument".into()), "{malformed}");
    }
    let refused = part_copy(4, "src/small").copy_source_if_none_match(&small_etag).send().await.unwrap_err();
    assert_eq!(failure(&refused), (412, "PreconditionFailed".into()));
    let missing = part_copy(4, "src/absent").send().await.unwrap_err();
    assert_eq!(failure(&missing), (404, "NoSuchKey".into()));
    let no_upload = client.upload_part_copy().bucket("dst").key("assembled").upload_id("0000000000000000");
    let error = no_upload.part_number(1).copy_source("src/small").send().await.unwrap_err();
    assert_eq!(failure(&error), (404, "NoSuchUpload".into()));

    let upload = CompletedMultipartUpload::builder().set_parts(Some(completed)).build();
    let complete = client.complete_multipart_upload().bucket("dst").key("assembled").upload_id(&upload_id);
    let done = complete.multipart_upload(upload).send().await.expect("complete");
    assert_eq!(done.e_tag(), Some(format!("\"{}-3\"", md5_hex(&binary_md5s)).as_str()));
    let mut whole = big.clone();
    whole.extend_from_slice(b"the tail");
    assert!(get(&client, "dst", "assembled").await == whole, "assembled bytes differ");
}

/// No copy writes more than `max_object_bytes` at once: a multipart object larger than the limit is
/// copied part by part, while an UploadPartCopy of more than the limit is EntityTooLarge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_respect_max_object_bytes() {
    let options = S3Options { max_object_bytes: 1 << 20, min_part_bytes: 1 << 20, ..S3Options::default() };
    let server = start_with(options).await;
    let client = client(&server);
    client.create_bucket().bucket("limits").send().await.expect("create");
    let parts = [pattern(1 << 20, 1), pattern(1 << 20, 2), pattern(1 << 19, 3)];
    let etag = put_multipart(&client, "limits", "multi", &parts).await;
    let copied = client.copy_object().bucket("limits").key("copy").copy_source("limits/multi").send().await;
    assert_eq!(copied.expect("copy").copy_object_result().and_then(|result| result.e_tag()), Some(etag.as_str()));
    assert!(get(&client, "limits", "copy").await == parts.concat());

    let created = client.create_multipart_upload().bucket("limits").key("parts").send().await.expect("create");
    let upload_id = created.upload_id().expect("upload id").to_string();
    let part_copy = || client.upload_part_copy().bucket("limits").key("parts").upload_id(&upload_id).part_number(1);
    let error = part_copy().copy_source("limits/multi").send().await.unwrap_err();
    assert_eq!(failure(&error), (400, "EntityTooLarge".into()));
    let range = format!("bytes={}-{}", (1 << 20) - 10, (2 << 20) - 11);
    part_copy().copy_source("limits/multi").copy_source_range(range).send().await.expect("a 1 MiB range");
}

/// A GetObject body over one read is sent as it is read: a store that fails before the answer is a
/// 503; one that fails after the answer began cuts the body short, so the client sees an error and
/// never a body it could take for whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_failing_mid_body_cuts_the_body_short() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("cut").send().await.expect("create");
    // 80 MiB of 1 MiB synthetic stripes: ten reads of 8 MiB.
    let body = pattern(80 << 20, 9);
    put(&client, "cut", "k", body.clone()).await;
    assert!(get(&client, "cut", "k").await == body, "whole when the store stays up");

    server.data.set_unavailable(true);
    let error = client.get_object().bucket("cut").key("k").send().await.unwrap_err();
    assert_eq!(failure(&error), (503, "ServiceUnavailable".into()));
    server.data.set_unavailable(false);

    let answer = client.get_object().bucket("cut").key("k").send().await.expect("the first read succeeds");
    assert_eq!(answer.content_length(), Some(80 << 20));
    // The reads are at most two pieces ahead of what the client took: the rest now fail.
    server.data.set_unavailable(true);
    let read = answer.body.collect().await;
    server.data.set_unavailable(false);
    assert!(read.is_err(), "a body cut short is an error, not {} bytes", read.map_or(0, |b| b.into_bytes().len()));
}

/// A GetObject body sent as it is read holds its object's bytes: an overwrite and a delete while the
/// client is still reading do not cut it off, and the old bytes are freed once it is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_overwritten_mid_body_is_read_to_the_end() {
    let server = start().await;
    let client = client(&server);
    client.create_bucket().bucket("held").send().await.expect("create");
    let old = pattern(80 << 20, 10);
    put(&client, "held", "k", old.clone()).await;
    let answer = client.get_object().bucket("held").key("k").send().await.expect("get");
    put(&client, "held", "k", b"new".to_vec()).await;
    assert_eq!(get(&client, "held", "k").await, b"new", "the overwrite is committed");
    client.delete_object().bucket("held").key("k").send().await.expect("delete");
    assert!(server.data.live_stripes() > 0, "the old bytes wait for the read");
    let body = answer.body.collect().await.expect("the body is whole").into_bytes();
    assert!(body == old, "the old bytes to the end");
    let started = std::time::Instant::now();
    // The hold ends with the server's read task, just after the last byte: wait a little for it.
    while server.data.live_stripes() > 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "the old bytes are freed after the read");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
