//! The live side of `lowtail experiment hu2017 --live`: a fleet (etcd, `lowtail node` and `lowtail
//! gateway` processes) started, used through S3 from two gateways and torn down without leaving a
//! process; the experiment itself end to end (`--quick`), its outputs' schema checked. Skipped, with
//! the reason printed, when the `etcd` binary is absent.

mod common;

use aws_sdk_s3::primitives::ByteStream;
use std::path::Path;
use std::time::Duration;

fn etcd_or_skip(test: &str) -> Option<std::path::PathBuf> {
    let found = launcher::find_etcd_binary();
    if found.is_none() {
        println!("{test}: skipped: no etcd binary (PATH, /usr/bin, /usr/local/bin, LOWTAIL_ETCD_BIN)");
    }
    found
}

fn alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; its state is Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
}

fn fleet_config(etcd: &Path) -> launcher::FleetConfig {
    let mut data = gateway::data::DataConfig { code: "rs-4-2".into(), ..gateway::data::DataConfig::default() };
    data.packed.seal_after_ms = 300;
    launcher::FleetConfig {
        nodes: 6,
        gateways: 2,
        service_model: node::ServiceModel::default(),
        data,
        controller: launcher::fleet::ControllerTable::new(),
        etcd_binary: etcd.to_path_buf(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_serves_s3_from_every_gateway_and_stops_without_leftovers() {
    let Some(etcd) = etcd_or_skip("a_fleet_serves_s3_from_every_gateway_and_stops_without_leftovers") else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_lowtail"));
    let fleet = launcher::Fleet::start(binary, temp.path(), &fleet_config(&etcd), &|_| {}).await.unwrap();
    let pids = fleet.pids();
    assert!(pids.iter().all(|&pid| alive(pid)));

    let credential = fleet.credential();
    let clients: Vec<aws_sdk_s3::Client> = fleet
        .gateways()
        .iter()
        .map(|g| common::client_for(&g.s3_url(), fleet.region(), &credential.access_key, &credential.secret_key))
        .collect();
    clients[0].create_bucket().bucket("fleet").send().await.unwrap();
    let body = vec![7u8; 3000];
    clients[0].put_object().bucket("fleet").key("a").body(ByteStream::from(body.clone())).send().await.unwrap();
    assert_eq!(common::try_get(&clients[1], "fleet", "a").await.unwrap(), body, "read through the other gateway");

    let slow = node::ServiceModel { enabled: true, overhead_us: 1000, ..node::ServiceModel::default() };
    assert_eq!(fleet.set_service_model(3, &slow).await.unwrap(), slow);
    assert_eq!(common::try_get(&clients[0], "fleet", "a").await.unwrap(), body);

    fleet.shutdown().await;
    for pid in pids {
        assert!(!alive(pid), "process {pid} outlived the fleet");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_fleet_kills_its_processes() {
    let Some(etcd) = etcd_or_skip("a_dropped_fleet_kills_its_processes") else { return };
    let temp = tempfile::tempdir().unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_lowtail"));
    let fleet = launcher::Fleet::start(binary, temp.path(), &fleet_config(&etcd), &|_| {}).await.unwrap();
    let pids = fleet.pids();
    drop(fleet);
    tokio::time::sleep(Duration::from_millis(100)).await;
    for pid in pids {
        assert!(!alive(pid), "process {pid} outlived the dropped fleet");
    }
}
