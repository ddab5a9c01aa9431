//! Integration and property tests of the RS and LRC codes through the public
//! API: every erasure pattern up to each code's limit, repair coefficients
//! against real bytes, recovery sets, error cases, and golden parity hashes
//! that pin the bytes every engine produces.
//!
//! Must not: reach into private modules (only what a user of the crate sees),
//! or run long: case counts stay small so `cargo test` is quick in debug.

use codec::engine::{self, EngineKind};
use codec::{CodeSpec, CodecError, Engine, ErasureCode, Lrc, Rs};
use proptest::prelude::*;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

/// The codes the issue names.
const CODE_NAMES: [&str; 5] = ["rs-6-3", "rs-10-4", "rs-12-4", "lrc-6-2-2", "lrc-12-2-2"];

fn build(name: &str) -> Box<dyn ErasureCode> {
    name.parse::<CodeSpec>().unwrap().build().unwrap()
}

fn build_with_engine(spec: CodeSpec, engine: &'static dyn Engine) -> Box<dyn ErasureCode> {
    match spec {
        CodeSpec::Rs { k, m } => Box::new(Rs::with_engine(k, m, engine).unwrap()),
        CodeSpec::Lrc { k, l, r } => Box::new(Lrc::with_engine(k, l, r, engine).unwrap()),
    }
}

fn random_data(k: usize, len: usize, rng: &mut ChaCha8Rng) -> Vec<Vec<u8>> {
    (0..k)
        .map(|_| {
            let mut unit = vec![0u8; len];
            rng.fill_bytes(&mut unit);
            unit
        })
        .collect()
}

fn refs(units: &[Vec<u8>]) -> Vec<&[u8]> {
    units.iter().map(|u| u.as_slice()).collect()
}

fn muts(units: &mut [Vec<u8>]) -> Vec<&mut [u8]> {
    units.iter_mut().map(|u| u.as_mut_slice()).collect()
}

/// All n units of a stripe: the data followed by its parity.
fn encode_stripe(code: &dyn ErasureCode, data: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let len = data[0].len();
    let mut parity = vec![vec![0u8; len]; code.parity_units()];
    code.encode(&refs(&data), &mut muts(&mut parity)).unwrap();
    data.into_iter().chain(parity).collect()
}

fn random_stripe(code: &dyn ErasureCode, len: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    encode_stripe(code, random_data(code.data_units(), len, &mut rng))
}

/// Recognisable bytes for a lost buffer, so "untouched" and "overwritten" can both be checked.
fn garbage(unit: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31) ^ (unit as u8) ^ 0xa5).collect()
}

fn presence(n: usize, lost_mask: u32) -> Vec<bool> {
    (0..n).map(|u| lost_mask & (1 << u) == 0).collect()
}

/// The stripe with every lost unit replaced by garbage.
fn damaged(stripe: &[Vec<u8>], present: &[bool]) -> Vec<Vec<u8>> {
    stripe.iter().enumerate().map(|(u, unit)| if present[u] { unit.clone() } else { garbage(u, unit.len()) }).collect()
}

/// Every pattern of at most n − k losses: decodable ones rebuild exactly the
/// original bytes (reconstruct) or the original data with lost parity left
/// alone (reconstruct_data); the others are `Undecodable` and write nothing.
fn check_every_pattern(code: &dyn ErasureCode, stripe: &[Vec<u8>]) -> std::result::Result<usize, TestCaseError> {
    let (n, k) = (code.total_units(), code.data_units());
    let is_rs = matches!(code.spec(), CodeSpec::Rs { .. });
    let mut decodable = 0;
    for lost_mask in 0u32..1 << n {
        if lost_mask.count_ones() as usize > n - k {
            continue;
        }
        let present = presence(n, lost_mask);
        let before = damaged(stripe, &present);
        let expect_ok = code.is_decodable(&present);
        prop_assert!(expect_ok || !is_rs, "RS must decode every pattern of at most m losses: {present:?}");
        decodable += usize::from(expect_ok);

        let mut units = before.clone();
        let result = code.reconstruct(&mut muts(&mut units), &present);
        if expect_ok {
            prop_assert_eq!(result, Ok(()));
            prop_assert!(units == stripe, "reconstruct gave wrong bytes for {:?}", present);
        } else {
            prop_assert!(matches!(result, Err(CodecError::Undecodable { .. })), "{:?}: {:?}", present, result);
            prop_assert!(units == before, "a failed reconstruct wrote bytes");
        }

        let mut units = before.clone();
        let result = code.reconstruct_data(&mut muts(&mut units), &present);
        if expect_ok {
            prop_assert_eq!(result, Ok(()));
            for u in 0..n {
                let expected = if u < k { &stripe[u] } else { &before[u] };
                prop_assert!(&units[u] == expected, "reconstruct_data unit {} for {:?}", u, present);
            }
        } else {
            prop_assert!(matches!(result, Err(CodecError::Undecodable { .. })), "{:?}: {:?}", present, result);
            prop_assert!(units == before, "a failed reconstruct_data wrote bytes");
        }
    }
    Ok(decodable)
}

/// Expected decodable patterns of at most n − k losses: every one for RS,
/// the maximally recoverable count for the LRCs (see `lrc_codes_are_maximally_recoverable`).
fn expected_decodable(name: &str) -> usize {
    match name {
        "rs-6-3" => 1 + 9 + 36 + 84,
        "rs-10-4" | "rs-12-4" => (0..=4).map(|i| binomial(if name == "rs-10-4" { 14 } else { 16 }, i)).sum(),
        "lrc-6-2-2" => 356,
        "lrc-12-2-2" => 2265,
        _ => unreachable!(),
    }
}

fn binomial(n: usize, r: usize) -> usize {
    (0..r).fold(1, |acc, i| acc * (n - i) / (i + 1))
}

macro_rules! every_pattern_test {
    ($test:ident, $name:literal) => {
        proptest! {
            #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]
            #[test]
            fn $test(seed in any::<u64>(), len in 0usize..300) {
                let code = build($name);
                let stripe = random_stripe(code.as_ref(), len, seed);
                let decodable = check_every_pattern(code.as_ref(), &stripe)?;
                prop_assert_eq!(decodable, expected_decodable($name));
            }
        }
    };
}

every_pattern_test!(every_pattern_rs_6_3, "rs-6-3");
every_pattern_test!(every_pattern_rs_10_4, "rs-10-4");
every_pattern_test!(every_pattern_rs_12_4, "rs-12-4");
every_pattern_test!(every_pattern_lrc_6_2_2, "lrc-6-2-2");
every_pattern_test!(every_pattern_lrc_12_2_2, "lrc-12-2-2");

/// Σ_g max(0, f_g − 1) + lost globals ≤ r, the decodability condition of a
/// maximally recoverable LRC (f_g: losses among group g's data and local parity).
fn mr_condition(k: usize, l: usize, r: usize, lost: &[usize]) -> bool {
    let group_size = k / l;
    let mut group_losses = vec![0usize; l];
    let mut global_losses = 0;
    for &u in lost {
        match u {
            u if u < k => group_losses[u / group_size] += 1,
            u if u < k + l => group_losses[u - k] += 1,
            _ => global_losses += 1,
        }
    }
    group_losses.iter().map(|&f| f.saturating_sub(1)).sum::<usize>() + global_losses <= r
}

#[test]
fn lrc_codes_are_maximally_recoverable() {
    // (k, l, r, decodable patterns by number of losses 0..=l+r).
    let cases = [(6, 2, 2, [1, 10, 45, 120, 180]), (12, 2, 2, [1, 16, 120, 560, 1568])];
    for (k, l, r, expected) in cases {
        let code = Lrc::new(k, l, r).unwrap();
        assert!(code.is_maximally_recoverable());
        let n = k + l + r;
        let mut decodable_by_losses = [0usize; 5];
        // Every pattern, including those beyond l + r losses (never decodable).
        for lost_mask in 0u32..1 << n {
            let present = presence(n, lost_mask);
            let lost: Vec<usize> = (0..n).filter(|&u| !present[u]).collect();
            let decodable = code.is_decodable(&present);
            assert_eq!(decodable, mr_condition(k, l, r, &lost), "LRC({k},{l},{r}) losing {lost:?}");
            if decodable {
                decodable_by_losses[lost.len()] += 1;
            }
        }
        assert_eq!(decodable_by_losses, expected, "LRC({k},{l},{r})");
        // Azure's guarantee: any r + 1 = 3 failures.
        assert_eq!(decodable_by_losses[3], binomial(n, 3));
    }
}

#[test]
fn decode_matches_on_every_engine() {
    for engine in engine::available() {
        for name in CODE_NAMES {
            let code = build_with_engine(name.parse().unwrap(), engine);
            let stripe = random_stripe(code.as_ref(), 1000 + 37, 5);
            assert_eq!(stripe, random_stripe(build(name).as_ref(), 1000 + 37, 5), "{name} encode on {}", engine.kind());
            let (n, k) = (code.total_units(), code.data_units());
            // One data unit; n − k units, mostly data (decodable for every code here); data and last parity.
            let most = match code.spec() {
                CodeSpec::Rs { .. } => (0..n - k).collect(),
                CodeSpec::Lrc { l, .. } => vec![0, 1, k / l, n - 1],
            };
            let patterns = [vec![1], most, vec![0, n - 1]];
            for lost in patterns {
                let present: Vec<bool> = (0..n).map(|u| !lost.contains(&u)).collect();
                let mut units = damaged(&stripe, &present);
                code.reconstruct(&mut muts(&mut units), &present).unwrap();
                assert_eq!(units, stripe, "{name} losing {lost:?} on {}", engine.kind());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Random source sets: coefficients, when returned, rebuild the target's
    /// bytes; sets that certainly determine the target always get some.
    #[test]
    fn repair_coefficients_rebuild_real_bytes(
        code_index in 0usize..CODE_NAMES.len(),
        seed in any::<u64>(),
        len in 1usize..200,
    ) {
        let code = build(CODE_NAMES[code_index]);
        let lrc = match code.spec() {
            CodeSpec::Lrc { k, l, r } => Some(Lrc::new(k, l, r).unwrap()),
            CodeSpec::Rs { .. } => None,
        };
        let stripe = random_stripe(code.as_ref(), len, seed);
        let (n, k) = (code.total_units(), code.data_units());
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
        for _ in 0..20 {
            let target = rng.random_range(0..n);
            let mut others: Vec<usize> = (0..n).filter(|&u| u != target).collect();
            // A random subset of random size, in random order.
            for i in (1..others.len()).rev() {
                others.swap(i, rng.random_range(0..=i));
            }
            let size = rng.random_range(1..=others.len());
            let sources = &others[..size];
            let determined = determines(k, lrc.as_ref(), target, sources);
            match code.repair_coefficients(target, sources) {
                Ok(coefficients) => {
                    prop_assert_eq!(coefficients.len(), sources.len());
                    prop_assert_eq!(combine(&coefficients, sources, &stripe), stripe[target].clone());
                }
                Err(error) => {
                    prop_assert!(!determined, "{:?} refused for target {} from {:?}", error, target, sources);
                    prop_assert_eq!(error, CodecError::Undecodable { lost: vec![target] });
                    if matches!(code.spec(), CodeSpec::Rs { .. }) {
                        prop_assert!(sources.len() < k, "RS: any k sources determine every unit");
                    }
                }
            }
        }
    }
}

/// Sufficient conditions, known without the code's internals, for `sources`
/// to determine `target`: k of them for RS (`lrc` is `None`); for an LRC all
/// k data units, or the rest of the target's local group.
fn determines(k: usize, lrc: Option<&Lrc>, target: usize, sources: &[usize]) -> bool {
    match lrc {
        None => sources.len() >= k,
        Some(lrc) => {
            let all_data = (0..k).all(|u| sources.contains(&u));
            let local = lrc.local_group(target).is_some_and(|g| g.iter().all(|&u| u == target || sources.contains(&u)));
            all_data || local
        }
    }
}

/// Σ_j c_j · unit_{sources[j]}, byte by byte through the field.
fn combine(coefficients: &[u8], sources: &[usize], stripe: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![0u8; stripe[0].len()];
    for (&c, &source) in coefficients.iter().zip(sources) {
        for (o, &b) in out.iter_mut().zip(&stripe[source]) {
            *o ^= codec::gf::mul(c, b);
        }
    }
    out
}

#[test]
fn repair_coefficients_of_local_groups_are_xor() {
    let lrc = Lrc::new(12, 2, 2).unwrap();
    assert_eq!(lrc.repair_coefficients(3, &[0, 1, 2, 4, 5, 12]), Ok(vec![1; 6]));
    assert_eq!(lrc.repair_coefficients(13, &[6, 7, 8, 9, 10, 11]), Ok(vec![1; 6]));
    // A global parity is no combination of one local group.
    assert_eq!(lrc.repair_coefficients(14, &[0, 1, 2, 3, 4, 5]), Err(CodecError::Undecodable { lost: vec![14] }));
    let rs = Rs::new(6, 3).unwrap();
    // Parity 0 is the XOR of the data.
    assert_eq!(rs.repair_coefficients(6, &[0, 1, 2, 3, 4, 5]), Ok(vec![1; 6]));
}

#[test]
fn repair_coefficients_refuse_bad_indices() {
    for name in CODE_NAMES {
        let code = build(name);
        let n = code.total_units();
        assert_eq!(code.repair_coefficients(n, &[0]), Err(CodecError::UnitOutOfRange { unit: n, total: n }));
        assert_eq!(code.repair_coefficients(0, &[1, n + 3]), Err(CodecError::UnitOutOfRange { unit: n + 3, total: n }));
        assert_eq!(code.repair_coefficients(0, &[1, 2, 1]), Err(CodecError::DuplicateUnit { unit: 1 }));
        assert_eq!(code.repair_coefficients(0, &[1, 0, 2]), Err(CodecError::DuplicateUnit { unit: 0 }));
        assert_eq!(code.repair_coefficients(0, &[]), Err(CodecError::Undecodable { lost: vec![0] }));
    }
}

/// Whether `set` rebuilds `unit` and no set with one member fewer does
/// (enough for minimality: a determining set stays determining when grown).
fn is_minimal(code: &dyn ErasureCode, unit: usize, set: &[usize]) -> bool {
    code.repair_coefficients(unit, set).is_ok()
        && (0..set.len()).all(|drop| {
            let smaller: Vec<usize> = set.iter().enumerate().filter(|&(i, _)| i != drop).map(|(_, &u)| u).collect();
            code.repair_coefficients(unit, &smaller).is_err()
        })
}

#[test]
fn recovery_sets_are_minimal_distinct_and_ordered() {
    for name in CODE_NAMES {
        let code = build(name);
        let (n, k) = (code.total_units(), code.data_units());
        for unit in 0..n {
            let sets = code.recovery_sets(unit, 12).unwrap();
            assert_eq!(sets.len(), 12, "{name} unit {unit}");
            for (i, set) in sets.iter().enumerate() {
                assert!(!set.contains(&unit) && set.windows(2).all(|w| w[0] < w[1]), "{name}: {set:?}");
                assert!(is_minimal(code.as_ref(), unit, set), "{name}: {set:?} is not minimal for {unit}");
                assert!(!sets[..i].contains(set), "{name}: {set:?} listed twice");
            }
            let parity_counts: Vec<usize> = sets.iter().map(|s| s.iter().filter(|&&u| u >= k).count()).collect();
            match code.spec() {
                CodeSpec::Rs { .. } => {
                    assert!(sets.iter().all(|s| s.len() == k));
                    assert!(parity_counts.windows(2).all(|w| w[0] <= w[1]), "{name}: data-heavy first");
                }
                CodeSpec::Lrc { k, l, r } => {
                    let lrc = Lrc::new(k, l, r).unwrap();
                    match lrc.local_group(unit) {
                        Some(group) => {
                            let local: Vec<usize> = group.into_iter().filter(|&u| u != unit).collect();
                            assert_eq!(sets[0], local, "{name}: local group first for {unit}");
                            assert!(sets[1..].iter().all(|s| s.len() == k));
                        }
                        None => assert_eq!(sets[0], (0..k).collect::<Vec<_>>(), "{name}: data first for {unit}"),
                    }
                    assert!(parity_counts[1..].windows(2).all(|w| w[0] <= w[1]), "{name}: data-heavy first");
                }
            }
        }
        assert_eq!(code.recovery_sets(0, 0), Ok(vec![]));
        assert_eq!(code.recovery_sets(n, 3), Err(CodecError::UnitOutOfRange { unit: n, total: n }));
    }
}

#[test]
fn recovery_sets_of_lrc_6_2_2_are_all_the_minimal_sets() {
    let code = Lrc::new(6, 2, 2).unwrap();
    let n = 10;
    for unit in 0..n {
        let listed = code.recovery_sets(unit, usize::MAX).unwrap();
        // Brute force over every subset of the other units.
        let mut minimal = Vec::new();
        for mask in 0u32..1 << n {
            if mask & (1 << unit) != 0 {
                continue;
            }
            let set: Vec<usize> = (0..n).filter(|&u| mask & (1 << u) != 0).collect();
            if is_minimal(&code, unit, &set) {
                minimal.push(set);
            }
        }
        let mut sorted = listed.clone();
        sorted.sort();
        minimal.sort();
        assert_eq!(sorted, minimal, "unit {unit}");
    }
}

#[test]
fn rs_recovery_sets_are_lazy_for_wide_codes() {
    // C(254, 200) sets exist; asking for three must not enumerate them.
    let rs = Rs::new(200, 55).unwrap();
    let sets = rs.recovery_sets(7, 3).unwrap();
    let first: Vec<usize> = (0..200).filter(|&u| u != 7).chain([200]).collect();
    assert_eq!(sets[0], first);
    assert_eq!(sets.len(), 3);
    let sets = rs.recovery_sets(230, 2).unwrap();
    assert_eq!(sets[0], (0..200).collect::<Vec<_>>());
    // An unbounded request is capped rather than enumerating forever.
    let rs = Rs::new(30, 6).unwrap();
    assert_eq!(rs.recovery_sets(0, usize::MAX).unwrap().len(), 1 << 16, "C(35, 30) sets exist");
}

#[test]
fn wrong_counts_and_lengths_are_errors_and_write_nothing() {
    for name in CODE_NAMES {
        let code = build(name);
        let (n, k) = (code.total_units(), code.data_units());
        let stripe = random_stripe(code.as_ref(), 64, 9);
        let data = &stripe[..k];

        let mut parity = vec![vec![7u8; 64]; n - k];
        let untouched = parity.clone();
        let err = code.encode(&refs(&data[..k - 1]), &mut muts(&mut parity)).unwrap_err();
        assert_eq!(err, CodecError::UnitCount { what: "data units", expected: k, got: k - 1 });
        let err = code.encode(&refs(data), &mut muts(&mut parity[..n - k - 1])).unwrap_err();
        assert_eq!(err, CodecError::UnitCount { what: "parity units", expected: n - k, got: n - k - 1 });
        let mut short = data.to_vec();
        short[2].pop();
        let err = code.encode(&refs(&short), &mut muts(&mut parity)).unwrap_err();
        assert_eq!(err, CodecError::UnitLength { index: 2, expected: 64, got: 63 });
        parity[1].push(0);
        let err = code.encode(&refs(data), &mut muts(&mut parity)).unwrap_err();
        assert_eq!(err, CodecError::UnitLength { index: k + 1, expected: 64, got: 65 });
        parity[1].pop();
        assert_eq!(parity, untouched, "{name}: a failed encode wrote parity");

        let mut present = vec![true; n];
        present[0] = false;
        let mut units = damaged(&stripe, &present);
        let before = units.clone();
        let err = code.reconstruct(&mut muts(&mut units[..n - 1]), &present).unwrap_err();
        assert_eq!(err, CodecError::UnitCount { what: "units", expected: n, got: n - 1 });
        let err = code.reconstruct_data(&mut muts(&mut units), &present[..n - 1]).unwrap_err();
        assert_eq!(err, CodecError::UnitCount { what: "presence flags", expected: n, got: n - 1 });
        units[n - 1].push(1);
        let err = code.reconstruct(&mut muts(&mut units), &present).unwrap_err();
        assert_eq!(err, CodecError::UnitLength { index: n - 1, expected: 64, got: 65 });
        units[n - 1].pop();
        let too_many: Vec<bool> = (0..n).map(|u| u > n - k).collect();
        let err = code.reconstruct(&mut muts(&mut units), &too_many).unwrap_err();
        assert_eq!(err, CodecError::TooManyLosses { lost: n - k + 1, max: n - k });
        assert!(!code.is_decodable(&too_many));
        assert!(!code.is_decodable(&present[..n - 1]));
        assert_eq!(units, before, "{name}: a failed reconstruct wrote bytes");
    }
}

#[test]
fn undecodable_lrc_patterns_name_the_lost_units() {
    let lrc = Lrc::new(6, 2, 2).unwrap();
    // Three data units and the local parity of group 0: the two globals cannot rebuild four unknowns.
    let present: Vec<bool> = (0..10).map(|u| ![0, 1, 2, 6].contains(&u)).collect();
    assert!(!lrc.is_decodable(&present));
    let stripe = random_stripe(&lrc, 32, 3);
    let mut units = damaged(&stripe, &present);
    let err = lrc.reconstruct(&mut muts(&mut units), &present).unwrap_err();
    assert_eq!(err, CodecError::Undecodable { lost: vec![0, 1, 2, 6] });
}

#[test]
fn zero_length_units_are_valid() {
    for name in CODE_NAMES {
        let code = build(name);
        let (n, k) = (code.total_units(), code.data_units());
        let data = vec![Vec::new(); k];
        let mut parity = vec![Vec::new(); n - k];
        code.encode(&refs(&data), &mut muts(&mut parity)).unwrap();
        let mut units = vec![Vec::new(); n];
        let present: Vec<bool> = (0..n).map(|u| u != 1 && u != n - 1).collect();
        code.reconstruct(&mut muts(&mut units), &present).unwrap();
        code.reconstruct_data(&mut muts(&mut units), &present).unwrap();
    }
}

#[test]
fn codes_are_shared_between_threads() {
    let code = build("rs-10-4");
    let stripe = random_stripe(code.as_ref(), 4096, 1);
    std::thread::scope(|scope| {
        for thread in 0..4u32 {
            let (code, stripe) = (&code, &stripe);
            scope.spawn(move || {
                for round in 0..20u32 {
                    let present = presence(14, (1 << (thread + round % 5)) | (1 << 12));
                    let mut units = damaged(stripe, &present);
                    code.reconstruct(&mut muts(&mut units), &present).unwrap();
                    assert_eq!(&units, stripe);
                }
            });
        }
    });
}

/// sha256 of the concatenated parity of a stripe of 4096 + 13-byte units
/// filled from ChaCha8Rng::seed_from_u64(seed), computed once with the
/// reference engine. A change here means stored parity would no longer match.
const GOLDEN: [(&str, u64, &str); 5] = [
    ("rs-6-3", 1, "e3f3570415f304f75a8a4eecabdc2646b6f9c429e2874f41afcf7e6672ed45cb"),
    ("rs-10-4", 2, "b4507a08146be7c192492b04996684877c6c284cdaa6eaf0e18e5bdb508b3ff1"),
    ("rs-12-4", 3, "60a6f2476359b2b306fc44355a306aeccc2fe168b5cc5352472f1df307d43849"),
    ("lrc-6-2-2", 4, "ddca8a34333893a66abb48ed4ce3b8818e64a8cd8c7f91aeb37cb5a16d1a6c8e"),
    ("lrc-12-2-2", 5, "88a92bba02d4d9c41e86dfb03556e29dac5a4b7210483ed9b77b5e9a61be1d31"),
];

fn parity_hash(code: &dyn ErasureCode, seed: u64) -> String {
    let stripe = random_stripe(code, 4096 + 13, seed);
    let mut hasher = Sha256::new();
    for parity in &stripe[code.data_units()..] {
        hasher.update(parity);
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn golden_parity_hashes_on_every_engine() {
    let reference = engine::by_kind(EngineKind::Reference).unwrap();
    let mut engines = engine::available();
    engines.push(engine::best());
    assert!(engines.iter().any(|e| e.kind() == EngineKind::Reference));
    for (name, seed, expected) in GOLDEN {
        let spec: CodeSpec = name.parse().unwrap();
        let reference_hash = parity_hash(build_with_engine(spec, reference).as_ref(), seed);
        assert_eq!(reference_hash, expected, "{name}: reference parity changed");
        for &engine in &engines {
            let hash = parity_hash(build_with_engine(spec, engine).as_ref(), seed);
            assert_eq!(hash, expected, "{name} on {}", engine.kind());
        }
    }
}

/// The definition of `failures_tolerated`, by brute force: the largest f such that every loss of f
/// more units (any subset of the present ones) still decodes.
fn tolerated_by_definition(code: &dyn ErasureCode, present: &[bool]) -> Option<usize> {
    if !code.is_decodable(present) {
        return None;
    }
    let alive: Vec<usize> = (0..present.len()).filter(|&u| present[u]).collect();
    let decodes_after = |f: usize| {
        (0u32..1 << alive.len()).filter(|mask| mask.count_ones() as usize == f).all(|mask| {
            let mut left = present.to_vec();
            (0..alive.len()).filter(|i| mask & (1 << i) != 0).for_each(|i| left[alive[i]] = false);
            code.is_decodable(&left)
        })
    };
    Some((0..=alive.len()).take_while(|&f| decodes_after(f)).last().unwrap_or(0))
}

#[test]
fn failures_tolerated_matches_its_definition_on_every_pattern() {
    for name in ["rs-6-3", "lrc-6-2-2", "rs-4-2"] {
        let code = build(name);
        let n = code.total_units();
        for lost_mask in 0u32..1 << n {
            let present = presence(n, lost_mask);
            assert_eq!(
                code.failures_tolerated(&present),
                tolerated_by_definition(code.as_ref(), &present),
                "{name} with units {lost_mask:b} lost"
            );
        }
        assert_eq!(code.failures_tolerated(&vec![true; n - 1]), None, "{name}: one flag per unit");
    }
    let lrc = build("lrc-6-2-2");
    assert_eq!(lrc.failures_tolerated(&[true; 10]), Some(3), "LRC(6,2,2) decodes any 3 losses");
    let rs = build("rs-6-3");
    let mut present = [true; 9];
    present[8] = false;
    assert_eq!(rs.failures_tolerated(&present), Some(2));
}
