"""Writes tests/python/data/gguf-moe/tiny-deepseek_v3.*.gguf and tiny-deepseek_v2.*.gguf: the
tiny DeepSeek fixtures as llama.cpp's converter writes them (`deepseek2` files, issue #29), for
tests/python/test_gguf_grouped_moe.py. No torch: gguf-py (its writer, `quantize` and `dequantize`),
numpy and safetensors only.

Run once, not in CI:
    .venv/bin/python scripts/make_deepseek_gguf.py     # from the repository root

What llama.cpp's converter writes (read for facts: `conversion/deepseek.py` `DeepseekV2Model`,
the class of both DeepSeek-V2 and V3; `conversion/base.py` `TextModel.set_gguf_parameters`):

- metadata: the text sizes with `head_count_kv` 1 (MLA as MQA), `leading_dense_block_count`
  (first_k_dense_replace), `attention.q_lora_rank` (when the model compresses queries),
  `attention.kv_lora_rank`, `key_length` = kv_lora_rank + qk_rope_head_dim, `value_length` =
  kv_lora_rank, `key_length_mla` = qk_nope_head_dim + qk_rope_head_dim, `value_length_mla` =
  v_head_dim, `rope.dimension_count` = qk_rope_head_dim, `expert_feed_forward_length`,
  `expert_count`, `expert_used_count`, `expert_shared_count`, `expert_group_count` /
  `expert_group_used_count` (n_group / topk_group), `expert_weights_scale`
  (routed_scaling_factor), `expert_weights_norm` only when norm_topk_prob is true,
  `expert_gating_func` from `scoring_func` (absent in older V2 files: llama.cpp reads softmax),
  YaRN's type, factor, original length and betas, and `rope.scaling.yarn_log_multiplier` =
  0.1 x mscale_all_dim (llama.cpp assumes mscale equals mscale_all_dim, as in DeepSeek's configs);
- tensors: `attn_q_a` / `attn_q_a_norm` / `attn_q_b` (or `attn_q` without q compression),
  `attn_kv_a_mqa`, `attn_kv_a_norm`, `attn_output`, the experts merged into 3-D
  `ffn_{gate,up,down}_exps`, the router `ffn_gate_inp`, V3's correction bias `exp_probs_b.bias`,
  the shared experts `ffn_{gate,up,down}_shexp`, the leading dense layers' `ffn_{gate,up,down}`;
- `kv_b_proj` split per head into `attn_k_b` (its key rows, transposed: numpy `[heads,
  kv_lora_rank, qk_nope_head_dim]`) and `attn_v_b` (`[heads, v_head_dim, kv_lora_rank]`), as
  converters write it since llama.cpp's MLA change (April 2025); files converted before it hold
  `attn_kv_b` (`[heads x (nope + v), kv_lora_rank]`, Hugging Face's layout), no `*_mla` keys,
  `key_length` / `value_length` of the heads themselves (nope + rope, v) and the config's
  key/value heads. tiny-deepseek_v3 is written the current way, tiny-deepseek_v2 (no query
  compression, softmax routing, no gating key) the older way;
- `tokenizer.ggml.pre` `deepseek-v3` (V3), `deepseek-llm` (V2) or `youtu` over the fixture's
  vocabulary;
- Mistral 4 (tiny-mistral4, `conversion/mistral3.py` `Mistral3Model.Mistral4Model`, a
  DeepseekV2Model writing architecture `mistral4`): the same keys without a gating key (its
  config has no `scoring_func`: softmax), the experts stacked as transformers keeps them
  (`merge_expert` false: `mlp.experts.gate_up_proj` `[E, 2 x inter, hidden]` as
  `ffn_gate_up_exps`, `down_proj` as `ffn_down_exps`), and no temperature key (the fixture's
  `llama_4_scaling_beta` is not written by that converter);
- `tiny-deepseek_v3-fused.{F32,Q}.gguf` (and the Q file's dequantization): tiny-deepseek_v3 with
  each layer's gate and up expert stacks as one `ffn_gate_up_exps` (per expert its gate rows,
  then its up rows: the concatenation `ModelBase.modify_tensors` makes for
  `--fuse-gate-up-exps`), which the deepseek2 loader takes (`create_tensor_gate_up_exps`); this
  tree's converter writes it only for architectures listing `FFN_GATE_UP_EXP`, so the file is
  made here;
- `tiny-deepseek_v3-nextn.F32.gguf`: tiny-deepseek_v3 as `Glm4MoeLiteModel` (GLM-4.7-Flash's
  converter, a DeepseekV2Model) writes a deepseek2 file: `nextn_predict_layers` 1 and a
  prediction layer appended to the blocks (`with_prediction_layer`), `tokenizer.ggml.pre` `glm4`;
- `tiny-mistral4-temperature.F32.gguf`: tiny-mistral4 with `attention.temperature_scale` (its
  `llama_4_scaling_beta`) and `attention.temperature_length` (YaRN's original length), the
  keys llama.cpp's deepseek2 loader reads as Llama 4's query scaling: the fixture's whole model;
- Youtu-LLM (tiny-youtu, `YoutuForCausalLM`, which the same class converts): no expert keys but
  `leading_dense_block_count` = the layer count, `expert_feed_forward_length` = the MLP's width
  and `expert_shared_count` 0 (the converter's defaults for a model without experts), the
  current split of kv_b, default RoPE (no scaling keys).

Files (`<fixture>` each of `FIXTURES`):
- `<fixture>.F32.gguf`: every tensor F32: the fixture's own model, compared with its reference.
- `<fixture>.Q.gguf`: attention, MLP, embedding and head Q8_0, experts Q4_0 (v3) or Q8_0 (v2), where
  rows are whole 32-value blocks (the tiny k_b / v_b rows are 16 and 24 long: F32); norms,
  router and bias F32; beside it `<fixture>.Q.dequantized.safetensors`, gguf-py's `dequantize`
  of every tensor in Hugging Face names (kv_b reassembled, experts split), a float checkpoint.
- `tiny-deepseek_v3-wide.Q.gguf` and the float checkpoint `tiny-deepseek_v3-wide/` (see `WIDE`).
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

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
OUT = ROOT / "tests" / "python" / "data" / "gguf-moe"
# fixture: (kv_b split into k_b / v_b, expert type in the Q file, `expert_gating_func` written,
# `tokenizer.ggml.pre` as the converter names DeepSeek-V3's and DeepSeek-V2's tokenizers)
FIXTURES = {
    "tiny-deepseek_v3": (True, T.Q4_0, gguf.ExpertGatingFuncType.SIGMOID, "deepseek-v3"),
    "tiny-deepseek_v2": (False, T.Q8_0, None, "deepseek-llm"),
    # Youtu-LLM (`YoutuForCausalLM`, converted by DeepseekV2Model): no experts, default RoPE.
    "tiny-youtu": (True, None, None, "youtu"),
    # Mistral 4 (`Mistral3Model.Mistral4Model`, a DeepseekV2Model writing `mistral4`): no
    # gating key (softmax), the stacked experts as transformers keeps them (`merge_expert`
    # false: `ffn_gate_up_exps`), no temperature key.
    "tiny-mistral4": (True, T.Q4_0, None, "tekken"),
}
# The architecture each fixture is written as (deepseek2 unless listed).
ARCH = {"tiny-mistral4": "mistral4"}

NAMES = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_a_proj.weight": "attn_q_a.weight", "self_attn.q_a_layernorm.weight": "attn_q_a_norm.weight",
    "self_attn.q_b_proj.weight": "attn_q_b.weight", "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.kv_a_proj_with_mqa.weight": "attn_kv_a_mqa.weight", "self_attn.kv_a_layernorm.weight": "attn_kv_a_norm.weight",
    "self_attn.kv_b_proj.weight": "attn_kv_b.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight", "mlp.gate.e_score_correction_bias": "exp_probs_b.bias",
    "mlp.shared_experts.gate_proj.weight": "ffn_gate_shexp.weight", "mlp.shared_experts.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_experts.down_proj.weight": "ffn_down_shexp.weight",
}
STACKS = {"ffn_gate_exps.weight": "gate_proj", "ffn_up_exps.weight": "up_proj", "ffn_down_exps.weight": "down_proj"}


def split_kv_b(kv_b, cfg):
    """DeepseekV2Model.modify_tensors' split: (k_b [heads, kv_lora, nope], v_b [heads, v, kv_lora])."""
    heads, nope, v = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]
    per_head = kv_b.reshape(heads, nope + v, kv_b.shape[-1])
    return np.ascontiguousarray(per_head[:, :nope, :].transpose(0, 2, 1)), np.ascontiguousarray(per_head[:, nope:, :])


def join_kv_b(k_b, v_b):
    """The inverse of `split_kv_b`: Hugging Face's kv_b_proj `[heads x (nope + v), kv_lora]`."""
    joined = np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1)
    return np.ascontiguousarray(joined.reshape(-1, joined.shape[-1]))


def tensors_of(cfg, st, split):
    """(gguf name, float32 array) as the converter names, splits and merges them."""
    out = [("token_embd.weight", st["model.embed_tokens.weight"]), ("output_norm.weight", st["model.norm.weight"]), ("output.weight", st["lm_head.weight"])]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for hf, g in NAMES.items():
            if p + hf not in st:
                continue
            if split and g == "attn_kv_b.weight":
                k_b, v_b = split_kv_b(st[p + hf], cfg)
                out += [(f"blk.{i}.attn_k_b.weight", k_b), (f"blk.{i}.attn_v_b.weight", v_b)]
                continue
            out.append((f"blk.{i}.{g}", st[p + hf]))
        if p + "mlp.experts.gate_up_proj" in st:
            # Mistral 4: the stacks as they are, `.weight` appended to their names.
            out += [(f"blk.{i}.ffn_gate_up_exps.weight", st[p + "mlp.experts.gate_up_proj"]), (f"blk.{i}.ffn_down_exps.weight", st[p + "mlp.experts.down_proj"])]
        elif p + "mlp.gate.weight" in st:
            for g, part in STACKS.items():
                out.append((f"blk.{i}.{g}", np.stack([st[f"{p}mlp.experts.{e}.{part}.weight"] for e in range(cfg["n_routed_experts"])])))
    return out


def qtype_of(expert_type, quantized):
    def pick(name, data):
        if not quantized or data.ndim == 1 or name.endswith("norm.weight") or "gate_inp" in name or data.shape[-1] % 32:
            return T.F32
        return expert_type if "_exps" in name else T.Q8_0
    return pick


def add_expert_counts(w, cfg):
    """TextModel's expert keys for DeepSeek-style configs: routed experts, top-k, groups."""
    w.add_expert_count(cfg["n_routed_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_expert_group_count(cfg["n_group"])
    w.add_expert_group_used_count(cfg["topk_group"])


def fuse_gate_up(tensors):
    """llama.cpp's `--fuse-gate-up-exps` (`ModelBase.modify_tensors`): each layer's gate and up
    expert stacks concatenated per expert (`[E, 2 x inter, hidden]`) as `ffn_gate_up_exps`."""
    by_name = dict(tensors)
    out = []
    for name, w in tensors:
        if name.endswith("ffn_up_exps.weight"):
            continue
        if name.endswith("ffn_gate_exps.weight"):
            up = by_name[name.replace("ffn_gate_exps", "ffn_up_exps")]
            out.append((name.replace("ffn_gate_exps", "ffn_gate_up_exps"), np.concatenate([w, up], axis=1)))
            continue
        out.append((name, w))
    assert any(n.endswith("ffn_gate_up_exps.weight") for n, _ in out), "no expert stacks to fuse"
    return out


def write(path, fixture, cfg, st, quantized, temperature=False, pre=None, fused=False, nextn=False):
    """`pre`: another `tokenizer.ggml.pre` than the fixture's (a test of a split rule); `fused`:
    the experts' gate and up stacks as one (`fuse_gate_up`); `nextn`: one multi-token prediction
    layer appended after the decoder's (`with_prediction_layer`)."""
    split, expert_type, gating, own_pre = FIXTURES[fixture]
    pre = pre or own_pre
    p = rope_params(cfg)
    w = gguf.GGUFWriter(str(path), ARCH.get(fixture, "deepseek2"))
    w.add_name(fixture)
    # Since the MLA change the converter writes the latent as one MQA head; before it, the
    # config's key/value heads.
    add_text_sizes(w, cfg, blocks=cfg["num_hidden_layers"] + 1 if nextn else None, kv_heads=1 if split else None)
    experts = cfg.get("n_routed_experts") is not None
    if p.get("rope_type") == "yarn":
        assert p["mscale"] == p["mscale_all_dim"], p
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(p["factor"])
        w.add_rope_scaling_orig_ctx_len(p["original_max_position_embeddings"])
        w.add_rope_scaling_yarn_beta_fast(p["beta_fast"])
        w.add_rope_scaling_yarn_beta_slow(p["beta_slow"])
    w.add_rope_freq_base(p["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if experts:
        add_expert_counts(w, cfg)
    if gating is not None:
        w.add_expert_gating_func(gating)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantized else gguf.LlamaFileType.ALL_F32)
    # Without experts (Youtu) every layer is a leading dense one.
    w.add_leading_dense_block_count(cfg["first_k_dense_replace"] if experts else cfg["num_hidden_layers"])
    w.add_vocab_size(cfg["vocab_size"])
    if cfg.get("q_lora_rank") is not None:
        w.add_q_lora_rank(cfg["q_lora_rank"])
    w.add_kv_lora_rank(cfg["kv_lora_rank"])
    if split:
        w.add_key_length(cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"])
        w.add_value_length(cfg["kv_lora_rank"])
        w.add_key_length_mla(cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])
        w.add_value_length_mla(cfg["v_head_dim"])
    else:
        # Before the MLA change: the heads' own key (nope + rope) and value lengths.
        w.add_key_length(cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])
        w.add_value_length(cfg["v_head_dim"])
    # Without experts: the MLP's width and no shared experts, as the converter writes them.
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"] if experts else cfg["intermediate_size"])
    w.add_expert_shared_count(cfg.get("n_shared_experts", 0))
    if experts:
        w.add_expert_weights_scale(cfg["routed_scaling_factor"])
    if cfg.get("norm_topk_prob"):
        w.add_expert_weights_norm(True)
    w.add_rope_dimension_count(cfg["qk_rope_head_dim"])
    if "mscale_all_dim" in p:
        w.add_rope_scaling_yarn_log_mul(0.1 * p["mscale_all_dim"])
    if temperature:
        # What llama.cpp's deepseek2 loader reads as Llama 4's query scaling (a converter that
        # writes Mistral 4's `llama_4_scaling_beta`, as the Ministral 3 one does).
        w.add_attn_temperature_scale(p["llama_4_scaling_beta"])
        w.add_attn_temperature_length(p["original_max_position_embeddings"])
    if nextn:
        w.add_nextn_predict_layers(1)
    write_vocab(w, fixture, cfg)
    # The fixture's vocabulary under the real model's split rule (the tokenizer test reads the
    # split, not the fixture's own tokenizer).
    w.add_tokenizer_pre(pre)
    tensors = tensors_of(cfg, st, split)
    if nextn:
        tensors = with_prediction_layer(tensors, cfg)
    add_tensors_and_close(w, fuse_gate_up(tensors) if fused else tensors, qtype_of(expert_type, quantized))


def dequantized(path, fixture=None):
    """gguf-py's dequantization of every tensor of the file, in Hugging Face names."""
    names = {v: k for k, v in NAMES.items()}
    top = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
    out, halves = {}, {}
    for t in gguf.GGUFReader(str(path)).tensors:
        v = gguf.dequantize(t.data, t.tensor_type).astype(np.float32).reshape([int(d) for d in reversed(t.shape)])
        if t.name in top:
            out[top[t.name]] = v
            continue
        _, i, rest = t.name.split(".", 2)
        p = f"model.layers.{i}."
        if rest == "ffn_gate_up_exps.weight" and fixture not in ARCH:
            # A fused gate/up stack (`fuse_gate_up`): each expert's gate rows, then its up rows.
            half = v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"{p}mlp.experts.{e}.gate_proj.weight"] = np.ascontiguousarray(v[e, :half])
                out[f"{p}mlp.experts.{e}.up_proj.weight"] = np.ascontiguousarray(v[e, half:])
        elif rest == "ffn_gate_up_exps.weight":
            out[p + "mlp.experts.gate_up_proj"] = np.ascontiguousarray(v)
        elif rest == "ffn_down_exps.weight" and fixture in ARCH:
            out[p + "mlp.experts.down_proj"] = np.ascontiguousarray(v)
        elif rest in STACKS:
            for e in range(v.shape[0]):
                out[f"{p}mlp.experts.{e}.{STACKS[rest]}.weight"] = np.ascontiguousarray(v[e])
        elif rest in ("attn_k_b.weight", "attn_v_b.weight"):
            halves.setdefault(p, {})[rest] = v
        else:
            out[p + names[rest]] = np.ascontiguousarray(v)
    for p, kv in halves.items():
        out[p + "self_attn.kv_b_proj.weight"] = join_kv_b(kv["attn_k_b.weight"], kv["attn_v_b.weight"])
    return out


# tiny-deepseek_v3 widened so the split halves are whole 32-value blocks (`qk_nope_head_dim`,
# `kv_lora_rank` and `v_head_dim` 32; rotary 16, so heads of 48 fuse on cpu): its Q file holds Q8_0 `attn_k_b` / `attn_v_b`, which no
# MatMulNBits can hold once k_b is transposed back; random weights (seed 0), a float checkpoint
# `tiny-deepseek_v3-wide/` (config, the fixture's tokenizer, gguf-py's dequantization of the Q
# file) written beside it.
WIDE = {"qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "kv_lora_rank": 32, "v_head_dim": 32}


def wide_weights(cfg, st):
    """Random weights of the fixture's names in the widened config's shapes."""
    h, heads, rope = cfg["hidden_size"], cfg["num_attention_heads"], cfg["qk_rope_head_dim"]
    nope, rank, v = cfg["qk_nope_head_dim"], cfg["kv_lora_rank"], cfg["v_head_dim"]
    shapes = {
        "self_attn.q_b_proj.weight": (heads * (nope + rope), cfg["q_lora_rank"]),
        "self_attn.kv_a_proj_with_mqa.weight": (rank + rope, h),
        "self_attn.kv_a_layernorm.weight": (rank,),
        "self_attn.kv_b_proj.weight": (heads * (nope + v), rank),
        "self_attn.o_proj.weight": (h, heads * v),
    }
    rng = np.random.default_rng(0)
    out = {}
    for name, t in st.items():
        shape = next((s for suffix, s in shapes.items() if name.endswith(suffix)), t.shape)
        if name.endswith("norm.weight"):
            out[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            out[name] = (0.2 * rng.standard_normal(shape)).astype(np.float32)
    return out


def write_wide():
    from safetensors.numpy import save_file

    cfg = {**json.loads((FIX / "tiny-deepseek_v3" / "config.json").read_text()), **WIDE}
    cfg["qk_head_dim"] = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    st = wide_weights(cfg, load_file(str(FIX / "tiny-deepseek_v3" / "model.safetensors")))
    path = OUT / "tiny-deepseek_v3-wide.Q.gguf"
    write(path, "tiny-deepseek_v3", cfg, st, True)
    back = dequantized(path)
    assert set(back) == set(st) and all(back[k].shape == st[k].shape for k in st)
    folder = OUT / "tiny-deepseek_v3-wide"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    for f in ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]:
        (folder / f).write_bytes((FIX / "tiny-deepseek_v3" / f).read_bytes())
    save_file(back, str(folder / "model.safetensors"))
    print(f"{path.name}: {path.stat().st_size} bytes; {folder.name}/ its dequantization")


def with_prediction_layer(tensors, cfg):
    """`tensors` with GLM-4.7-Flash's multi-token prediction layer appended as
    `Glm4MoeLiteModel` (a DeepseekV2Model) writes it by default: block `blk.<layers>` holding a
    decoder layer's tensors (here the last layer's again) and its own `nextn.eh_proj`,
    `nextn.enorm`, `nextn.hnorm`, `nextn.shared_head_norm`, which the import must leave unread."""
    layers, hidden = cfg["num_hidden_layers"], cfg["hidden_size"]
    last = f"blk.{layers - 1}."
    out = list(tensors) + [(f"blk.{layers}." + n[len(last):], w) for n, w in tensors if n.startswith(last)]
    rng = np.random.default_rng(0)
    out.append((f"blk.{layers}.nextn.eh_proj.weight", rng.standard_normal((hidden, 2 * hidden)).astype(np.float32)))
    return out + [(f"blk.{layers}.nextn.{n}.weight", np.ones(hidden, np.float32)) for n in ("enorm", "hnorm", "shared_head_norm")]


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    write_wide()
    for fixture in FIXTURES:
        cfg = json.loads((FIX / fixture / "config.json").read_text())
        st = load_file(str(FIX / fixture / "model.safetensors"))
        for quantized in (False, True):
            path = OUT / f"{fixture}.{'Q' if quantized else 'F32'}.gguf"
            write(path, fixture, cfg, st, quantized)
            check_round_trip(path, dequantized(path, fixture), st, quantized)
    # tiny-deepseek_v3 with its gate and up expert stacks fused (`fuse_gate_up`).
    cfg = json.loads((FIX / "tiny-deepseek_v3" / "config.json").read_text())
    st = load_file(str(FIX / "tiny-deepseek_v3" / "model.safetensors"))
    for quantized in (False, True):
        path = OUT / f"tiny-deepseek_v3-fused.{'Q' if quantized else 'F32'}.gguf"
        write(path, "tiny-deepseek_v3", cfg, st, quantized, fused=True)
        check_round_trip(path, dequantized(path, "tiny-deepseek_v3"), st, quantized)
    # tiny-deepseek_v3 as GLM-4.7-Flash's converter writes a deepseek2 file: a prediction layer
    # appended, GLM's split rule.
    path = OUT / "tiny-deepseek_v3-nextn.F32.gguf"
    write(path, "tiny-deepseek_v3", cfg, st, False, pre="glm4", nextn=True)
    print(f"{path.name}: {path.stat().st_size} bytes")
    # tiny-mistral4 with its query scaling stated (`TEMPERATURE`).
    cfg = json.loads((FIX / "tiny-mistral4" / "config.json").read_text())
    path = OUT / "tiny-mistral4-temperature.F32.gguf"
    write(path, "tiny-mistral4", cfg, load_file(str(FIX / "tiny-mistral4" / "model.safetensors")), False, temperature=True)
    print(f"{path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
