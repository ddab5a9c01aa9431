//! Every engine against the reference engine on random inputs: lengths that
//! are not multiples of any vector width, unaligned slices, one to nine
//! outputs (so grouped and cache-blocked paths run), both modes, and the
//! streaming-store path for long aligned outputs.

use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Lengths around every step size the engines use (16, 32, 64) and the cache block.
const LENGTHS: &[usize] = &[0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 1000, 4096 + 7];

fn random_bytes(rng: &mut ChaCha8Rng, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

fn simd_engines() -> Vec<&'static dyn Engine> {
    available().into_iter().filter(|e| e.kind() != EngineKind::Reference).collect()
}

/// Runs `combine` on `engine` and on the reference with the same inputs,
/// placing every slice at `misalign` bytes past a fresh allocation.
fn check_combine(
    engine: &dyn Engine,
    rng: &mut ChaCha8Rng,
    outputs: usize,
    sources: usize,
    len: usize,
    misalign: usize,
) {
    let values: Vec<u8> = (0..outputs * sources).map(|_| rng.random()).collect();
    let coeffs = Coefficients::new(outputs, sources, values);
    let source_bufs: Vec<Vec<u8>> = (0..sources).map(|_| random_bytes(rng, len + misalign)).collect();
    let source_slices: Vec<&[u8]> = source_bufs.iter().map(|b| &b[misalign..]).collect();
    let initial: Vec<Vec<u8>> = (0..outputs).map(|_| random_bytes(rng, len + misalign)).collect();
    for mode in [Mode::Overwrite, Mode::Accumulate] {
        let mut expected = initial.clone();
        let mut actual = initial.clone();
        {
            let mut outs: Vec<&mut [u8]> = expected.iter_mut().map(|b| &mut b[misalign..]).collect();
            Reference.combine(&coeffs, &source_slices, &mut outs, mode);
        }
        {
            let mut outs: Vec<&mut [u8]> = actual.iter_mut().map(|b| &mut b[misalign..]).collect();
            engine.combine(&coeffs, &source_slices, &mut outs, mode);
        }
        assert_eq!(
            actual,
            expected,
            "{} combine {outputs}x{sources} len {len} misalign {misalign} {mode:?}",
            engine.kind()
        );
    }
}

#[test]
fn reference_matches_field_definition() {
    let coeffs = Coefficients::new(2, 2, vec![1, 2, 3, 0x8e]);
    let a = [0x53u8, 0xff, 0, 1];
    let b = [0xcau8, 0x01, 7, 2];
    let mut o0 = [0u8; 4];
    let mut o1 = [0u8; 4];
    Reference.combine(&coeffs, &[&a, &b], &mut [&mut o0, &mut o1], Mode::Overwrite);
    for p in 0..4 {
        assert_eq!(o0[p], a[p] ^ gf::mul(2, b[p]));
        assert_eq!(o1[p], gf::mul(3, a[p]) ^ gf::mul(0x8e, b[p]));
    }
}

#[test]
fn engines_match_reference_on_ragged_lengths() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for engine in simd_engines() {
        for &len in LENGTHS {
            for outputs in [1, 2, 3, 4, 5, 9] {
                check_combine(engine, &mut rng, outputs, 6, len, 0);
            }
        }
    }
}

#[test]
fn engines_match_reference_on_unaligned_slices() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    for engine in simd_engines() {
        for misalign in [1, 3, 8, 17, 31, 33, 63] {
            check_combine(engine, &mut rng, 3, 5, 777, misalign);
        }
    }
}

#[test]
fn engines_match_reference_on_many_sources_and_blocks() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let len = 2 * BLOCK_BYTES + 64 * 3 + 5;
    for engine in simd_engines() {
        for (outputs, sources) in [(1, 1), (1, 17), (4, 12), (6, 10), (8, 3)] {
            check_combine(engine, &mut rng, outputs, sources, len, 0);
        }
    }
}

/// Every source count an engine may specialise (the GFNI-AVX512 engine has a kernel per count up
/// to 16, its matrices in registers or broadcast from memory) and the general kernel past it, with
/// every group size, in both modes.
#[test]
fn engines_match_reference_on_every_source_count() {
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    for engine in simd_engines() {
        for sources in 1..=18 {
            for outputs in 1..=MAX_GROUP_OUTPUTS {
                check_combine(engine, &mut rng, outputs, sources, 3 * 64 + 5, 0);
            }
        }
    }
}

#[test]
fn engines_match_reference_on_random_shapes() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    for engine in simd_engines() {
        for _ in 0..40 {
            let outputs = rng.random_range(1..=8);
            let sources = rng.random_range(1..=20);
            let len = rng.random_range(0..3000);
            let misalign = rng.random_range(0..64);
            check_combine(engine, &mut rng, outputs, sources, len, misalign);
        }
    }
}

/// 64-byte aligned storage, so the streaming-store path (aligned, long,
/// overwrite) is the one exercised.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

fn aligned(rng: &mut ChaCha8Rng, len: usize) -> Vec<Line> {
    let mut lines = vec![Line([0; 64]); len.div_ceil(64)];
    for line in &mut lines {
        rng.fill(&mut line.0[..]);
    }
    lines
}

fn as_bytes(lines: &[Line], len: usize) -> &[u8] {
    // SAFETY: Line is 64 plain bytes with no padding; len ≤ 64 × lines.
    unsafe { std::slice::from_raw_parts(lines.as_ptr().cast(), len) }
}

fn as_bytes_mut(lines: &mut [Line], len: usize) -> &mut [u8] {
    // SAFETY: as above, and the borrow is unique.
    unsafe { std::slice::from_raw_parts_mut(lines.as_mut_ptr().cast(), len) }
}

#[test]
fn streaming_stores_write_the_same_bytes() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let len = STREAMING_STORE_MIN_BYTES + 64 + 9;
    let sources: Vec<Vec<Line>> = (0..3).map(|_| aligned(&mut rng, len)).collect();
    let source_slices: Vec<&[u8]> = sources.iter().map(|s| as_bytes(s, len)).collect();
    let coeffs = Coefficients::new(2, 3, vec![1, 2, 3, 4, 5, 6]);
    let mut expected: Vec<Vec<Line>> = (0..2).map(|_| aligned(&mut rng, len)).collect();
    {
        let mut outs: Vec<&mut [u8]> = expected.iter_mut().map(|o| as_bytes_mut(o, len)).collect();
        Portable.combine(&coeffs, &source_slices, &mut outs, Mode::Overwrite);
    }
    for engine in simd_engines() {
        let mut actual: Vec<Vec<Line>> = (0..2).map(|_| aligned(&mut rng, len)).collect();
        let mut outs: Vec<&mut [u8]> = actual.iter_mut().map(|o| as_bytes_mut(o, len)).collect();
        engine.combine(&coeffs, &source_slices, &mut outs, Mode::Overwrite);
        for (a, e) in outs.iter().zip(&expected) {
            assert!(*a == as_bytes(e, len), "{} streaming combine differs", engine.kind());
        }
    }
}

#[test]
fn single_constant_operations_match_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    for engine in available() {
        for &len in LENGTHS {
            for c in [0u8, 1, 2, 0x1d, 0x8e, 0xff, rng.random()] {
                let src = random_bytes(&mut rng, len);
                let initial = random_bytes(&mut rng, len);
                let mut expected = initial.clone();
                Reference.mul_slice(c, &src, &mut expected);
                let mut actual = initial.clone();
                engine.mul_slice(c, &src, &mut actual);
                assert_eq!(actual, expected, "{} mul_slice c={c} len={len}", engine.kind());

                let mut expected = initial.clone();
                Reference.mul_add_slice(c, &src, &mut expected);
                let mut actual = initial.clone();
                engine.mul_add_slice(c, &src, &mut actual);
                assert_eq!(actual, expected, "{} mul_add_slice c={c} len={len}", engine.kind());
            }
        }
    }
}

#[test]
fn best_engine_is_the_fastest_available() {
    let best = best();
    assert_eq!(best.kind(), available()[0].kind());
    assert!(available().iter().any(|e| e.kind() == EngineKind::Reference));
    for kind in EngineKind::ALL {
        assert_eq!(EngineKind::from_name(kind.name()), Some(kind));
    }
}

#[test]
#[should_panic(expected = "outputs differ in length")]
fn mismatched_lengths_panic_in_engines() {
    let coeffs = Coefficients::new(1, 1, vec![3]);
    let mut out = [0u8; 3];
    Portable.combine(&coeffs, &[&[1, 2]], &mut [&mut out], Mode::Overwrite);
}
