//! The metadata store lost whole, scripted (`lowtail-swarm meta-rebuild`): objects written to a
//! default `lowtail up`, some deleted, the cluster stopped, `meta.redb` deleted, then `lowtail admin
//! meta rebuild` restores it from the nodes and every acknowledged object is read back. Reports the
//! objects recovered of those written and the rebuild's time, per million objects.
//!
//! Owns the script and its report. Must not count an object recovered unless its bytes read back.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use aws_sdk_s3::primitives::ByteStream;
use serde::Serialize;
use serde_json::Value;

use crate::cluster::Cluster;
use crate::model::body_bytes;
use crate::scenario::{BUCKET, ScenarioSettings, client_of, cluster_settings, finish, runtime};

/// What [`lost_store`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct RebuildScenarioReport {
    /// Objects written and acknowledged.
    pub written: u64,
    /// Of those, deleted before the store was lost (a delete after the newest snapshot may bring
    /// an object back: counted apart).
    pub deleted: u64,
    /// Live objects that read back identical after the rebuild.
    pub recovered: u64,
    /// Deleted objects that came back.
    pub deleted_but_back: u64,
    /// Seconds `lowtail admin meta rebuild` took (nodes started and stopped included).
    pub rebuild_s: f64,
    /// The same per million objects written.
    pub rebuild_s_per_million_objects: f64,
    /// The rebuild's own report.
    pub rebuild: Value,
    /// Examples of objects not recovered.
    pub examples: Vec<String>,
}

fn size_of(index: u64, max_bytes: u64) -> u64 {
    // Mostly small (packed) objects, every 16th striped.
    if index % 16 == 15 { (max_bytes / 2) + index % 1000 } else { 1024 + (index * 7919) % 8192 }
}

/// Writes `objects` objects with `settings.clients` clients, deletes every tenth, lets the cluster
/// run `settle` more (a metadata snapshot taken meanwhile knows the deletes), loses the store and
/// rebuilds it.
pub fn lost_store(
    settings: &ScenarioSettings,
    (objects, max_bytes): (u64, u64),
    settle: std::time::Duration,
) -> anyhow::Result<RebuildScenarioReport> {
    let mut cluster = Cluster::start(cluster_settings(settings, 9))?;
    let runtime = runtime()?;
    let client = client_of(&cluster);
    runtime.block_on(client.create_bucket().bucket(BUCKET).send())?;
    let written = runtime.block_on(write_all(&client, objects, max_bytes, settings.clients))?;
    let deleted: Vec<u64> = (0..objects).filter(|index| index % 10 == 3).collect();
    for &index in &deleted {
        runtime.block_on(client.delete_object().bucket(BUCKET).key(key(index)).send())?;
    }
    println!("{written} objects written, {} deleted; running {} s more", deleted.len(), settle.as_secs());
    std::thread::sleep(settle);
    let snapshots = cluster.status().map(|status| status["meta_snapshots"].clone()).unwrap_or_default();
    println!("stopping the cluster and deleting meta.redb (snapshots: {snapshots})");
    cluster.stop();
    let cluster_dir = settings.dir.canonicalize()?.join("cluster");
    std::fs::remove_file(cluster_dir.join("meta").join("meta.redb"))?;
    let started = Instant::now();
    let output = Command::new(&settings.lowtail)
        .args(["admin", "meta", "rebuild", "--json", "--dir"])
        .arg(&cluster_dir)
        .output()?;
    let rebuild_s = started.elapsed().as_secs_f64();
    anyhow::ensure!(output.status.success(), "rebuild failed: {}", String::from_utf8_lossy(&output.stderr));
    let rebuild: Value = serde_json::from_slice(&output.stdout)?;
    println!("rebuilt in {rebuild_s:.1} s: {rebuild}");
    cluster.restart_gateway(0)?;
    let client = client_of(&cluster);
    let (recovered, back, examples) = runtime.block_on(read_all(&client, objects, max_bytes, &deleted));
    finish(cluster, settings);
    Ok(RebuildScenarioReport {
        written,
        deleted: deleted.len() as u64,
        recovered,
        deleted_but_back: back,
        rebuild_s,
        rebuild_s_per_million_objects: rebuild_s / written.max(1) as f64 * 1e6,
        rebuild,
        examples,
    })
}

fn key(index: u64) -> String {
    format!("m/{index:08}")
}

async fn write_all(client: &aws_sdk_s3::Client, objects: u64, max_bytes: u64, clients: usize) -> anyhow::Result<u64> {
    let next = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..clients.max(1))
        .map(|_| {
            let (client, next) = (client.clone(), Arc::clone(&next));
            tokio::spawn(async move {
                // Bounded: each pass takes the next index until all are taken.
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= objects {
                        return Ok::<_, anyhow::Error>(());
                    }
                    let body = ByteStream::from(body_bytes(index, size_of(index, max_bytes)));
                    client.put_object().bucket(BUCKET).key(key(index)).body(body).send().await?;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(objects)
}

/// Live objects read back identical, deleted ones that answered, and examples of failures.
async fn read_all(
    client: &aws_sdk_s3::Client,
    objects: u64,
    max_bytes: u64,
    deleted: &[u64],
) -> (u64, u64, Vec<String>) {
    let (mut recovered, mut back, mut examples) = (0, 0, Vec::new());
    for index in 0..objects {
        let got = client.get_object().bucket(BUCKET).key(key(index)).send().await;
        let bytes = match got {
            Ok(answer) => answer.body.collect().await.map(|body| body.into_bytes()).ok(),
            Err(_) => None,
        };
        if deleted.binary_search(&index).is_ok() {
            back += u64::from(bytes.is_some());
            continue;
        }
        if bytes.as_deref() == Some(body_bytes(index, size_of(index, max_bytes)).as_slice()) {
            recovered += 1;
        } else if examples.len() < 10 {
            examples.push(key(index));
        }
    }
    (recovered, back, examples)
}
