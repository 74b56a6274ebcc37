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
    /// Per-head RMSNorm on q and k before RoPE (Qwen3).
    pub qk_norm: Option<(&'static str, &'static str)>,
    pub input_norm: &'static str,
    pub post_attention_norm: &'static str,
    pub mlp: MlpNames,
    pub final_norm: &'static str,
    pub lm_head: &'static str,
}

/// How q/k/v projections are stored.
pub enum AttentionNames {
    Separate { q: &'static str, k: &'static str, v: &'static str },
    /// One projection with q, k and v stacked along the output axis (Phi-3 `qkv_proj`,
    /// GPT-2 `c_attn`); split into three weights by Slice recipes.
    Fused { qkv: &'static str },
}

/// How the MLP is stored.
pub enum MlpNames {
    /// `down(act(gate(x)) * up(x))` with separate weights (Llama).
    Gated { gate: &'static str, up: &'static str, down: &'static str },
    /// The same with gate and up stacked in one tensor, gate first (Phi-3 `gate_up_proj`).
    GatedFused { gate_up: &'static str, down: &'static str },
    /// `down(act(up(x)))` (GPT-2 `c_fc`, `c_proj`).
    Plain { up: &'static str, down: &'static str },
}

/// Whether a group of projections has a bias.
#[derive(Clone, Copy, Debug)]
pub enum Bias {
    Never,
    Always,
    /// As the config's boolean key says (default false), e.g. Llama's `attention_bias`.
    Config(&'static str),
}

impl Bias {
    pub fn resolve(self, c: &DecoderConfig) -> bool {
        match self {
            Bias::Never => false,
            Bias::Always => true,
            Bias::Config(key) => c.flag(key, false),
        }
    }
}

/// How positions enter the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positions {
    /// Rotary embedding on q and k (settings from the config's rope keys).
    Rotary,
    /// Learned absolute embeddings added to the token embeddings (`names.embed_positions`).
    Learned,
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
}

/// A checkpoint tensor the graph does not need, by name suffix, and why.
pub struct Unused {
    pub suffix: &'static str,
    pub reason: &'static str,
}
