//! Starts a whole local cluster on loopback, as `lowtail up` does: storage nodes as separate OS
//! processes, the embedded metadata store, and the gateway, with everything under one directory.
//!
//! Owns: the cluster directory ([`state`]: secrets, credentials and ports chosen on first start and
//! kept, so a restart on the same directory finds its data and its endpoints), node child processes
//! ([`processes`]), and `cluster.json`, the machine-readable description tools and tests read to find
//! and kill nodes ([`manifest`]).
//!
//! Must not: implement node or gateway behaviour; it starts them and stops them.

pub mod admin;
pub mod manifest;
pub mod processes;
pub mod state;
pub mod up;

pub use manifest::{GatewayEntry, Manifest, NodeEntry};
pub use processes::NodeProcess;
pub use state::{ClusterDir, ClusterState, NodeSlot, UpOptions};
pub use up::{LocalCluster, UpConfig, up};
