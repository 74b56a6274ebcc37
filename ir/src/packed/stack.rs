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
    /// The layers read, each once.
    layers: Vec<Arc<PackedWeight>>,
    /// Runs of consecutive rows of one layer, in output order: compact, because an
    /// interleaved expert stack has a run per row (Qwen3-30B-A3B: 196,608 per layer).
    parts: Vec<Run>,
    n: usize,
    k: usize,
    settings: QuantSettings,
    order: Option<Arc<[u32]>>,
    /// Zero points are written as floats (a GGUF type with a min is among the layers).
    float_zeros: bool,
}

/// Rows `start..start + len` of layer `layer` (an index into [`PackedStack`]'s layers).
#[derive(Clone, Copy, Debug)]
struct Run {
    layer: u32,
    start: u32,
    len: u32,
}

impl Run {
    fn range(self) -> Range<usize> {
        self.start as usize..(self.start + self.len) as usize
    }
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

/// The rows of a recipe that only rearranges whole rows of pre-quantized layers: the layers,
/// and for each row of the recipe seen as `[rows, K]` (every axis but the last flattened, in
/// order) the layer and row it is.
struct RowMap {
    layers: Vec<Arc<PackedWeight>>,
    /// `(index into layers, layer row)` per row.
    rows: Vec<(u32, u32)>,
    shape: Vec<usize>,
}

impl RowMap {
    /// `outer`, `dim` and `inner`: the row counts before, along and after `axis` (a leading axis).
    fn split(shape: &[usize], axis: usize) -> (usize, usize, usize) {
        let lead = &shape[..shape.len() - 1];
        (lead[..axis].iter().product(), lead[axis], lead[axis + 1..].iter().product())
    }

    /// Appends `other`'s layers to these and returns its rows renumbered.
    fn adopt(&mut self, other: RowMap) -> Vec<(u32, u32)> {
        let base = self.layers.len() as u32;
        self.layers.extend(other.layers);
        other.rows.into_iter().map(|(l, r)| (l + base, r)).collect()
    }

    /// Float casts, reshapes that keep the last axis, and slices, concatenations and
    /// interleavings along leading axes keep every row whole; anything else (a transpose, a
    /// computation, float data) does not, and gives `None`.
    fn of(r: &Recipe) -> Option<RowMap> {
        match r {
            Recipe::Packed(p) => Some(RowMap { layers: vec![Arc::clone(p)], rows: (0..p.n() as u32).map(|r| (0, r)).collect(), shape: vec![p.n(), p.k()] }),
            Recipe::Cast { input, to } if to.is_float() => Self::of(input),
            Recipe::Reshape { input, shape } => {
                let mut m = Self::of(input)?;
                let rows: usize = shape[..shape.len().saturating_sub(1)].iter().product();
                (shape.last() == m.shape.last() && rows == m.rows.len()).then(|| {
                    m.shape = shape.clone();
                    m
                })
            }
            Recipe::Slice { input, axis, start, end } => {
                let m = Self::of(input)?;
                if *axis + 1 >= m.shape.len() {
                    return None;
                }
                let (outer, dim, inner) = Self::split(&m.shape, *axis);
                if start > end || *end > dim {
                    return None;
                }
                let mut rows = Vec::with_capacity(outer * (end - start) * inner);
                for o in 0..outer {
                    rows.extend_from_slice(m.rows.get((o * dim + start) * inner..(o * dim + end) * inner)?);
                }
                let mut shape = m.shape;
                shape[*axis] = end - start;
                Some(RowMap { layers: m.layers, rows, shape })
            }
            Recipe::Concat { inputs, axis } | Recipe::Interleave { inputs, axis } => {
                let woven = matches!(r, Recipe::Interleave { .. });
                let mut out = RowMap { layers: Vec::new(), rows: Vec::new(), shape: r.shape() };
                if *axis + 1 >= out.shape.len() {
                    return None;
                }
                let mut parts = Vec::new();
                for i in inputs {
                    let m = Self::of(i)?;
                    let split = Self::split(&m.shape, *axis);
                    parts.push((out.adopt(m), split));
                }
                let outer = parts.first().map_or(0, |(_, (o, _, _))| *o);
                for o in 0..outer {
                    if woven {
                        // Index a of every input in turn, for each a.
                        let (_, dim, inner) = parts[0].1;
                        for a in 0..dim {
                            for (rows, _) in &parts {
                                out.rows.extend_from_slice(rows.get((o * dim + a) * inner..(o * dim + a + 1) * inner)?);
                            }
                        }
                    } else {
                        for (rows, (_, dim, inner)) in &parts {
                            out.rows.extend_from_slice(rows.get(o * dim * inner..(o + 1) * dim * inner)?);
                        }
                    }
                }
                Some(out)
            }
            _ => None,
        }
    }

    /// The distinct layers and the rows as runs of consecutive rows of one layer.
    fn runs(self) -> (Vec<Arc<PackedWeight>>, Vec<Run>) {
        // A layer reached twice (the same weight read by two inputs) is one layer.
        let mut layers: Vec<Arc<PackedWeight>> = Vec::new();
        let index: Vec<u32> = self
            .layers
            .iter()
            .map(|l| match layers.iter().position(|k| Arc::ptr_eq(k, l)) {
                Some(i) => i as u32,
                None => {
                    layers.push(Arc::clone(l));
                    (layers.len() - 1) as u32
                }
            })
            .collect();
        let mut out: Vec<Run> = Vec::new();
        for (l, r) in self.rows {
            let layer = index[l as usize];
            match out.last_mut() {
                Some(run) if run.layer == layer && run.start + run.len == r => run.len += 1,
                _ => out.push(Run { layer, start: r, len: 1 }),
            }
        }
        (layers, out)
    }
}

/// The layers and row runs `r` reads, when it reads pre-quantized layers only through float
/// casts, row slices, row concatenations and interleavings and reshapes of the rows
/// ([`RowMap::of`]).
fn rows_of(r: &Recipe) -> Option<(Vec<Arc<PackedWeight>>, Vec<Run>)> {
    RowMap::of(r).map(RowMap::runs)
}

/// Packs one output row's codes (`codes[i]` for input feature `i`) into MatMulNBits blocks of
/// `bs` values, `blob` bytes each: bytes at 8 bits, two codes per byte (low nibble first) at 4.
/// Positions past the last code (K not a whole number of blocks) are left as they are (zero).
fn pack_row(codes: &[u8], bits: Bits, bs: usize, blob: usize, out: &mut [u8]) {
    for (chunk, dst) in codes.chunks(bs).zip(out.chunks_mut(blob)) {
        match bits {
            Bits::Int8 => dst[..chunk.len()].copy_from_slice(chunk),
            Bits::Int4 => {
                let pairs = chunk.chunks_exact(2);
                if let [last] = pairs.remainder() {
                    dst[chunk.len() / 2] = *last;
                }
                for (d, pair) in dst.iter_mut().zip(pairs) {
                    *d = pair[0] | (pair[1] << 4);
                }
            }
        }
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
        let Some((layers, parts)) = rows_of(r) else {
            return Some(Err(Error::Recipe {
                tensor: name.to_string(),
                reason: format!(
                    "it reads pre-quantized weights through {}, which cannot keep their integers (only casts, row slices, row concatenations and interleavings, and reshapes of whole rows can)",
                    r.describe()
                ),
            }));
        };
        Some(Self::new(name, layers, parts))
    }

    fn new(name: &str, layers: Vec<Arc<PackedWeight>>, parts: Vec<Run>) -> Result<PackedStack> {
        let bad = |reason: String| Error::Recipe { tensor: name.to_string(), reason };
        let Some(first) = layers.first() else { return Err(bad("it reads no rows of its pre-quantized weights".into())) };
        let (k, bits) = (first.k(), first.bits());
        let mut group_gcd = 0usize;
        for p in &layers {
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
        let float_zeros = layers.iter().any(|p| p.float_zeros());
        if layers.iter().any(|p| p.ggml_type().is_some()) && layers.iter().any(|p| p.ggml_type().is_none()) {
            return Err(bad("it stacks GGUF or MXFP4 tensors with GPTQ/AWQ layers".into()));
        }
        let symmetric = layers.iter().all(|p| p.symmetric()) && !float_zeros;
        let settings = QuantSettings::new(bits, block, symmetric)?;
        let n = parts.iter().map(|r| r.len as usize).sum();
        Ok(PackedStack { order: first.order().cloned(), layers, parts, n, k, settings, float_zeros })
    }

    /// Bits, block (a power of two dividing every group) and symmetry of the written form.
    pub fn settings(&self) -> QuantSettings {
        self.settings
    }

    /// The same rows written in blocks of `block`, a power of two dividing the stack's own
    /// (so every written block still lies inside one group: exact). Two stacks that one node
    /// reads with one block size (QMoE's fc1 and fc2) meet at the smaller.
    pub fn with_block(mut self, block: usize) -> Result<PackedStack> {
        let own = self.settings.block_size();
        if block == 0 || !own.is_multiple_of(block) || block < MIN_BLOCK {
            return Err(Error::Recipe {
                tensor: self.layers.first().map_or_else(String::new, |p| p.name.clone()),
                reason: format!("blocks of {block} do not divide its blocks of {own} (or are below {MIN_BLOCK})"),
            });
        }
        self.settings = QuantSettings::new(self.settings.bits(), block, self.settings.symmetric())?;
        Ok(self)
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
        self.layers.iter()
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
        if self.layers.iter().any(|p| p.ggml_type().is_some()) {
            self.ggml_nbits(n0, n1, k0, k1, scale_dtype, b, scales, zero_points, &mut error)?;
            return Ok(error);
        }
        let order = self.order.as_deref();
        // Checkpoint rows to decode: the band itself, or all of K when act-order scatters it.
        let (c0, c1) = if order.is_some() { (0, self.k) } else { (k0, k1) };
        let width = c1 - c0;
        let mut codes = Vec::new();
        let mut permuted = Vec::new(); // one row's codes in output order (act-order only)
        let mut at = 0; // first output row of the current part
        let mut row = 0; // rows written so far
        for &run in &self.parts {
            let (p, range) = (&self.layers[run.layer as usize], run.range());
            let start = at;
            at += range.len();
            let (lo, hi) = (n0.max(start), n1.min(at));
            if lo >= hi {
                continue;
            }
            // The layer's own rows: their words copied as they are where that is MatMulNBits'
            // packing (GPTQ without act-order), else their codes decoded and packed.
            let (first, last) = (range.start + lo - start, range.start + hi - start);
            let col_bytes = kb * blob;
            let direct = order.is_none() && p.packed_along_k(first, last, k0, k1, &mut b[row * col_bytes..(row + last - first) * col_bytes], col_bytes)?;
            if !direct {
                codes.resize((last - first) * width, 0);
                p.codes(first, last, c0, c1, &mut codes)?;
            }
            let t = p.tensors();
            let (qzeros, sc) = (t.qzeros.bytes()?, t.scales.bytes()?);
            for (c, n) in (first..last).enumerate() {
                let out = row + c;
                let col: &[u8] = if direct { &[] } else { &codes[c * width..(c + 1) * width] };
                let b_col = &mut b[out * col_bytes..(out + 1) * col_bytes];
                match order {
                    _ if direct => {}
                    Some(o) => {
                        permuted.clear();
                        permuted.extend(o[k0..k1].iter().map(|&j| col[j as usize]));
                        pack_row(&permuted, bits, bs, blob, b_col);
                    }
                    None => pack_row(&col[..k1 - k0], bits, bs, blob, b_col),
                }
                // Code `j` of the band, as written.
                let code = |j: usize| -> u8 {
                    match bits {
                        Bits::Int8 => b_col[j],
                        Bits::Int4 => (b_col[j / 2] >> (4 * (j % 2))) & 0xF,
                    }
                };
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
                            let q = code(i - k0 + j);
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
        // One row's codes, scales and offsets, reused by every part (an interleaved expert
        // stack has a part per row).
        let (mut codes, mut sc, mut zs) = (vec![0u8; self.k], Vec::new(), Vec::new());
        let _flush = FlushRows(&self.layers);
        for &run in &self.parts {
            let (p, range) = (&self.layers[run.layer as usize], run.range());
            let start = at;
            at += range.len();
            let (lo, hi) = (n0.max(start), n1.min(at));
            if lo >= hi {
                continue;
            }
            let g = p.group_size();
            sc.resize(self.k / g, 0f32);
            zs.resize(self.k / g, 0f32);
            let (first, last) = (range.start + lo - start, range.start + hi - start);
            // A large tensor's rows go run by run: a band reads a K-range of every row.
            let release = p.release_run_rows();
            let mut kept_from = first;
            for (c, n) in (first..last).enumerate() {
                if release.is_some_and(|run| n - kept_from == run) {
                    p.release_rows(kept_from, n);
                    kept_from = n;
                }
                p.ggml_row(n, k0, k1, &mut codes, &mut sc, &mut zs)?;
                let out = row + c;
                pack_row(&codes[k0..k1], bits, bs, blob, &mut b[out * kb * blob..(out + 1) * kb * blob]);
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
            // The rows' pages go once read (in runs, see `pending.rs`): within a band of a
            // large tensor, or with the rows' last columns.
            if release.is_some() || k1 == self.k {
                p.rows_read(kept_from, last);
            }
            row += last - first;
            p.done((last - first) * (k1 - k0));
        }
        Ok(())
    }
}

/// Gives back every pending row run of the stack's layers when a [`PackedStack::ggml_nbits`]
/// call ends (or fails): a block's rows are not read again, and keeping the runs across calls
/// raised a gpt-oss import's peak RSS by a fifth. So on this path runs join within a call only
/// (a run another thread is building on the same layer is released early, in a shorter piece).
struct FlushRows<'a>(&'a [Arc<PackedWeight>]);

impl Drop for FlushRows<'_> {
    fn drop(&mut self) {
        self.0.iter().for_each(|p| p.flush_rows());
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
