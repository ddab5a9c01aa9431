//! Differentiated latency classes (Xiang et al., docs/classes.md): requests run in one of up to
//! [`MAX_CLASSES`] classes, class 1 the best, and every node task a request creates carries its
//! class, so the storage nodes can serve the classes as `[classes] scheduling` says (first come
//! first served, reserved shares, or weighted sharing).
//!
//! Owns: the `[classes]` config and its validation (`config`), the resolution of a request's class
//! from what the caller read (`resolve`, pure), the task-local that carries the class from an S3
//! handler to every node call under it (`scope`), and the per-class counters and metrics (`table`).
//!
//! Must not: read metadata (the S3 layer reads the key's and the bucket's classes and passes them
//! in), answer S3 errors (it returns refusals the S3 layer maps), or queue anything itself: the
//! nodes schedule; the gateway only labels.
//!
//! Users number classes from 1 (class 1 is the first and best); the nodes number them from 0
//! ([`ClassId`]). Conversions happen only through [`ClassNumber`].

mod config;
mod resolve;
mod scope;
mod table;

pub use config::{ClassSpec, ClassesConfig, Scheduling};
pub use resolve::{ClassInputs, ClassRefusal, resolve};
pub use scope::{carried, current, scope};
pub use table::{
    CLASS_BYTES_METRIC, CLASS_REFUSALS_METRIC, CLASS_REQUESTS_METRIC, CLASS_SECONDS_METRIC, ClassStatus, ClassTable,
    ClassesReport,
};

/// Most classes a gateway runs: the nodes' limit, which is also the highest class number the
/// metadata store keeps.
pub const MAX_CLASSES: usize = node::MAX_CLASSES;
const _: () = assert!(MAX_CLASSES == meta::validate::MAX_CLASS as usize, "the store keeps every class");

/// The request header that asks for a worse class than the caller's entitlement: `x-lowtail-class: N`.
pub const CLASS_HEADER: &str = "x-lowtail-class";

pub use node::{ClassId, ClassScheduling};

/// A class as users number it: 1-based, 1 the best. Always at least 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClassNumber(u8);

impl ClassNumber {
    /// Class `number`; `None` for 0, which names no class.
    pub fn new(number: u8) -> Option<ClassNumber> {
        (number > 0).then_some(ClassNumber(number))
    }

    /// The number users see.
    pub fn get(self) -> u8 {
        self.0
    }

    /// The class as the nodes number it.
    pub fn id(self) -> ClassId {
        ClassId(self.0 - 1)
    }

    /// The class the nodes number `id`.
    pub fn of(id: ClassId) -> ClassNumber {
        ClassNumber(id.0.saturating_add(1))
    }
}

impl std::fmt::Display for ClassNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_one_based_and_ids_zero_based() {
        assert_eq!(ClassNumber::new(0), None);
        let two = ClassNumber::new(2).unwrap();
        assert_eq!((two.get(), two.id()), (2, ClassId(1)));
        assert_eq!(ClassNumber::of(ClassId(0)).get(), 1);
        assert_eq!(two.to_string(), "2");
    }
}
