//! The same quantized values re-laid out for standard ONNX `DequantizeLinear` (opset 21+,
//! blocked): `x: [K, N]` with `axis = 0` and `block_size`, `x_scale: [k_blocks, N]`, and when
//! asymmetric `x_zero_point: [k_blocks, N]` of the data's type. That is the form ONNX Runtime's
//! CPU EP fuses with a following MatMul into MatMulNBits when it loads the model.
//!
//! ONNX packs 4-bit tensors two per byte over the *flattened* tensor, low nibble first, so the
//! data is packed along N here, not along K as in MatMulNBits' `B`: the values are the same, the
//! bytes are not, hence this conversion. Symmetric blocks use the signed types (int4 / int8,
//! stored value q - 2^(bits-1), no zero-point tensor), as ONNX Runtime's own QDQ quantizer
//! writes; asymmetric blocks use uint4 / uint8 with explicit zero points.
//!
//! Streaming: a caller may convert one block of rows at a time (quantize the rows
//! `kb*block_size..` as their own weight, then convert) and concatenate the data and scales;
//! block boundaries fall on byte boundaries because block sizes are even. The 4-bit zero points
//! of such pieces concatenate on byte boundaries only when N is even.

use super::{check_lengths, Bits, NBits, QuantSettings, Scale};
use rayon::prelude::*;
use crate::proto::tensor_proto::DataType;
use crate::{Error, Result};

/// ONNX element type of `x` (and `x_zero_point`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DqType {
    Int4,
    Uint4,
    Int8,
    Uint8,
}

impl DqType {
    pub fn of(settings: &QuantSettings) -> DqType {
        match (settings.bits(), settings.symmetric()) {
            (Bits::Int4, true) => DqType::Int4,
            (Bits::Int4, false) => DqType::Uint4,
            (Bits::Int8, true) => DqType::Int8,
            (Bits::Int8, false) => DqType::Uint8,
        }
    }

    /// `TensorProto.DataType` of the initializer.
    pub fn onnx_data_type(self) -> i32 {
        (match self {
            DqType::Int4 => DataType::Int4,
            DqType::Uint4 => DataType::Uint4,
            DqType::Int8 => DataType::Int8,
            DqType::Uint8 => DataType::Uint8,
        }) as i32
    }
}

/// Bytes of packed elements for `count` values.
fn packed_len(bits: Bits, count: usize) -> usize {
    count.div_ceil(bits.per_byte())
}

/// Lengths of (`x` bytes, `x_scale` elements, `x_zero_point` bytes) for a `[k, n]` weight.
pub fn dq_lengths(settings: &QuantSettings, k: usize, n: usize) -> Result<(usize, usize, Option<usize>)> {
    let layout = settings.layout(k)?;
    let bits = settings.bits();
    let kb = layout.k_blocks();
    Ok((packed_len(bits, k * n), kb * n, (!settings.symmetric()).then(|| packed_len(bits, kb * n))))
}

/// Where [`to_dequantize_linear`] writes; every byte is written (a final odd nibble is 0).
#[derive(Debug)]
pub struct DqOut<'a, S> {
    pub data: &'a mut [u8],
    pub scales: &'a mut [S],
    pub zero_points: Option<&'a mut [u8]>,
}

/// Block `kb`'s zero point of column `c` in MatMulNBits' packed zero points (`per_col` bytes a
/// column, 4-bit ones two a byte, even block in the low nibble).
pub(crate) fn packed_zero(bits: Bits, zero_points: &[u8], per_col: usize, c: usize, kb: usize) -> u8 {
    let byte = zero_points[c * per_col + kb / bits.per_byte()];
    match bits {
        Bits::Int8 => byte,
        Bits::Int4 => (byte >> (4 * (kb % 2))) & 0x0f,
    }
}

/// Writes element `i` of a flat packed tensor that was zero-filled first.
fn put(bits: Bits, dst: &mut [u8], i: usize, v: u8) {
    match bits {
        Bits::Int8 => dst[i] = v,
        Bits::Int4 => dst[i / 2] |= (v & 0x0f) << (4 * (i % 2)),
    }
}

/// Converts all `n` columns of a `[k, n]` weight from MatMulNBits layout to DequantizeLinear's.
pub fn to_dequantize_linear<S: Scale>(settings: &QuantSettings, k: usize, n: usize, q: NBits<'_, S>, out: DqOut<'_, S>) -> Result<()> {
    let layout = settings.layout(k)?;
    check_lengths(&layout, n, q.b.len(), q.scales.len(), q.zero_points.map(<[u8]>::len))?;
    let (data_len, scales_len, zp_len) = dq_lengths(settings, k, n)?;
    let check = |what, expected: usize, got: usize| {
        if expected == got {
            Ok(())
        } else {
            Err(Error::QuantBuffer { what, expected, got })
        }
    };
    check("DequantizeLinear x", data_len, out.data.len())?;
    check("DequantizeLinear x_scale", scales_len, out.scales.len())?;
    check("DequantizeLinear x_zero_point", zp_len.unwrap_or(0), out.zero_points.as_ref().map_or(0, |z| z.len()))?;

    let bits = settings.bits();
    let bs = settings.block_size();
    let kb_count = layout.k_blocks();
    // Symmetric: signed two's complement of q - mid, which is q with its top bit flipped.
    let flip = if settings.symmetric() { bits.mid() } else { 0 };
    let (bpc, blob) = (layout.b_per_column(), layout.blob_size());
    // Output rows one K-block at a time, in parallel: a block's `bs * n` values start on a byte
    // (block sizes are even), and every column's blob of that block is read once.
    let code = |c: usize, kb: usize, i: usize| -> u8 {
        let byte = q.b[c * bpc + kb * blob + i / bits.per_byte()];
        match bits {
            Bits::Int8 => byte ^ flip,
            Bits::Int4 => ((byte >> (4 * (i % 2))) & 0x0f) ^ flip,
        }
    };
    out.data.par_chunks_mut(packed_len(bits, bs * n)).zip(out.scales.par_chunks_mut(n)).enumerate().for_each(|(kb, (dst, scales))| {
        let rows = bs.min(k - kb * bs);
        match bits {
            Bits::Int8 => {
                for (c, col) in q.b.chunks_exact(bpc).enumerate() {
                    for (i, &v) in col[kb * blob..kb * blob + rows].iter().enumerate() {
                        dst[i * n + c] = v ^ flip;
                    }
                }
            }
            // Two columns make whole bytes of every row: byte j of a column's blob holds its
            // rows 2j (low nibble) and 2j + 1 (high), so a pair of blob bytes gives two output
            // bytes (the flip applied to both nibbles at once).
            Bits::Int4 if n.is_multiple_of(2) => {
                let (half_n, flip2) = (n / 2, flip | (flip << 4));
                for (pair, cols) in q.b.chunks_exact(2 * bpc).enumerate() {
                    let a = &cols[kb * blob..kb * blob + rows.div_ceil(2)];
                    let b = &cols[bpc + kb * blob..bpc + kb * blob + rows.div_ceil(2)];
                    for (j, (&x, &y)) in a.iter().zip(b).enumerate() {
                        let (x, y) = (x ^ flip2, y ^ flip2);
                        dst[2 * j * half_n + pair] = (x & 0x0f) | (y << 4);
                        if 2 * j + 1 < rows {
                            dst[(2 * j + 1) * half_n + pair] = (x >> 4) | (y & 0xf0);
                        }
                    }
                }
            }
            Bits::Int4 => {
                dst.fill(0);
                for c in 0..n {
                    for i in 0..rows {
                        put(bits, dst, i * n + c, code(c, kb, i));
                    }
                }
            }
        }
        for (c, s) in scales.iter_mut().enumerate() {
            *s = q.scales[c * kb_count + kb];
        }
    });
    if let (Some(src), Some(dst)) = (q.zero_points, out.zero_points) {
        dst.fill(0);
        let per_col = layout.zero_points_per_column();
        for c in 0..n {
            for kb in 0..kb_count {
                put(bits, dst, kb * n + c, packed_zero(bits, src, per_col, c, kb));
            }
        }
    }
    Ok(())
}
