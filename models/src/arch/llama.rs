//! The Llama family: pre-norm decoder layers with RMSNorm, rotary q/k, grouped-query attention
//! and a SwiGLU MLP.

use super::DecoderIo;
use crate::components::attention::{attention, Heads};
use crate::components::embedding::token_embedding;
use crate::components::linear::{linear, LinearWeights};
use crate::components::mask::causal_padding_mask;
use crate::components::mlp::{swiglu, swiglu_weights};
use crate::components::norm::rms_norm;
use crate::components::rope::RopeCache;
use crate::{Checkpoint, GraphBuilder, Result};

/// Checkpoint tensor names, relative to the model (`embed_tokens`, `norm`, `lm_head`) or to
/// one layer (`layer` with `{i}`, then the per-layer scopes).
pub struct NameTable {
    pub embed_tokens: &'static str,
    pub layer: &'static str,
    pub q_proj: &'static str,
    pub k_proj: &'static str,
    pub v_proj: &'static str,
    pub o_proj: &'static str,
    pub input_norm: &'static str,
    pub post_attention_norm: &'static str,
    pub mlp: &'static str,
    pub final_norm: &'static str,
    pub lm_head: &'static str,
}

/// One declarative description of a Llama-like family.
pub struct DecoderFamily {
    pub model_types: &'static [&'static str],
    pub names: NameTable,
}

pub const LLAMA: DecoderFamily = DecoderFamily {
    model_types: &["llama"],
    names: NameTable {
        embed_tokens: "model.embed_tokens.weight",
        layer: "model.layers.{i}",
        q_proj: "self_attn.q_proj",
        k_proj: "self_attn.k_proj",
        v_proj: "self_attn.v_proj",
        o_proj: "self_attn.o_proj",
        input_norm: "input_layernorm",
        post_attention_norm: "post_attention_layernorm",
        mlp: "mlp",
        final_norm: "model.norm",
        lm_head: "lm_head",
    },
};

impl DecoderFamily {
    pub(crate) fn build(&self, b: &mut GraphBuilder, ckpt: &Checkpoint, io: &DecoderIo) -> Result<String> {
        let c = &ckpt.config;
        let n = &self.names;
        let heads = Heads { q: c.num_attention_heads, kv: c.num_key_value_heads, head_dim: c.head_dim };
        let (hidden, q_dim, kv_dim) = (c.hidden_size, heads.q * heads.head_dim, heads.kv * heads.head_dim);

        let mut h = token_embedding(b, ckpt, n.embed_tokens, &io.input_ids, c.vocab_size, hidden)?;
        let mask = causal_padding_mask(b, &io.input_ids, &io.attention_mask, None);
        let rope = RopeCache::build(b, &c.rope, c.head_dim, c.rotary_dim(), c.max_position_embeddings);

        for i in 0..c.num_hidden_layers {
            let layer = n.layer.replace("{i}", &i.to_string());
            let s = |part: &str| format!("{layer}.{part}");
            let x = rms_norm(b, ckpt, &s(n.input_norm), &h, hidden, c.rms_norm_eps)?;
            let proj = |b: &mut GraphBuilder, part: &str, out: usize| -> Result<String> {
                let w = LinearWeights::torch(ckpt, b, &s(part), hidden, out, c.attention_bias)?;
                Ok(linear(b, &s(part), &x, w))
            };
            let q = proj(b, n.q_proj, q_dim)?;
            let k = proj(b, n.k_proj, kv_dim)?;
            let v = proj(b, n.v_proj, kv_dim)?;
            let q = rope.apply(b, &s("self_attn.q_rotary"), &q, heads.q, &io.position_ids);
            let k = rope.apply(b, &s("self_attn.k_rotary"), &k, heads.kv, &io.position_ids);
            let (past_k, past_v) = &io.past[i];
            let (present_k, present_v) = &io.present[i];
            let y = attention(b, &s("self_attn"), [&q, &k, &v], &mask, [past_k, past_v], [present_k, present_v], heads);
            let o = LinearWeights::torch(ckpt, b, &s(n.o_proj), q_dim, hidden, false)?;
            let o = linear(b, &s(n.o_proj), &y, o);
            h = b.op(&s("attn_residual/Add"), "Add", &[&h, &o], vec![]);

            let x = rms_norm(b, ckpt, &s(n.post_attention_norm), &h, hidden, c.rms_norm_eps)?;
            let (gate, up, down) = swiglu_weights(ckpt, b, &s(n.mlp), hidden, c.intermediate_size, c.mlp_bias)?;
            let m = swiglu(b, &s(n.mlp), &x, gate, up, down)?;
            h = b.op(&s("mlp_residual/Add"), "Add", &[&h, &m], vec![]);
        }

        let h = rms_norm(b, ckpt, n.final_norm, &h, hidden, c.rms_norm_eps)?;
        let head = if c.tie_word_embeddings && !ckpt.has(&format!("{}.weight", n.lm_head)) {
            // Tied: the embedding matrix [vocab, hidden] read again, transposed.
            let w = ckpt.tensor(n.embed_tokens, &[c.vocab_size, hidden])?.transpose(vec![1, 0]).cast(b.float);
            LinearWeights { weight: w, bias: None }
        } else {
            LinearWeights::torch(ckpt, b, n.lm_head, hidden, c.vocab_size, false)?
        };
        Ok(linear(b, n.lm_head, &h, head))
    }
}
