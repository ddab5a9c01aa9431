//! A small object's read from the replicas of its open stripe: one plan of the execution core
//! (`Quorum::FirstCopy`), its copies launched a wait apart and raced, the first answer serving and
//! the rest cancelled. Owns the plan of copies and their RPCs; must not decide when the next copy
//! goes out or what is cancelled (the core does) nor which copies to try first (the read policy's
//! order, `Controller::copy_read_order`).

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use codec::ErasureCode;
use meta::{NodeInfo, StripeId};
use model::{DecodeAt, PlannedTask, Quorum, ReadPlan, ReconstructionTopology, TaskRole};
use tokio::time::Instant;

use crate::data::io::stripe_io::StripeIo;
use crate::data::read::executor::{self, Clock, TaskEnd, TaskResult};

/// The bytes one copy holds: `length` bytes at `offset` of replica unit `seq`, a copy of data unit
/// `unit` of `stripe`.
#[derive(Clone, Copy, Debug)]
pub(super) struct CopyRange {
    pub(super) stripe: StripeId,
    pub(super) unit: u16,
    pub(super) seq: u16,
    pub(super) offset: u64,
    pub(super) length: u64,
}

/// The copy's bytes from the first of `targets` (in order, one launched every `wait`) to answer;
/// else the last error.
pub(super) async fn read_first_copy(
    io: &StripeIo,
    code: &dyn ErasureCode,
    copy: &CopyRange,
    targets: &[&NodeInfo],
    wait: Duration,
) -> Result<Bytes, String> {
    if targets.is_empty() {
        return Err("no replica node is up".into());
    }
    let unit = u8::try_from(copy.unit).map_err(|_| format!("data unit {} has no u8 index", copy.unit))?;
    let tasks = targets
        .iter()
        .enumerate()
        .map(|(i, node)| PlannedTask {
            node: model::NodeId(node.id.0),
            unit,
            offset: copy.offset,
            length: copy.length,
            role: if i == 0 { TaskRole::Normal } else { TaskRole::Fallback },
        })
        .collect();
    let wait_ns = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
    let plan = ReadPlan {
        tasks,
        quorum: Quorum::FirstCopy { wait_ns },
        decode: DecodeAt::None,
        topology: ReconstructionTopology::Gateway,
        deadline_ns: None,
    };
    let clock = Clock { epoch: Instant::now() };
    let errors: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let run_task = |i: usize| read_one(io, copy, targets[i], clock, &errors);
    let driven = executor::drive(&plan, unit, code, clock, None, run_task, None).await;
    match driven.completed {
        Some((served, _)) => {
            let bytes = served.first().and_then(|&task| driven.bytes[task].clone());
            bytes.ok_or_else(|| "the serving copy had no bytes".into())
        }
        None => Err(crate::data::lock(&errors).pop().unwrap_or_else(|| "no copy answered".into())),
    }
}

/// One copy's RPC, its error kept in `errors`.
async fn read_one(
    io: &StripeIo,
    copy: &CopyRange,
    node: &NodeInfo,
    clock: Clock,
    errors: &Mutex<Vec<String>>,
) -> TaskResult {
    let sent_ns = clock.now_ns();
    let read = async {
        let client = io.cluster().client(node).await.map_err(|e| e.to_string())?;
        client.read_range(copy.stripe.0, copy.seq, copy.offset, copy.length).await.map_err(|e| e.to_string())
    };
    match read.await {
        Ok((bytes, timing)) => (TaskEnd::Done { timing, sent_ns, received_ns: clock.now_ns() }, Some(bytes)),
        Err(error) => {
            crate::data::lock(errors).push(format!("replica {} on node {}: {error}", copy.seq, node.id));
            (TaskEnd::Failed { sent_ns }, None)
        }
    }
}
