//! The static KV cache: a fixed `[batch, kv_heads, N, head_dim]` buffer per layer, written in
//! place and attended over whole (docs/generic-graph.md, "Static KV cache").
//!
//! onnxruntime-genai feeds a growing `attention_mask` [batch, total] whose columns are the
//! cache's slots (a padded row keeps its slots; padding is masked, not compacted), so each
//! step's new rows go to slots `total - seq ..< total` of every row: one write index per row,
//! derived in the graph (no input genai does not feed).

use super::attention::Heads;
use crate::GraphBuilder;
use ir::Attr;

/// `[batch]` int64 write indices, `total - seq` for every row, built once under scope `s`.
pub fn write_indices(b: &mut GraphBuilder, s: &str, input_ids: &str, attention_mask: &str) -> String {
    let seq = b.op(&format!("{s}/seq_len"), "Shape", &[input_ids], vec![Attr::int("start", 1), Attr::int("end", 2)]);
    let total =
        b.op(&format!("{s}/total_len"), "Shape", &[attention_mask], vec![Attr::int("start", 1), Attr::int("end", 2)]);
    let batch = b.op(&format!("{s}/batch"), "Shape", &[attention_mask], vec![Attr::int("start", 0), Attr::int("end", 1)]);
    let past = b.op(&format!("{s}/past_len"), "Sub", &[&total, &seq], vec![]);
    b.op(s, "Expand", &[&past, &batch], vec![])
}

/// `[batch, seq, heads * head_dim]` -> `[batch, heads, seq, head_dim]`.
fn split_heads(b: &mut GraphBuilder, scope: &str, x: &str, heads: usize, head_dim: usize) -> String {
    let shape = b.const_i64_1d(&format!("{scope}/heads_shape"), &[0, 0, heads as i64, head_dim as i64]);
    let x = b.op(&format!("{scope}/Reshape"), "Reshape", &[x, &shape], vec![]);
    b.op(&format!("{scope}/Transpose"), "Transpose", &[&x], vec![Attr::ints("perm", &[0, 2, 1, 3])])
}

/// Opset-24 `Attention` over a static cache: the new k/v rows are written into the past buffers
/// with `TensorScatter` (axis 2, at `write_indices`) under the present names, and a 4-D q
/// attends over the whole buffers under `mask` (`[batch, 1, seq, N]`: causality, padding,
/// windows and the slots not written yet). ONNX Runtime 1.32's kernel wants q 4-D when k/v are
/// 4-D ("Q and K must have the same rank"), so q, k and v are split into heads here and the
/// output merged back. `is_causal = 0`, scale and softcap as in [`super::attention::attention`].
/// Returns the attention output `[batch, seq, q_heads * head_dim]`.
#[allow(clippy::too_many_arguments)]
pub fn static_attention(
    b: &mut GraphBuilder,
    scope: &str,
    qkv: [&str; 3],
    mask: &str,
    write: &str,
    past: [&str; 2],
    present: [&str; 2],
    heads: Heads,
    scale: Option<f32>,
    softcap: Option<f32>,
) -> String {
    let q = split_heads(b, &format!("{scope}/q_heads"), qkv[0], heads.q, heads.head_dim);
    let k = split_heads(b, &format!("{scope}/k_heads"), qkv[1], heads.kv, heads.head_dim);
    let v = split_heads(b, &format!("{scope}/v_heads"), qkv[2], heads.kv, heads.head_dim);
    for (name, past, new, present) in [("key", past[0], &k, present[0]), ("value", past[1], &v, present[1])] {
        b.node_named(&format!("{scope}/{name}_cache/TensorScatter"), "TensorScatter", &[past, new, write], vec![Attr::int("axis", 2)], &[present]);
    }
    let mut attrs = vec![Attr::int("is_causal", 0)];
    attrs.extend(super::attention::score_attrs(scale, softcap));
    let y = b.op(&format!("{scope}/Attention"), "Attention", &[&q, present[0], present[1], mask], attrs);
    let y = b.op(&format!("{scope}/merge_heads/Transpose"), "Transpose", &[&y], vec![Attr::ints("perm", &[0, 2, 1, 3])]);
    let shape = b.const_i64_1d(&format!("{scope}/merge_heads/shape"), &[0, 0, (heads.q * heads.head_dim) as i64]);
    b.op(&format!("{scope}/merge_heads/Reshape"), "Reshape", &[&y, &shape], vec![])
}
