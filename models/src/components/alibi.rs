//! ALiBi: a per-head linear bias over the key positions, added to every attention score
//! (BLOOM, MPT, Falcon-RW). It rides in the attention mask: the boolean causal/padding mask becomes the
//! float mask `Where(mask, slope[h] * position[b, j], lowest)` `[batch, heads, seq, keys]`,
//! built once and shared by every layer, which ONNX `Attention` adds to the scaled scores and
//! GroupQueryAttention takes as its `attention_bias` (rule `fuse.gqa_alibi`).
//!
//! Masked keys get the float type's lowest finite value, as transformers fills its mask: a
//! fixed bias like -10000 would not stay below a far key's own bias (MPT's run to
//! `-slope * query position`), and a row whose keys are all masked (a left-pad query) still
//! gets finite probabilities.

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

/// Falcon's bias table `[rows, heads]`: row `p`, head `h` is `bf16(bf16(slope[h]) *
/// bf16(p)) / sqrt(head_dim)` in f32, as transformers' Falcon computes it (`slopes.bfloat16() *
/// positions`: torch rounds the int64 positions to bf16 and the product too, round to nearest
/// even as `half` does), then divides in f32. Positions past 256 move in bf16 steps.
pub fn falcon_bias_table(heads: usize, head_dim: usize, rows: usize) -> Vec<f32> {
    let bf = |v: f32| half::bf16::from_f32(v).to_f32();
    let slopes: Vec<f32> = bloom_slopes(heads).into_iter().map(bf).collect();
    let root = (head_dim as f64).sqrt() as f32;
    (0..rows).flat_map(|p| slopes.iter().map(move |s| bf(s * bf(p as f32)) / root)).collect()
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
/// `<s>_f32`, then cast, as transformers rounds it). `rows`: the positions Falcon's table
/// covers (the context). `dims` (`[batch, seq, keys]`)
/// are recorded as its shape, which inference loses through the static cache's padding and
/// the fusions check.
pub fn alibi_mask(b: &mut GraphBuilder, s: &str, causal: &CausalMask, kind: Alibi, heads: super::attention::Heads, rows: usize, dims: [ir::Dim; 3]) -> String {
    let (head_dim, heads) = (heads.head_dim, heads.q);
    let f32_code = DType::F32.to_onnx() as i64;
    // The bias is computed in f32 as transformers computes it, then cast to the graph's type:
    // these nodes' names say so (`<mask>/alibi_f32/...`), the one deliberate f32 island.
    let f = format!("{s}_f32");
    let slopes = |b: &mut GraphBuilder, values: Vec<f32>| b.initializer(&format!("{f}/slopes"), ir::Recipe::from_f32(format!("{f}/slopes"), vec![1, heads, 1, 1], &values));
    let mut bias = match kind {
        Alibi::Bloom => {
            // (cumsum(mask) - 1) * mask, counted in f32 (exact far beyond any context),
            // [batch, keys] -> [batch, 1, 1, keys], times the slopes [1, heads, 1, 1].
            let keep = b.op(&format!("{f}/kept"), "Cast", &[&causal.key_padding], vec![Attr::int("to", f32_code)]);
            let axis = b.const_i64(&format!("{f}/key_axis"), &[1]);
            let count = b.op(&format!("{f}/kept_count"), "CumSum", &[&keep, &axis], vec![]);
            let one = b.initializer(&format!("{f}/one"), ir::Recipe::from_f32(format!("{f}/one"), vec![], &[1.0]));
            let index = b.op(&format!("{f}/kept_index"), "Sub", &[&count, &one], vec![]);
            let positions = b.op(&format!("{f}/positions"), "Mul", &[&index, &keep], vec![]);
            let axes12 = b.const_i64_1d(&format!("{f}/axes12"), &[1, 2]);
            let positions = b.op(&format!("{f}/positions_4d"), "Unsqueeze", &[&positions, &axes12], vec![]);
            let slopes = slopes(b, bloom_slopes(heads));
            b.op(&format!("{f}/bias"), "Mul", &[&slopes, &positions], vec![])
        }
        Alibi::Mpt => {
            // transformers' `slot - (total - 1)` differs from `key - query` by a constant per
            // query row, which the softmax ignores; the latter keeps each query's near keys
            // small, so the bias stays exact where it matters once rounded to f16 or bf16
            // (transformers adds it in f32). [seq, keys] -> [1, 1, seq, keys].
            let relative = b.op(&format!("{f}/relative_positions"), "Sub", &[&causal.key_positions, &causal.query_column], vec![]);
            let relative = b.op(&format!("{f}/positions"), "Cast", &[&relative], vec![Attr::int("to", f32_code)]);
            let axes01 = b.const_i64_1d(&format!("{f}/axes01"), &[0, 1]);
            let positions = b.op(&format!("{f}/positions_4d"), "Unsqueeze", &[&relative, &axes01], vec![]);
            let slopes = slopes(b, mpt_slopes(heads));
            b.op(&format!("{f}/bias"), "Mul", &[&slopes, &positions], vec![])
        }
        Alibi::Falcon => {
            // Positions as BLOOM's, in int64, gathering rows of the precomputed bf16-rounded
            // table ([`falcon_bias_table`]): [batch, keys, heads] -> [batch, heads, 1, keys].
            let axis = b.const_i64(&format!("{f}/key_axis"), &[1]);
            let count = b.op(&format!("{f}/kept_count"), "CumSum", &[&causal.key_padding, &axis], vec![]);
            let one = b.const_i64(&format!("{f}/one"), &[1]);
            let index = b.op(&format!("{f}/kept_index"), "Sub", &[&count, &one], vec![]);
            let positions = b.op(&format!("{f}/positions"), "Mul", &[&index, &causal.key_padding], vec![]);
            let table = falcon_bias_table(heads, head_dim, rows);
            let table = b.initializer(&format!("{f}/bias_table"), ir::Recipe::from_f32(format!("{f}/bias_table"), vec![rows, heads], &table));
            let rows = b.op(&format!("{f}/bias_rows"), "Gather", &[&table, &positions], vec![Attr::int("axis", 0)]);
            let heads_first = b.op(&format!("{f}/bias_heads"), "Transpose", &[&rows], vec![Attr::ints("perm", &[0, 2, 1])]);
            let axis2 = b.const_i64_1d(&format!("{f}/query_axis"), &[2]);
            b.op(&format!("{f}/bias"), "Unsqueeze", &[&heads_first, &axis2], vec![])
        }
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

    /// Bits of transformers' Falcon bias (`build_alibi_tensor(ones(1, 2048), 6, float32) /
    /// sqrt(16)`, transformers 5.25) at positions 1 to 2047: 257 and 2047 land on bf16 steps
    /// (256 and 2048), 1001 on 1000.
    #[test]
    fn falcon_table_is_transformers_bf16_bias() {
        let table = falcon_bias_table(6, 16, 2048);
        let torch: [(usize, [u32; 6]); 6] = [
            (1, [0x3d800000, 0x3c800000, 0x3b800000, 0x3a800000, 0x3e000000, 0x3d000000]),
            (255, [0x417f0000, 0x407f0000, 0x3f7f0000, 0x3e7f0000, 0x41ff0000, 0x40ff0000]),
            (257, [0x41800000, 0x40800000, 0x3f800000, 0x3e800000, 0x42000000, 0x41000000]),
            (300, [0x41960000, 0x40960000, 0x3f960000, 0x3e960000, 0x42160000, 0x41160000]),
            (1001, [0x427a0000, 0x417a0000, 0x407a0000, 0x3f7a0000, 0x42fa0000, 0x41fa0000]),
            (2047, [0x43000000, 0x42000000, 0x41000000, 0x40000000, 0x43800000, 0x42800000]),
        ];
        for (p, bits) in torch {
            let ours: Vec<u32> = table[p * 6..(p + 1) * 6].iter().map(|v| v.to_bits()).collect();
            assert_eq!(ours, bits, "position {p}");
        }
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
