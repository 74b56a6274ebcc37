//! The writer's transpose kernel: scatter a band of source rows into a block of output rows
//! (source columns). Checkpoints store projection weights `[out, in]` and ONNX MatMul takes
//! `[in, out]`, so nearly every byte of a decoder's weights passes through here; after the
//! direct-I/O writer removed the kernel's page-cache copies this was the largest cost of a build.
//!
//! Work is done in square tiles that stay in L1, and within a tile in register blocks (8 x 8
//! 16-bit or 4 x 4 32-bit elements, transposed with SSE2 unpacks, which every x86-64 CPU has);
//! edges and other element sizes take scalar loops. All paths give the same bytes (tested).

/// Side of the square cache tiles, in elements.
const TILE: usize = 32;

/// Copies columns `cols` of `src` (`[h, w]` elements of `esize` bytes: source rows
/// `r0..r0 + h`) into `out`, the transposed block `[cols.len(), rows]`, at positions
/// `r0..r0 + h` of each output row.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather_columns(src: &[u8], h: usize, w: usize, cols: std::ops::Range<usize>, out: &mut [u8], rows: usize, r0: usize, esize: usize) {
    let (c0, c1) = (cols.start, cols.end);
    // Checked arithmetic: the unsafe register blocks below rely on these bounds.
    let need = |a: usize, b: usize, c: usize| a.checked_mul(b).and_then(|x| x.checked_mul(c));
    assert!(c0 <= c1 && c1 <= w && r0.checked_add(h).is_some_and(|end| end <= rows), "transpose block out of range");
    assert!(
        need(h, w, esize).is_some_and(|n| src.len() >= n) && need(c1 - c0, rows, esize).is_some_and(|n| out.len() >= n),
        "transpose buffers too small"
    );
    let geometry = Geometry { h, w, c0, c1, rows, r0 };
    match esize {
        2 => {
            if let (Ok(s), Ok(o)) = (bytemuck::try_cast_slice::<u8, u16>(src), bytemuck::try_cast_slice_mut::<u8, u16>(out)) {
                return geometry.tiles(s, o, 8, kernels::block_u16);
            }
        }
        4 => {
            if let (Ok(s), Ok(o)) = (bytemuck::try_cast_slice::<u8, u32>(src), bytemuck::try_cast_slice_mut::<u8, u32>(out)) {
                return geometry.tiles(s, o, 4, kernels::block_u32);
            }
        }
        _ => {}
    }
    for i in 0..h {
        for j in c0..c1 {
            let s = (i * w + j) * esize;
            let d = ((j - c0) * rows + r0 + i) * esize;
            out[d..d + esize].copy_from_slice(&src[s..s + esize]);
        }
    }
}

/// Where a band sits: source `[h, w]`, columns `c0..c1`, output rows of length `rows`, band
/// starting at output position `r0`.
struct Geometry {
    h: usize,
    w: usize,
    c0: usize,
    c1: usize,
    rows: usize,
    r0: usize,
}

/// A register-block kernel: transposes a `k x k` block from `src` (row stride `w`) to `dst`
/// (row stride `rows`).
type Kernel<T> = unsafe fn(src: *const T, w: usize, dst: *mut T, rows: usize);

impl Geometry {
    fn tiles<T: Copy>(&self, s: &[T], o: &mut [T], k: usize, kernel: Kernel<T>) {
        let Geometry { h, w, c0, c1, rows, r0 } = *self;
        for i0 in (0..h).step_by(TILE) {
            let i1 = (i0 + TILE).min(h);
            for j0 in (c0..c1).step_by(TILE) {
                let j1 = (j0 + TILE).min(c1);
                // Full register blocks.
                let (ik, jk) = (i0 + (i1 - i0) / k * k, j0 + (j1 - j0) / k * k);
                for i in (i0..ik).step_by(k) {
                    for j in (j0..jk).step_by(k) {
                        // SAFETY: the block's source rows i..i+k, columns j..j+k lie inside the
                        // `h x w` band and its output rows j-c0..j-c0+k, positions r0+i..r0+i+k
                        // inside `out` (both checked against the slices' lengths above).
                        unsafe { kernel(s.as_ptr().add(i * w + j), w, o.as_mut_ptr().add((j - c0) * rows + r0 + i), rows) }
                    }
                }
                // Edges: rows past the last full block, and columns past it for all rows.
                for j in j0..j1 {
                    let dst = (j - c0) * rows + r0;
                    for i in if j < jk { ik } else { i0 }..i1 {
                        o[dst + i] = s[i * w + j];
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod kernels {
    use std::arch::x86_64::*;

    /// 8 x 8 16-bit elements: three rounds of SSE2 unpacks (16-, 32-, 64-bit interleaves).
    ///
    /// # Safety
    /// `src` must point at 8 readable rows of 8 elements with stride `w`, `dst` at 8 writable
    /// rows of 8 elements with stride `rows`.
    pub(super) unsafe fn block_u16(src: *const u16, w: usize, dst: *mut u16, rows: usize) {
        let a: [__m128i; 8] = std::array::from_fn(|r| _mm_loadu_si128(src.add(r * w) as *const __m128i));
        // Interleave row pairs (16-bit), then pairs of pairs (32-bit); even slots take the low
        // halves, odd slots the high halves.
        let b: [__m128i; 8] = std::array::from_fn(|i| {
            let (x, y) = (a[i & !1], a[(i & !1) + 1]);
            if i % 2 == 0 { _mm_unpacklo_epi16(x, y) } else { _mm_unpackhi_epi16(x, y) }
        });
        let c: [__m128i; 8] = std::array::from_fn(|i| {
            let base = (i / 4) * 4 + (i % 4) / 2;
            let (x, y) = (b[base], b[base + 2]);
            if i % 2 == 0 { _mm_unpacklo_epi32(x, y) } else { _mm_unpackhi_epi32(x, y) }
        });
        for q in 0..4 {
            _mm_storeu_si128(dst.add(2 * q * rows) as *mut __m128i, _mm_unpacklo_epi64(c[q], c[q + 4]));
            _mm_storeu_si128(dst.add((2 * q + 1) * rows) as *mut __m128i, _mm_unpackhi_epi64(c[q], c[q + 4]));
        }
    }

    /// 4 x 4 32-bit elements: two rounds of SSE2 unpacks.
    ///
    /// # Safety
    /// As [`block_u16`], for 4 rows of 4 elements.
    pub(super) unsafe fn block_u32(src: *const u32, w: usize, dst: *mut u32, rows: usize) {
        let a: [__m128i; 4] = std::array::from_fn(|r| _mm_loadu_si128(src.add(r * w) as *const __m128i));
        let lo01 = _mm_unpacklo_epi32(a[0], a[1]);
        let hi01 = _mm_unpackhi_epi32(a[0], a[1]);
        let lo23 = _mm_unpacklo_epi32(a[2], a[3]);
        let hi23 = _mm_unpackhi_epi32(a[2], a[3]);
        _mm_storeu_si128(dst as *mut __m128i, _mm_unpacklo_epi64(lo01, lo23));
        _mm_storeu_si128(dst.add(rows) as *mut __m128i, _mm_unpackhi_epi64(lo01, lo23));
        _mm_storeu_si128(dst.add(2 * rows) as *mut __m128i, _mm_unpacklo_epi64(hi01, hi23));
        _mm_storeu_si128(dst.add(3 * rows) as *mut __m128i, _mm_unpackhi_epi64(hi01, hi23));
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod kernels {
    /// Portable register block: element by element.
    unsafe fn block<T: Copy, const K: usize>(src: *const T, w: usize, dst: *mut T, rows: usize) {
        for r in 0..K {
            for c in 0..K {
                *dst.add(c * rows + r) = *src.add(r * w + c);
            }
        }
    }
    pub(super) unsafe fn block_u16(src: *const u16, w: usize, dst: *mut u16, rows: usize) {
        block::<u16, 8>(src, w, dst, rows)
    }
    pub(super) unsafe fn block_u32(src: *const u32, w: usize, dst: *mut u32, rows: usize) {
        block::<u32, 4>(src, w, dst, rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain definition, byte by byte.
    #[allow(clippy::too_many_arguments)]
    fn reference(src: &[u8], h: usize, w: usize, c0: usize, c1: usize, rows: usize, r0: usize, esize: usize) -> Vec<u8> {
        let mut out = vec![0u8; (c1 - c0) * rows * esize];
        for i in 0..h {
            for j in c0..c1 {
                for b in 0..esize {
                    out[((j - c0) * rows + r0 + i) * esize + b] = src[(i * w + j) * esize + b];
                }
            }
        }
        out
    }

    #[test]
    fn every_path_matches_the_definition() {
        // Sizes around the register blocks and tiles: full blocks, ragged edges on both axes,
        // bands narrower than a block, a band placed mid-output.
        for (h, w, c0, c1, rows, r0) in [(7, 11, 3, 7, 7, 0), (16, 24, 0, 24, 16, 0), (37, 45, 5, 44, 50, 9), (70, 33, 1, 33, 70, 0), (3, 5, 0, 5, 9, 6)] {
            for esize in [1usize, 2, 4, 8] {
                let src: Vec<u8> = (0..h * w * esize).map(|i| (i * 7 % 251) as u8).collect();
                let want = reference(&src, h, w, c0, c1, rows, r0, esize);
                let mut got = vec![0u8; want.len()];
                gather_columns(&src, h, w, c0..c1, &mut got, rows, r0, esize);
                assert_eq!(got, want, "h={h} w={w} cols={c0}..{c1} rows={rows} r0={r0} esize={esize}");
                // An odd address defeats the typed views and takes the byte path.
                let mut shifted_src = vec![0u8; src.len() + 1];
                shifted_src[1..].copy_from_slice(&src);
                let mut shifted = vec![0u8; want.len() + 1];
                gather_columns(&shifted_src[1..], h, w, c0..c1, &mut shifted[1..], rows, r0, esize);
                assert_eq!(&shifted[1..], want.as_slice(), "byte path, esize={esize}");
            }
        }
    }
}
