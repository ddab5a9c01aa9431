//! `lowtail admin`: asks a running gateway (found through `cluster.json`, or given by address) for
//! the cluster's state and renders it for people; and registers storage nodes of a cluster that was
//! not started by `lowtail up` (`lowtail admin add-node`), in the metadata store a gateway config
//! names, after checking that the node answers with the cluster secret.
//!
//! `lowtail admin policy` finds the gateways and the cluster secret (read from the cluster
//! directory's state) for [`crate::gateway_admin::GatewayAdmin`], which makes the calls.
//!
//! Must not: open the metadata store for status: the running gateway holds it (the embedded store
//! admits one process), and asking the gateway shows what the gateway believes. Registration does
//! open the store (etcd is shared; an embedded store held by a running gateway refuses, clearly).

use crate::manifest::Manifest;
use anyhow::{Context, bail};
use serde_json::Value;
use std::path::Path;

/// The gateway's HTTP endpoint (`http://host:port`) from the manifest of a cluster directory.
pub fn gateway_http_from_dir(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("cluster.json");
    let manifest =
        Manifest::read(&path).with_context(|| format!("no running cluster described by {}", path.display()))?;
    let gateway = manifest.gateway.context("cluster.json names no gateway")?;
    Ok(gateway.metrics.trim_end_matches("/metrics").to_string())
}

/// `GET {base}/admin/status`, as JSON.
pub fn fetch_status(base: &str) -> anyhow::Result<Value> {
    let url = format!("{base}/admin/status");
    let body = ureq::get(&url)
        .call()
        .with_context(|| format!("cannot reach the gateway at {url}; is the cluster running?"))?
        .body_mut()
        .read_to_string()
        .context("reading the gateway's answer")?;
    serde_json::from_str(&body).with_context(|| format!("the gateway at {url} did not answer JSON"))
}

/// How long `add_node` waits for the node to answer its probe.
pub const ADD_NODE_PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Registers storage node `id` at `address` in rack `rack` (as Up) in the metadata store of
/// `gateway` (a gateway's config: its `[meta]` and `data.cluster_secret`), once the node answers a
/// probe with that secret, so a typo or a wrong secret is refused instead of being marked Down
/// later. Registering a known id again updates its address and rack. Returns the stored record.
pub async fn add_node(
    gateway: &gateway::process::GatewayConfig,
    id: u32,
    address: &str,
    rack: &str,
) -> anyhow::Result<meta::NodeInfo> {
    anyhow::ensure!(!gateway.data.cluster_secret.is_empty(), "the gateway config has no data.cluster_secret");
    let probe = async {
        let client = node::NodeClient::connect(address, &gateway.data.cluster_secret).await?;
        client.probe().await
    };
    match tokio::time::timeout(ADD_NODE_PROBE_TIMEOUT, probe).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => bail!("node {id} at {address} does not answer with the cluster secret: {error}"),
        Err(_) => bail!("node {id} at {address} did not answer within {ADD_NODE_PROBE_TIMEOUT:?}"),
    }
    let store = gateway::process::open_meta(&gateway.meta).await?;
    let now = gateway::data::membership::unix_now_ms();
    gateway::data::membership::register_node(&*store, meta::NodeId(id), address, rack, 0, now)
        .await
        .with_context(|| format!("cannot register node {id}"))
}

/// The cluster secret of a `lowtail up` cluster, from its state file (`DIR/cluster.toml`).
pub fn cluster_secret_from_dir(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("cluster.toml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}: is {} a lowtail up cluster?", path.display(), dir.display()))?;
    let state: toml::Table = toml::from_str(&text).with_context(|| format!("{} is not valid TOML", path.display()))?;
    match state.get("cluster_secret").and_then(|v| v.as_str()) {
        Some(secret) if !secret.is_empty() => Ok(secret.to_string()),
        _ => bail!("{} has no cluster_secret", path.display()),
    }
}

/// Renders a status answer as a short report: nodes by state, then repair progress, orphan-unit
/// and unreferenced-stripe collection, released stripes waiting out their delay.
pub fn render_status(status: &Value) -> anyhow::Result<String> {
    let Some(nodes) = status["nodes"].as_array() else { bail!("status has no node list: {status}") };
    let mut text = String::new();
    let up = nodes.iter().filter(|n| n["state"] == "Up").count();
    text.push_str(&format!("nodes: {} registered, {up} up\n", nodes.len()));
    for node in nodes {
        text.push_str(&format!(
            "  node {:>3}  {:<8} {:<22} rack {}\n",
            node["id"],
            node["state"].as_str().unwrap_or("?"),
            node["address"].as_str().unwrap_or("?"),
            node["rack"].as_str().unwrap_or("?"),
        ));
    }
    if let Some(policy) = status["policy"]["policy"].as_str() {
        text.push_str(&format!("read policy: {policy}\n"));
    }
    for section in ["repair", "orphans", "stripe_gc", "releases"] {
        if let Some(fields) = status[section].as_object() {
            text.push_str(&format!("{section}:\n"));
            for (name, value) in fields {
                text.push_str(&format!("  {name}: {value}\n"));
            }
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_nodes_and_repair() {
        let status = serde_json::json!({
            "nodes": [
                {"id": 0, "state": "Up", "address": "127.0.0.1:1", "rack": "r0"},
                {"id": 1, "state": "Down", "address": "127.0.0.1:2", "rack": "r1"}
            ],
            "repair": {"units_repaired": 3},
            "orphans": {"units_deleted": 2},
            "stripe_gc": {"stripes_deleted": 4},
            "releases": {"waiting": 3},
            "policy": {"policy": "lmlf-pw2", "settings": {}}
        });
        let text = render_status(&status).unwrap();
        assert!(text.contains("2 registered, 1 up"), "{text}");
        assert!(text.contains("Down") && text.contains("units_repaired: 3"), "{text}");
        assert!(text.contains("orphans:\n  units_deleted: 2"), "{text}");
        assert!(text.contains("stripe_gc:\n  stripes_deleted: 4"), "{text}");
        assert!(text.contains("releases:\n  waiting: 3"), "{text}");
        assert!(text.contains("read policy: lmlf-pw2"), "{text}");
        assert!(render_status(&serde_json::json!({})).is_err());
    }

    #[test]
    fn the_secret_comes_from_the_state_file_with_clear_errors() {
        let temp = tempfile::tempdir().unwrap();
        let error = cluster_secret_from_dir(temp.path()).unwrap_err().to_string();
        assert!(error.contains("cluster.toml"), "{error}");
        std::fs::write(temp.path().join("cluster.toml"), "code = \"rs-6-3\"\n").unwrap();
        assert!(cluster_secret_from_dir(temp.path()).unwrap_err().to_string().contains("no cluster_secret"));
        std::fs::write(temp.path().join("cluster.toml"), "cluster_secret = \"s3cr3t\"\n").unwrap();
        assert_eq!(cluster_secret_from_dir(temp.path()).unwrap(), "s3cr3t");
    }

    #[test]
    fn a_missing_cluster_is_a_clear_error() {
        let temp = tempfile::tempdir().unwrap();
        let error = gateway_http_from_dir(temp.path()).unwrap_err().to_string();
        assert!(error.contains("cluster.json"), "{error}");
    }
}
