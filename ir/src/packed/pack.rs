//! The inverse of the readers: integer codes and zero points packed the way GPTQ and AutoAWQ
//! write them (the module doc's table). Tests use it to make checkpoints of layouts the
//! fixtures do not have (act-order, 8 bits, v2, other group sizes).

use super::AWQ_ORDER;

/// GPTQ `qweight` `[K * bits / 32, N]` from codes `[K, N]` (row-major): word `(r, n)` holds
/// rows `r * per..` of column `n`, row `r * per + j` in bits `bits * j..`.
pub fn gptq_qweight(codes: &[u8], k: usize, n: usize, bits: usize) -> Vec<u32> {
    let per = 32 / bits;
    assert!(k.is_multiple_of(per) && codes.len() == k * n, "K must be a multiple of {per}");
    let mut out = vec![0u32; k / per * n];
    for row in 0..k {
        for col in 0..n {
            out[(row / per) * n + col] |= (codes[row * n + col] as u32) << (bits * (row % per));
        }
    }
    out
}

/// GPTQ `qzeros` `[G, N * bits / 32]` from zero points `[G, N]`, packed along N; v1 stores
/// each zero minus one (masked to `bits`, so a zero of 0 becomes all ones).
pub fn gptq_qzeros(zeros: &[u8], groups: usize, n: usize, bits: usize, v1: bool) -> Vec<u32> {
    let per = 32 / bits;
    let mask = (1u32 << bits) - 1;
    assert!(n.is_multiple_of(per) && zeros.len() == groups * n);
    let mut out = vec![0u32; groups * n / per];
    for g in 0..groups {
        for col in 0..n {
            let z = (zeros[g * n + col] as u32).wrapping_sub(v1 as u32) & mask;
            out[g * (n / per) + col / per] |= z << (bits * (col % per));
        }
    }
    out
}

/// AutoAWQ GEMM packing of 4-bit values `[rows, N]` (a qweight's codes or a qzeros' zero
/// points) into `[rows, N / 8]`: nibble `i` of word `c` holds column `8c + [0,2,4,6,1,3,5,7][i]`.
pub fn awq(values: &[u8], rows: usize, n: usize) -> Vec<u32> {
    assert!(n.is_multiple_of(8) && values.len() == rows * n);
    let mut out = vec![0u32; rows * n / 8];
    for r in 0..rows {
        for c in 0..n / 8 {
            for (i, &j) in AWQ_ORDER.iter().enumerate() {
                out[r * (n / 8) + c] |= (values[r * n + 8 * c + j] as u32 & 0xf) << (4 * i);
            }
        }
    }
    out
}
