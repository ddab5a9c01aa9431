//! The reconstruction policy's `Auto` against the simulator: wherever the isolated simulator finds
//! the gateway decode and APLS more than 10 % apart, `Auto` chose the faster, over range sizes and
//! node bandwidths on both sides of the crossover (docs/lab/apls.md).

use execution::reconstruct::Dataflow;
use model::reconstruct::Method;
use model::{NodeId, ReconstructionTopology};
use policy::reconstruct::{ReconstructKind, ReconstructSettings, Survivor, choose};
use sim::network::SitePorts;
use sim::reconstruct::{DiskModel, ReconstructSetup, run_isolated};

#[test]
fn auto_picks_the_method_the_simulator_finds_faster() {
    let gateway_rate = 187.5e6;
    let settings = ReconstructSettings {
        kind: ReconstructKind::Auto,
        gateway_bytes_per_s: gateway_rate,
        packet_bytes: 65_536,
        ..ReconstructSettings::default()
    };
    let (mut decided, mut apls_won) = (0, 0);
    for node_rate in [12.5e6, 50e6, 100e6, 187.5e6] {
        for range_bytes in [256_000u64, 1_000_000, 4_000_000, 16_000_000, 64_000_000] {
            let survivors: Vec<Survivor> = (0..13u8)
                .map(|unit| Survivor { unit, node: NodeId(u32::from(unit)), load: 0.0, rate_bytes_per_s: node_rate })
                .collect();
            let setup = ReconstructSetup {
                nodes: vec![SitePorts::symmetric(node_rate); 13],
                gateway: SitePorts::symmetric(gateway_rate),
                hop_latency_ns: settings.hop_latency_ns,
                per_packet_ns: settings.per_packet_ns,
                receive_per_packet_ns: 0,
                disk: DiskModel::INSTANT,
            };
            let simulate = |method: Method| {
                let flow = Dataflow::build(method, 10, range_bytes, settings.packet_bytes).unwrap();
                run_isolated(&setup, &flow).latency_ns as f64
            };
            let gateway = simulate(Method::GatewayDecode);
            let apls = simulate(Method::Apls { q: 13, inner: settings.inner, assignment: settings.assignment });
            let chose_apls = matches!(
                choose(&settings, 10, &survivors, range_bytes).topology,
                ReconstructionTopology::Dataflow { .. }
            );
            if (gateway / apls - 1.0).abs() > 0.10 {
                decided += 1;
                apls_won += usize::from(apls < gateway);
                assert_eq!(
                    chose_apls,
                    apls < gateway,
                    "{range_bytes} B at {node_rate} B/s: gateway {gateway} ns, APLS {apls} ns"
                );
            }
        }
    }
    assert!(decided >= 10, "the grid has clear points ({decided})");
    assert!(apls_won > 0 && apls_won < decided, "and spans the crossover ({apls_won} of {decided} for APLS)");
}
