//! Azure-style local reconstruction code LRC(k, l, r) over GF(2^8): k data
//! units in l local groups of k/l, one XOR local parity per group, and r
//! global parities over all k data units.
//!
//! Owns: the layout of units (data `0..k`, local parity of group g at
//! `k + g`, global parity j at `k + l + j`), the choice of global parity
//! coefficients (searched for maximal recoverability, see [`Lrc`]), and the
//! [`ErasureCode`] implementation. Local repair, global decode, decode-plan
//! caching and recovery-set enumeration are the shared linear-code core's.
//!
//! Must not: panic on user input, return bytes for an undecodable pattern,
//! or change the coefficient choice without updating the golden hashes in
//! `tests/codes.rs` (stored parity depends on it).

use crate::code::ErasureCode;
use crate::engine::{self, Engine};
use crate::error::Result;
use crate::linear::{Combination, LinearCode, Scope};
use crate::matrix::{Matrix, RowBasis};
use crate::spec::CodeSpec;
use std::collections::HashMap;
use std::fmt;
use std::ops::ControlFlow;
use std::sync::{LazyLock, Mutex};

/// Offsets t tried for the global Cauchy points (see [`Lrc`]).
const OFFSET_CANDIDATES: usize = 64;

/// Most loss patterns one exhaustive check may visit. Keeps `Lrc::new`
/// cheap (the check of LRC(12,2,2) visits 1,568 patterns); codes with more
/// patterns take the unverified default.
const PATTERN_BUDGET: usize = 20_000;

/// Offsets already chosen in this process, per (k, l, r): the search is
/// deterministic, so it need run only once however often a code is built.
static CHOSEN_OFFSETS: LazyLock<Mutex<OffsetChoices>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// (k, l, r) → (offset t, what it guarantees).
type OffsetChoices = HashMap<(usize, usize, usize), (usize, Guarantee)>;

/// What the chosen global coefficients were verified to guarantee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Guarantee {
    /// Every information-theoretically recoverable pattern decodes.
    MaximallyRecoverable,
    /// Every pattern of up to r + 1 losses decodes (Azure's guarantee).
    AnyRPlusOneLosses,
    /// Too large to check exhaustively within [`PATTERN_BUDGET`].
    Unverified,
}

/// Azure-style LRC(k, l, r).
///
/// Global parity j has coefficients `1 / (x_j + y_i)` on data unit i (a
/// Cauchy matrix) with `y_i = i` and `x_j = k + t + j`. The offset t is the
/// smallest in `0..64` for which the code is *maximally recoverable*: a loss
/// pattern decodes iff
///
/// Σ over groups g of max(0, f_g − 1) + (lost global parities) ≤ r,
///
/// where f_g counts lost units among group g's data and local parity. No
/// code with this layout decodes more (the available units of group g span
/// at most min(k/l, available in g) dimensions), so this is optimal. Plain
/// Cauchy (t = 0) is not MR for LRC(6,2,2) or LRC(12,2,2); t = 3 and t = 15
/// are the offsets found, and the search is deterministic. The check visits
/// only the maximal recoverable patterns (every group hit, sum exactly r),
/// since a subset of a decodable pattern is decodable.
///
/// When no offset is MR (no Cauchy offset is, for r = 3) or the check would
/// visit more than 20,000 patterns, the smallest offset for which every
/// pattern of r + 1 losses decodes is taken (the guarantee of Windows Azure
/// Storage's LRC); beyond that budget too, t = 0 without a verified
/// guarantee. Either way decoding never returns wrong bytes: decodability is
/// decided by the rank of the surviving rows, not by this formula.
pub struct Lrc {
    k: usize,
    l: usize,
    r: usize,
    /// The Cauchy offset t of the global parity points.
    global_offset: usize,
    guarantee: Guarantee,
    core: LinearCode,
}

impl Lrc {
    /// LRC(k, l, r) on the fastest engine of this CPU ([`engine::best`]).
    pub fn new(k: usize, l: usize, r: usize) -> Result<Lrc> {
        Lrc::with_engine(k, l, r, engine::best())
    }

    /// LRC(k, l, r) on a chosen engine (tests and benchmarks compare engines).
    pub fn with_engine(k: usize, l: usize, r: usize, engine: &'static dyn Engine) -> Result<Lrc> {
        CodeSpec::Lrc { k, l, r }.validate()?;
        let layout = Layout { k, l, r };
        let (offset, guarantee) = layout.chosen_global_offset();
        let groups = (0..l).map(|g| layout.group_members(g)).collect();
        let core = LinearCode::new(layout.generator(offset), groups, false, engine);
        Ok(Lrc { k, l, r, global_offset: offset, guarantee, core })
    }

    /// The (k + l + r) × k generator: unit i = row i · (data units).
    pub fn generator(&self) -> &Matrix {
        self.core.generator()
    }

    /// The engine every kernel call of this code goes to.
    pub fn engine(&self) -> &'static dyn Engine {
        self.core.engine()
    }

    /// The members (data units, then the local parity) of the local group of
    /// `unit`; `None` for a global parity or an index out of range.
    pub fn local_group(&self, unit: usize) -> Option<Vec<usize>> {
        let layout = Layout { k: self.k, l: self.l, r: self.r };
        layout.group_of(unit).map(|g| layout.group_members(g))
    }

    /// Whether the global coefficients were verified maximally recoverable
    /// (true for LRC(6,2,2), LRC(12,2,2) and other small r ≤ 2 codes).
    pub fn is_maximally_recoverable(&self) -> bool {
        self.guarantee == Guarantee::MaximallyRecoverable
    }
}

/// Unit numbering of LRC(k, l, r), independent of coefficients.
#[derive(Clone, Copy, Debug)]
struct Layout {
    k: usize,
    l: usize,
    r: usize,
}

impl Layout {
    fn group_size(&self) -> usize {
        self.k / self.l
    }

    fn total_units(&self) -> usize {
        self.k + self.l + self.r
    }

    fn group_of(&self, unit: usize) -> Option<usize> {
        if unit < self.k {
            Some(unit / self.group_size())
        } else if unit < self.k + self.l {
            Some(unit - self.k)
        } else {
            None
        }
    }

    /// Data units of group g, then its local parity (ascending).
    fn group_members(&self, group: usize) -> Vec<usize> {
        let size = self.group_size();
        (group * size..(group + 1) * size).chain([self.k + group]).collect()
    }

    fn generator(&self, offset: usize) -> Matrix {
        let Layout { k, l, r } = *self;
        let global_points: Vec<u8> = (0..r).map(|j| (k + offset + j) as u8).collect();
        let data_points: Vec<u8> = (0..k).map(|i| i as u8).collect();
        let cauchy = Matrix::cauchy(&global_points, &data_points).expect("offsets keep the points distinct");
        let mut generator = Matrix::zero(k + l + r, k);
        for i in 0..k {
            generator.set(i, i, 1);
            generator.set(k + i / self.group_size(), i, 1);
            for j in 0..r {
                generator.set(k + l + j, i, cauchy.get(j, i));
            }
        }
        generator
    }

    /// Offsets that keep every point `k + t + j` (j < r) a field element.
    fn offset_candidates(&self) -> std::ops::Range<usize> {
        if self.r == 0 {
            return 0..1;
        }
        0..OFFSET_CANDIDATES.min(256 - (self.k + self.r - 1))
    }

    /// [`Layout::choose_global_offset`], memoised for the process. The lock
    /// is not held during the search; two threads racing find the same answer.
    fn chosen_global_offset(&self) -> (usize, Guarantee) {
        let key = (self.k, self.l, self.r);
        let lookup = |chosen: &HashMap<_, _>| chosen.get(&key).copied();
        if let Some(found) = lookup(&crate::lock(&CHOSEN_OFFSETS)) {
            return found;
        }
        let found = self.choose_global_offset();
        crate::lock(&CHOSEN_OFFSETS).insert(key, found);
        found
    }

    /// The offset t (and what it was verified to give), as documented on [`Lrc`].
    fn choose_global_offset(&self) -> (usize, Guarantee) {
        if count_up_to(PATTERN_BUDGET + 1, |visit| self.visit_maximal_patterns(visit)) <= PATTERN_BUDGET {
            let mr = self.offset_candidates().find(|&t| {
                let generator = self.generator(t);
                self.all_decodable(&generator, |visit| self.visit_maximal_patterns(visit))
            });
            if let Some(offset) = mr {
                return (offset, Guarantee::MaximallyRecoverable);
            }
        }
        let losses = self.r + 1;
        if count_up_to(PATTERN_BUDGET + 1, |visit| self.visit_patterns_of_size(losses, visit)) <= PATTERN_BUDGET {
            let tolerant = self.offset_candidates().find(|&t| {
                let generator = self.generator(t);
                self.all_decodable(&generator, |visit| self.visit_patterns_of_size(losses, visit))
            });
            if let Some(offset) = tolerant {
                return (offset, Guarantee::AnyRPlusOneLosses);
            }
        }
        (0, Guarantee::Unverified)
    }

    /// Whether every visited loss pattern leaves rows of rank k.
    fn all_decodable(
        &self,
        generator: &Matrix,
        patterns: impl FnOnce(&mut dyn FnMut(&[usize]) -> ControlFlow<()>) -> ControlFlow<()>,
    ) -> bool {
        let mut lost = vec![false; self.total_units()];
        patterns(&mut |pattern| {
            pattern.iter().for_each(|&u| lost[u] = true);
            let mut basis = RowBasis::new(self.k);
            for unit in (0..self.total_units()).filter(|&u| !lost[u]) {
                if basis.insert(generator.row(unit)) && basis.rank() == self.k {
                    break;
                }
            }
            pattern.iter().for_each(|&u| lost[u] = false);
            if basis.rank() == self.k { ControlFlow::Continue(()) } else { ControlFlow::Break(()) }
        })
        .is_continue()
    }

    /// Every recoverable pattern no unit can be added to: each group loses
    /// 1 + e_g units, the globals lose r − Σ e_g.
    fn visit_maximal_patterns(&self, visit: &mut dyn FnMut(&[usize]) -> ControlFlow<()>) -> ControlFlow<()> {
        let mut pattern = Vec::with_capacity(self.l + self.r);
        self.visit_group_losses(0, self.r, &mut pattern, visit)
    }

    /// Recursion over groups; depth is l (≤ 255) and each level loops over
    /// finitely many combinations.
    fn visit_group_losses(
        &self,
        group: usize,
        extra_left: usize,
        pattern: &mut Vec<usize>,
        visit: &mut dyn FnMut(&[usize]) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if group == self.l {
            let globals: Vec<usize> = (self.k + self.l..self.total_units()).collect();
            let mut pick = Combination::first(globals.len(), extra_left);
            while let Some(chosen) = pick {
                let before = pattern.len();
                pattern.extend(chosen.indices().iter().map(|&i| globals[i]));
                let flow = visit(pattern);
                pattern.truncate(before);
                flow?;
                pick = chosen.next();
            }
            return ControlFlow::Continue(());
        }
        let members = self.group_members(group);
        for extra in 0..=extra_left.min(self.group_size()) {
            let mut pick = Combination::first(members.len(), extra + 1);
            while let Some(chosen) = pick {
                let before = pattern.len();
                pattern.extend(chosen.indices().iter().map(|&i| members[i]));
                let flow = self.visit_group_losses(group + 1, extra_left - extra, pattern, visit);
                pattern.truncate(before);
                flow?;
                pick = chosen.next();
            }
        }
        ControlFlow::Continue(())
    }

    fn visit_patterns_of_size(
        &self,
        size: usize,
        visit: &mut dyn FnMut(&[usize]) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let mut pick = Combination::first(self.total_units(), size);
        while let Some(chosen) = pick {
            visit(chosen.indices())?;
            pick = chosen.next();
        }
        ControlFlow::Continue(())
    }
}

/// Number of patterns `patterns` visits, counting no further than `cap`.
fn count_up_to(
    cap: usize,
    patterns: impl FnOnce(&mut dyn FnMut(&[usize]) -> ControlFlow<()>) -> ControlFlow<()>,
) -> usize {
    let mut count = 0;
    let _ = patterns(&mut |_| {
        count += 1;
        if count >= cap { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    });
    count
}

impl fmt::Debug for Lrc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lrc")
            .field("k", &self.k)
            .field("l", &self.l)
            .field("r", &self.r)
            .field("global_offset", &self.global_offset)
            .field("guarantee", &self.guarantee)
            .field("engine", &self.engine().kind())
            .finish()
    }
}

impl ErasureCode for Lrc {
    fn spec(&self) -> CodeSpec {
        CodeSpec::Lrc { k: self.k, l: self.l, r: self.r }
    }

    fn encode(&self, data: &[&[u8]], parity: &mut [&mut [u8]]) -> Result<()> {
        self.core.encode(data, parity)
    }

    /// A lost unit whose local group is otherwise intact is rebuilt from the
    /// group (k/l sources, XOR); the others by one global decode over k
    /// independent surviving units, data first.
    fn reconstruct(&self, units: &mut [&mut [u8]], present: &[bool]) -> Result<()> {
        self.core.reconstruct(units, present, Scope::AllUnits)
    }

    fn reconstruct_data(&self, units: &mut [&mut [u8]], present: &[bool]) -> Result<()> {
        self.core.reconstruct(units, present, Scope::DataOnly)
    }

    fn is_decodable(&self, present: &[bool]) -> bool {
        self.core.is_decodable(present)
    }

    fn repair_coefficients(&self, target: usize, sources: &[usize]) -> Result<Vec<u8>> {
        self.core.repair_coefficients(target, sources)
    }

    /// For a data unit or local parity: its local group first (the k/l other
    /// members), then k-unit global sets; for a global parity: the k data
    /// units first, then other k-unit sets. Global sets come data-heavy
    /// first and each is checked minimal (independent, every coefficient
    /// nonzero). For a maximally recoverable code these are all the minimal
    /// sets: its only dependent sets of at most k units are the local groups.
    fn recovery_sets(&self, unit: usize, limit: usize) -> Result<Vec<Vec<usize>>> {
        self.core.recovery_sets(unit, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_local_parity_rows() {
        let lrc = Lrc::new(6, 2, 2).unwrap();
        assert_eq!(lrc.local_group(1), Some(vec![0, 1, 2, 6]));
        assert_eq!(lrc.local_group(7), Some(vec![3, 4, 5, 7]));
        assert_eq!(lrc.local_group(8), None);
        assert_eq!(lrc.local_group(10), None);
        assert_eq!(lrc.generator().row(6), &[1, 1, 1, 0, 0, 0]);
        assert_eq!(lrc.generator().row(7), &[0, 0, 0, 1, 1, 1]);
    }

    #[test]
    fn offsets_found_for_the_azure_codes() {
        assert_eq!(Lrc::new(6, 2, 2).unwrap().global_offset, 3);
        assert_eq!(Lrc::new(12, 2, 2).unwrap().global_offset, 15);
    }

    #[test]
    fn plain_cauchy_is_not_maximally_recoverable() {
        // Why the offset search exists (see the doc of `Lrc`).
        for (k, l, r) in [(6, 2, 2), (12, 2, 2)] {
            let layout = Layout { k, l, r };
            assert!(!layout.all_decodable(&layout.generator(0), |visit| layout.visit_maximal_patterns(visit)));
            // It does tolerate any r + 1 losses.
            assert!(layout.all_decodable(&layout.generator(0), |visit| layout.visit_patterns_of_size(r + 1, visit)));
        }
    }

    #[test]
    fn azure_codes_are_maximally_recoverable() {
        for (k, l, r) in [(6, 2, 2), (12, 2, 2), (12, 3, 2), (4, 2, 1), (6, 3, 0)] {
            assert!(Lrc::new(k, l, r).unwrap().is_maximally_recoverable(), "LRC({k},{l},{r})");
        }
        // No Cauchy offset is MR with three global parities; the fallback still tolerates any 4 losses.
        let lrc = Lrc::new(6, 2, 3).unwrap();
        assert!(!lrc.is_maximally_recoverable());
        assert_eq!(lrc.guarantee, Guarantee::AnyRPlusOneLosses);
    }

    #[test]
    fn single_losses_use_the_local_group() {
        let lrc = Lrc::new(12, 2, 2).unwrap();
        let mut present = vec![true; 16];
        present[3] = false;
        present[9] = false;
        assert_eq!(
            lrc.core.plan_shape_for_test(&present),
            vec![(vec![0, 1, 2, 4, 5, 12], vec![3]), (vec![6, 7, 8, 10, 11, 13], vec![9])]
        );
        // Two losses in one group: a global decode, data first.
        let mut present = vec![true; 16];
        present[0] = false;
        present[1] = false;
        let plan = lrc.core.plan_shape_for_test(&present);
        assert_eq!(plan.len(), 1);
        assert_eq!(plan[0].1, vec![0, 1]);
        assert_eq!(plan[0].0.len(), 12);
        assert!(plan[0].0.starts_with(&[2, 3, 4, 5, 6, 7, 8, 9, 10, 11]));
    }
}
