//! The sampler against its marginals (a χ² test that a sampler with wrong marginals fails), its
//! structural promises (k distinct racks, never one with π = 0), input validation, and placement.

use super::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Marginals over n racks summing to k, each in [0, 1], from random weights (`zeros` of them 0):
/// π_j = min(1, c·w_j) with c found by bisection.
fn random_pi(n: usize, k: usize, zeros: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
    let mut weights: Vec<f64> = (0..n).map(|_| rng.random::<f64>().powi(2) + 0.02).collect();
    for weight in weights.iter_mut().take(zeros) {
        *weight = 0.0;
    }
    Marginals::capped_proportional(&weights, k).unwrap().pi().to_vec()
}

/// Counts how often each rack was chosen in `draws` draws of `sampler`.
fn counts(n: usize, draws: usize, mut sampler: impl FnMut(&mut Vec<usize>)) -> Vec<u64> {
    let mut counts = vec![0u64; n];
    let mut chosen = Vec::new();
    for _ in 0..draws {
        sampler(&mut chosen);
        for &index in &chosen {
            counts[index] += 1;
        }
    }
    counts
}

/// Whether the counts agree with π: each rack's count is Binomial(draws, π_j) if the marginals
/// are right, so z_j = (c_j − Nπ_j)/√(Nπ_j(1 − π_j)) is ≈ N(0, 1); the χ² sum over the m racks
/// with 0 < π < 1 has mean m. Passes when the sum is below m + 6·√(2m) + 10 and every |z| < 5
/// (a correct sampler fails either with probability under 1e-5).
fn marginals_agree(pi: &[f64], counts: &[u64], draws: usize) -> Result<(), String> {
    let mut chi_square = 0.0;
    let mut free = 0usize;
    for (j, (&p, &count)) in pi.iter().zip(counts).enumerate() {
        let expected = draws as f64 * p;
        if p == 0.0 || p == 1.0 {
            if count as f64 != expected {
                return Err(format!("rack {j}: π = {p} but chosen {count} times of {draws}"));
            }
            continue;
        }
        free += 1;
        let z = (count as f64 - expected) / (expected * (1.0 - p)).sqrt();
        if z.abs() >= 5.0 {
            return Err(format!("rack {j}: π = {p:.4}, measured {:.4}, z = {z:.1}", count as f64 / draws as f64));
        }
        chi_square += z * z;
    }
    let m = free as f64;
    let limit = m + 6.0 * (2.0 * m).sqrt() + 10.0;
    if chi_square >= limit {
        return Err(format!("χ² = {chi_square:.1} over {free} racks (limit {limit:.1})"));
    }
    Ok(())
}

/// A plausible but wrong k-of-n sampler: k successive draws without replacement, each with
/// probability proportional to π among the racks left. Its marginals are not π in general.
fn successive_sample(pi: &[f64], k: usize, rng: &mut ChaCha8Rng, out: &mut Vec<usize>) {
    out.clear();
    for _ in 0..k {
        let left: f64 = pi.iter().enumerate().filter(|(j, _)| !out.contains(j)).map(|(_, p)| p).sum();
        let mut point = rng.random::<f64>() * left;
        let mut pick = None;
        for (j, &p) in pi.iter().enumerate() {
            if out.contains(&j) || p == 0.0 {
                continue;
            }
            pick = Some(j);
            if point < p {
                break;
            }
            point -= p;
        }
        out.push(pick.unwrap());
    }
}

/// (n, k, zeros) of the test vectors: the paper's (7, 4), wider sets, k = 1, and zero entries.
const SHAPES: [(usize, usize, usize); 5] = [(7, 4, 0), (10, 3, 0), (10, 6, 2), (5, 1, 0), (12, 5, 3)];

#[test]
fn systematic_sampling_meets_random_marginals_and_a_wrong_sampler_fails_the_same_test() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let draws = 200_000;
    for (n, k, zeros) in SHAPES {
        for _ in 0..3 {
            let pi = random_pi(n, k, zeros, &mut rng);
            let marginals = Marginals::new(pi.clone(), k).unwrap();
            let systematic = counts(n, draws, |out| marginals.sample(&mut rng, out));
            marginals_agree(&pi, &systematic, draws).unwrap_or_else(|e| panic!("systematic, π = {pi:?}: {e}"));
            if k > 1 {
                // With k = 1 successive sampling is exact (one draw proportional to π).
                let wrong = counts(n, draws, |out| successive_sample(&pi, k, &mut rng, out));
                assert!(
                    marginals_agree(&pi, &wrong, draws).is_err(),
                    "the test cannot tell a wrong sampler, π = {pi:?}"
                );
            }
        }
    }
}

#[test]
fn a_million_draws_are_within_half_a_percent_of_pi() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let pi = random_pi(7, 4, 0, &mut rng);
    let marginals = Marginals::new(pi.clone(), 4).unwrap();
    let draws = 1_000_000;
    let measured = counts(7, draws, |out| marginals.sample(&mut rng, out));
    for (j, (&p, &count)) in pi.iter().zip(&measured).enumerate() {
        let share = count as f64 / draws as f64;
        assert!((share - p).abs() < 0.005, "rack {j}: {share:.4} against π = {p:.4}");
    }
}

#[test]
fn every_draw_is_k_distinct_racks_with_positive_pi() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for (n, k, zeros) in SHAPES {
        let pi = random_pi(n, k, zeros, &mut rng);
        let marginals = Marginals::new(pi.clone(), k).unwrap();
        let mut out = Vec::new();
        // Random draws, and the edges of U's range.
        let edges = [0.0, f64::EPSILON, 0.5, 1.0 - f64::EPSILON, 1.0 - f64::EPSILON / 2.0];
        for draw in 0..20_000 {
            if draw < edges.len() {
                marginals.sample_at(edges[draw], &mut out);
            } else {
                marginals.sample(&mut rng, &mut out);
            }
            assert_eq!(out.len(), k);
            assert!(out.windows(2).all(|w| w[0] < w[1]), "{out:?} not distinct and ascending");
            assert!(out.iter().all(|&j| pi[j] > 0.0), "{out:?} reads a rack with π = 0: {pi:?}");
        }
    }
}

#[test]
fn certain_racks_are_always_read_and_rounding_never_repeats_one() {
    let mut out = Vec::new();
    // k = n: every rack; exactly k ones: those racks.
    let all = Marginals::new(vec![1.0; 7], 7).unwrap();
    let ones = Marginals::new(vec![0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0], 4).unwrap();
    // Ones after fractions that do not add up exactly in binary (0.1 + 0.2 + 0.7).
    let awkward = Marginals::new(vec![0.1, 0.2, 0.7, 1.0, 1.0, 1.0 - 1e-9, 1e-9], 4).unwrap();
    for step in 0..10_000 {
        let u = f64::from(step) / 10_000.0;
        all.sample_at(u, &mut out);
        assert_eq!(out, (0..7).collect::<Vec<_>>());
        ones.sample_at(u, &mut out);
        assert_eq!(out, vec![1, 3, 4, 6]);
        awkward.sample_at(u, &mut out);
        assert_eq!(out.len(), 4);
        assert!(out.windows(2).all(|w| w[0] < w[1]));
        assert!(out.contains(&3) && out.contains(&4), "π = 1 racks are always read: {out:?} at u = {u}");
    }
}

#[test]
fn bad_marginals_are_refused_with_the_reason() {
    assert_eq!(Marginals::new(vec![0.5, 0.5], 0), Err(MarginalError::ZeroK));
    assert_eq!(Marginals::new(vec![1.0, 1.0], 3), Err(MarginalError::KExceedsN { k: 3, n: 2 }));
    assert!(matches!(Marginals::new(vec![0.5, 0.5, 0.5], 2), Err(MarginalError::SumNotK { k: 2, .. })));
    assert_eq!(Marginals::new(vec![1.5, 0.5, 0.0], 2), Err(MarginalError::OutOfRange { index: 0, value: 1.5 }));
    assert_eq!(Marginals::new(vec![1.0, 1.1, -0.1], 2), Err(MarginalError::OutOfRange { index: 1, value: 1.1 }));
    assert!(matches!(Marginals::new(vec![f64::NAN, 1.0, 1.0], 2), Err(MarginalError::OutOfRange { index: 0, .. })));
    assert!(matches!(Marginals::new(vec![0.1; 300], 30), Err(MarginalError::TooManyRacks { n: 300 })));
    // An optimiser's rounding is accepted, and clamped.
    let rounded = Marginals::new(vec![1.0 + 1e-9, 0.5, 0.5 - 1e-9, -1e-10], 2).unwrap();
    assert_eq!(rounded.pi()[0], 1.0);
    assert_eq!(rounded.pi()[3], 0.0);
    let uniform = Marginals::uniform(7, 4).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let (mut scratch, mut racks) = (Vec::new(), Vec::new());
    assert_eq!(
        uniform.sample_racks(&[3, 1, 4], &mut rng, &mut scratch, &mut racks),
        Err(MarginalError::LengthMismatch { marginals: 7, racks: 3 })
    );
    let set = [9, 2, 7, 5, 0, 3, 8];
    uniform.sample_racks(&set, &mut rng, &mut scratch, &mut racks).unwrap();
    assert_eq!(racks.len(), 4);
    assert!(racks.iter().all(|rack| set.contains(rack)));
    let chosen = sample_k_of_n(&set, &[1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0], 4, &mut rng).unwrap();
    assert_eq!(chosen, vec![9, 7, 3, 8]);
}

#[test]
fn table_placement_checks_its_sets_and_cycles_through_them() {
    let gold = vec![vec![0, 1, 2], vec![3, 4, 5]];
    let bronze = vec![vec![5, 0, 2]];
    let table = ClassPlacement::new(6, 3, vec![gold, bronze]).unwrap();
    assert_eq!(table.rack_set(ClassId(0), 0).unwrap(), &[0, 1, 2]);
    assert_eq!(table.rack_set(ClassId(0), 3).unwrap(), &[3, 4, 5]);
    assert_eq!(table.rack_set(ClassId(1), 17).unwrap(), &[5, 0, 2]);
    assert_eq!(table.rack_set(ClassId(2), 0), Err(PlacementError::NoSet { class: 2 }));
    assert_eq!(
        ClassPlacement::new(6, 3, vec![vec![vec![0, 1, 1]]]),
        Err(PlacementError::BadRack { class: 0, set: 0, rack: 1, racks: 6 })
    );
    assert_eq!(
        ClassPlacement::new(6, 3, vec![vec![vec![0, 1, 6]]]),
        Err(PlacementError::BadRack { class: 0, set: 0, rack: 6, racks: 6 })
    );
    assert_eq!(
        ClassPlacement::new(6, 3, vec![vec![vec![0, 1]]]),
        Err(PlacementError::WrongSize { class: 0, set: 0, len: 2, n: 3 })
    );
    assert_eq!(ClassPlacement::new(6, 3, vec![vec![]]), Err(PlacementError::NoSet { class: 0 }));
    assert_eq!(ClassPlacement::new(2, 3, vec![]), Err(PlacementError::NotEnoughRacks { n: 3, racks: 2 }));
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let rule = RackPlacement::Table(table);
    assert_eq!(rule.rack_set(ClassId(1), 2, &mut rng).unwrap(), vec![5, 0, 2]);
}

#[test]
fn oblivious_placement_spreads_files_uniformly_over_distinct_racks() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let rule = RackPlacement::Oblivious { racks: 10, n: 7 };
    let files = 20_000;
    let mut per_rack = [0u64; 10];
    for file in 0..files {
        let set = rule.rack_set(ClassId((file % 2) as u8), file, &mut rng).unwrap();
        assert_eq!(set.len(), 7);
        let mut sorted = set.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 7, "{set:?} repeats a rack");
        assert!(set.iter().all(|&rack| rack < 10));
        for rack in set {
            per_rack[usize::from(rack)] += 1;
        }
    }
    // Each rack holds a chunk of a file with probability 0.7.
    let pi = vec![0.7; 10];
    marginals_agree(&pi, &per_rack, files).unwrap();
    assert_eq!(random_distinct_racks(6, 7, &mut rng), Err(PlacementError::NotEnoughRacks { n: 7, racks: 6 }));
    assert_eq!(random_distinct_racks(6, 0, &mut rng), Err(PlacementError::NotEnoughRacks { n: 0, racks: 6 }));
}

#[test]
fn class_weights_are_checked() {
    assert_eq!(ClassWeights::default().as_slice(), &[1.0, 0.4]);
    assert_eq!(ClassWeights::equal(3).unwrap().weight(ClassId(2)), Some(1.0));
    assert_eq!(ClassWeights::new(vec![]), Err(WeightsError::Count { classes: 0 }));
    assert_eq!(ClassWeights::new(vec![1.0, -0.1]), Err(WeightsError::Invalid { class: 1, weight: -0.1 }));
    assert!(matches!(ClassWeights::new(vec![f64::INFINITY]), Err(WeightsError::Invalid { class: 0, .. })));
    assert_eq!(ClassWeights::new(vec![0.0, 0.0]), Err(WeightsError::AllZero));
    assert_eq!(ClassWeights::try_from(vec![1.0, 0.0]).unwrap().weight(ClassId(1)), Some(0.0));
    assert_eq!(ClassWeights::default().weight(ClassId(5)), None);
}

#[test]
fn rack_class_shares_follow_the_reserved_bandwidth_with_a_floor() {
    let shares =
        RackClassShares::from_reserved_bps(&[vec![3e9, 1e9], vec![1e9, 0.0], vec![0.0, 0.0], vec![f64::NAN, 1e9]]);
    assert_eq!((shares.racks(), shares.classes()), (4, 2));
    let even = shares.rack(0).unwrap();
    // 0.75 and 0.25 lifted by the floor: 0.01 + 0.98·s.
    assert!((even[0] - 0.745).abs() < 1e-12 && (even[1] - 0.255).abs() < 1e-12, "{even:?}");
    let starved = shares.rack(1).unwrap();
    assert!((starved[1] - RackClassShares::SHARE_MIN).abs() < 1e-12, "a class without bandwidth keeps the floor");
    for rack in 0..2 {
        let sum: f64 = shares.rack(rack).unwrap().iter().sum();
        assert!((sum - 1.0).abs() < 1e-12, "rack {rack} sums to {sum}");
    }
    assert_eq!(shares.rack(2), None, "nothing reserved: keep what the nodes run");
    assert_eq!(shares.rack(3), None, "a NaN is refused");
    assert_eq!(shares.rack(9), None, "a rack outside the table");
    // Many classes: the floor shrinks so that it never takes the whole node.
    let many = RackClassShares::from_reserved_bps(&[vec![0.0; 99].into_iter().chain([1.0]).collect()]);
    let row = many.rack(0).unwrap();
    assert!(row[0] > 0.0 && row[99] > 0.49, "{:?}", &row[98..]);
}
