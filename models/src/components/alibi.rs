//! ALiBi: a per-head linear bias over the key positions, added to every attention score
//! (BLOOM, MPT). It rides in the attention mask: the boolean causal/padding mask becomes the
//! float mask `Where(mask, slope[h] * position[b, j], lowest)` `[batch, heads, seq, keys]`,
//! built once and shared by every layer, which ONNX `Attention` adds to the scaled scores and
//! GroupQueryAttention takes as its `attention_bias` (rule `fuse.gqa_alibi`).
//!
//! Masked keys get the float type's lowest finite value, as transformers fills its mask: a
//! fixed bias like -10000 would not stay below a far key's own bias (MPT's run to
//! `-slope * (total - 1)`), and a row whose keys are all masked (a left-pad query) still gets
//! finite probabilities.

use super::mask::CausalMask;
use crate::arch::Alibi;
use crate::GraphBuilder;
use ir::{Attr, DType};

/// BLOOM's slopes (`_get_alibi_slopes`, in f32 as torch computes them): `base^i` for `i` in
/// `1..=p`, `base = 2^(-2^-(log2 p - 3))`, `p` the largest power of two not above `heads`;
/// then `extra^i` for odd `i` below `2 * (heads - p)`, `extra = 2^(-2^-(log2 2p - 3))`.
pub fn bloom_slopes(heads: usize) -> Vec<f32> {
    let p = 1usize << heads.ilog2();
    let base = |p: usize| 2f64.powf(-(2f64.powf(-((p as f64).log2() - 3.0)))) as f32;
    let pow = |b: f32, i: usize| b.powf(i as f32);
    let mut slopes: Vec<f32> = (1..=p).map(|i| pow(base(p), i)).collect();
    let extra = base(2 * p);
    slopes.extend((0..(heads - p).min(p)).map(|k| pow(extra, 2 * k + 1)));
    slopes
}

/// MPT's slopes (`build_mpt_alibi_tensor` with `alibi_bias_max` 8, in f32): `1 / 2^(i * 8 /
/// p)` for `i` in `1..=p`, `p` the power of two at or above `heads`; with fewer heads than `p`
/// the odd-indexed entries, then the even ones, cut to `heads`.
pub fn mpt_slopes(heads: usize) -> Vec<f32> {
    let p = heads.next_power_of_two();
    let step = (8.0 / p as f64) as f32;
    let all: Vec<f32> = (1..=p).map(|i| 1.0 / 2f32.powf(i as f32 * step)).collect();
    if p == heads {
        return all;
    }
    all.iter().skip(1).step_by(2).chain(all.iter().step_by(2)).copied().take(heads).collect()
}

/// `x` (f32) rounded to bf16 and back (ONNX Runtime's Cast rounds to nearest even, as torch's).
fn round_to_bf16(b: &mut GraphBuilder, name: &str, x: &str) -> String {
    let narrow = b.op(&format!("{name}/Cast"), "Cast", &[x], vec![Attr::int("to", DType::BF16.to_onnx() as i64)]);
    b.op(&format!("{name}/Cast_back"), "Cast", &[&narrow], vec![Attr::int("to", DType::F32.to_onnx() as i64)])
}

/// The float type's most negative finite value, the masked keys' bias.
fn lowest(float: DType) -> f32 {
    match float {
        DType::F16 => -65504.0,
        // bf16's largest finite magnitude, exactly an f32.
        DType::BF16 => f32::from_bits(0xff7f_0000),
        _ => f32::MIN,
    }
}

/// The float mask `[batch, heads, seq, keys]` under the node-name scope `s`: the slopes of
/// `kind` for `heads` heads times its key positions where `causal.mask` keeps a key, the
/// lowest finite value elsewhere, in the graph's float type (the product in f32 under
/// `<s>_f32`, then cast, as transformers rounds it). `dims` (`[batch, seq, keys]`)
/// are recorded as its shape, which inference loses through the static cache's padding and
/// the fusions check.
pub fn alibi_mask(b: &mut GraphBuilder, s: &str, causal: &CausalMask, kind: Alibi, heads: super::attention::Heads, dims: [ir::Dim; 3]) -> String {
    let (head_dim, heads) = (heads.head_dim, heads.q);
    let f32_code = DType::F32.to_onnx() as i64;
    // The bias is computed in f32 as transformers computes it, then cast to the graph's type:
    // these nodes' names say so (`<mask>/alibi_f32/...`), the one deliberate f32 island.
    let f = format!("{s}_f32");
    let positions = match kind {
        Alibi::Bloom | Alibi::Falcon => {
            // (cumsum(mask) - 1) * mask, counted in f32 (exact far beyond any context).
            let keep = b.op(&format!("{f}/kept"), "Cast", &[&causal.key_padding], vec![Attr::int("to", f32_code)]);
            let axis = b.const_i64(&format!("{f}/key_axis"), &[1]);
            let count = b.op(&format!("{f}/kept_count"), "CumSum", &[&keep, &axis], vec![]);
            let one = b.initializer(&format!("{f}/one"), ir::Recipe::from_f32(format!("{f}/one"), vec![], &[1.0]));
            let index = b.op(&format!("{f}/kept_index"), "Sub", &[&count, &one], vec![]);
            b.op(&format!("{f}/positions"), "Mul", &[&index, &keep], vec![])
        }
        Alibi::Mpt => {
            // slot - (total - 1): the last key at 0.
            let one = b.const_i64(&format!("{f}/one"), &[1]);
            let last = b.op(&format!("{f}/last_slot"), "Sub", &[&causal.total, &one], vec![]);
            let relative = b.op(&format!("{f}/relative_slots"), "Sub", &[&causal.key_positions, &last], vec![]);
            let relative = b.op(&format!("{f}/relative_f32"), "Cast", &[&relative], vec![Attr::int("to", f32_code)]);
            let row = b.const_i64_1d(&format!("{f}/row_axis"), &[0]);
            b.op(&format!("{f}/positions"), "Unsqueeze", &[&relative, &row], vec![])
        }
    };
    // positions [batch or 1, keys] -> [batch or 1, 1, 1, keys], times slopes [1, heads, 1, 1].
    let axes12 = b.const_i64_1d(&format!("{f}/axes12"), &[1, 2]);
    let positions = b.op(&format!("{f}/positions_4d"), "Unsqueeze", &[&positions, &axes12], vec![]);
    let slopes = match kind {
        Alibi::Bloom => bloom_slopes(heads),
        Alibi::Mpt => mpt_slopes(heads),
        // torch's `.bfloat16()`: round to nearest even.
        Alibi::Falcon => bloom_slopes(heads).into_iter().map(|v| half::bf16::from_f32(v).to_f32()).collect(),
    };
    let slopes = b.initializer(&format!("{f}/slopes"), ir::Recipe::from_f32(format!("{f}/slopes"), vec![1, heads, 1, 1], &slopes));
    let mut bias = match kind {
        Alibi::Falcon => {
            // bf16 x int64 in torch: the positions rounded to bf16, the product of two bf16
            // values (exact in f32) rounded to bf16, then divided by sqrt(head_dim) in f32.
            let positions = round_to_bf16(b, &format!("{f}/positions_bf16"), &positions);
            let product = b.op(&format!("{f}/bias_exact"), "Mul", &[&slopes, &positions], vec![]);
            let product = round_to_bf16(b, &format!("{f}/bias_bf16"), &product);
            let root = (head_dim as f64).sqrt() as f32;
            let root = b.initializer(&format!("{f}/sqrt_head_dim"), ir::Recipe::from_f32(format!("{f}/sqrt_head_dim = {root}"), vec![], &[root]));
            b.op(&format!("{f}/bias"), "Div", &[&product, &root], vec![])
        }
        _ => b.op(&format!("{f}/bias"), "Mul", &[&slopes, &positions], vec![]),
    };
    if b.float != DType::F32 {
        bias = b.op(&format!("{s}/bias_cast"), "Cast", &[&bias], vec![Attr::int("to", b.float.to_onnx() as i64)]);
    }
    let low = lowest(b.float);
    let masked = b.initializer(&format!("{s}/masked"), ir::Recipe::from_f32(format!("{s}/masked = {low}"), vec![], &[low]).cast(b.float));
    let out = b.op(s, "Where", &[&causal.mask, &bias, &masked], vec![]);
    let [batch, seq, keys] = dims;
    b.annotate(&out, b.float, vec![batch, ir::Dim::Fixed(heads as i64), seq, keys]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bloom_slopes_follow_the_power_of_two_then_the_odd_powers() {
        // 8 heads: 2^-1 .. 2^-8.
        let s = bloom_slopes(8);
        assert_eq!(s, (1..=8).map(|i| 2f32.powi(-i)).collect::<Vec<_>>());
        // 12 heads: the 8 above, then 2^-0.5 ^ (1, 3, 5, 7).
        let s = bloom_slopes(12);
        assert_eq!(s.len(), 12);
        for (k, v) in s[8..].iter().enumerate() {
            let want = 2f64.powf(-0.5 * (2 * k + 1) as f64) as f32;
            assert!((v - want).abs() <= f32::EPSILON * want, "head {}: {v} vs {want}", 8 + k);
        }
    }

    #[test]
    fn mpt_slopes_interleave_when_the_heads_are_not_a_power_of_two() {
        assert_eq!(mpt_slopes(4), vec![0.25, 0.0625, 0.015625, 0.00390625]);
        // 6 heads: p = 8, slopes 2^-1..2^-8, odd-indexed (2^-2, 2^-4, 2^-6, 2^-8) then even.
        assert_eq!(mpt_slopes(6), vec![0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]);
    }

    /// Bits of torch's slopes (transformers 5.25, `_get_alibi_slopes(20)` and
    /// `build_mpt_alibi_tensor(20, 2)`): BLOOM's within one unit in the last place (torch's
    /// vectorised `pow` rounds a few differently from the C library's `powf`), MPT's exact.
    #[test]
    fn slopes_match_torchs() {
        let bits = |s: &str| s.split(',').map(|h| u32::from_str_radix(h, 16).unwrap()).collect::<Vec<_>>();
        let bloom = bits("3f3504f3,3effffff,3eb504f3,3e7fffff,3e3504f2,3dfffffe,3db504f2,3d7ffffe,3d3504f1,3cfffffd,3cb504f1,3c7ffffd,3c3504f0,3bfffffc,3bb504f0,3b7ffffb,3f5744fd,3f1837f1,3ed744fe,3e9837f1");
        let mpt = bits("3f3504f3,3f000000,3eb504f3,3e800000,3e3504f3,3e000000,3db504f3,3d800000,3d3504f3,3d000000,3cb504f3,3c800000,3c3504f3,3c000000,3bb504f3,3b800000,3f5744fd,3f1837f0,3ed744fd,3e9837f0");
        let ours: Vec<u32> = bloom_slopes(20).iter().map(|v| v.to_bits()).collect();
        assert_eq!(ours.len(), bloom.len());
        for (h, (a, b)) in ours.iter().zip(&bloom).enumerate() {
            assert!(a.abs_diff(*b) <= 1, "head {h}: {a:08x} vs torch's {b:08x}");
        }
        assert_eq!(mpt_slopes(20).iter().map(|v| v.to_bits()).collect::<Vec<_>>(), mpt);
    }
}
