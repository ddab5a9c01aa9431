//! The class of the request a task works for, carried as a tokio task-local from the S3 handler
//! that resolved it to every node call below it (`data::cluster::NodeConnections::client` labels
//! each client with it). Owns the task-local; must not decide a class. A task spawned on a
//! request's behalf does not inherit task-locals: wrap its future in [`carried`].

use std::future::Future;

use super::ClassId;

tokio::task_local! {
    /// The class of the request the current task works for.
    static CURRENT: ClassId;
}

/// Runs `future` as work of class `class`.
pub async fn scope<F: Future>(class: ClassId, future: F) -> F::Output {
    CURRENT.scope(class, future).await
}

/// The class of the request the current task works for; `None` outside any request (background
/// work: repair, the mover, scrubbing, collection).
pub fn current() -> Option<ClassId> {
    CURRENT.try_with(|class| *class).ok()
}

/// `future` in the class current now, for a task spawned on a request's behalf (a streamed body,
/// the rest of a write): spawned tasks start without the spawner's task-locals.
/// The request's profile is carried too (`profiles::carried`).
pub fn carried<F: Future>(future: F) -> impl Future<Output = F::Output> {
    let class = current();
    crate::profiles::carried(async move {
        match class {
            Some(class) => scope(class, future).await,
            None => future.await,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_class_is_seen_inside_its_scope_and_carried_into_spawned_tasks() {
        assert_eq!(current(), None);
        let (inside, spawned_bare, spawned_carried) = scope(ClassId(1), async {
            let bare = tokio::spawn(async { current() }).await.unwrap();
            let carried = tokio::spawn(carried(async { current() })).await.unwrap();
            (current(), bare, carried)
        })
        .await;
        assert_eq!(inside, Some(ClassId(1)));
        assert_eq!(spawned_bare, None, "task-locals do not cross a spawn");
        assert_eq!(spawned_carried, Some(ClassId(1)));
        assert_eq!(current(), None, "the scope ends with its future");
        assert_eq!(tokio::spawn(carried(async { current() })).await.unwrap(), None, "nothing to carry");
    }
}
