#!/usr/bin/env python3
"""Writes a random-weight Mixtral-shaped checkpoint for decode benchmarks (scripts/bench-genai.py
--moe; never used by the tests): numpy and safetensors only, no torch. The shape is set by the
flags (default: hidden 512, 8 layers, 8 heads / 4 kv heads, 8 experts of width 1408, top 2,
vocabulary 32000: about 0.8 GB in f32), the weights are small normal noise, the tokenizer files
are tiny-mixtral's (the benchmark feeds token ids, never text).

    .venv/bin/python scripts/make_bench_moe.py OUT_DIR [--hidden 512] [--layers 8] ...
"""
import argparse
import json
import shutil
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

REPO = Path(__file__).resolve().parents[1]
TOKENIZER_FROM = REPO / "tests" / "fixtures" / "tiny-mixtral"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--inter", type=int, default=1408)
    ap.add_argument("--vocab", type=int, default=32000)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    head = a.hidden // a.heads
    config = {
        "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_act": "silu",
        "hidden_size": a.hidden, "intermediate_size": a.inter, "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads, "head_dim": head,
        "num_local_experts": a.experts, "num_experts_per_tok": a.top_k, "vocab_size": a.vocab,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 1e6,
        "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32",
    }
    (a.out / "config.json").write_text(json.dumps(config, indent=2))
    rng = np.random.default_rng(0)
    w = lambda *shape: (rng.standard_normal(shape, dtype=np.float32) * 0.02)
    t = {"model.embed_tokens.weight": w(a.vocab, a.hidden), "model.norm.weight": np.ones(a.hidden, np.float32),
         "lm_head.weight": w(a.vocab, a.hidden)}
    for i in range(a.layers):
        p = f"model.layers.{i}"
        t[f"{p}.input_layernorm.weight"] = np.ones(a.hidden, np.float32)
        t[f"{p}.post_attention_layernorm.weight"] = np.ones(a.hidden, np.float32)
        t[f"{p}.self_attn.q_proj.weight"] = w(a.heads * head, a.hidden)
        t[f"{p}.self_attn.k_proj.weight"] = w(a.kv_heads * head, a.hidden)
        t[f"{p}.self_attn.v_proj.weight"] = w(a.kv_heads * head, a.hidden)
        t[f"{p}.self_attn.o_proj.weight"] = w(a.hidden, a.heads * head)
        # A wider router spread than the other weights, so tokens go to different experts.
        t[f"{p}.block_sparse_moe.gate.weight"] = w(a.experts, a.hidden) * 50
        for e in range(a.experts):
            q = f"{p}.block_sparse_moe.experts.{e}"
            t[f"{q}.w1.weight"] = w(a.inter, a.hidden)
            t[f"{q}.w3.weight"] = w(a.inter, a.hidden)
            t[f"{q}.w2.weight"] = w(a.hidden, a.inter)
    save_file(t, str(a.out / "model.safetensors"))
    for name in ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]:
        shutil.copy(TOKENIZER_FROM / name, a.out / name)
    print(a.out)


if __name__ == "__main__":
    main()
