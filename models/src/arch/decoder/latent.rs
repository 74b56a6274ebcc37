//! Multi-head latent attention (DeepSeek-V2/V3) in the latent space.
//!
//! transformers computes per head `k = [k_nope, k_rot]` and `v` from one normalized latent
//! `c` (`kv_b_proj`), with `k_rot` shared by every head, and caches `c` and `k_rot`. The same
//! scores and outputs come without expanding the cache: `q_nope . (W_uk c) = (q_nope W_uk) . c`
//! and `p (W_uv c) = W_uv (p c)`. So each head's query becomes `[q_rot, q_nope W_uk]` and the
//! block attends over one key/value head: key `[k_rot, c]`, value `[c, 0]` (zero-padded to the
//! key's width, since a runtime sizes key and value caches alike), `kv_lora_rank +
//! qk_rope_head_dim` wide. Its output's latent part goes through `W_uv` per head, then
//! `o_proj`. The cache holds what transformers' does (the rotary key first); a step reads the
//! cache as it is, without the `heads x (nope + v)` expansion per position.
//!
//! Rotary rows stored as interleaved pairs (`rope_interleave`) are read de-interleaved (evens
//! then odds, whole rows), so rotate-half RoPE on them gives transformers' interleaved
//! rotation in the layout its output (and cache) has.

use super::Shared;
use crate::components::attention::attention;
use crate::components::kv_cache::static_attention;
use crate::components::linear::{linear, LinearWeights};
use crate::components::norm::norm;
use crate::config::LatentDims;
use crate::{Checkpoint, GraphBuilder, Result};
use ir::{Attr, Recipe};

/// The latent attention of layer `i` (scope `layer`) on `x`, its output projected by `o_proj`.
#[allow(clippy::too_many_arguments)]
pub(super) fn block(
    b: &mut GraphBuilder,
    ckpt: &Checkpoint,
    sh: &Shared,
    family: &super::DecoderFamily,
    names: &crate::arch::LatentNames,
    l: &LatentDims,
    i: usize,
    layer: &str,
    x: &str,
) -> Result<String> {
    let s = |part: &str| format!("{layer}.{part}");
    // The latent norms' epsilon is the class default in transformers' code, not `rms_norm_eps`.
    let (heads, hidden, eps) = (sh.c.num_attention_heads, sh.hidden, names.norm_eps);
    let (h, rope, nope, rank, width) = (heads as i64, l.sizes.rope as i64, l.sizes.nope as i64, l.sizes.kv_rank as i64, (l.sizes.kv_rank + l.sizes.rope) as i64);
    let (bias, o_bias, _) = sh.biases;
    let norm_kind = family.layout.norm;
    let qk = l.sizes.nope + l.sizes.rope;

    // Queries: `[heads * (nope + rope), in]`, split per head into the nope rows and the
    // (de-interleaved) rotary rows.
    let (q_scope, q_in, q_x) = match l.sizes.q_rank {
        None => (s(names.q), hidden, x.to_string()),
        Some(r) => {
            let a = LinearWeights::torch(ckpt, b, &s(names.q_a), hidden, r, bias)?;
            let c = linear(b, &s(names.q_a), x, a);
            (s(names.q_b), r, norm(b, ckpt, norm_kind, &s(names.q_a_norm), &c, r, eps)?)
        }
    };
    let q_weight = ckpt.tensor(&format!("{q_scope}.weight"), &[heads * qk, q_in])?;
    let per_head = |r: &Recipe, start: usize, end: usize| r.clone().reshape(vec![heads, qk, q_in]).slice(1, start, end);
    let q_nope_w = per_head(&q_weight, 0, l.sizes.nope).reshape(vec![heads * l.sizes.nope, q_in]);
    let q_rope_w = rotary_rows(per_head(&q_weight, l.sizes.nope, qk), heads, l.sizes.rope, q_in, l.sizes.interleaved)?.reshape(vec![heads * l.sizes.rope, q_in]);
    let float = b.float;
    let as_linear = |w: Recipe| LinearWeights { weight: w.transpose(vec![1, 0]).cast(float), bias: None };
    let q_nope = linear(b, &format!("{q_scope}.nope"), &q_x, as_linear(q_nope_w));
    let q_rope = linear(b, &format!("{q_scope}.rope"), &q_x, as_linear(q_rope_w));

    // The latent and the shared rotary key: `[kv_lora_rank + rope, hidden]`.
    let kv_a = s(names.kv_a);
    let kv_a_w = ckpt.tensor(&format!("{kv_a}.weight"), &[l.sizes.kv_rank + l.sizes.rope, hidden])?;
    let kv_a_b = if bias { Some(ckpt.tensor(&format!("{kv_a}.bias"), &[l.sizes.kv_rank + l.sizes.rope])?) } else { None };
    let latent_w = LinearWeights { weight: kv_a_w.clone().slice(0, 0, l.sizes.kv_rank).transpose(vec![1, 0]).cast(float), bias: kv_a_b.clone().map(|r| r.slice(0, 0, l.sizes.kv_rank).cast(float)) };
    let k_rope_rows = rotary_rows(kv_a_w.slice(0, l.sizes.kv_rank, l.sizes.kv_rank + l.sizes.rope).reshape(vec![1, l.sizes.rope, hidden]), 1, l.sizes.rope, hidden, l.sizes.interleaved)?;
    let k_rope_bias = match kv_a_b {
        None => None,
        Some(r) => Some(rotary_rows(r.slice(0, l.sizes.kv_rank, l.sizes.kv_rank + l.sizes.rope).reshape(vec![1, l.sizes.rope, 1]), 1, l.sizes.rope, 1, l.sizes.interleaved)?.reshape(vec![l.sizes.rope]).cast(float)),
    };
    let k_rope_w = LinearWeights { weight: k_rope_rows.reshape(vec![l.sizes.rope, hidden]).transpose(vec![1, 0]).cast(float), bias: k_rope_bias };
    let latent = linear(b, &format!("{kv_a}.latent"), x, latent_w);
    let latent = norm(b, ckpt, norm_kind, &s(names.kv_a_norm), &latent, l.sizes.kv_rank, eps)?;
    let k_rope = linear(b, &format!("{kv_a}.rope"), x, k_rope_w);

    // `kv_b_proj` `[heads * (nope + v), rank]`: per head the key's rows `W_uk` `[nope, rank]`,
    // then the value's `W_uv` `[v, rank]`.
    let kv_b = s(names.kv_b);
    let kv_b_w = ckpt.tensor(&format!("{kv_b}.weight"), &[heads * (l.sizes.nope + l.sizes.v), l.sizes.kv_rank])?.reshape(vec![heads, l.sizes.nope + l.sizes.v, l.sizes.kv_rank]);
    let w_uk = b.initializer(&format!("{kv_b}.key.weight"), kv_b_w.clone().slice(1, 0, l.sizes.nope).cast(float));
    let w_uv = b.initializer(&format!("{kv_b}.value.weight"), kv_b_w.slice(1, l.sizes.nope, l.sizes.nope + l.sizes.v).transpose(vec![0, 2, 1]).cast(float));

    // Each head's query in the latent space: `q_nope W_uk` `[batch, seq, heads, rank]`.
    let attn = s("self_attn");
    let by_head = b.const_i64_1d(&format!("{attn}/latent/by_head"), &[0, 0, h, 1, nope]);
    let q_nope = b.op(&format!("{attn}/latent/q_nope/Reshape"), "Reshape", &[&q_nope, &by_head], vec![]);
    let q_abs = b.op(&format!("{attn}/latent/q_absorbed/MatMul"), "MatMul", &[&q_nope, &w_uk], vec![]);
    let abs_shape = b.const_i64_1d(&format!("{attn}/latent/q_absorbed_shape"), &[0, 0, h, rank]);
    let q_abs = b.op(&format!("{attn}/latent/q_absorbed/Reshape"), "Reshape", &[&q_abs, &abs_shape], vec![]);
    let rope_shape = b.const_i64_1d(&format!("{attn}/latent/q_rope_shape"), &[0, 0, h, rope]);
    let q_rope = b.op(&format!("{attn}/latent/q_rope/Reshape"), "Reshape", &[&q_rope, &rope_shape], vec![]);
    let q = b.op(&format!("{attn}/latent/q/Concat"), "Concat", &[&q_rope, &q_abs], vec![Attr::int("axis", -1)]);
    let q_shape = b.const_i64_1d(&format!("{attn}/latent/q_shape"), &[0, 0, h * width]);
    let q = b.op(&format!("{attn}/latent/q/Reshape"), "Reshape", &[&q, &q_shape], vec![]);
    // Mistral 4's position scale multiplies the whole query (a linear factor, so the latent
    // query takes it as the expanded one would).
    let q = match &sh.query_position {
        None => q,
        Some(scale) => b.op(&s("self_attn.query_position_scale/Mul"), "Mul", &[&q, scale], vec![]),
    };
    // The one key/value head: key `[k_rot, c]`, value `[c, 0]`.
    let k = b.op(&format!("{attn}/latent/k/Concat"), "Concat", &[&k_rope, &latent], vec![Attr::int("axis", -1)]);
    let zero = b.initializer(&format!("{attn}/latent/zero"), Recipe::from_f32(format!("{attn}/latent/zero = 0"), vec![], &[0.0]).cast(float));
    let pad_shape = b.op(&format!("{attn}/latent/v_pad/Shape"), "Shape", &[&k_rope], vec![]);
    let pad = b.op(&format!("{attn}/latent/v_pad/Expand"), "Expand", &[&zero, &pad_shape], vec![]);
    let v = b.op(&format!("{attn}/latent/v/Concat"), "Concat", &[&latent, &pad], vec![Attr::int("axis", -1)]);
    // The token dims `[batch, seq]`, for the shapes the computed ones hide from inference.
    let tokens: Vec<ir::Dim> = b.graph.inputs.iter().find(|v| v.name == sh.io.input_ids).and_then(|v| v.shape.clone()).unwrap_or_default();
    let mut v_shape = tokens.clone();
    v_shape.push(ir::Dim::Fixed(width));
    b.annotate(&v, b.float, v_shape);

    let (q, k) = match sh.rope.as_ref().filter(|_| sh.rotates[i]) {
        None => (q, k),
        Some(cache) => (
            cache.apply(b, &s("self_attn.q_rotary"), &q, heads, &sh.io.position_ids),
            cache.apply(b, &s("self_attn.k_rotary"), &k, 1, &sh.io.position_ids),
        ),
    };
    let (past_k, past_v) = &sh.io.past[i];
    let (present_k, present_v) = &sh.io.present[i];
    let mask = &sh.masks[&sh.windows[i]];
    let scale = Some(l.scale as f32);
    let y = match &sh.write {
        None => attention(b, &attn, [&q, &k, &v], mask, [past_k, past_v], [present_k, present_v], sh.heads, scale, None),
        Some(write) => static_attention(b, &attn, [&q, &k, &v], mask, write, [past_k, past_v], [present_k, present_v], sh.heads, scale, None),
    };
    // The output's latent part per head, through `W_uv`: `[batch, seq, heads * v]`.
    let y_shape = b.const_i64_1d(&format!("{attn}/latent/out_by_head"), &[0, 0, h, 1, width]);
    let y = b.op(&format!("{attn}/latent/out/Reshape"), "Reshape", &[&y, &y_shape], vec![]);
    let (start, end, last) = (b.const_i64_1d(&format!("{attn}/latent/out/start"), &[0]), b.const_i64_1d(&format!("{attn}/latent/out/end"), &[rank]), b.const_i64_1d(&format!("{attn}/latent/out/axis"), &[-1]));
    let y = b.op(&format!("{attn}/latent/out/Slice"), "Slice", &[&y, &start, &end, &last], vec![]);
    let y = b.op(&format!("{attn}/latent/value/MatMul"), "MatMul", &[&y, &w_uv], vec![]);
    let merged = b.const_i64_1d(&format!("{attn}/latent/value_shape"), &[0, 0, h * l.sizes.v as i64]);
    let y = b.op(&format!("{attn}/latent/value/Reshape"), "Reshape", &[&y, &merged], vec![]);
    // `[batch, seq, heads * v]`, recorded: the rules downstream (skip norms) check the
    // residual's shape, which the Reshapes hide from inference.
    let mut shape = tokens;
    shape.push(ir::Dim::Fixed(h * l.sizes.v as i64));
    b.annotate(&y, b.float, shape);
    let o = LinearWeights::torch(ckpt, b, &s(family.names.o_proj), heads * l.sizes.v, hidden, o_bias)?;
    Ok(linear(b, &s(family.names.o_proj), &y, o))
}

/// `rows` `[heads, rope, inp]` (each head's rotary rows), de-interleaved when `interleaved`:
/// the even rows then the odd ones (`x[0::2]`, `x[1::2]`), whole rows only.
fn rotary_rows(rows: Recipe, heads: usize, rope: usize, inp: usize, interleaved: bool) -> Result<Recipe> {
    if !interleaved {
        return Ok(rows);
    }
    let pairs = rows.reshape(vec![heads, rope / 2, 2, inp]);
    let even = pairs.clone().slice(2, 0, 1).reshape(vec![heads, rope / 2, inp]);
    let odd = pairs.slice(2, 1, 2).reshape(vec![heads, rope / 2, inp]);
    Ok(Recipe::concat(vec![even, odd], 1)?)
}
