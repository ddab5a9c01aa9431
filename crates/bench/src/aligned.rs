//! A heap byte buffer whose start is 64-byte aligned, so that benchmarks
//! measure kernels on cache-line-aligned units as a storage node would hold
//! them, not on whatever alignment the allocator happened to return.
//!
//! Owns: allocation, zeroing and release of such buffers.
//! Must not: grow or reallocate (a benchmark buffer has one size for life).

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// Alignment of every [`AlignedBuf`]: one x86 cache line, and the width of
/// the widest (AVX-512) vector load.
pub const ALIGN_BYTES: usize = 64;

/// A zero-initialised, fixed-length, 64-byte-aligned byte buffer.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like Vec<u8>); nothing
// in it is tied to a thread.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`, which is Sync.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocates `len` zero bytes. A zero length allocates nothing.
    pub fn zeroed(len: usize) -> AlignedBuf {
        if len == 0 {
            // A dangling pointer aligned to ALIGN_BYTES is a valid empty slice.
            let ptr = NonNull::new(ALIGN_BYTES as *mut u8).expect("non-zero address");
            return AlignedBuf { ptr, len };
        }
        let layout = Self::layout(len);
        // SAFETY: `layout` has a non-zero size (len > 0 was checked above).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else { alloc::handle_alloc_error(layout) };
        AlignedBuf { ptr, len }
    }

    /// Allocates a copy of `bytes`.
    pub fn from_slice(bytes: &[u8]) -> AlignedBuf {
        let mut buf = AlignedBuf::zeroed(bytes.len());
        buf.as_mut_slice().copy_from_slice(bytes);
        buf
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, ALIGN_BYTES).expect("buffer size overflows isize")
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for `len` initialised bytes (zeroed at
        // allocation) for as long as `self` lives, and `&self` forbids writes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated in `zeroed` with exactly this layout, freed once.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
        }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf").field("len", &self.len).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_zeroed_and_writable() {
        for len in [0, 1, 63, 64, 65, 4096, 1 << 20] {
            let mut buf = AlignedBuf::zeroed(len);
            assert_eq!(buf.len(), len);
            assert_eq!(buf.as_slice().as_ptr() as usize % ALIGN_BYTES, 0, "len {len}");
            assert!(buf.as_slice().iter().all(|&b| b == 0));
            buf.as_mut_slice().fill(0xA5);
            assert!(buf.as_slice().iter().all(|&b| b == 0xA5));
        }
        assert_eq!(AlignedBuf::from_slice(b"lowtail").as_slice(), b"lowtail");
    }
}
