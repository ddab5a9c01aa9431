//! The labels the gateway's writes put on their units (carried by `data::descriptor`): what a
//! write was, in enough detail to rebuild its metadata record from the nodes alone. Shared by the
//! S3 layer (which labels its writes), the metadata snapshots (which label theirs) and the rebuild
//! (which reads them back). Plain serde data: must not do I/O.

use std::collections::BTreeMap;

use meta::{ChecksumAlgorithm, ContentHeaders};
use serde::{Deserialize, Serialize};

/// What a labelled write was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WriteLabel {
    /// An object's bytes (PutObject, CopyObject) or a multipart upload's part.
    Object(Box<ObjectLabel>),
    /// A copy of the metadata store ([`SnapshotLabel`]).
    Snapshot(SnapshotLabel),
}

/// An S3 write: which object (or part), and the metadata S3 keeps with it that its bytes do not
/// tell (what its bytes tell, the ETag and the checksum, a rebuild computes from them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectLabel {
    /// The bucket.
    pub bucket: String,
    /// The key.
    pub key: String,
    /// For a part: its upload and number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<PartOf>,
    /// The object's size as the request declared it, when it did: a rebuild takes the object only
    /// if its stripes cover that many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// Content-Type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// `x-amz-meta-*`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub user_metadata: BTreeMap<String, String>,
    /// The standard headers kept with the object.
    #[serde(default, skip_serializing_if = "ContentHeaders::is_empty")]
    pub headers: ContentHeaders,
    /// The algorithm of the object's S3 checksum (recomputed from the bytes by a rebuild).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<ChecksumAlgorithm>,
    /// When the write started (unix ms): of two writes of one key, the later wins.
    pub started_ms: u64,
    /// Tells apart writes of one key started in the same millisecond.
    pub write_id: u64,
}

/// The upload a part belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartOf {
    /// The upload's id.
    pub upload_id: String,
    /// The part's number.
    pub part_number: u16,
}

/// A metadata snapshot written to the nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotLabel {
    /// When it was begun (unix ms): what was written since is rolled forward by a rebuild.
    pub taken_ms: u64,
    /// When the oldest write still in flight when it began had started (`taken_ms` when none was),
    /// on a cluster whose one gateway took it: every write that started earlier had ended by then,
    /// so a rebuild need roll forward only writes from here on. `None` with several gateways
    /// (another's writes are not known): the rebuild goes back a write deadline instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes_since_ms: Option<u64>,
    /// Tells apart snapshots taken in the same millisecond.
    pub snapshot_id: u64,
}

impl WriteLabel {
    /// The label as the descriptors carry it.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("labels serialize")
    }

    /// A label from a descriptor; `None` for an unlabelled write or one this version cannot read.
    pub fn from_value(value: &serde_json::Value) -> Option<Self> {
        serde_json::from_value(value.clone()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip_through_descriptors() {
        let label = WriteLabel::Object(Box::new(ObjectLabel {
            bucket: "b".into(),
            key: "k/1".into(),
            part: Some(PartOf { upload_id: "00ff".into(), part_number: 3 }),
            size_bytes: Some(10),
            content_type: Some("text/plain".into()),
            user_metadata: BTreeMap::from([("a".into(), "1".into())]),
            headers: ContentHeaders::default(),
            checksum: Some(ChecksumAlgorithm::Crc64nvme),
            started_ms: 5,
            write_id: 9,
        }));
        assert_eq!(WriteLabel::from_value(&label.to_value()), Some(label));
        assert_eq!(WriteLabel::from_value(&serde_json::Value::Null), None);
    }
}
