//! JLWO's objective on flat arrays: the queues q_{i,j,d} (client rack i, storage rack j, class d)
//! at index (i·N + j)·D + d, their arrival rates Λ (5) and reserved bandwidths B_eff ((2)–(4),
//! with (3)'s sign corrected), the per-queue term of (16) and its derivatives, and the optimal
//! z per (client rack, class).
//!
//! Why z per (client rack, class), not per file as the paper writes: with z shared by all files
//! of (i, d), the class latency (15) collapses exactly to the per-queue sum (16)
//!
//! ```text
//! Σ_d C_d·T̄_d = Σ_{i,d} (C_d/λ_all)·[L_{i,d}·z_{i,d} + Σ_j (Λ_{i,j,d}/2)·f(z_{i,d}, Λ_{i,j,d}, B_eff_{i,j,d})]
//! ```
//!
//! (L_{i,d} = Σ_{r∈d} λ_{i,r,d}), so every sub-problem sees O(1) work per queue, and it is still a
//! valid bound (Lemma 1 holds for every z). With per-file z the paper's collapse is invalid and
//! each queue's term would need a sum over its files. The tightest per-file z is applied after
//! the solve, in the reported bounds.
//!
//! Owns: indexing, the objective and its pieces. Must not: change the solution (sub-problems
//! do), or produce NaN: an unstable queue makes the objective +∞.

use super::bound::{auxiliary_f, auxiliary_f_slopes, optimal_z_s};
use super::moments::{DelayMoments, delay_moments, delay_moments_with_slopes};
use super::{Instance, Solution};

/// A queue's term of the objective and its partial derivatives.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TermSlopes {
    /// (C_d/λ_all)·(Λ/2)·f; +∞ when the queue is unstable.
    pub value: f64,
    /// ∂value/∂Λ; +∞ when the queue cannot take more (unstable, or no bandwidth).
    pub per_arrival: f64,
    /// ∂value/∂B_eff (≤ 0); 0 for an idle queue.
    pub per_bandwidth: f64,
}

/// Arrival rates and reserved bandwidths of every queue, derived from a solution.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Loads {
    /// Λ_{i,j,d}, chunk requests per second.
    pub arrival: Vec<f64>,
    /// B_eff_{i,j,d}.
    pub reserved: Vec<f64>,
    /// b_eff_i: what the ToR of rack i has left for intra-rack traffic.
    pub intra_bandwidth: Vec<f64>,
}

/// The instance, with the sums every step needs computed once.
pub(crate) struct Model<'a> {
    pub instance: &'a Instance,
    pub racks: usize,
    pub classes: usize,
    pub code_n: usize,
    /// C_d/λ_all per class.
    pub class_scale: Vec<f64>,
    /// L_{i,d} = Σ_{r∈d} λ_{i,r,d} at i·D + d.
    pub client_class_rate: Vec<f64>,
    /// Σ_i L_{i,d} per class.
    pub class_rate: Vec<f64>,
    /// λ_all.
    pub total_rate: f64,
    /// `clients[client_starts[f]..client_starts[f+1]]`: the racks requesting file f (λ > 0).
    pub client_starts: Vec<u32>,
    pub clients: Vec<u32>,
}

impl<'a> Model<'a> {
    /// The model of a validated instance.
    pub fn new(instance: &'a Instance) -> Model<'a> {
        let racks = instance.rack_count;
        let classes = instance.class_weights.len();
        let mut client_class_rate = vec![0.0; racks * classes];
        let mut client_starts = vec![0u32];
        let mut clients = Vec::new();
        for file in &instance.files {
            for (client, &rate) in file.request_rates_per_s.iter().enumerate() {
                if rate > 0.0 {
                    client_class_rate[client * classes + file.class] += rate;
                    clients.push(client as u32);
                }
            }
            client_starts.push(clients.len() as u32);
        }
        let class_rate: Vec<f64> =
            (0..classes).map(|d| (0..racks).map(|i| client_class_rate[i * classes + d]).sum()).collect();
        let total_rate: f64 = class_rate.iter().sum();
        assert!(total_rate > 0.0, "a validated instance has requests");
        let class_scale = instance.class_weights.iter().map(|c| c / total_rate).collect();
        Model {
            instance,
            racks,
            classes,
            code_n: instance.code_n,
            class_scale,
            client_class_rate,
            class_rate,
            total_rate,
            client_starts,
            clients,
        }
    }

    pub fn queue_count(&self) -> usize {
        self.racks * self.racks * self.classes
    }

    pub fn queue(&self, client: usize, storage: usize, class: usize) -> usize {
        (client * self.racks + storage) * self.classes + class
    }

    /// (client rack, storage rack, class) of a queue index.
    pub fn queue_parts(&self, queue: usize) -> (usize, usize, usize) {
        let pair = queue / self.classes;
        (pair / self.racks, pair % self.racks, queue % self.classes)
    }

    /// Index of z_{i,d} (and of w_{i,d}, L_{i,d}) for a queue's client rack and class.
    fn client_class_of(&self, queue: usize) -> usize {
        (queue / (self.racks * self.classes)) * self.classes + queue % self.classes
    }

    pub fn file_clients(&self, file: usize) -> &[u32] {
        &self.clients[self.client_starts[file] as usize..self.client_starts[file + 1] as usize]
    }

    /// b_eff of `rack` under inter-rack weights W: b − B·Σ_d Σ_{l≠i}(W_{i,l,d} + W_{l,i,d}),
    /// the corrected (3): inter-rack traffic in *and* out of the rack holds ToR bandwidth.
    pub fn intra_bandwidth_bps(&self, inter_weights: &[f64], rack: usize) -> f64 {
        let mut used = 0.0;
        for other in (0..self.racks).filter(|&l| l != rack) {
            for class in 0..self.classes {
                used += inter_weights[self.queue(rack, other, class)] + inter_weights[self.queue(other, rack, class)];
            }
        }
        self.instance.tor_bandwidth_bps - self.instance.aggregation_bandwidth_bps * used
    }

    /// Λ of every queue from the solution's π, placement and the request rates, (5).
    pub fn fill_arrivals(&self, solution: &Solution, arrival: &mut Vec<f64>) {
        arrival.clear();
        arrival.resize(self.queue_count(), 0.0);
        let n = self.code_n;
        for (f, file) in self.instance.files.iter().enumerate() {
            let racks = &solution.racks[f * n..(f + 1) * n];
            for &client in self.file_clients(f) {
                let client = client as usize;
                let rate = file.request_rates_per_s[client];
                let schedule = solution.file_schedule(f, client);
                for (p, &rack) in racks.iter().enumerate() {
                    arrival[self.queue(client, rack as usize, file.class)] += rate * schedule[p];
                }
            }
        }
    }

    /// B_eff of every queue and b_eff of every rack from W and w, (2)–(4); an intra-rack
    /// queue's B_eff is min(w·b_eff, cap), (25) read as "a queue cannot use more than its port".
    pub fn fill_reserved(&self, solution: &Solution, reserved: &mut Vec<f64>, intra_bandwidth: &mut Vec<f64>) {
        reserved.clear();
        reserved.resize(self.queue_count(), 0.0);
        intra_bandwidth.clear();
        let big_b = self.instance.aggregation_bandwidth_bps;
        for rack in 0..self.racks {
            intra_bandwidth.push(self.intra_bandwidth_bps(&solution.inter_weights, rack));
        }
        for (queue, slot) in reserved.iter_mut().enumerate() {
            let (client, storage, class) = self.queue_parts(queue);
            *slot = if client == storage {
                // (25) as a cap on what the share can use, not a constraint on the share.
                let share = solution.intra_shares[client * self.classes + class];
                (share * intra_bandwidth[client].max(0.0)).min(self.instance.queue_bandwidth_max_bps)
            } else {
                big_b * solution.inter_weights[queue]
            };
        }
    }

    pub fn loads(&self, solution: &Solution) -> Loads {
        let mut loads = Loads::default();
        self.fill_arrivals(solution, &mut loads.arrival);
        self.fill_reserved(solution, &mut loads.reserved, &mut loads.intra_bandwidth);
        loads
    }

    pub fn queue_moments(&self, queue: usize, arrival: f64, reserved: f64) -> DelayMoments {
        let instance = self.instance;
        delay_moments(
            arrival,
            reserved,
            instance.aggregation_bandwidth_bps,
            &instance.service,
            &instance.connection[queue / self.classes],
        )
    }

    /// (Λ/(2λ_all))·f(z, Λ, B_eff) for queue `queue`, z its (client, class)'s: the queue's part
    /// of T̄_d, without C_d.
    pub fn class_term(&self, queue: usize, arrival: f64, reserved: f64, z: &[f64]) -> f64 {
        if arrival <= 0.0 {
            return 0.0;
        }
        let moments = self.queue_moments(queue, arrival, reserved);
        if !moments.is_finite() {
            return f64::INFINITY;
        }
        let z = z[self.client_class_of(queue)];
        0.5 * arrival / self.total_rate * auxiliary_f(moments.mean_s - z, moments.variance_s2)
    }

    /// C_d times [`Model::class_term`]: the queue's part of the objective. An unstable queue
    /// costs +∞ even when C_d = 0: (19) keeps every class stable, however unimportant.
    pub fn term(&self, queue: usize, arrival: f64, reserved: f64, z: &[f64]) -> f64 {
        let raw = self.class_term(queue, arrival, reserved, z);
        if raw.is_finite() { self.instance.class_weights[queue % self.classes] * raw } else { raw }
    }

    pub fn term_slopes(&self, queue: usize, arrival: f64, reserved: f64, z: &[f64]) -> TermSlopes {
        let instance = self.instance;
        let scale = self.class_scale[queue % self.classes];
        let z = z[self.client_class_of(queue)];
        let slopes = delay_moments_with_slopes(
            arrival.max(0.0),
            reserved,
            instance.aggregation_bandwidth_bps,
            &instance.service,
            &instance.connection[queue / self.classes],
        );
        let moments = slopes.moments;
        if arrival <= 0.0 {
            // d(Λf)/dΛ at Λ = 0 is f itself: the price of the first chunk sent here.
            let per_arrival = if moments.is_finite() {
                0.5 * scale * auxiliary_f(moments.mean_s - z, moments.variance_s2)
            } else {
                f64::INFINITY
            };
            return TermSlopes { value: 0.0, per_arrival, per_bandwidth: 0.0 };
        }
        if !moments.is_finite() {
            return TermSlopes { value: f64::INFINITY, per_arrival: f64::INFINITY, per_bandwidth: f64::NEG_INFINITY };
        }
        let (f, per_excess, per_variance) = auxiliary_f_slopes(moments.mean_s - z, moments.variance_s2);
        TermSlopes {
            value: 0.5 * scale * arrival * f,
            per_arrival: 0.5
                * scale
                * (f + arrival * (per_excess * slopes.mean_per_arrival + per_variance * slopes.variance_per_arrival)),
            per_bandwidth: 0.5
                * scale
                * arrival
                * (per_excess * slopes.mean_per_bandwidth + per_variance * slopes.variance_per_bandwidth),
        }
    }

    /// The objective Σ_d C_d·T̄_d with z per (client rack, class); +∞ if a loaded queue is
    /// unstable (whatever its C_d).
    pub fn objective(&self, loads: &Loads, z: &[f64]) -> f64 {
        let mut total = 0.0;
        for (index, &rate) in self.client_class_rate.iter().enumerate() {
            total += self.class_scale[index % self.classes] * rate * z[index];
        }
        for queue in 0..self.queue_count() {
            total += self.term(queue, loads.arrival[queue], loads.reserved[queue], z);
        }
        total
    }

    /// T̄_d of (15) per class (weighted by λ/λ_all, not normalised per class), with z per
    /// (client rack, class).
    pub fn class_bounds(&self, loads: &Loads, z: &[f64]) -> Vec<f64> {
        let mut bounds = vec![0.0; self.classes];
        for (index, &rate) in self.client_class_rate.iter().enumerate() {
            bounds[index % self.classes] += rate * z[index] / self.total_rate;
        }
        for queue in 0..self.queue_count() {
            bounds[queue % self.classes] += self.class_term(queue, loads.arrival[queue], loads.reserved[queue], z);
        }
        bounds
    }

    /// The optimal z_{i,d} for every (client rack, class): Theorem 1's equation with weights
    /// Λ_{i,j,d}/L_{i,d} (they sum to k). 0 for a pair with no requests.
    pub fn optimise_z(&self, loads: &Loads, z: &mut [f64]) {
        let mut weights = Vec::with_capacity(self.racks);
        let mut moments = Vec::with_capacity(self.racks);
        for client in 0..self.racks {
            for class in 0..self.classes {
                let rate = self.client_class_rate[client * self.classes + class];
                if rate <= 0.0 {
                    z[client * self.classes + class] = 0.0;
                    continue;
                }
                weights.clear();
                moments.clear();
                for storage in 0..self.racks {
                    let queue = self.queue(client, storage, class);
                    weights.push(loads.arrival[queue] / rate);
                    moments.push(self.queue_moments(queue, loads.arrival[queue], loads.reserved[queue]));
                }
                z[client * self.classes + class] = optimal_z_s(&weights, &moments);
            }
        }
    }
}
