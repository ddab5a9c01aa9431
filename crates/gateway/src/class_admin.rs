//! The admin routes of latency classes (docs/classes.md): `GET /admin/classes` (the classes, the
//! access keys' entitlements, per-class counters, the nodes told the scheduling, the shares a
//! read policy solved), `PUT
//! /admin/buckets/{name}/class` and `PUT /admin/access-keys/{key}/class` (body `N` or `none`;
//! they need the cluster secret). Owns the routes, their input checks and their answers; must not
//! resolve a request's class (`classes`) or keep state of its own: settings live in the metadata
//! store, so every gateway sees them. A bad body, an unknown class or a missing bucket changes
//! nothing.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use meta::{MetaError, MetaStore, NodeId};
use serde::{Deserialize, Serialize};

use crate::classes::{ClassTable, ClassesReport};
use crate::data::cluster::membership::Membership;

/// One access key's entitlement as `GET /admin/classes` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessKeyEntry {
    /// The access key.
    pub access_key: String,
    /// The best class (1-based) its requests may run in.
    pub class: u8,
    /// Where the entitlement comes from: `table` (the metadata store, every gateway) or `config`
    /// (this gateway's credential entry, overridden by a table entry).
    pub source: String,
}

/// `GET /admin/classes`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassesView {
    /// The classes and their counters.
    #[serde(flatten)]
    pub report: ClassesReport,
    /// Every entitlement, the table's first, then the config's, each sorted by key.
    pub access_keys: Vec<AccessKeyEntry>,
    /// Nodes told the class scheduling since they last missed a probe.
    pub nodes_scheduled: Vec<NodeId>,
    /// Class shares the read policy solved (`jlwo`), by rack name, in place of `[classes]`'s for
    /// that rack's nodes; empty when none are (docs/classes.md).
    #[serde(default)]
    pub solved_shares: std::collections::BTreeMap<String, Vec<f64>>,
}

/// What the routes work on.
#[derive(Clone)]
pub struct ClassAdmin {
    /// Where bucket classes and the access-key table live.
    pub meta: Arc<dyn MetaStore>,
    /// The classes this gateway runs.
    pub table: Arc<ClassTable>,
    /// Which nodes hold the scheduling.
    pub membership: Arc<Membership>,
    /// The cluster secret the changes need.
    pub secret: String,
}

impl ClassAdmin {
    /// The three routes.
    pub fn routes(self) -> axum::Router {
        let (view, bucket, key) = (self.clone(), self.clone(), self);
        axum::Router::new()
            .route("/admin/classes", axum::routing::get(move || async move { view.view().await }))
            .route(
                "/admin/buckets/{name}/class",
                axum::routing::put(
                    move |axum::extract::Path(name): axum::extract::Path<String>, headers: HeaderMap, body: String| {
                        async move { bucket.set_bucket(&name, &headers, &body).await }
                    },
                ),
            )
            .route(
                "/admin/access-keys/{key}/class",
                axum::routing::put(
                    move |axum::extract::Path(access_key): axum::extract::Path<String>,
                          headers: HeaderMap,
                          body: String| async move { key.set_key(&access_key, &headers, &body).await },
                ),
            )
    }

    async fn view(&self) -> Response {
        let table = match self.meta.list_access_key_classes().await {
            Ok(table) => table,
            Err(error) => return (StatusCode::SERVICE_UNAVAILABLE, error.to_string()).into_response(),
        };
        let entry = |access_key: String, class: u8, source: &str| AccessKeyEntry {
            access_key,
            class,
            source: source.to_string(),
        };
        let mut access_keys: Vec<AccessKeyEntry> =
            table.into_iter().map(|stored| entry(stored.access_key, stored.class, "table")).collect();
        let configured = self.table.configured_keys().into_iter().map(|(key, class)| entry(key, class, "config"));
        access_keys.extend(configured);
        let view = ClassesView {
            report: self.table.report(),
            access_keys,
            nodes_scheduled: self.membership.scheduled_nodes(),
            solved_shares: self.membership.rack_class_shares().into_iter().collect(),
        };
        axum::Json(view).into_response()
    }

    async fn set_bucket(&self, name: &str, headers: &HeaderMap, body: &str) -> Response {
        if !crate::admin_secret::has_secret(headers, &self.secret) {
            return crate::admin_secret::refused();
        }
        let class = match parse_class(body, self.table.config().count()) {
            Ok(class) => class,
            Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
        };
        match self.meta.set_bucket_class(name, class).await {
            Ok(bucket) => axum::Json(bucket).into_response(),
            Err(error) => meta_failure(error),
        }
    }

    async fn set_key(&self, access_key: &str, headers: &HeaderMap, body: &str) -> Response {
        if !crate::admin_secret::has_secret(headers, &self.secret) {
            return crate::admin_secret::refused();
        }
        let class = match parse_class(body, self.table.config().count()) {
            Ok(class) => class,
            Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
        };
        match self.meta.set_access_key_class(access_key, class).await {
            Ok(()) => axum::Json(serde_json::json!({ "access_key": access_key, "class": class })).into_response(),
            Err(error) => meta_failure(error),
        }
    }
}

/// A change's body: a class this gateway runs (1 to `count`), or `none` to clear the setting.
pub fn parse_class(body: &str, count: u8) -> Result<Option<u8>, String> {
    let text = body.trim();
    if text.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    match text.parse::<u8>() {
        Ok(class) if (1..=count).contains(&class) => Ok(Some(class)),
        Ok(class) => Err(format!("class {class} is not run here: classes are 1 to {count}")),
        Err(_) => Err(format!("expected a class number (1 to {count}) or none, not {text:?}")),
    }
}

/// The answer to a metadata error: 404 for a missing bucket, 400 for bad input, else 503.
fn meta_failure(error: MetaError) -> Response {
    let status = match &error {
        MetaError::NoSuchBucket(_) => StatusCode::NOT_FOUND,
        MetaError::InvalidArgument(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    (status, error.to_string()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_a_class_run_here_or_none() {
        assert_eq!(parse_class("2", 2), Ok(Some(2)));
        assert_eq!(parse_class(" 1\n", 2), Ok(Some(1)));
        assert_eq!(parse_class("none", 2), Ok(None));
        assert_eq!(parse_class("None", 2), Ok(None));
        assert!(parse_class("3", 2).unwrap_err().contains("classes are 1 to 2"));
        assert!(parse_class("0", 2).unwrap_err().contains("class 0 is not run"));
        for bad in ["", "gold", "-1", "1.5", "300"] {
            assert!(parse_class(bad, 2).unwrap_err().contains("expected a class number"), "{bad:?}");
        }
    }
}
