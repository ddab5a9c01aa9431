//! The gateway's admin HTTP routes beside `/metrics` and `/admin/status`: the read policy
//! (`GET|PUT /admin/policy`), the records and batch and move records (`POST /admin/*/take`),
//! sealing open packed stripes now, the storage nodes' reconstruction ingress, batch reads' access
//! policy, the mover's switch, the buckets' settings and object locations. Each change or export
//! needs the cluster secret (`admin_secret`). Owns the routes; must not start anything.

use crate::admin_secret::{has_secret, refused};
use crate::data::read::controller::Controller;
use meta::MetaStore;
use serde::Deserialize;
use std::sync::Arc;

/// Header of `POST /admin/records/take` counting records dropped since the last take.
pub const DROPPED_HEADER: &str = "x-lowtail-records-dropped";

/// Header of `POST /admin/records/take` counting lazy-refresh probes since the last take.
pub const REFRESH_PROBES_HEADER: &str = "x-lowtail-refresh-probes";

/// A policy switch as `PUT /admin/policy` takes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyChange {
    policy: String,
    settings: Option<policy::PolicySettings>,
}

/// How long `POST /admin/packed/seal` waits for the seals it starts: under the admin client's own
/// time limit (`launcher::gateway_admin::ADMIN_TIMEOUT`, 60 s), so a caller hears why, not a timeout.
pub const SEAL_NOW_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(50);

/// `GET /admin/policy`; `PUT /admin/policy`, `POST /admin/records/take` and `POST
/// /admin/packed/seal` (seal this gateway's open packed stripes now, as a shutdown does), which
/// need the cluster secret in [`crate::admin_secret::SECRET_HEADER`] (the endpoint is plain HTTP: bind it to a private
/// address).
pub(crate) fn admin_routes(
    controller: Arc<Controller>,
    packer: Arc<crate::data::objects::packed::Packer>,
    secret: String,
) -> axum::Router {
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    let secret = Arc::new(secret);
    let (get_controller, put_controller, take_controller) =
        (Arc::clone(&controller), Arc::clone(&controller), controller);
    let (put_secret, take_secret, seal_secret) = (Arc::clone(&secret), Arc::clone(&secret), secret);
    axum::Router::new()
        .route(
            "/admin/policy",
            axum::routing::get(move || std::future::ready(axum::Json(get_controller.policy()))).put(
                move |headers: HeaderMap, body: bytes::Bytes| {
                    let response = if !has_secret(&headers, &put_secret) {
                        refused()
                    } else {
                        match serde_json::from_slice::<PolicyChange>(&body) {
                            Err(error) => {
                                (StatusCode::BAD_REQUEST, format!("bad policy change: {error}")).into_response()
                            }
                            Ok(change) => match change.policy.parse::<policy::PolicyKind>() {
                                Err(error) => (StatusCode::BAD_REQUEST, error.to_string()).into_response(),
                                Ok(kind) => {
                                    let settings = change.settings.unwrap_or(put_controller.policy().settings);
                                    match put_controller.set_policy(kind, settings) {
                                        Ok(state) => axum::Json(state).into_response(),
                                        Err(error) => (StatusCode::BAD_REQUEST, error.to_string()).into_response(),
                                    }
                                }
                            },
                        }
                    };
                    std::future::ready(response)
                },
            ),
        )
        .route(
            "/admin/records/take",
            axum::routing::post(move |headers: HeaderMap| {
                let response = if !has_secret(&headers, &take_secret) {
                    refused()
                } else {
                    let (records, dropped) = take_controller.take_records();
                    let refresh_probes = take_controller.take_refresh_probes();
                    (
                        [
                            (axum::http::HeaderName::from_static(DROPPED_HEADER), dropped.to_string()),
                            (axum::http::HeaderName::from_static(REFRESH_PROBES_HEADER), refresh_probes.to_string()),
                        ],
                        ndjson(&records),
                    )
                        .into_response()
                };
                std::future::ready(response)
            }),
        )
        .route(
            "/admin/packed/seal",
            axum::routing::post(move |headers: HeaderMap| async move {
                if !has_secret(&headers, &seal_secret) {
                    return refused();
                }
                match packer.flush(SEAL_NOW_TIMEOUT).await {
                    Ok(()) => axum::Json(serde_json::json!({ "sealed": true })).into_response(),
                    Err(error) => (StatusCode::SERVICE_UNAVAILABLE, error.to_string()).into_response(),
                }
            }),
        )
}

/// `GET /admin/reconstruct` (how units that must be rebuilt are rebuilt: `[data.reconstruct]`'s
/// settings as switched) and `PUT /admin/reconstruct` (new settings, JSON; needs the cluster secret;
/// bad ones, or a kind the gateway cannot run, are a 400 and change nothing).
pub(crate) fn reconstruct_routes(io: Arc<crate::data::io::stripe_io::StripeIo>, secret: String) -> axum::Router {
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    let get_io = Arc::clone(&io);
    axum::Router::new().route(
        "/admin/reconstruct",
        axum::routing::get(move || std::future::ready(axum::Json(get_io.reconstruct()))).put(
            move |headers: HeaderMap, body: bytes::Bytes| {
                let response = if !has_secret(&headers, &secret) {
                    refused()
                } else {
                    match serde_json::from_slice::<policy::reconstruct::ReconstructSettings>(&body) {
                        Err(error) => {
                            (StatusCode::BAD_REQUEST, format!("bad reconstruct settings: {error}")).into_response()
                        }
                        Ok(settings) => match io.set_reconstruct(settings) {
                            Ok(settings) => axum::Json(settings).into_response(),
                            Err(error) => (StatusCode::BAD_REQUEST, error.to_string()).into_response(),
                        },
                    }
                };
                std::future::ready(response)
            },
        ),
    )
}

/// `GET /admin/ingress` (the gateway's emulated downlink, `[data.ingress]`) and `PUT /admin/ingress`
/// (a new shape, JSON; needs the cluster secret; a bad one is a 400 and changes nothing).
pub(crate) fn ingress_routes(io: Arc<crate::data::io::stripe_io::StripeIo>, secret: String) -> axum::Router {
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    let get_io = Arc::clone(&io);
    axum::Router::new().route(
        "/admin/ingress",
        axum::routing::get(move || std::future::ready(axum::Json(get_io.ingress().shape()))).put(
            move |headers: HeaderMap, body: bytes::Bytes| {
                let response = if !has_secret(&headers, &secret) {
                    refused()
                } else {
                    match serde_json::from_slice::<node::link::LinkShape>(&body) {
                        Err(error) => (StatusCode::BAD_REQUEST, format!("bad ingress shape: {error}")).into_response(),
                        Ok(shape) => match io.set_ingress(shape) {
                            Ok(shape) => axum::Json(shape).into_response(),
                            Err(error) => (StatusCode::BAD_REQUEST, error.to_string()).into_response(),
                        },
                    }
                };
                std::future::ready(response)
            },
        ),
    )
}

/// `GET /admin/access` (the batch reads' access settings and the plan cache's numbers), `PUT
/// /admin/access` (new settings, JSON; needs the cluster secret; bad ones are a 400 and change
/// nothing) and `POST /admin/batches/take` (the batch records kept since the last take, one JSON
/// object per line; needs the secret).
pub(crate) fn access_routes(controller: Arc<Controller>, secret: String) -> axum::Router {
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    let (get_controller, put_controller, take_controller) =
        (Arc::clone(&controller), Arc::clone(&controller), controller);
    let (put_secret, take_secret) = (secret.clone(), secret);
    axum::Router::new()
        .route(
            "/admin/access",
            axum::routing::get(move || {
                let state = serde_json::json!({
                    "settings": get_controller.access_settings(),
                    "gauges": get_controller.access_gauges(),
                });
                std::future::ready(axum::Json(state))
            })
            .put(move |headers: HeaderMap, body: bytes::Bytes| {
                let response = if !has_secret(&headers, &put_secret) {
                    refused()
                } else {
                    match serde_json::from_slice::<policy::ecstore::access::AccessSettings>(&body) {
                        Err(error) => {
                            (StatusCode::BAD_REQUEST, format!("bad access settings: {error}")).into_response()
                        }
                        Ok(settings) => match put_controller.set_access(settings) {
                            Ok(settings) => axum::Json(settings).into_response(),
                            Err(error) => (StatusCode::BAD_REQUEST, error.to_string()).into_response(),
                        },
                    }
                };
                std::future::ready(response)
            }),
        )
        .route(
            "/admin/batches/take",
            axum::routing::post(move |headers: HeaderMap| {
                let response = if !has_secret(&headers, &take_secret) {
                    refused()
                } else {
                    ndjson(&take_controller.take_batch_records())
                };
                std::future::ready(response)
            }),
        )
}

/// Records as the take endpoints answer them: one JSON object per line.
fn ndjson<T: serde::Serialize>(records: &[T]) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut body = Vec::with_capacity(records.len() * 256);
    for record in records {
        // A record is plain data: serialising it cannot fail.
        serde_json::to_writer(&mut body, record).expect("record serialises");
        body.push(b'\n');
    }
    ([(axum::http::header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
}

/// A mover switch as `PUT /admin/mover` takes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MoverSwitch {
    enabled: bool,
}

/// `GET /admin/mover` (what EC-Store's mover has done, and its statistics), `PUT /admin/mover`
/// (`{"enabled": true|false}`; needs the cluster secret) and `POST /admin/moves/take` (the move
/// records kept since the last take, one JSON object per line; needs the secret). Without a mover
/// (a gateway over an S3 backend) the first two answer 404.
pub(crate) fn mover_routes(
    mover: Option<Arc<crate::data::services::mover::MoverService>>,
    controller: Arc<Controller>,
    secret: String,
) -> axum::Router {
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    let missing = || (StatusCode::NOT_FOUND, "this gateway runs no mover (it has no storage nodes)").into_response();
    let (get_mover, put_mover) = (mover.clone(), mover);
    let get_controller = Arc::clone(&controller);
    let (put_secret, take_secret) = (secret.clone(), secret);
    axum::Router::new()
        .route(
            "/admin/mover",
            axum::routing::get(move || {
                let response = match &get_mover {
                    Some(mover) => axum::Json(serde_json::json!({
                        "status": mover.status(),
                        "statistics": get_controller.mover_gauges(),
                    }))
                    .into_response(),
                    None => missing(),
                };
                std::future::ready(response)
            })
            .put(move |headers: HeaderMap, body: bytes::Bytes| {
                let response = if !has_secret(&headers, &put_secret) {
                    refused()
                } else {
                    match (&put_mover, serde_json::from_slice::<MoverSwitch>(&body)) {
                        (None, _) => missing(),
                        (_, Err(error)) => {
                            (StatusCode::BAD_REQUEST, format!("bad mover switch: {error}")).into_response()
                        }
                        (Some(mover), Ok(switch)) => axum::Json(mover.set_enabled(switch.enabled)).into_response(),
                    }
                };
                std::future::ready(response)
            }),
        )
        .route(
            "/admin/moves/take",
            axum::routing::post(move |headers: HeaderMap| {
                let response = if !has_secret(&headers, &take_secret) {
                    refused()
                } else {
                    ndjson(&controller.take_move_records())
                };
                std::future::ready(response)
            }),
        )
}

/// `GET /admin/buckets` (every bucket with its settings) and `PUT
/// /admin/buckets/{name}/write-ack` (body `all`, `k+1` or `k`; needs the cluster secret): the
/// bucket settings S3 has no call for. A bad rule or a missing bucket is a 400 or 404 and changes
/// nothing.
pub(crate) fn bucket_routes(meta: Arc<dyn MetaStore>, secret: String) -> axum::Router {
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    let list_meta = Arc::clone(&meta);
    axum::Router::new()
        .route(
            "/admin/buckets",
            axum::routing::get(move || async move {
                match list_meta.list_buckets().await {
                    Ok(buckets) => axum::Json(buckets).into_response(),
                    Err(error) => (StatusCode::SERVICE_UNAVAILABLE, error.to_string()).into_response(),
                }
            }),
        )
        .route(
            "/admin/buckets/{name}/write-ack",
            axum::routing::put(
                move |axum::extract::Path(name): axum::extract::Path<String>, headers: HeaderMap, body: String| async move {
                    if !has_secret(&headers, &secret) {
                        return refused();
                    }
                    let rule = match body.parse::<meta::WriteAck>() {
                        Ok(rule) => rule,
                        Err(error) => return (StatusCode::BAD_REQUEST, error).into_response(),
                    };
                    match meta.set_bucket_write_ack(&name, rule).await {
                        Ok(bucket) => axum::Json(bucket).into_response(),
                        Err(error @ meta::MetaError::NoSuchBucket(_)) => {
                            (StatusCode::NOT_FOUND, error.to_string()).into_response()
                        }
                        Err(error) => (StatusCode::SERVICE_UNAVAILABLE, error.to_string()).into_response(),
                    }
                },
            ),
        )
}

/// `GET /admin/locate/{bucket}/{key}` (needs the cluster secret): the nodes of an object's data
/// units ([`crate::locate_admin`]).
pub(crate) fn locate_routes(meta: Arc<dyn MetaStore>, secret: String) -> axum::Router {
    use axum::extract::Path;
    axum::Router::new().route(
        "/admin/locate/{bucket}/{*key}",
        axum::routing::get(
            move |Path((bucket, key)): Path<(String, String)>, headers: axum::http::HeaderMap| async move {
                if !has_secret(&headers, &secret) {
                    return refused();
                }
                crate::locate_admin::answer(meta.as_ref(), &bucket, &key).await
            },
        ),
    )
}
