//! Listing helpers the S3 operations share: v1 markers on top of the metadata store's ListObjectsV2
//! semantics, `encoding-type=url`, and in-memory paging of multipart uploads. Pure functions; they must
//! not read or write the store.

use meta::UploadMeta;
use meta::validate::MAX_KEY_BYTES;

/// The largest character in UTF-8 byte order (U+10FFFF encodes as F4 8F BF BF).
const LAST_CHAR: char = '\u{10FFFF}';

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
