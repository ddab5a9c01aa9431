//! Reading a striped object's byte range: only the unit ranges it covers, a row of data units read
//! as one plan when the read controller reads rows (or would go around a node), each unit range
//! otherwise through `Reads` (planned, robust, degraded); under a profile with `access =
//! "ecstore"` the stripes it covers whole as one EC-Store batch. Must not write.

use super::ErasureData;
use crate::data::DataError;
use crate::data::io::stripe_io::NodeMap;
use crate::data::objects::batch::{lookup, segment_bytes};
use crate::data::read::controller::{BlockResult, Controller, MAX_BATCH_BLOCKS};
use bytes::Bytes;
use codec::ErasureCode;
use futures_util::{StreamExt, TryStreamExt, stream};
use meta::{StripeMeta, StripeSegment};
use policy::profile::Access;
use std::ops::Range;
use std::sync::Arc;

/// One unit range an object read needs.
pub(super) struct UnitPiece {
    pub(super) stripe: Arc<StripeMeta>,
    pub(super) code: Arc<dyn ErasureCode>,
    pub(super) unit: usize,
    pub(super) offset: u64,
    pub(super) length: u64,
}

/// Consecutive pieces of one stripe, read as one row under a row-reading policy.
pub(super) type RowGroup = Vec<UnitPiece>;

/// `pieces` (in object order) grouped by stripe: the pieces of one stripe are consecutive.
pub(super) fn row_groups(pieces: Vec<UnitPiece>) -> Vec<RowGroup> {
    let mut groups: Vec<RowGroup> = Vec::new();
    for piece in pieces {
        match groups.last_mut() {
            Some(group) if group[0].stripe.id == piece.stripe.id => group.push(piece),
            _ => groups.push(vec![piece]),
        }
    }
    groups
}

impl ErasureData {
    /// The pieces of one stripe through one row read of the range that covers them all in every
    /// unit (FAST CLOUD's request: the same range of n units, done at the first k; `hedged`'s
    /// around a node it avoids), each piece cut from its unit's bytes.
    pub(super) async fn read_row_group(&self, nodes: &NodeMap, mut row: RowGroup) -> Result<Vec<Bytes>, DataError> {
        if row.len() == 1 {
            let piece = row.pop().expect("one piece");
            return Ok(vec![self.read_piece(nodes, piece).await?]);
        }
        let start = row.iter().map(|p| p.offset).min().expect("a group has pieces");
        let end = row.iter().map(|p| p.offset + p.length).max().expect("a group has pieces");
        let units = row[0].unit..row[row.len() - 1].unit + 1;
        assert_eq!(units.len(), row.len(), "a stripe's pieces are of consecutive units");
        let (stripe, code) = (&row[0].stripe, &row[0].code);
        let read = self.reads.read_units(nodes, stripe, code.as_ref(), units, start, end - start).await?;
        Ok(row
            .iter()
            .zip(read)
            .map(|(piece, unit)| {
                let from = (piece.offset - start) as usize;
                unit.slice(from..from + piece.length as usize)
            })
            .collect())
    }

    /// Whether the read policy wants `row`'s pieces (of one stripe, more than one) read as one row.
    pub(super) fn wants_row(&self, nodes: &NodeMap, row: &RowGroup) -> bool {
        if row.len() < 2 {
            return false;
        }
        let start = row.iter().map(|p| p.offset).min().expect("a group has pieces");
        let end = row.iter().map(|p| p.offset + p.length).max().expect("a group has pieces");
        let units = row[0].unit..row[row.len() - 1].unit + 1;
        self.reads.wants_row(nodes, &row[0].stripe, row[0].code.as_ref(), units, start, end - start)
    }

    pub(super) async fn read_piece(&self, nodes: &NodeMap, piece: UnitPiece) -> Result<Bytes, DataError> {
        self.reads.read_range(nodes, &piece.stripe, piece.code.as_ref(), piece.unit, piece.offset, piece.length).await
    }

    /// The bytes of `range` of a striped object: under a profile with `access = "ecstore"` (and a
    /// controller to plan them) the stripes the range covers whole are one EC-Store batch, planned
    /// together by the access planner, and the parts of the first and last stripe it covers in
    /// part go per range; otherwise every unit range per range.
    pub(super) async fn read_striped(
        &self,
        segments: &[StripeSegment],
        range: Range<u64>,
    ) -> Result<Vec<Bytes>, DataError> {
        let touched: Vec<&StripeSegment> = segments
            .iter()
            .filter(|s| s.object_offset_bytes + s.length_bytes > range.start && s.object_offset_bytes < range.end)
            .collect();
        let whole = |s: &&StripeSegment| {
            s.object_offset_bytes >= range.start && s.object_offset_bytes + s.length_bytes <= range.end
        };
        let Some(controller) = self.access_planner() else { return self.read_pieces(&touched, range).await };
        // The range is contiguous: the stripes it covers whole are one run, between at most one
        // partial stripe before it and one after.
        let (Some(first), Some(last)) = (touched.iter().position(whole), touched.iter().rposition(whole)) else {
            return self.read_pieces(&touched, range).await;
        };
        let mut parts = self.read_pieces(&touched[..first], range.clone()).await?;
        parts.extend(self.read_blocks(controller, &touched[first..=last]).await?);
        parts.extend(self.read_pieces(&touched[last + 1..], range).await?);
        Ok(parts)
    }

    /// The controller, when the request's profile plans whole stripes as an EC-Store batch (a
    /// refused profile goes per range, where its refusal is the answer).
    fn access_planner(&self) -> Option<&Arc<Controller>> {
        let active = crate::profiles::active()?;
        let batched = active.profile.access == Access::Ecstore && active.refusal.is_none();
        batched.then(|| self.reads.controller()).flatten()
    }

    /// The whole stripes of `segments` as batches of blocks planned by `controller`'s access
    /// planner (at most [`MAX_BATCH_BLOCKS`] a batch): each segment's bytes in order.
    async fn read_blocks(&self, controller: &Controller, segments: &[&StripeSegment]) -> Result<Vec<Bytes>, DataError> {
        let mut parts = Vec::new();
        for chunk in segments.chunks(MAX_BATCH_BLOCKS) {
            let mut blocks = Vec::with_capacity(chunk.len());
            for segment in chunk {
                blocks.push(lookup(&self.io, (*segment).clone()).await?);
            }
            let mut results: Vec<Option<BlockResult>> = vec![None; blocks.len()];
            controller
                .read_batch(&self.io, &blocks, self.reads.pool(), &mut |i, result| results[i] = Some(result))
                .await;
            for (segment, result) in chunk.iter().zip(results) {
                let units =
                    result.ok_or_else(|| DataError::Internal("a block of a batch was not delivered".into()))??;
                parts.extend(segment_bytes(units, segment.length_bytes));
            }
        }
        Ok(parts)
    }

    /// The bytes of `range` in `segments` (the ones it touches), every unit range per range.
    async fn read_pieces(&self, segments: &[&StripeSegment], range: Range<u64>) -> Result<Vec<Bytes>, DataError> {
        if segments.is_empty() {
            return Ok(Vec::new());
        }
        let nodes = self.io.cluster().node_map().await?;
        // Every unit range the read needs, in object order.
        let mut pieces = Vec::new();
        let mut expected = 0;
        for segment in segments {
            let segment_end = segment.object_offset_bytes + segment.length_bytes;
            let stripe = Arc::new(self.io.stripe(segment.stripe).await?);
            if stripe.unit_bytes != segment.unit_bytes {
                return Err(DataError::Internal(format!("stripe {} unit size disagrees with the layout", stripe.id)));
            }
            let code = self.io.code(&stripe.code)?;
            let k = code.data_units() as u64;
            assert!(segment.length_bytes <= k * segment.unit_bytes, "segment longer than its stripe");
            let start = range.start.max(segment.object_offset_bytes) - segment.object_offset_bytes;
            let end = range.end.min(segment_end) - segment.object_offset_bytes;
            expected += end - start;
            let mut position = start;
            while position < end {
                let unit = position / segment.unit_bytes;
                let offset = position % segment.unit_bytes;
                let length = (segment.unit_bytes - offset).min(end - position);
                pieces.push(UnitPiece {
                    stripe: Arc::clone(&stripe),
                    code: Arc::clone(&code),
                    unit: unit as usize,
                    offset,
                    length,
                });
                position += length;
            }
        }
        let nodes = &nodes;
        // Each stripe's pieces as one row read where the policy reads rows or wants this one as
        // a row (around a node it avoids), else piece by piece.
        let mut reads: Vec<RowGroup> = Vec::new();
        for row in row_groups(pieces) {
            if self.reads.reads_rows() || self.wants_row(nodes, &row) {
                reads.push(row);
            } else {
                reads.extend(row.into_iter().map(|piece| vec![piece]));
            }
        }
        let parts: Vec<Bytes> = stream::iter(reads.into_iter().map(|row| self.read_row_group(nodes, row)))
            .buffered(self.io.config().max_parallel_unit_reads)
            .try_collect::<Vec<Vec<Bytes>>>()
            .await?
            .into_iter()
            .flatten()
            .collect();
        let read: usize = parts.iter().map(Bytes::len).sum();
        assert_eq!(read as u64, expected, "the unit ranges cover the whole range");
        Ok(parts)
    }
}
