//! A read request as a frontend receives it.
//!
//! Must not: say how it is served (that is a [`crate::ReadPlan`]).

use crate::ids::{ObjectId, PartitionId, RequestId};
use serde::{Deserialize, Serialize};

/// A read of one object: a byte range of one data partition (the packed
/// layout of Windows Azure Storage, as in Hu et al.).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadRequest {
    /// Unique within a run.
    pub id: RequestId,
    /// The object read.
    pub object: ObjectId,
    /// The data partition holding it.
    pub partition: PartitionId,
    /// Byte offset of the object in its partition.
    pub offset: u64,
    /// Bytes read (the task size D of the paper); at least 1.
    pub length: u64,
    /// When the request reaches a frontend.
    pub arrival_ns: u64,
    /// Its operation class: an operation on one chunk size, with task delays of its own (FAST
    /// CLOUD's read and write classes); 0 where there is one. Not its latency class.
    #[serde(default)]
    pub class: u8,
    /// Its latency class (Xiang et al.: a tenant's class with a weight and a share; 0 the best):
    /// the class the S3 layer resolved for the request, which the `jlwo` policy plans with.
    #[serde(default)]
    pub latency_class: u8,
}
