//! Unit store: units as files under `<data_dir>/units`, each with a crc32c per 64 KiB block,
//! written durably (temp file, fsync, rename, fsync directory) and verified on every read.
//!
//! Owns the on-disk format, the in-memory index of stored units and the list of units found
//! corrupt. Must not queue, schedule or emulate service times (the scheduler does), and must never
//! return bytes that failed their checksum. All methods block on the file system: async callers run
//! them on the blocking pool.
//!
//! File format (all integers little-endian), `<stripe:016x>-<unit:04x>.unit`:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `LTUNIT02` (`LTUNIT01`: written before descriptors, whose length is zero) |
//! | 8 | stripe |
//! | 2 | unit index |
//! | 2 | reserved, zero |
//! | 4 | block size in bytes (65536) |
//! | 8 | data length in bytes |
//! | 4 | descriptor length in bytes (zero: none) |
//! | 4 | crc32c of the 36 bytes above |
//! | data length | the unit's bytes |
//! | 4 × blocks | crc32c of each block of data (the last block may be short) |
//! | descriptor length | the descriptor, when there is one |
//! | 4 | its crc32c, when there is one |
//!
//! The checksum table trails the data so that a streaming write appends in one pass without
//! holding the unit in memory. The descriptor is what the writer says the unit is (the gateway's
//! description of the stripe and the objects in it, so that metadata can be rebuilt from the
//! nodes); the store keeps it with the unit, returns it, and never reads into it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use bytes::{Bytes, BytesMut};

use crate::dir_sync::DirSync;
use crate::error::{NodeError, UnitId};

/// Bytes covered by one checksum.
pub const BLOCK_BYTES: u64 = 64 * 1024;
/// Size of the fixed header in front of the data.
pub const HEADER_BYTES: u64 = 40;
const MAGIC: &[u8; 8] = b"LTUNIT02";
/// The magic of units written before descriptors (read as units without one).
const MAGIC_V1: &[u8; 8] = b"LTUNIT01";
/// Largest descriptor a unit carries.
pub const MAX_DESCRIPTOR_BYTES: usize = 1 << 20;
const CRC_BYTES: u64 = 4;
const UNIT_SUFFIX: &str = ".unit";
const TEMP_SUFFIX: &str = ".tmp";

/// Number of checksum blocks of a unit of `data_len` bytes.
pub fn block_count(data_len: u64) -> u64 {
    data_len.div_ceil(BLOCK_BYTES)
}

/// Total file size of a unit of `data_len` bytes without a descriptor.
pub fn file_len(data_len: u64) -> u64 {
    Shape { data_len, descriptor_len: 0 }.file_len()
}

/// What a unit file's header says of its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    data_len: u64,
    descriptor_len: u32,
}

impl Shape {
    /// Where the descriptor starts (after the data and the checksum table).
    fn descriptor_at(&self) -> u64 {
        HEADER_BYTES + self.data_len + CRC_BYTES * block_count(self.data_len)
    }

    /// The file's whole length.
    fn file_len(&self) -> u64 {
        let trailer = if self.descriptor_len == 0 { 0 } else { u64::from(self.descriptor_len) + CRC_BYTES };
        self.descriptor_at() + trailer
    }
}

fn encode_header(id: UnitId, shape: Shape) -> [u8; HEADER_BYTES as usize] {
    let mut header = [0u8; HEADER_BYTES as usize];
    header[0..8].copy_from_slice(MAGIC);
    header[8..16].copy_from_slice(&id.stripe.to_le_bytes());
    header[16..18].copy_from_slice(&id.unit.to_le_bytes());
    header[20..24].copy_from_slice(&(BLOCK_BYTES as u32).to_le_bytes());
    header[24..32].copy_from_slice(&shape.data_len.to_le_bytes());
    header[32..36].copy_from_slice(&shape.descriptor_len.to_le_bytes());
    let crc = crc32c::crc32c(&header[..36]);
    header[36..40].copy_from_slice(&crc.to_le_bytes());
    header
}

/// The descriptor trailer of a file: the descriptor and its checksum.
fn encode_descriptor(descriptor: &[u8]) -> Vec<u8> {
    if descriptor.is_empty() {
        return Vec::new();
    }
    let mut trailer = Vec::with_capacity(descriptor.len() + CRC_BYTES as usize);
    trailer.extend_from_slice(descriptor);
    trailer.extend_from_slice(&crc32c::crc32c(descriptor).to_le_bytes());
    trailer
}

/// Parses and checks a header; returns the unit's shape. `expected` is the unit the file name says.
fn decode_header(header: &[u8; HEADER_BYTES as usize], expected: UnitId) -> Result<Shape, String> {
    let stored_crc = u32::from_le_bytes(header[36..40].try_into().expect("4 bytes"));
    if crc32c::crc32c(&header[..36]) != stored_crc {
        return Err("header checksum mismatch".into());
    }
    let descriptor_len = u32::from_le_bytes(header[32..36].try_into().expect("4 bytes"));
    let magic = &header[0..8];
    if magic != MAGIC && !(magic == MAGIC_V1 && descriptor_len == 0) {
        return Err("bad magic".into());
    }
    if descriptor_len as usize > MAX_DESCRIPTOR_BYTES {
        return Err(format!("a descriptor of {descriptor_len} bytes"));
    }
    let stripe = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
    let unit = u16::from_le_bytes(header[16..18].try_into().expect("2 bytes"));
    if UnitId::new(stripe, unit) != expected {
        return Err(format!("header names unit {stripe}/{unit}"));
    }
    let block_bytes = u32::from_le_bytes(header[20..24].try_into().expect("4 bytes"));
    if u64::from(block_bytes) != BLOCK_BYTES {
        return Err(format!("unsupported block size {block_bytes}"));
    }
    let data_len = u64::from_le_bytes(header[24..32].try_into().expect("8 bytes"));
    Ok(Shape { data_len, descriptor_len })
}

fn unit_file_name(id: UnitId) -> String {
    format!("{:016x}-{:04x}{UNIT_SUFFIX}", id.stripe, id.unit)
}

fn parse_unit_file_name(name: &str) -> Option<UnitId> {
    let stem = name.strip_suffix(UNIT_SUFFIX)?;
    let (stripe, unit) = stem.split_once('-')?;
    if stripe.len() != 16 || unit.len() != 4 {
        return None;
    }
    Some(UnitId::new(u64::from_str_radix(stripe, 16).ok()?, u16::from_str_radix(unit, 16).ok()?))
}

/// The units stored on this node's disk.
#[derive(Debug)]
pub struct UnitStore {
    /// The data directory's lock, held while the store lives: one process per directory.
    _dir_lock: fs::File,
    units_dir: PathBuf,
    /// The units directory, open for the life of the store: every commit and delete fsyncs it,
    /// and opening it each time cost a path walk per unit written.
    units_dir_handle: File,
    /// Concurrent commits and deletes share the directory's fsyncs.
    dir_sync: DirSync,
    max_unit_bytes: u64,
    /// Every committed unit with its data length and generation; mirrors the directory. A commit's
    /// rename and a conditional delete's unlink happen under this lock, so a generation checked
    /// here is the one on disk.
    index: Mutex<BTreeMap<UnitId, IndexEntry>>,
    /// Units that failed a checksum since start (or since they were rewritten / deleted).
    corrupt: Mutex<BTreeSet<UnitId>>,
    /// Set to the number of corrupt units whenever it changes (once the node names the gauge).
    corrupt_gauge: std::sync::OnceLock<metrics::Gauge>,
    temp_counter: AtomicU64,
    /// Data bytes of every unit in the index (kept with it, under its lock).
    stored_bytes: AtomicU64,
    /// The next generation to hand out.
    next_generation: AtomicU64,
}

/// What the index keeps of a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct IndexEntry {
    data_len: u64,
    generation: u64,
}

/// A stored unit as [`UnitStore::list`] returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListedUnit {
    /// Which unit.
    pub id: UnitId,
    /// Its data length in bytes.
    pub data_len: u64,
    /// Changes whenever the unit is written, and when the store is reopened; never zero. A caller
    /// that lists a unit and later deletes it with [`UnitStore::delete_if_generation`] deletes
    /// nothing written in between.
    pub generation: u64,
}

/// What [`UnitStore::delete_if_generation`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionalDelete {
    /// The unit had the generation and is gone.
    Deleted,
    /// There was no such unit.
    Absent,
    /// The unit has another generation (rewritten since it was listed): it was kept.
    Changed,
}

/// The first generation a store hands out: the wall clock in nanoseconds, so generations keep
/// growing across restarts (a unit listed before a restart never matches one after it).
fn first_generation() -> u64 {
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| u64::try_from(since.as_nanos()).unwrap_or(u64::MAX / 2))
        .unwrap_or(0);
    now_ns.max(1)
}

/// The lock file in a node's data directory (see [`lock_data_dir`]).
pub const LOCK_FILE: &str = "lock";

/// How long a node waits for its directory's lock before refusing: a node killed a moment ago holds
/// it until its exit has closed its files, which on a loaded machine can follow the kill by more
/// than a second (and after its command line is gone, so a launcher looking for leftovers misses it).
pub const DIRECTORY_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Takes the exclusive lock of `data_dir` (released when the process exits, however it exits),
/// waiting up to [`DIRECTORY_LOCK_WAIT`] for it. A second process on the same directory would
/// delete the first one's in-flight temp files when it opens, race its renames and scrub units it
/// is rewriting: it is refused instead.
fn lock_data_dir(data_dir: &Path) -> Result<fs::File, NodeError> {
    let path = data_dir.join(LOCK_FILE);
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| NodeError::io(&path, e))?;
    let deadline = std::time::Instant::now() + DIRECTORY_LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(fs::TryLockError::WouldBlock) => return Err(NodeError::DirectoryInUse(data_dir.to_path_buf())),
            Err(fs::TryLockError::Error(e)) => return Err(NodeError::io(&path, e)),
        }
    }
}

impl UnitStore {
    /// Opens (creating if needed) the store under `data_dir`, removes temp files a crash left
    /// behind and indexes the units present. Units longer than `max_unit_bytes` are refused on
    /// write. A unit whose header fails its checksum is indexed as corrupt (length 0).
    pub fn open(data_dir: &Path, max_unit_bytes: u64) -> Result<Self, NodeError> {
        let units_dir = data_dir.join("units");
        fs::create_dir_all(&units_dir).map_err(|e| NodeError::io(&units_dir, e))?;
        let dir_lock = lock_data_dir(data_dir)?;
        let units_dir_handle = File::open(&units_dir).map_err(|e| NodeError::io(&units_dir, e))?;
        let mut index = BTreeMap::new();
        let mut corrupt = BTreeSet::new();
        let mut generation = first_generation();
        let mut entry_of = |data_len: u64| {
            generation += 1;
            IndexEntry { data_len, generation }
        };
        let entries = fs::read_dir(&units_dir).map_err(|e| NodeError::io(&units_dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| NodeError::io(&units_dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.ends_with(TEMP_SUFFIX) {
                // An unacknowledged write interrupted by a crash: never visible, safe to drop.
                fs::remove_file(entry.path()).map_err(|e| NodeError::io(entry.path(), e))?;
                continue;
            }
            let Some(id) = parse_unit_file_name(name) else { continue };
            match read_header(&entry.path(), id) {
                Ok(Ok(shape)) => {
                    index.insert(id, entry_of(shape.data_len));
                }
                Ok(Err(_)) => {
                    index.insert(id, entry_of(0));
                    corrupt.insert(id);
                }
                Err(e) => return Err(e),
            }
        }
        tracing::info!(dir = %units_dir.display(), units = index.len(), corrupt = corrupt.len(), "unit store opened");
        let stored_bytes = index.values().map(|entry| entry.data_len).sum();
        Ok(Self {
            _dir_lock: dir_lock,
            units_dir,
            units_dir_handle,
            dir_sync: DirSync::default(),
            max_unit_bytes,
            index: Mutex::new(index),
            corrupt: Mutex::new(corrupt),
            corrupt_gauge: std::sync::OnceLock::new(),
            stored_bytes: AtomicU64::new(stored_bytes),
            temp_counter: AtomicU64::new(0),
            next_generation: AtomicU64::new(generation + 1),
        })
    }

    /// Largest unit a write accepts.
    pub fn max_unit_bytes(&self) -> u64 {
        self.max_unit_bytes
    }

    fn unit_path(&self, id: UnitId) -> PathBuf {
        self.units_dir.join(unit_file_name(id))
    }

    fn index(&self) -> MutexGuard<'_, BTreeMap<UnitId, IndexEntry>> {
        crate::lock(&self.index)
    }

    fn corrupt_set(&self) -> MutexGuard<'_, BTreeSet<UnitId>> {
        crate::lock(&self.corrupt)
    }

    /// Reports the number of corrupt units on `gauge` from now on (now included).
    pub fn publish_corrupt_count(&self, gauge: metrics::Gauge) {
        gauge.set(self.corrupt_set().len() as f64);
        let _ = self.corrupt_gauge.set(gauge);
    }

    /// Adds or removes `id` in the corrupt list; whether the list changed.
    fn set_corrupt(&self, id: UnitId, corrupt: bool) -> bool {
        let mut set = self.corrupt_set();
        let changed = if corrupt { set.insert(id) } else { set.remove(&id) };
        if changed && let Some(gauge) = self.corrupt_gauge.get() {
            gauge.set(set.len() as f64);
        }
        changed
    }

    /// Makes a rename or unlink in the units directory durable.
    fn sync_dir(&self) -> Result<(), NodeError> {
        self.dir_sync.sync(&self.units_dir_handle).map_err(|e| NodeError::io(&self.units_dir, e))
    }

    /// Starts a streaming write of `total_len` bytes: creates a temp file and writes the header.
    /// Nothing is visible until [`UnitStore::commit`]; dropping the [`StagedUnit`] removes it.
    pub fn begin_write(&self, id: UnitId, total_len: u64) -> Result<StagedUnit, NodeError> {
        self.begin_described_write(id, total_len, Bytes::new())
    }

    /// [`UnitStore::begin_write`] of a unit that carries `descriptor` (at most
    /// [`MAX_DESCRIPTOR_BYTES`]; empty: none).
    pub fn begin_described_write(
        &self,
        id: UnitId,
        total_len: u64,
        descriptor: Bytes,
    ) -> Result<StagedUnit, NodeError> {
        let mut staged = self.create_temp(id, total_len, descriptor)?;
        staged.write_all_at(&encode_header(id, staged.shape()), 0)?;
        Ok(staged)
    }

    /// A new, empty temp file for a unit of `total_len` bytes (refused over the limit, or with a
    /// descriptor over its limit).
    fn create_temp(&self, id: UnitId, total_len: u64, descriptor: Bytes) -> Result<StagedUnit, NodeError> {
        if total_len > self.max_unit_bytes {
            return Err(NodeError::InvalidArgument(format!(
                "unit {id} of {total_len} bytes exceeds the limit of {} bytes",
                self.max_unit_bytes
            )));
        }
        if descriptor.len() > MAX_DESCRIPTOR_BYTES {
            return Err(NodeError::InvalidArgument(format!(
                "unit {id}'s descriptor of {} bytes exceeds the limit of {MAX_DESCRIPTOR_BYTES} bytes",
                descriptor.len()
            )));
        }
        let nonce = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temp_path =
            self.units_dir.join(format!(".{}.{}.{nonce}{TEMP_SUFFIX}", unit_file_name(id), std::process::id()));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp_path)
            .map_err(|e| NodeError::io(&temp_path, e))?;
        Ok(StagedUnit {
            id,
            total_len,
            descriptor,
            written: 0,
            file,
            temp_path,
            block_crcs: Vec::with_capacity(block_count(total_len) as usize),
            block_crc: 0,
            block_fill: 0,
            committed: false,
        })
    }

    /// Makes a fully written unit durable and visible: appends the checksum table, fsyncs the
    /// file, renames it over any previous version and fsyncs the directory. Only after this
    /// returns may the write be acknowledged.
    pub fn commit(&self, mut staged: StagedUnit) -> Result<(), NodeError> {
        if staged.written != staged.total_len {
            return Err(NodeError::InvalidArgument(format!(
                "unit {} declared {} bytes but {} arrived",
                staged.id, staged.total_len, staged.written
            )));
        }
        if staged.block_fill > 0 {
            staged.block_crcs.push(staged.block_crc);
        }
        assert_eq!(staged.block_crcs.len() as u64, block_count(staged.total_len), "one checksum per block");
        let mut trailer: Vec<u8> = staged.block_crcs.iter().flat_map(|crc| crc.to_le_bytes()).collect();
        trailer.extend_from_slice(&encode_descriptor(&staged.descriptor));
        staged.write_all_at(&trailer, HEADER_BYTES + staged.total_len)?;
        self.publish(staged)
    }

    /// Writes a unit held whole in memory ([`UnitImage`]) durably and makes it visible, as
    /// [`UnitStore::commit`] does for a streamed one, with one write of the whole file.
    pub fn commit_image(&self, image: UnitImage) -> Result<(), NodeError> {
        let UnitImage { id, mut file_image, descriptor } = image;
        let data_len = file_image.len() as u64 - HEADER_BYTES;
        let mut staged = self.create_temp(id, data_len, descriptor)?;
        file_image[..HEADER_BYTES as usize].copy_from_slice(&encode_header(id, staged.shape()));
        let table: Vec<u8> = file_image[HEADER_BYTES as usize..]
            .chunks(BLOCK_BYTES as usize)
            .flat_map(|block| crc32c::crc32c(block).to_le_bytes())
            .collect();
        assert_eq!(table.len() as u64, CRC_BYTES * block_count(data_len), "one checksum per block");
        file_image.extend_from_slice(&table);
        file_image.extend_from_slice(&encode_descriptor(&staged.descriptor));
        debug_assert_eq!(file_image.len() as u64, staged.shape().file_len());
        staged.write_all_at(&file_image, 0)?;
        staged.written = data_len;
        self.publish(staged)
    }

    /// Fsyncs a complete temp file, renames it over any previous version of its unit and fsyncs
    /// the directory.
    fn publish(&self, mut staged: StagedUnit) -> Result<(), NodeError> {
        staged.file.sync_all().map_err(|e| NodeError::io(&staged.temp_path, e))?;
        let final_path = self.unit_path(staged.id);
        {
            // The rename and the new generation under one lock: a conditional delete sees both or
            // neither.
            let mut index = self.index();
            fs::rename(&staged.temp_path, &final_path).map_err(|e| NodeError::io(&final_path, e))?;
            staged.committed = true;
            let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
            let replaced = index.insert(staged.id, IndexEntry { data_len: staged.total_len, generation });
            self.stored_bytes.fetch_add(staged.total_len, Ordering::Relaxed);
            if let Some(replaced) = replaced {
                self.stored_bytes.fetch_sub(replaced.data_len, Ordering::Relaxed);
            }
        }
        self.sync_dir()?;
        // A rewrite (repair) replaces the bad bytes, so the unit is no longer corrupt.
        self.set_corrupt(staged.id, false);
        Ok(())
    }

    /// Reads `length` bytes at `offset` of a unit, verifying the checksum of every block the range
    /// touches (and only those). A failed checksum marks the unit corrupt and returns
    /// [`NodeError::Corrupt`]; blocks that verify can still be read.
    pub fn read_range(&self, id: UnitId, offset: u64, length: u64) -> Result<Bytes, NodeError> {
        self.read_range_in(id, offset, length, ReadFrom::Device).expect("a read from the device always answers")
    }

    /// [`UnitStore::read_range`] from the page cache only: `None` when any of the bytes would have
    /// to wait for the device (then read on the blocking pool). Lets the node serve a cached read
    /// on its runtime thread without two thread hand-offs; opening the file may still wait for an
    /// uncached inode.
    pub fn read_range_cached(&self, id: UnitId, offset: u64, length: u64) -> Option<Result<Bytes, NodeError>> {
        self.read_range_in(id, offset, length, ReadFrom::PageCache)
    }

    fn read_range_in(&self, id: UnitId, offset: u64, length: u64, from: ReadFrom) -> Option<Result<Bytes, NodeError>> {
        let path = self.unit_path(id);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(Err(NodeError::NotFound(id))),
            Err(e) => return Some(Err(NodeError::io(&path, e))),
        };
        let shape = match header_of(&file, &path, id, from)? {
            Ok(Ok(shape)) => shape,
            Ok(Err(what)) => return Some(Err(self.mark_corrupt(id, what))),
            Err(error) => return Some(Err(error)),
        };
        let data_len = shape.data_len;
        let end = offset.checked_add(length).filter(|&end| end <= data_len);
        let Some(end) = end else {
            return Some(Err(NodeError::OutOfRange { unit: id, offset, length, unit_len: data_len }));
        };
        let actual_len = match file.metadata() {
            Ok(metadata) => metadata.len(),
            Err(e) => return Some(Err(NodeError::io(&path, e))),
        };
        if actual_len != shape.file_len() {
            let what = format!("file is {actual_len} bytes, expected {}", shape.file_len());
            return Some(Err(self.mark_corrupt(id, what)));
        }
        if length == 0 {
            return Some(Ok(Bytes::new()));
        }
        self.read_blocks(id, &file, data_len, (offset, end), from)
    }

    /// The verified bytes `range` of a unit whose header said `data_len`: the blocks it touches and
    /// their checksums are read, then checked.
    fn read_blocks(
        &self,
        id: UnitId,
        file: &File,
        data_len: u64,
        (offset, end): (u64, u64),
        from: ReadFrom,
    ) -> Option<Result<Bytes, NodeError>> {
        let first_block = offset / BLOCK_BYTES;
        let last_block = (end - 1) / BLOCK_BYTES;
        let span_start = first_block * BLOCK_BYTES;
        let span_end = ((last_block + 1) * BLOCK_BYTES).min(data_len);
        let crcs_len = ((last_block - first_block + 1) * CRC_BYTES) as usize;
        let mut span = Vec::new();
        let mut crcs = Vec::new();
        let read = read_at(file, &mut span, (span_end - span_start) as usize, HEADER_BYTES + span_start, from)
            .and_then(|all| {
                Ok(all && read_at(file, &mut crcs, crcs_len, HEADER_BYTES + data_len + first_block * CRC_BYTES, from)?)
            });
        match read {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => return Some(Err(NodeError::io(self.unit_path(id), e))),
        }
        for (i, (block, stored)) in span.chunks(BLOCK_BYTES as usize).zip(crcs.chunks_exact(4)).enumerate() {
            let stored = u32::from_le_bytes(stored.try_into().expect("4 bytes"));
            if crc32c::crc32c(block) != stored {
                let what = format!("block {} failed its checksum", first_block + i as u64);
                return Some(Err(self.mark_corrupt(id, what)));
            }
        }
        let data = Bytes::from(span);
        Some(Ok(data.slice((offset - span_start) as usize..(end - span_start) as usize)))
    }

    fn mark_corrupt(&self, id: UnitId, what: String) -> NodeError {
        if self.set_corrupt(id, true) {
            tracing::warn!(unit = %id, %what, "corrupt unit");
        }
        NodeError::Corrupt { unit: id, what }
    }

    /// Deletes a unit (durably: the directory is fsynced). Returns whether it existed.
    pub fn delete(&self, id: UnitId) -> Result<bool, NodeError> {
        self.delete_many(&[id]).map(|existed| existed == 1)
    }

    /// Unlinks unit `id`'s file (not yet durably); whether it existed.
    fn unlink(&self, id: UnitId) -> Result<bool, NodeError> {
        let path = self.unit_path(id);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(NodeError::io(&path, e)),
        }
    }

    /// Deletes every unit of `ids` (those already gone count as deleted), with one directory sync
    /// for all of them rather than one each; returns how many existed. On an I/O error the units
    /// unlinked before it are still synced and forgotten, and the error is returned.
    pub fn delete_many(&self, ids: &[UnitId]) -> Result<usize, NodeError> {
        let mut unlinked = Vec::with_capacity(ids.len());
        let mut failure = None;
        for &id in ids {
            match self.unlink(id) {
                Ok(existed) => unlinked.push((id, existed)),
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
        }
        let existed = unlinked.iter().filter(|(_, existed)| *existed).count();
        if existed > 0 {
            self.sync_dir()?;
        }
        for (id, _) in unlinked {
            if let Some(removed) = self.index().remove(&id) {
                self.stored_bytes.fetch_sub(removed.data_len, Ordering::Relaxed);
            }
            self.set_corrupt(id, false);
        }
        failure.map_or(Ok(existed), Err)
    }

    /// Deletes a unit only if it still has `generation` (durably, as [`UnitStore::delete`]). A
    /// unit rewritten since it was listed is kept: whoever rewrote it may be about to reference it.
    pub fn delete_if_generation(&self, id: UnitId, generation: u64) -> Result<ConditionalDelete, NodeError> {
        self.delete_unless(id, |entry, _corrupt| match entry {
            None => Some(ConditionalDelete::Absent),
            Some(entry) if entry.generation != generation => Some(ConditionalDelete::Changed),
            Some(_) => None,
        })
    }

    /// Deletes a unit only while it is in the corrupt list (durably, as [`UnitStore::delete`]): a
    /// copy rewritten since it was found corrupt is kept. For the garbage copies repair finds
    /// corrupt that no stripe references any more.
    pub fn delete_if_corrupt(&self, id: UnitId) -> Result<ConditionalDelete, NodeError> {
        self.delete_unless(id, |entry, corrupt| match (entry, corrupt) {
            (_, true) => None,
            (Some(_), false) => Some(ConditionalDelete::Changed),
            (None, false) => Some(ConditionalDelete::Absent),
        })
    }

    /// Deletes unit `id` unless `keep`, asked with its index entry and whether it is corrupt under
    /// the index lock (so a commit, which renews both, cannot slip in between), says why not.
    fn delete_unless(
        &self,
        id: UnitId,
        keep: impl FnOnce(Option<&IndexEntry>, bool) -> Option<ConditionalDelete>,
    ) -> Result<ConditionalDelete, NodeError> {
        {
            let mut index = self.index();
            let corrupt = self.corrupt_set().contains(&id);
            if let Some(kept) = keep(index.get(&id), corrupt) {
                return Ok(kept);
            }
            self.unlink(id)?;
            if let Some(removed) = index.remove(&id) {
                self.stored_bytes.fetch_sub(removed.data_len, Ordering::Relaxed);
            }
        }
        self.set_corrupt(id, false);
        self.sync_dir()?;
        Ok(ConditionalDelete::Deleted)
    }

    /// Up to `limit` units after `after` (exclusive), in order, and whether more follow.
    pub fn list(&self, after: Option<UnitId>, limit: usize) -> (Vec<ListedUnit>, bool) {
        let index = self.index();
        let mut range: Box<dyn Iterator<Item = (&UnitId, &IndexEntry)>> = match after {
            Some(after) => Box::new(index.range((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded))),
            None => Box::new(index.iter()),
        };
        let page: Vec<ListedUnit> = range
            .by_ref()
            .take(limit)
            .map(|(id, entry)| ListedUnit { id: *id, data_len: entry.data_len, generation: entry.generation })
            .collect();
        let truncated = range.next().is_some();
        (page, truncated)
    }

    /// Data bytes of every unit stored.
    pub fn stored_bytes(&self) -> u64 {
        self.stored_bytes.load(Ordering::Relaxed)
    }

    /// Number of units stored.
    pub fn unit_count(&self) -> u64 {
        self.index().len() as u64
    }

    /// Data length of a stored unit.
    pub fn unit_len(&self, id: UnitId) -> Option<u64> {
        self.index().get(&id).map(|entry| entry.data_len)
    }

    /// Units found corrupt, in order, for repair to rebuild.
    pub fn corrupt_units(&self) -> Vec<UnitId> {
        self.corrupt_set().iter().copied().collect()
    }

    /// A unit's file, open, and its shape, once its header and its length agree; a file whose
    /// header or length is wrong is `Corrupt` (and listed corrupt).
    fn open_checked(&self, id: UnitId) -> Result<(File, Shape), NodeError> {
        let path = self.unit_path(id);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(NodeError::NotFound(id)),
            Err(e) => return Err(NodeError::io(&path, e)),
        };
        let shape = match header_of(&file, &path, id, ReadFrom::Device).expect("a read from the device answers")? {
            Ok(shape) => shape,
            Err(what) => return Err(self.mark_corrupt(id, what)),
        };
        let actual_len = file.metadata().map_err(|e| NodeError::io(&path, e))?.len();
        if actual_len != shape.file_len() {
            return Err(self.mark_corrupt(id, format!("file is {actual_len} bytes, expected {}", shape.file_len())));
        }
        Ok((file, shape))
    }

    /// The descriptor a unit was written with (empty: none), checked against its checksum; a
    /// descriptor that fails it is `Corrupt`.
    pub fn descriptor(&self, id: UnitId) -> Result<Bytes, NodeError> {
        let (file, shape) = self.open_checked(id)?;
        if shape.descriptor_len == 0 {
            return Ok(Bytes::new());
        }
        let mut trailer = Vec::new();
        let len = shape.descriptor_len as usize + CRC_BYTES as usize;
        read_at(&file, &mut trailer, len, shape.descriptor_at(), ReadFrom::Device)
            .map_err(|e| NodeError::io(self.unit_path(id), e))?;
        let (descriptor, crc) = trailer.split_at(shape.descriptor_len as usize);
        if crc32c::crc32c(descriptor) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
            return Err(self.mark_corrupt(id, "its descriptor failed its checksum".into()));
        }
        trailer.truncate(shape.descriptor_len as usize);
        Ok(Bytes::from(trailer))
    }

    /// The CRC-32C of a unit's data, combined from its block checksums (only the header and the
    /// checksum table are read: the blocks are the scrub's to verify). A file whose header or length
    /// is wrong is `Corrupt` (and listed corrupt).
    pub fn unit_checksum(&self, id: UnitId) -> Result<u32, NodeError> {
        let (file, shape) = self.open_checked(id)?;
        let data_len = shape.data_len;
        let blocks = block_count(data_len);
        let mut table = Vec::new();
        read_at(&file, &mut table, (blocks * CRC_BYTES) as usize, HEADER_BYTES + data_len, ReadFrom::Device)
            .map_err(|e| NodeError::io(self.unit_path(id), e))?;
        Ok(combine_block_checksums(&table, data_len))
    }

    /// Path of a unit's file (tests corrupt it on purpose; operators inspect it).
    pub fn path_of(&self, id: UnitId) -> PathBuf {
        self.unit_path(id)
    }
}

/// The CRC-32C of `data_len` bytes whose 64 KiB blocks have the checksums in `table` (4 bytes each,
/// little-endian; the last block may be short).
fn combine_block_checksums(table: &[u8], data_len: u64) -> u32 {
    let mut crc = crc32c::crc32c(&[]);
    for (index, stored) in table.chunks_exact(CRC_BYTES as usize).enumerate() {
        let block_crc = u32::from_le_bytes(stored.try_into().expect("4 bytes"));
        let block_len = (data_len - index as u64 * BLOCK_BYTES).min(BLOCK_BYTES);
        crc = crc32c::crc32c_combine(crc, block_crc, block_len as usize);
    }
    crc
}

/// Reads a file's header: `Err` for I/O failures, `Ok(Err(what))` when it is corrupt.
fn read_header(path: &Path, id: UnitId) -> Result<Result<Shape, String>, NodeError> {
    let file = File::open(path).map_err(|e| NodeError::io(path, e))?;
    header_of(&file, path, id, ReadFrom::Device).expect("a read from the device always answers")
}

/// The shape in `file`'s header, as [`read_header`] gives it; `None` when reading from the page
/// cache and the header is not cached.
fn header_of(file: &File, path: &Path, id: UnitId, from: ReadFrom) -> Option<Result<Result<Shape, String>, NodeError>> {
    let mut header = Vec::with_capacity(HEADER_BYTES as usize);
    match read_at(file, &mut header, HEADER_BYTES as usize, 0, from) {
        Ok(true) => {
            let header: &[u8; HEADER_BYTES as usize] = header.as_slice().try_into().expect("a whole header");
            Some(Ok(decode_header(header, id)))
        }
        Ok(false) => None,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Some(Ok(Err("file shorter than its header".into()))),
        Err(e) => Some(Err(NodeError::io(path, e))),
    }
}

/// A small unit's whole file image in memory: room for the header, then the data as it was
/// received (the checksum table is added at the commit). It costs one `pwrite` and no temp file
/// until its task is served, where a [`StagedUnit`] costs a blocking call per chunk.
#[derive(Debug)]
pub struct UnitImage {
    id: UnitId,
    file_image: BytesMut,
    descriptor: Bytes,
}

impl UnitImage {
    /// An empty buffer for a `data_len`-byte unit: [`HEADER_BYTES`] of room for the header, then
    /// capacity for the data and its checksum table. Append exactly the data to it.
    pub fn buffer(data_len: usize) -> BytesMut {
        let blocks = block_count(data_len as u64) as usize;
        let mut buffer = BytesMut::with_capacity(HEADER_BYTES as usize + data_len + CRC_BYTES as usize * blocks);
        buffer.extend_from_slice(&[0u8; HEADER_BYTES as usize]);
        buffer
    }

    /// The image of `id` from a [`UnitImage::buffer`] its data was appended to, carrying
    /// `descriptor` (empty: none).
    pub fn new(id: UnitId, buffer: BytesMut, descriptor: Bytes) -> Self {
        assert!(buffer.len() as u64 >= HEADER_BYTES, "a unit image starts with room for its header");
        Self { id, file_image: buffer, descriptor }
    }

    /// The unit's data length.
    pub fn data_len(&self) -> u64 {
        self.file_image.len() as u64 - HEADER_BYTES
    }

    /// The image of `id` holding a copy of `data`.
    #[cfg(test)]
    pub(crate) fn with_data(id: UnitId, data: &[u8]) -> Self {
        let mut buffer = Self::buffer(data.len());
        buffer.extend_from_slice(data);
        Self::new(id, buffer, Bytes::new())
    }
}

/// A unit's bytes waiting for their commit: streamed into a temp file, or whole in memory.
#[derive(Debug)]
pub enum UnitWrite {
    /// A large unit, appended chunk by chunk as it arrived ([`UnitStore::commit`]).
    Staged(StagedUnit),
    /// A small unit held whole ([`UnitStore::commit_image`]).
    Image(UnitImage),
}

impl UnitWrite {
    /// The unit's data length.
    pub fn data_len(&self) -> u64 {
        match self {
            Self::Staged(staged) => staged.total_len(),
            Self::Image(image) => image.data_len(),
        }
    }
}

impl UnitStore {
    /// Commits either kind of [`UnitWrite`].
    pub fn commit_write(&self, write: UnitWrite) -> Result<(), NodeError> {
        match write {
            UnitWrite::Staged(staged) => self.commit(staged),
            UnitWrite::Image(image) => self.commit_image(image),
        }
    }
}

/// A unit being written: a temp file receiving chunks in order. Memory per write is the chunk in
/// hand plus 4 bytes per 64 KiB block.
#[derive(Debug)]
pub struct StagedUnit {
    id: UnitId,
    total_len: u64,
    /// Written after the checksum table at the commit.
    descriptor: Bytes,
    written: u64,
    file: File,
    temp_path: PathBuf,
    block_crcs: Vec<u32>,
    /// Running crc32c of the block being filled, and how many of its bytes have arrived.
    block_crc: u32,
    block_fill: u64,
    committed: bool,
}

impl StagedUnit {
    /// The unit being written.
    pub fn id(&self) -> UnitId {
        self.id
    }

    /// Declared length.
    pub fn total_len(&self) -> u64 {
        self.total_len
    }

    /// Bytes received so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    fn shape(&self) -> Shape {
        let descriptor_len = u32::try_from(self.descriptor.len()).expect("descriptors are checked against their limit");
        Shape { data_len: self.total_len, descriptor_len }
    }

    fn write_all_at(&mut self, data: &[u8], at: u64) -> Result<(), NodeError> {
        self.file.write_all_at(data, at).map_err(|e| NodeError::io(&self.temp_path, e))
    }

    /// Appends the next chunk. Refuses bytes past the declared length.
    pub fn append(&mut self, mut chunk: &[u8]) -> Result<(), NodeError> {
        let chunk_len = chunk.len() as u64;
        if self.written + chunk_len > self.total_len {
            return Err(NodeError::InvalidArgument(format!(
                "unit {} declared {} bytes but more arrived ({} + {chunk_len})",
                self.id, self.total_len, self.written
            )));
        }
        let at = HEADER_BYTES + self.written;
        self.write_all_at(chunk, at)?;
        self.written += chunk_len;
        while !chunk.is_empty() {
            let take = ((BLOCK_BYTES - self.block_fill) as usize).min(chunk.len());
            self.block_crc = crc32c::crc32c_append(self.block_crc, &chunk[..take]);
            self.block_fill += take as u64;
            chunk = &chunk[take..];
            if self.block_fill == BLOCK_BYTES {
                self.block_crcs.push(self.block_crc);
                self.block_crc = 0;
                self.block_fill = 0;
            }
        }
        Ok(())
    }
}

impl Drop for StagedUnit {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: a leftover temp file is also removed at the next open.
            let _ = fs::remove_file(&self.temp_path);
        }
    }
}

/// Where a read may take its bytes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadFrom {
    /// Anywhere: waits for the device when the page cache misses.
    Device,
    /// The page cache only (`RWF_NOWAIT`): gives up rather than wait for the device.
    PageCache,
}

/// Appends `length` bytes of `file` at `position` to `buffer`, into its spare capacity (not zeroed
/// first: the file's bytes overwrite it; zeroing a unit-sized buffer cost the node a memset per
/// read). `Ok(false)`: reading [`ReadFrom::PageCache`], some of the bytes are not cached (or the
/// file ends early, which the device read then reports).
fn read_at(file: &File, buffer: &mut Vec<u8>, length: usize, position: u64, from: ReadFrom) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    buffer.reserve_exact(length);
    let start = buffer.len();
    let end = start + length;
    let flags = if from == ReadFrom::PageCache { libc::RWF_NOWAIT } else { 0 };
    // Bounded: every pass appends at least one byte, or returns.
    while buffer.len() < end {
        let filled = buffer.len();
        let at = libc::off_t::try_from(position + (filled - start) as u64).map_err(std::io::Error::other)?;
        let spare = &mut buffer.spare_capacity_mut()[..end - filled];
        let want = spare.len();
        let target = libc::iovec { iov_base: spare.as_mut_ptr().cast(), iov_len: want };
        // SAFETY: the one iovec covers `spare`, spare capacity of `buffer` that is valid for writes
        // of `iov_len` bytes; preadv2 writes at most that many and reports how many.
        let read = unsafe { libc::preadv2(file.as_raw_fd(), &target, 1, at, flags) };
        if read < 0 {
            let error = std::io::Error::last_os_error();
            match error.kind() {
                std::io::ErrorKind::Interrupted => continue,
                std::io::ErrorKind::WouldBlock if from == ReadFrom::PageCache => return Ok(false),
                // A file system without RWF_NOWAIT (tmpfs): the caller reads on the blocking pool.
                _ if from == ReadFrom::PageCache
                    && matches!(error.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)) =>
                {
                    return Ok(false);
                }
                _ => return Err(error),
            }
        }
        let read = read as usize;
        if read == 0 {
            return if from == ReadFrom::PageCache { Ok(false) } else { Err(std::io::ErrorKind::UnexpectedEof.into()) };
        }
        if from == ReadFrom::PageCache && read < want {
            // A short read without the flag's error: part of the range is cached, part is not.
            return Ok(false);
        }
        assert!(read <= want, "preadv2 read more than it was given room for");
        // SAFETY: preadv2 initialised the first `read` bytes of the spare capacity.
        unsafe { buffer.set_len(filled + read) };
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
    }

    #[test]
    fn a_second_store_on_a_directory_in_use_is_refused_and_deletes_nothing() {
        let temp = tempfile::tempdir().unwrap();
        let store = UnitStore::open(temp.path(), 1 << 20).unwrap();
        let staged = store.begin_write(UnitId { stripe: 1, unit: 0 }, 10).unwrap();
        let temps = || fs::read_dir(temp.path().join("units")).unwrap().count();
        let before = temps();
        let Err(error) = UnitStore::open(temp.path(), 1 << 20) else { panic!("refused while in use") };
        assert!(matches!(error, NodeError::DirectoryInUse(_)), "{error}");
        assert!(error.to_string().contains("in use by another lowtail node"), "{error}");
        assert_eq!(temps(), before, "the refused open left the in-flight write's temp file alone");
        drop(staged);
        // A store gone while the next one waits for the lock (a process still exiting): taken.
        let dir = temp.path().to_path_buf();
        let waiting = std::thread::spawn(move || UnitStore::open(&dir, 1 << 20).map(drop));
        std::thread::sleep(DIRECTORY_LOCK_WAIT / 3);
        drop(store);
        waiting.join().unwrap().expect("the lock taken once the first store is gone");
        UnitStore::open(temp.path(), 1 << 20).expect("free once the first store is gone");
    }

    fn write(store: &UnitStore, id: UnitId, data: &[u8], chunk: usize) {
        let mut staged = store.begin_write(id, data.len() as u64).unwrap();
        for piece in data.chunks(chunk.max(1)) {
            staged.append(piece).unwrap();
        }
        store.commit(staged).unwrap();
    }

    #[test]
    fn a_cached_read_on_a_file_system_without_nowait_reads_ready_or_defers() {
        // tmpfs refuses RWF_NOWAIT (EOPNOTSUPP): a cached read must defer to the device read, not fail.
        let Ok(dir) = tempfile::tempdir_in("/dev/shm") else { return };
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        let data = pattern(5000, 1);
        let id = UnitId::new(1, 0);
        write(&store, id, &data, 1000);
        match store.read_range_cached(id, 10, 100) {
            None => {}
            Some(read) => assert_eq!(read.unwrap(), data[10..110]),
        }
        assert_eq!(store.read_range(id, 10, 100).unwrap(), data[10..110]);
    }

    #[test]
    fn a_described_unit_keeps_its_descriptor_and_reads_as_any_other() {
        let dir = tempfile::tempdir().unwrap();
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        let descriptor = Bytes::from_static(b"{\"what\":\"a segment\"}");
        let data = pattern(2 * BLOCK_BYTES as usize + 5, 3);
        let streamed = UnitId::new(1, 2);
        let mut staged = store.begin_described_write(streamed, data.len() as u64, descriptor.clone()).unwrap();
        staged.append(&data).unwrap();
        store.commit(staged).unwrap();
        let mut buffer = UnitImage::buffer(data.len());
        buffer.extend_from_slice(&data);
        let whole = UnitId::new(1, 3);
        store.commit_image(UnitImage::new(whole, buffer, descriptor.clone())).unwrap();
        for id in [streamed, whole] {
            assert_eq!(store.descriptor(id).unwrap(), descriptor);
            assert_eq!(store.read_range(id, 7, 100).unwrap(), data[7..107]);
            assert_eq!(store.unit_checksum(id).unwrap(), crc32c::crc32c(&data));
        }
        let (streamed_file, whole_file) =
            (std::fs::read(store.path_of(streamed)).unwrap(), std::fs::read(store.path_of(whole)).unwrap());
        let after_header = HEADER_BYTES as usize;
        assert!(streamed_file[after_header..] == whole_file[after_header..], "both writes make the same file");
        let reopened = {
            drop(store);
            UnitStore::open(dir.path(), 1 << 30).unwrap()
        };
        assert_eq!(reopened.unit_len(whole), Some(data.len() as u64));
        assert_eq!(reopened.descriptor(whole).unwrap(), descriptor);
        // A flipped byte of the descriptor is found; the data still reads.
        let mut raw = std::fs::read(reopened.path_of(whole)).unwrap();
        let at = raw.len() - 6;
        raw[at] ^= 1;
        std::fs::write(reopened.path_of(whole), raw).unwrap();
        assert!(matches!(reopened.descriptor(whole), Err(NodeError::Corrupt { .. })));
        let over = Bytes::from(vec![b'x'; MAX_DESCRIPTOR_BYTES + 1]);
        assert!(matches!(
            reopened.begin_described_write(UnitId::new(2, 0), 1, over),
            Err(NodeError::InvalidArgument(_))
        ));
    }

    #[test]
    fn a_unit_written_before_descriptors_reads_as_one_without() {
        let dir = tempfile::tempdir().unwrap();
        let data = pattern(1000, 9);
        let id = UnitId::new(4, 1);
        {
            let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
            write(&store, id, &data, 100);
        }
        // What the first format wrote: its magic, zero where descriptors are counted now.
        let path = dir.path().join("units").join(unit_file_name(id));
        let mut raw = std::fs::read(&path).unwrap();
        raw[0..8].copy_from_slice(MAGIC_V1);
        let crc = crc32c::crc32c(&raw[..36]);
        raw[36..40].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&path, raw).unwrap();
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        assert_eq!(store.read_range(id, 0, 1000).unwrap(), data);
        assert_eq!(store.descriptor(id).unwrap(), Bytes::new());
        assert!(store.corrupt_units().is_empty());
    }

    #[test]
    fn a_units_checksum_is_the_crc_of_its_data_from_the_block_table_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        for (stripe, len) in [(1u64, 0usize), (2, 1), (3, BLOCK_BYTES as usize), (4, 3 * BLOCK_BYTES as usize + 17)] {
            let data = pattern(len, stripe as u8);
            let id = UnitId::new(stripe, 0);
            write(&store, id, &data, 4096);
            assert_eq!(store.unit_checksum(id).unwrap(), crc32c::crc32c(&data), "{len} bytes");
        }
        let truncated = UnitId::new(4, 0);
        let file = OpenOptions::new().write(true).open(store.path_of(truncated)).unwrap();
        file.set_len(HEADER_BYTES + 10).unwrap();
        assert!(matches!(store.unit_checksum(truncated), Err(NodeError::Corrupt { .. })));
        assert!(store.corrupt_units().contains(&truncated));
        assert!(matches!(store.unit_checksum(UnitId::new(9, 0)), Err(NodeError::NotFound(_))));
    }

    #[test]
    fn write_read_ranges_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        let id = UnitId::new(7, 3);
        let data = pattern(3 * BLOCK_BYTES as usize + 1234, 1);
        write(&store, id, &data, 10_000);
        assert_eq!(store.read_range(id, 0, data.len() as u64).unwrap(), data);
        for (offset, len) in [(0, 1), (65535, 2), (65536, 65536), (100, 190_000), (data.len() as u64 - 1, 1), (5, 0)] {
            let got = store.read_range(id, offset, len).unwrap();
            assert_eq!(got, data[offset as usize..(offset + len) as usize], "range {offset}+{len}");
        }
        assert_eq!(store.unit_count(), 1);
        assert_eq!(store.unit_len(id), Some(data.len() as u64));
        assert!(store.delete(id).unwrap());
        assert!(!store.delete(id).unwrap());
        assert!(matches!(store.read_range(id, 0, 1), Err(NodeError::NotFound(_))));
        assert_eq!(store.unit_count(), 0);
    }

    #[test]
    fn a_batch_delete_removes_every_unit_named_and_counts_those_that_existed() {
        let dir = tempfile::tempdir().unwrap();
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        let kept = UnitId::new(8, 0);
        for unit in [0, 1, 0x8000, 0x8001] {
            write(&store, UnitId::new(7, unit), &pattern(100, 1), 1000);
        }
        write(&store, kept, &pattern(100, 2), 1000);
        let named: Vec<UnitId> = [0, 1, 2, 0x8000, 0x8001].into_iter().map(|unit| UnitId::new(7, unit)).collect();
        assert_eq!(store.delete_many(&named).unwrap(), 4, "unit 2 never existed");
        assert_eq!(store.delete_many(&named).unwrap(), 0, "deleting again changes nothing");
        for id in named {
            assert!(matches!(store.read_range(id, 0, 1), Err(NodeError::NotFound(_))), "{id:?}");
        }
        assert_eq!(store.unit_count(), 1);
        assert_eq!(store.read_range(kept, 0, 100).unwrap(), pattern(100, 2));
        assert_eq!(std::fs::read_dir(dir.path().join("units")).unwrap().count(), 1);
    }

    #[test]
    fn an_image_commit_writes_the_file_a_streamed_write_does() {
        let dir = tempfile::tempdir().unwrap();
        let store = UnitStore::open(dir.path(), 1 << 20).unwrap();
        for (stripe, len) in [(1, 0), (2, 1), (3, BLOCK_BYTES as usize), (4, 2 * BLOCK_BYTES as usize + 17)] {
            let data = pattern(len, stripe as u8);
            let (streamed, imaged) = (UnitId::new(stripe, 0), UnitId::new(stripe, 1));
            write(&store, streamed, &data, 1000);
            store.commit_image(UnitImage::with_data(imaged, &data)).unwrap();
            assert_eq!(store.read_range(imaged, 0, len as u64).unwrap(), data);
            assert_eq!(store.unit_len(imaged), Some(len as u64));
            let (a, b) =
                (std::fs::read(store.path_of(streamed)).unwrap(), std::fs::read(store.path_of(imaged)).unwrap());
            assert_eq!(a.len() as u64, file_len(len as u64));
            // Byte for byte but for the unit index in the header and the header's checksum.
            assert_eq!(a[HEADER_BYTES as usize..], b[HEADER_BYTES as usize..], "{len} bytes");
        }
        let too_long = UnitImage::with_data(UnitId::new(9, 0), &pattern((1 << 20) + 1, 9));
        assert!(matches!(store.commit_image(too_long), Err(NodeError::InvalidArgument(_))));
        assert_eq!(store.unit_count(), 8, "the refused image changed nothing");
        assert_eq!(std::fs::read_dir(dir.path().join("units")).unwrap().count(), 8, "and left no temp file");
    }

    #[test]
    fn a_delete_if_corrupt_removes_only_a_copy_still_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        let (bad, good) = (UnitId::new(3, 0), UnitId::new(3, 1));
        write(&store, bad, &pattern(100_000, 1), 4096);
        write(&store, good, &pattern(100, 2), 100);
        assert_eq!(store.delete_if_corrupt(good).unwrap(), ConditionalDelete::Changed, "not corrupt: kept");
        assert_eq!(store.delete_if_corrupt(UnitId::new(9, 9)).unwrap(), ConditionalDelete::Absent);
        let path = store.path_of(bad);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER_BYTES as usize + 10] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        assert!(matches!(store.read_range(bad, 0, 10), Err(NodeError::Corrupt { .. })));
        assert_eq!(store.corrupt_units(), vec![bad]);
        // Rewritten since it was found corrupt: the new copy stays.
        write(&store, bad, &pattern(100, 3), 100);
        assert_eq!(store.delete_if_corrupt(bad).unwrap(), ConditionalDelete::Changed);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER_BYTES as usize + 10] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        assert!(store.read_range(bad, 0, 10).is_err());
        let stored = store.stored_bytes();
        assert_eq!(store.delete_if_corrupt(bad).unwrap(), ConditionalDelete::Deleted);
        assert!(store.corrupt_units().is_empty() && !path.exists());
        assert_eq!(store.stored_bytes(), stored - 100);
        assert_eq!(store.unit_len(good), Some(100));
    }

    #[test]
    fn a_conditional_delete_keeps_a_unit_written_since_it_was_listed() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (UnitId::new(7, 0), UnitId::new(7, 1));
        let listed_before_reopen = {
            let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
            write(&store, a, b"first", 5);
            write(&store, b, b"other", 5);
            let (units, _) = store.list(None, 10);
            assert!(units.iter().all(|u| u.generation != 0));
            assert_ne!(units[0].generation, units[1].generation, "every unit has its own generation");
            let listed = units[0].generation;
            write(&store, a, b"second", 6);
            assert_eq!(store.delete_if_generation(a, listed).unwrap(), ConditionalDelete::Changed);
            assert_eq!(store.read_range(a, 0, 6).unwrap(), &b"second"[..], "the rewritten unit is kept");
            let (units, _) = store.list(None, 1);
            assert!(units[0].generation > listed, "a rewrite gets a later generation");
            assert_eq!(store.delete_if_generation(a, units[0].generation).unwrap(), ConditionalDelete::Deleted);
            assert!(matches!(store.read_range(a, 0, 1), Err(NodeError::NotFound(_))));
            assert_eq!(store.delete_if_generation(a, units[0].generation).unwrap(), ConditionalDelete::Absent);
            store.list(None, 10).0[0].generation
        };
        // A restart gives every unit a new, later generation: a listing from before matches nothing.
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        let (units, _) = store.list(None, 10);
        assert_eq!(units.len(), 1);
        assert!(units[0].generation > listed_before_reopen);
        assert_eq!(store.delete_if_generation(b, listed_before_reopen).unwrap(), ConditionalDelete::Changed);
        assert_eq!(store.read_range(b, 0, 5).unwrap(), &b"other"[..]);
    }

    #[test]
    fn empty_unit_and_exact_block_multiple() {
        let dir = tempfile::tempdir().unwrap();
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        write(&store, UnitId::new(1, 0), &[], 1);
        assert_eq!(store.read_range(UnitId::new(1, 0), 0, 0).unwrap().len(), 0);
        let data = pattern(2 * BLOCK_BYTES as usize, 9);
        write(&store, UnitId::new(1, 1), &data, BLOCK_BYTES as usize);
        assert_eq!(store.read_range(UnitId::new(1, 1), 0, data.len() as u64).unwrap(), data);
    }

    #[test]
    fn durable_across_reopen_and_rewrite_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let data = pattern(200_000, 2);
        {
            let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
            write(&store, UnitId::new(1, 0), &data, 4096);
            write(&store, UnitId::new(2, 5), b"hello", 2);
            // An interrupted write leaves only a temp file behind.
            let mut staged = store.begin_write(UnitId::new(3, 0), 10).unwrap();
            staged.append(b"abc").unwrap();
            std::mem::forget(staged);
        }
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        assert_eq!(store.read_range(UnitId::new(1, 0), 0, data.len() as u64).unwrap(), data);
        assert_eq!(store.read_range(UnitId::new(2, 5), 0, 5).unwrap(), &b"hello"[..]);
        let (units, truncated) = store.list(None, 10);
        let listed: Vec<(UnitId, u64)> = units.iter().map(|u| (u.id, u.data_len)).collect();
        assert_eq!(listed, vec![(UnitId::new(1, 0), data.len() as u64), (UnitId::new(2, 5), 5)]);
        assert!(!truncated);
        let leftovers = fs::read_dir(dir.path().join("units")).unwrap().count();
        assert_eq!(leftovers, 2, "temp file of the interrupted write removed");
        write(&store, UnitId::new(2, 5), b"bye", 3);
        assert_eq!(store.read_range(UnitId::new(2, 5), 0, 3).unwrap(), &b"bye"[..]);
    }

    #[test]
    fn list_pages() {
        let dir = tempfile::tempdir().unwrap();
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        for stripe in 0..5 {
            write(&store, UnitId::new(stripe, 1), b"x", 1);
        }
        let (first, truncated) = store.list(None, 2);
        assert!(truncated);
        assert_eq!(first.iter().map(|u| u.id.stripe).collect::<Vec<_>>(), vec![0, 1]);
        let (rest, truncated) = store.list(Some(first[1].id), 10);
        assert!(!truncated);
        assert_eq!(rest.iter().map(|u| u.id.stripe).collect::<Vec<_>>(), vec![2, 3, 4]);
    }

    #[test]
    fn flipped_byte_is_detected_and_other_blocks_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        let id = UnitId::new(9, 2);
        let data = pattern(4 * BLOCK_BYTES as usize, 3);
        write(&store, id, &data, 65_000);
        // Flip one byte inside block 2.
        let path = store.path_of(id);
        let mut raw = fs::read(&path).unwrap();
        let at = (HEADER_BYTES + 2 * BLOCK_BYTES + 17) as usize;
        raw[at] ^= 0x40;
        fs::write(&path, raw).unwrap();
        let err = store.read_range(id, 2 * BLOCK_BYTES, 10).unwrap_err();
        assert!(matches!(err, NodeError::Corrupt { unit, .. } if unit == id), "{err}");
        assert!(matches!(store.read_range(id, 0, data.len() as u64), Err(NodeError::Corrupt { .. })));
        assert_eq!(store.corrupt_units(), vec![id]);
        // Blocks 0, 1 and 3 verify on their own.
        assert_eq!(store.read_range(id, 0, 2 * BLOCK_BYTES).unwrap(), data[..2 * BLOCK_BYTES as usize]);
        assert_eq!(store.read_range(id, 3 * BLOCK_BYTES, 5).unwrap(), data[3 * BLOCK_BYTES as usize..][..5]);
        // A rewrite clears the mark.
        write(&store, id, &data, 1 << 20);
        assert!(store.corrupt_units().is_empty());
        assert_eq!(store.read_range(id, 0, data.len() as u64).unwrap(), data);
    }

    #[test]
    fn a_cached_read_answers_from_the_page_cache_or_not_at_all() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        let id = UnitId::new(4, 1);
        let data = pattern(3 * BLOCK_BYTES as usize + 5, 7);
        write(&store, id, &data, 1 << 20);
        for (offset, len) in [(0, data.len() as u64), (70_000, 3), (3 * BLOCK_BYTES, 5), (9, 0)] {
            let cached = store.read_range_cached(id, offset, len).expect("just written: in the page cache");
            assert_eq!(cached.unwrap(), data[offset as usize..(offset + len) as usize], "{offset}+{len}");
        }
        assert!(matches!(store.read_range_cached(id, 0, 1 << 30), Some(Err(NodeError::OutOfRange { .. }))));
        assert!(matches!(store.read_range_cached(UnitId::new(4, 2), 0, 1), Some(Err(NodeError::NotFound(_)))));
        // Clean pages (the commit fsynced them) dropped from the cache: the cached read declines, the
        // device read serves, and then the cache holds them again.
        let file = File::open(store.path_of(id)).unwrap();
        // SAFETY: fadvise on an open descriptor only advises the kernel; no memory is touched.
        assert_eq!(unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) }, 0);
        assert!(store.read_range_cached(id, 0, data.len() as u64).is_none(), "evicted: must not wait for the disk");
        assert_eq!(store.read_range(id, 0, data.len() as u64).unwrap(), data);
        assert_eq!(store.read_range_cached(id, 0, data.len() as u64).unwrap().unwrap(), data);
        // A flipped byte is caught by the cached read too.
        let mut raw = fs::read(store.path_of(id)).unwrap();
        raw[(HEADER_BYTES + BLOCK_BYTES + 1) as usize] ^= 1;
        fs::write(store.path_of(id), raw).unwrap();
        let flipped = store.read_range_cached(id, BLOCK_BYTES, 10).expect("rewritten: cached");
        assert!(matches!(flipped, Err(NodeError::Corrupt { .. })));
        assert_eq!(store.corrupt_units(), vec![id]);
    }

    #[test]
    fn corrupt_header_and_truncated_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        let (a, b) = (UnitId::new(1, 0), UnitId::new(1, 1));
        write(&store, a, &pattern(1000, 4), 1000);
        write(&store, b, &pattern(1000, 5), 1000);
        let mut raw = fs::read(store.path_of(a)).unwrap();
        raw[10] ^= 1;
        fs::write(store.path_of(a), raw).unwrap();
        let file = OpenOptions::new().write(true).open(store.path_of(b)).unwrap();
        file.set_len(500).unwrap();
        assert!(matches!(store.read_range(a, 0, 1), Err(NodeError::Corrupt { .. })));
        assert!(matches!(store.read_range(b, 0, 1), Err(NodeError::Corrupt { .. })));
        assert_eq!(store.corrupt_units(), vec![a, b]);
        // Reopening finds the bad header again.
        drop(store);
        let store = UnitStore::open(dir.path(), 1 << 30).unwrap();
        assert_eq!(store.corrupt_units(), vec![a]);
    }

    #[test]
    fn bad_input_is_refused_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = UnitStore::open(dir.path(), 1000).unwrap();
        let id = UnitId::new(4, 4);
        write(&store, id, &pattern(100, 6), 100);
        assert!(matches!(
            store.read_range(id, 90, 11),
            Err(NodeError::OutOfRange { offset: 90, length: 11, unit_len: 100, .. })
        ));
        assert!(matches!(store.read_range(id, u64::MAX, 2), Err(NodeError::OutOfRange { .. })));
        assert!(matches!(store.read_range(UnitId::new(4, 5), 0, 1), Err(NodeError::NotFound(_))));
        assert!(matches!(store.begin_write(id, 1001), Err(NodeError::InvalidArgument(_))));
        let mut staged = store.begin_write(id, 10).unwrap();
        staged.append(b"12345").unwrap();
        assert!(matches!(staged.append(b"123456"), Err(NodeError::InvalidArgument(_))));
        assert!(matches!(store.commit(staged), Err(NodeError::InvalidArgument(_))));
        assert_eq!(store.read_range(id, 0, 100).unwrap(), pattern(100, 6), "old version intact");
        assert_eq!(fs::read_dir(dir.path().join("units")).unwrap().count(), 1, "no temp file left");
    }
}
