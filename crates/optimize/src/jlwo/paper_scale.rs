//! The paper's §V-C problem at its scale, as one instance the tests, the benchmark and callers
//! that want a realistic JLWO problem share: N = 10 racks, (7,4), two classes of 1 000 files,
//! requests from every rack with random weights. Must not: be used as a default anywhere (the
//! topology is a consistent stand-in for the published one).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{ConnectionDelay, FileDemand, Instance, ServiceMoments};

/// The paper's §V-C scale with a consistent topology (the published B = 96 Gbit/s and
/// b = 792 Mbit/s leave b_eff < 0 under (3)): B = 40, b = 9.6, port cap 1 (Gbit/s); 25 MB chunks
/// (a 100 MB file over k = 4) take 5 ms at B; requests from every rack with random weights.
pub fn paper_scale_instance(c2: f64, seed: u64) -> Instance {
    let racks = 10;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let files_per_class = 1000;
    let total_rate = 12.0;
    let mut files = Vec::new();
    for f in 0..2 * files_per_class {
        let mut all: Vec<u32> = (0..racks as u32).collect();
        for i in 0..7 {
            let j = rng.random_range(i..racks);
            all.swap(i, j);
        }
        all.truncate(7);
        let weights: Vec<f64> = (0..racks).map(|_| rng.random_range(0.0..1.0f64).powi(3)).collect();
        let sum: f64 = weights.iter().sum();
        let file_rate = total_rate / (2 * files_per_class) as f64;
        files.push(FileDemand {
            class: f % 2,
            racks: all,
            request_rates_per_s: weights.iter().map(|w| file_rate * w / sum).collect(),
        });
    }
    Instance {
        rack_count: racks,
        aggregation_bandwidth_bps: 40e9,
        tor_bandwidth_bps: 9.6e9,
        queue_bandwidth_max_bps: 1e9,
        class_weights: vec![1.0, c2],
        service: ServiceMoments::shifted_exponential(0.004, 0.001),
        connection: Instance::connection_intra_inter(
            racks,
            ConnectionDelay { mean_s: 0.0005, variance_s2: 0.0005f64.powi(2) },
            ConnectionDelay { mean_s: 0.002, variance_s2: 0.002f64.powi(2) },
        ),
        code_n: 7,
        code_k: 4,
        files,
    }
}
