//! ggml's quantized block types, decoded into what MatMulNBits stores: per value a code, per
//! MatMulNBits block a scale, and for the types with a min an offset: `value = scale * (code -
//! mid) + offset` (`mid` = 2^(bits - 1), MatMulNBits' implicit zero point; the offset is the
//! float zero point `zero` as `scale * (mid - zero)`, the form the graph writes).
//!
//! | type | block | MatMulNBits form | exact? |
//! |---|---|---|---|
//! | Q4_0 | 32: f16 d, 16 bytes of nibbles (value j low nibble of byte j, value j+16 high) | 4 bits, block 32, zero 8 | exact |
//! | Q4_1 | 32: f16 d, f16 m, nibbles as Q4_0; `d*q + m` | 4 bits, block 32, code q, offset `m + 8d` | to one f32 rounding (the offset) |
//! | Q5_0 | 32: f16 d, u32 high bits, nibbles; `d*(q - 16)`, q 0..31 | 8 bits, block 32, code q + 112, zero 128 | exact |
//! | Q5_1 | 32: f16 d, f16 m, u32 high bits, nibbles as Q5_0; `d*q + m`, q 0..31 | 8 bits, block 32, code q + 112, offset `m + 16d` | to one f32 rounding |
//! | Q8_0 | 32: f16 d, 32 x i8; `d*q` | 8 bits, block 32, code q + 128, zero 128 | exact |
//! | Q2_K | 256: 16 bytes of 4-bit scale / 4-bit min, 64 bytes of 2-bit codes, f16 d, f16 dmin; sub-block of 16: `d*sc*q - dmin*m`, q 0..3 | 4 bits, block 16, code q + 6, scale `d*sc`, offset `2*d*sc - dmin*m` | scale exact in f32, offset to one f32 rounding |
//! | Q3_K | 256: 32 bytes of high-bit masks, 64 bytes of 2-bit lows, 12 bytes of 6-bit scales, f16 d; sub-block of 16: `d*(sc - 32)*q`, q -4..3 | 4 bits, block 16, code q + 8, zero 8, scale `d*(sc - 32)` | exact in f32 |
//! | Q4_K | 256: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles; sub-block j of 32: `d*sc_j*q - dmin*m_j` | 4 bits, block 32, code q, scale `d*sc_j`, offset `8*d*sc_j - dmin*m_j` | scale exact in f32 (not in f16), offset to one f32 rounding |
//! | Q5_K | 256: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins (as Q4_K), 32 bytes of high bits, 128 bytes of nibbles; sub-block j of 32: `d*sc_j*q - dmin*m_j`, q 0..31 | 8 bits, block 32, code q + 112, scale `d*sc_j`, offset `16*d*sc_j - dmin*m_j` | scale exact in f32, offset to one f32 rounding |
//! | Q6_K | 256: 128 bytes low nibbles, 64 bytes 2-bit highs, 16 x i8 scales, f16 d; sub-block of 16: `d*sc*(q - 32)`, q 0..63 | 8 bits, block 16, code q + 96, zero 128, scale `d*sc` | scale exact in f32 (not in f16) |
//! | IQ4_NL | 32: f16 d, 16 bytes of nibbles as Q4_0; `d*kv[q]`, kv llama.cpp's 16 non-uniform levels (-127..113) | 8 bits, block 32, code kv[q] + 128, zero 128 | exact |
//! | IQ4_XS | 256: f16 d, u16 high scale bits, 4 bytes of low scale nibbles, 128 bytes of nibbles; sub-block j of 32: `d*(ls_j - 32)*kv[q]` | 8 bits, block 32, code kv[q] + 128, zero 128, scale `d*(ls_j - 32)` | exact in f32 |
//! | MXFP4 | 32: e8m0 byte e, 16 bytes of nibbles as Q4_0; `2^(e - 128) * kv[q]`, kv the FP4 (E2M1) values doubled (0, 1, 2, 3, 4, 6, 8, 12 and their negatives) | 8 bits, block 32, code kv[q] + 128, zero 128, scale `2^(e - 128)` | exact in f32 (in f16 while e is 104..143) |
//!
//! Codes of the types with a min are centred on the mid value (see `with_min`). The IQ4
//! types' and MXFP4's levels are not a scale times an evenly spaced code, so no 4-bit form
//! holds them; their levels are integers, so an 8-bit code per value holds them exactly (twice
//! the file's bits; MXFP4 is gpt-oss's expert format). Layouts as llama.cpp's `dequantize_row_*` read them (ggml-quants.c).
//! transformers stores MXFP4 otherwise (values paired in a byte, exponents in their own
//! tensor): [`decode_mxfp4_pairs`] decodes that into the same form.

use crate::gguf::GgmlType;
use crate::quant::Bits;
use half::f16;

/// The zero points of a form: the implicit mid value (no tensor), or float ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Zeros {
    /// 2^(bits - 1), MatMulNBits' default.
    Mid,
    /// A float zero point per block, held as its offset `scale * (mid - zero)`: values are
    /// `scale * (code - mid) + offset` ([`decode_row`]).
    Float,
}

/// How a ggml type is written as MatMulNBits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockForm {
    pub bits: Bits,
    /// Values per MatMulNBits block.
    pub block: usize,
    pub zeros: Zeros,
    /// Whether the form's values are the ggml values exactly in f32.
    pub exact_f32: bool,
}

/// The block-quantized types decoded here (every one has a [`form`]), for messages.
pub const DECODED: [GgmlType; 13] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
    GgmlType::MXFP4,
];

/// llama.cpp's IQ4_NL / IQ4_XS levels (`kvalues_iq4nl`, ggml-common.h).
const IQ4_LEVELS: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/// llama.cpp's MXFP4 levels (`kvalues_mxfp4`, ggml-common.h): the E2M1 values times 2, which
/// the halved e8m0 scale ([`e8m0_half`]) undoes.
const MXFP4_LEVELS: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// An e8m0 scale byte halved, `2^(e - 128)`, exactly as ggml's `GGML_E8M0_TO_FP32_HALF` forms
/// it: the f32 with exponent field `e - 1`, or for `e` 0 and 1 the subnormals 2^-128 and 2^-127.
fn e8m0_half(e: u8) -> f32 {
    f32::from_bits(if e < 2 { 0x0020_0000 << e } else { (e as u32 - 1) << 23 })
}

/// The MatMulNBits form of `t`, for the types decoded here.
pub fn form(t: GgmlType) -> Option<BlockForm> {
    let f = |bits, block, zeros, exact_f32| Some(BlockForm { bits, block, zeros, exact_f32 });
    match t {
        GgmlType::Q4_0 => f(Bits::Int4, 32, Zeros::Mid, true),
        GgmlType::Q4_1 => f(Bits::Int4, 32, Zeros::Float, false),
        GgmlType::Q5_0 => f(Bits::Int8, 32, Zeros::Mid, true),
        GgmlType::Q8_0 => f(Bits::Int8, 32, Zeros::Mid, true),
        GgmlType::Q4_K => f(Bits::Int4, 32, Zeros::Float, false),
        GgmlType::Q6_K => f(Bits::Int8, 16, Zeros::Mid, true),
        GgmlType::Q5_1 => f(Bits::Int8, 32, Zeros::Float, false),
        GgmlType::Q5_K => f(Bits::Int8, 32, Zeros::Float, false),
        GgmlType::Q3_K => f(Bits::Int4, 16, Zeros::Mid, true),
        GgmlType::Q2_K => f(Bits::Int4, 16, Zeros::Float, false),
        GgmlType::IQ4_NL | GgmlType::IQ4_XS | GgmlType::MXFP4 => f(Bits::Int8, 32, Zeros::Mid, true),
        _ => None,
    }
}

fn half(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Q4_K's 6-bit scale and min of sub-block `j` (llama.cpp `get_scale_min_k4`).
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// The 32 five-bit values of a Q5_0 / Q5_1 block: value j is the low nibble of `qs[j]`, value
/// j + 16 its high nibble, bit 4 of value v is bit v of the little-endian `qh`.
fn five_bits(qh: &[u8], qs: &[u8], codes: &mut [u8]) {
    let qh = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    for j in 0..16 {
        codes[j] = (qs[j] & 0xf) | ((((qh >> j) & 1) as u8) << 4);
        codes[j + 16] = (qs[j] >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
    }
}

/// Q3_K's sixteen 6-bit scales (0..63, 32 meaning 0) from its 12 bytes: scale s has its low
/// four bits in byte s (s < 8, low nibble) or byte s - 8 (high nibble), its high two bits in
/// byte 8 + s % 4 at bit 2 * (s / 4) (llama.cpp's `kmask` unpacking).
fn scales_q3_k(b: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (s, o) in out.iter_mut().enumerate() {
        let low = if s < 8 { b[s] & 0xf } else { b[s - 8] >> 4 };
        let high = (b[8 + s % 4] >> (2 * (s / 4))) & 3;
        *o = low | (high << 4);
    }
    out
}

/// Writes a ggml block with a min, values `d * q + m` (q `0..levels`), in the offset form of
/// `bits`: codes `q + shift`, centred on the mid value (`shift = mid - levels / 2`), and
/// `value = scale * (code - mid) + offset` with `scale = d`, `offset = m + d * (mid - shift)`.
/// `d * (mid - shift)` is exact (a power of two times `d`), so the offset is rounded once, and
/// the values are the ggml ones to that one rounding. The graph writes exactly this offset
/// (MatMulNBits without zero points plus the block sums times the offsets), so no zero point
/// `-m / d` is formed: at 8 bits its f32 rounding near 128 would cost 30 times more. Centred
/// codes keep `code - mid` small, which matters where MatMulNBits quantizes the activations
/// (accuracy level 4) while the offsets multiply float block sums. A zero `d` is the constant
/// block `m`.
fn with_min(bits: Bits, levels: u8, d: f32, m: f32, codes: &mut [u8], scale: &mut f32, offset: &mut f32) {
    let mid = bits.mid();
    let shift = mid - levels / 2;
    codes.iter_mut().for_each(|q| *q += shift);
    *scale = d;
    *offset = m + d * (levels / 2) as f32;
}

/// Decodes one row of `t` (`bytes`: its blocks, `codes.len()` values) into codes, and per
/// MatMulNBits block of [`form`] a scale and (for [`Zeros::Float`]) an offset: the block's
/// values are `scale * (code - mid) + offset` (`mid` = 2^(bits - 1); without a min, `scale *
/// (code - mid)`). Returns `false` when `t` is not decoded here. The slices' lengths are the
/// caller's (checked).
pub fn decode_row(t: GgmlType, bytes: &[u8], codes: &mut [u8], scales: &mut [f32], offsets: &mut [f32]) -> bool {
    let Some((per, size)) = t.block() else { return false };
    let blocks = codes.len() / per;
    debug_assert_eq!(bytes.len(), blocks * size);
    for (i, b) in bytes.chunks_exact(size).enumerate() {
        let c = &mut codes[i * per..(i + 1) * per];
        match t {
            GgmlType::Q4_0 | GgmlType::Q4_1 => {
                let qs = if t == GgmlType::Q4_0 { &b[2..18] } else { &b[4..20] };
                for j in 0..16 {
                    c[j] = qs[j] & 0xf;
                    c[j + 16] = qs[j] >> 4;
                }
                if t == GgmlType::Q4_0 {
                    scales[i] = half(b, 0);
                } else {
                    with_min(Bits::Int4, 16, half(b, 0), half(b, 2), c, &mut scales[i], &mut offsets[i]);
                }
            }
            GgmlType::Q5_0 => {
                five_bits(&b[2..6], &b[6..22], c);
                // d * (q - 16) = d * ((q + 112) - 128).
                c.iter_mut().for_each(|q| *q += 112);
                scales[i] = half(b, 0);
            }
            GgmlType::Q5_1 => {
                five_bits(&b[4..8], &b[8..24], c);
                with_min(Bits::Int8, 32, half(b, 0), half(b, 2), c, &mut scales[i], &mut offsets[i]);
            }
            GgmlType::Q5_K => {
                let (d, dmin) = (half(b, 0), half(b, 2));
                let (sc, qh, qs) = (&b[4..16], &b[16..48], &b[48..176]);
                // Chunk of 64 values: sub-blocks 2c (low nibbles, high bit 2c of qh[l]) and 2c + 1
                // (high nibbles, high bit 2c + 1).
                for chunk in 0..4 {
                    for l in 0..32 {
                        let q = qs[32 * chunk + l];
                        c[64 * chunk + l] = (q & 0xf) | (((qh[l] >> (2 * chunk)) & 1) << 4);
                        c[64 * chunk + 32 + l] = (q >> 4) | (((qh[l] >> (2 * chunk + 1)) & 1) << 4);
                    }
                }
                for j in 0..8 {
                    let (s, m) = scale_min_k4(j, sc);
                    let k = i * 8 + j;
                    with_min(Bits::Int8, 32, d * s as f32, -(dmin * m as f32), &mut c[32 * j..32 * (j + 1)], &mut scales[k], &mut offsets[k]);
                }
            }
            GgmlType::Q3_K => {
                let (hmask, qs, d) = (&b[0..32], &b[32..96], half(b, 108));
                let sc = scales_q3_k(&b[96..108]);
                // Half h of 128 values, group g of 32 (shift 2g, mask bit 4h + g), two
                // sub-blocks of 16: q = low two bits - (4 unless the mask bit is set).
                for h in 0..2 {
                    for g in 0..4 {
                        for l in 0..32 {
                            let low = (qs[32 * h + l] >> (2 * g)) & 3;
                            let high = (hmask[l] >> (4 * h + g)) & 1;
                            // q + 8 = low - 4 * (1 - high) + 8.
                            c[128 * h + 32 * g + l] = low + 4 + 4 * high;
                        }
                    }
                }
                for s in 0..16 {
                    scales[i * 16 + s] = d * (sc[s] as f32 - 32.0);
                }
            }
            GgmlType::Q2_K => {
                let (sc, qs, d, dmin) = (&b[0..16], &b[16..80], half(b, 80), half(b, 82));
                // Half h of 128 values, group g of 32 (shift 2g), two sub-blocks of 16.
                for h in 0..2 {
                    for g in 0..4 {
                        for l in 0..32 {
                            c[128 * h + 32 * g + l] = (qs[32 * h + l] >> (2 * g)) & 3;
                        }
                    }
                }
                for s in 0..16 {
                    let k = i * 16 + s;
                    let (scale, min) = ((sc[s] & 0xf) as f32, (sc[s] >> 4) as f32);
                    with_min(Bits::Int4, 4, d * scale, -(dmin * min), &mut c[16 * s..16 * (s + 1)], &mut scales[k], &mut offsets[k]);
                }
            }
            GgmlType::Q8_0 => {
                for j in 0..32 {
                    c[j] = (b[2 + j] as i8 as i16 + 128) as u8;
                }
                scales[i] = half(b, 0);
            }
            GgmlType::Q4_K => {
                let (d, dmin) = (half(b, 0), half(b, 2));
                let (sc, qs) = (&b[4..16], &b[16..144]);
                for chunk in 0..4 {
                    for l in 0..32 {
                        c[64 * chunk + l] = qs[32 * chunk + l] & 0xf;
                        c[64 * chunk + 32 + l] = qs[32 * chunk + l] >> 4;
                    }
                }
                for j in 0..8 {
                    let (s, m) = scale_min_k4(j, sc);
                    let k = i * 8 + j;
                    with_min(Bits::Int4, 16, d * s as f32, -(dmin * m as f32), &mut c[32 * j..32 * (j + 1)], &mut scales[k], &mut offsets[k]);
                }
            }
            GgmlType::Q6_K => {
                let (ql, qh, sc, d) = (&b[0..128], &b[128..192], &b[192..208], half(b, 208));
                for h in 0..2 {
                    let (ql, qh) = (&ql[64 * h..], &qh[32 * h..]);
                    let y = &mut c[128 * h..128 * (h + 1)];
                    for l in 0..32 {
                        // q - 32 = (q + 96) - 128.
                        y[l] = ((ql[l] & 0xf) | ((qh[l] & 3) << 4)) + 96;
                        y[l + 32] = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) + 96;
                        y[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) + 96;
                        y[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) + 96;
                    }
                }
                for s in 0..16 {
                    scales[i * 16 + s] = d * (sc[s] as i8) as f32;
                }
            }
            GgmlType::IQ4_NL => {
                iq4_codes(&b[2..18], c);
                scales[i] = half(b, 0);
            }
            GgmlType::MXFP4 => {
                levels_codes(&MXFP4_LEVELS, &b[1..17], c);
                scales[i] = e8m0_half(b[0]);
            }
            GgmlType::IQ4_XS => {
                let (d, high, low) = (half(b, 0), u16::from_le_bytes([b[2], b[3]]), &b[4..8]);
                for j in 0..8 {
                    iq4_codes(&b[8 + 16 * j..24 + 16 * j], &mut c[32 * j..32 * (j + 1)]);
                    let ls = ((low[j / 2] >> (4 * (j % 2))) & 0xf) | ((((high >> (2 * j)) & 3) as u8) << 4);
                    scales[i * 8 + j] = d * (ls as f32 - 32.0);
                }
            }
            _ => return false,
        }
    }
    true
}

/// 32 IQ4 values from 16 bytes (value j the low nibble of byte j, j + 16 its high nibble) as
/// 8-bit codes: the level + 128.
fn iq4_codes(qs: &[u8], codes: &mut [u8]) {
    levels_codes(&IQ4_LEVELS, qs, codes)
}

/// Blocks of MXFP4 as transformers stores them (gpt-oss's `*_blocks` and `*_scales`): per 32
/// values 16 bytes, byte `j` holding value `2j` in its low nibble and `2j + 1` in its high one
/// (not ggml's halves), and the e8m0 exponent `e` in a tensor of its own; a value is
/// `fp4[q] * 2^(e - 127)` (transformers' `convert_moe_packed_tensors`), which is ggml's
/// `kv[q] * 2^(e - 128)`: decoded into ggml MXFP4's form (code `kv[q] + 128`, scale
/// [`e8m0_half`]). Exponent 255 is NaN in the OCP MX format: its block's scale is NaN, which
/// the caller refuses as a corrupt block.
pub fn decode_mxfp4_pairs(nibbles: &[u8], exponents: &[u8], codes: &mut [u8], scales: &mut [f32]) {
    let code = |n: u8| (MXFP4_LEVELS[n as usize] as i16 + 128) as u8;
    for ((b, c), (e, s)) in nibbles.chunks_exact(16).zip(codes.chunks_exact_mut(32)).zip(exponents.iter().zip(scales.iter_mut())) {
        for (j, byte) in b.iter().enumerate() {
            c[2 * j] = code(byte & 0xf);
            c[2 * j + 1] = code(byte >> 4);
        }
        *s = if *e == 255 { f32::NAN } else { e8m0_half(*e) };
    }
}

/// 32 values of a table of 16 integer levels from 16 bytes of nibbles (value j the low nibble
/// of byte j, j + 16 its high nibble) as 8-bit codes: the level + 128.
fn levels_codes(levels: &[i8; 16], qs: &[u8], codes: &mut [u8]) {
    let code = |n: u8| (levels[n as usize] as i16 + 128) as u8;
    for j in 0..16 {
        codes[j] = code(qs[j] & 0xf);
        codes[j + 16] = code(qs[j] >> 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16b(v: f32) -> [u8; 2] {
        f16::from_f32(v).to_le_bytes()
    }

    /// Values of a decoded row: `scale * (code - mid) + offset` (no offset when [`Zeros::Mid`]).
    fn values(t: GgmlType, bytes: &[u8], n: usize) -> Vec<f32> {
        let f = form(t).unwrap();
        let (mut codes, mut scales, mut zeros) = (vec![0u8; n], vec![0f32; n / f.block], vec![0f32; n / f.block]);
        assert!(decode_row(t, bytes, &mut codes, &mut scales, &mut zeros));
        let mid = f.bits.mid() as f32;
        (0..n)
            .map(|i| {
                let scaled = scales[i / f.block] * (codes[i] as f32 - mid);
                if f.zeros == Zeros::Mid {
                    scaled
                } else {
                    scaled + zeros[i / f.block]
                }
            })
            .collect()
    }

    #[test]
    fn q4_0_q4_1_q5_0_q8_0_by_hand() {
        // Q4_0: d 0.5; byte 0 = 0x31: value 0 is (1 - 8) * 0.5, value 16 is (3 - 8) * 0.5.
        let mut b = f16b(0.5).to_vec();
        b.extend([0x31u8].iter().chain([0x88u8; 15].iter()));
        let v = values(GgmlType::Q4_0, &b, 32);
        assert_eq!((v[0], v[16], v[1]), (-3.5, -2.5, 0.0));
        // Q4_1: d 0.25, m -1: d * q + m.
        let mut b = f16b(0.25).to_vec();
        b.extend(f16b(-1.0));
        b.extend([0xf2u8].iter().chain([0u8; 15].iter()));
        let v = values(GgmlType::Q4_1, &b, 32);
        assert_eq!((v[0], v[16], v[5]), (-0.5, 2.75, -1.0));
        // Q4_1 with d = 0: every value is m.
        let mut b = f16b(0.0).to_vec();
        b.extend(f16b(0.75));
        b.extend([0x5au8; 16]);
        assert!(values(GgmlType::Q4_1, &b, 32).iter().all(|&x| x == 0.75));
        // Q5_0: value 1's high bit is bit 1 of qh, value 17's bit 17; d * (q - 16).
        let mut b = f16b(2.0).to_vec();
        b.extend(((1u32 << 1) | (1 << 17)).to_le_bytes());
        b.extend([0x00u8, 0x3f].iter().chain([0u8; 14].iter()));
        let v = values(GgmlType::Q5_0, &b, 32);
        assert_eq!((v[0], v[1], v[17], v[16]), (-32.0, 2.0 * (15.0 + 16.0 - 16.0), 2.0 * (3.0 + 16.0 - 16.0), -32.0));
        // Q8_0: d * q, q signed.
        let mut b = f16b(0.125).to_vec();
        b.extend((0..32).map(|i| (i as i8 - 16) as u8));
        let v = values(GgmlType::Q8_0, &b, 32);
        assert_eq!((v[0], v[16], v[31]), (-2.0, 0.0, 1.875));
    }

    #[test]
    fn q4_k_and_q6_k_by_hand() {
        // Q4_K: d 1, dmin 0.5; sub-block 0 scale 3 min 2, sub-block 5 (j >= 4) scale
        // (q[9] & 15) | (q[1] >> 6) << 4 = 1 | 16, min (q[9] >> 4) | (q[5] >> 6) << 4 = 2.
        let mut sc = [0u8; 12];
        sc[0] = 3;
        sc[4] = 2;
        sc[1] = 1 << 6;
        sc[9] = 0x21;
        let mut b = f16b(1.0).to_vec();
        b.extend(f16b(0.5));
        b.extend(sc);
        let mut qs = [0u8; 128];
        qs[0] = 0x74; // value 0 (sub-block 0) = 4, value 32 (sub-block 1) = 7
        qs[64 + 3] = 0x90; // value 128 + 32 + 3 = 163 (sub-block 5) = 9
        b.extend(qs);
        let v = values(GgmlType::Q4_K, &b, 256);
        assert!((v[0] - (3.0 * 4.0 - 0.5 * 2.0)).abs() < 1e-5, "{}", v[0]);
        assert!((v[163] - (17.0 * 9.0 - 0.5 * 2.0)).abs() < 1e-5, "{}", v[163]);
        assert_eq!(v[32], 0.0, "sub-block 1: scale 0, min 0");
        // Q6_K: value 64 + 5 of the first half uses ql[5] >> 4, qh[5] bits 4..6, scale sc[4].
        let mut b = vec![0u8; 210];
        b[5] = 0xa0;
        b[128 + 5] = 0b10_0000; // bits 4..6 = 2
        for s in 0..16 {
            b[192 + s] = (s as i8 - 8) as u8;
        }
        b[208..210].copy_from_slice(&f16b(0.5));
        let v = values(GgmlType::Q6_K, &b, 256);
        assert_eq!(v[69], 0.5 * (4.0 - 8.0) * ((0xa + (2 << 4)) as f32 - 32.0));
        assert_eq!(v[0], 0.5 * -8.0 * -32.0);
        assert_eq!(v[255], 0.5 * 7.0 * -32.0);
    }

    #[test]
    fn mxfp4_by_hand() {
        // e 130: scale 2^2; byte 0 = 0xf7: value 0 is level 7 (12), value 16 level 15 (-12).
        let mut b = vec![130u8, 0xf7];
        b.extend([0x98u8; 15]);
        let v = values(GgmlType::MXFP4, &b, 32);
        assert_eq!((v[0], v[16], v[1], v[17]), (48.0, -48.0, 0.0, -4.0));
        // The halved e8m0 scale at its ends: subnormal 2^-128 and 2^-127, then normal.
        assert_eq!([e8m0_half(0), e8m0_half(1), e8m0_half(2), e8m0_half(255)], [2f32.powi(-128), 2f32.powi(-127), 2f32.powi(-126), 2f32.powi(127)]);
    }

    /// transformers' layout (values 2j, 2j+1 in byte j; exponent apart) decodes as ggml's
    /// MXFP4 block holding the same values (values j, j+16 in byte j; exponent first), and
    /// as transformers' formula `fp4[q] * 2^(e - 127)` by hand.
    #[test]
    fn mxfp4_pairs_are_ggml_mxfp4_regrouped() {
        const FP4: [f32; 16] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0];
        let q: Vec<u8> = (0..64u32).map(|i| ((i * 7 + i / 5) % 16) as u8).collect();
        let exps = [119u8, 131];
        let pairs: Vec<u8> = q.chunks(2).map(|p| p[0] | (p[1] << 4)).collect();
        let (mut codes, mut scales) = (vec![0u8; 64], vec![0f32; 2]);
        decode_mxfp4_pairs(&pairs, &exps, &mut codes, &mut scales);
        let mut ggml = Vec::new();
        for (b, e) in q.chunks(32).zip(exps) {
            ggml.push(e);
            ggml.extend((0..16).map(|j| b[j] | (b[j + 16] << 4)));
        }
        let (mut gc, mut gs, mut go) = (vec![0u8; 64], vec![0f32; 2], vec![0f32; 2]);
        assert!(decode_row(GgmlType::MXFP4, &ggml, &mut gc, &mut gs, &mut go));
        assert_eq!((&codes, &scales), (&gc, &gs));
        for (i, &qi) in q.iter().enumerate() {
            let value = scales[i / 32] * (codes[i] as f32 - 128.0);
            assert_eq!(value, FP4[qi as usize] * 2f32.powi(exps[i / 32] as i32 - 127), "value {i}");
        }
        // Exponent 255 is NaN in the OCP format: the block is refused by its caller.
        decode_mxfp4_pairs(&pairs[..16], &[255], &mut codes[..32], &mut scales[..1]);
        assert!(scales[0].is_nan());
    }

    #[test]
    fn forms_of_the_types_read() {
        assert_eq!(form(GgmlType::Q6_K).map(|f| (f.bits, f.block)), Some((Bits::Int8, 16)));
        assert!(form(GgmlType::Q4_K).is_some_and(|f| f.zeros == Zeros::Float && !f.exact_f32));
        assert!(form(GgmlType::F32).is_none() && form(GgmlType(16)).is_none());
        assert!(DECODED.iter().all(|&t| form(t).is_some() && t.block().is_some()));
        assert_eq!(form(GgmlType::Q3_K).map(|f| (f.bits, f.block, f.zeros)), Some((Bits::Int4, 16, Zeros::Mid)));
    }
}
