//! Batch reads of whole objects ([`ObjectData::read_batch`]): which objects' bytes are read as
//! blocks of one EC-Store batch (striped objects: each of their stripes is a block, read whole by
//! [`Controller::read_batch`]) and which are read one by one beside it (packed and composite
//! objects, and every object when no controller is attached), and the assembly of each object's
//! bytes from its blocks' data units. Owns that mapping and assembly; must not plan or read units
//! (the controller's), or touch object metadata.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{self, BoxStream, FuturesUnordered};
use futures_util::{FutureExt, StreamExt};
use meta::{Layout, StripeSegment};

use crate::data::io::stripe_io::StripeIo;
use crate::data::read::Reads;
use crate::data::read::controller::{BatchBlock, BlockResult, Controller};
use crate::data::{DataError, ObjectData};

/// One object of a batch read, as it is yielded: its index in the batch and its bytes.
pub type BatchItem = (usize, Result<Vec<Bytes>, DataError>);
/// The objects of a batch read, in the order they were read.
pub type BatchStream<'a> = BoxStream<'a, BatchItem>;

/// Objects read at once when each is read on its own.
const PARALLEL_OBJECTS: usize = 16;
/// Stripe records looked up at once.
const PARALLEL_LOOKUPS: usize = 32;

/// Every object read whole on its own, [`PARALLEL_OBJECTS`] at a time.
pub fn read_each<'a, D: ObjectData + ?Sized>(data: &'a D, layouts: &'a [Layout]) -> BatchStream<'a> {
    stream::iter(layouts.iter().enumerate())
        .map(move |(index, layout)| async move { (index, data.read_parts(layout, 0..layout.size_bytes()).await) })
        .buffer_unordered(PARALLEL_OBJECTS)
        .boxed()
}

/// The batch read of the erasure-coded store: striped objects' stripes planned together by
/// `controller`, the other objects read by `data` beside them.
pub fn read_planned<'a, D: ObjectData + ?Sized>(
    data: &'a D,
    io: &'a StripeIo,
    reads: &'a Reads,
    controller: &'a Controller,
    layouts: &'a [Layout],
) -> BatchStream<'a> {
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<BatchItem>();
    let driver = async move {
        let (striped, others): (Vec<usize>, Vec<usize>) = (0..layouts.len())
            .partition(|&i| matches!(&layouts[i], Layout::Striped { segments } if !segments.is_empty()));
        let separately = async {
            let mut each: FuturesUnordered<_> = others
                .iter()
                .map(|&index| {
                    let layout = &layouts[index];
                    async move { (index, data.read_parts(layout, 0..layout.size_bytes()).await) }
                })
                .collect();
            while let Some(item) = each.next().await {
                // The receiver outlives the driver: it is the stream this function returns.
                let _ = sender.send(item);
            }
        };
        let together = read_striped(io, reads, controller, layouts, &striped, &sender);
        futures_util::future::join(separately, together).await;
    };
    // The driver sends every object and ends; the stream ends when it has and every item is taken.
    let items = stream::poll_fn(move |cx| receiver.poll_recv(cx));
    let driven = driver.into_stream().filter_map(|()| std::future::ready(None));
    stream::select(driven, items).boxed()
}

/// Reads the striped objects `objects` (indices into `layouts`) as one batch of their stripes and
/// sends each object once its last stripe is in.
async fn read_striped(
    io: &StripeIo,
    reads: &Reads,
    controller: &Controller,
    layouts: &[Layout],
    objects: &[usize],
    sender: &tokio::sync::mpsc::UnboundedSender<BatchItem>,
) {
    let (mut assembly, all_owners) = Assembly::new(layouts, objects);
    let segments: Vec<StripeSegment> =
        all_owners.iter().map(|&(object, segment)| segment_of(layouts, object, segment).clone()).collect();
    let lookups: Vec<Result<BatchBlock, DataError>> =
        stream::iter(segments).map(|segment| lookup(io, segment)).buffered(PARALLEL_LOOKUPS).collect().await;
    let mut blocks = Vec::with_capacity(lookups.len());
    let mut owners = Vec::with_capacity(lookups.len());
    for (owner, looked_up) in all_owners.into_iter().zip(lookups) {
        match looked_up {
            Ok(block) => {
                blocks.push(block);
                owners.push(owner);
            }
            Err(error) => assembly.fail(owner.0, error, sender),
        }
    }
    if blocks.is_empty() {
        return;
    }
    let mut deliver = |block: usize, result: BlockResult| {
        let (object, segment) = owners[block];
        assembly.block_read(layouts, object, segment, result, sender);
    };
    controller.read_batch(io, &blocks, reads.pool(), &mut deliver).await;
}

/// A segment's stripe record and code, checked against the layout.
pub(crate) async fn lookup(io: &StripeIo, segment: StripeSegment) -> Result<BatchBlock, DataError> {
    let stripe = io.stripe(segment.stripe).await?;
    if stripe.unit_bytes != segment.unit_bytes {
        return Err(DataError::Internal(format!("stripe {} unit size disagrees with the layout", stripe.id)));
    }
    let code = io.code(&stripe.code)?;
    Ok(BatchBlock { stripe: Arc::new(stripe), code })
}

/// The objects being put together from their stripes' data units.
struct Assembly {
    /// Per object of the batch: each segment's bytes once read; `None` for objects not in it or
    /// already sent.
    parts: Vec<Option<Vec<Option<Vec<Bytes>>>>>,
}

impl Assembly {
    /// The assembly of `objects`, and the (object, segment) of each of their stripes in order.
    fn new(layouts: &[Layout], objects: &[usize]) -> (Assembly, Vec<(usize, usize)>) {
        let mut parts = vec![None; layouts.len()];
        let mut owners = Vec::new();
        for &object in objects {
            let Layout::Striped { segments } = &layouts[object] else { unreachable!("only striped objects") };
            parts[object] = Some(vec![None; segments.len()]);
            owners.extend((0..segments.len()).map(|segment| (object, segment)));
        }
        (Assembly { parts }, owners)
    }

    /// Sends `error` for `object` unless it was sent already.
    fn fail(&mut self, object: usize, error: DataError, sender: &tokio::sync::mpsc::UnboundedSender<BatchItem>) {
        if self.parts[object].take().is_some() {
            let _ = sender.send((object, Err(error)));
        }
    }

    /// Files a block's data units as `object`'s segment `segment` (the object's bytes laid out unit
    /// after unit, the last unit's padding cut); sends the object when it is whole.
    fn block_read(
        &mut self,
        layouts: &[Layout],
        object: usize,
        segment: usize,
        result: BlockResult,
        sender: &tokio::sync::mpsc::UnboundedSender<BatchItem>,
    ) {
        let units = match result {
            Ok(units) => units,
            Err(error) => return self.fail(object, error, sender),
        };
        let length = segment_of(layouts, object, segment).length_bytes;
        let Some(parts) = self.parts[object].as_mut() else { return };
        parts[segment] = Some(segment_bytes(units, length));
        if parts.iter().all(Option::is_some) {
            let whole = self.parts[object].take().expect("present").into_iter().flatten().flatten().collect();
            let _ = sender.send((object, Ok(whole)));
        }
    }
}

/// Segment `segment` of striped object `object`.
fn segment_of(layouts: &[Layout], object: usize, segment: usize) -> &StripeSegment {
    let Layout::Striped { segments } = &layouts[object] else { unreachable!("only striped objects") };
    &segments[segment]
}

/// The first `length` bytes of `units` laid end to end, without copying.
pub(crate) fn segment_bytes(units: Vec<Bytes>, length: u64) -> Vec<Bytes> {
    let mut left = length as usize;
    let mut out = Vec::with_capacity(units.len());
    for unit in units {
        if left == 0 {
            break;
        }
        let take = unit.len().min(left);
        out.push(unit.slice(..take));
        left -= take;
    }
    assert_eq!(left, 0, "a stripe's data units hold its segment");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_is_its_units_end_to_end_cut_to_its_length() {
        let units = vec![Bytes::from_static(b"abcd"), Bytes::from_static(b"efgh"), Bytes::from_static(b"ij\0\0")];
        let parts = segment_bytes(units, 10);
        assert_eq!(parts.concat(), b"abcdefghij");
        let units = vec![Bytes::from_static(b"abcd"), Bytes::from_static(b"\0\0\0\0")];
        assert_eq!(segment_bytes(units, 3).concat(), b"abc");
    }
}
