//! Co-access of plain GETs, for EC-Store's mover: the whole-object GETs one access key sends less
//! than `coaccess_gap` apart are taken as one request of several objects (a page's images fetched
//! by parallel GETs), and their stripes are handed to the data path
//! ([`ObjectData::observe_coaccess`]) when the next GET of that key comes after the gap. The batch
//! read and hinted GETs name their batches exactly; this is the guess for clients that send
//! neither. Many users behind one access key interleave their GETs: the gap keeps the guess short.
//!
//! Owns the sessions (bounded: [`MAX_SESSIONS`] keys, [`MAX_SESSION_STRIPES`] stripes a session).
//! Must not read or plan anything, or hold a GET.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use meta::{Layout, StripeId};

/// Access keys followed at once; GETs of further keys are not followed.
pub const MAX_SESSIONS: usize = 10_000;
/// Stripes one session keeps (the mover counts at most 16 blocks of a batch).
pub const MAX_SESSION_STRIPES: usize = 64;

/// One access key's GETs so far.
struct Session {
    stripes: Vec<StripeId>,
    last: Instant,
}

/// The sessions of one gateway.
pub struct Sessions {
    gap: Duration,
    open: Mutex<HashMap<String, Session>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").field("gap", &self.gap).finish_non_exhaustive()
    }
}

impl Sessions {
    /// Sessions closed by a silence of `gap`.
    pub fn new(gap: Duration) -> Sessions {
        Sessions { gap, open: Mutex::new(HashMap::new()) }
    }

    /// Notes a whole-object GET of `layout` by `owner` at `now`; returns the stripes of the
    /// session it closed, when it closed one of at least two stripes.
    pub fn observe(&self, owner: &str, layout: &Layout, now: Instant) -> Option<Vec<StripeId>> {
        let Layout::Striped { segments } = layout else { return None };
        let mut open = crate::data::lock(&self.open);
        // Every whole-object GET passes here: the key is copied only for a new session.
        if !open.contains_key(owner) {
            if open.len() >= MAX_SESSIONS {
                return None;
            }
            open.insert(owner.to_string(), Session { stripes: Vec::new(), last: now });
        }
        let session = open.get_mut(owner).expect("present");
        let closed = if now.saturating_duration_since(session.last) > self.gap {
            Some(std::mem::take(&mut session.stripes))
        } else {
            None
        };
        session.last = now;
        for segment in segments {
            if session.stripes.len() < MAX_SESSION_STRIPES && !session.stripes.contains(&segment.stripe) {
                session.stripes.push(segment.stripe);
            }
        }
        closed.filter(|stripes| stripes.len() >= 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meta::StripeSegment;

    fn striped(stripe: u64) -> Layout {
        let segment =
            StripeSegment { stripe: StripeId(stripe), unit_bytes: 1, object_offset_bytes: 0, length_bytes: 2 };
        Layout::Striped { segments: vec![segment] }
    }

    #[test]
    fn gets_of_one_key_within_the_gap_are_one_session_closed_by_the_next_after_it() {
        let sessions = Sessions::new(Duration::from_millis(20));
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        assert_eq!(sessions.observe("alice", &striped(1), at(0)), None);
        assert_eq!(sessions.observe("alice", &striped(2), at(10)), None);
        assert_eq!(sessions.observe("bob", &striped(9), at(12)), None, "another key, another session");
        assert_eq!(sessions.observe("alice", &striped(3), at(25)), None, "within the gap of the last GET");
        let closed = sessions.observe("alice", &striped(4), at(100));
        assert_eq!(closed, Some(vec![StripeId(1), StripeId(2), StripeId(3)]));
        assert_eq!(sessions.observe("alice", &striped(5), at(200)), None, "a session of one stripe is not reported");
        let packed =
            Layout::Packed { stripe: StripeId(7), unit: 0, offset_bytes: 0, length_bytes: 1, replica_unit: None };
        assert_eq!(sessions.observe("alice", &packed, at(300)), None, "packed objects are not followed");
    }
}
