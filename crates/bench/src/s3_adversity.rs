//! The adversities `lowtail bench s3` measures a store under, applied alike to one server process
//! of any target (a lowtail storage node, one of MinIO's server processes): `fail-slow`, the
//! process stopped and continued in a duty cycle so that it answers, late; `down`, the process
//! killed for the phases and started again after; `rebuild`, the process killed, its data directory
//! emptied (a replaced disk) and the process started again at once, so the phases run while the
//! store rebuilds it; `hot`, no fault but a GET workload whose most popular keys share one node.
//! `healthy` is the baseline every scenario is measured beside.
//!
//! Owns: the scenarios' names and settings and their checks, the duty cycle's thread, and what
//! applying and lifting each one does to the process (and, for `rebuild`, to its directory).
//! Must not: send S3 requests or choose the process or its directory (the benchmark does), leave a
//! process stopped (lifting, and dropping an applied fault, always continue it), signal any process
//! but the one it was given, or empty a directory while its process runs.

use crate::relaunch::{Recipe, signal};
use anyhow::{Context, bail, ensure};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// What a phase runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scenario {
    /// No fault: the baseline.
    Healthy,
    /// One process stopped for a share of every period and continued for the rest.
    FailSlow,
    /// One process killed, started again once the scenario's phases are over.
    Down,
    /// One process killed, its data directory emptied, and started again before the phases.
    Rebuild,
    /// No fault: a GET phase whose keys are drawn Zipf-wise, the most popular sharing one node.
    Hot,
}

impl Scenario {
    /// Every scenario, in the order a cell runs them.
    pub const ALL: [Scenario; 5] =
        [Scenario::Healthy, Scenario::FailSlow, Scenario::Down, Scenario::Rebuild, Scenario::Hot];

    /// The name in arguments, rows and tables.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Healthy => "healthy",
            Scenario::FailSlow => "fail-slow",
            Scenario::Down => "down",
            Scenario::Rebuild => "rebuild",
            Scenario::Hot => "hot",
        }
    }

    /// The scenario called `name`.
    pub fn parse(name: &str) -> anyhow::Result<Scenario> {
        Scenario::ALL.into_iter().find(|scenario| scenario.name() == name).with_context(|| {
            let names: Vec<&str> = Scenario::ALL.iter().map(|scenario| scenario.name()).collect();
            format!("no scenario {name:?}: the scenarios are {}", names.join(", "))
        })
    }

    /// Whether it does something to a process (and so needs one).
    pub fn needs_victim(self) -> bool {
        !matches!(self, Scenario::Healthy | Scenario::Hot)
    }

    /// Whether it only changes what the clients ask (and so runs a GET phase alone).
    pub fn is_workload(self) -> bool {
        self == Scenario::Hot
    }
}

/// The duty cycle of `fail-slow`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailSlowShape {
    /// Share of every period the process is stopped, in percent.
    pub stopped_pct: u32,
    /// One stop and one run together.
    pub period: Duration,
}

impl Default for FailSlowShape {
    /// Stopped 90 ms of every 100 ms: the measurement, a node that answers its probes
    /// between stops and so stays Up, yet serves at a tenth of its speed with 90 ms stalls.
    fn default() -> FailSlowShape {
        FailSlowShape { stopped_pct: 90, period: Duration::from_millis(100) }
    }
}

impl FailSlowShape {
    /// Shortest period: below it the signals themselves are the load.
    pub const MIN_PERIOD: Duration = Duration::from_millis(10);
    /// Longest period.
    pub const MAX_PERIOD: Duration = Duration::from_secs(60);

    /// Refuses a cycle that is not one (never or always stopped) or is out of bounds.
    pub fn validate(&self) -> anyhow::Result<()> {
        ensure!(
            (1..=99).contains(&self.stopped_pct),
            "the fail-slow stopped share must be 1 to 99 %, not {} (0 is healthy, 100 is a hung process)",
            self.stopped_pct
        );
        ensure!(
            (Self::MIN_PERIOD..=Self::MAX_PERIOD).contains(&self.period),
            "the fail-slow period must be {:?} to {:?}, not {:?}",
            Self::MIN_PERIOD,
            Self::MAX_PERIOD,
            self.period
        );
        Ok(())
    }

    fn stopped(&self) -> Duration {
        self.period * self.stopped_pct / 100
    }
}

/// A data directory to empty for `rebuild`, and the entries of it to keep (a lowtail node's
/// `node.toml`, which its command line names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wipe {
    /// The directory.
    pub dir: PathBuf,
    /// Names of its entries that stay.
    pub keep: Vec<String>,
}

impl Wipe {
    /// Removes every entry of the directory but the kept ones; how many it removed. Refuses a
    /// relative path or one of fewer than two components (`/`, `/home`): a benchmark never
    /// empties those.
    pub fn run(&self) -> anyhow::Result<usize> {
        let dir = &self.dir;
        ensure!(
            dir.is_absolute() && dir.components().count() > 2,
            "refusing to empty {}: the victim's data directory must be an absolute path at least two levels deep",
            dir.display()
        );
        ensure!(dir.is_dir(), "the victim's data directory {} is not a directory", dir.display());
        let mut removed = 0;
        for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
            let entry = entry?;
            if self.keep.iter().any(|keep| entry.file_name() == keep.as_str()) {
                continue;
            }
            let path = entry.path();
            let result = match entry.file_type()?.is_dir() {
                true => std::fs::remove_dir_all(&path),
                false => std::fs::remove_file(&path),
            };
            result.with_context(|| format!("cannot remove {}", path.display()))?;
            removed += 1;
        }
        Ok(removed)
    }
}

/// What a scenario is applied to: the victim's pid, the duty cycle, the directory `rebuild`
/// empties, and the log a process started again appends to when its own is unknown.
#[derive(Clone, Debug)]
pub struct ApplyTo {
    /// The victim (none for `healthy`).
    pub pid: Option<u32>,
    /// `fail-slow`'s cycle.
    pub shape: FailSlowShape,
    /// `rebuild`'s directory.
    pub wipe: Option<Wipe>,
    /// Where a restarted process's output goes when its own log is unknown.
    pub fallback_log: PathBuf,
}

/// A scenario in force on one process.
#[derive(Debug)]
pub enum Applied {
    /// Nothing was done.
    Healthy,
    /// The duty cycle runs.
    FailSlow(DutyCycle),
    /// The process was killed; the recipe starts it again.
    Down(Recipe),
    /// The process was killed, its directory emptied and the process started again (the new one,
    /// until the benchmark takes it).
    Rebuild(Option<Child>),
}

/// What lifting a scenario left: the process started again in place of a killed one.
#[derive(Debug, Default)]
pub struct Lifted {
    /// The new process (its pid replaces the killed one's).
    pub restarted: Option<Child>,
}

/// Applies `scenario` to the process of `to` (none for `healthy`).
pub fn apply(scenario: Scenario, to: &ApplyTo) -> anyhow::Result<Applied> {
    if !scenario.needs_victim() {
        return Ok(Applied::Healthy);
    }
    let Some(pid) = to.pid else { bail!("scenario {} needs a process to apply to", scenario.name()) };
    match scenario {
        Scenario::Healthy | Scenario::Hot => unreachable!("handled above"),
        Scenario::FailSlow => Ok(Applied::FailSlow(DutyCycle::start(pid, to.shape)?)),
        Scenario::Down => {
            // The recipe is read before the kill: a dead process has none.
            let recipe = Recipe::read(pid)?;
            recipe.kill()?;
            Ok(Applied::Down(recipe))
        }
        Scenario::Rebuild => {
            let wipe = to.wipe.as_ref().context("scenario rebuild needs the victim's data directory to empty")?;
            let recipe = Recipe::read(pid)?;
            recipe.kill()?;
            wipe.run()?;
            Ok(Applied::Rebuild(Some(recipe.start_again(&to.fallback_log)?)))
        }
    }
}

impl Applied {
    /// The process started again when the scenario was applied (`rebuild`), once.
    pub fn take_restarted(&mut self) -> Option<Child> {
        match self {
            Applied::Rebuild(child) => child.take(),
            _ => None,
        }
    }

    /// Ends the scenario: the duty cycle stops with the process continued; a killed process is
    /// started again (its output appended to its own log, or to `fallback_log`) and listens again
    /// when this returns; a rebuilt one runs on.
    pub fn lift(self, fallback_log: &Path) -> anyhow::Result<Lifted> {
        match self {
            Applied::Healthy => Ok(Lifted::default()),
            Applied::FailSlow(cycle) => cycle.finish().map(|()| Lifted::default()),
            Applied::Down(recipe) => Ok(Lifted { restarted: Some(recipe.start_again(fallback_log)?) }),
            Applied::Rebuild(restarted) => Ok(Lifted { restarted }),
        }
    }
}

/// A thread that stops and continues one process in a cycle until told to finish.
#[derive(Debug)]
pub struct DutyCycle {
    pid: u32,
    finish: Arc<AtomicBool>,
    thread: Option<JoinHandle<anyhow::Result<u64>>>,
}

impl DutyCycle {
    /// Most cycles one fault runs: a day of the shortest period, far beyond any phase.
    const MAX_CYCLES: u64 = 24 * 3600 * 100;

    /// Starts the cycle on `pid` (the first stop is at once).
    pub fn start(pid: u32, shape: FailSlowShape) -> anyhow::Result<DutyCycle> {
        shape.validate()?;
        ensure!(launcher::processes::is_alive(pid), "no process {pid} to make slow");
        let finish = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&finish);
        let thread = std::thread::Builder::new()
            .name(format!("fail-slow-{pid}"))
            .spawn(move || cycle(pid, shape, &flag))
            .context("cannot start the fail-slow thread")?;
        Ok(DutyCycle { pid, finish, thread: Some(thread) })
    }

    /// Stops the cycle and continues the process; the cycle's failure (the process went away).
    pub fn finish(mut self) -> anyhow::Result<()> {
        self.end().map(|_| ())
    }

    fn end(&mut self) -> anyhow::Result<u64> {
        self.finish.store(true, Ordering::Release);
        let outcome = match self.thread.take() {
            Some(thread) => thread.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the fail-slow thread panicked"))),
            None => Ok(0),
        };
        // Whatever the thread did last, the process runs on.
        let continued = signal(self.pid, libc::SIGCONT);
        let cycles = outcome?;
        continued?;
        Ok(cycles)
    }
}

impl Drop for DutyCycle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.end();
        }
    }
}

/// The cycle itself; the number of stops.
fn cycle(pid: u32, shape: FailSlowShape, finish: &AtomicBool) -> anyhow::Result<u64> {
    let (stopped, running) = (shape.stopped(), shape.period - shape.stopped());
    for cycles in 0..DutyCycle::MAX_CYCLES {
        if finish.load(Ordering::Acquire) {
            return Ok(cycles);
        }
        signal(pid, libc::SIGSTOP)?;
        std::thread::sleep(stopped);
        signal(pid, libc::SIGCONT)?;
        std::thread::sleep(running);
    }
    Ok(DutyCycle::MAX_CYCLES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::Instant;

    fn to(pid: Option<u32>) -> ApplyTo {
        ApplyTo { pid, shape: FailSlowShape::default(), wipe: None, fallback_log: "/nonexistent".into() }
    }

    #[test]
    fn scenarios_parse_by_name_and_refuse_others() {
        for scenario in Scenario::ALL {
            assert_eq!(Scenario::parse(scenario.name()).unwrap(), scenario);
        }
        let error = Scenario::parse("slow").unwrap_err().to_string();
        assert!(error.contains("healthy, fail-slow, down, rebuild, hot"), "{error}");
        assert!(!Scenario::Healthy.needs_victim() && Scenario::Down.needs_victim());
    }

    #[test]
    fn a_cycle_that_is_not_one_is_refused() {
        assert!(FailSlowShape::default().validate().is_ok());
        let shape = |stopped_pct, period_ms| FailSlowShape { stopped_pct, period: Duration::from_millis(period_ms) };
        assert!(shape(0, 100).validate().unwrap_err().to_string().contains("1 to 99"));
        assert!(shape(100, 100).validate().is_err());
        assert!(shape(50, 1).validate().unwrap_err().to_string().contains("period"));
        assert_eq!(shape(90, 100).stopped(), Duration::from_millis(90));
    }

    /// A child that sleeps a minute, and its pid.
    fn sleeper() -> (std::process::Child, u32) {
        let child = Command::new("sleep").arg("60").spawn().unwrap();
        let pid = child.id();
        (child, pid)
    }

    fn end(mut child: std::process::Child) {
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Process state letter of `pid` (`T` when stopped).
    fn state(pid: u32) -> char {
        procfs::process::Process::new(pid as i32).unwrap().stat().unwrap().state
    }

    #[test]
    fn fail_slow_stops_the_process_most_of_the_time_and_leaves_it_running() {
        let (sleeper, pid) = sleeper();
        let applied = apply(Scenario::FailSlow, &to(Some(pid))).unwrap();
        // Sampled every 7 ms for 1 s: stopped in about 90 % of the samples (less precisely on a busy
        // machine, where the cycle's thread wakes late), and seen running at least once.
        let started = Instant::now();
        let (mut samples, mut stopped) = (0, 0);
        while started.elapsed() < Duration::from_secs(1) {
            samples += 1;
            stopped += u32::from(state(pid) == 'T');
            std::thread::sleep(Duration::from_millis(7));
        }
        let share = f64::from(stopped) / f64::from(samples);
        assert!((0.6..1.0).contains(&share), "stopped in {stopped} of {samples} samples");
        applied.lift(Path::new("/nonexistent")).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_ne!(state(pid), 'T', "the process was left stopped");
        end(sleeper);
    }

    #[test]
    fn a_dropped_cycle_continues_its_process() {
        let (sleeper, pid) = sleeper();
        let shape = FailSlowShape { stopped_pct: 99, period: Duration::from_millis(200) };
        let cycle = DutyCycle::start(pid, shape).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(state(pid), 'T');
        drop(cycle);
        std::thread::sleep(Duration::from_millis(20));
        assert_ne!(state(pid), 'T', "the process was left stopped");
        end(sleeper);
    }

    #[test]
    fn a_fault_needs_a_live_process() {
        assert!(apply(Scenario::FailSlow, &to(None)).is_err());
        let error = apply(Scenario::FailSlow, &to(Some(u32::MAX / 2))).unwrap_err();
        assert!(error.to_string().contains("no process"), "{error}");
        assert!(matches!(apply(Scenario::Healthy, &to(None)), Ok(Applied::Healthy)));
        let (sleeper, pid) = sleeper();
        let error = apply(Scenario::Rebuild, &to(Some(pid))).unwrap_err().to_string();
        assert!(error.contains("data directory"), "{error}");
        assert_ne!(state(pid), 'Z', "refused before anything was done to the process");
        end(sleeper);
    }

    #[test]
    fn a_wipe_empties_the_directory_but_what_it_keeps_and_refuses_shallow_paths() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("node.toml"), "node_id = 3").unwrap();
        std::fs::create_dir_all(dir.path().join("units/ab")).unwrap();
        std::fs::write(dir.path().join("units/ab/u1"), "unit").unwrap();
        std::fs::write(dir.path().join("identity.json"), "{}").unwrap();
        let wipe = Wipe { dir: dir.path().to_path_buf(), keep: vec!["node.toml".into()] };
        assert_eq!(wipe.run().unwrap(), 2);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("node.toml")]);
        for shallow in ["/", "/tmp", "relative/dir/x"] {
            let error = Wipe { dir: shallow.into(), keep: Vec::new() }.run().unwrap_err().to_string();
            assert!(error.contains("refusing"), "{shallow}: {error}");
        }
    }
}
