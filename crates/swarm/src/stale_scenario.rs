//! Issue 52's stale return, scripted (`lowtail-swarm stale-return`): a node's data directory copied
//! aside while it is stopped, the node back, keys overwritten and deleted (repair runs), then the
//! node returns with the old copy. The census must count what the returned node lacks before it
//! says no stripe is short; once repair is done, three more nodes are killed and every key must
//! read back as last written (deleted ones stay deleted).
//!
//! Owns the script and its report. Must not relax a check: every count comes from the clients'
//! answers and the gateway's status as an operator reads it.

use std::time::{Duration, Instant};

use aws_sdk_s3::primitives::ByteStream;
use serde::Serialize;
use serde_json::Value;

use crate::cluster::{Cluster, copy_directory};
use crate::model::body_bytes;
use crate::scenario::{BUCKET, ScenarioSettings, client_of, cluster_settings, finish, runtime, wait_until_whole};

/// The node returned stale.
const STALE_NODE: u32 = 5;
/// The nodes killed after the return (never the stale one: it must carry its share).
const KILLED_AFTER: [u32; 3] = [0, 3, 8];

/// What [`stale_return`] saw.
#[derive(Debug, Clone, Serialize)]
pub struct StaleReport {
    /// Keys written, overwritten, deleted.
    pub keys: usize,
    /// Keys overwritten while the copy was aside.
    pub overwritten: usize,
    /// Keys deleted while the copy was aside.
    pub deleted: usize,
    /// Every census the gateway took from the return until none was short: units short.
    pub censuses_after_return: Vec<u64>,
    /// A census that said no stripe was short while the returned node's check had not ended.
    pub zero_before_checked: bool,
    /// The gateway's check of the returned node (`directories.last_checks`).
    pub check: Value,
    /// Seconds from the return until no stripe was short.
    pub whole_after_s: f64,
    /// Keys unreadable or wrong with three more nodes killed.
    pub lost_after_three_more: usize,
    /// Examples of what went wrong.
    pub examples: Vec<String>,
}

/// The object of `key` at `version` (its bytes, from its own seed).
fn body(key: usize, version: u64) -> Vec<u8> {
    let size = [3000u64, 40_000, 700_000, 3 << 20][key % 4] + key as u64;
    body_bytes(version * 1_000_000 + key as u64, size)
}

fn key_name(key: usize) -> String {
    format!("stale/{key:03}")
}

/// Runs the script with `keys` keys on a cluster of 10 nodes.
pub fn stale_return(settings: &ScenarioSettings, keys: usize) -> anyhow::Result<StaleReport> {
    let mut cluster = Cluster::start(cluster_settings(settings, 10))?;
    let runtime = runtime()?;
    let client = client_of(&cluster);
    runtime.block_on(client.create_bucket().bucket(BUCKET).send())?;
    let mut versions: Vec<Option<u64>> = vec![Some(1); keys];
    runtime.block_on(write_keys(&client, (0..keys).map(|key| (key, 1))))?;
    let data_dir = cluster.manifest().nodes[STALE_NODE as usize].data_dir.clone();
    let aside = settings.dir.with_extension("node-copy");
    println!("stopping node {STALE_NODE}, copying its directory aside, starting it again");
    cluster.kill_node(STALE_NODE);
    copy_directory(&data_dir, &aside)?;
    cluster.restart_node(STALE_NODE)?;
    wait_until_whole(&cluster, Duration::from_secs(120))?;
    let overwritten: Vec<usize> = (0..keys).filter(|key| key % 2 == 0).collect();
    let deleted: Vec<usize> = (0..keys).filter(|key| key % 8 == 1).collect();
    runtime.block_on(write_keys(&client, overwritten.iter().map(|&key| (key, 2))))?;
    for &key in &overwritten {
        versions[key] = Some(2);
    }
    for &key in &deleted {
        runtime.block_on(client.delete_object().bucket(BUCKET).key(key_name(key)).send())?;
        versions[key] = None;
    }
    wait_until_whole(&cluster, Duration::from_secs(120))?;
    println!("node {STALE_NODE} returns with the copy taken before {} overwrites", overwritten.len());
    cluster.kill_node(STALE_NODE);
    copy_directory(&aside, &data_dir)?;
    let returned = Instant::now();
    let returned_ms = unix_ms();
    cluster.restart_node(STALE_NODE)?;
    let (censuses, zero_before_checked, check) = watch_return(&cluster, returned_ms)?;
    let whole_after_s = returned.elapsed().as_secs_f64();
    println!("census after the return (units short, each scan): {censuses:?}; the check: {check}");
    for node in KILLED_AFTER {
        println!("killing node {node}");
        cluster.kill_node(node);
    }
    let (lost, examples) = runtime.block_on(count_wrong(&client, &versions));
    println!("three more nodes down: {lost} of {keys} keys unreadable or wrong");
    let _ = std::fs::remove_dir_all(&aside);
    finish(cluster, settings);
    Ok(StaleReport {
        keys,
        overwritten: overwritten.len(),
        deleted: deleted.len(),
        censuses_after_return: censuses,
        zero_before_checked,
        check,
        whole_after_s,
        lost_after_three_more: lost,
        examples,
    })
}

async fn write_keys(client: &aws_sdk_s3::Client, keys: impl Iterator<Item = (usize, u64)>) -> anyhow::Result<()> {
    for (key, version) in keys {
        let bytes = ByteStream::from(body(key, version));
        client.put_object().bucket(BUCKET).key(key_name(key)).body(bytes).send().await?;
    }
    Ok(())
}

/// Follows the census from the return until no stripe is short (at most two minutes): the units
/// short at each census taken after the return, whether one said 0 before the returned node's
/// check ended (its admission recorded), and the check's report.
fn watch_return(cluster: &Cluster, returned_ms: u64) -> anyhow::Result<(Vec<u64>, bool, Value)> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut censuses = Vec::new();
    let mut last_counted = 0;
    let mut zero_before_checked = false;
    loop {
        anyhow::ensure!(Instant::now() < deadline, "still short two minutes after the return: {censuses:?}");
        std::thread::sleep(Duration::from_millis(50));
        let Ok(status) = cluster.status() else { continue };
        let census = &status["repair"]["census"];
        let counted = census["counted_at_ms"].as_u64().unwrap_or(0);
        if counted <= returned_ms || counted == last_counted {
            continue;
        }
        last_counted = counted;
        let short: u64 = census["by_units_short"]
            .as_object()
            .map(|by| {
                by.iter()
                    .map(|(units, stripes)| units.parse::<u64>().unwrap_or(0) * stripes.as_u64().unwrap_or(0))
                    .sum()
            })
            .unwrap_or(0);
        censuses.push(short);
        let node = status["nodes"].as_array().and_then(|nodes| nodes.iter().find(|n| n["id"] == STALE_NODE));
        let admitted_ms = node.and_then(|n| n["directory"]["admitted_ms"].as_u64()).unwrap_or(0);
        let checked = admitted_ms > returned_ms && admitted_ms <= counted;
        if short == 0 && census["complete"] == true {
            zero_before_checked |= !checked;
            if checked {
                let check = status["directories"]["last_checks"].clone();
                return Ok((censuses, zero_before_checked, check));
            }
        }
    }
}

/// Keys whose read does not answer what was last written (a deleted key must be NoSuchKey).
async fn count_wrong(client: &aws_sdk_s3::Client, versions: &[Option<u64>]) -> (usize, Vec<String>) {
    let mut wrong = Vec::new();
    for (key, version) in versions.iter().enumerate() {
        let got = client.get_object().bucket(BUCKET).key(key_name(key)).send().await;
        let outcome = match (got, version) {
            (Ok(answer), Some(version)) => match answer.body.collect().await.map(|bytes| bytes.into_bytes()) {
                Ok(bytes) if bytes.as_ref() == body(key, *version).as_slice() => None,
                Ok(_) => Some("other bytes".to_string()),
                Err(error) => Some(format!("body: {error}")),
            },
            (Ok(_), None) => Some("a deleted key answered".to_string()),
            (Err(error), None) if bench::s3_client::error_text(&error).contains("NoSuchKey") => None,
            (Err(error), _) => Some(bench::s3_client::error_text(&error)),
        };
        if let Some(what) = outcome {
            wrong.push(format!("{}: {what}", key_name(key)));
        }
    }
    (wrong.len(), wrong.into_iter().take(10).collect())
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}
