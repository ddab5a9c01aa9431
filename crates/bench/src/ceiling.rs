//! The memory ceiling: how fast one core can merely read a set of units,
//! with no GF(2^8) arithmetic at all. A codec figure close to it is bound by
//! the memory hierarchy (for 1 MiB units the k sources no longer fit in L2
//! and stream from L3), not by its kernel.
//!
//! Owns: the plain XOR-reduce pass the ceiling is measured with.
//! Must not: use the codec's engines (the ceiling must not share their bugs
//! or their speed-ups).

/// XOR of every aligned 8-byte word of every source (a trailing partial word
/// is folded in byte by byte). Each source is read once, front to back.
pub fn xor_reduce(sources: &[&[u8]]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU was just checked for the features the function enables.
            return unsafe { xor_reduce_avx512(sources) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            return unsafe { xor_reduce_avx2(sources) };
        }
    }
    xor_reduce_plain(sources)
}

/// The same loop compiled for 512-bit vectors: with the x86-64 baseline
/// (SSE2) the loop itself, not the caches, would limit L1/L2-resident sizes,
/// and the ceiling would sit below what a SIMD kernel reaches.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn xor_reduce_avx512(sources: &[&[u8]]) -> u64 {
    xor_reduce_plain(sources)
}

/// The same loop compiled for 256-bit vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn xor_reduce_avx2(sources: &[&[u8]]) -> u64 {
    xor_reduce_plain(sources)
}

#[inline(always)]
fn xor_reduce_plain(sources: &[&[u8]]) -> u64 {
    let mut total = 0u64;
    for source in sources {
        // A plain reduction over contiguous words: the compiler vectorises it
        // with several independent accumulators, which is what lets it run at
        // the speed of the caches rather than of one chain of dependent XORs.
        let (words, tail) = source.as_chunks::<8>();
        total ^= words.iter().fold(0u64, |acc, word| acc ^ u64::from_le_bytes(*word));
        for (i, &byte) in tail.iter().enumerate() {
            total ^= u64::from(byte) << (8 * i);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xor_reduce_bytewise(sources: &[&[u8]]) -> u64 {
        let mut total = 0u64;
        for source in sources {
            for (i, &byte) in source.iter().enumerate() {
                total ^= u64::from(byte) << (8 * (i % 8));
            }
        }
        total
    }

    #[test]
    fn matches_a_byte_at_a_time_fold() {
        let bytes: Vec<u8> = (0..5010u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        for len in [0, 1, 7, 8, 9, 63, 64, 65, 200, 4096, 4999] {
            let sources = [&bytes[..len], &bytes[1..len + 1], &bytes[3..len + 3]];
            assert_eq!(xor_reduce(&sources), xor_reduce_bytewise(&sources), "len {len}");
            assert_eq!(xor_reduce_plain(&sources), xor_reduce_bytewise(&sources), "len {len}");
        }
        assert_eq!(xor_reduce(&[]), 0);
    }
}
