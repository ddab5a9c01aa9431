//! `lowtail node` as a real process on loopback: it serves the RPC to a real
//! client, stops cleanly on SIGTERM, keeps its units across a restart, and
//! refuses to start without a cluster secret; it runs with transparent huge pages off.

use bytes::Bytes;
use node::NodeClient;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "test-secret";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn spawn_node(port: u16, data_dir: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["node", "--node-id", "3", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--data-dir")
        .arg(data_dir)
        .env("LOWTAIL_CLUSTER_SECRET", SECRET)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lowtail binary runs")
}

/// Connects once the node accepts connections (at most 20 s).
async fn connect(port: u16) -> NodeClient {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let attempt = NodeClient::connect(&format!("127.0.0.1:{port}"), SECRET).await;
        match attempt {
            Ok(client) if client.probe().await.is_ok() => return client,
            _ if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(50)).await,
            _ => panic!("node on port {port} did not come up"),
        }
    }
}

/// Sends SIGTERM and waits (at most 20 s) for a clean exit.
fn terminate(mut child: Child) {
    // SAFETY: kill(2) with a pid we own and a valid signal number.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0, "SIGTERM sent");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "node exited with {status}");
            return;
        }
        assert!(Instant::now() < deadline, "node did not stop after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Huge pages kept the allocator's freed memory resident (docs/data-path.md, "Memory"): a serving
/// process turns them off. Kernels older than 3.15 do not report it; there is nothing to check.
fn assert_transparent_huge_pages_off(pid: u32) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    if let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) {
        assert_eq!(line.split_whitespace().nth(1), Some("0"), "transparent huge pages on in the node: {line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_process_serves_stops_and_keeps_units() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let data = Bytes::from((0..300_000u32).map(|i| (i * 7 % 251) as u8).collect::<Vec<u8>>());

    let child = spawn_node(port, dir.path());
    let client = connect(port).await;
    assert_transparent_huge_pages_off(child.id());
    client.write_unit(42, 1, data.clone()).await.unwrap();
    let (read, timing) = client.read_range(42, 1, 1000, 5000).await.unwrap();
    assert_eq!(read, data.slice(1000..6000));
    assert_eq!(timing.node_id, 3);
    drop(client);
    terminate(child);

    let child = spawn_node(port, dir.path());
    let client = connect(port).await;
    let (read, _) = client.read_range(42, 1, 0, data.len() as u64).await.unwrap();
    assert_eq!(read, data, "units survive a restart");
    let wrong = NodeClient::connect(&format!("127.0.0.1:{port}"), "wrong").await.unwrap();
    assert!(wrong.read_range(42, 1, 0, 10).await.is_err(), "a wrong secret is refused");
    drop(client);
    terminate(child);
}

#[test]
fn node_without_a_secret_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["node", "--listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir.path())
        .env_remove("LOWTAIL_CLUSTER_SECRET")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cluster_secret"), "{stderr}");
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "nothing written");
}
