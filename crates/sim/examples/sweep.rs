//! A latency-vs-load sweep of the Hu et al. experiment: every policy of the
//! paper on RS(6,3) and LRC(6,2,2) at several request rates, one table row
//! per (rate, code, policy). Each rate has its own workload from one seed.
//!
//! `cargo run --release -p sim --example sweep -- [rates,comma,separated] [duration_s] [seed] [codes] [policies]`
//! e.g. `-- 100,200,400 600 1 rs-6-3,lrc-6-2-2 normal,lmlf-pw2`
//!
//! Model overrides for exploring come from the environment (`SWEEP_*`, see below).

use policy::PolicyKind;
use sim::{Cluster, SimConfig};
use workload::{WasLikeConfig, WorkloadConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_string());
    let rates: Vec<f64> =
        arg(1, "100,200,300,400,500,600,700,800").split(',').map(|r| r.parse().expect("a rate")).collect();
    let duration: f64 = arg(2, "600").parse().expect("a duration");
    let seed: u64 = arg(3, "1").parse().expect("a seed");
    let codes: Vec<String> = arg(4, "rs-6-3,lrc-6-2-2").split(',').map(String::from).collect();
    let chosen = arg(5, "all");
    println!(
        "{:>6} {:<10} {:<10} {:>3} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>8} {:>9} {:>6}",
        "rate",
        "code",
        "policy",
        "fe",
        "load",
        "mean",
        "min",
        "median",
        "p95",
        "p99",
        "max",
        "task",
        "probes/s",
        "degr"
    );
    for &rate in &rates {
        let mut config = SimConfig { seed, ..SimConfig::default() };
        let mut was = WasLikeConfig { rate_per_s: rate, duration_s: duration, ..WasLikeConfig::default() };
        // Model overrides for exploring (environment, all optional).
        set_from_env("SWEEP_NODE_RATE", &mut config.cluster.rate_bytes_per_s);
        set_from_env("SWEEP_OVERHEAD_US", &mut config.cluster.task_overhead_us);
        set_from_env("SWEEP_NODES", &mut config.cluster.nodes);
        set_from_env("SWEEP_NETWORK_US", &mut config.cluster.network_latency_us);
        set_from_env("SWEEP_CANCEL_IN_SERVICE", &mut config.cluster.cancel_in_service);
        set_from_env("SWEEP_PROBE_US", &mut config.frontends.per_probe_us);
        set_from_env("SWEEP_FRONTENDS", &mut config.frontends.count);
        set_from_env("SWEEP_PROBE_RTT_US", &mut config.frontends.probe_rtt_us);
        set_from_env("SWEEP_PROBES_BLOCK", &mut config.frontends.probes_block_frontend);
        set_from_env("SWEEP_TIMEOUT_MS", &mut config.policy.normal_timeout_ms);
        set_from_env("SWEEP_LAZY_MS", &mut config.policy.lmlf_lazy_period_ms);
        set_from_env("SWEEP_OPT_MS", &mut config.policy.opt_lazy_period_ms);
        set_from_env("SWEEP_COUNT_OVERHEAD", &mut config.policy.count_task_overhead);
        set_from_env("SWEEP_MARGINAL_LOAD", &mut config.policy.marginal_load);
        set_from_env("SWEEP_MAX_BYTES", &mut was.sizes.max_bytes);
        set_from_env("SWEEP_ZIPF", &mut was.zipf_exponent);
        set_from_env("SWEEP_OBJECTS", &mut was.objects);
        set_from_env("SWEEP_PARTITIONS", &mut was.partitions);
        if std::env::var("SWEEP_ZIPF_OVER").is_ok_and(|v| v == "partitions") {
            was.zipf_over = workload::ZipfOver::Partitions;
        }
        config.workload = WorkloadConfig::WasLike(was);
        let workload = config.workload.build(seed).expect("workload");
        for code in &codes {
            config.code = code.clone();
            let all: Vec<PolicyKind> =
                if code.starts_with("lrc") { PolicyKind::PAPER_LRC.to_vec() } else { PolicyKind::ALL.to_vec() };
            let policies: Vec<PolicyKind> = if chosen == "all" {
                all
            } else {
                chosen.split(',').map(|p| p.parse().expect("a policy")).filter(|p| all.contains(p)).collect()
            };
            let cluster = Cluster::build(&config, workload.partitions).expect("cluster");
            for policy in policies {
                let output = sim::run(&config, &cluster, policy, &workload);
                let mut info = report::RunInfo::new(
                    &output.code,
                    policy.name(),
                    u32::from(output.frontends),
                    config.cluster.nodes,
                    seed,
                );
                info.refresh_probes = output.refresh_probes;
                let summary = report::summarize(&output.records, &info);
                let latency = summary.request_latency.expect("requests completed");
                let task_mean = summary.task_latency.map_or(0.0, |t| t.mean_s);
                if std::env::var("SWEEP_HASH").is_ok() {
                    // FNV-1a of the records as JSON: compares runs byte for byte.
                    let bytes = serde_json::to_vec(&output.records).expect("records serialise");
                    let hash = bytes
                        .iter()
                        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
                    println!("records {policy} {code} {rate}: {hash:016x} ({} events)", output.events);
                }
                println!(
                    "{:>6} {:<10} {:<10} {:>3} {:>6.3} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>7.3} {:>8.4} {:>9.1} {:>6.3}",
                    rate,
                    code,
                    policy.name(),
                    output.frontends,
                    summary.utilisation_mean.unwrap_or(0.0),
                    latency.mean_s,
                    latency.min_s,
                    latency.median_s,
                    latency.p95_s,
                    latency.p99_s,
                    latency.max_s,
                    task_mean,
                    summary.probes_per_s.unwrap_or(0.0),
                    summary.degraded_fraction.unwrap_or(0.0)
                );
            }
        }
    }
}

/// Sets `field` from the environment variable `name` when it is set (panics on a value that does
/// not parse: this is an exploring tool).
fn set_from_env<T: std::str::FromStr>(name: &str, field: &mut T) {
    if let Ok(value) = std::env::var(name) {
        *field = value.parse().unwrap_or_else(|_| panic!("{name}={value} does not parse"));
    }
}
