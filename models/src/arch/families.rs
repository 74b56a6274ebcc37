//! The decoder family tables. Adding a Llama-like model is adding a table here (and listing it
//! in [`super::DECODERS`]); see docs/adding-a-model.md.

use super::encoder::{EncoderFamily, EncoderNames, EncoderPositions};
use super::family::*;
use crate::components::linear::WeightLayout;
use crate::components::norm::NormKind;
use crate::config::LatentSizes;

/// Llama-style attention names, shared by most families.
const SEPARATE_QKV: AttentionNames =
    AttentionNames::Separate { q: "self_attn.q_proj", k: "self_attn.k_proj", v: "self_attn.v_proj" };
const GATED_MLP: MlpNames = MlpNames::Gated { gate: "mlp.gate_proj", up: "mlp.up_proj", down: "mlp.down_proj" };

/// Buffers older Llama-family checkpoints saved alongside the weights.
const ROTARY_BUFFERS: &[Unused] = &[Unused {
    prefix: "",
    suffix: "rotary_emb.inv_freq",
    reason: "a RoPE buffer; the cos/sin caches are recomputed from config.json",
}];

/// Llama's pre-norm blocks: a norm before attention and one before the MLP.
const PRE_NORMS: BlockNorms = BlockNorms {
    before_attention: Some("input_layernorm"),
    after_attention: None,
    before_mlp: Some("post_attention_layernorm"),
    after_mlp: None,
};

const LLAMA_NAMES: NameTable = NameTable {
    embed_tokens: "model.embed_tokens.weight",
    embed_positions: None,
    layer: "model.layers.{i}",
    attention: SEPARATE_QKV,
    o_proj: "self_attn.o_proj",
    qk_norm: None,
    norms: PRE_NORMS,
    mlp: GATED_MLP,
    sinks: None,
    output_gate: None,
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
    norm_eps: NormEps::Generic,
    activation: None,
    rotary: RotaryPairs::Halves,
    partial_rotary_default: 1.0,
    head_dim_default: None,
    block: BlockShape::Sequential,
    block_when: None,
    positions_when: None,
    clip_qkv: None,
    lm_head_bias: Bias::Never,
    rope_default: RopeDefault { theta: 10000.0, scaling: None, renamed: &[], ntk_alpha: false },
    key_defaults: &[],
    key_aliases: &[],
    per_layer_keys: &[],
    ignored_keys: &[],
    prediction_layers: None,
    clip_after_qk_norm: false,
    rotary_dims_key: None,
    after_norms_when: None,
    config_rule: None,
    after_mlp_norm_sparse_only: false,
    rope_reversed: false,
    embedding_norm: None,
    final_norm: FinalNorm::Always,
    embed_projection: None,
};

pub const LLAMA: DecoderFamily = DecoderFamily {
    model_types: &["llama"],
    names: LLAMA_NAMES,
    layout: LLAMA_LAYOUT,
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// EXAONE 3 / 3.5 (`ExaoneConfig`; transformers builds it as Llama, renaming the weights on
/// load): Llama's blocks under GPT-2-style names (`transformer.wte`, `transformer.h.{i}`,
/// `attn.attention.{q,k,v,out}_proj`, `ln_1` / `ln_2` RMSNorms, `mlp.c_fc_0` gate, `c_fc_1`
/// up, `c_proj` down, `transformer.ln_f`), its config keys `num_layers`, `layer_norm_epsilon`,
/// `activation_function`; `rms_norm_eps` 1e-5 (under `layer_norm_epsilon` as published), RoPE
/// base 500000, 8 key/value heads, bos 1, eos 361, pad 0 and 4096 positions when absent.
pub const EXAONE: DecoderFamily = DecoderFamily {
    model_types: &["exaone"],
    names: NameTable {
        embed_tokens: "transformer.wte.weight",
        layer: "transformer.h.{i}",
        attention: AttentionNames::Separate { q: "attn.attention.q_proj", k: "attn.attention.k_proj", v: "attn.attention.v_proj" },
        o_proj: "attn.attention.out_proj",
        norms: BlockNorms { before_attention: Some("ln_1"), before_mlp: Some("ln_2"), ..PRE_NORMS },
        mlp: MlpNames::Gated { gate: "mlp.c_fc_0", up: "mlp.c_fc_1", down: "mlp.c_proj" },
        final_norm: "transformer.ln_f",
        ..LLAMA_NAMES
    },
    layout: Layout {
        rope_default: RopeDefault { theta: 500_000.0, ..LLAMA_LAYOUT.rope_default },
        key_aliases: &[("num_layers", "num_hidden_layers")],
        key_defaults: &[
            ("rms_norm_eps", KeyDefault::Number(1e-5)),
            ("num_key_value_heads", KeyDefault::Count(8)),
            ("max_position_embeddings", KeyDefault::Count(4096)),
            ("bos_token_id", KeyDefault::Count(1)),
            ("eos_token_id", KeyDefault::Count(361)),
            ("pad_token_id", KeyDefault::Count(0)),
        ],
        ..LLAMA_LAYOUT
    },
    ..LLAMA
};

/// InternLM3 (`InternLM3Config`; transformers builds it as Llama): Llama under its own bias keys
/// (`qkv_bias` for q/k/v/o, `bias` for the MLP, which must agree: [`internlm3_config`]), a
/// 128-wide head, 2 key/value heads,
/// `rms_norm_eps` 1e-5, 32768 positions, bos 1, eos and pad 2 when absent. Its published RoPE is
/// dynamic NTK (the default frequencies within the positions; docs/models.md).
pub const INTERNLM3: DecoderFamily = DecoderFamily {
    model_types: &["internlm3"],
    layout: Layout {
        head_dim_default: Some(128),
        key_aliases: &[("qkv_bias", "attention_bias"), ("bias", "mlp_bias")],
        config_rule: Some(internlm3_config),
        key_defaults: &[
            ("num_key_value_heads", KeyDefault::Count(2)),
            ("rms_norm_eps", KeyDefault::Number(1e-5)),
            ("max_position_embeddings", KeyDefault::Count(32768)),
            ("bos_token_id", KeyDefault::Count(1)),
            ("eos_token_id", KeyDefault::Count(2)),
            ("pad_token_id", KeyDefault::Count(2)),
        ],
        ..LLAMA_LAYOUT
    },
    ..LLAMA
};

/// InternLM3's config class refuses q/k/v biases that differ from the MLP's (`qkv_bias` and
/// `bias`, or their generic spellings; both false when absent): transformers' Llama puts one
/// switch on q/k/v/o, where the original model biased o_proj by `bias`.
fn internlm3_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    let flag = |keys: [&'static str; 2]| keys.into_iter().find_map(|k| map.get(k).filter(|v| !v.is_null()).map(|v| (k, v.clone())));
    let truth = |v: &Option<(&str, Value)>| v.as_ref().is_some_and(|(_, v)| v.as_bool() == Some(true));
    let (qkv, mlp) = (flag(["attention_bias", "qkv_bias"]), flag(["mlp_bias", "bias"]));
    if truth(&qkv) != truth(&mlp) {
        let say = |v: &Option<(&str, Value)>, absent: &str| v.as_ref().map_or(format!("`{absent}` absent (false)"), |(k, v)| format!("`{k}` {v}"));
        return Err(format!("{} and {} differ: InternLM3's q/k/v and MLP biases must agree (transformers refuses this config)", say(&qkv, "qkv_bias"), say(&mlp, "bias")));
    }
    Ok(())
}

/// IQuestCoder refuses what its config class refuses (`IQuestCoderConfig.validate_architecture`):
/// a `clip_qkv` and sliding windows.
fn iquestcoder_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    if let Some(v) = map.get("clip_qkv").filter(|v| !v.is_null()) {
        return Err(format!("key `clip_qkv` is {v}; IQuestCoder has no q/k/v clipping (transformers refuses the key)"));
    }
    // Refused when truthy, as the class tests it (`getattr(self, "use_sliding_window", False)`).
    if let Some(v) = map.get("use_sliding_window").filter(|v| !matches!(v, Value::Null | Value::Bool(false)) && v.as_f64() != Some(0.0) && v.as_str() != Some("")) {
        return Err(format!("key `use_sliding_window` is {v}; IQuestCoder has no sliding windows (transformers refuses it)"));
    }
    Ok(())
}

/// IQuestCoder (`IQuestCoderConfig`; transformers builds it as Llama): Llama with a 128-wide head,
/// 8 key/value heads, `rms_norm_eps` 1e-5, 131072 positions, bos 1 and eos 2 when absent.
pub const IQUESTCODER: DecoderFamily = DecoderFamily {
    model_types: &["iquestcoder"],
    layout: Layout {
        head_dim_default: Some(128),
        key_defaults: &[
            ("num_key_value_heads", KeyDefault::Count(8)),
            ("rms_norm_eps", KeyDefault::Number(1e-5)),
            ("max_position_embeddings", KeyDefault::Count(131072)),
            ("bos_token_id", KeyDefault::Count(1)),
            ("eos_token_id", KeyDefault::Count(2)),
        ],
        config_rule: Some(iquestcoder_config),
        ..LLAMA_LAYOUT
    },
    ..LLAMA
};

/// Mistral: Llama's layout without biases; `head_dim` may differ from hidden / heads, and
/// `sliding_window` applies as given to every layer (4096 when absent, `MistralConfig`'s
/// default; the published configs state it, most as null; `MistralModel` reads no
/// `layer_types`), 131072 positions when absent.
pub const MISTRAL: DecoderFamily = DecoderFamily {
    model_types: &["mistral"],
    names: LLAMA_NAMES,
    layout: Layout {
        qkv_bias: Bias::Never,
        o_bias: Bias::Never,
        mlp_bias: Bias::Never,
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(131072))],
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: LayerKinds { default_window: Some(4096), reads_layer_types: false, ..UNIFORM_LAYERS },
};

/// Ministral (Ministral-8B-Instruct-2410, `MinistralConfig`): Mistral's layers (no biases,
/// `head_dim` apart, window 4096 and 131072 positions when absent) with each layer's window from
/// `layer_types` (without it every layer slides when there is a window, as the config class
/// derives it).
pub const MINISTRAL: DecoderFamily = DecoderFamily { model_types: &["ministral"], layers: LayerKinds { default_window: Some(4096), ..UNIFORM_LAYERS }, ..MISTRAL };

/// Code World Model's RoPE when config.json gives none (`CwmConfig`): Llama 3's scaling x16 over
/// 8192 positions at theta 1e6.
const CWM_ROPE: &str = r#"{"rope_type":"llama3","rope_theta":1000000.0,"factor":16.0,"high_freq_factor":4.0,"low_freq_factor":1.0,"original_max_position_embeddings":8192}"#;

/// Code World Model (`CwmConfig`, Meta's CWM): Llama's blocks without biases, head_dim 128 when
/// absent, a window of `sliding_window` (8192) on the layers `layer_types` makes slide, else
/// three of every four with the first of each four full (layer `i` full when `i % 4 == 0`),
/// Llama 3's RoPE scaling by default, 131072 positions, `rms_norm_eps` 1e-5.
pub const CWM: DecoderFamily = DecoderFamily {
    model_types: &["cwm"],
    names: LLAMA_NAMES,
    layout: Layout {
        head_dim_default: Some(128),
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(131072))],
        rope_default: RopeDefault { theta: 1000000.0, scaling: Some(CWM_ROPE), renamed: &[], ntk_alpha: false },
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-5) }),
        ..MISTRAL.layout
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: LayerKinds { full_every: Some(FullEvery { keys: &[], default: 4, first: true }), default_window: Some(8192), ..UNIFORM_LAYERS },
};

/// Ministral 3's RoPE when config.json gives none (`Ministral3Config`): theta 1e6 (whatever a
/// top-level `rope_theta` says: the class fills the whole object), YaRN x16 over 16384 positions
/// with `mscale` / `mscale_all_dim` 1, and the query scaling's beta 0.1.
const MINISTRAL3_ROPE: &str = r#"{"rope_type":"yarn","rope_theta":1000000.0,"factor":16.0,"original_max_position_embeddings":16384,"beta_fast":32.0,"beta_slow":1.0,"mscale":1.0,"mscale_all_dim":1.0,"llama_4_scaling_beta":0.1}"#;

/// Ministral 3 (the text model of Ministral 3 / Mistral 3): Mistral's layers (no biases, the
/// window when `sliding_window` is set), head_dim 128 when absent, RoPE theta 1e6 with YaRN by
/// default, and queries scaled by position (`get_llama_4_attn_scale`: `llama_4_scaling_beta`
/// and `original_max_position_embeddings` of the RoPE parameters).
pub const MINISTRAL3: DecoderFamily = DecoderFamily {
    model_types: &["ministral3"],
    names: LLAMA_NAMES,
    layout: Layout {
        head_dim_default: Some(128),
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-5) }),
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(262144))],
        rope_default: RopeDefault { theta: 1000000.0, scaling: Some(MINISTRAL3_ROPE), renamed: &[], ntk_alpha: false },
        ..MISTRAL.layout
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: Scaling { query_position: Some(QueryPositionScale { beta: "llama_4_scaling_beta", original: "original_max_position_embeddings" }), ..NO_SCALING },
    layers: UNIFORM_LAYERS,
};

/// The Qwen configs' `use_sliding_window: False`: a `sliding_window` without the switch is no
/// window (the released configs all say `false`; a hand-written one may leave it out).
const QWEN_WINDOW_OFF: &[(&str, KeyDefault)] = &[("use_sliding_window", KeyDefault::Flag(false))];

/// The Qwen families' layers: the generic window rules with `use_sliding_window` and
/// `max_window_layers` read.
const QWEN_LAYERS: LayerKinds = LayerKinds { qwen_window_keys: true, ..UNIFORM_LAYERS };

/// Qwen2: bias on q/k/v (never on o_proj).
pub const QWEN2: DecoderFamily = DecoderFamily {
    // `qwen2_5_vl_text`: Qwen2.5-VL's text model (its `text_config`), a Qwen2 decoder with
    // multimodal RoPE (`mrope_section`).
    model_types: &["qwen2", "qwen2_5_vl_text"],
    names: LLAMA_NAMES,
    layout: Layout { qkv_bias: Bias::Always, o_bias: Bias::Never, mlp_bias: Bias::Never, key_defaults: QWEN_WINDOW_OFF, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: QWEN_LAYERS,
};

/// Qwen3: per-head RMSNorm on q and k before RoPE; biases follow `attention_bias`.
pub const QWEN3: DecoderFamily = DecoderFamily {
    // `qwen3_vl_text`: Qwen3-VL's text model (its `text_config`), a Qwen3 decoder with
    // interleaved multimodal RoPE (`mrope_interleaved`).
    model_types: &["qwen3", "qwen3_vl_text"],
    names: NameTable { qk_norm: Some(PER_HEAD_QK_NORM), ..LLAMA_NAMES },
    layout: Layout { mlp_bias: Bias::Never, key_defaults: QWEN_WINDOW_OFF, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: QWEN_LAYERS,
};

/// Mixtral's (and GraniteMoE's) mixture keys: `num_local_experts` experts (default 8) of
/// `intermediate_size`, top `num_experts_per_tok` (default 2) always renormalized, every layer
/// sparse, softmax routing, gated experts.
const MIXTRAL_KEYS: MoeKeys = MoeKeys {
    experts: &["num_local_experts"],
    experts_default: 8,
    top_k_default: 2,
    normalize: TopKNorm::Always,
    intermediate: &[],
    intermediate_default: None,
    sparse: SparseLayers::All,
    routing: Routing::SoftmaxTopK,
    activation: ExpertActivation::Gated,
};

/// Mixtral: Mistral's attention; every layer's MLP is `num_local_experts` gated experts
/// (`w1` gate, `w3` up, `w2` down) routed top-`num_experts_per_tok` with the top-k
/// probabilities always renormalized (transformers' `MixtralSparseMoeBlock`).
/// Mixtral's mixture names (`block_sparse_moe.gate`, experts `w1`/`w3`/`w2`), which PhiMoE and
/// MiniMax-M2 publish too.
const MIXTRAL_MOE: MoeNames = MoeNames {
    router: "block_sparse_moe.gate",
    router_bias: false,
    experts: ExpertNames::PerExpert { expert: "block_sparse_moe.experts.{e}", gate: "w1", up: "w3", down: "w2" },
    shared: None,
    dense: None,
    keys: MIXTRAL_KEYS,
};

pub const MIXTRAL: DecoderFamily = DecoderFamily {
    model_types: &["mixtral"],
    names: NameTable {
        mlp: MlpNames::Experts(MIXTRAL_MOE),
        ..LLAMA_NAMES
    },
    layout: Layout { qkv_bias: Bias::Never, o_bias: Bias::Never, mlp_bias: Bias::Never, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    // MixtralModel applies `sliding_window`, when set, to every layer; no `layer_types`.
    layers: LayerKinds { reads_layer_types: false, ..UNIFORM_LAYERS },
};

/// Qwen's MoE layer choice: layer `i` is sparse when `(i + 1) % decoder_sparse_step == 0` and
/// it is not in `mlp_only_layers`; the others are a dense MLP of `intermediate_size`.
const QWEN_SPARSE: SparseLayers = SparseLayers::Step { step_key: "decoder_sparse_step", dense_key: "mlp_only_layers" };

/// Qwen2-MoE: Qwen2's attention (q/k/v bias as `qkv_bias` says, default true); `num_experts` experts of `moe_intermediate_size`
/// with `norm_topk_prob` (default false), plus a shared expert of
/// `shared_expert_intermediate_size` scaled by `sigmoid(shared_expert_gate(x))`
/// (transformers' `Qwen2MoeSparseMoeBlock`; defaults from `Qwen2MoeConfig`).
pub const QWEN2_MOE: DecoderFamily = DecoderFamily {
    model_types: &["qwen2_moe"],
    names: NameTable {
        mlp: MlpNames::Experts(MoeNames {
            router: "mlp.gate",
            router_bias: false,
            experts: ExpertNames::PerExpert { expert: "mlp.experts.{e}", gate: "gate_proj", up: "up_proj", down: "down_proj" },
            shared: Some(SharedExpert {
                mlp: &MlpNames::Gated { gate: "mlp.shared_expert.gate_proj", up: "mlp.shared_expert.up_proj", down: "mlp.shared_expert.down_proj" },
                gate: Some("mlp.shared_expert_gate"),
                width: SharedWidth::Key("shared_expert_intermediate_size", 5632),
                combine: SharedCombine::Sum,
            }),
            dense: Some(&GATED_MLP),
            keys: MoeKeys {
                experts: &["num_experts", "num_local_experts"],
                experts_default: 60,
                top_k_default: 4,
                normalize: TopKNorm::Key("norm_topk_prob", false),
                intermediate: &["moe_intermediate_size"],
                intermediate_default: Some(1408),
                sparse: QWEN_SPARSE,
                routing: Routing::SoftmaxTopK,
                activation: ExpertActivation::Gated,
            },
        }),
        ..LLAMA_NAMES
    },
    layout: Layout { qkv_bias: Bias::ConfigOr("qkv_bias", true), o_bias: Bias::Never, mlp_bias: Bias::Never, key_defaults: QWEN_WINDOW_OFF, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: QWEN_LAYERS,
};

/// Qwen3-MoE: Qwen3's attention (per-head q/k norms); `num_experts` experts of
/// `moe_intermediate_size`, `norm_topk_prob` (default false), no shared expert
/// (transformers' `Qwen3MoeSparseMoeBlock`; defaults from `Qwen3MoeConfig`).
/// Qwen3-MoE's mixture (`Qwen3MoeConfig`'s defaults): the router `mlp.gate`, per-expert
/// weights, softmax top-k; the families built on it change keys and defaults.
const QWEN3_MOE_EXPERTS: MoeNames = MoeNames {
    router: "mlp.gate",
    router_bias: false,
    experts: ExpertNames::PerExpert { expert: "mlp.experts.{e}", gate: "gate_proj", up: "up_proj", down: "down_proj" },
    shared: None,
    dense: Some(&GATED_MLP),
    keys: MoeKeys {
        experts: &["num_experts", "num_local_experts"],
        experts_default: 128,
        top_k_default: 8,
        normalize: TopKNorm::Key("norm_topk_prob", false),
        intermediate: &["moe_intermediate_size"],
        intermediate_default: Some(768),
        sparse: QWEN_SPARSE,
        routing: Routing::SoftmaxTopK,
        activation: ExpertActivation::Gated,
    },
};

pub const QWEN3_MOE: DecoderFamily = DecoderFamily {
    model_types: &["qwen3_moe"],
    names: NameTable { qk_norm: Some(PER_HEAD_QK_NORM), mlp: MlpNames::Experts(QWEN3_MOE_EXPERTS), ..LLAMA_NAMES },
    layout: Layout { mlp_bias: Bias::Never, key_defaults: QWEN_WINDOW_OFF, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: QWEN_LAYERS,
};

/// Phi-3: fused `qkv_proj` and `gate_up_proj`, no biases.
pub const PHI3: DecoderFamily = DecoderFamily {
    model_types: &["phi3"],
    names: NameTable {
        attention: AttentionNames::Fused { qkv: "self_attn.qkv_proj" },
        mlp: MlpNames::GatedFused { gate_up: "mlp.gate_up_proj", down: "mlp.down_proj" },
        ..LLAMA_NAMES
    },
    layout: Layout {
        qkv_bias: Bias::Never,
        o_bias: Bias::Never,
        mlp_bias: Bias::Never,
        rope_default: RopeDefault { renamed: &[("su", "longrope"), ("yarn", "longrope")], ..LLAMA_LAYOUT.rope_default },
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: UNIFORM_LAYERS,
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
        norms: BlockNorms { before_attention: Some("ln_1"), after_attention: None, before_mlp: Some("ln_2"), after_mlp: None },
        mlp: MlpNames::Plain { up: "mlp.c_fc", down: "mlp.c_proj" },
        sinks: None,
        output_gate: None,
        final_norm: "transformer.ln_f",
        lm_head: "lm_head",
    },
    layout: Layout {
        weights: WeightLayout::Conv1D,
        norm: NormKind::Layer,
        // GPT2Config's default when config.json leaves the key out.
        norm_eps: NormEps::Key(Key { name: "layer_norm_epsilon", default: Some(1e-5) }),
        positions: Positions::Learned { offset: 0 },
        qkv_bias: Bias::Always,
        o_bias: Bias::Always,
        mlp_bias: Bias::Always,
        tie_default: true,
        ..LLAMA_LAYOUT
    },
    optional_prefix: Some("transformer."),
    unused: &[
        Unused { prefix: "", suffix: ".attn.bias", reason: "GPT-2's causal-mask buffer; the graph builds its own mask" },
        Unused { prefix: "", suffix: ".attn.masked_bias", reason: "GPT-2's mask fill-value buffer; the graph builds its own mask" },
    ],
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// OpenAI GPT's activation key `afn` as transformers' `ACT_FNS` maps it: `gelu` is the tanh
/// form (`gelu_new`), `swish` SiLU; `relu` and `silu` as they are. The MLP is 4 x `n_embd`.
fn openai_gpt_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    let afn = match map.get("afn") {
        None | Some(Value::Null) => "gelu".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => return Err(format!("key `afn` must be a string, found {v}")),
    };
    let act = match afn.as_str() {
        "gelu" => "gelu_new",
        "swish" | "silu" => "silu",
        "relu" => "relu",
        other => return Err(format!("key `afn` is `{other}`: OpenAI GPT's activations are `gelu` (the tanh form), `relu`, `silu` and `swish` (transformers' ACT_FNS)")),
    };
    map.insert("afn".into(), Value::from(act));
    // `MLP(4 * n_embd, config)`: no width key.
    if let Some(hidden) = map.get("n_embd").and_then(Value::as_u64).or(map.get("hidden_size").and_then(Value::as_u64)) {
        map.insert("intermediate_size".into(), Value::from(4 * hidden));
    }
    Ok(())
}

/// OpenAI GPT (`OpenAIGPTConfig`, openai-community/openai-gpt): GPT-2's weights (Conv1D
/// `[in, out]`, a fused biased `attn.c_attn`, biased `c_proj`, `mlp.c_fc` / `mlp.c_proj`) and
/// learned positions (`positions_embed`), in post-norm blocks (`ln_1(h + attn(h))`, then
/// `ln_2(h + mlp(h))`, [`BlockShape::PostNorm`]) with no final norm, the MLP 4 x `n_embd` wide
/// with `afn` ([`openai_gpt_config`]: `gelu` is the tanh form), the head tied; checkpoints saved
/// from the bare model lack `transformer.`. transformers runs it without a KV cache; the package
/// has one, which gives the same logits.
pub const OPENAI_GPT: DecoderFamily = DecoderFamily {
    model_types: &["openai-gpt"],
    names: NameTable {
        embed_tokens: "transformer.tokens_embed.weight",
        embed_positions: Some("transformer.positions_embed.weight"),
        ..GPT2.names
    },
    layout: Layout {
        block: BlockShape::PostNorm,
        final_norm: FinalNorm::Never,
        activation: Some(("afn", crate::Activation::GeluTanh)),
        norm_eps: NormEps::Key(Key { name: "layer_norm_epsilon", default: Some(1e-5) }),
        key_defaults: &[
            ("n_positions", KeyDefault::Count(512)),
            ("vocab_size", KeyDefault::Count(40478)),
            ("n_embd", KeyDefault::Count(768)),
            ("n_head", KeyDefault::Count(12)),
            ("n_layer", KeyDefault::Count(12)),
        ],
        config_rule: Some(openai_gpt_config),
        ..GPT2.layout
    },
    optional_prefix: Some("transformer."),
    unused: &[
        Unused { prefix: "", suffix: ".attn.bias", reason: "OpenAI GPT's causal-mask buffer (checkpoints saved before it was made non-persistent); the graph builds its own mask" },
        Unused { prefix: "", suffix: "position_ids", reason: "OpenAI GPT's position-index buffer (older checkpoints); the graph takes position_ids as an input" },
    ],
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// OPT's config switches this build does not follow, refused by key: weightless LayerNorms
/// (`layer_norm_elementwise_affine` false), no final norm in a pre-norm model
/// (`_remove_final_layer_norm`, a compatibility switch no published checkpoint sets). Post-norm
/// blocks (`do_layer_norm_before` false) and a projected embedding (`word_embed_proj_dim`),
/// OPT-350m's, are built.
fn opt_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    let flag = |k: &str, default: bool| map.get(k).and_then(Value::as_bool).unwrap_or(default);
    if !flag("layer_norm_elementwise_affine", true) {
        return Err("key `layer_norm_elementwise_affine` is false: OPT's LayerNorms without weights are not built".into());
    }
    if flag("_remove_final_layer_norm", false) && flag("do_layer_norm_before", true) {
        return Err("key `_remove_final_layer_norm` is true: an OPT without its final LayerNorm is not built".into());
    }
    Ok(())
}

/// OPT (`OPTConfig`): learned positions read at `position_ids + 2` (the table has
/// `max_position_embeddings + 2` rows), LayerNorms (epsilon 1e-5, fixed) before attention and
/// the MLP, or after each residual add with no final norm when `do_layer_norm_before` is false
/// (OPT-350m: [`BlockShape::PostNorm`]), token embeddings `word_embed_proj_dim` wide projected to
/// the hidden size and back when it differs (OPT-350m's `project_in` / `project_out`),
/// q/k/v/o and MLP biases per `enable_bias` (default true), a plain MLP `fc1` / `fc2`
/// (`ffn_dim`, `activation_function` ReLU), the head tied by default; checkpoints saved from
/// the bare model lack `model.`. Switches it has that this build does not follow are refused
/// ([`opt_config`]).
pub const OPT: DecoderFamily = DecoderFamily {
    model_types: &["opt"],
    names: NameTable {
        embed_tokens: "model.decoder.embed_tokens.weight",
        embed_positions: Some("model.decoder.embed_positions.weight"),
        layer: "model.decoder.layers.{i}",
        o_proj: "self_attn.out_proj",
        norms: BlockNorms { before_attention: Some("self_attn_layer_norm"), before_mlp: Some("final_layer_norm"), ..PRE_NORMS },
        mlp: MlpNames::Plain { up: "fc1", down: "fc2" },
        final_norm: "model.decoder.final_layer_norm",
        ..LLAMA_NAMES
    },
    layout: Layout {
        norm: NormKind::Layer,
        positions: Positions::Learned { offset: 2 },
        qkv_bias: Bias::ConfigOr("enable_bias", true),
        o_bias: Bias::ConfigOr("enable_bias", true),
        mlp_bias: Bias::ConfigOr("enable_bias", true),
        tie_default: true,
        norm_eps: NormEps::Fixed(1e-5),
        activation: Some(("activation_function", crate::Activation::Relu)),
        key_aliases: &[("ffn_dim", "intermediate_size")],
        key_defaults: &[
            ("max_position_embeddings", KeyDefault::Count(2048)),
            ("bos_token_id", KeyDefault::Count(2)),
            ("eos_token_id", KeyDefault::Count(2)),
            ("pad_token_id", KeyDefault::Count(1)),
        ],
        config_rule: Some(opt_config),
        block: BlockShape::PostNorm,
        block_when: Some(BlockSwitch { key: "do_layer_norm_before", default: true, on: BlockShape::Sequential }),
        final_norm: FinalNorm::When { key: "do_layer_norm_before", default: true },
        embed_projection: Some(EmbedProjection { width: "word_embed_proj_dim", into: "model.decoder.project_in", out: "model.decoder.project_out" }),
        ..LLAMA_LAYOUT
    },
    optional_prefix: Some("model."),
    unused: &[],
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// XGLM (`XGLMConfig`, facebook/xglm-564M to 7.5B): OPT's block (LayerNorms at torch's epsilon
/// 1e-5 before attention and the MLP, biased q/k/v/o and `fc1` / `fc2`) with fairseq's fixed
/// sinusoidal positions read at `position_ids + 2` (`Positions::Sinusoidal`, computed: no
/// checkpoint tensor), the token embeddings times sqrt(`d_model`) by `scale_embedding` (default
/// true), `activation_function` (gelu), the head tied by default; config keys `d_model`,
/// `num_layers`, `attention_heads`, `ffn_dim` as published.
pub const XGLM: DecoderFamily = DecoderFamily {
    model_types: &["xglm"],
    names: NameTable {
        embed_positions: None,
        o_proj: "self_attn.out_proj",
        norms: BlockNorms { before_attention: Some("self_attn_layer_norm"), before_mlp: Some("final_layer_norm"), ..PRE_NORMS },
        mlp: MlpNames::Plain { up: "fc1", down: "fc2" },
        final_norm: "model.layer_norm",
        ..LLAMA_NAMES
    },
    layout: Layout {
        norm: NormKind::Layer,
        positions: Positions::Sinusoidal { offset: 2 },
        qkv_bias: Bias::Always,
        o_bias: Bias::Always,
        mlp_bias: Bias::Always,
        tie_default: true,
        norm_eps: NormEps::Fixed(1e-5),
        activation: Some(("activation_function", crate::Activation::Gelu)),
        key_aliases: &[("d_model", "hidden_size"), ("num_layers", "num_hidden_layers"), ("attention_heads", "num_attention_heads"), ("ffn_dim", "intermediate_size")],
        key_defaults: &[
            ("scale_embedding", KeyDefault::Flag(true)),
            ("max_position_embeddings", KeyDefault::Count(2048)),
            ("bos_token_id", KeyDefault::Count(0)),
            ("eos_token_id", KeyDefault::Count(2)),
            ("pad_token_id", KeyDefault::Count(1)),
        ],
        ..LLAMA_LAYOUT
    },
    optional_prefix: Some("model."),
    unused: &[Unused {
        prefix: "",
        suffix: "embed_positions.weights",
        reason: "XGLM's sinusoidal table, which older transformers kept as a parameter (saved by a raw state_dict); the build computes it",
    }],
    scaling: Scaling { embedding: EmbeddingScale::SqrtHiddenIf("scale_embedding"), ..NO_SCALING },
    layers: FULL_ATTENTION_LAYERS,
};

/// BioGPT (`BioGptConfig`, microsoft/biogpt and BioGPT-Large): OPT's block (learned positions
/// read at `position_ids + 2`, LayerNorms before attention and the MLP, biased q/k/v/o and a
/// plain biased MLP `fc1` / `fc2`) under `biogpt.`, the token embeddings times sqrt(hidden) by
/// `scale_embedding` (default true), `hidden_act` (default gelu), every LayerNorm at torch's
/// default epsilon 1e-5 (`nn.LayerNorm(embed_dim)`: the model never reads the config's
/// `layer_norm_eps`, 1e-12), the head `output_projection` tied by default; checkpoints saved
/// from the bare model lack `biogpt.`.
pub const BIOGPT: DecoderFamily = DecoderFamily {
    model_types: &["biogpt"],
    names: NameTable {
        embed_tokens: "biogpt.embed_tokens.weight",
        embed_positions: Some("biogpt.embed_positions.weight"),
        layer: "biogpt.layers.{i}",
        o_proj: "self_attn.out_proj",
        norms: BlockNorms { before_attention: Some("self_attn_layer_norm"), before_mlp: Some("final_layer_norm"), ..PRE_NORMS },
        mlp: MlpNames::Plain { up: "fc1", down: "fc2" },
        final_norm: "biogpt.layer_norm",
        lm_head: "output_projection",
        ..LLAMA_NAMES
    },
    layout: Layout {
        norm: NormKind::Layer,
        positions: Positions::Learned { offset: 2 },
        qkv_bias: Bias::Always,
        o_bias: Bias::Always,
        mlp_bias: Bias::Always,
        tie_default: true,
        norm_eps: NormEps::Fixed(1e-5),
        activation: Some(("hidden_act", crate::Activation::Gelu)),
        key_defaults: &[
            ("scale_embedding", KeyDefault::Flag(true)),
            ("max_position_embeddings", KeyDefault::Count(1024)),
            ("bos_token_id", KeyDefault::Count(0)),
            ("eos_token_id", KeyDefault::Count(2)),
            ("pad_token_id", KeyDefault::Count(1)),
        ],
        ..LLAMA_LAYOUT
    },
    optional_prefix: Some("biogpt."),
    unused: &[],
    scaling: Scaling { embedding: EmbeddingScale::SqrtHiddenIf("scale_embedding"), ..NO_SCALING },
    layers: FULL_ATTENTION_LAYERS,
};

/// GPT-Neo's layer pattern as `GPTNeoConfig` expands it: `attention_types` (default
/// `[[["global", "local"], 12]]`: each entry's list repeated its count of times) gives each
/// layer `global` (full) or `local` (a window of `window_size` keys, default 256, the query's own
/// included: its causal mask minus the one `window_size` below), written as `layer_types` and
/// `sliding_window`; the list must cover the layers exactly (the class refuses otherwise).
/// `intermediate_size` null or absent is 4 x hidden.
fn gpt_neo_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    let count = |v: &Value| v.as_u64().map(|n| n as usize);
    let layers = ["num_layers", "num_hidden_layers"].iter().find_map(|k| map.get(*k).and_then(count)).ok_or("key `num_layers` is missing or not a whole number")?;
    let default = serde_json::json!([[["global", "local"], 12]]);
    let types = map.get("attention_types").filter(|v| !v.is_null()).unwrap_or(&default);
    let mut kinds = Vec::new();
    for entry in types.as_array().ok_or_else(|| format!("key `attention_types` must be a list of [[kinds...], count] entries, found {types}"))? {
        let bad = || format!("key `attention_types` holds {entry}; each entry is [[\"global\" or \"local\", ...], count]");
        let (list, n) = match entry.as_array().map(Vec::as_slice) {
            Some([list, n]) => (list.as_array().ok_or_else(bad)?, count(n).ok_or_else(bad)?),
            _ => return Err(bad()),
        };
        for _ in 0..n {
            for kind in list {
                kinds.push(match kind.as_str() {
                    Some("global") => "full_attention",
                    Some("local") => "sliding_attention",
                    _ => return Err(format!("key `attention_types` names {kind}; supported: \"global\", \"local\"")),
                });
            }
        }
    }
    if kinds.len() != layers {
        return Err(format!("key `attention_types` gives {} layers; `num_layers` is {layers} (GPTNeoConfig refuses this too)", kinds.len()));
    }
    // The expansion GPTNeoConfig saves beside it, which GPTNeoBlock reads: a hand-edited one
    // that disagrees would build another model in transformers.
    if let Some(saved) = map.get("attention_layers").filter(|v| !v.is_null()) {
        let expanded: Vec<&str> = kinds.iter().map(|k| if *k == "full_attention" { "global" } else { "local" }).collect();
        if saved.as_array().is_none_or(|a| a.len() != expanded.len() || a.iter().zip(&expanded).any(|(v, e)| v.as_str() != Some(e))) {
            return Err(format!("key `attention_layers` ({saved}) is not the expansion of `attention_types` ({expanded:?}); transformers builds the layers from `attention_layers`: make the two agree"));
        }
    }
    map.insert("layer_types".into(), Value::from(kinds));
    let window = match map.get("window_size") {
        None | Some(Value::Null) => 256,
        Some(v) => v.as_u64().filter(|w| *w > 0).ok_or_else(|| format!("key `window_size` must be a positive whole number, found {v}"))?,
    };
    map.insert("sliding_window".into(), Value::from(window));
    if map.get("intermediate_size").is_none_or(Value::is_null) {
        let hidden = map.get("hidden_size").and_then(Value::as_u64).ok_or("key `hidden_size` is missing or not a whole number")?;
        map.insert("intermediate_size".into(), Value::from(4 * hidden));
    }
    Ok(())
}

/// GPT-Neo (`GPTNeoConfig`, EleutherAI's GPT-Neo 125M to 2.7B): learned positions, LayerNorms,
/// q/k/v without biases and a biased `out_proj` under `attn.attention`, unscaled attention scores
/// (`AttentionScale::Fixed(1.0)`), global and local layers as [`gpt_neo_config`] reads them, a
/// plain biased MLP `c_fc` / `c_proj` with `activation_function` (`gelu_new`), the head tied by
/// default; `num_layers` / `num_heads` as published.
pub const GPT_NEO: DecoderFamily = DecoderFamily {
    model_types: &["gpt_neo"],
    names: NameTable {
        embed_tokens: "transformer.wte.weight",
        embed_positions: Some("transformer.wpe.weight"),
        layer: "transformer.h.{i}",
        attention: AttentionNames::Separate { q: "attn.attention.q_proj", k: "attn.attention.k_proj", v: "attn.attention.v_proj" },
        o_proj: "attn.attention.out_proj",
        norms: BlockNorms { before_attention: Some("ln_1"), before_mlp: Some("ln_2"), ..PRE_NORMS },
        mlp: MlpNames::Plain { up: "mlp.c_fc", down: "mlp.c_proj" },
        final_norm: "transformer.ln_f",
        ..LLAMA_NAMES
    },
    layout: Layout {
        norm: NormKind::Layer,
        positions: Positions::Learned { offset: 0 },
        qkv_bias: Bias::Never,
        o_bias: Bias::Always,
        mlp_bias: Bias::Always,
        tie_default: true,
        activation: Some(("activation_function", crate::Activation::GeluTanh)),
        key_aliases: &[("num_layers", "num_hidden_layers"), ("num_heads", "num_attention_heads")],
        key_defaults: &[
            ("layer_norm_epsilon", KeyDefault::Number(1e-5)),
            ("max_position_embeddings", KeyDefault::Count(2048)),
            ("bos_token_id", KeyDefault::Count(50256)),
            ("eos_token_id", KeyDefault::Count(50256)),
        ],
        config_rule: Some(gpt_neo_config),
        ..LLAMA_LAYOUT
    },
    optional_prefix: Some("transformer."),
    unused: &[
        Unused { prefix: "", suffix: ".attn.attention.bias", reason: "GPT-Neo's causal-mask buffer; the graph builds its own masks" },
        Unused { prefix: "", suffix: ".attn.attention.masked_bias", reason: "GPT-Neo's mask fill-value buffer; the graph builds its own masks" },
    ],
    scaling: Scaling { attention: AttentionScale::Fixed(1.0), ..NO_SCALING },
    layers: UNIFORM_LAYERS,
};

/// As `GPTBigCodeConfig.__post_init__`: `multi_query` (default true) decides the key/value
/// heads whatever `num_key_value_heads` says (transformers 5 saves that derived count too); off
/// (q, k and v fused per head in `c_attn`) is refused, naming the key.
fn gpt_bigcode_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    match map.get("multi_query") {
        None | Some(Value::Bool(true)) => {
            map.insert("num_key_value_heads".into(), Value::from(1));
            Ok(())
        }
        Some(Value::Bool(false)) => Err("`multi_query` is false: q, k and v fused per head in `c_attn` (every head its own keys) are not built for this model type; the released checkpoints use one key/value head (`multi_query: true`)".into()),
        Some(v) => Err(format!("key `multi_query` must be true or false, found {v}")),
    }
}

/// GPTBigCode (StarCoder 1, SantaCoder, WizardCoder, OctoCoder: `GPTBigCodeConfig`): GPT-2's
/// block and names (learned positions, LayerNorms with bias, biases everywhere, tied head by
/// default, `n_*` keys, tanh GELU from `activation_function`, `scale_attn_weights`) with
/// `nn.Linear` weights (`[out, in]`, not GPT-2's Conv1D) and multi-query attention: `c_attn`
/// holds q (hidden rows) then one key head and one value head (`multi_query`, default true;
/// false, a per-head fused `c_attn`, is refused); `gelu_pytorch_tanh` and `layer_norm_epsilon`
/// 1e-5 when absent (`GPTBigCodeConfig`).
pub const GPT_BIGCODE: DecoderFamily = DecoderFamily {
    model_types: &["gpt_bigcode"],
    layout: Layout {
        weights: WeightLayout::Linear,
        config_rule: Some(gpt_bigcode_config),
        activation: Some(("activation_function", crate::Activation::GeluTanh)),
        norm_eps: NormEps::Key(Key { name: "layer_norm_epsilon", default: Some(1e-5) }),
        ..GPT2.layout
    },
    unused: &[
        Unused { prefix: "", suffix: ".attn.bias", reason: "a causal-mask buffer; the graph builds its own mask" },
        Unused { prefix: "", suffix: ".attn.masked_bias", reason: "a mask fill-value buffer; the graph builds its own mask" },
    ],
    ..GPT2
};

/// Qwen3's and Gemma 3's q/k norms: one RMSNorm per head, over `head_dim`.
const PER_HEAD_QK_NORM: QkNorm = QkNorm { q: "self_attn.q_norm", k: "self_attn.k_norm", over: NormOver::Head, when: None, after_rope: false };

/// Gemma: `(1 + weight)` RMSNorm, embeddings scaled by sqrt(hidden_size), the MLP activation
/// from `hidden_activation` (transformers ignores `hidden_act` for Gemma; tanh GELU when
/// absent), tied head by default. Otherwise Llama, without MLP bias.
pub const GEMMA: DecoderFamily = DecoderFamily {
    model_types: &["gemma"],
    names: LLAMA_NAMES,
    layout: GEMMA_LAYOUT,
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: Scaling { embedding: EmbeddingScale::SqrtHidden, ..NO_SCALING },
    layers: FULL_ATTENTION_LAYERS,
};

const GEMMA_LAYOUT: Layout = Layout {
    norm: NormKind::RmsUnitOffset,
    mlp_bias: Bias::Never,
    tie_default: true,
    activation: Some(("hidden_activation", crate::Activation::GeluTanh)),
    ..LLAMA_LAYOUT
};

/// Gemma 2 and 3's four norms per layer: before and after attention, before and after the MLP.
const SANDWICH_NORMS: BlockNorms = BlockNorms {
    before_attention: Some("input_layernorm"),
    after_attention: Some("post_attention_layernorm"),
    before_mlp: Some("pre_feedforward_layernorm"),
    after_mlp: Some("post_feedforward_layernorm"),
};

/// Gemma 2 and 3's attention scale: `query_pre_attn_scalar ** -0.5` (transformers' default 256).
const QUERY_PRE_ATTN_SCALAR: AttentionScale = AttentionScale::InverseSqrt(Key { name: "query_pre_attn_scalar", default: Some(256.0) });

/// Gemma 2: Gemma plus sandwich norms, `query_pre_attn_scalar` as the attention scale,
/// attention and final logit softcapping (transformers' defaults 50 and 30; `null` turns one
/// off), and sliding layers from `layer_types`, else alternating from layer 0 (window 4096
/// when `sliding_window` is absent).
pub const GEMMA2: DecoderFamily = DecoderFamily {
    model_types: &["gemma2"],
    names: NameTable { norms: SANDWICH_NORMS, ..LLAMA_NAMES },
    layout: GEMMA_LAYOUT,
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: Scaling {
        embedding: EmbeddingScale::SqrtHidden,
        attention: QUERY_PRE_ATTN_SCALAR,
        attention_softcap: Some(Key { name: "attn_logit_softcapping", default: Some(50.0) }),
        final_softcap: Some(Key { name: "final_logit_softcapping", default: Some(30.0) }),
        ..NO_SCALING
    },
    layers: LayerKinds { full_every: Some(FullEvery { keys: &[], default: 2, first: false }), default_window: Some(4096), ..UNIFORM_LAYERS },
};

/// VaultGemma (`VaultGemmaConfig`, a `Gemma2Config`): Gemma 2 with two norms per layer, before
/// attention and before the MLP (`input_layernorm`, `pre_feedforward_layernorm`; its decoder
/// layer deletes the two after-norms), everything else Gemma 2's: scale, softcaps, windows.
pub const VAULTGEMMA: DecoderFamily = DecoderFamily {
    model_types: &["vaultgemma"],
    names: NameTable {
        norms: BlockNorms { before_attention: Some("input_layernorm"), after_attention: None, before_mlp: Some("pre_feedforward_layernorm"), after_mlp: None },
        ..LLAMA_NAMES
    },
    ..GEMMA2
};

/// `Gemma3TextConfig`'s defaults of the keys the published multimodal configs (4B, 12B, 27B)
/// leave out of `text_config` (the multimodal config's top-level token ids fill the text
/// config's first); `head_dim` (256) and `rope_theta` (1e6) are the layout's own defaults.
const GEMMA3_KEY_DEFAULTS: &[(&str, KeyDefault)] = &[
    ("vocab_size", KeyDefault::Count(262_208)),
    ("hidden_size", KeyDefault::Count(2304)),
    ("intermediate_size", KeyDefault::Count(9216)),
    ("num_hidden_layers", KeyDefault::Count(26)),
    ("num_attention_heads", KeyDefault::Count(8)),
    ("num_key_value_heads", KeyDefault::Count(4)),
    ("max_position_embeddings", KeyDefault::Count(131_072)),
    ("rms_norm_eps", KeyDefault::Number(1e-6)),
    ("bos_token_id", KeyDefault::Count(2)),
    ("eos_token_id", KeyDefault::Count(1)),
    ("pad_token_id", KeyDefault::Count(0)),
];

/// Gemma 3 (text): Gemma 2 plus per-head `(1 + weight)` q/k norms, softcapping off unless the
/// config sets it, and a RoPE of their own for sliding layers (`rope_local_base_freq`, default
/// 10000, or `rope_parameters.sliding_attention`); sliding layers from `layer_types`, else
/// every `sliding_window_pattern`th layer full (default 6).
pub const GEMMA3: DecoderFamily = DecoderFamily {
    model_types: &["gemma3_text"],
    names: NameTable { norms: SANDWICH_NORMS, qk_norm: Some(PER_HEAD_QK_NORM), ..LLAMA_NAMES },
    layout: Layout {
        rope_default: RopeDefault { theta: 1_000_000.0, scaling: None, renamed: &[], ntk_alpha: false },
        head_dim_default: Some(256),
        key_defaults: GEMMA3_KEY_DEFAULTS,
        ..GEMMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: Scaling {
        embedding: EmbeddingScale::SqrtHidden,
        attention: QUERY_PRE_ATTN_SCALAR,
        attention_softcap: Some(Key { name: "attn_logit_softcapping", default: None }),
        final_softcap: Some(Key { name: "final_logit_softcapping", default: None }),
        ..NO_SCALING
    },
    layers: LayerKinds {
        full_every: Some(FullEvery { keys: &["sliding_window_pattern", "_sliding_window_pattern"], default: 6, first: false }),
        default_window: Some(4096),
        local_rope: Some(LocalRope::Base(10000.0)),
        ..UNIFORM_LAYERS
    },
};

/// Granite: Llama with four multipliers, each from its config key (transformers' default 1):
/// `embedding_multiplier` on the input embeddings, `residual_multiplier` on each block's output
/// before its residual add, `attention_multiplier` as the attention scale, and the logits
/// divided by `logits_scaling`.
pub const GRANITE: DecoderFamily = DecoderFamily {
    model_types: &["granite"],
    names: LLAMA_NAMES,
    layout: LLAMA_LAYOUT,
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: Scaling {
        embedding: EmbeddingScale::Key(Key { name: "embedding_multiplier", default: Some(1.0) }),
        residual: Some(Key { name: "residual_multiplier", default: Some(1.0) }),
        attention: AttentionScale::Key(Key { name: "attention_multiplier", default: Some(1.0) }),
        logits_divisor: Some(Key { name: "logits_scaling", default: Some(1.0) }),
        ..NO_SCALING
    },
    layers: FULL_ATTENTION_LAYERS,
};

/// Apertus's RoPE when config.json gives none (`ApertusConfig`): Llama 3 scaling x8 over 8192
/// positions at theta 1.2e7.
const APERTUS_ROPE: &str = r#"{"rope_type":"llama3","rope_theta":12000000.0,"factor":8.0,"original_max_position_embeddings":8192,"low_freq_factor":1.0,"high_freq_factor":4.0}"#;

/// DeepSeek's shared experts: an ungated MLP `n_shared_experts` routed experts wide (1 by
/// default, as `DeepseekV3Config`).
const DEEPSEEK_SHARED: SharedExpert = SharedExpert {
    mlp: &MlpNames::Gated { gate: "mlp.shared_experts.gate_proj", up: "mlp.shared_experts.up_proj", down: "mlp.shared_experts.down_proj" },
    gate: None,
    width: SharedWidth::Experts("n_shared_experts", 1),
    combine: SharedCombine::Sum,
};

/// The keys counting multi-token prediction layers (`DeepseekV3Config`'s attribute map).
const MTP_KEYS: &[&str] = &["num_nextn_predict_layers", "num_mtp_layers"];

/// DeepSeek-V3's latent attention names and `DeepseekV3Config`'s size defaults.
const DEEPSEEK_V3_LATENT: LatentNames = LatentNames {
    q: "self_attn.q_proj",
    q_a: "self_attn.q_a_proj",
    q_a_norm: "self_attn.q_a_layernorm",
    q_b: "self_attn.q_b_proj",
    kv_a: "self_attn.kv_a_proj_with_mqa",
    kv_a_norm: "self_attn.kv_a_layernorm",
    kv_b: "self_attn.kv_b_proj",
    norm_eps: 1e-6,
    defaults: LatentSizes { q_rank: Some(1536), kv_rank: 512, nope: 128, rope: 64, v: 128, interleaved: true },
    interleave_key: Some("rope_interleave"),
};

/// DeepSeek-V3's router (`noaux_tc`): sigmoid scores in f32 with the correction, 8 groups scored
/// by their best two, 4 open, times 2.5 (`DeepseekV3Config`'s defaults).
const DEEPSEEK_V3_ROUTING: GroupedRouting = GroupedRouting {
    sigmoid: true,
    f32_router: true,
    bias: Some("mlp.gate.e_score_correction_bias"),
    choose_on_logits: false,
    bias_optional: false,
    group_best: 2,
    method: None,
    groups: Some(GroupKeys { count: ("n_group", 8), open: ("topk_group", 4) }),
    scale: Some(Key { name: "routed_scaling_factor", default: Some(2.5) }),
};

/// DeepSeek-V3's mixture (`DeepseekV3Config`'s defaults): per-expert weights, the grouped sigmoid
/// router with its correction, DeepSeek's shared expert, the first three layers dense.
const DEEPSEEK_V3_EXPERTS: MoeNames = MoeNames {
    router: "mlp.gate",
    router_bias: false,
    experts: ExpertNames::PerExpert { expert: "mlp.experts.{e}", gate: "gate_proj", up: "up_proj", down: "down_proj" },
    shared: Some(DEEPSEEK_SHARED),
    dense: Some(&GATED_MLP),
    keys: MoeKeys {
        experts: &["n_routed_experts", "num_local_experts"],
        experts_default: 256,
        top_k_default: 8,
        normalize: TopKNorm::Key("norm_topk_prob", true),
        intermediate: &["moe_intermediate_size"],
        intermediate_default: Some(2048),
        sparse: SparseLayers::FirstDense { key: "first_k_dense_replace", default: 3 },
        routing: Routing::Grouped(DEEPSEEK_V3_ROUTING),
        activation: ExpertActivation::Gated,
    },
};

/// DeepSeek-V3 (and Moonlight, which publishes this `model_type`): multi-head
/// latent attention (`q_lora_rank` / `kv_lora_rank` projections, a shared rotary key,
/// `rope_interleave`, YaRN's `mscale_all_dim` in the softmax scale: see
/// `config::LatentDims`), biases per `attention_bias` on `q_a_proj`, `kv_a_proj_with_mqa`
/// and `o_proj`; the first `first_k_dense_replace` layers (default 3) dense with
/// `intermediate_size`, the others `n_routed_experts` (256) of `moe_intermediate_size` (2048)
/// routed by grouped sigmoid scores (`n_group` 8, `topk_group` 4, `e_score_correction_bias`,
/// `norm_topk_prob` true, `routed_scaling_factor` 2.5; top `num_experts_per_tok` 8) plus
/// `n_shared_experts` (1) experts' width of ungated shared MLP; the multi-token prediction
/// layers after the decoder's left unread (defaults from `DeepseekV3Config`).
pub const DEEPSEEK_V3: DecoderFamily = DecoderFamily {
    model_types: &["deepseek_v3"],
    names: NameTable {
        attention: AttentionNames::Latent(&DEEPSEEK_V3_LATENT),
        mlp: MlpNames::Experts(DEEPSEEK_V3_EXPERTS),
        ..LLAMA_NAMES
    },
    layout: Layout { key_defaults: &[("max_position_embeddings", KeyDefault::Count(4096))], mlp_bias: Bias::Never, prediction_layers: Some((MTP_KEYS, 1)), ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// `AXK1Config.__post_init__`: without `mlp_layer_types`, layer `i` is sparse when `i >=
/// first_k_dense_replace` (1) and `i % moe_layer_freq == 0` (1); the keys are popped there, so
/// the list is what the model reads.
fn axk1_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    if map.get("mlp_layer_types").is_some_and(|v| !v.is_null()) {
        return Ok(());
    }
    let count = |key: &str, default: u64| match map.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v.as_u64().ok_or_else(|| format!("key `{key}` must be a whole number, found {v}")),
    };
    let (first, every) = (count("first_k_dense_replace", 1)?, count("moe_layer_freq", 1)?);
    if every == 0 {
        return Err("key `moe_layer_freq` must be at least 1, found 0".into());
    }
    let Some(layers) = map.get("num_hidden_layers").and_then(Value::as_u64) else { return Ok(()) };
    let types: Vec<Value> = (0..layers).map(|i| Value::from(if i >= first && i % every == 0 { "sparse" } else { "dense" })).collect();
    map.insert("mlp_layer_types".into(), Value::Array(types));
    Ok(())
}

/// A.X K1 (SK Telecom, `AXK1Config`, a DeepseekV3Config): DeepSeek-V3's latent attention (always
/// with `q_lora_rank`) and grouped sigmoid experts (`n_routed_experts` 192, `n_group` 8,
/// `topk_group` 4, top 8, `routed_scaling_factor` 2.5, one shared expert), layers dense or sparse
/// by `mlp_layer_types` ([`axk1_config`] derives it from the legacy keys), and an RMSNorm on the
/// MoE block's output (`post_mlp_layernorm`, sparse layers only, before the residual add; the
/// released checkpoints store it on dense layers too, unused there); the correction bias read
/// as zero when the checkpoint has none; 32768 positions when absent.
pub const AXK1: DecoderFamily = DecoderFamily {
    model_types: &["axk1"],
    names: NameTable {
        attention: AttentionNames::Latent(&DEEPSEEK_V3_LATENT),
        norms: BlockNorms { after_mlp: Some("post_mlp_layernorm"), ..PRE_NORMS },
        mlp: MlpNames::Experts(MoeNames {
            keys: MoeKeys {
                experts_default: 192,
                sparse: SparseLayers::Types { key: "mlp_layer_types", default_dense: (None, 1) },
                routing: Routing::Grouped(GroupedRouting { bias_optional: true, ..DEEPSEEK_V3_ROUTING }),
                ..DEEPSEEK_V3_EXPERTS.keys
            },
            ..DEEPSEEK_V3_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(32768))],
        config_rule: Some(axk1_config),
        after_mlp_norm_sparse_only: true,
        ..DEEPSEEK_V3.layout
    },
    ..DEEPSEEK_V3
};

/// Sarvam-105B's latent attention: DeepSeek-V3's with `SarvamMLAConfig`'s default of no query
/// compression.
const SARVAM_LATENT: LatentNames = LatentNames { defaults: LatentSizes { q_rank: None, ..DEEPSEEK_V3_LATENT.defaults }, ..DEEPSEEK_V3_LATENT };

/// Sarvam-105B (`sarvam_mla`): transformers builds DeepSeek-V3's model from `SarvamMLAConfig`,
/// whose defaults differ: `n_routed_experts` 128, no query compression (`q_lora_rank` null),
/// `n_group` / `topk_group` 1, the first layer dense, no multi-token prediction layers. The
/// original config's spellings are read as the class translates them: `num_experts` and
/// `num_shared_experts`, RoPE `deepseek_yarn` as YaRN; its `head_dim` (the latent plus rope,
/// for vLLM) is derived here as there.
pub const SARVAM_MLA: DecoderFamily = DecoderFamily {
    model_types: &["sarvam_mla"],
    names: NameTable {
        attention: AttentionNames::Latent(&SARVAM_LATENT),
        mlp: MlpNames::Experts(MoeNames {
            keys: MoeKeys {
                experts_default: 128,
                sparse: SparseLayers::FirstDense { key: "first_k_dense_replace", default: 1 },
                routing: Routing::Grouped(GroupedRouting { groups: Some(GroupKeys { count: ("n_group", 1), open: ("topk_group", 1) }), ..DEEPSEEK_V3_ROUTING }),
                ..DEEPSEEK_V3_EXPERTS.keys
            },
            ..DEEPSEEK_V3_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        key_aliases: &[("num_experts", "n_routed_experts"), ("num_shared_experts", "n_shared_experts")],
        prediction_layers: Some((MTP_KEYS, 0)),
        rope_default: RopeDefault { renamed: &[("deepseek_yarn", "yarn")], ..LLAMA_LAYOUT.rope_default },
        ..DEEPSEEK_V3.layout
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// DeepSeek-V2's latent attention: V3's names, `DeepseekV2Config`'s defaults, the rotary
/// pairs rotated as stored (its complex rotation keeps them interleaved in its cache).
const DEEPSEEK_V2_LATENT: LatentNames = LatentNames {
    defaults: LatentSizes { q_rank: Some(1536), kv_rank: 512, nope: 128, rope: 64, v: 128, interleaved: false },
    interleave_key: None,
    ..DEEPSEEK_V3_LATENT
};

/// DeepSeek-V2 (V2, V2-Lite, Coder-V2): DeepSeek-V3's latent attention with RoPE on interleaved
/// pairs as stored (transformers' complex rotation), and a mixture of `n_routed_experts` (64)
/// of `moe_intermediate_size` (1407) routed by a softmax: `topk_method` `greedy` (default) the
/// top `num_experts_per_tok` (6), `group_limited_greedy` the top of the `topk_group` best of
/// `n_group` groups (a group scored by its best expert); weights unnormalized (transformers'
/// router does not read `norm_topk_prob`) times `routed_scaling_factor` (1.0); `n_shared_experts`
/// (2) experts' width of shared MLP; the first `first_k_dense_replace` (0) layers dense, with
/// `mlp_bias` on the dense MLPs (defaults from `DeepseekV2Config`).
pub const DEEPSEEK_V2: DecoderFamily = DecoderFamily {
    model_types: &["deepseek_v2"],
    names: NameTable {
        attention: AttentionNames::Latent(&DEEPSEEK_V2_LATENT),
        mlp: MlpNames::Experts(MoeNames {
            shared: Some(SharedExpert { width: SharedWidth::Experts("n_shared_experts", 2), ..DEEPSEEK_SHARED }),
            keys: MoeKeys {
                experts: &["n_routed_experts", "num_experts"],
                experts_default: 64,
                top_k_default: 6,
                normalize: TopKNorm::Never,
                intermediate_default: Some(1407),
                sparse: SparseLayers::FirstDense { key: "first_k_dense_replace", default: 0 },
                routing: Routing::Grouped(GroupedRouting {
                    sigmoid: false,
                    bias: None,
                    choose_on_logits: false,
                    bias_optional: false,
                    group_best: 1,
                    method: Some(("topk_method", "greedy", "group_limited_greedy", "greedy")),
                    groups: Some(GroupKeys { count: ("n_group", 1), open: ("topk_group", 1) }),
                    scale: Some(Key { name: "routed_scaling_factor", default: Some(1.0) }),
                    ..DEEPSEEK_V3_ROUTING
                }),
                ..DEEPSEEK_V3_EXPERTS.keys
            },
            ..DEEPSEEK_V3_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout { rotary: RotaryPairs::Interleaved, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// The GLM-4.5 mixture: DeepSeek-V3's router (sigmoid scores, `e_score_correction_bias`,
/// groups scored by their best two) with `Glm4MoeConfig`'s defaults, one shared expert's width,
/// the first `first_k_dense_replace` (1) layers dense.
const GLM4_MOE_ROUTING: GroupedRouting = GroupedRouting {
    groups: Some(GroupKeys { count: ("n_group", 1), open: ("topk_group", 1) }),
    scale: Some(Key { name: "routed_scaling_factor", default: Some(1.0) }),
    ..DEEPSEEK_V3_ROUTING
};

const GLM4_MOE_EXPERTS: MoeNames = MoeNames {
    keys: MoeKeys {
        experts_default: 128,
        intermediate_default: Some(1408),
        sparse: SparseLayers::FirstDense { key: "first_k_dense_replace", default: 1 },
        routing: Routing::Grouped(GLM4_MOE_ROUTING),
        ..DEEPSEEK_V3_EXPERTS.keys
    },
    ..DEEPSEEK_V3_EXPERTS
};

/// GLM-4.5 / 4.6 / 4.7 (and GLM-4.5-Air): Llama attention with q/k/v biases per
/// `attention_bias`, none on o_proj, per-head q/k RMSNorms when `use_qk_norm`, RoPE (rotate-half)
/// on the first `partial_rotary_factor` (default 0.5) of each head, `rms_norm_eps` 1e-5; the
/// GLM-4.5 mixture above; the multi-token prediction layers after the decoder's left unread.
pub const GLM4_MOE: DecoderFamily = DecoderFamily {
    model_types: &["glm4_moe"],
    names: NameTable {
        qk_norm: Some(QkNorm { when: Some("use_qk_norm"), ..PER_HEAD_QK_NORM }),
        mlp: MlpNames::Experts(GLM4_MOE_EXPERTS),
        ..LLAMA_NAMES
    },
    layout: Layout { key_defaults: &[("max_position_embeddings", KeyDefault::Count(131072))],
        qkv_bias: Bias::Config("attention_bias"),
        o_bias: Bias::Never,
        mlp_bias: Bias::Never,
        partial_rotary_default: 0.5,
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-5) }),
        prediction_layers: Some((MTP_KEYS, 1)),
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// Sarvam-MoE's and Param-2's original checkpoints (Ling 2.0's names, which transformers renames
/// to GLM-4.5's on load): `model.word_embeddings`, q/k/v in one `attention.query_key_value`
/// (rows q, k, v: GQA), `attention.dense`, per-head `attention.query_layernorm` /
/// `key_layernorm`, per-expert `mlp.experts.{e}.*`, the correction `mlp.gate.expert_bias`.
const BAILING_NAMES: NameTable = NameTable {
    embed_tokens: "model.word_embeddings.weight",
    attention: AttentionNames::Fused { qkv: "attention.query_key_value" },
    o_proj: "attention.dense",
    qk_norm: Some(QkNorm { q: "attention.query_layernorm", k: "attention.key_layernorm", when: Some("use_qk_norm"), ..PER_HEAD_QK_NORM }),
    mlp: MlpNames::Experts(MoeNames {
        keys: MoeKeys {
            routing: Routing::Grouped(GroupedRouting { bias: Some("mlp.gate.expert_bias"), ..GLM4_MOE_ROUTING }),
            ..GLM4_MOE_EXPERTS.keys
        },
        ..GLM4_MOE_EXPERTS
    }),
    ..LLAMA_NAMES
};

/// Sarvam-MoE (`SarvamMoEConfig`, Sarvam-30B; built by transformers as GLM-4.5's MoE) under its
/// original names ([`BAILING_NAMES`]) and spellings (`num_experts`, `num_shared_experts`,
/// `use_qkv_bias`); its class's defaults where GLM-4.5's differ: RoPE over the whole head
/// (`partial_rotary_factor` 1.0), base 8e6, `head_dim` 64, 4 key/value heads, q/k norms on,
/// `rms_norm_eps` 1e-6, top 6, `routed_scaling_factor` 2.5, eos 1, pad 0.
pub const SARVAM_MOE: DecoderFamily = DecoderFamily {
    model_types: &["sarvam_moe"],
    names: BAILING_NAMES,
    layout: Layout {
        partial_rotary_default: 1.0,
        head_dim_default: Some(64),
        rope_default: RopeDefault { theta: 8_000_000.0, ..LLAMA_LAYOUT.rope_default },
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-6) }),
        key_aliases: BAILING_ALIASES,
        // `num_mtp_layers` 0: the released checkpoints hold no prediction layers.
        prediction_layers: Some((MTP_KEYS, 0)),
        key_defaults: &[
            ("max_position_embeddings", KeyDefault::Count(131072)),
            ("intermediate_size", KeyDefault::Count(8192)),
            ("num_key_value_heads", KeyDefault::Count(4)),
            ("use_qk_norm", KeyDefault::Flag(true)),
            ("num_experts_per_tok", KeyDefault::Count(6)),
            ("moe_intermediate_size", KeyDefault::Count(1024)),
            ("routed_scaling_factor", KeyDefault::Number(2.5)),
            ("eos_token_id", KeyDefault::Count(1)),
            ("pad_token_id", KeyDefault::Count(0)),
        ],
        ..GLM4_MOE.layout
    },
    ..GLM4_MOE
};

/// Sarvam-MoE's and Param-2's config spellings (their classes' attribute maps).
const BAILING_ALIASES: &[(&str, &str)] = &[("num_experts", "n_routed_experts"), ("num_local_experts", "n_routed_experts"), ("num_shared_experts", "n_shared_experts"), ("use_qkv_bias", "attention_bias")];

/// Param-2 (`Param2MoeConfig`; built as GLM-4.5's MoE) under Sarvam-MoE's names and spellings,
/// its own defaults: a tied head, base 5e5, `head_dim` 64, 8 key/value heads (GLM-4.5's), 64
/// experts and two shared, top 6, 32768 positions, eos 3.
pub const PARAM2MOE: DecoderFamily = DecoderFamily {
    model_types: &["param2moe"],
    layout: Layout {
        tie_default: true,
        rope_default: RopeDefault { theta: 500_000.0, ..LLAMA_LAYOUT.rope_default },
        key_defaults: &[
            ("max_position_embeddings", KeyDefault::Count(32768)),
            ("intermediate_size", KeyDefault::Count(9216)),
            ("num_key_value_heads", KeyDefault::Count(8)),
            ("use_qk_norm", KeyDefault::Flag(true)),
            // Under the published spellings, which the aliases carry to the generic keys (a
            // default under the generic key would hide a published count).
            ("num_experts", KeyDefault::Count(64)),
            ("num_shared_experts", KeyDefault::Count(2)),
            ("num_experts_per_tok", KeyDefault::Count(6)),
            ("moe_intermediate_size", KeyDefault::Count(2048)),
            ("routed_scaling_factor", KeyDefault::Number(2.5)),
            ("eos_token_id", KeyDefault::Count(3)),
            ("pad_token_id", KeyDefault::Count(0)),
        ],
        ..SARVAM_MOE.layout
    },
    ..SARVAM_MOE
};

/// dots.llm1 (rednote-hilab): Qwen3's attention (per-head q/k RMSNorms, q/k/v/o biases per
/// `attention_bias`) with DeepSeek-V3's mixture (transformers' `Dots1` is those two modules).
/// `Dots1Config` has no `use_sliding_window`: without `layer_types`, the layers from
/// `max_window_layers` (62) on slide when `sliding_window` (4096) is set. Its mixture defaults:
/// grouped sigmoid routing with the correction, `n_group` / `topk_group` 1, `norm_topk_prob`
/// false, `routed_scaling_factor` 1.0, the first `first_k_dense_replace` (0) layers dense,
/// experts of `moe_intermediate_size` (1408) plus `n_shared_experts` experts' width shared. The
/// class gives the expert counts no default (transformers fails without them): dots.llm1's own
/// (128 experts, top 6, two shared) stand in.
pub const DOTS1: DecoderFamily = DecoderFamily {
    model_types: &["dots1"],
    names: NameTable {
        qk_norm: Some(PER_HEAD_QK_NORM),
        mlp: MlpNames::Experts(MoeNames {
            shared: Some(SharedExpert { width: SharedWidth::Experts("n_shared_experts", 2), ..DEEPSEEK_SHARED }),
            keys: MoeKeys {
                experts_default: 128,
                top_k_default: 6,
                normalize: TopKNorm::Key("norm_topk_prob", false),
                intermediate_default: Some(1408),
                sparse: SparseLayers::FirstDense { key: "first_k_dense_replace", default: 0 },
                routing: Routing::Grouped(GroupedRouting { scale: Some(Key { name: "routed_scaling_factor", default: Some(1.0) }), ..GLM4_MOE_ROUTING }),
                ..DEEPSEEK_V3_EXPERTS.keys
            },
            ..DEEPSEEK_V3_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        mlp_bias: Bias::Never,
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-6) }),
        key_defaults: &[
            ("use_sliding_window", KeyDefault::Flag(true)),
            ("max_window_layers", KeyDefault::Count(62)),
            ("max_position_embeddings", KeyDefault::Count(2048)),
        ],
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: LayerKinds { default_window: Some(4096), ..QWEN_LAYERS },
};

/// Solar Open (Upstage): Llama's attention (q/k/v biases per `attention_bias`, none on
/// o_proj, `head_dim` 128) in every layer with the GLM-4.5 mixture and `SolarOpenConfig`'s
/// defaults: `n_routed_experts` (128) of `moe_intermediate_size` (1280), top 8, one shared
/// expert's width, every layer sparse (the class drops `first_k_dense_replace`), RoPE theta
/// 1e6 on the whole head unless `partial_rotary_factor` says otherwise, epsilon 1e-5.
pub const SOLAR_OPEN: DecoderFamily = DecoderFamily {
    model_types: &["solar_open"],
    names: NameTable {
        mlp: MlpNames::Experts(MoeNames {
            keys: MoeKeys { intermediate_default: Some(1280), sparse: SparseLayers::All, ..GLM4_MOE_EXPERTS.keys },
            ..GLM4_MOE_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        qkv_bias: Bias::Config("attention_bias"),
        o_bias: Bias::Never,
        mlp_bias: Bias::Never,
        head_dim_default: Some(128),
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-5) }),
        // `SolarOpenConfig` has no `intermediate_size` (every layer is sparse: nothing reads
        // it); the expert width stands in for the generic reader.
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(131072)), ("intermediate_size", KeyDefault::Count(1280))],
        rope_default: RopeDefault { theta: 1000000.0, ..LLAMA_LAYOUT.rope_default },
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// A multi-token prediction module stored apart from the layers (EXAONE MoE's and Mellum's
/// `mtp.*`): transformers ignores it on load.
const MTP_MODULE_UNUSED: &[Unused] = &[
    Unused { prefix: "", suffix: "rotary_emb.inv_freq", reason: "a RoPE buffer; the cos/sin caches are recomputed from config.json" },
    Unused { prefix: "mtp.", suffix: "", reason: "a multi-token prediction module (`mtp.*`): it drafts tokens in training; transformers does not load it" },
];

/// EXAONE MoE (K-EXAONE): EXAONE 4's attention (per-head q/k RMSNorms, no biases, sliding
/// layers from `layer_types` or `sliding_window_pattern`, RoPE only on the sliding layers when
/// windowed) in pre-norm blocks (OLMoE's layer: a norm before attention and one before the
/// MLP), with DeepSeek-V3's mixture under `ExaoneMoeConfig`'s names and defaults: `num_experts`
/// (64) of `moe_intermediate_size` (1024), top 8, `num_shared_experts` (1) experts' width
/// shared, sigmoid scores with the correction over `n_group` / `topk_group` (1 / 1),
/// `norm_topk_prob` true, `routed_scaling_factor` 2.5; dense or sparse per `mlp_layer_types`,
/// else the first `first_k_dense_replace` (1) dense; the correction bias stored as
/// `mlp.e_score_correction_bias`.
pub const EXAONE_MOE: DecoderFamily = DecoderFamily {
    model_types: &["exaone_moe"],
    names: NameTable {
        qk_norm: Some(PER_HEAD_QK_NORM),
        mlp: MlpNames::Experts(MoeNames {
            shared: Some(SharedExpert { width: SharedWidth::Experts("num_shared_experts", 1), ..DEEPSEEK_SHARED }),
            keys: MoeKeys {
                experts: &["num_experts"],
                experts_default: 64,
                intermediate_default: Some(1024),
                sparse: SparseLayers::Types { key: "mlp_layer_types", default_dense: (Some("first_k_dense_replace"), 1) },
                // Stored beside the router, not in it (transformers' conversion mapping renames
                // `mlp.e_score_correction_bias` on load).
                routing: Routing::Grouped(GroupedRouting {
                    bias: Some("mlp.e_score_correction_bias"),
                    scale: Some(Key { name: "routed_scaling_factor", default: Some(2.5) }),
                    ..GLM4_MOE_ROUTING
                }),
                ..GLM4_MOE_EXPERTS.keys
            },
            ..GLM4_MOE_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout { qkv_bias: Bias::Never, o_bias: Bias::Never, mlp_bias: Bias::Never, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: MTP_MODULE_UNUSED,
    scaling: NO_SCALING,
    layers: EXAONE4.layers,
};

/// MiniMax-M2 (`MiniMaxM2Config`): Llama's pre-norm blocks without biases, q and k each
/// RMSNormed over the whole projection (FlexOlmo's attention), RoPE (rotate-half) on the first
/// `rotary_dim` of each head (`partial_rotary_factor` = it / head_dim), head_dim 128, theta 5e6
/// when absent; in every layer a mixture of `num_local_experts` (256) experts of
/// `intermediate_size` (1536) under Mixtral's names, routed by sigmoid scores with the
/// correction `block_sparse_moe.e_score_correction_bias` added for the choice of the top
/// `num_experts_per_tok` (8), the chosen scores renormalized; no groups, no shared expert, no
/// window.
pub const MINIMAX_M2: DecoderFamily = DecoderFamily {
    model_types: &["minimax_m2"],
    names: NameTable {
        qk_norm: Some(QkNorm { q: "self_attn.q_norm", k: "self_attn.k_norm", over: NormOver::Projection, when: None, after_rope: false }),
        mlp: MlpNames::Experts(MoeNames {
            keys: MoeKeys {
                experts: &["num_local_experts", "num_experts"],
                experts_default: 256,
                top_k_default: 8,
                normalize: TopKNorm::Always,
                intermediate: &["intermediate_size"],
                intermediate_default: Some(1536),
                sparse: SparseLayers::All,
                routing: Routing::Grouped(GroupedRouting {
                    sigmoid: true,
                    f32_router: false,
                    bias: Some("block_sparse_moe.e_score_correction_bias"),
                    choose_on_logits: false,
                    bias_optional: false,
                    group_best: 1,
                    method: None,
                    groups: None,
                    scale: None,
                }),
                activation: ExpertActivation::Gated,
            },
            ..MIXTRAL_MOE
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        head_dim_default: Some(128),
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(196608))],
        rope_default: RopeDefault { theta: 5000000.0, ..LLAMA_LAYOUT.rope_default },
        rotary_dims_key: Some("rotary_dim"),
        ..MIXTRAL.layout
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// AFMoE (Arcee's Trinity, `AfmoeConfig`): Llama attention with per-head q/k RMSNorms and the
/// heads' output gated by `sigmoid(self_attn.gate_proj(x))` before o_proj; four norms a layer
/// (before and after attention, `pre_mlp_layernorm` and `post_mlp_layernorm` around the MLP);
/// sliding layers (window `sliding_window`, 1024) from `layer_types`, else every
/// `global_attn_every_n_layers`th (4) layer full, RoPE on the sliding layers only; the first
/// `num_dense_layers` (1) layers a dense MLP, the others `num_experts` (64) experts of
/// `moe_intermediate_size` (1408) under `mlp.experts.{e}`, routed by sigmoid scores with
/// `mlp.expert_bias` added for the choice of the top `num_experts_per_tok` (6), renormalized and
/// scaled by `route_scale` (1), beside `num_shared_experts` (2) experts' width of shared MLP;
/// embeddings times sqrt(hidden) when `mup_enabled`; head_dim 128, rms eps 1e-5, 16384
/// positions when absent.
pub const AFMOE: DecoderFamily = DecoderFamily {
    model_types: &["afmoe"],
    names: NameTable {
        qk_norm: Some(PER_HEAD_QK_NORM),
        norms: BlockNorms {
            before_attention: Some("input_layernorm"),
            after_attention: Some("post_attention_layernorm"),
            before_mlp: Some("pre_mlp_layernorm"),
            after_mlp: Some("post_mlp_layernorm"),
        },
        output_gate: Some("self_attn.gate_proj"),
        mlp: MlpNames::Experts(MoeNames {
            router: "mlp.router.gate",
            shared: Some(SharedExpert { width: SharedWidth::Experts("num_shared_experts", 2), ..DEEPSEEK_SHARED }),
            keys: MoeKeys {
                experts: &["num_experts"],
                experts_default: 64,
                top_k_default: 6,
                normalize: TopKNorm::Always,
                intermediate: &["moe_intermediate_size"],
                intermediate_default: Some(1408),
                sparse: SparseLayers::FirstDense { key: "num_dense_layers", default: 1 },
                routing: Routing::Grouped(GroupedRouting {
                    sigmoid: true,
                    f32_router: false,
                    bias: Some("mlp.expert_bias"),
                    choose_on_logits: false,
                    bias_optional: false,
                    group_best: 1,
                    method: None,
                    groups: None,
                    scale: Some(Key { name: "route_scale", default: Some(1.0) }),
                }),
                activation: ExpertActivation::Gated,
            },
            ..DEEPSEEK_V3_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        head_dim_default: Some(128),
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-5) }),
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(16384))],
        // `attention_bias` (default false) biases q, k, v and o; the gate never has one.
        qkv_bias: Bias::Config("attention_bias"),
        o_bias: Bias::Config("attention_bias"),
        mlp_bias: Bias::Never,
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: Scaling { embedding: EmbeddingScale::SqrtHiddenIf("mup_enabled"), ..NO_SCALING },
    layers: LayerKinds {
        full_every: Some(FullEvery { keys: &["global_attn_every_n_layers"], default: 4, first: false }),
        default_window: Some(1024),
        rope_layers: RopeLayers::Sliding,
        ..UNIFORM_LAYERS
    },
};

/// FlexOlmo: OLMo 2's blocks (norms after attention and after the MLP only, q/k RMSNorms over
/// the whole projections, no clip) with OLMoE's mixture in every layer under `FlexOlmoConfig`'s
/// defaults: `num_experts` (7) of `intermediate_size`, top `num_experts_per_tok` (5),
/// renormalized per `norm_topk_prob` (false); `rms_norm_eps` 1e-6, RoPE theta 500000,
/// `max_position_embeddings` 4096.
pub const FLEX_OLMO: DecoderFamily = DecoderFamily {
    model_types: &["flex_olmo"],
    names: NameTable {
        mlp: MlpNames::Experts(MoeNames { keys: MoeKeys { experts_default: 7, top_k_default: 5, ..OLMOE_EXPERTS.keys }, ..OLMOE_EXPERTS }),
        ..OLMO2.names
    },
    layout: Layout {
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(4096))],
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-6) }),
        rope_default: RopeDefault { theta: 500000.0, ..LLAMA_LAYOUT.rope_default },
        ..OLMO2.layout
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// GLM-4.7-Flash's latent attention: DeepSeek-V3's names, `Glm4MoeLiteConfig`'s sizes.
const GLM4_MOE_LITE_LATENT: LatentNames = LatentNames {
    defaults: LatentSizes { q_rank: Some(768), kv_rank: 512, nope: 192, rope: 64, v: 256, interleaved: true },
    ..DEEPSEEK_V3_LATENT
};

/// GLM-4.7-Flash (`glm4_moe_lite`): DeepSeek-V3's latent attention with the GLM-4.5 mixture
/// (64 experts of 1536, top 4, `routed_scaling_factor` 1.8), dense or sparse per layer as
/// `mlp_layer_types` says (default: the first dense), `rms_norm_eps` 1e-5; the multi-token
/// prediction layers left unread.
pub const GLM4_MOE_LITE: DecoderFamily = DecoderFamily {
    model_types: &["glm4_moe_lite"],
    names: NameTable {
        attention: AttentionNames::Latent(&GLM4_MOE_LITE_LATENT),
        mlp: MlpNames::Experts(MoeNames {
            keys: MoeKeys {
                experts_default: 64,
                top_k_default: 4,
                intermediate_default: Some(1536),
                sparse: SparseLayers::Types { key: "mlp_layer_types", default_dense: (None, 1) },
                routing: Routing::Grouped(GroupedRouting { scale: Some(Key { name: "routed_scaling_factor", default: Some(1.8) }), ..GLM4_MOE_ROUTING }),
                ..GLM4_MOE_EXPERTS.keys
            },
            ..GLM4_MOE_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    // `Glm4MoeLiteConfig.attribute_map` reads a `head_dim` key as `qk_rope_head_dim`.
    layout: Layout { key_defaults: &[("max_position_embeddings", KeyDefault::Count(202752))],
        key_aliases: &[("head_dim", "qk_rope_head_dim")],
        mlp_bias: Bias::Never,
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-5) }),
        prediction_layers: Some((MTP_KEYS, 1)),
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// Mistral 4's RoPE when config.json gives none (`Mistral4Config`): YaRN x128 over 8192
/// positions (`mscale` / `mscale_all_dim` 1, beta 32/1) at theta 10000, and the query
/// scaling's beta 0.1.
const MISTRAL4_ROPE: &str = r#"{"rope_type":"yarn","rope_theta":10000.0,"factor":128.0,"original_max_position_embeddings":8192,"beta_fast":32.0,"beta_slow":1.0,"mscale":1.0,"mscale_all_dim":1.0,"llama_4_scaling_beta":0.1}"#;

/// Mistral 4's latent attention: DeepSeek-V3's names, `Mistral4Config`'s sizes.
const MISTRAL4_LATENT: LatentNames = LatentNames {
    defaults: LatentSizes { q_rank: Some(1024), kv_rank: 256, nope: 64, rope: 64, v: 128, interleaved: true },
    ..DEEPSEEK_V3_LATENT
};

/// Mistral 4 (also a `mistral3` checkpoint's `text_config`): DeepSeek-V3's latent attention with
/// Ministral 3's query scaling by position (`llama_4_scaling_beta` over the RoPE's
/// `original_max_position_embeddings`, applied to the whole query), and a mixture of
/// `n_routed_experts` (128) of `moe_intermediate_size` (2048) routed by a softmax over groups
/// scored by their best two (no correction), `norm_topk_prob` (true), `routed_scaling_factor`
/// (1.0), one shared expert's width, the first `first_k_dense_replace` (0) layers dense; the
/// experts stored as transformers keeps them, stacked (`mlp.experts.gate_up_proj` `[E, 2 * inter,
/// hidden]`, `down_proj` `[E, hidden, inter]`).
pub const MISTRAL4: DecoderFamily = DecoderFamily {
    model_types: &["mistral4"],
    names: NameTable {
        attention: AttentionNames::Latent(&MISTRAL4_LATENT),
        mlp: MlpNames::Experts(MoeNames {
            experts: ExpertNames::Stacked { experts: "mlp.experts", gate_up: "mlp.experts.gate_up_proj", down: "mlp.experts.down_proj" },
            keys: MoeKeys {
                experts_default: 128,
                top_k_default: 4,
                intermediate_default: Some(2048),
                sparse: SparseLayers::FirstDense { key: "first_k_dense_replace", default: 0 },
                routing: Routing::Grouped(GroupedRouting { sigmoid: false, f32_router: false, bias: None, ..GLM4_MOE_ROUTING }),
                ..GLM4_MOE_EXPERTS.keys
            },
            ..GLM4_MOE_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        mlp_bias: Bias::Never,
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(1048576))],
        rope_default: RopeDefault { theta: 10000.0, scaling: Some(MISTRAL4_ROPE), renamed: &[], ntk_alpha: false },
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: Scaling { query_position: Some(QueryPositionScale { beta: "llama_4_scaling_beta", original: "original_max_position_embeddings" }), ..NO_SCALING },
    layers: FULL_ATTENTION_LAYERS,
};

/// OLMoE's mixture (`OlmoeConfig`'s defaults): `num_experts` (64) experts of
/// `intermediate_size` in every layer, softmax top `num_experts_per_tok` (8), renormalized per
/// `norm_topk_prob` (false).
const OLMOE_EXPERTS: MoeNames = MoeNames {
    router: "mlp.gate",
    router_bias: false,
    experts: ExpertNames::PerExpert { expert: "mlp.experts.{e}", gate: "gate_proj", up: "up_proj", down: "down_proj" },
    shared: None,
    dense: None,
    keys: MoeKeys {
        experts: &["num_experts", "num_local_experts"],
        experts_default: 64,
        top_k_default: 8,
        normalize: TopKNorm::Key("norm_topk_prob", false),
        intermediate: &[],
        intermediate_default: None,
        sparse: SparseLayers::All,
        routing: Routing::SoftmaxTopK,
        activation: ExpertActivation::Gated,
    },
};

/// OLMoE: Llama's pre-norm blocks with RMSNorms over the whole q and k projections,
/// `clip_qkv` (when set) clamping q and k after those norms and v after its projection, and a
/// mixture of `num_experts` (64) experts of `intermediate_size` in every layer, softmax top
/// `num_experts_per_tok` (8), renormalized per `norm_topk_prob` (default false); `rms_norm_eps`
/// 1e-5 when absent (defaults from `OlmoeConfig`).
pub const OLMOE: DecoderFamily = DecoderFamily {
    model_types: &["olmoe"],
    names: NameTable {
        qk_norm: Some(QkNorm { q: "self_attn.q_norm", k: "self_attn.k_norm", over: NormOver::Projection, when: None, after_rope: false }),
        mlp: MlpNames::Experts(OLMOE_EXPERTS),
        ..LLAMA_NAMES
    },
    layout: Layout { key_defaults: &[("max_position_embeddings", KeyDefault::Count(4096))],
        mlp_bias: Bias::Never,
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-5) }),
        clip_qkv: Some("clip_qkv"),
        clip_after_qk_norm: true,
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// Youtu-LLM: DeepSeek-V3's latent attention (`YoutuConfig`'s sizes, those of DeepSeek-V3)
/// in Llama's dense blocks (a gated MLP without biases), tied embeddings by default.
pub const YOUTU: DecoderFamily = DecoderFamily {
    model_types: &["youtu"],
    names: NameTable { attention: AttentionNames::Latent(&DEEPSEEK_V3_LATENT), ..LLAMA_NAMES },
    layout: Layout { key_defaults: &[("max_position_embeddings", KeyDefault::Count(131072))], mlp_bias: Bias::Never, tie_default: true, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// ERNIE 4.5 MoE (ERNIE-4.5-21B-A3B, 300B-A47B): ERNIE 4.5's attention (biases on q/k/v/o and the
/// head per `use_bias`, RoPE on interleaved pairs, head_dim 128 and theta 500000 when absent, tied
/// head by default); `moe_num_experts` (64) of `moe_intermediate_size` (1536), top `moe_k` (6),
/// routed by a softmax in f32 with `mlp.moe_statics.e_score_correction_bias` added for the choice
/// only, the chosen probabilities renormalized (`moe_norm_min` 1e-12 as the floor of their sum:
/// never reached, so a plain division); `moe_num_shared_experts` (2) experts' width of shared MLP;
/// layer `i` sparse when `(i + 1) % moe_layer_interval == 0` and `moe_layer_start_index <= i <=
/// moe_layer_end_index` (1, 1, -1 = the last), else the dense MLP (defaults from
/// `Ernie4_5_MoeConfig`).
pub const ERNIE4_5_MOE: DecoderFamily = DecoderFamily {
    model_types: &["ernie4_5_moe"],
    names: NameTable {
        mlp: MlpNames::Experts(MoeNames {
            shared: Some(SharedExpert { width: SharedWidth::Experts("moe_num_shared_experts", 2), ..DEEPSEEK_SHARED }),
            keys: MoeKeys {
                experts: &["moe_num_experts", "num_experts"],
                experts_default: 64,
                top_k_default: 6,
                normalize: TopKNorm::Always,
                intermediate_default: Some(1536),
                sparse: SparseLayers::Interval { start: ("moe_layer_start_index", 1), end: "moe_layer_end_index", interval: ("moe_layer_interval", 1) },
                routing: Routing::Grouped(GroupedRouting {
                    sigmoid: false,
                    bias: Some("mlp.moe_statics.e_score_correction_bias"),
                    choose_on_logits: false,
                    bias_optional: false,
                    group_best: 1,
                    groups: None,
                    scale: None,
                    ..DEEPSEEK_V3_ROUTING
                }),
                ..DEEPSEEK_V3_EXPERTS.keys
            },
            ..DEEPSEEK_V3_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        lm_head_bias: Bias::Config("use_bias"),
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-5) }),
        key_aliases: &[("moe_k", "num_experts_per_tok")],
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(131072))],
        rope_default: RopeDefault { theta: 500000.0, ..LLAMA_LAYOUT.rope_default },
        ..ERNIE4_5.layout
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// Apertus (Swiss AI): Llama attention (biases per `attention_bias`) with per-head q/k RMSNorms
/// before RoPE, norms named `attention_layernorm` / `feedforward_layernorm`, a plain MLP
/// `down(act(up(x)))` whose `hidden_act` is xIELU (default) with four learned scalars per layer
/// (`mlp.act_fn.alpha_p`, `alpha_n`, `beta`, `eps`), `rms_norm_eps` 1e-5 and the Llama 3 RoPE
/// above when absent.
pub const APERTUS: DecoderFamily = DecoderFamily {
    model_types: &["apertus"],
    names: NameTable {
        qk_norm: Some(PER_HEAD_QK_NORM),
        norms: BlockNorms { before_attention: Some("attention_layernorm"), after_attention: None, before_mlp: Some("feedforward_layernorm"), after_mlp: None },
        mlp: MlpNames::PlainParametric { up: "mlp.up_proj", down: "mlp.down_proj", act: "mlp.act_fn" },
        ..LLAMA_NAMES
    },
    layout: Layout {
        mlp_bias: Bias::Never,
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-5) }),
        activation: Some(("hidden_act", crate::Activation::Xielu)),
        rope_default: RopeDefault { theta: 12000000.0, scaling: Some(APERTUS_ROPE), renamed: &[], ntk_alpha: false },
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(65536))],
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// GPT-NeoX (Pythia, GPT-NeoX-20B and their fine-tunes): LayerNorms with bias before attention
/// and the MLP, one `query_key_value` projection laid out per head (`[heads, 3, head_dim]` rows),
/// q/k/v and `dense` biases per `attention_bias` (default true), a plain biased MLP
/// (`dense_h_to_4h`, `hidden_act` default exact GELU, `dense_4h_to_h`), RoPE (rotate-half) on
/// the first `rotary_pct` of each head (default 0.25) at `rotary_emb_base` (default 10000), the
/// head `embed_out`; attention and the MLP in parallel from their own norms when
/// `use_parallel_residual` (default true), in sequence otherwise (`GPTNeoXLayer`).
pub const GPT_NEOX: DecoderFamily = DecoderFamily {
    model_types: &["gpt_neox"],
    names: NameTable {
        embed_tokens: "gpt_neox.embed_in.weight",
        embed_positions: None,
        layer: "gpt_neox.layers.{i}",
        attention: AttentionNames::FusedPerHead { qkv: "attention.query_key_value" },
        o_proj: "attention.dense",
        qk_norm: None,
        norms: PRE_NORMS,
        mlp: MlpNames::Plain { up: "mlp.dense_h_to_4h", down: "mlp.dense_4h_to_h" },
        sinks: None,
        output_gate: None,
        final_norm: "gpt_neox.final_layer_norm",
        lm_head: "embed_out",
    },
    layout: Layout {
        norm: NormKind::Layer,
        norm_eps: NormEps::Key(Key { name: "layer_norm_eps", default: Some(1e-5) }),
        qkv_bias: Bias::ConfigOr("attention_bias", true),
        o_bias: Bias::ConfigOr("attention_bias", true),
        mlp_bias: Bias::Always,
        partial_rotary_default: 0.25,
        block: BlockShape::Sequential,
        block_when: Some(BlockSwitch { key: "use_parallel_residual", default: true, on: BlockShape::Parallel }),
        key_aliases: &[("rotary_pct", "partial_rotary_factor"), ("rotary_emb_base", "rope_theta")],
        ignored_keys: &["num_key_value_heads"],
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: &[
        Unused { prefix: "", suffix: "rotary_emb.inv_freq", reason: "a RoPE buffer; the cos/sin caches are recomputed from config.json" },
        Unused { prefix: "", suffix: ".attention.bias", reason: "GPT-NeoX's causal-mask buffer (older checkpoints); the graph builds its own mask" },
        Unused { prefix: "", suffix: ".attention.masked_bias", reason: "GPT-NeoX's mask fill-value buffer (older checkpoints); the graph builds its own mask" },
    ],
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// BLOOM's config switches this build does not follow, and its derived keys: the MLP is
/// always 4 x hidden wide (`BloomMLP`; BLOOM configs have no width key), and
/// `apply_residual_connection_post_layernorm` (the normed input as the residual, which no
/// published BLOOM sets) is refused.
fn bloom_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    match map.get("apply_residual_connection_post_layernorm") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(v) => return Err(format!("key `apply_residual_connection_post_layernorm` is {v}: BLOOM's block whose residual is the normed input is not built; the standard one (false) is")),
    }
    // `BloomConfig.__post_init__`: `n_embed`, when given, is the width.
    if let Some(width) = map.get("n_embed").filter(|v| !v.is_null()).cloned() {
        map.insert("hidden_size".into(), width);
    }
    if let Some(hidden) = map.get("hidden_size").and_then(Value::as_u64) {
        map.insert("intermediate_size".into(), Value::from(4 * hidden));
    }
    Ok(())
}

/// BLOOM (`BloomConfig`; BLOOM, BLOOMZ and their fine-tunes): no position embeddings but
/// BLOOM's ALiBi ([`Alibi::Bloom`]: a per-head bias over each key's position among the kept
/// keys), a LayerNorm on the word embeddings (`word_embeddings_layernorm`), LayerNorms with bias
/// before attention and the MLP (`layer_norm_epsilon`), q/k/v in one biased
/// `self_attention.query_key_value` laid out per head (`[heads, 3, head_dim]` rows, GPT-NeoX's),
/// a biased `dense`, a plain biased tanh-GELU MLP `dense_h_to_4h` / `dense_4h_to_h` 4 x hidden
/// wide, `ln_f`, the head tied by default; checkpoints saved from the bare model lack
/// `transformer.` ([`bloom_config`] for what is refused). ALiBi has no position table, so the
/// context is `seq_length` when given, else 2048 (BLOOM's training length).
pub const BLOOM: DecoderFamily = DecoderFamily {
    model_types: &["bloom"],
    names: NameTable {
        embed_tokens: "transformer.word_embeddings.weight",
        embed_positions: None,
        layer: "transformer.h.{i}",
        attention: AttentionNames::FusedPerHead { qkv: "self_attention.query_key_value" },
        o_proj: "self_attention.dense",
        qk_norm: None,
        norms: PRE_NORMS,
        mlp: MlpNames::Plain { up: "mlp.dense_h_to_4h", down: "mlp.dense_4h_to_h" },
        sinks: None,
        output_gate: None,
        final_norm: "transformer.ln_f",
        lm_head: "lm_head",
    },
    layout: Layout {
        norm: NormKind::Layer,
        norm_eps: NormEps::Key(Key { name: "layer_norm_epsilon", default: Some(1e-5) }),
        positions: Positions::Alibi(Alibi::Bloom),
        qkv_bias: Bias::Always,
        o_bias: Bias::Always,
        mlp_bias: Bias::Always,
        tie_default: true,
        // `BloomGelu`: the tanh approximation, whatever `hidden_act` a config carries.
        activation: Some(("hidden_act", crate::Activation::GeluTanh)),
        key_aliases: &[("seq_length", "max_position_embeddings")],
        ignored_keys: &["hidden_act", "num_key_value_heads", "intermediate_size", "n_inner", "max_position_embeddings"],
        config_rule: Some(bloom_config),
        embedding_norm: Some("transformer.word_embeddings_layernorm"),
        ..LLAMA_LAYOUT
    },
    optional_prefix: Some("transformer."),
    unused: &[],
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// MPT's config as transformers' `MptModel` reads it, and what that reading does not cover,
/// refused by key: the nested `attn_config`'s `clip_qkv` and `softmax_scale` become top-level
/// keys (`clip_qkv` 0 or null: no clamp); the MLP is 4 x hidden. transformers applies ALiBi
/// with `alibi_bias_max` 8, multi-head attention and no biases whatever the config says, so a
/// config that says otherwise (`alibi` false: learned positions; `attn_type`
/// `multiquery_attention`; `alibi_bias_max` other than 8; `no_bias` false; `expansion_ratio`
/// other than 4) describes a model transformers does not run, and is refused; so are the
/// switches it does not implement (`qk_ln`, `prefix_lm`, `attn_uses_sequence_id`, a
/// `logit_scale`).
fn mpt_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    let attn = match map.get("attn_config") {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(v) => return Err(format!("key `attn_config` must be an object, found {v}")),
    };
    let flag = |key: &str, default: bool| match attn.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(format!("key `attn_config.{key}` must be true or false, found {v}")),
    };
    if !flag("alibi", true)? {
        return Err("key `attn_config.alibi` is false: MPT with learned positions is not built (transformers' MptModel applies ALiBi whatever this key says, so it does not run such a checkpoint either)".into());
    }
    for (key, what) in [("qk_ln", "layer norms on q and k"), ("prefix_lm", "prefix-LM attention"), ("attn_uses_sequence_id", "attention within sequence ids")] {
        if flag(key, false)? {
            return Err(format!("key `attn_config.{key}` is true: MPT's {what} is not built (transformers' MptModel has none)"));
        }
    }
    match attn.get("attn_type") {
        None | Some(Value::Null) => {}
        Some(Value::String(t)) if t == "multihead_attention" => {}
        Some(v) => return Err(format!("key `attn_config.attn_type` is {v}: only `multihead_attention` is built (transformers' MptAttention splits Wqkv into three equal parts)")),
    }
    let number = |v: Option<&Value>| v.filter(|v| !v.is_null()).map(|v| v.as_f64().ok_or_else(|| format!("must be a number, found {v}"))).transpose();
    if let Some(max) = number(attn.get("alibi_bias_max")).map_err(|e| format!("key `attn_config.alibi_bias_max` {e}"))? {
        if max != 8.0 {
            return Err(format!("key `attn_config.alibi_bias_max` is {max}: transformers' MptModel builds its ALiBi slopes with 8 whatever this key says, so only 8 is built"));
        }
    }
    if let Some(ratio) = number(map.get("expansion_ratio")).map_err(|e| format!("key `expansion_ratio` {e}"))? {
        if ratio != 4.0 {
            return Err(format!("key `expansion_ratio` is {ratio}: transformers' MptMLP is 4 x hidden wide whatever this key says, so only 4 is built"));
        }
    }
    if map.get("no_bias").is_some_and(|v| v == &Value::Bool(false)) {
        return Err("key `no_bias` is false: transformers' MPT layers have no biases whatever this key says, so only `no_bias: true` is built".into());
    }
    if map.get("logit_scale").is_some_and(|v| !v.is_null()) {
        return Err(format!("key `logit_scale` is {}: MPT's logit scaling is not built (transformers' MptForCausalLM does not apply it)", map["logit_scale"]));
    }
    for key in ["clip_qkv", "softmax_scale"] {
        match number(attn.get(key)).map_err(|e| format!("key `attn_config.{key}` {e}"))? {
            // transformers' truth test: a clip of 0 is no clip.
            Some(v) if !(key == "clip_qkv" && v == 0.0) => {
                map.insert(key.into(), Value::from(v));
            }
            _ => {
                map.remove(key);
            }
        }
    }
    if let Some(hidden) = map.get("d_model").or(map.get("hidden_size")).and_then(Value::as_u64) {
        map.insert("intermediate_size".into(), Value::from(4 * hidden));
    }
    Ok(())
}

/// MPT (`MptConfig`; MPT-7B and MPT-30B and their fine-tunes): no position embeddings but MPT's
/// ALiBi ([`Alibi::Mpt`]: slopes `2^(-8 i / p)` at each key's slot relative to the query's),
/// LayerNorms
/// without bias (`norm_1`, `norm_2`, `norm_f`; `layer_norm_epsilon`), q/k/v stacked in one
/// `attn.Wqkv` (clamped to `clip_qkv` when set), `out_proj`, an exact-GELU MLP `ffn.up_proj` /
/// `ffn.down_proj` 4 x hidden wide, no biases, the softmax scale `softmax_scale` else
/// `1 / sqrt(head_dim)`, the head tied by default; config keys `d_model`, `n_heads`,
/// `n_layers`, `max_seq_len` (the context: transformers' ALiBi table ends there), the
/// attention's in `attn_config` ([`mpt_config`]).
pub const MPT: DecoderFamily = DecoderFamily {
    model_types: &["mpt"],
    names: NameTable {
        embed_tokens: "transformer.wte.weight",
        embed_positions: None,
        layer: "transformer.blocks.{i}",
        attention: AttentionNames::Fused { qkv: "attn.Wqkv" },
        o_proj: "attn.out_proj",
        qk_norm: None,
        norms: BlockNorms { before_attention: Some("norm_1"), after_attention: None, before_mlp: Some("norm_2"), after_mlp: None },
        mlp: MlpNames::Plain { up: "ffn.up_proj", down: "ffn.down_proj" },
        sinks: None,
        output_gate: None,
        final_norm: "transformer.norm_f",
        lm_head: "lm_head",
    },
    layout: Layout {
        norm: NormKind::LayerNoBias,
        norm_eps: NormEps::Key(Key { name: "layer_norm_epsilon", default: Some(1e-5) }),
        positions: Positions::Alibi(Alibi::Mpt),
        qkv_bias: Bias::Never,
        o_bias: Bias::Never,
        mlp_bias: Bias::Never,
        tie_default: true,
        // `nn.GELU(approximate="none")`, whatever `hidden_act` a config carries.
        activation: Some(("hidden_act", crate::Activation::Gelu)),
        clip_qkv: Some("clip_qkv"),
        key_aliases: &[("d_model", "hidden_size"), ("n_heads", "num_attention_heads"), ("n_layers", "num_hidden_layers"), ("max_seq_len", "max_position_embeddings")],
        ignored_keys: &["hidden_act", "num_key_value_heads", "intermediate_size", "max_position_embeddings", "clip_qkv", "softmax_scale"],
        key_defaults: &[("max_seq_len", KeyDefault::Count(2048))],
        config_rule: Some(mpt_config),
        ..LLAMA_LAYOUT
    },
    optional_prefix: Some("transformer."),
    unused: &[],
    scaling: Scaling { attention: AttentionScale::Key(Key { name: "softmax_scale", default: None }), ..NO_SCALING },
    layers: FULL_ATTENTION_LAYERS,
};

/// DBRX's config: the attention's and the mixture's keys live in the nested `attn_config` and
/// `ffn_config` objects, read here as the generic keys (`kv_n_heads` -> `num_key_value_heads`,
/// default 1; `clip_qkv`; `ffn_hidden_size`; `moe_num_experts`; `moe_top_k` ->
/// `num_experts_per_tok`; `ffn_act_fn.name` -> `hidden_act`, default SiLU;
/// `moe_normalize_expert_weights` 1 -> renormalized top-k, null -> not). The RoPE base is the
/// top-level one when config.json gives it (as transformers 5.25 reads it), else
/// `attn_config.rope_theta`, where every published DBRX config writes it (Databricks' code and
/// transformers 4.x read it there; transformers 5.25 ignores it and rotates at 10000). Refused:
/// a p-norm of the top-k weights other than 1, activation options beyond the name, a tied head
/// (transformers refuses it).
fn dbrx_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    let object = |map: &serde_json::Map<String, Value>, key: &str| match map.get(key) {
        None | Some(Value::Null) => Ok(serde_json::Map::new()),
        Some(Value::Object(o)) => Ok(o.clone()),
        Some(v) => Err(format!("key `{key}` must be an object, found {v}")),
    };
    let (attn, ffn) = (object(map, "attn_config")?, object(map, "ffn_config")?);
    let given = |o: &serde_json::Map<String, Value>, key: &str| o.get(key).filter(|v| !v.is_null()).cloned();
    map.insert("num_key_value_heads".into(), given(&attn, "kv_n_heads").unwrap_or(Value::from(1)));
    if let Some(clip) = given(&attn, "clip_qkv") {
        map.insert("clip_qkv".into(), clip);
    }
    let top_theta = map.contains_key("rope_theta") || map.get("rope_parameters").and_then(|p| p.get("rope_theta")).is_some();
    if let (false, Some(theta)) = (top_theta, given(&attn, "rope_theta")) {
        map.insert("rope_theta".into(), theta);
    }
    for (nested, generic, default) in [("ffn_hidden_size", "ffn_hidden_size", 3584u64), ("moe_num_experts", "moe_num_experts", 4), ("moe_top_k", "num_experts_per_tok", 1)] {
        map.insert(generic.into(), given(&ffn, nested).unwrap_or(Value::from(default)));
    }
    map.insert("intermediate_size".into(), map["ffn_hidden_size"].clone());
    let norm = match ffn.get("moe_normalize_expert_weights") {
        // DbrxFFNConfig's default: 1.
        None => true,
        Some(Value::Null) => false,
        Some(v) if v.as_f64() == Some(1.0) => true,
        Some(v) => return Err(format!("key `ffn_config.moe_normalize_expert_weights` is {v}: only the 1-norm (the top-k weights renormalized to sum to 1) or null is built")),
    };
    map.insert("norm_topk_prob".into(), Value::Bool(norm));
    match ffn.get("ffn_act_fn") {
        None | Some(Value::Null) => {
            map.insert("hidden_act".into(), Value::from("silu"));
        }
        Some(Value::Object(act)) if act.keys().all(|k| k == "name") => {
            map.insert("hidden_act".into(), act.get("name").cloned().unwrap_or(Value::from("silu")));
        }
        Some(v) => return Err(format!("key `ffn_config.ffn_act_fn` is {v}: only an activation named by `name` alone is built")),
    }
    if map.get("tie_word_embeddings") == Some(&Value::Bool(true)) {
        return Err("key `tie_word_embeddings` is true: DBRX's head is its own (transformers refuses a tied DBRX)".into());
    }
    Ok(())
}

/// DBRX's mixture: the router `ffn.router.layer`, every expert's rows in `ffn.experts.mlp.w1`
/// (gate), `v1` (up) and `w2` (down), softmax top-k renormalized as `norm_topk_prob` says
/// ([`dbrx_config`]).
const DBRX_MOE: MoeNames = MoeNames {
    router: "ffn.router.layer",
    router_bias: false,
    experts: ExpertNames::Rows { experts: "ffn.experts", gate: "ffn.experts.mlp.w1", up: "ffn.experts.mlp.v1", down: "ffn.experts.mlp.w2" },
    shared: None,
    dense: None,
    keys: MoeKeys {
        experts: &["moe_num_experts"],
        experts_default: 4,
        top_k_default: 1,
        normalize: TopKNorm::Key("norm_topk_prob", true),
        intermediate: &["ffn_hidden_size"],
        intermediate_default: Some(3584),
        ..MIXTRAL_KEYS
    },
};

/// DBRX (`DbrxConfig`; databricks/dbrx-base and -instruct): LayerNorms without bias at torch's
/// epsilon 1e-5 (`norm_attn_norm.norm_1`, `norm_2`, `transformer.norm_f`), q/k/v stacked in one
/// `attn.Wqkv` (grouped: `kv_n_heads`) clamped to `clip_qkv` when set, rotate-half RoPE, no
/// biases, in every layer a mixture of `moe_num_experts` SiLU-gated experts routed top
/// `moe_top_k` ([`DBRX_MOE`]), an untied head; config keys `d_model`, `n_heads`, `n_layers`,
/// `max_seq_len`, the nested ones read by [`dbrx_config`].
pub const DBRX: DecoderFamily = DecoderFamily {
    model_types: &["dbrx"],
    names: NameTable {
        embed_tokens: "transformer.wte.weight",
        embed_positions: None,
        layer: "transformer.blocks.{i}",
        attention: AttentionNames::Fused { qkv: "norm_attn_norm.attn.Wqkv" },
        o_proj: "norm_attn_norm.attn.out_proj",
        qk_norm: None,
        norms: BlockNorms { before_attention: Some("norm_attn_norm.norm_1"), after_attention: None, before_mlp: Some("norm_attn_norm.norm_2"), after_mlp: None },
        mlp: MlpNames::Experts(DBRX_MOE),
        sinks: None,
        output_gate: None,
        final_norm: "transformer.norm_f",
        lm_head: "lm_head",
    },
    layout: Layout {
        norm: NormKind::LayerNoBias,
        norm_eps: NormEps::Fixed(1e-5),
        qkv_bias: Bias::Never,
        o_bias: Bias::Never,
        mlp_bias: Bias::Never,
        clip_qkv: Some("clip_qkv"),
        key_aliases: &[("d_model", "hidden_size"), ("n_heads", "num_attention_heads"), ("n_layers", "num_hidden_layers"), ("max_seq_len", "max_position_embeddings")],
        ignored_keys: &["num_key_value_heads", "intermediate_size", "hidden_act", "clip_qkv", "num_experts_per_tok", "norm_topk_prob", "moe_num_experts", "ffn_hidden_size", "max_position_embeddings"],
        key_defaults: &[("max_seq_len", KeyDefault::Count(2048)), ("vocab_size", KeyDefault::Count(32000))],
        config_rule: Some(dbrx_config),
        ..LLAMA_LAYOUT
    },
    optional_prefix: Some("transformer."),
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// Persimmon (`PersimmonConfig`, adept/persimmon-8b; Fuyu's text model): LayerNorms with bias
/// (`layer_norm_eps`) before attention and the MLP, q/k/v in one biased
/// `self_attn.query_key_value` laid out per head `[q | k | v]` (GPT-NeoX's), q and k each by a
/// LayerNorm over the head (one `[head_dim]` weight and bias shared by the heads, before RoPE)
/// when `qk_layernorm` (default true), rotate-half RoPE on the first `partial_rotary_factor`
/// (default 0.5) of each head, a biased `dense` output, a plain biased squared-ReLU MLP
/// `dense_h_to_4h` / `dense_4h_to_h`, `model.final_layernorm`, an untied head.
pub const PERSIMMON: DecoderFamily = DecoderFamily {
    model_types: &["persimmon"],
    names: NameTable {
        attention: AttentionNames::FusedPerHead { qkv: "self_attn.query_key_value" },
        o_proj: "self_attn.dense",
        qk_norm: Some(QkNorm { q: "self_attn.q_layernorm", k: "self_attn.k_layernorm", over: NormOver::Head, when: Some("qk_layernorm"), after_rope: false }),
        mlp: MlpNames::Plain { up: "mlp.dense_h_to_4h", down: "mlp.dense_4h_to_h" },
        final_norm: "model.final_layernorm",
        ..LLAMA_NAMES
    },
    layout: Layout {
        norm: NormKind::Layer,
        norm_eps: NormEps::Key(Key { name: "layer_norm_eps", default: Some(1e-5) }),
        qkv_bias: Bias::Always,
        o_bias: Bias::Always,
        mlp_bias: Bias::Always,
        partial_rotary_default: 0.5,
        activation: Some(("hidden_act", crate::Activation::Relu2)),
        key_defaults: &[
            ("qk_layernorm", KeyDefault::Flag(true)),
            ("max_position_embeddings", KeyDefault::Count(16384)),
            ("bos_token_id", KeyDefault::Count(1)),
            ("eos_token_id", KeyDefault::Count(2)),
        ],
        ignored_keys: &["num_key_value_heads"],
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// HunYuan dense (Hunyuan 0.5B to 7B): Llama with q/k/v/o biases per `attention_bias`, per-head
/// q/k RMSNorms (`query_layernorm` / `key_layernorm`) applied to the rotated q and k, and
/// `rope_scaling` `dynamic` with an `alpha` read as the fixed NTK stretch of the base
/// (`HunYuanDenseV1RotaryEmbedding`).
pub const HUNYUAN_DENSE: DecoderFamily = DecoderFamily {
    model_types: &["hunyuan_v1_dense"],
    names: NameTable {
        qk_norm: Some(QkNorm { q: "self_attn.query_layernorm", k: "self_attn.key_layernorm", over: NormOver::Head, when: None, after_rope: true }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        mlp_bias: Bias::Never,
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-5) }),
        rope_default: RopeDefault { ntk_alpha: true, ..LLAMA_LAYOUT.rope_default },
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// HunYuan MoE (Hunyuan-A13B): HunYuan dense's attention (per-head q/k RMSNorms on the
/// rotated q and k, q/k/v/o biases per `attention_bias`, the `alpha` NTK RoPE) and in every
/// layer `num_experts` (1) gated experts of `intermediate_size` routed top `moe_topk` (1) by a
/// renormalized softmax of `mlp.gate.wg`, plus a shared gated MLP (`mlp.shared_mlp`) of
/// `intermediate_size` (`HunYuanMoEV1Moe`; transformers reads neither `moe_intermediate_size`
/// nor `num_shared_expert`). `num_experts` and `moe_topk` may be per-layer lists of one value,
/// as Hunyuan-A13B's config writes them.
pub const HUNYUAN_MOE: DecoderFamily = DecoderFamily {
    model_types: &["hunyuan_v1_moe"],
    names: NameTable {
        mlp: MlpNames::Experts(MoeNames {
            router: "mlp.gate.wg",
            router_bias: false,
            experts: DEEPSEEK_V3_EXPERTS.experts,
            shared: Some(SharedExpert {
                mlp: &MlpNames::Gated { gate: "mlp.shared_mlp.gate_proj", up: "mlp.shared_mlp.up_proj", down: "mlp.shared_mlp.down_proj" },
                gate: None,
                width: SharedWidth::Key("intermediate_size", 11008),
                combine: SharedCombine::Sum,
            }),
            dense: None,
            keys: MoeKeys {
                experts: &["num_experts"],
                experts_default: 1,
                top_k_default: 1,
                normalize: TopKNorm::Always,
                intermediate: &[],
                intermediate_default: None,
                sparse: SparseLayers::All,
                routing: Routing::SoftmaxTopK,
                activation: ExpertActivation::Gated,
            },
        }),
        ..HUNYUAN_DENSE.names
    },
    layout: Layout { key_aliases: &[("moe_topk", "num_experts_per_tok")], per_layer_keys: &["num_experts", "moe_topk"], ..HUNYUAN_DENSE.layout },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// GraniteMoE's experts and router (GraniteMoeShared's too).
const GRANITEMOE_EXPERTS: MoeNames = MoeNames {
    router: "block_sparse_moe.router.layer",
    router_bias: false,
    experts: ExpertNames::Stacked { experts: "block_sparse_moe.experts", gate_up: "block_sparse_moe.input_linear.weight", down: "block_sparse_moe.output_linear.weight" },
    shared: None,
    dense: None,
    keys: MIXTRAL_KEYS,
};

/// GraniteMoE (Granite 3.x MoE): Granite's four multipliers and attention (biases per
/// `attention_bias`), every layer's MLP `num_local_experts` gated experts stored as two stacks
/// (`block_sparse_moe.input_linear` gate-then-up, `output_linear`), routed by
/// `block_sparse_moe.router.layer` top-`num_experts_per_tok` with a softmax over the chosen logits
/// (the renormalized top-k probabilities; `GraniteMoeTopKRouter`).
pub const GRANITEMOE: DecoderFamily = DecoderFamily {
    model_types: &["granitemoe"],
    names: NameTable { mlp: MlpNames::Experts(GRANITEMOE_EXPERTS), ..LLAMA_NAMES },
    layout: LLAMA_LAYOUT,
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: GRANITE.scaling,
    layers: FULL_ATTENTION_LAYERS,
};

/// GraniteMoeShared's and GraniteMoeSWA's shared MLP: gate and up in one projection
/// (`shared_mlp.input_linear`, gate rows first), `output_linear`, `shared_intermediate_size`
/// wide (0, the default: none).
const GRANITE_SHARED_MLP: SharedExpert = SharedExpert {
    mlp: &MlpNames::GatedFused { gate_up: "shared_mlp.input_linear", down: "shared_mlp.output_linear" },
    gate: None,
    width: SharedWidth::Key("shared_intermediate_size", 0),
    combine: SharedCombine::Sum,
};

/// GraniteMoeShared (`GraniteMoeSharedConfig`): GraniteMoE with a shared MLP beside the
/// experts, `shared_mlp.input_linear` (`[2 * width, hidden]`, gate rows then up rows) and
/// `shared_mlp.output_linear`, `shared_intermediate_size` wide (0, the default: none), its output
/// added to the experts' before the residual multiplier.
pub const GRANITEMOESHARED: DecoderFamily = DecoderFamily {
    model_types: &["granitemoeshared"],
    names: NameTable {
        mlp: MlpNames::Experts(MoeNames {
            shared: Some(GRANITE_SHARED_MLP),
            ..GRANITEMOE_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    ..GRANITEMOE
};

/// GraniteMoeHybrid (Granite 4.0) built when it has no Mamba2 layers: `layer_types` must list
/// `attention` (or `full_attention`) for every layer; a `mamba` / `linear_attention` layer is
/// refused by its index (the Granite 4.0-H hybrids), and so is a config without the list
/// (`GraniteMoeHybridConfig` then makes every layer Mamba2). RoPE only when
/// `position_embedding_type` is `rope` (null, the default, or `nope`: none on any layer, written
/// as an all-zero `no_rope_layers`). With `num_local_experts` 0 (granite-4.0-micro) every layer's
/// MLP is the shared one alone: the layers are written dense and `intermediate_size` becomes
/// `shared_intermediate_size` (transformers builds no experts then and reads no
/// `intermediate_size`) and the expert counts are dropped (nothing routes); otherwise every
/// layer is sparse, the experts beside the shared MLP.
fn granitemoehybrid_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    let count = |map: &serde_json::Map<String, Value>, key: &str| match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| format!("key `{key}` must be a whole number, found {v}")),
    };
    let Some(layers) = count(map, "num_hidden_layers")? else { return Ok(()) };
    let layers = layers as usize;
    // `layers_block_type` is the class's other spelling (its attribute map).
    if map.get("layer_types").is_none_or(Value::is_null) {
        if let Some(v) = map.get("layers_block_type").filter(|v| !v.is_null()).cloned() {
            map.insert("layer_types".into(), v);
        }
    }
    match map.get("layer_types") {
        None | Some(Value::Null) => {
            return Err("key `layer_types` is missing: GraniteMoeHybridConfig's default is a Mamba2 layer everywhere, which is not built; Granite 4.0's attention-only checkpoints (granite-4.0-micro, -350m, -1b) list `attention` for each layer".into())
        }
        Some(Value::Array(items)) if items.len() == layers => {
            for (i, v) in items.iter().enumerate() {
                match v.as_str() {
                    Some("attention" | "full_attention") => {}
                    Some(t @ ("mamba" | "linear_attention")) => {
                        return Err(format!("layer {i} is a Mamba2 layer (`layer_types` says `{t}`): the hybrid Granite 4.0-H checkpoints are not built (no Mamba2 block yet); the attention-only Granite 4.0 ones are"))
                    }
                    _ => return Err(format!("key `layer_types` holds {v} at layer {i}; supported: \"attention\" (Mamba2 layers are not built)")),
                }
            }
        }
        Some(v) => return Err(format!("key `layer_types` must list \"attention\" for each of the {layers} layers, found {v}")),
    }
    map.insert("layer_types".into(), Value::from(vec!["full_attention"; layers]));
    let rope = match map.get("position_embedding_type") {
        None | Some(Value::Null) => false,
        Some(Value::String(t)) if t == "rope" => true,
        Some(Value::String(t)) if t == "nope" => false,
        Some(v) => return Err(format!("key `position_embedding_type` is {v}; supported: \"rope\", \"nope\" or null (no RoPE)")),
    };
    map.insert("no_rope_layers".into(), Value::from(vec![u64::from(rope); layers]));
    let experts = count(map, "num_local_experts")?.unwrap_or(8);
    let kind = if experts == 0 {
        let shared = count(map, "shared_intermediate_size")?.unwrap_or(1024);
        if shared == 0 {
            return Err("keys `num_local_experts` and `shared_intermediate_size` are both 0: the layers would have no MLP".into());
        }
        map.insert("intermediate_size".into(), Value::from(shared));
        // No layer routes: the counts (0, which the mixture's reading refuses) are read by none.
        map.remove("num_local_experts");
        map.remove("num_experts_per_tok");
        "dense"
    } else {
        "sparse"
    };
    map.insert("mlp_layer_types".into(), Value::from(vec![kind; layers]));
    Ok(())
}

/// GraniteMoeHybrid's shared MLP standing alone (no experts: granite-4.0-micro), as the dense
/// MLP of [`GRANITEMOEHYBRID`]'s layers.
const GRANITE_SHARED_ALONE: MlpNames = MlpNames::GatedFused { gate_up: "shared_mlp.input_linear", down: "shared_mlp.output_linear" };

/// GraniteMoeHybrid (`GraniteMoeHybridConfig`, Granite 4.0) without Mamba2 layers, as
/// [`granitemoehybrid_config`] reads it: Granite's multipliers and attention (RoPE per
/// `position_embedding_type`), GraniteMoE's experts beside GraniteMoeShared's shared MLP
/// (`shared_intermediate_size`, 1024 by default), or the shared MLP alone with no experts.
pub const GRANITEMOEHYBRID: DecoderFamily = DecoderFamily {
    model_types: &["granitemoehybrid"],
    names: NameTable {
        mlp: MlpNames::Experts(MoeNames {
            shared: Some(GRANITE_SHARED_MLP),
            dense: Some(&GRANITE_SHARED_ALONE),
            keys: MoeKeys { sparse: SparseLayers::Types { key: "mlp_layer_types", default_dense: (None, 0) }, ..MIXTRAL_KEYS },
            ..GRANITEMOE_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        // GraniteMoeHybridConfig's defaults for the keys the config rule reads.
        key_defaults: &[
            ("num_local_experts", KeyDefault::Count(8)),
            ("num_experts_per_tok", KeyDefault::Count(2)),
            ("shared_intermediate_size", KeyDefault::Count(1024)),
            ("intermediate_size", KeyDefault::Count(11008)),
            ("bos_token_id", KeyDefault::Count(1)),
            ("eos_token_id", KeyDefault::Count(2)),
        ],
        config_rule: Some(granitemoehybrid_config),
        ..GRANITEMOE.layout
    },
    layers: LayerKinds { no_rope: Some(NoRope { list: "no_rope_layers", interval: "no_rope_layer_interval", interval_default: 1 }), ..FULL_ATTENTION_LAYERS },
    ..GRANITEMOE
};

/// OLMo2: norms after attention and after the MLP (none before), and q/k RMSNorms over the
/// whole projection (all heads at once), before RoPE.
pub const OLMO2: DecoderFamily = DecoderFamily {
    model_types: &["olmo2"],
    names: NameTable {
        qk_norm: Some(QkNorm { q: "self_attn.q_norm", k: "self_attn.k_norm", over: NormOver::Projection, when: None, after_rope: false }),
        norms: BlockNorms {
            before_attention: None,
            after_attention: Some("post_attention_layernorm"),
            before_mlp: None,
            after_mlp: Some("post_feedforward_layernorm"),
        },
        ..LLAMA_NAMES
    },
    layout: Layout { mlp_bias: Bias::Never, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// StarCoder2: LayerNorm with bias (epsilon from `norm_epsilon`), a plain GELU MLP
/// (`mlp.c_fc`, `mlp.c_proj`), biases on every projection unless `use_bias` is false, tied
/// head by default; RoPE and sliding windows as Mistral.
pub const STARCODER2: DecoderFamily = DecoderFamily {
    model_types: &["starcoder2"],
    names: NameTable { mlp: MlpNames::Plain { up: "mlp.c_fc", down: "mlp.c_proj" }, ..LLAMA_NAMES },
    layout: Layout {
        norm: NormKind::Layer,
        qkv_bias: Bias::ConfigOr("use_bias", true),
        o_bias: Bias::ConfigOr("use_bias", true),
        mlp_bias: Bias::ConfigOr("use_bias", true),
        tie_default: true,
        norm_eps: NormEps::Key(Key { name: "norm_epsilon", default: Some(1e-5) }),
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: UNIFORM_LAYERS,
};

/// SmolLM3: Llama with NoPE layers: `no_rope_layers` (one 0/1 per layer, 0 = no RoPE), else
/// every `no_rope_layer_interval`th layer (default 4) without RoPE; tied head by default
/// (`SmolLM3Config`).
pub const SMOLLM3: DecoderFamily = DecoderFamily {
    model_types: &["smollm3"],
    names: LLAMA_NAMES,
    // `use_sliding_window` (default false) switches windows off as for Qwen; when it is on and
    // `layer_types` is absent, only the NoPE layers slide.
    layout: Layout { tie_default: true, key_defaults: QWEN_WINDOW_OFF, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: LayerKinds {
        no_rope: Some(NoRope { list: "no_rope_layers", interval: "no_rope_layer_interval", interval_default: 4 }),
        slide_nope_layers: true,
        ..QWEN_LAYERS
    },
};

/// OLMo (1): LayerNorm without weight or bias (none in the checkpoint; epsilon 1e-5, fixed in
/// transformers' code), q/k/v clamped to `[-clip_qkv, clip_qkv]` when the key is set,
/// `attention_bias` on q/k/v/o, no MLP bias.
pub const OLMO: DecoderFamily = DecoderFamily {
    model_types: &["olmo"],
    names: LLAMA_NAMES,
    layout: Layout {
        norm: NormKind::LayerNoAffine,
        norm_eps: NormEps::Fixed(1e-5),
        mlp_bias: Bias::Never,
        clip_qkv: Some("clip_qkv"),
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// ERNIE 4.5 (dense): Llama with RoPE on interleaved pairs over the whole head, `use_bias`
/// (default false) on q/k/v/o and the MLP, `head_dim` 128 when absent, tied head by default
/// (`Ernie4_5Config`).
pub const ERNIE4_5: DecoderFamily = DecoderFamily {
    model_types: &["ernie4_5"],
    names: LLAMA_NAMES,
    layout: Layout {
        qkv_bias: Bias::Config("use_bias"),
        o_bias: Bias::Config("use_bias"),
        mlp_bias: Bias::Config("use_bias"),
        tie_default: true,
        rotary: RotaryPairs::Interleaved,
        head_dim_default: Some(128),
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// Nemotron: LayerNorm1P (`1 + weight`, with bias; epsilon from `norm_eps`, default 1e-5), a
/// plain MLP `down(act(up(x)))` (`relu2` by default), partial rotary (default 0.5),
/// `attention_bias` / `mlp_bias` (`NemotronConfig`).
pub const NEMOTRON: DecoderFamily = DecoderFamily {
    model_types: &["nemotron"],
    names: NameTable { mlp: MlpNames::Plain { up: "mlp.up_proj", down: "mlp.down_proj" }, ..LLAMA_NAMES },
    layout: Layout {
        norm: NormKind::LayerUnitOffset,
        norm_eps: NormEps::Key(Key { name: "norm_eps", default: Some(1e-5) }),
        activation: Some(("hidden_act", crate::Activation::Relu2)),
        partial_rotary_default: 0.5,
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// `GPTJConfig`'s `n_inner` defaults to None (4 x hidden) where GPT-2's reader asks for the
/// key: absent is written as that null.
fn gptj_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    if !map.contains_key("n_inner") && !map.contains_key("intermediate_size") {
        map.insert("n_inner".into(), serde_json::Value::Null);
    }
    Ok(())
}

/// GPT-J (`GPTJConfig`, GPT-2's key spellings): one LayerNorm `ln_1` feeding attention and the
/// MLP in parallel (`attn + mlp + residual`), q/k/v/out_proj without biases, a biased
/// `fc_in` -> `activation_function` (`gelu_new`) -> `fc_out` MLP 4 x hidden wide when `n_inner`
/// is null, a biased untied head, RoPE on interleaved pairs of the first `rotary_dim` (64)
/// dimensions of each head at the fixed base 10000 (`create_sinusoidal_positions`: no RoPE key
/// is read, so a stray `rope_theta` or `rope_scaling` changes nothing, as in transformers).
pub const GPTJ: DecoderFamily = DecoderFamily {
    model_types: &["gptj"],
    names: NameTable {
        embed_tokens: "transformer.wte.weight",
        embed_positions: None,
        layer: "transformer.h.{i}",
        attention: AttentionNames::Separate { q: "attn.q_proj", k: "attn.k_proj", v: "attn.v_proj" },
        o_proj: "attn.out_proj",
        qk_norm: None,
        norms: BlockNorms { before_attention: Some("ln_1"), after_attention: None, before_mlp: None, after_mlp: None },
        mlp: MlpNames::Plain { up: "mlp.fc_in", down: "mlp.fc_out" },
        sinks: None,
        output_gate: None,
        final_norm: "transformer.ln_f",
        lm_head: "lm_head",
    },
    layout: Layout {
        norm: NormKind::Layer,
        norm_eps: NormEps::Key(Key { name: "layer_norm_epsilon", default: Some(1e-5) }),
        qkv_bias: Bias::Never,
        o_bias: Bias::Never,
        mlp_bias: Bias::Always,
        lm_head_bias: Bias::Always,
        activation: Some(("activation_function", crate::Activation::GeluTanh)),
        rotary: RotaryPairs::Interleaved,
        block: BlockShape::Parallel,
        key_defaults: &[("rotary_dim", KeyDefault::Count(64))],
        ignored_keys: &["rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor", "num_key_value_heads", "head_dim"],
        rotary_dims_key: Some("rotary_dim"),
        config_rule: Some(gptj_config),
        ..LLAMA_LAYOUT
    },
    optional_prefix: Some("transformer."),
    unused: &[
        Unused { prefix: "", suffix: ".attn.bias", reason: "GPT-J's causal-mask buffer (older checkpoints saved it); the graph builds its own mask" },
        Unused { prefix: "", suffix: ".attn.masked_bias", reason: "GPT-J's mask fill-value buffer (older checkpoints saved it); the graph builds its own mask" },
    ],
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// CodeGen (`CodeGenConfig`, Salesforce/codegen-350M to 16B, mono / multi / nl): GPT-J's block
/// ([`GPTJ`]: one LayerNorm feeding attention and the MLP in parallel, interleaved RoPE on the
/// first `rotary_dim` dimensions at base 10000, `fc_in` / `fc_out`, a biased untied head) with
/// q/k/v in one `qkv_proj` laid out in the 4 model-parallel shards CodeGen was trained on, each
/// shard's query, value and key heads in that order (`AttentionNames::FusedShards`).
pub const CODEGEN: DecoderFamily = DecoderFamily {
    model_types: &["codegen"],
    names: NameTable { attention: AttentionNames::FusedShards { qkv: "attn.qkv_proj", shards: 4 }, ..GPTJ.names },
    layout: Layout { key_defaults: &[("rotary_dim", KeyDefault::Count(64)), ("bos_token_id", KeyDefault::Count(50256)), ("eos_token_id", KeyDefault::Count(50256))], ..GPTJ.layout },
    optional_prefix: Some("transformer."),
    unused: &[Unused { prefix: "", suffix: ".attn.causal_mask", reason: "CodeGen's causal-mask buffer (its checkpoints saved it); the graph builds its own mask" }],
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// `FalconConfig.__post_init__` and the layer's switches, on config.json's object: the key/value
/// heads (`num_kv_heads`, default every head, under `new_decoder_architecture` or without
/// `multi_query`; one with `multi_query`, the default), `ffn_hidden_size` 4 x hidden when absent;
/// refused: ALiBi, the sequential block (`parallel_attn` false), and the two-LayerNorm block of
/// the new architecture (`num_ln_in_parallel_attn` 2, or absent there: Falcon-40B/180B's
/// `ln_attn` / `ln_mlp`).
fn falcon_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    // transformers' truth test: a `null` switch is off.
    let flag = |map: &serde_json::Map<String, Value>, key: &str, default: bool| match map.get(key) {
        None => Ok(default),
        Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(format!("key `{key}` must be true or false, found {v}")),
    };
    let new_arch = flag(map, "new_decoder_architecture", false)?;
    // Written back as booleans, so the table's switches read transformers' truth values.
    for (key, default) in [("alibi", false), ("parallel_attn", true)] {
        let on = flag(map, key, default)?;
        map.insert(key.into(), Value::Bool(on));
    }
    if new_arch && !flag(map, "parallel_attn", true)? {
        return Err("`new_decoder_architecture` is true and `parallel_attn` false: transformers' FalconDecoderLayer has no MLP input for that combination (it fails), so it is not built".into());
    }
    if new_arch {
        match map.get("num_ln_in_parallel_attn") {
            Some(Value::Number(n)) if n.as_u64() == Some(1) => {}
            other => {
                return Err(format!(
                    "`new_decoder_architecture` is true and `num_ln_in_parallel_attn` is {}: the block with two LayerNorms (`ln_attn`, `ln_mlp`: Falcon-40B/180B) is not built; one LayerNorm (`num_ln_in_parallel_attn: 1`, Falcon2-11B) is",
                    other.map_or("absent (2 there)".to_string(), Value::to_string)
                ))
            }
        }
    }
    let heads = map.get("num_attention_heads").or(map.get("n_head")).cloned().unwrap_or(Value::Null);
    let kv = match map.get("num_kv_heads") {
        None | Some(Value::Null) => heads,
        Some(v) => v.clone(),
    };
    let kv = if new_arch || !flag(map, "multi_query", true)? { kv } else { Value::from(1) };
    map.insert("num_key_value_heads".into(), kv);
    if map.get("ffn_hidden_size").is_none_or(Value::is_null) {
        if let Some(hidden) = map.get("hidden_size").or(map.get("n_embed")).and_then(Value::as_u64) {
            map.insert("ffn_hidden_size".into(), Value::from(4 * hidden));
        }
    }
    Ok(())
}

/// Falcon (`FalconConfig`; Falcon-7B, Falcon2-11B, Falcon-RW): one LayerNorm (`input_layernorm`,
/// with bias) feeding attention and the MLP in parallel, or, when `parallel_attn` is false
/// (Falcon-RW), attention then `post_attention_layernorm` and the MLP in sequence; q/k/v in one
/// `query_key_value` laid out per key/value group (multi-query: one group of every query head,
/// then the key and the value; `new_decoder_architecture`: each group's queries, key and value;
/// neither: per head), `dense`, an MLP `dense_h_to_4h` -> `activation` (GELU) -> `dense_4h_to_h`
/// of `ffn_hidden_size`, biases on every projection when `bias` (default false), rotate-half
/// RoPE or, when `alibi` (Falcon-RW), Falcon's ALiBi ([`Alibi::Falcon`]), a tied head by
/// default ([`falcon_config`] for the derived keys and what is refused).
pub const FALCON: DecoderFamily = DecoderFamily {
    model_types: &["falcon"],
    names: NameTable {
        embed_tokens: "transformer.word_embeddings.weight",
        embed_positions: None,
        layer: "transformer.h.{i}",
        attention: AttentionNames::FusedPerGroup { qkv: "self_attention.query_key_value" },
        o_proj: "self_attention.dense",
        qk_norm: None,
        norms: BlockNorms { before_attention: Some("input_layernorm"), after_attention: None, before_mlp: Some("post_attention_layernorm"), after_mlp: None },
        mlp: MlpNames::Plain { up: "mlp.dense_h_to_4h", down: "mlp.dense_4h_to_h" },
        sinks: None,
        output_gate: None,
        final_norm: "transformer.ln_f",
        lm_head: "lm_head",
    },
    layout: Layout {
        norm: NormKind::Layer,
        norm_eps: NormEps::Key(Key { name: "layer_norm_epsilon", default: Some(1e-5) }),
        qkv_bias: Bias::Config("bias"),
        o_bias: Bias::Config("bias"),
        mlp_bias: Bias::Config("bias"),
        tie_default: true,
        activation: Some(("activation", crate::Activation::Gelu)),
        block: BlockShape::Sequential,
        block_when: Some(BlockSwitch { key: "parallel_attn", default: true, on: BlockShape::ParallelSharedNorm }),
        positions_when: Some(PositionSwitch { key: "alibi", default: false, on: Positions::Alibi(Alibi::Falcon) }),
        key_aliases: &[("ffn_hidden_size", "intermediate_size"), ("n_embed", "hidden_size")],
        config_rule: Some(falcon_config),
        ..LLAMA_LAYOUT
    },
    optional_prefix: Some("transformer."),
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// Phi (1, 1.5, 2): one LayerNorm (with bias) feeding attention and the MLP in parallel,
/// biases on q/k/v, `dense`, `fc1`/`fc2` and the head, partial rotary (default 0.5), per-head
/// LayerNorms on q and k when `qk_layernorm` is true, `final_layernorm` (`PhiConfig`).
pub const PHI: DecoderFamily = DecoderFamily {
    model_types: &["phi"],
    names: NameTable {
        o_proj: "self_attn.dense",
        qk_norm: Some(QkNorm { q: "self_attn.q_layernorm", k: "self_attn.k_layernorm", over: NormOver::Head, when: Some("qk_layernorm"), after_rope: false }),
        norms: BlockNorms { before_attention: Some("input_layernorm"), after_attention: None, before_mlp: None, after_mlp: None },
        mlp: MlpNames::Plain { up: "mlp.fc1", down: "mlp.fc2" },
        final_norm: "model.final_layernorm",
        ..LLAMA_NAMES
    },
    layout: Layout {
        norm: NormKind::Layer,
        qkv_bias: Bias::Always,
        o_bias: Bias::Always,
        mlp_bias: Bias::Always,
        activation: Some(("hidden_act", crate::Activation::GeluTanh)),
        partial_rotary_default: 0.5,
        block: BlockShape::Parallel,
        lm_head_bias: Bias::Always,
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// GLM's layout: partial rotary (default 0.5) on interleaved pairs, q/k/v bias as
/// `attention_bias` says (default true), never on o_proj, no MLP bias, `head_dim` 128 when
/// absent (`GlmConfig`, `Glm4Config`).
const GLM_LAYOUT: Layout = Layout {
    qkv_bias: Bias::ConfigOr("attention_bias", true),
    o_bias: Bias::Never,
    mlp_bias: Bias::Never,
    rotary: RotaryPairs::Interleaved,
    partial_rotary_default: 0.5,
    head_dim_default: Some(128),
    ..LLAMA_LAYOUT
};

/// GLM: Llama names with a fused `gate_up_proj` (gate first), [`GLM_LAYOUT`].
pub const GLM: DecoderFamily = DecoderFamily {
    model_types: &["glm"],
    names: NameTable { mlp: MlpNames::GatedFused { gate_up: "mlp.gate_up_proj", down: "mlp.down_proj" }, ..LLAMA_NAMES },
    layout: GLM_LAYOUT,
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// GLM-4: GLM plus an RMSNorm on each sublayer's output before its residual add
/// (`post_self_attn_layernorm`, `post_mlp_layernorm`); the MLP's input norm keeps Llama's
/// name `post_attention_layernorm`.
pub const GLM4: DecoderFamily = DecoderFamily {
    model_types: &["glm4"],
    names: NameTable {
        norms: BlockNorms {
            before_attention: Some("input_layernorm"),
            after_attention: Some("post_self_attn_layernorm"),
            before_mlp: Some("post_attention_layernorm"),
            after_mlp: Some("post_mlp_layernorm"),
        },
        mlp: MlpNames::GatedFused { gate_up: "mlp.gate_up_proj", down: "mlp.down_proj" },
        ..LLAMA_NAMES
    },
    layout: GLM_LAYOUT,
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// PhiMoE (Phi-3.5-MoE): Mixtral's names (`block_sparse_moe.gate`, experts `w1`/`w3`/`w2`),
/// `num_local_experts` (default 16) routed by sparsemixer (`router_jitter_noise`, default
/// 0.01; always 2 experts), LayerNorm with bias (epsilon from `rms_norm_eps`), q/k/v/o bias per
/// `attention_bias`, a head bias per `lm_head_bias` (both default false), LongRoPE with its
/// `short_mscale`/`long_mscale` (`PhimoeConfig`). transformers' `model_type` is `phimoe` for
/// both `PhiMoEForCausalLM` (the published config) and `PhimoeForCausalLM`.
pub const PHIMOE: DecoderFamily = DecoderFamily {
    model_types: &["phimoe"],
    names: NameTable {
        mlp: MlpNames::Experts(MoeNames {
            keys: MoeKeys {
                experts: &["num_local_experts"],
                experts_default: 16,
                top_k_default: 2,
                normalize: TopKNorm::Always,
                intermediate: &[],
                intermediate_default: None,
                sparse: SparseLayers::All,
                routing: Routing::SparseMixer { jitter: "router_jitter_noise", default: 0.01 },
                activation: ExpertActivation::Gated,
            },
            ..MIXTRAL_MOE
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        norm: NormKind::Layer,
        mlp_bias: Bias::Never,
        lm_head_bias: Bias::Config("lm_head_bias"),
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: UNIFORM_LAYERS,
};

/// gpt-oss: attention sinks (`self_attn.sinks`), q/k/v/o bias per `attention_bias` (default
/// true), layers from `layer_types`, else sliding and full alternating from layer 0
/// (`sliding_window` default 128); a mixture of `num_local_experts` (default 128) experts
/// stored stacked with gate/up interleaved (`mlp.experts.gate_up_proj`, `down_proj`, with
/// biases), a router with bias (`mlp.router`), top-`num_experts_per_tok` (default 4) with a
/// softmax over the chosen logits (the full softmax renormalized over the top k: the same
/// weights), the clamped SwiGLU from `swiglu_alpha` (default 1.702) and `swiglu_limit`
/// (default 7.0); `rope_theta` 150000 and YaRN (factor 32, original length 4096, `truncate`
/// false) when config.json gives no RoPE keys (`GptOssConfig`).
pub const GPT_OSS: DecoderFamily = DecoderFamily {
    model_types: &["gpt_oss"],
    names: NameTable {
        sinks: Some("self_attn.sinks"),
        mlp: MlpNames::Experts(MoeNames {
            router: "mlp.router",
            router_bias: true,
            experts: ExpertNames::Interleaved { experts: "mlp.experts", gate_up: "gate_up_proj", down: "down_proj" },
            shared: None,
            dense: None,
            keys: MoeKeys {
                experts: &["num_local_experts", "num_experts"],
                experts_default: 128,
                top_k_default: 4,
                normalize: TopKNorm::Always,
                intermediate: &[],
                intermediate_default: None,
                sparse: SparseLayers::All,
                routing: Routing::SoftmaxTopK,
                activation: ExpertActivation::ClampedSwiglu {
                    alpha: Key { name: "swiglu_alpha", default: Some(1.702) },
                    limit: Key { name: "swiglu_limit", default: Some(7.0) },
                },
            },
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        qkv_bias: Bias::ConfigOr("attention_bias", true),
        o_bias: Bias::ConfigOr("attention_bias", true),
        mlp_bias: Bias::Never,
        rope_default: RopeDefault {
            theta: 150000.0,
            scaling: Some(r#"{"rope_type":"yarn","factor":32.0,"beta_fast":32.0,"beta_slow":1.0,"truncate":false,"original_max_position_embeddings":4096}"#),
            renamed: &[],
            ntk_alpha: false,
        },
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: LayerKinds { full_every: Some(FullEvery { keys: &[], default: 2, first: false }), default_window: Some(128), ..UNIFORM_LAYERS },
};

/// Arcee (AFM): Llama with a plain MLP `down(act(up(x)))`, `relu2` by default (`ArceeConfig`,
/// whose MLP is Nemotron's).
pub const ARCEE: DecoderFamily = DecoderFamily {
    model_types: &["arcee"],
    names: NameTable { mlp: MlpNames::Plain { up: "mlp.up_proj", down: "mlp.down_proj" }, ..LLAMA_NAMES },
    layout: Layout { activation: Some(("hidden_act", crate::Activation::Relu2)), ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// Jais 2 (`Jais2Config`, a LlamaConfig): Llama's attention with LayerNorms (weight and bias,
/// epsilon from `layer_norm_eps`, default 1e-5) for the two block norms and the final one,
/// Nemotron's plain MLP `down(act(up(x)))` (`relu2` by default), and biases on q/k/v/o and the
/// MLP unless `attention_bias` / `mlp_bias` say false (both default true).
pub const JAIS2: DecoderFamily = DecoderFamily {
    model_types: &["jais2"],
    names: NameTable { mlp: MlpNames::Plain { up: "mlp.up_proj", down: "mlp.down_proj" }, ..LLAMA_NAMES },
    layout: Layout {
        norm: NormKind::Layer,
        norm_eps: NormEps::Key(Key { name: "layer_norm_eps", default: Some(1e-5) }),
        activation: Some(("hidden_act", crate::Activation::Relu2)),
        qkv_bias: Bias::ConfigOr("attention_bias", true),
        o_bias: Bias::ConfigOr("attention_bias", true),
        mlp_bias: Bias::ConfigOr("mlp_bias", true),
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// Hy3 (Tencent's `HYV3Config`): Apertus' attention (per-head q/k RMSNorms before RoPE, biases
/// per `attention_bias`), the first layer dense unless `mlp_layer_types` lists otherwise, the
/// others `num_experts` (192) experts of `moe_intermediate_size` routed by sigmoid scores of an
/// f32 router (`mlp.router.gate`) with `mlp.expert_bias` for the choice of the top
/// `num_experts_per_tok` (8), renormalized and scaled by `router_scaling_factor` (2.826), beside
/// an ungated shared MLP (`mlp.shared_mlp`) `num_shared_experts` experts wide; head_dim 128,
/// theta 11158840, rms eps 1e-5 when absent. The layer after the decoder's is its
/// multi-token prediction layer (`model.layers.{L}`), not loaded by transformers.
pub const HY_V3: DecoderFamily = DecoderFamily {
    model_types: &["hy_v3"],
    names: NameTable {
        qk_norm: Some(PER_HEAD_QK_NORM),
        mlp: MlpNames::Experts(MoeNames {
            router: "mlp.router.gate",
            shared: Some(SharedExpert {
                mlp: &MlpNames::Gated { gate: "mlp.shared_mlp.gate_proj", up: "mlp.shared_mlp.up_proj", down: "mlp.shared_mlp.down_proj" },
                gate: None,
                width: SharedWidth::Experts("num_shared_experts", 1),
                combine: SharedCombine::Sum,
            }),
            keys: MoeKeys {
                experts: &["num_experts", "num_local_experts"],
                experts_default: 192,
                top_k_default: 8,
                normalize: TopKNorm::Always,
                intermediate: &["moe_intermediate_size"],
                intermediate_default: Some(1536),
                sparse: SparseLayers::Types { key: "mlp_layer_types", default_dense: (None, 1) },
                routing: Routing::Grouped(GroupedRouting {
                    sigmoid: true,
                    f32_router: true,
                    bias: Some("mlp.expert_bias"),
                    choose_on_logits: false,
                    bias_optional: false,
                    group_best: 1,
                    method: None,
                    groups: None,
                    scale: Some(Key { name: "router_scaling_factor", default: Some(2.826) }),
                }),
                activation: ExpertActivation::Gated,
            },
            ..DEEPSEEK_V3_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        head_dim_default: Some(128),
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-5) }),
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(131072))],
        rope_default: RopeDefault { theta: 11158840.0, ..LLAMA_LAYOUT.rope_default },
        qkv_bias: Bias::Config("attention_bias"),
        o_bias: Bias::Config("attention_bias"),
        // LlamaMLP's: the dense layers and the shared MLP biased per `mlp_bias` (default false).
        mlp_bias: Bias::Config("mlp_bias"),
        prediction_layers: Some((MTP_KEYS, 1)),
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// Mellum (JetBrains, `MellumConfig`): Qwen3-MoE's attention (per-head q/k RMSNorms, biases
/// per `attention_bias`) and experts (softmax top `num_experts_per_tok` of `num_experts`, renormalized per
/// `norm_topk_prob`, default true), layers dense (`intermediate_size`) or sparse by
/// `mlp_layer_types` (all sparse without it), windows by `layer_types` (all full without it;
/// `sliding_window` 1024), RoPE per layer type from `rope_parameters.full_attention` /
/// `.sliding_attention` (500000 and 10000 when absent); head_dim 128.
pub const MELLUM: DecoderFamily = DecoderFamily {
    model_types: &["mellum"],
    names: NameTable {
        qk_norm: Some(PER_HEAD_QK_NORM),
        mlp: MlpNames::Experts(MoeNames {
            keys: MoeKeys {
                experts: &["num_local_experts", "num_experts"],
                experts_default: 64,
                normalize: TopKNorm::Key("norm_topk_prob", true),
                intermediate_default: Some(896),
                sparse: SparseLayers::Types { key: "mlp_layer_types", default_dense: (None, 0) },
                ..QWEN3_MOE_EXPERTS.keys
            },
            ..QWEN3_MOE_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        // Qwen3-MoE's attention: q/k/v/o biased per `attention_bias` (default false).
        qkv_bias: Bias::Config("attention_bias"),
        o_bias: Bias::Config("attention_bias"),
        mlp_bias: Bias::Never,
        head_dim_default: Some(128),
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(131072))],
        rope_default: RopeDefault { theta: 500000.0, ..LLAMA_LAYOUT.rope_default },
        // `MellumConfig` reads its RoPE from `rope_parameters` per layer type only (absent: its
        // defaults); top-level RoPE keys change nothing there.
        ignored_keys: &["rope_theta", "rope_scaling", "partial_rotary_factor"],
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: MTP_MODULE_UNUSED,
    scaling: NO_SCALING,
    // Without `layer_types` every layer is full (`MellumConfig.__post_init__`): one full
    // layer in every one.
    layers: LayerKinds {
        full_every: Some(FullEvery { keys: &[], default: 1, first: false }),
        default_window: Some(1024),
        local_rope: Some(LocalRope::Base(10000.0)),
        ..UNIFORM_LAYERS
    },
};

/// HyperCLOVA X SEED (`HyperCLOVAXConfig`, a GraniteConfig): Granite's blocks and multipliers
/// with an RMSNorm after attention (`post_norm1`) and after the MLP (`post_norm2`) before the
/// residual multiplier, when `use_post_norm` (default true); logits multiplied by
/// `logits_scaling` (Granite divides); the attention scale `attention_multiplier`, or
/// `1 / sqrt(head_dim)` when absent or null.
pub const HYPERCLOVAX: DecoderFamily = DecoderFamily {
    model_types: &["hyperclovax"],
    names: NameTable {
        norms: BlockNorms {
            before_attention: Some("input_layernorm"),
            after_attention: Some("post_norm1"),
            before_mlp: Some("post_attention_layernorm"),
            after_mlp: Some("post_norm2"),
        },
        ..LLAMA_NAMES
    },
    layout: Layout { after_norms_when: Some(("use_post_norm", true)), ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: Scaling {
        attention: AttentionScale::Key(Key { name: "attention_multiplier", default: None }),
        logits_divisor: None,
        logits_multiplier: Some(Key { name: "logits_scaling", default: Some(1.0) }),
        ..GRANITE.scaling
    },
    layers: FULL_ATTENTION_LAYERS,
};

/// Flint's full layers without `layer_types` (`FlintConfig.__post_init__`): the first two,
/// every fourth from layer 1, and the last.
fn flint_full_layer(i: usize, layers: usize) -> bool {
    i < 2 || i % 4 == 1 || i + 1 == layers
}

/// Flint (`FlintConfig`, a Qwen2MoeConfig): Qwen3-MoE's attention (per-head q/k RMSNorms) with
/// gpt-oss's sinks (`self_attn.softmax_offset`, f32), RoPE on the sliding layers only, windows
/// by `layer_types` (without it: [`flint_full_layer`]; `sliding_window` 513); dense layers by
/// `mlp_only_layers` (`[0, 1]` when absent) and `decoder_sparse_step`, the others `num_experts`
/// (256) experts routed by sigmoid scores of an f32 router (no bias), the top
/// `num_experts_per_tok` (6) renormalized per `norm_topk_prob` (default true), beside an
/// ungated shared MLP `shared_expert_intermediate_size` (1024) wide; head_dim 128.
pub const FLINT: DecoderFamily = DecoderFamily {
    model_types: &["flint"],
    names: NameTable {
        qk_norm: Some(PER_HEAD_QK_NORM),
        sinks: Some("self_attn.softmax_offset"),
        mlp: MlpNames::Experts(MoeNames {
            shared: Some(SharedExpert {
                mlp: &MlpNames::Gated { gate: "mlp.shared_expert.gate_proj", up: "mlp.shared_expert.up_proj", down: "mlp.shared_expert.down_proj" },
                gate: None,
                width: SharedWidth::Key("shared_expert_intermediate_size", 1024),
                combine: SharedCombine::Sum,
            }),
            keys: MoeKeys {
                experts_default: 256,
                top_k_default: 6,
                normalize: TopKNorm::Key("norm_topk_prob", true),
                intermediate_default: Some(512),
                routing: Routing::Grouped(GroupedRouting {
                    sigmoid: true,
                    f32_router: true,
                    bias: None,
                    choose_on_logits: false,
                    bias_optional: false,
                    group_best: 1,
                    method: None,
                    groups: None,
                    scale: None,
                }),
                ..QWEN3_MOE_EXPERTS.keys
            },
            ..QWEN3_MOE_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        qkv_bias: Bias::Config("attention_bias"),
        o_bias: Bias::Config("attention_bias"),
        mlp_bias: Bias::Never,
        head_dim_default: Some(128),
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(262144)), ("mlp_only_layers", KeyDefault::Counts(&[0, 1]))],
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: LayerKinds { default_window: Some(513), rope_layers: RopeLayers::Sliding, full_pattern: Some(flint_full_layer), ..UNIFORM_LAYERS },
};

/// Kolibri 1 (`Kolibri1Config`, a Qwen3MoeConfig): EXAONE 4's attention (per-head q/k RMSNorms,
/// RoPE on the sliding layers only when there is a window), windows by `layer_types`, else
/// every fifth layer full (`sliding_window` 513); GLM-4's four norms, stored as `post_attn_norm`
/// after attention and `post_ffn_norm` after the MLP; every layer `num_experts` (384) experts
/// of `moe_intermediate_size`, the top `num_experts_per_tok` (6) chosen by their f32 router
/// logits plus `moe.router.expert_bias` and weighted by the sigmoid of the chosen logits,
/// renormalized per `norm_topk_prob` (default false), beside an ungated shared MLP
/// `shared_expert_intermediate_size` (512) wide; head_dim 128.
pub const KOLIBRI1: DecoderFamily = DecoderFamily {
    model_types: &["kolibri1"],
    names: NameTable {
        qk_norm: Some(PER_HEAD_QK_NORM),
        norms: BlockNorms {
            before_attention: Some("input_layernorm"),
            after_attention: Some("post_attn_norm"),
            before_mlp: Some("post_attention_layernorm"),
            after_mlp: Some("post_ffn_norm"),
        },
        mlp: MlpNames::Experts(MoeNames {
            router: "mlp.gate",
            router_bias: false,
            experts: ExpertNames::PerExpert { expert: "mlp.experts.{e}", gate: "gate_proj", up: "up_proj", down: "down_proj" },
            shared: Some(SharedExpert {
                mlp: &MlpNames::Gated { gate: "mlp.shared_experts.gate_proj", up: "mlp.shared_experts.up_proj", down: "mlp.shared_experts.down_proj" },
                gate: None,
                width: SharedWidth::Key("shared_expert_intermediate_size", 512),
                combine: SharedCombine::Sum,
            }),
            dense: None,
            keys: MoeKeys {
                experts: &["num_local_experts", "num_experts"],
                experts_default: 384,
                top_k_default: 6,
                normalize: TopKNorm::Key("norm_topk_prob", false),
                intermediate: &["moe_intermediate_size"],
                intermediate_default: Some(512),
                sparse: SparseLayers::All,
                routing: Routing::Grouped(GroupedRouting {
                    sigmoid: true,
                    f32_router: true,
                    // Where transformers' conversion mapping keeps `e_score_correction_bias`.
                    bias: Some("moe.router.expert_bias"),
                    choose_on_logits: true,
                    bias_optional: false,
                    group_best: 1,
                    method: None,
                    groups: None,
                    scale: None,
                }),
                activation: ExpertActivation::Gated,
            },
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        qkv_bias: Bias::Never,
        o_bias: Bias::Never,
        mlp_bias: Bias::Never,
        head_dim_default: Some(128),
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(262144))],
        // `Kolibri1Config` has no `intermediate_size` (no layer is dense): the experts' width
        // stands in for the generic key.
        key_aliases: &[("moe_intermediate_size", "intermediate_size")],
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: LayerKinds {
        full_every: Some(FullEvery { keys: &[], default: 5, first: false }),
        default_window: Some(513),
        rope_layers: RopeLayers::SlidingIfWindowed,
        ..UNIFORM_LAYERS
    },
};

/// MiniCPM3's latent attention: DeepSeek-V2's module names and sizes (`MiniCPM3Config`'s
/// defaults), its rotary dims rotated as rotate-half pairs as stored (`apply_rotary_pos_emb`).
const MINICPM3_LATENT: LatentNames = LatentNames {
    defaults: crate::config::LatentSizes { q_rank: Some(768), kv_rank: 256, nope: 64, rope: 32, v: 64, interleaved: false },
    interleave_key: None,
    ..DEEPSEEK_V3_LATENT
};

/// `MiniCPM3Config.__post_init__` and its `logits_scaling` property, on config.json's object:
/// `v_head_dim` hidden / heads when absent, each block's output times `scale_depth` (1.4; null:
/// sqrt of the layers) / sqrt(`num_hidden_layers`) as `residual_multiplier`, the logits divided
/// by hidden / `dim_model_base` (256; null: hidden) as `logits_scaling`.
fn minicpm3_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    let whole = |map: &serde_json::Map<String, Value>, key: &str| map.get(key).and_then(Value::as_u64).ok_or_else(|| format!("required key `{key}` is missing or not a whole number"));
    let (hidden, heads, layers) = (whole(map, "hidden_size")?, whole(map, "num_attention_heads")?, whole(map, "num_hidden_layers")?);
    if heads == 0 || layers == 0 {
        return Err("`num_attention_heads` and `num_hidden_layers` must be at least 1".into());
    }
    if map.get("v_head_dim").is_none_or(Value::is_null) {
        map.insert("v_head_dim".into(), Value::from(hidden / heads));
    }
    let number = |key: &str, default: f64| match map.get(key) {
        None => Ok(Some(default)),
        Some(Value::Null) => Ok(None),
        Some(v) => v.as_f64().filter(|x| x.is_finite() && *x > 0.0).map(Some).ok_or_else(|| format!("key `{key}` must be a positive number, found {v}")),
    };
    let depth = number("scale_depth", 1.4)?.unwrap_or((layers as f64).sqrt());
    let base = number("dim_model_base", 256.0)?.unwrap_or(hidden as f64);
    map.insert("residual_multiplier".into(), Value::from(depth / (layers as f64).sqrt()));
    map.insert("logits_scaling".into(), Value::from(hidden as f64 / base));
    Ok(())
}

/// MiniCPM3 (`MiniCPM3Config`, a LlamaConfig): Llama's blocks with DeepSeek-V2's multi-head
/// latent attention (rotate-half RoPE, the a-norms at epsilon 1e-6), embeddings times
/// `scale_emb` (12), each block's output scaled and the logits divided as [`minicpm3_config`]
/// derives, tied head by default.
pub const MINICPM3: DecoderFamily = DecoderFamily {
    model_types: &["minicpm3"],
    names: NameTable { attention: AttentionNames::Latent(&MINICPM3_LATENT), ..LLAMA_NAMES },
    layout: Layout {
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(32768))],
        tie_default: true,
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-5) }),
        config_rule: Some(minicpm3_config),
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: Scaling {
        embedding: EmbeddingScale::Key(Key { name: "scale_emb", default: Some(12.0) }),
        residual: Some(Key { name: "residual_multiplier", default: Some(1.0) }),
        logits_divisor: Some(Key { name: "logits_scaling", default: Some(1.0) }),
        ..NO_SCALING
    },
    layers: FULL_ATTENTION_LAYERS,
};

/// Seed-OSS: Llama with q/k/v biases per `attention_bias` (default true), an o_proj bias per
/// its own `attention_out_bias` (default false), `head_dim` 128 when absent (`SeedOssConfig`).
pub const SEED_OSS: DecoderFamily = DecoderFamily {
    model_types: &["seed_oss"],
    names: LLAMA_NAMES,
    layout: Layout {
        qkv_bias: Bias::ConfigOr("attention_bias", true),
        o_bias: Bias::Config("attention_out_bias"),
        head_dim_default: Some(128),
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// OLMo 3: OLMo 2's blocks with sliding-window layers: `layer_types`, else every 4th layer full
/// (window `sliding_window`, default 4096); the config's RoPE scaling (the long-context YaRN)
/// is the full layers', the sliding layers rotate unscaled (`Olmo3Config`: theta 500000 by
/// default).
pub const OLMO3: DecoderFamily = DecoderFamily {
    model_types: &["olmo3"],
    layout: Layout { rope_default: RopeDefault { theta: 500000.0, ..LLAMA_LAYOUT.rope_default }, ..OLMO2.layout },
    layers: LayerKinds {
        full_every: Some(FullEvery { keys: &[], default: 4, first: false }),
        default_window: Some(4096),
        local_rope: Some(LocalRope::Unscaled),
        ..UNIFORM_LAYERS
    },
    ..OLMO2
};

/// EXAONE 4's and Cohere 2's layers without `layer_types`: every `sliding_window_pattern`th
/// layer full (default 4), the others sliding, window 4096 when `sliding_window` is absent.
const EVERY_4TH_FULL: LayerKinds = LayerKinds {
    full_every: Some(FullEvery { keys: &["sliding_window_pattern"], default: 4, first: false }),
    default_window: Some(4096),
    ..UNIFORM_LAYERS
};

/// EXAONE 4: OLMo 2's post-norms (none before attention or the MLP) with per-head q/k
/// RMSNorms; sliding layers from `layer_types`, else every `sliding_window_pattern`th layer
/// full (default 4; `Exaone4Config`), window 4096 when absent; with a window the full layers have
/// no RoPE.
pub const EXAONE4: DecoderFamily = DecoderFamily {
    model_types: &["exaone4"],
    names: NameTable { qk_norm: Some(PER_HEAD_QK_NORM), ..OLMO2.names },
    layout: Layout { qkv_bias: Bias::Never, o_bias: Bias::Never, mlp_bias: Bias::Never, ..LLAMA_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: LayerKinds { rope_layers: RopeLayers::SlidingIfWindowed, ..EVERY_4TH_FULL },
};

/// Helium (Kyutai): Llama with RoPE on interleaved pairs (`rotate_half` over even/odd dims),
/// q/k/v biases per `attention_bias`, never on o_proj, `head_dim` 128, RMS epsilon 1e-8 and
/// theta 100000 when absent (`HeliumConfig`).
pub const HELIUM: DecoderFamily = DecoderFamily {
    model_types: &["helium"],
    names: LLAMA_NAMES,
    layout: Layout {
        o_bias: Bias::Never,
        rotary: RotaryPairs::Interleaved,
        head_dim_default: Some(128),
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-8) }),
        rope_default: RopeDefault { theta: 100000.0, ..LLAMA_LAYOUT.rope_default },
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// Cohere's block: one mean-centred LayerNorm without bias (`input_layernorm`, epsilon
/// `layer_norm_eps`, default 1e-5) feeding attention and the MLP in parallel, RoPE on
/// interleaved pairs, q/k/v/o biases per `attention_bias`, no MLP bias, tied head by default.
const COHERE_NAMES: NameTable = NameTable {
    norms: BlockNorms { before_attention: Some("input_layernorm"), after_attention: None, before_mlp: None, after_mlp: None },
    ..LLAMA_NAMES
};
/// Command R+'s q/k norms when `use_qk_norm` is true: `CohereLayerNorm((heads, head_dim))`,
/// one `[heads, head_dim]` weight, before RoPE.
const COHERE_QK_NORM: QkNorm =
    QkNorm { q: "self_attn.q_norm", k: "self_attn.k_norm", over: NormOver::EachHead(HeadWeights::Stacked), when: Some("use_qk_norm"), after_rope: false };
const COHERE_LAYOUT: Layout = Layout {
    norm: NormKind::LayerNoBias,
    norm_eps: NormEps::Key(Key { name: "layer_norm_eps", default: Some(1e-5) }),
    mlp_bias: Bias::Never,
    tie_default: true,
    rotary: RotaryPairs::Interleaved,
    block: BlockShape::ParallelResidualFirst,
    ..LLAMA_LAYOUT
};
/// Logits multiplied by `logit_scale` (default 0.0625).
const COHERE_SCALING: Scaling = Scaling { logits_multiplier: Some(Key { name: "logit_scale", default: Some(0.0625) }), ..NO_SCALING };

/// Cohere (Command R): [`COHERE_LAYOUT`]'s block, logits times `logit_scale`, theta 500000
/// when absent (`CohereConfig`); q/k norms with a weight per head when `use_qk_norm` is true
/// (Command R+).
pub const COHERE: DecoderFamily = DecoderFamily {
    model_types: &["cohere"],
    names: NameTable { qk_norm: Some(COHERE_QK_NORM), ..COHERE_NAMES },
    layout: Layout { rope_default: RopeDefault { theta: 500000.0, ..LLAMA_LAYOUT.rope_default }, ..COHERE_LAYOUT },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: COHERE_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// Cohere 2 (Command R7B, Command A): Cohere's block with sliding layers from `layer_types`,
/// else every `sliding_window_pattern`th layer full (default 4), window 4096 when absent; only
/// the sliding layers rotate (`Cohere2Attention` applies RoPE where its window is set).
pub const COHERE2: DecoderFamily = DecoderFamily {
    model_types: &["cohere2"],
    names: COHERE_NAMES,
    // No q/k norms in `Cohere2Attention`: a `use_qk_norm` key is not read.
    layout: COHERE_LAYOUT,
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: COHERE_SCALING,
    layers: LayerKinds { rope_layers: RopeLayers::Sliding, ..EVERY_4TH_FULL },
};

/// `Cohere2MoeConfig.__post_init__` and the layer's switches, on config.json's object: without
/// `layer_types`, the first `first_k_dense_replace` (0) layers slide except every
/// `prefix_dense_sliding_window_pattern`th (1: none slides), the rest except every
/// `sliding_window_pattern`th (4); without `mlp_layer_types`, those first layers are dense. A
/// layer rotates when it slides, or when it is dense and that prefix pattern is 1
/// (`Cohere2MoeAttention.force_rope`): written as `no_rope_layers`. The experts (and the shared
/// ones, `num_shared_experts` of them) are `intermediate_size` wide, the dense layers
/// `prefix_dense_intermediate_size` (else `intermediate_size`): written as
/// `moe_intermediate_size` and `intermediate_size`. Refused by key: RMSNorm layers
/// (`rms_norm_eps` set) and, where a layer is sparse, sigmoid routing (`expert_selection_fn`),
/// which are not built.
fn cohere2_moe_config(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    if let Some(v) = map.get("rms_norm_eps").filter(|v| !v.is_null()) {
        return Err(format!("key `rms_norm_eps` is {v}: Cohere2-MoE's RMSNorm layers are not built, only its default bias-free LayerNorm (`rms_norm_eps` null, epsilon `layer_norm_eps`)"));
    }
    let count = |map: &serde_json::Map<String, Value>, key: &str, default: usize| -> Result<usize, String> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v.as_u64().map(|n| n as usize).ok_or_else(|| format!("key `{key}` must be a whole number, found {v}")),
        }
    };
    let layers = map.get("num_hidden_layers").and_then(Value::as_u64).ok_or("key `num_hidden_layers` is missing or not a whole number")? as usize;
    let first_dense = count(map, "first_k_dense_replace", 0)?.min(layers);
    let prefix_pattern = count(map, "prefix_dense_sliding_window_pattern", 1)?;
    let pattern = count(map, "sliding_window_pattern", 4)?;
    if prefix_pattern == 0 || pattern == 0 {
        return Err("keys `prefix_dense_sliding_window_pattern` and `sliding_window_pattern` must be positive".into());
    }
    if map.get("layer_types").is_none_or(Value::is_null) {
        let kind = |i: usize, n: usize| if !(i + 1).is_multiple_of(n) { "sliding_attention" } else { "full_attention" };
        let types: Vec<&str> = (0..first_dense).map(|i| kind(i, prefix_pattern)).chain((0..layers - first_dense).map(|i| kind(i, pattern))).collect();
        map.insert("layer_types".into(), Value::from(types));
    }
    if map.get("mlp_layer_types").is_none_or(Value::is_null) {
        let kinds: Vec<&str> = (0..layers).map(|i| if i < first_dense { "dense" } else { "sparse" }).collect();
        map.insert("mlp_layer_types".into(), Value::from(kinds));
    }
    let strings = |key: &str| -> Result<Vec<String>, String> {
        let list = map[key].as_array().filter(|l| l.len() == layers).ok_or_else(|| format!("key `{key}` must list one entry for each of the {layers} layers"))?;
        list.iter().map(|v| v.as_str().map(str::to_string).ok_or_else(|| format!("key `{key}` holds {v}, not a string"))).collect()
    };
    let (types, mlp) = (strings("layer_types")?, strings("mlp_layer_types")?);
    // Read by the sparse layers only, as transformers reads it.
    if mlp.iter().any(|m| m == "sparse") {
        match map.get("expert_selection_fn") {
            None | Some(Value::Null) => {}
            Some(v) if v.as_str() == Some("softmax") => {}
            Some(v) => return Err(format!("key `expert_selection_fn` is {v}: only softmax routing (the softmax of the chosen experts' logits) is built")),
        }
    }
    let rope: Vec<u64> = (0..layers).map(|i| u64::from(types[i] == "sliding_attention" || (mlp[i] == "dense" && prefix_pattern == 1))).collect();
    map.insert("no_rope_layers".into(), Value::from(rope));
    let experts = count(map, "intermediate_size", 22528)?;
    let dense = count(map, "prefix_dense_intermediate_size", experts)?;
    map.insert("moe_intermediate_size".into(), Value::from(experts));
    map.insert("intermediate_size".into(), Value::from(dense));
    Ok(())
}

/// Cohere2-MoE (`Cohere2MoeConfig`): Cohere 2's parallel block (one bias-free LayerNorm feeding
/// attention and the MLP, interleaved RoPE, logits times `logit_scale`, tied head) with layers
/// and RoPE as [`cohere2_moe_config`] reads them, and on sparse layers `num_experts` (8)
/// experts as transformers saves them (`mlp.experts.{e}.gate_proj` / `up_proj` / `down_proj`),
/// routed by the softmax of the top `num_experts_per_tok` (2) logits, beside
/// `num_shared_experts` (0) shared ones (`mlp.shared_experts`, their widths summed) whose
/// output is added or averaged with the routed one (`shared_expert_combination_strategy`,
/// default `average`); dense layers a gated MLP (`mlp.gate_proj` / `up_proj` / `down_proj`).
pub const COHERE2_MOE: DecoderFamily = DecoderFamily {
    model_types: &["cohere2_moe"],
    names: NameTable {
        mlp: MlpNames::Experts(MoeNames {
            router: "mlp.gate",
            router_bias: false,
            experts: ExpertNames::PerExpert { expert: "mlp.experts.{e}", gate: "gate_proj", up: "up_proj", down: "down_proj" },
            shared: Some(SharedExpert {
                mlp: &MlpNames::Gated { gate: "mlp.shared_experts.gate_proj", up: "mlp.shared_experts.up_proj", down: "mlp.shared_experts.down_proj" },
                gate: None,
                width: SharedWidth::Experts("num_shared_experts", 0),
                combine: SharedCombine::Key { key: "shared_expert_combination_strategy", average_default: true },
            }),
            dense: Some(&GATED_MLP),
            keys: MoeKeys {
                experts: &["num_experts"],
                experts_default: 8,
                top_k_default: 2,
                // The softmax of the chosen logits: Mixtral's renormalized top k.
                normalize: TopKNorm::Always,
                intermediate: &["moe_intermediate_size"],
                intermediate_default: None,
                sparse: SparseLayers::Types { key: "mlp_layer_types", default_dense: (Some("first_k_dense_replace"), 0) },
                routing: Routing::SoftmaxTopK,
                activation: ExpertActivation::Gated,
            },
        }),
        ..COHERE_NAMES
    },
    layout: Layout {
        key_defaults: &[
            ("head_dim", KeyDefault::Count(128)),
            ("max_position_embeddings", KeyDefault::Count(8192)),
            ("bos_token_id", KeyDefault::Count(5)),
            ("eos_token_id", KeyDefault::Count(255001)),
            ("pad_token_id", KeyDefault::Count(0)),
        ],
        config_rule: Some(cohere2_moe_config),
        ..COHERE_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: COHERE_SCALING,
    layers: LayerKinds {
        rope_layers: RopeLayers::All,
        no_rope: Some(NoRope { list: "no_rope_layers", interval: "no_rope_layer_interval", interval_default: 4 }),
        ..EVERY_4TH_FULL
    },
};

/// StableLM (StableLM 2, StableLM-3B-4E1T): LayerNorms with bias (epsilon `layer_norm_eps`,
/// default 1e-5) before attention and the MLP, q/k/v biases per `use_qkv_bias`, none on o_proj
/// or the MLP, RoPE on the first `partial_rotary_factor` (default 0.25) of each head
/// (`StableLmConfig`). StableLM 2 12B's switches: `qk_layernorm` (q and k each by a LayerNorm
/// of its own per head, `StableLmLayerNormPerHead`, before RoPE) and `use_parallel_residual`
/// (`residual + attn(ln(h)) + mlp(ln(h))`, no `post_attention_layernorm`).
pub const STABLELM: DecoderFamily = DecoderFamily {
    model_types: &["stablelm"],
    names: NameTable {
        qk_norm: Some(QkNorm {
            q: "self_attn.q_layernorm",
            k: "self_attn.k_layernorm",
            over: NormOver::EachHead(HeadWeights::Split("norms.{h}")),
            when: Some("qk_layernorm"),
            after_rope: false,
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        norm: NormKind::Layer,
        norm_eps: NormEps::Key(Key { name: "layer_norm_eps", default: Some(1e-5) }),
        qkv_bias: Bias::Config("use_qkv_bias"),
        o_bias: Bias::Never,
        mlp_bias: Bias::Never,
        partial_rotary_default: 0.25,
        block_when: Some(BlockSwitch { key: "use_parallel_residual", default: false, on: BlockShape::ParallelResidualFirst }),
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// BERT's (and RoBERTa's) checkpoint names, as `BertModel` saves them.
const BERT_NAMES: EncoderNames = EncoderNames {
    word_embeddings: "embeddings.word_embeddings.weight",
    position_embeddings: "embeddings.position_embeddings.weight",
    token_type_embeddings: "embeddings.token_type_embeddings.weight",
    embeddings_norm: "embeddings.LayerNorm",
    layer: "encoder.layer.{i}",
    query: "attention.self.query",
    key: "attention.self.key",
    value: "attention.self.value",
    attention_output: "attention.output.dense",
    attention_norm: "attention.output.LayerNorm",
    intermediate: "intermediate.dense",
    output: "output.dense",
    output_norm: "output.LayerNorm",
};

/// Tensors of a BERT-family checkpoint the encoder graph does not read.
const ENCODER_UNUSED: &[Unused] = &[
    Unused {
        prefix: "",
        suffix: "pooler.dense.weight",
        reason: "the pooler (tanh dense on the first token) is not part of last_hidden_state; sentence-transformers pools the hidden states instead",
    },
    Unused { prefix: "", suffix: "pooler.dense.bias", reason: "the pooler is not part of last_hidden_state" },
    Unused { prefix: "", suffix: "embeddings.position_ids", reason: "a buffer holding 0..max_position_embeddings; the graph computes the positions" },
    Unused { prefix: "", suffix: "embeddings.token_type_ids", reason: "a buffer of zero token types; token types are an input (or the one row is added)" },
];

/// BERT: learned absolute positions `0..seq`, token types, post-LayerNorm blocks, biases
/// everywhere, the MLP activation from `hidden_act` (exact GELU by default).
pub const BERT: EncoderFamily = EncoderFamily {
    model_types: &["bert"],
    names: BERT_NAMES,
    positions: EncoderPositions::Absolute,
    optional_prefix: Some("bert."),
    unused: ENCODER_UNUSED,
};

/// RoBERTa and XLM-RoBERTa: BERT's block, positions counted from `padding_idx + 1` over the
/// tokens that are not padding (pad tokens get `padding_idx`).
pub const ROBERTA: EncoderFamily = EncoderFamily {
    model_types: &["roberta", "xlm-roberta"],
    names: BERT_NAMES,
    positions: EncoderPositions::PaddingOffset { default_pad: 1 },
    optional_prefix: Some("roberta."),
    unused: ENCODER_UNUSED,
};

/// `GraniteSWAConfig` / `GraniteMoeSWAConfig`'s per-layer RoPE on config.json's object:
/// `layer_types` (absent: layer `i` full when `i % 4 == 0`, as `__post_init__` writes it) and
/// `layer_rope_theta` (absent: the global base for every layer), where a base of 0 is a layer
/// without RoPE (NoPE). Written as the keys the generic reader takes: `no_rope_layers` (0 where
/// the base is 0) and one RoPE per layer type in `rope_parameters` (`{full_attention,
/// sliding_attention}`, each the global parameters with that type's base; a type whose layers
/// are all NoPE keeps the global base, which no layer then uses). transformers builds one
/// rotary embedding per distinct base; a layer type holding two different non-zero bases is
/// refused by key, as no table here rotates one type two ways.
fn granite_swa_rope(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    let layers = map.get("num_hidden_layers").and_then(Value::as_u64).ok_or("required key `num_hidden_layers` is missing or not a whole number")? as usize;
    let types: Vec<String> = match map.get("layer_types") {
        None | Some(Value::Null) => (0..layers).map(|i| if i % 4 == 0 { "full_attention" } else { "sliding_attention" }.to_string()).collect(),
        Some(Value::Array(t)) => t.iter().map(|v| v.as_str().map(str::to_string).ok_or_else(|| format!("key `layer_types` holds {v}, not a layer type"))).collect::<Result<_, _>>()?,
        Some(v) => return Err(format!("key `layer_types` must be a list, found {v}")),
    };
    if types.len() != layers {
        return Err(format!("key `layer_types` lists {} layers; `num_hidden_layers` is {layers}", types.len()));
    }
    let mut params = match map.get("rope_parameters").or_else(|| map.get("rope_scaling")) {
        Some(Value::Object(p)) if p.contains_key("full_attention") || p.contains_key("sliding_attention") => {
            return Err("key `rope_parameters` is one object of RoPE parameters for GraniteSWA (per-layer bases come from `layer_rope_theta`), not per layer type".into())
        }
        Some(Value::Object(p)) => p.clone(),
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(v) => return Err(format!("key `rope_parameters` must be an object, found {v}")),
    };
    let global = match params.get("rope_theta").or_else(|| map.get("rope_theta")) {
        None | Some(Value::Null) => 10000.0,
        Some(v) => v.as_f64().filter(|t| t.is_finite() && *t > 0.0).ok_or_else(|| format!("key `rope_theta` must be a positive number, found {v}"))?,
    };
    // The legacy spelling `type` stays the scaling's name (transformers 5 reads it as `rope_type`).
    if !params.contains_key("rope_type") && !params.contains_key("type") {
        params.insert("rope_type".into(), Value::from("default"));
    }
    let thetas: Vec<f64> = match map.get("layer_rope_theta") {
        None | Some(Value::Null) => vec![global; layers],
        Some(Value::Array(t)) if t.len() == layers => t
            .iter()
            .map(|v| v.as_f64().filter(|x| x.is_finite() && (*x == 0.0 || *x > 1.0)).ok_or_else(|| format!("key `layer_rope_theta` holds {v}: a RoPE base above 1, or 0 for no RoPE")))
            .collect::<Result<_, _>>()?,
        Some(v) => return Err(format!("key `layer_rope_theta` must list one RoPE base per layer ({layers}), found {v}")),
    };
    let base_of = |kind: &str| -> Result<f64, String> {
        let mut bases: Vec<f64> = (0..layers).filter(|&i| types[i] == kind && thetas[i] != 0.0).map(|i| thetas[i]).collect();
        bases.sort_by(f64::total_cmp);
        bases.dedup();
        match bases.as_slice() {
            [] => Ok(global),
            [one] => Ok(*one),
            many => Err(format!("key `layer_rope_theta` gives the {kind} layers {} different RoPE bases {many:?}; one base per layer type is built", many.len())),
        }
    };
    let rope = |theta: f64| {
        let mut p = params.clone();
        p.insert("rope_theta".into(), Value::from(theta));
        Value::Object(p)
    };
    let (full, sliding) = (base_of("full_attention")?, base_of("sliding_attention")?);
    map.insert("rope_parameters".into(), serde_json::json!({"full_attention": rope(full), "sliding_attention": rope(sliding)}));
    map.remove("rope_scaling");
    map.remove("rope_theta");
    map.insert("no_rope_layers".into(), Value::from(thetas.iter().map(|&t| u64::from(t != 0.0)).collect::<Vec<_>>()));
    map.insert("layer_types".into(), Value::from(types));
    Ok(())
}

/// GraniteSWA's and GraniteMoeSWA's layers: windows by `layer_types` (absent: every fourth from
/// layer 0 full, window `sliding_window` 128), per-layer RoPE and NoPE as [`granite_swa_rope`]
/// writes them.
const GRANITE_SWA_LAYERS: LayerKinds = LayerKinds {
    full_every: Some(FullEvery { keys: &[], default: 4, first: true }),
    default_window: Some(128),
    no_rope: Some(NoRope { list: "no_rope_layers", interval: "no_rope_layer_interval", interval_default: 4 }),
    local_rope: Some(LocalRope::Unscaled),
    ..UNIFORM_LAYERS
};

/// GraniteSWA (`GraniteSWAConfig`): Granite's multipliers and blocks with a learnable sink per
/// head (`self_attn.sinks`, an extra logit in each softmax), sliding windows and a RoPE base per
/// layer (0: none) as [`granite_swa_rope`] reads them; tied head, `rms_norm_eps` 1e-5 and
/// 8192 positions by default.
pub const GRANITE_SWA: DecoderFamily = DecoderFamily {
    model_types: &["granite_swa"],
    names: NameTable { sinks: Some("self_attn.sinks"), ..LLAMA_NAMES },
    layout: Layout {
        tie_default: true,
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-5) }),
        key_defaults: &[("max_position_embeddings", KeyDefault::Count(8192))],
        config_rule: Some(granite_swa_rope),
        ..GRANITE.layout
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: GRANITE.scaling,
    layers: GRANITE_SWA_LAYERS,
};

/// GraniteMoeSWA (`GraniteMoeSWAConfig`): GraniteMoeShared's experts and shared MLP with
/// GraniteSWA's attention (sinks, windows, per-layer RoPE). Its checkpoints hold the experts
/// under transformers 5's names, which no conversion maps from GraniteMoE's older ones:
/// `block_sparse_moe.experts.gate_up_proj` (`[E, 2 x inter, hidden]`, gate rows then up rows),
/// `experts.down_proj`, the router `block_sparse_moe.router`.
pub const GRANITEMOE_SWA: DecoderFamily = DecoderFamily {
    model_types: &["granitemoe_swa"],
    names: NameTable {
        sinks: Some("self_attn.sinks"),
        mlp: MlpNames::Experts(MoeNames {
            router: "block_sparse_moe.router",
            experts: ExpertNames::Stacked { experts: "block_sparse_moe.experts", gate_up: "block_sparse_moe.experts.gate_up_proj", down: "block_sparse_moe.experts.down_proj" },
            shared: Some(GRANITE_SHARED_MLP),
            ..GRANITEMOE_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout { config_rule: Some(granite_swa_rope), ..GRANITEMOESHARED.layout },
    layers: GRANITE_SWA_LAYERS,
    ..GRANITEMOESHARED
};

/// MiniCPM5-MoE's default RoPE rotates the whole head whatever `partial_rotary_factor` says
/// (its `compute_default_rope_parameters` reads `head_dim` only): the key is dropped, at the top
/// level and inside `rope_parameters` / `rope_scaling` (where transformers 5 saves it), when the
/// RoPE type is the default one. Other types keep it (transformers' own initializers read it).
fn minicpm5_moe_rope(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    use serde_json::Value;
    let default_type = |p: &serde_json::Map<String, Value>| p.get("rope_type").or_else(|| p.get("type")).and_then(Value::as_str).is_none_or(|t| t == "default");
    let mut nested_default = true;
    for key in ["rope_parameters", "rope_scaling"] {
        if let Some(Value::Object(p)) = map.get_mut(key) {
            if default_type(p) {
                p.remove("partial_rotary_factor");
            } else {
                nested_default = false;
            }
        }
    }
    if nested_default {
        map.remove("partial_rotary_factor");
    }
    Ok(())
}

/// MiniCPM5-MoE (`MiniCPM5MoeConfig`, a Glm4MoeConfig): Llama's attention whose query projection
/// also gives a per-head output gate (`self_attn.q_proj` `[heads * 2 * head_dim, hidden]`, each
/// head's query rows then its gate rows: transformers' `q_gate_proj`, renamed on load), the heads'
/// output times `sigmoid(gate)` before o_proj; biases per `attention_bias` (q/gate, k, v and o);
/// RoPE on the whole head (its rotary reads no `partial_rotary_factor`), theta 5e6; DeepSeek-V3's
/// mixture with an f32 router: `n_routed_experts` (160) of `moe_intermediate_size` (512), top
/// `num_experts_per_tok` (16) by sigmoid scores plus `e_score_correction_bias` in `n_group` /
/// `topk_group` groups (1 / 1) scored by their best two, renormalized, times
/// `routed_scaling_factor` (3.66), beside `n_shared_experts` (1) experts' width of shared MLP;
/// dense layers by `mlp_layer_types`, else the first `first_k_dense_replace` (1); head_dim 128,
/// `rms_norm_eps` 1e-6.
pub const MINICPM5_MOE: DecoderFamily = DecoderFamily {
    model_types: &["minicpm5_moe"],
    names: NameTable {
        attention: AttentionNames::GatedQuery { q_gate: "self_attn.q_proj", k: "self_attn.k_proj", v: "self_attn.v_proj" },
        mlp: MlpNames::Experts(MoeNames {
            keys: MoeKeys {
                experts_default: 160,
                top_k_default: 16,
                intermediate_default: Some(512),
                sparse: SparseLayers::Types { key: "mlp_layer_types", default_dense: (Some("first_k_dense_replace"), 1) },
                routing: Routing::Grouped(GroupedRouting { scale: Some(Key { name: "routed_scaling_factor", default: Some(3.66) }), ..GLM4_MOE_ROUTING }),
                ..GLM4_MOE_EXPERTS.keys
            },
            ..GLM4_MOE_EXPERTS
        }),
        ..LLAMA_NAMES
    },
    layout: Layout {
        qkv_bias: Bias::Config("attention_bias"),
        o_bias: Bias::Config("attention_bias"),
        mlp_bias: Bias::Never,
        head_dim_default: Some(128),
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-6) }),
        key_defaults: &[
            ("max_position_embeddings", KeyDefault::Count(524288)),
            ("num_key_value_heads", KeyDefault::Count(2)),
            ("bos_token_id", KeyDefault::Count(0)),
            ("eos_token_id", KeyDefault::Counts(&[1, 130073])),
            ("pad_token_id", KeyDefault::Count(1)),
        ],
        rope_default: RopeDefault { theta: 5000000.0, ..LLAMA_LAYOUT.rope_default },
        config_rule: Some(minicpm5_moe_rope),
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: NO_SCALING,
    layers: FULL_ATTENTION_LAYERS,
};

/// NanoChat (`NanoChatConfig`): Llama's blocks with weightless RMSNorms everywhere (`RmsNoAffine`:
/// before attention, before the MLP, at the end, and on the embeddings before the first layer,
/// the model's one `norm` module applied twice), RoPE turned the other way (its `rotate_half`
/// returns `(x2, -x1)`: `rope_reversed`), then per-head weightless q/k RMSNorms on the rotated q
/// and k, a plain MLP `fc1` -> `hidden_act` (relu2) -> `fc2`, biases per `attention_bias` on
/// q/k/v/o, the logits soft-capped by `final_logit_softcapping` (15; null: none), `rms_norm_eps`
/// 1e-6, 2048 positions by default.
pub const NANOCHAT: DecoderFamily = DecoderFamily {
    model_types: &["nanochat"],
    names: NameTable {
        qk_norm: Some(QkNorm { after_rope: true, ..PER_HEAD_QK_NORM }),
        mlp: MlpNames::Plain { up: "mlp.fc1", down: "mlp.fc2" },
        ..LLAMA_NAMES
    },
    layout: Layout {
        norm: NormKind::RmsNoAffine,
        norm_eps: NormEps::Key(Key { name: "rms_norm_eps", default: Some(1e-6) }),
        activation: Some(("hidden_act", crate::Activation::Relu2)),
        mlp_bias: Bias::Never,
        // NanoChatConfig's defaults for the keys a published config may leave out.
        key_defaults: &[
            ("max_position_embeddings", KeyDefault::Count(2048)),
            ("intermediate_size", KeyDefault::Count(8192)),
            ("bos_token_id", KeyDefault::Count(0)),
            ("eos_token_id", KeyDefault::Count(1)),
            ("pad_token_id", KeyDefault::Count(1)),
        ],
        rope_reversed: true,
        embedding_norm: Some("model.embed_norm"),
        ..LLAMA_LAYOUT
    },
    optional_prefix: None,
    unused: ROTARY_BUFFERS,
    scaling: Scaling { final_softcap: Some(Key { name: "final_logit_softcapping", default: Some(15.0) }), ..NO_SCALING },
    layers: FULL_ATTENTION_LAYERS,
};
