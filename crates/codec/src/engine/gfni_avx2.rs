//! The GFNI + AVX engine (256-bit): one GF2P8AFFINEQB per 32 bytes per
//! (source, output) pair, for CPUs with GFNI but without AVX-512 (Intel
//! client cores from Alder Lake on, AMD Zen 4 with AVX-512 disabled, ...).
//!
//! Must not: be reachable on a CPU without GFNI and AVX2 (only
//! [`GfniAvx2::new`] constructs it, after checking).

use super::simd::Kernel;
use super::{EngineKind, MAX_GROUP_OUTPUTS, Mode};
use std::arch::x86_64::*;

/// Bytes per kernel step.
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

impl Kernel for GfniAvx2 {
    const KIND: EngineKind = EngineKind::GfniAvx2;
    const STEP_BYTES: usize = STEP_BYTES;
    const STREAM_ALIGNMENT: Option<usize> = Some(32);
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
