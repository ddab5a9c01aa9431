//! Reconstruction methods (APLS, Xie et al., and its baselines): which one a degraded read's plan
//! names, with its parameters. Plan data only: `execution::reconstruct` builds a method's packet
//! dataflow, the reconstruction policy chooses one.
//!
//! Must not: describe how a method runs (the execution core's) or choose one (the policy's).

use serde::{Deserialize, Serialize};

/// How APLS's packets are spread over its q lists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Assignment {
    /// Packet i to list i mod q (the paper's, Fig. 6): an agent's packets lie all over its unit
    /// (the paper's agents read all of it).
    #[default]
    RoundRobin,
    /// Contiguous segments, segment j to list j: each agent reads only the packets of the k lists
    /// it is in (k/q of its unit, in at most two ranges).
    Contiguous,
}

/// How the members of one APLS list combine a packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Inner {
    /// ECPipe inside the list: a chain, each member adding its term (Fig. 6).
    #[default]
    Chain,
    /// Traditional inside the list: k − 1 members send to the last, which decodes.
    Star,
}

/// A reconstruction method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "kebab-case")]
pub enum Method {
    /// The unit read whole from one copy (Source(0)): the paper's "normal read".
    Normal,
    /// k sources send their packets to the requestor, which decodes.
    GatewayDecode,
    /// Source 0 is the starter: the k − 1 others send it their packets; it decodes and sends on.
    Traditional,
    /// Partial sums in a binary tree rooted at source 0, which sends on (Mitra et al.).
    Ppr,
    /// A chain Source(0) → … → Source(k − 1) → requestor, packet by packet (ECPipe, EC-A).
    Ecpipe,
    /// APLS over q sources.
    Apls {
        /// Sources used, k ≤ q.
        q: u16,
        /// How a list combines a packet.
        inner: Inner,
        /// How packets are spread over the lists.
        assignment: Assignment,
    },
    /// APLS's lists without node changes: each member sends its packet to the requestor.
    Segmented {
        /// Sources used, k ≤ q.
        q: u16,
        /// How packets are spread over the lists.
        assignment: Assignment,
    },
}

impl Method {
    /// Sources the method reads from, for a code of `k` data units.
    pub fn sources(self, k: u16) -> u16 {
        match self {
            Method::Normal => 1,
            Method::GatewayDecode | Method::Traditional | Method::Ppr | Method::Ecpipe => k,
            Method::Apls { q, .. } | Method::Segmented { q, .. } => q,
        }
    }

    /// A short name for tables (`apls-chain-rr`, `ecpipe`, …).
    pub fn name(self) -> String {
        let assignment = |a: Assignment| match a {
            Assignment::RoundRobin => "rr",
            Assignment::Contiguous => "seg",
        };
        match self {
            Method::Normal => "normal".into(),
            Method::GatewayDecode => "gateway".into(),
            Method::Traditional => "traditional".into(),
            Method::Ppr => "ppr".into(),
            Method::Ecpipe => "ecpipe".into(),
            Method::Apls { q, inner, assignment: a } => {
                let inner = if inner == Inner::Chain { "chain" } else { "star" };
                format!("apls-{inner}-{}-q{q}", assignment(a))
            }
            Method::Segmented { q, assignment: a } => format!("segmented-{}-q{q}", assignment(a)),
        }
    }
}
