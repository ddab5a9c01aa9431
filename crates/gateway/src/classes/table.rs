//! `ClassTable`: one gateway's classes at run time: the `[classes]` config, the entitlements its
//! credential entries give, and per-class counters of the requests served (also published as
//! metrics labelled `class`, the 1-based number). Owns the counters and their report; must not
//! resolve a request's class (`resolve`) or read metadata.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ClassId, ClassNumber, ClassRefusal, ClassScheduling, ClassesConfig, Scheduling};

/// Requests served per class (counter, label `class`).
pub const CLASS_REQUESTS_METRIC: &str = "lowtail_gateway_class_requests_total";
/// Object bytes moved per class: a GET's answer, a PUT's or part's body (counter, label `class`).
pub const CLASS_BYTES_METRIC: &str = "lowtail_gateway_class_bytes_total";
/// Request latency per class, seconds to the answer's head (histogram, label `class`).
pub const CLASS_SECONDS_METRIC: &str = "lowtail_gateway_class_request_seconds";
/// Requests refused over their `x-lowtail-class` header (counter, label `reason`: `denied`, `invalid`).
pub const CLASS_REFUSALS_METRIC: &str = "lowtail_gateway_class_refusals_total";

/// The counters of one class.
#[derive(Debug, Default)]
struct ClassCounters {
    requests: AtomicU64,
    bytes: AtomicU64,
    latency_us_total: AtomicU64,
}

/// One class as `GET /admin/classes` and `GET /admin/status` report it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassStatus {
    /// Its number, 1-based.
    pub class: u8,
    /// Its name.
    pub name: String,
    /// Its weight.
    pub weight: f64,
    /// Its share, if configured.
    pub share: Option<f64>,
    /// Requests served in it since the gateway started.
    pub requests: u64,
    /// Object bytes they moved.
    pub bytes: u64,
    /// Their mean latency to the answer's head, milliseconds (0 before any).
    pub mean_latency_ms: f64,
}

/// The classes and their counters, as reported.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassesReport {
    /// What the nodes are told to do with the classes.
    pub scheduling: Scheduling,
    /// The class of a key with no entitlement.
    pub default_class: u8,
    /// Every class, best first.
    pub classes: Vec<ClassStatus>,
    /// Requests refused for naming a better class than their key's (403).
    pub refused_denied: u64,
    /// Requests refused for naming no class the gateway runs (400).
    pub refused_invalid: u64,
}

/// See the module documentation.
#[derive(Debug)]
pub struct ClassTable {
    config: ClassesConfig,
    /// Access key → class (1-based) from the gateway's credential entries.
    configured: HashMap<String, u8>,
    counters: Vec<ClassCounters>,
    refused_denied: AtomicU64,
    refused_invalid: AtomicU64,
}

impl Default for ClassTable {
    fn default() -> Self {
        ClassTable::new(ClassesConfig::default(), std::iter::empty())
    }
}

impl PartialEq for ClassTable {
    /// Two tables are equal when configured alike, whatever they have counted.
    fn eq(&self, other: &Self) -> bool {
        self.config == other.config && self.configured == other.configured
    }
}

// Weights and shares are finite once validated, so equality is an equivalence.
impl Eq for ClassTable {}

impl ClassTable {
    /// A table of `config` (validated by the caller) with the `(access key, class)` entitlements
    /// of the gateway's credential entries.
    pub fn new(config: ClassesConfig, configured: impl IntoIterator<Item = (String, u8)>) -> Self {
        let counters = (0..config.classes.len()).map(|_| ClassCounters::default()).collect();
        ClassTable {
            configured: configured.into_iter().collect(),
            config,
            counters,
            refused_denied: AtomicU64::new(0),
            refused_invalid: AtomicU64::new(0),
        }
    }

    /// The `[classes]` config.
    pub fn config(&self) -> &ClassesConfig {
        &self.config
    }

    /// The class `access_key`'s credential entry gives it, if any.
    pub fn configured(&self, access_key: &str) -> Option<u8> {
        self.configured.get(access_key).copied()
    }

    /// Every credential entry's class, sorted by access key.
    pub fn configured_keys(&self) -> Vec<(String, u8)> {
        let mut keys: Vec<(String, u8)> = self.configured.iter().map(|(key, class)| (key.clone(), *class)).collect();
        keys.sort();
        keys
    }

    /// The class background work (repair, the mover, scrubbing, collection) runs in: the worst.
    pub fn background(&self) -> ClassId {
        ClassNumber::new(self.config.count()).expect("at least one class").id()
    }

    /// What the storage nodes are told to do with the classes.
    pub fn node_scheduling(&self) -> ClassScheduling {
        self.config.node_scheduling()
    }

    /// Counts a request served in `class` that moved `bytes` of objects and answered after `elapsed`.
    pub fn record(&self, class: ClassNumber, bytes: u64, elapsed: Duration) {
        let label = class.to_string();
        metrics::counter!(CLASS_REQUESTS_METRIC, "class" => label.clone()).increment(1);
        metrics::counter!(CLASS_BYTES_METRIC, "class" => label.clone()).increment(bytes);
        metrics::histogram!(CLASS_SECONDS_METRIC, "class" => label).record(elapsed.as_secs_f64());
        let Some(counters) = self.counters.get(usize::from(class.id().0)) else { return };
        counters.requests.fetch_add(1, Ordering::Relaxed);
        counters.bytes.fetch_add(bytes, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        counters.latency_us_total.fetch_add(micros, Ordering::Relaxed);
    }

    /// Counts a request refused over its header.
    pub fn refused(&self, refusal: &ClassRefusal) {
        let (reason, count) = match refusal {
            ClassRefusal::AboveEntitlement { .. } => ("denied", &self.refused_denied),
            ClassRefusal::Unknown { .. } | ClassRefusal::Unparsable { .. } => ("invalid", &self.refused_invalid),
        };
        count.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(CLASS_REFUSALS_METRIC, "reason" => reason).increment(1);
    }

    /// The classes and their counters now.
    pub fn report(&self) -> ClassesReport {
        let classes = self.config.classes.iter().zip(&self.counters).enumerate();
        ClassesReport {
            scheduling: self.config.scheduling,
            default_class: self.config.default_class,
            classes: classes.map(|(index, (spec, counters))| status(index, spec, counters)).collect(),
            refused_denied: self.refused_denied.load(Ordering::Relaxed),
            refused_invalid: self.refused_invalid.load(Ordering::Relaxed),
        }
    }
}

/// Class `index` (0-based) as reported.
fn status(index: usize, spec: &super::ClassSpec, counters: &ClassCounters) -> ClassStatus {
    let requests = counters.requests.load(Ordering::Relaxed);
    let latency_us_total = counters.latency_us_total.load(Ordering::Relaxed);
    ClassStatus {
        class: u8::try_from(index + 1).unwrap_or(u8::MAX),
        name: spec.name.clone(),
        weight: spec.weight,
        share: spec.share,
        requests,
        bytes: counters.bytes.load(Ordering::Relaxed),
        mean_latency_ms: if requests == 0 { 0.0 } else { latency_us_total as f64 / requests as f64 / 1000.0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classes::ClassSpec;

    fn two() -> ClassesConfig {
        let class = |name: &str| ClassSpec { name: name.into(), weight: 1.0, share: None };
        ClassesConfig { classes: vec![class("gold"), class("silver")], ..ClassesConfig::default() }
    }

    #[test]
    fn requests_are_counted_in_their_class() {
        let table = ClassTable::new(two(), [("AK2".to_string(), 2)]);
        let silver = ClassNumber::new(2).unwrap();
        table.record(silver, 100, Duration::from_millis(4));
        table.record(silver, 50, Duration::from_millis(2));
        let report = table.report();
        assert_eq!(report.classes[0].requests, 0);
        let counted = &report.classes[1];
        assert_eq!((counted.class, counted.name.as_str(), counted.requests, counted.bytes), (2, "silver", 2, 150));
        assert!((counted.mean_latency_ms - 3.0).abs() < 1e-9, "{}", counted.mean_latency_ms);
        assert_eq!(table.configured("AK2"), Some(2));
        assert_eq!(table.configured("AK1"), None);
        assert_eq!(table.background(), ClassId(1), "background work runs in the worst class");
    }

    #[test]
    fn refusals_are_counted_by_reason() {
        let table = ClassTable::new(two(), []);
        table.refused(&ClassRefusal::AboveEntitlement { asked: 1, entitled: 2 });
        table.refused(&ClassRefusal::Unknown { asked: 9, count: 2 });
        table.refused(&ClassRefusal::Unparsable { value: "x".into(), count: 2 });
        let report = table.report();
        assert_eq!((report.refused_denied, report.refused_invalid), (1, 2));
    }

    #[test]
    fn tables_compare_by_configuration() {
        let (a, b) = (ClassTable::new(two(), []), ClassTable::new(two(), []));
        a.record(ClassNumber::new(1).unwrap(), 1, Duration::ZERO);
        assert_eq!(a, b);
        assert_ne!(a, ClassTable::default());
    }
}
