//! CPU time consumed by the calling thread. Benchmarks divide bytes by this
//! rather than by wall time so that a run preempted by another process on a
//! shared machine is not charged for the time it did not run.
//!
//! Owns: reading the thread CPU clock.
//! Must not: be used to time work spread over several threads (it sees only
//! the caller's).

use std::time::Duration;

/// CPU time the calling thread has used since it started.
pub fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is
    // supported by every Linux and BSD kernel lowtail targets.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    // The call fails only for an unknown clock id, which would be a build for
    // an unsupported platform: no measurement could be trusted after that.
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Runs `work` and returns the thread CPU time it took.
pub fn cpu_time_of(work: impl FnOnce()) -> Duration {
    let start = thread_cpu_time();
    work();
    thread_cpu_time().saturating_sub(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_consumes_cpu_time_and_sleep_does_not() {
        let busy = cpu_time_of(|| {
            let mut x = 0u64;
            for i in 0..20_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        });
        assert!(busy > Duration::from_millis(1), "busy loop took {busy:?}");
        let asleep = cpu_time_of(|| std::thread::sleep(Duration::from_millis(50)));
        assert!(asleep < Duration::from_millis(25), "sleep was charged {asleep:?}");
    }
}
