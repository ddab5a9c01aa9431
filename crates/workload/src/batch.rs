//! Multi-object ("batch") read workloads, for reproducing EC-Store (Abebe et
//! al., section VI-B): YCSB-E range scans over ordered keys, a Wikipedia-like
//! workload where a request is the set of images on one page, and replay of a
//! batch trace with request ids.
//!
//! A batch is a list of distinct block indices read together. A closed-loop
//! simulator calls [`BatchGenerator::next_batch`] each time a client issues
//! its next batch; the generator decides what is read, never when (clients
//! have zero think time in the paper, so arrival times are the simulator's).
//! Both generated workloads switch popularity at `change_at_ns`, the paper's
//! "workload change": uniform during the warm-up, Zipf afterwards.
//!
//! Owns: the block catalog of a batch workload (every block's size, by
//! index), the page → images relation, and the batch trace format. Must not:
//! read a clock, draw unseeded random numbers (the build is a function of the
//! seed, each batch a function of the rng passed in), place blocks (that is
//! the executor's), or loop without a bound.

#[cfg(test)]
mod tests;

use crate::catalog::mix64;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Pareto, Zipf};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Most blocks a generated workload may have: their sizes are held in memory
/// (8 bytes each, 800 MB at the bound), and the bound catches unit mistakes.
pub const MAX_BLOCKS: u32 = 100_000_000;

/// Most page → image entries a page workload may hold (4 bytes each, 1 GiB
/// at the bound). The paper's configuration needs about 2 million.
pub const MAX_PAGE_ENTRIES: usize = 1 << 28;

/// Draws a page may spend per image it wants before it settles for fewer:
/// distinct draws from a small, skewed pool can take arbitrarily long (a
/// coupon collector), and a build must finish.
const DRAWS_PER_IMAGE: u32 = 16;

/// `change_at_ns` meaning "never switch to Zipf".
pub const NEVER: u64 = u64::MAX;

/// YCSB-E-like scans over ordered keys, one block per key: a scan reads keys
/// `start..start + len`, `len` uniform in `[1, max_scan_length]` (YCSB-E's
/// default scan length distribution), clamped at the last key.
///
/// The start key is uniform before `change_at_ns` (the paper's 20-minute
/// warm-up) and Zipf from then on (its measured phase, "a power law
/// distribution (with default exponent 1) to effect workload change").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct YcsbEConfig {
    /// Keys `0..blocks`, in order; the paper loads 1 million.
    pub blocks: u32,
    /// Size of every block (fixed): the paper's default is 100 KB; it also
    /// runs 10 KB and 1 MB.
    pub block_bytes: u64,
    /// Longest scan, in keys (YCSB's default 100).
    pub max_scan_length: u32,
    /// Zipf exponent of the start key's popularity after the change (paper: 1).
    pub zipf_exponent: f64,
    /// YCSB's scrambled Zipfian: popularity rank r (0-based) is key
    /// FNV-1a-64(r) mod `blocks`, so the hot start keys are spread over the
    /// key space. `false`: rank r is key r, so the hot scans overlap on the
    /// lowest keys.
    pub scrambled: bool,
    /// From this time the start key is Zipf; before it, uniform. [`NEVER`]
    /// (u64::MAX) never switches. TOML cannot hold u64::MAX (its integers are
    /// i64): any time past the run's end never switches either.
    pub change_at_ns: u64,
}

impl YcsbEConfig {
    /// The paper's YCSB-E setup: 1 million 100 KB blocks, scans of up to 100
    /// keys, Zipf exponent 1 after `change_at_ns`.
    ///
    /// `scrambled: false` is a choice: the paper does not say, and YCSB's own
    /// `zipfian` request distribution scrambles. Unscrambled keeps the hot
    /// scans overlapping on one contiguous range of keys, the strongest
    /// co-access, which is what EC-Store's movement exploits; set
    /// `scrambled` to compare.
    pub fn paper(change_at_ns: u64) -> YcsbEConfig {
        YcsbEConfig {
            blocks: 1_000_000,
            block_bytes: 100_000,
            max_scan_length: 100,
            zipf_exponent: 1.0,
            scrambled: false,
            change_at_ns,
        }
    }

    fn validate(&self) -> Result<(), BatchWorkloadError> {
        if self.blocks == 0 {
            return Err(config_error("blocks", "must be at least 1"));
        }
        if self.blocks > MAX_BLOCKS {
            return Err(config_error("blocks", format!("{} is more than {MAX_BLOCKS}", self.blocks)));
        }
        if self.block_bytes == 0 {
            return Err(config_error("block_bytes", "must be at least 1"));
        }
        if self.max_scan_length == 0 || self.max_scan_length > self.blocks {
            return Err(config_error(
                "max_scan_length",
                format!("{} is outside 1..={} (blocks)", self.max_scan_length, self.blocks),
            ));
        }
        check_exponent("zipf_exponent", self.zipf_exponent)
    }
}

/// A Wikipedia-like workload: a request is the set of images on one page
/// (the paper replays a Wikipedia image trace; this generates one of its
/// published shape).
///
/// The paper gives: page popularity follows Zipf, the number of images on a
/// page and image sizes follow power laws, the median page has about 10
/// images and the median image is about 500 KB. The power law's shape is not
/// published: both counts and sizes are Pareto with shape
/// `power_law_shape`, scale chosen so that the median is the configured
/// median (median = x_m · 2^(1/α)), capped at the maximum (a cap rather than
/// a re-draw keeps the median exact). Pages draw their images from a shared
/// pool by Zipf (`image_popularity_exponent`), so popular images appear on
/// many pages; a page's images are distinct.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageConfig {
    /// Pages.
    pub pages: u32,
    /// Images in the pool (the blocks); pages share them.
    pub images: u32,
    /// Median images on a page (paper: about 10).
    pub images_per_page_median: u32,
    /// Most images on a page (at most `images`).
    pub images_per_page_max: u32,
    /// Median image size in bytes (paper: about 500 KB).
    pub image_bytes_median: u64,
    /// Largest image in bytes.
    pub image_bytes_max: u64,
    /// Pareto shape α of both the images per page and the image sizes (not
    /// published; 1.5 by default: heavy-tailed with a finite mean).
    pub power_law_shape: f64,
    /// Zipf exponent by which pages draw their images from the pool: higher
    /// shares the popular images among more pages.
    pub image_popularity_exponent: f64,
    /// Zipf exponent of page popularity after the change.
    pub zipf_exponent: f64,
    /// From this time pages are chosen by Zipf; before it, uniformly.
    /// [`NEVER`] (u64::MAX) never switches.
    pub change_at_ns: u64,
}

impl PageConfig {
    /// The paper's medians (10 images a page, 500 KB an image) over 100 000
    /// pages and a pool of 500 000 images, pages of up to 200 images, images
    /// of up to 20 MB, shape 1.5, Zipf exponent 1 for image sharing and for
    /// page popularity after `change_at_ns`. Only the medians and the Zipf
    /// page popularity are the paper's; the rest are this generator's
    /// choices.
    pub fn paper(change_at_ns: u64) -> PageConfig {
        PageConfig {
            pages: 100_000,
            images: 500_000,
            images_per_page_median: 10,
            images_per_page_max: 200,
            image_bytes_median: 500_000,
            image_bytes_max: 20_000_000,
            power_law_shape: 1.5,
            image_popularity_exponent: 1.0,
            zipf_exponent: 1.0,
            change_at_ns,
        }
    }

    fn validate(&self) -> Result<(), BatchWorkloadError> {
        if self.pages == 0 {
            return Err(config_error("pages", "must be at least 1"));
        }
        if self.pages as usize > MAX_PAGE_ENTRIES {
            return Err(config_error("pages", format!("{} is more than {MAX_PAGE_ENTRIES}", self.pages)));
        }
        if self.images == 0 {
            return Err(config_error("images", "must be at least 1"));
        }
        if self.images > MAX_BLOCKS {
            return Err(config_error("images", format!("{} is more than {MAX_BLOCKS}", self.images)));
        }
        if self.images_per_page_median == 0 {
            return Err(config_error("images_per_page_median", "must be at least 1"));
        }
        if self.images_per_page_median > self.images_per_page_max {
            return Err(config_error(
                "images_per_page_median",
                format!(
                    "{} is more than images_per_page_max {}",
                    self.images_per_page_median, self.images_per_page_max
                ),
            ));
        }
        if self.images_per_page_max > self.images {
            return Err(config_error(
                "images_per_page_max",
                format!("{} is more than the {} images of the pool", self.images_per_page_max, self.images),
            ));
        }
        if self.image_bytes_median == 0 {
            return Err(config_error("image_bytes_median", "must be at least 1"));
        }
        if self.image_bytes_median > self.image_bytes_max {
            return Err(config_error(
                "image_bytes_median",
                format!("{} is more than image_bytes_max {}", self.image_bytes_median, self.image_bytes_max),
            ));
        }
        check_exponent("power_law_shape", self.power_law_shape)?;
        check_exponent("image_popularity_exponent", self.image_popularity_exponent)?;
        check_exponent("zipf_exponent", self.zipf_exponent)
    }
}

/// A parsed batch trace (see [`read_batch_trace`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchTrace {
    /// Batches in trace order, each a list of distinct block indices.
    pub batches: Vec<Vec<u32>>,
    /// `block_bytes[block]`: the size of every block, by index.
    pub block_bytes: Vec<u64>,
    /// `arrival_ns[i]`: the time of batch i's first line (open-loop replays
    /// may use it; closed-loop clients ignore it).
    pub arrival_ns: Vec<u64>,
}

impl BatchTrace {
    fn validate(&self) -> Result<(), BatchWorkloadError> {
        let error = |reason: String| Err(BatchWorkloadError::Trace(reason));
        if self.batches.is_empty() {
            return error("no batch".into());
        }
        if self.arrival_ns.len() != self.batches.len() {
            return error(format!("{} arrival times for {} batches", self.arrival_ns.len(), self.batches.len()));
        }
        if self.block_bytes.len() > MAX_BLOCKS as usize {
            return error(format!("{} blocks; at most {MAX_BLOCKS}", self.block_bytes.len()));
        }
        if let Some(block) = self.block_bytes.iter().position(|&bytes| bytes == 0) {
            return error(format!("block {block} has 0 bytes"));
        }
        let blocks = self.block_bytes.len();
        // `seen[block] == batch + 1` when the block is already in this batch:
        // a duplicate check in O(1) per entry without clearing between batches.
        let mut seen = vec![0usize; blocks];
        for (index, batch) in self.batches.iter().enumerate() {
            if batch.is_empty() {
                return error(format!("batch {index} is empty"));
            }
            for &block in batch {
                let Some(mark) = seen.get_mut(block as usize) else {
                    return error(format!("batch {index} names block {block} of {blocks}"));
                };
                if *mark == index + 1 {
                    return error(format!("batch {index} names block {block} twice"));
                }
                *mark = index + 1;
            }
        }
        Ok(())
    }
}

/// Where a batch workload comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchWorkload {
    /// YCSB-E-like range scans.
    YcsbE(YcsbEConfig),
    /// Wikipedia-like pages of images.
    Pages(PageConfig),
    /// Replay of a batch trace, in order, cycling.
    Trace(BatchTrace),
}

/// A batch workload could not be built or read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BatchWorkloadError {
    /// A bad configuration field.
    #[error("batch workload: {field}: {reason}")]
    Config {
        /// The field, as spelled in the config.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A malformed trace line.
    #[error("batch trace line {line}: {reason}")]
    TraceLine {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A trace that is wrong as a whole (empty, inconsistent).
    #[error("batch trace: {0}")]
    Trace(String),
}

fn config_error(field: &'static str, reason: impl Into<String>) -> BatchWorkloadError {
    BatchWorkloadError::Config { field, reason: reason.into() }
}

fn check_exponent(field: &'static str, value: f64) -> Result<(), BatchWorkloadError> {
    if value > 0.0 && value.is_finite() {
        Ok(())
    } else {
        Err(config_error(field, format!("{value} must be positive and finite")))
    }
}

/// FNV-1a 64 over the eight little-endian bytes of `value`: the hash YCSB's
/// scrambled Zipfian applies to a rank (`Utils.fnvhash64`, which also takes
/// the absolute value of the signed result; irrelevant to the spread).
pub fn fnv1a64(value: u64) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in value.to_le_bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

fn describe_change(change_at_ns: u64) -> String {
    if change_at_ns == NEVER { "never".into() } else { format!("at {change_at_ns} ns") }
}

/// A 0-based rank in `0..n` from a Zipf over `1..=n` (the float draw is in
/// range; the clamp guards rounding at the edges).
fn zipf_rank(zipf: &Zipf<f64>, n: u32, rng: &mut impl Rng) -> u32 {
    (zipf.sample(rng) as u64).clamp(1, u64::from(n)) as u32 - 1
}

/// A Pareto with shape `shape` whose median is `median`, or why not.
fn pareto_with_median(field: &'static str, median: f64, shape: f64) -> Result<Pareto<f64>, BatchWorkloadError> {
    let scale = median / 2f64.powf(1.0 / shape);
    Pareto::new(scale, shape).map_err(|e| config_error(field, format!("shape {shape} with median {median}: {e}")))
}

/// A Pareto draw rounded to a whole number in `[1, max]` (rounding is
/// monotone, so the median survives it).
fn capped_draw(pareto: &Pareto<f64>, max: u64, rng: &mut impl Rng) -> u64 {
    (pareto.sample(rng).round() as u64).clamp(1, max)
}

/// What a generator draws from.
#[derive(Clone, Debug)]
enum Source {
    Scans {
        config: YcsbEConfig,
        zipf: Zipf<f64>,
    },
    Pages {
        config: PageConfig,
        zipf: Zipf<f64>,
        /// Page p's images are `images[offsets[p]..offsets[p + 1]]`.
        offsets: Vec<usize>,
        images: Vec<u32>,
    },
    Trace {
        batches: Vec<Vec<u32>>,
        /// The next batch to replay: generator state, so each run replays from a clone of a
        /// generator that has not been drawn from.
        cursor: usize,
    },
}

/// A built batch workload: every block's size and a source of batches.
#[derive(Clone, Debug)]
pub struct BatchGenerator {
    block_bytes: Vec<u64>,
    source: Source,
    description: String,
}

impl BatchWorkload {
    /// Validates every field and builds the generator; `seed` drives every
    /// random choice of the build (image sizes, the pages' images).
    pub fn build(&self, seed: u64) -> Result<BatchGenerator, BatchWorkloadError> {
        match self {
            BatchWorkload::YcsbE(config) => build_scans(config),
            BatchWorkload::Pages(config) => build_pages(config, seed),
            BatchWorkload::Trace(trace) => build_trace(trace),
        }
    }
}

fn build_scans(config: &YcsbEConfig) -> Result<BatchGenerator, BatchWorkloadError> {
    config.validate()?;
    let zipf = Zipf::new(f64::from(config.blocks), config.zipf_exponent)
        .map_err(|e| config_error("zipf_exponent", e.to_string()))?;
    let description = format!(
        "ycsb-e: scans of 1..={} keys over {} blocks of {} B; start key uniform, Zipf s={} ({}) from the change ({})",
        config.max_scan_length,
        config.blocks,
        config.block_bytes,
        config.zipf_exponent,
        if config.scrambled { "scrambled" } else { "unscrambled" },
        describe_change(config.change_at_ns),
    );
    Ok(BatchGenerator {
        block_bytes: vec![config.block_bytes; config.blocks as usize],
        source: Source::Scans { config: config.clone(), zipf },
        description,
    })
}

fn build_pages(config: &PageConfig, seed: u64) -> Result<BatchGenerator, BatchWorkloadError> {
    config.validate()?;
    let count =
        pareto_with_median("power_law_shape", f64::from(config.images_per_page_median), config.power_law_shape)?;
    let size = pareto_with_median("power_law_shape", config.image_bytes_median as f64, config.power_law_shape)?;
    let page_zipf = Zipf::new(f64::from(config.pages), config.zipf_exponent)
        .map_err(|e| config_error("zipf_exponent", e.to_string()))?;
    let image_zipf = Zipf::new(f64::from(config.images), config.image_popularity_exponent)
        .map_err(|e| config_error("image_popularity_exponent", e.to_string()))?;

    // One stream per concern, so that changing how pages are drawn does not
    // change the image sizes of the same seed.
    let mut size_rng = ChaCha8Rng::seed_from_u64(mix64(seed ^ 0x1a6e_5123));
    let block_bytes: Vec<u64> =
        (0..config.images).map(|_| capped_draw(&size, config.image_bytes_max, &mut size_rng)).collect();

    // Popularity rank → image by a seeded shuffle: an index carries no
    // popularity, so a placement keyed on indices (round robin, ranges) does
    // not see the hot images side by side.
    let mut by_rank: Vec<u32> = (0..config.images).collect();
    by_rank.shuffle(&mut ChaCha8Rng::seed_from_u64(mix64(seed ^ 0x0bde_72a5)));

    let mut page_rng = ChaCha8Rng::seed_from_u64(mix64(seed ^ 0x9a6e_5e75));
    let mut offsets = Vec::with_capacity(config.pages as usize + 1);
    offsets.push(0usize);
    let mut images: Vec<u32> = Vec::new();
    // `on_page[image] == page + 1` when the image is already on this page.
    let mut on_page = vec![0u32; config.images as usize];
    for page in 0..config.pages {
        let wanted = capped_draw(&count, u64::from(config.images_per_page_max), &mut page_rng) as u32;
        let mut taken = 0u32;
        // The first draw always lands on a fresh image, so a page is never empty.
        for _ in 0..wanted.saturating_mul(DRAWS_PER_IMAGE).saturating_add(64) {
            if taken == wanted {
                break;
            }
            let image = by_rank[zipf_rank(&image_zipf, config.images, &mut page_rng) as usize];
            if on_page[image as usize] != page + 1 {
                on_page[image as usize] = page + 1;
                images.push(image);
                taken += 1;
            }
        }
        if images.len() > MAX_PAGE_ENTRIES {
            return Err(config_error(
                "pages",
                format!("more than {MAX_PAGE_ENTRIES} page → image entries after {} pages", page + 1),
            ));
        }
        offsets.push(images.len());
    }

    let mean_images = images.len() as f64 / f64::from(config.pages);
    let mean_bytes = block_bytes.iter().map(|&b| b as f64).sum::<f64>() / block_bytes.len() as f64;
    let description = format!(
        "pages: {} pages over {} images (images/page median {} max {}, mean {:.1}; image bytes median {} max {}, \
         mean {:.0}; power-law shape {}, sharing Zipf s={}); page uniform, Zipf s={} from the change ({})",
        config.pages,
        config.images,
        config.images_per_page_median,
        config.images_per_page_max,
        mean_images,
        config.image_bytes_median,
        config.image_bytes_max,
        mean_bytes,
        config.power_law_shape,
        config.image_popularity_exponent,
        config.zipf_exponent,
        describe_change(config.change_at_ns),
    );
    Ok(BatchGenerator {
        block_bytes,
        source: Source::Pages { config: config.clone(), zipf: page_zipf, offsets, images },
        description,
    })
}

fn build_trace(trace: &BatchTrace) -> Result<BatchGenerator, BatchWorkloadError> {
    trace.validate()?;
    let entries: usize = trace.batches.iter().map(Vec::len).sum();
    let description = format!(
        "trace: {} batches over {} blocks (mean {:.1} blocks a batch, {} B in all), replayed in order, cycling",
        trace.batches.len(),
        trace.block_bytes.len(),
        entries as f64 / trace.batches.len() as f64,
        trace.block_bytes.iter().sum::<u64>(),
    );
    Ok(BatchGenerator {
        block_bytes: trace.block_bytes.clone(),
        source: Source::Trace { batches: trace.batches.clone(), cursor: 0 },
        description,
    })
}

impl BatchGenerator {
    /// The size of every block, by index (`block_bytes().len()` blocks).
    pub fn block_bytes(&self) -> &[u64] {
        &self.block_bytes
    }

    /// Clears `out` and fills it with the next batch: distinct block
    /// indices, never none. A scan is `start..start + len` clamped at the
    /// last key (shorter near the end, never wrapping), in key order; a page
    /// is its images; a trace replays its batches in order, cycling, and
    /// ignores `now_ns` and `rng`. `now_ns` only decides uniform (before the
    /// change) or Zipf (from it).
    pub fn next_batch(&mut self, now_ns: u64, rng: &mut impl Rng, out: &mut Vec<u32>) {
        out.clear();
        match &mut self.source {
            Source::Scans { config, zipf } => {
                let start = if changed(config.change_at_ns, now_ns) {
                    let rank = zipf_rank(zipf, config.blocks, rng);
                    if config.scrambled { (fnv1a64(u64::from(rank)) % u64::from(config.blocks)) as u32 } else { rank }
                } else {
                    rng.random_range(0..config.blocks)
                };
                let length = rng.random_range(1..=config.max_scan_length);
                let end = (u64::from(start) + u64::from(length)).min(u64::from(config.blocks)) as u32;
                out.extend(start..end);
            }
            Source::Pages { config, zipf, offsets, images } => {
                let page = if changed(config.change_at_ns, now_ns) {
                    zipf_rank(zipf, config.pages, rng)
                } else {
                    rng.random_range(0..config.pages)
                } as usize;
                out.extend_from_slice(&images[offsets[page]..offsets[page + 1]]);
            }
            Source::Trace { batches, cursor } => {
                out.extend_from_slice(&batches[*cursor]);
                *cursor = (*cursor + 1) % batches.len();
            }
        }
        debug_assert!(!out.is_empty());
    }

    /// One line for reports: the kind, its parameters and the change.
    pub fn describe(&self) -> String {
        self.description.clone()
    }
}

/// Whether the popularity has switched to Zipf at `now_ns`.
fn changed(change_at_ns: u64, now_ns: u64) -> bool {
    change_at_ns != NEVER && now_ns >= change_at_ns
}

/// Reads a batch trace: text lines `time_ns,request_id,object_id,size_bytes`
/// (fields separated by commas, spaces around them ignored; `#` comment lines
/// and blank lines skipped, so a header must be a comment).
///
/// Consecutive lines with the same `request_id` (any token) form one batch;
/// an id seen again after another request starts a new batch. Object ids are
/// u64s, mapped densely to block indices in order of first appearance; an
/// object's `size_bytes` (≥ 1) must be the same on every line. An object
/// named twice in one request is read once. A batch's arrival is the time of
/// its first line; times need not be sorted (batches replay in file order).
/// Every error names its line.
pub fn read_batch_trace(reader: impl std::io::BufRead) -> Result<BatchTrace, BatchWorkloadError> {
    let mut trace = BatchTrace { batches: Vec::new(), block_bytes: Vec::new(), arrival_ns: Vec::new() };
    // Object id → (block index, line that first gave its size).
    let mut blocks: HashMap<u64, (u32, usize)> = HashMap::new();
    let mut current_request: Option<String> = None;
    // `in_batch[block] == batches.len()` when the block is already in the
    // current batch: an O(1) duplicate check that needs no clearing.
    let mut in_batch: Vec<usize> = Vec::new();
    for (index, text) in reader.lines().enumerate() {
        let line = index + 1;
        let error = |reason: String| BatchWorkloadError::TraceLine { line, reason };
        let text = text.map_err(|e| error(format!("cannot read: {e}")))?;
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = trimmed.split(',').map(str::trim).collect();
        let [time, request, object, size] = fields[..] else {
            return Err(error(format!(
                "expected 4 comma-separated fields (time_ns,request_id,object_id,size_bytes), found {}",
                fields.len()
            )));
        };
        let time_ns: u64 =
            time.parse().map_err(|_| error(format!("time_ns {time:?} is not a whole number of nanoseconds")))?;
        if request.is_empty() {
            return Err(error("empty request_id".into()));
        }
        let object: u64 = object.parse().map_err(|_| error(format!("object_id {object:?} is not a u64")))?;
        let bytes: u64 = size.parse().map_err(|_| error(format!("size_bytes {size:?} is not a whole number")))?;
        if bytes == 0 {
            return Err(error("size_bytes 0: a block holds at least one byte".into()));
        }
        let block = match blocks.get(&object) {
            Some(&(block, first_line)) => {
                let known = trace.block_bytes[block as usize];
                if known != bytes {
                    return Err(error(format!(
                        "object {object} has {bytes} bytes here but {known} bytes on line {first_line}"
                    )));
                }
                block
            }
            None => {
                if trace.block_bytes.len() >= MAX_BLOCKS as usize {
                    return Err(error(format!("more than {MAX_BLOCKS} distinct objects")));
                }
                let block = trace.block_bytes.len() as u32;
                blocks.insert(object, (block, line));
                trace.block_bytes.push(bytes);
                in_batch.push(0);
                block
            }
        };
        if current_request.as_deref() != Some(request) {
            current_request = Some(request.to_string());
            trace.batches.push(Vec::new());
            trace.arrival_ns.push(time_ns);
        }
        let batch_mark = trace.batches.len();
        if in_batch[block as usize] != batch_mark {
            in_batch[block as usize] = batch_mark;
            trace.batches[batch_mark - 1].push(block);
        }
    }
    if trace.batches.is_empty() {
        return Err(BatchWorkloadError::Trace("no request in the trace".into()));
    }
    Ok(trace)
}
