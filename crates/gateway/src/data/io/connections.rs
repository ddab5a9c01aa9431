//! `NodeConnections`: the storage nodes as the data path sees them: their records from the
//! [`meta::MetaStore`] and one lazily connected [`NodeClient`] per node, carrying the cluster secret.
//! Every client handed out is labelled with a latency class: the class of the request the calling
//! task works for ([`crate::classes::current`]), else the background class (the worst), so every
//! node task a request creates is queued in its class and background work never in a better one.
//! Owns connection reuse, that labelling and what is known of each node's rates and load
//! ([`NodeLoads`]); must not decide placement, retries, degraded reads or a request's class.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use meta::{MetaStore, NodeId, NodeInfo};
use node::{ClientError, NodeClient, UnitTransport};

use crate::classes::{self, ClassId};
use crate::data::DataError;
use crate::data::io::node_loads::NodeLoads;

/// Node records and clients. Cheap to share behind an `Arc`.
pub struct NodeConnections {
    meta: Arc<dyn MetaStore>,
    secret: String,
    rpc_timeout: Duration,
    transport: UnitTransport,
    /// node → (address it was connected to, client). A changed address reconnects.
    clients: Mutex<HashMap<NodeId, (String, NodeClient)>>,
    /// What is known of each node's speed and recent load (membership and the data path feed it).
    loads: NodeLoads,
    /// The class of node calls made outside any request (repair, the mover, scrubbing, collection).
    background_class: AtomicU8,
}

impl std::fmt::Debug for NodeConnections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeConnections").field("rpc_timeout", &self.rpc_timeout).finish_non_exhaustive()
    }
}

impl NodeConnections {
    /// A view over `meta`'s nodes, connecting with `secret`; every call is limited to `rpc_timeout`
    /// and unit bytes travel over `transport`.
    pub fn new(
        meta: Arc<dyn MetaStore>,
        secret: impl Into<String>,
        rpc_timeout: Duration,
        transport: UnitTransport,
    ) -> Self {
        Self {
            meta,
            secret: secret.into(),
            rpc_timeout,
            transport,
            clients: Mutex::new(HashMap::new()),
            loads: NodeLoads::new(),
            background_class: AtomicU8::new(0),
        }
    }

    /// Sets the class of node calls made outside any request: the worst class the gateway runs
    /// (class 0, the only one, until set).
    pub fn set_background_class(&self, class: ClassId) {
        self.background_class.store(class.0, Ordering::Relaxed);
    }

    /// The class a node call made now is labelled with.
    pub fn call_class(&self) -> ClassId {
        classes::current().unwrap_or(ClassId(self.background_class.load(Ordering::Relaxed)))
    }

    /// The metadata store.
    pub fn meta(&self) -> &Arc<dyn MetaStore> {
        &self.meta
    }

    /// Each node's probed rates and windowed load.
    pub fn loads(&self) -> &NodeLoads {
        &self.loads
    }

    /// Every registered node, by id.
    pub async fn nodes(&self) -> Result<Vec<NodeInfo>, DataError> {
        self.meta.list_nodes().await.map_err(|e| DataError::Meta(e.to_string()))
    }

    /// Every registered node keyed by id.
    pub async fn node_map(&self) -> Result<HashMap<NodeId, NodeInfo>, DataError> {
        Ok(self.nodes().await?.into_iter().map(|n| (n.id, n)).collect())
    }

    /// A client of `node` labelled with the class of the calling task's request (else the
    /// background class), connecting on first use (the connection is then shared and reconnects
    /// by itself after the node restarts).
    pub async fn client(&self, node: &NodeInfo) -> Result<NodeClient, ClientError> {
        // Read before the first await: the class is the calling task's.
        let class = self.call_class();
        self.shared_client(node).await.map(|client| client.with_class(class))
    }

    /// The shared client of `node`, unlabelled.
    async fn shared_client(&self, node: &NodeInfo) -> Result<NodeClient, ClientError> {
        if let Some((address, client)) = self.lock().get(&node.id)
            && *address == node.address
        {
            return Ok(client.clone());
        }
        // Connect outside the lock: a race only makes one spare connection, which is dropped.
        let client = NodeClient::connect(&node.address, &self.secret)
            .await?
            .with_timeout(self.rpc_timeout)
            .with_transport(self.transport);
        self.lock().insert(node.id, (node.address.clone(), client.clone()));
        Ok(client)
    }

    /// Forgets the connection to `node` (after its address changed or it was removed).
    pub fn forget(&self, node: NodeId) {
        self.lock().remove(&node);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, (String, NodeClient)>> {
        crate::data::lock(&self.clients)
    }
}
