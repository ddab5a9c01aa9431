//! GetObject response bodies that are sent as they are read: the range is split into reads along
//! the layout's stripe boundaries, the first read before the answer (so a store that cannot serve
//! the object answers with an error status), the rest while the client takes the body, one read
//! ahead, under a hold on the object's stripes so an overwrite or delete meanwhile does not cut
//! it off. Copies read their source in the same pieces. Owns that split, the exact-length read and
//! the stream. Must not decide what is read or how (that is the data
//! path's), or change anything.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use meta::Layout;
use s3s::dto::StreamingBlob;

use crate::data::{DataError, ObjectData, ReadHold};

/// Bytes a GetObject reads at a time (at least; a read ends on the next stripe boundary). A body of
/// at most this much is read whole before the answer, as before streaming.
pub const READ_PIECE_BYTES: u64 = 8 << 20;
/// Longest read even where the layout has no boundary (a packed object, one very large stripe).
const MAX_READ_PIECE_BYTES: u64 = 8 * READ_PIECE_BYTES;
/// Pieces read ahead of the one being sent (the channel's bound; one more may be being read).
const READ_AHEAD: usize = 1;

/// Object offsets where `layout`'s stripes (or parts) end, ascending.
fn boundaries(layout: &Layout, base: u64, out: &mut Vec<u64>) {
    match layout {
        Layout::Packed { .. } => {}
        Layout::Striped { segments } => {
            out.extend(segments.iter().map(|segment| base + segment.object_offset_bytes + segment.length_bytes));
        }
        Layout::Composite { pieces } => {
            for piece in pieces {
                boundaries(&piece.layout, base + piece.object_offset_bytes, out);
                out.push(base + piece.object_offset_bytes + piece.length_bytes);
            }
        }
    }
}

/// `range` cut into reads of at least `target` bytes that end on a stripe boundary of `layout`
/// where one comes within `8 × target` (the last read ends with the range). Reading whole stripes
/// never reads a unit in two requests.
pub fn read_pieces(layout: &Layout, range: Range<u64>, target: u64) -> Vec<Range<u64>> {
    assert!(target > 0, "a piece holds at least one byte");
    let mut ends = Vec::new();
    boundaries(layout, 0, &mut ends);
    ends.sort_unstable();
    ends.dedup();
    let longest = target.saturating_mul(MAX_READ_PIECE_BYTES / READ_PIECE_BYTES);
    let mut pieces = Vec::new();
    let mut start = range.start;
    // Each round ends one piece of at least one byte: at most range length rounds.
    while start < range.end {
        let want = start.saturating_add(target);
        let boundary = ends[ends.partition_point(|&end| end < want)..].first().copied();
        let end = boundary.unwrap_or(u64::MAX).min(start.saturating_add(longest)).min(range.end);
        pieces.push(start..end);
        start = end;
    }
    pieces
}

/// Bytes `range` of the object at `layout` as the buffers the store read (not joined), refusing a
/// read that comes back with any other length.
pub async fn read_exact(data: &dyn ObjectData, layout: &Layout, range: Range<u64>) -> Result<Vec<Bytes>, DataError> {
    let parts = data.read_parts(layout, range.clone()).await?;
    if parts.iter().map(|part| part.len() as u64).sum::<u64>() != range.end - range.start {
        return Err(DataError::Internal("the data path returned the wrong number of bytes".into()));
    }
    Ok(parts)
}

/// A body of `parts`, sent one after another.
pub fn body_of(parts: Vec<Bytes>) -> StreamingBlob {
    match <[Bytes; 1]>::try_from(parts) {
        Ok([whole]) => StreamingBlob::from(s3s::Body::from(whole)),
        Err(parts) => StreamingBlob::wrap(futures_util::stream::iter(parts.into_iter().map(Ok::<_, DataError>))),
    }
}

/// The body of `first` (already read) followed by the reads of `rest`, made by a task of their own
/// at most [`READ_AHEAD`] pieces ahead of what the client has taken. A read that fails or comes back
/// short ends the body with an error, and the client sees a body shorter than its Content-Length;
/// a client that goes away stops the reads. `hold` keeps the layout's bytes from being released
/// until the last read is done. The reads run in the latency class current when this is called.
/// With `expected`, the body is checked end to end as it goes (`verify::checked`).
pub fn streamed(
    data: Arc<dyn ObjectData>,
    (layout, hold): (Layout, ReadHold),
    first: Vec<Bytes>,
    rest: Vec<Range<u64>>,
    expected: Option<super::verify::Expected>,
) -> StreamingBlob {
    let (pieces, received) = tokio::sync::mpsc::channel::<Result<Vec<Bytes>, DataError>>(READ_AHEAD);
    // The rest of the body is read in the request's latency class, as its first piece was.
    tokio::spawn(crate::classes::carried(async move {
        let _hold = hold;
        // One read per piece, in order: bounded by the piece count.
        for piece in rest {
            let read = read_exact(data.as_ref(), &layout, piece).await;
            let failed = read.is_err();
            if let Err(error) = &read {
                tracing::warn!(%error, "a GetObject body ended early: a read failed after the answer began");
            }
            // The client went away (the receiver is dropped): nothing more to read for it.
            if pieces.send(read).await.is_err() || failed {
                return;
            }
        }
    }));
    let rest = tokio_stream::wrappers::ReceiverStream::new(received);
    let body = futures_util::stream::iter([Ok(first)]).chain(rest).flat_map(each_part);
    match expected {
        Some(expected) => StreamingBlob::wrap(super::verify::checked(Box::pin(body), expected)),
        None => StreamingBlob::wrap(body),
    }
}

/// A read's parts one by one (or its error), for a stream of buffers.
pub fn each_part(
    read: Result<Vec<Bytes>, DataError>,
) -> futures_util::stream::Iter<std::vec::IntoIter<Result<Bytes, DataError>>> {
    let parts: Vec<Result<Bytes, DataError>> = match read {
        Ok(parts) => parts.into_iter().map(Ok).collect(),
        Err(error) => vec![Err(error)],
    };
    futures_util::stream::iter(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use meta::{CompositePiece, StripeId, StripeSegment};

    fn striped(offset: u64, lengths: &[u64]) -> Layout {
        let mut at = offset;
        let segments = lengths
            .iter()
            .enumerate()
            .map(|(i, &length)| {
                let segment = StripeSegment {
                    stripe: StripeId(i as u64),
                    unit_bytes: 1,
                    object_offset_bytes: at,
                    length_bytes: length,
                };
                at += length;
                segment
            })
            .collect();
        Layout::Striped { segments }
    }

    #[test]
    fn pieces_end_on_stripe_boundaries_past_the_target() {
        let mib = 1u64 << 20;
        // Six stripes of 6 MiB and one of 3 MiB.
        let layout = striped(0, &[6 * mib, 6 * mib, 6 * mib, 6 * mib, 6 * mib, 6 * mib, 3 * mib]);
        let pieces = read_pieces(&layout, 0..39 * mib, 8 * mib);
        assert_eq!(pieces, vec![0..12 * mib, 12 * mib..24 * mib, 24 * mib..36 * mib, 36 * mib..39 * mib]);
        // A range starting inside a stripe: the first piece ends on the boundary past its target.
        let pieces = read_pieces(&layout, mib + 5..20 * mib, 8 * mib);
        assert_eq!(pieces, vec![mib + 5..12 * mib, 12 * mib..20 * mib]);
        assert_eq!(read_pieces(&layout, 0..5, 8 * mib), vec![0..5], "a small range is one read");
        assert!(read_pieces(&layout, 7..7, 8 * mib).is_empty());
    }

    #[test]
    fn pieces_without_boundaries_are_capped_and_cover_the_range() {
        let packed =
            Layout::Packed { stripe: StripeId(1), unit: 0, offset_bytes: 0, length_bytes: 100, replica_unit: None };
        assert_eq!(read_pieces(&packed, 0..100, 30), vec![0..100], "within 8 × the target");
        assert_eq!(read_pieces(&packed, 0..1000, 30), vec![0..240, 240..480, 480..720, 720..960, 960..1000]);
        // Parts of a multipart object: their own stripes and their ends are boundaries.
        let composite = Layout::Composite {
            pieces: vec![
                CompositePiece {
                    checksum: Default::default(),
                    object_offset_bytes: 0,
                    length_bytes: 50,
                    layout: striped(0, &[20, 30]),
                },
                CompositePiece {
                    checksum: Default::default(),
                    object_offset_bytes: 50,
                    length_bytes: 45,
                    layout: striped(0, &[45]),
                },
            ],
        };
        assert_eq!(read_pieces(&composite, 0..95, 10), vec![0..20, 20..50, 50..95]);
        assert_eq!(read_pieces(&composite, 0..95, 25), vec![0..50, 50..95]);
    }
}
