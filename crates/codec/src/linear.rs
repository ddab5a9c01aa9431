//! The shared core of systematic linear codes, given an n × k generator
//! matrix whose top k × k block is the identity (unit i = row i · data).
//!
//! Owns: validating unit lists, encoding (one fused kernel call), decode
//! plans cached per loss pattern, decodability, repair coefficients and the
//! enumeration of recovery sets. Local groups (sets of units that are
//! linearly dependent on their own, like an LRC group and its XOR parity) are
//! used for cheap repairs when one member is lost and the rest survive.
//!
//! Must not: know how the generator was built (RS and LRC decide that), or
//! write a single byte before the whole request has been validated and a
//! decode plan exists, so that an error leaves every buffer untouched.

use crate::engine::{Coefficients, Engine, Mode};
use crate::error::{CodecError, Result};
use crate::matrix::{Matrix, RowBasis};
use lru::LruCache;
use std::num::NonZeroUsize;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

/// Decode plans kept per code. A stripe-wide failure touches a handful of
/// loss patterns; 256 covers every pattern of up to 2 losses of a 22-unit code.
const PLAN_CACHE_ENTRIES: usize = 256;

/// Most recovery sets one call returns, whatever the limit: a wide RS code
/// has astronomically many, and nobody needs more than a few.
pub(crate) const MAX_RECOVERY_SETS: usize = 1 << 16;

/// Candidate sets examined per requested recovery set (plus a fixed
/// allowance) before `recovery_sets` gives up looking, so a code whose
/// candidates are mostly rejected cannot loop for long.
const CANDIDATES_PER_SET: usize = 64;
const CANDIDATE_ALLOWANCE: usize = 4096;

/// A set of unit indices (n ≤ 255) as a bitmask: the key of the plan cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
struct UnitMask([u64; 4]);

impl UnitMask {
    fn insert(&mut self, unit: usize) {
        debug_assert!(unit < 256);
        self.0[unit / 64] |= 1 << (unit % 64);
    }

    fn contains(&self, unit: usize) -> bool {
        unit < 256 && self.0[unit / 64] & (1 << (unit % 64)) != 0
    }
}

/// Which lost units a reconstruction rebuilds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every lost unit.
    AllUnits,
    /// Lost data units only (a degraded read); lost parity stays untouched.
    DataOnly,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PlanKey {
    present: UnitMask,
    targets: UnitMask,
}

/// One kernel call of a decode: `targets = coefficients · sources`.
#[derive(Debug)]
struct DecodeStep {
    /// Unit indices read, ascending.
    sources: Vec<usize>,
    /// Unit indices written, ascending, disjoint from `sources`.
    targets: Vec<usize>,
    coefficients: Coefficients,
}

/// How to rebuild the targets of one loss pattern: local repairs (one step
/// per lost unit whose local group is otherwise intact) and at most one
/// global step for the rest. Steps read only units that were present.
#[derive(Debug)]
struct DecodePlan {
    steps: Vec<DecodeStep>,
}

/// A systematic linear code and its decode-plan cache.
pub(crate) struct LinearCode {
    data_units: usize,
    generator: Matrix,
    /// Each group is linearly dependent on its own: any member is a
    /// combination of the others. Sorted ascending.
    local_groups: Vec<Vec<usize>>,
    /// Whether every k rows are independent (RS): then every k-subset of the
    /// other units is a minimal recovery set and need not be checked.
    mds: bool,
    parity_coefficients: Coefficients,
    engine: &'static dyn Engine,
    plans: Mutex<LruCache<PlanKey, Arc<DecodePlan>>>,
}

impl LinearCode {
    /// Builds the core. Panics when the generator is not systematic or a
    /// local group is not dependent: both are construction bugs, not input.
    pub(crate) fn new(
        generator: Matrix,
        local_groups: Vec<Vec<usize>>,
        mds: bool,
        engine: &'static dyn Engine,
    ) -> LinearCode {
        let data_units = generator.cols();
        let total_units = generator.rows();
        assert!(data_units >= 1 && total_units > data_units && total_units <= 255, "generator shape");
        assert_eq!(generator.select_rows(&(0..data_units).collect::<Vec<_>>()), Matrix::identity(data_units));
        for group in &local_groups {
            assert!(group.windows(2).all(|w| w[0] < w[1]) && group.iter().all(|&u| u < total_units));
            assert!(generator.select_rows(group).rank() < group.len(), "local group {group:?} is independent");
        }
        let parity_rows: Vec<usize> = (data_units..total_units).collect();
        let parity_coefficients =
            Coefficients::new(parity_rows.len(), data_units, generator.select_rows(&parity_rows).into_values());
        let capacity = NonZeroUsize::new(PLAN_CACHE_ENTRIES).expect("nonzero cache size");
        LinearCode {
            data_units,
            generator,
            local_groups,
            mds,
            parity_coefficients,
            engine,
            plans: Mutex::new(LruCache::new(capacity)),
        }
    }

    pub(crate) fn total_units(&self) -> usize {
        self.generator.rows()
    }

    /// Most units any pattern can lose and still decode (n − k).
    fn max_losses(&self) -> usize {
        self.total_units() - self.data_units
    }

    pub(crate) fn generator(&self) -> &Matrix {
        &self.generator
    }

    pub(crate) fn engine(&self) -> &'static dyn Engine {
        self.engine
    }

    /// Parity from data: one fused kernel call over all parity rows.
    pub(crate) fn encode(&self, data: &[&[u8]], parity: &mut [&mut [u8]]) -> Result<()> {
        let k = self.data_units;
        if data.len() != k {
            return Err(CodecError::UnitCount { what: "data units", expected: k, got: data.len() });
        }
        if parity.len() != self.max_losses() {
            return Err(CodecError::UnitCount { what: "parity units", expected: self.max_losses(), got: parity.len() });
        }
        let len = data[0].len();
        let lengths = data.iter().map(|d| d.len()).chain(parity.iter().map(|p| p.len()));
        if let Some((index, got)) = lengths.enumerate().find(|&(_, got)| got != len) {
            return Err(CodecError::UnitLength { index, expected: len, got });
        }
        if len > 0 {
            self.engine.combine(&self.parity_coefficients, data, parity, Mode::Overwrite);
        }
        Ok(())
    }

    /// Rebuilds the lost units of `scope` in place; see [`crate::ErasureCode::reconstruct`].
    pub(crate) fn reconstruct(&self, units: &mut [&mut [u8]], present: &[bool], scope: Scope) -> Result<()> {
        let n = self.total_units();
        if units.len() != n {
            return Err(CodecError::UnitCount { what: "units", expected: n, got: units.len() });
        }
        if present.len() != n {
            return Err(CodecError::UnitCount { what: "presence flags", expected: n, got: present.len() });
        }
        let len = units[0].len();
        if let Some((index, unit)) = units.iter().enumerate().find(|(_, u)| u.len() != len) {
            return Err(CodecError::UnitLength { index, expected: len, got: unit.len() });
        }
        let lost = present.iter().filter(|&&p| !p).count();
        if lost > self.max_losses() {
            return Err(CodecError::TooManyLosses { lost, max: self.max_losses() });
        }
        let mut key = PlanKey { present: UnitMask::default(), targets: UnitMask::default() };
        let mut targets = Vec::with_capacity(lost);
        for (unit, &is_present) in present.iter().enumerate() {
            if is_present {
                key.present.insert(unit);
            } else if scope == Scope::AllUnits || unit < self.data_units {
                key.targets.insert(unit);
                targets.push(unit);
            }
        }
        if targets.is_empty() {
            return Ok(());
        }
        let plan = self.plan(key, present, &targets)?;
        if len == 0 {
            return Ok(());
        }
        for step in &plan.steps {
            self.run_step(step, units);
        }
        Ok(())
    }

    /// Cached plan for `key`, built (outside the lock) on a miss.
    fn plan(&self, key: PlanKey, present: &[bool], targets: &[usize]) -> Result<Arc<DecodePlan>> {
        let cached = crate::lock(&self.plans).get(&key).cloned();
        if let Some(plan) = cached {
            return Ok(plan);
        }
        let plan = Arc::new(self.build_plan(present, targets)?);
        crate::lock(&self.plans).put(key, Arc::clone(&plan));
        Ok(plan)
    }

    fn build_plan(&self, present: &[bool], targets: &[usize]) -> Result<DecodePlan> {
        let k = self.data_units;
        let mut steps = Vec::new();
        let mut global_targets = Vec::new();
        for &target in targets {
            match self.local_repair(target, present) {
                Some(step) => steps.push(step),
                None => global_targets.push(target),
            }
        }
        if global_targets.is_empty() {
            return Ok(DecodePlan { steps });
        }
        // Greedy in index order picks data before parity: data rows are unit
        // vectors, so every present data unit is a source with a trivial row.
        let mut basis = RowBasis::new(k);
        let mut sources = Vec::with_capacity(k);
        for unit in (0..self.total_units()).filter(|&u| present[u]) {
            if basis.insert(self.generator.row(unit)) {
                sources.push(unit);
                if sources.len() == k {
                    break;
                }
            }
        }
        if sources.len() < k {
            let lost = targets.iter().copied().filter(|&t| !basis.contains(self.generator.row(t))).collect();
            return Err(CodecError::Undecodable { lost });
        }
        let inverse = self.generator.select_rows(&sources).inverse().expect("rows chosen independent are invertible");
        let decode = self.generator.select_rows(&global_targets).mul(&inverse);
        // Sources every target ignores need not be read at all.
        let used: Vec<usize> =
            (0..k).filter(|&col| (0..global_targets.len()).any(|row| decode.get(row, col) != 0)).collect();
        let mut values = Vec::with_capacity(global_targets.len() * used.len());
        for row in 0..global_targets.len() {
            values.extend(used.iter().map(|&col| decode.get(row, col)));
        }
        debug_assert!(!used.is_empty(), "a nonzero generator row needs a source");
        steps.push(DecodeStep {
            sources: used.iter().map(|&col| sources[col]).collect(),
            coefficients: Coefficients::new(global_targets.len(), used.len(), values),
            targets: global_targets,
        });
        Ok(DecodePlan { steps })
    }

    /// A one-output step rebuilding `target` from the smallest local group
    /// that contains it and is otherwise fully present.
    fn local_repair(&self, target: usize, present: &[bool]) -> Option<DecodeStep> {
        let group = self
            .local_groups
            .iter()
            .filter(|g| g.contains(&target) && g.iter().all(|&u| u == target || present[u]))
            .min_by_key(|g| g.len())?;
        let sources: Vec<usize> = group.iter().copied().filter(|&u| u != target).collect();
        let coefficients = self
            .generator
            .select_rows(&sources)
            .solve_left(self.generator.row(target))
            .expect("a local group determines each of its members");
        Some(DecodeStep {
            coefficients: Coefficients::new(1, sources.len(), coefficients),
            sources,
            targets: vec![target],
        })
    }

    fn run_step(&self, step: &DecodeStep, units: &mut [&mut [u8]]) {
        let mut sources: Vec<&[u8]> = Vec::with_capacity(step.sources.len());
        let mut outputs: Vec<&mut [u8]> = Vec::with_capacity(step.targets.len());
        let mut next_source = step.sources.iter().peekable();
        let mut next_target = step.targets.iter().peekable();
        for (index, unit) in units.iter_mut().enumerate() {
            if next_source.peek() == Some(&&index) {
                next_source.next();
                sources.push(&**unit);
            } else if next_target.peek() == Some(&&index) {
                next_target.next();
                outputs.push(&mut **unit);
            }
        }
        assert!(sources.len() == step.sources.len() && outputs.len() == step.targets.len(), "plan indices");
        self.engine.combine(&step.coefficients, &sources, &mut outputs, Mode::Overwrite);
    }

    /// Whether the present units determine every lost one. A lost unit is
    /// determined iff its row is in the span of the present rows; when a data
    /// unit is lost that means all data is, i.e. the present rows have rank k,
    /// and when only parity is lost the present data rows already have rank k.
    pub(crate) fn is_decodable(&self, present: &[bool]) -> bool {
        let n = self.total_units();
        if present.len() != n {
            return false;
        }
        let lost = present.iter().filter(|&&p| !p).count();
        if lost == 0 {
            return true;
        }
        if lost > self.max_losses() {
            return false;
        }
        let mut basis = RowBasis::new(self.data_units);
        for unit in (0..n).filter(|&u| present[u]) {
            if basis.insert(self.generator.row(unit)) && basis.rank() == self.data_units {
                return true;
            }
        }
        false
    }

    fn check_unit(&self, unit: usize) -> Result<()> {
        if unit >= self.total_units() {
            return Err(CodecError::UnitOutOfRange { unit, total: self.total_units() });
        }
        Ok(())
    }

    /// See [`crate::ErasureCode::repair_coefficients`].
    pub(crate) fn repair_coefficients(&self, target: usize, sources: &[usize]) -> Result<Vec<u8>> {
        self.check_unit(target)?;
        let mut seen = UnitMask::default();
        seen.insert(target);
        for &source in sources {
            self.check_unit(source)?;
            if seen.contains(source) {
                return Err(CodecError::DuplicateUnit { unit: source });
            }
            seen.insert(source);
        }
        self.generator
            .select_rows(sources)
            .solve_left(self.generator.row(target))
            .ok_or(CodecError::Undecodable { lost: vec![target] })
    }

    /// See [`crate::ErasureCode::recovery_sets`]: local groups first (smallest
    /// first), then k-subsets of the other units, data-heavy first, keeping
    /// those that are minimal (independent, every coefficient nonzero). At
    /// most [`MAX_RECOVERY_SETS`] sets, after at most 64 candidates per set
    /// asked for (plus 4096).
    pub(crate) fn recovery_sets(&self, unit: usize, limit: usize) -> Result<Vec<Vec<usize>>> {
        self.check_unit(unit)?;
        let limit = limit.min(MAX_RECOVERY_SETS);
        let mut sets: Vec<Vec<usize>> = Vec::new();
        if limit == 0 {
            return Ok(sets);
        }
        let mut groups: Vec<&Vec<usize>> = self.local_groups.iter().filter(|g| g.contains(&unit)).collect();
        groups.sort_by_key(|g| g.len());
        for group in groups {
            let set: Vec<usize> = group.iter().copied().filter(|&u| u != unit).collect();
            if self.is_minimal_recovery_set(unit, &set) && !sets.contains(&set) {
                sets.push(set);
                if sets.len() == limit {
                    return Ok(sets);
                }
            }
        }
        // The subsets below are distinct from each other by construction; only a
        // local set can repeat among them (when a group has k members).
        let local_sets = sets.len();
        let k = self.data_units;
        let data: Vec<usize> = (0..k).filter(|&u| u != unit).collect();
        let parity: Vec<usize> = (k..self.total_units()).filter(|&u| u != unit).collect();
        let mut candidates_left = limit.saturating_mul(CANDIDATES_PER_SET).saturating_add(CANDIDATE_ALLOWANCE);
        visit_subsets_data_first(&data, &parity, k, |set| {
            candidates_left -= 1;
            if (self.mds || self.is_minimal_recovery_set(unit, set)) && !sets[..local_sets].iter().any(|s| s == set) {
                sets.push(set.to_vec());
            }
            if sets.len() == limit || candidates_left == 0 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        });
        // Spot check (the MDS path skips the per-set check; all of them would be slow in debug builds).
        debug_assert!(sets.iter().take(8).all(|s| self.is_minimal_recovery_set(unit, s)));
        Ok(sets)
    }

    /// Whether `set` determines `unit` and no proper subset does. For an
    /// independent set the combination is unique, so minimal means every
    /// coefficient is nonzero (a zero one could be dropped). A dependent set
    /// is never minimal: drop a member that is a combination of the others.
    fn is_minimal_recovery_set(&self, unit: usize, set: &[usize]) -> bool {
        let rows = self.generator.select_rows(set);
        if rows.rank() < set.len() {
            return false;
        }
        match rows.solve_left(self.generator.row(unit)) {
            Some(coefficients) => coefficients.iter().all(|&c| c != 0),
            None => false,
        }
    }
}

#[cfg(test)]
impl LinearCode {
    /// (sources, targets) of each step of the plan rebuilding every lost unit.
    pub(crate) fn plan_shape_for_test(&self, present: &[bool]) -> Vec<(Vec<usize>, Vec<usize>)> {
        let targets: Vec<usize> = (0..self.total_units()).filter(|&u| !present[u]).collect();
        let plan = self.build_plan(present, &targets).expect("decodable pattern");
        plan.steps.iter().map(|s| (s.sources.clone(), s.targets.clone())).collect()
    }
}

/// Calls `visit` with every `size`-subset of `data ∪ parity` (each sorted
/// ascending when both lists are), fewest parity units first, until it
/// breaks. Nothing is materialised beyond the current subset, so asking for
/// a few sets of a wide code is cheap.
pub(crate) fn visit_subsets_data_first(
    data: &[usize],
    parity: &[usize],
    size: usize,
    mut visit: impl FnMut(&[usize]) -> ControlFlow<()>,
) {
    let min_parity = size.saturating_sub(data.len());
    let max_parity = size.min(parity.len());
    let mut set = Vec::with_capacity(size);
    for parity_count in min_parity..=max_parity {
        let mut data_pick = Combination::first(data.len(), size - parity_count);
        while let Some(data_indices) = data_pick {
            let mut parity_pick = Combination::first(parity.len(), parity_count);
            while let Some(parity_indices) = parity_pick {
                set.clear();
                set.extend(data_indices.indices().iter().map(|&i| data[i]));
                set.extend(parity_indices.indices().iter().map(|&i| parity[i]));
                if visit(&set).is_break() {
                    return;
                }
                parity_pick = parity_indices.next();
            }
            data_pick = data_indices.next();
        }
    }
}

/// A `size`-combination of `0..of` in lexicographic order.
#[derive(Clone, Debug)]
pub(crate) struct Combination {
    of: usize,
    indices: Vec<usize>,
}

impl Combination {
    /// The first combination, or `None` when `size > of`.
    pub(crate) fn first(of: usize, size: usize) -> Option<Combination> {
        (size <= of).then(|| Combination { of, indices: (0..size).collect() })
    }

    pub(crate) fn indices(&self) -> &[usize] {
        &self.indices
    }

    /// The next combination, or `None` after the last.
    pub(crate) fn next(mut self) -> Option<Combination> {
        let size = self.indices.len();
        // The rightmost index that can still move right; everything after it restarts just behind it.
        let movable = (0..size).rev().find(|&i| self.indices[i] < self.of - size + i)?;
        self.indices[movable] += 1;
        for i in movable + 1..size {
            self.indices[i] = self.indices[i - 1] + 1;
        }
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_are_lexicographic_and_complete() {
        let mut all = Vec::new();
        let mut pick = Combination::first(5, 3);
        while let Some(c) = pick {
            all.push(c.indices().to_vec());
            pick = c.next();
        }
        assert_eq!(all.len(), 10);
        assert_eq!(all[0], vec![0, 1, 2]);
        assert_eq!(all[9], vec![2, 3, 4]);
        assert!(all.windows(2).all(|w| w[0] < w[1]));
        // The empty combination exists once; an impossible one not at all.
        assert!(Combination::first(3, 0).unwrap().next().is_none());
        assert!(Combination::first(2, 3).is_none());
    }

    #[test]
    fn subsets_come_data_heavy_first() {
        let mut seen = Vec::new();
        visit_subsets_data_first(&[0, 1, 2], &[3, 4], 3, |set| {
            seen.push(set.to_vec());
            ControlFlow::Continue(())
        });
        assert_eq!(seen.len(), 10);
        assert_eq!(seen[0], vec![0, 1, 2]);
        let parity_counts: Vec<usize> = seen.iter().map(|s| s.iter().filter(|&&u| u >= 3).count()).collect();
        assert!(parity_counts.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn unit_mask_holds_all_255_units() {
        let mut mask = UnitMask::default();
        for unit in [0, 63, 64, 200, 254] {
            mask.insert(unit);
        }
        assert!(mask.contains(254) && mask.contains(64) && !mask.contains(65) && !mask.contains(300));
    }
}
