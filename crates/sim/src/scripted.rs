//! One read plan run alone on one stripe with service times chosen per node: the engine as a
//! scripted timeline, to check what the execution core does in virtual time against what it does
//! in another shell (the gateway's tests run the same timeline there) or against a hand-written
//! expectation.
//!
//! Must not: be used for measurements (one request, no workload, no policy of the papers).

use codec::CodeSpec;
use execution::AdmissionSettings;
use model::{CodeLayout, NodeId, ObjectId, PartitionId, Placement, ReadPlan, ReadRequest, RequestId};
use policy::{ClusterView, ReadPolicy};
use rand::RngCore;

use crate::engine::{Engine, EngineOutput, EngineSetup, FrontendModel, NodeModel, Outage};

/// A timeline: `plan` reads data unit `plan.tasks[0].unit`'s partition of a stripe of `code` with
/// unit u on node u; node u serves any task in `service_ns[u]`; `outages` take nodes down; every
/// message takes `latency_ns`; the frontend's task slots are `admission`. The request arrives at 0
/// and is decided at once.
#[derive(Clone, Debug)]
pub struct Timeline {
    /// The stripes' code.
    pub code: CodeSpec,
    /// The plan the request runs.
    pub plan: ReadPlan,
    /// Service time of each node (one per unit of the code), ns; more than 0.
    pub service_ns: Vec<u64>,
    /// Node outages.
    pub outages: Vec<Outage>,
    /// One-way network latency, ns.
    pub latency_ns: u64,
    /// The frontend's admission pool.
    pub admission: AdmissionSettings,
}

/// The policy of a timeline: always its plan.
struct Fixed(ReadPlan);

impl ReadPolicy for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }
    fn plan(
        &mut self,
        _view: &mut dyn ClusterView,
        _now_ns: u64,
        _request: &ReadRequest,
        _rng: &mut dyn RngCore,
    ) -> ReadPlan {
        self.0.clone()
    }
}

/// Runs `timeline`; the output's actions are traced.
pub fn run(timeline: &Timeline) -> EngineOutput {
    let spec = timeline.code;
    let nodes = spec.total_units() as u32;
    assert_eq!(timeline.service_ns.len(), nodes as usize, "one service time per node");
    let placement = Placement::new(spec, nodes, (0..nodes).map(NodeId).collect()).expect("one stripe on every node");
    let layout = CodeLayout::new(spec).expect("a valid code");
    let length = timeline.plan.tasks[0].length;
    let target = timeline.plan.tasks[0].unit;
    let setup = EngineSetup {
        placement: &placement,
        layout: &layout,
        nodes: NodeModel {
            overhead_ns: 0,
            rates_bytes_per_s: timeline.service_ns.iter().map(|&ns| length as f64 * 1e9 / ns as f64).collect(),
            exp_mean_ns: 0,
            cancel_in_service: true,
            servers: 1,
            class_delays: Vec::new(),
            slowdown: None,
            outages: timeline.outages.clone(),
        },
        frontends: FrontendModel { admission: timeline.admission, ..FrontendModel::instant() },
        network_latency_ns: timeline.latency_ns,
        seed: 1,
    };
    assert!(usize::from(target) < spec.data_units(), "the first task reads a data unit");
    // Data partition p is data unit p % k of stripe p / k: stripe 0's unit `target`.
    let partition = PartitionId(u32::from(target));
    let request = ReadRequest {
        id: RequestId(0),
        object: ObjectId(0),
        partition,
        offset: 0,
        length,
        arrival_ns: 0,
        class: 0,
        latency_class: 0,
    };
    Engine::new(setup, vec![Box::new(Fixed(timeline.plan.clone()))]).trace_actions().run(&[request])
}
