//! The GFNI + AVX-512 engine: one GF2P8AFFINEQB per 64 bytes per
//! (source, output) pair, with the multiplication by each coefficient
//! encoded as an 8 × 8 bit matrix (see `gf::affine_matrix`), and products of
//! two sources folded into the accumulator with one VPTERNLOGQ.
//!
//! Must not: be reachable on a CPU without GFNI, AVX-512F and AVX-512BW
//! (only [`GfniAvx512::new`] constructs it, after checking).

use super::simd::Kernel;
use super::{EngineKind, MAX_GROUP_OUTPUTS, Mode};
use std::arch::x86_64::*;

/// Bytes per kernel step.
const STEP_BYTES: usize = 64;

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

impl Kernel for GfniAvx512 {
    const KIND: EngineKind = EngineKind::GfniAvx512;
    const STEP_BYTES: usize = STEP_BYTES;
    const STREAM_ALIGNMENT: Option<usize> = Some(64);
    type Table = u64;

    fn tables(coeffs: &super::Coefficients) -> &[u64] {
        coeffs.affine_matrices()
    }

    fn table(c: u8) -> u64 {
        super::AFFINE_MATRICES[c as usize]
    }

    unsafe fn run<const N: usize>(
        &self,
        columns: &[[u64; MAX_GROUP_OUTPUTS]],
        sources: &[*const u8],
        outputs: &[*mut u8],
        start: usize,
        end: usize,
        mode: Mode,
        stream: bool,
    ) {
        // SAFETY: `self` proves the CPU features; the rest is the caller's contract.
        unsafe { kernel::<N>(columns, sources, outputs, start, end, mode, stream) }
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
        offset += STEP_BYTES;
    }
    if stream {
        // Non-temporal stores are weakly ordered: fence before anyone reads the outputs.
        _mm_sfence();
    }
}
