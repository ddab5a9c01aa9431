//! The data directory's identity: who made it, which cluster and node claimed it, and at which
//! generation the cluster last admitted it, kept in `<data_dir>/identity.json`.
//!
//! A node cannot tell on its own that its directory is an old copy, another node's, or a new disk:
//! the gateways compare what it reports here with what the metadata store recorded when they last
//! admitted it, and check its units before it serves again. This module keeps the file durable
//! (temp file, fsync, rename, directory fsync) and refuses claims that would take over a directory
//! another cluster or node owns. It must not decide whether a directory is stale (the gateway does)
//! nor touch units.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::NodeError;

/// The identity file in a node's data directory.
pub const IDENTITY_FILE: &str = "identity.json";
/// The file format written.
const FORMAT: u32 = 1;

/// Who owns a directory, and when the cluster last admitted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The cluster's id (the metadata store's `cluster-id`).
    pub cluster_id: String,
    /// The node the cluster knows this directory as.
    pub node_id: u32,
    /// Raised by the cluster each time it admits the directory after checking its units; an older
    /// copy of the directory carries a smaller one than the metadata store recorded.
    pub generation: u64,
}

/// What `identity.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectoryIdentity {
    /// File format.
    pub format: u32,
    /// Random, made when the directory was first opened; a copy of the directory has the same one,
    /// a new disk another.
    pub directory_id: String,
    /// When the directory was first opened (unix ms).
    pub created_ms: u64,
    /// Whether it held units already when its identity was made (a directory of an older lowtail,
    /// or files put there by hand): nothing vouches for them.
    pub held_units_at_creation: bool,
    /// How many times a node process opened the directory (this one included): a gateway that
    /// admitted the directory at one count knows that another count is another process, maybe on
    /// an older copy of the directory, and checks its units again.
    #[serde(default)]
    pub starts: u64,
    /// The cluster's claim, once a gateway made one.
    pub claim: Option<Claim>,
}

/// The identity of an open data directory; claims are written through it.
#[derive(Debug)]
pub struct Identity {
    path: PathBuf,
    /// The node id the process was configured with: a claim for another is refused.
    configured_node_id: u32,
    current: Mutex<DirectoryIdentity>,
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

impl Identity {
    /// Reads `<data_dir>/identity.json`, or makes it (durably) when the directory has none;
    /// `holds_units` says whether the directory already holds units. A file that does not parse is
    /// refused: the directory's owner cannot be known.
    pub fn open(data_dir: &Path, configured_node_id: u32, holds_units: bool) -> Result<Self, NodeError> {
        let path = data_dir.join(IDENTITY_FILE);
        let current = match fs::read(&path) {
            Ok(bytes) => {
                let mut found = serde_json::from_slice::<DirectoryIdentity>(&bytes).map_err(|error| {
                    NodeError::InvalidArgument(format!(
                        "{} is damaged ({error}); the directory's owner is unknown: move it aside to \
                         start this node on an empty directory, which the cluster then refills",
                        path.display()
                    ))
                })?;
                found.starts += 1;
                write_durably(&path, &found)?;
                found
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let made = DirectoryIdentity {
                    format: FORMAT,
                    directory_id: format!("{:032x}", rand::random::<u128>()),
                    created_ms: unix_ms(),
                    held_units_at_creation: holds_units,
                    starts: 1,
                    claim: None,
                };
                write_durably(&path, &made)?;
                made
            }
            Err(error) => return Err(NodeError::io(&path, error)),
        };
        if let Some(claim) = &current.claim
            && claim.node_id != configured_node_id
        {
            tracing::error!(
                claimed = claim.node_id,
                configured = configured_node_id,
                "this data directory belongs to another node; the cluster will not admit it"
            );
        }
        Ok(Self { path, configured_node_id, current: Mutex::new(current) })
    }

    /// The identity now.
    pub fn current(&self) -> DirectoryIdentity {
        crate::lock(&self.current).clone()
    }

    /// Records `claim` durably and returns the identity now. Refused when the directory belongs to
    /// another cluster, or the claim names another node than this process's.
    pub fn claim(&self, claim: Claim) -> Result<DirectoryIdentity, NodeError> {
        if claim.node_id != self.configured_node_id {
            return Err(NodeError::InvalidArgument(format!(
                "a claim for node {} sent to node {}",
                claim.node_id, self.configured_node_id
            )));
        }
        let mut current = crate::lock(&self.current);
        if let Some(held) = &current.claim
            && held.cluster_id != claim.cluster_id
        {
            return Err(NodeError::InvalidArgument(format!(
                "this directory belongs to cluster {}, not {}",
                held.cluster_id, claim.cluster_id
            )));
        }
        let mut next = current.clone();
        next.claim = Some(claim);
        write_durably(&self.path, &next)?;
        *current = next.clone();
        Ok(next)
    }
}

/// Writes `identity` to `path` so that a crash leaves the old file or the new one, never a mix.
fn write_durably(path: &Path, identity: &DirectoryIdentity) -> Result<(), NodeError> {
    let temp = path.with_extension("json.tmp");
    let bytes = serde_json::to_vec_pretty(identity).expect("an identity serializes");
    let mut file = fs::File::create(&temp).map_err(|e| NodeError::io(&temp, e))?;
    file.write_all(&bytes).map_err(|e| NodeError::io(&temp, e))?;
    file.sync_all().map_err(|e| NodeError::io(&temp, e))?;
    fs::rename(&temp, path).map_err(|e| NodeError::io(path, e))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::File::open(dir).and_then(|dir| dir.sync_all()).map_err(|e| NodeError::io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(cluster: &str, node: u32, generation: u64) -> Claim {
        Claim { cluster_id: cluster.into(), node_id: node, generation }
    }

    #[test]
    fn a_directory_keeps_its_identity_and_its_claims_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let first = Identity::open(dir.path(), 3, false).unwrap();
        let made = first.current();
        assert!(made.claim.is_none() && !made.held_units_at_creation && made.directory_id.len() == 32);
        first.claim(claim("c1", 3, 1)).unwrap();
        first.claim(claim("c1", 3, 2)).unwrap();
        let again = Identity::open(dir.path(), 3, true).unwrap().current();
        assert_eq!(again.directory_id, made.directory_id);
        assert_eq!(again.claim, Some(claim("c1", 3, 2)));
        assert!(!again.held_units_at_creation, "kept from the first open");
        assert_eq!((made.starts, again.starts), (1, 2), "each open counted");
        let other = tempfile::tempdir().unwrap();
        assert_ne!(Identity::open(other.path(), 3, false).unwrap().current().directory_id, made.directory_id);
    }

    #[test]
    fn claims_for_another_cluster_or_node_are_refused_and_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let identity = Identity::open(dir.path(), 3, false).unwrap();
        identity.claim(claim("c1", 3, 1)).unwrap();
        assert!(identity.claim(claim("c2", 3, 5)).is_err());
        assert!(identity.claim(claim("c1", 4, 5)).is_err());
        assert_eq!(Identity::open(dir.path(), 3, false).unwrap().current().claim, Some(claim("c1", 3, 1)));
    }

    #[test]
    fn a_damaged_identity_file_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(IDENTITY_FILE), b"{\"format\": 1, \"directory").unwrap();
        let error = Identity::open(dir.path(), 0, false).unwrap_err().to_string();
        assert!(error.contains("move it aside"), "{error}");
    }
}
