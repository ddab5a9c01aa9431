//! Membership: node registration (for `lowtail up`) and the failure detector, a background task
//! that probes every registered node each interval, records heartbeats, marks a node Down after
//! `down_after_probes` consecutive failed probes and Up again when it answers. Several gateways may
//! run it at once: every update is an idempotent set of the same state. Must not move data (repair
//! does) or touch Draining / Removed nodes, which operators manage.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use meta::{MetaStore, NodeId, NodeInfo, NodeState};

use super::DataError;
use super::cluster::NodeConnections;
use super::config::MembershipConfig;

/// Registers (or re-registers, keeping its state when already known) a storage node as Up with a
/// heartbeat at `now_ms`.
pub async fn register_node(
    meta: &dyn MetaStore,
    id: NodeId,
    address: &str,
    rack: &str,
    capacity_bytes: u64,
    now_ms: u64,
) -> Result<NodeInfo, DataError> {
    let node = NodeInfo {
        id,
        address: address.to_string(),
        rack: rack.to_string(),
        capacity_bytes,
        state: NodeState::Up,
        last_heartbeat_ms: now_ms,
        down_since_ms: None,
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

impl Membership {
    /// A failure detector over `cluster`'s nodes.
    pub fn new(cluster: Arc<NodeConnections>, config: MembershipConfig) -> Self {
        Self { cluster, config, misses: Mutex::new(HashMap::new()) }
    }

    /// Probes every Up or Down node once, in parallel (each probe limited to the probe interval),
    /// and applies the state changes.
    pub async fn probe_round(&self, now_ms: u64) -> Result<ProbeRound, DataError> {
        let interval = Duration::from_millis(self.config.probe_interval_ms);
        let nodes: Vec<NodeInfo> = self
            .cluster
            .nodes()
            .await?
            .into_iter()
            .filter(|n| matches!(n.state, NodeState::Up | NodeState::Down))
            .collect();
        let mut probes: FuturesUnordered<_> = nodes
            .iter()
            .map(|node| async move {
                let answered = match tokio::time::timeout(interval, self.cluster.client(node)).await {
                    Ok(Ok(client)) => match client.with_timeout(interval).probe().await {
                        Ok(reply) => {
                            self.cluster.loads().record_probe(node.id, &reply);
                            true
                        }
                        Err(_) => false,
                    },
                    _ => false,
                };
                (node, answered)
            })
            .collect();
        let mut round = ProbeRound::default();
        let meta = self.cluster.meta();
        while let Some((node, answered)) = probes.next().await {
            let misses = {
                let mut misses = super::lock(&self.misses);
                let count = misses.entry(node.id).or_insert(0);
                *count = if answered { 0 } else { count.saturating_add(1) };
                *count
            };
            let result = if answered {
                round.answered.push(node.id);
                let beat = meta.heartbeat(node.id, now_ms).await;
                if beat.is_ok() && node.state == NodeState::Down {
                    tracing::info!(node = %node.id, "node answers again; marking it Up");
                    round.marked_up.push(node.id);
                    metrics::counter!("lowtail_gateway_nodes_marked_up_total").increment(1);
                    meta.set_node_state(node.id, NodeState::Up, now_ms).await.map(|_| ())
                } else {
                    beat.map(|_| ())
                }
            } else if misses >= self.config.down_after_probes && node.state == NodeState::Up {
                tracing::warn!(node = %node.id, misses, "node missed its probes; marking it Down");
                round.marked_down.push(node.id);
                metrics::counter!("lowtail_gateway_nodes_marked_down_total").increment(1);
                // A reconnect after the node returns starts from a fresh connection.
                self.cluster.forget(node.id);
                meta.set_node_state(node.id, NodeState::Down, now_ms).await.map(|_| ())
            } else {
                Ok(())
            };
            if let Err(error) = result {
                tracing::warn!(node = %node.id, %error, "could not record membership change");
            }
        }
        Ok(round)
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
                if let Err(error) = self.probe_round(unix_now_ms()).await {
                    tracing::warn!(%error, "membership probe round failed");
                }
            }
        })
    }
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
