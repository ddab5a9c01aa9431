//! Explores the live experiment's regime in its simulated stand-in (the cluster `regime::fit`
//! simulates: 30 nodes, 3 asynchronous-probing frontends, loopback network, objects packed into
//! 1 MiB units): every live policy on both codes at the given service scales, with Normal's shape
//! loss and LMLF-PW2's cuts of p50 and p95 against Normal. No process is started.
//!
//! `cargo run --release -p experiment --example stand_in -- [scales,comma,separated]`
//! e.g. `-- 2.0,2.5` with optional `STAND_IN_ZIPF`, `STAND_IN_MAX_BYTES`, `STAND_IN_RATE`,
//! `STAND_IN_DURATION_S`, `STAND_IN_OBJECTS`, `STAND_IN_TIMEOUT_MS`, `STAND_IN_SEED`,
//! `STAND_IN_COUNT_OVERHEAD` (whether the policies count per-task overhead in load: the live
//! experiment's [`live::policy_settings`] do), `STAND_IN_MARGINAL_LOAD` (`bytes` or `drain-time`,
//! what the LMLF policies charge a task for), `STAND_IN_BASE_OVERHEAD_US` and `STAND_IN_BASE_RATE`
//! (the emulated node at scale 1: per-task µs and bytes per second).
//!
//! With `STAND_IN_SLOW=1` it also runs the live experiment's slow-node runs in the stand-in: the
//! most-read node [`live::SLOW_FACTOR`] times slower from [`live::SLOW_AFTER_FRACTION`] of the run,
//! for each of [`live::SLOW_POLICIES`], and prints each one's p99 over its healthy p99, both over
//! the requests that arrived from the slowdown on (as the live experiment's `slow_node.json`).

use experiment::fit::{PAPER_NORMAL, log_errors};
use experiment::live::{self, regime};
use load::source::{LiveCaps, WorkloadSource, build_live_workload};
use policy::PolicyKind;

fn main() -> anyhow::Result<()> {
    let scales: Vec<f64> = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "2.625".into())
        .split(',')
        .map(|s| s.parse().expect("a scale"))
        .collect();
    let seed: u64 = env_or("STAND_IN_SEED", 1);
    let caps = LiveCaps {
        seed: Some(seed),
        duration_s: Some(env_or("STAND_IN_DURATION_S", live::DURATION_S)),
        rate_per_s: Some(env_or("STAND_IN_RATE", live::RATE_PER_S)),
        quick: false,
        max_object_bytes: env_or("STAND_IN_MAX_BYTES", live::MAX_OBJECT_BYTES),
        max_objects: env_or("STAND_IN_OBJECTS", live::OBJECTS),
        time_scale: None,
        zipf_exponent: Some(env_or("STAND_IN_ZIPF", experiment::hu2017::HEADLINE_ZIPF_EXPONENT)),
    };
    let workload = build_live_workload(&WorkloadSource::Generator, &caps)?.workload;
    let stand_in = regime::packed_stand_in(&workload, live::UNIT_BYTES, live::GATEWAYS)?;
    println!("{} requests, {} units", stand_in.requests.len(), stand_in.partitions);
    println!(
        "{:>6} {:<10} {:<10} {:>6} {:>8} {:>8} {:>8} {:>8}",
        "scale", "code", "policy", "load", "p50_ms", "p95_ms", "p99_ms", "max_ms"
    );
    // The ground the regime fit runs Normal on: per code, the same placement at every scale.
    let exponent = caps.zipf_exponent.expect("set above");
    let ground = regime::Ground::stand_in(seed, exponent, &stand_in, live::NODES, live::GATEWAYS)?;
    for &scale in &scales {
        let mut loss = 0.0;
        for (paper, (cluster, workload)) in PAPER_NORMAL.iter().zip(&ground.per_code) {
            let mut config = regime::stand_in_config(seed, paper.code, scale, live::NODES, live::GATEWAYS);
            config.policy.normal_timeout_ms = env_or("STAND_IN_TIMEOUT_MS", config.policy.normal_timeout_ms);
            config.policy.count_task_overhead = env_or("STAND_IN_COUNT_OVERHEAD", config.policy.count_task_overhead);
            config.policy.marginal_load = env_or("STAND_IN_MARGINAL_LOAD", config.policy.marginal_load);
            // Another emulated node at scale 1 (the live experiment's is `regime::BASE_*`).
            let base_overhead_us: f64 = env_or("STAND_IN_BASE_OVERHEAD_US", regime::BASE_OVERHEAD_US);
            let base_rate_bytes_per_s: f64 = env_or("STAND_IN_BASE_RATE", regime::BASE_RATE_BYTES_PER_S);
            config.cluster.task_overhead_us = (base_overhead_us * scale).round() as u64;
            config.cluster.rate_bytes_per_s = (base_rate_bytes_per_s / scale).round() as u64;
            let cluster = regime::at_rate(cluster, &config);
            let mut normal = None;
            // The slow-node ratios compare the requests that arrived from the slowdown on, in both
            // runs, as the live experiment's do.
            let slowed_at_s = caps.duration_s.expect("set above") * live::SLOW_AFTER_FRACTION;
            let since_ns = (slowed_at_s * 1e9).round() as u64;
            let mut healthy_p99_s = Vec::new();
            for policy in live::POLICIES {
                let output = sim::run(&config, &cluster, policy, workload);
                let summary = report::summarize(&output.records, &experiment::run_info(&config, &output, None));
                let latency = summary.request_latency.expect("requests completed");
                println!(
                    "{scale:>6} {:<10} {:<10} {:>6.3} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
                    paper.code,
                    policy.name(),
                    summary.utilisation_mean.unwrap_or(0.0),
                    latency.median_s * 1e3,
                    latency.p95_s * 1e3,
                    latency.p99_s * 1e3,
                    latency.max_s * 1e3
                );
                let window_p99_s = live::latency_p99_since_s(output.records.requests(), since_ns);
                healthy_p99_s.push((policy, window_p99_s.unwrap_or(f64::NAN)));
                match policy {
                    PolicyKind::Normal => {
                        let code_loss = log_errors(&latency, paper).iter().map(|e| e * e).sum::<f64>();
                        println!("       {:<10} Normal's shape loss {code_loss:.3}", paper.code);
                        loss += code_loss;
                        normal = Some(latency);
                    }
                    PolicyKind::LmlfPw2 => {
                        let normal = normal.as_ref().expect("Normal runs first");
                        println!(
                            "       {:<10} LMLF-PW2 vs Normal: p50 {:+.1} %, p95 {:+.1} %",
                            paper.code,
                            100.0 * (latency.median_s / normal.median_s - 1.0),
                            100.0 * (latency.p95_s / normal.p95_s - 1.0)
                        );
                    }
                    _ => {}
                }
            }
            if env_or("STAND_IN_SLOW", 0) == 1 {
                let node = live::hottest_node(&cluster.placement, workload);
                let mut slowed = config.clone();
                slowed.cluster.slow_node = Some(live::sim_slow_node(node, slowed_at_s, live::SLOW_FACTOR));
                for policy in live::SLOW_POLICIES {
                    let output = sim::run(&slowed, &cluster, policy, workload);
                    let p99_s = live::latency_p99_since_s(output.records.requests(), since_ns).unwrap_or(f64::NAN);
                    let from_ns = slowed.cluster.slow_node.expect("set above").from_ms * 1_000_000;
                    let tail = tail_causes(&output.records, node, from_ns, (p99_s * 1e9) as u64);
                    let healthy = healthy_p99_s.iter().find(|(p, _)| *p == policy).map_or(f64::NAN, |(_, h)| *h);
                    println!(
                        "       {:<10} {:<10} node {} {}x slower: p99 from then on {:.1} ms, x{:.2} of healthy {:.1} ms",
                        paper.code,
                        policy.name(),
                        node.0,
                        live::SLOW_FACTOR,
                        p99_s * 1e3,
                        p99_s / healthy,
                        healthy * 1e3
                    );
                    println!("       {:<10} {:<10} requests at or over that p99: {tail}", "", "");
                }
            }
        }
        println!("       scale {scale}: Normal's shape loss {loss:.3}");
    }
    Ok(())
}

/// Why the requests at or over `p99_ns` were slow: whether a task they waited for ran on the
/// slowed `node`, as their normal read or as a helper of a degraded read, and whether it reached
/// the node before the slowdown (`from_ns`).
fn tail_causes(records: &model::RecordLog, node: model::NodeId, from_ns: u64, p99_ns: u64) -> String {
    let (mut normal_before, mut normal_after, mut helper, mut elsewhere) = (0, 0, 0, 0);
    for record in records.iter().filter(|r| r.request.latency_ns() >= p99_ns) {
        let on_slow = record.tasks.iter().find(|t| t.node == node && !t.cancelled && t.finish_ns != model::NEVER);
        match on_slow {
            Some(task) if task.role == model::TaskRole::Normal && task.enqueue_ns < from_ns => normal_before += 1,
            Some(task) if task.role == model::TaskRole::Normal => normal_after += 1,
            Some(_) => helper += 1,
            None => elsewhere += 1,
        }
    }
    format!(
        "normal read on the slowed node queued before it slowed {normal_before}, after {normal_after}; \
         helper on it {helper}; not on it {elsewhere}"
    )
}

/// `name` from the environment, or `default` (panics on a value that does not parse: this is an
/// exploring tool).
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}={v} does not parse")))
}
