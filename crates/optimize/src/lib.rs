//! Solvers and closed forms that lowtail's policies call: problem (1) of Hu et al., the
//! load-direction table (see [`load_direction`]); FAST CLOUD's queueing model and BAFEC's backlog
//! thresholds (see [`fec_model`]); EC-Store's access plans for multi-block reads (see
//! [`access_plan`]) and chunk movement (see [`movement`]); Xiang et al.'s JLWO, the joint
//! placement, scheduling and class-bandwidth optimisation behind differentiated latency classes,
//! with its latency bound and a Hungarian method (see [`jlwo`]).
//!
//! Owns: numerical methods on plain arrays. Must not: know about executors,
//! clocks, codes or placement; callers translate their world into arrays.

pub mod access_plan;
pub mod fec_model;
pub mod jlwo;
pub mod load_direction;
pub mod movement;

pub use load_direction::{LoadDirectionProblem, Objective, Solution, SolveLimits};
