//! The fault swarm in CI: two seeds of `lowtail-swarm run` against the `lowtail` binary this build
//! made (real processes on loopback, the AWS SDK as the client), which must find no violation:
//! one on `lowtail up` with its defaults, one on etcd with two gateways and the swarm's fast
//! settings, chosen so that between them every fault kind is drawn (hung nodes, full disks,
//! flipped, torn and truncated units, latency, resets and partitions, gateway kills, etcd stopped
//! and killed, a node returned with an older copy of its directory, a damaged metadata record and
//! the rebuild that repairs it); and a control that shows the checks can fail: with two more nodes
//! faulted than RS(6,3) tolerates, the swarm must report what it cannot read. `scripts/swarm --seeds 100 --parallel 2`
//! runs many more. And the scrub scenario: flipped units found by the nodes' scrub and rewritten
//! by repair.

use std::collections::BTreeSet;
use std::time::Duration;

use swarm::Flavor;
use swarm::run::{RunSettings, run_seed, seed_schedule_settings};
use swarm::schedule::{FaultKind, ScheduleSettings, draw};

/// The seed on `lowtail up` (with its defaults: `Flavor::of(36, true)`) and the seed on etcd.
const UP_SEED: u64 = 36;
const ETCD_SEED: u64 = 34;
/// The control's seed (the swarm's settings on `lowtail up`).
const CONTROL_SEED: u64 = 1;
/// Every kind of fault, as its labels begin.
const KINDS: [&str; 15] = [
    "hang node",
    "fill disk",
    "truncate",
    "tear",
    "flip",
    "slow network",
    "reset connections",
    "partition",
    "kill gateway",
    "kill node",
    "kill etcd",
    "stop etcd",
    "copy node directory aside",
    "return node with its old directory",
    "damage a metadata record",
];

fn settings(work_dir: &std::path::Path, faulty_nodes: u32) -> RunSettings {
    RunSettings {
        schedule: ScheduleSettings {
            nodes: 10,
            epochs: 2,
            epoch_ms: 15_000,
            clients: 4,
            keys_per_client: 12,
            ops_per_client: 10_000,
            faulty_nodes,
            faults_per_epoch: 8,
            kinds: FaultKind::ALL.to_vec(),
            gateways: 1,
            // Short outages keep CI's epochs at 15 s; `lowtail-swarm run` draws up to 35 s.
            longest_fault_ms: 4000,
        },
        lowtail: env!("CARGO_BIN_EXE_lowtail").into(),
        work_dir: work_dir.to_path_buf(),
        quiesce_timeout: Duration::from_secs(120),
        keep: false,
    }
}

/// The labels of every fault the seed's schedule draws.
fn drawn(seed: u64, settings: &RunSettings, flavor: Flavor) -> BTreeSet<String> {
    let schedule = draw(seed, &seed_schedule_settings(&settings.schedule, flavor));
    schedule.epochs.iter().flat_map(|epoch| epoch.faults.iter().map(|timed| timed.fault.label())).collect()
}

#[test]
fn seeded_fault_schedules_violate_no_invariant_and_one_fault_too_many_is_caught() {
    let temp = tempfile::tempdir().unwrap();
    let settings = settings(temp.path(), 3);
    let flavors = [(UP_SEED, Flavor::of(UP_SEED, true)), (ETCD_SEED, Flavor::of(ETCD_SEED, true))];
    assert_eq!(
        flavors.map(|(_, flavor)| flavor),
        [Flavor { defaults: true, etcd: false }, Flavor { defaults: false, etcd: true }]
    );
    let labels: BTreeSet<String> = flavors.iter().flat_map(|&(seed, flavor)| drawn(seed, &settings, flavor)).collect();
    for kind in KINDS {
        assert!(labels.iter().any(|label| label.starts_with(kind)), "CI's seeds draw no {kind}: {labels:?}");
    }
    let mut reports = Vec::new();
    for (seed, flavor) in flavors {
        let report = run_seed(seed, &settings, flavor).unwrap();
        assert!(
            report.violations.is_empty(),
            "seed {seed} (replay: lowtail-swarm run --first-seed {seed} --seeds 1): {:?}",
            report.violations
        );
        let faults: u64 = report.faults.values().sum();
        assert!(faults >= 5 && report.reads_checked > 100, "seed {seed} did too little: {report:?}");
        // The answers' redundancy is read (what excuses a loss the store allowed rests on it).
        assert!(report.acks_by_redundancy.get("full").is_some_and(|&n| n > 0), "seed {seed}: {report:?}");
        assert!(!report.acks_by_redundancy.contains_key("unnamed"), "seed {seed}: {report:?}");
        reports.push(report);
    }
    println!("{}", swarm::report::table(&reports));
    let done: BTreeSet<&String> = reports.iter().flat_map(|report| report.faults.keys()).collect();
    for kind in KINDS {
        assert!(done.iter().any(|label| label.starts_with(kind)), "no {kind} was done: {reports:?}");
    }
    // The control: five nodes faulted and five killed at the end, more than m = 3; one epoch
    // writes enough to lose. (Four was one too few to be sure: a stripe spans 9 of the 10 nodes, so
    // four victims that include the one it skips take only 3 of its units, and with few stripes
    // written every one of them survived in one CI run.)
    let mut control_settings = self::settings(temp.path(), 5);
    control_settings.schedule.epochs = 1;
    let control = run_seed(CONTROL_SEED, &control_settings, Flavor::of(CONTROL_SEED, false)).unwrap();
    assert!(
        control.violations.iter().any(|v| v.contains("read failed") || v.contains("matching no version")),
        "five failures of RS(6,3) leave data unreadable, and the swarm must say so: {:?}",
        control.violations
    );
}

/// `lowtail-swarm scrub`: a flipped parity unit and packed replica are found by the nodes' scrub
/// (their metrics count them) and rewritten by repair; every object reads back.
#[test]
fn scrub_finds_a_flipped_parity_unit_and_replica_and_repair_rewrites_them() {
    let temp = tempfile::tempdir().unwrap();
    let settings = swarm::scenario::ScenarioSettings {
        lowtail: env!("CARGO_BIN_EXE_lowtail").into(),
        dir: temp.path().join("scrub"),
        clients: 1,
        seed: 3,
        up_toml: String::new(),
        keep: false,
    };
    let report = swarm::scrub_scenario::scrub_and_repair(&settings, 5).unwrap();
    assert_eq!(report.flipped.len(), 2, "{report:?}");
    let found_lines =
        report.metrics_after_repair.iter().filter(|l| l.starts_with("lowtail_node_scrub_corrupt_found_total"));
    let found: u64 = found_lines.filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok()).sum();
    assert_eq!(found, 2, "the scrub of the flipped nodes found both: {report:?}");
    assert!(
        report
            .metrics_after_repair
            .iter()
            .filter(|l| l.starts_with("lowtail_node_corrupt_units"))
            .all(|l| l.ends_with(" 0")),
        "the corrupt-units gauges fell back to 0: {report:?}"
    );
    let repair = &report.repair;
    let rewritten = repair["units_repaired"].as_u64().unwrap_or(0) + repair["replicas_repaired"].as_u64().unwrap_or(0);
    assert!(rewritten >= 2, "{repair}");
    assert_eq!(report.unreadable, 0);
}
