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

    /// How many more units may be lost, whichever they are, while the units flagged present still
    /// determine every unit: the largest f such that every set of f present units can go. `None`
    /// when the present units do not decode now. An MDS code tolerates (present − k); other codes
    /// are checked set by set (at most n − k + 1 losses deep, so the search stays small).
    fn failures_tolerated(&self, present: &[bool]) -> Option<usize> {
        if present.len() != self.total_units() || !self.is_decodable(present) {
            return None;
        }
        let alive: Vec<usize> = (0..present.len()).filter(|&unit| present[unit]).collect();
        let most = alive.len().saturating_sub(self.data_units());
        (1..=most)
            .find(|&f| !every_loss_of(f, &alive, present, |left| self.is_decodable(left)))
            .map_or(Some(most), |f| Some(f - 1))
    }

    /// Coefficients c with unit_target = Σ_j c_j · unit_{sources[j]}, for
    /// partial (PPR) and pipelined (ECPipe, APLS) reconstruction. Fails when
    /// the sources do not determine the target.
    fn repair_coefficients(&self, target: usize, sources: &[usize]) -> Result<Vec<u8>>;

    /// Minimal sets of other units that rebuild `unit`, cheapest (fewest
    /// units; local before global) first, at most `limit` of them.
    fn recovery_sets(&self, unit: usize, limit: usize) -> Result<Vec<Vec<usize>>>;
}

/// Whether `decodes` holds after every loss of `count` units of `alive` from `present`.
fn every_loss_of(count: usize, alive: &[usize], present: &[bool], decodes: impl Fn(&[bool]) -> bool) -> bool {
    // Lexicographic walk over the `count`-subsets of `alive` (indexes into it, ascending).
    let mut chosen: Vec<usize> = (0..count).collect();
    let mut left = present.to_vec();
    loop {
        chosen.iter().for_each(|&i| left[alive[i]] = false);
        let decodable = decodes(&left);
        chosen.iter().for_each(|&i| left[alive[i]] = true);
        if !decodable {
            return false;
        }
        // The rightmost index that can still move right, moved, and the ones after it packed behind.
        let Some(slot) = (0..count).rev().find(|&slot| chosen[slot] < alive.len() - count + slot) else {
            return true;
        };
        chosen[slot] += 1;
        for next in slot + 1..count {
            chosen[next] = chosen[next - 1] + 1;
        }
    }
}
