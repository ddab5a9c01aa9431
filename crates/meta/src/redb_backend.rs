//! The embedded backend: one redb database file (`meta.redb`) under a data directory, one table mapping
//! the keys of `format` to their values. Owns the file and redb transactions; it must not hold metadata
//! rules (those are in `ops`).
//!
//! Every write transaction commits with redb's default durability (`Immediate`: fsynced before `commit`
//! returns), so an acknowledged mutation survives a crash. redb is synchronous, so transactions run on
//! tokio's blocking pool (`spawn_blocking`); the transaction body's futures never wait on anything there
//! (every `Kv` call completes at once), so driving them with `Handle::block_on` on the blocking thread
//! cannot stall. Point reads (`read_point`: a few `get`s) run on the calling task instead, polled once. Writes are group-committed: each queues its body, and whoever holds the async writer
//! lock runs every queued body (up to 64) in one transaction with one fsync, so queued writers wait as
//! tasks, not as blocking threads on redb's writer lock, and concurrent writes share the fsync. A
//! body that fails is dropped and the rest run again (bodies may run more than once), so each write
//! still commits all of its changes or none. Counters hand out ids from blocks reserved durably.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use redb::{Database, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};

use crate::error::{MetaError, Result};
use crate::format;
use crate::integrity::{self, Integrity};
use crate::kv::{Backend, Entry, Kv, TxnFuture};
use crate::ops::KvStore;

/// The one table: schema key → encoded record.
const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("lowtail-meta");
/// Name of the database file inside the data directory.
pub const DATABASE_FILE_NAME: &str = "meta.redb";

/// The embedded metadata store.
pub type RedbStore = KvStore<RedbBackend>;

/// The embedded store's default page cache: 16 MiB. It fills within minutes of use and then stays:
/// a larger one kept a gateway's memory rising for over an hour (docs/data-path.md, "Memory"); a
/// miss costs a read from the OS page cache.
pub const DEFAULT_CACHE_BYTES: usize = 16 << 20;

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
        let (db, integrity) = without_panics(&path, || open_checked(&path, cache_bytes))?;
        Ok(KvStore::with_backend(RedbBackend {
            db: Arc::new(db),
            path,
            writer: Arc::new(tokio::sync::Mutex::new(())),
            queue: std::sync::Mutex::new(Vec::new()),
            group_commits: AtomicU64::new(0),
            id_blocks: tokio::sync::Mutex::new(HashMap::new()),
            integrity: Arc::new(integrity),
            committing: Arc::default(),
        }))
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

/// What to tell an operator whose database file cannot be read.
const DAMAGED_FILE_ADVICE: &str = "the file is damaged: restore it from a metadata snapshot, or rebuild it from the \
     storage nodes with `lowtail admin meta rebuild` (docs/durability.md)";

/// Runs `open` with panics turned into [`MetaError::Damaged`]: redb panics on some malformed pages,
/// and a damaged file must be a refusal to start that says what to do, never a crash. The panic hook
/// is silenced meanwhile (the message goes into the error instead); this runs once, at start.
fn without_panics<T>(path: &Path, open: impl FnOnce() -> Result<T>) -> Result<T> {
    static HOOK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = crate::lock(&HOOK);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(open));
    std::panic::set_hook(previous);
    outcome.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|text| text.to_string()))
            .unwrap_or_else(|| "a malformed page".into());
        Err(MetaError::Damaged(format!("{} cannot be read ({what}); {DAMAGED_FILE_ADVICE}", path.display())))
    })
}

/// A redb error met while opening or checking `path`: damage when redb says the file is corrupted.
fn open_error(path: &Path, doing: &str, error: impl Into<redb::Error>) -> MetaError {
    match error.into() {
        redb::Error::Corrupted(what) => {
            MetaError::Damaged(format!("{} cannot be read ({what}); {DAMAGED_FILE_ADVICE}", path.display()))
        }
        other => MetaError::backend(&format!("{doing} {}", path.display()), other),
    }
}

/// Opens the database, seals the values of a store written before seals, and checks every record:
/// damaged records are noted (and answered as errors when read), a file that cannot be walked is
/// refused.
fn open_checked(path: &Path, cache_bytes: usize) -> Result<(Database, Integrity)> {
    let db = redb::Builder::new().set_cache_size(cache_bytes).create(path).map_err(|e| open_error(path, "open", e))?;
    // Create the table once so read transactions can always open it.
    let txn = db.begin_write().map_err(|e| open_error(path, "begin", e))?;
    txn.open_table(TABLE).map_err(|e| open_error(path, "open the table of", e))?;
    txn.commit().map_err(|e| open_error(path, "commit", e))?;
    seal_unsealed_values(&db, path)?;
    let integrity = Integrity::new(true);
    check_every_record(&db, path, &integrity)?;
    Ok((db, integrity))
}

/// Values sealed per transaction while a store written before seals is brought up to date.
const SEAL_BATCH: usize = 10_000;

/// Seals every value stored unsealed (a store written before seals), then sets the marker that makes
/// the store strict. Nothing to do once the marker is there.
fn seal_unsealed_values(db: &Database, path: &Path) -> Result<()> {
    let read = db.begin_read().map_err(|e| open_error(path, "read", e))?;
    let table = read.open_table(TABLE).map_err(|e| open_error(path, "read", e))?;
    if table.get(integrity::MARKER_KEY).map_err(|e| open_error(path, "read", e))?.is_some() {
        return Ok(());
    }
    drop((table, read));
    let mut cursor: Vec<u8> = Vec::new();
    // Bounded: each pass moves the cursor past SEAL_BATCH keys or ends.
    loop {
        let txn = db.begin_write().map_err(|e| open_error(path, "seal", e))?;
        let done = {
            let mut table = txn.open_table(TABLE).map_err(|e| open_error(path, "seal", e))?;
            let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            for item in table.range::<&[u8]>(cursor.as_slice()..).map_err(|e| open_error(path, "seal", e))? {
                let (key, value) = item.map_err(|e| open_error(path, "seal", e))?;
                batch.push((key.value().to_vec(), value.value().to_vec()));
                if batch.len() == SEAL_BATCH {
                    break;
                }
            }
            let done = batch.len() < SEAL_BATCH;
            if let Some((last, _)) = batch.last() {
                cursor = format::key_successor(last);
            }
            for (key, value) in batch.into_iter().filter(|(key, value)| integrity::needs_seal(key, value)) {
                table.insert(key.as_slice(), integrity::seal(&key, &value).as_slice()).map_err(storage_error)?;
            }
            if done {
                let marker = integrity::seal(integrity::MARKER_KEY, b"crc32c");
                table.insert(integrity::MARKER_KEY, marker.as_slice()).map_err(storage_error)?;
            }
            done
        };
        txn.commit().map_err(|e| open_error(path, "seal", e))?;
        if done {
            return Ok(());
        }
    }
}

/// Reads every record once, noting the ones that fail their check in `integrity`.
fn check_every_record(db: &Database, path: &Path, integrity: &Integrity) -> Result<()> {
    let read = db.begin_read().map_err(|e| open_error(path, "check", e))?;
    let table = read.open_table(TABLE).map_err(|e| open_error(path, "check", e))?;
    let mut records = 0u64;
    for item in table.iter().map_err(|e| open_error(path, "check", e))? {
        let (key, value) = item.map_err(|e| open_error(path, "check", e))?;
        records += 1;
        // A failure is noted in `integrity`; reads of the record will answer it.
        let _ = integrity.unseal(key.value(), value.value());
    }
    integrity.note_checked(records);
    Ok(())
}

/// Ids a counter reserves durably at a time ([`Backend::next_id`]). The database is one process's
/// (its file is locked), so ids handed out from memory still increase; a restart skips what was
/// left of the last block. One durable commit per block instead of one per id: a stripe id was a
/// third of a PUT's metadata commits.
const ID_BLOCK: u64 = 256;

/// redb behind the `Backend` seam.
pub struct RedbBackend {
    db: Arc<Database>,
    path: PathBuf,
    writer: Arc<tokio::sync::Mutex<()>>,
    /// Writes waiting for the next group commit, in arrival order.
    queue: std::sync::Mutex<Vec<Box<dyn QueuedWrite>>>,
    /// Group commits run (writes per commit = writes / this).
    group_commits: AtomicU64,
    /// Per counter: the next id to hand out and the last one reserved on disk.
    id_blocks: tokio::sync::Mutex<HashMap<&'static str, IdBlock>>,
    /// Seals and the damage found.
    integrity: Arc<Integrity>,
    /// Where the group commit under way is, for the warning a slow one logs.
    committing: Arc<std::sync::Mutex<CommitStage>>,
}

/// A group commit's step and since when (`None` between commits).
#[derive(Debug, Default)]
struct CommitStage {
    step: &'static str,
    since: Option<std::time::Instant>,
    writes: usize,
}

impl CommitStage {
    fn enter(stage: &std::sync::Mutex<CommitStage>, step: &'static str) {
        let mut stage = stage.lock().expect("commit stage lock");
        stage.step = step;
        stage.since = Some(std::time::Instant::now());
    }
}

/// How long a group commit runs before it logs where it is (and again each time as long).
const SLOW_COMMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Ids `next..=reserved` of a counter, reserved durably and not yet handed out.
#[derive(Clone, Copy, Debug)]
struct IdBlock {
    next: u64,
    reserved: u64,
}

enum Txn {
    // Boxed: a write transaction is several hundred bytes, a read one much smaller.
    Write(Box<WriteTransaction>),
    Read(ReadTransaction),
}

struct RedbKv {
    txn: Txn,
    integrity: Arc<Integrity>,
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
        value.map(|stored| self.integrity.unseal(key, &stored)).transpose()
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
        let entries = match &self.txn {
            Txn::Write(txn) => collect(&txn.open_table(TABLE).map_err(storage_error)?, start, end, limit),
            Txn::Read(txn) => collect(&txn.open_table(TABLE).map_err(storage_error)?, start, end, limit),
        }?;
        entries
            .into_iter()
            .map(|(key, stored)| {
                let value = self.integrity.unseal(&key, &stored)?;
                Ok((key, value))
            })
            .collect()
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        let sealed = integrity::seal(&key, &value);
        let mut table = self.writable()?;
        table.insert(key.as_slice(), sealed.as_slice()).map_err(storage_error)?;
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

/// One write waiting for a group commit, its types erased so writes of any result type share a
/// transaction.
trait QueuedWrite: Send {
    /// Runs the body in `kv`; false if it failed (the error is kept for the reply).
    fn run(&mut self, kv: &mut RedbKv, runtime: &tokio::runtime::Handle) -> bool;
    /// Answers the writer: its error if its body failed, else the commit's outcome with its value.
    fn reply(self: Box<Self>, commit: std::result::Result<(), &MetaError>);
}

struct Queued<T, F> {
    body: F,
    outcome: Option<Result<T>>,
    reply: tokio::sync::oneshot::Sender<Result<T>>,
}

impl<T, F> QueuedWrite for Queued<T, F>
where
    T: Send + 'static,
    F: Fn(&mut dyn Kv) -> TxnFuture<'_, T> + Send + Sync + 'static,
{
    fn run(&mut self, kv: &mut RedbKv, runtime: &tokio::runtime::Handle) -> bool {
        let outcome = runtime.block_on((self.body)(kv));
        let ok = outcome.is_ok();
        self.outcome = Some(outcome);
        ok
    }

    fn reply(self: Box<Self>, commit: std::result::Result<(), &MetaError>) {
        let answer = match (self.outcome, commit) {
            (Some(Err(error)), _) => Err(error),
            (Some(Ok(value)), Ok(())) => Ok(value),
            (_, Err(error)) => Err(MetaError::Backend(error.to_string())),
            (None, Ok(())) => unreachable!("a committed write's body ran"),
        };
        // The writer may have been dropped (its caller gave up); the commit stands either way.
        let _ = self.reply.send(answer);
    }
}

/// Most writes one group commit takes from the queue.
const MAX_GROUP: usize = 64;

impl RedbBackend {
    /// Commits every queued write (up to [`MAX_GROUP`]) in one transaction: one fsync for all.
    /// Called with the writer lock, whose guard `writer` the commit's blocking task holds until it
    /// ends: a caller left unpolled while its commit runs (a stream its consumer stopped pulling
    /// while it awaited another write) then holds nothing, where holding the guard itself once
    /// stalled every metadata write for good. A body that fails is dropped from the group and the
    /// others run again in a fresh transaction (bodies may run more than once; see
    /// [`Backend::write`]), so each write commits all of its changes or none, in queue order.
    async fn commit_group(&self, writer: tokio::sync::OwnedMutexGuard<()>) -> Result<()> {
        let group: Vec<Box<dyn QueuedWrite>> = {
            let mut queue = self.queue.lock().expect("write queue lock");
            let take = queue.len().min(MAX_GROUP);
            queue.drain(..take).collect()
        };
        if group.is_empty() {
            return Ok(());
        }
        self.group_commits.fetch_add(1, Ordering::Relaxed);
        let db = Arc::clone(&self.db);
        let integrity = Arc::clone(&self.integrity);
        let runtime = tokio::runtime::Handle::current();
        self.committing.lock().expect("commit stage lock").writes = group.len();
        CommitStage::enter(&self.committing, "waiting for a blocking thread");
        let stage = Arc::clone(&self.committing);
        let mut task = tokio::task::spawn_blocking(move || {
            let _writer = writer;
            commit_in_one_transaction(&db, &integrity, &runtime, group, &stage);
            CommitStage::enter(&stage, "done");
        });
        // Bounded by the commit itself; each SLOW_COMMIT it runs, it says where it is.
        loop {
            match tokio::time::timeout(SLOW_COMMIT, &mut task).await {
                Ok(joined) => return joined.map_err(|error| MetaError::backend("redb write task", error)),
                Err(_) => self.warn_slow_commit(),
            }
        }
    }

    fn warn_slow_commit(&self) {
        let stage = self.committing.lock().expect("commit stage lock");
        let in_step_s = stage.since.map_or(0.0, |since| since.elapsed().as_secs_f64());
        tracing::warn!(
            step = stage.step,
            in_step_s,
            writes = stage.writes,
            queued = self.queue.lock().expect("write queue lock").len(),
            "a metadata group commit is slow; every metadata write waits for it"
        );
    }
}

/// Runs `group` in one transaction, dropping failed bodies and starting again without them
/// (bounded: each pass either commits or drops one), then answers every write.
fn commit_in_one_transaction(
    db: &Database,
    integrity: &Arc<Integrity>,
    runtime: &tokio::runtime::Handle,
    mut group: Vec<Box<dyn QueuedWrite>>,
    stage: &std::sync::Mutex<CommitStage>,
) {
    let mut failed: Vec<Box<dyn QueuedWrite>> = Vec::new();
    let commit = loop {
        CommitStage::enter(stage, "beginning the write transaction");
        let txn = match db.begin_write() {
            Ok(txn) => txn,
            Err(error) => break Err(storage_error(error)),
        };
        let mut kv = RedbKv { txn: Txn::Write(Box::new(txn)), integrity: Arc::clone(integrity) };
        CommitStage::enter(stage, "running the writes");
        let failure = group.iter_mut().position(|write| !write.run(&mut kv, runtime));
        let Txn::Write(txn) = kv.txn else { unreachable!("constructed as a write transaction") };
        match failure {
            None => {
                CommitStage::enter(stage, "committing (fsync)");
                break (*txn).commit().map_err(storage_error);
            }
            Some(index) => {
                if let Err(error) = (*txn).abort() {
                    break Err(storage_error(error));
                }
                failed.push(group.remove(index));
                if group.is_empty() {
                    break Ok(());
                }
            }
        }
    };
    failed.into_iter().for_each(|write| write.reply(Ok(())));
    group.into_iter().for_each(|write| write.reply(commit.as_ref().map(|_| ())));
}

impl Backend for RedbBackend {
    async fn write<T, F>(&self, body: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&mut dyn Kv) -> TxnFuture<'_, T> + Send + Sync + 'static,
    {
        let (reply, mut answer) = tokio::sync::oneshot::channel();
        self.queue.lock().expect("write queue lock").push(Box::new(Queued { body, outcome: None, reply }));
        // Whoever holds the lock commits the head of the queue; ours may go with an earlier group.
        // Bounded: our write is in the queue until answered and every group takes its head, so it
        // is committed within (its position / MAX_GROUP) + 1 passes.
        loop {
            let writer = Arc::clone(&self.writer).lock_owned().await;
            match answer.try_recv() {
                Ok(result) => return result,
                Err(tokio::sync::oneshot::error::TryRecvError::Empty) => self.commit_group(writer).await?,
                Err(tokio::sync::oneshot::error::TryRecvError::Closed) => {
                    return Err(MetaError::Backend("the group commit ended without an answer".into()));
                }
            }
        }
    }

    async fn read<T, F>(&self, body: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&mut dyn Kv) -> TxnFuture<'_, T> + Send + Sync + 'static,
    {
        let db = Arc::clone(&self.db);
        let integrity = Arc::clone(&self.integrity);
        let runtime = tokio::runtime::Handle::current();
        let task = tokio::task::spawn_blocking(move || {
            let txn = db.begin_read().map_err(storage_error)?;
            let mut kv = RedbKv { txn: Txn::Read(txn), integrity };
            runtime.block_on(body(&mut kv))
        });
        task.await.map_err(|error| MetaError::backend("redb read task", error))?
    }

    /// On the calling task: a point read is a few B-tree lookups in redb's page cache (a miss is a
    /// read from the OS page cache), cheaper than the two thread switches of the blocking pool.
    async fn read_point<T, F>(&self, body: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&mut dyn Kv) -> TxnFuture<'_, T> + Send + Sync + 'static,
    {
        let txn = self.db.begin_read().map_err(storage_error)?;
        let mut kv = RedbKv { txn: Txn::Read(txn), integrity: Arc::clone(&self.integrity) };
        let mut running = body(&mut kv);
        match running.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
            std::task::Poll::Ready(result) => result,
            // Every `Kv` call of this backend completes at once, so a body cannot be left waiting.
            std::task::Poll::Pending => Err(MetaError::Backend("a redb point read waited on something".into())),
        }
    }

    fn integrity(&self) -> &Integrity {
        &self.integrity
    }

    async fn next_id(&self, counter: &'static str) -> Result<u64> {
        // Held across a refill, so one block is reserved at a time and ids keep increasing.
        let mut blocks = self.id_blocks.lock().await;
        if let Some(block) = blocks.get_mut(counter).filter(|block| block.next <= block.reserved) {
            block.next += 1;
            return Ok(block.next - 1);
        }
        let reserved = self.reserve_ids(counter).await?;
        let first = reserved - (ID_BLOCK - 1);
        blocks.insert(counter, IdBlock { next: first + 1, reserved });
        Ok(first)
    }
}

impl RedbBackend {
    /// Durably moves `counter` on by [`ID_BLOCK`]; returns its new value, the block's last id.
    async fn reserve_ids(&self, counter: &'static str) -> Result<u64> {
        self.write(move |kv: &mut dyn Kv| -> TxnFuture<'_, u64> {
            Box::pin(async move {
                let key = format!("counter/{counter}").into_bytes();
                let last: u64 = match kv.get(&key).await? {
                    Some(bytes) => format::decode(&key, &bytes)?,
                    None => 0,
                };
                let reserved = last
                    .checked_add(ID_BLOCK)
                    .ok_or_else(|| MetaError::Backend(format!("counter {counter} exhausted")))?;
                kv.put(key, format::encode(&reserved))?;
                Ok(reserved)
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write of `key` that fails after writing when `fail` is set: its write must not stay.
    async fn put_then_maybe_fail(backend: &RedbBackend, key: String, fail: bool) -> Result<String> {
        backend
            .write(move |kv: &mut dyn Kv| -> TxnFuture<'_, String> {
                let key = key.clone();
                Box::pin(async move {
                    kv.put(key.clone().into_bytes(), b"v".to_vec())?;
                    if fail { Err(MetaError::Conflict(format!("{key} refused"))) } else { Ok(key) }
                })
            })
            .await
    }

    #[tokio::test]
    async fn a_point_read_runs_on_the_calling_thread_and_a_read_on_the_blocking_pool() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(dir.path()).unwrap();
        let backend = store.backend_ref();
        let here = std::thread::current().id();
        fn thread_of(kv: &mut dyn Kv) -> TxnFuture<'_, (std::thread::ThreadId, Option<Vec<u8>>)> {
            Box::pin(async move { Ok((std::thread::current().id(), kv.get(b"absent").await?)) })
        }
        assert_eq!(backend.read_point(thread_of).await.unwrap(), (here, None));
        assert_ne!(backend.read(thread_of).await.unwrap().0, here);
    }

    #[tokio::test]
    async fn a_point_read_that_waits_is_refused_not_left_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(dir.path()).unwrap();
        fn waits(_: &mut dyn Kv) -> TxnFuture<'_, ()> {
            Box::pin(async move {
                tokio::task::yield_now().await;
                Ok(())
            })
        }
        let error = store.backend_ref().read_point(waits).await.unwrap_err();
        assert!(error.to_string().contains("waited"), "{error}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_left_unpolled_blocks_no_other_write() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(dir.path()).unwrap();
        let backend = store.backend_ref();
        // Polled until it is under way, then kept but not polled (a stream its consumer stopped
        // pulling while it awaited another write).
        let mut parked = Box::pin(backend.write(|kv: &mut dyn Kv| -> TxnFuture<'_, String> {
            Box::pin(async move {
                // A commit still running when its caller stops being polled.
                std::thread::sleep(std::time::Duration::from_millis(300));
                kv.put(b"key/parked".to_vec(), b"v".to_vec())?;
                Ok("key/parked".to_string())
            })
        }));
        let early = tokio::time::timeout(std::time::Duration::from_millis(50), &mut parked).await;
        assert!(early.is_err(), "still committing");
        let other = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            put_then_maybe_fail(backend, "key/other".into(), false),
        )
        .await;
        assert_eq!(other.expect("not blocked by the parked write").unwrap(), "key/other");
        assert_eq!(parked.await.unwrap(), "key/parked", "and the parked one commits too");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_share_commits_and_a_failed_body_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(RedbStore::open(dir.path()).unwrap());
        let writers: Vec<_> = (0..200)
            .map(|i| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    put_then_maybe_fail(store.backend_ref(), format!("key/{i:03}"), i % 3 == 0).await
                })
            })
            .collect();
        for (i, writer) in writers.into_iter().enumerate() {
            match writer.await.unwrap() {
                Ok(key) => assert!(i % 3 != 0 && key == format!("key/{i:03}")),
                Err(MetaError::Conflict(message)) => assert!(i % 3 == 0 && message.contains(&format!("{i:03}"))),
                Err(other) => panic!("{other}"),
            }
        }
        let stored = store
            .backend_ref()
            .read(|kv: &mut dyn Kv| -> TxnFuture<'_, Vec<Entry>> { Box::pin(kv.scan(b"key/", b"key0", 1000)) })
            .await
            .unwrap();
        let expected: Vec<String> = (0..200).filter(|i| i % 3 != 0).map(|i| format!("key/{i:03}")).collect();
        let keys: Vec<String> = stored.into_iter().map(|(key, _)| String::from_utf8(key).unwrap()).collect();
        assert_eq!(keys, expected, "every successful write, and nothing of a failed one");
        let commits = store.backend_ref().group_commits.load(Ordering::Relaxed);
        assert!(commits < 100, "200 concurrent writes took {commits} group commits");
    }
}
