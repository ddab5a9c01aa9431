//! Object and bucket tags: PutObjectTagging, GetObjectTagging, DeleteObjectTagging, their bucket
//! counterparts, and the tag sets of writes (`x-amz-tagging` on PutObject, CreateMultipartUpload
//! and a CopyObject with `x-amz-tagging-directive: REPLACE`). A tag set is checked against S3's
//! rules before anything is stored (400 `InvalidTag`, nothing changed). Owns the parsing, the rules
//! and these answers; must not read or write object bytes.

use std::collections::BTreeMap;

use s3s::dto::{
    DeleteBucketTaggingInput, DeleteBucketTaggingOutput, DeleteObjectTaggingInput, DeleteObjectTaggingOutput,
    GetBucketTaggingInput, GetBucketTaggingOutput, GetObjectTaggingInput, GetObjectTaggingOutput,
    PutBucketTaggingInput, PutBucketTaggingOutput, PutObjectTaggingInput, PutObjectTaggingOutput, Tag,
};
use s3s::{S3ErrorCode, S3Request, S3Response, S3Result};

use super::errors::{from_meta, s3};
use super::names::check_key;
use super::service::LowtailS3;
use super::versions;

/// A tag set, by key.
pub type Tags = BTreeMap<String, String>;

/// Most tags an object may have (S3's limit).
pub const MAX_OBJECT_TAGS: usize = 10;
/// Most tags a bucket may have (S3's limit).
pub const MAX_BUCKET_TAGS: usize = 50;

/// The tags of an `x-amz-tagging` header: URL query parameters (`k1=v1&k2`, a key without `=` has
/// an empty value), each checked; InvalidTag for a set S3 refuses.
pub fn from_header(header: Option<&str>) -> S3Result<Tags> {
    let Some(header) = header.filter(|header| !header.is_empty()) else { return Ok(Tags::new()) };
    let pairs = form_urlencoded::parse(header.as_bytes()).map(|(key, value)| (key.into_owned(), value.into_owned()));
    checked(pairs.collect(), MAX_OBJECT_TAGS)
}

/// The tags of a request's tag set, checked against S3's rules with at most `max` tags.
pub fn from_tag_set(tag_set: Vec<Tag>, max: usize) -> S3Result<Tags> {
    let pairs = tag_set.into_iter().map(|tag| (tag.key.unwrap_or_default(), tag.value.unwrap_or_default()));
    checked(pairs.collect(), max)
}

/// A tag set as S3 answers it, by key.
pub fn to_tag_set(tags: &Tags) -> Vec<Tag> {
    tags.iter().map(|(key, value)| Tag { key: Some(key.clone()), value: Some(value.clone()) }).collect()
}

/// `pairs` as a tag set if S3 would take it: at most `max`, no key twice, keys of 1 to 128
/// characters and values of at most 256, of letters, digits, spaces and `+ - = . _ : / @`, no key in
/// the reserved `aws:` prefix.
fn checked(pairs: Vec<(String, String)>, max: usize) -> S3Result<Tags> {
    let refuse = |why: String| Err(s3(S3ErrorCode::InvalidTag, why));
    if pairs.len() > max {
        return refuse(format!("{} tags: at most {max} are allowed", pairs.len()));
    }
    let mut tags = Tags::new();
    for (key, value) in pairs {
        let key_chars = key.chars().count();
        if key_chars == 0 || key_chars > meta::validate::MAX_TAG_KEY_CHARS {
            return refuse(format!("the tag key {key:?} is not 1 to 128 characters"));
        }
        if value.chars().count() > meta::validate::MAX_TAG_VALUE_CHARS {
            return refuse(format!("the value of tag {key:?} is over 256 characters"));
        }
        if !key.chars().chain(value.chars()).all(allowed) {
            return refuse(format!("the tag {key:?} has a character other than letters, digits, spaces and +-=._:/@"));
        }
        if key.starts_with("aws:") {
            return refuse(format!("the tag key {key:?} is in the reserved aws: prefix"));
        }
        if tags.insert(key.clone(), value).is_some() {
            return refuse(format!("the tag key {key:?} is given twice"));
        }
    }
    Ok(tags)
}

fn allowed(character: char) -> bool {
    character.is_alphanumeric() || character.is_whitespace() || "+-=._:/@".contains(character)
}

pub async fn get_object_tagging(
    service: &LowtailS3,
    req: S3Request<GetObjectTaggingInput>,
) -> S3Result<S3Response<GetObjectTaggingOutput>> {
    let input = &req.input;
    check_key(&input.key)?;
    let object = versions::object_for(service, &input.bucket, &input.key, input.version_id.as_deref()).await?;
    let version_id = versions::answered_id(&object);
    Ok(S3Response::new(GetObjectTaggingOutput { tag_set: to_tag_set(&object.tags), version_id }))
}

pub async fn put_object_tagging(
    service: &LowtailS3,
    req: S3Request<PutObjectTaggingInput>,
) -> S3Result<S3Response<PutObjectTaggingOutput>> {
    let input = req.input;
    check_key(&input.key)?;
    let tags = from_tag_set(input.tagging.tag_set, MAX_OBJECT_TAGS)?;
    versions::require_current(service, &input.bucket, &input.key, input.version_id.as_deref()).await?;
    service.meta.set_object_tags(&input.bucket, &input.key, tags).await.map_err(from_meta)?;
    Ok(S3Response::new(PutObjectTaggingOutput { version_id: input.version_id }))
}

pub async fn delete_object_tagging(
    service: &LowtailS3,
    req: S3Request<DeleteObjectTaggingInput>,
) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
    let input = req.input;
    check_key(&input.key)?;
    versions::require_current(service, &input.bucket, &input.key, input.version_id.as_deref()).await?;
    service.meta.set_object_tags(&input.bucket, &input.key, Tags::new()).await.map_err(from_meta)?;
    Ok(S3Response::new(DeleteObjectTaggingOutput { version_id: input.version_id }))
}

pub async fn get_bucket_tagging(
    service: &LowtailS3,
    req: S3Request<GetBucketTaggingInput>,
) -> S3Result<S3Response<GetBucketTaggingOutput>> {
    let bucket = service.meta.get_bucket(&req.input.bucket).await.map_err(from_meta)?;
    if bucket.tags.is_empty() {
        return Err(s3(S3ErrorCode::NoSuchTagSet, "the bucket has no tags"));
    }
    Ok(S3Response::new(GetBucketTaggingOutput { tag_set: to_tag_set(&bucket.tags) }))
}

pub async fn put_bucket_tagging(
    service: &LowtailS3,
    req: S3Request<PutBucketTaggingInput>,
) -> S3Result<S3Response<PutBucketTaggingOutput>> {
    let input = req.input;
    let tags = from_tag_set(input.tagging.tag_set, MAX_BUCKET_TAGS)?;
    service.meta.set_bucket_tags(&input.bucket, tags).await.map_err(from_meta)?;
    Ok(S3Response::new(PutBucketTaggingOutput::default()))
}

pub async fn delete_bucket_tagging(
    service: &LowtailS3,
    req: S3Request<DeleteBucketTaggingInput>,
) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
    service.meta.set_bucket_tags(&req.input.bucket, Tags::new()).await.map_err(from_meta)?;
    Ok(S3Response::new(DeleteBucketTaggingOutput::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(result: S3Result<Tags>) -> Option<S3ErrorCode> {
        result.err().map(|error| error.code().clone())
    }

    #[test]
    fn headers_and_tag_sets_are_read_and_checked_as_s3_does() {
        let tags = from_header(Some("foo=bar&bar&a%20b=c+d")).unwrap();
        let expected = [("a b", "c d"), ("bar", ""), ("foo", "bar")];
        assert_eq!(tags, expected.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Tags>());
        assert_eq!(from_header(None).unwrap(), Tags::new());
        assert_eq!(from_header(Some("")).unwrap(), Tags::new());
        let eleven = (0..11).map(|i| format!("k{i}=v")).collect::<Vec<_>>().join("&");
        assert_eq!(code(from_header(Some(&eleven))), Some(S3ErrorCode::InvalidTag));
        assert_eq!(code(from_header(Some("a=1&a=2"))), Some(S3ErrorCode::InvalidTag), "a key twice");
        assert_eq!(code(from_header(Some("a=<b>"))), Some(S3ErrorCode::InvalidTag), "characters");
        assert_eq!(code(from_header(Some("aws:x=1"))), Some(S3ErrorCode::InvalidTag), "reserved");
        assert_eq!(code(from_header(Some("=v"))), Some(S3ErrorCode::InvalidTag), "an empty key");
        let tag = |key: String, value: String| Tag { key: Some(key), value: Some(value) };
        let longest = vec![tag("k".repeat(128), "v".repeat(256))];
        assert_eq!(from_tag_set(longest, MAX_OBJECT_TAGS).unwrap().len(), 1);
        let long_key = vec![tag("k".repeat(129), String::new())];
        assert_eq!(code(from_tag_set(long_key, MAX_OBJECT_TAGS)), Some(S3ErrorCode::InvalidTag));
        let long_value = vec![tag("k".into(), "v".repeat(257))];
        assert_eq!(code(from_tag_set(long_value, MAX_OBJECT_TAGS)), Some(S3ErrorCode::InvalidTag));
        let fifty: Vec<Tag> = (0..50).map(|i| tag(format!("k{i}"), String::new())).collect();
        assert_eq!(from_tag_set(fifty, MAX_BUCKET_TAGS).unwrap().len(), 50);
        assert_eq!(to_tag_set(&from_header(Some("b=2&a=1")).unwrap())[0].key.as_deref(), Some("a"));
    }
}
