//! The replica units of an open packed stripe as nodes store them: their unit indexes (at or above
//! [`REPLICA_UNIT_BASE`], apart from the stripe's units) and their header (where the object lives in
//! the stripe's data units). The on-node format packing writes and repair, the orphan collector and
//! the metadata rebuild read; must not read or write anything itself.

use bytes::{BufMut, Bytes, BytesMut};

/// Unit indexes at or above this are replica units of an open stripe, not stripe units.
pub const REPLICA_UNIT_BASE: u16 = 0x8000;
/// Most objects (replica units) one open stripe takes.
pub const MAX_OBJECTS_PER_STRIPE: u16 = 0x7fff;
/// Bytes before the object in a replica unit: magic, data unit, offset within it, object length.
pub const REPLICA_HEADER_BYTES: u64 = 24;
const REPLICA_MAGIC: u32 = 0x4c54_5052; // "LTPR"

/// Where one acknowledged replica lives in the stripe's data units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaHeader {
    /// The data unit the object is appended to.
    pub unit: u16,
    /// Its offset within that unit.
    pub offset: u64,
    /// Its length.
    pub length: u64,
}

impl ReplicaHeader {
    /// The replica unit: this header, then `body`.
    pub fn encode(&self, body: &[u8]) -> Bytes {
        let mut out = BytesMut::with_capacity(REPLICA_HEADER_BYTES as usize + body.len());
        out.put_u32_le(REPLICA_MAGIC);
        out.put_u16_le(self.unit);
        out.put_u16_le(0);
        out.put_u64_le(self.offset);
        out.put_u64_le(self.length);
        out.extend_from_slice(body);
        out.freeze()
    }

    /// The header and the object of a replica unit; `None` if it is not one or is cut short.
    pub fn decode(bytes: &[u8]) -> Option<(Self, &[u8])> {
        if bytes.len() < REPLICA_HEADER_BYTES as usize {
            return None;
        }
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        if u32_at(0) != REPLICA_MAGIC {
            return None;
        }
        let header = Self { unit: u16::from_le_bytes([bytes[4], bytes[5]]), offset: u64_at(8), length: u64_at(16) };
        let body = &bytes[REPLICA_HEADER_BYTES as usize..];
        (body.len() as u64 == header.length).then_some((header, body))
    }
}
