//! The mover's proposals over a fake view: co-location of co-accessed blocks, nothing without
//! statistics, nothing to or from a node that is down, racks kept as placement promised, and its
//! settings' checks.

use super::*;
use crate::ecstore::test_view::TestView;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Blocks 0 and 1 on disjoint nodes 0–3 and 4–7 of 10; uniform costs and loads.
fn view() -> TestView {
    TestView::new(10, &[[0, 1, 2, 3], [4, 5, 6, 7]], 1e8, 2_000_000)
}

fn sites() -> Vec<SiteCost> {
    vec![SiteCost { overhead: 2_500_000.0, per_byte: 10.0 }; 10]
}

fn mover_with_pairs(batches: usize) -> Mover {
    let mut mover = Mover::new(MoverSettings::default()).unwrap();
    for i in 0..batches {
        mover.observe_batch(i as u64 * 1_000_000, &[StripeId(0), StripeId(1)]);
    }
    // Every node serves 100 MB/s; the pair's reads are a small part of it.
    mover.observe_loads(&[1e8; 10]);
    mover
}

#[test]
fn co_accessed_blocks_are_brought_together() {
    let view = view();
    let mover = mover_with_pairs(100);
    let proposal = mover
        .propose(&view, &sites(), &|_| 50_000, 100_000_000, RackRule::Free, &mut ChaCha8Rng::seed_from_u64(1))
        .expect("a positive move");
    assert!(proposal.access_gain > 0.0 && proposal.gain > 0.0, "{proposal:?}");
    let other = if proposal.stripe == StripeId(0) { StripeId(1) } else { StripeId(0) };
    assert!(view.placement.stripe_nodes(other).contains(&proposal.to), "the unit joins its partner: {proposal:?}");
    assert_eq!(view.placement.node_of(proposal.stripe, proposal.unit), proposal.from);
}

#[test]
fn nothing_is_proposed_without_statistics_or_loads() {
    let view = view();
    let empty = Mover::new(MoverSettings::default()).unwrap();
    assert_eq!(empty.propose(&view, &sites(), &|_| 50_000, 0, RackRule::Free, &mut ChaCha8Rng::seed_from_u64(1)), None);
    let mut no_loads = Mover::new(MoverSettings::default()).unwrap();
    no_loads.observe_batch(0, &[StripeId(0), StripeId(1)]);
    assert_eq!(
        no_loads.propose(&view, &sites(), &|_| 50_000, 0, RackRule::Free, &mut ChaCha8Rng::seed_from_u64(1)),
        None
    );
}

#[test]
fn no_unit_moves_to_a_node_that_is_down_and_a_block_with_a_unit_down_stays() {
    let mut view = view();
    let mover = mover_with_pairs(100);
    view.down[4] = true;
    for seed in 0..20 {
        if let Some(p) = mover.propose(
            &view,
            &sites(),
            &|_| 50_000,
            100_000_000,
            RackRule::Free,
            &mut ChaCha8Rng::seed_from_u64(seed),
        ) {
            assert_eq!(p.stripe, StripeId(0), "block 1 has a unit down: repair's, not the mover's");
            assert_ne!(p.to, NodeId(4));
        }
    }
}

#[test]
fn sampling_counts_one_batch_in_n_and_bad_settings_are_refused() {
    let mut mover = Mover::new(MoverSettings { sample_every: 3, ..MoverSettings::default() }).unwrap();
    for i in 0..9 {
        mover.observe_batch(i, &[StripeId(0), StripeId(1)]);
    }
    assert_eq!(mover.gauges()[0], ("window_batches", 3.0));
    for bad in [
        MoverSettings { max_moves_per_s: 0.0, ..MoverSettings::default() },
        MoverSettings { window: 0, ..MoverSettings::default() },
        MoverSettings { max_blocks_per_batch: 1, ..MoverSettings::default() },
        MoverSettings { access_weight: -1.0, ..MoverSettings::default() },
    ] {
        assert!(Mover::new(bad).is_err());
    }
    assert_eq!(MoverSettings::default().period_ns(), 1_000_000_000);
}

/// Units of `stripe` per rack, at most, were `unit` of it on `to` instead.
fn most_per_rack_after(view: &TestView, stripe: StripeId, from: NodeId, to: NodeId) -> usize {
    let nodes: Vec<NodeId> =
        view.placement.stripe_nodes(stripe).iter().map(|&n| if n == from { to } else { n }).collect();
    nodes
        .iter()
        .map(|&n| nodes.iter().filter(|&&m| view.racks[m.index()] == view.racks[n.index()]).count())
        .max()
        .unwrap()
}

#[test]
fn moves_keep_racks_as_placement_promised() {
    // Five racks of two nodes (node i in rack i % 5): each block's four units in four racks, and
    // block 1's nodes share racks with block 0's, so co-location tempts a move into a used rack.
    let mut view = view();
    view.racks = (0..10).map(|i| i % 5).collect();
    let mover = mover_with_pairs(100);
    let propose = |rule, seed| {
        mover.propose(&view, &sites(), &|_| 50_000, 100_000_000, rule, &mut ChaCha8Rng::seed_from_u64(seed))
    };
    let mut broken_when_free = 0;
    for seed in 0..30 {
        if let Some(p) = propose(RackRule::Free, seed) {
            broken_when_free += usize::from(most_per_rack_after(&view, p.stripe, p.from, p.to) > 1);
        }
        if let Some(p) = propose(RackRule::Spread, seed) {
            assert_eq!(most_per_rack_after(&view, p.stripe, p.from, p.to), 1, "one unit per rack stays so: {p:?}");
        }
        let p = propose(RackRule::Stay, seed).expect("a move inside its rack still gains");
        assert_eq!(view.racks[p.to.index()], view.racks[p.from.index()], "the unit stays in its rack: {p:?}");
    }
    assert!(broken_when_free > 0, "without a rule the mover does put two units in a rack (the test can fail)");
}
