//! Code specifications: which code, with which parameters, and its canonical
//! name (`rs-6-3`, `lrc-6-2-2`) as used in configs, CLIs and reports.
//!
//! Must not: hold matrices or tables (see [`crate::Rs`] and [`crate::Lrc`]).

use crate::error::{CodecError, Result};
use crate::{ErasureCode, Lrc, Rs};
use std::fmt;
use std::str::FromStr;

/// The most units (data + parity) a GF(2^8) code of lowtail can have.
pub const MAX_TOTAL_UNITS: usize = 255;

/// A code and its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CodeSpec {
    /// Systematic Reed-Solomon: k data units, m parity units, any m losses.
    Rs {
        /// Data units.
        k: usize,
        /// Parity units.
        m: usize,
    },
    /// Azure-style local reconstruction code: k data units in l local groups
    /// (one local parity each) and r global parities.
    Lrc {
        /// Data units.
        k: usize,
        /// Local groups (and local parities).
        l: usize,
        /// Global parities.
        r: usize,
    },
}

impl CodeSpec {
    /// Data units (k).
    pub fn data_units(&self) -> usize {
        match *self {
            CodeSpec::Rs { k, .. } | CodeSpec::Lrc { k, .. } => k,
        }
    }

    /// Parity units (m, or l + r).
    pub fn parity_units(&self) -> usize {
        match *self {
            CodeSpec::Rs { m, .. } => m,
            CodeSpec::Lrc { l, r, .. } => l + r,
        }
    }

    /// All units of a stripe.
    pub fn total_units(&self) -> usize {
        self.data_units() + self.parity_units()
    }

    /// Checks the parameters without building anything.
    pub fn validate(&self) -> Result<()> {
        let invalid = |msg: String| Err(CodecError::InvalidParameters(msg));
        match *self {
            CodeSpec::Rs { k, m } => {
                if k == 0 || m == 0 {
                    return invalid(format!("RS({k},{m}): k and m must be at least 1"));
                }
                if k + m > MAX_TOTAL_UNITS {
                    return invalid(format!("RS({k},{m}): k + m must be at most {MAX_TOTAL_UNITS}"));
                }
            }
            CodeSpec::Lrc { k, l, r } => {
                if k == 0 || l == 0 {
                    return invalid(format!("LRC({k},{l},{r}): k and l must be at least 1"));
                }
                if k % l != 0 {
                    return invalid(format!("LRC({k},{l},{r}): l must divide k into equal local groups"));
                }
                if k + l + r > MAX_TOTAL_UNITS {
                    return invalid(format!("LRC({k},{l},{r}): k + l + r must be at most {MAX_TOTAL_UNITS}"));
                }
            }
        }
        Ok(())
    }

    /// Builds the code (matrices and prepared kernels).
    pub fn build(&self) -> Result<Box<dyn ErasureCode>> {
        Ok(match *self {
            CodeSpec::Rs { k, m } => Box::new(Rs::new(k, m)?),
            CodeSpec::Lrc { k, l, r } => Box::new(Lrc::new(k, l, r)?),
        })
    }
}

impl fmt::Display for CodeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CodeSpec::Rs { k, m } => write!(f, "rs-{k}-{m}"),
            CodeSpec::Lrc { k, l, r } => write!(f, "lrc-{k}-{l}-{r}"),
        }
    }
}

impl FromStr for CodeSpec {
    type Err = CodecError;

    fn from_str(name: &str) -> Result<CodeSpec> {
        let refuse = |reason: &str| CodecError::InvalidName { name: name.to_string(), reason: reason.to_string() };
        let lower = name.trim().to_ascii_lowercase();
        let mut parts = lower.split(['-', '(', ')', ',']).filter(|p| !p.is_empty());
        let family = parts.next().ok_or_else(|| refuse("empty"))?;
        let numbers = parts
            .map(|p| p.parse::<usize>().map_err(|_| refuse("parameters must be whole numbers")))
            .collect::<Result<Vec<usize>>>()?;
        let spec = match (family, numbers.as_slice()) {
            ("rs", &[k, m]) => CodeSpec::Rs { k, m },
            ("lrc", &[k, l, r]) => CodeSpec::Lrc { k, l, r },
            ("rs", _) => return Err(refuse("RS takes two parameters, as in rs-6-3")),
            ("lrc", _) => return Err(refuse("LRC takes three parameters, as in lrc-6-2-2")),
            _ => return Err(refuse("unknown code family: use rs-K-M or lrc-K-L-R")),
        };
        spec.validate()?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in ["rs-6-3", "rs-10-4", "lrc-6-2-2", "lrc-12-2-2"] {
            let spec: CodeSpec = name.parse().unwrap();
            assert_eq!(spec.to_string(), name);
        }
        assert_eq!("RS(6,3)".parse::<CodeSpec>().unwrap(), CodeSpec::Rs { k: 6, m: 3 });
    }

    #[test]
    fn bad_names_and_parameters_are_refused() {
        for bad in ["", "rs", "rs-6", "rs-0-3", "rs-250-10", "lrc-7-2-2", "lrc-6-0-2", "xor-2-1", "rs-a-b"] {
            assert!(bad.parse::<CodeSpec>().is_err(), "{bad} parsed");
        }
        assert_eq!(CodeSpec::Lrc { k: 6, l: 2, r: 2 }.total_units(), 10);
    }
}
