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
