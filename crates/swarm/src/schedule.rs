//! A swarm run's schedule, drawn from its seed alone: per epoch, each client's sequence of S3
//! operations and the timed faults (node kills and restarts, gateway kills and restarts, unit
//! files corrupted). Pure: the same seed and settings give the same schedule.
//!
//! The one rule a schedule keeps is the durability contract's: within an epoch at most
//! `faulty_nodes` distinct nodes see any fault (killed, or a unit corrupted), and every epoch
//! starts from a quiesced cluster (every node back, repair done). So every stripe keeps at least n
//! − `faulty_nodes` units of those it was stored with, and with `faulty_nodes` ≤ m no acknowledged
//! object may be lost, nor read wrong. Must not touch processes or the network.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// What a schedule is drawn for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduleSettings {
    /// Storage nodes of the cluster.
    pub nodes: u32,
    /// Epochs (each ends with a quiesce and a check).
    pub epochs: usize,
    /// How long each epoch's workload and faults last.
    pub epoch_ms: u64,
    /// Concurrent clients.
    pub clients: usize,
    /// Keys each client writes (its own: no two clients share a key).
    pub keys_per_client: usize,
    /// Operations each client performs per epoch at most (it stops earlier when the epoch ends).
    pub ops_per_client: usize,
    /// Most distinct nodes that see a fault in one epoch (≤ m of the code).
    pub faulty_nodes: u32,
    /// Faults per epoch (kills, corruptions, gateway kills; restarts come with them).
    pub faults_per_epoch: usize,
}

/// An S3 operation of a client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[allow(missing_docs)] // The fields are named for what they are: the key, the body's seed and sizes.
pub enum Op {
    /// PutObject of `size_bytes` bytes drawn from `body_seed`.
    Put { key: String, body_seed: u64, size_bytes: u64 },
    /// A multipart upload of parts of these sizes, bytes drawn from `body_seed`.
    Multipart { key: String, body_seed: u64, part_bytes: Vec<u64> },
    /// GetObject.
    Get { key: String },
    /// lowtail's batch read of several keys of one client, each part checked like a GET.
    BatchGet { keys: Vec<String> },
    /// DeleteObject.
    Delete { key: String },
}

impl Op {
    /// The key the operation acts on (a batch read's first).
    pub fn key(&self) -> &str {
        match self {
            Op::Put { key, .. } | Op::Multipart { key, .. } | Op::Get { key } | Op::Delete { key } => key,
            Op::BatchGet { keys } => &keys[0],
        }
    }
}

/// Which unit files a corruption picks from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum UnitKind {
    /// Data units (index below k).
    Data,
    /// Parity units (index k..n).
    Parity,
    /// Replicas of packed objects in open stripes.
    Replica,
}

/// A fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Fault {
    /// SIGKILL a storage node.
    KillNode(u32),
    /// Start a killed node again on its data directory.
    RestartNode(u32),
    /// SIGKILL the gateway (`lowtail up`, which holds it).
    KillGateway,
    /// Start `lowtail up` again on the same directory.
    RestartGateway,
    /// Flip a byte of a unit file of this node: the `pick`-th (modulo their number) of its files
    /// of `kind`, at `offset_pick` modulo the file's length.
    #[allow(missing_docs)]
    CorruptUnit { node: u32, kind: UnitKind, pick: u64, offset_pick: u64 },
}

/// A fault at a time within its epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TimedFault {
    /// Milliseconds after the epoch's start.
    pub at_ms: u64,
    /// The fault.
    pub fault: Fault,
}

/// One epoch: each client's operations and the faults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Epoch {
    /// Client i performs `clients[i]` in order.
    pub clients: Vec<Vec<Op>>,
    /// Faults in time order.
    pub faults: Vec<TimedFault>,
}

/// A whole run's schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Schedule {
    /// The seed it was drawn from.
    pub seed: u64,
    /// What it was drawn for.
    pub settings: ScheduleSettings,
    /// The epochs.
    pub epochs: Vec<Epoch>,
    /// The bucket's write ack rule: seeds take `all`, `k+1` and `k` in turn (by seed mod 3, so
    /// the rest of a seed's schedule is what it was before rules existed).
    pub write_ack: meta::WriteAck,
}

/// Draws the schedule of `seed`.
pub fn draw(seed: u64, settings: &ScheduleSettings) -> Schedule {
    assert!(settings.faulty_nodes <= settings.nodes, "cannot fault more nodes than there are");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let epochs = (0..settings.epochs).map(|epoch| draw_epoch(&mut rng, settings, epoch)).collect();
    let write_ack = meta::WriteAck::ALL[(seed % 3) as usize];
    Schedule { seed, settings: settings.clone(), epochs, write_ack }
}

fn draw_epoch(rng: &mut ChaCha8Rng, settings: &ScheduleSettings, epoch: usize) -> Epoch {
    let clients = (0..settings.clients)
        .map(|client| (0..settings.ops_per_client).map(|op| draw_op(rng, settings, client, epoch, op)).collect())
        .collect();
    Epoch { clients, faults: draw_faults(rng, settings) }
}

/// Object sizes: mostly small (packed) and medium (one stripe), some of several stripes.
fn draw_size(rng: &mut ChaCha8Rng) -> u64 {
    match rng.random_range(0..100) {
        0..35 => rng.random_range(1..=4096),
        35..65 => rng.random_range(4097..=64 << 10),
        65..92 => rng.random_range((64 << 10) + 1..=3 << 20),
        _ => rng.random_range((6 << 20)..=(13 << 20)),
    }
}

fn draw_op(rng: &mut ChaCha8Rng, settings: &ScheduleSettings, client: usize, epoch: usize, op: usize) -> Op {
    let key = format!("c{client}/k{}", rng.random_range(0..settings.keys_per_client));
    // Distinct per operation of the run: every version of every key has bytes of its own.
    let body_seed = ((epoch as u64) << 40) ^ ((client as u64) << 24) ^ op as u64 ^ rng.random::<u64>() << 48;
    match rng.random_range(0..100) {
        0..45 => Op::Put { key, body_seed, size_bytes: draw_size(rng) },
        45..50 => {
            // S3's smallest part but the last is 5 MiB.
            let last = rng.random_range(1..=1 << 20);
            Op::Multipart { key, body_seed, part_bytes: vec![5 << 20, last] }
        }
        50..78 => Op::Get { key },
        78..88 => {
            // Distinct keys of this client (a batch names each once).
            let count = rng.random_range(2..=5usize).min(settings.keys_per_client);
            let mut keys = vec![key];
            for _ in 0..4 * count {
                let more = format!("c{client}/k{}", rng.random_range(0..settings.keys_per_client));
                if keys.len() < count && !keys.contains(&more) {
                    keys.push(more);
                }
            }
            Op::BatchGet { keys }
        }
        _ => Op::Delete { key },
    }
}

/// The epoch's faults: kills with a restart after a while (or none: the quiesce brings the node
/// back), corruptions, a gateway kill with its restart; all on at most `faulty_nodes` nodes.
fn draw_faults(rng: &mut ChaCha8Rng, settings: &ScheduleSettings) -> Vec<TimedFault> {
    let mut nodes: Vec<u32> = (0..settings.nodes).collect();
    nodes.shuffle(rng);
    let faulty = &nodes[..settings.faulty_nodes as usize];
    let mut faults = Vec::new();
    let mut down: Vec<u32> = Vec::new();
    let span = settings.epoch_ms.max(1);
    let mut times: Vec<u64> =
        (0..settings.faults_per_epoch).map(|_| rng.random_range(span / 10..span * 8 / 10)).collect();
    times.sort_unstable();
    for at_ms in times {
        let fault = match rng.random_range(0..100) {
            0..40 if !faulty.is_empty() => {
                let node = faulty[rng.random_range(0..faulty.len())];
                if down.contains(&node) {
                    continue;
                }
                down.push(node);
                if rng.random_bool(0.6) {
                    let back = (at_ms + rng.random_range(1000..5000)).min(span * 9 / 10);
                    faults.push(TimedFault { at_ms: back, fault: Fault::RestartNode(node) });
                }
                Fault::KillNode(node)
            }
            40..80 if !faulty.is_empty() => {
                let node = faulty[rng.random_range(0..faulty.len())];
                let kind = [UnitKind::Data, UnitKind::Parity, UnitKind::Replica][rng.random_range(0..3)];
                Fault::CorruptUnit { node, kind, pick: rng.random(), offset_pick: rng.random() }
            }
            _ => {
                faults.push(TimedFault { at_ms: at_ms + rng.random_range(500..2000), fault: Fault::RestartGateway });
                Fault::KillGateway
            }
        };
        faults.push(TimedFault { at_ms, fault });
    }
    faults.sort_by_key(|timed| timed.at_ms);
    faults
}

/// The distinct nodes an epoch's faults touch.
pub fn faulty_nodes(epoch: &Epoch) -> Vec<u32> {
    let mut nodes: Vec<u32> = epoch
        .faults
        .iter()
        .filter_map(|timed| match timed.fault {
            Fault::KillNode(node) | Fault::RestartNode(node) | Fault::CorruptUnit { node, .. } => Some(node),
            Fault::KillGateway | Fault::RestartGateway => None,
        })
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> ScheduleSettings {
        ScheduleSettings {
            nodes: 10,
            epochs: 4,
            epoch_ms: 20_000,
            clients: 4,
            keys_per_client: 10,
            ops_per_client: 50,
            faulty_nodes: 3,
            faults_per_epoch: 8,
        }
    }

    #[test]
    fn a_seed_gives_one_schedule_and_seeds_differ() {
        assert_eq!(draw(7, &settings()), draw(7, &settings()));
        assert_ne!(draw(7, &settings()), draw(8, &settings()));
    }

    #[test]
    fn every_epoch_keeps_to_its_faulty_nodes_and_restarts_only_what_it_killed() {
        for seed in 0..200 {
            let schedule = draw(seed, &settings());
            for epoch in &schedule.epochs {
                assert!(faulty_nodes(epoch).len() <= 3, "seed {seed}: {:?}", epoch.faults);
                assert!(epoch.faults.windows(2).all(|pair| pair[0].at_ms <= pair[1].at_ms), "in time order");
                let mut down = Vec::new();
                for timed in &epoch.faults {
                    match timed.fault {
                        Fault::KillNode(node) => {
                            assert!(!down.contains(&node), "seed {seed}: node {node} killed twice");
                            down.push(node);
                        }
                        Fault::RestartNode(node) => {
                            assert!(down.contains(&node), "seed {seed}: node {node} restarted before its kill");
                            down.retain(|&d| d != node);
                        }
                        _ => {}
                    }
                    assert!(timed.at_ms < 20_000);
                }
                for ops in &epoch.clients {
                    assert_eq!(ops.len(), 50);
                }
            }
        }
    }

    #[test]
    fn clients_keep_to_their_own_keys_and_bodies_differ() {
        let schedule = draw(3, &settings());
        let mut seeds = std::collections::BTreeSet::new();
        for epoch in &schedule.epochs {
            for (client, ops) in epoch.clients.iter().enumerate() {
                for op in ops {
                    assert!(op.key().starts_with(&format!("c{client}/")), "{op:?}");
                    if let Op::Put { body_seed, .. } | Op::Multipart { body_seed, .. } = op {
                        assert!(seeds.insert(*body_seed), "body seed {body_seed} drawn twice");
                    }
                }
            }
        }
    }
}
