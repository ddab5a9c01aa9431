//! A storage node's data directory on a file system of its own, so the swarm can fill it and free
//! it again: a tmpfs mounted on the directory before the node first starts (root only). Filling
//! shrinks the tmpfs to what it holds and fills the rest with a filler file, so a full disk costs
//! no memory beyond the node's own data; freeing deletes the filler and gives the size back.
//!
//! Owns its mount (unmounted when dropped; the node's units go with it, its log lives elsewhere).
//! Must not touch the node's files.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The filler's name, in the node's directory.
const FILLER: &str = "swarm-filler";
/// Tries of shrinking the tmpfs to what it holds while the node writes.
const SHRINK_TRIES: usize = 50;
/// Bytes the filler writes at once.
const FILLER_CHUNK_BYTES: usize = 64 << 10;

/// Why full-disk faults cannot run here, if they cannot: they mount a tmpfs, which needs root.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid(2) cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    (!root).then(|| {
        "full-disk faults mount a tmpfs per node, which needs root: run as root, or leave them out with \
         --without full-disk"
            .to_string()
    })
}

/// A node's data directory on a tmpfs of its own.
#[derive(Debug)]
pub struct NodeDisk {
    dir: PathBuf,
    size_bytes: u64,
    full: bool,
}

impl NodeDisk {
    /// Mounts a tmpfs of `size_bytes` on `dir` (created, and empty: mounted before the node's
    /// first start).
    pub fn mount(dir: &Path, size_bytes: u64) -> anyhow::Result<NodeDisk> {
        if let Some(why) = unavailable() {
            bail!(why);
        }
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        mount_tmpfs(dir, size_bytes, 0).with_context(|| format!("cannot mount a tmpfs on {}", dir.display()))?;
        Ok(NodeDisk { dir: dir.to_path_buf(), size_bytes, full: false })
    }

    /// Whether the disk is full now.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// Fills the file system: shrinks it to what it holds, then writes the filler until no byte is
    /// left.
    pub fn fill(&mut self) -> anyhow::Result<()> {
        let mut shrunk = false;
        for _ in 0..SHRINK_TRIES {
            // Refused while the node writes more than the size named: try again with its new usage.
            if mount_tmpfs(&self.dir, used_bytes(&self.dir)?.max(4096), libc::MS_REMOUNT).is_ok() {
                shrunk = true;
                break;
            }
        }
        anyhow::ensure!(shrunk, "cannot shrink the tmpfs on {} to what it holds", self.dir.display());
        self.full = true;
        let mut filler = std::fs::File::create(self.dir.join(FILLER)).context("cannot create the filler")?;
        let zeros = vec![0u8; FILLER_CHUNK_BYTES];
        // The slack left by the shrink is small; bounded by the size given back at worst.
        for _ in 0..=self.size_bytes / FILLER_CHUNK_BYTES as u64 {
            if let Err(error) = filler.write_all(&zeros) {
                if error.raw_os_error() == Some(libc::ENOSPC) {
                    return Ok(());
                }
                return Err(error).context("cannot write the filler");
            }
        }
        bail!("{} did not fill up", self.dir.display())
    }

    /// Deletes the filler and gives the file system its size back.
    pub fn free(&mut self) -> anyhow::Result<()> {
        match std::fs::remove_file(self.dir.join(FILLER)) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error).context("cannot delete the filler"),
        }
        mount_tmpfs(&self.dir, self.size_bytes, libc::MS_REMOUNT)
            .with_context(|| format!("cannot give the tmpfs on {} its size back", self.dir.display()))?;
        self.full = false;
        Ok(())
    }
}

impl Drop for NodeDisk {
    fn drop(&mut self) {
        let Ok(target) = CString::new(self.dir.as_os_str().as_bytes()) else { return };
        // SAFETY: umount2(2) with a valid C string; MNT_DETACH unmounts even while a file is open.
        if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
            tracing::warn!(dir = %self.dir.display(), error = %std::io::Error::last_os_error(), "cannot unmount");
        }
    }
}

/// Mounts (or, with `MS_REMOUNT`, resizes) a tmpfs of `size_bytes` on `dir`.
fn mount_tmpfs(dir: &Path, size_bytes: u64, flags: libc::c_ulong) -> std::io::Result<()> {
    let cstr = |bytes: &[u8]| CString::new(bytes).map_err(std::io::Error::other);
    let (source, target, kind) = (cstr(b"tmpfs")?, cstr(dir.as_os_str().as_bytes())?, cstr(b"tmpfs")?);
    let options = cstr(format!("size={size_bytes},mode=0755").as_bytes())?;
    // SAFETY: mount(2) with valid C strings that outlive the call.
    let done = unsafe { libc::mount(source.as_ptr(), target.as_ptr(), kind.as_ptr(), flags, options.as_ptr().cast()) };
    if done == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// Bytes in use on the file system of `dir`.
fn used_bytes(dir: &Path) -> anyhow::Result<u64> {
    let path = CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: a statvfs is plain data; all zeroes is a valid value.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs(2) with a valid C string writes into the struct we own.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stats) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("statvfs {}", dir.display()));
    }
    Ok((stats.f_blocks - stats.f_bfree) as u64 * stats.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_refuses_writes_until_freed_and_then_has_its_size_back() {
        if unavailable().is_some() {
            // Not root: the refusal itself is what there is to check.
            assert!(NodeDisk::mount(Path::new("/nonexistent/swarm"), 1 << 20).is_err());
            return;
        }
        let temp = std::env::temp_dir().join(format!("swarm-disk-{}", std::process::id()));
        let mut disk = NodeDisk::mount(&temp, 8 << 20).unwrap();
        std::fs::write(temp.join("unit"), vec![7u8; 1 << 20]).unwrap();
        disk.fill().unwrap();
        assert!(disk.is_full());
        let refused = std::fs::write(temp.join("more"), vec![7u8; 64 << 10]);
        assert_eq!(refused.unwrap_err().raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(std::fs::read(temp.join("unit")).unwrap().len(), 1 << 20, "what was there stays");
        disk.free().unwrap();
        std::fs::write(temp.join("more"), vec![7u8; 4 << 20]).unwrap();
        drop(disk);
        assert!(!temp.join("unit").exists(), "unmounted");
        let _ = std::fs::remove_dir_all(&temp);
    }
}
