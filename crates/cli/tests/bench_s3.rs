//! `lowtail bench s3` as a user runs it: a real process that starts its own cluster, runs a short
//! PUT, GET and DELETE phase, stops the cluster and prints exactly one JSON array.

use std::process::Command;

#[test]
fn bench_s3_quick_json_reports_put_get_and_delete_rows_without_errors() {
    let output = Command::new(env!("CARGO_BIN_EXE_lowtail"))
        .args(["bench", "s3", "--quick", "--duration-s", "1", "--sizes", "4KiB", "--concurrency", "2", "--json"])
        .output()
        .expect("lowtail runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "lowtail bench s3 failed: {}\n{stderr}", output.status);
    let rows: serde_json::Value = serde_json::from_slice(&output.stdout).expect("stdout is one JSON value");
    let rows = rows.as_array().expect("a JSON array");
    let ops: Vec<&str> = rows.iter().map(|row| row["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["put", "get", "delete"]);
    assert_eq!(rows[2]["requests"], rows[0]["requests"], "every object written is deleted once");
    for row in rows {
        assert_eq!(row["object_bytes"], 4096, "{row}");
        assert_eq!(row["concurrency"], 2, "{row}");
        assert!(row["requests"].as_u64().unwrap() > 0, "{row}");
        assert_eq!(row["errors"], 0, "{row}");
        assert!(row["ops_per_s"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["p50_ms"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["p99_ms"].as_f64().unwrap() >= row["p50_ms"].as_f64().unwrap(), "{row}");
        assert!(row["max_ms"].as_f64().unwrap() >= row["p99_ms"].as_f64().unwrap(), "{row}");
    }
}
