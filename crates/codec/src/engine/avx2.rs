//! The AVX2 engine: split-nibble multiplication with VPSHUFB. c · x is
//! `low[x & 15] ^ high[x >> 4]`, two 16-entry tables per coefficient held in
//! both 128-bit lanes, so one 256-bit shuffle looks up 32 bytes at once.
//!
//! Must not: be reachable on a CPU without AVX2 (only [`Avx2::new`]
//! constructs it, after checking).

use super::{
    Coefficients, Engine, EngineKind, MAX_GROUP_OUTPUTS, Mode, NIBBLE_TABLES, Pointers, combine_tail, for_each_group,
    group_columns, single_tail,
};
use std::arch::x86_64::*;

/// Bytes per kernel step: two 256-bit registers per output.
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

impl Engine for Avx2 {
    fn kind(&self) -> EngineKind {
        EngineKind::Avx2
    }

    fn combine_unchecked(&self, coeffs: &Coefficients, sources: &[&[u8]], outputs: &mut [&mut [u8]], mode: Mode) {
        let len = sources[0].len();
        let simd_len = len - len % STEP_BYTES;
        let pointers = Pointers::new(sources, outputs);
        let stream = pointers.streaming(len, mode, 32);
        for_each_group(simd_len, outputs.len(), |first, count, start, end| {
            let columns = group_columns(coeffs.nibble_tables(), sources.len(), first, count);
            let outs = &pointers.outputs[first..first + count];
            // SAFETY: `self` exists only if the CPU has AVX2; the engine
            // contract guarantees equal slice lengths ≥ `end`.
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

impl Avx2 {
    fn single(&self, c: u8, src: &[u8], dst: &mut [u8], mode: Mode) {
        assert_eq!(src.len(), dst.len(), "slice lengths differ");
        let simd_len = src.len() - src.len() % STEP_BYTES;
        if simd_len > 0 {
            let mut column = [[0u8; 32]; MAX_GROUP_OUTPUTS];
            column[0] = NIBBLE_TABLES[c as usize];
            // SAFETY: CPU support checked at construction; lengths checked above.
            unsafe { group(&[column], &[src.as_ptr()], &[dst.as_mut_ptr()], 0, simd_len, mode, false) }
        }
        single_tail(c, src, dst, mode, simd_len);
    }
}

/// Dispatches a group of 1..=4 outputs to its monomorphised kernel.
///
/// # Safety
/// The CPU has AVX2; every pointer addresses at least `end` bytes;
/// `end - start` is a multiple of 64; `columns` has one entry per source;
/// with `stream`, every output pointer is 32-byte aligned.
unsafe fn group(
    columns: &[[[u8; 32]; MAX_GROUP_OUTPUTS]],
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
