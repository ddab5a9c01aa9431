//! The SSSE3 engine: split-nibble multiplication with 128-bit PSHUFB, for
//! x86-64 CPUs without AVX2. Steps are 32 bytes (two registers per output)
//! so that four outputs' accumulators fit the sixteen XMM registers.
//!
//! Must not: be reachable on a CPU without SSSE3 (only [`Ssse3::new`]
//! constructs it, after checking).

use super::simd::Kernel;
use super::{EngineKind, MAX_GROUP_OUTPUTS, Mode};
use std::arch::x86_64::*;

/// Bytes per kernel step.
const STEP_BYTES: usize = 32;

/// Proof that this CPU has SSSE3 (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub struct Ssse3(());

impl Ssse3 {
    /// The engine, if this CPU supports it.
    pub fn new() -> Option<Ssse3> {
        is_x86_feature_detected!("ssse3").then_some(Ssse3(()))
    }
}

impl Kernel for Ssse3 {
    const KIND: EngineKind = EngineKind::Ssse3;
    const STEP_BYTES: usize = STEP_BYTES;
    const STREAM_ALIGNMENT: Option<usize> = None;
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
        debug_assert!(!stream, "SSSE3 has no streaming stores here (STREAM_ALIGNMENT is None)");
        // SAFETY: `self` proves the CPU features; the rest is the caller's contract.
        unsafe { kernel::<N>(columns, sources, outputs, start, end, mode) }
    }
}

#[target_feature(enable = "ssse3")]
unsafe fn kernel<const N: usize>(
    columns: &[[[u8; 32]; MAX_GROUP_OUTPUTS]],
    sources: &[*const u8],
    outputs: &[*mut u8],
    start: usize,
    end: usize,
    mode: Mode,
) {
    let nibble_mask = _mm_set1_epi8(0x0f);
    let mut offset = start;
    while offset < end {
        let mut acc = [[_mm_setzero_si128(); 2]; N];
        if mode == Mode::Accumulate {
            for (a, out) in acc.iter_mut().zip(outputs) {
                // SAFETY: output pointers address ≥ end bytes (contract).
                unsafe {
                    a[0] = _mm_loadu_si128(out.add(offset).cast());
                    a[1] = _mm_loadu_si128(out.add(offset + 16).cast());
                }
            }
        }
        for (src, column) in sources.iter().zip(columns) {
            // SAFETY: source pointers address ≥ end bytes (contract).
            let (s0, s1) =
                unsafe { (_mm_loadu_si128(src.add(offset).cast()), _mm_loadu_si128(src.add(offset + 16).cast())) };
            let low0 = _mm_and_si128(s0, nibble_mask);
            let low1 = _mm_and_si128(s1, nibble_mask);
            let high0 = _mm_and_si128(_mm_srli_epi64::<4>(s0), nibble_mask);
            let high1 = _mm_and_si128(_mm_srli_epi64::<4>(s1), nibble_mask);
            for (a, table) in acc.iter_mut().zip(column) {
                // SAFETY: `table` is 32 readable bytes.
                let (t_low, t_high) =
                    unsafe { (_mm_loadu_si128(table.as_ptr().cast()), _mm_loadu_si128(table.as_ptr().add(16).cast())) };
                let p0 = _mm_xor_si128(_mm_shuffle_epi8(t_low, low0), _mm_shuffle_epi8(t_high, high0));
                let p1 = _mm_xor_si128(_mm_shuffle_epi8(t_low, low1), _mm_shuffle_epi8(t_high, high1));
                a[0] = _mm_xor_si128(a[0], p0);
                a[1] = _mm_xor_si128(a[1], p1);
            }
        }
        for (a, out) in acc.iter().zip(outputs) {
            // SAFETY: output pointers address ≥ end bytes (contract).
            unsafe {
                _mm_storeu_si128(out.add(offset).cast(), a[0]);
                _mm_storeu_si128(out.add(offset + 16).cast(), a[1]);
            }
        }
        offset += STEP_BYTES;
    }
}
