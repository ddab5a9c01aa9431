//! Criterion benchmarks of every engine this CPU supports, on the shapes the
//! codec's throughput targets name (RS(10,4) and RS(6,3), 1 MiB and 64 KiB units):
//! encode, and decode with one lost data unit. The `reed-solomon-erasure`
//! crate (simd-accel) encodes the same shapes in the same run, so a ratio to
//! an established library can be quoted from one report.
//!
//! Throughput is data input (k × unit bytes) per iteration, in decimal GB/s
//! like `lowtail bench codec`; criterion times wall clock, so run it on an
//! otherwise idle machine. `lowtail bench codec` is the CPU-time,
//! single-engine view of the same operations.
//!
//! Must not: run the reference engine (byte at a time, it would take most of
//! the suite's time to measure the definition, which the tests already check).

// criterion_group! defines an undocumented public function; nothing here is API.
#![allow(missing_docs)]

use codec::engine::{self, Engine, EngineKind};
use codec::{ErasureCode, Rs};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use reed_solomon_erasure::galois_8::ReedSolomon;
use std::hint::black_box;
use std::time::Duration;

/// (k, m) of the codes measured.
const CODES: [(usize, usize); 2] = [(10, 4), (6, 3)];
/// Bytes per unit: larger than L2 with all sources, and well inside it.
const UNIT_SIZES_BYTES: [usize; 2] = [1024 * 1024, 64 * 1024];

fn shape_name(k: usize, m: usize, unit_bytes: usize) -> String {
    let unit =
        if unit_bytes >= 1 << 20 { format!("{}MiB", unit_bytes >> 20) } else { format!("{}KiB", unit_bytes >> 10) };
    format!("rs-{k}-{m}/{unit}")
}

/// A unit whose first byte is 64-byte aligned, as in `lowtail bench codec`:
/// some kernels take an aligned (streaming-store) path, and a benchmark on
/// whatever alignment the allocator returns would measure the allocator.
#[derive(Clone)]
struct AlignedUnit {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedUnit {
    fn zeroed(len: usize) -> AlignedUnit {
        let storage = vec![0u8; len + 64];
        let start = storage.as_ptr().align_offset(64);
        AlignedUnit { storage, start, len }
    }

    fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

/// `count` units of deterministic, structureless bytes (SplitMix64).
fn pseudo_random_units(count: usize, unit_bytes: usize, seed: u64) -> Vec<AlignedUnit> {
    let mut state = seed;
    (0..count)
        .map(|_| {
            let mut unit = AlignedUnit::zeroed(unit_bytes);
            for byte in unit.as_mut_slice() {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                *byte = (z ^ (z >> 31)) as u8;
            }
            unit
        })
        .collect()
}

fn zeroed_units(count: usize, unit_bytes: usize) -> Vec<AlignedUnit> {
    (0..count).map(|_| AlignedUnit::zeroed(unit_bytes)).collect()
}

fn engines_to_measure() -> Vec<&'static dyn Engine> {
    engine::available().into_iter().filter(|engine| engine.kind() != EngineKind::Reference).collect()
}

fn encode(c: &mut Criterion) {
    for (k, m) in CODES {
        for unit_bytes in UNIT_SIZES_BYTES {
            let mut group = c.benchmark_group(format!("encode/{}", shape_name(k, m, unit_bytes)));
            group.throughput(Throughput::BytesDecimal((k * unit_bytes) as u64));
            let data = pseudo_random_units(k, unit_bytes, 1);
            let data_refs: Vec<&[u8]> = data.iter().map(AlignedUnit::as_slice).collect();
            let mut parity = zeroed_units(m, unit_bytes);

            for engine in engines_to_measure() {
                let code = Rs::with_engine(k, m, engine).expect("valid code");
                group.bench_function(BenchmarkId::from_parameter(engine.kind().name()), |b| {
                    let mut parity_refs: Vec<&mut [u8]> = parity.iter_mut().map(AlignedUnit::as_mut_slice).collect();
                    b.iter(|| code.encode(black_box(&data_refs), &mut parity_refs).expect("encode"));
                });
            }

            let baseline = ReedSolomon::new(k, m).expect("valid code");
            group.bench_function(BenchmarkId::from_parameter("reed-solomon-erasure"), |b| {
                let mut parity_refs: Vec<&mut [u8]> = parity.iter_mut().map(AlignedUnit::as_mut_slice).collect();
                b.iter(|| baseline.encode_sep(black_box(&data_refs), &mut parity_refs).expect("encode"));
            });
            group.finish();
        }
    }
}

fn decode_one_lost(c: &mut Criterion) {
    for (k, m) in CODES {
        for unit_bytes in UNIT_SIZES_BYTES {
            let mut group = c.benchmark_group(format!("decode-1-lost/{}", shape_name(k, m, unit_bytes)));
            group.throughput(Throughput::BytesDecimal((k * unit_bytes) as u64));
            let original = pseudo_random_units(k, unit_bytes, 2);
            // Data unit 0 lost; every other unit present.
            let present: Vec<bool> = (0..k + m).map(|unit| unit != 0).collect();

            for engine in engines_to_measure() {
                let code = Rs::with_engine(k, m, engine).expect("valid code");
                let mut units = original.clone();
                units.extend(zeroed_units(m, unit_bytes));
                {
                    let (data, parity) = units.split_at_mut(k);
                    let data_refs: Vec<&[u8]> = data.iter().map(AlignedUnit::as_slice).collect();
                    let mut parity_refs: Vec<&mut [u8]> = parity.iter_mut().map(AlignedUnit::as_mut_slice).collect();
                    code.encode(&data_refs, &mut parity_refs).expect("encode");
                }
                units[0].as_mut_slice().fill(0);
                let mut unit_refs: Vec<&mut [u8]> = units.iter_mut().map(AlignedUnit::as_mut_slice).collect();
                code.reconstruct_data(&mut unit_refs, &present).expect("decode");
                assert_eq!(&*unit_refs[0], original[0].as_slice(), "engine {} decodes wrong bytes", engine.kind());
                group.bench_function(BenchmarkId::from_parameter(engine.kind().name()), |b| {
                    b.iter(|| code.reconstruct_data(black_box(&mut unit_refs), &present).expect("decode"));
                });
            }
            group.finish();
        }
    }
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = encode, decode_one_lost
}
criterion_main!(benches);
