#!/usr/bin/env python3
"""Decode benchmark (never run in CI): prefill time and decode tokens per second through
onnxruntime-genai for the `cpu` f32 and `default` f32 packages of the synthetic
Qwen2.5-0.5B-shaped checkpoint (128 prompt tokens, 32 new), reported with their ratio.

    cargo build --release -p builder --bins
    .venv/bin/python scripts/bench-genai.py [--workdir /tmp/tailor-bench] [--runs 3]
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime_genai as og

REPO = Path(__file__).resolve().parents[1]
RELEASE = REPO / "target" / "release"


def build(ckpt: Path, out: Path, ep: str) -> None:
    cmd = [str(RELEASE / "tailor"), "build", "--model", str(ckpt), "--output", str(out),
           "--ep", ep, "--dtype", "f32", "--force"]
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)


def measure(pkg: Path, prompt: np.ndarray, new_tokens: int, runs: int):
    model = og.Model(str(pkg))
    best_prefill, best_decode = float("inf"), 0.0
    for _ in range(runs):
        params = og.GeneratorParams(model)
        total = prompt.shape[1] + new_tokens
        params.set_search_options(max_length=total, min_length=total, do_sample=False)
        gen = og.Generator(model, params)
        t0 = time.perf_counter()
        gen.append_tokens(prompt)  # runs the prefill
        t1 = time.perf_counter()
        for _ in range(new_tokens):
            gen.generate_next_token()
        t2 = time.perf_counter()
        best_prefill = min(best_prefill, t1 - t0)
        best_decode = max(best_decode, new_tokens / (t2 - t1))
    return best_prefill, best_decode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default="/tmp/tailor-bench")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    work = Path(args.workdir)
    if not (RELEASE / "tailor").exists() or not (RELEASE / "tailor-bench").exists():
        sys.exit("build first: cargo build --release -p builder --bins")
    ckpt = Path(subprocess.run([str(RELEASE / "tailor-bench"), "--workdir", str(work), "--write-only"],
                               check=True, capture_output=True, text=True).stdout.strip())
    prompt = np.random.default_rng(0).integers(0, 151936, size=(1, 128), dtype=np.int32)
    results = {}
    for ep in ("default", "cpu"):
        pkg = work / f"genai-{ep}-f32"
        build(ckpt, pkg, ep)
        results[ep] = measure(pkg, prompt, 32, args.runs)
        print(f"{ep:8s} f32: prefill {results[ep][0] * 1000:8.1f} ms   decode {results[ep][1]:6.2f} tokens/s")
    d, c = results["default"], results["cpu"]
    print(f"cpu_vs_default_prefill_speedup={d[0] / c[0]:.2f} cpu_vs_default_decode_speedup={c[1] / d[1]:.2f} "
          f"default_prefill_ms={d[0] * 1000:.0f} cpu_prefill_ms={c[0] * 1000:.0f} "
          f"default_tok_s={d[1]:.2f} cpu_tok_s={c[1]:.2f}")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    main()
