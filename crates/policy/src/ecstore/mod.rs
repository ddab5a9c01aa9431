//! EC-Store's policies (Abebe et al.): access planning for reads of several blocks ([`access`])
//! and the statistics its chunk mover reads ([`coaccess`]).
//!
//! Must not: do I/O or read a clock (the callers hand in what they observed and a seeded random
//! source).

pub mod access;
pub mod coaccess;
pub mod mover;
#[cfg(test)]
mod test_view;
