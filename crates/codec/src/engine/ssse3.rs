//! The SSSE3 engine: split-nibble multiplication with 128-bit PSHUFB, for
//! x86-64 CPUs without AVX2. Steps are 32 bytes (two registers per output)
//! so that four outputs' accumulators fit the sixteen XMM registers.
//!
//! Must not: be reachable on a CPU without SSSE3 (only [`Ssse3::new`]
//! constructs it, after checking).

use super::{
    Coefficients, Engine, EngineKind, MAX_GROUP_OUTPUTS, Mode, NIBBLE_TABLES, Pointers, combine_tail, for_each_group,
    group_columns, single_tail,
};
use std::arch::x86_64::*;

/// Bytes per kernel step: two 128-bit registers per output.
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

impl Engine for Ssse3 {
    fn kind(&self) -> EngineKind {
        EngineKind::Ssse3
    }

    fn combine_unchecked(&self, coeffs: &Coefficients, sources: &[&[u8]], outputs: &mut [&mut [u8]], mode: Mode) {
        let len = sources[0].len();
        let simd_len = len - len % STEP_BYTES;
        let pointers = Pointers::new(sources, outputs);
        for_each_group(simd_len, outputs.len(), |first, count, start, end| {
            let columns = group_columns(coeffs.nibble_tables(), sources.len(), first, count);
            let outs = &pointers.outputs[first..first + count];
            // SAFETY: `self` exists only if the CPU has SSSE3; the engine
            // contract guarantees equal slice lengths ≥ `end`.
            unsafe { group(&columns, &pointers.sources, outs, start, end, mode) }
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

impl Ssse3 {
    fn single(&self, c: u8, src: &[u8], dst: &mut [u8], mode: Mode) {
        assert_eq!(src.len(), dst.len(), "slice lengths differ");
        let simd_len = src.len() - src.len() % STEP_BYTES;
        if simd_len > 0 {
            let mut column = [[0u8; 32]; MAX_GROUP_OUTPUTS];
            column[0] = NIBBLE_TABLES[c as usize];
            // SAFETY: CPU support checked at construction; lengths checked above.
            unsafe { group(&[column], &[src.as_ptr()], &[dst.as_mut_ptr()], 0, simd_len, mode) }
        }
        single_tail(c, src, dst, mode, simd_len);
    }
}

/// Dispatches a group of 1..=4 outputs to its monomorphised kernel.
///
/// # Safety
/// The CPU has SSSE3; every pointer addresses at least `end` bytes;
/// `end - start` is a multiple of 32; `columns` has one entry per source.
unsafe fn group(
    columns: &[[[u8; 32]; MAX_GROUP_OUTPUTS]],
    sources: &[*const u8],
    outputs: &[*mut u8],
    start: usize,
    end: usize,
    mode: Mode,
) {
    debug_assert_eq!((end - start) % STEP_BYTES, 0);
    debug_assert_eq!(columns.len(), sources.len());
    // SAFETY: forwarded from this function's contract.
    unsafe {
        match outputs.len() {
            1 => kernel::<1>(columns, sources, outputs, start, end, mode),
            2 => kernel::<2>(columns, sources, outputs, start, end, mode),
            3 => kernel::<3>(columns, sources, outputs, start, end, mode),
            4 => kernel::<4>(columns, sources, outputs, start, end, mode),
            _ => unreachable!("output groups hold 1 to 4 outputs"),
        }
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
