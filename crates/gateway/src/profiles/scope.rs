//! The profile of the request a task works for, carried as a tokio task-local from the S3 handler
//! that resolved its bucket to the read controller and the reconstruction below it. Owns the
//! task-local; must not decide a profile. A task spawned on a request's behalf does not inherit
//! task-locals: wrap its future in [`carried`] (`classes::carried` does, for both).

use std::future::Future;
use std::sync::Arc;

use policy::Profile;

/// A named profile serving a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveProfile {
    /// Its name.
    pub name: String,
    /// Its layers.
    pub profile: Profile,
    /// Why this gateway cannot run it (a stored profile its settings refuse): the bucket's reads
    /// fail with this reason rather than run under another profile.
    pub refusal: Option<String>,
}

tokio::task_local! {
    /// The profile of the request the current task works for; `None` inside: the default.
    static CURRENT: Option<Arc<ActiveProfile>>;
}

/// Runs `future` under `profile` (`None`: the cluster's default).
pub async fn scope<F: Future>(profile: Option<Arc<ActiveProfile>>, future: F) -> F::Output {
    CURRENT.scope(profile, future).await
}

/// The profile of the request the current task works for; `None` for the cluster's default and
/// outside any request (background work).
pub fn active() -> Option<Arc<ActiveProfile>> {
    CURRENT.try_with(Clone::clone).ok().flatten()
}

/// `future` under the profile current now, for a task spawned on a request's behalf.
pub fn carried<F: Future>(future: F) -> impl Future<Output = F::Output> {
    let profile = CURRENT.try_with(Clone::clone).ok();
    async move {
        match profile {
            Some(profile) => scope(profile, future).await,
            None => future.await,
        }
    }
}
