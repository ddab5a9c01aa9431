//! A single-member etcd for a throw-away cluster: the `etcd` binary (Debian package `etcd-server`)
//! on free loopback ports with its data under a given directory, as a [`Supervised`] child.
//!
//! Owns: finding the binary, choosing ports (again when a port was taken before etcd bound it),
//! knowing when etcd serves, and starting it again on its data and ports after it died (a crash
//! test's restart). Must not: store anything in etcd (the gateways and the metadata crate
//! do) or outlive its owner (it is stopped, or killed when dropped).

use crate::child::{Lifetime, Supervised};
use crate::processes::free_loopback_addr;
use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Overrides the etcd binary's path (then nothing else is searched), as the etcd tests do.
pub const ETCD_BINARY_VAR: &str = "LOWTAIL_ETCD_BIN";
/// How long etcd gets to serve after it started.
pub const ETCD_START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long etcd gets to stop after SIGTERM.
pub const ETCD_STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a restart waits for a killed etcd to be gone.
pub const ETCD_EXIT_WAIT: Duration = Duration::from_secs(10);
/// Starts tried when a port picked in advance was taken by someone else.
const START_ATTEMPTS: usize = 3;
/// What etcd logs once clients can connect.
const READY_LINE: &str = "ready to serve client requests";

/// The etcd binary: `$LOWTAIL_ETCD_BIN` when set, else `etcd` on the `PATH`, `/usr/bin` or
/// `/usr/local/bin`; `None` when there is none.
pub fn find_etcd_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(ETCD_BINARY_VAR) {
        return Some(PathBuf::from(path)).filter(|path| path.is_file());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|dir| dir.join("etcd"))
        .find(|candidate| candidate.is_file())
}

/// Starts `binary` as the single member `lowtail` with its data in `dir/data` on the `(client,
/// peer)` URLs and waits until it serves clients (its log in `log` says so).
async fn spawn_ready(
    binary: &Path,
    dir: &Path,
    log: &Path,
    (client, peer): (&str, &str),
    lifetime: Lifetime,
) -> anyhow::Result<Supervised> {
    let data = dir.join("data");
    // A log of an earlier start would say "ready" already.
    let _ = std::fs::remove_file(log);
    let mut command = Command::new(binary);
    command
        .arg("--name=lowtail")
        .arg(format!("--data-dir={}", data.display()))
        .arg(format!("--listen-client-urls={client}"))
        .arg(format!("--advertise-client-urls={client}"))
        .arg(format!("--listen-peer-urls={peer}"))
        .arg(format!("--initial-advertise-peer-urls={peer}"))
        .arg(format!("--initial-cluster=lowtail={peer}"));
    let mut process = Supervised::spawn(command, "etcd", log, lifetime)?;
    let deadline = Instant::now() + ETCD_START_TIMEOUT;
    loop {
        if !process.is_running() {
            return Err(process.exited_error("while starting"));
        }
        if std::fs::read_to_string(log).is_ok_and(|text| text.contains(READY_LINE)) {
            return Ok(process);
        }
        if Instant::now() >= deadline {
            bail!("etcd did not serve within {ETCD_START_TIMEOUT:?}; see {}", log.display());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A running etcd.
#[derive(Debug)]
pub struct EtcdProcess {
    /// Its client URL, `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// Its peer URL.
    peer: String,
    /// Its directory (data in `data`).
    dir: PathBuf,
    lifetime: Lifetime,
    /// Restarts so far (each logs to a file of its own).
    restarts: u32,
    process: Supervised,
}

impl EtcdProcess {
    /// Starts `binary` with its data in `dir/data` and its log in `dir/etcd.log`, and waits until
    /// it serves clients.
    pub async fn start(binary: &Path, dir: &Path, lifetime: Lifetime) -> anyhow::Result<EtcdProcess> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut last_error = None;
        for attempt in 0..START_ATTEMPTS {
            let log = dir.join(format!("etcd-{attempt}.log"));
            match Self::try_start(binary, dir, &log, lifetime).await {
                Ok(etcd) => return Ok(etcd),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.expect("at least one attempt"))
    }

    async fn try_start(binary: &Path, dir: &Path, log: &Path, lifetime: Lifetime) -> anyhow::Result<EtcdProcess> {
        let client = format!("http://{}", free_loopback_addr()?);
        let peer = format!("http://{}", free_loopback_addr()?);
        let data = dir.join("data");
        // A data directory of a failed attempt would hold another member's peer URL.
        if data.exists() {
            std::fs::remove_dir_all(&data).with_context(|| format!("cannot remove {}", data.display()))?;
        }
        let process = spawn_ready(binary, dir, log, (&client, &peer), lifetime).await?;
        Ok(EtcdProcess { endpoint: client, peer, dir: dir.to_path_buf(), lifetime, restarts: 0, process })
    }

    /// Starts etcd again on its data and ports once it has ended (killed by a crash test; a kill
    /// just sent is given [`ETCD_EXIT_WAIT`] to take), and waits until it serves; fails if it still
    /// runs. Its log goes to `dir/etcd-restart-N.log`.
    pub async fn restart(&mut self, binary: &Path) -> anyhow::Result<()> {
        let deadline = Instant::now() + ETCD_EXIT_WAIT;
        while self.process.exited().is_none() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        anyhow::ensure!(self.process.exited().is_some(), "etcd still runs; stop or kill it first");
        self.restarts += 1;
        let log = self.dir.join(format!("etcd-restart-{}.log", self.restarts));
        self.process = spawn_ready(binary, &self.dir, &log, (&self.endpoint, &self.peer), self.lifetime).await?;
        Ok(())
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// An error saying etcd ended, with the end of its log.
    pub fn exited_error(&mut self, what: &str) -> anyhow::Error {
        self.process.exited_error(what)
    }

    /// SIGTERM, then SIGKILL after [`ETCD_STOP_TIMEOUT`].
    pub async fn stop(self) {
        self.process.stop(ETCD_STOP_TIMEOUT).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_killed_etcd_starts_again_on_its_data_and_ports() {
        let Some(binary) = find_etcd_binary() else {
            println!("skipped: no etcd binary (PATH, /usr/bin, /usr/local/bin, {ETCD_BINARY_VAR})");
            return;
        };
        let temp = tempfile::tempdir().unwrap();
        let mut etcd = EtcdProcess::start(&binary, temp.path(), Lifetime::WithParent).await.unwrap();
        let error = etcd.restart(&binary).await.unwrap_err().to_string();
        assert!(error.contains("still runs"), "{error}");
        let wal = temp.path().join("data/member/wal");
        let before: Vec<_> = std::fs::read_dir(&wal).unwrap().map(|e| e.unwrap().file_name()).collect();
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(etcd.pid() as libc::pid_t, libc::SIGKILL) };
        let (endpoint, pid) = (etcd.endpoint.clone(), etcd.pid());
        etcd.restart(&binary).await.unwrap();
        assert_eq!(etcd.endpoint, endpoint, "the same client URL");
        assert_ne!(etcd.pid(), pid);
        let after: Vec<_> = std::fs::read_dir(&wal).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(before.iter().all(|file| after.contains(file)), "its log kept: {before:?} {after:?}");
        let address = endpoint.trim_start_matches("http://");
        tokio::net::TcpStream::connect(address).await.expect("serving on the same port");
        etcd.stop().await;
    }
}
