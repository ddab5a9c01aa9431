//! Dense matrices over GF(2^8): the linear algebra every code is built from.
//!
//! Owns: construction (identity, Cauchy, Vandermonde), products, row
//! selection, Gauss-Jordan inversion, rank, and solving `x · A = b` (which
//! expresses one unit as a combination of others, for repair coefficients).
//!
//! Must not: touch data units (engines do that), or know about codes. A
//! singular matrix or an unsolvable system is a normal outcome (`None`), not
//! an error; mismatched shapes are bugs in the caller and panic, as slice
//! indexing does.

use crate::gf;
use std::fmt;

/// A `rows × cols` matrix over GF(2^8), stored row-major.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Matrix {
    rows: usize,
    cols: usize,
    values: Vec<u8>,
}

impl Matrix {
    /// The all-zero `rows × cols` matrix.
    pub fn zero(rows: usize, cols: usize) -> Matrix {
        Matrix { rows, cols, values: vec![0; rows * cols] }
    }

    /// The `size × size` identity.
    pub fn identity(size: usize) -> Matrix {
        let mut matrix = Matrix::zero(size, size);
        for i in 0..size {
            matrix.set(i, i, 1);
        }
        matrix
    }

    /// A matrix from row-major values; `None` when `values.len() != rows * cols`.
    pub fn from_row_major(rows: usize, cols: usize, values: Vec<u8>) -> Option<Matrix> {
        (rows.checked_mul(cols) == Some(values.len())).then_some(Matrix { rows, cols, values })
    }

    /// The Cauchy matrix `a_ij = 1 / (x_i + y_j)`. Every square submatrix of
    /// it is invertible, which is what makes `[I; C]` an MDS generator.
    /// `None` unless the points are pairwise distinct (all x and y together).
    pub fn cauchy(row_points: &[u8], col_points: &[u8]) -> Option<Matrix> {
        let mut seen = [false; 256];
        for &point in row_points.iter().chain(col_points) {
            if std::mem::replace(&mut seen[point as usize], true) {
                return None;
            }
        }
        let mut matrix = Matrix::zero(row_points.len(), col_points.len());
        for (i, &x) in row_points.iter().enumerate() {
            for (j, &y) in col_points.iter().enumerate() {
                // x != y was checked above, so x + y (XOR) is never zero.
                matrix.set(i, j, gf::inv(x ^ y));
            }
        }
        Some(matrix)
    }

    /// The Vandermonde matrix `a_ij = i^j` (row i evaluates the monomials at
    /// the field element i; `0^0 = 1`). `None` when `rows > 256`, as the
    /// field has only 256 distinct points.
    pub fn vandermonde(rows: usize, cols: usize) -> Option<Matrix> {
        if rows > 256 {
            return None;
        }
        let mut matrix = Matrix::zero(rows, cols);
        for i in 0..rows {
            let mut power = 1u8;
            for j in 0..cols {
                matrix.set(i, j, power);
                power = gf::mul(power, i as u8);
            }
        }
        Some(matrix)
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Entry (row, col). Panics when out of range.
    pub fn get(&self, row: usize, col: usize) -> u8 {
        assert!(row < self.rows && col < self.cols, "matrix index ({row}, {col}) out of range");
        self.values[row * self.cols + col]
    }

    /// Sets entry (row, col). Panics when out of range.
    pub fn set(&mut self, row: usize, col: usize, value: u8) {
        assert!(row < self.rows && col < self.cols, "matrix index ({row}, {col}) out of range");
        self.values[row * self.cols + col] = value;
    }

    /// One row. Panics when out of range.
    pub fn row(&self, row: usize) -> &[u8] {
        assert!(row < self.rows, "matrix row {row} out of range");
        &self.values[row * self.cols..(row + 1) * self.cols]
    }

    /// All entries, row-major.
    pub fn values(&self) -> &[u8] {
        &self.values
    }

    /// All entries, row-major, by value.
    pub fn into_values(self) -> Vec<u8> {
        self.values
    }

    /// The product `self · rhs`. Panics unless `self.cols() == rhs.rows()`.
    pub fn mul(&self, rhs: &Matrix) -> Matrix {
        assert_eq!(self.cols, rhs.rows, "matrix product of {}x{} by {}x{}", self.rows, self.cols, rhs.rows, rhs.cols);
        let mut product = Matrix::zero(self.rows, rhs.cols);
        for i in 0..self.rows {
            let out = &mut product.values[i * rhs.cols..(i + 1) * rhs.cols];
            for (inner, &factor) in self.row(i).iter().enumerate() {
                add_scaled(out, rhs.row(inner), factor);
            }
        }
        product
    }

    /// The row vector `x · self` (length `cols`). Panics unless `x.len() == rows()`.
    pub fn mul_row_vector(&self, x: &[u8]) -> Vec<u8> {
        assert_eq!(x.len(), self.rows, "row vector length");
        let mut out = vec![0u8; self.cols];
        for (i, &factor) in x.iter().enumerate() {
            add_scaled(&mut out, self.row(i), factor);
        }
        out
    }

    /// The matrix made of the listed rows, in the order listed (repeats
    /// allowed). Panics when an index is out of range.
    pub fn select_rows(&self, rows: &[usize]) -> Matrix {
        let mut values = Vec::with_capacity(rows.len() * self.cols);
        for &row in rows {
            values.extend_from_slice(self.row(row));
        }
        Matrix { rows: rows.len(), cols: self.cols, values }
    }

    /// The transpose.
    pub fn transpose(&self) -> Matrix {
        let mut out = Matrix::zero(self.cols, self.rows);
        for i in 0..self.rows {
            for j in 0..self.cols {
                out.values[j * self.rows + i] = self.values[i * self.cols + j];
            }
        }
        out
    }

    /// The inverse by Gauss-Jordan elimination; `None` when the matrix is
    /// singular or not square.
    pub fn inverse(&self) -> Option<Matrix> {
        if self.rows != self.cols {
            return None;
        }
        let size = self.rows;
        // [A | I] reduced to [I | A^-1].
        let mut augmented = Matrix::zero(size, 2 * size);
        for i in 0..size {
            augmented.values[i * 2 * size..i * 2 * size + size].copy_from_slice(self.row(i));
            augmented.values[i * 2 * size + size + i] = 1;
        }
        let pivots = augmented.reduce(size);
        if pivots.len() < size {
            return None;
        }
        debug_assert!(pivots.iter().enumerate().all(|(row, &col)| row == col), "full-rank RREF is the identity");
        let mut inverse = Matrix::zero(size, size);
        for i in 0..size {
            inverse.values[i * size..(i + 1) * size].copy_from_slice(&augmented.row(i)[size..]);
        }
        Some(inverse)
    }

    /// The rank (dimension of the row space).
    pub fn rank(&self) -> usize {
        self.clone().reduce(self.cols).len()
    }

    /// Some `x` with `x · self = target`, i.e. `target` written as a
    /// combination of the rows of `self`; `None` when `target` is not in the
    /// row space. When the rows are dependent, free coefficients are zero, so
    /// earlier rows are preferred. Panics unless `target.len() == cols()`.
    pub fn solve_left(&self, target: &[u8]) -> Option<Vec<u8>> {
        assert_eq!(target.len(), self.cols, "target length");
        // x · A = b  ⇔  Aᵀ · xᵀ = bᵀ: reduce [Aᵀ | bᵀ] and read x off the pivots.
        let unknowns = self.rows;
        let mut system = Matrix::zero(self.cols, unknowns + 1);
        for (j, equation) in system.values.chunks_exact_mut(unknowns + 1).enumerate() {
            for (i, coefficient) in equation[..unknowns].iter_mut().enumerate() {
                *coefficient = self.values[i * self.cols + j];
            }
            equation[unknowns] = target[j];
        }
        let pivots = system.reduce(unknowns);
        // Rows below the rank are zero on the unknowns; a nonzero right-hand side there is 0 = c ≠ 0.
        if (pivots.len()..system.rows).any(|row| system.get(row, unknowns) != 0) {
            return None;
        }
        let mut solution = vec![0u8; unknowns];
        for (row, &col) in pivots.iter().enumerate() {
            solution[col] = system.get(row, unknowns);
        }
        debug_assert_eq!(self.mul_row_vector(&solution), target, "solve_left produced a wrong solution");
        Some(solution)
    }

    /// Reduces `self` in place to reduced row echelon form, choosing pivots
    /// only among the first `pivot_cols` columns (the rest is an augmented
    /// part that just follows the row operations). Returns the pivot column
    /// of each of the first `rank` rows.
    fn reduce(&mut self, pivot_cols: usize) -> Vec<usize> {
        debug_assert!(pivot_cols <= self.cols);
        let cols = self.cols;
        let mut pivots = Vec::with_capacity(pivot_cols.min(self.rows));
        for col in 0..pivot_cols {
            let rank = pivots.len();
            if rank == self.rows {
                break;
            }
            let Some(found) = (rank..self.rows).find(|&row| self.values[row * cols + col] != 0) else {
                continue;
            };
            if found != rank {
                for j in 0..cols {
                    self.values.swap(rank * cols + j, found * cols + j);
                }
            }
            let scale = gf::inv(self.values[rank * cols + col]);
            let scale_row = &gf::MUL_TABLE[scale as usize];
            for value in &mut self.values[rank * cols..(rank + 1) * cols] {
                *value = scale_row[*value as usize];
            }
            let (before, rest) = self.values.split_at_mut(rank * cols);
            let (pivot_row, after) = rest.split_at_mut(cols);
            for other in before.chunks_exact_mut(cols).chain(after.chunks_exact_mut(cols)) {
                let factor = other[col];
                add_scaled(other, pivot_row, factor);
            }
            pivots.push(col);
        }
        pivots
    }
}

impl fmt::Debug for Matrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Matrix {}x{} [", self.rows, self.cols)?;
        for i in 0..self.rows {
            write!(f, " ")?;
            for value in self.row(i) {
                write!(f, " {value:02x}")?;
            }
            writeln!(f)?;
        }
        write!(f, "]")
    }
}

/// `dst += factor · src` over GF(2^8).
fn add_scaled(dst: &mut [u8], src: &[u8], factor: u8) {
    debug_assert_eq!(dst.len(), src.len());
    if factor == 0 {
        return;
    }
    let factor_row = &gf::MUL_TABLE[factor as usize];
    for (d, &s) in dst.iter_mut().zip(src) {
        *d ^= factor_row[s as usize];
    }
}

/// A growing set of linearly independent rows in echelon form, for choosing
/// independent rows greedily (decode sources) and testing span membership
/// without rebuilding a matrix each time.
pub(crate) struct RowBasis {
    cols: usize,
    /// (pivot column, row with a 1 there and zeros at every earlier row's pivot).
    rows: Vec<(usize, Vec<u8>)>,
}

impl RowBasis {
    pub(crate) fn new(cols: usize) -> RowBasis {
        RowBasis { cols, rows: Vec::with_capacity(cols) }
    }

    /// Dimension of the span so far.
    pub(crate) fn rank(&self) -> usize {
        self.rows.len()
    }

    /// `row` minus its projection on the basis; zero iff `row` is in the span.
    fn residue(&self, row: &[u8]) -> Vec<u8> {
        assert_eq!(row.len(), self.cols, "row length");
        let mut residue = row.to_vec();
        // In insertion order: each basis row is zero at the pivots of the rows
        // before it, so clearing a pivot never disturbs one cleared earlier.
        for (pivot, basis_row) in &self.rows {
            let factor = residue[*pivot];
            add_scaled(&mut residue, basis_row, factor);
        }
        residue
    }

    /// Whether `row` is a combination of the rows inserted so far.
    pub(crate) fn contains(&self, row: &[u8]) -> bool {
        self.residue(row).iter().all(|&v| v == 0)
    }

    /// Adds `row` if it is independent of the basis; returns whether it was.
    pub(crate) fn insert(&mut self, row: &[u8]) -> bool {
        let mut residue = self.residue(row);
        let Some(pivot) = residue.iter().position(|&v| v != 0) else {
            return false;
        };
        let scale_row = &gf::MUL_TABLE[gf::inv(residue[pivot]) as usize];
        for value in &mut residue {
            *value = scale_row[*value as usize];
        }
        self.rows.push((pivot, residue));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pseudo_random(rows: usize, cols: usize, seed: u32) -> Matrix {
        // A small LCG is enough to get varied matrices without a dependency here.
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        let values = (0..rows * cols)
            .map(|_| {
                state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (state >> 16) as u8
            })
            .collect();
        Matrix::from_row_major(rows, cols, values).unwrap()
    }

    #[test]
    fn identity_is_neutral_and_its_own_inverse() {
        let a = pseudo_random(4, 4, 7);
        assert_eq!(Matrix::identity(4).mul(&a), a);
        assert_eq!(a.mul(&Matrix::identity(4)), a);
        assert_eq!(Matrix::identity(5).inverse().unwrap(), Matrix::identity(5));
    }

    #[test]
    fn inverse_of_invertible_matrices() {
        let mut inverted = 0;
        for seed in 0..50 {
            let a = pseudo_random(6, 6, seed);
            match a.inverse() {
                Some(inv) => {
                    assert_eq!(a.mul(&inv), Matrix::identity(6));
                    assert_eq!(inv.mul(&a), Matrix::identity(6));
                    assert_eq!(a.rank(), 6);
                    inverted += 1;
                }
                None => assert!(a.rank() < 6),
            }
        }
        assert!(inverted > 40, "random 6x6 matrices over GF(256) are almost always invertible");
    }

    #[test]
    fn singular_and_non_square_matrices_have_no_inverse() {
        let mut a = pseudo_random(4, 4, 3);
        let row1 = a.row(1).to_vec();
        for (j, v) in row1.iter().enumerate() {
            a.set(2, j, gf::mul(*v, 9));
        }
        assert_eq!(a.inverse(), None);
        assert_eq!(a.rank(), 3);
        assert_eq!(pseudo_random(3, 4, 1).inverse(), None);
        assert_eq!(Matrix::zero(3, 3).rank(), 0);
    }

    #[test]
    fn cauchy_square_submatrices_are_invertible() {
        let c = Matrix::cauchy(&[10, 11, 12], &[0, 1, 2, 3, 4]).unwrap();
        for a in 0..5 {
            for b in a + 1..5 {
                for (r0, r1) in [(0, 1), (0, 2), (1, 2)] {
                    let sub =
                        Matrix::from_row_major(2, 2, vec![c.get(r0, a), c.get(r0, b), c.get(r1, a), c.get(r1, b)])
                            .unwrap();
                    assert!(sub.inverse().is_some());
                }
            }
        }
        assert_eq!(Matrix::cauchy(&[1, 2], &[2, 3]), None, "shared point");
        assert_eq!(Matrix::cauchy(&[1, 1], &[2, 3]), None, "repeated point");
    }

    #[test]
    fn vandermonde_rows_are_powers() {
        let v = Matrix::vandermonde(5, 4).unwrap();
        assert_eq!(v.row(0), &[1, 0, 0, 0]);
        assert_eq!(v.row(1), &[1, 1, 1, 1]);
        assert_eq!(v.row(3), &[1, 3, gf::mul(3, 3), gf::mul(3, gf::mul(3, 3))]);
        assert_eq!(v.rank(), 4);
        assert!(Matrix::vandermonde(257, 2).is_none());
    }

    #[test]
    fn solve_left_finds_combinations_and_refuses_outsiders() {
        let a = pseudo_random(3, 6, 11);
        let x = [5u8, 0, 77];
        let b = a.mul_row_vector(&x);
        let solved = a.solve_left(&b).unwrap();
        assert_eq!(a.mul_row_vector(&solved), b);
        // With independent rows the solution is unique.
        assert_eq!(solved, x);
        // Dependent rows: some solution, free coefficients zero.
        let dependent = a.select_rows(&[0, 1, 0, 2]);
        let solved = dependent.solve_left(&b).unwrap();
        assert_eq!(dependent.mul_row_vector(&solved), b);
        // A vector outside a 3-dimensional row space of a 6-dimensional space.
        let mut outside = vec![0u8; 6];
        for j in 0..6 {
            outside[j] = 1;
            if a.solve_left(&outside).is_none() {
                return;
            }
            outside[j] = 0;
        }
        panic!("every unit vector was in a 3-dimensional row space");
    }

    #[test]
    fn transpose_and_select_rows() {
        let a = pseudo_random(3, 5, 2);
        assert_eq!(a.transpose().transpose(), a);
        assert_eq!(a.transpose().get(4, 1), a.get(1, 4));
        let picked = a.select_rows(&[2, 0]);
        assert_eq!(picked.row(0), a.row(2));
        assert_eq!(picked.row(1), a.row(0));
        assert_eq!(Matrix::from_row_major(2, 2, vec![1, 2, 3]), None);
    }

    #[test]
    fn row_basis_tracks_span() {
        let a = pseudo_random(3, 5, 9);
        let mut basis = RowBasis::new(5);
        assert!(basis.insert(a.row(0)));
        assert!(basis.insert(a.row(1)));
        assert!(!basis.insert(&a.mul_row_vector(&[3, 4, 0])));
        assert!(basis.contains(&a.mul_row_vector(&[0, 9, 0])));
        assert_eq!(basis.contains(a.row(2)), a.rank() == 2);
        assert_eq!(basis.rank(), 2);
    }
}
