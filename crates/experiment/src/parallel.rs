//! Independent jobs on a few threads, results in job order.
//!
//! Owns: the worker loop and progress reporting. Must not: let the order in which threads finish
//! reach the results (every result lands in its job's slot), or run more threads than asked.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A job finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Jobs finished so far (this one included).
    pub done: usize,
    /// Jobs in all.
    pub total: usize,
    /// The finished job's label.
    pub label: String,
}

/// Runs `work` on every job with `threads` worker threads (at least 1, at most one per job) and
/// returns the results in job order. `progress` is called once per finished job, from the worker
/// that finished it. A panicking job panics the caller once every worker has stopped.
pub fn run_parallel<J, R, W, L, P>(jobs: &[J], threads: usize, label: L, work: W, progress: P) -> Vec<R>
where
    J: Sync,
    R: Send,
    W: Fn(&J) -> R + Sync,
    L: Fn(&J) -> String + Sync,
    P: Fn(Progress) + Sync,
{
    let threads = threads.clamp(1, jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<R>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                // Each iteration claims a distinct job, so the loop ends after jobs.len() claims.
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(index) else { break };
                    let result = work(job);
                    slots.lock().unwrap_or_else(|poisoned| poisoned.into_inner())[index] = Some(result);
                    let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                    progress(Progress { done: finished, total: jobs.len(), label: label(job) });
                }
            });
        }
    });
    let slots = slots.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
    slots.into_iter().map(|slot| slot.expect("every job ran")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_job_order_whatever_the_threads() {
        let jobs: Vec<u64> = (0..50).collect();
        for threads in [1, 2, 7, 100] {
            let calls = Mutex::new(Vec::new());
            let results = run_parallel(
                &jobs,
                threads,
                |job| format!("job {job}"),
                // Uneven work so that threads finish out of order.
                |&job| (0..(50 - job) * 1000).fold(job, |acc, x| acc.wrapping_add(x % 3)),
                |progress| calls.lock().unwrap().push(progress),
            );
            let expected: Vec<u64> =
                jobs.iter().map(|&job| (0..(50 - job) * 1000).fold(job, |acc, x| acc.wrapping_add(x % 3))).collect();
            assert_eq!(results, expected, "{threads} threads");
            let calls = calls.into_inner().unwrap();
            assert_eq!(calls.len(), jobs.len());
            let mut done: Vec<usize> = calls.iter().map(|p| p.done).collect();
            done.sort();
            assert_eq!(done, (1..=jobs.len()).collect::<Vec<_>>());
            assert!(calls.iter().all(|p| p.total == jobs.len()));
        }
    }

    #[test]
    fn no_jobs_no_calls() {
        let results: Vec<u8> = run_parallel(&[] as &[u8], 4, |_| String::new(), |&j| j, |_| panic!("no progress"));
        assert!(results.is_empty());
    }
}
