//! Damage done to one unit file on disk, as rot, a lost tail or a half-written page would do it:
//! a byte flipped after the header, the file cut short, or a range overwritten with zeros, each
//! placed in a part of the file (header, data, checksum table) as the node's store lays it out.
//!
//! Owns only where those parts are (read from the file's header). Must not choose the file, or
//! write anything but the damage (in place: a rename by the node meanwhile is not undone).

use std::os::unix::fs::FileExt;
use std::path::Path;

use anyhow::Context;

use crate::schedule::{Damage, UnitPart};

/// Bytes of a unit file's header (see the node's store).
pub const UNIT_HEADER_BYTES: u64 = 40;
/// Where the header holds the data length (little-endian u64).
const DATA_LENGTH_AT: usize = 24;
/// Longest range a tear zeroes.
const LONGEST_TEAR_BYTES: u64 = 16 << 10;

/// The byte ranges of a unit file's parts, from its header; a header already damaged (or a data
/// length past the end) leaves the data running to the end and no checksum table.
fn part_range(header: &[u8], file_bytes: u64, part: UnitPart) -> (u64, u64) {
    let header_end = UNIT_HEADER_BYTES.min(file_bytes);
    let data_bytes = header
        .get(DATA_LENGTH_AT..DATA_LENGTH_AT + 8)
        .map_or(u64::MAX, |bytes| u64::from_le_bytes(bytes.try_into().expect("8 bytes")));
    let data_end = header_end.saturating_add(data_bytes).min(file_bytes);
    match part {
        UnitPart::Header => (0, header_end),
        UnitPart::Data => (header_end, data_end),
        UnitPart::ChecksumTable => (data_end, file_bytes),
    }
}

/// Damages the unit file at `path`; what was done in words, or `None` when the part is empty
/// (a flip needs a byte after the header).
pub fn damage_unit(path: &Path, damage: Damage, offset_pick: u64, length_pick: u64) -> anyhow::Result<Option<String>> {
    let file = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
    let file_bytes = file.metadata()?.len();
    let mut header = vec![0u8; UNIT_HEADER_BYTES.min(file_bytes) as usize];
    file.read_exact_at(&mut header, 0)?;
    let (part, start, end) = match damage {
        Damage::Flip => (UnitPart::Data, UNIT_HEADER_BYTES, file_bytes),
        Damage::Truncate(part) | Damage::Tear(part) => {
            let (start, end) = part_range(&header, file_bytes, part);
            (part, start, end)
        }
    };
    if start >= end {
        return Ok(None);
    }
    let at = start + offset_pick % (end - start);
    let done = match damage {
        Damage::Flip => {
            let mut byte = [0u8];
            file.read_exact_at(&mut byte, at)?;
            file.write_all_at(&[byte[0] ^ 0x20], at)?;
            format!("flipped byte {at} of {file_bytes}")
        }
        Damage::Truncate(_) => {
            file.set_len(at)?;
            format!("truncated from {file_bytes} to {at} bytes (in the {part:?})")
        }
        Damage::Tear(_) => {
            let length = (1 + length_pick % LONGEST_TEAR_BYTES).min(file_bytes - at);
            file.write_all_at(&vec![0u8; length as usize], at)?;
            format!("zeroed {length} bytes at {at} of {file_bytes} (from the {part:?})")
        }
    };
    file.sync_all().with_context(|| format!("cannot sync {}", path.display()))?;
    Ok(Some(done))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit file of `data_bytes` bytes of 0xAB: a header with its length, the data, and one
    /// 4-byte checksum per 64 KiB.
    fn unit(dir: &Path, data_bytes: u64) -> std::path::PathBuf {
        let mut bytes = vec![1u8; UNIT_HEADER_BYTES as usize];
        bytes[DATA_LENGTH_AT..DATA_LENGTH_AT + 8].copy_from_slice(&data_bytes.to_le_bytes());
        bytes.extend(std::iter::repeat_n(0xAB, data_bytes as usize));
        bytes.extend(std::iter::repeat_n(0xCD, 4 * data_bytes.div_ceil(64 << 10) as usize));
        let path = dir.join(format!("{data_bytes}.unit"));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn truncation_lands_in_the_part_asked_for() {
        let temp = std::env::temp_dir().join(format!("swarm-damage-{}", std::process::id()));
        std::fs::create_dir_all(&temp).unwrap();
        for (part, low, high) in [
            (UnitPart::Header, 0, 40),
            (UnitPart::Data, 40, 40 + 100_000),
            (UnitPart::ChecksumTable, 40 + 100_000, 40 + 100_000 + 8),
        ] {
            for pick in [0, 7, 12_345, u64::MAX] {
                let path = unit(&temp, 100_000);
                damage_unit(&path, Damage::Truncate(part), pick, 0).unwrap().unwrap();
                let left = std::fs::metadata(&path).unwrap().len();
                assert!((low..high).contains(&left), "{part:?} {pick}: {left}");
            }
        }
        std::fs::remove_dir_all(&temp).unwrap();
    }

    #[test]
    fn a_tear_zeroes_a_range_from_its_part_and_a_flip_changes_one_byte_after_the_header() {
        let temp = std::env::temp_dir().join(format!("swarm-tear-{}", std::process::id()));
        std::fs::create_dir_all(&temp).unwrap();
        let path = unit(&temp, 70_000);
        let before = std::fs::read(&path).unwrap();
        damage_unit(&path, Damage::Tear(UnitPart::ChecksumTable), 3, 100).unwrap().unwrap();
        let after = std::fs::read(&path).unwrap();
        assert_eq!(after.len(), before.len(), "a tear keeps the length");
        let changed: Vec<usize> = (0..after.len()).filter(|&i| after[i] != before[i]).collect();
        assert_eq!(changed, vec![40 + 70_000 + 3, 40 + 70_000 + 4, 40 + 70_000 + 5, 40 + 70_000 + 6, 40 + 70_000 + 7]);
        assert!(changed.iter().all(|&i| after[i] == 0));
        let path = unit(&temp, 70_000);
        damage_unit(&path, Damage::Flip, 0, 0).unwrap().unwrap();
        let flipped = std::fs::read(&path).unwrap();
        let changed: Vec<usize> = (0..flipped.len()).filter(|&i| flipped[i] != before[i]).collect();
        assert_eq!(changed, vec![40]);
        let empty = unit(&temp, 0);
        assert_eq!(damage_unit(&empty, Damage::Tear(UnitPart::Data), 0, 0).unwrap(), None, "no data to tear");
        std::fs::remove_dir_all(&temp).unwrap();
    }
}
