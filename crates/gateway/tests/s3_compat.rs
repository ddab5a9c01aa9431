//! The S3 compatibility suite (`tests/s3compat`, a pytest + boto3 port of the core of ceph/s3-tests)
//! against an in-process gateway on the erasure-coded data path: nine real storage nodes on
//! 127.0.0.1, RS(6,3), redb metadata in a temporary directory. Fails with pytest's output when any
//! case fails, and fails (rather than skips) when python3, boto3 or pytest are missing, unless
//! `LOWTAIL_SKIP_S3COMPAT=1`. `LOWTAIL_S3COMPAT_PYTHON` picks the interpreter and
//! `LOWTAIL_S3COMPAT_ARGS` adds pytest arguments (e.g. `-k multipart -x`).

mod data_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use data_support::TestCluster;
use gateway::data::{ErasureData, ObjectData};
use gateway::s3::{S3Options, build_service, serve};

const ACCESS_KEY: &str = "s3compat-access";
const SECRET_KEY: &str = "s3compat-secret-0123456789";
/// The whole suite must finish within this (it takes about a minute on a 2-core machine).
const SUITE_TIMEOUT: Duration = Duration::from_secs(900);
/// How to get what the suite needs, printed when it is missing.
const INSTALL_HINT: &str = "install them with `apt-get install python3-boto3 python3-pytest` (Debian/Ubuntu; \
     `scripts/test` does this) or `pip install boto3 pytest`, or set LOWTAIL_SKIP_S3COMPAT=1 to skip this test";

/// The first interpreter that can import boto3 and pytest: `LOWTAIL_S3COMPAT_PYTHON` if set (and then
/// only it), else Debian's `/usr/bin/python3` (what `scripts/test` installs into), else `python3` on PATH.
fn find_python() -> Result<String, String> {
    let candidates: Vec<String> = match std::env::var("LOWTAIL_S3COMPAT_PYTHON") {
        Ok(python) if !python.is_empty() => vec![python],
        _ => vec!["/usr/bin/python3".into(), "python3".into()],
    };
    let mut tried = Vec::new();
    for python in &candidates {
        let probe = Command::new(python)
            .args(["-c", "import boto3, pytest; print(boto3.__version__, pytest.__version__)"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output();
        match probe {
            Ok(output) if output.status.success() => return Ok(python.clone()),
            Ok(output) => {
                let stderr = String::from_utf8_lossy(&output.stderr);
                let last = stderr.lines().last().unwrap_or("").to_string();
                tried.push(format!("{python}: {last}"));
            }
            Err(error) => tried.push(format!("{python}: {error}")),
        }
    }
    Err(tried.join("; "))
}

/// Whether pytest `args` name test files or folders: an argument that is neither an option nor the
/// value of one (`-k EXPR`, `-m EXPR`).
fn names_test_files(args: &[String]) -> bool {
    let mut after_option_with_value = false;
    args.iter().any(|arg| {
        let is_value = std::mem::replace(&mut after_option_with_value, matches!(arg.as_str(), "-k" | "-m"));
        !is_value && !arg.starts_with('-')
    })
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repository root")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ceph_s3_tests_core_passes() {
    if std::env::var("LOWTAIL_SKIP_S3COMPAT").is_ok_and(|value| value == "1") {
        println!("skipped: LOWTAIL_SKIP_S3COMPAT=1");
        return;
    }
    let python = match find_python() {
        Ok(python) => python,
        Err(tried) => {
            panic!("the S3 compatibility suite needs python3 with boto3 and pytest ({tried}); {INSTALL_HINT}")
        }
    };

    let cluster = TestCluster::start(9, 9).await;
    let data = ErasureData::new(cluster.config("rs-6-3"), Arc::clone(&cluster.meta)).await.expect("data path");
    let data: Arc<dyn ObjectData> = Arc::new(data);
    let service = build_service(
        Arc::clone(&cluster.meta),
        data,
        vec![(ACCESS_KEY.into(), SECRET_KEY.into())],
        S3Options::default(),
    )
    .expect("service");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("address"));
    let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, service, async move {
        let _ = stop.await;
    }));

    let extra: Vec<String> = std::env::var("LOWTAIL_S3COMPAT_ARGS")
        .map(|args| args.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    // Arguments naming test files replace the default of the whole folder (a `-k` or `-m`
    // expression selects within it).
    let whole_suite = !names_test_files(&extra);
    let outcome = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(&python)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .args(whole_suite.then_some("tests/s3compat"))
            .args(&extra)
            .current_dir(repo_root())
            .env("S3TEST_ENDPOINT", &endpoint)
            .env("S3TEST_ACCESS_KEY", ACCESS_KEY)
            .env("S3TEST_SECRET_KEY", SECRET_KEY)
            .env("S3TEST_REGION", "us-east-1")
            // botocore would try to load it even for plain http (this machine sets it).
            .env_remove("AWS_CA_BUNDLE")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start pytest");
        // Drained on threads so a chatty run cannot fill a pipe and stall.
        let mut stdout = child.stdout.take().expect("stdout");
        let mut stderr = child.stderr.take().expect("stderr");
        let out = std::thread::spawn(move || {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut stdout, &mut text).ok();
            text
        });
        let err = std::thread::spawn(move || {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut stderr, &mut text).ok();
            text
        });
        let started = Instant::now();
        // Polls until pytest exits or the deadline passes: bounded by SUITE_TIMEOUT.
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for pytest") {
                break Some(status);
            }
            if started.elapsed() > SUITE_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        (status, out.join().unwrap_or_default(), err.join().unwrap_or_default(), started.elapsed())
    })
    .await
    .expect("pytest task");
    let _ = shutdown.send(());
    let _ = server.await;
    cluster.shutdown().await;

    let (status, stdout, stderr, elapsed) = outcome;
    let Some(status) = status else {
        panic!(
            "the S3 compatibility suite did not finish within {SUITE_TIMEOUT:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        )
    };
    assert!(status.success(), "tests/s3compat failed ({status})\nstdout:\n{stdout}\nstderr:\n{stderr}");
    // A run that collected nothing exits 5 (not success), so a passing run executed tests.
    println!("tests/s3compat passed in {:.1} s:\n{}", elapsed.as_secs_f64(), stdout.lines().last().unwrap_or(""));
}
