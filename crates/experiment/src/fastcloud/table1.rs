//! Table I of FAST CLOUD (section V-D): how far the model's delay D̃ = D_s + D̃_q is from the
//! simulated mean, |D_sim − D̃| / D̃, as a range over λ from 0.1 to 0.9 of the model's capacity, for
//! k = 3, n ∈ {3, 6}, L ∈ {16, 64}, blocking and non-blocking, and four shares Δ/(Δ + 1/μ). The
//! table depends only on published quantities (its errors are scale-free), so every cell is
//! reproduced and set beside the paper's.
//!
//! Must not: tune anything per cell.

use optimize::fec_model::{Admission, DelayModel, FecClass};
use serde::Serialize;

/// Shares Δ/(Δ + 1/μ) of the table's rows.
pub const SHIFT_SHARES: [f64; 4] = [0.2, 0.4, 0.6, 0.8];
/// Loads λ/C̃ of each cell's range.
pub const LOADS: [f64; 5] = [0.1, 0.3, 0.5, 0.7, 0.9];
/// The mean task delay Δ + 1/μ the cells run at (the errors do not depend on it).
const MEAN_DELAY_S: f64 = 0.1;

/// The table's columns: (admission, L, n).
pub const COLUMNS: [(Admission, usize, usize); 8] = [
    (Admission::Blocking, 16, 3),
    (Admission::Blocking, 16, 6),
    (Admission::Blocking, 64, 3),
    (Admission::Blocking, 64, 6),
    (Admission::NonBlocking, 16, 3),
    (Admission::NonBlocking, 16, 6),
    (Admission::NonBlocking, 64, 3),
    (Admission::NonBlocking, 64, 6),
];

/// The paper's Table I, percent, [row][column] as (low end, high end).
pub const PAPER: [[(f64, f64); 8]; 4] = [
    [(1.0, 11.4), (2.0, 20.6), (0.3, 6.1), (0.5, 8.6), (0.9, 11.1), (1.8, 8.5), (0.3, 7.4), (0.5, 8.4)],
    [(1.0, 13.4), (0.8, 7.9), (0.3, 7.8), (0.5, 9.5), (1.0, 13.1), (1.9, 11.0), (0.3, 8.2), (0.5, 9.5)],
    [(1.2, 15.5), (1.9, 63.2), (0.3, 9.6), (0.6, 11.7), (1.1, 15.0), (2.0, 16.8), (0.3, 9.0), (0.5, 10.4)],
    [(1.3, 18.0), (1.0, 339.3), (0.4, 11.6), (0.6, 10.5), (1.2, 16.4), (2.1, 29.2), (0.3, 10.0), (0.6, 11.0)],
];

/// The model class of one cell.
pub fn cell_class(row: usize, column: usize) -> FecClass {
    let share = SHIFT_SHARES[row];
    let (admission, slots, _) = COLUMNS[column];
    let delay = DelayModel::new(share * MEAN_DELAY_S, (1.0 - share) * MEAN_DELAY_S).expect("0 < share < 1");
    FecClass { delay, k: 3, slots, admission }
}

/// One reproduced cell.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cell {
    /// Δ/(Δ + 1/μ).
    pub shift_share: f64,
    /// "blocking" or "non-blocking".
    pub admission: &'static str,
    /// L.
    pub slots: usize,
    /// n (k = 3).
    pub n: usize,
    /// |D_sim − D̃| / D̃ in percent at each load of [`LOADS`] (D_sim averaged over the seeds).
    pub error_pct: Vec<f64>,
    /// The smallest and largest of them.
    pub low_pct: f64,
    /// The largest.
    pub high_pct: f64,
    /// The paper's range.
    pub paper_low_pct: f64,
    /// The paper's high end.
    pub paper_high_pct: f64,
}

/// The cell at `row`, `column` from the simulated mean delays (seconds) at each load.
pub fn cell(row: usize, column: usize, simulated_means_s: &[f64]) -> Cell {
    let class = cell_class(row, column);
    let (admission, slots, n) = COLUMNS[column];
    let error_pct: Vec<f64> = LOADS
        .iter()
        .zip(simulated_means_s)
        .map(|(&load, &simulated)| {
            let model = class.delay_s(n, load * class.capacity_per_s(n));
            (simulated - model).abs() / model * 100.0
        })
        .collect();
    let low_pct = error_pct.iter().copied().fold(f64::INFINITY, f64::min);
    let high_pct = error_pct.iter().copied().fold(0.0, f64::max);
    let (paper_low_pct, paper_high_pct) = PAPER[row][column];
    Cell {
        shift_share: SHIFT_SHARES[row],
        admission: match admission {
            Admission::Blocking => "blocking",
            Admission::NonBlocking => "non-blocking",
        },
        slots,
        n,
        error_pct,
        low_pct,
        high_pct,
        paper_low_pct,
        paper_high_pct,
    }
}

/// The table as Markdown, each cell "lowtail [paper]".
pub fn markdown(cells: &[Cell]) -> String {
    let mut text = String::from("| Δ/(Δ+1/μ) |");
    for (admission, slots, n) in COLUMNS {
        let rule = if admission == Admission::Blocking { "B" } else { "NB" };
        text += &format!(" {rule} L{slots} n{n} |");
    }
    text += "\n|---|";
    text += &"---|".repeat(COLUMNS.len());
    for (row, share) in SHIFT_SHARES.iter().enumerate() {
        text += &format!("\n| {share} |");
        for cell in &cells[row * COLUMNS.len()..(row + 1) * COLUMNS.len()] {
            text += &format!(
                " {:.1}–{:.1} [{:.1}–{:.1}] |",
                cell.low_pct, cell.high_pct, cell.paper_low_pct, cell.paper_high_pct
            );
        }
    }
    text + "\n"
}
