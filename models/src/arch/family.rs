//! The vocabulary of a decoder family table: where each weight lives in the checkpoint and
//! which structural variant each part uses. A table is data; [`super::decoder`] reads it.

use crate::components::linear::WeightLayout;
use crate::components::norm::NormKind;
use crate::DecoderConfig;

/// One declarative description of a decoder-only family.
pub struct DecoderFamily {
    /// `model_type` values in config.json that this table builds.
    pub model_types: &'static [&'static str],
    pub names: NameTable,
    pub layout: Layout,
    /// A prefix of the table's names that some checkpoints of the family omit (GPT-2 saved from
    /// the bare model has no `transformer.`).
    pub optional_prefix: Option<&'static str>,
    /// Checkpoint tensors the graph deliberately does not read, matched by name suffix.
    pub unused: &'static [Unused],
    /// Scalar multipliers and caps the family reads from config keys (Gemma, Granite).
    pub scaling: Scaling,
    /// Which layers slide when `layer_types` does not say, and whether they have a RoPE of
    /// their own (Gemma 2/3).
    pub layers: LayerKinds,
}

/// Checkpoint tensor names. Model-level names are full names (`embed_tokens`, `embed_positions`
/// with `.weight`; `final_norm`, `lm_head` as scopes); per-layer names are scopes relative to
/// `layer` (which holds `{i}`).
pub struct NameTable {
    pub embed_tokens: &'static str,
    /// Learned absolute position embeddings (GPT-2's `wpe`), gathered with `position_ids`.
    pub embed_positions: Option<&'static str>,
    pub layer: &'static str,
    pub attention: AttentionNames,
    pub o_proj: &'static str,
    /// RMSNorm on q and k before RoPE (Qwen3, Gemma 3: per head; OLMo2: the whole projection).
    pub qk_norm: Option<QkNorm>,
    /// Where each layer normalizes (Llama: before attention and before the MLP).
    pub norms: BlockNorms,
    pub mlp: MlpNames,
    /// Attention sinks (gpt-oss `self_attn.sinks`, relative to the layer): one learned logit per
    /// query head that joins each softmax row and is then dropped.
    pub sinks: Option<&'static str>,
    /// A gate on the attention's output (AFMoE's `self_attn.gate_proj`, relative to the layer):
    /// the heads' output times `sigmoid(gate_proj(x))` of the attention's input, before o_proj.
    pub output_gate: Option<&'static str>,
    pub final_norm: &'static str,
    pub lm_head: &'static str,
}

/// q/k norm scopes (relative to the layer) and what they normalize over.
pub struct QkNorm {
    pub q: &'static str,
    pub k: &'static str,
    pub over: NormOver,
    /// A boolean config key that switches the norms on (Phi's `qk_layernorm`, default false);
    /// `None`: always present.
    pub when: Option<&'static str>,
    /// Normalize the rotated q and k (HunYuan) instead of normalizing before RoPE.
    pub after_rope: bool,
}

/// What a q/k norm normalizes over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormOver {
    /// Each head's `head_dim` values (Qwen3, Gemma 3): weight `[head_dim]`.
    Head,
    /// The whole projection, all heads at once (OLMo2): weight `[heads * head_dim]`.
    Projection,
    /// Each head's `head_dim` values by a mean-centred LayerNorm without bias whose weight is
    /// its own per head (Cohere's `use_qk_norm`, StableLM 2's `qk_layernorm`), whatever the
    /// family's block norm is.
    EachHead(HeadWeights),
}

/// Where the per-head weights of [`NormOver::EachHead`] are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadWeights {
    /// One `[heads, head_dim]` tensor, `{scope}.weight` (`CohereLayerNorm((heads, head_dim))`).
    Stacked,
    /// One `[head_dim]` tensor per head, `{scope}.{this with {h} the head}.weight`
    /// (`StableLmLayerNormPerHead`: `norms.{h}`).
    Split(&'static str),
}

/// The norms of one layer, by scope (relative to the layer); `None` where the family has none.
/// Llama is `before_attention` + `before_mlp` (pre-norm); Gemma 2/3 have all four (the
/// `after_*` norms apply to the block's output before its residual add); OLMo2 has only the
/// `after_*` ones.
pub struct BlockNorms {
    pub before_attention: Option<&'static str>,
    pub after_attention: Option<&'static str>,
    pub before_mlp: Option<&'static str>,
    pub after_mlp: Option<&'static str>,
}

/// A number read from a config key: absent means `default` (`None`: the feature is off),
/// JSON `null` means off, as transformers reads these keys.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    pub name: &'static str,
    pub default: Option<f64>,
}

/// How the token embeddings are scaled before the first layer.
#[derive(Clone, Copy, Debug)]
pub enum EmbeddingScale {
    None,
    /// `sqrt(hidden_size)`, rounded to the graph's dtype (Gemma).
    SqrtHidden,
    /// A config key's value (Granite `embedding_multiplier`).
    Key(Key),
    /// `sqrt(hidden_size)` when a boolean key is true (AFMoE's `mup_enabled`, default false).
    SqrtHiddenIf(&'static str),
}

/// The attention softmax scale.
#[derive(Clone, Copy, Debug)]
pub enum AttentionScale {
    /// `1 / sqrt(head_dim)`, or GPT-2's `scale_attn_*` keys.
    Default,
    /// A config key's value is the scale (Granite `attention_multiplier`).
    Key(Key),
    /// `1 / sqrt(value)` of a config key (Gemma 2/3 `query_pre_attn_scalar`).
    InverseSqrt(Key),
    /// A fixed scale whatever the config says (GPT-Neo: 1, its scores are never scaled).
    Fixed(f64),
}

/// Scalars a family applies, each from its own config key.
pub struct Scaling {
    pub embedding: EmbeddingScale,
    /// Multiplies each block's output before its residual add (Granite `residual_multiplier`).
    pub residual: Option<Key>,
    pub attention: AttentionScale,
    /// `cap * tanh(scores / cap)` on the attention scores (Gemma 2 `attn_logit_softcapping`).
    pub attention_softcap: Option<Key>,
    /// `cap * tanh(logits / cap)` on the logits (Gemma 2 `final_logit_softcapping`).
    pub final_softcap: Option<Key>,
    /// Logits divided by a config key's value (Granite `logits_scaling`).
    pub logits_divisor: Option<Key>,
    /// Logits multiplied by a config key's value (Cohere `logit_scale`).
    pub logits_multiplier: Option<Key>,
    /// Queries multiplied by a factor growing with their position (Ministral 3's Llama 4
    /// scaling), its keys read from the RoPE parameters.
    pub query_position: Option<QueryPositionScale>,
}

/// `q * (1 + beta * ln(1 + floor(position / original)))`, the query's own position (Ministral
/// 3's `get_llama_4_attn_scale`): 1 below `original`, so only long contexts see it. `beta` is
/// read from `rope_parameters` (or `rope_scaling`, or the family's default RoPE object; absent
/// is refused, as transformers fails without it; 0 builds no scaling); `original` is YaRN's own
/// length when the RoPE is YaRN (read as the RoPE reads it), else that object's key.
#[derive(Clone, Copy, Debug)]
pub struct QueryPositionScale {
    pub beta: &'static str,
    pub original: &'static str,
}

/// No scalars: Llama and most families.
pub const NO_SCALING: Scaling = Scaling {
    embedding: EmbeddingScale::None,
    residual: None,
    attention: AttentionScale::Default,
    attention_softcap: None,
    final_softcap: None,
    logits_divisor: None,
    logits_multiplier: None,
    query_position: None,
};

/// Which layers use the sliding window, beyond what config.json's `layer_types` says.
pub struct LayerKinds {
    /// Without `layer_types`: every `n`th layer is full and the others slide, `n` read from the
    /// first of `keys` present, else `default` (Gemma 2 alternates from layer 0: n = 2; Gemma
    /// 3's `sliding_window_pattern` is 6). `None`: the generic rules (`max_window_layers`, or
    /// every layer slides).
    pub full_every: Option<FullEvery>,
    /// `sliding_window` when config.json does not give it (transformers' per-family default).
    pub default_window: Option<usize>,
    /// Layers without RoPE (SmolLM3's NoPE layers), when the family has them.
    pub no_rope: Option<NoRope>,
    /// Sliding layers have a RoPE of their own (Gemma 3, OLMo 3): the config's sliding-layer
    /// RoPE (`rope_local_base_freq`, `rope_parameters.sliding_attention`), else the family's
    /// default for it ([`LocalRope`]).
    pub local_rope: Option<LocalRope>,
    /// Whether the family's attention reads `sliding_window` (and `layer_types`,
    /// `use_sliding_window`, `max_window_layers`) at all. transformers' Llama, Gemma, Granite,
    /// OLMo and OLMo 2, Phi, GLM, ERNIE 4.5, Nemotron, GPT-2, Arcee, Seed-OSS and Helium do not: such a
    /// key left in their config.json changes nothing there, so it changes nothing here.
    pub reads_window: bool,
    /// Which layers rotate, by their window ([`RopeLayers`]).
    pub rope_layers: RopeLayers,
    /// Whether the family reads `use_sliding_window` (false: no window) and
    /// `max_window_layers` (layers below it full): the Qwen config classes define them; other
    /// families' transformers code never reads them, so neither does theirs here.
    pub qwen_window_keys: bool,
    /// Without `layer_types`, only the layers without RoPE slide (SmolLM3: `SmolLM3Config`
    /// derives `layer_types` so when `use_sliding_window` is on).
    pub slide_nope_layers: bool,
    /// Whether the family's model reads `layer_types` (false: Mistral's and Mixtral's, whose
    /// window, when set, applies to every layer whatever `layer_types` says).
    pub reads_layer_types: bool,
    /// Without `layer_types` (and without `full_every`): the family's own rule for which of
    /// `layers` layers are full, `full(i, layers)` (Flint: the first two, every fourth from
    /// layer 1, and the last).
    pub full_pattern: Option<fn(usize, usize) -> bool>,
}

/// Which layers apply RoPE, by their window (beside [`NoRope`]'s listed layers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeLayers {
    /// Every layer.
    All,
    /// With a window set, the sliding layers only (none if `layer_types` lists no sliding
    /// layer); without one, every layer (EXAONE 4's hybrid attention: "global NoPE").
    SlidingIfWindowed,
    /// The sliding layers only, window or not (Cohere 2: RoPE where the layer's window is set).
    Sliding,
}

/// The sliding layers' RoPE when the config gives none of its own.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LocalRope {
    /// This base frequency, unscaled (Gemma 3: 10000).
    Base(f64),
    /// The full layers' base frequency, unscaled: the config's `rope_scaling` is the full
    /// layers' only (OLMo 3's long-context YaRN).
    Unscaled,
}

/// Which layers skip RoPE: `list` (one 0/1 per layer, 0 = no RoPE: SmolLM3 `no_rope_layers`)
/// when config.json gives it, else every `interval`th layer (`(i + 1) % n == 0`, n from the
/// `interval` key, else `interval_default`), as transformers derives the list.
pub struct NoRope {
    pub list: &'static str,
    pub interval: &'static str,
    pub interval_default: usize,
}

pub struct FullEvery {
    pub keys: &'static [&'static str],
    pub default: usize,
    /// Whether the full layers are the first of each group of `n` (layer `i` full when `i % n
    /// == 0`: Code World Model's `CwmConfig`) rather than the last (`(i + 1) % n == 0`: Gemma 2
    /// and 3, OLMo 3, EXAONE 4, Cohere 2, gpt-oss).
    pub first: bool,
}

/// Every layer alike under the generic window rules (Mistral, Qwen, Phi-3, ...).
pub const UNIFORM_LAYERS: LayerKinds = LayerKinds { full_every: None, default_window: None, local_rope: None, no_rope: None, reads_window: true, rope_layers: RopeLayers::All, qwen_window_keys: false, slide_nope_layers: false, reads_layer_types: true, full_pattern: None };

/// Every layer attends to every earlier key, whatever window keys config.json holds (Llama and
/// the other families whose transformers attention has no window).
pub const FULL_ATTENTION_LAYERS: LayerKinds = LayerKinds { reads_window: false, ..UNIFORM_LAYERS };

/// How q/k/v projections are stored.
pub enum AttentionNames {
    Separate { q: &'static str, k: &'static str, v: &'static str },
    /// One projection with q, k and v stacked along the output axis (Phi-3 `qkv_proj`,
    /// GPT-2 `c_attn`); split into three weights by Slice recipes.
    Fused { qkv: &'static str },
    /// One projection whose output rows are per head `[q | k | v]` (GPT-NeoX's
    /// `query_key_value`, viewed `[heads, 3 * head_dim]` and chunked): reordered to the stacked
    /// layout by a reshape/transpose recipe, then split as `Fused` (no GQA in such families).
    FusedPerHead { qkv: &'static str },
    /// One projection whose output rows are, per key/value head, that group's query heads, then
    /// its key and its value (Falcon's `query_key_value`; multi-query Falcon is one group of
    /// every query head): each part read as its rows ([`crate::components::linear::LinearWeights::read_fused_per_group`]).
    FusedPerGroup { qkv: &'static str },
    /// One projection laid out as `shards` model-parallel shards, each holding its share of
    /// the query rows, then of the value rows, then of the key rows (CodeGen's `qkv_proj`,
    /// trained on 4 shards: viewed `[shards, 3 * hidden / shards]` and split q, v, k, so a head
    /// may straddle two shards); each part read as its rows
    /// ([`crate::components::linear::LinearWeights::read_grouped`]).
    FusedShards { qkv: &'static str, shards: usize },
    /// Multi-head latent attention (DeepSeek-V2/V3): see [`LatentNames`] and
    /// [`crate::config::LatentDims`].
    Latent(&'static LatentNames),
    /// Separate projections whose query one also gives a gate per head (MiniCPM5-MoE's
    /// `q_proj`, `[heads * 2 * head_dim, hidden]`: each head's query rows, then its gate rows,
    /// each part read as its rows): the heads' output is multiplied by `sigmoid(gate)` before
    /// o_proj.
    GatedQuery { q_gate: &'static str, k: &'static str, v: &'static str },
}

impl AttentionNames {
    /// The latent attention's names, when the family stores it.
    pub fn latent(&self) -> Option<&'static LatentNames> {
        match self {
            AttentionNames::Latent(names) => Some(names),
            _ => None,
        }
    }
}

/// Where multi-head latent attention's weights are, relative to the layer (DeepSeek-V3's
/// `self_attn.*`), and its config class's defaults.
pub struct LatentNames {
    /// `[heads * (nope + rope), hidden]` when `q_lora_rank` is null.
    pub q: &'static str,
    /// `[q_lora_rank, hidden]`, its RMSNorm and `[heads * (nope + rope), q_lora_rank]`.
    pub q_a: &'static str,
    pub q_a_norm: &'static str,
    pub q_b: &'static str,
    /// `[kv_lora_rank + rope, hidden]`: the latent, then the shared rotary key.
    pub kv_a: &'static str,
    pub kv_a_norm: &'static str,
    /// `[heads * (nope + v), kv_lora_rank]`: per head the key's nope rows, then the value's.
    pub kv_b: &'static str,
    /// The epsilon of `q_a_norm` and `kv_a_norm`: fixed in transformers' code (the RMSNorm
    /// class default, 1e-6, whatever `rms_norm_eps` says).
    pub norm_eps: f64,
    /// The config class's defaults of the size keys.
    pub defaults: crate::config::LatentSizes,
    /// The boolean key saying the rotary rows are stored as interleaved pairs (DeepSeek-V3
    /// `rope_interleave`, read by de-interleaving them); `None` where the family rotates the
    /// pairs as stored (DeepSeek-V2's complex rotation: `layout.rotary` Interleaved).
    pub interleave_key: Option<&'static str>,
}


/// How the MLP is stored.
// The family tables are `const`s, where a `Box` cannot be built: the experts' names stay inline.
#[allow(clippy::large_enum_variant)]
pub enum MlpNames {
    /// `down(act(gate(x)) * up(x))` with separate weights (Llama).
    Gated { gate: &'static str, up: &'static str, down: &'static str },
    /// `down(act(up(x)))` whose activation may hold learned scalars per layer under `act`
    /// (Apertus' xIELU: `mlp.act_fn.{alpha_p, alpha_n, beta, eps}`), read when `hidden_act` is
    /// `xielu`; any other activation is Plain's.
    PlainParametric { up: &'static str, down: &'static str, act: &'static str },
    /// The same with gate and up stacked in one tensor, gate first (Phi-3 `gate_up_proj`).
    GatedFused { gate_up: &'static str, down: &'static str },
    /// `down(act(up(x)))` (GPT-2 `c_fc`, `c_proj`).
    Plain { up: &'static str, down: &'static str },
    /// A mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE): see [`MoeNames`].
    Experts(MoeNames),
}

/// A mixture-of-experts MLP: a router, `E` gated experts, optionally a shared expert, and the
/// config keys that size and route it. Names are scopes relative to the layer.
pub struct MoeNames {
    /// The router projection (`[experts, hidden]`): Mixtral `block_sparse_moe.gate`.
    pub router: &'static str,
    /// Whether the router has a bias (`{router}.bias`, `[experts]`: gpt-oss).
    pub router_bias: bool,
    /// Where the experts' weights are and how they are stored.
    pub experts: ExpertNames,
    /// A shared expert every token goes through, scaled by a sigmoid gate (Qwen2-MoE).
    pub shared: Option<SharedExpert>,
    /// The dense MLP of the layers that are not sparse (Qwen's `mlp_only_layers`,
    /// `decoder_sparse_step`), sized by `intermediate_size`.
    pub dense: Option<&'static MlpNames>,
    pub keys: MoeKeys,
}

/// How a mixture's expert weights are stored.
pub enum ExpertNames {
    /// One module per expert, `expert` holding `{e}` (Mixtral `block_sparse_moe.experts.{e}`),
    /// each with its `[out, in]` projections relative to it (Mixtral `w1`, `w3`, `w2`), no bias.
    PerExpert { expert: &'static str, gate: &'static str, up: &'static str, down: &'static str },
    /// All experts in stacked parameters under `experts` (gpt-oss `mlp.experts`): `gate_up`
    /// `[E, hidden, 2 * inter]` (`[in, out]` per expert) with gate and up interleaved as even and
    /// odd columns, `down` `[E, inter, hidden]`, and their biases `{gate_up}_bias` `[E, 2 *
    /// inter]` and `{down}_bias` `[E, hidden]` (no `.weight` suffix on any).
    Interleaved { experts: &'static str, gate_up: &'static str, down: &'static str },
    /// All experts in two stacked `[out, in]` tensors, named in full (GraniteMoE's
    /// `input_linear.weight` / `output_linear.weight`; Mistral 4's `experts.gate_up_proj` /
    /// `experts.down_proj`): `gate_up` `[E, 2 * inter, hidden]` with the gate on the first
    /// `inter` rows and up on the rest (`chunk(2, dim=-1)`), `down` `[E, hidden, inter]`, no
    /// biases. `experts` is the scope the graph names the stacks under.
    Stacked { experts: &'static str, gate_up: &'static str, down: &'static str },
    /// All experts in three parameters of `[E * inter, hidden]` rows under `experts`, named in
    /// full (DBRX's `ffn.experts.mlp.w1` / `v1` / `w2`): gate and up `[out, in]` per expert,
    /// down `[in, out]` per expert (transformers' `DbrxExpertGLU` multiplies by `w2` itself).
    Rows { experts: &'static str, gate: &'static str, up: &'static str, down: &'static str },
}

/// The experts' activation between the gate/up and the down projections.
#[derive(Clone, Copy, Debug)]
pub enum ExpertActivation {
    /// `act(gate) * up` with the family's activation (Mixtral, Qwen: SiLU).
    Gated,
    /// gpt-oss's clamped SwiGLU: `(clamp(up, -limit, limit) + 1) * g * sigmoid(alpha * g)` with
    /// `g = min(gate, limit)`, `alpha` and `limit` from their keys (transformers' defaults).
    ClampedSwiglu { alpha: Key, limit: Key },
}

/// A shared expert: a gated MLP sized by `intermediate` (a config key, else `intermediate_default`), its output scaled by
/// `sigmoid(x @ gate^T)` with `gate` a `[1, hidden]` projection (Qwen2-MoE
/// `mlp.shared_expert_gate`).
pub struct SharedExpert {
    /// Its projections: `MlpNames::Gated` (separate gate, up, down) or `MlpNames::GatedFused`
    /// (one `[2 * width, hidden]` projection, gate rows then up rows: GraniteMoeShared's
    /// `shared_mlp.input_linear`); another kind is refused when the model is built.
    pub mlp: &'static MlpNames,
    /// The `[1, hidden]` sigmoid gate (Qwen2-MoE); `None`: the shared expert's output is added
    /// as it is (DeepSeek-V3).
    pub gate: Option<&'static str>,
    pub width: SharedWidth,
    /// How its output joins the routed experts'.
    pub combine: SharedCombine,
}

/// How the shared expert's output joins the routed experts'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedCombine {
    /// Added (Qwen2-MoE, DeepSeek).
    Sum,
    /// As a key says, `sum` or `average` (the two outputs added, then halved), with the default
    /// when absent (Cohere2-MoE's `shared_expert_combination_strategy`, default `average`);
    /// another value is refused by the key.
    Key { key: &'static str, average_default: bool },
}

/// The shared expert's intermediate size.
pub enum SharedWidth {
    /// A key of its own, with transformers' default (Qwen2-MoE `shared_expert_intermediate_size`).
    Key(&'static str, usize),
    /// `count` experts' width: the routed experts' intermediate size times the key (default)
    /// (DeepSeek-V3 `n_shared_experts`).
    Experts(&'static str, usize),
}

/// The config keys of a mixture of experts, with transformers' per-family defaults.
pub struct MoeKeys {
    /// The expert count: the first of these keys present (Mixtral `num_local_experts`; Qwen
    /// `num_experts`), else `experts_default`.
    pub experts: &'static [&'static str],
    pub experts_default: usize,
    /// `num_experts_per_tok` when absent.
    pub top_k_default: usize,
    /// Whether the top-k probabilities are renormalized to sum to 1.
    pub normalize: TopKNorm,
    /// Each expert's intermediate size: the first of these keys present (Mixtral
    /// `intermediate_size`; Qwen `moe_intermediate_size`).
    pub intermediate: &'static [&'static str],
    /// When none of `intermediate` is present: transformers' default (Qwen2-MoE 1408), or
    /// `None` for `intermediate_size` itself.
    pub intermediate_default: Option<usize>,
    /// Which layers are sparse.
    pub sparse: SparseLayers,
    /// How the router's logits become expert weights.
    pub routing: Routing,
    /// The experts' activation.
    pub activation: ExpertActivation,
}

/// How a mixture of experts routes.
#[derive(Clone, Copy, Debug)]
pub enum Routing {
    /// Softmax over the experts, the top k kept (renormalized as `normalize` says).
    SoftmaxTopK,
    /// PhiMoE's sparsemixer at inference: two picks in turn, each weighted by a softmax over
    /// the experts whose logit is within a relative `2 * jitter` of the pick's (`jitter` from
    /// this config key, else `default`; transformers' `router_jitter_noise`).
    SparseMixer { jitter: &'static str, default: f64 },
    /// DeepSeek's routing over groups of experts: see [`GroupedRouting`].
    Grouped(GroupedRouting),
}

/// DeepSeek's routing: scores (sigmoid or softmax of the router logits); a choice (the scores
/// plus a per-expert correction, the layer's tensor `bias`, `[experts]` or `[1, experts]`, when
/// there is one); with `groups`, the experts fall in groups, each scored by the sum of its
/// `group_best` best choices, and only the best ones are open; the top k open experts by
/// choice are weighted by their score (renormalized as `normalize` says, plus 1e-20), times
/// `scale` (key, default; `None`: 1). DeepSeek-V3 (`noaux_tc`): sigmoid,
/// `e_score_correction_bias`, best two; DeepSeek-V2: softmax, no correction, the group's best
/// one, groups only when `method`'s key says its grouped value (`topk_method:
/// group_limited_greedy`; `greedy`: one group); ERNIE 4.5 MoE: softmax with a correction, no
/// groups, no scale.
#[derive(Clone, Copy, Debug)]
pub struct GroupedRouting {
    pub sigmoid: bool,
    /// The router projection runs in f32 on f32 weights (DeepSeek-V2/V3, GLM and ERNIE:
    /// transformers keeps `gate.weight` and the correction in f32 and casts the hidden states
    /// up); false: in the build dtype, the logits cast to f32 (Mistral 4).
    pub f32_router: bool,
    pub bias: Option<&'static str>,
    /// The choice is the router logits plus the correction, not the scores plus it (Kolibri 1:
    /// `topk(router_logits + e_score_correction_bias)`, weights the sigmoid of the chosen
    /// logits). A sigmoid is monotonic, so without a correction both choose alike.
    pub choose_on_logits: bool,
    /// The correction may be absent from the checkpoint, read then as zero (A.X K1's released
    /// checkpoints route without one; transformers expects it missing there).
    pub bias_optional: bool,
    pub group_best: usize,
    /// `(key, default, grouped value, plain value)`: the method key when one decides whether
    /// the groups apply.
    pub method: Option<(&'static str, &'static str, &'static str, &'static str)>,
    /// The group keys; `None`: the family has one group (no keys to read).
    pub groups: Option<GroupKeys>,
    pub scale: Option<Key>,
}

/// The keys of DeepSeek's groups, each with its default: how many groups (`n_group`) and how
/// many of them are open (`topk_group`).
#[derive(Clone, Copy, Debug)]
pub struct GroupKeys {
    pub count: (&'static str, usize),
    pub open: (&'static str, usize),
}

/// Renormalization of the routed top-k probabilities.
#[derive(Clone, Copy, Debug)]
pub enum TopKNorm {
    /// Always (Mixtral).
    Always,
    /// As a boolean key says, with its default (Qwen `norm_topk_prob`, default false).
    Key(&'static str, bool),
    /// Never (DeepSeek-V2: transformers' router ignores `norm_topk_prob`).
    Never,
}

/// Which layers have the mixture of experts (the others take `MoeNames::dense`).
#[derive(Clone, Copy, Debug)]
pub enum SparseLayers {
    /// Every layer (Mixtral).
    All,
    /// Layer `i` is sparse when `(i + 1) % step == 0` (`step` from `step_key`, default 1) and
    /// `i` is not listed in `dense_key` (Qwen `decoder_sparse_step`, `mlp_only_layers`).
    Step { step_key: &'static str, dense_key: &'static str },
    /// The first `key` layers are dense (default `default`), every later one sparse
    /// (DeepSeek-V3 `first_k_dense_replace`).
    FirstDense { key: &'static str, default: usize },
    /// Layer `i` is sparse when `(i + 1) % interval == 0` and `start <= i <= end` (keys with
    /// defaults; `end` -1 or absent: the last layer), else dense (ERNIE 4.5 MoE's
    /// `moe_layer_start_index`, `moe_layer_end_index`, `moe_layer_interval`).
    Interval { start: (&'static str, usize), end: &'static str, interval: (&'static str, usize) },
    /// Per layer, as the list under `key` says (`"dense"` / `"sparse"`, GLM-4.7-Flash's
    /// `mlp_layer_types`); without the list the first `default_dense` layers are dense: the
    /// count under that key when it names one (EXAONE MoE's `first_k_dense_replace`), else its
    /// default (GLM-4.7-Flash: 1).
    Types { key: &'static str, default_dense: (Option<&'static str>, usize) },
}

/// Whether a group of projections has a bias.
#[derive(Clone, Copy, Debug)]
pub enum Bias {
    Never,
    Always,
    /// As the config's boolean key says (default false), e.g. Llama's `attention_bias`.
    Config(&'static str),
    /// As the config's boolean key says, `default` when absent (StarCoder2's `use_bias`,
    /// true unless the config says otherwise).
    ConfigOr(&'static str, bool),
}

impl Bias {
    pub fn resolve(self, c: &DecoderConfig) -> bool {
        match self {
            Bias::Never => false,
            Bias::Always => true,
            Bias::Config(key) => c.flag(key, false),
            Bias::ConfigOr(key, default) => c.flag(key, default),
        }
    }
}

/// How positions enter the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positions {
    /// Rotary embedding on q and k (settings from the config's rope keys).
    Rotary,
    /// Learned absolute embeddings added to the token embeddings (`names.embed_positions`),
    /// row `position + offset` (OPT's table starts two rows on: `OPTLearnedPositionalEmbedding`;
    /// 0 elsewhere).
    Learned { offset: usize },
    /// Fixed sinusoidal embeddings added to the token embeddings, computed here (no checkpoint
    /// tensor): fairseq's table (`XGLMSinusoidalPositionalEmbedding.get_embedding`: the sines of
    /// `position * 10000^(-i / (half - 1))` for `i < half = hidden / 2`, then their cosines, a
    /// zero column for an odd size), row `position + offset` (XGLM: 2).
    Sinusoidal { offset: usize },
    /// No position in the embeddings: each score gets a per-head linear bias over the key
    /// positions (ALiBi), added through the attention mask ([`crate::components::alibi`]).
    Alibi(Alibi),
}

/// Whose ALiBi: the slopes per head and the key positions they multiply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alibi {
    /// BLOOM's (`build_alibi_tensor`): the slopes of `_get_alibi_slopes` (`2^(-8 i / p)` for
    /// the largest power of two `p` not above the heads, then odd powers of `2^(-4 / p)` for
    /// the rest) times each key's position among the row's kept keys (`(cumsum(mask) - 1) *
    /// mask`), the bias rounded to the model's dtype.
    Bloom,
    /// MPT's (`build_mpt_alibi_tensor`, `alibi_bias_max` 8): `2^(-8 i / p)` for the power of
    /// two `p` at or above the heads (odd then even entries when the heads are fewer), times
    /// `slot - (total - 1)` (the last key at 0); built as `key slot - query slot`, the same
    /// after the softmax and exact near each query once rounded to f16 or bf16.
    Mpt,
    /// Falcon's (`FalconModel.forward` with `alibi`): BLOOM's slopes and positions, but the
    /// slopes rounded to bf16 and multiplied in bf16 (the positions rounded to it too, so
    /// positions past 256 move in steps), then divided by `sqrt(head_dim)`: a table the build
    /// computes over the context, gathered by position.
    Falcon,
}

/// [`Layout::positions_when`]: `on` when the boolean `key` (absent: `default`) is true, the
/// layout's `positions` otherwise.
#[derive(Clone, Copy, Debug)]
pub struct PositionSwitch {
    pub key: &'static str,
    pub default: bool,
    pub on: Positions,
}

/// Structural choices of a family.
pub struct Layout {
    pub weights: WeightLayout,
    pub norm: NormKind,
    pub positions: Positions,
    /// Bias of the q/k/v projections.
    pub qkv_bias: Bias,
    /// Bias of the output projection.
    pub o_bias: Bias,
    /// Bias of every MLP projection.
    pub mlp_bias: Bias,
    /// `tie_word_embeddings` when config.json does not say (transformers' per-family default).
    pub tie_default: bool,
    /// Where the norms' epsilon comes from.
    pub norm_eps: NormEps,
    /// The key the MLP activation comes from when it is not `hidden_act` (Gemma's
    /// `hidden_activation`, which transformers reads instead, with its default).
    pub activation: Option<(&'static str, crate::Activation)>,
    /// Which dimensions RoPE rotates together.
    pub rotary: RotaryPairs,
    /// `partial_rotary_factor` when config.json gives none (top level or in the rope
    /// parameters): transformers' per-family default (GLM, Nemotron, Phi: 0.5).
    pub partial_rotary_default: f64,
    /// `head_dim` when config.json gives none, if it is not hidden / heads (GLM, ERNIE 4.5:
    /// transformers' default 128).
    pub head_dim_default: Option<usize>,
    /// How attention and the MLP are arranged in a block.
    pub block: BlockShape,
    /// A boolean config key that, when true, arranges the block as another shape (StableLM's
    /// and GPT-NeoX's `use_parallel_residual`).
    pub block_when: Option<BlockSwitch>,
    /// A boolean config key that, when true, brings positions in another way (Falcon's
    /// `alibi`: ALiBi instead of RoPE).
    pub positions_when: Option<PositionSwitch>,
    /// A config key whose value `c` clamps the q, k and v projections to `[-c, c]` (OLMo's
    /// `clip_qkv`; absent or `null`: no clamp).
    pub clip_qkv: Option<&'static str>,
    /// Bias of the output projection (`lm_head`): Phi always, PhiMoE as `lm_head_bias` says.
    pub lm_head_bias: Bias,
    /// transformers' per-family RoPE defaults, used when config.json does not give them.
    pub rope_default: RopeDefault,
    /// Keys published configs leave to the family's config class, with that class's default:
    /// inserted when config.json lacks them (Gemma 3's multimodal `text_config` gives only the
    /// sizes that differ, so the 4B has no `num_attention_heads` and none has `vocab_size`).
    pub key_defaults: &'static [(&'static str, KeyDefault)],
    /// `(old, generic)`: a family's own spelling of a generic key, read as that key when
    /// config.json lacks the generic one (GPT-NeoX's `rotary_pct` and `rotary_emb_base`, which
    /// `GPTNeoXConfig` moves into `partial_rotary_factor` and `rope_theta`).
    pub key_aliases: &'static [(&'static str, &'static str)],
    /// Keys the family's published configs may write as one value per layer (Hunyuan-A13B's
    /// `moe_topk: [8, 8, ...]`, which transformers indexes by layer): a list of equal values
    /// reads as that value; a list whose values differ is refused, naming the key.
    pub per_layer_keys: &'static [&'static str],
    /// Generic keys the family's config class does not have, dropped before anything is read
    /// (`GPTNeoXConfig` has no `num_key_value_heads`: a stray one is no grouped attention).
    pub ignored_keys: &'static [&'static str],
    /// The keys counting multi-token prediction layers stored after the decoder's layers
    /// (`num_nextn_predict_layers`, alias `num_mtp_layers`) and the class default: their
    /// tensors, when present, are recorded as unused.
    pub prediction_layers: Option<(&'static [&'static str], usize)>,
    /// `clip_qkv` clamps what the q/k norms give (OLMoE), not the projections (OLMo 1).
    pub clip_after_qk_norm: bool,
    /// A key giving the rotated dimensions of each head (MiniMax-M2's `rotary_dim`), read as
    /// `partial_rotary_factor` = it / head size when config.json lacks the generic key (as
    /// `MiniMaxM2Config.convert_rope_params_to_dict` does).
    pub rotary_dims_key: Option<&'static str>,
    /// A boolean key (and its default) that switches the table's after-attention and after-MLP
    /// norms: off, the block has none (HyperCLOVA X's `use_post_norm`, whose norms are then
    /// `nn.Identity`).
    pub after_norms_when: Option<(&'static str, bool)>,
    /// The family config class's own derivations and refusals that keys alone cannot say, run
    /// on config.json's object before anything is read (Falcon's key/value heads from
    /// `multi_query` / `new_decoder_architecture` / `num_kv_heads`, its 4 x hidden MLP, ALiBi
    /// refused); an `Err` is the reason the config is refused.
    pub config_rule: Option<ConfigRule>,
    /// The after-MLP norm applies on the sparse layers only (A.X K1's `post_mlp_layernorm`,
    /// inside its MoE block); a dense layer's stored copy is recorded as unused.
    pub after_mlp_norm_sparse_only: bool,
    /// RoPE turned the other way (NanoChat's `rotate_half` returns `(x2, -x1)`): the same as
    /// every frequency negated, so the sin tables are negated and the cos tables unchanged.
    pub rope_reversed: bool,
    /// A norm of the family's kind on the embeddings, before the first layer (NanoChat applies
    /// its weightless final norm there too), under this scope name.
    pub embedding_norm: Option<&'static str>,
    /// Whether the model ends with the table's final norm ([`FinalNorm`]).
    pub final_norm: FinalNorm,
    /// Token embeddings narrower than the hidden size, projected in after the gather and out
    /// before the head ([`EmbedProjection`]: OPT-350m's `project_in` / `project_out`).
    pub embed_projection: Option<EmbedProjection>,
}

/// Whether a model ends with its table's final norm: always (most), never (OpenAI GPT's
/// post-norm blocks end with their own norm), or when a boolean key (absent: its default) is
/// true (OPT's `do_layer_norm_before`: its post-norm models, OPT-350m, have none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinalNorm {
    Always,
    Never,
    When { key: &'static str, default: bool },
}

/// Token embeddings of their own width (`width`, a config key: absent or the hidden size is no
/// projection): `into` (`[hidden, width]`, no bias) maps the gathered rows to the hidden size,
/// `out` (`[width, hidden]`, no bias) the last hidden state back, and the head reads `width`
/// (a tied head the `[vocab, width]` table).
#[derive(Clone, Copy, Debug)]
pub struct EmbedProjection {
    pub width: &'static str,
    pub into: &'static str,
    pub out: &'static str,
}

/// A family's own config derivations and refusals ([`Layout::config_rule`]): config.json's
/// object in, changed in place; an `Err` is the reason the config is refused.
pub type ConfigRule = fn(&mut serde_json::Map<String, serde_json::Value>) -> std::result::Result<(), String>;

/// A config key's value when config.json leaves it out (see [`Layout::key_defaults`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyDefault {
    /// A whole number (a size or a count).
    Count(u64),
    /// Any other number.
    Number(f64),
    /// A switch.
    Flag(bool),
    /// A list of whole numbers (Flint's dense layers `mlp_only_layers`: `[0, 1]`).
    Counts(&'static [u64]),
}

impl KeyDefault {
    /// The JSON value config.json would hold.
    pub fn to_json(self) -> serde_json::Value {
        match self {
            KeyDefault::Count(n) => serde_json::Value::from(n),
            KeyDefault::Number(x) => serde_json::Value::from(x),
            KeyDefault::Flag(b) => serde_json::Value::from(b),
            KeyDefault::Counts(list) => serde_json::Value::from(list.to_vec()),
        }
    }
}

/// A family's RoPE when config.json leaves it out: `rope_theta` when absent, and the scaling
/// (a JSON `rope_parameters` object) when neither `rope_parameters` nor `rope_scaling` is given
/// (gpt-oss: theta 150000 and YaRN, `GptOssConfig`).
#[derive(Clone, Copy, Debug)]
pub struct RopeDefault {
    pub theta: f64,
    pub scaling: Option<&'static str>,
    /// Rope type names the family's config class reads as another type before validating
    /// (`Phi3Config`: `su` and `yarn` are LongRoPE, whatever else the object holds).
    pub renamed: &'static [(&'static str, &'static str)],
    /// `dynamic` with an `alpha` is a fixed NTK stretch of the base (HunYuan's rotary embedding
    /// reads it so); elsewhere `dynamic` is dynamic NTK, the default frequencies within the
    /// positions the graph's caches hold.
    pub ntk_alpha: bool,
}

/// Which dimensions of a head RoPE rotates together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RotaryPairs {
    /// Dimension `i` with `i + rotary_dim / 2` (Llama's `rotate_half`).
    Halves,
    /// Dimensions `2i` and `2i + 1` (GLM, ERNIE 4.5): `RotaryEmbedding` with `interleaved = 1`.
    Interleaved,
}

/// The order of a block's two halves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockShape {
    /// Attention, its residual add, then the MLP on the sum (Llama).
    Sequential,
    /// Attention and the MLP both read the block input, and both outputs join the residual:
    /// `(attn(ln(h)) + mlp(ln(h))) + h` with the one norm before attention (Phi-1/2), or with
    /// `norms.before_mlp` on `h` for the MLP where the table names one (GPT-NeoX's
    /// `post_attention_layernorm`: `mlp(ln2(h)) + attn(ln1(h)) + h`, the same sum).
    Parallel,
    /// [`BlockShape::Parallel`] whose MLP always reads the attention's norm: the table's
    /// `before_mlp` norm belongs to the family's sequential shape (Falcon's
    /// `post_attention_layernorm`, built when `parallel_attn` is false).
    ParallelSharedNorm,
    /// [`BlockShape::Parallel`] with transformers' other order: `(h + attn(ln(h))) + mlp(ln(h))`
    /// (Cohere's `residual + attention + mlp`). The same sum, rounded as transformers rounds it.
    ParallelResidualFirst,
    /// The norms after the residual adds: `h = ln1(h + attn(h))`, then `ln2(h + mlp(h))`, with
    /// the table's before-attention and before-MLP norms as `ln1` and `ln2` (OPT-350m's
    /// `do_layer_norm_before` false: `self_attn_layer_norm`, `final_layer_norm`).
    PostNorm,
}

/// [`Layout::block_when`]: `on` when the boolean `key` (absent: `default`) is true, the
/// layout's `block` otherwise.
#[derive(Clone, Copy, Debug)]
pub struct BlockSwitch {
    pub key: &'static str,
    pub default: bool,
    pub on: BlockShape,
}

/// Where the norms' epsilon comes from.
#[derive(Clone, Copy, Debug)]
pub enum NormEps {
    /// The generic spellings: `rms_norm_eps` / `layer_norm_epsilon` / `layer_norm_eps`.
    Generic,
    /// A family key (StarCoder2's `norm_epsilon`, Nemotron's `norm_eps`; their configs may carry
    /// an unused `rms_norm_eps`), with transformers' default.
    Key(Key),
    /// Fixed in transformers' code, not configurable (OLMo 1's LayerNorm: 1e-5).
    Fixed(f64),
}

/// Checkpoint tensors the graph does not need, by name (starting with `prefix` and ending with
/// `suffix`; either may be empty), and why.
pub struct Unused {
    pub prefix: &'static str,
    pub suffix: &'static str,
    pub reason: &'static str,
}

impl Unused {
    pub fn matches(&self, name: &str) -> bool {
        name.starts_with(self.prefix) && name.ends_with(self.suffix)
    }
}
