//! The GFNI + AVX engine (256-bit): one GF2P8AFFINEQB per 32 bytes per
//! (source, output) pair, for CPUs with GFNI but without AVX-512 (Intel
//! client cores from Alder Lake on, AMD Zen 4 with AVX-512 disabled, ...).
//!
//! Must not: be reachable on a CPU without GFNI and AVX2 (only
//! [`GfniAvx2::new`] constructs it, after checking).

use super::{
    AFFINE_MATRICES, Coefficients, Engine, EngineKind, MAX_GROUP_OUTPUTS, Mode, Pointers, combine_tail, for_each_group,
    group_columns, single_tail,
};
use std::arch::x86_64::*;

/// Bytes per kernel step: two 256-bit registers per output.
const STEP_BYTES: usize = 64;

/// Proof that this CPU has GFNI and AVX2 (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub struct GfniAvx2(());

impl GfniAvx2 {
    /// The engine, if this CPU supports it.
    pub fn new() -> Option<GfniAvx2> {
        (is_x86_feature_detected!("gfni") && is_x86_feature_detected!("avx2")).then_some(GfniAvx2(()))
    }
}

impl Engine for GfniAvx2 {
    fn kind(&self) -> EngineKind {
        EngineKind::GfniAvx2
    }

    fn combine_unchecked(&self, coeffs: &Coefficients, sources: &[&[u8]], outputs: &mut [&mut [u8]], mode: Mode) {
        let len = sources[0].len();
        let simd_len = len - len % STEP_BYTES;
        let pointers = Pointers::new(sources, outputs);
        let stream = pointers.streaming(len, mode, 32);
        for_each_group(simd_len, outputs.len(), |first, count, start, end| {
            let columns = group_columns(coeffs.affine_matrices(), sources.len(), first, count);
            let outs = &pointers.outputs[first..first + count];
            // SAFETY: `self` exists only if the CPU has the features; the
            // engine contract guarantees equal slice lengths ≥ `end`.
            unsafe { group(&columns, &pointers.sources, outs, start, end, mode, stream) }
        });
        combine_tail(coeffs, sources, outputs, mode, simd_len);
    }

    fn mul_slice(&self, c: u8, src: &[u8], dst: &mut [u8]) {
        self.single(c, src, dst, Mode::Overwrite);
    }

    fn mul_add_slice(&self, c: u8, src: &[u8], dst: &mut [u8]) {
        self.single(c, src, dst, Mode::Accumulate);
    }
}

impl GfniAvx2 {
    fn single(&self, c: u8, src: &[u8], dst: &mut [u8], mode: Mode) {
        assert_eq!(src.len(), dst.len(), "slice lengths differ");
        let simd_len = src.len() - src.len() % STEP_BYTES;
        if simd_len > 0 {
            let mut column = [0u64; MAX_GROUP_OUTPUTS];
            column[0] = AFFINE_MATRICES[c as usize];
            // SAFETY: CPU support checked at construction; lengths checked above.
            unsafe { group(&[column], &[src.as_ptr()], &[dst.as_mut_ptr()], 0, simd_len, mode, false) }
        }
        single_tail(c, src, dst, mode, simd_len);
    }
}

/// Dispatches a group of 1..=4 outputs to its monomorphised kernel.
///
/// # Safety
/// The CPU has GFNI + AVX2; every pointer addresses at least `end` bytes;
/// `end - start` is a multiple of 64; `columns` has one entry per source;
/// with `stream`, every output pointer is 32-byte aligned.
unsafe fn group(
    columns: &[[u64; MAX_GROUP_OUTPUTS]],
    sources: &[*const u8],
    outputs: &[*mut u8],
    start: usize,
    end: usize,
    mode: Mode,
    stream: bool,
) {
    debug_assert_eq!((end - start) % STEP_BYTES, 0);
    debug_assert_eq!(columns.len(), sources.len());
    // SAFETY: forwarded from this function's contract.
    unsafe {
        match outputs.len() {
            1 => kernel::<1>(columns, sources, outputs, start, end, mode, stream),
            2 => kernel::<2>(columns, sources, outputs, start, end, mode, stream),
            3 => kernel::<3>(columns, sources, outputs, start, end, mode, stream),
            4 => kernel::<4>(columns, sources, outputs, start, end, mode, stream),
            _ => unreachable!("output groups hold 1 to 4 outputs"),
        }
    }
}

#[target_feature(enable = "gfni,avx2")]
unsafe fn kernel<const N: usize>(
    columns: &[[u64; MAX_GROUP_OUTPUTS]],
    sources: &[*const u8],
    outputs: &[*mut u8],
    start: usize,
    end: usize,
    mode: Mode,
    stream: bool,
) {
    let mut offset = start;
    while offset < end {
        let mut acc = [[_mm256_setzero_si256(); 2]; N];
        if mode == Mode::Accumulate {
            for (a, out) in acc.iter_mut().zip(outputs) {
                // SAFETY: output pointers address ≥ end bytes (contract).
                unsafe {
                    a[0] = _mm256_loadu_si256(out.add(offset).cast());
                    a[1] = _mm256_loadu_si256(out.add(offset + 32).cast());
                }
            }
        }
        for (src, column) in sources.iter().zip(columns) {
            // SAFETY: source pointers address ≥ end bytes (contract).
            let (s0, s1) = unsafe {
                (_mm256_loadu_si256(src.add(offset).cast()), _mm256_loadu_si256(src.add(offset + 32).cast()))
            };
            for (a, &matrix) in acc.iter_mut().zip(column) {
                let m = _mm256_set1_epi64x(matrix as i64);
                a[0] = _mm256_xor_si256(a[0], _mm256_gf2p8affine_epi64_epi8::<0>(s0, m));
                a[1] = _mm256_xor_si256(a[1], _mm256_gf2p8affine_epi64_epi8::<0>(s1, m));
            }
        }
        for (a, out) in acc.iter().zip(outputs) {
            // SAFETY: output pointers address ≥ end bytes; with `stream` they
            // are 32-byte aligned and `offset` is a multiple of 64 (contract).
            unsafe {
                if stream {
                    _mm256_stream_si256(out.add(offset).cast(), a[0]);
                    _mm256_stream_si256(out.add(offset + 32).cast(), a[1]);
                } else {
                    _mm256_storeu_si256(out.add(offset).cast(), a[0]);
                    _mm256_storeu_si256(out.add(offset + 32).cast(), a[1]);
                }
            }
        }
        offset += STEP_BYTES;
    }
    if stream {
        // Non-temporal stores are weakly ordered: fence before anyone reads the outputs.
        _mm_sfence();
    }
}
