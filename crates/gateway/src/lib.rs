//! lowtail's gateway: the S3 API in front of the erasure-coded data path.
//!
//! Layers, top down (each may call only the ones below it):
//! - `s3`: the S3 protocol (through the `s3s` crate), authentication, and the mapping of S3
//!   operations onto metadata ([`meta::MetaStore`]) and object bytes ([`data::ObjectData`]).
//! - [`data`]: where object bytes live: placement, striped and packed layouts, normal and degraded
//!   reads, release of dead layouts; repair and membership beside it.
//!
//! Beside them, [`stripe_gc`] reads the S3 layer's records (objects, upload parts) to find stripes
//! nothing references, and deletes them through the data path: the one place that needs both.
//!
//! Must not: embed policy decisions in S3 handlers (handlers call the data path, which asks the
//! policy), or hold object bytes anywhere but on storage nodes once a write is acknowledged.

pub mod admin_routes;
pub mod admin_secret;
pub mod class_admin;
pub mod classes;
pub mod data;
pub mod labels;
pub mod locate_admin;
pub mod meta_rebuild;
pub mod meta_snapshot;
pub mod process;
pub mod profile_admin;
pub mod profiles;
pub mod s3;
pub mod stripe_gc;
