//! rclone (`/usr/bin/rclone`, Debian's) as a real external client of `lowtail up` started as a
//! process, configured only through its command line (an on-the-fly `:s3,...:` remote, the one
//! docs/cluster.md shows, and no config file): mkdir, a tree of 0 B, KiB-sized and a 20 MiB
//! multipart object copied up, listed (sizes, modification times, paginated v1 and v2 listings,
//! URL-encoded keys), checked by MD5 (`rclone check`, which for the multipart object reads the MD5
//! rclone stored in its metadata), read by range (`rclone cat --offset --count`), copied back down
//! byte for byte, synced after a local delete, synced after files were touched (rclone sets their
//! new modification times with a CopyObject of each object onto itself) and changed, copied and
//! moved server-side (CopyObject) between and within buckets, `delete` and `purge`, no command
//! logging an error; then three storage nodes killed with SIGKILL and the check and the download
//! still identical. Without `/usr/bin/rclone` the test fails unless `LOWTAIL_SKIP_RCLONE=1`
//! (`scripts/test` installs it).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use common::{interrupt, kill_and_wait, pseudo_random, start_up, wait_for_manifest};

const RCLONE: &str = "/usr/bin/rclone";

/// Bytes of the multipart object: four 5 MiB parts and a short fifth one.
const BIG: usize = (20 << 20) + 12_345;

/// The remote for the cluster, as an rclone connection string (docs/cluster.md shows the same).
fn remote(manifest: &launcher::Manifest) -> String {
    format!(
        ":s3,provider=Other,endpoint='{}',access_key_id={},secret_access_key={},region={},\
         force_path_style=true,list_version=2,list_url_encode=true,use_multipart_etag=true:",
        manifest.endpoint, manifest.access_key, manifest.secret_key, manifest.region
    )
}

/// `rclone ARGS...` with no config file, nothing from the environment's `RCLONE_*` or `AWS_*`
/// variables (Debian sets AWS_CA_BUNDLE), parts of 5 MiB from 5 MiB on, and no retries, so that a
/// failing request fails the command instead of being retried away.
fn rclone(config: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(RCLONE);
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("RCLONE_") || name.starts_with("AWS_") {
            command.env_remove(&*name);
        }
    }
    command
        .env("RCLONE_CONFIG", config)
        .args(args)
        .args(["--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M"])
        .args(["--retries", "1", "--low-level-retries", "1"])
        .output()
        .expect("run rclone")
}

/// The command succeeded without logging an error (rclone logs some failures, such as an operation
/// the server does not implement, and carries on); returns its stdout.
fn assert_ok(output: &Output, what: &str) -> String {
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && !log.contains("ERROR"),
        "rclone {what}: {}\n{log}",
        String::from_utf8_lossy(&output.stdout),
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `rclone check` of the local tree against the remote path: every file compared by size and MD5,
/// none missing on either side, none whose hash could not be compared.
fn assert_check(config: &Path, local: &Path, remote_path: &str, files: usize) {
    let output = rclone(config, &["check", local.to_str().unwrap(), remote_path]);
    assert_ok(&output, "check");
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("0 differences found"), "{log}");
    assert!(log.contains(&format!("{files} matching files")), "{log}");
    assert!(!log.contains("could not be checked"), "every hash must be compared: {log}");
}

/// `rclone lsjson -R --files-only --hash` of `path`: (path, size, MD5, modification time) per object.
fn list(config: &Path, path: &str, extra: &[&str]) -> Vec<(String, u64, String, String)> {
    let output = rclone(config, &[&["lsjson", "-R", "--files-only", "--hash", path], extra].concat());
    let stdout = assert_ok(&output, "lsjson");
    let entries: serde_json::Value = serde_json::from_str(&stdout).expect("lsjson prints JSON");
    let mut entries: Vec<_> = entries
        .as_array()
        .expect("lsjson prints an array")
        .iter()
        .map(|entry| {
            (
                entry["Path"].as_str().unwrap().to_string(),
                entry["Size"].as_u64().unwrap(),
                entry["Hashes"]["md5"].as_str().unwrap_or("").to_string(),
                entry["ModTime"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    entries.sort();
    entries
}

/// The local tree's files as `list` reports them, from the files themselves.
fn local_listing(config: &Path, root: &Path) -> Vec<(String, u64, String, String)> {
    list(config, root.to_str().unwrap(), &[])
}

fn assert_same_files(expected: &[(PathBuf, Vec<u8>)], root: &Path, what: &str) {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    found.sort();
    let mut names: Vec<_> = expected.iter().map(|(name, _)| name.clone()).collect();
    names.sort();
    assert_eq!(found, names, "{what}: the downloaded tree has other files");
    for (name, bytes) in expected {
        assert!(std::fs::read(root.join(name)).unwrap() == *bytes, "{what}: {} differs", name.display());
    }
}

#[test]
fn rclone_against_lowtail_up_copies_checks_syncs_and_loses_nothing_when_three_nodes_die() {
    if !Path::new(RCLONE).exists() {
        assert!(
            std::env::var("LOWTAIL_SKIP_RCLONE").is_ok_and(|v| v == "1"),
            "{RCLONE} is missing: apt-get install rclone, or set LOWTAIL_SKIP_RCLONE=1"
        );
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("rclone.conf");
    let dir = temp.path().join("cluster");
    let mut up = start_up(&dir);
    let manifest = wait_for_manifest(&dir, &mut up);
    let remote = remote(&manifest);
    let at = |path: &str| format!("{remote}{path}");

    // The local tree: an empty file, KiB-sized files (one with a space, a plus and a non-ASCII
    // letter in its name), and one that rclone uploads in five parts.
    let tree = temp.path().join("tree");
    let mut files: Vec<(PathBuf, Vec<u8>)> = vec![
        ("empty.txt".into(), Vec::new()),
        ("small.txt".into(), pseudo_random(3 << 10, 1)),
        ("docs/notes.bin".into(), pseudo_random((5 << 10) + 7, 2)),
        ("docs/deep/a file+é.bin".into(), pseudo_random(1 << 10, 3)),
        ("big.bin".into(), pseudo_random(BIG, 4)),
    ];
    let mtime = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for (name, bytes) in &files {
        let path = tree.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
    }
    let local = tree.to_str().unwrap();

    assert_ok(&rclone(&config, &["mkdir", &at("photos")]), "mkdir");
    let buckets = assert_ok(&rclone(&config, &["lsd", &remote]), "lsd");
    assert!(buckets.contains(" photos"), "{buckets}");
    assert_ok(&rclone(&config, &["copy", local, &at("photos/tree")]), "copy up");

    // Listings: every object with its size, MD5 and modification time (rclone keeps the mtime in
    // x-amz-meta-mtime and the multipart object's MD5 in x-amz-meta-md5chksum), the same with
    // pages of two keys, through ListObjectsV2 and through ListObjects v1.
    let expected = local_listing(&config, &tree);
    assert_eq!(expected.len(), files.len());
    assert_eq!(list(&config, &at("photos/tree"), &[]), expected, "lsjson");
    assert_eq!(list(&config, &at("photos/tree"), &["--s3-list-chunk", "2"]), expected, "lsjson, pages of 2");
    let v1 = list(&config, &at("photos/tree"), &["--s3-list-chunk", "2", "--s3-list-version", "1"]);
    assert_eq!(v1, expected, "lsjson through ListObjects v1, pages of 2");
    let ls = assert_ok(&rclone(&config, &["ls", &at("photos")]), "ls");
    assert!(ls.contains(&format!("{BIG} tree/big.bin")), "{ls}");
    assert!(ls.contains("0 tree/empty.txt"), "{ls}");
    assert!(ls.contains("1024 tree/docs/deep/a file+é.bin"), "{ls}");

    assert_check(&config, &tree, &at("photos/tree"), files.len());

    // A ranged read across the first part boundary of the multipart object.
    let (offset, count) = ((5 << 20) - 1000, 3000);
    let cat = rclone(
        &config,
        &["cat", "--offset", &offset.to_string(), "--count", &count.to_string(), &at("photos/tree/big.bin")],
    );
    assert_ok(&cat, "cat --offset --count");
    assert!(cat.stdout == files[4].1[offset..offset + count], "ranged read differs");

    let back = temp.path().join("back");
    assert_ok(&rclone(&config, &["copy", &at("photos/tree"), back.to_str().unwrap()]), "copy down");
    assert_same_files(&files, &back, "copy down");

    // sync removes the remote copy of a file deleted locally.
    std::fs::remove_file(tree.join("small.txt")).unwrap();
    files.retain(|(name, _)| name != Path::new("small.txt"));
    assert_ok(&rclone(&config, &["sync", local, &at("photos/tree")]), "sync");
    let after_sync = list(&config, &at("photos/tree"), &[]);
    assert!(after_sync.iter().all(|(path, ..)| path != "small.txt"), "{after_sync:?}");
    assert_eq!(after_sync.len(), files.len());
    assert_check(&config, &tree, &at("photos/tree"), files.len());

    // Files only touched keep their bytes: rclone stores the new modification time by copying each
    // object onto itself with new metadata (CopyObject, REPLACE), the multipart one too; a changed
    // file is uploaded again.
    for (name, later) in [("docs/notes.bin", 60), ("big.bin", 120)] {
        let file = std::fs::File::options().write(true).open(tree.join(name)).unwrap();
        file.set_modified(mtime + Duration::from_secs(later)).unwrap();
    }
    let changed = Path::new("docs/deep/a file+é.bin");
    let bytes = &mut files.iter_mut().find(|(name, _)| name == changed).unwrap().1;
    *bytes = pseudo_random(1 << 10, 5);
    std::fs::write(tree.join(changed), &bytes).unwrap();
    let sync = rclone(&config, &["sync", "-v", local, &at("photos/tree")]);
    assert_ok(&sync, "sync after touching");
    let log = String::from_utf8_lossy(&sync.stderr);
    assert!(log.contains("a file+é.bin: Copied (replaced existing)"), "{log}");
    for touched in ["docs/notes.bin", "big.bin"] {
        assert!(log.contains(&format!("{touched}: Updated modification time in destination")), "{log}");
    }
    assert_eq!(list(&config, &at("photos/tree"), &[]), local_listing(&config, &tree), "sizes, MD5s and times");
    assert_check(&config, &tree, &at("photos/tree"), files.len());

    // Server-side copies between buckets and a server-side move within one (CopyObject); delete
    // removes the objects under a path; purge removes a bucket with everything in it.
    let copied = rclone(&config, &["copy", "-v", &at("photos/tree"), &at("scratch/tree")]);
    assert_ok(&copied, "server-side copy to scratch");
    let log = String::from_utf8_lossy(&copied.stderr);
    assert_eq!(log.matches("Copied (server-side copy)").count(), files.len(), "{log}");
    assert_check(&config, &tree, &at("scratch/tree"), files.len());
    assert_ok(&rclone(&config, &["delete", &at("scratch/tree/docs")]), "delete");
    let moved = rclone(&config, &["moveto", "-v", &at("scratch/tree/empty.txt"), &at("scratch/moved.txt")]);
    assert_ok(&moved, "server-side moveto");
    let log = String::from_utf8_lossy(&moved.stderr);
    // rclone moves within a remote by a server-side copy and a delete.
    assert!(log.contains("empty.txt: Copied (server-side copy) to: moved.txt"), "{log}");
    assert!(log.contains("empty.txt: Deleted"), "{log}");
    let left: Vec<_> = list(&config, &at("scratch"), &[]).into_iter().map(|(path, size, ..)| (path, size)).collect();
    assert_eq!(left, [("moved.txt".to_string(), 0), ("tree/big.bin".to_string(), BIG as u64)]);
    assert_ok(&rclone(&config, &["purge", &at("scratch")]), "purge");
    let buckets = assert_ok(&rclone(&config, &["lsd", &remote]), "lsd after purge");
    assert!(buckets.contains(" photos") && !buckets.contains("scratch"), "{buckets}");

    // Three storage nodes die: check and download are still identical (degraded reads).
    for node in &manifest.nodes[..3] {
        kill_and_wait(node.pid);
    }
    assert_check(&config, &tree, &at("photos/tree"), files.len());
    let survivors = temp.path().join("survivors");
    assert_ok(&rclone(&config, &["copy", &at("photos/tree"), survivors.to_str().unwrap()]), "copy down, 3 dead");
    assert_same_files(&files, &survivors, "copy down with 3 nodes dead");
    interrupt(up);
}
