//! The embedded backend: one redb database file (`meta.redb`) under a data directory, one table mapping
//! the keys of `format` to their values. Owns the file and redb transactions; it must not hold metadata
//! rules (those are in `ops`).
//!
//! Every write transaction commits with redb's default durability (`Immediate`: fsynced before `commit`
//! returns), so an acknowledged mutation survives a crash. redb is synchronous, so transactions run on
//! tokio's blocking pool (`spawn_blocking`); the transaction body's futures never wait on anything there
//! (every `Kv` call completes at once), so driving them with `Handle::block_on` on the blocking thread
//! cannot stall. Write transactions are serialised by an async mutex first, so queued writers wait as
//! tasks instead of each parking a blocking thread on redb's writer lock.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use redb::{Database, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};

use crate::error::{MetaError, Result};
use crate::format;
use crate::kv::{Backend, Entry, Kv, TxnFuture};
use crate::ops::KvStore;

/// The one table: schema key → encoded record.
const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("lowtail-meta");
/// Name of the database file inside the data directory.
pub const DATABASE_FILE_NAME: &str = "meta.redb";

/// The embedded metadata store.
pub type RedbStore = KvStore<RedbBackend>;

/// The embedded store's default page cache: 64 MiB.
pub const DEFAULT_CACHE_BYTES: usize = 64 << 20;

impl KvStore<RedbBackend> {
    /// Opens the store in `dir` (created if missing), keeping any data already there.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with_cache(dir, DEFAULT_CACHE_BYTES)
    }

    /// [`RedbStore::open`] with a page cache of at most `cache_bytes` (redb's own default is 1 GiB,
    /// which a long-running gateway fills as the database grows: its memory would follow the
    /// metadata's size; the file's pages stay in the OS page cache either way).
    pub fn open_with_cache(dir: impl AsRef<Path>, cache_bytes: usize) -> Result<Self> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir)
            .map_err(|error| MetaError::backend(&format!("create {}", dir.display()), error))?;
        let path = dir.join(DATABASE_FILE_NAME);
        let db = redb::Builder::new()
            .set_cache_size(cache_bytes)
            .create(&path)
            .map_err(|error| MetaError::backend(&format!("open {}", path.display()), error))?;
        // Create the table once so read transactions can always open it.
        let txn = db.begin_write().map_err(|error| MetaError::backend("begin", error))?;
        txn.open_table(TABLE).map_err(|error| MetaError::backend("open table", error))?;
        txn.commit().map_err(|error| MetaError::backend("commit", error))?;
        Ok(KvStore::with_backend(RedbBackend { db: Arc::new(db), path, writer: Arc::new(tokio::sync::Mutex::new(())) }))
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.backend_ref().path
    }

    /// Bytes redb's page cache holds now (read cache and write buffer), at most the `cache_bytes`
    /// it was opened with.
    pub fn cache_used_bytes(&self) -> usize {
        self.backend_ref().db.cache_stats().used_bytes()
    }
}

/// redb behind the `Backend` seam.
pub struct RedbBackend {
    db: Arc<Database>,
    path: PathBuf,
    writer: Arc<tokio::sync::Mutex<()>>,
}

enum Txn {
    // Boxed: a write transaction is several hundred bytes, a read one much smaller.
    Write(Box<WriteTransaction>),
    Read(ReadTransaction),
}

struct RedbKv {
    txn: Txn,
}

fn storage_error(error: impl std::fmt::Display) -> MetaError {
    MetaError::backend("redb", error)
}

#[async_trait]
impl Kv for RedbKv {
    async fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let value = match &self.txn {
            Txn::Write(txn) => txn
                .open_table(TABLE)
                .map_err(storage_error)?
                .get(key)
                .map_err(storage_error)?
                .map(|v| v.value().to_vec()),
            Txn::Read(txn) => txn
                .open_table(TABLE)
                .map_err(storage_error)?
                .get(key)
                .map_err(storage_error)?
                .map(|v| v.value().to_vec()),
        };
        Ok(value)
    }

    async fn scan(&mut self, start: &[u8], end: &[u8], limit: usize) -> Result<Vec<Entry>> {
        fn collect<T: ReadableTable<&'static [u8], &'static [u8]>>(
            table: &T,
            start: &[u8],
            end: &[u8],
            limit: usize,
        ) -> Result<Vec<Entry>> {
            let mut entries = Vec::new();
            if start >= end {
                return Ok(entries);
            }
            for item in table.range::<&[u8]>(start..end).map_err(storage_error)?.take(limit) {
                let (key, value) = item.map_err(storage_error)?;
                entries.push((key.value().to_vec(), value.value().to_vec()));
            }
            Ok(entries)
        }
        match &self.txn {
            Txn::Write(txn) => collect(&txn.open_table(TABLE).map_err(storage_error)?, start, end, limit),
            Txn::Read(txn) => collect(&txn.open_table(TABLE).map_err(storage_error)?, start, end, limit),
        }
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        let mut table = self.writable()?;
        table.insert(key.as_slice(), value.as_slice()).map_err(storage_error)?;
        Ok(())
    }

    fn delete(&mut self, key: Vec<u8>) -> Result<()> {
        let mut table = self.writable()?;
        table.remove(key.as_slice()).map_err(storage_error)?;
        Ok(())
    }

    fn delete_range(&mut self, start: Vec<u8>, end: Vec<u8>) -> Result<()> {
        if start >= end {
            return Ok(());
        }
        let mut table = self.writable()?;
        table.retain_in::<&[u8], _>(start.as_slice()..end.as_slice(), |_, _| false).map_err(storage_error)?;
        Ok(())
    }
}

impl RedbKv {
    fn writable(&mut self) -> Result<redb::Table<'_, &'static [u8], &'static [u8]>> {
        match &self.txn {
            Txn::Write(txn) => txn.open_table(TABLE).map_err(storage_error),
            Txn::Read(_) => Err(MetaError::Backend("write inside a read-only transaction".into())),
        }
    }
}

impl Backend for RedbBackend {
    async fn write<T, F>(&self, body: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&mut dyn Kv) -> TxnFuture<'_, T> + Send + Sync + 'static,
    {
        let _writer = self.writer.lock().await;
        let db = Arc::clone(&self.db);
        let runtime = tokio::runtime::Handle::current();
        let task = tokio::task::spawn_blocking(move || {
            let txn = db.begin_write().map_err(storage_error)?;
            let mut kv = RedbKv { txn: Txn::Write(Box::new(txn)) };
            let outcome = runtime.block_on(body(&mut kv));
            let Txn::Write(txn) = kv.txn else { unreachable!("constructed as a write transaction") };
            match outcome {
                Ok(value) => {
                    (*txn).commit().map_err(storage_error)?;
                    Ok(value)
                }
                Err(error) => {
                    (*txn).abort().map_err(storage_error)?;
                    Err(error)
                }
            }
        });
        task.await.map_err(|error| MetaError::backend("redb write task", error))?
    }

    async fn read<T, F>(&self, body: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&mut dyn Kv) -> TxnFuture<'_, T> + Send + Sync + 'static,
    {
        let db = Arc::clone(&self.db);
        let runtime = tokio::runtime::Handle::current();
        let task = tokio::task::spawn_blocking(move || {
            let txn = db.begin_read().map_err(storage_error)?;
            let mut kv = RedbKv { txn: Txn::Read(txn) };
            runtime.block_on(body(&mut kv))
        });
        task.await.map_err(|error| MetaError::backend("redb read task", error))?
    }

    async fn next_id(&self, counter: &'static str) -> Result<u64> {
        self.write(move |kv: &mut dyn Kv| -> TxnFuture<'_, u64> {
            Box::pin(async move {
                let key = format!("counter/{counter}").into_bytes();
                let last: u64 = match kv.get(&key).await? {
                    Some(bytes) => format::decode(&key, &bytes)?,
                    None => 0,
                };
                let next =
                    last.checked_add(1).ok_or_else(|| MetaError::Backend(format!("counter {counter} exhausted")))?;
                kv.put(key, format::encode(&next))?;
                Ok(next)
            })
        })
        .await
    }
}
