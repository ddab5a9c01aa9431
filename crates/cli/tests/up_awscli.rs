//! The README's story with a real external client: `lowtail up` as a process, aws-cli v2
//! (`/usr/bin/aws`, Debian's) against it: the aws-cli script (mb, cp up and down including a
//! multipart upload, ls, rm, rb), then an upload, three storage nodes killed with SIGKILL, and the
//! download still byte-identical. Without `/usr/bin/aws` the test fails unless
//! `LOWTAIL_SKIP_AWSCLI=1` (`scripts/test` installs it).

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{interrupt, pseudo_random, signal, start_up, wait_for_manifest};

const AWS: &str = "/usr/bin/aws";

/// `aws --endpoint-url ENDPOINT s3 ARGS...` with the cluster's credentials and nothing from the
/// environment (a developer's profile or bundle must not change what the test sees).
fn aws(manifest: &launcher::Manifest, args: &[&str]) -> Output {
    Command::new(AWS)
        .args(["--endpoint-url", &manifest.endpoint, "s3"])
        .args(args)
        .env_remove("AWS_CA_BUNDLE")
        .env_remove("AWS_PROFILE")
        .env("AWS_ACCESS_KEY_ID", &manifest.access_key)
        .env("AWS_SECRET_ACCESS_KEY", &manifest.secret_key)
        .env("AWS_DEFAULT_REGION", &manifest.region)
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("run aws")
}

fn assert_ok(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn aws_cli_against_lowtail_up_loses_nothing_when_three_nodes_die() {
    if !Path::new(AWS).exists() {
        assert!(
            std::env::var("LOWTAIL_SKIP_AWSCLI").is_ok_and(|v| v == "1"),
            "{AWS} (aws-cli v2) is missing: apt-get install awscli, or set LOWTAIL_SKIP_AWSCLI=1"
        );
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster");
    let mut up = start_up(&dir);
    let manifest = wait_for_manifest(&dir, &mut up);

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gateway/tests/awscli.sh");
    let output = Command::new("bash")
        .arg(&script)
        .args([&manifest.endpoint, &manifest.access_key, &manifest.secret_key, AWS])
        .output()
        .expect("run awscli.sh");
    assert_ok(&output, "awscli.sh against lowtail up");

    let files = temp.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let small = pseudo_random(3000, 1);
    let large = pseudo_random((12 << 20) + 5, 2);
    std::fs::write(files.join("small.bin"), &small).unwrap();
    std::fs::write(files.join("large.bin"), &large).unwrap();
    assert_ok(&aws(&manifest, &["mb", "s3://survivors"]), "mb");
    let source = files.to_str().unwrap();
    assert_ok(&aws(&manifest, &["cp", "--recursive", "--no-progress", source, "s3://survivors/in/"]), "upload");

    for node in &manifest.nodes[..3] {
        signal(node.pid, libc::SIGKILL);
    }
    let back = temp.path().join("back");
    let target = back.to_str().unwrap();
    assert_ok(&aws(&manifest, &["cp", "--recursive", "--no-progress", "s3://survivors/in/", target]), "download");
    assert!(std::fs::read(back.join("small.bin")).unwrap() == small, "small object differs with 3 nodes dead");
    assert!(std::fs::read(back.join("large.bin")).unwrap() == large, "large object differs with 3 nodes dead");
    let listing = aws(&manifest, &["ls", "s3://survivors/in/"]);
    assert_ok(&listing, "ls");
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(listing.contains("small.bin") && listing.contains("large.bin"), "{listing}");
    interrupt(up);
}
