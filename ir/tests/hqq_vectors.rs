//! `ir::quant::hqq` against ONNX Runtime 1.32's HQQ quantizer: the codes, scales and float zero
//! points `HQQWeightOnlyQuantizer.quantize_internal` gave for the weights in
//! `data/hqq_vectors.safetensors` (scripts/make_hqq_vectors.py, run once with torch).
//!
//! The solver iterates in f32 and sums in another order than torch, so a zero may differ in its
//! last bits and a value on a rounding boundary may flip: per case at least 99% of the
//! dequantized values must be equal to within 8 f32 roundings of the block's zero point (times
//! its scale), and the weight error
//! may not exceed ONNX Runtime's by more than 2%.

use ir::quant::hqq::{solve, HqqBlock};
use ir::quant::Bits;
use safetensors::SafeTensors;

fn f32s(t: &SafeTensors, name: &str) -> (Vec<f32>, Vec<usize>) {
    let v = t.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    (v.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(), v.shape().to_vec())
}

#[test]
fn hqq_matches_onnx_runtime_within_floating_point_order() {
    let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/hqq_vectors.safetensors")).expect("committed vectors");
    let t = SafeTensors::deserialize(&bytes).unwrap();
    let mut names: Vec<String> = t.names().iter().filter_map(|n| n.strip_suffix(".weight").map(str::to_string)).collect();
    names.sort();
    assert_eq!(names.len(), 8, "{names:?}");
    for case in names {
        let cfg = t.tensor(&format!("{case}.config")).unwrap();
        let cfg: Vec<i64> = cfg.data().chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
        let bits = if cfg[0] == 4 { Bits::Int4 } else { Bits::Int8 };
        let bs = cfg[1] as usize;
        let (w, shape) = f32s(&t, &format!("{case}.weight"));
        let (n, k) = (shape[0], shape[1]);
        let (ref_scales, _) = f32s(&t, &format!("{case}.scales"));
        let (ref_zeros, _) = f32s(&t, &format!("{case}.zeros"));
        let codes = t.tensor(&format!("{case}.codes")).unwrap();
        let kp = codes.shape()[1];
        let ref_codes = codes.data();
        let sol = solve(bits, bs, n, k, 3, &|n0, n1, out| {
            out.copy_from_slice(&w[n0 * k..n1 * k]);
            Ok(())
        })
        .unwrap();
        let k_blocks = k.div_ceil(bs);
        let max_q = bits.max_q() as f32;
        let (mut equal, mut total, mut codes_equal, mut err, mut ref_err) = (0usize, 0usize, 0usize, 0f64, 0f64);
        for row in 0..n {
            for kb in 0..k_blocks {
                let b: &HqqBlock = &sol.blocks[row * k_blocks + kb];
                let (rs, rz) = (ref_scales[row * k_blocks + kb], ref_zeros[row * k_blocks + kb]);
                assert_eq!(b.scale().to_bits(), rs.to_bits(), "{case}: scale of block ({row}, {kb})");
                for r in kb * bs..((kb + 1) * bs).min(k) {
                    let v = w[row * k + r];
                    let q = b.code(max_q, v);
                    let rq = ref_codes[row * kp + r] as f32;
                    let (ours, theirs) = ((q - b.zero) * b.scale(), (rq - rz) * rs);
                    total += 1;
                    codes_equal += (q == rq) as usize;
                    equal += ((ours - theirs).abs() <= 8.0 * f32::EPSILON * rz.abs().max(1.0) * rs.abs()) as usize;
                    err += ((v - ours) as f64).powi(2);
                    ref_err += ((v - theirs) as f64).powi(2);
                }
            }
        }
        let (rms, ref_rms) = ((err / total as f64).sqrt(), (ref_err / total as f64).sqrt());
        println!("{case}: {} updates, {equal}/{total} dequantized values equal, {codes_equal} codes equal, rms {rms:.3e} vs {ref_rms:.3e}", sol.updates);
        assert!(equal as f64 >= 0.99 * total as f64, "{case}: {equal} of {total} equal");
        assert!(rms <= 1.02 * ref_rms, "{case}: rms {rms} vs ONNX Runtime's {ref_rms}");
    }
}
