//! The scrub scenario: bytes flipped in a parity unit and in a packed object's replica on a real
//! `lowtail up` are found by the nodes' own scrub (no read asks for either), reported in the
//! nodes' metrics and the gateway's status, and rewritten by repair; every object then reads back.
//!
//! Owns that script and its printed result. Must not read the objects before repair is done: a
//! read could find the flipped bytes itself, and the scenario is about the scrub finding them.

use std::time::{Duration, Instant};

use aws_sdk_s3::primitives::ByteStream;
use serde::Serialize;
use serde_json::Value;

use crate::cluster::Cluster;
use crate::model::body_bytes;
use crate::scenario::{
    BUCKET, ScenarioSettings, Stored, client_of, cluster_settings, count_unreadable, finish, key, runtime,
    wait_until_whole,
};
use crate::schedule::UnitKind;

/// Striped objects written (2 MiB each: a full stripe's data units at the default 1 MiB unit size
/// would need 6 MiB, so each is one stripe with units of about 350 KiB).
const STRIPED_OBJECTS: u64 = 8;
/// Packed objects written (3 KiB each): their open stripe keeps a replica of each on a parity node.
const PACKED_OBJECTS: u64 = 16;
/// The metric lines the scenario prints, before and after repair.
const METRIC_NAMES: [&str; 3] =
    ["lowtail_node_corrupt_units", "lowtail_node_scrub_corrupt_found_total", "lowtail_node_scrub_passes_total"];

/// What [`scrub_and_repair`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct ScrubReport {
    /// The unit files flipped, with their node.
    pub flipped: Vec<(u32, String)>,
    /// Seconds from the flips until the nodes' scrub had found both.
    pub found_after_s: f64,
    /// The flipped nodes' metric lines once found (repair may have rewritten the units already:
    /// the corrupt-units gauge is then back at 0).
    pub metrics_when_found: Vec<String>,
    /// Seconds from the flips until repair had rewritten both and no stripe was short.
    pub repaired_after_s: f64,
    /// The same metric lines after repair.
    pub metrics_after_repair: Vec<String>,
    /// The gateway's repair counters afterwards (`GET /admin/status`, `repair` without the census).
    pub repair: Value,
    /// Objects that did not read back byte for byte afterwards.
    pub unreadable: u64,
}

/// Writes objects, flips a byte of one parity unit and of one packed replica, and waits for the
/// scrub (one pass every `pass_interval_s`) to find them and repair to rewrite them.
pub fn scrub_and_repair(settings: &ScenarioSettings, pass_interval_s: u64) -> anyhow::Result<ScrubReport> {
    let mut scrub_settings = settings.clone();
    // Packed stripes stay open (their replicas with them) for the whole scenario.
    scrub_settings.up_toml = format!(
        "{}\n[scrub]\npass_interval_s = {pass_interval_s}\n\n[data.packed]\nseal_after_ms = 600000\n",
        settings.up_toml
    );
    let cluster = Cluster::start(cluster_settings(&scrub_settings, 9))?;
    let stored = write_objects(&cluster)?;
    let flipped = flip_parity_and_replica(&cluster, settings.seed)?;
    println!("flipped a byte in {flipped:?}");
    let flipped_at = Instant::now();
    let timeout = Duration::from_secs(3 * pass_interval_s + 120);
    wait_for(&cluster, timeout, "the scrub to find both flipped units", |status| {
        sum_scrub(status, "corrupt_found") >= flipped.len() as u64
    })?;
    let found_after_s = flipped_at.elapsed().as_secs_f64();
    let metrics_when_found = node_metrics(&cluster, &flipped)?;
    println!("found by the scrub after {found_after_s:.1} s:\n  {}", metrics_when_found.join("\n  "));
    wait_for(&cluster, timeout, "repair to rewrite both", |status| {
        let repair = &status["repair"];
        let rewritten =
            repair["units_repaired"].as_u64().unwrap_or(0) + repair["replicas_repaired"].as_u64().unwrap_or(0);
        rewritten >= flipped.len() as u64 && sum_scrub(status, "corrupt_now") == 0
    })?;
    wait_until_whole(&cluster, timeout)?;
    let repaired_after_s = flipped_at.elapsed().as_secs_f64();
    let metrics_after_repair = node_metrics(&cluster, &flipped)?;
    println!("repaired after {repaired_after_s:.1} s:\n  {}", metrics_after_repair.join("\n  "));
    let mut repair = cluster.status()?["repair"].clone();
    if let Some(fields) = repair.as_object_mut() {
        fields.remove("census");
    }
    let (unreadable, examples) = runtime()?.block_on(count_unreadable(&client_of(&cluster), &stored));
    println!("{unreadable} of {} objects unreadable afterwards {examples:?}", stored.len());
    finish(cluster, settings);
    let flipped = flipped.into_iter().map(|(node, path)| (node, path.display().to_string())).collect();
    Ok(ScrubReport {
        flipped,
        found_after_s,
        metrics_when_found,
        repaired_after_s,
        metrics_after_repair,
        repair,
        unreadable,
    })
}

/// PUTs the striped and the packed objects; all must be acknowledged.
fn write_objects(cluster: &Cluster) -> anyhow::Result<Vec<Stored>> {
    let runtime = runtime()?;
    let client = client_of(cluster);
    runtime.block_on(client.create_bucket().bucket(BUCKET).send())?;
    let sizes = (0..STRIPED_OBJECTS).map(|_| 2u64 << 20).chain((0..PACKED_OBJECTS).map(|_| 3u64 << 10));
    let mut stored = Vec::new();
    for (index, size_bytes) in sizes.enumerate() {
        let index = index as u64;
        let body = ByteStream::from(body_bytes(index, size_bytes));
        runtime.block_on(client.put_object().bucket(BUCKET).key(key(index)).body(body).send())?;
        stored.push(Stored { index, size_bytes });
    }
    Ok(stored)
}

/// Flips a byte in one parity unit and one replica, each on the first node (from a seeded start)
/// that holds one: (node, file) of each.
fn flip_parity_and_replica(cluster: &Cluster, seed: u64) -> anyhow::Result<Vec<(u32, std::path::PathBuf)>> {
    let nodes: Vec<u32> = cluster.manifest().nodes.iter().map(|n| n.id).collect();
    let mut flipped = Vec::new();
    for kind in [UnitKind::Parity, UnitKind::Replica] {
        let start = seed as usize % nodes.len();
        let found = (0..nodes.len()).map(|i| nodes[(start + i) % nodes.len()]).find_map(|node| {
            cluster.corrupt_unit(node, kind, seed, seed.wrapping_mul(7919)).transpose().map(|r| (node, r))
        });
        let (node, path) = found.ok_or_else(|| anyhow::anyhow!("no node holds a {kind:?} unit"))?;
        flipped.push((node, path?));
    }
    Ok(flipped)
}

/// The sum of scrub field `field` over the nodes in a status.
fn sum_scrub(status: &Value, field: &str) -> u64 {
    let nodes = status["repair"]["scrub"].as_array().cloned().unwrap_or_default();
    nodes.iter().filter_map(|node| node[field].as_u64()).sum()
}

/// Polls the gateway's status every 200 ms until `done` holds of it.
fn wait_for(cluster: &Cluster, timeout: Duration, what: &str, done: impl Fn(&Value) -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if cluster.status().is_ok_and(|status| done(&status)) {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "waited {timeout:?} for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The [`METRIC_NAMES`] lines of the nodes in `flipped`, from their Prometheus endpoints.
fn node_metrics(cluster: &Cluster, flipped: &[(u32, std::path::PathBuf)]) -> anyhow::Result<Vec<String>> {
    let mut lines = Vec::new();
    let mut nodes: Vec<u32> = flipped.iter().map(|(node, _)| *node).collect();
    nodes.dedup();
    for entry in cluster.manifest().nodes.iter().filter(|n| nodes.contains(&n.id)) {
        let text = ureq::get(&entry.metrics).call()?.body_mut().read_to_string()?;
        lines.extend(
            text.lines().filter(|line| METRIC_NAMES.iter().any(|name| line.starts_with(name))).map(str::to_string),
        );
    }
    Ok(lines)
}
