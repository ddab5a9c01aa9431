//! The reference engine: the definition of the operation, one byte at a time
//! through the log / exp tables. Every other engine is tested against it.
//!
//! Must not: be optimised. Its value is that it is obviously right.

use super::{Coefficients, Engine, EngineKind, Mode};
use crate::gf;

/// Byte-at-a-time engine (see the module documentation).
#[derive(Clone, Copy, Debug, Default)]
pub struct Reference;

fn mul(a: u8, b: u8) -> u8 {
    // Deliberately through log / exp rather than the product table the fast
    // engines share, so a wrong table cannot hide behind itself.
    if a == 0 || b == 0 {
        return 0;
    }
    gf::EXP[gf::LOG[a as usize] as usize + gf::LOG[b as usize] as usize]
}

impl Engine for Reference {
    fn kind(&self) -> EngineKind {
        EngineKind::Reference
    }

    fn combine_unchecked(&self, coeffs: &Coefficients, sources: &[&[u8]], outputs: &mut [&mut [u8]], mode: Mode) {
        for (i, out) in outputs.iter_mut().enumerate() {
            for p in 0..out.len() {
                let mut acc = if mode == Mode::Accumulate { out[p] } else { 0 };
                for (j, src) in sources.iter().enumerate() {
                    acc ^= mul(coeffs.get(i, j), src[p]);
                }
                out[p] = acc;
            }
        }
    }

    fn mul_slice(&self, c: u8, src: &[u8], dst: &mut [u8]) {
        assert_eq!(src.len(), dst.len(), "mul_slice lengths");
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = mul(c, s);
        }
    }

    fn mul_add_slice(&self, c: u8, src: &[u8], dst: &mut [u8]) {
        assert_eq!(src.len(), dst.len(), "mul_add_slice lengths");
        for (d, &s) in dst.iter_mut().zip(src) {
            *d ^= mul(c, s);
        }
    }
}
