//! The controller's configuration (`[controller]`): the policy at start and its parameters, the
//! frontend's numbers, the records kept, probing, the catalog's bound, batch reads' access policy
//! and the mover; their validation; the policy state `GET /admin/policy` shows. Must not start
//! anything.

use std::collections::BTreeMap;

use policy::ecstore::access::AccessSettings;
use policy::{PolicyKind, PolicySettings};
use serde::{Deserialize, Serialize};

use crate::data::DataError;
use crate::data::config::MoverConfig;

/// Largest `max_catalog_stripes` accepted (about 180 MB of placement and policy tables).
pub const MAX_CATALOG_STRIPES: usize = 1 << 20;

/// Longest `probe_timeout_ms` accepted: a decision waits for its probes at most this long.
pub(super) const MAX_PROBE_TIMEOUT_MS: u64 = 60_000;

/// The `[controller]` section of a gateway's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControllerConfig {
    /// The read policy at start. Default `hedged`: a normal read hedged after about the healthy
    /// tail, around nodes whose reads keep overrunning (docs/controller.md, "The hedged policy",
    /// and docs/benchmarks.md for the measurement that made it the default).
    pub policy: PolicyKind,
    /// The policies' parameters (timeouts, lazy periods, Opt-Lazy objective).
    pub settings: PolicySettings,
    /// This gateway's frontend number in records. Default 0.
    pub frontend_id: u16,
    /// Gateways sharing the cluster: Opt-Lazy scales its own demand by it. Default 1.
    pub frontend_count: u32,
    /// Records kept until taken (`POST /admin/records/take`); later ones are counted and dropped.
    /// Records are an experiment's instrument, not a log: default 0 keeps none, so a production
    /// gateway's memory stays flat however long it serves. The live experiment's gateways keep
    /// 1,000,000 (about 200 MB at the worst) and take them after every run.
    pub max_records: usize,
    /// Seed of the policy's random draws. Default 0 (with `frontend_id` mixed in).
    pub seed: u64,
    /// How long a probe may take before its node counts as unreachable (an enormous queue, which
    /// no policy picks). Default 500 ms: far above a loaded loopback round trip (3 to 15 ms
    /// measured), far below the node RPC timeout that would otherwise stall a decision on a hung
    /// node.
    pub probe_timeout_ms: u64,
    /// Measure the deciding thread's CPU time (`decision_cpu_ns` in records) on one decision in
    /// this many; the others record 0. Default 8; 1 measures every decision. Reading a thread's
    /// CPU clock is a system call that makes the kernel charge the thread's time slice, so a
    /// preemption that is due lands right there, inside the decision it measures: measured on
    /// this project's 2-core host, reading it on every decision put 2.3 % of the PW2 decisions
    /// over 200 µs, against 0.8 % with one in 8 (docs/controller.md).
    pub cpu_sample_every: u32,
    /// Stripes the controller's placement holds (about 170 bytes each); the first read of one
    /// more makes the placement and the policy's tables start afresh, keeping the nodes and their
    /// measured rates. Every stripe ever read would otherwise stay: a gateway's memory would
    /// follow the store's size. Default 16,384 (about 3 MB: full within minutes, then flat); the live
    /// experiment's gateways keep
    /// [`MAX_CATALOG_STRIPES`], so a run never starts afresh in the middle.
    pub max_catalog_stripes: usize,
    /// How batch reads (EC-Store, `POST /{bucket}?lowtail-batch-get`) choose the units of their
    /// blocks. Default: the least-cost plan (`cost`), no late binding.
    pub access: AccessSettings,
    /// EC-Store's mover (`[controller.mover]`): off by default.
    pub mover: MoverConfig,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            policy: PolicyKind::Hedged,
            settings: PolicySettings::default(),
            frontend_id: 0,
            frontend_count: 1,
            max_records: 0,
            seed: 0,
            probe_timeout_ms: 500,
            cpu_sample_every: 8,
            max_catalog_stripes: 1 << 14,
            access: AccessSettings::default(),
            mover: MoverConfig::default(),
        }
    }
}

impl ControllerConfig {
    /// Checks what can be checked before start.
    pub fn validate(&self) -> Result<(), DataError> {
        let bad = |why: &str| Err(DataError::Internal(format!("controller config: {why}")));
        if self.frontend_count == 0 {
            return bad("frontend_count must be at least 1");
        }
        if u32::from(self.frontend_id) >= self.frontend_count {
            return bad("frontend_id must be below frontend_count");
        }
        if !(1..=MAX_PROBE_TIMEOUT_MS).contains(&self.probe_timeout_ms) {
            return bad(&format!("probe_timeout_ms must be 1 to {MAX_PROBE_TIMEOUT_MS}"));
        }
        if self.cpu_sample_every == 0 {
            return bad("cpu_sample_every must be at least 1 (1 measures every decision)");
        }
        if !(1..=MAX_CATALOG_STRIPES).contains(&self.max_catalog_stripes) {
            return bad(&format!("max_catalog_stripes must be 1 to {MAX_CATALOG_STRIPES}"));
        }
        self.access.validate().map_err(|why| DataError::Internal(format!("controller config: access: {why}")))?;
        self.mover.validate()?;
        validate_settings(&self.settings)
    }
}

/// Checks policy parameters (zero periods or timeouts would make a policy spin or degrade always).
pub fn validate_settings(settings: &PolicySettings) -> Result<(), DataError> {
    if settings.normal_timeout_ms == 0 || settings.lmlf_lazy_period_ms == 0 || settings.opt_lazy_period_ms == 0 {
        return Err(DataError::Internal(
            "policy settings: normal_timeout_ms, lmlf_lazy_period_ms and opt_lazy_period_ms must be positive".into(),
        ));
    }
    Ok(())
}

/// The policy a controller runs, as `GET /admin/policy` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyState {
    /// The policy.
    pub policy: PolicyKind,
    /// Its parameters.
    pub settings: PolicySettings,
    /// What the policy shows of its state (FAST CLOUD: the delay model in use and the last
    /// fit), by name; empty for the others.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gauges: BTreeMap<String, f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_refuses_inconsistent_frontends_and_zero_periods() {
        assert!(ControllerConfig::default().validate().is_ok());
        assert!(ControllerConfig { frontend_id: 1, ..Default::default() }.validate().is_err());
        assert!(ControllerConfig { frontend_count: 0, ..Default::default() }.validate().is_err());
        assert!(ControllerConfig { cpu_sample_every: 0, ..Default::default() }.validate().is_err());
        assert!(ControllerConfig { cpu_sample_every: 1, ..Default::default() }.validate().is_ok());
        let settings = PolicySettings { opt_lazy_period_ms: 0, ..Default::default() };
        assert!(ControllerConfig { settings, ..Default::default() }.validate().is_err());
    }
}
