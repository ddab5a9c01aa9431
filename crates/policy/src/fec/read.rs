//! FAST CLOUD's read: ask n chunks of the request's stripe, data units first, and be done at the
//! first k (the rest cancelled), with n from a [`CodeLengthPolicy`] over the frontend's state.
//!
//! Must not: probe nodes (FAST CLOUD treats the store as a black box) or look at anything but the
//! frontend's state and the placement.

use super::{CodeLengthError, CodeLengthPolicy};
use crate::{ClusterView, ReadPolicy};
use model::{CodeLayout, DecodeAt, PlannedTask, Quorum, ReadPlan, ReadRequest, ReconstructionTopology, TaskRole};
use rand::RngCore;

/// The read policy (one per frontend). A request's `class` picks its class of `code_length`.
#[derive(Clone, Debug)]
pub struct FecRead {
    code_length: CodeLengthPolicy,
}

impl FecRead {
    /// Reads by `code_length` on stripes of `layout`: every class's k must be the code's k, and
    /// its n_max at most the code's n.
    pub fn new(code_length: CodeLengthPolicy, layout: &CodeLayout) -> Result<FecRead, CodeLengthError> {
        for (class, code) in code_length.classes().iter().enumerate() {
            if usize::from(code.k) != layout.data_units() || usize::from(code.n_max) > layout.total_units() {
                return Err(CodeLengthError::BadClass { class, k: code.k, n_max: code.n_max });
            }
        }
        Ok(FecRead { code_length })
    }

    /// The code-length policy, for its thresholds and name.
    pub fn code_length(&self) -> &CodeLengthPolicy {
        &self.code_length
    }
}

impl ReadPolicy for FecRead {
    fn name(&self) -> &'static str {
        self.code_length.name()
    }

    fn plan(
        &mut self,
        view: &mut dyn ClusterView,
        _now_ns: u64,
        request: &ReadRequest,
        _rng: &mut dyn RngCore,
    ) -> ReadPlan {
        let class = usize::from(request.class);
        let classes = self.code_length.classes();
        assert!(class < classes.len(), "request class {class} of {} configured", classes.len());
        let k = classes[class].k;
        let n = self.code_length.code_length(&view.frontend_state(), class);
        let placement = view.placement();
        let stripe = placement.locate(request.partition).stripe;
        // Data units first: when they are among the first k, nothing is decoded.
        let tasks = (0..n as u8)
            .map(|unit| PlannedTask {
                node: placement.node_of(stripe, unit),
                unit,
                offset: request.offset,
                length: request.length,
                role: if u16::from(unit) < k { TaskRole::Normal } else { TaskRole::Degraded },
            })
            .collect();
        ReadPlan {
            tasks,
            quorum: Quorum::FirstKOfN { k },
            decode: DecodeAt::Gateway,
            topology: ReconstructionTopology::Gateway,
        }
    }
}
