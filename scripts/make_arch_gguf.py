"""Writes tests/python/data/gguf-arch/: tiny fixtures of the llama (Llama 3 rope factors), qwen3
and phi3 GGUF architectures, written the way llama.cpp's converter writes them (issue #29), for
tests/python/test_gguf_arch.py. No torch: gguf-py (its writer, `quantize` and `dequantize`),
numpy and safetensors only.

Run once, not in CI (every file, or the stems named):
    /work/venv-tools/bin/python scripts/make_arch_gguf.py [STEM ...]    # from the repository root

What llama.cpp's converter writes (read for facts: convert_hf_to_gguf.py, split into
`conversion/*.py` in newer trees; `TextModel.set_gguf_parameters`, `LlamaModel`, `Qwen3Model`,
`Phi3MiniModel`):

- every architecture: block_count, context_length (max_position_embeddings),
  embedding_length, feed_forward_length, attention.head_count(_kv),
  attention.layer_norm_rms_epsilon, general.file_type.
- `llama` (tests/fixtures/tiny-llama3-rope): rope.freq_base, attention.key_length /
  value_length (the config has head_dim), vocab_size, rope.dimension_count (head_dim); q/k rows
  permuted (`[heads, 2, hd/2]` -> `[heads, hd/2, 2]`, k with the KV heads); a llama3
  `rope_scaling` writes no scaling key but the tensor `rope_freqs.weight` (F32, head_dim/2):
  with the base frequencies `1/theta^(2i/dim)` in f32 and wavelength `2 pi / f`, the factor is 1
  below `original / high_freq_factor`, `factor` above `original / low_freq_factor`, and
  `1 / ((1 - smooth) / factor + smooth)` between, `smooth = (original / wavelength - low) /
  (high - low)`.
- `qwen3` (tiny-qwen3): rope.freq_base, key_length / value_length; `attn_q_norm` /
  `attn_k_norm`; q/k not permuted.
- `phi3` (tiny-phi3, tiny-phi3-longrope, tiny-phi3-partial; Phi3MiniModel writes its keys
  itself, not through TextModel): context_length, rope.scaling.original_context_length,
  rope.dimension_count `int(partial_rotary_factor * hidden) // heads`, rope.freq_base,
  attention.sliding_window (0 when the config has none); fused `attn_qkv` and `ffn_up` (gate then
  up) as stored; with LongRoPE factors, rope.scaling.attn_factor `sqrt(1 + ln(scale) /
  ln(original))` (scale `max_position_embeddings / original`, 1 when not above 1) and the F32
  tensors `rope_factors_long.weight` / `rope_factors_short.weight`.
- `starcoder` (tiny-gpt_bigcode, StarCoderModel: GPT-2's keys with `head_count_kv` 1 and
  `feed_forward_length` 4 x hidden, the `c_attn` q/k/v rows as stored, Linear weights not
  transposed, `tokenizer.ggml.pre` `starcoder`).
- `falcon` (tiny-falcon, tiny-falcon2; FalconModel: its own keys, a context length of 2048,
  `tensor_data_layout` `jploski`, `feed_forward_length` 4 x hidden, the key/value heads, no
  rope base; `query_key_value` restacked from per key/value group to q, k, v rows;
  `tokenizer.ggml.pre` `falcon`). tiny-falcon2 has what the converter cannot write (a rope
  base, a width, biases): `falcon_states_more`.
- `granite_swa` (tiny-granite_swa, GraniteSWAModel, a GraniteModel: q/k permuted, Granite's
  keys, the sinks as `attn_sinks.weight`, the window with one bool per layer and
  `attention.rope_pattern` from the config's `no_rope_layers` (derived from `layer_rope_theta`,
  which the fixture's config carries alone); one rope base: tiny-granite_swa's layer 4 at 5e5 is
  not stated, see the test's AS_FILES_STATE).
- `chatglm` (tiny-glm as ChatGLMModel writes THUDM/glm-4-9b-chat: its own keys, the context
  `seq_length`, `layernorm_epsilon`, the base 10000 x `rope_ratio`, `rope.dimension_count` half
  the head, no BOS; q, k and v fused in `attn_qkv` with their biases as `query_key_value` holds
  them, gate and up fused in `ffn_up`; `tokenizer.ggml.pre` `chatglm-bpe`).
- `minicpm3` (tiny-minicpm3, MiniCPM3Model: its own keys, the ranks, `key_length` nope + rope,
  `rope.dimension_count` the rope part, no rope base, no value length, none of the scalings;
  the latent attention's tensors as stored, `attn_kv_b` whole; LongRoPE's factor tensors).
- `jais2` (tiny-jais2, Jais2Model: TextModel's keys with the rotated dimensions,
  `tokenizer.ggml.pre` `jais-2`).
- `gpt2` (tiny-gpt2, GPT2Model: its own keys, `feed_forward_length` 4 x hidden, no rope, the
  vocabulary's `tokenizer.ggml.pre` `gpt-2`): the Conv1D weights (`c_attn`, `c_proj`, `c_fc`)
  transposed to `[out, in]`, `position_embd` kept F32 (the converter's and llama.cpp's
  quantizer's rule), the head tied (no `output.weight`).
- no `lm_head` tying here otherwise: those fixtures have their own head (`output.weight`),
  except the MAPPED architectures tied by default (starcoder2, smollm3, ernie4_5).

Tokenizer: the fixture's byte-level BPE (tokenizer.json, 411 tokens and its merges) as a `gpt2`
vocabulary, its added tokens CONTROL, padded to the model's vocabulary with `[PADi]` tokens of
type UNUSED as llama.cpp's `get_vocab_base` pads; bos/eos/pad ids from config.json.

Files (`<fixture>` one of the five above):
- `<fixture>.F32.gguf`: every tensor F32, so the model is the fixture's own: the test compares
  with the fixture's reference (tests/fixtures/<fixture>/reference.safetensors).
- `tiny-llama3-rope.Q.gguf`, `tiny-phi3-longrope.Q.gguf`: attention (and token embedding and
  head) Q8_0, MLP Q4_0 (gguf-py's quantizer), norms and rope factors F32; and
  `<fixture>.Q.dequantized.safetensors`: gguf-py's `dequantize` of every tensor of that file,
  in Hugging Face names and row order (q/k un-permuted), a float checkpoint (with the fixture's
  config.json and tokenizer) the test builds beside the quantized file.
"""
import json
import math
import sys
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from safetensors.numpy import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_writing import add_own_sizes, add_tensors_and_close, add_text_sizes, check_round_trip  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
OUT = ROOT / "tests" / "python" / "data" / "gguf-arch"
ARCH = {
    "llama": "llama", "qwen3": "qwen3", "phi3": "phi3", "granite": "granite", "olmo2": "olmo2", "starcoder2": "starcoder2", "phi": "phi2",
    "smollm3": "smollm3", "glm4": "glm4", "ernie4_5": "ernie4_5", "olmo": "olmo", "nemotron": "nemotron", "gpt2": "gpt2",
    # Olmo2Model converts Olmo3ForCausalLM too (`olmo2` with the window keys).
    "olmo3": "olmo2", "seed_oss": "seed_oss", "arcee": "arcee", "exaone4": "exaone4",
    "cohere2": "cohere2", "stablelm": "stablelm", "cohere": "command-r", "ministral3": "mistral3", "apertus": "apertus",
    "gpt_neox": "gptneox", "gpt_bigcode": "starcoder", "falcon": "falcon", "jais2": "jais2", "minicpm3": "minicpm3", "granite_swa": "granite_swa", "glm": "chatglm",
    "exaone": "exaone", "bloom": "bloom", "mpt": "mpt", "dbrx": "dbrx",
}
# The architectures whose tensors are named through gguf-py's TensorNameMap, as the converter
# names them (`TextModel.map_tensor_name`), and their converter class's q/k permutation.
MAPPED = {
    "granite": gguf.MODEL_ARCH.GRANITE, "olmo2": gguf.MODEL_ARCH.OLMO2, "starcoder2": gguf.MODEL_ARCH.STARCODER2, "phi2": gguf.MODEL_ARCH.PHI2,
    "smollm3": gguf.MODEL_ARCH.SMOLLM3, "glm4": gguf.MODEL_ARCH.GLM4, "ernie4_5": gguf.MODEL_ARCH.ERNIE4_5, "olmo": gguf.MODEL_ARCH.OLMO,
    "nemotron": gguf.MODEL_ARCH.NEMOTRON, "gpt2": gguf.MODEL_ARCH.GPT2, "seed_oss": gguf.MODEL_ARCH.SEED_OSS, "arcee": gguf.MODEL_ARCH.ARCEE,
    "exaone4": gguf.MODEL_ARCH.EXAONE4, "cohere2": gguf.MODEL_ARCH.COHERE2,
    "stablelm": gguf.MODEL_ARCH.STABLELM, "command-r": gguf.MODEL_ARCH.COMMAND_R, "mistral3": gguf.MODEL_ARCH.MISTRAL3,
    "apertus": gguf.MODEL_ARCH.APERTUS, "gptneox": gguf.MODEL_ARCH.GPTNEOX, "starcoder": gguf.MODEL_ARCH.STARCODER,
    "falcon": gguf.MODEL_ARCH.FALCON, "jais2": gguf.MODEL_ARCH.JAIS2, "minicpm3": gguf.MODEL_ARCH.MINICPM3,
    # GraniteSWAModel's tensors are Granite's plus the sinks (`attn_sinks`, named by hand below:
    # this gguf-py predates LLM_ARCH_GRANITE_SWA).
    "granite_swa": gguf.MODEL_ARCH.GRANITE,
    "chatglm": gguf.MODEL_ARCH.CHATGLM,
    "exaone": gguf.MODEL_ARCH.EXAONE,
    "bloom": gguf.MODEL_ARCH.BLOOM,
    "mpt": gguf.MODEL_ARCH.MPT,
    "dbrx": gguf.MODEL_ARCH.DBRX,
    "minicpm": gguf.MODEL_ARCH.MINICPM,
}
PERMUTED = {"llama", "granite", "smollm3", "olmo", "arcee", "mistral3", "granite_swa", "minicpm"}
# NemotronModel.modify_tensors: every `norm.weight` stored + 1 (LayerNorm1P).
PLUS_ONE_NORMS = {"nemotron"}
# GPT2Model.modify_tensors: the Conv1D weights (`[in, out]`) transposed to `[out, in]`.
CONV1D = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")
FIXTURES = [
    "tiny-llama3-rope", "tiny-qwen3", "tiny-phi3", "tiny-phi3-longrope", "tiny-phi3-partial", "tiny-granite", "tiny-olmo2", "tiny-starcoder2",
    "tiny-phi", "tiny-smollm3", "tiny-glm4", "tiny-ernie4_5", "tiny-olmo", "tiny-nemotron", "tiny-gpt2",
    "tiny-olmo3", "tiny-seed_oss", "tiny-arcee", "tiny-exaone4", "tiny-cohere2", "tiny-stablelm",
    "tiny-cohere-qknorm", "tiny-stablelm2-12b", "tiny-ministral3", "tiny-apertus",
    # Not tiny-gpt_neox-sequential: its `rotary_emb_base` (500) is one GPTNeoXModel does not
    # write (llama.cpp runs 10000) and it has no q/k/v bias, which llama.cpp's loader requires.
    "tiny-gpt_neox", "tiny-gpt_bigcode", "tiny-jais2", "tiny-falcon",
    # Falcon2-11B's shape (two key/value groups) with what FalconModel does not write: see
    # `falcon_states_more`.
    "tiny-falcon2", "tiny-minicpm3", "tiny-granite_swa",
    # As ChatGLMModel writes THUDM/glm-4-9b-chat (fused query_key_value): `FUSED_AS_STORED`.
    "tiny-glm",
    # EXAONE 3.5 (its own weight names, mapped by gguf-py; its own config keys).
    "tiny-exaone",
    # ALiBi: BLOOM (per-head query_key_value restacked as GPT-NeoX's), MPT (Wqkv as stored, the
    # clamp; its softmax_scale is not written).
    "tiny-bloom", "tiny-mpt",
    # DBRX: Wqkv as stored, the experts' rows as 3-D stacks (w2 transposed per expert).
    "tiny-dbrx",
]
# Fixtures whose checkpoint family stores q, k and v fused, written so (the file's own layout,
# not llama.cpp's `--fuse-qkv`): THUDM's ChatGLM checkpoints (`query_key_value`).
FUSED_AS_STORED = {"tiny-glm"}
# Files of another layout than the fixture's own: `<stem>` -> the fixture it is written from.
# `-fused`: q, k and v in one `attn_qkv` (phi2's original checkpoints; llama.cpp's `--fuse-qkv`
# for the others: granite's rows permuted before the concat, seed_oss's with biases).
VARIANTS = {"tiny-phi-fused": "tiny-phi", "tiny-stablelm-key-default": "tiny-stablelm", "tiny-granite-fused": "tiny-granite", "tiny-seed_oss-fused": "tiny-seed_oss", "tiny-granite-minicpm": "tiny-granite", "tiny-granite-minicpm-longrope": "tiny-granite", "tiny-qwen3-vl": "tiny-qwen3"}
# Variants written as another architecture than their fixture's: tiny-granite as MiniCPMModel
# writes a MiniCPM checkpoint (`minicpm`: Granite's scalings under MiniCPM's keys, no attention
# scale), whose model is Granite's.
STEM_ARCH = {"tiny-granite-minicpm": "minicpm", "tiny-granite-minicpm-longrope": "minicpm", "tiny-qwen3-vl": "qwen3vl"}
# MiniCPM4's LongRoPE as MiniCPMModel writes it: `rope.scaling.type` longrope and the two F32
# factor sets (one per rotary pair: tiny-granite's head of 16), no original length.
MINICPM_LONGROPE = {"tiny-granite-minicpm-longrope": ([2.0 + i for i in range(8)], [1.0 + 0.25 * i for i in range(8)])}
QUANTIZED = ["tiny-granite-minicpm", "tiny-dbrx", "tiny-bloom", "tiny-mpt", "tiny-exaone", "tiny-llama3-rope", "tiny-phi3-longrope", "tiny-granite", "tiny-phi-fused", "tiny-glm4", "tiny-nemotron", "tiny-gpt2", "tiny-olmo3", "tiny-gpt_neox", "tiny-granite-fused", "tiny-gpt_bigcode", "tiny-jais2", "tiny-falcon2", "tiny-minicpm3", "tiny-granite_swa", "tiny-glm"]


def falcon_states_more(cfg):
    """Whether a Falcon fixture has what FalconModel does not write: a rope base other than
    10000 (it writes none, which llama.cpp runs at 10000), an MLP width other than 4 x hidden (it
    writes that), biases (llama.cpp loads none). Such a fixture's file (tiny-falcon2, Falcon2-11B's
    two key/value groups) states its rope base and width in the keys llama.cpp reads and holds
    its biases, so that it is the fixture's model; tiny-falcon's is the converter's own."""
    width = cfg.get("ffn_hidden_size") or 4 * cfg["hidden_size"]
    return cfg.get("rope_theta", 10000.0) != 10000.0 or width != 4 * cfg["hidden_size"] or cfg.get("bias", False)


def hf_spellings(cfg):
    """GPT-2's config keys (`n_embd`, ...) also under the names the other fixtures use, as
    `GPT2Config.attribute_map` reads them (`n_inner` null: 4 x hidden); GPT-NeoX's key/value
    heads (it has one per query head); EXAONE's own spellings."""
    if cfg["model_type"] == "gpt_neox":
        return dict(cfg, num_key_value_heads=cfg["num_attention_heads"])
    if cfg["model_type"] == "falcon":
        # FalconConfig: `num_kv_heads` under the new architecture, else one (multi-query) or one
        # per query head; the MLP `ffn_hidden_size` (4 x hidden when null).
        kv = cfg["num_kv_heads"] if cfg.get("new_decoder_architecture") else 1 if cfg.get("multi_query", True) else cfg["num_attention_heads"]
        return dict(cfg, num_key_value_heads=kv, intermediate_size=cfg.get("ffn_hidden_size") or 4 * cfg["hidden_size"])
    if cfg["model_type"] == "bloom":
        # BloomConfig: `n_embed`, `n_head`, `n_layer`; BloomModel.set_gguf_parameters writes the
        # context `seq_length`, else the width, and the MLP 4 x hidden.
        h = cfg["n_embed"]
        return dict(cfg, hidden_size=h, num_attention_heads=cfg["n_head"], num_key_value_heads=cfg["n_head"], num_hidden_layers=cfg["n_layer"],
                    intermediate_size=4 * h, max_position_embeddings=cfg.get("seq_length", h))
    if cfg["model_type"] == "mpt":
        h = cfg["d_model"]
        return dict(cfg, hidden_size=h, num_attention_heads=cfg["n_heads"], num_key_value_heads=cfg["n_heads"], num_hidden_layers=cfg["n_layers"],
                    intermediate_size=4 * h, max_position_embeddings=cfg["max_seq_len"])
    if cfg["model_type"] == "dbrx":
        a, f = cfg["attn_config"], cfg["ffn_config"]
        return dict(cfg, hidden_size=cfg["d_model"], num_attention_heads=cfg["n_heads"], num_key_value_heads=a["kv_n_heads"], num_hidden_layers=cfg["n_layers"],
                    intermediate_size=f["ffn_hidden_size"], max_position_embeddings=cfg["max_seq_len"])
    if cfg["model_type"] == "exaone":
        # ExaoneConfig.attribute_map: its own spellings of the layer count, epsilon, activation.
        return dict(cfg, num_hidden_layers=cfg["num_layers"], rms_norm_eps=cfg["layer_norm_epsilon"], hidden_act=cfg["activation_function"])
    if cfg["model_type"] not in ("gpt2", "gpt_bigcode"):
        return cfg
    cfg = dict(cfg)
    kv = 1 if cfg["model_type"] == "gpt_bigcode" and cfg.get("multi_query", True) else cfg["n_head"]
    cfg.update(hidden_size=cfg["n_embd"], num_attention_heads=cfg["n_head"], num_key_value_heads=kv, num_hidden_layers=cfg["n_layer"],
               max_position_embeddings=cfg["n_positions"], intermediate_size=cfg.get("n_inner") or 4 * cfg["n_embd"])
    return cfg


def permute(w, heads):
    """llama.cpp's q/k row order (LlamaModel.permute)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, heads):
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def rope_params(cfg):
    """TextModel's view of the rope settings: `rope_parameters` (or `rope_scaling`) with the
    top-level theta, type, partial factor and original length mirrored in."""
    p = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
    p = dict(p.get("full_attention", p))
    if "rope_theta" not in p and "rope_theta" in cfg:
        p["rope_theta"] = cfg["rope_theta"]
    if "rope_type" not in p and "type" in p:
        p["rope_type"] = p["type"]
    if "partial_rotary_factor" not in p and "partial_rotary_factor" in cfg:
        p["partial_rotary_factor"] = cfg["partial_rotary_factor"]
    if "original_max_position_embeddings" not in p and "original_max_position_embeddings" in cfg:
        p["original_max_position_embeddings"] = cfg["original_max_position_embeddings"]
    return p


def llama3_factors(cfg):
    """`rope_freqs.weight` as LlamaModel.generate_extra_tensors computes it (f32 base frequencies)."""
    p = rope_params(cfg)
    base = p.get("rope_theta", 10000.0)
    dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    freqs = (np.float32(1.0) / (np.float32(base) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))).astype(np.float32)
    factor, low, high = p.get("factor", 8.0), p.get("low_freq_factor", 1.0), p.get("high_freq_factor", 4.0)
    old = p.get("original_max_position_embeddings", 8192)
    low_wavelen, high_wavelen = old / low, old / high
    out = []
    for f in freqs:
        wavelen = np.float32(2 * math.pi) / f
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (np.float32(old) / wavelen - np.float32(low)) / np.float32(high - low)
            out.append(np.float32(1) / ((np.float32(1) - smooth) / np.float32(factor) + smooth))
    return np.array(out, dtype=np.float32)


def mapped_tensors(cfg, st, arch, fused):
    """(gguf name, float32 array) of the architectures in MAPPED: gguf-py's TensorNameMap names
    (what `TextModel.map_tensor_name` writes), q/k weights and biases permuted for the
    LlamaModel subclasses (granite, smollm3), the head only when the checkpoint has one (tied
    otherwise). `fused`: q, k and v concatenated into `attn_qkv`, as the converter wrote Phi-2
    from its original `mixer.Wqkv` checkpoints and as `--fuse-qkv` writes any architecture."""
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    names = gguf.get_tensor_name_map(MAPPED[arch], cfg["num_hidden_layers"])
    out = {}
    for hf, w in stacked_qk_norms(cfg, st, arch).items():
        if arch == "apertus" and ".act_fn." in hf:
            # ApertusModel.modify_tensors: the xIELU scalars become metadata (`xielu_scalars`).
            continue
        g = names.get_name(converter_name(hf, arch), try_suffixes=(".weight", ".bias"))
        if arch == "granite_swa" and hf.endswith(".self_attn.sinks"):
            # GraniteSWAModel.filter_tensors: `sinks` + `.weight`, LLM_TENSOR_ATTN_SINKS.
            g = f"blk.{hf.split('.')[2]}.attn_sinks.weight"
        assert g is not None, f"{arch}: no GGUF name for {hf}"
        if arch in PERMUTED and ".attn_q." in g:
            w = permute(w, heads)
        if arch in PERMUTED and ".attn_k." in g:
            w = permute(w, kv)
        if arch in PLUS_ONE_NORMS and g.endswith("norm.weight"):
            w = w + 1
        if arch == "gptneox" and ".attn_qkv." in g:
            # GPTNeoXModel.modify_tensors: the per-head [q | k | v] rows restacked as q, k, v.
            w = neox_restack(w, heads)
        if arch == "falcon" and ".attn_qkv." in g:
            # FalconModel.modify_tensors: per key/value group [queries | k | v] restacked.
            w = falcon_restack(w, heads, cfg["num_key_value_heads"])
        if arch == "bloom" and ".attn_qkv." in g:
            # BloomModel.modify_tensors: the per-head [q | k | v] rows restacked as GPT-NeoX's.
            w = neox_restack(w, heads)
        if arch == "gpt2" and hf.endswith(CONV1D):
            w = np.ascontiguousarray(w.T)
        if arch == "dbrx" and "_exps" in g:
            # DbrxModel.modify_tensors: `.weight` appended, each `[E * ffn, hidden]` viewed as
            # `[E, ffn, hidden]`, w2's experts transposed to `[hidden, ffn]`.
            f = cfg["ffn_config"]
            w = w.reshape(f["moe_num_experts"], f["ffn_hidden_size"], -1)
            if "ffn_down_exps" in g:
                w = np.ascontiguousarray(w.transpose(0, 2, 1))
            g += ".weight"
        out[g] = w
    assert ("output.weight" in out) != bool(cfg.get("tie_word_embeddings", arch in ("starcoder2", "smollm3", "ernie4_5", "gpt2", "starcoder", "falcon", "minicpm3", "bloom", "mpt")))
    if fused:
        # Also what `--fuse-qkv` writes for any architecture (`ModelBase.modify_tensors`): q, k
        # and v (after a LlamaModel's permutation) concatenated, their biases likewise.
        for i in range(cfg["num_hidden_layers"]):
            for suffix in ("weight", "bias"):
                if f"blk.{i}.attn_q.{suffix}" not in out:
                    continue
                parts = [out.pop(f"blk.{i}.attn_{x}.{suffix}") for x in "qkv"]
                out[f"blk.{i}.attn_qkv.{suffix}"] = np.concatenate(parts, axis=0)
            assert f"blk.{i}.attn_qkv.weight" in out, f"{arch}: layer {i} has no q/k/v to fuse"
    return list(out.items())


def converter_name(hf, arch):
    """The name the converter maps: BloomModel.modify_tensors strips `transformer.` first."""
    return hf.removeprefix("transformer.") if arch == "bloom" else hf


def stacked_qk_norms(cfg, st, arch):
    """StableLMModel._stack_qk_norm: StableLM 2 12B's per-head `q_layernorm.norms.{h}` (and
    k's) stacked into one `[heads, head_dim]` `q_layernorm.weight` per layer; other tensors as
    they are."""
    if arch != "stablelm":
        return st
    out = {hf: w for hf, w in st.items() if "_layernorm.norms." not in hf}
    for i in range(cfg["num_hidden_layers"]):
        for which, count in (("q", cfg["num_attention_heads"]), ("k", cfg["num_key_value_heads"])):
            prefix = f"model.layers.{i}.self_attn.{which}_layernorm"
            if f"{prefix}.norms.0.weight" in st:
                out[f"{prefix}.weight"] = np.stack([st[f"{prefix}.norms.{h}.weight"] for h in range(count)])
    assert sum(w.size for w in out.values()) == sum(w.size for w in st.values())
    return out


def neox_restack(w, heads):
    """`[heads, 3, head_dim, ...]` rows as `[3, heads, head_dim, ...]` (the converter's order)."""
    rest = w.shape[1:]
    return np.ascontiguousarray(w.reshape(heads, 3, -1, *rest).swapaxes(0, 1).reshape(w.shape))


def falcon_restack(w, heads, kv):
    """`[kv, heads/kv + 2, head_dim, ...]` rows as all query heads, then the key heads, then the
    value heads (FalconModel.modify_tensors, the `jploski` layout)."""
    rest = w.shape[1:]
    g = w.reshape(kv, heads // kv + 2, -1, *rest)
    return np.ascontiguousarray(np.concatenate([g[:, :-2].reshape(-1, *rest), g[:, -2].reshape(-1, *rest), g[:, -1].reshape(-1, *rest)]))


def falcon_unstack(w, heads, kv):
    """The inverse of `falcon_restack`: the checkpoint's per-group rows."""
    rest = w.shape[1:]
    d = w.shape[0] // (heads + 2 * kv)
    q = w[: heads * d].reshape(kv, heads // kv, d, *rest)
    k = w[heads * d: (heads + kv) * d].reshape(kv, 1, d, *rest)
    v = w[(heads + kv) * d:].reshape(kv, 1, d, *rest)
    return np.ascontiguousarray(np.concatenate([q, k, v], axis=1).reshape(w.shape))


def neox_unstack(w, heads):
    """The inverse of `neox_restack`: the checkpoint's per-head rows."""
    rest = w.shape[1:]
    return np.ascontiguousarray(w.reshape(3, heads, -1, *rest).swapaxes(0, 1).reshape(w.shape))


def xielu_scalars(cfg, st):
    """{alpha_n, alpha_p, beta, eps: [one float per layer]}: the raw parameters, as
    ApertusModel.modify_tensors collects them."""
    layers = range(cfg["num_hidden_layers"])
    return {n: [float(st[f"model.layers.{i}.mlp.act_fn.{n}"].reshape(-1)[0]) for i in layers] for n in ("alpha_n", "alpha_p", "beta", "eps")}


def tensors_of(cfg, st, arch, fused=False):
    """(gguf name, float32 array) as the converter names (and, for llama, permutes) them."""
    if arch in MAPPED:
        return mapped_tensors(cfg, st, arch, fused)
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    out = [("token_embd.weight", st["model.embed_tokens.weight"]), ("output_norm.weight", st["model.norm.weight"])]
    if arch == "phi3":
        names = {
            "input_layernorm.weight": "attn_norm.weight", "self_attn.qkv_proj.weight": "attn_qkv.weight",
            "self_attn.o_proj.weight": "attn_output.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
            "mlp.gate_up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
        }
    else:
        names = {
            "input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
            "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
            "self_attn.o_proj.weight": "attn_output.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
            "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
        }
        if arch in ("qwen3", "qwen3vl"):
            names["self_attn.q_norm.weight"] = "attn_q_norm.weight"
            names["self_attn.k_norm.weight"] = "attn_k_norm.weight"
    for i in range(cfg["num_hidden_layers"]):
        for hf, g in names.items():
            w = st[f"model.layers.{i}.{hf}"]
            if arch == "llama" and g == "attn_q.weight":
                w = permute(w, heads)
            if arch == "llama" and g == "attn_k.weight":
                w = permute(w, kv)
            out.append((f"blk.{i}.{g}", w))
    assert "lm_head.weight" in st and not cfg.get("tie_word_embeddings")
    out.append(("output.weight", st["lm_head.weight"]))
    return out


def qtype_of(name, data, quantized):
    # The converter keeps learned positions F32 (and llama.cpp's quantizer leaves them, and
    # routers: `ffn_gate_inp`); rows that are not whole 32-value blocks (tiny-minicpm3's
    # `attn_kv_b`, 24 long) stay F32 too.
    if not quantized or name.endswith("norm.weight") or name == "position_embd.weight" or "ffn_gate_inp" in name or data.shape[-1] % 32:
        return T.F32
    return T.Q4_0 if ".ffn_" in name else T.Q8_0


def write_vocab(w, fixture, cfg):
    tok = json.loads((FIX / fixture / "tokenizer.json").read_text())
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    assert [i for _, i in vocab] == list(range(len(vocab)))
    n = cfg["vocab_size"]
    tokens = [t for t, _ in vocab] + [f"[PAD{i}]" for i in range(len(vocab), n)]
    types = [int(gguf.TokenType.NORMAL)] * len(vocab) + [int(gguf.TokenType.UNUSED)] * (n - len(vocab))
    for a in tok["added_tokens"]:
        types[a["id"]] = int(gguf.TokenType.CONTROL)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]])
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    if cfg.get("pad_token_id") is not None:
        w.add_pad_token_id(cfg["pad_token_id"])


def add_text_model(w, cfg, quantized):
    """`TextModel.set_gguf_parameters` for the keys the fixtures have: sizes, rope base (a
    `default` rope writes no scaling key), the RMS epsilon (`rms_norm_eps`) and the LayerNorm
    one (`layer_norm_eps`, `layer_norm_epsilon` or `norm_epsilon`) when the config has them,
    key/value length when it has `head_dim`."""
    p = rope_params(cfg)
    assert p.get("rope_type", "default") in ("default", "yarn"), p
    add_text_sizes(w, cfg)
    if p.get("rope_type") == "yarn":
        # TextModel's YaRN keys (the config's `attention_factor` as `yarn_attn_factor`).
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(p["factor"])
        w.add_rope_scaling_orig_ctx_len(p["original_max_position_embeddings"])
        if (a := p.get("attention_factor", p.get("attn_factor"))) is not None:
            w.add_rope_scaling_yarn_attn_factor(a)
        if p.get("beta_fast") is not None:
            w.add_rope_scaling_yarn_beta_fast(p["beta_fast"])
        if p.get("beta_slow") is not None:
            w.add_rope_scaling_yarn_beta_slow(p["beta_slow"])
    if "rope_theta" in p:
        w.add_rope_freq_base(p["rope_theta"])
    if (eps := cfg.get("rms_norm_eps", cfg.get("norm_eps"))) is not None:
        w.add_layer_norm_rms_eps(eps)
    if (eps := next((cfg[k] for k in ("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon") if cfg.get(k) is not None), None)) is not None:
        w.add_layer_norm_eps(eps)
    if cfg.get("head_dim") is not None:
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)


def add_neox_style_keys(w, cfg, quantized, rotary_fraction, kv_heads):
    """The keys GPTNeoXModel and StableLMModel write themselves, in their order (no rope base):
    sizes, the rotated dimensions of a head, the head counts (StableLM's key/value heads too),
    `use_parallel_residual` (true when the config lacks it), the LayerNorm epsilon."""
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(hidden)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_rope_dimension_count(int(rotary_fraction * (hidden // heads)))
    w.add_head_count(heads)
    if kv_heads is not None:
        w.add_head_count_kv(kv_heads)
    w.add_parallel_residual(cfg.get("use_parallel_residual", True))
    w.add_layer_norm_eps(cfg["layer_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)


def write_mapped(w, cfg, arch, quantized):
    """The metadata of the MAPPED architectures, as their converter classes write it."""
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    if arch == "gpt2":
        # GPT2Model.set_gguf_parameters: its own keys; feed_forward_length 4 x hidden.
        w.add_block_count(cfg["n_layer"])
        w.add_context_length(cfg["n_positions"])
        w.add_embedding_length(cfg["n_embd"])
        w.add_feed_forward_length(4 * cfg["n_embd"])
        w.add_head_count(cfg["n_head"])
        w.add_layer_norm_eps(cfg["layer_norm_epsilon"])
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
        w.add_tokenizer_pre("gpt-2")
        return
    if arch == "starcoder":
        # StarCoderModel.set_gguf_parameters: GPT-2's keys with one key/value head (multi-query);
        # Linear weights, not transposed.
        w.add_context_length(cfg["n_positions"])
        w.add_embedding_length(cfg["n_embd"])
        w.add_feed_forward_length(4 * cfg["n_embd"])
        w.add_block_count(cfg["n_layer"])
        w.add_head_count(cfg["n_head"])
        w.add_head_count_kv(1)
        w.add_layer_norm_eps(cfg["layer_norm_epsilon"])
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
        w.add_tokenizer_pre("starcoder")
        return
    if arch == "falcon":
        # FalconModel.set_gguf_parameters (its own keys, in its order: a fixed context length,
        # the restacked q/k/v layout's name, 4 x hidden as the MLP width, no rope base).
        w.add_context_length(2048)
        w.add_tensor_data_layout("jploski")
        w.add_embedding_length(cfg["hidden_size"])
        unwritten = falcon_states_more(cfg)
        w.add_feed_forward_length(cfg["intermediate_size"] if unwritten else 4 * cfg["hidden_size"])
        w.add_block_count(cfg["num_hidden_layers"])
        w.add_head_count(cfg["num_attention_heads"])
        w.add_head_count_kv(cfg["num_key_value_heads"])
        w.add_layer_norm_eps(cfg["layer_norm_epsilon"])
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
        if unwritten:
            w.add_rope_freq_base(cfg["rope_theta"])
        w.add_tokenizer_pre("falcon")
    if arch == "bloom":
        # BloomModel.set_gguf_parameters (its own keys, in its order); `bloom` is the hash of
        # BLOOM's tokenizer in `get_vocab_base_pre`.
        w.add_context_length(cfg["max_position_embeddings"])
        w.add_embedding_length(hidden)
        w.add_feed_forward_length(4 * hidden)
        w.add_block_count(cfg["num_hidden_layers"])
        w.add_head_count(heads)
        w.add_head_count_kv(heads)
        w.add_layer_norm_eps(cfg["layer_norm_epsilon"])
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
        w.add_tokenizer_pre("bloom")
        return
    if arch == "dbrx":
        # DbrxModel.set_gguf_parameters (its own keys, in its order): the clamp written always,
        # the epsilon fixed at 1e-5; `dbrx` is the hash of DBRX's tokenizer.
        a, f = cfg["attn_config"], cfg["ffn_config"]
        w.add_block_count(cfg["num_hidden_layers"])
        w.add_context_length(cfg["max_seq_len"])
        w.add_embedding_length(hidden)
        w.add_feed_forward_length(f["ffn_hidden_size"])
        w.add_head_count(heads)
        w.add_head_count_kv(a["kv_n_heads"])
        w.add_rope_freq_base(a["rope_theta"])
        w.add_clamp_kqv(a["clip_qkv"])
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
        w.add_expert_count(f["moe_num_experts"])
        w.add_expert_used_count(f["moe_top_k"])
        w.add_layer_norm_eps(1e-5)
        w.add_tokenizer_pre("dbrx")
        return
    if arch == "mpt":
        # MPTModel.set_gguf_parameters: its own keys, the epsilon fixed at 1e-5, the clamp when
        # set, the ALiBi maximum (0 without ALiBi); no softmax scale.
        a = cfg["attn_config"]
        w.add_context_length(cfg["max_seq_len"])
        w.add_embedding_length(hidden)
        w.add_block_count(cfg["num_hidden_layers"])
        w.add_feed_forward_length(4 * hidden)
        w.add_head_count(heads)
        if a.get("kv_n_heads"):
            w.add_head_count_kv(a["kv_n_heads"])
        w.add_layer_norm_eps(1e-5)
        if a.get("clip_qkv") is not None:
            w.add_clamp_kqv(a["clip_qkv"])
        w.add_max_alibi_bias(a["alibi_bias_max"] if a.get("alibi") else 0.0)
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
        w.add_tokenizer_pre("mpt")
        return
    if arch == "minicpm3":
        # MiniCPM3Model.set_gguf_parameters (its own keys: no rope base, no value length, none of
        # the scalings, which llama.cpp's graph fixes at MiniCPM3-4B's values).
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
        add_own_sizes(w, cfg)
        w.add_vocab_size(cfg["vocab_size"])
        w.add_q_lora_rank(cfg["q_lora_rank"])
        w.add_kv_lora_rank(cfg["kv_lora_rank"])
        w.add_key_length(cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])
        w.add_rope_dimension_count(cfg["qk_rope_head_dim"])
        return
    if arch == "chatglm":
        # ChatGLMModel.set_gguf_parameters (its own keys, in its order) on a THUDM config: its
        # `seq_length`, `layernorm_epsilon` and `rope_ratio` (the base over 10000) are the
        # fixture's max_position_embeddings, rms_norm_eps and rope_theta / 10000.
        heads = cfg["num_attention_heads"]
        w.add_context_length(cfg["max_position_embeddings"])
        w.add_embedding_length(cfg["hidden_size"])
        w.add_feed_forward_length(cfg["intermediate_size"])
        w.add_block_count(cfg["num_hidden_layers"])
        w.add_head_count(heads)
        w.add_head_count_kv(cfg["num_key_value_heads"])
        w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
        w.add_rope_dimension_count(int(cfg["hidden_size"] // heads * cfg.get("partial_rotary_factor", 0.5)))
        w.add_add_bos_token(False)
        w.add_rope_freq_base(10000 * (rope_params(cfg)["rope_theta"] / 10000))
        w.add_tokenizer_pre("chatglm-bpe")
        return
    if arch == "phi2":
        # Phi2Model.set_gguf_parameters (its own keys; no rope base, no vocab size).
        # feed_forward_length: the converter writes 4 x hidden, which llama.cpp checks against
        # the tensors; the fixture's MLP is 2 x hidden (128), so the file states 128, the value
        # that loads (for Phi-1/1.5/2 themselves 4 x hidden is their intermediate size).
        rot = int(rope_params(cfg)["partial_rotary_factor"] * hidden) // heads
        w.add_context_length(cfg["max_position_embeddings"])
        w.add_embedding_length(hidden)
        w.add_feed_forward_length(cfg["intermediate_size"])
        w.add_block_count(cfg["num_hidden_layers"])
        w.add_head_count(heads)
        w.add_head_count_kv(heads)
        w.add_layer_norm_eps(cfg["layer_norm_eps"])
        w.add_rope_dimension_count(rot)
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
        w.add_add_bos_token(False)
        return
    if arch == "gptneox":
        # GPTNeoXModel.set_gguf_parameters: `rotary_pct`, no key/value head count.
        add_neox_style_keys(w, cfg, quantized, cfg["rotary_pct"], None)
        return
    if arch == "stablelm":
        # StableLMModel.set_gguf_parameters: `partial_rotary_factor`, the key/value heads.
        add_neox_style_keys(w, cfg, quantized, cfg.get("partial_rotary_factor", 0.25), cfg["num_key_value_heads"])
        return
    if arch == "apertus":
        # ApertusModel (a LlamaModel): TextModel's keys without the llama3 scaling (the factors
        # are the `rope_freqs.weight` tensor), LlamaModel's vocab size and rotary width.
        add_text_model(w, dict(cfg, rope_parameters={"rope_type": "default", "rope_theta": rope_params(cfg)["rope_theta"]}), quantized)
        w.add_vocab_size(cfg["vocab_size"])
        w.add_rope_dimension_count(cfg.get("head_dim") or hidden // heads)
        return
    if arch == "exaone":
        # ExaoneModel.set_gguf_parameters as the published EXAONE 3.5 files were written (its
        # own keys from ExaoneConfig's spellings: `num_layers`, `layer_norm_epsilon` as the RMS
        # epsilon), the rotated dimensions of `hidden / heads`, the base; its llama3 scaling is
        # the `rope_freqs.weight` tensor (generate_extra_tensors), its vocabulary's split.
        w.add_embedding_length(hidden)
        w.add_head_count(heads)
        w.add_head_count_kv(cfg["num_key_value_heads"])
        w.add_context_length(cfg["max_position_embeddings"])
        w.add_layer_norm_rms_eps(cfg["layer_norm_epsilon"])
        w.add_feed_forward_length(cfg["intermediate_size"])
        w.add_block_count(cfg["num_layers"])
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
        w.add_rope_freq_base(rope_params(cfg)["rope_theta"])
        w.add_rope_dimension_count(hidden // heads)
        w.add_tokenizer_pre("exaone")
        return
    if arch in ("granite", "granite_swa"):
        # GraniteModel: drops head_dim before TextModel's keys.
        cfg = {k: v for k, v in cfg.items() if k != "head_dim"}
    add_text_model(w, cfg, quantized)
    head_dim = cfg.get("head_dim") or hidden // heads
    if arch == "glm4":
        # Glm4Model: the rotated dimensions of a head.
        w.add_rope_dimension_count(int(head_dim * cfg.get("partial_rotary_factor", 0.5)))
    if arch == "olmo":
        # OlmoModel: LayerNorm epsilon fixed at 1e-5, the clamp when the config sets one.
        w.add_layer_norm_eps(1e-5)
        if cfg.get("clip_qkv") is not None:
            w.add_clamp_kqv(cfg["clip_qkv"])
    if arch == "jais2":
        # Jais2Model: the rotated dimensions (the head size); its vocabulary's split.
        w.add_rope_dimension_count(head_dim)
        w.add_tokenizer_pre("jais-2")
    if arch == "nemotron":
        # NemotronModel: vocab size, LayerNorm epsilon, rotated dimensions.
        w.add_vocab_size(cfg["vocab_size"])
        w.add_layer_norm_eps(next(cfg[k] for k in ("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", "norm_eps") if cfg.get(k) is not None))
        w.add_rope_dimension_count(int(cfg.get("partial_rotary_factor", 0.5) * hidden) // heads)
    if arch == "command-r":
        # CommandR2Model: logit scale, no rope scaling (TextModel writes no rotated dimensions).
        w.add_logit_scale(cfg["logit_scale"])
        w.add_rope_scaling_type(gguf.RopeScalingType.NONE)
    if arch == "cohere2":
        # Cohere2Model: logit scale, window (no pattern: the loader's period 4), vocab size, the
        # rotated dimensions `rotary_pct * head_dim` (rotary_pct 1 here), no rope scaling.
        w.add_logit_scale(cfg["logit_scale"])
        w.add_sliding_window(cfg["sliding_window"])
        w.add_vocab_size(cfg["vocab_size"])
        w.add_rope_dimension_count(hidden // heads)
        w.add_rope_scaling_type(gguf.RopeScalingType.NONE)
        assert cfg["layer_types"] == ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(cfg["num_hidden_layers"])]
    if arch == "exaone4":
        # Exaone4Model: vocab size; the window and one bool per layer when the config has one.
        w.add_vocab_size(cfg["vocab_size"])
        if cfg.get("sliding_window") is not None:
            w.add_sliding_window(cfg["sliding_window"])
            w.add_sliding_window_pattern([t == "sliding_attention" for t in cfg["layer_types"]])
    if cfg["model_type"] == "olmo3":
        # Olmo2Model: the window and one bool per layer (`layer_types`).
        w.add_sliding_window(cfg["sliding_window"])
        w.add_sliding_window_pattern([t == "sliding_attention" for t in cfg["layer_types"]])
    if arch == "mistral3":
        # Mistral3Model.Ministral3Model (a LlamaModel): `mscale_all_dim` as the YaRN log
        # multiplier, the query scale's beta as the attention temperature scale.
        p = rope_params(cfg)
        w.add_rope_scaling_yarn_log_mul(p["mscale_all_dim"])
        w.add_attn_temperature_scale(p["llama_4_scaling_beta"])
    if arch in ("granite", "smollm3", "arcee", "mistral3", "granite_swa"):
        # LlamaModel.set_gguf_parameters.
        w.add_vocab_size(cfg["vocab_size"])
        w.add_rope_dimension_count(cfg.get("head_dim") or hidden // heads)
    if arch in ("granite", "granite_swa"):
        # GraniteModel: each multiplier when the config sets it (truthy).
        if cfg.get("attention_multiplier"):
            w.add_attention_scale(cfg["attention_multiplier"])
        if cfg.get("embedding_multiplier"):
            w.add_embedding_scale(cfg["embedding_multiplier"])
        if cfg.get("residual_multiplier"):
            w.add_residual_scale(cfg["residual_multiplier"])
        if cfg.get("logits_scaling"):
            w.add_logit_scale(cfg["logits_scaling"])
    if arch == "granite_swa":
        add_granite_swa_keys(w, cfg)
    if arch == "minicpm":
        # MiniCPMModel.set_gguf_parameters: TextModel's keys, then `scale_emb`, `scale_depth /
        # sqrt(layers)` and `hidden / dim_model_base`: Granite's three multipliers here (its
        # attention multiplier has no MiniCPM key).
        w.add_embedding_scale(cfg["embedding_multiplier"])
        w.add_residual_scale(cfg["residual_multiplier"])
        w.add_logit_scale(cfg["logits_scaling"])
        if w.name_stem in MINICPM_LONGROPE:
            # TextModel writes the type alone for a longrope config.
            w.add_rope_scaling_type(gguf.RopeScalingType.LONGROPE)


def granite_swa_layers(cfg):
    """GraniteSWAConfig's `layer_types` (absent: full when `i % 4 == 0`) and `no_rope_layers`
    (1: the layer rotates), which the released configs carry beside `layer_rope_theta` and
    GraniteSWAModel reads; derived here from `layer_rope_theta` (0: no RoPE) when absent."""
    layers = cfg["num_hidden_layers"]
    types = cfg.get("layer_types") or ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(layers)]
    rotates = cfg.get("no_rope_layers") or [int(t != 0) for t in (cfg.get("layer_rope_theta") or [1] * layers)]
    return types, rotates


def add_granite_swa_keys(w, cfg):
    """GraniteSWAModel.set_gguf_parameters beyond Granite's: the window, one bool per layer
    (true: sliding), the rope pattern (true: the layer rotates). One `rope.freq_base` for every
    rotating layer: a config whose `layer_rope_theta` holds another base is not stated by it."""
    types, rotates = granite_swa_layers(cfg)
    w.add_sliding_window(cfg.get("sliding_window", 128))
    w.add_sliding_window_pattern([t == "sliding_attention" for t in types])
    w.add_array(f"{w.arch}.attention.rope_pattern", [bool(r) for r in rotates])


def write(path, fixture, cfg, st, quantized, fused=False, arch=None):
    arch = arch or ARCH[cfg["model_type"]]
    p = rope_params(cfg)
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(fixture)
    # The file's stem, for the variants written with more than their fixture states.
    w.name_stem = path.name.split(".")[0]
    extra = []
    if arch in MAPPED:
        write_mapped(w, cfg, arch, quantized)
        if arch == "minicpm3" and p.get("long_factor"):
            # MiniCPM3Model.generate_extra_tensors: LongRoPE's two factor sets, F32.
            extra += [("rope_factors_long.weight", np.array(p["long_factor"], np.float32)), ("rope_factors_short.weight", np.array(p["short_factor"], np.float32))]
        if arch == "exaone":
            # ExaoneModel.generate_extra_tensors: the llama3 factors, as LlamaModel's.
            extra.append(("rope_freqs.weight", llama3_factors(cfg)))
        if arch == "minicpm" and w.name_stem in MINICPM_LONGROPE:
            # MiniCPMModel.generate_extra_tensors: the long and short factor sets, F32.
            long, short = MINICPM_LONGROPE[w.name_stem]
            extra += [("rope_factors_long.weight", np.array(long, np.float32)), ("rope_factors_short.weight", np.array(short, np.float32))]
        if arch == "apertus":
            # LlamaModel.generate_extra_tensors; ApertusModel's xIELU scalars, one per layer.
            extra.append(("rope_freqs.weight", llama3_factors(cfg)))
            for name, values in xielu_scalars(cfg, st).items():
                getattr(w, f"add_xielu_{name}")(values)
    elif arch == "phi3":
        # Phi3MiniModel.set_gguf_parameters (its own keys, in its order).
        rot = int(p.get("partial_rotary_factor", 1.0) * hidden) // heads
        original = p["original_max_position_embeddings"]
        w.add_context_length(cfg["max_position_embeddings"])
        w.add_rope_scaling_orig_ctx_len(original)
        w.add_embedding_length(hidden)
        w.add_feed_forward_length(cfg["intermediate_size"])
        w.add_block_count(cfg["num_hidden_layers"])
        w.add_head_count(heads)
        w.add_head_count_kv(cfg["num_key_value_heads"])
        w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
        w.add_rope_dimension_count(rot)
        w.add_rope_freq_base(p["rope_theta"])
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
        w.add_sliding_window(cfg.get("sliding_window") or 0)
        # generate_extra_tensors: LongRoPE factors and their attention factor.
        if p.get("long_factor"):
            scale = cfg["max_position_embeddings"] / original
            assert p["rope_type"] in ("longrope", "su")
            w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1.0 else 1.0)
            assert len(p["long_factor"]) == len(p["short_factor"]) == rot // 2
            extra += [("rope_factors_long.weight", np.array(p["long_factor"], np.float32)), ("rope_factors_short.weight", np.array(p["short_factor"], np.float32))]
    else:
        # TextModel.set_gguf_parameters, then LlamaModel's additions for llama.
        w.add_block_count(cfg["num_hidden_layers"])
        w.add_context_length(cfg["max_position_embeddings"])
        w.add_embedding_length(hidden)
        w.add_feed_forward_length(cfg["intermediate_size"])
        w.add_head_count(heads)
        w.add_head_count_kv(cfg["num_key_value_heads"])
        assert p.get("rope_type", "default") in ("default", "llama3")
        w.add_rope_freq_base(p["rope_theta"])
        w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
        w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
        if arch == "llama":
            w.add_vocab_size(cfg["vocab_size"])
            w.add_rope_dimension_count(cfg["head_dim"])
            if p.get("rope_type") == "llama3":
                extra.append(("rope_freqs.weight", llama3_factors(cfg)))
        if arch == "qwen3vl":
            # Qwen3VLTextModel (a Qwen3Model): TextModel writes the config's `mrope_section` padded
            # to four (here a head of 16: 8 rotary pairs as 2 + 3 + 3), and the deepstack count
            # from the vision config (Qwen3-VL's 3); the vision tower goes to a separate mmproj file.
            w.add_rope_dimension_sections([2, 3, 3, 0])
            w.add_num_deepstack_layers(3)
    write_vocab(w, fixture, cfg)
    add_tensors_and_close(w, extra + tensors_of(cfg, st, arch, fused), lambda name, data: qtype_of(name, data, quantized) if data.ndim >= 2 else T.F32)
    return arch


def dequantized(path, cfg, arch, st):
    """gguf-py's dequantization of every weight of the file, in Hugging Face names and order."""
    r = gguf.GGUFReader(str(path))
    if arch in MAPPED:
        return dequantized_mapped(r, cfg, arch, st)
    inverse = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
    layer = {
        "attn_norm.weight": "input_layernorm.weight", "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
        "attn_v.weight": "self_attn.v_proj.weight", "attn_qkv.weight": "self_attn.qkv_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
        "ffn_norm.weight": "post_attention_layernorm.weight", "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_down.weight": "mlp.down_proj.weight",
        "ffn_up.weight": "mlp.gate_up_proj.weight" if arch == "phi3" else "mlp.up_proj.weight",
        "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
    }
    out = {}
    for t in r.tensors:
        if t.name.startswith("rope_"):
            continue
        v = gguf.dequantize(t.data, t.tensor_type).astype(np.float32).reshape([int(d) for d in reversed(t.shape)])
        if t.name in inverse:
            out[inverse[t.name]] = v
            continue
        _, i, rest = t.name.split(".", 2)
        if arch == "llama" and rest == "attn_q.weight":
            v = unpermute(v, cfg["num_attention_heads"])
        if arch == "llama" and rest == "attn_k.weight":
            v = unpermute(v, cfg["num_key_value_heads"])
        out[f"model.layers.{i}.{layer[rest]}"] = np.ascontiguousarray(v)
    return out


def dequantized_mapped(r, cfg, arch, st):
    """`dequantized` for the MAPPED architectures: names inverted through the same TensorNameMap
    over the fixture's own names, a fused `attn_qkv` split back into q, k and v rows."""
    names = gguf.get_tensor_name_map(MAPPED[arch], cfg["num_hidden_layers"])
    inverse = {names.get_name(converter_name(hf, arch), try_suffixes=(".weight", ".bias")) + (".weight" if arch == "dbrx" and ".experts." in hf else ""): hf for hf in stacked_qk_norms(cfg, st, arch) if ".act_fn." not in hf}
    if arch == "granite_swa":
        inverse.update({f"blk.{hf.split('.')[2]}.attn_sinks.weight": hf for hf in st if hf.endswith(".self_attn.sinks")})
    heads, kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    out = {}
    if arch == "apertus":
        # The xIELU scalars from the metadata, in the fixture's shapes ([1] parameters, [] buffers).
        for n in ("alpha_n", "alpha_p", "beta", "eps"):
            f = r.fields[f"xielu.{n}"]
            for i, d in enumerate(f.data):
                hf = f"model.layers.{i}.mlp.act_fn.{n}"
                out[hf] = np.array(f.parts[d], np.float32).reshape(st[hf].shape)
    for t in r.tensors:
        if t.name == "rope_freqs.weight" or t.name.startswith("rope_factors_"):
            continue
        v = gguf.dequantize(t.data, t.tensor_type).astype(np.float32).reshape([int(d) for d in reversed(t.shape)])
        parts = [(t.name, v)]
        if ".attn_qkv." in t.name and arch not in ("gpt2", "gptneox", "starcoder", "falcon", "bloom", "mpt", "dbrx"):
            q, k = heads * hd, kv * hd
            parts = [(t.name.replace("attn_qkv", "attn_q"), v[:q]), (t.name.replace("attn_qkv", "attn_k"), v[q:q + k]), (t.name.replace("attn_qkv", "attn_v"), v[q + k:])]
        for name, x in parts:
            if arch in PLUS_ONE_NORMS and name.endswith("norm.weight"):
                x = x - 1
            if arch == "gpt2" and inverse[name].endswith(CONV1D):
                x = x.T
            if arch == "dbrx" and "_exps" in name:
                x = x.transpose(0, 2, 1) if "ffn_down_exps" in name else x
                x = x.reshape(-1, x.shape[-1])
            if arch in ("gptneox", "bloom") and ".attn_qkv." in name:
                x = neox_unstack(x, heads)
            if arch == "falcon" and ".attn_qkv." in name:
                x = falcon_unstack(x, heads, kv)
            if arch in PERMUTED and ".attn_q." in name:
                x = unpermute(x, heads)
            if arch in PERMUTED and ".attn_k." in name:
                x = unpermute(x, kv)
            if arch == "stablelm" and inverse[name].endswith(("q_layernorm.weight", "k_layernorm.weight")):
                # One tensor per head again, as the fixture names them.
                for h, row in enumerate(x):
                    out[inverse[name].replace(".weight", f".norms.{h}.weight")] = np.ascontiguousarray(row)
                continue
            out[inverse[name]] = np.ascontiguousarray(x)
    return out


def main(only=()):
    """Writes every file, or those of the stems named on the command line."""
    OUT.mkdir(parents=True, exist_ok=True)
    for stem in [s for s in FIXTURES + list(VARIANTS) if not only or s in only]:
        fixture = VARIANTS.get(stem, stem)
        cfg = hf_spellings(json.loads((FIX / fixture / "config.json").read_text()))
        if stem == "tiny-stablelm-key-default":
            # A config without `use_parallel_residual` (StableLM 2 1.6B's): the converter writes
            # true, the model is sequential (transformers' default), and so are the tensors.
            cfg.pop("use_parallel_residual")
        st = load_file(str(FIX / fixture / "model.safetensors"))
        for quantized in ([False, True] if stem in QUANTIZED else [False]):
            path = OUT / f"{stem}.{'Q' if quantized else 'F32'}.gguf"
            arch = write(path, fixture, cfg, st, quantized, fused=stem.endswith("-fused") or stem in FUSED_AS_STORED, arch=STEM_ARCH.get(stem))
            # Norms stored + 1 come back to one f32 rounding of the fixture's.
            exact = lambda err, arch=arch: err == 0.0 or (arch in PLUS_ONE_NORMS and err < 1e-6)  # noqa: E731
            check_round_trip(path, dequantized(path, cfg, arch, st), st, quantized, exact)


if __name__ == "__main__":
    main(sys.argv[1:])
