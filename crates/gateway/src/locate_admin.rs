//! `GET /admin/locate/{bucket}/{key}` (needs the cluster secret): which storage nodes hold an
//! object's data units, in object order, as `ceph osd map` answers for Ceph. Operators use it to
//! see where an object lives; `lowtail bench s3`'s `hot` scenario uses it to make the hottest
//! objects share one node.
//!
//! Owns: the answer (the route and its secret are `process`'s). Must not: read or write object
//! bytes, or change anything.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meta::{MetaError, MetaStore, NodeId, StripeId};
use serde::Serialize;

/// Where an object's bytes are.
#[derive(Debug, Serialize)]
pub struct Located {
    /// The object's size.
    pub size_bytes: u64,
    /// Its data units in object order: (stripe, unit, node holding it).
    pub data_units: Vec<(StripeId, u16, NodeId)>,
    /// The distinct nodes of those units, in order of first appearance.
    pub nodes: Vec<NodeId>,
}

/// The answer to a locate of `key` in `bucket`: the JSON of [`Located`], 404 for an object or bucket
/// that does not exist, 503 when the metadata store cannot say.
pub async fn answer(meta: &dyn MetaStore, bucket: &str, key: &str) -> Response {
    match locate(meta, bucket, key).await {
        Ok(located) => axum::Json(located).into_response(),
        Err(error) => answer_error(error),
    }
}

async fn locate(meta: &dyn MetaStore, bucket: &str, key: &str) -> Result<Located, MetaError> {
    let object = meta.get_object(bucket, key).await?;
    let mut data_units = Vec::new();
    let mut stripe = None;
    for (id, unit) in object.layout.data_units() {
        if stripe.as_ref().is_none_or(|s: &meta::StripeMeta| s.id != id) {
            stripe = Some(meta.get_stripe(id).await?);
        }
        let placement = &stripe.as_ref().expect("read above").placement;
        let node = *placement.get(usize::from(unit)).ok_or_else(|| {
            MetaError::Damaged(format!("stripe {id} places {} units; the object names unit {unit}", placement.len()))
        })?;
        data_units.push((id, unit, node));
    }
    let mut nodes: Vec<NodeId> = Vec::new();
    for &(_, _, node) in &data_units {
        if !nodes.contains(&node) {
            nodes.push(node);
        }
    }
    Ok(Located { size_bytes: object.size_bytes, data_units, nodes })
}

fn answer_error(error: MetaError) -> Response {
    let status = match &error {
        MetaError::NoSuchBucket(_) | MetaError::NoSuchKey { .. } => StatusCode::NOT_FOUND,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    (status, error.to_string()).into_response()
}
