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
    gateway_http(&manifest).context("cluster.json names no gateway")
}

/// The gateway's HTTP endpoint (`http://host:port`, where its metrics and admin calls are) as a
/// manifest names it.
pub fn gateway_http(manifest: &Manifest) -> Option<String> {
    manifest.gateway.as_ref().map(|gateway| gateway.metrics.trim_end_matches("/metrics").to_string())
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
    let now = gateway::data::cluster::membership::unix_now_ms();
    gateway::data::cluster::membership::register_node(&*store, meta::NodeId(id), address, rack, 0, now)
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
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    text.push_str(&render_redundancy(&status["repair"], nodes, now_ms));
    text.push_str(&render_scrub(&status["repair"]["scrub"], now_ms));
    text.push_str(&render_pending(&status["pending"], now_ms));
    text.push_str(&render_classes(&status["classes"]));
    text.push_str(&render_metadata(status, now_ms));
    for section in ["orphans", "stripe_gc", "releases"] {
        if let Some(fields) = status[section].as_object() {
            text.push_str(&format!("{section}:\n"));
            for (name, value) in fields {
                text.push_str(&format!("  {name}: {value}\n"));
            }
        }
    }
    Ok(text)
}

/// The metadata's health: damaged records, the newest snapshot on the nodes, nodes whose directory
/// is being checked or was refused.
fn render_metadata(status: &Value, now_ms: u64) -> String {
    let mut text = String::new();
    let damaged = status["meta_damage"]["damaged_records"].as_u64().unwrap_or(0);
    if damaged > 0 {
        let keys: Vec<&str> =
            status["meta_damage"]["keys"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        text.push_str(&format!(
            "metadata: {damaged} damaged records ({}); rebuild with `lowtail admin meta rebuild --replace`\n",
            keys.join(", ")
        ));
    }
    match status["meta_snapshots"].as_array().and_then(|list| list.last()) {
        Some(newest) => {
            let age_s = now_ms.saturating_sub(newest["label"]["taken_ms"].as_u64().unwrap_or(0)) / 1000;
            text.push_str(&format!("metadata snapshot on the nodes: {age_s} s old, {} bytes\n", newest["size_bytes"]));
        }
        None if status["meta_snapshots"].is_array() => text.push_str("metadata snapshot on the nodes: none yet\n"),
        None => {}
    }
    for checking in status["directories"]["checking"].as_array().into_iter().flatten() {
        text.push_str(&format!("node {checking}: its units are being checked (it returned with another directory)\n"));
    }
    for refused in status["directories"]["refused"].as_array().into_iter().flatten() {
        text.push_str(&format!("node {} refused: {}\n", refused[0], refused[1].as_str().unwrap_or("?")));
    }
    text
}

/// `lowtail admin class show`'s text for the gateway at `base`: every class with its counters,
/// the access keys' entitlements and the nodes told the scheduling.
pub fn render_classes_view(base: &str, view: &gateway::class_admin::ClassesView) -> String {
    let report = &view.report;
    let mut text = format!(
        "{base}: {} classes, {} scheduling, default class {}\n",
        report.classes.len(),
        report.scheduling.name(),
        report.default_class
    );
    for class in &report.classes {
        let share = class.share.map(|share| format!(", share {share}")).unwrap_or_default();
        text.push_str(&format!(
            "  class {} {} (weight {}{share}): {} requests, {} bytes, mean {:.2} ms\n",
            class.class, class.name, class.weight, class.requests, class.bytes, class.mean_latency_ms
        ));
    }
    text.push_str(&format!(
        "  refused: {} above their entitlement, {} naming no class run here\n",
        report.refused_denied, report.refused_invalid
    ));
    for key in &view.access_keys {
        text.push_str(&format!("  access key {}: class {} ({})\n", key.access_key, key.class, key.source));
    }
    let nodes: Vec<String> = view.nodes_scheduled.iter().map(ToString::to_string).collect();
    text.push_str(&format!(
        "  nodes told the scheduling: {}\n",
        if nodes.is_empty() { "none".into() } else { nodes.join(", ") }
    ));
    for (rack, shares) in &view.solved_shares {
        let shares: Vec<String> = shares.iter().map(|share| format!("{share:.3}")).collect();
        text.push_str(&format!("  rack {rack}: solved shares {} (by class)\n", shares.join(" / ")));
    }
    text
}

/// The latency classes and what this gateway served in each; nothing for the one class of a
/// gateway without classes, unless it refused requests over their class header.
fn render_classes(classes: &Value) -> String {
    let Some(list) = classes["classes"].as_array() else { return String::new() };
    let count = |value: &Value, field: &str| value[field].as_u64().unwrap_or(0);
    let (denied, invalid) = (count(classes, "refused_denied"), count(classes, "refused_invalid"));
    if list.len() <= 1 && denied + invalid == 0 {
        return String::new();
    }
    let mut text = format!(
        "latency classes ({} scheduling, default class {}):
",
        classes["scheduling"].as_str().unwrap_or("?"),
        count(classes, "default_class")
    );
    for class in list {
        text.push_str(&format!(
            "  class {} {:<10} {} requests, {:.1} MiB, mean {:.2} ms
",
            count(class, "class"),
            class["name"].as_str().unwrap_or("?"),
            count(class, "requests"),
            count(class, "bytes") as f64 / f64::from(1 << 20),
            class["mean_latency_ms"].as_f64().unwrap_or(0.0),
        ));
    }
    if denied + invalid > 0 {
        text.push_str(&format!(
            "  refused: {denied} above their entitlement, {invalid} naming no class run here
"
        ));
    }
    text
}

/// This gateway's writes acknowledged early (a bucket's write ack rule below `all`): what is still
/// landing, and what landed or failed since start. Nothing when none was ever acknowledged early.
fn render_pending(pending: &Value, now_ms: u64) -> String {
    let count = |field: &str| pending[field].as_u64().unwrap_or(0);
    if count("stripes_acked_early") == 0 && count("refused_full") == 0 {
        return String::new();
    }
    let oldest = pending["oldest_acked_ms"]
        .as_u64()
        .map(|ms| format!(", the oldest acknowledged {}", when(ms, now_ms)))
        .unwrap_or_default();
    format!(
        "writes acknowledged early (here): {} stripes still landing ({:.1} MiB){oldest}; since start {} stripes, {} units landed after, {} failed (left to repair), {} waited for every unit (pending.max_stripes in flight)\n",
        count("stripes_in_flight"),
        count("bytes_in_flight") as f64 / f64::from(1 << 20),
        count("stripes_acked_early"),
        count("units_landed"),
        count("units_failed"),
        count("refused_full"),
    )
}

/// `ms` as a span people read: `40 s`, `5 min`, `3 h`, `2 d`.
fn span(ms: u64) -> String {
    match ms / 1000 {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s if s < 172_800 => format!("{} h", s / 3600),
        s => format!("{} d", s / 86_400),
    }
}

/// Unix ms as a date, and how long ago.
fn when(at_ms: u64, now_ms: u64) -> String {
    let date = httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_millis(at_ms));
    format!("{date} ({} ago)", span(now_ms.saturating_sub(at_ms)))
}

/// The `units short → stripes` map as words: `8 short 1 unit, 4 short 2 units`.
fn by_units_short(census: &Value) -> String {
    let Some(map) = census["by_units_short"].as_object() else { return String::new() };
    map.iter()
        .map(|(units, stripes)| {
            let plural = if units == "1" { "" } else { "s" };
            format!("{stripes} short {units} unit{plural}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The repair section in words: how many stripes are short of their units and by how much, since
/// when, which nodes are down and when repair moves their units, why repair is not progressing,
/// and what it has done.
fn render_redundancy(repair: &Value, nodes: &[Value], now_ms: u64) -> String {
    let mut text = String::new();
    let census = &repair["census"];
    if census.is_null() {
        let holder = repair["lease_holder"].as_str().unwrap_or("(none yet)");
        text.push_str(&format!("redundancy: counted by the repair lease holder, gateway {holder}: ask it\n"));
    } else {
        let stripes = census["stripes_under_redundant"].as_u64().unwrap_or(0);
        let counted = census["counted_at_ms"].as_u64().unwrap_or(0);
        let partial =
            if census["complete"].as_bool() == Some(false) { " (at least: the count was cut short)" } else { "" };
        if stripes == 0 {
            text.push_str(&format!(
                "redundancy: every stripe has all its units (counted {} ago){partial}\n",
                span(now_ms.saturating_sub(counted))
            ));
        } else {
            text.push_str(&format!(
                "redundancy: {stripes} stripes under-redundant{partial}: {}\n",
                by_units_short(census)
            ));
            if let Some(oldest) = census["oldest_degraded_since_ms"].as_u64() {
                let missing = census["stripes_missing_units"].as_u64().unwrap_or(0);
                text.push_str(&format!("  {missing} with units missing, the oldest since {}\n", when(oldest, now_ms)));
            }
            let pending = census["stripes_pending"].as_u64().unwrap_or(0);
            if pending > 0 {
                let bytes = census["bytes_pending"].as_u64().unwrap_or(0);
                let oldest = census["oldest_pending_since_ms"].as_u64().map(|ms| when(ms, now_ms)).unwrap_or_default();
                text.push_str(&format!(
                    "  {pending} acknowledged early, {:.1} MiB still landing, the oldest since {oldest}\n",
                    bytes as f64 / f64::from(1 << 20)
                ));
            }
            let on_down = census["stripes_on_unavailable_nodes"].as_u64().unwrap_or(0);
            if on_down > 0 {
                text.push_str(&format!("  {on_down} with units on nodes that are not Up\n"));
            }
        }
        let garbage = census["stripes_unreadable_unreferenced"].as_u64().unwrap_or(0);
        if garbage > 0 {
            text.push_str(&format!(
                "  and {garbage} unreadable stripes that nothing references: garbage the unreferenced-stripe collector deletes\n"
            ));
        }
    }
    for node in nodes.iter().filter(|n| n["state"] == "Down") {
        let since = node["down_since_ms"].as_u64().map(|ms| format!(" since {}", when(ms, now_ms))).unwrap_or_default();
        let waiting = repair["nodes_in_grace"].as_array().and_then(|all| all.iter().find(|w| w["node"] == node["id"]));
        let plan = match waiting.and_then(|w| w["repair_in_ms"].as_u64()) {
            Some(ms) => format!("its units are rebuilt elsewhere in {} unless it returns", span(ms)),
            None => "past the grace period: its units are rebuilt elsewhere where a node can take them".into(),
        };
        text.push_str(&format!("  node {} is Down{since}; {plan}\n", node["id"]));
    }
    if let Some(blocked) = repair["blocked"].as_array().filter(|b| !b.is_empty()) {
        let up = nodes.iter().filter(|n| n["state"] == "Up").count();
        text.push_str(&format!("  repair is not progressing ({up} nodes Up):\n"));
        for cause in blocked {
            text.push_str(&format!("    {} stripes: {}\n", cause["stripes"], cause["why"].as_str().unwrap_or("?")));
        }
    }
    let count = |field: &str| repair[field].as_u64().unwrap_or(0);
    text.push_str(&format!(
        "repair: {} units rebuilt ({} MiB) in {} stripes since start; {} units recorded missing after reads or scrubs found them bad; {} replicas copied back\n",
        count("units_repaired"),
        count("bytes_repaired") >> 20,
        count("stripes_repaired"),
        count("units_marked_missing"),
        count("replicas_repaired"),
    ));
    if let Some(rate) = repair["read_bytes_per_s"].as_u64() {
        text.push_str(&format!(
            "repair reads at up to {:.1} MiB/s now (clients kept this gateway busy {}% of the last moment)\n",
            rate as f64 / f64::from(1 << 20),
            count("client_busy_pct"),
        ));
    }
    text
}

/// The nodes' scrubbing in words: the oldest last full pass, the pass in progress, what it found.
fn render_scrub(scrub: &Value, now_ms: u64) -> String {
    let Some(nodes) = scrub.as_array().filter(|n| !n.is_empty()) else { return String::new() };
    let unanswered: Vec<String> = nodes
        .iter()
        .filter_map(|n| n["unanswered"].as_str().map(|why| format!("node {} ({why})", n["node"])))
        .collect();
    let unanswered = match unanswered.is_empty() {
        true => String::new(),
        false => format!("scrub: no stats from {}: their corrupt units are unknown\n", unanswered.join(", ")),
    };
    let enabled: Vec<&Value> = nodes.iter().filter(|n| n["enabled"] == true).collect();
    if enabled.is_empty() {
        return unanswered + "scrub: off on every node that answered\n";
    }
    let never = enabled.iter().filter(|n| n["passes_completed"] == 0).count();
    let oldest = enabled.iter().filter_map(|n| n["last_pass_completed_ms"].as_u64()).filter(|&ms| ms > 0).min();
    let mut text = format!("scrub: {} of {} nodes scrubbing", enabled.len(), nodes.len());
    match (oldest, never) {
        (Some(oldest), 0) => {
            text.push_str(&format!("; every node finished a full pass since {}", when(oldest, now_ms)))
        }
        (_, never) => text.push_str(&format!("; {never} still in their first pass")),
    }
    let verified: u64 = enabled.iter().filter_map(|n| n["pass_bytes_verified"].as_u64()).sum();
    let total: u64 = enabled.iter().filter_map(|n| n["pass_bytes_total"].as_u64()).sum();
    if total > 0 {
        text.push_str(&format!("; current passes {:.0} % done", 100.0 * verified.min(total) as f64 / total as f64));
    }
    let found: u64 = nodes.iter().filter_map(|n| n["corrupt_found"].as_u64()).sum();
    let now: u64 = nodes.iter().filter_map(|n| n["corrupt_now"].as_u64()).sum();
    text.push_str(&format!("; {found} units found corrupt in all, {now} awaiting repair\n"));
    unanswered + &text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_metadatas_damage_snapshots_and_node_checks() {
        let status = serde_json::json!({
            "meta_damage": {"damaged_records": 2, "keys": ["object/b/k", "stripe/00000000000000a1"]},
            "meta_snapshots": [{"label": {"taken_ms": 1000, "snapshot_id": 1}, "size_bytes": 5000, "layout": null}],
            "directories": {"checking": [4], "refused": [[7, "the directory belongs to cluster x"]], "last_checks": []},
        });
        let text = render_metadata(&status, 61_000);
        assert!(text.contains("2 damaged records (object/b/k, stripe/00000000000000a1)"), "{text}");
        assert!(text.contains("metadata snapshot on the nodes: 60 s old, 5000 bytes"), "{text}");
        assert!(text.contains("node 4: its units are being checked"), "{text}");
        assert!(text.contains("node 7 refused: the directory belongs to cluster x"), "{text}");
        let healthy = serde_json::json!({"meta_damage": {"damaged_records": 0}, "meta_snapshots": []});
        assert_eq!(render_metadata(&healthy, 0), "metadata snapshot on the nodes: none yet\n");
    }

    #[test]
    fn renders_nodes_and_repair() {
        let status = serde_json::json!({
            "nodes": [
                {"id": 0, "state": "Up", "address": "127.0.0.1:1", "rack": "r0"},
                {"id": 1, "state": "Down", "address": "127.0.0.1:2", "rack": "r1", "down_since_ms": 1_000}
            ],
            "repair": {
                "units_repaired": 3,
                "bytes_repaired": 3 << 20,
                "nodes_in_grace": [{"node": 1, "repair_in_ms": 42_000}],
                "blocked": [{"cause": "no_spare_node", "why": "no Up node can take them", "stripes": 8}],
                "census": {
                    "stripes_under_redundant": 12,
                    "by_units_short": {"1": 8, "2": 4},
                    "stripes_missing_units": 9,
                    "stripes_on_unavailable_nodes": 12,
                    "oldest_degraded_since_ms": 1_000,
                    "stripes_pending": 2,
                    "bytes_pending": 3 << 20,
                    "oldest_pending_since_ms": 1_500,
                    "counted_at_ms": 2_000,
                    "complete": true
                },
                "scrub": [
                    {"node": 0, "enabled": true, "passes_completed": 2, "last_pass_completed_ms": 1_000,
                     "pass_bytes_verified": 50, "pass_bytes_total": 200, "corrupt_found": 1, "corrupt_now": 0},
                    {"node": 2, "enabled": false, "passes_completed": 0, "last_pass_completed_ms": 0,
                     "pass_bytes_verified": 0, "pass_bytes_total": 0, "corrupt_found": 0, "corrupt_now": 0,
                     "unanswered": "connection refused"}
                ]
            },
            "orphans": {"units_deleted": 2},
            "stripe_gc": {"stripes_deleted": 4},
            "releases": {"waiting": 3},
            "policy": {"policy": "lmlf-pw2", "settings": {}},
            "pending": {"stripes_in_flight": 1, "bytes_in_flight": 1 << 20, "oldest_acked_ms": 1_500,
                        "stripes_acked_early": 7, "units_landed": 12, "units_failed": 1, "refused_full": 0}
        });
        let text = render_status(&status).unwrap();
        assert!(text.contains("2 registered, 1 up"), "{text}");
        assert!(text.contains("12 stripes under-redundant: 8 short 1 unit, 4 short 2 units"), "{text}");
        assert!(text.contains("9 with units missing, the oldest since Thu, 01 Jan 1970 00:00:01 GMT"), "{text}");
        assert!(
            text.contains("node 1 is Down since") && text.contains("elsewhere in 42 s unless it returns"),
            "{text}"
        );
        assert!(text.contains("8 stripes: no Up node can take them"), "{text}");
        assert!(text.contains("repair: 3 units rebuilt (3 MiB)"), "{text}");
        assert!(text.contains("2 acknowledged early, 3.0 MiB still landing, the oldest since"), "{text}");
        assert!(
            text.contains("1 stripes still landing (1.0 MiB)") && text.contains("12 units landed after, 1 failed"),
            "{text}"
        );
        assert!(text.contains("every node finished a full pass since") && text.contains("25 % done"), "{text}");
        assert!(text.contains("1 units found corrupt in all, 0 awaiting repair"), "{text}");
        assert!(text.contains("scrub: no stats from node 2 (connection refused)"), "{text}");
        assert!(text.contains("scrub: 1 of 2 nodes scrubbing"), "{text}");
        let whole =
            serde_json::json!({"nodes": [], "repair": {"census": {"stripes_under_redundant": 0, "counted_at_ms": 0}}});
        assert!(render_status(&whole).unwrap().contains("every stripe has all its units"));
        assert!(!render_status(&whole).unwrap().contains("garbage"));
        let garbage = serde_json::json!({"nodes": [], "repair": {"census": {"stripes_under_redundant": 0,
            "counted_at_ms": 0, "stripes_unreadable_unreferenced": 2}}});
        let text_garbage = render_status(&garbage).unwrap();
        assert!(text_garbage.contains("every stripe has all its units"), "{text_garbage}");
        assert!(text_garbage.contains("and 2 unreadable stripes that nothing references: garbage"), "{text_garbage}");
        let other = serde_json::json!({"nodes": [], "repair": {"census": null, "lease_holder": "gw-2"}});
        assert!(render_status(&other).unwrap().contains("gateway gw-2: ask it"));
        assert!(text.contains("orphans:\n  units_deleted: 2"), "{text}");
        assert!(text.contains("stripe_gc:\n  stripes_deleted: 4"), "{text}");
        assert!(text.contains("releases:\n  waiting: 3"), "{text}");
        assert!(text.contains("read policy: lmlf-pw2"), "{text}");
        assert!(render_status(&serde_json::json!({})).is_err());
    }

    #[test]
    fn renders_the_classes_when_there_are_several() {
        let class = |number: u64, name: &str, requests: u64| {
            serde_json::json!({"class": number, "name": name, "weight": 1.0, "share": null,
                               "requests": requests, "bytes": 3 << 20, "mean_latency_ms": 1.5})
        };
        let status = |classes: Vec<Value>, denied: u64| {
            serde_json::json!({"nodes": [], "classes": {"scheduling": "reserved", "default_class": 1,
                               "classes": classes, "refused_denied": denied, "refused_invalid": 0}})
        };
        let text = render_status(&status(vec![class(1, "gold", 7), class(2, "silver", 2)], 1)).unwrap();
        assert!(text.contains("latency classes (reserved scheduling, default class 1):"), "{text}");
        assert!(text.contains("class 1 gold       7 requests, 3.0 MiB, mean 1.50 ms"), "{text}");
        assert!(text.contains("class 2 silver     2 requests"), "{text}");
        assert!(text.contains("refused: 1 above their entitlement, 0 naming no class run here"), "{text}");
        let single = render_status(&status(vec![class(1, "standard", 7)], 0)).unwrap();
        assert!(!single.contains("latency classes"), "one class is no news: {single}");
    }

    #[test]
    fn the_classes_view_lists_the_solved_shares_by_rack() {
        let view = serde_json::json!({"scheduling": "reserved", "default_class": 1, "classes": [],
            "refused_denied": 0, "refused_invalid": 0, "access_keys": [], "nodes_scheduled": [3],
            "solved_shares": {"rack-a": [0.555, 0.445]}});
        let view: gateway::class_admin::ClassesView = serde_json::from_value(view).unwrap();
        let text = render_classes_view("http://gw", &view);
        assert!(text.contains("nodes told the scheduling: 3"), "{text}");
        assert!(text.contains("rack rack-a: solved shares 0.555 / 0.445 (by class)"), "{text}");
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
