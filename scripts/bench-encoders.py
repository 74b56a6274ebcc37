#!/usr/bin/env python3
"""Encoding throughput on ONNX Runtime's CPU EP: a checkpoint's `cpu` package against its
`default` package, measured in the same run (batch 32 x 128 tokens by default), reported as a
ratio; with --ort-optimizer, also against ONNX Runtime's own transformers optimizer
(`onnxruntime.transformers.optimizer`, model_type bert) applied to a torch export of the same
checkpoint. The export needs torch and transformers, so that part runs only where they are
installed (never in CI).

    scripts/bench-encoders.py --model DIR [--tailor target/release/tailor] [--ort-optimizer]

Rounds alternate between the packages (each round times every package once), so load from
other processes on the machine hits them alike; the report gives the median time per batch,
tokens per second, and each package's time relative to the `default` package's.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

REPO = Path(__file__).resolve().parents[1]


def build(tailor, model, ep, out):
    cmd = [str(tailor), "build", "--model", str(model), "--output", str(out), "--ep", ep, "--task", "feature-extraction"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return out / "model.onnx"


def ort_optimized(model, out, heads, hidden):
    """torch export of the checkpoint (last_hidden_state), then ORT's transformers optimizer."""
    try:
        import torch
        import transformers
        from onnxruntime.transformers import optimizer
    except ImportError as e:
        sys.exit(f"--ort-optimizer needs torch and transformers ({e}); run it from a venv that has them")
    hf = transformers.AutoModel.from_pretrained(str(model), attn_implementation="eager").eval()

    class Encoder(torch.nn.Module):
        """Keyword arguments only: transformers 5's forward takes more positional ones."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    ids = torch.ones(2, 16, dtype=torch.long)
    raw = out / "torch_export.onnx"
    with torch.no_grad():
        torch.onnx.export(
            Encoder(hf), (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(raw),
            input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "seq"} for n in ["input_ids", "attention_mask", "token_type_ids", "last_hidden_state"]},
            opset_version=17, dynamo=False,
        )
    opt = optimizer.optimize_model(str(raw), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=1)
    path = out / "ort_optimized.onnx"
    opt.save_model_to_file(str(path))
    return path, dict(sorted(opt.get_fused_operator_statistics().items()))


def session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, type=Path, help="checkpoint folder (a BERT-family encoder)")
    ap.add_argument("--tailor", type=Path, default=REPO / "target" / "release" / "tailor")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--ort-optimizer", action="store_true", help="also time ORT's transformers optimizer output (needs torch)")
    args = ap.parse_args()
    config = json.loads((args.model / "config.json").read_text())
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, config["vocab_size"], size=(args.batch, args.seq), dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        models = {ep: build(args.tailor, args.model, ep, tmp / ep) for ep in ["default", "cpu"]}
        stats = None
        if args.ort_optimizer:
            models["ort-optimizer"], stats = ort_optimized(args.model, tmp, config["num_attention_heads"], config["hidden_size"])
        sessions = {k: session(p, args.threads) for k, p in models.items()}
        outs = {}
        for k, s in sessions.items():
            names = {i.name for i in s.get_inputs()}
            outs[k] = s.run(["last_hidden_state"], {n: v for n, v in feeds.items() if n in names})[0]
        for k in sessions:
            diff = float(np.abs(outs[k] - outs["default"]).max())
            print(f"{k}: last_hidden_state max |diff| vs default {diff:.2e}")
        times = {k: [] for k in sessions}
        for _ in range(args.rounds):
            for k, s in sessions.items():
                names = {i.name for i in s.get_inputs()}
                f = {n: v for n, v in feeds.items() if n in names}
                t = time.perf_counter()
                s.run(["last_hidden_state"], f)
                times[k].append(time.perf_counter() - t)
    base = statistics.median(times["default"])
    print(f"ORT {ort.__version__} CPU, {args.threads} threads, batch {args.batch} x {args.seq} tokens, {args.rounds} rounds (median):")
    for k, ts in times.items():
        m = statistics.median(ts)
        print(f"  {k:14s} {m * 1000:8.1f} ms/batch  {args.batch * args.seq / m:9.0f} tokens/s  time {m / base:.3f}x default  (speed-up {base / m:.2f}x)")
    if stats:
        print("  ort-optimizer fused ops:", {k: v for k, v in stats.items() if v})


if __name__ == "__main__":
    main()
