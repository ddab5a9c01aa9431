//! The S3 backend (FAST CLOUD's own setting): a gateway whose units are keys in a bucket of another
//! S3-compatible service (AWS S3, MinIO, Ceph RGW, another lowtail) instead of files on storage
//! nodes. The stripe's n units live as `PREFIX` + `STRIPE/UNIT` keys; the metadata store keeps the
//! layout; reads and writes run through the same data path, controller and policies, a unit task
//! being one GET or PUT. The backend is a black box whose delays are random: FEC buys latency with
//! n/k more storage and requests (`lowtail_gateway_backend_*` metrics count them).
//!
//! The stripe's placement names *backend slots*: n virtual nodes registered in the metadata store
//! (`backend-slot-I`), always Up, so placement, records and policies see n distinct "nodes" as they
//! do on a cluster. Nothing probes them; durability is the backend's (repair still rebuilds a unit
//! whose write or read failed).
//!
//! Owns: the backend's client, the key of a unit, the slots' registration. Must
//! not: decide which units to read or write (the data path does) or keep bytes after a request.

use meta::StripeId;

/// The address a backend slot is registered with (never dialled).
pub const SLOT_ADDRESS_PREFIX: &str = "backend-slot-";

/// A key of the bucket that names a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedUnit {
    /// The unit's stripe.
    pub stripe: StripeId,
    /// Its index.
    pub unit: u16,
    /// The key's ETag: a key written again has another.
    pub etag: String,
    /// Its size.
    pub bytes: u64,
}

/// Why a backend read failed.
#[derive(Debug)]
pub struct BackendReadError {
    /// In words.
    pub message: String,
    /// The key is not there (the unit must be rebuilt), as opposed to a failed or slow request.
    pub not_found: bool,
}

#[cfg(feature = "s3-backend")]
mod client;
#[cfg(feature = "s3-backend")]
pub use client::S3Backend;

/// Without the `s3-backend` feature there is no backend client: a value of this type cannot exist
/// (and [`BackendConfig::problem`] refuses a `[data.backend]` section), so the data path's backend
/// branches are never taken.
#[cfg(not(feature = "s3-backend"))]
#[derive(Debug)]
pub enum S3Backend {}

#[cfg(not(feature = "s3-backend"))]
impl S3Backend {
    /// Never called: [`BackendConfig::problem`] refuses the configuration first.
    pub fn new(_config: &crate::data::config::BackendConfig) -> Self {
        unreachable!("backend mode is refused by the configuration's validation in a build without it")
    }

    /// No key to parse.
    pub fn parse_key(&self, _key: &str) -> Option<(StripeId, u16)> {
        match *self {}
    }

    /// No bucket to check.
    pub async fn check(&self) -> Result<(), crate::data::DataError> {
        match *self {}
    }

    /// No unit to store.
    pub async fn put_unit(&self, _stripe: StripeId, _unit: usize, _data: bytes::Bytes) -> Result<(), String> {
        match *self {}
    }

    /// No unit to read.
    pub async fn get_range(
        &self,
        _stripe: StripeId,
        _unit: usize,
        _offset: u64,
        _length: u64,
    ) -> Result<(bytes::Bytes, std::time::Duration), BackendReadError> {
        match *self {}
    }

    /// No unit to delete.
    pub async fn delete_unit(&self, _stripe: StripeId, _unit: usize) -> Result<(), String> {
        match *self {}
    }

    /// No key to list.
    pub async fn list_units(&self, _continuation: Option<String>) -> Result<(Vec<ListedUnit>, Option<String>), String> {
        match *self {}
    }
}
