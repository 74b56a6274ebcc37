//! Pre-quantized layers as one MatMulNBits weight: a layer, a slice of its output rows (a
//! fused projection split per part) or several stacked along N (Q, K and V packed into one
//! MatMul), with the checkpoint's integers written in MatMulNBits layout.

use super::PackedWeight;
use crate::quant::{Bits, QuantSettings, Scale, WeightError, MAX_BLOCK, MIN_BLOCK};
use crate::{DType, Error, Recipe, Result};
use std::ops::Range;
use std::sync::Arc;

/// Rows `range` of each layer, stacked in order along N.
#[derive(Debug)]
pub struct PackedStack {
    parts: Vec<(Arc<PackedWeight>, Range<usize>)>,
    n: usize,
    k: usize,
    settings: QuantSettings,
    order: Option<Arc<[u32]>>,
    /// Zero points are written as floats (a GGUF type with a min is among the layers).
    float_zeros: bool,
}

/// Where [`PackedStack::nbits`] writes zero points: packed integers (GPTQ, AWQ), or, for
/// blocks with a float zero point `z` (GGUF types with a min), each block's offset from the
/// implicit mid zero point, `scale * (mid - z)` (`[N, k_blocks]` in the scales' type): the
/// weight is `scale * (q - mid) + offset`, a MatMulNBits without zero points (ONNX Runtime
/// 1.32's CPU kernel has no fast path for float zero points: about 30x slower) plus the
/// activation's block sums times the offsets.
pub(crate) enum ZeroOut<'a, S> {
    Packed(&'a mut [u8]),
    Float(&'a mut [S]),
}

/// The layers and row ranges `r` reads, when it reads pre-quantized layers only through
/// float casts, row slices, row concatenations and same-shape reshapes.
fn rows_of(r: &Recipe) -> Option<Vec<(Arc<PackedWeight>, Range<usize>)>> {
    match r {
        Recipe::Packed(p) => Some(vec![(Arc::clone(p), 0..p.n())]),
        Recipe::Cast { input, to } if to.is_float() => rows_of(input),
        Recipe::Reshape { input, shape } if *shape == input.shape() => rows_of(input),
        Recipe::Slice { input, axis: 0, start, end } => {
            let mut out = Vec::new();
            let mut at = 0;
            for (p, range) in rows_of(input)? {
                let len = range.len();
                let (lo, hi) = ((*start).max(at), (*end).min(at + len));
                if lo < hi {
                    out.push((p, range.start + lo - at..range.start + hi - at));
                }
                at += len;
            }
            Some(out)
        }
        Recipe::Concat { inputs, axis: 0 } => {
            let mut out = Vec::new();
            for i in inputs {
                out.extend(rows_of(i)?);
            }
            Some(out)
        }
        _ => None,
    }
}

/// The largest power of two that divides `n`.
fn pow2_factor(n: usize) -> usize {
    1 << n.trailing_zeros()
}

impl PackedStack {
    /// The stack a `[N, K]` weight recipe reads: `None` when it reads no pre-quantized layer,
    /// an error when it reads one in a way that cannot keep its integers (transposed, mixed
    /// with float rows, computed on).
    pub fn from_recipe(name: &str, r: &Recipe) -> Option<Result<PackedStack>> {
        if !r.has_packed() {
            return None;
        }
        let Some(parts) = rows_of(r) else {
            return Some(Err(Error::Recipe {
                tensor: name.to_string(),
                reason: format!(
                    "it reads pre-quantized weights through {}, which cannot keep their integers (only row slices and row concatenations of them can)",
                    r.describe()
                ),
            }));
        };
        Some(Self::new(name, parts))
    }

    fn new(name: &str, parts: Vec<(Arc<PackedWeight>, Range<usize>)>) -> Result<PackedStack> {
        let bad = |reason: String| Error::Recipe { tensor: name.to_string(), reason };
        let Some((first, _)) = parts.first() else { return Err(bad("it reads no rows of its pre-quantized weights".into())) };
        let (k, bits) = (first.k(), first.bits());
        let mut group_gcd = 0usize;
        for (p, _) in &parts {
            if p.k() != k || p.bits() != bits || p.order().map(|o| &o[..]) != first.order().map(|o| &o[..]) {
                return Err(bad(format!(
                    "it stacks `{}` and `{}`, which differ in input features, bits or act-order row order, so they cannot share one MatMulNBits",
                    first.name, p.name
                )));
            }
            group_gcd = gcd(group_gcd, p.group_size());
        }
        // A block inside every group: a power of two dividing the group sizes, at most 256.
        let block = pow2_factor(group_gcd).min(MAX_BLOCK);
        if block < MIN_BLOCK {
            return Err(bad(format!(
                "its groups of {group_gcd} rows are not a multiple of {MIN_BLOCK}, the smallest MatMulNBits block; no block of one group only exists"
            )));
        }
        let float_zeros = parts.iter().any(|(p, _)| p.float_zeros());
        if parts.iter().any(|(p, _)| p.format() == super::PackedFormat::Gguf) && parts.iter().any(|(p, _)| p.format() != super::PackedFormat::Gguf) {
            return Err(bad("it stacks GGUF tensors with GPTQ/AWQ layers".into()));
        }
        let symmetric = parts.iter().all(|(p, _)| p.symmetric()) && !float_zeros;
        let settings = QuantSettings::new(bits, block, symmetric)?;
        let n = parts.iter().map(|(_, r)| r.len()).sum();
        Ok(PackedStack { order: first.order().cloned(), parts, n, k, settings, float_zeros })
    }

    /// Bits, block (a power of two dividing every group) and symmetry of the written form.
    pub fn settings(&self) -> QuantSettings {
        self.settings
    }
    pub fn n(&self) -> usize {
        self.n
    }
    pub fn k(&self) -> usize {
        self.k
    }
    /// The checkpoint row of each written row, when act-order reorders them (the activation
    /// must be gathered in this order).
    pub fn order(&self) -> Option<&Arc<[u32]>> {
        self.order.as_ref()
    }
    /// Whether the zero points are written as floats in the scales' type (`[N, k_blocks]`).
    pub fn float_zeros(&self) -> bool {
        self.float_zeros
    }
    /// The layers it reads.
    pub fn layers(&self) -> impl Iterator<Item = &Arc<PackedWeight>> {
        self.parts.iter().map(|(p, _)| p)
    }

    /// Writes output rows `n0..n1`, written rows `k0..k1` (`k0` a multiple of the block) in
    /// MatMulNBits layout: `b` `[n1 - n0, k_blocks, blob]`, `scales` `[n1 - n0, k_blocks]`,
    /// `zero_points` packed `[n1 - n0, ceil(k_blocks * bits / 8)]` (asymmetric only). Scales are
    /// stored in `S`; `scale_dtype` is the type they end up in (bf16 is stored from f32), for
    /// the error: zero unless a scale does not fit that type.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn nbits<S: Scale>(
        &self,
        n0: usize,
        n1: usize,
        k0: usize,
        k1: usize,
        scale_dtype: DType,
        b: &mut [u8],
        scales: &mut [S],
        mut zero_points: Option<ZeroOut<'_, S>>,
    ) -> Result<WeightError> {
        let s = self.settings;
        let (bits, bs) = (s.bits(), s.block_size());
        debug_assert!(k0.is_multiple_of(bs));
        let layout = s.layout(k1 - k0)?;
        let (kb, blob, zpc) = (layout.k_blocks(), layout.blob_size(), layout.zero_points_per_column());
        b.fill(0);
        match zero_points.as_mut() {
            Some(ZeroOut::Packed(z)) => z.fill(0),
            Some(ZeroOut::Float(z)) => z.fill(S::default()),
            None => {}
        }
        let mut error = WeightError::default();
        if self.parts.iter().any(|(p, _)| p.ggml_type().is_some()) {
            self.ggml_nbits(n0, n1, k0, k1, scale_dtype, b, scales, zero_points, &mut error)?;
            return Ok(error);
        }
        let order = self.order.as_deref();
        // Checkpoint rows to decode: the band itself, or all of K when act-order scatters it.
        let (c0, c1) = if order.is_some() { (0, self.k) } else { (k0, k1) };
        let width = c1 - c0;
        let mut codes = Vec::new();
        let mut at = 0; // first output row of the current part
        let mut row = 0; // rows written so far
        for (p, range) in &self.parts {
            let start = at;
            at += range.len();
            let (lo, hi) = (n0.max(start), n1.min(at));
            if lo >= hi {
                continue;
            }
            // The layer's own rows.
            let (first, last) = (range.start + lo - start, range.start + hi - start);
            codes.resize((last - first) * width, 0);
            p.codes(first, last, c0, c1, &mut codes)?;
            let t = p.tensors();
            let (qzeros, sc) = (t.qzeros.bytes()?, t.scales.bytes()?);
            for (c, n) in (first..last).enumerate() {
                let out = row + c;
                let col = &codes[c * width..(c + 1) * width];
                let b_col = &mut b[out * kb * blob..(out + 1) * kb * blob];
                for i in 0..k1 - k0 {
                    let q = match order {
                        Some(o) => col[o[k0 + i] as usize],
                        None => col[i],
                    };
                    let (blk, pos) = (i / bs, i % bs);
                    match bits {
                        Bits::Int8 => b_col[blk * blob + pos] = q,
                        Bits::Int4 => b_col[blk * blob + pos / 2] |= q << (4 * (pos % 2)),
                    }
                }
                for blk in 0..kb {
                    let i = k0 + blk * bs;
                    let g = p.group_of(order.map_or(i, |o| o[i] as usize));
                    let scale = p.scale(sc, g, n);
                    let zero = p.zero(qzeros, g, n) as u8;
                    scales[out * kb + blk] = S::from_f32(scale);
                    let stored = rounded(scale, scale_dtype);
                    let rows = bs.min(k1 - i);
                    if stored != scale {
                        for j in 0..rows {
                            let q = match order {
                                Some(o) => col[o[i + j] as usize],
                                None => col[i - k0 + j],
                            };
                            let e = ((stored - scale) * (q as f32 - zero as f32)).abs();
                            error.max_abs = error.max_abs.max(e);
                            error.sum_sq += (e as f64) * (e as f64);
                        }
                    }
                    error.count += rows as u64;
                    if let Some(ZeroOut::Packed(z)) = zero_points.as_mut() {
                        match bits {
                            Bits::Int8 => z[out * zpc + blk] = zero,
                            Bits::Int4 => z[out * zpc + blk / 2] |= zero << (4 * (blk % 2)),
                        }
                    }
                }
            }
            row += last - first;
            p.done((last - first) * (k1 - k0));
        }
        Ok(error)
    }
}

impl PackedStack {
    /// [`Self::nbits`] of GGUF tensors: each output row decoded whole (ggml blocks run along
    /// a row), its codes, scales and zero points written for rows `k0..k1`. The error is what
    /// storing the f32 scale and zero point in `scale_dtype` changes.
    #[allow(clippy::too_many_arguments)]
    fn ggml_nbits<S: Scale>(
        &self,
        n0: usize,
        n1: usize,
        k0: usize,
        k1: usize,
        scale_dtype: DType,
        b: &mut [u8],
        scales: &mut [S],
        mut zero_points: Option<ZeroOut<'_, S>>,
        error: &mut WeightError,
    ) -> Result<()> {
        let s = self.settings;
        let (bits, bs) = (s.bits(), s.block_size());
        let layout = s.layout(k1 - k0)?;
        let (kb, blob, zpc) = (layout.k_blocks(), layout.blob_size(), layout.zero_points_per_column());
        let mid = bits.mid() as f32;
        let mut at = 0;
        let mut row = 0;
        for (p, range) in &self.parts {
            let start = at;
            at += range.len();
            let (lo, hi) = (n0.max(start), n1.min(at));
            if lo >= hi {
                continue;
            }
            let g = p.group_size();
            let (mut codes, mut sc, mut zs) = (vec![0u8; self.k], vec![0f32; self.k / g], vec![0f32; self.k / g]);
            let (first, last) = (range.start + lo - start, range.start + hi - start);
            for (c, n) in (first..last).enumerate() {
                p.ggml_row(n, &mut codes, &mut sc, &mut zs)?;
                let out = row + c;
                let b_col = &mut b[out * kb * blob..(out + 1) * kb * blob];
                for (i, &q) in codes[k0..k1].iter().enumerate() {
                    let (blk, pos) = (i / bs, i % bs);
                    match bits {
                        Bits::Int8 => b_col[blk * blob + pos] = q,
                        Bits::Int4 => b_col[blk * blob + pos / 2] |= q << (4 * (pos % 2)),
                    }
                }
                for blk in 0..kb {
                    let i = k0 + blk * bs;
                    // The written block lies inside one ggml block (bs divides the ggml block).
                    let gb = i / g;
                    let scale = sc[gb];
                    // ggml's offset form: scale * (q - mid) + offset (ir::ggml::decode_row).
                    let offset = if p.float_zeros() { zs[gb] } else { 0.0 };
                    scales[out * kb + blk] = S::from_f32(scale);
                    let (stored, stored_offset) = (rounded(scale, scale_dtype), rounded(offset, scale_dtype));
                    let rows = bs.min(k1 - i);
                    match zero_points.as_mut() {
                        // The block's offset from the implicit mid zero point (see ZeroOut).
                        Some(ZeroOut::Float(z)) => z[out * kb + blk] = S::from_f32(offset),
                        Some(ZeroOut::Packed(z)) => match bits {
                            Bits::Int8 => z[out * zpc + blk] = mid as u8,
                            Bits::Int4 => z[out * zpc + blk / 2] |= (mid as u8) << (4 * (blk % 2)),
                        },
                        None => {}
                    }
                    if stored != scale || stored_offset != offset {
                        for &q in &codes[i..i + rows] {
                            let e = (stored * (q as f32 - mid) + stored_offset - (scale * (q as f32 - mid) + offset)).abs();
                            error.max_abs = error.max_abs.max(e);
                            error.sum_sq += (e as f64) * (e as f64);
                        }
                    }
                    error.count += rows as u64;
                }
            }
            row += last - first;
            p.done((last - first) * (k1 - k0));
        }
        Ok(())
    }
}

/// `v` rounded to `dtype` (f32, f16 or bf16), as an f32.
fn rounded(v: f32, dtype: DType) -> f32 {
    match dtype {
        DType::F16 => half::f16::from_f32(v).to_f32(),
        DType::BF16 => half::bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
