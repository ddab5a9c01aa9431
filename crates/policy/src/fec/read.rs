//! FAST CLOUD's requests: n chunks of the request's stripe, data units first, with n from a
//! [`CodeLengthPolicy`] over the frontend's state. A read is done at the first k, the rest
//! cancelled. A write class (in the simulator, whose tasks take the write fit's delays) is
//! acknowledged when its ack rule's count of units are stored, and the rest are cancelled (the
//! paper's analysis) or completed in the background, holding their slots (its option 1).
//!
//! Must not: probe nodes (FAST CLOUD treats the store as a black box) or look at anything but the
//! frontend's state and the placement.

use super::{CodeLengthError, CodeLengthPolicy, FitInput, OnlineFit};
use crate::{ClusterView, ReadPolicy, RefreshResult, RefreshWork};
use model::{
    CodeLayout, DecodeAt, PlannedTask, Quorum, ReadPlan, ReadRequest, ReconstructionTopology, RequestRecord,
    TaskRecord, TaskRole,
};
use optimize::fec_model::{DelayFit, DelayModel};
use rand::RngCore;

/// How many stored units acknowledge a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AckAt {
    /// k: decodable, no loss survived yet.
    K,
    /// k + 1 (at most n): one loss survived.
    #[serde(alias = "k+1")]
    KPlusOne,
    /// All n.
    #[serde(alias = "all")]
    AllN,
}

impl AckAt {
    /// The rule's name as a bucket's write acknowledgement spells it: `k`, `k+1` or `all`.
    pub fn name(self) -> &'static str {
        match self {
            AckAt::K => "k",
            AckAt::KPlusOne => "k+1",
            AckAt::AllN => "all",
        }
    }
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
    /// Refits of the delay model from the policy's own tasks, when on.
    fit: Option<OnlineFit>,
}

/// What a refit computed: the fit per class and the code-length policy over its models.
struct Refit {
    fits: Vec<Option<DelayFit>>,
    code_length: CodeLengthPolicy,
}

impl FecRead {
    /// Reads by `code_length` on stripes of `layout`: every class's k must be the code's k, and
    /// its n_max at most the code's n.
    pub fn new(code_length: CodeLengthPolicy, layout: &CodeLayout) -> Result<FecRead, CodeLengthError> {
        let ops = vec![ClassOp::Read; code_length.classes().len()];
        FecRead::with_ops(code_length, ops, layout)
    }

    /// [`FecRead::new`] with class i's requests being `ops[i]` (one per class). A read class's k
    /// must be the code's k (it decodes the stripe); a write class stores its own object's n units
    /// and is done at its ack rule, so any k with n_max at most the code's n serves (Fig. 9 writes
    /// objects of two chunks beside reads of three).
    pub fn with_ops(
        code_length: CodeLengthPolicy,
        ops: Vec<ClassOp>,
        layout: &CodeLayout,
    ) -> Result<FecRead, CodeLengthError> {
        if ops.len() != code_length.classes().len() {
            return Err(CodeLengthError::OpsPerClass { classes: code_length.classes().len(), ops: ops.len() });
        }
        for (class, (code, op)) in code_length.classes().iter().zip(&ops).enumerate() {
            let k_fits = match op {
                ClassOp::Read => usize::from(code.k) == layout.data_units(),
                ClassOp::Write { .. } => code.k >= 1,
            };
            if !k_fits || usize::from(code.n_max) > layout.total_units() {
                return Err(CodeLengthError::BadClass { class, k: code.k, n_max: code.n_max });
            }
        }
        Ok(FecRead { code_length, ops, fit: None })
    }

    /// The code-length policy, for its thresholds and name.
    pub fn code_length(&self) -> &CodeLengthPolicy {
        &self.code_length
    }

    /// Refits the delay model every `fit`'s period from the delays of the policy's own tasks
    /// (one window per class), and BAFEC's thresholds from it.
    pub fn with_online_fit(self, fit: OnlineFit) -> FecRead {
        FecRead { fit: Some(fit), ..self }
    }

    /// The online fit, when on.
    pub fn online_fit(&self) -> Option<&OnlineFit> {
        self.fit.as_ref()
    }
}

/// The refit of `input` and BAFEC's thresholds over it (a class without a fit keeps `current`'s
/// model; the other kinds have no models and keep none).
fn refit(input: &FitInput, mut code_length: CodeLengthPolicy) -> Refit {
    let fits = input.fit();
    if !code_length.models().is_empty() {
        let models: Vec<DelayModel> =
            fits.iter().zip(code_length.models()).map(|(fit, &current)| fit.map_or(current, |f| f.model)).collect();
        code_length.set_delay_models(&models).expect("one model per class");
    }
    Refit { fits, code_length }
}

impl ReadPolicy for FecRead {
    fn name(&self) -> &'static str {
        self.code_length.name()
    }

    fn refresh_period_ns(&self) -> Option<u64> {
        self.fit.as_ref().map(OnlineFit::period_ns)
    }

    fn refresh_probes_nodes(&self) -> bool {
        false
    }

    fn begin_refresh(
        &mut self,
        _view: &mut dyn ClusterView,
        _now_ns: u64,
        _rng: &mut dyn RngCore,
    ) -> Option<RefreshWork> {
        let input = self.fit.as_ref()?.snapshot();
        let code_length = self.code_length.clone();
        Some(RefreshWork::new(move || refit(&input, code_length)))
    }

    fn finish_refresh(&mut self, result: RefreshResult) {
        let refit = result.downcast::<Refit>().unwrap_or_else(|_| panic!("a refit is FecRead's only work"));
        self.fit.as_mut().expect("only a fitting policy hands out work").install(refit.fits);
        self.code_length = refit.code_length;
    }

    fn observe(&mut self, request: &RequestRecord, tasks: &[TaskRecord]) {
        if let Some(fit) = &mut self.fit {
            fit.observe(request, tasks);
        }
    }

    fn gauges(&self) -> Vec<(&'static str, f64)> {
        let mut gauges = Vec::new();
        // The first class's (the gateway runs one, reads).
        if let Some(model) = self.code_length.models().first() {
            gauges.push(("fec_delay_shift_seconds", model.shift_s));
            gauges.push(("fec_delay_exp_mean_seconds", model.exp_mean_s));
        }
        if let Some(fit) = self.fit.as_ref().and_then(|f| f.last_fits().first().copied().flatten()) {
            gauges.push(("fec_fit_shift_seconds", fit.model.shift_s));
            gauges.push(("fec_fit_exp_mean_seconds", fit.model.exp_mean_s));
            gauges.push(("fec_fit_samples", (fit.samples_used + fit.samples_censored) as f64));
        }
        gauges
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
        ReadPlan { tasks, quorum, decode, topology: ReconstructionTopology::Gateway, deadline_ns: None }
    }
}
