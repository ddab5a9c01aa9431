//! Input validation shared by every backend: bucket names, object keys, part numbers, upload ids, stripes,
//! nodes and tags. Pure checks that return `InvalidArgument` (or the S3-mandated not-found error); they must not
//! read or change stored state.

use std::collections::BTreeSet;

use crate::error::{MetaError, Result};
use crate::types::{NodeInfo, StripeMeta};

/// Longest object key S3 accepts, in UTF-8 bytes.
pub const MAX_KEY_BYTES: usize = 1024;
/// Highest multipart part number S3 accepts.
pub const MAX_PART_NUMBER: u16 = 10_000;
/// Longest config name accepted, in bytes.
pub const MAX_CONFIG_NAME_BYTES: usize = 256;
/// Most units a stripe may have. Writing a stripe also rewrites its node index (at most 2 · units keys plus
/// the record) in one etcd transaction, and etcd allows 128 operations per transaction by default.
pub const MAX_STRIPE_UNITS: usize = 63;

/// Highest latency class number stored (classes are 1-based; a gateway runs at most this many).
pub const MAX_CLASS: u8 = 8;
/// Longest access key kept in the class table, in bytes (AWS allows 128).
pub const MAX_ACCESS_KEY_BYTES: usize = 128;

/// Most tags a record keeps (S3 allows 10 on an object, 50 on a bucket).
pub const MAX_TAGS: usize = 50;
/// Longest tag key, in characters (S3's limit).
pub const MAX_TAG_KEY_CHARS: usize = 128;
/// Longest tag value, in characters (S3's limit).
pub const MAX_TAG_VALUE_CHARS: usize = 256;

/// Checks a tag set against the bounds every record keeps to; the S3 layer checks S3's finer
/// rules (an object's 10 tags, the characters allowed) before it stores one.
pub fn tags(tags: &std::collections::BTreeMap<String, String>) -> Result<()> {
    if tags.len() > MAX_TAGS {
        return Err(MetaError::InvalidArgument(format!("{} tags: at most {MAX_TAGS}", tags.len())));
    }
    for (key, value) in tags {
        if key.is_empty() || key.chars().count() > MAX_TAG_KEY_CHARS || value.chars().count() > MAX_TAG_VALUE_CHARS {
            return Err(MetaError::InvalidArgument(format!(
                "tag {key:?}: keys are 1 to {MAX_TAG_KEY_CHARS} characters, values at most {MAX_TAG_VALUE_CHARS}"
            )));
        }
    }
    Ok(())
}

/// Checks a version id: `null`, or one the store gives (16 lower-case hex digits).
pub fn version_id(version_id: &str) -> Result<()> {
    let given = version_id.len() == 16 && version_id.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'));
    if version_id == "null" || given {
        return Ok(());
    }
    Err(MetaError::InvalidArgument(format!("{version_id:?} is not a version id")))
}

/// Checks a latency class number: `1..=MAX_CLASS`. Whether a gateway runs that many classes is the
/// gateway's check; the store only refuses numbers no gateway could run.
pub fn class(class: u8) -> Result<()> {
    if class == 0 || class > MAX_CLASS {
        return Err(MetaError::InvalidArgument(format!("class {class} is outside 1..={MAX_CLASS}")));
    }
    Ok(())
}

/// The longest profile name.
pub const MAX_PROFILE_NAME_BYTES: usize = 63;

/// Checks a profile name: 1 to `MAX_PROFILE_NAME_BYTES` of lowercase letters, digits, `-` and `_`.
pub fn profile_name(name: &str) -> Result<()> {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    if name.is_empty() || name.len() > MAX_PROFILE_NAME_BYTES || !name.chars().all(allowed) {
        return Err(MetaError::InvalidArgument(format!(
            "profile name {name:?} must be 1 to {MAX_PROFILE_NAME_BYTES} lowercase letters, digits, '-' or '_'"
        )));
    }
    Ok(())
}

/// Checks an access key: 1 to `MAX_ACCESS_KEY_BYTES` visible ASCII characters (no spaces, no
/// controls), as S3 access key ids are.
pub fn access_key(access_key: &str) -> Result<()> {
    let visible = access_key.bytes().all(|b| b.is_ascii_graphic());
    if access_key.is_empty() || access_key.len() > MAX_ACCESS_KEY_BYTES || !visible {
        return Err(MetaError::InvalidArgument(format!(
            "invalid access key {access_key:?}: 1 to {MAX_ACCESS_KEY_BYTES} visible ASCII characters"
        )));
    }
    Ok(())
}

/// Checks an S3 bucket name: 3–63 characters of lower-case letters, digits, `.` and `-`, starting and ending
/// with a letter or digit, no `..`, not shaped like an IPv4 address, no reserved prefix or suffix.
pub fn bucket_name(name: &str) -> Result<()> {
    let invalid = |why: &str| Err(MetaError::InvalidArgument(format!("invalid bucket name {name:?}: {why}")));
    if !(3..=63).contains(&name.len()) {
        return invalid("must be 3 to 63 characters long");
    }
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-') {
        return invalid("only lower-case letters, digits, '.' and '-' are allowed");
    }
    let first = name.as_bytes()[0];
    let last = name.as_bytes()[name.len() - 1];
    if !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() {
        return invalid("must begin and end with a letter or digit");
    }
    if name.contains("..") {
        return invalid("must not contain two adjacent periods");
    }
    // Every dot-separated label must begin and end with a letter or digit (a DNS name).
    if name.contains(".-") || name.contains("-.") {
        return invalid("a label must not begin or end with '-' next to a '.'");
    }
    if name.split('.').count() == 4 && name.split('.').all(|part| part.parse::<u8>().is_ok()) {
        return invalid("must not be formatted as an IP address");
    }
    if name.starts_with("xn--") || name.starts_with("sthree-") || name.ends_with("-s3alias") {
        return invalid("uses a reserved prefix or suffix");
    }
    Ok(())
}

/// Checks an object key: 1 to `MAX_KEY_BYTES` bytes of UTF-8 (a `&str` is UTF-8 already).
pub fn object_key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(MetaError::InvalidArgument("object key must not be empty".into()));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(MetaError::InvalidArgument(format!(
            "object key is {} bytes long; the limit is {MAX_KEY_BYTES}",
            key.len()
        )));
    }
    Ok(())
}

/// Checks a part number: `1..=MAX_PART_NUMBER`.
pub fn part_number(part_number: u16) -> Result<()> {
    if part_number == 0 || part_number > MAX_PART_NUMBER {
        return Err(MetaError::InvalidArgument(format!("part number {part_number} is outside 1..={MAX_PART_NUMBER}")));
    }
    Ok(())
}

/// Checks an upload id's shape (16 lower-case hex digits, as the store allocates them). Any other string
/// cannot name an upload, so it is `NoSuchUpload`, as S3 answers.
pub fn upload_id(upload_id: &str) -> Result<()> {
    if upload_id.len() == 16 && upload_id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(())
    } else {
        Err(MetaError::NoSuchUpload(upload_id.to_string()))
    }
}

/// Checks a lease claim: a config-like name, a holder of 1 to `MAX_CONFIG_NAME_BYTES` bytes and a
/// positive term.
pub fn lease(name: &str, holder: &str, ttl_ms: u64) -> Result<()> {
    config_name(name)?;
    if holder.is_empty() || holder.len() > MAX_CONFIG_NAME_BYTES {
        return Err(MetaError::InvalidArgument(format!(
            "lease holder must be 1 to {MAX_CONFIG_NAME_BYTES} bytes long"
        )));
    }
    if ttl_ms == 0 {
        return Err(MetaError::InvalidArgument("a lease must last longer than 0 ms".into()));
    }
    Ok(())
}

/// Checks a config name: 1 to `MAX_CONFIG_NAME_BYTES` bytes.
pub fn config_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_CONFIG_NAME_BYTES {
        return Err(MetaError::InvalidArgument(format!("config name must be 1 to {MAX_CONFIG_NAME_BYTES} bytes long")));
    }
    Ok(())
}

/// Checks a stripe: its code parses and is valid, the placement names one distinct node per unit, unit
/// size is positive, and checksums (if any) number one per unit.
pub fn stripe(stripe: &StripeMeta) -> Result<()> {
    let invalid = |why: String| Err(MetaError::InvalidArgument(format!("stripe {}: {why}", stripe.id)));
    let spec = match stripe.code_spec() {
        Ok(spec) => spec,
        Err(error) => return invalid(format!("bad code {:?}: {error}", stripe.code)),
    };
    if let Err(error) = spec.validate() {
        return invalid(format!("bad code {:?}: {error}", stripe.code));
    }
    let units = spec.total_units();
    if units > MAX_STRIPE_UNITS {
        return invalid(format!("{units} units; at most {MAX_STRIPE_UNITS} are supported"));
    }
    if stripe.placement.len() != units {
        return invalid(format!("placement names {} nodes; code {} has {units} units", stripe.placement.len(), spec));
    }
    let distinct: BTreeSet<_> = stripe.placement.iter().collect();
    if distinct.len() != units {
        return invalid("placement puts two units on one node".into());
    }
    if stripe.unit_bytes == 0 {
        return invalid("unit size must be positive".into());
    }
    if let Some(checksums) = &stripe.unit_checksums
        && checksums.len() != units
    {
        return invalid(format!("{} checksums for {units} units", checksums.len()));
    }
    missing_units(stripe, units).map_or(Ok(()), invalid)
}

/// Why a stripe's missing units are malformed, if they are: ascending, distinct, below `units`, on a
/// sealed stripe only, with `degraded_since_ms` set exactly when there are any and
/// `pending_until_ms` only then.
fn missing_units(stripe: &StripeMeta, units: usize) -> Option<String> {
    let missing = &stripe.missing_units;
    if missing.windows(2).any(|pair| pair[0] >= pair[1]) {
        return Some(format!("missing units {missing:?} are not ascending and distinct"));
    }
    if missing.last().is_some_and(|&last| usize::from(last) >= units) {
        return Some(format!("missing units {missing:?} name a unit beyond the code's {units}"));
    }
    if !missing.is_empty() && stripe.state == crate::types::StripeState::Open {
        return Some("an open stripe has no units to be missing".into());
    }
    if missing.is_empty() != stripe.degraded_since_ms.is_none() {
        return Some("degraded_since_ms must be set exactly when units are missing".into());
    }
    if missing.is_empty() && stripe.pending_until_ms.is_some() {
        return Some("pending_until_ms is set only while units are missing".into());
    }
    if stripe.pending_writer.is_some() && stripe.pending_until_ms.is_none() {
        return Some("pending_writer is set only with pending_until_ms".into());
    }
    None
}

/// Checks a node record: a non-empty address.
pub fn node(node: &NodeInfo) -> Result<()> {
    if node.address.trim().is_empty() {
        return Err(MetaError::InvalidArgument(format!("node {}: empty address", node.id)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_follow_s3_rules() {
        for good in ["abc", "my-bucket", "my.bucket.1", "a1b", &"a".repeat(63)] {
            assert!(bucket_name(good).is_ok(), "{good}");
        }
        for bad in [
            "foo.-bar",
            "foo-.bar",
            "ab",
            &"a".repeat(64),
            "Abc",
            "a_b",
            "-ab",
            "ab-",
            ".ab",
            "a..b",
            "192.168.1.1",
            "xn--ab",
            "ab-s3alias",
            "a b",
        ] {
            assert!(matches!(bucket_name(bad), Err(MetaError::InvalidArgument(_))), "{bad}");
        }
    }

    #[test]
    fn keys_parts_and_upload_ids() {
        assert!(object_key("a").is_ok());
        assert!(object_key(&"é".repeat(512)).is_ok()); // 1024 bytes
        assert!(object_key(&"é".repeat(513)).is_err());
        assert!(object_key("").is_err());
        assert!(part_number(1).is_ok() && part_number(10_000).is_ok());
        assert!(part_number(0).is_err() && part_number(10_001).is_err());
        assert!(upload_id("00000000000000ff").is_ok());
        assert!(matches!(upload_id("../x"), Err(MetaError::NoSuchUpload(_))));
        assert!(upload_id("00000000000000FF").is_err());
    }
}
