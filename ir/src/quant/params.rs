//! One block's scale and zero point, and the quantization of one value, with ONNX Runtime's
//! arithmetic (MLAS `BlockwiseQuantizer`, `range2scale` / `range2scalezp`): every step in f32,
//! in the same order, with the same comparisons, so that ties, signed zeros and the scale's
//! sign come out identical. docs/quantization.md lists the rules and their sources.

use super::{Bits, Scale};

/// A block's quantization parameters as stored: the scale in its tensor type and the zero
/// point (the implicit [`Bits::mid`] when symmetric).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct BlockParams<S> {
    pub scale: S,
    pub zero_point: u8,
}

impl<S: Scale> BlockParams<S> {
    /// The multiplier applied to each value: 1/scale of the *stored* scale, or 0 for a zero
    /// scale (ONNX Runtime: `scale ? 1.0f / scale : 0.0f`).
    pub fn reciprocal(&self) -> f32 {
        let s = self.scale.to_f32();
        if s != 0.0 {
            1.0 / s
        } else {
            0.0
        }
    }
}

/// min and max as MLAS scans them: start at (FLT_MAX, -FLT_MAX), `if (v < min) min = v;
/// if (v > max) max = v;` in row order. The first of several equal values wins, which decides
/// the sign of a zero.
pub(crate) fn min_max(values: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in values {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// Symmetric: the value of largest magnitude (min on a tie) maps to -2^(bits-1), so the scale is
/// `-max / 2^(bits-1)` and is negative when that value is positive.
pub(crate) fn symmetric_params<S: Scale>(bits: Bits, min: f32, max: f32) -> BlockParams<S> {
    let m = if max.abs() > min.abs() { max } else { min };
    BlockParams { scale: S::from_f32(-m / bits.mid() as f32), zero_point: bits.mid() }
}

/// Asymmetric: the range is widened to include 0, `scale = (max - min) / (2^bits - 1)`,
/// `zero_point = round(0 - min / scale)` clamped, computed from the f32 scale before it is
/// rounded to `S`.
pub(crate) fn asymmetric_params<S: Scale>(bits: Bits, min: f32, max: f32) -> BlockParams<S> {
    // std::min(min, 0.0f) and std::max(max, 0.0f), operand order kept for signed zeros.
    let min = if 0.0 < min { 0.0 } else { min };
    let max = if max < 0.0 { 0.0 } else { max };
    let max_q = bits.max_q() as f32;
    let scale = (max - min) / max_q;
    let zp_fp = if scale != 0.0 { 0.0 - min / scale } else { min };
    let zero_point = if zp_fp < 0.0 {
        0
    } else if zp_fp > max_q {
        bits.max_q()
    } else {
        zp_fp.round() as u8
    };
    BlockParams { scale: S::from_f32(scale), zero_point }
}

/// RTN parameters of a block.
pub(crate) fn rtn_params<S: Scale>(bits: Bits, symmetric: bool, values: &[f32]) -> BlockParams<S> {
    let (min, max) = min_max(values);
    if symmetric {
        symmetric_params(bits, min, max)
    } else {
        asymmetric_params(bits, min, max)
    }
}

/// `clamp(roundf(v * reciprocal + zp), 0, max_q)`: multiply by the reciprocal (not a
/// division), add the zero point in f32, round half away from zero. Rust never fuses the
/// multiply-add, and neither does the x86-64 wheel's build of this code. A NaN (0 * inf from a
/// subnormal scale) becomes 0, as the C++ cast does on x86-64.
#[inline]
pub(crate) fn quantize_value(v: f32, reciprocal: f32, zero_point: u8, max_q: u8) -> u8 {
    (v * reciprocal + zero_point as f32).round().clamp(0.0, max_q as f32) as u8
}
