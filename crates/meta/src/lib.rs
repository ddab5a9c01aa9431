//! lowtail's metadata: buckets, objects and their layouts, stripes and their placement, node membership,
//! multipart uploads and cluster config, behind one object-safe async trait, `MetaStore`. Owns what is
//! stored where and the atomicity of every change; it must not touch unit data, make placement or policy
//! decisions, or read clocks (times come in as arguments).
//!
//! Two backends share every rule (`ops::KvStore` over the `kv::Backend` seam):
//! - `RedbStore`: embedded, crash-safe, one file under a data directory; the default.
//! - `EtcdStore`: etcd, so several gateways share one cluster; read-modify-writes are optimistic etcd
//!   transactions that compare the revisions of everything they read.
//!
//! The storage format (keys and versioned JSON values) is described in `format`.

mod condition;
mod error;
mod etcd_backend;
pub mod format;
pub mod integrity;
mod kv;
mod listing;
mod ops;
mod records;
mod redb_backend;
mod store;
mod types;
pub mod validate;
mod versions;

pub use condition::{EtagCondition, WriteCondition};
pub use error::{MetaError, Result};
pub use etcd_backend::{EtcdBackend, EtcdStore};
pub use kv::{Backend, Entry, Kv, TxnFuture};
pub use ops::{KvStore, MAX_STRIPE_PAGE};
pub use redb_backend::{DATABASE_FILE_NAME, DEFAULT_CACHE_BYTES, RedbBackend, RedbStore};
pub use store::MetaStore;
pub use types::*;

/// Locks `mutex`, taking over a lock a panicking thread left (the data it guards stays consistent:
/// every critical section here is a few assignments).
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
