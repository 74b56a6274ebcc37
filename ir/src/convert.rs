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

    /// The general path's answer: decode to f32, round once with `half` (bit for bit, NaNs
    /// included).
    fn reference(bits: u16) -> (u32, u16) {
        let x = f32::from_bits((bits as u32) << 16);
        (x.to_bits(), f16::from_f32(x).to_bits())
    }

    /// Every bf16 bit pattern plus 3 (so the SIMD loop's tail runs), through the typed fast
    /// paths and through the byte paths (odd addresses), against the reference.
    #[test]
    fn fast_paths_match_the_reference_for_every_bf16() {
        let all: Vec<u16> = (0..=u16::MAX).chain([0x3f80, 0x7fc1, 0xff81]).collect();
        let src: Vec<u8> = all.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut shifted_src = vec![0u8; src.len() + 1];
        shifted_src[1..].copy_from_slice(&src);
        for unaligned in [false, true] {
            let input = if unaligned { &shifted_src[1..] } else { &src[..] };
            let mut f32s = vec![0u8; src.len() * 2 + 1];
            let mut f16s = vec![0u8; src.len() + 1];
            let (f32s, f16s) = if unaligned {
                (&mut f32s[1..], &mut f16s[1..])
            } else {
                (&mut f32s[..src.len() * 2], &mut f16s[..src.len()])
            };
            bf16_to_f32(input, f32s);
            bf16_to_f16(input, f16s);
            for (i, &b) in all.iter().enumerate() {
                let (want32, want16) = reference(b);
                let got32 = u32::from_le_bytes(f32s[i * 4..i * 4 + 4].try_into().unwrap());
                let got16 = u16::from_le_bytes([f16s[i * 2], f16s[i * 2 + 1]]);
                assert_eq!(got32, want32, "bf16 {b:#06x} -> f32 (unaligned: {unaligned})");
                assert_eq!(got16, want16, "bf16 {b:#06x} -> f16 (unaligned: {unaligned})");
            }
        }
    }
}
