//! A workload shaped like the Windows Azure Storage trace of Hu et al.
//! (section 3 and Fig. 2): N objects grouped at random into P equal
//! partitions, Zipf popularity, heavy-tailed sizes, Poisson arrivals, and
//! optional hot-spot drift.
//!
//! Defaults and why:
//! - `objects = 12_000_000`, `partitions = 2004`: the paper's trace and
//!   grouping. `duration_s = 3600`: "a typical peak hour".
//! - `zipf_exponent = 1.1` over objects: Fig. 2 shows "a small number of hot
//!   objects attract a large amount of requests while most objects are
//!   cold"; with s = 1.1 over 12 M objects the hottest object draws ~7 % of
//!   requests and the top 100 about a third, which makes the nodes holding
//!   them hot spots, the situation the paper studies. Random grouping of
//!   objects into partitions means partition popularity follows from the
//!   hot objects (`zipf_over = objects`); `partitions` draws partitions by
//!   Zipf instead (popularity across partitions). These are the generator's
//!   defaults, not the hu2017 experiment's: fitting Normal's latency shape
//!   to the paper's tables chose s = 0.3 at 1900 requests/s there, because
//!   at 1.1 the hottest nodes saturate before Normal's median request
//!   queues (docs/simulator.md, "The load level is fitted").
//! - Sizes are log-normal with median 32 KiB and σ = 1.5 (mean ≈ 100 KiB,
//!   p99 ≈ 1 MiB), clamped to [512 B, 64 MiB]: heavy-tailed like Fig. 2(b),
//!   small enough that one task's service is dominated by the per-task cost
//!   for most objects and by bytes for the tail. An object always has the
//!   same size (it is immutable) and every request reads it whole.
//! - `rate_per_s = 600`: a light load on the simulator's default 90 nodes
//!   (4 ms per task + 5 MB/s): RS(6,3) Normal at mean node load 0.15 with
//!   the other defaults (`cargo run --release -p sim --example sweep -- 600
//!   600 1 rs-6-3 normal`), so a config that changes nothing else runs
//!   stable and fast; set `rate_per_s` for the load level to study.
//! - No drift by default; `drift_period_s` re-draws which objects are hot
//!   every period (a new popularity permutation), modelling hot-spot drift.

use crate::Workload;
use crate::catalog::{Catalog, Permutation, mix64, unit_interval};
use model::{NANOS_PER_SECOND, ObjectId, PartitionId, ReadRequest, RequestId};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Zipf};
use serde::{Deserialize, Serialize};

/// Most requests one generated workload may hold (memory bound: ~48 bytes each).
pub const MAX_REQUESTS: u64 = 50_000_000;

/// What the Zipf popularity ranks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ZipfOver {
    /// Objects are ranked; partitions inherit the popularity of their objects.
    #[default]
    Objects,
    /// Partitions are ranked; objects within a partition are equally popular.
    Partitions,
}

/// Object sizes: log-normal, clamped.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SizeDistribution {
    /// Median size in bytes.
    pub median_bytes: u64,
    /// σ of the log of the size (1.5: heavy-tailed).
    pub sigma: f64,
    /// Smallest size.
    pub min_bytes: u64,
    /// Largest size.
    pub max_bytes: u64,
}

impl Default for SizeDistribution {
    fn default() -> SizeDistribution {
        SizeDistribution { median_bytes: 32 * 1024, sigma: 1.5, min_bytes: 512, max_bytes: 64 << 20 }
    }
}

impl SizeDistribution {
    /// The size of the object whose hash is `hash` (Box-Muller on two
    /// uniforms derived from it).
    pub fn size(&self, hash: u64) -> u64 {
        let u1 = unit_interval(hash);
        let u2 = unit_interval(mix64(hash));
        let normal = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let size = (self.median_bytes as f64) * (self.sigma * normal).exp();
        (size.round() as u64).clamp(self.min_bytes, self.max_bytes)
    }

    fn validate(&self) -> Result<(), String> {
        if self.min_bytes == 0 || self.min_bytes > self.max_bytes || self.median_bytes == 0 {
            return Err("sizes need 0 < min_bytes ≤ max_bytes and median_bytes > 0".into());
        }
        if !(self.sigma >= 0.0 && self.sigma.is_finite()) {
            return Err("sizes need a finite sigma ≥ 0".into());
        }
        Ok(())
    }
}

/// The WAS-like generator's parameters (defaults: see the module doc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WasLikeConfig {
    /// Objects N.
    pub objects: u64,
    /// Data partitions P.
    pub partitions: u32,
    /// Span of arrivals in seconds.
    pub duration_s: f64,
    /// Poisson arrival rate, requests per second.
    pub rate_per_s: f64,
    /// Zipf exponent s (> 0).
    pub zipf_exponent: f64,
    /// What the Zipf ranks.
    pub zipf_over: ZipfOver,
    /// Object sizes.
    pub sizes: SizeDistribution,
    /// Re-draw which objects are hot every this many seconds (0: never).
    pub drift_period_s: f64,
}

impl Default for WasLikeConfig {
    fn default() -> WasLikeConfig {
        WasLikeConfig {
            objects: 12_000_000,
            partitions: 2004,
            duration_s: 3600.0,
            rate_per_s: 600.0,
            zipf_exponent: 1.1,
            zipf_over: ZipfOver::Objects,
            sizes: SizeDistribution::default(),
            drift_period_s: 0.0,
        }
    }
}

impl WasLikeConfig {
    fn validate(&self) -> Result<(), String> {
        if self.partitions == 0 || self.objects < self.partitions as u64 {
            return Err(format!("{} objects cannot fill {} partitions", self.objects, self.partitions));
        }
        if !(self.duration_s > 0.0
            && self.duration_s.is_finite()
            && self.rate_per_s > 0.0
            && self.rate_per_s.is_finite())
        {
            return Err("duration_s and rate_per_s must be positive".into());
        }
        if self.duration_s * self.rate_per_s > MAX_REQUESTS as f64 {
            return Err(format!("about {} requests; at most {MAX_REQUESTS}", self.duration_s * self.rate_per_s));
        }
        if !(self.zipf_exponent > 0.0 && self.zipf_exponent.is_finite()) {
            return Err("zipf_exponent must be positive".into());
        }
        if !(self.drift_period_s >= 0.0 && self.drift_period_s.is_finite()) {
            return Err("drift_period_s must be ≥ 0".into());
        }
        self.sizes.validate()
    }
}

/// Generates the workload for `seed`.
pub fn generate(config: &WasLikeConfig, seed: u64) -> Result<Workload, String> {
    config.validate()?;
    let size_key = mix64(seed ^ 0x5153);
    let sizes = config.sizes;
    let size_of = move |object: ObjectId| sizes.size(mix64(object.0 ^ size_key));
    let catalog = Catalog::new(config.objects, config.partitions, mix64(seed ^ 0x6752), size_of);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let ranked = match config.zipf_over {
        ZipfOver::Objects => config.objects,
        ZipfOver::Partitions => config.partitions as u64,
    };
    let zipf = Zipf::new(ranked as f64, config.zipf_exponent).map_err(|e| format!("zipf: {e}"))?;
    let gap = Exp::new(config.rate_per_s / NANOS_PER_SECOND as f64).map_err(|e| format!("arrivals: {e}"))?;
    let duration_ns = (config.duration_s * NANOS_PER_SECOND as f64) as u64;
    let drift_ns = (config.drift_period_s * NANOS_PER_SECOND as f64) as u64;
    let popularity_for = |epoch: u64| Permutation::new(ranked, mix64(seed ^ 0x7a1f ^ epoch.wrapping_mul(0x9E37)));
    let mut epoch = 0;
    let mut popularity = popularity_for(epoch);
    let expected = (config.duration_s * config.rate_per_s) as usize;
    let mut requests = Vec::with_capacity(expected + expected / 50 + 16);
    let mut time = 0.0f64;
    loop {
        time += gap.sample(&mut rng);
        let arrival_ns = time as u64;
        if arrival_ns >= duration_ns {
            break;
        }
        if drift_ns > 0 && arrival_ns / drift_ns != epoch {
            epoch = arrival_ns / drift_ns;
            popularity = popularity_for(epoch);
        }
        let rank = (zipf.sample(&mut rng) as u64).clamp(1, ranked) - 1;
        let object = match config.zipf_over {
            ZipfOver::Objects => ObjectId(popularity.apply(rank)),
            ZipfOver::Partitions => {
                // A uniformly random object of the ranked partition: slot
                // position·P + partition, through the catalog's grouping.
                let partition = popularity.apply(rank);
                let positions = config.objects / config.partitions as u64;
                let position = rng.random_range(0..positions);
                let wanted = PartitionId(partition as u32);
                let object = catalog_object_at(&catalog, config, position, partition);
                debug_assert_eq!(catalog.locate(object).partition, wanted);
                object
            }
        };
        let location = catalog.locate(object);
        requests.push(ReadRequest {
            id: RequestId(requests.len() as u64),
            object,
            partition: location.partition,
            offset: location.offset,
            length: location.size,
            arrival_ns,
            class: 0,
            latency_class: 0,
        });
        assert!(requests.len() as u64 <= MAX_REQUESTS, "request bound");
    }
    let workload = Workload { partitions: config.partitions, requests, duration_ns };
    debug_assert!(workload.validate().is_ok());
    Ok(workload)
}

fn catalog_object_at<F: Fn(ObjectId) -> u64>(
    catalog: &Catalog<F>,
    config: &WasLikeConfig,
    position: u64,
    partition: u64,
) -> ObjectId {
    catalog.object_at(position * config.partitions as u64 + partition)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> WasLikeConfig {
        WasLikeConfig {
            objects: 20_000,
            partitions: 60,
            duration_s: 100.0,
            rate_per_s: 200.0,
            ..WasLikeConfig::default()
        }
    }

    #[test]
    fn poisson_rate_zipf_skew_and_sizes_are_as_configured() {
        let workload = generate(&small(), 1).unwrap();
        workload.validate().unwrap();
        let n = workload.requests.len() as f64;
        assert!((n - 20_000.0).abs() < 4.0 * 20_000f64.sqrt(), "{n} requests");
        let mut counts = std::collections::HashMap::new();
        for r in &workload.requests {
            *counts.entry(r.object).or_insert(0u32) += 1;
        }
        let top = *counts.values().max().unwrap() as f64 / n;
        // Zipf(1.1) over 20 000 objects: the top object has p = 1/H ≈ 0.13.
        assert!((0.09..0.18).contains(&top), "top object share {top}");
        let mut sizes: Vec<u64> = workload.requests.iter().map(|r| r.length).collect();
        sizes.sort_unstable();
        assert!(sizes.iter().all(|&s| (512..=64 << 20).contains(&s)));
        // The same object always has the same size and location.
        let first = workload.requests[0];
        assert!(
            workload
                .requests
                .iter()
                .filter(|r| r.object == first.object)
                .all(|r| r.length == first.length && r.offset == first.offset)
        );
    }

    #[test]
    fn same_seed_same_workload_and_different_seed_differs() {
        assert_eq!(generate(&small(), 3).unwrap(), generate(&small(), 3).unwrap());
        assert_ne!(generate(&small(), 3).unwrap(), generate(&small(), 4).unwrap());
    }

    #[test]
    fn drift_moves_the_hot_spot_and_partitions_mode_ranks_partitions() {
        let drifting = WasLikeConfig { drift_period_s: 50.0, ..small() };
        let workload = generate(&drifting, 1).unwrap();
        let hottest = |requests: &[ReadRequest]| {
            let mut counts = std::collections::HashMap::new();
            for r in requests {
                *counts.entry(r.object).or_insert(0u32) += 1;
            }
            counts.into_iter().max_by_key(|(o, c)| (*c, *o)).unwrap().0
        };
        let half = workload.requests.partition_point(|r| r.arrival_ns < 50 * NANOS_PER_SECOND);
        assert_ne!(hottest(&workload.requests[..half]), hottest(&workload.requests[half..]));
        let by_partition = WasLikeConfig { zipf_over: ZipfOver::Partitions, ..small() };
        let workload = generate(&by_partition, 1).unwrap();
        workload.validate().unwrap();
        let mut counts = vec![0u32; 60];
        for r in &workload.requests {
            counts[r.partition.index()] += 1;
        }
        let top = *counts.iter().max().unwrap() as f64 / workload.requests.len() as f64;
        assert!(top > 0.15, "top partition share {top}");
    }

    #[test]
    fn bad_parameters_are_refused() {
        for bad in [
            WasLikeConfig { objects: 10, ..small() },
            WasLikeConfig { rate_per_s: 0.0, ..small() },
            WasLikeConfig { zipf_exponent: -1.0, ..small() },
            WasLikeConfig { sizes: SizeDistribution { min_bytes: 0, ..SizeDistribution::default() }, ..small() },
        ] {
            assert!(generate(&bad, 1).is_err());
        }
    }
}
