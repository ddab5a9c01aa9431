//! Rebuilding the metadata store from the storage nodes alone (`lowtail admin meta rebuild`), for a
//! store that was lost or damaged past use.
//!
//! 1. **Survey.** Every node lists its units with their descriptors (`data::descriptor`): which
//!    stripe and unit each is, the stripe's code and unit size, and what it holds, a segment of a
//!    labelled write or the objects packed into it, each with the label the S3 layer gave it.
//! 2. **Stripes.** Every stripe found is recorded where its units are; a unit found nowhere (or
//!    of the wrong length) is recorded missing, for repair. Stripes nothing references afterwards
//!    are left to the stripe collector.
//! 3. **Snapshot.** The newest metadata snapshot the nodes hold (`meta_snapshot`) that reads back
//!    whole is restored: buckets and their settings, objects, uploads and parts, access keys and
//!    config. Stripe records, node records, indexes, leases and counters are not taken from it (the
//!    nodes are the truth for those). A restored object whose stripes are found nowhere is dropped
//!    (deleted after the snapshot, its units collected); one whose stripes are found but cannot be
//!    read is kept and counted.
//! 4. **Roll forward.** Each labelled write the snapshot does not reference and that may have
//!    committed after it began (it started after the oldest write then in flight, when the snapshot
//!    says; else less than a write deadline before it; with no snapshot, every write) becomes its
//!    object's record when its stripes cover the object whole and it started after the record it
//!    would replace; its ETag and checksum are computed from its bytes. A part becomes its upload's part (the upload recorded if the snapshot lacks it). An
//!    object still in an open packed stripe (only its replicas on the nodes) is written again.
//!
//! What it cannot know: a delete since the newest snapshot whose units are still on the nodes
//! (the object comes back), and a multipart upload completed since the snapshot (its parts come
//! back as a pending upload, which the client can complete again). docs/durability.md says so.
//!
//! Beside the two layers (like `stripe_gc`): it writes both layers' records. Owns the survey and
//! the rules above. Must not: write into a store that holds buckets, objects, stripes or nodes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::{StreamExt, stream};
use md5::{Digest, Md5};
use meta::{
    BucketMeta, Entry, Layout, MetaError, MetaStore, NodeId, NodeInfo, ObjectMeta, PartMeta, StripeId, StripeMeta,
    StripeSegment, UploadMeta,
};
use serde::Serialize;

use crate::data::cluster::membership::unix_now_ms;
use crate::data::io::descriptor::{Holds, PackedObject, UnitDescriptor, labelled};
use crate::data::io::replica::{REPLICA_HEADER_BYTES, REPLICA_UNIT_BASE};
use crate::data::objects::erasure::ErasureData;
use crate::data::{DataConfig, DataError, ObjectData, meta_error};
use crate::labels::{ObjectLabel, SnapshotLabel, WriteLabel};

/// Bytes of an object read at once while its ETag and checksum are computed.
const READ_PIECE_BYTES: u64 = 8 << 20;
/// Writes rolled forward at once (each reads its object's bytes for its ETag).
const CONCURRENT_RECORDS: usize = 16;
/// Records written per transaction when a snapshot is restored.
const IMPORT_BATCH: usize = 1000;
/// Record prefixes a snapshot is not trusted for: the nodes say where units are, and what the
/// cluster runs now (leases, counters, open stripes) is not what it ran then.
const NOT_RESTORED: [&[u8]; 8] = [
    b"stripe/",
    b"node/",
    b"node-stripe/",
    b"under-redundant/",
    b"lease/",
    b"counter/",
    b"format/",
    b"config/packed-open/",
];

/// Where the metadata is rebuilt from: the cluster's nodes and its data path settings (code, unit
/// size, secret).
pub struct RebuildSource {
    /// Every node of the cluster, at the addresses it answers on now.
    pub nodes: Vec<NodeInfo>,
    /// The data path's settings.
    pub data: DataConfig,
}

/// What a rebuild found and wrote.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RebuildReport {
    /// Nodes that answered, of those asked.
    pub nodes_listed: usize,
    /// Nodes that did not answer (their units were not seen: a rebuild with a node missing records
    /// its units missing, and repair rebuilds them).
    pub nodes_unanswered: Vec<NodeId>,
    /// Units listed.
    pub units_listed: u64,
    /// Units without a descriptor this version can read.
    pub units_undescribed: u64,
    /// Stripes recorded.
    pub stripes_recorded: u64,
    /// Of those, stripes with units missing (repair's to rebuild).
    pub stripes_missing_units: u64,
    /// The snapshot restored, if any.
    pub snapshot: Option<SnapshotLabel>,
    /// Records restored from it.
    pub snapshot_records: u64,
    /// Objects restored from it.
    pub objects_from_snapshot: u64,
    /// Objects written (or overwritten) after it, rebuilt from their units' labels.
    pub objects_rolled_forward: u64,
    /// Objects of open packed stripes written again from their replicas.
    pub objects_rewritten_from_replicas: u64,
    /// Parts of pending uploads rebuilt from labels.
    pub parts_rolled_forward: u64,
    /// Snapshot objects dropped: none of a stripe of theirs is on any node.
    pub objects_dropped: Vec<String>,
    /// Objects kept whose stripes have too few units to be read.
    pub objects_unreadable: Vec<String>,
    /// Labelled writes not rolled forward because their bytes are lost (too few units of a stripe
    /// left: a write that failed and left a unit behind, or one whose units were lost since), as
    /// `bucket/key`; the key's next older write that reads back is rolled forward instead.
    #[serde(default)]
    pub writes_unreadable: Vec<String>,
    /// The cluster id the nodes' directories name.
    pub cluster_id: Option<String>,
    /// How long it took.
    pub elapsed_ms: u64,
}

/// A stripe as the nodes hold it.
#[derive(Debug, Default)]
struct FoundStripe {
    /// Each unit index found, with the nodes holding it and their lengths.
    units: BTreeMap<u16, Vec<(NodeId, u64)>>,
    /// The code and unit size the descriptors give.
    shape: Option<(String, u64, u64)>,
    /// A segment's label and place.
    segment: Option<(serde_json::Value, u64, u64)>,
    /// Packed objects, by unit, offset, length and label (an empty object shares its offset with
    /// the next one): every unit's list merged.
    packed: BTreeMap<(u16, u64, u64, String), PackedObject>,
    /// Replicas of an open stripe: seq → (node, length, object).
    replicas: BTreeMap<u16, (NodeId, u64, Option<PackedObject>)>,
}

/// What the nodes hold.
#[derive(Debug, Default)]
struct Survey {
    stripes: BTreeMap<u64, FoundStripe>,
    cluster_ids: BTreeMap<String, usize>,
}

/// Rebuilds the metadata into `target`, which must hold no bucket, object, stripe or node.
pub async fn rebuild(source: RebuildSource, target: Arc<dyn MetaStore>) -> Result<RebuildReport, DataError> {
    let started = Instant::now();
    refuse_a_used_target(target.as_ref()).await?;
    let mut report = RebuildReport::default();
    let survey = survey(&source, &mut report).await;
    record_nodes(target.as_ref(), &source.nodes, &survey, &mut report).await?;
    // Before anything is written: no new stripe may take a found one's id.
    set_counters(target.as_ref(), &survey).await?;
    let data = ErasureData::new(source.data.clone(), Arc::clone(&target)).await?;
    record_stripes(target.as_ref(), &source, &survey, &mut report).await?;
    let referenced = restore_snapshot(target.as_ref(), &data, &survey, &mut report).await?;
    // A write that started a write deadline before the snapshot had committed by then, or never
    // will: the snapshot's record of its key is the truth for it.
    let horizon_ms = report.snapshot.as_ref().map_or(0, |snapshot| {
        snapshot.writes_since_ms.unwrap_or_else(|| snapshot.taken_ms.saturating_sub(source.data.write_deadline_ms))
    });
    rewrite_replicas(target.as_ref(), &data, &survey, horizon_ms, &mut report).await?;
    check_objects(target.as_ref(), &mut report).await?;
    roll_forward(target.as_ref(), &data, &survey, (&referenced, horizon_ms), &mut report).await?;
    set_counters(target.as_ref(), &survey).await?;
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

async fn refuse_a_used_target(target: &dyn MetaStore) -> Result<(), DataError> {
    let used = !target.list_buckets().await.map_err(meta_error)?.is_empty()
        || !target.list_nodes().await.map_err(meta_error)?.is_empty()
        || !target.list_stripes(None, 1).await.map_err(meta_error)?.is_empty();
    if used {
        return Err(DataError::Internal(
            "the metadata store to rebuild into is not empty: rebuild into a new one".into(),
        ));
    }
    Ok(())
}

/// Lists every node's units with their descriptors.
async fn survey(source: &RebuildSource, report: &mut RebuildReport) -> Survey {
    let mut survey = Survey::default();
    for node in &source.nodes {
        match survey_node(node, &source.data.cluster_secret, &mut survey).await {
            Ok(listed) => {
                report.nodes_listed += 1;
                report.units_listed += listed.0;
                report.units_undescribed += listed.1;
            }
            Err(error) => {
                tracing::warn!(node = %node.id, %error, "node not surveyed; its units count as missing");
                report.nodes_unanswered.push(node.id);
            }
        }
    }
    survey
}

/// Adds `node`'s units to `survey`: how many were listed, and how many had no descriptor.
async fn survey_node(node: &NodeInfo, secret: &str, survey: &mut Survey) -> Result<(u64, u64), String> {
    let client = node::NodeClient::connect(&node.address, secret).await.map_err(|e| e.to_string())?;
    let identity = client.identity(None).await.map_err(|e| e.to_string())?;
    if let Some(claim) = identity.claim {
        *survey.cluster_ids.entry(claim.cluster_id).or_default() += 1;
    }
    let (mut listed, mut undescribed) = (0, 0);
    let mut after = None;
    // Bounded: every page moves `after` on through a finite listing.
    loop {
        let page = client.list_units_with_descriptors(after, 0).await.map_err(|e| e.to_string())?;
        for unit in &page.units {
            let Ok(index) = u16::try_from(unit.unit) else { continue };
            after = Some((unit.stripe, index));
            listed += 1;
            let descriptor = UnitDescriptor::decode(&unit.descriptor);
            undescribed += u64::from(descriptor.is_none());
            note_unit(survey.stripes.entry(unit.stripe).or_default(), node.id, (index, unit.len), descriptor);
        }
        if !page.truncated || page.units.is_empty() {
            return Ok((listed, undescribed));
        }
    }
}

fn note_unit(found: &mut FoundStripe, node: NodeId, (index, len): (u16, u64), descriptor: Option<UnitDescriptor>) {
    if index >= REPLICA_UNIT_BASE {
        let object = match descriptor {
            Some(UnitDescriptor { holds: Holds::Replica { object }, .. }) => Some(object),
            _ => None,
        };
        found.replicas.entry(index).or_insert((node, len, object));
        return;
    }
    found.units.entry(index).or_default().push((node, len));
    let Some(descriptor) = descriptor else { return };
    found.shape.get_or_insert((descriptor.code.clone(), descriptor.unit_bytes, descriptor.written_ms));
    match descriptor.holds {
        Holds::Segment { label, object_offset_bytes, length_bytes } => {
            found.segment.get_or_insert((label, object_offset_bytes, length_bytes));
        }
        Holds::Packed { objects } => {
            for object in objects {
                let key = (object.unit, object.offset_bytes, object.length_bytes, object.label.to_string());
                found.packed.entry(key).or_insert(object);
            }
        }
        Holds::Replica { .. } => {}
    }
}

/// Registers the nodes (Up, to be admitted at their first probe) and the cluster's id, the one
/// most of their directories name.
async fn record_nodes(
    target: &dyn MetaStore,
    nodes: &[NodeInfo],
    survey: &Survey,
    report: &mut RebuildReport,
) -> Result<(), DataError> {
    for node in nodes {
        let fresh = NodeInfo { directory: None, checking_since_ms: None, ..node.clone() };
        target.register_node(fresh).await.map_err(meta_error)?;
    }
    let cluster_id = survey.cluster_ids.iter().max_by_key(|(_, count)| **count).map(|(id, _)| id.clone());
    if let Some(id) = &cluster_id {
        target
            .put_config_if_absent(crate::data::cluster::reconcile::CLUSTER_ID_CONFIG, id)
            .await
            .map_err(meta_error)?;
    }
    report.cluster_id = cluster_id;
    Ok(())
}

/// Records every stripe with sealed units found, where they are; the rest of each stripe missing.
async fn record_stripes(
    target: &dyn MetaStore,
    source: &RebuildSource,
    survey: &Survey,
    report: &mut RebuildReport,
) -> Result<(), DataError> {
    let node_ids: Vec<NodeId> = source.nodes.iter().map(|node| node.id).collect();
    for (&id, found) in survey.stripes.iter().filter(|(_, found)| !found.units.is_empty()) {
        let Some(record) = stripe_record(StripeId(id), found, &source.data, &node_ids) else {
            tracing::warn!(stripe = id, "stripe of an unknown shape not recorded");
            continue;
        };
        report.stripes_missing_units += u64::from(!record.missing_units.is_empty());
        target.create_stripe(record).await.map_err(meta_error)?;
        report.stripes_recorded += 1;
    }
    Ok(())
}

/// A stripe's record from what the nodes hold of it: each unit found whole where it is, the others
/// placed on nodes holding none of the stripe and recorded missing. `None` when its code is
/// unknown or there are too few nodes to place it.
fn stripe_record(id: StripeId, found: &FoundStripe, data: &DataConfig, nodes: &[NodeId]) -> Option<StripeMeta> {
    let (code, unit_bytes, _) = found.shape.clone().unwrap_or_else(|| {
        let longest = found.units.values().flatten().map(|(_, len)| *len).max().unwrap_or(0);
        (data.code.clone(), longest, 0)
    });
    let n = code.parse::<codec::CodeSpec>().ok()?.total_units();
    let mut placement: Vec<Option<NodeId>> = vec![None; n];
    for (&unit, holders) in found.units.iter().filter(|(unit, _)| usize::from(**unit) < n) {
        let whole = holders.iter().find(|(node, len)| *len == unit_bytes && !placement_holds(&placement, *node));
        placement[usize::from(unit)] = whole.map(|(node, _)| *node);
    }
    let missing: Vec<u16> = (0..n).filter(|&unit| placement[unit].is_none()).map(|unit| unit as u16).collect();
    let spares: Vec<NodeId> = nodes.iter().filter(|node| !placement_holds(&placement, **node)).copied().collect();
    let mut spare = spares.into_iter();
    let placement: Vec<NodeId> =
        placement.into_iter().map(|slot| slot.or_else(|| spare.next())).collect::<Option<_>>()?;
    let packed_bytes = (!found.packed.is_empty()).then(|| found.packed.values().map(|o| o.length_bytes).sum());
    let mut record = StripeMeta { packed_bytes, ..StripeMeta::sealed(id, code, unit_bytes, placement) };
    record.mark_missing(missing, unix_now_ms());
    Some(record)
}

fn placement_holds(placement: &[Option<NodeId>], node: NodeId) -> bool {
    placement.contains(&Some(node))
}

/// A labelled write as the units describe it: its segments (striped) or its place (packed).
#[derive(Debug, Clone)]
struct FoundWrite {
    label: ObjectLabel,
    layout: Layout,
    /// Whether its pieces cover the object whole.
    whole: bool,
    size_bytes: u64,
}

/// What a write wrote: its bucket, key and part (upload id and number), if it is one.
type WriteTarget = (String, String, Option<(String, u16)>);

/// A snapshot as the units describe it: its label and layout (striped: its segments so far).
type FoundSnapshot = (SnapshotLabel, Layout);

/// Every labelled object write the units describe, with its layout; and every snapshot.
fn found_writes(survey: &Survey) -> (Vec<FoundWrite>, BTreeMap<u64, FoundSnapshot>) {
    let mut striped: HashMap<(WriteTarget, u64), (ObjectLabel, Vec<StripeSegment>)> = HashMap::new();
    let mut snapshots: BTreeMap<u64, FoundSnapshot> = BTreeMap::new();
    let mut writes = Vec::new();
    for (&id, found) in &survey.stripes {
        let unit_bytes = found.shape.as_ref().map_or(0, |shape| shape.1);
        if let Some((label, offset, length)) = &found.segment {
            let segment =
                StripeSegment { stripe: StripeId(id), unit_bytes, object_offset_bytes: *offset, length_bytes: *length };
            match WriteLabel::from_value(label) {
                Some(WriteLabel::Object(label)) => {
                    let part = label.part.as_ref().map(|part| (part.upload_id.clone(), part.part_number));
                    let key = ((label.bucket.clone(), label.key.clone(), part), label.write_id);
                    striped.entry(key).or_insert_with(|| (*label, Vec::new())).1.push(segment);
                }
                Some(WriteLabel::Snapshot(label)) => {
                    let empty = Layout::Striped { segments: Vec::new() };
                    if let (_, Layout::Striped { segments }) =
                        snapshots.entry(label.snapshot_id).or_insert_with(|| (label, empty))
                    {
                        segments.push(segment);
                        segments.sort_by_key(|segment| segment.object_offset_bytes);
                    }
                }
                None => {}
            }
        }
        for object in found.packed.values() {
            let layout = Layout::Packed {
                stripe: StripeId(id),
                unit: object.unit,
                offset_bytes: object.offset_bytes,
                length_bytes: object.length_bytes,
                replica_unit: None,
            };
            match WriteLabel::from_value(&object.label) {
                Some(WriteLabel::Object(label)) => {
                    let whole = label.size_bytes.is_none_or(|size| size == object.length_bytes);
                    writes.push(FoundWrite { label: *label, layout, whole, size_bytes: object.length_bytes });
                }
                Some(WriteLabel::Snapshot(label)) => {
                    snapshots.insert(label.snapshot_id, (label, layout));
                }
                None => {}
            }
        }
    }
    for (label, mut segments) in striped.into_values() {
        segments.sort_by_key(|segment| segment.object_offset_bytes);
        let (whole, size_bytes) = covered(&segments, label.size_bytes);
        writes.push(FoundWrite { label, layout: Layout::Striped { segments }, whole, size_bytes });
    }
    (writes, snapshots)
}

/// Whether `segments` (in offset order) cover an object from its first byte without a gap, and
/// its size then; an object that declared its size must have exactly that many.
fn covered(segments: &[StripeSegment], declared: Option<u64>) -> (bool, u64) {
    let mut end = 0;
    for segment in segments {
        if segment.object_offset_bytes != end {
            return (false, end);
        }
        end += segment.length_bytes;
    }
    (declared.is_none_or(|size| size == end), end)
}

/// Restores the newest snapshot that reads back whole; the stripes its objects and parts reference.
async fn restore_snapshot(
    target: &dyn MetaStore,
    data: &ErasureData,
    survey: &Survey,
    report: &mut RebuildReport,
) -> Result<BTreeSet<StripeId>, DataError> {
    let (_, snapshots) = found_writes(survey);
    let mut newest_first: Vec<_> = snapshots.into_values().collect();
    newest_first.sort_by_key(|(label, _)| std::cmp::Reverse(label.taken_ms));
    for (label, layout) in newest_first {
        let size_bytes = layout.size_bytes();
        let records = match data.read(&layout, 0..size_bytes).await {
            Ok(blob) => crate::meta_snapshot::decode_records(&blob).map_err(DataError::Internal),
            Err(error) => Err(error),
        };
        match records {
            Ok(records) => {
                let referenced = import_snapshot(target, records, report).await?;
                report.snapshot = Some(label);
                return Ok(referenced);
            }
            Err(error) => tracing::warn!(taken_ms = label.taken_ms, %error, "snapshot unreadable; trying an older one"),
        }
    }
    Ok(BTreeSet::new())
}

/// Writes a snapshot's records (those it is trusted for) and checks its objects against the
/// stripes recorded: the stripes its objects and parts reference.
async fn import_snapshot(
    target: &dyn MetaStore,
    records: Vec<Entry>,
    report: &mut RebuildReport,
) -> Result<BTreeSet<StripeId>, DataError> {
    let kept: Vec<Entry> =
        records.into_iter().filter(|(key, _)| !NOT_RESTORED.iter().any(|prefix| key.starts_with(prefix))).collect();
    report.snapshot_records = kept.len() as u64;
    let mut referenced = BTreeSet::new();
    let mut objects = Vec::new();
    for (key, value) in &kept {
        if let Some(name) = key.strip_prefix(b"object/") {
            let object: ObjectMeta = meta::format::decode(key, value).map_err(meta_error)?;
            referenced.extend(object.layout.stripes());
            objects.push((String::from_utf8_lossy(name).into_owned(), object));
        } else if key.starts_with(b"part/") {
            let part: PartMeta = meta::format::decode(key, value).map_err(meta_error)?;
            referenced.extend(part.layout.stripes());
        }
    }
    for batch in kept.chunks(IMPORT_BATCH) {
        target.import_records(batch.to_vec()).await.map_err(meta_error)?;
    }
    report.objects_from_snapshot = objects.len() as u64;
    Ok(referenced)
}

/// Checks every object record against the stripes recorded (after the replicas were written
/// again): drops those a stripe of which is on no node, counts those that cannot be read.
async fn check_objects(target: &dyn MetaStore, report: &mut RebuildReport) -> Result<(), DataError> {
    let mut after = None;
    // Bounded: each page moves `after` on.
    loop {
        let page = target.export_records(after.clone(), 10_000).await.map_err(meta_error)?;
        let Some((last, _)) = page.last() else { return Ok(()) };
        after = Some(last.clone());
        for (key, value) in page.iter().filter(|(key, _)| key.starts_with(b"object/")) {
            let object: ObjectMeta = meta::format::decode(key, value).map_err(meta_error)?;
            let name = String::from_utf8_lossy(&key[b"object/".len()..]).into_owned();
            check_restored(target, &name, &object, report).await?;
        }
    }
}

/// Drops a restored object none of whose stripes survive whole-ly absent (deleted since), and counts
/// one whose stripes are found but cannot be read.
async fn check_restored(
    target: &dyn MetaStore,
    name: &str,
    object: &ObjectMeta,
    report: &mut RebuildReport,
) -> Result<(), DataError> {
    let mut absent = false;
    let mut unreadable = false;
    for id in object.layout.stripes() {
        match target.get_stripe(id).await {
            Ok(stripe) => unreadable |= !decodable(&stripe),
            Err(MetaError::NoSuchStripe(_)) => absent = true,
            Err(error) => return Err(meta_error(error)),
        }
    }
    if absent {
        let (bucket, key) = name.split_once('/').unwrap_or((name, ""));
        target.delete_object(bucket, key).await.map_err(meta_error)?;
        report.objects_dropped.push(name.to_string());
    } else if unreadable {
        report.objects_unreadable.push(name.to_string());
    }
    Ok(())
}

fn decodable(stripe: &StripeMeta) -> bool {
    let Ok(code) = stripe.code_spec().map(|spec| spec.build()) else { return false };
    let present: Vec<bool> = (0..stripe.placement.len()).map(|unit| !stripe.is_missing(unit)).collect();
    code.map(|code| code.is_decodable(&present)).unwrap_or(false)
}

/// Records the labelled writes the snapshot does not reference, newest per key, where they are
/// whole and newer than what the key holds.
async fn roll_forward(
    target: &dyn MetaStore,
    data: &ErasureData,
    survey: &Survey,
    (referenced, horizon_ms): (&BTreeSet<StripeId>, u64),
    report: &mut RebuildReport,
) -> Result<(), DataError> {
    let (writes, _) = found_writes(survey);
    let mut by_target: BTreeMap<WriteTarget, Vec<FoundWrite>> = BTreeMap::new();
    for write in writes.into_iter().filter(|write| write.whole && write.label.started_ms >= horizon_ms) {
        if write.layout.stripes().iter().all(|id| referenced.contains(id)) {
            continue;
        }
        let part = write.label.part.as_ref().map(|part| (part.upload_id.clone(), part.part_number));
        let key = (write.label.bucket.clone(), write.label.key.clone(), part);
        by_target.entry(key).or_default().push(write);
    }
    // Each write's bytes are read for its ETag: several keys at once, as a GET-heavy client would.
    let mut recorded = stream::iter(by_target.into_values().map(|writes| roll_forward_key(target, data, writes)))
        .buffer_unordered(CONCURRENT_RECORDS);
    while let Some(rolled) = recorded.next().await {
        let rolled = rolled?;
        report.objects_rolled_forward += rolled.objects;
        report.parts_rolled_forward += rolled.parts;
        report.writes_unreadable.extend(rolled.unreadable);
    }
    Ok(())
}

/// What rolling one key (or part) forward came to.
#[derive(Debug, Default)]
struct Rolled {
    objects: u64,
    parts: u64,
    /// Writes passed over because their bytes are lost, as `bucket/key`.
    unreadable: Vec<String>,
}

/// Rolls the newest of `writes` (one key's, or one part's) forward; when its bytes are lost, the
/// next newest, and so on (bounded by the writes found).
async fn roll_forward_key(
    target: &dyn MetaStore,
    data: &ErasureData,
    mut writes: Vec<FoundWrite>,
) -> Result<Rolled, DataError> {
    writes.sort_by_key(|write| std::cmp::Reverse((write.label.started_ms, write.label.write_id)));
    let mut rolled = Rolled::default();
    for write in writes {
        let name = format!("{}/{}", write.label.bucket, write.label.key);
        let outcome = match write.label.part.clone() {
            None => record_object(target, data, write).await.map(|recorded| (u64::from(recorded), 0)),
            Some(part) => record_part(target, data, write, part).await.map(|()| (0, 1)),
        };
        match outcome {
            Ok((objects, parts)) => {
                (rolled.objects, rolled.parts) = (objects, parts);
                return Ok(rolled);
            }
            Err(DataError::Lost(why)) => {
                tracing::warn!(write = %name, %why, "a write's bytes are lost: not rolled forward; trying an older one");
                rolled.unreadable.push(name);
            }
            Err(error) => return Err(error),
        }
    }
    Ok(rolled)
}

/// The ETag (hex MD5) and the S3 checksum of the object at `layout`, from its bytes.
async fn digests(
    data: &ErasureData,
    layout: &Layout,
    size: u64,
    algorithm: Option<meta::ChecksumAlgorithm>,
) -> Result<(String, Option<meta::StoredChecksum>), DataError> {
    let mut md5 = Md5::new();
    let mut hasher = algorithm.map(crate::s3::checksum::Hasher::new);
    let mut at = 0;
    // Bounded: each pass reads up to READ_PIECE_BYTES more of a finite object.
    while at < size {
        let end = (at + READ_PIECE_BYTES).min(size);
        let bytes = data.read(layout, at..end).await?;
        md5.update(&bytes);
        if let Some(hasher) = hasher.as_mut() {
            hasher.update(&bytes);
        }
        at = end;
    }
    let checksum =
        algorithm.zip(hasher).map(|(algorithm, hasher)| crate::s3::checksum::full(algorithm, &hasher.finalize()));
    Ok((hex::encode(md5.finalize()), checksum))
}

/// Records `write` as its key's object unless the key holds a later one; whether it did.
async fn record_object(target: &dyn MetaStore, data: &ErasureData, write: FoundWrite) -> Result<bool, DataError> {
    let label = &write.label;
    match target.get_object(&label.bucket, &label.key).await {
        Ok(existing) if existing.last_modified_ms >= label.started_ms => return Ok(false),
        Ok(_) | Err(MetaError::NoSuchKey { .. } | MetaError::NoSuchBucket(_)) => {}
        Err(error) => return Err(meta_error(error)),
    }
    ensure_bucket(target, &label.bucket, label.started_ms).await?;
    let (etag, checksum) = digests(data, &write.layout, write.size_bytes, label.checksum).await?;
    let object = ObjectMeta {
        version: Default::default(),
        tags: Default::default(),
        size_bytes: write.size_bytes,
        etag,
        content_type: label.content_type.clone(),
        user_metadata: label.user_metadata.clone(),
        headers: label.headers.clone(),
        last_modified_ms: label.started_ms,
        completed_upload_id: None,
        checksum,
        layout: write.layout,
    };
    target.put_object(&label.bucket, &label.key, object).await.map_err(meta_error)?;
    Ok(true)
}

async fn ensure_bucket(target: &dyn MetaStore, name: &str, created_ms: u64) -> Result<(), DataError> {
    let bucket = BucketMeta {
        versioning: Default::default(),
        tags: Default::default(),
        name: name.to_string(),
        created_ms,
        region: None,
        owner: None,
        write_ack: Default::default(),
        class: None,
        profile: None,
        class_profiles: Default::default(),
    };
    match target.create_bucket(bucket).await {
        Ok(()) | Err(MetaError::BucketAlreadyExists(_)) => Ok(()),
        Err(error) => Err(meta_error(error)),
    }
}

/// Records `write` as part `part` of its upload, recording the upload first if it is not there.
async fn record_part(
    target: &dyn MetaStore,
    data: &ErasureData,
    write: FoundWrite,
    part: crate::labels::PartOf,
) -> Result<(), DataError> {
    let label = &write.label;
    ensure_bucket(target, &label.bucket, label.started_ms).await?;
    if let Err(MetaError::NoSuchUpload(_)) = target.get_multipart(&label.bucket, &label.key, &part.upload_id).await {
        let upload = UploadMeta {
            tags: Default::default(),
            upload_id: part.upload_id.clone(),
            bucket: label.bucket.clone(),
            key: label.key.clone(),
            initiated_ms: label.started_ms,
            content_type: label.content_type.clone(),
            user_metadata: label.user_metadata.clone(),
            headers: label.headers.clone(),
            checksum: label.checksum.map(|algorithm| meta::UploadChecksum { algorithm, composite: true }),
        };
        let key = meta::format::upload_key(&label.bucket, &part.upload_id);
        target.import_records(vec![(key, meta::format::encode(&upload))]).await.map_err(meta_error)?;
    }
    let (etag, checksum) = digests(data, &write.layout, write.size_bytes, label.checksum).await?;
    let record = PartMeta {
        part_number: part.part_number,
        size_bytes: write.size_bytes,
        etag,
        last_modified_ms: label.started_ms,
        checksum,
        layout: write.layout,
    };
    target.put_part(&label.bucket, &label.key, &part.upload_id, record).await.map_err(meta_error)?;
    Ok(())
}

/// Writes again each object of an open packed stripe (only its replicas on the nodes) from a
/// replica, and records it as its key's object where the key's record points at that replica, or
/// the key has none (or an older one) and the write is past `horizon_ms`.
async fn rewrite_replicas(
    target: &dyn MetaStore,
    data: &ErasureData,
    survey: &Survey,
    horizon_ms: u64,
    report: &mut RebuildReport,
) -> Result<(), DataError> {
    for (&stripe, found) in survey.stripes.iter().filter(|(_, found)| found.units.is_empty()) {
        for (&seq, (node, len, object)) in &found.replicas {
            let Some(object) = object else { continue };
            let Some(WriteLabel::Object(label)) = WriteLabel::from_value(&object.label) else { continue };
            if !replica_is_wanted(target, &label, (stripe, seq), horizon_ms).await? {
                continue;
            }
            let bytes = match read_replica(data, *node, (stripe, seq), *len).await {
                Ok(bytes) => bytes,
                Err(error) => {
                    tracing::warn!(stripe, seq, %error, "replica unreadable; its object is not rebuilt");
                    continue;
                }
            };
            let written = labelled(WriteLabel::Object(label.clone()).to_value(), data.write(bytes.clone())).await?;
            let write =
                FoundWrite { label: *label, layout: written.layout, whole: true, size_bytes: bytes.len() as u64 };
            // The record pointing at the replica goes first: the new one is not older than it.
            let _ = target.delete_object(&write.label.bucket, &write.label.key).await;
            if record_object(target, data, write).await? {
                report.objects_rewritten_from_replicas += 1;
            }
        }
    }
    Ok(())
}

/// Whether the object replica `seq` of open stripe `stripe` holds is its key's: the key's record
/// points at it, or the key has no record (or an older one) and the write started past `horizon_ms`.
async fn replica_is_wanted(
    target: &dyn MetaStore,
    label: &ObjectLabel,
    (stripe, seq): (u64, u16),
    horizon_ms: u64,
) -> Result<bool, DataError> {
    match target.get_object(&label.bucket, &label.key).await {
        Ok(existing) => Ok(match existing.layout {
            Layout::Packed { stripe: at, replica_unit: Some(replica), .. } if at.0 == stripe && replica == seq => true,
            _ => existing.last_modified_ms < label.started_ms && label.started_ms >= horizon_ms,
        }),
        Err(MetaError::NoSuchKey { .. } | MetaError::NoSuchBucket(_)) => Ok(label.started_ms >= horizon_ms),
        Err(error) => Err(meta_error(error)),
    }
}

/// An object's bytes from its replica unit (after the replica's header).
async fn read_replica(
    data: &ErasureData,
    node: NodeId,
    (stripe, seq): (u64, u16),
    len: u64,
) -> Result<Bytes, DataError> {
    let nodes = data.io().cluster().node_map().await?;
    let info = nodes.get(&node).ok_or_else(|| DataError::Internal(format!("node {node} is not registered")))?;
    let client = data.io().cluster().client(info).await.map_err(|e| DataError::Unavailable(e.to_string()))?;
    let (bytes, _) = client.read_range(stripe, seq, 0, len).await.map_err(|e| DataError::Unavailable(e.to_string()))?;
    Ok(bytes.slice((REPLICA_HEADER_BYTES as usize).min(bytes.len())..))
}

/// Sets the id counters past every stripe and upload id the nodes and the records hold, so no id
/// is handed out twice.
async fn set_counters(target: &dyn MetaStore, survey: &Survey) -> Result<(), DataError> {
    let max_stripe = survey.stripes.keys().copied().max().unwrap_or(0);
    let mut max_upload = 0u64;
    let mut after = None;
    // Bounded: each page moves `after` on.
    loop {
        let page = target.export_records(after.clone(), 10_000).await.map_err(meta_error)?;
        let Some((last, _)) = page.last() else { break };
        after = Some(last.clone());
        for (key, _) in &page {
            let id = key.strip_prefix(b"upload/").and_then(|rest| rest.rsplit(|&b| b == b'/').next());
            if let Some(id) = id.and_then(|hex| u64::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()) {
                max_upload = max_upload.max(id);
            }
        }
    }
    let counters = vec![
        (b"counter/stripe".to_vec(), meta::format::encode(&max_stripe)),
        (b"counter/upload".to_vec(), meta::format::encode(&max_upload)),
    ];
    target.import_records(counters).await.map_err(meta_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(stripe: u64, offset: u64, length: u64) -> StripeSegment {
        StripeSegment { stripe: StripeId(stripe), unit_bytes: 1, object_offset_bytes: offset, length_bytes: length }
    }

    #[test]
    fn an_object_is_whole_only_when_its_stripes_cover_it_without_a_gap() {
        assert_eq!(covered(&[segment(1, 0, 10), segment(2, 10, 5)], Some(15)), (true, 15));
        assert_eq!(covered(&[segment(1, 0, 10), segment(2, 10, 5)], None), (true, 15));
        assert_eq!(covered(&[segment(1, 0, 10), segment(2, 10, 5)], Some(20)), (false, 15), "a stripe lost");
        assert!(!covered(&[segment(1, 0, 10), segment(2, 12, 5)], None).0, "a gap");
        assert!(!covered(&[segment(2, 10, 5)], None).0, "no first stripe");
    }

    #[test]
    fn a_stripe_is_recorded_where_its_whole_units_are_and_the_rest_missing() {
        let mut found = FoundStripe { shape: Some(("rs-2-1".into(), 100, 0)), ..FoundStripe::default() };
        found.units.insert(0, vec![(NodeId(4), 100)]);
        found.units.insert(2, vec![(NodeId(6), 99), (NodeId(7), 100)]);
        let data = DataConfig::default();
        let record = stripe_record(StripeId(3), &found, &data, &[NodeId(4), NodeId(5), NodeId(6), NodeId(7)]).unwrap();
        assert_eq!(record.placement, [NodeId(4), NodeId(5), NodeId(7)], "unit 1 on a node holding none");
        assert_eq!(record.missing_units, [1], "only unit 1 is missing");
        assert!(stripe_record(StripeId(3), &found, &data, &[NodeId(4), NodeId(7)]).is_none(), "no node for unit 1");
    }
}
