//! A throw-away etcd server for tests: the `etcd` binary (Debian package `etcd-server`) on free loopback
//! ports with its data in a temporary directory, killed when dropped. Owns process management only.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Set to `1` to skip the etcd tests (they print that they were skipped) on machines without etcd.
pub const SKIP_VAR: &str = "LOWTAIL_SKIP_ETCD";
/// Overrides the etcd binary's path (then nothing else is searched).
pub const BINARY_VAR: &str = "LOWTAIL_ETCD_BIN";

/// A running etcd, killed on drop.
pub struct EtcdServer {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    log_path: PathBuf,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn find_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(BINARY_VAR) {
        return Some(PathBuf::from(path)).filter(|path| path.is_file());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|dir| dir.join("etcd"))
        .find(|candidate| candidate.is_file())
}

impl EtcdServer {
    /// Starts etcd and waits until it accepts connections. `None` (after printing why) when
    /// `LOWTAIL_SKIP_ETCD=1`; panics with install instructions when the binary is missing.
    pub fn start(test: &str) -> Option<EtcdServer> {
        if std::env::var(SKIP_VAR).is_ok_and(|value| value == "1") {
            println!("{test}: skipped because {SKIP_VAR}=1");
            return None;
        }
        let binary = find_binary().unwrap_or_else(|| {
            panic!(
                "{test}: the etcd binary was not found (PATH, /usr/bin, /usr/local/bin, {BINARY_VAR}). Install it (Debian: `apt-get install -y etcd-server`), \
                 point {BINARY_VAR} at it, or set {SKIP_VAR}=1 to skip the etcd tests"
            )
        });
        // A port picked by binding to port 0 can be taken by someone else before etcd binds it: try again.
        let mut last_log = String::new();
        for _attempt in 0..3 {
            match Self::try_start(&binary) {
                Ok(server) => return Some(server),
                Err(log) => last_log = log,
            }
        }
        panic!("{test}: etcd did not start; its last log:\n{last_log}");
    }

    fn try_start(binary: &PathBuf) -> Result<EtcdServer, String> {
        let dir = tempfile::tempdir().unwrap();
        let (client_port, peer_port) = (free_port(), free_port());
        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let log_path = dir.path().join("etcd.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let child = Command::new(binary)
            .arg("--name=lowtail-test")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=lowtail-test={peer_url}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", binary.display()));
        let mut server = EtcdServer { child, endpoint: client_url, log_path, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_status)) = server.child.try_wait() {
                return Err(server.log());
            }
            if server.log().contains("ready to serve client requests") {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(server.log())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
