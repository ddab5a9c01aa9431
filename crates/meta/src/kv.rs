//! The seam between the metadata logic and the backends. A backend offers transactions over an ordered
//! byte-key map (`Kv`); the logic in `ops` runs inside them. Owns the two traits only; it must not contain
//! metadata rules (those are in `ops`) or backend code.
//!
//! Rules for logic running in a transaction, so both backends behave the same:
//! - never read a key after writing it in the same transaction (the etcd backend buffers writes);
//! - a key that is deleted inside a range another transaction scans must be deleted together with a
//!   change to a key that transaction reads with `get` (the etcd backend guards scanned ranges against
//!   insertions and modifications, and read keys against any change).

use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;

use crate::error::Result;

/// A (key, value) pair from a scan.
pub type Entry = (Vec<u8>, Vec<u8>);

/// An ordered byte-key map seen through one transaction.
#[async_trait]
pub trait Kv: Send {
    /// The value at `key`.
    async fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Up to `limit` entries with `start <= key < end`, ascending.
    async fn scan(&mut self, start: &[u8], end: &[u8], limit: usize) -> Result<Vec<Entry>>;
    /// Sets `key` to `value` when the transaction commits.
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<()>;
    /// Removes `key` when the transaction commits.
    fn delete(&mut self, key: Vec<u8>) -> Result<()>;
    /// Removes every key in `start..end` when the transaction commits.
    fn delete_range(&mut self, start: Vec<u8>, end: Vec<u8>) -> Result<()>;
}

/// The future a transaction body returns, borrowing the transaction's view.
pub type TxnFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// A storage backend: runs transaction bodies atomically.
pub trait Backend: Send + Sync + 'static {
    /// Runs `body` in a read-write transaction and commits it if the body returns `Ok`. The body may run
    /// more than once (optimistic backends retry it after losing a race, a bounded number of times), so
    /// it must have no effects outside the `Kv`.
    fn write<T, F>(&self, body: F) -> impl Future<Output = Result<T>> + Send
    where
        T: Send + 'static,
        F: Fn(&mut dyn Kv) -> TxnFuture<'_, T> + Send + Sync + 'static;

    /// Runs `body` against a consistent snapshot; writes are refused.
    fn read<T, F>(&self, body: F) -> impl Future<Output = Result<T>> + Send
    where
        T: Send + 'static,
        F: Fn(&mut dyn Kv) -> TxnFuture<'_, T> + Send + Sync + 'static;

    /// Runs `body`, a read of a few keys by `get` (no scan), against a consistent snapshot, as
    /// [`Backend::read`] does. A backend whose reads complete at once from memory may run it where
    /// it is called instead of on another thread: the hand-off costs more than such a read.
    fn read_point<T, F>(&self, body: F) -> impl Future<Output = Result<T>> + Send
    where
        T: Send + 'static,
        F: Fn(&mut dyn Kv) -> TxnFuture<'_, T> + Send + Sync + 'static,
    {
        self.read(body)
    }
    /// A number never returned before by this call for `counter`, increasing.
    fn next_id(&self, counter: &'static str) -> impl Future<Output = Result<u64>> + Send;

    /// The seals of the stored values and the damage found (`integrity`).
    fn integrity(&self) -> &crate::integrity::Integrity;
}
