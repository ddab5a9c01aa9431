//! The Hu et al. experiment at paper scale, printed as a table: all seven
//! policies on RS(6,3) and the paper's five on LRC(6,2,2), one workload.
//!
//! `cargo run --release -p sim --example hu2017 -- [rate_per_s] [duration_s] [seed] [overhead_us] [node_rate_bytes_per_s] [zipf]`

use policy::PolicyKind;
use sim::{Cluster, SimConfig};
use workload::{WasLikeConfig, WorkloadConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let number = |i: usize, default: f64| args.get(i).map_or(default, |a| a.parse().expect("a number"));
    let rate = number(1, WasLikeConfig::default().rate_per_s);
    let duration = number(2, 3600.0);
    let seed = number(3, 1.0) as u64;
    let mut config = SimConfig { seed, ..SimConfig::default() };
    config.cluster.task_overhead_us = number(4, config.cluster.task_overhead_us as f64) as u64;
    config.cluster.rate_bytes_per_s = number(5, config.cluster.rate_bytes_per_s as f64) as u64;
    let zipf_exponent = number(6, WasLikeConfig::default().zipf_exponent);
    config.workload = WorkloadConfig::WasLike(WasLikeConfig {
        rate_per_s: rate,
        duration_s: duration,
        zipf_exponent,
        ..WasLikeConfig::default()
    });
    let workload = config.workload.build(seed).expect("workload");
    println!("{} requests, {:.1} GB", workload.requests.len(), workload.total_bytes() as f64 / 1e9);
    println!(
        "{:<10} {:<10} {:>3} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6} {:>6}",
        "code", "policy", "fe", "mean", "median", "p95", "p99", "max", "task", "ctrl", "probes/s", "degr", "load"
    );
    for (code, policies) in [("rs-6-3", PolicyKind::ALL.to_vec()), ("lrc-6-2-2", PolicyKind::PAPER_LRC.to_vec())] {
        config.code = code.into();
        let cluster = Cluster::build(&config, workload.partitions).expect("cluster");
        for policy in policies {
            let output = sim::run(&config, &cluster, policy, &workload);
            let s = output.summary();
            println!(
                "{:<10} {:<10} {:>3} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.3} {:>8.4} {:>8.4} {:>9.1} {:>6.3} {:>6.3}",
                code,
                policy.name(),
                output.frontends,
                s.mean,
                s.median,
                s.p95,
                s.p99,
                s.max,
                s.task_mean,
                s.controller_mean,
                s.probes_per_s,
                s.degraded_fraction,
                s.load
            );
        }
    }
}
