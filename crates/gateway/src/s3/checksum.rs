//! S3's additional checksums (CRC32, CRC32C, CRC64NVME, SHA1, SHA256): which one a request
//! declares (an `x-amz-checksum-*` header, or a trailer of an aws-chunked body named by
//! `x-amz-trailer`), computing it as the body passes, checking it (BadDigest, InvalidRequest), the
//! checksum of a multipart object (COMPOSITE: of its parts' checksums; FULL_OBJECT: its parts' CRCs
//! combined), and the response fields that return one. Owns the S3 rules of these headers; must not
//! store or release anything: handlers decide what to keep.
//!
//! The digests are `s3s::crypto`'s (crc-fast, sha1, sha2); CRC combination is crc-fast's.

use base64::Engine as _;
use meta::{ChecksumAlgorithm as Algorithm, StoredChecksum, UploadChecksum};
use s3s::crypto::{Checksum as _, Crc32, Crc32c, Crc64Nvme, Sha1, Sha256};
use s3s::dto::{self, ChecksumType};
use s3s::{S3ErrorCode, S3Result};

use super::errors::s3;

/// Every algorithm, in the order S3 documents them.
pub const ALGORITHMS: [Algorithm; 5] =
    [Algorithm::Crc32, Algorithm::Crc32c, Algorithm::Crc64nvme, Algorithm::Sha1, Algorithm::Sha256];

/// The algorithm's name as S3 spells it in headers' values (`CRC32`).
pub fn name(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::Crc32 => "CRC32",
        Algorithm::Crc32c => "CRC32C",
        Algorithm::Crc64nvme => "CRC64NVME",
        Algorithm::Sha1 => "SHA1",
        Algorithm::Sha256 => "SHA256",
    }
}

/// The header carrying the algorithm's value (`x-amz-checksum-crc32`).
pub fn header(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::Crc32 => "x-amz-checksum-crc32",
        Algorithm::Crc32c => "x-amz-checksum-crc32c",
        Algorithm::Crc64nvme => "x-amz-checksum-crc64nvme",
        Algorithm::Sha1 => "x-amz-checksum-sha1",
        Algorithm::Sha256 => "x-amz-checksum-sha256",
    }
}

fn digest_bytes(algorithm: Algorithm) -> usize {
    match algorithm {
        Algorithm::Crc32 | Algorithm::Crc32c => 4,
        Algorithm::Crc64nvme => 8,
        Algorithm::Sha1 => 20,
        Algorithm::Sha256 => 32,
    }
}

/// The algorithm a header value names (any case), InvalidRequest for one S3 does not define.
pub fn parse_algorithm(value: &str) -> S3Result<Algorithm> {
    ALGORITHMS.into_iter().find(|&algorithm| name(algorithm).eq_ignore_ascii_case(value.trim())).ok_or_else(|| {
        s3(
            S3ErrorCode::InvalidRequest,
            format!("Checksum algorithm {value:?} is not one of CRC32, CRC32C, CRC64NVME, SHA1, SHA256."),
        )
    })
}

/// Whether only CRCs may be FULL_OBJECT and CRC64NVME only that: S3's rule for a multipart
/// upload's checksum type.
fn check_type(algorithm: Algorithm, composite: bool) -> S3Result<()> {
    let allowed = match algorithm {
        Algorithm::Crc32 | Algorithm::Crc32c => true,
        Algorithm::Crc64nvme => !composite,
        Algorithm::Sha1 | Algorithm::Sha256 => composite,
    };
    if allowed {
        return Ok(());
    }
    let kind = if composite { ChecksumType::COMPOSITE } else { ChecksumType::FULL_OBJECT };
    Err(s3(
        S3ErrorCode::InvalidRequest,
        format!("The {kind} checksum type cannot be used with the {} checksum algorithm.", name(algorithm)),
    ))
}

/// A running digest of one algorithm.
pub enum Hasher {
    Crc32(Crc32),
    Crc32c(Crc32c),
    Crc64nvme(Crc64Nvme),
    Sha1(Sha1),
    Sha256(Sha256),
}

impl Hasher {
    pub fn new(algorithm: Algorithm) -> Self {
        match algorithm {
            Algorithm::Crc32 => Hasher::Crc32(Crc32::new()),
            Algorithm::Crc32c => Hasher::Crc32c(Crc32c::new()),
            Algorithm::Crc64nvme => Hasher::Crc64nvme(Crc64Nvme::new()),
            Algorithm::Sha1 => Hasher::Sha1(Sha1::new()),
            Algorithm::Sha256 => Hasher::Sha256(Sha256::new()),
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Crc32(hasher) => hasher.update(bytes),
            Hasher::Crc32c(hasher) => hasher.update(bytes),
            Hasher::Crc64nvme(hasher) => hasher.update(bytes),
            Hasher::Sha1(hasher) => hasher.update(bytes),
            Hasher::Sha256(hasher) => hasher.update(bytes),
        }
    }

    /// The digest, big-endian for the CRCs as S3 encodes them.
    pub fn finalize(self) -> Vec<u8> {
        match self {
            Hasher::Crc32(hasher) => hasher.finalize().to_vec(),
            Hasher::Crc32c(hasher) => hasher.finalize().to_vec(),
            Hasher::Crc64nvme(hasher) => hasher.finalize().to_vec(),
            Hasher::Sha1(hasher) => hasher.finalize().as_ref().to_vec(),
            Hasher::Sha256(hasher) => hasher.finalize().as_ref().to_vec(),
        }
    }
}

/// The digest of `bytes` read whole.
pub fn digest(algorithm: Algorithm, bytes: &[u8]) -> Vec<u8> {
    let mut hasher = Hasher::new(algorithm);
    hasher.update(bytes);
    hasher.finalize()
}

fn encode(digest: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(digest)
}

/// A client's base64 value for `algorithm`: InvalidRequest unless it is base64 of the algorithm's
/// digest length (a malformed value is not a mismatch).
fn decode(algorithm: Algorithm, value: &str) -> S3Result<Vec<u8>> {
    let invalid = || s3(S3ErrorCode::InvalidRequest, format!("Value for {} header is invalid.", header(algorithm)));
    let bytes = base64::engine::general_purpose::STANDARD.decode(value.trim()).map_err(|_| invalid())?;
    if bytes.len() != digest_bytes(algorithm) {
        return Err(invalid());
    }
    Ok(bytes)
}

/// Where the value a request's body must match comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expected {
    /// An `x-amz-checksum-*` header.
    Header(Vec<u8>),
    /// A trailer of the aws-chunked body, known once the body has been read.
    Trailer,
    /// Nothing to match: the checksum is computed and kept (`x-amz-sdk-checksum-algorithm` alone,
    /// the default, or the algorithm of the multipart upload a part belongs to).
    Computed,
}

/// The checksum a request's body is checked against and stored with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    algorithm: Algorithm,
    expected: Expected,
}

fn header_str<'a>(headers: &'a hyper::HeaderMap, name: &str) -> S3Result<Option<&'a str>> {
    match headers.get(name) {
        None => Ok(None),
        Some(value) => value
            .to_str()
            .map(Some)
            .map_err(|_| s3(S3ErrorCode::InvalidRequest, format!("the {name} header is not ASCII"))),
    }
}

impl Declared {
    /// What `headers` declare about the body's checksum: at most one `x-amz-checksum-*` value
    /// (InvalidRequest for two, or for a malformed one), else a trailer named by `x-amz-trailer`,
    /// else the algorithm of `x-amz-sdk-checksum-algorithm`, else `default` (computed only).
    pub fn from_headers(headers: &hyper::HeaderMap, default: Option<Algorithm>) -> S3Result<Option<Declared>> {
        let mut found = None;
        for algorithm in ALGORITHMS {
            let Some(value) = header_str(headers, header(algorithm))? else { continue };
            if found.is_some() {
                return Err(s3(
                    S3ErrorCode::InvalidRequest,
                    "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.",
                ));
            }
            found = Some(Declared { algorithm, expected: Expected::Header(decode(algorithm, value)?) });
        }
        if found.is_some() {
            return Ok(found);
        }
        if let Some(trailer) = header_str(headers, "x-amz-trailer")? {
            let algorithm = ALGORITHMS
                .into_iter()
                .find(|&algorithm| header(algorithm).eq_ignore_ascii_case(trailer.trim()))
                .ok_or_else(|| {
                    s3(S3ErrorCode::InvalidRequest, format!("The trailer {trailer:?} is not a checksum S3 defines."))
                })?;
            return Ok(Some(Declared { algorithm, expected: Expected::Trailer }));
        }
        if let Some(sdk) = header_str(headers, "x-amz-sdk-checksum-algorithm")? {
            return Ok(Some(Declared { algorithm: parse_algorithm(sdk)?, expected: Expected::Computed }));
        }
        Ok(default.map(|algorithm| Declared { algorithm, expected: Expected::Computed }))
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// A hasher for the body.
    pub fn hasher(&self) -> Hasher {
        Hasher::new(self.algorithm)
    }

    /// The checksum to store once the body's digest is `computed`: BadDigest if the client's value
    /// (header, or the trailer in `trailers`) differs, InvalidRequest if a trailer promised by
    /// `x-amz-trailer` did not come.
    pub fn verify(&self, computed: &[u8], trailers: Option<&hyper::HeaderMap>) -> S3Result<StoredChecksum> {
        let expected = match &self.expected {
            Expected::Header(value) => Some(value.clone()),
            Expected::Trailer => {
                let name = header(self.algorithm);
                let value = trailers.and_then(|trailers| trailers.get(name)).ok_or_else(|| {
                    s3(S3ErrorCode::InvalidRequest, format!("The body ended without the {name} trailer it declared."))
                })?;
                let value = value
                    .to_str()
                    .map_err(|_| s3(S3ErrorCode::InvalidRequest, format!("Value for {name} header is invalid.")))?;
                Some(decode(self.algorithm, value)?)
            }
            Expected::Computed => None,
        };
        if let Some(expected) = expected
            && expected != computed
        {
            return Err(s3(
                S3ErrorCode::BadDigest,
                format!("The {} you specified did not match the calculated checksum.", name(self.algorithm)),
            ));
        }
        Ok(StoredChecksum { algorithm: self.algorithm, value: encode(computed), composite: false })
    }
}

/// The checksum a CreateMultipartUpload asks for: `x-amz-checksum-algorithm` and `-type` (COMPOSITE
/// by default, FULL_OBJECT for CRC64NVME); InvalidRequest for a type without an algorithm or a type
/// the algorithm cannot have.
pub fn for_upload(
    algorithm: Option<&dto::ChecksumAlgorithm>,
    kind: Option<&ChecksumType>,
) -> S3Result<Option<UploadChecksum>> {
    let Some(algorithm) = algorithm else {
        if kind.is_some() {
            return Err(s3(
                S3ErrorCode::InvalidRequest,
                "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.",
            ));
        }
        return Ok(None);
    };
    let algorithm = parse_algorithm(algorithm.as_str())?;
    let composite = match kind.map(ChecksumType::as_str) {
        None => algorithm != Algorithm::Crc64nvme,
        Some(kind) if kind.eq_ignore_ascii_case(ChecksumType::COMPOSITE) => true,
        Some(kind) if kind.eq_ignore_ascii_case(ChecksumType::FULL_OBJECT) => false,
        Some(kind) => {
            return Err(s3(
                S3ErrorCode::InvalidRequest,
                format!("Checksum type {kind:?} is not COMPOSITE or FULL_OBJECT."),
            ));
        }
    };
    check_type(algorithm, composite)?;
    Ok(Some(UploadChecksum { algorithm, composite }))
}

/// InvalidRequest unless a part's declared checksum is of its upload's algorithm (a part of an
/// upload created without one may carry any).
pub fn check_part_algorithm(upload: Option<&UploadChecksum>, part: Option<&Declared>) -> S3Result<()> {
    match (upload, part) {
        (Some(upload), Some(part)) if upload.algorithm != part.algorithm => Err(s3(
            S3ErrorCode::InvalidRequest,
            format!(
                "Checksum Type mismatch occurred, expected checksum Type: {}, actual checksum Type: {}",
                name(upload.algorithm).to_lowercase(),
                name(part.algorithm).to_lowercase()
            ),
        )),
        _ => Ok(()),
    }
}

/// A part of a multipart object as its checksum is combined: its stored checksum and size.
pub struct PartDigest<'a> {
    pub checksum: Option<&'a StoredChecksum>,
    pub size_bytes: u64,
}

/// The checksum of an object completed from `parts` of an upload created with `upload`:
/// COMPOSITE, the digest of the parts' digests followed by `-N`; FULL_OBJECT, the parts' CRCs
/// combined into the CRC of the whole. InternalError if a part lacks its checksum (every part of
/// such an upload is recorded with one).
pub fn of_multipart(upload: &UploadChecksum, parts: &[PartDigest<'_>]) -> S3Result<StoredChecksum> {
    let mut digests = Vec::with_capacity(parts.len());
    for (index, part) in parts.iter().enumerate() {
        let stored = part.checksum.filter(|stored| stored.algorithm == upload.algorithm).ok_or_else(|| {
            s3(
                S3ErrorCode::InternalError,
                format!("part {} of the completion has no {} checksum", index + 1, name(upload.algorithm)),
            )
        })?;
        digests.push((decode(upload.algorithm, &stored.value)?, part.size_bytes));
    }
    if upload.composite {
        let part_digests: Vec<Vec<u8>> = digests.into_iter().map(|(digest, _)| digest).collect();
        return Ok(composite(upload.algorithm, &part_digests));
    }
    Ok(full(upload.algorithm, &combine_crcs(upload.algorithm, &digests)?))
}

/// A FULL_OBJECT checksum of `digest`.
pub fn full(algorithm: Algorithm, digest: &[u8]) -> StoredChecksum {
    StoredChecksum { algorithm, value: encode(digest), composite: false }
}

/// The COMPOSITE checksum of parts whose digests are `part_digests`: the digest of their
/// concatenation, followed by `-N`.
pub fn composite(algorithm: Algorithm, part_digests: &[Vec<u8>]) -> StoredChecksum {
    let mut hasher = Hasher::new(algorithm);
    part_digests.iter().for_each(|digest| hasher.update(digest));
    StoredChecksum {
        algorithm,
        value: format!("{}-{}", encode(&hasher.finalize()), part_digests.len()),
        composite: true,
    }
}

/// The checksum a CopyObject stores: the algorithm `requested` (`x-amz-checksum-algorithm`), else
/// the source's, else the default; COMPOSITE where the source's is and the algorithm stays, since
/// a copy keeps a multipart source's parts.
pub fn for_copy(
    source: Option<&StoredChecksum>,
    requested: Option<&dto::ChecksumAlgorithm>,
) -> S3Result<UploadChecksum> {
    let requested = requested.map(|requested| parse_algorithm(requested.as_str())).transpose()?;
    let algorithm = requested.or(source.map(|source| source.algorithm)).unwrap_or(Algorithm::Crc64nvme);
    let composite = source.is_some_and(|source| source.composite && source.algorithm == algorithm);
    Ok(UploadChecksum { algorithm, composite })
}

/// The CRC of a concatenation from its pieces' CRCs and lengths.
fn combine_crcs(algorithm: Algorithm, pieces: &[(Vec<u8>, u64)]) -> S3Result<Vec<u8>> {
    let crc = match algorithm {
        Algorithm::Crc32 => crc_fast::CrcAlgorithm::Crc32IsoHdlc,
        Algorithm::Crc32c => crc_fast::CrcAlgorithm::Crc32Iscsi,
        Algorithm::Crc64nvme => crc_fast::CrcAlgorithm::Crc64Nvme,
        Algorithm::Sha1 | Algorithm::Sha256 => return Err(s3(S3ErrorCode::InternalError, "a SHA cannot be combined")),
    };
    let as_u64 = |digest: &[u8]| digest.iter().fold(0u64, |value, &byte| (value << 8) | u64::from(byte));
    let mut pieces = pieces.iter();
    let Some((first, _)) = pieces.next() else { return Ok(digest(algorithm, &[])) };
    let combined = pieces
        .fold(as_u64(first), |whole, (digest, length)| crc_fast::checksum_combine(crc, whole, as_u64(digest), *length));
    let width = digest_bytes(algorithm);
    Ok(combined.to_be_bytes()[8 - width..].to_vec())
}

/// The value of `$algorithm` in `$fields`, any s3s type with S3's five `checksum_*` fields.
macro_rules! field {
    ($fields:expr, $algorithm:expr) => {
        match $algorithm {
            Algorithm::Crc32 => $fields.checksum_crc32.as_deref(),
            Algorithm::Crc32c => $fields.checksum_crc32c.as_deref(),
            Algorithm::Crc64nvme => $fields.checksum_crc64nvme.as_deref(),
            Algorithm::Sha1 => $fields.checksum_sha1.as_deref(),
            Algorithm::Sha256 => $fields.checksum_sha256.as_deref(),
        }
    };
}

/// What a CompleteMultipartUpload says about checksums: per part (`parts`, in the order the parts
/// are used) and for the whole object (`whole`, the request's `x-amz-checksum-*` and `-type`).
pub struct Completion<'a> {
    pub named: &'a [dto::CompletedPart],
    pub parts: &'a [&'a meta::PartMeta],
    pub whole: &'a dto::CompleteMultipartUploadInput,
}

/// The checksum of an object completed from an upload created with `upload`. Refuses a part entry
/// whose checksum is not the stored part's (InvalidPart), a COMPOSITE completion that does not name
/// every part's checksum, a checksum type other than the upload's, or a whole-object checksum the
/// upload cannot have (InvalidRequest), and a whole-object value that differs (BadDigest). An
/// upload created without an algorithm gets one only if the completion names a CRC every part was
/// sent with (FULL_OBJECT, combined); else none.
pub fn for_completion(
    upload: Option<&UploadChecksum>,
    completion: &Completion<'_>,
) -> S3Result<Option<StoredChecksum>> {
    check_named_parts(completion)?;
    let declared = ALGORITHMS.into_iter().find(|&algorithm| field!(completion.whole, algorithm).is_some());
    let upload = upload.copied().or_else(|| {
        let algorithm = declared?;
        let every_part =
            completion.parts.iter().all(|part| part.checksum.as_ref().is_some_and(|c| c.algorithm == algorithm));
        (every_part && matches!(algorithm, Algorithm::Crc32 | Algorithm::Crc32c | Algorithm::Crc64nvme))
            .then_some(UploadChecksum { algorithm, composite: false })
    });
    let Some(upload) = upload else {
        return match declared {
            None => Ok(None),
            Some(algorithm) => Err(s3(
                S3ErrorCode::InvalidRequest,
                format!(
                    "The upload was created without a checksum algorithm; its parts have no {} checksum to combine.",
                    name(algorithm)
                ),
            )),
        };
    };
    if let Some(kind) = &completion.whole.checksum_type
        && !type_of(upload.composite).as_str().eq_ignore_ascii_case(kind.as_str())
    {
        return Err(s3(
            S3ErrorCode::InvalidRequest,
            format!("The upload was created using the {} checksum type.", type_of(upload.composite).as_str()),
        ));
    }
    if upload.composite
        && let Some(index) = completion.named.iter().position(|part| field!(part, upload.algorithm).is_none())
    {
        return Err(s3(
            S3ErrorCode::InvalidRequest,
            format!(
                "The upload was created using a {} checksum. The complete request must include the checksum for each \
                 part. It was missing for part {} in the request.",
                name(upload.algorithm).to_lowercase(),
                completion.named[index].part_number.unwrap_or(0)
            ),
        ));
    }
    let parts: Vec<PartDigest<'_>> = completion
        .parts
        .iter()
        .map(|part| PartDigest { checksum: part.checksum.as_ref(), size_bytes: part.size_bytes })
        .collect();
    let stored = of_multipart(&upload, &parts)?;
    if let Some(value) = field!(completion.whole, upload.algorithm)
        && value.trim() != stored.value
        && value.trim() != stored.value.split('-').next().unwrap_or_default()
    {
        return Err(s3(
            S3ErrorCode::BadDigest,
            format!("The {} you specified did not match the calculated checksum.", name(upload.algorithm)),
        ));
    }
    Ok(Some(stored))
}

/// InvalidPart for a part entry naming a checksum its stored part does not have.
fn check_named_parts(completion: &Completion<'_>) -> S3Result<()> {
    for (named, part) in completion.named.iter().zip(completion.parts) {
        for algorithm in ALGORITHMS {
            let Some(value) = field!(named, algorithm) else { continue };
            let matches = part
                .checksum
                .as_ref()
                .is_some_and(|stored| stored.algorithm == algorithm && stored.value == value.trim());
            if !matches {
                return Err(s3(
                    S3ErrorCode::InvalidPart,
                    format!("part {} was not uploaded with that {} checksum", part.part_number, name(algorithm)),
                ));
            }
        }
    }
    Ok(())
}

/// The response fields returning `stored`.
pub fn fields(stored: Option<&StoredChecksum>) -> dto::Checksum {
    let mut fields = dto::Checksum::default();
    let Some(stored) = stored else { return fields };
    let value = Some(stored.value.clone());
    match stored.algorithm {
        Algorithm::Crc32 => fields.checksum_crc32 = value,
        Algorithm::Crc32c => fields.checksum_crc32c = value,
        Algorithm::Crc64nvme => fields.checksum_crc64nvme = value,
        Algorithm::Sha1 => fields.checksum_sha1 = value,
        Algorithm::Sha256 => fields.checksum_sha256 = value,
    }
    fields
}

/// S3's name for a checksum's type.
pub fn type_of(composite: bool) -> ChecksumType {
    ChecksumType::from_static(if composite { ChecksumType::COMPOSITE } else { ChecksumType::FULL_OBJECT })
}

/// Sets the checksum value fields of `$output` (any s3s output with S3's five `checksum_*`
/// fields) from an `Option<&StoredChecksum>`; with `with_type`, its `checksum_type` too (the
/// outputs that have one).
macro_rules! set_checksum {
    ($output:expr, $stored:expr) => {{
        let fields = $crate::s3::checksum::fields($stored);
        $output.checksum_crc32 = fields.checksum_crc32;
        $output.checksum_crc32c = fields.checksum_crc32c;
        $output.checksum_crc64nvme = fields.checksum_crc64nvme;
        $output.checksum_sha1 = fields.checksum_sha1;
        $output.checksum_sha256 = fields.checksum_sha256;
    }};
    ($output:expr, $stored:expr, with_type) => {{
        let stored: Option<&::meta::StoredChecksum> = $stored;
        $crate::s3::checksum::set_checksum!($output, stored);
        $output.checksum_type = stored.map(|stored| $crate::s3::checksum::type_of(stored.composite));
    }};
}
pub(super) use set_checksum;

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> hyper::HeaderMap {
        let mut map = hyper::HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn known_digests_match_the_published_check_values() {
        // The CRC catalogue's check values of "123456789".
        assert_eq!(digest(Algorithm::Crc32, b"123456789"), 0xcbf4_3926u32.to_be_bytes());
        assert_eq!(digest(Algorithm::Crc32c, b"123456789"), 0xe306_9283u32.to_be_bytes());
        assert_eq!(digest(Algorithm::Crc64nvme, b"123456789"), 0xae8b_1486_0a79_9888u64.to_be_bytes());
        assert_eq!(encode(&digest(Algorithm::Sha256, b"")), "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    }

    #[test]
    fn a_header_value_is_checked_and_a_wrong_one_is_bad_digest() {
        let good = encode(&digest(Algorithm::Crc32, b"hello"));
        let declared = Declared::from_headers(&headers(&[("x-amz-checksum-crc32", &good)]), None).unwrap().unwrap();
        let stored = declared.verify(&digest(Algorithm::Crc32, b"hello"), None).unwrap();
        assert_eq!((stored.algorithm, stored.value), (Algorithm::Crc32, good));
        let error = declared.verify(&digest(Algorithm::Crc32, b"hellp"), None).unwrap_err();
        assert_eq!(*error.code(), S3ErrorCode::BadDigest);
    }

    #[test]
    fn malformed_or_several_values_are_invalid_requests() {
        for pairs in [
            vec![("x-amz-checksum-crc32", "not base64!")],
            vec![("x-amz-checksum-sha256", "AAAAAA==")],
            vec![("x-amz-checksum-crc32", "AAAAAA=="), ("x-amz-checksum-crc32c", "AAAAAA==")],
            vec![("x-amz-trailer", "x-amz-checksum-md5")],
            vec![("x-amz-sdk-checksum-algorithm", "MD4")],
        ] {
            let error = Declared::from_headers(&headers(&pairs), None).unwrap_err();
            assert_eq!(*error.code(), S3ErrorCode::InvalidRequest, "{pairs:?}");
        }
    }

    #[test]
    fn a_trailer_is_checked_once_the_body_is_read() {
        let declared =
            Declared::from_headers(&headers(&[("x-amz-trailer", "x-amz-checksum-sha1")]), None).unwrap().unwrap();
        let computed = digest(Algorithm::Sha1, b"body");
        let missing = declared.verify(&computed, None).unwrap_err();
        assert_eq!(*missing.code(), S3ErrorCode::InvalidRequest);
        let trailers = headers(&[("x-amz-checksum-sha1", &encode(&computed))]);
        assert!(declared.verify(&computed, Some(&trailers)).is_ok());
        let wrong = headers(&[("x-amz-checksum-sha1", &encode(&digest(Algorithm::Sha1, b"other")))]);
        assert_eq!(*declared.verify(&computed, Some(&wrong)).unwrap_err().code(), S3ErrorCode::BadDigest);
    }

    #[test]
    fn without_a_declaration_the_default_is_computed() {
        let declared = Declared::from_headers(&hyper::HeaderMap::new(), Some(Algorithm::Crc64nvme)).unwrap().unwrap();
        assert_eq!(declared.algorithm, Algorithm::Crc64nvme);
        assert!(declared.verify(&digest(Algorithm::Crc64nvme, b"x"), None).is_ok());
        assert!(Declared::from_headers(&hyper::HeaderMap::new(), None).unwrap().is_none());
    }

    fn part(algorithm: Algorithm, bytes: &[u8]) -> StoredChecksum {
        StoredChecksum { algorithm, value: encode(&digest(algorithm, bytes)), composite: false }
    }

    #[test]
    fn full_object_crcs_combine_into_the_crc_of_the_whole() {
        for algorithm in [Algorithm::Crc32, Algorithm::Crc32c, Algorithm::Crc64nvme] {
            let (first, second) = (part(algorithm, b"hello, "), part(algorithm, b"world"));
            let parts = [
                PartDigest { checksum: Some(&first), size_bytes: 7 },
                PartDigest { checksum: Some(&second), size_bytes: 5 },
            ];
            let upload = UploadChecksum { algorithm, composite: false };
            let whole = of_multipart(&upload, &parts).unwrap();
            assert_eq!(whole.value, encode(&digest(algorithm, b"hello, world")), "{algorithm:?}");
        }
    }

    #[test]
    fn composite_is_the_digest_of_the_part_digests() {
        let (first, second) = (part(Algorithm::Sha256, b"a"), part(Algorithm::Sha256, b"b"));
        let parts = [
            PartDigest { checksum: Some(&first), size_bytes: 1 },
            PartDigest { checksum: Some(&second), size_bytes: 1 },
        ];
        let upload = UploadChecksum { algorithm: Algorithm::Sha256, composite: true };
        let mut concatenated = digest(Algorithm::Sha256, b"a");
        concatenated.extend(digest(Algorithm::Sha256, b"b"));
        let expected = format!("{}-2", encode(&digest(Algorithm::Sha256, &concatenated)));
        assert_eq!(of_multipart(&upload, &parts).unwrap().value, expected);
    }

    #[test]
    fn upload_types_follow_s3s_rules() {
        let alg = |name: &'static str| dto::ChecksumAlgorithm::from_static(name);
        let kind = |name: &'static str| ChecksumType::from_static(name);
        let crc32 = for_upload(Some(&alg("CRC32")), None).unwrap().unwrap();
        assert!(crc32.composite);
        assert!(!for_upload(Some(&alg("CRC64NVME")), None).unwrap().unwrap().composite);
        assert!(for_upload(Some(&alg("SHA1")), Some(&kind("FULL_OBJECT"))).is_err());
        assert!(for_upload(Some(&alg("CRC64NVME")), Some(&kind("COMPOSITE"))).is_err());
        assert!(for_upload(None, Some(&kind("COMPOSITE"))).is_err());
        assert!(for_upload(None, None).unwrap().is_none());
    }
}
