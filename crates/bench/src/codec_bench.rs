//! `lowtail bench codec`: single-thread encode and decode throughput of the
//! RS codes, next to the memory ceiling of the same units and the
//! `reed-solomon-erasure` crate encoding the same shape in the same run.
//!
//! Owns: the benchmark matrix (codes × unit sizes × operations), its buffers,
//! the check that every measured operation produces the right bytes, and the
//! rows it reports.
//! Must not: report a figure for an operation whose output was not verified,
//! or print anything (rendering is [`crate::report`]'s, output the caller's).

use crate::aligned::AlignedBuf;
use crate::ceiling::xor_reduce;
use crate::measure::{Timing, measure_interleaved};
use anyhow::{Context, bail, ensure};
use codec::engine::{self, Engine, EngineKind};
use codec::{CodeSpec, ErasureCode, Rs};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};
use std::io::IsTerminal;

/// Codes measured when none are named.
pub const DEFAULT_CODES: [CodeSpec; 3] =
    [CodeSpec::Rs { k: 6, m: 3 }, CodeSpec::Rs { k: 10, m: 4 }, CodeSpec::Rs { k: 12, m: 4 }];

/// Unit sizes measured when none are named: a small-object unit that fits
/// L2 with all its sources, and a large-object unit that does not.
pub const DEFAULT_UNIT_SIZES_BYTES: [usize; 2] = [64 * 1024, 1024 * 1024];

/// What to measure and how.
#[derive(Clone)]
pub struct CodecBenchConfig {
    /// RS codes to measure.
    pub codes: Vec<CodeSpec>,
    /// Bytes per unit, one configuration each.
    pub unit_sizes_bytes: Vec<usize>,
    /// Runs and run length.
    pub timing: Timing,
    /// The GF(2^8) engine the codes run on.
    pub engine: &'static dyn Engine,
    /// Draw a progress bar on stderr (only ever drawn when stderr is a terminal).
    pub show_progress: bool,
}

impl CodecBenchConfig {
    /// The default matrix on `engine`, with the standard timing.
    pub fn new(engine: &'static dyn Engine) -> CodecBenchConfig {
        CodecBenchConfig {
            codes: DEFAULT_CODES.to_vec(),
            unit_sizes_bytes: DEFAULT_UNIT_SIZES_BYTES.to_vec(),
            timing: Timing::STANDARD,
            engine,
            show_progress: false,
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        ensure!(!self.codes.is_empty(), "no codes to measure");
        ensure!(!self.unit_sizes_bytes.is_empty(), "no unit sizes to measure");
        ensure!(self.timing.runs > 0, "at least one timed run is needed");
        for spec in &self.codes {
            spec.validate()?;
            if !matches!(spec, CodeSpec::Rs { .. }) {
                bail!("bench codec measures RS codes (rs-K-M); {spec} is not one");
            }
        }
        ensure!(self.unit_sizes_bytes.iter().all(|&bytes| bytes > 0), "unit sizes must be at least 1 byte");
        Ok(())
    }
}

/// Which operation a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// All parity units from the k data units.
    Encode,
    /// Lost data units from k survivors (`ErasureCode::reconstruct_data`).
    Decode,
}

/// One measured figure: the JSON schema of `lowtail bench codec --json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CodecRow {
    /// Code name, as `rs-10-4`.
    pub code: String,
    /// Data units.
    pub k: usize,
    /// Parity units.
    pub m: usize,
    /// Bytes per unit.
    pub unit_bytes: usize,
    /// The operation.
    pub op: Op,
    /// Data units lost (0 for encode; decode loses units 0..lost).
    pub lost: usize,
    /// Median throughput: GB/s (1e9 bytes) of data input, k × unit_bytes per
    /// operation, over thread CPU time.
    pub gbps: f64,
    /// Engine name, as printed by `lowtail engines`.
    pub engine: String,
    /// Median GB/s of a plain XOR-reduce read of the same k data units: what
    /// one core's memory hierarchy allows for this working set.
    pub ceiling_gbps: f64,
    /// Encode rows only: median GB/s of `reed-solomon-erasure` (simd-accel)
    /// encoding the same shape in the same run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_gbps: Option<f64>,
}

/// The result of a benchmark: rows in configuration order, and how they were made.
#[derive(Clone, Debug, PartialEq)]
pub struct CodecBenchReport {
    /// Every measured figure.
    pub rows: Vec<CodecRow>,
    /// The engine every lowtail row ran on.
    pub engine: EngineKind,
    /// Runs and run length used.
    pub timing: Timing,
}

/// Decode patterns measured for a code with `m` parity units: 1 lost data
/// unit, and m lost (the most RS can correct); just one when m = 1.
pub fn lost_counts(m: usize) -> Vec<usize> {
    if m > 1 { vec![1, m] } else { vec![1] }
}

/// Figures are rounded to a thousandth of a GB/s: run-to-run noise is larger
/// than that, so more digits would only suggest a precision that is not there.
fn round_gbps(gbps: f64) -> f64 {
    (gbps * 1000.0).round() / 1000.0
}

/// Runs the whole matrix. Fails (reporting nothing) if any operation errors
/// or produces wrong bytes.
pub fn run_codec_bench(config: &CodecBenchConfig) -> anyhow::Result<CodecBenchReport> {
    config.validate()?;
    let total_steps = (config.codes.len() * config.unit_sizes_bytes.len()) as u64;
    let progress = progress_bar(total_steps, config.show_progress);

    let mut rows = Vec::new();
    for spec in &config.codes {
        for &unit_bytes in &config.unit_sizes_bytes {
            let bench = ConfigurationBench::new(*spec, unit_bytes, config.engine)?;
            rows.extend(
                bench.run(config.timing, &progress).with_context(|| format!("{spec} with {unit_bytes}-byte units"))?,
            );
        }
    }
    progress.finish_and_clear();
    Ok(CodecBenchReport { rows, engine: config.engine.kind(), timing: config.timing })
}

fn progress_bar(total_steps: u64, show: bool) -> ProgressBar {
    if !show || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total_steps), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{bar:32} {pos}/{len} {msg}") {
        bar.set_style(style);
    }
    bar
}

/// One (code, unit size) configuration: its code, buffers and reference bytes.
struct ConfigurationBench {
    spec: CodeSpec,
    k: usize,
    m: usize,
    unit_bytes: usize,
    engine: &'static dyn Engine,
    code: Rs,
    /// All n units: data (pseudo-random) then parity.
    units: Vec<AlignedBuf>,
}

impl ConfigurationBench {
    fn new(spec: CodeSpec, unit_bytes: usize, engine: &'static dyn Engine) -> anyhow::Result<ConfigurationBench> {
        let CodeSpec::Rs { k, m } = spec else { bail!("{spec} is not an RS code") };
        let code = Rs::with_engine(k, m, engine)?;
        let mut units: Vec<AlignedBuf> = (0..k + m).map(|_| AlignedBuf::zeroed(unit_bytes)).collect();
        let mut seed = (k as u64) << 48 ^ (m as u64) << 40 ^ unit_bytes as u64;
        for unit in &mut units[..k] {
            fill_pseudo_random(unit.as_mut_slice(), &mut seed);
        }
        Ok(ConfigurationBench { spec, k, m, unit_bytes, engine, code, units })
    }

    fn data_bytes(&self) -> u64 {
        (self.k * self.unit_bytes) as u64
    }

    fn row(&self, op: Op, lost: usize, gbps: f64) -> CodecRow {
        CodecRow {
            code: self.spec.to_string(),
            k: self.k,
            m: self.m,
            unit_bytes: self.unit_bytes,
            op,
            lost,
            gbps: round_gbps(gbps),
            engine: self.engine.kind().name().to_string(),
            ceiling_gbps: 0.0,
            baseline_gbps: None,
        }
    }

    /// Verifies every operation once, then times them all interleaved:
    /// encode, each decode pattern, the memory ceiling and the baseline.
    fn run(mut self, timing: Timing, progress: &ProgressBar) -> anyhow::Result<Vec<CodecRow>> {
        let label = format!("{} {}", self.spec, crate::byte_size::format_byte_size(self.unit_bytes));
        progress.set_message(format!("{label}: verifying"));
        self.encode_once()?;
        self.verify_parity_against_reference()?;
        let lost_patterns = lost_counts(self.m);
        for &lost in &lost_patterns {
            self.verify_decode(lost)?;
        }
        let mut baseline = Baseline::new(self.k, self.m, self.unit_bytes)?;
        baseline.verify(&self.units[..self.k])?;

        progress.set_message(format!("{label}: timing"));
        let operations: Vec<Operation> = std::iter::once(Operation::Encode)
            .chain(lost_patterns.iter().map(|&lost| Operation::Decode { lost }))
            .chain([Operation::Ceiling, Operation::Baseline])
            .collect();
        let presences: Vec<Vec<bool>> = lost_patterns.iter().map(|&lost| presence(self.k + self.m, lost)).collect();
        let bytes = vec![self.data_bytes(); operations.len()];
        let (k, code) = (self.k, &self.code);
        let units = &mut self.units;
        let measurements = measure_interleaved(&bytes, timing, |index| {
            match operations[index] {
                Operation::Encode => {
                    let (data, mut parity) = split_for_encode(units, k);
                    code.encode(&data, &mut parity)?;
                }
                Operation::Decode { .. } => {
                    let mut all: Vec<&mut [u8]> = units.iter_mut().map(AlignedBuf::as_mut_slice).collect();
                    code.reconstruct_data(&mut all, &presences[index - 1])?;
                }
                Operation::Ceiling => {
                    let data: Vec<&[u8]> = units[..k].iter().map(AlignedBuf::as_slice).collect();
                    std::hint::black_box(xor_reduce(std::hint::black_box(&data)));
                }
                Operation::Baseline => baseline.encode(&units[..k])?,
            }
            Ok(())
        })?;
        progress.inc(1);

        let gbps_of = |wanted: Operation| {
            let index = operations.iter().position(|&op| op == wanted).expect("every operation was timed");
            measurements[index].gbps_median
        };
        let mut rows = vec![self.row(Op::Encode, 0, gbps_of(Operation::Encode))];
        for &lost in &lost_patterns {
            rows.push(self.row(Op::Decode, lost, gbps_of(Operation::Decode { lost })));
        }
        for row in &mut rows {
            row.ceiling_gbps = round_gbps(gbps_of(Operation::Ceiling));
        }
        rows[0].baseline_gbps = Some(round_gbps(gbps_of(Operation::Baseline)));
        Ok(rows)
    }

    fn encode_once(&mut self) -> anyhow::Result<()> {
        let code = &self.code;
        let (data, mut parity) = split_for_encode(&mut self.units, self.k);
        code.encode(&data, &mut parity).context("encode failed")
    }

    /// The engine under test against the scalar reference engine: parity
    /// bytes must be identical, or the figures describe a broken kernel.
    fn verify_parity_against_reference(&self) -> anyhow::Result<()> {
        let reference_engine =
            engine::by_kind(EngineKind::Reference).context("the reference engine is always built")?;
        let reference = Rs::with_engine(self.k, self.m, reference_engine)?;
        let data: Vec<&[u8]> = self.units[..self.k].iter().map(AlignedBuf::as_slice).collect();
        let mut expected: Vec<AlignedBuf> = (0..self.m).map(|_| AlignedBuf::zeroed(self.unit_bytes)).collect();
        let mut expected_refs: Vec<&mut [u8]> = expected.iter_mut().map(AlignedBuf::as_mut_slice).collect();
        reference.encode(&data, &mut expected_refs).context("reference encode failed")?;
        for (i, (got, want)) in self.units[self.k..].iter().zip(&expected).enumerate() {
            if let Some(byte) = first_difference(got.as_slice(), want.as_slice()) {
                bail!(
                    "encode on engine {} wrote wrong bytes: parity unit {i} differs from the reference engine at byte {byte}",
                    self.engine.kind()
                );
            }
        }
        Ok(())
    }

    /// Loses data units 0..lost (overwritten with a pattern so stale bytes
    /// cannot pass for decoded ones), decodes once, compares to the originals.
    fn verify_decode(&mut self, lost: usize) -> anyhow::Result<()> {
        let originals: Vec<Vec<u8>> = self.units[..lost].iter().map(|unit| unit.as_slice().to_vec()).collect();
        for unit in &mut self.units[..lost] {
            unit.as_mut_slice().fill(0xA5);
        }
        let present = presence(self.k + self.m, lost);
        let code = &self.code;
        let mut units: Vec<&mut [u8]> = self.units.iter_mut().map(AlignedBuf::as_mut_slice).collect();
        code.reconstruct_data(&mut units, &present).context("decode failed")?;
        for (i, original) in originals.iter().enumerate() {
            if let Some(byte) = first_difference(units[i], original) {
                bail!(
                    "decode with data units 0..{lost} lost on engine {} returned wrong bytes: unit {i} differs at byte {byte}",
                    self.engine.kind()
                );
            }
        }
        Ok(())
    }
}

/// One timed operation of a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Encode,
    Decode { lost: usize },
    Ceiling,
    Baseline,
}

/// `reed-solomon-erasure` (klauspost's design ported to Rust, with its C AVX2
/// kernel) encoding the same data into its own parity buffers.
struct Baseline {
    code: reed_solomon_erasure::galois_8::ReedSolomon,
    parity: Vec<AlignedBuf>,
}

impl Baseline {
    fn new(k: usize, m: usize, unit_bytes: usize) -> anyhow::Result<Baseline> {
        let code = reed_solomon_erasure::galois_8::ReedSolomon::new(k, m)
            .map_err(|e| anyhow::anyhow!("reed-solomon-erasure refused RS({k},{m}): {e:?}"))?;
        Ok(Baseline { code, parity: (0..m).map(|_| AlignedBuf::zeroed(unit_bytes)).collect() })
    }

    fn encode(&mut self, data: &[AlignedBuf]) -> anyhow::Result<()> {
        let data: Vec<&[u8]> = data.iter().map(AlignedBuf::as_slice).collect();
        let mut parity: Vec<&mut [u8]> = self.parity.iter_mut().map(AlignedBuf::as_mut_slice).collect();
        self.code.encode_sep(&data, &mut parity).map_err(|e| anyhow::anyhow!("reed-solomon-erasure failed: {e:?}"))
    }

    /// Encodes once and checks the parity with the crate's own `verify`, so a
    /// broken baseline cannot flatter the ratio.
    fn verify(&mut self, data: &[AlignedBuf]) -> anyhow::Result<()> {
        self.encode(data)?;
        let shards: Vec<&[u8]> =
            data.iter().map(AlignedBuf::as_slice).chain(self.parity.iter().map(AlignedBuf::as_slice)).collect();
        let verified =
            self.code.verify(&shards).map_err(|e| anyhow::anyhow!("reed-solomon-erasure verify failed: {e:?}"))?;
        ensure!(verified, "reed-solomon-erasure wrote parity it does not verify");
        Ok(())
    }
}

/// Data units as sources and parity units as outputs, as `encode` takes them.
fn split_for_encode(units: &mut [AlignedBuf], k: usize) -> (Vec<&[u8]>, Vec<&mut [u8]>) {
    let (data, parity) = units.split_at_mut(k);
    (data.iter().map(AlignedBuf::as_slice).collect(), parity.iter_mut().map(AlignedBuf::as_mut_slice).collect())
}

/// Presence flags of n units with data units 0..lost lost.
fn presence(total_units: usize, lost: usize) -> Vec<bool> {
    (0..total_units).map(|unit| unit >= lost).collect()
}

/// Index of the first byte where `a` and `b` differ (or the shorter length).
pub fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y).or_else(|| (a.len() != b.len()).then_some(a.len().min(b.len())))
}

/// Fills with SplitMix64 output: fast, deterministic for a seed, and with no
/// structure a kernel could exploit (zero bytes or repeats would flatter a
/// table-lookup engine's caches).
fn fill_pseudo_random(bytes: &mut [u8], state: &mut u64) {
    for chunk in bytes.chunks_mut(8) {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn lost_patterns_and_presence() {
        assert_eq!(lost_counts(4), vec![1, 4]);
        assert_eq!(lost_counts(1), vec![1]);
        assert_eq!(presence(5, 2), vec![false, false, true, true, true]);
    }

    #[test]
    fn first_difference_finds_the_byte() {
        assert_eq!(first_difference(b"abc", b"abc"), None);
        assert_eq!(first_difference(b"abc", b"abd"), Some(2));
        assert_eq!(first_difference(b"ab", b"abc"), Some(2));
    }

    #[test]
    fn pseudo_random_fill_is_deterministic_and_not_flat() {
        let (mut a, mut b) = (vec![0u8; 1001], vec![0u8; 1001]);
        fill_pseudo_random(&mut a, &mut 7);
        fill_pseudo_random(&mut b, &mut 7);
        assert_eq!(a, b);
        assert!(a.iter().filter(|&&byte| byte == 0).count() < 20);
    }

    #[test]
    fn json_rows_have_the_required_fields() {
        let row = CodecRow {
            code: "rs-10-4".into(),
            k: 10,
            m: 4,
            unit_bytes: 1 << 20,
            op: Op::Decode,
            lost: 4,
            gbps: 12.5,
            engine: "avx2".into(),
            ceiling_gbps: 22.0,
            baseline_gbps: None,
        };
        let json: serde_json::Value = serde_json::to_value(&row).unwrap();
        let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        for key in ["code", "k", "m", "unit_bytes", "op", "lost", "gbps", "engine", "ceiling_gbps"] {
            assert!(keys.contains(&key), "missing {key} in {json}");
        }
        assert_eq!(json["op"], "decode");
        assert!(!keys.contains(&"baseline_gbps"), "decode rows carry no baseline");
        let encode = CodecRow { op: Op::Encode, lost: 0, baseline_gbps: Some(7.25), ..row };
        assert_eq!(serde_json::to_value(&encode).unwrap()["op"], "encode");
        assert_eq!(serde_json::to_value(&encode).unwrap()["baseline_gbps"], 7.25);
    }

    #[test]
    fn non_rs_codes_and_empty_matrices_are_refused() {
        let mut config = CodecBenchConfig::new(engine::by_kind(EngineKind::Portable).unwrap());
        config.codes = vec!["lrc-6-2-2".parse().unwrap()];
        assert!(run_codec_bench(&config).unwrap_err().to_string().contains("RS"));
        config.codes = vec![];
        assert!(run_codec_bench(&config).is_err());
    }

    #[test]
    fn a_tiny_matrix_yields_verified_rows_for_every_operation() {
        let mut config = CodecBenchConfig::new(engine::by_kind(EngineKind::Portable).unwrap());
        config.codes = vec![CodeSpec::Rs { k: 4, m: 2 }];
        config.unit_sizes_bytes = vec![4096, 1000];
        config.timing = Timing { runs: 3, min_run: Duration::from_millis(1) };
        let report = run_codec_bench(&config).unwrap();
        let shape: Vec<(usize, Op, usize)> = report.rows.iter().map(|r| (r.unit_bytes, r.op, r.lost)).collect();
        assert_eq!(
            shape,
            vec![
                (4096, Op::Encode, 0),
                (4096, Op::Decode, 1),
                (4096, Op::Decode, 2),
                (1000, Op::Encode, 0),
                (1000, Op::Decode, 1),
                (1000, Op::Decode, 2)
            ]
        );
        for row in &report.rows {
            assert!(row.gbps > 0.0 && row.ceiling_gbps > 0.0, "{row:?}");
            assert_eq!(row.engine, "portable");
            assert_eq!(row.baseline_gbps.is_some(), row.op == Op::Encode);
        }
    }
}
