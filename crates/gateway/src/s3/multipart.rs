//! Multipart uploads: CreateMultipartUpload, UploadPart, UploadPartCopy, CompleteMultipartUpload
//! (S3's part rules, the multipart ETag and checksum, a retried completion answered again),
//! AbortMultipartUpload, ListMultipartUploads and ListParts. Owns these rules; must not keep the bytes
//! of a part that is not recorded, nor release a part the completed object references.

use meta::{
    CompletedPart, CompositePiece, Layout, MetaError, MultipartCompletion, ObjectMeta, PartMeta, StoredChecksum,
    UploadMeta,
};
use s3s::dto::{
    AbortMultipartUploadInput, AbortMultipartUploadOutput, ChecksumAlgorithm, CompleteMultipartUploadInput,
    CompleteMultipartUploadOutput, CopyPartResult, CreateMultipartUploadInput, CreateMultipartUploadOutput, ETag,
    Initiator, ListMultipartUploadsInput, ListMultipartUploadsOutput, ListPartsInput, ListPartsOutput, MultipartUpload,
    Part, StorageClass, UploadPartCopyInput, UploadPartCopyOutput, UploadPartInput, UploadPartOutput,
};
use s3s::{S3ErrorCode, S3Request, S3Response, S3Result};

use super::abandoned_uploads;
use super::checksum::{self, Completion, Declared, set_checksum};
use super::copy;
use super::errors::{from_meta, s3};
use super::etag::multipart_etag;
use super::list::{ListRequest, common_prefixes, max_keys, owner, page_uploads};
use super::names::{check_key, part_number};
use super::service::LowtailS3;
use super::timestamps::{now_ms, timestamp};
use super::unsupported::refuse_unsupported;
use super::write::{self, BodyClaims, content_headers, release, settle_commit, user_metadata, with_redundancy};

pub async fn create_multipart_upload(
    service: &LowtailS3,
    req: S3Request<CreateMultipartUploadInput>,
) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
    refuse_unsupported(&req.headers)?;
    let input = req.input;
    check_key(&input.key)?;
    let upload_checksum = checksum::for_upload(input.checksum_algorithm.as_ref(), input.checksum_type.as_ref())?;
    let upload = UploadMeta {
        tags: super::tagging::from_header(input.tagging.as_deref())?,
        upload_id: String::new(),
        bucket: input.bucket.clone(),
        key: input.key.clone(),
        initiated_ms: now_ms(),
        content_type: input.content_type,
        user_metadata: user_metadata(input.metadata)?,
        headers: content_headers!(input),
        checksum: upload_checksum,
    };
    let upload = service.meta.create_multipart(upload).await.map_err(from_meta)?;
    let output = CreateMultipartUploadOutput {
        bucket: Some(input.bucket),
        key: Some(input.key),
        upload_id: Some(upload.upload_id),
        checksum_algorithm: input.checksum_algorithm,
        checksum_type: upload_checksum.map(|upload| checksum::type_of(upload.composite)),
        ..Default::default()
    };
    Ok(S3Response::new(output))
}

pub async fn upload_part(
    service: &LowtailS3,
    req: S3Request<UploadPartInput>,
) -> S3Result<S3Response<UploadPartOutput>> {
    let input = req.input;
    let _in_flight = crate::data::io::descriptor::write_in_flight(now_ms());
    // Before reading the body, so a part for a missing upload writes no data.
    let upload_key = (input.bucket.as_str(), input.key.as_str(), input.upload_id.as_str());
    let (number, upload) = part_target(service, &req.headers, upload_key, input.part_number).await?;
    // A part of an upload created with a checksum is checked and recorded with it.
    let declared = Declared::from_headers(&req.headers, upload.checksum.map(|upload| upload.algorithm))?;
    checksum::check_part_algorithm(upload.checksum.as_ref(), declared.as_ref())?;
    let claims = BodyClaims {
        content_length: input.content_length,
        content_md5: input.content_md5.as_deref(),
        checksum: declared,
        trailers: req.trailing_headers.as_ref(),
    };
    let ack = write::bucket_write_ack(service, &input.bucket).await?;
    let part_of = crate::labels::PartOf { upload_id: input.upload_id.clone(), part_number: number };
    let label = write::object_label(
        (&input.bucket, &input.key, Some(part_of)),
        claims.content_length.and_then(|length| u64::try_from(length).ok()),
        (&upload.content_type, &upload.user_metadata, &upload.headers),
        claims.checksum.as_ref().map(super::checksum::Declared::algorithm),
    );
    let body =
        crate::data::io::descriptor::labelled(label, write::write_body(service, input.body, claims, ack)).await?;
    let part = PartMeta {
        part_number: number,
        size_bytes: body.size_bytes,
        etag: body.etag.clone(),
        last_modified_ms: now_ms(),
        checksum: body.checksum.clone(),
        layout: body.written.layout.clone(),
    };
    record_part(service, upload_key, part).await?;
    let mut output = UploadPartOutput { e_tag: Some(ETag::Strong(body.etag)), ..Default::default() };
    set_checksum!(output, body.checksum.as_ref());
    Ok(with_redundancy(S3Response::new(output), body.written.redundancy, ack))
}

/// A part copied from (a range of) an existing object, read and written as `copy_object` does;
/// the part is recorded as UploadPart records one.
pub async fn upload_part_copy(
    service: &LowtailS3,
    req: S3Request<UploadPartCopyInput>,
) -> S3Result<S3Response<UploadPartCopyOutput>> {
    let input = req.input;
    let _in_flight = crate::data::io::descriptor::write_in_flight(now_ms());
    // Before reading the source, so a part for a missing upload reads and writes nothing.
    let upload_key = (input.bucket.as_str(), input.key.as_str(), input.upload_id.as_str());
    let (number, upload) = part_target(service, &req.headers, upload_key, input.part_number).await?;
    let conditions = copy::source_conditions!(input);
    let (_, _, source) = copy::copy_source(service, &input.copy_source, &conditions).await?;
    let range = copy::source_range(input.copy_source_range.as_deref(), source.size_bytes)?;
    let size_bytes = range.end - range.start;
    // The part's checksum, in its upload's algorithm, is computed from the bytes copied.
    let algorithm = upload.checksum.map(|upload| upload.algorithm);
    let mut hasher = algorithm.map(checksum::Hasher::new);
    let ack = write::bucket_write_ack(service, &input.bucket).await?;
    let part_of = crate::labels::PartOf { upload_id: input.upload_id.clone(), part_number: number };
    let label = write::object_label(
        (&input.bucket, &input.key, Some(part_of)),
        Some(size_bytes),
        (&upload.content_type, &upload.user_metadata, &upload.headers),
        algorithm,
    );
    let copied = copy::copy_range(service, &source.layout, range, &mut hasher, ack);
    let (written, etag) = crate::data::io::descriptor::labelled(label, copied).await?;
    let part_checksum = algorithm.zip(hasher).map(|(algorithm, hasher)| checksum::full(algorithm, &hasher.finalize()));
    let last_modified_ms = now_ms();
    let part = PartMeta {
        part_number: number,
        size_bytes,
        etag: etag.clone(),
        last_modified_ms,
        checksum: part_checksum.clone(),
        layout: written.layout.clone(),
    };
    record_part(service, upload_key, part).await?;
    let mut result = CopyPartResult {
        e_tag: Some(ETag::Strong(etag)),
        last_modified: Some(timestamp(last_modified_ms)),
        ..Default::default()
    };
    set_checksum!(result, part_checksum.as_ref());
    let output = UploadPartCopyOutput { copy_part_result: Some(result), ..Default::default() };
    Ok(with_redundancy(S3Response::new(output), written.redundancy, ack))
}

/// The part number of an UploadPart or UploadPartCopy and the upload (`bucket`, `key`,
/// `upload_id`) it adds to, once the request's headers, key and part number are checked.
async fn part_target(
    service: &LowtailS3,
    headers: &hyper::HeaderMap,
    (bucket, key, upload_id): (&str, &str, &str),
    number: i32,
) -> S3Result<(u16, UploadMeta)> {
    refuse_unsupported(headers)?;
    check_key(key)?;
    let number = part_number(number)?;
    let upload = service.meta.get_multipart(bucket, key, upload_id).await.map_err(from_meta)?;
    Ok((number, upload))
}

/// Records `part` of the upload (`bucket`, `key`, `upload_id`): the part it replaces is released,
/// or, if the record fails, the part's own bytes are.
async fn record_part(
    service: &LowtailS3,
    (bucket, key, upload_id): (&str, &str, &str),
    part: PartMeta,
) -> S3Result<()> {
    let written = part.layout.clone();
    let committed = service.meta.put_part(bucket, key, upload_id, part).await;
    settle_commit(service, committed.map(|replaced| replaced.map(|version| version.layout)), &written).await
}

pub async fn complete_multipart_upload(
    service: &LowtailS3,
    req: S3Request<CompleteMultipartUploadInput>,
) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
    let mut input = req.input;
    check_key(&input.key)?;
    let named = input.multipart_upload.take().and_then(|upload| upload.parts).unwrap_or_default();
    let requested = requested_parts(&named)?;
    let upload = match service.meta.get_multipart(&input.bucket, &input.key, &input.upload_id).await {
        Ok(upload) => upload,
        Err(MetaError::NoSuchUpload(id)) => {
            return completed_already(service, &input, &requested)
                .await?
                .ok_or_else(|| from_meta(MetaError::NoSuchUpload(id)));
        }
        Err(error) => return Err(from_meta(error)),
    };
    let stored = service.meta.list_parts(&input.bucket, &input.key, &input.upload_id).await.map_err(from_meta)?;
    let (pieces, used, offset_bytes) = assemble(&requested, &stored, service.options.min_part_bytes)?;
    if let Some(declared) = input.mpu_object_size
        && u64::try_from(declared).ok() != Some(offset_bytes)
    {
        return Err(s3(
            S3ErrorCode::InvalidRequest,
            format!("x-amz-mp-object-size is {declared}; the parts named make {offset_bytes} bytes"),
        ));
    }
    let completion = Completion { named: &named, parts: &used, whole: &input };
    let object_checksum = checksum::for_completion(upload.checksum.as_ref(), &completion)?;
    let etag = multipart_etag(&used.iter().map(|part| part.etag.as_str()).collect::<Vec<_>>())?;
    let object = ObjectMeta {
        version: Default::default(),
        tags: upload.tags,
        size_bytes: offset_bytes,
        etag: etag.clone(),
        content_type: upload.content_type,
        user_metadata: upload.user_metadata,
        headers: upload.headers,
        last_modified_ms: now_ms(),
        completed_upload_id: Some(input.upload_id.clone()),
        checksum: object_checksum.clone(),
        layout: Layout::Composite { pieces },
    };
    let condition =
        super::conditions::write_condition(input.if_match.as_ref(), input.if_none_match.as_ref(), None, None);
    let completion = service
        .meta
        .complete_multipart(&input.bucket, &input.key, &input.upload_id, &requested, object, &condition)
        .await
        .map_err(from_meta)?;
    let version = completion.version.clone();
    release_unreferenced(service, completion, &used).await;
    let mut answer = completed(&input, etag, object_checksum.as_ref());
    answer.output.version_id = super::versions::answered(&version);
    Ok(answer)
}

/// The parts a CompleteMultipartUpload names, as the store takes them: at least one
/// (MalformedXML), valid numbers, in ascending order (InvalidPartOrder).
fn requested_parts(named: &[s3s::dto::CompletedPart]) -> S3Result<Vec<CompletedPart>> {
    if named.is_empty() {
        return Err(s3(S3ErrorCode::MalformedXML, "the completion names no parts"));
    }
    let mut requested = Vec::with_capacity(named.len());
    for part in named {
        let number = part_number(part.part_number.unwrap_or(0))?;
        let etag = part.e_tag.as_ref().map(|etag| etag.value().to_string()).unwrap_or_default();
        requested.push(CompletedPart { part_number: number, etag });
    }
    if requested.windows(2).any(|pair| pair[0].part_number >= pair[1].part_number) {
        return Err(from_meta(MetaError::InvalidPartOrder));
    }
    Ok(requested)
}

/// The pieces of the object the `requested` parts make, the `stored` parts they are and the
/// object's size: every part uploaded with the ETag named (InvalidPart), every part but the last at
/// least `min_part_bytes` (EntityTooSmall).
fn assemble<'a>(
    requested: &[CompletedPart],
    stored: &'a [PartMeta],
    min_part_bytes: u64,
) -> S3Result<(Vec<CompositePiece>, Vec<&'a PartMeta>, u64)> {
    let mut pieces = Vec::with_capacity(requested.len());
    let mut used: Vec<&PartMeta> = Vec::with_capacity(requested.len());
    let mut offset_bytes = 0u64;
    for (index, wanted) in requested.iter().enumerate() {
        let part =
            stored.iter().find(|part| part.part_number == wanted.part_number && part.etag == wanted.etag).ok_or_else(
                || s3(S3ErrorCode::InvalidPart, format!("part {} was not uploaded with that ETag", wanted.part_number)),
            )?;
        let is_last = index + 1 == requested.len();
        if !is_last && part.size_bytes < min_part_bytes {
            return Err(s3(
                S3ErrorCode::EntityTooSmall,
                format!(
                    "part {} is {} bytes; every part but the last needs {}",
                    part.part_number, part.size_bytes, min_part_bytes
                ),
            ));
        }
        pieces.push(CompositePiece {
            checksum: part.checksum.clone(),
            object_offset_bytes: offset_bytes,
            length_bytes: part.size_bytes,
            layout: part.layout.clone(),
        });
        offset_bytes += part.size_bytes;
        used.push(part);
    }
    Ok((pieces, used, offset_bytes))
}

/// Releases what a completion left unreferenced: the parts the object does not use (the store
/// removed their records) and the object it replaced.
async fn release_unreferenced(service: &LowtailS3, completion: MultipartCompletion, used: &[&PartMeta]) {
    for part in &completion.parts {
        let referenced = used.iter().any(|used| used.part_number == part.part_number && used.layout == part.layout);
        if !referenced {
            release(service, &part.layout).await;
        }
    }
    if let Some(previous) = completion.previous {
        release(service, &previous.layout).await;
    }
}

/// The answer to a CompleteMultipartUpload whose upload is gone because this very completion
/// already succeeded (a client retrying after a timeout): the object the upload became, with the
/// ETag the same parts make. `None` when the key holds anything else.
async fn completed_already(
    service: &LowtailS3,
    input: &CompleteMultipartUploadInput,
    requested: &[CompletedPart],
) -> S3Result<Option<S3Response<CompleteMultipartUploadOutput>>> {
    let object = match service.meta.get_object(&input.bucket, &input.key).await {
        Ok(object) => object,
        Err(MetaError::NoSuchKey { .. }) => return Ok(None),
        Err(error) => return Err(from_meta(error)),
    };
    let etags: Vec<&str> = requested.iter().map(|part| part.etag.as_str()).collect();
    let same = object.completed_upload_id.as_deref() == Some(input.upload_id.as_str())
        && object.etag == multipart_etag(&etags)?;
    Ok(same.then(|| completed(input, object.etag.clone(), object.checksum.as_ref())))
}

/// The answer to a CompleteMultipartUpload that made (or had made) the object with `etag`.
fn completed(
    input: &CompleteMultipartUploadInput,
    etag: String,
    object_checksum: Option<&StoredChecksum>,
) -> S3Response<CompleteMultipartUploadOutput> {
    let mut output = CompleteMultipartUploadOutput {
        bucket: Some(input.bucket.clone()),
        key: Some(input.key.clone()),
        e_tag: Some(ETag::Strong(etag)),
        location: Some(format!("/{}/{}", input.bucket, input.key)),
        ..Default::default()
    };
    set_checksum!(output, object_checksum, with_type);
    S3Response::new(output)
}

pub async fn abort_multipart_upload(
    service: &LowtailS3,
    req: S3Request<AbortMultipartUploadInput>,
) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
    let input = req.input;
    let (meta, data) = (service.meta.as_ref(), service.data.as_ref());
    abandoned_uploads::abort_upload(meta, data, &input.bucket, &input.key, &input.upload_id)
        .await
        .map_err(from_meta)?;
    Ok(S3Response::new(AbortMultipartUploadOutput::default()))
}

pub async fn list_multipart_uploads(
    service: &LowtailS3,
    req: S3Request<ListMultipartUploadsInput>,
) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
    let input = req.input;
    let request = ListRequest::new(input.delimiter, &input.encoding_type, input.prefix, input.max_uploads)?;
    let (encode, prefix) = (request.encode, &request.prefix);
    let uploads = service.meta.list_uploads(&input.bucket, prefix).await.map_err(from_meta)?;
    let page = page_uploads(
        uploads,
        prefix,
        request.delimiter.as_deref(),
        input.key_marker.as_deref().filter(|marker| !marker.is_empty()),
        input.upload_id_marker.as_deref().filter(|marker| !marker.is_empty()),
        request.max_keys,
    );
    let owner = owner(req.credentials.as_ref());
    let uploads = page
        .uploads
        .iter()
        .map(|upload| MultipartUpload {
            key: Some(encode(&upload.key)),
            upload_id: Some(upload.upload_id.clone()),
            initiated: Some(timestamp(upload.initiated_ms)),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            owner: owner.clone(),
            initiator: owner
                .as_ref()
                .map(|owner| Initiator { display_name: owner.display_name.clone(), id: owner.id.clone() }),
            ..Default::default()
        })
        .collect();
    let output = ListMultipartUploadsOutput {
        bucket: Some(input.bucket),
        prefix: Some(encode(prefix)),
        delimiter: request.delimiter.as_deref().map(encode),
        key_marker: Some(input.key_marker.as_deref().map(encode).unwrap_or_default()),
        upload_id_marker: Some(input.upload_id_marker.unwrap_or_default()),
        max_uploads: Some(request.max_keys as i32),
        is_truncated: Some(page.is_truncated),
        next_key_marker: page.next_key_marker.as_deref().map(encode),
        next_upload_id_marker: page.next_upload_id_marker,
        uploads: Some(uploads),
        common_prefixes: common_prefixes(&page.common_prefixes, encode),
        encoding_type: request.encoding_type(),
        ..Default::default()
    };
    Ok(S3Response::new(output))
}

pub async fn list_parts(service: &LowtailS3, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
    let input = req.input;
    let max_parts = max_keys(input.max_parts)?;
    let marker = input.part_number_marker.unwrap_or(0).max(0);
    let upload = service.meta.get_multipart(&input.bucket, &input.key, &input.upload_id).await.map_err(from_meta)?;
    let stored = service.meta.list_parts(&input.bucket, &input.key, &input.upload_id).await.map_err(from_meta)?;
    let mut after_marker = stored.into_iter().filter(|part| i32::from(part.part_number) > marker).peekable();
    let mut parts = Vec::new();
    // At most max_parts (≤ 1000) rounds.
    while parts.len() < max_parts {
        let Some(part) = after_marker.next() else { break };
        parts.push(part);
    }
    let is_truncated = after_marker.peek().is_some();
    let next_part_number_marker = parts.last().map(|part| i32::from(part.part_number));
    let owner = owner(req.credentials.as_ref());
    let output = ListPartsOutput {
        bucket: Some(input.bucket),
        key: Some(input.key),
        upload_id: Some(input.upload_id),
        part_number_marker: Some(marker),
        next_part_number_marker,
        max_parts: Some(max_parts as i32),
        is_truncated: Some(is_truncated),
        storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
        initiator: owner
            .as_ref()
            .map(|owner| Initiator { display_name: owner.display_name.clone(), id: owner.id.clone() }),
        owner,
        parts: Some(parts.iter().map(listed_part).collect()),
        checksum_algorithm: upload
            .checksum
            .map(|upload| ChecksumAlgorithm::from_static(checksum::name(upload.algorithm))),
        checksum_type: upload.checksum.map(|upload| checksum::type_of(upload.composite)),
        ..Default::default()
    };
    Ok(S3Response::new(output))
}

/// A part as ListParts lists it.
fn listed_part(part: &PartMeta) -> Part {
    let mut listed = Part {
        part_number: Some(i32::from(part.part_number)),
        e_tag: Some(ETag::Strong(part.etag.clone())),
        size: Some(part.size_bytes as i64),
        last_modified: Some(timestamp(part.last_modified_ms)),
        ..Default::default()
    };
    set_checksum!(listed, part.checksum.as_ref());
    listed
}
