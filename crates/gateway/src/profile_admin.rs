//! The admin routes of profiles (docs/profiles.md): `GET /admin/profiles` (the cluster's default
//! profile, every stored profile, which bucket names which), `PUT /admin/profiles/{name}` (body: a
//! profile as JSON), `DELETE /admin/profiles/{name}`, `PUT /admin/buckets/{name}/profile` and
//! `PUT /admin/buckets/{name}/classes/{class}/profile` (body: a profile name, or `none`); the
//! changes need the cluster secret. Owns the routes, their input
//! checks and their answers; must not keep state of its own (profiles live in the metadata store,
//! so every gateway serves a bucket alike). A profile that cannot run is refused with the reason
//! (400) and nothing changes.

use std::sync::Arc;

use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use meta::{MetaError, MetaStore, StoredProfile};
use policy::Profile;
use serde::{Deserialize, Serialize};

use crate::admin_secret::{has_secret, refused};
use crate::profiles::{ProfileDirectory, parse};

/// One stored profile as `GET /admin/profiles` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileEntry {
    /// Its name.
    pub name: String,
    /// Its layers, every one spelled out (the ones it left out at their defaults); `None` when
    /// this gateway cannot parse it.
    pub profile: Option<Profile>,
    /// Why this gateway cannot run it, if it cannot (its buckets' reads fail with this reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// The buckets that name it for all their requests.
    pub buckets: Vec<String>,
    /// The buckets that name it for one latency class's requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassUse>,
}

/// A bucket naming a profile for one latency class's requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassUse {
    /// The bucket.
    pub bucket: String,
    /// The class, 1-based.
    pub class: u8,
}

/// `GET /admin/profiles`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfilesView {
    /// The cluster's default profile: `[controller] policy` and `[data.reconstruct] kind`.
    pub default: Profile,
    /// Every stored profile, by name.
    pub profiles: Vec<ProfileEntry>,
}

/// What the routes work on.
#[derive(Clone)]
pub struct ProfileAdmin {
    /// Where profiles and buckets live.
    pub meta: Arc<dyn MetaStore>,
    /// The gateway's directory (refreshed after each change, so this gateway serves it at once).
    pub directory: Arc<ProfileDirectory>,
    /// The cluster secret the changes need.
    pub secret: String,
}

/// The status of a metadata error: the caller's fault or the store's.
fn meta_status(error: &MetaError) -> StatusCode {
    match error {
        MetaError::NoSuchBucket(_) => StatusCode::NOT_FOUND,
        MetaError::InvalidArgument(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// The answer of a metadata error.
fn meta_answer(error: &MetaError) -> Response {
    (meta_status(error), error.to_string()).into_response()
}

impl ProfileAdmin {
    /// The five routes.
    pub fn routes(self) -> axum::Router {
        let (view, put, delete, bucket) = (self.clone(), self.clone(), self.clone(), self.clone());
        let class = self;
        axum::Router::new()
            .route("/admin/profiles", axum::routing::get(move || async move { view.view().await }))
            .route(
                "/admin/profiles/{name}",
                axum::routing::put(move |Path(name): Path<String>, headers: HeaderMap, body: String| async move {
                    put.set_profile(&name, &headers, &body).await
                })
                .delete(move |Path(name): Path<String>, headers: HeaderMap| async move {
                    delete.delete_profile(&name, &headers).await
                }),
            )
            .route(
                "/admin/buckets/{name}/profile",
                axum::routing::put(move |Path(name): Path<String>, headers: HeaderMap, body: String| async move {
                    bucket.set_bucket(&name, None, &headers, &body).await
                }),
            )
            .route(
                "/admin/buckets/{name}/classes/{class}/profile",
                axum::routing::put(
                    move |Path((name, number)): Path<(String, String)>, headers: HeaderMap, body: String| async move {
                        match number.parse::<u8>() {
                            Ok(number) => class.set_bucket(&name, Some(number), &headers, &body).await,
                            Err(_) => (StatusCode::BAD_REQUEST, format!("class {number:?} is not a number 1 to 255"))
                                .into_response(),
                        }
                    },
                ),
            )
    }

    async fn view(&self) -> Response {
        let listed = tokio::try_join!(self.meta.list_profiles(), self.meta.list_buckets());
        let (stored, buckets) = match listed {
            Ok(listed) => listed,
            Err(error) => return (StatusCode::SERVICE_UNAVAILABLE, error.to_string()).into_response(),
        };
        let profiles = stored
            .iter()
            .map(|entry| {
                let parsed = parse(entry);
                let refusal = match &parsed {
                    Ok(profile) => self.directory.check(profile).err().map(|why| why.0),
                    Err(why) => Some(why.clone()),
                };
                let named = buckets.iter().filter(|b| b.profile.as_deref() == Some(entry.name.as_str()));
                ProfileEntry {
                    name: entry.name.clone(),
                    profile: parsed.ok(),
                    refusal,
                    buckets: named.map(|bucket| bucket.name.clone()).collect(),
                    classes: class_uses(&buckets, &entry.name),
                }
            })
            .collect();
        axum::Json(ProfilesView { default: self.directory.default_profile().clone(), profiles }).into_response()
    }

    async fn set_profile(&self, name: &str, headers: &HeaderMap, body: &str) -> Response {
        if !has_secret(headers, &self.secret) {
            return refused();
        }
        let profile: Profile = match serde_json::from_str(body) {
            Ok(profile) => profile,
            Err(error) => return (StatusCode::BAD_REQUEST, format!("profile {name:?}: {error}")).into_response(),
        };
        if let Err(why) = self.check_uses(name, &profile).await {
            return why;
        }
        let layers = serde_json::to_string(&profile).expect("a profile serializes");
        if let Err(error) = self.meta.put_profile(StoredProfile { name: name.to_string(), layers }).await {
            return (meta_status(&error), error.to_string()).into_response();
        }
        self.refreshed(axum::Json(profile).into_response()).await
    }

    async fn delete_profile(&self, name: &str, headers: &HeaderMap) -> Response {
        if !has_secret(headers, &self.secret) {
            return refused();
        }
        match self.meta.delete_profile(name).await {
            Ok(()) => self.refreshed(format!("profile {name:?} deleted").into_response()).await,
            Err(error) => meta_answer(&error),
        }
    }

    async fn set_bucket(&self, bucket: &str, class: Option<u8>, headers: &HeaderMap, body: &str) -> Response {
        if !has_secret(headers, &self.secret) {
            return refused();
        }
        let profile = match body.trim() {
            "none" => None,
            name => Some(name),
        };
        if let (Some(class), Some(name)) = (class, profile)
            && let Err(why) = self.check_class_use(name, class).await
        {
            return why;
        }
        match self.meta.set_bucket_profile(bucket, class, profile).await {
            Ok(stored) => self.refreshed(axum::Json(stored).into_response()).await,
            Err(error) => meta_answer(&error),
        }
    }

    /// Checks `profile`, about to be stored as `name`, for buckets and for each class that names
    /// it already; the refusal's answer if it cannot serve one of them.
    async fn check_uses(&self, name: &str, profile: &Profile) -> Result<(), Response> {
        let refusal = |why: &dyn std::fmt::Display| {
            (StatusCode::BAD_REQUEST, format!("profile {name:?} refused: {why}")).into_response()
        };
        self.directory.check(profile).map_err(|why| refusal(&why))?;
        let buckets = self.meta.list_buckets().await.map_err(|error| meta_answer(&error))?;
        for used in class_uses(&buckets, name) {
            let checked = self.directory.check_for_class(profile, used.class);
            let class = used.class;
            checked.map_err(|why| refusal(&format!("bucket {:?} names it for class {class}: {why}", used.bucket)))?;
        }
        Ok(())
    }

    /// Checks stored profile `name` as the one serving class `class`'s requests; the refusal's
    /// answer if it cannot (a profile not stored is the metadata store's refusal).
    async fn check_class_use(&self, name: &str, class: u8) -> Result<(), Response> {
        let stored = self.meta.list_profiles().await.map_err(|error| meta_answer(&error))?;
        let Some(entry) = stored.iter().find(|entry| entry.name == name) else { return Ok(()) };
        let profile = parse(entry).map_err(|why| (StatusCode::BAD_REQUEST, why).into_response())?;
        self.directory.check_for_class(&profile, class).map_err(|why| {
            (StatusCode::BAD_REQUEST, format!("profile {name:?} refused for class {class}: {why}")).into_response()
        })
    }

    /// `answer`, once this gateway's directory has the change (other gateways read it within
    /// [`crate::profiles::REFRESH_PERIOD`]).
    async fn refreshed(&self, answer: Response) -> Response {
        if let Err(error) = self.directory.refresh().await {
            tracing::warn!(%error, "a profile change is stored but this gateway could not reread it yet");
        }
        answer
    }
}

/// The buckets of `buckets` that name profile `name` for one class's requests.
fn class_uses(buckets: &[meta::BucketMeta], name: &str) -> Vec<ClassUse> {
    let uses = buckets.iter().flat_map(|bucket| {
        let named = bucket.class_profiles.iter().filter(|(_, named)| named.as_str() == name);
        named.map(|(&class, _)| ClassUse { bucket: bucket.name.clone(), class })
    });
    uses.collect()
}
