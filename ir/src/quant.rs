//! Weight-only block quantization (INT4 / INT8) of MatMul weights.
//!
//! The weight is the MatMul's `B` in its own layout, `[K, N]` row-major f32 (callers convert
//! f16/bf16 first; f16 -> f32 is exact). Each output column `n` is cut into blocks of
//! `block_size` consecutive rows along K; every block gets one scale (and, when asymmetric, one
//! zero point). The quantized values are written in the layout of `com.microsoft.MatMulNBits`
//! (`B: [N, k_blocks, blob_size]` uint8, `scales: [N, k_blocks]`, `zero_points: [N,
//! ceil(k_blocks * bits / 8)]` uint8), which `GatherBlockQuantized` reads unchanged for a table
//! stored as `[N, K]`; [`dq`] re-lays the same values out for standard ONNX `DequantizeLinear`.
//!
//! Why this shape of API: weights are materialized while streaming the model to disk, so
//! every function works on any range of output columns (a [`WeightView`]) and writes into
//! slices the caller owns. Columns are independent, so ranges can also be split across threads.
//!
//! [`Method::Rtn`] reproduces, byte for byte, what ONNX Runtime 1.32's
//! `MatMulNBitsQuantizer` with `DefaultWeightOnlyQuantConfig` writes: in QOperator format
//! (MatMulNBits) with [`Rounding::MatMulNBits`], in QDQ format (DequantizeLinear, 4 bits) with
//! [`Rounding::Qdq`] and [`dq`]'s layout (docs/quantization.md says where each rule comes from;
//! tests/tests/quant_bytes.rs proves it against the wheel).

#[cfg(target_arch = "x86_64")]
mod avx2;
mod dequant;
pub mod dq;
pub mod hqq;
mod params;
mod kernel;
mod search;

pub use dequant::{dequantize, weight_error, WeightError};
pub use kernel::{quantize, quantize_measured};

use crate::{Error, Result};
use half::f16;

/// Bits per quantized weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bits {
    Int4,
    Int8,
}

impl Bits {
    /// 4 or 8: the `bits` attribute of MatMulNBits and GatherBlockQuantized.
    pub const fn count(self) -> usize {
        match self {
            Bits::Int4 => 4,
            Bits::Int8 => 8,
        }
    }

    /// Largest stored (unsigned) value: 15 or 255.
    pub const fn max_q(self) -> u8 {
        match self {
            Bits::Int4 => 15,
            Bits::Int8 => 255,
        }
    }

    /// The implicit zero point of a symmetric block, 2^(bits-1): MatMulNBits' default when no
    /// `zero_points` input is given.
    pub const fn mid(self) -> u8 {
        match self {
            Bits::Int4 => 8,
            Bits::Int8 => 128,
        }
    }

    /// Values per byte.
    pub const fn per_byte(self) -> usize {
        8 / self.count()
    }
}

/// How a block's scale (and zero point) are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Method {
    /// Round to nearest from the block's min/max: ONNX Runtime's default quantizer, bit for bit.
    #[default]
    Rtn,
    /// Search shrunken ranges for the lowest block squared error, then refit the scale by least
    /// squares. Needs no calibration data; never worse than RTN on the block (RTN is a candidate),
    /// and not byte-identical to ONNX Runtime by design.
    MseSearch,
    /// Half-quadratic quantization ([`hqq`]): RTN's scale and a float zero point refined by ONNX
    /// Runtime's HQQ solver, over the whole tensor. Always asymmetric; the zero points are
    /// floats of the scales' type, which no fast kernel takes, so they are written as per-block
    /// offsets added after the MatMul (qweight.rs `float_zeros`).
    Hqq,
}

/// Where a block's zero point enters the rounding of a value: the one step in which ONNX
/// Runtime's two block quantizers differ (same scales, zero points, min/max scan and
/// reciprocal). They give different integers only when `v * reciprocal` lies within an f32
/// rounding of a half (adding the zero point first rounds it to a half, or a half is rounded
/// away from zero on the other side of the zero point).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Rounding {
    /// `clamp(roundf(v * reciprocal + zp), 0, max_q)`: the MatMulNBits quantizer
    /// (`quantize_matmul_4bits` / `_8bits`, MLAS `BlockwiseQuantizer`), the bytes of
    /// MatMulNBits, GatherBlockQuantized and QMoE.
    #[default]
    MatMulNBits,
    /// `clamp((int)roundf(v * reciprocal) + zp, 0, max_q)`: the QDQ quantizer
    /// (`quantize_qdq_matmul_4bits`, MLAS `BlockwiseQDQQuantizer::QuantizeV`), the bytes of
    /// the DequantizeLinear form. On x86-64 the int conversion of a NaN or of |x| >= 2^31 (a
    /// subnormal scale's infinite reciprocal) is INT_MIN, which clamps to the low end.
    Qdq,
}

/// Validated quantization settings. The fields are private so that a value of this type is
/// always a block size and bit width the ONNX Runtime kernels accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QuantSettings {
    bits: Bits,
    block_size: usize,
    symmetric: bool,
    method: Method,
    rounding: Rounding,
}

/// Smallest and largest block sizes accepted: MatMulNBits and GatherBlockQuantized require a
/// power of two >= 16; 256 bounds the per-block scratch buffers.
pub const MIN_BLOCK: usize = 16;
pub const MAX_BLOCK: usize = 256;

impl QuantSettings {
    /// RTN settings. `block_size` must be a power of two in 16..=256.
    pub fn new(bits: Bits, block_size: usize, symmetric: bool) -> Result<Self> {
        if !block_size.is_power_of_two() || !(MIN_BLOCK..=MAX_BLOCK).contains(&block_size) {
            return Err(Error::QuantBlockSize(block_size));
        }
        Ok(QuantSettings { bits, block_size, symmetric, method: Method::Rtn, rounding: Rounding::MatMulNBits })
    }

    pub fn with_method(self, method: Method) -> Self {
        QuantSettings { method, ..self }
    }

    /// The same settings, symmetric: the codes read against the implicit mid point.
    pub fn as_symmetric(self) -> Self {
        Self { symmetric: true, ..self }
    }

    /// The same settings rounding as the quantizer of another format does (see [`Rounding`]).
    pub fn with_rounding(self, rounding: Rounding) -> Self {
        QuantSettings { rounding, ..self }
    }

    pub fn bits(&self) -> Bits {
        self.bits
    }
    pub fn block_size(&self) -> usize {
        self.block_size
    }
    /// Symmetric: no zero-point tensor, the implicit zero point is [`Bits::mid`].
    pub fn symmetric(&self) -> bool {
        self.symmetric
    }
    pub fn method(&self) -> Method {
        self.method
    }
    pub fn rounding(&self) -> Rounding {
        self.rounding
    }

    /// The per-column sizes for a weight with `k` rows.
    pub fn layout(&self, k: usize) -> Result<QuantLayout> {
        if k == 0 {
            return Err(Error::QuantShape("the weight has K = 0 rows".into()));
        }
        Ok(QuantLayout { settings: *self, k })
    }
}

/// Sizes of the MatMulNBits tensors for one output column of a `[K, N]` weight; multiply by the
/// number of columns for a range. Every size is per column, which is what lets a column range
/// be written into `&mut out[n0 * per_column..n1 * per_column]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantLayout {
    settings: QuantSettings,
    k: usize,
}

impl QuantLayout {
    pub fn settings(&self) -> QuantSettings {
        self.settings
    }
    pub fn k(&self) -> usize {
        self.k
    }
    /// ceil(K / block_size).
    pub fn k_blocks(&self) -> usize {
        self.k.div_ceil(self.settings.block_size)
    }
    /// Bytes per block: block_size * bits / 8 (the last block is padded to it).
    pub fn blob_size(&self) -> usize {
        self.settings.block_size / self.settings.bits.per_byte()
    }
    /// Bytes of `B` per column: k_blocks * blob_size.
    pub fn b_per_column(&self) -> usize {
        self.k_blocks() * self.blob_size()
    }
    /// Scales per column: k_blocks.
    pub fn scales_per_column(&self) -> usize {
        self.k_blocks()
    }
    /// Zero-point bytes per column: ceil(k_blocks * bits / 8), each column's row padded on its
    /// own; 0 when symmetric (no zero-point tensor).
    pub fn zero_points_per_column(&self) -> usize {
        if self.settings.symmetric {
            0
        } else {
            self.k_blocks().div_ceil(self.settings.bits.per_byte())
        }
    }
    /// Shapes of B, scales and zero points for `n` columns, as MatMulNBits declares them.
    pub fn b_shape(&self, n: usize) -> [usize; 3] {
        [n, self.k_blocks(), self.blob_size()]
    }
    pub fn scales_shape(&self, n: usize) -> [usize; 2] {
        [n, self.k_blocks()]
    }
    pub fn zero_points_shape(&self, n: usize) -> Option<[usize; 2]> {
        (!self.settings.symmetric).then(|| [n, self.zero_points_per_column()])
    }
}

/// The element type of the scales, which MatMulNBits requires to be the activation type.
/// ONNX Runtime rounds the f32 scale to this type *before* it computes the reciprocal used to
/// quantize, so the type changes the quantized bytes too, not only the scale's.
pub trait Scale: Copy + Default + PartialEq + std::fmt::Debug + Send + Sync + 'static {
    fn from_f32(v: f32) -> Self;
    fn to_f32(self) -> f32;
}

impl Scale for f32 {
    fn from_f32(v: f32) -> Self {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
}

impl Scale for f16 {
    /// Round to nearest even, as ONNX Runtime's `MLFloat16(float)` does.
    fn from_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
}

/// A read-only `[rows, cols]` window of an f32 matrix: element `(r, c)` is
/// `data[r * row_stride + c * col_stride]`. Two layouts are needed:
///
/// * row-major (`col_stride = 1`): a `[K, N]` MatMul weight, or a converted strip of one; a
///   column range `n0..n1` of a full weight is `WeightView::columns(w, K, N, n0..n1)`;
/// * column-major (`row_stride = 1`, [`WeightView::column_major`]): a Linear weight as
///   checkpoints store it, `[N, K]` row-major, whose row `n` is column `n` of the MatMul weight.
///   The streaming writer quantizes rows of a checkpoint tensor this way, with no transpose.
#[derive(Clone, Copy, Debug)]
pub struct WeightView<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl<'a> WeightView<'a> {
    /// Row-major window: `cols` values per row, rows `row_stride` apart.
    pub fn new(data: &'a [f32], rows: usize, cols: usize, row_stride: usize) -> Result<Self> {
        if rows == 0 || cols == 0 {
            return Err(Error::QuantShape(format!("the weight view is empty ({rows} x {cols})")));
        }
        if cols > row_stride {
            return Err(Error::QuantShape(format!("{cols} columns do not fit a row stride of {row_stride}")));
        }
        let need = (rows - 1) * row_stride + cols;
        if data.len() < need {
            return Err(Error::QuantBuffer { what: "the weight", expected: need, got: data.len() });
        }
        Ok(WeightView { data, rows, cols, row_stride, col_stride: 1 })
    }

    /// Column-major `[rows, cols]` matrix: column `c` is `data[c * rows..(c + 1) * rows]`
    /// (the `[N, K]` layout of a checkpoint's Linear weight, `rows` = K).
    pub fn column_major(data: &'a [f32], rows: usize, cols: usize) -> Result<Self> {
        if rows == 0 || cols == 0 {
            return Err(Error::QuantShape(format!("the weight view is empty ({rows} x {cols})")));
        }
        if data.len() != rows * cols {
            return Err(Error::QuantBuffer { what: "the weight", expected: rows * cols, got: data.len() });
        }
        Ok(WeightView { data, rows, cols, row_stride: 1, col_stride: rows })
    }

    /// Columns `range` of a full row-major `[rows, n]` matrix.
    pub fn columns(full: &'a [f32], rows: usize, n: usize, range: std::ops::Range<usize>) -> Result<Self> {
        if range.start >= range.end || range.end > n {
            return Err(Error::QuantShape(format!("column range {range:?} is empty or outside 0..{n}")));
        }
        if full.len() != rows * n {
            return Err(Error::QuantBuffer { what: "the weight", expected: rows * n, got: full.len() });
        }
        WeightView::new(&full[range.start..], rows, range.len(), n)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Element `(r, c)`.
    pub fn get(&self, r: usize, c: usize) -> f32 {
        self.data[r * self.row_stride + c * self.col_stride]
    }
    /// Rows `r0..r0 + len` of column `c` into `out`, contiguous when the view is column-major.
    pub(crate) fn column_into(&self, c: usize, r0: usize, out: &mut [f32]) {
        if self.row_stride == 1 {
            let start = c * self.col_stride + r0;
            out.copy_from_slice(&self.data[start..start + out.len()]);
        } else {
            for (i, o) in out.iter_mut().enumerate() {
                *o = self.get(r0 + i, c);
            }
        }
    }
    /// Rows `r0..r0 + len` of column `c` in place, when the view is column-major.
    #[inline]
    pub(crate) fn column_block(&self, c: usize, r0: usize, len: usize) -> Option<&'a [f32]> {
        (self.row_stride == 1).then(|| &self.data[c * self.col_stride + r0..c * self.col_stride + r0 + len])
    }
    /// Whether row `r` is contiguous (a row-major view), for the kernel's fast gather.
    pub(crate) fn row_slice(&self, r: usize) -> Option<&'a [f32]> {
        (self.col_stride == 1).then(|| &self.data[r * self.row_stride..r * self.row_stride + self.cols])
    }
}

/// Quantized tensors of a column range, MatMulNBits layout (read side).
#[derive(Clone, Copy, Debug)]
pub struct NBits<'a, S> {
    pub b: &'a [u8],
    pub scales: &'a [S],
    /// `None` exactly when the settings are symmetric.
    pub zero_points: Option<&'a [u8]>,
}

/// Where [`quantize`] writes a column range, MatMulNBits layout. Every byte of each slice is
/// written, padding included, so the slices need no initialisation.
#[derive(Debug)]
pub struct NBitsOut<'a, S> {
    pub b: &'a mut [u8],
    pub scales: &'a mut [S],
    /// Required when asymmetric, must be `None` when symmetric.
    pub zero_points: Option<&'a mut [u8]>,
}

/// Checks the three slice lengths of a range of `cols` columns against the layout.
fn check_lengths(layout: &QuantLayout, cols: usize, b: usize, scales: usize, zero_points: Option<usize>) -> Result<()> {
    let check = |what, expected, got| {
        if expected == got {
            Ok(())
        } else {
            Err(Error::QuantBuffer { what, expected, got })
        }
    };
    check("B", cols * layout.b_per_column(), b)?;
    check("scales", cols * layout.scales_per_column(), scales)?;
    match (layout.settings.symmetric, zero_points) {
        (true, None) => Ok(()),
        (true, Some(_)) => Err(Error::QuantShape("zero points were given for symmetric settings".into())),
        (false, None) => Err(Error::QuantShape("asymmetric settings need a zero-point buffer".into())),
        (false, Some(z)) => check("zero points", cols * layout.zero_points_per_column(), z),
    }
}

#[cfg(test)]
mod tests;
