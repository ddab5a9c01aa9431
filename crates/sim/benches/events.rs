//! Simulator speed in events per second: 90 nodes, 2004 partitions, RS(6,3),
//! one minute of the WAS-like workload, for a cheap (normal) and a probing
//! (lmlf-pw2) policy. Criterion's throughput line is events per second.

// criterion_group! defines an undocumented public function; nothing here is API.
#![allow(missing_docs)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use policy::PolicyKind;
use sim::{Cluster, SimConfig};
use workload::{WasLikeConfig, WorkloadConfig};

fn bench(c: &mut Criterion) {
    let config = SimConfig {
        workload: WorkloadConfig::WasLike(WasLikeConfig { duration_s: 60.0, ..WasLikeConfig::default() }),
        ..SimConfig::default()
    };
    let workload = config.workload.build(config.seed).unwrap();
    let cluster = Cluster::build(&config, workload.partitions).unwrap();
    let mut group = c.benchmark_group("sim");
    group.sample_size(10);
    for policy in [PolicyKind::Normal, PolicyKind::LmlfPw2, PolicyKind::OptLazy] {
        let events = sim::run(&config, &cluster, policy, &workload).events;
        group.throughput(Throughput::Elements(events));
        group.bench_function(format!("{policy} rs-6-3 60 s"), |b| {
            b.iter(|| sim::run(&config, &cluster, policy, &workload))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
