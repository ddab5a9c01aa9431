//! `RangeRead`: one unit range of a sealed stripe to read, with everything reading it needs (the
//! unit I/O, the node states, the stripe and its code, the read's task pool). The request every way
//! of reading a range takes (robust, segmented, node dataflows, the controller's plans); must not
//! read anything itself.

use codec::ErasureCode;
use meta::StripeMeta;

use crate::data::io::stripe_io::{NodeMap, StripeIo};
use crate::data::read::admission::TaskPool;

/// One unit range to read, with what reading it needs.
#[derive(Clone, Copy)]
pub struct RangeRead<'a> {
    /// Unit I/O.
    pub io: &'a StripeIo,
    /// The nodes and their states.
    pub nodes: &'a NodeMap,
    /// The sealed stripe.
    pub stripe: &'a StripeMeta,
    /// Its code.
    pub code: &'a dyn ErasureCode,
    /// The unit read (the decode target).
    pub unit: usize,
    /// Byte offset within the unit.
    pub offset: u64,
    /// Bytes.
    pub length: u64,
    /// The task pool the read's plans are admitted by (`None`: not admitted, as repair's rebuilds).
    pub admission: Option<&'a TaskPool>,
}
