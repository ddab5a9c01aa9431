//! Differentiated latency classes (Xiang et al.): which k of a file's n racks a read uses, and on
//! which n racks a file of a class is placed. Pure: randomness comes only from the caller's source.
//!
//! Probabilistic scheduling (§II, eq. 1): a read of file r from client rack i reads the chunks on a
//! random k-subset of the file's racks S_r whose marginals are π_{i,j,r} (each in [0, 1], summing to
//! k). The paper cites [28] for such a distribution existing but gives no sampler; lowtail uses
//! systematic (Madow) sampling ([`Marginals::sample`]): the racks in the caller's order (the order of
//! S_r) lay their π_j end to end on [0, k); one U ~ U[0, 1) picks the racks whose intervals cover
//! U, U + 1, …, U + k − 1. Each interval is at most 1 long, so no rack is hit twice; rack j is hit
//! with probability exactly π_j; one draw and O(n) work per read. Choices of ours, beside the paper:
//! - the order is fixed (S_r's order), not shuffled per draw: only the marginals enter the paper's
//!   bound (Lemma 1 holds for any joint distribution), and a fixed order keeps one draw per read;
//!   some pairs of racks may then never be read together, which the bound does not care about;
//! - a sum off k by at most [`SUM_TOLERANCE`] (an optimiser's rounding) and entries outside [0, 1]
//!   by at most that much are accepted (entries clamped into [0, 1], the last positive interval
//!   ending at k exactly); anything further off is a [`MarginalError`];
//! - a rack with π_j = 0 holds no chunk the read may use (eq. 1: π = 0 off S_r) and is never picked.
//!
//! Placement: a file's n chunks go to n distinct racks (§II). [`RackPlacement::Table`] takes the
//! rack sets S_r an optimiser produced (JLWO's placement sub-problem), per class, file `f` of a class
//! getting the class's set `f mod sets`; [`RackPlacement::Oblivious`] is the class-blind baseline
//! (Tahoe's default: uniformly random distinct racks), to be read with [`Marginals::uniform`]
//! (π = k/n) and equal bandwidth weights.
//!
//! [`scheduling`] is the read policy (`jlwo`) that plans reads with π from JLWO's solve.
//!
//! Must not: do I/O, read a clock or draw from any source but the caller's; know about queues or
//! bandwidth (the simulator's and the optimiser's).

pub mod scheduling;

use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};

/// How far Σ π may be from k, and a π_j outside [0, 1], before the marginals are refused.
pub const SUM_TOLERANCE: f64 = 1e-6;

/// Most racks a file's chunks may span (n ≤ 255, as a stripe's units in `model`).
pub const MAX_RACKS_PER_FILE: usize = 255;

/// A service class d (0-based: the paper's class 1 is `ClassId(0)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ClassId(pub u8);

/// Why marginals, or a read with them, were refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MarginalError {
    /// k must be at least 1.
    #[error("k must be at least 1")]
    ZeroK,
    /// More chunks to read than racks to read them from.
    #[error("k = {k} exceeds the {n} racks of the file")]
    KExceedsN {
        /// Chunks per read.
        k: usize,
        /// Racks given.
        n: usize,
    },
    /// More racks than a file may span.
    #[error("{n} racks exceed the limit of {MAX_RACKS_PER_FILE}")]
    TooManyRacks {
        /// Racks given.
        n: usize,
    },
    /// A π_j outside [0, 1] (beyond the tolerance) or not finite.
    #[error("π[{index}] = {value} is not a probability")]
    OutOfRange {
        /// Its position.
        index: usize,
        /// Its value.
        value: f64,
    },
    /// Σ π differs from k beyond the tolerance.
    #[error("Σ π = {sum} but k = {k}")]
    SumNotK {
        /// The sum.
        sum: f64,
        /// Chunks per read.
        k: usize,
    },
    /// The marginals are for a different number of racks than the file has.
    #[error("marginals for {marginals} racks, but the file has {racks}")]
    LengthMismatch {
        /// Entries of the marginals.
        marginals: usize,
        /// Racks of the file.
        racks: usize,
    },
}

/// Validated read marginals over a file's n racks (in the order of its rack set): π_j is the
/// probability a read uses rack j; exactly k racks per read.
#[derive(Clone, Debug, PartialEq)]
pub struct Marginals {
    k: usize,
    /// π_j, clamped into [0, 1].
    pi: Vec<f64>,
    /// Where each rack's interval ends on [0, k); the last positive one ends at k exactly.
    ends: Vec<f64>,
}

impl Marginals {
    /// Checks `pi` (each in [0, 1], Σ = k, both within [`SUM_TOLERANCE`]) and prepares sampling.
    pub fn new(pi: Vec<f64>, k: usize) -> Result<Marginals, MarginalError> {
        let n = pi.len();
        if k == 0 {
            return Err(MarginalError::ZeroK);
        }
        if n > MAX_RACKS_PER_FILE {
            return Err(MarginalError::TooManyRacks { n });
        }
        if k > n {
            return Err(MarginalError::KExceedsN { k, n });
        }
        if let Some((index, &value)) = pi
            .iter()
            .enumerate()
            .find(|&(_, &p)| !p.is_finite() || !(-SUM_TOLERANCE..=1.0 + SUM_TOLERANCE).contains(&p))
        {
            return Err(MarginalError::OutOfRange { index, value });
        }
        let sum: f64 = pi.iter().sum();
        if (sum - k as f64).abs() > SUM_TOLERANCE {
            return Err(MarginalError::SumNotK { sum, k });
        }
        let pi: Vec<f64> = pi.into_iter().map(|p| p.clamp(0.0, 1.0)).collect();
        let mut ends = Vec::with_capacity(n);
        let mut end = 0.0;
        for &p in &pi {
            end += p;
            ends.push(end);
        }
        // The sum is within the tolerance of k: let the last rack that can be read end at k, so
        // that U + k − 1 < k always falls in some interval.
        let last = pi.iter().rposition(|&p| p > 0.0).expect("Σ π = k ≥ 1 has a positive entry");
        ends[last] = k as f64;
        debug_assert!(pi.iter().filter(|&&p| p > 0.0).count() >= k, "each π ≤ 1 and Σ = k: k racks can be read");
        Ok(Marginals { k, pi, ends })
    }

    /// Uniform marginals π_j = k/n (the oblivious baseline).
    pub fn uniform(n: usize, k: usize) -> Result<Marginals, MarginalError> {
        if n == 0 {
            return Err(MarginalError::KExceedsN { k, n });
        }
        Marginals::new(vec![k as f64 / n as f64; n], k)
    }

    /// Marginals proportional to non-negative `weights` where that keeps each at most 1, the rest
    /// capped at 1 (water-filling: π_j = min(1, c·w_j) with c such that Σ π = k). For skewed access
    /// patterns and tests; refused when fewer than k weights are positive.
    pub fn capped_proportional(weights: &[f64], k: usize) -> Result<Marginals, MarginalError> {
        let positive = weights.iter().filter(|w| **w > 0.0).count();
        if positive < k {
            return Err(MarginalError::KExceedsN { k, n: positive });
        }
        let sum_at = |c: f64| weights.iter().map(|w| (c * w.max(0.0)).min(1.0)).sum::<f64>();
        let (mut low, mut high) = (0.0, 1.0);
        // Bounded doubling, then bisection: Σ min(1, c·w) grows to `positive` ≥ k.
        for _ in 0..2048 {
            if sum_at(high) >= k as f64 {
                break;
            }
            high *= 2.0;
        }
        for _ in 0..200 {
            let mid = 0.5 * (low + high);
            if sum_at(mid) < k as f64 { low = mid } else { high = mid }
        }
        let pi: Vec<f64> = weights.iter().map(|w| (high * w.max(0.0)).min(1.0)).collect();
        Marginals::new(pi, k)
    }

    /// Chunks per read.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Racks the marginals are over (n).
    pub fn len(&self) -> usize {
        self.pi.len()
    }

    /// Never true: marginals span at least k ≥ 1 racks.
    pub fn is_empty(&self) -> bool {
        self.pi.is_empty()
    }

    /// π, in rack-set order (clamped into [0, 1]).
    pub fn pi(&self) -> &[f64] {
        &self.pi
    }

    /// Draws the k racks of one read by systematic sampling: their positions in the rack set,
    /// ascending and distinct, replacing the contents of `out`. One uniform draw.
    pub fn sample(&self, rng: &mut (impl RngCore + ?Sized), out: &mut Vec<usize>) {
        let u: f64 = rng.random();
        self.sample_at(u, out);
    }

    /// The racks that cover u, u + 1, …, u + k − 1 (u in [0, 1)): the deterministic half of
    /// [`Marginals::sample`].
    pub fn sample_at(&self, u: f64, out: &mut Vec<usize>) {
        assert!((0.0..1.0).contains(&u), "u = {u} is not in [0, 1)");
        out.clear();
        let mut point = u;
        for (index, (&p, &end)) in self.pi.iter().zip(&self.ends).enumerate() {
            if out.len() == self.k {
                break;
            }
            // One point per rack at most: an interval is at most 1 long (π ≤ 1), and a point that
            // rounding pushed into a second rack's interval goes to the next rack instead.
            if p > 0.0 && point < end {
                out.push(index);
                point = u + out.len() as f64;
            }
        }
        if out.len() < self.k {
            // Only floating-point rounding of the interval ends gets here (one point deferred past
            // the last rack): complete with the racks not yet chosen, from the end, as the
            // deferred points would have fallen there.
            for index in (0..self.pi.len()).rev() {
                if out.len() == self.k {
                    break;
                }
                if self.pi[index] > 0.0 && !out.contains(&index) {
                    out.push(index);
                }
            }
            out.sort_unstable();
        }
        assert_eq!(out.len(), self.k, "a read uses exactly k racks");
        debug_assert!(out.windows(2).all(|w| w[0] < w[1]), "distinct racks, ascending");
    }

    /// The racks of `rack_set` one read uses (its k chosen entries, in rack-set order), replacing
    /// the contents of `out`; `scratch` holds the positions.
    pub fn sample_racks(
        &self,
        rack_set: &[u16],
        rng: &mut (impl RngCore + ?Sized),
        scratch: &mut Vec<usize>,
        out: &mut Vec<u16>,
    ) -> Result<(), MarginalError> {
        if rack_set.len() != self.pi.len() {
            return Err(MarginalError::LengthMismatch { marginals: self.pi.len(), racks: rack_set.len() });
        }
        self.sample(rng, scratch);
        out.clear();
        out.extend(scratch.iter().map(|&position| rack_set[position]));
        Ok(())
    }
}

/// The k-of-n racks of one read with marginals `pi` over `rack_set`: validation and one systematic
/// draw (callers that read a file often keep a [`Marginals`] instead).
pub fn sample_k_of_n(
    rack_set: &[u16],
    pi: &[f64],
    k: usize,
    rng: &mut (impl RngCore + ?Sized),
) -> Result<Vec<u16>, MarginalError> {
    let marginals = Marginals::new(pi.to_vec(), k)?;
    let mut racks = Vec::with_capacity(k);
    marginals.sample_racks(rack_set, rng, &mut Vec::with_capacity(k), &mut racks)?;
    Ok(racks)
}

/// Why a placement was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// A file needs n ≥ 1 racks, at most the cluster's and at most [`MAX_RACKS_PER_FILE`].
    #[error("{n} chunks cannot go to distinct racks of {racks}")]
    NotEnoughRacks {
        /// Chunks per file.
        n: usize,
        /// Racks of the cluster.
        racks: u16,
    },
    /// A rack set of the wrong size.
    #[error("class {class}, set {set}: {len} racks, but n = {n}")]
    WrongSize {
        /// Its class.
        class: u8,
        /// Its index among the class's sets.
        set: usize,
        /// Its racks.
        len: usize,
        /// Chunks per file.
        n: usize,
    },
    /// A rack set naming a rack twice or a rack the cluster does not have.
    #[error("class {class}, set {set}: rack {rack} repeated or not among the {racks} racks")]
    BadRack {
        /// Its class.
        class: u8,
        /// Its index among the class's sets.
        set: usize,
        /// The rack.
        rack: u16,
        /// Racks of the cluster.
        racks: u16,
    },
    /// A class without a rack set, or a class the table does not have.
    #[error("class {class} has no rack set")]
    NoSet {
        /// The class.
        class: u8,
    },
    /// More classes than a `ClassId` names.
    #[error("{classes} classes exceed 256")]
    TooManyClasses {
        /// Classes given.
        classes: usize,
    },
}

/// Explicit rack sets S_r per class, as an optimiser produced them (built only through
/// [`ClassPlacement::new`], so every set is checked).
#[derive(Clone, Debug, PartialEq)]
pub struct ClassPlacement {
    racks: u16,
    n: usize,
    /// Per class, its rack sets.
    sets: Vec<Vec<Vec<u16>>>,
}

impl ClassPlacement {
    /// Checks every set: n distinct racks among `racks`; every class has at least one set.
    pub fn new(racks: u16, n: usize, sets: Vec<Vec<Vec<u16>>>) -> Result<ClassPlacement, PlacementError> {
        check_fits(racks, n)?;
        if sets.len() > usize::from(u8::MAX) + 1 {
            return Err(PlacementError::TooManyClasses { classes: sets.len() });
        }
        let mut seen = vec![false; usize::from(racks)];
        for (class, of_class) in sets.iter().enumerate() {
            let class = class as u8;
            if of_class.is_empty() {
                return Err(PlacementError::NoSet { class });
            }
            for (set, rack_set) in of_class.iter().enumerate() {
                if rack_set.len() != n {
                    return Err(PlacementError::WrongSize { class, set, len: rack_set.len(), n });
                }
                seen.fill(false);
                for &rack in rack_set {
                    if rack >= racks || seen[usize::from(rack)] {
                        return Err(PlacementError::BadRack { class, set, rack, racks });
                    }
                    seen[usize::from(rack)] = true;
                }
            }
        }
        Ok(ClassPlacement { racks, n, sets })
    }

    /// The rack set of file `file` of `class` (its class's set `file mod sets`).
    pub fn rack_set(&self, class: ClassId, file: usize) -> Result<&[u16], PlacementError> {
        let of_class = self.sets.get(usize::from(class.0)).ok_or(PlacementError::NoSet { class: class.0 })?;
        Ok(&of_class[file % of_class.len()])
    }

    /// Classes in the table.
    pub fn classes(&self) -> usize {
        self.sets.len()
    }

    /// Chunks per file (n).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Racks of the cluster.
    pub fn racks(&self) -> u16 {
        self.racks
    }
}

fn check_fits(racks: u16, n: usize) -> Result<(), PlacementError> {
    if n == 0 || n > usize::from(racks) || n > MAX_RACKS_PER_FILE {
        return Err(PlacementError::NotEnoughRacks { n, racks });
    }
    Ok(())
}

/// n distinct racks among `racks`, uniformly (in random order): Tahoe's default placement.
pub fn random_distinct_racks(
    racks: u16,
    n: usize,
    rng: &mut (impl RngCore + ?Sized),
) -> Result<Vec<u16>, PlacementError> {
    check_fits(racks, n)?;
    let chosen = rand::seq::index::sample(rng, usize::from(racks), n);
    Ok(chosen.iter().map(|rack| rack as u16).collect())
}

/// Where a class's files go.
#[derive(Clone, Debug, PartialEq)]
pub enum RackPlacement {
    /// The optimiser's sets, per class.
    Table(ClassPlacement),
    /// Class-blind: n uniformly random distinct racks per file.
    Oblivious {
        /// Racks of the cluster.
        racks: u16,
        /// Chunks per file.
        n: usize,
    },
}

impl RackPlacement {
    /// The racks of file `file` of `class`: the table's set, or a fresh random draw.
    pub fn rack_set(
        &self,
        class: ClassId,
        file: usize,
        rng: &mut (impl RngCore + ?Sized),
    ) -> Result<Vec<u16>, PlacementError> {
        match self {
            RackPlacement::Table(table) => table.rack_set(class, file).map(<[u16]>::to_vec),
            RackPlacement::Oblivious { racks, n } => random_distinct_racks(*racks, *n, rng),
        }
    }
}

/// Why class weights were refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum WeightsError {
    /// No class, or more than 256.
    #[error("{classes} classes: need 1 to 256")]
    Count {
        /// Classes given.
        classes: usize,
    },
    /// A weight negative or not finite.
    #[error("class {class}: weight {weight} is not a finite non-negative number")]
    Invalid {
        /// The class.
        class: usize,
        /// Its weight.
        weight: f64,
    },
    /// Every weight zero: the objective would be empty.
    #[error("every class weight is zero")]
    AllZero,
}

/// How the nodes of each storage rack divide their service between the latency classes: per rack
/// (the view's rack numbers), one share per class, each positive, summing to 1. Built from the
/// bandwidth an optimiser reserved per (storage rack, class) towards one client rack (JLWO's
/// B_eff_{i,j,d}): a node serves its classes in the proportions its rack's link does.
#[derive(Clone, Debug, PartialEq)]
pub struct RackClassShares {
    by_rack: Vec<Option<Vec<f64>>>,
    classes: usize,
}

impl RackClassShares {
    /// The least share a class gets (with up to 50 classes; half of 1/D beyond): a class the
    /// optimiser left no bandwidth (no demand in the last period) is not starved when its
    /// reads come back before the next solve.
    pub const SHARE_MIN: f64 = 0.01;

    /// Shares from `reserved_bps[rack][class]`: in proportion to the reserved bandwidth, lifted
    /// to at least the floor (s′ = m + (1 − D·m)·s, which keeps the sum at 1). A rack with no
    /// bandwidth reserved, or a non-finite or negative entry, has no shares (`None`: keep what
    /// the nodes run).
    pub fn from_reserved_bps(reserved_bps: &[Vec<f64>]) -> RackClassShares {
        let classes = reserved_bps.first().map_or(0, Vec::len);
        let floor = Self::SHARE_MIN.min(0.5 / classes.max(1) as f64);
        let by_rack = reserved_bps
            .iter()
            .map(|row| {
                assert_eq!(row.len(), classes, "one bandwidth per class in every rack");
                let total: f64 = row.iter().sum();
                if !(total.is_finite() && total > 0.0) || row.iter().any(|&b| b.is_nan() || b < 0.0) {
                    return None;
                }
                let lift = 1.0 - classes as f64 * floor;
                Some(row.iter().map(|&b| floor + lift * b / total).collect())
            })
            .collect();
        RackClassShares { by_rack, classes }
    }

    /// The shares of `rack`'s nodes by class, if the rack has any.
    pub fn rack(&self, rack: u16) -> Option<&[f64]> {
        self.by_rack.get(usize::from(rack)).and_then(|shares| shares.as_deref())
    }

    /// Racks described (some without shares).
    pub fn racks(&self) -> usize {
        self.by_rack.len()
    }

    /// Classes per rack.
    pub fn classes(&self) -> usize {
        self.classes
    }
}

/// The user's class weights C_d of the objective Σ_d C_d·T̄_d (eq. 15).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<f64>", into = "Vec<f64>")]
pub struct ClassWeights(Vec<f64>);

impl ClassWeights {
    /// Checks the weights: 1 to 256 classes, each finite and ≥ 0, not all zero.
    pub fn new(weights: Vec<f64>) -> Result<ClassWeights, WeightsError> {
        if weights.is_empty() || weights.len() > usize::from(u8::MAX) + 1 {
            return Err(WeightsError::Count { classes: weights.len() });
        }
        if let Some((class, &weight)) = weights.iter().enumerate().find(|&(_, &w)| !(w.is_finite() && w >= 0.0)) {
            return Err(WeightsError::Invalid { class, weight });
        }
        if weights.iter().all(|&w| w == 0.0) {
            return Err(WeightsError::AllZero);
        }
        Ok(ClassWeights(weights))
    }

    /// `classes` classes of weight 1 (the oblivious baseline).
    pub fn equal(classes: usize) -> Result<ClassWeights, WeightsError> {
        ClassWeights::new(vec![1.0; classes])
    }

    /// C_d of a class.
    pub fn weight(&self, class: ClassId) -> Option<f64> {
        self.0.get(usize::from(class.0)).copied()
    }

    /// Every C_d, by class.
    pub fn as_slice(&self) -> &[f64] {
        &self.0
    }
}

impl Default for ClassWeights {
    /// The paper's two classes, C_1 = 1 and C_2 = 0.4 (§V, Fig. 3, 5–7).
    fn default() -> Self {
        ClassWeights(vec![1.0, 0.4])
    }
}

impl TryFrom<Vec<f64>> for ClassWeights {
    type Error = WeightsError;
    fn try_from(weights: Vec<f64>) -> Result<Self, Self::Error> {
        ClassWeights::new(weights)
    }
}

impl From<ClassWeights> for Vec<f64> {
    fn from(weights: ClassWeights) -> Vec<f64> {
        weights.0
    }
}

#[cfg(test)]
mod tests;
