#!/usr/bin/env python3
"""Grouped-routing MoE decode benchmark (never run in CI): what fuse.moe.grouped buys on
ONNX Runtime's CPU EP, against a baseline measured in the same run.

    .venv/bin/python scripts/bench-grouped-moe.py TAILOR WORKDIR [--hidden H] [--experts E]
        [--expert-ff F] [--used K] [--layers N] [--steps S] [--prompt P]

The checkpoint: a `deepseek_v3` checkpoint with DeepSeek-V2-Lite's layer shape by default
(hidden 2048, 16 heads, no query compression, kv_lora_rank 512, nope 128 + rope 64, v 128; 64
experts of 1408, 6 used, two shared experts' width), N layers (default 2: the first dense, the
rest sparse), a 4096-token vocabulary; random f16 weights (the numbers mean nothing, the shapes
are what the kernels compute). Built twice in f32 with the same binary:

- `cpu`: the table's fusions, so each sparse layer is one com.microsoft MoE (fuse.moe.grouped)
  computing only the K routed experts per token;
- `default`: the portable package, every expert computed for every token (the generic block:
  batched MatMuls over the E experts, unrouted ones weighted 0) and standard Attention.

Printed: the prefill (third run: the first prepares the kernels) and the median decode step of
each, and the ratio default / cpu. The attention differs too (GroupQueryAttention against Attention), so the ratio
is the package's, not the experts' alone; E / K (the work the fusion skips on the experts) is
printed beside it.
"""
import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from safetensors.numpy import save_file

FIXTURE = Path(__file__).resolve().parent.parent / "tests/fixtures/tiny-deepseek_v3-lite"


def checkpoint(out: Path, a) -> None:
    out.mkdir(parents=True, exist_ok=True)
    nh, nope, rope, v, rank = 16, 128, 64, 128, 512
    config = json.loads((FIXTURE / "config.json").read_text())
    config.update({
        "hidden_size": a.hidden, "num_attention_heads": nh, "num_key_value_heads": nh, "head_dim": rope,
        "q_lora_rank": None, "kv_lora_rank": rank, "qk_nope_head_dim": nope, "qk_rope_head_dim": rope,
        "qk_head_dim": nope + rope, "v_head_dim": v, "intermediate_size": 10944, "moe_intermediate_size": a.expert_ff,
        "n_routed_experts": a.experts, "num_experts_per_tok": a.used, "n_shared_experts": 2, "n_group": 1,
        "topk_group": 1, "first_k_dense_replace": 1, "num_hidden_layers": a.layers, "vocab_size": 4096,
        "max_position_embeddings": 4096, "routed_scaling_factor": 1.0, "norm_topk_prob": False, "dtype": "float16",
    })
    (out / "config.json").write_text(json.dumps(config, indent=2))
    for name in ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]:
        if (FIXTURE / name).exists():
            shutil.copy(FIXTURE / name, out / name)
    rng = np.random.default_rng(0)
    w = lambda *shape: (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)
    ones = lambda n: np.ones(n, np.float16)
    h, vocab = a.hidden, 4096
    t = {"model.embed_tokens.weight": w(vocab, h), "lm_head.weight": w(vocab, h), "model.norm.weight": ones(h)}
    for i in range(a.layers):
        p = f"model.layers.{i}"
        t.update({
            f"{p}.input_layernorm.weight": ones(h), f"{p}.post_attention_layernorm.weight": ones(h),
            f"{p}.self_attn.q_proj.weight": w(nh * (nope + rope), h),
            f"{p}.self_attn.kv_a_proj_with_mqa.weight": w(rank + rope, h),
            f"{p}.self_attn.kv_a_layernorm.weight": ones(rank),
            f"{p}.self_attn.kv_b_proj.weight": w(nh * (nope + v), rank),
            f"{p}.self_attn.o_proj.weight": w(h, nh * v),
        })
        if i == 0:
            t.update({f"{p}.mlp.gate_proj.weight": w(10944, h), f"{p}.mlp.up_proj.weight": w(10944, h), f"{p}.mlp.down_proj.weight": w(h, 10944)})
            continue
        f = a.expert_ff
        t.update({
            f"{p}.mlp.gate.weight": (rng.standard_normal((a.experts, h), dtype=np.float32) * 0.02).astype(np.float32),
            f"{p}.mlp.gate.e_score_correction_bias": np.zeros(a.experts, np.float32),
            f"{p}.mlp.shared_experts.gate_proj.weight": w(2 * f, h), f"{p}.mlp.shared_experts.up_proj.weight": w(2 * f, h),
            f"{p}.mlp.shared_experts.down_proj.weight": w(h, 2 * f),
        })
        for e in range(a.experts):
            q = f"{p}.mlp.experts.{e}"
            t.update({f"{q}.gate_proj.weight": w(f, h), f"{q}.up_proj.weight": w(f, h), f"{q}.down_proj.weight": w(h, f)})
    save_file(t, str(out / "model.safetensors"))


def timed_run(pkg: Path, prompt: int, steps: int):
    opts = ort.SessionOptions()
    s = ort.InferenceSession(str(pkg / "model.onnx"), opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in s.get_inputs()]
    past = [i for i in s.get_inputs() if i.name.startswith("past_key_values")]
    outs = [o.name for o in s.get_outputs()]
    rng = np.random.default_rng(1)
    ids = rng.integers(3, 4000, (1, prompt)).astype(np.int64)

    def feeds(tokens, cache, total):
        f = {"input_ids": tokens, "attention_mask": np.ones((1, total), np.int64)}
        if "position_ids" in names:
            f["position_ids"] = np.arange(total - tokens.shape[1], total, dtype=np.int64)[None]
        for i, c in zip(past, cache):
            f[i.name] = c
        return f

    empty = [np.zeros([1 if d == "batch_size" else (0 if isinstance(d, str) else d) for d in i.shape], np.float32) for i in past]
    # The first run prepares kernels (weight packing); the prefill is timed on the third.
    prefills = []
    for _ in range(3):
        t0 = time.perf_counter()
        res = s.run(outs, feeds(ids, empty, prompt))
        prefills.append(time.perf_counter() - t0)
    prefill = prefills[-1]
    cache = res[1:]
    times = []
    total = prompt
    for _ in range(steps):
        total += 1
        nxt = np.array([[int(res[0][0, -1].argmax())]], np.int64)
        t0 = time.perf_counter()
        res = s.run(outs, feeds(nxt, cache, total))
        times.append(time.perf_counter() - t0)
        cache = res[1:]
        assert np.isfinite(res[0]).all()
    return prefill, float(np.median(times))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tailor")
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--expert-ff", type=int, default=1408)
    ap.add_argument("--used", type=int, default=6)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=64)
    a = ap.parse_args()
    ckpt = a.workdir / "checkpoint"
    checkpoint(ckpt, a)
    print(f"checkpoint: {sum(f.stat().st_size for f in ckpt.iterdir()) / 2**30:.2f} GiB, {a.layers - 1} sparse layer(s) of {a.experts} experts x {a.expert_ff}, {a.used} used")
    result = {}
    for ep in ["cpu", "default"]:
        pkg = a.workdir / ep
        shutil.rmtree(pkg, ignore_errors=True)
        subprocess.run([a.tailor, "build", "--model", str(ckpt), "--output", str(pkg), "--ep", ep, "--dtype", "f32"], check=True, stderr=subprocess.DEVNULL)
        result[ep] = timed_run(pkg, a.prompt, a.steps)
        print(f"{ep:8s} prefill {a.prompt} tokens {result[ep][0]:.3f} s, decode step {result[ep][1] * 1000:.1f} ms (median of {a.steps})")
    print(f"default / cpu: prefill {result['default'][0] / result['cpu'][0]:.2f}x, decode {result['default'][1] / result['cpu'][1]:.2f}x (experts: E / K = {a.experts / a.used:.1f})")
    shutil.rmtree(a.workdir / "checkpoint")


if __name__ == "__main__":
    sys.exit(main())
