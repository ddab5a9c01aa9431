//! Solvers that lowtail's policies call. Today: problem (1) of Hu et al.,
//! the load-direction table (see [`load_direction`]).
//!
//! Owns: numerical methods on plain arrays. Must not: know about executors,
//! clocks, codes or placement; callers translate their world into arrays.

pub mod load_direction;

pub use load_direction::{LoadDirectionProblem, Objective, Solution, SolveLimits};
