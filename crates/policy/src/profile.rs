//! Profiles: the five techniques as layers of one request path (DESIGN.md, "Composition"). A
//! [`Profile`] names one policy per layer a bucket may choose — selection, redundancy,
//! reconstruction, latency class and write acknowledgement — and [`build_planner`] composes the
//! read policy that plans its reads: the selection layer alone when every read asks for k units,
//! FAST CLOUD's code length choosing n with the selection layer choosing which n units
//! ([`ranked_row::RankedRow`]) when it does not. The layers a gateway or node runs for everyone
//! (admission, node scheduling, placement) are cluster settings, not profile fields.
//!
//! The old policy names (`lmlf-pw2`, `fec-bafec`, `jlwo`, …) are presets ([`Profile::preset`])
//! that fill the layers the way each paper ran them; a preset plans exactly as it always has.
//!
//! Must not: do I/O, read a clock, or accept a combination that cannot work: [`Profile::check`]
//! refuses it with the reason, before anything runs it.

pub mod ranked_row;

use crate::fec::AckAt;
use crate::read::{BuildError, Criterion, FrontendSetup, PolicyKind, PolicySettings, Probing};
use crate::reconstruct::ReconstructKind;
use crate::{ReadPolicy, build_read_policy};
use codec::CodeSpec;
use model::CodeLayout;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The selection layer: which units a read asks for, on which nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Selection {
    /// The data units; a recovery set only after a timeout (Hu et al.'s Normal).
    #[default]
    Normal,
    /// Least latency first over every recovery set (full probing).
    Llf,
    /// Least marginal load first over every recovery set (full probing).
    Lmlf,
    /// LLF between the normal read and one sampled recovery set.
    #[serde(rename = "llf-pw2")]
    LlfPw2,
    /// LMLF between the normal read and one sampled recovery set.
    #[serde(rename = "lmlf-pw2")]
    LmlfPw2,
    /// LMLF over a queue table refreshed every T.
    LmlfLazy,
    /// Problem (1) solved every T over queue and demand tables.
    OptLazy,
    /// Normal reads around the nodes seen slow, hedged after an adaptive delay.
    Hedged,
    /// Xiang et al.: k units drawn with JLWO's marginals π for the frontend's rack.
    Jlwo,
}

impl Selection {
    /// Every selection policy.
    pub const ALL: [Selection; 9] = [
        Selection::Normal,
        Selection::Llf,
        Selection::Lmlf,
        Selection::LlfPw2,
        Selection::LmlfPw2,
        Selection::LmlfLazy,
        Selection::OptLazy,
        Selection::Hedged,
        Selection::Jlwo,
    ];

    /// The preset that is this selection over k units.
    fn preset(self) -> PolicyKind {
        match self {
            Selection::Normal => PolicyKind::Normal,
            Selection::Llf => PolicyKind::Llf,
            Selection::Lmlf => PolicyKind::Lmlf,
            Selection::LlfPw2 => PolicyKind::LlfPw2,
            Selection::LmlfPw2 => PolicyKind::LmlfPw2,
            Selection::LmlfLazy => PolicyKind::LmlfLazy,
            Selection::OptLazy => PolicyKind::OptLazy,
            Selection::Hedged => PolicyKind::Hedged,
            Selection::Jlwo => PolicyKind::Jlwo,
        }
    }

    /// Canonical name.
    pub fn name(self) -> &'static str {
        self.preset().name()
    }

    /// The per-request cost that ranks a row's units under a code-length policy (LLF's and
    /// LMLF's, with their probing); `None` for `normal` (data units first, FAST CLOUD's order)
    /// and for the selections that cannot rank n units (see [`Profile::check`]).
    fn row_ranking(self, settings: &PolicySettings) -> Option<(Criterion, Probing)> {
        let marginal = Criterion::MarginalLoad(settings.marginal_load);
        match self {
            Selection::Llf => Some((Criterion::Latency, Probing::Full)),
            Selection::Lmlf => Some((marginal, Probing::Full)),
            Selection::LlfPw2 => Some((Criterion::Latency, Probing::PowerOfTwo)),
            Selection::LmlfPw2 => Some((marginal, Probing::PowerOfTwo)),
            _ => None,
        }
    }

    /// Whether the selection keeps tables solved for the whole cluster, which only the cluster's
    /// default profile may run (JLWO's solve also sets the nodes' class shares and placement).
    pub fn is_cluster_wide(self) -> bool {
        self == Selection::Jlwo
    }

    /// Whether it asks nodes for their queues, per request or in its refreshes.
    pub fn probes_nodes(self) -> bool {
        self.preset().probes_nodes()
    }
}

/// The redundancy layer: how many units a read asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Redundancy {
    /// The k units the selection chose (a normal read of one unit, or one recovery set).
    #[default]
    K,
    /// FAST CLOUD: every read asks for the same n units of its row, done at the first k.
    Fixed,
    /// FAST CLOUD: n from the idle task slots.
    Greedy,
    /// FAST CLOUD: n from the backlog by the delay model's thresholds (needs admission slots).
    Bafec,
}

impl Redundancy {
    /// Every redundancy policy.
    pub const ALL: [Redundancy; 4] = [Redundancy::K, Redundancy::Fixed, Redundancy::Greedy, Redundancy::Bafec];

    /// The FAST CLOUD preset of this code length; `None` for k.
    fn preset(self) -> Option<PolicyKind> {
        match self {
            Redundancy::K => None,
            Redundancy::Fixed => Some(PolicyKind::FecFixed),
            Redundancy::Greedy => Some(PolicyKind::FecGreedy),
            Redundancy::Bafec => Some(PolicyKind::FecBafec),
        }
    }

    /// Canonical name.
    pub fn name(self) -> &'static str {
        match self {
            Redundancy::K => "k",
            Redundancy::Fixed => "fixed",
            Redundancy::Greedy => "greedy",
            Redundancy::Bafec => "bafec",
        }
    }
}

/// How a GET's stripes are planned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Each unit range the GET needs, planned on its own by the selection and redundancy layers.
    #[default]
    PerRange,
    /// EC-Store: the stripes a GET reads whole are one batch of blocks, planned together by the
    /// access planner (cost plans over every block's units, late binding k + δ) as the batch route
    /// plans them; a stripe read in part goes per range.
    Ecstore,
}

impl Access {
    /// Canonical name.
    pub fn name(self) -> &'static str {
        match self {
            Access::PerRange => "per-range",
            Access::Ecstore => "ecstore",
        }
    }

    fn is_per_range(&self) -> bool {
        *self == Access::PerRange
    }
}

/// One policy per layer a bucket chooses. A field left out takes the default, which is the
/// cluster's behaviour without profiles.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Profile {
    /// Which units, on which nodes.
    pub selection: Selection,
    /// How many units a read asks for.
    pub redundancy: Redundancy,
    /// Who rebuilds a lost unit's range: the gateway, or the nodes (APLS), or segmented reads.
    pub reconstruction: ReconstructKind,
    /// Whether a GET's whole stripes are planned together (EC-Store) or each range on its own.
    #[serde(skip_serializing_if = "Access::is_per_range")]
    pub access: Access,
    /// The latency class of the requests, 1-based (1 is the best); `None`: the request's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<u8>,
    /// When a write is acknowledged; `None`: every unit (or the bucket's own rule).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_ack: Option<AckAt>,
}

/// What a profile is checked against: the cluster that will run it.
#[derive(Clone, Copy, Debug)]
pub struct ProfileTarget<'a> {
    /// The code of the stripes it reads.
    pub layout: &'a CodeLayout,
    /// The gateway's admission slots (L), `None` when unbounded.
    pub slots: Option<u32>,
    /// Whether there are storage nodes to probe and rebuild on (false over an S3 backend).
    pub has_nodes: bool,
    /// How many latency classes the gateway runs.
    pub classes: u8,
    /// Whether the profile is the cluster's default (not a bucket's).
    pub cluster_default: bool,
}

/// Why a profile cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProfileRefusal(pub String);

impl Profile {
    /// The profile a preset name stands for: the layers the paper behind it ran.
    pub fn preset(kind: PolicyKind) -> Profile {
        let (selection, redundancy) = match kind {
            PolicyKind::FecFixed => (Selection::Normal, Redundancy::Fixed),
            PolicyKind::FecGreedy => (Selection::Normal, Redundancy::Greedy),
            PolicyKind::FecBafec => (Selection::Normal, Redundancy::Bafec),
            PolicyKind::Normal => (Selection::Normal, Redundancy::K),
            PolicyKind::Llf => (Selection::Llf, Redundancy::K),
            PolicyKind::Lmlf => (Selection::Lmlf, Redundancy::K),
            PolicyKind::LlfPw2 => (Selection::LlfPw2, Redundancy::K),
            PolicyKind::LmlfPw2 => (Selection::LmlfPw2, Redundancy::K),
            PolicyKind::LmlfLazy => (Selection::LmlfLazy, Redundancy::K),
            PolicyKind::OptLazy => (Selection::OptLazy, Redundancy::K),
            PolicyKind::Hedged => (Selection::Hedged, Redundancy::K),
            PolicyKind::Jlwo => (Selection::Jlwo, Redundancy::K),
        };
        Profile { selection, redundancy, ..Profile::default() }
    }

    /// The preset this profile's read layers are, when they are one (its planner is then exactly
    /// the preset's policy).
    pub fn as_preset(&self) -> Option<PolicyKind> {
        match (self.selection, self.redundancy.preset()) {
            (selection, None) => Some(selection.preset()),
            (Selection::Normal, Some(fec)) => Some(fec),
            _ => None,
        }
    }

    /// Whether a read asks for units of its whole row and is done at the first k (FAST CLOUD's
    /// n, JLWO's k drawn with π), so one plan serves every data unit of the row.
    pub fn reads_rows(&self) -> bool {
        self.redundancy != Redundancy::K || self.selection == Selection::Jlwo
    }

    /// The read layers' name in records and metrics: the preset's (`lmlf-pw2`, `fec-bafec`), or
    /// `SELECTION+REDUNDANCY` (`lmlf-pw2+bafec`).
    pub fn read_name(&self) -> String {
        match self.as_preset() {
            Some(kind) => kind.name().to_string(),
            None => format!("{}+{}", self.selection.name(), self.redundancy.name()),
        }
    }

    /// Checks that the profile can run on `target`, and says why not.
    pub fn check(&self, target: &ProfileTarget<'_>) -> Result<(), ProfileRefusal> {
        let refuse = |why: String| Err(ProfileRefusal(why));
        let code = target.layout.spec();
        let mds = matches!(code, CodeSpec::Rs { .. });
        if self.redundancy != Redundancy::K {
            if !mds {
                return refuse(format!(
                    "redundancy = \"{}\" asks for n units of a row and needs any k of them to decode (an MDS \
                     code, Reed-Solomon); {code} is not one: use redundancy = \"k\"",
                    self.redundancy.name()
                ));
            }
            if self.redundancy == Redundancy::Bafec && target.slots.is_none() {
                return refuse(
                    "redundancy = \"bafec\" chooses n from the backlog of the gateway's task slots: set \
                     [data.admission] slots (L)"
                        .into(),
                );
            }
            if self.selection != Selection::Normal && self.selection.row_ranking(&PolicySettings::default()).is_none() {
                return refuse(format!(
                    "selection = \"{}\" chooses between one unit's normal read and its recovery sets (or draws k \
                     units), so it cannot rank the n units redundancy = \"{}\" asks for: use normal, llf, lmlf, \
                     llf-pw2 or lmlf-pw2",
                    self.selection.name(),
                    self.redundancy.name()
                ));
            }
        }
        if self.selection.is_cluster_wide() && !target.cluster_default {
            return refuse(format!(
                "selection = \"{}\" solves the cluster's class shares and placement for every bucket at once: it \
                 can only be the cluster's default profile ([controller] policy)",
                self.selection.name()
            ));
        }
        if self.access == Access::Ecstore && self.redundancy != Redundancy::K {
            return refuse(format!(
                "access = \"ecstore\" reads a GET's whole stripes with EC-Store's own late binding (k + δ units \
                 per block), so it cannot also take redundancy = \"{}\": use redundancy = \"k\"",
                self.redundancy.name()
            ));
        }
        if !target.has_nodes {
            if self.access == Access::Ecstore {
                return refuse(
                    "access = \"ecstore\" plans from the storage nodes' probed queues, and an S3 backend has none: \
                     use \"per-range\""
                        .into(),
                );
            }
            if self.selection.probes_nodes() {
                return refuse(format!(
                    "selection = \"{}\" probes storage nodes, and an S3 backend has none: use normal or hedged",
                    self.selection.name()
                ));
            }
            if self.reconstruction != ReconstructKind::Gateway {
                return refuse(format!(
                    "reconstruction = \"{}\" reads from or rebuilds on the storage nodes, and an S3 backend has \
                     none: use \"gateway\"",
                    self.reconstruction.name()
                ));
            }
        }
        if self.reconstruction.rebuilds_on_nodes()
            && mds
            && target.layout.total_units() - target.layout.data_units() < 2
        {
            return refuse(format!(
                "reconstruction = \"{}\" splits a lost unit's rebuild among more than k survivors, and {code} has \
                 only k left after one loss: use \"gateway\" or \"segmented\"",
                self.reconstruction.name()
            ));
        }
        let sessions = target.layout.total_units() - 1;
        if let (true, Some(slots)) = (self.reconstruction.rebuilds_on_nodes(), target.slots)
            && (slots as usize) < sessions
        {
            return refuse(format!(
                "reconstruction = \"{}\" holds one admission slot per survivor's session at once ({sessions} for \
                 {code}), and the gateway's {slots} slots could never admit it: raise [data.admission] slots or use \
                 \"segmented\"",
                self.reconstruction.name()
            ));
        }
        if let Some(class) = self.class
            && !(1..=target.classes).contains(&class)
        {
            return refuse(format!("class = {class}: the gateway runs classes 1 to {}", target.classes));
        }
        Ok(())
    }

    /// Checks the profile as the one serving latency class `class`'s requests to a bucket: the
    /// checks of [`Profile::check`], a class the gateway runs, and no class layer naming another
    /// class (a request's class is resolved before its class's profile is chosen, so that layer
    /// could never move it).
    pub fn check_for_class(&self, class: u8, target: &ProfileTarget) -> Result<(), ProfileRefusal> {
        let refuse = |why: String| Err(ProfileRefusal(why));
        if !(1..=target.classes).contains(&class) {
            return refuse(format!("class {class}: the gateway runs classes 1 to {}", target.classes));
        }
        if let Some(named) = self.class
            && named != class
        {
            return refuse(format!(
                "class = {named} in a profile for class {class}'s requests: its requests are in class {class} \
                 already; leave the class layer out or set it to {class}"
            ));
        }
        self.check(target)
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "selection {}, redundancy {}, reconstruction {}",
            self.selection.name(),
            self.redundancy.name(),
            self.reconstruction.name()
        )?;
        if let Some(class) = self.class {
            write!(f, ", class {class}")?;
        }
        if self.access != Access::PerRange {
            write!(f, ", access {}", self.access.name())?;
        }
        if let Some(ack) = self.write_ack {
            write!(f, ", write ack {}", ack.name())?;
        }
        Ok(())
    }
}

/// The read policy that plans `profile`'s reads for `frontend`: a preset's own policy, or the
/// selection layer ranking the n units of the code-length policy.
pub fn build_planner(
    profile: &Profile,
    settings: &PolicySettings,
    frontend: &FrontendSetup<'_>,
) -> Result<Box<dyn ReadPolicy + Send>, BuildError> {
    if let Some(kind) = profile.as_preset() {
        return build_read_policy(kind, settings, frontend);
    }
    let fec = profile.redundancy.preset().expect("a profile that is no preset has a code length");
    let (criterion, probing) = profile.selection.row_ranking(settings).ok_or_else(|| {
        BuildError::Composition(format!("selection {} cannot rank n units", profile.selection.name()))
    })?;
    let code_length = settings.fec.build(fec, frontend)?;
    Ok(Box::new(ranked_row::RankedRow::new(code_length, criterion, probing, settings.count_task_overhead)))
}

#[cfg(test)]
mod tests;
