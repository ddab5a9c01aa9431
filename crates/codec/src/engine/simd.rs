//! What every SIMD engine shares: the [`Kernel`] trait an engine implements
//! (its per-coefficient table, its step, its monomorphised kernel), and the
//! one driver that turns a kernel into an [`Engine`]: cache blocks, output
//! groups, source-major coefficient columns, streaming stores and the
//! byte-at-a-time tail.
//!
//! Must not: contain instruction-set specific code; that lives in each
//! engine's file, behind `#[target_feature]`.

use super::{Coefficients, Engine, EngineKind, MAX_GROUP_OUTPUTS, Mode, STREAMING_STORE_MIN_BYTES, blocks};
use crate::gf;

/// A SIMD engine's kernel. Implemented only by zero-sized engine types that
/// can be constructed only after checking the CPU, so holding `&self` proves
/// the instructions exist.
pub(crate) trait Kernel: Send + Sync + 'static {
    /// Which engine this is.
    const KIND: EngineKind;
    /// Bytes per kernel step; the rest of a slice is done byte by byte.
    const STEP_BYTES: usize;
    /// Alignment non-temporal stores need, or `None` when the engine never streams.
    const STREAM_ALIGNMENT: Option<usize>;
    /// The per-coefficient table the kernel reads.
    type Table: Copy + Default;

    /// This engine's tables of a prepared coefficient matrix, row-major.
    fn tables(coeffs: &Coefficients) -> &[Self::Table];

    /// The table of one constant.
    fn table(c: u8) -> Self::Table;

    /// `outputs[i] (=|^=) Σ_j columns[j][i] · sources[j]` over `[start, end)` for N outputs.
    ///
    /// # Safety
    /// Every pointer addresses at least `end` bytes; `end - start` is a
    /// multiple of `STEP_BYTES`; `columns` has one entry per source; with
    /// `stream`, every output pointer is aligned to `STREAM_ALIGNMENT`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn run<const N: usize>(
        &self,
        columns: &[[Self::Table; MAX_GROUP_OUTPUTS]],
        sources: &[*const u8],
        outputs: &[*mut u8],
        start: usize,
        end: usize,
        mode: Mode,
        stream: bool,
    );
}

impl<K: Kernel> Engine for K {
    fn kind(&self) -> EngineKind {
        K::KIND
    }

    fn combine_unchecked(&self, coeffs: &Coefficients, sources: &[&[u8]], outputs: &mut [&mut [u8]], mode: Mode) {
        let len = sources[0].len();
        let simd_len = len - len % K::STEP_BYTES;
        let pointers = Pointers::new(sources, outputs);
        let stream = K::STREAM_ALIGNMENT.is_some_and(|alignment| pointers.streaming(len, mode, alignment));
        for_each_group(simd_len, outputs.len(), |first, count, start, end| {
            let columns = group_columns(K::tables(coeffs), sources.len(), first, count);
            let group_outputs = &pointers.outputs[first..first + count];
            // SAFETY: the engine contract guarantees equal slice lengths ≥ `end`;
            // `for_each_group` yields multiples of the step; `streaming` checked alignment.
            unsafe { dispatch(self, &columns, &pointers.sources, group_outputs, start, end, mode, stream) }
        });
        combine_tail(coeffs, sources, outputs, mode, simd_len);
    }

    fn mul_slice(&self, c: u8, src: &[u8], dst: &mut [u8]) {
        single(self, c, src, dst, Mode::Overwrite);
    }

    fn mul_add_slice(&self, c: u8, src: &[u8], dst: &mut [u8]) {
        single(self, c, src, dst, Mode::Accumulate);
    }
}

fn single<K: Kernel>(kernel: &K, c: u8, src: &[u8], dst: &mut [u8], mode: Mode) {
    assert_eq!(src.len(), dst.len(), "slice lengths differ");
    let simd_len = src.len() - src.len() % K::STEP_BYTES;
    if simd_len > 0 {
        let mut column = [K::Table::default(); MAX_GROUP_OUTPUTS];
        column[0] = K::table(c);
        // SAFETY: lengths checked above; `simd_len` is a multiple of the step; no streaming.
        unsafe { dispatch(kernel, &[column], &[src.as_ptr()], &[dst.as_mut_ptr()], 0, simd_len, mode, false) }
    }
    let row = &gf::MUL_TABLE[c as usize];
    for (d, &s) in dst[simd_len..].iter_mut().zip(&src[simd_len..]) {
        *d = if mode == Mode::Accumulate { *d ^ row[s as usize] } else { row[s as usize] };
    }
}

/// Runs a group of 1..=4 outputs on its monomorphised kernel.
///
/// # Safety
/// As [`Kernel::run`].
#[allow(clippy::too_many_arguments)]
unsafe fn dispatch<K: Kernel>(
    kernel: &K,
    columns: &[[K::Table; MAX_GROUP_OUTPUTS]],
    sources: &[*const u8],
    outputs: &[*mut u8],
    start: usize,
    end: usize,
    mode: Mode,
    stream: bool,
) {
    debug_assert_eq!((end - start) % K::STEP_BYTES, 0);
    debug_assert_eq!(columns.len(), sources.len());
    // SAFETY: forwarded from this function's contract.
    unsafe {
        match outputs.len() {
            1 => kernel.run::<1>(columns, sources, outputs, start, end, mode, stream),
            2 => kernel.run::<2>(columns, sources, outputs, start, end, mode, stream),
            3 => kernel.run::<3>(columns, sources, outputs, start, end, mode, stream),
            4 => kernel.run::<4>(columns, sources, outputs, start, end, mode, stream),
            _ => unreachable!("output groups hold 1 to {MAX_GROUP_OUTPUTS} outputs"),
        }
    }
}

/// Calls `kernel(first_output, output_count, start, end)` for every cache
/// block of `[0, simd_len)` and every group of at most [`MAX_GROUP_OUTPUTS`]
/// outputs. One group reads every source once whatever the block size, so
/// blocks (of [`super::BLOCK_BYTES`]) are used only when there are several groups.
fn for_each_group(simd_len: usize, output_count: usize, mut kernel: impl FnMut(usize, usize, usize, usize)) {
    if output_count <= MAX_GROUP_OUTPUTS {
        if simd_len > 0 {
            kernel(0, output_count, 0, simd_len);
        }
        return;
    }
    for (start, end) in blocks(simd_len) {
        let mut first = 0;
        while first < output_count {
            let count = (output_count - first).min(MAX_GROUP_OUTPUTS);
            kernel(first, count, start, end);
            first += count;
        }
    }
}

/// Raw pointers to the sources and outputs of one combine call, so a kernel
/// can address any (output, source, offset) without re-borrowing slices.
/// Valid while the borrowed slices are; all slices have one length.
struct Pointers {
    sources: Vec<*const u8>,
    outputs: Vec<*mut u8>,
}

impl Pointers {
    fn new(sources: &[&[u8]], outputs: &mut [&mut [u8]]) -> Pointers {
        Pointers {
            sources: sources.iter().map(|s| s.as_ptr()).collect(),
            outputs: outputs.iter_mut().map(|o| o.as_mut_ptr()).collect(),
        }
    }

    /// Whether a call should write its outputs with non-temporal stores: long
    /// outputs that are overwritten (not read) and aligned for the store width.
    fn streaming(&self, len: usize, mode: Mode, store_alignment: usize) -> bool {
        mode == Mode::Overwrite
            && len >= STREAMING_STORE_MIN_BYTES
            && self.outputs.iter().all(|p| (*p as usize).is_multiple_of(store_alignment))
    }
}

/// The coefficients of one output group rearranged source-major and padded to
/// [`MAX_GROUP_OUTPUTS`]: entry j holds the per-output values for source j, so
/// a kernel walks one array in step with the sources, with no index arithmetic.
fn group_columns<T: Copy + Default>(
    per_coefficient: &[T],
    source_count: usize,
    first: usize,
    count: usize,
) -> Vec<[T; MAX_GROUP_OUTPUTS]> {
    debug_assert!(count <= MAX_GROUP_OUTPUTS);
    (0..source_count)
        .map(|j| {
            let mut column = [T::default(); MAX_GROUP_OUTPUTS];
            for (i, slot) in column.iter_mut().take(count).enumerate() {
                *slot = per_coefficient[(first + i) * source_count + j];
            }
            column
        })
        .collect()
}

/// The byte-at-a-time tail: `[from, len)` of every output.
fn combine_tail(coeffs: &Coefficients, sources: &[&[u8]], outputs: &mut [&mut [u8]], mode: Mode, from: usize) {
    for (i, out) in outputs.iter_mut().enumerate() {
        for p in from..out.len() {
            let mut acc = if mode == Mode::Accumulate { out[p] } else { 0 };
            for (j, src) in sources.iter().enumerate() {
                acc ^= gf::MUL_TABLE[coeffs.get(i, j) as usize][src[p] as usize];
            }
            out[p] = acc;
        }
    }
}
