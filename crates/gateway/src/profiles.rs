//! Profiles as a gateway serves them (docs/profiles.md): the profile of the request a task works
//! for, carried as a tokio task-local from the S3 handler to the read controller and the
//! reconstruction below it, and the directory that says which profile serves which bucket, kept
//! from the metadata store (so every gateway serves a bucket alike) and refreshed every
//! [`REFRESH_PERIOD`]. Owns the task-local, the cache and the check of a profile against this
//! gateway; must not plan (the controller's planners do) or store anything but through the
//! metadata store.

pub mod scope;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use meta::{BucketMeta, MetaError, MetaStore, StoredProfile};
use model::CodeLayout;
use policy::Profile;
use policy::profile::{ProfileRefusal, ProfileTarget};
use policy::reconstruct::ReconstructSettings;

pub use scope::{ActiveProfile, active, carried, scope};

/// How often a gateway rereads the profiles and the buckets' choices: how long a change made
/// through another gateway takes to reach this one at most.
pub const REFRESH_PERIOD: Duration = Duration::from_secs(1);

/// What a profile is checked against on this gateway.
#[derive(Clone, Debug)]
pub struct GatewayTarget {
    /// The code of new stripes.
    pub layout: CodeLayout,
    /// The admission pool's slots, `None` when unbounded.
    pub slots: Option<u32>,
    /// Whether there are storage nodes (not an S3 backend).
    pub has_nodes: bool,
    /// How many latency classes the gateway runs.
    pub classes: u8,
}

impl GatewayTarget {
    /// The check's target for a bucket's profile (`cluster_default` false) or the cluster's.
    pub fn target(&self, cluster_default: bool) -> ProfileTarget<'_> {
        ProfileTarget {
            layout: &self.layout,
            slots: self.slots,
            has_nodes: self.has_nodes,
            classes: self.classes,
            cluster_default,
        }
    }
}

/// The reconstruction settings a read of the current request runs with: the gateway's
/// `[data.reconstruct]`, with the kind its bucket's profile names (the rest, packet size and the
/// estimates' constants, are the gateway's). Background work (repair) runs the gateway's.
pub fn reconstruct_settings(configured: ReconstructSettings) -> ReconstructSettings {
    match active() {
        Some(active) => ReconstructSettings { kind: active.profile.reconstruction, ..configured },
        None => configured,
    }
}

/// A stored profile parsed, or why it cannot serve.
pub fn parse(stored: &StoredProfile) -> Result<Profile, String> {
    serde_json::from_str(&stored.layers).map_err(|error| format!("profile {:?}: {error}", stored.name))
}

/// The profiles and the buckets' choices as last read.
#[derive(Debug, Default)]
struct Snapshot {
    profiles: HashMap<String, Arc<ActiveProfile>>,
    /// The buckets that name a profile (for all their requests or for a class's), by name.
    buckets: HashMap<String, BucketMeta>,
}

/// Which profile serves which bucket, from the metadata store.
pub struct ProfileDirectory {
    meta: Arc<dyn MetaStore>,
    target: GatewayTarget,
    /// The cluster's default profile: `[controller] policy` and `[data.reconstruct] kind`.
    default: Profile,
    snapshot: RwLock<Snapshot>,
}

impl std::fmt::Debug for ProfileDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfileDirectory").field("default", &self.default).finish_non_exhaustive()
    }
}

impl PartialEq for ProfileDirectory {
    /// Two directories are equal when they check and default alike, whatever they have read.
    fn eq(&self, other: &Self) -> bool {
        let target = |d: &Self| (d.target.layout.spec(), d.target.slots, d.target.has_nodes, d.target.classes);
        self.default == other.default && target(self) == target(other)
    }
}

impl Eq for ProfileDirectory {}

impl ProfileDirectory {
    /// A directory over `meta`, checking profiles against `target`; empty until refreshed.
    pub fn new(meta: Arc<dyn MetaStore>, target: GatewayTarget, default: Profile) -> ProfileDirectory {
        ProfileDirectory { meta, target, default, snapshot: RwLock::new(Snapshot::default()) }
    }

    /// The cluster's default profile.
    pub fn default_profile(&self) -> &Profile {
        &self.default
    }

    /// Checks `profile` for a bucket of this gateway.
    pub fn check(&self, profile: &Profile) -> Result<(), ProfileRefusal> {
        profile.check(&self.target.target(false))
    }

    /// Checks `profile` as the one serving class `class`'s requests to a bucket of this gateway.
    pub fn check_for_class(&self, profile: &Profile, class: u8) -> Result<(), ProfileRefusal> {
        profile.check_for_class(class, &self.target.target(false))
    }

    /// The profile serving `bucket` as a whole (the one its class comes from), or `None` for the
    /// cluster's default.
    pub fn for_bucket(&self, bucket: &str) -> Option<Arc<ActiveProfile>> {
        let snapshot = self.snapshot.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let name = snapshot.buckets.get(bucket)?.profile.as_ref()?;
        snapshot.profiles.get(name).cloned()
    }

    /// The profile serving a request of `class` (1-based) to `bucket`: the class's own, else the
    /// bucket's, `None` for the cluster's default.
    pub fn for_request(&self, bucket: &str, class: u8) -> Option<Arc<ActiveProfile>> {
        let snapshot = self.snapshot.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let name = snapshot.buckets.get(bucket)?.profile_for(class)?;
        snapshot.profiles.get(name).cloned()
    }

    /// Rereads the profiles and the buckets' choices. A stored profile this gateway cannot parse or
    /// run is left out (its buckets then fail their reads with the reason, never served by
    /// another profile silently) and logged.
    pub async fn refresh(&self) -> Result<(), MetaError> {
        let (stored, buckets) = tokio::try_join!(self.meta.list_profiles(), self.meta.list_buckets())?;
        let mut profiles = HashMap::with_capacity(stored.len());
        for entry in &stored {
            let checked = parse(entry).and_then(|profile| {
                self.check(&profile).map(|()| profile).map_err(|why| format!("profile {:?}: {why}", entry.name))
            });
            let active = match checked {
                Ok(profile) => ActiveProfile { name: entry.name.clone(), profile, refusal: None },
                Err(why) => {
                    tracing::warn!(%why, "a stored profile cannot run on this gateway");
                    ActiveProfile { name: entry.name.clone(), profile: Profile::default(), refusal: Some(why) }
                }
            };
            profiles.insert(entry.name.clone(), Arc::new(active));
        }
        let named = |bucket: &BucketMeta| bucket.profile.is_some() || !bucket.class_profiles.is_empty();
        let buckets = buckets.into_iter().filter(named).map(|bucket| (bucket.name.clone(), bucket)).collect();
        *self.snapshot.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Snapshot { profiles, buckets };
        Ok(())
    }

    /// Refreshes every [`REFRESH_PERIOD`] until `stop` changes.
    pub async fn run_refresh(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            if let Err(error) = self.refresh().await {
                tracing::warn!(%error, "could not reread the profiles; serving the last ones read");
            }
            tokio::select! {
                _ = stop.changed() => return,
                () = tokio::time::sleep(REFRESH_PERIOD) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests;
