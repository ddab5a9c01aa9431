//! A server process taken down and brought back as it was: what `lowtail bench s3`'s `down`
//! scenario needs for any store (a lowtail node, one of MinIO's server processes), read from
//! `/proc` instead of asked of the store, so that one mechanism serves every target alike.
//!
//! Owns: the recipe of a running process (its command line, environment, working directory and
//! the TCP ports it listens on), killing it and waiting until it is gone, starting the recipe
//! again (detached, so that it outlives the benchmark as the original would have) and waiting
//! until it listens again.
//! Must not: decide when a process goes down (the scenarios do), touch a process it was not given,
//! or send a request to a store beyond a TCP connect to its own ports.

use anyhow::{Context, bail, ensure};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a killed process may take to be gone (its ports and files freed).
const GONE_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest a started process may take to listen on all its ports again.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(120);
/// How often `gone` and `listening` are checked.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// One connect attempt's limit while waiting for a port.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(200);

/// How to start a process again as it runs now.
#[derive(Clone, Debug)]
pub struct Recipe {
    /// The process it was read from.
    pub pid: u32,
    /// Its executable and arguments (`/proc/PID/cmdline`).
    pub command_line: Vec<OsString>,
    /// Its whole environment (`/proc/PID/environ`): secrets a node gets that way come back with it.
    pub environment: Vec<(OsString, OsString)>,
    /// Its working directory, which relative paths of its command line are taken from.
    pub working_dir: PathBuf,
    /// The TCP addresses it listens on; a wildcard address is reached on loopback.
    pub listening: Vec<SocketAddr>,
    /// The file its standard error goes to, when it is one (its log, which the new process
    /// appends to).
    pub log: Option<PathBuf>,
}

impl Recipe {
    /// Reads the recipe of process `pid` (it must run and be readable: this user's, or root's).
    pub fn read(pid: u32) -> anyhow::Result<Recipe> {
        let process = procfs::process::Process::new(pid as i32).with_context(|| format!("no process {pid}"))?;
        let command_line: Vec<OsString> = process
            .cmdline()
            .with_context(|| format!("cannot read process {pid}'s command line"))?
            .into_iter()
            .map(OsString::from)
            .collect();
        ensure!(!command_line.is_empty(), "process {pid} has no command line (a kernel thread, or exiting)");
        let environment = process
            .environ()
            .with_context(|| format!("cannot read process {pid}'s environment"))?
            .into_iter()
            .collect();
        let working_dir = process.cwd().with_context(|| format!("cannot read process {pid}'s working directory"))?;
        let listening = listening_addrs(&process).with_context(|| format!("cannot read process {pid}'s sockets"))?;
        ensure!(!listening.is_empty(), "process {pid} listens on no TCP port: it is not a server process");
        let log = std::fs::read_link(format!("/proc/{pid}/fd/2")).ok().filter(|path| path.is_file());
        Ok(Recipe { pid, command_line, environment, working_dir, listening, log })
    }

    /// SIGKILLs the process and waits until it is gone.
    pub fn kill(&self) -> anyhow::Result<()> {
        signal(self.pid, libc::SIGKILL)?;
        let deadline = Instant::now() + GONE_TIMEOUT;
        while launcher::processes::is_alive(self.pid) {
            ensure!(Instant::now() < deadline, "process {} is still there {GONE_TIMEOUT:?} after SIGKILL", self.pid);
            std::thread::sleep(POLL_INTERVAL);
        }
        Ok(())
    }

    /// Starts the process again (its output appended to its log, or to `fallback_log` when it had
    /// none), in a process group of its own so that it outlives this one as the original would
    /// have, and waits until it listens on every port it listened on. Returns the child (its pid is
    /// the new process's).
    pub fn start_again(&self, fallback_log: &Path) -> anyhow::Result<Child> {
        let log = self.log.as_deref().unwrap_or(fallback_log);
        let output = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        let mut command = Command::new(&self.command_line[0]);
        command
            .args(&self.command_line[1..])
            .env_clear()
            .envs(self.environment.iter().map(|(name, value)| (name, value)))
            .current_dir(&self.working_dir)
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            .process_group(0);
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start {} again", self.command_line[0].to_string_lossy()))?;
        let deadline = Instant::now() + LISTEN_TIMEOUT;
        while !self.listening.iter().all(|&address| accepts(address)) {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "{} exited ({status}) when started again; see {}",
                    self.command_line[0].to_string_lossy(),
                    log.display()
                );
            }
            ensure!(
                Instant::now() < deadline,
                "{} did not listen on {:?} within {LISTEN_TIMEOUT:?} when started again; see {}",
                self.command_line[0].to_string_lossy(),
                self.listening,
                log.display()
            );
            std::thread::sleep(POLL_INTERVAL);
        }
        Ok(child)
    }
}

/// Sends `signal` to `pid`.
pub fn signal(pid: u32, signal: libc::c_int) -> anyhow::Result<()> {
    ensure!(pid > 0 && pid != std::process::id(), "process {pid} is not one to signal");
    // SAFETY: kill(2) with a positive pid (never a group) and a valid signal number.
    let result = unsafe { libc::kill(pid as libc::pid_t, signal) };
    ensure!(result == 0, "cannot signal process {pid}: {}", std::io::Error::last_os_error());
    Ok(())
}

/// Whether something accepts a TCP connection at `address`.
fn accepts(address: SocketAddr) -> bool {
    TcpStream::connect_timeout(&address, CONNECT_TIMEOUT).is_ok()
}

/// The addresses `process` listens on (TCP, IPv4 and IPv6), wildcards made loopback.
fn listening_addrs(process: &procfs::process::Process) -> anyhow::Result<Vec<SocketAddr>> {
    let socket_inodes: BTreeSet<u64> = process
        .fd()?
        .filter_map(Result::ok)
        .filter_map(|fd| match fd.target {
            procfs::process::FDTarget::Socket(inode) => Some(inode),
            _ => None,
        })
        .collect();
    let network = process.tcp()?.into_iter().chain(process.tcp6()?);
    let mut listening: Vec<SocketAddr> = network
        .filter(|entry| entry.state == procfs::net::TcpState::Listen && socket_inodes.contains(&entry.inode))
        .map(|entry| reachable(entry.local_address))
        .collect();
    listening.sort_unstable();
    listening.dedup();
    Ok(listening)
}

/// Where a connection to a socket listening on `address` goes: loopback for a wildcard.
fn reachable(address: SocketAddr) -> SocketAddr {
    let ip = match address.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, address.port())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Where the helper server below writes its port; set only in the helper's own process.
    const PORT_FILE_VAR: &str = "LOWTAIL_RELAUNCH_TEST_PORT_FILE";

    /// Not a test: the server the tests start as a child (this test binary, running only this
    /// function). It listens on loopback (on `PORT` when set), writes its port, and accepts until
    /// killed. Without its variable (`cargo test -- --ignored`) it returns at once.
    #[test]
    #[ignore = "a helper process of the tests below, not a test"]
    fn helper_server() {
        let Some(port_file) = std::env::var_os(PORT_FILE_VAR) else { return };
        let port: u16 = std::env::var("PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(0);
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        std::fs::write(port_file, listener.local_addr().unwrap().port().to_string()).unwrap();
        for stream in listener.incoming().take(1_000_000) {
            drop(stream);
        }
    }

    /// This test binary as the helper server, writing its port to `port_file`.
    fn listening_child(port_file: &Path) -> Child {
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "relaunch::tests::helper_server", "--ignored", "--test-threads", "1"])
            .env(PORT_FILE_VAR, port_file)
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    }

    fn wait_for_port(port_file: &Path) -> u16 {
        for _ in 0..500 {
            if let Ok(text) = std::fs::read_to_string(port_file)
                && let Ok(port) = text.trim().parse()
            {
                return port;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the test server wrote no port");
    }

    #[test]
    fn a_killed_server_comes_back_with_its_environment_on_its_port() {
        let dir = tempfile::tempdir().unwrap();
        let port_file = dir.path().join("port");
        let mut original = listening_child(&port_file);
        let port = wait_for_port(&port_file);
        // The recipe of a process listening on an ephemeral port names that port; its restart gets
        // it back through PORT, as a real server's config would pin it.
        let mut recipe = Recipe::read(original.id()).unwrap();
        assert_eq!(recipe.listening, [SocketAddr::from(([127, 0, 0, 1], port))]);
        assert!(recipe.environment.iter().any(|(name, _)| name == PORT_FILE_VAR));
        recipe.environment.push(("PORT".into(), port.to_string().into()));
        recipe.kill().unwrap();
        original.wait().unwrap();
        assert!(!accepts(recipe.listening[0]), "the killed server still accepts");
        std::fs::remove_file(&port_file).unwrap();
        let mut again = recipe.start_again(&dir.path().join("again.log")).unwrap();
        assert!(accepts(recipe.listening[0]));
        assert_ne!(again.id(), recipe.pid);
        let again_recipe = Recipe::read(again.id()).unwrap();
        assert_eq!(again_recipe.working_dir, recipe.working_dir);
        again.kill().unwrap();
        again.wait().unwrap();
    }

    /// Waits (at most 10 s) until `pid` has exec'd: a child just spawned has no command line yet.
    fn wait_for_exec(pid: u32) {
        for _ in 0..1000 {
            if std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|line| !line.is_empty()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("process {pid} never exec'd");
    }

    #[test]
    fn a_process_listening_nowhere_is_refused() {
        let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
        wait_for_exec(sleeper.id());
        let error = Recipe::read(sleeper.id()).unwrap_err().to_string();
        assert!(error.contains("listens on no TCP port"), "{error}");
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        let error = Recipe::read(u32::MAX / 2).unwrap_err().to_string();
        assert!(error.contains("no process"), "{error}");
        // A listener of this very process is found.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let recipe = Recipe::read(std::process::id()).unwrap();
        assert!(recipe.listening.contains(&listener.local_addr().unwrap()));
    }

    #[test]
    fn wildcard_listeners_are_reached_on_loopback() {
        assert_eq!(reachable("0.0.0.0:9000".parse().unwrap()), "127.0.0.1:9000".parse().unwrap());
        assert_eq!(reachable("[::]:9000".parse().unwrap()), "[::1]:9000".parse().unwrap());
        assert_eq!(reachable("10.1.2.3:9000".parse().unwrap()), "10.1.2.3:9000".parse().unwrap());
    }
}
