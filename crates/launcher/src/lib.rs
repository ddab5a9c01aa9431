//! Starts a whole local cluster on loopback, as `lowtail up` does: storage nodes as separate OS
//! processes, the embedded metadata store, and the gateway, with everything under one directory;
//! and throw-away multi-gateway clusters for harnesses ([`fleet`]: etcd, nodes and gateways, every
//! one a process).
//!
//! Owns: the cluster directory ([`state`]: secrets, credentials and ports chosen on first start and
//! kept, so a restart on the same directory finds its data and its endpoints), child processes
//! ([`child`]: start, log, stop, kill on drop; [`processes`]: nodes and gateways; [`etcd`]; [`ports`]:
//! loopback ports outside the kernel's ephemeral range), and
//! `cluster.json`, the machine-readable description tools and tests read to find and kill nodes
//! ([`manifest`]).
//!
//! Must not: implement node or gateway behaviour; it starts them and stops them.

pub mod admin;
pub mod child;
pub mod etcd;
pub mod fleet;
pub mod gateway_admin;
pub mod manifest;
pub mod meta_admin;
pub mod ports;
pub mod processes;
pub mod state;
pub mod up;

pub use child::{Lifetime, Supervised};
pub use etcd::{EtcdProcess, find_etcd_binary};
pub use fleet::{Fleet, FleetConfig};
pub use manifest::{GatewayEntry, Manifest, NodeEntry};
pub use processes::{GatewayProcess, NodeProcess};
pub use state::{ClusterDir, ClusterState, NodeSlot, UpOptions};
pub use up::{LocalCluster, UpConfig, up};
