//! ETags the gateway computes rather than hashes from a body: a completed multipart upload's, which
//! a multipart completion and a copy of many parts both give. Must not read or store anything.

use md5::{Digest, Md5};
use s3s::{S3ErrorCode, S3Result};

use super::errors::s3;

/// The ETag of a completed multipart upload: MD5 of the parts' binary MD5s, then `-` and the count.
pub fn multipart_etag(part_etags: &[&str]) -> S3Result<String> {
    let mut hasher = Md5::new();
    for etag in part_etags {
        let binary = hex::decode(etag).map_err(|_| s3(S3ErrorCode::InternalError, "a stored part ETag is not hex"))?;
        hasher.update(binary);
    }
    Ok(format!("{}-{}", hex::encode(hasher.finalize()), part_etags.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md5_hex(body: &[u8]) -> String {
        hex::encode(Md5::digest(body))
    }

    #[test]
    fn multipart_etag_is_md5_of_binary_md5s() {
        let first = md5_hex(b"hello ");
        let second = md5_hex(b"world");
        let mut concatenated = hex::decode(&first).unwrap();
        concatenated.extend(hex::decode(&second).unwrap());
        let expected = format!("{}-2", md5_hex(&concatenated));
        assert_eq!(multipart_etag(&[&first, &second]).unwrap(), expected);
    }
}
