//! lowtail's fault swarm, in the spirit of FoundationDB's simulation workloads and Jepsen: a seeded
//! random schedule of S3 operations (puts of every size, gets, deletes, multipart uploads) and
//! faults (SIGKILL and restart of nodes and of the gateway, bytes flipped in data, parity and
//! replica unit files) runs against a real `lowtail up`; after each epoch the cluster quiesces and
//! the invariants are checked; at the end m more nodes are killed and every object must still
//! read back. A seed names its schedule: `lowtail-swarm run --first-seed S --seeds 1` replays it
//! (the schedule, not the exact interleaving: the processes are real).
//!
//! Layers: [`schedule`] (pure, seeded), [`model`] (what each key may hold), [`cluster`] (the
//! processes and the faults done to them), [`run`] (one seed, its checks and report),
//! [`scenario`] (the scripted scenarios of the durability issue), [`report`] (the table).
//! Must not: share code paths with the store beyond its public interfaces (S3, the admin status,
//! the command line, the files on disk), or judge anything the store reports about itself without
//! checking it from outside where it can.

pub mod cluster;
pub mod meta_scenario;
pub mod model;
pub mod report;
pub mod run;
pub mod scenario;
pub mod schedule;
pub mod scrub_scenario;
pub mod stale_scenario;

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

#[cfg(test)]
mod tests {
    #[test]
    fn odd_seeds_rebuild_on_the_nodes_and_even_ones_read_segmented() {
        assert!(super::up_toml(3).contains("kind = \"apls\"") && !super::up_toml(3).contains("segmented\""));
        assert!(super::up_toml(4).contains("kind = \"segmented\""));
    }
}
