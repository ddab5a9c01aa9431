//! Writing stripes: an object body cut into stripes (`cut`), a stripe's units encoded, placed and
//! written (`stripe_write`), writes acknowledged early and their late units (`pending`,
//! `late_copies`). Calls `io`, `cluster`; must not know objects' layouts or the S3 layer.

pub mod cut;
pub mod execute;
pub mod late_copies;
pub mod pending;
pub mod stripe_write;
