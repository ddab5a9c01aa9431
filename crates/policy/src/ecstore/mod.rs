//! EC-Store's policies (Abebe et al.): the statistics its access planning and chunk mover read
//! ([`coaccess`]). The read policy and the mover's service build on these (issue 31).
//!
//! Must not: do I/O or read a clock (the callers hand in what they observed and a seeded random
//! source).

pub mod coaccess;
