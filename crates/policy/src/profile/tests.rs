//! Profile tests: presets plan as their policies always did, composed layers plan what each layer
//! decides, and combinations that cannot work are refused with their reason.

use super::*;
use crate::read::tests::{FakeView, LRC, RS, RecordingView, request};
use model::{CodeLayout, NodeId, Quorum, TaskRole};
use optimize::fec_model::Admission;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn frontend(layout: &CodeLayout) -> FrontendSetup<'_> {
    FrontendSetup { layout, slots: Some(16), admission: Admission::NonBlocking }
}

fn target(layout: &CodeLayout) -> ProfileTarget<'_> {
    ProfileTarget { layout, slots: Some(16), has_nodes: true, classes: 2, cluster_default: false }
}

fn composed(selection: Selection, redundancy: Redundancy) -> Profile {
    Profile { selection, redundancy, ..Profile::default() }
}

#[test]
fn every_preset_is_its_own_profile_and_plans_as_before() {
    let layout = CodeLayout::new(RS).unwrap();
    let kinds = PolicyKind::ALL.into_iter().chain(PolicyKind::FEC).chain([PolicyKind::Hedged, PolicyKind::Jlwo]);
    for kind in kinds {
        let profile = Profile::preset(kind);
        assert_eq!(profile.as_preset(), Some(kind));
        assert_eq!(profile.read_name(), kind.name());
        assert_eq!(profile.reads_rows(), kind.reads_rows(), "{kind}");
        let settings = PolicySettings::default();
        let mut planner = build_planner(&profile, &settings, &frontend(&layout)).unwrap();
        let mut preset = build_read_policy(kind, &settings, &frontend(&layout)).unwrap();
        assert_eq!(planner.name(), preset.name());
        let (mut a, mut b) = (FakeView::new(RS), FakeView::new(RS));
        a.queues[3] = 5_000_000;
        b.queues[3] = 5_000_000;
        for partition in 0..24 {
            let (mut ra, mut rb) = (ChaCha8Rng::seed_from_u64(partition), ChaCha8Rng::seed_from_u64(partition));
            let request = request(partition as u32, 4096);
            let (pa, pb) = (planner.plan(&mut a, 0, &request, &mut ra), preset.plan(&mut b, 0, &request, &mut rb));
            assert_eq!(pa.tasks, pb.tasks, "{kind}: partition {partition}");
            assert_eq!(pa.quorum, pb.quorum, "{kind}: partition {partition}");
        }
    }
}

/// LLF/LMLF (full or PW2) choosing a code length's n units: n is the code length's, the units the
/// cheapest probed ones, so a loaded data node is left out of the row read (and its unit decoded)
/// whenever the probes offered n cheaper units.
#[test]
fn selection_ranks_the_n_units_the_code_length_asks_for() {
    let layout = CodeLayout::new(RS).unwrap();
    let mut settings = PolicySettings::default();
    settings.fec.fixed_n = 7;
    for selection in [Selection::Llf, Selection::Lmlf, Selection::LlfPw2, Selection::LmlfPw2] {
        let profile = composed(selection, Redundancy::Fixed);
        profile.check(&target(&layout)).unwrap();
        let mut planner = build_planner(&profile, &settings, &frontend(&layout)).unwrap();
        let mut excluded = 0;
        for seed in 0..20 {
            let mut view = FakeView::new(RS);
            let hot = view.node_of_partition(0, 2);
            view.queues[hot.index()] = 50_000_000;
            let request = request(0, 1 << 20);
            let mut probed = Vec::new();
            planner.probe_targets(&view, 0, &request, &mut ChaCha8Rng::seed_from_u64(seed), &mut probed);
            let plan = planner.plan(&mut view, 0, &request, &mut ChaCha8Rng::seed_from_u64(seed));
            plan.validate().unwrap();
            assert_eq!(plan.quorum, Quorum::FirstKOfN { k: 6 }, "{selection:?}");
            assert_eq!(plan.tasks.len(), 7, "{selection:?}: n is the code length's");
            let asked_hot = plan.tasks.iter().any(|task| task.node == hot);
            assert_eq!(asked_hot, probed.len() <= 7, "{selection:?} seed {seed}: probed {probed:?}");
            excluded += usize::from(!asked_hot);
            for task in &plan.tasks {
                let role = if task.unit < 6 { TaskRole::Normal } else { TaskRole::Degraded };
                assert_eq!((task.node, task.role), (view.node_of_partition(0, task.unit), role));
            }
        }
        assert!(excluded > 0, "{selection:?} never read around the hot node");
    }
}

/// Fixed n = 7 of RS(6,3): an idle cluster is read data units first plus the first parity, as
/// FAST CLOUD's order, because ties go to the lower index.
#[test]
fn ties_keep_fast_clouds_order() {
    let layout = CodeLayout::new(RS).unwrap();
    let mut settings = PolicySettings::default();
    settings.fec.fixed_n = 7;
    let mut planner =
        build_planner(&composed(Selection::Lmlf, Redundancy::Fixed), &settings, &frontend(&layout)).unwrap();
    let plan = planner.plan(&mut FakeView::new(RS), 0, &request(4, 4096), &mut ChaCha8Rng::seed_from_u64(3));
    let units: Vec<u8> = plan.tasks.iter().map(|task| task.unit).collect();
    assert_eq!(units, vec![0, 1, 2, 3, 4, 5, 6]);
}

/// The gateway announces probes before planning: a composed planner probes exactly those.
#[test]
fn composed_planners_probe_exactly_the_announced_targets() {
    let layout = CodeLayout::new(RS).unwrap();
    for selection in [Selection::Llf, Selection::LmlfPw2] {
        let profile = composed(selection, Redundancy::Greedy);
        let mut planner = build_planner(&profile, &PolicySettings::default(), &frontend(&layout)).unwrap();
        let mut view = RecordingView { inner: FakeView::new(RS), probed: Vec::new() };
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for round in 0..100u32 {
            for queue in view.inner.queues.iter_mut() {
                *queue = rng.next_u64() % 10_000;
            }
            let request = request(round % 20, 1000);
            let mut targets: Vec<NodeId> = Vec::new();
            planner.probe_targets(&view, 0, &request, &mut rng.clone(), &mut targets);
            view.probed.clear();
            planner.plan(&mut view, 0, &request, &mut rng).validate().unwrap();
            assert_eq!(view.probed, targets, "{selection:?}: round {round}");
            let expected = if selection == Selection::Llf { 9 } else { 7 };
            assert!(targets.len() >= expected, "{selection:?} probed {}", targets.len());
        }
    }
}

#[test]
fn impossible_profiles_are_refused_with_the_reason() {
    let rs = CodeLayout::new(RS).unwrap();
    let lrc = CodeLayout::new(LRC).unwrap();
    let rs_one_parity = CodeLayout::new(codec::CodeSpec::Rs { k: 4, m: 1 }).unwrap();
    let refused = |profile: Profile, target: ProfileTarget<'_>, says: &str| {
        let why = profile.check(&target).expect_err(&format!("{profile} is refused")).0;
        assert!(why.contains(says), "{profile}: {why}");
    };
    refused(composed(Selection::Normal, Redundancy::Bafec), target(&lrc), "MDS");
    refused(composed(Selection::Normal, Redundancy::Bafec), ProfileTarget { slots: None, ..target(&rs) }, "slots");
    refused(composed(Selection::OptLazy, Redundancy::Greedy), target(&rs), "cannot rank");
    refused(composed(Selection::Hedged, Redundancy::Fixed), target(&rs), "cannot rank");
    refused(composed(Selection::Jlwo, Redundancy::K), target(&rs), "cluster's default");
    let backend = ProfileTarget { has_nodes: false, ..target(&rs) };
    refused(composed(Selection::Lmlf, Redundancy::K), backend, "probes storage nodes");
    let apls = Profile { reconstruction: ReconstructKind::Apls, ..Profile::default() };
    refused(apls.clone(), backend, "backend");
    refused(apls.clone(), target(&rs_one_parity), "only k left");
    refused(Profile { class: Some(3), ..Profile::default() }, target(&rs), "classes 1 to 2");
    let ecstore = Profile { access: Access::Ecstore, ..Profile::default() };
    refused(Profile { redundancy: Redundancy::Bafec, ..ecstore.clone() }, target(&rs), "late binding");
    refused(ecstore.clone(), backend, "probed queues");
    ecstore.check(&target(&rs)).unwrap();
    Profile { selection: Selection::LmlfPw2, ..ecstore }.check(&target(&lrc)).unwrap();
    // And what can run, does.
    apls.check(&target(&rs)).unwrap();
    apls.check(&target(&lrc)).unwrap();
    composed(Selection::Jlwo, Redundancy::K).check(&ProfileTarget { cluster_default: true, ..target(&rs) }).unwrap();
    composed(Selection::LmlfPw2, Redundancy::Bafec).check(&target(&rs)).unwrap();
}

#[test]
fn a_class_profile_keeps_to_its_class() {
    let rs = CodeLayout::new(RS).unwrap();
    let for_class = |profile: &Profile, class| profile.check_for_class(class, &target(&rs)).map_err(|why| why.0);
    let silver = Profile { class: Some(2), ..Profile::default() };
    assert!(for_class(&silver, 1).is_err_and(|why| why.contains("class = 2 in a profile for class 1")));
    assert!(for_class(&Profile::default(), 3).is_err_and(|why| why.contains("classes 1 to 2")));
    let apls = Profile { reconstruction: ReconstructKind::Apls, ..Profile::default() };
    let one_parity = CodeLayout::new(codec::CodeSpec::Rs { k: 4, m: 1 }).unwrap();
    assert!(apls.check_for_class(1, &target(&one_parity)).is_err(), "the profile's own checks run too");
    assert_eq!(for_class(&silver, 2), Ok(()));
    assert_eq!(for_class(&Profile::default(), 1), Ok(()));
}

#[test]
fn profiles_read_from_toml_with_defaults_and_refuse_unknown_fields() {
    let profile: Profile = toml_like(
        r#"{"selection": "lmlf-pw2", "redundancy": "bafec", "reconstruction": "apls", "class": 2, "write_ack": "k+1"}"#,
    );
    assert_eq!(profile.selection, Selection::LmlfPw2);
    assert_eq!(profile.write_ack, Some(AckAt::KPlusOne));
    assert_eq!(profile.read_name(), "lmlf-pw2+bafec");
    assert_eq!(toml_like::<Profile>("{}"), Profile::default());
    assert_eq!(toml_like::<Profile>(r#"{"access": "ecstore"}"#).access, Access::Ecstore);
    // A per-range profile is stored as before (the field left out).
    assert!(!serde_json::to_string(&profile).unwrap().contains("access"));
    assert!(serde_json::from_str::<Profile>(r#"{"selecton": "llf"}"#).is_err());
}

fn toml_like<T: serde::de::DeserializeOwned>(json: &str) -> T {
    serde_json::from_str(json).unwrap()
}
