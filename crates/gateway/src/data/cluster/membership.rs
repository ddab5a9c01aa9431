//! Membership: node registration (for `lowtail up`) and the failure detector, a background task
//! that probes every registered node each interval (recording a round's changes together, so they
//! share group commits), refreshes heartbeats every 10 s, marks a node Down after
//! `down_after_probes` consecutive failed probes and Up again when it answers. Several gateways may
//! run it at once: every update is an idempotent set of the same state. It also tells each node
//! how to serve the latency classes (`[classes] scheduling`, with the shares a read policy solved
//! for the node's rack: [`crate::data::cluster::class_shares`]) the first time the node answers, again when what
//! it should run changes, and after a probe it missed or once its uptime shows it restarted (and
//! forgot); a failure is retried the next round.
//! Must not move data (repair does) or touch Draining / Removed nodes, which operators manage.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use meta::{MetaStore, NodeId, NodeInfo, NodeState};

use crate::classes::ClassScheduling;
use crate::data::DataError;
use crate::data::cluster::class_shares::{NodeSchedulings, RackShares, read_published};
use crate::data::config::MembershipConfig;
use crate::data::io::backend::SLOT_ADDRESS_PREFIX;
use crate::data::io::connections::NodeConnections;

/// Registers (or re-registers) a storage node as Up with a heartbeat at `now_ms`, keeping what the
/// cluster knows of its directory (the admitted one, a check under way): membership compares the
/// directory at the node's first answer and checks its units if it differs, and marks it Down if
/// it does not answer.
pub async fn register_node(
    meta: &dyn MetaStore,
    id: NodeId,
    address: &str,
    rack: &str,
    capacity_bytes: u64,
    now_ms: u64,
) -> Result<NodeInfo, DataError> {
    let known = match meta.get_node(id).await {
        Ok(known) => Some(known),
        Err(meta::MetaError::NoSuchNode(_)) => None,
        Err(error) => return Err(DataError::Meta(error.to_string())),
    };
    let node = NodeInfo {
        id,
        address: address.to_string(),
        rack: rack.to_string(),
        capacity_bytes,
        state: NodeState::Up,
        last_heartbeat_ms: now_ms,
        down_since_ms: None,
        directory: None,
        checking_since_ms: None,
    };
    let node = match known {
        Some(known) => NodeInfo { directory: known.directory, checking_since_ms: known.checking_since_ms, ..node },
        None => node,
    };
    meta.register_node(node.clone()).await.map_err(|e| DataError::Meta(e.to_string()))?;
    Ok(node)
}

/// Unix milliseconds now.
pub fn unix_now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The failure detector; see the module documentation.
#[derive(Debug)]
pub struct Membership {
    cluster: Arc<NodeConnections>,
    config: MembershipConfig,
    /// Consecutive failed probes per node.
    misses: Mutex<HashMap<NodeId, u32>>,
    /// What the nodes are told to do with latency classes, by rack.
    class_scheduling: Mutex<NodeSchedulings>,
    /// Nodes told a scheduling, with their last answer since (a node that restarted runs its own
    /// scheduling again) and what they were told.
    scheduled: Mutex<HashMap<NodeId, (Sighting, ClassScheduling)>>,
    /// Each node's directory as this gateway last saw it, the checks under way and the refusals.
    directories: Arc<Directories>,
    /// The cluster's id, read (or made) when first needed.
    cluster_id: tokio::sync::OnceCell<String>,
    /// Where the current probe round is (for the log when one stalls).
    stage: Mutex<String>,
    /// Where each node's recording is in the current round, until it ends (for the same log).
    recording: Mutex<std::collections::BTreeMap<NodeId, &'static str>>,
}

/// What membership knows of the nodes' directories (see [`crate::data::cluster::reconcile`]).
#[derive(Debug, Default)]
struct Directories {
    /// Nodes whose directory this gateway found admitted, with their last answer then.
    verified: Mutex<HashMap<NodeId, Sighting>>,
    /// Nodes whose units are being checked by this gateway now.
    checking: Mutex<std::collections::HashSet<NodeId>>,
    /// Nodes refused, and why.
    refused: Mutex<HashMap<NodeId, String>>,
    /// The last check of each node, for status.
    last_checks: Mutex<HashMap<NodeId, crate::data::cluster::reconcile::CheckReport>>,
}

/// The nodes' directories as one gateway sees them, for `GET /admin/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DirectoryStatus {
    /// Nodes whose units this gateway is checking now.
    pub checking: Vec<NodeId>,
    /// Nodes refused (another cluster's or node's directory), with why.
    pub refused: Vec<(NodeId, String)>,
    /// The last check of each node this gateway checked.
    pub last_checks: Vec<(NodeId, crate::data::cluster::reconcile::CheckReport)>,
}

/// Whether a node that answered may serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    /// Yes (its units may still be being checked: its stripes count short meanwhile).
    Serve,
    /// Not known yet (its identity or the cluster's could not be read, or its check not recorded):
    /// its state stays as it is, and the next round asks again.
    Later,
    /// No: it answers with a directory the cluster must not take.
    Refuse,
}

/// What one probe round saw.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ProbeRound {
    /// Nodes that answered.
    pub answered: Vec<NodeId>,
    /// Nodes marked Down in this round.
    pub marked_down: Vec<NodeId>,
    /// Nodes marked Up again in this round.
    pub marked_up: Vec<NodeId>,
}

/// What recording one node's probe did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recorded {
    /// It answered (and may serve); `marked_up` when it was Down and is Up now.
    Answered { marked_up: bool },
    /// It was Up and is Down now (missed its probes, or its directory was refused).
    MarkedDown,
    /// No change.
    Nothing,
}

/// How often an answering node's `last_heartbeat_ms` is written (a state change writes at once).
pub const HEARTBEAT_REFRESH_MS: u64 = 10_000;

impl Membership {
    /// A failure detector over `cluster`'s nodes.
    pub fn new(cluster: Arc<NodeConnections>, config: MembershipConfig) -> Self {
        Self {
            cluster,
            config,
            misses: Mutex::new(HashMap::new()),
            class_scheduling: Mutex::new(NodeSchedulings::default()),
            scheduled: Mutex::new(HashMap::new()),
            directories: Arc::default(),
            cluster_id: tokio::sync::OnceCell::new(),
            stage: Mutex::new(String::new()),
            recording: Mutex::new(Default::default()),
        }
    }

    /// The nodes' directories as this gateway sees them.
    pub fn directory_status(&self) -> DirectoryStatus {
        let sorted = |mut ids: Vec<NodeId>| {
            ids.sort_unstable();
            ids
        };
        let mut refused: Vec<_> = crate::data::lock(&self.directories.refused).clone().into_iter().collect();
        refused.sort();
        let mut last_checks: Vec<_> = crate::data::lock(&self.directories.last_checks).clone().into_iter().collect();
        last_checks.sort_by_key(|(id, _)| *id);
        DirectoryStatus {
            checking: sorted(crate::data::lock(&self.directories.checking).iter().copied().collect()),
            refused,
            last_checks,
        }
    }

    /// Tells every node `scheduling` from the next probe round on (set before the task starts: a
    /// push of an earlier scheduling under way would count as this one's).
    pub fn set_class_scheduling(&self, scheduling: ClassScheduling) {
        crate::data::lock(&self.class_scheduling).set_configured(scheduling);
        crate::data::lock(&self.scheduled).clear();
    }

    /// Installs the class shares a read policy solved, by rack name (empty: none; the configured
    /// numbers again): each node is told its rack's at the next probe round where they differ
    /// from what it runs. Shares that do not fit `[classes]` are logged and left out.
    pub fn set_rack_class_shares(&self, shares: RackShares) {
        let installed = {
            let mut schedulings = crate::data::lock(&self.class_scheduling);
            let (changed, refused) = schedulings.set_rack_shares(shares);
            if !changed {
                return;
            }
            for why in &refused {
                tracing::warn!(%why, "solved class shares not installed; the configured ones stay");
            }
            schedulings.rack_shares().clone()
        };
        metrics::gauge!("lowtail_gateway_class_share_racks").set(installed.len() as f64);
        for (rack, shares) in installed {
            for (class, share) in shares.iter().enumerate() {
                let class = (class + 1).to_string();
                metrics::gauge!("lowtail_gateway_class_share", "rack" => rack.clone(), "class" => class).set(*share);
            }
        }
    }

    /// The solved class shares installed, by rack name.
    pub fn rack_class_shares(&self) -> RackShares {
        crate::data::lock(&self.class_scheduling).rack_shares().clone()
    }

    /// What `node` was last told and still runs, if anything.
    pub fn told(&self, node: NodeId) -> Option<ClassScheduling> {
        crate::data::lock(&self.scheduled).get(&node).map(|(_, told)| told.clone())
    }

    /// Nodes that hold the class scheduling now, by id.
    pub fn scheduled_nodes(&self) -> Vec<NodeId> {
        let mut nodes: Vec<NodeId> = crate::data::lock(&self.scheduled).keys().copied().collect();
        nodes.sort_unstable();
        nodes
    }

    /// The scheduling `node` of `rack`, answering as `now`, has yet to be told, if any.
    fn scheduling_owed(&self, node: NodeId, rack: &str, now: Sighting) -> Option<ClassScheduling> {
        let scheduling = crate::data::lock(&self.class_scheduling).for_rack(rack)?;
        let mut scheduled = crate::data::lock(&self.scheduled);
        match scheduled.get_mut(&node) {
            Some((seen, told)) if !now.restarted_since(seen) && *told == scheduling => {
                *seen = now;
                None
            }
            _ => {
                scheduled.remove(&node);
                Some(scheduling)
            }
        }
    }

    /// Tells `node` the class scheduling unless it holds it: told since it last missed a probe,
    /// and not restarted since (it answered as `now`).
    async fn push_class_scheduling(&self, node: &NodeInfo, now: Sighting, client: &node::NodeClient) {
        let Some(scheduling) = self.scheduling_owed(node.id, &node.rack, now) else { return };
        match client.set_class_scheduling(&scheduling).await {
            Ok(_) => {
                metrics::counter!("lowtail_gateway_class_scheduling_pushes_total", "outcome" => "ok").increment(1);
                crate::data::lock(&self.scheduled).insert(node.id, (now, scheduling));
            }
            Err(error) => {
                metrics::counter!("lowtail_gateway_class_scheduling_pushes_total", "outcome" => "failed").increment(1);
                tracing::warn!(node = %node.id, %error, "could not set the node's class scheduling; retrying next probe round");
            }
        }
    }

    /// Probes every Up or Down node once, in parallel (each probe limited to the probe interval),
    /// and applies the state changes.
    pub async fn probe_round(&self, now_ms: u64) -> Result<ProbeRound, DataError> {
        let interval = Duration::from_millis(self.config.probe_interval_ms);
        self.at("reading the published class shares".into());
        if crate::data::lock(&self.class_scheduling).takes_shares() {
            match read_published(self.cluster.meta().as_ref(), now_ms).await {
                Ok(shares) => self.set_rack_class_shares(shares),
                Err(error) => {
                    tracing::warn!(%error, "could not read the published class shares; the nodes keep theirs")
                }
            }
        }
        self.at("listing the nodes".into());
        let nodes: Vec<NodeInfo> = self
            .cluster
            .nodes()
            .await?
            .into_iter()
            .filter(|n| matches!(n.state, NodeState::Up | NodeState::Down))
            .collect();
        let probes: FuturesUnordered<_> =
            nodes.iter().map(|node| async move { (node, self.probe(node, interval).await) }).collect();
        self.at(format!("probing {} nodes", nodes.len()));
        let answers: Vec<_> = probes.collect().await;
        // Recorded together, so that the metadata writes share group commits: one slow commit
        // (an fsync behind a busy disk) delays the round once, not once per node.
        self.at(format!("recording {} probes", answers.len()));
        crate::data::lock(&self.recording).clear();
        let recorded = answers.iter().map(|(node, answered)| self.record(node, answered.as_ref(), now_ms));
        let mut round = ProbeRound::default();
        for ((node, _), change) in answers.iter().zip(futures_util::future::join_all(recorded).await) {
            match change {
                Recorded::Answered { marked_up } => {
                    round.answered.push(node.id);
                    if marked_up {
                        round.marked_up.push(node.id);
                    }
                }
                Recorded::MarkedDown => round.marked_down.push(node.id),
                Recorded::Nothing => {}
            }
        }
        Ok(round)
    }

    /// Records one node's probe (`answered`: its sighting and a client, if it answered): its
    /// misses, its admission, and the state change or heartbeat that follows.
    async fn record(&self, node: &NodeInfo, answered: Option<&(Sighting, node::NodeClient)>, now_ms: u64) -> Recorded {
        let recorded = self.record_stages(node, answered, now_ms).await;
        crate::data::lock(&self.recording).remove(&node.id);
        recorded
    }

    /// Notes where `node`'s recording is, for the log if the round stalls.
    fn node_at(&self, node: NodeId, stage: &'static str) {
        crate::data::lock(&self.recording).insert(node, stage);
    }

    /// [`record`](Self::record)'s steps, each noted with [`node_at`](Self::node_at).
    async fn record_stages(
        &self,
        node: &NodeInfo,
        answered: Option<&(Sighting, node::NodeClient)>,
        now_ms: u64,
    ) -> Recorded {
        let meta = self.cluster.meta();
        self.node_at(node.id, "admission");
        let misses = {
            let mut misses = crate::data::lock(&self.misses);
            let count = misses.entry(node.id).or_insert(0);
            *count = if answered.is_some() { 0 } else { count.saturating_add(1) };
            *count
        };
        if answered.is_none() {
            // It may come back restarted, with the default scheduling: tell it again then.
            crate::data::lock(&self.scheduled).remove(&node.id);
        }
        let admission = match answered {
            Some((sighting, client)) => Some(self.admit(node, *sighting, client, now_ms).await),
            None => None,
        };
        let answered = answered.is_some() && admission != Some(Admission::Later);
        self.node_at(node.id, "writing its state");
        let (recorded, result) = if admission == Some(Admission::Refuse) {
            if node.state == NodeState::Up {
                metrics::counter!("lowtail_gateway_nodes_marked_down_total").increment(1);
                (Recorded::MarkedDown, meta.set_node_state(node.id, NodeState::Down, now_ms).await.map(|_| ()))
            } else {
                (Recorded::Nothing, Ok(()))
            }
        } else if answered && node.state == NodeState::Down {
            tracing::info!(node = %node.id, "node answers again; marking it Up");
            metrics::counter!("lowtail_gateway_nodes_marked_up_total").increment(1);
            let marked = match meta.heartbeat(node.id, now_ms).await {
                Ok(_) => meta.set_node_state(node.id, NodeState::Up, now_ms).await.map(|_| ()),
                Err(error) => Err(error),
            };
            (Recorded::Answered { marked_up: marked.is_ok() }, marked)
        } else if answered {
            // Refreshed every HEARTBEAT_REFRESH_MS, not every round: a metadata write per node
            // per round is most of a quiet cluster's metadata writes.
            let due = now_ms.saturating_sub(node.last_heartbeat_ms) >= HEARTBEAT_REFRESH_MS;
            let beat = if due { meta.heartbeat(node.id, now_ms).await.map(|_| ()) } else { Ok(()) };
            (Recorded::Answered { marked_up: false }, beat)
        } else if misses >= self.config.down_after_probes && node.state == NodeState::Up {
            tracing::warn!(node = %node.id, misses, "node missed its probes; marking it Down");
            metrics::counter!("lowtail_gateway_nodes_marked_down_total").increment(1);
            // A reconnect after the node returns starts from a fresh connection.
            self.cluster.forget(node.id);
            (Recorded::MarkedDown, meta.set_node_state(node.id, NodeState::Down, now_ms).await.map(|_| ()))
        } else {
            (Recorded::Nothing, Ok(()))
        };
        if let Err(error) = result {
            tracing::warn!(node = %node.id, %error, "could not record membership change");
        }
        recorded
    }

    /// Probes `node` (connecting and the probe each limited to `interval`), recording its rates and
    /// telling it the class scheduling it lacks; its answer and a client, if it answered.
    async fn probe(&self, node: &NodeInfo, interval: Duration) -> Option<(Sighting, node::NodeClient)> {
        let client = tokio::time::timeout(interval, self.cluster.client(node)).await.ok()?.ok()?;
        let client = client.with_timeout(interval);
        let sent = tokio::time::Instant::now();
        let reply = client.probe().await.ok()?;
        let now = Sighting::of(sent, tokio::time::Instant::now(), reply.now_ns);
        self.cluster.loads().record_probe(node.id, &reply);
        self.push_class_scheduling(node, now, &client).await;
        Some((now, client))
    }

    /// The cluster's id (read or made once).
    async fn cluster_id(&self) -> Result<&str, DataError> {
        let meta = self.cluster.meta();
        self.cluster_id
            .get_or_try_init(|| crate::data::cluster::reconcile::cluster_id(meta.as_ref()))
            .await
            .map(String::as_str)
    }

    /// Whether `node`, which answered as `now`, may serve: its directory is compared with the
    /// admitted one when this gateway has not seen it admitted since its own start, when the node
    /// was Down or restarted, or while a check is recorded but not running; a difference starts a
    /// check (the node serves meanwhile, its stripes counted short).
    async fn admit(&self, node: &NodeInfo, now: Sighting, client: &node::NodeClient, now_ms: u64) -> Admission {
        let directories = &self.directories;
        if crate::data::lock(&directories.checking).contains(&node.id) {
            return Admission::Serve;
        }
        let seen = crate::data::lock(&directories.verified).get(&node.id).copied();
        let restarted = seen.is_none_or(|seen| now.restarted_since(&seen));
        if !restarted && node.state == NodeState::Up && node.checking_since_ms.is_none() {
            crate::data::lock(&directories.verified).insert(node.id, now);
            return Admission::Serve;
        }
        crate::data::lock(&directories.verified).remove(&node.id);
        self.node_at(node.id, "admission: asking its identity");
        let identity = match client.identity(None).await {
            Ok(identity) => identity,
            Err(error) => {
                tracing::debug!(node = %node.id, %error, "node identity not read; asked again next round");
                return Admission::Later;
            }
        };
        self.node_at(node.id, "admission: reading the cluster id");
        let cluster_id = match self.cluster_id().await {
            Ok(cluster_id) => cluster_id,
            Err(error) => {
                tracing::warn!(node = %node.id, %error, "cluster id not read; the node is admitted later");
                return Admission::Later;
            }
        };
        // Read again: the round's copy may predate a check that ended meanwhile.
        self.node_at(node.id, "admission: reading its record");
        let node = &match self.cluster.meta().get_node(node.id).await {
            Ok(fresh) => fresh,
            Err(error) => {
                tracing::warn!(node = %node.id, %error, "node record not read; the node is admitted later");
                return Admission::Later;
            }
        };
        if crate::data::lock(&directories.checking).contains(&node.id) {
            return Admission::Serve;
        }
        let state = crate::data::cluster::reconcile::classify(&identity, node, cluster_id);
        match state {
            crate::data::cluster::reconcile::DirectoryState::Foreign { why } => {
                if crate::data::lock(&directories.refused).insert(node.id, why.clone()).as_ref() != Some(&why) {
                    tracing::error!(node = %node.id, %why, "node refused: its directory is not this cluster's node's");
                }
                Admission::Refuse
            }
            crate::data::cluster::reconcile::DirectoryState::Admitted if node.checking_since_ms.is_none() => {
                crate::data::lock(&directories.refused).remove(&node.id);
                crate::data::lock(&directories.verified).insert(node.id, now);
                Admission::Serve
            }
            state => {
                crate::data::lock(&directories.refused).remove(&node.id);
                self.start_check(node, identity, state, now_ms).await
            }
        }
    }

    /// Marks `node` checking and starts the check of its units in the background.
    async fn start_check(
        &self,
        node: &NodeInfo,
        identity: node::proto::IdentityResponse,
        state: crate::data::cluster::reconcile::DirectoryState,
        now_ms: u64,
    ) -> Admission {
        let meta = self.cluster.meta();
        self.node_at(node.id, "admission: recording its check");
        if let Err(error) = meta.set_node_checking(node.id, now_ms).await {
            tracing::warn!(node = %node.id, %error, "could not record the node's check; tried again next round");
            return Admission::Later;
        }
        let Ok(cluster_id) = self.cluster_id().await.map(str::to_string) else { return Admission::Later };
        crate::data::lock(&self.directories.checking).insert(node.id);
        tracing::warn!(node = %node.id, ?state, "node answers with another directory than the admitted one; checking its units");
        let (cluster, directories, node) = (Arc::clone(&self.cluster), Arc::clone(&self.directories), node.clone());
        tokio::spawn(async move {
            let checked = match cluster.client(&node).await {
                Ok(client) => {
                    let meta = cluster.meta();
                    let identity_and_state = (cluster_id.as_str(), &state);
                    crate::data::cluster::reconcile::check_and_admit(
                        meta.as_ref(),
                        &client,
                        &node,
                        &identity,
                        identity_and_state,
                    )
                    .await
                }
                Err(error) => Err(DataError::Unavailable(error.to_string())),
            };
            match checked {
                Ok(report) => {
                    tracing::info!(node = %node.id, ?state, ?report, "node's units checked; it is admitted");
                    metrics::counter!("lowtail_gateway_node_checks_total").increment(1);
                    metrics::counter!("lowtail_gateway_node_check_units_lost_total").increment(report.units_lost);
                    crate::data::lock(&directories.last_checks).insert(node.id, report);
                }
                Err(error) => tracing::warn!(node = %node.id, %error, "node check failed; tried again next round"),
            }
            crate::data::lock(&directories.checking).remove(&node.id);
        });
        Admission::Serve
    }

    /// Runs probe rounds every interval until the returned task is stopped.
    pub fn spawn(self: Arc<Self>) -> BackgroundTask {
        let interval = Duration::from_millis(self.config.probe_interval_ms);
        BackgroundTask::spawn("membership", move |mut stop| async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticker.tick() => {}
                    _ = stop.changed() => return,
                }
                match tokio::time::timeout(round_limit(interval), self.probe_round(unix_now_ms())).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(error)) => tracing::warn!(%error, "membership probe round failed"),
                    Err(_) => {
                        let stage = crate::data::lock(&self.stage).clone();
                        let nodes = self.recording_stages();
                        metrics::counter!("lowtail_gateway_membership_rounds_abandoned_total").increment(1);
                        tracing::warn!(
                            limit = ?round_limit(interval),
                            %stage,
                            %nodes,
                            "a membership probe round did not finish in time; abandoned, the next starts afresh"
                        );
                    }
                }
            }
        })
    }

    /// The nodes whose recording had not ended, each with where it was (`2: admission: …`).
    fn recording_stages(&self) -> String {
        let recording = crate::data::lock(&self.recording);
        let stages: Vec<String> = recording.iter().map(|(node, stage)| format!("{node}: {stage}")).collect();
        if stages.is_empty() { "none".into() } else { stages.join(", ") }
    }

    /// Notes where the probe round is, for the log if it stalls.
    fn at(&self, stage: String) {
        *crate::data::lock(&self.stage) = stage;
    }
}

/// How long a probe round may take before it is abandoned (every probe is bounded by the interval,
/// so only something else stuck can hold a round this long; the next starts afresh).
fn round_limit(interval: Duration) -> Duration {
    (interval * 20).max(Duration::from_secs(10))
}

/// A node's answer to a probe: when (the midpoint of the call) and the node's uptime then, to tell
/// a node that restarted between two probes from one that kept running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sighting {
    /// The midpoint of the probe call, on this gateway's clock.
    at: tokio::time::Instant,
    /// The node's uptime in its answer.
    uptime_ns: u64,
    /// Half the call's round trip: how far from `at` the node may have read its clock.
    half_round_trip_ns: u64,
}

impl Sighting {
    /// A probe sent at `sent`, answered at `received` with the node's `uptime_ns`.
    pub fn of(sent: tokio::time::Instant, received: tokio::time::Instant, uptime_ns: u64) -> Sighting {
        let half = received.saturating_duration_since(sent) / 2;
        Sighting { at: sent + half, uptime_ns, half_round_trip_ns: duration_ns(half) }
    }

    /// Whether the node restarted since `earlier`: its uptime grew less than the time between
    /// the two answers, beyond what the round trips and 0.1 % clock drift (plus 1 ms) explain.
    pub fn restarted_since(&self, earlier: &Sighting) -> bool {
        let elapsed_ns = duration_ns(self.at.saturating_duration_since(earlier.at));
        let slack_ns = self.half_round_trip_ns + earlier.half_round_trip_ns + 1_000_000 + elapsed_ns / 1000;
        self.uptime_ns.saturating_add(slack_ns) < earlier.uptime_ns.saturating_add(elapsed_ns)
    }
}

fn duration_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// A background loop that stops when asked (or when dropped).
#[derive(Debug)]
pub struct BackgroundTask {
    name: &'static str,
    stop: tokio::sync::watch::Sender<bool>,
    handle: Option<tokio::task::JoinHandle<()>>,
}

impl BackgroundTask {
    /// Spawns `body`, which must return soon after its receiver changes.
    pub fn spawn<F, Fut>(name: &'static str, body: F) -> Self
    where
        F: FnOnce(tokio::sync::watch::Receiver<bool>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let handle = tokio::spawn(body(stopped));
        Self { name, stop, handle: Some(handle) }
    }

    /// Runs `round` `interval` after the end of the previous one (the first `interval` after the
    /// start) until stopped; a round in progress when the stop comes is dropped where it waits.
    pub fn periodic<F, Fut>(name: &'static str, interval: std::time::Duration, mut round: F) -> Self
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        Self::spawn(name, move |mut stop| async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(interval) => {}
                    _ = stop.changed() => return,
                }
                tokio::select! {
                    () = round() => {}
                    _ = stop.changed() => return,
                }
            }
        })
    }

    /// Asks the loop to stop and waits for it.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(handle) = self.handle.take()
            && let Err(error) = handle.await
        {
            tracing::warn!(task = self.name, %error, "background task failed");
        }
    }
}

impl Drop for BackgroundTask {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            handle.abort();
        }
    }
}

/// Registers the `n` backend slots in `meta` (ids 0..n, Up), or checks they are there. A metadata
/// store with other nodes belongs to a cluster of storage nodes, and is refused.
pub async fn register_slots(meta: &dyn MetaStore, n: usize, now_ms: u64) -> Result<Vec<NodeInfo>, DataError> {
    let existing = meta.list_nodes().await.map_err(crate::data::meta_error)?;
    if let Some(node) = existing.iter().find(|node| !node.address.starts_with(SLOT_ADDRESS_PREFIX)) {
        return Err(DataError::Internal(format!(
            "backend mode needs a metadata store of its own: this one has storage node {} at {}",
            node.id, node.address
        )));
    }
    let mut slots = Vec::with_capacity(n);
    for slot in 0..n {
        let id = NodeId(slot as u32);
        match existing.iter().find(|node| node.id == id) {
            Some(node) => slots.push(node.clone()),
            None => {
                let address = format!("{SLOT_ADDRESS_PREFIX}{slot}");
                let rack = format!("slot-{slot}");
                slots.push(register_node(meta, id, &address, &rack, u64::MAX, now_ms).await?);
            }
        }
    }
    Ok(slots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_shows_as_uptime_short_of_the_time_between_answers() {
        let start = tokio::time::Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        // Answered at 0 ms (uptime 5 s) and 1 s later, each after a 2 ms round trip.
        let first = Sighting::of(at(0), at(2), 5_000_000_000);
        let running = Sighting::of(at(1000), at(1002), 6_000_000_000);
        assert!(!running.restarted_since(&first));
        let restarted = Sighting::of(at(1000), at(1002), 900_000_000);
        assert!(restarted.restarted_since(&first), "0.9 s of uptime 1 s later");
        // A quick restart still shows: 1 s passed, 0.95 s of uptime.
        let quick = Sighting::of(at(1000), at(1002), 5_950_000_000);
        assert!(quick.restarted_since(&first));
        // Round trips and small drift are not restarts.
        let late_read = Sighting::of(at(1000), at(1040), 5_999_000_000);
        assert!(!late_read.restarted_since(&first), "the node may have read its clock early in a slow call");
    }
}
