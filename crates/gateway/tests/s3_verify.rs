//! A GET never answers wrong bytes with a clean 200 (issue 52): an object's record made to point at
//! another object's bytes (its seal intact: what a bug or a damaged record a checksum missed would
//! do) is caught by the end-to-end check of the body against the object's checksum.

mod s3_common;

use aws_sdk_s3::primitives::ByteStream;
use meta::ObjectMeta;

async fn point_at_other_bytes(server: &s3_common::TestServer, key: &str, other: &str) {
    let wrong = server.meta.get_object("verified", other).await.unwrap();
    let record = server.meta.get_object("verified", key).await.unwrap();
    server.meta.put_object("verified", key, ObjectMeta { layout: wrong.layout, ..record }).await.unwrap();
}

#[tokio::test]
async fn a_record_pointing_at_other_bytes_is_never_answered_whole() {
    let server = s3_common::start().await;
    let client = s3_common::client(&server);
    client.create_bucket().bucket("verified").send().await.unwrap();
    for (key, size, seed) in
        [("small", 3000, 1), ("small-other", 3000, 2), ("large", 20 << 20, 3), ("large-other", 20 << 20, 4)]
    {
        let body = ByteStream::from(s3_common::pattern(size, seed));
        client.put_object().bucket("verified").key(key).body(body).send().await.unwrap();
    }
    // Intact, both read back whole.
    for key in ["small", "large"] {
        let got = client.get_object().bucket("verified").key(key).send().await.unwrap();
        assert!(got.body.collect().await.is_ok(), "{key}");
    }
    point_at_other_bytes(&server, "small", "small-other").await;
    let small = client.get_object().bucket("verified").key("small").send().await;
    assert_eq!(s3_common::failure(&small.unwrap_err()).0, 500, "read in one piece: refused before answering");
    point_at_other_bytes(&server, "large", "large-other").await;
    match client.get_object().bucket("verified").key("large").send().await {
        Err(error) => assert_eq!(s3_common::failure(&error).0, 500),
        Ok(answer) => {
            let body = answer.body.collect().await;
            assert!(body.is_err(), "a streamed body ends early rather than deliver the other object's bytes");
        }
    }
    // A range is served (nothing vouches for it end to end; the record's seal and the nodes'
    // block checksums do).
    let ranged = client.get_object().bucket("verified").key("small").range("bytes=0-9").send().await.unwrap();
    assert_eq!(ranged.body.collect().await.unwrap().into_bytes().len(), 10);
}
