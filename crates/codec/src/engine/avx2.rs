//! The AVX2 engine: split-nibble multiplication with VPSHUFB. c · x is
//! `low[x & 15] ^ high[x >> 4]`, two 16-entry tables per coefficient held in
//! both 128-bit lanes, so one 256-bit shuffle looks up 32 bytes at once.
//!
//! Must not: be reachable on a CPU without AVX2 (only [`Avx2::new`]
//! constructs it, after checking).

use super::simd::Kernel;
use super::{EngineKind, MAX_GROUP_OUTPUTS, Mode};
use std::arch::x86_64::*;

/// Bytes per kernel step.
const STEP_BYTES: usize = 64;

/// Proof that this CPU has AVX2 (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub struct Avx2(());

impl Avx2 {
    /// The engine, if this CPU supports it.
    pub fn new() -> Option<Avx2> {
        is_x86_feature_detected!("avx2").then_some(Avx2(()))
    }
}

impl Kernel for Avx2 {
    const KIND: EngineKind = EngineKind::Avx2;
    const STEP_BYTES: usize = STEP_BYTES;
    const STREAM_ALIGNMENT: Option<usize> = Some(32);
    type Table = [u8; 32];

    fn tables(coeffs: &super::Coefficients) -> &[[u8; 32]] {
        coeffs.nibble_tables()
    }

    fn table(c: u8) -> [u8; 32] {
        super::NIBBLE_TABLES[c as usize]
    }

    unsafe fn run<const N: usize>(
        &self,
        columns: &[[[u8; 32]; MAX_GROUP_OUTPUTS]],
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

/// The low and high nibble tables of one coefficient, each in both lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn tables(table: &[u8; 32]) -> (__m256i, __m256i) {
    // SAFETY: `table` is 32 readable bytes; unaligned 16-byte loads.
    unsafe {
        let low = _mm_loadu_si128(table.as_ptr().cast());
        let high = _mm_loadu_si128(table.as_ptr().add(16).cast());
        (_mm256_broadcastsi128_si256(low), _mm256_broadcastsi128_si256(high))
    }
}

#[target_feature(enable = "avx2")]
unsafe fn kernel<const N: usize>(
    columns: &[[[u8; 32]; MAX_GROUP_OUTPUTS]],
    sources: &[*const u8],
    outputs: &[*mut u8],
    start: usize,
    end: usize,
    mode: Mode,
    stream: bool,
) {
    let nibble_mask = _mm256_set1_epi8(0x0f);
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
            let low0 = _mm256_and_si256(s0, nibble_mask);
            let low1 = _mm256_and_si256(s1, nibble_mask);
            let high0 = _mm256_and_si256(_mm256_srli_epi64::<4>(s0), nibble_mask);
            let high1 = _mm256_and_si256(_mm256_srli_epi64::<4>(s1), nibble_mask);
            for (a, table) in acc.iter_mut().zip(column) {
                let (t_low, t_high) = tables(table);
                let p0 = _mm256_xor_si256(_mm256_shuffle_epi8(t_low, low0), _mm256_shuffle_epi8(t_high, high0));
                let p1 = _mm256_xor_si256(_mm256_shuffle_epi8(t_low, low1), _mm256_shuffle_epi8(t_high, high1));
                a[0] = _mm256_xor_si256(a[0], p0);
                a[1] = _mm256_xor_si256(a[1], p1);
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
