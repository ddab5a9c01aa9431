//! The Hungarian method (Kuhn–Munkres, in the O(n³) shortest-augmenting-path form with dual
//! potentials of Jonker–Volgenant and e-maxx): a minimum-cost perfect assignment of rows to
//! columns of a square matrix of f64 costs. JLWO's placement step (Lemma 5) calls it once per file
//! on an N×N matrix: chunk columns (with the empty ones) × racks.
//!
//! Owns: exact assignment on plain f64 matrices; +∞ marks a forbidden pair. Must not: accept NaN
//! or −∞ (they have no order to minimise), or loop unbounded: each row's search visits each column
//! at most once, and each augmentation walks at most n columns back.

use thiserror::Error;

/// Why no assignment was returned.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum AssignmentError {
    /// Every perfect assignment uses a forbidden (+∞) entry.
    #[error("every assignment uses a forbidden (+inf) entry")]
    Infeasible,
    /// A cost is NaN or −∞.
    #[error("cost at row {row}, column {column} is {value}: costs must be finite or +inf")]
    InvalidCost {
        /// Row of the entry.
        row: usize,
        /// Column of the entry.
        column: usize,
        /// The entry.
        value: f64,
    },
    /// The matrix has not size² entries.
    #[error("{entries} costs do not make a {size}×{size} matrix")]
    NotSquare {
        /// Entries given.
        entries: usize,
        /// Side asked for.
        size: usize,
    },
}

/// A perfect assignment and its cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    /// `columns[row]`: the column assigned to `row`; a permutation of 0..size.
    pub columns: Vec<usize>,
    /// Σ_row costs\[row\]\[columns\[row\]\].
    pub cost: f64,
}

/// Reusable buffers, so the placement step does not allocate per file.
#[derive(Clone, Debug, Default)]
pub(crate) struct Workspace {
    row_potential: Vec<f64>,
    column_potential: Vec<f64>,
    /// `row_of_column[j]`: the row matched to column j (1-based; 0 = none); j = 0 is a sentinel.
    row_of_column: Vec<usize>,
    previous_column: Vec<usize>,
    slack: Vec<f64>,
    visited: Vec<bool>,
}

/// The minimum-cost perfect assignment of the `size`×`size` matrix `costs` (row-major).
pub fn min_cost_assignment(costs: &[f64], size: usize) -> Result<Assignment, AssignmentError> {
    let mut workspace = Workspace::default();
    let mut columns = vec![0; size];
    let cost = assign(costs, size, &mut workspace, &mut columns)?;
    Ok(Assignment { columns, cost })
}

/// [`min_cost_assignment`] into `columns` with reused buffers; returns the cost.
pub(crate) fn assign(
    costs: &[f64],
    size: usize,
    workspace: &mut Workspace,
    columns: &mut [usize],
) -> Result<f64, AssignmentError> {
    if costs.len() != size * size {
        return Err(AssignmentError::NotSquare { entries: costs.len(), size });
    }
    if let Some(position) = costs.iter().position(|c| c.is_nan() || *c == f64::NEG_INFINITY) {
        return Err(AssignmentError::InvalidCost {
            row: position / size,
            column: position % size,
            value: costs[position],
        });
    }
    assert_eq!(columns.len(), size, "one column per row");
    let Workspace { row_potential, column_potential, row_of_column, previous_column, slack, visited } = workspace;
    // Index 0 of every array is the sentinel of the 1-based formulation.
    for buffer in [&mut *row_potential, &mut *column_potential] {
        buffer.clear();
        buffer.resize(size + 1, 0.0);
    }
    for buffer in [&mut *row_of_column, &mut *previous_column] {
        buffer.clear();
        buffer.resize(size + 1, 0);
    }
    let cost_at = |row: usize, column: usize| costs[(row - 1) * size + (column - 1)];
    for row in 1..=size {
        // Dijkstra over columns with reduced costs, from the free row `row`, until a free
        // column is reached; the potentials keep reduced costs non-negative.
        row_of_column[0] = row;
        let mut column0 = 0;
        slack.clear();
        slack.resize(size + 1, f64::INFINITY);
        visited.clear();
        visited.resize(size + 1, false);
        let mut reached_free_column = false;
        // Each pass visits one more column: at most size + 1 passes.
        for _ in 0..=size {
            visited[column0] = true;
            let row0 = row_of_column[column0];
            let mut delta = f64::INFINITY;
            let mut column1 = 0;
            for column in 1..=size {
                if visited[column] {
                    continue;
                }
                let reduced = cost_at(row0, column) - row_potential[row0] - column_potential[column];
                if reduced < slack[column] {
                    slack[column] = reduced;
                    previous_column[column] = column0;
                }
                if slack[column] < delta {
                    delta = slack[column];
                    column1 = column;
                }
            }
            if delta == f64::INFINITY {
                // No finite edge leaves the visited rows: no augmenting path, so (Berge) no
                // perfect matching avoids the forbidden entries.
                return Err(AssignmentError::Infeasible);
            }
            for column in 0..=size {
                if visited[column] {
                    row_potential[row_of_column[column]] += delta;
                    column_potential[column] -= delta;
                } else {
                    slack[column] -= delta;
                }
            }
            column0 = column1;
            if row_of_column[column0] == 0 {
                reached_free_column = true;
                break;
            }
        }
        assert!(reached_free_column, "a row's search visits each column once");
        // Augment along the alternating path back to the sentinel: at most size steps.
        for _ in 0..=size {
            let column1 = previous_column[column0];
            row_of_column[column0] = row_of_column[column1];
            column0 = column1;
            if column0 == 0 {
                break;
            }
        }
        debug_assert_eq!(column0, 0, "an augmenting path ends at the sentinel");
    }
    let mut total = 0.0;
    for (column, &row) in row_of_column.iter().enumerate().skip(1) {
        columns[row - 1] = column - 1;
        total += cost_at(row, column);
    }
    Ok(total)
}
