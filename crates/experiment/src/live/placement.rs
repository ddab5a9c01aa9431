//! The live cluster's placement, read back from its metadata store, as the simulator's identical
//! configuration: the same nodes, code and stripe placement, each loaded object at its (stripe, data
//! unit, offset, length), and the same request sequence over them. Also the other direction: a
//! gateway's records renamed into the simulator's ids, so both executors' records compare.
//!
//! Owns: the mapping store stripe ↔ simulator stripe (in ascending store id), store node id =
//! simulator node id, and (stripe, data unit) → partition `stripe * k + unit`. Must not: write to
//! the store, or accept an object the simulator cannot model (a striped object, or a packed one
//! whose stripe is still open: its reads do not go through the controller yet).

use anyhow::{Context, bail, ensure};
use codec::CodeSpec;
use meta::{Layout, ListObjectsQuery, ListedObject, MetaStore, StripeId as StoreStripe, StripeState};
use model::{NodeId, ObjectId, PartitionId, Placement, ReadRequest, Record};
use std::collections::{BTreeMap, HashMap};
use workload::Workload;

/// Pages of a bucket listing read at most (each up to the store's page size): bounds the read-back
/// of a bucket far larger than any live experiment loads.
pub const MAX_LIST_PAGES: usize = 10_000;

/// Every object of `bucket`, in key order.
pub async fn list_bucket(meta: &dyn MetaStore, bucket: &str) -> anyhow::Result<Vec<ListedObject>> {
    let mut objects = Vec::new();
    let mut query = ListObjectsQuery::default();
    for _page in 0..MAX_LIST_PAGES {
        let listing = meta.list_objects(bucket, &query).await.with_context(|| format!("listing bucket {bucket}"))?;
        objects.extend(listing.objects);
        match listing.next_continuation_token {
            Some(token) if listing.is_truncated => query.continuation_token = Some(token),
            _ => return Ok(objects),
        }
    }
    bail!("bucket {bucket} has more than {MAX_LIST_PAGES} pages of objects")
}

/// Objects of `bucket` whose packed stripe is still open (their reads bypass the controller).
pub async fn open_objects(meta: &dyn MetaStore, bucket: &str) -> anyhow::Result<usize> {
    let mut sealed = HashMap::new();
    let mut open = 0;
    for object in list_bucket(meta, bucket).await? {
        if let Layout::Packed { stripe, .. } = object.meta.layout {
            let is_sealed = match sealed.get(&stripe.0) {
                Some(&is_sealed) => is_sealed,
                None => {
                    let meta = meta.get_stripe(stripe).await.with_context(|| format!("reading stripe {}", stripe.0))?;
                    let is_sealed = meta.state == StripeState::Sealed;
                    sealed.insert(stripe.0, is_sealed);
                    is_sealed
                }
            };
            open += usize::from(!is_sealed);
        }
    }
    Ok(open)
}

/// Where one loaded object lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectSpot {
    /// The store's stripe.
    pub stripe: u64,
    /// The data unit within it.
    pub unit: u16,
    /// Offset of the object's first byte in the unit.
    pub offset: u64,
    /// The object's length.
    pub length: u64,
}

/// A live cluster's placement of one bucket.
#[derive(Clone, Debug)]
pub struct LivePlacement {
    /// The code of every stripe.
    pub spec: CodeSpec,
    /// Nodes of the cluster (store ids `0..node_count`).
    pub node_count: u32,
    /// Store stripe ids in simulator order (simulator stripe `i` is `stripes[i]`).
    pub stripes: Vec<u64>,
    /// Store stripe id → simulator stripe.
    stripe_index: HashMap<u64, u32>,
    /// Simulator placement: which node holds each unit of each stripe.
    pub placement: Placement,
    /// Each object of the bucket by key.
    pub objects: BTreeMap<String, ObjectSpot>,
}

impl LivePlacement {
    /// Reads every object of `bucket` and the stripes that hold them. Fails, naming the object,
    /// when one is striped, open (not yet sealed) or of another code, or a stripe names a node
    /// outside `0..node_count`.
    pub async fn read(
        meta: &dyn MetaStore,
        bucket: &str,
        spec: CodeSpec,
        node_count: u32,
    ) -> anyhow::Result<LivePlacement> {
        let mut objects = BTreeMap::new();
        for object in list_bucket(meta, bucket).await? {
            let spot = match object.meta.layout {
                // The replica unit only serves while the stripe is open; the stripe says whether it is.
                Layout::Packed { stripe, unit, offset_bytes, length_bytes, .. } => {
                    ObjectSpot { stripe: stripe.0, unit, offset: offset_bytes, length: length_bytes }
                }
                _ => bail!(
                    "object {bucket}/{} ({} bytes) is not packed; the simulator models reads of one data unit \
                     (load objects no larger than the gateway's packed.max_object_bytes)",
                    object.key,
                    object.meta.size_bytes
                ),
            };
            objects.insert(object.key, spot);
        }
        Self::with_stripes(meta, spec, node_count, objects).await
    }

    async fn with_stripes(
        meta: &dyn MetaStore,
        spec: CodeSpec,
        node_count: u32,
        objects: BTreeMap<String, ObjectSpot>,
    ) -> anyhow::Result<LivePlacement> {
        let mut stripes: Vec<u64> = objects.values().map(|spot| spot.stripe).collect();
        stripes.sort_unstable();
        stripes.dedup();
        let mut nodes = Vec::with_capacity(stripes.len() * spec.total_units());
        for &id in &stripes {
            let stripe = meta.get_stripe(StoreStripe(id)).await.with_context(|| format!("reading stripe {id}"))?;
            if stripe.state != StripeState::Sealed {
                let key = objects.iter().find(|(_, spot)| spot.stripe == id).map_or("", |(key, _)| key.as_str());
                bail!("object {key} is in stripe {id} which is not sealed yet");
            }
            ensure!(
                stripe.code == spec.to_string(),
                "stripe {id} is coded {} but the experiment runs {spec}",
                stripe.code
            );
            nodes.extend(stripe.placement.iter().map(|node| NodeId(node.0)));
        }
        let stripe_index = stripes.iter().enumerate().map(|(index, &id)| (id, index as u32)).collect();
        let placement = Placement::new(spec, node_count, nodes).context("the live placement")?;
        Ok(LivePlacement { spec, node_count, stripes, stripe_index, placement, objects })
    }

    /// The simulator's cluster on this placement, every node at `rate_bytes_per_s`.
    pub fn sim_cluster(&self, rate_bytes_per_s: f64) -> anyhow::Result<sim::Cluster> {
        Ok(sim::Cluster {
            spec: self.spec,
            layout: model::CodeLayout::new(self.spec).context("the code's layout")?,
            placement: self.placement.clone(),
            rates_bytes_per_s: vec![rate_bytes_per_s; self.node_count as usize],
        })
    }

    /// Data partitions of the simulator's configuration (`stripes * k`).
    pub fn partitions(&self) -> u32 {
        self.placement.partition_count()
    }

    fn partition(&self, stripe: u64, unit: u16) -> Option<PartitionId> {
        let index = *self.stripe_index.get(&stripe)?;
        Some(PartitionId(index * self.spec.data_units() as u32 + u32::from(unit)))
    }

    /// The simulator's workload of `requests` (the load's sequence, whose object ids have S3 keys
    /// `key_of(object)`): the same arrivals and objects, each read at its live partition, offset and
    /// length (the request's length, at most the object's).
    pub fn workload(&self, requests: &[ReadRequest], key_of: impl Fn(ObjectId) -> String) -> anyhow::Result<Workload> {
        let mut mapped = Vec::with_capacity(requests.len());
        for request in requests {
            let key = key_of(request.object);
            let spot = self.objects.get(&key).with_context(|| format!("object {key} is not in the live placement"))?;
            let partition = self.partition(spot.stripe, spot.unit).expect("every object's stripe is indexed");
            ensure!(request.length <= spot.length, "request {} reads past the end of {key}", request.id.0);
            mapped.push(ReadRequest { partition, offset: spot.offset, ..*request });
        }
        let duration_ns = mapped.last().map_or(0, |r| r.arrival_ns);
        let workload = Workload { partitions: self.partitions(), requests: mapped, duration_ns };
        workload.validate().map_err(|reason| anyhow::anyhow!("the replayed workload is inconsistent: {reason}"))?;
        Ok(workload)
    }

    /// Renames a gateway's record into the simulator's ids: the gateway names the store stripe in
    /// `object` and its own dense partition and nodes; the partition becomes the simulator's
    /// (stripe, unit) and each task's node the store node holding its unit. `None` for a read of a
    /// stripe outside the placement.
    pub fn rename(&self, record: &Record) -> Option<Record> {
        let k = self.spec.data_units() as u32;
        let stripe = *self.stripe_index.get(&record.request.object.0)?;
        let unit = record.request.partition.0 % k;
        let mut renamed = record.clone();
        renamed.request.partition = PartitionId(stripe * k + unit);
        let nodes = self.placement.stripe_nodes(model::StripeId(stripe));
        for task in &mut renamed.tasks {
            task.node = *nodes.get(usize::from(task.unit))?;
        }
        Some(renamed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meta::{BucketMeta, ObjectMeta, RedbStore, StripeMeta};
    use model::{FrontendId, Outcome, RequestId, RequestRecord, TaskRecord, TaskRole};

    fn object(layout: Layout, size: u64) -> ObjectMeta {
        ObjectMeta {
            version: Default::default(),
            tags: Default::default(),
            size_bytes: size,
            etag: "e".into(),
            content_type: None,
            user_metadata: Default::default(),
            headers: Default::default(),
            last_modified_ms: 0,
            completed_upload_id: None,
            checksum: None,
            layout,
        }
    }

    fn packed(stripe: u64, unit: u16, offset: u64, length: u64) -> Layout {
        Layout::Packed {
            stripe: StoreStripe(stripe),
            unit,
            offset_bytes: offset,
            length_bytes: length,
            replica_unit: None,
        }
    }

    async fn store(spec: CodeSpec) -> (tempfile::TempDir, RedbStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(dir.path()).unwrap();
        store
            .create_bucket(BucketMeta {
                versioning: Default::default(),
                tags: Default::default(),
                name: "bkt".into(),
                created_ms: 0,
                region: None,
                owner: None,
                write_ack: meta::WriteAck::All,
                class: None,
                profile: None,
                class_profiles: Default::default(),
            })
            .await
            .unwrap();
        for (id, nodes, state) in [
            (40u64, [5u32, 1, 2, 3], StripeState::Sealed),
            (7, [0, 4, 5, 1], StripeState::Sealed),
            (9, [0, 1, 2, 3], StripeState::Open),
        ] {
            let placement = nodes.iter().map(|&n| meta::NodeId(n)).collect();
            let stripe =
                StripeMeta { state, ..StripeMeta::sealed(StoreStripe(id), spec.to_string(), 1 << 20, placement) };
            store.create_stripe(stripe).await.unwrap();
        }
        store.put_object("bkt", "x", object(packed(40, 1, 100, 50), 50)).await.unwrap();
        store.put_object("bkt", "y", object(packed(7, 0, 0, 10), 10)).await.unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn objects_map_to_partitions_and_records_to_store_nodes() {
        let spec = CodeSpec::Rs { k: 2, m: 2 };
        let (_dir, store) = store(spec).await;
        let live = LivePlacement::read(&store, "bkt", spec, 6).await.unwrap();
        // Stripes in ascending store id: 7 is simulator stripe 0, 40 is stripe 1.
        assert_eq!(live.stripes, vec![7, 40]);
        assert_eq!(live.partitions(), 4);
        assert_eq!(live.placement.stripe_nodes(model::StripeId(1)), &[NodeId(5), NodeId(1), NodeId(2), NodeId(3)]);
        let request = super::super::regime::tests::request;
        let key = |object: ObjectId| if object.0 == 1 { "x".to_owned() } else { "y".to_owned() };
        let workload = live.workload(&[request(0, 1, 50), request(1, 2, 10)], key).unwrap();
        assert_eq!((workload.requests[0].partition, workload.requests[0].offset), (PartitionId(3), 100));
        assert_eq!((workload.requests[1].partition, workload.requests[1].offset), (PartitionId(0), 0));
        assert!(live.workload(&[request(0, 1, 51)], key).is_err(), "past the end");

        // A gateway that saw stripe 40 as its dense stripe 9, unit 1, and its dense node 0 for unit 2.
        let record = Record {
            request: RequestRecord {
                request: RequestId(0),
                frontend: FrontendId(2),
                object: ObjectId(40),
                partition: PartitionId(9 * 2 + 1),
                bytes: 50,
                arrival_ns: 0,
                decision_start_ns: 0,
                decision_end_ns: 0,
                completion_ns: 10,
                probes: 0,
                probe_wait_ns: 0,
                decision_cpu_ns: 0,
                degraded: true,
                timed_out: false,
                outcome: Outcome::Ok,
                class: 0,
                latency_class: 0,
            },
            tasks: vec![TaskRecord {
                node: NodeId(0),
                unit: 2,
                role: TaskRole::Degraded,
                cancelled: false,
                cancel_ns: model::NEVER,
                failed: false,
                bytes: 50,
                enqueue_ns: 1,
                start_ns: 2,
                finish_ns: 3,
            }],
            layers: None,
        };
        let renamed = live.rename(&record).unwrap();
        assert_eq!(renamed.request.partition, PartitionId(3));
        assert_eq!(renamed.tasks[0].node, NodeId(2));
        let mut elsewhere = record.clone();
        elsewhere.request.object = ObjectId(99);
        assert!(live.rename(&elsewhere).is_none());
    }

    #[tokio::test]
    async fn open_striped_and_foreign_objects_are_refused_by_name() {
        let spec = CodeSpec::Rs { k: 2, m: 2 };
        let (_dir, store) = store(spec).await;
        assert_eq!(open_objects(&store, "bkt").await.unwrap(), 0);
        store.put_object("bkt", "open", object(packed(9, 0, 10, 5), 5)).await.unwrap();
        assert_eq!(open_objects(&store, "bkt").await.unwrap(), 1);
        let error = LivePlacement::read(&store, "bkt", spec, 6).await.unwrap_err().to_string();
        assert!(error.contains("object open is in stripe 9") && error.contains("not sealed"), "{error}");
        store.delete_object("bkt", "open").await.unwrap();
        store.put_object("bkt", "big", object(Layout::Striped { segments: vec![] }, 0)).await.unwrap();
        let error = LivePlacement::read(&store, "bkt", spec, 6).await.unwrap_err().to_string();
        assert!(error.contains("bkt/big") && error.contains("not packed"), "{error}");
        store.delete_object("bkt", "big").await.unwrap();
        let error = LivePlacement::read(&store, "bkt", CodeSpec::Rs { k: 3, m: 1 }, 6).await.unwrap_err().to_string();
        assert!(error.contains("coded rs-2-2"), "{error}");
    }
}
