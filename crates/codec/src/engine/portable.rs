//! The portable engine: one 256-byte product row per coefficient, for CPUs
//! without a SIMD engine (and for builds without the `simd` feature).
//!
//! Must not: use `unsafe` or architecture intrinsics; it is the fallback that
//! has to build everywhere.

use super::{Coefficients, Engine, EngineKind, Mode, blocks};
use crate::gf::MUL_TABLE;

/// Table-lookup engine (see the module documentation).
#[derive(Clone, Copy, Debug, Default)]
pub struct Portable;

fn mul_add(row: &[u8; 256], src: &[u8], dst: &mut [u8]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d ^= row[s as usize];
    }
}

fn mul_set(row: &[u8; 256], src: &[u8], dst: &mut [u8]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = row[s as usize];
    }
}

impl Engine for Portable {
    fn kind(&self) -> EngineKind {
        EngineKind::Portable
    }

    fn combine_unchecked(&self, coeffs: &Coefficients, sources: &[&[u8]], outputs: &mut [&mut [u8]], mode: Mode) {
        // Block-wise so that every source block stays in cache while each
        // output row is built from it.
        for (start, end) in blocks(sources[0].len()) {
            for (i, out) in outputs.iter_mut().enumerate() {
                let out = &mut out[start..end];
                for (j, src) in sources.iter().enumerate() {
                    let row = &MUL_TABLE[coeffs.get(i, j) as usize];
                    if j == 0 && mode == Mode::Overwrite {
                        mul_set(row, &src[start..end], out);
                    } else {
                        mul_add(row, &src[start..end], out);
                    }
                }
            }
        }
    }

    fn mul_slice(&self, c: u8, src: &[u8], dst: &mut [u8]) {
        assert_eq!(src.len(), dst.len(), "mul_slice lengths");
        mul_set(&MUL_TABLE[c as usize], src, dst);
    }

    fn mul_add_slice(&self, c: u8, src: &[u8], dst: &mut [u8]) {
        assert_eq!(src.len(), dst.len(), "mul_add_slice lengths");
        mul_add(&MUL_TABLE[c as usize], src, dst);
    }
}
