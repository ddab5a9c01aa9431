//! Reconciliation of a node that answers with a directory other than the one the cluster admitted:
//! a restarted process, an older copy of its directory (a disk restored from an image, writes lost
//! in a power cut), a new disk, or another cluster's or node's directory.
//!
//! The node's `identity.json` (its random directory id, how many processes opened it, the
//! generation the cluster gave it at the last admission) is compared with the metadata store's
//! record of the admission ([`meta::AdmittedDirectory`]). A directory of another cluster or node is
//! refused. Any other difference starts a check: every unit the stripe records place on the node
//! is looked for in its listing (present, the stripe's unit length, and for an older copy or a new
//! disk the CRC-32C the stripe recorded), and every one short is recorded missing, so repair
//! rebuilds it. Until the check is done the node is marked `checking_since_ms` and its stripes count
//! as short in the census. Then the directory is claimed with a raised generation, on the node
//! first and in the metadata store second.
//!
//! Must not: rebuild units (repair does), delete units the node holds that no stripe references
//! there (the orphan collector does), or change the node's Up/Down state (membership does).

use std::collections::HashMap;

use futures_util::{StreamExt, TryStreamExt, stream};
use meta::{AdmittedDirectory, MetaError, MetaStore, NodeId, NodeInfo, StripeId, StripeMeta, StripeState};
use node::proto::IdentityResponse;
use serde::Serialize;

use crate::data::io::missing::{UnitOn, mark_missing};
use crate::data::{DataError, meta_error};

/// The metadata store's config entry naming the cluster (claimed in every node's directory).
pub const CLUSTER_ID_CONFIG: &str = "cluster-id";
/// Stripe ids read per page of a node's index.
const STRIPE_PAGE: usize = 1000;
/// Stripe records read at once during a check.
const CONCURRENT_STRIPE_READS: usize = 16;
/// Stripes whose lost units are recorded missing at once (each a compare-and-swap of its record).
const CONCURRENT_MARKS: usize = 32;
/// Most units a node listing may hold (a bound on the check's memory and pages).
const MAX_LISTED_UNITS: u64 = 100_000_000;

/// Unix milliseconds now (when a check marks units missing and admits the directory).
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

/// The cluster's id: the one recorded, or one made now by the first gateway to ask.
pub async fn cluster_id(meta: &dyn MetaStore) -> Result<String, DataError> {
    let made = format!("{:032x}", rand::random::<u128>());
    meta.put_config_if_absent(CLUSTER_ID_CONFIG, &made).await.map_err(meta_error)
}

/// How a node's directory compares with the one the cluster admitted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum DirectoryState {
    /// The process and directory the cluster admitted: nothing to check.
    Admitted,
    /// Never admitted (a new node, or a cluster from before admissions).
    New,
    /// The admitted directory, opened by another process since (a restart).
    Restarted,
    /// An older copy of the admitted directory: its generation is behind the admitted one.
    Older {
        /// The generation the directory carries.
        generation: u64,
        /// The generation the cluster admitted.
        admitted: u64,
    },
    /// Another directory than the admitted one, claimed by nobody or by this node: a new disk, or
    /// one restored from elsewhere.
    Replaced,
    /// A directory the cluster must not take: another cluster's or another node's.
    Foreign {
        /// Whose it is.
        why: String,
    },
}

impl DirectoryState {
    /// Whether the node's units must be checked before its stripes count as whole again.
    pub fn needs_check(&self) -> bool {
        !matches!(self, DirectoryState::Admitted | DirectoryState::Foreign { .. })
    }

    /// Whether the check compares checksums too: the directory's units may be other bytes under
    /// the same names (an older copy, a disk from elsewhere), not only fewer of them.
    fn checks_checksums(&self) -> bool {
        matches!(self, DirectoryState::Older { .. } | DirectoryState::Replaced | DirectoryState::New)
    }
}

/// Compares the identity `node` answered with the cluster's record of its admission. Pure.
pub fn classify(identity: &IdentityResponse, node: &NodeInfo, cluster_id: &str) -> DirectoryState {
    if identity.configured_node_id != node.id.0 {
        let why = format!("the process answering is node {}, not node {}", identity.configured_node_id, node.id);
        return DirectoryState::Foreign { why };
    }
    if let Some(claim) = &identity.claim {
        if claim.cluster_id != cluster_id {
            return DirectoryState::Foreign { why: format!("the directory belongs to cluster {}", claim.cluster_id) };
        }
        if claim.node_id != node.id.0 {
            return DirectoryState::Foreign { why: format!("the directory is node {}'s", claim.node_id) };
        }
    }
    let Some(admitted) = &node.directory else { return DirectoryState::New };
    if identity.directory_id != admitted.directory_id {
        return DirectoryState::Replaced;
    }
    let generation = identity.claim.as_ref().map_or(0, |claim| claim.generation);
    if generation < admitted.generation {
        return DirectoryState::Older { generation, admitted: admitted.generation };
    }
    if generation == admitted.generation && identity.starts == admitted.starts {
        DirectoryState::Admitted
    } else {
        DirectoryState::Restarted
    }
}

/// What a check found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// Units the stripe records place on the node (not already recorded missing), looked for.
    pub units_expected: u64,
    /// Of those, units absent, of another length or (compared) with another checksum.
    pub units_lost: u64,
    /// Of those, units recorded missing now (the rest were moved or recorded meanwhile).
    pub units_marked_missing: u64,
    /// Units the node holds.
    pub units_listed: u64,
    /// Whether checksums were compared.
    pub checksums_compared: bool,
    /// The generation claimed at the end.
    pub generation: u64,
}

/// A unit as the node listed it: its length and, when asked, its checksum.
pub type Listed = HashMap<(u64, u16), (u64, Option<u32>)>;

/// Checks `node`'s units (reached through `client`) against the stripe records, records what it
/// lacks missing, then claims the directory (raising its generation) on the node and in the
/// metadata store, which ends the check.
pub async fn check_and_admit(
    meta: &dyn MetaStore,
    client: &node::NodeClient,
    node: &NodeInfo,
    identity: &IdentityResponse,
    (cluster_id, state): (&str, &DirectoryState),
) -> Result<CheckReport, DataError> {
    let compare_checksums = state.checks_checksums();
    let listed = list_units(client, compare_checksums).await?;
    let mut report = mark_lost_units(meta, client, node, &listed, compare_checksums).await?;
    report.generation = claim(meta, client, node, identity, (cluster_id, unix_ms())).await?;
    Ok(report)
}

/// Compares the stripe records placing units on `node` with `listed` (the node's listing, taken
/// before) and records missing the units it lacks. Units the listing lacks are looked for on the node
/// again (one listing of each index page's stripe range) before they are recorded missing: a stripe written or sealed after the listing was taken has
/// its units on the node before its record names them (a restarted gateway re-sealing packed
/// stripes while every node was checked marked four units of one stripe missing, and the object
/// read as lost).
pub async fn mark_lost_units(
    meta: &dyn MetaStore,
    client: &node::NodeClient,
    node: &NodeInfo,
    listed: &Listed,
    compare_checksums: bool,
) -> Result<CheckReport, DataError> {
    let now_ms = unix_ms();
    let mut report = CheckReport {
        units_listed: listed.len() as u64,
        checksums_compared: compare_checksums,
        ..CheckReport::default()
    };
    let mut after = None;
    // Bounded: each page moves `after` on, and the index is finite.
    loop {
        let page = meta.stripes_on_node(node.id, after, STRIPE_PAGE).await.map_err(meta_error)?;
        let Some(&last) = page.last() else { break };
        after = Some(last);
        let stripes: Vec<Option<StripeMeta>> = stream::iter(page.into_iter().map(|id| stripe_if_any(meta, id)))
            .buffered(CONCURRENT_STRIPE_READS)
            .try_collect()
            .await?;
        let mut short = Vec::new();
        for stripe in stripes.into_iter().flatten() {
            let (expected, lost) = lost_units(&stripe, node.id, listed, compare_checksums);
            report.units_expected += expected;
            if !lost.is_empty() {
                short.push(stripe);
            }
        }
        let (Some(first), Some(last)) = (short.first(), short.last()) else { continue };
        // One listing of the page's range, as the node holds it now.
        let relisted = list_range(client, (first.id, last.id), compare_checksums).await?;
        let lost: Vec<(StripeId, Vec<UnitOn>)> = short
            .iter()
            .map(|stripe| (stripe.id, lost_units(stripe, node.id, &relisted, compare_checksums).1))
            .filter(|(_, lost)| !lost.is_empty())
            .collect();
        report.units_lost += lost.iter().map(|(_, units)| units.len() as u64).sum::<u64>();
        // Several at once, so the metadata store's group commit shares one fsync among them
        // rather than one each, one after another.
        let marks: Vec<_> = lost.iter().map(|(id, units)| mark_missing(meta, *id, units, now_ms)).collect();
        report.units_marked_missing += stream::iter(marks)
            .buffer_unordered(CONCURRENT_MARKS)
            .try_fold(0, |sum, (marked, _)| async move { Ok(sum + marked as u64) })
            .await?;
    }
    Ok(report)
}

/// The units the node holds now of the stripes `first..=last` (in id order), with their checksums
/// when asked.
async fn list_range(
    client: &node::NodeClient,
    (first, last): (StripeId, StripeId),
    with_checksums: bool,
) -> Result<Listed, DataError> {
    let after = first.0.checked_sub(1).map(|previous| (previous, u16::MAX));
    list_from(client, after, last.0, with_checksums).await
}

/// Stripe `id`, `None` when it is gone (released since the index was read).
async fn stripe_if_any(meta: &dyn MetaStore, id: StripeId) -> Result<Option<StripeMeta>, DataError> {
    match meta.get_stripe(id).await {
        Ok(stripe) => Ok(Some(stripe)),
        Err(MetaError::NoSuchStripe(_)) => Ok(None),
        Err(error) => Err(meta_error(error)),
    }
}

/// How many of `stripe`'s units are placed on `node` and not recorded missing, and which of those
/// the listing lacks (absent, another length, or another checksum where both are known). An open
/// stripe's units are not written yet (its objects live as replicas until the seal writes them).
pub fn lost_units(stripe: &StripeMeta, node: NodeId, listed: &Listed, compare_checksums: bool) -> (u64, Vec<UnitOn>) {
    if stripe.state != StripeState::Sealed {
        return (0, Vec::new());
    }
    let mut expected = 0;
    let mut lost = Vec::new();
    for (unit, _) in stripe.placement.iter().enumerate().filter(|(unit, on)| **on == node && !stripe.is_missing(*unit))
    {
        expected += 1;
        let unit = u16::try_from(unit).expect("a stripe has at most 255 units");
        let recorded_crc = stripe.unit_checksums.as_ref().and_then(|crcs| crcs.get(usize::from(unit)).copied());
        let whole = listed.get(&(stripe.id.0, unit)).is_some_and(|&(len, crc)| {
            let crc_agrees = !compare_checksums || recorded_crc.is_none() || crc == recorded_crc;
            len == stripe.unit_bytes && crc_agrees
        });
        if !whole {
            lost.push((unit, node));
        }
    }
    (expected, lost)
}

/// Every unit the node holds, with its checksum when asked.
pub async fn list_units(client: &node::NodeClient, with_checksums: bool) -> Result<Listed, DataError> {
    list_from(client, None, u64::MAX, with_checksums).await
}

/// The units the node holds after `after` up to stripe `last_stripe`, with their checksums when asked.
async fn list_from(
    client: &node::NodeClient,
    mut after: Option<(u64, u16)>,
    last_stripe: u64,
    with_checksums: bool,
) -> Result<Listed, DataError> {
    let mut listed = Listed::new();
    loop {
        let page = if with_checksums {
            client.list_units_with_checksums(after, 0).await
        } else {
            client.list_units(after, 0).await
        }
        .map_err(|error| DataError::Unavailable(error.to_string()))?;
        for unit in &page.units {
            let Ok(index) = u16::try_from(unit.unit) else { continue };
            if unit.stripe > last_stripe {
                return Ok(listed);
            }
            listed.insert((unit.stripe, index), (unit.len, unit.crc32c));
            after = Some((unit.stripe, index));
        }
        if !page.truncated || page.units.is_empty() {
            return Ok(listed);
        }
        if listed.len() as u64 > MAX_LISTED_UNITS {
            return Err(DataError::Internal(format!("the node lists more than {MAX_LISTED_UNITS} units")));
        }
    }
}

/// Claims the directory for the cluster with a generation above both the admitted one and the one
/// it carries: on the node first (so a crash in between leaves a directory ahead of the record,
/// which is checked again), then in the metadata store, which ends the check.
async fn claim(
    meta: &dyn MetaStore,
    client: &node::NodeClient,
    node: &NodeInfo,
    identity: &IdentityResponse,
    (cluster_id, now_ms): (&str, u64),
) -> Result<u64, DataError> {
    let carried = identity.claim.as_ref().map_or(0, |claim| claim.generation);
    let admitted = node.directory.as_ref().map_or(0, |directory| directory.generation);
    let generation = carried.max(admitted) + 1;
    let claim = node::identity::Claim { cluster_id: cluster_id.to_string(), node_id: node.id.0, generation };
    client.identity(Some(claim)).await.map_err(|error| DataError::Unavailable(error.to_string()))?;
    let directory = AdmittedDirectory {
        directory_id: identity.directory_id.clone(),
        starts: identity.starts,
        generation,
        admitted_ms: now_ms,
    };
    meta.set_node_directory(node.id, directory).await.map_err(meta_error)?;
    Ok(generation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use node::proto::IdentityClaim;

    fn node(directory: Option<(&str, u64, u64)>) -> NodeInfo {
        NodeInfo {
            id: NodeId(5),
            address: "127.0.0.1:1".into(),
            rack: "r".into(),
            capacity_bytes: 0,
            state: meta::NodeState::Up,
            last_heartbeat_ms: 0,
            down_since_ms: None,
            directory: directory.map(|(id, starts, generation)| AdmittedDirectory {
                directory_id: id.into(),
                starts,
                generation,
                admitted_ms: 0,
            }),
            checking_since_ms: None,
        }
    }

    fn identity(directory_id: &str, starts: u64, claim: Option<(&str, u32, u64)>) -> IdentityResponse {
        IdentityResponse {
            directory_id: directory_id.into(),
            created_ms: 0,
            held_units_at_creation: false,
            claim: claim.map(|(cluster, node, generation)| IdentityClaim {
                cluster_id: cluster.into(),
                node_id: node,
                generation,
            }),
            configured_node_id: 5,
            starts,
        }
    }

    #[test]
    fn a_directory_is_told_apart_by_id_process_count_and_generation() {
        let admitted = node(Some(("d1", 4, 7)));
        assert_eq!(classify(&identity("d1", 4, Some(("c", 5, 7))), &admitted, "c"), DirectoryState::Admitted);
        assert_eq!(classify(&identity("d1", 5, Some(("c", 5, 7))), &admitted, "c"), DirectoryState::Restarted);
        assert_eq!(
            classify(&identity("d1", 5, Some(("c", 5, 6))), &admitted, "c"),
            DirectoryState::Older { generation: 6, admitted: 7 }
        );
        assert_eq!(classify(&identity("d2", 1, None), &admitted, "c"), DirectoryState::Replaced);
        assert_eq!(classify(&identity("d2", 1, None), &node(None), "c"), DirectoryState::New);
        let foreign = classify(&identity("d1", 4, Some(("other", 5, 7))), &admitted, "c");
        assert!(matches!(foreign, DirectoryState::Foreign { ref why } if why.contains("cluster other")), "{foreign:?}");
        let swapped = classify(&identity("d1", 4, Some(("c", 6, 7))), &admitted, "c");
        assert!(matches!(swapped, DirectoryState::Foreign { ref why } if why.contains("node 6")), "{swapped:?}");
        let mut wrong_process = identity("d1", 4, Some(("c", 5, 7)));
        wrong_process.configured_node_id = 8;
        assert!(matches!(classify(&wrong_process, &admitted, "c"), DirectoryState::Foreign { .. }));
    }

    fn stripe(placement: [u32; 4], missing: Vec<u16>, checksums: Option<Vec<u32>>) -> StripeMeta {
        let placement = placement.iter().map(|&n| NodeId(n)).collect();
        StripeMeta {
            unit_checksums: checksums,
            missing_units: missing,
            version: 1,
            ..StripeMeta::sealed(StripeId(9), "rs-2-2", 100, placement)
        }
    }

    #[test]
    fn a_unit_absent_short_or_with_another_checksum_is_lost() {
        let on_five = stripe([5, 1, 5, 5], vec![3], Some(vec![10, 11, 12, 13]));
        let listed: Listed =
            HashMap::from([((9, 0), (100, Some(10))), ((9, 2), (99, Some(12))), ((9, 3), (100, None))]);
        // Unit 3 is recorded missing already: not looked for.
        assert_eq!(lost_units(&on_five, NodeId(5), &listed, false), (2, vec![(2, NodeId(5))]));
        let other_bytes: Listed = HashMap::from([((9, 0), (100, Some(99))), ((9, 2), (100, Some(12)))]);
        assert_eq!(lost_units(&on_five, NodeId(5), &other_bytes, true), (2, vec![(0, NodeId(5))]));
        assert_eq!(lost_units(&on_five, NodeId(5), &other_bytes, false), (2, vec![]));
        let absent = Listed::new();
        assert_eq!(lost_units(&on_five, NodeId(5), &absent, true).1, vec![(0, NodeId(5)), (2, NodeId(5))]);
        let mut open = on_five.clone();
        open.state = StripeState::Open;
        assert_eq!(lost_units(&open, NodeId(5), &absent, true), (0, vec![]), "an open stripe's units come at its seal");
    }
}
