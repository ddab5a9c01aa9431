//! CPU time of processes and of the whole host, read from Linux's `/proc`: what `lowtail bench s3`
//! charges a store per operation, and how idle the machine was meanwhile.
//!
//! Owns: parsing `/proc/PID/stat` (utime + stime, and the start time that tells a process from a
//! later one with the same pid), `/proc/stat` (the host's CPU times), `/proc/PID/comm` (processes
//! by name) and `/proc/cpuinfo` (the CPU model).
//! Must not: estimate what it cannot read (a process that cannot be read, or that was replaced,
//! makes a figure `None`, never a guess), or signal or change any process.

use std::path::Path;

/// Bytes of a process name the kernel keeps in `/proc/PID/comm` (`TASK_COMM_LEN` less its NUL).
pub const COMM_BYTES: usize = 15;

/// Clock ticks per second of `/proc`'s CPU times (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
pub fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf(3) reads a constant of the system and touches no memory of ours.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    // POSIX guarantees a positive value; 100 is what every Linux reports should it ever not.
    if ticks > 0 { ticks as u64 } else { 100 }
}

/// One process's CPU clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ProcessCpu {
    /// When the process started, in ticks after boot: a pid reused by a new process differs here.
    start_ticks: u64,
    /// User and system time of all its threads, in ticks (its children's are not included).
    cpu_ticks: u64,
}

/// The CPU clock of the process (or thread) whose `stat` file is `path`.
fn read_process_cpu(path: &Path) -> Option<ProcessCpu> {
    parse_process_stat(&std::fs::read_to_string(path).ok()?)
}

/// Fields 14 (utime), 15 (stime) and 22 (starttime) of a `stat` line, counted from 1.
fn parse_process_stat(stat: &str) -> Option<ProcessCpu> {
    // Field 2, the command name, is in parentheses and may itself hold spaces or parentheses.
    let (_, after_name) = stat.rsplit_once(')')?;
    // Field 3 (the state) is the first after the name, so field N is at N - 3.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |number: usize| fields.get(number - 3)?.parse::<u64>().ok();
    Some(ProcessCpu { start_ticks: field(22)?, cpu_ticks: field(14)? + field(15)? })
}

/// The CPU clocks of a group of server processes at one instant; `None` when any of them cannot be
/// read, since a sum without one of them would undercount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupCpu(Option<Vec<ProcessCpu>>);

impl GroupCpu {
    /// Reads every process of `pids` (none: nothing to measure, so `None`).
    pub fn read(pids: &[u32]) -> GroupCpu {
        if pids.is_empty() {
            return GroupCpu(None);
        }
        GroupCpu(pids.iter().map(|pid| read_process_cpu(Path::new(&format!("/proc/{pid}/stat")))).collect())
    }

    /// CPU time the group used from `self` to `later`, in milliseconds; `None` when either reading
    /// failed or a pid now names another process.
    pub fn used_ms_until(&self, later: &GroupCpu) -> Option<f64> {
        let (before, after) = (self.0.as_ref()?, later.0.as_ref()?);
        let mut ticks = 0u64;
        for (before, after) in before.iter().zip(after) {
            if before.start_ticks != after.start_ticks {
                return None;
            }
            ticks += after.cpu_ticks.checked_sub(before.cpu_ticks)?;
        }
        Some(ticks as f64 * 1000.0 / clock_ticks_per_s() as f64)
    }
}

/// The host's CPU time over all CPUs, from the first line of `/proc/stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostCpu {
    /// Time idle or waiting for I/O, in ticks.
    idle_ticks: u64,
    /// All time: user, nice, system, idle, iowait, irq, softirq and steal, in ticks (guest time is
    /// already counted in user).
    total_ticks: u64,
}

impl HostCpu {
    /// The host's CPU times now (`None` where `/proc/stat` cannot be read).
    pub fn read() -> Option<HostCpu> {
        parse_host_stat(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The share of the host's CPU time from `self` to `later` that was idle or waiting for I/O,
    /// in percent; `None` when no tick passed.
    pub fn idle_pct_until(&self, later: &HostCpu) -> Option<f64> {
        let total = later.total_ticks.checked_sub(self.total_ticks).filter(|&ticks| ticks > 0)?;
        let idle = later.idle_ticks.checked_sub(self.idle_ticks)?;
        Some(100.0 * idle as f64 / total as f64)
    }
}

fn parse_host_stat(stat: &str) -> Option<HostCpu> {
    let line = stat.lines().find_map(|line| line.strip_prefix("cpu "))?;
    let ticks: Vec<u64> = line.split_whitespace().take(8).map(str::parse).collect::<Result<_, _>>().ok()?;
    // Kernels since 2.6.11 have all eight; an older line would make the shares wrong.
    if ticks.len() < 8 {
        return None;
    }
    Some(HostCpu { idle_ticks: ticks[3] + ticks[4], total_ticks: ticks.iter().sum() })
}

/// Every process whose `/proc/PID/comm` is `name` (compared on its first [`COMM_BYTES`] bytes, all
/// the kernel keeps), in ascending pid order.
pub fn pids_named(name: &str) -> Vec<u32> {
    let wanted = &name.as_bytes()[..name.len().min(COMM_BYTES)];
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut pids: Vec<u32> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim_ascii_end() == wanted))
        .collect();
    pids.sort_unstable();
    pids
}

/// Whether a process `pid` exists on this host and its CPU time can be read.
pub fn is_readable(pid: u32) -> bool {
    read_process_cpu(Path::new(&format!("/proc/{pid}/stat"))).is_some()
}

/// The CPU's model name (the first `model name` of `/proc/cpuinfo`), where the kernel gives one.
pub fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = info.lines().find(|line| line.starts_with("model name"))?;
    let (_, model) = line.split_once(':')?;
    Some(model.trim().to_string()).filter(|model| !model.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu_time::thread_cpu_time;
    use std::time::Duration;

    fn cpu_ms_of(path: &str, work: impl FnOnce()) -> f64 {
        let before = read_process_cpu(Path::new(path)).expect("a readable stat");
        work();
        let after = read_process_cpu(Path::new(path)).expect("a readable stat");
        assert_eq!(before.start_ticks, after.start_ticks);
        (after.cpu_ticks - before.cpu_ticks) as f64 * 1000.0 / clock_ticks_per_s() as f64
    }

    fn spin_for(cpu: Duration) {
        let start = thread_cpu_time();
        let mut x = 0u64;
        // Bounded by the thread's own CPU clock, which advances while this loop runs.
        while thread_cpu_time() - start < cpu {
            for i in 0..10_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        }
    }

    #[test]
    fn cpu_time_of_this_process_grows_after_busy_work_and_not_after_sleep() {
        let process = format!("/proc/{}/stat", std::process::id());
        let busy_ms = cpu_ms_of(&process, || spin_for(Duration::from_millis(300)));
        assert!(busy_ms >= 150.0, "300 ms of spinning read as {busy_ms} ms");
        // Other tests run in this process at the same time, so the sleep is read on this thread.
        let asleep_ms = cpu_ms_of("/proc/thread-self/stat", || std::thread::sleep(Duration::from_millis(300)));
        let one_tick_ms = 1000.0 / clock_ticks_per_s() as f64;
        assert!(asleep_ms <= one_tick_ms, "a 300 ms sleep was charged {asleep_ms} ms");
        let group = GroupCpu::read(&[std::process::id()]);
        spin_for(Duration::from_millis(100));
        let used_ms = group.used_ms_until(&GroupCpu::read(&[std::process::id()])).expect("a figure");
        assert!(used_ms >= 50.0, "{used_ms} ms");
    }

    #[test]
    fn a_group_without_processes_or_with_one_missing_has_no_figure() {
        let none = GroupCpu::read(&[]);
        assert_eq!(none.used_ms_until(&none), None);
        let missing = GroupCpu::read(&[std::process::id(), u32::MAX]);
        assert_eq!(missing.used_ms_until(&missing), None);
        assert!(!is_readable(u32::MAX) && is_readable(std::process::id()));
    }

    #[test]
    fn a_replaced_process_has_no_figure() {
        let before = GroupCpu(Some(vec![ProcessCpu { start_ticks: 5, cpu_ticks: 10 }]));
        let after = GroupCpu(Some(vec![ProcessCpu { start_ticks: 9, cpu_ticks: 12 }]));
        assert_eq!(before.used_ms_until(&after), None);
    }

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 12345 0 0";
        assert_eq!(parse_process_stat(stat), Some(ProcessCpu { start_ticks: 12345, cpu_ticks: 325 }));
        assert_eq!(parse_process_stat("42 (truncated) S 1"), None);
    }

    #[test]
    fn host_idle_share_counts_idle_and_iowait() {
        let before = parse_host_stat("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3\n").unwrap();
        let after = parse_host_stat("cpu  200 0 100 1100 100 0 0 0 0 0\n").unwrap();
        // 500 ticks passed, 350 of them idle or waiting for I/O.
        assert_eq!(before.idle_pct_until(&after), Some(70.0));
        assert_eq!(before.idle_pct_until(&before), None, "no tick passed");
        assert!(parse_host_stat("cpu  1 2 3\n").is_none());
        let now = HostCpu::read().expect("/proc/stat");
        assert!(now.total_ticks >= now.idle_ticks);
    }

    #[test]
    fn comm_lookup_finds_this_test_process_by_its_executable_name() {
        // The test executable's name (`bench-<hash>`) is longer than the kernel keeps.
        let exe = std::env::current_exe().unwrap();
        let name = exe.file_name().unwrap().to_str().unwrap();
        assert!(pids_named(name).contains(&std::process::id()), "{name}");
        assert!(pids_named("no-such-process-name").is_empty());
    }

    #[test]
    fn cpu_model_is_read_where_the_kernel_gives_one() {
        if let Some(model) = cpu_model() {
            assert!(!model.is_empty() && !model.contains('\n'), "{model:?}");
        }
    }
}
