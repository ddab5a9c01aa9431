//! Reading objects: GetObject and HeadObject (conditional requests, `Range` and `?partNumber=`, the
//! object's checksum when asked) and GetObjectTagging. Owns what these answer; must not change
//! anything, or read bytes except through `read_body` and the data path.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use meta::validate::MAX_PART_NUMBER;
use meta::{Layout, ObjectMeta};
use s3s::dto::{ChecksumMode, ETag, GetObjectInput, GetObjectOutput, HeadObjectInput, HeadObjectOutput, Metadata};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use super::batch_hint::{BATCH_HINT_HEADER, BATCHED_HEADER, Hint, MAX_HINTED_OBJECT_BYTES};
use super::checksum::set_checksum;
use super::conditions::{self, Conditions, Precondition};
use super::errors::{from_data, s3};
use super::names::check_key;
use super::read_body;
use super::service::LowtailS3;
use super::timestamps::timestamp;

/// The Content-Type S3 answers for an object stored without one.
const DEFAULT_CONTENT_TYPE: &str = "binary/octet-stream";

/// The object a GET or HEAD input (distinct s3s types with the same field names) names, once its
/// conditional headers hold, with the byte range to answer and its Content-Range.
macro_rules! read_target {
    ($service:expr, $input:expr) => {{
        let input = &$input;
        let conditions = Conditions {
            if_match: input.if_match.as_ref(),
            if_none_match: input.if_none_match.as_ref(),
            if_modified_since: input.if_modified_since.as_ref(),
            if_unmodified_since: input.if_unmodified_since.as_ref(),
        };
        let named = (input.bucket.as_str(), input.key.as_str(), input.version_id.as_deref());
        let object = object_for_read($service, named, &conditions).await?;
        let (range, content_range, parts_count) = match input.part_number {
            None => {
                let (range, content_range) = resolve_range(input.range.as_ref(), object.size_bytes)?;
                (range, content_range, None)
            }
            Some(_) if input.range.is_some() => {
                return Err(s3(
                    S3ErrorCode::InvalidRequest,
                    "Cannot specify both Range header and partNumber query parameter",
                ));
            }
            Some(number) => part_range(&object, number)?,
        };
        (object, range, content_range, parts_count)
    }};
}

/// What GET and HEAD both answer about an object (`$output` is `GetObjectOutput` or
/// `HeadObjectOutput`: distinct s3s types with the same field names), plus `$extra` fields.
macro_rules! object_answer {
    ($output:ident, $object:expr, $length:expr, $content_range:expr, { $($field:ident: $value:expr),* $(,)? }) => {
        $output {
            $($field: $value,)*
            content_length: Some($length as i64),
            content_range: $content_range,
            accept_ranges: Some("bytes".into()),
            e_tag: Some(ETag::Strong($object.etag.clone())),
            last_modified: Some(timestamp($object.last_modified_ms)),
            metadata: output_metadata(&$object),
            content_type: Some($object.content_type.clone().unwrap_or_else(|| DEFAULT_CONTENT_TYPE.into())),
            cache_control: $object.headers.cache_control.clone(),
            content_disposition: $object.headers.content_disposition.clone(),
            content_encoding: $object.headers.content_encoding.clone(),
            content_language: $object.headers.content_language.clone(),
            expires: $object.headers.expires_ms.map(timestamp),
            version_id: super::versions::answered_id(&$object),
            ..Default::default()
        }
    };
}

pub async fn get_object(service: &LowtailS3, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
    let hint = match req.headers.get(BATCH_HINT_HEADER) {
        Some(value) => Some(Hint::parse(value.to_str().unwrap_or_default())?),
        None => None,
    };
    let (object, range, content_range, parts_count) = read_target!(service, req.input);
    let length = range.end - range.start;
    if let Some(hint) = &hint {
        let whole = req.input.range.is_none() && req.input.part_number.is_none();
        if whole && object.size_bytes <= MAX_HINTED_OBJECT_BYTES {
            let owner = req.credentials.as_ref().map_or("", |c| c.access_key.as_str());
            let answer = get_hinted(service, hint, owner, object, req.input.checksum_mode.as_ref()).await;
            return answer.map(|answer| answer.map_output(|output| with_overrides(output, &req.input)));
        }
    }
    // Read piece by piece: the first before answering, the rest as the client takes them,
    // all under a hold, so an overwrite or delete meanwhile waits to free the bytes.
    let hold = service.data.hold(&object.layout);
    let whole = range == (0..object.size_bytes);
    let name = format!("{}/{}", req.input.bucket, req.input.key);
    let examined = (Arc::clone(&service.data), object.layout.clone());
    let expected = super::verify::Expected::of(&object, &name, whole)
        .map(|expected| expected.on_mismatch(move || examined.0.examine(&examined.1)));
    let mut pieces = read_body::read_pieces(&object.layout, range, read_body::READ_PIECE_BYTES).into_iter();
    let first = match pieces.next() {
        None => vec![Bytes::new()],
        Some(piece) => read_body::read_exact(service.data.as_ref(), &object.layout, piece).await.map_err(from_data)?,
    };
    let rest: Vec<_> = pieces.collect();
    let body = if rest.is_empty() {
        if let Some(expected) = expected {
            super::verify::check_whole(expected, &first).map_err(from_data)?;
        }
        read_body::body_of(first)
    } else {
        read_body::streamed(Arc::clone(&service.data), (object.layout.clone(), hold), first, rest, expected)
    };
    let mut output = object_answer!(GetObjectOutput, object, length, content_range, {
        body: Some(body),
        parts_count: parts_count,
        tag_count: tag_count(&object),
    });
    if checksum_asked(req.input.checksum_mode.as_ref(), length, &object) {
        set_checksum!(output, object.checksum.as_ref(), with_type);
    }
    let mut answer = S3Response::new(with_overrides(output, &req.input));
    if hint.is_some() {
        // A ranged, part or large GET is not grouped: it says it was read alone.
        answer.headers.insert(BATCHED_HEADER, 1.into());
    }
    if let Some(sessions) = &service.sessions
        && req.input.range.is_none()
        && req.input.part_number.is_none()
    {
        let owner = req.credentials.as_ref().map_or("", |c| c.access_key.as_str());
        if let Some(stripes) = sessions.observe(owner, &object.layout, std::time::Instant::now()) {
            service.data.observe_coaccess(&stripes);
        }
    }
    Ok(answer)
}

/// A whole-object GET read together with the others of its hint (`batch_hint`).
async fn get_hinted(
    service: &LowtailS3,
    hint: &Hint,
    owner: &str,
    object: ObjectMeta,
    checksum_mode: Option<&ChecksumMode>,
) -> S3Result<S3Response<GetObjectOutput>> {
    let hold = service.data.hold(&object.layout);
    let (read, together) = service.hints.read(&service.data, owner, hint, object.layout.clone()).await;
    drop(hold);
    let parts = read.map_err(from_data)?;
    let length = object.size_bytes;
    if parts.iter().map(|p| p.len() as u64).sum::<u64>() != length {
        return Err(from_data(crate::data::DataError::Internal("the batch read the wrong length".into())));
    }
    let body = read_body::body_of(if parts.is_empty() { vec![Bytes::new()] } else { parts });
    let mut output = object_answer!(GetObjectOutput, object, length, None, {
        body: Some(body),
        parts_count: None,
        tag_count: tag_count(&object),
    });
    if checksum_asked(checksum_mode, length, &object) {
        set_checksum!(output, object.checksum.as_ref(), with_type);
    }
    let mut answer = S3Response::new(output);
    answer.headers.insert(BATCHED_HEADER, together.into());
    Ok(answer)
}

pub async fn head_object(
    service: &LowtailS3,
    req: S3Request<HeadObjectInput>,
) -> S3Result<S3Response<HeadObjectOutput>> {
    let (object, range, content_range, parts_count) = read_target!(service, req.input);
    let length = range.end - range.start;
    // A ranged HEAD answers 206; s3s 0.14 ignores a status set here for HeadObject, so
    // `server` sets it from the Content-Range header.
    let mut output = object_answer!(HeadObjectOutput, object, length, content_range, { parts_count: parts_count });
    if checksum_asked(req.input.checksum_mode.as_ref(), length, &object) {
        set_checksum!(output, object.checksum.as_ref(), with_type);
    }
    let mut answer = S3Response::new(output);
    // s3s 0.14's HeadObjectOutput has no tag count; S3 answers it as GET does.
    if let Some(count) = tag_count(&object) {
        answer.headers.insert(TAG_COUNT_HEADER, count.into());
    }
    Ok(answer)
}

/// `output` with the headers a GET's `response-*` parameters ask for in place of the object's
/// (a presigned link that downloads under another name or type).
fn with_overrides(mut output: GetObjectOutput, input: &GetObjectInput) -> GetObjectOutput {
    let replace = |field: &mut Option<String>, wanted: &Option<String>| {
        if wanted.is_some() {
            field.clone_from(wanted);
        }
    };
    replace(&mut output.cache_control, &input.response_cache_control);
    replace(&mut output.content_disposition, &input.response_content_disposition);
    replace(&mut output.content_encoding, &input.response_content_encoding);
    replace(&mut output.content_language, &input.response_content_language);
    replace(&mut output.content_type, &input.response_content_type);
    if input.response_expires.is_some() {
        output.expires.clone_from(&input.response_expires);
    }
    output
}

/// The header of an object's number of tags.
const TAG_COUNT_HEADER: &str = "x-amz-tagging-count";

/// How many tags `object` has, when it has any (S3 leaves the header out otherwise).
fn tag_count(object: &ObjectMeta) -> Option<i32> {
    (!object.tags.is_empty()).then(|| i32::try_from(object.tags.len()).unwrap_or(i32::MAX))
}

/// The object's metadata, with conditional headers checked (412 / 304).
async fn object_for_read(
    service: &LowtailS3,
    (bucket, key, version_id): (&str, &str, Option<&str>),
    conditions: &Conditions<'_>,
) -> S3Result<ObjectMeta> {
    check_key(key)?;
    let object = super::versions::object_for(service, bucket, key, version_id).await?;
    match conditions::evaluate(conditions, &object.etag, object.last_modified_ms) {
        Precondition::Proceed => Ok(object),
        Precondition::Failed => Err(s3(S3ErrorCode::PreconditionFailed, "a precondition does not hold")),
        Precondition::NotModified => {
            let mut error = S3Error::new(S3ErrorCode::NotModified);
            let mut headers = hyper::HeaderMap::new();
            if let Ok(value) = hyper::header::HeaderValue::from_str(&format!("\"{}\"", object.etag)) {
                headers.insert(hyper::header::ETAG, value);
            }
            error.set_headers(headers);
            Err(error)
        }
    }
}

/// Whether a GET or HEAD returns the object's checksum: asked for (`x-amz-checksum-mode: ENABLED`)
/// and answering the whole object (a range's bytes are not what the checksum covers).
fn checksum_asked(mode: Option<&ChecksumMode>, length: u64, object: &ObjectMeta) -> bool {
    mode.is_some_and(|mode| mode.as_str().eq_ignore_ascii_case(ChecksumMode::ENABLED)) && length == object.size_bytes
}

/// The bytes a GET or HEAD returns and, for a ranged request, its Content-Range header.
fn resolve_range(requested: Option<&s3s::dto::Range>, size: u64) -> S3Result<(Range<u64>, Option<String>)> {
    let Some(requested) = requested else { return Ok((0..size, None)) };
    let range = requested.check(size).map_err(|_| {
        s3(S3ErrorCode::InvalidRange, format!("the range is not satisfiable for an object of {size} bytes"))
    })?;
    let content_range = format!("bytes {}-{}/{size}", range.start, range.end - 1);
    Ok((range, Some(content_range)))
}

/// The bytes of part `number` of `object` (GET and HEAD `?partNumber=N`), its Content-Range and the
/// object's part count: a multipart object's parts are its composite pieces, in order; any other
/// object is one part. A part past the last → 416 InvalidPartNumber, as S3 answers.
fn part_range(object: &ObjectMeta, number: i32) -> S3Result<(Range<u64>, Option<String>, Option<i32>)> {
    let index =
        usize::try_from(number).ok().filter(|n| (1..=usize::from(MAX_PART_NUMBER)).contains(n)).ok_or_else(|| {
            s3(S3ErrorCode::InvalidArgument, "Part number must be an integer between 1 and 10000, inclusive")
        })? - 1;
    let (range, parts_count) = match &object.layout {
        Layout::Composite { pieces } => {
            let piece = pieces
                .get(index)
                .ok_or_else(|| invalid_part_number(format!("the object has {} parts, not {number}", pieces.len())))?;
            let start = piece.object_offset_bytes;
            (start..start + piece.length_bytes, Some(i32::try_from(pieces.len()).unwrap_or(i32::MAX)))
        }
        _ if index == 0 => (0..object.size_bytes, None),
        _ => return Err(invalid_part_number(format!("the object has 1 part, not {number}"))),
    };
    let size = object.size_bytes;
    let content_range = (!range.is_empty()).then(|| format!("bytes {}-{}/{size}", range.start, range.end - 1));
    Ok((range, content_range, parts_count))
}

/// S3's 416 InvalidPartNumber ("The requested partnumber is not satisfiable"), which s3s does not name.
fn invalid_part_number(message: String) -> S3Error {
    let mut error = s3(S3ErrorCode::Custom("InvalidPartNumber".into()), message);
    error.set_status_code(hyper::StatusCode::RANGE_NOT_SATISFIABLE);
    error
}

fn output_metadata(object: &ObjectMeta) -> Option<Metadata> {
    (!object.user_metadata.is_empty()).then(|| object.user_metadata.clone().into_iter().collect())
}
