//! Coalesced directory fsyncs: many threads that each changed the units directory (a rename, an
//! unlink) and need the change durable share one `fsync` of the directory, as a group commit
//! shares one log flush. A caller returns only after a sync that *began after its call* succeeded,
//! so its change is covered; while one sync runs, the callers that arrive wait for the next, which
//! one of them runs for all. A seal's hundreds of replica deletes on one node cost a few syncs,
//! not one each.
//!
//! Owns: the bookkeeping of which changes a finished sync covers. Must not: know what changed, or
//! sync anything but the handle it is given.

use std::fs::File;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Tickets handed out and covered; see the module documentation.
#[derive(Debug, Default)]
struct Tickets {
    /// The last ticket handed out (one per caller).
    issued: u64,
    /// Every ticket up to this one is covered by a sync that succeeded.
    covered: u64,
    /// A sync is running.
    syncing: bool,
}

/// A directory's coalesced syncs.
#[derive(Debug, Default)]
pub struct DirSync {
    tickets: Mutex<Tickets>,
    finished: Condvar,
}

impl DirSync {
    /// Makes every change the caller made to `dir` before this call durable: waits for a sync
    /// that began after the call, running it when none is running. A failed sync is the error of
    /// the caller that ran it; a waiter it failed runs at most one sync of its own.
    pub fn sync(&self, dir: &File) -> std::io::Result<()> {
        self.run(|| dir.sync_all())
    }

    /// [`DirSync::sync`] with `sync_all` as the sync.
    fn run(&self, sync_all: impl Fn() -> std::io::Result<()>) -> std::io::Result<()> {
        let mut tickets = self.lock();
        tickets.issued += 1;
        let ticket = tickets.issued;
        // Bounded: each pass either returns or waits for a running sync to finish; a caller runs
        // at most one sync, and returns with its result.
        loop {
            if tickets.covered >= ticket {
                return Ok(());
            }
            if !tickets.syncing {
                tickets.syncing = true;
                let covers = tickets.issued;
                drop(tickets);
                let synced = sync_all();
                tickets = self.lock();
                tickets.syncing = false;
                if synced.is_ok() {
                    tickets.covered = tickets.covered.max(covers);
                }
                self.finished.notify_all();
                return synced;
            }
            tickets = self.finished.wait(tickets).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Tickets> {
        self.tickets.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc;

    #[test]
    fn callers_that_arrive_during_a_sync_share_the_next_one() {
        let syncs = Arc::new(DirSync::default());
        let runs = Arc::new(AtomicU64::new(0));
        let (release, held) = mpsc::channel::<()>();
        let held = Arc::new(Mutex::new(held));
        let call = |first: bool| {
            let (syncs, runs, held) = (Arc::clone(&syncs), Arc::clone(&runs), Arc::clone(&held));
            std::thread::spawn(move || {
                syncs.run(|| {
                    runs.fetch_add(1, Ordering::SeqCst);
                    if first {
                        held.lock().unwrap().recv().unwrap();
                    }
                    Ok(())
                })
            })
        };
        let first = call(true);
        while !syncs.lock().syncing {
            std::thread::yield_now();
        }
        let waiters: Vec<_> = (0..3).map(|_| call(false)).collect();
        while syncs.lock().issued < 4 {
            std::thread::yield_now();
        }
        release.send(()).unwrap();
        first.join().unwrap().unwrap();
        for waiter in waiters {
            waiter.join().unwrap().unwrap();
        }
        assert_eq!(runs.load(Ordering::SeqCst), 2, "the first caller's sync, then one for the three that waited");
        let tickets = syncs.lock();
        assert_eq!((tickets.issued, tickets.covered, tickets.syncing), (4, 4, false));
    }

    #[test]
    fn a_failed_sync_is_its_callers_error_and_covers_nothing() {
        let syncs = DirSync::default();
        let error = syncs.run(|| Err(std::io::Error::other("disk gone"))).unwrap_err();
        assert_eq!(error.to_string(), "disk gone");
        assert_eq!(syncs.lock().covered, 0);
        let dir = tempfile::tempdir().unwrap();
        syncs.sync(&File::open(dir.path()).unwrap()).unwrap();
        assert_eq!(syncs.lock().covered, 2, "a later sync covers the caller after it");
    }
}
