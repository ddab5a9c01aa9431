//! Several gateways' records as one run: each gateway's clock (arbitrary origin) moved onto the load
//! generator's, every record renamed into the simulator's ids, then all in arrival order with
//! request ids `0..n` and the gateway as the frontend.
//!
//! Owns: the clock alignment: the k-th request a gateway received is the k-th one the client sent
//! it, so the median of their differences is the offset between the two clocks (a few reordered
//! requests move a median little). Must not: change a duration (only origins move), or drop a
//! record silently.

use crate::live::placement::LivePlacement;
use anyhow::ensure;
use model::{FrontendId, NEVER, Record, RequestId, RequestRecord};

/// The offset (client time minus gateway time, ns) that puts `records` of one gateway onto the
/// clock of `sent_ns`, the client's send times of the requests it sent that gateway.
pub fn clock_offset_ns(records: &[Record], sent_ns: &[u64]) -> Option<i128> {
    let mut arrivals: Vec<u64> = records.iter().map(|r| r.request.arrival_ns).collect();
    arrivals.sort_unstable();
    let mut sent = sent_ns.to_vec();
    sent.sort_unstable();
    let mut differences: Vec<i128> = arrivals.iter().zip(&sent).map(|(&a, &s)| i128::from(s) - i128::from(a)).collect();
    if differences.is_empty() {
        return None;
    }
    differences.sort_unstable();
    Some(differences[(differences.len() - 1) / 2])
}

fn shift(time_ns: u64, offset_ns: i128) -> u64 {
    if time_ns == NEVER { NEVER } else { (i128::from(time_ns) + offset_ns).clamp(0, i128::from(NEVER - 1)) as u64 }
}

/// Moves every timestamp of `record` (request and tasks) by `offset_ns`; durations stay.
fn shift_record(record: &mut Record, offset_ns: i128) {
    let request = &mut record.request;
    for time in [
        &mut request.arrival_ns,
        &mut request.decision_start_ns,
        &mut request.decision_end_ns,
        &mut request.completion_ns,
    ] {
        *time = shift(*time, offset_ns);
    }
    for task in &mut record.tasks {
        for time in [&mut task.enqueue_ns, &mut task.start_ns, &mut task.finish_ns, &mut task.cancel_ns] {
            *time = shift(*time, offset_ns);
        }
    }
}

/// Merges `per_gateway[g]` (gateway `g`'s records) using the client's records `client` (whose
/// `frontend` is the gateway and `decision_start_ns` the send time). Fails when a record names a
/// stripe outside the placement (a read the data set does not explain).
pub fn merge(
    per_gateway: &[Vec<Record>],
    client: &[RequestRecord],
    placement: &LivePlacement,
) -> anyhow::Result<Vec<Record>> {
    let mut merged = Vec::with_capacity(per_gateway.iter().map(Vec::len).sum());
    for (gateway, records) in per_gateway.iter().enumerate() {
        let frontend = FrontendId(gateway as u16);
        let sent: Vec<u64> = client.iter().filter(|r| r.frontend == frontend).map(|r| r.decision_start_ns).collect();
        let offset = clock_offset_ns(records, &sent).unwrap_or(0);
        for record in records {
            let renamed = placement.rename(record);
            ensure!(
                renamed.is_some(),
                "gateway {gateway} recorded a read of stripe {}, which holds no object of the data set",
                record.request.object.0
            );
            let mut record = renamed.expect("checked");
            record.request.frontend = frontend;
            shift_record(&mut record, offset);
            merged.push(record);
        }
    }
    merged.sort_by_key(|r| (r.request.arrival_ns, r.request.frontend.0, r.request.request.0));
    for (index, record) in merged.iter_mut().enumerate() {
        record.request.request = RequestId(index as u64);
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_difference_aligns_clocks_and_never_stays_never() {
        let record = |arrival: u64| {
            let mut r: Record = serde_json::from_value(serde_json::json!({
                "request": 0, "frontend": 0, "object": 1, "partition": 0, "bytes": 1,
                "arrival_ns": arrival, "decision_start_ns": arrival, "decision_end_ns": arrival + 5,
                "completion_ns": arrival + 50, "probes": 0, "degraded": false, "timed_out": false,
                "outcome": "ok", "tasks": []
            }))
            .unwrap();
            r.request.arrival_ns = arrival;
            r
        };
        // Gateway clock = client clock + 1_000_000, one pair reordered by the network.
        let records: Vec<Record> = [1_000_100, 1_000_300, 1_000_200, 1_000_900].iter().map(|&a| record(a)).collect();
        let offset = clock_offset_ns(&records, &[100, 200, 300, 905]).unwrap();
        assert_eq!(offset, -1_000_000);
        assert_eq!(shift(NEVER, offset), NEVER);
        assert_eq!(shift(1_000_050, offset), 50);
        assert_eq!(shift(10, offset), 0, "clamped at the origin");
        assert_eq!(clock_offset_ns(&[], &[1]), None);
    }

    #[test]
    fn shifting_a_record_moves_every_timestamp_and_keeps_never() {
        let mut record: Record = serde_json::from_value(serde_json::json!({
            "request": 0, "frontend": 0, "object": 1, "partition": 0, "bytes": 1,
            "arrival_ns": 1_000, "decision_start_ns": 1_010, "decision_end_ns": 1_020,
            "completion_ns": 1_500, "probes": 0, "degraded": true, "timed_out": false,
            "outcome": "ok", "tasks": [
                {"node": 0, "unit": 0, "role": "Normal", "cancelled": true, "bytes": 1,
                 "enqueue_ns": 1_030, "start_ns": 1_040, "finish_ns": NEVER, "cancel_ns": 1_490},
                {"node": 1, "unit": 6, "role": "Degraded", "cancelled": false, "bytes": 1,
                 "enqueue_ns": 1_030, "start_ns": 1_035, "finish_ns": 1_400}
            ]
        }))
        .unwrap();
        shift_record(&mut record, -1_000);
        let r = &record.request;
        assert_eq!((r.arrival_ns, r.decision_start_ns, r.decision_end_ns, r.completion_ns), (0, 10, 20, 500));
        let t = &record.tasks;
        assert_eq!((t[0].enqueue_ns, t[0].start_ns, t[0].finish_ns, t[0].cancel_ns), (30, 40, NEVER, 490));
        assert_eq!((t[1].enqueue_ns, t[1].start_ns, t[1].finish_ns, t[1].cancel_ns), (30, 35, 400, NEVER));
        assert!(t.iter().all(|t| t.validate().is_ok()));
    }
}
