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
//! A file not placed yet ([`place_new_file`], a new stripe) gets the same matching: its chunk
//! columns all carry the uniform π = k/n (nothing is known of its reads), so the Hungarian method's
//! assignment is the n racks where a chunk adds least to the objective, given Λ, W, w and z as they
//! stand: a class-d file goes where class d's queues have room.
//!
//! Owns: the placement and the matching update of Λ. Must not: change π's values, W, w or z.

use super::hungarian::{Workspace, assign};
use super::model::{Loads, Model};
use super::{Instance, JlwoError, Solution};

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

/// The n racks, best first, for a new file of `class` read at `request_rates_per_s` (per client
/// rack) with uniform π, placed into `solution` as it stands (see the module documentation): the
/// racks whose class-`class` queues grow the objective least when each requesting rack sends them
/// its k/n of the file's reads. JLWO reserves no bandwidth for a queue nobody reads, so a rack
/// where the file would load such a queue (or saturate one) has no finite cost: such racks come
/// after every finite one, the least class-`class` load first (the next solve reserves for the
/// file's reads there). Fewer racks than n is an error.
pub fn place_new_file(
    instance: &Instance,
    solution: &Solution,
    class: usize,
    request_rates_per_s: &[f64],
) -> Result<Vec<u32>, JlwoError> {
    let racks = instance.rack_count;
    if class >= instance.class_count() {
        return Err(JlwoError::InvalidInstance(format!("class {class} of {}", instance.class_count())));
    }
    if request_rates_per_s.len() != racks || request_rates_per_s.iter().any(|r| !(r.is_finite() && *r >= 0.0)) {
        return Err(JlwoError::InvalidInstance(format!("one finite rate ≥ 0 per rack ({racks}) is needed")));
    }
    if racks < instance.code_n {
        return Err(JlwoError::InvalidInstance(format!("{racks} racks for {} chunks", instance.code_n)));
    }
    let model = Model::new(instance);
    let loads = model.loads(solution);
    let share = instance.code_k as f64 / instance.code_n as f64;
    let z = &solution.z_s;
    let mut ranked: Vec<(f64, f64, u32)> = (0..racks)
        .map(|target| {
            let queues = (0..racks).map(|client| (client, model.queue(client, target, class)));
            let load: f64 = queues.clone().map(|(_, queue)| loads.arrival[queue]).sum();
            let added: f64 = queues
                .filter(|&(client, _)| request_rates_per_s[client] > 0.0)
                .map(|(client, queue)| {
                    let (arrival, reserved) = (loads.arrival[queue], loads.reserved[queue]);
                    let after = model.term(queue, arrival + request_rates_per_s[client] * share, reserved, z);
                    after - model.term(queue, arrival, reserved, z)
                })
                .sum();
            // ∞ − ∞ (a queue already unstable) is NaN: no finite cost either.
            (if added.is_finite() { added } else { f64::INFINITY }, load, target as u32)
        })
        .collect();
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
    Ok(ranked.iter().take(instance.code_n).map(|&(_, _, rack)| rack).collect())
}
