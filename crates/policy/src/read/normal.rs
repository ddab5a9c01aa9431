//! Normal: read the original unit; if it has not answered within the
//! timeout, launch a degraded read (the existing practice Hu et al. compare
//! against). No probes.
//!
//! Must not: look at queues; its only state is the timeout.

use super::cost::{normal_task, sampled_set, set_tasks};
use crate::{ClusterView, ReadPolicy};
use model::{DecodeAt, Quorum, ReadPlan, ReadRequest, ReconstructionTopology, TaskRole};
use rand::RngCore;

/// The Normal policy.
#[derive(Clone, Debug)]
pub struct Normal {
    timeout_ns: u64,
}

impl Normal {
    /// Normal reads with a degraded read after `timeout_ns`.
    pub fn new(timeout_ns: u64) -> Normal {
        assert!(timeout_ns > 0, "a zero timeout would make every read degraded");
        Normal { timeout_ns }
    }
}

impl ReadPolicy for Normal {
    fn name(&self) -> &'static str {
        "normal"
    }

    fn plan(
        &mut self,
        view: &mut dyn ClusterView,
        _now_ns: u64,
        request: &ReadRequest,
        rng: &mut dyn RngCore,
    ) -> ReadPlan {
        let placement = view.placement();
        let location = placement.locate(request.partition);
        let sets = view.layout().recovery_sets(location.unit);
        let set = &sets[sampled_set(sets, rng)];
        let mut tasks = Vec::with_capacity(1 + set.units.len());
        tasks.push(normal_task(placement, location, request));
        tasks.extend(set_tasks(placement, location, request, set, TaskRole::Fallback));
        ReadPlan {
            tasks,
            quorum: Quorum::NormalThenFallback { timeout_ns: self.timeout_ns },
            decode: DecodeAt::Gateway,
            topology: ReconstructionTopology::Gateway,
            deadline_ns: None,
        }
    }
}
