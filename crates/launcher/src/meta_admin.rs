//! The embedded metadata store of a `lowtail up` cluster, for operators: `lowtail admin meta check`
//! (every record's checksum, read from the file), `lowtail admin meta rebuild` (the store rebuilt
//! from the storage nodes, [`gateway::meta_rebuild`]), and the guard that keeps `lowtail up` from
//! starting a fresh, empty store over nodes that hold a cluster's data (whose units the collectors
//! would then take for garbage).
//!
//! Must not: change a store it only checks, or replace one without being told to.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use gateway::meta_rebuild::{RebuildReport, RebuildSource};
use meta::{MetaStore, NodeId, NodeInfo, NodeState, RedbStore};

use crate::state::{ClusterDir, ClusterState};

/// The embedded store's file in a cluster directory.
pub fn store_file(dir: &ClusterDir) -> PathBuf {
    dir.meta_dir().join(meta::DATABASE_FILE_NAME)
}

/// The cluster the nodes' directories were claimed by, if any node's was (read from their
/// `identity.json`).
fn claimed_cluster(dir: &ClusterDir, state: &ClusterState) -> Option<String> {
    state.nodes.iter().find_map(|slot| {
        let path = dir.node_dir(slot.id).join(node::identity::IDENTITY_FILE);
        let text = std::fs::read(&path).ok()?;
        let identity: node::identity::DirectoryIdentity = serde_json::from_slice(&text).ok()?;
        identity.claim.map(|claim| claim.cluster_id)
    })
}

/// Refuses to start a cluster whose metadata store is missing while its nodes hold its data: an
/// empty store would make every unit garbage.
pub fn refuse_a_missing_store(dir: &ClusterDir, state: &ClusterState) -> anyhow::Result<()> {
    if store_file(dir).exists() {
        return Ok(());
    }
    if let Some(cluster) = claimed_cluster(dir, state) {
        bail!(
            "the metadata store {} is missing, but the nodes hold the data of cluster {cluster}: rebuild the store \
             from them with `lowtail admin meta rebuild --dir {}` (docs/durability.md), or move the nodes' \
             directories aside to start an empty cluster",
            store_file(dir).display(),
            dir.root().display()
        );
    }
    Ok(())
}

/// Opens the cluster's store (which checks every record) and reports its damage. Fails while a
/// `lowtail up` holds it (`lowtail admin status` shows a running gateway's damage).
pub fn check(dir: &Path) -> anyhow::Result<meta::integrity::DamageReport> {
    let dir = ClusterDir::new(dir);
    let file = store_file(&dir);
    anyhow::ensure!(file.exists(), "no metadata store at {}", file.display());
    let store = RedbStore::open(dir.meta_dir()).map_err(|error| {
        anyhow::anyhow!(
            "cannot open {}: {error} (a running lowtail up holds it: stop it, or see `lowtail admin status`)",
            file.display()
        )
    })?;
    Ok(store.damage())
}

/// Rebuilds the cluster's metadata store from its nodes (started for the purpose, and stopped
/// after). A store already there is refused unless `replace`, which moves it aside first (to
/// `meta.redb.replaced-<unix ms>`, never deleted).
pub async fn rebuild(dir: &Path, binary: &Path, replace: bool) -> anyhow::Result<RebuildReport> {
    let dir = ClusterDir::new(dir);
    let _lock = dir.lock()?;
    let state = dir.load()?;
    move_aside(&dir, replace)?;
    let nodes = crate::processes::start_nodes(binary, &dir, &state, (&Default::default(), &Default::default())).await?;
    let rebuilt = rebuild_from(&dir, &state, &nodes).await;
    crate::processes::stop_all(nodes).await;
    rebuilt
}

fn move_aside(dir: &ClusterDir, replace: bool) -> anyhow::Result<()> {
    let file = store_file(dir);
    if !file.exists() {
        return Ok(());
    }
    if !replace {
        bail!(
            "{} exists; `lowtail admin meta check` tells whether it is damaged. To rebuild it anyway, pass \
             --replace (it is moved aside, not deleted)",
            file.display()
        );
    }
    let aside = file.with_extension(format!("redb.replaced-{}", gateway::data::cluster::membership::unix_now_ms()));
    std::fs::rename(&file, &aside).with_context(|| format!("cannot move {} aside", file.display()))?;
    eprintln!("moved {} to {}", file.display(), aside.display());
    Ok(())
}

async fn rebuild_from(
    dir: &ClusterDir,
    state: &ClusterState,
    nodes: &[crate::processes::NodeProcess],
) -> anyhow::Result<RebuildReport> {
    let infos: Vec<NodeInfo> = nodes
        .iter()
        .map(|node| NodeInfo {
            id: NodeId(node.slot.id),
            address: node.rpc_addr().map(|a| a.to_string()).unwrap_or_default(),
            rack: node.slot.rack.clone(),
            capacity_bytes: 0,
            state: NodeState::Up,
            last_heartbeat_ms: gateway::data::cluster::membership::unix_now_ms(),
            down_since_ms: None,
            directory: None,
            checking_since_ms: None,
        })
        .collect();
    let data = gateway::data::DataConfig {
        code: state.code.clone(),
        cluster_secret: state.cluster_secret.clone(),
        ..Default::default()
    };
    let target: Arc<dyn MetaStore> = Arc::new(RedbStore::open(dir.meta_dir())?);
    let report = gateway::meta_rebuild::rebuild(RebuildSource { nodes: infos, data }, target)
        .await
        .map_err(|error| anyhow::anyhow!("rebuild failed: {error}"))?;
    Ok(report)
}

/// The report as an operator reads it.
pub fn render_report(report: &RebuildReport) -> String {
    let snapshot = match &report.snapshot {
        Some(label) => format!("snapshot of {} ms ({} records restored)", label.taken_ms, report.snapshot_records),
        None => "no snapshot found: everything from the units' descriptors".to_string(),
    };
    let mut text = format!(
        "rebuilt in {:.1} s from {} nodes ({} did not answer), {} units ({} undescribed)\n\
         {snapshot}\n\
         stripes recorded: {} ({} with units missing, for repair)\n\
         objects: {} from the snapshot, {} written since, {} rewritten from open-stripe replicas; parts: {}\n",
        report.elapsed_ms as f64 / 1000.0,
        report.nodes_listed,
        report.nodes_unanswered.len(),
        report.units_listed,
        report.units_undescribed,
        report.stripes_recorded,
        report.stripes_missing_units,
        report.objects_from_snapshot,
        report.objects_rolled_forward,
        report.objects_rewritten_from_replicas,
        report.parts_rolled_forward,
    );
    for (what, keys) in [
        ("objects dropped (their stripes are gone)", &report.objects_dropped),
        ("objects unreadable", &report.objects_unreadable),
        ("writes not rolled forward (their bytes are lost)", &report.writes_unreadable),
    ] {
        if !keys.is_empty() {
            text.push_str(&format!("{} {what}: {}\n", keys.len(), keys.join(", ")));
        }
    }
    text
}
