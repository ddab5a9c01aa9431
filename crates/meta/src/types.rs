//! The metadata data model: buckets, objects and their layouts, stripes, nodes, multipart uploads and the
//! listing request / response. Plain serde data with small helpers; it must not touch storage or clocks
//! (times are unix milliseconds passed in by the caller).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Identifies a stripe; allocated by `MetaStore::allocate_stripe_id`, unique within a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StripeId(pub u64);

impl fmt::Display for StripeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Identifies a storage node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub u32);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketMeta {
    /// S3 bucket name (validated by `create_bucket`).
    pub name: String,
    /// Creation time, unix milliseconds, as given by the caller.
    pub created_ms: u64,
    /// Region the bucket was created in, if the client named one.
    pub region: Option<String>,
    /// Owner (access key or account), if known.
    pub owner: Option<String>,
    /// When a write to the bucket is acknowledged (`all` unless an operator chose a faster rule
    /// with `lowtail admin bucket ack`).
    #[serde(default, skip_serializing_if = "WriteAck::is_all")]
    pub write_ack: WriteAck,
    /// The latency class of requests to the bucket, 1-based (1 is the best), set with `lowtail
    /// admin bucket class`; a request runs in this class or a worse one. `None`: the bucket does
    /// not lower its requests' class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<u8>,
    /// The profile (a [`StoredProfile`]'s name) whose layers serve the bucket's requests, set with
    /// `lowtail admin bucket profile`; `None`: the cluster's default profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The profiles serving one latency class's requests to the bucket, by class (1-based), set
    /// with `lowtail admin bucket profile --class`; a class not here is served by `profile`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub class_profiles: BTreeMap<u8, String>,
    /// The bucket's tags (PutBucketTagging), by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Whether the bucket keeps versions (PutBucketVersioning).
    #[serde(default, skip_serializing_if = "Versioning::is_unversioned")]
    pub versioning: Versioning,
}

impl ObjectMeta {
    /// A delete marker last modified at `at_ms`: a version without bytes (the store stamps it).
    pub fn delete_marker(at_ms: u64) -> ObjectMeta {
        ObjectMeta {
            size_bytes: 0,
            etag: String::new(),
            content_type: None,
            user_metadata: BTreeMap::new(),
            headers: ContentHeaders::default(),
            last_modified_ms: at_ms,
            completed_upload_id: None,
            checksum: None,
            tags: BTreeMap::new(),
            version: VersionStamp { delete_marker: true, ..VersionStamp::default() },
            layout: Layout::Striped { segments: Vec::new() },
        }
    }
}

/// What a committed write or delete did to its key's versions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Committed {
    /// The version written: a delete marker for a delete in a versioned bucket, the default stamp
    /// in an unversioned one.
    pub version: VersionStamp,
    /// The versions no longer stored (the one an unversioned write replaced or delete removed, the
    /// `null` version a suspended bucket's write or delete replaced): their layouts are garbage the
    /// caller releases. At most one.
    pub released: Vec<ObjectMeta>,
}

/// One key and every version of it, newest first (the current version first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyHistory {
    /// The key.
    pub key: String,
    /// Its versions, delete markers included.
    pub versions: Vec<ObjectMeta>,
}

/// One page of [`crate::MetaStore::list_histories`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HistoryPage {
    /// Whole keys, in key order.
    pub histories: Vec<KeyHistory>,
    /// Pass as `after` for the next page; `None` when this page is the last.
    pub next_after: Option<String>,
}

/// A bucket's versioning state, as S3 has it: once enabled, a bucket is never unversioned again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Versioning {
    /// Never enabled: a write replaces the key's object, a delete removes it.
    #[default]
    Unversioned,
    /// Every write is a new version and a delete adds a delete marker; older versions stay.
    Enabled,
    /// Writes and deletes replace the key's `null` version; versions made while enabled stay.
    Suspended,
}

impl Versioning {
    /// Whether the bucket was never versioned.
    pub fn is_unversioned(&self) -> bool {
        *self == Versioning::Unversioned
    }
}

/// Which version of its key an object record is. The default is the `null` version an
/// unversioned bucket writes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionStamp {
    /// The version id; `None` is the `null` version (written unversioned or while suspended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The version's place in its key's history: larger is newer (0 before versioning).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sequence: u64,
    /// A delete marker: a version without bytes that makes the key read as absent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete_marker: bool,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl VersionStamp {
    /// The id S3 answers: `null` for the null version.
    pub fn id_or_null(&self) -> &str {
        self.id.as_deref().unwrap_or("null")
    }

    /// Whether this is the version S3 calls `version_id` (`null` names the null version).
    pub fn is(&self, version_id: &str) -> bool {
        self.id_or_null() == version_id
    }

    /// Whether this is the default stamp (an unversioned write).
    pub fn is_unversioned(&self) -> bool {
        *self == VersionStamp::default()
    }
}

impl BucketMeta {
    /// The profile name serving requests of `class` to the bucket: the class's own, else the
    /// bucket's, `None` for the cluster's default.
    pub fn profile_for(&self, class: u8) -> Option<&str> {
        self.class_profiles.get(&class).or(self.profile.as_ref()).map(String::as_str)
    }

    /// Whether the bucket names profile `name`, for all its requests or for one class's.
    pub fn names_profile(&self, name: &str) -> bool {
        self.profile.as_deref() == Some(name) || self.class_profiles.values().any(|named| named == name)
    }
}

/// A named profile as the metadata store keeps it (`lowtail admin profile set`): one policy per
/// layer of the request path, as JSON the gateway parses and checks before storing it (the
/// metadata store does not know the layers; it keeps every gateway serving a bucket alike).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredProfile {
    /// The profile's name.
    pub name: String,
    /// Its layers, a JSON object.
    pub layers: String,
}

/// An access key's latency class entitlement as the metadata store keeps it (`lowtail admin class
/// key`): the best class, 1-based, its requests may run in. It overrides the class a gateway's
/// config gives the key, on every gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessKeyClass {
    /// The S3 access key id.
    pub access_key: String,
    /// The best class its requests may run in, 1-based.
    pub class: u8,
}

/// When a write is acknowledged: the write-acknowledgement layer of the request path (FAST
/// CLOUD's speculative write). Below `all`, the units not yet durable at the acknowledgement are
/// recorded missing and pending ([`StripeMeta::pending_until_ms`]) in the stripe's record before
/// the answer, finished in the background by the writing gateway, and by repair if it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum WriteAck {
    /// Once every unit is durable (or, when nodes fail, once what landed meets the cluster's
    /// durability rule, `ack_min_failures_tolerated`).
    #[default]
    #[serde(rename = "all")]
    All,
    /// Once the units that landed survive one more node failure: k + 1 of an MDS code's n.
    #[serde(rename = "k+1")]
    KPlusOne,
    /// Once the units that landed decode the data: k of an MDS code's n, surviving no further
    /// failure until the rest land.
    #[serde(rename = "k")]
    K,
}

impl WriteAck {
    /// Every rule, fastest last.
    pub const ALL: [WriteAck; 3] = [WriteAck::All, WriteAck::KPlusOne, WriteAck::K];

    /// The rule's name: `all`, `k+1` or `k`.
    pub fn name(self) -> &'static str {
        match self {
            WriteAck::All => "all",
            WriteAck::KPlusOne => "k+1",
            WriteAck::K => "k",
        }
    }

    /// Whether this is the default rule (every unit).
    pub fn is_all(&self) -> bool {
        *self == WriteAck::All
    }

    /// The further node failures the units landed must survive for an acknowledgement before the
    /// rest land; `None` for `all`, which waits for every unit.
    pub fn early_failures_tolerated(self) -> Option<usize> {
        match self {
            WriteAck::All => None,
            WriteAck::KPlusOne => Some(1),
            WriteAck::K => Some(0),
        }
    }
}

impl fmt::Display for WriteAck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for WriteAck {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        WriteAck::ALL
            .into_iter()
            .find(|rule| rule.name() == text.trim())
            .ok_or_else(|| format!("unknown write ack rule {text:?}: one of all, k+1, k"))
    }
}

/// Where an object's bytes live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Layout {
    /// A small object appended into one data unit of a stripe: bytes `offset_bytes .. offset_bytes +
    /// length_bytes` of unit `unit` of `stripe`.
    Packed {
        /// Stripe holding the object.
        stripe: StripeId,
        /// Data unit index within the stripe (`0..k`).
        unit: u16,
        /// Offset of the object's first byte within the unit.
        offset_bytes: u64,
        /// Object length.
        length_bytes: u64,
        /// While the stripe is open (not yet parity-encoded), the object's bytes also live as unit
        /// `replica_unit` of the stripe on the data unit's node and on every parity node (a 16-byte
        /// header, then the object); reads use those copies until the stripe is sealed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replica_unit: Option<u16>,
    },
    /// A large object cut into stripes of k data units each; `segments` in object order cover the object
    /// without gaps. A zero-byte object has no segments.
    Striped {
        /// One entry per stripe, ascending `object_offset_bytes`.
        segments: Vec<StripeSegment>,
    },
    /// An object made of independently laid out pieces (a completed multipart upload), in object order.
    Composite {
        /// The pieces, ascending `object_offset_bytes`, covering the object without gaps.
        pieces: Vec<CompositePiece>,
    },
}

/// The part of a striped object stored in one stripe. Within the stripe the object's bytes are laid out
/// unit after unit: byte `object_offset_bytes + i` is at offset `i % unit_bytes` of data unit
/// `i / unit_bytes`; the last unit is zero-padded to `unit_bytes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeSegment {
    /// The stripe.
    pub stripe: StripeId,
    /// Size of each unit of this stripe.
    pub unit_bytes: u64,
    /// Offset within the object of the first byte stored in this stripe.
    pub object_offset_bytes: u64,
    /// Object bytes stored in this stripe (at most k · `unit_bytes`).
    pub length_bytes: u64,
}

/// One piece of a `Layout::Composite`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompositePiece {
    /// Offset within the object of the piece's first byte.
    pub object_offset_bytes: u64,
    /// Piece length.
    pub length_bytes: u64,
    /// Where the piece's bytes live (`Packed` or `Striped`).
    pub layout: Layout,
    /// The S3 checksum of the part the piece was uploaded as, if it had one (GetObjectAttributes
    /// answers it). Absent for copied pieces and records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<StoredChecksum>,
}

impl Layout {
    /// Size of the object stored at this layout.
    pub fn size_bytes(&self) -> u64 {
        match self {
            Layout::Packed { length_bytes, .. } => *length_bytes,
            Layout::Striped { segments } => segments.last().map_or(0, |s| s.object_offset_bytes + s.length_bytes),
            Layout::Composite { pieces } => pieces.last().map_or(0, |p| p.object_offset_bytes + p.length_bytes),
        }
    }

    /// Every stripe the layout references, in order of first reference, without duplicates.
    pub fn stripes(&self) -> Vec<StripeId> {
        let mut found = Vec::new();
        self.collect_stripes(&mut found);
        found
    }

    fn collect_stripes(&self, found: &mut Vec<StripeId>) {
        let mut add = |id: StripeId| {
            if !found.contains(&id) {
                found.push(id);
            }
        };
        match self {
            Layout::Packed { stripe, .. } => add(*stripe),
            Layout::Striped { segments } => segments.iter().for_each(|segment| add(segment.stripe)),
            Layout::Composite { pieces } => {
                for piece in pieces {
                    piece.layout.collect_stripes(found);
                }
            }
        }
    }

    /// The data units holding the object's bytes, as (stripe, unit index), in object order: where
    /// a plain read of the whole object goes.
    pub fn data_units(&self) -> Vec<(StripeId, u16)> {
        match self {
            Layout::Packed { stripe, unit, .. } => vec![(*stripe, *unit)],
            Layout::Striped { segments } => segments
                .iter()
                .flat_map(|segment| {
                    let units = segment.length_bytes.div_ceil(segment.unit_bytes.max(1));
                    (0..units).map(move |unit| (segment.stripe, unit as u16))
                })
                .collect(),
            Layout::Composite { pieces } => pieces.iter().flat_map(|piece| piece.layout.data_units()).collect(),
        }
    }
}

/// An object's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectMeta {
    /// Object size.
    pub size_bytes: u64,
    /// ETag as S3 returns it (without quotes).
    pub etag: String,
    /// Content-Type, if the client sent one.
    pub content_type: Option<String>,
    /// `x-amz-meta-*` user metadata, names lower-cased by the gateway.
    pub user_metadata: BTreeMap<String, String>,
    /// Cache-Control, Content-Disposition, Content-Encoding, Content-Language and Expires as sent.
    #[serde(default, skip_serializing_if = "ContentHeaders::is_empty")]
    pub headers: ContentHeaders,
    /// Last modification time, unix milliseconds.
    pub last_modified_ms: u64,
    /// The multipart upload this object was completed from, so that a client retrying the same
    /// completion (after a timeout) is answered as S3 does, not with NoSuchUpload. Absent for
    /// objects written whole and for records written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_upload_id: Option<String>,
    /// The S3 additional checksum of the object (CRC64NVME when the client sent none). Absent for
    /// records written before checksums were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<StoredChecksum>,
    /// The object's tags (`x-amz-tagging`, PutObjectTagging), by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Which version of its key this is (set by the store when it commits the write).
    #[serde(default, skip_serializing_if = "VersionStamp::is_unversioned")]
    pub version: VersionStamp,
    /// Where the bytes live.
    pub layout: Layout,
}

/// One of the checksum algorithms S3 defines besides Content-MD5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ChecksumAlgorithm {
    /// CRC-32 (ISO-HDLC), 4 bytes.
    Crc32,
    /// CRC-32C (Castagnoli), 4 bytes.
    Crc32c,
    /// CRC-64/NVME, 8 bytes.
    Crc64nvme,
    /// SHA-1, 20 bytes.
    Sha1,
    /// SHA-256, 32 bytes.
    Sha256,
}

/// An object's or a part's S3 checksum, as S3 returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredChecksum {
    /// Algorithm.
    pub algorithm: ChecksumAlgorithm,
    /// The base64 digest; a composite one ends with `-N`, N being the number of parts.
    pub value: String,
    /// S3's COMPOSITE type: the checksum of a multipart object's part checksums, not of its bytes
    /// (FULL_OBJECT).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub composite: bool,
}

/// The checksum a multipart upload was created with (`x-amz-checksum-algorithm`, `-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadChecksum {
    /// Algorithm every part is checked and recorded with.
    pub algorithm: ChecksumAlgorithm,
    /// Whether the object's checksum is COMPOSITE (of the parts' checksums) or FULL_OBJECT.
    pub composite: bool,
}

/// Whether a stripe still accepts packed appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StripeState {
    /// Accepting appends; data is replicated, parity not yet written.
    Open,
    /// Full or timed out; parity written, replicas dropped.
    Sealed,
}

/// A stripe: its code and where each unit lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeMeta {
    /// The stripe's id.
    pub id: StripeId,
    /// Code in `codec::CodeSpec` display form, e.g. `rs-6-3`, `lrc-6-2-2`.
    pub code: String,
    /// Size of every unit of the stripe.
    pub unit_bytes: u64,
    /// Unit `i` lives on node `placement[i]`; one entry per unit of the code, all distinct.
    pub placement: Vec<NodeId>,
    /// Open or sealed.
    pub state: StripeState,
    /// CRC32C of each unit, when known (one per unit).
    pub unit_checksums: Option<Vec<u32>>,
    /// Bytes of the objects packed into the stripe, set when a packed stripe is sealed (what its
    /// live objects are compared with to find it mostly dead); `None` for a striped stripe, an open
    /// one, and a packed one sealed before this was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packed_bytes: Option<u64>,
    /// Units of a sealed stripe that are not durable on the node `placement` names: never written
    /// (a degraded write, a seal with a node down), or found lost or corrupt since. Ascending,
    /// distinct, each below n. A stripe with any is *under-redundant*: the store indexes it
    /// (`MetaStore::under_redundant_stripes`) in the same transaction, and repair rebuilds the units
    /// (onto the node named, once it is Up, or elsewhere). Reads never ask for them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_units: Vec<u16>,
    /// Since when (unix ms, the writer's clock) the stripe has had missing units; set exactly when
    /// `missing_units` is not empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_since_ms: Option<u64>,
    /// Until when (unix ms, the writer's clock) the missing units are *pending*: a write
    /// acknowledged before every unit was durable (a bucket's [`WriteAck`] below `all`) is still
    /// writing them. Repair leaves them to the writer until then and rebuilds whatever is still
    /// missing afterwards (the writer stopped, or its unit writes failed). Set only while units are
    /// missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_until_ms: Option<u64>,
    /// Who lands the pending units: the acknowledging gateway as `gateway_id@incarnation` (a
    /// value new at each start). A gateway finding an earlier incarnation of itself here knows
    /// nobody does (the landing died with that process) and repairs at once rather than at
    /// `pending_until_ms`. Set only with `pending_until_ms`; `None` in records from before it was
    /// kept (those wait for the deadline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_writer: Option<String>,
    /// Version for compare-and-swap: set to 1 on creation and incremented by every update; the value a
    /// caller passes in is ignored.
    pub version: u64,
}

impl StripeMeta {
    /// A new sealed stripe of `code` whose units are all durable on `placement`: no checksums
    /// known, no packed bytes, nothing missing or pending, version 0 (the store sets it).
    pub fn sealed(id: StripeId, code: impl Into<String>, unit_bytes: u64, placement: Vec<NodeId>) -> StripeMeta {
        StripeMeta {
            id,
            code: code.into(),
            unit_bytes,
            placement,
            state: StripeState::Sealed,
            unit_checksums: None,
            packed_bytes: None,
            missing_units: Vec::new(),
            degraded_since_ms: None,
            pending_until_ms: None,
            pending_writer: None,
            version: 0,
        }
    }

    /// A new open (packed) stripe of `code` on `placement`, as [`StripeMeta::sealed`] otherwise.
    pub fn open(id: StripeId, code: impl Into<String>, unit_bytes: u64, placement: Vec<NodeId>) -> StripeMeta {
        StripeMeta { state: StripeState::Open, ..StripeMeta::sealed(id, code, unit_bytes, placement) }
    }

    /// The parsed code spec.
    pub fn code_spec(&self) -> Result<codec::CodeSpec, codec::CodecError> {
        self.code.parse()
    }

    /// Whether unit `unit` is recorded missing (not durable on its node).
    pub fn is_missing(&self, unit: usize) -> bool {
        u16::try_from(unit).is_ok_and(|unit| self.missing_units.binary_search(&unit).is_ok())
    }

    /// Marks `units` missing (keeping the list ascending and distinct) and, if the stripe had none
    /// missing before, dates that from `now_ms`. Returns whether anything changed.
    pub fn mark_missing(&mut self, units: impl IntoIterator<Item = u16>, now_ms: u64) -> bool {
        let before = self.missing_units.len();
        self.missing_units.extend(units);
        self.missing_units.sort_unstable();
        self.missing_units.dedup();
        if self.missing_units.is_empty() {
            return false;
        }
        self.degraded_since_ms.get_or_insert(now_ms);
        self.missing_units.len() != before
    }

    /// Whether the missing units are still being written by the gateway that acknowledged the
    /// stripe early, at `now_ms`.
    pub fn is_pending(&self, now_ms: u64) -> bool {
        self.pending_until_ms.is_some_and(|until_ms| now_ms < until_ms)
    }

    /// [`is_pending`](Self::is_pending), as judged by the gateway incarnation `judge`
    /// (`gateway_id@incarnation`): not when the writer was an earlier incarnation of the same
    /// gateway, whose landing tasks ended with it.
    pub fn is_pending_for(&self, now_ms: u64, judge: &str) -> bool {
        self.is_pending(now_ms) && !self.is_orphaned_for(judge)
    }

    /// Whether the pending units' writer is an earlier incarnation of the gateway `judge` is one of.
    pub fn is_orphaned_for(&self, judge: &str) -> bool {
        let gateway = |tag: &str| tag.rsplit_once('@').map_or(tag, |(gateway, _)| gateway).to_string();
        self.pending_writer.as_deref().is_some_and(|writer| writer != judge && gateway(writer) == gateway(judge))
    }

    /// Marks `units` durable again; the stripe is healthy once none is missing.
    pub fn clear_missing(&mut self, units: impl IntoIterator<Item = u16>) {
        let restored: Vec<u16> = units.into_iter().collect();
        self.missing_units.retain(|unit| !restored.contains(unit));
        if self.missing_units.is_empty() {
            self.degraded_since_ms = None;
            self.pending_until_ms = None;
            self.pending_writer = None;
        }
    }
}

/// A node's membership state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeState {
    /// Serving.
    Up,
    /// Missed heartbeats or known failed; its units need degraded reads and, after a grace period, repair.
    Down,
    /// Being emptied: no new units, existing units moved away.
    Draining,
    /// Left the cluster for good.
    Removed,
}

/// Who runs a cluster-wide background job (one gateway's stripe collector, say) until when; see
/// [`crate::MetaStore::claim_lease`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The holder's name (a gateway id).
    pub holder: String,
    /// Unix time in ms, by the holder's last claim, at which the lease lapses.
    pub expires_ms: u64,
}

/// A registered storage node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The node's id.
    pub id: NodeId,
    /// `host:port` of its RPC endpoint.
    pub address: String,
    /// Rack name, for rack-aware placement.
    pub rack: String,
    /// Storage capacity.
    pub capacity_bytes: u64,
    /// Membership state.
    pub state: NodeState,
    /// Time of the last heartbeat, unix milliseconds.
    pub last_heartbeat_ms: u64,
    /// When the node was last marked Down (unix ms, the marking gateway's clock), while it is Down;
    /// `None` otherwise. Repair's grace period counts from it, so every gateway, and a gateway
    /// after a restart, sees the same age.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_since_ms: Option<u64>,
    /// The data directory the cluster last admitted on this node (after checking its units), as
    /// the node reported it; `None` until the first admission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<AdmittedDirectory>,
    /// Since when (unix ms) a gateway checks the node's units against the stripe records, after it
    /// answered with a directory other than the admitted one (a restart, an older copy, a new
    /// disk); `None` otherwise. Its stripes count as short until the check has recorded what it
    /// lacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checking_since_ms: Option<u64>,
}

/// A node's data directory as the cluster admitted it (the node's `identity.json`): a node that
/// answers with another directory, another process count or another generation is checked again
/// before it serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmittedDirectory {
    /// The directory's random id.
    pub directory_id: String,
    /// How many node processes had opened it, the admitted one included.
    pub starts: u64,
    /// The generation the cluster gave it at the admission (raised at each one).
    pub generation: u64,
    /// When it was admitted (unix ms, the admitting gateway's clock).
    pub admitted_ms: u64,
}

/// An in-progress multipart upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadMeta {
    /// Upload id allocated by the store (16 lower-case hex digits).
    pub upload_id: String,
    /// Bucket.
    pub bucket: String,
    /// Object key the upload will create.
    pub key: String,
    /// Creation time, unix milliseconds.
    pub initiated_ms: u64,
    /// Content-Type for the final object.
    pub content_type: Option<String>,
    /// User metadata for the final object.
    pub user_metadata: BTreeMap<String, String>,
    /// Standard headers for the final object.
    #[serde(default, skip_serializing_if = "ContentHeaders::is_empty")]
    pub headers: ContentHeaders,
    /// The checksum the upload was created with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<UploadChecksum>,
    /// Tags for the final object (`x-amz-tagging` on CreateMultipartUpload).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// The standard headers S3 keeps with an object and returns on GET and HEAD. Records written before
/// these existed read back with none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentHeaders {
    /// Cache-Control.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<String>,
    /// Content-Disposition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_disposition: Option<String>,
    /// Content-Encoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_encoding: Option<String>,
    /// Content-Language.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_language: Option<String>,
    /// Expires, unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ms: Option<u64>,
}

impl ContentHeaders {
    /// Whether no header is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// One uploaded part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartMeta {
    /// Part number, `1..=10000`.
    pub part_number: u16,
    /// Part size.
    pub size_bytes: u64,
    /// The part's ETag (without quotes).
    pub etag: String,
    /// Upload time, unix milliseconds.
    pub last_modified_ms: u64,
    /// The part's checksum (always FULL_OBJECT), if one was sent or the upload has an algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<StoredChecksum>,
    /// Where the part's bytes live.
    pub layout: Layout,
}

/// A part named in `complete_multipart`: the client's (part number, ETag) pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletedPart {
    /// Part number.
    pub part_number: u16,
    /// ETag the client saw for it (without quotes).
    pub etag: String,
}

/// What `complete_multipart` removed, for garbage collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultipartCompletion {
    /// The version the completion released (the object it replaced in an unversioned bucket, the
    /// `null` version in a suspended one), if any.
    pub previous: Option<ObjectMeta>,
    /// The version the completion wrote (the default stamp in an unversioned bucket).
    pub version: VersionStamp,
    /// Every part the upload held, in part-number order, including parts the completion did not name (the
    /// gateway collects their data).
    pub parts: Vec<PartMeta>,
}

/// Largest `max_keys` a listing honours (S3's limit); larger requests are clamped.
pub const MAX_LIST_KEYS: usize = 1000;

/// A ListObjectsV2 request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListObjectsQuery {
    /// Only keys starting with this.
    pub prefix: String,
    /// Roll keys up into common prefixes at the first occurrence of this after the prefix.
    pub delimiter: Option<String>,
    /// Only keys strictly after this (ignored when a continuation token is given).
    pub start_after: Option<String>,
    /// Token from a previous page's `next_continuation_token`.
    pub continuation_token: Option<String>,
    /// Maximum entries (keys plus common prefixes) in the page; clamped to `MAX_LIST_KEYS`.
    pub max_keys: usize,
}

impl Default for ListObjectsQuery {
    fn default() -> Self {
        ListObjectsQuery {
            prefix: String::new(),
            delimiter: None,
            start_after: None,
            continuation_token: None,
            max_keys: MAX_LIST_KEYS,
        }
    }
}

/// One object in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedObject {
    /// The key.
    pub key: String,
    /// Its metadata.
    pub meta: ObjectMeta,
}

/// One page of a ListObjectsV2 listing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectListing {
    /// Objects, in lexicographic byte order of their keys.
    pub objects: Vec<ListedObject>,
    /// Common prefixes (each ends with the delimiter), in lexicographic byte order.
    pub common_prefixes: Vec<String>,
    /// Whether more entries follow.
    pub is_truncated: bool,
    /// Pass as `continuation_token` to get the next page; set exactly when `is_truncated`.
    pub next_continuation_token: Option<String>,
}

impl ObjectListing {
    /// Keys plus common prefixes returned (S3's `KeyCount`).
    pub fn key_count(&self) -> usize {
        self.objects.len() + self.common_prefixes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_units_of_a_layout_are_the_ones_holding_its_bytes_in_object_order() {
        let packed =
            Layout::Packed { stripe: StripeId(4), unit: 2, offset_bytes: 64, length_bytes: 10, replica_unit: None };
        assert_eq!(packed.data_units(), vec![(StripeId(4), 2)]);
        let segment = |stripe, object_offset_bytes, length_bytes| StripeSegment {
            stripe: StripeId(stripe),
            unit_bytes: 100,
            object_offset_bytes,
            length_bytes,
        };
        // 250 bytes fill units 0, 1 and part of 2; the next stripe holds 100, one unit.
        let striped = Layout::Striped { segments: vec![segment(7, 0, 250), segment(8, 250, 100)] };
        assert_eq!(striped.data_units(), vec![(StripeId(7), 0), (StripeId(7), 1), (StripeId(7), 2), (StripeId(8), 0)]);
        let piece = |object_offset_bytes, length_bytes, layout| CompositePiece {
            object_offset_bytes,
            length_bytes,
            layout,
            checksum: None,
        };
        let composite = Layout::Composite { pieces: vec![piece(0, 10, packed), piece(10, 350, striped)] };
        assert_eq!(composite.data_units().len(), 5);
        assert!(Layout::Striped { segments: Vec::new() }.data_units().is_empty());
    }
}
