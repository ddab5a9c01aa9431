//! `cluster.json`: what a running local cluster looks like from outside (S3 endpoint, credentials,
//! and every process with its pid, ports and data directory), so tools and tests can find the
//! cluster and kill individual nodes. Rewritten on every start (pids change); private (it holds the
//! credentials).
//!
//! Must not: be read back by the launcher to make decisions; `cluster.toml` is the state.

use crate::state::write_private;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The whole file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// S3 endpoint URL, e.g. `http://127.0.0.1:9000`.
    pub endpoint: String,
    /// Region to sign for.
    pub region: String,
    /// S3 access key id.
    pub access_key: String,
    /// S3 secret access key.
    pub secret_key: String,
    /// Code of new stripes.
    pub code: String,
    /// The cluster directory.
    pub dir: PathBuf,
    /// The gateway, when it is running.
    pub gateway: Option<GatewayEntry>,
    /// Every node.
    pub nodes: Vec<NodeEntry>,
}

/// The gateway's entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayEntry {
    /// Process id (the `lowtail up` process, which runs the gateway).
    pub pid: u32,
    /// S3 endpoint URL.
    pub endpoint: String,
    /// Prometheus metrics URL.
    pub metrics: String,
}

/// A node's entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEntry {
    /// Node id.
    pub id: u32,
    /// Process id.
    pub pid: u32,
    /// Rack.
    pub rack: String,
    /// gRPC address.
    pub rpc_addr: String,
    /// Prometheus metrics URL.
    pub metrics: String,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Log file.
    pub log: PathBuf,
}

/// How to run this program again from a shell: `lowtail` when that name on `PATH` is this very
/// program, else its full path (after `cargo run` no `lowtail` is on `PATH`, and naming one would
/// send a new user looking for it).
pub fn invocation() -> String {
    match std::env::current_exe() {
        Ok(me) => invocation_given(&std::env::var_os("PATH").unwrap_or_default(), &me),
        Err(_) => "lowtail".into(),
    }
}

/// [`invocation`] for the program at `me` under the search path `path`.
fn invocation_given(path: &std::ffi::OsStr, me: &Path) -> String {
    let Ok(me) = me.canonicalize() else { return "lowtail".into() };
    let on_path = std::env::split_paths(path).map(|dir| dir.join("lowtail")).find(|candidate| candidate.is_file());
    match on_path.and_then(|found| found.canonicalize().ok()) {
        Some(found) if found == me => "lowtail".into(),
        _ => me.display().to_string(),
    }
}

impl Manifest {
    /// Writes the manifest to `path` (mode 0600, atomically).
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        write_private(path, &serde_json::to_string_pretty(self)?)
    }

    /// What `lowtail up` prints once the cluster serves: endpoint, credentials, and how to use them.
    pub fn summary(&self) -> String {
        let mut text = format!(
            "lowtail is up: {} nodes, {}, data in {}\n\n  S3 endpoint   {}   (region {})\n  access key    {}\n  secret key    {}\n  cluster.json  {}\n",
            self.nodes.len(),
            self.code,
            self.dir.display(),
            self.endpoint,
            self.region,
            self.access_key,
            self.secret_key,
            self.dir.join("cluster.json").display(),
        );
        if let Some(gateway) = &self.gateway {
            text.push_str(&format!("  metrics       {}\n", gateway.metrics));
        }
        text.push_str(&format!(
            "\nTry it:\n  export AWS_ACCESS_KEY_ID={} AWS_SECRET_ACCESS_KEY={} AWS_DEFAULT_REGION={}\n  aws --endpoint-url {} s3 mb s3://demo\n  aws --endpoint-url {} s3 cp README.md s3://demo/\n  (rclone and other aws-sdk-go tools: unset AWS_CA_BUNDLE first; they refuse it even for http)\n\nCtrl-C stops everything; `{} up --dir {}` starts it again with all its data.\n",
            self.access_key,
            self.secret_key,
            self.region,
            self.endpoint,
            self.endpoint,
            invocation(),
            self.dir.display(),
        ));
        text
    }

    /// Reads a manifest (for tools and tests).
    pub fn read(path: &Path) -> anyhow::Result<Manifest> {
        let text = std::fs::read_to_string(path)?;
        Ok(serde_json::from_str(&text)?)
    }

    /// The manifest at `path` once it names the gateway of process `pid`: `lowtail up` writes it
    /// when its cluster serves, so a launcher polls this to know its child is up (an older manifest
    /// in the same directory names another process).
    pub fn read_served_by(path: &Path, pid: u32) -> Option<Manifest> {
        Manifest::read(path).ok().filter(|manifest| manifest.gateway.as_ref().is_some_and(|g| g.pid == pid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_restart_hint_names_lowtail_only_when_path_finds_this_program() {
        let temp = tempfile::tempdir().unwrap();
        let (bin, other) = (temp.path().join("bin"), temp.path().join("other"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let me = temp.path().join("target-lowtail");
        std::fs::write(&me, b"").unwrap();
        let full = me.canonicalize().unwrap().display().to_string();
        assert_eq!(invocation_given(std::ffi::OsStr::new(""), &me), full, "nothing on PATH: the full path");
        std::fs::write(other.join("lowtail"), b"").unwrap();
        let path = std::env::join_paths([&other, &bin]).unwrap();
        assert_eq!(invocation_given(&path, &me), full, "another lowtail comes first: the full path");
        std::os::unix::fs::symlink(&me, bin.join("lowtail")).unwrap();
        let path = std::env::join_paths([&bin, &other]).unwrap();
        assert_eq!(invocation_given(&path, &me), "lowtail", "PATH finds this program");
    }

    #[test]
    fn round_trips_privately() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("cluster.json");
        let manifest = Manifest {
            endpoint: "http://127.0.0.1:9000".into(),
            region: "us-east-1".into(),
            access_key: "a".into(),
            secret_key: "s".into(),
            code: "rs-6-3".into(),
            dir: temp.path().to_path_buf(),
            gateway: None,
            nodes: vec![NodeEntry {
                id: 0,
                pid: 42,
                rack: "rack-0".into(),
                rpc_addr: "127.0.0.1:1".into(),
                metrics: "http://127.0.0.1:2/metrics".into(),
                data_dir: temp.path().join("n"),
                log: temp.path().join("l"),
            }],
        };
        manifest.write(&path).unwrap();
        assert_eq!(Manifest::read(&path).unwrap(), manifest);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o077, 0);
    }
}
