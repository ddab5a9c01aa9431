//! The profile directory over a real metadata store, and the task-local that carries a request's
//! profile.

use super::*;
use meta::BucketMeta;
use policy::profile::{Redundancy, Selection};
use policy::reconstruct::ReconstructKind;

fn target(slots: Option<u32>) -> GatewayTarget {
    GatewayTarget { layout: CodeLayout::new("rs-6-3".parse().unwrap()).unwrap(), slots, has_nodes: true, classes: 2 }
}

fn bucket(name: &str) -> BucketMeta {
    BucketMeta {
        versioning: Default::default(),
        tags: Default::default(),
        name: name.into(),
        created_ms: 1,
        region: None,
        owner: None,
        write_ack: meta::WriteAck::All,
        class: None,
        profile: None,
        class_profiles: Default::default(),
    }
}

fn stored(name: &str, profile: &Profile) -> StoredProfile {
    StoredProfile { name: name.into(), layers: serde_json::to_string(profile).unwrap() }
}

#[tokio::test]
async fn buckets_are_served_by_the_profile_they_name_and_one_that_cannot_run_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let meta: Arc<dyn MetaStore> = Arc::new(meta::RedbStore::open(dir.path()).unwrap());
    let fast = Profile {
        selection: Selection::LmlfPw2,
        redundancy: Redundancy::Bafec,
        reconstruction: ReconstructKind::Apls,
        class: Some(2),
        ..Profile::default()
    };
    meta.put_profile(stored("fast", &fast)).await.unwrap();
    for name in ["a-bucket", "b-bucket", "c-bucket"] {
        meta.create_bucket(bucket(name)).await.unwrap();
    }
    meta.set_bucket_profile("a-bucket", None, Some("fast")).await.unwrap();
    // A gateway with 8 slots could run it; one without a pool cannot (BAFEC needs L).
    let bounded = ProfileDirectory::new(Arc::clone(&meta), target(Some(8)), Profile::default());
    let unbounded = ProfileDirectory::new(Arc::clone(&meta), target(None), Profile::default());
    assert_eq!(bounded.for_bucket("a-bucket"), None, "nothing before the first refresh");
    bounded.refresh().await.unwrap();
    unbounded.refresh().await.unwrap();
    let active = bounded.for_bucket("a-bucket").expect("a-bucket names fast");
    assert_eq!((active.name.as_str(), &active.profile, &active.refusal), ("fast", &fast, &None));
    assert_eq!(bounded.for_bucket("b-bucket"), None, "b-bucket keeps the default");
    let refused = unbounded.for_bucket("a-bucket").unwrap();
    assert!(refused.refusal.as_deref().is_some_and(|why| why.contains("slots")), "{refused:?}");
    // A change reaches the directory at its next refresh.
    meta.set_bucket_profile("a-bucket", None, None).await.unwrap();
    bounded.refresh().await.unwrap();
    assert_eq!(bounded.for_bucket("a-bucket"), None);
}

#[tokio::test]
async fn a_class_names_its_own_profile_within_a_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let meta: Arc<dyn MetaStore> = Arc::new(meta::RedbStore::open(dir.path()).unwrap());
    let (fast, slow) = (Profile { selection: Selection::Lmlf, ..Profile::default() }, Profile::default());
    meta.put_profile(stored("fast", &fast)).await.unwrap();
    meta.put_profile(stored("slow", &slow)).await.unwrap();
    meta.create_bucket(bucket("mixed")).await.unwrap();
    meta.set_bucket_profile("mixed", Some(2), Some("slow")).await.unwrap();
    let directory = ProfileDirectory::new(Arc::clone(&meta), target(Some(8)), Profile::default());
    directory.refresh().await.unwrap();
    let name = |class| directory.for_request("mixed", class).map(|active| active.name.clone());
    assert_eq!((name(1), name(2)), (None, Some("slow".into())), "class 1 keeps the cluster's default");
    assert_eq!(directory.for_bucket("mixed"), None, "a class's profile is not the bucket's");
    meta.set_bucket_profile("mixed", None, Some("fast")).await.unwrap();
    directory.refresh().await.unwrap();
    assert_eq!((name(1), name(2)), (Some("fast".into()), Some("slow".into())));
    let refusal = directory.check_for_class(&Profile { class: Some(1), ..slow }, 2).unwrap_err();
    assert!(refusal.0.contains("class = 1 in a profile for class 2"), "{refusal}");
}

#[tokio::test]
async fn the_profile_is_seen_inside_its_scope_and_carried_into_spawned_tasks() {
    let active = Arc::new(ActiveProfile { name: "fast".into(), profile: Profile::default(), refusal: None });
    assert_eq!(scope::active(), None);
    let configured = ReconstructSettings::default();
    let (inside, bare, carried, settings) = scope::scope(Some(Arc::clone(&active)), async {
        let bare = tokio::spawn(async { scope::active() }).await.unwrap();
        let carried = tokio::spawn(crate::classes::carried(async { scope::active() })).await.unwrap();
        let apls = ActiveProfile {
            profile: Profile { reconstruction: ReconstructKind::Apls, ..Profile::default() },
            ..(*active).clone()
        };
        let settings = scope::scope(Some(Arc::new(apls)), async { reconstruct_settings(configured.clone()) }).await;
        (scope::active(), bare, carried, settings)
    })
    .await;
    assert_eq!(inside.as_deref(), Some(&*active));
    assert_eq!(bare, None, "task-locals do not cross a spawn");
    assert_eq!(carried.as_deref(), Some(&*active), "classes::carried carries the profile too");
    assert_eq!(settings, ReconstructSettings { kind: ReconstructKind::Apls, ..configured.clone() });
    assert_eq!(reconstruct_settings(configured.clone()), configured, "background work runs the gateway's");
}
