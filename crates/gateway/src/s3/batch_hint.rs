//! Hinted parallel GETs: `x-lowtail-batch: <id>;n=<N>` on plain GetObject requests lets a client
//! that cannot send the batch read (an unchanged S3 SDK, plus one header) have N parallel GETs
//! planned together. The gateway holds the first GET of a batch id (per access key) for up to the
//! batch window (`S3Options::batch_window`, 2 ms by default) or until N have arrived, then reads
//! their objects as one batch ([`ObjectData::read_batch`]); each GET still gets its own ordinary
//! answer, with `x-lowtail-batched: <how many were planned together>`.
//!
//! A window gathers GETs of one access key, batch id and latency class, and is read in that class.
//!
//! Owns the windows (bounded: at most [`MAX_OPEN_WINDOWS`] ids held at once; past it a GET is read
//! alone) and the header's syntax. Must not read bytes except through `ObjectData`, or hold a GET
//! past its window.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use meta::Layout;
use s3s::{S3ErrorCode, S3Result};

use super::errors::s3;
use crate::data::{DataError, ObjectData, lock};

/// The request header.
pub const BATCH_HINT_HEADER: &str = "x-lowtail-batch";
/// The answer's header: objects planned together with this one (1: read alone).
pub const BATCHED_HEADER: &str = "x-lowtail-batched";
/// Longest batch id.
const MAX_ID_BYTES: usize = 128;
/// Most GETs one hint groups (the batch read's limit).
const MAX_HINTED: usize = 1_000;
/// Batch ids held open at once; a GET past it is read alone.
pub const MAX_OPEN_WINDOWS: usize = 10_000;
/// Largest object a hint groups: an object read through a window is held whole in memory (a larger
/// one is streamed alone, as any GET).
pub const MAX_HINTED_OBJECT_BYTES: u64 = 8 << 20;

/// A parsed `x-lowtail-batch` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hint {
    /// The client's batch id.
    pub id: String,
    /// How many GETs it sends under it.
    pub count: usize,
}

impl Hint {
    /// Parses `<id>;n=<N>`: an id of 1 to 128 visible ASCII characters, N from 1 to 1,000.
    pub fn parse(value: &str) -> S3Result<Hint> {
        let bad =
            |why: &str| s3(S3ErrorCode::InvalidArgument, format!("{BATCH_HINT_HEADER}: {why} (expected <id>;n=<N>)"));
        let (id, count) = value.split_once(';').ok_or_else(|| bad("no ;n="))?;
        let (id, count) = (id.trim(), count.trim());
        if id.is_empty() || id.len() > MAX_ID_BYTES || !id.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad("the id is 1 to 128 visible ASCII characters"));
        }
        let count: usize = count
            .strip_prefix("n=")
            .and_then(|n| n.parse().ok())
            .filter(|n| (1..=MAX_HINTED).contains(n))
            .ok_or_else(|| bad("n is a number from 1 to 1000"))?;
        Ok(Hint { id: id.to_string(), count })
    }
}

/// What a GET held in a window gets back: its object's bytes, and how many were read together.
pub type HintedRead = (Result<Vec<Bytes>, DataError>, usize);

/// One open window: the GETs that arrived, and a number telling it from a later window of the id.
struct Window {
    generation: u64,
    expected: usize,
    members: Vec<(Layout, tokio::sync::oneshot::Sender<HintedRead>)>,
}

/// A window's access key, batch id and latency class.
type WindowKey = (String, String, Option<crate::classes::ClassId>);

/// The open windows of one gateway.
pub struct HintWindows {
    window: Duration,
    open: Mutex<HashMap<WindowKey, Window>>,
    next_generation: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for HintWindows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HintWindows").field("window", &self.window).finish_non_exhaustive()
    }
}

impl HintWindows {
    /// Windows of `window` each.
    pub fn new(window: Duration) -> HintWindows {
        HintWindows { window, open: Mutex::new(HashMap::new()), next_generation: 0.into() }
    }

    /// Reads `layout` whole with the other GETs of `hint` from `owner` (the access key) that arrive
    /// within the window; alone when too many windows are open.
    pub async fn read(
        self: &Arc<Self>,
        data: &Arc<dyn ObjectData>,
        owner: &str,
        hint: &Hint,
        layout: Layout,
    ) -> HintedRead {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        // GETs of different latency classes are read in batches of their own, each in its class.
        let key = (owner.to_string(), hint.id.clone(), crate::classes::current());
        // Decided under the lock, carried out after it: the lock is never held across an await.
        let (alone, full) = {
            let mut open = lock(&self.open);
            if !open.contains_key(&key) && open.len() >= MAX_OPEN_WINDOWS {
                (Some(layout), None)
            } else {
                let window = open.entry(key.clone()).or_insert_with(|| {
                    let generation = self.next_generation.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    self.close_later(Arc::clone(data), key.clone(), generation);
                    Window { generation, expected: hint.count, members: Vec::new() }
                });
                window.members.push((layout, sender));
                let full = if window.members.len() >= window.expected { open.remove(&key) } else { None };
                (None, full)
            }
        };
        if let Some(layout) = alone {
            return read_together(data, vec![layout]).await.pop().expect("one read");
        }
        if let Some(window) = full {
            tokio::spawn(crate::classes::carried(flush(Arc::clone(data), window)));
        }
        receiver.await.unwrap_or_else(|_| (Err(DataError::Internal("a hinted read was dropped".into())), 1))
    }

    /// Closes the window `generation` of `key` after the window's time, if it is still open.
    /// The window's GETs are read in the class current now (the window's).
    fn close_later(self: &Arc<Self>, data: Arc<dyn ObjectData>, key: WindowKey, generation: u64) {
        let windows = Arc::clone(self);
        tokio::spawn(crate::classes::carried(async move {
            tokio::time::sleep(windows.window).await;
            let window = {
                let mut open = lock(&windows.open);
                match open.get(&key) {
                    Some(window) if window.generation == generation => open.remove(&key),
                    _ => None,
                }
            };
            if let Some(window) = window {
                flush(data, window).await;
            }
        }));
    }
}

/// Reads a window's objects as one batch and answers each GET.
async fn flush(data: Arc<dyn ObjectData>, window: Window) {
    let (layouts, senders): (Vec<Layout>, Vec<_>) = window.members.into_iter().unzip();
    metrics::histogram!("lowtail_gateway_hinted_batch_objects").record(layouts.len() as f64);
    let reads = read_together(&data, layouts).await;
    for (sender, read) in senders.into_iter().zip(reads) {
        // A GET whose client left is not waiting any more.
        let _ = sender.send(read);
    }
}

/// Every layout read whole through one batch read, in order.
async fn read_together(data: &Arc<dyn ObjectData>, layouts: Vec<Layout>) -> Vec<HintedRead> {
    let count = layouts.len();
    let mut results: Vec<Option<Result<Vec<Bytes>, DataError>>> = (0..count).map(|_| None).collect();
    let mut read = data.read_batch(&layouts);
    while let Some((index, result)) = read.next().await {
        results[index] = Some(result);
    }
    results
        .into_iter()
        .map(|result| (result.unwrap_or_else(|| Err(DataError::Internal("not read by the batch".into()))), count))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_an_id_and_a_count() {
        assert_eq!(Hint::parse("page-17;n=12").unwrap(), Hint { id: "page-17".into(), count: 12 });
        assert_eq!(Hint::parse(" a ; n=1").unwrap(), Hint { id: "a".into(), count: 1 });
        for bad in ["page-17", ";n=2", "a;n=0", "a;n=1001", "a;m=2", "a b;n=2", "a;n=x"] {
            let error = Hint::parse(bad).unwrap_err();
            assert_eq!(*error.code(), S3ErrorCode::InvalidArgument, "{bad}");
        }
    }
}
