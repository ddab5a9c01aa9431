//! A gateway's side of a cluster-wide lease ([`meta::MetaStore::claim_lease`]): its name as the
//! holder, and who held the lease at its last claim, for status. The background jobs that only one
//! gateway of a cluster should run at a time (repair, the stripe collector) claim through it. Owns
//! no timing (callers pass the clock and the term) and must not be relied on for safety: a lease
//! elects one runner on the gateways' clocks, it is not a lock.

use std::sync::Mutex;

use meta::{MetaError, MetaStore};

use crate::data::lock;

/// One gateway's claims on one named lease.
#[derive(Debug)]
pub struct LeaseClaims {
    name: &'static str,
    holder: String,
    last_holder: Mutex<Option<String>>,
}

impl LeaseClaims {
    /// Claims of lease `name` by the gateway `holder`.
    pub fn new(name: &'static str, holder: &str) -> Self {
        Self { name, holder: holder.to_string(), last_holder: Mutex::new(None) }
    }

    /// Claims (or renews) the lease at `now_ms` for `term_ms`; whether this gateway holds it.
    pub async fn claim(&self, meta: &dyn MetaStore, now_ms: u64, term_ms: u64) -> Result<bool, MetaError> {
        let lease = meta.claim_lease(self.name, &self.holder, now_ms, term_ms).await?;
        let held = lease.holder == self.holder;
        *lock(&self.last_holder) = Some(lease.holder);
        Ok(held)
    }

    /// This gateway's name as the holder.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Who held the lease at the last claim (`None` before the first).
    pub fn last_holder(&self) -> Option<String> {
        lock(&self.last_holder).clone()
    }
}
