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

/// Matrices a fixed-shape kernel keeps in ZMM registers: 32 registers less the accumulators
/// (up to four), two sources and a product.
const MAX_MATRICES_IN_REGISTERS: usize = 24;

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
        unsafe {
            let args = (columns, sources, outputs, start, end, mode, stream);
            // Up to 16 sources, a kernel per source count: its loop over the sources
            // unrolls, so the matrices and source pointers live in registers (or, past the
            // register file, are broadcast from a few cache lines) and nothing is indexed.
            macro_rules! by_source_count {
                ($($s:literal)*) => {
                    match sources.len() {
                        $($s => fixed::<$s, N>(args),)*
                        _ => kernel::<N>(columns, sources, outputs, start, end, mode, stream),
                    }
                };
            }
            by_source_count!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
        }
    }
}

/// The arguments of [`Kernel::run`], passed whole to a fixed-shape kernel.
type RunArgs<'a> = (&'a [[u64; MAX_GROUP_OUTPUTS]], &'a [*const u8], &'a [*mut u8], usize, usize, Mode, bool);

/// The kernel for exactly `S` sources and `N` outputs (see [`GfniAvx512::run`]): each matrix
/// broadcast once before the loop, the sources unrolled, one 64-byte step per iteration.
///
/// # Safety
/// As [`Kernel::run`], with `sources.len() == S` and `outputs.len() == N`.
#[target_feature(enable = "gfni,avx512f,avx512bw")]
unsafe fn fixed<const S: usize, const N: usize>(args: RunArgs<'_>) {
    let (columns, sources, outputs, start, end, mode, stream) = args;
    debug_assert!(sources.len() == S && outputs.len() == N && columns.len() == S);
    // Past the register file, LLVM would spill broadcast matrices to the stack and reload 64 bytes
    // each; an 8-byte broadcast operand costs the same load and no spill store.
    let in_registers = S * N <= MAX_MATRICES_IN_REGISTERS;
    let broadcasts: [[__m512i; N]; S] = std::array::from_fn(|j| {
        std::array::from_fn(
            |i| if in_registers { _mm512_set1_epi64(columns[j][i] as i64) } else { _mm512_setzero_si512() },
        )
    });
    let columns: &[[u64; MAX_GROUP_OUTPUTS]; S] = columns.try_into().expect("one column per source");
    let matrix =
        |j: usize, i: usize| if in_registers { broadcasts[j][i] } else { _mm512_set1_epi64(columns[j][i] as i64) };
    let sources: [*const u8; S] = std::array::from_fn(|j| sources[j]);
    let outputs: [*mut u8; N] = std::array::from_fn(|i| outputs[i]);
    let accumulate = mode == Mode::Accumulate;
    let mut offset = start;
    while offset < end {
        // Every load and store below: pointers address ≥ end bytes and offset < end steps by 64;
        // with `stream` the outputs are 64-byte aligned (contract).
        // SAFETY: as just said.
        let first = unsafe { load(sources[0], offset) };
        let mut acc: [__m512i; N] = std::array::from_fn(|i| affine(first, matrix(0, i)));
        if accumulate {
            for (a, out) in acc.iter_mut().zip(outputs) {
                // SAFETY: as above.
                *a = _mm512_xor_si512(*a, unsafe { load(out, offset) });
            }
        }
        // Two sources per VPTERNLOGQ (0x96 = 3-way XOR), the odd one last.
        let mut j = 1;
        while j + 1 < S {
            // SAFETY: as above.
            let (s0, s1) = unsafe { (load(sources[j], offset), load(sources[j + 1], offset)) };
            for (i, a) in acc.iter_mut().enumerate() {
                *a = _mm512_ternarylogic_epi64::<0x96>(*a, affine(s0, matrix(j, i)), affine(s1, matrix(j + 1, i)));
            }
            j += 2;
        }
        if j < S {
            // SAFETY: as above.
            let s = unsafe { load(sources[j], offset) };
            for (i, a) in acc.iter_mut().enumerate() {
                *a = _mm512_xor_si512(*a, affine(s, matrix(j, i)));
            }
        }
        for (a, out) in acc.into_iter().zip(outputs) {
            // SAFETY: as above.
            unsafe { store(out, offset, a, stream) };
        }
        offset += STEP_BYTES;
    }
    if stream {
        _mm_sfence();
    }
}

#[inline]
#[target_feature(enable = "gfni,avx512f,avx512bw")]
fn product(source: __m512i, matrix: u64) -> __m512i {
    _mm512_gf2p8affine_epi64_epi8::<0>(source, _mm512_set1_epi64(matrix as i64))
}

/// The 64 bytes at `base + offset`.
///
/// # Safety
/// They are readable.
#[inline]
#[target_feature(enable = "gfni,avx512f,avx512bw")]
unsafe fn load(base: *const u8, offset: usize) -> __m512i {
    // SAFETY: the caller's contract.
    unsafe { _mm512_loadu_si512(base.add(offset).cast()) }
}

/// Writes `value` to the 64 bytes at `base + offset`, non-temporally with `stream`.
///
/// # Safety
/// They are writable, and 64-byte aligned with `stream`.
#[inline]
#[target_feature(enable = "gfni,avx512f,avx512bw")]
unsafe fn store(base: *mut u8, offset: usize, value: __m512i, stream: bool) {
    // SAFETY: the caller's contract.
    unsafe {
        if stream {
            _mm512_stream_si512(base.add(offset).cast(), value);
        } else {
            _mm512_storeu_si512(base.add(offset).cast(), value);
        }
    }
}

/// `source` multiplied by the constant whose matrix is broadcast in `matrix`.
#[inline]
#[target_feature(enable = "gfni,avx512f,avx512bw")]
fn affine(source: __m512i, matrix: __m512i) -> __m512i {
    _mm512_gf2p8affine_epi64_epi8::<0>(source, matrix)
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
