//! A GGUF file (llama.cpp's checkpoint format) read as a checkpoint: the model config from the
//! file's metadata, llama.cpp's tensor names mapped to the names the families read, the q/k
//! row permutation llama.cpp's converter applied undone, and every block-quantized tensor kept
//! as its own integers ([`ir::PackedWeight::ggml`]); float tensors stay float.
//!
//! Architectures mapped (`general.architecture`): `llama` (SmolLM2, Llama 2/3, Llama 3.1/3.2
//! with their rope factors, Mistral files written as llama), `qwen2`, `qwen3` (q/k norms
//! `attn_q_norm` / `attn_k_norm`, not permuted), `phi3` (Phi-3, Phi-3.5, Phi-4-mini), `gemma`,
//! `gemma2` and `gemma3` (text), `granite` (Granite 3.x dense), `olmo` (OLMo 1), `olmo2` (OLMo 2),
//! `starcoder2`, `phi2` (Phi-1, 1.5 and 2: our `phi`), `smollm3`, `glm4` (GLM-4-0414),
//! `ernie4_5` (dense), `nemotron` and `gpt2`.
//!
//! Mixture-of-experts files (llama.cpp's `build_moe_ffn`): `llama` with `llama.expert_count`
//! (Mixtral), `qwen2moe` (with its sigmoid-gated shared expert) and `qwen3moe`. The experts are
//! 3-D tensors `ffn_gate_exps` / `ffn_up_exps` / `ffn_down_exps` (ggml `[K, rows, experts]`),
//! whose experts are contiguous slabs: each is read as its own 2-D tensor under the family's
//! per-expert name (a block-quantized slab keeps its integers, and the quantize step writes
//! the stacks as `com.microsoft.QMoE` where the table fuses MoE). The router `ffn_gate_inp` is
//! softmax top-`expert_used_count`; llama.cpp renormalizes the chosen weights for llama and
//! qwen3moe and not for qwen2moe (its `norm_w` argument, fixed per architecture: the file has
//! no key for it), which becomes `norm_topk_prob`. The expert size is
//! `expert_feed_forward_length`, else llama.cpp's default `feed_forward_length /
//! expert_used_count`; qwen2moe's shared expert is `expert_shared_feed_forward_length`, else
//! `feed_forward_length`. A qwen layer without a router is a dense MLP (`mlp_only_layers`).
//! `phimoe` (Phi-3.5-MoE) is Phi-3's keys and LongRoPE tensors with biased LayerNorms and
//! projections and Mixtral's experts ([`phimoe_config`]: the file's one `attn_factor` stands
//! for both of PhiMoE's mscales).
//! Anything else, any metadata key of the architecture that is not read here, a tensor that is
//! not mapped, and a ggml type with no MatMulNBits form (crate `ir::ggml`) are refused by name
//! before anything is written.
//!
//! gpt-oss files (llama.cpp's `GptOssModel`, its `LLM_ARCH_OPENAI_MOE` loader and graph): a
//! TextModel, so q/k are not permuted; attention sinks `attn_sinks`, biases on every
//! projection, the router `ffn_gate_inp` with its bias, the norm before the experts
//! `post_attention_norm`. The converter split transformers' `gate_up_proj` (gate and up on even
//! and odd columns) into `ffn_gate_exps` / `ffn_up_exps` with their biases; the import weaves
//! them back ([`gpt_oss_experts`]), each stack read whole, so MXFP4 experts (the format of the
//! gpt-oss releases; `ir::ggml`: exact as 8-bit codes) keep their integers into
//! `com.microsoft.QMoE`. The config: the expert size `expert_feed_forward_length`, the window
//! `attention.sliding_window` on the layers llama.cpp's pattern makes sliding
//! (`attention.sliding_window_pattern`, period 2 by default: even layers), YaRN from
//! `rope.scaling.*` with transformers' gpt-oss settings for the rest (`beta_fast` 32,
//! `beta_slow` 1, `truncate` false: llama.cpp's kernel always truncates the correction range,
//! a small difference at long context; transformers is the reference here), and the clamped
//! SwiGLU's alpha 1.702 and limit 7.0, constants of llama.cpp's graph that no key carries (a
//! checkpoint trained with another limit is not expressible in GGUF).
//!
//! Gemma files (llama.cpp's `GemmaModel`, `Gemma2Model`, `Gemma3Model`): every `*norm.weight`
//! is stored as `weight + 1` (Gemma's RMSNorm multiplies by `1 + weight`), so the import reads
//! it back as `stored - 1` and the family adds the 1 again (transformers' GGUF loader subtracts 1
//! the same way); q/k are not permuted. What the file does not state, the import takes from
//! llama.cpp's loader (`llama-model.cpp`), which is what the file was written for: the attention
//! scale `1/sqrt(head size)` (`1/sqrt(hidden / heads)` for the 27B models, recognised there by
//! their layer count: 46 for Gemma 2, 62 for Gemma 3), sliding layers every other layer from
//! layer 0 (Gemma 2; window 4096 unless `attention.sliding_window`) or five of every six (Gemma
//! 3; window from `attention.sliding_window`, their own rope base 10000, unscaled), Gemma 2's
//! softcapping 50 / 30 unless the keys say otherwise, and tanh GELU.
//!
//! Llama 3.1/3.2 files (llama.cpp's `LlamaModel.generate_extra_tensors`): the converter turns a
//! llama3 `rope_scaling` into one F32 factor per rotary pair, `rope_freqs.weight` (1 for short
//! wavelengths, `factor` for long ones, `1 / ((1 - smooth) / factor + smooth)` between), and
//! writes no scaling key; ggml's rope divides each pair's angle by its factor
//! (`ggml_rope_cache_init`, `theta / freq_factors[i]`). The import reads the factors from the
//! tensor as they are (rope type `freq_factors`, [`crate::RopeKind::Factors`]), so the model is
//! the one the file describes: the llama3 frequencies up to f32 rounding. transformers' GGUF
//! loader (5.24) drops the tensor (no model weight maps to it) and reads no rope scaling for
//! llama, so it computes the unscaled model.
//!
//! Phi-3 files (llama.cpp's `Phi3MiniModel` and its `LLM_ARCH_PHI3` loader): `attn_qkv` and
//! `ffn_up` (gate then up) are Phi-3's fused `qkv_proj` / `gate_up_proj`, kept as they are
//! (quantized ones stay packed: the family splits them by row slices, which keep the integers);
//! `rope.dimension_count` below the head size is `partial_rotary_factor`; LongRoPE is the two
//! F32 tensors `rope_factors_long.weight` / `rope_factors_short.weight` with
//! `rope.scaling.attn_factor` (1 when absent, as llama.cpp defaults it) and
//! `rope.scaling.original_context_length` (else `context_length`); `attention.sliding_window`
//! (0: none) is the model's window, which transformers applies and llama.cpp's loader currently
//! ignores. The long set applies past the original length of the running sequence, as in
//! transformers (llama.cpp chooses by the context size it was started with).
//!
//! Granite, OLMo2, StarCoder2, Phi-2 and SmolLM3 files (llama.cpp's `GraniteModel`,
//! `Olmo2Model`, `StarCoder2Model`, `Phi2Model`, `SmolLM3Model` and their loaders), each read by
//! its own config function:
//! - granite: q/k permuted (a LlamaModel); `logit_scale` (required by llama.cpp; the logits are
//!   divided by it), `embedding_scale`, `residual_scale` and `attention.scale` are
//!   `logits_scaling` and the three multipliers; an absent or 0 scale is llama.cpp's default (no
//!   scaling; for attention `1/sqrt(head size)`, where transformers' default multiplier is 1).
//!   `rope.scaling.finetuned` (false: no RoPE at all in llama.cpp) is refused as unread.
//! - olmo2: nothing permuted, no norm before attention or the MLP, `post_attention_norm` /
//!   `post_ffw_norm` after them, q/k RMSNorms over the whole projection. OLMo 3 files (also
//!   `olmo2`, with `attention.sliding_window` > 0) become `olmo3`: `layer_types` from
//!   `attention.sliding_window_pattern` (one bool per layer as the converter writes it, or a
//!   period, default 4 as llama.cpp's loader), YaRN (`rope.scaling.*`) on the full layers only,
//!   the sliding ones unscaled at `rope.freq_base_swa` (the config's sliding-layer base, which
//!   the converter copies; else `rope.freq_base`), as transformers rotates them (llama.cpp's
//!   olmo2 graph uses `rope.freq_base` there; the published files state one base for both). A
//!   window or scaling key in a file without a window is refused.
//! - seed_oss (`SeedOssModel`, a TextModel): nothing permuted, q/k/v biases when the file has
//!   them (`attention_bias`), no o_proj bias (llama.cpp's loader has none: a file with one is
//!   refused as unmapped), the norm before the MLP is `post_attention_norm`, `head_dim` from
//!   `attention.key_length`.
//! - arcee (`ArceeModel`, a LlamaModel): q/k permuted, the plain relu2 MLP (`ffn_up`,
//!   `ffn_down`), Llama 3's `rope_freqs.weight` or YaRN (`rope.scaling.*`, not both).
//! - command-r (`CommandR2Model`) and cohere2 (`Cohere2Model`), TextModels: nothing permuted
//!   (Cohere's interleaved pairs are llama.cpp's NORM rope), one bias-free LayerNorm a layer
//!   (`attn_norm`, epsilon `attention.layer_norm_epsilon`), `logit_scale`, q/k/v biases when
//!   present, the head tied; cohere2's window and its layers (period 4 unless the file says).
//!   Command R+'s per-head q/k norms (`attn_q_norm` `[head_dim, heads]`, in every layer) switch
//!   `use_qk_norm` on (cohere2 has none).
//! - stablelm (`StableLMModel`, its own keys): nothing permuted, LayerNorms with bias, q/k/v
//!   biases when present, partial rotary from `rope.dimension_count`, no `rope.freq_base` (10000);
//!   the parallel residual where no layer has `ffn_norm` and StableLM 2 12B's per-head q/k norms
//!   (stacked `[head_dim, heads]`, split back per head) from the tensors, as llama.cpp's graph
//!   decides them (the converter writes `use_parallel_residual` true for a config without it).
//! - exaone (`ExaoneModel`, a TextModel: EXAONE 3 / 3.5): nothing permuted, Llama's blocks and
//!   `rope_freqs.weight` (llama3), read as the `llama` family (transformers builds EXAONE as
//!   Llama); the split `tokenizer.ggml.pre` `exaone` names is known.
//! - exaone4 (`Exaone4Model`, a TextModel): nothing permuted, OLMo 2's post-norms with per-head
//!   q/k norms, `rope_freqs.weight` (llama3), the window and its per-layer pattern when the
//!   file states one (else `sliding_window: null` with every layer full); with a window the
//!   full layers have no RoPE.
//! - starcoder2: nothing permuted, LayerNorms with bias (`attention.layer_norm_epsilon`;
//!   an RMS epsilon the converter may also write is not read, as llama.cpp's loader does not),
//!   biases on every projection, tanh GELU (ggml's). Neither converter nor loader has a sliding
//!   window for starcoder2, so none applies (StarCoder2-3B/7B's own configs have 4096).
//! - phi2: nothing permuted (NEOX rope), `rope.dimension_count` is `partial_rotary_factor`, no
//!   `rope.freq_base` written (llama.cpp's default 10000), biases everywhere, the head's too; q,
//!   k and v separate (today's checkpoints) or one `attn_qkv` (the original `mixer.Wqkv` ones),
//!   which is read as three row ranges of the file, quantized ones kept packed. The converter
//!   writes `feed_forward_length` as 4 x hidden; a file whose `ffn_up` disagrees is refused, as
//!   llama.cpp refuses it.
//! - smollm3: q/k permuted; the file states no NoPE layers: llama.cpp's loader fixes every
//!   fourth layer (`(layer + 1) % 4 == 0`) without RoPE, written as that `no_rope_layers` list.
//! - glm4 (`Glm4Model`): nothing permuted (GLM's rope turns adjacent pairs: llama.cpp's NORM
//!   rope on the file's order), four norms (`post_attention_norm` after attention, `ffn_norm`
//!   before the MLP, `post_ffw_norm` after it), the MLP's gate and up fused in `ffn_up` (gate
//!   first: transformers' `gate_up_proj` as it is), q/k/v biases, `rope.dimension_count` as
//!   `partial_rotary_factor`.
//! - ernie4_5 (`Ernie4_5Model`, dense): nothing permuted (adjacent pairs, as GLM), each
//!   projection's bias optional in llama.cpp and one `use_bias` switch in transformers (set when
//!   the file has q biases), the head tied when the file has no `output.weight`.
//! - gpt2 (`GPT2Model`): nothing permuted, no rope, learned positions (`position_embd`, kept
//!   F32 by the converter), LayerNorms with bias (`attention.layer_norm_epsilon`), biases
//!   everywhere, tanh GELU, the fused `attn_qkv` as `c_attn`; the converter transposed the
//!   Conv1D weights (`c_attn`, `c_proj`, `c_fc`) to `[out, in]`, so they are read back
//!   transposed, quantized ones as a transpose of the file's rows (their integers kept); the
//!   head tied when the file has no `output.weight`.
//! - starcoder (`StarCoderModel`, GPTBigCode): GPT-2's names and keys with Linear weights (read
//!   as stored) and one key/value head (`multi_query`); more key/value heads are refused.
//! - olmo (`OlmoModel`, OLMo 1): q/k permuted (LlamaModel's), no norm tensors (transformers'
//!   LayerNorm without weight or bias at 1e-5, the epsilon the converter writes; another is
//!   refused), `attention.clamp_kqv` as `clip_qkv` (q, k and v clamped, as llama.cpp does).
//! - nemotron (`NemotronModel`): nothing permuted (NEOX), every `*norm.weight` stored as
//!   `weight + 1` (LayerNorm1P multiplies by `1 + weight`: read back as `stored - 1`, as for
//!   Gemma), LayerNorms with bias at `attention.layer_norm_epsilon` (`norm_eps`; the RMS
//!   epsilon TextModel also writes is not read), relu2 MLP `ffn_up` / `ffn_down`,
//!   `rope.dimension_count` as `partial_rotary_factor`.
//! - falcon (`FalconModel`): nothing permuted (NEOX), `query_key_value` restacked from per
//!   key/value group to q, k, v rows (`tensor_data_layout` `jploski`; put back per group by
//!   [`QkvGroups`]), no rope base (10000 unless the file says), one LayerNorm a layer (Falcon-40B's
//!   second refused). jais2 (`Jais2Model`): biased LayerNorms and projections, relu2.
//! - bloom (`BloomModel`) and mpt (`MPTModel`): ALiBi, no RoPE keys; BLOOM's restacked
//!   `query_key_value` put back per head (as GPT-NeoX's), its embedding norm, llama.cpp's fixed
//!   maximum 8; MPT's `Wqkv` as stored with its clamp, its maximum 8 required, and what the
//!   file cannot state (`softmax_scale`, exact GELU, MPT's slopes) transformers' MPT
//!   ([`mpt_config`]).
//! - minicpm (`MiniCPMModel`): read as `granite` with MiniCPM's scalings ([`minicpm_config`]).
//! - qwen2vl, qwen3vl, qwen3vlmoe (`Qwen2VLModel`, `Qwen3VLTextModel`, `Qwen3VLMoeTextModel`):
//!   the text model ([`vl_text_config`]).
//! - dbrx (`DbrxModel`): DbrxConfig's nested keys from the file's ([`dbrx_config`]), `Wqkv` as
//!   stored, the expert stacks read as DBRX's rows, `w2` transposed back ([`stacked_experts`]).
//! - mellum (`MellumModel`): Qwen3-MoE's reading with windows and a RoPE base per layer type;
//!   granitemoe files with a shared MLP (`expert_shared_feed_forward_length`) are
//!   GraniteMoeShared, the shared gate and up joined back ([`joined_shared_mlp`]).
//! - minicpm3 (`MiniCPM3Model`): DeepSeek-V2's latent names with rotate-half RoPE and LongRoPE
//!   factor tensors; the scalings llama.cpp's graph fixes are MiniCPM3Config's defaults.
//! - hy_v3 (`HYV3Model`): per-head q/k norms, sigmoid experts with the correction bias beside
//!   the shared MLP, dense layers where no router is, prediction layers appended and unread.
//! - chatglm (`ChatGLMModel`, GLM-4-9B-chat): transformers' `glm`, a fused `attn_qkv` with biases
//!   read as its rows, half of each head rotated in adjacent pairs, the fused gate/up MLP.
//! - granite_swa (`GraniteSWAModel`, `GraniteMoeSWAModel`): Granite's reading with sinks, the
//!   window pattern and NoPE layers from `attention.rope_pattern`; with experts GraniteMoeSWA's
//!   fused stacks and shared MLP under transformers 5's names.
//!
//! transformers' GGUF loader (5.24) reads none of these but starcoder2, and for it maps no
//! `rope.freq_base` (it runs the config default 10000 where the file says otherwise, e.g.
//! StarCoder2-3B's 999999.4); the import follows the file and llama.cpp.
//!
//! The names and the permutation follow llama.cpp's `convert_hf_to_gguf.py` (`LlamaModel.permute`:
//! rows `[heads, 2, head_dim / 2]` swapped to `[heads, head_dim / 2, 2]`, for q with the query
//! heads and k with the key/value heads; Qwen2 and Qwen3 are not permuted), which transformers' GGUF loader
//! undoes the same way.

use crate::prequant::QuantSource;
use crate::{Error, Result};
use ir::gguf::{GgmlType, GgufFile, TensorInfo, Value};
use ir::{DType, PackedFormat, PackedWeight, Recipe, SourceTensor};
use serde_json::{json, Map, Value as Json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The GGUF file `path` names: the file itself, or the one `*.gguf` of a folder without
/// config.json (or the first of the one split set it holds). `None`: not a GGUF checkpoint (a
/// Hugging Face folder). A folder holding several models is an error naming the files.
pub fn gguf_file(path: &Path) -> Result<Option<PathBuf>> {
    if path.is_file() {
        return Ok(path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")).then(|| path.to_path_buf()));
    }
    if !path.is_dir() || path.join("config.json").exists() {
        return Ok(None);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| Error::Checkpoint { path: path.to_path_buf(), reason: format!("cannot list it: {e}") })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")))
        .collect();
    found.sort();
    if let Some(first) = one_split_set(&found) {
        // Named as a set: it must be one (the first file's `split.count` covering them all), or
        // the others would be left out without a word.
        let set = ir::gguf::GgufFile::open(&first)?;
        if set.shards.len() != found.len() {
            return Err(Error::Checkpoint {
                path: path.to_path_buf(),
                reason: format!(
                    "holds {} GGUF files named as one split set, but `{}` is {} of them; pass the file to build with --model FILE.gguf",
                    found.len(),
                    first.file_name().unwrap_or_default().to_string_lossy(),
                    if set.shards.len() == 1 { "not split".to_string() } else { format!("the first of {}", set.shards.len()) }
                ),
            });
        }
        return Ok(Some(first));
    }
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(Error::Checkpoint {
            path: path.to_path_buf(),
            reason: format!(
                "holds {} GGUF files ({}); pass the one to build with --model FILE.gguf (for a split model, its `-00001-of-` file)",
                found.len(),
                found.iter().map(|p| format!("`{}`", p.file_name().unwrap_or_default().to_string_lossy())).collect::<Vec<_>>().join(", ")
            ),
        }),
    }
}

/// The first file when `files` (sorted) are exactly the files of one split GGUF, named as
/// llama.cpp names them (`{prefix}-{i:05}-of-{n:05}.gguf`, i = 1..=n): that set is one model.
fn one_split_set(files: &[PathBuf]) -> Option<PathBuf> {
    let parts: Vec<(&str, usize, usize)> = files.iter().map(|p| ir::gguf::split_stem(p.file_stem()?.to_str()?)).collect::<Option<_>>()?;
    let &(prefix, _, count) = parts.first()?;
    let same_set = parts.iter().all(|&(p, _, c)| p == prefix && c == count);
    let numbered = parts.iter().enumerate().all(|(i, &(_, no, _))| no == i + 1);
    (same_set && numbered && count == files.len()).then(|| files[0].clone())
}

/// What a GGUF file gives the checkpoint.
pub(crate) struct Imported {
    /// The config.json the metadata stands for (parsed by DecoderConfig like any other).
    pub config: Map<String, Json>,
    /// Float tensors, by family name.
    pub tensors: BTreeMap<String, SourceTensor>,
    /// Float tensors read through a recipe (q/k rows un-permuted), by family name.
    pub views: BTreeMap<String, Recipe>,
    /// Block-quantized tensors, by family name.
    pub packed: BTreeMap<String, Arc<PackedWeight>>,
    /// `None` for a file of float tensors only (a float checkpoint).
    pub source: Option<QuantSource>,
    /// The parsed file (its metadata: the tokenizer).
    pub file: GgufFile,
}

/// The model families a GGUF architecture maps to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Llama,
    Qwen2,
    Qwen3,
    Phi3,
    Gemma,
    Gemma2,
    Gemma3,
    Qwen2Moe,
    Qwen3Moe,
    Granite,
    Olmo2,
    Starcoder2,
    Phi2,
    Smollm3,
    GptOss,
    Glm4,
    Ernie4_5,
    Olmo,
    Nemotron,
    Gpt2,
    Bert,
    SeedOss,
    Arcee,
    /// EXAONE 3 / 3.5 (`ExaoneModel`): Llama's blocks, read as the `llama` family transformers
    /// builds them with.
    Exaone,
    Exaone4,
    CommandR,
    Cohere2,
    StableLm,
    Mistral3,
    Apertus,
    GptNeox,
    /// DeepSeek-V2 and V3 (and files of their model, Kimi K2's among them): latent attention and
    /// grouped experts; which of the two from the routing the metadata states
    /// ([`deepseek2_config`]).
    Deepseek2,
    /// GLM-4.5, 4.6 and 4.7 (`glm4moe`): GQA with partial rotary, q/k norms and biases, and
    /// DeepSeek-V3-style experts; the multi-token prediction layers after the decoder unread.
    Glm4Moe,
    /// dots.llm1 (`dots1`): Qwen3's attention with DeepSeek-V3-style experts.
    Dots1,
    /// OLMoE (`olmoe`): q/k norms over the whole projections, softmax top-k experts.
    Olmoe,
    /// ERNIE 4.5 MoE (`ernie4_5-moe`): the dense ERNIE 4.5 layers with softmax experts chosen
    /// with a correction bias, every `interleave_moe_layer_step`-th layer from the dense lead.
    Ernie4_5Moe,
    /// Hunyuan-A13B (`hunyuan-moe`): per-head q/k norms, softmax top-k experts and a shared MLP
    /// in every layer, NTK-alpha RoPE written as a stretched base.
    HunyuanMoe,
    /// Hunyuan's dense models (`hunyuan-dense`: Hunyuan-0.5B to 7B): Hunyuan-A13B's attention
    /// and RoPE with a plain MLP.
    HunyuanDense,
    /// StarCoder 1 and its kin (`starcoder`): GPTBigCode, GPT-2's block with Linear weights and
    /// one key/value head.
    StarCoder,
    /// Jais 2 (`jais2`): Llama's attention with biased LayerNorms and Nemotron's plain relu2
    /// MLP, biases on every projection.
    Jais2,
    /// Falcon-7B and Falcon2-11B (`falcon`): one biased LayerNorm feeding attention and the
    /// GELU MLP in parallel, q/k/v in one projection (restacked by the converter), no biases.
    Falcon,
    /// JetBrains' Mellum (`mellum`: Mellum2): Qwen3-MoE's attention and softmax experts with
    /// sliding windows on some layers, each layer type with its own RoPE base.
    Mellum,
    /// MiniCPM3 (`minicpm3`): Llama's blocks with DeepSeek-V2's latent attention (rotate-half
    /// RoPE, LongRoPE factor tensors), llama.cpp's fixed scalings.
    MiniCpm3,
    /// Tencent's Hy3 (`hy_v3`): Apertus' attention (per-head q/k norms before RoPE), dense
    /// layers then sigmoid experts with a correction bias beside an always-on shared MLP.
    HyV3,
    /// IBM's GraniteSWA and GraniteMoeSWA (`granite_swa`): Granite's blocks (q/k permuted) with
    /// attention sinks, sliding windows by a per-layer pattern and NoPE layers by
    /// `attention.rope_pattern`; with `expert_count`, GraniteMoeSWA's fused gate/up experts and
    /// fused shared MLP.
    GraniteSwa,
    /// ChatGLM's last form, GLM-4-9B-chat (`chatglm`): transformers' `glm` (GLM-4), q/k/v with
    /// biases (fused by the THUDM checkpoints), half the head rotated in adjacent pairs, the
    /// fused gate/up MLP.
    ChatGlm,
    /// IBM's GraniteMoE (`granitemoe`): Granite's four scales with stacked experts.
    GraniteMoe,
    /// Phi-3.5-MoE (`phimoe`): Phi-3's LongRoPE keys and factor tensors, LayerNorms and
    /// projections with biases, Mixtral's expert stacks routed by sparsemixer.
    Phimoe,
    /// Arcee's Trinity (`afmoe`): gated attention with per-head q/k norms, four norms a layer,
    /// windows with RoPE on the sliding layers, DeepSeek-style sigmoid experts after a dense lead.
    Afmoe,
    /// MiniMax-M2 (`minimax-m2`): q/k norms over the whole projections, partial rotary, Mixtral's
    /// expert stacks routed by sigmoid scores with a correction bias.
    MinimaxM2,
    /// Mistral 4 (`mistral4`): DeepSeek-V3's latent attention and loader with softmax-routed
    /// grouped experts stored fused (`ffn_gate_up_exps`).
    Mistral4,
    /// K-EXAONE (`exaone-moe`): EXAONE 4's windowed attention (RoPE on the sliding layers only)
    /// in pre-norm blocks with DeepSeek-V3-style experts; multi-token prediction layers after
    /// the decoder unread.
    ExaoneMoe,
    /// BLOOM and BLOOMZ (`bloom`): ALiBi (llama.cpp's fixed maximum bias 8: BLOOM's slopes), a
    /// LayerNorm on the embeddings, biased LayerNorms and projections, q/k/v in one projection
    /// (restacked by the converter), the tanh-GELU MLP 4 x hidden wide.
    Bloom,
    /// MPT-7B and MPT-30B (`mpt`): MPT's ALiBi, bias-free LayerNorms and projections, q/k/v in
    /// one projection clamped to `attention.clamp_kqv`, the GELU MLP 4 x hidden wide.
    Mpt,
    /// DBRX (`dbrx`): bias-free LayerNorms, q/k/v in one projection clamped to
    /// `attention.clamp_kqv`, rotate-half RoPE, softmax top-k experts renormalized, the
    /// experts' rows read as DBRX's `w1` / `v1` / `w2` ([`stacked_experts`]).
    Dbrx,
    /// MiniCPM (`minicpm`: MiniCPM-2B, MiniCPM-1B): Llama's blocks with Granite's four
    /// scalings (llama.cpp runs it with its granite graph), read as transformers' `granite`.
    MiniCpm,
}

/// One architecture's mapping.
struct Arch {
    /// `model_type` of the config it stands for.
    model_type: &'static str,
    /// Whether llama.cpp permuted the rows of q and k.
    permuted_qk: bool,
    kind: Kind,
    /// A vision-language model's text part (`qwen2vl`, `qwen3vl`: the vision tower is a separate
    /// mmproj file): its multimodal RoPE sections and deepstack count are read and checked, and
    /// the text model built, where every section sees the same position (plain RoPE).
    vl_text: bool,
}

impl Arch {
    /// Whether the attention is DeepSeek's latent one (`deepseek2`, Mistral 4 on its loader,
    /// MiniCPM3).
    fn latent(&self) -> bool {
        matches!(self.kind, Kind::Deepseek2 | Kind::Mistral4 | Kind::MiniCpm3)
    }

    fn gemma(&self) -> bool {
        matches!(self.kind, Kind::Gemma | Kind::Gemma2 | Kind::Gemma3)
    }

    /// Whether a YaRN `rope.scaling.type` is read ([`yarn_scaling`]).
    fn reads_yarn(&self) -> bool {
        matches!(self.kind, Kind::GptOss | Kind::Olmo2 | Kind::Arcee | Kind::Mistral3 | Kind::Deepseek2 | Kind::Mistral4)
    }

    /// Whether the norms are LayerNorms (epsilon `attention.layer_norm_epsilon`), not RMSNorms.
    fn layer_norm(&self) -> bool {
        matches!(self.kind, Kind::Starcoder2 | Kind::Phi2 | Kind::Olmo | Kind::Nemotron | Kind::Gpt2 | Kind::StarCoder | Kind::Bert | Kind::CommandR | Kind::Cohere2 | Kind::StableLm | Kind::GptNeox | Kind::Jais2 | Kind::Falcon | Kind::Bloom | Kind::Mpt | Kind::Dbrx)
    }

    /// Whether llama.cpp's converter stored every `*norm.weight` as `weight + 1` for a model
    /// whose norm multiplies by `1 + weight` (Gemma's RMSNorm, Nemotron's LayerNorm1P).
    fn norm_plus_one(&self) -> bool {
        self.gemma() || self.kind == Kind::Nemotron
    }

    /// Metadata keys read beyond [`READ_KEYS`].
    fn extra_keys(&self) -> Vec<&'static str> {
        let own: &[&str] = match self.kind {
            Kind::Qwen2 | Kind::Qwen3 | Kind::Gemma | Kind::Smollm3 | Kind::Glm4 | Kind::Ernie4_5 | Kind::SeedOss | Kind::Apertus | Kind::ChatGlm | Kind::Exaone => &[],
            // OLMo 3 (written as olmo2): its windows and the full layers' YaRN.
            Kind::Olmo2 => &[
                "attention.sliding_window",
                "attention.sliding_window_pattern",
                "rope.freq_base_swa",
                "rope.scaling.factor",
                "rope.scaling.original_context_length",
                "rope.scaling.yarn_beta_fast",
                "rope.scaling.yarn_beta_slow",
                "rope.scaling.yarn_attn_factor",
            ],
            Kind::Exaone4 => &["attention.sliding_window", "attention.sliding_window_pattern"],
            Kind::MinimaxM2 => &["expert_count", "expert_used_count", "expert_feed_forward_length", "expert_gating_func"],
            Kind::Afmoe => &[
                "attention.sliding_window",
                "attention.sliding_window_pattern",
                "rope.freq_base_swa",
            ],
            Kind::ExaoneMoe => &[
                "attention.sliding_window",
                "attention.sliding_window_pattern",
                "rope.freq_base_swa",
                "nextn_predict_layers",
                "expert_shared_feed_forward_length",
            ],
            Kind::CommandR => &["attention.layer_norm_epsilon", "logit_scale"],
            Kind::StableLm | Kind::GptNeox => &["attention.layer_norm_epsilon", "use_parallel_residual"],
            Kind::Cohere2 => &["attention.layer_norm_epsilon", "logit_scale", "attention.sliding_window", "attention.sliding_window_pattern"],
            // Ministral 3: its YaRN (`yarn_log_multiplier`: the config's `mscale_all_dim`) and the
            // query scale's beta; `attention.temperature_length` (the mistral-format converter's)
            // is not read by llama.cpp's loader either, which scales by the YaRN context.
            Kind::Mistral3 => &[
                "rope.scaling.factor",
                "rope.scaling.original_context_length",
                "rope.scaling.yarn_beta_fast",
                "rope.scaling.yarn_beta_slow",
                "rope.scaling.yarn_attn_factor",
                "rope.scaling.yarn_log_multiplier",
                "attention.temperature_scale",
                "attention.temperature_length",
            ],
            Kind::Olmoe => &["expert_count", "expert_used_count"],
            // `expert_shared_feed_forward_length`: the converter writes `intermediate_size /
            // num_key_value_heads` there; the shared experts' width is read from their tensors
            // by the family (`moe_intermediate_size x moe_num_shared_experts`), so it is not read.
            // The NTK-alpha RoPE's stretched base is `rope.freq_base`; the converter also writes
            // `rope.scaling.type` none with factor 1 and an original context, read as no scaling.
            Kind::HunyuanDense => &["rope.scaling.factor", "rope.scaling.original_context_length"],
            Kind::HunyuanMoe => &[
                "expert_count",
                "expert_used_count",
                "expert_feed_forward_length",
                "expert_shared_count",
                "expert_shared_feed_forward_length",
                "rope.scaling.factor",
                "rope.scaling.original_context_length",
            ],
            Kind::Ernie4_5Moe => &[
                "expert_count",
                "expert_used_count",
                "expert_feed_forward_length",
                "expert_shared_count",
                "expert_shared_feed_forward_length",
                "interleave_moe_layer_step",
                "leading_dense_block_count",
            ],
            Kind::Dots1 => &[],
            Kind::Glm4Moe => &[
                "nextn_predict_layers",
            ],
            // Mistral 4's query scaling keys are refused in deepseek2 files by `deepseek2_config`.
            Kind::Deepseek2 | Kind::Mistral4 => &[
                "nextn_predict_layers",
                "attention.q_lora_rank",
                "attention.kv_lora_rank",
                "attention.key_length_mla",
                "attention.value_length_mla",
                "attention.temperature_scale",
                "attention.temperature_length",
                "rope.scaling.factor",
                "rope.scaling.original_context_length",
                "rope.scaling.yarn_beta_fast",
                "rope.scaling.yarn_beta_slow",
                "rope.scaling.yarn_log_multiplier",
            ],
            Kind::Arcee => &[
                "rope.scaling.factor",
                "rope.scaling.original_context_length",
                "rope.scaling.yarn_beta_fast",
                "rope.scaling.yarn_beta_slow",
                "rope.scaling.yarn_attn_factor",
            ],
            Kind::Olmo => &["attention.layer_norm_epsilon", "attention.clamp_kqv"],
            // TextModel writes `norm_eps` as the RMS epsilon too; the LayerNorm one is read.
            Kind::Nemotron | Kind::Jais2 => &["attention.layer_norm_epsilon"],
            // `tensor_data_layout`: "jploski", the restacked q/k/v FalconModel writes.
            Kind::Falcon => &["attention.layer_norm_epsilon", "tensor_data_layout"],
            // BLOOM's ALiBi maximum is a constant of llama.cpp's loader (8), no key.
            Kind::Bloom => &["attention.layer_norm_epsilon"],
            Kind::Mpt => &["attention.layer_norm_epsilon", "attention.clamp_kqv", "attention.max_alibi_bias"],
            Kind::Dbrx => &["attention.layer_norm_epsilon", "attention.clamp_kqv", "expert_count", "expert_used_count"],
            // `tensor_data_layout`: old convert.py files made from Meta's .pth checkpoints say
            // "Meta AI original pth", the layout (q/k rows permuted) every llama file has.
            Kind::Llama => &["expert_count", "expert_used_count", "tensor_data_layout"],
            Kind::Qwen3Moe => &["expert_count", "expert_used_count", "expert_feed_forward_length"],
            Kind::MiniCpm3 => &["attention.q_lora_rank", "attention.kv_lora_rank"],
            Kind::GraniteSwa => &[
                "logit_scale",
                "embedding_scale",
                "residual_scale",
                "attention.scale",
                "expert_count",
                "expert_used_count",
                "expert_shared_feed_forward_length",
                "attention.sliding_window",
                "attention.sliding_window_pattern",
                "attention.rope_pattern",
            ],
            Kind::HyV3 => &[
                "expert_count",
                "expert_used_count",
                "expert_feed_forward_length",
                "expert_shared_feed_forward_length",
                "expert_gating_func",
                "expert_weights_scale",
                "expert_weights_norm",
                "nextn_predict_layers",
            ],
            Kind::Mellum => &[
                "expert_count",
                "expert_used_count",
                "expert_feed_forward_length",
                "attention.sliding_window",
                "attention.sliding_window_pattern",
                "rope.freq_base_swa",
            ],
            Kind::Qwen2Moe => &["expert_count", "expert_used_count", "expert_feed_forward_length", "expert_shared_feed_forward_length"],
            Kind::Granite => &["logit_scale", "embedding_scale", "residual_scale", "attention.scale"],
            // No `attention.scale`: llama.cpp's minicpm loader does not read one.
            Kind::MiniCpm => &["logit_scale", "embedding_scale", "residual_scale"],
            Kind::GraniteMoe => &["logit_scale", "embedding_scale", "residual_scale", "attention.scale", "expert_count", "expert_used_count", "expert_shared_feed_forward_length"],
            Kind::Starcoder2 | Kind::Phi2 | Kind::Gpt2 | Kind::StarCoder => &["attention.layer_norm_epsilon"],
            Kind::Bert => &["attention.layer_norm_epsilon", "attention.causal", "pooling_type"],
            Kind::Phi3 => &["rope.scaling.original_context_length", "rope.scaling.attn_factor", "attention.sliding_window"],
            Kind::Phimoe => &["rope.scaling.original_context_length", "rope.scaling.attn_factor", "attention.sliding_window", "expert_count", "expert_used_count"],
            Kind::Gemma2 => &["attn_logit_softcapping", "final_logit_softcapping", "attention.sliding_window"],
            // `rope.freq_base_swa`: the sliding layers' base, which newer converters write.
            Kind::Gemma3 => &["final_logit_softcapping", "attention.sliding_window", "rope.scaling.factor", "rope.freq_base_swa"],
            Kind::GptOss => &[
                "expert_count",
                "expert_used_count",
                "expert_feed_forward_length",
                "attention.sliding_window",
                "attention.sliding_window_pattern",
                "rope.scaling.factor",
                "rope.scaling.original_context_length",
                "rope.scaling.yarn_beta_fast",
                "rope.scaling.yarn_beta_slow",
            ],
        };
        match self.kind {
            Kind::Afmoe | Kind::ExaoneMoe | Kind::Dots1 | Kind::Glm4Moe | Kind::Deepseek2 | Kind::Mistral4 => [GROUPED_EXPERT_KEYS, own].concat(),
            _ if self.vl_text => [own, VL_TEXT_KEYS].concat(),
            _ => own.to_vec(),
        }
    }

    /// Tensors read into the config rather than the weights: rope frequency factors, which
    /// llama.cpp's converter writes once for the whole model (`rope_freqs.weight`: Llama 3.1/3.2;
    /// LongRoPE's two sets: Phi-3.5, Phi-4-mini). Granite's converter is Llama's, and its
    /// graph applies the factors as Llama's does (`get_rope_factors`).
    fn rope_tensors(&self) -> &'static [&'static str] {
        match self.kind {
            Kind::Llama | Kind::Granite | Kind::GraniteMoe | Kind::GraniteSwa | Kind::Arcee | Kind::Exaone | Kind::Exaone4 | Kind::ExaoneMoe | Kind::Apertus => &[ROPE_FREQS],
            Kind::Phi3 | Kind::Phimoe | Kind::MiniCpm3 => &[ROPE_LONG, ROPE_SHORT],
            // MiniCPM: Llama 3's factors, or MiniCPM4's LongRoPE sets with `rope.scaling.type`.
            Kind::MiniCpm => &[ROPE_FREQS, ROPE_LONG, ROPE_SHORT],
            _ => &[],
        }
    }

    /// The per-layer names every layer has: Llama's, Phi-3's fused ones, or the family's own
    /// (StarCoder2's and Nemotron's biased attention and LayerNorms).
    fn base_names(&self) -> &'static [(&'static str, &'static str)] {
        match self.kind {
            Kind::Phi3 => PHI3_NAMES,
            // EXAONE 4's blocks are OLMo 2's (post-norms only), with per-head q/k norms.
            Kind::Olmo2 | Kind::Exaone4 => OLMO2_NAMES,
            Kind::Starcoder2 | Kind::Nemotron | Kind::StableLm | Kind::Phimoe | Kind::Jais2 => BIASED_ATTENTION_NAMES,
            Kind::Phi2 => PHI2_NAMES,
            Kind::GptNeox => GPTNEOX_NAMES,
            Kind::Gpt2 | Kind::StarCoder => GPT2_NAMES,
            Kind::Bert => BERT_NAMES,
            Kind::Falcon | Kind::Bloom => FALCON_NAMES,
            Kind::Mpt => MPT_NAMES,
            Kind::Dbrx => DBRX_NAMES,
            _ => LAYER_NAMES,
        }
    }

    /// The names outside the layers: Llama's, or with the LayerNorm biases (StarCoder2) and
    /// Phi's names (`model.final_layernorm`, the head's bias).
    fn global_names(&self) -> &'static [(&'static str, &'static str)] {
        match self.kind {
            Kind::Starcoder2 | Kind::Nemotron | Kind::StableLm | Kind::Jais2 => STARCODER2_GLOBAL_NAMES,
            Kind::Phi2 => PHI2_GLOBAL_NAMES,
            Kind::Phimoe => PHIMOE_GLOBAL_NAMES,
            Kind::GptNeox => GPTNEOX_GLOBAL_NAMES,
            Kind::Gpt2 | Kind::StarCoder => GPT2_GLOBAL_NAMES,
            Kind::Bert => BERT_GLOBAL_NAMES,
            Kind::Falcon => FALCON_GLOBAL_NAMES,
            Kind::Bloom => BLOOM_GLOBAL_NAMES,
            Kind::Mpt | Kind::Dbrx => MPT_GLOBAL_NAMES,
            _ => GLOBAL_NAMES,
        }
    }

    /// Per-layer tensor names beyond [`Arch::base_names`], looked up first (Gemma 2 and 3's four
    /// norms: llama.cpp's `ffn_norm` is the norm before the MLP; Qwen3's and Gemma 3's q/k norms;
    /// GLM-4's fused `ffn_up`, which renames Llama's).
    fn layer_names(&self) -> &'static [&'static [(&'static str, &'static str)]] {
        match self.kind {
            Kind::Phi3 | Kind::Phi2 | Kind::Gpt2 | Kind::StarCoder | Kind::Bert | Kind::GptNeox | Kind::Falcon | Kind::Mpt | Kind::Dbrx => &[],
            Kind::Bloom => &[BLOOM_PRE_MLP_NORM],
            Kind::ChatGlm => &[CHATGLM_MLP_NAMES],
            Kind::Starcoder2 => &[STARCODER2_MLP_NAMES],
            Kind::Nemotron | Kind::Jais2 => &[PLAIN_MLP_NAMES],
            Kind::Glm4 => &[GLM4_NAMES],
            Kind::Ernie4_5 => &[PRE_MLP_NORM, OUT_AND_MLP_BIASES],
            Kind::Olmo => &[],
            Kind::Llama => &[PRE_MLP_NORM, MIXTRAL_ROUTER],
            Kind::Qwen2 | Kind::Gemma | Kind::Smollm3 | Kind::Exaone => &[PRE_MLP_NORM],
            Kind::Granite | Kind::MiniCpm => &[PRE_MLP_NORM, OUT_AND_MLP_BIASES],
            Kind::GraniteMoe => &[PRE_MLP_NORM, OUT_AND_MLP_BIASES, GRANITE_ROUTER, GRANITE_SHARED_DOWN],
            Kind::Phimoe => &[MIXTRAL_ROUTER],
            Kind::MinimaxM2 => &[PRE_MLP_NORM, QK_NORMS, MIXTRAL_ROUTER, MINIMAX_M2_NAMES],
            Kind::Afmoe => &[AFMOE_NAMES, QK_NORMS, SHARED_EXPERTS],
            Kind::ExaoneMoe => &[PRE_MLP_NORM, QK_NORMS, QWEN_ROUTER, EXAONE_MOE_NAMES, SHARED_EXPERTS],
            Kind::Olmo2 | Kind::Exaone4 => &[QK_NORMS],
            // Cohere's one norm a layer is `attn_norm` (the base names); no norm before the MLP.
            // Command R+'s q/k norms are one `[heads, head_dim]` weight each, as Cohere's.
            Kind::CommandR => &[QK_NORMS],
            Kind::Cohere2 => &[],
            Kind::StableLm => &[GATED_MLP_NAMES, STABLELM_QK_NORMS],
            // Seed-OSS's norm before the MLP is llama.cpp's `post_attention_norm`.
            Kind::SeedOss => &[SEED_OSS_PRE_MLP_NORM],
            Kind::Arcee | Kind::Mistral3 => &[PRE_MLP_NORM],
            Kind::Apertus => &[APERTUS_NAMES, QK_NORMS],
            Kind::Qwen3 => &[PRE_MLP_NORM, QK_NORMS],
            Kind::Qwen2Moe => &[PRE_MLP_NORM, QWEN_ROUTER, QWEN2_SHARED_EXPERT],
            Kind::Qwen3Moe | Kind::Mellum => &[PRE_MLP_NORM, QK_NORMS, QWEN_ROUTER],
            Kind::MiniCpm3 => &[PRE_MLP_NORM, MINICPM3_NAMES],
            Kind::HyV3 => &[PRE_MLP_NORM, QK_NORMS, HY_V3_NAMES],
            Kind::GraniteSwa => &[PRE_MLP_NORM, OUT_AND_MLP_BIASES, GRANITE_SWA_NAMES],
            Kind::Gemma2 => &[GEMMA2_NAMES],
            Kind::Gemma3 => &[GEMMA2_NAMES, QK_NORMS],
            Kind::GptOss => &[GPT_OSS_NAMES],
            Kind::Deepseek2 | Kind::Mistral4 => &[PRE_MLP_NORM, QWEN_ROUTER, DEEPSEEK2_NAMES, SHARED_EXPERTS],
            // GLM-4.5's norm before the MLP is llama.cpp's `post_attention_norm`.
            Kind::Glm4Moe => &[SEED_OSS_PRE_MLP_NORM, QK_NORMS, QWEN_ROUTER, DEEPSEEK2_NAMES, SHARED_EXPERTS],
            Kind::Dots1 => &[PRE_MLP_NORM, QK_NORMS, QWEN_ROUTER, DEEPSEEK2_NAMES, SHARED_EXPERTS],
            Kind::Olmoe => &[PRE_MLP_NORM, QK_NORMS, QWEN_ROUTER],
            Kind::Ernie4_5Moe => &[PRE_MLP_NORM, OUT_AND_MLP_BIASES, QWEN_ROUTER, ERNIE_MOE_NAMES, SHARED_EXPERTS],
            Kind::HunyuanMoe => &[PRE_MLP_NORM, OUT_AND_MLP_BIASES, HUNYUAN_QK_NORMS, HUNYUAN_MOE_NAMES],
            Kind::HunyuanDense => &[PRE_MLP_NORM, OUT_AND_MLP_BIASES, HUNYUAN_QK_NORMS],
        }
    }
}

impl Arch {
    /// The experts' 3-D tensors (llama.cpp's suffix after `blk.N.`) and the family's per-expert
    /// name after `model.layers.N.` (`{e}`: the expert), for the architectures with experts.
    fn expert_names(&self) -> &'static [(&'static str, &'static str)] {
        match self.kind {
            Kind::Llama | Kind::Phimoe | Kind::MinimaxM2 => &[
                ("ffn_gate_exps.weight", "block_sparse_moe.experts.{e}.w1.weight"),
                ("ffn_up_exps.weight", "block_sparse_moe.experts.{e}.w3.weight"),
                ("ffn_down_exps.weight", "block_sparse_moe.experts.{e}.w2.weight"),
            ],
            Kind::Qwen2Moe | Kind::Qwen3Moe | Kind::Mellum | Kind::HyV3 | Kind::Deepseek2 | Kind::Glm4Moe | Kind::Dots1 | Kind::Olmoe | Kind::Ernie4_5Moe | Kind::HunyuanMoe | Kind::ExaoneMoe | Kind::Afmoe => &[
                ("ffn_gate_exps.weight", "mlp.experts.{e}.gate_proj.weight"),
                ("ffn_up_exps.weight", "mlp.experts.{e}.up_proj.weight"),
                ("ffn_down_exps.weight", "mlp.experts.{e}.down_proj.weight"),
            ],
            _ => &[],
        }
    }

    /// Where the family's layer `layer` lives: `model.layers.N`, GPT-2's `transformer.h.N`.
    fn layer_prefix(&self, layer: usize) -> String {
        match self.kind {
            Kind::Gpt2 | Kind::StarCoder | Kind::Falcon | Kind::Bloom => format!("transformer.h.{layer}"),
            Kind::Mpt | Kind::Dbrx => format!("transformer.blocks.{layer}"),
            Kind::GptNeox => format!("gpt_neox.layers.{layer}"),
            Kind::Bert => format!("encoder.layer.{layer}"),
            _ => format!("model.layers.{layer}"),
        }
    }

    /// Whether the family reads `name` in GPT-2's Conv1D layout (`[in, out]`), the transpose of
    /// the `[out, in]` rows llama.cpp's converter stores (it transposes `c_attn`, `c_proj` and
    /// `c_fc` on the way in).
    fn conv1d(&self, name: &str) -> bool {
        self.kind == Kind::Gpt2 && [".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"].iter().any(|s| name.ends_with(s))
    }

    fn qwen_moe(&self) -> bool {
        matches!(self.kind, Kind::Qwen2Moe | Kind::Qwen3Moe)
    }
}

/// The DeepSeek-style mixture's metadata (a dense lead, routed and shared experts, the gating,
/// the scale and renormalization, the groups), read by every family whose experts route so
/// (deepseek2, mistral4, glm4moe, dots1, exaone-moe, afmoe).
const GROUPED_EXPERT_KEYS: &[&str] = &[
    "leading_dense_block_count",
    "expert_count",
    "expert_used_count",
    "expert_feed_forward_length",
    "expert_shared_count",
    "expert_weights_scale",
    "expert_weights_norm",
    "expert_gating_func",
    "expert_group_count",
    "expert_group_used_count",
];

/// What a vision-language model's text file states of its vision side (llama.cpp's
/// `Qwen2VLModel` / `Qwen3VLTextModel`): the multimodal RoPE sections (`mrope_section`, padded to
/// four) and Qwen3-VL's deepstack count, both checked and otherwise unread for text.
const VL_TEXT_KEYS: &[&str] = &["rope.dimension_sections", "n_deepstack_layers"];

/// The architectures [`arch`] maps (`general.architecture`), for messages and `--help` (a
/// builder test checks that `tailor build --help` names each).
pub const ARCHITECTURES: &str = "llama (Mixtral's experts included), qwen2, qwen2moe, qwen3, qwen3moe, qwen2vl, qwen3vl and qwen3vlmoe (their text models), deepseek2 (DeepSeek-V2 and V3; Youtu-LLM without experts), glm4moe (GLM-4.5 to 4.7), dots1, olmoe, ernie4_5-moe, hunyuan-moe (Hunyuan-A13B), hunyuan-dense, granitemoe (GraniteMoeShared included), exaone-moe (K-EXAONE), minimax-m2 (MiniMax-M2), afmoe (Arcee Trinity), mistral4 (Mistral 4), phi3, phimoe (Phi-3.5-MoE), gemma, gemma2, gemma3, granite, olmo, olmo2 (OLMo 3 included), starcoder2, phi2, smollm3, glm4, ernie4_5, nemotron, seed_oss, arcee, exaone (EXAONE 3 / 3.5), exaone4, command-r, cohere2, stablelm, mistral3 (Ministral 3), apertus, gptneox (Pythia), gpt2, starcoder (StarCoder 1), falcon (Falcon-7B, Falcon2-11B), bloom (BLOOM, BLOOMZ), mpt (MPT-7B, MPT-30B), dbrx (DBRX), minicpm (MiniCPM-2B, MiniCPM4), jais2 (Jais 2), minicpm3 (MiniCPM3), mellum (Mellum2), hy_v3 (Hy3), granite_swa (GraniteSWA, GraniteMoeSWA), chatglm (GLM-4-9B-chat), gpt-oss and bert (an encoder)";

fn arch(name: &str) -> Option<Arch> {
    let (model_type, permuted_qk, kind) = match name {
        "llama" => ("llama", true, Kind::Llama),
        "qwen2" => ("qwen2", false, Kind::Qwen2),
        // llama.cpp's Qwen3Model is its Qwen2Model (no permutation) with q/k norms.
        "qwen3" => ("qwen3", false, Kind::Qwen3),
        // Qwen2-VL / Qwen2.5-VL and Qwen3-VL text files (Qwen2VLModel, Qwen3VLTextModel: the
        // dense text models' converters, nothing permuted): their text model ([`vl_text_config`]).
        "qwen2vl" => ("qwen2", false, Kind::Qwen2),
        "qwen3vl" => ("qwen3", false, Kind::Qwen3),
        // Qwen3VLMoeTextModel is a Qwen3MoeModel whose fused experts it writes as the usual
        // stacks: Qwen3-VL-MoE's text model is Qwen3-MoE's.
        "qwen3vlmoe" => ("qwen3_moe", false, Kind::Qwen3Moe),
        // Qwen2MoeModel / Qwen3MoeModel: their dense parents' tensors plus experts and router.
        "qwen2moe" => ("qwen2_moe", false, Kind::Qwen2Moe),
        "qwen3moe" => ("qwen3_moe", false, Kind::Qwen3Moe),
        // Phi3MiniModel: q/k not permuted (NeoX-style rope), the fused projections as stored.
        "phi3" => ("phi3", false, Kind::Phi3),
        "gemma" => ("gemma", false, Kind::Gemma),
        "gemma2" => ("gemma2", false, Kind::Gemma2),
        "gemma3" => ("gemma3_text", false, Kind::Gemma3),
        // GraniteModel and SmolLM3Model are LlamaModels: q/k permuted (llama.cpp's NORM rope).
        "granite" => ("granite", true, Kind::Granite),
        // MiniCPMModel is a TextModel that permutes q/k as LlamaModel does (llama.cpp's NORM
        // rope); llama.cpp runs the file with its granite graph, so it is read as `granite`.
        "minicpm" => ("granite", true, Kind::MiniCpm),
        // GraniteMoeModel is a GraniteModel (q/k permuted) whose `input_linear` experts it
        // splits into gate and up stacks ([`granite_experts`]).
        "granitemoe" => ("granitemoe", true, Kind::GraniteMoe),
        "smollm3" => ("smollm3", true, Kind::Smollm3),
        // Olmo2Model, StarCoder2Model and Phi2Model are plain TextModels: nothing permuted
        // (NEOX rope in `llama_model_rope_type`). `phi2` is Phi-1, 1.5 and 2: our `phi`.
        "olmo2" => ("olmo2", false, Kind::Olmo2),
        "starcoder2" => ("starcoder2", false, Kind::Starcoder2),
        "phi2" => ("phi", false, Kind::Phi2),
        // GptOssModel is a TextModel: nothing permuted; its experts are gathered by
        // `gpt_oss_experts`.
        "gpt-oss" => ("gpt_oss", false, Kind::GptOss),
        // Glm4Model, Ernie4_5Model and NemotronModel are TextModels: nothing permuted (GLM-4's
        // and ERNIE 4.5's rope turns adjacent pairs, llama.cpp's NORM rope on the file's order;
        // Nemotron's is NEOX). OlmoModel permutes q/k as LlamaModel does.
        "glm4" => ("glm4", false, Kind::Glm4),
        "ernie4_5" => ("ernie4_5", false, Kind::Ernie4_5),
        "olmo" => ("olmo", true, Kind::Olmo),
        "nemotron" => ("nemotron", false, Kind::Nemotron),
        // SeedOssModel is a TextModel (nothing permuted); ArceeModel a LlamaModel (q/k
        // permuted, llama.cpp's NORM rope).
        "seed_oss" => ("seed_oss", false, Kind::SeedOss),
        "arcee" => ("arcee", true, Kind::Arcee),
        // GPTNeoXModel is a TextModel (NEOX rope, nothing permuted) that restacks each
        // `query_key_value` from per-head `[q | k | v]` rows to q, k, v (`NeoxQkv` undoes it).
        "gptneox" => ("gpt_neox", false, Kind::GptNeox),
        // ApertusModel is a LlamaModel with `undo_permute = False`: nothing permuted.
        "apertus" => ("apertus", false, Kind::Apertus),
        // Mistral3Model's Ministral 3 half is a LlamaModel: q/k permuted.
        "mistral3" => ("ministral3", true, Kind::Mistral3),
        // Exaone4Model is a TextModel: nothing permuted.
        "exaone4" => ("exaone4", false, Kind::Exaone4),
        // ExaoneModel is a TextModel too: nothing permuted (llama.cpp's NEOX rope, the halves
        // transformers rotates). Transformers builds EXAONE 3 / 3.5 as Llama.
        "exaone" => ("llama", false, Kind::Exaone),
        // CommandR2Model and Cohere2Model are TextModels: nothing permuted (llama.cpp's NORM
        // rope turns adjacent pairs, Cohere's interleaved RoPE).
        "command-r" => ("cohere", false, Kind::CommandR),
        "cohere2" => ("cohere2", false, Kind::Cohere2),
        // StableLMModel is a TextModel: nothing permuted (NEOX rope).
        "stablelm" => ("stablelm", false, Kind::StableLm),
        // GPT2Model is a TextModel without rope: nothing permuted; its Conv1D weights were
        // transposed to `[out, in]` by the converter and are read back transposed.
        "gpt2" => ("gpt2", false, Kind::Gpt2),
        // StarCoderModel is a TextModel: its GPTBigCode weights are Linear (`[out, in]`), as
        // stored, so nothing is transposed (GPT-2's Conv1D transpose is Kind::Gpt2's alone).
        "starcoder" => ("gpt_bigcode", false, Kind::StarCoder),
        // FalconModel is a TextModel: nothing permuted (NEOX rope); its `query_key_value`
        // restacked from per-group to q, k, v rows ([`QkvGroups`] puts them back).
        "falcon" => ("falcon", false, Kind::Falcon),
        // MellumModel is a TextModel: nothing permuted (NEOX rope); its experts merged into
        // stacks as Qwen3MoeModel's.
        "mellum" => ("mellum", false, Kind::Mellum),
        // MiniCPM3Model writes its own keys and the tensors as they are (NEOX rope: rotate-half,
        // nothing permuted; `attn_kv_b` whole).
        "minicpm3" => ("minicpm3", false, Kind::MiniCpm3),
        // HYV3Model is a TextModel: nothing permuted (NEOX rope); its experts merged into stacks,
        // its prediction layers appended to the blocks.
        "hy_v3" => ("hy_v3", false, Kind::HyV3),
        // GraniteSWAModel and GraniteMoeSWAModel are GraniteModels (LlamaModels): q/k permuted;
        // `granitemoe_swa` when the file has experts (`granite_swa_config`).
        "granite_swa" => ("granite_swa", true, Kind::GraniteSwa),
        // ChatGLMModel is a TextModel: nothing permuted (llama.cpp's NORM rope turns adjacent
        // pairs, as GLM's interleaved rotary on the file's order). GLM-4-9B-chat and its `-hf`
        // port (ChatGLM2/3 files share the architecture; not shown by a test here).
        "chatglm" => ("glm", false, Kind::ChatGlm),
        // Jais2Model is a TextModel: nothing permuted (NEOX rope).
        "jais2" => ("jais2", false, Kind::Jais2),
        // BloomModel and MPTModel are TextModels without RoPE: nothing permuted. BLOOM's
        // per-head `query_key_value` restacked to q, k, v rows as GPT-NeoX's ([`QkvGroups`]);
        // MPT's `Wqkv` (q, k, v already) as stored.
        "bloom" => ("bloom", false, Kind::Bloom),
        "mpt" => ("mpt", false, Kind::Mpt),
        // DbrxModel is a TextModel: nothing permuted (NEOX rope), `Wqkv` as stored; its experts
        // reshaped into stacks, `w2` transposed per expert ([`stacked_experts`] undoes it).
        "dbrx" => ("dbrx", false, Kind::Dbrx),
        // BertModel (an encoder: `attention.causal` false): nothing permuted, no rope; the
        // vocabulary is WordPiece in llama.cpp's spelling (builder/src/gguf_tokenizer.rs).
        "bert" => ("bert", false, Kind::Bert),
        // DeepseekV2Model (DeepSeek-V2, V2-Lite, V3, R1, Kimi K2) is a TextModel: nothing
        // permuted (llama.cpp's NORM rope turns adjacent pairs, as DeepSeek's interleaved
        // RoPE). `deepseek_v3` until the routing says V2 (`deepseek2_config`).
        "deepseek2" => ("deepseek_v3", false, Kind::Deepseek2),
        // Glm4MoeModel is a TextModel: nothing permuted (GLM-4.5's rope is NEOX-ordered on the
        // first `rope.dimension_count` of each head). Its converter appends the multi-token
        // prediction layers (`nextn_predict_layers`) to the blocks: [`prediction_layer`].
        "glm4moe" => ("glm4_moe", false, Kind::Glm4Moe),
        // Dots1Model is a Qwen2MoeModel (nothing permuted, NEOX rope).
        "dots1" => ("dots1", false, Kind::Dots1),
        // OlmoeModel is a TextModel: nothing permuted (NEOX rope).
        "olmoe" => ("olmoe", false, Kind::Olmoe),
        // Ernie4_5MoeModel is the dense Ernie4_5Model's converter with experts: nothing permuted.
        "ernie4_5-moe" => ("ernie4_5_moe", false, Kind::Ernie4_5Moe),
        // HunYuanMoEModel is a TextModel: nothing permuted (NEOX rope).
        "hunyuan-moe" => ("hunyuan_v1_moe", false, Kind::HunyuanMoe),
        // HunYuanModel is a TextModel: nothing permuted (NEOX rope).
        "hunyuan-dense" => ("hunyuan_v1_dense", false, Kind::HunyuanDense),
        // PhiMoeModel is a Phi3MiniModel (nothing permuted, NEOX rope) with Mixtral's experts.
        "phimoe" => ("phimoe", false, Kind::Phimoe),
        // ExaoneMoEModel is an Exaone4Model (a TextModel: nothing permuted, NEOX rope) whose
        // converter appends the multi-token prediction layers: [`prediction_layer`].
        "exaone-moe" => ("exaone_moe", false, Kind::ExaoneMoe),
        // MiniMaxM2Model is a TextModel: nothing permuted (NEOX rope on the first
        // `rope.dimension_count` of each head).
        "minimax-m2" => ("minimax_m2", false, Kind::MinimaxM2),
        // AfmoeModel is a LlamaModel whose tensors go through ModelBase.modify_tensors: nothing
        // permuted (llama.cpp's NEOX rope for afmoe).
        "afmoe" => ("afmoe", false, Kind::Afmoe),
        // Mistral3Model's Mistral 4 half is a DeepseekV2Model (nothing permuted: llama.cpp's
        // NORM rope turns adjacent pairs, as Mistral 4's interleaved RoPE) that writes the
        // fused expert stacks as they are (`merge_expert` false).
        "mistral4" => ("mistral4", false, Kind::Mistral4),
        _ => return None,
    };
    Some(Arch { model_type, permuted_qk, kind, vl_text: matches!(name, "qwen2vl" | "qwen3vl" | "qwen3vlmoe") })
}

/// llama.cpp's rope frequency factors (`LlamaModel.generate_extra_tensors`): one f32 per
/// rotary pair, the divisor of that pair's inverse frequency.
const ROPE_FREQS: &str = "rope_freqs.weight";

/// LongRoPE's factor sets (`Phi3MiniModel.generate_extra_tensors`): one f32 per rotary pair
/// each, llama.cpp's `freq_factors` for a context longer than the original one, or not.
const ROPE_LONG: &str = "rope_factors_long.weight";
const ROPE_SHORT: &str = "rope_factors_short.weight";

/// Phi-3's layers (llama.cpp's `LLM_ARCH_PHI3` tensors): q, k and v fused in `attn_qkv`, gate
/// and up fused in `ffn_up` (gate first), stored as Phi-3's `qkv_proj` / `gate_up_proj` are.
const PHI3_NAMES: &[(&str, &str)] = &[
    ("attn_norm.weight", "input_layernorm.weight"),
    ("attn_qkv.weight", "self_attn.qkv_proj.weight"),
    ("attn_output.weight", "self_attn.o_proj.weight"),
    ("ffn_norm.weight", "post_attention_layernorm.weight"),
    ("ffn_up.weight", "mlp.gate_up_proj.weight"),
    ("ffn_down.weight", "mlp.down_proj.weight"),
];

const GEMMA2_NAMES: &[(&str, &str)] = &[
    ("post_attention_norm.weight", "post_attention_layernorm.weight"),
    ("ffn_norm.weight", "pre_feedforward_layernorm.weight"),
    ("post_ffw_norm.weight", "post_feedforward_layernorm.weight"),
];

/// llama.cpp's `ffn_norm`: the norm before the MLP, Llama's `post_attention_layernorm`.
const PRE_MLP_NORM: &[(&str, &str)] = &[("ffn_norm.weight", "post_attention_layernorm.weight")];
/// Seed-OSS's (llama.cpp's `LLM_ARCH_SEED_OSS` loads it as `attn_post_norm` and applies it
/// before the MLP, where transformers' `post_attention_layernorm` is).
const SEED_OSS_PRE_MLP_NORM: &[(&str, &str)] = &[("post_attention_norm.weight", "post_attention_layernorm.weight")];

/// The router of a MoE layer (llama.cpp's `ffn_gate_inp`, `[experts, hidden]`).
const MIXTRAL_ROUTER: &[(&str, &str)] = &[("ffn_gate_inp.weight", "block_sparse_moe.gate.weight")];
const QWEN_ROUTER: &[(&str, &str)] = &[("ffn_gate_inp.weight", "mlp.gate.weight")];

/// Qwen2-MoE's shared expert and its gate (`ffn_gate_inp_shexp`, a `[hidden]` vector in the
/// file, the family's `[1, hidden]` Linear weight).
const QWEN2_SHARED_EXPERT: &[(&str, &str)] = &[
    ("ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight"),
    ("ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"),
    ("ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"),
    ("ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"),
];
const SHARED_GATE: &str = "ffn_gate_inp_shexp.weight";

/// DeepSeek's latent attention and V3's routing bias (llama.cpp's `LLM_ARCH_DEEPSEEK2`; the
/// shared experts are [`SHARED_EXPERTS`]); `attn_q` (no query compression), `attn_output` and the leading
/// dense layers' MLP are Llama's names. `attn_kv_b` is what converters wrote before splitting it
/// into `attn_k_b` / `attn_v_b` ([`joined_kv_b`]).
const DEEPSEEK2_NAMES: &[(&str, &str)] = &[
    ("attn_q_a.weight", "self_attn.q_a_proj.weight"),
    ("attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"),
    ("attn_q_b.weight", "self_attn.q_b_proj.weight"),
    ("attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"),
    ("attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"),
    ("attn_kv_b.weight", "self_attn.kv_b_proj.weight"),
    ("exp_probs_b.bias", "mlp.gate.e_score_correction_bias"),
];

/// GraniteSWA's sinks and GraniteMoeSWA's mixture (llama.cpp's `LLM_ARCH_GRANITE_SWA`): the
/// router, the shared MLP's fused gate/up (`ffn_up_shexp`, kept as the converter wrote it) and
/// down, under transformers 5's names; the expert stacks are [`stacked_experts`]'.
const GRANITE_SWA_NAMES: &[(&str, &str)] = &[
    ("attn_sinks.weight", "self_attn.sinks"),
    ("ffn_gate_inp.weight", "block_sparse_moe.router.weight"),
    ("ffn_up_shexp.weight", "shared_mlp.input_linear.weight"),
    ("ffn_down_shexp.weight", "shared_mlp.output_linear.weight"),
];

/// Hy3's mixture (llama.cpp's `LLM_ARCH_HY_V3`): the router, its correction bias and the shared
/// MLP.
const HY_V3_NAMES: &[(&str, &str)] = &[
    ("ffn_gate_inp.weight", "mlp.router.gate.weight"),
    ("exp_probs_b.bias", "mlp.expert_bias"),
    ("ffn_gate_shexp.weight", "mlp.shared_mlp.gate_proj.weight"),
    ("ffn_up_shexp.weight", "mlp.shared_mlp.up_proj.weight"),
    ("ffn_down_shexp.weight", "mlp.shared_mlp.down_proj.weight"),
];

/// The shared experts as DeepSeek-style families name them (`mlp.shared_experts`: DeepSeek,
/// GLM-4.5, dots.llm1, K-EXAONE, ERNIE 4.5 MoE, AFMoE), llama.cpp's `ffn_*_shexp`.
const SHARED_EXPERTS: &[(&str, &str)] = &[
    ("ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight"),
    ("ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight"),
    ("ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight"),
];

/// MiniCPM3's latent attention (llama.cpp's `LLM_ARCH_MINICPM3`): DeepSeek-V2's names with
/// query compression and the whole `attn_kv_b`.
const MINICPM3_NAMES: &[(&str, &str)] = &[
    ("attn_q_a.weight", "self_attn.q_a_proj.weight"),
    ("attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"),
    ("attn_q_b.weight", "self_attn.q_b_proj.weight"),
    ("attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"),
    ("attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"),
    ("attn_kv_b.weight", "self_attn.kv_b_proj.weight"),
];

/// AFMoE's layers (llama.cpp's `LLM_ARCH_AFMOE`): four norms (`attn_norm` before attention,
/// `post_attention_norm` after it, `ffn_norm` before the MLP, `post_ffw_norm` after it), the
/// attention gate `attn_gate`, the router `ffn_gate_inp` (`mlp.router.gate`), the correction
/// bias `exp_probs_b.bias` (`mlp.expert_bias`); its shared experts are [`SHARED_EXPERTS`].
const AFMOE_NAMES: &[(&str, &str)] = &[
    ("post_attention_norm.weight", "post_attention_layernorm.weight"),
    ("ffn_norm.weight", "pre_mlp_layernorm.weight"),
    ("post_ffw_norm.weight", "post_mlp_layernorm.weight"),
    ("attn_gate.weight", "self_attn.gate_proj.weight"),
    ("ffn_gate_inp.weight", "mlp.router.gate.weight"),
    ("exp_probs_b.bias", "mlp.expert_bias"),
];

/// MiniMax-M2's correction bias (beside the router, as the published checkpoint names it).
const MINIMAX_M2_NAMES: &[(&str, &str)] = &[("exp_probs_b.bias", "block_sparse_moe.e_score_correction_bias")];

/// K-EXAONE's correction bias (stored beside the router, `mlp.e_score_correction_bias`); its
/// shared experts are [`SHARED_EXPERTS`].
const EXAONE_MOE_NAMES: &[(&str, &str)] = &[
    ("exp_probs_b.bias", "mlp.e_score_correction_bias"),
];

/// ERNIE 4.5 MoE's correction bias (`mlp.moe_statics.e_score_correction_bias`, `[1, experts]`);
/// its shared experts are [`SHARED_EXPERTS`].
const ERNIE_MOE_NAMES: &[(&str, &str)] = &[
    ("exp_probs_b.bias", "mlp.moe_statics.e_score_correction_bias"),
];

/// GraniteMoE's router.
const GRANITE_ROUTER: &[(&str, &str)] = &[("ffn_gate_inp.weight", "block_sparse_moe.router.layer.weight")];

/// Hunyuan's per-head q/k norms (`query_layernorm` / `key_layernorm`).
const HUNYUAN_QK_NORMS: &[(&str, &str)] = &[("attn_q_norm.weight", "self_attn.query_layernorm.weight"), ("attn_k_norm.weight", "self_attn.key_layernorm.weight")];

/// Hunyuan-A13B's router and shared MLP.
const HUNYUAN_MOE_NAMES: &[(&str, &str)] = &[
    ("ffn_gate_inp.weight", "mlp.gate.wg.weight"),
    ("ffn_gate_shexp.weight", "mlp.shared_mlp.gate_proj.weight"),
    ("ffn_up_shexp.weight", "mlp.shared_mlp.up_proj.weight"),
    ("ffn_down_shexp.weight", "mlp.shared_mlp.down_proj.weight"),
];

/// The halves current converters split DeepSeek's `kv_b_proj` into (`DeepseekV2Model`), in
/// the slots of [`joined_kv_b`].
const LATENT_HALVES: [&str; 2] = ["attn_k_b.weight", "attn_v_b.weight"];

/// GLM-4's layers beyond Llama's (llama.cpp's `LLM_ARCH_GLM4`): four norms
/// (`post_attention_norm` after attention, `ffn_norm` before the MLP, `post_ffw_norm` after it),
/// the MLP's gate and up fused in `ffn_up` (gate first, as transformers' `gate_up_proj`).
const GLM4_NAMES: &[(&str, &str)] = &[
    ("post_attention_norm.weight", "post_self_attn_layernorm.weight"),
    ("ffn_norm.weight", "post_attention_layernorm.weight"),
    ("ffn_up.weight", "mlp.gate_up_proj.weight"),
    ("post_ffw_norm.weight", "post_mlp_layernorm.weight"),
];

/// ChatGLM's MLP (llama.cpp's `LLM_ARCH_CHATGLM`): gate and up fused in `ffn_up` (gate first,
/// SwiGLU), `ffn_down`; its attention and norms are Llama's names with q/k/v biases (a fused
/// `attn_qkv`, as the THUDM checkpoints store it, read as its q, k and v rows).
const CHATGLM_MLP_NAMES: &[(&str, &str)] = &[("ffn_norm.weight", "post_attention_layernorm.weight"), ("ffn_up.weight", "mlp.gate_up_proj.weight")];

/// Nemotron's and Jais 2's MLP (llama.cpp's `LLM_ARCH_NEMOTRON`, `LLM_ARCH_JAIS2`): the plain
/// `ffn_up` / `ffn_down`, biases optional; their attention and LayerNorms are
/// [`BIASED_ATTENTION_NAMES`].
const PLAIN_MLP_NAMES: &[(&str, &str)] = &[
    ("ffn_up.weight", "mlp.up_proj.weight"),
    ("ffn_up.bias", "mlp.up_proj.bias"),
    ("ffn_down.weight", "mlp.down_proj.weight"),
    ("ffn_down.bias", "mlp.down_proj.bias"),
];

/// gpt-oss's layers beyond Llama's (llama.cpp's `LLM_ARCH_OPENAI_MOE` tensors): the output
/// projection's bias, one attention sink logit per head, the norm before the experts
/// (`post_attention_norm`, transformers' `post_attention_layernorm`) and the router with its bias.
const GPT_OSS_NAMES: &[(&str, &str)] = &[
    ("attn_output.bias", "self_attn.o_proj.bias"),
    ("attn_sinks.weight", "self_attn.sinks"),
    ("post_attention_norm.weight", "post_attention_layernorm.weight"),
    ("ffn_gate_inp.weight", "mlp.router.weight"),
    ("ffn_gate_inp.bias", "mlp.router.bias"),
];

/// gpt-oss's expert tensors of a layer (after `blk.N.`), in [`GptOssExperts`] order: the gate,
/// up and down stacks (ggml `[K, rows, experts]`) and their biases (`[rows, experts]`).
const GPT_OSS_EXPERTS: [&str; 6] = ["ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias"];

/// q/k RMSNorms: per head (Qwen3, Gemma 3) or over the whole projection (OLMo2), as the family reads them.
const QK_NORMS: &[(&str, &str)] = &[("attn_q_norm.weight", "self_attn.q_norm.weight"), ("attn_k_norm.weight", "self_attn.k_norm.weight")];

/// GraniteMoeShared's shared MLP down projection (its gate and up halves are joined by
/// [`joined_shared_mlp`]).
const GRANITE_SHARED_DOWN: &[(&str, &str)] = &[("ffn_down_shexp.weight", "shared_mlp.output_linear.weight")];

/// Granite's optional biases beyond q/k/v (llama.cpp's GRANITE loader: `attn_output.bias`
/// and the MLP's, transformers' `attention_bias` / `mlp_bias`).
const OUT_AND_MLP_BIASES: &[(&str, &str)] = &[
    ("attn_output.bias", "self_attn.o_proj.bias"),
    ("ffn_gate.bias", "mlp.gate_proj.bias"),
    ("ffn_up.bias", "mlp.up_proj.bias"),
    ("ffn_down.bias", "mlp.down_proj.bias"),
];

/// OLMo2's layers (llama.cpp's `LLM_ARCH_OLMO2`): no norm before attention or the MLP, one after
/// each (`post_attention_norm`, `post_ffw_norm`), no biases; q/k norms from [`QK_NORMS`].
const OLMO2_NAMES: &[(&str, &str)] = &[
    ("attn_q.weight", "self_attn.q_proj.weight"),
    ("attn_k.weight", "self_attn.k_proj.weight"),
    ("attn_v.weight", "self_attn.v_proj.weight"),
    ("attn_output.weight", "self_attn.o_proj.weight"),
    ("post_attention_norm.weight", "post_attention_layernorm.weight"),
    ("ffn_gate.weight", "mlp.gate_proj.weight"),
    ("ffn_up.weight", "mlp.up_proj.weight"),
    ("ffn_down.weight", "mlp.down_proj.weight"),
    ("post_ffw_norm.weight", "post_feedforward_layernorm.weight"),
];

/// Attention and LayerNorms with biases (llama.cpp's `LLM_ARCH_STARCODER2` and
/// `LLM_ARCH_NEMOTRON`), each architecture's MLP beside them.
const BIASED_ATTENTION_NAMES: &[(&str, &str)] = &[
    ("attn_norm.weight", "input_layernorm.weight"),
    ("attn_norm.bias", "input_layernorm.bias"),
    ("attn_q.weight", "self_attn.q_proj.weight"),
    ("attn_q.bias", "self_attn.q_proj.bias"),
    ("attn_k.weight", "self_attn.k_proj.weight"),
    ("attn_k.bias", "self_attn.k_proj.bias"),
    ("attn_v.weight", "self_attn.v_proj.weight"),
    ("attn_v.bias", "self_attn.v_proj.bias"),
    ("attn_output.weight", "self_attn.o_proj.weight"),
    ("attn_output.bias", "self_attn.o_proj.bias"),
    ("ffn_norm.weight", "post_attention_layernorm.weight"),
    ("ffn_norm.bias", "post_attention_layernorm.bias"),
];

/// StarCoder2's MLP (llama.cpp's `LLM_ARCH_STARCODER2`): the plain `ffn_up` / `ffn_down`
/// (`mlp.c_fc` / `mlp.c_proj`) with biases, beside [`BIASED_ATTENTION_NAMES`].
const STARCODER2_MLP_NAMES: &[(&str, &str)] = &[
    ("ffn_up.weight", "mlp.c_fc.weight"),
    ("ffn_up.bias", "mlp.c_fc.bias"),
    ("ffn_down.weight", "mlp.c_proj.weight"),
    ("ffn_down.bias", "mlp.c_proj.bias"),
];

/// The gated MLP's projections alone (StableLM's, beside [`BIASED_ATTENTION_NAMES`]).
const GATED_MLP_NAMES: &[(&str, &str)] = &[("ffn_gate.weight", "mlp.gate_proj.weight"), ("ffn_up.weight", "mlp.up_proj.weight"), ("ffn_down.weight", "mlp.down_proj.weight")];

/// Apertus's layers beyond Llama's attention (llama.cpp's `LLM_ARCH_APERTUS`): its norms'
/// names, the plain xIELU MLP (`ffn_up`, `ffn_down`; the activation's scalars are metadata,
/// [`xielu_views`]).
const APERTUS_NAMES: &[(&str, &str)] = &[
    ("attn_norm.weight", "attention_layernorm.weight"),
    ("ffn_norm.weight", "feedforward_layernorm.weight"),
    ("ffn_up.weight", "mlp.up_proj.weight"),
    ("ffn_down.weight", "mlp.down_proj.weight"),
];

/// GPT-NeoX's layers (llama.cpp's `LLM_ARCH_GPTNEOX`): LayerNorms with bias, the fused
/// `attn_qkv` (rows restacked by the converter, put back per head on import), biases everywhere,
/// the plain MLP.
const GPTNEOX_NAMES: &[(&str, &str)] = &[
    ("attn_norm.weight", "input_layernorm.weight"),
    ("attn_norm.bias", "input_layernorm.bias"),
    ("attn_qkv.weight", "attention.query_key_value.weight"),
    ("attn_qkv.bias", "attention.query_key_value.bias"),
    ("attn_output.weight", "attention.dense.weight"),
    ("attn_output.bias", "attention.dense.bias"),
    ("ffn_norm.weight", "post_attention_layernorm.weight"),
    ("ffn_norm.bias", "post_attention_layernorm.bias"),
    ("ffn_up.weight", "mlp.dense_h_to_4h.weight"),
    ("ffn_up.bias", "mlp.dense_h_to_4h.bias"),
    ("ffn_down.weight", "mlp.dense_4h_to_h.weight"),
    ("ffn_down.bias", "mlp.dense_4h_to_h.bias"),
];

const GPTNEOX_GLOBAL_NAMES: &[(&str, &str)] = &[
    ("token_embd.weight", "gpt_neox.embed_in.weight"),
    ("output_norm.weight", "gpt_neox.final_layer_norm.weight"),
    ("output_norm.bias", "gpt_neox.final_layer_norm.bias"),
    ("output.weight", "embed_out.weight"),
];

/// StableLM 2 12B's q/k norms: the converter stacks the per-head `norms.{h}` LayerNorms into one
/// `attn_q_norm` / `attn_k_norm` (`[head_dim, heads]`), which [`pieces`] splits back into one
/// `#h` piece per head.
const STABLELM_QK_NORMS: &[(&str, &str)] =
    &[("attn_q_norm.weight", "self_attn.q_layernorm.norms.{h}.weight"), ("attn_k_norm.weight", "self_attn.k_layernorm.norms.{h}.weight")];

const STARCODER2_GLOBAL_NAMES: &[(&str, &str)] = &[
    ("token_embd.weight", "model.embed_tokens.weight"),
    ("output_norm.weight", "model.norm.weight"),
    ("output_norm.bias", "model.norm.bias"),
    ("output.weight", "lm_head.weight"),
];

/// Falcon's layers (llama.cpp's `LLM_ARCH_FALCON`): one LayerNorm with bias, the restacked
/// `attn_qkv`, `attn_output`, the plain MLP; no projection biases in llama.cpp's loader (Falcon's
/// `bias` is false in the 7B and 11B checkpoints), read when a file has them. Falcon-40B's second
/// norm (`attn_norm_2`) is refused by [`falcon_config`].
const FALCON_NAMES: &[(&str, &str)] = &[
    ("attn_norm.weight", "input_layernorm.weight"),
    ("attn_norm.bias", "input_layernorm.bias"),
    ("attn_qkv.weight", "self_attention.query_key_value.weight"),
    ("attn_qkv.bias", "self_attention.query_key_value.bias"),
    ("attn_output.weight", "self_attention.dense.weight"),
    ("attn_output.bias", "self_attention.dense.bias"),
    ("ffn_up.weight", "mlp.dense_h_to_4h.weight"),
    ("ffn_up.bias", "mlp.dense_h_to_4h.bias"),
    ("ffn_down.weight", "mlp.dense_4h_to_h.weight"),
    ("ffn_down.bias", "mlp.dense_4h_to_h.bias"),
];

/// BLOOM's layers beyond Falcon's names (llama.cpp's `LLM_ARCH_BLOOM`: the same fused
/// `attn_qkv`, restacked, put back per head by [`QkvGroups`]): the biased LayerNorm before the
/// MLP.
const BLOOM_PRE_MLP_NORM: &[(&str, &str)] = &[("ffn_norm.weight", "post_attention_layernorm.weight"), ("ffn_norm.bias", "post_attention_layernorm.bias")];

/// BLOOM's names outside the layers: the embedding's LayerNorm (`token_embd_norm`).
const BLOOM_GLOBAL_NAMES: &[(&str, &str)] = &[
    ("token_embd.weight", "transformer.word_embeddings.weight"),
    ("token_embd_norm.weight", "transformer.word_embeddings_layernorm.weight"),
    ("token_embd_norm.bias", "transformer.word_embeddings_layernorm.bias"),
    ("output_norm.weight", "transformer.ln_f.weight"),
    ("output_norm.bias", "transformer.ln_f.bias"),
    ("output.weight", "lm_head.weight"),
];

/// MPT's layers (llama.cpp's `LLM_ARCH_MPT`) as transformers' MptModel has them: no biases
/// (llama.cpp's are optional; a file with them is refused by [`mpt_config`]), `Wqkv` as stored.
const MPT_NAMES: &[(&str, &str)] = &[
    ("attn_norm.weight", "norm_1.weight"),
    ("attn_qkv.weight", "attn.Wqkv.weight"),
    ("attn_output.weight", "attn.out_proj.weight"),
    ("ffn_norm.weight", "norm_2.weight"),
    ("ffn_up.weight", "ffn.up_proj.weight"),
    ("ffn_down.weight", "ffn.down_proj.weight"),
];

/// DBRX's layers (llama.cpp's `LLM_ARCH_DBRX`): the norm before the experts is
/// `attn_output_norm`, the router `ffn_gate_inp`; the expert stacks are read by
/// [`stacked_experts`].
const DBRX_NAMES: &[(&str, &str)] = &[
    ("attn_norm.weight", "norm_attn_norm.norm_1.weight"),
    ("attn_qkv.weight", "norm_attn_norm.attn.Wqkv.weight"),
    ("attn_output.weight", "norm_attn_norm.attn.out_proj.weight"),
    ("attn_output_norm.weight", "norm_attn_norm.norm_2.weight"),
    ("ffn_gate_inp.weight", "ffn.router.layer.weight"),
];

/// MPT's and DBRX's names outside the layers.
const MPT_GLOBAL_NAMES: &[(&str, &str)] = &[
    ("token_embd.weight", "transformer.wte.weight"),
    ("output_norm.weight", "transformer.norm_f.weight"),
    ("output.weight", "lm_head.weight"),
];

const FALCON_GLOBAL_NAMES: &[(&str, &str)] = &[
    ("token_embd.weight", "transformer.word_embeddings.weight"),
    ("output_norm.weight", "transformer.ln_f.weight"),
    ("output_norm.bias", "transformer.ln_f.bias"),
    ("output.weight", "lm_head.weight"),
];

/// GPT-2's layers (llama.cpp's `LLM_ARCH_GPT2`): LayerNorms with bias before attention and the
/// MLP, the fused `attn_qkv` (`c_attn`), biases everywhere; the weights are read transposed
/// ([`Arch::conv1d`]).
const GPT2_NAMES: &[(&str, &str)] = &[
    ("attn_norm.weight", "ln_1.weight"),
    ("attn_norm.bias", "ln_1.bias"),
    ("attn_qkv.weight", "attn.c_attn.weight"),
    ("attn_qkv.bias", "attn.c_attn.bias"),
    ("attn_output.weight", "attn.c_proj.weight"),
    ("attn_output.bias", "attn.c_proj.bias"),
    ("ffn_norm.weight", "ln_2.weight"),
    ("ffn_norm.bias", "ln_2.bias"),
    ("ffn_up.weight", "mlp.c_fc.weight"),
    ("ffn_up.bias", "mlp.c_fc.bias"),
    ("ffn_down.weight", "mlp.c_proj.weight"),
    ("ffn_down.bias", "mlp.c_proj.bias"),
];

/// GPT-2's learned positions (`position_embd`, which llama.cpp never quantizes) beside its
/// embedding, final LayerNorm and (untied) head.
const GPT2_GLOBAL_NAMES: &[(&str, &str)] = &[
    ("token_embd.weight", "transformer.wte.weight"),
    ("position_embd.weight", "transformer.wpe.weight"),
    ("output_norm.weight", "transformer.ln_f.weight"),
    ("output_norm.bias", "transformer.ln_f.bias"),
    ("output.weight", "lm_head.weight"),
];

/// BERT's layers (llama.cpp's `LLM_ARCH_BERT`, gguf-py's names for `BertModel`'s): q, k and v
/// with biases, post-LayerNorms after attention and after the MLP.
const BERT_NAMES: &[(&str, &str)] = &[
    ("attn_q.weight", "attention.self.query.weight"),
    ("attn_q.bias", "attention.self.query.bias"),
    ("attn_k.weight", "attention.self.key.weight"),
    ("attn_k.bias", "attention.self.key.bias"),
    ("attn_v.weight", "attention.self.value.weight"),
    ("attn_v.bias", "attention.self.value.bias"),
    ("attn_output.weight", "attention.output.dense.weight"),
    ("attn_output.bias", "attention.output.dense.bias"),
    ("attn_output_norm.weight", "attention.output.LayerNorm.weight"),
    ("attn_output_norm.bias", "attention.output.LayerNorm.bias"),
    ("ffn_up.weight", "intermediate.dense.weight"),
    ("ffn_up.bias", "intermediate.dense.bias"),
    ("ffn_down.weight", "output.dense.weight"),
    ("ffn_down.bias", "output.dense.bias"),
    ("layer_output_norm.weight", "output.LayerNorm.weight"),
    ("layer_output_norm.bias", "output.LayerNorm.bias"),
];

/// BERT's embeddings: tokens, learned positions, token types and their LayerNorm.
const BERT_GLOBAL_NAMES: &[(&str, &str)] = &[
    ("token_embd.weight", "embeddings.word_embeddings.weight"),
    ("position_embd.weight", "embeddings.position_embeddings.weight"),
    ("token_types.weight", "embeddings.token_type_embeddings.weight"),
    ("token_embd_norm.weight", "embeddings.LayerNorm.weight"),
    ("token_embd_norm.bias", "embeddings.LayerNorm.bias"),
];

/// Phi-1/2's layers (llama.cpp's `LLM_ARCH_PHI2`): one LayerNorm feeding attention and the MLP,
/// biases everywhere, `attn_output` is Phi's `dense`, the MLP `fc1` / `fc2`. A fused
/// `attn_qkv` (files converted from the original `mixer.Wqkv` checkpoints) is split into these
/// three by [`phi2_qkv_parts`].
const PHI2_NAMES: &[(&str, &str)] = &[
    ("attn_norm.weight", "input_layernorm.weight"),
    ("attn_norm.bias", "input_layernorm.bias"),
    ("attn_q.weight", "self_attn.q_proj.weight"),
    ("attn_q.bias", "self_attn.q_proj.bias"),
    ("attn_k.weight", "self_attn.k_proj.weight"),
    ("attn_k.bias", "self_attn.k_proj.bias"),
    ("attn_v.weight", "self_attn.v_proj.weight"),
    ("attn_v.bias", "self_attn.v_proj.bias"),
    ("attn_output.weight", "self_attn.dense.weight"),
    ("attn_output.bias", "self_attn.dense.bias"),
    ("ffn_up.weight", "mlp.fc1.weight"),
    ("ffn_up.bias", "mlp.fc1.bias"),
    ("ffn_down.weight", "mlp.fc2.weight"),
    ("ffn_down.bias", "mlp.fc2.bias"),
];

/// PhiMoE's outside the layers (llama.cpp's `LLM_ARCH_PHIMOE`): the final LayerNorm's bias and
/// the head's.
const PHIMOE_GLOBAL_NAMES: &[(&str, &str)] = &[
    ("token_embd.weight", "model.embed_tokens.weight"),
    ("output_norm.weight", "model.norm.weight"),
    ("output_norm.bias", "model.norm.bias"),
    ("output.weight", "lm_head.weight"),
    ("output.bias", "lm_head.bias"),
];

const PHI2_GLOBAL_NAMES: &[(&str, &str)] = &[
    ("token_embd.weight", "model.embed_tokens.weight"),
    ("output_norm.weight", "model.final_layernorm.weight"),
    ("output_norm.bias", "model.final_layernorm.bias"),
    ("output.weight", "lm_head.weight"),
    ("output.bias", "lm_head.bias"),
];

/// Metadata keys of the architecture that are read (after `<arch>.`); any other is refused.
const READ_KEYS: &[&str] = &[
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.layer_norm_rms_epsilon",
    "attention.key_length",
    "attention.value_length",
    "rope.freq_base",
    "rope.dimension_count",
    "rope.scaling.type",
    "vocab_size",
];

/// Per-layer tensor names: llama.cpp's suffix after `blk.N.`, the family's after its layer
/// prefix ([`Arch::layer_prefix`]: `model.layers.N.`, GPT-2's `transformer.h.N.`).
const LAYER_NAMES: &[(&str, &str)] = &[
    ("attn_norm.weight", "input_layernorm.weight"),
    ("attn_q.weight", "self_attn.q_proj.weight"),
    ("attn_q.bias", "self_attn.q_proj.bias"),
    ("attn_k.weight", "self_attn.k_proj.weight"),
    ("attn_k.bias", "self_attn.k_proj.bias"),
    ("attn_v.weight", "self_attn.v_proj.weight"),
    ("attn_v.bias", "self_attn.v_proj.bias"),
    ("attn_output.weight", "self_attn.o_proj.weight"),
    ("ffn_gate.weight", "mlp.gate_proj.weight"),
    ("ffn_up.weight", "mlp.up_proj.weight"),
    ("ffn_down.weight", "mlp.down_proj.weight"),
];

const GLOBAL_NAMES: &[(&str, &str)] = &[("token_embd.weight", "model.embed_tokens.weight"), ("output_norm.weight", "model.norm.weight"), ("output.weight", "lm_head.weight")];

/// The family name of a GGUF tensor name of architecture `a`; `NAME#h` is head `h`'s piece of a
/// per-head tensor ([`pieces`]), whose family name holds `{h}`.
fn family_name(name: &str, a: &Arch) -> Option<String> {
    if let Some((_, to)) = a.global_names().iter().find(|(from, _)| *from == name) {
        return Some(to.to_string());
    }
    let (name, head) = match name.split_once('#') {
        Some((name, head)) => (name, Some(head)),
        None => (name, None),
    };
    let rest = name.strip_prefix("blk.")?;
    let (layer, suffix) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    // An architecture's own names first: they may rename one of the base table's (GLM-4's fused `ffn_up`).
    let (_, to) = a.layer_names().iter().copied().flatten().chain(a.base_names()).find(|(from, _)| *from == suffix)?;
    match (head, to.contains("{h}")) {
        (None, false) => Some(format!("{}.{to}", a.layer_prefix(layer))),
        (Some(h), true) => Some(format!("{}.{}", a.layer_prefix(layer), to.replace("{h}", h))),
        _ => None,
    }
}

/// Reads `path` (a `.gguf` file) into what the checkpoint needs; see the module doc.
pub(crate) fn import(path: &Path) -> Result<Imported> {
    let file = GgufFile::open(path)?;
    let err = |reason: String| Error::Checkpoint { path: path.to_path_buf(), reason };
    let arch_name = file.get("general.architecture").and_then(Value::as_str).ok_or_else(|| err("has no `general.architecture` string".into()))?.to_string();
    let Some(a) = arch(&arch_name) else {
        return Err(err(format!("`general.architecture` is `{arch_name}`; GGUF files of architectures {ARCHITECTURES} are imported")));
    };
    let config = config_of(path, &file, &arch_name, &a)?;
    let int = |k: &str| config.get(k).and_then(Json::as_u64).map(|v| v as usize).unwrap_or(0);
    let (heads, kv_heads) = (int("num_attention_heads"), int("num_key_value_heads"));

    let mut tensors = BTreeMap::new();
    let mut views = BTreeMap::new();
    let mut packed = BTreeMap::new();
    let mut types: BTreeMap<String, usize> = BTreeMap::new();
    // The bits of each block-quantized file tensor (an expert stack counts once, not per expert).
    let mut file_bits: Vec<ir::quant::Bits> = Vec::new();
    let head_dim = int("head_dim");
    let moe = ExpertShape::of(&config);
    // gpt-oss's expert tensors by layer, woven into the family's stacks after the loop.
    let mut gpt_oss: BTreeMap<usize, [Option<&TensorInfo>; 6]> = BTreeMap::new();
    // DeepSeek's split `kv_b_proj` halves by layer, joined after the loop.
    let mut latent: BTreeMap<usize, [Option<&TensorInfo>; 2]> = BTreeMap::new();
    // GraniteMoE's and Mistral 4's expert stacks by layer, joined after the loop.
    let mut stacked: BTreeMap<usize, [Option<&TensorInfo>; 4]> = BTreeMap::new();
    // GraniteMoeShared's shared gate and up halves by layer, joined after the loop.
    let mut shared_halves: BTreeMap<usize, [Option<&TensorInfo>; 2]> = BTreeMap::new();
    for whole in &file.tensors {
        // Rope factors are part of the config (read by config_of), not weights.
        if a.rope_tensors().contains(&whole.name.as_str()) || prediction_layer(&whole.name, &a, int("num_hidden_layers")) {
            continue;
        }
        *types.entry(whole.ggml_type.name()).or_default() += 1;
        if let Some((layer, slot)) = gpt_oss_expert(&whole.name, &a) {
            gpt_oss.entry(layer).or_default()[slot] = Some(whole);
            continue;
        }
        if let Some((layer, slot)) = latent_half(&whole.name, &a) {
            latent.entry(layer).or_default()[slot] = Some(whole);
            continue;
        }
        if let Some((layer, slot)) = stacked_expert(&whole.name, &a) {
            stacked.entry(layer).or_default()[slot] = Some(whole);
            continue;
        }
        if let Some((layer, slot)) = shared_half(&whole.name, &a) {
            shared_halves.entry(layer).or_default()[slot] = Some(whole);
            continue;
        }
        if let Some((layer, templates)) = expert_stack(&whole.name, &a) {
            let Some(moe) = moe else {
                return Err(err(format!(
                    "holds the expert stack `{}`, but `{arch_name}.expert_count` is missing or 0: a file with experts says how many it routes over",
                    whole.name
                )));
            };
            let [k, rows, experts] = moe.dims(whole.name.ends_with("ffn_down_exps.weight"));
            if let Some(bits) = split_experts(path, &file, whole, layer, &templates, [k, rows * templates.len(), experts], &mut tensors, &mut packed)? {
                file_bits.push(bits);
            }
            continue;
        }
        // Each piece: the tensor itself, or (phi2's fused attn_qkv) its q, k and v rows; the
        // file tensor's bits count once.
        let mut whole_bits = None;
        for (mapped, t) in pieces(whole, &a, heads, kv_heads, head_dim).map_err(err)? {
            let t = &t;
            let Some(name) = family_name(&mapped, &a) else {
                if per_expert_tensor(&t.name) {
                    return Err(err(format!(
                        "holds `{}`, one expert's tensor as llama.cpp wrote Mixtral files before merging experts into `ffn_*_exps` stacks (2024); llama.cpp no longer loads that layout either: convert the checkpoint again with a current llama.cpp",
                        t.name
                    )));
                }
                if moe.is_none() && t.name.ends_with(".ffn_gate_inp.weight") {
                    return Err(err(format!("holds the router `{}`, but `{arch_name}.expert_count` is missing or 0: a file with experts says how many it routes over", t.name)));
                }
                return Err(err(format!("holds tensor `{}` ({}), which is not mapped for architecture {arch_name}", t.name, t.ggml_type)));
            };
            if tensors.contains_key(&name) || views.contains_key(&name) || packed.contains_key(&name) {
                return Err(err(format!("holds `{}` beside another tensor read as `{name}` (a fused and a separate projection?)", t.name)));
            }
            // ne[0] varies fastest: a GGUF [K, N] is the family's [N, K].
            let mut shape: Vec<usize> = t.dims.iter().rev().copied().collect();
            // Qwen2-MoE's shared-expert gate: a vector in the file, a one-row Linear weight here;
            // ERNIE 4.5 MoE's correction bias `[1, experts]` (the converter keeps its leading 1,
            // a file that dropped it is read the same).
            if (t.name.ends_with(SHARED_GATE) || (a.kind == Kind::Ernie4_5Moe && t.name.ends_with(".exp_probs_b.bias"))) && shape.len() == 1 {
                shape.insert(0, 1);
            }
            let permute_heads = match () {
                _ if !a.permuted_qk => None,
                _ if mapped.contains(".attn_q.") => Some(heads),
                _ if mapped.contains(".attn_k.") => Some(kv_heads),
                _ => None,
            };
            let rows = shape[0];
            if let Some(h) = permute_heads {
                if h == 0 || !rows.is_multiple_of(2 * h) {
                    return Err(err(format!("tensor `{}` has {rows} rows, not a multiple of 2 x {h} heads, so llama.cpp's q/k permutation cannot be undone", t.name)));
                }
            }
            // A restacked `attn_qkv` (weight and bias) back in the family's grouped rows:
            // GPT-NeoX's per head (groups of one query head), Falcon's per key/value group.
            let grouped_qkv = match a.kind {
                _ if !mapped.contains(".attn_qkv.") => None,
                Kind::GptNeox | Kind::Bloom => Some(QkvGroups { groups: heads, queries: 1 }),
                Kind::Falcon => Some(QkvGroups { groups: kv_heads, queries: heads.checked_div(kv_heads).unwrap_or(0) }),
                _ => None,
            };
            if let Some(g) = grouped_qkv {
                if g.groups == 0 || g.queries == 0 || g.groups * g.queries != heads || !rows.is_multiple_of(g.groups * (g.queries + 2)) {
                    return Err(err(format!("tensor `{}` has {rows} rows, not q, k and v of {heads} query heads in {kv_heads} key/value groups", t.name)));
                }
            }
            // llama.cpp stores Gemma's and Nemotron's norms as weight + 1; the family adds the 1
            // itself.
            if a.conv1d(&name) && shape.len() != 2 {
                return Err(err(format!("tensor `{}` is {}-D ({:?}); GPT-2's Conv1D weights are 2-D", t.name, shape.len(), t.dims)));
            }
            let shifted_norm = a.norm_plus_one() && t.name.ends_with("norm.weight");
            if shifted_norm && float_dtype(t.ggml_type).is_none() {
                return Err(err(format!("tensor `{}` is {}: a {} norm (stored as weight + 1) is read as a float tensor only", t.name, t.ggml_type, a.model_type)));
            }
            match float_dtype(t.ggml_type) {
                Some(dtype) => {
                    let st = source(&file, t, &name, dtype, shape.clone());
                    if a.conv1d(&name) {
                        views.insert(name, Recipe::source(st).transpose(vec![1, 0]));
                        continue;
                    }
                    if shifted_norm {
                        views.insert(name, Recipe::source(st).offset(-1.0));
                        continue;
                    }
                    match (permute_heads, grouped_qkv) {
                        (Some(h), _) => {
                            views.insert(name, unpermute_float(Recipe::source(st), &shape, h));
                        }
                        (None, Some(g)) => {
                            views.insert(name, g.float(Recipe::source(st), &shape).map_err(|e| err(format!("tensor `{}`: {e}", t.name)))?);
                        }
                        (None, None) => {
                            tensors.insert(name, st);
                        }
                    }
                }
                None => {
                    if ir::ggml::form(t.ggml_type).is_none() {
                        return Err(err(unimported_type(t)));
                    }
                    if shape.len() != 2 {
                        return Err(err(format!("tensor `{}` is a {}-D {} tensor; only 2-D weights are block-quantized", t.name, shape.len(), t.ggml_type)));
                    }
                    let order = permute_heads.map(|h| unpermuted_rows(rows, h)).or_else(|| grouped_qkv.map(|g| g.rows(rows)));
                    let st = source(&file, t, &t.name, DType::U8, vec![t.len]);
                    let w = PackedWeight::ggml(t.name.clone(), st, t.ggml_type, shape[0], shape[1], order)?;
                    whole_bits = Some(w.bits());
                    if a.conv1d(&name) {
                        // The rows stay visible under the transpose (and a slice of it): the
                        // integers are written as they are.
                        views.insert(name, Recipe::Packed(w).transpose(vec![1, 0]));
                        continue;
                    }
                    packed.insert(name, w);
                }
            }
        }
        file_bits.extend(whole_bits);
    }
    for (layer, parts) in gpt_oss {
        file_bits.extend(gpt_oss_experts(path, &file, layer, parts, moe, &mut views)?);
    }
    for (layer, parts) in stacked {
        file_bits.extend(stacked_experts(path, &file, &arch_name, a.kind, layer, parts, moe, &mut views)?);
    }
    for (layer, halves) in shared_halves {
        let width = int("shared_intermediate_size");
        let hidden = int("hidden_size");
        file_bits.extend(joined_shared_mlp(path, &file, layer, halves, [hidden, width], &mut views)?);
    }
    for (layer, halves) in latent {
        let name = format!("model.layers.{layer}.self_attn.kv_b_proj.weight");
        if views.contains_key(&name) || tensors.contains_key(&name) || packed.contains_key(&name) {
            return Err(err(format!("holds `blk.{layer}.attn_kv_b.weight` beside `blk.{layer}.attn_k_b.weight` / `attn_v_b.weight`: one form of the layer's key/value projection is read")));
        }
        let (recipe, bits) = joined_kv_b(path, &file, layer, halves, &config)?;
        file_bits.extend(bits);
        views.insert(name, recipe);
    }
    if a.kind == Kind::Apertus {
        xielu_views(path, &file, int("num_hidden_layers"), &mut views)?;
    }
    // The bits most quantized file tensors have (an expert stack is one tensor, not one per
    // expert, so a file's experts do not outvote its attention): 8 when there are as many
    // 8-bit ones as 4-bit ones.
    let fours = file_bits.iter().filter(|b| b.count() == 4).count();
    let main_bits = if fours * 2 > file_bits.len() { ir::quant::Bits::Int4 } else { ir::quant::Bits::Int8 };
    let mut file_name = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    if file.shards.len() > 1 {
        file_name.push_str(&format!(" and the {} other files of its split set", file.shards.len() - 1));
    }
    // The family's name of the token table, which a tied head reads.
    let embed_name = a.global_names().iter().find(|(from, _)| *from == "token_embd.weight").map_or("model.embed_tokens.weight", |(_, to)| to);
    // A file of float tensors only is a float checkpoint (`--quant` applies, no [quant] section
    // is needed).
    let source = (!file_bits.is_empty()).then(|| QuantSource {
        format: PackedFormat::Gguf,
        bits: main_bits,
        group_size: None,
        // Symmetric when no quantized tensor's type has a min (Q4_0, Q8_0, Q6_K, MXFP4, ...: no
        // zero points are written), as reports and `tailor inspect` say.
        symmetric: file.tensors.iter().filter_map(|t| ir::ggml::form(t.ggml_type)).all(|f| f.zeros == ir::ggml::Zeros::Mid),
        desc_act: false,
        lm_head: packed.contains_key("lm_head.weight") || (!file.tensors.iter().any(|t| t.name == "output.weight") && packed.contains_key(embed_name)),
        origin: file_name,
        types: types.into_iter().collect(),
        // Every quantized file tensor's width: those read through views (expert stacks, GPT-2's
        // transposed weights) count as the packed ones do.
        bit_widths: {
            let mut b = file_bits.clone();
            b.sort_by_key(|b| b.count());
            b.dedup();
            b
        },
    });
    Ok(Imported { config, tensors, views, packed, source, file })
}

/// The layer and the family's per-expert name (`{e}` for the expert) of a 3-D expert tensor.
/// The fused `ffn_gate_up_exps` stack (gate rows then up rows per expert, the concatenation
/// `ModelBase.modify_tensors` makes for `--fuse-gate-up-exps`) is the two stacks' templates
/// together. llama.cpp's converter writes it where the architecture lists `FFN_GATE_UP_EXP`
/// (Mistral 4 among the imported ones, read by [`stacked_experts`]; newer ones) and its
/// deepseek2 loader takes it (`create_tensor_gate_up_exps`); the import reads it for every family
/// with per-expert names, the same rows either way.
fn expert_stack(name: &str, a: &Arch) -> Option<(usize, Vec<&'static str>)> {
    let (layer, suffix) = name.strip_prefix("blk.")?.split_once('.')?;
    let layer = layer.parse().ok()?;
    let template = |s: &str| a.expert_names().iter().find(|(from, _)| *from == s).map(|(_, to)| *to);
    if suffix == "ffn_gate_up_exps.weight" {
        return Some((layer, vec![template("ffn_gate_exps.weight")?, template("ffn_up_exps.weight")?]));
    }
    Some((layer, vec![template(suffix)?]))
}

/// The layer and [`GPT_OSS_EXPERTS`] slot of a gpt-oss expert tensor.
fn gpt_oss_expert(name: &str, a: &Arch) -> Option<(usize, usize)> {
    if a.kind != Kind::GptOss {
        return None;
    }
    let (layer, suffix) = name.strip_prefix("blk.")?.split_once('.')?;
    Some((layer.parse().ok()?, GPT_OSS_EXPERTS.iter().position(|s| *s == suffix)?))
}

/// gpt-oss's experts of `layer` as the family reads them (transformers' `GptOssExperts`):
/// `gate_up_proj` `[E, hidden, 2 * inter]` with gate and up on even and odd columns (llama.cpp's
/// converter split them so, `[..., ::2]` and `[..., 1::2]`), `down_proj` `[E, inter, hidden]`
/// and their biases. Each stack is read whole (a block-quantized one as one packed layer of
/// `E * rows` rows, keeping its integers), and woven and transposed by recipes that move whole
/// rows only, which the family's transposes undo: the fused experts (QMoE) still see the
/// file's integers. Returns the bits of each block-quantized stack.
fn gpt_oss_experts(
    path: &Path,
    file: &GgufFile,
    layer: usize,
    parts: [Option<&TensorInfo>; 6],
    moe: Option<ExpertShape>,
    views: &mut BTreeMap<String, Recipe>,
) -> Result<Vec<ir::quant::Bits>> {
    let err = |reason: String| Error::Checkpoint { path: path.to_path_buf(), reason };
    let present = parts.iter().flatten().next().map_or(String::new(), |t| t.name.clone());
    let Some(moe) = moe else {
        return Err(err(format!("holds the expert tensor `{present}`, but `gpt-oss.expert_count` is missing or 0: a file with experts says how many it routes over")));
    };
    let get = |slot: usize| parts[slot].ok_or_else(|| err(format!("holds `{present}` but not `blk.{layer}.{}`: a gpt-oss layer has its gate, up and down experts and their biases", GPT_OSS_EXPERTS[slot])));
    let mut bits = Vec::new();
    let mut stack = |slot: usize, down: bool| -> Result<Recipe> { whole_stack(path, file, get(slot)?, moe.dims(down), &mut bits) };
    let (gate, up, down) = (stack(0, false)?, stack(1, false)?, stack(2, true)?);
    let bias = |slot: usize, rows: usize| -> Result<Recipe> {
        let t = get(slot)?;
        let Some(dtype) = float_dtype(t.ggml_type) else {
            return Err(err(format!("tensor `{}` is {}: expert biases are read as float tensors only", t.name, t.ggml_type)));
        };
        if t.dims != [rows, moe.experts] {
            return Err(err(format!("tensor `{}` has ggml dims {:?}, where the metadata says {:?}", t.name, t.dims, [rows, moe.experts])));
        }
        Ok(Recipe::source(source(file, t, &t.name, dtype, vec![moe.experts, rows])))
    };
    // Gate and up of one type interleave as they are; of two (a float and a quantized stack, or
    // two float types) both are read as f32 first.
    let weave = |a: Recipe, b: Recipe, what: &str| -> Result<Recipe> {
        let (a, b) = if a.dtype() == b.dtype() { (a, b) } else { (a.cast(DType::F32), b.cast(DType::F32)) };
        Recipe::interleave(vec![a, b], 1).map_err(|e| err(format!("layer {layer}: the gate and up {what} cannot be interleaved: {e}")))
    };
    let p = format!("model.layers.{layer}.mlp.experts");
    views.insert(format!("{p}.gate_up_proj"), weave(gate, up, "experts")?.transpose(vec![0, 2, 1]));
    views.insert(format!("{p}.gate_up_proj_bias"), weave(bias(3, moe.ff)?, bias(4, moe.ff)?, "biases")?);
    views.insert(format!("{p}.down_proj"), down.transpose(vec![0, 2, 1]));
    views.insert(format!("{p}.down_proj_bias"), bias(5, moe.hidden)?);
    Ok(bits)
}

/// The layer and [`LATENT_HALVES`] slot of a DeepSeek `attn_k_b` / `attn_v_b` tensor.
fn latent_half(name: &str, a: &Arch) -> Option<(usize, usize)> {
    if !a.latent() {
        return None;
    }
    let (layer, suffix) = name.strip_prefix("blk.")?.split_once('.')?;
    Some((layer.parse().ok()?, LATENT_HALVES.iter().position(|s| *s == suffix)?))
}

/// DeepSeek's `kv_b_proj` (`[heads x (nope + v), kv_lora_rank]`, each head's key rows then
/// its value rows) from the halves current converters write: `attn_k_b`, the key rows of each
/// head transposed (numpy `[heads, kv_lora_rank, nope]`), and `attn_v_b` (`[heads, v,
/// kv_lora_rank]`). A block-quantized `attn_k_b` runs its blocks along `nope`, not along the
/// projection's input, so no MatMulNBits holds it: the joined weight is the halves' exact float
/// dequantization (the build report says so: the graph reads it per head, as no MatMulNBits
/// does). Returns it and the bits of each quantized half.
fn joined_kv_b(path: &Path, file: &GgufFile, layer: usize, halves: [Option<&TensorInfo>; 2], config: &Map<String, Json>) -> Result<(Recipe, Vec<ir::quant::Bits>)> {
    let err = |reason: String| Error::Checkpoint { path: path.to_path_buf(), reason };
    let size = |k: &str| config.get(k).and_then(Json::as_u64).map_or(0, |v| v as usize);
    let (heads, rank, nope, v) = (size("num_attention_heads"), size("kv_lora_rank"), size("qk_nope_head_dim"), size("v_head_dim"));
    let present = halves.iter().flatten().next().map_or(String::new(), |t| t.name.clone());
    let mut bits = Vec::new();
    let mut half = |slot: usize, dims: [usize; 3]| -> Result<Recipe> {
        let t = halves[slot].ok_or_else(|| err(format!("holds `{present}` but not `blk.{layer}.{}`: the split key/value projection needs both halves", LATENT_HALVES[slot])))?;
        // ggml's dims run fastest first: numpy [a, b, c] is ggml [c, b, a].
        let ggml: Vec<usize> = dims.iter().rev().copied().collect();
        if t.dims != ggml {
            return Err(err(format!("tensor `{}` has ggml dims {:?}, where {heads} heads, `kv_lora_rank` {rank}, `qk_nope_head_dim` {nope} and `v_head_dim` {v} say {ggml:?}", t.name, t.dims)));
        }
        if let Some(dtype) = float_dtype(t.ggml_type) {
            return Ok(Recipe::source(source(file, t, &t.name, dtype, dims.to_vec())).cast(DType::F32));
        }
        if ir::ggml::form(t.ggml_type).is_none() {
            return Err(err(unimported_type(t)));
        }
        let w = PackedWeight::ggml(t.name.clone(), source(file, t, &t.name, DType::U8, vec![t.len]), t.ggml_type, dims[0] * dims[1], dims[2], None)?;
        bits.push(w.bits());
        Ok(Recipe::Packed(w).reshape(dims.to_vec()))
    };
    let k = half(0, [heads, rank, nope])?.transpose(vec![0, 2, 1]);
    let v_rows = half(1, [heads, v, rank])?;
    let joined = Recipe::concat(vec![k, v_rows], 1).map_err(|e| err(format!("layer {layer}: the key and value halves cannot be joined: {e}")))?;
    Ok((joined.reshape(vec![heads * (nope + v), rank]), bits))
}

/// An expert stack read whole as `[experts, rows, K]` (ggml dims `[K, rows, experts]`, checked
/// against the metadata's): a float source, or one packed layer of `experts x rows` rows whose
/// integers the family's row-keeping recipes (and QMoE) still see; its bits pushed to `bits`.
fn whole_stack(path: &Path, file: &GgufFile, t: &TensorInfo, expected: [usize; 3], bits: &mut Vec<ir::quant::Bits>) -> Result<Recipe> {
    let err = |reason: String| Error::Checkpoint { path: path.to_path_buf(), reason };
    if t.dims != expected {
        return Err(err(format!("tensor `{}` has ggml dims {:?}, where the metadata (expert count, embedding and expert feed-forward lengths) says {expected:?}", t.name, t.dims)));
    }
    let [k, rows, experts] = expected;
    if let Some(dtype) = float_dtype(t.ggml_type) {
        return Ok(Recipe::source(source(file, t, &t.name, dtype, vec![experts, rows, k])));
    }
    if ir::ggml::form(t.ggml_type).is_none() {
        return Err(err(unimported_type(t)));
    }
    let w = PackedWeight::ggml(t.name.clone(), source(file, t, &t.name, DType::U8, vec![t.len]), t.ggml_type, experts * rows, k, None)?;
    bits.push(w.bits());
    Ok(Recipe::Packed(w).reshape(vec![experts, rows, k]))
}

/// The expert stacks of the families that read them stacked ([`stacked_experts`]), by slot.
const STACK_SLOTS: [&str; 4] = ["ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_gate_up_exps.weight", "ffn_down_exps.weight"];

/// The layer and [`STACK_SLOTS`] slot of an expert stack of granitemoe, granite_swa or mistral4
/// (the fused gate/up stack for mistral4 and granite_swa only: llama.cpp's granitemoe loader
/// takes the two halves alone).
fn stacked_expert(name: &str, a: &Arch) -> Option<(usize, usize)> {
    if !matches!(a.kind, Kind::GraniteMoe | Kind::Mistral4 | Kind::GraniteSwa | Kind::Dbrx) {
        return None;
    }
    let (layer, suffix) = name.strip_prefix("blk.")?.split_once('.')?;
    let slot = STACK_SLOTS.iter().position(|s| *s == suffix)?;
    (slot != 2 || matches!(a.kind, Kind::Mistral4 | Kind::GraniteSwa)).then_some((layer.parse().ok()?, slot))
}

/// The experts of `layer` as the families reading them stacked do, gate rows then up rows in one
/// `[E, 2 x inter, hidden]` stack and down `[E, hidden, inter]`: GraniteMoE's
/// `block_sparse_moe.input_linear` / `output_linear` (transformers' JetMoE-style names; llama.cpp's
/// converter split `input_linear` into `ffn_gate_exps` and `ffn_up_exps`) and Mistral 4's
/// `mlp.experts.gate_up_proj` / `down_proj` (its converter writes the fused `ffn_gate_up_exps`
/// as transformers stores it; llama.cpp's loader also takes the two halves). Split halves are
/// read whole and concatenated back along the rows (whole rows: quantized experts keep their
/// integers into QMoE). Returns the bits of each block-quantized stack.
#[allow(clippy::too_many_arguments)]
fn stacked_experts(path: &Path, file: &GgufFile, arch: &str, kind: Kind, layer: usize, parts: [Option<&TensorInfo>; 4], moe: Option<ExpertShape>, views: &mut BTreeMap<String, Recipe>) -> Result<Vec<ir::quant::Bits>> {
    let err = |reason: String| Error::Checkpoint { path: path.to_path_buf(), reason };
    let present = parts.iter().flatten().next().map_or(String::new(), |t| t.name.clone());
    let Some(moe) = moe else {
        return Err(err(format!("holds the expert stack `{present}`, but `{arch}.expert_count` is missing or 0: a file with experts says how many it routes over")));
    };
    let get = |slot: usize| {
        parts[slot].ok_or_else(|| {
            // Mistral 4's converter writes the fused gate/up stack: name that one.
            let missing = if slot < 2 && kind == Kind::Mistral4 && parts[0].is_none() && parts[1].is_none() { STACK_SLOTS[2] } else { STACK_SLOTS[slot] };
            err(format!("holds `{present}` but not `blk.{layer}.{missing}`: a {arch} layer has its gate, up and down expert stacks"))
        })
    };
    let mut bits = Vec::new();
    let gate_up = match (parts[0], parts[1], parts[2]) {
        (None, None, Some(fused)) => {
            let [k, rows, experts] = moe.dims(false);
            whole_stack(path, file, fused, [k, 2 * rows, experts], &mut bits)?
        }
        (_, _, None) => {
            let gate = whole_stack(path, file, get(0)?, moe.dims(false), &mut bits)?;
            let up = whole_stack(path, file, get(1)?, moe.dims(false), &mut bits)?;
            let (gate, up) = if gate.dtype() == up.dtype() { (gate, up) } else { (gate.cast(DType::F32), up.cast(DType::F32)) };
            Recipe::concat(vec![gate, up], 1).map_err(|e| err(format!("layer {layer}: the gate and up experts cannot be joined: {e}")))?
        }
        _ => return Err(err(format!("holds `blk.{layer}.ffn_gate_up_exps.weight` beside `ffn_gate_exps` / `ffn_up_exps`: one form of the layer's gate and up experts is read"))),
    };
    let down = whole_stack(path, file, get(3)?, moe.dims(true), &mut bits)?;
    if kind == Kind::Dbrx {
        // DBRX's `[E * inter, hidden]` rows: gate (`w1`) and up (`v1`) `[out, in]` per expert,
        // down (`w2`) `[in, out]` per expert, which DbrxModel transposed to `[out, in]`: read
        // as the transpose of the file's rows, which the family's own transpose undoes.
        let (e, inter, hidden) = (moe.experts, moe.ff, moe.hidden);
        let rows = |r: Recipe| r.reshape(vec![e * inter, hidden]);
        let (gate, up) = (gate_up.clone().slice(1, 0, inter), gate_up.slice(1, inter, 2 * inter));
        let p = format!("transformer.blocks.{layer}.ffn.experts.mlp");
        views.insert(format!("{p}.w1"), rows(gate));
        views.insert(format!("{p}.v1"), rows(up));
        views.insert(format!("{p}.w2"), rows(down.transpose(vec![0, 2, 1])));
        return Ok(bits);
    }
    let (fused, down_name) = match kind {
        Kind::GraniteMoe => (format!("model.layers.{layer}.block_sparse_moe.input_linear.weight"), format!("model.layers.{layer}.block_sparse_moe.output_linear.weight")),
        Kind::GraniteSwa => (format!("model.layers.{layer}.block_sparse_moe.experts.gate_up_proj"), format!("model.layers.{layer}.block_sparse_moe.experts.down_proj")),
        _ => (format!("model.layers.{layer}.mlp.experts.gate_up_proj"), format!("model.layers.{layer}.mlp.experts.down_proj")),
    };
    views.insert(fused, gate_up);
    views.insert(down_name, down);
    Ok(bits)
}

/// GraniteMoeShared's shared gate and up halves (`ffn_gate_shexp`, `ffn_up_shexp`: slot 0, 1),
/// which the converter split from `shared_mlp.input_linear`.
fn shared_half(name: &str, a: &Arch) -> Option<(usize, usize)> {
    if a.kind != Kind::GraniteMoe {
        return None;
    }
    let (layer, suffix) = name.strip_prefix("blk.")?.split_once('.')?;
    let slot = ["ffn_gate_shexp.weight", "ffn_up_shexp.weight"].iter().position(|s| *s == suffix)?;
    Some((layer.parse().ok()?, slot))
}

/// GraniteMoeShared's `shared_mlp.input_linear` of `layer` (gate rows, then up rows) joined from
/// the file's halves of ggml dims `[hidden, width]` each (`expected`, from the metadata): float
/// halves as source tensors, quantized ones as their packed rows (the family's split of the
/// joined weight gives each half back, integers kept). Returns the halves' bits.
fn joined_shared_mlp(path: &Path, file: &GgufFile, layer: usize, halves: [Option<&TensorInfo>; 2], expected: [usize; 2], views: &mut BTreeMap<String, Recipe>) -> Result<Vec<ir::quant::Bits>> {
    let err = |reason: String| Error::Checkpoint { path: path.to_path_buf(), reason };
    let [k, rows] = expected;
    let mut bits = Vec::new();
    let mut half = |slot: usize| -> Result<Recipe> {
        let names = ["ffn_gate_shexp", "ffn_up_shexp"];
        let t = halves[slot].ok_or_else(|| err(format!("holds `blk.{layer}.{}.weight` but not `blk.{layer}.{}.weight`: GraniteMoeShared's shared MLP has both halves", names[1 - slot], names[slot])))?;
        if t.dims != expected {
            return Err(err(format!("tensor `{}` has ggml dims {:?}, where the metadata (embedding length, `expert_shared_feed_forward_length`) says {expected:?}", t.name, t.dims)));
        }
        if let Some(dtype) = float_dtype(t.ggml_type) {
            return Ok(Recipe::source(source(file, t, &t.name, dtype, vec![rows, k])));
        }
        if ir::ggml::form(t.ggml_type).is_none() {
            return Err(err(unimported_type(t)));
        }
        let w = PackedWeight::ggml(t.name.clone(), source(file, t, &t.name, DType::U8, vec![t.len]), t.ggml_type, rows, k, None)?;
        bits.push(w.bits());
        Ok(Recipe::Packed(w))
    };
    let (gate, up) = (half(0)?, half(1)?);
    let (gate, up) = if gate.dtype() == up.dtype() { (gate, up) } else { (gate.cast(DType::F32), up.cast(DType::F32)) };
    let joined = Recipe::concat(vec![gate, up], 0).map_err(|e| err(format!("layer {layer}: the shared gate and up cannot be joined: {e}")))?;
    views.insert(format!("model.layers.{layer}.shared_mlp.input_linear.weight"), joined);
    Ok(bits)
}

/// Why tensor `t`'s ggml type is refused, with the types that are imported.
fn unimported_type(t: &TensorInfo) -> String {
    format!(
        "tensor `{}` is {}, a ggml type with no exact MatMulNBits form here (imported: {} and float tensors)",
        t.name,
        t.ggml_type,
        ir::ggml::DECODED.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
    )
}

/// The sizes a file's expert stacks must have, from the config the metadata gave.
#[derive(Clone, Copy)]
struct ExpertShape {
    experts: usize,
    hidden: usize,
    /// One expert's intermediate size (Mixtral's `intermediate_size`, Qwen-MoE's `moe_intermediate_size`).
    ff: usize,
}

impl ExpertShape {
    /// `None` for a file without experts.
    fn of(config: &Map<String, Json>) -> Option<ExpertShape> {
        let int = |k: &str| config.get(k).and_then(Json::as_u64).map(|v| v as usize);
        let experts = int("num_local_experts").or_else(|| int("num_experts")).or_else(|| int("n_routed_experts")).or_else(|| int("moe_num_experts")).filter(|&e| e > 0)?;
        let ff = int("moe_intermediate_size").or_else(|| int("intermediate_size"))?;
        Some(ExpertShape { experts, hidden: int("hidden_size")?, ff })
    }

    /// The ggml dims `[K, rows, experts]` of a gate or up stack, or of the down stack.
    fn dims(self, down: bool) -> [usize; 3] {
        if down {
            [self.ff, self.hidden, self.experts]
        } else {
            [self.hidden, self.ff, self.experts]
        }
    }
}

/// Whether `name` is one expert's tensor as llama.cpp wrote Mixtral files before it stacked
/// experts (`blk.N.ffn_gate.E.weight`).
fn per_expert_tensor(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("blk.").and_then(|r| r.split_once('.')).map(|(_, r)| r) else { return false };
    ["ffn_gate.", "ffn_up.", "ffn_down."].iter().any(|p| rest.strip_prefix(p).and_then(|e| e.strip_suffix(".weight")).is_some_and(|e| e.parse::<usize>().is_ok()))
}

/// Each expert of the 3-D tensor `t` (ggml `[K, rows, experts]`: the experts are contiguous
/// slabs of whole rows) as its own `[rows, K]` tensor named after `template`: a float slab as
/// a source tensor, a block-quantized one as its own [`PackedWeight`] keeping its integers.
/// `expected`: the dims the config says (llama.cpp refuses a file whose stack differs).
/// Returns the bits of a block-quantized stack.
#[allow(clippy::too_many_arguments)]
fn split_experts(
    path: &Path,
    file: &GgufFile,
    t: &TensorInfo,
    layer: usize,
    templates: &[&str],
    expected: [usize; 3],
    tensors: &mut BTreeMap<String, SourceTensor>,
    packed: &mut BTreeMap<String, Arc<PackedWeight>>,
) -> Result<Option<ir::quant::Bits>> {
    let err = |reason: String| Error::Checkpoint { path: path.to_path_buf(), reason };
    let &[k, rows, experts] = &t.dims[..] else {
        return Err(err(format!("tensor `{}` is {:?}; expert stacks are 3-D ggml tensors [K, rows, experts]", t.name, t.dims)));
    };
    if [k, rows, experts] != expected {
        return Err(err(format!(
            "tensor `{}` has ggml dims {:?}, where the metadata (expert count, embedding and expert feed-forward lengths) says {expected:?}",
            t.name, t.dims
        )));
    }
    let n = templates.len().max(1);
    if experts == 0 || !t.len.is_multiple_of(experts * n) || !rows.is_multiple_of(n) {
        return Err(err(format!("tensor `{}` ({} bytes) does not split into {experts} experts of {n} equal part(s)", t.name, t.len)));
    }
    if float_dtype(t.ggml_type).is_none() && ir::ggml::form(t.ggml_type).is_none() {
        return Err(err(unimported_type(t)));
    }
    // Each expert's slab of rows, cut into the templates' parts (a fused gate/up slab: its
    // gate rows, then its up rows); whole rows, so a quantized part keeps its integers.
    let (slab, rows) = (t.len / experts / n, rows / n);
    let mut bits = None;
    for e in 0..experts {
        for (i, template) in templates.iter().enumerate() {
            let name = format!("model.layers.{layer}.{}", template.replace("{e}", &e.to_string()));
            if tensors.contains_key(&name) || packed.contains_key(&name) {
                return Err(err(format!("holds `{}` beside another stack read as `{name}` (a fused gate/up stack and a separate one?)", t.name)));
            }
            let offset = t.offset + (e * n + i) * slab;
            let part = |label: &str, dtype: DType, shape: Vec<usize>| SourceTensor { name: label.to_string(), file: Arc::clone(file.file_of(t)), dtype, shape, offset, len: slab };
            match float_dtype(t.ggml_type) {
                Some(dtype) => {
                    tensors.insert(name.clone(), part(&name, dtype, vec![rows, k]));
                }
                None => {
                    let label = if n == 1 { format!("{} (expert {e})", t.name) } else { format!("{} (expert {e}, part {i})", t.name) };
                    let w = PackedWeight::ggml(label.clone(), part(&label, DType::U8, vec![slab]), t.ggml_type, rows, k, None)?;
                    bits = Some(w.bits());
                    packed.insert(name, w);
                }
            }
        }
    }
    Ok(bits)
}

/// The pieces file tensor `t` is read as, each with the llama.cpp name it maps by: `t` itself,
/// or for an `attn_qkv` (weight or bias) of a family that reads q, k and v apart (phi2's
/// original `mixer.Wqkv` files; any architecture converted with llama.cpp's `--fuse-qkv`, whose
/// loaders take the fused form through `create_tensor_qkv`) its q, k and v row ranges (q: the
/// query heads, k and v: the key/value heads, in that order, as llama.cpp's graphs view them),
/// named `attn_q` / `attn_k` / `attn_v` (so a llama file's permuted q/k rows are put back as
/// the separate ones are). Rows are contiguous in every ggml type (a row is whole blocks), so
/// each range is a byte range of the file: quantized pieces keep their integers.
fn pieces(t: &TensorInfo, a: &Arch, heads: usize, kv_heads: usize, head_dim: usize) -> std::result::Result<Vec<(String, TensorInfo)>, String> {
    let per_head = a.kind == Kind::StableLm && t.name.starts_with("blk.") && (t.name.ends_with(".attn_q_norm.weight") || t.name.ends_with(".attn_k_norm.weight"));
    if per_head {
        // `[head_dim, heads]` (ggml order): head h's values are the h-th run of head_dim.
        let count = if t.name.ends_with(".attn_q_norm.weight") { heads } else { kv_heads };
        if t.dims != [head_dim, count] || count == 0 || !t.len.is_multiple_of(count) {
            return Err(format!("tensor `{}` has shape {:?}; StableLM's per-head q/k norms of {count} heads of {head_dim} are [{head_dim}, {count}]", t.name, t.dims));
        }
        let bytes = t.len / count;
        return Ok((0..count)
            .map(|h| {
                let piece = TensorInfo {
                    name: format!("{} (head {h})", t.name),
                    dims: vec![head_dim],
                    ggml_type: t.ggml_type,
                    offset: t.offset + h * bytes,
                    len: bytes,
                    shard: t.shard,
                };
                (format!("{}#{h}", t.name), piece)
            })
            .collect());
    }
    // Not for latent attention (its `attn_q` is `q_lora_rank`-free queries of another size;
    // llama.cpp has no fused form there).
    let fused = t.name.starts_with("blk.") && (t.name.ends_with(".attn_qkv.weight") || t.name.ends_with(".attn_qkv.bias")) && !a.latent() && family_name(&t.name, a).is_none() && family_name(&t.name.replacen(".attn_qkv.", ".attn_q.", 1), a).is_some();
    if !fused {
        return Ok(vec![(t.name.clone(), t.clone())]);
    }
    let (q, kv) = (heads * head_dim, kv_heads * head_dim);
    let n = t.dims.last().copied().unwrap_or(0);
    if t.dims.len() > 2 || n != q + 2 * kv || n == 0 || !t.len.is_multiple_of(n) {
        return Err(format!(
            "tensor `{}` has shape {:?} ({} bytes); a fused q/k/v of {heads} query and {kv_heads} key/value heads of {head_dim} has {} rows",
            t.name,
            t.dims,
            t.len,
            q + 2 * kv
        ));
    }
    let row_bytes = t.len / n;
    let part = |which: &str, start: usize, rows: usize| {
        let mut dims = t.dims.clone();
        *dims.last_mut().expect("checked non-empty") = rows;
        let piece = TensorInfo {
            name: format!("{} (rows {start}..{} of {which})", t.name, start + rows),
            dims,
            ggml_type: t.ggml_type,
            offset: t.offset + start * row_bytes,
            len: rows * row_bytes,
            shard: t.shard,
        };
        (t.name.replacen(".attn_qkv.", &format!(".attn_{which}."), 1), piece)
    };
    Ok(vec![part("q", 0, q), part("k", q, kv), part("v", q + kv, kv)])
}

fn float_dtype(t: GgmlType) -> Option<DType> {
    match t {
        GgmlType::F32 => Some(DType::F32),
        GgmlType::F16 => Some(DType::F16),
        GgmlType::BF16 => Some(DType::BF16),
        _ => None,
    }
}

fn source(file: &GgufFile, t: &TensorInfo, name: &str, dtype: DType, shape: Vec<usize>) -> SourceTensor {
    SourceTensor { name: name.to_string(), file: Arc::clone(file.file_of(t)), dtype, shape, offset: t.offset, len: t.len }
}

/// The file row of each family row of a permuted q/k weight of `rows` rows and `heads` heads:
/// family row `h*hd + s*(hd/2) + j` is file row `h*hd + 2j + s`.
pub(crate) fn unpermuted_rows(rows: usize, heads: usize) -> Arc<[u32]> {
    let hd = rows / heads;
    let half = hd / 2;
    (0..rows)
        .map(|r| {
            let (h, i) = (r / hd, r % hd);
            let (s, j) = (i / half, i % half);
            (h * hd + 2 * j + s) as u32
        })
        .collect()
}

/// How a checkpoint groups the rows of its fused q/k/v: `groups` times (`queries` query heads,
/// then one key head, then one value head). llama.cpp's converters restack such a tensor as all
/// query heads, then all key heads, then all value heads: GPT-NeoX's per-head `query_key_value`
/// (a group per head, one query each) and Falcon's per key/value group (the `jploski` layout).
#[derive(Clone, Copy, Debug)]
struct QkvGroups {
    groups: usize,
    queries: usize,
}

impl QkvGroups {
    /// The file row of each family row of a restacked `attn_qkv` of `rows` rows (head size `d`):
    /// family row `g*(queries+2)*d + j*d + i` is, for `j < queries`, query head
    /// `g*queries + j`'s row `i`; then group `g`'s key, then its value.
    fn rows(self, rows: usize) -> Arc<[u32]> {
        let per_group = self.queries + 2;
        let d = rows / (self.groups * per_group);
        let (q_rows, kv_rows) = (self.groups * self.queries * d, self.groups * d);
        (0..rows)
            .map(|r| {
                let (g, rest) = (r / (per_group * d), r % (per_group * d));
                let (j, i) = (rest / d, rest % d);
                let file = match j {
                    _ if j < self.queries => (g * self.queries + j) * d + i,
                    _ if j == self.queries => q_rows + g * d + i,
                    _ => q_rows + kv_rows + g * d + i,
                };
                file as u32
            })
            .collect()
    }

    /// A float restacked `attn_qkv` (`[rows, ...]`) back in grouped rows: the query, key and
    /// value row ranges each seen as `[groups, n * d, ...]` and concatenated along the second axis.
    fn float(self, r: Recipe, shape: &[usize]) -> ir::Result<Recipe> {
        let d = shape[0] / (self.groups * (self.queries + 2));
        let (q_rows, kv_rows) = (self.groups * self.queries * d, self.groups * d);
        let part = |start: usize, rows: usize, per_group: usize| {
            let mut split = vec![self.groups, per_group];
            split.extend_from_slice(&shape[1..]);
            r.clone().slice(0, start, start + rows).reshape(split)
        };
        let parts = vec![part(0, q_rows, self.queries * d), part(q_rows, kv_rows, d), part(q_rows + kv_rows, kv_rows, d)];
        Ok(Recipe::concat(parts, 1)?.reshape(shape.to_vec()))
    }
}

/// A float q/k tensor (`[rows, ...]`) with llama.cpp's row permutation undone: its rows seen as
/// `[heads, hd/2, 2, ...]`, the middle axes swapped.
fn unpermute_float(r: Recipe, shape: &[usize], heads: usize) -> Recipe {
    let half = shape[0] / heads / 2;
    let mut split = vec![heads, half, 2];
    split.extend_from_slice(&shape[1..]);
    let mut perm = vec![0, 2, 1];
    perm.extend(3..split.len());
    r.reshape(split).transpose(perm).reshape(shape.to_vec())
}

/// The values of the rope factor tensor `name` (`None` when the file has none): an F32
/// vector of `len` values, as llama.cpp writes them and as ggml's rope requires them.
fn factor_tensor(path: &Path, file: &GgufFile, name: &str, len: usize) -> Result<Option<Vec<f64>>> {
    let err = |reason: String| Error::Checkpoint { path: path.to_path_buf(), reason };
    let Some(t) = file.tensors.iter().find(|t| t.name == name) else { return Ok(None) };
    if t.ggml_type != GgmlType::F32 || t.dims != [len] {
        return Err(err(format!(
            "tensor `{name}` is {} {:?}; rope factors are read as an F32 vector of {len} values (one per rotary pair), as llama.cpp writes them",
            t.ggml_type, t.dims
        )));
    }
    let values: Vec<f64> = file.data(t).chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect();
    if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| !(v.is_finite() && **v > 0.0)) {
        return Err(err(format!("tensor `{name}` holds {v} at {i}: rope factors divide the frequencies and must be positive")));
    }
    Ok(Some(values))
}

/// The config.json of the file's metadata (architecture `name`), every key read checked.
fn config_of(path: &Path, file: &GgufFile, name: &str, a: &Arch) -> Result<Map<String, Json>> {
    let err = |reason: String| Error::Config { path: path.to_path_buf(), reason };
    let prefix = format!("{name}.");
    for (k, v) in &file.metadata {
        if let Some(rest) = k.strip_prefix(&prefix) {
            if !READ_KEYS.contains(&rest) && !a.extra_keys().contains(&rest) {
                let read = READ_KEYS.iter().chain(a.extra_keys().iter()).map(|r| format!("{prefix}{r}")).collect::<Vec<_>>().join(", ");
                return Err(err(format!("metadata key `{k}` ({v:?}) is not read: a GGUF import of {name} maps {read}")));
            }
        }
    }
    let key = |k: &str| format!("{prefix}{k}");
    let uint = |k: &str| -> Result<Option<u64>> {
        match file.get(&key(k)) {
            None => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| err(format!("metadata key `{}` is {v:?}, not a non-negative integer", key(k)))),
        }
    };
    let need = |k: &str| -> Result<u64> { uint(k)?.ok_or_else(|| err(format!("metadata key `{}` is missing", key(k)))) };
    let float = |k: &str| -> Result<Option<f64>> {
        match file.get(&key(k)) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| err(format!("metadata key `{}` is {v:?}, not a number", key(k)))),
        }
    };
    // Rope scaling: none, or (Gemma 3) linear with `rope.scaling.factor` on the full layers.
    let linear_factor = match file.get(&key("rope.scaling.type")).map(|v| (v, v.as_str())) {
        None | Some((_, Some("none"))) => None,
        // YaRN, read by `yarn_scaling` (gpt-oss, OLMo 3, Arcee).
        Some((_, Some("yarn"))) if a.reads_yarn() => None,
        // MiniCPM4's LongRoPE: its factor tensors, read by `minicpm_config`.
        Some((_, Some("longrope"))) if a.kind == Kind::MiniCpm => None,
        Some((_, Some("linear"))) if a.kind == Kind::Gemma3 => {
            Some(float("rope.scaling.factor")?.ok_or_else(|| err(format!("`{}` is linear but `{}` is missing", key("rope.scaling.type"), key("rope.scaling.factor"))))?)
        }
        Some((v, _)) => return Err(err(format!("metadata key `{}` is {v:?}: this rope scaling is not imported from GGUF files of {name} (imported: Gemma 3's linear scaling, the YaRN of gpt-oss, OLMo 3, Arcee and Ministral 3, Llama 3's `rope_freqs.weight`, Phi-3's LongRoPE factor tensors)", key("rope.scaling.type")))),
    };
    if matches!(a.kind, Kind::HunyuanMoe | Kind::HunyuanDense) {
        if let Some(f) = float("rope.scaling.factor")?.filter(|f| *f != 1.0) {
            return Err(err(format!("metadata key `{}` is {f}: Hunyuan's files state their NTK-alpha RoPE as a stretched `{}` and a factor of 1", key("rope.scaling.factor"), key("rope.freq_base"))));
        }
    } else if linear_factor.is_none() && !a.reads_yarn() && file.get(&key("rope.scaling.factor")).is_some() {
        return Err(err(format!("metadata key `{}` is set without a linear `{}`", key("rope.scaling.factor"), key("rope.scaling.type"))));
    }
    let hidden = need("embedding_length")?;
    let heads = need("attention.head_count")?;
    if heads == 0 {
        return Err(err(format!("metadata key `{}` is 0", key("attention.head_count"))));
    }
    let kv_heads = uint("attention.head_count_kv")?.unwrap_or(heads);
    let head_dim = match (uint("attention.key_length")?, uint("attention.value_length")?) {
        // DeepSeek's latent attention: the config's `head_dim` is the rotary part
        // (`DeepseekV3Config`); its key/value lengths are the latent's, read by deepseek2_config.
        _ if a.latent() => need("rope.dimension_count")?,
        (Some(k), Some(v)) if k != v => return Err(err(format!("`{}` ({k}) differs from `{}` ({v}): one head size is read", key("attention.key_length"), key("attention.value_length")))),
        (Some(k), _) | (None, Some(k)) => k,
        (None, None) => hidden / heads,
    };
    // The rotated dimensions of each head: all of them, or (Phi-3: Phi-4-mini's 0.75) the first
    // `rope.dimension_count`, written as `int(partial_rotary_factor * hidden) // heads`.
    let rotary = uint("rope.dimension_count")?.unwrap_or(head_dim);
    if rotary != head_dim {
        if !matches!(a.kind, Kind::Phi3 | Kind::Phi2 | Kind::Glm4 | Kind::Glm4Moe | Kind::ChatGlm | Kind::Nemotron | Kind::StableLm | Kind::GptNeox | Kind::MinimaxM2) {
            return Err(err(format!("metadata key `{}` is {rotary}, not the head size {head_dim}: partial rotary embeddings are imported from phi2, phi3, glm4, glm4moe, chatglm, nemotron, stablelm, gptneox and minimax-m2 files only", key("rope.dimension_count"))));
        }
        let partial = rotary as f64 / head_dim as f64;
        if rotary == 0 || rotary % 2 != 0 || rotary > head_dim || (head_dim as f64 * partial) as u64 != rotary {
            return Err(err(format!(
                "metadata key `{}` is {rotary}: the rotated dimensions must be even, positive, at most the head size {head_dim}, and a fraction of it that `partial_rotary_factor` can state",
                key("rope.dimension_count")
            )));
        }
    }
    let vocab_from_tokens = file.get("tokenizer.ggml.tokens").and_then(Value::as_array).map(<[Value]>::len);
    let embed = file.tensors.iter().find(|t| t.name == "token_embd.weight").ok_or_else(|| err("has no `token_embd.weight`".into()))?;
    let vocab = match uint("vocab_size")? {
        Some(v) => v as usize,
        None => embed.dims.get(1).copied().unwrap_or(0),
    };
    if let Some(n) = vocab_from_tokens.filter(|&n| n != vocab) {
        return Err(err(format!("`tokenizer.ggml.tokens` lists {n} tokens, the model has {vocab}")));
    }
    let id = |k: &str| file.get(k).and_then(Value::as_u64);
    let mut c = Map::new();
    c.insert("model_type".into(), json!(a.model_type));
    c.insert("hidden_size".into(), json!(hidden));
    // Solar Open's glm4moe files (every layer sparse, no `intermediate_size` in its config) have
    // no `feed_forward_length`: `glm4moe_config` checks no layer needs it.
    match uint("feed_forward_length")? {
        Some(ff) => {
            c.insert("intermediate_size".into(), json!(ff));
        }
        None if a.kind == Kind::Glm4Moe => {}
        None => {
            need("feed_forward_length")?;
        }
    }
    c.insert("num_hidden_layers".into(), json!(need("block_count")?));
    c.insert("num_attention_heads".into(), json!(heads));
    c.insert("num_key_value_heads".into(), json!(kv_heads));
    c.insert("head_dim".into(), json!(head_dim));
    c.insert("vocab_size".into(), json!(vocab));
    c.insert("hidden_act".into(), json!(if a.gemma() { "gelu_pytorch_tanh" } else { "silu" }));
    // LayerNorm architectures state `attention.layer_norm_epsilon` (read by their config
    // function); llama.cpp's loaders for them do not read an RMS epsilon.
    if !a.layer_norm() {
        let eps = float("attention.layer_norm_rms_epsilon")?.ok_or_else(|| err(format!("metadata key `{}` is missing", key("attention.layer_norm_rms_epsilon"))))?;
        c.insert("rms_norm_eps".into(), json!(eps as f32 as f64));
    }
    let theta = float("rope.freq_base")?.unwrap_or(10000.0);
    if a.kind == Kind::Gemma3 {
        let mut full = json!({"rope_type": "default", "rope_theta": theta});
        if let Some(f) = linear_factor {
            full = json!({"rope_type": "linear", "rope_theta": theta, "factor": f});
        }
        // The sliding layers' base: `rope.freq_base_swa` where the converter writes it, else
        // the 10000 llama.cpp's gemma3 loader sets.
        let local = float("rope.freq_base_swa")?.unwrap_or(10000.0);
        c.insert("rope_parameters".into(), json!({"full_attention": full, "sliding_attention": {"rope_type": "default", "rope_theta": local}}));
    } else {
        c.insert("rope_theta".into(), json!(theta));
    }
    // Llama 3.1/3.2: the converter turned the llama3 `rope_scaling` into per-pair factors and
    // wrote no scaling key; the model divides each inverse frequency by its factor.
    if a.rope_tensors().contains(&ROPE_FREQS) {
        if let Some(factors) = factor_tensor(path, file, ROPE_FREQS, head_dim as usize / 2)? {
            c.insert("rope_scaling".into(), json!({"rope_type": "freq_factors", "factors": factors}));
        }
    }
    if let Some(ctx) = uint("context_length")? {
        c.insert("max_position_embeddings".into(), json!(ctx));
    }
    // llama.cpp writes the output projection only when it is not the embedding matrix.
    c.insert("tie_word_embeddings".into(), json!(!file.tensors.iter().any(|t| t.name == "output.weight")));
    // q biases, alone or inside a fused `attn_qkv` (llama.cpp's `--fuse-qkv`).
    let biased = file.tensors.iter().any(|t| t.name.ends_with(".attn_q.bias") || t.name.ends_with(".attn_qkv.bias"));
    if matches!(a.kind, Kind::Llama | Kind::Qwen3 | Kind::Qwen3Moe | Kind::Mellum | Kind::HyV3 | Kind::GraniteSwa | Kind::Granite | Kind::MiniCpm | Kind::GraniteMoe | Kind::Olmo2 | Kind::Smollm3 | Kind::GptOss | Kind::Glm4 | Kind::Glm4Moe | Kind::Dots1 | Kind::Olmoe | Kind::Olmo | Kind::Nemotron | Kind::SeedOss | Kind::Arcee | Kind::Apertus | Kind::Exaone) {
        c.insert("attention_bias".into(), json!(biased));
    }
    if a.kind == Kind::Qwen2Moe {
        c.insert("qkv_bias".into(), json!(biased));
    }
    if a.kind == Kind::Phi3 {
        phi3_config(&mut c, path, file, rotary, head_dim, &float, &uint, &key, &err)?;
    }
    if a.kind == Kind::Llama {
        c.insert("mlp_bias".into(), json!(false));
        const META_LAYOUT: &str = "Meta AI original pth";
        match file.get(&key("tensor_data_layout")) {
            None => {}
            Some(v) if v.as_str() == Some(META_LAYOUT) => {}
            Some(v) => return Err(err(format!("metadata key `{}` is {v:?}; the import reads the layout llama.cpp's converters write (absent, or \"{META_LAYOUT}\")", key("tensor_data_layout")))),
        }
    }
    if a.gemma() {
        gemma_config(&mut c, a.kind, &float, &uint, &key, &err)?;
    }
    if matches!(a.kind, Kind::Granite | Kind::GraniteMoe | Kind::GraniteSwa) {
        granite_config(&mut c, file, &float, &key, &err)?;
    }
    if a.kind == Kind::MiniCpm {
        minicpm_config(&mut c, path, file, &float, &key, &err)?;
    }
    if a.vl_text {
        vl_text_config(file, head_dim, &uint, &key, &err)?;
    }
    if a.kind == Kind::Starcoder2 {
        starcoder2_config(&mut c, biased, &float, &key, &err)?;
    }
    if a.kind == Kind::Phi2 {
        phi2_config(&mut c, file, rotary, head_dim, &float, &key, &err)?;
    }
    if matches!(a.kind, Kind::Gpt2 | Kind::StarCoder) {
        gpt2_config(&mut c, file, &float, &key, &err)?;
    }
    if a.kind == Kind::StarCoder {
        // StarCoderModel writes one key/value head (multi-query) and GELU is ggml's tanh form,
        // GPTBigCode's `gelu_pytorch_tanh`. The converter writes 1 whatever the model: a
        // `multi_query: false` checkpoint's `c_attn` (3 x hidden rows, fused per head) is then
        // refused by its shape; another count is refused here.
        if kv_heads != 1 {
            return Err(err(format!("metadata key `{}` is {kv_heads}: StarCoder files have one key/value head (multi-query), as the converter writes; a per-head fused `c_attn` is not imported", key("attention.head_count_kv"))));
        }
        c.insert("hidden_act".into(), json!("gelu_pytorch_tanh"));
        c.insert("multi_query".into(), json!(true));
    }
    if a.kind == Kind::Bert {
        bert_config(&mut c, file, &float, &key, &err)?;
    }
    if a.kind == Kind::Smollm3 {
        smollm3_config(&mut c);
    }
    if a.kind == Kind::ChatGlm {
        // GlmConfig's `attention_bias` switches the q/k/v biases (none on o_proj, as llama.cpp's
        // chatglm loader reads none); the activation is SwiGLU on the fused gate/up (gate first).
        c.insert("attention_bias".into(), json!(biased));
    }
    if matches!(a.kind, Kind::Glm4 | Kind::Glm4Moe | Kind::ChatGlm | Kind::Nemotron | Kind::StableLm | Kind::GptNeox) {
        // These families default to 0.5 (StableLM 0.25): the file's value is always written.
        c.insert("partial_rotary_factor".into(), json!(rotary as f64 / head_dim as f64));
    }
    if matches!(a.kind, Kind::HunyuanMoe | Kind::HunyuanDense) {
        // transformers' `attention_bias` switches q/k/v and o biases together; llama.cpp's
        // Hunyuan loaders read only q/k/v ones.
        if biased && !file.tensors.iter().any(|t| t.name.ends_with(".attn_output.bias")) {
            return Err(err("holds q/k/v biases but no `attn_output.bias`: transformers' Hunyuan switches all four together (`attention_bias`)".into()));
        }
        c.insert("attention_bias".into(), json!(biased));
    }
    if matches!(a.kind, Kind::Ernie4_5 | Kind::Ernie4_5Moe) {
        // One switch for every projection's bias in transformers; llama.cpp's loader takes
        // each as optional.
        c.insert("use_bias".into(), json!(biased));
    }
    if a.kind == Kind::Olmo {
        olmo_config(&mut c, &float, &key, &err)?;
    }
    if a.kind == Kind::Nemotron {
        let eps = float("attention.layer_norm_epsilon")?.ok_or_else(|| err(format!("metadata key `{}` is missing", key("attention.layer_norm_epsilon"))))?;
        c.insert("norm_eps".into(), json!(eps as f32 as f64));
        c.insert("hidden_act".into(), json!("relu2"));
        c.insert("mlp_bias".into(), json!(file.tensors.iter().any(|t| t.name.ends_with(".ffn_up.bias"))));
    }
    if a.kind == Kind::Falcon {
        falcon_config(&mut c, file, kv_heads, biased, &float, &key, &err)?;
    }
    if a.kind == Kind::Bloom {
        bloom_config(&mut c, file, &float, &key, &err)?;
    }
    if a.kind == Kind::Mpt {
        mpt_config(&mut c, file, &float, &key, &err)?;
    }
    if a.kind == Kind::Dbrx {
        dbrx_config(&mut c, file, theta, &float, &uint, &key, &err)?;
    }
    if a.kind == Kind::Jais2 {
        // Jais2Model writes TextModel's keys: the LayerNorm epsilon (`layer_norm_eps`); relu2 is
        // Jais2Config's and llama.cpp's only activation. transformers' `attention_bias` switches
        // q/k/v and o together (llama.cpp's loader requires `attn_output.bias`), `mlp_bias` both
        // MLP projections (required there too): the tensors say which.
        let eps = float("attention.layer_norm_epsilon")?.ok_or_else(|| err(format!("metadata key `{}` is missing", key("attention.layer_norm_epsilon"))))?;
        c.insert("layer_norm_eps".into(), json!(eps as f32 as f64));
        c.insert("hidden_act".into(), json!("relu2"));
        c.insert("attention_bias".into(), json!(biased));
        c.insert("mlp_bias".into(), json!(file.tensors.iter().any(|t| t.name.ends_with(".ffn_up.bias"))));
    }
    if a.kind == Kind::Olmo2 {
        if uint("attention.sliding_window")?.is_some_and(|w| w > 0) {
            olmo3_config(&mut c, file, &float, &uint, &key, &err)?;
        } else if let Some(k) = ["rope.scaling.type"].iter().chain(a.extra_keys().iter()).find(|k| **k != "attention.sliding_window" && file.get(&key(k)).is_some_and(|v| v.as_str() != Some("none"))) {
            return Err(err(format!(
                "metadata key `{}` is set in an OLMo 2 file (no `{}`, so not OLMo 3): OLMo 2 has no windows and no RoPE scaling",
                key(k),
                key("attention.sliding_window")
            )));
        }
    }
    if a.kind == Kind::Exaone4 {
        exaone4_config(&mut c, file, &uint, &key, &err)?;
    }
    if matches!(a.kind, Kind::CommandR | Kind::Cohere2) {
        cohere_config(&mut c, a.kind, file, &float, &uint, &key, &err)?;
    }
    if a.kind == Kind::StableLm {
        // StableLMModel writes its own keys: no `rope.freq_base` (llama.cpp's and transformers'
        // default 10000) and the LayerNorm epsilon. Its `use_parallel_residual` is true when the
        // config lacks the key (the sequential StableLM 2 1.6B among them), so, as llama.cpp's
        // stablelm graph, the tensors decide: the parallel residual where no layer has
        // `ffn_norm`, per-head q/k norms (StableLM 2 12B) where the layers have `attn_q_norm`.
        let eps = float("attention.layer_norm_epsilon")?.ok_or_else(|| err(format!("metadata key `{}` is missing", key("attention.layer_norm_epsilon"))))?;
        c.insert("layer_norm_eps".into(), json!(eps as f32 as f64));
        c.insert("use_qkv_bias".into(), json!(biased));
        if let Some(v) = file.get(&key("use_parallel_residual")) {
            v.as_bool().ok_or_else(|| err(format!("metadata key `{}` is {v:?}, not true or false", key("use_parallel_residual"))))?;
        }
        c.insert("use_parallel_residual".into(), json!(!every_layer_has(file, "ffn_norm.weight", &c, &err)?));
        c.insert("qk_layernorm".into(), json!(qk_norms_in_every_layer(file, &c, &err)?));
    }
    if a.kind == Kind::Arcee {
        c.insert("hidden_act".into(), json!("relu2"));
        c.insert("mlp_bias".into(), json!(false));
        if let Some(yarn) = yarn_scaling(&c, file, &float, &uint, &key, &err)? {
            if c.contains_key("rope_scaling") {
                return Err(err(format!("holds both `{ROPE_FREQS}` and a yarn `{}`: one RoPE scaling is read", key("rope.scaling.type"))));
            }
            c.insert("rope_scaling".into(), yarn);
        }
    }
    if a.kind == Kind::Mistral3 {
        mistral3_config(&mut c, file, &float, &uint, &key, &err)?;
    }
    if a.kind == Kind::GptNeox {
        // GPTNeoXModel writes its own keys: no `rope.freq_base` (10000, llama.cpp's and
        // transformers' default), the LayerNorm epsilon, `use_parallel_residual` (which
        // llama.cpp's loader requires: both norms are there either way), no activation (the
        // config's exact GELU; llama.cpp's graph computes ggml's tanh GELU), biases everywhere.
        let eps = float("attention.layer_norm_epsilon")?.ok_or_else(|| err(format!("metadata key `{}` is missing", key("attention.layer_norm_epsilon"))))?;
        c.insert("layer_norm_eps".into(), json!(eps as f32 as f64));
        let parallel = match file.get(&key("use_parallel_residual")) {
            None => return Err(err(format!("metadata key `{}` is missing (llama.cpp's gptneox loader requires it)", key("use_parallel_residual")))),
            Some(v) => v.as_bool().ok_or_else(|| err(format!("metadata key `{}` is {v:?}, not true or false", key("use_parallel_residual"))))?,
        };
        c.insert("use_parallel_residual".into(), json!(parallel));
        c.insert("attention_bias".into(), json!(file.tensors.iter().any(|t| t.name.ends_with(".attn_qkv.bias"))));
        c.insert("hidden_act".into(), json!("gelu"));
    }
    if a.kind == Kind::Apertus {
        // xIELU (the scalars are metadata, read by `xielu_views`); the RoPE is the file's
        // `rope_freqs.weight` or none, stated: the family's default object is Llama 3's.
        c.insert("hidden_act".into(), json!("xielu"));
        c.insert("mlp_bias".into(), json!(false));
        c.entry("rope_scaling").or_insert(json!({"rope_type": "default"}));
    }
    if a.kind == Kind::GptOss {
        gpt_oss_config(&mut c, file, &float, &uint, &key, &err)?;
    } else if a.kind == Kind::MiniCpm3 {
        minicpm3_config(&mut c, path, file, rotary, &uint, &key, &err)?;
    } else if a.latent() {
        deepseek2_config(&mut c, a.kind, file, &float, &uint, &key, &err)?;
    } else if a.kind == Kind::Glm4Moe {
        glm4moe_config(&mut c, file, &float, &uint, &key, &err)?;
    } else if a.kind == Kind::Dots1 {
        dots1_config(&mut c, file, &float, &uint, &key, &err)?;
    } else if a.kind == Kind::Ernie4_5Moe {
        ernie_moe_config(&mut c, file, &uint, &key, &err)?;
    } else if a.kind == Kind::HunyuanMoe {
        hunyuan_moe_config(&mut c, file, &uint, &key, &err)?;
    } else if a.kind == Kind::ExaoneMoe {
        exaone_moe_config(&mut c, file, &float, &uint, &key, &err)?;
    } else if a.kind == Kind::Afmoe {
        afmoe_config(&mut c, file, &float, &uint, &key, &err)?;
    } else if a.kind == Kind::MinimaxM2 {
        minimax_m2_config(&mut c, file, rotary, head_dim, &uint, &key, &err)?;
    } else if a.kind == Kind::Phimoe {
        phimoe_config(&mut c, path, file, rotary, head_dim, &float, &uint, &key, &err)?;
    } else if a.kind == Kind::Mellum {
        mellum_config(&mut c, file, &float, &uint, &key, &err)?;
    } else if a.kind == Kind::HyV3 {
        hy_v3_config(&mut c, file, &float, &uint, &key, &err)?;
    } else if a.kind == Kind::GraniteSwa {
        granite_swa_config(&mut c, file, &uint, &key, &err)?;
    } else {
        moe_config(&mut c, a, file, &uint, &key, &err)?;
    }
    for (k, to) in [("tokenizer.ggml.bos_token_id", "bos_token_id"), ("tokenizer.ggml.padding_token_id", "pad_token_id")] {
        if let Some(v) = id(k) {
            c.insert(to.into(), json!(v));
        }
    }
    let ends = end_of_generation_ids(file);
    if !ends.is_empty() {
        c.insert("eos_token_id".into(), if ends.len() == 1 { json!(ends[0]) } else { json!(ends) });
    }
    c.insert("torch_dtype".into(), json!("float32"));
    Ok(c)
}

/// Tokens that end a turn by their text, as llama.cpp's vocabulary loader
/// (`llama-vocab.cpp`) counts them among the end-of-generation tokens: a chat model's turn
/// ends with one of these while the file's EOS is another token (Gemma's `<end_of_turn>` with
/// EOS `<eos>`, Phi-3's `<|end|>` with `<|endoftext|>`, Llama 3.1's `<|eot_id|>` and
/// `<|eom_id|>`), as the models' own generation_config.json lists them.
const END_OF_TURN_TOKENS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<|end_of_text|>",
    "<end_of_utterance>",
];

/// The ids generation stops at (`eos_token_id`, first the file's EOS): the EOS, the
/// end-of-turn and end-of-message ids the file names (`tokenizer.ggml.eot_token_id`,
/// `eom_token_id`), and the tokens of [`END_OF_TURN_TOKENS`] (less gpt-oss's `<|end|>`). Without them
/// onnxruntime-genai generates past the end of a chat turn where llama.cpp stops.
fn end_of_generation_ids(file: &GgufFile) -> Vec<u64> {
    let tokens = file.get("tokenizer.ggml.tokens").and_then(Value::as_array).unwrap_or(&[]);
    let in_vocab = |v: u64| (v as usize) < tokens.len() || tokens.is_empty();
    let mut ids: Vec<u64> = ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"]
        .iter()
        .filter_map(|k| file.get(k).and_then(Value::as_u64))
        .filter(|&v| in_vocab(v))
        .collect();
    // Whatever their token type: llama.cpp takes one that is not typed CONTROL as a
    // conversion bug and makes it one.
    ids.extend(tokens.iter().enumerate().filter(|(_, t)| t.as_str().is_some_and(|t| END_OF_TURN_TOKENS.contains(&t))).map(|(i, _)| i as u64));
    let mut seen = std::collections::HashSet::new();
    ids.retain(|v| seen.insert(*v));
    // gpt-oss's harmony format ends a message with `<|end|>` and the reply with `<|return|>` or
    // `<|call|>`: with both of those, `<|end|>` is no stop (llama.cpp drops it; the model's own
    // generation_config lists the other three).
    let text = |id: u64| tokens.get(id as usize).and_then(Value::as_str);
    let stops_at = |t: &str| ids.iter().any(|&i| text(i) == Some(t));
    if stops_at("<|return|>") && stops_at("<|call|>") {
        ids.retain(|&i| text(i) != Some("<|end|>"));
    }
    ids
}

type Read<'a, T> = &'a dyn Fn(&str) -> Result<Option<T>>;

/// The Phi-3 keys of the config (`Phi3MiniModel` in llama.cpp's converter, `LLM_ARCH_PHI3` in its
/// loader): partial rotary, LongRoPE from the two factor tensors, the sliding window.
#[allow(clippy::too_many_arguments)]
fn phi3_config(c: &mut Map<String, Json>, path: &Path, file: &GgufFile, rotary: u64, head_dim: u64, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    if rotary != head_dim {
        c.insert("partial_rotary_factor".into(), json!(rotary as f64 / head_dim as f64));
    }
    let original = uint("rope.scaling.original_context_length")?;
    let attn_factor = float("rope.scaling.attn_factor")?;
    let long = factor_tensor(path, file, ROPE_LONG, rotary as usize / 2)?;
    let short = factor_tensor(path, file, ROPE_SHORT, rotary as usize / 2)?;
    match (short, long) {
        (Some(short), Some(long)) => {
            // llama.cpp: the original length defaults to the training context; cos/sin are
            // multiplied by `attn_factor` (1 when absent) whichever set applies.
            let original = match (original, uint("context_length")?) {
                (Some(o), _) | (None, Some(o)) => o,
                (None, None) => return Err(err(format!("LongRoPE factors without `{}` or `{}`: the length at which the long factors apply is not stated", key("rope.scaling.original_context_length"), key("context_length")))),
            };
            c.insert("original_max_position_embeddings".into(), json!(original));
            c.insert(
                "rope_scaling".into(),
                json!({"rope_type": "longrope", "short_factor": short, "long_factor": long, "attention_factor": attn_factor.unwrap_or(1.0)}),
            );
        }
        (None, None) => {
            // llama.cpp multiplies cos/sin by `attn_factor` with or without factors; the
            // converter writes it only beside them.
            if let Some(f) = attn_factor.filter(|&f| f != 1.0) {
                return Err(err(format!("metadata key `{}` is {f} without LongRoPE factor tensors: a cos/sin factor alone is not imported", key("rope.scaling.attn_factor"))));
            }
            if let Some(o) = original {
                c.insert("original_max_position_embeddings".into(), json!(o));
            }
        }
        (one, _) => {
            let (has, lacks) = if one.is_some() { (ROPE_SHORT, ROPE_LONG) } else { (ROPE_LONG, ROPE_SHORT) };
            return Err(err(format!("holds `{has}` without `{lacks}`: LongRoPE needs both factor sets")));
        }
    }
    // 0: no window (the converter's value for a config without one, Phi-4). llama.cpp's loader
    // currently ignores a Phi-3 window (it warns and attends to everything); the import keeps
    // the model's own window, which transformers applies.
    if let Some(w) = uint("attention.sliding_window")?.filter(|&w| w > 0) {
        c.insert("sliding_window".into(), json!(w));
    }
    Ok(())
}

/// The PhiMoE keys of the config (`PhiMoeModel`, a `Phi3MiniModel` with Mixtral's experts, in
/// llama.cpp's converter; its `LLM_ARCH_PHIMOE` loader): Phi-3's LongRoPE keys and window
/// ([`phi3_config`]), every layer routed over `expert_count` experts, the biases from the
/// tensors. transformers' PhiMoE scales cos/sin by `short_mscale` / `long_mscale` (Phi-3.5-MoE:
/// 1.243 both); the converter writes neither, only Phi-3's `attn_factor` (`sqrt(1 + ln(scale) /
/// ln(original))`, 1.190 for Phi-3.5-MoE), which llama.cpp applies to either set: the config
/// takes it for both (`short_mscale` = `long_mscale`, which `PhimoeConfig` requires). llama.cpp's
/// graph departs from the model in two ways the import does not follow: RMS norms (the file's
/// LayerNorm biases added after them) and softmax top-k routing; transformers' LayerNorm and
/// sparsemixer (its jitter at PhiMoE's default 0.01, which the file does not state) are the
/// model the file was converted from.
#[allow(clippy::too_many_arguments)]
fn phimoe_config(c: &mut Map<String, Json>, path: &Path, file: &GgufFile, rotary: u64, head_dim: u64, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    phi3_config(c, path, file, rotary, head_dim, float, uint, key, err)?;
    if let Some(rope) = c.get_mut("rope_scaling").and_then(Json::as_object_mut) {
        if let Some(f) = rope.remove("attention_factor") {
            rope.insert("short_mscale".into(), f.clone());
            rope.insert("long_mscale".into(), f);
        }
    }
    let (experts, used) = expert_counts(uint, key, err)?;
    every_layer_routes(c, file, "every PhiMoE layer routes over experts", err)?;
    c.insert("num_local_experts".into(), json!(experts));
    c.insert("num_experts_per_tok".into(), json!(used));
    // One `attention_bias` for q, k, v and o in transformers; llama.cpp's loader requires all.
    let has = |suffix: &str| file.tensors.iter().any(|t| t.name.ends_with(suffix));
    let biased = has(".attn_q.bias") || has(".attn_qkv.bias");
    if biased != has(".attn_output.bias") {
        return Err(err("holds biases on some attention projections only (`attn_q.bias` or `attn_qkv.bias`, `attn_output.bias`): transformers' PhiMoE switches all four together (`attention_bias`)".into()));
    }
    c.insert("attention_bias".into(), json!(biased));
    c.insert("lm_head_bias".into(), json!(file.tensors.iter().any(|t| t.name == "output.bias")));
    Ok(())
}

/// The mixture-of-experts keys of the config (see the module doc): none for a file without
/// `expert_count` (a dense llama), Mixtral's for llama with experts, Qwen-MoE's otherwise.
fn moe_config(c: &mut Map<String, Json>, a: &Arch, file: &GgufFile, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let experts = uint("expert_count")?.unwrap_or(0);
    if experts == 0 {
        if a.qwen_moe() || matches!(a.kind, Kind::Olmoe | Kind::GraniteMoe) {
            return Err(err(format!("metadata key `{}` is missing or 0: every {} file routes over experts", key("expert_count"), a.model_type)));
        }
        return Ok(());
    }
    let used = uint("expert_used_count")?.filter(|&u| u > 0).ok_or_else(|| err(format!("metadata key `{}` is missing or 0 beside `{}` {experts}", key("expert_used_count"), key("expert_count"))))?;
    if used > experts {
        return Err(err(format!("metadata key `{}` ({used}) is larger than `{}` ({experts})", key("expert_used_count"), key("expert_count"))));
    }
    let layers = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0);
    let routed = |i: u64| file.tensors.iter().any(|t| t.name == format!("blk.{i}.ffn_gate_inp.weight"));
    let n_ff = c.get("intermediate_size").and_then(Json::as_u64).unwrap_or(0);
    if a.kind == Kind::Llama {
        // Mixtral: every layer routes (llama.cpp's llama graph takes the expert branch in
        // every layer of a file with experts).
        every_layer_routes(c, file, &format!("a llama file with `{}` routes every layer", key("expert_count")), err)?;
        c.insert("model_type".into(), json!("mixtral"));
        c.remove("attention_bias");
        c.remove("mlp_bias");
        c.insert("num_local_experts".into(), json!(experts));
        c.insert("num_experts_per_tok".into(), json!(used));
        return Ok(());
    }
    if a.kind == Kind::Dbrx {
        // DBRX: every layer routes; its nested keys are written by `dbrx_config`.
        return every_layer_routes(c, file, "every DBRX layer routes over experts", err);
    }
    c.insert("num_experts".into(), json!(experts));
    c.insert("num_experts_per_tok".into(), json!(used));
    if a.kind == Kind::GraniteMoe {
        // GraniteMoE: every layer routes over `num_local_experts` of `feed_forward_length` (the
        // config's `intermediate_size`), softmax over the chosen logits (the family's).
        // GraniteMoeShared (its converter is GraniteMoE's) adds a shared MLP of
        // `expert_shared_feed_forward_length` (`shared_intermediate_size`) in every layer.
        every_layer_routes(c, file, "every GraniteMoE layer routes over experts", err)?;
        c.remove("num_experts");
        c.insert("num_local_experts".into(), json!(experts));
        if let Some(width) = uint("expert_shared_feed_forward_length")?.filter(|&w| w > 0) {
            c.insert("model_type".into(), json!("granitemoeshared"));
            c.insert("shared_intermediate_size".into(), json!(width));
            if let Some(i) = (0..layers).find(|i| !file.tensors.iter().any(|t| t.name == format!("blk.{i}.ffn_down_shexp.weight"))) {
                return Err(err(format!("layer {i} has no `blk.{i}.ffn_down_shexp.weight`: `{}` {width} gives every layer a shared MLP", key("expert_shared_feed_forward_length"))));
            }
        } else if let Some(t) = file.tensors.iter().find(|t| t.name.contains("_shexp.")) {
            return Err(err(format!("holds `{}` but `{}` is missing or 0: the shared MLP's width is stated with it", t.name, key("expert_shared_feed_forward_length"))));
        }
        return Ok(());
    }
    if a.kind == Kind::Olmoe {
        // OLMoE: every layer routes; the experts' width is `feed_forward_length` (the config's
        // `intermediate_size`), the chosen weights are not renormalized (llama.cpp's olmoe
        // graph: `norm_w` false, as OLMoE's `norm_topk_prob`), and the q/k values are not
        // clipped (no key states `clip_qkv`; llama.cpp's graph has no clamp).
        every_layer_routes(c, file, "every OLMoE layer routes over experts", err)?;
        c.insert("norm_topk_prob".into(), json!(false));
        c.insert("clip_qkv".into(), Json::Null);
        return Ok(());
    }
    c.insert("moe_intermediate_size".into(), json!(uint("expert_feed_forward_length")?.unwrap_or(n_ff / used)));
    // llama.cpp's `norm_w`: qwen3moe renormalizes the chosen weights, qwen2moe does not.
    c.insert("norm_topk_prob".into(), json!(a.kind == Kind::Qwen3Moe));
    c.insert("decoder_sparse_step".into(), json!(1));
    c.insert("mlp_only_layers".into(), json!((0..layers).filter(|&i| !routed(i)).collect::<Vec<_>>()));
    if a.kind == Kind::Qwen2Moe {
        c.insert("shared_expert_intermediate_size".into(), json!(uint("expert_shared_feed_forward_length")?.unwrap_or(n_ff)));
    }
    Ok(())
}

/// Mellum's keys (llama.cpp's `MellumModel` writes TextModel's with the experts' width
/// `expert_feed_forward_length`, and the window with one bool per layer when the config slides;
/// its `LLM_ARCH_MELLUM` loader) as `MellumConfig` spells them: `num_local_experts` of that width
/// (absent: `feed_forward_length` / used, llama.cpp's fallback), top `expert_used_count`, the
/// chosen softmax weights renormalized (the graph's `norm_w` is always true), the layers without
/// a router dense (`mlp_layer_types`; llama.cpp's loader wants one in every layer, MellumConfig
/// allows dense ones and the tensors say which), the window and `layer_types` (EXAONE 4's
/// reading of the pattern, llama.cpp's period 4 without one; no window: every layer full), a
/// RoPE base per layer type in `rope_parameters` (`rope.freq_base_swa` for the sliding layers,
/// else the full layers' base), as `MellumConfig`'s model rotates them. llama.cpp's loader reads
/// `rope.freq_base_swa` but its mellum graph rotates every layer at `rope.freq_base`; the import
/// builds the model the file describes, not that departure. A RoPE scaling (the full layers'
/// in llama.cpp's graph) is refused, as for any file without a scaling reading.
fn mellum_config(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let (experts, used) = expert_counts(uint, key, err)?;
    let layers = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0);
    let n_ff = c.get("intermediate_size").and_then(Json::as_u64).unwrap_or(0);
    let routed = |i: u64| file.tensors.iter().any(|t| t.name == format!("blk.{i}.ffn_gate_inp.weight"));
    c.insert("num_local_experts".into(), json!(experts));
    c.insert("num_experts_per_tok".into(), json!(used));
    c.insert("moe_intermediate_size".into(), json!(uint("expert_feed_forward_length")?.unwrap_or(n_ff / used)));
    c.insert("norm_topk_prob".into(), json!(true));
    c.insert("mlp_layer_types".into(), json!((0..layers).map(|i| if routed(i) { "sparse" } else { "dense" }).collect::<Vec<_>>()));
    match uint("attention.sliding_window")?.filter(|&w| w > 0) {
        Some(window) => {
            c.insert("sliding_window".into(), json!(window));
            let sliding = sliding_layers(c, file, 4, key, err)?;
            c.insert("layer_types".into(), json!(layer_types(&sliding)));
        }
        None => {
            if file.get(&key("attention.sliding_window_pattern")).is_some() {
                return Err(err(format!("metadata key `{}` is set without `{}`", key("attention.sliding_window_pattern"), key("attention.sliding_window"))));
            }
            c.insert("layer_types".into(), json!(vec!["full_attention"; layers as usize]));
        }
    }
    let theta = float("rope.freq_base")?.unwrap_or(10000.0);
    let local = float("rope.freq_base_swa")?.unwrap_or(theta);
    c.remove("rope_theta");
    c.insert(
        "rope_parameters".into(),
        json!({"full_attention": {"rope_type": "default", "rope_theta": theta}, "sliding_attention": {"rope_type": "default", "rope_theta": local}}),
    );
    Ok(())
}

/// MiniCPM3's keys (llama.cpp's `MiniCPM3Model` writes its own: the sizes, the RMS epsilon,
/// `vocab_size`, `attention.q_lora_rank`, `attention.kv_lora_rank`, `attention.key_length`
/// (nope + rope), `rope.dimension_count` (the rope part); no rope base, no value length: 10000
/// and hidden / heads, llama.cpp's defaults and MiniCPM3Config's) as `MiniCPM3Config` spells them.
/// The scalings are not in the file: llama.cpp's graph fixes `scale_emb` 12, `scale_depth` 1.4
/// and `dim_model_base` 256 (MiniCPM3-4B's values, and MiniCPM3Config's defaults, which the
/// family then reads). LongRoPE's factor tensors (`rope_factors_long` / `_short`, written when
/// the config has them) with no original length stated: llama.cpp's original is the training
/// context, so within it the short factors apply and no attention factor (its LongRoPE factor
/// is 1); read as `longrope` with `original_max_position_embeddings` the context length.
#[allow(clippy::too_many_arguments)]
fn minicpm3_config(c: &mut Map<String, Json>, path: &Path, file: &GgufFile, rotary: u64, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let need = |k: &str| -> Result<u64> { uint(k)?.ok_or_else(|| err(format!("metadata key `{}` is missing (a minicpm3 file states its latent attention)", key(k)))) };
    let (q_rank, kv_rank, key_len) = (need("attention.q_lora_rank")?, need("attention.kv_lora_rank")?, need("attention.key_length")?);
    if key_len <= rotary || q_rank == 0 || kv_rank == 0 {
        return Err(err(format!(
            "metadata keys `{}` {q_rank}, `{}` {kv_rank} and `{}` {key_len} with `{}` {rotary}: the ranks must be positive and the key size larger than its rotary part",
            key("attention.q_lora_rank"),
            key("attention.kv_lora_rank"),
            key("attention.key_length"),
            key("rope.dimension_count")
        )));
    }
    c.remove("head_dim");
    c.insert("q_lora_rank".into(), json!(q_rank));
    c.insert("kv_lora_rank".into(), json!(kv_rank));
    c.insert("qk_nope_head_dim".into(), json!(key_len - rotary));
    c.insert("qk_rope_head_dim".into(), json!(rotary));
    if let Some(v) = uint("attention.value_length")? {
        c.insert("v_head_dim".into(), json!(v));
    }
    let pair = rotary as usize / 2;
    match (factor_tensor(path, file, ROPE_LONG, pair)?, factor_tensor(path, file, ROPE_SHORT, pair)?) {
        (Some(long), Some(short)) => {
            let original = c.get("max_position_embeddings").cloned().ok_or_else(|| err(format!("holds LongRoPE factors but no `{}`, which llama.cpp takes as their original length", key("context_length"))))?;
            c.insert("rope_scaling".into(), json!({"rope_type": "longrope", "long_factor": long, "short_factor": short, "original_max_position_embeddings": original}));
        }
        (None, None) => {}
        _ => return Err(err(format!("holds one of `{ROPE_LONG}` / `{ROPE_SHORT}` without the other: LongRoPE has both"))),
    }
    Ok(())
}

/// Hy3's keys (llama.cpp's `HYV3Model` writes TextModel's and the mixture's) as `HYV3Config`
/// spells them: the blocks less the appended prediction layers ([`decoder_depth`]),
/// `num_experts` / `num_experts_per_tok`, the experts' width `expert_feed_forward_length`, the
/// shared MLP `num_shared_experts` experts wide (`expert_shared_feed_forward_length` / the expert
/// width, which must divide), sigmoid scores (`expert_gating_func` 2, or absent as llama.cpp's
/// loader reads it; softmax refused), renormalized (`expert_weights_norm`; false refused: the
/// family always renormalizes, as transformers' Hy3 does), scaled by `expert_weights_scale`
/// (`router_scaling_factor`, required: the converter always writes it), the correction bias in
/// every sparse layer, dense layers where no router is (`mlp_layer_types`). A scale of 0 is no
/// scaling, as in llama.cpp's graph.
fn hy_v3_config(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let layers = decoder_depth(c, file, uint, key, err)?;
    let (experts, used) = expert_counts(uint, key, err)?;
    let n_ff = c.get("intermediate_size").and_then(Json::as_u64).unwrap_or(0);
    let width = uint("expert_feed_forward_length")?.unwrap_or(n_ff / used);
    if width == 0 {
        return Err(err(format!("metadata key `{}` is missing or 0 and `{}` / `{}` is 0: the experts have no width", key("expert_feed_forward_length"), key("feed_forward_length"), key("expert_used_count"))));
    }
    let shared = uint("expert_shared_feed_forward_length")?.unwrap_or(width);
    if shared % width != 0 {
        return Err(err(format!("metadata key `{}` is {shared}: Hy3's shared MLP is a whole number of experts of `{}` {width}", key("expert_shared_feed_forward_length"), key("expert_feed_forward_length"))));
    }
    if uint("expert_gating_func")?.is_some_and(|g| g != 2) {
        return Err(err(format!("metadata key `{}` is not sigmoid (2): Hy3's experts are routed by sigmoid scores", key("expert_gating_func"))));
    }
    // llama.cpp reads an absent `expert_weights_norm` as false (no renormalization), which is
    // not Hy3; the converter always writes it.
    if file.get(&key("expert_weights_norm")).and_then(Value::as_bool) != Some(true) {
        return Err(err(format!("metadata key `{}` is false or missing: Hy3 renormalizes the chosen experts' weights (the converter writes true)", key("expert_weights_norm"))));
    }
    // 0 is no scaling in llama.cpp's `build_moe_ffn`, as 1.
    let scale = float("expert_weights_scale")?.ok_or_else(|| err(format!("metadata key `{}` is missing (the converter writes the config's `router_scaling_factor`)", key("expert_weights_scale"))))?;
    let scale = if scale == 0.0 { 1.0 } else { scale };
    let routed = |i: u64| file.tensors.iter().any(|t| t.name == format!("blk.{i}.ffn_gate_inp.weight"));
    let types: Vec<&str> = (0..layers).map(|i| if routed(i) { "sparse" } else { "dense" }).collect();
    if let Some(i) = (0..layers).find(|&i| routed(i) && !file.tensors.iter().any(|t| t.name == format!("blk.{i}.exp_probs_b.bias"))) {
        return Err(err(format!("layer {i} has no `blk.{i}.exp_probs_b.bias`: Hy3's sigmoid routing chooses experts with that correction bias")));
    }
    c.insert("num_experts".into(), json!(experts));
    c.insert("num_experts_per_tok".into(), json!(used));
    c.insert("moe_intermediate_size".into(), json!(width));
    c.insert("num_shared_experts".into(), json!(shared / width));
    c.insert("router_scaling_factor".into(), json!(scale as f32 as f64));
    c.insert("mlp_layer_types".into(), json!(types));
    c.insert("mlp_bias".into(), json!(false));
    Ok(())
}

/// GraniteSWA's keys (llama.cpp's `GraniteSWAModel` writes Granite's, the window and one bool
/// per layer in `attention.sliding_window_pattern`, and the converter's `attention.rope_pattern`
/// from the config's `no_rope_layers`, one bool per layer, false: no RoPE) as `GraniteSWAConfig`
/// spells them: `layer_types`, `sliding_window`, `layer_rope_theta` (the file's one base where
/// the layer rotates, 0 where not; no pattern: every layer rotates). With `expert_count` it is
/// GraniteMoeSWA (`GraniteMoeSWAModel` writes the same architecture): every layer routes over
/// `num_local_experts` of `feed_forward_length`, top `expert_used_count`, beside the shared MLP of
/// `expert_shared_feed_forward_length` (0 or absent: none). llama.cpp's loader requires the
/// window and its pattern; so does the import.
fn granite_swa_config(c: &mut Map<String, Json>, file: &GgufFile, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let layers = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0) as usize;
    let window = uint("attention.sliding_window")?.filter(|&w| w > 0).ok_or_else(|| err(format!("metadata key `{}` is missing or 0 (llama.cpp's granite_swa loader requires it)", key("attention.sliding_window"))))?;
    if !matches!(file.get(&key("attention.sliding_window_pattern")), Some(Value::Array(_))) {
        return Err(err(format!("metadata key `{}` is missing or not a list (llama.cpp's granite_swa loader requires one bool per layer)", key("attention.sliding_window_pattern"))));
    }
    let sliding = sliding_layers(c, file, 4, key, err)?;
    let pattern = key("attention.rope_pattern");
    let rotates: Vec<bool> = match file.get(&pattern) {
        None => vec![true; layers],
        Some(Value::Array(flags)) => match flags.iter().map(Value::as_bool).collect::<Option<Vec<bool>>>() {
            Some(f) if f.len() == layers => f,
            _ => return Err(err(format!("metadata key `{pattern}` must hold one bool per layer ({layers}): true where the layer rotates"))),
        },
        Some(v) => return Err(err(format!("metadata key `{pattern}` is {v:?}: one bool per layer ({layers}), true where the layer rotates"))),
    };
    let theta = c.get("rope_theta").and_then(Json::as_f64).unwrap_or(10000.0);
    c.insert("sliding_window".into(), json!(window));
    c.insert("layer_types".into(), json!(layer_types(&sliding)));
    c.insert("layer_rope_theta".into(), json!(rotates.iter().map(|&r| if r { theta } else { 0.0 }).collect::<Vec<_>>()));
    let experts = uint("expert_count")?.unwrap_or(0);
    if experts == 0 {
        if let Some(t) = file.tensors.iter().find(|t| t.name.contains("_exps.") || t.name.ends_with(".ffn_gate_inp.weight") || t.name.contains("_shexp.")) {
            return Err(err(format!("holds `{}` but `{}` is missing or 0: a GraniteMoeSWA file states its experts", t.name, key("expert_count"))));
        }
        return Ok(());
    }
    let (experts, used) = expert_counts(uint, key, err)?;
    every_layer_routes(c, file, "every GraniteMoeSWA layer routes over experts (llama.cpp's loader)", err)?;
    c.insert("model_type".into(), json!("granitemoe_swa"));
    c.insert("num_local_experts".into(), json!(experts));
    c.insert("num_experts_per_tok".into(), json!(used));
    let shared = uint("expert_shared_feed_forward_length")?.unwrap_or(0);
    c.insert("shared_intermediate_size".into(), json!(shared));
    if shared == 0 {
        if let Some(t) = file.tensors.iter().find(|t| t.name.contains("_shexp.")) {
            return Err(err(format!("holds `{}` but `{}` is missing or 0: the shared MLP's width is stated with it", t.name, key("expert_shared_feed_forward_length"))));
        }
    }
    Ok(())
}

/// Every decoder layer holds a router (`blk.N.ffn_gate_inp.weight`); else the first that has
/// none is named, with `why` (the family's rule).
fn every_layer_routes(c: &Map<String, Json>, file: &GgufFile, why: &str, err: &dyn Fn(String) -> Error) -> Result<()> {
    let layers = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0);
    match (0..layers).find(|i| !file.tensors.iter().any(|t| t.name == format!("blk.{i}.ffn_gate_inp.weight"))) {
        Some(i) => Err(err(format!("layer {i} has no `blk.{i}.ffn_gate_inp.weight`: {why}"))),
        None => Ok(()),
    }
}

/// `expert_count` and `expert_used_count`, both required: each token routed to between 1 and
/// all of the experts.
fn expert_counts(uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<(u64, u64)> {
    let need = |k: &str| -> Result<u64> { uint(k)?.ok_or_else(|| err(format!("metadata key `{}` is missing (a file with experts states how many it routes over)", key(k)))) };
    let (experts, used) = (need("expert_count")?, need("expert_used_count")?);
    if experts == 0 || used == 0 || used > experts {
        return Err(err(format!("metadata keys `{}` {experts} and `{}` {used}: each token is routed to between 1 and all of the experts", key("expert_count"), key("expert_used_count"))));
    }
    Ok((experts, used))
}

/// What [`grouped_experts`] read that decides the family's routing.
struct GroupedExperts {
    /// `expert_gating_func` 2: sigmoid scores (else softmax: 1, or absent, llama.cpp's reading
    /// of files older than the key).
    sigmoid: bool,
    /// `expert_weights_norm`: the chosen weights renormalized.
    norm: bool,
    groups: u64,
    /// `leading_dense_block_count`: the dense layers before the first sparse one.
    dense: u64,
}

/// The keys of DeepSeek-style experts (deepseek2, glm4moe) under the config names
/// `DeepseekV3Config` and `Glm4MoeConfig` share: `expert_count` (`n_routed_experts`),
/// `expert_used_count`, `expert_feed_forward_length`, `expert_shared_count`,
/// `leading_dense_block_count` (`first_k_dense_replace`), `expert_group_count` /
/// `expert_group_used_count` (`n_group` / `topk_group`, default 1 / all), `expert_weights_scale`
/// (`routed_scaling_factor`; 0 or absent: 1, as llama.cpp scales nothing then).
fn grouped_experts(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<GroupedExperts> {
    let need = |k: &str| -> Result<u64> { uint(k)?.ok_or_else(|| err(format!("metadata key `{}` is missing (a file of DeepSeek-style experts states them)", key(k)))) };
    let layers = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0);
    let (experts, used) = expert_counts(uint, key, err)?;
    let dense = uint("leading_dense_block_count")?.unwrap_or(0);
    if dense > layers {
        return Err(err(format!("metadata key `{}` is {dense}, more than the {layers} layers", key("leading_dense_block_count"))));
    }
    let groups = uint("expert_group_count")?.unwrap_or(1).max(1);
    let open = uint("expert_group_used_count")?.unwrap_or(groups);
    let scale = float("expert_weights_scale")?.filter(|s| *s != 0.0).unwrap_or(1.0);
    let norm = match file.get(&key("expert_weights_norm")) {
        None => false,
        Some(v) => v.as_bool().ok_or_else(|| err(format!("metadata key `{}` is {v:?}, not true or false", key("expert_weights_norm"))))?,
    };
    let sigmoid = match uint("expert_gating_func")? {
        None | Some(1) => false,
        Some(2) => true,
        Some(g) => return Err(err(format!("metadata key `{}` is {g}: these experts are routed by softmax (1) or sigmoid (2)", key("expert_gating_func")))),
    };
    c.insert("n_routed_experts".into(), json!(experts));
    c.insert("num_experts_per_tok".into(), json!(used));
    c.insert("moe_intermediate_size".into(), json!(need("expert_feed_forward_length")?));
    c.insert("n_shared_experts".into(), json!(uint("expert_shared_count")?.unwrap_or(0)));
    c.insert("first_k_dense_replace".into(), json!(dense));
    c.insert("n_group".into(), json!(groups));
    c.insert("topk_group".into(), json!(open));
    c.insert("routed_scaling_factor".into(), json!(scale));
    Ok(GroupedExperts { sigmoid, norm, groups, dense })
}

/// Every sparse layer (`dense..layers`) holds the correction bias `exp_probs_b.bias` that
/// `family`'s sigmoid routing chooses experts with.
fn corrected_layers(file: &GgufFile, dense: u64, layers: u64, family: &str, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    match (dense..layers).find(|i| !file.tensors.iter().any(|t| t.name == format!("blk.{i}.exp_probs_b.bias"))) {
        Some(i) => Err(err(format!("layer {i} has no `blk.{i}.exp_probs_b.bias`: sigmoid routing (`{}` 2) is {family}, which chooses experts with that correction bias", key("expert_gating_func")))),
        None => Ok(()),
    }
}

/// GLM-4.5's keys (llama.cpp's `Glm4MoeModel` writes them) as `Glm4MoeConfig` spells them:
/// the blocks less the `nextn_predict_layers` prediction layers the converter appends (their
/// tensors are not read), the experts as [`grouped_experts`] reads them with sigmoid scores and
/// the correction bias required (the converter always writes `expert_gating_func` 2; a file
/// without it is read as sigmoid, as llama.cpp does),
/// `expert_weights_norm` as `norm_topk_prob`, q/k norms where every layer has them
/// (`use_qk_norm`).
fn glm4moe_config(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let layers = decoder_depth(c, file, uint, key, err)?;
    c.insert("num_nextn_predict_layers".into(), json!(0));
    let stated = uint("expert_gating_func")?.is_some();
    let g = grouped_experts(c, file, float, uint, key, err)?;
    // llama.cpp's glm4moe loader reads a file without the key as sigmoid.
    if stated && !g.sigmoid {
        return Err(err(format!("metadata key `{}` is softmax (1): GLM-4.5's experts are routed by sigmoid scores (2), as its converter writes", key("expert_gating_func"))));
    }
    corrected_layers(file, g.dense, layers, "GLM-4.5's", key, err)?;
    c.insert("norm_topk_prob".into(), json!(g.norm));
    c.insert("use_qk_norm".into(), json!(qk_norms_in_every_layer(file, c, err)?));
    if !c.contains_key("intermediate_size") {
        // No `feed_forward_length` (Solar Open's files: every layer sparse): no dense layer may
        // need it; the experts' width stands in for the key no layer reads.
        if g.dense > 0 {
            return Err(err(format!("metadata key `{}` is missing, but `{}` {} makes dense layers, which need it", key("feed_forward_length"), key("leading_dense_block_count"), g.dense)));
        }
        let width = c.get("moe_intermediate_size").cloned().unwrap_or(Json::Null);
        c.insert("intermediate_size".into(), width);
    }
    Ok(())
}

/// AFMoE's keys (llama.cpp's `AfmoeModel`, a LlamaModel, writes them; its `LLM_ARCH_AFMOE`
/// loader) as `AfmoeConfig` spells them: the experts as [`grouped_experts`] reads them under
/// `num_experts` / `num_shared_experts` / `num_dense_layers` / `route_scale`, sigmoid scores with
/// the correction bias in every sparse layer (`expert_gating_func` 2 or absent, llama.cpp's
/// default for afmoe; softmax refused), always renormalized (transformers' router always is: a
/// file saying `expert_weights_norm` false is refused), the window and its layers (one bool per
/// layer or a period, default 4: llama.cpp's), `rope.freq_base_swa` equal to the base (one base
/// in the config), and `mup_enabled` (llama.cpp's graph always scales the embeddings by
/// sqrt(hidden)). A file without a window is refused: llama.cpp then still rotates three of
/// every four layers, where transformers' AFMoE ties RoPE to the sliding layers.
fn afmoe_config(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let g = windowed_sigmoid_experts(
        c,
        file,
        float,
        uint,
        key,
        err,
        "AFMoE's",
        "Trinity's layers slide, and without a window llama.cpp's afmoe graph still rotates three of every four layers, which no AFMoE config states",
    )?;
    if file.get(&key("expert_weights_norm")).is_some() && !g.norm {
        return Err(err(format!("metadata key `{}` is false: transformers' AFMoE router always renormalizes the chosen scores", key("expert_weights_norm"))));
    }
    // Trinity's configs state one group (`n_group` / `topk_group` 1, which the converter writes);
    // transformers' AFMoE router has no groups.
    if g.groups > 1 {
        return Err(err(format!("metadata key `{}` is {}: AFMoE's router has no expert groups", key("expert_group_count"), g.groups)));
    }
    for (from, to) in [("first_k_dense_replace", "num_dense_layers"), ("routed_scaling_factor", "route_scale")] {
        if let Some(v) = c.remove(from) {
            c.insert(to.into(), v);
        }
    }
    for k in ["n_group", "topk_group"] {
        c.remove(k);
    }
    c.insert("mup_enabled".into(), json!(true));
    Ok(())
}

/// What K-EXAONE's and AFMoE's files share: the window (required; `why` says why) and its layers
/// (EXAONE 4's reading: one bool per layer, or a period, default 4, as llama.cpp's), one RoPE
/// base (`rope.freq_base_swa`, where given, equal to `rope.freq_base`), the experts as
/// [`grouped_experts`] reads them with sigmoid scores (`expert_gating_func` 2, or absent;
/// softmax refused) and the correction bias in every sparse layer, a router in exactly the
/// layers after the dense lead; the counts renamed `num_experts` / `num_shared_experts`.
#[allow(clippy::too_many_arguments)]
fn windowed_sigmoid_experts(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error, family: &str, why: &str) -> Result<GroupedExperts> {
    let layers = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0);
    if uint("attention.sliding_window")?.is_none_or(|w| w == 0) {
        return Err(err(format!("metadata key `{}` is missing or 0: {why}", key("attention.sliding_window"))));
    }
    exaone4_config(c, file, uint, key, err)?;
    let theta = float("rope.freq_base")?.unwrap_or(10000.0);
    if let Some(swa) = float("rope.freq_base_swa")?.filter(|b| *b != theta) {
        return Err(err(format!("metadata key `{}` is {swa}, not `{}` {theta}: {family} config has one RoPE base", key("rope.freq_base_swa"), key("rope.freq_base"))));
    }
    let stated = uint("expert_gating_func")?.is_some();
    let g = grouped_experts(c, file, float, uint, key, err)?;
    if stated && !g.sigmoid {
        return Err(err(format!("metadata key `{}` is softmax (1): {family} experts are routed by sigmoid scores (2)", key("expert_gating_func"))));
    }
    let routed = |i: u64| file.tensors.iter().any(|t| t.name == format!("blk.{i}.ffn_gate_inp.weight"));
    if let Some(i) = (0..layers).find(|&i| routed(i) != (i >= g.dense)) {
        return Err(err(format!(
            "layer {i} {} `blk.{i}.ffn_gate_inp.weight`, but `{}` {} makes it {}",
            if routed(i) { "holds" } else { "has no" },
            key("leading_dense_block_count"),
            g.dense,
            if i >= g.dense { "sparse" } else { "dense" }
        )));
    }
    corrected_layers(file, g.dense, layers, family, key, err)?;
    for (from, to) in [("n_routed_experts", "num_experts"), ("n_shared_experts", "num_shared_experts")] {
        if let Some(v) = c.remove(from) {
            c.insert(to.into(), v);
        }
    }
    Ok(g)
}

/// MiniMax-M2's keys (llama.cpp's `MiniMaxM2Model` writes TextModel's with the experts' width
/// `expert_feed_forward_length` and the rotated dimensions `rope.dimension_count`; its
/// `LLM_ARCH_MINIMAX_M2` loader) as `MiniMaxM2Config` spells them: every layer routes over
/// `expert_count` experts of that width (`intermediate_size`) with a correction bias (required,
/// as llama.cpp's loader requires it), sigmoid scores (`expert_gating_func` 2, or absent; softmax
/// is refused: transformers' router is sigmoid), the chosen scores renormalized (the graph's
/// `norm_w` true), and `partial_rotary_factor` = the rotated dimensions / head size.
fn minimax_m2_config(c: &mut Map<String, Json>, file: &GgufFile, rotary: u64, head_dim: u64, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let (experts, used) = expert_counts(uint, key, err)?;
    if uint("expert_gating_func")?.is_some_and(|g| g != 2) {
        return Err(err(format!("metadata key `{}` is not sigmoid (2): MiniMax-M2's experts are routed by sigmoid scores", key("expert_gating_func"))));
    }
    let width = uint("expert_feed_forward_length")?.ok_or_else(|| err(format!("metadata key `{}` is missing (the converter writes the experts' width there)", key("expert_feed_forward_length"))))?;
    let layers = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0);
    every_layer_routes(c, file, "every MiniMax-M2 layer routes over experts", err)?;
    corrected_layers(file, 0, layers, "MiniMax-M2's", key, err)?;
    c.insert("intermediate_size".into(), json!(width));
    c.insert("num_local_experts".into(), json!(experts));
    c.insert("num_experts_per_tok".into(), json!(used));
    c.insert("partial_rotary_factor".into(), json!(rotary as f64 / head_dim as f64));
    Ok(())
}

/// The decoder's depth of a file whose converter appends `nextn_predict_layers` multi-token
/// prediction layers to the blocks (glm4moe, exaone-moe, GLM-4.7-Flash's deepseek2):
/// `block_count` less them; their tensors
/// are not read ([`prediction_layer`]); a file of the prediction layers alone is refused.
fn decoder_depth(c: &mut Map<String, Json>, file: &GgufFile, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<u64> {
    let blocks = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0);
    let extra = uint("nextn_predict_layers")?.unwrap_or(0);
    if extra >= blocks {
        return Err(err(format!("metadata key `{}` is {extra}, not fewer than the {blocks} blocks of `{}`", key("nextn_predict_layers"), key("block_count"))));
    }
    if !file.tensors.iter().any(|t| t.name.starts_with("blk.0.")) {
        return Err(err(format!("holds no tensor of the decoder's first layer `blk.0`: a file of the {extra} prediction layer(s) alone (the converter's --mtp) is a draft head, not a model")));
    }
    c.insert("num_hidden_layers".into(), json!(blocks - extra));
    Ok(blocks - extra)
}

/// K-EXAONE's keys (llama.cpp's `ExaoneMoEModel` writes them; its `LLM_ARCH_EXAONE_MOE` loader)
/// as `ExaoneMoeConfig` spells them: the decoder less the prediction layers
/// ([`decoder_depth`]), the window (required, as llama.cpp's loader requires it) and the
/// sliding layers (EXAONE 4's reading, [`exaone4_config`]: one bool per layer, or a period,
/// default 4; a window of 0 is refused: K-EXAONE slides), one RoPE base (`rope.freq_base_swa`, which llama.cpp reads for the sliding
/// layers, must equal `rope.freq_base`: the config has one), the experts as [`grouped_experts`]
/// reads them under `num_experts` / `num_shared_experts`, routed by sigmoid scores with the
/// correction bias (`expert_gating_func` 2, which llama.cpp's loader requires; absent is read
/// as 2; softmax is refused: transformers' router is sigmoid), the shared width `expert_shared_feed_forward_length` = the expert width times
/// the shared count (the converter's product; the family computes it so), and the layers
/// holding a router exactly those after the dense lead.
fn exaone_moe_config(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    decoder_depth(c, file, uint, key, err)?;
    let g = windowed_sigmoid_experts(c, file, float, uint, key, err, "K-EXAONE's", "llama.cpp's exaone-moe loader requires it: K-EXAONE slides most layers")?;
    let get = |k: &str| c.get(k).and_then(Json::as_u64).unwrap_or(0);
    let (width, shared) = (get("moe_intermediate_size"), get("num_shared_experts"));
    if let Some(w) = uint("expert_shared_feed_forward_length")?.filter(|&w| w != width * shared) {
        return Err(err(format!("metadata key `{}` is {w}; K-EXAONE's shared experts are `{}` {shared} experts of {width}", key("expert_shared_feed_forward_length"), key("expert_shared_count"))));
    }
    c.insert("norm_topk_prob".into(), json!(g.norm));
    c.insert("num_nextn_predict_layers".into(), json!(0));
    Ok(())
}

/// dots.llm1's keys (llama.cpp's `Dots1Model` writes them) as `Dots1Config` spells them: the
/// experts as [`grouped_experts`] reads them, routed by sigmoid scores with the correction bias
/// (transformers' Dots1 router always is: `expert_gating_func` 2, or absent, which llama.cpp's
/// dots1 loader tolerates; softmax is refused), `expert_weights_norm` as `norm_topk_prob`, and
/// no sliding windows (the converter writes none and llama.cpp's dots1 graph has none; the
/// released model's `max_window_layers` is its depth, so none of its layers slides either).
fn dots1_config(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let layers = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0);
    let stated = uint("expert_gating_func")?.is_some();
    let g = grouped_experts(c, file, float, uint, key, err)?;
    if stated && !g.sigmoid {
        return Err(err(format!("metadata key `{}` is softmax (1): dots.llm1's experts are routed by sigmoid scores (2)", key("expert_gating_func"))));
    }
    corrected_layers(file, g.dense, layers, "dots.llm1's", key, err)?;
    c.insert("norm_topk_prob".into(), json!(g.norm));
    c.insert("sliding_window".into(), Json::Null);
    c.insert("max_window_layers".into(), json!(layers));
    Ok(())
}

/// Hunyuan-A13B's keys (llama.cpp's `HunYuanMoEModel` writes them) as `HunYuanMoEV1Config`
/// spells them: `expert_count` (`num_experts`), `expert_used_count` (`moe_topk`),
/// `expert_shared_count` (`num_shared_expert`). transformers' model makes the routed experts
/// and the shared MLP both `intermediate_size` wide (it reads neither `moe_intermediate_size`
/// nor the shared count), so the file's `expert_feed_forward_length` and
/// `expert_shared_feed_forward_length` must be equal (as in the released model); every layer
/// routes. The converter's 256k `context_length` is kept.
fn hunyuan_moe_config(c: &mut Map<String, Json>, file: &GgufFile, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let need = |k: &str| -> Result<u64> { uint(k)?.ok_or_else(|| err(format!("metadata key `{}` is missing (a hunyuan-moe file states its experts)", key(k)))) };
    let (experts, used) = expert_counts(uint, key, err)?;
    let routed = need("expert_feed_forward_length")?;
    let shared = uint("expert_shared_feed_forward_length")?.unwrap_or(routed);
    // llama.cpp's loader sizes the routed experts by `feed_forward_length`.
    let dense = c.get("intermediate_size").and_then(Json::as_u64).unwrap_or(routed);
    if routed != shared || routed != dense {
        return Err(err(format!(
            "metadata keys `{}` {routed}, `{}` {shared} and `{}` {dense} differ: transformers' Hunyuan MoE makes its experts and shared MLP one `intermediate_size` wide",
            key("expert_feed_forward_length"),
            key("expert_shared_feed_forward_length"),
            key("feed_forward_length")
        )));
    }
    every_layer_routes(c, file, "every Hunyuan MoE layer routes over experts", err)?;
    c.insert("num_experts".into(), json!(experts));
    c.insert("moe_topk".into(), json!(used));
    c.insert("intermediate_size".into(), json!(routed));
    c.insert("num_shared_expert".into(), json!(uint("expert_shared_count")?.unwrap_or(1)));
    Ok(())
}

/// ERNIE 4.5 MoE's keys (llama.cpp's `Ernie4_5MoeModel` writes them) as `Ernie4_5_MoeConfig`
/// spells them: `expert_count` (`moe_num_experts`), `expert_used_count` (`moe_k`),
/// `expert_feed_forward_length` (`moe_intermediate_size`), `expert_shared_count`
/// (`moe_num_shared_experts`, default 0), and the sparse layers, which llama.cpp's graph picks
/// as layer `i` at least `leading_dense_block_count` (`moe_layer_start_index`, default 0) with
/// `(i + 1) % interleave_moe_layer_step == 0` (`moe_layer_interval`), to the last layer
/// (`moe_layer_end_index`); the layers holding a router must be exactly those. Routing is the
/// family's (softmax, the correction bias for the choice, renormalized).
fn ernie_moe_config(c: &mut Map<String, Json>, file: &GgufFile, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let need = |k: &str| -> Result<u64> { uint(k)?.ok_or_else(|| err(format!("metadata key `{}` is missing (an ernie4_5-moe file states its experts)", key(k)))) };
    let layers = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0);
    let (experts, used) = expert_counts(uint, key, err)?;
    let step = need("interleave_moe_layer_step")?;
    if step == 0 {
        return Err(err(format!("metadata key `{}` is 0: llama.cpp's ernie4_5-moe graph needs a positive step", key("interleave_moe_layer_step"))));
    }
    let start = uint("leading_dense_block_count")?.unwrap_or(0);
    let routed = |i: u64| file.tensors.iter().any(|t| t.name == format!("blk.{i}.ffn_gate_inp.weight"));
    if let Some(i) = (0..layers).find(|&i| routed(i) != (i >= start && (i + 1) % step == 0)) {
        return Err(err(format!(
            "layer {i} {} `blk.{i}.ffn_gate_inp.weight`, but `{}` {start} and `{}` {step} make it {}",
            if routed(i) { "holds" } else { "has no" },
            key("leading_dense_block_count"),
            key("interleave_moe_layer_step"),
            if routed(i) { "dense" } else { "sparse" }
        )));
    }
    c.insert("moe_num_experts".into(), json!(experts));
    c.insert("moe_k".into(), json!(used));
    c.insert("moe_intermediate_size".into(), json!(need("expert_feed_forward_length")?));
    c.insert("moe_num_shared_experts".into(), json!(uint("expert_shared_count")?.unwrap_or(0)));
    c.insert("moe_layer_start_index".into(), json!(start));
    c.insert("moe_layer_interval".into(), json!(step));
    c.insert("moe_layer_end_index".into(), json!(layers.saturating_sub(1)));
    Ok(())
}

/// Whether tensor `name` belongs to one of the prediction layers glm4moe, exaone-moe, hy_v3 and
/// deepseek2 (GLM-4.7-Flash's) files append after the decoder's `layers` (`blk.N.` with N at
/// least `layers`): not read.
fn prediction_layer(name: &str, a: &Arch, layers: usize) -> bool {
    matches!(a.kind, Kind::Glm4Moe | Kind::ExaoneMoe | Kind::Deepseek2 | Kind::Mistral4 | Kind::HyV3) && name.strip_prefix("blk.").and_then(|r| r.split_once('.')).and_then(|(n, _)| n.parse::<usize>().ok()).is_some_and(|n| n >= layers)
}

/// DeepSeek-V2 / V3's keys (llama.cpp's `DeepseekV2Model` writes them) as `DeepseekV3Config`
/// and `DeepseekV2Config` spell them. The latent sizes: `attention.kv_lora_rank`,
/// `attention.q_lora_rank` (absent: no query compression), `attention.key_length_mla` (nope +
/// rope) and `attention.value_length_mla`, with which the file's `key_length` / `value_length`
/// (the latent as MQA) must agree; files converted before llama.cpp's MLA change (April 2025)
/// have no `*_mla` keys, their `key_length` / `value_length` being the heads' own, and hold a
/// whole `attn_kv_b`. The routing decides the model: `expert_gating_func` 2
/// (sigmoid) is V3's (its `exp_probs_b` correction bias, groups scored by their best two,
/// `expert_weights_norm` as `norm_topk_prob`; also when the key is absent but the layers hold
/// that bias: GLM-4.7-Flash's files), 1 or absent (softmax: llama.cpp's reading of DeepSeek-V2
/// files older than the key) V2's (`group_limited_greedy` over `expert_group_count` groups when
/// there are several, a group scored by its best expert as DeepSeek-V2's own router does;
/// llama.cpp scores it by its best two). V2's router never renormalizes, so a softmax file with
/// `expert_weights_norm` true is refused. YaRN as the other families read it, with
/// `mscale` = `mscale_all_dim` = `rope.scaling.yarn_log_multiplier` / 0.1 (the converter writes
/// 0.1 x `mscale_all_dim`, and llama.cpp's graph assumes the two equal, as DeepSeek's configs
/// have them). A file without `expert_count` is Youtu-LLM's ([`dense_latent_keys`]). GLM-4.7-Flash's
/// converter (`Glm4MoeLiteModel`, a DeepseekV2Model) appends `nextn_predict_layers` prediction
/// layers to the blocks: left unread ([`decoder_depth`]).
fn deepseek2_config(c: &mut Map<String, Json>, kind: Kind, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    // GLM-4.7-Flash's converter (a DeepseekV2Model) appends its prediction layers by default.
    decoder_depth(c, file, uint, key, err)?;
    let need = |k: &str| -> Result<u64> { uint(k)?.ok_or_else(|| err(format!("metadata key `{}` is missing (a deepseek2 file states its latent attention and experts)", key(k)))) };
    let get = |k: &str| c.get(k).and_then(Json::as_u64).unwrap_or(0);
    let (heads, rope) = (get("num_attention_heads"), get("head_dim"));
    let rank = need("attention.kv_lora_rank")?;
    let split = file.tensors.iter().any(|t| LATENT_HALVES.iter().any(|h| t.name.ends_with(&format!(".{h}"))));
    // The head sizes: `*_mla` keys beside the latent-as-MQA lengths (llama.cpp's converter since
    // its MLA change, April 2025), or, in files converted before it, the heads' own key and
    // value lengths (and a whole `attn_kv_b`).
    let (key_k, value_k) = match (uint("attention.key_length_mla")?, uint("attention.value_length_mla")?) {
        (Some(_), Some(_)) => {
            for (k, want) in [("attention.key_length", rank + rope), ("attention.value_length", rank)] {
                if let Some(got) = uint(k)?.filter(|&got| got != want) {
                    return Err(err(format!("metadata key `{}` is {got}; the latent attention's `kv_lora_rank` {rank} and rotary size {rope} make it {want}", key(k))));
                }
            }
            ("attention.key_length_mla", "attention.value_length_mla")
        }
        (None, None) if !split => ("attention.key_length", "attention.value_length"),
        (None, None) => {
            return Err(err(format!(
                "holds `attn_k_b` / `attn_v_b` (the split llama.cpp's converter writes since its MLA change) but not `{}` / `{}`, which that converter writes beside them",
                key("attention.key_length_mla"),
                key("attention.value_length_mla")
            )))
        }
        (k, _) => {
            let (has, lacks) = if k.is_some() { ("key_length_mla", "value_length_mla") } else { ("value_length_mla", "key_length_mla") };
            return Err(err(format!("metadata key `{}` is set but `{}` is missing: the converter writes both", key(&format!("attention.{has}")), key(&format!("attention.{lacks}")))));
        }
    };
    let key_mla = need(key_k)?;
    let v = need(value_k)?;
    if rank == 0 || v == 0 || key_mla <= rope {
        return Err(err(format!(
            "metadata keys `{}` {rank}, `{}` {key_mla} and `{}` {v} with `{}` {rope}: the latent rank and value size must be positive and the key size larger than its rotary part",
            key("attention.kv_lora_rank"),
            key(key_k),
            key(value_k),
            key("rope.dimension_count")
        )));
    }
    let q_rank = uint("attention.q_lora_rank")?.filter(|&r| r > 0);
    let has = |suffix: &str| file.tensors.iter().any(|t| t.name.starts_with("blk.") && t.name.ends_with(suffix));
    match (q_rank, has(".attn_q_a.weight"), has(".attn_q.weight")) {
        (Some(_), true, false) | (None, false, true) => {}
        _ => {
            return Err(err(format!(
                "`{}` is {} but the layers hold {}: compressed queries are `attn_q_a` / `attn_q_b`, uncompressed ones `attn_q`",
                key("attention.q_lora_rank"),
                q_rank.map_or("absent".to_string(), |r| r.to_string()),
                match (has(".attn_q_a.weight"), has(".attn_q.weight")) {
                    (true, true) => "both",
                    (true, false) => "`attn_q_a`",
                    (false, true) => "`attn_q`",
                    (false, false) => "neither",
                }
            )))
        }
    }
    if kind != Kind::Mistral4 {
        if let Some(k) = ["attention.temperature_scale", "attention.temperature_length"].into_iter().find(|k| file.get(&key(k)).is_some()) {
            return Err(err(format!(
                "metadata key `{}` is set: Llama 4's query scaling (Mistral Large 3's mistral-format conversion) is not imported for deepseek2 files (its transformers model is not a DeepSeek one)",
                key(k)
            )));
        }
    }
    if kind == Kind::Mistral4 {
        mistral4_experts(c, file, float, uint, key, err)?;
    } else if uint("expert_count")?.is_none() {
        dense_latent_keys(c, file, uint, key, err)?;
    } else {
        deepseek2_experts(c, file, float, uint, key, err)?;
    }
    c.insert("num_key_value_heads".into(), json!(heads));
    c.insert("q_lora_rank".into(), q_rank.map_or(Json::Null, |r| json!(r)));
    c.insert("kv_lora_rank".into(), json!(rank));
    c.insert("qk_nope_head_dim".into(), json!(key_mla - rope));
    c.insert("qk_rope_head_dim".into(), json!(rope));
    c.insert("v_head_dim".into(), json!(v));
    c.insert("attention_bias".into(), json!(false));
    if let Some(mut yarn) = yarn_scaling(c, file, float, uint, key, err)? {
        let log_mul = float("rope.scaling.yarn_log_multiplier")?.ok_or_else(|| {
            err(format!("`{}` is yarn but `{}` is missing: DeepSeek's YaRN scales attention by `mscale_all_dim`, which the converter writes there", key("rope.scaling.type"), key("rope.scaling.yarn_log_multiplier")))
        })?;
        // In f32, as the file holds it, and at the f32's shortest decimal (0.1 x 0.707 stored
        // as f32 reads back as 0.70699996, not as that f32's f64 expansion): a difference of
        // 1e-8 in a softmax scale.
        let single = log_mul as f32 / 0.1f32;
        let mscale: f64 = single.to_string().parse().unwrap_or(f64::from(single));
        yarn["mscale"] = json!(mscale);
        yarn["mscale_all_dim"] = json!(mscale);
        c.insert("rope_scaling".into(), yarn);
    } else if float("rope.scaling.yarn_log_multiplier")?.is_some() {
        return Err(err(format!("metadata key `{}` is set without a yarn `{}`", key("rope.scaling.yarn_log_multiplier"), key("rope.scaling.type"))));
    }
    if kind == Kind::Mistral4 {
        mistral4_query_scaling(c, float, uint, key, err)?;
    }
    Ok(())
}

/// A deepseek2 file without `expert_count`: Youtu-LLM (`YoutuForCausalLM`, which llama.cpp
/// converts as DeepSeek-V2: DeepSeek-V3's latent attention in dense blocks). The converter
/// writes every layer as a leading dense one, the MLP's width as `expert_feed_forward_length`
/// and `expert_shared_count` 0; llama.cpp's graph rotates adjacent pairs (`rope_interleave`).
/// Any routing key, or a router, without `expert_count` is refused.
fn dense_latent_keys(c: &mut Map<String, Json>, file: &GgufFile, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    // A file with experts that lacks only their count is told so first.
    for k in ["expert_used_count", "expert_weights_scale", "expert_weights_norm", "expert_gating_func", "expert_group_count", "expert_group_used_count"] {
        if file.get(&key(k)).is_some() {
            return Err(err(format!("metadata key `{}` is set without `{}`: routing keys need the number of experts", key(k), key("expert_count"))));
        }
    }
    if let Some(t) = file.tensors.iter().find(|t| t.name.ends_with(".ffn_gate_inp.weight") || t.name.contains("_exps.") || t.name.contains("_shexp.")) {
        return Err(err(format!("holds `{}` but no `{}`: the number of experts is not stated", t.name, key("expert_count"))));
    }
    let get = |k: &str| c.get(k).and_then(Json::as_u64).unwrap_or(0);
    let (layers, width) = (get("num_hidden_layers"), get("intermediate_size"));
    for (k, want) in [("leading_dense_block_count", layers), ("expert_feed_forward_length", width), ("expert_shared_count", 0)] {
        if let Some(got) = uint(k)?.filter(|&got| got != want) {
            return Err(err(format!("metadata key `{}` is {got} without `{}`: a file without experts (Youtu-LLM's) states {want} there", key(k), key("expert_count"))));
        }
    }
    c.insert("model_type".into(), json!("youtu"));
    c.insert("rope_interleave".into(), json!(true));
    Ok(())
}

/// Mistral 4's experts (llama.cpp's `Mistral3Model.Mistral4Model`, a `DeepseekV2Model`
/// converter, on the deepseek2 loader) as `Mistral4Config` spells them: the counts, groups,
/// scale and shared experts as [`grouped_experts`] reads them, softmax scores (the converter
/// writes no gating key for it, llama.cpp's default; sigmoid is refused) with no correction
/// bias (a layer holding `exp_probs_b` is refused), `expert_weights_norm` as `norm_topk_prob`,
/// and the query scaling by position: `attention.temperature_scale` as `llama_4_scaling_beta`
/// over the RoPE's original length (`attention.temperature_length`, where given, must be it;
/// llama.cpp divides the position by it). The HF converter writes no temperature key: such a
/// file is read with `Mistral4Config`'s beta, 0.1 (Mistral 4's own), as transformers computes
/// the model the file was converted from (llama.cpp scales no query without the key; the two
/// differ only past the original length, 8192 positions in Mistral 4).
fn mistral4_experts(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let g = grouped_experts(c, file, float, uint, key, err)?;
    if g.sigmoid {
        return Err(err(format!("metadata key `{}` is sigmoid (2): Mistral 4's experts are routed by a softmax", key("expert_gating_func"))));
    }
    if let Some(t) = file.tensors.iter().find(|t| t.name.ends_with(".exp_probs_b.bias")) {
        return Err(err(format!("holds `{}`: Mistral 4's router has no correction bias", t.name)));
    }
    c.insert("model_type".into(), json!("mistral4"));
    c.insert("norm_topk_prob".into(), json!(g.norm));
    c.insert("rope_interleave".into(), json!(true));
    Ok(())
}

/// `Mistral4Config`'s `llama_4_scaling_beta`, which a file without `attention.temperature_scale`
/// is read with.
const MISTRAL4_BETA: f64 = 0.1;

/// Mistral 4's query scaling by position, added to the RoPE parameters `deepseek2_config`
/// wrote (see [`mistral4_experts`]).
fn mistral4_query_scaling(c: &mut Map<String, Json>, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let stated = float("attention.temperature_scale")?;
    let beta = stated.unwrap_or(MISTRAL4_BETA);
    if !beta.is_finite() || beta < 0.0 {
        return Err(err(format!("metadata key `{}` is {beta}, not a non-negative number", key("attention.temperature_scale"))));
    }
    let rope = c.entry("rope_scaling").or_insert_with(|| json!({"rope_type": "default"}));
    let original = rope.get("original_max_position_embeddings").and_then(Json::as_u64);
    if let Some(l) = uint("attention.temperature_length")?.filter(|l| Some(*l) != original) {
        return Err(err(format!(
            "metadata key `{}` is {l}, not YaRN's original length (`{}`): Mistral 4 scales queries over that length",
            key("attention.temperature_length"),
            key("rope.scaling.original_context_length")
        )));
    }
    if beta != 0.0 && original.is_none() {
        return Err(err(format!(
            "`{}` is {beta}{} without YaRN's `{}`: Mistral 4 scales queries over the RoPE's original length",
            key("attention.temperature_scale"),
            if stated.is_none() { " (Mistral 4's default; the file has none)" } else { "" },
            key("rope.scaling.original_context_length")
        )));
    }
    rope["llama_4_scaling_beta"] = json!(beta);
    Ok(())
}

/// DeepSeek-V2's or V3's experts (see [`deepseek2_config`]), which decide the model type.
fn deepseek2_experts(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let layers = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0);
    let mut g = grouped_experts(c, file, float, uint, key, err)?;
    // No gating key: softmax for the DeepSeek-V2 files older than the key, sigmoid where the
    // layers hold the correction bias only V3-style routing reads (llama.cpp reads GLM-4.7-Flash
    // files, which state no gating, as sigmoid).
    if uint("expert_gating_func")?.is_none() && file.tensors.iter().any(|t| t.name.ends_with(".exp_probs_b.bias")) {
        g.sigmoid = true;
    }
    if g.sigmoid {
        c.insert("model_type".into(), json!("deepseek_v3"));
        c.insert("topk_method".into(), json!("noaux_tc"));
        c.insert("norm_topk_prob".into(), json!(g.norm));
        c.insert("rope_interleave".into(), json!(true));
        corrected_layers(file, g.dense, layers, "DeepSeek-V3's", key, err)?;
    } else {
        if g.norm {
            return Err(err(format!(
                "metadata key `{}` is true with softmax routing: DeepSeek-V2's router (transformers' and the original model's) does not renormalize the chosen weights",
                key("expert_weights_norm")
            )));
        }
        c.insert("model_type".into(), json!("deepseek_v2"));
        c.insert("topk_method".into(), json!(if g.groups > 1 { "group_limited_greedy" } else { "greedy" }));
        c.insert("moe_layer_freq".into(), json!(1));
    }
    Ok(())
}

/// gpt-oss's keys (llama.cpp's `GptOssModel` writes them, its `LLM_ARCH_OPENAI_MOE` loader
/// requires the expert size and the window): experts, top-k and their size (transformers'
/// `intermediate_size` is the expert's), the window and which layers slide (llama.cpp's pattern:
/// period `attention.sliding_window_pattern`, default 2, layer `i` sliding when `i % n < n - 1` (0: every layer),
/// or one bool per layer), YaRN from `rope.scaling.*` with transformers' gpt-oss settings for
/// what the file does not say (`beta_fast` 32, `beta_slow` 1, the correction range not
/// truncated, `GptOssConfig`; llama.cpp's kernel always truncates it), else no scaling, and the
/// clamped SwiGLU's alpha 1.702 and limit 7.0, constants in llama.cpp's graph (no key sets them).
fn gpt_oss_config(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let need = |k: &str| -> Result<u64> { uint(k)?.filter(|&v| v > 0).ok_or_else(|| err(format!("metadata key `{}` is missing or 0: llama.cpp's gpt-oss loader requires it", key(k)))) };
    let experts = need("expert_count")?;
    let used = need("expert_used_count")?;
    if used > experts {
        return Err(err(format!("metadata key `{}` ({used}) is larger than `{}` ({experts})", key("expert_used_count"), key("expert_count"))));
    }
    c.insert("num_local_experts".into(), json!(experts));
    c.insert("num_experts_per_tok".into(), json!(used));
    c.insert("intermediate_size".into(), json!(need("expert_feed_forward_length")?));
    c.insert("sliding_window".into(), json!(need("attention.sliding_window")?));
    let sliding = sliding_layers(c, file, 2, key, err)?;
    c.insert("layer_types".into(), json!(layer_types(&sliding)));
    let rope = match yarn_scaling(c, file, float, uint, key, err)? {
        // GptOssConfig's YaRN does not truncate the correction range.
        Some(mut yarn) => {
            yarn["truncate"] = json!(false);
            yarn
        }
        None => json!({"rope_type": "default"}),
    };
    c.insert("rope_scaling".into(), rope);
    c.insert("swiglu_alpha".into(), json!(1.702));
    c.insert("swiglu_limit".into(), json!(7.0));
    Ok(())
}

/// Which layers slide, as llama.cpp's loaders read `attention.sliding_window_pattern`: one
/// bool per layer, or a period `n` (layer `i` slides when `i % n < n - 1`; 0: every layer,
/// `set_swa_pattern`), else the architecture's default period.
fn sliding_layers(c: &Map<String, Json>, file: &GgufFile, default_period: u64, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<Vec<bool>> {
    let layers = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0) as usize;
    let pattern = key("attention.sliding_window_pattern");
    let period = |n: u64| (0..layers).map(|i| n == 0 || (i as u64) % n < n - 1).collect();
    match file.get(&pattern) {
        None => Ok(period(default_period)),
        Some(Value::Array(flags)) => {
            let flags: Option<Vec<bool>> = flags.iter().map(Value::as_bool).collect();
            match flags {
                Some(f) if f.len() == layers => Ok(f),
                _ => Err(err(format!("metadata key `{pattern}` must be a period or one bool per layer ({layers})"))),
            }
        }
        Some(v) => match v.as_u64() {
            Some(n) => Ok(period(n)),
            None => Err(err(format!("metadata key `{pattern}` is {v:?}: a period (a non-negative integer) or one bool per layer"))),
        },
    }
}

/// transformers' `layer_types` for the sliding flags.
fn layer_types(sliding: &[bool]) -> Vec<&'static str> {
    sliding.iter().map(|&s| if s { "sliding_attention" } else { "full_attention" }).collect()
}

/// The YaRN `rope_scaling` the file's `rope.scaling.*` keys state (llama.cpp's `TextModel`
/// copies them from the config's): `factor`, the original context (`rope.scaling.
/// original_context_length`, else `context_length`, llama.cpp's default), `beta_fast` /
/// `beta_slow` (absent or 0: 32 / 1) and, where the converter copied the config's
/// `attention_factor`, that (`rope.scaling.yarn_attn_factor`; else transformers' default
/// `0.1 ln(factor) + 1`, which llama.cpp's context computes whatever the key says). `None`
/// when `rope.scaling.type` is not yarn; a `rope.scaling.factor` without it is refused.
fn yarn_scaling(c: &Map<String, Json>, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<Option<Json>> {
    let scaling = key("rope.scaling.type");
    if file.get(&scaling).and_then(Value::as_str) != Some("yarn") {
        if float("rope.scaling.factor")?.is_some() {
            return Err(err(format!("metadata key `{}` is set without a yarn `{scaling}`", key("rope.scaling.factor"))));
        }
        return Ok(None);
    }
    let factor = float("rope.scaling.factor")?.filter(|f| f.is_finite() && *f > 0.0).ok_or_else(|| err(format!("`{scaling}` is yarn but `{}` is missing or not positive", key("rope.scaling.factor"))))?;
    let original = match uint("rope.scaling.original_context_length")? {
        Some(n) if n > 0 => n,
        // llama.cpp's default: the training context.
        _ => c.get("max_position_embeddings").and_then(Json::as_u64).ok_or_else(|| err(format!("`{scaling}` is yarn but neither `{}` nor `{}` is set", key("rope.scaling.original_context_length"), key("context_length"))))?,
    };
    let beta = |k: &str, default: f64| -> Result<f64> { Ok(float(k)?.filter(|b| *b != 0.0).unwrap_or(default)) };
    let mut yarn = json!({
        "rope_type": "yarn",
        "factor": factor,
        "original_max_position_embeddings": original,
        "beta_fast": beta("rope.scaling.yarn_beta_fast", 32.0)?,
        "beta_slow": beta("rope.scaling.yarn_beta_slow", 1.0)?,
    });
    if let Some(a) = float("rope.scaling.yarn_attn_factor")? {
        if !(a.is_finite() && a > 0.0) {
            return Err(err(format!("metadata key `{}` is {a}: a scale must be positive", key("rope.scaling.yarn_attn_factor"))));
        }
        yarn["attention_factor"] = json!(a);
    }
    Ok(Some(yarn))
}

/// Apertus's xIELU scalars (`ApertusModel` writes the raw parameters, before softplus, as the
/// global `xielu.alpha_n` / `alpha_p` / `beta` / `eps`, one value per layer or one for all, as
/// llama.cpp's `get_key_or_arr` reads them): one scalar view per layer under the family's names
/// (`model.layers.N.mlp.act_fn.alpha_n`, ...), which the family turns into the forward's values.
fn xielu_views(path: &Path, file: &GgufFile, layers: usize, views: &mut BTreeMap<String, Recipe>) -> Result<()> {
    let err = |reason: String| Error::Config { path: path.to_path_buf(), reason };
    for name in ["alpha_n", "alpha_p", "beta", "eps"] {
        let k = format!("xielu.{name}");
        let one = |v: &Value| v.as_f64().filter(|x| x.is_finite());
        let values: Vec<f64> = match file.get(&k) {
            None => return Err(err(format!("metadata key `{k}` is missing: Apertus's xIELU needs its {name} per layer (llama.cpp's loader requires it)"))),
            Some(Value::Array(items)) if items.len() == layers => {
                items.iter().map(|v| one(v).ok_or_else(|| err(format!("metadata key `{k}` holds {v:?}, not a finite number")))).collect::<Result<_>>()?
            }
            Some(Value::Array(items)) => return Err(err(format!("metadata key `{k}` has {} values for {layers} layers", items.len()))),
            Some(v) => vec![one(v).ok_or_else(|| err(format!("metadata key `{k}` is {v:?}, not a finite number")))?; layers],
        };
        for (i, v) in values.into_iter().enumerate() {
            let family = format!("model.layers.{i}.mlp.act_fn.{name}");
            views.insert(family.clone(), Recipe::from_f32(format!("{k}[{i}] = {v}"), vec![], &[v as f32]));
        }
    }
    Ok(())
}

/// Ministral 3 (`Mistral3Model`, a LlamaModel): `rope_parameters` with the file's YaRN, its
/// `yarn_log_multiplier` as `mscale_all_dim` beside `mscale` 1 (llama.cpp's loader assumes 1; the
/// published configs say 1 and 1), and `attention.temperature_scale` as `llama_4_scaling_beta`
/// over the YaRN context (llama.cpp's `n_attn_temp_floor_scale`; no key: 0, no scaling, as
/// llama.cpp). Without YaRN the RoPE is the default one, stated, since the family's default
/// object is YaRN x16.
fn mistral3_config(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let beta = float("attention.temperature_scale")?.unwrap_or(0.0);
    if !beta.is_finite() {
        return Err(err(format!("metadata key `{}` is {beta}, not a finite number", key("attention.temperature_scale"))));
    }
    let mut params = match yarn_scaling(c, file, float, uint, key, err)? {
        Some(mut yarn) => {
            if let Some(m) = float("rope.scaling.yarn_log_multiplier")?.filter(|m| *m != 0.0) {
                yarn["mscale"] = json!(1.0);
                yarn["mscale_all_dim"] = json!(m);
            }
            yarn
        }
        None => {
            let original = c.get("max_position_embeddings").cloned().unwrap_or(json!(0));
            json!({ "rope_type": "default", "original_max_position_embeddings": original })
        }
    };
    if let Some(theta) = c.get("rope_theta") {
        params["rope_theta"] = theta.clone();
    }
    params["llama_4_scaling_beta"] = json!(beta);
    c.insert("rope_parameters".into(), params);
    Ok(())
}

/// EXAONE 4 (`Exaone4Model` writes `attention.sliding_window` and one bool per layer in
/// `attention.sliding_window_pattern` when the config has a window): the window and
/// `layer_types` from the pattern (a period too, default 4: `Exaone4Config`'s), or
/// `sliding_window: null` with every layer full when the file states none (the family's
/// default window is for an absent key); the full layers of a windowed model have no RoPE (the family's rule, as
/// llama.cpp's graph: `use_rope = is_swa(il) || swa_type == NONE`). llama.cpp itself switches
/// windows on for 64-layer files only (EXAONE 4.0 32B); the import follows the file's keys,
/// which the converter copied from the config.
fn exaone4_config(c: &mut Map<String, Json>, file: &GgufFile, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    match uint("attention.sliding_window")?.filter(|&w| w > 0) {
        Some(window) => {
            c.insert("sliding_window".into(), json!(window));
            let sliding = sliding_layers(c, file, 4, key, err)?;
            c.insert("layer_types".into(), json!(layer_types(&sliding)));
        }
        None => {
            if file.get(&key("attention.sliding_window_pattern")).is_some() {
                return Err(err(format!("metadata key `{}` is set without `{}`", key("attention.sliding_window_pattern"), key("attention.sliding_window"))));
            }
            // `Exaone4Config` with a null window needs the layer kinds spelled out (its default
            // pattern divides by the forced period 0).
            let layers = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0) as usize;
            c.insert("sliding_window".into(), Json::Null);
            c.insert("layer_types".into(), json!(vec!["full_attention"; layers]));
        }
    }
    Ok(())
}

/// Cohere's keys (`CommandR2Model`, `Cohere2Model`): the LayerNorm epsilon and `logit_scale`
/// (the converter always writes both; the logits are multiplied by it), q/k/v biases when the
/// file has them (Cohere2Model drops its all-zero ones); Cohere 2's window (required by
/// llama.cpp's loader) and its layers from `attention.sliding_window_pattern` (the converter
/// writes none: the loader's period 4, `Cohere2Config`'s default too).
#[allow(clippy::too_many_arguments)]
fn cohere_config(c: &mut Map<String, Json>, kind: Kind, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let eps = float("attention.layer_norm_epsilon")?.ok_or_else(|| err(format!("metadata key `{}` is missing", key("attention.layer_norm_epsilon"))))?;
    c.insert("layer_norm_eps".into(), json!(eps as f32 as f64));
    let scale = float("logit_scale")?.ok_or_else(|| err(format!("metadata key `{}` is missing (the converter writes the config's `logit_scale`)", key("logit_scale"))))?;
    c.insert("logit_scale".into(), json!(scale as f32 as f64));
    // q biases, alone or inside a fused `attn_qkv` (llama.cpp's `--fuse-qkv`).
    let biased = file.tensors.iter().any(|t| t.name.ends_with(".attn_q.bias") || t.name.ends_with(".attn_qkv.bias"));
    if biased && kind == Kind::CommandR {
        // Cohere's `attention_bias` biases o_proj too, which llama.cpp's command-r loader never
        // reads: such a file stands for no Cohere model.
        return Err(err("has q/k/v biases (`attn_q.bias` or `attn_qkv.bias`): Cohere's `attention_bias` also biases o_proj, which llama.cpp's command-r loader does not read, so the file stands for no Cohere model".into()));
    }
    c.insert("attention_bias".into(), json!(biased));
    if kind == Kind::CommandR {
        // Command R+: per-head q/k norms (`attn_q_norm` `[head_dim, heads]`), which llama.cpp's
        // loader requires of files of 64 layers or more and reads from no other.
        c.insert("use_qk_norm".into(), json!(qk_norms_in_every_layer(file, c, err)?));
    }
    if kind == Kind::Cohere2 {
        let window = uint("attention.sliding_window")?.filter(|&w| w > 0).ok_or_else(|| err(format!("metadata key `{}` is missing or 0 (llama.cpp's cohere2 loader requires it)", key("attention.sliding_window"))))?;
        c.insert("sliding_window".into(), json!(window));
        let sliding = sliding_layers(c, file, 4, key, err)?;
        c.insert("layer_types".into(), json!(layer_types(&sliding)));
    }
    Ok(())
}

/// OLMo 3 (llama.cpp's `Olmo2Model` writes `Olmo3ForCausalLM` as `olmo2` with
/// `attention.sliding_window` and one bool per layer in `attention.sliding_window_pattern`;
/// the loader reads a period there too, default 4): `model_type` olmo3, `layer_types` from the
/// pattern, the YaRN of `rope.scaling.*` on the full layers only (as llama.cpp's olmo2 graph and
/// transformers apply it) and the sliding layers unscaled at `rope.freq_base_swa` (the config's
/// sliding-layer base, as transformers reads it; llama.cpp uses `rope.freq_base` there), else
/// the full layers' base.
fn olmo3_config(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    c.insert("model_type".into(), json!("olmo3"));
    c.insert("sliding_window".into(), json!(uint("attention.sliding_window")?));
    let sliding = sliding_layers(c, file, 4, key, err)?;
    c.insert("layer_types".into(), json!(layer_types(&sliding)));
    let theta = c.remove("rope_theta").and_then(|t| t.as_f64()).unwrap_or(10000.0);
    let mut full = yarn_scaling(c, file, float, uint, key, err)?.unwrap_or_else(|| json!({"rope_type": "default"}));
    full["rope_theta"] = json!(theta);
    let local = float("rope.freq_base_swa")?.unwrap_or(theta);
    c.insert("rope_parameters".into(), json!({"full_attention": full, "sliding_attention": {"rope_type": "default", "rope_theta": local}}));
    Ok(())
}

/// A positive, finite scale (`None` when the key is absent or 0: llama.cpp's "not set").
fn scale_key(float: Read<f64>, k: &str, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<Option<f64>> {
    match float(k)? {
        None => Ok(None),
        Some(0.0) => Ok(None),
        Some(v) if v.is_finite() && v > 0.0 => Ok(Some(v as f32 as f64)),
        Some(v) => Err(err(format!("metadata key `{}` is {v}: a scale must be positive", key(k)))),
    }
}

/// Granite's four scales (`GraniteModel` in llama.cpp's converter writes each from its config
/// key when it is set; `LLM_ARCH_GRANITE` in the loader): `logit_scale` is required there (the
/// logits are divided by it); `embedding_scale` and `residual_scale` absent or 0 mean no
/// scaling; `attention.scale` absent or 0 means llama.cpp's `1/sqrt(head size)`, written here
/// as that value since transformers' `attention_multiplier` defaults to 1.
fn granite_config(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let logits = scale_key(float, "logit_scale", key, err)?.ok_or_else(|| err(format!("metadata key `{}` is missing or 0 (llama.cpp requires it for granite: the logits are divided by it)", key("logit_scale"))))?;
    let head_dim = c.get("head_dim").and_then(Json::as_u64).unwrap_or(1) as f64;
    let attention = scale_key(float, "attention.scale", key, err)?.unwrap_or((1.0 / (head_dim as f32).sqrt()) as f64);
    c.insert("logits_scaling".into(), json!(logits));
    c.insert("embedding_multiplier".into(), json!(scale_key(float, "embedding_scale", key, err)?.unwrap_or(1.0)));
    c.insert("residual_multiplier".into(), json!(scale_key(float, "residual_scale", key, err)?.unwrap_or(1.0)));
    c.insert("attention_multiplier".into(), json!(attention));
    c.insert("mlp_bias".into(), json!(file.tensors.iter().any(|t| t.name.ends_with(".ffn_up.bias"))));
    Ok(())
}

/// MiniCPM (`MiniCPMModel`, `LLM_ARCH_MINICPM`: MiniCPM-2B, MiniCPM-1B, MiniCPM4) as Granite, whose four
/// scalings are MiniCPM's (llama.cpp's minicpm graph is its granite one): `embedding_scale`
/// (`scale_emb`) multiplies the embeddings, `residual_scale` (`scale_depth / sqrt(layers)`)
/// each block's output before its residual add, the logits are divided by `logit_scale`
/// (`hidden / dim_model_base`), and the attention scale is `1 / sqrt(head size)` (no key).
/// Files from converters before late 2024 state none of the three: MiniCPM-2B's constants
/// apply, which llama.cpp's graph hard-coded then (12, 1.4 / sqrt(layers), hidden / 256). Its
/// loader's fallback today is `256 / hidden` for the logit scale, the inverse of what the
/// converter writes (the logits multiplied by hidden / 256); this import keeps the model's
/// own division. LongRoPE ([`minicpm_longrope`]: MiniCPM4) as llama.cpp runs it.
fn minicpm_config(c: &mut Map<String, Json>, path: &Path, file: &GgufFile, float: Read<f64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let size = |k: &str| c.get(k).and_then(Json::as_u64).unwrap_or(1).max(1) as f64;
    let (hidden, layers, head_dim) = (size("hidden_size"), size("num_hidden_layers"), size("head_dim"));
    minicpm_longrope(c, path, file, key, err)?;
    // The fallbacks in f32, as the file's keys and llama.cpp's old graph (`1.4f / sqrtf(L)`).
    let f32_of = |v: f64| v as f32 as f64;
    c.insert("embedding_multiplier".into(), json!(scale_key(float, "embedding_scale", key, err)?.unwrap_or(12.0)));
    c.insert("residual_multiplier".into(), json!(scale_key(float, "residual_scale", key, err)?.unwrap_or(f32_of((1.4f32 / (layers as f32).sqrt()) as f64))));
    c.insert("logits_scaling".into(), json!(scale_key(float, "logit_scale", key, err)?.unwrap_or(f32_of(hidden / 256.0))));
    c.insert("attention_multiplier".into(), json!((1.0 / (head_dim as f32).sqrt()) as f64));
    c.insert("mlp_bias".into(), json!(file.tensors.iter().any(|t| t.name.ends_with(".ffn_up.bias"))));
    Ok(())
}

/// MiniCPM4's LongRoPE (`rope.scaling.type` longrope; MiniCPMModel writes the two F32 factor
/// sets and no original length or attention factor): llama.cpp's original length is the
/// training context, so within it the short factors apply with no attention factor, which is
/// MiniCPM4's own model (its `original_max_position_embeddings` is its context, 32768); read as
/// `longrope` with the context as the original length (the long factors past it). A config
/// whose original length is shorter than its context (a 128k MiniCPM-1B) states no such length
/// in its file, so that file is read as llama.cpp reads it. Factors without the key (llama.cpp
/// would not load them), the key without factors, or one set alone are refused; Llama 3's
/// `rope_freqs.weight` beside them too.
fn minicpm_longrope(c: &mut Map<String, Json>, path: &Path, file: &GgufFile, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let longrope = file.get(&key("rope.scaling.type")).and_then(Value::as_str) == Some("longrope");
    let pair = c.get("head_dim").and_then(Json::as_u64).unwrap_or(0) as usize / 2;
    match (factor_tensor(path, file, ROPE_LONG, pair)?, factor_tensor(path, file, ROPE_SHORT, pair)?, longrope) {
        (Some(long), Some(short), true) => {
            if c.contains_key("rope_scaling") {
                return Err(err(format!("holds both `{ROPE_FREQS}` and LongRoPE's factor sets: one RoPE scaling is read")));
            }
            let original = c.get("max_position_embeddings").cloned().ok_or_else(|| err(format!("holds LongRoPE factors but no `{}`, which llama.cpp takes as their original length", key("context_length"))))?;
            c.insert("rope_scaling".into(), json!({"rope_type": "longrope", "long_factor": long, "short_factor": short, "original_max_position_embeddings": original}));
            Ok(())
        }
        (None, None, false) => Ok(()),
        (Some(_), Some(_), false) => Err(err(format!("holds `{ROPE_LONG}` and `{ROPE_SHORT}` but `{}` is not longrope: llama.cpp loads them only for a LongRoPE file", key("rope.scaling.type")))),
        (None, None, true) => Err(err(format!("metadata key `{}` is longrope but the file has no `{ROPE_LONG}` / `{ROPE_SHORT}`", key("rope.scaling.type")))),
        _ => Err(err(format!("holds one of `{ROPE_LONG}` / `{ROPE_SHORT}` without the other: LongRoPE has both"))),
    }
}

/// A vision-language model's text part (`qwen2vl`: Qwen2-VL, Qwen2.5-VL; `qwen3vl`, `qwen3vlmoe`:
/// Qwen3-VL and its mixture of experts),
/// the language model of the checkpoint without its vision tower (llama.cpp writes that to a
/// separate mmproj file, not read here). Its multimodal RoPE splits each head's rotary pairs into
/// sections turned by the temporal, height and width positions; a text token has the same
/// position in all three, so the sections turn as plain RoPE does and the package is the text
/// model (`qwen2`, `qwen3`), as `--text-only` builds a Hugging Face checkpoint of these models.
/// The sections (`rope.dimension_sections`, four counts of pairs, at most the head's) are
/// checked; Qwen3-VL's deepstack count (`n_deepstack_layers`: vision features added after
/// early layers) adds nothing at text tokens.
fn vl_text_config(file: &GgufFile, head_dim: u64, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let k = key("rope.dimension_sections");
    let sections: Vec<u64> = match file.get(&k) {
        None => return Err(err(format!("metadata key `{k}` is missing: a vision-language model's text file states its multimodal RoPE sections"))),
        Some(v) => v.as_array().map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default(),
    };
    let pairs: u64 = sections.iter().sum();
    if sections.is_empty() || sections.len() > 4 || pairs == 0 || pairs > head_dim / 2 {
        return Err(err(format!("metadata key `{k}` is {sections:?}: up to four counts of rotary pairs, together at most the head's {} pairs", head_dim / 2)));
    }
    uint("n_deepstack_layers")?;
    Ok(())
}

/// StarCoder2 (`LLM_ARCH_STARCODER2`): LayerNorm epsilon from `attention.layer_norm_epsilon`
/// (required there), tanh GELU (ggml's GELU), biases as the file holds them (llama.cpp
/// requires them; transformers' `use_bias`). No sliding window: neither the converter nor the
/// loader has one for starcoder2, where the original config may (StarCoder2-3B/7B: 4096).
fn starcoder2_config(c: &mut Map<String, Json>, biased: bool, float: Read<f64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let eps = float("attention.layer_norm_epsilon")?.ok_or_else(|| err(format!("metadata key `{}` is missing", key("attention.layer_norm_epsilon"))))?;
    c.insert("norm_epsilon".into(), json!(eps as f32 as f64));
    c.insert("hidden_act".into(), json!("gelu_pytorch_tanh"));
    c.insert("use_bias".into(), json!(biased));
    Ok(())
}

/// Whether every layer holds per-head q and k norms (`attn_q_norm`, `attn_k_norm`): one switch
/// turns both on in transformers, so a file with one and not the other is refused naming it.
fn qk_norms_in_every_layer(file: &GgufFile, c: &Map<String, Json>, err: &dyn Fn(String) -> Error) -> Result<bool> {
    let (q, k) = (every_layer_has(file, "attn_q_norm.weight", c, err)?, every_layer_has(file, "attn_k_norm.weight", c, err)?);
    if q != k {
        let (has, lacks) = if q { ("attn_q_norm", "attn_k_norm") } else { ("attn_k_norm", "attn_q_norm") };
        return Err(err(format!("its layers hold `{has}.weight` but no `{lacks}.weight`: the config switch that builds one builds both")));
    }
    Ok(q)
}

/// Whether every layer holds `blk.N.{suffix}` (false when none does); a file where only some
/// layers do is refused (a transformers config switches the tensor on for all layers).
fn every_layer_has(file: &GgufFile, suffix: &str, c: &Map<String, Json>, err: &dyn Fn(String) -> Error) -> Result<bool> {
    let layers = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0) as usize;
    // The decoder's layers only (glm4moe files append prediction layers after them).
    let holding: std::collections::BTreeSet<&str> = file
        .tensors
        .iter()
        .filter_map(|t| t.name.strip_prefix("blk.")?.strip_suffix(suffix)?.strip_suffix('.'))
        .filter(|n| n.parse::<usize>().is_ok_and(|n| n < layers))
        .collect();
    match holding.len() {
        0 => Ok(false),
        n if n == layers => Ok(true),
        n => Err(err(format!("{n} of its {layers} layers hold `{suffix}`: the config switching it on is one for every layer, so all or none of them do"))),
    }
}

/// Phi-1/1.5/2 (`Phi2Model` in the converter, `LLM_ARCH_PHI2` in the loader): LayerNorm epsilon
/// from `attention.layer_norm_epsilon`, the rotated dimensions from `rope.dimension_count`
/// (always written as `partial_rotary_factor`: the phi family's default is 0.5), tanh GELU,
/// no q/k LayerNorms (the loader has none). The converter writes no `rope.freq_base` (llama.cpp's
/// default 10000, Phi's too) and `feed_forward_length` as 4 x hidden whatever the config says,
/// so the key is checked against `ffn_up` as llama.cpp's tensor shapes check it.
fn phi2_config(c: &mut Map<String, Json>, file: &GgufFile, rotary: u64, head_dim: u64, float: Read<f64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let eps = float("attention.layer_norm_epsilon")?.ok_or_else(|| err(format!("metadata key `{}` is missing", key("attention.layer_norm_epsilon"))))?;
    c.insert("layer_norm_eps".into(), json!(eps as f32 as f64));
    c.insert("partial_rotary_factor".into(), json!(rotary as f64 / head_dim as f64));
    c.insert("hidden_act".into(), json!("gelu_new"));
    c.insert("qk_layernorm".into(), json!(false));
    check_ffn_up(c, file, key, err)
}

/// Falcon's config as `FalconModel.set_gguf_parameters` states it: no rope base (10000, the
/// default llama.cpp runs, when `rope.freq_base` is absent: Falcon2-11B's own 500042 is not in
/// such a file), `feed_forward_length` (the converter writes 4 x hidden, Falcon-7B's and 11B's
/// width), the LayerNorm epsilon, the key/value heads (1 for Falcon-7B's multi-query). Read as
/// `FalconConfig` with `new_decoder_architecture` and one LayerNorm (`num_ln_in_parallel_attn`
/// 1), which with one key/value head is Falcon-7B's block and with more Falcon2-11B's; exact
/// GELU (`activation` `gelu`: FalconConfig's; llama.cpp's graph computes ggml's tanh form).
/// Refused: a `tensor_data_layout` other than the converter's "jploski" and Falcon-40B/180B's
/// second LayerNorm (`attn_norm_2`), which the family does not build.
fn falcon_config(
    c: &mut Map<String, Json>,
    file: &GgufFile,
    kv_heads: u64,
    biased: bool,
    float: Read<f64>,
    key: &dyn Fn(&str) -> String,
    err: &dyn Fn(String) -> Error,
) -> Result<()> {
    const LAYOUT: &str = "jploski";
    match file.get(&key("tensor_data_layout")) {
        Some(v) if v.as_str() == Some(LAYOUT) => {}
        None => return Err(err(format!("metadata key `{}` is missing: Falcon files state the restacked q/k/v layout (\"{LAYOUT}\") the converter writes", key("tensor_data_layout")))),
        Some(v) => return Err(err(format!("metadata key `{}` is {v:?}; the import reads the q/k/v layout llama.cpp's converter writes (\"{LAYOUT}\")", key("tensor_data_layout")))),
    }
    if let Some(t) = file.tensors.iter().find(|t| t.name.ends_with(".attn_norm_2.weight")) {
        return Err(err(format!(
            "holds `{}`: Falcon-40B/180B's second LayerNorm (`new_decoder_architecture` with `num_ln_in_parallel_attn` 2) is not built; Falcon-7B and Falcon2-11B have one norm a layer",
            t.name
        )));
    }
    let eps = float("attention.layer_norm_epsilon")?.ok_or_else(|| err(format!("metadata key `{}` is missing", key("attention.layer_norm_epsilon"))))?;
    c.insert("layer_norm_epsilon".into(), json!(eps as f32 as f64));
    check_ffn_up(c, file, key, err)?;
    let width = c.remove("intermediate_size").unwrap_or(Json::Null);
    c.insert("ffn_hidden_size".into(), width);
    c.remove("hidden_act");
    c.insert("activation".into(), json!("gelu"));
    c.insert("new_decoder_architecture".into(), json!(true));
    c.insert("num_ln_in_parallel_attn".into(), json!(1));
    c.insert("num_kv_heads".into(), json!(kv_heads));
    c.insert("parallel_attn".into(), json!(true));
    c.insert("alibi".into(), json!(false));
    c.insert("bias".into(), json!(biased));
    Ok(())
}

/// What an ALiBi architecture's file must not state: RoPE keys (read for every other
/// architecture), which BLOOM's and MPT's graphs never use (`LLAMA_ROPE_TYPE_NONE`).
fn refuse_rope_keys(file: &GgufFile, model: &str, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    match ["rope.freq_base", "rope.dimension_count", "rope.scaling.type"].into_iter().find(|k| file.get(&key(k)).is_some()) {
        Some(k) => Err(err(format!("metadata key `{}` is set, but {model} has no rotary positions (its positions are ALiBi's attention bias)", key(k)))),
        None => Ok(()),
    }
}

/// The checks every ALiBi file shares: one key/value head per query head (the fused q/k/v is
/// three equal parts), the MLP 4 x hidden wide (`feed_forward_length`, which both converters
/// write as that, and the tensors), no RoPE keys; the context moved to the family's own key
/// (`seq_length`, `max_seq_len`: both families ignore `max_position_embeddings`).
fn alibi_common(c: &mut Map<String, Json>, file: &GgufFile, model: &str, context_key: &str, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    refuse_rope_keys(file, model, key, err)?;
    let heads = c.get("num_attention_heads").and_then(Json::as_u64).unwrap_or(0);
    let kv_heads = c.get("num_key_value_heads").and_then(Json::as_u64).unwrap_or(0);
    if kv_heads != heads {
        return Err(err(format!("metadata key `{}` is {kv_heads} for {heads} query heads: {model} has one key/value head per query head (its q/k/v projection is three equal parts)", key("attention.head_count_kv"))));
    }
    let hidden = c.get("hidden_size").and_then(Json::as_u64).unwrap_or(0);
    let ff = c.get("intermediate_size").and_then(Json::as_u64).unwrap_or(0);
    if ff != 4 * hidden {
        return Err(err(format!("metadata key `{}` is {ff}: {model}'s MLP is 4 x hidden ({}) wide, as the converter writes it", key("feed_forward_length"), 4 * hidden)));
    }
    check_ffn_up(c, file, key, err)?;
    for k in ["max_position_embeddings", "rope_theta", "hidden_act", "intermediate_size"] {
        let v = c.remove(k);
        if k == "max_position_embeddings" {
            if let Some(ctx) = v {
                c.insert(context_key.into(), ctx);
            }
        }
    }
    Ok(())
}

/// BLOOM (`BloomModel`, `LLM_ARCH_BLOOM`): the LayerNorm epsilon, the context (`seq_length`,
/// which the converter writes as `context_length`, or the hidden size when the config has none:
/// a context equal to the width is read as that absent key, BLOOM's 2048), nothing else: llama.cpp's loader fixes the ALiBi maximum at 8 (BLOOM's slopes, which ggml's
/// softmax computes as `_get_alibi_slopes` does), its graph the tanh GELU and the embedding
/// norm. The head tied unless the file has `output.weight` (older converters wrote a copy).
fn bloom_config(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let eps = float("attention.layer_norm_epsilon")?.ok_or_else(|| err(format!("metadata key `{}` is missing (llama.cpp's bloom loader requires it)", key("attention.layer_norm_epsilon"))))?;
    c.insert("layer_norm_epsilon".into(), json!(eps as f32 as f64));
    // The converter writes the width as the context when the config has no `seq_length` (most
    // BLOOM configs): read as that config, the family's 2048 (BLOOM's training length), as a
    // build of the checkpoint itself gives.
    if c.get("max_position_embeddings").is_some() && c.get("max_position_embeddings") == c.get("hidden_size") {
        c.remove("max_position_embeddings");
    }
    alibi_common(c, file, "BLOOM", "seq_length", key, err)
}

/// MPT (`MPTModel`, `LLM_ARCH_MPT`): the LayerNorm epsilon, `attention.clamp_kqv` as
/// `attn_config.clip_qkv` (absent or 0: none), `attention.max_alibi_bias` 8 (what transformers'
/// MptModel runs; the converter writes 0 for a config without ALiBi, which llama.cpp then runs
/// without any positions), the context `max_seq_len`. What MPT's file cannot say is its
/// config's default: the softmax scale `1 / sqrt(head_dim)` (llama.cpp's graph fixes it; the
/// converter drops `softmax_scale`), and the GELU is transformers' exact one (llama.cpp's graph
/// computes the tanh form); the ALiBi slopes are MPT's own (`build_mpt_alibi_tensor`), which
/// ggml's BLOOM-style slopes equal for a power-of-two head count (MPT-7B's 32, MPT-30B's 64)
/// and not otherwise. Biases (`no_bias` false), q/k LayerNorms (`qk_ln`), learned positions
/// and AWQ's activation scales are refused by tensor, as transformers' MPT has none.
fn mpt_config(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let eps = float("attention.layer_norm_epsilon")?.ok_or_else(|| err(format!("metadata key `{}` is missing (llama.cpp's mpt loader requires it)", key("attention.layer_norm_epsilon"))))?;
    c.insert("layer_norm_epsilon".into(), json!(eps as f32 as f64));
    const UNBUILT: &[(&str, &str)] = &[
        (".bias", "biases (`no_bias` false)"),
        (".attn_q_norm.weight", "LayerNorms on q and k (`qk_ln`)"),
        ("position_embd.weight", "learned positions (`alibi` false)"),
        (".ffn.act.scales", "AWQ's activation scales"),
    ];
    for t in &file.tensors {
        if let Some((_, what)) = UNBUILT.iter().find(|(suffix, _)| t.name.ends_with(suffix)) {
            return Err(err(format!("holds `{}`: MPT with {what} is not built (transformers' MptModel has none)", t.name)));
        }
    }
    match float("attention.max_alibi_bias")? {
        Some(8.0) => {}
        None | Some(0.0) => {
            return Err(err(format!(
                "metadata key `{}` is {}: an MPT without ALiBi (`attn_config.alibi` false) has no positions in llama.cpp and is not built; transformers' MptModel runs ALiBi with a maximum of 8",
                key("attention.max_alibi_bias"),
                if file.get(&key("attention.max_alibi_bias")).is_some() { "0" } else { "missing" }
            )))
        }
        Some(v) => return Err(err(format!("metadata key `{}` is {v}: transformers' MptModel builds its ALiBi slopes with a maximum of 8, so only 8 is built", key("attention.max_alibi_bias")))),
    }
    let mut attn = Map::new();
    attn.insert("alibi".into(), json!(true));
    attn.insert("alibi_bias_max".into(), json!(8));
    match float("attention.clamp_kqv")? {
        None | Some(0.0) => {}
        Some(v) if v.is_finite() && v > 0.0 => {
            attn.insert("clip_qkv".into(), json!(v as f32 as f64));
        }
        Some(v) => return Err(err(format!("metadata key `{}` is {v}: a clamp must be positive", key("attention.clamp_kqv")))),
    }
    c.insert("attn_config".into(), Json::Object(attn));
    c.insert("no_bias".into(), json!(true));
    alibi_common(c, file, "MPT", "max_seq_len", key, err)
}

/// DBRX (`DbrxModel`, `LLM_ARCH_DBRX`): the keys as DbrxConfig's nested objects
/// (`attn_config`: `kv_n_heads`, `clip_qkv` from `attention.clamp_kqv`, `rope_theta`;
/// `ffn_config`: `ffn_hidden_size` from `feed_forward_length`, `moe_num_experts`, `moe_top_k`),
/// the context `max_seq_len`. llama.cpp's loader requires the LayerNorm epsilon (DBRX's fixed
/// 1e-5: another is refused), the clamp (0: none) and `output.weight`; its graph always
/// renormalizes the chosen experts' weights to sum 1 (`norm_w` true in `dbrx.cpp`, no key),
/// DBRX's `moe_normalize_expert_weights` 1, and runs SiLU experts.
#[allow(clippy::too_many_arguments)]
fn dbrx_config(c: &mut Map<String, Json>, file: &GgufFile, theta: f64, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    match float("attention.layer_norm_epsilon")? {
        Some(eps) if eps as f32 == 1e-5f32 => {}
        Some(eps) => return Err(err(format!("metadata key `{}` is {eps}: DBRX's LayerNorms run at 1e-5 in transformers and llama.cpp's converter", key("attention.layer_norm_epsilon")))),
        None => return Err(err(format!("metadata key `{}` is missing (llama.cpp's dbrx loader requires it)", key("attention.layer_norm_epsilon")))),
    }
    if !file.tensors.iter().any(|t| t.name == "output.weight") {
        return Err(err("has no `output.weight`: DBRX's head is its own (llama.cpp's dbrx loader requires it, transformers refuses a tied DBRX)".into()));
    }
    let need = |k: &str| uint(k)?.ok_or_else(|| err(format!("metadata key `{}` is missing (llama.cpp's dbrx loader requires it)", key(k))));
    let (experts, top_k) = (need("expert_count")?, need("expert_used_count")?);
    if experts == 0 || top_k == 0 || top_k > experts {
        return Err(err(format!("metadata keys `{}` ({experts}) and `{}` ({top_k}) must route over at least one expert, at most as many as there are", key("expert_count"), key("expert_used_count"))));
    }
    let mut attn = Map::new();
    attn.insert("kv_n_heads".into(), c.get("num_key_value_heads").cloned().unwrap_or(Json::Null));
    attn.insert("rope_theta".into(), json!(theta));
    match float("attention.clamp_kqv")? {
        None => return Err(err(format!("metadata key `{}` is missing (llama.cpp's dbrx loader requires it; 0 is no clamp)", key("attention.clamp_kqv")))),
        Some(0.0) => {}
        Some(v) if v.is_finite() && v > 0.0 => {
            attn.insert("clip_qkv".into(), json!(v as f32 as f64));
        }
        Some(v) => return Err(err(format!("metadata key `{}` is {v}: a clamp must be positive", key("attention.clamp_kqv")))),
    }
    let ff = c.get("intermediate_size").cloned().unwrap_or(Json::Null);
    let ffn = json!({"ffn_hidden_size": ff, "moe_num_experts": experts, "moe_top_k": top_k, "moe_normalize_expert_weights": 1, "ffn_act_fn": {"name": "silu"}});
    c.insert("attn_config".into(), Json::Object(attn));
    c.insert("ffn_config".into(), ffn);
    // Read by the import's expert shapes ([`ExpertShape::of`]) before the family's nested keys.
    c.insert("moe_num_experts".into(), json!(experts));
    if let Some(ctx) = c.remove("max_position_embeddings") {
        c.insert("max_seq_len".into(), ctx);
    }
    Ok(())
}

/// GPT-2 (`GPT2Model`, `LLM_ARCH_GPT2`): LayerNorm epsilon from `attention.layer_norm_epsilon`,
/// ggml's GELU (tanh: transformers' `gelu_new`), learned positions (`context_length` rows,
/// checked against `position_embd` by the family), no rope. The converter writes
/// `feed_forward_length` as 4 x hidden, which llama.cpp checks against `ffn_up`.
fn gpt2_config(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let eps = float("attention.layer_norm_epsilon")?.ok_or_else(|| err(format!("metadata key `{}` is missing", key("attention.layer_norm_epsilon"))))?;
    c.insert("layer_norm_epsilon".into(), json!(eps as f32 as f64));
    c.insert("hidden_act".into(), json!("gelu_new"));
    // The learned positions' count: llama.cpp requires the key, and without it the family's
    // default would not match `position_embd`.
    if !c.contains_key("max_position_embeddings") {
        return Err(err(format!("metadata key `{}` is missing: GPT-2's learned positions need it", key("context_length"))));
    }
    c.remove("rope_theta");
    check_ffn_up(c, file, key, err)
}

/// BERT (`BertModel`, `LLM_ARCH_BERT`): an encoder (`attention.causal` false; a causal file is
/// another model), LayerNorm epsilon from `attention.layer_norm_epsilon`, GELU (ggml's is the
/// tanh form, transformers' BERT default the exact one: `hidden_act` `gelu`, as the
/// checkpoint llama.cpp converts states it), learned positions (`context_length` rows), token
/// types from `tokenizer.ggml.token_type_count` (the converter writes the config's
/// `type_vocab_size`), the padding id from `tokenizer.ggml.padding_token_id`.
fn bert_config(c: &mut Map<String, Json>, file: &GgufFile, float: Read<f64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let eps = float("attention.layer_norm_epsilon")?.ok_or_else(|| err(format!("metadata key `{}` is missing", key("attention.layer_norm_epsilon"))))?;
    match file.get(&key("attention.causal")) {
        None => {}
        Some(v) if v.as_bool() == Some(false) => {}
        Some(v) => return Err(err(format!("metadata key `{}` is {}: a bert file is a bidirectional encoder; a causal one is another model", key("attention.causal"), shown(v)))),
    }
    c.insert("layer_norm_eps".into(), json!(eps as f32 as f64));
    c.insert("hidden_act".into(), json!("gelu"));
    c.remove("rope_theta");
    if !c.contains_key("max_position_embeddings") {
        return Err(err(format!("metadata key `{}` is missing: BERT's learned positions need it", key("context_length"))));
    }
    // The converter writes the count; without it, the token-type table's rows say it.
    let types = match file.get("tokenizer.ggml.token_type_count") {
        None => file.tensors.iter().find(|t| t.name == "token_types.weight").and_then(|t| t.dims.get(1).copied()).unwrap_or(1) as u64,
        Some(v) => v.as_u64().filter(|&n| n > 0).ok_or_else(|| err(format!("metadata key `tokenizer.ggml.token_type_count` is {}, not a positive integer", shown(v))))?,
    };
    c.insert("type_vocab_size".into(), json!(types));
    if let Some(pad) = file.get("tokenizer.ggml.padding_token_id").and_then(Value::as_u64) {
        c.insert("pad_token_id".into(), json!(pad));
    }
    Ok(())
}

/// The pooling a bert file states (`bert.pooling_type`, which the converter writes from the
/// sentence-transformers Pooling config).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GgufPooling {
    /// MEAN (1) or CLS (2): built as the sentence-embedding task.
    Mode(crate::tasks::pooling::PoolingMode),
    /// LAST (3), RANK (4) or another value: not built (why, naming the key and value); the
    /// file still builds as feature extraction.
    Unbuilt(String),
}

/// A metadata value as the message shows it: `3`, `true`, or its debug form.
fn shown(v: &Value) -> String {
    v.as_u64().map(|n| n.to_string()).or_else(|| v.as_bool().map(|b| b.to_string())).unwrap_or_else(|| format!("{v:?}"))
}

/// The pooling a bert file states; `None` for other architectures (whose `pooling_type`, a
/// reranker's RANK for one, is not read), and for NONE (0) or no key (feature extraction). The
/// file says nothing of a Normalize module: llama.cpp's model returns the pooled vector and its
/// tools normalize it on request, so the vector is not normalized here either.
pub(crate) fn pooling_of(file: &GgufFile) -> Option<GgufPooling> {
    use crate::tasks::pooling::PoolingMode;
    if file.get("general.architecture").and_then(Value::as_str) != Some("bert") {
        return None;
    }
    let v = file.get("bert.pooling_type")?;
    Some(match v.as_u64() {
        Some(0) => return None,
        Some(1) => GgufPooling::Mode(PoolingMode::Mean),
        Some(2) => GgufPooling::Mode(PoolingMode::Cls),
        _ => GgufPooling::Unbuilt(format!(
            "metadata key `bert.pooling_type` is {}: only MEAN (1) and CLS (2) pooling are built as sentence-embedding (LAST (3), sentence-transformers' last-token mode, and RANK (4), a reranker's head, are not); use --task feature-extraction",
            shown(v)
        )),
    })
}

/// `feed_forward_length` against `blk.0.ffn_up.weight`'s rows, as llama.cpp's tensor shapes
/// check it (phi2 and gpt2, whose converters write 4 x hidden whatever the checkpoint has).
fn check_ffn_up(c: &Map<String, Json>, file: &GgufFile, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let ff = c.get("intermediate_size").and_then(Json::as_u64).unwrap_or(0);
    if let Some(up) = file.tensors.iter().find(|t| t.name == "blk.0.ffn_up.weight") {
        if up.dims.get(1).copied() != Some(ff as usize) {
            return Err(err(format!("metadata key `{}` is {ff} but `blk.0.ffn_up.weight` has {:?} (llama.cpp refuses such a file too)", key("feed_forward_length"), up.dims)));
        }
    }
    Ok(())
}

/// OLMo (`OlmoModel`, `LLM_ARCH_OLMO`): LayerNorms without weight or bias at transformers'
/// fixed epsilon 1e-5 (the converter writes that value; another is refused, since the family
/// cannot take it), and q/k/v clamped to `attention.clamp_kqv` when set (`clip_qkv`; absent or 0:
/// no clamp, as llama.cpp's graph).
fn olmo_config(c: &mut Map<String, Json>, float: Read<f64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    if let Some(eps) = float("attention.layer_norm_epsilon")? {
        if eps as f32 != 1e-5f32 {
            return Err(err(format!("metadata key `{}` is {eps}: OLMo's LayerNorm epsilon is 1e-5 in transformers and llama.cpp's converter", key("attention.layer_norm_epsilon"))));
        }
    }
    match float("attention.clamp_kqv")? {
        None | Some(0.0) => {}
        Some(v) if v.is_finite() && v > 0.0 => {
            c.insert("clip_qkv".into(), json!(v as f32 as f64));
        }
        Some(v) => return Err(err(format!("metadata key `{}` is {v}: a clamp must be positive", key("attention.clamp_kqv")))),
    }
    Ok(())
}

/// SmolLM3 (`LLM_ARCH_SMOLLM3`): the file states no NoPE layers; llama.cpp's loader fixes
/// `n_no_rope_layer_step = 4` and skips RoPE where `(layer + 1) % 4 == 0`, which is
/// transformers' default `no_rope_layers` for `no_rope_layer_interval` 4. Written as that list.
fn smollm3_config(c: &mut Map<String, Json>) {
    let layers = c.get("num_hidden_layers").and_then(Json::as_u64).unwrap_or(0);
    let rotates: Vec<u64> = (0..layers).map(|i| u64::from(!(i + 1).is_multiple_of(4))).collect();
    c.insert("no_rope_layer_interval".into(), json!(4));
    c.insert("no_rope_layers".into(), json!(rotates));
    c.insert("mlp_bias".into(), json!(false));
}

/// The Gemma keys of the config: what the file states, else what llama.cpp's loader assumes
/// for the architecture (see the module doc). `c` already holds the common keys.
fn gemma_config(c: &mut Map<String, Json>, kind: Kind, float: Read<f64>, uint: Read<u64>, key: &dyn Fn(&str) -> String, err: &dyn Fn(String) -> Error) -> Result<()> {
    let n = |k: &str| c.get(k).and_then(Json::as_u64).unwrap_or(0);
    let (layers, hidden, heads, head_dim) = (n("num_hidden_layers"), n("hidden_size"), n("num_attention_heads"), n("head_dim"));
    c.insert("hidden_activation".into(), json!("gelu_pytorch_tanh"));
    c.insert("attention_bias".into(), json!(false));
    // llama.cpp: 1/sqrt(head size), except the 27B models (known by their layer count).
    let big = match kind {
        Kind::Gemma2 => layers == 46,
        Kind::Gemma3 => layers == 62,
        _ => false,
    };
    let scalar = if big { hidden / heads.max(1) } else { head_dim };
    match kind {
        Kind::Gemma2 => {
            c.insert("query_pre_attn_scalar".into(), json!(scalar));
            c.insert("attn_logit_softcapping".into(), json!(float("attn_logit_softcapping")?.unwrap_or(50.0) as f32 as f64));
            c.insert("final_logit_softcapping".into(), json!(float("final_logit_softcapping")?.unwrap_or(30.0) as f32 as f64));
            c.insert("sliding_window".into(), json!(uint("attention.sliding_window")?.unwrap_or(4096)));
            let types: Vec<&str> = (0..layers).map(|i| if i % 2 == 0 { "sliding_attention" } else { "full_attention" }).collect();
            c.insert("layer_types".into(), json!(types));
        }
        Kind::Gemma3 => {
            c.insert("query_pre_attn_scalar".into(), json!(scalar));
            c.insert("attn_logit_softcapping".into(), Json::Null);
            c.insert("final_logit_softcapping".into(), float("final_logit_softcapping")?.map_or(Json::Null, |v| json!(v as f32 as f64)));
            let window = uint("attention.sliding_window")?.ok_or_else(|| err(format!("metadata key `{}` is missing (llama.cpp requires it for gemma3)", key("attention.sliding_window"))))?;
            c.insert("sliding_window".into(), json!(window));
            let types: Vec<&str> = (0..layers).map(|i| if i % 6 < 5 { "sliding_attention" } else { "full_attention" }).collect();
            c.insert("layer_types".into(), json!(types));
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A restacked `attn_qkv` (all q heads, all k heads, all v heads) back in the family's
    /// groups: the packed rows' order and the float view agree, and each group holds its query
    /// heads, then its key and value head. GPT-NeoX: a group per head, one query each; Falcon:
    /// two query heads per key/value group.
    #[test]
    fn restacked_qkv_rows_go_back_per_group() {
        for (groups, queries, d) in [(2usize, 1usize, 3usize), (2, 2, 3), (1, 4, 2)] {
            let g = QkvGroups { groups, queries };
            let rows = groups * (queries + 2) * d;
            let order = g.rows(rows);
            // The converter's restack of labelled family rows (FalconModel / GPTNeoXModel): the rows
            // seen as [groups, queries + 2, d], then every group's queries, every group's key,
            // every group's value, concatenated.
            let family: Vec<f32> = (0..rows).map(|r| r as f32).collect();
            let block = |grp: usize, j: usize| family[(grp * (queries + 2) + j) * d..][..d].to_vec();
            let mut file = Vec::new();
            for grp in 0..groups {
                for j in 0..queries {
                    file.extend(block(grp, j));
                }
            }
            for part in [queries, queries + 1] {
                for grp in 0..groups {
                    file.extend(block(grp, part));
                }
            }
            let back: Vec<f32> = order.iter().map(|&f| file[f as usize]).collect();
            assert_eq!(back, (0..rows).map(|r| r as f32).collect::<Vec<_>>(), "rows, {groups} groups of {queries}");
            let view = g.float(Recipe::from_f32("qkv", vec![rows], &file), &[rows]).unwrap();
            let got: Vec<f32> = view.materialize().unwrap().chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
            assert_eq!(got, back, "float view, {groups} groups of {queries}");
        }
    }

    #[test]
    fn the_row_order_undoes_llama_cpps_permutation() {
        // llama.cpp: rows [heads, 2, hd/2] -> [heads, hd/2, 2]. Permute a labelled weight the
        // converter's way, then read it back through the order.
        let (heads, hd) = (3, 8);
        let rows = heads * hd;
        let hf: Vec<usize> = (0..rows).collect();
        let mut gguf = vec![0; rows];
        for h in 0..heads {
            for s in 0..2 {
                for j in 0..hd / 2 {
                    gguf[h * hd + j * 2 + s] = hf[h * hd + s * hd / 2 + j];
                }
            }
        }
        let order = unpermuted_rows(rows, heads);
        let back: Vec<usize> = order.iter().map(|&r| gguf[r as usize]).collect();
        assert_eq!(back, hf);
        // The float recipe does the same.
        let values: Vec<f32> = gguf.iter().flat_map(|&r| [r as f32, r as f32 + 0.5]).collect();
        let r = unpermute_float(Recipe::from_f32("w", vec![rows, 2], &values), &[rows, 2], heads);
        let got = r.materialize().unwrap();
        let got: Vec<f32> = got.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let want: Vec<f32> = hf.iter().flat_map(|&r| [r as f32, r as f32 + 0.5]).collect();
        assert_eq!(got, want);
    }

    /// A GGUF v3 file of `meta` (u32, f32 or string values) and F32 / Q8_0 tensors (name, ggml
    /// type, ne), zero data except the F32 tensors of `values`, which hold those values.
    fn file_with(meta: &[(&str, Json)], tensors: &[(&str, u32, Vec<u64>)], values: &[(&str, Vec<f32>)]) -> Vec<u8> {
        let mut b = Vec::new();
        let s = |b: &mut Vec<u8>, v: &str| {
            b.extend((v.len() as u64).to_le_bytes());
            b.extend(v.as_bytes());
        };
        b.extend(b"GGUF");
        b.extend(3u32.to_le_bytes());
        b.extend((tensors.len() as u64).to_le_bytes());
        b.extend((meta.len() as u64).to_le_bytes());
        for (k, v) in meta {
            s(&mut b, k);
            match v {
                Json::String(t) => {
                    b.extend(8u32.to_le_bytes());
                    s(&mut b, t);
                }
                Json::Number(n) if n.is_f64() => {
                    b.extend(6u32.to_le_bytes());
                    b.extend((n.as_f64().unwrap() as f32).to_le_bytes());
                }
                Json::Number(n) => {
                    b.extend(4u32.to_le_bytes());
                    b.extend((n.as_u64().unwrap() as u32).to_le_bytes());
                }
                Json::Bool(v) => {
                    b.extend(7u32.to_le_bytes());
                    b.push(u8::from(*v));
                }
                Json::Array(items) if items.iter().all(Json::is_boolean) => {
                    // An array of bools (a sliding-window pattern).
                    b.extend(9u32.to_le_bytes());
                    b.extend(7u32.to_le_bytes());
                    b.extend((items.len() as u64).to_le_bytes());
                    items.iter().for_each(|t| b.push(u8::from(t.as_bool() == Some(true))));
                }
                Json::Array(items) if items.iter().all(Json::is_f64) => {
                    // An array of f32 (Apertus's per-layer xIELU scalars).
                    b.extend(9u32.to_le_bytes());
                    b.extend(6u32.to_le_bytes());
                    b.extend((items.len() as u64).to_le_bytes());
                    items.iter().for_each(|t| b.extend((t.as_f64().unwrap() as f32).to_le_bytes()));
                }
                Json::Array(items) if !items.is_empty() && items.iter().all(Json::is_u64) => {
                    // An array of int32 (multimodal RoPE sections, as gguf-py writes Python ints).
                    b.extend(9u32.to_le_bytes());
                    b.extend(5u32.to_le_bytes());
                    b.extend((items.len() as u64).to_le_bytes());
                    items.iter().for_each(|t| b.extend((t.as_u64().unwrap() as i32).to_le_bytes()));
                }
                Json::Array(items) => {
                    // An array of strings (a token list).
                    b.extend(9u32.to_le_bytes());
                    b.extend(8u32.to_le_bytes());
                    b.extend((items.len() as u64).to_le_bytes());
                    items.iter().for_each(|t| s(&mut b, t.as_str().expect("string items")));
                }
                _ => unreachable!(),
            }
        }
        let mut offset = 0u64;
        let mut sizes = Vec::new();
        for (name, ty, ne) in tensors {
            s(&mut b, name);
            b.extend((ne.len() as u32).to_le_bytes());
            ne.iter().for_each(|d| b.extend(d.to_le_bytes()));
            b.extend(ty.to_le_bytes());
            b.extend(offset.to_le_bytes());
            let n: u64 = ne.iter().product();
            let size = match ty {
                8 => n / 32 * 34,
                16 => n / 256 * 66,
                39 => n / 32 * 17,
                _ => n * 4,
            };
            let size = size.div_ceil(32) * 32;
            sizes.push(size);
            offset += size;
        }
        while b.len() % 32 != 0 {
            b.push(0);
        }
        let data = b.len();
        b.resize(data + offset as usize, 0);
        let mut at = 0;
        for ((name, ty, _), size) in tensors.iter().zip(&sizes) {
            if let Some((_, v)) = values.iter().find(|(n, _)| n == name) {
                assert_eq!(*ty, 0, "{name}: values are written for F32 tensors");
                for (i, x) in v.iter().enumerate() {
                    b[data + at + 4 * i..data + at + 4 * i + 4].copy_from_slice(&x.to_le_bytes());
                }
            }
            at += *size as usize;
        }
        b
    }

    fn llama_meta() -> Vec<(&'static str, Json)> {
        vec![
            ("general.architecture", json!("llama")),
            ("llama.embedding_length", json!(64)),
            ("llama.feed_forward_length", json!(128)),
            ("llama.block_count", json!(1)),
            ("llama.attention.head_count", json!(4)),
            ("llama.attention.head_count_kv", json!(2)),
            ("llama.attention.layer_norm_rms_epsilon", json!(1e-5f64)),
            ("llama.rope.freq_base", json!(10000.5f64)),
        ]
    }

    fn llama_tensors() -> Vec<(&'static str, u32, Vec<u64>)> {
        let mut t = vec![("token_embd.weight", 8, vec![64, 32]), ("output_norm.weight", 0, vec![64]), ("blk.0.attn_norm.weight", 0, vec![64]), ("blk.0.ffn_norm.weight", 0, vec![64])];
        t.extend([("blk.0.attn_q.weight", 8, vec![64, 64]), ("blk.0.attn_k.weight", 0, vec![64, 32]), ("blk.0.attn_v.weight", 8, vec![64, 32]), ("blk.0.attn_output.weight", 8, vec![64, 64])]);
        t.extend([("blk.0.ffn_gate.weight", 8, vec![64, 128]), ("blk.0.ffn_up.weight", 8, vec![64, 128]), ("blk.0.ffn_down.weight", 8, vec![128, 64])]);
        t
    }

    /// `general.architecture` and `base`'s keys under `{arch}.`, each of `extra` replacing or
    /// adding one, `drop` left out.
    fn arch_meta(arch: &str, base: &[(&str, Json)], extra: &[(&str, Json)], drop: &str) -> Vec<(String, Json)> {
        let mut m: Vec<(String, Json)> = vec![("general.architecture".into(), json!(arch))];
        for (k, v) in base.iter().chain(extra) {
            m.retain(|(have, _)| have != &format!("{arch}.{k}"));
            if *k != drop {
                m.push((format!("{arch}.{k}"), v.clone()));
            }
        }
        m
    }

    fn import_of(meta: &[(&str, Json)], tensors: &[(&str, u32, Vec<u64>)]) -> Result<Imported> {
        import_with(meta, tensors, &[])
    }

    fn import_with(meta: &[(&str, Json)], tensors: &[(&str, u32, Vec<u64>)], values: &[(&str, Vec<f32>)]) -> Result<Imported> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, file_with(meta, tensors, values)).unwrap();
        let r = import(&path);
        drop(dir);
        r
    }

    /// llama.cpp's split files: the first holds the metadata, each `split.*` and its own tensors.
    fn write_split(dir: &Path, stem: &str, meta: &[(&str, Json)], files: &[&[(&str, u32, Vec<u64>)]], values: &[(&str, Vec<f32>)], total: usize) -> Vec<PathBuf> {
        let count = files.len();
        files
            .iter()
            .enumerate()
            .map(|(no, tensors)| {
                let mut m: Vec<(&str, Json)> = if no == 0 { meta.to_vec() } else { vec![] };
                m.extend([("split.no", json!(no)), ("split.count", json!(count)), ("split.tensors.count", json!(total))]);
                let path = dir.join(format!("{stem}-{:05}-of-{count:05}.gguf", no + 1));
                std::fs::write(&path, file_with(&m, tensors, values)).unwrap();
                path
            })
            .collect()
    }

    /// A split set imports as the one file of the same tensors: each tensor read from the file
    /// that holds it, with the values it holds there, and the same config.
    #[test]
    fn a_split_set_is_read_as_the_one_file() {
        let dir = tempfile::tempdir().unwrap();
        let tensors = llama_tensors();
        let values = [
            ("output_norm.weight", (0..64).map(|i| i as f32 * 0.5).collect::<Vec<f32>>()),
            ("blk.0.ffn_norm.weight", (0..64).map(|i| 1.0 - i as f32).collect()),
            ("blk.0.attn_k.weight", (0..64 * 32).map(|i| (i % 97) as f32 - 40.0).collect()),
        ];
        let one = dir.path().join("one.gguf");
        std::fs::write(&one, file_with(&llama_meta(), &tensors, &values)).unwrap();
        let (a, rest) = tensors.split_at(2);
        let (b, c) = rest.split_at(4);
        let paths = write_split(dir.path(), "m", &llama_meta(), &[a, b, c], &values, tensors.len());
        let (single, split) = (import(&one).unwrap(), import(&paths[0]).unwrap());
        assert_eq!(split.file.shards.iter().map(|f| f.path.clone()).collect::<Vec<_>>(), paths);
        assert_eq!(single.config, split.config);
        assert_eq!(single.tensors.keys().collect::<Vec<_>>(), split.tensors.keys().collect::<Vec<_>>());
        for (name, t) in &split.tensors {
            let bytes = |t: &SourceTensor| Recipe::source(t.clone()).materialize().unwrap();
            assert_eq!(bytes(t), bytes(&single.tensors[name]), "{name}");
        }
        for (name, v) in &split.views {
            assert_eq!(v.materialize().unwrap(), single.views[name].materialize().unwrap(), "{name}");
        }
        // Each weight reads the file holding it: attn_k (a permuted float view) and ffn_norm
        // in the second, the Q8_0 MLP in the third.
        assert!(split.views["model.layers.0.self_attn.k_proj.weight"].sources().iter().all(|t| t.file.path == paths[1]));
        assert_eq!(split.tensors["model.layers.0.post_attention_layernorm.weight"].file.path, paths[1]);
        assert_eq!(split.packed["model.layers.0.mlp.down_proj.weight"].file_path(), paths[2]);
        assert!(split.source.unwrap().origin.contains("m-00001-of-00003.gguf and the 2 other files"));
        // A folder of exactly one split set is that model; another GGUF beside it is not.
        std::fs::remove_file(&one).unwrap();
        assert_eq!(gguf_file(dir.path()).unwrap(), Some(paths[0].clone()));
        std::fs::write(dir.path().join("other.gguf"), b"").unwrap();
        assert!(gguf_file(dir.path()).unwrap_err().to_string().contains("holds 4 GGUF files"));
        // The extension in capitals, as the whole set spells it.
        let caps = tempfile::tempdir().unwrap();
        let upper: Vec<PathBuf> = write_split(caps.path(), "m", &llama_meta(), &[a, b, c], &values, tensors.len())
            .into_iter()
            .map(|p| {
                let q = p.with_extension("GGUF");
                std::fs::rename(&p, &q).unwrap();
                q
            })
            .collect();
        assert_eq!(import(&upper[0]).unwrap().file.shards.iter().map(|f| f.path.clone()).collect::<Vec<_>>(), upper);
    }

    /// What is wrong with a split set is said with the file and how to fix it.
    #[test]
    fn broken_split_sets_are_refused_naming_the_file() {
        let tensors = llama_tensors();
        let (a, b) = tensors.split_at(5);
        let err = |f: &dyn Fn(&Path) -> PathBuf| {
            let dir = tempfile::tempdir().unwrap();
            let path = f(dir.path());
            import(&path).err().expect("refused").to_string()
        };
        let set = |dir: &Path, total| write_split(dir, "m", &llama_meta(), &[a, b], &[], total);
        let e = err(&|d| set(d, tensors.len())[1].clone());
        assert!(e.contains("file 2 of a GGUF split into 2") && e.contains("`m-00001-of-00002.gguf`"), "{e}");
        let e = err(&|d| {
            let p = set(d, tensors.len());
            std::fs::remove_file(&p[1]).unwrap();
            p[0].clone()
        });
        assert!(e.contains("m-00001-of-00002.gguf: is the first of 2 split files; file 2 of 2, `") && e.contains("m-00002-of-00002.gguf`, is not beside it"), "{e}");
        let e = err(&|d| set(d, tensors.len() + 1)[0].clone());
        assert!(e.contains("`split.tensors.count` is 12, but its 2 files hold 11 tensors"), "{e}");
        // The same tensor in two files.
        let e = err(&|d| {
            let twice: Vec<_> = b.iter().cloned().chain([a[0].clone()]).collect();
            write_split(d, "m", &llama_meta(), &[a, &twice], &[], tensors.len() + 1)[0].clone()
        });
        assert!(e.contains("holds tensor `token_embd.weight`, which an earlier file"), "{e}");
        // A file renamed into the set, or a first file not named as llama.cpp names it.
        let e = err(&|d| {
            let p = set(d, tensors.len());
            std::fs::write(&p[1], file_with(&[("split.no", json!(0)), ("split.count", json!(2))], b, &[])).unwrap();
            p[0].clone()
        });
        assert!(e.contains("says it is file 1 of 2, but its name makes it file 2 of 2"), "{e}");
        let e = err(&|d| {
            let p = set(d, tensors.len());
            let renamed = d.join("model.gguf");
            std::fs::rename(&p[0], &renamed).unwrap();
            renamed
        });
        assert!(e.contains("its name does not end in `-00001-of-00002.gguf`"), "{e}");
        // Named as a set in a folder, but the first file says it is not split.
        let dir = tempfile::tempdir().unwrap();
        let p = set(dir.path(), tensors.len());
        std::fs::write(&p[0], file_with(&llama_meta(), a, &[])).unwrap();
        let e = gguf_file(dir.path()).unwrap_err().to_string();
        assert!(e.contains("named as one split set, but `m-00001-of-00002.gguf` is not split"), "{e}");
    }

    /// Generation stops at the EOS, the end-of-turn / end-of-message ids the file names, and
    /// the tokens llama.cpp stops at by their text; the EOS stays first.
    #[test]
    fn end_of_generation_ids_gather_the_eos_and_the_end_of_turn_tokens() {
        // 32 tokens `t<i>`, but the special ones given.
        let vocab = |special: &[(usize, &str)]| -> Vec<String> {
            (0..32).map(|i| special.iter().find(|(at, _)| *at == i).map_or_else(|| format!("t{i}"), |(_, t)| t.to_string())).collect()
        };
        let mut m = llama_meta();
        let tokens = vocab(&[(5, "<end_of_turn>"), (7, "<|eom_id|>"), (9, "<|end|>")]);
        m.push(("tokenizer.ggml.eos_token_id", json!(1)));
        m.push(("tokenizer.ggml.eot_token_id", json!(12)));
        m.push(("tokenizer.ggml.tokens", json!(tokens)));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, file_with(&m, &llama_tensors(), &[])).unwrap();
        let file = GgufFile::open(&path).unwrap();
        assert_eq!(end_of_generation_ids(&file), vec![1, 12, 5, 7, 9]);
        let c = import(&path).unwrap().config;
        assert_eq!(c["eos_token_id"], json!([1, 12, 5, 7, 9]));
        // gpt-oss: with `<|return|>` and `<|call|>`, `<|end|>` ends a message, not the reply.
        let mut harmony = llama_meta();
        harmony.push(("tokenizer.ggml.eos_token_id", json!(4)));
        harmony.push(("tokenizer.ggml.tokens", json!(vocab(&[(3, "<|endoftext|>"), (4, "<|return|>"), (6, "<|end|>"), (8, "<|call|>")]))));
        let c = import_of(&harmony, &llama_tensors()).unwrap().config;
        assert_eq!(c["eos_token_id"], json!([4, 3, 8]));
        // Only an EOS: one id, as the file gives it.
        let c = import_of(&[llama_meta(), vec![("tokenizer.ggml.eos_token_id", json!(2))]].concat(), &llama_tensors()).unwrap().config;
        assert_eq!(c["eos_token_id"], json!(2));
    }

    /// An i-quant the import has no exact form for (IQ2_XXS) opens, and its import is refused
    /// naming the tensor, the type and the types it takes.
    #[test]
    fn an_iquant_tensor_is_refused_naming_what_is_imported() {
        let meta: Vec<(&str, Json)> = llama_meta()
            .into_iter()
            .map(|(k, v)| match k {
                "llama.embedding_length" | "llama.feed_forward_length" => (k, json!(256)),
                _ => (k, v),
            })
            .collect();
        let q8 = |name: &'static str, dims: [u64; 2]| (name, 8u32, dims.to_vec());
        let mut t = vec![q8("token_embd.weight", [256, 32]), ("output_norm.weight", 0, vec![256]), ("blk.0.attn_norm.weight", 0, vec![256]), ("blk.0.ffn_norm.weight", 0, vec![256])];
        t.extend([("blk.0.attn_q.weight", 16, vec![256, 256]), q8("blk.0.attn_k.weight", [256, 128]), q8("blk.0.attn_v.weight", [256, 128]), q8("blk.0.attn_output.weight", [256, 256])]);
        t.extend([q8("blk.0.ffn_gate.weight", [256, 256]), q8("blk.0.ffn_up.weight", [256, 256]), q8("blk.0.ffn_down.weight", [256, 256])]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, file_with(&meta, &t, &[])).unwrap();
        let file = GgufFile::open(&path).unwrap();
        assert_eq!(file.tensors.iter().find(|x| x.name == "blk.0.attn_q.weight").unwrap().ggml_type.name(), "IQ2_XXS");
        let e = import(&path).err().expect("refused").to_string();
        assert!(e.contains("`blk.0.attn_q.weight` is IQ2_XXS") && e.contains("Q4_K") && e.contains("Q8_0"), "{e}");
    }

    /// Old convert.py files from Meta's .pth checkpoints state their layout, the one every
    /// llama file has; another value is refused by key.
    #[test]
    fn a_llama_files_tensor_data_layout_is_read() {
        let meta = |v: &str| [llama_meta(), vec![("llama.tensor_data_layout", json!(v))]].concat();
        assert!(import_of(&meta("Meta AI original pth"), &llama_tensors()).is_ok());
        let e = import_of(&meta("transposed"), &llama_tensors()).err().expect("refused").to_string();
        assert!(e.contains("`llama.tensor_data_layout`") && e.contains("Meta AI original pth"), "{e}");
    }

    #[test]
    fn the_config_comes_from_the_metadata_and_tensors_from_their_names() {
        let i = import_of(&llama_meta(), &llama_tensors()).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["hidden_size"].as_u64(), c["num_key_value_heads"].as_u64(), c["head_dim"].as_u64()), (Some("llama"), Some(64), Some(2), Some(16)));
        assert_eq!((c["tie_word_embeddings"].as_bool(), c["rope_theta"].as_f64(), c["vocab_size"].as_u64()), (Some(true), Some(10000.5), Some(32)));
        assert!(i.packed.contains_key("model.layers.0.self_attn.q_proj.weight") && i.packed.contains_key("model.embed_tokens.weight"));
        // A float k is read through the un-permuting recipe; norms as they are.
        assert!(i.views.contains_key("model.layers.0.self_attn.k_proj.weight") && i.tensors.contains_key("model.norm.weight"));
        assert_eq!(i.source.as_ref().unwrap().types, vec![("F32".to_string(), 4), ("Q8_0".to_string(), 7)]);
        assert!(i.source.as_ref().unwrap().lm_head, "the tied head reads the Q8_0 table");
    }

    #[test]
    fn what_is_not_mapped_is_refused_by_name() {
        let e = |meta: Vec<(&str, Json)>, tensors: Vec<(&str, u32, Vec<u64>)>| import_of(&meta, &tensors).err().expect("refused").to_string();
        let mut m = llama_meta();
        m[0].1 = json!("rwkv7");
        assert!(e(m, llama_tensors()).contains("`general.architecture` is `rwkv7`"));
        let mut m = llama_meta();
        m.push(("llama.rope.scaling.type", json!("yarn")));
        assert!(e(m, llama_tensors()).contains("llama.rope.scaling.type"));
        let mut m = llama_meta();
        m.push(("llama.expert_count", json!(8)));
        assert!(e(m, llama_tensors()).contains("`llama.expert_count`"));
        let mut m = llama_meta();
        m.push(("llama.rope.dimension_count", json!(8)));
        assert!(e(m, llama_tensors()).contains("partial rotary"));
        // Rope factors of another length than head_dim / 2 (8 here).
        let mut t = llama_tensors();
        t.push(("rope_freqs.weight", 0, vec![4]));
        let got = e(llama_meta(), t);
        assert!(got.contains("`rope_freqs.weight`") && got.contains("8 values"), "{got}");
        let mut t = llama_tensors();
        t[4].1 = 9; // Q8_1: a layout, no MatMulNBits form
        let m = e(llama_meta(), t);
        assert!(m.contains("is Q8_1") && m.contains("Q5_K"), "{m}");
    }

    #[test]
    fn llama3_rope_factors_become_the_configs_freq_factors() {
        let factors = [1.0f32, 1.0, 1.0, 1.25, 2.5, 4.0, 4.0, 4.0];
        let mut t = llama_tensors();
        t.push((ROPE_FREQS, 0, vec![8]));
        let i = import_with(&llama_meta(), &t, &[(ROPE_FREQS, factors.to_vec())]).unwrap();
        let want: Vec<f64> = factors.iter().map(|&f| f as f64).collect();
        assert_eq!(i.config["rope_scaling"], json!({"rope_type": "freq_factors", "factors": want}));
        // Not a weight: the family never sees it.
        assert!(!i.tensors.keys().chain(i.views.keys()).chain(i.packed.keys()).any(|n| n.contains("rope")));
        let c = crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(i.config.clone()).to_string()).unwrap();
        assert_eq!((c.rope.theta, c.rope.kind), (10000.5, crate::RopeKind::Factors { factors: want }));
        // F16 factors, a zero factor, and factors in a qwen2 file are refused by name.
        let mut t16 = llama_tensors();
        t16.push((ROPE_FREQS, 1, vec![8]));
        let e = import_of(&llama_meta(), &t16).err().expect("refused").to_string();
        assert!(e.contains("`rope_freqs.weight` is F16"), "{e}");
        let e = import_with(&llama_meta(), &t, &[(ROPE_FREQS, vec![1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])]).err().expect("refused").to_string();
        assert!(e.contains("`rope_freqs.weight` holds 0 at 2"), "{e}");
        let e = import_with(&as_ref(&meta_of("qwen2")), &t, &[(ROPE_FREQS, factors.to_vec())]).err().expect("refused").to_string();
        assert!(e.contains("`rope_freqs.weight`") && e.contains("not mapped for architecture qwen2"), "{e}");
    }

    /// Once the tokenizer is converted its metadata is dropped from the checkpoint's file (the
    /// file is not shared, so this frees it); the rest of the metadata stays.
    #[test]
    fn a_checkpoint_forgets_its_gguf_tokenizer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        let mut meta = llama_meta();
        meta.push(("tokenizer.ggml.model", json!("gpt2")));
        meta.push(("tokenizer.chat_template", json!("{{ messages }}")));
        std::fs::write(&path, file_with(&meta, &llama_tensors(), &[])).unwrap();
        let mut ckpt = crate::Checkpoint::open(&path).unwrap();
        let held = |c: &crate::Checkpoint, k: &str| c.gguf.as_ref().unwrap().get(k).is_some();
        assert!(held(&ckpt, "tokenizer.ggml.model") && held(&ckpt, "tokenizer.chat_template"));
        ckpt.forget_gguf_tokenizer();
        assert!(!held(&ckpt, "tokenizer.ggml.model") && !held(&ckpt, "tokenizer.chat_template"), "forgotten");
        assert!(held(&ckpt, "general.architecture"), "the rest stays");
    }

    /// `llama_meta` under another architecture's prefix.
    fn meta_of(arch: &str) -> Vec<(String, Json)> {
        llama_meta().into_iter().map(|(k, v)| if k == "general.architecture" { (k.to_string(), json!(arch)) } else { (k.replacen("llama.", &format!("{arch}."), 1), v) }).collect()
    }

    #[test]
    fn qwen3_files_map_the_qk_norms_and_keep_q_and_k_unpermuted() {
        let norms = ["blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight"];
        let mut t = llama_tensors();
        t.extend(norms.iter().map(|n| (*n, 0, vec![16])));
        let mut m = meta_of("qwen3");
        m.push(("qwen3.attention.key_length".into(), json!(16)));
        m.push(("qwen3.attention.value_length".into(), json!(16)));
        let i = import_of(&as_ref(&m), &t).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["head_dim"].as_u64(), c["attention_bias"].as_bool()), (Some("qwen3"), Some(16), Some(false)));
        // The float k is read as stored (no un-permuting view), the norms under the family's names.
        assert!(i.tensors.contains_key("model.layers.0.self_attn.k_proj.weight") && i.views.is_empty());
        assert!(i.tensors.contains_key("model.layers.0.self_attn.q_norm.weight") && i.tensors.contains_key("model.layers.0.self_attn.k_norm.weight"));
        assert!(i.packed["model.layers.0.self_attn.q_proj.weight"].order().is_none());
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(i.config.clone()).to_string()).unwrap();
        // Experts and Llama 3 rope factors are not qwen3's.
        for extra in [("blk.0.ffn_gate_exps.weight", 0, vec![64, 32, 4]), (ROPE_FREQS, 0, vec![8])] {
            let mut t2 = t.clone();
            t2.push(extra.clone());
            let e = import_of(&as_ref(&m), &t2).err().expect("refused").to_string();
            assert!(e.contains(&format!("`{}`", extra.0)) && e.contains("not mapped for architecture qwen3"), "{e}");
        }
    }

    /// A one-layer MoE file of `arch`: llama_tensors' attention, a router and 4 experts of 32
    /// (Q8_0 gate/up, F32 down), plus `extra`.
    fn moe_tensors(extra: &[(&'static str, u32, Vec<u64>)]) -> Vec<(&'static str, u32, Vec<u64>)> {
        let mut t: Vec<_> = llama_tensors().into_iter().filter(|(n, ..)| !n.contains("ffn_gate.") && !n.contains("ffn_up.") && !n.contains("ffn_down.")).collect();
        t.extend([("blk.0.ffn_gate_inp.weight", 0, vec![64, 4]), ("blk.0.ffn_gate_exps.weight", 8, vec![64, 32, 4]), ("blk.0.ffn_up_exps.weight", 8, vec![64, 32, 4]), ("blk.0.ffn_down_exps.weight", 0, vec![32, 64, 4])]);
        t.extend(extra.iter().cloned());
        t
    }

    /// `feed_forward_length` 32 x `used`: llama.cpp's default expert size is then the stacks' 32
    /// rows (Mixtral's is the whole feed-forward length: `used` 1 there).
    fn moe_meta(arch: &str, used: u64) -> Vec<(String, Json)> {
        let ff = format!("{arch}.feed_forward_length");
        let mut m: Vec<(String, Json)> = meta_of(arch).into_iter().map(|(k, v)| if k == ff { (k, json!(32 * used)) } else { (k, v) }).collect();
        m.push((format!("{arch}.expert_count"), json!(4)));
        m.push((format!("{arch}.expert_used_count"), json!(used)));
        m
    }

    /// Mellum (`mellum`): Qwen3-MoE's reading with the window and its layers from the pattern,
    /// a RoPE base per layer type (`rope.freq_base_swa`, else the full one's), the renormalized
    /// softmax llama.cpp's graph fixes, `mlp_layer_types` from the routers; a pattern without a
    /// window is refused by name.
    #[test]
    fn mellum_files_read_windows_and_a_rope_base_per_layer_type() {
        let norms: [(&str, u32, Vec<u64>); 2] = [("blk.0.attn_q_norm.weight", 0, vec![16]), ("blk.0.attn_k_norm.weight", 0, vec![16])];
        let mut m = moe_meta("mellum", 2);
        m.extend([("mellum.attention.sliding_window".to_string(), json!(8)), ("mellum.attention.sliding_window_pattern".to_string(), json!([true])), ("mellum.rope.freq_base_swa".to_string(), json!(5000.0f64))]);
        let i = import_of(&as_ref(&m), &moe_tensors(&norms)).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["num_local_experts"].as_u64(), c["moe_intermediate_size"].as_u64(), c["norm_topk_prob"].as_bool()), (Some("mellum"), Some(4), Some(32), Some(true)));
        assert_eq!((c["sliding_window"].as_u64(), c["layer_types"].clone(), c["mlp_layer_types"].clone()), (Some(8), json!(["sliding_attention"]), json!(["sparse"])));
        assert_eq!(c["rope_parameters"], json!({"full_attention": {"rope_type": "default", "rope_theta": 10000.5}, "sliding_attention": {"rope_type": "default", "rope_theta": 5000.0}}));
        assert!(!c.contains_key("rope_theta"));
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(c.clone()).to_string()).unwrap();
        // No window: every layer full, the sliding base the full one's.
        let i = import_of(&as_ref(&moe_meta("mellum", 2)), &moe_tensors(&norms)).unwrap();
        assert_eq!((i.config["layer_types"].clone(), i.config["rope_parameters"]["sliding_attention"]["rope_theta"].as_f64()), (json!(["full_attention"]), Some(10000.5)));
        let mut m = moe_meta("mellum", 2);
        m.push(("mellum.attention.sliding_window_pattern".to_string(), json!([true])));
        let got = import_of(&as_ref(&m), &moe_tensors(&norms)).err().expect("refused").to_string();
        assert!(got.contains("`mellum.attention.sliding_window_pattern` is set without `mellum.attention.sliding_window`"), "{got}");
    }

    /// MiniCPM3 (`minicpm3`): the latent sizes from the ranks and key length, the value size left
    /// to MiniCPM3Config (hidden / heads), LongRoPE from the factor tensors with the context as
    /// the original length, no scaling keys (the family's defaults are llama.cpp's constants);
    /// refused by name: a missing rank, one factor set without the other.
    #[test]
    fn minicpm3_files_read_the_latent_sizes_and_longrope() {
        let meta = |q_rank: bool| -> Vec<(String, Json)> {
            let mut m: Vec<(String, Json)> = [
                ("general.architecture", json!("minicpm3")),
                ("minicpm3.context_length", json!(256)),
                ("minicpm3.embedding_length", json!(64)),
                ("minicpm3.block_count", json!(1)),
                ("minicpm3.feed_forward_length", json!(96)),
                ("minicpm3.attention.head_count", json!(4)),
                ("minicpm3.attention.head_count_kv", json!(4)),
                ("minicpm3.attention.layer_norm_rms_epsilon", json!(1e-5f64)),
                ("minicpm3.attention.kv_lora_rank", json!(24)),
                ("minicpm3.attention.key_length", json!(24)),
                ("minicpm3.rope.dimension_count", json!(8)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            if q_rank {
                m.push(("minicpm3.attention.q_lora_rank".into(), json!(32)));
            }
            m
        };
        let mut t = vec![("token_embd.weight", 0, vec![64, 32]), ("output_norm.weight", 0, vec![64]), ("blk.0.attn_norm.weight", 0, vec![64]), ("blk.0.ffn_norm.weight", 0, vec![64])];
        t.extend([("blk.0.attn_q_a.weight", 0, vec![64, 32]), ("blk.0.attn_q_a_norm.weight", 0, vec![32]), ("blk.0.attn_q_b.weight", 0, vec![32, 96])]);
        t.extend([("blk.0.attn_kv_a_mqa.weight", 0, vec![64, 32]), ("blk.0.attn_kv_a_norm.weight", 0, vec![24]), ("blk.0.attn_kv_b.weight", 0, vec![24, 128]), ("blk.0.attn_output.weight", 0, vec![64, 64])]);
        t.extend([("blk.0.ffn_gate.weight", 0, vec![64, 96]), ("blk.0.ffn_up.weight", 0, vec![64, 96]), ("blk.0.ffn_down.weight", 0, vec![96, 64])]);
        let factors = [(ROPE_LONG, vec![1.5f32; 4]), (ROPE_SHORT, vec![1.1f32; 4])];
        let mut with_factors = t.clone();
        with_factors.extend([(ROPE_LONG, 0, vec![4]), (ROPE_SHORT, 0, vec![4])]);
        let i = import_with(&as_ref(&meta(true)), &with_factors, &factors).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["q_lora_rank"].as_u64(), c["kv_lora_rank"].as_u64(), c["qk_nope_head_dim"].as_u64(), c["qk_rope_head_dim"].as_u64()), (Some("minicpm3"), Some(32), Some(24), Some(16), Some(8)));
        assert!(!c.contains_key("head_dim") && !c.contains_key("v_head_dim") && !c.contains_key("dim_model_base") && !c.contains_key("scale_emb"));
        assert_eq!(c["rope_scaling"]["rope_type"], json!("longrope"));
        assert_eq!((c["rope_scaling"]["original_max_position_embeddings"].as_u64(), c["rope_scaling"]["short_factor"][0].as_f64()), (Some(256), Some(1.100000023841858)));
        assert!(c["tie_word_embeddings"].as_bool().unwrap());
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(c.clone()).to_string()).unwrap();
        let got = import_of(&as_ref(&meta(false)), &t).err().expect("refused").to_string();
        assert!(got.contains("`minicpm3.attention.q_lora_rank` is missing"), "{got}");
        let mut one = t.clone();
        one.push((ROPE_LONG, 0, vec![4]));
        let got = import_with(&as_ref(&meta(true)), &one, &factors[..1]).err().expect("refused").to_string();
        assert!(got.contains("without the other"), "{got}");
    }

    /// Hy3 (`hy_v3`): HYV3Config's mixture keys from the file's (the shared width as a count of
    /// experts, the scale, dense layers where no router is); refused by name: softmax gating,
    /// no renormalization, no scale, a shared width that is not whole experts, a sparse layer
    /// without its correction bias.
    #[test]
    fn hy_v3_files_read_the_mixture_and_refuse_what_hy3_is_not() {
        let norms: [(&str, u32, Vec<u64>); 5] = [
            ("blk.0.attn_q_norm.weight", 0, vec![16]),
            ("blk.0.attn_k_norm.weight", 0, vec![16]),
            ("blk.0.exp_probs_b.bias", 0, vec![4]),
            ("blk.0.ffn_gate_shexp.weight", 8, vec![64, 64]),
            ("blk.0.ffn_up_shexp.weight", 8, vec![64, 64]),
        ];
        let mut t = moe_tensors(&norms);
        t.push(("blk.0.ffn_down_shexp.weight", 0, vec![64, 64]));
        let meta = |extra: &[(&str, Json)]| -> Vec<(String, Json)> {
            let mut m = moe_meta("hy_v3", 2);
            m.extend([("hy_v3.expert_feed_forward_length", json!(32)), ("hy_v3.expert_shared_feed_forward_length", json!(64)), ("hy_v3.expert_weights_scale", json!(2.5f64)), ("hy_v3.expert_weights_norm", json!(true)), ("hy_v3.expert_gating_func", json!(2))].map(|(k, v)| (k.to_string(), v)));
            for (k, v) in extra {
                m.retain(|(key, _)| key != k);
                m.push((k.to_string(), v.clone()));
            }
            m.retain(|(_, v)| !v.is_null());
            m
        };
        let i = import_of(&as_ref(&meta(&[])), &t).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["num_experts"].as_u64(), c["moe_intermediate_size"].as_u64(), c["num_shared_experts"].as_u64(), c["router_scaling_factor"].as_f64()), (Some("hy_v3"), Some(4), Some(32), Some(2), Some(2.5)));
        assert_eq!(c["mlp_layer_types"], json!(["sparse"]));
        assert!(i.tensors.contains_key("model.layers.0.mlp.expert_bias") && i.packed.contains_key("model.layers.0.mlp.shared_mlp.gate_proj.weight"));
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(c.clone()).to_string()).unwrap();
        // A scale of 0 is none (llama.cpp's graph skips it).
        let i = import_of(&as_ref(&meta(&[("hy_v3.expert_weights_scale", json!(0.0f64))])), &t).unwrap();
        assert_eq!(i.config["router_scaling_factor"].as_f64(), Some(1.0));
        for (extra, want) in [
            (("hy_v3.expert_gating_func", json!(1)), "is not sigmoid (2)"),
            (("hy_v3.expert_weights_norm", json!(false)), "`hy_v3.expert_weights_norm` is false or missing"),
            (("hy_v3.expert_weights_norm", Json::Null), "`hy_v3.expert_weights_norm` is false or missing"),
            (("hy_v3.expert_weights_scale", Json::Null), "`hy_v3.expert_weights_scale` is missing"),
            (("hy_v3.expert_shared_feed_forward_length", json!(48)), "whole number of experts"),
        ] {
            let got = import_of(&as_ref(&meta(&[extra])), &t).err().expect("refused").to_string();
            assert!(got.contains(want), "{want}: {got}");
        }
        let unbiased: Vec<_> = t.iter().filter(|(n, ..)| !n.ends_with("exp_probs_b.bias")).cloned().collect();
        let got = import_of(&as_ref(&meta(&[])), &unbiased).err().expect("refused").to_string();
        assert!(got.contains("`blk.0.exp_probs_b.bias`"), "{got}");
    }

    /// GraniteSWA (`granite_swa`): Granite's keys, the window and its layers from the pattern,
    /// `layer_rope_theta` from `attention.rope_pattern` and the one base, the sinks; with
    /// experts, GraniteMoeSWA (every layer routes, fused stacks under transformers 5's names);
    /// refused by name: no window pattern, a rope pattern of the wrong length, a shared MLP
    /// without its width.
    #[test]
    fn granite_swa_files_read_windows_nope_and_sinks() {
        let meta = |extra: &[(&str, Json)]| -> Vec<(String, Json)> {
            let mut m = meta_of("granite_swa");
            m.extend([("granite_swa.logit_scale", json!(4.0f64)), ("granite_swa.attention.sliding_window", json!(4)), ("granite_swa.attention.sliding_window_pattern", json!([true])), ("granite_swa.attention.rope_pattern", json!([false]))].map(|(k, v)| (k.to_string(), v)));
            for (k, v) in extra {
                m.retain(|(key, _)| key != k);
                m.push((k.to_string(), v.clone()));
            }
            m.retain(|(_, v)| !v.is_null());
            m
        };
        let mut t = llama_tensors();
        t.push(("blk.0.attn_sinks.weight", 0, vec![4]));
        let i = import_of(&as_ref(&meta(&[])), &t).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["sliding_window"].as_u64(), c["layer_types"].clone(), c["layer_rope_theta"].clone()), (Some("granite_swa"), Some(4), json!(["sliding_attention"]), json!([0.0])));
        assert!(i.tensors.contains_key("model.layers.0.self_attn.sinks"));
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(c.clone()).to_string()).unwrap();
        // No rope pattern: every layer rotates at the file's base.
        let i = import_of(&as_ref(&meta(&[("granite_swa.attention.rope_pattern", Json::Null)])), &t).unwrap();
        assert_eq!(i.config["layer_rope_theta"], json!([10000.5]));
        // With experts: GraniteMoeSWA, its fused stacks under transformers 5's names.
        let mut moe: Vec<_> = moe_tensors(&[]).into_iter().filter(|(n, ..)| !n.contains("gate_exps") && !n.contains("up_exps")).chain([("blk.0.ffn_gate_up_exps.weight", 8, vec![64, 64, 4]), ("blk.0.attn_sinks.weight", 0, vec![4])]).collect();
        moe.extend([("blk.0.ffn_up_shexp.weight", 8, vec![64, 96]), ("blk.0.ffn_down_shexp.weight", 0, vec![48, 64])]);
        let experts = [("granite_swa.expert_count", json!(4)), ("granite_swa.expert_used_count", json!(2)), ("granite_swa.feed_forward_length", json!(32)), ("granite_swa.expert_shared_feed_forward_length", json!(48))];
        let i = import_of(&as_ref(&meta(&experts)), &moe).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["num_local_experts"].as_u64(), c["shared_intermediate_size"].as_u64()), (Some("granitemoe_swa"), Some(4), Some(48)));
        assert!(!c.contains_key("moe_intermediate_size") && !c.contains_key("mlp_only_layers"), "the generic mixture reading stays out: {c:?}");
        assert_eq!(i.views["model.layers.0.block_sparse_moe.experts.gate_up_proj"].shape(), vec![4, 64, 64]);
        assert!(i.packed.contains_key("model.layers.0.shared_mlp.input_linear.weight"));
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(c.clone()).to_string()).unwrap();
        let refused = |m: Vec<(String, Json)>, t: &[(&str, u32, Vec<u64>)]| import_of(&as_ref(&m), t).err().expect("refused").to_string();
        assert!(refused(meta(&[("granite_swa.attention.sliding_window_pattern", Json::Null)]), &t).contains("`granite_swa.attention.sliding_window_pattern` is missing or not a list"));
        assert!(refused(meta(&[("granite_swa.attention.sliding_window_pattern", json!(4))]), &t).contains("is missing or not a list"));
        assert!(refused(meta(&[("granite_swa.attention.rope_pattern", json!([true, false]))]), &t).contains("one bool per layer (1)"));
        assert!(refused(meta(&experts[..3]), &moe).contains("`granite_swa.expert_shared_feed_forward_length` is missing or 0"));
    }

    #[test]
    fn moe_files_split_the_expert_stacks_into_each_experts_tensor() {
        // qwen3moe: per-expert names, the Q8_0 slabs packed (each expert its own rows), the F32
        // ones float, the router float; llama.cpp's fixed routing settings in the config.
        let mut m = moe_meta("qwen3moe", 2);
        m.push(("qwen3moe.expert_feed_forward_length".into(), json!(32)));
        let norms: [(&str, u32, Vec<u64>); 2] = [("blk.0.attn_q_norm.weight", 0, vec![16]), ("blk.0.attn_k_norm.weight", 0, vec![16])];
        let i = import_of(&as_ref(&m), &moe_tensors(&norms)).unwrap();
        let c = &i.config;
        assert_eq!(c["model_type"], json!("qwen3_moe"));
        assert_eq!((c["num_experts"].as_u64(), c["num_experts_per_tok"].as_u64(), c["moe_intermediate_size"].as_u64()), (Some(4), Some(2), Some(32)));
        assert_eq!((c["norm_topk_prob"].as_bool(), c["mlp_only_layers"].clone()), (Some(true), json!([])));
        for e in 0..4 {
            let gate = &i.packed[&format!("model.layers.0.mlp.experts.{e}.gate_proj.weight")];
            assert_eq!((gate.n(), gate.k()), (32, 64));
            assert!(i.packed.contains_key(&format!("model.layers.0.mlp.experts.{e}.up_proj.weight")));
            let down = &i.tensors[&format!("model.layers.0.mlp.experts.{e}.down_proj.weight")];
            assert_eq!((down.shape.clone(), down.len), (vec![64, 32], 64 * 32 * 4));
        }
        // Expert 2's slab starts two slabs in.
        let (d0, d2) = (&i.tensors["model.layers.0.mlp.experts.0.down_proj.weight"], &i.tensors["model.layers.0.mlp.experts.2.down_proj.weight"]);
        assert_eq!(d2.offset - d0.offset, 2 * 64 * 32 * 4);
        assert!(i.tensors.contains_key("model.layers.0.mlp.gate.weight"));
        assert_eq!(i.source.as_ref().unwrap().types.iter().find(|(t, _)| t == "Q8_0").map(|(_, n)| *n), Some(6), "each stack counted once");
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(c.clone()).to_string()).unwrap();
        // Without the expert size, llama.cpp's default: feed_forward_length (64) / expert_used_count.
        let i = import_of(&as_ref(&moe_meta("qwen3moe", 2)), &moe_tensors(&norms)).unwrap();
        assert_eq!(i.config["moe_intermediate_size"].as_u64(), Some(32));

        // qwen2moe: not renormalized, the shared expert with its gate vector as a [1, hidden] weight.
        let shared: [(&str, u32, Vec<u64>); 4] = [
            ("blk.0.ffn_gate_inp_shexp.weight", 0, vec![64]),
            ("blk.0.ffn_gate_shexp.weight", 8, vec![64, 96]),
            ("blk.0.ffn_up_shexp.weight", 8, vec![64, 96]),
            ("blk.0.ffn_down_shexp.weight", 0, vec![96, 64]),
        ];
        let mut m = moe_meta("qwen2moe", 2);
        m.push(("qwen2moe.expert_shared_feed_forward_length".into(), json!(96)));
        let i = import_of(&as_ref(&m), &moe_tensors(&shared)).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["norm_topk_prob"].as_bool(), c["shared_expert_intermediate_size"].as_u64()), (Some("qwen2_moe"), Some(false), Some(96)));
        assert_eq!(i.tensors["model.layers.0.mlp.shared_expert_gate.weight"].shape, vec![1, 64]);
        assert!(i.packed.contains_key("model.layers.0.mlp.shared_expert.up_proj.weight"));

        // llama with experts is Mixtral: its names, every layer routed, always renormalized.
        let i = import_of(&as_ref(&moe_meta("llama", 1)), &moe_tensors(&[])).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["num_local_experts"].as_u64(), c.get("attention_bias")), (Some("mixtral"), Some(4), None));
        assert!(i.packed.contains_key("model.layers.0.block_sparse_moe.experts.3.w3.weight") && i.tensors.contains_key("model.layers.0.block_sparse_moe.experts.3.w2.weight"));
        assert!(i.tensors.contains_key("model.layers.0.block_sparse_moe.gate.weight"));
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(c.clone()).to_string()).unwrap();
    }

    #[test]
    fn a_file_of_float_tensors_is_a_float_checkpoint() {
        let float: Vec<_> = llama_tensors().into_iter().map(|(n, _, d)| (n, 0, d)).collect();
        let i = import_of(&llama_meta(), &float).unwrap();
        assert!(i.source.is_none() && i.packed.is_empty());
        assert!(import_of(&llama_meta(), &llama_tensors()).unwrap().source.is_some());
    }

    /// A two-layer deepseek2 file: no query compression, a latent of 32 with 8 rotary and 16
    /// nope / value sizes, layer 0 dense, layer 1 four experts (two routed) in two groups, V3's
    /// routing; `kv_b_proj` split into F32 `attn_k_b` and `attn_v_b` (a quantized half is
    /// joined by the same recipes: tests/python/test_gguf_grouped_moe.py's wide file).
    fn deepseek2_meta() -> Vec<(String, Json)> {
        let mut m: Vec<(String, Json)> = meta_of("deepseek2").into_iter().filter(|(k, _)| !k.ends_with("head_count_kv") && !k.ends_with("block_count")).collect();
        for (k, v) in [
            ("block_count", json!(2)),
            ("attention.head_count_kv", json!(1)),
            ("attention.key_length", json!(40)),
            ("attention.value_length", json!(32)),
            ("attention.kv_lora_rank", json!(32)),
            ("attention.key_length_mla", json!(24)),
            ("attention.value_length_mla", json!(16)),
            ("rope.dimension_count", json!(8)),
            ("leading_dense_block_count", json!(1)),
            ("expert_count", json!(4)),
            ("expert_used_count", json!(2)),
            ("expert_feed_forward_length", json!(32)),
            ("expert_shared_count", json!(1)),
            ("expert_group_count", json!(2)),
            ("expert_group_used_count", json!(1)),
            ("expert_weights_scale", json!(2.5f64)),
            ("expert_weights_norm", json!(true)),
            ("expert_gating_func", json!(2)),
        ] {
            m.push((format!("deepseek2.{k}"), v));
        }
        m
    }
    fn deepseek2_tensors() -> Vec<(&'static str, u32, Vec<u64>)> {
        let mut t = vec![("token_embd.weight", 8, vec![64, 32]), ("output_norm.weight", 0, vec![64])];
        for layer in ["blk.0.", "blk.1."] {
            let name = |s: &str| -> &'static str { Box::leak(format!("{layer}{s}").into_boxed_str()) };
            t.extend([
                (name("attn_norm.weight"), 0, vec![64]),
                (name("ffn_norm.weight"), 0, vec![64]),
                (name("attn_q.weight"), 8, vec![64, 96]),
                (name("attn_kv_a_mqa.weight"), 8, vec![64, 40]),
                (name("attn_kv_a_norm.weight"), 0, vec![32]),
                (name("attn_k_b.weight"), 0, vec![16, 32, 4]),
                (name("attn_v_b.weight"), 0, vec![32, 16, 4]),
                (name("attn_output.weight"), 8, vec![64, 64]),
            ]);
        }
        t.extend([("blk.0.ffn_gate.weight", 8, vec![64, 128]), ("blk.0.ffn_up.weight", 8, vec![64, 128]), ("blk.0.ffn_down.weight", 8, vec![128, 64])]);
        t.extend([("blk.1.ffn_gate_inp.weight", 0, vec![64, 4]), ("blk.1.exp_probs_b.bias", 0, vec![4])]);
        t.extend([("blk.1.ffn_gate_exps.weight", 8, vec![64, 32, 4]), ("blk.1.ffn_up_exps.weight", 8, vec![64, 32, 4]), ("blk.1.ffn_down_exps.weight", 0, vec![32, 64, 4])]);
        t.extend([("blk.1.ffn_gate_shexp.weight", 8, vec![64, 32]), ("blk.1.ffn_up_shexp.weight", 8, vec![64, 32]), ("blk.1.ffn_down_shexp.weight", 8, vec![32, 64])]);
        t
    }

    #[test]
    fn deepseek2_files_read_the_latent_sizes_and_routing_and_join_the_split_projection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        // k_b of layer 0 numbered 0.. in its numpy order [heads 4, rank 32, nope 16].
        let k_b: Vec<f32> = (0..4 * 32 * 16).map(|i| i as f32).collect();
        // v_b of layer 0 numbered from 100000 in its numpy order [heads 4, v 16, rank 32].
        let v_b: Vec<f32> = (0..4 * 16 * 32).map(|i| 100000.0 + i as f32).collect();
        std::fs::write(&path, file_with(&as_ref(&deepseek2_meta()), &deepseek2_tensors(), &[("blk.0.attn_k_b.weight", k_b.clone()), ("blk.0.attn_v_b.weight", v_b.clone())])).unwrap();
        let i = import(&path).unwrap();
        let c = &i.config;
        let got = |k: &str| c.get(k).cloned().unwrap_or(Json::Null);
        assert_eq!(got("model_type"), json!("deepseek_v3"));
        for (k, want) in [
            ("q_lora_rank", Json::Null),
            ("kv_lora_rank", json!(32)),
            ("qk_nope_head_dim", json!(16)),
            ("qk_rope_head_dim", json!(8)),
            ("head_dim", json!(8)),
            ("v_head_dim", json!(16)),
            ("num_key_value_heads", json!(4)),
            ("n_routed_experts", json!(4)),
            ("num_experts_per_tok", json!(2)),
            ("moe_intermediate_size", json!(32)),
            ("n_shared_experts", json!(1)),
            ("first_k_dense_replace", json!(1)),
            ("n_group", json!(2)),
            ("topk_group", json!(1)),
            ("norm_topk_prob", json!(true)),
            ("routed_scaling_factor", json!(2.5)),
            ("rope_interleave", json!(true)),
        ] {
            assert_eq!(got(k), want, "{k}");
        }
        assert!(i.packed.contains_key("model.layers.1.mlp.experts.3.up_proj.weight") && i.packed.contains_key("model.layers.1.mlp.shared_experts.gate_proj.weight"));
        assert!(i.tensors.contains_key("model.layers.1.mlp.gate.e_score_correction_bias") && i.packed.contains_key("model.layers.0.self_attn.q_proj.weight"));
        // kv_b_proj [heads x (nope + v), rank]: head h's first 16 rows are k_b[h] transposed.
        let kv_b = &i.views["model.layers.0.self_attn.kv_b_proj.weight"];
        assert_eq!(kv_b.shape(), vec![4 * 32, 32]);
        let bytes = kv_b.materialize().unwrap();
        let values: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        for (h, j, r) in [(0, 0, 0), (0, 5, 7), (2, 15, 31), (3, 3, 0)] {
            assert_eq!(values[(h * 32 + j) * 32 + r], k_b[(h * 32 + r) * 16 + j], "head {h} nope {j} rank {r}");
        }
        // Then its 16 value rows: v_b[h] as stored.
        for (h, j, r) in [(0, 0, 0), (1, 7, 3), (3, 15, 31)] {
            assert_eq!(values[(h * 32 + 16 + j) * 32 + r], v_b[(h * 16 + j) * 32 + r], "head {h} value {j} rank {r}");
        }
        drop(i);
        drop(dir);

        // Softmax routing, no renormalization: DeepSeek-V2, grouped by its best expert.
        let v2: Vec<(String, Json)> = deepseek2_meta().into_iter().filter(|(k, _)| !k.ends_with("expert_gating_func") && !k.ends_with("expert_weights_norm")).collect();
        let t: Vec<_> = deepseek2_tensors().into_iter().filter(|(n, ..)| !n.contains("exp_probs_b")).collect();
        let c = import_of(&as_ref(&v2), &t).unwrap().config;
        assert_eq!((c["model_type"].as_str(), c["topk_method"].as_str()), (Some("deepseek_v2"), Some("group_limited_greedy")));
    }

    /// A test file's metadata and its tensors' (name, ggml type, dims).
    type TestFile = (Vec<(String, Json)>, Vec<(&'static str, u32, Vec<u64>)>);

    /// A glm4moe file: two decoder layers (the first dense) and one prediction layer appended
    /// (`nextn_predict_layers` 1), which is not read.
    fn glm4moe_file() -> TestFile {
        let mut m: Vec<(String, Json)> = meta_of("glm4moe").into_iter().filter(|(k, _)| !k.ends_with("block_count")).collect();
        for (k, v) in [
            ("block_count", json!(3)),
            ("nextn_predict_layers", json!(1)),
            ("rope.dimension_count", json!(8)),
            ("leading_dense_block_count", json!(1)),
            ("expert_count", json!(4)),
            ("expert_used_count", json!(2)),
            ("expert_feed_forward_length", json!(32)),
            ("expert_shared_count", json!(1)),
            ("expert_weights_scale", json!(1.5f64)),
            ("expert_weights_norm", json!(true)),
            ("expert_gating_func", json!(2)),
        ] {
            m.push((format!("glm4moe.{k}"), v));
        }
        let mut t = vec![("token_embd.weight", 8, vec![64, 32]), ("output_norm.weight", 0, vec![64])];
        for layer in 0..3 {
            let name = |s: &str| -> &'static str { Box::leak(format!("blk.{layer}.{s}").into_boxed_str()) };
            t.extend([
                (name("attn_norm.weight"), 0, vec![64]),
                (name("post_attention_norm.weight"), 0, vec![64]),
                (name("attn_q.weight"), 8, vec![64, 64]),
                (name("attn_q.bias"), 0, vec![64]),
                (name("attn_k.weight"), 8, vec![64, 32]),
                (name("attn_k.bias"), 0, vec![32]),
                (name("attn_v.weight"), 8, vec![64, 32]),
                (name("attn_v.bias"), 0, vec![32]),
                (name("attn_output.weight"), 8, vec![64, 64]),
                (name("attn_q_norm.weight"), 0, vec![16]),
                (name("attn_k_norm.weight"), 0, vec![16]),
            ]);
            if layer == 0 {
                t.extend([(name("ffn_gate.weight"), 8, vec![64, 128]), (name("ffn_up.weight"), 8, vec![64, 128]), (name("ffn_down.weight"), 8, vec![128, 64])]);
            } else {
                t.extend([(name("ffn_gate_inp.weight"), 0, vec![64, 4]), (name("exp_probs_b.bias"), 0, vec![4])]);
                t.extend([(name("ffn_gate_exps.weight"), 8, vec![64, 32, 4]), (name("ffn_up_exps.weight"), 8, vec![64, 32, 4]), (name("ffn_down_exps.weight"), 8, vec![32, 64, 4])]);
                t.extend([(name("ffn_gate_shexp.weight"), 8, vec![64, 32]), (name("ffn_up_shexp.weight"), 8, vec![64, 32]), (name("ffn_down_shexp.weight"), 8, vec![32, 64])]);
            }
        }
        // The prediction layer's own tensors (any names: the layer is not read).
        t.extend([("blk.2.nextn.eh_proj.weight", 0, vec![128, 64]), ("blk.2.nextn.enorm.weight", 0, vec![64])]);
        (m, t)
    }

    /// Solar Open's glm4moe files: no `feed_forward_length`, accepted when no layer is dense (the
    /// experts' width stands in for the key no layer reads); refused by key with a dense lead.
    #[test]
    fn glm4moe_files_without_a_dense_width_have_no_dense_layer() {
        let (m, t) = glm4moe_file();
        let m: Vec<(String, Json)> = m.into_iter().filter(|(k, _)| !k.ends_with(".feed_forward_length")).collect();
        let got = import_of(&as_ref(&m), &t).err().expect("refused").to_string();
        assert!(got.contains("`glm4moe.feed_forward_length` is missing") && got.contains("`glm4moe.leading_dense_block_count` 1"), "{got}");
        // Every layer sparse: layer 0 holds layer 1's router, experts and bias, no dense MLP.
        let m: Vec<(String, Json)> = m.into_iter().map(|(k, v)| if k.ends_with("leading_dense_block_count") { (k, json!(0)) } else { (k, v) }).collect();
        let mut sparse: Vec<(&'static str, u32, Vec<u64>)> = t.iter().filter(|(n, ..)| !n.starts_with("blk.0.ffn_")).cloned().collect();
        let layer0: Vec<_> = t.iter().filter(|(n, ..)| n.starts_with("blk.1.") && (n.contains("ffn_") || n.contains("exp_probs_b"))).map(|(n, q, d)| (&*Box::leak(n.replacen("blk.1.", "blk.0.", 1).into_boxed_str()), *q, d.clone())).collect();
        sparse.extend(layer0);
        let i = import_of(&as_ref(&m), &sparse).unwrap();
        assert_eq!((i.config["intermediate_size"].as_u64(), i.config["moe_intermediate_size"].as_u64()), (Some(32), Some(32)));
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(i.config.clone()).to_string()).unwrap();
    }

    #[test]
    fn glm4moe_files_read_the_decoder_layers_and_leave_the_prediction_layer() {
        let (m, t) = glm4moe_file();
        let i = import_of(&as_ref(&m), &t).unwrap();
        let c = &i.config;
        let got = |k: &str| c.get(k).cloned().unwrap_or(Json::Null);
        for (k, want) in [
            ("model_type", json!("glm4_moe")),
            ("num_hidden_layers", json!(2)),
            ("head_dim", json!(16)),
            ("partial_rotary_factor", json!(0.5)),
            ("attention_bias", json!(true)),
            ("use_qk_norm", json!(true)),
            ("n_routed_experts", json!(4)),
            ("first_k_dense_replace", json!(1)),
            ("n_shared_experts", json!(1)),
            ("norm_topk_prob", json!(true)),
            ("routed_scaling_factor", json!(1.5)),
        ] {
            assert_eq!(got(k), want, "{k}");
        }
        let read = i.tensors.keys().chain(i.views.keys()).chain(i.packed.keys()).collect::<Vec<_>>();
        assert!(read.iter().all(|n| !n.contains("layers.2.")), "{read:?}");
        assert!(i.tensors.contains_key("model.layers.1.post_attention_layernorm.weight") && i.tensors.contains_key("model.layers.1.mlp.gate.e_score_correction_bias"));

        let e = |m: &[(String, Json)], t: &[(&'static str, u32, Vec<u64>)]| import_of(&as_ref(m), t).err().expect("refused").to_string();
        let set = |k: &str, v: Json| -> Vec<(String, Json)> { m.iter().cloned().map(|(key, old)| if key == format!("glm4moe.{k}") { (key, v.clone()) } else { (key, old) }).collect() };
        let got = e(&set("expert_gating_func", json!(1)), &t);
        assert!(got.contains("`glm4moe.expert_gating_func`") && got.contains("sigmoid"), "{got}");
        let unstated: Vec<(String, Json)> = m.iter().filter(|(k, _)| k != "glm4moe.expert_gating_func").cloned().collect();
        assert_eq!(import_of(&as_ref(&unstated), &t).unwrap().config["model_type"], json!("glm4_moe"));
        let draft: Vec<_> = t.iter().filter(|(n, ..)| !n.starts_with("blk.0.") && !n.starts_with("blk.1.")).cloned().collect();
        let got = e(&m, &draft);
        assert!(got.contains("--mtp") && got.contains("`blk.0`"), "{got}");
        let got = e(&set("nextn_predict_layers", json!(3)), &t);
        assert!(got.contains("`glm4moe.nextn_predict_layers` is 3"), "{got}");
        let got = e(&m, &t.iter().filter(|(n, ..)| *n != "blk.1.exp_probs_b.bias").cloned().collect::<Vec<_>>());
        assert!(got.contains("`blk.1.exp_probs_b.bias`"), "{got}");
        // Without the key, the prediction layer is a decoder layer: its extra tensors are refused.
        let got = e(&m.iter().filter(|(k, _)| !k.ends_with("nextn_predict_layers")).cloned().collect::<Vec<_>>(), &t);
        assert!(got.contains("blk.2."), "{got}");
    }

    /// A dots1 file is the glm4moe test file's decoder layers under Qwen2-MoE's names (`ffn_norm`
    /// before the MLP, no biases, no prediction layer): the grouped experts' keys, no windows.
    #[test]
    fn dots1_files_read_the_grouped_experts_and_state_no_windows() {
        let (m, t) = glm4moe_file();
        let m: Vec<(String, Json)> = m
            .into_iter()
            .filter(|(k, _)| !k.ends_with("nextn_predict_layers") && !k.ends_with("rope.dimension_count"))
            .map(|(k, v)| match k.as_str() {
                "general.architecture" => (k, json!("dots1")),
                "glm4moe.block_count" => ("dots1.block_count".into(), json!(2)),
                _ => (k.replacen("glm4moe.", "dots1.", 1), v),
            })
            .collect();
        let t: Vec<(&'static str, u32, Vec<u64>)> = t
            .into_iter()
            .filter(|(n, ..)| !n.starts_with("blk.2.") && !n.ends_with(".bias") || n.ends_with("exp_probs_b.bias"))
            .map(|(n, ty, d)| (if n.ends_with("post_attention_norm.weight") { &*Box::leak(n.replace("post_attention_norm", "ffn_norm").into_boxed_str()) } else { n }, ty, d))
            .collect();
        let c = import_of(&as_ref(&m), &t).unwrap().config;
        for (k, want) in [("model_type", json!("dots1")), ("num_hidden_layers", json!(2)), ("attention_bias", json!(false)), ("n_routed_experts", json!(4)), ("norm_topk_prob", json!(true)), ("sliding_window", Json::Null), ("max_window_layers", json!(2))] {
            assert_eq!(c.get(k).cloned().unwrap_or(json!("absent")), want, "{k}");
        }
        let softmax: Vec<(String, Json)> = m.iter().cloned().map(|(k, v)| if k == "dots1.expert_gating_func" { (k, json!(1)) } else { (k, v) }).collect();
        let got = import_of(&as_ref(&softmax), &t).err().expect("refused").to_string();
        assert!(got.contains("`dots1.expert_gating_func` is softmax"), "{got}");
        let unstated: Vec<(String, Json)> = m.iter().filter(|(k, _)| k != "dots1.expert_gating_func").cloned().collect();
        assert_eq!(import_of(&as_ref(&unstated), &t).unwrap().config["model_type"], json!("dots1"));
    }

    /// A file converted before llama.cpp's MLA change: no `*_mla` keys, the heads' own key and
    /// value lengths, a whole `attn_kv_b`; and a file with the correction bias but no gating key
    /// (GLM-4.7-Flash's) routes by sigmoid.
    #[test]
    fn older_deepseek2_files_and_files_without_a_gating_key_are_read() {
        let old: Vec<(String, Json)> = deepseek2_meta()
            .into_iter()
            .filter(|(k, _)| !k.ends_with("_mla"))
            .map(|(k, v)| match k.as_str() {
                "deepseek2.attention.key_length" => (k, json!(24)),
                "deepseek2.attention.value_length" => (k, json!(16)),
                _ => (k, v),
            })
            .collect();
        let mut t: Vec<_> = deepseek2_tensors().into_iter().filter(|(n, ..)| !n.contains("attn_k_b") && !n.contains("attn_v_b")).collect();
        t.extend([("blk.0.attn_kv_b.weight", 0, vec![32, 128]), ("blk.1.attn_kv_b.weight", 0, vec![32, 128])]);
        let i = import_of(&as_ref(&old), &t).unwrap();
        assert_eq!((i.config["qk_nope_head_dim"].as_u64(), i.config["v_head_dim"].as_u64()), (Some(16), Some(16)));
        assert!(i.tensors.contains_key("model.layers.1.self_attn.kv_b_proj.weight"));
        let flash: Vec<(String, Json)> = deepseek2_meta().into_iter().filter(|(k, _)| !k.ends_with("expert_gating_func")).collect();
        assert_eq!(import_of(&as_ref(&flash), &deepseek2_tensors()).unwrap().config["model_type"], json!("deepseek_v3"));
    }

    #[test]
    fn deepseek2_refusals_name_the_key_or_tensor() {
        let e = |m: Vec<(String, Json)>, t: Vec<(&'static str, u32, Vec<u64>)>| import_of(&as_ref(&m), &t).err().expect("refused").to_string();
        let with = |k: &str, v: Json| -> Vec<(String, Json)> {
            let mut m: Vec<(String, Json)> = deepseek2_meta().into_iter().filter(|(key, _)| key != &format!("deepseek2.{k}")).collect();
            m.push((format!("deepseek2.{k}"), v));
            m
        };
        let got = e(with("expert_gating_func", json!(3)), deepseek2_tensors());
        assert!(got.contains("`deepseek2.expert_gating_func` is 3"), "{got}");
        let got = e(with("expert_gating_func", json!(1)), deepseek2_tensors());
        assert!(got.contains("`deepseek2.expert_weights_norm` is true with softmax routing"), "{got}");
        let got = e(with("attention.temperature_scale", json!(0.1f64)), deepseek2_tensors());
        assert!(got.contains("`deepseek2.attention.temperature_scale` is set") && got.contains("Mistral Large 3"), "{got}");
        let got = e(deepseek2_meta(), deepseek2_tensors().into_iter().filter(|(n, ..)| !n.contains("exp_probs_b")).collect());
        assert!(got.contains("`blk.1.exp_probs_b.bias`"), "{got}");
        let got = e(with("attention.key_length", json!(24)), deepseek2_tensors());
        assert!(got.contains("`deepseek2.attention.key_length` is 24") && got.contains("40"), "{got}");
        let got = e(with("attention.q_lora_rank", json!(48)), deepseek2_tensors());
        assert!(got.contains("`deepseek2.attention.q_lora_rank` is 48") && got.contains("`attn_q`"), "{got}");
        let got = e(deepseek2_meta().into_iter().filter(|(k, _)| !k.ends_with("kv_lora_rank")).collect(), deepseek2_tensors());
        assert!(got.contains("`deepseek2.attention.kv_lora_rank` is missing"), "{got}");
        let got = e(deepseek2_meta(), deepseek2_tensors().into_iter().filter(|(n, ..)| *n != "blk.1.attn_v_b.weight").collect());
        assert!(got.contains("`blk.1.attn_v_b.weight`") && got.contains("both halves"), "{got}");
        let mut t = deepseek2_tensors();
        t.iter_mut().find(|(n, ..)| *n == "blk.0.attn_k_b.weight").unwrap().2 = vec![32, 16, 4];
        let got = e(deepseek2_meta(), t);
        assert!(got.contains("`blk.0.attn_k_b.weight`") && got.contains("[16, 32, 4]"), "{got}");
        let got = e(deepseek2_meta(), [deepseek2_tensors(), vec![("blk.0.attn_kv_b.weight", 0, vec![32, 128])]].concat());
        assert!(got.contains("`blk.0.attn_kv_b.weight` beside"), "{got}");
        let without = |keys: &[&str]| -> Vec<(String, Json)> { deepseek2_meta().into_iter().filter(|(k, _)| !keys.iter().any(|x| k == &format!("deepseek2.{x}"))).collect() };
        let got = e(without(&["attention.value_length_mla"]), deepseek2_tensors());
        assert!(got.contains("`deepseek2.attention.key_length_mla` is set but `deepseek2.attention.value_length_mla` is missing"), "{got}");
        let got = e(without(&["attention.key_length_mla", "attention.value_length_mla"]), deepseek2_tensors());
        assert!(got.contains("holds `attn_k_b` / `attn_v_b`") && got.contains("key_length_mla"), "{got}");
        let got = e(with("rope.scaling.type", json!("yarn")), deepseek2_tensors());
        assert!(got.contains("`deepseek2.rope.scaling.factor`"), "{got}");
        let mut m = with("rope.scaling.type", json!("yarn"));
        m.push(("deepseek2.rope.scaling.factor".into(), json!(4.0f64)));
        m.push(("deepseek2.context_length".into(), json!(256)));
        let got = e(m, deepseek2_tensors());
        assert!(got.contains("`deepseek2.rope.scaling.yarn_log_multiplier` is missing"), "{got}");
    }

    /// OLMoE: the experts' width is `feed_forward_length` (no expert key), never renormalized,
    /// no clip; q/k norms over the whole projections; every layer routes.
    #[test]
    fn olmoe_files_read_their_experts_and_full_width_qk_norms() {
        let norms = [("blk.0.attn_q_norm.weight", 0, vec![64]), ("blk.0.attn_k_norm.weight", 0, vec![32])];
        // The stacks' width (32) is the file's `feed_forward_length`.
        let meta: Vec<(String, Json)> = moe_meta("olmoe", 2).into_iter().map(|(k, v)| if k == "olmoe.feed_forward_length" { (k, json!(32)) } else { (k, v) }).collect();
        let i = import_of(&as_ref(&meta), &moe_tensors(&norms)).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["num_experts"].as_u64(), c["norm_topk_prob"].as_bool()), (Some("olmoe"), Some(4), Some(false)));
        assert!(c["clip_qkv"].is_null() && !c.contains_key("moe_intermediate_size"), "{c:?}");
        assert!(i.tensors.contains_key("model.layers.0.self_attn.q_norm.weight") && i.packed.contains_key("model.layers.0.mlp.experts.3.up_proj.weight"));
        let t: Vec<_> = moe_tensors(&norms).into_iter().filter(|(n, ..)| !n.contains("gate_inp")).collect();
        let got = import_of(&as_ref(&meta), &t).err().expect("refused").to_string();
        assert!(got.contains("`blk.0.ffn_gate_inp.weight`") && got.contains("OLMoE"), "{got}");
    }

    /// ERNIE 4.5 MoE: its own key names, the sparse layers from the step and the dense lead,
    /// which the layers holding a router must match.
    #[test]
    fn ernie_moe_files_read_their_sparse_layers_from_the_step() {
        let meta = |extra: &[(&str, Json)]| -> Vec<(String, Json)> {
            let mut m = moe_meta("ernie4_5-moe", 2);
            m.push(("ernie4_5-moe.expert_feed_forward_length".into(), json!(32)));
            m.extend(extra.iter().map(|(k, v)| (format!("ernie4_5-moe.{k}"), v.clone())));
            m
        };
        let c = import_of(&as_ref(&meta(&[("interleave_moe_layer_step", json!(1))])), &moe_tensors(&[])).unwrap().config;
        let got = |k: &str| c.get(k).cloned().unwrap_or(Json::Null);
        for (k, want) in [("model_type", json!("ernie4_5_moe")), ("moe_num_experts", json!(4)), ("moe_k", json!(2)), ("moe_layer_start_index", json!(0)), ("moe_layer_interval", json!(1)), ("moe_layer_end_index", json!(0)), ("use_bias", json!(false))] {
            assert_eq!(got(k), want, "{k}");
        }
        let e = |m: Vec<(String, Json)>| import_of(&as_ref(&m), &moe_tensors(&[])).err().expect("refused").to_string();
        let got = e(meta(&[("interleave_moe_layer_step", json!(1)), ("leading_dense_block_count", json!(1))]));
        assert!(got.contains("layer 0 holds `blk.0.ffn_gate_inp.weight`") && got.contains("dense"), "{got}");
        let got = e(meta(&[("interleave_moe_layer_step", json!(2))]));
        assert!(got.contains("`ernie4_5-moe.interleave_moe_layer_step` 2"), "{got}");
        let got = e(meta(&[("interleave_moe_layer_step", json!(0))]));
        assert!(got.contains("is 0"), "{got}");
        let got = e(meta(&[]));
        assert!(got.contains("`ernie4_5-moe.interleave_moe_layer_step` is missing"), "{got}");
    }

    /// Hunyuan MoE: one width for experts and shared MLP, every layer routing, the RoPE's
    /// scaling factor 1 (its stretch is in the base).
    #[test]
    fn hunyuan_moe_files_read_one_width_and_no_rope_scaling() {
        let meta = |extra: &[(&str, Json)]| -> Vec<(String, Json)> {
            // The stacks' width (32) is also the file's `feed_forward_length`.
            let mut m: Vec<(String, Json)> = moe_meta("hunyuan-moe", 2).into_iter().map(|(k, v)| if k == "hunyuan-moe.feed_forward_length" { (k, json!(32)) } else { (k, v) }).collect();
            m.extend(extra.iter().map(|(k, v)| (format!("hunyuan-moe.{k}"), v.clone())));
            m
        };
        let ok = meta(&[("expert_feed_forward_length", json!(32)), ("expert_shared_feed_forward_length", json!(32)), ("rope.scaling.type", json!("none")), ("rope.scaling.factor", json!(1.0f64)), ("rope.scaling.original_context_length", json!(262144))]);
        let c = import_of(&as_ref(&ok), &moe_tensors(&[])).unwrap().config;
        for (k, want) in [("model_type", json!("hunyuan_v1_moe")), ("num_experts", json!(4)), ("moe_topk", json!(2)), ("intermediate_size", json!(32)), ("num_shared_expert", json!(1)), ("rope_theta", json!(10000.5))] {
            assert_eq!(c.get(k).cloned().unwrap_or(Json::Null), want, "{k}");
        }
        assert!(!c.contains_key("rope_scaling"), "{c:?}");
        let e = |m: Vec<(String, Json)>| import_of(&as_ref(&m), &moe_tensors(&[])).err().expect("refused").to_string();
        let got = e(meta(&[("expert_feed_forward_length", json!(32)), ("expert_shared_feed_forward_length", json!(64))]));
        assert!(got.contains("differ") && got.contains("`hunyuan-moe.expert_shared_feed_forward_length` 64"), "{got}");
        let got = e(meta(&[("expert_feed_forward_length", json!(32)), ("rope.scaling.factor", json!(2.0f64))]));
        assert!(got.contains("`hunyuan-moe.rope.scaling.factor` is 2"), "{got}");
    }

    /// Hunyuan dense: Hunyuan's q/k norm names and RoPE keys, no experts.
    #[test]
    fn hunyuan_dense_files_map_the_qk_norms_and_read_no_rope_scaling() {
        let mut m: Vec<(String, Json)> = meta_of("hunyuan-dense");
        m.extend([("hunyuan-dense.rope.scaling.type".to_string(), json!("none")), ("hunyuan-dense.rope.scaling.factor".to_string(), json!(1.0f64))]);
        let mut t = llama_tensors();
        t.extend([("blk.0.attn_q_norm.weight", 0, vec![16]), ("blk.0.attn_k_norm.weight", 0, vec![16])]);
        let i = import_of(&as_ref(&m), &t).unwrap();
        assert_eq!((i.config["model_type"].as_str(), i.config["attention_bias"].as_bool()), (Some("hunyuan_v1_dense"), Some(false)));
        assert!(i.tensors.contains_key("model.layers.0.self_attn.query_layernorm.weight") && !i.config.contains_key("rope_scaling"));
    }

    /// GraniteMoE: the converter's gate and up stacks joined back into `input_linear` (rows
    /// whole: a quantized stack stays packed), the down stack as `output_linear`; a layer with
    /// only some of its stacks is refused naming the missing one.
    #[test]
    fn granitemoe_files_join_the_gate_and_up_stacks() {
        let mut meta: Vec<(String, Json)> = moe_meta("granitemoe", 2).into_iter().map(|(k, v)| if k == "granitemoe.feed_forward_length" { (k, json!(32)) } else { (k, v) }).collect();
        meta.push(("granitemoe.logit_scale".into(), json!(4.0f64)));
        let i = import_of(&as_ref(&meta), &moe_tensors(&[])).unwrap();
        assert_eq!((i.config["model_type"].as_str(), i.config["num_local_experts"].as_u64()), (Some("granitemoe"), Some(4)));
        let joined = &i.views["model.layers.0.block_sparse_moe.input_linear.weight"];
        assert_eq!(joined.shape(), vec![4, 64, 64]);
        assert!(ir::PackedStack::from_recipe("w", &joined.clone().reshape(vec![4 * 64, 64])).is_some_and(|s| s.is_ok()), "the Q8_0 stacks keep their integers");
        assert_eq!(i.views["model.layers.0.block_sparse_moe.output_linear.weight"].shape(), vec![4, 64, 32]);
        let t: Vec<_> = moe_tensors(&[]).into_iter().filter(|(n, ..)| !n.contains("up_exps")).collect();
        let got = import_of(&as_ref(&meta), &t).err().expect("refused").to_string();
        assert!(got.contains("`blk.0.ffn_up_exps.weight`"), "{got}");

        // GraniteMoeShared: `expert_shared_feed_forward_length` and the shared halves joined
        // into `shared_mlp.input_linear` (Q8_0 halves packed), the down as `output_linear`.
        let shexp: [(&str, u32, Vec<u64>); 3] = [("blk.0.ffn_gate_shexp.weight", 8, vec![64, 32]), ("blk.0.ffn_up_shexp.weight", 8, vec![64, 32]), ("blk.0.ffn_down_shexp.weight", 0, vec![32, 64])];
        let mut shared = meta.clone();
        shared.push(("granitemoe.expert_shared_feed_forward_length".into(), json!(32)));
        let i = import_of(&as_ref(&shared), &moe_tensors(&shexp)).unwrap();
        assert_eq!((i.config["model_type"].as_str(), i.config["shared_intermediate_size"].as_u64()), (Some("granitemoeshared"), Some(32)));
        let joined = &i.views["model.layers.0.shared_mlp.input_linear.weight"];
        assert_eq!(joined.shape(), vec![64, 64]);
        assert!(matches!(joined.clone().slice(0, 32, 64), Recipe::Packed(_)), "the up half is the file's packed rows");
        assert!(i.tensors.contains_key("model.layers.0.shared_mlp.output_linear.weight"));
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(i.config.clone()).to_string()).unwrap();
        // Shared tensors without the width, and a half alone, are refused by name.
        let got = import_of(&as_ref(&meta), &moe_tensors(&shexp)).err().expect("refused").to_string();
        assert!(got.contains("`blk.0.ffn_gate_shexp.weight`") && got.contains("`granitemoe.expert_shared_feed_forward_length` is missing"), "{got}");
        let got = import_of(&as_ref(&shared), &moe_tensors(&shexp[1..])).err().expect("refused").to_string();
        assert!(got.contains("not `blk.0.ffn_gate_shexp.weight`"), "{got}");
    }

    /// A K-EXAONE file: GLM-4.5's test file respelled (pre-norms, no biases, full rotary) with
    /// its window keys.
    fn exaone_moe_file() -> TestFile {
        let (m, t) = glm4moe_file();
        let mut m: Vec<(String, Json)> = m
            .into_iter()
            .filter(|(k, _)| !k.ends_with("rope.dimension_count"))
            .map(|(k, v)| if k == "general.architecture" { (k, json!("exaone-moe")) } else { (k.replacen("glm4moe.", "exaone-moe.", 1), v) })
            .collect();
        m.extend([("exaone-moe.attention.sliding_window".to_string(), json!(4)), ("exaone-moe.attention.sliding_window_pattern".to_string(), json!([true, false]))]);
        m.push(("exaone-moe.expert_shared_feed_forward_length".to_string(), json!(32)));
        let t = t
            .into_iter()
            .filter(|(n, ..)| !n.ends_with(".bias") || n.ends_with("exp_probs_b.bias"))
            .map(|(n, q, d)| -> (&'static str, u32, Vec<u64>) { (Box::leak(n.replace("post_attention_norm", "ffn_norm").into_boxed_str()), q, d) })
            .collect();
        (m, t)
    }

    /// K-EXAONE: the decoder less its prediction layer, the window and its layers, sigmoid
    /// experts after the dense lead under `ExaoneMoeConfig`'s names; refusals by key.
    #[test]
    fn exaone_moe_files_read_windows_and_experts_and_leave_the_prediction_layer() {
        let (m, t) = exaone_moe_file();
        let i = import_of(&as_ref(&m), &t).unwrap();
        let c = &i.config;
        for (k, want) in [
            ("model_type", json!("exaone_moe")),
            ("num_hidden_layers", json!(2)),
            ("sliding_window", json!(4)),
            ("layer_types", json!(["sliding_attention", "full_attention"])),
            ("num_experts", json!(4)),
            ("num_shared_experts", json!(1)),
            ("first_k_dense_replace", json!(1)),
            ("norm_topk_prob", json!(true)),
            ("routed_scaling_factor", json!(1.5)),
        ] {
            assert_eq!(c.get(k).cloned().unwrap_or(Json::Null), want, "{k}");
        }
        assert!(!c.contains_key("n_routed_experts") && !c.contains_key("n_shared_experts"), "{c:?}");
        assert!(i.tensors.contains_key("model.layers.1.mlp.e_score_correction_bias") && i.tensors.contains_key("model.layers.1.post_attention_layernorm.weight"));
        assert!(i.tensors.keys().chain(i.packed.keys()).all(|n| !n.contains("layers.2.")));
        // llama.cpp's loader requires the gating key (2 here); a file without it reads as sigmoid.
        let ungated: Vec<(String, Json)> = m.iter().filter(|(k, _)| !k.ends_with("expert_gating_func")).cloned().collect();
        assert_eq!(import_of(&as_ref(&ungated), &t).unwrap().config["model_type"], json!("exaone_moe"));
        let e = |m: Vec<(String, Json)>, t: &[(&'static str, u32, Vec<u64>)]| import_of(&as_ref(&m), t).err().expect("refused").to_string();
        let with = |k: &str, v: Json| -> Vec<(String, Json)> {
            let mut out: Vec<(String, Json)> = m.iter().filter(|(key, _)| key != &format!("exaone-moe.{k}")).cloned().collect();
            out.push((format!("exaone-moe.{k}"), v));
            out
        };
        let got = e(with("expert_gating_func", json!(1)), &t);
        assert!(got.contains("`exaone-moe.expert_gating_func` is softmax"), "{got}");
        let got = e(m.iter().filter(|(k, _)| !k.ends_with("attention.sliding_window")).cloned().collect(), &t);
        assert!(got.contains("`exaone-moe.attention.sliding_window` is missing"), "{got}");
        let got = e(with("rope.freq_base_swa", json!(500.0f64)), &t);
        assert!(got.contains("`exaone-moe.rope.freq_base_swa` is 500"), "{got}");
        let got = e(with("expert_shared_feed_forward_length", json!(64)), &t);
        assert!(got.contains("`exaone-moe.expert_shared_feed_forward_length` is 64"), "{got}");
        let got = e(with("leading_dense_block_count", json!(0)), &t);
        assert!(got.contains("layer 0 has no `blk.0.ffn_gate_inp.weight`") && got.contains("sparse"), "{got}");
    }

    /// Mistral 4: deepseek2's keys under `mistral4`, softmax routing without a correction bias,
    /// the fused `ffn_gate_up_exps` read as the family's stacked `gate_up_proj` (or the two
    /// halves joined), the query scaling from the temperature keys; refusals by key.
    #[test]
    fn mistral4_files_read_fused_experts_and_the_query_scaling() {
        let yarn = [
            ("rope.scaling.type", json!("yarn")),
            ("rope.scaling.factor", json!(4.0f64)),
            ("rope.scaling.original_context_length", json!(64)),
            ("rope.scaling.yarn_log_multiplier", json!(0.1f64)),
            ("context_length", json!(256)),
        ];
        // Without YaRN's keys (`bare`) or with them.
        let bare = |extra: &[(&str, Json)]| -> Vec<(String, Json)> {
            let mut m: Vec<(String, Json)> = deepseek2_meta()
                .into_iter()
                .filter(|(k, _)| !k.ends_with("expert_gating_func"))
                .map(|(k, v)| if k == "general.architecture" { (k, json!("mistral4")) } else { (k.replacen("deepseek2.", "mistral4.", 1), v) })
                .collect();
            m.extend(extra.iter().map(|(k, v)| (format!("mistral4.{k}"), v.clone())));
            m
        };
        let meta = |extra: &[(&str, Json)]| bare(&[&yarn[..], extra].concat());
        let fused = |extra: &[(&'static str, u32, Vec<u64>)]| -> Vec<(&'static str, u32, Vec<u64>)> {
            let mut t: Vec<_> = deepseek2_tensors().into_iter().filter(|(n, ..)| !n.contains("exp_probs_b") && !n.contains("gate_exps") && !n.contains("up_exps")).collect();
            t.push(("blk.1.ffn_gate_up_exps.weight", 8, vec![64, 64, 4]));
            t.extend(extra.iter().cloned());
            t
        };
        let i = import_of(&as_ref(&meta(&[])), &fused(&[])).unwrap();
        let c = &i.config;
        for (k, want) in [("model_type", json!("mistral4")), ("n_routed_experts", json!(4)), ("norm_topk_prob", json!(true)), ("n_group", json!(2)), ("rope_interleave", json!(true))] {
            assert_eq!(c.get(k).cloned().unwrap_or(Json::Null), want, "{k}");
        }
        assert_eq!(c["rope_scaling"]["llama_4_scaling_beta"], json!(0.1), "no temperature key: Mistral4Config's beta");
        assert_eq!(i.views["model.layers.1.mlp.experts.gate_up_proj"].shape(), vec![4, 64, 64]);
        assert_eq!(i.views["model.layers.1.mlp.experts.down_proj"].shape(), vec![4, 64, 32]);
        // The two halves, as llama.cpp's loader also takes them, joined into the same stack.
        let halves: Vec<_> = deepseek2_tensors().into_iter().filter(|(n, ..)| !n.contains("exp_probs_b")).collect();
        assert_eq!(import_of(&as_ref(&meta(&[])), &halves).unwrap().views["model.layers.1.mlp.experts.gate_up_proj"].shape(), vec![4, 64, 64]);
        let c = import_of(&as_ref(&meta(&[("attention.temperature_scale", json!(0.25f64)), ("attention.temperature_length", json!(64))])), &fused(&[])).unwrap().config;
        assert_eq!(c["rope_scaling"]["llama_4_scaling_beta"], json!(0.25));
        // A stated 0 is no scaling, which needs no original length.
        let c = import_of(&as_ref(&bare(&[("attention.temperature_scale", json!(0.0f64))])), &fused(&[])).unwrap().config;
        assert_eq!(c["rope_scaling"]["llama_4_scaling_beta"], json!(0.0));
        let e = |m: Vec<(String, Json)>, t: Vec<(&'static str, u32, Vec<u64>)>| import_of(&as_ref(&m), &t).err().expect("refused").to_string();
        let got = e(meta(&[("attention.temperature_scale", json!(0.25f64)), ("attention.temperature_length", json!(32))]), fused(&[]));
        assert!(got.contains("`mistral4.attention.temperature_length` is 32"), "{got}");
        let got = e(bare(&[("attention.temperature_scale", json!(0.25f64))]), fused(&[]));
        assert!(got.contains("`mistral4.attention.temperature_scale` is 0.25 without YaRN"), "{got}");
        let got = e(bare(&[]), fused(&[]));
        assert!(got.contains("is 0.1 (Mistral 4's default; the file has none) without YaRN"), "{got}");
        let got = e(meta(&[("expert_gating_func", json!(2))]), fused(&[]));
        assert!(got.contains("`mistral4.expert_gating_func` is sigmoid"), "{got}");
        let got = e(meta(&[]), fused(&[("blk.1.exp_probs_b.bias", 0, vec![4])]));
        assert!(got.contains("`blk.1.exp_probs_b.bias`") && got.contains("no correction bias"), "{got}");
        let got = e(meta(&[]), fused(&[("blk.1.ffn_up_exps.weight", 8, vec![64, 32, 4])]));
        assert!(got.contains("`blk.1.ffn_gate_up_exps.weight` beside"), "{got}");
    }

    /// MiniMax-M2: the experts' width from `expert_feed_forward_length`, the rotated dimensions
    /// as `partial_rotary_factor`, q/k norms over the projections, the correction bias beside
    /// the router; softmax gating or a layer without the bias refused.
    #[test]
    fn minimax_m2_files_read_partial_rotary_and_corrected_experts() {
        let mut meta = moe_meta("minimax-m2", 2);
        meta.extend([("minimax-m2.expert_feed_forward_length".to_string(), json!(32)), ("minimax-m2.rope.dimension_count".to_string(), json!(8)), ("minimax-m2.expert_gating_func".to_string(), json!(2))]);
        let extra: Vec<(&'static str, u32, Vec<u64>)> = vec![("blk.0.attn_q_norm.weight", 0, vec![64]), ("blk.0.attn_k_norm.weight", 0, vec![32]), ("blk.0.exp_probs_b.bias", 0, vec![4])];
        let i = import_of(&as_ref(&meta), &moe_tensors(&extra)).unwrap();
        let c = &i.config;
        for (k, want) in [("model_type", json!("minimax_m2")), ("num_local_experts", json!(4)), ("num_experts_per_tok", json!(2)), ("intermediate_size", json!(32)), ("partial_rotary_factor", json!(0.5))] {
            assert_eq!(c.get(k).cloned().unwrap_or(Json::Null), want, "{k}");
        }
        for name in ["model.layers.0.self_attn.q_norm.weight", "model.layers.0.block_sparse_moe.e_score_correction_bias"] {
            assert!(i.tensors.contains_key(name), "{name}");
        }
        assert!(i.packed.contains_key("model.layers.0.block_sparse_moe.experts.3.w1.weight"));
        let with = |k: &str, v: Json| -> Vec<(String, Json)> { meta.iter().cloned().map(|(key, old)| if key == format!("minimax-m2.{k}") { (key, v.clone()) } else { (key, old) }).collect() };
        let got = import_of(&as_ref(&with("expert_gating_func", json!(1))), &moe_tensors(&extra)).err().expect("refused").to_string();
        assert!(got.contains("`minimax-m2.expert_gating_func` is not sigmoid"), "{got}");
        let unbiased: Vec<_> = extra.iter().filter(|(n, ..)| !n.contains("exp_probs_b")).cloned().collect();
        let got = import_of(&as_ref(&meta), &moe_tensors(&unbiased)).err().expect("refused").to_string();
        assert!(got.contains("`blk.0.exp_probs_b.bias`") && got.contains("MiniMax-M2"), "{got}");
    }

    /// llama.cpp's `--fuse-qkv` and `--fuse-gate-up-exps` forms: a llama `attn_qkv` read as q, k
    /// and v row ranges (packed pieces), a fused expert stack as each expert's gate and up rows;
    /// a fused stack beside a separate one is refused.
    #[test]
    fn fused_qkv_and_gate_up_stacks_are_read_as_their_parts() {
        let mut t: Vec<_> = llama_tensors().into_iter().filter(|(n, ..)| !n.contains(".attn_q.") && !n.contains(".attn_k.") && !n.contains(".attn_v.")).collect();
        t.push(("blk.0.attn_qkv.weight", 8, vec![64, 128]));
        let i = import_of(&llama_meta(), &t).unwrap();
        // (The q/k rows' un-permutation is checked by values in tests/python/test_gguf_arch.py,
        // tiny-granite-fused.)
        for (name, rows) in [("q_proj", 64), ("k_proj", 32), ("v_proj", 32)] {
            assert_eq!(i.packed[&format!("model.layers.0.self_attn.{name}.weight")].n(), rows, "{name}");
        }
        let mut meta = moe_meta("qwen3moe", 2);
        meta.push(("qwen3moe.expert_feed_forward_length".into(), json!(32)));
        let norms: [(&'static str, u32, Vec<u64>); 2] = [("blk.0.attn_q_norm.weight", 0, vec![16]), ("blk.0.attn_k_norm.weight", 0, vec![16])];
        let fused: Vec<_> = moe_tensors(&norms).into_iter().filter(|(n, ..)| !n.contains("gate_exps") && !n.contains("up_exps")).chain([("blk.0.ffn_gate_up_exps.weight", 8, vec![64, 64, 4])]).collect();
        let i = import_of(&as_ref(&meta), &fused).unwrap();
        for e in 0..4 {
            for part in ["gate_proj", "up_proj"] {
                assert_eq!(i.packed[&format!("model.layers.0.mlp.experts.{e}.{part}.weight")].n(), 32, "{e} {part}");
            }
        }
        let both: Vec<_> = fused.iter().cloned().chain([("blk.0.ffn_up_exps.weight", 8, vec![64, 32, 4])]).collect();
        let got = import_of(&as_ref(&meta), &both).err().expect("refused").to_string();
        assert!(got.contains("beside another stack read as"), "{got}");
    }

    /// AFMoE: GLM-4.5's test file respelled (four norms, the attention gate, no biases, full
    /// rotary, the window): the config under `AfmoeConfig`'s names, muP on; refusals by key.
    #[test]
    fn afmoe_files_read_gates_windows_and_experts() {
        let (m, t) = glm4moe_file();
        let mut m: Vec<(String, Json)> = m
            .into_iter()
            .filter(|(k, _)| !k.ends_with("rope.dimension_count") && !k.ends_with("nextn_predict_layers") && k != "glm4moe.block_count")
            .map(|(k, v)| if k == "general.architecture" { (k, json!("afmoe")) } else { (k.replacen("glm4moe.", "afmoe.", 1), v) })
            .collect();
        m.extend([("afmoe.block_count".to_string(), json!(2)), ("afmoe.attention.sliding_window".to_string(), json!(4))]);
        let mut t: Vec<(&'static str, u32, Vec<u64>)> = t
            .into_iter()
            .filter(|(n, ..)| !n.starts_with("blk.2.") && (!n.ends_with(".bias") || n.ends_with("exp_probs_b.bias")))
            .map(|(n, q, d)| -> (&'static str, u32, Vec<u64>) { (Box::leak(n.replace("post_attention_norm", "ffn_norm").into_boxed_str()), q, d) })
            .collect();
        for l in 0..2 {
            for (n, d) in [("post_attention_norm.weight", vec![64]), ("post_ffw_norm.weight", vec![64]), ("attn_gate.weight", vec![64, 64])] {
                t.push((Box::leak(format!("blk.{l}.{n}").into_boxed_str()), if n == "attn_gate.weight" { 8 } else { 0 }, d));
            }
        }
        let i = import_of(&as_ref(&m), &t).unwrap();
        let c = &i.config;
        for (k, want) in [
            ("model_type", json!("afmoe")),
            ("num_experts", json!(4)),
            ("num_shared_experts", json!(1)),
            ("num_dense_layers", json!(1)),
            ("route_scale", json!(1.5)),
            ("mup_enabled", json!(true)),
            ("sliding_window", json!(4)),
            ("layer_types", json!(["sliding_attention", "sliding_attention"])),
        ] {
            assert_eq!(c.get(k).cloned().unwrap_or(Json::Null), want, "{k}");
        }
        assert!(i.packed.contains_key("model.layers.1.self_attn.gate_proj.weight") && i.tensors.contains_key("model.layers.1.mlp.expert_bias"));
        assert!(i.tensors.contains_key("model.layers.0.pre_mlp_layernorm.weight") && i.tensors.contains_key("model.layers.0.post_mlp_layernorm.weight"));
        let e = |m: Vec<(String, Json)>| import_of(&as_ref(&m), &t).err().expect("refused").to_string();
        let with = |k: &str, v: Json| -> Vec<(String, Json)> {
            let mut out: Vec<(String, Json)> = m.iter().filter(|(key, _)| key != &format!("afmoe.{k}")).cloned().collect();
            out.push((format!("afmoe.{k}"), v));
            out
        };
        assert!(e(with("expert_weights_norm", json!(false))).contains("`afmoe.expert_weights_norm` is false"));
        assert!(e(with("expert_gating_func", json!(1))).contains("`afmoe.expert_gating_func` is softmax"));
        let got = e(m.iter().filter(|(k, _)| !k.ends_with("sliding_window")).cloned().collect());
        assert!(got.contains("`afmoe.attention.sliding_window` is missing"), "{got}");
    }

    /// A deepseek2 file without `expert_count` (Youtu-LLM): every layer dense, the latent
    /// attention's sizes as DeepSeek's, `youtu`; the converter's dense defaults checked, and
    /// routing keys or a router without the expert count refused.
    #[test]
    fn deepseek2_files_without_experts_are_youtu() {
        const ROUTING: [&str; 8] = ["expert_count", "expert_used_count", "expert_group_count", "expert_group_used_count", "expert_weights_scale", "expert_weights_norm", "expert_gating_func", "leading_dense_block_count"];
        let dense = |extra: &[(&str, Json)]| -> Vec<(String, Json)> {
            let mut m: Vec<(String, Json)> = deepseek2_meta().into_iter().filter(|(k, _)| !ROUTING.iter().any(|r| k == &format!("deepseek2.{r}"))).collect();
            m.retain(|(k, _)| !k.ends_with("expert_feed_forward_length") && !k.ends_with("expert_shared_count"));
            m.extend([("deepseek2.leading_dense_block_count".to_string(), json!(2)), ("deepseek2.expert_feed_forward_length".to_string(), json!(128)), ("deepseek2.expert_shared_count".to_string(), json!(0))]);
            m.extend(extra.iter().map(|(k, v)| (format!("deepseek2.{k}"), v.clone())));
            m
        };
        let mut t: Vec<_> = deepseek2_tensors().into_iter().filter(|(n, ..)| !n.starts_with("blk.1.ffn") && !n.starts_with("blk.1.exp")).collect();
        t.extend([("blk.1.ffn_gate.weight", 8, vec![64, 128]), ("blk.1.ffn_up.weight", 8, vec![64, 128]), ("blk.1.ffn_down.weight", 8, vec![128, 64])]);
        let c = import_of(&as_ref(&dense(&[])), &t).unwrap().config;
        for (k, want) in [("model_type", json!("youtu")), ("kv_lora_rank", json!(32)), ("qk_nope_head_dim", json!(16)), ("v_head_dim", json!(16)), ("num_key_value_heads", json!(4)), ("rope_interleave", json!(true))] {
            assert_eq!(c.get(k).cloned().unwrap_or(Json::Null), want, "{k}");
        }
        assert!(!c.contains_key("n_routed_experts"), "{c:?}");
        let e = |m: Vec<(String, Json)>, t: &[(&'static str, u32, Vec<u64>)]| import_of(&as_ref(&m), t).err().expect("refused").to_string();
        let got = e(dense(&[("expert_used_count", json!(2))]), &t);
        assert!(got.contains("`deepseek2.expert_used_count` is set without `deepseek2.expert_count`"), "{got}");
        let got = e(dense(&[]).into_iter().map(|(k, v)| if k.ends_with("leading_dense_block_count") { (k, json!(1)) } else { (k, v) }).collect(), &t);
        assert!(got.contains("`deepseek2.leading_dense_block_count` is 1") && got.contains("states 2"), "{got}");
        let mut routed = t.clone();
        routed.push(("blk.1.ffn_gate_inp.weight", 0, vec![64, 4]));
        let got = e(dense(&[]), &routed);
        assert!(got.contains("`blk.1.ffn_gate_inp.weight`") && got.contains("`deepseek2.expert_count`"), "{got}");
    }

    /// PhiMoE: Phi-3's LongRoPE from the factor tensors with the file's one `attn_factor` for
    /// both sets (as both mscales), Mixtral's expert names, the biases from the tensors; a file
    /// with some attention biases only, or a layer without a router, is refused.
    #[test]
    fn phimoe_files_read_longrope_biases_and_mixtral_experts() {
        let mut meta: Vec<(String, Json)> = moe_meta("phimoe", 2).into_iter().map(|(k, v)| if k == "phimoe.feed_forward_length" { (k, json!(32)) } else { (k, v) }).collect();
        meta.extend([("phimoe.rope.scaling.original_context_length".to_string(), json!(32)), ("phimoe.rope.scaling.attn_factor".to_string(), json!(1.25f64)), ("phimoe.attention.sliding_window".to_string(), json!(0))]);
        let biases: Vec<(&'static str, u32, Vec<u64>)> = vec![
            ("blk.0.attn_q.bias", 0, vec![64]),
            ("blk.0.attn_k.bias", 0, vec![32]),
            ("blk.0.attn_v.bias", 0, vec![32]),
            ("blk.0.attn_output.bias", 0, vec![64]),
            ("blk.0.attn_norm.bias", 0, vec![64]),
            ("blk.0.ffn_norm.bias", 0, vec![64]),
            ("output_norm.bias", 0, vec![64]),
            ("output.weight", 8, vec![64, 32]),
            ("output.bias", 0, vec![32]),
        ];
        let factors: Vec<(&str, Vec<f32>)> = vec![("rope_factors_long.weight", (1..=8).map(|i| i as f32).collect()), ("rope_factors_short.weight", vec![1.0; 8])];
        let with = |extra: &[(&'static str, u32, Vec<u64>)]| {
            let mut t = moe_tensors(extra);
            t.extend(factors.iter().map(|(n, _)| (*n, 0, vec![8])));
            t
        };
        let i = import_with(&as_ref(&meta), &with(&biases), &factors).unwrap();
        let c = &i.config;
        for (k, want) in [("model_type", json!("phimoe")), ("num_local_experts", json!(4)), ("num_experts_per_tok", json!(2)), ("attention_bias", json!(true)), ("lm_head_bias", json!(true)), ("original_max_position_embeddings", json!(32))] {
            assert_eq!(c.get(k).cloned().unwrap_or(Json::Null), want, "{k}");
        }
        let rope = &c["rope_scaling"];
        assert_eq!((rope["rope_type"].as_str(), rope["long_factor"][7].as_f64()), (Some("longrope"), Some(8.0)));
        assert_eq!((rope["short_mscale"].as_f64(), rope["long_mscale"].as_f64()), (Some(1.25), Some(1.25)), "the file's one factor for both sets");
        assert!(rope.get("attention_factor").is_none() && !c.contains_key("sliding_window"), "{c:?}");
        for name in ["model.norm.bias", "lm_head.bias", "model.layers.0.input_layernorm.bias", "model.layers.0.self_attn.o_proj.bias"] {
            assert!(i.tensors.contains_key(name), "{name}");
        }
        assert!(i.packed.contains_key("model.layers.0.block_sparse_moe.experts.3.w3.weight"));
        let e = |t: Vec<(&'static str, u32, Vec<u64>)>| import_with(&as_ref(&meta), &t, &factors).err().expect("refused").to_string();
        let got = e(with(&biases).into_iter().filter(|(n, ..)| *n != "blk.0.attn_output.bias").collect());
        assert!(got.contains("`attn_output.bias`") && got.contains("attention_bias"), "{got}");
        let got = e(with(&biases).into_iter().filter(|(n, ..)| !n.contains("gate_inp")).collect());
        assert!(got.contains("`blk.0.ffn_gate_inp.weight`") && got.contains("PhiMoE"), "{got}");
    }

    #[test]
    fn moe_refusals_name_the_key_or_tensor() {
        let e = |m: Vec<(String, Json)>, t: Vec<(&'static str, u32, Vec<u64>)>| import_of(&as_ref(&m), &t).err().expect("refused").to_string();
        let got = e(meta_of("qwen3moe"), moe_tensors(&[]));
        assert!(got.contains("`qwen3moe.expert_count`") && got.contains("missing"), "{got}");
        let got = e(moe_meta("qwen3moe", 5), moe_tensors(&[]));
        assert!(got.contains("`qwen3moe.expert_used_count` (5)"), "{got}");
        // A llama file with experts must route every layer.
        let t: Vec<_> = moe_tensors(&[]).into_iter().filter(|(n, ..)| !n.contains("gate_inp")).collect();
        let got = e(moe_meta("llama", 2), t);
        assert!(got.contains("`blk.0.ffn_gate_inp.weight`"), "{got}");
        // A stack that is not 3-D, or does not split into equal experts.
        let mut t = moe_tensors(&[]);
        t.retain(|(n, ..)| !n.contains("down_exps"));
        t.push(("blk.0.ffn_down_exps.weight", 0, vec![32, 256]));
        let got = e(moe_meta("llama", 1), t);
        assert!(got.contains("`blk.0.ffn_down_exps.weight`") && got.contains("3-D"), "{got}");
        // Old per-expert tensor names (before the merged stacks) are refused saying so.
        let got = e(moe_meta("llama", 1), moe_tensors(&[("blk.0.ffn_gate.0.weight", 0, vec![64, 32])]));
        assert!(got.contains("`blk.0.ffn_gate.0.weight`") && got.contains("convert the checkpoint again"), "{got}");
        // Stacks whose dims differ from the metadata's, by the file's tensor name.
        let mut m = moe_meta("qwen3moe", 2);
        m.push(("qwen3moe.expert_feed_forward_length".into(), json!(48)));
        let got = e(m, moe_tensors(&[("blk.0.attn_q_norm.weight", 0, vec![16]), ("blk.0.attn_k_norm.weight", 0, vec![16])]));
        assert!(got.contains("`blk.0.ffn_gate_exps.weight`") && got.contains("[64, 48, 4]"), "{got}");
        let mut m = moe_meta("qwen3moe", 2);
        *m.iter_mut().find(|(k, _)| k == "qwen3moe.expert_count").map(|(_, v)| v).unwrap() = json!(8);
        let got = e(m, moe_tensors(&[("blk.0.attn_q_norm.weight", 0, vec![16]), ("blk.0.attn_k_norm.weight", 0, vec![16])]));
        assert!(got.contains("`blk.0.ffn_gate_exps.weight`") && got.contains("[64, 32, 8]"), "{got}");
        // A dense llama file (no expert count) holding experts or a router is refused by the key.
        let got = e(meta_of("llama"), moe_tensors(&[]));
        assert!(got.contains("`llama.expert_count` is missing") && (got.contains("gate_inp") || got.contains("_exps")), "{got}");
    }

    /// A one-layer phi3 file: hidden 64, 4 heads of 16 (2 KV heads), fused Q8_0 projections.
    fn phi3_tensors() -> Vec<(&'static str, u32, Vec<u64>)> {
        let mut t = vec![("token_embd.weight", 8, vec![64, 32]), ("output_norm.weight", 0, vec![64]), ("output.weight", 8, vec![64, 32])];
        t.extend([("blk.0.attn_norm.weight", 0, vec![64]), ("blk.0.ffn_norm.weight", 0, vec![64])]);
        // q 64 + k 32 + v 32 rows; gate 128 + up 128 rows.
        t.extend([("blk.0.attn_qkv.weight", 8, vec![64, 128]), ("blk.0.attn_output.weight", 8, vec![64, 64])]);
        t.extend([("blk.0.ffn_up.weight", 8, vec![64, 256]), ("blk.0.ffn_down.weight", 8, vec![128, 64])]);
        t
    }

    fn phi3_meta() -> Vec<(String, Json)> {
        let mut m = meta_of("phi3");
        m.push(("phi3.context_length".into(), json!(64)));
        m.push(("phi3.rope.scaling.original_context_length".into(), json!(4)));
        m.push(("phi3.rope.dimension_count".into(), json!(8)));
        m.push(("phi3.attention.sliding_window".into(), json!(0)));
        m
    }

    #[test]
    fn phi3_files_keep_the_fused_projections_packed_and_read_longrope_and_partial_rotary() {
        let (short, long) = ([1.0f32, 1.5, 2.0, 2.5], [3.0f32, 4.0, 5.0, 6.0]);
        let mut m = phi3_meta();
        m.push(("phi3.rope.scaling.attn_factor".into(), json!(1.25f64)));
        let mut t = phi3_tensors();
        t.extend([(ROPE_LONG, 0, vec![4]), (ROPE_SHORT, 0, vec![4])]);
        let i = import_with(&as_ref(&m), &t, &[(ROPE_LONG, long.to_vec()), (ROPE_SHORT, short.to_vec())]).unwrap();
        // The fused tensors stay packed, under the names the phi3 family splits.
        let qkv = &i.packed["model.layers.0.self_attn.qkv_proj.weight"];
        assert_eq!((qkv.n(), qkv.k(), qkv.order().is_none()), (128, 64, true));
        assert_eq!(i.packed["model.layers.0.mlp.gate_up_proj.weight"].n(), 256);
        assert!(i.views.is_empty() && !i.packed.keys().chain(i.tensors.keys()).any(|n| n.contains("rope")));
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["partial_rotary_factor"].as_f64(), c["original_max_position_embeddings"].as_u64()), (Some("phi3"), Some(0.5), Some(4)));
        assert!(c.get("sliding_window").is_none(), "0: no window");
        let f64s = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
        assert_eq!(c["rope_scaling"], json!({"rope_type": "longrope", "short_factor": f64s(&short), "long_factor": f64s(&long), "attention_factor": 1.25}));
        let d = crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(c.clone()).to_string()).unwrap();
        assert_eq!(d.rotary_dim(), 8);
        let crate::RopeKind::LongRope { original_max_position_embeddings, attention_factor, .. } = d.rope.kind else { panic!("{:?}", d.rope) };
        assert_eq!((original_max_position_embeddings, attention_factor), (4.0, 1.25));
        // Without factors: default rope, the window as stated.
        let mut m = phi3_meta();
        m.retain(|(k, _)| k != "phi3.attention.sliding_window");
        m.push(("phi3.attention.sliding_window".into(), json!(2047)));
        let c = import_of(&as_ref(&m), &phi3_tensors()).unwrap().config;
        assert_eq!((c["sliding_window"].as_u64(), c.get("rope_scaling")), (Some(2047), None));
    }

    #[test]
    fn phi3_refusals_name_the_key_or_tensor() {
        let e = |m: Vec<(String, Json)>, t: Vec<(&str, u32, Vec<u64>)>, v: &[(&str, Vec<f32>)]| import_with(&as_ref(&m), &t, v).err().expect("refused").to_string();
        // One factor set only.
        let mut t = phi3_tensors();
        t.push((ROPE_LONG, 0, vec![4]));
        let got = e(phi3_meta(), t, &[(ROPE_LONG, vec![1.0; 4])]);
        assert!(got.contains("`rope_factors_long.weight` without `rope_factors_short.weight`"), "{got}");
        // Factors of the head size, where 8 dimensions rotate.
        let mut t = phi3_tensors();
        t.extend([(ROPE_LONG, 0, vec![8]), (ROPE_SHORT, 0, vec![8])]);
        let got = e(phi3_meta(), t, &[(ROPE_LONG, vec![1.0; 8]), (ROPE_SHORT, vec![1.0; 8])]);
        assert!(got.contains("`rope_factors_") && got.contains("4 values"), "{got}");
        // An odd rotary count; a cos/sin factor without factors; a key phi3 does not read.
        let mut m = phi3_meta();
        m.retain(|(k, _)| k != "phi3.rope.dimension_count");
        m.push(("phi3.rope.dimension_count".into(), json!(7)));
        assert!(e(m, phi3_tensors(), &[]).contains("`phi3.rope.dimension_count` is 7"));
        let mut m = phi3_meta();
        m.push(("phi3.rope.scaling.attn_factor".into(), json!(1.5f64)));
        assert!(e(m, phi3_tensors(), &[]).contains("`phi3.rope.scaling.attn_factor` is 1.5 without"));
        let mut m = phi3_meta();
        m.push(("phi3.rope.scaling.factor".into(), json!(2.0f64)));
        assert!(e(m, phi3_tensors(), &[]).contains("`phi3.rope.scaling.factor`"));
        // Separate q/k/v, a split gate and a qkv bias are not Phi-3's layout here.
        for extra in [("blk.0.attn_q.weight", 8, vec![64, 64]), ("blk.0.ffn_gate.weight", 8, vec![64, 128]), ("blk.0.attn_qkv.bias", 0, vec![128])] {
            let mut t = phi3_tensors();
            t.push(extra.clone());
            let got = e(phi3_meta(), t, &[]);
            assert!(got.contains(&format!("`{}`", extra.0)) && got.contains("not mapped for architecture phi3"), "{got}");
        }
        // Partial rotary stays refused for llama.
        let mut m = llama_meta();
        m.push(("llama.rope.dimension_count", json!(8)));
        assert!(import_of(&m, &llama_tensors()).err().expect("refused").to_string().contains("phi2, phi3, glm4, glm4moe, chatglm, nemotron, stablelm, gptneox and minimax-m2 files only"));
    }

    fn gemma_meta(arch: &'static str) -> Vec<(String, Json)> {
        let mut m: Vec<(String, Json)> = llama_meta().into_iter().skip(1).map(|(k, v)| (k.replacen("llama", arch, 1), v)).collect();
        m.insert(0, ("general.architecture".into(), json!(arch)));
        m.push((format!("{arch}.attention.key_length"), json!(16)));
        m
    }

    fn gpt_oss_meta() -> Vec<(String, Json)> {
        let mut m = meta_of("gpt-oss");
        for (k, v) in [
            ("block_count", json!(3)),
            ("feed_forward_length", json!(32)),
            ("attention.key_length", json!(16)),
            ("attention.value_length", json!(16)),
            ("expert_count", json!(2)),
            ("expert_used_count", json!(1)),
            ("expert_feed_forward_length", json!(32)),
            ("attention.sliding_window", json!(8)),
            ("attention.sliding_window_pattern", json!(3)),
            ("rope.scaling.type", json!("yarn")),
            ("rope.scaling.factor", json!(4.0f64)),
            ("rope.scaling.original_context_length", json!(64)),
            ("context_length", json!(256)),
        ] {
            m.retain(|(have, _)| *have != format!("gpt-oss.{k}"));
            m.push((format!("gpt-oss.{k}"), v));
        }
        m
    }

    /// Layer 0 of a gpt-oss file of hidden 64 and expert size 32 (2 experts): an MXFP4 gate
    /// stack, an F32 up stack, a Q8_0 down stack.
    fn gpt_oss_tensors() -> Vec<(&'static str, u32, Vec<u64>)> {
        let mut t = vec![("token_embd.weight", 8, vec![64, 32]), ("output_norm.weight", 0, vec![64]), ("output.weight", 8, vec![64, 32])];
        t.extend([("blk.0.attn_norm.weight", 0, vec![64]), ("blk.0.post_attention_norm.weight", 0, vec![64]), ("blk.0.attn_sinks.weight", 0, vec![4])]);
        t.extend([("blk.0.attn_q.weight", 8, vec![64, 64]), ("blk.0.attn_k.weight", 8, vec![64, 32]), ("blk.0.attn_v.weight", 8, vec![64, 32]), ("blk.0.attn_output.weight", 8, vec![64, 64])]);
        t.extend([("blk.0.attn_q.bias", 0, vec![64]), ("blk.0.attn_k.bias", 0, vec![32]), ("blk.0.attn_v.bias", 0, vec![32]), ("blk.0.attn_output.bias", 0, vec![64])]);
        t.extend([("blk.0.ffn_gate_inp.weight", 0, vec![64, 2]), ("blk.0.ffn_gate_inp.bias", 0, vec![2])]);
        t.extend([("blk.0.ffn_gate_exps.weight", 39, vec![64, 32, 2]), ("blk.0.ffn_up_exps.weight", 0, vec![64, 32, 2]), ("blk.0.ffn_down_exps.weight", 8, vec![32, 64, 2])]);
        t.extend([("blk.0.ffn_gate_exps.bias", 0, vec![32, 2]), ("blk.0.ffn_up_exps.bias", 0, vec![32, 2]), ("blk.0.ffn_down_exps.bias", 0, vec![64, 2])]);
        t
    }

    /// BERT: an encoder's config (LayerNorm epsilon, token types, exact GELU, no rope), BERT's
    /// names under `encoder.layer.N`, the pooling the file states; a causal file and a pooling
    /// sentence-transformers has no form of are refused.
    #[test]
    fn bert_files_become_an_encoders_config_and_names() {
        let meta = |extra: &[(&str, Json)]| -> Vec<(String, Json)> {
            let mut m: Vec<(String, Json)> = [
                ("general.architecture", json!("bert")),
                ("bert.embedding_length", json!(64)),
                ("bert.feed_forward_length", json!(128)),
                ("bert.block_count", json!(1)),
                ("bert.context_length", json!(16)),
                ("bert.attention.head_count", json!(4)),
                ("bert.attention.layer_norm_epsilon", json!(1e-12f64)),
                ("tokenizer.ggml.token_type_count", json!(2)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            m.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
            m
        };
        let mut t = vec![("token_embd.weight", 8, vec![64, 32]), ("position_embd.weight", 0, vec![64, 16]), ("token_types.weight", 0, vec![64, 2])];
        t.extend([("token_embd_norm.weight", 0, vec![64]), ("token_embd_norm.bias", 0, vec![64])]);
        t.extend([("blk.0.attn_q.weight", 8, vec![64, 64]), ("blk.0.attn_q.bias", 0, vec![64]), ("blk.0.layer_output_norm.bias", 0, vec![64])]);
        let i = import_of(&as_ref(&meta(&[("bert.attention.causal", json!(false)), ("bert.pooling_type", json!(1u32))])), &t).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["hidden_act"].as_str(), c["type_vocab_size"].as_u64(), c["layer_norm_eps"].as_f64()), (Some("bert"), Some("gelu"), Some(2), Some(1e-12f32 as f64)));
        assert!(c.get("rope_theta").is_none() && c.get("rms_norm_eps").is_none(), "{c:?}");
        assert!(i.packed.contains_key("encoder.layer.0.attention.self.query.weight") && i.tensors.contains_key("embeddings.token_type_embeddings.weight"));
        assert!(i.tensors.contains_key("encoder.layer.0.output.LayerNorm.bias") && i.tensors.contains_key("embeddings.LayerNorm.weight"));
        assert_eq!(pooling_of(&i.file), Some(GgufPooling::Mode(crate::tasks::pooling::PoolingMode::Mean)));
        let e = import_of(&as_ref(&meta(&[("bert.attention.causal", json!(true))])), &t).err().expect("refused").to_string();
        assert!(e.contains("`bert.attention.causal`") && e.contains("encoder"), "{e}");
        let last = import_of(&as_ref(&meta(&[("bert.pooling_type", json!(3u32))])), &t).unwrap();
        let Some(GgufPooling::Unbuilt(e)) = pooling_of(&last.file) else { panic!("LAST is not built") };
        assert!(e.contains("`bert.pooling_type` is 3") && e.contains("--task feature-extraction"), "{e}");
        let none = import_of(&as_ref(&meta(&[])), &t).unwrap();
        assert_eq!(pooling_of(&none.file), None);
        // Another architecture's pooling_type (a reranker's RANK) is not read.
        let mut qwen = meta_of("qwen3");
        qwen.push(("qwen3.pooling_type".into(), json!(4u32)));
        let e = import_of(&as_ref(&qwen), &llama_tensors()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("qwen3.pooling_type") && e.contains("is not read"), "a decoder's pooling_type is refused as unread, not as a pooling: {e}");
    }

    /// A file whose only quantized tensors are expert stacks (read through views): their widths
    /// are the source's, so a table writes them in their form rather than as floats.
    #[test]
    fn bit_widths_count_tensors_read_through_views() {
        let t: Vec<_> = gpt_oss_tensors()
            .into_iter()
            .map(|(n, _, d)| match n {
                "blk.0.ffn_gate_exps.weight" => (n, 39, d),
                "blk.0.ffn_down_exps.weight" => (n, 2, d),
                _ => (n, 0, d),
            })
            .collect();
        let i = import_of(&as_ref(&gpt_oss_meta()), &t).unwrap();
        assert!(i.packed.is_empty(), "{:?}", i.packed.keys().collect::<Vec<_>>());
        assert_eq!(i.source.unwrap().bit_widths, vec![ir::quant::Bits::Int4, ir::quant::Bits::Int8]);
    }

    /// gpt-oss: the config from its keys (llama.cpp's window pattern, YaRN with transformers'
    /// gpt-oss settings, the SwiGLU constants), and the experts woven into the family's stacks:
    /// gate and up rows interleaved, each stack transposed so the family's transpose back
    /// leaves a recipe that only moves whole rows (the packed gate keeps its integers).
    #[test]
    fn gpt_oss_files_weave_the_experts_into_the_familys_stacks() {
        let bias: Vec<f32> = (0..64).map(|v| v as f32).collect();
        let up: Vec<f32> = (0..2 * 32 * 64).map(|v| 1000.0 + v as f32).collect();
        let values = [("blk.0.ffn_gate_exps.bias", bias.clone()), ("blk.0.ffn_up_exps.bias", bias.iter().map(|b| -b).collect()), ("blk.0.ffn_up_exps.weight", up)];
        let i = import_with(&as_ref(&gpt_oss_meta()), &gpt_oss_tensors(), &values).unwrap();
        let c = &i.config;
        assert_eq!(c["model_type"], json!("gpt_oss"));
        assert_eq!((c["intermediate_size"].as_u64(), c["num_local_experts"].as_u64(), c["num_experts_per_tok"].as_u64(), c["sliding_window"].as_u64()), (Some(32), Some(2), Some(1), Some(8)));
        // Period 3: layers 0 and 1 slide, layer 2 is full.
        assert_eq!(c["layer_types"], json!(["sliding_attention", "sliding_attention", "full_attention"]));
        assert_eq!(c["rope_scaling"], json!({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false}));
        assert_eq!((c["swiglu_alpha"].as_f64(), c["swiglu_limit"].as_f64(), c["attention_bias"].as_bool()), (Some(1.702), Some(7.0), Some(true)));
        let p = "model.layers.0.mlp.experts";
        let gate_up = &i.views[&format!("{p}.gate_up_proj")];
        assert_eq!(gate_up.shape(), vec![2, 64, 64]);
        assert_eq!(i.views[&format!("{p}.down_proj")].shape(), vec![2, 32, 64]);
        assert_eq!(i.views[&format!("{p}.down_proj_bias")].shape(), vec![2, 64]);
        // The family's read: transposed back to [E, 2 * inter, hidden], no transpose left.
        let rows = gate_up.clone().transpose(vec![0, 2, 1]);
        assert!(matches!(rows, Recipe::Interleave { .. }) && rows.has_packed(), "{}", rows.describe());
        let f32s = |r: &Recipe| r.materialize().unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect::<Vec<f32>>();
        // Odd rows are up's: expert 1's row 2 * 3 + 1 is up row 3 of expert 1.
        let w = f32s(&rows);
        let at = (64 + 7) * 64;
        assert_eq!(w[at..at + 2], [1000.0 + (32 * 64 + 3 * 64) as f32, 1000.0 + (32 * 64 + 3 * 64 + 1) as f32]);
        // Biases: gate r, up -r, expert-major (ggml [rows, experts]: expert 1 starts at 32).
        let b = f32s(&i.views[&format!("{p}.gate_up_proj_bias")]);
        assert_eq!((b[..4].to_vec(), b[64..66].to_vec()), (vec![0.0, -0.0, 1.0, -1.0], vec![32.0, -32.0]));
        let types = &i.source.as_ref().unwrap().types;
        assert_eq!(types.iter().find(|(t, _)| t == "MXFP4").map(|(_, n)| *n), Some(1), "{types:?}");
        for (k, want) in [("q_proj.weight", true), ("sinks", false), ("o_proj.bias", false)] {
            let name = format!("model.layers.0.self_attn.{k}");
            assert_eq!(i.packed.contains_key(&name), want, "{name}");
            assert!(i.packed.contains_key(&name) || i.tensors.contains_key(&name), "{name}");
        }
        assert!(i.tensors.contains_key("model.layers.0.mlp.router.bias") && i.tensors.contains_key("model.layers.0.post_attention_layernorm.weight"));
    }

    #[test]
    fn gpt_oss_refusals_name_the_tensor_or_key() {
        let e = |m: Vec<(String, Json)>, t: Vec<(&'static str, u32, Vec<u64>)>| import_of(&as_ref(&m), &t).err().expect("refused").to_string();
        let missing: Vec<_> = gpt_oss_tensors().into_iter().filter(|(n, ..)| *n != "blk.0.ffn_up_exps.bias").collect();
        let got = e(gpt_oss_meta(), missing);
        assert!(got.contains("not `blk.0.ffn_up_exps.bias`"), "{got}");
        let quantized_bias: Vec<_> = gpt_oss_tensors().into_iter().map(|(n, t, d)| if n == "blk.0.ffn_down_exps.bias" { (n, 8, d) } else { (n, t, d) }).collect();
        let got = e(gpt_oss_meta(), quantized_bias);
        assert!(got.contains("`blk.0.ffn_down_exps.bias` is Q8_0") && got.contains("float tensors only"), "{got}");
        let mut m = gpt_oss_meta();
        m.retain(|(k, _)| k != "gpt-oss.attention.sliding_window");
        assert!(e(m, gpt_oss_tensors()).contains("`gpt-oss.attention.sliding_window` is missing"));
        let mut m = gpt_oss_meta();
        m.retain(|(k, _)| k != "gpt-oss.rope.scaling.type");
        let got = e(m, gpt_oss_tensors());
        assert!(got.contains("`gpt-oss.rope.scaling.factor` is set without a yarn"), "{got}");
        let mut m = gpt_oss_meta();
        m.push(("gpt-oss.rope.scaling.yarn_attn_factor".into(), json!(1.5f64)));
        assert!(e(m, gpt_oss_tensors()).contains("`gpt-oss.rope.scaling.yarn_attn_factor`"));
    }

    /// OLMo: no RMS epsilon, the LayerNorm one checked, the clamp read; Nemotron: norms read
    /// back as `stored - 1`, the LayerNorm epsilon, relu2 and partial rotary.
    #[test]
    fn olmo_and_nemotron_keys_become_their_configs() {
        let olmo = |eps: f64| {
            let mut m: Vec<(String, Json)> = meta_of("olmo").into_iter().filter(|(k, _)| !k.ends_with("layer_norm_rms_epsilon")).collect();
            m.push(("olmo.attention.layer_norm_epsilon".into(), json!(eps)));
            m.push(("olmo.attention.clamp_kqv".into(), json!(2.5f64)));
            let t: Vec<_> = llama_tensors().into_iter().filter(|(n, ..)| !n.contains("norm")).collect();
            import_of(&as_ref(&m), &t)
        };
        let c = olmo(1e-5).unwrap().config;
        assert_eq!((c["model_type"].as_str(), c["clip_qkv"].as_f64(), c.get("rms_norm_eps")), (Some("olmo"), Some(2.5), None));
        let e = olmo(1e-6).err().expect("refused").to_string();
        assert!(e.contains("`olmo.attention.layer_norm_epsilon`") && e.contains("1e-5"), "{e}");

        let mut m = meta_of("nemotron");
        m.push(("nemotron.attention.layer_norm_epsilon".into(), json!(1e-5f64)));
        m.push(("nemotron.rope.dimension_count".into(), json!(8)));
        let mut t: Vec<_> = llama_tensors().into_iter().filter(|(n, ..)| !n.contains("ffn_gate")).collect();
        t.extend([("blk.0.attn_norm.bias", 0, vec![64]), ("blk.0.ffn_norm.bias", 0, vec![64]), ("output_norm.bias", 0, vec![64]), ("output.weight", 8, vec![64, 32])]);
        let i = import_with(&as_ref(&m), &t, &[("blk.0.attn_norm.weight", vec![1.5; 64])]).unwrap();
        let c = &i.config;
        assert_eq!((c["hidden_act"].as_str(), c["norm_eps"].as_f64(), c["partial_rotary_factor"].as_f64()), (Some("relu2"), Some(1e-5f32 as f64), Some(0.5)));
        let norm = i.views["model.layers.0.input_layernorm.weight"].materialize().unwrap();
        assert_eq!(f32::from_le_bytes(norm[..4].try_into().unwrap()), 0.5, "stored 1.5 is weight 0.5");
        assert!(i.tensors.contains_key("model.layers.0.input_layernorm.bias") && i.tensors.contains_key("model.norm.bias"));
    }

    /// StarCoder 1 (`starcoder`): GPT-2's names with Linear weights kept as stored (packed, not
    /// transposed), one key/value head; more key/value heads are refused by key.
    #[test]
    fn starcoder_files_are_gpt_bigcode_with_one_kv_head() {
        let meta = |kv: u64| -> Vec<(String, Json)> {
            [
                ("general.architecture", json!("starcoder")),
                ("starcoder.embedding_length", json!(64)),
                ("starcoder.feed_forward_length", json!(256)),
                ("starcoder.block_count", json!(1)),
                ("starcoder.context_length", json!(16)),
                ("starcoder.attention.head_count", json!(4)),
                ("starcoder.attention.head_count_kv", json!(kv)),
                ("starcoder.attention.layer_norm_epsilon", json!(1e-5f64)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
        };
        let mut t = vec![("token_embd.weight", 8, vec![64, 32]), ("position_embd.weight", 0, vec![64, 16]), ("output_norm.weight", 0, vec![64]), ("output_norm.bias", 0, vec![64])];
        for n in ["attn_norm", "ffn_norm"] {
            t.extend([(format!("blk.0.{n}.weight"), 0, vec![64]), (format!("blk.0.{n}.bias"), 0, vec![64])].map(|(n, ty, d)| (&*n.leak(), ty, d)));
        }
        t.extend([("blk.0.attn_qkv.weight", 8, vec![64, 96]), ("blk.0.attn_qkv.bias", 0, vec![96]), ("blk.0.attn_output.weight", 8, vec![64, 64]), ("blk.0.attn_output.bias", 0, vec![64])]);
        t.extend([("blk.0.ffn_up.weight", 8, vec![64, 256]), ("blk.0.ffn_up.bias", 0, vec![256]), ("blk.0.ffn_down.weight", 8, vec![256, 64]), ("blk.0.ffn_down.bias", 0, vec![64])]);
        let i = import_of(&as_ref(&meta(1)), &t).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["hidden_act"].as_str(), c["num_key_value_heads"].as_u64(), c["multi_query"].as_bool()), (Some("gpt_bigcode"), Some("gelu_pytorch_tanh"), Some(1), Some(true)));
        // Linear weights: packed as they are, no transposing view.
        assert!(i.packed.contains_key("transformer.h.0.attn.c_attn.weight") && i.packed.contains_key("transformer.h.0.mlp.c_fc.weight"));
        assert!(!i.views.contains_key("transformer.h.0.attn.c_attn.weight"));
        let got = import_of(&as_ref(&meta(4)), &t).err().expect("refused").to_string();
        assert!(got.contains("`starcoder.attention.head_count_kv` is 4"), "{got}");
    }

    /// Falcon (`falcon`): the restacked q/k/v read back per key/value group (packed rows in
    /// that order), FalconConfig's keys with the file's key/value heads and width; refused by
    /// name: another `tensor_data_layout`, none, Falcon-40B's second norm, query heads the
    /// key/value groups do not divide.
    #[test]
    fn falcon_files_read_grouped_qkv_and_refuse_what_is_not_built() {
        let meta = |kv: u64, layout: Option<&str>| -> Vec<(String, Json)> {
            let mut m: Vec<(String, Json)> = [
                ("general.architecture", json!("falcon")),
                ("falcon.embedding_length", json!(64)),
                ("falcon.feed_forward_length", json!(256)),
                ("falcon.block_count", json!(1)),
                ("falcon.context_length", json!(2048)),
                ("falcon.attention.head_count", json!(4)),
                ("falcon.attention.head_count_kv", json!(kv)),
                ("falcon.attention.layer_norm_epsilon", json!(1e-5f64)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            if let Some(l) = layout {
                m.push(("falcon.tensor_data_layout".into(), json!(l)));
            }
            m
        };
        let tensors = |kv: u64, second_norm: bool| {
            let mut t = vec![("token_embd.weight", 8, vec![64, 32]), ("output_norm.weight", 0, vec![64]), ("output_norm.bias", 0, vec![64])];
            t.extend([("blk.0.attn_norm.weight", 0, vec![64]), ("blk.0.attn_norm.bias", 0, vec![64])]);
            t.extend([("blk.0.attn_qkv.weight", 8, vec![64, 64 + 2 * 16 * kv]), ("blk.0.attn_output.weight", 8, vec![64, 64])]);
            t.extend([("blk.0.ffn_up.weight", 8, vec![64, 256]), ("blk.0.ffn_down.weight", 8, vec![256, 64])]);
            if second_norm {
                t.extend([("blk.0.attn_norm_2.weight", 0, vec![64]), ("blk.0.attn_norm_2.bias", 0, vec![64])]);
            }
            t
        };
        let i = import_of(&as_ref(&meta(2, Some("jploski"))), &tensors(2, false)).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["num_kv_heads"].as_u64(), c["ffn_hidden_size"].as_u64(), c["activation"].as_str()), (Some("falcon"), Some(2), Some(256), Some("gelu")));
        assert_eq!((c["new_decoder_architecture"].as_bool(), c["num_ln_in_parallel_attn"].as_u64(), c["bias"].as_bool(), c["rope_theta"].as_f64()), (Some(true), Some(1), Some(false), Some(10000.0)));
        assert!(c["tie_word_embeddings"].as_bool().unwrap());
        // Packed as the file's rows, read in the family's grouped order (`QkvGroups::rows`; the
        // order itself: `restacked_qkv_rows_go_back_per_group`).
        assert!(i.packed.contains_key("transformer.h.0.self_attention.query_key_value.weight"));
        let refused = |m: Vec<(String, Json)>, t: Vec<(&'static str, u32, Vec<u64>)>| import_of(&as_ref(&m), &t).err().expect("refused").to_string();
        let got = refused(meta(2, None), tensors(2, false));
        assert!(got.contains("`falcon.tensor_data_layout` is missing"), "{got}");
        let got = refused(meta(2, Some("Meta AI original pth")), tensors(2, false));
        assert!(got.contains("`falcon.tensor_data_layout` is") && got.contains("Meta AI original pth"), "{got}");
        let got = refused(meta(2, Some("jploski")), tensors(2, true));
        assert!(got.contains("`blk.0.attn_norm_2.weight`") && got.contains("Falcon-40B"), "{got}");
        let got = refused(meta(3, Some("jploski")), tensors(3, false));
        assert!(got.contains("not q, k and v of 4 query heads in 3 key/value groups"), "{got}");
    }

    /// Qwen2-VL's text file: the text model (`qwen2`) with its RoPE sections checked (four
    /// counts of pairs within the head) and the deepstack count read; a file without sections, or
    /// with more pairs than the head has, is refused by the key.
    #[test]
    fn vl_text_files_build_their_text_model() {
        let meta = |sections: Option<Json>| -> Vec<(String, Json)> {
            let mut m: Vec<(String, Json)> = llama_meta().into_iter().map(|(k, v)| (k.replacen("llama", "qwen2vl", 1), v)).collect();
            m[0].1 = json!("qwen2vl");
            if let Some(s) = sections {
                m.push(("qwen2vl.rope.dimension_sections".into(), s));
            }
            m
        };
        let c = import_of(&as_ref(&meta(Some(json!([2, 3, 3, 0])))), &llama_tensors()).unwrap().config;
        assert_eq!((c["model_type"].as_str(), c["head_dim"].as_u64()), (Some("qwen2"), Some(16)));
        let e = import_of(&as_ref(&meta(None)), &llama_tensors()).err().expect("refused").to_string();
        assert!(e.contains("`qwen2vl.rope.dimension_sections` is missing"), "{e}");
        let e = import_of(&as_ref(&meta(Some(json!([4, 4, 4, 0])))), &llama_tensors()).err().expect("refused").to_string();
        assert!(e.contains("at most the head's 8 pairs"), "{e}");
    }

    /// MiniCPM: read as Granite with the file's three scalings and the attention scale 1 /
    /// sqrt(head size); a file without them (converters before late 2024) gets MiniCPM-2B's
    /// constants (12, 1.4 / sqrt(layers), hidden / 256: the logits divided, as the model does).
    #[test]
    fn minicpm_files_are_granite_with_minicpms_scalings() {
        let meta = |scales: bool| -> Vec<(String, Json)> {
            let mut m: Vec<(String, Json)> = llama_meta().into_iter().map(|(k, v)| (k.replacen("llama", "minicpm", 1), v)).collect();
            m[0].1 = json!("minicpm");
            if scales {
                m.extend([("minicpm.embedding_scale".into(), json!(8.0f64)), ("minicpm.residual_scale".into(), json!(0.5f64)), ("minicpm.logit_scale".into(), json!(4.0f64))]);
            }
            m
        };
        let read = |scales: bool| import_of(&as_ref(&meta(scales)), &llama_tensors()).unwrap().config;
        let c = read(true);
        let got = |c: &Map<String, Json>, k: &str| c[k].as_f64().unwrap();
        assert_eq!(c["model_type"].as_str(), Some("granite"));
        assert_eq!([got(&c, "embedding_multiplier"), got(&c, "residual_multiplier"), got(&c, "logits_scaling"), got(&c, "attention_multiplier")], [8.0, 0.5, 4.0, 0.25]);
        let c = read(false);
        assert_eq!([got(&c, "embedding_multiplier"), got(&c, "residual_multiplier"), got(&c, "logits_scaling")], [12.0, 1.4f32 as f64, 64.0 / 256.0]);
        // MiniCPM4's LongRoPE: the key and both factor sets (8 per set: a head of 16), the
        // context as the original length; each half of it alone refused.
        let mut m = meta(true);
        m.push(("minicpm.rope.scaling.type".into(), json!("longrope")));
        m.push(("minicpm.context_length".into(), json!(256)));
        let (long, short): (Vec<f32>, Vec<f32>) = ((0..8).map(|i| 2.0 + i as f32).collect(), vec![1.5; 8]);
        let mut t = llama_tensors();
        t.extend([("rope_factors_long.weight", 0, vec![8]), ("rope_factors_short.weight", 0, vec![8])]);
        let values = [("rope_factors_long.weight", long), ("rope_factors_short.weight", short)];
        let c = import_with(&as_ref(&m), &t, &values).unwrap().config;
        assert_eq!((c["rope_scaling"]["rope_type"].as_str(), c["rope_scaling"]["original_max_position_embeddings"].as_u64(), c["rope_scaling"]["long_factor"][7].as_f64()), (Some("longrope"), Some(256), Some(9.0)));
        let e = import_with(&as_ref(&meta(true)), &t, &values).err().expect("refused").to_string();
        assert!(e.contains("is not longrope"), "{e}");
        let e = import_of(&as_ref(&m), &llama_tensors()).err().expect("refused").to_string();
        assert!(e.contains("is longrope but the file has no"), "{e}");
        // The attention scale has no key in llama.cpp's minicpm loader: one is refused as unread.
        let mut m = meta(true);
        m.push(("minicpm.attention.scale".into(), json!(0.1f64)));
        let e = import_of(&as_ref(&m), &llama_tensors()).err().expect("refused").to_string();
        assert!(e.contains("minicpm.attention.scale"), "{e}");
    }

    /// DBRX: DbrxConfig's nested keys from the file (the clamp, key/value heads, RoPE base, the
    /// experts' width, count and top-k, always renormalized as llama.cpp routes), the expert
    /// stacks read as DBRX's rows (`w2` the transpose of the file's per-expert rows, which the
    /// family's reading undoes down to the file's packed rows); refused by name: another
    /// epsilon, no clamp key, a tied head, a layer without a router.
    #[test]
    fn dbrx_files_read_nested_keys_and_expert_rows() {
        let base = [
            ("embedding_length", json!(64)),
            ("feed_forward_length", json!(32)),
            ("block_count", json!(1)),
            ("context_length", json!(512)),
            ("attention.head_count", json!(4)),
            ("attention.head_count_kv", json!(2)),
            ("rope.freq_base", json!(500000.0f64)),
            ("attention.clamp_kqv", json!(8.0f64)),
            ("expert_count", json!(4)),
            ("expert_used_count", json!(2)),
            ("attention.layer_norm_epsilon", json!(1e-5f64)),
        ];
        let meta = |extra: &[(&str, Json)], drop: &str| arch_meta("dbrx", &base, extra, drop);
        let tensors = |head: bool, router: bool| {
            let mut t = vec![("token_embd.weight", 8, vec![64, 32]), ("output_norm.weight", 0, vec![64]), ("blk.0.attn_norm.weight", 0, vec![64]), ("blk.0.attn_output_norm.weight", 0, vec![64])];
            t.extend([("blk.0.attn_qkv.weight", 8, vec![64, 128]), ("blk.0.attn_output.weight", 8, vec![64, 64])]);
            t.extend([("blk.0.ffn_gate_exps.weight", 2, vec![64, 32, 4]), ("blk.0.ffn_up_exps.weight", 2, vec![64, 32, 4]), ("blk.0.ffn_down_exps.weight", 2, vec![32, 64, 4])]);
            if router {
                t.push(("blk.0.ffn_gate_inp.weight", 0, vec![64, 4]));
            }
            if head {
                t.push(("output.weight", 8, vec![64, 32]));
            }
            t
        };
        let i = import_of(&as_ref(&meta(&[], "")), &tensors(true, true)).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["max_seq_len"].as_u64()), (Some("dbrx"), Some(512)));
        assert_eq!(c["attn_config"], json!({"kv_n_heads": 2, "rope_theta": 500000.0, "clip_qkv": 8.0}));
        assert_eq!(c["ffn_config"], json!({"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2, "moe_normalize_expert_weights": 1, "ffn_act_fn": {"name": "silu"}}));
        assert!(!c["tie_word_embeddings"].as_bool().unwrap());
        let p = "transformer.blocks.0.ffn.experts.mlp";
        for part in ["w1", "v1", "w2"] {
            assert_eq!(i.views[&format!("{p}.{part}")].shape(), vec![4 * 32, 64], "{part}");
        }
        // The family's reading of `w2` (rows as `[E, inter, hidden]`, transposed to the
        // `[E, hidden, inter]` stack) is the file's packed rows again; `w1` likewise as it is.
        let down = i.views[&format!("{p}.w2")].clone().reshape(vec![4, 32, 64]).transpose(vec![0, 2, 1]).reshape(vec![4 * 64, 32]);
        assert!(matches!(down, Recipe::Packed(_)), "{}", down.describe());
        assert!(matches!(i.views[&format!("{p}.w1")], Recipe::Packed(_)), "{}", i.views[&format!("{p}.w1")].describe());
        let refused = |m: Vec<(String, Json)>, t: Vec<(&'static str, u32, Vec<u64>)>| import_of(&as_ref(&m), &t).err().expect("refused").to_string();
        let got = refused(meta(&[("attention.layer_norm_epsilon", json!(1e-6f64))], ""), tensors(true, true));
        assert!(got.contains("`dbrx.attention.layer_norm_epsilon` is") && got.contains("1e-5"), "{got}");
        let got = refused(meta(&[], "attention.clamp_kqv"), tensors(true, true));
        assert!(got.contains("`dbrx.attention.clamp_kqv` is missing"), "{got}");
        let got = refused(meta(&[], ""), tensors(false, true));
        assert!(got.contains("no `output.weight`"), "{got}");
        let got = refused(meta(&[], ""), tensors(true, false));
        assert!(got.contains("`blk.0.ffn_gate_inp.weight`") && got.contains("every DBRX layer"), "{got}");
        // A clamp of 0 is none.
        let none = import_of(&as_ref(&meta(&[("attention.clamp_kqv", json!(0.0f64))], "")), &tensors(true, true)).unwrap();
        assert!(!none.config["attn_config"].as_object().unwrap().contains_key("clip_qkv"));
    }

    /// BLOOM and MPT (ALiBi): each family's own keys (the context under `seq_length` /
    /// `max_seq_len`, MPT's clamp and ALiBi maximum in `attn_config`), no RoPE key left for the
    /// family to read, BLOOM's restacked q/k/v read per head; refused by name: a RoPE key, grouped
    /// key/value heads, another MLP width, MPT without ALiBi or with another maximum, MPT's biases,
    /// q/k norms and learned positions.
    #[test]
    fn alibi_files_read_their_families_keys_and_refuse_what_is_not_built() {
        let base = [("embedding_length", json!(64)), ("feed_forward_length", json!(256)), ("block_count", json!(1)), ("context_length", json!(512)), ("attention.head_count", json!(4)), ("attention.layer_norm_epsilon", json!(1e-5f64))];
        let meta = |arch: &str, extra: &[(&str, Json)]| arch_meta(arch, &base, extra, "");
        let bloom_tensors = |more: &[(&'static str, u32, Vec<u64>)]| {
            let mut t = vec![("token_embd.weight", 8, vec![64, 32]), ("token_embd_norm.weight", 0, vec![64]), ("token_embd_norm.bias", 0, vec![64])];
            t.extend([("output_norm.weight", 0, vec![64]), ("output_norm.bias", 0, vec![64])]);
            t.extend([("blk.0.attn_norm.weight", 0, vec![64]), ("blk.0.attn_norm.bias", 0, vec![64]), ("blk.0.ffn_norm.weight", 0, vec![64]), ("blk.0.ffn_norm.bias", 0, vec![64])]);
            t.extend([("blk.0.attn_qkv.weight", 8, vec![64, 192]), ("blk.0.attn_qkv.bias", 0, vec![192]), ("blk.0.attn_output.weight", 8, vec![64, 64]), ("blk.0.attn_output.bias", 0, vec![64])]);
            t.extend([("blk.0.ffn_up.weight", 8, vec![64, 256]), ("blk.0.ffn_up.bias", 0, vec![256]), ("blk.0.ffn_down.weight", 8, vec![256, 64]), ("blk.0.ffn_down.bias", 0, vec![64])]);
            t.extend(more.iter().cloned());
            t
        };
        let mpt_tensors = |more: &[(&'static str, u32, Vec<u64>)]| {
            let mut t = vec![("token_embd.weight", 8, vec![64, 32]), ("output_norm.weight", 0, vec![64]), ("blk.0.attn_norm.weight", 0, vec![64]), ("blk.0.ffn_norm.weight", 0, vec![64])];
            t.extend([("blk.0.attn_qkv.weight", 8, vec![64, 192]), ("blk.0.attn_output.weight", 8, vec![64, 64]), ("blk.0.ffn_up.weight", 8, vec![64, 256]), ("blk.0.ffn_down.weight", 8, vec![256, 64])]);
            t.extend(more.iter().cloned());
            t
        };
        let i = import_of(&as_ref(&meta("bloom", &[])), &bloom_tensors(&[])).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["seq_length"].as_u64(), c["layer_norm_epsilon"].as_f64()), (Some("bloom"), Some(512), Some(1e-5f32 as f64)));
        // The converter's fallback (the width, for a config without `seq_length`): no context
        // key, so the family's 2048.
        let fallback = import_of(&as_ref(&meta("bloom", &[("context_length", json!(64))])), &bloom_tensors(&[])).unwrap();
        assert!(!fallback.config.contains_key("seq_length") && !fallback.config.contains_key("max_position_embeddings"), "{:?}", fallback.config);
        for k in ["max_position_embeddings", "rope_theta", "intermediate_size"] {
            assert!(!c.contains_key(k), "{k}: {c:?}");
        }
        assert!(c["tie_word_embeddings"].as_bool().unwrap());
        assert!(i.packed.contains_key("transformer.h.0.self_attention.query_key_value.weight"));
        assert!(i.views.contains_key("transformer.h.0.self_attention.query_key_value.bias"), "the bias read back per head");
        assert!(i.tensors.contains_key("transformer.word_embeddings_layernorm.bias"));
        let mpt = meta("mpt", &[("attention.clamp_kqv", json!(6.0f64)), ("attention.max_alibi_bias", json!(8.0f64))]);
        let i = import_of(&as_ref(&mpt), &mpt_tensors(&[])).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["max_seq_len"].as_u64(), c["no_bias"].as_bool()), (Some("mpt"), Some(512), Some(true)));
        assert_eq!(c["attn_config"], json!({"alibi": true, "alibi_bias_max": 8, "clip_qkv": 6.0}));
        assert!(!c.contains_key("rope_theta") && !c.contains_key("max_position_embeddings"), "{c:?}");
        assert!(i.packed.contains_key("transformer.blocks.0.attn.Wqkv.weight"));
        let no_clamp = meta("mpt", &[("attention.max_alibi_bias", json!(8.0f64))]);
        assert!(!import_of(&as_ref(&no_clamp), &mpt_tensors(&[])).unwrap().config["attn_config"].as_object().unwrap().contains_key("clip_qkv"));
        let refused = |m: Vec<(String, Json)>, t: Vec<(&'static str, u32, Vec<u64>)>| import_of(&as_ref(&m), &t).err().expect("refused").to_string();
        let got = refused(meta("bloom", &[("rope.freq_base", json!(10000.0f64))]), bloom_tensors(&[]));
        assert!(got.contains("`bloom.rope.freq_base` is set") && got.contains("no rotary positions"), "{got}");
        let got = refused(meta("bloom", &[("attention.head_count_kv", json!(2))]), bloom_tensors(&[]));
        assert!(got.contains("`bloom.attention.head_count_kv` is 2 for 4 query heads"), "{got}");
        let got = refused(meta("bloom", &[("feed_forward_length", json!(128))]), bloom_tensors(&[]));
        assert!(got.contains("`bloom.feed_forward_length` is 128") && got.contains("4 x hidden (256)"), "{got}");
        let got = refused(meta("mpt", &[]), mpt_tensors(&[]));
        assert!(got.contains("`mpt.attention.max_alibi_bias` is missing") && got.contains("without ALiBi"), "{got}");
        let got = refused(meta("mpt", &[("attention.max_alibi_bias", json!(0.0f64))]), mpt_tensors(&[]));
        assert!(got.contains("`mpt.attention.max_alibi_bias` is 0"), "{got}");
        let got = refused(meta("mpt", &[("attention.max_alibi_bias", json!(16.0f64))]), mpt_tensors(&[]));
        assert!(got.contains("is 16") && got.contains("only 8 is built"), "{got}");
        let eight = meta("mpt", &[("attention.max_alibi_bias", json!(8.0f64))]);
        for (tensor, what) in [("blk.0.attn_norm.bias", "biases"), ("blk.0.attn_q_norm.weight", "`qk_ln`"), ("position_embd.weight", "learned positions")] {
            let got = refused(eight.clone(), mpt_tensors(&[(tensor, 0, vec![64])]));
            assert!(got.contains(&format!("holds `{tensor}`")) && got.contains(what), "{got}");
        }
    }

    /// GPT-2: its own keys (LayerNorm epsilon, no rope), `transformer.h.N` names, learned
    /// positions, and the Conv1D weights read as the transpose of the file's rows (a quantized
    /// one still the packed layer underneath, counted in the source's bit widths); the tied
    /// head reads the quantized token table.
    #[test]
    fn gpt2_files_read_their_conv1d_weights_transposed() {
        let m: Vec<(String, Json)> = [
            ("general.architecture", json!("gpt2")),
            ("gpt2.embedding_length", json!(64)),
            ("gpt2.feed_forward_length", json!(256)),
            ("gpt2.block_count", json!(1)),
            ("gpt2.context_length", json!(16)),
            ("gpt2.attention.head_count", json!(4)),
            ("gpt2.attention.layer_norm_epsilon", json!(1e-5f64)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let mut t = vec![("token_embd.weight", 8, vec![64, 32]), ("position_embd.weight", 0, vec![64, 16]), ("output_norm.weight", 0, vec![64]), ("output_norm.bias", 0, vec![64])];
        for n in ["attn_norm", "ffn_norm"] {
            t.extend([(format!("blk.0.{n}.weight"), 0, vec![64]), (format!("blk.0.{n}.bias"), 0, vec![64])].map(|(n, ty, d)| (&*n.leak(), ty, d)));
        }
        t.extend([("blk.0.attn_qkv.weight", 8, vec![64, 192]), ("blk.0.attn_qkv.bias", 0, vec![192]), ("blk.0.attn_output.weight", 0, vec![64, 64]), ("blk.0.attn_output.bias", 0, vec![64])]);
        // The MLP Q4_0 (ggml type 2): only views hold 4-bit layers.
        t.extend([("blk.0.ffn_up.weight", 2, vec![64, 256]), ("blk.0.ffn_up.bias", 0, vec![256]), ("blk.0.ffn_down.weight", 2, vec![256, 64]), ("blk.0.ffn_down.bias", 0, vec![64])]);
        let i = import_of(&as_ref(&m), &t).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["hidden_act"].as_str(), c["max_position_embeddings"].as_u64()), (Some("gpt2"), Some("gelu_new"), Some(16)));
        assert!(c.get("rope_theta").is_none() && c["tie_word_embeddings"] == json!(true), "{c:?}");
        let qkv = &i.views["transformer.h.0.attn.c_attn.weight"];
        assert_eq!(qkv.shape(), vec![64, 192]);
        assert!(matches!(qkv, Recipe::Transpose { input, .. } if matches!(**input, Recipe::Packed(_))), "{}", qkv.describe());
        let o = &i.views["transformer.h.0.attn.c_proj.weight"];
        assert!(matches!(o, Recipe::Transpose { input, .. } if matches!(**input, Recipe::Source(_))), "{}", o.describe());
        assert!(i.tensors.contains_key("transformer.wpe.weight") && i.tensors.contains_key("transformer.h.0.ln_1.bias") && i.packed.contains_key("transformer.wte.weight"));
        let source = i.source.expect("quantized");
        assert_eq!((source.bit_widths, source.lm_head), (vec![ir::quant::Bits::Int4, ir::quant::Bits::Int8], true));
        // A feed-forward length the MLP does not have is refused, as llama.cpp refuses it.
        let mut bad = m.clone();
        bad[2].1 = json!(128);
        let e = import_of(&as_ref(&bad), &t).err().expect("refused").to_string();
        assert!(e.contains("`gpt2.feed_forward_length` is 128") && e.contains("blk.0.ffn_up.weight"), "{e}");
        // Without the positions' count, and with a Conv1D weight that is not 2-D: refused.
        let e = import_of(&as_ref(&m.iter().filter(|(k, _)| !k.ends_with("context_length")).cloned().collect::<Vec<_>>()), &t).err().expect("refused").to_string();
        assert!(e.contains("`gpt2.context_length` is missing"), "{e}");
        let flat: Vec<_> = t.iter().map(|(n, ty, d)| if *n == "blk.0.attn_output.weight" { (*n, *ty, vec![64 * 64]) } else { (*n, *ty, d.clone()) }).collect();
        let e = import_of(&as_ref(&m), &flat).err().expect("refused").to_string();
        assert!(e.contains("`blk.0.attn_output.weight` is 1-D"), "{e}");
    }

    fn as_ref(m: &[(String, Json)]) -> Vec<(&str, Json)> {
        m.iter().map(|(k, v)| (k.as_str(), v.clone())).collect()
    }

    fn gemma_tensors(extra: &[&'static str]) -> Vec<(&'static str, u32, Vec<u64>)> {
        let mut t = llama_tensors();
        t.extend(extra.iter().map(|n| (*n, 0, vec![64])));
        t
    }

    #[test]
    fn gemma_files_read_llama_cpps_defaults_and_undo_the_norm_offset() {
        let g2 = ["blk.0.post_attention_norm.weight", "blk.0.post_ffw_norm.weight"];
        let mut m = gemma_meta("gemma2");
        m.push(("gemma2.attention.sliding_window".into(), json!(3)));
        let i = import_of(&as_ref(&m), &gemma_tensors(&g2)).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["query_pre_attn_scalar"].as_u64(), c["sliding_window"].as_u64()), (Some("gemma2"), Some(16), Some(3)));
        assert_eq!((c["attn_logit_softcapping"].as_f64(), c["final_logit_softcapping"].as_f64()), (Some(50.0), Some(30.0)));
        assert_eq!(c["layer_types"], json!(["sliding_attention"]));
        // Every norm is read through `stored - 1`; llama.cpp's ffn_norm is the pre-MLP norm.
        for n in ["model.norm.weight", "model.layers.0.input_layernorm.weight", "model.layers.0.pre_feedforward_layernorm.weight", "model.layers.0.post_feedforward_layernorm.weight"] {
            assert!(i.views.contains_key(n) && !i.tensors.contains_key(n), "{n}");
        }
        // Gemma 3: sliding window required, layers 0-4 of 6 sliding, linear scaling read.
        let mut m = gemma_meta("gemma3");
        let g3 = ["blk.0.post_attention_norm.weight", "blk.0.post_ffw_norm.weight", "blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight"];
        let e = import_of(&as_ref(&m), &gemma_tensors(&g3)).err().expect("refused").to_string();
        assert!(e.contains("gemma3.attention.sliding_window"), "{e}");
        m.push(("gemma3.attention.sliding_window".into(), json!(512)));
        m.push(("gemma3.rope.scaling.type".into(), json!("linear")));
        m.push(("gemma3.rope.scaling.factor".into(), json!(8.0f64)));
        let c = import_of(&as_ref(&m), &gemma_tensors(&g3)).unwrap().config;
        assert_eq!(c["model_type"].as_str(), Some("gemma3_text"));
        assert_eq!(c["rope_parameters"]["full_attention"]["factor"].as_f64(), Some(8.0));
        assert_eq!(c["rope_parameters"]["sliding_attention"]["rope_theta"].as_f64(), Some(10000.0));
        // Newer converters state the sliding layers' base.
        m.push(("gemma3.rope.freq_base_swa".into(), json!(20000.0f64)));
        let c = import_of(&as_ref(&m), &gemma_tensors(&g3)).unwrap().config;
        assert_eq!(c["rope_parameters"]["sliding_attention"]["rope_theta"].as_f64(), Some(20000.0));
        // Keys and tensors outside the architecture are refused by name.
        let mut m = gemma_meta("gemma3");
        m.push(("gemma3.attention.sliding_window".into(), json!(512)));
        m.push(("gemma3.attn_logit_softcapping".into(), json!(50.0f64)));
        assert!(import_of(&as_ref(&m), &gemma_tensors(&g3)).err().expect("refused").to_string().contains("`gemma3.attn_logit_softcapping`"));
        let e = import_of(&as_ref(&gemma_meta("gemma")), &gemma_tensors(&["blk.0.post_ffw_norm.weight"])).err().expect("refused").to_string();
        assert!(e.contains("`blk.0.post_ffw_norm.weight`"), "{e}");
    }

    /// `llama_meta` as a granite file with its four scales.
    fn granite_meta() -> Vec<(String, Json)> {
        let mut m = meta_of("granite");
        m.extend([("granite.logit_scale", 4.0f64), ("granite.embedding_scale", 8.0), ("granite.residual_scale", 0.25), ("granite.attention.scale", 0.5)].map(|(k, v)| (k.to_string(), json!(v))));
        m
    }

    #[test]
    fn granite_files_read_the_four_scales_and_llama_cpps_defaults() {
        let i = import_of(&as_ref(&granite_meta()), &llama_tensors()).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["logits_scaling"].as_f64(), c["embedding_multiplier"].as_f64()), (Some("granite"), Some(4.0), Some(8.0)));
        assert_eq!((c["residual_multiplier"].as_f64(), c["attention_multiplier"].as_f64(), c["mlp_bias"].as_bool()), (Some(0.25), Some(0.5), Some(false)));
        // A LlamaModel: the float k is un-permuted.
        assert!(i.views.contains_key("model.layers.0.self_attn.k_proj.weight"));
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(c.clone()).to_string()).unwrap();
        // Absent (or 0) scales: llama.cpp's defaults, 1/sqrt(head size) for attention.
        let mut m = granite_meta();
        m.retain(|(k, _)| !k.contains("attention.scale") && !k.contains("residual") && !k.contains("embedding_scale"));
        m.push(("granite.embedding_scale".into(), json!(0.0f64)));
        let c = import_of(&as_ref(&m), &llama_tensors()).unwrap().config;
        assert_eq!((c["attention_multiplier"].as_f64(), c["residual_multiplier"].as_f64(), c["embedding_multiplier"].as_f64()), (Some(0.25), Some(1.0), Some(1.0)));
        // Biases beyond q/k/v map; the MLP's set mlp_bias.
        let mut t = llama_tensors();
        t.extend([("blk.0.attn_output.bias", 0, vec![64]), ("blk.0.ffn_gate.bias", 0, vec![128]), ("blk.0.ffn_up.bias", 0, vec![128]), ("blk.0.ffn_down.bias", 0, vec![64])]);
        let i = import_of(&as_ref(&granite_meta()), &t).unwrap();
        assert!(i.tensors.contains_key("model.layers.0.mlp.down_proj.bias") && i.config["mlp_bias"].as_bool() == Some(true));
    }

    #[test]
    fn granite_refusals_name_the_key() {
        let e = |m: Vec<(String, Json)>| import_of(&as_ref(&m), &llama_tensors()).err().expect("refused").to_string();
        // llama.cpp requires the logit scale.
        let mut m = granite_meta();
        m.retain(|(k, _)| k != "granite.logit_scale");
        let got = e(m);
        assert!(got.contains("`granite.logit_scale` is missing"), "{got}");
        let mut m = granite_meta();
        m.retain(|(k, _)| k != "granite.residual_scale");
        m.push(("granite.residual_scale".into(), json!(-0.5f64)));
        assert!(e(m).contains("`granite.residual_scale` is -0.5"));
        // RoPE switched off (`rope.scaling.finetuned`), an expert count: not read, refused.
        for key in ["granite.rope.scaling.finetuned", "granite.expert_count"] {
            let mut m = granite_meta();
            m.push((key.into(), json!(0)));
            let got = e(m);
            assert!(got.contains(&format!("`{key}`")) && got.contains("not read"), "{got}");
        }
    }

    fn olmo2_tensors() -> Vec<(&'static str, u32, Vec<u64>)> {
        let mut t = vec![("token_embd.weight", 8, vec![64, 32]), ("output_norm.weight", 0, vec![64]), ("output.weight", 8, vec![64, 32])];
        t.extend([("blk.0.attn_q.weight", 8, vec![64, 64]), ("blk.0.attn_k.weight", 0, vec![64, 32]), ("blk.0.attn_v.weight", 8, vec![64, 32]), ("blk.0.attn_output.weight", 8, vec![64, 64])]);
        t.extend([("blk.0.attn_q_norm.weight", 0, vec![64]), ("blk.0.attn_k_norm.weight", 0, vec![32]), ("blk.0.post_attention_norm.weight", 0, vec![64]), ("blk.0.post_ffw_norm.weight", 0, vec![64])]);
        t.extend([("blk.0.ffn_gate.weight", 8, vec![64, 128]), ("blk.0.ffn_up.weight", 8, vec![64, 128]), ("blk.0.ffn_down.weight", 8, vec![128, 64])]);
        t
    }

    #[test]
    fn olmo2_files_map_the_post_norms_and_keep_q_and_k_unpermuted() {
        let i = import_of(&as_ref(&meta_of("olmo2")), &olmo2_tensors()).unwrap();
        assert_eq!((i.config["model_type"].as_str(), i.config["attention_bias"].as_bool()), (Some("olmo2"), Some(false)));
        for n in ["post_attention_layernorm.weight", "post_feedforward_layernorm.weight", "self_attn.k_norm.weight", "self_attn.k_proj.weight"] {
            assert!(i.tensors.contains_key(&format!("model.layers.0.{n}")), "{n}");
        }
        assert!(i.views.is_empty(), "no permutation");
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(i.config.clone()).to_string()).unwrap();
        // A pre-norm is not OLMo2's.
        let mut t = olmo2_tensors();
        t.push(("blk.0.attn_norm.weight", 0, vec![64]));
        let got = import_of(&as_ref(&meta_of("olmo2")), &t).err().expect("refused").to_string();
        assert!(got.contains("`blk.0.attn_norm.weight`") && got.contains("not mapped for architecture olmo2"), "{got}");
        // OLMo 3 (olmo2 with a window): olmo3, layers from the pattern (a period, default 4,
        // or one bool per layer), YaRN on the full layers only.
        let mut m = meta_of("olmo2");
        m.push(("olmo2.attention.sliding_window".into(), json!(4096)));
        let i = import_of(&as_ref(&m), &olmo2_tensors()).unwrap();
        assert_eq!((i.config["model_type"].as_str(), i.config["sliding_window"].as_u64()), (Some("olmo3"), Some(4096)));
        let layers = i.config["num_hidden_layers"].as_u64().unwrap() as usize;
        let want: Vec<&str> = (0..layers).map(|l| if l % 4 < 3 { "sliding_attention" } else { "full_attention" }).collect();
        assert_eq!(i.config["layer_types"], json!(want));
        m.push(("olmo2.rope.scaling.type".into(), json!("yarn")));
        m.push(("olmo2.rope.scaling.factor".into(), json!(8.0)));
        m.push(("olmo2.rope.scaling.original_context_length".into(), json!(8192)));
        m.push(("olmo2.rope.scaling.yarn_attn_factor".into(), json!(1.25)));
        m.push(("olmo2.attention.sliding_window_pattern".into(), json!(vec![false; layers])));
        let i = import_of(&as_ref(&m), &olmo2_tensors()).unwrap();
        let rope = &i.config["rope_parameters"];
        assert_eq!((rope["full_attention"]["rope_type"].as_str(), rope["full_attention"]["factor"].as_f64(), rope["full_attention"]["attention_factor"].as_f64()), (Some("yarn"), Some(8.0), Some(1.25)));
        assert_eq!(rope["sliding_attention"]["rope_type"].as_str(), Some("default"));
        assert_eq!(rope["sliding_attention"]["rope_theta"], rope["full_attention"]["rope_theta"]);
        assert_eq!(i.config["layer_types"], json!(vec!["full_attention"; layers]));
        // Without a window it is OLMo 2, which has no RoPE scaling.
        let mut m = meta_of("olmo2");
        m.push(("olmo2.rope.scaling.type".into(), json!("yarn")));
        let got = import_of(&as_ref(&m), &olmo2_tensors()).err().expect("refused").to_string();
        assert!(got.contains("`olmo2.rope.scaling.type`") && got.contains("not OLMo 3"), "{got}");
    }

    /// Command R: one bias-free LayerNorm a layer, `logit_scale` required, the head tied, q/k/v
    /// biases refused (Cohere's also bias o_proj); Command R+'s per-head q/k norms switch
    /// `use_qk_norm` on, in every layer or none, q and k together.
    #[test]
    fn command_r_files_become_cohere_configs() {
        let mut t = llama_tensors();
        t.retain(|(n, _, _)| *n != "blk.0.ffn_norm.weight");
        let mut m: Vec<(String, Json)> = meta_of("command-r").into_iter().filter(|(k, _)| !k.ends_with("layer_norm_rms_epsilon")).collect();
        m.push(("command-r.attention.layer_norm_epsilon".into(), json!(1e-5f64)));
        let e = import_of(&as_ref(&m), &t).err().expect("refused").to_string();
        assert!(e.contains("`command-r.logit_scale` is missing"), "{e}");
        m.push(("command-r.logit_scale".into(), json!(0.125f64)));
        let i = import_of(&as_ref(&m), &t).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["logit_scale"].as_f64(), c["tie_word_embeddings"].as_bool(), c["attention_bias"].as_bool()), (Some("cohere"), Some(0.125), Some(true), Some(false)));
        assert!(i.tensors.contains_key("model.layers.0.input_layernorm.weight"));
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(c.clone()).to_string()).unwrap();
        let mut biased = t.clone();
        biased.push(("blk.0.attn_q.bias", 0, vec![64]));
        let e = import_of(&as_ref(&m), &biased).err().expect("refused").to_string();
        assert!(e.contains("`attn_q.bias`") && e.contains("o_proj"), "{e}");
        assert_eq!(c["use_qk_norm"].as_bool(), Some(false));
        // Command R+: per-head q/k norms, one `[heads, head_dim]` weight each, switch the key on.
        let mut plus = t.clone();
        plus.extend([("blk.0.attn_q_norm.weight", 0, vec![16, 4]), ("blk.0.attn_k_norm.weight", 0, vec![16, 2])]);
        let i = import_of(&as_ref(&m), &plus).unwrap();
        assert_eq!(i.config["use_qk_norm"].as_bool(), Some(true));
        assert_eq!(i.tensors["model.layers.0.self_attn.q_norm.weight"].shape, [4, 16]);
        assert_eq!(i.tensors["model.layers.0.self_attn.k_norm.weight"].shape, [2, 16]);
        // Cohere 2 has no q/k norms: the tensor is not mapped there.
        let mut m2: Vec<(String, Json)> = m.iter().map(|(k, v)| (k.replace("command-r", "cohere2"), if k == "general.architecture" { json!("cohere2") } else { v.clone() })).collect();
        m2.push(("cohere2.attention.sliding_window".into(), json!(4)));
        let e = import_of(&as_ref(&m2), &plus).err().expect("refused").to_string();
        assert!(e.contains("`blk.0.attn_q_norm.weight`") && e.contains("not mapped for architecture cohere2"), "{e}");
        // Norms in some layers only: no config says that.
        let mut two = m.clone();
        two.retain(|(k, _)| !k.ends_with("block_count"));
        two.push(("command-r.block_count".into(), json!(2)));
        let e = import_of(&as_ref(&two), &plus).err().expect("refused").to_string();
        assert!(e.contains("1 of its 2 layers hold `attn_q_norm.weight`"), "{e}");
        let mut q_only = t.clone();
        q_only.push(("blk.0.attn_q_norm.weight", 0, vec![16, 4]));
        let e = import_of(&as_ref(&m), &q_only).err().expect("refused").to_string();
        assert!(e.contains("hold `attn_q_norm.weight` but no `attn_k_norm.weight`"), "{e}");
    }

    /// Apertus: the global `xielu.*` metadata (one value per layer, or one for all) becomes one
    /// scalar view per layer under the family's names; a wrong count is refused naming the key.
    #[test]
    fn apertus_files_read_their_xielu_scalars_per_layer() {
        let mut t = llama_tensors();
        t.extend([("blk.0.attn_q_norm.weight", 0, vec![16]), ("blk.0.attn_k_norm.weight", 0, vec![16])]);
        t.retain(|(n, _, _)| !n.starts_with("blk.0.ffn_gate."));
        let mut m = meta_of("apertus");
        m.extend([
            ("xielu.alpha_n".to_string(), json!([0.25f64])),
            ("xielu.alpha_p".to_string(), json!(0.5f64)),
            ("xielu.beta".to_string(), json!([0.75f64])),
            ("xielu.eps".to_string(), json!([-0.125f64])),
        ]);
        let i = import_of(&as_ref(&m), &t).unwrap();
        assert_eq!((i.config["hidden_act"].as_str(), i.config["rope_scaling"]["rope_type"].as_str()), (Some("xielu"), Some("default")));
        let value = |n: &str| f32::from_le_bytes(i.views[&format!("model.layers.0.mlp.act_fn.{n}")].materialize().unwrap()[..4].try_into().unwrap());
        assert_eq!([value("alpha_n"), value("alpha_p"), value("beta"), value("eps")], [0.25, 0.5, 0.75, -0.125]);
        assert!(i.tensors.contains_key("model.layers.0.attention_layernorm.weight") && i.tensors.contains_key("model.layers.0.self_attn.q_norm.weight"));
        let mut two = m.clone();
        two.retain(|(k, _)| k != "xielu.beta");
        two.push(("xielu.beta".to_string(), json!([0.75f64, 0.5f64])));
        let e = import_of(&as_ref(&two), &t).err().expect("refused").to_string();
        assert!(e.contains("`xielu.beta` has 2 values for 1 layers"), "{e}");
        m.retain(|(k, _)| k != "xielu.eps");
        let e = import_of(&as_ref(&m), &t).err().expect("refused").to_string();
        assert!(e.contains("`xielu.eps` is missing"), "{e}");
    }

    /// Ministral 3: the file's YaRN with its log multiplier as `mscale_all_dim`, the temperature
    /// scale as the query scale's beta over the YaRN context; no temperature key is beta 0, no
    /// YaRN the default RoPE stated (the family's default object is YaRN).
    #[test]
    fn mistral3_files_read_their_yarn_and_query_scale() {
        let t = llama_tensors();
        let mut m = meta_of("mistral3");
        m.extend([
            ("mistral3.rope.scaling.type".to_string(), json!("yarn")),
            ("mistral3.rope.scaling.factor".to_string(), json!(16.0f64)),
            ("mistral3.rope.scaling.original_context_length".to_string(), json!(16384)),
            ("mistral3.rope.scaling.yarn_log_multiplier".to_string(), json!(1.0f64)),
            ("mistral3.attention.temperature_scale".to_string(), json!(0.1f64)),
            ("mistral3.attention.temperature_length".to_string(), json!(16384)),
        ]);
        let i = import_of(&as_ref(&m), &t).unwrap();
        let p = &i.config["rope_parameters"];
        assert_eq!((i.config["model_type"].as_str(), p["rope_type"].as_str(), p["mscale_all_dim"].as_f64(), p["llama_4_scaling_beta"].as_f64()), (Some("ministral3"), Some("yarn"), Some(1.0), Some(0.1f32 as f64)));
        let c = crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(i.config.clone()).to_string()).unwrap();
        assert!(matches!(c.rope.kind, crate::RopeKind::Yarn { factor, attention_factor, .. } if factor == 16.0 && attention_factor == 1.0), "{:?}", c.rope.kind);
        assert!((c.rope.theta - 10000.5).abs() < 1e-9);
        // No YaRN, no temperature: the default RoPE at the file's base, no query scaling.
        let plain = meta_of("mistral3");
        let i = import_of(&as_ref(&plain), &t).unwrap();
        assert_eq!((i.config["rope_parameters"]["rope_type"].as_str(), i.config["rope_parameters"]["llama_4_scaling_beta"].as_f64()), (Some("default"), Some(0.0)));
        let c = crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(i.config.clone()).to_string()).unwrap();
        assert!(matches!(c.rope.kind, crate::RopeKind::Default) && (c.rope.theta - 10000.5).abs() < 1e-9);
        // A bias llama.cpp's mistral3 loader reads but Ministral 3 has no switch for stays unmapped.
        let mut biased = t.clone();
        biased.push(("blk.0.attn_output.bias", 0, vec![64]));
        let e = import_of(&as_ref(&plain), &biased).err().expect("refused").to_string();
        assert!(e.contains("`blk.0.attn_output.bias`"), "{e}");
    }

    /// StableLM: LayerNorms with bias, partial rotary from `rope.dimension_count`; the parallel
    /// residual and the per-head q/k norms from the tensors, as llama.cpp's graph decides them
    /// (the converter writes `use_parallel_residual` true for a config without the key).
    #[test]
    fn stablelm_files_read_their_rotary_width_and_their_block_from_the_tensors() {
        let mut t = llama_tensors();
        t.extend([("blk.0.attn_norm.bias", 0, vec![64]), ("blk.0.ffn_norm.bias", 0, vec![64]), ("output_norm.bias", 0, vec![64]), ("output.weight", 8, vec![64, 32])]);
        let mut m: Vec<(String, Json)> = meta_of("stablelm").into_iter().filter(|(k, _)| !k.ends_with("layer_norm_rms_epsilon") && !k.ends_with("freq_base")).collect();
        m.push(("stablelm.attention.layer_norm_epsilon".into(), json!(1e-5f64)));
        m.push(("stablelm.rope.dimension_count".into(), json!(4)));
        m.push(("stablelm.use_parallel_residual".into(), json!(false)));
        let i = import_of(&as_ref(&m), &t).unwrap();
        let c = crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(i.config.clone()).to_string()).unwrap();
        assert_eq!((c.model_type.as_str(), c.rope.partial_rotary_factor, c.rope.theta), ("stablelm", 0.25, 10000.0));
        assert_eq!((i.config["use_parallel_residual"].as_bool(), i.config["qk_layernorm"].as_bool()), (Some(false), Some(false)));
        // The key true with `ffn_norm` present (a config without the key): sequential still.
        m.retain(|(k, _)| !k.ends_with("use_parallel_residual"));
        m.push(("stablelm.use_parallel_residual".into(), json!(true)));
        assert_eq!(import_of(&as_ref(&m), &t).unwrap().config["use_parallel_residual"].as_bool(), Some(false));
        // StableLM 2 12B: no `ffn_norm`, the q/k norms stacked `[head_dim, heads]`, split back
        // into one tensor per head at its offset.
        let mut twelve = t.clone();
        twelve.retain(|(n, _, _)| !n.starts_with("blk.0.ffn_norm."));
        twelve.extend([("blk.0.attn_q_norm.weight", 0, vec![16, 4]), ("blk.0.attn_k_norm.weight", 0, vec![16, 2])]);
        let values: Vec<f32> = (0..64).map(|v| v as f32).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, file_with(&as_ref(&m), &twelve, &[("blk.0.attn_q_norm.weight", values)])).unwrap();
        let i = import(&path).unwrap();
        assert_eq!((i.config["use_parallel_residual"].as_bool(), i.config["qk_layernorm"].as_bool()), (Some(true), Some(true)));
        let head2 = &i.tensors["model.layers.0.self_attn.q_layernorm.norms.2.weight"];
        assert_eq!(head2.shape, [16]);
        let got: Vec<f32> = Recipe::source(head2.clone()).materialize().unwrap().chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(got, (32..48).map(|v| v as f32).collect::<Vec<_>>());
        assert!(i.tensors.contains_key("model.layers.0.self_attn.k_layernorm.norms.1.weight"));
        assert!(!i.tensors.keys().any(|k| k.contains("norms.2") && k.contains("k_layernorm")));
        let c = crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(i.config.clone()).to_string()).unwrap();
        assert_eq!(c.model_type, "stablelm");
        // A stack of the wrong head count is refused naming the tensor.
        let mut wrong = twelve.clone();
        wrong.retain(|(n, _, _)| !n.ends_with("attn_k_norm.weight"));
        wrong.push(("blk.0.attn_k_norm.weight", 0, vec![16, 4]));
        let e = import_of(&as_ref(&m), &wrong).err().expect("refused").to_string();
        assert!(e.contains("`blk.0.attn_k_norm.weight` has shape [16, 4]"), "{e}");
    }

    /// EXAONE 4: OLMo 2's tensors with per-head q/k norms; the window and its pattern when the
    /// file states one (a period defaults to 4), else `sliding_window: null` (no window, which
    /// the family's default for an absent key would otherwise give).
    #[test]
    fn exaone4_files_state_their_window_or_none() {
        let mut t = olmo2_tensors();
        t.retain(|(n, _, _)| !n.contains("_norm.weight") || !n.starts_with("blk.0.attn_"));
        t.extend([("blk.0.attn_q_norm.weight", 0, vec![16]), ("blk.0.attn_k_norm.weight", 0, vec![16])]);
        let mut m = meta_of("exaone4");
        m.push(("exaone4.attention.key_length".into(), json!(16)));
        m.push(("exaone4.attention.value_length".into(), json!(16)));
        let i = import_of(&as_ref(&m), &t).unwrap();
        assert_eq!((i.config["model_type"].as_str(), &i.config["sliding_window"]), (Some("exaone4"), &Json::Null));
        assert!(i.tensors.contains_key("model.layers.0.self_attn.q_norm.weight") && i.tensors.contains_key("model.layers.0.post_feedforward_layernorm.weight"));
        let c = crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(i.config.clone()).to_string()).unwrap();
        assert!(c.sliding_window.null && c.sliding_window.layer_types.as_ref().is_some_and(|t| t.iter().all(|k| k == "full_attention")));
        let mut windowed = m.clone();
        windowed.push(("exaone4.attention.sliding_window".into(), json!(8)));
        let i = import_of(&as_ref(&windowed), &t).unwrap();
        let layers = i.config["num_hidden_layers"].as_u64().unwrap() as usize;
        let want: Vec<&str> = (0..layers).map(|l| if l % 4 < 3 { "sliding_attention" } else { "full_attention" }).collect();
        assert_eq!((i.config["sliding_window"].as_u64(), &i.config["layer_types"]), (Some(8), &json!(want)));
        m.push(("exaone4.attention.sliding_window_pattern".into(), json!(2)));
        let e = import_of(&as_ref(&m), &t).err().expect("refused").to_string();
        assert!(e.contains("`exaone4.attention.sliding_window_pattern` is set without `exaone4.attention.sliding_window`"), "{e}");
    }

    fn starcoder2_meta() -> Vec<(String, Json)> {
        let mut m: Vec<(String, Json)> = meta_of("starcoder2").into_iter().filter(|(k, _)| !k.contains("rms")).collect();
        m.push(("starcoder2.attention.layer_norm_epsilon".into(), json!(1e-5f64)));
        m
    }

    /// A one-layer file with LayerNorm biases and biased projections (StarCoder2's names).
    fn biased_tensors(mlp: &[(&'static str, u32, Vec<u64>)]) -> Vec<(&'static str, u32, Vec<u64>)> {
        let mut t = vec![("token_embd.weight", 8, vec![64, 32]), ("output_norm.weight", 0, vec![64]), ("output_norm.bias", 0, vec![64]), ("output.weight", 8, vec![64, 32])];
        t.extend([("blk.0.attn_norm.weight", 0, vec![64]), ("blk.0.attn_norm.bias", 0, vec![64])]);
        t.extend([("blk.0.attn_output.weight", 8, vec![64, 64]), ("blk.0.attn_output.bias", 0, vec![64])]);
        t.extend([("blk.0.ffn_up.weight", 8, vec![64, 128]), ("blk.0.ffn_up.bias", 0, vec![128]), ("blk.0.ffn_down.weight", 8, vec![128, 64]), ("blk.0.ffn_down.bias", 0, vec![64])]);
        t.extend(mlp.iter().cloned());
        t
    }

    fn separate_qkv() -> Vec<(&'static str, u32, Vec<u64>)> {
        vec![
            ("blk.0.attn_q.weight", 8, vec![64, 64]),
            ("blk.0.attn_q.bias", 0, vec![64]),
            ("blk.0.attn_k.weight", 8, vec![64, 32]),
            ("blk.0.attn_k.bias", 0, vec![32]),
            ("blk.0.attn_v.weight", 8, vec![64, 32]),
            ("blk.0.attn_v.bias", 0, vec![32]),
        ]
    }

    #[test]
    fn starcoder2_files_read_the_layer_norm_epsilon_and_the_biases() {
        let mut t = biased_tensors(&separate_qkv());
        t.extend([("blk.0.ffn_norm.weight", 0, vec![64]), ("blk.0.ffn_norm.bias", 0, vec![64])]);
        let i = import_of(&as_ref(&starcoder2_meta()), &t).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["norm_epsilon"].as_f64(), c["use_bias"].as_bool()), (Some("starcoder2"), Some(1e-5f32 as f64), Some(true)));
        assert_eq!((c["hidden_act"].as_str(), c.get("rms_norm_eps"), c["tie_word_embeddings"].as_bool()), (Some("gelu_pytorch_tanh"), None, Some(false)));
        for n in ["model.norm.bias", "model.layers.0.post_attention_layernorm.bias", "model.layers.0.mlp.c_fc.bias", "model.layers.0.self_attn.o_proj.bias"] {
            assert!(i.tensors.contains_key(n), "{n}");
        }
        assert!(i.packed.contains_key("model.layers.0.mlp.c_proj.weight") && i.views.is_empty());
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(c.clone()).to_string()).unwrap();
        // The RMS epsilon the converter writes when the config has one is not read by llama.cpp's
        // loader, nor here; without the LayerNorm epsilon the file is refused.
        let mut m = starcoder2_meta();
        m.push(("starcoder2.attention.layer_norm_rms_epsilon".into(), json!(1e-6f64)));
        assert_eq!(import_of(&as_ref(&m), &t).unwrap().config["norm_epsilon"].as_f64(), Some(1e-5f32 as f64));
        let m: Vec<(String, Json)> = starcoder2_meta().into_iter().filter(|(k, _)| !k.contains("layer_norm_epsilon")).collect();
        let got = import_of(&as_ref(&m), &t).err().expect("refused").to_string();
        assert!(got.contains("`starcoder2.attention.layer_norm_epsilon` is missing"), "{got}");
        // A gated MLP is not StarCoder2's.
        let mut t2 = t.clone();
        t2.push(("blk.0.ffn_gate.weight", 8, vec![64, 128]));
        assert!(import_of(&as_ref(&starcoder2_meta()), &t2).err().expect("refused").to_string().contains("`blk.0.ffn_gate.weight`"));
    }

    fn phi2_meta() -> Vec<(String, Json)> {
        let mut m = starcoder2_meta().into_iter().map(|(k, v)| (k.replace("starcoder2", "phi2"), if k == "general.architecture" { json!("phi2") } else { v })).collect::<Vec<_>>();
        m.retain(|(k, _)| !k.contains("head_count_kv"));
        m.push(("phi2.rope.dimension_count".into(), json!(8)));
        m
    }

    fn phi2_tensors(qkv: &[(&'static str, u32, Vec<u64>)]) -> Vec<(&'static str, u32, Vec<u64>)> {
        let mut t = biased_tensors(qkv);
        t.push(("output.bias", 0, vec![32]));
        t
    }

    /// Phi-2's fused q/k/v: 4 heads of 16, all of them key/value heads (64 + 64 + 64 rows).
    fn fused_qkv(weight_type: u32) -> Vec<(&'static str, u32, Vec<u64>)> {
        vec![("blk.0.attn_qkv.weight", weight_type, vec![64, 192]), ("blk.0.attn_qkv.bias", 0, vec![192])]
    }

    #[test]
    fn phi2_files_split_a_fused_qkv_into_row_ranges_and_read_partial_rotary() {
        let bias: Vec<f32> = (0..192).map(|i| i as f32).collect();
        let i = import_with(&as_ref(&phi2_meta()), &phi2_tensors(&fused_qkv(8)), &[("blk.0.attn_qkv.bias", bias.clone())]).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["partial_rotary_factor"].as_f64(), c["layer_norm_eps"].as_f64()), (Some("phi"), Some(0.5), Some(1e-5f32 as f64)));
        assert_eq!((c["num_key_value_heads"].as_u64(), c["hidden_act"].as_str(), c["qk_layernorm"].as_bool()), (Some(4), Some("gelu_new"), Some(false)));
        // The Q8_0 rows stay packed, 64 each; the bias pieces hold their rows' values.
        for (n, from) in [("q", 0), ("k", 64), ("v", 128)] {
            let w = &i.packed[&format!("model.layers.0.self_attn.{n}_proj.weight")];
            assert_eq!((w.n(), w.k()), (64, 64));
            let b: Vec<f32> = i.tensors[&format!("model.layers.0.self_attn.{n}_proj.bias")].bytes().unwrap().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            assert_eq!(b, bias[from..from + 64], "{n}");
        }
        for n in ["model.final_layernorm.bias", "lm_head.bias", "model.layers.0.self_attn.dense.bias", "model.layers.0.mlp.fc2.bias"] {
            assert!(i.tensors.contains_key(n), "{n}");
        }
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(c.clone()).to_string()).unwrap();
        // A float fused weight: k is rows 64..128 of the file.
        let w: Vec<f32> = (0..192 * 64).map(|i| (i / 64) as f32).collect();
        let i = import_with(&as_ref(&phi2_meta()), &phi2_tensors(&fused_qkv(0)), &[("blk.0.attn_qkv.weight", w)]).unwrap();
        let k = &i.tensors["model.layers.0.self_attn.k_proj.weight"];
        assert_eq!(k.shape, vec![64, 64]);
        assert_eq!(f32::from_le_bytes(k.bytes().unwrap()[..4].try_into().unwrap()), 64.0);
        // Separate q/k/v as the converter writes them from today's checkpoints; a full-head
        // rotary is stated as 1.0 (the phi family's default is 0.5).
        let mut m = phi2_meta();
        m.retain(|(k, _)| k != "phi2.rope.dimension_count");
        let mut sep = separate_qkv();
        sep.retain(|(n, _, _)| !n.contains("attn_k") && !n.contains("attn_v"));
        sep.extend([("blk.0.attn_k.weight", 8, vec![64, 64]), ("blk.0.attn_k.bias", 0, vec![64]), ("blk.0.attn_v.weight", 8, vec![64, 64]), ("blk.0.attn_v.bias", 0, vec![64])]);
        let c = import_of(&as_ref(&m), &phi2_tensors(&sep)).unwrap().config;
        assert_eq!(c["partial_rotary_factor"].as_f64(), Some(1.0));
    }

    #[test]
    fn phi2_refusals_name_the_key_or_tensor() {
        let e = |m: Vec<(String, Json)>, t: Vec<(&str, u32, Vec<u64>)>| import_of(&as_ref(&m), &t).err().expect("refused").to_string();
        // Fused and separate q at once; a fused q/k/v of the wrong row count.
        let mut t = phi2_tensors(&fused_qkv(8));
        t.push(("blk.0.attn_q.weight", 8, vec![64, 64]));
        let got = e(phi2_meta(), t);
        assert!(got.contains("`blk.0.attn_q.weight` beside another tensor read as `model.layers.0.self_attn.q_proj.weight`"), "{got}");
        let mut t = phi2_tensors(&[]);
        t.extend([("blk.0.attn_qkv.weight", 8, vec![64, 160]), ("blk.0.attn_qkv.bias", 0, vec![160])]);
        let got = e(phi2_meta(), t);
        assert!(got.contains("`blk.0.attn_qkv.weight`") && got.contains("has 192 rows"), "{got}");
        // The converter's 4 x hidden where the MLP has 2 x hidden: llama.cpp refuses it too.
        let mut m = phi2_meta();
        m.retain(|(k, _)| k != "phi2.feed_forward_length");
        m.push(("phi2.feed_forward_length".into(), json!(256)));
        let got = e(m, phi2_tensors(&fused_qkv(8)));
        assert!(got.contains("`phi2.feed_forward_length` is 256") && got.contains("blk.0.ffn_up.weight"), "{got}");
        // The LayerNorm epsilon is required; an odd rotary count is refused; a gated MLP and
        // q/k LayerNorms are not Phi-2's in llama.cpp.
        let m: Vec<(String, Json)> = phi2_meta().into_iter().filter(|(k, _)| !k.contains("layer_norm_epsilon")).collect();
        assert!(e(m, phi2_tensors(&fused_qkv(8))).contains("`phi2.attention.layer_norm_epsilon` is missing"));
        let mut m = phi2_meta();
        m.retain(|(k, _)| k != "phi2.rope.dimension_count");
        m.push(("phi2.rope.dimension_count".into(), json!(7)));
        assert!(e(m, phi2_tensors(&fused_qkv(8))).contains("`phi2.rope.dimension_count` is 7"));
        for extra in [("blk.0.ffn_gate.weight", 8, vec![64, 128]), ("blk.0.attn_q_norm.weight", 0, vec![16])] {
            let mut t = phi2_tensors(&fused_qkv(8));
            t.push(extra.clone());
            let got = e(phi2_meta(), t);
            assert!(got.contains(&format!("`{}`", extra.0)) && got.contains("not mapped for architecture phi2"), "{got}");
        }
    }

    #[test]
    fn smollm3_files_get_llama_cpps_nope_layers() {
        let mut m = meta_of("smollm3");
        m.retain(|(k, _)| k != "smollm3.block_count");
        m.push(("smollm3.block_count".into(), json!(8)));
        let layers: Vec<(String, u32, Vec<u64>)> =
            (1..8).flat_map(|i| llama_tensors().into_iter().filter(|(n, _, _)| n.starts_with("blk.0.")).map(move |(n, ty, d)| (n.replacen("blk.0.", &format!("blk.{i}."), 1), ty, d))).collect();
        let mut t = llama_tensors();
        t.extend(layers.iter().map(|(n, ty, d)| (n.as_str(), *ty, d.clone())));
        let i = import_of(&as_ref(&m), &t).unwrap();
        let c = &i.config;
        assert_eq!((c["model_type"].as_str(), c["no_rope_layers"].clone(), c["tie_word_embeddings"].as_bool()), (Some("smollm3"), json!([1, 1, 1, 0, 1, 1, 1, 0]), Some(true)));
        assert!(i.views.contains_key("model.layers.7.self_attn.k_proj.weight"), "a LlamaModel: q/k un-permuted");
        crate::DecoderConfig::parse(Path::new("m.gguf"), &Json::Object(c.clone()).to_string()).unwrap();
        // llama.cpp's SmolLM3 graph applies no rope factors and reads no attention scale.
        let mut t2 = t.clone();
        t2.push((ROPE_FREQS, 0, vec![8]));
        assert!(import_of(&as_ref(&m), &t2).err().expect("refused").to_string().contains("not mapped for architecture smollm3"));
        let mut m2 = m.clone();
        m2.push(("smollm3.attention.scale".into(), json!(0.125f64)));
        assert!(import_of(&as_ref(&m2), &t).err().expect("refused").to_string().contains("`smollm3.attention.scale`"));
    }

    #[test]
    fn names_map_to_the_family_and_unknown_ones_do_not() {
        let llama = arch("llama").unwrap();
        assert_eq!(family_name("blk.12.attn_output.weight", &llama).as_deref(), Some("model.layers.12.self_attn.o_proj.weight"));
        assert_eq!(family_name("output.weight", &llama).as_deref(), Some("lm_head.weight"));
        assert_eq!(family_name("blk.0.ffn_norm.weight", &llama).as_deref(), Some("model.layers.0.post_attention_layernorm.weight"));
        assert_eq!(family_name("blk.x.attn_q.weight", &llama), None);
        assert_eq!(family_name("blk.0.ffn_gate_exps.weight", &llama), None);
        assert_eq!(family_name("blk.0.post_ffw_norm.weight", &llama), None);
        // Gemma 2/3: llama.cpp's ffn_norm is the norm before the MLP.
        let g3 = arch("gemma3").unwrap();
        assert_eq!(family_name("blk.1.ffn_norm.weight", &g3).as_deref(), Some("model.layers.1.pre_feedforward_layernorm.weight"));
        assert_eq!(family_name("blk.1.attn_k_norm.weight", &g3).as_deref(), Some("model.layers.1.self_attn.k_norm.weight"));
        assert_eq!(family_name("blk.1.attn_k_norm.weight", &arch("gemma2").unwrap()), None);
    }
}
