//! FAST CLOUD's setting in the simulator (Liang & Kozat, section III): one frontend (the proxy) of
//! L task slots in front of a key-value store whose task delays are i.i.d. Δ + Exp(1/μ), reads of
//! a stripe's units done at the first k of n, with n from a code-length policy. Builds the engine
//! for that setting from a few numbers; the engine, the pool and the policy are the ones every
//! other run uses.
//!
//! Must not: decide anything a policy or the execution core decides.

use crate::{ClassDelay, Engine, EngineSetup, FrontendModel, NodeModel};
use codec::CodeSpec;
use execution::{AdmissionMode, AdmissionSettings};
use model::{CodeLayout, NodeId, ObjectId, PartitionId, Placement, ReadRequest, RecordLog, RequestId};
use optimize::fec_model::{Admission, DelayModel};
use policy::fec::{ClassCode, ClassOp, CodeLengthError, CodeLengthKind, CodeLengthPolicy, FecRead};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Stripes over which requests spread (their units on distinct nodes); with as many servers per
/// node as slots, where a task lands does not change its delay.
const STRIPES: u32 = 32;

/// One class of requests: its code, its task delays and what its requests are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FecClassSetup {
    /// k and the longest code.
    pub code: ClassCode,
    /// Task delays.
    pub delay: DelayModel,
    /// Reads, or writes with their ack rule.
    pub op: ClassOp,
}

/// One FAST CLOUD run's setting.
#[derive(Clone, Debug, PartialEq)]
pub struct FecSetup {
    /// The classes, by a request's `class`. They read one code, so they share k; the largest
    /// n_max sets the code's n.
    pub classes: Vec<FecClassSetup>,
    /// L.
    pub slots: usize,
    /// Blocking or non-blocking admission.
    pub admission: Admission,
    /// How n is chosen.
    pub kind: CodeLengthKind,
    /// The engine's seed (task delays).
    pub seed: u64,
}

impl FecSetup {
    /// One class of `code` and `delay`.
    pub fn one_class(
        code: ClassCode,
        delay: DelayModel,
        slots: usize,
        admission: Admission,
        kind: CodeLengthKind,
        seed: u64,
    ) -> FecSetup {
        FecSetup { classes: vec![FecClassSetup { code, delay, op: ClassOp::Read }], slots, admission, kind, seed }
    }

    /// The classes' k (the first class's: they share one code); `None` without classes.
    pub fn k(&self) -> Option<usize> {
        self.classes.first().map(|c| usize::from(c.code.k))
    }

    /// The code's n: the largest n_max of the classes (at least k).
    pub fn n_max(&self) -> Option<usize> {
        let k = self.k()?;
        Some(self.classes.iter().map(|c| usize::from(c.code.n_max)).fold(k, usize::max))
    }

    /// Runs `requests` (from [`poisson_reads`]) and returns their records.
    pub fn run(&self, requests: &[ReadRequest]) -> Result<RecordLog, CodeLengthError> {
        let (Some(k), Some(n_max)) = (self.k(), self.n_max()) else { return Err(CodeLengthError::NoClasses) };
        // An (n_max, k) code: n_max − k parities (at least one, so an uncoded setting still has a code).
        let spec = CodeSpec::Rs { k, m: (n_max - k).max(1) };
        let units = spec.total_units() as u32;
        let nodes = STRIPES * units;
        let placement =
            Placement::new(spec, nodes, (0..nodes).map(NodeId).collect()).expect("a stripe's units on distinct nodes");
        let layout = CodeLayout::new(spec).expect("an RS layout");
        let class_delays: Vec<ClassDelay> = self
            .classes
            .iter()
            .map(|c| ClassDelay {
                overhead_ns: (c.delay.shift_s * 1e9).round() as u64,
                exp_mean_ns: (c.delay.exp_mean_s * 1e9).round() as u64,
            })
            .collect();
        let admission_mode = match self.admission {
            Admission::Blocking => AdmissionMode::Blocking,
            Admission::NonBlocking => AdmissionMode::NonBlocking,
        };
        let setup = EngineSetup {
            placement: &placement,
            layout: &layout,
            nodes: NodeModel {
                overhead_ns: class_delays[0].overhead_ns,
                // Bytes cost nothing: a task's delay is Δ + Exp, the whole round trip.
                rates_bytes_per_s: vec![1e18; nodes as usize],
                exp_mean_ns: class_delays[0].exp_mean_ns,
                // The proxy's thread is free the moment it cancels (section III-C).
                cancel_in_service: true,
                servers: self.slots,
                class_delays: class_delays.clone(),
                slowdown: None,
                outages: Vec::new(),
            },
            frontends: FrontendModel {
                admission: AdmissionSettings { slots: Some(self.slots), mode: admission_mode },
                ..FrontendModel::instant()
            },
            network_latency_ns: 0,
            seed: self.seed,
        };
        let codes = self.classes.iter().map(|c| c.code).collect();
        let delays: Vec<DelayModel> = self.classes.iter().map(|c| c.delay).collect();
        let code_length = CodeLengthPolicy::new(self.kind.clone(), codes, self.slots as u32, self.admission, &delays)?;
        let policy = FecRead::with_ops(code_length, self.classes.iter().map(|c| c.op).collect(), &layout)?;
        Ok(Engine::new(setup, vec![Box::new(policy)]).run(requests).records)
    }
}

/// `count` reads arriving as a Poisson process of `rate_per_s`, each of a uniformly drawn stripe.
pub fn poisson_reads(count: usize, rate_per_s: f64, seed: u64) -> Vec<ReadRequest> {
    poisson_mix(count, rate_per_s, &[1.0], seed)
}

/// [`poisson_reads`] of several classes: each request is of class i with probability
/// `class_shares[i]` (normalised), so class i arrives as a Poisson process of its share of
/// `rate_per_s`.
pub fn poisson_mix(count: usize, rate_per_s: f64, class_shares: &[f64], seed: u64) -> Vec<ReadRequest> {
    assert!(rate_per_s > 0.0 && rate_per_s.is_finite(), "a positive arrival rate");
    assert!(!class_shares.is_empty() && class_shares.iter().all(|s| *s >= 0.0), "class shares");
    let total: f64 = class_shares.iter().sum();
    assert!(total > 0.0, "some class arrives");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut time_s = 0.0f64;
    (0..count)
        .map(|i| {
            time_s += -(1.0 - rng.random::<f64>()).ln() / rate_per_s;
            let mut draw = rng.random::<f64>() * total;
            let class = class_shares.iter().position(|&share| {
                draw -= share;
                draw < 0.0
            });
            ReadRequest {
                id: RequestId(i as u64),
                object: ObjectId(0),
                // Partition p is unit p mod k of stripe p / k: any of the stripe's partitions reads it whole.
                partition: PartitionId(rng.random_range(0..STRIPES)),
                offset: 0,
                length: 1 << 20,
                arrival_ns: (time_s * 1e9).round() as u64,
                class: class.unwrap_or(class_shares.len() - 1) as u8,
                latency_class: 0,
            }
        })
        .collect()
}
