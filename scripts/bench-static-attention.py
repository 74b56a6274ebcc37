#!/usr/bin/env python3
"""Does ONNX Runtime's CPU Attention-24 skip the cache slots past `nonpad_kv_seqlen`? (never run
in CI; docs/benchmarks.md, "Attention-24 and nonpad_kv_seqlen"). One decode step of one layer of
the static standard form (4-D q over a fixed cache of N slots, of which `valid` hold data), timed
per form in the same run against a baseline that attends over exactly `valid` slots:

  mask        the boolean mask padded to N (what the static graph feeds)
  mask+nonpad the same mask and nonpad_kv_seqlen = valid
  nonpad      nonpad_kv_seqlen = valid and is_causal = 1, no mask
  exact       a cache of `valid` slots and its mask (the work the valid slots need)
  gqa_shared  com.microsoft GroupQueryAttention over the N-slot buffer bound as past and present
              (IOBinding, as onnxruntime-genai shares it), seqlens_k = valid - 1 (the cpu form)

    .venv/bin/python scripts/bench-static-attention.py [--n 2080] [--valid 128,2048] [--runs 200]
"""
import argparse
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

HEADS, KV_HEADS, HEAD = 14, 2, 64  # Qwen2.5-0.5B's attention


def session(mask: bool, nonpad: bool, causal: bool):
    inputs = ["q", "k", "v", "mask" if mask else "", "", "", "nonpad" if nonpad else ""]
    while inputs[-1] == "":
        inputs.pop()
    node = helper.make_node("Attention", inputs, ["y"], is_causal=int(causal))
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ["q", "k", "v"]]
    if mask:
        vi.append(helper.make_tensor_value_info("mask", TensorProto.BOOL, None))
    if nonpad:
        vi.append(helper.make_tensor_value_info("nonpad", TensorProto.INT64, None))
    graph = helper.make_graph([node], "attention", vi, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def gqa_session():
    names = ["q", "k", "v", "past_k", "past_v", "seqlens_k", "total"]
    types = {"seqlens_k": TensorProto.INT32, "total": TensorProto.INT32}
    node = helper.make_node("GroupQueryAttention", names, ["y", "present_k", "present_v"], domain="com.microsoft",
                            num_heads=HEADS, kv_num_heads=KV_HEADS)
    vi = [helper.make_tensor_value_info(n, types.get(n, TensorProto.FLOAT), None) for n in names]
    out = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ["y", "present_k", "present_v"]]
    model = helper.make_model(helper.make_graph([node], "gqa", vi, out),
                              opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def timed_gqa_shared(sess, q, k, v, past_k, past_v, valid, runs):
    """One decode step (the new row at slot valid - 1) with present bound to the past buffers."""
    io = sess.io_binding()
    io.bind_cpu_input("q", q.transpose(0, 2, 1, 3).reshape(1, 1, -1).copy())
    io.bind_cpu_input("k", k[:, :, :1].transpose(0, 2, 1, 3).reshape(1, 1, -1).copy())
    io.bind_cpu_input("v", v[:, :, :1].transpose(0, 2, 1, 3).reshape(1, 1, -1).copy())
    io.bind_cpu_input("seqlens_k", np.array([valid - 1], np.int32))
    io.bind_cpu_input("total", np.array(valid, np.int32))
    io.bind_output("y")
    for past, present, buf in [("past_k", "present_k", past_k), ("past_v", "present_v", past_v)]:
        value = ort.OrtValue.ortvalue_from_numpy(buf)
        io.bind_ortvalue_input(past, value)
        io.bind_ortvalue_output(present, value)
    for _ in range(5):
        sess.run_with_iobinding(io)
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run_with_iobinding(io)
        best = min(best, time.perf_counter() - t0)
    return best


def timed(sess, feeds, runs):
    for _ in range(5):
        sess.run(None, feeds)
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2080)
    ap.add_argument("--valid", default="128,2048")
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    q = rng.standard_normal([1, HEADS, 1, HEAD]).astype(np.float32)
    cache = lambda n: rng.standard_normal([1, KV_HEADS, n, HEAD]).astype(np.float32)
    k, v = cache(args.n), cache(args.n)
    for valid in [int(x) for x in args.valid.split(",")]:
        padded = np.zeros([1, 1, 1, args.n], bool)
        padded[..., :valid] = True
        nonpad = np.array([valid], np.int64)
        t = {
            "mask": timed(session(True, False, False), {"q": q, "k": k, "v": v, "mask": padded}, args.runs),
            "mask+nonpad": timed(session(True, True, False), {"q": q, "k": k, "v": v, "mask": padded, "nonpad": nonpad}, args.runs),
            "nonpad": timed(session(False, True, True), {"q": q, "k": k, "v": v, "nonpad": nonpad}, args.runs),
            "exact": timed(session(True, False, False), {"q": q, "k": k[:, :, :valid].copy(), "v": v[:, :, :valid].copy(),
                                                         "mask": np.ones([1, 1, 1, valid], bool)}, args.runs),
            "gqa_shared": timed_gqa_shared(gqa_session(), q, k, v, k.copy(), v.copy(), valid, args.runs),
        }
        line = " ".join(f"{name}={sec * 1e6:.1f}us" for name, sec in t.items())
        ratios = " ".join(f"{name}_vs_exact={sec / t['exact']:.2f}" for name, sec in t.items() if name != "exact")
        print(f"N={args.n} valid={valid} {line} {ratios}")


if __name__ == "__main__":
    main()
