//! Quantized weights as lazy recipes.
//!
//! A [`QuantGroup`] is one float weight and the settings to quantize it with; its two or
//! three output tensors (data, scales, zero points) are [`Recipe::Quantized`] parts of the same
//! group. Nothing is computed when the group is made: the streaming writer (stream.rs)
//! quantizes a range of the weight once and writes every part's bytes of that range, so a
//! quantized build reads each source block once and holds one range at a time, never the whole
//! tensor. [`Recipe::materialize`] of a part computes the whole group (for small tensors and
//! tests).
//!
//! The weight is given as `[N, K]`: row `n` is output column `n` of the MatMul (the layout
//! of a checkpoint's Linear weight, and of an embedding table, whose rows are gathered).
//!
//! The group also accumulates the weight error of what was written, for the build report.

use crate::quant::dq::{dq_lengths, packed_zero, to_dequantize_linear, DqOut, DqType};
use crate::quant::hqq::{self, HqqBlock};
use crate::quant::{quantize_measured, Bits, Method, NBits, NBitsOut, QuantSettings, Rounding, Scale, WeightError, WeightView};
use crate::packed::{PackedStack, ZeroOut};
use crate::{DType, Error, Recipe, Result};
use half::{bf16, f16};
use std::sync::{Arc, Mutex};

/// Which operator's layout the parts are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantForm {
    /// `com.microsoft.MatMulNBits` (`B: [N, k_blocks, blob]`, `scales: [N, k_blocks]`, packed
    /// zero points `[N, ceil(k_blocks * bits / 8)]`); `GatherBlockQuantized` reads the same
    /// bytes as `data: [N, K * bits / 8]` when K is a multiple of the block.
    NBits,
    /// Standard ONNX blocked `DequantizeLinear` on `[K, N]` with axis 0 (`x_scale: [k_blocks,
    /// N]`), which ONNX Runtime's CPU EP fuses with the MatMul it feeds.
    Dq,
}

impl QuantForm {
    /// How ONNX Runtime's quantizer of this form rounds (docs/quantization.md): INT4
    /// DequantizeLinear data are the QDQ quantizer's (`quantize_qdq_matmul_4bits`); ONNX Runtime
    /// has no QDQ quantizer for 8 bits (`MatMulNBitsQuantizer` refuses QDQ at 8 bits), so INT8
    /// DequantizeLinear data, like every MatMulNBits form, are the MatMulNBits quantizer's
    /// values (`quantize_matmul_8bits`), re-laid out.
    pub fn rounding(self, bits: Bits) -> Rounding {
        match (self, bits) {
            (QuantForm::Dq, Bits::Int4) => Rounding::Qdq,
            _ => Rounding::MatMulNBits,
        }
    }
}

/// One output tensor of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantPart {
    Data,
    Scales,
    ZeroPoints,
}

impl QuantPart {
    pub fn name(self) -> &'static str {
        match self {
            QuantPart::Data => "data",
            QuantPart::Scales => "scales",
            QuantPart::ZeroPoints => "zero_points",
        }
    }
}

/// A group's weight error summed over its ranges in whatever order the writer's threads finish
/// them, the same in every build (the report prints it): each range's sum of squares is added as
/// a fixed-point integer (2^-64 units), which is exact and so independent of the order, where
/// f64 sums of the same ranges in another order could differ in the last digits. The maximum
/// and the count do not depend on the order.
#[derive(Clone, Copy, Debug, Default)]
struct ErrorSum {
    max_abs: f32,
    count: u64,
    sum_sq: i128,
}

impl ErrorSum {
    const UNIT: f64 = 18_446_744_073_709_551_616.0; // 2^64

    fn add(&mut self, e: &WeightError) {
        self.max_abs = self.max_abs.max(e.max_abs);
        self.count += e.count;
        // `as` saturates (and maps NaN to 0): no overflow on an absurd error.
        self.sum_sq = self.sum_sq.saturating_add((e.sum_sq * Self::UNIT) as i128);
    }

    fn total(&self) -> WeightError {
        WeightError { max_abs: self.max_abs, sum_sq: self.sum_sq as f64 / Self::UNIT, count: self.count }
    }
}

/// A float weight and how it is quantized; see the module doc.
#[derive(Debug)]
pub struct QuantGroup {
    /// Name for messages and the build report (the float initializer it replaces).
    pub name: String,
    weight: Recipe,
    settings: QuantSettings,
    scale_dtype: DType,
    form: QuantForm,
    error: Mutex<ErrorSum>,
    /// The checkpoint's own integers, when the weight is pre-quantized: the parts are repacked
    /// from them, never quantized from `weight`.
    packed: Option<PackedStack>,
    /// HQQ in the DequantizeLinear form: what the first band written finds of the whole
    /// tensor ([`Self::hqq_band`]).
    hqq_solved: Mutex<Option<HqqSolved>>,
    /// Integer zero points written in the offset form ([`Self::offset_zero_points`]).
    zeros_as_offsets: bool,
}

/// What an HQQ group in the DequantizeLinear form solves once for the whole tensor before its
/// first band is coded.
#[derive(Debug)]
struct HqqSolved {
    /// The tensor's number of solver updates ([`hqq::iterations`]).
    updates: usize,
    /// Each block's zero after those updates, `[N, k_blocks]` (4 bytes per block), when the
    /// tensor's per-iteration trace fits [`HQQ_TRACE_BYTES`]: the bands code from them instead
    /// of solving every block again, as the MatMulNBits form does. Dropped once every block of
    /// K has been coded (`coded`); a band coded after that solves its blocks again, to the same
    /// bits.
    zeros: Option<Arc<Vec<f32>>>,
    /// Which blocks of K have been coded (a band coded twice counts once).
    coded: Vec<bool>,
}

impl QuantGroup {
    /// A group over `weight` (`[N, K]`, a float recipe). `scale_dtype` is the activation type
    /// (f32, f16 or bf16), which MatMulNBits requires of its scales. The form decides the
    /// settings' [`Rounding`] ([`QuantForm::rounding`]).
    pub fn new(name: impl Into<String>, weight: Recipe, settings: QuantSettings, scale_dtype: DType, form: QuantForm) -> Result<Arc<QuantGroup>> {
        let name = name.into();
        let shape = weight.shape();
        let bad = |reason: String| Error::Recipe { tensor: name.clone(), reason };
        if shape.len() != 2 || shape[0] == 0 || shape[1] == 0 {
            return Err(bad(format!("only a 2-D weight can be quantized, not {shape:?}")));
        }
        if !weight.dtype().is_float() {
            return Err(bad(format!("only a float weight can be quantized, not {}", weight.dtype())));
        }
        if !matches!(scale_dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(bad(format!("scales must be f32, f16 or bf16, not {scale_dtype}")));
        }
        if settings.method() == Method::Hqq && settings.symmetric() {
            return Err(bad("HQQ is asymmetric: its zero points are what it solves for".into()));
        }
        // Transposes on top, where `read_block` reads them by rows of their input.
        let weight = weight.cast(DType::F32).normalized();
        let settings = settings.with_rounding(form.rounding(settings.bits()));
        Ok(Arc::new(QuantGroup { name, weight, settings, scale_dtype, form, error: Mutex::default(), packed: None, hqq_solved: Mutex::default(), zeros_as_offsets: false }))
    }

    /// A group writing the integers of pre-quantized layers (`stack`, read from `weight`, the
    /// `[N, K]` recipe of their dequantized value) in the settings the stack gives.
    pub fn from_packed(name: impl Into<String>, weight: Recipe, stack: PackedStack, scale_dtype: DType, form: QuantForm) -> Result<Arc<QuantGroup>> {
        let name = name.into();
        if weight.shape() != [stack.n(), stack.k()] {
            return Err(Error::Recipe { tensor: name, reason: format!("the weight is {:?}, its packed layers [{}, {}]", weight.shape(), stack.n(), stack.k()) });
        }
        if !matches!(scale_dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(Error::Recipe { tensor: name, reason: format!("scales must be f32, f16 or bf16, not {scale_dtype}") });
        }
        let settings = stack.settings();
        Ok(Arc::new(QuantGroup { name, weight: weight.normalized(), settings, scale_dtype, form, error: Mutex::default(), packed: Some(stack), hqq_solved: Mutex::default(), zeros_as_offsets: false }))
    }

    /// Writes the group's integer zero points in the offset form, for an EP whose
    /// DequantizeLinear takes signed data only (trt-rtx registers int4, not uint4): each
    /// asymmetric block `scale * (q - zero)` becomes the codes against the mid point, `scale *
    /// (q - mid)` (int4 / int8 data without zero points), plus the block's offset `scale *
    /// (mid - zero)` added after the MatMul, as float zero points are
    /// ([`Self::float_zeros`]). The codes and scales stay exact; the offset is exact in f32
    /// and rounded once to an f16 or bf16 scale type (recorded as the weight error). Only a
    /// DequantizeLinear group with integer zero points changes; call it before the group is
    /// shared.
    pub fn offset_zero_points(&mut self) {
        self.zeros_as_offsets = self.form == QuantForm::Dq && !self.settings.symmetric();
    }

    /// Whether integer zero points (checkpoint or RTN) are written as offsets: the group was
    /// asked to and its zero points are not float already (HQQ, a GGUF type with a min).
    fn integer_offsets(&self) -> bool {
        self.zeros_as_offsets && !self.hqq() && !self.packed.as_ref().is_some_and(PackedStack::float_zeros)
    }

    /// The pre-quantized layers the parts are repacked from (`None`: quantized from float).
    pub fn packed_source(&self) -> Option<&PackedStack> {
        self.packed.as_ref()
    }

    pub fn settings(&self) -> QuantSettings {
        self.settings
    }
    pub fn form(&self) -> QuantForm {
        self.form
    }
    pub fn scale_dtype(&self) -> DType {
        self.scale_dtype
    }
    /// N (output columns, or table rows).
    pub fn n(&self) -> usize {
        self.weight.shape()[0]
    }
    /// K (the reduced dimension, or a table row's length).
    pub fn k(&self) -> usize {
        self.weight.shape()[1]
    }
    /// The float weight (`[N, K]`, f32).
    pub fn weight(&self) -> &Recipe {
        &self.weight
    }
    /// Source tensors the weight reads.
    pub fn describe(&self) -> String {
        self.weight.describe()
    }

    /// The weight error of everything written so far (the whole tensor once it is written).
    pub fn error(&self) -> WeightError {
        self.error.lock().map(|e| e.total()).unwrap_or_default()
    }

    fn add_error(&self, e: &WeightError) {
        if let Ok(mut acc) = self.error.lock() {
            acc.add(e);
        }
    }

    /// Whether the weight has float zero points (pre-quantized GGUF blocks with a min): its
    /// ZeroPoints part then holds each block's offset `scale * (mid - zero)` in the scales'
    /// type (`[N, k_blocks]`), and the weight is `scale * (q - mid) + offset`: a MatMulNBits
    /// without zero points plus the offsets times the activation's block sums
    /// (builder/src/quantize/rewrite.rs).
    /// HQQ's float zero points are written the same way.
    pub fn float_zeros(&self) -> bool {
        self.zeros_as_offsets || self.packed.as_ref().map_or(self.settings.method() == Method::Hqq, PackedStack::float_zeros)
    }

    /// Quantized from float by HQQ (not repacked).
    fn hqq(&self) -> bool {
        self.packed.is_none() && self.settings.method() == Method::Hqq
    }

    /// The settings of the DequantizeLinear data: a group with float zero points writes its
    /// codes symmetric (against the implicit mid point, as MatMulNBits without zero points
    /// reads them) and its zero points as the per-block float offsets `[k_blocks, N]` the
    /// graph adds after the MatMul (the offset form, docs/quantization.md).
    pub fn dq_settings(&self) -> QuantSettings {
        if self.float_zeros() {
            self.settings.as_symmetric()
        } else {
            self.settings
        }
    }

    /// Does the group have this part?
    pub fn has(&self, part: QuantPart) -> bool {
        part != QuantPart::ZeroPoints || !self.settings.symmetric()
    }

    /// Element type of a part.
    pub fn dtype(&self, part: QuantPart) -> DType {
        match (self.form, part) {
            (_, QuantPart::Scales) => self.scale_dtype,
            (QuantForm::NBits, QuantPart::ZeroPoints) if self.float_zeros() => self.scale_dtype,
            (QuantForm::NBits, _) => DType::U8,
            (QuantForm::Dq, QuantPart::ZeroPoints) if self.float_zeros() => self.scale_dtype,
            (QuantForm::Dq, _) => match DqType::of(&self.dq_settings()) {
                DqType::Int4 => DType::I4,
                DqType::Uint4 => DType::U4,
                DqType::Int8 => DType::I8,
                DqType::Uint8 => DType::U8,
            },
        }
    }

    /// Shape of a part, as the consuming operator declares it.
    pub fn shape(&self, part: QuantPart) -> Vec<usize> {
        let (n, k) = (self.n(), self.k());
        let layout = self.settings.layout(k).expect("K > 0, checked at construction");
        match (self.form, part) {
            (QuantForm::NBits, QuantPart::Data) => layout.b_shape(n).to_vec(),
            (QuantForm::NBits, QuantPart::Scales) => layout.scales_shape(n).to_vec(),
            (QuantForm::NBits, QuantPart::ZeroPoints) if self.float_zeros() => layout.scales_shape(n).to_vec(),
            (QuantForm::NBits, QuantPart::ZeroPoints) => vec![n, layout.zero_points_per_column()],
            (QuantForm::Dq, QuantPart::Data) => vec![k, n],
            (QuantForm::Dq, _) => vec![layout.k_blocks(), n],
        }
    }

    /// Bytes of a part.
    pub fn byte_len(&self, part: QuantPart) -> usize {
        self.dtype(part).bytes_for(self.shape(part).iter().product())
    }

    /// Rows of the weight (output columns) per streamed range of the MatMulNBits form, for
    /// about `budget` bytes of f32 input: columns are independent, so any split works.
    pub(crate) fn rows_per_range(&self, budget: usize) -> usize {
        (budget / (self.k() * 4)).clamp(1, self.n())
    }

    /// Reduced-dimension rows per band of the DequantizeLinear form: whole blocks, about
    /// `budget` bytes of f32 input, and (for 4-bit zero points with an odd N) the whole K, so
    /// every band starts on a byte of every part.
    pub(crate) fn band_rows(&self, budget: usize) -> usize {
        let bs = self.settings.block_size();
        // Data bands start on a byte (a band starts at a multiple of the block, an even number
        // of rows); only packed 4-bit integer zero points of an odd N do not.
        let odd_nibbles = self.settings.bits().per_byte() == 2 && !self.n().is_multiple_of(2) && self.has(QuantPart::ZeroPoints) && !self.float_zeros();
        // Act-order scatters any band over all of K: decode it once.
        let reordered = self.packed.as_ref().is_some_and(|p| p.order().is_some());
        if odd_nibbles || reordered {
            return self.k();
        }
        let blocks = (budget / (self.n() * 4 * bs)).max(1);
        (blocks * bs).min(self.k())
    }

    /// Byte offset of the range starting at weight row `n0` (NBits) or reduced row `k0` (Dq)
    /// within a part.
    pub(crate) fn part_offset(&self, part: QuantPart, start: usize) -> usize {
        let layout = self.settings.layout(self.k()).expect("K > 0");
        let esize = self.dtype(part).size();
        match (self.form, part) {
            (QuantForm::NBits, QuantPart::Data) => start * layout.b_per_column(),
            (QuantForm::NBits, QuantPart::Scales) => start * layout.scales_per_column() * esize,
            (QuantForm::NBits, QuantPart::ZeroPoints) if self.float_zeros() => start * layout.scales_per_column() * esize,
            (QuantForm::NBits, QuantPart::ZeroPoints) => start * layout.zero_points_per_column(),
            (QuantForm::Dq, QuantPart::Data) => self.dtype(part).bytes_for(start * self.n()),
            (QuantForm::Dq, QuantPart::Scales) => start / self.settings.block_size() * self.n() * esize,
            (QuantForm::Dq, QuantPart::ZeroPoints) => self.dtype(part).bytes_for(start / self.settings.block_size() * self.n()),
        }
    }

    /// Quantizes weight rows `start..end` (NBits) or reduced rows `start..end` (Dq) and
    /// returns each present part's bytes of that range, in [`QuantPart`] order.
    pub(crate) fn compute(&self, start: usize, end: usize) -> Result<Vec<(QuantPart, Vec<u8>)>> {
        if !self.hqq_in_pieces() {
            // One piece per range (a DequantizeLinear band of HQQ too).
            return self.compute_each(start, end, &|_, parts| Ok(parts)).map(|mut v| v.pop().unwrap_or_default());
        }
        // Pieces (HQQ's MatMulNBits form) gathered into whole parts of the range.
        let parts: Vec<QuantPart> = [QuantPart::Data, QuantPart::Scales, QuantPart::ZeroPoints].into_iter().filter(|&p| self.has(p)).collect();
        let whole: Vec<Mutex<Vec<u8>>> =
            parts.iter().map(|&p| Mutex::new(vec![0u8; self.part_offset(p, end) - self.part_offset(p, start)])).collect();
        self.compute_each(start, end, &|s, pieces| {
            for (p, bytes) in pieces {
                let i = parts.iter().position(|&q| q == p).expect("a present part");
                let at = self.part_offset(p, s) - self.part_offset(p, start);
                let mut w = whole[i].lock().map_err(|_| Error::Graph("a quantizing thread panicked".into()))?;
                w[at..at + bytes.len()].copy_from_slice(&bytes);
            }
            Ok(())
        })?;
        Ok(parts.into_iter().zip(whole).map(|(p, w)| (p, w.into_inner().unwrap_or_default())).collect())
    }

    /// Whether the group's solve depends on the whole tensor (HQQ's update count), so the writer
    /// runs such groups one at a time on a thread of its own (stream.rs), each parallel inside:
    /// the MatMulNBits form as one range, which [`Self::compute_each`] hands over in pieces as
    /// they are coded (not held until the end); the DequantizeLinear form band after band
    /// ([`Self::hqq_band`]).
    pub(crate) fn solves_whole_tensor(&self) -> bool {
        self.hqq()
    }

    /// HQQ in the MatMulNBits form: one range solved in passes ([`Self::hqq_rows`]), handed
    /// over in pieces.
    fn hqq_in_pieces(&self) -> bool {
        self.form == QuantForm::NBits && self.hqq()
    }

    /// [`Self::compute`] handing the bytes to `emit` as pieces `(first row, parts)`, each
    /// part's bytes starting at [`Self::part_offset`] of that row; pieces may come from
    /// several threads at once. Returns what `emit` returned, in piece order for one piece.
    pub(crate) fn compute_each<R: Send>(&self, start: usize, end: usize, emit: &Emit<'_, R>) -> Result<Vec<R>> {
        let r = if self.hqq_in_pieces() {
            match self.scale_dtype {
                DType::F16 => self.hqq_rows::<f16, R>(start, end, emit),
                _ => self.hqq_rows::<f32, R>(start, end, emit),
            }
        } else {
            let parts = match self.form {
                QuantForm::NBits => self.compute_rows(start, end),
                QuantForm::Dq => self.compute_band(start, end),
            };
            parts.and_then(|p| emit(start, p)).map(|r| vec![r])
        };
        r.map_err(|e| match e {
            Error::QuantNonFinite { row, col, value } => {
                // The view's row is along K and its column along N; the weight is [N, K].
                let (n, k) = match self.form {
                    QuantForm::Dq => (col, start + row),
                    _ => (start + col, row),
                };
                Error::Recipe {
                    tensor: self.name.clone(),
                    reason: format!("weight [{n}, {k}] is {value}: only finite weights can be quantized"),
                }
            }
            other => other,
        })
    }

    /// Weight rows `n0..n1`, columns `k0..k1`, as a column-major `[k1 - k0, n1 - n0]` f32
    /// matrix (each weight row's run contiguous). A `[N, K]` recipe is read a row run at a
    /// time; the transpose of a `[K, N]` recipe (a GPT-2 Conv1D weight) a row of its input at
    /// a time, transposed here; anything else is materialized (no builder recipe is).
    /// The pages read are dropped from the checkpoint's mapping afterwards.
    fn read_block(&self, n0: usize, n1: usize, k0: usize, k1: usize, out: &mut [f32]) -> Result<()> {
        let (n, k) = (self.n(), self.k());
        let (rows, cols) = (k1 - k0, n1 - n0);
        debug_assert_eq!(out.len(), rows * cols);
        // Read straight into f32 storage (the recipe is f32 after its cast): no second copy.
        match &self.weight {
            Recipe::Transpose { input, perm } if perm == &[1, 0] && input.is_streamable() => {
                let mut band = vec![0f32; rows * cols];
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut band);
                for (r, chunk) in (k0..k1).zip(bytes.chunks_exact_mut(cols * 4)) {
                    input.read_into(r * n + n0, r * n + n1, chunk)?;
                }
                input.release(k0 * n, k1 * n);
                for r in 0..rows {
                    for c in 0..cols {
                        out[c * rows + r] = band[r * cols + c];
                    }
                }
            }
            w if w.is_streamable() => {
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
                if k0 == 0 && k1 == k {
                    w.read_into(n0 * k, n1 * k, bytes)?;
                } else {
                    // A band of columns (the DequantizeLinear form) touches every page of the
                    // rows it reads: release them as it goes, else a table's whole mapping
                    // (Gemma 3's 262,144 x 640 f32: 671 MB) was resident at once.
                    let every = (RELEASE_BYTES / (k * 4)).max(1);
                    let mut from = n0;
                    for (c, chunk) in (n0..n1).zip(bytes.chunks_exact_mut(rows * 4)) {
                        w.read_into(c * k + k0, c * k + k1, chunk)?;
                        if c + 1 - from == every {
                            w.release(from * k, (c + 1) * k);
                            from = c + 1;
                        }
                    }
                }
                w.release(n0 * k, n1 * k);
            }
            w => {
                let all = w.materialize()?;
                let all: Vec<f32> = all.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
                for (c, col) in (n0..n1).zip(out.chunks_exact_mut(rows)) {
                    col.copy_from_slice(&all[c * k + k0..c * k + k1]);
                }
            }
        }
        Ok(())
    }

    /// Runs `f` on weight rows `n0..n1`, columns `k0..k1` (see [`Self::read_block`]), read
    /// into this thread's reused buffer: a fresh multi-megabyte buffer per range was zeroed
    /// (and faulted in) every time.
    fn with_block<R>(&self, n0: usize, n1: usize, k0: usize, k1: usize, f: impl FnOnce(&[f32]) -> Result<R>) -> Result<R> {
        WEIGHTS.with(|cell| {
            let mut buf = cell.borrow_mut();
            let len = (n1 - n0) * (k1 - k0);
            if buf.len() < len {
                buf.resize(len, 0.0);
            }
            self.read_block(n0, n1, k0, k1, &mut buf[..len])?;
            f(&buf[..len])
        })
    }

    fn compute_rows(&self, n0: usize, n1: usize) -> Result<Vec<(QuantPart, Vec<u8>)>> {
        if let Some(stack) = &self.packed {
            let (b, scales, zp) = match self.scale_dtype {
                DType::F16 => {
                    let (b, s, z) = self.repack::<f16>(stack, n0, n1, 0, self.k())?;
                    (b, self.scale_bytes(&s), z)
                }
                _ => {
                    let (b, s, z) = self.repack::<f32>(stack, n0, n1, 0, self.k())?;
                    (b, self.scale_bytes(&s), z)
                }
            };
            return Ok(self.parts(b, scales, zp));
        }
        self.with_block(n0, n1, 0, self.k(), |values| {
            let view = WeightView::column_major(values, self.k(), n1 - n0)?;
            let (b, scales, zp) = match self.scale_dtype {
                DType::F16 => self.quantize_view::<f16>(&view)?,
                _ => self.quantize_view::<f32>(&view)?,
            };
            Ok(self.parts(b, scales, zp))
        })
    }

    /// The checkpoint's integers of output rows `n0..n1`, written rows `k0..k1`, in the
    /// MatMulNBits layout of settings over `k1 - k0` rows; records the (scale rounding) error.
    #[allow(clippy::type_complexity)]
    fn repack<S: Scale + ToBytes>(&self, stack: &PackedStack, n0: usize, n1: usize, k0: usize, k1: usize) -> Result<(Vec<u8>, Vec<S>, Option<Vec<u8>>)> {
        let layout = self.settings.layout(k1 - k0)?;
        let cols = n1 - n0;
        let mut b = vec![0u8; cols * layout.b_per_column()];
        let mut scales = vec![S::default(); cols * layout.scales_per_column()];
        if stack.float_zeros() {
            let mut zf = vec![S::default(); cols * layout.scales_per_column()];
            let error = stack.nbits(n0, n1, k0, k1, self.scale_dtype, &mut b, &mut scales, Some(ZeroOut::Float(&mut zf)))?;
            self.add_error(&error);
            return Ok((b, scales, Some(self.scale_bytes(&zf))));
        }
        let mut zp = (!self.settings.symmetric()).then(|| vec![0u8; cols * layout.zero_points_per_column()]);
        let error = stack.nbits(n0, n1, k0, k1, self.scale_dtype, &mut b, &mut scales, zp.as_deref_mut().map(ZeroOut::Packed))?;
        self.add_error(&error);
        Ok((b, scales, zp))
    }

    fn packed_band<S: Scale + ToBytes>(&self, stack: &PackedStack, k0: usize, k1: usize) -> Result<Vec<(QuantPart, Vec<u8>)>> {
        let (n, band) = (self.n(), k1 - k0);
        let (b, scales, zp) = self.repack::<S>(stack, 0, n, k0, k1)?;
        // `dq_settings`: a float-zero stack's codes are written against the mid point (no
        // integer zero points) and its offsets, repacked `[N, k_blocks]`, go out transposed.
        let (zero_points, offsets) = if stack.float_zeros() {
            (None, zp)
        } else if self.integer_offsets() {
            (None, Some(self.zero_point_offsets(band, n, &scales, zp.as_deref().expect("asymmetric settings have zero points"))?))
        } else {
            (zp, None)
        };
        self.dq_band_parts(&self.dq_settings(), band, n, &b, &scales, zero_points.as_deref(), offsets)
    }

    /// Each block's offset `scale * (mid - zero)` of a band's packed integer zero points
    /// (MatMulNBits' layout, `[N, k_blocks]` scale-type bytes, as float zero points are laid
    /// out): exact in f32, rounded once to the scale type. The rounding moves every value of
    /// the block by the same amount; it is added to the error the codes' values already
    /// counted (their squares summed, no second count: independent errors add in variance).
    fn zero_point_offsets<S: Scale + ToBytes>(&self, band: usize, n: usize, scales: &[S], zp: &[u8]) -> Result<Vec<u8>> {
        let layout = self.settings.layout(band)?;
        let (bits, bs, kb, per_col) = (self.settings.bits(), self.settings.block_size(), layout.k_blocks(), layout.zero_points_per_column());
        let mut offsets = vec![S::default(); n * kb];
        let mut error = WeightError::default();
        for c in 0..n {
            for b in 0..kb {
                let zero = packed_zero(bits, zp, per_col, c, b);
                // The scale as written (a bf16 group computes in f32 and rounds on writing).
                let scale = round_to(self.scale_dtype, scales[c * kb + b].to_f32());
                let exact = scale * (f32::from(bits.mid()) - f32::from(zero));
                let written = round_to(self.scale_dtype, exact);
                offsets[c * kb + b] = S::from_f32(written);
                let d = (exact - written).abs();
                error.max_abs = error.max_abs.max(d);
                error.sum_sq += f64::from(d) * f64::from(d) * bs.min(band - b * bs) as f64;
            }
        }
        self.add_error(&error);
        Ok(self.scale_bytes(&offsets))
    }

    /// A band's MatMulNBits bytes (`b`, `scales`, packed integer `zero_points`) laid out for
    /// DequantizeLinear with `settings`; float zero points (`offsets`, MatMulNBits' `[N,
    /// k_blocks]` scale-type bytes) go out as the ZeroPoints part, `[k_blocks, N]`.
    #[allow(clippy::too_many_arguments)]
    fn dq_band_parts<S: Scale + ToBytes>(&self, settings: &QuantSettings, band: usize, n: usize, b: &[u8], scales: &[S], zero_points: Option<&[u8]>, offsets: Option<Vec<u8>>) -> Result<Vec<(QuantPart, Vec<u8>)>> {
        let q = NBits { b, scales, zero_points };
        let (data_len, scales_len, zp_len) = dq_lengths(settings, band, n)?;
        let mut data = vec![0u8; data_len];
        let mut dq_scales = vec![S::default(); scales_len];
        let mut dq_zp = zp_len.map(|l| vec![0u8; l]);
        to_dequantize_linear(settings, band, n, q, DqOut { data: &mut data, scales: &mut dq_scales, zero_points: dq_zp.as_deref_mut() })?;
        Ok(self.parts(data, self.scale_bytes(&dq_scales), offsets.map(|o| self.offsets_by_block(&o, n)).or(dq_zp)))
    }

    /// Per-block float offsets (scale-dtype bytes) from MatMulNBits' `[N, k_blocks]` to
    /// DequantizeLinear's `[k_blocks, N]`.
    fn offsets_by_block(&self, offsets: &[u8], n: usize) -> Vec<u8> {
        let esize = self.scale_dtype.size();
        let kb = offsets.len() / esize / n;
        let mut out = vec![0u8; offsets.len()];
        for (i, v) in offsets.chunks_exact(esize).enumerate() {
            let at = ((i % kb) * n + i / kb) * esize;
            out[at..at + esize].copy_from_slice(v);
        }
        out
    }

    fn compute_band(&self, k0: usize, k1: usize) -> Result<Vec<(QuantPart, Vec<u8>)>> {
        if let Some(stack) = &self.packed {
            return match self.scale_dtype {
                DType::F16 => self.packed_band::<f16>(stack, k0, k1),
                _ => self.packed_band::<f32>(stack, k0, k1),
            };
        }
        if self.hqq() {
            return match self.scale_dtype {
                DType::F16 => self.hqq_band::<f16>(k0, k1),
                _ => self.hqq_band::<f32>(k0, k1),
            };
        }
        match self.scale_dtype {
            DType::F16 => self.band_to_dq::<f16>(k0, k1),
            _ => self.band_to_dq::<f32>(k0, k1),
        }
    }

    /// An RTN band: quantized in the MatMulNBits layout while the thread's weight buffer is
    /// borrowed, laid out for DequantizeLinear after it is released (the layout runs in
    /// parallel: a writer thread waiting on it may run another band, which borrows the buffer).
    fn band_to_dq<S: Scale + ToBytes>(&self, k0: usize, k1: usize) -> Result<Vec<(QuantPart, Vec<u8>)>> {
        let (n, band, settings) = (self.n(), k1 - k0, self.settings);
        let layout = settings.layout(band)?;
        let mut b = vec![0u8; n * layout.b_per_column()];
        let mut scales = vec![S::default(); n * layout.scales_per_column()];
        let mut zp = (!settings.symmetric()).then(|| vec![0u8; n * layout.zero_points_per_column()]);
        let error = self.with_block(0, n, k0, k1, |values| {
            let view = WeightView::column_major(values, band, n)?;
            quantize_measured(&settings, &view, NBitsOut { b: &mut b, scales: &mut scales, zero_points: zp.as_deref_mut() })
        })?;
        self.add_error(&error);
        if self.integer_offsets() {
            let offsets = self.zero_point_offsets(band, n, &scales, zp.as_deref().expect("asymmetric settings have zero points"))?;
            return self.dq_band_parts(&settings.as_symmetric(), band, n, &b, &scales, None, Some(offsets));
        }
        self.dq_band_parts(&settings, band, n, &b, &scales, zp.as_deref(), None)
    }

    /// Quantizes a view in the MatMulNBits layout, records its error, returns (B, scale
    /// bytes in the scale dtype, zero points).
    fn quantize_view<S: Scale + ToBytes>(&self, view: &WeightView<'_>) -> Result<NBitsBytes> {
        let layout = self.settings.layout(view.rows())?;
        let cols = view.cols();
        let mut b = vec![0u8; cols * layout.b_per_column()];
        let mut scales = vec![S::default(); cols * layout.scales_per_column()];
        let mut zp = (!self.settings.symmetric()).then(|| vec![0u8; cols * layout.zero_points_per_column()]);
        let error = quantize_measured(&self.settings, view, NBitsOut { b: &mut b, scales: &mut scales, zero_points: zp.as_deref_mut() })?;
        self.add_error(&error);
        Ok((b, self.scale_bytes(&scales), zp))
    }

    /// Scales as stored: f32 and f16 as computed; bf16 from the f32 scales (ONNX Runtime's
    /// quantizer quantizes a bf16 weight in f32 and casts its scales afterwards).
    fn scale_bytes<S: Scale + ToBytes>(&self, scales: &[S]) -> Vec<u8> {
        match self.scale_dtype {
            DType::BF16 => scales.iter().flat_map(|s| bf16::from_f32(s.to_f32()).to_le_bytes()).collect(),
            _ => S::slice_bytes(scales),
        }
    }

    /// Rows `n0..n1` of an HQQ group (the whole tensor, see [`Self::ranges`]): finds the
    /// tensor's number of solver updates ([`hqq::iterations`]: one read of the weight,
    /// [`HQQ_PASS_BYTES`] at a time, every block through every iteration, nothing kept per
    /// block but, for a tensor whose per-iteration zeros fit [`HQQ_TRACE_BYTES`], those zeros),
    /// then codes it in passes of the same size, in parallel: each block's zero at that update
    /// taken from the kept zeros ([`hqq::start_block`] gives its scale) or solved again while its
    /// values are read ([`hqq::Schedule::run_block`]), its codes, scale and, as the ZeroPoints
    /// part, its offset `scale * (mid - zero)` handed to `emit`
    /// ([`Self::float_zeros`]: MatMulNBits without zero points plus the offsets times the block
    /// sums, the form ONNX Runtime's CPU kernel runs fast), recording the weight error of that
    /// form.
    fn hqq_rows<S: Scale + ToBytes, R: Send>(&self, n0: usize, n1: usize, emit: &Emit<'_, R>) -> Result<Vec<R>> {
        use rayon::prelude::*;
        let (k, settings) = (self.k(), self.settings);
        let (bits, bs) = (settings.bits(), settings.block_size());
        let layout = settings.layout(k)?;
        let k_blocks = layout.k_blocks();
        // At most HQQ_PASS_BYTES of f32 rows per pass, and at least HQQ_MIN_PASSES passes, so
        // that every core has work (tensors are solved one at a time). Each pass drops the
        // pages it read: the weight is read twice in all.
        let rows = (HQQ_PASS_BYTES / (k * 4)).min((n1 - n0).div_ceil(HQQ_MIN_PASSES)).max(1);
        let read = |a: usize, b: usize, out: &mut [f32]| self.read_block(n0 + a, n0 + b, 0, k, out);
        // A tensor whose per-iteration zeros fit HQQ_TRACE_BYTES keeps them (each projection of
        // the 0.5B-1B shapes), so the coding pass takes each block's zero instead of solving it
        // again; a larger one (an embedding table) is solved again block by block.
        let (updates, zeros) = if (n1 - n0) * k_blocks * hqq::ITERATIONS * 4 <= HQQ_TRACE_BYTES {
            let (updates, zeros) = hqq::iterations_and_zeros(bits, bs, n1 - n0, k, rows, &read)?;
            (updates, Some(zeros))
        } else {
            (hqq::iterations(bits, bs, n1 - n0, k, rows, &read)?, None)
        };
        let schedule = hqq::Schedule::new();
        let cols = n1 - n0;
        let passes: Vec<usize> = (0..cols).step_by(rows).collect();
        hqq::install(|| passes
            .into_par_iter()
            .map(|c0| {
                let c1 = (c0 + rows).min(cols);
                let mut b = vec![0u8; (c1 - c0) * layout.b_per_column()];
                let mut scales = Vec::with_capacity((c1 - c0) * k_blocks);
                let mut offsets = Vec::with_capacity((c1 - c0) * k_blocks);
                let mut error = WeightError::default();
                self.with_block(n0 + c0, n0 + c1, 0, k, |values| {
                    for (i, row) in values.chunks_exact(k).enumerate() {
                        for kb in 0..k_blocks {
                            let p: HqqBlock = match &zeros {
                                Some(z) => HqqBlock { zero: z[(c0 + i) * k_blocks + kb], ..hqq::start_block(bits, bs, row, kb) },
                                None => schedule.run_block(bits, bs, row, kb, updates, None, true),
                            };
                            let blob = &mut b[i * layout.b_per_column() + kb * layout.blob_size()..][..layout.blob_size()];
                            let (scale, offset) = hqq_code_block::<S>(bits, bs, row, kb, &p, blob, &mut error);
                            scales.push(scale);
                            offsets.push(offset);
                        }
                    }
                    Ok(())
                })?;
                self.add_error(&error);
                emit(n0 + c0, self.parts(b, self.scale_bytes(&scales), Some(self.scale_bytes(&offsets))))
            })
            .collect())
    }

    /// Reduced rows `k0..k1` (whole blocks) of an HQQ group in the DequantizeLinear form: the
    /// tensor's number of solver updates is found once ([`hqq::iterations`]: one read of the
    /// weight; with [`hqq::iterations_and_zeros`] each block's zero too where the trace fits
    /// [`HQQ_TRACE_BYTES`], as [`Self::hqq_rows`] keeps them), then every block of the band is
    /// taken from its kept zero or solved to that update on its own values
    /// ([`hqq::Schedule::run_block`]; blocks are independent but for that count, so a band gives
    /// the bits the MatMulNBits form gives those blocks), in parallel on the solver's pool, and
    /// coded as [`Self::hqq_rows`] codes them; the codes are written against the mid point
    /// ([`Self::dq_settings`]) and the offsets `scale * (mid - zero)` as the ZeroPoints part,
    /// `[k_blocks, N]` in the scales' type. The writer runs such groups on its solver thread,
    /// band after band ([`Self::solves_whole_tensor`]), so the first band finds the count and
    /// the others read it; the lock is not held while it is found (a thread waiting on the
    /// solver's pool may run another task of its own pool).
    fn hqq_band<S: Scale + ToBytes>(&self, k0: usize, k1: usize) -> Result<Vec<(QuantPart, Vec<u8>)>> {
        use rayon::prelude::*;
        let (n, k, band) = (self.n(), self.k(), k1 - k0);
        let (bits, bs) = (self.settings.bits(), self.settings.block_size());
        let poisoned = || Error::Graph("a quantizing thread panicked".into());
        let all_blocks = k.div_ceil(bs);
        let known = self.hqq_solved.lock().map_err(|_| poisoned())?.as_ref().map(|h| (h.updates, h.zeros.clone()));
        let (updates, zeros) = match known {
            Some(known) => known,
            None => {
                let rows = (HQQ_PASS_BYTES / (k * 4)).clamp(1, n);
                let read = |a: usize, b: usize, out: &mut [f32]| self.read_block(a, b, 0, k, out);
                let (u, z) = if n * all_blocks * hqq::ITERATIONS * 4 <= HQQ_TRACE_BYTES {
                    let (u, z) = hqq::iterations_and_zeros(bits, bs, n, k, rows, &read)?;
                    (u, Some(Arc::new(z)))
                } else {
                    (hqq::iterations(bits, bs, n, k, rows, &read)?, None)
                };
                // Two first bands solving at once (a whole-tensor materialize beside the writer)
                // find the same result: the first stored is kept, with what it has coded.
                let mut solved = self.hqq_solved.lock().map_err(|_| poisoned())?;
                let h = solved.get_or_insert_with(|| HqqSolved { updates: u, zeros: z, coded: vec![false; all_blocks] });
                (h.updates, h.zeros.clone())
            }
        };
        let first_block = k0 / bs;
        let layout = self.settings.layout(band)?;
        let k_blocks = layout.k_blocks();
        let schedule = hqq::Schedule::new();
        // Column-major [band, N]: weight row c's values of this band are contiguous; rows in
        // chunks, at least HQQ_MIN_PASSES of them so that every core has work.
        let chunk = n.div_ceil(HQQ_MIN_PASSES).max(1);
        type Coded<S> = (Vec<u8>, Vec<S>, Vec<S>, WeightError);
        // The band in a buffer of its own: waiting on the solver's pool, a writer-pool thread
        // may run another task of its pool, which would find the thread's reused buffer borrowed.
        let mut values = vec![0f32; n * band];
        self.read_block(0, n, k0, k1, &mut values)?;
        let coded: Vec<Coded<S>> = {
            hqq::install(|| {
                values
                    .par_chunks(band * chunk)
                    .enumerate()
                    .map(|(ci, rows)| {
                        let (c0, cols) = (ci * chunk, rows.len() / band);
                        let mut b = vec![0u8; cols * layout.b_per_column()];
                        let (mut scales, mut offsets) = (Vec::with_capacity(cols * k_blocks), Vec::with_capacity(cols * k_blocks));
                        let mut error = WeightError::default();
                        for (i, row) in rows.chunks_exact(band).enumerate() {
                            for kb in 0..k_blocks {
                                let p: HqqBlock = match &zeros {
                                    Some(z) => HqqBlock { zero: z[(c0 + i) * all_blocks + first_block + kb], ..hqq::start_block(bits, bs, row, kb) },
                                    None => schedule.run_block(bits, bs, row, kb, updates, None, true),
                                };
                                let blob = &mut b[i * layout.b_per_column() + kb * layout.blob_size()..][..layout.blob_size()];
                                let (scale, offset) = hqq_code_block::<S>(bits, bs, row, kb, &p, blob, &mut error);
                                scales.push(scale);
                                offsets.push(offset);
                            }
                        }
                        (b, scales, offsets, error)
                    })
                    .collect()
            })
        };
        drop(values);
        drop(zeros);
        if let Some(h) = self.hqq_solved.lock().map_err(|_| poisoned())?.as_mut() {
            h.coded[first_block..first_block + k_blocks].fill(true);
            if h.coded.iter().all(|&c| c) {
                h.zeros = None;
            }
        }
        let (mut b, mut scales, mut offsets) = (Vec::with_capacity(n * layout.b_per_column()), Vec::with_capacity(n * k_blocks), Vec::with_capacity(n * k_blocks));
        for (cb, cs, co, error) in coded {
            b.extend(cb);
            scales.extend(cs);
            offsets.extend(co);
            self.add_error(&error);
        }
        // On the solver's pool (this is the writer's solver thread, outside every pool).
        hqq::install(|| self.dq_band_parts(&self.dq_settings(), band, n, &b, &scales, None, Some(self.scale_bytes(&offsets))))
    }

    fn parts(&self, data: Vec<u8>, scales: Vec<u8>, zp: Option<Vec<u8>>) -> Vec<(QuantPart, Vec<u8>)> {
        let mut out = vec![(QuantPart::Data, data), (QuantPart::Scales, scales)];
        if let Some(z) = zp {
            out.push((QuantPart::ZeroPoints, z));
        }
        out
    }

    /// Every range the writer produces, as `(start, end)`, for about `budget` input bytes each.
    pub(crate) fn ranges(&self, budget: usize) -> Vec<(usize, usize)> {
        let (total, step) = match self.form {
            // HQQ's iterations are a property of the whole tensor: one range, solved in passes.
            QuantForm::NBits if self.hqq() => (self.n(), self.n()),
            QuantForm::NBits => (self.n(), self.rows_per_range(budget)),
            QuantForm::Dq => (self.k(), self.band_rows(budget)),
        };
        (0..total).step_by(step).map(|s| (s, (s + step).min(total))).collect()
    }

    /// Computes the whole group once and records its error, as writing it range by range does:
    /// for a weight whose parts are all stored inline (materialized, which records nothing).
    pub(crate) fn record_error(&self) -> Result<()> {
        for (s, e) in self.ranges(usize::MAX / 2) {
            self.compute(s, e)?;
        }
        Ok(())
    }

    /// The whole of one part (computes the whole group; the error is not recorded twice).
    pub(crate) fn materialize(&self, part: QuantPart) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.byte_len(part)];
        let saved = self.error.lock().map(|e| *e).unwrap_or_default();
        for (s, e) in self.ranges(usize::MAX / 2) {
            let at = self.part_offset(part, s);
            for (p, bytes) in self.compute(s, e)? {
                if p == part {
                    out[at..at + bytes.len()].copy_from_slice(&bytes);
                }
            }
        }
        if let Ok(mut e) = self.error.lock() {
            *e = saved;
        }
        Ok(out)
    }
}

/// Takes the parts of weight rows from `first` on (`(first, parts)`): how [`QuantGroup::compute_each`]
/// hands a range over, piece by piece.
pub(crate) type Emit<'a, R> = dyn Fn(usize, Vec<(QuantPart, Vec<u8>)>) -> Result<R> + Sync + 'a;

/// f32 bytes of weight rows an HQQ pass reads at a time: each core holds one pass's rows (and
/// the coding pass its output), so this bounds the solver's memory; 2 MiB took a 0.5B build's
/// peak RSS from 82 to 51 MB at the same speed (8 MiB before).
const HQQ_PASS_BYTES: usize = 2 << 20;

/// Source rows read between two releases of their pages when a band of columns is read.
const RELEASE_BYTES: usize = 4 << 20;

/// Codes block `kb` of `row` with its solved parameters `p` into `blob` (packed as MatMulNBits
/// packs them) and adds its weight error to `error`; returns its scale and its offset
/// `scale * (mid - zero)` in the scales' type, the value MatMulNBits without zero points plus
/// the block offsets computes being `(code - mid) * scale + offset`.
fn hqq_code_block<S: Scale>(bits: Bits, bs: usize, row: &[f32], kb: usize, p: &HqqBlock, blob: &mut [u8], error: &mut WeightError) -> (S, S) {
    let (max_q, mid) = (bits.max_q() as f32, bits.mid() as f32);
    let scale = S::from_f32(p.scale());
    let s = scale.to_f32();
    let offset = S::from_f32(s * (mid - p.zero));
    let src = &row[kb * bs..((kb + 1) * bs).min(row.len())];
    let o = offset.to_f32();
    let mut codes = [0u8; crate::quant::MAX_BLOCK];
    // Eight error lanes, so the loop vectorizes (one f64 sum was a chain of dependent adds, as
    // long as the solver's passes).
    let (mut sq, mut top) = ([0f64; 8], [0f32; 8]);
    let mut lane = |l: usize, q: &mut u8, v: f32| {
        let code = p.code(max_q, v);
        *q = code as u8;
        let d = (v - ((code - mid) * s + o)).abs();
        sq[l] += d as f64 * d as f64;
        top[l] = top[l].max(d);
    };
    let (mut qs, mut vs) = (codes[..src.len()].chunks_exact_mut(8), src.chunks_exact(8));
    for (qc, vc) in (&mut qs).zip(&mut vs) {
        for l in 0..8 {
            lane(l, &mut qc[l], vc[l]);
        }
    }
    for (l, (q, &v)) in qs.into_remainder().iter_mut().zip(vs.remainder()).enumerate() {
        lane(l, q, v);
    }
    error.merge(&WeightError { max_abs: top.iter().fold(0f32, |m, &d| m.max(d)), sum_sq: sq.iter().sum(), count: src.len() as u64 });
    pack_codes(bits, &codes[..src.len()], blob);
    (scale, offset)
}
/// The fewest passes an HQQ tensor is cut into (see [`QuantGroup::hqq_rows`]): a few per core
/// of these machines, so the last pass does not leave cores idle for long.
const HQQ_MIN_PASSES: usize = 16;
/// The most bytes of per-iteration zeros (80 per block) an HQQ solve keeps so that its coding
/// pass need not solve the blocks again (see [`QuantGroup::hqq_rows`]): every projection of
/// the 0.5B-1B shapes (4864 x 896 in blocks of 32: 11 MB), not embedding tables.
const HQQ_TRACE_BYTES: usize = 16 << 20;

/// Codes of one block into its blob: a byte each (8 bits) or two per byte, the even row in the
/// low nibble (4 bits); bytes past the codes are 0.
fn pack_codes(bits: Bits, codes: &[u8], blob: &mut [u8]) {
    blob.fill(0);
    match bits {
        Bits::Int8 => blob[..codes.len()].copy_from_slice(codes),
        Bits::Int4 => {
            for (i, &q) in codes.iter().enumerate() {
                blob[i / 2] |= (q & 0x0f) << (4 * (i % 2));
            }
        }
    }
}

thread_local! {
    /// Each writer thread's f32 weights of the range it quantizes.
    static WEIGHTS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `v` rounded to a scale type (f32, f16 or bf16), back in f32.
fn round_to(dtype: DType, v: f32) -> f32 {
    match dtype {
        DType::F16 => f16::from_f32(v).to_f32(),
        DType::BF16 => bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

/// B, the scales' bytes and the zero points of a range, MatMulNBits layout.
type NBitsBytes = (Vec<u8>, Vec<u8>, Option<Vec<u8>>);

/// Little-endian bytes of scales (little-endian hosts: the stream writer assumes it too).
pub(crate) trait ToBytes: Sized {
    /// The values' little-endian bytes, in one copy.
    fn slice_bytes(values: &[Self]) -> Vec<u8>;
}
impl ToBytes for f32 {
    fn slice_bytes(values: &[Self]) -> Vec<u8> {
        bytemuck::cast_slice(values).to_vec()
    }
}
impl ToBytes for f16 {
    fn slice_bytes(values: &[Self]) -> Vec<u8> {
        bytemuck::cast_slice(values).to_vec()
    }
}

impl Recipe {
    /// One part of a quantized weight.
    pub fn quantized(group: &Arc<QuantGroup>, part: QuantPart) -> Recipe {
        Recipe::Quantized { group: Arc::clone(group), part }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{quantize, weight_error, Bits};

    /// A `[n, k]` weight with varied magnitudes and signs (deterministic).
    fn weight(n: usize, k: usize) -> (Vec<f32>, Recipe) {
        let v: Vec<f32> = (0..n * k).map(|i| ((i * 7919 % 1013) as f32 / 1013.0 - 0.45) * (1.0 + (i % 5) as f32)).collect();
        let r = Recipe::from_f32("w", vec![n, k], &v);
        (v, r)
    }

    /// The `[K, N]` transpose of a `[N, K]` row-major matrix.
    fn transposed(v: &[f32], n: usize, k: usize) -> Vec<f32> {
        (0..k).flat_map(|r| (0..n).map(move |c| v[c * k + r])).collect()
    }

    fn all_settings() -> Vec<QuantSettings> {
        let mut out = Vec::new();
        for bits in [Bits::Int4, Bits::Int8] {
            for sym in [true, false] {
                out.push(QuantSettings::new(bits, 16, sym).unwrap());
            }
        }
        out
    }

    #[test]
    fn nbits_parts_equal_the_kernel_on_the_transposed_weight() {
        // K = 40 is not a multiple of the block: the last block is padded.
        let (n, k) = (5, 40);
        let (v, r) = weight(n, k);
        let t = transposed(&v, n, k);
        for s in all_settings() {
            let g = QuantGroup::new("w", r.clone(), s, DType::F32, QuantForm::NBits).unwrap();
            let layout = s.layout(k).unwrap();
            let mut b = vec![0u8; n * layout.b_per_column()];
            let mut scales = vec![0f32; n * layout.scales_per_column()];
            let mut zp = (!s.symmetric()).then(|| vec![0u8; n * layout.zero_points_per_column()]);
            let view = WeightView::new(&t, k, n, n).unwrap();
            quantize(&s, &view, NBitsOut { b: &mut b, scales: &mut scales, zero_points: zp.as_deref_mut() }).unwrap();
            assert_eq!(Recipe::quantized(&g, QuantPart::Data).materialize().unwrap(), b, "{s:?}");
            let sb: Vec<u8> = scales.iter().flat_map(|x| x.to_le_bytes()).collect();
            assert_eq!(Recipe::quantized(&g, QuantPart::Scales).materialize().unwrap(), sb);
            assert_eq!(g.has(QuantPart::ZeroPoints), zp.is_some());
            if let Some(zp) = zp {
                assert_eq!(Recipe::quantized(&g, QuantPart::ZeroPoints).materialize().unwrap(), zp);
            }
            assert_eq!(Recipe::quantized(&g, QuantPart::Data).byte_len(), b.len());
            // The same weight stored [K, N] (a Conv1D layout) behind a transpose.
            let conv = Recipe::from_f32("w", vec![k, n], &t).transpose(vec![1, 0]);
            let g = QuantGroup::new("w", conv, s, DType::F32, QuantForm::NBits).unwrap();
            assert_eq!(Recipe::quantized(&g, QuantPart::Data).materialize().unwrap(), b, "{s:?} transposed");
        }
    }

    #[test]
    fn dq_bands_equal_the_whole_conversion() {
        // Bands of one block (16 rows) over K = 64, and an odd N (whole-K band for 4-bit zp).
        for (n, k) in [(6, 64), (5, 48)] {
            let (v, r) = weight(n, k);
            let t = transposed(&v, n, k);
            for s in all_settings() {
                let g = QuantGroup::new("w", r.clone(), s, DType::F16, QuantForm::Dq).unwrap();
                // The expected bytes round as the form's quantizer does.
                let s = s.with_rounding(QuantForm::Dq.rounding(s.bits()));
                assert_eq!(g.settings(), s);
                let layout = s.layout(k).unwrap();
                let mut b = vec![0u8; n * layout.b_per_column()];
                let mut scales = vec![f16::ZERO; n * layout.scales_per_column()];
                let mut zp = (!s.symmetric()).then(|| vec![0u8; n * layout.zero_points_per_column()]);
                let view = WeightView::new(&t, k, n, n).unwrap();
                quantize(&s, &view, NBitsOut { b: &mut b, scales: &mut scales, zero_points: zp.as_deref_mut() }).unwrap();
                let q = NBits { b: &b, scales: &scales, zero_points: zp.as_deref() };
                let (dl, sl, zl) = dq_lengths(&s, k, n).unwrap();
                let mut data = vec![0u8; dl];
                let mut ds = vec![f16::ZERO; sl];
                let mut dz = zl.map(|l| vec![0u8; l]);
                to_dequantize_linear(&s, k, n, q, DqOut { data: &mut data, scales: &mut ds, zero_points: dz.as_deref_mut() }).unwrap();
                // One block of rows per band.
                let mut got = [vec![0u8; g.byte_len(QuantPart::Data)], vec![0u8; g.byte_len(QuantPart::Scales)], vec![0u8; g.byte_len(QuantPart::ZeroPoints)]];
                let ranges = g.ranges(n * 4 * 16);
                if n % 2 == 1 && s.bits() == Bits::Int4 && !s.symmetric() {
                    assert_eq!(ranges, vec![(0, k)], "odd N with packed 4-bit zero points: one band");
                } else {
                    assert_eq!(ranges.len(), k / 16);
                }
                for (a, e) in ranges {
                    for (p, bytes) in g.compute(a, e).unwrap() {
                        let at = g.part_offset(p, a);
                        got[p as usize][at..at + bytes.len()].copy_from_slice(&bytes);
                    }
                }
                assert_eq!(got[0], data, "{s:?} n={n}");
                let sb: Vec<u8> = ds.iter().flat_map(|x| x.to_le_bytes()).collect();
                assert_eq!(got[1], sb);
                if let Some(dz) = dz {
                    assert_eq!(got[2], dz);
                }
                assert_eq!(g.shape(QuantPart::Data), vec![k, n]);
                assert_eq!(g.shape(QuantPart::Scales), vec![k / 16, n]);
            }
        }
    }

    /// Integer zero points in the offset form (an EP whose DequantizeLinear takes signed data
    /// only): the data are the asymmetric codes against the mid point, signed, with no zero
    /// points; the ZeroPoints part holds each block's `scale * (mid - zero)`, `[k_blocks, N]`
    /// in the scale type (exact in f32, one rounding in f16), so `scale * code + offset` is the
    /// asymmetric value; the scales are unchanged. Written in bands of one block.
    #[test]
    fn integer_zero_points_as_offsets_keep_the_asymmetric_values() {
        let (k, bs) = (64, 16);
        let kb = k / bs;
        // An odd N too: its packed 4-bit zero points pad each column.
        for (n, bits, scale_dtype) in [6, 5].into_iter().flat_map(|n| [Bits::Int4, Bits::Int8].into_iter().flat_map(move |b| [DType::F32, DType::F16, DType::BF16].map(|d| (n, b, d)))) {
            let (_, r) = weight(n, k);
            {
                let what = format!("n={n} {bits:?} {scale_dtype}");
                let s = QuantSettings::new(bits, bs, false).unwrap();
                let plain = QuantGroup::new("w", r.clone(), s, scale_dtype, QuantForm::Dq).unwrap();
                let mut g = QuantGroup::new("w", r.clone(), s, scale_dtype, QuantForm::Dq).unwrap();
                Arc::get_mut(&mut g).unwrap().offset_zero_points();
                assert!(g.float_zeros() && !plain.float_zeros(), "{what}");
                assert_eq!(g.dtype(QuantPart::Data), if bits == Bits::Int4 { DType::I4 } else { DType::I8 }, "{what}");
                assert_eq!((g.dtype(QuantPart::ZeroPoints), g.shape(QuantPart::ZeroPoints)), (scale_dtype, vec![kb, n]), "{what}");
                let mut got = [vec![0u8; g.byte_len(QuantPart::Data)], vec![0u8; g.byte_len(QuantPart::Scales)], vec![0u8; g.byte_len(QuantPart::ZeroPoints)]];
                let ranges = g.ranges(n * 4 * bs);
                assert_eq!(ranges.len(), kb, "{what}: one block per band");
                for (a, e) in ranges {
                    for (p, bytes) in g.compute(a, e).unwrap() {
                        let at = g.part_offset(p, a);
                        got[p as usize][at..at + bytes.len()].copy_from_slice(&bytes);
                    }
                }
                let part = |p| Recipe::quantized(&plain, p).materialize().unwrap();
                let (codes, scales, zeros) = (part(QuantPart::Data), part(QuantPart::Scales), part(QuantPart::ZeroPoints));
                assert_eq!(got[1], scales, "{what}: the scales are the asymmetric blocks' own");
                let float = |b: &[u8], i: usize| match scale_dtype {
                    DType::F16 => f16::from_le_bytes([b[2 * i], b[2 * i + 1]]).to_f32(),
                    DType::BF16 => bf16::from_le_bytes([b[2 * i], b[2 * i + 1]]).to_f32(),
                    _ => f32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap()),
                };
                let elem = |b: &[u8], i: usize| -> i32 {
                    match bits {
                        Bits::Int8 => i32::from(b[i]),
                        Bits::Int4 => i32::from((b[i / 2] >> (4 * (i % 2))) & 0xf),
                    }
                };
                let signed = |v: i32| match bits {
                    Bits::Int8 => i32::from(v as u8 as i8),
                    Bits::Int4 if v >= 8 => v - 16,
                    Bits::Int4 => v,
                };
                let mid = i32::from(bits.mid());
                let (mut worst, mut largest_scale) = (0f32, 0f32);
                for row in 0..k {
                    for c in 0..n {
                        let (i, blk) = (row * n + c, (row / bs) * n + c);
                        let (scale, code, zero) = (float(&scales, blk), elem(&codes, i), elem(&zeros, blk));
                        assert_eq!(signed(elem(&got[0], i)), code - mid, "{what}: row {row} column {c} against the mid point");
                        let (offset, exact) = (float(&got[2], blk), scale * (mid - zero) as f32);
                        let rounded = round_to(scale_dtype, exact);
                        assert_eq!(offset, rounded, "{what}: block {blk}");
                        worst = worst.max((scale * (code - mid) as f32 + offset - scale * (code - zero) as f32).abs());
                        largest_scale = largest_scale.max(scale.abs());
                    }
                }
                // One rounding of an offset of at most 8 (128) scales (f16: 11 bits, bf16: 8);
                // f32: exact offsets.
                let bound = match scale_dtype {
                    DType::F16 => largest_scale * f32::from(bits.mid()) / 1024.0,
                    DType::BF16 => largest_scale * f32::from(bits.mid()) / 128.0,
                    _ => 1e-5,
                };
                assert!(worst <= bound, "{what}: {worst} > {bound}");
                assert!(g.error().max_abs >= plain.error().max_abs, "{what}: the offsets' rounding adds to the codes' error");
            }
        }
    }

    /// HQQ in the DequantizeLinear form, written in bands of one block (the last one partial),
    /// has the MatMulNBits form's codes, scales and offsets: the update count is the tensor's,
    /// and each block is solved on its own values.
    #[test]
    fn hqq_bands_give_the_nbits_forms_codes_scales_and_offsets() {
        // An odd N: each band's 4-bit codes still start on a byte (bands are whole blocks).
        let (n, k, bs): (usize, usize, usize) = (7, 72, 16);
        let kb = k.div_ceil(bs);
        let (_, r) = weight(n, k);
        let s = QuantSettings::new(Bits::Int4, bs, false).unwrap().with_method(Method::Hqq);
        let nbits = QuantGroup::new("w", r.clone(), s, DType::F32, QuantForm::NBits).unwrap();
        let dq = QuantGroup::new("w", r, s, DType::F32, QuantForm::Dq).unwrap();
        let whole: Vec<Vec<u8>> = nbits.compute(0, n).unwrap().into_iter().map(|(_, b)| b).collect();
        let ranges = dq.ranges(n * 4 * bs);
        assert_eq!(ranges.len(), kb, "one block per band");
        // The first pass codes from the zeros kept by the first band's solve, the second (those
        // zeros dropped once every band was coded) solves each block again.
        let mut passes = Vec::new();
        for kept in [true, false] {
            let mut got = [vec![0u8; dq.byte_len(QuantPart::Data)], vec![0u8; dq.byte_len(QuantPart::Scales)], vec![0u8; dq.byte_len(QuantPart::ZeroPoints)]];
            for (i, &(a, e)) in ranges.iter().enumerate() {
                for (p, bytes) in dq.compute(a, e).unwrap() {
                    let at = dq.part_offset(p, a);
                    got[p as usize][at..at + bytes.len()].copy_from_slice(&bytes);
                }
                let zeros_kept = dq.hqq_solved.lock().unwrap().as_ref().unwrap().zeros.is_some();
                assert_eq!(zeros_kept, kept && i + 1 < ranges.len(), "band {i}: zeros kept until every band is coded");
            }
            passes.push(got);
        }
        assert_eq!(passes[0], passes[1], "kept zeros give the bits of solving again");
        let got = passes.pop().unwrap();
        assert_eq!(dq.dtype(QuantPart::Data), DType::I4, "codes against the mid point, signed");
        let f32s = |b: &[u8]| -> Vec<f32> { b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect() };
        let (blob, nb_scales, nb_offsets) = (bs / 2, f32s(&whole[1]), f32s(&whole[2]));
        let (dq_scales, dq_offsets) = (f32s(&got[1]), f32s(&got[2]));
        for c in 0..n {
            for r in 0..k {
                let byte = whole[0][c * kb * blob + (r / bs) * blob + (r % bs) / 2];
                let code = if r % 2 == 0 { byte & 0x0f } else { byte >> 4 } as i32;
                let i = r * n + c;
                let nib = if i % 2 == 0 { got[0][i / 2] & 0x0f } else { got[0][i / 2] >> 4 } as i32;
                let signed = if nib >= 8 { nib - 16 } else { nib };
                assert_eq!(signed + 8, code, "code [{c}, {r}]");
            }
            for b in 0..kb {
                assert_eq!(dq_scales[b * n + c].to_bits(), nb_scales[c * kb + b].to_bits(), "scale [{c}, {b}]");
                assert_eq!(dq_offsets[b * n + c].to_bits(), nb_offsets[c * kb + b].to_bits(), "offset [{c}, {b}]");
            }
        }
        assert!(nb_offsets.iter().any(|&o| o != 0.0), "the offsets carry the zero points");
    }

    #[test]
    fn errors_name_the_tensor_and_the_element() {
        let mut v = vec![0.5f32; 4 * 32];
        v[2 * 32 + 7] = f32::NAN;
        let r = Recipe::from_f32("w", vec![4, 32], &v);
        let s = QuantSettings::new(Bits::Int4, 16, true).unwrap();
        for form in [QuantForm::NBits, QuantForm::Dq] {
            let g = QuantGroup::new("model.layers.0.mlp.up_proj.weight", r.clone(), s, DType::F32, form).unwrap();
            let e = Recipe::quantized(&g, QuantPart::Data).materialize().unwrap_err().to_string();
            assert!(e.contains("model.layers.0.mlp.up_proj.weight") && e.contains("[2, 7]"), "{form:?}: {e}");
        }
        let g = QuantGroup::new("t", Recipe::from_i64("t", vec![2, 16], &[0; 32]), s, DType::F32, QuantForm::NBits);
        assert!(g.unwrap_err().to_string().contains("float weight"));
    }

    /// The writer's threads finish a group's ranges in any order: the recorded error is the same
    /// for every order, where f64 sums of the same ranges differ (0.1 + 0.2 + 0.3).
    #[test]
    fn the_recorded_error_does_not_depend_on_the_order_of_the_ranges() {
        let e = |sum_sq: f64| WeightError { max_abs: sum_sq as f32, sum_sq, count: 3 };
        let ranges = [e(0.1), e(0.2), e(0.3)];
        let (mut f64_fwd, mut f64_back) = (WeightError::default(), WeightError::default());
        let (mut fwd, mut back) = (ErrorSum::default(), ErrorSum::default());
        for r in &ranges {
            f64_fwd.merge(r);
            fwd.add(r);
        }
        for r in ranges.iter().rev() {
            f64_back.merge(r);
            back.add(r);
        }
        assert_ne!(f64_fwd.sum_sq.to_bits(), f64_back.sum_sq.to_bits(), "the f64 sums differ by order");
        assert_eq!(fwd.total().sum_sq.to_bits(), back.total().sum_sq.to_bits());
        assert_eq!((fwd.total().count, fwd.total().max_abs), (9, 0.3));
        assert!((fwd.total().sum_sq - 0.6).abs() < 1e-15);
        let mut huge = ErrorSum::default();
        huge.add(&e(1e300));
        huge.add(&e(f64::NAN));
        assert!(huge.total().sum_sq.is_finite());
    }

    #[test]
    fn the_error_is_recorded_once_per_written_range() {
        let (n, k) = (8, 32);
        let (_, r) = weight(n, k);
        let s = QuantSettings::new(Bits::Int4, 16, false).unwrap();
        let g = QuantGroup::new("w", r, s, DType::F32, QuantForm::NBits).unwrap();
        Recipe::quantized(&g, QuantPart::Data).materialize().unwrap();
        assert_eq!(g.error().count, 0, "materialize does not count as a write");
        for (a, e) in g.ranges(3 * k * 4) {
            g.compute(a, e).unwrap();
        }
        let e = g.error();
        assert_eq!(e.count, (n * k) as u64);
        // The error measured while packing is the separate pass's figure.
        let (v, _) = weight(n, k);
        let t = transposed(&v, n, k);
        let view = WeightView::new(&t, k, n, n).unwrap();
        let layout = s.layout(k).unwrap();
        let (mut b, mut sc, mut zp) = (vec![0u8; n * layout.b_per_column()], vec![0f32; n * layout.scales_per_column()], vec![0u8; n * layout.zero_points_per_column()]);
        quantize(&s, &view, NBitsOut { b: &mut b, scales: &mut sc, zero_points: Some(&mut zp) }).unwrap();
        let separate = weight_error(&s, &view, NBits { b: &b, scales: &sc, zero_points: Some(&zp) }).unwrap();
        assert_eq!(e.max_abs, separate.max_abs);
        // Per-block f32 sums: equal to a few ulps of f32.
        assert!((e.sum_sq - separate.sum_sq).abs() <= 1e-5 * separate.sum_sq, "{e:?} vs {separate:?}");
        assert!(e.max_abs > 0.0 && e.rms() > 0.0 && (e.rms() as f32) <= e.max_abs);
    }
}
