//! The kernel's two per-block passes written with AVX2 intrinsics: [`finite_min_max`] and
//! [`quantize_block`]. The compiler's own vectorization of the portable loops (in
//! [`super::params`] and [`super::kernel`]) kept the lane arrays in memory and re-broadcast
//! its constants in every iteration; these keep everything in registers.
//!
//! Every result is the portable code's, bit for bit (a test compares both kernels): each
//! lane runs the same IEEE operations in the same order, and no multiply-add is fused.
//! `_mm256_min_ps(a, b)` is `a < b ? a : b` and `_mm256_max_ps(a, b)` is `a > b ? a : b`,
//! which are the portable selects (a NaN `a` gives `b`, as `f32::max` drops a NaN). Blocks
//! whose length is not a multiple of eight (a short last block) take the portable path.

use std::arch::x86_64::*;

use super::kernel::{self, ErrorLanes, LANES};
use super::params::{self, BlockParams};
use super::{Bits, QuantSettings, Rounding, Scale, MAX_BLOCK};

/// [`params::finite_min_max`]: min and max of a block, `None` when a value is not finite.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn finite_min_max(values: &[f32]) -> Option<(f32, f32)> {
    if values.is_empty() || !values.len().is_multiple_of(LANES) {
        return params::finite_min_max(values);
    }
    let (mut lo, mut hi, mut nonfinite) = (_mm256_set1_ps(f32::MAX), _mm256_set1_ps(-f32::MAX), _mm256_setzero_ps());
    for c in values.chunks_exact(LANES) {
        // SAFETY: `c` holds eight f32.
        let v = unsafe { _mm256_loadu_ps(c.as_ptr()) };
        lo = _mm256_min_ps(v, lo);
        hi = _mm256_max_ps(v, hi);
        nonfinite = _mm256_add_ps(nonfinite, _mm256_sub_ps(v, v));
    }
    let finite = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(nonfinite, _mm256_setzero_ps())) == 0xff;
    // Any order of reduction finds the same non-zero extremes; a zero is rescanned in row order
    // (which zero comes first decides its sign), as the portable scan does.
    let (min, max) = (horizontal_min(lo), horizontal_max(hi));
    let (min, max) = if min == 0.0 || max == 0.0 { params::min_max_in_order(values) } else { (min, max) };
    finite.then_some((min, max))
}

#[inline]
#[target_feature(enable = "avx2")]
fn horizontal_min(v: __m256) -> f32 {
    let m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let m = _mm_min_ps(m, _mm_movehl_ps(m, m));
    _mm_cvtss_f32(_mm_min_ss(m, _mm_movehdup_ps(m)))
}

#[inline]
#[target_feature(enable = "avx2")]
fn horizontal_max(v: __m256) -> f32 {
    let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)))
}

/// [`kernel::portable_quantize_pack`]: one block straight into its blob, packed in registers
/// (INT4: `pack4`'s nibbles, the even row low), and its error lanes.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn quantize_pack<S: Scale>(values: &[f32], p: &BlockParams<S>, settings: &QuantSettings, carried: u8, dst: &mut [u8], qbuf: &mut [u8; MAX_BLOCK], error: &mut ErrorLanes) -> u8 {
    let len = values.len();
    if len == 0 || !len.is_multiple_of(LANES) {
        return kernel::portable_quantize_pack(values, p, settings, carried, dst, qbuf, error);
    }
    let (bits, rounding) = (settings.bits(), settings.rounding());
    let max_q = bits.max_q();
    let per_chunk = LANES * bits.count() / 8;
    let (packed, padding) = dst.split_at_mut(len * bits.count() / 8);
    let nibbles = _mm_set1_epi16(0x00f0);
    let mut last = 0u8;
    let reciprocal = _mm256_set1_ps(p.reciprocal());
    let zero_point = _mm256_set1_ps(p.zero_point as f32);
    let scale = _mm256_set1_ps(p.scale.to_f32());
    let (zero, max_qf, one) = (_mm256_setzero_ps(), _mm256_set1_ps(max_q as f32), _mm256_set1_ps(1.0));
    let (half, sign) = (_mm256_set1_ps(0.5), _mm256_set1_ps(-0.0));
    let (zero_point_i, max_qi) = (_mm256_set1_epi32(p.zero_point as i32), _mm256_set1_epi32(max_q as i32));
    // SAFETY (loads and stores below): `error.max` holds eight f32, `error.sum_sq` eight f64.
    let mut max = unsafe { _mm256_loadu_ps(error.max.as_ptr()) };
    let mut sq = _mm256_setzero_ps();
    for (c, o) in values.chunks_exact(LANES).zip(packed.chunks_exact_mut(per_chunk)) {
        // SAFETY: `c` holds eight f32.
        let v = unsafe { _mm256_loadu_ps(c.as_ptr()) };
        let (rounded, ints) = match rounding {
            Rounding::MatMulNBits => {
                // params::rounded_value's integer, found another way: round to nearest even,
                // then move a tie that went down (x - r = 0.5 exactly; the subtraction is
                // exact) up, which is rounding half away from zero for every x >= 0; a negative
                // x, NaN or -inf clamps to 0 and +inf to max_q, as there. `_mm256_max_ps(NaN,
                // 0)` is 0.
                let x = _mm256_add_ps(_mm256_mul_ps(v, reciprocal), zero_point);
                let nearest = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x);
                let tie_down = _mm256_and_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(_mm256_sub_ps(x, nearest), half), one);
                let rounded = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(nearest, tie_down), zero), max_qf);
                (rounded, _mm256_cvttps_epi32(rounded))
            }
            Rounding::Qdq => {
                // params::rounded_value_qdq: the same rounding of |x| with x's sign put back
                // (roundf), converted to int32 as the C++ does (cvttps: INT_MIN for a NaN or
                // |x| >= 2^31), then the zero point added and clamped as integers.
                let x = _mm256_mul_ps(v, reciprocal);
                let magnitude = _mm256_andnot_ps(sign, x);
                let nearest = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(magnitude);
                let tie_down = _mm256_and_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(_mm256_sub_ps(magnitude, nearest), half), one);
                let signed = _mm256_or_ps(_mm256_add_ps(nearest, tie_down), _mm256_and_ps(x, sign));
                let q = _mm256_add_epi32(_mm256_cvttps_epi32(signed), zero_point_i);
                let ints = _mm256_min_epi32(_mm256_max_epi32(q, _mm256_setzero_si256()), max_qi);
                (_mm256_cvtepi32_ps(ints), ints)
            }
        };
        // Eight integers in [0, max_q] to eight bytes.
        let words = _mm_packus_epi32(_mm256_castsi256_si128(ints), _mm256_extracti128_si256::<1>(ints));
        let bytes = _mm_packus_epi16(words, words);
        match bits {
            // SAFETY: `o` holds eight bytes.
            Bits::Int8 => unsafe { _mm_storel_epi64(o.as_mut_ptr() as *mut __m128i, bytes) },
            Bits::Int4 => {
                // Byte pairs as u16 (even row low): low nibble | high nibble << 4, as `pack4`.
                let pairs = _mm_or_si128(bytes, _mm_and_si128(_mm_srli_epi16::<4>(bytes), nibbles));
                let packed = _mm_packus_epi16(_mm_and_si128(pairs, _mm_set1_epi16(0x00ff)), pairs);
                // SAFETY: `o` holds four bytes.
                unsafe { (o.as_mut_ptr() as *mut i32).write_unaligned(_mm_cvtsi128_si32(packed)) };
                last = _mm256_extract_epi32::<7>(ints) as u8;
            }
        }
        let d = _mm256_andnot_ps(sign, _mm256_sub_ps(v, _mm256_mul_ps(_mm256_sub_ps(rounded, zero_point), scale)));
        max = _mm256_max_ps(d, max);
        sq = _mm256_add_ps(sq, _mm256_mul_ps(d, d));
    }
    // SAFETY: see above.
    unsafe {
        _mm256_storeu_ps(error.max.as_mut_ptr(), max);
        let (lo, hi) = (_mm256_cvtps_pd(_mm256_castps256_ps128(sq)), _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(sq)));
        let total = error.sum_sq.as_mut_ptr();
        _mm256_storeu_pd(total, _mm256_add_pd(_mm256_loadu_pd(total), lo));
        _mm256_storeu_pd(total.add(4), _mm256_add_pd(_mm256_loadu_pd(total.add(4)), hi));
    }
    error.count += len as u64;
    padding.fill(0);
    last
}
