//! The two ways a load generator sends requests, over any fetch function: open loop (each request
//! at its arrival time, whatever happened to earlier ones) and closed loop (N clients, each sending
//! its next request when its last one ended plus a think time), with one client-side record per
//! request.
//!
//! Owns: the send schedule, the in-flight bound of the open loop, the round-robin choice of gateway
//! ([`gateway_for`]), and the timestamps of the records. Must not: know S3 (the fetch function does
//! the I/O), retry, or drop a request: every request ends as exactly one record.
//!
//! No coordinated omission: an open-loop request's latency runs from its *scheduled* arrival, so a
//! request that waited for an in-flight slot (or for a late dispatcher) counts that wait;
//! `decision_start_ns` is when it was actually sent, and the gap to `arrival_ns` shows the wait.

use model::{FrontendId, Outcome, ReadRequest, RequestRecord};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Failure messages kept for the report (every failure is counted and recorded).
pub const KEPT_ERRORS: usize = 5;

/// Most requests in flight of an open loop unless told otherwise.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;

/// How one request's I/O ended.
#[derive(Debug)]
pub struct Fetched {
    /// When the last byte arrived (or the request failed): the record's completion, taken before
    /// any check of the bytes so that checking is not charged to the store.
    pub last_byte: Instant,
    /// `Err` with a message when the request failed or returned wrong bytes.
    pub outcome: Result<(), String>,
}

/// What one request's I/O resolves to.
pub type FetchFuture = Pin<Box<dyn Future<Output = Fetched> + Send>>;

/// The I/O of one request, sent to gateway `gateway` (an index into the run's gateways).
pub trait Fetch: Send + Sync + 'static {
    /// Performs `request` against `gateway`; resolves when its last byte arrived (or it failed).
    fn fetch(&self, request: ReadRequest, gateway: usize) -> FetchFuture;
}

/// How requests are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopMode {
    /// Each request at its arrival time; at most `max_in_flight` at once (later ones wait, and the
    /// wait counts in their latency).
    Open {
        /// In-flight bound (≥ 1).
        max_in_flight: usize,
    },
    /// `clients` clients take requests in workload order; each sends its next one when its last one
    /// ended plus `think`. Arrival times of the workload are ignored.
    Closed {
        /// Clients (≥ 1).
        clients: usize,
        /// Pause between a response and the client's next request.
        think: Duration,
    },
}

impl LoopMode {
    /// `open-loop` or `closed-loop`, the policy label of the run's report.
    pub fn label(self) -> &'static str {
        match self {
            LoopMode::Open { .. } => "open-loop",
            LoopMode::Closed { .. } => "closed-loop",
        }
    }
}

/// The gateway request `request_index` goes to: round-robin over `gateways` by request id, so the
/// spread is the same whatever order responses come back in.
pub fn gateway_for(request_index: u64, gateways: usize) -> usize {
    assert!(gateways > 0, "at least one gateway");
    (request_index % gateways as u64) as usize
}

/// What a run of the executor produced.
#[derive(Debug)]
pub struct ExecutorOutput {
    /// One record per request, in request order.
    pub records: Vec<RequestRecord>,
    /// Requests that failed.
    pub failed: u64,
    /// The first few failure messages.
    pub first_errors: Vec<String>,
}

/// Shared by the tasks of one run: one record slot per request (bounded by the request count) and
/// the kept failure messages.
struct Tally {
    start: Instant,
    slots: Mutex<Vec<Option<RequestRecord>>>,
    first_errors: Mutex<Vec<String>>,
    on_done: Box<dyn Fn() + Send + Sync>,
}

impl Tally {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).expect("a run shorter than 584 years")
    }

    /// Stores the record of `request`, which was scheduled at `arrival_ns` and sent at `sent_ns`.
    fn finish(&self, request: &ReadRequest, gateway: usize, arrival_ns: u64, sent_ns: u64, fetched: Fetched) {
        let last_byte_ns = u64::try_from(fetched.last_byte.saturating_duration_since(self.start).as_nanos())
            .expect("a run shorter than 584 years");
        let completion_ns = last_byte_ns.max(sent_ns);
        let outcome = match fetched.outcome {
            Ok(()) => Outcome::Ok,
            Err(message) => {
                let mut kept = self.first_errors.lock().expect("no task panics holding the lock");
                if kept.len() < KEPT_ERRORS {
                    kept.push(message);
                }
                Outcome::Failed
            }
        };
        let record = RequestRecord {
            request: request.id,
            frontend: FrontendId(u16::try_from(gateway).expect("at most 65536 gateways")),
            object: request.object,
            partition: request.partition,
            bytes: request.length,
            arrival_ns,
            decision_start_ns: sent_ns,
            decision_end_ns: sent_ns,
            completion_ns,
            probes: 0,
            probe_wait_ns: 0,
            decision_cpu_ns: 0,
            degraded: false,
            timed_out: false,
            outcome,
            class: 0,
            latency_class: 0,
        };
        let index = usize::try_from(request.id.0).expect("request ids are indices");
        let mut slots = self.slots.lock().expect("no task panics holding the lock");
        debug_assert!(slots[index].is_none(), "request {index} recorded twice");
        slots[index] = Some(record);
        drop(slots);
        (self.on_done)();
    }

    fn into_output(self) -> ExecutorOutput {
        let slots = self.slots.into_inner().expect("every task has ended");
        let records: Vec<RequestRecord> = slots
            .into_iter()
            .enumerate()
            .map(|(i, slot)| slot.unwrap_or_else(|| panic!("request {i} has no record")))
            .collect();
        let failed = records.iter().filter(|r| r.outcome == Outcome::Failed).count() as u64;
        ExecutorOutput { records, failed, first_errors: self.first_errors.into_inner().expect("every task has ended") }
    }
}

/// Sends every request of `requests` (sorted by arrival, ids `0..len`) through `fetch` as `mode`
/// says, spread over `gateways` gateways; `on_done` is called once per finished request (a
/// progress bar). Times in the records are nanoseconds since the call.
pub async fn execute<F: Fetch>(
    requests: Arc<Vec<ReadRequest>>,
    gateways: usize,
    mode: LoopMode,
    fetch: Arc<F>,
    on_done: Box<dyn Fn() + Send + Sync>,
) -> ExecutorOutput {
    assert!(gateways > 0, "at least one gateway");
    let tally = Arc::new(Tally {
        start: Instant::now(),
        slots: Mutex::new(vec![None; requests.len()]),
        first_errors: Mutex::new(Vec::new()),
        on_done,
    });
    match mode {
        LoopMode::Open { max_in_flight } => open_loop(&requests, gateways, max_in_flight, &fetch, &tally).await,
        LoopMode::Closed { clients, think } => closed_loop(&requests, gateways, clients, think, &fetch, &tally).await,
    }
    Arc::into_inner(tally).expect("every task has ended").into_output()
}

async fn open_loop<F: Fetch>(
    requests: &[ReadRequest],
    gateways: usize,
    max_in_flight: usize,
    fetch: &Arc<F>,
    tally: &Arc<Tally>,
) {
    assert!(max_in_flight > 0 && max_in_flight <= Semaphore::MAX_PERMITS, "a usable in-flight bound");
    let slots = Arc::new(Semaphore::new(max_in_flight));
    for request in requests {
        tokio::time::sleep_until(tally.start + Duration::from_nanos(request.arrival_ns)).await;
        // At the bound, the dispatcher waits here: the request's clock already runs (its latency is
        // measured from `arrival_ns`), and the requests behind it are sent late too.
        let slot = Arc::clone(&slots).acquire_owned().await.expect("the semaphore is never closed");
        // tokio's timer never fires early; the max only states the invariant the records promise.
        let sent_ns = tally.now_ns().max(request.arrival_ns);
        let gateway = gateway_for(request.id.0, gateways);
        let request = *request;
        let (fetch, tally) = (Arc::clone(fetch), Arc::clone(tally));
        tokio::spawn(async move {
            let outcome = fetch.fetch(request, gateway).await;
            tally.finish(&request, gateway, request.arrival_ns, sent_ns, outcome);
            // The tally goes before the slot: once every slot is back, the run owns the tally alone.
            drop(tally);
            drop(slot);
        });
    }
    // Every slot back means every request task has stored its record.
    let all = u32::try_from(max_in_flight).expect("bounded by Semaphore::MAX_PERMITS");
    let _drained = slots.acquire_many(all).await.expect("the semaphore is never closed");
}

async fn closed_loop<F: Fetch>(
    requests: &Arc<Vec<ReadRequest>>,
    gateways: usize,
    clients: usize,
    think: Duration,
    fetch: &Arc<F>,
    tally: &Arc<Tally>,
) {
    assert!(clients > 0, "at least one client");
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (requests, next, fetch, tally) =
                (Arc::clone(requests), Arc::clone(&next), Arc::clone(fetch), Arc::clone(tally));
            tokio::spawn(async move {
                // Bounded: each turn takes one of the run's requests.
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(request) = requests.get(index).copied() else { break };
                    let gateway = gateway_for(request.id.0, gateways);
                    // A closed-loop request arrives when its client is ready to send it.
                    let ready_ns = tally.now_ns();
                    let outcome = fetch.fetch(request, gateway).await;
                    tally.finish(&request, gateway, ready_ns, ready_ns, outcome);
                    if !think.is_zero() {
                        tokio::time::sleep(think).await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a closed-loop client panicked");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{ObjectId, PartitionId, RequestId};
    use std::sync::atomic::AtomicU64;

    const MS: u64 = 1_000_000;

    fn requests(arrivals_ms: &[u64]) -> Arc<Vec<ReadRequest>> {
        Arc::new(
            arrivals_ms
                .iter()
                .enumerate()
                .map(|(i, &ms)| ReadRequest {
                    id: RequestId(i as u64),
                    object: ObjectId(i as u64 % 3),
                    partition: PartitionId(0),
                    offset: 0,
                    length: 100,
                    arrival_ns: ms * MS,
                    class: 0,
                    latency_class: 0,
                })
                .collect(),
        )
    }

    /// A fake gateway: takes `service` per request, fails odd requests when `fail_odd`, and counts
    /// requests in flight (the most at once) and per gateway.
    struct FakeFetch {
        service: Duration,
        fail_odd: bool,
        in_flight: AtomicU64,
        most_in_flight: AtomicU64,
        per_gateway: Mutex<Vec<Vec<u64>>>,
    }

    impl FakeFetch {
        fn new(service_ms: u64, gateways: usize) -> Arc<FakeFetch> {
            Arc::new(FakeFetch {
                service: Duration::from_millis(service_ms),
                fail_odd: false,
                in_flight: AtomicU64::new(0),
                most_in_flight: AtomicU64::new(0),
                per_gateway: Mutex::new(vec![Vec::new(); gateways]),
            })
        }
    }

    impl Fetch for Arc<FakeFetch> {
        fn fetch(&self, request: ReadRequest, gateway: usize) -> FetchFuture {
            let this = Arc::clone(self);
            Box::pin(async move {
                let now = this.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                this.most_in_flight.fetch_max(now, Ordering::SeqCst);
                this.per_gateway.lock().unwrap()[gateway].push(request.id.0);
                tokio::time::sleep(this.service).await;
                this.in_flight.fetch_sub(1, Ordering::SeqCst);
                let outcome = if this.fail_odd && request.id.0 % 2 == 1 {
                    Err(format!("request {} failed", request.id.0))
                } else {
                    Ok(())
                };
                Fetched { last_byte: Instant::now(), outcome }
            })
        }
    }

    async fn run(
        requests: Arc<Vec<ReadRequest>>,
        gateways: usize,
        mode: LoopMode,
        fake: &Arc<FakeFetch>,
    ) -> ExecutorOutput {
        let done = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&done);
        let count = requests.len() as u64;
        let output = execute(
            requests,
            gateways,
            mode,
            Arc::new(Arc::clone(fake)),
            Box::new(move || {
                counter.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .await;
        assert_eq!(done.load(Ordering::SeqCst), count, "on_done once per request");
        output
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn open_loop_sends_each_request_at_its_arrival_time() {
        let fake = FakeFetch::new(1, 1);
        let arrivals = [0, 40, 80, 120, 160];
        let output = run(requests(&arrivals), 1, LoopMode::Open { max_in_flight: 8 }, &fake).await;
        for (record, &ms) in output.records.iter().zip(&arrivals) {
            assert_eq!(record.arrival_ns, ms * MS, "arrival is the scheduled time");
            assert!(record.decision_start_ns >= record.arrival_ns, "{record:?}");
            // Sent on time (generous slack for a loaded machine), not all at once at the start.
            assert!(record.decision_start_ns < record.arrival_ns + 30 * MS, "{record:?}");
            assert!(record.completion_ns >= record.decision_start_ns + MS, "{record:?}");
        }
        assert_eq!(output.failed, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn open_loop_bounds_in_flight_and_charges_the_wait_to_latency() {
        let fake = FakeFetch::new(30, 1);
        let output = run(requests(&[0; 12]), 1, LoopMode::Open { max_in_flight: 3 }, &fake).await;
        assert_eq!(fake.most_in_flight.load(Ordering::SeqCst), 3, "never more than the bound, and the bound is used");
        assert_eq!(output.records.len(), 12);
        // Requests 3.. waited for a slot: sent after the first batch finished, while their latency
        // still starts at 0; the last batch (9..12) took four services.
        for record in &output.records[3..] {
            assert!(record.decision_start_ns >= 30 * MS, "{record:?}");
            assert_eq!(record.arrival_ns, 0);
        }
        for record in &output.records[9..] {
            assert!(record.latency_ns() >= 120 * MS, "{record:?}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_go_round_robin_over_gateways_by_request_id() {
        assert_eq!((0..7).map(|i| gateway_for(i, 3)).collect::<Vec<_>>(), [0, 1, 2, 0, 1, 2, 0]);
        let fake = FakeFetch::new(1, 3);
        let output = run(requests(&[0; 9]), 3, LoopMode::Open { max_in_flight: 4 }, &fake).await;
        for record in &output.records {
            assert_eq!(usize::from(record.frontend.0), record.request.0 as usize % 3);
        }
        let mut per_gateway = fake.per_gateway.lock().unwrap().clone();
        per_gateway.iter_mut().for_each(|ids| ids.sort_unstable());
        assert_eq!(per_gateway, [vec![0, 3, 6], vec![1, 4, 7], vec![2, 5, 8]]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn closed_loop_keeps_one_request_per_client_and_thinks_between() {
        let fake = FakeFetch::new(20, 1);
        let started = std::time::Instant::now();
        let mode = LoopMode::Closed { clients: 2, think: Duration::from_millis(10) };
        let output = run(requests(&[0, 0, 0, 0, 0, 0]), 1, mode, &fake).await;
        assert_eq!(fake.most_in_flight.load(Ordering::SeqCst), 2);
        // Each client: three requests of 20 ms with two (three, the last one too) thinks of 10 ms.
        assert!(started.elapsed() >= Duration::from_millis(80), "{:?}", started.elapsed());
        for record in &output.records {
            assert_eq!(record.arrival_ns, record.decision_start_ns, "no client-side queue in a closed loop");
            assert!(record.latency_ns() >= 20 * MS, "{record:?}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failures_are_records_and_counted() {
        let mut fake = FakeFetch::new(1, 1);
        Arc::get_mut(&mut fake).unwrap().fail_odd = true;
        let output = run(requests(&[0, 0, 0, 0, 0]), 1, LoopMode::Open { max_in_flight: 2 }, &fake).await;
        assert_eq!(output.failed, 2);
        assert_eq!(
            output.records.iter().filter(|r| r.outcome == Outcome::Failed).map(|r| r.request.0).collect::<Vec<_>>(),
            [1, 3]
        );
        assert_eq!(output.first_errors.len(), 2);
    }
}
