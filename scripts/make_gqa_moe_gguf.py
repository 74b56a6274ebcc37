"""Writes tests/python/data/gguf-moe/tiny-glm4_moe.*.gguf and tiny-dots1.*.gguf: the tiny GLM-4.5 and
dots.llm1 fixtures (grouped-query attention with DeepSeek-V3-style experts) as llama.cpp's
converter writes them (`glm4moe` and `dots1` files, issue #29), for
tests/python/test_gguf_grouped_moe.py. No torch: gguf-py (its writer, `quantize` and
`dequantize`), numpy and safetensors only.

Run once, not in CI:
    .venv/bin/python scripts/make_gqa_moe_gguf.py     # from the repository root

What llama.cpp's converter writes (read for facts: `conversion/glm.py` `Glm4MoeModel`,
`conversion/base.py` `TextModel.set_gguf_parameters`):

- metadata: the text sizes (`key_length` / `value_length` the head size, `head_count_kv`),
  `rope.dimension_count` = head_dim x partial_rotary_factor, `expert_count`, `expert_used_count`,
  `expert_group_count` / `expert_group_used_count`, `expert_feed_forward_length`,
  `expert_shared_count`, `leading_dense_block_count`, `expert_gating_func` always sigmoid,
  `expert_weights_scale`, `expert_weights_norm`, and `nextn_predict_layers`; `block_count`
  counts the multi-token prediction layers it appends after the decoder's (by default);
- tensors: nothing permuted (NEOX rope); `post_attention_norm` is the norm before the MLP (the
  architecture has no `ffn_norm`), q/k/v with biases, `attn_q_norm` / `attn_k_norm`, the
  router `ffn_gate_inp`, the correction bias `exp_probs_b.bias`, experts merged into 3-D
  `ffn_{gate,up,down}_exps`, shared experts `ffn_{gate,up,down}_shexp`, the leading dense
  layers' `ffn_{gate,up,down}`; the prediction layer `blk.<layers>` holds a decoder layer's
  tensors plus `nextn.eh_proj`, `nextn.enorm`, `nextn.hnorm`, `nextn.shared_head_norm`
  (tiny-glm4_moe has no prediction weights: its layer is a copy of the last layer's with
  random `nextn.*`, which the import must leave unread);
- `tokenizer.ggml.pre` `glm4` over the fixture's vocabulary.

dots.llm1 (`conversion/dots1.py` `Dots1Model`, a `Qwen2MoeModel`): the text sizes,
`expert_count` (n_routed_experts), `expert_used_count`, the group counts,
`expert_feed_forward_length`, `leading_dense_block_count`, `expert_shared_count`,
`expert_weights_scale`, `expert_weights_norm` and `expert_gating_func` sigmoid (from a
`scoring_func` of `sigmoid`); `ffn_norm` before the MLP, q/k norms, no biases, no windows (the
converter writes none; llama.cpp's dots1 graph has none), no prediction layer.

K-EXAONE (tiny-exaone_moe; `conversion/exaone.py` `ExaoneMoEModel`, an `Exaone4Model`):
TextModel's sizes and expert counts with sigmoid gating (which llama.cpp's loader requires), the
vocabulary size, the window and its per-layer bools, `expert_shared_feed_forward_length` as
moe_intermediate_size x num_shared_experts, `expert_weights_scale` / `_norm`,
`leading_dense_block_count`, `nextn_predict_layers` and RoPE scaling `none`; pre-norms
(`attn_norm`, `ffn_norm`), per-head q/k norms, the correction bias `exp_probs_b.bias`, shared
experts `ffn_*_shexp`, one appended prediction layer (`MTP`), `tokenizer.ggml.pre`
`exaone-moe` (K-EXAONE's own split) over the fixture's vocabulary.

AFMoE (tiny-afmoe; `conversion/afmoe.py` `AfmoeModel`, a LlamaModel whose tensors skip its
permutation): TextModel's and LlamaModel's keys (vocabulary size, rotary width = head_dim), the
expert counts, `expert_shared_count`, `expert_feed_forward_length`, `leading_dense_block_count`,
`expert_weights_norm` (`route_norm`), `expert_weights_scale` (`route_scale`) and the window
(no pattern key: llama.cpp's period 4); four norms (`attn_norm`, `post_attention_norm`,
`ffn_norm`, `post_ffw_norm`), `attn_gate`, per-head q/k norms, `exp_probs_b.bias`.

Files (`<fixture>` each of `FIXTURES`): `<fixture>.F32.gguf` (the fixture's weights) and
`<fixture>.Q.gguf` (Q8_0 attention, embedding and head, Q4_0 experts where rows are whole
32-value blocks) with `<fixture>.Q.dequantized.safetensors` beside it (gguf-py's
dequantization, Hugging Face names, a prediction layer left out).
"""
import json
import sys
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from safetensors.numpy import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_writing import add_tensors_and_close, add_text_sizes, check_round_trip  # noqa: E402
from make_arch_gguf import rope_params, write_vocab  # noqa: E402
from make_deepseek_gguf import STACKS, add_expert_counts, qtype_of  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
OUT = ROOT / "tests" / "python" / "data" / "gguf-moe"
# fixture: (architecture, llama.cpp's name of the norm before the MLP, `tokenizer.ggml.pre`)
FIXTURES = {
    "tiny-glm4_moe": ("glm4moe", "post_attention_norm.weight", "glm4"),
    "tiny-dots1": ("dots1", "ffn_norm.weight", None),
    "tiny-exaone_moe": ("exaone-moe", "ffn_norm.weight", "exaone-moe"),
    "tiny-afmoe": ("afmoe", "post_attention_norm.weight", None),
    # Solar Open: SolarOpenModel is a Glm4MoeModel writing `glm4moe` (no prediction layers, no
    # dense lead, no q/k norms; the rotated half of each head its converter writes for a config
    # without `partial_rotary_factor`: the test's AS_FILES_STATE).
    "tiny-solar_open": ("glm4moe", "post_attention_norm.weight", None),
}
# Prediction layers appended after the decoder: GLM's from its config; tiny-exaone_moe's config
# states none, so one, as K-EXAONE's own config has (`num_nextn_predict_layers` 1).
MTP = {"glm4moe": lambda cfg: cfg.get("num_nextn_predict_layers") or 0, "exaone-moe": lambda cfg: cfg.get("num_nextn_predict_layers", 1)}

NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight", "mlp.gate.e_score_correction_bias": "exp_probs_b.bias",
    "mlp.shared_experts.gate_proj.weight": "ffn_gate_shexp.weight", "mlp.shared_experts.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_experts.down_proj.weight": "ffn_down_shexp.weight",
}


def names_of(fixture):
    names = {**NAMES, "post_attention_layernorm.weight": FIXTURES[fixture][1]}
    if FIXTURES[fixture][0] == "afmoe":
        # AfmoeModel (gguf-py's TensorNameMap): four norms, the attention gate, its router and
        # correction bias.
        del names["mlp.gate.weight"], names["mlp.gate.e_score_correction_bias"]
        names.update({
            "pre_mlp_layernorm.weight": "ffn_norm.weight", "post_mlp_layernorm.weight": "post_ffw_norm.weight",
            "self_attn.gate_proj.weight": "attn_gate.weight", "mlp.router.gate.weight": "ffn_gate_inp.weight",
            "mlp.expert_bias": "exp_probs_b.bias",
        })
    if FIXTURES[fixture][0] == "exaone-moe":
        # K-EXAONE's correction bias sits beside the router.
        del names["mlp.gate.e_score_correction_bias"]
        names["mlp.e_score_correction_bias"] = "exp_probs_b.bias"
    return names


def n_routed(cfg):
    return cfg.get("n_routed_experts") or cfg["num_experts"]


def layer_tensors(fixture, cfg, st, i, block):
    """Layer `i`'s tensors under `blk.<block>.`."""
    p = f"model.layers.{i}."
    out = [(f"blk.{block}.{g}", st[p + hf]) for hf, g in names_of(fixture).items() if p + hf in st]
    if p + "mlp.gate.weight" in st or p + "mlp.router.gate.weight" in st:
        for g, part in STACKS.items():
            out.append((f"blk.{block}.{g}", np.stack([st[f"{p}mlp.experts.{e}.{part}.weight"] for e in range(n_routed(cfg))])))
    return out


def tensors_of(fixture, cfg, st):
    layers, hidden = cfg["num_hidden_layers"], cfg["hidden_size"]
    out = [("token_embd.weight", st["model.embed_tokens.weight"]), ("output_norm.weight", st["model.norm.weight"]), ("output.weight", st["lm_head.weight"])]
    for i in range(layers):
        out += layer_tensors(fixture, cfg, st, i, i)
    if FIXTURES[fixture][0] not in MTP or not MTP[FIXTURES[fixture][0]](cfg):
        return out
    # The prediction layer: the last layer's tensors again, and its own.
    rng = np.random.default_rng(0)
    out += layer_tensors(fixture, cfg, st, layers - 1, layers)
    out.append((f"blk.{layers}.nextn.eh_proj.weight", rng.standard_normal((hidden, 2 * hidden)).astype(np.float32)))
    out += [(f"blk.{layers}.nextn.{n}.weight", np.ones(hidden, np.float32)) for n in ("enorm", "hnorm", "shared_head_norm")]
    return out


def write(path, fixture, cfg, st, quantized):
    arch, _, pre = FIXTURES[fixture]
    glm, exaone, afmoe = arch == "glm4moe", arch == "exaone-moe", arch == "afmoe"
    p = rope_params(cfg)
    extra = MTP[arch](cfg) if arch in MTP else 0
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(fixture)
    add_text_sizes(w, cfg, blocks=cfg["num_hidden_layers"] + extra)
    w.add_rope_freq_base(p["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if afmoe:
        # TextModel's expert counts (no `scoring_func`: no gating key, llama.cpp's afmoe
        # default is sigmoid).
        w.add_expert_count(cfg["num_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
    elif exaone:
        # TextModel's expert keys under ExaoneMoeConfig's names, and the sigmoid gating that
        # llama.cpp's exaone-moe loader requires (from the model's `scoring_func`).
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        w.add_expert_count(cfg["num_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_group_count(cfg["n_group"])
        w.add_expert_group_used_count(cfg["topk_group"])
    else:
        add_expert_counts(w, cfg)
    if glm or exaone or afmoe:
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    if not (glm or exaone or afmoe):
        # TextModel: a `scoring_func` of `sigmoid` (dots.llm1's config states it).
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
    if glm:
        w.add_rope_dimension_count(int(cfg["head_dim"] * cfg.get("partial_rotary_factor", 0.5)))
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if afmoe:
        # LlamaModel: the vocabulary size and rotary width; AfmoeModel: the shared experts, their
        # width, the dense lead, `route_norm` / `route_scale` (the config's), the window (no
        # pattern: llama.cpp's period 4).
        w.add_vocab_size(cfg["vocab_size"])
        w.add_rope_dimension_count(cfg["head_dim"])
        w.add_expert_shared_count(cfg["num_shared_experts"])
        w.add_leading_dense_block_count(cfg["num_dense_layers"])
        # What a Trinity config adds (TextModel's group keys from `n_group` / `topk_group` 1,
        # AfmoeModel's norm from `route_norm` true), which the tiny config does not state.
        w.add_expert_group_count(1)
        w.add_expert_group_used_count(1)
        w.add_expert_weights_norm(True)
        w.add_expert_weights_scale(cfg["route_scale"])
        w.add_sliding_window(cfg["sliding_window"])
    elif exaone:
        # Exaone4Model: the vocabulary size, the window and one bool per layer from an integer
        # `sliding_window_pattern` (`(i + 1) % n != 0`); ExaoneMoEModel: the shared width as the
        # product, scale, norm, dense lead, prediction layers, RoPE scaling none.
        w.add_vocab_size(cfg["vocab_size"])
        w.add_sliding_window(cfg["sliding_window"])
        n = cfg["sliding_window_pattern"]
        w.add_sliding_window_pattern([(i + 1) % n != 0 for i in range(cfg["num_hidden_layers"])])
        w.add_expert_shared_count(cfg["num_shared_experts"])
        w.add_expert_shared_feed_forward_length(cfg["moe_intermediate_size"] * cfg["num_shared_experts"])
        w.add_expert_weights_scale(cfg["routed_scaling_factor"])
        w.add_expert_weights_norm(cfg["norm_topk_prob"])
        w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
        w.add_nextn_predict_layers(extra)
        w.add_rope_scaling_type(gguf.RopeScalingType.NONE)
    elif glm:
        # Glm4MoeModel: each key where the config has it (Solar Open's has no dense lead and no
        # prediction layers).
        w.add_expert_shared_count(cfg["n_shared_experts"])
        if cfg.get("first_k_dense_replace") is not None:
            w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        w.add_expert_weights_scale(cfg["routed_scaling_factor"])
        w.add_expert_weights_norm(cfg["norm_topk_prob"])
        if cfg.get("num_nextn_predict_layers") is not None:
            w.add_nextn_predict_layers(extra)
    else:
        w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
        w.add_expert_shared_count(cfg["n_shared_experts"])
        w.add_expert_weights_scale(cfg["routed_scaling_factor"])
        w.add_expert_weights_norm(cfg["norm_topk_prob"])
    write_vocab(w, fixture, cfg)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    add_tensors_and_close(w, tensors_of(fixture, cfg, st), qtype_of(T.Q4_0, quantized))


def dequantized(path, fixture, layers):
    """gguf-py's dequantization of the decoder's tensors, in Hugging Face names."""
    names = {v: k for k, v in names_of(fixture).items()}
    top = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
    out = {}
    for t in gguf.GGUFReader(str(path)).tensors:
        v = gguf.dequantize(t.data, t.tensor_type).astype(np.float32).reshape([int(d) for d in reversed(t.shape)])
        if t.name in top:
            out[top[t.name]] = v
            continue
        _, i, rest = t.name.split(".", 2)
        if int(i) >= layers:
            continue
        p = f"model.layers.{i}."
        if rest in STACKS:
            for e in range(v.shape[0]):
                out[f"{p}mlp.experts.{e}.{STACKS[rest]}.weight"] = np.ascontiguousarray(v[e])
        else:
            out[p + names[rest]] = np.ascontiguousarray(v)
    return out


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for fixture in FIXTURES:
        cfg = json.loads((FIX / fixture / "config.json").read_text())
        st = load_file(str(FIX / fixture / "model.safetensors"))
        for quantized in (False, True):
            path = OUT / f"{fixture}.{'Q' if quantized else 'F32'}.gguf"
            write(path, fixture, cfg, st, quantized)
            check_round_trip(path, dequantized(path, fixture, cfg["num_hidden_layers"]), st, quantized)


if __name__ == "__main__":
    main()
