//! How busy the host was during a live run: the share of its CPU time that was busy, and the share
//! the hypervisor took away (steal), from the kernel's `/proc/stat` before and after the run.
//!
//! Owns: reading and differencing the aggregate `cpu` line. Must not: judge anything (the findings
//! quote it beside the decision time, which a busy host lengthens), or fail a run: off Linux, or
//! with an unreadable `/proc/stat`, there is simply no reading.

use serde::Serialize;

/// The aggregate CPU counters of `/proc/stat`, in clock ticks since boot.
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
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HostLoad {
    /// Busy (user, system, interrupts).
    pub busy: f64,
    /// Stolen by the hypervisor.
    pub steal: f64,
}

impl CpuTicks {
    /// The counters now (`None` where `/proc/stat` cannot be read or parsed).
    pub fn now() -> Option<CpuTicks> {
        parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The load from `self` to the later `after` (`None` if no tick passed).
    pub fn until(&self, after: &CpuTicks) -> Option<HostLoad> {
        let busy = after.busy.checked_sub(self.busy)?;
        let idle = after.idle.checked_sub(self.idle)?;
        let steal = after.steal.checked_sub(self.steal)?;
        let total = busy + idle + steal;
        (total > 0).then(|| HostLoad { busy: busy as f64 / total as f64, steal: steal as f64 / total as f64 })
    }
}

/// The `cpu` line of a `/proc/stat` text: `cpu user nice system idle iowait irq softirq steal ...`
/// (kernels before 2.6.11 have no steal column: zero).
fn parse(stat: &str) -> Option<CpuTicks> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_line_is_read_and_differenced() {
        let before = parse("cpu  100 0 50 800 10 5 5 30 0 0\ncpu0 1 2 3 4\nintr 1\n").unwrap();
        assert_eq!(before, CpuTicks { busy: 160, idle: 810, steal: 30 });
        let after = parse("cpu  200 10 90 900 10 5 15 80 0 0\n").unwrap();
        let load = before.until(&after).unwrap();
        // 160 busy + 100 idle + 50 steal ticks.
        assert!((load.busy - 160.0 / 310.0).abs() < 1e-12 && (load.steal - 50.0 / 310.0).abs() < 1e-12, "{load:?}");
        assert_eq!(before.until(&before), None, "no tick passed");
        assert_eq!(after.until(&before), None, "counters only grow");
    }

    #[test]
    fn malformed_or_missing_lines_give_no_reading() {
        assert_eq!(parse("cpu0 1 2 3 4\n"), None);
        assert_eq!(parse("cpu  1 2 x 4\n"), None);
        assert_eq!(parse("cpu  1 2\n"), None);
        assert_eq!(parse("cpu  1 2 3 4\n"), Some(CpuTicks { busy: 6, idle: 4, steal: 0 }));
    }

    #[test]
    fn this_host_can_be_read() {
        if cfg!(target_os = "linux") {
            let ticks = CpuTicks::now().expect("/proc/stat on Linux");
            assert!(ticks.busy + ticks.idle > 0);
        }
    }
}
