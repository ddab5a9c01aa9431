//! Tidy: the crates of the scheduling spine (model, policy, optimize, sim,
//! workload, execution) stay free of async runtimes, wall clocks, threads and unseeded
//! randomness, and every module opens with a doc comment. Benchmarks are
//! exempt (they measure wall time on purpose).

use std::path::{Path, PathBuf};

const SPINE: [&str; 6] = ["model", "policy", "optimize", "sim", "workload", "execution"];

/// Banned spellings, built from pieces so that this file does not trip itself.
fn banned() -> Vec<String> {
    [["to", "kio"].concat(), ["Instant", "::now"].concat(), ["System", "Time"].concat(), ["thread", "_rng"].concat()]
        .into_iter()
        .chain([["std::thread", "::spawn"].concat(), ["thread", "::spawn"].concat(), ["rand::", "rng()"].concat()])
        // Randomness seeded by the operating system, not by the run's seed.
        .chain([
            ["rand::", "random"].concat(),
            ["Os", "Rng"].concat(),
            ["from_", "os_rng"].concat(),
            ["from_", "entropy"].concat(),
            ["get", "random"].concat(),
        ])
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "benches" || n == "target") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn spine_files() -> Vec<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let mut files = Vec::new();
    for name in SPINE {
        rust_files(&crates.join(name), &mut files);
    }
    files
}

#[test]
fn spine_crates_use_no_clock_thread_runtime_or_unseeded_rng() {
    let files = spine_files();
    assert!(files.len() >= 10, "tidy found only {} files; is the layout still crates/NAME?", files.len());
    let mut offences = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        for (number, line) in text.lines().enumerate() {
            for word in banned() {
                if line.contains(&word) {
                    offences.push(format!("{}:{}: {word}", path.display(), number + 1));
                }
            }
        }
    }
    assert!(offences.is_empty(), "banned in the spine crates:\n{}", offences.join("\n"));
}

#[test]
fn spine_manifests_do_not_depend_on_an_async_runtime() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    for name in SPINE {
        let manifest = crates.join(name).join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        assert!(!text.contains(&["to", "kio"].concat()), "{} depends on an async runtime", manifest.display());
        assert!(
            text.contains("[lints]") && text.contains("workspace = true"),
            "{} must use the workspace lints",
            manifest.display()
        );
    }
}

#[test]
fn every_module_opens_with_a_doc_comment() {
    for path in spine_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        assert!(first.starts_with("//!"), "{} does not open with a //! doc comment", path.display());
    }
}
