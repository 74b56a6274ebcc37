//! The inverse, `w = (q - zero_point) * scale` in f32, as MatMulNBits, GatherBlockQuantized and
//! DequantizeLinear define it; and the weight error a build reports per tensor.

use super::{check_lengths, Bits, NBits, QuantLayout, QuantSettings, Scale, WeightView};
use crate::{Error, Result};

/// Stored value `r` (0-based row) of column `col`.
fn stored(layout: &QuantLayout, b: &[u8], col: usize, r: usize) -> u8 {
    let bits = layout.settings().bits();
    let bs = layout.settings().block_size();
    let base = col * layout.b_per_column() + (r / bs) * layout.blob_size();
    let i = r % bs;
    match bits {
        Bits::Int8 => b[base + i],
        Bits::Int4 => (b[base + i / 2] >> (4 * (i % 2))) & 0x0f,
    }
}

/// Zero point of block `kb` of column `col` (the implicit mid value when symmetric).
fn zero_point(layout: &QuantLayout, zp: Option<&[u8]>, col: usize, kb: usize) -> u8 {
    let bits = layout.settings().bits();
    let Some(zp) = zp else { return bits.mid() };
    let row = &zp[col * layout.zero_points_per_column()..];
    match bits {
        Bits::Int8 => row[kb],
        Bits::Int4 => (row[kb / 2] >> (4 * (kb % 2))) & 0x0f,
    }
}

/// Visits every element of a quantized column range as (row, col, dequantized value).
fn for_each<S: Scale>(layout: &QuantLayout, cols: usize, q: &NBits<'_, S>, mut f: impl FnMut(usize, usize, f32)) {
    let bs = layout.settings().block_size();
    let k_blocks = layout.k_blocks();
    for col in 0..cols {
        for kb in 0..k_blocks {
            let s = q.scales[col * k_blocks + kb].to_f32();
            let z = zero_point(layout, q.zero_points, col, kb) as i32;
            for r in kb * bs..(kb * bs + bs).min(layout.k()) {
                f(r, col, (stored(layout, q.b, col, r) as i32 - z) as f32 * s);
            }
        }
    }
}

/// Dequantizes a range of `cols` columns of a `k`-row weight into `out`, row-major `[k, cols]`.
pub fn dequantize<S: Scale>(settings: &QuantSettings, k: usize, cols: usize, q: NBits<'_, S>, out: &mut [f32]) -> Result<()> {
    let layout = settings.layout(k)?;
    check_lengths(&layout, cols, q.b.len(), q.scales.len(), q.zero_points.map(<[u8]>::len))?;
    if out.len() != k * cols {
        return Err(Error::QuantBuffer { what: "the dequantized output", expected: k * cols, got: out.len() });
    }
    for_each(&layout, cols, &q, |r, c, v| out[r * cols + c] = v);
    Ok(())
}

/// Weight error of a quantized tensor, accumulated over column ranges with [`merge`](Self::merge)
/// so that a streamed tensor gets one figure.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WeightError {
    /// Largest |w - dequantized(w)|.
    pub max_abs: f32,
    /// Sum of squared errors (f64: tensors have up to ~10^9 elements).
    pub sum_sq: f64,
    pub count: u64,
}

impl WeightError {
    /// Adds one weight and its dequantized value.
    #[inline]
    pub fn add(&mut self, weight: f32, dequantized: f32) {
        let d = (weight - dequantized).abs();
        self.max_abs = self.max_abs.max(d);
        self.sum_sq += (d as f64) * (d as f64);
        self.count += 1;
    }

    pub fn merge(&mut self, other: &WeightError) {
        self.max_abs = self.max_abs.max(other.max_abs);
        self.sum_sq += other.sum_sq;
        self.count += other.count;
    }
    /// Root mean square error; 0 for an empty accumulator.
    pub fn rms(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            (self.sum_sq / self.count as f64).sqrt()
        }
    }
}

/// The error of `q` (the quantized form of `w`, same columns) against `w`, without allocating.
pub fn weight_error<S: Scale>(settings: &QuantSettings, w: &WeightView<'_>, q: NBits<'_, S>) -> Result<WeightError> {
    let layout = settings.layout(w.rows())?;
    check_lengths(&layout, w.cols(), q.b.len(), q.scales.len(), q.zero_points.map(<[u8]>::len))?;
    let mut e = WeightError::default();
    for_each(&layout, w.cols(), &q, |r, c, v| {
        let d = (w.get(r, c) - v).abs();
        e.max_abs = e.max_abs.max(d);
        e.sum_sq += (d as f64) * (d as f64);
        e.count += 1;
    });
    Ok(e)
}
