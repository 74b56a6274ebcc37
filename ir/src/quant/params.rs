//! One block's scale and zero point, and the quantization of one value, with ONNX Runtime's
//! arithmetic (MLAS `BlockwiseQuantizer`, `range2scale` / `range2scalezp`): every step in f32,
//! in the same order, with the same comparisons, so that ties, signed zeros and the scale's
//! sign come out identical. docs/quantization.md lists the rules and their sources.

use super::{Bits, Rounding, Scale};

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
///
/// Scanned in eight independent lanes (the serial chain was half of a quantized build's
/// time): over finite values the lanes find the same numbers; only which zero (+0 or -0) is
/// the first can differ, so a zero result is scanned again in row order.
#[inline(always)]
pub(crate) fn min_max(values: &[f32]) -> (f32, f32) {
    let (min, max, _) = scan(values);
    (min, max)
}

/// [`min_max`] of a block that must be finite: `None` when a value is NaN or infinite. The
/// check rides in the same pass (`v - v` is 0 exactly for a finite `v`, NaN otherwise, and a
/// sum of zeros stays 0), so a block is read once before it is quantized.
#[inline(always)]
pub(crate) fn finite_min_max(values: &[f32]) -> Option<(f32, f32)> {
    let (min, max, finite) = scan(values);
    finite.then_some((min, max))
}

#[inline(always)]
#[allow(clippy::eq_op)] // `v - v` is the finiteness test (see `finite_min_max`).
fn scan(values: &[f32]) -> (f32, f32, bool) {
    const LANES: usize = 8;
    let (mut lo, mut hi, mut nonfinite) = ([f32::MAX; LANES], [-f32::MAX; LANES], [0f32; LANES]);
    let mut chunks = values.chunks_exact(LANES);
    for c in &mut chunks {
        for i in 0..LANES {
            lo[i] = if c[i] < lo[i] { c[i] } else { lo[i] };
            hi[i] = if c[i] > hi[i] { c[i] } else { hi[i] };
            nonfinite[i] += c[i] - c[i];
        }
    }
    for &v in chunks.remainder() {
        lo[0] = if v < lo[0] { v } else { lo[0] };
        hi[0] = if v > hi[0] { v } else { hi[0] };
        nonfinite[0] += v - v;
    }
    let min = lo.iter().fold(f32::MAX, |m, &x| if x < m { x } else { m });
    let max = hi.iter().fold(-f32::MAX, |m, &x| if x > m { x } else { m });
    let finite = nonfinite.iter().fold(true, |ok, &x| ok & (x == 0.0));
    if min == 0.0 || max == 0.0 {
        let (min, max) = min_max_in_order(values);
        return (min, max, finite);
    }
    (min, max, finite)
}

/// [`min_max`] in row order, one value at a time: MLAS's loop exactly.
pub(crate) fn min_max_in_order(values: &[f32]) -> (f32, f32) {
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

#[cfg(test)]
mod min_max_tests {
    use super::{min_max, min_max_in_order};

    #[test]
    fn lanes_agree_with_row_order_including_signed_zeros() {
        let cases: Vec<Vec<f32>> = vec![
            vec![0.0, -0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, -0.0],
            vec![-0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 0.0, 0.5],
            vec![-0.0; 17],
            vec![0.0; 9],
            vec![-3.0, 1.0, 9.0, -3.0, 2.0, 0.25, -7.5, 7.5, 1.0, 1.0, 1.0, -7.5],
            (0..37).map(|i| ((i * 7919 % 101) as f32 - 50.0) / 8.0).collect(),
            vec![1.5],
        ];
        for c in cases {
            let (a, b) = (min_max(&c), min_max_in_order(&c));
            assert_eq!((a.0.to_bits(), a.1.to_bits()), (b.0.to_bits(), b.1.to_bits()), "{c:?}");
        }
    }
}

/// Symmetric: the value of largest magnitude (min on a tie) maps to -2^(bits-1), so the scale is
/// `-max / 2^(bits-1)` and is negative when that value is positive.
#[inline]
pub(crate) fn symmetric_params<S: Scale>(bits: Bits, min: f32, max: f32) -> BlockParams<S> {
    let m = if max.abs() > min.abs() { max } else { min };
    BlockParams { scale: S::from_f32(-m / bits.mid() as f32), zero_point: bits.mid() }
}

/// Asymmetric: the range is widened to include 0, `scale = (max - min) / (2^bits - 1)`,
/// `zero_point = round(0 - min / scale)` clamped, computed from the f32 scale before it is
/// rounded to `S`.
#[inline]
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
#[inline]
pub(crate) fn rtn_params<S: Scale>(bits: Bits, symmetric: bool, values: &[f32]) -> BlockParams<S> {
    let (min, max) = min_max(values);
    rtn_params_of_range(bits, symmetric, min, max)
}

/// RTN parameters of a block whose [`min_max`] is known.
#[inline]
pub(crate) fn rtn_params_of_range<S: Scale>(bits: Bits, symmetric: bool, min: f32, max: f32) -> BlockParams<S> {
    if symmetric {
        symmetric_params(bits, min, max)
    } else {
        asymmetric_params(bits, min, max)
    }
}

/// `clamp(roundf(v * reciprocal + zp), 0, max_q)`: multiply by the reciprocal (not a
/// division), add the zero point in f32, round half away from zero. Rust never fuses the
/// multiply-add, and neither does the x86-64 wheel's build of this code. A NaN (0 * inf from a
/// subnormal scale) becomes 0, as the C++ cast does on x86-64 (here: the truncation of NaN
/// is 0 and neither rounding step fires).
///
/// Branch-free, so a block's loop vectorizes: the rounding is [`round_half_away`]'s, written
/// with selects; values past 2^31 saturate the truncation and are clamped to `max_q` all the
/// same.
///
/// With [`Rounding::Qdq`] the zero point is added after the rounding instead
/// ([`rounded_value_qdq`]).
#[inline]
pub(crate) fn quantize_value(rounding: Rounding, v: f32, reciprocal: f32, zero_point: u8, max_q: u8) -> u8 {
    let rounded = match rounding {
        Rounding::MatMulNBits => rounded_value(v, reciprocal, zero_point, max_q),
        Rounding::Qdq => rounded_value_qdq(v, reciprocal, zero_point, max_q),
    };
    // SAFETY: the rounded value is an integer in [0, max_q].
    unsafe { rounded.to_int_unchecked::<i32>() as u8 }
}

/// [`quantize_value`] before its conversion to a byte: the stored integer as an f32, which is
/// also what the dequantized value is computed from.
#[inline(always)]
pub(crate) fn rounded_value(v: f32, reciprocal: f32, zero_point: u8, max_q: u8) -> f32 {
    let top = max_q as f32 + 1.0;
    // Outside [-1, max_q + 1] every value rounds and clamps to the same end, so bound x first:
    // then the truncations below are in range (and plain conversions, which vectorize). f32::max
    // and min drop a NaN, which thus becomes -1 and stores 0.
    let x = (v * reciprocal + zero_point as f32).max(-1.0).min(top);
    // SAFETY: x is finite and within [-1, 256].
    let t = unsafe { x.to_int_unchecked::<i32>() } as f32;
    let f = x - t;
    (t + (f >= 0.5) as i32 as f32 - (f <= -0.5) as i32 as f32).max(0.0).min(max_q as f32)
}

/// The QDQ quantizer's stored integer as an f32: `clamp((int)roundf(v * reciprocal) + zp, 0,
/// max_q)` (MLAS `BlockwiseQDQQuantizer::QuantizeV`, in the unsigned form: a symmetric block's
/// signed value plus 2^(bits-1)). The rounding is [`rounded_value`]'s, before the zero point.
/// The C++ converts the rounded value to int32, which on x86-64 gives INT_MIN for a NaN or
/// |x| >= 2^31; INT_MIN + zp clamps to 0, and so does such an x here.
#[inline(always)]
pub(crate) fn rounded_value_qdq(v: f32, reciprocal: f32, zero_point: u8, max_q: u8) -> f32 {
    let x = v * reciprocal;
    let in_range = x.abs() < 2_147_483_648.0; // false for a NaN
    let top = max_q as f32 + 1.0;
    // Past +-top every value rounds and clamps to the same end once the zero point (0..=max_q)
    // is added, so bound x first, as `rounded_value` does. A NaN becomes -top (masked below).
    let b = x.max(-top).min(top);
    // SAFETY: b is finite and within [-256, 256].
    let t = unsafe { b.to_int_unchecked::<i32>() } as f32;
    let f = b - t;
    let r = t + (f >= 0.5) as i32 as f32 - (f <= -0.5) as i32 as f32;
    let q = (r + zero_point as f32).max(0.0).min(max_q as f32);
    if in_range {
        q
    } else {
        0.0
    }
}

#[cfg(test)]
mod round_tests {
    use super::{quantize_value, Rounding};

    /// The QDQ rounding is `roundf` before the zero point, next to every half and at the ends.
    #[test]
    fn qdq_rounds_before_the_zero_point() {
        let reference = |v: f32, z: u8, max: u8| {
            let r = v.round();
            if r.is_nan() || r.abs() >= 2_147_483_648.0 {
                0
            } else {
                (r as i64 + z as i64).clamp(0, max as i64) as u8
            }
        };
        let mut x = -140.0f32;
        while x < 140.0 {
            for v in [x, f32::from_bits(x.to_bits() + 1), f32::from_bits(x.to_bits().wrapping_sub(1))] {
                for (z, max) in [(0, 255), (128, 255), (8, 15), (0, 15), (3, 15)] {
                    assert_eq!(quantize_value(Rounding::Qdq, v, 1.0, z, max), reference(v, z, max), "{v} zp {z}");
                }
            }
            x += 0.125;
        }
        // Where the two roundings differ: a negative half (away from zero, then + zp) and a
        // value just below a half that the zero point's addition rounds up to one.
        assert_eq!((quantize_value(Rounding::Qdq, -0.5, 1.0, 8, 15), quantize_value(Rounding::MatMulNBits, -0.5, 1.0, 8, 15)), (7, 8));
        assert_eq!((quantize_value(Rounding::Qdq, 0.49999997, 1.0, 8, 15), quantize_value(Rounding::MatMulNBits, 0.49999997, 1.0, 8, 15)), (8, 9));
        // An infinite reciprocal (subnormal scale): INT_MIN on x86-64, the low end; 0 * inf is NaN.
        for v in [1e-39f32, -1e-39, 0.0, 3e38, -3e38] {
            assert_eq!(quantize_value(Rounding::Qdq, v, f32::INFINITY, 8, 15), 0, "{v}");
        }
        assert_eq!(quantize_value(Rounding::Qdq, 3e9, 1.0, 7, 15), 0, "past 2^31");
        assert_eq!(quantize_value(Rounding::Qdq, 2e9, 1.0, 7, 15), 15);
    }

    /// The branch-free rounding is `roundf` (halves away from zero), next to every half.
    #[test]
    fn rounds_like_roundf() {
        let reference = |v: f32, z: u8, max: u8| (v * 1.0 + z as f32).round().clamp(0.0, max as f32) as u8;
        let mut x = -140.0f32;
        while x < 140.0 {
            for v in [x, f32::from_bits(x.to_bits() + 1), f32::from_bits(x.to_bits().wrapping_sub(1))] {
                for (z, max) in [(0, 255), (128, 255), (8, 15), (0, 15)] {
                    if v.is_finite() {
                        assert_eq!(quantize_value(Rounding::MatMulNBits, v, 1.0, z, max), reference(v, z, max), "{v} zp {z}");
                    }
                }
            }
            x += 0.125;
        }
        for v in [0.49999997f32, -0.49999997, 7.5, -7.5, 1e9, -1e9, 3e38, -3e38, 0.0, -0.0] {
            assert_eq!(quantize_value(Rounding::MatMulNBits, v, 1.0, 8, 15), reference(v, 8, 15), "{v}");
        }
        assert_eq!(quantize_value(Rounding::MatMulNBits, f32::INFINITY, 0.0, 8, 15), 0, "NaN (0 * inf) is 0");
    }
}
