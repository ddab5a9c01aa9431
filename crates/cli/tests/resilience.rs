//! Failure tests of a whole cluster through real processes and a real S3 client (the AWS SDK for
//! Rust), as issue 3 asks:
//!
//! - RS(6,3) and LRC(6,2,2): m nodes SIGKILLed in the middle of a concurrent PUT/GET workload; every
//!   acknowledged object reads back identical; once repair has finished, m more nodes are killed and
//!   every object still reads back byte for byte (redundancy was really restored).
//! - A unit flipped on disk: the GET is served by a degraded read, the corruption is counted and the
//!   unit rewritten with the right bytes by repair, and the next GET reads it without decoding.
//!
//! Membership and repair run with short intervals (through `lowtail up --config`) so each test takes
//! seconds, and every wait is a bounded poll of the gateway's state, never a fixed sleep.

mod common;

use aws_sdk_s3::primitives::ByteStream;
use common::{
    admin_status, client, interrupt, kill_and_wait, metric, metric_total, poll, pseudo_random, start_up_with, try_get,
    wait_for_manifest,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Unit size of full stripes: small, so a few MiB span several stripes.
const UNIT_BYTES: usize = 256 << 10;

/// `up.toml` for fast failure detection and repair: a node is Down after two missed probes a second
/// apart (a probe's timeout is the interval: shorter ones time out on a loaded machine), and
/// rebuilt elsewhere two seconds later, without a pacing limit worth the name.
fn write_up_config(dir: &Path, nodes: usize, code: &str) -> PathBuf {
    let text = format!(
        r#"nodes = {nodes}
code = "{code}"

[data]
unit_bytes = {UNIT_BYTES}

[data.membership]
probe_interval_ms = 1000
down_after_probes = 2

[data.repair]
grace_ms = 2000
scan_interval_ms = 300
max_concurrent_stripes = 4
max_read_bytes_per_s = 1073741824
"#
    );
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("up.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// An object the test wrote and was acknowledged: its bytes are `pseudo_random(len, seed)`.
#[derive(Clone, Copy, Debug)]
struct Expected {
    len: usize,
    seed: u32,
}

type Acknowledged = Arc<Mutex<BTreeMap<String, Expected>>>;

/// Reads every acknowledged object and panics naming the first that differs or fails.
async fn verify_all(s3: &aws_sdk_s3::Client, objects: &BTreeMap<String, Expected>, when: &str) {
    verify_all_in(s3, "demo", objects, when).await;
}

async fn verify_all_in(s3: &aws_sdk_s3::Client, bucket: &str, objects: &BTreeMap<String, Expected>, when: &str) {
    for (key, expected) in objects {
        match try_get(s3, bucket, key).await {
            Ok(bytes) => assert!(
                bytes == pseudo_random(expected.len, expected.seed),
                "{key} ({} bytes) reads back different {when} (got {} bytes)",
                expected.len,
                bytes.len()
            ),
            Err(error) => panic!("{key} ({} bytes) unreadable {when}: {error}", expected.len),
        }
    }
}

/// What the concurrent readers saw.
#[derive(Default)]
struct ReadLog {
    reads: u64,
    failures: Vec<String>,
}

/// Waits until repair has rebuilt everything the `dead` nodes held: they are Down and past the
/// grace period, no scan has stripes left, and two status answers more than three scan intervals
/// apart show the same repair counters (so at least one full scan found nothing to do). Returns the
/// final status.
async fn wait_for_repair(status_of: impl Fn() -> serde_json::Value, dead: &[u32]) -> serde_json::Value {
    let mut quiet_since: Option<(Instant, serde_json::Value)> = None;
    poll("repair of the killed nodes' units", Duration::from_secs(90), || {
        let status = status_of();
        let repair = &status["repair"];
        for id in dead {
            let node = status["nodes"].as_array().unwrap().iter().find(|n| n["id"] == *id).unwrap();
            if node["state"] != "Down" {
                quiet_since = None;
                return Err(format!("node {id} is {} yet", node["state"]));
            }
            if !repair["nodes_repairing"].as_array().unwrap().iter().any(|n| n == id) {
                quiet_since = None;
                return Err(format!("node {id} is not being repaired yet: {repair}"));
            }
        }
        if repair["stripes_remaining"] != 0 {
            quiet_since = None;
            return Err(format!("stripes remain: {repair}"));
        }
        let counters = serde_json::json!([repair["stripes_repaired"], repair["stripe_failures"]]);
        match &quiet_since {
            Some((since, seen)) if *seen == counters && since.elapsed() > Duration::from_secs(1) => Ok(status),
            Some((_, seen)) if *seen == counters => Err(format!("quiet for a moment only: {repair}")),
            _ => {
                quiet_since = Some((Instant::now(), counters));
                Err(format!("repair still moving: {repair}"))
            }
        }
    })
    .await
}

/// Starts `nodes` nodes of `code`, runs two writers and two readers, SIGKILLs `m` nodes in the
/// middle, checks every acknowledged object, waits for repair, kills `m` more and checks again.
async fn kill_m_repair_kill_m_more(code: &str, nodes: usize, m: usize) {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster");
    let config = write_up_config(temp.path(), nodes, code);
    let mut up = start_up_with(&dir, &["--config", config.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let manifest = wait_for_manifest(&dir, &mut up);
    assert_eq!(manifest.nodes.len(), nodes);
    assert_eq!(manifest.code, code);
    let s3 = client(&manifest);
    s3.create_bucket().bucket("demo").send().await.unwrap();

    // Fixed objects: empty, tiny, small, one unit, and two spanning several stripes (a full
    // stripe is 6 units of 256 KiB for both codes).
    let acknowledged: Acknowledged = Arc::default();
    for (i, len) in [0usize, 1, 5000, UNIT_BYTES, (3 << 20) + 1, 7 << 20].into_iter().enumerate() {
        let seed = 7_000 + i as u32;
        let key = format!("fixed-{i}");
        s3.put_object().bucket("demo").key(&key).body(ByteStream::from(pseudo_random(len, seed))).send().await.unwrap();
        acknowledged.lock().unwrap().insert(key, Expected { len, seed });
    }

    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(Mutex::new(ReadLog::default()));
    let mut workers = Vec::new();
    for writer in 0..2u32 {
        let (s3, acknowledged, stop) = (s3.clone(), Arc::clone(&acknowledged), Arc::clone(&stop));
        workers.push(tokio::spawn(async move {
            const SIZES: [usize; 6] = [0, 1, 4096, 100_000, 1 << 20, (2 << 20) + 7];
            for i in 0..1_000_000u32 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let expected =
                    Expected { len: SIZES[(i as usize + writer as usize) % SIZES.len()], seed: writer << 24 | i };
                let key = format!("w{writer}-{i}");
                let body = ByteStream::from(pseudo_random(expected.len, expected.seed));
                match s3.put_object().bucket("demo").key(&key).body(body).send().await {
                    Ok(_) => {
                        acknowledged.lock().unwrap().insert(key, expected);
                    }
                    // Not acknowledged: allowed while nodes die, never read back.
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        }));
    }
    for reader in 0..2usize {
        let (s3, acknowledged, stop, reads) =
            (s3.clone(), Arc::clone(&acknowledged), Arc::clone(&stop), Arc::clone(&reads));
        workers.push(tokio::spawn(async move {
            for i in 0..1_000_000usize {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let (key, expected) = {
                    let objects = acknowledged.lock().unwrap();
                    let pick = (i * 7919 + reader * 104_729) % objects.len();
                    let (key, expected) = objects.iter().nth(pick).unwrap();
                    (key.clone(), *expected)
                };
                let outcome = try_get(&s3, "demo", &key).await;
                let mut log = reads.lock().unwrap();
                log.reads += 1;
                match outcome {
                    Ok(bytes) if bytes == pseudo_random(expected.len, expected.seed) => {}
                    Ok(bytes) => log.failures.push(format!("{key}: {} bytes, wrong content", bytes.len())),
                    Err(error) => log.failures.push(format!("{key}: {error}")),
                }
            }
        }));
    }

    let count = || acknowledged.lock().unwrap().len();
    let before_kill = poll("PUTs before the kill", Duration::from_secs(60), || {
        let n = count();
        if n >= 16 { Ok(n) } else { Err(format!("{n} acknowledged")) }
    })
    .await;
    let first: Vec<u32> = manifest.nodes[..m].iter().map(|n| n.id).collect();
    for node in &manifest.nodes[..m] {
        kill_and_wait(node.pid);
    }
    // The workload goes on until the writers got well past the failure (Down marking included).
    poll("PUTs after the kill", Duration::from_secs(60), || {
        let n = count();
        if n >= before_kill + 20 { Ok(()) } else { Err(format!("{} acknowledged since the kill", n - before_kill)) }
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        tokio::time::timeout(Duration::from_secs(60), worker).await.expect("workers stop").unwrap();
    }
    let log = std::mem::take(&mut *reads.lock().unwrap());
    assert!(log.reads > 0, "the readers read nothing");
    assert!(
        log.failures.is_empty(),
        "{} of {} GETs failed while {m} nodes died: {:?}",
        log.failures.len(),
        log.reads,
        log.failures
    );
    let objects = acknowledged.lock().unwrap().clone();
    verify_all(&s3, &objects, &format!("with nodes {first:?} killed")).await;

    let status = wait_for_repair(|| admin_status(&dir), &first).await;
    assert!(status["repair"]["units_repaired"].as_u64().unwrap() > 0, "nothing was repaired: {status}");
    // The same story on the gateway's Prometheus endpoint: requests timed, reads degraded, units
    // and bytes rebuilt, nothing left to repair.
    let metrics = manifest.gateway.as_ref().unwrap().metrics.clone();
    for (series, what) in [
        ("lowtail_s3_request_seconds_count", "S3 requests timed"),
        ("lowtail_gateway_degraded_reads_total", "degraded reads"),
        ("lowtail_gateway_repair_units_total", "units repaired"),
        ("lowtail_gateway_repair_bytes_total", "bytes repaired"),
    ] {
        assert!(metric_total(&metrics, series) > 0.0, "{what}: {series} is not above 0");
    }
    assert_eq!(metric_total(&metrics, "lowtail_gateway_repair_stripes_remaining"), 0.0);

    let second: Vec<u32> = manifest.nodes[m..2 * m].iter().map(|n| n.id).collect();
    for node in &manifest.nodes[m..2 * m] {
        kill_and_wait(node.pid);
    }
    verify_all(&s3, &objects, &format!("after repair, with nodes {first:?} and then {second:?} killed")).await;
    println!("{code}: {} objects, {} GETs during the workload, repair: {}", objects.len(), log.reads, status["repair"]);
    interrupt(up);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rs_6_3_survives_m_kills_under_load_repairs_and_survives_m_more() {
    // 12 nodes: after 3 die, the 9 left can hold every stripe's 9 units again.
    kill_m_repair_kill_m_more("rs-6-3", 12, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lrc_6_2_2_survives_m_kills_under_load_repairs_and_survives_m_more() {
    // LRC(6,2,2) decodes any 3 lost units (r + 1); 13 nodes leave 10 for its 10 units after 3 die.
    kill_m_repair_kill_m_more("lrc-6-2-2", 13, 3).await;
}

/// Rack-aware placement through real processes: 12 nodes in 6 racks of two, RS(4,2), `rack_aware`.
/// Every stripe (striped objects, and small objects once their packed stripe is sealed) has its 6
/// units in 6 racks, so the SIGKILL of both nodes of m = 2 whole racks (4 nodes, more than m)
/// loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rack_aware_placement_survives_losing_m_whole_racks() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster");
    let config = temp.path().join("up.toml");
    std::fs::write(
        &config,
        format!(
            "nodes = 12\ncode = \"rs-4-2\"\nracks = 6\n\n[data]\nunit_bytes = {UNIT_BYTES}\nrack_aware = true\n\n[data.packed]\nseal_after_ms = 300\n"
        ),
    )
    .unwrap();
    let mut up = start_up_with(&dir, &["--config", config.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let manifest = wait_for_manifest(&dir, &mut up);
    let rack_of: BTreeMap<PathBuf, String> =
        manifest.nodes.iter().map(|node| (node.data_dir.join("units"), node.rack.clone())).collect();
    assert_eq!(rack_of.values().collect::<std::collections::BTreeSet<_>>().len(), 6, "{rack_of:?}");
    let s3 = client(&manifest);
    s3.create_bucket().bucket("demo").send().await.unwrap();
    let mut objects = BTreeMap::new();
    for (i, len) in [0usize, 1, 5000, 70_000, UNIT_BYTES, (2 << 20) + 3].into_iter().enumerate() {
        for copy in 0..3u32 {
            let (key, seed) = (format!("o{i}-{copy}"), 9_000 + 10 * i as u32 + copy);
            s3.put_object()
                .bucket("demo")
                .key(&key)
                .body(ByteStream::from(pseudo_random(len, seed)))
                .send()
                .await
                .unwrap();
            objects.insert(key, Expected { len, seed });
        }
    }
    // Racks of each stripe's units, once no packed stripe is left open (replica units gone).
    let racks_per_stripe = poll("packed stripes sealed", Duration::from_secs(60), || {
        let files = unit_files(&manifest);
        if files.iter().any(|(_, unit, _)| *unit >= FIRST_REPLICA_UNIT) {
            return Err("replicas of an open stripe remain".to_string());
        }
        let mut racks: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for (stripe, _, path) in files {
            racks.entry(stripe).or_default().push(rack_of[path.parent().unwrap()].clone());
        }
        Ok(racks)
    })
    .await;
    assert!(racks_per_stripe.len() >= 6, "{racks_per_stripe:?}");
    for (stripe, racks) in &racks_per_stripe {
        let distinct: std::collections::BTreeSet<&String> = racks.iter().collect();
        assert!(racks.len() == 6 && distinct.len() == 6, "stripe {stripe} has units in racks {racks:?}");
    }
    let doomed = ["rack-0", "rack-3"];
    for node in manifest.nodes.iter().filter(|node| doomed.contains(&node.rack.as_str())) {
        kill_and_wait(node.pid);
    }
    verify_all(&s3, &objects, "with racks rack-0 and rack-3 (four nodes) killed").await;
    interrupt(up);
}

/// Every unit file `<stripe>-<unit>.unit` under the nodes' data directories: (stripe, unit, path).
fn unit_files(manifest: &launcher::Manifest) -> Vec<(u64, u16, PathBuf)> {
    let mut files = Vec::new();
    for node in &manifest.nodes {
        let Ok(entries) = std::fs::read_dir(node.data_dir.join("units")) else { continue };
        for entry in entries {
            let path = entry.unwrap().path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".unit")) else {
                continue;
            };
            let (stripe, unit) = parse_unit_name(name);
            files.push((stripe, unit, path));
        }
    }
    files
}

/// (stripe, unit) of a unit file's stem, named `<stripe:016x>-<unit:04x>` by the node's store.
fn parse_unit_name(stem: &str) -> (u64, u16) {
    let (stripe, unit) = stem.split_once('-').expect("unit files are named <stripe>-<unit>.unit");
    let parsed = (u64::from_str_radix(stripe, 16), u16::from_str_radix(unit, 16));
    match parsed {
        (Ok(stripe), Ok(unit)) => (stripe, unit),
        _ => panic!("unit file {stem}.unit is not named <stripe:hex>-<unit:hex>"),
    }
}

/// Replica units of open packing stripes (index 0x8000 and up) are not stripe units.
const FIRST_REPLICA_UNIT: u16 = 0x8000;

/// The payload of a unit file: the bytes after its header, before the checksum table.
fn unit_payload(path: &Path, len: usize) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    let start = node::store::HEADER_BYTES as usize;
    bytes[start..start + len].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_corrupted_on_disk_is_read_degraded_and_repaired() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster");
    // The default shape: RS(6,3) on exactly 9 nodes, so no spare node to move the unit to.
    let config = write_up_config(temp.path(), 9, "rs-6-3");
    let mut up = start_up_with(&dir, &["--config", config.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let manifest = wait_for_manifest(&dir, &mut up);
    let metrics = manifest.gateway.as_ref().unwrap().metrics.clone();
    let s3 = client(&manifest);
    s3.create_bucket().bucket("demo").send().await.unwrap();
    // One stripe (less than 6 units of 256 KiB), unit size 100 032 bytes: two checksum blocks each.
    let object = pseudo_random(600_000, 42);
    s3.put_object().bucket("demo").key("victim").body(ByteStream::from(object.clone())).send().await.unwrap();
    let files = unit_files(&manifest);
    assert_eq!(files.len(), 9, "one stripe of 9 units: {files:?}");
    let stripe = files[0].0;
    assert!(files.iter().all(|(s, _, _)| *s == stripe));
    let unit_len = 600_000usize.div_ceil(6).div_ceil(64) * 64;
    let (_, _, victim) = files.iter().find(|(_, unit, _)| *unit == 0).unwrap().clone();
    assert!(unit_payload(&victim, unit_len) == object[..unit_len], "unit 0 holds the object's first bytes");

    // Flip bytes in the second checksum block of data unit 0.
    let mut bytes = std::fs::read(&victim).unwrap();
    let at = node::store::HEADER_BYTES as usize + 70_000;
    bytes[at..at + 8].iter_mut().for_each(|b| *b ^= 0x5a);
    std::fs::write(&victim, &bytes).unwrap();

    let corrupt_before = metric(&metrics, "lowtail_gateway_corrupt_units_total");
    let degraded_before = metric(&metrics, "lowtail_gateway_degraded_reads_total");
    assert!(try_get(&s3, "demo", "victim").await.unwrap() == object, "the corrupt unit was served");
    assert!(metric(&metrics, "lowtail_gateway_corrupt_units_total") > corrupt_before, "corruption not reported");
    assert!(metric(&metrics, "lowtail_gateway_degraded_reads_total") > degraded_before, "not a degraded read");

    // Repair rewrites unit 0 with the right bytes (wherever it puts it), and no bad copy stays.
    poll("repair of the corrupt unit", Duration::from_secs(60), || {
        let copies: Vec<PathBuf> =
            unit_files(&manifest).into_iter().filter(|(s, u, _)| *s == stripe && *u == 0).map(|(_, _, p)| p).collect();
        let good = copies.iter().filter(|p| unit_payload(p, unit_len) == object[..unit_len]).count();
        let repaired = admin_status(&dir)["repair"]["units_repaired"].as_u64().unwrap();
        if copies.len() == 1 && good == 1 && repaired >= 1 {
            Ok(())
        } else {
            Err(format!("{} copies of unit 0, {good} good, {repaired} units repaired", copies.len()))
        }
    })
    .await;

    let degraded_before = metric(&metrics, "lowtail_gateway_degraded_reads_total");
    let corrupt_before = metric(&metrics, "lowtail_gateway_corrupt_units_total");
    assert!(try_get(&s3, "demo", "victim").await.unwrap() == object, "the repaired object differs");
    assert_eq!(metric(&metrics, "lowtail_gateway_degraded_reads_total"), degraded_before, "still read degraded");
    assert_eq!(metric(&metrics, "lowtail_gateway_corrupt_units_total"), corrupt_before, "still corrupt");
    interrupt(up);
}

#[path = "../../meta/tests/common/etcd_server.rs"]
mod etcd_server;

/// Child processes killed (and reaped) when the test ends, even when it fails.
struct Processes(Vec<(String, std::process::Child)>);

impl Processes {
    /// Panics with the process's log when `name` has exited.
    fn assert_running(&mut self, name: &str, log: &Path) {
        let (_, child) = self.0.iter_mut().find(|(n, _)| n == name).unwrap();
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{name} exited with {status}: {}", std::fs::read_to_string(log).unwrap_or_default());
        }
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// Two `lowtail gateway` processes share one cluster (eight `lowtail node` processes, RS(4,2)) through
/// a real etcd; nodes are registered with `lowtail admin add-node`. Objects written through one
/// gateway are read, listed and deleted through the other, byte for byte; of 16 conditional PUTs
/// racing through both, exactly one wins. Then a node dies: the
/// gateway holding the repair lease repairs it while the other names that gateway and leaves the node
/// alone, and afterwards every stripe has all its units on live nodes, so
/// m = 2 more nodes can die and every object still reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_share_one_cluster_through_etcd() {
    let Some(etcd) = etcd_server::EtcdServer::start("two_gateways_share_one_cluster_through_etcd") else { return };
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path();
    let binary = env!("CARGO_BIN_EXE_lowtail");
    let secret = "resilience-test-cluster-secret";
    let mut processes = Processes(Vec::new());

    let mut node_logs = Vec::new();
    for id in 0..8u32 {
        let dir = root.join(format!("node-{id}"));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("node.toml");
        std::fs::write(
            &config,
            format!(
                "node_id = {id}\nlisten_addr = \"127.0.0.1:0\"\ndata_dir = \"{}\"\naddress_file = \"{}\"\n",
                dir.join("data").display(),
                dir.join("address.json").display()
            ),
        )
        .unwrap();
        let log = dir.join("node.log");
        let child = std::process::Command::new(binary)
            .args(["node", "--config"])
            .arg(&config)
            .env("LOWTAIL_CLUSTER_SECRET", secret)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        processes.0.push((format!("node-{id}"), child));
        node_logs.push((dir, log));
    }

    // Gateways listen on ports they pick and report them in their address file: a port picked here
    // in advance could be taken by another test before the gateway binds it.
    let gateway_config = |name: &str| {
        let path = root.join(format!("gateway-{name}.toml"));
        std::fs::write(
            &path,
            format!(
                r#"s3_listen = "127.0.0.1:0"
http_listen = "127.0.0.1:0"
address_file = "{}"
credentials = [{{ access_key = "shared-access", secret_key = "shared-secret-key" }}]

[meta]
backend = "etcd"
endpoints = ["{}"]
prefix = "/lowtail/resilience"

[data]
code = "rs-4-2"
cluster_secret = "{secret}"
gateway_id = "{name}"
membership.probe_interval_ms = 500
membership.down_after_probes = 2
repair.grace_ms = 1000
repair.scan_interval_ms = 300
packed.seal_after_ms = 300
"#,
                root.join(format!("gateway-{name}.address.json")).display(),
                etcd.endpoint
            ),
        )
        .unwrap();
        path
    };
    let config_a = gateway_config("a");
    let config_b = gateway_config("b");

    for (id, (dir, log)) in node_logs.iter().enumerate() {
        let address_file = dir.join("address.json");
        let address = poll("node address file", Duration::from_secs(30), || {
            processes.assert_running(&format!("node-{id}"), log);
            let text = std::fs::read_to_string(&address_file).map_err(|e| e.to_string())?;
            let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            Ok(value["rpc_addr"].as_str().unwrap().to_string())
        })
        .await;
        let output = std::process::Command::new(binary)
            .args(["admin", "add-node", "--config"])
            .arg(&config_a)
            .args(["--id", &id.to_string(), "--address", &address])
            .output()
            .unwrap();
        assert!(output.status.success(), "add-node {id}: {}", String::from_utf8_lossy(&output.stderr));
    }
    // An address where no node answers is refused (nodes are checked before they are registered).
    let refused = std::process::Command::new(binary)
        .args(["admin", "add-node", "--config"])
        .arg(&config_a)
        .args(["--id", "99", "--address", &free_addr().to_string()])
        .output()
        .unwrap();
    assert!(!refused.status.success(), "a node that does not answer was registered");

    for (name, config) in [("gateway-a", &config_a), ("gateway-b", &config_b)] {
        let log = root.join(format!("{name}.log"));
        let child = std::process::Command::new(binary)
            .args(["gateway", "--config"])
            .arg(config)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        processes.0.push((name.to_string(), child));
    }
    let mut bound = Vec::new();
    for name in ["a", "b"] {
        let (process, log) = (format!("gateway-{name}"), root.join(format!("gateway-{name}.log")));
        let address_file = root.join(format!("gateway-{name}.address.json"));
        let address = poll("gateway address file", Duration::from_secs(30), || {
            processes.assert_running(&process, &log);
            let text = std::fs::read_to_string(&address_file).map_err(|e| e.to_string())?;
            let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            Ok((value["s3_addr"].as_str().unwrap().to_string(), value["http_addr"].as_str().unwrap().to_string()))
        })
        .await;
        bound.push(address);
    }
    let [(s3_a, http_a), (s3_b, http_b)] = <[(String, String); 2]>::try_from(bound).unwrap();
    let a = common::client_for(&format!("http://{s3_a}"), "us-east-1", "shared-access", "shared-secret-key");
    let b = common::client_for(&format!("http://{s3_b}"), "us-east-1", "shared-access", "shared-secret-key");
    for (name, client) in [("gateway-a", &a), ("gateway-b", &b)] {
        let deadline = Instant::now() + Duration::from_secs(30);
        while client.list_buckets().send().await.is_err() {
            processes.assert_running(name, &root.join(format!("{name}.log")));
            assert!(Instant::now() < deadline, "{name} does not serve S3");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    a.create_bucket().bucket("shared").send().await.unwrap();
    let buckets = b.list_buckets().send().await.unwrap();
    assert!(buckets.buckets().iter().any(|bucket| bucket.name() == Some("shared")), "B does not see A's bucket");
    let sizes = [0usize, 1, 100_000, (3 << 20) + 5];
    for (i, &len) in sizes.iter().enumerate() {
        let body = ByteStream::from(pseudo_random(len, 500 + i as u32));
        a.put_object().bucket("shared").key(format!("from-a/{i}")).body(body).send().await.unwrap();
    }
    for (i, &len) in sizes.iter().enumerate() {
        let bytes = try_get(&b, "shared", &format!("from-a/{i}")).await.unwrap();
        assert!(bytes == pseudo_random(len, 500 + i as u32), "from-a/{i} reads back different through B");
    }
    let listed = b.list_objects_v2().bucket("shared").prefix("from-a/").send().await.unwrap();
    let keys: Vec<&str> = listed.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, ["from-a/0", "from-a/1", "from-a/2", "from-a/3"]);

    // Written through B, read through A; then deleted through B, gone for A too.
    let body = pseudo_random(2 << 20, 77);
    b.put_object().bucket("shared").key("from-b").body(ByteStream::from(body.clone())).send().await.unwrap();
    assert!(try_get(&a, "shared", "from-b").await.unwrap() == body, "from-b reads back different through A");
    b.delete_object().bucket("shared").key("from-a/2").send().await.unwrap();
    let gone = try_get(&a, "shared", "from-a/2").await.unwrap_err();
    assert!(gone.contains("NoSuchKey"), "A still serves an object B deleted: {gone}");
    let listed = a.list_objects_v2().bucket("shared").send().await.unwrap();
    let keys: Vec<&str> = listed.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, ["from-a/0", "from-a/1", "from-a/3", "from-b"]);
    for i in [0usize, 1, 3] {
        let bytes = try_get(&a, "shared", &format!("from-a/{i}")).await.unwrap();
        assert!(bytes == pseudo_random(sizes[i], 500 + i as u32), "from-a/{i} differs after the delete");
    }

    // 16 writers race an `If-None-Match: *` PUT of one key through both gateways: the etcd
    // transaction that commits decides, so exactly one wins and the rest get 412.
    let racers: Vec<_> = (0..16u32)
        .map(|i| {
            let client = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move {
                let body = ByteStream::from(pseudo_random(1 << 20, 3000 + i));
                let put = client.put_object().bucket("shared").key("lock").if_none_match("*").body(body);
                match put.send().await {
                    Ok(_) => Ok(i),
                    Err(error) => Err(error.raw_response().map(|response| response.status().as_u16())),
                }
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for racer in racers {
        outcomes.push(racer.await.unwrap());
    }
    let winners: Vec<u32> = outcomes.iter().filter_map(|outcome| outcome.as_ref().ok().copied()).collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    assert!(outcomes.iter().filter(|o| o.is_err()).all(|o| *o == Err(Some(412))), "{outcomes:?}");
    let lock = try_get(&b, "shared", "lock").await.unwrap();
    assert!(lock == pseudo_random(1 << 20, 3000 + winners[0]), "the lock holds the winner's bytes");
    a.delete_object().bucket("shared").key("lock").send().await.unwrap();

    // More stripes, written through both gateways, so repair has work.
    let mut objects: BTreeMap<String, Expected> = BTreeMap::new();
    for i in [0usize, 1, 3] {
        objects.insert(format!("from-a/{i}"), Expected { len: sizes[i], seed: 500 + i as u32 });
    }
    objects.insert("from-b".into(), Expected { len: 2 << 20, seed: 77 });
    for i in 0..12u32 {
        let expected = Expected { len: 300_000 + i as usize, seed: 900 + i };
        let client = if i % 2 == 0 { &a } else { &b };
        let body = ByteStream::from(pseudo_random(expected.len, expected.seed));
        client.put_object().bucket("shared").key(format!("more-{i}")).body(body).send().await.unwrap();
        objects.insert(format!("more-{i}"), expected);
    }

    // Node 0 dies; the gateway holding the repair lease repairs its units once the grace period is
    // over, and the other leaves them to it.
    {
        let (_, node) = processes.0.iter_mut().find(|(name, _)| name == "node-0").unwrap();
        node.kill().unwrap();
        node.wait().unwrap();
    }
    let status_at = |http: &str| common::admin_status_at(&format!("http://{http}"));
    let holder = common::poll("a repair lease holder", Duration::from_secs(30), || {
        status_at(&http_a)["repair"]["lease_holder"].as_str().map(str::to_string).ok_or("no claim yet".to_string())
    })
    .await;
    let (repairer, other) = if holder == "a" { (&http_a, &http_b) } else { (&http_b, &http_a) };
    wait_for_repair(|| status_at(repairer), &[0]).await;
    let repair = status_at(other)["repair"].clone();
    assert_eq!(repair["lease_holder"], holder.as_str(), "both gateways see one repairer: {repair}");
    assert_eq!(repair["nodes_repairing"], serde_json::json!([]), "the other gateway leaves node 0 alone: {repair}");
    assert_eq!(repair["stripes_repaired"], 0, "{repair}");
    // Every stripe still referenced has its 6 units on the 7 live nodes.
    let mut units: BTreeMap<u64, Vec<u16>> = BTreeMap::new();
    for (dir, _) in &node_logs[1..] {
        for entry in std::fs::read_dir(dir.join("data").join("units")).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if let Some(stem) = name.strip_suffix(".unit") {
                let (stripe, unit) = parse_unit_name(stem);
                if unit < FIRST_REPLICA_UNIT {
                    units.entry(stripe).or_default().push(unit);
                }
            }
        }
    }
    let incomplete: Vec<_> = units.iter().filter(|(_, units)| units.len() != 6).collect();
    assert!(incomplete.is_empty(), "stripes missing units on live nodes after repair: {incomplete:?}");

    for name in ["node-1", "node-2"] {
        let (_, node) = processes.0.iter_mut().find(|(n, _)| n == name).unwrap();
        node.kill().unwrap();
        node.wait().unwrap();
    }
    verify_all_in(&b, "shared", &objects, "through B with node 0 repaired and nodes 1 and 2 killed").await;
    for name in ["gateway-a", "gateway-b"] {
        processes.assert_running(name, &root.join(format!("{name}.log")));
    }
}
