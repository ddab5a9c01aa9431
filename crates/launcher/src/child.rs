//! One supervised child process: started with its stderr (and stdout) in a log file, optionally
//! tied to this process's life (Linux `PR_SET_PDEATHSIG`, so a harness killed with SIGKILL leaves
//! nothing behind), stopped with SIGTERM then SIGKILL after a bounded wait, and killed when dropped
//! while still running (an error or a panic never leaks a process).
//!
//! Owns: the life cycle of one OS process and its log. Must not: know what the process is (nodes,
//! gateways and etcd wrap it), restart it, or signal any process but its own child.

use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Whether a child outlives this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// The child keeps running if this process dies without stopping it (`lowtail up`'s nodes: a
    /// later `lowtail up` on the same directory finds and stops them).
    Detached,
    /// The kernel sends the child SIGKILL when the thread that started it ends (a harness's
    /// throw-away cluster). Start such children from a thread that lives as long as they should
    /// (the main thread or an async runtime's worker), never from a short-lived blocking thread.
    WithParent,
}

/// The highest niceness (lowest priority) a process can have on Linux.
pub const MAX_NICE: i32 = 19;

/// Makes `command`'s process (and every thread it starts) run at niceness `nice`, 0 ..=
/// [`MAX_NICE`], or at the calling thread's own if that is already higher: only ever a lower
/// priority than the caller's, which needs no privilege. Fails, changing nothing, on a value out
/// of range.
pub fn set_niceness(command: &mut Command, nice: i32) -> anyhow::Result<()> {
    anyhow::ensure!(
        (0..=MAX_NICE).contains(&nice),
        "niceness {nice} is out of range: 0 (normal priority) to {MAX_NICE} (lowest); raising priority needs privileges lowtail does not ask for"
    );
    // The child inherits the niceness of the thread that forks it (this one).
    let inherited = rustix::process::getpriority_process(None).context("reading this process's niceness")?;
    if nice <= inherited {
        return Ok(());
    }
    use std::os::unix::process::CommandExt;
    // SAFETY: setpriority(2) is async-signal-safe and touches no memory of the parent; the closure
    // allocates nothing. Set before exec, so every thread of the new program inherits it.
    unsafe {
        command.pre_exec(move || {
            if libc::setpriority(libc::PRIO_PROCESS, 0, nice) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}

/// Lines of a log [`Supervised::log_tail`] returns at most.
pub const LOG_TAIL_LINES: usize = 20;

/// A running child with its log.
#[derive(Debug)]
pub struct Supervised {
    name: String,
    log: PathBuf,
    child: Child,
}

impl Supervised {
    /// Starts `command` with stdin closed and stdout and stderr appended to `log` (created with its
    /// folder). `name` is how errors call it (`node 3`, `gateway 1`, `etcd`).
    pub fn spawn(mut command: Command, name: &str, log: &Path, lifetime: Lifetime) -> anyhow::Result<Supervised> {
        if let Some(folder) = log.parent() {
            std::fs::create_dir_all(folder).with_context(|| format!("cannot create {}", folder.display()))?;
        }
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        command.stdin(Stdio::null()).stdout(log_file.try_clone()?).stderr(log_file);
        if lifetime == Lifetime::WithParent {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl(2) and getppid(2) are async-signal-safe and touch no memory of the parent;
            // the closure allocates nothing.
            unsafe {
                command.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // The parent may have died between fork and prctl: then nobody would signal us.
                    if libc::getppid() == 1 {
                        return Err(std::io::Error::other("the parent exited while the child started"));
                    }
                    Ok(())
                });
            }
        }
        let program = command.get_program().to_string_lossy().into_owned();
        let child = command.spawn().with_context(|| format!("cannot start {name} ({program})"))?;
        Ok(Supervised { name: name.to_owned(), log: log.to_path_buf(), child })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What errors call this process.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The exit status once the process has ended (`None` while it runs).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// An error for a process that ended while it should have been running, with its log's tail.
    pub fn exited_error(&mut self, what: &str) -> anyhow::Error {
        let status = self.exited().map_or_else(|| "an unknown status".to_owned(), |s| s.to_string());
        anyhow::anyhow!(
            "{} exited with {status} {what}; the end of {}:\n{}",
            self.name,
            self.log.display(),
            self.log_tail(LOG_TAIL_LINES)
        )
    }

    /// The last `lines` lines of the log (empty when it cannot be read).
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// SIGTERM, then SIGKILL when the process has not ended within `timeout`. A process that already
    /// ended is fine. Returns whether it had to be killed.
    pub async fn stop(mut self, timeout: Duration) -> bool {
        if !self.is_running() {
            return false;
        }
        // SAFETY: kill(2) on our own child's pid (not yet reaped, so not reused) with a valid signal.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if !self.is_running() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracing::warn!(process = %self.name, "did not stop after SIGTERM; killing it");
        let _ = self.child.kill();
        let _ = self.child.wait();
        true
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if self.is_running() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper(seconds: &str) -> Command {
        let mut command = Command::new("sleep");
        command.arg(seconds);
        command
    }

    #[test]
    fn a_child_runs_at_the_niceness_asked_and_bad_values_are_refused() {
        let own = rustix::process::getpriority_process(None).unwrap();
        let target = (own + 3).min(MAX_NICE);
        let mut command = Command::new("sh");
        // `nice` with no argument prints the niceness it runs at.
        command.args(["-c", "nice"]);
        set_niceness(&mut command, target).unwrap();
        let output = command.output().unwrap();
        assert!(output.status.success());
        assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), target.to_string());

        // Never above the caller's priority: a lower target keeps the inherited niceness.
        let mut command = Command::new("nice");
        set_niceness(&mut command, 0).unwrap();
        assert_eq!(String::from_utf8_lossy(&command.output().unwrap().stdout).trim(), own.to_string());

        for bad in [-1, MAX_NICE + 1] {
            let error = set_niceness(&mut Command::new("true"), bad).unwrap_err().to_string();
            assert!(error.contains("out of range"), "{error}");
        }
    }

    #[tokio::test]
    async fn stop_terminates_and_drop_kills_and_a_dead_child_is_reported_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut child =
            Supervised::spawn(sleeper("30"), "sleeper", &dir.path().join("a.log"), Lifetime::WithParent).unwrap();
        assert!(child.is_running());
        let pid = child.pid();
        assert!(!child.stop(Duration::from_secs(5)).await, "sleep ends on SIGTERM");
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "reaped");

        let dropped =
            Supervised::spawn(sleeper("30"), "dropped", &dir.path().join("b.log"), Lifetime::Detached).unwrap();
        let pid = dropped.pid();
        drop(dropped);
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "killed and reaped on drop");

        let mut command = Command::new("sh");
        command.args(["-c", "echo first; echo 'the reason' >&2; exit 3"]);
        let mut failing =
            Supervised::spawn(command, "failing", &dir.path().join("c.log"), Lifetime::WithParent).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while failing.is_running() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let message = failing.exited_error("while starting").to_string();
        assert!(message.contains("failing exited") && message.contains("the reason"), "{message}");
    }
}
