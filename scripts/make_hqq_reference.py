"""Writes tests/fixtures/hqq_reference.safetensors: for every float decoder fixture, what ONNX
Runtime 1.32's HQQ quantizer (`MatMulNBitsQuantizer` with `HQQWeightOnlyQuantConfig(block_size=32,
bits=4)`) writes for each MatMul weight of our float cpu package of it: the packed codes, the
scales and the float zero points, keyed `<fixture>/<weight initializer>.{data,scales,zeros}`.
tests/tests/hqq.rs compares `--quant int4 --quant-method hqq` packages against them, and runs
both on ONNX Runtime.

Needs torch (the quantizer's solver is torch code): run once, not in CI, with a venv holding
`torch onnxruntime==1.32.0 onnx onnx_ir numpy safetensors`:
    TAILOR_BIN=target/debug/tailor python scripts/make_hqq_reference.py
"""
import os
import subprocess
import sys
import tempfile
import tomllib

import numpy as np
import onnx
from onnx import numpy_helper
from onnxruntime.quantization.matmul_nbits_quantizer import HQQWeightOnlyQuantConfig, MatMulNBitsQuantizer
from safetensors.numpy import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAILOR = os.environ.get("TAILOR_BIN", os.path.join(ROOT, "target", "debug", "tailor"))
BLOCK = 32

registry = tomllib.load(open(os.path.join(ROOT, "tests", "fixtures", "fixtures.toml"), "rb"))
fixtures = [f["name"] for f in registry["fixture"] if f["kind"] == "decoder"]
out = {}
with tempfile.TemporaryDirectory() as tmp:
    for name in fixtures:
        pkg = os.path.join(tmp, name)
        subprocess.run([TAILOR, "build", "--model", os.path.join(ROOT, "tests", "fixtures", name), "--output", pkg, "--ep", "cpu"],
                       check=True, capture_output=True)
        model = onnx.load(os.path.join(pkg, "model.onnx"))
        q = MatMulNBitsQuantizer(model, algo_config=HQQWeightOnlyQuantConfig(block_size=BLOCK, bits=4))
        q.process()
        graph = q.model.model.graph if hasattr(q.model, "model") else q.model.graph
        inits = {i.name: i for i in graph.initializer}
        count = 0
        for node in graph.node:
            if node.op_type != "MatMulNBits":
                continue
            data, scales, zeros = node.input[1], node.input[2], node.input[3]
            weight = data[: -len("_Q4")]
            out[f"{name}/{weight}.data"] = numpy_helper.to_array(inits[data])
            out[f"{name}/{weight}.scales"] = numpy_helper.to_array(inits[scales]).astype(np.float32)
            out[f"{name}/{weight}.zeros"] = numpy_helper.to_array(inits[zeros]).astype(np.float32)
            count += 1
        print(f"{name}: {count} weights", file=sys.stderr)
save_file(out, os.path.join(ROOT, "tests", "fixtures", "hqq_reference.safetensors"),
          metadata={"generator": "onnxruntime 1.32.0 MatMulNBitsQuantizer + HQQWeightOnlyQuantConfig(block_size=32, bits=4)",
                    "package": "tailor build --ep cpu (f32)"})
