//! The topology simulator against queueing theory and its own promises: one reserved queue is an
//! M/G/1 (Pollaczek–Khinchine mean and Takács variance of the sojourn, corrected Lemma 2, within a
//! few per cent at ρ = 0.5), weighted sharing splits a saturated link by weight and gives an idle
//! class's share away, reads follow their marginals over k distinct racks of the file, and a seed
//! replays a run exactly.

use super::*;

/// Reference bandwidth B of the small setups: 1 GB/s.
const BIG_B: f64 = 1e9;

/// Two racks, `classes` classes; reads from rack 0 of files on rack 1 (one inter-rack queue per
/// class, q(0, 1, d), at `inter[d]`·B); no intra-rack bandwidth, no connection delay.
fn two_racks(
    classes: u8,
    inter: &[f64],
    service: Distribution,
    discipline: LinkDiscipline,
    requests: u32,
) -> TopologySetup {
    let d = usize::from(classes);
    let mut inter_weights = vec![0.0; 4 * d];
    for (class, &w) in inter.iter().enumerate() {
        inter_weights[queue_index(2, classes, 0, 1, class as u8)] = w;
    }
    TopologySetup {
        racks: 2,
        classes,
        aggregate_bytes_per_s: BIG_B,
        tor_bytes_per_s: 2.0 * BIG_B,
        inter_weights,
        intra_weights: vec![0.0; 2 * d],
        intra_connection: Distribution::Constant { value_s: 0.0 },
        inter_connection: Distribution::Constant { value_s: 0.0 },
        service,
        discipline,
        requests,
        seed: 42,
    }
}

/// A one-chunk file (k = n = 1) of `class` on rack 1, read from rack 0 at `rate_per_s`.
fn file_on_rack_one(class: u8, rate_per_s: f64) -> FileSpec {
    FileSpec {
        class,
        racks: vec![1],
        rates_per_s: vec![rate_per_s, 0.0],
        marginals: vec![Marginals::new(vec![1.0], 1).unwrap()],
    }
}

/// Corrected Lemma 2 (M/G/1 sojourn of X·B/B^eff at arrival rate Λ): (mean, variance).
fn sojourn_moments(x: Distribution, lambda: f64, effective: f64) -> (f64, f64) {
    let [mu, g2, g3] = x.moments();
    let slack = effective - lambda * mu * BIG_B;
    assert!(slack > 0.0, "stable");
    let mean = mu * BIG_B / effective + lambda * g2 * BIG_B.powi(2) / (2.0 * effective * slack);
    let variance = x.variance() * BIG_B.powi(2) / effective.powi(2)
        + lambda * g3 * BIG_B.powi(3) / (3.0 * effective.powi(2) * slack)
        + lambda.powi(2) * g2.powi(2) * BIG_B.powi(4) / (4.0 * effective.powi(2) * slack.powi(2));
    (mean, variance)
}

fn mean_and_variance(samples: &[f64]) -> (f64, f64) {
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    (mean, samples.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1.0))
}

#[test]
fn a_reserved_queue_is_mg1_mean_and_variance_of_the_sojourn() {
    // B^eff = B/2; X has mean 1 ms at B (2 ms at B^eff); Λ = 250/s: ρ = 0.5.
    let (weight, lambda) = (0.5, 250.0);
    let cases = [
        ("exponential", Distribution::Exponential { mean_s: 1e-3 }),
        ("deterministic", Distribution::Constant { value_s: 1e-3 }),
        ("transfer + exponential", Distribution::transfer_plus_exponential(4e5, BIG_B, 6e-4)),
    ];
    for (name, service) in cases {
        let setup = two_racks(1, &[weight], service, LinkDiscipline::Reserved, 1_000_000);
        let output = run(&setup, &[file_on_rack_one(0, lambda)]).unwrap();
        // Drop a warm-up from the empty start.
        let sojourns: Vec<f64> =
            output.records[5_000..].iter().map(|r| r.chunks[0].sojourn_ns() as f64 / 1e9).collect();
        let (mean, variance) = mean_and_variance(&sojourns);
        let (expected_mean, expected_variance) = sojourn_moments(service, lambda, weight * BIG_B);
        let services: Vec<f64> = output.records.iter().map(|r| r.chunks[0].service_ns() as f64 / 1e9).collect();
        let (service_mean, _) = mean_and_variance(&services);
        assert!(
            (service_mean / (service.mean() / weight) - 1.0).abs() < 0.01,
            "{name}: service {service_mean} s is X·B/B^eff"
        );
        assert!((mean / expected_mean - 1.0).abs() < 0.02, "{name}: mean sojourn {mean} s, M/G/1 {expected_mean} s");
        // The paper's printed (9) is the waiting time alone: below the sojourn by the transfer.
        let printed = expected_mean - service.mean() / weight;
        assert!(mean > printed + 0.9 * service.mean() / weight, "{name}: (9) as printed would be {printed} s");
        assert!(
            (variance / expected_variance - 1.0).abs() < 0.05,
            "{name}: sojourn variance {variance} s², Takács {expected_variance} s²"
        );
    }
}

#[test]
fn a_lone_queue_shares_with_nobody_so_both_disciplines_agree() {
    let service = Distribution::Exponential { mean_s: 1e-3 };
    let mut reserved = two_racks(1, &[0.5], service, LinkDiscipline::Reserved, 20_000);
    reserved.inter_connection = Distribution::ShiftedExponential { shift_s: 1e-4, exp_mean_s: 1e-4 };
    let sharing = TopologySetup { discipline: LinkDiscipline::WeightedSharing, ..reserved.clone() };
    let files = [file_on_rack_one(0, 250.0)];
    let (a, b) = (run(&reserved, &files).unwrap(), run(&sharing, &files).unwrap());
    for (x, y) in a.records.iter().zip(&b.records) {
        assert_eq!((x.arrival_ns, x.chunks[0].enqueue_ns), (y.arrival_ns, y.chunks[0].enqueue_ns));
        assert!(x.chunks[0].start_ns.abs_diff(y.chunks[0].start_ns) <= 2, "{x:?} against {y:?}");
        assert!(x.finish_ns.abs_diff(y.finish_ns) <= 2, "{x:?} against {y:?}");
    }
}

/// Chunks of each class finished by `until_ns`.
fn finished_by(output: &TopologyOutput, classes: usize, until_ns: u64) -> Vec<u64> {
    let mut done = vec![0u64; classes];
    for record in &output.records {
        done[usize::from(record.class)] += record.chunks.iter().filter(|c| c.finish_ns <= until_ns).count() as u64;
    }
    done
}

#[test]
fn weighted_sharing_splits_a_saturated_link_by_weight_and_lends_an_idle_share() {
    // One uplink of 0.7·B shared by two classes at weights 0.5 : 0.2 (= 1 : 0.4); chunks take 1 ms
    // at B, so the link serves 700 chunks/s. Each class offers 2 100/s: both stay backlogged.
    let service = Distribution::Constant { value_s: 1e-3 };
    let setup = two_racks(2, &[0.5, 0.2], service, LinkDiscipline::WeightedSharing, 40_000);
    let both = [file_on_rack_one(0, 2_100.0), file_on_rack_one(1, 2_100.0)];
    let output = run(&setup, &both).unwrap();
    let until_ns = output.records.last().unwrap().arrival_ns;
    let done = finished_by(&output, 2, until_ns);
    let seconds = until_ns as f64 / 1e9;
    let ratio = done[1] as f64 / done[0] as f64;
    assert!((ratio / 0.4 - 1.0).abs() < 0.01, "throughputs {done:?}: ratio {ratio}, weights 0.4");
    let total_per_s = (done[0] + done[1]) as f64 / seconds;
    assert!((total_per_s / 700.0 - 1.0).abs() < 0.01, "the link is busy throughout: {total_per_s}/s");
    // Class 1 alone: work-conserving, it gets the whole 700/s, where a reservation holds it at 500/s.
    let alone = [file_on_rack_one(0, 2_100.0), file_on_rack_one(1, 0.0)];
    for (discipline, expected_per_s) in [(LinkDiscipline::WeightedSharing, 700.0), (LinkDiscipline::Reserved, 500.0)] {
        let output = run(&TopologySetup { discipline, requests: 20_000, ..setup.clone() }, &alone).unwrap();
        let until_ns = output.records.last().unwrap().arrival_ns;
        let per_s = finished_by(&output, 2, until_ns)[0] as f64 / (until_ns as f64 / 1e9);
        assert!((per_s / expected_per_s - 1.0).abs() < 0.01, "{discipline:?}: {per_s}/s, expected {expected_per_s}/s");
    }
}

/// Marginals over n racks summing to k, each in [0, 1], from random weights.
fn random_pi(n: usize, k: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
    let weights: Vec<f64> = (0..n).map(|_| rng.random::<f64>().powi(2) + 0.05).collect();
    Marginals::capped_proportional(&weights, k).unwrap().pi().to_vec()
}

/// Ten racks, two classes, equal weights (B = 10 GB/s, b = 3 GB/s); `files` (7, 4) files on random
/// racks with random π per client rack, read from every rack, 20 reads/s in all: 25 MB chunks load
/// an inter-rack queue (B/180) about 25 %.
fn paper_like(files: usize, requests: u32, discipline: LinkDiscipline, seed: u64) -> (TopologySetup, Vec<FileSpec>) {
    let rate_per_s = 20.0 / (files * 10) as f64;
    let (inter_weights, intra_weights) = equal_weights(10, 2);
    let setup = TopologySetup {
        racks: 10,
        classes: 2,
        aggregate_bytes_per_s: 10e9,
        tor_bytes_per_s: 3e9,
        inter_weights,
        intra_weights,
        intra_connection: Distribution::Constant { value_s: 1e-3 },
        inter_connection: Distribution::ShiftedExponential { shift_s: 2e-3, exp_mean_s: 1e-3 },
        service: Distribution::transfer_plus_exponential(25e6, 10e9, 1e-3),
        discipline,
        requests,
        seed,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xf11e5);
    let files = (0..files)
        .map(|file| {
            let racks = policy::classes::random_distinct_racks(10, 7, &mut rng).unwrap();
            let marginals = (0..10).map(|_| Marginals::new(random_pi(7, 4, &mut rng), 4).unwrap()).collect();
            FileSpec { class: (file % 2) as u8, racks, rates_per_s: vec![rate_per_s; 10], marginals }
        })
        .collect();
    (setup, files)
}

#[test]
fn a_seed_replays_a_run_and_both_disciplines_see_the_same_reads() {
    for discipline in [LinkDiscipline::Reserved, LinkDiscipline::WeightedSharing] {
        let (setup, files) = paper_like(200, 5_000, discipline, 7);
        let first = run(&setup, &files).unwrap();
        assert_eq!(first, run(&setup, &files).unwrap(), "{discipline:?}: same seed, same records");
        let other = run(&TopologySetup { seed: 8, ..setup.clone() }, &files).unwrap();
        assert_ne!(first.records, other.records, "{discipline:?}: another seed, other records");
    }
    let (reserved, files) = paper_like(200, 5_000, LinkDiscipline::Reserved, 7);
    let sharing = TopologySetup { discipline: LinkDiscipline::WeightedSharing, ..reserved.clone() };
    let (a, b) = (run(&reserved, &files).unwrap(), run(&sharing, &files).unwrap());
    let reads = |o: &TopologyOutput| {
        o.records
            .iter()
            .map(|r| (r.arrival_ns, r.file, r.client_rack, r.chunks.iter().map(|c| (c.rack, c.enqueue_ns)).collect()))
            .collect::<Vec<(u64, u32, u16, Vec<(u16, u64)>)>>()
    };
    assert_eq!(reads(&a), reads(&b), "common random numbers: the same reads, racks and connection delays");
    assert_ne!(a.records, b.records, "the disciplines differ in service");
}

#[test]
fn reads_follow_their_marginals_over_k_distinct_racks_of_the_file() {
    let (setup, files) = paper_like(3, 60_000, LinkDiscipline::WeightedSharing, 3);
    let output = run(&setup, &files).unwrap();
    // Per (file, client rack): reads, and reads of each rack-set position.
    let mut reads = vec![0u64; 3 * 10];
    let mut hits = vec![0u64; 3 * 10 * 7];
    for record in &output.records {
        let file = &files[record.file as usize];
        assert_eq!(record.class, file.class);
        assert_eq!(record.chunks.len(), 4, "k chunks");
        assert!(record.chunks.windows(2).all(|w| w[0].unit < w[1].unit), "distinct racks, in rack-set order");
        for chunk in &record.chunks {
            assert_eq!(chunk.rack, file.racks[usize::from(chunk.unit)], "the chunk's rack is the file's");
            let queue = queue_index(10, 2, record.client_rack, chunk.rack, record.class);
            assert_eq!(chunk.queue as usize, queue);
            let connection_s = record.connection_ns(chunk) as f64 / 1e9;
            if chunk.rack == record.client_rack {
                assert!((connection_s - 1e-3).abs() < 2e-9, "intra-rack connection {connection_s}");
            } else {
                assert!(connection_s >= 2e-3 - 2e-9, "inter-rack connection {connection_s}");
            }
            assert!(chunk.enqueue_ns <= chunk.start_ns && chunk.start_ns < chunk.finish_ns);
            let pair = record.file as usize * 10 + usize::from(record.client_rack);
            hits[pair * 7 + usize::from(chunk.unit)] += 1;
        }
        assert_eq!(record.finish_ns, record.chunks.iter().map(|c| c.finish_ns).max().unwrap());
        reads[record.file as usize * 10 + usize::from(record.client_rack)] += 1;
    }
    // Equal rates: each (file, client) pair has 1/30 of the reads; each position its π.
    let total = output.records.len() as f64;
    let mut chi_square = 0.0;
    let mut terms = 0usize;
    for (pair, &count) in reads.iter().enumerate() {
        let p = 1.0 / 30.0;
        let z = (count as f64 - total * p) / (total * p * (1.0 - p)).sqrt();
        assert!(z.abs() < 5.0, "pair {pair}: {count} reads, z = {z:.1}");
        let pi = files[pair / 10].marginals[pair % 10].pi();
        for (position, &p) in pi.iter().enumerate() {
            let expected = count as f64 * p;
            let observed = hits[pair * 7 + position] as f64;
            if p == 1.0 {
                assert_eq!(observed, expected);
                continue;
            }
            let z = (observed - expected) / (expected * (1.0 - p)).sqrt();
            assert!(z.abs() < 5.0, "pair {pair}, position {position}: {observed} of {count} reads, π = {p:.3}");
            chi_square += z * z;
            terms += 1;
        }
    }
    let m = terms as f64;
    assert!(chi_square < m + 6.0 * (2.0 * m).sqrt() + 10.0, "χ² = {chi_square:.1} over {terms} terms");
}

#[test]
fn paper_scale_runs_are_quick() {
    // 2 000 files on 10 racks, 2 000 reads: checked for time by the test's own duration.
    for discipline in [LinkDiscipline::Reserved, LinkDiscipline::WeightedSharing] {
        let (setup, files) = paper_like(2_000, 2_000, discipline, 1);
        let output = run(&setup, &files).unwrap();
        assert_eq!(output.records.len(), 2_000);
        assert!(output.events <= 2_000 * (1 + 4 * 4) + 16);
    }
}

#[test]
fn effective_bandwidths_follow_equations_two_to_four() {
    let (inter, intra) = equal_weights(10, 2);
    assert!((inter.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    let mut setup = paper_like(1, 1, LinkDiscipline::Reserved, 1).0;
    setup.inter_weights = inter;
    setup.intra_weights = intra;
    let bandwidths = setup.effective_bandwidths().unwrap();
    // Inter: B/180; intra: b − (18 + 18)/180·B = 3e9 − 2e9, half per class.
    assert!((bandwidths[queue_index(10, 2, 3, 5, 1)] - 10e9 / 180.0).abs() < 1e-3);
    assert!((setup.intra_rack_bytes_per_s(4) - 1e9).abs() < 1e-3);
    assert!((bandwidths[queue_index(10, 2, 4, 4, 0)] - 0.5e9).abs() < 1e-3);
    // Reservations through a ToR beyond b.
    let overbooked = TopologySetup { tor_bytes_per_s: 1e9, ..setup.clone() };
    assert!(matches!(overbooked.effective_bandwidths(), Err(TopologyError::TorOverbooked { rack: 0, .. })));
    let mut weights = setup.clone();
    weights.inter_weights[queue_index(10, 2, 2, 2, 0)] = 0.01;
    assert!(matches!(weights.effective_bandwidths(), Err(TopologyError::Weights(_))));
    weights.inter_weights = vec![0.1; 200];
    assert!(matches!(weights.effective_bandwidths(), Err(TopologyError::Weights(_))));
    let short = TopologySetup { intra_weights: vec![0.5; 3], ..setup.clone() };
    assert!(matches!(short.effective_bandwidths(), Err(TopologyError::Weights(_))));
    let no_reads = TopologySetup { requests: 0, ..setup.clone() };
    assert!(matches!(no_reads.effective_bandwidths(), Err(TopologyError::Setup(_))));
    let bad_service = TopologySetup { service: Distribution::Exponential { mean_s: -1.0 }, ..setup.clone() };
    assert!(matches!(bad_service.effective_bandwidths(), Err(TopologyError::Setup(_))));
}

#[test]
fn files_that_cannot_be_read_are_refused() {
    let setup = two_racks(1, &[0.5], Distribution::Constant { value_s: 1e-3 }, LinkDiscipline::Reserved, 10);
    let good = file_on_rack_one(0, 1.0);
    assert!(run(&setup, std::slice::from_ref(&good)).is_ok());
    let cases = [
        FileSpec { class: 1, ..good.clone() },
        FileSpec { racks: vec![1, 1], ..good.clone() },
        FileSpec { racks: vec![2], ..good.clone() },
        FileSpec { rates_per_s: vec![1.0], ..good.clone() },
        FileSpec { rates_per_s: vec![f64::NAN, 0.0], ..good.clone() },
        FileSpec { racks: vec![0, 1], ..good.clone() },
    ];
    for file in cases {
        assert!(
            matches!(run(&setup, std::slice::from_ref(&file)), Err(TopologyError::File { .. })),
            "{file:?} accepted"
        );
    }
    // Read from rack 0 of a chunk on rack 0: the intra-rack queue has no bandwidth.
    let intra = FileSpec { racks: vec![0], ..good.clone() };
    assert_eq!(run(&setup, &[intra]), Err(TopologyError::NoBandwidth { file: 0, client: 0, storage: 0, class: 0 }));
    let silent = FileSpec { rates_per_s: vec![0.0, 0.0], ..good };
    assert!(matches!(run(&setup, &[silent]), Err(TopologyError::Setup(_))));
}

#[test]
fn distribution_moments_match_their_draws() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for x in [
        Distribution::Constant { value_s: 2.0 },
        Distribution::Exponential { mean_s: 0.5 },
        Distribution::ShiftedExponential { shift_s: 0.3, exp_mean_s: 0.2 },
    ] {
        let draws: Vec<f64> = (0..400_000).map(|_| x.sample(&mut rng)).collect();
        let moments = [1, 2, 3].map(|t| draws.iter().map(|d| d.powi(t)).sum::<f64>() / draws.len() as f64);
        for (t, (measured, exact)) in moments.iter().zip(x.moments()).enumerate() {
            assert!((measured / exact - 1.0).abs() < 0.02, "{x:?}: moment {} {measured} against {exact}", t + 1);
        }
        let [mean, second, _] = x.moments();
        assert!((x.variance() - (second - mean * mean)).abs() < 1e-12);
    }
}
