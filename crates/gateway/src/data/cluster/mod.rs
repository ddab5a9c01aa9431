//! The cluster as this gateway knows it: node registration and the failure detector
//! (`membership`), a returning node's directory checked and reconciled (`reconcile`), the class
//! scheduling each node is told (`class_shares`), the cluster-wide leases of background jobs
//! (`lease`). Calls `io` only.

pub mod class_shares;
pub mod lease;
pub mod membership;
pub mod reconcile;
