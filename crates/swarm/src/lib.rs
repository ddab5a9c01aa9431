//! lowtail's fault swarm, in the spirit of FoundationDB's simulation workloads and Jepsen: a seeded
//! random schedule of S3 operations (puts of every size, gets, deletes, multipart uploads) and
//! faults (SIGKILL and restart of nodes and of gateways, nodes hung with SIGSTOP, full disks, unit
//! files flipped, torn or truncated, latency, resets and partitions between the gateway and a
//! node, etcd stopped or killed) runs against a real `lowtail up`, or against etcd with two
//! gateways ([`Flavor`]); after each epoch the cluster quiesces and the invariants are checked; at
//! the end m more nodes are killed and every object must still read back. A seed names its
//! schedule and its cluster: `lowtail-swarm run --first-seed S --seeds 1` replays it (the
//! schedule, not the exact interleaving: the processes are real).
//!
//! Layers: [`schedule`] (pure, seeded), [`model`] (what each key may hold), [`cluster`] (the
//! processes and the faults done to them, with [`gateways`], [`disk`], [`damage`] and [`proxy`]),
//! [`run`] (one seed, its checks and report), [`batch`] (many seeds, some at once),
//! [`scenario`] (the scripted scenarios of the durability issue), [`report`] (the tables).
//! Must not: share code paths with the store beyond its public interfaces (S3, the admin status,
//! the command line, the files on disk), or judge anything the store reports about itself without
//! checking it from outside where it can.

pub mod batch;
pub mod cluster;
pub mod damage;
pub mod disk;
pub mod gateways;
pub mod meta_scenario;
pub mod model;
pub mod proxy;
pub mod redundancy;
pub mod report;
pub mod run;
pub mod scenario;
pub mod schedule;
pub mod scrub_scenario;
pub mod stale_scenario;

use std::time::Duration;

/// The `up.toml` of a swarm cluster: failures are noticed within a second, repair starts after a
/// few, every node scrubs its units every two seconds, packed stripes are sealed after two, units
/// still landing after an early acknowledgement are repair's 35 s after it (just over the 30 s node
/// timeout that bounds their writes), and units that must be rebuilt are read segmented ([`up_toml`]
/// has odd seeds rebuild them on the storage nodes instead).
pub const SWARM_UP_TOML: &str = r#"
[data.membership]
probe_interval_ms = 500
down_after_probes = 2

[data.repair]
grace_ms = 3000
scan_interval_ms = 500

[data.packed]
seal_after_ms = 2000

[data.pending]
deadline_ms = 35000

# A metadata snapshot on the nodes every few seconds, so that a rebuild after a damaged record
# rolls forward little.
[meta_snapshots]
interval_s = 3

# Units on dead nodes are read from every survivor in segments (APLS's lists at the gateway; odd
# seeds: rebuilt by APLS on the storage nodes).
[data.reconstruct]
kind = "segmented"

[scrub]
pass_interval_s = 2
max_bytes_per_s = 268435456

# EC-Store's mover, fast, learning from the batch reads: units move while nodes die and restart.
[controller.mover]
enabled = true
load_period_ms = 500

[controller.mover.settings]
max_moves_per_s = 20.0
"#;

/// The `up.toml` of seed `seed`: [`SWARM_UP_TOML`], with units that must be rebuilt rebuilt by APLS on
/// the storage nodes (node-to-node sessions) on odd seeds and read segmented on even ones, so the
/// faults meet both.
pub fn up_toml(seed: u64) -> String {
    if seed % 2 == 1 {
        SWARM_UP_TOML.replace("kind = \"segmented\"", "kind = \"apls\"")
    } else {
        SWARM_UP_TOML.to_string()
    }
}

/// The `up.toml` of a seed run on `lowtail up`'s defaults, with the one change the checks need:
/// the last check kills m more nodes, so every unit an epoch damaged must have been found first
/// (else it would be an (m+1)-th loss), and only a scrub pass finds a unit no read touches; the
/// default pass takes a week. Nothing else is shortened: the quiesce waits longer instead
/// ([`Flavor::quiesce_timeout`]).
pub const DEFAULTS_UP_TOML: &str = r#"
[scrub]
pass_interval_s = 5
"#;

/// How a seed's cluster is set up: its configuration and its processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Flavor {
    /// `lowtail up`'s defaults ([`DEFAULTS_UP_TOML`]) instead of [`SWARM_UP_TOML`].
    pub defaults: bool,
    /// etcd and two `lowtail gateway` processes (the clients spread over both) instead of
    /// `lowtail up`'s embedded store and one gateway.
    pub etcd: bool,
}

impl Flavor {
    /// The rule: seeds with `seed % 3 == 0` run the defaults, seeds with `seed % 4 == 2` run on etcd
    /// with two gateways (when `etcd` allows it: the etcd fault kind is asked for). So among any
    /// twelve consecutive seeds four run the defaults, three run on etcd, and one does both.
    pub fn of(seed: u64, etcd: bool) -> Flavor {
        Flavor { defaults: seed.is_multiple_of(3), etcd: etcd && seed % 4 == 2 }
    }

    /// The cluster's `up.toml` (on etcd: the gateways' data, controller and the nodes' scrub
    /// sections are taken from it).
    pub fn up_toml(self, seed: u64) -> String {
        if self.defaults { DEFAULTS_UP_TOML.to_string() } else { up_toml(seed) }
    }

    /// Gateways of the cluster.
    pub fn gateways(self) -> u32 {
        if self.etcd { 2 } else { 1 }
    }

    /// How long a quiesce may take, given `base`: on the defaults, units still landing after an
    /// early acknowledgement are repair's only after 120 s (`data.pending.deadline_ms`) and a Down
    /// node's units are rebuilt elsewhere after 60 s (`data.repair.grace_ms`), so three minutes
    /// more.
    pub fn quiesce_timeout(self, base: Duration) -> Duration {
        if self.defaults { base + Duration::from_secs(180) } else { base }
    }

    /// In words, for the table.
    pub fn name(self) -> &'static str {
        match (self.defaults, self.etcd) {
            (false, false) => "swarm",
            (true, false) => "defaults",
            (false, true) => "swarm, etcd",
            (true, true) => "defaults, etcd",
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_seed_in_three_runs_the_defaults_and_etcd_seeds_meet_both_configurations() {
        let flavors: Vec<super::Flavor> = (0..12).map(|seed| super::Flavor::of(seed, true)).collect();
        assert_eq!(flavors.iter().filter(|f| f.defaults).count(), 4);
        assert!(flavors.windows(3).all(|three| three.iter().any(|f| f.defaults)), "one in every three");
        assert_eq!(flavors.iter().filter(|f| f.etcd).count(), 3);
        assert!(flavors.iter().any(|f| f.etcd && f.defaults) && flavors.iter().any(|f| f.etcd && !f.defaults));
        assert!((0..12).all(|seed| !super::Flavor::of(seed, false).etcd), "no etcd unless allowed");
        assert_eq!(super::Flavor::of(3, true).up_toml(3), super::DEFAULTS_UP_TOML);
        assert_eq!(super::Flavor::of(1, true).up_toml(1), super::up_toml(1));
    }

    #[test]
    fn odd_seeds_rebuild_on_the_nodes_and_even_ones_read_segmented() {
        assert!(super::up_toml(3).contains("kind = \"apls\"") && !super::up_toml(3).contains("segmented\""));
        assert!(super::up_toml(4).contains("kind = \"segmented\""));
    }
}
