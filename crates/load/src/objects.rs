//! The objects a workload reads, as S3 objects: their keys, sizes and deterministic contents.
//!
//! Owns: the key of an object id, the size each object is loaded with (the largest length any
//! request reads of it, so every request's range exists), and its bytes as a function of
//! (seed, object id). Must not: hold object bodies beyond the one being written or checked (bodies
//! are regenerated, never kept), or talk to the network.

use model::{ObjectId, ReadRequest};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// Bucket the objects live in unless told otherwise.
pub const DEFAULT_BUCKET: &str = "lowtail-load";

/// The S3 key of `object` under `seed`. The seed is part of the key because the bytes depend on it:
/// a run with another seed must not take objects of the same size for its own.
pub fn object_key(seed: u64, object: ObjectId) -> String {
    format!("obj/s{seed}/{}", object.0)
}

/// The first `length` bytes of `object`'s content. A ChaCha stream is the same prefix whatever its
/// length, so a range starting at 0 is checked without generating the whole object.
pub fn object_bytes(seed: u64, object: ObjectId, length: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ object.0.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17));
    let mut bytes = vec![0u8; usize::try_from(length).expect("an object size fits in memory")];
    rng.fill_bytes(&mut bytes);
    bytes
}

/// Every distinct object `requests` read, with the size it is loaded with, in id order.
pub fn object_sizes(requests: &[ReadRequest]) -> BTreeMap<ObjectId, u64> {
    let mut sizes = BTreeMap::new();
    for request in requests {
        let size = sizes.entry(request.object).or_insert(0);
        *size = (*size).max(request.length);
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{PartitionId, RequestId};

    fn request(id: u64, object: u64, length: u64) -> ReadRequest {
        ReadRequest {
            id: RequestId(id),
            object: ObjectId(object),
            partition: PartitionId(0),
            offset: 0,
            length,
            arrival_ns: id,
            class: 0,
            latency_class: 0,
        }
    }

    #[test]
    fn bytes_are_reproducible_prefix_consistent_and_differ_per_object_and_seed() {
        let whole = object_bytes(7, ObjectId(3), 10_000);
        assert_eq!(whole, object_bytes(7, ObjectId(3), 10_000));
        assert_eq!(&whole[..1234], &object_bytes(7, ObjectId(3), 1234)[..]);
        assert_ne!(whole, object_bytes(7, ObjectId(4), 10_000));
        assert_ne!(whole, object_bytes(8, ObjectId(3), 10_000));
    }

    #[test]
    fn each_object_is_loaded_with_its_largest_read() {
        let sizes = object_sizes(&[request(0, 5, 100), request(1, 2, 10), request(2, 5, 300), request(3, 5, 200)]);
        assert_eq!(sizes.into_iter().collect::<Vec<_>>(), [(ObjectId(2), 10), (ObjectId(5), 300)]);
        assert_ne!(object_key(1, ObjectId(5)), object_key(2, ObjectId(5)));
    }
}
