#!/usr/bin/env python3
"""Embedding-table forms on `default` (never run in CI): `tailor build --ep default --quant int4`
of one float checkpoint with `--quant-embeddings none`, `int8` and `int4`, same run: package
size, prefill time of 512 tokens (ONNX Runtime, median of 5) and decode tokens/s through
onnxruntime-genai (128 prompt tokens, run by append_tokens and not timed; 32 new, greedy),
packages run in the order a, b, c, c, b, a; each figure also as a ratio to the float table's.

    .venv/bin/python scripts/bench-embeddings.py TAILOR CHECKPOINT WORKDIR"""
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import onnxruntime_genai as og

FORMS = ["none", "int8", "int4"]


def build(tailor, model, out, embeddings):
    shutil.rmtree(out, ignore_errors=True)
    cmd = [tailor, "build", "--model", str(model), "--output", str(out), "--ep", "default", "--quant", "int4", "--quant-embeddings", embeddings]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return sum(f.stat().st_size for f in Path(out).iterdir() if f.is_file()) / 1e6


def prefill(pkg, n=512, reps=5):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    s = ort.InferenceSession(str(pkg / "model.onnx"), so, providers=["CPUExecutionProvider"])
    ids = np.random.default_rng(0).integers(100, 30000, (1, n)).astype(np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    for i in s.get_inputs():
        if i.name == "position_ids":
            feeds[i.name] = np.arange(n, dtype=np.int64)[None]
        elif i.name.startswith("past_key_values."):
            dims = [1 if d == "batch_size" else 0 if isinstance(d, str) else d for d in i.shape]
            feeds[i.name] = np.zeros(dims, np.float32)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        s.run(["logits"], feeds)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def decode(pkg, prompt_len=128, new=32):
    model = og.Model(str(pkg))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=prompt_len + new, do_sample=False)
    gen = og.Generator(model, params)
    gen.append_tokens(np.random.default_rng(0).integers(100, 30000, (1, prompt_len)).astype(np.int32))
    t, k = time.perf_counter(), 0
    while not gen.is_done() and k < new:
        gen.generate_next_token()
        k += 1
    return k / (time.perf_counter() - t)


def main():
    tailor, model, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    size, pre, dec = {}, {f: [] for f in FORMS}, {f: [] for f in FORMS}
    for f in FORMS:
        size[f] = build(tailor, model, work / f"emb-{f}", f)
    for f in FORMS + FORMS[::-1]:
        pre[f].append(prefill(work / f"emb-{f}"))
        dec[f].append(decode(work / f"emb-{f}"))
    print(f"{'embeddings':>10} {'package MB':>11} {'/ none':>7} {'prefill s':>10} {'/ none':>7} {'decode tok/s':>13} {'/ none':>7}")
    for f in FORMS:
        p, d = np.mean(pre[f]), np.mean(dec[f])
        print(f"{f:>10} {size[f]:11.1f} {size[f] / size['none']:7.2f} {p:10.3f} {p / np.mean(pre['none']):7.2f} {d:13.1f} {d / np.mean(dec['none']):7.2f}")


if __name__ == "__main__":
    main()
