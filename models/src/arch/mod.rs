//! Architectures: how a checkpoint's `model_type` maps onto components. Each family is a
//! declarative table (weight names, which optional parts exist, structural variants) read by
//! one generic builder, so adding a Llama-like model is adding a table, not code.

mod decoder;
mod encoder;
mod families;
mod family;
mod moe;
pub mod vision;

pub use encoder::{type_vocab_size, EncoderFamily, EncoderIo, EncoderNames, EncoderPositions};
pub use families::{AFMOE, OPENAI_GPT, BLOOM, MPT, DBRX, OPT, GPT_NEO, BIOGPT, CODEGEN, COHERE2_MOE, XGLM, PERSIMMON, EXAONE, SARVAM_MOE, PARAM2MOE, INTERNLM3, IQUESTCODER, GRANITEMOEHYBRID, AXK1, MINICPM3, MINICPM5_MOE, NANOCHAT, GRANITE_SWA, GRANITEMOE_SWA, FALCON, FLINT, GRANITEMOESHARED, KOLIBRI1, GPTJ, HYPERCLOVAX, MELLUM, HY_V3, JAIS2, APERTUS, CWM, GPT_BIGCODE, MINIMAX_M2, VAULTGEMMA, MINISTRAL, DEEPSEEK_V2, DEEPSEEK_V3, DOTS1, EXAONE_MOE, FLEX_OLMO, HUNYUAN_MOE, SARVAM_MLA, SOLAR_OPEN, GLM4_MOE, GLM4_MOE_LITE, MISTRAL4, OLMOE, YOUTU, ERNIE4_5_MOE, GPT_NEOX, HUNYUAN_DENSE, GRANITEMOE, MINISTRAL3, ARCEE, BERT, COHERE, COHERE2, EXAONE4, HELIUM, STABLELM, ROBERTA, ERNIE4_5, OLMO3, SEED_OSS, GEMMA, GEMMA2, GEMMA3, GLM, GLM4, GPT2, GPT_OSS, GRANITE, LLAMA, MISTRAL, MIXTRAL, NEMOTRON, OLMO, PHIMOE, QWEN2_MOE, QWEN3_MOE, OLMO2, PHI, PHI3, QWEN2, QWEN3, SMOLLM3, STARCODER2};
pub use family::{
    AttentionNames, AttentionScale, Bias, BlockNorms, BlockSwitch, EmbedProjection, ExpertActivation, FinalNorm, ExpertNames, KeyDefault, RopeDefault, BlockShape, DecoderFamily, EmbeddingScale, FullEvery, Key, LayerKinds, Layout, LocalRope, RopeLayers,
    GroupKeys, GroupedRouting, HeadWeights, LatentNames, MlpNames, MoeKeys, MoeNames, NameTable, SharedWidth, SharedCombine, NoRope, NormEps, SharedExpert, SparseLayers, TopKNorm, NormOver, Positions, PositionSwitch, Alibi, QkNorm, QueryPositionScale, RotaryPairs, Routing, Scaling, Unused, NO_SCALING, UNIFORM_LAYERS, FULL_ATTENTION_LAYERS,
};

use crate::{Checkpoint, GraphBuilder, Result};

/// Values the task hands to an architecture, and the names it expects back.
pub struct DecoderIo {
    /// The token input whose first two dims are [batch, seq]: `input_ids`, or the
    /// `inputs_embeds` input of a decoder fed by an embedding part.
    pub input_ids: String,
    /// `Some(inputs_embeds)`: the decoder starts from these rows instead of gathering from its
    /// embedding table (a vision-language package's decoder).
    pub inputs_embeds: Option<String>,
    pub attention_mask: String,
    pub position_ids: String,
    /// `(key, value)` past inputs per layer.
    pub past: Vec<(String, String)>,
    /// `(key, value)` present output names per layer.
    pub present: Vec<(String, String)>,
    /// How a tied output projection reads the embedding.
    pub tied_head: crate::TiedHead,
    /// The KV cache form: the past inputs are fixed-length buffers when it is static.
    pub kv_cache: crate::KvCache,
    /// Deepstack blocks carried in `inputs_embeds` beside the embeddings (Qwen3-VL; 0
    /// otherwise): block j is added to the hidden states after layer j.
    pub deepstack: usize,
}

/// The decoder families this build knows, in the order they are listed to users.
pub const DECODERS: &[&DecoderFamily] =
    &[&LLAMA, &MISTRAL, &QWEN2, &QWEN3, &PHI3, &GPT2, &GEMMA, &GEMMA2, &VAULTGEMMA, &GEMMA3, &GRANITE, &OLMO2, &STARCODER2, &MIXTRAL, &QWEN2_MOE, &QWEN3_MOE, &SMOLLM3, &OLMO, &ERNIE4_5, &NEMOTRON, &PHI, &GLM, &GLM4, &PHIMOE, &GPT_OSS, &ARCEE, &JAIS2, &SEED_OSS, &OLMO3, &EXAONE4, &HELIUM, &COHERE, &COHERE2, &STABLELM, &MINISTRAL3, &MINISTRAL, &CWM, &GRANITEMOE, &HUNYUAN_DENSE, &GPT_NEOX, &APERTUS, &DEEPSEEK_V2, &DEEPSEEK_V3, &GLM4_MOE, &GLM4_MOE_LITE, &MISTRAL4, &OLMOE, &YOUTU, &ERNIE4_5_MOE, &DOTS1, &SOLAR_OPEN, &EXAONE_MOE, &HUNYUAN_MOE, &SARVAM_MLA, &FLEX_OLMO, &MINIMAX_M2, &GPT_BIGCODE, &AFMOE, &HY_V3, &GPTJ, &MELLUM, &HYPERCLOVAX, &FLINT, &KOLIBRI1, &GRANITEMOESHARED, &FALCON, &AXK1, &MINICPM3, &GRANITE_SWA, &GRANITEMOE_SWA, &MINICPM5_MOE, &NANOCHAT, &GRANITEMOEHYBRID, &EXAONE, &INTERNLM3, &IQUESTCODER, &SARVAM_MOE, &PARAM2MOE, &OPT, &GPT_NEO, &BIOGPT, &CODEGEN, &COHERE2_MOE, &XGLM, &PERSIMMON, &BLOOM, &MPT, &DBRX, &OPENAI_GPT];

/// The family that builds `model_type`.
pub fn decoder_for(model_type: &str) -> Option<&'static DecoderFamily> {
    DECODERS.iter().copied().find(|f| f.model_types.contains(&model_type))
}

/// The encoder families this build knows.
pub const ENCODERS: &[&EncoderFamily] = &[&BERT, &ROBERTA];

/// The encoder family that builds `model_type`.
pub fn encoder_for(model_type: &str) -> Option<&'static EncoderFamily> {
    ENCODERS.iter().copied().find(|f| f.model_types.contains(&model_type))
}

/// All supported `model_type` values (decoders, then encoders), for error messages and
/// `--help`.
pub fn supported_model_types() -> Vec<&'static str> {
    DECODERS.iter().flat_map(|f| f.model_types.iter().copied()).chain(ENCODERS.iter().flat_map(|f| f.model_types.iter().copied())).collect()
}

/// The supported decoder `model_type` values.
pub fn decoder_model_types() -> Vec<&'static str> {
    DECODERS.iter().flat_map(|f| f.model_types.iter().copied()).collect()
}

/// The supported encoder `model_type` values.
pub fn encoder_model_types() -> Vec<&'static str> {
    ENCODERS.iter().flat_map(|f| f.model_types.iter().copied()).collect()
}

/// Builds the decoder body: embeddings through logits. Returns the logits value name.
pub fn build_decoder(family: &DecoderFamily, b: &mut GraphBuilder, ckpt: &Checkpoint, io: &DecoderIo) -> Result<String> {
    family.build(b, ckpt, io)
}
