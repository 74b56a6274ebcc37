//! [`quantize`]: a column range of a `[K, N]` weight to MatMulNBits' `B`, scales and zero
//! points.
//!
//! The weight is row-major, the output column-major, so the kernel walks a tile of
//! [`TILE_COLS`] columns one block of rows at a time: each source row of the tile is one
//! contiguous read, gathered into per-column block buffers on the stack (16 KiB), and each
//! column's block is then quantized and packed in place. Nothing is allocated.

use super::params::{finite_min_max, rounded_value, rounded_value_qdq, rtn_params_of_range, BlockParams};
use super::search::search_params;
use super::{check_lengths, Bits, Method, NBitsOut, QuantSettings, Rounding, Scale, WeightError, WeightView, MAX_BLOCK};
use crate::{Error, Result};

/// Columns per tile: 16 columns x 256 rows x 4 bytes of scratch.
const TILE_COLS: usize = 16;

/// Quantizes every column of `w` into `out` (MatMulNBits layout, `w.cols()` columns).
///
/// With [`Method::Rtn`] the bytes are the ones ONNX Runtime's quantizer of the settings'
/// [`Rounding`] writes (re-laid out by [`super::dq`] for the QDQ one), including its padding: the bytes of the last block past K are 0, a padding zero-point nibble is 8, and for
/// an odd K the unused high nibble of the last byte repeats the previous odd row's value
/// (ONNX Runtime keeps it from the previous iteration; MatMulNBits never reads it).
///
/// Fails, writing nothing meaningful, when a slice has the wrong length or a weight is not
/// finite (the error names its row and column within the view).
pub fn quantize<S: Scale>(settings: &QuantSettings, w: &WeightView<'_>, out: NBitsOut<'_, S>) -> Result<()> {
    quantize_measured(settings, w, out).map(drop)
}

/// [`quantize`], also returning the weight error of what it wrote (|w - (q - zp) * scale|,
/// the dequantized value as MatMulNBits computes it), measured while packing: a separate
/// [`super::weight_error`] pass cost as much as the quantization itself.
///
/// On x86-64 CPUs with AVX2 the same code is compiled a second time for AVX2 (eight lanes
/// instead of SSE2's four) and chosen at run time; no fused multiply-add is enabled, so every
/// value is the one the portable code computes, bit for bit.
pub fn quantize_measured<S: Scale>(settings: &QuantSettings, w: &WeightView<'_>, out: NBitsOut<'_, S>) -> Result<WeightError> {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { quantize_avx2(settings, w, out) };
    }
    quantize_portable(settings, w, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantize_avx2<S: Scale>(settings: &QuantSettings, w: &WeightView<'_>, out: NBitsOut<'_, S>) -> Result<WeightError> {
    kernel::<Avx2, S>(settings, w, out)
}

/// The two per-block passes, chosen once per call: [`Portable`] is plain Rust, [`Avx2`] the
/// intrinsics of [`super::avx2`]; both give the same bits.
trait BlockOps {
    fn finite_min_max(values: &[f32]) -> Option<(f32, f32)>;
    /// Quantizes a block into its blob `dst` (see [`portable_quantize_pack`]).
    fn quantize_pack<S: Scale>(values: &[f32], p: &BlockParams<S>, settings: &QuantSettings, carried: u8, dst: &mut [u8], qbuf: &mut [u8; MAX_BLOCK], error: &mut ErrorLanes) -> u8;
}

struct Portable;

impl BlockOps for Portable {
    #[inline(always)]
    fn finite_min_max(values: &[f32]) -> Option<(f32, f32)> {
        finite_min_max(values)
    }
    #[inline(always)]
    fn quantize_pack<S: Scale>(values: &[f32], p: &BlockParams<S>, settings: &QuantSettings, carried: u8, dst: &mut [u8], qbuf: &mut [u8; MAX_BLOCK], error: &mut ErrorLanes) -> u8 {
        portable_quantize_pack(values, p, settings, carried, dst, qbuf, error)
    }
}

/// Used only by [`quantize_avx2`], which runs after the CPU was found to have AVX2.
#[cfg(target_arch = "x86_64")]
struct Avx2;

#[cfg(target_arch = "x86_64")]
impl BlockOps for Avx2 {
    #[inline(always)]
    fn finite_min_max(values: &[f32]) -> Option<(f32, f32)> {
        // SAFETY: see the type's comment.
        unsafe { super::avx2::finite_min_max(values) }
    }
    #[inline(always)]
    fn quantize_pack<S: Scale>(values: &[f32], p: &BlockParams<S>, settings: &QuantSettings, carried: u8, dst: &mut [u8], qbuf: &mut [u8; MAX_BLOCK], error: &mut ErrorLanes) -> u8 {
        // SAFETY: see the type's comment.
        unsafe { super::avx2::quantize_pack(values, p, settings, carried, dst, qbuf, error) }
    }
}

/// The kernel with the portable block passes (what runs without AVX2; tests compare it with
/// the dispatched one).
pub(crate) fn quantize_portable<S: Scale>(settings: &QuantSettings, w: &WeightView<'_>, out: NBitsOut<'_, S>) -> Result<WeightError> {
    kernel::<Portable, S>(settings, w, out)
}

/// The kernel; `inline(always)` so that [`quantize_avx2`] compiles all of it (and the block
/// helpers it inlines) for AVX2.
#[inline(always)]
fn kernel<O: BlockOps, S: Scale>(settings: &QuantSettings, w: &WeightView<'_>, out: NBitsOut<'_, S>) -> Result<WeightError> {
    let mut error = ErrorLanes::default();
    let layout = settings.layout(w.rows())?;
    let cols = w.cols();
    check_lengths(&layout, cols, out.b.len(), out.scales.len(), out.zero_points.as_ref().map(|z| z.len()))?;
    let NBitsOut { b, scales, mut zero_points } = out;
    let (bits, bs, k) = (settings.bits(), settings.block_size(), w.rows());
    let (k_blocks, blob, b_col) = (layout.k_blocks(), layout.blob_size(), layout.b_per_column());
    let zp_col = layout.zero_points_per_column();

    let mut tile = [[0f32; MAX_BLOCK]; TILE_COLS];
    let mut qbuf = [0u8; MAX_BLOCK];
    // Per column: the stored value of the last row of the previous block (see `pack4`).
    let mut prev_last = [0u8; TILE_COLS];
    // A column-major view (a checkpoint's rows) is read in place: its blocks are contiguous.
    let in_place = w.column_block(0, 0, 1).is_some();
    for c0 in (0..cols).step_by(TILE_COLS) {
        let width = TILE_COLS.min(cols - c0);
        for kb in 0..k_blocks {
            let r0 = kb * bs;
            let len = bs.min(k - r0);
            if !in_place {
                gather(w, c0, width, r0, len, &mut tile);
            }
            for j in 0..width {
                let col = c0 + j;
                let values: &[f32] = match w.column_block(col, r0, len) {
                    Some(v) => v,
                    None => &tile[j][..len],
                };
                let Some((min, max)) = O::finite_min_max(values) else {
                    let r = values.iter().position(|x| !x.is_finite()).expect("one is not finite");
                    return Err(Error::QuantNonFinite { row: r0 + r, col, value: values[r] });
                };
                let p: BlockParams<S> = match settings.method() {
                    Method::Rtn => rtn_params_of_range(bits, settings.symmetric(), min, max),
                    Method::MseSearch => search_params(bits, settings.symmetric(), settings.rounding(), values),
                    // Its zero points are floats and its iterations a property of the tensor.
                    Method::Hqq => return Err(Error::QuantShape("HQQ solves a whole tensor (quant::hqq::solve), not a column range".into())),
                };
                scales[col * k_blocks + kb] = p.scale;
                if let Some(z) = zero_points.as_deref_mut() {
                    store_zero_point(bits, &mut z[col * zp_col..(col + 1) * zp_col], kb, p.zero_point);
                }
                let dst = &mut b[col * b_col + kb * blob..col * b_col + (kb + 1) * blob];
                let carried = if kb.is_multiple_of(2) { 0 } else { prev_last[j] };
                prev_last[j] = O::quantize_pack(values, &p, settings, carried, dst, &mut qbuf, &mut error);
            }
        }
    }
    Ok(error.total())
}

/// Copies rows `r0..r0 + len` of columns `c0..c0 + width` into the tile. A row-major view
/// is read a row at a time (each a contiguous read shared by the tile's columns), a
/// column-major one a column block at a time. Finiteness is checked per block afterwards.
#[inline]
fn gather(w: &WeightView<'_>, c0: usize, width: usize, r0: usize, len: usize, tile: &mut [[f32; MAX_BLOCK]; TILE_COLS]) {
    if w.row_slice(0).is_some() {
        for r in 0..len {
            let row = &w.row_slice(r0 + r).expect("row-major")[c0..c0 + width];
            for (column, &v) in tile.iter_mut().zip(row) {
                column[r] = v;
            }
        }
    } else {
        for (j, column) in tile.iter_mut().take(width).enumerate() {
            w.column_into(c0 + j, r0, &mut column[..len]);
        }
    }
}

/// Lanes of the weight error (|w - (q - zp) * scale|, the value MatMulNBits dequantizes)
/// kept across blocks and reduced once at the end: per-block horizontal sums were a tenth of
/// the kernel.
#[derive(Default)]
pub(super) struct ErrorLanes {
    pub max: [f32; LANES],
    pub sum_sq: [f64; LANES],
    pub count: u64,
}

/// Lanes of the per-block loops: one AVX2 register of f32.
pub(super) const LANES: usize = 8;

impl ErrorLanes {
    fn total(&self) -> WeightError {
        WeightError {
            max_abs: self.max.iter().fold(0f32, |m, &x| if x > m { x } else { m }),
            sum_sq: self.sum_sq.iter().sum(),
            count: self.count,
        }
    }
}

/// Quantizes one block into `q` (one byte per value) and adds its error, in one pass: the
/// error is computed from the rounded value while it is still an f32. Branch-free (see
/// [`rounded_value`] and [`rounded_value_qdq`]; the rounding is chosen once per block) with
/// eight independent lanes, so the loop vectorizes; a block has at most 256 values, so its
/// squared errors are summed in f32 lanes and widened into the f64 lanes once per block.
#[inline(always)]
pub(super) fn portable_quantize_block<S: Scale>(values: &[f32], p: &BlockParams<S>, max_q: u8, rounding: Rounding, q: &mut [u8], error: &mut ErrorLanes) {
    match rounding {
        Rounding::MatMulNBits => block_lanes(values, p, max_q, q, error, rounded_value),
        Rounding::Qdq => block_lanes(values, p, max_q, q, error, rounded_value_qdq),
    }
}

/// [`portable_quantize_block`] with one rounding function, inlined into the lanes.
#[inline(always)]
fn block_lanes<S: Scale>(values: &[f32], p: &BlockParams<S>, max_q: u8, q: &mut [u8], error: &mut ErrorLanes, round: impl Fn(f32, f32, u8, u8) -> f32) {
    let (r, z) = (p.reciprocal(), p.zero_point);
    let (s, zp) = (p.scale.to_f32(), z as f32);
    let mut sq = [0f32; LANES];
    let mut vs = values.chunks_exact(LANES);
    let mut qs = q.chunks_exact_mut(LANES);
    for (v, o) in (&mut vs).zip(&mut qs) {
        for i in 0..LANES {
            let rounded = round(v[i], r, z, max_q);
            // SAFETY: an integer in [0, max_q].
            o[i] = unsafe { rounded.to_int_unchecked::<i32>() } as u8;
            let d = (v[i] - (rounded - zp) * s).abs();
            error.max[i] = if d > error.max[i] { d } else { error.max[i] };
            sq[i] += d * d;
        }
    }
    for (&v, o) in vs.remainder().iter().zip(qs.into_remainder()) {
        let rounded = round(v, r, z, max_q);
        // SAFETY: an integer in [0, max_q].
        *o = unsafe { rounded.to_int_unchecked::<i32>() } as u8;
        let d = (v - (rounded - zp) * s).abs();
        error.max[0] = if d > error.max[0] { d } else { error.max[0] };
        sq[0] += d * d;
    }
    for (total, &x) in error.sum_sq.iter_mut().zip(&sq) {
        *total += x as f64;
    }
    error.count += values.len() as u64;
}

/// Quantizes one block into its blob `dst` with the settings' bits and rounding (INT8: a byte
/// per value; INT4: [`pack4`], with `carried` its nibble from the previous block), through
/// `qbuf`, adding its error; returns what the next block of the column carries (INT4; 0 for
/// INT8).
#[inline(always)]
pub(super) fn portable_quantize_pack<S: Scale>(values: &[f32], p: &BlockParams<S>, settings: &QuantSettings, carried: u8, dst: &mut [u8], qbuf: &mut [u8; MAX_BLOCK], error: &mut ErrorLanes) -> u8 {
    let (bits, q) = (settings.bits(), &mut qbuf[..values.len()]);
    portable_quantize_block(values, p, bits.max_q(), settings.rounding(), q, error);
    match bits {
        Bits::Int8 => {
            pack8(q, dst);
            0
        }
        Bits::Int4 => pack4(q, carried, dst),
    }
}

/// One stored byte per value; bytes past the end of a short last block are 0.
#[inline]
fn pack8(q: &[u8], dst: &mut [u8]) {
    dst[..q.len()].copy_from_slice(q);
    dst[q.len()..].fill(0);
}

/// Two values per byte, the even row in the low nibble. Returns the high nibble of the last
/// byte written, which ONNX Runtime carries into the next block: its quantizer works on pairs of
/// blocks and, for an odd K, leaves the unused high nibble of the last byte at the previous
/// pair's value (`carried` when the block has a single row). Bytes past the block's values are 0.
#[inline]
fn pack4(q: &[u8], carried: u8, dst: &mut [u8]) -> u8 {
    let pairs = q.len() / 2;
    // Each pair read as one little-endian u16 (low byte = even row): a form the compiler
    // vectorizes, where the per-byte loop stayed scalar.
    for (d, pair) in dst[..pairs].iter_mut().zip(q.chunks_exact(2)) {
        let v = u16::from_le_bytes([pair[0], pair[1]]);
        *d = ((v & 0x000f) | ((v >> 4) & 0x00f0)) as u8;
    }
    let mut hi = if pairs > 0 { q[2 * pairs - 1] } else { carried };
    let mut written = pairs;
    if q.len() % 2 == 1 {
        // An odd block: the last byte's high nibble keeps the previous odd row's value.
        if pairs == 0 {
            hi = carried;
        }
        dst[pairs] = (q[q.len() - 1] & 0x0f) | (hi << 4);
        written += 1;
    }
    dst[written..].fill(0);
    hi
}

/// Block `kb`'s zero point into its column's row. INT4: two per byte, even block low; a byte
/// is first written with 8 in its high nibble, which stays as the padding of an odd count.
fn store_zero_point(bits: Bits, row: &mut [u8], kb: usize, zp: u8) {
    match bits {
        Bits::Int8 => row[kb] = zp,
        Bits::Int4 if kb.is_multiple_of(2) => row[kb / 2] = zp | (Bits::Int4.mid() << 4),
        Bits::Int4 => row[kb / 2] = (row[kb / 2] & 0x0f) | (zp << 4),
    }
}
