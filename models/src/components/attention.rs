use crate::GraphBuilder;
use ir::Attr;

/// Head counts of one attention block.
#[derive(Clone, Copy, Debug)]
pub struct Heads {
    pub q: usize,
    pub kv: usize,
    pub head_dim: usize,
}

impl Heads {
    /// The softmax scale when none is given: `1 / sqrt(head_dim)`.
    pub fn default_scale(&self) -> f64 {
        1.0 / (self.head_dim as f64).sqrt()
    }
}

/// Opset-24 `Attention` over `[batch, seq, heads * head_dim]` q/k/v with an explicit boolean
/// mask and a KV cache: `is_causal = 0` (the mask carries causality, padding and windows), the
/// default scale `1 / sqrt(head_dim)` unless `scale` is given (GPT-2's
/// `scale_attn_by_inverse_layer_idx`, `scale_attn_weights: false`; Granite, Gemma 2). `softcap`
/// caps the scaled scores as `cap * tanh(scores / cap)` before the mask (Gemma 2's
/// `attn_logit_softcapping`; the opset-23 attribute applies it there). Writes the present
/// key/value to the given names and returns the attention output `[batch, seq, q_heads *
/// head_dim]`.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    b: &mut GraphBuilder,
    scope: &str,
    qkv: [&str; 3],
    mask: &str,
    past: [&str; 2],
    present: [&str; 2],
    heads: Heads,
    scale: Option<f32>,
    softcap: Option<f32>,
) -> String {
    let mut attrs = vec![
        Attr::int("is_causal", 0),
        Attr::int("kv_num_heads", heads.kv as i64),
        Attr::int("q_num_heads", heads.q as i64),
    ];
    attrs.extend(score_attrs(scale, softcap));
    let out = format!("{scope}/Attention/out");
    b.node_named(
        &format!("{scope}/Attention"),
        "Attention",
        &[qkv[0], qkv[1], qkv[2], mask, past[0], past[1]],
        attrs,
        &[&out, present[0], present[1]],
    );
    out
}

/// `Attention`'s `scale` and `softcap` attributes, each only when the model sets it (absent:
/// `1 / sqrt(head_dim)` and no cap), shared by the dynamic and static cache forms.
pub(crate) fn score_attrs(scale: Option<f32>, softcap: Option<f32>) -> Vec<Attr> {
    let scale = scale.map(|v| Attr::float("scale", v));
    let softcap = softcap.map(|v| Attr::float("softcap", v));
    scale.into_iter().chain(softcap).collect()
}

/// Opset-24 `Attention` of an encoder: every query sees every key the padding mask keeps
/// (`is_causal = 0`, no KV cache), default scale `1 / sqrt(head_dim)`. `mask` is boolean,
/// broadcastable to `[batch, heads, seq, seq]` (the `[batch, 1, 1, seq]` key padding mask).
/// Returns the attention output `[batch, seq, heads * head_dim]`.
pub fn bidirectional_attention(b: &mut GraphBuilder, scope: &str, qkv: [&str; 3], mask: &str, heads: Heads) -> String {
    let attrs = vec![
        Attr::int("is_causal", 0),
        Attr::int("kv_num_heads", heads.kv as i64),
        Attr::int("q_num_heads", heads.q as i64),
    ];
    b.op(&format!("{scope}/Attention"), "Attention", &[qkv[0], qkv[1], qkv[2], mask], attrs)
}

/// Attention with sinks (gpt-oss) in standard ONNX: each query head `h` has a learned logit
/// `sinks[h]` that joins every softmax row as one more column and is dropped after the
/// softmax, so it takes probability mass without adding a value. ONNX `Attention` has no such
/// input, so the block is written out: q/k/v split into heads, the cache extended with
/// `Concat` (written to the present names), grouped scores `[batch, kv, q / kv, seq, total]`
/// (no key/value repeat), `Where(mask, scores, -inf)`, the sink column `Concat`ed, `Softmax`,
/// the column `Slice`d off, the values' `MatMul` and the heads merged back. A query that sees
/// no key (a left-padded row) puts all its mass on the sink and returns zeros, never NaN.
///
/// `sinks` is the `[q_heads]` initializer (reshaped in the graph to `[1, kv, q / kv, 1, 1]`:
/// query head `h` reads key/value head `h / (q / kv)`, as transformers' `repeat_kv`). `mask` is
/// the boolean `[batch, 1, seq, total]` mask of [`super::mask::causal_padding_mask`];
/// `token_dims` the `[batch, seq]` dims of the token input. Returns `[batch, seq, q_heads *
/// head_dim]`.
#[allow(clippy::too_many_arguments)]
pub fn sink_attention(
    b: &mut GraphBuilder,
    scope: &str,
    qkv: [&str; 3],
    mask: &str,
    past: [&str; 2],
    present: [&str; 2],
    heads: Heads,
    scale: f32,
    sinks: &str,
    token_dims: Vec<ir::Dim>,
) -> String {
    let s = format!("{scope}/sink_attention");
    let (hq, hkv, d) = (heads.q as i64, heads.kv as i64, heads.head_dim as i64);
    let group = hq / hkv;
    let split = |b: &mut GraphBuilder, name: &str, x: &str, n: i64| -> String {
        let shape = b.const_i64_1d(&format!("{s}/{name}_heads_shape"), &[0, 0, n, d]);
        let x = b.op(&format!("{s}/{name}_heads/Reshape"), "Reshape", &[x, &shape], vec![]);
        b.op(&format!("{s}/{name}_heads/Transpose"), "Transpose", &[&x], vec![Attr::ints("perm", &[0, 2, 1, 3])])
    };
    let q = split(b, "q", qkv[0], hq);
    let k = split(b, "k", qkv[1], hkv);
    let v = split(b, "v", qkv[2], hkv);
    b.node_named(&format!("{s}/key_cache/Concat"), "Concat", &[past[0], &k], vec![Attr::int("axis", 2)], &[present[0]]);
    b.node_named(&format!("{s}/value_cache/Concat"), "Concat", &[past[1], &v], vec![Attr::int("axis", 2)], &[present[1]]);
    // q [batch, hq, seq, d] -> [batch, kv, group, seq, d]; keys [batch, kv, 1, d, total].
    let grouped = b.const_i64_1d(&format!("{s}/grouped_shape"), &[0, hkv, group, -1, d]);
    let q = b.op(&format!("{s}/q_grouped"), "Reshape", &[&q, &grouped], vec![]);
    let axis2 = b.const_i64_1d(&format!("{s}/group_axis"), &[2]);
    let kt = b.op(&format!("{s}/key_t"), "Transpose", &[present[0]], vec![Attr::ints("perm", &[0, 1, 3, 2])]);
    let kt = b.op(&format!("{s}/key_grouped"), "Unsqueeze", &[&kt, &axis2], vec![]);
    let scores = b.op(&format!("{s}/scores/MatMul"), "MatMul", &[&q, &kt], vec![]);
    let float = b.float;
    let scale = b.initializer(&format!("{s}/scale"), ir::Recipe::from_f32(format!("{s}/scale = {scale}"), vec![], &[scale]).cast(float));
    let scores = b.op(&format!("{s}/scores/Mul"), "Mul", &[&scores, &scale], vec![]);
    // The mask [batch, 1, seq, total] -> [batch, 1, 1, seq, total].
    let axis1 = b.const_i64_1d(&format!("{s}/mask_axis"), &[1]);
    let mask = b.op(&format!("{s}/mask_grouped"), "Unsqueeze", &[mask, &axis1], vec![]);
    let neg_inf = b.initializer(&format!("{s}/neg_inf"), ir::Recipe::from_f32(format!("{s}/neg_inf"), vec![], &[f32::NEG_INFINITY]).cast(float));
    let masked = b.op(&format!("{s}/scores/Where"), "Where", &[&mask, &scores, &neg_inf], vec![]);
    // The sink column [batch, kv, group, seq, 1].
    let sink_shape = b.const_i64_1d(&format!("{s}/sinks_shape"), &[1, hkv, group, 1, 1]);
    let sinks = b.op(&format!("{s}/sinks/Reshape"), "Reshape", &[sinks, &sink_shape], vec![]);
    // The column's shape from the first score column (no int64 Concat, which not every table
    // claims).
    let (first, one, last) = (b.const_i64_1d(&format!("{s}/column/start"), &[0]), b.const_i64_1d(&format!("{s}/column/end"), &[1]), b.const_i64_1d(&format!("{s}/column/axis"), &[-1]));
    let column = b.op(&format!("{s}/column"), "Slice", &[&scores, &first, &one, &last], vec![]);
    let column = b.op(&format!("{s}/sinks/shape"), "Shape", &[&column], vec![]);
    let sinks = b.op(&format!("{s}/sinks/Expand"), "Expand", &[&sinks, &column], vec![]);
    let combined = b.op(&format!("{s}/with_sinks"), "Concat", &[&masked, &sinks], vec![Attr::int("axis", -1)]);
    let probs = b.op(&format!("{s}/Softmax"), "Softmax", &[&combined], vec![Attr::int("axis", -1)]);
    let (start, end, last) = (b.const_i64_1d(&format!("{s}/drop/start"), &[0]), b.const_i64_1d(&format!("{s}/drop/end"), &[-1]), b.const_i64_1d(&format!("{s}/drop/axis"), &[-1]));
    let probs = b.op(&format!("{s}/drop_sinks"), "Slice", &[&probs, &start, &end, &last], vec![]);
    let values = b.op(&format!("{s}/value_grouped"), "Unsqueeze", &[present[1], &axis2], vec![]);
    let y = b.op(&format!("{s}/values/MatMul"), "MatMul", &[&probs, &values], vec![]);
    // [batch, kv, group, seq, d] -> [batch, hq, seq, d] -> [batch, seq, hq * d].
    let heads_shape = b.const_i64_1d(&format!("{s}/merge_shape"), &[0, hq, -1, d]);
    let y = b.op(&format!("{s}/merge_heads/Reshape"), "Reshape", &[&y, &heads_shape], vec![]);
    let y = b.op(&format!("{s}/merge_heads/Transpose"), "Transpose", &[&y], vec![Attr::ints("perm", &[0, 2, 1, 3])]);
    let out_shape = b.const_i64_1d(&format!("{s}/out_shape"), &[0, 0, hq * d]);
    let out = b.op(&format!("{scope}/sink_attention"), "Reshape", &[&y, &out_shape], vec![]);
    // `[batch, seq, q_heads * head_dim]`, recorded: the rules downstream (skip norms) check the
    // residual's shape, which the Reshapes hide from inference.
    let mut shape = token_dims;
    shape.push(ir::Dim::Fixed(hq * d));
    b.annotate(&out, b.float, shape);
    out
}
