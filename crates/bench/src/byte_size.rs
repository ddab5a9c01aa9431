//! Byte sizes as people write them on a command line (`64KiB`, `1MiB`,
//! `4096`) and as reports print them.
//!
//! Owns: parsing and formatting of binary byte sizes.
//! Must not: accept decimal or ambiguous suffixes (`KB`, `M`): a unit size
//! of 1000 bytes where 1024 was meant would silently change what is measured.

use anyhow::{Context, bail};

const SUFFIXES: [(&str, u64); 4] = [("gib", 1 << 30), ("mib", 1 << 20), ("kib", 1 << 10), ("b", 1)];

/// Parses `N`, `NB`, `NKiB`, `NMiB` or `NGiB` (suffix case-insensitive, a
/// space before it allowed). Zero is refused: no unit is empty.
pub fn parse_byte_size(text: &str) -> anyhow::Result<usize> {
    let trimmed = text.trim();
    let lower = trimmed.to_ascii_lowercase();
    let (number, multiplier) = SUFFIXES
        .iter()
        .find_map(|&(suffix, multiplier)| lower.strip_suffix(suffix).map(|number| (number.trim_end(), multiplier)))
        .unwrap_or((lower.as_str(), 1));
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        bail!("invalid byte size {trimmed:?}: write a whole number with an optional B, KiB, MiB or GiB suffix");
    }
    let count: u64 = number.parse().with_context(|| format!("byte size {trimmed:?} is too large"))?;
    let bytes = count.checked_mul(multiplier).with_context(|| format!("byte size {trimmed:?} is too large"))?;
    if bytes == 0 {
        bail!("invalid byte size {trimmed:?}: must be at least 1 byte");
    }
    usize::try_from(bytes).with_context(|| format!("byte size {trimmed:?} does not fit this machine's address space"))
}

/// Formats with the largest binary suffix that divides the size exactly
/// (`65536` → `64 KiB`, `1000` → `1000 B`), so the text parses back to the same number.
pub fn format_byte_size(bytes: usize) -> String {
    let bytes = bytes as u64;
    for (suffix, multiplier) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= multiplier && bytes.is_multiple_of(multiplier) {
            return format!("{} {suffix}", bytes / multiplier);
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_binary_suffixes() {
        assert_eq!(parse_byte_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_byte_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_byte_size("1 mib").unwrap(), 1 << 20);
        assert_eq!(parse_byte_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_byte_size("4096").unwrap(), 4096);
        assert_eq!(parse_byte_size("17B").unwrap(), 17);
    }

    #[test]
    fn refuses_bad_sizes() {
        for bad in ["", "KiB", "0", "0KiB", "1.5MiB", "-1", "64KB", "1M", "ten", "99999999999999999999GiB"] {
            assert!(parse_byte_size(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn formats_round_trip() {
        for bytes in [1, 1000, 4096, 65536, 1 << 20, 3 << 20, 1 << 30, (1 << 20) + 1] {
            assert_eq!(parse_byte_size(&format_byte_size(bytes)).unwrap(), bytes);
        }
        assert_eq!(format_byte_size(65536), "64 KiB");
        assert_eq!(format_byte_size(1 << 20), "1 MiB");
        assert_eq!(format_byte_size(1536), "1536 B");
    }
}
