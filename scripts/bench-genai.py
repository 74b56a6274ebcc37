#!/usr/bin/env python3
"""Decode benchmark (never run in CI): session-creation time, prefill time and decode tokens
per second through onnxruntime-genai for the `default` and `cpu` packages of the synthetic
Qwen2.5-0.5B-shaped checkpoint (128 prompt tokens, 32 new), in f32 and with `--quant int4`
(each table's defaults), reported as ratios measured in the same run.

    cargo build --release -p builder --bins
    .venv/bin/python scripts/bench-genai.py [--workdir /tmp/tailor-bench] [--runs 3] [--compare DIR] [--kv-cache] [--moe] [--vl]

`--kv-cache` measures the static KV cache instead (docs/benchmarks.md): decode tokens per second
of the `default` (standard form) and `cpu` (GroupQueryAttention form) f32 packages with
`--kv-cache static --max-length CONTEXT+NEW` against the dynamic `default` and `cpu` packages,
at each `--contexts` prompt length (default 128,2048), all in the same run, as ratios.

`--moe` measures mixture-of-experts decoders instead: tailor-bench's qwen3-moe-small,
gpt-oss-small (top 4) and phimoe-small (sparsemixer, top 2) shapes (32 experts each), whose
`default` package computes every expert densely and whose `cpu` package runs com.microsoft.MoE
(f32) and QMoE (`--quant int4`) where a rule fuses the block (PhiMoE's stays dense on every
table: docs/models.md): decode and prefill ratios of the cpu packages to the default one, per
shape, same run.

`--lora` measures LoRA slots (docs/adapters.md): a random PEFT adapter (r 16, alpha 32, on all
seven projections of every layer) for the Qwen2.5-0.5B shape, the cpu f32 package built with
`--lora` and run with no adapter bound and with it bound (og.Adapters), and the plain cpu f32
package, decode tokens per second in the same run, as ratios. `--bin-dir DIR` takes `tailor` and
`tailor-bench` from DIR (a debug build writes the same packages).

`--vl` measures a vision-language package instead: tailor-bench's qwen2.5-vl-small shape (the
Qwen2.5-0.5B decoder behind an 8-block, 640-wide window-attention vision tower) with the
tokenizer and processor files of the `tiny-qwen2_5_vl` fixture, a 448x448 image (256 image
tokens) in the fixture's chat prompt: per package (default f32, cpu f32, cpu int4) the
processor time, the image prefill (vision tower, embedding and decoder prefill: `set_inputs`
and the first token), the vision tower alone in ONNX Runtime, and decode tokens per second,
with the cpu/default and int4/f32 ratios of the same run. No anchor builds a whole VL package
(the onnxruntime-genai builder exports only the text decoder), so there is no anchor ratio.

`--hqq` measures `--quant-method hqq` against RTN (docs/quantization.md): the cpu int4 builds of
the Qwen2.5-0.5B shape with each method, timed as child processes (best wall time and worst peak
RSS of `--runs`), their package sizes and decode tokens per second, as hqq/RTN ratios of the same
run; `--decode-rounds N` adds N rounds of 64 decoded tokens with both packages loaded and
alternating, and prints the median and quartiles of the per-round HQQ/RTN ratios. With
`--nll-model DIR` (a float checkpoint with real weights, e.g. the SmolLM2 GGUF
dequantized, docs/quantization.md), it also builds that checkpoint float, RTN int4 and HQQ int4
(and HQQ with `--quant-lm-head int8`, which shares the table as RTN int8 does) and prints each
package's passage NLL (scripts/measure_nll.py's passage) less the float package's, and its size
over the RTN int4 package's.

`--compare DIR` measures one more package in the same run, e.g. the onnxruntime-genai builder's
int4 package of the same checkpoint (`python -m onnxruntime_genai.models.builder -i CKPT -o DIR
-p int4 -e cpu`, which needs torch: never in CI), and prints our cpu int4 package's ratios to it.
"""
import argparse
import os
import shutil
import subprocess
import sys
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime_genai as og

REPO = Path(__file__).resolve().parents[1]
RELEASE = REPO / "target" / "release"


def build(ckpt: Path, out: Path, ep: str, flags: list) -> None:
    cmd = [str(RELEASE / "tailor"), "build", "--model", str(ckpt), "--output", str(out),
           "--ep", ep, "--dtype", "f32", "--force", *flags]
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)


def load_time(pkg: Path, runs: int) -> float:
    """onnxruntime-genai open time (og.Model), min of `runs`; prints min and median with the
    plain ONNX Runtime session-creation time."""

    import onnxruntime as ort

    genai, session = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        model = og.Model(str(pkg))
        genai.append(time.perf_counter() - t0)
        del model
        t0 = time.perf_counter()
        sess = ort.InferenceSession(str(pkg / "model.onnx"), providers=["CPUExecutionProvider"])
        session.append(time.perf_counter() - t0)
        del sess
    print(f"  {pkg.name}: genai open min {min(genai) * 1000:.0f} ms median {statistics.median(genai) * 1000:.0f} ms; "
          f"ORT session min {min(session) * 1000:.0f} ms median {statistics.median(session) * 1000:.0f} ms")
    return min(genai)


def measure(pkg: Path, prompt: np.ndarray, new_tokens: int, runs: int, adapter: Path = None):
    model = og.Model(str(pkg))
    adapters = None
    if adapter is not None:
        adapters = og.Adapters(model)
        adapters.load(str(adapter), "bench")
    best_prefill, best_decode = float("inf"), 0.0
    for _ in range(runs):
        params = og.GeneratorParams(model)
        total = prompt.shape[1] + new_tokens
        params.set_search_options(max_length=total, min_length=total, do_sample=False)
        gen = og.Generator(model, params)
        if adapters is not None:
            gen.set_active_adapter(adapters, "bench")
        t0 = time.perf_counter()
        gen.append_tokens(prompt)  # runs the prefill
        t1 = time.perf_counter()
        for _ in range(new_tokens):
            gen.generate_next_token()
        t2 = time.perf_counter()
        best_prefill = min(best_prefill, t1 - t0)
        best_decode = max(best_decode, new_tokens / (t2 - t1))
    return best_prefill, best_decode


def timed_build(ckpt: Path, out: Path, ep: str, flags: list, runs: int):
    """Best wall time (s) and worst peak RSS (bytes) of `runs` builds, each from a removed
    output folder after a `sync` (as tailor-bench does).

    Peak RSS is what `/usr/bin/time` reports of its own child, not this process's `wait4` of
    a child it forked: Linux carries the forking process's peak into the child's `ru_maxrss`
    across exec, and this process holds onnxruntime-genai models (0.66 GiB "peak RSS" for an
    HQQ build measured after a decode run was this script's own memory)."""
    best, rss = float("inf"), 0
    for _ in range(runs):
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run(["sync"], check=False)
        with tempfile.NamedTemporaryFile("r") as report:
            cmd = ["/usr/bin/time", "-f", "%M", "-o", report.name,
                   str(RELEASE / "tailor"), "build", "--model", str(ckpt), "--output", str(out), "--ep", ep, "--dtype", "f32", *flags]
            t0 = time.perf_counter()
            done = subprocess.run(cmd, stderr=subprocess.DEVNULL)
            wall = time.perf_counter() - t0
            if done.returncode != 0:
                sys.exit(f"{cmd} failed")
            kib = int(report.read().split()[-1])
        best, rss = min(best, wall), max(rss, kib * 1024)
    return best, rss


def package_bytes(pkg: Path) -> int:
    return sum(f.stat().st_size for f in pkg.iterdir() if f.name.startswith("model.onnx"))


def hqq_main(args, ckpt: Path, work: Path) -> None:
    """HQQ against RTN, same run: build time, peak RSS, size, decode speed; NLL on real weights."""
    prompt = np.random.default_rng(0).integers(0, 151936, size=(1, 128), dtype=np.int32)
    res = {}
    for name, flags in [("rtn", ["--quant", "int4"]), ("hqq", ["--quant", "int4", "--quant-method", "hqq"])]:
        pkg = work / f"genai-{args.hqq_ep}-int4-{name}"
        secs, rss = timed_build(ckpt, pkg, args.hqq_ep, flags, args.runs)
        prefill, decode = measure(pkg, prompt, 32, args.runs)
        res[name] = (secs, rss, package_bytes(pkg), prefill, decode)
        print(f"{name}: build {secs:7.2f} s  peak RSS {rss / 2**30:6.3f} GiB  package {res[name][2] / 1e6:7.1f} MB  "
              f"prefill {prefill * 1000:7.1f} ms  decode {decode:6.2f} tokens/s")
    r, h = res["rtn"], res["hqq"]
    print(f"ep={args.hqq_ep} hqq_vs_rtn_build_time={h[0] / r[0]:.2f} hqq_vs_rtn_peak_rss={h[1] / r[1]:.3f} hqq_vs_rtn_size={h[2] / r[2]:.3f} "
          f"hqq_vs_rtn_decode={h[4] / r[4]:.3f} hqq_vs_rtn_prefill_speedup={r[3] / h[3]:.3f}")
    if args.decode_rounds:
        # Decode alone, the two packages alternating round by round (both loaded), so that a
        # slow spell of the machine hits both: the median of the per-round ratios.
        models = {name: og.Model(str(work / f"genai-{args.hqq_ep}-int4-{name}")) for name in ("rtn", "hqq")}
        ratios = []
        for i in range(args.decode_rounds):
            speed = {}
            for name in (("rtn", "hqq") if i % 2 == 0 else ("hqq", "rtn")):
                params = og.GeneratorParams(models[name])
                params.set_search_options(max_length=prompt.shape[1] + 64, min_length=prompt.shape[1] + 64, do_sample=False)
                gen = og.Generator(models[name], params)
                gen.append_tokens(prompt)
                t0 = time.perf_counter()
                for _ in range(64):
                    gen.generate_next_token()
                speed[name] = 64 / (time.perf_counter() - t0)
            ratios.append(speed["hqq"] / speed["rtn"])
        ratios.sort()
        print(f"hqq_vs_rtn_decode_interleaved median={statistics.median(ratios):.3f} "
              f"quartiles={ratios[len(ratios) // 4]:.3f}..{ratios[(3 * len(ratios)) // 4]:.3f} rounds={len(ratios)} (64 tokens each)")
    if args.nll_model is None:
        return
    sys.path.insert(0, str(REPO / "scripts"))
    import measure_nll

    cases = [("float", []), ("rtn", ["--quant", "int4"]), ("hqq", ["--quant", "int4", "--quant-method", "hqq"]),
             ("hqq-head-int8", ["--quant", "int4", "--quant-method", "hqq", "--quant-lm-head", "int8", "--quant-embeddings", "int8"]),
             ("hqq-head-none", ["--quant", "int4", "--quant-method", "hqq", "--quant-lm-head", "none", "--quant-embeddings", "none"])]
    nll, size = {}, {}
    for name, flags in cases:
        pkg = work / f"nll-{name}"
        build(args.nll_model, pkg, "cpu", flags)
        nll[name], size[name] = measure_nll.nll(pkg), package_bytes(pkg)
        print(f"{name}: NLL {nll[name]:.4f}  package {size[name] / 1e6:.1f} MB")
    print(" ".join(f"{n}_nll_minus_float={nll[n] - nll['float']:.4f} {n}_size_vs_rtn={size[n] / size['rtn']:.3f}" for n, _ in cases[1:]))


def kv_cache_main(args, ckpt: Path, work: Path) -> None:
    """Static vs dynamic KV cache decode speed at each context length, same run."""
    new_tokens = 32
    for context in [int(c) for c in args.contexts.split(",")]:
        prompt = np.random.default_rng(0).integers(0, 151936, size=(1, context), dtype=np.int32)
        n = context + new_tokens
        static = ["--kv-cache", "static", "--max-length", str(n)]
        cases = [("default", "dynamic", []), ("default", "static", static), ("cpu", "dynamic", []), ("cpu", "static", static)]
        speed = {}
        for ep, form, flags in cases:
            pkg = work / f"genai-{ep}-f32-{form}-{context}"
            build(ckpt, pkg, ep, flags)
            prefill, decode = measure(pkg, prompt, new_tokens, args.runs)
            speed[(ep, form)] = decode
            print(f"context {context:5d} {ep:8s} {form:7s}: prefill {prefill * 1000:9.1f} ms   decode {decode:6.2f} tokens/s")
            shutil.rmtree(pkg)
        s, d, c, g = speed[("default", "static")], speed[("default", "dynamic")], speed[("cpu", "dynamic")], speed[("cpu", "static")]
        print(f"context={context} max_length={n} static_vs_dynamic_decode={s / d:.2f} static_vs_cpu_gqa_decode={s / c:.2f} "
              f"cpu_static_gqa_vs_cpu_gqa_decode={g / c:.2f} "
              f"static_tok_s={s:.2f} dynamic_tok_s={d:.2f} cpu_gqa_tok_s={c:.2f} cpu_static_gqa_tok_s={g:.2f}")


def moe_main(args, work: Path) -> None:
    """cpu (fused MoE, QMoE where a rule fuses the block) vs default (dense experts), per MoE
    shape, the cpu/default ratios measured in the same run."""
    prompt = np.random.default_rng(0).integers(0, 32768, size=(1, 128), dtype=np.int32)
    for shape in ["qwen3-moe-small", "gpt-oss-small", "phimoe-small"]:
        ckpt = Path(subprocess.run([str(RELEASE / "tailor-bench"), "--model", shape, "--workdir", str(work), "--write-only"],
                                   check=True, capture_output=True, text=True).stdout.strip())
        speed = {}
        for ep, name, flags in [("default", "f32", []), ("cpu", "f32", []), ("cpu", "int4", ["--quant", "int4"])]:
            pkg = work / f"genai-moe-{shape}-{ep}-{name}"
            build(ckpt, pkg, ep, flags)
            ops = moe_ops(pkg)
            prefill, decode = measure(pkg, prompt, 32, args.runs)
            speed[(ep, name)] = (prefill, decode)
            print(f"moe {shape:16s} {ep:8s} {name}: prefill {prefill * 1000:8.1f} ms   decode {decode:6.2f} tokens/s   ({ops})")
            shutil.rmtree(pkg)
        d, c, q = speed[("default", "f32")], speed[("cpu", "f32")], speed[("cpu", "int4")]
        print(f"shape={shape} moe_cpu_vs_default_decode={c[1] / d[1]:.2f} moe_cpu_vs_default_prefill_speedup={d[0] / c[0]:.2f} "
              f"moe_cpu_int4_vs_default_decode={q[1] / d[1]:.2f} moe_cpu_int4_vs_cpu_f32_decode={q[1] / c[1]:.2f} "
              f"default_tok_s={d[1]:.2f} cpu_tok_s={c[1]:.2f} cpu_int4_tok_s={q[1]:.2f}")
        shutil.rmtree(ckpt)


def write_peft_adapter(ckpt: Path, out: Path, r: int = 16, alpha: int = 32) -> None:
    """A random PEFT LoRA adapter on every projection of every layer of the checkpoint."""
    import json

    from safetensors import safe_open
    from safetensors.numpy import save_file

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    tensors = {}
    projections = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    files = sorted(ckpt.glob("*.safetensors"))
    for f in files:
        with safe_open(str(f), "np") as st:
            for key in st.keys():
                module = key.removesuffix(".weight")
                if key.endswith(".weight") and module.rsplit(".", 1)[-1] in projections:
                    n, k = st.get_slice(key).get_shape()
                    tensors[f"base_model.model.{module}.lora_A.weight"] = (rng.standard_normal((r, k)) * 0.01).astype(np.float32)
                    tensors[f"base_model.model.{module}.lora_B.weight"] = (rng.standard_normal((n, r)) * 0.01).astype(np.float32)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    config = {"peft_type": "LORA", "r": r, "lora_alpha": alpha, "target_modules": list(projections), "bias": "none",
              "use_rslora": False, "use_dora": False, "fan_in_fan_out": False, "rank_pattern": {}, "alpha_pattern": {}}
    (out / "adapter_config.json").write_text(json.dumps(config))


def lora_main(args, ckpt: Path, work: Path) -> None:
    """The base package with empty slots, with an adapter bound, and the plain package."""
    adapter = work / "bench-lora"
    write_peft_adapter(ckpt, adapter)
    prompt = np.random.default_rng(0).integers(0, 151936, size=(1, 128), dtype=np.int32)
    plain, slots = work / "genai-cpu-f32-plain", work / "genai-cpu-f32-lora"
    build(ckpt, plain, "cpu", [])
    build(ckpt, slots, "cpu", ["--lora", f"bench={adapter}"])
    speed = {}
    # Interleaved, so a neighbour's load on the machine hits every case alike.
    for _ in range(args.runs):
        for name, pkg, a in [("plain", plain, None), ("slots, none bound", slots, None), ("slots, adapter bound", slots, slots / "adapters" / "bench.onnx_adapter")]:
            prefill, decode = measure(pkg, prompt, 32, 1, a)
            p0, d0 = speed.get(name, (float("inf"), 0.0))
            speed[name] = (min(p0, prefill), max(d0, decode))
    for name, (prefill, decode) in speed.items():
        print(f"cpu f32 {name:22s}: prefill {prefill * 1000:8.1f} ms   decode {decode:6.2f} tokens/s")
    p, n, b = speed["plain"][1], speed["slots, none bound"][1], speed["slots, adapter bound"][1]
    print(f"empty_slots_vs_plain_decode={n / p:.3f} adapter_bound_vs_plain_decode={b / p:.3f} plain_tok_s={p:.2f} none_tok_s={n:.2f} bound_tok_s={b:.2f}")
    shutil.rmtree(plain)
    shutil.rmtree(slots)


def write_png(path: Path, side: int) -> None:
    """An RGB test picture (smooth gradients and a checker pattern) as a plain PNG, written
    with zlib so the benchmark needs no imaging library."""
    import struct
    import zlib

    y, x = np.mgrid[0:side, 0:side]
    rgb = np.stack([(x * 255 // side), (y * 255 // side), ((x // 32 + y // 32) % 2) * 200 + 20], axis=-1).astype(np.uint8)
    raw = b"".join(b"\x00" + row.tobytes() for row in rgb)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def vl_main(args, work: Path) -> None:
    """A Qwen2.5-VL package: image prefill and decode speed per (EP, dtype), same run."""
    import json

    import onnxruntime as ort

    ckpt = Path(subprocess.run([str(RELEASE / "tailor-bench"), "--model", "qwen2.5-vl-small", "--workdir", str(work), "--write-only"],
                               check=True, capture_output=True, text=True).stdout.strip())
    fixture = REPO / "tests" / "fixtures" / "tiny-qwen2_5_vl"
    for name in ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"]:
        shutil.copy(fixture / name, ckpt / name)
    side = 448
    processor = json.loads((fixture / "processor_config.json").read_text())
    processor["image_processor"]["size"]["longest_edge"] = side * side  # max_pixels: the whole picture, 256 tokens
    (ckpt / "processor_config.json").write_text(json.dumps(processor, indent=2))
    image = work / "bench-image.png"
    write_png(image, side)
    prompt = json.loads((fixture / "reference.json").read_text())["prompt"]
    new_tokens = 32
    speed = {}
    for ep, name, flags in [("default", "f32", []), ("cpu", "f32", []), ("cpu", "int4", ["--quant", "int4"])]:
        pkg = work / f"genai-vl-{ep}-{name}"
        build(ckpt, pkg, ep, flags)
        model = og.Model(str(pkg))
        proc = model.create_multimodal_processor()
        best = (float("inf"), float("inf"), 0.0)
        for _ in range(args.runs):
            t0 = time.perf_counter()
            inputs = proc(prompt, images=og.Images.open(str(image)))
            t1 = time.perf_counter()
            total = inputs["input_ids"].as_numpy().shape[-1] + new_tokens
            params = og.GeneratorParams(model)
            params.set_search_options(do_sample=False, max_length=total, min_length=total, batch_size=1)
            gen = og.Generator(model, params)
            t2 = time.perf_counter()
            gen.set_inputs(inputs)
            gen.generate_next_token()
            t3 = time.perf_counter()
            for _ in range(new_tokens - 1):
                gen.generate_next_token()
            t4 = time.perf_counter()
            best = (min(best[0], t1 - t0), min(best[1], t3 - t2), max(best[2], (new_tokens - 1) / (t4 - t3)))
        pixels = inputs["pixel_values"].as_numpy()
        grid = inputs["image_grid_thw"].as_numpy()
        tokens = int(inputs["num_image_tokens"].as_numpy().reshape(-1)[0])
        sess = ort.InferenceSession(str(pkg / "vision.onnx"), providers=["CPUExecutionProvider"])
        feeds = {"pixel_values": pixels.astype(np.float32), "image_grid_thw": grid.astype(np.int64)}
        feeds = {i.name: feeds[i.name] for i in sess.get_inputs()}
        vision = float("inf")
        for _ in range(args.runs):
            t0 = time.perf_counter()
            sess.run(None, feeds)
            vision = min(vision, time.perf_counter() - t0)
        del sess, gen, model
        speed[(ep, name)] = (best[1], best[2], vision)
        print(f"vl {ep:8s} {name}: {tokens} image tokens, {pixels.shape[0]} patches   processor {best[0] * 1000:7.1f} ms   "
              f"image prefill {best[1] * 1000:8.1f} ms (vision tower alone {vision * 1000:7.1f} ms)   decode {best[2]:6.2f} tokens/s")
        shutil.rmtree(pkg)
    d, c, q = speed[("default", "f32")], speed[("cpu", "f32")], speed[("cpu", "int4")]
    print(f"vl_cpu_vs_default_prefill_speedup={d[0] / c[0]:.2f} vl_cpu_vs_default_vision_speedup={d[2] / c[2]:.2f} "
          f"vl_cpu_vs_default_decode={c[1] / d[1]:.2f} vl_cpu_int4_vs_cpu_f32_decode={q[1] / c[1]:.2f} "
          f"vl_cpu_int4_vs_cpu_f32_prefill_speedup={c[0] / q[0]:.2f} "
          f"default_prefill_ms={d[0] * 1000:.0f} cpu_prefill_ms={c[0] * 1000:.0f} cpu_int4_prefill_ms={q[0] * 1000:.0f} "
          f"default_tok_s={d[1]:.2f} cpu_tok_s={c[1]:.2f} cpu_int4_tok_s={q[1]:.2f}")


def moe_ops(pkg: Path) -> str:
    """How the package computes its experts: the count of MoE / QMoE nodes."""
    import onnx

    model = onnx.load(str(pkg / "model.onnx"), load_external_data=False)
    ops = [n.op_type for n in model.graph.node]
    return f"{ops.count('MoE')} MoE, {ops.count('QMoE')} QMoE nodes"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default="/tmp/tailor-bench")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compare", type=Path, default=None, help="another package to measure in the same run")
    ap.add_argument("--kv-cache", action="store_true", help="static vs dynamic KV cache decode speed instead")
    ap.add_argument("--contexts", default="128,2048", help="prompt lengths for --kv-cache")
    ap.add_argument("--moe", action="store_true", help="a mixture-of-experts shape: cpu (MoE, QMoE) vs default (dense) instead")
    ap.add_argument("--vl", action="store_true", help="a vision-language package (Qwen2.5-VL shape): image prefill and decode")
    ap.add_argument("--lora", action="store_true", help="LoRA slots: none bound, an adapter bound, and the plain package")
    ap.add_argument("--hqq", action="store_true", help="--quant-method hqq vs RTN: build time, peak RSS, size, decode speed")
    ap.add_argument("--nll-model", type=Path, default=None, help="with --hqq: a float checkpoint with real weights for the NLL check")
    ap.add_argument("--decode-rounds", type=int, default=0, help="with --hqq: this many decode rounds of 64 tokens, RTN and HQQ alternating")
    ap.add_argument("--hqq-ep", default="cpu", help="with --hqq: the EP table of both builds (cpu: MatMulNBits; default: DequantizeLinear, which ONNX Runtime's CPU EP fuses into MatMulNBits)")
    ap.add_argument("--bin-dir", type=Path, default=None, help="where tailor and tailor-bench are (default target/release)")
    args = ap.parse_args()
    global RELEASE
    if args.bin_dir is not None:
        RELEASE = args.bin_dir
    work = Path(args.workdir)
    if not (RELEASE / "tailor").exists() or not (RELEASE / "tailor-bench").exists():
        sys.exit("build first: cargo build --release -p builder --bins")
    if args.moe:
        moe_main(args, work)
        return
    if args.vl:
        vl_main(args, work)
        return
    ckpt = Path(subprocess.run([str(RELEASE / "tailor-bench"), "--workdir", str(work), "--write-only"],
                               check=True, capture_output=True, text=True).stdout.strip())
    if args.kv_cache:
        kv_cache_main(args, ckpt, work)
        return
    if args.lora:
        lora_main(args, ckpt, work)
        return
    if args.hqq:
        hqq_main(args, ckpt, work)
        return
    prompt = np.random.default_rng(0).integers(0, 151936, size=(1, 128), dtype=np.int32)
    results = {}
    cases = [("default", "f32", []), ("cpu", "f32", []), ("default", "int4", ["--quant", "int4"]), ("cpu", "int4", ["--quant", "int4"])]
    for ep, name, flags in cases:
        pkg = work / f"genai-{ep}-{name}"
        build(ckpt, pkg, ep, flags)
        load = load_time(pkg, args.runs)
        prefill, decode = measure(pkg, prompt, 32, args.runs)
        results[(ep, name)] = (prefill, decode, load)
        print(f"{ep:8s} {name}: load {load * 1000:7.0f} ms   prefill {prefill * 1000:8.1f} ms   decode {decode:6.2f} tokens/s")
    if args.compare:
        load = load_time(args.compare, args.runs)
        prefill, decode = measure(args.compare, prompt, 32, args.runs)
        results[("compare", "")] = (prefill, decode, load)
        print(f"compare {args.compare}: load {load * 1000:7.0f} ms   prefill {prefill * 1000:8.1f} ms   decode {decode:6.2f} tokens/s")
    d, c = results[("default", "f32")], results[("cpu", "f32")]
    di, ci = results[("default", "int4")], results[("cpu", "int4")]
    print(f"cpu_vs_default_prefill_speedup={d[0] / c[0]:.2f} cpu_vs_default_decode_speedup={c[1] / d[1]:.2f} "
          f"default_prefill_ms={d[0] * 1000:.0f} cpu_prefill_ms={c[0] * 1000:.0f} "
          f"default_tok_s={d[1]:.2f} cpu_tok_s={c[1]:.2f}")
    print(f"cpu_int4_vs_cpu_f32_decode={ci[1] / c[1]:.2f} default_int4_vs_cpu_f32_decode={di[1] / c[1]:.2f} "
          f"cpu_int4_vs_cpu_f32_prefill_speedup={c[0] / ci[0]:.2f} cpu_int4_vs_cpu_f32_load_speedup={c[2] / ci[2]:.2f} "
          f"cpu_int4_tok_s={ci[1]:.2f} default_int4_tok_s={di[1]:.2f} cpu_int4_load_ms={ci[2] * 1000:.0f} cpu_f32_load_ms={c[2] * 1000:.0f}")
    if args.compare:
        x = results[("compare", "")]
        print(f"cpu_int4_vs_compare_decode={ci[1] / x[1]:.2f} default_int4_vs_compare_decode={di[1] / x[1]:.2f} "
              f"cpu_int4_vs_compare_prefill_speedup={x[0] / ci[0]:.2f} cpu_int4_vs_compare_load_speedup={x[2] / ci[2]:.2f}")

if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    main()
