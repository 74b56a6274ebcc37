"""Writes tests/python/data/gguf-moe/tiny-gpt-oss.*: tests/fixtures/tiny-gpt-oss as llama.cpp's
converter writes gpt-oss (issue #29), for tests/python/test_gguf_gpt_oss.py. No torch: gguf-py
(its writer, `quantize` and `dequantize`), numpy and safetensors only.

Run once, not in CI:
    .venv/bin/python scripts/make_gpt_oss_gguf.py     # from the repository root

What llama.cpp's converter writes for gpt-oss (read for facts: `convert_hf_to_gguf.py`
`GptOssModel`, gguf-py's `MODEL_TENSORS[GPT_OSS]` and `tensor_mapping.py`):

- `TextModel.set_gguf_parameters`' keys (sizes, `feed_forward_length` = `intermediate_size`,
  rope base, RMS epsilon, key/value length, expert count and top-k, and for a yarn
  `rope_scaling` its type, factor, original length and beta keys), then `sliding_window` and
  `expert_feed_forward_length` (= `intermediate_size`);
- q/k not permuted (a TextModel); `self_attn.sinks` as `attn_sinks.weight`, the router
  `mlp.router` as `ffn_gate_inp`, `post_attention_layernorm` as `post_attention_norm`;
- the experts' `gate_up_proj` (`[E, hidden, 2 * inter]`, gate and up on even and odd columns)
  transposed to `[E, 2 * inter, hidden]` and split `[:, ::2]` / `[:, 1::2]` into
  `ffn_gate_exps` / `ffn_up_exps`, its bias into `ffn_gate_exps.bias` / `ffn_up_exps.bias`;
  `down_proj` transposed into `ffn_down_exps` with `ffn_down_exps.bias`;
- the vocabulary as GPT-2 BPE with `tokenizer.ggml.pre` `gpt-4o` (o200k's split).

The fixture's `swiglu_limit` is 2.0; llama.cpp's graph fixes it at 7.0 (no key carries it), so
the file stands for the fixture with limit 7.0: the test builds that checkpoint beside it.

Files:
- `tiny-gpt-oss.F32.gguf`: every tensor F32, the fixture's own weights.
- `tiny-gpt-oss.Q.gguf`: experts MXFP4 (as the gpt-oss releases are), attention, embedding and
  head Q8_0, norms, sinks, router and biases F32; beside it
  `tiny-gpt-oss.Q.dequantized.safetensors`, gguf-py's `dequantize` of every tensor in Hugging
  Face names and layout, the float checkpoint the test builds beside the quantized file.
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
from make_arch_gguf import write_vocab  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = "tiny-gpt-oss"
FIX = ROOT / "tests" / "fixtures" / FIXTURE
OUT = ROOT / "tests" / "python" / "data" / "gguf-moe"

LAYER = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "post_attention_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight", "self_attn.o_proj.bias": "attn_output.bias",
    "self_attn.sinks": "attn_sinks.weight", "mlp.router.weight": "ffn_gate_inp.weight", "mlp.router.bias": "ffn_gate_inp.bias",
}
TOP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}


def tensors_of(cfg, st):
    """(gguf name, float32 array) as the converter names and splits them."""
    out = [(g, st[hf]) for hf, g in TOP.items()]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(f"blk.{i}.{g}", st[p + hf]) for hf, g in LAYER.items()]
        gate_up = st[p + "mlp.experts.gate_up_proj"].transpose(0, 2, 1)
        bias = st[p + "mlp.experts.gate_up_proj_bias"]
        out += [
            (f"blk.{i}.ffn_gate_exps.weight", gate_up[:, ::2, :]), (f"blk.{i}.ffn_up_exps.weight", gate_up[:, 1::2, :]),
            (f"blk.{i}.ffn_gate_exps.bias", bias[:, ::2]), (f"blk.{i}.ffn_up_exps.bias", bias[:, 1::2]),
            (f"blk.{i}.ffn_down_exps.weight", st[p + "mlp.experts.down_proj"].transpose(0, 2, 1)),
            (f"blk.{i}.ffn_down_exps.bias", st[p + "mlp.experts.down_proj_bias"]),
        ]
    return out


def qtype_of(quantized):
    def pick(name, data):
        if not quantized or data.ndim == 1 or name.endswith(".bias") or "norm" in name or "gate_inp" in name or data.shape[-1] % 32:
            return T.F32
        return T.MXFP4 if "_exps" in name else T.Q8_0
    return pick


def write(path, cfg, st, quantized):
    rope = cfg["rope_scaling"]
    w = gguf.GGUFWriter(str(path), "gpt-oss")
    w.add_name(FIXTURE)
    add_text_sizes(w, cfg)
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_expert_count(cfg["num_local_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_MXFP4_MOE if quantized else gguf.LlamaFileType.ALL_F32)
    assert rope["rope_type"] == "yarn", rope
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rope["factor"])
    w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    w.add_rope_scaling_yarn_beta_fast(rope["beta_fast"])
    w.add_rope_scaling_yarn_beta_slow(rope["beta_slow"])
    w.add_sliding_window(cfg["sliding_window"])
    w.add_expert_feed_forward_length(cfg["intermediate_size"])
    write_vocab(w, FIXTURE, cfg)
    w.add_tokenizer_pre("gpt-4o")
    add_tensors_and_close(w, tensors_of(cfg, st), qtype_of(quantized))


def dequantized(path, cfg):
    """gguf-py's dequantization of every tensor of the file, in Hugging Face names and layout."""
    back = {g: hf for hf, g in LAYER.items()}
    top = {g: hf for hf, g in TOP.items()}
    parts = {}
    for t in gguf.GGUFReader(str(path)).tensors:
        parts[t.name] = gguf.dequantize(t.data, t.tensor_type).astype(np.float32).reshape([int(d) for d in reversed(t.shape)])
    out = {}
    for name, v in parts.items():
        if name in top:
            out[top[name]] = v
            continue
        _, i, rest = name.split(".", 2)
        if rest in back:
            out[f"model.layers.{i}.{back[rest]}"] = v
    for i in range(cfg["num_hidden_layers"]):
        b, p = f"blk.{i}.", f"model.layers.{i}.mlp.experts."
        gate, up = parts[b + "ffn_gate_exps.weight"], parts[b + "ffn_up_exps.weight"]
        gate_up = np.empty((gate.shape[0], 2 * gate.shape[1], gate.shape[2]), np.float32)
        gate_up[:, ::2], gate_up[:, 1::2] = gate, up
        out[p + "gate_up_proj"] = np.ascontiguousarray(gate_up.transpose(0, 2, 1))
        gb, ub = parts[b + "ffn_gate_exps.bias"], parts[b + "ffn_up_exps.bias"]
        bias = np.empty((gb.shape[0], 2 * gb.shape[1]), np.float32)
        bias[:, ::2], bias[:, 1::2] = gb, ub
        out[p + "gate_up_proj_bias"] = bias
        out[p + "down_proj"] = np.ascontiguousarray(parts[b + "ffn_down_exps.weight"].transpose(0, 2, 1))
        out[p + "down_proj_bias"] = parts[b + "ffn_down_exps.bias"]
    return out


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((FIX / "config.json").read_text())
    st = load_file(str(FIX / "model.safetensors"))
    for quantized in (False, True):
        path = OUT / f"{FIXTURE}.{'Q' if quantized else 'F32'}.gguf"
        write(path, cfg, st, quantized)
        check_round_trip(path, dequantized(path, cfg), st, quantized)


if __name__ == "__main__":
    main()
