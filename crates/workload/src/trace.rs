//! Trace replay: a CSV or TSV file of `time, object_id, size` lines, as in
//! the WAS traces of Hu et al. (`<time>, <object id>, <size requested>`).
//!
//! Format: one request per line; fields separated by a comma, a tab or
//! both with spaces; `time` in seconds (decimal, parsed exactly to
//! nanoseconds, no float rounding; a non-zero digit past the nanosecond is
//! refused), `object_id` any token without
//! separators, `size` bytes (a positive integer). Blank lines and lines
//! starting with `#` are skipped; a first line whose time field is not a
//! number is a header. Lines need not be sorted: requests are replayed in
//! time order (ties keep file order).
//!
//! Objects are grouped at random (by the seed) into P equal partitions in
//! order of first appearance, each object's size being the largest size
//! requested for it, packed back to back. Must not: accept a malformed line
//! silently; every error names its line.

use crate::Workload;
use model::{NANOS_PER_SECOND, ObjectId, PartitionId, ReadRequest, RequestId};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;

/// Longest time a trace may span: 10 years of nanoseconds fit in u64 easily;
/// the bound catches unit mistakes (milliseconds given as seconds, ...).
const MAX_TIME_S: u64 = 10 * 365 * 24 * 3600;

/// A bad trace.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TraceError {
    /// The file could not be read.
    #[error("trace {path}: {reason}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A malformed line.
    #[error("trace line {line}: {reason}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// No request in the trace.
    #[error("trace has no request")]
    Empty,
    /// Fewer objects than partitions.
    #[error("trace has {objects} distinct objects; {partitions} partitions need at least as many")]
    TooFewObjects {
        /// Distinct objects.
        objects: usize,
        /// Partitions asked for.
        partitions: u32,
    },
}

/// One parsed trace line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRequest {
    /// Time since the trace's origin.
    pub time_ns: u64,
    /// Dense object index in order of first appearance.
    pub object: ObjectId,
    /// Bytes requested.
    pub size: u64,
}

/// A parsed trace: requests in time order and the original object names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// Requests, sorted by time.
    pub requests: Vec<TraceRequest>,
    /// `names[object]`: the id as written in the trace.
    pub names: Vec<String>,
}

fn parse_time_ns(field: &str) -> Result<u64, String> {
    let (whole, fraction) = field.split_once('.').unwrap_or((field, ""));
    if whole.is_empty() && fraction.is_empty() {
        return Err(format!("time {field:?} is not a number of seconds"));
    }
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(fraction) {
        return Err(format!("time {field:?} is not a non-negative decimal number of seconds"));
    }
    let seconds: u64 =
        if whole.is_empty() { 0 } else { whole.parse().map_err(|_| format!("time {field:?} is too large"))? };
    if seconds > MAX_TIME_S {
        return Err(format!("time {field:?} is more than ten years (is it in seconds?)"));
    }
    // Zeros past the nanosecond are harmless; anything else would be cut silently.
    if fraction.bytes().skip(9).any(|b| b != b'0') {
        return Err(format!("time {field:?} is finer than a nanosecond"));
    }
    let mut nanos = 0u64;
    for (i, b) in fraction.bytes().take(9).enumerate() {
        nanos += u64::from(b - b'0') * 10u64.pow(8 - i as u32);
    }
    Ok(seconds * NANOS_PER_SECOND + nanos)
}

/// Parses a trace's text.
pub fn read_trace(text: &str) -> Result<Trace, TraceError> {
    let mut requests = Vec::new();
    let mut names = Vec::new();
    let mut ids: HashMap<String, u64> = HashMap::new();
    let mut seen_data = false;
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = trimmed.split([',', '\t']).map(str::trim).collect();
        let error = |reason: String| TraceError::Line { line, reason };
        if fields.len() != 3 {
            return Err(error(format!("expected 3 fields (time, object_id, size), found {}", fields.len())));
        }
        let time_ns = match parse_time_ns(fields[0]) {
            Ok(t) => t,
            Err(_)
                if !seen_data
                    && fields[0].parse::<f64>().is_err()
                    && requests.is_empty()
                    && !fields[0].starts_with('-') =>
            {
                seen_data = true; // a header line
                continue;
            }
            Err(reason) => return Err(error(reason)),
        };
        seen_data = true;
        if fields[1].is_empty() {
            return Err(error("empty object_id".into()));
        }
        let size: u64 =
            fields[2].parse().map_err(|_| error(format!("size {:?} is not a whole number of bytes", fields[2])))?;
        if size == 0 {
            return Err(error("size 0: a read needs at least one byte".into()));
        }
        let next = names.len() as u64;
        let object = *ids.entry(fields[1].to_string()).or_insert_with(|| {
            names.push(fields[1].to_string());
            next
        });
        requests.push(TraceRequest { time_ns, object: ObjectId(object), size });
    }
    if requests.is_empty() {
        return Err(TraceError::Empty);
    }
    requests.sort_by_key(|r| r.time_ns);
    Ok(Trace { requests, names })
}

/// Groups a trace's objects at random into `partitions` equal partitions
/// and makes the workload; arrival times start at the first request.
pub fn trace_workload(trace: &Trace, partitions: u32, seed: u64) -> Result<Workload, TraceError> {
    let objects = trace.names.len();
    if partitions == 0 || objects < partitions as usize {
        return Err(TraceError::TooFewObjects { objects, partitions });
    }
    let mut sizes = vec![0u64; objects];
    for r in &trace.requests {
        sizes[r.object.index()] = sizes[r.object.index()].max(r.size);
    }
    let mut order: Vec<u32> = (0..objects as u32).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    // Slot s holds object order[s]: partition s % P, packed in slot order.
    let mut location = vec![(PartitionId(0), 0u64); objects];
    let mut fill = vec![0u64; partitions as usize];
    for (slot, &object) in order.iter().enumerate() {
        let partition = slot % partitions as usize;
        location[object as usize] = (PartitionId(partition as u32), fill[partition]);
        fill[partition] += sizes[object as usize];
    }
    let origin = trace.requests[0].time_ns;
    let requests: Vec<ReadRequest> = trace
        .requests
        .iter()
        .enumerate()
        .map(|(index, r)| {
            let (partition, offset) = location[r.object.index()];
            ReadRequest {
                id: RequestId(index as u64),
                object: r.object,
                partition,
                offset,
                length: r.size,
                arrival_ns: r.time_ns - origin,
                class: 0,
                latency_class: 0,
            }
        })
        .collect();
    let duration_ns = requests.last().map_or(0, |r| r.arrival_ns);
    let workload = Workload { partitions, requests, duration_ns };
    debug_assert!(workload.validate().is_ok());
    Ok(workload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_csv_and_tsv_with_header_comments_and_exact_times() {
        let text = "time,object_id,size\n# a comment\n0.5, a, 100\n\n1.000000001000\tb\t200\n0.25,a,50\n";
        let trace = read_trace(text).unwrap();
        assert_eq!(trace.names, vec!["a", "b"]);
        let times: Vec<u64> = trace.requests.iter().map(|r| r.time_ns).collect();
        assert_eq!(times, vec![250_000_000, 500_000_000, 1_000_000_001]);
        let workload = trace_workload(&trace, 2, 1).unwrap();
        workload.validate().unwrap();
        assert_eq!(workload.requests[0].arrival_ns, 0);
        assert_eq!(workload.requests.len(), 3);
    }

    #[test]
    fn bad_lines_are_named() {
        let cases = [
            ("0,a,1\n1,b\n", 2, "expected 3 fields"),
            ("0,a,1\nx,b,2\n", 2, "not a non-negative decimal"),
            ("0,a,1\n1,b,-2\n", 2, "not a whole number"),
            ("0,a,1\n\n1,b,0\n", 3, "size 0"),
            ("-1,a,1\n", 1, "not a non-negative decimal"),
            ("0,,1\n", 1, "empty object_id"),
            ("99999999999,a,1\n", 1, "ten years"),
            ("0,a,1\n1.0000000001,b,1\n", 2, "finer than a nanosecond"),
        ];
        for (text, line, words) in cases {
            match read_trace(text) {
                Err(TraceError::Line { line: got, reason }) => {
                    assert_eq!(got, line, "{text:?}: {reason}");
                    assert!(reason.contains(words), "{text:?}: {reason}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        assert_eq!(read_trace("# nothing\n"), Err(TraceError::Empty));
        let trace = read_trace("0,a,1\n").unwrap();
        assert_eq!(trace_workload(&trace, 2, 1), Err(TraceError::TooFewObjects { objects: 1, partitions: 2 }));
    }

    #[test]
    fn objects_are_spread_evenly_and_packed() {
        let text: String = (0..100).map(|i| format!("{i},obj{},{}\n", i % 40, 10 + i % 40)).collect();
        let workload = trace_workload(&read_trace(&text).unwrap(), 4, 7).unwrap();
        let mut per_partition = vec![std::collections::BTreeMap::new(); 4];
        for r in &workload.requests {
            per_partition[r.partition.index()].insert(r.offset, r.length);
        }
        for objects in per_partition {
            assert_eq!(objects.len(), 10);
            let mut next = 0;
            for (offset, length) in objects {
                assert_eq!(offset, next);
                next += length;
            }
        }
    }
}
