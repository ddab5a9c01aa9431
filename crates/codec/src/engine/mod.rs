//! GF(2^8) slice kernels: the one operation every code is built from.
//!
//! Owns the [`Engine`] trait, the [`Coefficients`] a kernel consumes, and the
//! run-time choice of the fastest engine this CPU supports ([`best`]). Each
//! engine lives in its own file; SIMD code sits behind `#[target_feature]` on
//! private functions, reachable only through a constructor that checked the CPU.
//!
//! The core operation is fused: `dst_i (=|^=) Σ_j c_ij · src_j` for all
//! outputs i in one pass over the sources, so each source byte is loaded once
//! per group of up to [`MAX_GROUP_OUTPUTS`] outputs. Long slices are processed
//! in cache blocks of [`BLOCK_BYTES`] so that groups beyond the first re-read
//! sources from L1/L2 rather than memory.
//!
//! Must not: allocate per byte, validate code-level inputs (codes do that and
//! return errors; engines assert, because a length mismatch here is a bug), or
//! depend on anything async.

use crate::gf;
use std::sync::OnceLock;

#[cfg(all(feature = "simd", target_arch = "x86_64"))]
mod avx2;
#[cfg(all(feature = "simd", target_arch = "x86_64"))]
mod gfni_avx2;
#[cfg(all(feature = "simd", target_arch = "x86_64"))]
mod gfni_avx512;
mod portable;
mod reference;
#[cfg(all(feature = "simd", target_arch = "x86_64"))]
mod simd;
#[cfg(all(feature = "simd", target_arch = "x86_64"))]
mod ssse3;

pub use portable::Portable;
pub use reference::Reference;
#[cfg(all(feature = "simd", target_arch = "x86_64"))]
pub use {avx2::Avx2, gfni_avx2::GfniAvx2, gfni_avx512::GfniAvx512, ssse3::Ssse3};

/// Outputs computed together in one pass over the sources. Four keeps the
/// accumulators of the 256-bit engines in registers; more outputs are done in
/// several groups over the same cache block.
pub const MAX_GROUP_OUTPUTS: usize = 4;

/// Bytes of every slice processed before moving on to the next block. Small
/// enough that up to ~32 sources of one block stay in L2 while later output
/// groups re-read them.
pub const BLOCK_BYTES: usize = 32 * 1024;

/// Whether a kernel overwrites its outputs or XORs into them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `dst_i = Σ_j c_ij · src_j` (previous contents ignored).
    Overwrite,
    /// `dst_i ^= Σ_j c_ij · src_j` (partial sums, pipelined reconstruction).
    Accumulate,
}

/// Every engine this crate can build, fastest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EngineKind {
    /// 512-bit GF2P8AFFINEQB (GFNI + AVX-512BW).
    GfniAvx512,
    /// 256-bit GF2P8AFFINEQB (GFNI + AVX).
    GfniAvx2,
    /// 256-bit split-nibble PSHUFB.
    Avx2,
    /// 128-bit split-nibble PSHUFB.
    Ssse3,
    /// One 256-byte product row per constant, any CPU.
    Portable,
    /// Byte at a time through log / exp tables: the definition, for tests.
    Reference,
}

impl EngineKind {
    /// Every kind, fastest first.
    pub const ALL: [EngineKind; 6] = [
        EngineKind::GfniAvx512,
        EngineKind::GfniAvx2,
        EngineKind::Avx2,
        EngineKind::Ssse3,
        EngineKind::Portable,
        EngineKind::Reference,
    ];

    /// Stable lower-case name, as printed by benchmarks and accepted by `LOWTAIL_ENGINE`.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::GfniAvx512 => "gfni-avx512",
            EngineKind::GfniAvx2 => "gfni-avx2",
            EngineKind::Avx2 => "avx2",
            EngineKind::Ssse3 => "ssse3",
            EngineKind::Portable => "portable",
            EngineKind::Reference => "reference",
        }
    }

    /// Parses a name printed by [`EngineKind::name`].
    pub fn from_name(name: &str) -> Option<EngineKind> {
        EngineKind::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A matrix of GF(2^8) coefficients (outputs × sources, row-major) together
/// with the per-coefficient tables every engine wants, built once so that a
/// cached decode matrix costs nothing to reuse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coefficients {
    outputs: usize,
    sources: usize,
    values: Vec<u8>,
    nibble: Vec<[u8; 32]>,
    affine: Vec<u64>,
}

impl Coefficients {
    /// Builds from a row-major `outputs × sources` array. Panics when the
    /// length does not match (callers build these from matrices they own).
    pub fn new(outputs: usize, sources: usize, values: Vec<u8>) -> Coefficients {
        assert!(outputs > 0 && sources > 0, "empty coefficient matrix");
        assert_eq!(values.len(), outputs * sources, "coefficient count");
        let nibble = values.iter().map(|&c| NIBBLE_TABLES[c as usize]).collect();
        let affine = values.iter().map(|&c| AFFINE_MATRICES[c as usize]).collect();
        Coefficients { outputs, sources, values, nibble, affine }
    }

    /// Number of output slices.
    pub fn outputs(&self) -> usize {
        self.outputs
    }

    /// Number of source slices.
    pub fn sources(&self) -> usize {
        self.sources
    }

    /// c_ij.
    pub fn get(&self, output: usize, source: usize) -> u8 {
        self.values[output * self.sources + source]
    }

    /// Row-major coefficient values.
    pub fn values(&self) -> &[u8] {
        &self.values
    }

    /// Row-major split-nibble tables (see [`gf::nibble_tables`]).
    pub fn nibble_tables(&self) -> &[[u8; 32]] {
        &self.nibble
    }

    /// Row-major GFNI matrices (see [`gf::affine_matrix`]).
    pub fn affine_matrices(&self) -> &[u64] {
        &self.affine
    }
}

const fn build_nibble_tables() -> [[u8; 32]; 256] {
    let mut out = [[0u8; 32]; 256];
    let mut c = 0;
    while c < 256 {
        out[c] = gf::nibble_tables(c as u8);
        c += 1;
    }
    out
}

const fn build_affine_matrices() -> [u64; 256] {
    let mut out = [0u64; 256];
    let mut c = 0;
    while c < 256 {
        out[c] = gf::affine_matrix(c as u8);
        c += 1;
    }
    out
}

/// Split-nibble tables for every constant, so single-constant calls need no set-up.
pub static NIBBLE_TABLES: [[u8; 32]; 256] = build_nibble_tables();
/// GFNI matrices for every constant.
pub static AFFINE_MATRICES: [u64; 256] = build_affine_matrices();

/// A GF(2^8) slice kernel. All methods panic on mismatched lengths or counts:
/// codes validate user input before calling an engine.
pub trait Engine: Send + Sync + 'static {
    /// Which engine this is.
    fn kind(&self) -> EngineKind;

    /// `outputs[i] (=|^=) Σ_j coeffs[i][j] · sources[j]`, all slices of equal length.
    fn combine(&self, coeffs: &Coefficients, sources: &[&[u8]], outputs: &mut [&mut [u8]], mode: Mode) {
        check_shapes(coeffs, sources, outputs);
        self.combine_unchecked(coeffs, sources, outputs, mode);
    }

    /// [`Engine::combine`] after the shapes were checked. Implementations may
    /// rely on: `sources.len() == coeffs.sources()`, `outputs.len() ==
    /// coeffs.outputs()`, and every slice having the length of `sources[0]`.
    #[doc(hidden)]
    fn combine_unchecked(&self, coeffs: &Coefficients, sources: &[&[u8]], outputs: &mut [&mut [u8]], mode: Mode);

    /// `dst = c · src`.
    fn mul_slice(&self, c: u8, src: &[u8], dst: &mut [u8]);

    /// `dst ^= c · src`.
    fn mul_add_slice(&self, c: u8, src: &[u8], dst: &mut [u8]);
}

fn check_shapes(coeffs: &Coefficients, sources: &[&[u8]], outputs: &[&mut [u8]]) {
    assert_eq!(sources.len(), coeffs.sources(), "source count differs from coefficient columns");
    assert_eq!(outputs.len(), coeffs.outputs(), "output count differs from coefficient rows");
    let len = sources[0].len();
    assert!(sources.iter().all(|s| s.len() == len), "sources differ in length");
    assert!(outputs.iter().all(|o| o.len() == len), "outputs differ in length from sources");
}

/// Splits `len` bytes into `[start, end)` cache blocks.
pub(crate) fn blocks(len: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..len).step_by(BLOCK_BYTES).map(move |start| (start, (start + BLOCK_BYTES).min(len)))
}

/// Outputs at least this long, 64-byte aligned and overwritten, are written
/// with non-temporal stores: they will not be read again soon, and streaming
/// them skips the read-for-ownership that costs memory bandwidth.
pub const STREAMING_STORE_MIN_BYTES: usize = 512 * 1024;

/// Constructs the engine of `kind` if this CPU (and this build) supports it.
pub fn by_kind(kind: EngineKind) -> Option<&'static dyn Engine> {
    match kind {
        EngineKind::Reference => Some(&Reference),
        EngineKind::Portable => Some(&Portable),
        #[cfg(all(feature = "simd", target_arch = "x86_64"))]
        EngineKind::Ssse3 => Ssse3::new().map(leak),
        #[cfg(all(feature = "simd", target_arch = "x86_64"))]
        EngineKind::Avx2 => Avx2::new().map(leak),
        #[cfg(all(feature = "simd", target_arch = "x86_64"))]
        EngineKind::GfniAvx2 => GfniAvx2::new().map(leak),
        #[cfg(all(feature = "simd", target_arch = "x86_64"))]
        EngineKind::GfniAvx512 => GfniAvx512::new().map(leak),
        #[cfg(not(all(feature = "simd", target_arch = "x86_64")))]
        _ => None,
    }
}

#[cfg(all(feature = "simd", target_arch = "x86_64"))]
fn leak<E: Engine>(engine: E) -> &'static dyn Engine {
    // Engines are zero-sized proofs that the CPU has a feature; leaking one costs nothing.
    Box::leak(Box::new(engine))
}

/// Every engine this CPU supports, fastest first.
pub fn available() -> Vec<&'static dyn Engine> {
    EngineKind::ALL.into_iter().filter_map(by_kind).collect()
}

/// The fastest engine this CPU supports, chosen once per process. The
/// environment variable `LOWTAIL_ENGINE` (an [`EngineKind::name`]) overrides
/// the choice, for benchmarks and for debugging a suspected kernel bug; an
/// unknown or unsupported name panics rather than silently measuring
/// something else.
pub fn best() -> &'static dyn Engine {
    static BEST: OnceLock<&'static dyn Engine> = OnceLock::new();
    *BEST.get_or_init(|| match std::env::var("LOWTAIL_ENGINE") {
        Ok(name) if !name.is_empty() => {
            let kind = EngineKind::from_name(&name).unwrap_or_else(|| panic!("LOWTAIL_ENGINE={name}: unknown engine"));
            by_kind(kind).unwrap_or_else(|| panic!("LOWTAIL_ENGINE={name}: not supported on this CPU or build"))
        }
        _ => available()[0],
    })
}

#[cfg(test)]
mod tests;
