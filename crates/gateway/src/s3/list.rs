//! Listings: ListObjects (v1, its markers on top of the metadata store's ListObjectsV2 semantics),
//! ListObjectsV2 and ListObjectVersions (buckets are unversioned: every object is its `null`
//! version), and what every listing answer shares: `max-keys`, the delimiter and common prefixes,
//! `encoding-type=url`, owners, and the in-memory paging of multipart uploads. Owns these answers;
//! must not change anything.

use meta::validate::MAX_KEY_BYTES;
use meta::{ListObjectsQuery, MAX_LIST_KEYS, ObjectListing, UploadMeta};
use s3s::dto::{
    CommonPrefix, CommonPrefixList, ETag, EncodingType, ListObjectVersionsInput, ListObjectVersionsOutput,
    ListObjectsInput, ListObjectsOutput, ListObjectsV2Input, ListObjectsV2Output, Object, ObjectStorageClass,
    ObjectVersion, ObjectVersionStorageClass, Owner,
};
use s3s::{S3ErrorCode, S3Request, S3Response, S3Result};

use super::errors::{from_meta, s3};
use super::service::LowtailS3;
use super::timestamps::timestamp;

/// The largest character in UTF-8 byte order (U+10FFFF encodes as F4 8F BF BF).
const LAST_CHAR: char = '\u{10FFFF}';

pub async fn list_objects(
    service: &LowtailS3,
    req: S3Request<ListObjectsInput>,
) -> S3Result<S3Response<ListObjectsOutput>> {
    let input = req.input;
    let request = ListRequest::new(input.delimiter, &input.encoding_type, input.prefix, input.max_keys)?;
    let start_after = input.marker.as_deref().map(|marker| request.start_after(marker));
    let listing = request.list(service, &input.bucket, start_after, None).await?;
    let encode = request.encode;
    // ListObjects v1 always names each object's owner (v2 only with fetch-owner).
    let owner = owner(req.credentials.as_ref());
    let output = ListObjectsOutput {
        name: Some(input.bucket),
        // Not encoded: clients (botocore) decode a v1 answer's Marker, NextMarker, Delimiter,
        // keys and common prefixes, but not its Prefix, so S3 returns it as sent.
        prefix: Some(request.prefix.clone()),
        marker: Some(input.marker.as_deref().map(encode).unwrap_or_default()),
        max_keys: Some(request.max_keys as i32),
        is_truncated: Some(listing.is_truncated),
        contents: Some(contents(&listing, encode, owner)),
        common_prefixes: common_prefixes(&listing.common_prefixes, encode),
        delimiter: request.delimiter.as_deref().map(encode),
        next_marker: next_marker(&listing, encode),
        encoding_type: request.encoding_type(),
        ..Default::default()
    };
    Ok(S3Response::new(output))
}

pub async fn list_objects_v2(
    service: &LowtailS3,
    req: S3Request<ListObjectsV2Input>,
) -> S3Result<S3Response<ListObjectsV2Output>> {
    let input = req.input;
    let request = ListRequest::new(input.delimiter, &input.encoding_type, input.prefix, input.max_keys)?;
    let (start_after, token) = (input.start_after.clone(), input.continuation_token.clone());
    let listing = request.list(service, &input.bucket, start_after, token).await?;
    let encode = request.encode;
    let owner = if input.fetch_owner.unwrap_or(false) { owner(req.credentials.as_ref()) } else { None };
    let output = ListObjectsV2Output {
        name: Some(input.bucket),
        prefix: Some(encode(&request.prefix)),
        max_keys: Some(request.max_keys as i32),
        key_count: Some(listing.key_count() as i32),
        continuation_token: input.continuation_token,
        is_truncated: Some(listing.is_truncated),
        next_continuation_token: listing.next_continuation_token.clone(),
        contents: Some(contents(&listing, encode, owner)),
        common_prefixes: common_prefixes(&listing.common_prefixes, encode),
        delimiter: request.delimiter.as_deref().map(encode),
        start_after: input.start_after.as_deref().map(encode),
        encoding_type: request.encoding_type(),
        ..Default::default()
    };
    Ok(S3Response::new(output))
}

pub async fn list_object_versions(
    service: &LowtailS3,
    req: S3Request<ListObjectVersionsInput>,
) -> S3Result<S3Response<ListObjectVersionsOutput>> {
    let input = req.input;
    let request = ListRequest::new(input.delimiter, &input.encoding_type, input.prefix, input.max_keys)?;
    // Buckets are unversioned: every object is its only ("null") version, so the version id
    // marker adds nothing to the key marker.
    let start_after =
        input.key_marker.as_deref().filter(|marker| !marker.is_empty()).map(|marker| request.start_after(marker));
    let listing = request.list(service, &input.bucket, start_after, None).await?;
    let encode = request.encode;
    let owner = owner(req.credentials.as_ref());
    let versions = listing
        .objects
        .iter()
        .map(|listed| ObjectVersion {
            key: Some(encode(&listed.key)),
            version_id: Some("null".into()),
            is_latest: Some(true),
            size: Some(listed.meta.size_bytes as i64),
            e_tag: Some(ETag::Strong(listed.meta.etag.clone())),
            last_modified: Some(timestamp(listed.meta.last_modified_ms)),
            storage_class: Some(ObjectVersionStorageClass::from_static(ObjectVersionStorageClass::STANDARD)),
            owner: owner.clone(),
            ..Default::default()
        })
        .collect();
    let next_key_marker = next_marker(&listing, encode);
    let output = ListObjectVersionsOutput {
        name: Some(input.bucket),
        prefix: Some(encode(&request.prefix)),
        key_marker: Some(input.key_marker.as_deref().map(encode).unwrap_or_default()),
        version_id_marker: Some(input.version_id_marker.unwrap_or_default()),
        max_keys: Some(request.max_keys as i32),
        is_truncated: Some(listing.is_truncated),
        next_version_id_marker: next_key_marker.as_ref().map(|_| "null".to_string()),
        next_key_marker,
        versions: Some(versions),
        common_prefixes: common_prefixes(&listing.common_prefixes, encode),
        delimiter: request.delimiter.as_deref().map(encode),
        encoding_type: request.encoding_type(),
        ..Default::default()
    };
    Ok(S3Response::new(output))
}

/// What every listing request (ListObjects v1 and v2, ListObjectVersions, ListMultipartUploads)
/// asks in the same words: the delimiter, `encoding-type`, the prefix and the page size.
pub struct ListRequest {
    /// The delimiter; an empty one is none, and is neither applied nor echoed (S3 answers without a
    /// `Delimiter` element then).
    pub delimiter: Option<String>,
    /// Whether the client asked for `encoding-type=url`.
    encoded: bool,
    /// Encodes keys, prefixes and markers accordingly.
    pub encode: Encode,
    /// The prefix, empty when none was given.
    pub prefix: String,
    /// `max-keys` (or `max-uploads`), at most [`MAX_LIST_KEYS`].
    pub max_keys: usize,
}

impl ListRequest {
    /// The request's listing parameters, checked (InvalidArgument).
    pub fn new(
        delimiter: Option<String>,
        encoding_type: &Option<EncodingType>,
        prefix: Option<String>,
        max_keys: Option<i32>,
    ) -> S3Result<Self> {
        let delimiter = delimiter.filter(|delimiter| !delimiter.is_empty());
        let (encoded, encode) = encoder(encoding_type)?;
        let prefix = prefix.unwrap_or_default();
        let max_keys = self::max_keys(max_keys)?;
        Ok(ListRequest { delimiter, encoded, encode, prefix, max_keys })
    }

    /// The `EncodingType` the answer echoes.
    pub fn encoding_type(&self) -> Option<EncodingType> {
        self.encoded.then(|| EncodingType::from_static(EncodingType::URL))
    }

    /// The `start_after` that continues a v1 (or ListObjectVersions) listing after `marker`.
    fn start_after(&self, marker: &str) -> String {
        start_after_marker(&self.prefix, self.delimiter.as_deref(), marker)
    }

    /// One page of the bucket's objects, after `start_after` or from `continuation_token`.
    async fn list(
        &self,
        service: &LowtailS3,
        bucket: &str,
        start_after: Option<String>,
        continuation_token: Option<String>,
    ) -> S3Result<ObjectListing> {
        let query = ListObjectsQuery {
            prefix: self.prefix.clone(),
            delimiter: self.delimiter.clone(),
            start_after,
            continuation_token,
            max_keys: self.max_keys,
        };
        service.meta.list_objects(bucket, &query).await.map_err(from_meta)
    }
}

/// A listing's `max-keys` (or `max-uploads`, `max-parts`): at most [`MAX_LIST_KEYS`], that many
/// when not given.
pub fn max_keys(requested: Option<i32>) -> S3Result<usize> {
    match requested {
        None => Ok(MAX_LIST_KEYS),
        Some(value) if value < 0 => Err(s3(S3ErrorCode::InvalidArgument, "max-keys must not be negative")),
        Some(value) => Ok((value as usize).min(MAX_LIST_KEYS)),
    }
}

/// Encodes a key, prefix or marker for a listing answer.
pub type Encode = fn(&str) -> String;

/// Whether the client asked for `encoding-type=url`, and the function that encodes accordingly.
fn encoder(encoding_type: &Option<EncodingType>) -> S3Result<(bool, Encode)> {
    match encoding_type.as_ref().map(EncodingType::as_str) {
        None => Ok((false, str::to_string)),
        Some(EncodingType::URL) => Ok((true, url_encode)),
        Some(other) => Err(s3(S3ErrorCode::InvalidArgument, format!("unknown encoding type {other:?}"))),
    }
}

/// The owner a listing names: the requester.
pub fn owner(credentials: Option<&s3s::auth::Credentials>) -> Option<Owner> {
    credentials.map(|credentials| Owner {
        display_name: Some(credentials.access_key.clone()),
        id: Some(credentials.access_key.clone()),
    })
}

/// A v1 or v2 listing's objects, with their keys encoded and `owner` named.
fn contents(listing: &ObjectListing, encode: Encode, owner: Option<Owner>) -> Vec<Object> {
    let listed = listing.objects.iter().map(|listed| Object {
        key: Some(encode(&listed.key)),
        size: Some(listed.meta.size_bytes as i64),
        e_tag: Some(ETag::Strong(listed.meta.etag.clone())),
        last_modified: Some(timestamp(listed.meta.last_modified_ms)),
        storage_class: Some(ObjectStorageClass::from_static(ObjectStorageClass::STANDARD)),
        owner: owner.clone(),
        ..Default::default()
    });
    listed.collect()
}

/// A listing answer's common prefixes, encoded; none when there are none.
pub fn common_prefixes(prefixes: &[String], encode: Encode) -> Option<CommonPrefixList> {
    (!prefixes.is_empty())
        .then(|| prefixes.iter().map(|prefix| CommonPrefix { prefix: Some(encode(prefix)) }).collect())
}

/// The v1 / ListObjectVersions next marker of a truncated page: its last entry, key or common
/// prefix, encoded.
fn next_marker(listing: &ObjectListing, encode: Encode) -> Option<String> {
    if !listing.is_truncated {
        return None;
    }
    let last_key = listing.objects.last().map(|object| object.key.clone());
    let last_prefix = listing.common_prefixes.last().cloned();
    last_key.max(last_prefix).map(|marker| encode(&marker))
}

/// The `start_after` that makes a ListObjectsV2 listing continue a v1 listing after `marker`.
///
/// In v1 (and in ListObjectVersions) the marker is the last key or common prefix a page returned. A
/// key after the marker whose common prefix is not after it (the marker is, or lies under, that
/// common prefix) was already rolled up into an earlier page, so the listing skips every key under the
/// marker's own common prefix: it starts after the largest possible key with that prefix.
pub fn start_after_marker(prefix: &str, delimiter: Option<&str>, marker: &str) -> String {
    let Some(delimiter) = delimiter.filter(|delimiter| !delimiter.is_empty()) else {
        return marker.to_string();
    };
    let Some(after_prefix) = marker.strip_prefix(prefix) else {
        return marker.to_string();
    };
    let Some(at) = after_prefix.find(delimiter) else {
        return marker.to_string();
    };
    let common_prefix = &marker[..prefix.len() + at + delimiter.len()];
    // Every key of at most MAX_KEY_BYTES bytes that starts with the common prefix sorts at or before
    // the common prefix followed by LAST_CHAR up to at least that length.
    let fill = (MAX_KEY_BYTES.saturating_sub(common_prefix.len())).div_ceil(LAST_CHAR.len_utf8()) + 1;
    let mut start_after = String::with_capacity(common_prefix.len() + fill * LAST_CHAR.len_utf8());
    start_after.push_str(common_prefix);
    start_after.extend(std::iter::repeat_n(LAST_CHAR, fill));
    start_after
}

/// What S3's `encoding-type=url` escapes: every byte but unreserved characters (RFC 3986) and `/`.
const URL_ESCAPED: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~').remove(b'/');

/// Percent-encodes `value` as S3 does for `encoding-type=url`.
pub fn url_encode(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, URL_ESCAPED).to_string()
}

/// One page of a ListMultipartUploads answer.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct UploadPage {
    /// Uploads on the page, in listing order.
    pub uploads: Vec<UploadMeta>,
    /// Common prefixes (with a delimiter), in order.
    pub common_prefixes: Vec<String>,
    /// Whether more entries follow.
    pub is_truncated: bool,
    /// Key marker for the next page (when truncated).
    pub next_key_marker: Option<String>,
    /// Upload id marker for the next page (when truncated and the last entry is an upload).
    pub next_upload_id_marker: Option<String>,
}

/// Pages `uploads` (sorted by key, then initiation, then id, as the store returns them, all under
/// `prefix`) after (`key_marker`, `upload_id_marker`), rolling keys up at `delimiter`, at most
/// `max_uploads` entries.
pub fn page_uploads(
    uploads: Vec<UploadMeta>,
    prefix: &str,
    delimiter: Option<&str>,
    key_marker: Option<&str>,
    upload_id_marker: Option<&str>,
    max_uploads: usize,
) -> UploadPage {
    let delimiter = delimiter.filter(|delimiter| !delimiter.is_empty());
    // The position after the markers: with an upload id marker, after that upload of the marker key;
    // without, after every upload of the marker key.
    let start = match (key_marker, upload_id_marker) {
        (None, _) => 0,
        (Some(key), Some(id)) => uploads
            .iter()
            .position(|upload| upload.key == key && upload.upload_id == id)
            .map(|at| at + 1)
            .unwrap_or_else(|| uploads.partition_point(|upload| upload.key.as_str() <= key)),
        (Some(key), None) => uploads.partition_point(|upload| upload.key.as_str() <= key),
    };
    let mut page = UploadPage::default();
    let mut last_marker: Option<(String, Option<String>)> = None;
    for upload in uploads.into_iter().skip(start) {
        let common_prefix = delimiter.and_then(|delimiter| {
            let after_prefix = upload.key.strip_prefix(prefix)?;
            let at = after_prefix.find(delimiter)?;
            Some(upload.key[..prefix.len() + at + delimiter.len()].to_string())
        });
        if let Some(common_prefix) = common_prefix {
            if page.common_prefixes.last() == Some(&common_prefix) {
                continue;
            }
            // A key marker at or past this common prefix already covered it.
            if key_marker.is_some_and(|marker| marker.starts_with(&common_prefix)) {
                continue;
            }
            if page.uploads.len() + page.common_prefixes.len() == max_uploads {
                page.is_truncated = true;
                break;
            }
            last_marker = Some((common_prefix.clone(), None));
            page.common_prefixes.push(common_prefix);
            continue;
        }
        if page.uploads.len() + page.common_prefixes.len() == max_uploads {
            page.is_truncated = true;
            break;
        }
        last_marker = Some((upload.key.clone(), Some(upload.upload_id.clone())));
        page.uploads.push(upload);
    }
    if page.is_truncated
        && let Some((key, id)) = last_marker
    {
        page.next_key_marker = Some(key);
        page.next_upload_id_marker = id;
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn upload(key: &str, id: &str) -> UploadMeta {
        UploadMeta {
            tags: Default::default(),
            upload_id: id.into(),
            bucket: "b".into(),
            key: key.into(),
            initiated_ms: 0,
            content_type: None,
            headers: Default::default(),
            checksum: None,
            user_metadata: BTreeMap::new(),
        }
    }

    #[test]
    fn markers_skip_rolled_up_prefixes() {
        assert_eq!(start_after_marker("", None, "a/b"), "a/b");
        assert_eq!(start_after_marker("", Some("/"), "abc"), "abc");
        let skip = start_after_marker("", Some("/"), "a/");
        assert!(skip.starts_with("a/") && skip.as_str() > "a/\u{10FFFF}zzz" && skip.as_str() < "a0");
        let long_key = format!("a/{}", "\u{10FFFF}".repeat(255));
        assert!(skip > long_key);
    }

    #[test]
    fn url_encoding_keeps_slashes_and_unreserved() {
        assert_eq!(url_encode("a b/c~d+é"), "a%20b/c~d%2B%C3%A9");
    }

    #[test]
    fn uploads_page_with_markers_and_delimiter() {
        let uploads =
            vec![upload("a", "1"), upload("a", "2"), upload("d/x", "3"), upload("d/y", "4"), upload("e", "5")];
        let first = page_uploads(uploads.clone(), "", None, None, None, 2);
        assert_eq!(first.uploads.len(), 2);
        assert!(first.is_truncated);
        assert_eq!((first.next_key_marker.as_deref(), first.next_upload_id_marker.as_deref()), (Some("a"), Some("2")));
        let second = page_uploads(uploads.clone(), "", Some("/"), Some("a"), Some("2"), 2);
        assert_eq!(second.common_prefixes, vec!["d/".to_string()]);
        assert_eq!(second.uploads.iter().map(|u| u.key.as_str()).collect::<Vec<_>>(), vec!["e"]);
        assert!(!second.is_truncated);
        let after_a = page_uploads(uploads, "", None, Some("a"), None, 10);
        assert_eq!(after_a.uploads.len(), 3);
    }
}
