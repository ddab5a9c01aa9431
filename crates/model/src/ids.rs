//! Typed ids. Each is a thin newtype so that a node index cannot be passed
//! where a partition index is expected.
//!
//! Must not: carry meaning beyond identity (no placement, no sizes).

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty), $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl $name {
            /// The id as an index into a dense table.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_type!(
    /// A storage node, `0..node_count`.
    NodeId(u32), "node-"
);
id_type!(
    /// A data partition (a data unit of one stripe in the packed layout),
    /// `0..stripes * k`. Partition `p` is data unit `p % k` of stripe `p / k`.
    PartitionId(u32), "partition-"
);
id_type!(
    /// A stripe (coding group): k data partitions and their parity.
    StripeId(u32), "stripe-"
);
id_type!(
    /// An object (a byte range inside one data partition).
    ObjectId(u64), "object-"
);
id_type!(
    /// A frontend (gateway / controller).
    FrontendId(u16), "frontend-"
);
id_type!(
    /// A client request, unique within a run; records are keyed by it.
    RequestId(u64), "request-"
);
