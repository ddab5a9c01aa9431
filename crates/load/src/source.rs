//! Which workload a load run replays, and the caps that make it fit a loopback cluster.
//!
//! Owns: [`WorkloadSource`] (a `lowtail sim` config, a trace, or the WAS-like generator's
//! defaults), the overrides of the command line and [`LiveCaps`], and building the capped
//! [`Workload`]. Must not: touch the network or the file system beyond reading the config and the
//! trace (a bad source is refused before anything is written or sent).
//!
//! Why caps: the generator's defaults describe the paper's cluster (12 M objects of up to 64 MiB);
//! loading that into a loopback cluster would take hours and fill the disk. A live run therefore
//! clamps object sizes (`max_object_bytes`) and the generator's object count (`max_objects`).

use anyhow::{Context, ensure};
use std::path::PathBuf;
use workload::{WasLikeConfig, Workload, WorkloadConfig};

/// Largest object a live run loads unless told otherwise (sizes above are clamped).
pub const DEFAULT_MAX_OBJECT_BYTES: u64 = 1 << 20;
/// Most distinct objects of the WAS-like generator in a live run unless told otherwise.
pub const DEFAULT_MAX_OBJECTS: u64 = 2000;
/// Span of a generated live run without a config or `--duration-s` (the generator's own default is
/// an hour).
pub const DEFAULT_LIVE_DURATION_S: f64 = 60.0;
/// Span of a `--quick` run.
pub const QUICK_DURATION_S: f64 = 10.0;
/// Highest arrival rate of a `--quick` run (unless `--rate` says otherwise): a short run that a
/// debug build of a 2-core loopback cluster keeps up with.
pub const QUICK_MAX_RATE_PER_S: f64 = 100.0;

/// Where the requests come from.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadSource {
    /// A `lowtail sim` config (TOML): its `[workload]` and `seed` are used, the rest ignored.
    Config(PathBuf),
    /// A trace of `time, object_id, size` lines, its objects grouped into `partitions`.
    Trace {
        /// The trace file.
        path: PathBuf,
        /// Data partitions.
        partitions: u32,
    },
    /// The WAS-like generator with its defaults (and the caps).
    Generator,
}

/// Overrides and caps applied to the source's workload.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveCaps {
    /// Seed instead of the config's (the generator's default source uses 1).
    pub seed: Option<u64>,
    /// Span of the generator's arrivals, in seconds.
    pub duration_s: Option<f64>,
    /// The generator's arrival rate, requests per second.
    pub rate_per_s: Option<f64>,
    /// A ~10 s run (see [`QUICK_DURATION_S`], [`QUICK_MAX_RATE_PER_S`]).
    pub quick: bool,
    /// Object sizes (and request lengths) are clamped to this.
    pub max_object_bytes: u64,
    /// The generator's object count is clamped to this.
    pub max_objects: u64,
    /// Arrival times multiplied by this (> 1 slows the run down).
    pub time_scale: Option<f64>,
    /// The generator's Zipf exponent of object popularity instead of its own.
    pub zipf_exponent: Option<f64>,
}

impl Default for LiveCaps {
    fn default() -> LiveCaps {
        LiveCaps {
            seed: None,
            duration_s: None,
            rate_per_s: None,
            quick: false,
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
            max_objects: DEFAULT_MAX_OBJECTS,
            time_scale: None,
            zipf_exponent: None,
        }
    }
}

/// A workload ready to replay, with what the report says about it.
#[derive(Clone, Debug)]
pub struct LiveWorkload {
    /// The requests (arrival times already scaled).
    pub workload: Workload,
    /// The seed (object contents derive from it too).
    pub seed: u64,
    /// The generator's arrival rate after scaling, if the workload is generated.
    pub arrival_rate_per_s: Option<f64>,
}

fn positive(value: Option<f64>, flag: &str) -> anyhow::Result<()> {
    if let Some(value) = value {
        ensure!(value.is_finite() && value > 0.0, "{flag} must be a positive number, not {value}");
    }
    Ok(())
}

impl LiveCaps {
    fn validate(&self) -> anyhow::Result<()> {
        positive(self.duration_s, "--duration-s")?;
        positive(self.rate_per_s, "--rate")?;
        positive(self.time_scale, "--time-scale")?;
        positive(self.zipf_exponent, "the Zipf exponent")?;
        ensure!(self.max_object_bytes > 0, "--max-object-bytes must be at least 1");
        ensure!(self.max_objects > 0, "--max-objects must be at least 1");
        Ok(())
    }

    /// The generator's parameters with the overrides and caps applied.
    fn cap_generator(&self, mut config: WasLikeConfig, duration_default_s: Option<f64>) -> WasLikeConfig {
        if let Some(duration_s) = duration_default_s {
            config.duration_s = duration_s;
        }
        if self.quick {
            config.duration_s = QUICK_DURATION_S;
            config.rate_per_s = config.rate_per_s.min(QUICK_MAX_RATE_PER_S);
        }
        if let Some(duration_s) = self.duration_s {
            config.duration_s = duration_s;
        }
        if let Some(rate_per_s) = self.rate_per_s {
            config.rate_per_s = rate_per_s;
        }
        if let Some(exponent) = self.zipf_exponent {
            config.zipf_exponent = exponent;
        }
        config.objects = config.objects.min(self.max_objects);
        // Every partition needs an object; with few objects, fewer partitions (a live cluster places
        // objects itself, the partition is only a label in the records).
        config.partitions = config.partitions.min(u32::try_from(config.objects).unwrap_or(u32::MAX));
        let cap = self.max_object_bytes;
        config.sizes.max_bytes = config.sizes.max_bytes.min(cap);
        config.sizes.min_bytes = config.sizes.min_bytes.min(cap);
        config.sizes.median_bytes = config.sizes.median_bytes.min(cap);
        config
    }
}

/// Builds the workload of `source` with `caps` applied; every error names the file or the flag.
pub fn build_live_workload(source: &WorkloadSource, caps: &LiveCaps) -> anyhow::Result<LiveWorkload> {
    caps.validate()?;
    let (config, seed, duration_default_s) = match source {
        WorkloadSource::Config(path) => {
            let config = sim::SimConfig::from_toml_file(path)?;
            (config.workload, config.seed, None)
        }
        WorkloadSource::Trace { path, partitions } => {
            ensure!(*partitions > 0, "--partitions must be at least 1");
            ensure!(path.is_file(), "the trace {} does not exist", path.display());
            (WorkloadConfig::Trace { path: path.clone(), partitions: *partitions }, 1, None)
        }
        WorkloadSource::Generator => {
            (WorkloadConfig::WasLike(WasLikeConfig::default()), 1, Some(DEFAULT_LIVE_DURATION_S))
        }
    };
    let seed = caps.seed.unwrap_or(seed);
    let (config, arrival_rate_per_s) = match config {
        WorkloadConfig::WasLike(generator) => {
            let generator = caps.cap_generator(generator, duration_default_s);
            let rate = generator.rate_per_s;
            (WorkloadConfig::WasLike(generator), Some(rate))
        }
        trace @ WorkloadConfig::Trace { .. } => {
            ensure!(
                caps.duration_s.is_none() && caps.rate_per_s.is_none() && caps.zipf_exponent.is_none() && !caps.quick,
                "--duration-s, --rate, the Zipf exponent and --quick apply to the WAS-like generator, not to a trace (use --time-scale)"
            );
            (trace, None)
        }
    };
    let mut workload = config.build(seed).context("building the workload")?;
    for request in &mut workload.requests {
        request.length = request.length.min(caps.max_object_bytes);
    }
    ensure!(!workload.requests.is_empty(), "the workload has no request");
    let time_scale = caps.time_scale.unwrap_or(1.0);
    if time_scale != 1.0 {
        workload = workload.with_time_scale(time_scale);
    }
    workload.validate().map_err(|reason| anyhow::anyhow!("the workload is inconsistent: {reason}"))?;
    Ok(LiveWorkload { workload, seed, arrival_rate_per_s: arrival_rate_per_s.map(|rate| rate / time_scale) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_generator_is_capped_and_short() {
        let caps = LiveCaps { quick: true, max_objects: 300, max_object_bytes: 4096, ..LiveCaps::default() };
        let live = build_live_workload(&WorkloadSource::Generator, &caps).unwrap();
        let requests = live.workload.requests.len() as f64;
        // Poisson arrivals at 100/s for 10 s: 1000 ± a few standard deviations.
        assert!((850.0..1150.0).contains(&requests), "{requests} requests");
        assert!(live.workload.requests.iter().all(|r| r.length <= 4096 && r.object.0 < 300));
        assert!(live.workload.duration_ns <= 10_000_000_000);
        assert_eq!(live.arrival_rate_per_s, Some(100.0));
    }

    #[test]
    fn time_scale_stretches_arrivals_and_lowers_the_rate() {
        let caps = LiveCaps { quick: true, time_scale: Some(2.0), ..LiveCaps::default() };
        let plain = build_live_workload(&WorkloadSource::Generator, &LiveCaps { quick: true, ..LiveCaps::default() });
        let scaled = build_live_workload(&WorkloadSource::Generator, &caps).unwrap();
        let plain = plain.unwrap();
        assert_eq!(plain.workload.requests.len(), scaled.workload.requests.len());
        let last = |w: &LiveWorkload| w.workload.requests.last().unwrap().arrival_ns;
        assert!(last(&scaled).abs_diff(2 * last(&plain)) <= 1);
        assert_eq!(scaled.arrival_rate_per_s, Some(50.0));
    }

    #[test]
    fn bad_sources_and_flags_are_refused_with_their_names() {
        let missing = WorkloadSource::Trace { path: PathBuf::from("/nonexistent/trace.csv"), partitions: 4 };
        let error = format!("{:#}", build_live_workload(&missing, &LiveCaps::default()).unwrap_err());
        assert!(error.contains("/nonexistent/trace.csv"), "{error}");
        let config = WorkloadSource::Config(PathBuf::from("/nonexistent/sim.toml"));
        let error = format!("{:#}", build_live_workload(&config, &LiveCaps::default()).unwrap_err());
        assert!(error.contains("/nonexistent/sim.toml"), "{error}");
        let caps = LiveCaps { rate_per_s: Some(-1.0), ..LiveCaps::default() };
        let error = format!("{:#}", build_live_workload(&WorkloadSource::Generator, &caps).unwrap_err());
        assert!(error.contains("--rate"), "{error}");
    }
}
