//! Unit descriptors: what the gateway writes beside each unit's bytes on its node, so that the
//! metadata can be rebuilt from the nodes alone (`lowtail admin meta rebuild`): the stripe's code
//! and unit size, and what the unit holds, a segment of a labelled write (an object, a part, a
//! metadata snapshot) or the objects packed into a stripe, each with the label its writer gave.
//!
//! A *label* is the S3 layer's description of a write (bucket, key, part, content type, …) as
//! JSON; this layer carries it opaquely: the S3 layer sets it around a write with [`labelled`],
//! and the stripe writes below read it with [`current`]. A write without a label (an internal one)
//! is described all the same, its label `null`. Owns the descriptor's format; must not interpret
//! labels (the S3 layer and the rebuild do) or do I/O.

use std::future::Future;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// The format written.
pub const FORMAT: u32 = 1;

/// A write's label, as its writer gave it (JSON; `null` for an unlabelled write).
pub type Label = serde_json::Value;

tokio::task_local! {
    /// The label of the write the current task performs.
    static CURRENT: Label;
}

/// Runs `future`, a write, with `label` on every unit it writes.
pub async fn labelled<F: Future>(label: Label, future: F) -> F::Output {
    CURRENT.scope(label, future).await
}

/// The label of the write the current task performs (`null` outside any).
pub fn current() -> Label {
    CURRENT.try_with(Label::clone).unwrap_or(Label::Null)
}

/// The writes of this process in flight, by token, with when each started (unix ms): a metadata
/// snapshot notes the oldest, so that a rebuild knows every write that started before it had ended
/// (committed, so in the snapshot, or not) when the snapshot began.
static IN_FLIGHT: std::sync::Mutex<std::collections::BTreeMap<u64, u64>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());
static NEXT_TOKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A write in flight, from its start to its commit (or failure); ends when dropped.
#[derive(Debug)]
pub struct InFlight(u64);

/// Notes a write starting at `started_ms` until the returned guard drops (the S3 layer holds it
/// across the write and its commit).
pub fn write_in_flight(started_ms: u64) -> InFlight {
    let token = NEXT_TOKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    crate::data::lock(&IN_FLIGHT).insert(token, started_ms);
    InFlight(token)
}

impl Drop for InFlight {
    fn drop(&mut self) {
        crate::data::lock(&IN_FLIGHT).remove(&self.0);
    }
}

/// When the oldest write of this process in flight started, if any is.
pub fn oldest_in_flight_ms() -> Option<u64> {
    crate::data::lock(&IN_FLIGHT).values().copied().min()
}

/// What the gateway says a unit is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitDescriptor {
    /// Format ([`FORMAT`]).
    pub format: u32,
    /// The stripe's code (`rs-6-3`, …).
    pub code: String,
    /// The size of every unit of the stripe.
    pub unit_bytes: u64,
    /// When the unit's stripe was written (unix ms, the writer's clock).
    pub written_ms: u64,
    /// What the unit holds.
    pub holds: Holds,
}

/// What a unit holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Holds {
    /// Bytes `object_offset_bytes .. + length_bytes` of a labelled write, cut into the stripe's k
    /// data units (the layout of a `meta::StripeSegment`).
    Segment {
        /// The write's label.
        label: Label,
        /// Offset in the written object of the stripe's first byte.
        object_offset_bytes: u64,
        /// Bytes of the object in the stripe.
        length_bytes: u64,
    },
    /// Objects packed into the stripe: on a data unit those in it, on a parity unit all of them.
    Packed {
        /// The objects.
        objects: Vec<PackedObject>,
    },
    /// A replica of one object appended to an open packed stripe.
    Replica {
        /// The object.
        object: PackedObject,
    },
}

/// An object packed into a data unit of a stripe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackedObject {
    /// Its write's label.
    pub label: Label,
    /// The data unit holding it.
    pub unit: u16,
    /// Its first byte's offset in that unit.
    pub offset_bytes: u64,
    /// Its length.
    pub length_bytes: u64,
}

impl UnitDescriptor {
    /// The descriptor's bytes, as the node stores them.
    pub fn encode(&self) -> Bytes {
        Bytes::from(serde_json::to_vec(self).expect("a descriptor serializes"))
    }

    /// A descriptor from a node's bytes; `None` for none (empty) or ones this version cannot read.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.is_empty() {
            return None;
        }
        serde_json::from_slice::<Self>(bytes).ok().filter(|descriptor| descriptor.format == FORMAT)
    }

    /// The descriptor of unit `unit` of a packed stripe whose data units hold `objects`: a data
    /// unit (below `k`) lists its own objects, a parity unit all of them (so every object is
    /// described on m + 1 nodes, as its bytes survive m failures).
    pub fn of_packed_unit(&self, unit: usize, k: usize) -> Self {
        let Holds::Packed { objects } = &self.holds else { return self.clone() };
        if unit >= k {
            return self.clone();
        }
        let own = objects.iter().filter(|object| usize::from(object.unit) == unit).cloned().collect();
        Self { holds: Holds::Packed { objects: own }, ..self.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(unit: u16, key: &str) -> PackedObject {
        PackedObject { label: serde_json::json!({ "key": key }), unit, offset_bytes: 0, length_bytes: 10 }
    }

    #[test]
    fn the_oldest_write_in_flight_is_known_until_it_ends() {
        let first = write_in_flight(100);
        let second = write_in_flight(50);
        assert!(oldest_in_flight_ms().is_some_and(|oldest| oldest <= 50));
        drop(second);
        assert!(oldest_in_flight_ms().is_some_and(|oldest| oldest <= 100));
        drop(first);
    }

    #[tokio::test]
    async fn a_label_is_seen_inside_its_write_only() {
        assert_eq!(current(), Label::Null);
        let inside = labelled(serde_json::json!({ "key": "k" }), async { current() }).await;
        assert_eq!(inside["key"], "k");
        assert_eq!(current(), Label::Null);
    }

    #[test]
    fn descriptors_round_trip_and_a_data_unit_lists_its_own_objects() {
        let stripe = UnitDescriptor {
            format: FORMAT,
            code: "rs-2-1".into(),
            unit_bytes: 4096,
            written_ms: 7,
            holds: Holds::Packed { objects: vec![packed(0, "a"), packed(1, "b"), packed(0, "c")] },
        };
        assert_eq!(UnitDescriptor::decode(&stripe.encode()), Some(stripe.clone()));
        let Holds::Packed { objects } = stripe.of_packed_unit(0, 2).holds else { panic!("packed") };
        assert_eq!(objects.iter().map(|o| o.label["key"].as_str().unwrap()).collect::<Vec<_>>(), ["a", "c"]);
        assert_eq!(stripe.of_packed_unit(2, 2), stripe, "a parity unit lists them all");
        assert_eq!(UnitDescriptor::decode(b""), None);
        assert_eq!(UnitDescriptor::decode(b"{\"format\":9}"), None);
    }
}
