//! GetObjectAttributes: an object's ETag, checksum, size, storage class and (for a multipart
//! object) its parts, paged by `max-parts` and `part-number-marker`, each attribute only when asked
//! for. A part is numbered by its place in the object (1 for the first), as `?partNumber=` reads
//! it. Owns this answer; must not read object bytes.

use meta::{Layout, ObjectMeta};
use s3s::dto::{
    Checksum, GetObjectAttributesInput, GetObjectAttributesOutput, GetObjectAttributesParts, ObjectAttributes,
    ObjectPart, StorageClass,
};
use s3s::{S3ErrorCode, S3Request, S3Response, S3Result};

use super::checksum::set_checksum;
use super::errors::s3;
use super::names::check_key;
use super::service::LowtailS3;
use super::timestamps::timestamp;
use super::versions;

/// Most parts one answer lists (S3's default and limit).
const MAX_PARTS: i32 = 1000;

pub async fn get_object_attributes(
    service: &LowtailS3,
    req: S3Request<GetObjectAttributesInput>,
) -> S3Result<S3Response<GetObjectAttributesOutput>> {
    let input = req.input;
    check_key(&input.key)?;
    if input.sse_customer_algorithm.is_some() || input.sse_customer_key.is_some() {
        return Err(s3(S3ErrorCode::NotImplemented, "server-side encryption is not supported (SSE-C)"));
    }
    // The header is one comma-separated list (s3s keeps each header line as one item).
    let names: Vec<&str> =
        input.object_attributes.iter().flat_map(|attribute| attribute.as_str().split(',')).map(str::trim).collect();
    if let Some(unknown) = names.iter().find(|name| !KNOWN.contains(name)) {
        return Err(s3(S3ErrorCode::InvalidArgument, format!("unknown object attribute {unknown:?}")));
    }
    let asked = |name: &str| names.contains(&name);
    let object = versions::object_for(service, &input.bucket, &input.key, input.version_id.as_deref()).await?;
    let mut output = GetObjectAttributesOutput {
        last_modified: Some(timestamp(object.last_modified_ms)),
        version_id: versions::answered_id(&object),
        ..Default::default()
    };
    if asked(ObjectAttributes::ETAG) {
        output.e_tag = Some(s3s::dto::ETag::Strong(object.etag.clone()));
    }
    if asked(ObjectAttributes::CHECKSUM) && object.checksum.is_some() {
        let mut checksum = Checksum::default();
        set_checksum!(checksum, object.checksum.as_ref(), with_type);
        output.checksum = Some(checksum);
    }
    if asked(ObjectAttributes::OBJECT_SIZE) {
        output.object_size = i64::try_from(object.size_bytes).ok();
    }
    if asked(ObjectAttributes::STORAGE_CLASS) {
        output.storage_class = Some(StorageClass::from_static(StorageClass::STANDARD));
    }
    if asked(ObjectAttributes::OBJECT_PARTS) {
        output.object_parts = parts(&object, input.max_parts, input.part_number_marker)?;
    }
    Ok(S3Response::new(output))
}

/// The attributes S3 defines.
const KNOWN: [&str; 5] = [
    ObjectAttributes::ETAG,
    ObjectAttributes::CHECKSUM,
    ObjectAttributes::OBJECT_PARTS,
    ObjectAttributes::STORAGE_CLASS,
    ObjectAttributes::OBJECT_SIZE,
];

/// The parts of a multipart `object` after `marker`, at most `max` of them (`None` for an object
/// written whole, which S3 answers without parts).
fn parts(object: &ObjectMeta, max: Option<i32>, marker: Option<i32>) -> S3Result<Option<GetObjectAttributesParts>> {
    let Layout::Composite { pieces } = &object.layout else { return Ok(None) };
    let max = max.unwrap_or(MAX_PARTS);
    let marker = marker.unwrap_or(0);
    if !(0..=MAX_PARTS).contains(&max) || marker < 0 {
        return Err(s3(S3ErrorCode::InvalidArgument, "max-parts is 0 to 1000 and part-number-marker not negative"));
    }
    let numbered =
        pieces.iter().enumerate().map(|(index, piece)| (i32::try_from(index + 1).unwrap_or(i32::MAX), piece));
    let after: Vec<_> = numbered.filter(|(number, _)| *number > marker).collect();
    let listed: Vec<ObjectPart> = after
        .iter()
        .take(usize::try_from(max).unwrap_or(0))
        .map(|(number, piece)| {
            let mut part = ObjectPart {
                part_number: Some(*number),
                size: i64::try_from(piece.length_bytes).ok(),
                ..Default::default()
            };
            set_checksum!(part, piece.checksum.as_ref());
            part
        })
        .collect();
    let truncated = after.len() > listed.len();
    Ok(Some(GetObjectAttributesParts {
        is_truncated: Some(truncated),
        max_parts: Some(max),
        next_part_number_marker: listed.last().and_then(|part| part.part_number).filter(|_| truncated),
        part_number_marker: Some(marker),
        total_parts_count: i32::try_from(pieces.len()).ok(),
        parts: Some(listed),
    }))
}

/// Whether `request` is a GetObjectAttributes (`GET /bucket/key?attributes`).
pub fn is_attributes_request<B>(request: &hyper::Request<B>) -> bool {
    request.method() == hyper::Method::GET
        && request
            .uri()
            .query()
            .is_some_and(|query| query.split('&').any(|pair| pair == "attributes" || pair == "attributes="))
}

/// The answer `document` with its `<ETag>` unquoted, as S3 writes it in GetObjectAttributes alone
/// (s3s 0.14 quotes every ETag element); `None` when there is nothing to change.
pub fn unquote_etag(document: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(document).ok()?;
    let start =
        text.find("<ETag>&quot;").map(|at| (at, "&quot;")).or_else(|| text.find("<ETag>\"").map(|at| (at, "\"")))?;
    let (at, quote) = start;
    let value_start = at + "<ETag>".len() + quote.len();
    let value_end = value_start + text[value_start..].find(quote)?;
    let closing = value_end + quote.len();
    if !text[closing..].starts_with("</ETag>") {
        return None;
    }
    Some([&text[..at + "<ETag>".len()], &text[value_start..value_end], &text[closing..]].concat().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_etag_element_is_unquoted_and_nothing_else_changes() {
        let quoted = b"<R><ETag>&quot;abc-2&quot;</ETag><ObjectSize>3</ObjectSize></R>";
        assert_eq!(unquote_etag(quoted).unwrap(), b"<R><ETag>abc-2</ETag><ObjectSize>3</ObjectSize></R>".to_vec());
        let raw = b"<R><ETag>\"abc\"</ETag></R>";
        assert_eq!(unquote_etag(raw).unwrap(), b"<R><ETag>abc</ETag></R>".to_vec());
        assert_eq!(unquote_etag(b"<R><ObjectSize>3</ObjectSize></R>"), None);
        let request = |uri: &str| hyper::Request::get(uri).body(()).unwrap();
        assert!(is_attributes_request(&request("/b/k?attributes")));
        assert!(!is_attributes_request(&request("/b/k?tagging")));
    }
}
