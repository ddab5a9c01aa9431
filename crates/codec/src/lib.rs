//! lowtail's erasure codes: GF(2^8) slice kernels chosen at run time, and the
//! systematic Reed-Solomon and Azure-style LRC codes built on them.
//!
//! Owns: field arithmetic ([`gf`]), engines ([`engine`]), matrices, the codes
//! ([`Rs`], [`Lrc`], the [`ErasureCode`] trait) and their names ([`CodeSpec`]).
//!
//! Must not: depend on anything async, do I/O, or allocate per byte. Bad user
//! input is an error ([`CodecError`]), never a panic.

pub mod engine;
pub mod gf;

mod code;
mod error;
mod linear;
mod lrc;
mod matrix;
mod rs;
mod spec;

pub use code::ErasureCode;
pub use engine::{Engine, EngineKind};
pub use error::{CodecError, Result};
pub use lrc::Lrc;
pub use matrix::Matrix;
pub use rs::Rs;
pub use spec::{CodeSpec, MAX_TOTAL_UNITS};

/// `mutex` locked, poisoned or not: the codec's caches (decode plans, LRC offsets) hold complete
/// entries only, so a thread that panicked while holding one left nothing half-written.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
