//! The cluster directory and the state chosen when it was first created: cluster secret, S3
//! credentials, code, and each node's id, rack and ports. Stored in `cluster.toml` (mode 0600, it
//! holds secrets), read back on every later start so that data, endpoints and credentials survive a
//! restart.
//!
//! Must not: start anything.

use anyhow::{Context, bail, ensure};
use codec::CodeSpec;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};

/// Most nodes `lowtail up` starts on one machine: each is a process with its own ports.
pub const MAX_LOCAL_NODES: usize = 64;

/// What the user asked `lowtail up` for.
#[derive(Clone, Debug)]
pub struct UpOptions {
    /// Directory holding the whole cluster.
    pub dir: PathBuf,
    /// Storage nodes (at least the code's unit count).
    pub nodes: usize,
    /// The erasure code of new stripes.
    pub code: CodeSpec,
    /// Address of the S3 endpoint; `None` keeps the stored one, or takes 127.0.0.1:9000 (refused
    /// when busy: say `--listen`).
    pub s3_listen: Option<SocketAddr>,
    /// Racks the nodes are spread over (round robin); 0 = one rack per node.
    pub racks: usize,
}

/// One node's fixed identity. Its ports are chosen by the kernel at every start (the node binds
/// port 0 and reports what it got), so no start can race another process for a port picked in
/// advance; the gateway learns the addresses when the nodes are registered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSlot {
    /// Node id.
    pub id: u32,
    /// Rack name, for rack-aware placement.
    pub rack: String,
}

/// Everything chosen on first start (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    /// Secret every node RPC must carry.
    pub cluster_secret: String,
    /// S3 access key id.
    pub access_key: String,
    /// S3 secret access key.
    pub secret_key: String,
    /// S3 region name clients should sign for.
    pub region: String,
    /// Code of new stripes, `codec::CodeSpec` form.
    pub code: String,
    /// S3 endpoint address (port 0: a new free port at every start, for tests).
    pub s3_listen: SocketAddr,
    /// The nodes.
    pub nodes: Vec<NodeSlot>,
}

/// Paths inside a cluster directory.
#[derive(Clone, Debug)]
pub struct ClusterDir {
    root: PathBuf,
}

impl ClusterDir {
    /// The directory at `root` (not created here).
    pub fn new(root: impl Into<PathBuf>) -> ClusterDir {
        ClusterDir { root: root.into() }
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `cluster.toml`: the state chosen on first start.
    pub fn state_file(&self) -> PathBuf {
        self.root.join("cluster.toml")
    }

    /// `cluster.json`: endpoint, credentials and every process, for tools and tests.
    pub fn manifest_file(&self) -> PathBuf {
        self.root.join("cluster.json")
    }

    /// The embedded metadata store's directory.
    pub fn meta_dir(&self) -> PathBuf {
        self.root.join("meta")
    }

    /// A node's data directory.
    pub fn node_dir(&self, id: u32) -> PathBuf {
        self.root.join("nodes").join(format!("node-{id}"))
    }

    /// A node's log file (its stderr).
    pub fn node_log(&self, id: u32) -> PathBuf {
        self.root.join("logs").join(format!("node-{id}.log"))
    }

    /// Takes the exclusive lock on `DIR/up.lock` (creating `DIR`), or fails saying another `lowtail up`
    /// holds it. The descriptor is close-on-exec: the nodes this process starts do not inherit the lock.
    pub fn lock(&self) -> anyhow::Result<std::fs::File> {
        let root = self.root();
        std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
        let path = root.join("up.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => {
                anyhow::bail!("another lowtail up is running (or starting) on {}; stop it first", root.display())
            }
            Err(std::fs::TryLockError::Error(error)) => {
                Err(error).with_context(|| format!("cannot lock {}", path.display()))
            }
        }
    }

    /// Reads the stored state of an existing cluster; an error naming the directory if it holds none.
    pub fn load(&self) -> anyhow::Result<ClusterState> {
        let path = self.state_file();
        ensure!(path.exists(), "{} holds no lowtail cluster (no {})", self.root.display(), path.display());
        let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("{} is damaged", path.display()))
    }

    /// Reads the stored state, or chooses and stores a new one when the directory is new. A stored
    /// state that contradicts `options` (another code or node count) is an error: changing them would
    /// strand data, so the user must pick a new directory instead.
    pub fn load_or_create(&self, options: &UpOptions) -> anyhow::Result<ClusterState> {
        let minimum = options.code.total_units();
        ensure!(
            (minimum..=MAX_LOCAL_NODES).contains(&options.nodes),
            "--nodes {} is out of range: {} needs at least {minimum} nodes, and at most {MAX_LOCAL_NODES} run on one machine",
            options.nodes,
            options.code
        );
        let path = self.state_file();
        if path.exists() {
            let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let state: ClusterState =
                toml::from_str(&text).with_context(|| format!("{} is damaged", path.display()))?;
            if state.code != options.code.to_string() || state.nodes.len() != options.nodes {
                bail!(
                    "{} holds a cluster of {} nodes with {}; it cannot be restarted as {} nodes with {} (use another --dir)",
                    self.root.display(),
                    state.nodes.len(),
                    state.code,
                    options.nodes,
                    options.code
                );
            }
            if let Some(listen) = options.s3_listen {
                ensure!(
                    listen == state.s3_listen,
                    "{} serves S3 on {}; start it without --listen or with that address",
                    self.root.display(),
                    state.s3_listen
                );
            }
            ensure_free(state.s3_listen)?;
            return Ok(state);
        }
        // Chosen (and the S3 address checked) before anything is created: a refusal leaves nothing.
        let state = new_state(options)?;
        std::fs::create_dir_all(&self.root).with_context(|| format!("cannot create {}", self.root.display()))?;
        write_private(&path, &toml::to_string_pretty(&state)?)?;
        Ok(state)
    }
}

fn new_state(options: &UpOptions) -> anyhow::Result<ClusterState> {
    let default_s3: SocketAddr = ([127, 0, 0, 1], 9000).into();
    // A busy default port is refused, not silently replaced: the cluster would keep a random port
    // for good, and clients pointed at :9000 would reach whatever holds it.
    let s3_listen = options.s3_listen.unwrap_or(default_s3);
    ensure_free(s3_listen)?;
    let racks = if options.racks == 0 { options.nodes } else { options.racks };
    let nodes = (0..options.nodes).map(|i| NodeSlot { id: i as u32, rack: format!("rack-{}", i % racks) }).collect();
    Ok(ClusterState {
        cluster_secret: random_token(32),
        access_key: format!("LT{}", random_token(18).to_uppercase()),
        secret_key: random_token(40),
        region: "us-east-1".to_string(),
        code: options.code.to_string(),
        s3_listen,
        nodes,
    })
}

/// Fails, saying what to do, if `address` (the S3 endpoint) cannot be bound: before any node starts.
/// Port 0 (a new free port at every start) is always free.
fn ensure_free(address: SocketAddr) -> anyhow::Result<()> {
    if address.port() == 0 {
        return Ok(());
    }
    match TcpListener::bind(address) {
        Ok(_) => Ok(()),
        Err(error) => bail!(
            "cannot serve S3 on {address}: {error}. Is another `lowtail up` (or another S3 server) running? \
             Stop it, or serve elsewhere: --listen 127.0.0.1:PORT when creating a cluster (127.0.0.1:0 picks a \
             free port at every start); an existing cluster's address is `s3_listen` in its cluster.toml"
        ),
    }
}

pub(crate) fn random_token(len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..len).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

/// Writes a file only its owner can read (it holds secrets), atomically.
pub(crate) fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let temp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temp)
        .with_context(|| format!("cannot write {}", temp.display()))?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(dir: &Path, nodes: usize) -> UpOptions {
        // Port 0: the tests must not depend on 127.0.0.1:9000 being free on the machine.
        let s3_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        UpOptions { dir: dir.to_path_buf(), nodes, code: CodeSpec::Rs { k: 6, m: 3 }, s3_listen, racks: 3 }
    }

    #[test]
    fn a_busy_s3_address_is_refused_before_anything_is_created() {
        let temp = tempfile::tempdir().unwrap();
        let dir = ClusterDir::new(temp.path().join("c"));
        let holder = TcpListener::bind("127.0.0.1:0").unwrap();
        let busy = UpOptions { s3_listen: Some(holder.local_addr().unwrap()), ..options(dir.root(), 9) };
        let error = dir.load_or_create(&busy).unwrap_err().to_string();
        assert!(error.contains("cannot serve S3 on") && error.contains("--listen"), "{error}");
        assert!(!dir.root().exists(), "nothing created");
        drop(holder);
        let stored = dir.load_or_create(&busy).unwrap();
        // A restart whose address has been taken meanwhile is refused the same way.
        let _holder = TcpListener::bind(stored.s3_listen).unwrap();
        let error = dir.load_or_create(&UpOptions { s3_listen: None, ..busy }).unwrap_err().to_string();
        assert!(error.contains("s3_listen"), "{error}");
    }

    #[test]
    fn state_is_created_once_and_kept() {
        let temp = tempfile::tempdir().unwrap();
        let dir = ClusterDir::new(temp.path().join("c"));
        let first = dir.load_or_create(&options(dir.root(), 9)).unwrap();
        assert_eq!(first.nodes.len(), 9);
        assert_eq!(first.nodes[4].rack, "rack-1");
        let again = dir.load_or_create(&options(dir.root(), 9)).unwrap();
        assert_eq!(first, again, "a restart keeps secrets, credentials and ports");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.state_file()).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "cluster.toml is private");
    }

    #[test]
    fn contradicting_options_are_refused_and_change_nothing() {
        let temp = tempfile::tempdir().unwrap();
        let dir = ClusterDir::new(temp.path());
        let stored = dir.load_or_create(&options(dir.root(), 9)).unwrap();
        let error = dir.load_or_create(&options(dir.root(), 12)).unwrap_err().to_string();
        assert!(error.contains("9 nodes") && error.contains("another --dir"), "{error}");
        let lrc = UpOptions { code: CodeSpec::Lrc { k: 6, l: 2, r: 2 }, ..options(dir.root(), 9) };
        assert!(dir.load_or_create(&lrc).is_err());
        assert_eq!(dir.load_or_create(&options(dir.root(), 9)).unwrap(), stored);
    }

    #[test]
    fn too_few_or_too_many_nodes_are_refused() {
        let temp = tempfile::tempdir().unwrap();
        let dir = ClusterDir::new(temp.path().join("c"));
        let error = dir.load_or_create(&options(dir.root(), 8)).unwrap_err().to_string();
        assert!(error.contains("at least 9"), "{error}");
        assert!(dir.load_or_create(&options(dir.root(), MAX_LOCAL_NODES + 1)).is_err());
        assert!(!dir.root().exists(), "nothing created on bad input");
    }
}
