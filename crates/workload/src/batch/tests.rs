//! Tests of the batch workloads: scan shape and clamping, uniform-then-Zipf
//! start keys, scrambling, page medians, determinism, the batch trace reader
//! and replay, and the refusal of every invalid field. Must not: depend on
//! anything but the seeds they set.

use super::*;
use rand_chacha::ChaCha8Rng;

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

fn scans(blocks: u32, max_scan_length: u32, change_at_ns: u64) -> YcsbEConfig {
    YcsbEConfig { blocks, block_bytes: 10_000, max_scan_length, zipf_exponent: 1.0, scrambled: false, change_at_ns }
}

fn small_pages(change_at_ns: u64) -> PageConfig {
    PageConfig { pages: 20_000, images: 100_000, ..PageConfig::paper(change_at_ns) }
}

/// Start keys of `draws` batches at `now_ns`.
fn starts(generator: &mut BatchGenerator, now_ns: u64, draws: usize, seed: u64) -> Vec<u32> {
    let mut rng = rng(seed);
    let mut out = Vec::new();
    (0..draws)
        .map(|_| {
            generator.next_batch(now_ns, &mut rng, &mut out);
            out[0]
        })
        .collect()
}

fn counts(keys: &[u32], blocks: u32) -> Vec<u64> {
    let mut counts = vec![0u64; blocks as usize];
    for &key in keys {
        counts[key as usize] += 1;
    }
    counts
}

fn median(values: &mut [u64]) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

fn harmonic(n: u32, s: f64) -> f64 {
    (1..=n).map(|k| f64::from(k).powf(-s)).sum()
}

#[test]
fn scans_are_contiguous_in_range_and_clamped_at_the_end() {
    let mut generator = BatchWorkload::YcsbE(scans(50, 10, 0)).build(1).unwrap();
    assert_eq!(generator.block_bytes(), &[10_000; 50][..]);
    let mut rng = rng(2);
    let mut out = vec![7, 7, 7];
    let mut lengths_from_zero = [false; 11];
    let mut clamped = 0;
    for draw in 0..20_000u64 {
        // Half before the change (uniform starts reach the end), half after.
        generator.next_batch(if draw % 2 == 0 { 0 } else { 1 }, &mut rng, &mut out);
        assert!(!out.is_empty() && out.len() <= 10, "length {}", out.len());
        assert!(out.windows(2).all(|w| w[1] == w[0] + 1), "not contiguous: {out:?}");
        assert!(*out.last().unwrap() < 50, "past the last key: {out:?}");
        if out[0] == 0 {
            lengths_from_zero[out.len()] = true;
        }
        if *out.last().unwrap() == 49 && out.len() < 10 && out[0] + 10 > 50 {
            clamped += 1;
        }
    }
    assert!(lengths_from_zero[1..].iter().all(|&seen| seen), "every length 1..=10 occurs: {lengths_from_zero:?}");
    assert!(clamped > 0, "scans near the end are clamped, not wrapped");
    // A scan starting at the last key is that key alone, whatever its length.
    let mut generator = BatchWorkload::YcsbE(scans(1, 1, NEVER)).build(1).unwrap();
    generator.next_batch(0, &mut rng, &mut out);
    assert_eq!(out, [0]);
}

#[test]
fn start_key_is_uniform_before_the_change() {
    let blocks = 1_000_000;
    let mut generator = BatchWorkload::YcsbE(YcsbEConfig::paper(1_000)).build(1).unwrap();
    let keys = starts(&mut generator, 999, 20_000, 3);
    let mean = keys.iter().map(|&k| f64::from(k)).sum::<f64>() / keys.len() as f64;
    // σ of the mean: blocks / √(12 · 20000) ≈ 0.2 % of blocks.
    assert!((mean / f64::from(blocks) - 0.5).abs() < 0.01, "mean start {mean}");
    let mut bins = [0f64; 10];
    for &key in &keys {
        bins[(key / (blocks / 10)) as usize] += 1.0;
    }
    let expected = keys.len() as f64 / 10.0;
    let chi_square: f64 = bins.iter().map(|&observed| (observed - expected).powi(2) / expected).sum();
    // 9 degrees of freedom: 27.9 is the 99.9th percentile.
    assert!(chi_square < 27.9, "chi-square {chi_square} over {bins:?}");
}

#[test]
fn start_key_follows_zipf_after_the_change() {
    let blocks = 1000;
    let draws = 200_000;
    let mut generator = BatchWorkload::YcsbE(scans(blocks, 5, 500)).build(1).unwrap();
    let counts = counts(&starts(&mut generator, 500, draws, 4), blocks);
    let hottest = (0..blocks as usize).max_by_key(|&k| counts[k]).unwrap();
    assert_eq!(hottest, 0, "rank 1 is key 0 when unscrambled");
    let expected = 1.0 / harmonic(blocks, 1.0);
    let observed = counts[0] as f64 / draws as f64;
    assert!((observed / expected - 1.0).abs() < 0.03, "hottest key {observed}, Zipf says {expected}");
    // Rank 2 draws half as often as rank 1 at s = 1.
    let ratio = counts[1] as f64 / counts[0] as f64;
    assert!((ratio - 0.5).abs() < 0.03, "rank 2 / rank 1 = {ratio}");
}

#[test]
fn never_keeps_the_start_key_uniform() {
    let mut generator = BatchWorkload::YcsbE(scans(1000, 5, NEVER)).build(1).unwrap();
    let counts = counts(&starts(&mut generator, u64::MAX, 50_000, 5), 1000);
    // Uniform: 50 a key on average; Zipf would give key 0 about 6700.
    assert!(counts.iter().all(|&c| c < 100), "max {}", counts.iter().max().unwrap());
}

#[test]
fn scrambled_zipf_spreads_the_hottest_keys() {
    let blocks = 100_000;
    let config = YcsbEConfig { scrambled: true, ..scans(blocks, 5, 0) };
    let mut generator = BatchWorkload::YcsbE(config).build(1).unwrap();
    let counts = counts(&starts(&mut generator, 0, 100_000, 6), blocks);
    let mut by_count: Vec<u32> = (0..blocks).collect();
    by_count.sort_by_key(|&k| std::cmp::Reverse(counts[k as usize]));
    // The hottest key is rank 1's hash, not key 0.
    assert_eq!(u64::from(by_count[0]), fnv1a64(0) % u64::from(blocks));
    let top: Vec<u32> = by_count[..8].to_vec();
    let spread = top.iter().max().unwrap() - top.iter().min().unwrap();
    assert!(spread > blocks / 4, "the 8 hottest keys {top:?} sit within {spread} keys");
    assert!(top.iter().filter(|&&k| k < 100).count() <= 1, "hot keys are not the lowest: {top:?}");
}

#[test]
fn fnv1a64_matches_reference_values() {
    // FNV-1a 64 over the little-endian bytes, computed independently.
    assert_eq!(fnv1a64(0), 0xa8c7_f832_281a_39c5);
    assert_eq!(fnv1a64(1), 0x89cd_3129_1d2a_efa4);
    assert_eq!(fnv1a64(12345), 0xe71e_b185_e2ed_cc4c);
}

#[test]
fn page_medians_match_the_configuration() {
    let config = small_pages(NEVER);
    let mut generator = BatchWorkload::Pages(config.clone()).build(7).unwrap();
    let bytes = generator.block_bytes();
    assert_eq!(bytes.len(), config.images as usize);
    assert!(bytes.iter().all(|&b| (1..=config.image_bytes_max).contains(&b)));
    let median_bytes = median(&mut bytes.to_vec()) as f64;
    assert!((median_bytes / 500_000.0 - 1.0).abs() < 0.15, "median image {median_bytes} B");

    let mut rng = rng(8);
    let mut out = Vec::new();
    let mut sizes = Vec::new();
    let mut appearances = vec![0u32; config.images as usize];
    for _ in 0..20_000 {
        generator.next_batch(0, &mut rng, &mut out);
        assert!(!out.is_empty() && out.len() <= config.images_per_page_max as usize);
        let mut distinct = out.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), out.len(), "a page's images are distinct");
        for &image in &out {
            appearances[image as usize] += 1;
        }
        sizes.push(out.len() as u64);
    }
    let median_images = median(&mut sizes) as f64;
    assert!((median_images / 10.0 - 1.0).abs() < 0.15, "median page {median_images} images");
    assert!(sizes.iter().any(|&s| s > 50), "the count is heavy-tailed");
    // Popular images are shared: the most requested appears far more often
    // than the pages drawn could hold it once each.
    assert!(*appearances.iter().max().unwrap() > 1000, "images are shared across pages");
    assert!(generator.describe().starts_with("pages: 20000 pages over 100000 images"), "{}", generator.describe());
}

#[test]
fn pages_follow_zipf_after_the_change() {
    let config = PageConfig { pages: 1000, images: 20_000, ..PageConfig::paper(100) };
    let mut generator = BatchWorkload::Pages(config).build(9).unwrap();
    let mut rng = rng(10);
    let mut out = Vec::new();
    let mut seen: HashMap<Vec<u32>, u64> = HashMap::new();
    let draws = 100_000;
    for _ in 0..draws {
        generator.next_batch(100, &mut rng, &mut out);
        *seen.entry(out.clone()).or_default() += 1;
    }
    let hottest = *seen.values().max().unwrap() as f64 / draws as f64;
    let expected = 1.0 / harmonic(1000, 1.0);
    assert!((hottest / expected - 1.0).abs() < 0.05, "hottest page {hottest}, Zipf says {expected}");
}

#[test]
fn the_same_seed_gives_the_same_generator_and_batches() {
    let draw = |generator: &BatchGenerator, seed: u64| {
        let mut generator = generator.clone();
        let mut rng = rng(seed);
        let mut out = Vec::new();
        (0..2000u64)
            .map(|i| {
                generator.next_batch(i * 1000, &mut rng, &mut out);
                out.clone()
            })
            .collect::<Vec<_>>()
    };
    for workload in [
        BatchWorkload::YcsbE(YcsbEConfig { scrambled: true, ..scans(10_000, 100, 1_000_000) }),
        BatchWorkload::Pages(PageConfig { pages: 2000, images: 10_000, ..PageConfig::paper(1_000_000) }),
    ] {
        let a = workload.build(11).unwrap();
        let b = workload.build(11).unwrap();
        assert_eq!(a.block_bytes(), b.block_bytes());
        assert_eq!(a.describe(), b.describe());
        assert_eq!(draw(&a, 12), draw(&b, 12));
        assert_ne!(draw(&a, 12), draw(&a, 13), "the rng passed in drives the batches");
    }
    let pages = BatchWorkload::Pages(PageConfig { pages: 2000, images: 10_000, ..PageConfig::paper(0) });
    assert_ne!(pages.build(1).unwrap().block_bytes(), pages.build(2).unwrap().block_bytes());
}

#[test]
fn paper_configurations_build() {
    let scans = BatchWorkload::YcsbE(YcsbEConfig::paper(NEVER)).build(1).unwrap();
    assert_eq!(scans.block_bytes().len(), 1_000_000);
    assert!(scans.describe().contains("never"), "{}", scans.describe());
    let mut pages = BatchWorkload::Pages(PageConfig::paper(0)).build(1).unwrap();
    assert_eq!(pages.block_bytes().len(), 500_000);
    let mut out = Vec::new();
    pages.next_batch(0, &mut rng(1), &mut out);
    assert!(!out.is_empty());
}

const TRACE: &str = "\
# time_ns,request_id,object_id,size_bytes
100,r1,900,10
100,r1,5,20

150, r2 ,5,20
150,r2,77,30
150,r2,5,20
200,r1,900,10
";

#[test]
fn trace_reader_groups_by_request_and_maps_objects_densely() {
    let trace = read_batch_trace(TRACE.as_bytes()).unwrap();
    // r1 again after r2 is a new batch; object 5 twice in r2 is read once.
    assert_eq!(trace.batches, vec![vec![0, 1], vec![1, 2], vec![0]]);
    assert_eq!(trace.block_bytes, vec![10, 20, 30]);
    assert_eq!(trace.arrival_ns, vec![100, 150, 200]);
}

#[test]
fn trace_reader_rejects_a_size_mismatch_naming_the_line() {
    let text = "1,a,7,100\n2,b,8,50\n3,c,7,101\n";
    let error = read_batch_trace(text.as_bytes()).unwrap_err();
    assert!(matches!(error, BatchWorkloadError::TraceLine { line: 3, .. }), "{error}");
    assert!(error.to_string().contains("line 1"), "names where the size was first given: {error}");
}

#[test]
fn trace_reader_rejects_malformed_lines_naming_them() {
    for (bad, reason) in [
        ("1,a,7", "4 comma-separated fields"),
        ("1,a,7,100,5", "4 comma-separated fields"),
        ("x,a,7,100", "time_ns"),
        ("-1,a,7,100", "time_ns"),
        ("1,,7,100", "request_id"),
        ("1,a,obj,100", "object_id"),
        ("1,a,7,ten", "size_bytes"),
        ("1,a,7,0", "size_bytes 0"),
    ] {
        let text = format!("# header\n1,a,1,5\n\n{bad}\n");
        let error = read_batch_trace(text.as_bytes()).unwrap_err();
        assert!(matches!(error, BatchWorkloadError::TraceLine { line: 4, .. }), "{bad}: {error}");
        assert!(error.to_string().contains(reason), "{bad}: {error}");
    }
    let error = read_batch_trace("# only a comment\n\n".as_bytes()).unwrap_err();
    assert!(matches!(error, BatchWorkloadError::Trace(_)), "{error}");
}

#[test]
fn trace_replays_its_batches_in_order_and_cycles() {
    let trace = read_batch_trace(TRACE.as_bytes()).unwrap();
    let mut generator = BatchWorkload::Trace(trace.clone()).build(1).unwrap();
    assert_eq!(generator.block_bytes(), &trace.block_bytes[..]);
    let mut rng = rng(1);
    let mut out = Vec::new();
    let replayed: Vec<Vec<u32>> = (0..7)
        .map(|_| {
            generator.next_batch(0, &mut rng, &mut out);
            out.clone()
        })
        .collect();
    let cycle = &trace.batches;
    let expected: Vec<Vec<u32>> = cycle.iter().cycle().take(7).cloned().collect();
    assert_eq!(replayed, expected);
    assert!(generator.describe().starts_with("trace: 3 batches over 3 blocks"), "{}", generator.describe());
}

#[test]
fn invalid_traces_are_refused() {
    let good = read_batch_trace(TRACE.as_bytes()).unwrap();
    let cases: Vec<(BatchTrace, &str)> = vec![
        (BatchTrace { batches: vec![], arrival_ns: vec![], ..good.clone() }, "no batch"),
        (BatchTrace { arrival_ns: vec![0], ..good.clone() }, "arrival times"),
        (BatchTrace { block_bytes: vec![10, 0, 30], ..good.clone() }, "0 bytes"),
        (BatchTrace { batches: vec![vec![0], vec![], vec![1]], ..good.clone() }, "empty"),
        (BatchTrace { batches: vec![vec![0], vec![3], vec![1]], ..good.clone() }, "block 3 of 3"),
        (BatchTrace { batches: vec![vec![0], vec![1, 2, 1], vec![1]], ..good.clone() }, "twice"),
    ];
    for (trace, reason) in cases {
        let error = BatchWorkload::Trace(trace).build(1).unwrap_err();
        assert!(matches!(error, BatchWorkloadError::Trace(_)) && error.to_string().contains(reason), "{error}");
    }
}

fn assert_refused(workload: BatchWorkload, field: &str) {
    match workload.build(1) {
        Err(BatchWorkloadError::Config { field: named, .. }) => assert_eq!(named, field),
        other => panic!("{field}: expected a config error, got {other:?}"),
    }
}

#[test]
fn invalid_ycsb_fields_are_refused() {
    let good = scans(100, 10, 0);
    let cases: Vec<(YcsbEConfig, &str)> = vec![
        (YcsbEConfig { blocks: 0, ..good.clone() }, "blocks"),
        (YcsbEConfig { blocks: MAX_BLOCKS + 1, ..good.clone() }, "blocks"),
        (YcsbEConfig { block_bytes: 0, ..good.clone() }, "block_bytes"),
        (YcsbEConfig { max_scan_length: 0, ..good.clone() }, "max_scan_length"),
        (YcsbEConfig { max_scan_length: 101, ..good.clone() }, "max_scan_length"),
        (YcsbEConfig { zipf_exponent: 0.0, ..good.clone() }, "zipf_exponent"),
        (YcsbEConfig { zipf_exponent: -1.0, ..good.clone() }, "zipf_exponent"),
        (YcsbEConfig { zipf_exponent: f64::NAN, ..good.clone() }, "zipf_exponent"),
        (YcsbEConfig { zipf_exponent: f64::INFINITY, ..good.clone() }, "zipf_exponent"),
    ];
    for (config, field) in cases {
        assert_refused(BatchWorkload::YcsbE(config), field);
    }
    assert!(BatchWorkload::YcsbE(YcsbEConfig { max_scan_length: 100, ..good }).build(1).is_ok());
}

#[test]
fn invalid_page_fields_are_refused() {
    let good = PageConfig { pages: 100, images: 1000, ..PageConfig::paper(0) };
    let cases: Vec<(PageConfig, &str)> = vec![
        (PageConfig { pages: 0, ..good.clone() }, "pages"),
        (PageConfig { images: 0, ..good.clone() }, "images"),
        (PageConfig { images: MAX_BLOCKS + 1, ..good.clone() }, "images"),
        (PageConfig { images_per_page_median: 0, ..good.clone() }, "images_per_page_median"),
        (PageConfig { images_per_page_median: 201, ..good.clone() }, "images_per_page_median"),
        (PageConfig { images_per_page_max: 1001, ..good.clone() }, "images_per_page_max"),
        (PageConfig { image_bytes_median: 0, ..good.clone() }, "image_bytes_median"),
        (PageConfig { image_bytes_median: 20_000_001, ..good.clone() }, "image_bytes_median"),
        (PageConfig { power_law_shape: 0.0, ..good.clone() }, "power_law_shape"),
        (PageConfig { power_law_shape: f64::NAN, ..good.clone() }, "power_law_shape"),
        (PageConfig { image_popularity_exponent: -0.5, ..good.clone() }, "image_popularity_exponent"),
        (PageConfig { image_popularity_exponent: f64::INFINITY, ..good.clone() }, "image_popularity_exponent"),
        (PageConfig { zipf_exponent: 0.0, ..good.clone() }, "zipf_exponent"),
        (PageConfig { zipf_exponent: f64::NEG_INFINITY, ..good.clone() }, "zipf_exponent"),
    ];
    for (config, field) in cases {
        assert_refused(BatchWorkload::Pages(config), field);
    }
    // A pool no larger than a page, with strong sharing: the bounded draws
    // may settle for fewer images, but a page is never empty.
    let tight = PageConfig {
        images: 20,
        images_per_page_median: 10,
        images_per_page_max: 20,
        image_popularity_exponent: 3.0,
        ..good
    };
    let mut generator = BatchWorkload::Pages(tight).build(1).unwrap();
    let mut out = Vec::new();
    let mut rng = rng(1);
    for _ in 0..1000 {
        generator.next_batch(0, &mut rng, &mut out);
        assert!(!out.is_empty() && out.len() <= 20);
    }
}
