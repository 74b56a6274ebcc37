//! ir::ggml decodes each block type as gguf-py's `dequantize` does (gguf 0.19.0, vectors in
//! tests/data/ggml_blocks.safetensors, made by scripts/make_ggml_vectors.py from random blocks):
//! Q4_0, Q5_0, Q8_0, Q6_K, Q3_K, IQ4_NL, IQ4_XS and MXFP4 exactly, Q4_1, Q5_1, Q4_K, Q5_K and Q2_K (float zero points)
//! to f32 rounding.

use ir::ggml::{decode_row, form, Zeros};
use ir::gguf::GgmlType;

#[test]
fn every_block_type_dequantizes_as_gguf_py() {
    let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ggml_blocks.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    for (t, exact) in [
        (GgmlType::Q4_0, true),
        (GgmlType::Q4_1, false),
        (GgmlType::Q5_0, true),
        (GgmlType::Q8_0, true),
        (GgmlType::Q4_K, false),
        (GgmlType::Q6_K, true),
        (GgmlType::Q5_1, false),
        (GgmlType::Q5_K, false),
        (GgmlType::Q3_K, true),
        (GgmlType::Q2_K, false),
        (GgmlType::IQ4_NL, true),
        (GgmlType::IQ4_XS, true),
        (GgmlType::MXFP4, true),
    ] {
        let raw = st.tensor(&format!("{t}.raw")).unwrap();
        let want = st.tensor(&format!("{t}.values")).unwrap();
        let (rows, k) = (want.shape()[0], want.shape()[1]);
        let want: Vec<f32> = want.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        let f = form(t).unwrap();
        assert_eq!(f.exact_f32, exact, "{t}");
        let row_bytes = raw.data().len() / rows;
        // Float zero points round once in f32: the error is relative to the row's magnitude.
        let mut worst = 0f32;
        for r in 0..rows {
            let magnitude = want[r * k..(r + 1) * k].iter().fold(0f32, |m, v| m.max(v.abs()));
            let (mut codes, mut scales, mut zeros) = (vec![0u8; k], vec![0f32; k / f.block], vec![0f32; k / f.block]);
            assert!(decode_row(t, &raw.data()[r * row_bytes..(r + 1) * row_bytes], &mut codes, &mut scales, &mut zeros));
            for i in 0..k {
                let scaled = scales[i / f.block] * (codes[i] as f32 - f.bits.mid() as f32);
                let got = if f.zeros == Zeros::Mid { scaled } else { scaled + zeros[i / f.block] };
                let w = want[r * k + i];
                if exact {
                    assert_eq!(got.to_bits(), w.to_bits(), "{t} [{r}, {i}]: {got} vs {w}");
                }
                worst = worst.max((got - w).abs() / magnitude);
            }
        }
        assert!(worst < 1e-6, "{t}: relative error {worst:e}");
    }
}
