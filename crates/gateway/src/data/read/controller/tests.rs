//! The controller's catalog bound and its records of unplanned reads.

use super::*;
use model::ObjectId;
use model::Outcome;

/// A sealed stripe of `code` on nodes 0 to 8.
fn stripe(id: u64, code: &str) -> meta::StripeMeta {
    let placement = (0..9).map(StoreNodeId).collect();
    meta::StripeMeta { version: 1, ..meta::StripeMeta::sealed(meta::StripeId(id), code, 4096, placement) }
}

#[test]
fn the_catalog_holds_at_most_its_bound_and_a_fresh_start_keeps_the_nodes_rates() {
    let mut catalog = Catalog::new("rs-6-3", 2).unwrap();
    assert_eq!(catalog.stripe(&stripe(10, "rs-6-3")).unwrap(), Some(PolicyStripeId(0)));
    assert_eq!(catalog.stripe(&stripe(11, "rs-6-3")).unwrap(), Some(PolicyStripeId(1)));
    assert_eq!(catalog.stripe(&stripe(10, "rs-6-3")).unwrap(), Some(PolicyStripeId(0)), "known: no growth");
    assert_eq!(catalog.stripe(&stripe(12, "rs-6-3")).unwrap(), None, "full: the caller starts afresh");
    let node = catalog.node(StoreNodeId(4));
    catalog.rates[node.index()] = 3e6;
    catalog.forget_stripes().unwrap();
    assert_eq!(catalog.stripe_count(), 0);
    assert_eq!(catalog.node(StoreNodeId(4)), node, "nodes keep their dense ids");
    assert_eq!(catalog.rate(node), 3e6, "and their measured rates");
    assert_eq!(catalog.stripe(&stripe(12, "rs-6-3")).unwrap(), Some(PolicyStripeId(0)));
}

#[test]
fn a_controller_reading_more_stripes_than_its_bound_starts_afresh_and_stays_bounded() {
    let config = ControllerConfig { max_records: 100, max_catalog_stripes: 3, ..Default::default() };
    let controller = Controller::new(&config, "rs-6-3").unwrap();
    let generation = controller.lock().generation;
    for id in 0..10 {
        let read_stripe = stripe(id, "rs-6-3");
        let read = Unplanned {
            stripe: &read_stripe,
            unit: 0,
            length: 100,
            arrival_ns: 5,
            rebuilt: Rebuilt::No,
            served: true,
            latency_class: 0,
            layers: layer_decisions(None, "", None, Rebuilt::No, 0),
        };
        controller.record_unplanned(&read);
        assert!(controller.lock().catalog.stripe_count() <= 3, "stripe {id}: the catalog passed its bound");
    }
    assert_eq!(controller.lock().generation, generation + 3, "fresh starts at the 4th, 7th and 10th stripe");
    assert_eq!(controller.take_records().0.len(), 10, "every read recorded across the fresh starts");
    assert!(ControllerConfig { max_catalog_stripes: 0, ..Default::default() }.validate().is_err());
    assert!(
        ControllerConfig { max_catalog_stripes: MAX_CATALOG_STRIPES + 1, ..Default::default() }.validate().is_err()
    );
}

#[test]
fn an_unplanned_read_is_recorded_only_for_a_stripe_of_the_controllers_code() {
    let config = ControllerConfig { max_records: 100, ..Default::default() };
    let controller = Controller::new(&config, "rs-6-3").unwrap();
    // RS(7,2) has as many units as RS(6,3) but other recovery sets: not the controller's.
    let (own, other) = (stripe(1, "rs-6-3"), stripe(2, "rs-7-2"));
    assert!(controller.is_own_code(&own) && !controller.is_own_code(&other));
    for read_stripe in [&own, &other] {
        let read = Unplanned {
            stripe: read_stripe,
            unit: 2,
            length: 100,
            arrival_ns: 5,
            rebuilt: Rebuilt::Gateway,
            served: true,
            latency_class: 1,
            layers: layer_decisions(None, "", None, Rebuilt::Gateway, 0),
        };
        controller.record_unplanned(&read);
    }
    let (records, dropped) = controller.take_records();
    assert_eq!((records.len(), dropped), (1, 0), "only the read of the own code's stripe is recorded");
    let record = &records[0];
    assert_eq!(record.request.object, ObjectId(1));
    assert_eq!(record.request.partition, PartitionId(2), "stripe 0 of the catalog, unit 2");
    assert!(record.tasks.is_empty() && record.request.degraded && record.request.probes == 0);
    assert_eq!(record.request.outcome, Outcome::Ok);
    assert_eq!(record.request.latency_class, 1, "the record keeps the read's latency class");
}
