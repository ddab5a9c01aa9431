//! The runs of the Xiang evaluation: a setting's JLWO instance, its solve (or the oblivious
//! baseline), and a simulation of the solution whose records are turned into `model` records and
//! summarised through `report`: per class (latency, batch means), per queue q_{i,j,d} (the chunk
//! delay D = N + Q and the service time, beside the corrected and the printed Lemma 2), and the
//! checks every record must pass (k distinct racks of the file's set, the queues' bandwidths).
//!
//! Records: a read becomes a `RequestRecord` (the client rack is its `frontend`, the file its
//! `object` and `partition`, the class its `class`), each chunk a `TaskRecord` (the storage rack
//! is its `node`, the chunk's position in S_r its `unit`; `enqueue_ns` is after the connection
//! delay, so `finish − arrival` is the chunk's D and `finish − start` its transfer). The queue of
//! a task is (frontend, node, class).
//!
//! Must not: judge (that is `judge`), or read anything of a run but its records, its solution and
//! the configuration.

use super::{
    AGGREGATION_BPS, Access, BATCHES, CODE_K, CODE_N, Figure, INTER_CONNECTION_S, INTRA_CONNECTION_S, PORT_BPS, RACKS,
    SERVICE_RANDOM_SHARE, Scenario, SolveJob, Solver, TOR_BPS, WARMUP_SHARE, XiangOptions,
};
use anyhow::Context;
use model::{
    FrontendId, NEVER, NodeId, ObjectId, Outcome, PartitionId, RecordLog, RequestId, RequestRecord, TaskRecord,
    TaskRole,
};
use optimize::jlwo::{
    self, ConnectionDelay, DelayMoments, Evaluation, FileDemand, Instance, IterationTrace, JlwoLimits, ServiceMoments,
    Solution,
};
use policy::classes::{Marginals, random_distinct_racks};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use report::{LatencyStats, RunInfo, Sample};
use serde::Serialize;
use sim::topology::{Distribution, FileSpec, LinkDiscipline, ReadRecord, TopologySetup, queue_index};

/// Classes D.
const CLASSES: u8 = 2;
/// Points of each service-time CDF kept for Fig. 3.
const CDF_POINTS: usize = 80;

/// A solve: the setting, what solved it and the solution with its bound.
#[derive(Clone, Debug, Serialize)]
pub struct SolveRow {
    /// The setting and the solver.
    pub job: SolveJob,
    /// O⁰: the baseline's objective (JLWO's starting point), s.
    pub initial_objective_s: f64,
    /// The objective at the end, s.
    pub objective_s: f64,
    /// JLWO's iterations (0 for the baseline).
    pub iterations: u32,
    /// The decrease fell to ε before the cap.
    pub converged: bool,
    /// One entry per iteration (empty for the baseline).
    pub trace: Vec<IterationTrace>,
    /// Files the placement moved over the run.
    pub files_moved: u64,
    /// Theorem 1 per class with each request's tightest z (corrected Lemma 2), s.
    pub class_bounds_s: Vec<f64>,
    /// The same with the printed (9)/(10) in place of the corrected moments, s.
    pub class_printed_bounds_s: Vec<f64>,
    /// The largest ρ of a loaded queue.
    pub utilisation_max: f64,
    /// Mean reserved bandwidth of the queues a class's chunks use, weighted by Λ: [class][intra, inter], bit/s.
    pub class_bandwidths_bps: Vec<[f64; 2]>,
    /// The solution (placement, π, W, w, z).
    #[serde(skip)]
    pub solution: Solution,
    /// Its evaluation (Λ and B_eff per queue).
    #[serde(skip)]
    pub evaluation: Evaluation,
    /// Wall time of the solve, s: measured, so kept out of every written file but timing.json.
    #[serde(skip)]
    pub wall_s: f64,
}

/// One class of one simulated run.
#[derive(Clone, Debug, Serialize)]
pub struct ClassRow {
    /// d (0 is the paper's class 1).
    pub class: u8,
    /// Request latency (arrival to the k-th chunk), after the warm-up, from `report::summarize`.
    pub latency: LatencyStats,
    /// Chunk latency (enqueue to finish: the queue's sojourn), from the same summary.
    pub chunk_latency: LatencyStats,
    /// 99 % confidence interval of the mean from [`BATCHES`] batch means (Student t), s.
    pub mean_ci99_s: (f64, f64),
    /// The solution's Theorem 1 bound on this class's mean (tightest z), s.
    pub bound_s: f64,
    /// The bound with the printed Lemma 2, s.
    pub printed_bound_s: f64,
}

/// One queue q_{i,j,d} of one run (its chunks after the warm-up).
#[derive(Clone, Debug, Serialize)]
pub struct QueueRow {
    /// Client rack i.
    pub client: u16,
    /// Storage rack j.
    pub storage: u16,
    /// Class d.
    pub class: u8,
    /// Chunks.
    pub chunks: u64,
    /// Chunks per second over the measurement window (the run's Λ).
    pub arrival_per_s: f64,
    /// B_eff the simulator gave it, bit/s.
    pub reserved_bps: f64,
    /// ρ = Λ·μ·B/B_eff at the measured Λ.
    pub utilisation: f64,
    /// Mean and variance of D = N + Q from the records, s and s².
    pub delay_mean_s: f64,
    /// Variance of D.
    pub delay_var_s2: f64,
    /// Corrected Lemma 2 at the measured Λ.
    pub predicted: DelayMoments,
    /// The paper's printed (9)/(10) at the measured Λ.
    pub printed: DelayMoments,
    /// Mean transfer time (start to finish), s.
    pub service_mean_s: f64,
    /// Its standard deviation, s.
    pub service_sd_s: f64,
    /// μ·B/B_eff: eq. (8)'s mean transfer time, s.
    pub service_predicted_s: f64,
    /// Σ over the window's reads from (i, d) of π of rack j: the expected chunk count.
    pub expected_chunks: f64,
    /// Σ π(1 − π) over the same reads: the count's variance.
    pub expected_var: f64,
}

/// Fig. 3: one CDF of chunk transfer times.
#[derive(Clone, Debug, Serialize)]
pub struct ServiceCdf {
    /// d.
    pub class: u8,
    /// Intra-rack (else inter-rack) queues.
    pub intra: bool,
    /// Chunks.
    pub chunks: u64,
    /// Mean transfer time, s.
    pub mean_s: f64,
    /// Mean reserved bandwidth of its chunks' queues (over chunks), bit/s.
    pub bandwidth_mean_bps: f64,
    /// μ·B·mean(1/B_eff) over its chunks: eq. (8)'s mean, s.
    pub predicted_mean_s: f64,
    /// Eq. (8)'s standard error of that mean: σ·B·√(Σ 1/B_eff²)/chunks, s.
    pub predicted_se_s: f64,
    /// (seconds, fraction) points.
    pub points: Vec<(f64, f64)>,
}

/// What every record was checked for.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RecordChecks {
    /// Reads checked (all of the run's).
    pub reads: u64,
    /// Reads with other than k tasks, a rack twice, or a rack outside S_r (or at another position).
    pub bad_reads: u64,
    /// Largest relative difference between a queue's simulated B_eff and JLWO's.
    pub bandwidth_mismatch: f64,
}

/// One simulated run: a solve under one discipline.
#[derive(Clone, Debug, Serialize)]
pub struct RunRow {
    /// Index of its solve in the solve list.
    pub solve: usize,
    /// The setting.
    pub scenario: Scenario,
    /// "jlwo" or "baseline".
    pub solver: &'static str,
    /// How queues shared bandwidth.
    pub discipline: LinkDiscipline,
    /// Reads simulated (warm-up included).
    pub reads: u32,
    /// Per class.
    pub classes: Vec<ClassRow>,
    /// Σ_d C_d·(λ_d/λ_all)·mean_d over the measured means, s.
    pub weighted_latency_s: f64,
    /// The record checks.
    pub checks: RecordChecks,
    /// Queues with chunks.
    #[serde(skip)]
    pub queues: Vec<QueueRow>,
    /// Fig. 3's CDFs (its setting only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub service_cdfs: Vec<ServiceCdf>,
}

/// X's moments for files of `file_mb` MB: 0.8·t + Exp(0.2·t), t the chunk's transfer at B.
fn service_parts(file_mb: f64) -> (f64, f64) {
    let t = file_mb * 1e6 / CODE_K as f64 * 8.0 / AGGREGATION_BPS;
    ((1.0 - SERVICE_RANDOM_SHARE) * t, SERVICE_RANDOM_SHARE * t)
}

fn connection(mean_s: f64) -> ConnectionDelay {
    ConnectionDelay { mean_s, variance_s2: mean_s * mean_s }
}

/// The JLWO instance of a setting: the seed's placement, the setting's demand.
pub(super) fn instance(options: &XiangOptions, scenario: &Scenario) -> Instance {
    let files_per_class = options.files_per_class();
    let racks = usize::from(RACKS);
    // Separate streams: the placement is the same in every setting of a seed.
    let mut placement = ChaCha8Rng::seed_from_u64(options.seed);
    placement.set_stream(1);
    let mut weights = ChaCha8Rng::seed_from_u64(options.seed);
    weights.set_stream(2);
    let file_rate = scenario.rate_per_s / (2 * files_per_class) as f64;
    let files = (0..2 * files_per_class)
        .map(|f| {
            let racks_of: Vec<u32> = random_distinct_racks(RACKS, CODE_N, &mut placement)
                .expect("7 of 10 racks")
                .into_iter()
                .map(u32::from)
                .collect();
            let share: Vec<f64> = match scenario.access {
                Access::Uniform => vec![1.0 / racks as f64; racks],
                Access::Concentrated(c) => {
                    (0..racks).map(|i| if i == 0 { c } else { (1.0 - c) / (racks - 1) as f64 }).collect()
                }
                Access::Heterogeneous => {
                    let w: Vec<f64> = (0..racks).map(|_| weights.random_range(0.0..1.0f64).powi(3)).collect();
                    let sum: f64 = w.iter().sum();
                    w.iter().map(|x| x / sum).collect()
                }
            };
            FileDemand {
                class: f % 2,
                racks: racks_of,
                request_rates_per_s: share.iter().map(|s| s * file_rate).collect(),
            }
        })
        .collect();
    let (shift, exp) = service_parts(scenario.file_mb);
    Instance {
        rack_count: racks,
        aggregation_bandwidth_bps: AGGREGATION_BPS,
        tor_bandwidth_bps: TOR_BPS,
        queue_bandwidth_max_bps: PORT_BPS,
        class_weights: vec![1.0, scenario.class_2_weight],
        service: ServiceMoments::shifted_exponential(shift, exp),
        connection: Instance::connection_intra_inter(
            racks,
            connection(INTRA_CONNECTION_S),
            connection(INTER_CONNECTION_S),
        ),
        code_n: CODE_N,
        code_k: CODE_K,
        files,
    }
}

/// The connection delay of (client, storage).
fn connection_of(client: usize, storage: usize) -> ConnectionDelay {
    connection(if client == storage { INTRA_CONNECTION_S } else { INTER_CONNECTION_S })
}

/// Theorem 1 per class (tightest z per request) with `moments` for each queue's (Λ, B_eff).
fn class_bounds(
    instance: &Instance,
    solution: &Solution,
    evaluation: &Evaluation,
    moments: impl Fn(f64, f64, &ConnectionDelay) -> DelayMoments,
) -> Vec<f64> {
    let racks = instance.rack_count;
    let classes = usize::from(CLASSES);
    let (mut weighted, mut rate) = (vec![0.0; classes], vec![0.0; classes]);
    let mut m = Vec::with_capacity(instance.code_n);
    for (f, file) in instance.files.iter().enumerate() {
        for client in 0..racks {
            let lambda = file.request_rates_per_s[client];
            if lambda <= 0.0 {
                continue;
            }
            m.clear();
            for &storage in solution.file_racks(f) {
                let q = (client * racks + storage as usize) * classes + file.class;
                m.push(moments(
                    evaluation.arrival_per_s[q],
                    evaluation.reserved_bps[q],
                    &connection_of(client, storage as usize),
                ));
            }
            let pi = solution.file_schedule(f, client);
            let z = jlwo::optimal_z_s(pi, &m);
            weighted[file.class] += lambda * jlwo::order_statistic_bound_s(z, pi, &m);
            rate[file.class] += lambda;
        }
    }
    weighted.iter().zip(&rate).map(|(w, r)| if *r > 0.0 { w / r } else { 0.0 }).collect()
}

/// Solves one job (timing it: the one clock read of the experiment).
pub(super) fn solve(options: &XiangOptions, job: &SolveJob) -> anyhow::Result<SolveRow> {
    let instance = instance(options, &job.scenario);
    let started = std::time::Instant::now();
    let (baseline, base_eval) = jlwo::oblivious_baseline(&instance).context("the baseline")?;
    let (solution, evaluation, trace, initial, iterations, converged) = match job.solver {
        Solver::Baseline => (baseline, base_eval.clone(), Vec::new(), base_eval.objective, 0, true),
        Solver::Jlwo { tolerance } => {
            let limits = JlwoLimits { tolerance_relative: tolerance, ..JlwoLimits::default() };
            let outcome =
                jlwo::solve(&instance, &limits, None).with_context(|| format!("JLWO on {}", job.scenario.label()))?;
            (
                outcome.solution,
                outcome.evaluation,
                outcome.trace,
                outcome.initial_objective,
                outcome.iterations,
                outcome.converged,
            )
        }
    };
    let wall_s = started.elapsed().as_secs_f64();
    let big_b = instance.aggregation_bandwidth_bps;
    let service = instance.service;
    let class_bounds_s = evaluation.class_mean_bounds_per_file_z_s.clone();
    let class_printed_bounds_s = class_bounds(&instance, &solution, &evaluation, |lambda, reserved, c| {
        jlwo::printed_delay_moments(lambda, reserved, big_b, &service, c)
    });
    let classes = usize::from(CLASSES);
    let racks = instance.rack_count;
    let mut class_bandwidths_bps = vec![[0.0; 2]; classes];
    for (d, row) in class_bandwidths_bps.iter_mut().enumerate() {
        for (slot, intra) in [true, false].into_iter().enumerate() {
            let (mut sum, mut weight) = (0.0, 0.0);
            for i in 0..racks {
                for j in (0..racks).filter(|&j| (i == j) == intra) {
                    let q = (i * racks + j) * classes + d;
                    sum += evaluation.arrival_per_s[q] * evaluation.reserved_bps[q];
                    weight += evaluation.arrival_per_s[q];
                }
            }
            row[slot] = if weight > 0.0 { sum / weight } else { 0.0 };
        }
    }
    Ok(SolveRow {
        job: *job,
        initial_objective_s: initial,
        objective_s: evaluation.objective,
        iterations,
        converged,
        files_moved: trace.iter().map(|t| u64::from(t.files_moved)).sum(),
        trace,
        class_bounds_s,
        class_printed_bounds_s,
        utilisation_max: evaluation.utilisation_max,
        class_bandwidths_bps,
        solution,
        evaluation,
        wall_s,
    })
}

/// The simulator's setup for a solution: its W, and intra-rack weights that give each intra-rack
/// queue exactly JLWO's B_eff = min(w·b_eff, C).
fn topology(options: &XiangOptions, solved: &SolveRow, discipline: LinkDiscipline) -> TopologySetup {
    let (shift, exp) = service_parts(solved.job.scenario.file_mb);
    let mut setup = TopologySetup {
        racks: RACKS,
        classes: CLASSES,
        aggregate_bytes_per_s: AGGREGATION_BPS / 8.0,
        tor_bytes_per_s: TOR_BPS / 8.0,
        inter_weights: solved.solution.inter_weights.clone(),
        intra_weights: vec![0.0; usize::from(RACKS) * usize::from(CLASSES)],
        intra_connection: Distribution::Exponential { mean_s: INTRA_CONNECTION_S },
        inter_connection: Distribution::Exponential { mean_s: INTER_CONNECTION_S },
        service: Distribution::ShiftedExponential { shift_s: shift, exp_mean_s: exp },
        discipline,
        requests: options.reads(),
        seed: options.seed,
    };
    for rack in 0..RACKS {
        let intra_bps = setup.intra_rack_bytes_per_s(rack) * 8.0;
        for class in 0..CLASSES {
            let q = queue_index(RACKS, CLASSES, rack, rack, class);
            let reserved = solved.evaluation.reserved_bps[q];
            setup.intra_weights[usize::from(rack) * usize::from(CLASSES) + usize::from(class)] =
                if intra_bps > 0.0 { (reserved / intra_bps).clamp(0.0, 1.0) } else { 0.0 };
        }
    }
    setup
}

/// The simulator's files: the solution's placement and π per client rack.
fn file_specs(instance: &Instance, solution: &Solution) -> anyhow::Result<Vec<FileSpec>> {
    instance
        .files
        .iter()
        .enumerate()
        .map(|(f, file)| {
            let marginals = (0..instance.rack_count)
                .map(|client| Marginals::new(solution.file_schedule(f, client).to_vec(), instance.code_k))
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("file {f}'s π"))?;
            Ok(FileSpec {
                class: file.class as u8,
                racks: solution.file_racks(f).iter().map(|&r| r as u16).collect(),
                rates_per_s: file.request_rates_per_s.clone(),
                marginals,
            })
        })
        .collect()
}

/// The topology's records as `model` records (see the module doc for the mapping).
pub(super) fn record_log(records: &[ReadRecord], file_bytes: u64) -> RecordLog {
    let chunk_bytes = file_bytes / CODE_K as u64;
    let mut log = RecordLog::with_capacity(records.len(), records.len() * CODE_K);
    let mut tasks = Vec::with_capacity(CODE_N);
    for read in records {
        let request = RequestRecord {
            request: RequestId(read.request),
            frontend: FrontendId(read.client_rack),
            object: ObjectId(u64::from(read.file)),
            partition: PartitionId(read.file),
            bytes: file_bytes,
            arrival_ns: read.arrival_ns,
            decision_start_ns: read.arrival_ns,
            decision_end_ns: read.arrival_ns,
            completion_ns: read.finish_ns,
            probes: 0,
            probe_wait_ns: 0,
            decision_cpu_ns: 0,
            degraded: false,
            timed_out: false,
            outcome: Outcome::Ok,
            class: 0,
            latency_class: read.class,
        };
        tasks.clear();
        tasks.extend(read.chunks.iter().map(|chunk| TaskRecord {
            node: NodeId(u32::from(chunk.rack)),
            unit: chunk.unit,
            role: TaskRole::Normal,
            cancelled: false,
            bytes: chunk_bytes,
            enqueue_ns: chunk.enqueue_ns,
            start_ns: chunk.start_ns,
            finish_ns: chunk.finish_ns,
            cancel_ns: NEVER,
            failed: false,
        }));
        log.push(request, &tasks);
    }
    log
}

/// Simulates solve number `solve` (`solved`) under `discipline` and summarises the records.
pub(super) fn simulate(
    options: &XiangOptions,
    solve: usize,
    solved: &SolveRow,
    discipline: LinkDiscipline,
) -> anyhow::Result<RunRow> {
    let scenario = solved.job.scenario;
    let instance = instance(options, &scenario);
    let setup = topology(options, solved, discipline);
    let files = file_specs(&instance, &solved.solution)?;
    let output = sim::topology::run(&setup, &files).with_context(|| format!("simulating {}", scenario.label()))?;
    let bandwidth_mismatch = output
        .effective_bytes_per_s
        .iter()
        .zip(&solved.evaluation.reserved_bps)
        .map(|(sim, jlwo)| {
            let sim = sim * 8.0;
            if *jlwo > 0.0 { (sim - jlwo).abs() / jlwo } else { sim.abs() }
        })
        .fold(0.0, f64::max);
    let file_bytes = (scenario.file_mb * 1e6).round() as u64;
    let log = record_log(&output.records, file_bytes);
    drop(output);
    let checks = RecordChecks { bandwidth_mismatch, ..check_records(&log, &solved.solution) };
    let warmup = (f64::from(options.reads()) * WARMUP_SHARE).round() as usize;
    let run_info = RunInfo::new("rs-7-4", solved.job.solver.name(), u32::from(RACKS), u32::from(RACKS), options.seed);
    let mut classes = Vec::new();
    for class in 0..CLASSES {
        classes.push(class_row(&log, warmup, class, &run_info, solved)?);
    }
    let rates: Vec<f64> = (0..usize::from(CLASSES))
        .map(|d| instance.files.iter().filter(|f| f.class == d).flat_map(|f| &f.request_rates_per_s).sum())
        .collect();
    let total: f64 = rates.iter().sum();
    let weighted_latency_s = classes
        .iter()
        .map(|c| instance.class_weights[usize::from(c.class)] * rates[usize::from(c.class)] / total * c.latency.mean_s)
        .sum();
    let queues = queue_rows(&log, warmup, &instance, &solved.solution, &setup)?;
    let service_cdfs =
        if scenario.figure == Figure::Service { service_cdfs(&log, warmup, &setup, &instance)? } else { Vec::new() };
    Ok(RunRow {
        solve,
        scenario,
        solver: solved.job.solver.name(),
        discipline,
        reads: options.reads(),
        classes,
        weighted_latency_s,
        checks,
        queues,
        service_cdfs,
    })
}

/// Every read: k tasks, on distinct racks, each the rack of S_r at the task's unit position.
fn check_records(log: &RecordLog, solution: &Solution) -> RecordChecks {
    let mut checks = RecordChecks::default();
    for record in log.iter() {
        checks.reads += 1;
        let racks = solution.file_racks(record.request.object.0 as usize);
        let distinct = record.tasks.iter().enumerate().all(|(p, t)| record.tasks[..p].iter().all(|u| u.node != t.node));
        let in_set = record.tasks.iter().all(|t| racks.get(usize::from(t.unit)).is_some_and(|&rack| rack == t.node.0));
        if record.tasks.len() != CODE_K || !distinct || !in_set {
            checks.bad_reads += 1;
        }
    }
    checks
}

/// The post-warm-up records of one class, as a log.
fn class_log(log: &RecordLog, warmup: usize, class: u8) -> RecordLog {
    let mut out = RecordLog::new();
    for record in log.iter().skip(warmup).filter(|r| r.request.latency_class == class) {
        out.push(*record.request, record.tasks);
    }
    out
}

/// Two-sided 99.5 % quantile of Student's t with BATCHES − 1 = 19 degrees of freedom.
const T_19_995: f64 = 2.861;

fn class_row(log: &RecordLog, warmup: usize, class: u8, info: &RunInfo, solved: &SolveRow) -> anyhow::Result<ClassRow> {
    let of_class = class_log(log, warmup, class);
    let summary = report::summarize(&of_class, info);
    let latency = summary.request_latency.context("a class without reads")?;
    let chunk_latency = summary.task_latency.context("a class without chunks")?;
    // Batch means over consecutive reads (arrival order): the reads of a run are correlated
    // through the queues, the batches nearly not.
    let requests = of_class.requests();
    let size = requests.len() / BATCHES;
    anyhow::ensure!(size > 0, "fewer reads of class {class} than batches");
    let means: Vec<f64> = requests
        .chunks(size)
        .take(BATCHES)
        .map(|batch| {
            Sample::new(batch.iter().map(RequestRecord::latency_ns).collect()).stats().map_or(0.0, |s| s.mean_s)
        })
        .collect();
    let mean = means.iter().sum::<f64>() / means.len() as f64;
    let sd = (means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (means.len() - 1) as f64).sqrt();
    let half = T_19_995 * sd / (means.len() as f64).sqrt();
    Ok(ClassRow {
        class,
        latency,
        chunk_latency,
        mean_ci99_s: (latency.mean_s - half, latency.mean_s + half),
        bound_s: solved.class_bounds_s[usize::from(class)],
        printed_bound_s: solved.class_printed_bounds_s[usize::from(class)],
    })
}

/// Per-queue delays, transfers and sampler counts over the post-warm-up reads.
fn queue_rows(
    log: &RecordLog,
    warmup: usize,
    instance: &Instance,
    solution: &Solution,
    setup: &TopologySetup,
) -> anyhow::Result<Vec<QueueRow>> {
    let queue_count = usize::from(RACKS) * usize::from(RACKS) * usize::from(CLASSES);
    let (mut delays, mut services) = (vec![Vec::new(); queue_count], vec![Vec::new(); queue_count]);
    let (mut expected, mut variance) = (vec![0.0; queue_count], vec![0.0; queue_count]);
    let requests = &log.requests()[warmup.min(log.len())..];
    let (first, last) = match (requests.first(), requests.last()) {
        (Some(a), Some(b)) => (a.arrival_ns, b.arrival_ns),
        _ => anyhow::bail!("no reads after the warm-up"),
    };
    let span_s = (last - first) as f64 / 1e9;
    for record in log.iter().skip(warmup) {
        let (client, class, file) =
            (record.request.frontend.0, record.request.latency_class, record.request.object.0 as usize);
        for task in record.tasks {
            let q = queue_index(RACKS, CLASSES, client, task.node.0 as u16, class);
            delays[q].push(task.finish_ns - record.request.arrival_ns);
            services[q].push(task.finish_ns - task.start_ns);
        }
        for (&rack, &pi) in solution.file_racks(file).iter().zip(solution.file_schedule(file, usize::from(client))) {
            let q = queue_index(RACKS, CLASSES, client, rack as u16, class);
            expected[q] += pi;
            variance[q] += pi * (1.0 - pi);
        }
    }
    let bandwidths = setup.effective_bandwidths().context("the simulated bandwidths")?;
    let big_b = instance.aggregation_bandwidth_bps;
    let service = instance.service;
    let mut rows = Vec::new();
    for q in 0..queue_count {
        let chunks = delays[q].len() as u64;
        if chunks == 0 && expected[q] == 0.0 {
            continue;
        }
        let (client, rest) =
            (q / (usize::from(RACKS) * usize::from(CLASSES)), q % (usize::from(RACKS) * usize::from(CLASSES)));
        let (storage, class) = (rest / usize::from(CLASSES), rest % usize::from(CLASSES));
        let reserved_bps = bandwidths[q] * 8.0;
        let arrival_per_s = if span_s > 0.0 { chunks as f64 / span_s } else { 0.0 };
        let conn = connection_of(client, storage);
        let delay = Sample::new(std::mem::take(&mut delays[q])).stats();
        let transfer = Sample::new(std::mem::take(&mut services[q])).stats();
        rows.push(QueueRow {
            client: client as u16,
            storage: storage as u16,
            class: class as u8,
            chunks,
            arrival_per_s,
            reserved_bps,
            utilisation: jlwo::utilisation(arrival_per_s, reserved_bps, big_b, service.mean_s),
            delay_mean_s: delay.map_or(0.0, |s| s.mean_s),
            delay_var_s2: delay.map_or(0.0, |s| s.var_s2),
            predicted: jlwo::delay_moments(arrival_per_s, reserved_bps, big_b, &service, &conn),
            printed: jlwo::printed_delay_moments(arrival_per_s, reserved_bps, big_b, &service, &conn),
            service_mean_s: transfer.map_or(0.0, |s| s.mean_s),
            service_sd_s: transfer.map_or(0.0, |s| s.var_s2.sqrt()),
            service_predicted_s: if reserved_bps > 0.0 { service.mean_s * big_b / reserved_bps } else { f64::INFINITY },
            expected_chunks: expected[q],
            expected_var: variance[q],
        });
    }
    Ok(rows)
}

/// Fig. 3: the transfer times of each class's intra- and inter-rack chunks.
fn service_cdfs(
    log: &RecordLog,
    warmup: usize,
    setup: &TopologySetup,
    instance: &Instance,
) -> anyhow::Result<Vec<ServiceCdf>> {
    let bandwidths = setup.effective_bandwidths().context("the simulated bandwidths")?;
    let mut out = Vec::new();
    for class in 0..CLASSES {
        for intra in [true, false] {
            let (mut values, mut bw_sum, mut inverse_sum, mut inverse_sq_sum) = (Vec::new(), 0.0, 0.0, 0.0);
            for record in log.iter().skip(warmup).filter(|r| r.request.latency_class == class) {
                for task in record.tasks.iter().filter(|t| (t.node.0 == u32::from(record.request.frontend.0)) == intra)
                {
                    let q = queue_index(RACKS, CLASSES, record.request.frontend.0, task.node.0 as u16, class);
                    let bps = bandwidths[q] * 8.0;
                    values.push(task.finish_ns - task.start_ns);
                    bw_sum += bps;
                    inverse_sum += 1.0 / bps;
                    inverse_sq_sum += 1.0 / (bps * bps);
                }
            }
            let count = values.len() as f64;
            let sample = Sample::new(values);
            let Some(stats) = sample.stats() else { continue };
            out.push(ServiceCdf {
                class,
                intra,
                chunks: sample.len() as u64,
                mean_s: stats.mean_s,
                bandwidth_mean_bps: bw_sum / count,
                predicted_mean_s: instance.service.mean_s * instance.aggregation_bandwidth_bps * inverse_sum / count,
                predicted_se_s: instance.service.variance_s2().sqrt()
                    * instance.aggregation_bandwidth_bps
                    * inverse_sq_sum.sqrt()
                    / count,
                points: sample.cdf_points(CDF_POINTS),
            });
        }
    }
    Ok(out)
}
