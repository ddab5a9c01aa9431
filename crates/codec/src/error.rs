//! Errors of the codec crate. Every bad input to a code is one of these;
//! nothing in the codec panics on user input.
//!
//! Must not: carry data buffers (errors are cheap to build and to log).

use thiserror::Error;

/// What went wrong in a code operation. Nothing was written when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    /// Code parameters out of range (k = 0, k + m > 255, l not dividing k, ...).
    #[error("invalid code parameters: {0}")]
    InvalidParameters(String),
    /// A code name that does not parse (`rs-6-3`, `lrc-6-2-2` are valid).
    #[error("invalid code name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// Why it was refused.
        reason: String,
    },
    /// The wrong number of units was passed.
    #[error("expected {expected} {what}, got {got}")]
    UnitCount {
        /// Which list ("data units", "parity units", "units", "presence flags", ...).
        what: &'static str,
        /// How many the code needs.
        expected: usize,
        /// How many were given.
        got: usize,
    },
    /// Units of different lengths were passed together.
    #[error("unit {index} is {got} bytes, expected {expected} like unit 0")]
    UnitLength {
        /// Index of the first unit whose length differs.
        index: usize,
        /// Length of unit 0.
        expected: usize,
        /// Length of the offending unit.
        got: usize,
    },
    /// A unit index outside `0..n`.
    #[error("unit {unit} is out of range for a code of {total} units")]
    UnitOutOfRange {
        /// The index given.
        unit: usize,
        /// Units in the code.
        total: usize,
    },
    /// A unit index listed twice where distinct units are needed.
    #[error("unit {unit} is listed more than once")]
    DuplicateUnit {
        /// The repeated index.
        unit: usize,
    },
    /// More units are lost than the code can ever correct.
    #[error("{lost} units lost, the code corrects at most {max}")]
    TooManyLosses {
        /// Units lost.
        lost: usize,
        /// Most the code corrects in any pattern.
        max: usize,
    },
    /// The surviving units do not determine the lost ones (possible for LRC
    /// within its loss limit, and for `repair_coefficients` with a poor source set).
    #[error("units {lost:?} cannot be rebuilt from the units available")]
    Undecodable {
        /// The units that cannot be rebuilt.
        lost: Vec<usize>,
    },
}

/// Result alias of the codec crate.
pub type Result<T> = std::result::Result<T, CodecError>;
