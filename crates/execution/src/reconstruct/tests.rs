//! Every method's dataflow run over real bytes (each transfer the sum of its inputs plus the
//! sender's coefficient times its packet) rebuilds the lost unit exactly, for RS codes and every
//! lost unit; the lists are the paper's; the bytes per site are APLS's §III-B3 accounting.

use super::*;
use codec::{CodeSpec, ErasureCode};

fn methods(k: u16, q: u16) -> Vec<Method> {
    let mut all = vec![Method::GatewayDecode, Method::Traditional, Method::Ppr, Method::Ecpipe];
    for assignment in [Assignment::RoundRobin, Assignment::Contiguous] {
        for inner in [Inner::Chain, Inner::Star] {
            all.push(Method::Apls { q, inner, assignment });
            all.push(Method::Apls { q: k, inner, assignment });
        }
        all.push(Method::Segmented { q, assignment });
    }
    all
}

/// Units of a stripe of `spec` whose data units are a pattern.
fn stripe(spec: CodeSpec, unit_bytes: usize) -> (Box<dyn ErasureCode>, Vec<Vec<u8>>) {
    let code = spec.build().unwrap();
    let k = code.data_units();
    let data: Vec<Vec<u8>> = (0..k).map(|u| (0..unit_bytes).map(|i| (i * 31 + u * 7 + 1) as u8).collect()).collect();
    let mut parity = vec![vec![0u8; unit_bytes]; code.total_units() - k];
    let data_refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    let mut parity_refs: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
    code.encode(&data_refs, &mut parity_refs).unwrap();
    (code, data.into_iter().chain(parity).collect())
}

/// Runs `flow` over the units, source i being `sources[i]`; returns the requestor's range.
fn run(flow: &Dataflow, code: &dyn ErasureCode, units: &[Vec<u8>], lost: usize, sources: &[usize]) -> Vec<u8> {
    let mut payloads: Vec<Vec<u8>> = Vec::with_capacity(flow.transfers.len());
    let mut out = vec![0u8; flow.range_bytes as usize];
    let coefficients: Vec<Vec<u8>> = (0..flow.packets())
        .map(|packet| {
            let members: Vec<usize> = flow.members(packet).iter().map(|&s| sources[usize::from(s)]).collect();
            if flow.method == Method::Normal {
                return vec![1];
            }
            code.repair_coefficients(lost, &members).unwrap()
        })
        .collect();
    for (index, t) in flow.transfers.iter().enumerate() {
        let offset = flow.packet_offset(t.packet) as usize;
        let mut payload = vec![0u8; t.bytes as usize];
        for &input in &t.after {
            assert!((input as usize) < index, "a transfer comes after its inputs");
            assert_eq!(flow.transfers[input as usize].to, t.from, "an input reaches the sender");
            for (p, x) in payload.iter_mut().zip(&payloads[input as usize]) {
                *p ^= x;
            }
        }
        if t.reads_local {
            let Site::Source(s) = t.from else { panic!("the requestor holds no unit") };
            let members = flow.members(t.packet);
            let position = members.iter().position(|&m| m == s).unwrap();
            let c = coefficients[t.packet as usize][position];
            let unit = if flow.method == Method::Normal { lost } else { sources[usize::from(s)] };
            for (p, x) in payload.iter_mut().zip(&units[unit][offset..offset + t.bytes as usize]) {
                *p ^= codec::gf::mul(c, *x);
            }
        }
        if t.to == Site::Requestor {
            for (o, x) in out[offset..].iter_mut().zip(&payload) {
                *o ^= x;
            }
        }
        payloads.push(payload);
    }
    out
}

#[test]
fn every_method_rebuilds_every_lost_unit_of_rs_codes_exactly() {
    for (k, m) in [(4u16, 2u16), (6, 3), (10, 4)] {
        let spec = CodeSpec::Rs { k: usize::from(k), m: usize::from(m) };
        let unit_bytes = 1_000;
        let (code, units) = stripe(spec, unit_bytes);
        for lost in 0..usize::from(k + m) {
            // Survivors in an order that is not the units' (a policy's choice of agents).
            let mut sources: Vec<usize> = (0..usize::from(k + m)).filter(|&u| u != lost).collect();
            let turn = lost % sources.len();
            sources.rotate_left(turn);
            let q = k + m - 1;
            for method in methods(k, q) {
                for packet_bytes in [64, 100, 333, 1_000, 4_096] {
                    let flow = Dataflow::build(method, k, unit_bytes as u64, packet_bytes).unwrap();
                    let rebuilt = run(&flow, code.as_ref(), &units, lost, &sources);
                    assert!(rebuilt == units[lost], "{} k {k} lost {lost} packets of {packet_bytes}", method.name());
                }
            }
        }
        let normal = Dataflow::build(Method::Normal, k, unit_bytes as u64, 300).unwrap();
        assert_eq!(run(&normal, code.as_ref(), &units, 2, &[2]), units[2]);
    }
}

#[test]
fn lists_are_the_papers_each_agent_in_k_of_them_and_list_j_ending_at_f_j() {
    assert_eq!(list(3, 5, 4), vec![0, 1, 2, 3], "Fig. 6: r_3 = {{F0, F1, F2, F3}}");
    assert_eq!(list(0, 5, 4), vec![2, 3, 4, 0]);
    for (q, k) in [(13u16, 10u16), (11, 6), (6, 6), (5, 4)] {
        let mut count = vec![0; usize::from(q)];
        for j in 0..q {
            let members = list(j, q, k);
            assert_eq!(*members.last().unwrap(), j);
            let mut distinct = members.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(distinct.len(), usize::from(k));
            for m in members {
                count[usize::from(m)] += 1;
            }
        }
        assert!(count.iter().all(|&c| c == k), "every agent is in k lists");
    }
}

#[test]
fn bytes_per_site_follow_the_papers_accounting() {
    let (k, q, c) = (10u16, 13u16, 13 * 64 * 1_000u64);
    let packet = 1_000u32;
    let apls =
        Dataflow::build(Method::Apls { q, inner: Inner::Chain, assignment: Assignment::RoundRobin }, k, c, packet)
            .unwrap();
    let (sent, received, requestor) = apls.bytes_per_site();
    assert_eq!(requestor, c, "the starter receives c");
    for s in 0..usize::from(q) {
        assert_eq!(sent[s], u64::from(k) * c / u64::from(q), "each agent sends k·c/q");
        assert_eq!(received[s], u64::from(k - 1) * c / u64::from(q), "and receives (k−1)·c/q");
    }
    assert_eq!(sent.iter().sum::<u64>(), u64::from(k) * c, "k·c moved in all");
    let (_, received, requestor) = Dataflow::build(Method::Traditional, k, c, packet).unwrap().bytes_per_site();
    assert_eq!((received[usize::from(k) - 1], requestor), (u64::from(k - 1) * c, c), "the starter gathers (k−1)·c");
    let (_, _, requestor) = Dataflow::build(Method::GatewayDecode, k, c, packet).unwrap().bytes_per_site();
    assert_eq!(requestor, u64::from(k) * c);
    let (_, received, _) = Dataflow::build(Method::Ppr, 4, c, packet).unwrap().bytes_per_site();
    assert_eq!(received[0], 2 * c, "Fig. 3a: PPR's root receives ⌈log2 k⌉ chunks");
    let (sent, received, requestor) = Dataflow::build(Method::Ecpipe, k, c, packet).unwrap().bytes_per_site();
    assert!(sent.iter().all(|&b| b == c) && received[0] == 0 && requestor == c);
    // Contiguous segments: each agent reads k/q of its unit; round robin: all of it.
    let contiguous = Method::Apls { q, inner: Inner::Chain, assignment: Assignment::Contiguous };
    let reads = Dataflow::build(contiguous, k, c, packet).unwrap().local_reads();
    let packets = (c / u64::from(packet)) as usize;
    assert!(reads.iter().all(|r| r.len() == packets * usize::from(k) / usize::from(q)), "{:?}", reads[0].len());
    assert!(apls.local_reads().iter().all(|r| r.len() == packets * usize::from(k) / usize::from(q)));
}

#[test]
fn bad_shapes_are_refused() {
    let apls = |q| Method::Apls { q, inner: Inner::Chain, assignment: Assignment::RoundRobin };
    assert!(matches!(Dataflow::build(apls(3), 4, 100, 10), Err(DataflowError::Sources { .. })));
    assert!(matches!(Dataflow::build(Method::Ecpipe, 0, 100, 10), Err(DataflowError::Sources { .. })));
    assert!(matches!(Dataflow::build(Method::Ecpipe, 4, 0, 10), Err(DataflowError::Packets { .. })));
    assert!(matches!(Dataflow::build(Method::Ecpipe, 4, 100, 0), Err(DataflowError::Packets { .. })));
    assert_eq!(apls(13).name(), "apls-chain-rr-q13");
}
