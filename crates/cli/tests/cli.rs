//! End-to-end checks of the `lowtail` binary: the commands the README and
//! CI rely on run, exit as they should, and print what they promise.

use std::process::{Command, Output};

fn lowtail(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowtail")).args(args).env_remove("LOWTAIL_ENGINE").output().expect("run lowtail")
}

#[test]
fn bench_codec_json_is_one_array_of_complete_rows() {
    let output =
        lowtail(&["bench", "codec", "--quick", "--json", "--unit-sizes", "4KiB", "--codes", "rs-6-3", "--runs", "3"]);
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&output.stdout).expect("stdout is exactly one JSON value");
    let rows = rows.as_array().expect("a JSON array");
    // Encode, decode with 1 lost, decode with 3 lost.
    assert_eq!(rows.len(), 3, "{rows:?}");
    for row in rows {
        assert_eq!(row["code"], "rs-6-3");
        assert_eq!(row["k"], 6);
        assert_eq!(row["m"], 3);
        assert_eq!(row["unit_bytes"], 4096);
        assert!(row["gbps"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["ceiling_gbps"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["engine"].as_str().is_some_and(|name| !name.is_empty()), "{row}");
    }
    let ops: Vec<(&str, u64)> =
        rows.iter().map(|row| (row["op"].as_str().unwrap(), row["lost"].as_u64().unwrap())).collect();
    assert_eq!(ops, vec![("encode", 0), ("decode", 1), ("decode", 3)]);
    assert!(rows[0]["baseline_gbps"].as_f64().unwrap() > 0.0);
}

#[test]
fn bench_codec_table_names_engine_and_ceiling() {
    let output =
        lowtail(&["bench", "codec", "--quick", "--unit-sizes", "4KiB", "--codes", "rs-6-3", "--engine", "portable"]);
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    for expected in ["rs-6-3", "4 KiB", "portable", "XOR ceiling"] {
        assert!(text.contains(expected), "{expected:?} missing from\n{text}");
    }
}

#[test]
fn bad_input_is_a_clear_error_with_nonzero_exit() {
    for (args, expected) in [
        (&["bench", "codec", "--engine", "avx9"][..], "unknown engine"),
        (&["bench", "codec", "--codes", "rs-0-3"][..], "rs-0-3"),
        (&["bench", "codec", "--codes", "lrc-6-2-2", "--quick"][..], "RS codes"),
        (&["bench", "codec", "--unit-sizes", "64KB"][..], "64KB"),
        (&["bench", "codec", "--runs", "0"][..], "--runs"),
    ] {
        let output = lowtail(args);
        assert!(!output.status.success(), "{args:?} succeeded");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{args:?}: {expected:?} missing from {stderr}");
        assert!(output.stdout.is_empty(), "{args:?} printed to stdout");
    }
    let output =
        Command::new(env!("CARGO_BIN_EXE_lowtail")).args(["engines"]).env("LOWTAIL_ENGINE", "nope").output().unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("LOWTAIL_ENGINE"));
}

#[test]
fn engines_marks_one_chosen_engine() {
    let output = lowtail(&["engines"]);
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert_eq!(text.lines().filter(|line| line.starts_with('*')).count(), 1, "{text}");
    assert!(text.contains("reference"), "{text}");
}

#[test]
fn every_command_explains_itself() {
    for args in [&["--help"][..], &["bench", "--help"], &["bench", "codec", "--help"], &["engines", "--help"]] {
        let output = lowtail(args);
        assert!(output.status.success(), "{args:?}");
        assert!(!output.stdout.is_empty(), "{args:?}");
    }
    let help = String::from_utf8(lowtail(&["bench", "codec", "--help"]).stdout).unwrap();
    assert!(help.contains("--unit-sizes") && help.contains("ceiling"), "{help}");
}
