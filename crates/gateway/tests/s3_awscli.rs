//! aws-cli v2 against a real S3 server: runs `tests/awscli.sh` (mb, cp up and down with a multipart
//! upload, server-side cp and mv between buckets with CopyObject and UploadPartCopy, ls, rm, rb).
//! Skipped, with a message, when `/usr/bin/aws` (Debian's aws-cli v2) is absent.

mod s3_common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gateway::s3::S3Options;
use s3_common::*;

/// The whole script (including a ~20 MiB upload and download) must finish within this.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_cli_drives_the_gateway() {
    // Debian's aws-cli v2; an `aws` elsewhere on PATH may be v1 or a shim.
    let aws = Path::new("/usr/bin/aws");
    if !aws.exists() {
        println!("skipped: /usr/bin/aws (aws-cli v2) is not installed");
        return;
    }
    let server = start_with(S3Options::default()).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/awscli.sh");
    let endpoint = server.endpoint.clone();
    let aws = aws.to_path_buf();
    let outcome = tokio::task::spawn_blocking(move || {
        let mut child = Command::new("bash")
            .arg(&script)
            .args([endpoint.as_str(), ACCESS_KEY, SECRET_KEY])
            .arg(&aws)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start awscli.sh");
        let deadline = Instant::now() + SCRIPT_TIMEOUT;
        // Polls until the script exits or the deadline passes: bounded by SCRIPT_TIMEOUT.
        loop {
            if child.try_wait().expect("wait for awscli.sh").is_some() {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        child.wait_with_output().expect("awscli.sh output")
    })
    .await
    .expect("awscli.sh task");
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    let stderr = String::from_utf8_lossy(&outcome.stderr);
    assert!(outcome.status.success(), "awscli.sh failed ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}", outcome.status);
    assert!(stdout.contains("aws-cli: all steps passed"), "{stdout}");
    assert_eq!(server.data.live_stripes(), 0, "everything the script removed was released");
}
