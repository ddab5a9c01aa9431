//! The etcd backend: every key of `format` under a configurable prefix (e.g. `/lowtail/<cluster>/`), so
//! several gateways (processes, machines) share one cluster and tests can share one etcd. Owns the etcd
//! client and optimistic transactions; it must not hold metadata rules (those are in `ops`).
//!
//! A write runs the transaction body against a snapshot (every read pinned to the revision of the first
//! read), buffering its writes, then commits them in one etcd `Txn` guarded by compares:
//! - each key read with `get`: its `mod_revision` is unchanged (or, if it was absent, it still is);
//! - each scanned range: no key in it was created or modified after the snapshot.
//!
//! If a guard fails another gateway won the race: the body runs again on a fresh snapshot, at most
//! `MAX_TXN_ATTEMPTS` times with a short jittered back-off, then the call fails with `Conflict`. Ids come
//! from etcd's revision counter: allocating one is a single put whose response revision is unique and
//! increasing cluster-wide, so concurrent allocations never contend.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{Client, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, KvClient, Txn, TxnOp};

use crate::error::{MetaError, Result};
use crate::integrity::{self, Integrity};
use crate::kv::{Backend, Entry, Kv, TxnFuture};
use crate::ops::KvStore;

/// Most times a write transaction body runs before the call gives up with `Conflict`.
pub const MAX_TXN_ATTEMPTS: u32 = 64;
/// Longest back-off between two attempts.
const MAX_BACKOFF: Duration = Duration::from_millis(50);
/// Time allowed to connect, and for each request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The etcd-backed metadata store.
pub type EtcdStore = KvStore<EtcdBackend>;

impl KvStore<EtcdBackend> {
    /// Connects to etcd at `endpoints` (`http://host:port`) and keeps every key under `prefix` (a `/` is
    /// appended if missing). Stores with the same prefix share a cluster's metadata.
    pub async fn connect(endpoints: &[String], prefix: &str) -> Result<Self> {
        if endpoints.is_empty() {
            return Err(MetaError::InvalidArgument("no etcd endpoint given".into()));
        }
        if prefix.is_empty() {
            return Err(MetaError::InvalidArgument("the etcd key prefix must not be empty".into()));
        }
        let options = ConnectOptions::new().with_connect_timeout(REQUEST_TIMEOUT).with_timeout(REQUEST_TIMEOUT);
        let client = Client::connect(endpoints, Some(options))
            .await
            .map_err(|error| MetaError::backend(&format!("connect to etcd at {}", endpoints.join(",")), error))?;
        let mut prefix = prefix.as_bytes().to_vec();
        if !prefix.ends_with(b"/") {
            prefix.push(b'/');
        }
        let backend = EtcdBackend { client: client.kv_client(), prefix, integrity: std::sync::Arc::default() };
        backend.choose_strictness().await?;
        Ok(KvStore::with_backend(backend))
    }
}

/// etcd behind the `Backend` seam.
pub struct EtcdBackend {
    client: KvClient,
    prefix: Vec<u8>,
    /// Seals and the damage found.
    integrity: std::sync::Arc<Integrity>,
}

fn etcd_error(error: etcd_client::Error) -> MetaError {
    MetaError::backend("etcd", error)
}

/// One attempt of a transaction: snapshot reads, guards and buffered writes.
struct EtcdKv {
    client: KvClient,
    prefix: Vec<u8>,
    integrity: std::sync::Arc<Integrity>,
    read_only: bool,
    /// Revision all reads are pinned to, set by the first read.
    snapshot_revision: Option<i64>,
    guards: Vec<Compare>,
    writes: Vec<TxnOp>,
}

impl EtcdKv {
    fn full_key(&self, key: &[u8]) -> Vec<u8> {
        [self.prefix.as_slice(), key].concat()
    }

    async fn range(&mut self, key: Vec<u8>, options: GetOptions) -> Result<etcd_client::GetResponse> {
        let options = match self.snapshot_revision {
            Some(revision) => options.with_revision(revision),
            None => options,
        };
        let response = self.client.get(key, Some(options)).await.map_err(etcd_error)?;
        if self.snapshot_revision.is_none() {
            let revision = response.header().map(|header| header.revision()).unwrap_or_default();
            self.snapshot_revision = Some(revision);
        }
        Ok(response)
    }

    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(MetaError::Backend("write inside a read-only transaction".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl Kv for EtcdKv {
    async fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let full = self.full_key(key);
        let response = self.range(full.clone(), GetOptions::new()).await?;
        let found = response.kvs().first();
        self.guards.push(match found {
            Some(kv) => Compare::mod_revision(full, CompareOp::Equal, kv.mod_revision()),
            None => Compare::version(full, CompareOp::Equal, 0),
        });
        found.map(|kv| self.integrity.unseal(key, kv.value())).transpose()
    }

    async fn scan(&mut self, start: &[u8], end: &[u8], limit: usize) -> Result<Vec<Entry>> {
        if start >= end || limit == 0 {
            return Ok(Vec::new());
        }
        let (full_start, full_end) = (self.full_key(start), self.full_key(end));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let response =
            self.range(full_start.clone(), GetOptions::new().with_range(full_end.clone()).with_limit(limit)).await?;
        let snapshot = self.snapshot_revision.unwrap_or_default();
        // No key in the range may be created or changed after the snapshot.
        self.guards.push(Compare::mod_revision(full_start, CompareOp::Less, snapshot + 1).with_range(full_end));
        let prefix_len = self.prefix.len();
        response
            .kvs()
            .iter()
            .map(|kv| {
                let key = &kv.key()[prefix_len..];
                Ok((key.to_vec(), self.integrity.unseal(key, kv.value())?))
            })
            .collect()
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        self.check_writable()?;
        let sealed = integrity::seal(&key, &value);
        self.writes.push(TxnOp::put(self.full_key(&key), sealed, None));
        Ok(())
    }

    fn delete(&mut self, key: Vec<u8>) -> Result<()> {
        self.check_writable()?;
        self.writes.push(TxnOp::delete(self.full_key(&key), None));
        Ok(())
    }

    fn delete_range(&mut self, start: Vec<u8>, end: Vec<u8>) -> Result<()> {
        self.check_writable()?;
        if start < end {
            let options = DeleteOptions::new().with_range(self.full_key(&end));
            self.writes.push(TxnOp::delete(self.full_key(&start), Some(options)));
        }
        Ok(())
    }
}

impl EtcdBackend {
    fn begin(&self, read_only: bool) -> EtcdKv {
        EtcdKv {
            client: self.client.clone(),
            prefix: self.prefix.clone(),
            integrity: std::sync::Arc::clone(&self.integrity),
            read_only,
            snapshot_revision: None,
            guards: Vec::new(),
            writes: Vec::new(),
        }
    }
}

impl EtcdBackend {
    /// Makes the store strict (every value sealed; an unsealed one is damage) when its prefix holds
    /// no value written before seals: a new prefix gets the marker now. A prefix written before seals
    /// stays lenient (its old values are read unchecked, as etcd's own checks cover them; new values
    /// are sealed).
    async fn choose_strictness(&self) -> Result<()> {
        let marker = [self.prefix.as_slice(), integrity::MARKER_KEY].concat();
        let found = self.client.clone().get(marker.clone(), None).await.map_err(etcd_error)?;
        if found.kvs().is_empty() {
            let any = GetOptions::new().with_prefix().with_limit(1).with_keys_only();
            let existing = self.client.clone().get(self.prefix.clone(), Some(any)).await.map_err(etcd_error)?;
            if !existing.kvs().is_empty() {
                return Ok(());
            }
            let sealed = integrity::seal(integrity::MARKER_KEY, b"crc32c");
            self.client.clone().put(marker, sealed, None).await.map_err(etcd_error)?;
        }
        self.integrity.set_strict();
        Ok(())
    }
}

/// Back-off before attempt `attempt` (1-based) after a lost race: grows linearly, capped, with jitter so
/// two gateways that collided do not collide again in lock step. The jitter comes from std's per-instance
/// random hasher keys, not from a clock.
fn backoff(attempt: u32) -> Duration {
    let ceiling_us = (u64::from(attempt) * 500).min(MAX_BACKOFF.as_micros() as u64);
    let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
    Duration::from_micros(ceiling_us / 2 + random % (ceiling_us / 2 + 1))
}

impl Backend for EtcdBackend {
    async fn write<T, F>(&self, body: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&mut dyn Kv) -> TxnFuture<'_, T> + Send + Sync + 'static,
    {
        for attempt in 1..=MAX_TXN_ATTEMPTS {
            let mut kv = self.begin(false);
            let value = body(&mut kv).await?;
            if kv.writes.is_empty() {
                // Nothing to change: the snapshot the body read is the answer.
                return Ok(value);
            }
            let txn = Txn::new().when(std::mem::take(&mut kv.guards)).and_then(std::mem::take(&mut kv.writes));
            let response = self.client.clone().txn(txn).await.map_err(etcd_error)?;
            if response.succeeded() {
                return Ok(value);
            }
            tokio::time::sleep(backoff(attempt)).await;
        }
        Err(MetaError::Conflict(format!(
            "gave up after {MAX_TXN_ATTEMPTS} attempts: other writers kept changing the same metadata"
        )))
    }

    async fn read<T, F>(&self, body: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&mut dyn Kv) -> TxnFuture<'_, T> + Send + Sync + 'static,
    {
        let mut kv = self.begin(true);
        body(&mut kv).await
    }

    fn integrity(&self) -> &Integrity {
        &self.integrity
    }

    async fn next_id(&self, counter: &'static str) -> Result<u64> {
        let key = [self.prefix.as_slice(), b"counter/", counter.as_bytes()].concat();
        let response = self.client.clone().put(key, Vec::new(), None).await.map_err(etcd_error)?;
        let revision = response.header().map(|header| header.revision()).unwrap_or_default();
        u64::try_from(revision)
            .ok()
            .filter(|&revision| revision > 0)
            .ok_or_else(|| MetaError::Backend(format!("etcd answered a put with revision {revision}")))
    }
}
