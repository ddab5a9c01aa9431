//! Placeholder while the kernel is written: reports itself unsupported.
//!
//! Must not: ship like this.

use super::{Coefficients, Engine, EngineKind, Mode};

/// Not yet available.
#[derive(Clone, Copy, Debug)]
pub struct Avx2(());

impl Avx2 {
    /// Always None for now.
    pub fn new() -> Option<Avx2> {
        None
    }
}

impl Engine for Avx2 {
    fn kind(&self) -> EngineKind {
        EngineKind::Avx2
    }
    fn combine_unchecked(&self, _: &Coefficients, _: &[&[u8]], _: &mut [&mut [u8]], _: Mode) {
        unreachable!()
    }
    fn mul_slice(&self, _: u8, _: &[u8], _: &mut [u8]) {
        unreachable!()
    }
    fn mul_add_slice(&self, _: u8, _: &[u8], _: &mut [u8]) {
        unreachable!()
    }
}
