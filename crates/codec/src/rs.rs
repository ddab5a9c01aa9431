//! Systematic Reed-Solomon RS(k, m) over GF(2^8): k data units, m parity
//! units, any m losses decode.
//!
//! Owns: the choice of generator matrix (identity over a column-scaled
//! Cauchy matrix) and the [`ErasureCode`] implementation, which delegates the
//! mechanics to the shared linear-code core.
//!
//! Must not: panic on user input, or change the generator without updating
//! the golden hashes in `tests/codes.rs` (stored parity depends on it).

use crate::code::ErasureCode;
use crate::engine::{self, Engine};
use crate::error::Result;
use crate::gf;
use crate::linear::{LinearCode, Scope};
use crate::matrix::Matrix;
use crate::spec::CodeSpec;
use std::fmt;

/// Systematic RS(k, m). The parity rows are the Cauchy matrix
/// `1 / (x_j + y_i)` with `x_j = k + j` (parity) and `y_i = i` (data), each
/// column scaled so that the first parity row is all ones: parity 0 is then
/// the XOR of the data, and since scaling columns scales every square
/// submatrix's determinant by a nonzero factor the code stays MDS.
pub struct Rs {
    k: usize,
    m: usize,
    core: LinearCode,
}

impl Rs {
    /// RS(k, m) on the fastest engine of this CPU ([`engine::best`]).
    pub fn new(k: usize, m: usize) -> Result<Rs> {
        Rs::with_engine(k, m, engine::best())
    }

    /// RS(k, m) on a chosen engine (tests and benchmarks compare engines).
    pub fn with_engine(k: usize, m: usize, engine: &'static dyn Engine) -> Result<Rs> {
        CodeSpec::Rs { k, m }.validate()?;
        Ok(Rs { k, m, core: LinearCode::new(generator(k, m), Vec::new(), true, engine) })
    }

    /// The (k + m) × k generator: unit i = row i · (data units).
    pub fn generator(&self) -> &Matrix {
        self.core.generator()
    }

    /// The engine every kernel call of this code goes to.
    pub fn engine(&self) -> &'static dyn Engine {
        self.core.engine()
    }
}

/// `[I; C·D]` with C the Cauchy matrix and D the diagonal that makes row 0 of C·D all ones.
fn generator(k: usize, m: usize) -> Matrix {
    debug_assert!(k >= 1 && m >= 1 && k + m <= 255, "validated by CodeSpec");
    let parity_points: Vec<u8> = (k..k + m).map(|x| x as u8).collect();
    let data_points: Vec<u8> = (0..k).map(|y| y as u8).collect();
    let cauchy = Matrix::cauchy(&parity_points, &data_points).expect("k + m ≤ 255 distinct points");
    let mut generator = Matrix::zero(k + m, k);
    for i in 0..k {
        generator.set(i, i, 1);
        let column_scale = gf::inv(cauchy.get(0, i));
        for j in 0..m {
            generator.set(k + j, i, gf::mul(cauchy.get(j, i), column_scale));
        }
    }
    generator
}

impl fmt::Debug for Rs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rs").field("k", &self.k).field("m", &self.m).field("engine", &self.engine().kind()).finish()
    }
}

impl ErasureCode for Rs {
    fn spec(&self) -> CodeSpec {
        CodeSpec::Rs { k: self.k, m: self.m }
    }

    fn encode(&self, data: &[&[u8]], parity: &mut [&mut [u8]]) -> Result<()> {
        self.core.encode(data, parity)
    }

    fn reconstruct(&self, units: &mut [&mut [u8]], present: &[bool]) -> Result<()> {
        self.core.reconstruct(units, present, Scope::AllUnits)
    }

    fn reconstruct_data(&self, units: &mut [&mut [u8]], present: &[bool]) -> Result<()> {
        self.core.reconstruct(units, present, Scope::DataOnly)
    }

    fn is_decodable(&self, present: &[bool]) -> bool {
        self.core.is_decodable(present)
    }

    /// MDS: any k units decode, so every unit beyond k may go.
    fn failures_tolerated(&self, present: &[bool]) -> Option<usize> {
        let alive = present.iter().filter(|p| **p).count();
        (present.len() == self.k + self.m && alive >= self.k).then(|| alive - self.k)
    }

    fn repair_coefficients(&self, target: usize, sources: &[usize]) -> Result<Vec<u8>> {
        self.core.repair_coefficients(target, sources)
    }

    /// Every k-subset of the other units rebuilds `unit` (MDS) and is minimal
    /// (k − 1 others and `unit` would be k independent rows). Listed with the
    /// most data units first, generated lazily up to `limit` (and at most
    /// 65,536 whatever the limit).
    fn recovery_sets(&self, unit: usize, limit: usize) -> Result<Vec<Vec<usize>>> {
        self.core.recovery_sets(unit, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_is_systematic_mds_with_xor_first_parity() {
        let rs = Rs::new(4, 3).unwrap();
        let g = rs.generator();
        assert_eq!(g.row(4), &[1, 1, 1, 1]);
        // MDS: every 4 of the 7 rows are independent.
        let mut pick = crate::linear::Combination::first(7, 4);
        while let Some(rows) = pick {
            assert_eq!(g.select_rows(rows.indices()).rank(), 4, "rows {:?}", rows.indices());
            pick = rows.next();
        }
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(Rs::new(0, 2).is_err());
        assert!(Rs::new(3, 0).is_err());
        assert!(Rs::new(250, 6).is_err());
        assert!(Rs::new(251, 4).is_ok());
    }

    #[test]
    fn one_lost_data_unit_is_one_output_over_k_sources() {
        let rs = Rs::new(6, 3).unwrap();
        let mut present = [true; 9];
        present[2] = false;
        let plan = rs.core.plan_shape_for_test(&present);
        assert_eq!(plan, vec![(vec![0, 1, 3, 4, 5, 6], vec![2])]);
    }
}
