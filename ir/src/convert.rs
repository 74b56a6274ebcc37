//! Fast paths for the conversions every build of a bf16 checkpoint runs on all its weights
//! (bf16 -> f16 and bf16 -> f32). The general path in `recipe.rs` decodes to f32 in chunks and
//! encodes again; these do it in one pass over typed slices. Both give the same bits: bf16 ->
//! f32 is exact (a shift), and bf16 -> f16 rounds once, to nearest even, as the general path
//! does (tested against it).

use half::f16;

/// bf16 -> f32 (little-endian bytes): the bf16 bits become the top half of the f32.
pub(crate) fn bf16_to_f32(src: &[u8], out: &mut [u8]) {
    debug_assert_eq!(out.len(), src.len() * 2);
    if let (Ok(s), Ok(o)) = (bytemuck::try_cast_slice::<u8, u16>(src), bytemuck::try_cast_slice_mut::<u8, u32>(out)) {
        // Typed slices let the compiler vectorize the widening shift.
        for (o, &s) in o.iter_mut().zip(s) {
            *o = (s as u32) << 16;
        }
        return;
    }
    for (o, c) in out.chunks_exact_mut(4).zip(src.chunks_exact(2)) {
        o.copy_from_slice(&((u16::from_le_bytes([c[0], c[1]]) as u32) << 16).to_le_bytes());
    }
}

/// bf16 -> f16 (little-endian bytes), rounding to nearest even.
pub(crate) fn bf16_to_f16(src: &[u8], out: &mut [u8]) {
    debug_assert_eq!(out.len(), src.len());
    if let (Ok(s), Ok(o)) = (bytemuck::try_cast_slice::<u8, u16>(src), bytemuck::try_cast_slice_mut::<u8, u16>(out)) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c") {
            // SAFETY: the CPU has the features the function is compiled for (checked above).
            unsafe { x86::bf16_to_f16(s, o) };
            return;
        }
        for (o, &s) in o.iter_mut().zip(s) {
            *o = one_bf16_to_f16(s);
        }
        return;
    }
    for (o, c) in out.chunks_exact_mut(2).zip(src.chunks_exact(2)) {
        o.copy_from_slice(&one_bf16_to_f16(u16::from_le_bytes([c[0], c[1]])).to_le_bytes());
    }
}

fn one_bf16_to_f16(bits: u16) -> u16 {
    f16::from_f32(f32::from_bits((bits as u32) << 16)).to_bits()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Eight at a time: widen to 32-bit lanes, shift into f32 position, convert with F16C
    /// (round to nearest even); the tail one by one.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn bf16_to_f16(src: &[u16], out: &mut [u16]) {
        let n = src.len().min(out.len());
        let mut i = 0;
        while i + 8 <= n {
            let v = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
            let f = _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(v)));
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f);
            _mm_storeu_si128(out.as_mut_ptr().add(i) as *mut __m128i, h);
            i += 8;
        }
        for j in i..n {
            out[j] = super::one_bf16_to_f16(src[j]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every bf16 bit pattern, through the fast paths and through plain f32 arithmetic.
    #[test]
    fn fast_paths_match_the_definition_for_every_bf16() {
        let all: Vec<u16> = (0..=u16::MAX).collect();
        let src: Vec<u8> = all.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut f32s = vec![0u8; src.len() * 2];
        bf16_to_f32(&src, &mut f32s);
        let mut f16s = vec![0u8; src.len()];
        bf16_to_f16(&src, &mut f16s);
        for (i, &b) in all.iter().enumerate() {
            let x = f32::from_bits((b as u32) << 16);
            assert_eq!(&f32s[i * 4..i * 4 + 4], &x.to_le_bytes(), "bf16 {b:#06x} -> f32");
            let want = f16::from_f32(x);
            let got = f16::from_le_bytes([f16s[i * 2], f16s[i * 2 + 1]]);
            if want.is_nan() {
                assert!(got.is_nan(), "bf16 {b:#06x} -> f16 NaN");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "bf16 {b:#06x} -> f16");
            }
        }
        // Unaligned views take the byte paths and agree.
        let mut shifted = vec![0u8; src.len() + 1];
        shifted[1..].copy_from_slice(&src);
        let mut out = vec![0u8; src.len() + 1];
        bf16_to_f16(&shifted[1..], &mut out[1..]);
        assert_eq!(&out[1..], f16s.as_slice());
    }
}
