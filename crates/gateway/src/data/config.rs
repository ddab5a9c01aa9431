//! `DataConfig`: every knob of the erasure-coded data path (code, unit size, timeouts, placement,
//! membership and repair), serde/TOML-friendly with documented defaults. Owns validation; must not
//! start anything or touch the network.

use policy::reconstruct::ReconstructSettings;
use std::time::Duration;

use execution::AdmissionSettings;
use policy::ecstore::mover::MoverSettings;
use serde::{Deserialize, Serialize};

use super::DataError;

/// The error of a config that still names `degraded_read_timeout_ms`.
pub const RETIRED_READ_TIMEOUT: &str = "degraded_read_timeout_ms is retired: a read's timeout is the read \
     policy's normal_timeout_ms ([controller.settings] in up.toml, default 1000 ms; `lowtail admin policy set` \
     changes it on a running cluster). Remove the line";

/// Configuration of the erasure-coded data path. Every field has a default except `cluster_secret`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DataConfig {
    /// Code of new stripes in `codec::CodeSpec` form. Default `rs-6-3`.
    pub code: String,
    /// Unit size of full stripes of striped objects. Default 1 MiB. The last stripe of an object
    /// uses `ceil(rest / k)` rounded up to 64 bytes instead, so small objects waste little space.
    pub unit_bytes: u64,
    /// Retired: a read's timeout is the read policy's `normal_timeout_ms` (`[controller.settings]`,
    /// default 1000 ms), for planned and robust reads alike. Named in a config, it is refused with
    /// that advice rather than ignored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded_read_timeout_ms: Option<u64>,
    /// Limit on every other node call (writes, recovery-set reads, deletes). Default 30 s.
    pub node_rpc_timeout_ms: u64,
    /// How unit bytes travel between the gateway and the nodes: `stream` (default), the nodes'
    /// plain unit stream (a fixed header and the raw bytes on a pooled TCP connection), or `grpc`,
    /// streaming gRPC calls as before the unit stream existed. Every other node call is gRPC.
    /// docs/benchmarks.md compares the two.
    pub node_transport: node::UnitTransport,
    /// Largest object one write accepts. Default 5 GiB (S3's single-PUT limit).
    pub max_object_bytes: u64,
    /// Most unit reads one object read keeps in flight. Default 32.
    pub max_parallel_unit_reads: usize,
    /// Most stripes one object write keeps in flight (encoded, being written or being recorded).
    /// Each holds n units in memory, so a write holds at most this × n × `unit_bytes` beyond the
    /// body bytes it holds (for a streamed body, those of one stripe more than are in flight).
    /// Default 4; 1 writes stripe after stripe.
    pub max_parallel_stripe_writes: usize,
    /// Extra placements tried for a unit whose write failed before the unit is left missing (the
    /// write is then acknowledged degraded if `ack_min_failures_tolerated` allows). Default 3.
    pub write_retries: u32,
    /// The durability rule: the fewest further node failures, whichever they are, that the units a
    /// write stored must survive for it to be acknowledged. When some units cannot be stored (nodes
    /// Down, or failing before membership notices), the write is acknowledged *degraded* if the
    /// units stored still survive this many failures; the stripe is recorded under-redundant in the
    /// same transaction and repair restores the rest. Otherwise the write fails (503) and keeps
    /// nothing. Default 1: for RS(k,m) at least k + 1 units durable (as Ceph's `min_size`). The
    /// code's full tolerance (m for RS, 3 for LRC(6,2,2)) refuses every degraded write: then a PUT
    /// fails whenever any unit cannot be stored. See docs/data-path.md, "What an acknowledgement
    /// guarantees".
    pub ack_min_failures_tolerated: usize,
    /// Longest a striped write may run before it stops starting stripes, fails (`Unavailable`, 503
    /// to S3 clients) and drops what it wrote; for a streamed body, receiving it counts. It bounds
    /// how long a stripe record can exist before the object that will reference it is committed,
    /// which the stripe collector's grace relies on. Default 20 minutes (1 GiB at under 1 MB/s).
    pub write_deadline_ms: u64,
    /// Backend mode: units are keys in a bucket of another S3-compatible service instead of files on
    /// storage nodes (see `data::backend`, docs/backend.md). Unset (default): storage nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendConfig>,
    /// Writes acknowledged before every unit was durable (a bucket's write ack rule `k+1` or `k`).
    pub pending: PendingConfig,
    /// Place one unit per rack (fails when there are fewer Up racks than units). Default false:
    /// random balanced placement over nodes.
    pub rack_aware: bool,
    /// Seed of the placement tie-break; `None` (default) seeds from the OS. Tests fix it.
    pub placement_seed: Option<u64>,
    /// Shared secret of the storage nodes' RPC. Required.
    pub cluster_secret: String,
    /// Failure detection.
    pub membership: MembershipConfig,
    /// Rebuilding lost units.
    pub repair: RepairConfig,
    /// Deleting units no stripe references.
    pub orphans: OrphanConfig,
    /// The packed layout of small objects.
    pub packed: PackedConfig,
    /// Admission of the gateway's read tasks (FAST CLOUD's L threads): at most `slots` unit reads in
    /// flight at once, the others waiting in FIFO order at the gateway, and a read plan started only
    /// when admitted (the execution core's `Admission`, the same the simulator's frontends run).
    /// Default: no bound. Writes and repair are not admitted here.
    pub admission: AdmissionSettings,
    /// How a unit range that must be rebuilt (its unit missing or its node not Up) is rebuilt
    /// (`[data.reconstruct]`, `policy::reconstruct::ReconstructSettings`): `kind = "gateway"` (the
    /// default: k survivors to the gateway, which decodes), `"segmented"` (every survivor serves
    /// k/q of the range, decoded per segment; RS codes; docs/lab/apls.md) or `"apls"` (the storage
    /// nodes rebuild it: APLS over every survivor of an RS stripe, a chain over an LRC stripe's
    /// recovery set) or `"auto"` (per read, APLS on the nodes when the closed forms over the probed
    /// node rates and this gateway's downlink say it is faster than the gateway decode; RS codes).
    pub reconstruct: policy::reconstruct::ReconstructSettings,
    /// Emulated downlink of this gateway (`[data.ingress]`: `bytes_per_s`, `per_packet_us`), for
    /// loopback experiments where the gateway's link matters (APLS, docs/lab/apls.md): every unit read's
    /// answer and every rebuilt packet waits its turn on it. Unshaped by default; switched at run
    /// time by `PUT /admin/ingress`.
    pub ingress: node::link::LinkShape,
    /// This gateway's name, unique among the gateways of a cluster and kept across restarts: it
    /// owns the stripes it opens for packing, and after a restart it seals the ones it left open.
    /// Unset means `gateway`, which is right for the one gateway of an embedded metadata store;
    /// gateways sharing etcd must each set their own (`lowtail gateway` refuses to start without).
    pub gateway_id: Option<String>,
}

/// Writes acknowledged early: their remaining unit writes run in the background, the stripe
/// recorded with those units missing and pending until they land.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PendingConfig {
    /// Most stripes this gateway finishes in the background at once; a write that would exceed it
    /// waits for all its units, as under `all` (counted: `lowtail_gateway_pending_refused_total`).
    /// Default 1024 (at most 1024 × (n − k) × `unit_bytes` held for the unit writes in flight).
    pub max_stripes: usize,
    /// How long after the acknowledgement the writer has to land the pending units before repair
    /// rebuilds whatever is still missing (the writer stopped, or its unit writes failed). Must
    /// exceed `node_rpc_timeout_ms`, which bounds each background unit write. Default 120 s.
    pub deadline_ms: u64,
    /// The straggler rule, for every write (striped units and packed replicas) whatever its
    /// bucket's ack rule: once all its copies but one are durable and that one is late by
    /// `straggler_wait_share` of the time the others took (at least `straggler_wait_min_ms`), the
    /// write is acknowledged pending (the copies survive one failure fewer than the code's, and the
    /// response says so) and the late copy lands in the background, so one slow node does not set
    /// every write's latency. Never when a copy failed (that one is written elsewhere). Unset: on
    /// wherever the code has a copy to spare, that is where all copies but one still survive
    /// `ack_min_failures_tolerated` failures (RS(6,3): yes; a code of one parity, or a durability
    /// rule demanding every copy: no, and the gateway says so at start); `true` where it cannot
    /// apply is refused; `false` turns it off. Default unset (on for RS(6,3)): a slow node's
    /// late copies are bounded by `max_late_copies_per_node` (measured: docs/data-path.md,
    /// "Writes past a slow node").
    pub straggler: Option<bool>,
    /// The late copy's allowance, as a share of the time from the write's start to all copies but
    /// one landing. Default 0.25.
    pub straggler_wait_share: f64,
    /// The least allowance, ms: a floor against the ordinary jitter between copies on a busy
    /// machine. Default 10.
    pub straggler_wait_min_ms: u64,
    /// Most copies still landing after their write's acknowledgement (the straggler rule's late
    /// copy, a bucket early rule's remaining units) that one node is given at once; past it a late
    /// copy is dropped and left missing, for repair after `deadline_ms` (a striped unit) or the
    /// seal (a packed replica), as a failed one is. It bounds the backlog a slow node collects,
    /// which would otherwise grow with the write rate and hold up every read of that node.
    /// Default 16; at least 1.
    pub max_late_copies_per_node: usize,
}

impl Default for PendingConfig {
    fn default() -> Self {
        Self {
            max_stripes: 1024,
            deadline_ms: 120_000,
            straggler: None,
            straggler_wait_share: 0.25,
            straggler_wait_min_ms: 10,
            max_late_copies_per_node: 16,
        }
    }
}

/// Whether all copies but one survive `ack_min` failures for a code whose full set survives `full`.
fn straggler_possible(full: usize, ack_min: usize) -> bool {
    full.checked_sub(1).is_some_and(|spared| spared >= ack_min)
}

/// The packed layout: objects up to `max_object_bytes` are appended into the data units of a
/// shared open stripe and replicated to every parity node until the stripe is sealed (encoded).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PackedConfig {
    /// Largest object packed; larger ones are striped. 0 turns packing off. Default 64 KiB (at
    /// most `unit_bytes`): above that a stripe of its own wastes little and reads in parallel.
    pub max_object_bytes: u64,
    /// An open stripe is sealed this long after it was opened even when not full, so replicas do
    /// not cost (m+1)x storage for long. Default 5 s.
    pub seal_after_ms: u64,
    /// Full stripes being sealed at once; while this many are, small objects are striped instead
    /// (bounds the gateway memory held for sealing at `k * unit_bytes` each). Default 4.
    pub max_sealing_stripes: usize,
}

/// Failure detection by probing every node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MembershipConfig {
    /// Time between probe rounds; also each probe's timeout. Default 1 s.
    pub probe_interval_ms: u64,
    /// Consecutive failed probes after which a node is marked Down. Default 3.
    pub down_after_probes: u32,
}

/// The repair service.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RepairConfig {
    /// How long a node must stay Down before its units are rebuilt elsewhere (a restart within
    /// the grace costs nothing). Default 60 s.
    pub grace_ms: u64,
    /// Time between repair scans. Default 1 s.
    pub scan_interval_ms: u64,
    /// Stripes rebuilt at once. Default 4.
    pub max_concurrent_stripes: usize,
    /// Bytes per second repair may read from nodes (sources of rebuilt units) while no client
    /// request is in flight: what is idle goes to the rebuild. Default 256 MiB/s.
    pub max_read_bytes_per_s: u64,
    /// Bytes per second repair reads while clients keep the gateway busy throughout; in between,
    /// the floor plus the idle share of the rest (`data/services/repair_pace.rs`). A stripe one failure from
    /// loss is read at the full budget however busy. Default 1 MiB/s.
    pub min_read_bytes_per_s: u64,
}

/// Garbage collection. Orphan units, which nodes hold but no stripe references (a node back after
/// repair, objects deleted while a node was down, failed writes), are deleted once judged orphans
/// twice, `grace_ms` apart, with the unit unchanged in between. Unreferenced stripes, sealed
/// stripe records no object or upload part references (every object of a packed stripe deleted, a
/// write whose commit failed), are deleted with their units the same way (`crate::stripe_gc`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OrphanConfig {
    /// Time between scans of every Up node's units; 0 turns collection off. Default 10 minutes.
    pub scan_interval_ms: u64,
    /// How long a unit must stay an orphan before it is deleted. It must outlast the longest write
    /// (a stripe's units land before its record is created): at least ten times
    /// `node_rpc_timeout_ms` × (`write_retries` + 1). Default 1 hour.
    pub grace_ms: u64,
    /// Most units (or stripes) one scan deletes. Default 10 000.
    pub max_deletes_per_scan: usize,
    /// Time between scans for unreferenced stripes, which list every object and upload part of
    /// every bucket; 0 turns it off. When on, `grace_ms` must also be at least twice
    /// `write_deadline_ms` + `node_rpc_timeout_ms` × (`write_retries` + 1), so a stripe whose
    /// object is still being written is never taken for garbage. Default 1 hour.
    pub stripe_scan_interval_ms: u64,
    /// Compaction: a sealed packed stripe whose live objects are less than this fraction of the bytes
    /// packed into it has them moved (read, appended to an open stripe, re-pointed only if the object is unchanged), so
    /// the stripe becomes unreferenced and is collected. At most `max_deletes_per_scan` objects move
    /// per scan. 0 turns compaction off. Default 0.5.
    pub compact_below_live_fraction: f64,
    /// How long a released stripe (of an object overwritten or deleted, an upload aborted) is kept
    /// before it is deleted, so reads through any gateway that fetched the old layout before the
    /// change finish on the old bytes. At most `grace_ms` while unreferenced stripes are collected
    /// (the collector would cut it short). 0 deletes at once. Default 10 minutes.
    pub release_delay_ms: u64,
}

impl Default for OrphanConfig {
    fn default() -> Self {
        Self {
            scan_interval_ms: 600_000,
            grace_ms: 3_600_000,
            max_deletes_per_scan: 10_000,
            stripe_scan_interval_ms: 3_600_000,
            compact_below_live_fraction: 0.5,
            release_delay_ms: 600_000,
        }
    }
}

impl Default for DataConfig {
    fn default() -> Self {
        Self {
            code: "rs-6-3".into(),
            unit_bytes: 1 << 20,
            degraded_read_timeout_ms: None,
            node_rpc_timeout_ms: 30_000,
            node_transport: node::UnitTransport::Stream,
            max_object_bytes: 5 << 30,
            max_parallel_unit_reads: 32,
            max_parallel_stripe_writes: 4,
            write_retries: 3,
            ack_min_failures_tolerated: 1,
            write_deadline_ms: 1_200_000,
            backend: None,
            pending: PendingConfig::default(),
            rack_aware: false,
            placement_seed: None,
            cluster_secret: String::new(),
            membership: MembershipConfig::default(),
            repair: RepairConfig::default(),
            orphans: OrphanConfig::default(),
            packed: PackedConfig::default(),
            admission: AdmissionSettings::default(),
            reconstruct: policy::reconstruct::ReconstructSettings::default(),
            ingress: node::link::LinkShape::default(),
            gateway_id: None,
        }
    }
}

impl Default for PackedConfig {
    fn default() -> Self {
        Self { max_object_bytes: 64 << 10, seal_after_ms: 5000, max_sealing_stripes: 4 }
    }
}

impl Default for MembershipConfig {
    fn default() -> Self {
        Self { probe_interval_ms: 1000, down_after_probes: 3 }
    }
}

impl Default for RepairConfig {
    fn default() -> Self {
        Self {
            grace_ms: 60_000,
            scan_interval_ms: 1000,
            max_concurrent_stripes: 4,
            max_read_bytes_per_s: 256 << 20,
            min_read_bytes_per_s: 1 << 20,
        }
    }
}

/// The name of a gateway whose `gateway_id` is unset.
pub const DEFAULT_GATEWAY_ID: &str = "gateway";

/// Largest unit the data path writes (the node's default `max_unit_bytes` is 256 MiB).
pub const MAX_UNIT_BYTES: u64 = 64 << 20;

/// Most stripes one write may keep in flight: 64 stripes of 9 units of 64 MiB already hold 36 GiB.
pub const MAX_PARALLEL_STRIPE_WRITES: usize = 64;

impl DataConfig {
    /// The parsed code.
    pub fn code_spec(&self) -> Result<codec::CodeSpec, DataError> {
        self.code.parse().map_err(|e| DataError::Internal(format!("data config: code {:?}: {e}", self.code)))
    }

    /// The most failures a fully written stripe of the configured code survives.
    pub fn full_failures_tolerated(&self) -> Result<usize, DataError> {
        let code = self.code_spec()?.build().map_err(|e| DataError::Internal(format!("data config: {e}")))?;
        code.failures_tolerated(&vec![true; code.total_units()])
            .ok_or_else(|| DataError::Internal("data config: the code does not decode its own stripe".into()))
    }

    /// The straggler rule leaves one copy behind: set on, it must have one to spare.
    fn validate_straggler(&self, full: usize) -> Result<(), DataError> {
        let pending = &self.pending;
        if !pending.straggler_wait_share.is_finite() || pending.straggler_wait_share < 0.0 {
            return Err(DataError::Internal(format!(
                "data config: pending.straggler_wait_share must be a non-negative number, not {}",
                pending.straggler_wait_share
            )));
        }
        if pending.straggler == Some(true) && !straggler_possible(full, self.ack_min_failures_tolerated) {
            return Err(DataError::Internal(format!(
                "data config: pending.straggler acknowledges a write with all its copies but one durable, which \
                 survives {} failures, but ack_min_failures_tolerated = {} demands more: unset pending.straggler \
                 (or set it false) to have every write wait for its slowest node",
                full.saturating_sub(1),
                self.ack_min_failures_tolerated
            )));
        }
        Ok(())
    }

    /// The straggler rule's wait under this configuration (validated), or `None` when it is off:
    /// set so, or by default where the code has no copy to spare.
    pub fn straggler_wait(&self) -> Option<execution::StragglerWait> {
        let full = self.full_failures_tolerated().ok()?;
        let on = self.pending.straggler.unwrap_or(true) && straggler_possible(full, self.ack_min_failures_tolerated);
        on.then(|| execution::StragglerWait {
            share_of_quorum_time: self.pending.straggler_wait_share,
            min_ns: self.pending.straggler_wait_min_ms.saturating_mul(1_000_000),
        })
    }

    /// Checks the configuration; the data path never starts with one that fails.
    pub fn validate(&self) -> Result<(), DataError> {
        let bad = |what: String| Err(DataError::Internal(format!("data config: {what}")));
        let full = self.full_failures_tolerated()?;
        if self.ack_min_failures_tolerated > full {
            return bad(format!(
                "ack_min_failures_tolerated ({}) is more than {} survives even with every unit stored ({full})",
                self.ack_min_failures_tolerated, self.code
            ));
        }
        if self.unit_bytes == 0 || !self.unit_bytes.is_multiple_of(64) || self.unit_bytes > MAX_UNIT_BYTES {
            return bad(format!("unit_bytes must be a positive multiple of 64 up to {MAX_UNIT_BYTES}"));
        }
        if self.cluster_secret.is_empty() {
            return bad("cluster_secret must be set".into());
        }
        validate_reconstruct(&self.reconstruct, self)?;
        self.ingress.validate().map_err(|why| DataError::Internal(format!("data config: ingress: {why}")))?;
        if self.admission.slots == Some(0) {
            return bad("admission.slots must be at least 1 (leave it out for no bound)".into());
        }
        if self.degraded_read_timeout_ms.is_some() {
            return bad(RETIRED_READ_TIMEOUT.into());
        }
        if self.node_rpc_timeout_ms == 0 {
            return bad("node_rpc_timeout_ms must be positive".into());
        }
        if self.max_parallel_unit_reads == 0 || self.repair.max_concurrent_stripes == 0 {
            return bad("max_parallel_unit_reads and repair.max_concurrent_stripes must be positive".into());
        }
        if !(1..=MAX_PARALLEL_STRIPE_WRITES).contains(&self.max_parallel_stripe_writes) {
            return bad(format!(
                "max_parallel_stripe_writes ({}) must be between 1 and {MAX_PARALLEL_STRIPE_WRITES}",
                self.max_parallel_stripe_writes
            ));
        }
        if self.membership.probe_interval_ms == 0 || self.membership.down_after_probes == 0 {
            return bad("membership.probe_interval_ms and down_after_probes must be positive".into());
        }
        if self.repair.scan_interval_ms == 0 || self.repair.max_read_bytes_per_s == 0 {
            return bad("repair.scan_interval_ms and max_read_bytes_per_s must be positive".into());
        }
        if self.repair.min_read_bytes_per_s == 0 || self.repair.min_read_bytes_per_s > self.repair.max_read_bytes_per_s
        {
            return bad(format!(
                "repair.min_read_bytes_per_s ({}) must be positive and at most max_read_bytes_per_s ({}): a \
                 rebuild must progress however busy the gateway is",
                self.repair.min_read_bytes_per_s, self.repair.max_read_bytes_per_s
            ));
        }
        let longest_write_ms = self.node_rpc_timeout_ms.saturating_mul(u64::from(self.write_retries) + 1);
        if self.orphans.grace_ms < longest_write_ms.saturating_mul(10) {
            return bad(format!(
                "orphans.grace_ms ({}) must be at least ten times node_rpc_timeout_ms x (write_retries + 1) = {} ms, \
                 so a unit whose write is still in flight is never taken for an orphan",
                self.orphans.grace_ms,
                longest_write_ms.saturating_mul(10)
            ));
        }
        if let Some(problem) = self.backend.as_ref().and_then(BackendConfig::problem) {
            return bad(problem);
        }
        if self.backend.is_some() && self.packed.max_object_bytes > 0 {
            return bad("backend mode stores every object striped: set packed.max_object_bytes = 0 (packing needs \
                 storage nodes to hold its replicas)"
                .into());
        }
        if self.pending.max_late_copies_per_node == 0 {
            return bad("pending.max_late_copies_per_node must be at least 1 (0 would drop every late copy)".into());
        }
        if self.pending.max_stripes == 0 || self.pending.deadline_ms <= self.node_rpc_timeout_ms {
            return bad(format!(
                "pending.max_stripes must be positive and pending.deadline_ms ({}) more than node_rpc_timeout_ms \
                 ({}), which bounds the background unit writes it waits for",
                self.pending.deadline_ms, self.node_rpc_timeout_ms
            ));
        }
        self.validate_straggler(full)?;
        if self.write_deadline_ms == 0 {
            return bad("write_deadline_ms must be positive".into());
        }
        let stripe_grace_ms = self.write_deadline_ms.saturating_add(longest_write_ms).saturating_mul(2);
        if self.orphans.stripe_scan_interval_ms > 0 && self.orphans.grace_ms < stripe_grace_ms {
            return bad(format!(
                "orphans.grace_ms ({}) must be at least twice write_deadline_ms + node_rpc_timeout_ms x \
                 (write_retries + 1) = {stripe_grace_ms} ms while unreferenced stripes are collected \
                 (orphans.stripe_scan_interval_ms > 0), so a stripe whose object is still being written is \
                 never taken for garbage",
                self.orphans.grace_ms
            ));
        }
        if !(0.0..=1.0).contains(&self.orphans.compact_below_live_fraction) {
            return bad(format!(
                "orphans.compact_below_live_fraction ({}) must be between 0 (off) and 1",
                self.orphans.compact_below_live_fraction
            ));
        }
        if self.orphans.stripe_scan_interval_ms > 0 && self.orphans.release_delay_ms > self.orphans.grace_ms {
            return bad(format!(
                "orphans.release_delay_ms ({}) must not exceed orphans.grace_ms ({}) while unreferenced stripes \
                 are collected: the collector would delete released stripes before their delay ends",
                self.orphans.release_delay_ms, self.orphans.grace_ms
            ));
        }
        if self.orphans.max_deletes_per_scan == 0 {
            return bad("orphans.max_deletes_per_scan must be positive".into());
        }
        if self.packed.max_object_bytes > self.unit_bytes {
            return bad(format!(
                "packed.max_object_bytes ({}) must not exceed unit_bytes ({})",
                self.packed.max_object_bytes, self.unit_bytes
            ));
        }
        if self.packed.seal_after_ms == 0 || self.packed.max_sealing_stripes == 0 {
            return bad("packed.seal_after_ms and packed.max_sealing_stripes must be positive".into());
        }
        let id = self.gateway_id();
        if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return bad(format!("gateway_id {id:?} must be 1-64 characters of [A-Za-z0-9_-]"));
        }
        Ok(())
    }

    /// `gateway_id`, or `gateway` when unset.
    pub fn gateway_id(&self) -> &str {
        self.gateway_id.as_deref().unwrap_or(DEFAULT_GATEWAY_ID)
    }

    /// `node_rpc_timeout_ms` as a duration.
    pub fn node_rpc_timeout(&self) -> Duration {
        Duration::from_millis(self.node_rpc_timeout_ms)
    }
}

/// Checks reconstruction settings the gateway can run beside the rest of `config`: a rebuild on the
/// storage nodes needs nodes (not backend mode) and, for now, reads outside an admission pool (a
/// dataflow's sessions need their slots all at once, which the pool does not grant yet), so such a
/// combination is refused with the reason rather than switched off at read time.
pub fn validate_reconstruct(settings: &ReconstructSettings, config: &DataConfig) -> Result<(), DataError> {
    let bad = |why: String| Err(DataError::Internal(format!("data config: reconstruct: {why}")));
    if let Err(why) = settings.validate() {
        return bad(why);
    }
    if settings.kind != policy::reconstruct::ReconstructKind::Gateway && config.backend.is_some() {
        return bad(format!(
            "kind = {:?} rebuilds units on the storage nodes or reads them in segments from them, and backend \
             mode has no storage nodes: use kind = \"gateway\"",
            settings.kind
        ));
    }
    if let (true, Some(slots)) = (settings.kind.rebuilds_on_nodes(), config.admission.slots) {
        // A dataflow holds one slot per survivor's session, all at once (a chain cannot start
        // with a link missing), so a pool smaller than q would never admit it.
        let survivors = config.code_spec().map_or(0, |spec| spec.total_units().saturating_sub(1));
        let sessions = settings.max_sources.map_or(survivors, |q| survivors.min(usize::from(q)));
        if slots < sessions {
            return bad(format!(
                "kind = {:?} holds one admission slot per survivor's session at once ({sessions} for {}), and \
                 [data.admission] slots = {slots} could never admit it: raise slots, set max_sources, or use kind \
                 = \"segmented\" or \"gateway\"",
                settings.kind, config.code
            ));
        }
    }
    Ok(())
}

/// The `[controller.mover]` section of a gateway's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MoverConfig {
    /// Whether the mover runs; switched at run time by `PUT /admin/mover`. Default false: moving
    /// units is a deliberate choice (it trades background I/O for batch latency).
    pub enabled: bool,
    /// The policy's settings: the move-rate cap (default 1 a second, the paper's), the co-access
    /// window, the candidates and the weights of Eq. 8.
    pub settings: MoverSettings,
    /// How often the nodes' loads (bytes served per second) are read from their stats. Default
    /// 5 s (the paper's load reports came every 5–10 s).
    pub load_period_ms: u64,
    /// Bytes per second moves may copy, beside the moves-per-second cap. Default 64 MiB/s.
    pub max_bytes_per_s: u64,
}

impl Default for MoverConfig {
    fn default() -> Self {
        MoverConfig {
            enabled: false,
            settings: MoverSettings::default(),
            load_period_ms: 5_000,
            max_bytes_per_s: 64 << 20,
        }
    }
}

impl MoverConfig {
    /// Checks what can be checked before start.
    pub fn validate(&self) -> Result<(), DataError> {
        let bad = |why: String| Err(DataError::Internal(format!("controller config: mover: {why}")));
        if let Err(why) = self.settings.validate() {
            return bad(why);
        }
        if self.load_period_ms == 0 || self.max_bytes_per_s == 0 {
            return bad("load_period_ms and max_bytes_per_s must be positive".into());
        }
        Ok(())
    }
}

/// Where a backend-mode gateway keeps its units (`[data.backend]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BackendConfig {
    /// URL of the S3-compatible service: `https://s3.eu-west-1.amazonaws.com`, or
    /// `http://127.0.0.1:9000` for MinIO or another lowtail. Required.
    pub endpoint: String,
    /// The bucket the units go into; it must exist. Required.
    pub bucket: String,
    /// Region of the signatures. Default `us-east-1`.
    pub region: String,
    /// Access key id. Required.
    pub access_key: String,
    /// Secret key. Required.
    pub secret_key: String,
    /// Prefix of every unit key (`PREFIX` + `STRIPE/UNIT`, stripe in 16 hex digits). Default
    /// `lowtail/`, so one bucket can hold other data beside.
    pub prefix: String,
    /// Path-style URLs (`endpoint/bucket/key`): MinIO, Ceph RGW and lowtail need them. Default
    /// true; false for AWS's virtual-hosted style.
    pub path_style: bool,
    /// Time limit of one backend request; a GET past it counts as failed and the read goes on
    /// without it. Default 30 s.
    pub request_timeout_ms: u64,
}

impl Default for BackendConfig {
    fn default() -> Self {
        Self {
            endpoint: String::new(),
            bucket: String::new(),
            region: "us-east-1".into(),
            access_key: String::new(),
            secret_key: String::new(),
            prefix: "lowtail/".into(),
            path_style: true,
            request_timeout_ms: 30_000,
        }
    }
}

impl BackendConfig {
    /// Why the configuration cannot work, if it cannot.
    pub fn problem(&self) -> Option<String> {
        if cfg!(not(feature = "s3-backend")) {
            return Some(
                "this lowtail was built without backend mode: build it with the cargo feature s3-backend \
                 (on by default; `--no-default-features` leaves it out)"
                    .into(),
            );
        }
        let missing: Vec<&str> = [
            ("endpoint", &self.endpoint),
            ("bucket", &self.bucket),
            ("access_key", &self.access_key),
            ("secret_key", &self.secret_key),
        ]
        .into_iter()
        .filter(|(_, value)| value.trim().is_empty())
        .map(|(name, _)| name)
        .collect();
        if !missing.is_empty() {
            return Some(format!("backend: {} must be set", missing.join(", ")));
        }
        if !(self.endpoint.starts_with("http://") || self.endpoint.starts_with("https://")) {
            return Some(format!("backend.endpoint {:?} must be an http:// or https:// URL", self.endpoint));
        }
        (self.request_timeout_ms == 0).then(|| "backend.request_timeout_ms must be positive".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> DataConfig {
        DataConfig { cluster_secret: "s".into(), ..Default::default() }
    }

    #[test]
    fn the_orphan_grace_must_outlast_the_longest_write() {
        assert!(valid().validate().is_ok(), "the defaults are valid");
        // Units only: 30 s x (3 + 1) x 10 = 1200 s.
        let units_only = OrphanConfig { stripe_scan_interval_ms: 0, ..Default::default() };
        let short = DataConfig { orphans: OrphanConfig { grace_ms: 1_199_999, ..units_only.clone() }, ..valid() };
        let error = short.validate().unwrap_err().to_string();
        assert!(error.contains("orphans.grace_ms") && error.contains("1200000"), "{error}");
        let enough = DataConfig { orphans: OrphanConfig { grace_ms: 1_200_000, ..units_only }, ..valid() };
        assert!(enough.validate().is_ok());
        // Stripes too: 2 x (1200 s + 120 s) = 2640 s.
        let short = DataConfig { orphans: OrphanConfig { grace_ms: 2_639_999, ..Default::default() }, ..valid() };
        let error = short.validate().unwrap_err().to_string();
        assert!(error.contains("write_deadline_ms") && error.contains("2640000"), "{error}");
        let enough = DataConfig { orphans: OrphanConfig { grace_ms: 2_640_000, ..Default::default() }, ..valid() };
        assert!(enough.validate().is_ok());
        let slow = DataConfig { write_deadline_ms: 1_800_000, ..enough.clone() };
        assert!(slow.validate().is_err(), "a longer write deadline needs a longer grace");
        assert!(DataConfig { write_deadline_ms: 0, ..valid() }.validate().is_err());
        for fraction in [-0.1, 1.5, f64::NAN] {
            let odd = OrphanConfig { compact_below_live_fraction: fraction, ..Default::default() };
            let error = DataConfig { orphans: odd, ..valid() }.validate().unwrap_err().to_string();
            assert!(error.contains("compact_below_live_fraction"), "{error}");
        }
        let none = DataConfig { orphans: OrphanConfig { max_deletes_per_scan: 0, ..Default::default() }, ..valid() };
        assert!(none.validate().is_err());
        let off = DataConfig { orphans: OrphanConfig { scan_interval_ms: 0, ..Default::default() }, ..valid() };
        assert!(off.validate().is_ok(), "0 turns collection off");
    }

    #[test]
    fn the_release_delay_fits_in_the_stripe_grace() {
        let long = OrphanConfig { release_delay_ms: 3_600_001, ..Default::default() };
        let error = DataConfig { orphans: long.clone(), ..valid() }.validate().unwrap_err().to_string();
        assert!(error.contains("orphans.release_delay_ms") && error.contains("3600000"), "{error}");
        let no_collector = OrphanConfig { stripe_scan_interval_ms: 0, ..long };
        assert!(DataConfig { orphans: no_collector, ..valid() }.validate().is_ok(), "nothing cuts it short");
        let at_once = OrphanConfig { release_delay_ms: 0, ..Default::default() };
        assert!(DataConfig { orphans: at_once, ..valid() }.validate().is_ok());
    }

    #[test]
    fn the_ack_rule_is_at_most_the_code_tolerance() {
        for (code, full) in [("rs-6-3", 3), ("lrc-6-2-2", 3), ("rs-10-4", 4)] {
            let config = |rule| DataConfig { code: code.into(), ack_min_failures_tolerated: rule, ..valid() };
            assert_eq!(config(0).full_failures_tolerated().unwrap(), full);
            assert!(config(full).validate().is_ok(), "{code}: the strict rule is valid");
            let error = config(full + 1).validate().unwrap_err().to_string();
            assert!(error.contains("ack_min_failures_tolerated") && error.contains(code), "{error}");
        }
    }

    #[test]
    fn a_config_naming_the_retired_read_timeout_is_refused_with_advice() {
        let text = "cluster_secret = \"s\"\ndegraded_read_timeout_ms = 500\n";
        let config: DataConfig = toml::from_str(text).expect("it still parses, to be refused by name");
        let error = config.validate().unwrap_err().to_string();
        assert!(
            error.contains("degraded_read_timeout_ms is retired") && error.contains("normal_timeout_ms"),
            "{error}"
        );
        let written = toml::to_string(&valid()).unwrap();
        assert!(!written.contains("degraded_read_timeout_ms"), "never written back: {written}");
    }

    #[test]
    fn stripe_write_parallelism_is_bounded() {
        for bad in [0, MAX_PARALLEL_STRIPE_WRITES + 1] {
            let error = DataConfig { max_parallel_stripe_writes: bad, ..valid() }.validate().unwrap_err().to_string();
            assert!(error.contains("max_parallel_stripe_writes"), "{error}");
        }
        for good in [1, MAX_PARALLEL_STRIPE_WRITES] {
            assert!(DataConfig { max_parallel_stripe_writes: good, ..valid() }.validate().is_ok());
        }
    }

    #[test]
    fn a_reconstruction_the_gateway_cannot_run_beside_the_rest_is_refused() {
        use policy::reconstruct::ReconstructKind;
        let with = |kind, slots| DataConfig {
            reconstruct: ReconstructSettings { kind, ..Default::default() },
            admission: execution::AdmissionSettings { slots, ..Default::default() },
            ..valid()
        };
        for kind in [ReconstructKind::Gateway, ReconstructKind::Segmented, ReconstructKind::Apls, ReconstructKind::Auto]
        {
            assert!(with(kind, None).validate().is_ok(), "{kind:?} without a pool");
        }
        assert!(with(ReconstructKind::Segmented, Some(4)).validate().is_ok(), "segmented reads take slots");
        for kind in [ReconstructKind::Apls, ReconstructKind::Auto] {
            let error = with(kind, Some(4)).validate().unwrap_err().to_string();
            assert!(error.contains("could never admit"), "{kind:?} beside a pool too small: {error}");
            let sessions = valid().code_spec().unwrap().total_units() - 1;
            assert!(with(kind, Some(sessions)).validate().is_ok(), "{kind:?} beside a pool of {sessions}");
        }
        let backend = BackendConfig {
            endpoint: "http://127.0.0.1:9000".into(),
            bucket: "b".into(),
            access_key: "a".into(),
            secret_key: "s".into(),
            ..Default::default()
        };
        let in_backend_mode = |kind| DataConfig {
            backend: Some(backend.clone()),
            packed: PackedConfig { max_object_bytes: 0, ..Default::default() },
            reconstruct: ReconstructSettings { kind, ..Default::default() },
            ..valid()
        };
        for kind in [ReconstructKind::Segmented, ReconstructKind::Apls] {
            let error = in_backend_mode(kind).validate().unwrap_err().to_string();
            assert!(error.contains("backend"), "{kind:?} in backend mode: {error}");
        }
    }
}
