//! The decoder family tables. Adding a Llama-like model is adding a table here (and listing it
//! in [`super::DECODERS`]); see docs/adding-a-model.md.

use super::family::*;
use crate::components::linear::WeightLayout;
use crate::components::norm::NormKind;

/// Llama-style attention names, shared by most families.
const SEPARATE_QKV: AttentionNames =
    AttentionNames::Separate { q: "self_attn.q_proj", k: "self_attn.k_proj", v: "self_attn.v_proj" };
const GATED_MLP: MlpNames = MlpNames::Gated { gate: "mlp.gate_proj", up: "mlp.up_proj", down: "mlp.down_proj" };

/// Buffers older Llama-family checkpoints saved alongside the weights.
const ROTARY_BUFFERS: &[Unused] = &[Unused {
    suffix: "rotary_emb.inv_freq",
    reason: "a RoPE buffer; the cos/sin caches are recomputed from config.json",
}];

const LLAMA_NAMES: NameTable = NameTable {
    embed_tokens: "model.embed_tokens.weight",
    embed_positions: None,
    layer: "model.layers.{i}",
    attention: SEPARATE_QKV,
    o_proj: "self_attn.o_proj",
    qk_norm: None,
    input_norm: "input_layernorm",
    post_attention_norm: "post_attention_layernorm",
    mlp: GATED_MLP,
    final_norm: "model.norm",
    lm_head: "lm_head",
};

const LLAMA_LAYOUT: Layout = Layout {
    weights: WeightLayout::Linear,
    norm: NormKind::Rms,
    positions: Positions::Rotary,
    qkv_bias: Bias::Config("attention_bias"),
    o_bias: Bias::Config("attention_bias"),
    mlp_bias: Bias::Config("mlp_bias"),
    tie_default: false,
};

pub const LLAMA: DecoderFamily =
    DecoderFamily { model_types: &["llama"], names: LLAMA_NAMES, layout: LLAMA_LAYOUT, optional_prefix: None, unused: ROTARY_BUFFERS };

/// Mistral: Llama's layout without biases; `head_dim` may differ from hidden / heads, and
/// `sliding_window` applies as given.
pub const MISTRAL: DecoderFamily = DecoderFamily {
    model_types: &["mistral"],
    names: LLAMA_NAMES,
    layout: Layout { qkv_bias: Bias::Never, o_bias: Bias::Never, mlp_bias: Bias::Never, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
};

/// Qwen2: bias on q/k/v (never on o_proj).
pub const QWEN2: DecoderFamily = DecoderFamily {
    model_types: &["qwen2"],
    names: LLAMA_NAMES,
    layout: Layout { qkv_bias: Bias::Always, o_bias: Bias::Never, mlp_bias: Bias::Never, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
};

/// Qwen3: per-head RMSNorm on q and k before RoPE; biases follow `attention_bias`.
pub const QWEN3: DecoderFamily = DecoderFamily {
    model_types: &["qwen3"],
    names: NameTable { qk_norm: Some(("self_attn.q_norm", "self_attn.k_norm")), ..LLAMA_NAMES },
    layout: Layout { mlp_bias: Bias::Never, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
};

/// Phi-3: fused `qkv_proj` and `gate_up_proj`, no biases.
pub const PHI3: DecoderFamily = DecoderFamily {
    model_types: &["phi3"],
    names: NameTable {
        attention: AttentionNames::Fused { qkv: "self_attn.qkv_proj" },
        mlp: MlpNames::GatedFused { gate_up: "mlp.gate_up_proj", down: "mlp.down_proj" },
        ..LLAMA_NAMES
    },
    layout: Layout { qkv_bias: Bias::Never, o_bias: Bias::Never, mlp_bias: Bias::Never, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
};

/// GPT-2: learned positions, LayerNorm with bias, Conv1D weights (`[in, out]`), fused
/// `c_attn`, biases everywhere, tied `lm_head`.
pub const GPT2: DecoderFamily = DecoderFamily {
    model_types: &["gpt2"],
    names: NameTable {
        embed_tokens: "transformer.wte.weight",
        embed_positions: Some("transformer.wpe.weight"),
        layer: "transformer.h.{i}",
        attention: AttentionNames::Fused { qkv: "attn.c_attn" },
        o_proj: "attn.c_proj",
        qk_norm: None,
        input_norm: "ln_1",
        post_attention_norm: "ln_2",
        mlp: MlpNames::Plain { up: "mlp.c_fc", down: "mlp.c_proj" },
        final_norm: "transformer.ln_f",
        lm_head: "lm_head",
    },
    layout: Layout {
        weights: WeightLayout::Conv1D,
        norm: NormKind::Layer,
        positions: Positions::Learned,
        qkv_bias: Bias::Always,
        o_bias: Bias::Always,
        mlp_bias: Bias::Always,
        tie_default: true,
    },
    optional_prefix: Some("transformer."),
    unused: &[
        Unused { suffix: ".attn.bias", reason: "GPT-2's causal-mask buffer; the graph builds its own mask" },
        Unused { suffix: ".attn.masked_bias", reason: "GPT-2's mask fill-value buffer; the graph builds its own mask" },
    ],
};
