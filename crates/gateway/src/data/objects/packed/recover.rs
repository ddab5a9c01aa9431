//! A gateway's open packed stripes after a restart: the stripes its registry names are rebuilt
//! from the replicas the nodes hold (every acknowledged object found again, paged listings of each
//! node's replica units), reopened or sealed, and retried while some cannot be rebuilt yet. Must
//! not accept writes.

use super::{LIST_PAGE, OpenStripe, Packer, PackerState};
use crate::data::io::descriptor::{Holds, PackedObject, UnitDescriptor};
use crate::data::io::replica::{MAX_OBJECTS_PER_STRIPE, REPLICA_UNIT_BASE, ReplicaHeader};
use crate::data::{DataError, meta_error};
use bytes::{Bytes, BytesMut};
use futures_util::stream::{FuturesUnordered, StreamExt};
use meta::{MetaError, NodeInfo, NodeState, StripeId, StripeMeta, StripeState};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::RwLock;
use tokio::time::Instant;

/// A replica unit as a node lists it: its seq, length and descriptor.
pub(super) type Listed = (u16, u64, Bytes);

/// Registered stripes of a previous run, sorted by what became of them.
#[derive(Default)]
pub(super) struct Rebuilt {
    /// Rebuilt from their replicas, ready to seal.
    pub(super) ready: Vec<OpenStripe>,
    /// Their record is gone: nothing to seal.
    pub(super) gone: Vec<StripeId>,
    /// Not readable now; tried again later.
    pub(super) waiting: Vec<StripeId>,
}

impl Packer {
    /// Finds the open stripes this gateway left behind (a crash or kill) and seals them from their
    /// replicas. A stripe that cannot be rebuilt now (no parity node up) stays registered and is
    /// retried by `tick`.
    pub async fn recover(&self) -> Result<usize, DataError> {
        let meta = self.io.cluster().meta();
        let Some(value) = meta.get_config(&self.registry_key()).await.map_err(meta_error)? else { return Ok(0) };
        let ids: Vec<u64> = serde_json::from_str(&value)
            .map_err(|e| DataError::Internal(format!("open-stripe registry {:?}: {e}", self.registry_key())))?;
        self.state.lock().await.registered = ids.iter().map(|&id| StripeId(id)).collect();
        let rebuilt = self.rebuild_registered(ids.into_iter().map(StripeId).collect()).await;
        let mut state = self.state.lock().await;
        let recovered = self.apply_rebuilt(&mut state, rebuilt);
        let registered = state.registered.clone();
        self.save_registry(&registered).await?;
        Ok(recovered)
    }

    /// Rebuilds registered stripes `ids` of a previous run from their replicas (node RPCs, so
    /// without the state lock).
    pub(super) async fn rebuild_registered(&self, ids: Vec<StripeId>) -> Rebuilt {
        let meta = self.io.cluster().meta();
        let mut rebuilt = Rebuilt::default();
        for id in ids {
            let stripe = match meta.get_stripe(id).await {
                Ok(stripe) => stripe,
                Err(MetaError::NoSuchStripe(_)) => {
                    rebuilt.gone.push(id);
                    continue;
                }
                Err(error) => {
                    tracing::warn!(stripe = %id, %error, "open stripe left by a previous run not read yet");
                    rebuilt.waiting.push(id);
                    continue;
                }
            };
            match self.rebuild_open(&stripe).await {
                Ok(open) => rebuilt.ready.push(open),
                Err(error) => {
                    tracing::warn!(stripe = %id, %error, "open stripe left by a previous run not rebuilt yet");
                    rebuilt.waiting.push(id);
                }
            }
        }
        rebuilt
    }

    /// Sends the rebuilt stripes to be sealed, forgets the gone ones and keeps the others in
    /// `unrecovered` for a later `tick`. Returns how many were sent.
    pub(super) fn apply_rebuilt(&self, state: &mut PackerState, rebuilt: Rebuilt) -> usize {
        state.registered.retain(|id| !rebuilt.gone.contains(id));
        state.unrecovered.extend(rebuilt.waiting);
        let sent = rebuilt.ready.len();
        for open in rebuilt.ready {
            self.send_to_seal(state, open);
        }
        sent
    }

    /// An open stripe's data units, rebuilt from the replicas on its nodes (any replica found on
    /// any node; acknowledged ones are on every parity node).
    pub(super) async fn rebuild_open(&self, stripe: &StripeMeta) -> Result<OpenStripe, DataError> {
        let code = self.io.code(&stripe.code)?;
        let k = code.data_units();
        let nodes = self.io.cluster().node_map().await?;
        let mut units: Vec<BytesMut> = (0..k).map(|_| BytesMut::new()).collect();
        let mut replicas: BTreeMap<u16, u16> = BTreeMap::new();
        let parity_up =
            stripe.placement[k..].iter().any(|node| nodes.get(node).is_some_and(|n| n.state == NodeState::Up));
        if !parity_up && stripe.state == StripeState::Open {
            return Err(DataError::Unavailable(format!("no parity node of open stripe {} is up", stripe.id)));
        }
        let open = stripe.state == StripeState::Open;
        let mut lookups: FuturesUnordered<_> = stripe
            .placement
            .iter()
            .filter_map(|node| nodes.get(node).filter(|n| n.state == NodeState::Up))
            .map(|node| async move { (node.id, self.replicas_on(node, stripe.id).await) })
            .collect();
        let mut found: BTreeMap<u16, Vec<(NodeInfo, u64)>> = BTreeMap::new();
        let mut objects: BTreeMap<u16, PackedObject> = BTreeMap::new();
        while let Some((node_id, result)) = lookups.next().await {
            match result {
                Ok((node, listed)) => {
                    for (seq, len, descriptor) in listed {
                        found.entry(seq).or_default().push((node.clone(), len));
                        if let Some(UnitDescriptor { holds: Holds::Replica { object }, .. }) =
                            UnitDescriptor::decode(&descriptor)
                        {
                            objects.insert(seq, object);
                        }
                    }
                }
                // Every acknowledged replica is on every parity node: an Up parity node that did
                // not answer may hold replicas no other node listed, and sealing without them
                // would drop acknowledged objects (an empty list deletes the stripe's record).
                Err(error) if open && stripe.placement[k..].contains(&node_id) => {
                    return Err(DataError::Unavailable(format!(
                        "open stripe {}: parity node {node_id} did not list its replicas ({error})",
                        stripe.id
                    )));
                }
                Err(_) => {}
            }
        }
        drop(lookups);
        for (seq, holders) in found {
            let mut body = None;
            for (node, len) in holders {
                let Ok(client) = self.io.cluster().client(&node).await else { continue };
                if let Ok((bytes, _)) = client.read_range(stripe.id.0, seq, 0, len).await {
                    body = Some(bytes);
                    break;
                }
            }
            let Some(bytes) = body else {
                if open {
                    return Err(DataError::Unavailable(format!(
                        "open stripe {}: replica {seq} is listed but no node could read it",
                        stripe.id
                    )));
                }
                continue;
            };
            let Some((header, object)) = ReplicaHeader::decode(&bytes) else {
                tracing::warn!(stripe = %stripe.id, seq, "replica unit with a bad header ignored");
                continue;
            };
            let unit = usize::from(header.unit);
            if unit >= k || header.offset + header.length > stripe.unit_bytes {
                tracing::warn!(stripe = %stripe.id, seq, "replica unit outside the stripe ignored");
                continue;
            }
            let end = (header.offset + header.length) as usize;
            if units[unit].len() < end {
                units[unit].resize(end, 0);
            }
            units[unit][header.offset as usize..end].copy_from_slice(object);
            replicas.insert(seq, header.unit);
            // A replica written without a descriptor still gets its place described, unlabelled.
            let unlabelled = PackedObject {
                label: serde_json::Value::Null,
                unit: header.unit,
                offset_bytes: header.offset,
                length_bytes: header.length,
            };
            objects.entry(seq).or_insert(unlabelled);
        }
        objects.retain(|seq, _| replicas.contains_key(seq));
        Ok(OpenStripe {
            stripe: stripe.clone(),
            // Rebuilt only to be sealed: it takes no more appends.
            usable: vec![false; k],
            units,
            replicas,
            objects,
            in_flight: Arc::new(RwLock::new(())),
            opened_at: Instant::now(),
        })
    }

    /// The replica units of `stripe` on `node`, with their lengths and descriptors.
    pub(super) async fn replicas_on(
        &self,
        node: &NodeInfo,
        stripe: StripeId,
    ) -> Result<(NodeInfo, Vec<Listed>), DataError> {
        let client = self.io.cluster().client(node).await.map_err(|e| DataError::Unavailable(e.to_string()))?;
        let mut after = (stripe.0, REPLICA_UNIT_BASE - 1);
        let mut seqs = Vec::new();
        // At most MAX_OBJECTS_PER_STRIPE replicas, each page at least one, so the pages are bounded.
        for _page in 0..=usize::from(MAX_OBJECTS_PER_STRIPE) {
            let listing = client
                .list_units_with_descriptors(Some(after), LIST_PAGE)
                .await
                .map_err(|e| DataError::Unavailable(e.to_string()))?;
            for unit in &listing.units {
                if unit.stripe != stripe.0 {
                    return Ok((node.clone(), seqs));
                }
                let seq =
                    u16::try_from(unit.unit).map_err(|_| DataError::Internal("unit index over 16 bits".into()))?;
                seqs.push((seq, unit.len, unit.descriptor.clone()));
                after = (stripe.0, seq);
            }
            if !listing.truncated || listing.units.is_empty() {
                return Ok((node.clone(), seqs));
            }
        }
        Ok((node.clone(), seqs))
    }
}
