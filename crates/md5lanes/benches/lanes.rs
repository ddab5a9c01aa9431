//! MD5 throughput: one message through the md-5 crate (its x86-64 assembly) against sixteen and
//! eight messages side by side in `md5lanes`, per kernel. Bytes/s count every lane's bytes.

// criterion_group! defines an undocumented public function; nothing here is API.
#![allow(missing_docs)]

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use md5::Digest;
use md5lanes::{Kernel, LANES, Lanes};

const MESSAGE_BYTES: usize = 1 << 20;

fn lanes(c: &mut Criterion) {
    let message = Bytes::from((0..MESSAGE_BYTES).map(|i| (i * 31 % 251) as u8).collect::<Vec<u8>>());
    let mut group = c.benchmark_group("md5");
    group.throughput(Throughput::Bytes(MESSAGE_BYTES as u64));
    group.bench_function("md-5 (one message)", |b| b.iter(|| md5::Md5::digest(&message)));
    for kernel in Kernel::available() {
        for lane_count in [1, 2, 3, 4, 8, LANES] {
            group.throughput(Throughput::Bytes((MESSAGE_BYTES * lane_count) as u64));
            group.bench_function(format!("lanes {kernel:?} x{lane_count}"), |b| {
                b.iter(|| {
                    let mut lanes = Lanes::new(kernel);
                    for lane in 0..lane_count {
                        lanes.open(lane);
                        lanes.push(lane, message.clone());
                        lanes.end(lane);
                    }
                    while lanes.hash_round() > 0 {}
                    (0..lane_count).map(|lane| lanes.take_digest(lane)).collect::<Vec<_>>()
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, lanes);
criterion_main!(benches);
