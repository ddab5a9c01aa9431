//! Which units determine a target unit: the code's answer to "can these units rebuild that one,
//! and from which of them". Pure functions over an [`ErasureCode`]; the execution core asks them
//! when a quorum may be complete, the gateway when it chooses what to read for a repair.
//!
//! Must not: do I/O, read clocks or hold state.

use codec::{CodeSpec, ErasureCode};

/// How many recovery sets of the code are considered before falling back to every present unit.
pub const RECOVERY_SETS_CONSIDERED: usize = 64;

/// The units to read to rebuild unit `target` from the units flagged in `present` ("Normal" policy
/// of Hu et al.): the cheapest of the code's minimal recovery sets (an LRC's local group first)
/// whose units are all present; when none is, every present unit if together they determine the
/// target; `None` when the target cannot be rebuilt from what is present. Never the target itself.
pub fn recovery_units(code: &dyn ErasureCode, present: &[bool], target: usize) -> Option<Vec<usize>> {
    assert_eq!(present.len(), code.total_units(), "one present flag per unit");
    let usable = |unit: &usize| *unit != target && present[*unit];
    if let Ok(sets) = code.recovery_sets(target, RECOVERY_SETS_CONSIDERED)
        && let Some(set) = sets.into_iter().find(|set| set.iter().all(usable))
    {
        return Some(set);
    }
    let all: Vec<usize> = (0..present.len()).filter(usable).collect();
    if !all.is_empty() && code.repair_coefficients(target, &all).is_ok() { Some(all) } else { None }
}

/// Whether the units flagged in `present` give unit `target`: it is among them, or they rebuild
/// it (its generator row is in their span: one small solve, no search of recovery sets). For
/// Reed-Solomon (MDS) any k distinct units do, which needs no algebra at all.
pub fn determines(code: &dyn ErasureCode, present: &[bool], target: usize) -> bool {
    if present[target] {
        return true;
    }
    match code.spec() {
        CodeSpec::Rs { k, .. } => present.iter().filter(|&&p| p).count() >= k,
        _ => {
            let units: Vec<usize> = (0..present.len()).filter(|&u| present[u]).collect();
            !units.is_empty() && code.repair_coefficients(target, &units).is_ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(name: &str) -> Box<dyn ErasureCode> {
        name.parse::<CodeSpec>().unwrap().build().unwrap()
    }

    #[test]
    fn rs_reads_any_k_present_units() {
        let rs = code("rs-6-3");
        let mut present = vec![true; 9];
        present[2] = false;
        present[7] = false;
        let set = recovery_units(rs.as_ref(), &present, 2).unwrap();
        assert_eq!(set.len(), 6);
        assert!(set.iter().all(|&u| u != 2 && u != 7));
        assert!(determines(rs.as_ref(), &present, 2));
        present[0] = false;
        present[1] = false;
        assert_eq!(recovery_units(rs.as_ref(), &present, 2), None, "only 5 units left");
        assert!(!determines(rs.as_ref(), &present, 2));
        present[2] = true;
        assert!(determines(rs.as_ref(), &present, 2), "the target itself");
    }

    #[test]
    fn lrc_prefers_the_local_group_and_falls_back_to_globals() {
        let lrc = code("lrc-6-2-2");
        let present = vec![true; 10];
        let local = recovery_units(lrc.as_ref(), &present, 0).unwrap();
        assert_eq!(local.len(), 3, "local group of unit 0: {local:?}");
        let mut without_peer = present.clone();
        without_peer[local[0]] = false;
        let global = recovery_units(lrc.as_ref(), &without_peer, 0).unwrap();
        assert!(global.len() >= 6 && !global.contains(&local[0]), "{global:?}");
    }

    #[test]
    fn determines_agrees_with_the_search_for_every_pattern() {
        for name in ["rs-4-2", "lrc-4-2-1"] {
            let code = code(name);
            let n = code.total_units();
            for mask in 0u32..(1 << n) {
                let present: Vec<bool> = (0..n).map(|u| mask & (1 << u) != 0).collect();
                for target in 0..n {
                    let searched = present[target] || recovery_units(code.as_ref(), &present, target).is_some();
                    let said = determines(code.as_ref(), &present, target);
                    assert_eq!(said, searched, "{name}: {present:?} -> {target}");
                }
            }
        }
    }
}
