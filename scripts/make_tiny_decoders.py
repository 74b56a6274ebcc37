"""Writes tiny random decoder fixtures made here (not copied from ../shared) into tests/fixtures:
a random checkpoint (every parameter perturbed after init, so a weight that is never loaded shows
up) and the reference outputs transformers computes for it, in the layout of the other decoder
fixtures (tests/fixtures/README.md). Run once with torch; the results are committed and the tests
never need torch.

    python3 -m venv /tmp/torch && /tmp/torch/bin/pip install torch transformers safetensors
    /tmp/torch/bin/python scripts/make_tiny_decoders.py [NAME ...]

Each entry of FIXTURES_MADE_HERE gives the config class, its arguments, the fixture whose inputs and
tokenizer files it reuses (same vocabulary size), and how config.json is rewritten into the
spelling published checkpoints use; `composite` wraps the text config in a vision-language one
(the references are then its text path); `model` names the model class when the config class's
family builds another's (SarvamMLAConfig -> DeepseekV3ForCausalLM; the reload check then goes
through AutoModelForCausalLM, as a user's load does). scripts/make_tiny_qwen2_moe.py reuses
`perturbed_and_saved`, `references` and `write_reference_json`.
"""

import json
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures")
SCRIPT = "scripts/make_tiny_decoders.py"

# DeepSeek-V3's YaRN x4 with `mscale_all_dim` (tiny-deepseek_v3, tiny-sarvam_mla).
DEEPSEEK_YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64,
                 "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}

SMALL = dict(vocab_size=512, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
             bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.2, tie_word_embeddings=False)


def legacy_rope(config):
    """transformers 5 saves `rope_parameters`; published configs (written by 4.x) say
    `rope_theta` and `rope_scaling` at the top level, and OLMo 3's scaling is its full layers'."""
    params = config.pop("rope_parameters")
    full = params.get("full_attention", params)
    config["rope_theta"] = full.pop("rope_theta")
    full.pop("partial_rotary_factor", None)
    if full.get("rope_type", "default") != "default":
        config["rope_scaling"] = full
    return config


def granite_hybrid_layers(config):
    """Granite 4.0's published configs list `attention` / `mamba` per layer (transformers 5
    saves its own names, `full_attention` / `linear_attention`)."""
    legacy = {"full_attention": "attention", "linear_attention": "mamba"}
    config["layer_types"] = [legacy.get(t, t) for t in config["layer_types"]]
    # transformers 5's own spelling of its infinite default, not a published key.
    config.pop("time_step_limit", None)
    return config


def exaone_keys(config):
    """EXAONE's published configs (its own code's names): `num_layers`, `layer_norm_epsilon`,
    `activation_function`."""
    for new, old in (("num_hidden_layers", "num_layers"), ("rms_norm_eps", "layer_norm_epsilon"), ("hidden_act", "activation_function")):
        config[old] = config.pop(new)
    config["architectures"] = ["ExaoneForCausalLM"]
    return config


def internlm3_keys(config):
    """InternLM3's published configs: its own bias keys (`qkv_bias`, `bias`), the legacy RoPE."""
    config = legacy_rope(config)
    config["qkv_bias"] = config.pop("attention_bias")
    config["bias"] = config.pop("mlp_bias")
    config["architectures"] = ["InternLM3ForCausalLM"]
    return config


def hunyuan_rope(config):
    """Hunyuan's published configs: top-level `rope_theta`, `rope_scaling` spelled with `type`
    and the YaRN-style keys its rotary embedding does not read, `use_qk_norm` and
    `attention_head_dim`."""
    params = config.pop("rope_parameters")
    config["rope_theta"] = params.pop("rope_theta")
    config["rope_scaling"] = {"alpha": params["alpha"], "beta_fast": 32, "beta_slow": 1, "factor": params["factor"], "mscale": 1.0, "mscale_all_dim": 1.0, "type": params["rope_type"]}
    config.update(use_qk_norm=True, use_rotary_pos_emb=True, attention_head_dim=config["head_dim"])
    return config


def neox_rope(config):
    """GPT-NeoX's published configs (Pythia): `rotary_pct` and `rotary_emb_base` at the top
    level, no `rope_parameters`."""
    params = config.pop("rope_parameters")
    config["rotary_emb_base"] = params["rope_theta"]
    config["rotary_pct"] = params["partial_rotary_factor"]
    # GPTNeoXConfig has no key/value head count (SMALL's is an unread extra here).
    config.pop("num_key_value_heads", None)
    return config


def partial_top_level(config):
    """GLM-4.5's published configs: `rope_theta` and `partial_rotary_factor` at the top level."""
    params = config.pop("rope_parameters")
    config["rope_theta"] = params.pop("rope_theta")
    config["partial_rotary_factor"] = params.pop("partial_rotary_factor")
    if params.get("rope_type", "default") != "default":
        config["rope_scaling"] = params
    return config


def dots1_legacy(config):
    """dots.llm1's published config: `rope_theta` at the top level, no `layer_types` (the
    sliding layers follow from `sliding_window` and `max_window_layers`)."""
    config = legacy_rope(config)
    config.pop("layer_types", None)
    return config


def exaone_moe_legacy(config):
    """EXAONE MoE as written without the derived lists: `rope_theta` at the top level, no
    `layer_types` (from `sliding_window_pattern`) or `mlp_layer_types` (from
    `first_k_dense_replace`)."""
    config = legacy_rope(config)
    config.pop("layer_types", None)
    config.pop("mlp_layer_types", None)
    return config


def hunyuan_moe_legacy(config):
    """Hunyuan-A13B's published config: HunYuan's RoPE spelling (`hunyuan_rope`) and the
    mixture's counts as per-layer lists (`moe_topk`, `moe_intermediate_size`,
    `num_shared_expert`), with `use_mixed_mlp_moe`."""
    config = hunyuan_rope(config)
    layers = config["num_hidden_layers"]
    config.update(moe_topk=[config["moe_topk"]] * layers, moe_intermediate_size=[config["intermediate_size"]] * layers,
                  num_shared_expert=[1] * layers, use_mixed_mlp_moe=True)
    return config


def minimax_m2_legacy(config):
    """MiniMax-M2's published config: `rope_theta` at the top level and the rotated dimensions as
    `rotary_dim` (no `partial_rotary_factor`)."""
    params = config.pop("rope_parameters")
    config["rope_theta"] = params["rope_theta"]
    config["rotary_dim"] = int(params["partial_rotary_factor"] * config["head_dim"])
    return config


def sarvam_legacy(config):
    """Sarvam-105B's original config (the remote code's): `num_experts` / `num_shared_experts`,
    `head_dim` as `kv_lora_rank + qk_rope_head_dim` (vLLM's MLA width), RoPE `deepseek_yarn` in
    `rope_scaling` with `rope_theta` at the top level."""
    params = config.pop("rope_parameters")
    config["rope_theta"] = params.pop("rope_theta")
    params.pop("rope_type")
    config["rope_scaling"] = {"type": "deepseek_yarn", **params}
    config["num_experts"] = config.pop("n_routed_experts")
    config["num_shared_experts"] = config.pop("n_shared_experts")
    config["head_dim"] = config["kv_lora_rank"] + config["qk_rope_head_dim"]
    return config


def bailing_keys(config, architecture):
    """Sarvam-MoE's and Param-2's original configs (Ling 2.0's spellings): `num_experts`,
    `num_shared_experts`, `use_qkv_bias`, the legacy RoPE keys."""
    config = legacy_rope(config)
    config["num_experts"] = config.pop("n_routed_experts")
    config["num_shared_experts"] = config.pop("n_shared_experts")
    config["use_qkv_bias"] = config.pop("attention_bias")
    config["architectures"] = [architecture]
    return config


FIXTURES_MADE_HERE = {
    # Arcee (AFM): Llama with a plain relu2 MLP.
    "tiny-arcee": dict(
        cls="Arcee", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=128, num_hidden_layers=2, rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=legacy_rope,
        exercises="plain MLP up -> relu2 -> down (Nemotron's), Llama attention",
    ),
    # Jais 2: Llama's attention with LayerNorms, a plain relu2 MLP, biases everywhere.
    "tiny-jais2": dict(
        cls="Jais2", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=128, num_hidden_layers=2, layer_norm_eps=1e-5, attention_bias=True, mlp_bias=True,
                  hidden_act="relu2", rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
        legacy=legacy_rope,
        exercises="Jais 2: LayerNorms with weight and bias (`layer_norm_eps`) before attention, before the MLP and at the end, a plain MLP up -> relu2 -> down, biases on q/k/v/o and the MLP (`attention_bias`, `mlp_bias`)",
    ),
    # Hy3 (Tencent): per-head q/k norms, a dense first layer, sigmoid experts chosen with a
    # bias, renormalized and scaled, beside an ungated shared MLP.
    "tiny-hy_v3": dict(
        cls="HYV3", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3, head_dim=16, num_experts=8,
                  num_experts_per_tok=2, num_shared_experts=1, router_scaling_factor=2.5, attention_bias=False, rms_norm_eps=1e-5,
                  mlp_layer_types=["dense", "sparse", "sparse"], rope_parameters={"rope_type": "default", "rope_theta": 11158840.0}),
        legacy=legacy_rope,
        tweak=lambda model: [layer.mlp.e_score_correction_bias.copy_(torch.randn(8) * 0.2) for layer in model.model.layers[1:]],
        exercises="Hy3: per-head q/k RMSNorms before RoPE, layer 0 dense by `mlp_layer_types`, layers 1-2 8 experts routed by sigmoid scores of an f32 router (`mlp.router.gate`) with `mlp.expert_bias` for the choice of the top 2, renormalized and scaled by `router_scaling_factor` 2.5, beside an ungated shared MLP (`mlp.shared_mlp`, one expert wide)",
    ),
    # Mellum: Qwen3-MoE's attention and experts, dense or sparse layers by `mlp_layer_types`,
    # windows by `layer_types`, a RoPE per layer type.
    "tiny-mellum": dict(
        cls="Mellum", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=4, head_dim=16, num_experts=8,
                  num_experts_per_tok=2, norm_topk_prob=True, sliding_window=4, rms_norm_eps=1e-6,
                  layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
                  mlp_layer_types=["dense", "sparse", "sparse", "sparse"],
                  rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 500000.0},
                                   "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
        legacy=lambda config: config,
        # Sharper router logits: at the init's scale two experts' scores nearly tie on two
        # prompt positions, and transformers' own f16 run picks the other one there.
        tweak=lambda model: [layer.mlp.gate.weight.mul_(4.0) for layer in model.model.layers[1:]],
        exercises="Mellum: per-head q/k RMSNorms, layers 0 and 2 sliding (window 4) by `layer_types` with RoPE base 10000, layers 1 and 3 full with base 500000 (`rope_parameters` per layer type), layer 0 dense and 1-3 sparse by `mlp_layer_types`, 8 experts top 2 by softmax, renormalized (`norm_topk_prob`)",
    ),
    # HyperCLOVA X SEED: Granite's multipliers, RMSNorms after attention and after the MLP
    # (`use_post_norm`), logits multiplied by `logits_scaling`, head_dim apart.
    "tiny-hyperclovax": dict(
        cls="HyperCLOVAX", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=2, head_dim=32, embedding_multiplier=2.0, residual_multiplier=0.5,
                  attention_multiplier=0.1, logits_scaling=0.25, use_post_norm=True, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=legacy_rope,
        exercises="HyperCLOVA X SEED: RMSNorms after attention (`post_norm1`) and after the MLP (`post_norm2`) before the residual multiplier 0.5 (`use_post_norm`), embeddings x2, attention scale 0.1 (`attention_multiplier`), logits multiplied by 0.25 (`logits_scaling`, which Granite divides by), head_dim 32 with hidden 64 and 4 heads",
    ),
    # Flint: Qwen3-MoE attention with sinks, RoPE on the sliding layers only, sigmoid experts
    # of an f32 router beside an ungated shared MLP, dense first layers; config.json without
    # `layer_types` and `mlp_only_layers`, so FlintConfig's own defaults decide them.
    "tiny-flint": dict(
        cls="Flint", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, moe_intermediate_size=32, shared_expert_intermediate_size=48, num_hidden_layers=6,
                  head_dim=16, num_experts=8, num_experts_per_tok=2, norm_topk_prob=True, sliding_window=4, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=lambda config: {k: v for k, v in legacy_rope(config).items() if k not in ("layer_types", "mlp_only_layers")},
        tweak=lambda model: [layer.mlp.gate.weight.mul_(4.0) for layer in model.model.layers[2:]],
        exercises="Flint: per-head q/k RMSNorms, attention sinks (`self_attn.softmax_offset`), layers 2-4 sliding (window 4, RoPE) and 0, 1, 5 full without RoPE by FlintConfig's pattern (no `layer_types` written), layers 0-1 dense by its `mlp_only_layers` default, 8 experts routed by sigmoid scores of an f32 router, top 2 renormalized, beside an ungated shared MLP (`mlp.shared_expert`, 48 wide)",
    ),
    # Kolibri 1: EXAONE 4's attention (per-head q/k norms, RoPE on the sliding layers only, every
    # fifth layer full), GLM-4's four norms, experts chosen by their logits plus a bias and
    # weighted by the sigmoid of the chosen logits, beside an ungated shared MLP.
    "tiny-kolibri1": dict(
        cls="Kolibri1", inputs="tiny-llama",
        args=dict(SMALL, moe_intermediate_size=32, shared_expert_intermediate_size=48, num_hidden_layers=5, head_dim=16,
                  num_experts=8, num_experts_per_tok=2, norm_topk_prob=True, sliding_window=4, rms_norm_eps=1e-6,
                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        legacy=lambda config: {k: v for k, v in legacy_rope(config).items() if k != "layer_types"},
        # A correction bias large enough to change the choice the logits alone would make, and
        # sharper router logits (at the init's scale transformers' own f16 run picks other
        # experts on near ties).
        tweak=lambda model: [(layer.mlp.gate.weight.mul_(4.0), layer.mlp.gate.e_score_correction_bias.copy_(torch.randn(8) * 2.0)) for layer in model.model.layers],
        exercises="Kolibri 1: per-head q/k RMSNorms, layers 0-3 sliding (window 4, RoPE) and layer 4 full (no RoPE) by Kolibri1Config's pattern (no `layer_types` written), norms before and after attention and around the MLP (`post_attn_norm`, `post_ffn_norm`), 8 experts in every layer chosen by their logits plus `e_score_correction_bias` (top 2) and weighted by the sigmoid of the chosen logits, renormalized (`norm_topk_prob`), beside an ungated shared MLP 48 wide",
    ),
    # Seed-OSS: q/k/v biases, no o_proj bias, head_dim apart from hidden / heads.
    "tiny-seed_oss": dict(
        cls="SeedOss", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=2, head_dim=32, attention_bias=True, attention_out_bias=False,
                  rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1e7}),
        legacy=legacy_rope,
        exercises="q/k/v biases without an o_proj bias (`attention_out_bias` false), head_dim 32 with hidden 64 and 4 heads",
    ),
    # OLMo 3: OLMo 2's blocks, three sliding layers then a full one, YaRN on the full layer only.
    "tiny-olmo3": dict(
        cls="Olmo3", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=4, sliding_window=4, rms_norm_eps=1e-6,
                  rope_parameters={"full_attention": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                                                      "attention_factor": 1.2, "beta_fast": 32.0, "beta_slow": 1.0, "rope_theta": 500000.0},
                                   "sliding_attention": {"rope_type": "default", "rope_theta": 500000.0}}),
        legacy=legacy_rope,
        exercises="sliding layers (window 4, every 4th layer full by `layer_types`), YaRN on the full layer only, the sliding layers unscaled at the same base",
    ),
    # Helium: RoPE on interleaved pairs, q/k/v biases, no o_proj bias (its o_proj is hidden x hidden).
    "tiny-helium": dict(
        cls="Helium", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=2, head_dim=16, attention_bias=True, rms_norm_eps=1e-8,
                  rope_parameters={"rope_type": "default", "rope_theta": 100000.0}),
        legacy=legacy_rope,
        exercises="RoPE on interleaved pairs (dims 2i and 2i+1), q/k/v biases without an o_proj bias, RMS epsilon 1e-8",
    ),
    # Cohere (Command R): parallel block under one bias-free LayerNorm, interleaved RoPE,
    # logits times logit_scale, tied head.
    "tiny-cohere": dict(
        cls="Cohere", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=2, attention_bias=True, logit_scale=0.125, layer_norm_eps=1e-5,
                  tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=legacy_rope,
        exercises="Cohere: attention and the MLP in parallel under one mean-centred LayerNorm without bias, RoPE on interleaved pairs, q/k/v/o biases, logits times `logit_scale` 0.125, tied head",
    ),
    # Cohere 2 (Command R7B): Cohere's block, three sliding layers then a full one, RoPE on the
    # sliding layers only.
    "tiny-cohere2": dict(
        cls="Cohere2", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=4, sliding_window=4, logit_scale=0.25, layer_norm_eps=1e-5,
                  tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 50000.0}),
        legacy=legacy_rope,
        exercises="Cohere 2: Cohere's parallel block, three sliding layers (window 4) then a full one, RoPE on the sliding layers only, logits times `logit_scale` 0.25",
    ),
    # StableLM: LayerNorms with bias, q/k/v biases, RoPE on a quarter of each head.
    "tiny-stablelm": dict(
        cls="StableLm", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=2, use_qkv_bias=True, layer_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}),
        legacy=legacy_rope,
        exercises="StableLM: LayerNorms with bias, q/k/v biases (`use_qkv_bias`) without an o_proj bias, RoPE on the first quarter of each head (the default `partial_rotary_factor`, left out of config.json)",
    ),
    # Command R+: Cohere's block with q/k LayerNorms whose weight is its own per head.
    "tiny-cohere-qknorm": dict(
        cls="Cohere", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=2, use_qk_norm=True, logit_scale=0.125, layer_norm_eps=1e-5,
                  tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 75000000.0}),
        legacy=legacy_rope,
        exercises="Command R+ (`use_qk_norm`): q and k each normalized over head_dim by a bias-free LayerNorm with a `[heads, head_dim]` weight (4 query, 2 key heads) before interleaved RoPE, no biases",
    ),
    # StableLM 2 12B: per-head q/k LayerNorms (one module per head) and the parallel residual.
    "tiny-stablelm2-12b": dict(
        cls="StableLm", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=2, use_qkv_bias=False, qk_layernorm=True, use_parallel_residual=True,
                  layer_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}),
        legacy=legacy_rope,
        exercises="StableLM 2 12B: `qk_layernorm` (q and k each by a bias-free LayerNorm of its own per head, `norms.{h}`, before partial RoPE) and `use_parallel_residual` (attention and the MLP from `input_layernorm`, `residual + attn + mlp`, no `post_attention_layernorm`)",
    ),
    # Ministral 3: Mistral's layers with YaRN (mscale / mscale_all_dim) and queries scaled by
    # position past `original_max_position_embeddings` (3 here, so the prompts reach 1 + 0.5 ln 3).
    "tiny-ministral3": dict(
        cls="Ministral3", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=2, head_dim=16, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 16.0, "original_max_position_embeddings": 3,
                                   "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.5}),
        # Published Ministral 3 configs (transformers 5) say `rope_parameters`, as saved.
        legacy=lambda config: config,
        exercises="Ministral 3: Mistral's layers, YaRN with `mscale` / `mscale_all_dim`, queries times `1 + 0.5 ln(1 + floor(position / 3))` (`llama_4_scaling_beta`, `original_max_position_embeddings` of `rope_parameters`)",
    ),
    # GraniteMoE: Granite's multipliers with a mixture of experts stored as two stacks.
    "tiny-granitemoe": dict(
        cls="GraniteMoe", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=32, num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2, rms_norm_eps=1e-6,
                  embedding_multiplier=2.0, residual_multiplier=0.5, attention_multiplier=0.125, logits_scaling=4.0,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=legacy_rope,
        exercises="GraniteMoE: Granite's embedding (2), residual (0.5) and attention (0.125) multipliers and `logits_scaling` (4); 4 experts, top 2, stored as `block_sparse_moe.input_linear` (gate then up) and `output_linear` stacks, router `block_sparse_moe.router.layer`, softmax over the chosen logits",
    ),
    # NanoChat: weightless RMSNorms (the embeddings normed too), RoPE turned the other way, then
    # weightless per-head q/k norms, a plain relu2 MLP, soft-capped logits.
    "tiny-nanochat": dict(
        cls="NanoChat", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=128, num_hidden_layers=2, rms_norm_eps=1e-6, final_logit_softcapping=15.0,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=lambda config: config,
        exercises="NanoChat: weightless RMSNorms before attention, before the MLP, at the end and on the embeddings before the first layer, RoPE turned the other way (`rotate_half` as (x2, -x1)), weightless per-head q/k RMSNorms after RoPE, a plain MLP fc1 -> relu2 -> fc2, logits soft-capped at 15 (`final_logit_softcapping`), GQA",
    ),
    # MiniCPM5-MoE: Llama attention with a per-head query gate from the query projection
    # (`q_gate_proj`: each head's query rows, then its gate rows), DeepSeek-V3's grouped sigmoid
    # mixture of an f32 router after a dense first layer (`first_k_dense_replace`, no
    # `mlp_layer_types` written), shared experts.
    "tiny-minicpm5_moe": dict(
        cls="MiniCPM5Moe", inputs="tiny-llama",
        # head_dim 32: the heads' width (128) is not the hidden size (64), as in the real model.
        args=dict(SMALL, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3, head_dim=32, n_routed_experts=8,
                  num_experts_per_tok=2, n_shared_experts=1, n_group=2, topk_group=1, routed_scaling_factor=2.5, norm_topk_prob=True,
                  rms_norm_eps=1e-6, first_k_dense_replace=1, rope_parameters={"rope_type": "default", "rope_theta": 5000000.0}),
        legacy=lambda config: {k: v for k, v in config.items() if k != "mlp_layer_types"} | {"first_k_dense_replace": 1},
        tweak=lambda model: [(layer.mlp.gate.weight.mul_(4.0), layer.mlp.gate.e_score_correction_bias.copy_(torch.randn(8) * 0.2)) for layer in model.model.layers[1:]],
        exercises="MiniCPM5-MoE: Llama attention whose query projection also gives a per-head gate (`self_attn.q_gate_proj`, each head's 32 query rows then its 32 gate rows; 4 heads of 32 against a hidden size of 64), the heads' output times sigmoid(gate) before o_proj; layer 0 dense (`first_k_dense_replace` 1, no `mlp_layer_types` written), layers 1-2 8 experts in 2 groups (top 1 group) routed by sigmoid scores of an f32 router plus `e_score_correction_bias`, top 2 renormalized and scaled by 2.5, beside a shared expert 32 wide",
    ),
    # GraniteSWA: Granite's multipliers with attention sinks, sliding windows (every fourth
    # layer full from layer 0: no `layer_types` written) and a RoPE base per layer (0: NoPE).
    "tiny-granite_swa": dict(
        cls="GraniteSWA", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=5, sliding_window=4, rms_norm_eps=1e-5,
                  embedding_multiplier=2.0, residual_multiplier=0.5, attention_multiplier=0.125, logits_scaling=4.0,
                  layer_rope_theta=[0, 10000.0, 10000.0, 10000.0, 500000.0],
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=lambda config: {k: v for k, v in config.items() if k != "layer_types"},
        exercises="GraniteSWA: Granite's multipliers (embeddings x2, residual 0.5, attention scale 0.125, logits / 4), a learnable sink per head (`self_attn.sinks`), layers 0 and 4 full and 1-3 sliding (window 4) by GraniteSWAConfig's default pattern (no `layer_types` written), RoPE bases per layer by `layer_rope_theta` [0, 1e4, 1e4, 1e4, 5e5]: layer 0 without RoPE, the sliding layers at 1e4, layer 4 at 5e5",
    ),
    # GraniteMoeSWA: GraniteMoeShared's experts and shared MLP with GraniteSWA's attention.
    "tiny-granitemoe_swa": dict(
        cls="GraniteMoeSWA", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=32, shared_intermediate_size=48, num_hidden_layers=4, num_local_experts=4, num_experts_per_tok=2,
                  sliding_window=4, rms_norm_eps=1e-6, embedding_multiplier=2.0, residual_multiplier=0.5, attention_multiplier=0.125,
                  logits_scaling=4.0, layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
                  layer_rope_theta=[10000.0, 0, 10000.0, 0], rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=lambda config: config,
        # Sharper router logits: at the init's scale two experts nearly tie on the left-padded
        # batch row, and an f16 build picks the other one there.
        tweak=lambda model: [layer.block_sparse_moe.router.weight.mul_(8.0) for layer in model.model.layers],
        exercises="GraniteMoeSWA: GraniteMoeShared's multipliers, 4 experts (top 2, softmax over the chosen logits) and shared MLP 48 wide, a learnable sink per head, layers 0 and 2 sliding (window 4, RoPE 1e4) and 1 and 3 full without RoPE (`layer_types`, `layer_rope_theta` [1e4, 0, 1e4, 0])",
    ),
    # GraniteMoeShared: GraniteMoE with a shared MLP (one gate/up projection) beside the experts.
    "tiny-granitemoeshared": dict(
        cls="GraniteMoeShared", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=32, shared_intermediate_size=48, num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2,
                  rms_norm_eps=1e-6, embedding_multiplier=2.0, residual_multiplier=0.5, attention_multiplier=0.125, logits_scaling=4.0,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=legacy_rope,
        exercises="GraniteMoeShared: GraniteMoE's multipliers and experts (4, top 2, softmax over the chosen logits) plus a shared MLP 48 wide (`shared_mlp.input_linear` gate rows then up rows, `output_linear`) added to the experts' output before the residual multiplier",
    ),
    # GraniteMoeHybrid (Granite 4.0) without Mamba2 layers: granite-4.0-micro's form (dense:
    # the shared MLP alone, RoPE), and a mixture beside the shared MLP without RoPE.
    "tiny-granitemoehybrid": dict(
        cls="GraniteMoeHybrid", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=64, shared_intermediate_size=96, num_hidden_layers=3, num_local_experts=0, num_experts_per_tok=0,
                  rms_norm_eps=1e-5, embedding_multiplier=2.0, residual_multiplier=0.5, attention_multiplier=0.125, logits_scaling=4.0,
                  layer_types=["attention"] * 3, position_embedding_type="rope",
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=lambda config: granite_hybrid_layers(legacy_rope(config)),
        exercises="GraniteMoeHybrid as granite-4.0-micro: every layer attention (`layer_types` `attention`), no experts (`num_local_experts` 0): each MLP the shared one (`shared_mlp.input_linear` gate rows then up rows, 96 wide by `shared_intermediate_size`, not the 64 of `intermediate_size`), RoPE by `position_embedding_type` `rope`, Granite's multipliers (embeddings x2, residual 0.5, attention scale 0.125, logits / 4)",
    ),
    "tiny-granitemoehybrid-moe": dict(
        cls="GraniteMoeHybrid", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=32, shared_intermediate_size=48, num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2,
                  rms_norm_eps=1e-6, embedding_multiplier=2.0, residual_multiplier=0.5, attention_multiplier=0.125, logits_scaling=4.0,
                  layer_types=["attention"] * 2, position_embedding_type=None,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=lambda config: granite_hybrid_layers(legacy_rope(config)),
        exercises="GraniteMoeHybrid without Mamba2 layers and without RoPE (`position_embedding_type` null): GraniteMoE's experts (4, top 2, softmax over the chosen logits) beside the shared MLP (48 wide), Granite's multipliers",
    ),
    # EXAONE 3 / 3.5: Llama under GPT-2-style weight and config names (transformers renames
    # them on load; the saved checkpoint keeps the published ones).
    "tiny-exaone": dict(
        cls="Exaone", model="LlamaForCausalLM", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=2, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "llama3", "rope_theta": 1000000.0, "factor": 8.0, "original_max_position_embeddings": 64,
                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0}),
        legacy=lambda config: exaone_keys(legacy_rope(config)),
        exercises="EXAONE 3.5: Llama's blocks under `transformer.h.{i}.attn.attention.*`, `ln_1` / `ln_2`, `mlp.c_fc_0` / `c_fc_1` / `c_proj`, `transformer.wte` / `ln_f`; config keys `num_layers`, `layer_norm_epsilon`, `activation_function` as published; Llama 3 RoPE scaling x8 over 64 positions at base 1e6",
    ),
    # InternLM3 and IQuestCoder: Llama under their own config classes' keys and defaults.
    "tiny-internlm3": dict(
        cls="InternLM3", model="LlamaForCausalLM", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=2, head_dim=32, attention_bias=True, mlp_bias=True, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "dynamic", "rope_theta": 50000000.0, "factor": 6.0}),
        legacy=internlm3_keys,
        exercises="InternLM3: Llama with q/k/v/o biases by `qkv_bias` and MLP biases by `bias` (its own keys), heads 32 wide over a 64-wide hidden size, dynamic NTK RoPE (`factor` 6, base 5e7: the default frequencies within the 256 positions)",
    ),
    "tiny-iquestcoder": dict(
        cls="IQuestCoder", model="LlamaForCausalLM", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=2, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
        legacy=lambda config: {k: v for k, v in legacy_rope(config).items() if k != "head_dim"} | {"architectures": ["IQuestCoderForCausalLM"]},
        exercises="IQuestCoder: Llama whose head is IQuestCoderConfig's default 128 wide (no `head_dim` written; hidden / heads would be 16), base 5e5",
    ),
    # OPT: learned positions read two rows on (`position_ids + 2`), LayerNorms, biased
    # projections, a plain ReLU MLP `fc1` / `fc2`, the head tied by default.
    "tiny-opt": dict(
        cls="OPT", inputs="tiny-llama",
        args=dict({k: v for k, v in SMALL.items() if k not in ("num_key_value_heads", "initializer_range")}, ffn_dim=128, num_hidden_layers=2,
                  tie_word_embeddings=True, init_std=0.2),
        legacy=lambda config: {k: v for k, v in config.items() if k != "tie_word_embeddings"},
        exercises="OPT: learned positions `model.decoder.embed_positions` read at `position_ids + 2` (its table holds two more rows), LayerNorms before attention (`self_attn_layer_norm`) and the MLP (`final_layer_norm`), q/k/v/o and MLP biases (`enable_bias`), a plain ReLU MLP `fc1` / `fc2` (`ffn_dim`), the head tied by OPTConfig's default (no `tie_word_embeddings` written)",
    ),
    # OPT-350m's shape: post-norm blocks and an embedding narrower than the hidden size.
    "tiny-opt-350m": dict(
        cls="OPT", inputs="tiny-llama",
        args=dict({k: v for k, v in SMALL.items() if k not in ("num_key_value_heads", "initializer_range")}, ffn_dim=128, num_hidden_layers=2,
                  tie_word_embeddings=True, init_std=0.2, do_layer_norm_before=False, word_embed_proj_dim=32),
        legacy=lambda config: {k: v for k, v in config.items() if k != "tie_word_embeddings"},
        exercises="OPT-350m's shape: post-norm blocks (`do_layer_norm_before` false: `self_attn_layer_norm` after the attention's residual add, `final_layer_norm` after the MLP's, no final LayerNorm), token embeddings 32 wide (`word_embed_proj_dim`) projected to the hidden size 64 by `project_in` before the learned positions are added and back by `project_out` before the tied head, OPT's biases and ReLU MLP",
    ),
    # OpenAI GPT (GPT-1): GPT-2's weights with post-norm blocks, no final norm, tanh GELU as `afn` "gelu".
    "tiny-openai-gpt": dict(
        cls="OpenAIGPT", model="OpenAIGPTLMHeadModel", inputs="tiny-llama", no_cache=True,
        args=dict(vocab_size=512, n_positions=256, n_embd=64, n_layer=2, n_head=4, afn="gelu", layer_norm_epsilon=1e-5, initializer_range=0.2),
        legacy=lambda config: config,
        exercises="OpenAI GPT (GPT-1): learned positions `positions_embed`, Conv1D weights, a fused biased `c_attn`, post-norm blocks (`ln_1(h + attn(h))`, `ln_2(h + mlp(h))`), no final norm, `afn` \"gelu\" (transformers' tanh form), the head tied; transformers runs it without a KV cache (the references' presents and decode step are computed from the whole sequence)",
    ),
    # Cohere2-MoE: Cohere 2's parallel block with a dense prefix and experts beside a shared one.
    "tiny-cohere2_moe": dict(
        cls="Cohere2Moe", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=64, num_hidden_layers=5, head_dim=16, sliding_window=4, sliding_window_pattern=4,
                  first_k_dense_replace=1, prefix_dense_sliding_window_pattern=1, prefix_dense_intermediate_size=96,
                  num_experts=4, num_experts_per_tok=2, num_shared_experts=1, shared_expert_combination_strategy="average",
                  logit_scale=0.25, tie_word_embeddings=True, layer_norm_eps=1e-5),
        legacy=lambda config: {k: v for k, v in config.items() if k not in ("layer_types", "mlp_layer_types")} | {"first_k_dense_replace": 1},
        exercises="Cohere2-MoE: Cohere 2's parallel block (one bias-free LayerNorm, interleaved RoPE, logits times `logit_scale`, tied head); layer 0 dense (`first_k_dense_replace`, `prefix_dense_intermediate_size` 96 wide) and full with RoPE forced (`prefix_dense_sliding_window_pattern` 1), layers 1-3 sliding (window 4) with RoPE and layer 4 full without, as Cohere2MoeConfig derives them (no `layer_types` or `mlp_layer_types` written); 4 experts 64 wide (saved per expert), softmax of the top 2 logits, one shared expert averaged with them (`shared_expert_combination_strategy`)",
    ),
    # Persimmon: GPT-NeoX's per-head fused q/k/v, shared per-head q/k LayerNorms, partial RoPE, relu2.
    "tiny-persimmon": dict(
        cls="Persimmon", inputs="tiny-llama",
        args=dict(vocab_size=512, hidden_size=64, num_attention_heads=4, num_hidden_layers=2, intermediate_size=128,
                  max_position_embeddings=256, rope_parameters={"rope_type": "default", "rope_theta": 25000.0, "partial_rotary_factor": 0.5},
                  bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.2),
        legacy=lambda config: {k: v for k, v in config.items() if k not in ("rope_parameters", "qk_layernorm")} | {"rope_theta": 25000.0, "partial_rotary_factor": 0.5},
        exercises="Persimmon: q/k/v in one biased `query_key_value` laid out per head `[q | k | v]`, q and k each by a LayerNorm over the head (weight and bias shared by the heads; `qk_layernorm`, PersimmonConfig's default: not written), rotate-half RoPE on half of each head (`partial_rotary_factor` 0.5, base 25000 as published at the top level), LayerNorms with bias, a biased `dense`, a plain biased relu2 MLP `dense_h_to_4h` / `dense_4h_to_h`, an untied head",
    ),
    # XGLM: OPT's block with fairseq's fixed sinusoidal positions and scaled embeddings.
    "tiny-xglm": dict(
        cls="XGLM", inputs="tiny-llama",
        args=dict(vocab_size=512, d_model=64, attention_heads=4, num_layers=2, ffn_dim=128, max_position_embeddings=256,
                  activation_function="gelu", scale_embedding=True, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                  init_std=0.2, tie_word_embeddings=True),
        legacy=lambda config: {k: v for k, v in config.items() if k not in ("tie_word_embeddings", "scale_embedding")},
        exercises="XGLM: fairseq's sinusoidal positions (computed, no tensor) read at `position_ids + 2`, token embeddings times sqrt(`d_model`) (`scale_embedding`, XGLMConfig's default: not written), LayerNorms at torch's epsilon 1e-5, q/k/v/o and MLP biases, an exact-GELU MLP `fc1` / `fc2` (`ffn_dim`), the head tied by XGLMConfig's default (not written); config keys `d_model`, `num_layers`, `attention_heads`",
    ),
    # BioGPT: OPT's block under `biogpt.` with scaled embeddings, exact GELU and `output_projection`.
    "tiny-biogpt": dict(
        cls="BioGpt", inputs="tiny-llama",
        args=dict({k: v for k, v in SMALL.items() if k != "num_key_value_heads"}, intermediate_size=128, num_hidden_layers=2,
                  tie_word_embeddings=True, hidden_act="gelu", layer_norm_eps=1e-12, scale_embedding=True),
        legacy=lambda config: {k: v for k, v in config.items() if k not in ("tie_word_embeddings", "scale_embedding")},
        exercises="BioGPT: learned positions `biogpt.embed_positions` read at `position_ids + 2`, token embeddings times sqrt(hidden) (`scale_embedding`, BioGptConfig's default: not written), LayerNorms at torch's epsilon 1e-5 whatever `layer_norm_eps` says (1e-12 here), q/k/v/o and MLP biases, an exact-GELU MLP `fc1` / `fc2`, the head `output_projection` tied by BioGptConfig's default (not written)",
    ),
    # GPT-Neo: unscaled attention scores, global and local (windowed) layers, learned positions.
    "tiny-gpt_neo": dict(
        cls="GPTNeo", inputs="tiny-llama",
        args=dict(vocab_size=512, hidden_size=64, num_heads=4, num_layers=3, max_position_embeddings=256, window_size=4, intermediate_size=None,
                  attention_types=[[["global", "local", "local"], 1]], bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.2),
        legacy=lambda config: config,
        exercises="GPT-Neo: layer 0 global and layers 1-2 local with a window of 4 keys (`attention_types`, `window_size`), attention scores never scaled, q/k/v without biases and a biased `out_proj`, learned positions, LayerNorms, a plain biased tanh-GELU MLP 4 x hidden wide (`intermediate_size` null), the head tied",
    ),
    # BLOOM: ALiBi (six heads: the slopes past the power of two), the embedding LayerNorm.
    "tiny-bloom": dict(
        cls="Bloom", inputs="tiny-llama",
        args=dict(vocab_size=512, hidden_size=96, n_head=6, n_layer=2, layer_norm_epsilon=1e-5,
                  bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.2),
        legacy=lambda config: {k: v for k, v in config.items() if k not in ("tie_word_embeddings", "hidden_size")} | {"n_embed": config["hidden_size"]},
        exercises="BLOOM: ALiBi over six heads (four slopes of the power of two, then two odd powers of the next base; positions counted over the kept keys, so left and right padding move them), a LayerNorm on the word embeddings, `query_key_value` laid out per head, biases everywhere, a tanh-GELU MLP 4 x hidden wide, the head tied by BloomConfig's default (not written); the width as `n_embed`, as the 176B's config writes it",
    ),
    # MPT: its ALiBi (six heads: the interleaved slopes), clip_qkv and softmax_scale nested in attn_config.
    "tiny-mpt": dict(
        cls="Mpt", inputs="tiny-llama",
        args=dict(vocab_size=512, d_model=96, n_heads=6, n_layers=2, max_seq_len=256, layer_norm_epsilon=1e-5,
                  attn_config={"softmax_scale": 0.2, "clip_qkv": 1.5}, bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.2),
        legacy=lambda config: {k: v for k, v in config.items() if k != "tie_word_embeddings"} | {"attn_config": {
            k: v for k, v in config["attn_config"].items() if k in ("alibi", "alibi_bias_max", "attn_impl", "attn_pdrop", "attn_type", "attn_uses_sequence_id", "clip_qkv", "prefix_lm", "qk_ln", "softmax_scale")}},
        exercises="MPT: its ALiBi over six heads (the slopes of the next power of two, odd entries then even; `key slot - last slot` positions), q/k/v stacked in one `attn.Wqkv` clamped to 1.5 and scores scaled by 0.2 (`attn_config.clip_qkv`, `attn_config.softmax_scale`, nested as published), LayerNorms without bias, an exact-GELU MLP 4 x hidden wide, no biases, the head tied by MptConfig's default (not written); config keys `d_model`, `n_heads`, `n_layers`, `max_seq_len`",
    ),
    # DBRX: attn_config / ffn_config nested as published, the experts' rows in three parameters.
    "tiny-dbrx": dict(
        cls="Dbrx", inputs="tiny-llama",
        args=dict(vocab_size=512, d_model=64, n_heads=4, n_layers=2, max_seq_len=256,
                  attn_config={"kv_n_heads": 2, "clip_qkv": 1.5, "rope_theta": 500000.0},
                  ffn_config={"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2},
                  rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
                  bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.2),
        legacy=lambda config: config | {
            "attn_config": {k: v for k, v in config["attn_config"].items() if k in ("attn_pdrop", "clip_qkv", "kv_n_heads", "rope_theta")},
            "ffn_config": {k: v for k, v in config["ffn_config"].items() if k in ("ffn_act_fn", "ffn_hidden_size", "moe_jitter_eps", "moe_loss_weight", "moe_normalize_expert_weights", "moe_num_experts", "moe_top_k")}},
        exercises="DBRX: q/k/v stacked in one `Wqkv` with 2 key/value heads of 4 (`attn_config.kv_n_heads`), clamped to 1.5 (`attn_config.clip_qkv`), RoPE at 500000 (top-level `rope_parameters`, as transformers 5.25 reads it, and `attn_config.rope_theta`, as published), bias-free LayerNorms, in every layer 4 SiLU-gated experts of 32 (`ffn_config`), top 2 renormalized (`moe_normalize_expert_weights` 1, the class default), their rows in `ffn.experts.mlp.w1` / `v1` / `w2` ([4 x 32, 64] each, `w2` per expert [in, out]), an untied head",
    ),
    # HunYuan dense: per-head q/k RMSNorms after RoPE, NTK-alpha RoPE (`dynamic` with `alpha`).
    "tiny-hunyuan_v1_dense": dict(
        cls="HunYuanDenseV1", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=2, head_dim=16, attention_bias=True, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "alpha": 1000.0, "factor": 1.0}),
        legacy=hunyuan_rope,
        exercises="HunYuan dense: per-head q/k RMSNorms (`query_layernorm` / `key_layernorm`) on the rotated q and k, q/k/v/o biases, `rope_scaling` `dynamic` with `alpha` 1000 (the base stretched to theta * alpha^(16/14))",
    ),
    # GPT-NeoX: per-head fused q/k/v, partial rotary, the parallel block with two norms, and
    # its sequential form.
    "tiny-gpt_neox": dict(
        cls="GPTNeoX", inputs="tiny-llama",
        args=dict(SMALL, num_key_value_heads=4, intermediate_size=128, num_hidden_layers=2, layer_norm_eps=1e-5, use_parallel_residual=True,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}),
        legacy=neox_rope,
        exercises="GPT-NeoX: `query_key_value` laid out per head, biases, LayerNorms with bias, exact-GELU plain MLP, RoPE on a quarter of each head (`rotary_pct`, `rotary_emb_base` as published), attention and the MLP in parallel from their own norms, head `embed_out`",
    ),
    "tiny-gpt_neox-sequential": dict(
        cls="GPTNeoX", inputs="tiny-llama",
        args=dict(SMALL, num_key_value_heads=4, intermediate_size=128, num_hidden_layers=2, layer_norm_eps=1e-5, use_parallel_residual=False, attention_bias=False,
                  rope_parameters={"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.5}),
        legacy=neox_rope,
        exercises="GPT-NeoX with `use_parallel_residual` false (attention, residual, then the MLP on `post_attention_layernorm`), no attention biases (`attention_bias` false), half of each head rotated at base 500",
    ),
    # Apertus: xIELU plain MLP with learned scalars, per-head q/k norms, Llama 3 RoPE.
    "tiny-apertus": dict(
        cls="Apertus", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=128, num_hidden_layers=2, rms_norm_eps=1e-5, hidden_act="xielu",
                  rope_parameters={"rope_type": "llama3", "rope_theta": 12000000.0, "factor": 8.0, "original_max_position_embeddings": 64,
                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0}),
        legacy=legacy_rope,
        # xIELU's `beta` and `eps` are buffers (saved, not parameters): moved off their defaults
        # per layer, so a build that assumed them would miss.
        tweak=lambda model: [(layer.mlp.act_fn.beta.fill_(0.4 + 0.2 * i), layer.mlp.act_fn.eps.fill_(-0.05 * (i + 1))) for i, layer in enumerate(model.model.layers)],
        exercises="Apertus: xIELU MLP (`mlp.act_fn.alpha_p` / `alpha_n` perturbed, `beta` 0.4 / 0.6 and `eps` -0.05 / -0.1 by layer), per-head q/k RMSNorms, `attention_layernorm` / `feedforward_layernorm`, Llama 3 RoPE",
    ),
    # Ministral 3 as published: a vision-language checkpoint (Mistral3ForConditionalGeneration,
    # a Pixtral tower) whose text model is the Ministral 3 decoder; the references are its text
    # path (input_ids, no image), what a `--text-only` build must reproduce.
    "tiny-mistral3": dict(
        cls="Ministral3", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=2, head_dim=16, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 16.0, "original_max_position_embeddings": 4,
                                   "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.25}),
        composite=dict(cls="Mistral3", model="Mistral3ForConditionalGeneration", vision_cls="PixtralVision",
                       vision=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, head_dim=16,
                                   image_size=64, patch_size=8),
                       top=dict(image_token_index=10, spatial_merge_size=2, tie_word_embeddings=False)),
        legacy=lambda config: config,
        exercises="Mistral 3 (Ministral 3 3B/8B/14B, Mistral Small 3.x) as published: `text_config` (ministral3: YaRN, queries scaled by position, `llama_4_scaling_beta` 0.25 over 4) beside a Pixtral `vision_config`; saved by transformers 5.25 with the text tensors under `language_model.model.`, head `language_model.lm_head`, the tower and projector (`vision_tower.`, `multi_modal_projector.`) unread by a `--text-only` build",
    ),
    # DeepSeek-V3: multi-head latent attention (q and kv low-rank, a shared rotary key, values
    # narrower than keys), interleaved RoPE with YaRN's mscale in the softmax scale, and a
    # mixture of experts routed by sigmoid scores with a correction bias over groups, a
    # shared expert and dense first layers.
    "tiny-deepseek_v3": dict(
        cls="DeepseekV3", inputs="tiny-llama",
        args=dict(SMALL, num_key_value_heads=4, intermediate_size=96, num_hidden_layers=3, rms_norm_eps=1e-6,
                  q_lora_rank=32, kv_lora_rank=24, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
                  n_routed_experts=8, n_shared_experts=1, moe_intermediate_size=32, num_experts_per_tok=2, n_group=4, topk_group=2,
                  first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True, rope_interleave=True,
                  rope_parameters=dict(DEEPSEEK_YARN)),
        legacy=legacy_rope,
        # The correction bias is a buffer (saved, not a parameter): moved off zero, so routing
        # that ignored it would pick other experts.
        tweak=lambda model: [layer.mlp.gate.e_score_correction_bias.copy_(torch.randn(8) * 0.2) for layer in model.model.layers[1:]],
        exercises="DeepSeek-V3: MLA (`q_lora_rank` 32, `kv_lora_rank` 24, nope 16 + rope 8 key dims, `v_head_dim` 12), interleaved RoPE (`rope_interleave`) with YaRN x4 and `mscale_all_dim` in the softmax scale; layer 0 dense (`first_k_dense_replace` 1), layers 1-2 8 experts top 2 by sigmoid scores plus `e_score_correction_bias` over 4 groups keeping 2 (`n_group`, `topk_group`), `norm_topk_prob`, `routed_scaling_factor` 2.5, one shared expert",
    ),
    # A.X K1: DeepSeek-V3's attention and grouped experts with an RMSNorm on the MoE block's
    # output (sparse layers only); its released checkpoints route without a correction bias (left
    # at zero here: a test builds the file without it).
    "tiny-axk1": dict(
        cls="AXK1", inputs="tiny-llama",
        args=dict(SMALL, num_key_value_heads=4, intermediate_size=96, num_hidden_layers=3, rms_norm_eps=1e-6,
                  q_lora_rank=32, kv_lora_rank=24, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
                  n_routed_experts=8, n_shared_experts=1, moe_intermediate_size=32, num_experts_per_tok=2, n_group=4, topk_group=2,
                  routed_scaling_factor=2.5, norm_topk_prob=True, rope_interleave=True, mlp_layer_types=["dense", "sparse", "sparse"],
                  rope_parameters=dict(DEEPSEEK_YARN)),
        legacy=legacy_rope,
        exercises="A.X K1: DeepSeek-V3's MLA (`q_lora_rank` 32, `kv_lora_rank` 24, nope 16 + rope 8, `v_head_dim` 12, interleaved YaRN RoPE), layer 0 dense and 1-2 sparse (`mlp_layer_types`), 8 experts top 2 by sigmoid scores over 4 groups keeping 2, one shared expert, and `post_mlp_layernorm` on the sparse layers' MoE output before the residual add; the correction bias zero",
    ),
    # MiniCPM3: Llama's blocks with DeepSeek-V2's latent attention (rotate-half RoPE, LongRoPE as
    # published), embeddings x `scale_emb`, residual branches x scale_depth / sqrt(layers),
    # logits / (hidden / dim_model_base); `v_head_dim` left to its derivation (hidden / heads).
    "tiny-minicpm3": dict(
        cls="MiniCPM3", inputs="tiny-llama",
        args=dict(SMALL, num_key_value_heads=4, intermediate_size=96, num_hidden_layers=3, rms_norm_eps=1e-5,
                  q_lora_rank=32, kv_lora_rank=24, qk_nope_head_dim=16, qk_rope_head_dim=8, scale_emb=12, scale_depth=1.4,
                  dim_model_base=16, tie_word_embeddings=True,
                  rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "original_max_position_embeddings": 64,
                                   "short_factor": [1.0, 1.1, 1.3, 1.6], "long_factor": [1.2, 1.5, 2.0, 3.0]}),
        legacy=lambda config: {k: v for k, v in legacy_rope(config).items() if k not in ("v_head_dim", "head_dim", "qk_head_dim")},
        exercises="MiniCPM3: MLA (`q_lora_rank` 32, `kv_lora_rank` 24, nope 16 + rope 8, `v_head_dim` derived 16) with rotate-half LongRoPE (original 64 of 256 positions), embeddings x12 (`scale_emb`), each block's output x 1.4 / sqrt(3) (`scale_depth`), logits / (64 / 16) (`dim_model_base`), tied head",
    ),
    # DeepSeek-V2-Lite's shapes in the V3 family: no query compression (`q_lora_rank` null:
    # one `q_proj`), one group, RoPE on rotate-half pairs, plain RoPE, unnormalized weights.
    "tiny-deepseek_v3-lite": dict(
        cls="DeepseekV3", inputs="tiny-llama",
        args=dict(SMALL, num_key_value_heads=4, intermediate_size=96, num_hidden_layers=2, rms_norm_eps=1e-6,
                  q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=16, v_head_dim=16,
                  n_routed_experts=4, n_shared_experts=2, moe_intermediate_size=16, num_experts_per_tok=2, n_group=1, topk_group=1,
                  first_k_dense_replace=0, routed_scaling_factor=1.5, norm_topk_prob=False, rope_interleave=False,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=legacy_rope,
        tweak=lambda model: [layer.mlp.gate.e_score_correction_bias.copy_(torch.randn(4) * 0.2) for layer in model.model.layers],
        exercises="DeepSeek-V3 without query compression (`q_lora_rank` null: `q_proj`), rope 16 of 32 key dims on rotate-half pairs (`rope_interleave` false), `v_head_dim` 16, default RoPE; every layer sparse (`first_k_dense_replace` 0): 4 experts top 2 in one group, weights unnormalized (`norm_topk_prob` false) times 1.5, two shared experts' width",
    ),
    # DeepSeek-V2: V3's latent attention with RoPE on interleaved pairs as stored, softmax
    # routing limited to the best groups (a group scored by its best expert), unnormalized
    # weights times `routed_scaling_factor`.
    "tiny-deepseek_v2": dict(
        cls="DeepseekV2", inputs="tiny-llama",
        args=dict(SMALL, num_key_value_heads=4, intermediate_size=96, num_hidden_layers=3, rms_norm_eps=1e-6,
                  q_lora_rank=None, kv_lora_rank=24, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
                  n_routed_experts=8, n_shared_experts=2, moe_intermediate_size=16, num_experts_per_tok=2, n_group=2, topk_group=1,
                  topk_method="group_limited_greedy", first_k_dense_replace=1, routed_scaling_factor=1.5, norm_topk_prob=False,
                  rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64,
                                   "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 0.707, "mscale_all_dim": 0.707}),
        legacy=legacy_rope,
        exercises="DeepSeek-V2 (V2-Lite's `q_proj`): MLA (`kv_lora_rank` 24, nope 16 + rope 8, `v_head_dim` 12) with RoPE on interleaved pairs as stored, YaRN x4 with `mscale` / `mscale_all_dim` 0.707; layer 0 dense, layers 1-2 8 experts top 2 by softmax limited to the best of 2 groups (`topk_method` `group_limited_greedy`, a group scored by its best expert), unnormalized weights times 1.5, two shared experts' width",
    ),
    # GLM-4.5: Llama attention with q/k/v biases, per-head q/k norms (`use_qk_norm`), half the
    # head rotated, and DeepSeek-V3's grouped sigmoid routing.
    "tiny-glm4_moe": dict(
        cls="Glm4Moe", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=3, head_dim=16, rms_norm_eps=1e-5, attention_bias=True, use_qk_norm=True,
                  n_routed_experts=8, n_shared_experts=1, moe_intermediate_size=32, num_experts_per_tok=2, n_group=2, topk_group=1,
                  first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True,
                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": 0.5}),
        legacy=partial_top_level,
        tweak=lambda model: [layer.mlp.gate.e_score_correction_bias.copy_(torch.randn(8) * 0.2) for layer in model.model.layers[1:]],
        exercises="GLM-4.5: q/k/v biases (`attention_bias`), no o_proj bias, per-head q/k RMSNorms (`use_qk_norm`), RoPE on the first half of each head (`partial_rotary_factor` 0.5 at the top level, as published); layer 0 dense, layers 1-2 8 experts top 2 by sigmoid scores plus `e_score_correction_bias` in the better of 2 groups, `norm_topk_prob`, `routed_scaling_factor` 2.5, one shared expert",
    ),
    # Sarvam-30B and Param-2 (`sarvam_moe`, `param2moe`; transformers builds both as GLM-4.5's
    # MoE): the original checkpoints' names (fused `query_key_value`, `dense`, per-expert
    # modules) and config spellings, RoPE over the whole head by their config classes' default.
    "tiny-sarvam_moe": dict(
        cls="SarvamMoE", model="Glm4MoeForCausalLM", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=3, head_dim=16, rms_norm_eps=1e-6, attention_bias=True, use_qk_norm=True,
                  n_routed_experts=8, n_shared_experts=1, moe_intermediate_size=32, num_experts_per_tok=2, n_group=2, topk_group=1,
                  first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True,
                  rope_parameters={"rope_type": "default", "rope_theta": 8000000.0}),
        legacy=lambda config: bailing_keys(config, "SarvamMoEForCausalLM"),
        tweak=lambda model: [layer.mlp.gate.e_score_correction_bias.copy_(torch.randn(8) * 0.2) for layer in model.model.layers[1:]],
        exercises="Sarvam-30B (`sarvam_moe`, built by transformers as GLM-4.5's MoE) under its original names: `model.word_embeddings`, q/k/v in one `attention.query_key_value` (GQA rows q, k, v) with biases (`use_qkv_bias`), `attention.dense`, per-head `query_layernorm` / `key_layernorm`, per-expert `mlp.experts.{e}.*`, the correction `mlp.gate.expert_bias`; `num_experts` / `num_shared_experts` as published; RoPE over the whole head (no `partial_rotary_factor`: SarvamMoEConfig's 1.0, not GLM-4.5's 0.5); layer 0 dense, 8 experts top 2 in the better of 2 groups, `routed_scaling_factor` 2.5",
    ),
    "tiny-param2moe": dict(
        cls="Param2Moe", model="Glm4MoeForCausalLM", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=3, head_dim=16, rms_norm_eps=1e-6, attention_bias=False, use_qk_norm=True,
                  n_routed_experts=8, n_shared_experts=2, moe_intermediate_size=32, num_experts_per_tok=2, n_group=1, topk_group=1,
                  first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True, tie_word_embeddings=True,
                  rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
        legacy=lambda config: {k: v for k, v in bailing_keys(config, "Param2MoeForCausalLM").items() if k != "tie_word_embeddings"},
        tweak=lambda model: [layer.mlp.gate.e_score_correction_bias.copy_(torch.randn(8) * 0.2) for layer in model.model.layers[1:]],
        exercises="Param-2 (`param2moe`, built as GLM-4.5's MoE) under Sarvam-MoE's original names: no q/k/v biases, two shared experts, the head tied by Param2MoeConfig's default (no `tie_word_embeddings` written), RoPE over the whole head at 5e5",
    ),
    # dots.llm1: Qwen3's attention (q/k norms, windows from `max_window_layers`) with
    # DeepSeek-V3's mixture.
    "tiny-dots1": dict(
        cls="Dots1", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=3, rms_norm_eps=1e-5,
                  n_routed_experts=8, n_shared_experts=2, moe_intermediate_size=32, num_experts_per_tok=3, n_group=4, topk_group=2,
                  first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True, sliding_window=4, max_window_layers=2,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000000.0}),
        legacy=dots1_legacy,
        tweak=lambda model: [layer.mlp.gate.e_score_correction_bias.copy_(torch.randn(8) * 0.2) for layer in model.model.layers[1:]],
        exercises="dots.llm1: Qwen3's attention (GQA 4/2, per-head q/k RMSNorms), layer 2 sliding with a window of 4 (`sliding_window`, `max_window_layers` 2, no `layer_types`: derived as Dots1Config does); layer 0 dense, layers 1-2 8 experts top 3 by sigmoid scores plus `e_score_correction_bias` over 4 groups keeping 2, `norm_topk_prob`, `routed_scaling_factor` 2.5, two shared experts' width",
    ),
    # Solar Open: Llama's attention with the GLM-4.5 mixture in every layer.
    "tiny-solar_open": dict(
        cls="SolarOpen", inputs="tiny-llama",
        args=dict(SMALL, head_dim=16, num_hidden_layers=2, rms_norm_eps=1e-5, attention_bias=True,
                  n_routed_experts=8, n_shared_experts=1, moe_intermediate_size=32, num_experts_per_tok=2, n_group=2, topk_group=1,
                  routed_scaling_factor=1.5, norm_topk_prob=True, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        legacy=legacy_rope,
        tweak=lambda model: [layer.mlp.gate.e_score_correction_bias.copy_(torch.randn(8) * 0.2) for layer in model.model.layers],
        exercises="Solar Open: Llama's attention with q/k/v biases (`attention_bias`), none on o_proj; both layers sparse, 8 experts top 2 by sigmoid scores plus `e_score_correction_bias` in the better of 2 groups, `norm_topk_prob`, `routed_scaling_factor` 1.5, one shared expert",
    ),
    # EXAONE MoE: EXAONE 4's hybrid attention in pre-norm blocks with DeepSeek-V3's mixture.
    "tiny-exaone_moe": dict(
        cls="ExaoneMoe", inputs="tiny-llama",
        args=dict(SMALL, head_dim=16, intermediate_size=96, num_hidden_layers=4, rms_norm_eps=1e-5, sliding_window=4, sliding_window_pattern=4,
                  num_experts=8, num_shared_experts=1, moe_intermediate_size=32, num_experts_per_tok=2, n_group=2, topk_group=1,
                  first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        legacy=exaone_moe_legacy,
        tweak=lambda model: [layer.mlp.gate.e_score_correction_bias.copy_(torch.randn(8) * 0.2) for layer in model.model.layers[1:]],
        exercises="EXAONE MoE: per-head q/k RMSNorms, layers 0-2 sliding (window 4, RoPE) and layer 3 full without RoPE (`sliding_window_pattern` 4, no `layer_types`); pre-norm blocks; layer 0 dense (`first_k_dense_replace` 1, no `mlp_layer_types`), layers 1-3 8 experts (`num_experts`) top 2 by sigmoid scores plus `e_score_correction_bias` in the better of 2 groups, `routed_scaling_factor` 2.5, one shared expert (`num_shared_experts`)",
    ),
    # HunYuan MoE (Hunyuan-A13B): HunYuan dense's attention with a softmax top-k mixture and a
    # shared MLP in every layer.
    "tiny-hunyuan_v1_moe": dict(
        cls="HunYuanMoEV1", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=32, num_hidden_layers=2, head_dim=16, attention_bias=True, rms_norm_eps=1e-5,
                  num_experts=8, moe_topk=2,
                  rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "alpha": 1000.0, "factor": 1.0}),
        legacy=hunyuan_moe_legacy,
        exercises="HunYuan MoE: HunYuan dense's attention (q/k RMSNorms on the rotated q and k, q/k/v/o biases, `alpha` NTK RoPE); both layers 8 experts (`num_experts`) of `intermediate_size` top 2 by a renormalized softmax of the f32 router `mlp.gate.wg` plus the shared MLP; `moe_topk`, `moe_intermediate_size` and `num_shared_expert` written as per-layer lists, as Hunyuan-A13B publishes them",
    ),
    # Sarvam-105B: DeepSeek-V3's model under SarvamMLAConfig, written in its original spelling.
    "tiny-sarvam_mla": dict(
        cls="SarvamMLA", model="DeepseekV3ForCausalLM", inputs="tiny-llama",
        args=dict(SMALL, num_key_value_heads=4, intermediate_size=96, num_hidden_layers=3, rms_norm_eps=1e-6,
                  kv_lora_rank=24, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
                  n_routed_experts=8, n_shared_experts=1, moe_intermediate_size=32, num_experts_per_tok=2,
                  routed_scaling_factor=2.5, norm_topk_prob=True, rope_interleave=True,
                  rope_parameters=dict(DEEPSEEK_YARN)),
        legacy=sarvam_legacy,
        tweak=lambda model: [layer.mlp.gate.e_score_correction_bias.copy_(torch.randn(8) * 0.2) for layer in model.model.layers[1:]],
        exercises="Sarvam-105B (`sarvam_mla`, built by transformers as DeepSeek-V3): SarvamMLAConfig's defaults for what the config leaves out (no query compression, one group, layer 0 dense), written as the original config: `num_experts`, `num_shared_experts`, `head_dim` 32 (the latent plus rope, read as nothing), RoPE `deepseek_yarn` x4 with `mscale_all_dim`; layers 1-2 8 experts top 2 by sigmoid scores plus the correction, `routed_scaling_factor` 2.5",
    ),
    # FlexOlmo: OLMo 2's blocks with OLMoE's mixture.
    "tiny-flex_olmo": dict(
        cls="FlexOlmo", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=32, num_hidden_layers=2, rms_norm_eps=1e-6, num_experts=7, num_experts_per_tok=3,
                  norm_topk_prob=False, rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
        legacy=legacy_rope,
        exercises="FlexOlmo: OLMo 2's blocks (norms after attention and after the MLP, q/k RMSNorms over the whole projections, GQA 4/2) with 7 experts (`num_experts`) top 3 by softmax, not renormalized (`norm_topk_prob` false), in both layers",
    ),
    # GLM-4.7-Flash: DeepSeek-V3's latent attention with the GLM-4.5 mixture, dense and sparse
    # layers as `mlp_layer_types` lists them.
    "tiny-glm4_moe_lite": dict(
        cls="Glm4MoeLite", inputs="tiny-llama",
        args=dict(SMALL, num_key_value_heads=4, intermediate_size=96, num_hidden_layers=3, rms_norm_eps=1e-5,
                  q_lora_rank=32, kv_lora_rank=24, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
                  n_routed_experts=8, n_shared_experts=1, moe_intermediate_size=32, num_experts_per_tok=2, n_group=1, topk_group=1,
                  mlp_layer_types=["sparse", "dense", "sparse"], routed_scaling_factor=1.8, norm_topk_prob=True, rope_interleave=True,
                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        legacy=legacy_rope,
        tweak=lambda model: [layer.mlp.gate.e_score_correction_bias.copy_(torch.randn(8) * 0.2) for i, layer in enumerate(model.model.layers) if i != 1],
        exercises="GLM-4.7-Flash: MLA (`q_lora_rank` 32, `kv_lora_rank` 24, nope 16 + rope 8, `v_head_dim` 12, interleaved RoPE rows), `mlp_layer_types` sparse/dense/sparse, 8 experts top 2 by sigmoid scores plus `e_score_correction_bias`, `routed_scaling_factor` 1.8, one shared expert",
    ),
    # Mistral 4: DeepSeek-V3's latent attention with the queries scaled by position, softmax
    # routing over groups scored by their best two.
    "tiny-mistral4": dict(
        cls="Mistral4", inputs="tiny-llama",
        args=dict(SMALL, num_key_value_heads=4, intermediate_size=96, num_hidden_layers=3, rms_norm_eps=1e-6,
                  q_lora_rank=32, kv_lora_rank=24, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12,
                  n_routed_experts=8, n_shared_experts=1, moe_intermediate_size=32, num_experts_per_tok=2, n_group=4, topk_group=2,
                  first_k_dense_replace=1, routed_scaling_factor=1.5, norm_topk_prob=True, rope_interleave=True,
                  rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 16.0, "original_max_position_embeddings": 4,
                                   "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.25}),
        # Published Mistral 4 configs (transformers 5) say `rope_parameters`, as saved.
        legacy=lambda config: config,
        exercises="Mistral 4: MLA (`q_lora_rank` 32, `kv_lora_rank` 24, nope 8 + rope 8, `v_head_dim` 12, interleaved RoPE rows), YaRN x16 with `mscale_all_dim` in the softmax scale, queries times `1 + 0.25 ln(1 + floor(position / 4))`; layer 0 dense, 8 experts top 2 by softmax among the 2 best of 4 groups (a group scored by its best two), normalized, times 1.5, one shared expert",
    ),
    # OLMoE: Llama's blocks with RMSNorms over the whole q and k projections, q/k/v clamped
    # after them, experts in every layer.
    "tiny-olmoe": dict(
        cls="Olmoe", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=32, num_hidden_layers=2, rms_norm_eps=1e-5, num_experts=8, num_experts_per_tok=2,
                  norm_topk_prob=False, clip_qkv=1.0, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=legacy_rope,
        exercises="OLMoE: RMSNorms over the whole q and k projections, then q, k and v clamped to [-1, 1] (`clip_qkv`), 8 experts of `intermediate_size` 32 in every layer, softmax top 2 unnormalized (`norm_topk_prob` false)",
    ),
    # Youtu-LLM: DeepSeek-V3's latent attention in Llama's dense blocks. Untied here:
    # transformers 5.25 reloads a tied Youtu checkpoint with its embedding drawn again
    # (`YoutuPreTrainedModel._init_weights` reaches the shared table through the missing
    # `lm_head`), so a tied fixture would not be the model its reference came from.
    "tiny-youtu": dict(
        cls="Youtu", inputs="tiny-llama",
        args=dict(SMALL, num_key_value_heads=4, intermediate_size=96, num_hidden_layers=2, rms_norm_eps=1e-5, tie_word_embeddings=False,
                  q_lora_rank=32, kv_lora_rank=24, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12, rope_interleave=True,
                  rope_parameters={"rope_type": "default", "rope_theta": 100000.0}),
        legacy=lambda config: config,
        exercises="Youtu-LLM: MLA (`q_lora_rank` 32, `kv_lora_rank` 24, nope 16 + rope 8, `v_head_dim` 12, interleaved RoPE rows, latent norms at 1e-6 beside `rms_norm_eps` 1e-5) in Llama's dense blocks, untied head (`tie_word_embeddings` false; the class default is true)",
    ),
    # ERNIE 4.5 MoE: ERNIE 4.5's attention with biases, softmax routing with a correction for
    # the choice, shared experts, layer 0 dense by `moe_layer_start_index`.
    "tiny-ernie4_5_moe": dict(
        cls="Ernie4_5_Moe", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=3, head_dim=16, rms_norm_eps=1e-5, use_bias=True,
                  moe_num_experts=8, moe_k=2, moe_num_shared_experts=1, moe_intermediate_size=32, moe_layer_start_index=1,
                  moe_layer_end_index=-1, moe_layer_interval=1, rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
        legacy=legacy_rope,
        tweak=lambda model: [layer.mlp.gate.moe_statics.e_score_correction_bias.copy_(torch.randn(1, 8) * 0.1) for layer in model.model.layers[1:]],
        exercises="ERNIE 4.5 MoE: biases on q/k/v/o, the MLPs and the head (`use_bias`), RoPE on interleaved pairs; layer 0 dense (`moe_layer_start_index` 1), layers 1-2 8 experts top 2 (`moe_k`) by f32 softmax plus `mlp.moe_statics.e_score_correction_bias` `[1, 8]` for the choice, renormalized, one shared expert",
    ),
    # Ministral (8B, 2410): Mistral's layers with each layer's window from `layer_types`.
    "tiny-ministral": dict(
        cls="Ministral", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=4, head_dim=32, sliding_window=4, rms_norm_eps=1e-5,
                  layer_types=["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"],
                  rope_parameters={"rope_type": "default", "rope_theta": 100000000.0}),
        legacy=legacy_rope,
        exercises="Ministral: Mistral's layers (no biases, head_dim 32 with hidden 64 and 4 heads), a window of 4 on the layers `layer_types` makes slide (layer 1 full)",
    ),
    # Code World Model: Llama's blocks, Llama 3 RoPE scaling, the first of every four layers
    # full and the rest sliding (no `layer_types` in config.json: CwmConfig's default pattern).
    "tiny-cwm": dict(
        cls="Cwm", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=5, head_dim=16, sliding_window=4, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "llama3", "rope_theta": 1000000.0, "factor": 16.0, "high_freq_factor": 4.0,
                                   "low_freq_factor": 1.0, "original_max_position_embeddings": 64}),
        legacy=lambda config: {k: v for k, v in legacy_rope(config).items() if k != "layer_types"},
        exercises="CWM: layers 0 and 4 full, 1-3 sliding (window 4) by CwmConfig's pattern with no `layer_types` written, Llama 3's RoPE scaling, no biases",
    ),
    # VaultGemma: Gemma 2 with the norms before attention and before the MLP only.
    "tiny-vaultgemma": dict(
        cls="VaultGemma", inputs="tiny-gemma2",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=4, head_dim=16, sliding_window=4, query_pre_attn_scalar=16,
                  attn_logit_softcapping=50.0, final_logit_softcapping=30.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                  hidden_activation="gelu_pytorch_tanh", rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        # Without `layer_types`, as Gemma 2's published configs: the alternation is read.
        legacy=lambda config: {k: v for k, v in legacy_rope(config).items() if k != "layer_types"},
        exercises="VaultGemma: Gemma 2's attention (softcap 50, `query_pre_attn_scalar` 16, sliding layers 0 and 2 by its alternation, window 4), `(1 + w)` RMSNorms before attention and before the MLP only (no after-norms), logits softcapped at 30, tied head",
    ),
    # MiniMax-M2: q/k RMSNorms over the whole projections, RoPE on half of each head (its
    # `rotary_dim`), sigmoid-routed experts with a correction bias in every layer.
    "tiny-minimax_m2": dict(
        cls="MiniMaxM2", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=32, num_hidden_layers=2, head_dim=16, num_local_experts=8, num_experts_per_tok=2,
                  rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "partial_rotary_factor": 0.5}),
        legacy=minimax_m2_legacy,
        tweak=lambda model: [layer.mlp.e_score_correction_bias.copy_(torch.randn(8) * 0.2) for layer in model.model.layers],
        exercises="MiniMax-M2: q and k RMSNormed over their whole projections, RoPE on the first 8 of each head's 16 dimensions (`rotary_dim` 8 as the published config writes it), 8 experts under Mixtral's names in every layer, sigmoid scores with `e_score_correction_bias` for the choice of the top 2, renormalized",
    ),
    # GPTBigCode (StarCoder 1): GPT-2's block with Linear weights and one key/value head.
    "tiny-gpt_bigcode": dict(
        cls="GPTBigCode", inputs="tiny-gpt2",
        args=dict(vocab_size=512, n_embd=64, n_head=4, n_layer=2, n_positions=256, n_inner=None, multi_query=True,
                  activation_function="gelu_pytorch_tanh", layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2,
                  initializer_range=0.2, tie_word_embeddings=True),
        legacy=lambda config: config,
        exercises="GPTBigCode (StarCoder 1): GPT-2's block (learned positions, LayerNorms with bias, biases everywhere, tanh GELU, tied head) with Linear weights and multi-query attention (`c_attn`: 64 query rows, one key and one value head of 16)",
    ),
    # GPT-J: one LayerNorm feeding attention and the MLP in parallel, RoPE on interleaved pairs
    # of the first `rotary_dim` dimensions of each head, biased MLP and head, no q/k/v/o biases.
    "tiny-gptj": dict(
        cls="GPTJ", inputs="tiny-gpt2",
        args=dict(vocab_size=512, n_embd=64, n_head=4, n_layer=2, n_positions=256, n_inner=None, rotary_dim=8,
                  activation_function="gelu_new", layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2,
                  initializer_range=0.2, tie_word_embeddings=False),
        legacy=lambda config: config,
        exercises="GPT-J: `ln_1` feeding attention and the MLP in parallel (`attn + mlp + residual`), RoPE on interleaved pairs of the first 8 of each head's 16 dimensions (`rotary_dim`), q/k/v/out_proj without biases, `fc_in` -> gelu_new -> `fc_out` 4 x hidden wide (`n_inner` null) with biases, a biased untied head",
    ),
    # CodeGen: GPT-J's block with q/k/v in one projection laid out in 4 shards of q, v, k heads.
    "tiny-codegen": dict(
        cls="CodeGen", inputs="tiny-gpt2",
        args=dict(vocab_size=512, n_embd=128, n_head=8, n_layer=2, n_positions=256, n_ctx=256, n_inner=None, rotary_dim=8,
                  activation_function="gelu_new", layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2,
                  initializer_range=0.2, tie_word_embeddings=False),
        legacy=lambda config: config,
        exercises="CodeGen: GPT-J's parallel block with q/k/v in one `qkv_proj` laid out in 4 model-parallel shards, each holding its 2 query heads, then its 2 value heads, then its 2 key heads; RoPE on interleaved pairs of the first 8 of each head's 16 dimensions (`rotary_dim`), `fc_in` -> gelu_new -> `fc_out` 4 x hidden wide (`n_inner` null), a biased untied head",
    ),
    # Falcon (7B's layout): multi-query attention with q/k/v in one projection, one LayerNorm
    # feeding attention and the MLP in parallel, no biases, a tied head.
    "tiny-falcon": dict(
        cls="Falcon", inputs="tiny-llama",
        args=dict(vocab_size=512, hidden_size=64, num_attention_heads=4, num_hidden_layers=2, max_position_embeddings=256,
                  multi_query=True, new_decoder_architecture=False, parallel_attn=True, bias=False, alibi=False,
                  layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.2,
                  tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=lambda config: {k: v for k, v in legacy_rope(config).items() if k not in ("num_key_value_heads", "ffn_hidden_size")},
        exercises="Falcon-7B's layout: `query_key_value` rows the 4 query heads then one key and one value head (`multi_query`), `input_layernorm` feeding attention and the MLP in parallel, `dense_h_to_4h` -> GELU -> `dense_4h_to_h` 4 x hidden wide (no `ffn_hidden_size` written), no biases, tied head; config.json without `num_key_value_heads` (FalconConfig derives it)",
    ),
    # Falcon-RW: ALiBi computed in bf16 (as transformers' Falcon does), the sequential block.
    "tiny-falcon-rw": dict(
        cls="Falcon", inputs="tiny-llama", long=300,
        args=dict(vocab_size=512, hidden_size=96, num_attention_heads=6, num_hidden_layers=2, max_position_embeddings=512,
                  multi_query=False, new_decoder_architecture=False, parallel_attn=False, bias=True, alibi=True,
                  layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.2),
        legacy=lambda config: {k: v for k, v in config.items() if k not in ("num_key_value_heads", "ffn_hidden_size", "rope_parameters", "tie_word_embeddings")},
        exercises="Falcon-RW's layout: ALiBi over six heads computed as transformers' Falcon computes it (BLOOM's slopes and positions, each rounded to bf16, their product in bf16, divided by sqrt(head_dim)), `query_key_value` laid out per head (not `multi_query`), the sequential block (`parallel_attn` false: `input_layernorm`, attention, then `post_attention_layernorm` and the MLP), biases everywhere (`bias`), tied head; `long_last_logits`: the last logits of a 300-token prompt, whose positions past 256 bf16 rounds",
    ),
    # Falcon 2 (11B's layout): the new decoder architecture, q/k/v grouped per key/value head,
    # one LayerNorm, biases.
    "tiny-falcon2": dict(
        cls="Falcon", inputs="tiny-llama",
        args=dict(vocab_size=512, hidden_size=64, num_attention_heads=4, num_kv_heads=2, num_hidden_layers=2, max_position_embeddings=256,
                  new_decoder_architecture=True, num_ln_in_parallel_attn=1, parallel_attn=True, bias=True, alibi=False,
                  ffn_hidden_size=96, layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.2,
                  tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 500042.0}),
        legacy=lambda config: {k: v for k, v in legacy_rope(config).items() if k != "num_key_value_heads"},
        exercises="Falcon2-11B's layout: `new_decoder_architecture` with `num_kv_heads` 2, `query_key_value` rows per key/value group (2 query heads, its key, its value), one LayerNorm (`num_ln_in_parallel_attn` 1) feeding attention and the MLP in parallel, biases on every projection (`bias`), `ffn_hidden_size` 96, untied head",
    ),
    # AFMoE (Arcee Trinity): gated attention output, per-head q/k norms, four norms a layer,
    # three sliding layers (RoPE) then a full one (none), a dense first layer, sigmoid experts
    # with a bias and a route scale beside shared experts, muP embedding scale.
    "tiny-afmoe": dict(
        cls="Afmoe", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=4, num_dense_layers=1, head_dim=16,
                  num_experts=8, num_experts_per_tok=2, num_shared_experts=1, route_scale=1.5, global_attn_every_n_layers=4,
                  sliding_window=4, mup_enabled=True, rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        legacy=lambda config: {k: v for k, v in legacy_rope(config).items() if k != "layer_types"},
        tweak=lambda model: [layer.mlp.expert_bias.copy_(torch.randn(8) * 0.2) for layer in model.model.layers[1:]],
        exercises="AFMoE (Arcee Trinity): the attention output times sigmoid(gate_proj(x)), per-head q/k RMSNorms, norms before and after attention and around the MLP, layers 0-2 sliding (window 4, RoPE) and layer 3 full (no RoPE) by `global_attn_every_n_layers` 4 (no `layer_types` written), a dense first layer, 8 experts routed by sigmoid scores with `expert_bias` for the choice of the top 2, renormalized and scaled by `route_scale` 1.5, one shared expert, embeddings times sqrt(64) (`mup_enabled`)",
    ),
    # EXAONE 4: OLMo 2's post-norms with per-head q/k norms, three sliding layers then a full
    # one (`sliding_window_pattern` 4), the full layer without RoPE (hybrid attention's NoPE).
    "tiny-exaone4": dict(
        cls="Exaone4", inputs="tiny-llama",
        args=dict(SMALL, intermediate_size=96, num_hidden_layers=4, head_dim=16, sliding_window=4, sliding_window_pattern=4,
                  rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        legacy=legacy_rope,
        exercises="post-attention / post-feedforward norms with per-head q/k RMSNorms, sliding layers (window 4, every 4th layer full by `sliding_window_pattern`), no RoPE on the full layer",
    ),
}


def positions(mask):
    return (mask.cumsum(-1) - 1).clamp(min=0)


def run(model, ids, mask, past=None, pos=None, cache=True):
    pos = positions(mask)[:, -ids.shape[1]:] if pos is None else pos
    with torch.no_grad():
        if not cache:
            # A model without a KV cache (OpenAI GPT) takes no cache arguments.
            return model(input_ids=ids, attention_mask=mask, position_ids=pos)
        return model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=past, use_cache=True)


def perturbed_and_saved(model, out_dir, tweak=None):
    """`model` with every parameter moved off its init (so a weight never loaded shows up), and
    `tweak` applied (buffers the checkpoint saves too), set to eager attention and saved to
    `out_dir`."""
    model = model.eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        if tweak is not None:
            tweak(model)
    model.config._attn_implementation = "eager"
    model.save_pretrained(out_dir, safe_serialization=True)
    return model


def fused_presents(model, ids, mask):
    """(logits, [(key, value)] per layer `[1, heads, seq, head_dim]`) of a model without a KV
    cache (OpenAI GPT): the keys and values its fused `c_attn` computes, taken by hooks."""
    captured = []
    hooks = [block.attn.c_attn.register_forward_hook(lambda _m, _i, out: captured.append(out)) for block in model.transformer.h]
    try:
        logits = run(model, ids, mask, cache=False).logits
    finally:
        for h in hooks:
            h.remove()
    heads = model.config.n_head
    presents = []
    for qkv in captured:
        _, k, v = qkv.split(qkv.shape[-1] // 3, dim=-1)
        split = lambda t: t.reshape(t.shape[0], t.shape[1], heads, -1).permute(0, 2, 1, 3)  # noqa: E731
        presents.append((split(k), split(v)))
    return logits, presents


def references(model, inputs_from, long=None, no_cache=False):
    """The reference tensors of `model` for the inputs of fixture `inputs_from` (and, with
    `long`, the last logits of a prompt that long). `no_cache`: a model transformers runs without
    a KV cache (OpenAI GPT): the presents from its projections, the decode step's logits from
    the whole sequence, generation without a cache."""
    given = load_file(os.path.join(FIXTURES, inputs_from, "reference.safetensors"))
    ref = {k: given[k] for k in given if k.endswith("input_ids") or k.endswith("attention_mask") or k.endswith("position_ids")}
    ids, mask = ref["input_ids"], ref["attention_mask"]
    dmask = torch.ones(1, ids.shape[1] + 1, dtype=torch.int64)
    if no_cache:
        ref["logits"], presents = fused_presents(model, ids, mask)
        for i, (k, v) in enumerate(presents):
            ref[f"present.{i}.key"], ref[f"present.{i}.value"] = k, v
        whole = torch.cat([ids, ref["decode_input_ids"]], dim=1)
        ref["decode_logits"] = run(model, whole, dmask, cache=False).logits[:, -1:]
    else:
        out = run(model, ids, mask)
        ref["logits"] = out.logits
        for i, layer in enumerate(out.past_key_values.layers):
            ref[f"present.{i}.key"], ref[f"present.{i}.value"] = layer.keys, layer.values
        ref["decode_logits"] = run(model, ref["decode_input_ids"], dmask, out.past_key_values, torch.tensor([[ids.shape[1]]])).logits
    for b in ["batch", "rbatch"]:
        ref[f"{b}_logits"] = run(model, ref[f"{b}_input_ids"], ref[f"{b}_attention_mask"], pos=ref[f"{b}_position_ids"], cache=not no_cache).logits
    ref["short_logits"] = run(model, ref["short_input_ids"], torch.ones_like(ref["short_input_ids"]), cache=not no_cache).logits
    with torch.no_grad():
        gen = model.generate(ids, attention_mask=mask, max_new_tokens=16, min_new_tokens=16, do_sample=False, eos_token_id=None, pad_token_id=0, use_cache=not no_cache)
    ref["greedy_tokens"] = gen[:, ids.shape[1]:]
    if long:
        # One unpadded prompt of `long` tokens: positions past 256, where a bf16 position
        # (Falcon's ALiBi) is rounded; only the last position's logits are kept.
        ids = torch.randint(3, model.config.vocab_size, (1, long), generator=torch.Generator().manual_seed(7))
        ref["long_input_ids"] = ids
        ref["long_last_logits"] = run(model, ids, torch.ones_like(ids)).logits[:, -1:]
    return ref


def write_reference_json(path, model_type, generator, f16_err):
    with open(path, "w") as f:
        json.dump({
            "batch_logits": "left-padded batch of 2; compare only where batch_attention_mask==1",
            "decode_logits": "logits [1,1,V] for decode_input_ids at position 7 after the prefill",
            "generator": generator,
            "greedy_tokens": "16 greedy tokens after input_ids (no eos stop)",
            "logits": "prefill logits [1,7,V] for input_ids with no past",
            "model_type": model_type,
            "present.N.key/value": "KV cache after prefill, [1, kv_heads, 7, head_dim]",
            "rbatch_logits": "right-padded batch of 2; compare only where rbatch_attention_mask==1",
            "short_logits": "prefill logits [1,3,V] for a 3-token prompt",
            "tolerance": {
                "bfloat16": "not runnable on ORT's CPU EP: check structurally",
                "float16": {"atol": 0.05, "transformers_float16_err": round(f16_err, 4),
                            "why": "transformers itself, run in float16, differs from this float32 reference by transformers_float16_err; a float16 build must be as close: within max(5e-2, 2x that)"},
                "float32": {"atol": 0.0001},
            },
        }, f, indent=1, sort_keys=True)
        f.write("\n")


def make(name, spec):
    out_dir = os.path.join(FIXTURES, name)
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(1234)
    config = getattr(transformers, spec["cls"] + "Config")(**spec["args"])
    # `model`: a config class whose model is another family's (Sarvam's is DeepSeek-V3's).
    model_cls = getattr(transformers, spec.get("model", spec["cls"] + "ForCausalLM"))
    if "composite" in spec:
        # A vision-language checkpoint: the text config inside, the references its text path.
        comp = spec["composite"]
        vision = getattr(transformers, comp["vision_cls"] + "Config")(**comp["vision"])
        config = getattr(transformers, comp["cls"] + "Config")(text_config=config, vision_config=vision, **comp["top"])
        model_cls = getattr(transformers, comp["model"])
    model = perturbed_and_saved(model_cls(config), out_dir, spec.get("tweak"))
    path = os.path.join(out_dir, "config.json")
    with open(path) as f:
        written = spec["legacy"](json.load(f))
    with open(path, "w") as f:
        json.dump(written, f, indent=2, sort_keys=True)
        f.write("\n")
    for file in ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]:
        shutil.copy(os.path.join(FIXTURES, spec["inputs"], file), os.path.join(out_dir, file))
    ref = references(model, spec["inputs"], spec.get("long"), spec.get("no_cache", False))
    save_file({k: v.contiguous() for k, v in ref.items()}, os.path.join(out_dir, "reference.safetensors"))
    # The rewritten config.json reloads to the same model: the fixture means what made it. A
    # config class of its own (`model` given) is found by model_type, as a user's load finds it.
    if "model" in spec:
        model_cls = transformers.AutoModelForCausalLM
    again = model_cls.from_pretrained(out_dir, attn_implementation="eager").eval()
    cache = not spec.get("no_cache", False)
    reload_err = float((run(again, ref["input_ids"], ref["attention_mask"], cache=cache).logits - ref["logits"]).abs().max())
    # Same bytes, but BLAS may sum a reloaded (mmapped, differently aligned) weight in another
    # order: one or two f32 ulps of the logits, far below what a misread key changes.
    assert reload_err <= 2e-6, f"{name}: the rewritten config.json reloads to another model ({reload_err})"
    half = model_cls.from_pretrained(out_dir, attn_implementation="eager", dtype=torch.float16).eval()
    f16_err = float((run(half, ref["input_ids"], ref["attention_mask"], cache=cache).logits.float() - ref["logits"]).abs().max())
    generator = (f"{SCRIPT} {name}: transformers {transformers.__version__}, torch {torch.__version__}, eager attention, "
                 f"float32, seed 1234 weights; inputs of {spec['inputs']}")
    write_reference_json(os.path.join(out_dir, "reference.json"), config.model_type, generator, f16_err)
    print(name, "f16 err", round(f16_err, 4))


def main():
    names = sys.argv[1:] or list(FIXTURES_MADE_HERE)
    for name in names:
        make(name, FIXTURES_MADE_HERE[name])


if __name__ == "__main__":
    main()
