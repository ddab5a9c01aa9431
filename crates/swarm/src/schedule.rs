//! A swarm run's schedule, drawn from its seed alone: per epoch, each client's sequence of S3
//! operations and the timed faults (node kills and restarts, hung nodes, full disks, unit files
//! flipped, torn or truncated, network faults between the gateway and a node, gateway kills and
//! restarts, etcd outages), each fault that lasts drawn with its undo. Pure: the same seed and
//! settings give the same schedule.
//!
//! The one rule a schedule keeps is the durability contract's: within an epoch at most
//! `faulty_nodes` distinct nodes see any fault (killed, hung, full, cut off or slowed on the
//! network, or a unit damaged; gateway and etcd faults count against no node), every fault that
//! lasts is undone within the epoch, and every epoch starts from a quiesced cluster (every node
//! back, repair done). So every stripe keeps at least n − `faulty_nodes` units of those it was
//! stored with, and with `faulty_nodes` ≤ m no acknowledged object may be lost, nor read wrong.
//! Must not touch processes, files or the network.

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
    /// How long each epoch's workload and faults last (longer when a fault's undo comes later).
    pub epoch_ms: u64,
    /// Concurrent clients.
    pub clients: usize,
    /// Keys each client writes (its own: no two clients share a key).
    pub keys_per_client: usize,
    /// Operations each client performs per epoch at most (it stops earlier when the epoch ends).
    pub ops_per_client: usize,
    /// Most distinct nodes that see a fault in one epoch (≤ m of the code).
    pub faulty_nodes: u32,
    /// Faults per epoch (undos come with them and are not counted).
    pub faults_per_epoch: usize,
    /// The kinds of fault drawn.
    pub kinds: Vec<FaultKind>,
    /// Gateways of the cluster (a gateway fault picks one).
    pub gateways: u32,
    /// The longest a hang, a full disk, a partition or an etcd outage lasts.
    pub longest_fault_ms: u64,
}

/// A kind of fault, as `--without` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// SIGKILL of a node, restarted later (or by the quiesce).
    Kill,
    /// A unit file's byte flipped, a range of it zeroed or the file cut short.
    Corrupt,
    /// A node SIGSTOPped for a while, then SIGCONTinued.
    Hang,
    /// A node's file system full for a while (needs root: each node's data on a loop-mounted ext4).
    FullDisk,
    /// Latency, reset connections or a partition between the gateway (and peers) and a node.
    Network,
    /// SIGKILL of a gateway, restarted later.
    Gateway,
    /// etcd stopped (SIGSTOP) or killed, then continued or restarted on its data (etcd clusters only).
    Etcd,
    /// A node's data directory copied aside, and later put back in place of the one it has by then
    /// (a node returning with older data: a disk restored from an image).
    Stale,
    /// A record of the embedded metadata store damaged (`lowtail up` clusters only); the quiesce
    /// rebuilds the store from the nodes.
    MetaDamage,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 9] = [
        FaultKind::Kill,
        FaultKind::Corrupt,
        FaultKind::Hang,
        FaultKind::FullDisk,
        FaultKind::Network,
        FaultKind::Gateway,
        FaultKind::Etcd,
        FaultKind::Stale,
        FaultKind::MetaDamage,
    ];

    /// The kind's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Corrupt => "corrupt",
            FaultKind::Hang => "hang",
            FaultKind::FullDisk => "full-disk",
            FaultKind::Network => "network",
            FaultKind::Gateway => "gateway",
            FaultKind::Etcd => "etcd",
            FaultKind::Stale => "stale",
            FaultKind::MetaDamage => "meta-damage",
        }
    }

    /// How often the kind is drawn, relative to the others drawn with it.
    fn weight(self) -> u32 {
        match self {
            FaultKind::Kill | FaultKind::Corrupt => 20,
            FaultKind::Hang | FaultKind::Network => 15,
            FaultKind::FullDisk | FaultKind::Gateway | FaultKind::Etcd | FaultKind::Stale => 10,
            // Each one costs a rebuild of the metadata store at the quiesce.
            FaultKind::MetaDamage => 3,
        }
    }
}

impl std::str::FromStr for FaultKind {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        let names: Vec<&str> = FaultKind::ALL.iter().map(|kind| kind.name()).collect();
        FaultKind::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| format!("no fault kind {name:?}; the kinds: {}", names.join(", ")))
    }
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

/// A part of a unit file (see the node's store: a 40-byte header, the data, a checksum per block).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum UnitPart {
    /// The fixed header.
    Header,
    /// The unit's bytes.
    Data,
    /// The checksum table after the data.
    ChecksumTable,
}

/// What a corruption does to a unit file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Damage {
    /// One byte after the header flipped (rot).
    Flip,
    /// The file cut short at a length within the part (a lost tail).
    Truncate(UnitPart),
    /// A range of up to 16 KiB starting within the part overwritten with zeros (a page half
    /// written).
    Tear(UnitPart),
}

/// A fault, or the undo of one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Fault {
    /// SIGKILL a storage node.
    KillNode(u32),
    /// Start a killed node again on its data directory.
    RestartNode(u32),
    /// SIGKILL gateway `0..gateways` (`lowtail up`, which holds it, on a single-gateway cluster).
    KillGateway(u32),
    /// Start that gateway again.
    RestartGateway(u32),
    /// Damage a unit file of this node: the `pick`-th (modulo their number) of its files of
    /// `kind`, at `offset_pick` modulo the part's length; a tear `length_pick` long (modulo 16 KiB).
    #[allow(missing_docs)]
    CorruptUnit { node: u32, kind: UnitKind, damage: Damage, pick: u64, offset_pick: u64, length_pick: u64 },
    /// SIGSTOP a node: it holds its connections and answers nothing. Continued `for_ms` later.
    #[allow(missing_docs)]
    HangNode { node: u32, for_ms: u64 },
    /// SIGCONT a hung node.
    ContinueNode(u32),
    /// Fill the node's file system. Freed `for_ms` later.
    #[allow(missing_docs)]
    FillDisk { node: u32, for_ms: u64 },
    /// Free what filled it.
    FreeDisk(u32),
    /// Delay every byte between the node and the others (gateway, peers) by `latency_ms`, each way.
    #[allow(missing_docs)]
    SlowNetwork { node: u32, latency_ms: u64, for_ms: u64 },
    /// Reset every open connection to the node (they are opened again).
    #[allow(missing_docs)]
    ResetConnections { node: u32 },
    /// Cut the node off: new connections refused (reset at once) when `refuse`, else accepted
    /// and, like the open ones, black-holed. Healed `for_ms` later.
    #[allow(missing_docs)]
    Partition { node: u32, refuse: bool, for_ms: u64 },
    /// Undo a slow network or a partition (black-holed bytes flow on).
    HealNetwork(u32),
    /// Stop etcd: SIGKILL when `kill` (started again on its data), else SIGSTOP.
    #[allow(missing_docs)]
    StopEtcd { kill: bool, for_ms: u64 },
    /// Continue or restart etcd.
    ReturnEtcd,
    /// Stop a node, copy its data directory aside, start it again.
    CopyAside(u32),
    /// Stop the node, put the copy back in place of its directory, start it again.
    ReturnStale(u32),
    /// Damage the `pick`-th object record of the embedded metadata store (the gateway is stopped
    /// for it and started again).
    #[allow(missing_docs)]
    DamageMetadata { pick: u64 },
}

impl Fault {
    /// The node the fault touches, if any (gateway and etcd faults count against no node).
    pub fn node(&self) -> Option<u32> {
        match *self {
            Fault::KillNode(node)
            | Fault::RestartNode(node)
            | Fault::CorruptUnit { node, .. }
            | Fault::HangNode { node, .. }
            | Fault::ContinueNode(node)
            | Fault::FillDisk { node, .. }
            | Fault::FreeDisk(node)
            | Fault::SlowNetwork { node, .. }
            | Fault::ResetConnections { node }
            | Fault::Partition { node, .. }
            | Fault::HealNetwork(node)
            | Fault::CopyAside(node)
            | Fault::ReturnStale(node) => Some(node),
            Fault::KillGateway(_)
            | Fault::RestartGateway(_)
            | Fault::StopEtcd { .. }
            | Fault::ReturnEtcd
            | Fault::DamageMetadata { .. } => None,
        }
    }

    /// Whether it undoes an earlier fault (a restart, a continue, a heal, ...).
    pub fn is_undo(&self) -> bool {
        matches!(
            self,
            Fault::RestartNode(_)
                | Fault::RestartGateway(_)
                | Fault::ContinueNode(_)
                | Fault::FreeDisk(_)
                | Fault::HealNetwork(_)
                | Fault::ReturnEtcd
                | Fault::ReturnStale(_)
        )
    }

    /// What the report counts it as: its kind in words, durations by band (under a second: before
    /// the swarm's membership marks a node Down; over ten: well past it).
    pub fn label(&self) -> String {
        let band = |ms: u64| match ms {
            0..1000 => "<1s",
            1000..10_000 => "1-10s",
            _ => ">10s",
        };
        match self {
            Fault::KillNode(_) => "kill node".into(),
            Fault::RestartNode(_) => "restart node".into(),
            Fault::KillGateway(_) => "kill gateway".into(),
            Fault::RestartGateway(_) => "restart gateway".into(),
            Fault::CorruptUnit { kind, damage, .. } => {
                let unit = match kind {
                    UnitKind::Data => "data unit",
                    UnitKind::Parity => "parity unit",
                    UnitKind::Replica => "replica",
                };
                match damage {
                    Damage::Flip => format!("flip {unit}"),
                    Damage::Truncate(part) => format!("truncate {unit} in {}", part_name(*part)),
                    Damage::Tear(part) => format!("tear {unit} in {}", part_name(*part)),
                }
            }
            Fault::HangNode { for_ms, .. } => format!("hang node {}", band(*for_ms)),
            Fault::ContinueNode(_) => "continue node".into(),
            Fault::FillDisk { .. } => "fill disk".into(),
            Fault::FreeDisk(_) => "free disk".into(),
            Fault::SlowNetwork { .. } => "slow network".into(),
            Fault::ResetConnections { .. } => "reset connections".into(),
            Fault::Partition { refuse: true, for_ms, .. } => format!("partition (refuse) {}", band(*for_ms)),
            Fault::Partition { refuse: false, for_ms, .. } => format!("partition (black hole) {}", band(*for_ms)),
            Fault::HealNetwork(_) => "heal network".into(),
            Fault::StopEtcd { kill: true, for_ms } => format!("kill etcd {}", band(*for_ms)),
            Fault::StopEtcd { kill: false, for_ms } => format!("stop etcd {}", band(*for_ms)),
            Fault::ReturnEtcd => "return etcd".into(),
            Fault::CopyAside(_) => "copy node directory aside".into(),
            Fault::ReturnStale(_) => "return node with its old directory".into(),
            Fault::DamageMetadata { .. } => "damage a metadata record".into(),
        }
    }
}

fn part_name(part: UnitPart) -> &'static str {
    match part {
        UnitPart::Header => "header",
        UnitPart::Data => "data",
        UnitPart::ChecksumTable => "checksums",
    }
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
    /// How long the clients run: the settings' `epoch_ms`, or until the last undo when later.
    pub length_ms: u64,
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
    /// The bucket's write ack rule: `all`, `k+1` and `k` in turn over every three seeds, and over
    /// every run of three seeds with the same `seed % 3` (`(seed + seed / 3) % 3`), so the rules
    /// meet every configuration chosen by `seed % 3` ([`crate::Flavor::of`]).
    pub write_ack: meta::WriteAck,
}

/// Draws the schedule of `seed`.
pub fn draw(seed: u64, settings: &ScheduleSettings) -> Schedule {
    assert!(settings.faulty_nodes <= settings.nodes, "cannot fault more nodes than there are");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let epochs = (0..settings.epochs).map(|epoch| draw_epoch(&mut rng, settings, epoch)).collect();
    let write_ack = meta::WriteAck::ALL[((seed + seed / 3) % 3) as usize];
    Schedule { seed, settings: settings.clone(), epochs, write_ack }
}

fn draw_epoch(rng: &mut ChaCha8Rng, settings: &ScheduleSettings, epoch: usize) -> Epoch {
    let clients = (0..settings.clients)
        .map(|client| (0..settings.ops_per_client).map(|op| draw_op(rng, settings, client, epoch, op)).collect())
        .collect();
    let faults = draw_faults(rng, settings);
    let last_ms = faults.last().map_or(0, |timed: &TimedFault| timed.at_ms);
    Epoch { clients, faults, length_ms: settings.epoch_ms.max(last_ms + 500) }
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

/// What a fault holds while it lasts: at most one fault of each lane at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Lane {
    Down(u32),
    Hung(u32),
    Disk(u32),
    Network(u32),
    Gateway(u32),
    Etcd,
}

/// The faults of an epoch as they are drawn, and until when each lane is taken.
struct Drawn {
    faults: Vec<TimedFault>,
    busy_until_ms: std::collections::BTreeMap<Lane, u64>,
}

impl Drawn {
    fn free(&self, lane: Lane, at_ms: u64) -> bool {
        self.busy_until_ms.get(&lane).is_none_or(|&until| until < at_ms)
    }

    /// `fault` at `at_ms`, undone by `undo` at `undo_ms` (the lane taken until then).
    fn lasting(&mut self, lane: Lane, at_ms: u64, fault: Fault, undo_ms: u64, undo: Fault) {
        self.busy_until_ms.insert(lane, undo_ms);
        self.faults.push(TimedFault { at_ms, fault });
        self.faults.push(TimedFault { at_ms: undo_ms, fault: undo });
    }
}

/// How long a hang, a partition or an etcd outage lasts: under the swarm's Down detection (two
/// missed probes 500 ms apart), past it, well past it, and past the 30 s node timeout, at most
/// `longest_ms`.
fn draw_outage_ms(rng: &mut ChaCha8Rng, longest_ms: u64) -> u64 {
    let ms = match rng.random_range(0..100) {
        0..30 => rng.random_range(200..=900),
        30..70 => rng.random_range(1500..=8000),
        70..85 => rng.random_range(8000..=20_000),
        _ => rng.random_range(25_000..=35_000),
    };
    ms.min(longest_ms.max(1))
}

fn draw_kind(rng: &mut ChaCha8Rng, kinds: &[FaultKind]) -> Option<FaultKind> {
    let total: u32 = kinds.iter().map(|kind| kind.weight()).sum();
    if total == 0 {
        return None;
    }
    let mut at = rng.random_range(0..total);
    for &kind in kinds {
        if at < kind.weight() {
            return Some(kind);
        }
        at -= kind.weight();
    }
    None
}

fn draw_damage(rng: &mut ChaCha8Rng) -> Damage {
    let part = match rng.random_range(0..4) {
        0 => UnitPart::Header,
        1 => UnitPart::ChecksumTable,
        _ => UnitPart::Data,
    };
    match rng.random_range(0..10) {
        0..4 => Damage::Flip,
        4..7 => Damage::Truncate(part),
        _ => Damage::Tear(part),
    }
}

/// The epoch's faults, each that lasts with its undo, all on at most `faulty_nodes` nodes.
fn draw_faults(rng: &mut ChaCha8Rng, settings: &ScheduleSettings) -> Vec<TimedFault> {
    let mut nodes: Vec<u32> = (0..settings.nodes).collect();
    nodes.shuffle(rng);
    let faulty = &nodes[..settings.faulty_nodes as usize];
    let mut drawn = Drawn { faults: Vec::new(), busy_until_ms: Default::default() };
    let span = settings.epoch_ms.max(1);
    let mut times: Vec<u64> =
        (0..settings.faults_per_epoch).map(|_| rng.random_range(span / 10..span * 8 / 10)).collect();
    times.sort_unstable();
    for at_ms in times {
        let Some(kind) = draw_kind(rng, &settings.kinds) else { break };
        let node = (!faulty.is_empty()).then(|| faulty[rng.random_range(0..faulty.len())]);
        match (kind, node) {
            (FaultKind::Gateway, _) => draw_gateway_fault(rng, settings, &mut drawn, at_ms),
            (FaultKind::Etcd, _) => draw_etcd_fault(rng, settings, &mut drawn, at_ms),
            (FaultKind::MetaDamage, _) => {
                drawn.faults.push(TimedFault { at_ms, fault: Fault::DamageMetadata { pick: rng.random() } });
            }
            (_, Some(node)) => draw_node_fault(rng, settings, &mut drawn, at_ms, kind, node),
            (_, None) => {}
        }
    }
    let mut faults = drawn.faults;
    faults.sort_by_key(|timed| timed.at_ms);
    faults
}

fn draw_gateway_fault(rng: &mut ChaCha8Rng, settings: &ScheduleSettings, drawn: &mut Drawn, at_ms: u64) {
    let gateway = rng.random_range(0..settings.gateways.max(1));
    let back_ms = at_ms + rng.random_range(500..2000);
    if drawn.free(Lane::Gateway(gateway), at_ms) {
        drawn.lasting(
            Lane::Gateway(gateway),
            at_ms,
            Fault::KillGateway(gateway),
            back_ms,
            Fault::RestartGateway(gateway),
        );
    }
}

fn draw_etcd_fault(rng: &mut ChaCha8Rng, settings: &ScheduleSettings, drawn: &mut Drawn, at_ms: u64) {
    let (kill, for_ms) = (rng.random_bool(0.5), draw_outage_ms(rng, settings.longest_fault_ms));
    if drawn.free(Lane::Etcd, at_ms) {
        drawn.lasting(Lane::Etcd, at_ms, Fault::StopEtcd { kill, for_ms }, at_ms + for_ms, Fault::ReturnEtcd);
    }
}

fn draw_node_fault(
    rng: &mut ChaCha8Rng,
    settings: &ScheduleSettings,
    drawn: &mut Drawn,
    at_ms: u64,
    kind: FaultKind,
    node: u32,
) {
    let span = settings.epoch_ms.max(1);
    let longest_ms = settings.longest_fault_ms;
    match kind {
        FaultKind::Kill if drawn.free(Lane::Down(node), at_ms) => {
            // Restarted after a while, or left down: the quiesce brings it back.
            if rng.random_bool(0.6) {
                let back_ms = (at_ms + rng.random_range(1000..5000)).min(span * 9 / 10);
                drawn.lasting(Lane::Down(node), at_ms, Fault::KillNode(node), back_ms, Fault::RestartNode(node));
            } else {
                drawn.busy_until_ms.insert(Lane::Down(node), u64::MAX);
                drawn.faults.push(TimedFault { at_ms, fault: Fault::KillNode(node) });
            }
        }
        FaultKind::Corrupt => {
            let unit = [UnitKind::Data, UnitKind::Parity, UnitKind::Replica][rng.random_range(0..3)];
            let damage = draw_damage(rng);
            let (pick, offset_pick, length_pick) = (rng.random(), rng.random(), rng.random());
            let fault = Fault::CorruptUnit { node, kind: unit, damage, pick, offset_pick, length_pick };
            drawn.faults.push(TimedFault { at_ms, fault });
        }
        FaultKind::Stale
            if [Lane::Down(node), Lane::Hung(node), Lane::Disk(node)].iter().all(|&lane| drawn.free(lane, at_ms)) =>
        {
            // Put back while the epoch runs: the node misses what was written to it meanwhile.
            let back_ms = (at_ms + rng.random_range(2000..8000)).min(span * 9 / 10).max(at_ms + 1);
            for lane in [Lane::Hung(node), Lane::Disk(node)] {
                drawn.busy_until_ms.insert(lane, back_ms);
            }
            drawn.lasting(Lane::Down(node), at_ms, Fault::CopyAside(node), back_ms, Fault::ReturnStale(node));
        }
        FaultKind::Hang if drawn.free(Lane::Hung(node), at_ms) && drawn.free(Lane::Down(node), at_ms) => {
            let for_ms = draw_outage_ms(rng, longest_ms);
            let fault = Fault::HangNode { node, for_ms };
            drawn.lasting(Lane::Hung(node), at_ms, fault, at_ms + for_ms, Fault::ContinueNode(node));
        }
        FaultKind::FullDisk if drawn.free(Lane::Disk(node), at_ms) => {
            let for_ms = rng.random_range(1000..=15_000).min(longest_ms.max(1));
            let fault = Fault::FillDisk { node, for_ms };
            drawn.lasting(Lane::Disk(node), at_ms, fault, at_ms + for_ms, Fault::FreeDisk(node));
        }
        FaultKind::Network if drawn.free(Lane::Network(node), at_ms) => {
            let (fault, for_ms) = match rng.random_range(0..10) {
                0..4 => {
                    let (latency_ms, for_ms) =
                        (rng.random_range(5..=300), rng.random_range(1000..=10_000).min(longest_ms.max(1)));
                    (Fault::SlowNetwork { node, latency_ms, for_ms }, for_ms)
                }
                4..6 => return drawn.faults.push(TimedFault { at_ms, fault: Fault::ResetConnections { node } }),
                _ => {
                    let (refuse, for_ms) = (rng.random_bool(0.5), draw_outage_ms(rng, longest_ms));
                    (Fault::Partition { node, refuse, for_ms }, for_ms)
                }
            };
            drawn.lasting(Lane::Network(node), at_ms, fault, at_ms + for_ms, Fault::HealNetwork(node));
        }
        _ => {}
    }
}

/// The distinct nodes an epoch's faults touch.
pub fn faulty_nodes(epoch: &Epoch) -> Vec<u32> {
    let mut nodes: Vec<u32> = epoch.faults.iter().filter_map(|timed| timed.fault.node()).collect();
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
            kinds: FaultKind::ALL.to_vec(),
            gateways: 2,
            longest_fault_ms: 35_000,
        }
    }

    #[test]
    fn a_seed_gives_one_schedule_and_seeds_differ() {
        assert_eq!(draw(7, &settings()), draw(7, &settings()));
        assert_ne!(draw(7, &settings()), draw(8, &settings()));
    }

    /// The undo of a fault that lasts, and the lane it holds (`None`: it needs none).
    fn undo_of(fault: &Fault) -> Option<Fault> {
        match *fault {
            Fault::HangNode { node, .. } => Some(Fault::ContinueNode(node)),
            Fault::FillDisk { node, .. } => Some(Fault::FreeDisk(node)),
            Fault::SlowNetwork { node, .. } | Fault::Partition { node, .. } => Some(Fault::HealNetwork(node)),
            Fault::StopEtcd { .. } => Some(Fault::ReturnEtcd),
            Fault::KillGateway(gateway) => Some(Fault::RestartGateway(gateway)),
            _ => None,
        }
    }

    #[test]
    fn every_epoch_keeps_to_its_faulty_nodes_and_undoes_what_lasts_within_it() {
        for seed in 0..300 {
            let schedule = draw(seed, &settings());
            for epoch in &schedule.epochs {
                assert!(faulty_nodes(epoch).len() <= 3, "seed {seed}: {:?}", epoch.faults);
                assert!(epoch.faults.windows(2).all(|pair| pair[0].at_ms <= pair[1].at_ms), "in time order");
                let mut down = Vec::new();
                let mut lasting: Vec<Fault> = Vec::new();
                for timed in &epoch.faults {
                    assert!(timed.at_ms < epoch.length_ms, "seed {seed}: every fault within the epoch's clients");
                    match &timed.fault {
                        Fault::KillNode(node) => {
                            assert!(!down.contains(node), "seed {seed}: node {node} killed twice");
                            down.push(*node);
                        }
                        Fault::RestartNode(node) => {
                            assert!(down.contains(node), "seed {seed}: node {node} restarted before its kill");
                            down.retain(|d| d != node);
                        }
                        fault => {
                            if let Some(undo) = undo_of(fault) {
                                assert!(!lasting.contains(&undo), "seed {seed}: {fault:?} while its like lasts");
                                lasting.push(undo);
                            } else if let Some(at) = lasting.iter().position(|undo| undo == fault) {
                                lasting.swap_remove(at);
                            }
                        }
                    }
                }
                assert!(lasting.is_empty(), "seed {seed}: never undone: {lasting:?}");
                for ops in &epoch.clients {
                    assert_eq!(ops.len(), 50);
                }
            }
        }
    }

    #[test]
    fn every_kind_and_every_damage_is_drawn_and_only_the_kinds_asked_for() {
        let mut labels = std::collections::BTreeSet::new();
        for seed in 0..100 {
            for epoch in draw(seed, &settings()).epochs {
                labels.extend(epoch.faults.iter().map(|timed| timed.fault.label()));
            }
        }
        for label in [
            "kill node",
            "restart node",
            "kill gateway",
            "flip data unit",
            "truncate parity unit in header",
            "truncate replica in checksums",
            "tear data unit in data",
            "hang node <1s",
            "hang node 1-10s",
            "hang node >10s",
            "fill disk",
            "slow network",
            "reset connections",
            "partition (refuse) >10s",
            "partition (black hole) <1s",
            "kill etcd 1-10s",
            "stop etcd >10s",
        ] {
            assert!(labels.contains(label), "{label} never drawn: {labels:?}");
        }
        let only = ScheduleSettings { kinds: vec![FaultKind::Hang], ..settings() };
        for epoch in draw(1, &only).epochs {
            assert!(epoch.faults.iter().all(|t| matches!(t.fault, Fault::HangNode { .. } | Fault::ContinueNode(_))));
        }
        let none = ScheduleSettings { kinds: Vec::new(), ..settings() };
        assert!(draw(1, &none).epochs.iter().all(|epoch| epoch.faults.is_empty()));
    }

    #[test]
    fn the_longest_fault_bounds_every_outage_and_the_epoch_covers_the_last_undo() {
        let short = ScheduleSettings { longest_fault_ms: 3000, ..settings() };
        for seed in 0..50 {
            for epoch in draw(seed, &short).epochs {
                for timed in &epoch.faults {
                    if let Fault::HangNode { for_ms, .. }
                    | Fault::FillDisk { for_ms, .. }
                    | Fault::Partition { for_ms, .. }
                    | Fault::StopEtcd { for_ms, .. } = timed.fault
                    {
                        assert!(for_ms <= 3000, "{timed:?}");
                    }
                }
                assert!(epoch.length_ms >= 20_000 && epoch.length_ms < 20_000 + 3000 + 1000, "{}", epoch.length_ms);
            }
        }
    }

    #[test]
    fn write_ack_rules_meet_every_configuration_of_seed_mod_3() {
        let rules = |residue: u64| -> std::collections::BTreeSet<String> {
            (0..9).map(|i| residue + 3 * i).map(|seed| draw(seed, &settings()).write_ack.to_string()).collect()
        };
        for residue in 0..3 {
            assert_eq!(rules(residue).len(), 3, "seeds ≡ {residue} mod 3 meet all three rules");
        }
        assert!("full-disk".parse::<FaultKind>().is_ok_and(|kind| kind == FaultKind::FullDisk));
        assert!("disk".parse::<FaultKind>().unwrap_err().contains("full-disk"));
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
