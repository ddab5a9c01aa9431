//! The placement sub-problem of JLWO (Lemma 5): with W, w, z and every π fixed, move file r's
//! chunks by a permutation β of the racks. Rows of the matching are the N columns of r's π
//! (one per rack; racks outside S_r give empty columns), columns are the racks, and the cost of
//! putting column j on rack j′ is, for class d (the clean form of the paper's garbled (29)):
//!
//! ```text
//! K[j][j′] = Σ_{i: λ_{i,r,d} > 0} C_d·(Λ⁻ʳ_{i,j′,d} + λ_{i,r,d}·π_{i,j,r,d})/(2λ_all) · f(z_{i,d}, Λ⁻ʳ_{i,j′,d} + λ_{i,r,d}·π_{i,j,r,d}, B_eff_{i,j′,d})
//! ```
//!
//! Each rack j′ takes exactly one column, so Σ_j K[j][β(j)] is the whole class-d objective after
//! the move, up to the terms of client racks that do not request r (the same for every β): the
//! Hungarian method finds the best β exactly. A file moves only if β strictly beats staying.
//!
//! S_r after the move is the image β(S_r), not the paper's "racks with a non-zero column": a
//! chunk no client reads (an all-zero column inside S_r) still exists, and dropping it would leave
//! |S_r| < n, breaking (21). π is stored by position in S_r, so a move only relabels racks.
//!
//! Owns: the placement and the matching update of Λ. Must not: change π's values, W, w or z.

use super::Solution;
use super::hungarian::{Workspace, assign};
use super::model::{Loads, Model};

/// A move must beat staying by this share of the cost: ties keep the chunks where they are
/// (moving them is not free, though JLWO does not price it).
const IMPROVEMENT_RELATIVE: f64 = 1e-12;

/// One pass over all files in order; Λ in `loads` is kept current. Returns the files moved.
pub(crate) fn improve_placement(model: &Model, solution: &mut Solution, loads: &mut Loads, z: &[f64]) -> u32 {
    let (racks, n) = (model.racks, model.code_n);
    let mut costs = vec![0.0; racks * racks];
    // Λ⁻ʳ per (requesting client, rack), row-major over the file's clients.
    let mut without = Vec::new();
    let mut empty_row = vec![0.0; racks];
    let mut position_of_rack = vec![usize::MAX; racks];
    let mut columns = vec![0usize; racks];
    let mut workspace = Workspace::default();
    let mut moved = 0;
    for (f, file) in model.instance.files.iter().enumerate() {
        let clients = model.file_clients(f);
        if clients.is_empty() {
            continue;
        }
        let class = file.class;
        let file_racks = &solution.racks[f * n..(f + 1) * n];
        position_of_rack.iter_mut().for_each(|p| *p = usize::MAX);
        for (p, &rack) in file_racks.iter().enumerate() {
            position_of_rack[rack as usize] = p;
        }
        without.clear();
        for &client in clients {
            let client = client as usize;
            let rate = file.request_rates_per_s[client];
            let schedule = solution.file_schedule(f, client);
            for (rack, &position) in position_of_rack.iter().enumerate() {
                let arrival = loads.arrival[model.queue(client, rack, class)];
                let own = match position {
                    usize::MAX => 0.0,
                    p => rate * schedule[p],
                };
                without.push((arrival - own).max(0.0));
            }
        }
        // The cost of rack j′ holding no chunk of r: the same for every empty column.
        for (target, slot) in empty_row.iter_mut().enumerate() {
            *slot = clients
                .iter()
                .enumerate()
                .map(|(c, &client)| {
                    let queue = model.queue(client as usize, target, class);
                    model.term(queue, without[c * racks + target], loads.reserved[queue], z)
                })
                .sum();
        }
        for source in 0..racks {
            let row = &mut costs[source * racks..(source + 1) * racks];
            let p = position_of_rack[source];
            if p == usize::MAX {
                row.copy_from_slice(&empty_row);
                continue;
            }
            for (target, slot) in row.iter_mut().enumerate() {
                *slot = clients
                    .iter()
                    .enumerate()
                    .map(|(c, &client)| {
                        let client = client as usize;
                        let queue = model.queue(client, target, class);
                        let own = file.request_rates_per_s[client] * solution.file_schedule(f, client)[p];
                        model.term(queue, without[c * racks + target] + own, loads.reserved[queue], z)
                    })
                    .sum();
            }
        }
        let staying: f64 = (0..racks).map(|j| costs[j * racks + j]).sum();
        let Ok(best) = assign(&costs, racks, &mut workspace, &mut columns) else {
            // Only staying is feasible would still be an assignment: infeasible means the current
            // point itself is not, which the caller's acceptance test catches.
            continue;
        };
        let improves = best < staying - IMPROVEMENT_RELATIVE * staying.abs();
        if !improves {
            continue;
        }
        // Apply: loads without r everywhere r was, then r's columns at their new racks.
        for (c, &client) in clients.iter().enumerate() {
            for &rack in file_racks {
                let queue = model.queue(client as usize, rack as usize, class);
                loads.arrival[queue] = without[c * racks + rack as usize];
            }
        }
        for p in 0..n {
            solution.racks[f * n + p] = columns[solution.racks[f * n + p] as usize] as u32;
        }
        for &client in clients {
            let client = client as usize;
            let rate = file.request_rates_per_s[client];
            for p in 0..n {
                let queue = model.queue(client, solution.racks[f * n + p] as usize, class);
                loads.arrival[queue] += rate * solution.file_schedule(f, client)[p];
            }
        }
        moved += 1;
    }
    moved
}
