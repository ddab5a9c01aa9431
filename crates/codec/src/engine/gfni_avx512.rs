//! The GFNI + AVX-512 engine: one GF2P8AFFINEQB per 64 bytes per
//! (source, output) pair, with the multiplication by each coefficient
//! encoded as an 8 × 8 bit matrix (see `gf::affine_matrix`), and products of
//! two sources folded into the accumulator with one VPTERNLOGQ.
//!
//! Must not: be reachable on a CPU without GFNI, AVX-512F and AVX-512BW
//! (only [`GfniAvx512::new`] constructs it, after checking).

use super::{
    AFFINE_MATRICES, Coefficients, Engine, EngineKind, MAX_GROUP_OUTPUTS, Mode, Pointers, combine_tail, for_each_group,
    group_columns, single_tail,
};
use std::arch::x86_64::*;

const VECTOR_BYTES: usize = 64;

/// Proof that this CPU has GFNI and AVX-512BW (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub struct GfniAvx512(());

impl GfniAvx512 {
    /// The engine, if this CPU supports it.
    pub fn new() -> Option<GfniAvx512> {
        let supported = is_x86_feature_detected!("gfni")
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw");
        supported.then_some(GfniAvx512(()))
    }
}

impl Engine for GfniAvx512 {
    fn kind(&self) -> EngineKind {
        EngineKind::GfniAvx512
    }

    fn combine_unchecked(&self, coeffs: &Coefficients, sources: &[&[u8]], outputs: &mut [&mut [u8]], mode: Mode) {
        let len = sources[0].len();
        let simd_len = len - len % VECTOR_BYTES;
        let pointers = Pointers::new(sources, outputs);
        let stream = pointers.streaming(len, mode, VECTOR_BYTES);
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

impl GfniAvx512 {
    fn single(&self, c: u8, src: &[u8], dst: &mut [u8], mode: Mode) {
        assert_eq!(src.len(), dst.len(), "slice lengths differ");
        let simd_len = src.len() - src.len() % VECTOR_BYTES;
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
/// The CPU has GFNI + AVX-512BW; every pointer addresses at least `end`
/// bytes; `end - start` is a multiple of 64; `columns` has one entry per
/// source; with `stream`, every output pointer is 64-byte aligned.
unsafe fn group(
    columns: &[[u64; MAX_GROUP_OUTPUTS]],
    sources: &[*const u8],
    outputs: &[*mut u8],
    start: usize,
    end: usize,
    mode: Mode,
    stream: bool,
) {
    debug_assert_eq!((end - start) % VECTOR_BYTES, 0);
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

#[inline]
#[target_feature(enable = "gfni,avx512f,avx512bw")]
fn product(source: __m512i, matrix: u64) -> __m512i {
    _mm512_gf2p8affine_epi64_epi8::<0>(source, _mm512_set1_epi64(matrix as i64))
}

#[target_feature(enable = "gfni,avx512f,avx512bw")]
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
        let mut acc = [_mm512_setzero_si512(); N];
        if mode == Mode::Accumulate {
            for (a, out) in acc.iter_mut().zip(outputs) {
                // SAFETY: output pointers address ≥ end bytes (contract).
                *a = unsafe { _mm512_loadu_si512(out.add(offset).cast()) };
            }
        }
        // Two sources per step: acc ^ p0 ^ p1 is one VPTERNLOGQ (0x96 = 3-way XOR).
        let mut pairs = sources.chunks_exact(2).zip(columns.chunks_exact(2));
        for (src, col) in &mut pairs {
            // SAFETY: source pointers address ≥ end bytes (contract).
            let (s0, s1) = unsafe {
                (_mm512_loadu_si512(src[0].add(offset).cast()), _mm512_loadu_si512(src[1].add(offset).cast()))
            };
            for (i, a) in acc.iter_mut().enumerate() {
                *a = _mm512_ternarylogic_epi64::<0x96>(*a, product(s0, col[0][i]), product(s1, col[1][i]));
            }
        }
        if sources.len() % 2 == 1 {
            let last = sources.len() - 1;
            // SAFETY: as above.
            let s = unsafe { _mm512_loadu_si512(sources[last].add(offset).cast()) };
            for (i, a) in acc.iter_mut().enumerate() {
                *a = _mm512_xor_si512(*a, product(s, columns[last][i]));
            }
        }
        for (a, out) in acc.iter().zip(outputs) {
            // SAFETY: output pointers address ≥ end bytes; with `stream` they
            // are 64-byte aligned and `offset` is a multiple of 64 (contract).
            unsafe {
                if stream {
                    _mm512_stream_si512(out.add(offset).cast(), *a);
                } else {
                    _mm512_storeu_si512(out.add(offset).cast(), *a);
                }
            }
        }
        offset += VECTOR_BYTES;
    }
    if stream {
        // Non-temporal stores are weakly ordered: fence before anyone reads the outputs.
        _mm_sfence();
    }
}
