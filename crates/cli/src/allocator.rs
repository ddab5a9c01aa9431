//! The process allocator and what it reports: mimalloc (or, with `--features system-allocator`,
//! the C library's malloc for heap profilers), wrapped in a counter of the bytes the program holds,
//! and the gauges that put the live heap beside what the allocator took from the system.
//!
//! Owns the global allocator and the `lowtail_process_*` memory gauges. Must not allocate inside
//! the allocator's own paths, nor change what is allocated.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// mimalloc returns freed memory to the system; glibc's malloc held the gateway's freed buffers in
/// its arenas (see docs/data-path.md, "Memory").
#[cfg(not(feature = "system-allocator"))]
type Inner = mimalloc::MiMalloc;
#[cfg(not(feature = "system-allocator"))]
const INNER: Inner = mimalloc::MiMalloc;
#[cfg(feature = "system-allocator")]
type Inner = std::alloc::System;
#[cfg(feature = "system-allocator")]
const INNER: Inner = std::alloc::System;

#[global_allocator]
static ALLOCATOR: Counting = Counting { inner: INNER, live_bytes: AtomicUsize::new(0) };

/// An allocator that counts the bytes its callers hold: one relaxed atomic add per call, nothing
/// against a millisecond read, and the one figure that tells a leak (the live heap grows) from an
/// allocator that keeps what was freed (the resident memory grows, the live heap does not).
struct Counting {
    inner: Inner,
    live_bytes: AtomicUsize,
}

// SAFETY: every call is forwarded unchanged to the inner allocator; the counter only observes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on unchanged.
        let pointer = unsafe { self.inner.alloc(layout) };
        if !pointer.is_null() {
            self.live_bytes.fetch_add(layout.size(), Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on unchanged.
        let pointer = unsafe { self.inner.alloc_zeroed(layout) };
        if !pointer.is_null() {
            self.live_bytes.fetch_add(layout.size(), Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { self.inner.dealloc(pointer, layout) };
        self.live_bytes.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is passed on unchanged.
        let moved = unsafe { self.inner.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            self.live_bytes.fetch_add(new_size, Ordering::Relaxed);
            self.live_bytes.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        moved
    }
}

/// Bytes the program holds now (allocated and not yet freed), as the allocator was asked.
pub fn live_heap_bytes() -> usize {
    ALLOCATOR.live_bytes.load(Ordering::Relaxed)
}

/// Bytes the allocator has committed from the system (`None` on the C library's malloc, which does
/// not say). The gap to [`live_heap_bytes`] is what it keeps for reuse.
pub fn allocator_committed_bytes() -> Option<usize> {
    #[cfg(not(feature = "system-allocator"))]
    {
        let mut fields = [0usize; 8];
        let [elapsed, user, system, rss, peak_rss, commit, peak_commit, faults] = &mut fields;
        // SAFETY: mi_process_info writes one usize through each of the eight valid pointers.
        unsafe { libmimalloc_sys::mi_process_info(elapsed, user, system, rss, peak_rss, commit, peak_commit, faults) };
        Some(*commit)
    }
    #[cfg(feature = "system-allocator")]
    None
}

/// How often the memory gauges are refreshed.
const GAUGE_INTERVAL: Duration = Duration::from_secs(5);

/// Starts a thread that sets `lowtail_process_heap_live_bytes` and
/// `lowtail_process_allocator_committed_bytes` every few seconds, for as long as the process runs.
pub fn start_gauges() {
    let spawned = std::thread::Builder::new().name("memory-gauges".into()).spawn(|| {
        loop {
            metrics::gauge!("lowtail_process_heap_live_bytes").set(live_heap_bytes() as f64);
            if let Some(committed) = allocator_committed_bytes() {
                metrics::gauge!("lowtail_process_allocator_committed_bytes").set(committed as f64);
            }
            std::thread::sleep(GAUGE_INTERVAL);
        }
    });
    if let Err(error) = spawned {
        eprintln!("lowtail: no memory gauges: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_heap_counts_what_is_held_and_forgets_what_is_freed() {
        // Other test threads allocate too, so the check allows their noise against 64 MiB.
        const HELD: usize = 64 << 20;
        let before = live_heap_bytes();
        let block = vec![1u8; HELD];
        let holding = live_heap_bytes();
        assert!(holding >= before + HELD - (8 << 20), "held 64 MiB: {before} -> {holding}");
        drop(block);
        let after = live_heap_bytes();
        assert!(after + HELD - (8 << 20) <= holding, "freed 64 MiB: {holding} -> {after}");
    }

    #[cfg(not(feature = "system-allocator"))]
    #[test]
    fn the_allocator_says_what_it_committed() {
        let committed = allocator_committed_bytes().expect("mimalloc reports its commit");
        assert!(committed > 0);
    }
}
