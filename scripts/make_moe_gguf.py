"""Writes tests/python/data/gguf-moe/: the tiny mixture-of-experts fixtures as llama.cpp's
converter writes them (issue #29), for tests/python/test_gguf_moe.py. No torch: gguf-py (its
writer, `quantize` and `dequantize`), numpy and safetensors only.

Run once, not in CI:
    .venv/bin/python scripts/make_moe_gguf.py     # from the repository root

What llama.cpp's converter writes (read for facts: `conversion/qwen.py` `Qwen2MoeModel`,
`Qwen3MoeModel`; `conversion/llama.py` for Mixtral, which is `llama` with experts;
`TextModel.set_gguf_parameters` for the common keys and `expert_count` / `expert_used_count`):

- the experts of a layer merged into 3-D tensors `ffn_gate_exps`, `ffn_up_exps` (ggml ne
  `[hidden, expert_ff, experts]`) and `ffn_down_exps` (`[expert_ff, hidden, experts]`): numpy
  `[experts, rows, K]`, each expert's `[out, in]` weight stacked on axis 0; the router
  `ffn_gate_inp` (`[experts, hidden]`), F32 (llama.cpp's quantize keeps it float);
- `llama` (tests/fixtures/tiny-mixtral): q/k rows permuted as for every llama file; the expert
  size is `feed_forward_length`; Mixtral's `w1`/`w3`/`w2` are gate/up/down;
- `qwen3moe` (tiny-qwen3-moe): `expert_feed_forward_length` (moe_intermediate_size), q/k norms,
  key/value length (head_dim);
- `olmoe` (tiny-olmoe, `conversion/olmo.py` `OlmoeModel`): nothing permuted, q/k norms over the
  whole projection (`attn_q_norm` `[hidden]`), the expert width `feed_forward_length`, no
  `clip_qkv` (llama.cpp's olmoe graph does not clamp);
- `ernie4_5-moe` (tiny-ernie4_5_moe, `conversion/ernie.py` `Ernie4_5MoeModel`): nothing permuted,
  no biases (tiny-ernie4_5_moe's `use_bias` dropped with its bias tensors: `as_files_state`),
  `interleave_moe_layer_step` and `leading_dense_block_count` for the sparse layers, the shared
  experts `ffn_*_shexp` and the correction bias `exp_probs_b.bias` (`[1, E]`);
- `hunyuan-moe` (tiny-hunyuan_v1_moe, `conversion/hunyuan.py` `HunYuanMoEModel`): nothing
  permuted, per-head q/k norms (`query_layernorm` / `key_layernorm`), the router `mlp.gate.wg`,
  the shared MLP as `ffn_*_shexp`, the widths from the first layer's lists, the NTK-alpha RoPE
  written as the stretched base with scaling `none`, factor 1 and a 256k context (written
  without the fixture's biases, which the released model does not have);
- `hunyuan-dense` (tiny-hunyuan_v1_dense, `HunYuanModel`): the same attention and RoPE (its
  alpha stretch over `head_dim`) with a plain MLP, no expert keys (written without biases);
- `granitemoe` (tiny-granitemoe, `conversion/granite.py` `GraniteMoeModel`, a LlamaModel): q/k
  permuted, Granite's four scales, the router `block_sparse_moe.router.layer`, `input_linear`
  split into `ffn_gate_exps` / `ffn_up_exps`, `output_linear` as `ffn_down_exps` (Q8_0 experts
  in the Q file); GraniteMoeShared (tiny-granitemoeshared) through the same converter, with
  `expert_shared_feed_forward_length` and `shared_mlp.input_linear` split into
  `ffn_gate_shexp` / `ffn_up_shexp`, `output_linear` as `ffn_down_shexp` (its rows of 48 are not
  whole blocks: F32 in the Q file, the gate and up Q8_0);
- `minimax-m2` (tiny-minimax_m2, `conversion/minimax.py` `MiniMaxM2Model`, a TextModel): nothing
  permuted, q/k norms over the whole projections (`attn_q_norm` `[heads x head_dim]`), the
  experts' width `expert_feed_forward_length`, `rope.dimension_count` the config's `rotary_dim`,
  sigmoid gating, the correction bias `exp_probs_b.bias`, Mixtral's expert names;
- `phimoe` (tiny-phimoe, `conversion/phi.py` `PhiMoeModel`, a Phi3MiniModel): nothing
  permuted, LayerNorm and projection biases, the head's bias, Mixtral's expert names, Phi-3's
  keys (original context, rotary width, window 0) and LongRoPE's factor tensors with one
  `attn_factor` computed from the lengths (not the fixture's `short_mscale` / `long_mscale`);
- `qwen2moe` (tiny-qwen2-moe): q/k/v bias, `expert_shared_feed_forward_length` and the shared
  expert `ffn_{gate,up,down}_shexp` with its gate `ffn_gate_inp_shexp` as a `[hidden]` vector
  (llama.cpp's loader shape). tiny-qwen2-moe's layer 1 is dense (`mlp_only_layers`): it is
  written with the dense `ffn_gate/up/down` (llama.cpp's qwen2moe loader would not load such a
  file; transformers' model has that layer, and the import reads it as `mlp_only_layers`).
- `hy_v3` (tiny-hy_v3, `conversion/hunyuan.py` `HYV3Model`, a TextModel): nothing permuted,
  per-head q/k norms, the router `mlp.router.gate`, its correction bias `mlp.expert_bias` as
  `exp_probs_b.bias`, the shared MLP as `ffn_*_shexp` with `expert_shared_feed_forward_length`
  the experts' width x `num_shared_experts`, `expert_weights_norm`, `expert_weights_scale`
  (`router_scaling_factor`), sigmoid gating; tiny-hy_v3's first layer is dense (`mlp_layer_types`:
  the dense `ffn_gate/up/down`, which llama.cpp's loader takes too);
- `granite_swa` with experts (tiny-granitemoe_swa, `conversion/granite.py` `GraniteMoeSWAModel`,
  a GraniteSWAModel: q/k permuted, Granite's scales, the sinks `attn_sinks.weight`, the window,
  its pattern and `attention.rope_pattern`): the experts' fused gate/up stack kept as
  `ffn_gate_up_exps`, `ffn_down_exps`, the router `block_sparse_moe.router`, the shared MLP's
  fused gate/up kept as `ffn_up_shexp` with `expert_shared_feed_forward_length`;
- `mellum` (tiny-mellum, `conversion/mellum.py` `MellumModel`, a TextModel): Qwen3-MoE's names
  and keys, `rope.freq_base` the full layers' base and `rope.freq_base_swa` the sliding ones',
  the window with one bool per layer (`layer_types`), `tokenizer.ggml.pre` `mellum`.
  tiny-mellum's layer 0 is dense (`mlp_layer_types`): written with the dense `ffn_gate/up/down`
  (llama.cpp's mellum loader wants a router in every layer; MellumConfig allows dense layers and
  the import reads them from the tensors).

Files (`<fixture>` each fixture above):
- `<fixture>.F32.gguf`: every tensor F32: the fixture's own model, compared with its reference.
- `<fixture>.Q.gguf`: attention, embedding and head Q8_0; experts `EXPERT_TYPE`'s: Q4_0, Q8_0
  (mixtral, granitemoe) or Q4_1 (qwen2-moe: a type with a min, which QMoE cannot hold); norms, router and
  biases F32 (and rows that are not whole 32-value blocks); beside it `<fixture>.Q.dequantized.safetensors`, gguf-py's `dequantize` of every
  tensor in Hugging Face names and order (q/k un-permuted, experts split), a float checkpoint
  (with the fixture's config.json and tokenizer) the test builds beside the quantized file.
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
from gguf_writing import add_tensors_and_close, add_text_sizes, check_round_trip  # noqa: E402
from make_arch_gguf import add_granite_swa_keys, permute, rope_params, unpermute, write_vocab  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
OUT = ROOT / "tests" / "python" / "data" / "gguf-moe"
FIXTURES = {"tiny-mixtral": "llama", "tiny-qwen3-moe": "qwen3moe", "tiny-qwen2-moe": "qwen2moe", "tiny-olmoe": "olmoe", "tiny-ernie4_5_moe": "ernie4_5-moe", "tiny-hunyuan_v1_moe": "hunyuan-moe", "tiny-hunyuan_v1_dense": "hunyuan-dense", "tiny-granitemoe": "granitemoe", "tiny-phimoe": "phimoe", "tiny-minimax_m2": "minimax-m2", "tiny-mellum": "mellum", "tiny-granitemoeshared": "granitemoe", "tiny-hy_v3": "hy_v3", "tiny-granitemoe_swa": "granite_swa"}
EXPERT_TYPE = {"tiny-mixtral": T.Q8_0, "tiny-qwen3-moe": T.Q4_0, "tiny-qwen2-moe": T.Q4_1, "tiny-olmoe": T.Q4_0, "tiny-ernie4_5_moe": T.Q4_0, "tiny-hunyuan_v1_moe": T.Q4_0, "tiny-hunyuan_v1_dense": T.Q4_0, "tiny-granitemoe": T.Q8_0, "tiny-phimoe": T.Q4_0, "tiny-minimax_m2": T.Q4_0, "tiny-mellum": T.Q4_0, "tiny-granitemoeshared": T.Q8_0, "tiny-hy_v3": T.Q4_0, "tiny-granitemoe_swa": T.Q8_0}

ATTN = {
    "input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.v_proj.bias": "attn_v.bias", "self_attn.o_proj.weight": "attn_output.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
    "self_attn.o_proj.bias": "attn_output.bias",
    # MiniMax-M2's correction bias sits beside its router.
    "block_sparse_moe.e_score_correction_bias": "exp_probs_b.bias",
    # PhiMoE's LayerNorms have biases.
    "input_layernorm.bias": "attn_norm.bias", "post_attention_layernorm.bias": "ffn_norm.bias",
    # GraniteMoeSWA's sinks (GraniteSWAModel.filter_tensors appends `.weight`).
    "self_attn.sinks": "attn_sinks.weight",
}
# Outside the layers, with PhiMoE's final LayerNorm bias and head bias where the fixture has them.
TOP = {
    "model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight", "model.norm.bias": "output_norm.bias",
    "lm_head.weight": "output.weight", "lm_head.bias": "output.bias",
}
DENSE = {"mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
SHARED = {
    "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight", "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
}
# ERNIE 4.5 MoE's shared experts and its correction bias (`[1, experts]`, kept 2-D).
ERNIE = {
    "mlp.shared_experts.gate_proj.weight": "ffn_gate_shexp.weight", "mlp.shared_experts.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_experts.down_proj.weight": "ffn_down_shexp.weight", "mlp.moe_statics.e_score_correction_bias": "exp_probs_b.bias",
}


# HunYuan-A13B's q/k norms and shared MLP.
HUNYUAN = {
    "self_attn.query_layernorm.weight": "attn_q_norm.weight", "self_attn.key_layernorm.weight": "attn_k_norm.weight",
    "mlp.shared_mlp.gate_proj.weight": "ffn_gate_shexp.weight", "mlp.shared_mlp.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_mlp.down_proj.weight": "ffn_down_shexp.weight",
}


# Hy3's shared MLP and its router's correction bias.
HY_V3 = {
    "mlp.shared_mlp.gate_proj.weight": "ffn_gate_shexp.weight", "mlp.shared_mlp.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_mlp.down_proj.weight": "ffn_down_shexp.weight", "mlp.expert_bias": "exp_probs_b.bias",
}


# GraniteMoeSWA's fused stacks and shared MLP (kept as transformers 5 names them).
GRANITE_SWA_FUSED = {
    "ffn_gate_up_exps.weight": "block_sparse_moe.experts.gate_up_proj", "ffn_down_exps.weight": "block_sparse_moe.experts.down_proj",
    "ffn_up_shexp.weight": "shared_mlp.input_linear.weight", "ffn_down_shexp.weight": "shared_mlp.output_linear.weight",
}


def n_experts(cfg):
    return cfg.get("num_local_experts") or cfg.get("num_experts") or cfg["moe_num_experts"]


def experts_of(arch):
    """(router, expert scope, {gguf stack: per-expert part}) in the family's names."""
    if arch in ("llama", "phimoe", "minimax-m2"):
        return "block_sparse_moe.gate.weight", "block_sparse_moe.experts", {"ffn_gate_exps.weight": "w1", "ffn_up_exps.weight": "w3", "ffn_down_exps.weight": "w2"}
    if arch == "granitemoe":
        return "block_sparse_moe.router.layer.weight", "block_sparse_moe", {}
    if arch == "granite_swa":
        return "block_sparse_moe.router.weight", "block_sparse_moe.experts", {}
    if arch == "hy_v3":
        return "mlp.router.gate.weight", "mlp.experts", {"ffn_gate_exps.weight": "gate_proj", "ffn_up_exps.weight": "up_proj", "ffn_down_exps.weight": "down_proj"}
    if arch.startswith("hunyuan"):
        return "mlp.gate.wg.weight", "mlp.experts", {"ffn_gate_exps.weight": "gate_proj", "ffn_up_exps.weight": "up_proj", "ffn_down_exps.weight": "down_proj"}
    return "mlp.gate.weight", "mlp.experts", {"ffn_gate_exps.weight": "gate_proj", "ffn_up_exps.weight": "up_proj", "ffn_down_exps.weight": "down_proj"}


def tensors_of(cfg, st, arch):
    """(gguf name, float32 array) as the converter names, permutes and merges them."""
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    n_exp = n_experts(cfg) if arch != "hunyuan-dense" else 0
    router, scope, stacks = experts_of(arch)
    out = [(g, st[hf]) for hf, g in TOP.items() if hf in st]
    if arch == "phimoe":
        # Phi3MiniModel.generate_extra_tensors: LongRoPE's two factor sets, F32.
        p = rope_params(cfg)
        out += [("rope_factors_long.weight", np.array(p["long_factor"], np.float32)), ("rope_factors_short.weight", np.array(p["short_factor"], np.float32))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for hf, g in ATTN.items():
            if p + hf not in st:
                continue
            w = st[p + hf]
            if arch in ("llama", "granitemoe", "granite_swa") and g == "attn_q.weight":
                w = permute(w, heads)
            if arch in ("llama", "granitemoe", "granite_swa") and g == "attn_k.weight":
                w = permute(w, kv)
            out.append((f"blk.{i}.{g}", w))
        if arch == "hunyuan-dense":
            out += [(f"blk.{i}.{g}", st[p + hf]) for hf, g in HUNYUAN.items() if p + hf in st]
        if p + router not in st:
            out += [(f"blk.{i}.{g}", st[p + hf]) for hf, g in DENSE.items()]
            continue
        out.append((f"blk.{i}.ffn_gate_inp.weight", st[p + router]))
        if arch == "granitemoe":
            # GraniteMoeModel: `input_linear` [E, 2 x inter, hidden] split into gate and up.
            gate, up = np.split(st[p + "block_sparse_moe.input_linear.weight"], 2, axis=1)
            out += [(f"blk.{i}.ffn_gate_exps.weight", gate), (f"blk.{i}.ffn_up_exps.weight", up), (f"blk.{i}.ffn_down_exps.weight", st[p + "block_sparse_moe.output_linear.weight"])]
            if p + "shared_mlp.input_linear.weight" in st:
                # GraniteMoeModel (GraniteMoeShared): `shared_mlp.input_linear` split into the
                # shared gate and up, `output_linear` the shared down.
                gate, up = np.split(st[p + "shared_mlp.input_linear.weight"], 2, axis=0)
                out += [(f"blk.{i}.ffn_gate_shexp.weight", gate), (f"blk.{i}.ffn_up_shexp.weight", up), (f"blk.{i}.ffn_down_shexp.weight", st[p + "shared_mlp.output_linear.weight"])]
        if arch == "granite_swa":
            # GraniteMoeSWAModel.modify_tensors: the fused gate/up stack and the shared MLP's
            # fused gate/up kept as they are (`ffn_gate_up_exps`, `ffn_up_shexp`).
            out += [(f"blk.{i}.ffn_gate_up_exps.weight", st[p + "block_sparse_moe.experts.gate_up_proj"]), (f"blk.{i}.ffn_down_exps.weight", st[p + "block_sparse_moe.experts.down_proj"])]
            out += [(f"blk.{i}.ffn_up_shexp.weight", st[p + "shared_mlp.input_linear.weight"]), (f"blk.{i}.ffn_down_shexp.weight", st[p + "shared_mlp.output_linear.weight"])]
        for g, part in stacks.items():
            out.append((f"blk.{i}.{g}", np.stack([st[f"{p}{scope}.{e}.{part}.weight"] for e in range(n_exp)])))
        if arch == "qwen2moe":
            out += [(f"blk.{i}.{g}", st[p + hf]) for hf, g in SHARED.items()]
            out.append((f"blk.{i}.ffn_gate_inp_shexp.weight", st[p + "mlp.shared_expert_gate.weight"].reshape(-1)))
        if arch == "ernie4_5-moe":
            out += [(f"blk.{i}.{g}", st[p + hf]) for hf, g in ERNIE.items()]
        if arch == "hunyuan-moe":
            out += [(f"blk.{i}.{g}", st[p + hf]) for hf, g in HUNYUAN.items()]
        if arch == "hy_v3":
            out += [(f"blk.{i}.{g}", st[p + hf]) for hf, g in HY_V3.items()]
    return out


def qtype_of(fixture, quantized):
    def pick(name, data):
        # Rows of a length that is not whole 32-value blocks (qwen2-moe's shared down, 48) stay F32.
        if not quantized or data.ndim == 1 or name.endswith("norm.weight") or name.startswith("rope_factors") or "gate_inp" in name or data.shape[-1] % 32:
            return T.F32
        return EXPERT_TYPE[fixture] if "_exps" in name else T.Q8_0
    return pick


def add_ntk_alpha_rope(w, p, dim):
    """Hunyuan's converters: the NTK-alpha RoPE as the stretched base `theta * alpha^(dim /
    (dim - 2))`, scaling `none` with factor 1, and a 256k original and model context."""
    w.add_rope_freq_base(p["rope_theta"] * p["alpha"] ** (dim / (dim - 2)))
    w.add_rope_scaling_type(gguf.RopeScalingType.NONE)
    w.add_rope_scaling_factor(1)
    w.add_rope_scaling_orig_ctx_len(256 * 1024)
    w.add_context_length(256 * 1024)


# Files of a fixture written as another architecture: tiny-qwen3-moe as Qwen3-VL-MoE's text file
# (Qwen3VLMoeTextModel, a Qwen3MoeModel: `qwen3vlmoe` with the multimodal RoPE sections, here 2 +
# 3 + 3 of its 8 rotary pairs, and the deepstack count), F32 only.
VL_VARIANTS = {"tiny-qwen3-moe-vl": ("tiny-qwen3-moe", "qwen3vlmoe")}


def write(path, fixture, cfg, st, quantized, arch=None):
    arch = arch or FIXTURES[fixture]
    p = rope_params(cfg)
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(fixture)
    # TextModel.set_gguf_parameters, then the architecture's additions.
    add_text_sizes(w, cfg)
    w.add_rope_freq_base(p["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if cfg.get("head_dim"):
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    if arch != "hunyuan-dense":
        w.add_expert_count(n_experts(cfg))
        w.add_expert_used_count(cfg.get("num_experts_per_tok") or cfg.get("moe_k") or cfg["moe_topk"][0])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
    if arch in ("llama", "granitemoe", "granite_swa"):
        w.add_vocab_size(cfg["vocab_size"])
        w.add_rope_dimension_count(cfg.get("head_dim") or hidden // heads)
        if arch in ("granitemoe", "granite_swa"):
            # GraniteModel's four scales.
            w.add_attention_scale(cfg["attention_multiplier"])
            w.add_embedding_scale(cfg["embedding_multiplier"])
            w.add_residual_scale(cfg["residual_multiplier"])
            w.add_logit_scale(cfg["logits_scaling"])
            if cfg.get("shared_intermediate_size"):
                w.add_expert_shared_feed_forward_length(cfg["shared_intermediate_size"])
        if arch == "granite_swa":
            add_granite_swa_keys(w, cfg)
    elif arch == "ernie4_5-moe":
        # Ernie4_5MoeModel: the sparse layers' pattern, the expert widths (the shared one as
        # the converter computes it, intermediate_size / num_key_value_heads, not read back).
        w.add_interleave_moe_layer_step(cfg["moe_layer_interval"])
        w.add_leading_dense_block_count(cfg["moe_layer_start_index"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_shared_count(cfg["moe_num_shared_experts"])
        w.add_expert_shared_feed_forward_length(cfg["intermediate_size"] // cfg["num_key_value_heads"])
    elif arch == "hunyuan-moe":
        # HunYuanMoEModel: the widths (all layers alike), and its NTK-alpha RoPE as a stretched
        # base with no scaling (dim = hidden / heads, as the converter takes it), 256k context.
        w.add_expert_shared_feed_forward_length(cfg["intermediate_size"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"][0])
        w.add_expert_shared_count(cfg["num_shared_expert"][0])
        add_ntk_alpha_rope(w, p, hidden // heads)
    elif arch == "hunyuan-dense":
        # HunYuanModel: the same RoPE keys, the stretch over `head_dim`.
        add_ntk_alpha_rope(w, p, cfg["head_dim"])
    elif arch == "phimoe":
        # Phi3MiniModel.set_gguf_parameters: the original context, the rotary width, no window
        # (0); generate_extra_tensors: LongRoPE's cos/sin factor from the lengths (its `su` /
        # `longrope` formula), not PhiMoE's `short_mscale` / `long_mscale`.
        scale = cfg["max_position_embeddings"] / p["original_max_position_embeddings"]
        w.add_rope_scaling_orig_ctx_len(p["original_max_position_embeddings"])
        w.add_rope_dimension_count(hidden // heads)
        w.add_sliding_window(cfg.get("sliding_window") or 0)
        w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(p["original_max_position_embeddings"])) if scale > 1 else 1.0)
    elif arch == "minimax-m2":
        # MiniMaxM2Model: the experts' width and the rotated dimensions; TextModel's sigmoid
        # gating (the published config's `scoring_func`).
        w.add_expert_feed_forward_length(cfg["intermediate_size"])
        w.add_rope_dimension_count(cfg["rotary_dim"])
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    elif arch == "hy_v3":
        # HYV3Model: the experts' width, the shared MLP's (width x shared count), renormalized,
        # the router's scale, sigmoid scores.
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_shared_feed_forward_length(cfg["moe_intermediate_size"] * cfg.get("num_shared_experts", 1))
        w.add_expert_weights_norm(cfg.get("route_norm", True))
        w.add_expert_weights_scale(float(cfg.get("router_scaling_factor", 1.0)))
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    elif arch == "olmoe":
        # OlmoeModel: TextModel's keys (the experts' width is `feed_forward_length`, OLMoE's
        # `intermediate_size`), and the RMS epsilon written again as 1e-5 whatever the config.
        w.add_layer_norm_rms_eps(1e-5)
    else:
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        if arch == "qwen3vlmoe":
            w.add_rope_dimension_sections([2, 3, 3, 0])
            w.add_num_deepstack_layers(3)
        if arch == "mellum":
            # TextModel: the sliding layers' base; MellumModel: the window and one bool per layer
            # (the config slides); its vocabulary's split.
            w.add_rope_freq_base_swa(cfg["rope_parameters"]["sliding_attention"]["rope_theta"])
            w.add_sliding_window(cfg["sliding_window"])
            w.add_sliding_window_pattern([t == "sliding_attention" for t in cfg["layer_types"]])
            w.add_tokenizer_pre("mellum")
        if arch == "qwen2moe":
            w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    write_vocab(w, fixture, cfg)
    add_tensors_and_close(w, tensors_of(cfg, st, arch), qtype_of(fixture, quantized))


def dequantized(path, cfg, arch):
    """gguf-py's dequantization of every tensor of the file, in Hugging Face names and order."""
    extra = {"ernie4_5-moe": ERNIE, "hunyuan-moe": HUNYUAN, "hunyuan-dense": HUNYUAN, "hy_v3": HY_V3}.get(arch, SHARED)
    names = {v: k for k, v in {**ATTN, **DENSE, **extra}.items()}
    router, scope, stacks = experts_of(arch)
    out, halves = {}, {}
    for t in gguf.GGUFReader(str(path)).tensors:
        v = gguf.dequantize(t.data, t.tensor_type).astype(np.float32).reshape([int(d) for d in reversed(t.shape)])
        top = {g: hf for hf, g in TOP.items()}
        if t.name.startswith("rope_factors"):
            continue
        if t.name in top:
            out[top[t.name]] = v
            continue
        _, i, rest = t.name.split(".", 2)
        p = f"model.layers.{i}."
        if rest in stacks:
            for e in range(v.shape[0]):
                out[f"{p}{scope}.{e}.{stacks[rest]}.weight"] = np.ascontiguousarray(v[e])
        elif arch == "granitemoe" and rest.endswith(("_exps.weight", "_shexp.weight")):
            halves.setdefault(p, {})[rest] = v
        elif arch == "granite_swa" and rest in GRANITE_SWA_FUSED:
            out[p + GRANITE_SWA_FUSED[rest]] = np.ascontiguousarray(v)
        elif rest == "ffn_gate_inp.weight":
            out[p + router] = v
        elif rest == "ffn_gate_inp_shexp.weight":
            out[p + "mlp.shared_expert_gate.weight"] = v.reshape(1, -1)
        else:
            if arch in ("llama", "granitemoe", "granite_swa") and rest == "attn_q.weight":
                v = unpermute(v, cfg["num_attention_heads"])
            if arch in ("llama", "granitemoe", "granite_swa") and rest == "attn_k.weight":
                v = unpermute(v, cfg["num_key_value_heads"])
            out[p + names[rest]] = np.ascontiguousarray(v)
    for p, h in halves.items():
        out[p + "block_sparse_moe.input_linear.weight"] = np.ascontiguousarray(np.concatenate([h["ffn_gate_exps.weight"], h["ffn_up_exps.weight"]], axis=1))
        out[p + "block_sparse_moe.output_linear.weight"] = np.ascontiguousarray(h["ffn_down_exps.weight"])
        if "ffn_gate_shexp.weight" in h:
            out[p + "shared_mlp.input_linear.weight"] = np.ascontiguousarray(np.concatenate([h["ffn_gate_shexp.weight"], h["ffn_up_shexp.weight"]], axis=0))
            out[p + "shared_mlp.output_linear.weight"] = np.ascontiguousarray(h["ffn_down_shexp.weight"])
    return out


def as_files_state(fixture, cfg, st):
    """The fixture as a GGUF file of its architecture can state it: tiny-ernie4_5_moe,
    tiny-hunyuan_v1_moe and tiny-hunyuan_v1_dense without their biases (`use_bias` /
    `attention_bias` false, as the released models: llama.cpp's loaders for them read no MLP or
    head bias, and Hunyuan's no output-projection bias), ERNIE's correction bias kept."""
    if FIXTURES[fixture] not in ("ernie4_5-moe", "hunyuan-moe", "hunyuan-dense"):
        return cfg, st
    return {**cfg, "use_bias": False, "attention_bias": False}, {k: v for k, v in st.items() if not k.endswith(".bias") or "moe_statics" in k}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for stem, (fixture, arch) in VL_VARIANTS.items():
        cfg = json.loads((FIX / fixture / "config.json").read_text())
        st = load_file(str(FIX / fixture / "model.safetensors"))
        path = OUT / f"{stem}.F32.gguf"
        write(path, fixture, cfg, st, False, arch)
        check_round_trip(path, dequantized(path, cfg, arch), st, False)
    if sys.argv[1:] == ["--vl-only"]:
        return
    for fixture, arch in FIXTURES.items():
        cfg = json.loads((FIX / fixture / "config.json").read_text())
        cfg, st = as_files_state(fixture, cfg, load_file(str(FIX / fixture / "model.safetensors")))
        for quantized in (False, True):
            path = OUT / f"{fixture}.{'Q' if quantized else 'F32'}.gguf"
            write(path, fixture, cfg, st, quantized)
            check_round_trip(path, dequantized(path, cfg, arch), st, quantized)


if __name__ == "__main__":
    main()
