//! A storage node's data directory on a file system of its own, so the swarm can fill it and free
//! it again: an ext4 in a sparse image file, loop-mounted on the directory before the node first
//! starts (root only). Not a tmpfs: the node reads the page cache with `RWF_NOWAIT`, which tmpfs
//! refuses (EOPNOTSUPP), and the node fails such reads. Filling allocates the free space to a
//! filler file (`fallocate`: no bytes written, the image stays sparse); freeing deletes it.
//!
//! Owns its mount and image (unmounted and deleted when dropped; the node's units go with them, its
//! log lives elsewhere). Must not touch the node's files.

use std::ffi::CString;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// The filler's name, in the node's directory.
const FILLER: &str = "swarm-filler";
/// Bytes the filler writes at once, after `fallocate` took what it could.
const FILLER_CHUNK_BYTES: usize = 64 << 10;
/// Most chunks written after `fallocate` (the slack of blocks freed meanwhile).
const FILLER_MAX_CHUNKS: usize = 16_384;
/// Tries of `fallocate`, each asking for less.
const ALLOCATE_TRIES: usize = 64;

/// Why full-disk faults cannot run here, if they cannot: a loop mount needs root and `mkfs.ext4`.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid(2) cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some(
            "full-disk faults loop-mount a file system per node, which needs root: run as root, or leave them \
             out with --without full-disk"
                .to_string(),
        );
    }
    let mkfs = Command::new("mkfs.ext4").arg("-V").output();
    (!mkfs.is_ok_and(|out| out.status.success())).then(|| {
        "full-disk faults need mkfs.ext4 (Debian: e2fsprogs), or leave them out with --without full-disk".to_string()
    })
}

/// A node's data directory on a file system of its own.
#[derive(Debug)]
pub struct NodeDisk {
    dir: PathBuf,
    image: PathBuf,
    full: bool,
}

impl NodeDisk {
    /// Makes an ext4 of `size_bytes` in the sparse file `image` and mounts it on `dir` (created,
    /// and empty: mounted before the node's first start).
    pub fn mount(dir: &Path, image: &Path, size_bytes: u64) -> anyhow::Result<NodeDisk> {
        if let Some(why) = unavailable() {
            bail!(why);
        }
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        if let Some(parent) = image.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::File::create(image)?.set_len(size_bytes)?;
        // No blocks reserved for root (the nodes run as root here: a full disk is full for them).
        run(Command::new("mkfs.ext4").args(["-q", "-F", "-m", "0"]).arg(image))?;
        // discard: space the node frees is given back to the swarm's own disk.
        run(Command::new("mount").args(["-o", "loop,discard"]).arg(image).arg(dir))?;
        Ok(NodeDisk { dir: dir.to_path_buf(), image: image.to_path_buf(), full: false })
    }

    /// Whether the disk is full now.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// Fills the file system: the filler takes every free block.
    pub fn fill(&mut self) -> anyhow::Result<()> {
        // Appending: the writes after `fallocate` go past what it allocated.
        let mut filler = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(FILLER))
            .context("cannot create the filler")?;
        self.full = true;
        allocate_most(&filler, free_bytes(&self.dir)?);
        let zeros = vec![0u8; FILLER_CHUNK_BYTES];
        for _ in 0..FILLER_MAX_CHUNKS {
            if let Err(error) = filler.write_all(&zeros).and_then(|()| filler.sync_data()) {
                if error.raw_os_error() == Some(libc::ENOSPC) {
                    return Ok(());
                }
                return Err(error).context("cannot write the filler");
            }
        }
        bail!("{} did not fill up", self.dir.display())
    }

    /// Deletes the filler: the space is free again.
    pub fn free(&mut self) -> anyhow::Result<()> {
        match std::fs::remove_file(self.dir.join(FILLER)) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error).context("cannot delete the filler"),
        }
        self.full = false;
        Ok(())
    }
}

impl Drop for NodeDisk {
    fn drop(&mut self) {
        let Ok(target) = CString::new(self.dir.as_os_str().as_bytes()) else { return };
        // SAFETY: umount2(2) with a valid C string; MNT_DETACH unmounts even while a file is open
        // (the loop device is released with the last reference).
        if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
            tracing::warn!(dir = %self.dir.display(), error = %std::io::Error::last_os_error(), "cannot unmount");
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

/// Allocates to `file` as much of `free_bytes` as the file system gives (its extent tree takes
/// some of what it reports free): each refusal asks for 1/64 less, at most [`ALLOCATE_TRIES`] times.
fn allocate_most(file: &std::fs::File, free_bytes: u64) {
    let mut asked = free_bytes;
    for _ in 0..ALLOCATE_TRIES {
        // SAFETY: fallocate(2) on a descriptor we own.
        if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, asked as libc::off_t) } == 0 {
            return;
        }
        asked -= (asked / 64).max(1 << 20).min(asked);
    }
    tracing::debug!(free_bytes, asked, "fallocate fell short; writing the rest");
}

/// Runs `command`, failing with its output unless it succeeds.
fn run(command: &mut Command) -> anyhow::Result<()> {
    let output = command.output().with_context(|| format!("cannot run {command:?}"))?;
    anyhow::ensure!(
        output.status.success(),
        "{command:?} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(())
}

/// Bytes free on the file system of `dir`.
fn free_bytes(dir: &Path) -> anyhow::Result<u64> {
    let path = CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: a statvfs is plain data; all zeroes is a valid value.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs(2) with a valid C string writes into the struct we own.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stats) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("statvfs {}", dir.display()));
    }
    Ok(stats.f_bavail as u64 * stats.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_refuses_writes_until_freed_and_then_has_its_size_back() {
        if unavailable().is_some() {
            // Not root: the refusal itself is what there is to check.
            assert!(NodeDisk::mount(Path::new("/nonexistent/swarm"), Path::new("/nonexistent/i"), 1 << 20).is_err());
            return;
        }
        let temp = std::env::temp_dir().join(format!("swarm-disk-{}", std::process::id()));
        let image = std::env::temp_dir().join(format!("swarm-disk-{}.img", std::process::id()));
        // Large enough that fallocate of all that is reported free is refused (its extent tree).
        let mut disk = NodeDisk::mount(&temp, &image, 2 << 30).unwrap();
        std::fs::write(temp.join("unit"), vec![7u8; 1 << 20]).unwrap();
        disk.fill().unwrap();
        assert!(disk.is_full());
        assert!(std::fs::metadata(temp.join(FILLER)).unwrap().len() > 1 << 30, "allocated, not written");
        let refused = std::fs::write(temp.join("more"), vec![7u8; 64 << 10]);
        assert_eq!(refused.unwrap_err().raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(std::fs::read(temp.join("unit")).unwrap().len(), 1 << 20, "what was there stays");
        disk.free().unwrap();
        std::fs::write(temp.join("more"), vec![7u8; 4 << 20]).unwrap();
        drop(disk);
        assert!(!temp.join("unit").exists(), "unmounted");
        assert!(!image.exists(), "the image is deleted");
        let _ = std::fs::remove_dir_all(&temp);
    }
}
