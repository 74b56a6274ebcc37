#!/usr/bin/env python3
"""GGUF import benchmark (never run in CI): `tailor build --model FILE.gguf --ep cpu` against an
RTN int4 build of the same weights in the same form (a float checkpoint of the file's
dequantized weights, `--quant int4 --block-size 32 --asymmetric --quant-lm-head int8
--quant-embeddings int8`), same run: build wall time and peak RSS (`/usr/bin/time -v`), package
size, and decode tokens/s through onnxruntime-genai (128 prompt tokens, 32 new, greedy),
packages in the order a, b, b, a.

    .venv/bin/python scripts/bench-gguf.py TAILOR FILE.gguf FLOAT_CHECKPOINT WORKDIR

FLOAT_CHECKPOINT: config.json + model.safetensors of the dequantized weights, written by
scripts/gguf_float_checkpoint.py FILE.gguf FLOAT_CHECKPOINT (transformers' GGUF loader's state
dict; transformers refuses save_pretrained of a GGUF-loaded model)."""
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime_genai as og


def build(tailor, model, out, flags):
    shutil.rmtree(out, ignore_errors=True)
    cmd = ["/usr/bin/time", "-v", tailor, "build", "--model", str(model), "--output", str(out), "--ep", "cpu", *flags]
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    assert done.returncode == 0, done.stderr
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1)) / 1024
    size = sum(f.stat().st_size for f in Path(out).iterdir() if f.is_file()) / 1e6
    return wall, rss, size


def decode(pkg, prompt_len=128, new=32):
    model = og.Model(str(pkg))
    prompt = np.random.default_rng(0).integers(100, 40000, (1, prompt_len)).astype(np.int32)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=prompt_len + new, min_length=prompt_len + new, do_sample=False)
    gen = og.Generator(model, params)
    gen.append_tokens(prompt)
    t = time.perf_counter()
    while not gen.is_done():
        gen.generate_next_token()
    return new / (time.perf_counter() - t)


def main():
    tailor, gguf, float_ckpt, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    a, b = work / "gguf-import", work / "rtn-int4"
    print(f"file {gguf.stat().st_size / 1e6:.1f} MB")
    for name, model, out, flags in [
        ("GGUF import", gguf, a, []),
        ("RTN int4 of the float", float_ckpt, b, ["--quant", "int4", "--block-size", "32", "--asymmetric", "--quant-lm-head", "int8", "--quant-embeddings", "int8"]),
    ]:
        wall, rss, size = build(tailor, model, out, flags)
        print(f"{name}: build {wall:.2f} s, peak RSS {rss:.0f} MB, package {size:.1f} MB")
    rates = {a: [], b: []}
    for pkg in (a, b, b, a, a, b, b, a):
        rates[pkg].append(decode(pkg))
    for pkg, r in rates.items():
        print(f"{pkg.name}: decode tokens/s " + ", ".join(f"{x:.1f}" for x in r))


if __name__ == "__main__":
    main()
