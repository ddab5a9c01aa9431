//! The object catalog of a generated workload: N objects grouped at random
//! into P equal partitions and packed back to back inside them, computed on
//! demand instead of stored (12 million objects would take ~200 MB).
//!
//! An object's slot is a keyed pseudo-random permutation of its id (a
//! Feistel network with cycle walking); slot s is position s / P of
//! partition s % P, so partitions hold ⌊N/P⌋ or ⌈N/P⌉ objects. Sizes are a
//! keyed hash of the id through the size distribution. Offsets are prefix
//! sums of sizes within a partition, kept at checkpoints every
//! [`CHECKPOINT_EVERY`] positions and completed on demand.
//!
//! Must not: draw from a stream RNG (each object's facts are a pure function
//! of the seed and its id, so lookups in any order agree).

use model::{ObjectId, PartitionId};

/// Positions between offset checkpoints within a partition. A lookup sums
/// the sizes of up to this many earlier objects (each a permutation step and
/// a size draw, ~0.1 µs): at 64 that was ~3 µs a request, 31 s of the
/// paper-scale experiment's serial start; at 8 the checkpoints of 12 M
/// objects take 12 MB.
pub const CHECKPOINT_EVERY: u64 = 8;

/// splitmix64: a fast, well-mixed 64-bit hash (Steele et al.).
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A uniform draw in (0, 1) from a hash.
#[inline]
pub fn unit_interval(hash: u64) -> f64 {
    ((hash >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// A keyed permutation of `0..domain`.
#[derive(Clone, Debug)]
pub struct Permutation {
    domain: u64,
    half_bits: u32,
    keys: [u64; 4],
}

impl Permutation {
    /// A permutation of `0..domain` chosen by `key`.
    pub fn new(domain: u64, key: u64) -> Permutation {
        assert!(domain > 0);
        let bits = (64 - (domain - 1).leading_zeros()).max(2);
        let half_bits = bits.div_ceil(2);
        let keys = [mix64(key), mix64(key ^ 1), mix64(key ^ 2), mix64(key ^ 3)];
        Permutation { domain, half_bits, keys }
    }

    fn feistel(&self, x: u64, forward: bool) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut left, mut right) = (x >> self.half_bits, x & mask);
        if forward {
            for key in self.keys {
                let next = left ^ (mix64(right ^ key) & mask);
                left = right;
                right = next;
            }
        } else {
            for key in self.keys.iter().rev() {
                let previous = right ^ (mix64(left ^ key) & mask);
                right = left;
                left = previous;
            }
        }
        (left << self.half_bits) | right
    }

    fn walk(&self, mut x: u64, forward: bool) -> u64 {
        assert!(x < self.domain);
        // The Feistel domain is at most 4x the target domain, so a walk ends
        // after a few steps on average; the bound only guards against a bug.
        for _ in 0..100_000 {
            x = self.feistel(x, forward);
            if x < self.domain {
                return x;
            }
        }
        panic!("cycle walk did not return to the domain");
    }

    /// The image of `x`.
    pub fn apply(&self, x: u64) -> u64 {
        self.walk(x, true)
    }

    /// The preimage of `y`.
    pub fn invert(&self, y: u64) -> u64 {
        self.walk(y, false)
    }
}

/// Where an object lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectLocation {
    /// Its data partition.
    pub partition: PartitionId,
    /// Byte offset in the partition.
    pub offset: u64,
    /// Its size in bytes.
    pub size: u64,
}

/// Objects grouped at random into equal partitions, sizes from `size_of`.
pub struct Catalog<F: Fn(ObjectId) -> u64> {
    objects: u64,
    partitions: u64,
    grouping: Permutation,
    size_of: F,
    /// `checkpoints[p][c]`: bytes before position `c * CHECKPOINT_EVERY` of partition p.
    checkpoints: Vec<Vec<u64>>,
}

impl<F: Fn(ObjectId) -> u64> Catalog<F> {
    /// A catalog of `objects` objects in `partitions` partitions.
    pub fn new(objects: u64, partitions: u32, key: u64, size_of: F) -> Catalog<F> {
        assert!(partitions > 0 && objects >= partitions as u64, "need at least one object per partition");
        let partitions = partitions as u64;
        let grouping = Permutation::new(objects, key);
        let mut checkpoints = vec![Vec::new(); partitions as usize];
        for (partition, sums) in checkpoints.iter_mut().enumerate() {
            let positions = Self::positions_in(objects, partitions, partition as u64);
            let mut bytes = 0u64;
            for position in 0..positions {
                if position % CHECKPOINT_EVERY == 0 {
                    sums.push(bytes);
                }
                let object = grouping.apply(position * partitions + partition as u64);
                bytes += size_of(ObjectId(object));
            }
        }
        Catalog { objects, partitions, grouping, size_of, checkpoints }
    }

    fn positions_in(objects: u64, partitions: u64, partition: u64) -> u64 {
        objects / partitions + u64::from(partition < objects % partitions)
    }

    /// Objects in the catalog.
    pub fn objects(&self) -> u64 {
        self.objects
    }

    /// The object in slot `slot` (position `slot / P` of partition `slot % P`).
    pub fn object_at(&self, slot: u64) -> ObjectId {
        ObjectId(self.grouping.apply(slot))
    }

    /// Where object `object` lives.
    pub fn locate(&self, object: ObjectId) -> ObjectLocation {
        assert!(object.0 < self.objects, "object {} of {}", object.0, self.objects);
        let slot = self.grouping.invert(object.0);
        let (partition, position) = (slot % self.partitions, slot / self.partitions);
        let checkpoint = position / CHECKPOINT_EVERY;
        let mut offset = self.checkpoints[partition as usize][checkpoint as usize];
        for earlier in checkpoint * CHECKPOINT_EVERY..position {
            offset += (self.size_of)(ObjectId(self.grouping.apply(earlier * self.partitions + partition)));
        }
        ObjectLocation { partition: PartitionId(partition as u32), offset, size: (self.size_of)(object) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_a_bijection_with_an_inverse() {
        for domain in [1u64, 2, 7, 1000, 4097] {
            let permutation = Permutation::new(domain, 42);
            let mut seen = vec![false; domain as usize];
            for x in 0..domain {
                let y = permutation.apply(x);
                assert!(!seen[y as usize]);
                seen[y as usize] = true;
                assert_eq!(permutation.invert(y), x);
            }
        }
    }

    #[test]
    fn objects_are_packed_back_to_back_in_equal_partitions() {
        let catalog = Catalog::new(1000, 7, 9, |o: ObjectId| 10 + o.0 % 13);
        let mut by_partition: Vec<Vec<ObjectLocation>> = vec![Vec::new(); 7];
        for object in 0..1000 {
            let location = catalog.locate(ObjectId(object));
            by_partition[location.partition.index()].push(location);
        }
        for locations in &mut by_partition {
            assert!((142..=143).contains(&locations.len()), "{}", locations.len());
            locations.sort_by_key(|l| l.offset);
            let mut next = 0;
            for location in locations.iter() {
                assert_eq!(location.offset, next, "objects overlap or leave gaps");
                next += location.size;
            }
        }
    }
}
