//! CPU time of processes and of the whole host, read from Linux's `/proc`: what `lowtail bench s3`
//! charges a store per operation, and how idle the machine was meanwhile; the live experiment reads
//! the host's busy and stolen shares here too.
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

/// The aggregate CPU counters of `/proc/stat`, in clock ticks since boot: the one reading of the
/// host's CPU, for the benchmark's idle share and the live experiment's busy and steal shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTicks {
    /// user + nice + system + irq + softirq.
    pub busy: u64,
    /// idle + iowait.
    pub idle: u64,
    /// Time a runnable virtual CPU waited for the hypervisor.
    pub steal: u64,
}

/// The host's CPU over one interval, as fractions of all CPU time in it.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct HostLoad {
    /// Busy (user, system, interrupts).
    pub busy: f64,
    /// Stolen by the hypervisor.
    pub steal: f64,
}

impl CpuTicks {
    /// The counters now (`None` where `/proc/stat` cannot be read or parsed).
    pub fn now() -> Option<CpuTicks> {
        parse_host_stat(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// Every tick counted: busy, idle and stolen (guest time is already counted in user).
    pub fn total(&self) -> u64 {
        self.busy + self.idle + self.steal
    }

    /// The load from `self` to the later `after` (`None` if no tick passed).
    pub fn until(&self, after: &CpuTicks) -> Option<HostLoad> {
        let busy = after.busy.checked_sub(self.busy)?;
        let idle = after.idle.checked_sub(self.idle)?;
        let steal = after.steal.checked_sub(self.steal)?;
        let total = busy + idle + steal;
        (total > 0).then(|| HostLoad { busy: busy as f64 / total as f64, steal: steal as f64 / total as f64 })
    }

    /// The share of the host's CPU time from `self` to `later` that was idle or waiting for I/O,
    /// in percent; `None` when no tick passed.
    pub fn idle_pct_until(&self, later: &CpuTicks) -> Option<f64> {
        let total = later.total().checked_sub(self.total()).filter(|&ticks| ticks > 0)?;
        let idle = later.idle.checked_sub(self.idle)?;
        Some(100.0 * idle as f64 / total as f64)
    }
}

/// The `cpu` line of a `/proc/stat` text: `cpu user nice system idle iowait irq softirq steal ...`
/// (kernels before 2.6.11 have no steal column: zero).
fn parse_host_stat(stat: &str) -> Option<CpuTicks> {
    let line = stat.lines().find(|line| line.split_whitespace().next() == Some("cpu"))?;
    let fields: Vec<u64> = line.split_whitespace().skip(1).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    let field = |i: usize| fields.get(i).copied().unwrap_or(0);
    if fields.len() < 4 {
        return None;
    }
    let (user, nice, system, idle, iowait, irq, softirq, steal) =
        (field(0), field(1), field(2), field(3), field(4), field(5), field(6), field(7));
    Some(CpuTicks { busy: user + nice + system + irq + softirq, idle: idle + iowait, steal })
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
        let now = CpuTicks::now().expect("/proc/stat");
        assert!(now.total() >= now.idle);
    }

    #[test]
    fn the_cpu_line_is_read_and_differenced() {
        let before = parse_host_stat("cpu  100 0 50 800 10 5 5 30 0 0\ncpu0 1 2 3 4\nintr 1\n").unwrap();
        assert_eq!(before, CpuTicks { busy: 160, idle: 810, steal: 30 });
        let after = parse_host_stat("cpu  200 10 90 900 10 5 15 80 0 0\n").unwrap();
        let load = before.until(&after).unwrap();
        // 160 busy + 100 idle + 50 steal ticks.
        assert!((load.busy - 160.0 / 310.0).abs() < 1e-12 && (load.steal - 50.0 / 310.0).abs() < 1e-12, "{load:?}");
        assert_eq!(before.until(&before), None, "no tick passed");
        assert_eq!(after.until(&before), None, "counters only grow");
    }

    #[test]
    fn malformed_or_missing_lines_give_no_reading() {
        assert_eq!(parse_host_stat("cpu0 1 2 3 4\n"), None);
        assert_eq!(parse_host_stat("cpu  1 2 x 4\n"), None);
        assert_eq!(parse_host_stat("cpu  1 2\n"), None);
        assert_eq!(parse_host_stat("cpu  1 2 3 4\n"), Some(CpuTicks { busy: 6, idle: 4, steal: 0 }));
    }

    #[test]
    fn this_host_can_be_read() {
        if cfg!(target_os = "linux") {
            let ticks = CpuTicks::now().expect("/proc/stat on Linux");
            assert!(ticks.busy + ticks.idle > 0);
        }
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
