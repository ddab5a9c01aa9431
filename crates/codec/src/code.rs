//! The [`ErasureCode`] trait: what every code of lowtail offers to the rest
//! of the system (encode, reconstruct, repair coefficients, recovery sets).
//!
//! Must not: assume a particular construction; RS and LRC both implement it.

use crate::error::Result;
use crate::spec::CodeSpec;

/// A systematic linear erasure code over GF(2^8). Units 0..k are data,
/// k..n parity. All methods validate their input and return an error
/// (writing nothing) on a bad one.
pub trait ErasureCode: Send + Sync {
    /// The code's specification.
    fn spec(&self) -> CodeSpec;

    /// Data units per stripe (k).
    fn data_units(&self) -> usize {
        self.spec().data_units()
    }

    /// Parity units per stripe.
    fn parity_units(&self) -> usize {
        self.spec().parity_units()
    }

    /// All units per stripe (n).
    fn total_units(&self) -> usize {
        self.spec().total_units()
    }

    /// Computes every parity unit from the k data units (all of one length).
    fn encode(&self, data: &[&[u8]], parity: &mut [&mut [u8]]) -> Result<()>;

    /// Rebuilds, in place, every unit whose `present` flag is false from the
    /// units whose flag is true. `units` holds all n units (lost ones are
    /// output buffers of the right length).
    fn reconstruct(&self, units: &mut [&mut [u8]], present: &[bool]) -> Result<()>;

    /// Like [`ErasureCode::reconstruct`] but rebuilds only lost data units
    /// (what a read needs); lost parity buffers are left untouched.
    fn reconstruct_data(&self, units: &mut [&mut [u8]], present: &[bool]) -> Result<()>;

    /// Whether the units flagged present determine all lost units.
    fn is_decodable(&self, present: &[bool]) -> bool;

    /// Coefficients c with unit_target = Σ_j c_j · unit_{sources[j]}, for
    /// partial (PPR) and pipelined (ECPipe, APLS) reconstruction. Fails when
    /// the sources do not determine the target.
    fn repair_coefficients(&self, target: usize, sources: &[usize]) -> Result<Vec<u8>>;

    /// Minimal sets of other units that rebuild `unit`, cheapest (fewest
    /// units; local before global) first, at most `limit` of them.
    fn recovery_sets(&self, unit: usize, limit: usize) -> Result<Vec<Vec<usize>>>;
}
