//! Writing objects as stripes: a body cut into stripes as it arrives, each encoded and written
//! (at most a bound in flight, in order, every write in flight awaited before an error returns so
//! the caller can undo them), recorded Sealed once its units are durable, or acknowledged early
//! under a bucket's ack rule with the late units left to `pending`; a whole small body written at
//! once. Must not read objects.

use super::ErasureData;
use crate::data::cluster::membership::unix_now_ms;
use crate::data::io::stripe_io::NodeMap;
use crate::data::objects::packed::{PackRefused, Packed};
use crate::data::write::cut::{CutLimits, StripeCut, cut_stripes};
use crate::data::write::execute::WriteEnd;
use crate::data::write::late_copies::LateCopy;
use crate::data::write::stripe_write::{
    Landing, UNIT_ALIGN_BYTES, UnitWrites, encode_units, forget_placement, judge, place_new_stripe, unit_checksums,
    write_units,
};
use crate::data::{DataError, Redundancy, Written};
use bytes::Bytes;
use execution::WriteRule;
use futures_util::{StreamExt, stream};
use meta::{Layout, NodeId, NodeState, StripeId, StripeMeta, StripeSegment, WriteAck};
use std::sync::Arc;
use std::time::Duration;

/// Runs the futures `source` yields, at most `limit` at once, and returns their outputs in the
/// order they were yielded. `source` is pulled only while fewer than `limit` run, and the ones
/// running are driven while it is awaited (a body arriving slowly does not stall the stripes already
/// cut from it). `may_start(i)` is asked before the i-th starts. After its first refusal, the
/// first error from `source` or the first failure, nothing more is pulled or started, the ones in
/// flight are awaited (never dropped halfway), and the error comes back with every output that did
/// succeed, so the caller can undo them. (`buffered` with `try_collect`, as reads use, would drop
/// the writes still in flight at the first error, leaving units and stripe records for the
/// collectors instead of undoing them now.)
pub(super) async fn in_order_bounded<T, Fut>(
    limit: usize,
    mut may_start: impl FnMut(usize) -> Result<(), DataError>,
    source: impl futures_util::Stream<Item = Result<Fut, DataError>>,
) -> Result<Vec<T>, (DataError, Vec<T>)>
where
    Fut: std::future::Future<Output = Result<T, DataError>>,
{
    assert!(limit > 0, "at least one in flight");
    let mut source = std::pin::pin!(source);
    let mut in_flight = futures_util::stream::FuturesUnordered::new();
    let mut outputs: Vec<Option<T>> = Vec::new();
    let (mut source_ended, mut failure) = (false, None);
    // Each round takes one item from `source` or finishes one future. `source` is finite (a
    // body's stripes, bounded by the size limit and the write deadline), so this ends.
    loop {
        let may_pull = failure.is_none() && !source_ended && in_flight.len() < limit;
        if !may_pull && in_flight.is_empty() {
            break;
        }
        tokio::select! {
            // Finished writes first: their slots are what the next pull waits for.
            biased;
            Some((index, output)) = in_flight.next(), if !in_flight.is_empty() => match output {
                Ok(value) => outputs[index] = Some(value),
                Err(error) => {
                    failure.get_or_insert(error);
                }
            },
            item = source.next(), if may_pull => match item {
                None => source_ended = true,
                Some(Err(error)) => failure = Some(error),
                Some(Ok(future)) => {
                    let index = outputs.len();
                    match may_start(index) {
                        Err(refused) => failure = Some(refused),
                        Ok(()) => {
                            outputs.push(None);
                            in_flight.push(async move { (index, future.await) });
                        }
                    }
                }
            },
        }
    }
    assert!(in_flight.is_empty(), "every started future was awaited");
    match failure {
        None => Ok(outputs.into_iter().map(|output| output.expect("every started future finished")).collect()),
        Some(error) => Err((error, outputs.into_iter().flatten().collect())),
    }
}

/// `ceil(len / k)` rounded up to [`UNIT_ALIGN_BYTES`]: the unit size of a partial last stripe.
pub fn last_stripe_unit_bytes(len: u64, k: u64) -> u64 {
    len.div_ceil(k).div_ceil(UNIT_ALIGN_BYTES).max(1) * UNIT_ALIGN_BYTES
}

impl ErasureData {
    /// Encodes one stripe's worth of object bytes into n units of `unit_bytes` each (the data zero
    /// padded).
    pub(super) fn encode(&self, chunk: &Bytes, unit_bytes: u64) -> Result<Vec<Bytes>, DataError> {
        let k = self.code.data_units();
        let unit_len = usize::try_from(unit_bytes).map_err(|_| DataError::Internal("unit too large".into()))?;
        assert!(chunk.len() <= k * unit_len, "a stripe holds at most k units of bytes");
        let data: Vec<Bytes> = (0..k)
            .map(|i| {
                let start = (i * unit_len).min(chunk.len());
                let end = ((i + 1) * unit_len).min(chunk.len());
                chunk.slice(start..end)
            })
            .collect();
        encode_units(self.code.as_ref(), data, unit_bytes)
    }

    /// Writes the n units of a new stripe and records it (Sealed); returns the record and the
    /// redundancy of its durable units. Units go to n distinct nodes, Up ones first; with fewer
    /// than n Up (but at least k) the rest are placed on Down nodes unwritten. A unit whose write
    /// fails is placed elsewhere ([`write_units`]); one no node can take is left missing. The
    /// stripe is recorded only if what is durable meets the durability rule ([`judge`]), with its
    /// missing units in the same transaction (so repair finds it); otherwise, and if recording
    /// fails, the units written are deleted and nothing references them.
    ///
    /// Under an early `ack` rule (`k+1`, `k`) it returns as soon as the units landed survive the
    /// rule's failures, and under the straggler rule (`pending.straggler`) once all units but one
    /// landed and that one is late: the stripe is recorded with the others missing and pending
    /// before it returns, and [`PendingWrites`] lands them in the background.
    pub(super) async fn write_stripe(
        &self,
        units: Vec<Bytes>,
        unit_bytes: u64,
        ack: WriteAck,
        descriptor: Bytes,
    ) -> Result<(StripeMeta, Redundancy), DataError> {
        let n = units.len();
        let descriptors = vec![descriptor; n];
        let nodes: NodeMap = self.io.cluster().node_map().await?;
        let node_list: Vec<_> = nodes.values().cloned().collect();
        let (placement, to_write) = place_new_stripe(&self.io, &node_list, n, self.code.data_units())?;
        let meta = self.io.cluster().meta();
        let id = match meta.allocate_stripe_id().await {
            Ok(id) => id,
            Err(error) => {
                forget_placement(&self.io, &placement);
                return Err(DataError::Meta(error.to_string()));
            }
        };
        let rule =
            WriteRule { early_failures_tolerated: ack.early_failures_tolerated(), straggler: self.pending.straggler() };
        // Acknowledging with units still landing needs room among the pending writes.
        let permit = (rule != WriteRule::default()).then(|| self.pending.try_reserve()).flatten();
        let rule = if permit.is_some() { rule } else { WriteRule::default() };
        let described = (units.as_slice(), descriptors.as_slice());
        let code = self.code.as_ref();
        let run = write_units(&self.io, (&nodes, &node_list), code, id, described, (placement, &to_write), rule).await;
        if let WriteEnd::Acknowledged { straggler } = run.end {
            let permit = permit.expect("the core acknowledges early only under a rule, which has a permit");
            self.pending.count_acked(straggler);
            let landing = self.pending.admit(run.landing);
            let checksums = unit_checksums(&units);
            return self.record_early(nodes, (id, unit_bytes, checksums), run.writes, landing, permit).await;
        }
        let tolerated = match judge(&self.io, &nodes, id, &run).await {
            Ok(tolerated) => tolerated,
            Err(error) => {
                forget_placement(&self.io, &run.writes.placement);
                return Err(error);
            }
        };
        let writes = run.writes;
        let mut stripe = self.new_stripe_record(id, unit_bytes, writes.placement.clone(), unit_checksums(&units));
        if stripe.mark_missing(writes.missing(), unix_now_ms()) {
            self.io.counters().degraded_writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            metrics::counter!("lowtail_gateway_degraded_writes_total").increment(1);
        }
        match meta.create_stripe(stripe).await {
            Ok(stored) => {
                let redundancy =
                    Redundancy { failures_tolerated: tolerated, full: self.full_failures_tolerated, pending: false };
                Ok((stored, redundancy))
            }
            Err(error) => {
                self.io.delete_units_best_effort(&nodes, id, &writes.durable_units()).await;
                forget_placement(&self.io, &writes.placement);
                Err(DataError::Meta(error.to_string()))
            }
        }
    }

    /// The descriptor of the units of a stripe holding bytes `offset .. offset + length` of the
    /// write under way (labelled by the S3 layer: [`crate::data::io::descriptor::labelled`]).
    pub(super) fn describe_segment(&self, unit_bytes: u64, offset: u64, length: u64) -> Bytes {
        crate::data::io::descriptor::UnitDescriptor {
            format: crate::data::io::descriptor::FORMAT,
            code: self.code_name.clone(),
            unit_bytes,
            written_ms: unix_now_ms(),
            holds: crate::data::io::descriptor::Holds::Segment {
                label: crate::data::io::descriptor::current(),
                object_offset_bytes: offset,
                length_bytes: length,
            },
        }
        .encode()
    }

    /// A new sealed stripe's record, every unit durable (the caller marks the missing ones), with
    /// the units' CRC-32Cs (what a returning node's copies are checked against).
    pub(super) fn new_stripe_record(
        &self,
        id: StripeId,
        unit_bytes: u64,
        placement: Vec<NodeId>,
        unit_checksums: Vec<u32>,
    ) -> StripeMeta {
        let unit_checksums = Some(unit_checksums);
        StripeMeta { unit_checksums, ..StripeMeta::sealed(id, self.code_name.as_str(), unit_bytes, placement) }
    }

    /// Records a stripe acknowledged early, its `landing` units (and any never written) missing and
    /// pending, then hands the landing writes to [`PendingWrites`]. If recording fails, the write
    /// fails and every unit is deleted once its write has ended.
    pub(super) async fn record_early(
        &self,
        nodes: NodeMap,
        (id, unit_bytes, unit_checksums): (StripeId, u64, Vec<u32>),
        writes: UnitWrites,
        landing: Vec<(Landing, LateCopy)>,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<(StripeMeta, Redundancy), DataError> {
        let tolerated = self.code.failures_tolerated(&writes.durable).expect("acknowledged early only when decodable");
        let now_ms = unix_now_ms();
        let mut stripe = self.new_stripe_record(id, unit_bytes, writes.placement.clone(), unit_checksums);
        stripe.mark_missing(writes.missing(), now_ms);
        // With every late unit dropped nothing lands: the stripe is degraded, repair's at once.
        if !landing.is_empty() {
            stripe.pending_until_ms = Some(self.pending.pending_until_ms(now_ms));
            stripe.pending_writer = Some(self.io.incarnation().to_string());
        }
        // Pending, not degraded, when every unit short is one still landing.
        let pending = writes.missing().len() == landing.len();
        match self.io.cluster().meta().create_stripe(stripe).await {
            Ok(stored) => {
                if !landing.is_empty() {
                    self.pending.finish(nodes, stored.clone(), landing, permit);
                }
                Ok((stored, Redundancy { failures_tolerated: tolerated, full: self.full_failures_tolerated, pending }))
            }
            Err(error) => {
                let io = Arc::clone(&self.io);
                forget_placement(&io, &writes.placement);
                let mut written = writes.durable_units();
                tokio::spawn(crate::classes::carried(async move {
                    for ((unit, node, handle), _place) in landing {
                        if let Ok(Ok(())) = handle.await {
                            written.push((unit, node));
                        }
                    }
                    io.delete_units_best_effort(&nodes, id, &written).await;
                    drop(permit);
                }));
                Err(DataError::Meta(error.to_string()))
            }
        }
    }

    /// Stores a body given whole, acknowledged by `ack`: small ones packed (their m + 1 replicas
    /// durable, or all but one late one under the straggler rule, before any rule acknowledges
    /// them), the rest striped.
    pub(super) async fn write_whole(&self, body: Bytes, ack: WriteAck) -> Result<Written, DataError> {
        let size = body.len() as u64;
        let limit = self.io.config().max_object_bytes;
        if size > limit {
            return Err(DataError::TooLarge { size, limit });
        }
        // An empty object is packed too (a replica of no bytes, described like any other object),
        // so that it leaves a trace on the nodes for a metadata rebuild; striped, it has no stripe.
        let packing_max = self.io.config().packed.max_object_bytes;
        if packing_max > 0 && size <= packing_max {
            match self.packer.write(&body).await {
                // m + 1 replicas survive m failures, as the code does once sealed.
                Ok(Packed { layout, late_copy: false }) => {
                    return Ok(Written { layout, redundancy: self.full_redundancy() });
                }
                Ok(Packed { layout, late_copy: true }) => {
                    self.pending.count_acked(true);
                    let full = self.full_failures_tolerated;
                    let redundancy = Redundancy { failures_tolerated: full.saturating_sub(1), full, pending: true };
                    return Ok(Written { layout, redundancy });
                }
                Err(PackRefused::NotNow(why)) => tracing::debug!(%why, "object striped instead of packed"),
                Err(PackRefused::Failed(error)) => {
                    tracing::info!(%error, "packing failed; object striped instead");
                }
            }
        }
        if body.is_empty() {
            return Ok(Written {
                layout: Layout::Striped { segments: Vec::new() },
                redundancy: self.full_redundancy(),
            });
        }
        let deadline = self.write_deadline();
        // Cutting a body given whole slices it: no copy.
        let cuts = cut_stripes(stream::iter([Ok(body)]).boxed(), self.cut_limits(deadline));
        self.write_striped(cuts, deadline, ack).await
    }

    /// The redundancy of bytes whose every unit is durable.
    pub(super) fn full_redundancy(&self) -> Redundancy {
        Redundancy::full(self.full_failures_tolerated)
    }

    /// When a write starting now must be done (`write_deadline_ms`).
    pub(super) fn write_deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_millis(self.io.config().write_deadline_ms)
    }

    /// How a body of this data path is cut into stripes, for a write that must be done by `deadline`.
    pub(super) fn cut_limits(&self, deadline: tokio::time::Instant) -> CutLimits {
        let config = self.io.config();
        CutLimits {
            stripe_bytes: self.code.data_units() as u64 * config.unit_bytes,
            max_body_bytes: config.max_object_bytes,
            deadline,
        }
    }

    /// Writes the stripes `cuts` yields, up to `max_parallel_stripe_writes` at once, and returns the
    /// layout of them all. Past `deadline` no stripe is started: the stripe collector's grace
    /// assumes no stripe record waits longer than this (plus one stripe's write) for its object's
    /// commit. On any failure every stripe written is dropped again, and the error comes back.
    pub(super) async fn write_striped(
        &self,
        cuts: impl futures_util::Stream<Item = Result<StripeCut, DataError>> + Send,
        deadline: tokio::time::Instant,
        ack: WriteAck,
    ) -> Result<Written, DataError> {
        let k = self.code.data_units();
        let up = self.io.cluster().nodes().await?.iter().filter(|node| node.state == NodeState::Up).count();
        if up < k {
            return Err(DataError::Unavailable(format!(
                "{up} storage nodes up, a stripe of {} needs at least {k}",
                self.code_name
            )));
        }
        let k = k as u64;
        let unit_bytes = self.io.config().unit_bytes;
        let write_deadline_ms = self.io.config().write_deadline_ms;
        let may_start = |i: usize| {
            if i > 0 && tokio::time::Instant::now() > deadline {
                return Err(DataError::Unavailable(format!(
                    "the write ran past write_deadline_ms ({write_deadline_ms} ms) after {i} stripes; nothing was kept"
                )));
            }
            Ok(())
        };
        let writes = cuts.map(|cut| {
            cut.map(|cut| async move {
                let length = cut.bytes.len() as u64;
                // Only an object's last stripe is short; its units are the rest split k ways.
                let this_unit_bytes =
                    if length == k * unit_bytes { unit_bytes } else { last_stripe_unit_bytes(length, k) };
                let units = self.encode(&cut.bytes, this_unit_bytes)?;
                let descriptor = self.describe_segment(this_unit_bytes, cut.offset_bytes, length);
                let (stripe, redundancy) = self.write_stripe(units, this_unit_bytes, ack, descriptor).await?;
                let segment = StripeSegment {
                    stripe: stripe.id,
                    unit_bytes: this_unit_bytes,
                    object_offset_bytes: cut.offset_bytes,
                    length_bytes: length,
                };
                Ok((segment, redundancy))
            })
        });
        let parallel = self.io.config().max_parallel_stripe_writes;
        match in_order_bounded(parallel, may_start, writes).await {
            Ok(written) => {
                let redundancy = written.iter().map(|(_, r)| *r).fold(self.full_redundancy(), Redundancy::min);
                let segments = written.into_iter().map(|(segment, _)| segment).collect();
                Ok(Written { layout: Layout::Striped { segments }, redundancy })
            }
            Err((error, written)) => {
                // Nothing half-written stays referenced: drop the stripes already recorded.
                for (segment, _) in written {
                    if let Err(cleanup) = self.delete_stripe(segment.stripe).await {
                        tracing::warn!(stripe = %segment.stripe, %cleanup, "could not drop stripe of a failed write");
                    }
                }
                Err(error)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// What a run of [`in_order_bounded`] did: how many ran at once at most, which started, and
    /// how many are still running.
    #[derive(Default)]
    struct Trace {
        running: usize,
        most_running: usize,
        started: Vec<usize>,
    }

    /// A job that yields more the lower its index (so later ones finish first) and fails at `fail`.
    async fn job(trace: &Mutex<Trace>, index: usize, count: usize, fail: Option<usize>) -> Result<usize, DataError> {
        {
            let mut trace = trace.lock().unwrap();
            trace.running += 1;
            trace.most_running = trace.most_running.max(trace.running);
            trace.started.push(index);
        }
        for _ in 0..(count - index) {
            tokio::task::yield_now().await;
        }
        trace.lock().unwrap().running -= 1;
        if fail == Some(index) { Err(DataError::Unavailable(format!("job {index}"))) } else { Ok(index * 10) }
    }

    /// `count` jobs as a source stream.
    fn jobs<'a>(
        trace: &'a Mutex<Trace>,
        count: usize,
        fail: Option<usize>,
    ) -> impl futures_util::Stream<Item = Result<impl Future<Output = Result<usize, DataError>> + 'a, DataError>> + 'a
    {
        stream::iter((0..count).map(move |i| Ok(job(trace, i, count, fail))))
    }

    #[tokio::test]
    async fn outputs_come_back_in_order_with_at_most_the_limit_in_flight() {
        let trace = Mutex::new(Trace::default());
        let outputs = in_order_bounded(3, |_| Ok(()), jobs(&trace, 10, None)).await.unwrap();
        assert_eq!(outputs, (0..10).map(|i| i * 10).collect::<Vec<_>>());
        let trace = trace.into_inner().unwrap();
        assert_eq!((trace.most_running, trace.running), (3, 0));
        let trace = Mutex::new(Trace::default());
        in_order_bounded(1, |_| Ok(()), jobs(&trace, 5, None)).await.unwrap();
        assert_eq!(trace.into_inner().unwrap().most_running, 1, "a limit of 1 runs one after another");
    }

    #[tokio::test]
    async fn a_failure_stops_new_starts_awaits_the_rest_and_returns_what_succeeded() {
        let trace = Mutex::new(Trace::default());
        let (error, mut done) = in_order_bounded(3, |_| Ok(()), jobs(&trace, 10, Some(1))).await.unwrap_err();
        assert!(error.to_string().contains("job 1"), "{error}");
        let trace = trace.into_inner().unwrap();
        assert_eq!(trace.running, 0, "nothing left running");
        // Jobs 0..3 start; 2 finishes first and frees a slot for 3, then 1 fails: 4 never starts.
        assert_eq!(trace.started, vec![0, 1, 2, 3]);
        done.sort_unstable();
        assert_eq!(done, vec![0, 20, 30], "every success is handed back to be undone");
    }

    #[tokio::test]
    async fn a_refused_start_ends_the_run_after_the_ones_in_flight() {
        let trace = Mutex::new(Trace::default());
        let refuse = |i: usize| if i == 2 { Err(DataError::Unavailable("deadline".into())) } else { Ok(()) };
        let (error, done) = in_order_bounded(4, refuse, jobs(&trace, 6, None)).await.unwrap_err();
        assert!(error.to_string().contains("deadline"), "{error}");
        assert_eq!(trace.into_inner().unwrap().started, vec![0, 1]);
        assert_eq!(done, vec![0, 10]);
    }

    #[tokio::test]
    async fn an_error_from_the_source_ends_the_run_after_the_ones_in_flight() {
        let trace = Mutex::new(Trace::default());
        let source = jobs(&trace, 6, None).take(2).chain(stream::iter([Err(DataError::Body("reset".into()))]));
        let (error, done) = in_order_bounded(4, |_| Ok(()), source).await.unwrap_err();
        assert_eq!(error, DataError::Body("reset".into()));
        assert_eq!(trace.into_inner().unwrap().running, 0, "nothing left running");
        assert_eq!(done, vec![0, 10]);
    }

    #[tokio::test]
    async fn futures_in_flight_run_while_the_source_waits() {
        // The source's second item waits for the first future to finish: a helper that awaited
        // the source alone while it had room would never finish.
        let (finished, first_done) = tokio::sync::oneshot::channel::<()>();
        let first = futures_util::FutureExt::boxed(async move {
            tokio::task::yield_now().await;
            finished.send(()).expect("the source waits");
            Ok(1)
        });
        let source = stream::iter([Ok(first)]).chain(stream::once(async move {
            first_done.await.expect("the first future finished");
            Ok(futures_util::FutureExt::boxed(async { Ok(2) }))
        }));
        let run = in_order_bounded(2, |_| Ok(()), source);
        let outputs = tokio::time::timeout(Duration::from_secs(10), run).await.expect("no deadlock").unwrap();
        assert_eq!(outputs, vec![1, 2]);
    }
}
