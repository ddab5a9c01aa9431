//! Helpers shared by the end-to-end tests that run the `lowtail` binary as real processes: starting
//! `lowtail up` and waiting for its `cluster.json`, signals, an AWS SDK client, deterministic object
//! bytes, the gateway's `/admin/status` and `/metrics`, and bounded polling.
//!
//! Owns no assertions about lowtail's behaviour; each test file states its own.

// Each test binary includes this module and uses a different subset of it.
#![allow(dead_code)]

use aws_sdk_s3::config::{Credentials, Region};
use launcher::Manifest;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `lowtail up`. A test that fails before it stops the cluster drops it, and the drop
/// stops it as Ctrl-C would (SIGKILL after 30 s), so a failed test leaves no cluster running.
pub struct Up(Child);

impl std::ops::Deref for Up {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Up {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if !matches!(self.0.try_wait(), Ok(None)) {
            return;
        }
        signal(self.0.id(), libc::SIGINT);
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(self.0.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where `lowtail up --dir DIR` writes its own stderr in these tests: beside DIR, not in it (the
/// nodes log under DIR), so that a start that fails says why.
pub fn up_stderr_path(dir: &Path) -> std::path::PathBuf {
    let name = dir.file_name().map_or_else(|| "cluster".into(), |name| name.to_string_lossy().into_owned());
    dir.with_file_name(format!("{name}.up-stderr.log"))
}

/// Starts `lowtail up --dir DIR` with `args` in front, stdout discarded, stderr kept at
/// [`up_stderr_path`].
pub fn start_up_with(dir: &Path, args: &[&str]) -> Up {
    let stderr = std::fs::File::create(up_stderr_path(dir)).expect("the up log is writable");
    Up(Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .arg("up")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("lowtail runs"))
}

/// The last lines of what `lowtail up --dir DIR` wrote to stderr, for a failure message.
pub fn up_stderr_tail(dir: &Path) -> String {
    let text = std::fs::read_to_string(up_stderr_path(dir)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// `lowtail up` with 9 nodes, RS(6,3), S3 on a free loopback port.
pub fn start_up(dir: &Path) -> Up {
    start_up_with(dir, &["--nodes", "9", "--code", "rs-6-3", "--listen", "127.0.0.1:0"])
}

/// Waits (at most 60 s) until `cluster.json` names a gateway in the process `up`.
pub fn wait_for_manifest(dir: &Path, up: &mut Child) -> Manifest {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = up.try_wait().unwrap() {
            panic!("lowtail up exited while starting ({status}); its stderr ends:\n{}", up_stderr_tail(dir));
        }
        if let Some(manifest) = Manifest::read_served_by(&dir.join("cluster.json"), up.id()) {
            return manifest;
        }
        assert!(Instant::now() < deadline, "cluster did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `lowtail admin GROUP ARGS --dir DIR`: whether it succeeded, and what it printed.
pub fn lowtail_admin_of(dir: &Path, group: &str, args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["admin", group])
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .expect("lowtail runs");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

pub fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) with a pid this test started and a valid signal.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, signal) }, 0);
}

/// SIGKILLs a process and waits (at most 10 s) until it is gone, so that what follows really runs
/// without it. The process is a grandchild (a node of `lowtail up`): it is reaped by its parent, so
/// "gone" means its `/proc` entry vanished or it turned into a zombie.
pub fn kill_and_wait(pid: u32) {
    signal(pid, libc::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if status.is_empty() || status.lines().any(|line| line.starts_with("State:") && line.contains('Z')) {
            return;
        }
        assert!(Instant::now() < deadline, "process {pid} did not die after SIGKILL");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGINT, then waits (at most 60 s) for a clean exit.
pub fn interrupt(mut up: Up) {
    signal(up.id(), libc::SIGINT);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = up.try_wait().unwrap() {
            assert!(status.success(), "lowtail up exited with {status}");
            return;
        }
        assert!(Instant::now() < deadline, "lowtail up did not stop on SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An S3 client for `endpoint` with plain HTTP.
pub fn client_for(endpoint: &str, region: &str, access_key: &str, secret_key: &str) -> aws_sdk_s3::Client {
    let credentials = Credentials::new(access_key, secret_key, None, None, "test");
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .region(Region::new(region.to_string()))
        .endpoint_url(endpoint)
        .credentials_provider(credentials)
        .force_path_style(true)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// An S3 client for the cluster `manifest` describes.
pub fn client(manifest: &Manifest) -> aws_sdk_s3::Client {
    client_for(&manifest.endpoint, &manifest.region, &manifest.access_key, &manifest.secret_key)
}

pub async fn get(client: &aws_sdk_s3::Client, key: &str) -> Vec<u8> {
    let object = client.get_object().bucket("demo").key(key).send().await.unwrap();
    object.body.collect().await.unwrap().into_bytes().to_vec()
}

/// GET `bucket/key`'s bytes, or the error as text.
pub async fn try_get(client: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<Vec<u8>, String> {
    let object = client.get_object().bucket(bucket).key(key).send().await.map_err(|e| format!("{e:?}"))?;
    Ok(object.body.collect().await.map_err(|e| format!("{e:?}"))?.into_bytes().to_vec())
}

pub fn pseudo_random(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8).collect()
}

/// The gateway's `GET /admin/status` as `lowtail admin status --json --dir DIR` prints it.
pub fn admin_status(dir: &Path) -> serde_json::Value {
    admin_status_with(&["--dir", dir.to_str().expect("a UTF-8 temporary path")])
}

/// `lowtail admin status --json --gateway URL`: the gateway's HTTP endpoint given directly.
pub fn admin_status_at(gateway_http: &str) -> serde_json::Value {
    admin_status_with(&["--gateway", gateway_http])
}

fn admin_status_with(target: &[&str]) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["admin", "status", "--json"])
        .args(target)
        .output()
        .expect("lowtail runs");
    assert!(output.status.success(), "admin status failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("admin status --json prints JSON")
}

/// Every sample at `metrics_url`: (series with its labels, value).
fn samples(metrics_url: &str) -> Vec<(String, f64)> {
    let text = ureq::get(metrics_url).call().expect("metrics answer").body_mut().read_to_string().unwrap();
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse::<f64>().ok()?))
        })
        .collect()
}

/// The value of the Prometheus counter or gauge `name` (without labels) at `metrics_url`; 0 when the
/// series does not exist yet (counters appear on their first increment).
pub fn metric(metrics_url: &str, name: &str) -> f64 {
    samples(metrics_url).into_iter().find_map(|(series, value)| (series == name).then_some(value)).unwrap_or(0.0)
}

/// The sum of every series of `name` (any labels) at `metrics_url`; 0 when there is none.
pub fn metric_total(metrics_url: &str, name: &str) -> f64 {
    samples(metrics_url)
        .into_iter()
        .filter(|(series, _)| series.split_once('{').map_or(series.as_str(), |(series_name, _)| series_name) == name)
        .map(|(_, value)| value)
        .sum()
}

/// Polls `check` every 200 ms until it returns `Some`, for at most `limit`; panics with `what` and
/// the last `Err` description otherwise.
pub async fn poll<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        match check() {
            Ok(value) => return value,
            Err(why) => assert!(Instant::now() < deadline, "{what}: still not true after {limit:?}: {why}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
