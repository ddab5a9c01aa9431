//! Plans: what a policy decides and an executor carries out. A plan is data.
//!
//! Must not: hold executor state (queues, timers) or policy state.

use crate::ids::NodeId;
use serde::{Deserialize, Serialize};

/// Why a task is part of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum TaskRole {
    /// The normal read of the original unit.
    Normal = 0,
    /// A read of a recovery-set unit, launched up front (a proactive
    /// degraded read).
    Degraded = 1,
    /// A read of a recovery-set unit launched only when the normal read
    /// times out ([`Quorum::NormalThenFallback`]).
    Fallback = 2,
    /// A read beyond the `k` a block needs, launched up front so that the first `k` to answer
    /// serve it (EC-Store's late binding).
    Extra = 3,
}

/// One read task: a byte range of one unit on one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedTask {
    /// The node to read from.
    pub node: NodeId,
    /// The unit index within the stripe.
    pub unit: u8,
    /// Byte offset within the unit.
    pub offset: u64,
    /// Bytes to read.
    pub length: u64,
    /// Why the task is in the plan.
    pub role: TaskRole,
}

/// When a read is complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum Quorum {
    /// Every launched task must finish (a normal read of one task, or a
    /// degraded read of a whole recovery set).
    All,
    /// Done when any `k` tasks finished; the others run to completion.
    AnyK {
        /// Tasks needed.
        k: u16,
    },
    /// Done when the first `k` tasks finished; the others are cancelled
    /// (removed from their queues if they have not started).
    FirstKOfN {
        /// Tasks needed.
        k: u16,
    },
    /// The `Normal` task runs; if it has not finished `timeout_ns` after
    /// dispatch, the `Fallback` tasks are launched. Done when the normal
    /// task or every fallback task finished; the losing side is cancelled.
    /// This is the Normal policy of Hu et al. (degraded read on timeout).
    NormalThenFallback {
        /// Time from dispatch to launching the fallback.
        timeout_ns: u64,
    },
    /// Every task reads the same bytes (copies of one range: a small object's replicas). The first
    /// (`Normal`) task runs; every `wait_ns` without an answer, and at once when every task out has
    /// failed, the next (`Fallback`) copy is launched too, the earlier ones still running. Done at
    /// the first copy that finishes; the rest are cancelled.
    FirstCopy {
        /// Time between one copy's launch and the next's.
        wait_ns: u64,
    },
}

/// Where decoding happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecodeAt {
    /// No decoding: the normal read returns the bytes.
    None,
    /// The frontend gathers the recovery set and decodes.
    Gateway,
}

/// How a degraded read's units travel to the decoder: all to the frontend (lowtail's gateway
/// decode), or through a reconstruction dataflow among the nodes holding them (APLS and its
/// baselines; `execution::reconstruct` builds it) in packets of `packet_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum ReconstructionTopology {
    /// Every unit is sent to the frontend, which decodes.
    Gateway,
    /// The plan's tasks are the sources of a dataflow, in its order.
    Dataflow {
        /// The method.
        dataflow: crate::reconstruct::Method,
        /// Packet size in bytes.
        packet_bytes: u32,
    },
}

/// A read plan: tasks, the quorum rule, and how decoding happens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadPlan {
    /// The tasks. Under [`Quorum::NormalThenFallback`] the first task is
    /// the normal read and the rest are the fallback recovery set.
    pub tasks: Vec<PlannedTask>,
    /// When the read is complete.
    pub quorum: Quorum,
    /// Where decoding happens when the data come from a recovery set.
    pub decode: DecodeAt,
    /// How recovery-set units reach the decoder.
    pub topology: ReconstructionTopology,
    /// Time from the start after which a read not complete gives up: its tasks are cancelled and
    /// the shell's fallback takes over (a batch block's robust read). `None`: no limit. Only with a
    /// quorum that arms no timer of its own (all, any k, first k of n).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ns: Option<u64>,
}

impl ReadPlan {
    /// A plan of `tasks` done by `quorum`, its units reaching the gateway (decoded there per
    /// `decode`), without a deadline.
    pub fn new(tasks: Vec<PlannedTask>, quorum: Quorum, decode: DecodeAt) -> ReadPlan {
        ReadPlan { tasks, quorum, decode, topology: ReconstructionTopology::Gateway, deadline_ns: None }
    }

    /// A normal read of one task.
    pub fn normal(task: PlannedTask) -> ReadPlan {
        debug_assert_eq!(task.role, TaskRole::Normal);
        ReadPlan {
            tasks: vec![task],
            quorum: Quorum::All,
            decode: DecodeAt::None,
            topology: ReconstructionTopology::Gateway,
            deadline_ns: None,
        }
    }

    /// A proactive degraded read of a whole recovery set, decoded at the
    /// frontend.
    pub fn degraded(tasks: Vec<PlannedTask>) -> ReadPlan {
        debug_assert!(tasks.iter().all(|t| t.role == TaskRole::Degraded));
        ReadPlan {
            tasks,
            quorum: Quorum::All,
            decode: DecodeAt::Gateway,
            topology: ReconstructionTopology::Gateway,
            deadline_ns: None,
        }
    }

    /// Whether the plan reads a recovery set up front.
    pub fn is_proactive_degraded(&self) -> bool {
        self.tasks.iter().any(|t| t.role == TaskRole::Degraded)
    }

    /// Tasks the plan starts at once (every one but the fallbacks): what it asks of an admission
    /// pool when it arrives.
    pub fn upfront_tasks(&self) -> usize {
        self.tasks.iter().filter(|task| task.role != TaskRole::Fallback).count()
    }

    /// Bytes the plan reads if every task launched runs to completion
    /// (fallback tasks included).
    pub fn bytes_if_all_run(&self) -> u64 {
        self.tasks.iter().map(|t| t.length).sum()
    }

    /// Checks the plan's shape: at least one task, a quorum that can be met,
    /// and the normal-then-fallback layout. Returns what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.tasks.is_empty() {
            return Err("plan has no task".into());
        }
        let n = self.tasks.len();
        if self.deadline_ns.is_some()
            && matches!(self.quorum, Quorum::NormalThenFallback { .. } | Quorum::FirstCopy { .. })
        {
            return Err("a deadline needs a quorum without a timer of its own (all, any k, first k of n)".into());
        }
        match self.quorum {
            Quorum::All => {
                if self.tasks.iter().any(|t| t.role == TaskRole::Fallback) {
                    return Err("fallback tasks need the normal_then_fallback quorum".into());
                }
            }
            Quorum::AnyK { k } | Quorum::FirstKOfN { k } => {
                if k == 0 || k as usize > n {
                    return Err(format!("quorum of {k} among {n} tasks"));
                }
            }
            Quorum::FirstCopy { .. } => {
                if self.tasks[0].role != TaskRole::Normal
                    || self.tasks[1..].iter().any(|t| t.role != TaskRole::Fallback)
                {
                    return Err("first_copy: the first copy is the normal task, every later one a fallback".into());
                }
            }
            Quorum::NormalThenFallback { .. } => {
                if self.tasks[0].role != TaskRole::Normal || n < 2 {
                    return Err("normal_then_fallback needs the normal task first and a fallback set".into());
                }
                if self.tasks[1..].iter().any(|t| t.role != TaskRole::Fallback) {
                    return Err("normal_then_fallback: every task after the first must be a fallback".into());
                }
            }
        }
        Ok(())
    }
}

/// One unit write of a write plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitWrite {
    /// The node written.
    pub node: NodeId,
    /// The unit index within the stripe.
    pub unit: u8,
    /// Bytes written.
    pub bytes: u64,
}

/// When a write is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum AckRule {
    /// After every unit write is durable.
    AllN,
    /// After `k` unit writes are durable; the rest complete in the
    /// background and are tracked until durable.
    KWithBackground {
        /// Writes needed before the acknowledgement.
        k: u16,
    },
}

/// A write plan: unit writes and the acknowledgement rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WritePlan {
    /// The unit writes.
    pub writes: Vec<UnitWrite>,
    /// When the client is acknowledged.
    pub ack: AckRule,
}
