//! FAST CLOUD's requests: n chunks of the request's stripe, data units first, with n from a
//! [`CodeLengthPolicy`] over the frontend's state. A read is done at the first k, the rest
//! cancelled. A write class (in the simulator, whose tasks take the write fit's delays) is
//! acknowledged when its ack rule's count of units are stored, and the rest are cancelled (the
//! paper's analysis) or completed in the background, holding their slots (its option 1).
//!
//! Must not: probe nodes (FAST CLOUD treats the store as a black box) or look at anything but the
//! frontend's state and the placement.

use super::{CodeLengthError, CodeLengthPolicy};
use crate::{ClusterView, ReadPolicy};
use model::{CodeLayout, DecodeAt, PlannedTask, Quorum, ReadPlan, ReadRequest, ReconstructionTopology, TaskRole};
use rand::RngCore;

/// How many stored units acknowledge a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AckAt {
    /// k: decodable, no loss survived yet.
    K,
    /// k + 1 (at most n): one loss survived.
    KPlusOne,
    /// All n.
    AllN,
}

/// What a write's units not needed for its acknowledgement do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AfterAck {
    /// Cancelled at the acknowledgement (FAST CLOUD's analysis: the usage u(n) counts no more).
    Cancel,
    /// Completed in the background, holding their slots until stored (the paper's option 1).
    Continue,
}

/// What a class's requests are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case", tag = "op")]
pub enum ClassOp {
    /// Done at the first k of n, the rest cancelled.
    Read,
    /// Acknowledged at `ack` stored units; the rest `rest`.
    Write {
        /// The ack rule.
        ack: AckAt,
        /// The units past it.
        rest: AfterAck,
    },
}

/// The policy (one per frontend). A request's `class` picks its class of `code_length` and its
/// [`ClassOp`].
#[derive(Clone, Debug)]
pub struct FecRead {
    code_length: CodeLengthPolicy,
    ops: Vec<ClassOp>,
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
        let ops = vec![ClassOp::Read; code_length.classes().len()];
        Ok(FecRead { code_length, ops })
    }

    /// [`FecRead::new`] with class i's requests being `ops[i]` (one per class).
    pub fn with_ops(
        code_length: CodeLengthPolicy,
        ops: Vec<ClassOp>,
        layout: &CodeLayout,
    ) -> Result<FecRead, CodeLengthError> {
        if ops.len() != code_length.classes().len() {
            return Err(CodeLengthError::OpsPerClass { classes: code_length.classes().len(), ops: ops.len() });
        }
        Ok(FecRead { ops, ..FecRead::new(code_length, layout)? })
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
        let (quorum, decode) = match self.ops[class] {
            ClassOp::Read => (Quorum::FirstKOfN { k }, DecodeAt::Gateway),
            ClassOp::Write { ack, rest } => {
                let count = match ack {
                    AckAt::K => k,
                    AckAt::KPlusOne => (k + 1).min(n),
                    AckAt::AllN => n,
                };
                let quorum = match rest {
                    AfterAck::Cancel => Quorum::FirstKOfN { k: count },
                    AfterAck::Continue => Quorum::AnyK { k: count },
                };
                (quorum, DecodeAt::None)
            }
        };
        ReadPlan { tasks, quorum, decode, topology: ReconstructionTopology::Gateway }
    }
}
